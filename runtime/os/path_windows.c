/*
 * path_windows.c - os/path.h on Windows. Paths cross this seam in UTF-8 and
 * the wide (UTF-16) API does the work: GetFullPathNameW to see what Win32
 * makes of a path (a device comes back as \\.\NAME), CreateFileW and
 * GetFinalPathNameByHandleW for the real path with junctions and symbolic
 * links resolved, FSCTL_GET_REPARSE_POINT for a link's target. Names are
 * compared folding ASCII letters only (see lua/mcp/path.lua).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>
#include <winioctl.h>

#include "os/path.h"

const char *os_path_platform(void) { return "windows"; }

/* UTF-8 -> a malloc'd wide string, or NULL. */
static wchar_t *wide_of(const char *s) {
  int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
  if (n <= 0) return NULL;
  wchar_t *w = malloc((size_t)n * sizeof *w);
  if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
    free(w);
    return NULL;
  }
  return w;
}

/* n wide characters -> a malloc'd UTF-8 string, or NULL. */
static char *utf8_of(const wchar_t *w, int n) {
  int len = WideCharToMultiByte(CP_UTF8, 0, w, n, NULL, 0, NULL, NULL);
  if (len < 0 || (len == 0 && n > 0)) return NULL;
  char *s = malloc((size_t)len + 1);
  if (!s) return NULL;
  WideCharToMultiByte(CP_UTF8, 0, w, n, s, len, NULL, NULL);
  s[len] = '\0';
  return s;
}

static int errno_of(DWORD error) {
  switch (error) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
    case ERROR_INVALID_NAME:
    case ERROR_BAD_NETPATH:
    case ERROR_BAD_NET_NAME:
    case ERROR_INVALID_DRIVE: return ENOENT;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION: return EACCES;
    case ERROR_DIRECTORY: return ENOTDIR;
    case ERROR_CANT_RESOLVE_FILENAME: return ELOOP;
    default: return EIO;
  }
}

/* Win32's own reading of path (GetFullPathNameW), malloc'd; NULL with
 * errno set, EINVAL for a device (\\.\NUL, CON, COM1...): not a file. */
static wchar_t *full_path_of(const wchar_t *w) {
  DWORD n = GetFullPathNameW(w, 0, NULL, NULL);
  wchar_t *full = n ? malloc((size_t)n * sizeof *full) : NULL;
  if (!full || GetFullPathNameW(w, n, full, NULL) >= n) {
    errno = full ? errno_of(GetLastError()) : ENOMEM;
    free(full);
    return NULL;
  }
  if (wcsncmp(full, L"\\\\.\\", 4) == 0) {
    free(full);
    errno = EINVAL;
    return NULL;
  }
  return full;
}

/* Opens path (following links unless told otherwise), for its metadata
 * only; folders too. */
static HANDLE open_for_metadata(const wchar_t *path, DWORD flags) {
  return CreateFileW(path, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                     FILE_FLAG_BACKUP_SEMANTICS | flags, NULL);
}

char *os_path_real(const char *path) {
  char *real = NULL;
  wchar_t *w = wide_of(path), *full = NULL, *final = NULL;
  if (!w) {
    errno = EINVAL;
    return NULL;
  }
  full = full_path_of(w);
  if (!full) goto done;
  HANDLE h = open_for_metadata(full, 0);
  if (h == INVALID_HANDLE_VALUE) {
    errno = errno_of(GetLastError());
    goto done;
  }
  DWORD n = GetFinalPathNameByHandleW(h, NULL, 0, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
  final = n ? malloc((size_t)n * sizeof *final) : NULL;
  DWORD got = final ? GetFinalPathNameByHandleW(h, final, n, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS) : 0;
  DWORD error = GetLastError();
  CloseHandle(h);
  if (!final || got == 0 || got >= n) {
    errno = final ? errno_of(error) : ENOMEM;
    goto done;
  }
  /* The plain form: \\?\C:\x -> C:\x, \\?\UNC\server\share -> \\server\share. */
  const wchar_t *plain = final;
  int len = (int)got;
  if (wcsncmp(final, L"\\\\?\\UNC\\", 8) == 0) {
    final[6] = L'\\';
    plain = final + 6;
    len -= 6;
  } else if (wcsncmp(final, L"\\\\?\\", 4) == 0) {
    plain = final + 4;
    len -= 4;
  }
  real = utf8_of(plain, len);
  if (!real) errno = ENOMEM;
done:
  free(w);
  free(full);
  free(final);
  return real;
}

/* The reparse data a symbolic link or a junction holds (documented in
 * [MS-FSCC] 2.1.2; ntifs.h is a driver kit header, so it is spelled out
 * here). */
typedef struct reparse_data {
  ULONG tag;
  USHORT data_length;
  USHORT reserved;
  USHORT substitute_offset, substitute_length, print_offset, print_length;
  union {
    struct {
      ULONG flags;
      WCHAR names[1];
    } symlink;
    struct {
      WCHAR names[1];
    } junction;
  } u;
} reparse_data;

char *os_path_readlink(const char *path) {
  wchar_t *w = wide_of(path);
  if (!w) return NULL;
  HANDLE h = open_for_metadata(w, FILE_FLAG_OPEN_REPARSE_POINT);
  free(w);
  if (h == INVALID_HANDLE_VALUE) return NULL;
  union {
    reparse_data data;
    BYTE bytes[16 * 1024]; /* MAXIMUM_REPARSE_DATA_BUFFER_SIZE */
  } *buffer = malloc(sizeof *buffer);
  DWORD got = 0;
  BOOL ok = buffer && DeviceIoControl(h, FSCTL_GET_REPARSE_POINT, NULL, 0, buffer, sizeof *buffer, &got, NULL);
  CloseHandle(h);
  char *target = NULL;
  if (ok) {
    const reparse_data *r = &buffer->data;
    const WCHAR *names = r->tag == IO_REPARSE_TAG_SYMLINK       ? r->u.symlink.names
                         : r->tag == IO_REPARSE_TAG_MOUNT_POINT ? r->u.junction.names
                                                                : NULL;
    size_t start = names ? (size_t)((const BYTE *)names - buffer->bytes) : 0;
    /* The substitute name: "\??\C:\target" (the Lua rules read that form)
     * or, for a relative symbolic link, a path from the link's folder. */
    if (names && start + r->substitute_offset + r->substitute_length <= got)
      target = utf8_of(names + r->substitute_offset / sizeof(WCHAR), r->substitute_length / sizeof(WCHAR));
  }
  free(buffer);
  return target;
}

bool os_path_is_separator(char c) { return c == '/' || c == '\\'; }

/* A regular file (not a folder) at path? */
static bool is_file(const char *path) {
  wchar_t *w = wide_of(path);
  DWORD attributes = w ? GetFileAttributesW(w) : INVALID_FILE_ATTRIBUTES;
  free(w);
  return attributes != INVALID_FILE_ATTRIBUTES && !(attributes & FILE_ATTRIBUTE_DIRECTORY);
}

/* The real path of dir\name with the first extension that names a file
 * ("" when name has one of its own), or NULL. */
/* A batch file (.bat, .cmd) runs through cmd.exe, which reads its command
 * line by rules of its own: the quoting libuv gives arguments for a C
 * program leaves "&", "|" and "%" live there, so one argument from a tool's
 * input could run any command ("BatBadBut"). Such a program is never
 * found, so never allowed; a script that wants cmd names cmd.exe itself. */
static bool is_batch_file(const char *path) {
  size_t n = strlen(path);
  if (n < 4) return false;
  const char *ext = path + n - 4;
  return ext[0] == '.' && (_stricmp(ext, ".bat") == 0 || _stricmp(ext, ".cmd") == 0);
}

static char *find_program(const char *dir, size_t dir_len, const char *name) {
  static const char *const with_own[] = {""}, *const without[] = {".exe", ".com"};
  const char *base = name;
  for (const char *c = name; *c; c++)
    if (os_path_is_separator(*c)) base = c + 1;
  bool has_extension = strchr(base, '.') != NULL;
  const char *const *extensions = has_extension ? with_own : without;
  size_t count = has_extension ? 1 : 2;
  size_t size = dir_len + strlen(name) + 6;
  char *candidate = malloc(size);
  char *real = NULL;
  for (size_t i = 0; candidate && !real && i < count; i++) {
    snprintf(candidate, size, "%.*s%s%s%s", (int)dir_len, dir, dir_len ? "\\" : "", name, extensions[i]);
    if (is_file(candidate)) real = os_path_real(candidate);
  }
  free(candidate);
  if (real && is_batch_file(real)) {
    free(real);
    real = NULL;
  }
  return real;
}

char *os_path_which(const char *name) {
  bool has_separator = false;
  for (const char *c = name; *c; c++) has_separator |= os_path_is_separator(*c) || *c == ':';
  if (has_separator) return find_program("", 0, name);
  /* %PATH% in UTF-8. */
  DWORD n = GetEnvironmentVariableW(L"PATH", NULL, 0);
  wchar_t *wide = n ? malloc((size_t)n * sizeof *wide) : NULL;
  char *path = wide && GetEnvironmentVariableW(L"PATH", wide, n) < n ? utf8_of(wide, -1) : NULL;
  free(wide);
  char *real = NULL;
  for (const char *p = path; p && *p && !real;) {
    const char *end = strchr(p, ';');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *dir = p;
    if (len >= 2 && dir[0] == '"' && dir[len - 1] == '"') dir++, len -= 2; /* "C:\Program Files\x" */
    if (len > 0) real = find_program(dir, len, name); /* an empty entry is no folder */
    p = end ? end + 1 : p + len;
  }
  free(path);
  return real;
}

/* mingw's C library has no strndup. */
static char *copy_of(const char *s, size_t len) {
  char *out = malloc(len + 1);
  if (!out) return NULL;
  memcpy(out, s, len);
  out[len] = '\0';
  return out;
}

static bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool os_path_is_absolute(const char *path) {
  if (is_letter(path[0]) && path[1] == ':' && os_path_is_separator(path[2])) return true;
  return os_path_is_separator(path[0]) && os_path_is_separator(path[1]);
}

char *os_path_dir(const char *path) {
  const char *last = NULL;
  for (const char *p = path; *p; p++)
    if (os_path_is_separator(*p)) last = p;
  /* A drive's root keeps its separator: "C:" alone is C:'s current folder. */
  size_t root = is_letter(path[0]) && path[1] == ':' ? 2 : 0;
  if (!last) return root ? copy_of(path, 2) : copy_of(".", 1);
  size_t len = (size_t)(last - path);
  if (len == root) len++; /* "/x" -> "/", "C:\x" -> "C:\" */
  return copy_of(path, len);
}

static char fold(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

bool os_path_inside(const char *real_dir, const char *real_path) {
  size_t n = strlen(real_dir);
  for (size_t i = 0; i < n; i++)
    if (fold(real_dir[i]) != fold(real_path[i])) return false; /* a shorter real_path stops at its NUL */
  if (n > 0 && os_path_is_separator(real_dir[n - 1])) return real_path[n] != '\0'; /* "C:\" */
  return os_path_is_separator(real_path[n]) && real_path[n + 1] != '\0';
}

/* A DOS device name: Win32 opens it as the device in any folder and with
 * any extension ("nul.txt"), spaces before the extension ignored. */
static bool is_device(const char *name, size_t len) {
  static const char *const devices[] = {"con", "prn", "aux", "nul", "conin$", "conout$"};
  size_t stem = 0;
  while (stem < len && name[stem] != '.') stem++;
  while (stem > 0 && name[stem - 1] == ' ') stem--;
  char s[8];
  if (stem == 0 || stem >= sizeof s) return false;
  for (size_t i = 0; i < stem; i++) s[i] = fold(name[i]);
  s[stem] = '\0';
  for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++)
    if (strcmp(s, devices[i]) == 0) return true;
  /* COM0-9, LPT0-9, and with the superscript digits 1-3 (UTF-8 C2 B9, B2, B3). */
  bool com_lpt = stem >= 4 && (strncmp(s, "com", 3) == 0 || strncmp(s, "lpt", 3) == 0);
  if (com_lpt && stem == 4 && s[3] >= '0' && s[3] <= '9') return true;
  return com_lpt && stem == 5 && (unsigned char)s[3] == 0xC2 &&
         ((unsigned char)s[4] == 0xB9 || (unsigned char)s[4] == 0xB2 || (unsigned char)s[4] == 0xB3);
}

bool os_path_name_ok(const char *name, size_t len) {
  if (len == 0 || name[len - 1] == '.' || name[len - 1] == ' ') return false;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c < 32 || strchr("\\:*?\"<>|", c)) return false;
  }
  return !is_device(name, len);
}
