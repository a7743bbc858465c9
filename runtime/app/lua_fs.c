/*
 * lua_fs.c - mcp.fs: file operations on libuv's thread pool, so a slow disk
 * never stops the loop.
 *
 *   local data, err, code = mcp.fs.read(path)
 *   local ok, err, code   = mcp.fs.write(path, data)
 *   local entries         = mcp.fs.list(dir)    -- {{name=, type=}, ...} sorted by name
 *   local info            = mcp.fs.stat(path)   -- {type=, size=, mtime=, mode=}
 *   local ok, err, code   = mcp.fs.mkdir(path[, {parents=true}])
 *   local ok, err, code   = mcp.fs.remove(path[, {recursive=true}])
 *   local ok, err, code   = mcp.fs.rename(from, to)
 *
 * Expected failures (no such file, no permission, ...) return nil, a
 * message naming the path, and an error code such as "ENOENT"; misuse
 * raises. Each call runs as one work item with libuv's file calls made
 * synchronously (no callback), which take UTF-8 paths on every OS; the
 * calling task waits meanwhile. A recursive remove never follows a link:
 * it asks each entry what it is without following it (lstat), and a link
 * (on Windows: or junction) is removed as itself, so nothing outside the
 * tree is touched.
 */
#include <errno.h>
#include <lauxlib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/app.h"
#include "app/lua_fs.h"
#include "app/lua_task.h"
#include "os/errors.h"

/* How a path and a name in its folder are joined, in messages too. */
#ifdef _WIN32
#define SEPARATOR '\\'
#else
#define SEPARATOR '/'
#endif

typedef enum fs_kind { FS_READ, FS_WRITE, FS_LIST, FS_STAT, FS_MKDIR, FS_REMOVE, FS_RENAME } fs_kind;

typedef struct fs_entry {
  char *name;
  const char *type;
} fs_entry;

/* One mcp.fs call. Owner: itself: created by the Lua function, freed in
 * the after-work callback; if its task went away meanwhile (cancel sets
 * task to NULL), the result is simply dropped. */
typedef struct fs_op {
  task_op op; /* first member: the task waits on it */
  uv_work_t work;
  task *task;
  fs_kind kind;
  char *path;
  char *to;         /* rename: the new name */
  bool deep;        /* mkdir: make the parents too; remove: the folder with all in it */
  char *error_path; /* the path the failure was at, when not path (inside a removed tree), or NULL */
  char *data; /* read: what was read; write: what to write */
  size_t len;
  size_t max_len; /* read: what the Lua state may still allocate */
  int error;      /* the failure's libuv error code (UV_ENOENT, ...), 0 on success */
  bool done;      /* the work has finished and its result waits for the task */
  uv_stat_t st;
  fs_entry *entries;
  size_t entry_count;
} fs_op;

static void op_free(fs_op *op);

/* task_op.cancel: a thread may still be working on it; if so, after_work
 * drops the result. */
static void cancel_op(task_op *base) {
  fs_op *op = (fs_op *)base;
  if (op->done) op_free(op);
  else op->task = NULL;
}

static const char *type_name(uint64_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "file";
    case S_IFDIR: return "directory";
    case S_IFLNK: return "link";
    default: return "other";
  }
}

static const char *dirent_type_name(uv_dirent_type_t type) {
  switch (type) {
    case UV_DIRENT_FILE: return "file";
    case UV_DIRENT_DIR: return "directory";
    case UV_DIRENT_LINK: return "link";
    default: return "other";
  }
}

static int compare_entries(const void *a, const void *b) {
  return strcmp(((const fs_entry *)a)->name, ((const fs_entry *)b)->name);
}

/* The file's status (stat, or lstat when link is true) in op->st: 0 or a
 * libuv error code. */
static int stat_path(fs_op *op, const char *path, bool link) {
  uv_fs_t req;
  int rc = link ? uv_fs_lstat(NULL, &req, path, NULL) : uv_fs_stat(NULL, &req, path, NULL);
  if (rc == 0) op->st = req.statbuf;
  uv_fs_req_cleanup(&req);
  return rc;
}

static void do_read(fs_op *op) {
  uv_fs_t req;
  uv_file fd = uv_fs_open(NULL, &req, op->path, UV_FS_O_RDONLY, 0, NULL);
  uv_fs_req_cleanup(&req);
  if (fd < 0) {
    op->error = fd;
    return;
  }
  int rc = uv_fs_fstat(NULL, &req, fd, NULL);
  if (rc == 0) op->st = req.statbuf;
  uv_fs_req_cleanup(&req);
  if (rc == 0 && (op->st.st_mode & S_IFMT) == S_IFDIR) rc = UV_EISDIR;
  if (rc != 0) {
    op->error = rc;
    uv_fs_close(NULL, &req, fd, NULL);
    uv_fs_req_cleanup(&req);
    return;
  }
  size_t cap = (op->st.st_mode & S_IFMT) == S_IFREG ? (size_t)op->st.st_size + 1 : 65536;
  if (cap > op->max_len + 1) cap = op->max_len + 1;
  op->data = malloc(cap);
  for (;;) {
    if (op->len == cap) {
      if (cap > op->max_len) {
        op->error = UV_EFBIG; /* more than the memory limit leaves room for */
        break;
      }
      cap *= 2;
      char *bigger = realloc(op->data, cap);
      if (!bigger) {
        op->error = UV_ENOMEM;
        break;
      }
      op->data = bigger;
    }
    uv_buf_t b = uv_buf_init(op->data + op->len, (unsigned)(cap - op->len > INT32_MAX ? INT32_MAX : cap - op->len));
    int n = uv_fs_read(NULL, &req, fd, &b, 1, -1, NULL);
    uv_fs_req_cleanup(&req);
    if (n == UV_EINTR) continue;
    if (n < 0) op->error = n;
    if (n <= 0) break;
    op->len += (size_t)n;
    if (op->len > op->max_len) {
      op->error = UV_EFBIG;
      break;
    }
  }
  uv_fs_close(NULL, &req, fd, NULL);
  uv_fs_req_cleanup(&req);
}

static void do_write(fs_op *op) {
  uv_fs_t req;
  uv_file fd = uv_fs_open(NULL, &req, op->path, UV_FS_O_WRONLY | UV_FS_O_CREAT | UV_FS_O_TRUNC, 0644, NULL);
  uv_fs_req_cleanup(&req);
  if (fd < 0) {
    op->error = fd;
    return;
  }
  size_t off = 0;
  while (off < op->len) {
    size_t left = op->len - off;
    uv_buf_t b = uv_buf_init(op->data + off, (unsigned)(left > INT32_MAX ? INT32_MAX : left));
    int n = uv_fs_write(NULL, &req, fd, &b, 1, -1, NULL);
    uv_fs_req_cleanup(&req);
    if (n == UV_EINTR) continue;
    if (n < 0) {
      op->error = n;
      break;
    }
    off += (size_t)n;
  }
  int rc = uv_fs_close(NULL, &req, fd, NULL);
  uv_fs_req_cleanup(&req);
  if (rc != 0 && !op->error) op->error = rc;
}

static void do_list(fs_op *op) {
  uv_fs_t req;
  int rc = uv_fs_scandir(NULL, &req, op->path, 0, NULL);
  if (rc < 0) {
    op->error = rc;
    uv_fs_req_cleanup(&req);
    return;
  }
  size_t cap = 0;
  uv_dirent_t e;
  while (uv_fs_scandir_next(&req, &e) == 0) {
    if (strcmp(e.name, ".") == 0 || strcmp(e.name, "..") == 0) continue;
    if (op->entry_count == cap) {
      cap = cap ? cap * 2 : 32;
      op->entries = realloc(op->entries, cap * sizeof *op->entries);
    }
    /* The folder says what each entry is where it can; where it cannot
     * (UV_DIRENT_UNKNOWN: some file systems), ask the entry itself, not
     * following a link. */
    const char *type = dirent_type_name(e.type);
    if (e.type == UV_DIRENT_UNKNOWN) {
      size_t n = strlen(op->path) + strlen(e.name) + 2;
      char *full = malloc(n);
      snprintf(full, n, "%s/%s", op->path, e.name);
      if (stat_path(op, full, true) == 0) type = type_name(op->st.st_mode);
      free(full);
    }
    op->entries[op->entry_count].name = strdup(e.name);
    op->entries[op->entry_count].type = type;
    op->entry_count++;
  }
  uv_fs_req_cleanup(&req);
  qsort(op->entries, op->entry_count, sizeof *op->entries, compare_entries);
}

static bool is_dir(fs_op *op, const char *path) {
  return stat_path(op, path, false) == 0 && (op->st.st_mode & S_IFMT) == S_IFDIR;
}

/* mkdir; with parents, every missing folder above it too, and a folder
 * already there is no failure (as mkdir -p). */
static void do_mkdir(fs_op *op) {
  uv_fs_t req;
  int rc = uv_fs_mkdir(NULL, &req, op->path, 0755, NULL);
  uv_fs_req_cleanup(&req);
  if (rc == 0 || !op->deep) {
    op->error = rc;
    return;
  }
  if (rc == UV_EEXIST) {
    op->error = is_dir(op, op->path) ? 0 : UV_EEXIST;
    return;
  }
  if (rc != UV_ENOENT) {
    op->error = rc;
    return;
  }
  /* Each prefix ending before a separator, from the top; a root ("/",
   * "C:\") or a drive is there already and its mkdir's error is no news. */
  char *copy = strdup(op->path);
  char *at = copy + 1;
  if ((copy[0] == '/' || copy[0] == '\\') && (copy[1] == '/' || copy[1] == '\\')) {
    /* \\server\share\: its first two names are no folders to make */
    int names = 0;
    for (at = copy + 2; *at && names < 2; at++)
      if (*at == '/' || *at == '\\') names++;
  }
  for (; *at; at++) {
    if (*at != '/' && *at != '\\') continue;
    if (at[-1] == '/' || at[-1] == '\\' || at[-1] == ':') continue;
    char kept = *at;
    *at = '\0';
    rc = uv_fs_mkdir(NULL, &req, copy, 0755, NULL);
    uv_fs_req_cleanup(&req);
    if (rc != 0 && !(rc == UV_EEXIST && is_dir(op, copy))) {
      op->error = rc == UV_EEXIST ? UV_ENOTDIR : rc;
      op->error_path = strdup(copy);
      free(copy);
      return;
    }
    *at = kept;
  }
  free(copy);
  rc = uv_fs_mkdir(NULL, &req, op->path, 0755, NULL);
  uv_fs_req_cleanup(&req);
  op->error = rc == UV_EEXIST && is_dir(op, op->path) ? 0 : rc;
}

/* Remove path, a folder with all in it: 0 or a libuv error code, the path
 * it happened at in op->error_path. Links are removed, never followed: an
 * entry is descended into only when both its folder's listing (a
 * reparse point is a link there on Windows) and lstat say it is a folder
 * (wine's lstat takes a Unix link to a folder for the folder). */
static int remove_tree(fs_op *op, const char *path, bool listed_as_link) {
  int rc = stat_path(op, path, true);
  if (rc == 0 && !listed_as_link && (op->st.st_mode & S_IFMT) == S_IFDIR) {
    uv_fs_t req;
    rc = uv_fs_scandir(NULL, &req, path, 0, NULL);
    uv_dirent_t e;
    while (rc >= 0 && uv_fs_scandir_next(&req, &e) == 0) {
      if (strcmp(e.name, ".") == 0 || strcmp(e.name, "..") == 0) continue;
      size_t n = strlen(path) + strlen(e.name) + 2;
      char *full = malloc(n);
      snprintf(full, n, "%s%c%s", path, SEPARATOR, e.name);
      rc = remove_tree(op, full, e.type == UV_DIRENT_LINK);
      free(full);
      if (rc != 0) break;
    }
    uv_fs_req_cleanup(&req);
    if (rc < 0) {
      if (!op->error_path) op->error_path = strdup(path);
      return rc;
    }
    rc = uv_fs_rmdir(NULL, &req, path, NULL);
    uv_fs_req_cleanup(&req);
  } else if (rc == 0) {
    uv_fs_t req;
    rc = uv_fs_unlink(NULL, &req, path, NULL);
    uv_fs_req_cleanup(&req);
  }
  if (rc != 0 && !op->error_path) op->error_path = strdup(path);
  return rc;
}

static void do_remove(fs_op *op) {
  if (op->deep) {
    op->error = remove_tree(op, op->path, false);
    if (op->error_path && strcmp(op->error_path, op->path) == 0) {
      free(op->error_path);
      op->error_path = NULL;
    }
    return;
  }
  uv_fs_t req;
  int rc = stat_path(op, op->path, true);
  if (rc == 0 && (op->st.st_mode & S_IFMT) == S_IFDIR) rc = uv_fs_rmdir(NULL, &req, op->path, NULL);
  else if (rc == 0) rc = uv_fs_unlink(NULL, &req, op->path, NULL);
  else {
    op->error = rc;
    return;
  }
  uv_fs_req_cleanup(&req);
  /* Some systems say EEXIST for a folder that is not empty. */
  op->error = rc == UV_EEXIST ? UV_ENOTEMPTY : rc;
}

static void do_rename(fs_op *op) {
  uv_fs_t req;
  op->error = uv_fs_rename(NULL, &req, op->path, op->to, NULL);
  uv_fs_req_cleanup(&req);
}

/* On a thread-pool thread: no Lua here. */
static void do_work(uv_work_t *w) {
  fs_op *op = w->data;
  switch (op->kind) {
    case FS_READ: do_read(op); return;
    case FS_WRITE: do_write(op); return;
    case FS_LIST: do_list(op); return;
    case FS_STAT: op->error = stat_path(op, op->path, false); return;
    case FS_MKDIR: do_mkdir(op); return;
    case FS_REMOVE: do_remove(op); return;
    case FS_RENAME: do_rename(op); return;
  }
}

static void op_free(fs_op *op) {
  for (size_t i = 0; i < op->entry_count; i++) free(op->entries[i].name);
  free(op->entries);
  free(op->data);
  free(op->path);
  free(op->to);
  free(op->error_path);
  free(op);
}

/* Back on the loop: resume the task, unless it went away. */
static void after_work(uv_work_t *w, int status) {
  fs_op *op = w->data;
  if (status == UV_ECANCELED) op->error = UV_ECANCELED;
  op->done = true;
  task *t = op->task;
  if (!t || t->wait != TASK_WAIT_OP || t->wait_op != &op->op) {
    op_free(op);
    return;
  }
  task_resume(t, 0); /* fs_continue reads the op and frees it */
}

static void push_stat(lua_State *L, const uv_stat_t *st) {
  lua_createtable(L, 0, 4);
  lua_pushstring(L, type_name(st->st_mode));
  lua_setfield(L, -2, "type");
  lua_pushinteger(L, (lua_Integer)st->st_size);
  lua_setfield(L, -2, "size");
  lua_pushnumber(L, (lua_Number)st->st_mtim.tv_sec + (lua_Number)st->st_mtim.tv_nsec / 1e9);
  lua_setfield(L, -2, "mtime");
  lua_pushinteger(L, (lua_Integer)(st->st_mode & 07777));
  lua_setfield(L, -2, "mode");
}

static int fs_continue(lua_State *L, int status, lua_KContext k) {
  (void)status;
  (void)k;
  fs_op *op = lua_touserdata(L, 1);
  if (op->error) {
    lua_pushnil(L);
    const char *why = op->error == UV_EFBIG ? "too large for the server's memory limit" : os_error_text(op->error);
    if (op->error_path) lua_pushfstring(L, "%s: %s: %s", op->path, op->error_path, why);
    else if (op->to) lua_pushfstring(L, "%s -> %s: %s", op->path, op->to, why);
    else lua_pushfstring(L, "%s: %s", op->path, why);
    lua_pushstring(L, uv_err_name(op->error));
    op_free(op);
    return 3;
  }
  switch (op->kind) {
    case FS_READ: lua_pushlstring(L, op->data ? op->data : "", op->len); break;
    case FS_WRITE:
    case FS_MKDIR:
    case FS_REMOVE:
    case FS_RENAME: lua_pushboolean(L, 1); break;
    case FS_STAT: push_stat(L, &op->st); break;
    case FS_LIST:
      lua_createtable(L, (int)op->entry_count, 0);
      for (size_t i = 0; i < op->entry_count; i++) {
        lua_createtable(L, 0, 2);
        lua_pushstring(L, op->entries[i].name);
        lua_setfield(L, -2, "name");
        lua_pushstring(L, op->entries[i].type);
        lua_setfield(L, -2, "type");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
      }
      break;
  }
  op_free(op);
  return 1;
}

static int start(lua_State *L, fs_kind kind, const char *what) {
  const char *path = luaL_checkstring(L, 1);
  size_t len = 0;
  const char *data = kind == FS_WRITE ? luaL_checklstring(L, 2, &len) : NULL;
  const char *to = kind == FS_RENAME ? luaL_checkstring(L, 2) : NULL;
  bool deep = false; /* mkdir {parents = true}, remove {recursive = true} */
  if ((kind == FS_MKDIR || kind == FS_REMOVE) && lua_istable(L, 2)) {
    lua_getfield(L, 2, kind == FS_MKDIR ? "parents" : "recursive");
    deep = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  task *t = task_check(L, what);
  vm *v = t->vm;
  fs_op *op = calloc(1, sizeof *op);
  op->op.cancel = cancel_op;
  op->task = t;
  op->kind = kind;
  op->path = strdup(path);
  op->to = to ? strdup(to) : NULL;
  op->deep = deep;
  op->work.data = op;
  if (data) {
    op->data = malloc(len ? len : 1);
    memcpy(op->data, data, len);
    op->len = len;
  }
  /* A read may not bring in more than the Lua state could hold. */
  op->max_len = v->mem_limit ? (v->mem_limit > v->mem_used ? v->mem_limit - v->mem_used : 0) : (size_t)1 << 40;
  int rc = uv_queue_work(v->loop, &op->work, do_work, after_work);
  if (rc != 0) {
    op_free(op);
    return luaL_error(L, "%s: %s", what, uv_strerror(rc));
  }
  lua_settop(L, 0);
  lua_pushlightuserdata(L, op);
  return task_wait_op(L, t, &op->op, fs_continue);
}

static int fs_read(lua_State *L) { return start(L, FS_READ, "mcp.fs.read"); }
static int fs_write(lua_State *L) { return start(L, FS_WRITE, "mcp.fs.write"); }
static int fs_list(lua_State *L) { return start(L, FS_LIST, "mcp.fs.list"); }
static int fs_stat(lua_State *L) { return start(L, FS_STAT, "mcp.fs.stat"); }
static int fs_mkdir(lua_State *L) { return start(L, FS_MKDIR, "mcp.fs.mkdir"); }
static int fs_remove(lua_State *L) { return start(L, FS_REMOVE, "mcp.fs.remove"); }
static int fs_rename(lua_State *L) { return start(L, FS_RENAME, "mcp.fs.rename"); }

void lua_fs_register(lua_State *L, int module_idx) {
  static const luaL_Reg functions[] = {
      {"read", fs_read},   {"write", fs_write},   {"list", fs_list},     {"stat", fs_stat},
      {"mkdir", fs_mkdir}, {"remove", fs_remove}, {"rename", fs_rename}, {NULL, NULL}};
  luaL_newlib(L, functions);
  lua_setfield(L, module_idx, "fs");
}
