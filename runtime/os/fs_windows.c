/* fs_windows.c - os/fs.h on Windows: UTF-8 paths through the W calls. */
#include "os/fs.h"

#include <errno.h>
#include <stdlib.h>
#include <wchar.h>
#include <windows.h>

/* path in UTF-16, malloc'd; NULL (errno EINVAL) when it is no UTF-8. */
static wchar_t *wide(const char *s) {
  int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
  if (n <= 0) {
    errno = EINVAL;
    return NULL;
  }
  wchar_t *w = malloc((size_t)n * sizeof *w);
  MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n);
  return w;
}

FILE *os_fs_open(const char *path, const char *mode) {
  wchar_t *wpath = wide(path), *wmode = wide(mode);
  FILE *f = wpath && wmode ? _wfopen(wpath, wmode) : NULL;
  free(wpath);
  free(wmode);
  return f;
}

/* errno for the last Win32 error (the messages are strerror's). */
static void set_errno(void) {
  switch (GetLastError()) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND: errno = ENOENT; break;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION: errno = EACCES; break;
    case ERROR_DISK_FULL: errno = ENOSPC; break;
    case ERROR_FILE_EXISTS:
    case ERROR_ALREADY_EXISTS: errno = EEXIST; break;
    default: errno = EIO; break;
  }
}

bool os_fs_replace(const char *path, const void *data, size_t len, unsigned mode) {
  (void)mode; /* Windows has no mode bits: a .exe runs by its name */
  wchar_t *target = wide(path);
  if (!target) return false;
  size_t n = wcslen(target) + 32;
  wchar_t *tmp = malloc(n * sizeof *tmp);
  HANDLE h = INVALID_HANDLE_VALUE;
  for (int attempt = 0; attempt < 16 && h == INVALID_HANDLE_VALUE; attempt++) {
    swprintf(tmp, n, L"%ls.tmp-%08lx%02x", target, (unsigned long)GetTickCount(), attempt);
    h = CreateFileW(tmp, GENERIC_WRITE, 0, NULL, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE && GetLastError() != ERROR_FILE_EXISTS) break;
  }
  bool ok = h != INVALID_HANDLE_VALUE;
  for (size_t done = 0; ok && done < len;) {
    DWORD chunk = len - done > 0x40000000u ? 0x40000000u : (DWORD)(len - done), wrote = 0;
    ok = WriteFile(h, (const char *)data + done, chunk, &wrote, NULL) && wrote > 0;
    done += wrote;
  }
  if (h != INVALID_HANDLE_VALUE && !CloseHandle(h)) ok = false;
  ok = ok && MoveFileExW(tmp, target, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH);
  if (!ok) {
    set_errno();
    int e = errno;
    if (h != INVALID_HANDLE_VALUE) DeleteFileW(tmp);
    errno = e;
  }
  free(tmp);
  free(target);
  return ok;
}

bool os_fs_mkdir(const char *path) {
  wchar_t *wpath = wide(path);
  if (!wpath) return false;
  bool ok = CreateDirectoryW(wpath, NULL);
  if (!ok) set_errno();
  free(wpath);
  return ok;
}
