/*
 * build.c - `luamcp build`: check a script folder by loading it exactly as
 * `luamcp run` does, append it to a copy of the runtime as a bundle (the
 * format is in bundle.h), and optionally wrap the result with a manifest
 * into an MCP Bundle (.mcpb) that Claude Desktop installs in one click.
 *
 * The .mcpb is a deflated ZIP of manifest.json, server/OUT and, with an
 * icon, icon.png. Each mcp.server{config} setting (lua/mcp/config.lua)
 * becomes a user_config entry and an environment variable in
 * server.mcp_config.env, "API_KEY": "${user_config.api_key}": the host
 * replaces the placeholder with what the user entered, or leaves it as it
 * is when the user entered nothing (mcpb's getMcpConfigForManifest), which
 * build_unset_unfilled_settings undoes at start-up.
 */
#include "cli/build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lauxlib.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "core/ignore.h"
#include "core/json.h"
#include "cli/files.h"
#include "cli/loaded.h"
#include "cli/suggest.h"
#include "cli/version.h"
#include "app/vm.h"
#include "core/zip.h"
#include "cli/target.h"
#include "os/path.h"
#include "os/self.h"

/* After the last separator of the platform's ('\\' too on Windows). */
static const char *base_name(const char *path) {
  const char *base = path;
  for (const char *p = path; *p; p++)
    if (os_path_is_separator(*p)) base = p + 1;
  return base;
}

/* The MCPB manifest version written: github.com/modelcontextprotocol/mcpb,
 * MANIFEST.md. */
#define MCPB_MANIFEST_VERSION "0.3"
/* Where the executable goes inside the .mcpb, as in the spec's examples. */
#define MCPB_SERVER_DIR "server/"
/* Where --icon goes inside the .mcpb, as in the spec's examples. */
#define MCPB_ICON_NAME "icon.png"
/* How mcp_config.env names a user_config value: PREFIX KEY "}". */
#define MCPB_PLACEHOLDER_PREFIX "${user_config."
/* Every PNG file starts with these 8 bytes (PNG spec, 5.2). */
#define PNG_SIGNATURE "\x89PNG\r\n\x1a\n"
/* A .mcpb holding several Linux architectures starts this POSIX sh script,
 * server/NAME, which picks server/linux-ARCH/NAME by `uname -m`: MCPB's
 * platform_overrides are keyed by OS (win32, darwin, linux), never by CPU. */
#define LAUNCHER_SHELL "/bin/sh"
/* Subfolders followed below the script folder (symbolic links can loop). */
#define MAX_FOLDER_DEPTH 32

typedef struct build_options {
  const char *path;
  const char *out;           /* NULL: a default name, allowed with --target */
  const char *mcpb;          /* NULL: no .mcpb */
  const char *runtime;       /* NULL: this program, or the --target's runtime */
  /* --target, in the order given; none: this machine's program, as always */
  const build_target *targets[TARGET_COUNT];
  size_t target_count;
  const char *target_runtime[TARGET_COUNT]; /* --runtime TARGET=FILE, by TARGETS index */
  bool bytecode, strip;
  bool static_runtime;       /* --static: runtime is luamcp-static next to this program */
  bool strict;               /* --strict: refuse, not warn, when a runtime lacks what the scripts use */
  /* manifest.json fields that override mcp.server{} */
  const char *name, *version, *description, *author, *license;
  const char *icon; /* --icon: a PNG file (from the working directory) or an https:// URL */
  /* luamcp release: every program goes to INTO/NAME-TARGET and the .mcpb
   * to INTO/NAME.mcpb, NAME the manifest's name, whatever the targets */
  const char *into_dir;
} build_options;

/* One file of the script folder. Owner: its file_list. */
typedef struct source_file {
  char *name;      /* path inside the folder, '/' between parts */
  char *disk_path; /* PATH/name, spelled as luamcp run spells it in errors */
  buf data;        /* the bytes that go into the bundle */
} source_file;

/* Owner: build_command; file_list_free releases the files. */
typedef struct file_list {
  source_file *files;
  size_t count, cap;
} file_list;

/* One registered prompt, for manifest.json. Owner: its server_facts. */
typedef struct prompt_fact {
  char *name, *description, *text;
  size_t argument_count;
  char **arguments; /* the names only: the manifest says no more */
} prompt_fact;

/* One mcp.server{config} setting, for manifest.json. Owner: its
 * server_facts. The fields come as JSON text from lua/mcp/config.lua, which
 * checked them and puts them in the manifest's order. */
typedef struct config_fact {
  char *key, *env;
  size_t field_count;
  char **field_names, **field_json;
} config_fact;

/* What the bundle and manifest.json say about the server, from
 * mcp.server{}, the registered tools and prompts, and the flags. Owner:
 * build_command; every string is malloc'ed (NULL when absent). */
typedef struct server_facts {
  char *default_name; /* what the server is called when mcp.server{} names none */
  char *name, *title, *version, *description, *license, *icon;
  char *permissions; /* mcp.server{permissions} in one line, or NULL (unconfined) */
  char *author_name, *author_email, *author_url;
  size_t tool_count;
  char **tool_names, **tool_descriptions;
  size_t prompt_count;
  prompt_fact *prompts;
  size_t config_count;
  config_fact *config;
  /* The Lua modules the scripts loaded through package.path (lfs's kind
   * refused already): module name and file, dep_count of each. */
  size_t dep_count;
  char **dep_modules, **dep_files;
  /* The library's fields the scripts name ("mcp.http"), sorted: what a
   * runtime may lack (mcp.build_scan's library_uses). */
  size_t use_count;
  char **uses;
} server_facts;

static void usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "luamcp: build: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nRun 'luamcp build --help' for usage.\n");
  exit(2);
}

void build_usage(FILE *to) {
  fprintf(to,
          "Usage: luamcp build PATH [-o OUT] [options]\n"
          "       luamcp build PATH --target TARGET[,...] [-o OUT] [--mcpb FILE] [options]\n"
          "\n"
          "Write OUT: one executable holding this runtime and the script folder PATH (every\n"
          "file in it, subfolders included; hidden files and what PATH/.luamcpignore lists\n"
          "left out), and the pure-Lua modules the scripts load from package.path (LUA_PATH:\n"
          "penlight, dkjson, ...; a Lua C module is refused). OUT serves the scripts on\n"
          "stdio when run with no arguments, and takes the options of 'luamcp run'\n"
          "(--http, --trace, ...). 'OUT --bundle-info' lists what it carries.\n"
          "\n"
          ".luamcpignore: one pattern a line, as in .gitignore: spec/ (a folder), README.md\n"
          "(that name anywhere), docs/img*.png (a path from the top), * ? **, !NAME to keep\n"
          "one back, # comments.\n"
          "\n"
          "Options:\n"
          "  -o, --output OUT       the executable to write (default: NAME, the folder's name,\n"
          "                         in the working directory, or PATH/NAME when a folder\n"
          "                         has that name there; with --target, NAME-TARGET; with\n"
          "                         several targets, OUT-TARGET each; windows-x64 adds .exe)\n"
          "  --target TARGET        make the program for linux-x64, linux-arm64 or\n"
          "                         windows-x64, from any platform: that platform's runtime\n"
          "                         with the scripts appended. Repeat it, or separate\n"
          "                         targets with commas, for several (--mcpb: one bundle\n"
          "                         for all). The runtime is --runtime, else the installed\n"
          "                         PREFIX/share/luamcp/runtimes/TARGET/luamcp[.exe] (make\n"
          "                         install), else the one a source tree builds beside\n"
          "                         build/luamcp (make windows, make linux-arm64,\n"
          "                         make build/luamcp-static), else this program when it\n"
          "                         is for TARGET\n"
          "  --bytecode             store scripts as Lua bytecode instead of source\n"
          "  --strip                with --bytecode: leave out debug information\n"
          "                         (smaller; errors lose file names and line numbers)\n"
          "  --mcpb FILE            also write an MCP Bundle for Claude Desktop: a zip of\n"
          "                         manifest.json, OUT and the icon\n"
          "  --name NAME            manifest name (default: mcp.server{} name, else the folder's)\n"
          "  --version VERSION      manifest version (default: mcp.server{} version, else 0.0.0)\n"
          "  --description TEXT     manifest description (default: mcp.server{} description\n"
          "                         or title)\n"
          "  --author NAME          manifest author (default: mcp.server{} author, a name or\n"
          "                         { name, email, url }); the manifest requires one\n"
          "  --license NAME         manifest license, e.g. MIT (default: mcp.server{} license)\n"
          "  --icon FILE            a PNG, packed as icon.png (default: mcp.server{} icon: a\n"
          "                         PNG in the script folder, or an https:// URL)\n"
          "  --runtime FILE         use FILE (another luamcp executable, e.g. a static build)\n"
          "                         as the runtime instead of this one; its header must be\n"
          "                         for the target (ELF x86-64 or aarch64, PE x86-64).\n"
          "                         TARGET=FILE names the runtime of one of several targets\n"
          "  --static               the same as --runtime with luamcp-static next to this\n"
          "                         program (make build/luamcp-static)\n"
          "  --strict               refuse to write a program whose runtime lacks what the\n"
          "                         scripts use (mcp.http where libcurl cannot be loaded,\n"
          "                         ...); without it, build warns and writes it\n"
          "\n"
          "The .mcpb is deflated. Its manifest.json lists the tools and prompts the scripts\n"
          "register, and mcp.server{} config as user_config: Claude Desktop asks the user\n"
          "for each setting and passes it in an environment variable named by the key in\n"
          "upper case (api_key: API_KEY, read with os.getenv(\"API_KEY\")). With several\n"
          "targets, the .mcpb holds server/TARGET/OUT for each, declares every platform,\n"
          "and starts the right one on each (platform_overrides); two Linux architectures\n"
          "share server/OUT, a sh script that picks one by `uname -m`.\n");
}

/* --target LIST: names separated by commas, each once. */
static void add_targets(build_options *o, const char *list) {
  const char *p = list;
  for (;;) {
    size_t len = strcspn(p, ",");
    char *name = strndup(p, len);
    const build_target *t = target_find(name);
    if (!t) {
      buf why = BUF_INIT;
      buf_printf(&why, "unknown target \"%s\" (targets:", name);
      for (size_t i = 0; i < TARGET_COUNT; i++) buf_printf(&why, " %s", TARGETS[i].name);
      buf_puts(&why, ")");
      usage_error("%s", why.data);
    }
    for (size_t k = 0; k < o->target_count; k++)
      if (o->targets[k] == t) usage_error("--target %s is given twice", t->name);
    o->targets[o->target_count++] = t;
    free(name);
    if (!p[len]) break;
    p += len + 1;
  }
}

/* --runtime TARGET=FILE: true when value has that form (a known target's
 * name before '='), which it records. */
static bool runtime_for_target(build_options *o, const char *value) {
  const char *eq = strchr(value, '=');
  for (size_t i = 0; eq && i < TARGET_COUNT; i++) {
    if ((size_t)(eq - value) == strlen(TARGETS[i].name) && strncmp(value, TARGETS[i].name, (size_t)(eq - value)) == 0) {
      o->target_runtime[i] = eq + 1;
      return true;
    }
  }
  return false;
}

static void parse_build_options(int argc, char **argv, build_options *o) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    const char **text_option = NULL;
    if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) text_option = &o->out;
    else if (strcmp(a, "--mcpb") == 0) text_option = &o->mcpb;
    else if (strcmp(a, "--runtime") == 0) text_option = &o->runtime;
    else if (strcmp(a, "--name") == 0) text_option = &o->name;
    else if (strcmp(a, "--version") == 0) text_option = &o->version;
    else if (strcmp(a, "--description") == 0) text_option = &o->description;
    else if (strcmp(a, "--author") == 0) text_option = &o->author;
    else if (strcmp(a, "--license") == 0) text_option = &o->license;
    else if (strcmp(a, "--icon") == 0) text_option = &o->icon;
    if (text_option) {
      if (!value) usage_error("%s needs a value", a);
      if (text_option != &o->runtime || !runtime_for_target(o, value)) *text_option = value;
      i++;
    } else if (strcmp(a, "--target") == 0) {
      if (!value) usage_error("%s needs a value", a);
      add_targets(o, value);
      i++;
    } else if (strcmp(a, "--bytecode") == 0) {
      o->bytecode = true;
    } else if (strcmp(a, "--strip") == 0) {
      o->strip = true;
    } else if (strcmp(a, "--strict") == 0) {
      o->strict = true;
    } else if (strcmp(a, "--static") == 0) {
      static char static_path[PATH_MAX];
      bool found = os_self_exe(NULL, static_path, sizeof static_path);
      char *base = found ? (char *)base_name(static_path) : NULL;
      if (!base || base == static_path) usage_error("%s: cannot tell where this program is", a);
      snprintf(base, sizeof static_path - (size_t)(base - static_path), "luamcp-static");
      o->runtime = static_path;
      o->static_runtime = true;
    } else if (a[0] == '-' && a[1]) {
      buf message = BUF_INIT;
      buf_printf(&message, "unknown option %s%s", a, suggest_option(a, build_usage));
      usage_error("%s", message.data);
    } else if (!o->path) {
      o->path = a;
    } else {
      usage_error("unexpected argument %s (one script file or folder)", a);
    }
  }
  if (!o->path) usage_error("%s", "build needs a script file or folder");
  if (o->strip && !o->bytecode) usage_error("%s", "--strip applies to --bytecode");
  if (o->runtime && o->target_count > 1)
    usage_error("--runtime %s: with several --target, say whose runtime it is: --runtime TARGET=FILE", o->runtime);
  for (size_t i = 0; i < TARGET_COUNT; i++) {
    bool asked = false;
    for (size_t k = 0; k < o->target_count; k++) asked = asked || o->targets[k] == &TARGETS[i];
    if (o->target_runtime[i] && !asked)
      usage_error("--runtime %s=...: that target is not one of the --target given", TARGETS[i].name);
  }
}

/* ---- The script folder ------------------------------------------------ */

static void file_list_free(file_list *list) {
  for (size_t i = 0; i < list->count; i++) {
    free(list->files[i].name);
    free(list->files[i].disk_path);
    buf_free(&list->files[i].data);
  }
  free(list->files);
}

static bool add_file(file_list *list, const char *name, const char *disk_path, buf *err) {
  if (list->count == list->cap) {
    list->cap = list->cap ? list->cap * 2 : 16;
    list->files = realloc(list->files, list->cap * sizeof *list->files);
  }
  source_file *f = &list->files[list->count++];
  *f = (source_file){.name = strdup(name), .disk_path = strdup(disk_path), .data = BUF_INIT};
  return files_read(disk_path, &f->data, err);
}

/* The files OUT and the .mcpb replace are never part of the bundle, so
 * building into the script folder twice does not pack the first result. */
typedef struct skip_list {
  struct stat files[TARGET_COUNT + 1];
  int count;
} skip_list;

static bool skipped(const skip_list *skip, const struct stat *st) {
  for (int i = 0; i < skip->count; i++)
    if (skip->files[i].st_dev == st->st_dev && skip->files[i].st_ino == st->st_ino) return true;
  return false;
}

/* Every file under disk_dir (the folder's subfolder rel, "" at the top),
 * hidden ones left out, as luamcp run leaves them out of a folder. */
static bool collect_folder(file_list *list, const char *disk_dir, const char *rel, const skip_list *skip,
                           const ignore_list *ignore, int depth, buf *err) {
  if (depth > MAX_FOLDER_DEPTH) {
    buf_printf(err, "%s: folders nested more than %d deep (a symbolic link loop?)", disk_dir, MAX_FOLDER_DEPTH);
    return false;
  }
  DIR *d = opendir(disk_dir);
  if (!d) {
    buf_printf(err, "%s: cannot read the folder: %s", disk_dir, strerror(errno));
    return false;
  }
  bool ok = true;
  struct dirent *e;
  while (ok && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char *disk_path = malloc(strlen(disk_dir) + strlen(e->d_name) + 2);
    char *name = malloc(strlen(rel) + strlen(e->d_name) + 2);
    sprintf(disk_path, "%s/%s", disk_dir, e->d_name);
    sprintf(name, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
    struct stat st;
    if (stat(disk_path, &st) != 0 || skipped(skip, &st) || ignore_list_match(ignore, name, S_ISDIR(st.st_mode))) {
      /* a dangling link, the output itself, or what .luamcpignore lists */
    } else if (S_ISDIR(st.st_mode)) {
      ok = collect_folder(list, disk_path, name, skip, ignore, depth + 1, err);
    } else if (S_ISREG(st.st_mode)) {
      ok = add_file(list, name, disk_path, err);
    }
    free(disk_path);
    free(name);
  }
  closedir(d);
  return ok;
}

/* PATH/.luamcpignore, when there is one (ignore.h says what it holds). */
static bool read_ignore_file(const char *dir, ignore_list *ignore, buf *err) {
  buf path = BUF_INIT, text = BUF_INIT;
  buf_printf(&path, "%s/" IGNORE_FILE_NAME, dir);
  struct stat st;
  bool ok = stat(path.data, &st) != 0 || files_read(path.data, &text, err);
  if (ok && text.len) ignore_list_parse(ignore, text.data, text.len);
  buf_free(&path);
  buf_free(&text);
  return ok;
}

static int compare_source_files(const void *a, const void *b) {
  return strcmp(((const source_file *)a)->name, ((const source_file *)b)->name);
}

static bool is_lua_name(const char *name) {
  size_t len = strlen(name);
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  return len >= 4 && strcmp(name + len - 4, ".lua") == 0 && strlen(base) > 4;
}

/* What luaL_loadfilex skips and luaL_loadbufferx does not: a UTF-8 byte
 * order mark, and a first line starting with '#' (a #! line), which
 * becomes empty so that line numbers stay the same. */
static void drop_file_preamble(buf *data) {
  if (data->len >= 3 && memcmp(data->data, "\xEF\xBB\xBF", 3) == 0) buf_consume(data, 3);
  if (data->len > 0 && data->data[0] == '#') {
    char *nl = memchr(data->data, '\n', data->len);
    buf_consume(data, nl ? (size_t)(nl - data->data) : data->len);
  }
}

static int append_to_buf(lua_State *L, const void *p, size_t n, void *ud) {
  (void)L;
  buf_append(ud, p, n);
  return 0;
}

/* Compile every *.lua file, in subfolders too, so that a broken module
 * fails the build and not its first require; with --bytecode, replace the
 * source by what lua_dump writes. */
static bool compile_scripts(file_list *list, const build_options *o, buf *err) {
  lua_State *L = luaL_newstate();
  bool ok = true;
  for (size_t i = 0; ok && i < list->count; i++) {
    source_file *f = &list->files[i];
    if (!is_lua_name(f->name)) continue;
    drop_file_preamble(&f->data);
    const char *disk_chunkname = lua_pushfstring(L, "@%s", f->disk_path);
    if (luaL_loadbufferx(L, f->data.data ? f->data.data : "", f->data.len, disk_chunkname, "bt") != LUA_OK) {
      buf_append_str(err, lua_tostring(L, -1));
      ok = false;
    } else if (o->bytecode && !(f->data.len && f->data.data[0] == LUA_SIGNATURE[0])) {
      /* Compiled again under the name the bundle gives it (vm.c), which
       * the bytecode keeps for error messages unless stripped. */
      lua_settop(L, 0);
      const char *bundle_chunkname = lua_pushfstring(L, "@bundle/%s", f->name);
      if (luaL_loadbufferx(L, f->data.data, f->data.len, bundle_chunkname, "t") != LUA_OK) {
        buf_append_str(err, lua_tostring(L, -1));
        ok = false;
      } else {
        buf code = BUF_INIT;
        lua_dump(L, append_to_buf, &code, o->strip);
        buf_free(&f->data);
        f->data = code;
      }
    }
    lua_settop(L, 0);
  }
  lua_close(L);
  return ok;
}

/* ---- What the scripts register ---------------------------------------- */

static char *string_at(lua_State *L, int table, const char *key) {
  lua_getfield(L, table, key);
  char *s = lua_type(L, -1) == LUA_TSTRING ? strdup(lua_tostring(L, -1)) : NULL;
  lua_pop(L, 1);
  return s;
}

/* The strings of the array at index, malloc'ed; *count set. */
static char **strings_at(lua_State *L, int index, size_t *count) {
  *count = (size_t)lua_rawlen(L, index);
  char **out = calloc(*count + 1, sizeof *out);
  for (size_t i = 0; i < *count; i++) {
    lua_rawgeti(L, index, (lua_Integer)i + 1);
    out[i] = strdup(lua_tostring(L, -1) ? lua_tostring(L, -1) : "");
    lua_pop(L, 1);
  }
  return out;
}

/* manifest.prompts: what mcp._manifest() says of each prompt. The manifest
 * requires a text, the prompt's template; a luamcp prompt's messages come
 * from its get function at run time, so the text is its description (else
 * title, else name). */
static void read_prompt_facts(lua_State *L, int prompts, server_facts *facts) {
  facts->prompt_count = (size_t)lua_rawlen(L, prompts);
  facts->prompts = calloc(facts->prompt_count + 1, sizeof *facts->prompts);
  for (size_t i = 0; i < facts->prompt_count; i++) {
    prompt_fact *p = &facts->prompts[i];
    lua_rawgeti(L, prompts, (lua_Integer)i + 1);
    int prompt = lua_gettop(L);
    p->name = string_at(L, prompt, "name");
    p->description = string_at(L, prompt, "description");
    p->text = p->description ? strdup(p->description) : string_at(L, prompt, "title");
    if (!p->text) p->text = strdup(p->name);
    lua_getfield(L, prompt, "arguments");
    p->arguments = strings_at(L, lua_gettop(L), &p->argument_count);
    lua_settop(L, prompt - 1);
  }
}

/* manifest.user_config: mcp._manifest()'s entries, { key, env, fields =
 * { {name, JSON text}, ... } }. */
static void read_config_facts(lua_State *L, int entries, server_facts *facts) {
  facts->config_count = (size_t)lua_rawlen(L, entries);
  facts->config = calloc(facts->config_count + 1, sizeof *facts->config);
  for (size_t i = 0; i < facts->config_count; i++) {
    config_fact *c = &facts->config[i];
    lua_rawgeti(L, entries, (lua_Integer)i + 1);
    int entry = lua_gettop(L);
    c->key = string_at(L, entry, "key");
    c->env = string_at(L, entry, "env");
    lua_getfield(L, entry, "fields");
    int fields = lua_gettop(L);
    c->field_count = (size_t)lua_rawlen(L, fields);
    c->field_names = calloc(c->field_count + 1, sizeof(char *));
    c->field_json = calloc(c->field_count + 1, sizeof(char *));
    for (size_t f = 0; f < c->field_count; f++) {
      lua_rawgeti(L, fields, (lua_Integer)f + 1);
      lua_rawgeti(L, -1, 1);
      lua_rawgeti(L, -2, 2);
      c->field_names[f] = strdup(lua_tostring(L, -2));
      c->field_json[f] = strdup(lua_tostring(L, -1));
      lua_pop(L, 3);
    }
    lua_settop(L, entry - 1);
  }
}

/* Ask the loaded library: mcp.core.default_name() and mcp._manifest(). */
static bool read_server_facts(vm *v, server_facts *facts, buf *err) {
  lua_State *L = v->L;
  int base = lua_gettop(L);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "loaded");
  int loaded = lua_gettop(L);
  lua_getfield(L, loaded, "mcp.core");
  lua_getfield(L, -1, "default_name");
  if (lua_pcall(L, 0, 1, 0) != LUA_OK) goto failed;
  facts->default_name = strdup(lua_tostring(L, -1) ? lua_tostring(L, -1) : "luamcp");
  lua_getfield(L, loaded, "mcp");
  lua_getfield(L, -1, "_manifest");
  if (lua_pcall(L, 0, 1, 0) != LUA_OK) goto failed;
  int manifest = lua_gettop(L);
  facts->permissions = string_at(L, manifest, "permissions");
  lua_getfield(L, manifest, "server");
  int server = lua_gettop(L);
  facts->name = string_at(L, server, "name");
  facts->title = string_at(L, server, "title");
  facts->version = string_at(L, server, "version");
  facts->description = string_at(L, server, "description");
  facts->license = string_at(L, server, "license");
  facts->icon = string_at(L, server, "icon");
  lua_getfield(L, server, "author");
  if (lua_type(L, -1) == LUA_TSTRING) {
    facts->author_name = strdup(lua_tostring(L, -1));
  } else if (lua_type(L, -1) == LUA_TTABLE) {
    int author = lua_gettop(L);
    facts->author_name = string_at(L, author, "name");
    facts->author_email = string_at(L, author, "email");
    facts->author_url = string_at(L, author, "url");
  }
  lua_settop(L, manifest);
  lua_getfield(L, manifest, "tools");
  int tools = lua_gettop(L);
  facts->tool_count = (size_t)lua_rawlen(L, tools);
  facts->tool_names = calloc(facts->tool_count + 1, sizeof(char *));
  facts->tool_descriptions = calloc(facts->tool_count + 1, sizeof(char *));
  for (size_t i = 0; i < facts->tool_count; i++) {
    lua_rawgeti(L, tools, (lua_Integer)i + 1);
    facts->tool_names[i] = string_at(L, -1, "name");
    facts->tool_descriptions[i] = string_at(L, -1, "description");
    lua_pop(L, 1);
  }
  lua_settop(L, manifest);
  lua_getfield(L, manifest, "prompts");
  read_prompt_facts(L, lua_gettop(L), facts);
  lua_settop(L, manifest);
  lua_getfield(L, manifest, "user_config");
  read_config_facts(L, lua_gettop(L), facts);
  lua_settop(L, base);
  return true;
failed:
  buf_printf(err, "reading the server's description: %s", lua_tostring(L, -1));
  lua_settop(L, base);
  return false;
}

static void free_strings(char **list, size_t count) {
  for (size_t i = 0; list && i < count; i++) free(list[i]);
  free(list);
}

static void server_facts_free(server_facts *f) {
  char **strings[] = {&f->default_name, &f->name, &f->title, &f->version, &f->description, &f->license,
                      &f->icon, &f->permissions, &f->author_name, &f->author_email, &f->author_url};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) free(*strings[i]);
  free_strings(f->tool_names, f->tool_count);
  free_strings(f->tool_descriptions, f->tool_count);
  for (size_t i = 0; i < f->prompt_count; i++) {
    prompt_fact *p = &f->prompts[i];
    free(p->name), free(p->description), free(p->text);
    free_strings(p->arguments, p->argument_count);
  }
  free(f->prompts);
  for (size_t i = 0; i < f->config_count; i++) {
    config_fact *c = &f->config[i];
    free(c->key), free(c->env);
    free_strings(c->field_names, c->field_count);
    free_strings(c->field_json, c->field_count);
  }
  free(f->config);
  free_strings(f->dep_modules, f->dep_count);
  free_strings(f->dep_files, f->dep_count);
  free_strings(f->uses, f->use_count);
}

/* A built program runs only Lua (the bundle and the built-in library): a
 * folder whose scripts load C modules cannot be built. */
static bool refuse_c_modules(vm *v, buf *err) {
  lua_State *L = v->L;
  lua_getfield(L, LUA_REGISTRYINDEX, VM_C_MODULES);
  bool any = false;
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      buf_append_str(err, any ? ", " : "the scripts load Lua C modules, which a built program cannot carry: ");
      buf_printf(err, "%s (%s)", lua_tostring(L, -2), lua_tostring(L, -1));
      any = true;
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  if (any) buf_puts(err, ". A built program runs only Lua; serve this folder with `luamcp run` instead.");
  return !any;
}

/* The Lua modules loaded through package.path (registry[VM_LUA_MODULES]),
 * sorted by name: the bundle carries them. */
static void read_lua_modules(vm *v, server_facts *facts) {
  lua_State *L = v->L;
  lua_getfield(L, LUA_REGISTRYINDEX, VM_LUA_MODULES);
  size_t cap = 0;
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (facts->dep_count == cap) {
        cap = cap ? cap * 2 : 8;
        facts->dep_modules = realloc(facts->dep_modules, cap * sizeof(char *));
        facts->dep_files = realloc(facts->dep_files, cap * sizeof(char *));
      }
      facts->dep_modules[facts->dep_count] = strdup(lua_tostring(L, -2));
      facts->dep_files[facts->dep_count++] = strdup(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  /* In name order, so that builds and their messages are reproducible. */
  for (size_t i = 1; i < facts->dep_count; i++) {
    for (size_t k = i; k > 0 && strcmp(facts->dep_modules[k - 1], facts->dep_modules[k]) > 0; k--) {
      char *m = facts->dep_modules[k], *f = facts->dep_files[k];
      facts->dep_modules[k] = facts->dep_modules[k - 1], facts->dep_files[k] = facts->dep_files[k - 1];
      facts->dep_modules[k - 1] = m, facts->dep_files[k - 1] = f;
    }
  }
}

/* read(file) -> its text | nil, for mcp.build_scan: the raw file, not
 * io.open, which the scripts' declared permissions may narrow. */
static int read_text(lua_State *L) {
  buf text = BUF_INIT, why = BUF_INIT;
  if (files_read(luaL_checkstring(L, 1), &text, &why)) lua_pushlstring(L, text.data ? text.data : "", text.len);
  else lua_pushnil(L);
  buf_free(&text);
  buf_free(&why);
  return 1;
}

static bool has_lua_suffix(const char *path) {
  size_t n = strlen(path);
  return n > 4 && strcmp(path + n - 4, ".lua") == 0;
}

/* Modules required only inside functions (lua/mcp/build_scan.lua): those
 * package.path finds join registry[VM_LUA_MODULES]; a C module the
 * folder's scripts name is a warning (it may sit behind a pcall, or in a
 * comment: only loading it would tell). The same pass notes the library's
 * fields the files name, into facts->uses. */
static bool scan_later_requires(vm *v, server_facts *facts, buf *err) {
  lua_State *L = v->L;
  int base = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mcp.build_scan");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) goto failed;
  lua_getfield(L, -1, "scan");
  lua_newtable(L);
  for (size_t i = 0; i < v->file_count; i++) {
    if (!has_lua_suffix(v->files[i])) continue;
    lua_pushstring(L, v->files[i]);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  }
  lua_newtable(L);
  int deps = lua_gettop(L);
  lua_getfield(L, LUA_REGISTRYINDEX, VM_LUA_MODULES);
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_rawseti(L, deps, (lua_Integer)lua_rawlen(L, deps) + 1);
    }
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, read_text);
  if (lua_pcall(L, 3, 2, 0) != LUA_OK) goto failed;
  size_t uses = lua_rawlen(L, -1);
  facts->uses = calloc(uses ? uses : 1, sizeof *facts->uses);
  for (lua_Integer i = 1; i <= (lua_Integer)uses; i++) {
    lua_rawgeti(L, -1, i);
    facts->uses[facts->use_count++] = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, -1); i++) {
    lua_rawgeti(L, -1, i);
    fprintf(stderr, "luamcp: warning: the scripts require the Lua C module %s when called; a built program "
                    "cannot load it (serve the folder with `luamcp run` if a tool needs it)\n", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_settop(L, base);
  return true;
failed:
  buf_printf(err, "looking for the modules the scripts require: %s", lua_tostring(L, -1));
  lua_settop(L, base);
  return false;
}

static bool learn_facts(vm *v, void *facts, buf *err) {
  if (!refuse_c_modules(v, err) || !scan_later_requires(v, facts, err)) return false;
  read_lua_modules(v, facts);
  return read_server_facts(v, facts, err);
}

/* Where module (found in file) goes in the bundle: BUNDLE_LUA_DEPS_DIR
 * "a/b.lua" for a.b, or "a/b/init.lua" when that is what was found, where
 * the built program's require looks (vm.c, search_bundled_deps). */
static char *dep_bundle_name(const char *module, const char *file) {
  buf b = BUF_INIT;
  buf_append_str(&b, BUNDLE_LUA_DEPS_DIR);
  for (const char *c = module; *c; c++) buf_putc(&b, *c == '.' ? '/' : *c);
  size_t n = strlen(file);
  bool init = n >= 9 && strcmp(file + n - 9, "/init.lua") == 0;
  buf_append_str(&b, init ? "/init.lua" : ".lua");
  return buf_detach(&b, NULL);
}

/* Every module the scripts loaded from package.path, into the bundle. A
 * name that would not be a plain path in the bundle (a.., an empty part)
 * is refused: require could not find it there. */
static bool add_dependencies(file_list *list, const server_facts *facts, buf *err) {
  for (size_t i = 0; i < facts->dep_count; i++) {
    const char *module = facts->dep_modules[i];
    bool plain = *module && module[0] != '.' && module[strlen(module) - 1] != '.' && !strstr(module, "..") &&
                 !strchr(module, '/') && !strchr(module, '\\');
    if (!plain) {
      buf_printf(err, "the scripts load the Lua module \"%s\" (%s), whose name a built program cannot look up; "
                      "serve this folder with `luamcp run` instead", module, facts->dep_files[i]);
      return false;
    }
    char *name = dep_bundle_name(module, facts->dep_files[i]);
    bool ok = add_file(list, name, facts->dep_files[i], err);
    free(name);
    if (!ok) return false;
  }
  return true;
}

/* Load the scripts the way `luamcp run` does (so a broken folder fails
 * with the very message run would print) and learn what they register. */
static bool load_like_run(const char *path, server_facts *facts, buf *err) {
  return with_loaded_scripts(path, learn_facts, facts, err);
}

/* ---- Writing ---------------------------------------------------------- */

/* One program build writes: a platform's runtime with the bundle appended.
 * Owner: build_command, which frees it with program_free. */
typedef struct program {
  const build_target *target; /* NULL without --target: a program for this machine */
  const char *platform;       /* the MCPB manifest's name for its OS */
  char *runtime;              /* the runtime's path */
  char *out;                  /* the file written */
  char *entry;                /* its path inside the .mcpb */
  buf bytes;
} program;

static void program_free(program *p) {
  free(p->runtime);
  free(p->out);
  free(p->entry);
  buf_free(&p->bytes);
}


static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

/* name, with suffix (".exe") unless it ends so already; malloc'ed. */
static char *with_suffix(const char *name, const char *suffix) {
  buf b = BUF_INIT;
  buf_append_str(&b, name);
  if (!ends_with(name, suffix)) buf_append_str(&b, suffix);
  return buf_detach(&b, NULL);
}

/* The program `luamcp build PATH` writes without -o: NAME (the folder's
 * name, or the script's without .lua, as the folder really is called, so
 * "." names it too) in the working directory, suffix added; PATH/NAME when
 * a folder is called NAME there, as the script folder is when built from
 * its parent (the build leaves its own output out of the bundle).
 * malloc'ed. */
static char *default_output(const build_options *o, const char *suffix) {
  char *real = os_path_real(o->path);
  buf name = BUF_INIT;
  buf_append_str(&name, base_name(real ? real : o->path));
  free(real);
  if (name.len > 4 && strcmp(name.data + name.len - 4, ".lua") == 0) name.data[name.len -= 4] = '\0';
  if (name.len == 0) buf_append_str(&name, "server");
  char *file = with_suffix(name.data, suffix);
  buf_free(&name);
  struct stat st;
  if (stat(file, &st) != 0 || !S_ISDIR(st.st_mode)) return file;
  buf inside = BUF_INIT;
  bool folder = stat(o->path, &st) == 0 && S_ISDIR(st.st_mode);
  size_t len = strlen(o->path);
  while (folder && len > 1 && os_path_is_separator(o->path[len - 1])) len--;
  if (folder) buf_printf(&inside, "%.*s/%s", (int)len, o->path, file);
  else buf_printf(&inside, "%.*s%s", (int)(base_name(o->path) - o->path), o->path, file);
  free(file);
  return buf_detach(&inside, NULL);
}

/* Where each program's runtime comes from, where it is written, and where
 * it sits in the .mcpb. Without --target: one program, OUT, from this
 * program (or --runtime), at server/OUT, as luamcp build always made. With
 * one target: OUT (default NAME-TARGET), .exe added for Windows, at
 * server/OUT. With several: OUT-TARGET each (OUT defaults to NAME), at
 * server/TARGET/OUT. */
static bool plan_programs(const build_options *o, const server_facts *f, const char *self, program *programs,
                          size_t *count, buf *err) {
  if (!o->target_count) {
    const build_target *host = target_of_file(self);
    programs[0] = (program){.platform = host ? host->mcpb_platform : "linux",
                            .runtime = strdup(o->runtime ? o->runtime : self),
                            .out = o->out ? strdup(o->out) : default_output(o, host ? host->suffix : "")};
    programs[0].entry = malloc(strlen(MCPB_SERVER_DIR) + strlen(programs[0].out) + 1);
    sprintf(programs[0].entry, MCPB_SERVER_DIR "%s", base_name(programs[0].out));
    *count = 1;
    return true;
  }
  buf into = BUF_INIT;
  if (o->into_dir) buf_printf(&into, "%s/%s", o->into_dir, f->name);
  const char *name = o->into_dir ? into.data : o->out ? o->out : f->default_name;
  bool one_name = o->target_count == 1 && !o->into_dir; /* OUT as it is given, or NAME-TARGET */
  bool ok = true;
  for (*count = 0; ok && *count < o->target_count; (*count)++) {
    const build_target *t = o->targets[*count];
    program *p = &programs[*count];
    *p = (program){.target = t, .platform = t->mcpb_platform};
    const char *given = o->target_runtime[t - TARGETS] ? o->target_runtime[t - TARGETS] : o->runtime;
    p->runtime = given ? strdup(given) : target_find_runtime(t, self, err);
    buf out = BUF_INIT, entry = BUF_INIT;
    if (one_name && o->out) buf_append_str(&out, o->out);
    else buf_printf(&out, "%s-%s", name, t->name);
    p->out = with_suffix(out.data, t->suffix);
    char *file = with_suffix(base_name(one_name ? p->out : name), t->suffix);
    if (o->target_count == 1) buf_printf(&entry, MCPB_SERVER_DIR "%s", file);
    else buf_printf(&entry, MCPB_SERVER_DIR "%s/%s", t->name, file);
    p->entry = buf_detach(&entry, NULL);
    free(file);
    buf_free(&out);
    ok = p->runtime != NULL;
  }
  buf_free(&into);
  return ok;
}

static void json_member_string(buf *b, const char *indent, const char *key, const char *value, bool more) {
  buf_printf(b, "%s\"%s\": ", indent, key);
  json_write_string(b, value, strlen(value));
  buf_append_str(b, more ? ",\n" : "\n");
}

/* How a .mcpb starts the server on one OS: its one program there, or a
 * launcher that picks one of several by architecture. */
typedef struct mcpb_platform {
  const char *name;       /* "linux", "win32" */
  char *entry;            /* the path in the archive; owned */
  const program *programs[TARGET_COUNT];
  size_t program_count;
} mcpb_platform;

/* The OSes of the programs, in the order first given. */
static size_t group_platforms(const program *programs, size_t count, mcpb_platform *platforms) {
  size_t n = 0;
  for (size_t i = 0; i < count; i++) {
    size_t k = 0;
    while (k < n && strcmp(platforms[k].name, programs[i].platform) != 0) k++;
    if (k == n) platforms[n++] = (mcpb_platform){.name = programs[i].platform};
    platforms[k].programs[platforms[k].program_count++] = &programs[i];
  }
  for (size_t k = 0; k < n; k++) {
    const char *first = platforms[k].programs[0]->entry;
    buf entry = BUF_INIT;
    /* Several programs (linux-x64, linux-arm64): server/NAME, the launcher. */
    if (platforms[k].program_count == 1) buf_append_str(&entry, first);
    else buf_printf(&entry, MCPB_SERVER_DIR "%s", base_name(first));
    platforms[k].entry = buf_detach(&entry, NULL);
  }
  return n;
}

/* text in single quotes for sh. */
static void sh_quote(buf *b, const char *text) {
  buf_putc(b, '\'');
  for (const char *c = text; *c; c++) {
    if (*c == '\'') buf_puts(b, "'\\''");
    else buf_putc(b, *c);
  }
  buf_putc(b, '\'');
}

/* server/NAME for an OS with several architectures: exec the program for
 * this machine's `uname -m`, from the folder the script is in (a parameter
 * expansion of $0, not dirname, which an empty PATH would not find). */
static void write_launcher(buf *b, const mcpb_platform *platform) {
  const char *name = base_name(platform->entry);
  buf_puts(b, "#!" LAUNCHER_SHELL "\n");
  buf_printf(b, "# Starts the build of this MCP server for this machine's architecture. An MCP\n"
                "# Bundle chooses a program per OS, not per CPU: luamcp build put one program\n"
                "# per architecture in server/%s-*/ and this script picks one.\n", platform->name);
  buf_puts(b, "case $0 in */*) here=${0%/*} ;; *) here=. ;; esac\ncase \"$(uname -m)\" in\n");
  for (size_t i = 0; i < platform->program_count; i++) {
    const build_target *t = platform->programs[i]->target;
    buf_printf(b, "  %s) exec \"$here\"/", t->uname_m);
    sh_quote(b, platform->programs[i]->entry + strlen(MCPB_SERVER_DIR));
    buf_puts(b, " \"$@\" ;;\n");
  }
  buf_puts(b, "esac\necho ");
  buf quoted = BUF_INIT;
  buf_printf(&quoted, "%s: this bundle has no build for this machine (", name);
  for (size_t i = 0; i < platform->program_count; i++)
    buf_printf(&quoted, "%s%s", i ? ", " : "", platform->programs[i]->target->name);
  buf_puts(&quoted, "): uname -m is");
  sh_quote(b, quoted.data);
  buf_puts(b, " \"$(uname -m)\" >&2\nexit 1\n");
  buf_free(&quoted);
}

/* "mcp_config": how the host starts the program, with each setting in its
 * environment variable; with programs for several OSes, the command for
 * each in platform_overrides (the host takes its own OS's, by Node's
 * process.platform, and keeps args and env). */
static void write_mcp_config(buf *b, const server_facts *f, const mcpb_platform *platforms, size_t platform_count) {
  buf command = BUF_INIT;
  buf_printf(&command, "${__dirname}/%s", platforms[0].entry);
  buf_puts(b, "    \"mcp_config\": {\n");
  json_member_string(b, "      ", "command", command.data, true);
  bool overrides = platform_count > 1;
  buf_append_str(b, f->config_count ? "      \"args\": [],\n      \"env\": {\n"
                                    : overrides ? "      \"args\": [],\n" : "      \"args\": []\n");
  for (size_t i = 0; i < f->config_count; i++) {
    buf placeholder = BUF_INIT;
    buf_printf(&placeholder, MCPB_PLACEHOLDER_PREFIX "%s}", f->config[i].key);
    json_member_string(b, "        ", f->config[i].env, placeholder.data, i + 1 < f->config_count);
    buf_free(&placeholder);
  }
  if (f->config_count) buf_append_str(b, overrides ? "      },\n" : "      }\n");
  if (overrides) {
    buf_puts(b, "      \"platform_overrides\": {\n");
    for (size_t k = 0; k < platform_count; k++) {
      buf_clear(&command);
      buf_printf(&command, "${__dirname}/%s", platforms[k].entry);
      buf_printf(b, "        \"%s\": {\n", platforms[k].name);
      json_member_string(b, "          ", "command", command.data, false);
      buf_append_str(b, k + 1 < platform_count ? "        },\n" : "        }\n");
    }
    buf_puts(b, "      }\n");
  }
  buf_puts(b, "    }\n");
  buf_free(&command);
}

static void write_prompts(buf *b, const server_facts *f) {
  buf_puts(b, "  \"prompts\": [");
  for (size_t i = 0; i < f->prompt_count; i++) {
    const prompt_fact *p = &f->prompts[i];
    buf_append_str(b, i ? ",\n    {\n" : "\n    {\n");
    json_member_string(b, "      ", "name", p->name, true);
    if (p->description) json_member_string(b, "      ", "description", p->description, true);
    if (p->argument_count) {
      buf_puts(b, "      \"arguments\": [");
      for (size_t a = 0; a < p->argument_count; a++) {
        if (a) buf_puts(b, ", ");
        json_write_string(b, p->arguments[a], strlen(p->arguments[a]));
      }
      buf_puts(b, "],\n");
    }
    json_member_string(b, "      ", "text", p->text, false);
    buf_puts(b, "    }");
  }
  buf_append_str(b, f->prompt_count ? "\n  ],\n" : "],\n");
}

static void write_user_config(buf *b, const server_facts *f) {
  buf_puts(b, "  \"user_config\": {\n");
  for (size_t i = 0; i < f->config_count; i++) {
    const config_fact *c = &f->config[i];
    buf_puts(b, "    ");
    json_write_string(b, c->key, strlen(c->key));
    buf_puts(b, ": {\n");
    for (size_t k = 0; k < c->field_count; k++)
      buf_printf(b, "      \"%s\": %s%s\n", c->field_names[k], c->field_json[k], k + 1 < c->field_count ? "," : "");
    buf_append_str(b, i + 1 < f->config_count ? "    },\n" : "    }\n");
  }
  buf_puts(b, "  },\n");
}

/* manifest.json for MCPB manifest_version 0.3: the required fields
 * (manifest_version, name, version, description, author.name, server
 * with type, entry_point and mcp_config), then what is known of icon,
 * tools, prompts, license, long_description (the permissions) and
 * user_config, and the platforms. Every object in that schema is strict, so nothing else is
 * written. f->icon is a path in the archive or an https:// URL. */
static void write_manifest(buf *b, const server_facts *f, const mcpb_platform *platforms, size_t platform_count) {
  buf_puts(b, "{\n");
  json_member_string(b, "  ", "manifest_version", MCPB_MANIFEST_VERSION, true);
  json_member_string(b, "  ", "name", f->name, true);
  if (f->title) json_member_string(b, "  ", "display_name", f->title, true);
  json_member_string(b, "  ", "version", f->version, true);
  json_member_string(b, "  ", "description", f->description, true);
  buf_puts(b, "  \"author\": {\n");
  json_member_string(b, "    ", "name", f->author_name, f->author_email || f->author_url);
  if (f->author_email) json_member_string(b, "    ", "email", f->author_email, f->author_url != NULL);
  if (f->author_url) json_member_string(b, "    ", "url", f->author_url, false);
  buf_puts(b, "  },\n");
  if (f->icon) json_member_string(b, "  ", "icon", f->icon, true);
  buf_puts(b, "  \"server\": {\n");
  json_member_string(b, "    ", "type", "binary", true);
  json_member_string(b, "    ", "entry_point", platforms[0].entry, true);
  write_mcp_config(b, f, platforms, platform_count);
  buf_puts(b, "  },\n");
  buf_puts(b, "  \"tools\": [");
  for (size_t i = 0; i < f->tool_count; i++) {
    buf_append_str(b, i ? ",\n    {\n" : "\n    {\n");
    json_member_string(b, "      ", "name", f->tool_names[i], f->tool_descriptions[i] != NULL);
    if (f->tool_descriptions[i]) json_member_string(b, "      ", "description", f->tool_descriptions[i], false);
    buf_puts(b, "    }");
  }
  buf_append_str(b, f->tool_count ? "\n  ],\n" : "],\n");
  if (f->prompt_count) write_prompts(b, f);
  if (f->license) json_member_string(b, "  ", "license", f->license, true);
  /* MCPB has no field for permissions: the long description, which Claude
   * Desktop shows before installing, says what the tools may touch. */
  buf about = BUF_INIT;
  if (f->permissions) buf_printf(&about, "Permissions (enforced by luamcp): %s.", f->permissions);
  else buf_append_str(&about, "Permissions: none declared; the tools run with the user's rights.");
  json_member_string(b, "  ", "long_description", about.data, true);
  buf_free(&about);
  if (f->config_count) write_user_config(b, f);
  /* Only the OSes it has programs for: a host on another would install a
   * server it cannot start. */
  buf_puts(b, "  \"compatibility\": {\n    \"platforms\": [");
  for (size_t k = 0; k < platform_count; k++) buf_printf(b, "%s\"%s\"", k ? ", " : "", platforms[k].name);
  buf_puts(b, "]\n  }\n}\n");
}

/* Fill in what manifest.json needs from the flags, then mcp.server{},
 * then defaults; false when no author is known (the spec requires one). */
static bool complete_manifest_facts(server_facts *f, const build_options *o, buf *err) {
  struct {
    char **field;
    const char *flag;
  } overrides[] = {{&f->name, o->name}, {&f->version, o->version}, {&f->description, o->description},
                   {&f->author_name, o->author}, {&f->license, o->license}};
  for (size_t i = 0; i < sizeof overrides / sizeof overrides[0]; i++) {
    if (!overrides[i].flag) continue;
    free(*overrides[i].field);
    *overrides[i].field = strdup(overrides[i].flag);
  }
  if (o->author) {
    free(f->author_email), f->author_email = NULL;
    free(f->author_url), f->author_url = NULL;
  }
  if (!f->name) f->name = strdup(f->default_name);
  if (!f->version) f->version = strdup("0.0.0");
  if (!f->description) {
    buf d = BUF_INIT;
    if (f->title) buf_append_str(&d, f->title);
    else buf_printf(&d, "%s, an MCP server built with luamcp", f->name);
    f->description = buf_detach(&d, NULL);
  }
  if (!f->author_name || !*f->author_name) {
    buf_puts(err, "--mcpb: manifest.json needs an author: pass --author NAME, or set author = \"NAME\" "
                  "(or { name = ..., email = ..., url = ... }) in mcp.server{}");
    return false;
  }
  return true;
}

/* The icon: --icon FILE (from the working directory), else mcp.server{}
 * icon (from the script folder). An https:// URL goes into the manifest as
 * it is; a file must be a PNG, read into png for the archive. Leaves in
 * f->icon what the manifest says, NULL for no icon. */
static bool read_icon(const build_options *o, server_facts *f, buf *png, buf *err) {
  const char *given = o->icon ? o->icon : f->icon;
  if (!given) return true;
  char *value = NULL;
  bool ok = true;
  if (strncmp(given, "https://", 8) == 0) {
    value = strdup(given);
  } else {
    buf path = BUF_INIT, why = BUF_INIT;
    struct stat st;
    if (o->icon || given[0] == '/') buf_append_str(&path, given);
    else if (stat(o->path, &st) == 0 && S_ISDIR(st.st_mode)) buf_printf(&path, "%s/%s", o->path, given);
    else buf_printf(&path, "%.*s%s", (int)(base_name(o->path) - o->path), o->path, given);
    ok = files_read(path.data, png, &why);
    if (ok && (png->len < 8 || memcmp(png->data, PNG_SIGNATURE, 8) != 0)) {
      buf_printf(&why, "%s: not a PNG file (an MCPB icon is a PNG)", path.data);
      ok = false;
    }
    if (!ok) buf_printf(err, "%s: %s", o->icon ? "--icon" : "mcp.server{} icon", why.data);
    else value = strdup(MCPB_ICON_NAME);
    buf_free(&path);
    buf_free(&why);
  }
  free(f->icon);
  f->icon = value;
  return ok;
}

static bool write_mcpb(const build_options *o, const server_facts *facts, const program *programs, size_t count,
                       const buf *icon, size_t *written, buf *err) {
  mcpb_platform platforms[TARGET_COUNT];
  size_t platform_count = group_platforms(programs, count, platforms);
  buf manifest = BUF_INIT, archive = BUF_INIT;
  write_manifest(&manifest, facts, platforms, platform_count);
  zip_writer z;
  /* Deflated: the .mcpb is downloaded, and a built program shrinks by more
   * than half (a PNG is stored, deflate cannot shrink it). */
  zip_writer_init(&z, &archive, 0, ZIP_DEFLATED);
  zip_add(&z, "manifest.json", manifest.data, manifest.len, 0644);
  if (icon->len) zip_add(&z, MCPB_ICON_NAME, icon->data, icon->len, 0644);
  for (size_t k = 0; k < platform_count; k++) {
    if (platforms[k].program_count == 1) continue;
    buf launcher = BUF_INIT;
    write_launcher(&launcher, &platforms[k]);
    zip_add(&z, platforms[k].entry, launcher.data, launcher.len, 0755);
    buf_free(&launcher);
  }
  for (size_t i = 0; i < count; i++) zip_add(&z, programs[i].entry, programs[i].bytes.data, programs[i].bytes.len, 0755);
  bool ok = zip_finish(&z, 0);
  zip_writer_free(&z);
  if (!ok) buf_printf(err, "%s: too large for a ZIP without ZIP64", o->mcpb);
  ok = ok && files_replace(o->mcpb, &archive, 0644, err);
  *written = archive.len;
  buf_free(&manifest);
  buf_free(&archive);
  for (size_t k = 0; k < platform_count; k++) free(platforms[k].entry);
  return ok;
}

/* The files the programs and the .mcpb will replace, when they exist already. */
static void note_outputs(const build_options *o, const program *programs, size_t count, skip_list *skip) {
  for (size_t i = 0; i <= count; i++) {
    const char *path = i < count ? programs[i].out : o->mcpb;
    if (path && stat(path, &skip->files[skip->count]) == 0) skip->count++;
  }
}

/* The program's runtime, into p->bytes. */
static bool read_runtime(const build_options *o, const char *self, program *p, buf *err) {
  /* Without --target, a --runtime must be for this machine, as this program is. */
  const build_target *must_be = p->target ? p->target : o->runtime ? target_of_file(self) : NULL;
  if (target_read_runtime(p->runtime, must_be, &p->bytes, err)) return true;
  const build_target *is = p->target ? NULL : target_of_file(p->runtime);
  if (o->static_runtime) buf_puts(err, " (make build/luamcp-static builds the static runtime)");
  else if (is && is != must_be) buf_printf(err, "; to build for %s, add --target %s", is->name, is->name);
  return false;
}

/* One program's runtime against what the scripts use. */
typedef struct lack_check {
  const build_options *o;
  const server_facts *facts;
  const program *p;
  size_t count; /* how many things the scripts use that it lacks */
  buf *err;     /* --strict: where they are listed */
} lack_check;

static void note_lack(const char *api, const char *why, void *data) {
  lack_check *c = data;
  bool used = false;
  for (size_t i = 0; i < c->facts->use_count && !used; i++) used = strcmp(c->facts->uses[i], api) == 0;
  if (!used) return;
  buf runtime = BUF_INIT;
  if (c->p->target) buf_printf(&runtime, "the %s runtime (%s)", c->p->target->name, c->p->runtime);
  else buf_printf(&runtime, "the runtime %s", c->p->runtime);
  if (c->o->strict) {
    buf_printf(c->err, "%s%s, which %s lacks: %s", c->count ? "; " : "the scripts use ", api, runtime.data, why);
  } else {
    fprintf(stderr, "luamcp: warning: the scripts use %s, which %s lacks: %s. In %s it fails when called; "
                    "--strict refuses to build it\n", api, runtime.data, why, c->p->out);
  }
  c->count++;
  buf_free(&runtime);
}

/* Whether the program's runtime has what the scripts use, as the runtime
 * itself says (cli/target.h): each thing missing is a warning, or with
 * --strict the reason nothing is written. */
static bool check_lacks(const build_options *o, const server_facts *facts, const program *p, buf *err) {
  lack_check c = {o, facts, p, 0, err};
  target_runtime_lacks(&p->bytes, note_lack, &c);
  if (c.count && o->strict) buf_puts(err, " (--strict: nothing written)");
  return !(c.count && o->strict);
}

/* Append the bundle to the program's runtime (read_runtime) and write it. */
static bool write_program(const build_options *o, program *p, const bundle_input *inputs, size_t input_count,
                          const char *metadata, buf *err) {
  size_t runtime_size = p->bytes.len;
  if (!bundle_write_payload(&p->bytes, inputs, input_count, metadata, err) ||
      !files_replace(p->out, &p->bytes, 0755, err))
    return false;
  fprintf(stderr, "luamcp: wrote %s", p->out);
  if (p->target) fprintf(stderr, " for %s", p->target->name);
  fprintf(stderr, ": %zu file%s (scripts as %s), %zu bytes = runtime %zu + bundle %zu", input_count,
          input_count == 1 ? "" : "s", o->bytecode ? (o->strip ? "stripped bytecode" : "bytecode") : "source",
          p->bytes.len, runtime_size, p->bytes.len - runtime_size);
  if (p->target) fprintf(stderr, " (runtime %s)", p->runtime);
  fputc('\n', stderr);
  return true;
}

int build_command(int argc, char **argv) {
  if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
    build_usage(stdout);
    return 0;
  }
  return build_run(argc, argv, NULL, NULL, NULL, NULL);
}

/* The facts release needs, moved out of f (whose free then skips them). */
static void fill_report(build_report *r, server_facts *f, program *programs, size_t count, const char *mcpb) {
  r->name = f->name, f->name = NULL;
  r->version = f->version, f->version = NULL;
  r->description = f->description, f->description = NULL;
  r->license = f->license, f->license = NULL;
  r->author = f->author_name, f->author_name = NULL;
  r->setting_count = f->config_count;
  r->settings = calloc(f->config_count + 1, sizeof *r->settings);
  for (size_t i = 0; i < f->config_count; i++) {
    config_fact *c = &f->config[i];
    r->settings[i] = (build_setting){c->key, c->env, c->field_count, c->field_names, c->field_json};
    *c = (config_fact){0};
  }
  for (size_t i = 0; i < count; i++) {
    r->targets[i] = programs[i].target;
    r->programs[i] = strdup(programs[i].out);
  }
  r->program_count = count;
  r->mcpb = strdup(mcpb);
}

void build_report_free(build_report *r) {
  free(r->name), free(r->version), free(r->description), free(r->license), free(r->author);
  for (size_t i = 0; i < r->setting_count; i++) {
    build_setting *s = &r->settings[i];
    free(s->key), free(s->env);
    free_strings(s->field_names, s->field_count);
    free_strings(s->field_json, s->field_count);
  }
  free(r->settings);
  for (size_t i = 0; i < r->program_count; i++) free(r->programs[i]);
  free(r->mcpb);
  *r = (build_report){0};
}

int build_run(int argc, char **argv, const char *into_dir, build_check_fn check, void *check_data,
              build_report *report) {
  build_options o = {0};
  parse_build_options(argc, argv, &o);
  o.into_dir = into_dir;

  buf err = BUF_INIT, icon = BUF_INIT;
  file_list list = {0};
  ignore_list ignore = {0};
  server_facts facts = {0};
  bundle_input *inputs = NULL;
  program programs[TARGET_COUNT] = {0};
  size_t program_count = 0;
  int code = 1;
  char self[PATH_MAX];
  if (!os_self_exe(NULL, self, sizeof self)) self[0] = '\0';

  buf release_mcpb = BUF_INIT;
  if (!load_like_run(o.path, &facts, &err)) goto done;
  if (o.into_dir) {
    if (!complete_manifest_facts(&facts, &o, &err)) goto done;
    buf_printf(&release_mcpb, "%s/%s.mcpb", o.into_dir, facts.name);
    o.mcpb = release_mcpb.data;
  }
  if (check) {
    /* A view of the facts: nothing moves out of them. */
    build_report view = {.name = facts.name, .version = facts.version, .description = facts.description,
                         .license = facts.license, .author = facts.author_name, .program_count = o.target_count};
    for (size_t i = 0; i < o.target_count; i++) view.targets[i] = o.targets[i];
    if (!check(&view, check_data, &err)) goto done;
  }
  if (o.mcpb && !((o.into_dir || complete_manifest_facts(&facts, &o, &err)) && read_icon(&o, &facts, &icon, &err)))
    goto done;
  if (!plan_programs(&o, &facts, self, programs, &program_count, &err)) goto done;

  struct stat st;
  skip_list skip = {0};
  note_outputs(&o, programs, program_count, &skip);
  if (stat(o.path, &st) == 0 && S_ISDIR(st.st_mode)) {
    if (!read_ignore_file(o.path, &ignore, &err) || !collect_folder(&list, o.path, "", &skip, &ignore, 0, &err))
      goto done;
  } else {
    char *name = strdup(base_name(o.path));
    bool ok = add_file(&list, name, o.path, &err);
    free(name);
    if (!ok) goto done;
  }
  if (!add_dependencies(&list, &facts, &err)) goto done;
  for (size_t i = 0; i < facts.dep_count; i++)
    fprintf(stderr, "%s%s (%s)%s", i ? ", " : "luamcp: carrying the Lua modules the scripts load from package.path: ",
            facts.dep_modules[i], facts.dep_files[i], i + 1 == facts.dep_count ? "\n" : "");
  qsort(list.files, list.count, sizeof *list.files, compare_source_files);
  if (!compile_scripts(&list, &o, &err)) goto done;

  inputs = calloc(list.count ? list.count : 1, sizeof *inputs);
  for (size_t i = 0; i < list.count; i++)
    inputs[i] = (bundle_input){list.files[i].name, list.files[i].data.data ? list.files[i].data.data : "",
                               list.files[i].data.len};
  /* The same bundle for every target: the scripts (Lua bytecode is the
   * same on x86-64 and aarch64, Linux and Windows: 8-byte integers and
   * doubles, little-endian) and what built them, nothing of this machine. */
  buf metadata = BUF_INIT;
  buf_printf(&metadata, "format %d\nruntime %s\nlua %s\nname %s\nscripts %s\n", BUNDLE_FORMAT, LUAMCP_VERSION,
             LUA_RELEASE_STRING, facts.default_name,
             o.bytecode ? (o.strip ? "bytecode-stripped" : "bytecode") : "source");
  bool ok = true;
  for (size_t i = 0; ok && i < program_count; i++) ok = read_runtime(&o, self, &programs[i], &err);
  /* Every runtime is checked before any program is written: --strict writes none. */
  for (size_t i = 0; ok && i < program_count; i++) ok = check_lacks(&o, &facts, &programs[i], &err);
  for (size_t i = 0; ok && i < program_count; i++)
    ok = write_program(&o, &programs[i], inputs, list.count, metadata.data, &err);
  buf_free(&metadata);
  if (!ok) goto done;
  if (o.mcpb) {
    size_t mcpb_size;
    if (!write_mcpb(&o, &facts, programs, program_count, &icon, &mcpb_size, &err)) goto done;
    fprintf(stderr, "luamcp: wrote %s: %zu bytes, deflated: manifest.json (MCPB %s, %zu tool%s, %zu prompt%s, %zu setting%s), %s",
            o.mcpb, mcpb_size, MCPB_MANIFEST_VERSION, facts.tool_count, facts.tool_count == 1 ? "" : "s", facts.prompt_count,
            facts.prompt_count == 1 ? "" : "s", facts.config_count, facts.config_count == 1 ? "" : "s",
            icon.len ? MCPB_ICON_NAME ", " : "");
    for (size_t i = 0; i < program_count; i++) fprintf(stderr, "%s%s", i ? ", " : "", programs[i].entry);
    fputc('\n', stderr);
  }
  if (report) fill_report(report, &facts, programs, program_count, o.mcpb);
  code = 0;
done:
  if (code != 0) fprintf(stderr, "luamcp: %s\n", err.data ? err.data : "build failed");
  free(inputs);
  file_list_free(&list);
  ignore_list_free(&ignore);
  server_facts_free(&facts);
  for (size_t i = 0; i < program_count; i++) program_free(&programs[i]);
  buf_free(&icon);
  buf_free(&err);
  buf_free(&release_mcpb);
  return code;
}

/* ---- At start-up ------------------------------------------------------ */

void build_unset_unfilled_settings(void) {
  extern char **environ;
  const size_t prefix = strlen(MCPB_PLACEHOLDER_PREFIX);
  for (size_t i = 0; environ[i];) {
    const char *eq = strchr(environ[i], '=');
    const char *value = eq ? eq + 1 : "";
    size_t len = strlen(value);
    bool placeholder = len > prefix + 1 && strncmp(value, MCPB_PLACEHOLDER_PREFIX, prefix) == 0 &&
                       value[len - 1] == '}' && memchr(value + prefix, '}', len - prefix - 1) == NULL;
    if (!placeholder) {
      i++;
      continue;
    }
    char *name = strndup(environ[i], (size_t)(eq - environ[i]));
    /* Success moves the later entries down: look at index i again. */
    if (unsetenv(name) != 0) i++;
    free(name);
  }
}

/* ---- --bundle-info ---------------------------------------------------- */

void build_print_info(const bundle *b, FILE *to) {
  fprintf(to, "%s: an MCP server built from \"%s\" by luamcp %s (%s)\n", b->path, b->name, b->runtime_version,
          b->lua_version);
  fprintf(to, "runtime: %" PRIu64 " bytes (this runtime: luamcp %s, %s)\n", b->runtime_size, LUAMCP_VERSION,
          LUA_RELEASE_STRING);
  fprintf(to, "bundle: format %d, %zu bytes, CRC-32 %08" PRIx32 ", scripts as %s\n", BUNDLE_FORMAT, b->payload_size,
          b->payload_crc32, b->scripts);
  fprintf(to, "%10s  %-8s  %s\n", "size", "crc32", "file");
  for (size_t i = 0; i < b->file_count; i++)
    fprintf(to, "%10zu  %08" PRIx32 "  %s\n", b->files[i].size, b->files[i].crc32, b->files[i].name);
}
