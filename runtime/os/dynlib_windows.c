/*
 * dynlib_windows.c - os/dynlib.h with LoadLibraryExW. Names are UTF-8, as
 * every string in luamcp; Windows wants UTF-16.
 */
#include "os/dynlib.h"

#include <windows.h>
#include <stdio.h>
#include <string.h>

bool os_dynlib_available(void) { return true; }

os_dynlib *os_dynlib_open(const char *const *names, size_t count, char *why, size_t why_size) {
  DWORD error = ERROR_MOD_NOT_FOUND;
  for (size_t i = 0; i < count; i++) {
    wchar_t wide[MAX_PATH];
    if (!MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, names[i], -1, wide, MAX_PATH)) {
      error = GetLastError();
      continue;
    }
    /* The safe search order: the program's folder and the system's, never
     * the current directory (where anyone's DLL of that name could sit). */
    HMODULE lib = LoadLibraryExW(wide, NULL, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
    if (lib) return (os_dynlib *)lib;
    error = GetLastError();
  }
  char text[200];
  if (!FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, error, 0, text, sizeof text,
                      NULL))
    snprintf(text, sizeof text, "error %lu", (unsigned long)error);
  /* FormatMessage ends its text with a line break. */
  for (size_t n = strlen(text); n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == '.'); n--)
    text[n - 1] = '\0';
  snprintf(why, why_size, "%s", text);
  return NULL;
}

void *os_dynlib_symbol(os_dynlib *lib, const char *name) {
  /* GetProcAddress's FARPROC is a function pointer; callers cast it back
   * to the function's own type (as with dlsym). */
  FARPROC fn = GetProcAddress((HMODULE)lib, name);
  void *p;
  memcpy(&p, &fn, sizeof p);
  return p;
}

void os_dynlib_close(os_dynlib *lib) { FreeLibrary((HMODULE)lib); }
