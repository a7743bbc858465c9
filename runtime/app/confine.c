/*
 * confine.c - see confine.h. Landlock (Linux 5.13+): the process makes a
 * ruleset of what it may still do, and the kernel enforces it on every
 * later system call of this thread and of every thread and child it
 * creates afterwards. Rights are only ever removed: a reload cannot widen
 * them again.
 */
#include "app/confine.h"
#include "os/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lauxlib.h>
#include <linux/landlock.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"

/* Landlock ABI 3 and 4 as the kernel defines them (include/uapi/linux/
 * landlock.h): Debian 12's headers stop at ABI 2, and the kernel this
 * runs on may be newer than the headers it was built with. */
#define LL_ACCESS_FS_TRUNCATE (1ULL << 14)
#define LL_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#define LL_RULE_NET_PORT 2
typedef struct ll_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net; /* ABI 4 */
} ll_ruleset_attr;
typedef struct ll_net_port_attr {
  uint64_t allowed_access;
  uint64_t port;
} ll_net_port_attr;

#define FS_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_WRITE_ABI1                                                                                       \
  (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |         \
   LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |               \
   LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |            \
   LANDLOCK_ACCESS_FS_MAKE_SYM)

/* What the runtime itself reads after it is confined, whatever the script
 * declared: the C library and the shared libraries it loads on demand
 * (libcurl, Lua C modules, NSS), TLS certificates, name resolution, time
 * zones, and the few devices and /proc files libuv, glibc and OpenSSL use.
 * Not /etc as a whole: /etc/passwd and the like stay out. Not /proc as a
 * whole either: the children inherit these rules, and /proc holds every
 * process's environment and command line (issue 27). */
static const char *const SYSTEM_READ[] = {
    "/usr",           "/lib",          "/lib64",         "/etc/ssl",        "/etc/ca-certificates",
    "/etc/pki",       "/etc/resolv.conf", "/etc/hosts",  "/etc/nsswitch.conf", "/etc/gai.conf",
    "/etc/host.conf", "/etc/ld.so.cache", "/etc/localtime", "/usr/share/zoneinfo", "/etc/services",
    "/etc/protocols", "/proc/cpuinfo",  "/proc/meminfo", "/proc/stat",     "/proc/sys/vm/overcommit_memory",
    "/sys/devices/system/cpu", "/sys/fs/cgroup", "/dev/urandom", "/dev/random", "/dev/null",
};
/* The process's own /proc files that the runtime reads: its memory and
 * status (libuv, glibc's thread stacks), its map (AddressSanitizer) and
 * the list of its threads (LeakSanitizer: a folder read, nothing in it).
 * Opened through /proc/self, so each names this process's files only.
 * Never its environ, mem or fd: the children inherit these rules and share
 * the server's Landlock domain (whose ptrace rule lets them read its
 * guarded files, and does not hold root), so only a file rule keeps them
 * out. */
static const struct {
  const char *path;
  uint64_t rights;
} SELF_READ[] = {
    {"/proc/self/stat", FS_READ},   {"/proc/self/statm", FS_READ},  {"/proc/self/status", FS_READ},
    {"/proc/self/maps", FS_READ},   {"/proc/self/cgroup", FS_READ}, {"/proc/self/task", LANDLOCK_ACCESS_FS_READ_DIR},
};
/* Written by anyone (opening /dev/null for a child's stdin, say). */
static const char *const SYSTEM_WRITE[] = {"/dev/null"};
/* The dynamic loader, which the kernel opens for execution to start any
 * dynamically linked program. */
static const char *const SYSTEM_EXEC[] = {"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"};

static long ll_create(const ll_ruleset_attr *attr, size_t size, uint32_t flags) {
  return syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

/* Owner: this file, for the life of the process. */
static struct {
  bool policy; /* the scripts are confined (luamcp's checks), with or without Landlock */
  /* /proc files granted by a rule, held open: a /proc file's inode lives
   * only as long as its directory entry, which the kernel may drop and
   * make anew, without the rule, when nothing holds it. */
  int pinned[16];
  size_t npinned;
} C;

/* Allow rights under path (its whole tree for a folder). A path that does
 * not exist is skipped (false): there is nothing there to reach. */
static bool allow_path(int ruleset, const char *path, uint64_t rights, uint64_t handled) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT && errno != ENOTDIR;
  bool pin = strncmp(path, "/proc/", 6) == 0 && C.npinned < sizeof C.pinned / sizeof *C.pinned;
  struct stat st;
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
    /* A file takes only the rights that apply to files. */
    rights &= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_EXECUTE |
              LL_ACCESS_FS_TRUNCATE;
  }
  struct landlock_path_beneath_attr rule = {.allowed_access = rights & handled, .parent_fd = fd};
  if (rule.allowed_access && syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0)
    log_write(LOG_WARNING, "confine: cannot add the rule for %s: %s", path, strerror(errno));
  if (pin) C.pinned[C.npinned++] = fd;
  else close(fd);
  return true;
}

/* A write entry that does not exist yet, such as a file a tool will
 * create: a Landlock rule names only what exists, and cannot name one
 * child of a folder, so the nearest folder above it that exists gets the
 * rights to create, write and read files and folders under it (not to
 * remove, rename, link or make anything else), and notes says so. */
static void allow_missing(int ruleset, const char *path, uint64_t write, uint64_t handled, buf *notes) {
  uint64_t create = FS_READ | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_DIR |
                    LANDLOCK_ACCESS_FS_WRITE_FILE | (write & LL_ACCESS_FS_TRUNCATE);
  char parent[PATH_MAX];
  if (snprintf(parent, sizeof parent, "%s", path) >= (int)sizeof parent) return;
  char *slash;
  while ((slash = strrchr(parent, '/')) != NULL) {
    slash[slash == parent] = '\0'; /* "/a" -> "/" */
    char real[PATH_MAX];
    if (realpath(parent, real) && strcmp(real, "/") == 0) {
      /* Rights under / would reach every file, /proc's included (the
       * server's environment): the kernel leaves this entry out. */
      buf_printf(notes, "%s%s does not exist yet and its nearest existing folder is /, so the kernel's rules do not "
                        "cover it (create its folder before starting)", notes->len ? "; " : "", path);
      return;
    }
    if (allow_path(ruleset, parent, create, handled)) {
      buf_printf(notes, "%s%s does not exist yet, so the kernel lets the process create, write and read anything under "
                        "%s", notes->len ? "; " : "", path, parent);
      return;
    }
    if (slash == parent) return;
  }
}

/* The write entries: each path's tree, or its nearest existing folder. */
static void each_write(lua_State *L, int t, int ruleset, uint64_t write, uint64_t handled, buf *notes) {
  lua_getfield(L, t, "write");
  for (lua_Integer i = 1; lua_istable(L, -1) && i <= (lua_Integer)lua_rawlen(L, -1); i++) {
    lua_rawgeti(L, -1, i);
    const char *path = lua_tostring(L, -1);
    if (lua_type(L, -1) == LUA_TSTRING && !allow_path(ruleset, path, FS_READ | write, handled))
      allow_missing(ruleset, path, write, handled, notes);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* The strings of list t[field], one call each. */
static void each_path(lua_State *L, int t, const char *field, int ruleset, uint64_t rights, uint64_t handled) {
  lua_getfield(L, t, field);
  for (lua_Integer i = 1; lua_istable(L, -1) && i <= (lua_Integer)lua_rawlen(L, -1); i++) {
    lua_rawgeti(L, -1, i);
    if (lua_type(L, -1) == LUA_TSTRING) allow_path(ruleset, lua_tostring(L, -1), rights, handled);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* The rules for a server whose files are its client's roots: every file
 * but /proc's (each entry of / but /proc, and the listing of /), so that
 * /proc keeps to what SYSTEM_READ and SELF_READ allow there too. An entry
 * made in / later is not covered. */
static void allow_all_but_proc(int ruleset, uint64_t rights, uint64_t handled) {
  allow_path(ruleset, "/", LANDLOCK_ACCESS_FS_READ_DIR, handled);
  DIR *root = opendir("/");
  if (!root) return;
  struct dirent *entry;
  while ((entry = readdir(root)) != NULL) {
    const char *name = entry->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, "proc") == 0) continue;
    char path[sizeof entry->d_name + 1];
    snprintf(path, sizeof path, "/%s", name);
    allow_path(ruleset, path, rights, handled);
  }
  closedir(root);
}

static bool landlock(lua_State *L, int t, buf *report, buf *notes) {
  int abi = (int)ll_create(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    buf_printf(report, "the kernel has no Landlock (%s): only luamcp's own checks apply", strerror(errno));
    return false;
  }
  lua_getfield(L, t, "roots");
  bool roots = lua_toboolean(L, -1);
  lua_pop(L, 1);
  uint64_t write = FS_WRITE_ABI1;
  if (abi >= 2) write |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) write |= LL_ACCESS_FS_TRUNCATE;
  ll_ruleset_attr attr = {0};
  /* $ROOTS are known only when a client tells them, after the process is
   * confined, and a ruleset cannot grow: with them, files stay with the
   * Lua checks, but /proc's (see allow_all_but_proc). */
  attr.handled_access_fs = LANDLOCK_ACCESS_FS_EXECUTE | FS_READ | write;
  lua_getfield(L, t, "any_port");
  bool any_port = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (abi >= 4 && !any_port) attr.handled_access_net = LL_ACCESS_NET_CONNECT_TCP;
  size_t size = abi >= 4 ? sizeof attr : offsetof(ll_ruleset_attr, handled_access_net);
  int ruleset = (int)ll_create(&attr, size, 0);
  if (ruleset < 0) {
    buf_printf(report, "Landlock refused the ruleset (%s): only luamcp's own checks apply", strerror(errno));
    return false;
  }
  uint64_t handled = attr.handled_access_fs;
  for (size_t i = 0; i < sizeof SYSTEM_READ / sizeof *SYSTEM_READ; i++)
    allow_path(ruleset, SYSTEM_READ[i], FS_READ, handled);
  for (size_t i = 0; i < sizeof SELF_READ / sizeof *SELF_READ; i++)
    allow_path(ruleset, SELF_READ[i].path, SELF_READ[i].rights, handled);
  for (size_t i = 0; i < sizeof SYSTEM_WRITE / sizeof *SYSTEM_WRITE; i++)
    allow_path(ruleset, SYSTEM_WRITE[i], LANDLOCK_ACCESS_FS_WRITE_FILE, handled);
  for (size_t i = 0; i < sizeof SYSTEM_EXEC / sizeof *SYSTEM_EXEC; i++)
    allow_path(ruleset, SYSTEM_EXEC[i], LANDLOCK_ACCESS_FS_EXECUTE, handled);
  /* mcp.exec starts each program through this program itself, which ties
   * the child to the server's life (os/proc.h); it runs as confined. */
  allow_path(ruleset, "/proc/self/exe", LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE, handled);
  lua_getfield(L, t, "script_dir");
  if (lua_type(L, -1) == LUA_TSTRING) allow_path(ruleset, lua_tostring(L, -1), FS_READ, handled); /* reloads */
  lua_pop(L, 1);
  if (roots) {
    allow_all_but_proc(ruleset, FS_READ | write, handled);
  } else {
    each_path(L, t, "read", ruleset, FS_READ, handled);
    each_write(L, t, ruleset, write, handled, notes);
  }
  each_path(L, t, "exec", ruleset, LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE, handled);
  if (attr.handled_access_net) {
    lua_getfield(L, t, "ports");
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, -1); i++) {
      lua_rawgeti(L, -1, i);
      ll_net_port_attr rule = {.allowed_access = LL_ACCESS_NET_CONNECT_TCP,
                                            .port = (uint64_t)lua_tointeger(L, -1)};
      syscall(SYS_landlock_add_rule, ruleset, LL_RULE_NET_PORT, &rule, 0);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  bool ok = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) == 0;
  int e = errno;
  close(ruleset);
  if (!ok) {
    buf_printf(report, "Landlock could not confine the process (%s): only luamcp's own checks apply", strerror(e));
    return false;
  }
  buf_printf(report, "Landlock ABI %d also confines the process: %s%s", abi,
             roots ? "programs and /proc (other files stay with luamcp's checks: $ROOTS are not known in advance)"
                   : "files, programs",
             attr.handled_access_net ? ", TCP ports" : "");
  return true;
}

void confine_process(vm *v) {
  lua_State *L = v->L;
  int top = lua_gettop(L);
  if (!vm_call_library(v, "_confinement", 0)) {
    log_write(LOG_ERROR, "confine: %s", lua_tostring(L, -1));
  } else if (lua_isnil(L, -1)) {
    log_write(LOG_INFO, "running unconfined: the scripts declare no permissions (mcp.server{permissions = ...}), "
                        "so their tools can read, write, run and reach whatever you can");
  } else {
    C.policy = true;
    os_proc_drop_loader_variables();
    int t = lua_gettop(L);
    lua_getfield(L, t, "summary");
    log_write(LOG_INFO, "permissions: %s", lua_tostring(L, -1));
    lua_pop(L, 1);
    buf report = BUF_INIT, notes = BUF_INIT;
    bool kernel = landlock(L, t, &report, &notes);
    log_write(kernel ? LOG_INFO : LOG_WARNING, "%s", report.data);
    if (kernel && notes.len)
      log_write(LOG_WARNING, "Landlock rules name only what exists: %s (luamcp's own checks still allow only what is "
                             "declared)", notes.data);
    buf_free(&report);
    buf_free(&notes);
  }
  lua_settop(L, top);
}
