/*
 * install.c - `luamcp install CLIENT PATH`: write an entry that starts PATH
 * (or, with --url, one that reaches a Streamable HTTP server) into a client
 * application's own MCP configuration file, user-wide or the project's
 * (--project), keeping all else in that file as it was; and `luamcp
 * uninstall CLIENT NAME`, which takes an entry out the same way.
 *
 * The file is read with the strict parser (core/json.c), which keeps
 * members in document order; every member but the one entry is copied as
 * it was spelled, and the whole is written back indented by
 * json_write_pretty. Whatever goes wrong, the file is either left as it
 * was or replaced whole (files_replace), never half written, and its
 * previous bytes are first kept in FILE.bak.
 */
#include "cli/install.h"

#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/files.h"
#include "cli/loaded.h"
#include "cli/suggest.h"
#include "core/bundle.h"
#include "core/json.h"
#include "core/luamcp_limits.h"
#include "os/fs.h"
#include "os/path.h"
#include "os/self.h"

/* Where a client keeps its user-wide settings. */
typedef enum config_base {
  UNDER_HOME,       /* the home folder */
  UNDER_APP_CONFIG, /* where Electron applications keep theirs (app_config_dir) */
} config_base;

/* How a client's entry names a Streamable HTTP server. */
typedef enum remote_style {
  REMOTE_NONE,       /* not in its file (Claude Desktop: Settings > Connectors) */
  REMOTE_TYPED_HTTP, /* "type": "http", "url" */
  REMOTE_URL,        /* "url" alone (Cursor tells the transport itself) */
  REMOTE_HTTP_URL,   /* "httpUrl" (Gemini CLI; its "url" means the old SSE transport) */
} remote_style;

/* A client application and the files it reads its MCP servers from: the
 * user-wide one, so the server is there in every project, and the one a
 * project keeps in its folder (checked in with it). Each was checked
 * against the client's documentation (README "Installing in a client"). */
typedef struct client_app {
  const char *id;           /* on the command line */
  const char *title;        /* in messages */
  config_base base;
  const char *file;         /* below base */
  const char *project_file; /* below the project's folder, or NULL: no project scope */
  const char *servers_key;  /* the object that maps names to entries */
  bool typed;               /* its entries say "type": "stdio" */
  remote_style remote;
  const char *restart;      /* how to make it start the new server */
} client_app;

static const client_app CLIENTS[] = {
    {"claude-desktop", "Claude Desktop", UNDER_APP_CONFIG, "Claude/claude_desktop_config.json", NULL, "mcpServers",
     false, REMOTE_NONE, "Quit and reopen Claude Desktop to start it."},
    {"claude-code", "Claude Code", UNDER_HOME, ".claude.json", ".mcp.json", "mcpServers", true, REMOTE_TYPED_HTTP,
     "A new Claude Code session starts it."},
    {"cursor", "Cursor", UNDER_HOME, ".cursor/mcp.json", ".cursor/mcp.json", "mcpServers", false, REMOTE_URL,
     "Restart Cursor to start it."},
    {"vscode", "VS Code", UNDER_APP_CONFIG, "Code/User/mcp.json", ".vscode/mcp.json", "servers", true,
     REMOTE_TYPED_HTTP, "Start it with the command 'MCP: List Servers' in VS Code."},
    {"gemini", "Gemini CLI", UNDER_HOME, ".gemini/settings.json", ".gemini/settings.json", "mcpServers", false,
     REMOTE_HTTP_URL, "A new Gemini CLI session starts it."},
};
#define CLIENT_COUNT (sizeof CLIENTS / sizeof CLIENTS[0])

/* The bases as the help shows them (base_folder has the rule). */
#if defined _WIN32
#define HOME_SHOWN "%USERPROFILE%\\"
#define APP_CONFIG_SHOWN "%APPDATA%\\"
#elif defined __APPLE__
#define HOME_SHOWN "~/"
#define APP_CONFIG_SHOWN "~/Library/Application Support/"
#else
#define HOME_SHOWN "~/"
#define APP_CONFIG_SHOWN "~/.config/"
#endif

enum { MAX_ENV = 64 };

typedef struct install_request {
  const client_app *client;
  const char *path;             /* PATH as given, or NULL (--url alone) */
  const char *name;             /* --name, or NULL for the server's own; uninstall: NAME */
  const char *env[MAX_ENV];     /* --env KEY=VALUE */
  int env_count;
  const char *headers[MAX_ENV]; /* --header 'Name: value' (with --url) */
  int header_count;
  const char *url;              /* --url: a remote entry */
  bool print;                   /* --print: show the entry, write nothing */
  bool project;                 /* --project: the current folder's file, not the user's */
  bool dev;                     /* --dev: the entry runs `luamcp dev` */
  bool uninstall;               /* luamcp uninstall CLIENT NAME */
} install_request;

/* What install learns before it writes. Owner: install_command; every
 * string is malloc'ed. */
typedef struct server_start {
  char *target;     /* PATH, absolute */
  bool program;     /* PATH is a program made by luamcp build */
  char *name;       /* the entry's name */
  char *config;     /* the client's file */
  buf unset;        /* "API_KEY (config api_key \"API key\"), ...": required settings no --env gives */
  buf unset_flags;  /* " --env API_KEY=VALUE ...": the options that would give them */
} server_start;

void install_usage(FILE *to) {
  fputs("Usage: luamcp install CLIENT PATH [--name NAME] [--env KEY=VALUE ...] [--dev] [--project] [--print]\n"
        "       luamcp install CLIENT --url URL --name NAME [--header 'Name: value' ...] [--project] [--print]\n"
        "       luamcp uninstall CLIENT NAME [--project]\n"
        "\n"
        "Add a server to the MCP configuration of CLIENT, for every project of this user\n"
        "(or, with --project, for the project in the current folder only).\n"
        "It runs 'luamcp run PATH' (PATH made absolute), or PATH alone when PATH is a\n"
        "program made by 'luamcp build'. The scripts are loaded first, as 'luamcp run'\n"
        "loads them: a folder that does not load is not installed. A required setting of\n"
        "mcp.server{config} that no --env gives a value gets a warning.\n"
        "\n"
        "Installing again replaces the entry of the same name; every other key and\n"
        "server in the file stays, in its order. The file's previous bytes are kept in\n"
        "FILE.bak, and a file that is not valid JSON is never changed.\n"
        "\n"
        "CLIENT, and the file it reads:\n",
        to);
  for (size_t i = 0; i < CLIENT_COUNT; i++)
    fprintf(to, "  %-15s %s%s%s%s\n", CLIENTS[i].id, CLIENTS[i].base == UNDER_HOME ? HOME_SHOWN : APP_CONFIG_SHOWN,
            CLIENTS[i].file, CLIENTS[i].project_file ? "; --project: " : "",
            CLIENTS[i].project_file ? CLIENTS[i].project_file : "");
  fputs("\n"
        "Options:\n"
        "  --name NAME       the entry's name (default: the server's name, from\n"
        "                    mcp.server{name}, else the folder's name; for a built\n"
        "                    program, the folder it was built from)\n"
        "  --env KEY=VALUE   an environment variable for the server (repeatable)\n"
        "  --dev             the entry runs 'luamcp dev PATH': the client's server\n"
        "                    reloads whenever a script changes\n"
        "  --url URL         a remote entry that reaches the Streamable HTTP server at\n"
        "                    URL, in the client's own format, instead of a command\n"
        "  --header 'Name: value'  with --url: a header sent with every request\n"
        "                    (repeatable), e.g. 'Authorization: Bearer ${TOKEN}'\n"
        "  --project         the project's file in the current folder (.mcp.json,\n"
        "                    .cursor/mcp.json, .vscode/mcp.json, .gemini/settings.json)\n"
        "  --print           print the entry and where it goes; write nothing\n"
        "\n"
        "luamcp uninstall CLIENT NAME takes the entry NAME out of the same file\n"
        "(--project: the project's), keeping the rest and a FILE.bak as install does.\n",
        to);
}

static const char *command_name = "install"; /* or "uninstall", in messages */

static void usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "luamcp %s: ", command_name);
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nRun 'luamcp %s --help' for usage.\n", command_name);
  exit(2);
}

static const client_app *find_client(const char *id) {
  for (size_t i = 0; i < CLIENT_COUNT; i++)
    if (strcmp(CLIENTS[i].id, id) == 0) return &CLIENTS[i];
  return NULL;
}

/* Returns false for --help. */
static bool parse_install_options(int argc, char **argv, install_request *r) {
  const char *client = NULL;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      return false;
    } else if (strcmp(a, "--print") == 0 && !r->uninstall) {
      r->print = true;
    } else if (strcmp(a, "--project") == 0) {
      r->project = true;
    } else if (strcmp(a, "--dev") == 0 && !r->uninstall) {
      r->dev = true;
    } else if (strcmp(a, "--url") == 0 && !r->uninstall) {
      if (!value || (strncmp(value, "http://", 7) != 0 && strncmp(value, "https://", 8) != 0))
        usage_error("%s needs an http:// or https:// URL", a);
      r->url = value;
      i++;
    } else if (strcmp(a, "--header") == 0 && !r->uninstall) {
      const char *colon = value ? strchr(value, ':') : NULL;
      if (!colon || colon == value || strpbrk(value, "\r\n")) usage_error("%s needs 'Name: value'", a);
      if (r->header_count == MAX_ENV) usage_error("too many %s options", a);
      r->headers[r->header_count++] = value;
      i++;
    } else if (strcmp(a, "--name") == 0 && !r->uninstall) {
      if (!value || !*value) usage_error("%s needs a name", a);
      r->name = value;
      i++;
    } else if (strcmp(a, "--env") == 0) {
      if (!value || value[0] == '=' || !strchr(value, '=')) usage_error("%s needs KEY=VALUE", a);
      if (r->env_count == MAX_ENV) usage_error("too many %s options", a);
      r->env[r->env_count++] = value;
      i++;
    } else if (a[0] == '-' && a[1]) {
      buf message = BUF_INIT;
      buf_printf(&message, "unknown option %s%s", a, suggest_option(a, install_usage));
      usage_error("%s", message.data);
    } else if (!client) {
      client = a;
    } else if (r->uninstall && !r->name) {
      r->name = a;
    } else if (!r->uninstall && !r->path) {
      r->path = a;
    } else {
      usage_error("unexpected argument %s", a);
    }
  }
  if (r->uninstall && (!client || !r->name)) usage_error("%s", "uninstall needs a CLIENT and the NAME of an entry");
  if (!r->uninstall && (!client || (!r->path && !r->url)))
    usage_error("%s", "install needs a CLIENT and a PATH (or --url URL)");
  if (r->url && !r->path && !r->name)
    usage_error("%s", "--url needs --name NAME (or the scripts' PATH, to take the server's name from)");
  if (r->url && r->env_count) usage_error("%s", "--env is for a server the client starts; give a remote one --header");
  if (r->url && r->dev) usage_error("%s", "--dev runs the scripts; a remote entry (--url) runs nothing");
  if (r->header_count && !r->url) usage_error("%s", "--header is for a remote entry (--url URL); a command takes --env");
  r->client = find_client(client);
  if (!r->client) {
    buf message = BUF_INIT;
    buf_printf(&message, "unknown client %s (one of", client);
    for (size_t i = 0; i < CLIENT_COUNT; i++) buf_printf(&message, "%s %s", i ? "," : "", CLIENTS[i].id);
    buf_putc(&message, ')');
    usage_error("%s", message.data);
  }
  if (r->project && !r->client->project_file)
    usage_error("%s", "--project: Claude Desktop has no project configuration, only its user-wide file");
  if (r->url && r->client->remote == REMOTE_NONE)
    usage_error("%s", "--url: Claude Desktop does not read remote servers from its file; add the URL in its "
                      "Settings > Connectors");
  return true;
}

/* ---- Where the configuration is ---------------------------------------- */

/* The separator of the paths install writes and shows. */
#ifdef _WIN32
#define SEPARATOR '\\'
#else
#define SEPARATOR '/'
#endif

/* The folder a client keeps its user-wide settings under (base), in out;
 * false with the reason in err. On Windows, Node's os.homedir() (Claude
 * Code, Cursor, Gemini CLI) is %USERPROFILE% and Electron's appData
 * (Claude Desktop, VS Code) is %APPDATA%; HOME, which some shells set
 * there, is no client's. (getenv gives UTF-8: the program's code page is
 * UTF-8, see luamcp.manifest.) */
static bool base_folder(config_base base, buf *out, buf *err) {
#ifdef _WIN32
  const char *variable = base == UNDER_HOME ? "USERPROFILE" : "APPDATA";
  const char *dir = getenv(variable);
  if (!dir || !os_path_is_absolute(dir)) {
    buf_printf(err, "%%%s%% is not set to a folder: cannot tell where the client's configuration is", variable);
    return false;
  }
  buf_append_str(out, dir);
  if (out->len && os_path_is_separator(out->data[out->len - 1])) out->data[--out->len] = '\0';
  return true;
#else
  const char *home = getenv("HOME");
  if (!home || home[0] != '/') {
    buf_puts(err, "HOME is not set to a folder: cannot tell where the client's configuration is");
    return false;
  }
  if (base == UNDER_HOME) {
    buf_append_str(out, home);
    return true;
  }
#ifdef __APPLE__
  buf_printf(out, "%s/Library/Application Support", home);
#else
  /* The XDG base directory rule: $XDG_CONFIG_HOME when it is an absolute
   * path, else ~/.config. */
  const char *xdg = getenv("XDG_CONFIG_HOME");
  if (xdg && xdg[0] == '/') buf_append_str(out, xdg);
  else buf_printf(out, "%s/.config", home);
#endif
  return true;
#endif
}

/* dir SEPARATOR file, file's '/' written as the OS's separator. */
static char *join(const char *dir, const char *file) {
  buf path = BUF_INIT;
  buf_append_str(&path, dir);
  if (!path.len || !os_path_is_separator(path.data[path.len - 1])) buf_putc(&path, SEPARATOR);
  for (const char *c = file; *c; c++) buf_putc(&path, *c == '/' ? SEPARATOR : *c);
  return buf_detach(&path, NULL);
}

static char *config_path(const client_app *c, bool project, buf *err) {
  if (project) {
    char here[PATH_MAX];
    if (!getcwd(here, sizeof here)) {
      buf_printf(err, "cannot tell the current folder: %s", strerror(errno));
      return NULL;
    }
    return join(here, c->project_file);
  }
  buf dir = BUF_INIT;
  char *path = base_folder(c->base, &dir, err) ? join(dir.data, c->file) : NULL;
  buf_free(&dir);
  return path;
}

/* Create the folders above path that are missing (path is absolute: its
 * root, "/" or "C:\" or "\\server\share\", is there). */
static bool make_parents(const char *path, buf *err) {
  char *copy = strdup(path);
  bool ok = true;
  char *root_end = copy + 1;
#ifdef _WIN32
  if (copy[0] && copy[1] == ':') root_end = copy + 3; /* C:\ */
  else if (os_path_is_separator(copy[0]) && os_path_is_separator(copy[1])) {
    /* \\server\share\: its first two names are no folders to create */
    int names = 0;
    for (root_end = copy + 2; *root_end && names < 2; root_end++)
      if (os_path_is_separator(*root_end)) names++;
  }
#endif
  for (char *at = root_end; ok && *at; at++) {
    if (!os_path_is_separator(*at)) continue;
    char kept = *at;
    *at = '\0';
    struct stat st;
    if (!os_fs_mkdir(copy) && errno != EEXIST && !(stat(copy, &st) == 0 && S_ISDIR(st.st_mode))) {
      buf_printf(err, "cannot create %s: %s", copy, strerror(errno));
      ok = false;
    }
    *at = kept;
  }
  free(copy);
  return ok;
}

/* ---- What the entry starts --------------------------------------------- */

/* An executable (ELF, or PE's "MZ" for a Windows program), not a script folder. */
static bool is_executable(const char *path) {
  FILE *f = fopen(path, "rb");
  char magic[4] = {0};
  bool exe = f && fread(magic, 1, 4, f) == 4 && (memcmp(magic, "\x7f" "ELF", 4) == 0 || memcmp(magic, "MZ", 2) == 0);
  if (f) fclose(f);
  return exe;
}

/* What install reads from the loaded scripts. */
typedef struct server_facts {
  const install_request *r;
  char *name;  /* mcp._summary().name: mcp.server{name}, else the folder's name */
  buf *unset;  /* the required settings of mcp.server{config} no --env gives */
  buf *unset_flags;
} server_facts;

static bool env_given(const install_request *r, const char *key) {
  size_t n = strlen(key);
  for (int i = 0; i < r->env_count; i++)
    if (strncmp(r->env[i], key, n) == 0 && r->env[i][n] == '=' && r->env[i][n + 1]) return true;
  return false;
}

/* Each user_config entry of mcp._manifest() marked required whose
 * variable no --env sets: the client starts the server with its own
 * environment, where nothing else will. */
static void note_unset_config(lua_State *L, int manifest, const install_request *r, buf *unset, buf *flags) {
  lua_getfield(L, manifest, "user_config");
  int entries = lua_gettop(L);
  for (lua_Integer i = 1; lua_istable(L, entries) && lua_rawgeti(L, entries, i) == LUA_TTABLE; i++) {
    int entry = lua_gettop(L);
    bool required = false;
    const char *title = NULL;
    lua_getfield(L, entry, "fields");
    for (lua_Integer j = 1; lua_istable(L, -1) && lua_rawgeti(L, -1, j) == LUA_TTABLE; j++) {
      lua_rawgeti(L, -1, 1);
      lua_rawgeti(L, -2, 2);
      const char *field = lua_tostring(L, -2), *json = lua_tostring(L, -1);
      if (field && json && strcmp(field, "required") == 0) required = strcmp(json, "true") == 0;
      if (field && json && strcmp(field, "title") == 0) title = json; /* kept alive by the manifest */
      lua_pop(L, 3);
    }
    lua_pop(L, 1); /* the nil that ended the fields, and fields below */
    lua_pop(L, 1);
    lua_getfield(L, entry, "env");
    lua_getfield(L, entry, "key");
    const char *env = lua_tostring(L, -2), *key = lua_tostring(L, -1);
    if (required && env && key && !env_given(r, env)) {
      buf_printf(unset, "%s%s (config %s%s%s)", unset->len ? ", " : "", env, key, title ? " " : "", title ? title : "");
      buf_printf(flags, " --env %s=VALUE", env);
    }
    lua_settop(L, entries);
  }
  lua_settop(L, entries - 1);
}

static bool read_server_facts(vm *v, void *arg, buf *err) {
  server_facts *facts = arg;
  lua_State *L = v->L;
  int base = lua_gettop(L);
  if (!vm_call_library(v, "_summary", 0)) goto failed;
  lua_getfield(L, -1, "name");
  facts->name = strdup(lua_tostring(L, -1) ? lua_tostring(L, -1) : "luamcp");
  lua_settop(L, base);
  if (!vm_call_library(v, "_manifest", 0)) goto failed;
  note_unset_config(L, lua_gettop(L), facts->r, facts->unset, facts->unset_flags);
  lua_settop(L, base);
  return true;
failed:
  buf_printf(err, "reading the server's name: %s", lua_tostring(L, -1));
  lua_settop(L, base);
  return false;
}

/* Resolve PATH, tell a built program from scripts, and load it as it will
 * run, to learn its name (and refuse one that does not load). */
static bool learn_server(const install_request *r, server_start *s, buf *err) {
  if (!r->path) { /* --url with --name: nothing to load */
    s->name = strdup(r->name);
    return true;
  }
  char *resolved = os_path_real(r->path);
  if (!resolved) {
    buf_printf(err, "%s: %s", r->path, strerror(errno));
    return false;
  }
  s->target = resolved;
  struct stat st;
  s->program = stat(resolved, &st) == 0 && S_ISREG(st.st_mode) && is_executable(resolved);
  if (s->program && r->dev) {
    buf_printf(err, "--dev reloads scripts, and %s is a program made by luamcp build: install its folder", r->path);
    return false;
  }
  server_facts facts = {.r = r, .unset = &s->unset, .unset_flags = &s->unset_flags};
  bool ok;
  if (s->program) {
    bundle *b = NULL;
    int found = bundle_open(resolved, &b, err);
    if (found == 0)
      buf_printf(err, "%s is a program that carries no scripts (luamcp build makes programs that do)", r->path);
    ok = found == 1 && with_loaded_bundle(b, read_server_facts, &facts, err);
    bundle_free(b);
  } else {
    ok = with_loaded_scripts(resolved, read_server_facts, &facts, err);
  }
  char *name = facts.name;
  if (!ok) {
    free(name);
    return false;
  }
  if (r->url) s->unset.len = 0; /* the remote server has its own environment */
  if (r->url) s->unset_flags.len = 0;
  if (r->name) {
    free(name);
    name = strdup(r->name);
  }
  s->name = name;
  return true;
}

/* The luamcp that runs the scripts: this very program, by its real path. */
static bool this_program(char *out, size_t n, buf *err) {
  if (!os_self_exe(NULL, out, n)) {
    buf_printf(err, "cannot tell where this luamcp is: %s", strerror(errno));
    return false;
  }
  return true;
}

/* A remote entry, compact, in the client's style, with "headers"? */
static void write_remote_entry(buf *b, const install_request *r) {
  buf_putc(b, '{');
  switch (r->client->remote) {
  case REMOTE_TYPED_HTTP: buf_puts(b, "\"type\":\"http\",\"url\":"); break;
  case REMOTE_HTTP_URL: buf_puts(b, "\"httpUrl\":"); break;
  default: buf_puts(b, "\"url\":"); break;
  }
  json_write_string(b, r->url, strlen(r->url));
  for (int i = 0; i < r->header_count; i++) {
    const char *colon = strchr(r->headers[i], ':'), *value = colon + 1;
    while (*value == ' ' || *value == '\t') value++;
    buf_append_str(b, i ? "," : ",\"headers\":{");
    json_write_string(b, r->headers[i], (size_t)(colon - r->headers[i]));
    buf_putc(b, ':');
    json_write_string(b, value, strlen(value));
  }
  if (r->header_count) buf_putc(b, '}');
  buf_putc(b, '}');
}

/* The entry, compact: {"type": "stdio"?, "command", "args"?, "env"?}. */
static bool write_entry(buf *b, const install_request *r, const server_start *s, buf *err) {
  if (r->url) {
    write_remote_entry(b, r);
    return true;
  }
  buf_putc(b, '{');
  if (r->client->typed) buf_puts(b, "\"type\":\"stdio\",");
  buf_puts(b, "\"command\":");
  if (s->program) {
    json_write_string(b, s->target, strlen(s->target));
  } else {
    char self[PATH_MAX];
    if (!this_program(self, sizeof self, err)) return false;
    json_write_string(b, self, strlen(self));
    buf_append_str(b, r->dev ? ",\"args\":[\"dev\"," : ",\"args\":[\"run\",");
    json_write_string(b, s->target, strlen(s->target));
    buf_putc(b, ']');
  }
  bool any = false;
  for (int i = 0; i < r->env_count; i++) {
    size_t key_len = (size_t)(strchr(r->env[i], '=') - r->env[i]);
    /* A key given again keeps its first place and takes its last value,
     * as assignments in a shell do. */
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) seen = strncmp(r->env[j], r->env[i], key_len + 1) == 0;
    if (seen) continue;
    const char *value = r->env[i] + key_len + 1;
    for (int j = i + 1; j < r->env_count; j++)
      if (strncmp(r->env[j], r->env[i], key_len + 1) == 0) value = r->env[j] + key_len + 1;
    buf_append_str(b, any ? "," : ",\"env\":{");
    any = true;
    json_write_string(b, r->env[i], key_len);
    buf_putc(b, ':');
    json_write_string(b, value, strlen(value));
  }
  if (any) buf_putc(b, '}');
  buf_putc(b, '}');
  return true;
}

/* ---- The configuration with the entry in it ----------------------------- */

static bool key_is(const json_member *m, const char *key) {
  return m->key_len == strlen(key) && memcmp(m->key, key, m->key_len) == 0;
}

/* The last member called key (the one clients read when a key repeats),
 * or -1. */
static long last_member(const json_value *object, const char *key) {
  long found = -1;
  for (uint32_t i = 0; i < object->len; i++)
    if (key_is(&object->u.members[i], key)) found = (long)i;
  return found;
}

static void echo(buf *out, const char *text, const json_value *v) {
  buf_append(out, text + v->src_off, v->src_len);
}

/* Write root, the file's parsed text, compactly with the entry called name
 * in its servers object: in place of the server of that name, or after the
 * others; and the servers object after every other key when there is none.
 * Everything else is copied as it was written. entry NULL: the server of
 * that name is left out (uninstall), every one of that name. */
static bool splice_entry(const char *text, const json_value *root, const char *servers_key, const char *name,
                   const buf *entry, buf *out, bool *replaced, buf *err) {
  if (root->type != JSON_OBJECT) {
    buf_printf(err, "it holds a JSON %s, not an object", json_type_name(root->type));
    return false;
  }
  long servers_at = last_member(root, servers_key);
  const json_value *servers = servers_at >= 0 ? &root->u.members[servers_at].value : NULL;
  if (servers && servers->type != JSON_OBJECT) {
    buf_printf(err, "its \"%s\" is a JSON %s, not an object", servers_key, json_type_name(servers->type));
    return false;
  }
  long entry_at = servers ? last_member(servers, name) : -1;
  *replaced = entry_at >= 0;
  if (!entry && !*replaced) return true; /* nothing to take out */
  buf_putc(out, '{');
  for (uint32_t i = 0; i < root->len; i++) {
    const json_member *m = &root->u.members[i];
    if (i) buf_putc(out, ',');
    json_write_string(out, m->key, m->key_len);
    buf_putc(out, ':');
    if ((long)i != servers_at) {
      echo(out, text, &m->value);
      continue;
    }
    buf_putc(out, '{');
    bool first = true;
    for (uint32_t j = 0; j < servers->len; j++) {
      const json_member *s = &servers->u.members[j];
      if (!entry && key_is(s, name)) continue;
      if (!first) buf_putc(out, ',');
      first = false;
      json_write_string(out, s->key, s->key_len);
      buf_putc(out, ':');
      if ((long)j == entry_at) buf_append(out, entry->data, entry->len);
      else echo(out, text, &s->value);
    }
    if (entry_at < 0) {
      if (servers->len) buf_putc(out, ',');
      json_write_string(out, name, strlen(name));
      buf_putc(out, ':');
      buf_append(out, entry->data, entry->len);
    }
    buf_putc(out, '}');
  }
  if (!servers) {
    if (root->len) buf_putc(out, ',');
    json_write_string(out, servers_key, strlen(servers_key));
    buf_puts(out, ":{");
    json_write_string(out, name, strlen(name));
    buf_putc(out, ':');
    buf_append(out, entry->data, entry->len);
    buf_putc(out, '}');
  }
  buf_putc(out, '}');
  return true;
}

/* Compact JSON we wrote ourselves (no deeper than the file it came from,
 * or than a new entry), as a person would write it. It always parses;
 * checking costs nothing and keeps a mistake here out of the file. */
static bool pretty(const buf *compact, buf *out, buf *err) {
  json_error why;
  json_doc *doc = json_parse(compact->data, compact->len, MAX_JSON_DEPTH, &why);
  if (!doc) {
    buf_printf(err, "luamcp wrote invalid JSON (%s at byte %zu); nothing was written", why.message, why.offset);
    return false;
  }
  json_write_pretty(out, json_doc_root(doc), compact->data, 0);
  buf_putc(out, '\n');
  json_doc_free(doc);
  return true;
}

static bool only_whitespace(const buf *b) {
  for (size_t i = 0; i < b->len; i++)
    if (!strchr(" \t\r\n", b->data[i])) return false;
  return true;
}

/* "line 3, column 7" for a byte offset in text. */
static void describe_offset(buf *out, const char *text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset; i++) {
    if (text[i] == '\n') line++, column = 1;
    else column++;
  }
  buf_printf(out, "line %zu, column %zu", line, column);
}

/* Read the client's file (a missing or empty one is {}), put the entry in,
 * keep a backup, and write it back whole. */
static int install_into_file(const install_request *r, const server_start *s, const buf *entry) {
  const client_app *c = r->client;
  buf old = BUF_INIT, compact = BUF_INIT, fresh = BUF_INIT, err = BUF_INIT;
  json_doc *doc = NULL;
  char *backup = NULL;
  int code = 1;
  /* A configuration that is a symbolic link (kept with other dotfiles) is
   * written where it leads, and stays a link. */
  char *resolved = os_path_real(s->config);
  const char *target = resolved ? resolved : s->config;
  struct stat st;
  bool exists = stat(target, &st) == 0;
  if (!exists && errno != ENOENT) {
    buf_printf(&err, "%s: %s", s->config, strerror(errno));
    goto done;
  }
  if (exists && !files_read(target, &old, &err)) goto done;
  const char *text = only_whitespace(&old) ? "{}" : old.data;
  size_t text_len = only_whitespace(&old) ? 2 : old.len;
  json_error parse_error;
  doc = json_parse(text, text_len, MAX_JSON_DEPTH, &parse_error);
  if (!doc) {
    buf_printf(&err, "%s is not valid JSON (", s->config);
    describe_offset(&err, text, parse_error.offset);
    buf_printf(&err, ": %s), so it was left as it is. luamcp reads strict JSON, without the comments and "
                     "trailing commas some clients allow. ",
               parse_error.message);
    if (entry)
      buf_printf(&err, "Fix it, or add the entry by hand: luamcp install %s %s%s --print", c->id,
                 r->path ? r->path : "--url ", r->path ? "" : r->url);
    else
      buf_printf(&err, "Fix it, or take the entry \"%s\" out by hand", s->name);
    goto done;
  }
  bool replaced;
  buf why = BUF_INIT;
  if (!splice_entry(text, json_doc_root(doc), c->servers_key, s->name, entry, &compact, &replaced, &why)) {
    buf_printf(&err, "%s: %s, so it was left as it is", s->config, why.data);
    buf_free(&why);
    goto done;
  }
  if (!entry && !replaced) {
    buf_printf(&err, "%s has no server \"%s\" in its \"%s\": nothing to take out", s->config, s->name, c->servers_key);
    goto done;
  }
  if (!pretty(&compact, &fresh, &err)) goto done;
  if (exists && fresh.len == old.len && memcmp(fresh.data, old.data, old.len) == 0) {
    printf("%s already has \"%s\" as it would be written: %s is unchanged.\n", c->title, s->name, s->config);
    code = 0;
    goto done;
  }
  if (!make_parents(target, &err)) goto done;
  /* New: the user's entries may hold secrets (--env); a project's file is
   * there to be shared with the project. */
  mode_t mode = exists ? st.st_mode & 07777 : r->project ? 0644 : 0600;
  if (exists) {
    size_t n = strlen(s->config) + sizeof ".bak";
    backup = malloc(n);
    snprintf(backup, n, "%s.bak", s->config);
    if (!files_replace(backup, &old, mode, &err)) goto done;
  }
  if (!files_replace(target, &fresh, mode, &err)) goto done;
  if (!entry) printf("Removed \"%s\" from %s: %s\n", s->name, c->title, s->config);
  else printf("%s \"%s\" in %s: %s\n", replaced ? "Replaced" : "Added", s->name, c->title, s->config);
  if (backup) printf("The file as it was is in %s.\n", backup);
  if (entry) printf("%s\n", c->restart);
  code = 0;
done:
  if (code) fprintf(stderr, "luamcp %s: %s\n", command_name, err.data);
  json_doc_free(doc);
  buf_free(&old);
  buf_free(&compact);
  buf_free(&fresh);
  buf_free(&err);
  free(backup);
  free(resolved);
  return code;
}

/* --print: the entry inside its servers object, as it would be written. */
static bool print_entry(const install_request *r, const server_start *s, const buf *entry, buf *err) {
  buf compact = BUF_INIT, out = BUF_INIT;
  buf_putc(&compact, '{');
  json_write_string(&compact, r->client->servers_key, strlen(r->client->servers_key));
  buf_puts(&compact, ":{");
  json_write_string(&compact, s->name, strlen(s->name));
  buf_putc(&compact, ':');
  buf_append(&compact, entry->data, entry->len);
  buf_puts(&compact, "}}");
  bool ok = pretty(&compact, &out, err);
  if (ok) {
    fwrite(out.data, 1, out.len, stdout);
    fprintf(stderr, "luamcp install: not written; %s reads it from %s\n", r->client->title, s->config);
  }
  buf_free(&compact);
  buf_free(&out);
  return ok;
}

/* A required setting left without a value: the client would start a
 * server whose tools fail for want of it. A warning, since a tool that
 * does not need it still works (as under luamcp run). */
static void warn_unset(const install_request *r, const server_start *s) {
  if (!s->unset.len) return;
  bool several = strchr(s->unset.data, ',') != NULL;
  fprintf(stderr,
          "luamcp install: warning: no value for the required setting%s %s of mcp.server{config}: the client starts "
          "the server without %s, and os.getenv returns nil. Give %s a value: luamcp install %s %s%s%s\n",
          several ? "s" : "", s->unset.data, several ? "them" : "it", several ? "each" : "it", r->client->id,
          r->path, s->unset_flags.data, r->project ? " --project" : "");
}

int install_command(int argc, char **argv) {
  install_request r = {0};
  if (!parse_install_options(argc, argv, &r)) {
    install_usage(stdout);
    return 0;
  }
  server_start s = {0};
  buf err = BUF_INIT, entry = BUF_INIT;
  int code = 1;
  s.config = config_path(r.client, r.project, &err);
  if (!s.config || !learn_server(&r, &s, &err) || !write_entry(&entry, &r, &s, &err) ||
      (r.print && !print_entry(&r, &s, &entry, &err))) {
    fprintf(stderr, "luamcp install: %s\n", err.data ? err.data : "failed");
    goto done;
  }
  code = r.print ? 0 : install_into_file(&r, &s, &entry);
  if (code == 0) warn_unset(&r, &s);
done:
  free(s.target);
  free(s.name);
  free(s.config);
  buf_free(&s.unset);
  buf_free(&s.unset_flags);
  buf_free(&err);
  buf_free(&entry);
  return code;
}

int uninstall_command(int argc, char **argv) {
  install_request r = {.uninstall = true};
  command_name = "uninstall";
  if (!parse_install_options(argc, argv, &r)) {
    install_usage(stdout);
    return 0;
  }
  server_start s = {0};
  buf err = BUF_INIT;
  int code = 1;
  s.config = config_path(r.client, r.project, &err);
  s.name = strdup(r.name);
  if (!s.config) fprintf(stderr, "luamcp uninstall: %s\n", err.data);
  else code = install_into_file(&r, &s, NULL);
  free(s.name);
  free(s.config);
  buf_free(&err);
  return code;
}
