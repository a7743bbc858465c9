/*
 * lua_fs.c - mcp.fs: file operations on libuv's thread pool, so a slow disk
 * never stops the loop.
 *
 *   local data, err, code = mcp.fs.read(path)
 *   local ok, err, code   = mcp.fs.write(path, data)
 *   local entries         = mcp.fs.list(dir)    -- {{name=, type=}, ...} sorted by name
 *   local info            = mcp.fs.stat(path)   -- {type=, size=, mtime=, mode=}
 *
 * Expected failures (no such file, no permission, ...) return nil, a
 * message naming the path, and an error code such as "ENOENT"; misuse
 * raises. Each call runs as one work item with plain blocking system calls;
 * the calling task waits meanwhile.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/app.h"
#include "app/lua_fs.h"
#include "app/lua_task.h"

typedef enum fs_kind { FS_READ, FS_WRITE, FS_LIST, FS_STAT } fs_kind;

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
  char *data; /* read: what was read; write: what to write */
  size_t len;
  size_t max_len; /* read: what the Lua state may still allocate */
  int error;      /* errno of the failure, 0 on success */
  bool done;      /* the work has finished and its result waits for the task */
  struct stat st;
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

static const char *type_name(mode_t mode) {
  if (S_ISREG(mode)) return "file";
  if (S_ISDIR(mode)) return "directory";
  if (S_ISLNK(mode)) return "link";
  return "other";
}

static int compare_entries(const void *a, const void *b) {
  return strcmp(((const fs_entry *)a)->name, ((const fs_entry *)b)->name);
}

/* On a thread-pool thread: no Lua here. */
static void do_work(uv_work_t *w) {
  fs_op *op = w->data;
  switch (op->kind) {
    case FS_READ: {
      int fd = open(op->path, O_RDONLY | O_CLOEXEC);
      if (fd < 0 || fstat(fd, &op->st) != 0) {
        op->error = errno;
        if (fd >= 0) close(fd);
        return;
      }
      if (S_ISDIR(op->st.st_mode)) {
        op->error = EISDIR;
        close(fd);
        return;
      }
      size_t cap = S_ISREG(op->st.st_mode) ? (size_t)op->st.st_size + 1 : 65536;
      if (cap > op->max_len + 1) cap = op->max_len + 1;
      op->data = malloc(cap);
      for (;;) {
        if (op->len == cap) {
          if (cap > op->max_len) {
            op->error = EFBIG; /* more than the memory limit leaves room for */
            break;
          }
          cap *= 2;
          char *bigger = realloc(op->data, cap);
          if (!bigger) {
            op->error = ENOMEM;
            break;
          }
          op->data = bigger;
        }
        ssize_t n = read(fd, op->data + op->len, cap - op->len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) op->error = errno;
        if (n <= 0) break;
        op->len += (size_t)n;
        if (op->len > op->max_len) {
          op->error = EFBIG;
          break;
        }
      }
      close(fd);
      return;
    }
    case FS_WRITE: {
      int fd = open(op->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) {
        op->error = errno;
        return;
      }
      size_t off = 0;
      while (off < op->len) {
        ssize_t n = write(fd, op->data + off, op->len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          op->error = errno;
          break;
        }
        off += (size_t)n;
      }
      if (close(fd) != 0 && !op->error) op->error = errno;
      return;
    }
    case FS_LIST: {
      DIR *d = opendir(op->path);
      if (!d) {
        op->error = errno;
        return;
      }
      size_t cap = 0;
      struct dirent *e;
      while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (op->entry_count == cap) {
          cap = cap ? cap * 2 : 32;
          op->entries = realloc(op->entries, cap * sizeof *op->entries);
        }
        struct stat st;
        const char *type = "other";
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) type = type_name(st.st_mode);
        op->entries[op->entry_count].name = strdup(e->d_name);
        op->entries[op->entry_count].type = type;
        op->entry_count++;
      }
      closedir(d);
      qsort(op->entries, op->entry_count, sizeof *op->entries, compare_entries);
      return;
    }
    case FS_STAT:
      if (stat(op->path, &op->st) != 0) op->error = errno;
      return;
  }
}

static void op_free(fs_op *op) {
  for (size_t i = 0; i < op->entry_count; i++) free(op->entries[i].name);
  free(op->entries);
  free(op->data);
  free(op->path);
  free(op);
}

/* Back on the loop: resume the task, unless it went away. */
static void after_work(uv_work_t *w, int status) {
  fs_op *op = w->data;
  if (status == UV_ECANCELED) op->error = ECANCELED;
  op->done = true;
  task *t = op->task;
  if (!t || t->wait != TASK_WAIT_OP || t->wait_op != &op->op) {
    op_free(op);
    return;
  }
  task_resume(t, 0); /* fs_continue reads the op and frees it */
}

static void push_stat(lua_State *L, const struct stat *st) {
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
    lua_pushfstring(L, "%s: %s", op->path,
                    op->error == EFBIG ? "too large for the server's memory limit" : strerror(op->error));
    lua_pushstring(L, uv_err_name(uv_translate_sys_error(op->error)));
    op_free(op);
    return 3;
  }
  switch (op->kind) {
    case FS_READ: lua_pushlstring(L, op->data ? op->data : "", op->len); break;
    case FS_WRITE: lua_pushboolean(L, 1); break;
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
  task *t = task_check(L, what);
  vm *v = t->vm;
  fs_op *op = calloc(1, sizeof *op);
  op->op.cancel = cancel_op;
  op->task = t;
  op->kind = kind;
  op->path = strdup(path);
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

void lua_fs_register(lua_State *L, int module_idx) {
  static const luaL_Reg functions[] = {
      {"read", fs_read}, {"write", fs_write}, {"list", fs_list}, {"stat", fs_stat}, {NULL, NULL}};
  luaL_newlib(L, functions);
  lua_setfield(L, module_idx, "fs");
}
