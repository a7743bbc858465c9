/*
 * release.c - `luamcp release DIR`: see release.h. This file is the
 * command: its options, the output folder, the build, the names each door
 * needs (the MCP Registry's, npm's, the image's) and SHA256SUMS. What each
 * artifact looks like is its writer's (release_npm.c, release_oci.c,
 * release_sign.c, release_registry.c).
 */
#include "cli/release.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "app/curl_lib.h"
#include "cli/build.h"
#include "cli/files.h"
#include "cli/suggest.h"
#include "core/json.h"
#include "os/crypto.h"
#include "os/fs.h"

/* The build options release passes on as they are: the rest are its own. */
static const char *const BUILD_TEXT_OPTIONS[] = {"--name", "--version", "--description", "--author", "--license",
                                                 "--icon", "--runtime", NULL};
static const char *const BUILD_FLAGS[] = {"--bytecode", "--strip", "--strict", NULL};

/* What the command line says. Owner: release_command's stack; the strings
 * point into argv. */
typedef struct release_options {
  const char *path, *out, *targets;
  const char *registry_name, *npm_name, *image, *repository, *mcpb_url;
  const char *sign_cert, *sign_key, *sign_chain, *ca_certs;
  int build_argc;
  char **build_argv; /* DIR --target LIST and the build options given */
} release_options;

void release_usage(FILE *to) {
  fprintf(to,
          "Usage: luamcp release PATH --registry-name NAME [-o OUT] [options]\n"
          "\n"
          "Make, in the folder OUT (default: dist), every artifact people install an MCP\n"
          "server from, for each target: the programs (luamcp build), one .mcpb for Claude\n"
          "Desktop (signed with --sign-cert), npm packages (one per platform and a main\n"
          "package whose bin starts the right one: npx -y NPM), an OCI image for amd64 and\n"
          "arm64 (oci/ and NAME-VERSION.oci.tar, for docker run and podman run), the MCP\n"
          "Registry's server.json listing them, and SHA256SUMS. The same inputs give the\n"
          "same bytes. OUT must be new, empty, or an earlier release's (whose files, as its\n"
          "SHA256SUMS lists them, are replaced when unchanged). Everything is checked\n"
          "before anything is written; a release that fails leaves OUT empty.\n"
          "\n"
          "Options:\n"
          "  -o, --output OUT        the folder to write (default: dist)\n"
          "  --target TARGET[,...]   linux-x64, linux-arm64, windows-x64 (default: all three;\n"
          "                          runtimes as luamcp build finds them)\n"
          "  --registry-name NAME    the server's name in the MCP Registry, reverse-DNS:\n"
          "                          io.github.YOU/NAME (also package.json's mcpName and the\n"
          "                          image's io.modelcontextprotocol.server.name label)\n"
          "  --npm NAME              the main npm package (default: @YOU/NAME for\n"
          "                          io.github.YOU/NAME, else NAME)\n"
          "  --image REPOSITORY      the image's name without tag (default:\n"
          "                          ghcr.io/YOU/NAME for io.github.YOU/NAME)\n"
          "  --repository URL        the source repository (server.json, package.json)\n"
          "  --mcpb-url URL          where the .mcpb will be downloaded from (default: the\n"
          "                          GitHub release of --repository, or of\n"
          "                          github.com/YOU/NAME, tag vVERSION)\n"
          "  --sign-cert FILE        sign the .mcpb with this PEM certificate ...\n"
          "  --sign-key FILE         ... and this PEM private key (RSA), as `mcpb sign` does\n"
          "  --sign-chain FILE       PEM intermediate certificates to carry in the signature\n"
          "  --ca-certs FILE         the CA certificates the image carries (default:\n"
          "                          SSL_CERT_FILE, else this system's bundle)\n"
          "  --name, --version, --description, --author, --license, --icon, --runtime\n"
          "  TARGET=FILE, --bytecode, --strip, --strict: as for luamcp build\n"
          "\n"
          "The version must be a semantic version (1.2.0, 2.0.0-rc.1): npm and the Registry\n"
          "need one. See docs/shipping.md for what each door looks like to its users.\n");
}

static void release_usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "luamcp: release: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nRun 'luamcp release --help' for usage.\n");
  exit(2);
}

static bool in_list(const char *const *list, const char *a) {
  for (size_t i = 0; list[i]; i++)
    if (strcmp(list[i], a) == 0) return true;
  return false;
}

static void parse_release_options(int argc, char **argv, release_options *o) {
  /* build's argv: PATH, --target LIST, then what is passed on. */
  o->build_argv = calloc((size_t)argc + 4, sizeof(char *));
  o->build_argc = 3;
  struct {
    const char *flag;
    const char **into;
  } own[] = {{"-o", &o->out},
             {"--output", &o->out},
             {"--target", &o->targets},
             {"--registry-name", &o->registry_name},
             {"--npm", &o->npm_name},
             {"--image", &o->image},
             {"--repository", &o->repository},
             {"--mcpb-url", &o->mcpb_url},
             {"--sign-cert", &o->sign_cert},
             {"--sign-key", &o->sign_key},
             {"--sign-chain", &o->sign_chain},
             {"--ca-certs", &o->ca_certs}};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    bool taken = false;
    for (size_t k = 0; !taken && k < sizeof own / sizeof *own; k++) {
      if (strcmp(a, own[k].flag) != 0) continue;
      if (!value) release_usage_error("%s needs a value", a);
      if (*own[k].into && own[k].into != &o->targets) release_usage_error("%s is given twice", a);
      *own[k].into = value;
      i++;
      taken = true;
    }
    if (taken) continue;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      release_usage(stdout);
      exit(0);
    }
    if (in_list(BUILD_TEXT_OPTIONS, a)) {
      if (!value) release_usage_error("%s needs a value", a);
      o->build_argv[o->build_argc++] = argv[i++];
      o->build_argv[o->build_argc++] = argv[i];
    } else if (in_list(BUILD_FLAGS, a)) {
      o->build_argv[o->build_argc++] = argv[i];
    } else if (strcmp(a, "--mcpb") == 0 || strcmp(a, "--static") == 0) {
      release_usage_error("%s: release always writes OUT/NAME.mcpb, and builds linux-x64 with the static runtime", a);
    } else if (a[0] == '-' && a[1]) {
      buf message = BUF_INIT;
      buf_printf(&message, "unknown option %s%s", a, suggest_option(a, release_usage));
      release_usage_error("%s", message.data);
    } else if (!o->path) {
      o->path = a;
    } else {
      release_usage_error("unexpected argument %s (one script folder)", a);
    }
  }
  if (!o->path) release_usage_error("%s", "release needs a script folder");
  if (!o->registry_name)
    release_usage_error("%s", "the MCP Registry needs the server's name: --registry-name io.github.YOU/NAME "
                              "(reverse-DNS; it is also package.json's mcpName and the image's label)");
  if (!!o->sign_cert != !!o->sign_key) release_usage_error("%s", "--sign-cert and --sign-key go together");
  if (o->sign_chain && !o->sign_cert) release_usage_error("%s", "--sign-chain needs --sign-cert and --sign-key");
  if (!o->out) o->out = "dist";
  o->build_argv[0] = (char *)o->path;
  o->build_argv[1] = "--target";
  o->build_argv[2] = (char *)(o->targets ? o->targets : "linux-x64,linux-arm64,windows-x64");
}

/* ---- Names ------------------------------------------------------------ */

/* A semantic version (semver.org 2.0.0): MAJOR.MINOR.PATCH, no leading
 * zeros, then -PRERELEASE and +BUILD of dot-separated [0-9A-Za-z-]. */
static bool is_semver(const char *v) {
  const char *p = v;
  for (int part = 0; part < 3; part++) {
    if (!isdigit((unsigned char)*p)) return false;
    if (*p == '0' && isdigit((unsigned char)p[1])) return false;
    while (isdigit((unsigned char)*p)) p++;
    if (part < 2 && *p++ != '.') return false;
  }
  for (char mark = '-'; *p; mark = '+') {
    if (*p != mark && !(mark == '-' && *p == '+')) return false;
    if (*p == '+') mark = '+';
    p++;
    for (;;) {
      size_t n = strspn(p, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-");
      if (n == 0) return false;
      /* A numeric pre-release identifier has no leading zero (npm refuses 1.0.0-rc.01). */
      if (mark == '-' && n > 1 && p[0] == '0' && strspn(p, "0123456789") == n) return false;
      p += n;
      if (*p != '.') break;
      p++;
    }
    if (mark == '+' && *p) return false;
  }
  return true;
}

/* The Registry's server name: NAMESPACE/NAME, as its schema's pattern
 * ^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$ and length 3..200 say. */
static bool is_registry_name(const char *n) {
  size_t ns = strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-");
  if (ns == 0 || n[ns] != '/') return false;
  size_t rest = strspn(n + ns + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
  size_t len = strlen(n);
  return rest > 0 && ns + 1 + rest == len && len >= 3 && len <= 200;
}

/* The owner in io.github.OWNER/NAME, lower-cased (npm scopes and image
 * names are), malloc'ed; NULL for another namespace. */
static char *github_owner(const char *registry_name) {
  static const char prefix[] = "io.github.";
  if (strncmp(registry_name, prefix, sizeof prefix - 1) != 0) return NULL;
  const char *owner = registry_name + sizeof prefix - 1;
  size_t n = strcspn(owner, "/");
  if (n == 0) return NULL;
  char *lower = strndup(owner, n);
  for (char *c = lower; *c; c++) *c = (char)tolower((unsigned char)*c);
  return lower;
}

static char *lower_copy(const char *s) {
  char *l = strdup(s);
  for (char *c = l; *c; c++) *c = (char)tolower((unsigned char)*c);
  return l;
}

/* The server's name names files (OUT/NAME.mcpb, the programs), the npm
 * bin and the program in the image: one word of letters, digits, '.', '_'
 * and '-', as every one of those takes it. */
static bool is_file_name(const char *n) {
  size_t len = strlen(n);
  return len > 0 && len <= 100 && isalnum((unsigned char)n[0]) &&
         strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
}

/* An image repository as docker and OCI registries take it: an optional
 * host[:port] (it has a '.' or ':', or is localhost), then path components
 * of lowercase letters and digits joined by one '.', '_' or '-' (or "__"). */
static bool is_image_repository(const char *ref) {
  const char *p = ref;
  size_t first = strcspn(p, "/");
  bool host = p[first] == '/' && (memchr(p, '.', first) || memchr(p, ':', first) ||
                                  (first == 9 && strncmp(p, "localhost", 9) == 0));
  if (host) {
    if (strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") != first) return false;
    p += first + 1;
  }
  for (;;) {
    size_t len = strcspn(p, "/");
    if (len == 0) return false;
    for (size_t i = 0; i < len; i++) {
      char c = p[i];
      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) continue;
      bool between = i > 0 && i + 1 < len && isalnum((unsigned char)p[i - 1]);
      if (c == '_' && i + 2 < len && p[i + 1] == '_' && between) i++;
      else if (!((c == '.' || c == '_' || c == '-') && between)) return false;
    }
    if (!p[len]) return true;
    p += len + 1;
  }
}

/* Characters, not bytes: the Registry counts a description's length in
 * characters (UTF-8 continuation bytes are not counted). */
static size_t utf8_length(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

/* What the options say, checked before anything is built or written. */
static bool check_options(const release_options *o, buf *err) {
  if (!is_registry_name(o->registry_name)) {
    buf_printf(err, "--registry-name %s: the MCP Registry wants NAMESPACE/NAME in reverse-DNS, letters, digits, "
                    "'.', '-' (and '_' after the /), e.g. io.github.YOU/weather",
               o->registry_name);
    return false;
  }
  if (o->npm_name && !release_npm_name_ok(o->npm_name, err)) return false;
  if (o->image && !is_image_repository(o->image)) {
    buf_printf(err, "--image %s: an image repository is [HOST/]PATH, the path in lowercase letters and digits "
                    "joined by '.', '_' or '-', with no tag (ghcr.io/you/weather)",
               o->image);
    return false;
  }
  return !o->sign_cert || release_sign_check(o->sign_cert, o->sign_key, o->sign_chain, err);
}

/* The names each door needs, from the options and the manifest's facts;
 * false with the reason when one is missing or malformed. */
static bool choose_names(const release_options *o, const build_report *facts, bool image, release_info *r,
                         buf *err) {
  if (!is_file_name(facts->name)) {
    buf_printf(err, "the server's name \"%s\" names the files, the npm command and the image's program: use "
                    "letters, digits, '.', '_' and '-', starting with a letter or digit (mcp.server{ name } or --name)",
               facts->name);
    return false;
  }
  if (!is_semver(facts->version)) {
    buf_printf(err, "version %s is not a semantic version (1.2.0, 2.0.0-rc.1): npm and the MCP Registry need one; "
                    "set version in mcp.server{} or pass --version",
               facts->version);
    return false;
  }
  size_t chars = utf8_length(facts->description);
  if (chars == 0 || chars > 100) {
    buf_printf(err, "the description is %zu characters; the MCP Registry takes 1 to 100: pass --description or set "
                    "one in mcp.server{}",
               chars);
    return false;
  }
  /* An image tag takes no '+' (semver's build metadata): '_' stands for it. */
  r->image_tag = strdup(facts->version);
  for (char *c = r->image_tag; *c; c++)
    if (*c == '+') *c = '_';
  r->registry_name = strdup(o->registry_name);
  char *owner = github_owner(o->registry_name);
  char *short_name = lower_copy(strchr(o->registry_name, '/') + 1);
  buf b = BUF_INIT;
  if (o->npm_name) r->npm_name = strdup(o->npm_name);
  else if (owner) buf_printf(&b, "@%s/%s", owner, short_name), r->npm_name = buf_detach(&b, NULL);
  else r->npm_name = strdup(short_name);
  if (o->image) r->image = strdup(o->image);
  else if (owner) buf_printf(&b, "ghcr.io/%s/%s", owner, short_name), r->image = buf_detach(&b, NULL);
  if (o->repository) r->repository = strdup(o->repository);
  const char *github_repo = NULL;
  if (o->repository && strncmp(o->repository, "https://github.com/", 19) == 0) github_repo = o->repository;
  if (o->mcpb_url) {
    r->mcpb_url = strdup(o->mcpb_url);
  } else if (github_repo) {
    size_t n = strlen(github_repo);
    while (n && github_repo[n - 1] == '/') n--;
    if (n > 4 && strncmp(github_repo + n - 4, ".git", 4) == 0) n -= 4;
    buf_printf(&b, "%.*s/releases/download/v%s/%s.mcpb", (int)n, github_repo, facts->version, facts->name);
    r->mcpb_url = buf_detach(&b, NULL);
  } else if (owner) {
    /* io.github.You/weather: github.com/You/weather, the owner as spelt there */
    const char *spelt = o->registry_name + strlen("io.github.");
    buf_printf(&b, "https://github.com/%.*s/%s/releases/download/v%s/%s.mcpb", (int)strcspn(spelt, "/"), spelt,
               strchr(o->registry_name, '/') + 1, facts->version, facts->name);
    r->mcpb_url = buf_detach(&b, NULL);
  }
  free(owner);
  free(short_name);
  if (!release_npm_name_ok(r->npm_name, err)) {
    buf_puts(err, " (from --registry-name: pass --npm)");
    return false;
  }
  if (r->image && !is_image_repository(r->image)) {
    buf_printf(err, "the image name %s (from --registry-name) is not one a registry takes: pass --image", r->image);
    return false;
  }
  if (image && !r->image) {
    buf_printf(err, "--image: the image needs a name where it will be pushed (ghcr.io/YOU/NAME, docker.io/YOU/NAME); "
                    "%s is not an io.github. name to take it from",
               o->registry_name);
    return false;
  }
  if (!r->mcpb_url) {
    buf_printf(err, "--mcpb-url: server.json needs the .mcpb's download URL (or --repository "
                    "https://github.com/YOU/REPO, whose release vVERSION it then names)");
    return false;
  }
  return true;
}

/* ---- The build's facts ------------------------------------------------ */

/* A setting field's JSON text as a string: a JSON string decoded, any
 * other value as its text (10, true); malloc'ed. */
static char *field_text(const char *json) {
  json_error e;
  json_doc *doc = json_parse(json, strlen(json), 4, &e);
  const json_value *v = doc ? json_doc_root(doc) : NULL;
  char *text = v && v->type == JSON_STRING ? strndup(v->u.string, v->len) : strdup(json);
  json_doc_free(doc);
  return text;
}

static void take_settings(build_report *b, release_info *r) {
  r->settings = calloc(b->setting_count + 1, sizeof *r->settings);
  r->setting_count = b->setting_count;
  for (size_t i = 0; i < b->setting_count; i++) {
    const build_setting *s = &b->settings[i];
    release_setting *out = &r->settings[i];
    out->key = strdup(s->key);
    out->env = strdup(s->env);
    for (size_t f = 0; f < s->field_count; f++) {
      const char *name = s->field_names[f], *json = s->field_json[f];
      if (strcmp(name, "type") == 0) out->type = field_text(json);
      else if (strcmp(name, "title") == 0) out->title = field_text(json);
      else if (strcmp(name, "description") == 0) out->description = field_text(json);
      else if (strcmp(name, "default") == 0) out->default_text = field_text(json);
      else if (strcmp(name, "required") == 0) out->required = strcmp(json, "true") == 0;
      else if (strcmp(name, "sensitive") == 0) out->sensitive = strcmp(json, "true") == 0;
    }
  }
}

static bool take_build(build_report *b, release_info *r, buf *err) {
  r->name = b->name, b->name = NULL;
  r->version = b->version, b->version = NULL;
  r->description = b->description, b->description = NULL;
  r->license = b->license, b->license = NULL;
  r->author = b->author, b->author = NULL;
  r->mcpb_path = b->mcpb, b->mcpb = NULL;
  take_settings(b, r);
  /* In TARGETS' order, whatever order --target gave. */
  for (size_t t = 0; t < TARGET_COUNT; t++) {
    for (size_t i = 0; i < b->program_count; i++) {
      if (b->targets[i] != &TARGETS[t]) continue;
      release_program *p = &r->programs[r->program_count++];
      p->target = b->targets[i];
      p->path = b->programs[i], b->programs[i] = NULL;
      const char *slash = strrchr(p->path, '/');
      p->file = strdup(slash ? slash + 1 : p->path);
      if (!files_read(p->path, &p->bytes, err)) return false;
    }
  }
  return true;
}

void release_info_free(release_info *r) {
  char **strings[] = {&r->name,     &r->version, &r->description, &r->license,  &r->author,    &r->registry_name,
                      &r->npm_name, &r->image,   &r->image_tag,   &r->repository, &r->mcpb_url, &r->mcpb_path,
                      &r->out_dir};
  for (size_t i = 0; i < sizeof strings / sizeof *strings; i++) free(*strings[i]);
  for (size_t i = 0; i < r->setting_count; i++) {
    release_setting *s = &r->settings[i];
    free(s->key), free(s->env), free(s->type), free(s->title), free(s->description), free(s->default_text);
  }
  free(r->settings);
  for (size_t i = 0; i < r->program_count; i++) {
    free(r->programs[i].path);
    free(r->programs[i].file);
    buf_free(&r->programs[i].bytes);
  }
  *r = (release_info){0};
}

const release_program *release_program_for(const release_info *r, const char *target_name) {
  for (size_t i = 0; i < r->program_count; i++)
    if (strcmp(r->programs[i].target->name, target_name) == 0) return &r->programs[i];
  return NULL;
}

/* ---- The output folder -------------------------------------------------- */

/* Every file under dir, as paths relative to it ('/' between parts), sorted
 * byte-wise: the order SHA256SUMS lists them in. */
typedef struct path_list {
  char **paths;
  size_t count, cap;
} path_list;

static void path_list_free(path_list *l) {
  for (size_t i = 0; i < l->count; i++) free(l->paths[i]);
  free(l->paths);
  *l = (path_list){0};
}

static int compare_paths(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void path_list_add(path_list *l, const char *path) {
  if (l->count == l->cap) l->paths = realloc(l->paths, (l->cap = l->cap * 2 + 8) * sizeof(char *));
  l->paths[l->count++] = strdup(path);
}

/* Walk dir (rel inside the top) with libuv's scandir, which speaks UTF-8 on
 * every OS. Folders go into dirs (deepest last) when dirs is given. A link
 * is listed as a file, never followed. */
static bool list_files(const char *top, const char *rel, path_list *files, path_list *dirs, int depth, buf *err) {
  buf dir = BUF_INIT;
  buf_printf(&dir, "%s%s%s", top, *rel ? "/" : "", rel);
  uv_fs_t req;
  int n = uv_fs_scandir(NULL, &req, dir.data, 0, NULL);
  bool ok = n >= 0 && depth < 32;
  if (!ok) buf_printf(err, "%s: %s", dir.data, n < 0 ? uv_strerror(n) : "folders nested too deep");
  uv_dirent_t e;
  while (ok && uv_fs_scandir_next(&req, &e) != UV_EOF) {
    buf child = BUF_INIT;
    buf_printf(&child, "%s%s%s", rel, *rel ? "/" : "", e.name);
    bool is_dir = e.type == UV_DIRENT_DIR;
    if (e.type == UV_DIRENT_UNKNOWN) {
      /* A file system without d_type: ask the entry itself. */
      uv_fs_t st;
      buf full = BUF_INIT;
      buf_printf(&full, "%s/%s", top, child.data);
      is_dir = uv_fs_lstat(NULL, &st, full.data, NULL) == 0 && (st.statbuf.st_mode & S_IFMT) == S_IFDIR;
      uv_fs_req_cleanup(&st);
      buf_free(&full);
    }
    if (is_dir) {
      if (dirs) path_list_add(dirs, child.data);
      ok = list_files(top, child.data, files, dirs, depth + 1, err);
    } else {
      path_list_add(files, child.data);
    }
    buf_free(&child);
  }
  uv_fs_req_cleanup(&req);
  buf_free(&dir);
  return ok;
}

static void sha256_hex(const buf *data, char hex[2 * OS_SHA256_BYTES + 1]) {
  uint8_t digest[OS_SHA256_BYTES];
  os_sha256(data->data, data->len, digest);
  for (size_t k = 0; k < OS_SHA256_BYTES; k++) snprintf(hex + 2 * k, 3, "%02x", digest[k]);
}

/* The SHA-256 an earlier release's SHA256SUMS lists for path, or NULL:
 * its lines are exactly "HEX  PATH". */
static const char *listed_sum(const char *sums, const char *path) {
  size_t path_len = strlen(path);
  for (const char *line = sums; *line;) {
    size_t len = strcspn(line, "\n");
    if (len == 2 * OS_SHA256_BYTES + 2 + path_len && strncmp(line + 2 * OS_SHA256_BYTES, "  ", 2) == 0 &&
        strncmp(line + 2 * OS_SHA256_BYTES + 2, path, path_len) == 0)
      return line;
    line += len + (line[len] == '\n');
  }
  return NULL;
}

/* Remove the files (then the folders, deepest first) of dirs and files. */
static bool remove_listed(const char *out, const path_list *files, const path_list *dirs, buf *err) {
  buf path = BUF_INIT;
  bool ok = true;
  uv_fs_t req;
  for (size_t i = 0; ok && i < files->count; i++) {
    buf_clear(&path);
    buf_printf(&path, "%s/%s", out, files->paths[i]);
    int rc = uv_fs_unlink(NULL, &req, path.data, NULL);
    uv_fs_req_cleanup(&req);
    if (rc < 0) buf_printf(err, "%s: %s", path.data, uv_strerror(rc)), ok = false;
  }
  for (size_t i = dirs->count; ok && i-- > 0;) {
    buf_clear(&path);
    buf_printf(&path, "%s/%s", out, dirs->paths[i]);
    uv_fs_rmdir(NULL, &req, path.data, NULL);
    uv_fs_req_cleanup(&req);
  }
  buf_free(&path);
  return ok;
}

/* OUT: made when missing; an empty folder is used as it is; an earlier
 * release is emptied. An earlier release is a folder whose SHA256SUMS
 * lists server.json, which luamcp release wrote, and every other file in
 * it with the bytes it still has. Anything else is refused, naming the
 * file: release never deletes a file it did not write, nor one changed
 * since. */
static bool prepare_out(const char *out, buf *err) {
  uv_fs_t req;
  int rc = uv_fs_stat(NULL, &req, out, NULL);
  bool is_dir = rc == 0 && (req.statbuf.st_mode & S_IFMT) == S_IFDIR;
  uv_fs_req_cleanup(&req);
  if (rc == UV_ENOENT) {
    rc = uv_fs_mkdir(NULL, &req, out, 0755, NULL);
    uv_fs_req_cleanup(&req);
    if (rc < 0) buf_printf(err, "-o %s: %s", out, uv_strerror(rc));
    return rc >= 0;
  }
  if (rc < 0 || !is_dir) {
    buf_printf(err, "-o %s: %s", out, rc < 0 ? uv_strerror(rc) : "not a folder");
    return false;
  }
  path_list files = {0}, dirs = {0};
  bool ok = list_files(out, "", &files, &dirs, 0, err);
  buf sums = BUF_INIT, path = BUF_INIT, data = BUF_INIT, unread = BUF_INIT;
  buf_printf(&path, "%s/SHA256SUMS", out);
  bool earlier = ok && files.count && files_read(path.data, &sums, &unread) && sums.data;
  buf_clear(&path);
  buf_printf(&path, "%s/server.json", out);
  earlier = earlier && listed_sum(sums.data, "server.json") && files_read(path.data, &data, &unread) &&
            strstr(data.data, "\"tool\": \"luamcp release\"");
  if (ok && (files.count || dirs.count) && !earlier) {
    buf_printf(err, "-o %s: the folder holds files, and is not an earlier luamcp release (a SHA256SUMS that "
                    "lists its server.json): give a new or empty folder",
               out);
    ok = false;
  }
  for (size_t i = 0; ok && i < files.count; i++) {
    if (strcmp(files.paths[i], "SHA256SUMS") == 0) continue;
    const char *line = listed_sum(sums.data, files.paths[i]);
    char hex[2 * OS_SHA256_BYTES + 1] = "";
    buf_clear(&path);
    buf_clear(&data);
    buf_printf(&path, "%s/%s", out, files.paths[i]);
    if (line && files_read(path.data, &data, &unread)) sha256_hex(&data, hex);
    if (!line) {
      buf_printf(err, "-o %s: %s is not a file of the earlier release (its SHA256SUMS does not list it): move it "
                      "away, or give another folder",
                 out, files.paths[i]);
      ok = false;
    } else if (strncmp(line, hex, 2 * OS_SHA256_BYTES) != 0) {
      buf_printf(err, "-o %s: %s has changed since the earlier release wrote it: move it away, or give another "
                      "folder",
                 out, files.paths[i]);
      ok = false;
    }
  }
  ok = ok && remove_listed(out, &files, &dirs, err);
  buf_free(&sums);
  buf_free(&path);
  buf_free(&data);
  buf_free(&unread);
  path_list_free(&files);
  path_list_free(&dirs);
  return ok;
}

/* After a failure once OUT was prepared: what this run wrote is taken away
 * again (OUT held nothing else), so that OUT is left empty, not half made. */
static void discard_out(const char *out) {
  path_list files = {0}, dirs = {0};
  buf ignored = BUF_INIT;
  if (list_files(out, "", &files, &dirs, 0, &ignored)) remove_listed(out, &files, &dirs, &ignored);
  buf_free(&ignored);
  path_list_free(&files);
  path_list_free(&dirs);
}

/* SHA256SUMS: every file in OUT but itself, in sha256sum's format
 * ("HEX  PATH"), sorted, so `sha256sum -c SHA256SUMS` checks them all. */
static bool write_sums(const char *out, size_t *count, buf *err) {
  path_list files = {0};
  bool ok = list_files(out, "", &files, NULL, 0, err);
  qsort(files.paths, files.count, sizeof *files.paths, compare_paths);
  buf sums = BUF_INIT, path = BUF_INIT, data = BUF_INIT;
  *count = 0;
  for (size_t i = 0; ok && i < files.count; i++) {
    if (strcmp(files.paths[i], "SHA256SUMS") == 0) continue;
    buf_clear(&path);
    buf_clear(&data);
    buf_printf(&path, "%s/%s", out, files.paths[i]);
    ok = files_read(path.data, &data, err);
    char hex[2 * OS_SHA256_BYTES + 1];
    sha256_hex(&data, hex);
    buf_printf(&sums, "%s  %s\n", hex, files.paths[i]);
    (*count)++;
  }
  buf_clear(&path);
  buf_printf(&path, "%s/SHA256SUMS", out);
  ok = ok && files_replace(path.data, &sums, 0644, err);
  buf_free(&sums);
  buf_free(&path);
  buf_free(&data);
  path_list_free(&files);
  return ok;
}

/* The CA certificates the image carries: --ca-certs, else SSL_CERT_FILE,
 * else the first of the distributions' bundles found here. */
static bool read_ca_bundle(const release_options *o, buf *into, buf *err) {
  const char *file = o->ca_certs ? o->ca_certs : getenv("SSL_CERT_FILE");
  if (file && *file) {
    if (files_read(file, into, err) && into->len) return true;
    if (!err->len) buf_printf(err, "%s is empty", file);
    buf_printf(err, " (%s: the image's CA certificates)", o->ca_certs ? "--ca-certs" : "SSL_CERT_FILE");
    return false;
  }
  for (size_t i = 0; CURL_LIB_CA_BUNDLES[i]; i++) {
    buf ignored = BUF_INIT;
    bool found = files_read(CURL_LIB_CA_BUNDLES[i], into, &ignored);
    buf_free(&ignored);
    if (found) return true;
  }
  buf_printf(err, "the image carries CA certificates, and none were found here (looked at SSL_CERT_FILE");
  for (size_t i = 0; CURL_LIB_CA_BUNDLES[i]; i++) buf_printf(err, ", %s", CURL_LIB_CA_BUNDLES[i]);
  buf_puts(err, "): pass --ca-certs FILE");
  return false;
}


/* What release_check needs, and what it fills. */
typedef struct release_run {
  const release_options *o;
  release_info *r;
  buf *ca;          /* the image's CA certificates, read when there is an image */
  bool image;       /* a Linux target: there is an image to make */
  bool prepared;    /* OUT was emptied for this run: a failure after it empties it again */
} release_run;

/* Once the scripts are loaded, before build writes anything: the names
 * each door needs, the image's CA certificates, then OUT. A release that
 * cannot be made stops here, with OUT as it was. */
static bool release_check(const build_report *facts, void *data, buf *err) {
  release_run *run = data;
  for (size_t i = 0; i < facts->program_count; i++) run->image = run->image || facts->targets[i]->uname_m;
  if (!choose_names(run->o, facts, run->image, run->r, err)) return false;
  if (run->image && !read_ca_bundle(run->o, run->ca, err)) return false;
  run->prepared = prepare_out(run->o->out, err);
  return run->prepared;
}

int release_command(int argc, char **argv) {
  if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
    release_usage(stdout);
    return 0;
  }
  release_options o = {0};
  parse_release_options(argc, argv, &o);
  release_info r = {0};
  build_report report = {0};
  buf err = BUF_INIT, ca = BUF_INIT;
  release_run run = {&o, &r, &ca, false, false};
  int code = 1;
  r.out_dir = strdup(o.out);
  if (!check_options(&o, &err)) goto done;
  code = build_run(o.build_argc, o.build_argv, o.out, release_check, &run, &report);
  if (code != 0) goto quiet;
  code = 1;
  if (!take_build(&report, &r, &err)) goto done;
  if (o.sign_cert && !release_sign_mcpb(&r, o.sign_cert, o.sign_key, o.sign_chain, &err)) goto done;
  if (!release_write_npm(&r, &err)) goto done;
  if (run.image && !release_write_oci(&r, &ca, &err)) goto done;
  if (!release_write_server_json(&r, &err)) goto done;
  size_t sum_count;
  if (!write_sums(o.out, &sum_count, &err)) goto done;
  fprintf(stderr, "luamcp: release %s %s in %s: %zu files, listed in %s/SHA256SUMS\n", r.registry_name, r.version,
          o.out, sum_count, o.out);
  code = 0;
done:
  if (code != 0) fprintf(stderr, "luamcp: release: %s\n", err.data ? err.data : "failed");
quiet:
  if (code != 0 && run.prepared) {
    discard_out(o.out);
    fprintf(stderr, "luamcp: release: nothing is left in %s\n", o.out);
  }
  build_report_free(&report);
  release_info_free(&r);
  buf_free(&err);
  buf_free(&ca);
  free(o.build_argv);
  return code;
}
