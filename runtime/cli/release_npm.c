/*
 * release_npm.c - the npm packages of `luamcp release`, the way esbuild
 * ships its binary: one package per platform (NAME-linux-x64, ...) that
 * holds the program and says, with npm's "os" and "cpu", where it installs,
 * and a main package that lists them all as optionalDependencies, so npm
 * installs only the one for the machine, and whose bin is a small launcher.
 *
 * The launcher finds the installed platform package with require.resolve
 * and then gets out of the way: where Node has process.execve (POSIX, Node
 * 22.15 / 23.11 and later) it replaces itself with the program, so no Node
 * stays behind; elsewhere it spawns the program with stdio inherited (the
 * MCP messages never pass through JavaScript), hands on SIGINT and SIGTERM,
 * and exits as the program did.
 *
 * Every file is written from release_info alone, members in a fixed order:
 * the same inputs give the same bytes.
 */
#include "cli/release.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/files.h"
#include "core/json.h"
#include "os/fs.h"

/* npm refuses to publish a name longer than this. */
#define NPM_NAME_MAX 214
/* The oldest Node the launcher is written for (const, arrow functions,
 * optional catch binding); npm itself needs newer. */
#define NPM_ENGINES_NODE ">=18"

/* One platform package: where npm installs it (Node's process.platform and
 * process.arch, which npm's "os" and "cpu" match) and what it holds. */
typedef struct npm_platform {
  const release_program *program;
  const char *os;  /* "linux", "win32" */
  const char *cpu; /* "x64", "arm64" */
  char *package;   /* "@you/weather-linux-x64" */
  char *folder;    /* OUT/npm/weather-linux-x64 */
  char *bin;       /* "bin/weather" or "bin/weather.exe", inside the package */
} npm_platform;

/* Node's process.arch for a machine the targets build for. */
static const char *npm_cpu(exe_machine machine) {
  switch (machine) {
  case EXE_X86_64: return "x64";
  case EXE_AARCH64: return "arm64";
  default: return NULL;
  }
}

/* ---- What npm accepts ---------------------------------------------------- */

/* One part of a package name (the whole of an unscoped one, or the scope
 * or the name of "@scope/name"): what npm publishes new packages with,
 * lowercase letters, digits, '-', '.' and '_', not starting with '.' or
 * '_' (npm's older names with capitals or "~'!()*" are no longer taken). */
static bool npm_name_part_ok(const char *part, size_t len) {
  if (len == 0 || part[0] == '.' || part[0] == '_') return false;
  for (size_t i = 0; i < len; i++) {
    char c = part[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_')) return false;
  }
  return true;
}

static bool npm_name_ok(const char *name, size_t longest_suffix, buf *err) {
  const char *unscoped = name;
  if (name[0] == '@') {
    const char *slash = strchr(name, '/');
    if (!slash || !npm_name_part_ok(name + 1, (size_t)(slash - name - 1))) {
      buf_printf(err, "npm name \"%s\": a scope is @ then lowercase letters, digits, '-', '.' or '_', then '/' "
                      "(\"@you/weather\")", name);
      return false;
    }
    unscoped = slash + 1;
  }
  if (!npm_name_part_ok(unscoped, strlen(unscoped))) {
    buf_printf(err, "npm name \"%s\": npm takes lowercase letters, digits, '-', '.' and '_', not first '.' or '_' "
                    "(\"weather\" or \"@you/weather\")", name);
    return false;
  }
  if (strcmp(unscoped, "node_modules") == 0 || strcmp(unscoped, "favicon.ico") == 0) {
    buf_printf(err, "npm name \"%s\": npm does not take that name", name);
    return false;
  }
  if (strlen(name) + longest_suffix > NPM_NAME_MAX) {
    buf_printf(err, "npm name \"%s\": with the platform after it (\"-linux-arm64\") it is longer than npm's %d "
                    "characters", name, NPM_NAME_MAX);
    return false;
  }
  return true;
}

bool release_npm_name_ok(const char *name, buf *err) {
  return npm_name_ok(name, strlen("-linux-arm64"), err);
}

/* ---- The files ----------------------------------------------------------- */

static void json_text(buf *b, const char *s) { json_write_string(b, s, strlen(s)); }

/* ,"key": "value" when there is a value. */
static void member(buf *b, const char *indent, const char *key, const char *value) {
  if (!value) return;
  buf_printf(b, ",\n%s\"%s\": ", indent, key);
  json_text(b, value);
}

/* The members every package of the release shares, after "name". */
static void common_members(buf *b, const release_info *r, const char *description) {
  /* npm publish rewrites an https repository URL to git+https://...git (and
   * says so on every publish): written that way, it is already what npm keeps. */
  buf url = BUF_INIT;
  if (r->repository && strncmp(r->repository, "https://", 8) == 0) {
    size_t n = strlen(r->repository);
    while (n > 8 && r->repository[n - 1] == '/') n--;
    bool dot_git = n > 4 && strncmp(r->repository + n - 4, ".git", 4) == 0;
    buf_printf(&url, "git+%.*s%s", (int)n, r->repository, dot_git ? "" : ".git");
  } else if (r->repository) {
    buf_append_str(&url, r->repository);
  }
  member(b, "  ", "version", r->version);
  member(b, "  ", "description", description);
  member(b, "  ", "license", r->license);
  member(b, "  ", "author", r->author);
  if (r->repository) {
    buf_puts(b, ",\n  \"repository\": {\n    \"type\": \"git\"");
    member(b, "    ", "url", url.data);
    buf_puts(b, "\n  }");
  }
  buf_free(&url);
}

static void write_platform_json(buf *b, const release_info *r, const npm_platform *p) {
  buf description = BUF_INIT;
  buf_printf(&description, "The %s-%s program of %s (installed by it)", p->os, p->cpu, r->npm_name);
  buf_puts(b, "{\n  \"name\": ");
  json_text(b, p->package);
  common_members(b, r, description.data);
  buf_printf(b, ",\n  \"os\": [\"%s\"],\n  \"cpu\": [\"%s\"],\n  \"files\": [\"bin/\"],\n"
                "  \"preferUnplugged\": true\n}\n", p->os, p->cpu);
  buf_free(&description);
}

static void write_main_json(buf *b, const release_info *r, const npm_platform *platforms, size_t count) {
  buf_puts(b, "{\n  \"name\": ");
  json_text(b, r->npm_name);
  common_members(b, r, r->description);
  /* The MCP Registry checks that the package names the server. */
  member(b, "  ", "mcpName", r->registry_name);
  buf bin = BUF_INIT;
  buf_printf(&bin, "bin/%s.js", r->name);
  buf_puts(b, ",\n  \"bin\": {\n    ");
  json_text(b, r->name);
  buf_puts(b, ": ");
  json_text(b, bin.data);
  buf_puts(b, "\n  },\n  \"files\": [\"bin/\"],\n");
  buf_free(&bin);
  buf_puts(b, "  \"engines\": {\n    \"node\": \"" NPM_ENGINES_NODE "\"\n  },\n  \"optionalDependencies\": {");
  for (size_t i = 0; i < count; i++) {
    buf_append_str(b, i ? ",\n    " : "\n    ");
    json_text(b, platforms[i].package);
    buf_puts(b, ": ");
    json_text(b, r->version);
  }
  buf_puts(b, "\n  }\n}\n");
}

/* bin/NAME.js. Plain CommonJS with nothing to install: it runs before
 * anything else, once per start. */
static void write_launcher(buf *b, const release_info *r, const npm_platform *platforms, size_t count) {
  buf_puts(b, "#!/usr/bin/env node\n");
  buf_printf(b, "// Starts the program of %s built for this machine, from the package for\n"
                "// this platform that npm installed as an optional dependency. Written by\n"
                "// luamcp release.\n", r->npm_name);
  buf_puts(b, "\"use strict\";\nconst name = ");
  json_text(b, r->name);
  buf_puts(b, ";\nconst version = ");
  json_text(b, r->version);
  buf_puts(b, ";\nconst packages = {");
  for (size_t i = 0; i < count; i++) {
    buf_printf(b, "%s\n  \"%s-%s\": [", i ? "," : "", platforms[i].os, platforms[i].cpu);
    json_text(b, platforms[i].package);
    buf_puts(b, ", ");
    json_text(b, platforms[i].bin);
    buf_puts(b, "]");
  }
  buf_puts(b, "\n};\n");
  buf_puts(b,
           "const platform = process.platform + \"-\" + process.arch;\n"
           "const found = packages[platform];\n"
           "let program = null;\n"
           "if (found) {\n"
           "  try {\n"
           "    program = require.resolve(found[0] + \"/\" + found[1]);\n"
           "  } catch {}\n"
           "}\n"
           "if (!program) {\n"
           "  const builds = \"; there are builds for \" + Object.keys(packages).join(\", \") + \"\\n\";\n"
           "  process.stderr.write(\n"
           "    name + \": \" +\n"
           "      (found\n"
           "        ? \"the package for \" + platform + \", \" + found[0] + \", is not installed (an optional dependency: \" +\n"
           "          \"were they left out?): npm install \" + found[0] + \"@\" + version + builds\n"
           "        : \"no build for \" + platform + builds)\n"
           "  );\n"
           "  process.exit(1);\n"
           "}\n"
           "// A package packed where files have no modes (on Windows) loses the\n"
           "// program's executable bit: give it back.\n"
           "if (process.platform !== \"win32\") {\n"
           "  const fs = require(\"fs\");\n"
           "  try {\n"
           "    fs.accessSync(program, fs.constants.X_OK);\n"
           "  } catch {\n"
           "    try {\n"
           "      fs.chmodSync(program, 0o755);\n"
           "    } catch {}\n"
           "  }\n"
           "}\n"
           "const args = process.argv.slice(2);\n"
           "// Become the program: nothing of Node is left between the client and it.\n"
           "if (typeof process.execve === \"function\" && process.platform !== \"win32\") {\n"
           "  try {\n"
           "    process.execve(program, [program].concat(args), process.env);\n"
           "  } catch {}\n"
           "}\n"
           "// No execve (Windows, Node before 22.15): the program as a child that\n"
           "// reads and writes this process's stdin, stdout and stderr itself.\n"
           "const child = require(\"child_process\").spawn(program, args, { stdio: \"inherit\", windowsHide: true });\n"
           "const forward = (signal) => child.kill(signal);\n"
           "process.on(\"SIGINT\", forward);\n"
           "process.on(\"SIGTERM\", forward);\n"
           "child.on(\"error\", (e) => {\n"
           "  process.stderr.write(name + \": cannot start \" + program + \": \" + e.message + \"\\n\");\n"
           "  process.exit(1);\n"
           "});\n"
           "child.on(\"exit\", (code, signal) => {\n"
           "  if (signal) {\n"
           "    process.removeListener(signal, forward);\n"
           "    process.kill(process.pid, signal);\n"
           "  }\n"
           "  // Killed by a signal that did not end this process too: exit as a shell says it.\n"
           "  process.exit(code === null ? 128 + (require(\"os\").constants.signals[signal] || 0) : code);\n"
           "});\n");
}

/* README.md of the main package: the registry shows it. */
static void write_readme(buf *b, const release_info *r) {
  buf_printf(b, "# %s\n\n%s\n\nAn MCP server. Add it to an MCP client that starts servers by command:\n\n", r->npm_name,
             r->description);
  buf_puts(b, "```json\n{\n  \"mcpServers\": {\n    ");
  json_text(b, r->name);
  buf_puts(b, ": {\n      \"command\": \"npx\",\n      \"args\": [\"-y\", ");
  json_text(b, r->npm_name);
  buf_puts(b, "]\n    }\n  }\n}\n```\n\nor with Claude Code: `claude mcp add ");
  buf_printf(b, "%s -- npx -y %s`\n", r->name, r->npm_name);
}

/* ---- Writing the folders ------------------------------------------------- */

static bool make_folder(const char *path, buf *err) {
  if (os_fs_mkdir(path) || errno == EEXIST) return true;
  buf_printf(err, "%s: %s", path, strerror(errno));
  return false;
}

static bool write_file(const char *folder, const char *name, const buf *data, unsigned mode, buf *err) {
  buf path = BUF_INIT;
  buf_printf(&path, "%s/%s", folder, name);
  bool ok = files_replace(path.data, data, mode, err);
  buf_free(&path);
  return ok;
}

/* FOLDER and FOLDER/bin. */
static bool make_package_folders(const char *folder, buf *err) {
  buf bin = BUF_INIT;
  buf_printf(&bin, "%s/bin", folder);
  bool ok = make_folder(folder, err) && make_folder(bin.data, err);
  buf_free(&bin);
  return ok;
}

static bool write_platform_package(const release_info *r, const npm_platform *p, buf *err) {
  buf json = BUF_INIT;
  write_platform_json(&json, r, p);
  bool ok = make_package_folders(p->folder, err) && write_file(p->folder, "package.json", &json, 0644, err) &&
            write_file(p->folder, p->bin, &p->program->bytes, 0755, err);
  buf_free(&json);
  return ok;
}

static bool write_main_package(const release_info *r, const char *folder, const npm_platform *platforms,
                               size_t count, buf *err) {
  buf json = BUF_INIT, launcher = BUF_INIT, readme = BUF_INIT, bin = BUF_INIT;
  write_main_json(&json, r, platforms, count);
  write_launcher(&launcher, r, platforms, count);
  write_readme(&readme, r);
  buf_printf(&bin, "bin/%s.js", r->name);
  bool ok = make_package_folders(folder, err) && write_file(folder, "package.json", &json, 0644, err) &&
            write_file(folder, "README.md", &readme, 0644, err) && write_file(folder, bin.data, &launcher, 0755, err);
  buf_free(&json);
  buf_free(&launcher);
  buf_free(&readme);
  buf_free(&bin);
  return ok;
}

static bool check_inputs(const release_info *r, buf *err) {
  if (!r->npm_name) {
    buf_puts(err, "npm packages need the main package's name: --npm @you/NAME");
    return false;
  }
  if (!release_npm_name_ok(r->npm_name, err)) return false;
  if (!r->registry_name) {
    buf_puts(err, "npm packages need the MCP Registry name for mcpName: --registry-name io.github.you/NAME");
    return false;
  }
  if (r->program_count == 0) {
    buf_puts(err, "npm packages need at least one program (--target)");
    return false;
  }
  return true;
}

bool release_write_npm(const release_info *r, buf *err) {
  if (!check_inputs(r, err)) return false;
  /* Folders are named by the unscoped name: OUT/npm/weather, OUT/npm/weather-linux-x64. */
  const char *slash = strchr(r->npm_name, '/');
  const char *unscoped = slash ? slash + 1 : r->npm_name;
  npm_platform platforms[TARGET_COUNT] = {0};
  size_t count = 0;
  bool ok = true;
  for (size_t i = 0; i < r->program_count && ok; i++) {
    const release_program *program = &r->programs[i];
    npm_platform *p = &platforms[count++];
    p->program = program;
    p->os = program->target->mcpb_platform; /* the MCPB manifest names OSes as Node does */
    p->cpu = npm_cpu(program->target->machine);
    if (!p->cpu) {
      buf_printf(err, "npm has no name for the processor of the target %s", program->target->name);
      ok = false;
      break;
    }
    buf b = BUF_INIT;
    buf_printf(&b, "%s-%s-%s", r->npm_name, p->os, p->cpu);
    p->package = buf_detach(&b, NULL);
    buf_printf(&b, "%s/npm/%s-%s-%s", r->out_dir, unscoped, p->os, p->cpu);
    p->folder = buf_detach(&b, NULL);
    buf_printf(&b, "bin/%s%s", r->name, program->target->suffix);
    p->bin = buf_detach(&b, NULL);
  }
  buf npm = BUF_INIT, main_folder = BUF_INIT;
  buf_printf(&npm, "%s/npm", r->out_dir);
  buf_printf(&main_folder, "%s/%s", npm.data, unscoped);
  ok = ok && make_folder(npm.data, err);
  for (size_t i = 0; i < count && ok; i++) ok = write_platform_package(r, &platforms[i], err);
  ok = ok && write_main_package(r, main_folder.data, platforms, count, err);
  for (size_t i = 0; i < count; i++) {
    free(platforms[i].package);
    free(platforms[i].folder);
    free(platforms[i].bin);
  }
  buf_free(&npm);
  buf_free(&main_folder);
  return ok;
}
