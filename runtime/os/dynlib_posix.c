/*
 * dynlib_posix.c - os/dynlib.h with the C library's dlopen.
 */
#include "os/dynlib.h"

#include <dlfcn.h>
#include <stdio.h>

/* A program linked with -static has no dynamic section: its _DYNAMIC, a
 * weak reference here, stays NULL. */
extern char _DYNAMIC[] __attribute__((weak));
bool os_dynlib_available(void) { return _DYNAMIC != NULL; }

os_dynlib *os_dynlib_open(const char *const *names, size_t count, char *why, size_t why_size) {
  const char *error = "no library named";
  for (size_t i = 0; i < count; i++) {
    /* RTLD_LOCAL: its symbols serve only the lookups made through it. */
    void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib) return lib;
    error = dlerror();
  }
  snprintf(why, why_size, "%s", error);
  return NULL;
}

void *os_dynlib_symbol(os_dynlib *lib, const char *name) { return dlsym(lib, name); }

void os_dynlib_close(os_dynlib *lib) { dlclose(lib); }
