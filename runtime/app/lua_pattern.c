/* lua_pattern.c - Lua 5.4 patterns with a step budget. See lua_pattern.h.
 *
 * The pattern language is the one the Lua 5.4 manual (section 6.4.1)
 * describes: single-character classes (., %a %c %d %g %l %p %s %u %w %x and
 * their upper-case complements, %x for a non-alphanumeric x, [set] and
 * [^set] with ranges and classes), the quantifiers * + - ?, captures (and
 * position captures ()), back-references %1-%9, %bxy and %f[set], and ^ and
 * $ anchors. Matching backtracks like Lua's does, so results, captures and
 * error messages are the same; the difference is that it counts its steps.
 */
#include "app/lua_pattern.h"

#include <ctype.h>
#include <lauxlib.h>
#include <stdbool.h>
#include <string.h>

#include "core/luamcp_limits.h"

/* How deep matching may recurse: Lua's MAXCCALLS, so that "pattern too
 * complex" comes at the same point. */
enum { MAX_MATCH_DEPTH = 200 };
/* Captures in one pattern: Lua's MAX_CAPTURES. */
enum { MAX_CAPTURES = 32 };
/* A capture's length while open, or for a position capture. */
enum { CAPTURE_OPEN = -1, CAPTURE_POSITION = -2 };
#define ESCAPE '%'
#define SPECIALS "^$*+?.([%-"

static pattern_interrupt_fn interrupt_check;

/* One match of a pattern against a subject. Lives on the C stack of the
 * string function using it; nothing in it is allocated. */
typedef struct matcher {
  lua_State *L;
  const char *subject, *subject_end;
  const char *pattern_end;
  int depth_left;
  unsigned steps;
  int level; /* captures started */
  struct {
    const char *start;
    ptrdiff_t len; /* or CAPTURE_OPEN / CAPTURE_POSITION */
  } capture[MAX_CAPTURES];
} matcher;

static void step(matcher *m) {
  if (++m->steps % PATTERN_STEPS_PER_CHECK == 0 && interrupt_check) interrupt_check(m->L);
}

/* ---- Single characters -------------------------------------------------- */

/* Whether c is in the class named by letter (%a, %d, ... or %A, %D, ...);
 * any other letter stands for itself. */
static bool in_class(int c, int letter) {
  bool in;
  switch (tolower(letter)) {
    case 'a': in = isalpha(c); break;
    case 'c': in = iscntrl(c); break;
    case 'd': in = isdigit(c); break;
    case 'g': in = isgraph(c); break;
    case 'l': in = islower(c); break;
    case 'p': in = ispunct(c); break;
    case 's': in = isspace(c); break;
    case 'u': in = isupper(c); break;
    case 'w': in = isalnum(c); break;
    case 'x': in = isxdigit(c); break;
    case 'z': in = c == 0; break; /* deprecated since Lua 5.2, still in 5.4 */
    default: return letter == c;
  }
  return isupper(letter) ? !in : in;
}

/* Whether c is in the set from open ('[') to close (its ']'). */
static bool in_set(int c, const char *open, const char *close) {
  const char *p = open + 1;
  bool negated = *p == '^';
  if (negated) p++;
  /* The first character is a member even when it is ']' (close says where
   * the set really ends). */
  for (; p < close; p++) {
    if (*p == ESCAPE) {
      p++;
      if (in_class(c, (unsigned char)*p)) return !negated;
    } else if (p[1] == '-' && p + 2 < close) {
      if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2]) return !negated;
      p += 2;
    } else if ((unsigned char)*p == c) {
      return !negated;
    }
  }
  return negated;
}

/* Where the single-character class starting at p ends. */
static const char *class_end(matcher *m, const char *p) {
  char first = *p++;
  if (first == ESCAPE) {
    if (p == m->pattern_end) luaL_error(m->L, "malformed pattern (ends with '%%')");
    return p + 1;
  }
  if (first == '[') {
    if (*p == '^') p++;
    /* At least one character, then up to the first ']' not escaped. The
     * pattern is a Lua string: *pattern_end is its terminating '\0'. */
    do {
      if (p == m->pattern_end) luaL_error(m->L, "malformed pattern (missing ']')");
      char c = *p++;
      if (c == ESCAPE && p < m->pattern_end) p++;
    } while (*p != ']');
    return p + 1;
  }
  return p;
}

/* Whether the subject character at s is in the class from p to end. */
static bool single_match(matcher *m, const char *s, const char *p, const char *end) {
  if (s >= m->subject_end) return false;
  int c = (unsigned char)*s;
  switch (*p) {
    case '.': return true;
    case ESCAPE: return in_class(c, (unsigned char)p[1]);
    case '[': return in_set(c, p, end - 1);
    default: return (unsigned char)*p == c;
  }
}

/* ---- Matching ------------------------------------------------------------ */

static const char *match(matcher *m, const char *s, const char *p);

/* %bxy at p (pointing at x): a balanced run from x to its y. */
static const char *match_balanced(matcher *m, const char *s, const char *p) {
  if (p + 1 >= m->pattern_end) luaL_error(m->L, "malformed pattern (missing arguments to '%%b')");
  if (s >= m->subject_end || *s != p[0]) return NULL;
  char open = p[0], close = p[1];
  int depth = 1;
  while (++s < m->subject_end) {
    step(m);
    if (*s == close) {
      if (--depth == 0) return s + 1;
    } else if (*s == open) {
      depth++;
    }
  }
  return NULL;
}

/* Greedy: as many as the class takes, then give back one at a time. */
static const char *match_greedy(matcher *m, const char *s, const char *p, const char *end) {
  ptrdiff_t n = 0;
  while (single_match(m, s + n, p, end)) {
    n++;
    step(m);
  }
  for (; n >= 0; n--) {
    const char *rest = match(m, s + n, end + 1);
    if (rest) return rest;
  }
  return NULL;
}

/* Lazy ('-'): as few as the rest of the pattern allows. */
static const char *match_lazy(matcher *m, const char *s, const char *p, const char *end) {
  for (;;) {
    const char *rest = match(m, s, end + 1);
    if (rest) return rest;
    if (!single_match(m, s, p, end)) return NULL;
    s++;
  }
}

static const char *open_capture(matcher *m, const char *s, const char *p, ptrdiff_t kind) {
  if (m->level >= MAX_CAPTURES) luaL_error(m->L, "too many captures");
  m->capture[m->level].start = s;
  m->capture[m->level].len = kind;
  m->level++;
  const char *rest = match(m, s, p);
  if (!rest) m->level--;
  return rest;
}

static const char *close_capture(matcher *m, const char *s, const char *p) {
  int open = m->level - 1;
  while (open >= 0 && m->capture[open].len != CAPTURE_OPEN) open--;
  if (open < 0) luaL_error(m->L, "invalid pattern capture");
  m->capture[open].len = s - m->capture[open].start;
  const char *rest = match(m, s, p);
  if (!rest) m->capture[open].len = CAPTURE_OPEN;
  return rest;
}

/* %1 .. %9: the text of an earlier, closed capture again. */
static const char *match_backreference(matcher *m, const char *s, int digit) {
  int i = digit - '1';
  if (i < 0 || i >= m->level || m->capture[i].len == CAPTURE_OPEN)
    luaL_error(m->L, "invalid capture index %%%d", i + 1);
  ptrdiff_t len = m->capture[i].len;
  if (len < 0) return NULL; /* a position capture has no text to repeat */
  if (m->subject_end - s >= len && memcmp(m->capture[i].start, s, (size_t)len) == 0) return s + len;
  return NULL;
}

/* The end of a match of pattern p at subject position s, or NULL. */
static const char *match(matcher *m, const char *s, const char *p) {
  if (m->depth_left-- == 0) luaL_error(m->L, "pattern too complex");
  step(m);
  while (p != m->pattern_end) {
    if (*p == '(') {
      if (p + 1 < m->pattern_end && p[1] == ')') s = open_capture(m, s, p + 2, CAPTURE_POSITION);
      else s = open_capture(m, s, p + 1, CAPTURE_OPEN);
      goto done;
    }
    if (*p == ')') {
      s = close_capture(m, s, p + 1);
      goto done;
    }
    if (*p == '$' && p + 1 == m->pattern_end) {
      if (s != m->subject_end) s = NULL;
      goto done;
    }
    if (*p == ESCAPE && p[1] == 'b') {
      s = match_balanced(m, s, p + 2);
      if (!s) goto done;
      p += 4;
      continue;
    }
    if (*p == ESCAPE && p[1] == 'f') {
      p += 2;
      if (*p != '[') luaL_error(m->L, "missing '[' after '%%f' in pattern");
      const char *end = class_end(m, p);
      int before = s == m->subject ? '\0' : (unsigned char)s[-1];
      int at = s < m->subject_end ? (unsigned char)*s : '\0';
      if (in_set(before, p, end - 1) || !in_set(at, p, end - 1)) {
        s = NULL;
        goto done;
      }
      p = end;
      continue;
    }
    if (*p == ESCAPE && isdigit((unsigned char)p[1])) {
      s = match_backreference(m, s, (unsigned char)p[1]);
      if (!s) goto done;
      p += 2;
      continue;
    }
    /* A single-character class, perhaps with a quantifier. */
    const char *end = class_end(m, p);
    char quantifier = end < m->pattern_end ? *end : '\0';
    if (!single_match(m, s, p, end)) {
      if (quantifier == '*' || quantifier == '?' || quantifier == '-') { /* zero of them is fine */
        p = end + 1;
        continue;
      }
      s = NULL;
      goto done;
    }
    switch (quantifier) {
      case '?': {
        const char *rest = match(m, s + 1, end + 1);
        if (rest) {
          s = rest;
          goto done;
        }
        p = end + 1;
        continue;
      }
      case '+': s = match_greedy(m, s + 1, p, end); goto done;
      case '*': s = match_greedy(m, s, p, end); goto done;
      case '-': s = match_lazy(m, s, p, end); goto done;
      default: s++; p = end; continue;
    }
  }
done:
  m->depth_left++;
  return s;
}

/* ---- Captures ------------------------------------------------------------ */

/* Capture i of the match from s to e (the whole match when there are no
 * captures and i is 0). Returns its length, or CAPTURE_POSITION after
 * pushing the position. */
static ptrdiff_t get_capture(matcher *m, int i, const char *s, const char *e, const char **text) {
  if (i >= m->level) {
    if (i != 0) luaL_error(m->L, "invalid capture index %%%d", i + 1);
    *text = s;
    return e - s;
  }
  ptrdiff_t len = m->capture[i].len;
  *text = m->capture[i].start;
  if (len == CAPTURE_OPEN) luaL_error(m->L, "unfinished capture");
  if (len == CAPTURE_POSITION) lua_pushinteger(m->L, (m->capture[i].start - m->subject) + 1);
  return len;
}

static void push_capture(matcher *m, int i, const char *s, const char *e) {
  const char *text;
  ptrdiff_t len = get_capture(m, i, s, e, &text);
  if (len != CAPTURE_POSITION) lua_pushlstring(m->L, text, (size_t)len);
}

/* Push the captures (or the whole match when there are none and s is not
 * NULL); returns how many. */
static int push_captures(matcher *m, const char *s, const char *e) {
  int n = m->level == 0 && s ? 1 : m->level;
  luaL_checkstack(m->L, n, "too many captures");
  for (int i = 0; i < n; i++) push_capture(m, i, s, e);
  return n;
}

static void matcher_init(matcher *m, lua_State *L, const char *s, size_t ls, const char *p, size_t lp) {
  m->L = L;
  m->subject = s;
  m->subject_end = s + ls;
  m->pattern_end = p + lp;
  m->steps = 0;
}

/* Before each attempt at a new position. */
static void matcher_reset(matcher *m) {
  m->level = 0;
  m->depth_left = MAX_MATCH_DEPTH;
}

/* ---- The string functions -------------------------------------------------- */

/* A start position argument (1-based, negative from the end) as a 0-based
 * offset; may be past the end. */
static size_t start_offset(lua_Integer pos, size_t len) {
  if (pos > 0) return (size_t)pos - 1;
  if (pos == 0) return 0;
  if (pos < -(lua_Integer)len) return 0;
  return (size_t)((lua_Integer)len + pos);
}

static bool has_specials(const char *p, size_t lp) {
  for (size_t i = 0; i < lp; i++)
    if (p[i] && strchr(SPECIALS, p[i])) return true;
  return false;
}

static const char *find_plain(const char *s, size_t ls, const char *p, size_t lp) {
  if (lp == 0) return s;
  if (lp > ls) return NULL;
  return memmem(s, ls, p, lp);
}

static int find_or_match(lua_State *L, bool find) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  size_t init = start_offset(luaL_optinteger(L, 3, 1), ls);
  if (init > ls) {
    luaL_pushfail(L);
    return 1;
  }
  if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
    const char *at = find_plain(s + init, ls - init, p, lp);
    if (at) {
      lua_pushinteger(L, (at - s) + 1);
      lua_pushinteger(L, (lua_Integer)((at - s) + lp));
      return 2;
    }
    luaL_pushfail(L);
    return 1;
  }
  bool anchored = lp > 0 && *p == '^';
  if (anchored) {
    p++;
    lp--;
  }
  matcher m;
  matcher_init(&m, L, s, ls, p, lp);
  const char *from = s + init;
  do {
    matcher_reset(&m);
    const char *e = match(&m, from, p);
    if (e) {
      if (find) {
        lua_pushinteger(L, (from - s) + 1);
        lua_pushinteger(L, e - s);
        return push_captures(&m, NULL, NULL) + 2;
      }
      return push_captures(&m, from, e);
    }
  } while (from++ < m.subject_end && !anchored);
  luaL_pushfail(L);
  return 1;
}

static int pattern_find(lua_State *L) { return find_or_match(L, true); }
static int pattern_match(lua_State *L) { return find_or_match(L, false); }

/* The state of a gmatch iterator (a userdata, its upvalue 3). The subject
 * and pattern are upvalues 1 and 2, which keep the pointers valid. */
typedef struct gmatch_state {
  const char *next;       /* where the next attempt starts */
  const char *last_match; /* end of the last match: an empty match there is skipped */
  matcher m;
} gmatch_state;

static int gmatch_next(lua_State *L) {
  gmatch_state *g = lua_touserdata(L, lua_upvalueindex(3));
  g->m.L = L; /* the iterator may run on another coroutine than gmatch did */
  for (const char *from = g->next; from <= g->m.subject_end; from++) {
    matcher_reset(&g->m);
    const char *e = match(&g->m, from, lua_tostring(L, lua_upvalueindex(2)));
    if (e && e != g->last_match) {
      g->next = g->last_match = e;
      return push_captures(&g->m, from, e);
    }
  }
  return 0;
}

static int pattern_gmatch(lua_State *L) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  size_t init = start_offset(luaL_optinteger(L, 3, 1), ls);
  if (init > ls) init = ls + 1; /* past the end: no matches */
  lua_settop(L, 2);
  gmatch_state *g = lua_newuserdatauv(L, sizeof *g, 0);
  matcher_init(&g->m, L, s, ls, p, lp);
  g->next = s + init;
  g->last_match = NULL;
  lua_pushcclosure(L, gmatch_next, 3);
  return 1;
}

/* gsub: the replacement string, with %0-%9 and %%. */
static void add_replacement_string(matcher *m, luaL_Buffer *b, const char *s, const char *e) {
  lua_State *L = m->L;
  size_t len;
  const char *r = lua_tolstring(L, 3, &len);
  const char *esc;
  while ((esc = memchr(r, ESCAPE, len))) {
    luaL_addlstring(b, r, (size_t)(esc - r));
    esc++; /* the replacement is a Lua string: a final '%' is followed by '\0' */
    if (*esc == ESCAPE) {
      luaL_addchar(b, ESCAPE);
    } else if (*esc == '0') {
      luaL_addlstring(b, s, (size_t)(e - s));
    } else if (isdigit((unsigned char)*esc)) {
      const char *text;
      ptrdiff_t n = get_capture(m, *esc - '1', s, e, &text);
      if (n == CAPTURE_POSITION) luaL_addvalue(b);
      else luaL_addlstring(b, text, (size_t)n);
    } else {
      luaL_error(L, "invalid use of '%c' in replacement string", ESCAPE);
    }
    len -= (size_t)(esc + 1 - r);
    r = esc + 1;
  }
  luaL_addlstring(b, r, len);
}

/* gsub: add the replacement of the match from s to e. Returns whether the
 * text changed (false keeps the match when a function or table gives false
 * or nil). */
static bool add_replacement(matcher *m, luaL_Buffer *b, const char *s, const char *e, int kind) {
  lua_State *L = m->L;
  if (kind == LUA_TFUNCTION) {
    lua_pushvalue(L, 3);
    int n = push_captures(m, s, e);
    lua_call(L, n, 1);
  } else if (kind == LUA_TTABLE) {
    push_capture(m, 0, s, e);
    lua_gettable(L, 3);
  } else {
    add_replacement_string(m, b, s, e);
    return true;
  }
  if (!lua_toboolean(L, -1)) {
    lua_pop(L, 1);
    luaL_addlstring(b, s, (size_t)(e - s));
    return false;
  }
  if (!lua_isstring(L, -1)) return luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
  luaL_addvalue(b);
  return true;
}

static int pattern_gsub(lua_State *L) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  int kind = lua_type(L, 3);
  lua_Integer max = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
  luaL_argexpected(L, kind == LUA_TNUMBER || kind == LUA_TSTRING || kind == LUA_TFUNCTION || kind == LUA_TTABLE, 3,
                   "string/function/table");
  bool anchored = lp > 0 && *p == '^';
  if (anchored) {
    p++;
    lp--;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  matcher m;
  matcher_init(&m, L, s, ls, p, lp);
  const char *from = s, *last_match = NULL;
  lua_Integer n = 0;
  bool changed = false;
  while (n < max) {
    matcher_reset(&m);
    const char *e = match(&m, from, p);
    if (e && e != last_match) {
      n++;
      changed = add_replacement(&m, &b, from, e, kind) || changed;
      from = last_match = e;
    } else if (from < m.subject_end) {
      luaL_addchar(&b, *from++);
    } else {
      break;
    }
    if (anchored) break;
  }
  if (!changed) {
    lua_pushvalue(L, 1);
  } else {
    luaL_addlstring(&b, from, (size_t)(m.subject_end - from));
    luaL_pushresult(&b);
  }
  lua_pushinteger(L, n);
  return 2;
}

void lua_pattern_install(lua_State *L, pattern_interrupt_fn interrupt) {
  interrupt_check = interrupt;
  static const luaL_Reg functions[] = {
      {"find", pattern_find}, {"match", pattern_match}, {"gmatch", pattern_gmatch}, {"gsub", pattern_gsub}, {NULL, NULL}};
  luaL_setfuncs(L, functions, 0);
}
