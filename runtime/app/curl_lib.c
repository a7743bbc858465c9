/* curl_lib.c - see curl_lib.h. */
#include "app/curl_lib.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>

#include "app/app.h"

/* Owner: this file, for the life of the process. */
static struct {
  bool tried, loaded;
  char failure[200]; /* why loading failed, a predicate after the caller's name */
  curl_api api;
} C;

#define CURL_FN(field, name) {(void **)&C.api.field, name}

static bool load(void) {
  if (!app_can_load_shared_libraries()) {
    snprintf(C.failure, sizeof C.failure,
             "is not available in a fully static luamcp (luamcp build --static): libcurl is a shared library and a "
             "static program cannot load one; build without --static");
    return false;
  }
  static const char *const names[] = {"libcurl.so.4", "libcurl-gnutls.so.4"};
  void *lib = NULL;
  for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(C.failure, sizeof C.failure, "needs libcurl (Debian: apt install libcurl4): %s", dlerror());
    return false;
  }
  struct {
    void **slot;
    const char *name;
  } fns[] = {
      CURL_FN(global_init, "curl_global_init"),
      CURL_FN(multi_init, "curl_multi_init"),
      CURL_FN(multi_setopt, "curl_multi_setopt"),
      CURL_FN(multi_socket_action, "curl_multi_socket_action"),
      CURL_FN(multi_perform, "curl_multi_perform"),
      CURL_FN(multi_poll, "curl_multi_poll"),
      CURL_FN(multi_info_read, "curl_multi_info_read"),
      CURL_FN(multi_add_handle, "curl_multi_add_handle"),
      CURL_FN(multi_remove_handle, "curl_multi_remove_handle"),
      CURL_FN(multi_assign, "curl_multi_assign"),
      CURL_FN(multi_cleanup, "curl_multi_cleanup"),
      CURL_FN(easy_init, "curl_easy_init"),
      CURL_FN(easy_setopt, "curl_easy_setopt"),
      CURL_FN(easy_getinfo, "curl_easy_getinfo"),
      CURL_FN(easy_cleanup, "curl_easy_cleanup"),
      CURL_FN(easy_strerror, "curl_easy_strerror"),
      CURL_FN(slist_append, "curl_slist_append"),
      CURL_FN(slist_free_all, "curl_slist_free_all"),
      CURL_FN(url, "curl_url"),
      CURL_FN(url_cleanup, "curl_url_cleanup"),
      CURL_FN(url_set, "curl_url_set"),
      CURL_FN(url_get, "curl_url_get"),
      CURL_FN(free, "curl_free"),
  };
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
    *fns[i].slot = dlsym(lib, fns[i].name);
    if (!*fns[i].slot) {
      snprintf(C.failure, sizeof C.failure, "cannot use the libcurl found: it has no %s (too old?)", fns[i].name);
      dlclose(lib);
      return false;
    }
  }
  if (C.api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    snprintf(C.failure, sizeof C.failure, "cannot use libcurl: it failed to initialize");
    return false;
  }
  return true;
}

const curl_api *curl_lib_load(const char *who, char *why, size_t why_len) {
  if (!C.tried) {
    C.tried = true;
    C.loaded = load();
  }
  if (C.loaded) return &C.api;
  snprintf(why, why_len, "%s %s", who, C.failure);
  return NULL;
}
