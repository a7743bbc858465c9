/*
 * confine_linux.c - os/confine.h with Landlock (Linux 5.13+): the process
 * makes a ruleset of what it may still do, and the kernel enforces it on
 * every later system call of this thread and of every thread and child it
 * creates afterwards. Rights are only ever removed: a reload cannot widen
 * them again.
 */
#include "os/confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* /proc files granted by a rule, held open for the life of the process: a
 * /proc file's inode lives only as long as its directory entry, which the
 * kernel may drop and make anew, without the rule, when nothing holds it. */
static int pinned[16];
static size_t npinned;

/* Owner: the caller of os_confine_begin; freed by os_confine_apply. */
struct os_confinement {
  int abi;
  int ruleset;
  bool files;       /* file access is confined to the paths added */
  uint64_t handled; /* the file rights the ruleset governs */
  uint64_t write;   /* what OS_CONFINE_WRITE means on this kernel */
  uint64_t net;     /* the network rights it governs (0: none) */
  os_confine_warn warn;
  void *warn_arg;
  char *notes; /* malloc'd, or NULL */
  size_t notes_len;
};

static long ll_create(const ll_ruleset_attr *attr, size_t size, uint32_t flags) {
  return syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

static void warn(os_confinement *c, const char *fmt, ...) {
  char text[PATH_MAX + 200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  c->warn(c->warn_arg, text);
}

/* Append "; "-separated text to c->notes. */
static void note(os_confinement *c, const char *fmt, ...) {
  char text[3 * PATH_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = strlen(text), sep = c->notes_len ? 2 : 0;
  char *grown = realloc(c->notes, c->notes_len + sep + len + 1);
  if (!grown) return;
  c->notes = grown;
  memcpy(c->notes + c->notes_len, "; ", sep);
  memcpy(c->notes + c->notes_len + sep, text, len + 1);
  c->notes_len += sep + len;
}

/* Allow rights under path (its whole tree for a folder). A path that does
 * not exist is skipped (false): there is nothing there to reach. */
static bool allow(os_confinement *c, const char *path, uint64_t rights) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT && errno != ENOTDIR;
  bool pin = strncmp(path, "/proc/", 6) == 0 && npinned < sizeof pinned / sizeof *pinned;
  struct stat st;
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
    /* A file takes only the rights that apply to files. */
    rights &= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_EXECUTE |
              LL_ACCESS_FS_TRUNCATE;
  }
  struct landlock_path_beneath_attr rule = {.allowed_access = rights & c->handled, .parent_fd = fd};
  if (rule.allowed_access && syscall(SYS_landlock_add_rule, c->ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0)
    warn(c, "cannot add the rule for %s: %s", path, strerror(errno));
  if (pin) pinned[npinned++] = fd;
  else close(fd);
  return true;
}

/* A write entry that does not exist yet, such as a file a tool will
 * create: a Landlock rule names only what exists, and cannot name one
 * child of a folder, so the nearest folder above it that exists gets the
 * rights to create, write and read files and folders under it (not to
 * remove, rename, link or make anything else), and the notes say so. */
static void allow_missing(os_confinement *c, const char *path) {
  uint64_t create = FS_READ | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_DIR |
                    LANDLOCK_ACCESS_FS_WRITE_FILE | (c->write & LL_ACCESS_FS_TRUNCATE);
  char parent[PATH_MAX];
  if (snprintf(parent, sizeof parent, "%s", path) >= (int)sizeof parent) return;
  char *slash;
  while ((slash = strrchr(parent, '/')) != NULL) {
    slash[slash == parent] = '\0'; /* "/a" -> "/" */
    char real[PATH_MAX];
    if (realpath(parent, real) && strcmp(real, "/") == 0) {
      /* Rights under / would reach every file, /proc's included (the
       * server's environment): the kernel leaves this entry out. */
      note(c, "%s does not exist yet and its nearest existing folder is /, so the kernel's rules do not cover it "
              "(create its folder before starting)", path);
      return;
    }
    if (allow(c, parent, create)) {
      note(c, "%s does not exist yet, so the kernel lets the process create, write and read anything under %s", path,
           parent);
      return;
    }
    if (slash == parent) return;
  }
}

/* The rules for a server whose files are its client's roots: every file
 * but /proc's (each entry of / but /proc, and the listing of /), so that
 * /proc keeps to what SYSTEM_READ and SELF_READ allow there too. An entry
 * made in / later is not covered. */
static void allow_all_but_proc(os_confinement *c, uint64_t rights) {
  allow(c, "/", LANDLOCK_ACCESS_FS_READ_DIR);
  DIR *root = opendir("/");
  if (!root) return;
  struct dirent *entry;
  while ((entry = readdir(root)) != NULL) {
    const char *name = entry->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, "proc") == 0) continue;
    char path[sizeof entry->d_name + 1];
    snprintf(path, sizeof path, "/%s", name);
    allow(c, path, rights);
  }
  closedir(root);
}

os_confinement *os_confine_begin(bool files, bool ports, os_confine_warn warn_cb, void *arg, char *why,
                                 size_t why_size) {
  int abi = (int)ll_create(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    snprintf(why, why_size, "the kernel has no Landlock (%s): only luamcp's own checks apply", strerror(errno));
    return NULL;
  }
  uint64_t write = FS_WRITE_ABI1;
  if (abi >= 2) write |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) write |= LL_ACCESS_FS_TRUNCATE;
  ll_ruleset_attr attr = {0};
  /* Without files (the client's roots, known only once a client tells
   * them, after the process is confined, and a ruleset cannot grow), the
   * ruleset still governs files, and allows all but /proc's
   * (allow_all_but_proc). */
  attr.handled_access_fs = LANDLOCK_ACCESS_FS_EXECUTE | FS_READ | write;
  if (abi >= 4 && ports) attr.handled_access_net = LL_ACCESS_NET_CONNECT_TCP;
  size_t size = abi >= 4 ? sizeof attr : offsetof(ll_ruleset_attr, handled_access_net);
  int ruleset = (int)ll_create(&attr, size, 0);
  if (ruleset < 0) {
    snprintf(why, why_size, "Landlock refused the ruleset (%s): only luamcp's own checks apply", strerror(errno));
    return NULL;
  }
  os_confinement *c = calloc(1, sizeof *c);
  if (!c) {
    close(ruleset);
    snprintf(why, why_size, "out of memory for Landlock's rules: only luamcp's own checks apply");
    return NULL;
  }
  c->abi = abi;
  c->ruleset = ruleset;
  c->files = files;
  c->handled = attr.handled_access_fs;
  c->write = write;
  c->net = attr.handled_access_net;
  c->warn = warn_cb;
  c->warn_arg = arg;
  for (size_t i = 0; i < sizeof SYSTEM_READ / sizeof *SYSTEM_READ; i++) allow(c, SYSTEM_READ[i], FS_READ);
  for (size_t i = 0; i < sizeof SELF_READ / sizeof *SELF_READ; i++) allow(c, SELF_READ[i].path, SELF_READ[i].rights);
  for (size_t i = 0; i < sizeof SYSTEM_WRITE / sizeof *SYSTEM_WRITE; i++)
    allow(c, SYSTEM_WRITE[i], LANDLOCK_ACCESS_FS_WRITE_FILE);
  for (size_t i = 0; i < sizeof SYSTEM_EXEC / sizeof *SYSTEM_EXEC; i++)
    allow(c, SYSTEM_EXEC[i], LANDLOCK_ACCESS_FS_EXECUTE);
  /* mcp.exec starts each program through this program itself, which ties
   * the child to the server's life (os/proc.h); it runs as confined. */
  allow(c, "/proc/self/exe", LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE);
  if (!files) allow_all_but_proc(c, FS_READ | write);
  return c;
}

void os_confine_allow_path(os_confinement *c, const char *path, unsigned rights) {
  uint64_t ll = 0;
  if (rights & OS_CONFINE_READ) ll |= FS_READ;
  if (rights & OS_CONFINE_WRITE) ll |= FS_READ | c->write;
  if (rights & OS_CONFINE_EXEC) ll |= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE;
  if (rights & OS_CONFINE_SOCKET) ll |= LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_REMOVE_FILE;
  if (!allow(c, path, ll) && (rights & OS_CONFINE_WRITE)) allow_missing(c, path);
}

void os_confine_allow_port(os_confinement *c, unsigned port) {
  if (!c->net) return;
  ll_net_port_attr rule = {.allowed_access = LL_ACCESS_NET_CONNECT_TCP, .port = port};
  syscall(SYS_landlock_add_rule, c->ruleset, LL_RULE_NET_PORT, &rule, 0);
}

bool os_confine_apply(os_confinement *c, char *report, size_t report_size, char **notes) {
  bool ok = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && syscall(SYS_landlock_restrict_self, c->ruleset, 0) == 0;
  int e = errno;
  close(c->ruleset);
  if (!ok) {
    snprintf(report, report_size, "Landlock could not confine the process (%s): only luamcp's own checks apply",
             strerror(e));
  } else {
    snprintf(report, report_size, "Landlock ABI %d also confines the process: %s%s", c->abi,
             c->files ? "files, programs"
                      : "programs and /proc (other files stay with luamcp's checks: $ROOTS are not known in advance)",
             c->net ? ", TCP ports" : "");
  }
  *notes = NULL;
  if (ok && c->notes) {
    static const char before[] = "Landlock rules name only what exists: ",
                      after[] = " (luamcp's own checks still allow only what is declared)";
    *notes = malloc(sizeof before + c->notes_len + sizeof after);
    if (*notes) sprintf(*notes, "%s%s%s", before, c->notes, after);
  }
  free(c->notes);
  free(c);
  return ok;
}
