/* target.c - see target.h. */
#include "cli/target.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/files.h"
#include "core/lacks.h"
#include "os/path.h"

/* Where `make install` puts the runtimes, from the installed bin/luamcp. */
#define INSTALLED_RUNTIMES "/../share/luamcp/runtimes/"
/* Every luamcp runtime holds its bundle trailer's format (bundle.h) as
 * text, whatever its platform spells PRIu64 as: a file without it is not a
 * runtime that could read the bundle appended to it. */
#define RUNTIME_MARK "luamcp-bundle/%u payload="

/* linux-x64 is the fully static runtime (make build/luamcp-static), not
 * build/luamcp: a program for "Linux x86-64" should run on any of them, not
 * only on those with this machine's glibc or newer. */
const build_target TARGETS[TARGET_COUNT] = {
    {"linux-x64", "linux", EXE_ELF, EXE_X86_64, "", "x86_64|amd64", "luamcp-static", "make build/luamcp-static"},
    {"linux-arm64", "linux", EXE_ELF, EXE_AARCH64, "", "aarch64|arm64|armv8*", "linux-arm64/luamcp",
     "make linux-arm64"},
    {"windows-x64", "win32", EXE_PE, EXE_X86_64, ".exe", NULL, "windows/luamcp.exe", "make windows"},
};

const build_target *target_find(const char *name) {
  for (size_t i = 0; i < TARGET_COUNT; i++)
    if (strcmp(TARGETS[i].name, name) == 0) return &TARGETS[i];
  return NULL;
}

/* exe_reader over a file read whole: a runtime is read whole anyway, and
 * this needs nothing but the C library (no pread on Windows). */
static bool read_from_buf(void *file, void *into, size_t len, uint64_t offset) {
  const buf *b = file;
  if (offset > b->len || len > b->len - offset) return false;
  memcpy(into, b->data + offset, len);
  return true;
}

/* The executable at path, read whole into bytes, its headers in info;
 * false with the reason in err. */
static bool read_executable(const char *path, buf *bytes, exe_info *info, buf *err) {
  if (!files_read(path, bytes, err)) return false;
  buf why = BUF_INIT;
  bool ok = exe_inspect(read_from_buf, bytes, info, &why);
  if (!ok) buf_printf(err, "%s: %s", path, why.data);
  buf_free(&why);
  return ok;
}

/* Whether text occurs in b (memmem is not in every C library). */
static bool contains(const buf *b, const char *text) {
  size_t n = strlen(text);
  for (const char *p = b->data, *end = b->data + b->len; end - p >= (ptrdiff_t)n; p++) {
    p = memchr(p, text[0], (size_t)(end - p));
    if (!p || end - p < (ptrdiff_t)n) return false;
    if (memcmp(p, text, n) == 0) return true;
  }
  return false;
}

static bool matches(const build_target *t, const exe_info *info) {
  return t->format == info->format && t->machine == info->machine;
}

const build_target *target_of_file(const char *path) {
  exe_info info;
  buf bytes = BUF_INIT, ignored = BUF_INIT;
  bool ok = read_executable(path, &bytes, &info, &ignored);
  buf_free(&bytes);
  buf_free(&ignored);
  for (size_t i = 0; ok && i < TARGET_COUNT; i++)
    if (matches(&TARGETS[i], &info)) return &TARGETS[i];
  return NULL;
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *target_find_runtime(const build_target *t, const char *self, buf *err) {
  /* The folder by the platform's separators (C:\bin\luamcp.exe on Windows). */
  char *dir = os_path_dir(self);
  buf installed = BUF_INIT, beside = BUF_INIT;
  buf_printf(&installed, "%s" INSTALLED_RUNTIMES "%s/luamcp%s", dir, t->name, t->suffix);
  buf_printf(&beside, "%s/%s", dir, t->dev_runtime);
  free(dir);
  char *found = NULL;
  if (is_file(installed.data)) found = buf_detach(&installed, NULL);
  else if (is_file(beside.data)) found = buf_detach(&beside, NULL);
  else if (*self && target_of_file(self) == t) found = strdup(self);
  else
    buf_printf(err,
               "no luamcp runtime for %s: looked for %s (make install puts it there) and %s (a development tree); "
               "build it with `%s` in luamcp's source tree, then `make install`, or name one with --runtime FILE",
               t->name, installed.data, beside.data, t->make_hint);
  buf_free(&installed);
  buf_free(&beside);
  return found;
}

bool target_read_runtime(const char *path, const build_target *t, buf *into, buf *err) {
  exe_info info;
  if (!read_executable(path, into, &info, err)) return false;
  bool ok = false;
  buf what = BUF_INIT, wanted = BUF_INIT;
  exe_describe(&info, &what);
  if (t) exe_describe(&(exe_info){.format = t->format, .machine = t->machine}, &wanted);
  if (t && !matches(t, &info)) {
    buf_printf(err, "%s: %s, not a runtime for %s (%s)", path, what.data, t->name, wanted.data);
  } else if (info.image_size > into->len) {
    buf_printf(err, "%s: shorter than its own headers say (%s): it was cut short", path, what.data);
  } else {
    into->len = (size_t)info.image_size; /* a built program given as the runtime loses its bundle */
    ok = contains(into, RUNTIME_MARK);
    if (!ok)
      buf_printf(err, "%s: %s, but not a luamcp runtime (a luamcp executable holds the bundle format's text, \"%s\")",
                 path, what.data, RUNTIME_MARK);
  }
  buf_free(&what);
  buf_free(&wanted);
  return ok;
}

void target_runtime_lacks(const buf *runtime, target_lack_fn fn, void *data) {
  exe_info info;
  buf ignored = BUF_INIT;
  bool known = exe_inspect(read_from_buf, (void *)runtime, &info, &ignored);
  buf_free(&ignored);
  if (!known) return;
  const size_t mark_len = strlen(LACKS_MARK);
  const char *end = runtime->data + runtime->len;
  for (const char *p = runtime->data; p && end - p > (ptrdiff_t)mark_len;) {
    p = memchr(p, LACKS_MARK[0], (size_t)(end - p));
    if (!p || end - p <= (ptrdiff_t)mark_len) return;
    if (memcmp(p, LACKS_MARK, mark_len) != 0) {
      p++;
      continue;
    }
    /* WHEN:API:WHY up to its NUL. The mark alone (this very search's text,
     * in every runtime) has nothing after it, and is no entry. */
    const char *entry = p + mark_len;
    const char *nul = memchr(entry, '\0', (size_t)(end - entry));
    if (!nul) return;
    p = nul;
    char *text = strndup(entry, (size_t)(nul - entry));
    char *api = strchr(text, ':');
    char *why = api ? strchr(api + 1, ':') : NULL;
    if (why) {
      *api++ = '\0', *why++ = '\0';
      bool applies = strcmp(text, LACKS_ALWAYS) == 0 ||
                     (strcmp(text, LACKS_IF_STATIC) == 0 && !info.loads_shared_libraries);
      if (applies && *api) fn(api, why, data);
    }
    free(text);
  }
}
