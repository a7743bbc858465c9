/* curl_lib.c - see curl_lib.h. */
#include "app/curl_lib.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "app/app.h"
#include "core/lacks.h"
#include "os/dynlib.h"

/* Owner: this file, for the life of the process. */
static struct {
  bool tried, loaded;
  char failure[200]; /* why loading failed, a predicate after the caller's name */
  curl_api api;
  /* libcurl's own, which api.easy_init and api.easy_strerror wrap. */
  CURL *(*libcurl_easy_init)(void);
  const char *(*libcurl_strerror)(CURLcode code);
  /* The CA certificates every handle trusts (find_cas), chosen once. */
  const char *ca_file, *ca_dir; /* NULL: none (or libcurl's default, when ca_set is false) */
  bool ca_set;
  char ca_note[600];       /* where they came from, or where find_cas looked */
  char tls_errors[2][800]; /* libcurl's words for the two CA failures, with ca_note */
} C;

/* Every function of curl_api: its field, and libcurl's name for it. */
#define CURL_FUNCTIONS(X)                                                                                          \
  X(global_init, curl_global_init)                                                                                 \
  X(multi_init, curl_multi_init)                                                                                   \
  X(multi_setopt, curl_multi_setopt)                                                                               \
  X(multi_socket_action, curl_multi_socket_action)                                                                 \
  X(multi_perform, curl_multi_perform)                                                                             \
  X(multi_poll, curl_multi_poll)                                                                                   \
  X(multi_info_read, curl_multi_info_read)                                                                         \
  X(multi_add_handle, curl_multi_add_handle)                                                                       \
  X(multi_remove_handle, curl_multi_remove_handle)                                                                 \
  X(multi_assign, curl_multi_assign)                                                                               \
  X(multi_cleanup, curl_multi_cleanup)                                                                             \
  X(easy_init, curl_easy_init)                                                                                     \
  X(easy_setopt, curl_easy_setopt)                                                                                 \
  X(easy_getinfo, curl_easy_getinfo)                                                                               \
  X(easy_cleanup, curl_easy_cleanup)                                                                               \
  X(easy_perform, curl_easy_perform)                                                                               \
  X(easy_send, curl_easy_send)                                                                                     \
  X(easy_recv, curl_easy_recv)                                                                                     \
  X(easy_strerror, curl_easy_strerror)                                                                             \
  X(slist_append, curl_slist_append)                                                                               \
  X(slist_free_all, curl_slist_free_all)                                                                           \
  X(url, curl_url)                                                                                                 \
  X(url_cleanup, curl_url_cleanup)                                                                                 \
  X(url_set, curl_url_set)                                                                                         \
  X(url_get, curl_url_get)                                                                                         \
  X(free, curl_free)

#ifdef LUAMCP_CURL_STATIC

/* libcurl is linked into the program (the Windows .exe): the table is its
 * functions' addresses, and nothing can be missing. */
static bool bind_functions(void) {
#define CURL_LINKED(field, name) C.api.field = name;
  CURL_FUNCTIONS(CURL_LINKED)
#undef CURL_LINKED
  return true;
}

#else

/* A static program built from this file cannot load libcurl: what needs it
 * is missing there (lacks.h). */
LUAMCP_LACKS(http, LACKS_IF_STATIC, "mcp.http",
             "libcurl is a shared library, which a fully static program cannot load");
LUAMCP_LACKS(client_url, LACKS_IF_STATIC, "mcp.client",
             "mcp.client{ url = ... } needs libcurl, which a fully static program cannot load "
             "(mcp.client{ command = ... } works)");

/* libcurl is a shared library, loaded now (os/dynlib.h). */
static bool bind_functions(void) {
  if (!app_can_load_shared_libraries()) {
    snprintf(C.failure, sizeof C.failure,
             "is not available in a fully static luamcp (luamcp build --static): libcurl is a shared library and a "
             "static program cannot load one; build without --static");
    return false;
  }
  static const char *const names[] = {"libcurl.so.4", "libcurl-gnutls.so.4"};
  char why[150]; /* leaves room in C.failure for what comes before it */
  os_dynlib *lib = os_dynlib_open(names, sizeof names / sizeof *names, why, sizeof why);
  if (!lib) {
    snprintf(C.failure, sizeof C.failure, "needs libcurl (Debian: apt install libcurl4): %s", why);
    return false;
  }
  struct {
    void **slot;
    const char *name;
  } fns[] = {
#define CURL_LOOKUP(field, name) {(void **)&C.api.field, #name},
      CURL_FUNCTIONS(CURL_LOOKUP)
#undef CURL_LOOKUP
  };
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
    *fns[i].slot = os_dynlib_symbol(lib, fns[i].name);
    if (!*fns[i].slot) {
      snprintf(C.failure, sizeof C.failure, "cannot use the libcurl found: it has no %s (too old?)", fns[i].name);
      os_dynlib_close(lib);
      return false;
    }
  }
  return true;
}

#endif

const char *const CURL_LIB_CA_BUNDLES[] = {
    "/etc/ssl/certs/ca-certificates.crt",                /* Debian, Ubuntu */
    "/etc/pki/tls/certs/ca-bundle.crt",                  /* Fedora, RHEL */
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", /* Fedora, RHEL */
    "/etc/ssl/ca-bundle.pem",                            /* openSUSE */
    "/etc/ssl/cert.pem",                                 /* Alpine */
    NULL,
};

/* The CA certificates, on whichever Linux the program runs: the one rule
 * for every easy handle luamcp makes (mcp.http, the client, OAuth, the
 * token verifier's fetches, OpenTelemetry's export). SSL_CERT_FILE and
 * SSL_CERT_DIR first, as OpenSSL's own tools read them (libcurl itself
 * does not); then, in a Linux build with libcurl linked in (no compiled-in
 * location: runtime/tools/cross/static-deps.sh), the distributions' own
 * bundles. A loaded libcurl keeps the default its distribution compiled
 * in, and Windows' (Schannel) the system's store. */
static void find_cas(void) {
  const char *file = getenv("SSL_CERT_FILE"), *dir = getenv("SSL_CERT_DIR");
  if (file && !*file) file = NULL;
  if (dir && !*dir) dir = NULL;
  if (file || dir) {
    /* Named, so used even when missing: the request fails and says so,
     * rather than trusting what the user did not name. */
    C.ca_set = true;
    C.ca_file = file;
    C.ca_dir = dir;
    int n = snprintf(C.ca_note, sizeof C.ca_note, "CA certificates from");
    if (file)
      n += snprintf(C.ca_note + n, sizeof C.ca_note - (size_t)n, " SSL_CERT_FILE=%s%s", file,
                    access(file, R_OK) == 0 ? "" : " (cannot read it)");
    if (dir && n < (int)sizeof C.ca_note)
      snprintf(C.ca_note + n, sizeof C.ca_note - (size_t)n, "%s SSL_CERT_DIR=%s%s", file ? " and" : "", dir,
               access(dir, R_OK | X_OK) == 0 ? "" : " (cannot read it)");
    return;
  }
#if defined _WIN32
  snprintf(C.ca_note, sizeof C.ca_note, "CA certificates from Windows' store (SSL_CERT_FILE names others)");
#elif defined LUAMCP_CURL_STATIC
  const char *const *bundles = CURL_LIB_CA_BUNDLES;
  C.ca_set = true;
  int n = snprintf(C.ca_note, sizeof C.ca_note, "no CA certificates found (set SSL_CERT_FILE); looked in "
                                                "SSL_CERT_FILE, SSL_CERT_DIR");
  for (size_t i = 0; bundles[i]; i++) {
    if (access(bundles[i], R_OK) == 0) {
      C.ca_file = bundles[i];
      snprintf(C.ca_note, sizeof C.ca_note, "CA certificates from %s (SSL_CERT_FILE names others)", bundles[i]);
      return;
    }
    if (n < (int)sizeof C.ca_note) n += snprintf(C.ca_note + n, sizeof C.ca_note - (size_t)n, ", %s", bundles[i]);
  }
#else
  snprintf(C.ca_note, sizeof C.ca_note, "CA certificates: libcurl's default (SSL_CERT_FILE names others)");
#endif
}

static CURL *easy_init_with_cas(void) {
  CURL *e = C.libcurl_easy_init();
  if (e && C.ca_set) {
    /* NULL clears the location, so that only what was named is trusted. */
    C.api.easy_setopt(e, CURLOPT_CAINFO, C.ca_file);
    C.api.easy_setopt(e, CURLOPT_CAPATH, C.ca_dir);
  }
  return e;
}

/* libcurl's words, and for a failure to verify the peer (or to read the
 * CA certificates) where they came from: the one thing a user can fix. */
static const char *strerror_with_cas(CURLcode code) {
  if (code == CURLE_PEER_FAILED_VERIFICATION) return C.tls_errors[0];
  if (code == CURLE_SSL_CACERT_BADFILE) return C.tls_errors[1];
  return C.libcurl_strerror(code);
}

static bool load(void) {
  if (!bind_functions()) return false;
  find_cas();
  C.libcurl_easy_init = C.api.easy_init;
  C.api.easy_init = easy_init_with_cas;
  C.libcurl_strerror = C.api.easy_strerror;
  C.api.easy_strerror = strerror_with_cas;
  snprintf(C.tls_errors[0], sizeof C.tls_errors[0], "%s; %s", C.libcurl_strerror(CURLE_PEER_FAILED_VERIFICATION),
           C.ca_note);
  snprintf(C.tls_errors[1], sizeof C.tls_errors[1], "%s; %s", C.libcurl_strerror(CURLE_SSL_CACERT_BADFILE), C.ca_note);
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

/* localhost, 127.0.0.0/8 or ::1, as curl_url gives a host: IPv4 numbers
 * already in dotted decimal ("127.1" and "0x7f000001" come back as
 * 127.0.0.1), IPv6 in brackets. */
static bool loopback_host(const char *host) {
  if (strcasecmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0) return true;
  unsigned a, b, c, d;
  char end;
  return sscanf(host, "%3u.%3u.%3u.%3u%c", &a, &b, &c, &d, &end) == 4 && a == 127 && b < 256 && c < 256 && d < 256;
}

bool curl_lib_credentials_allowed(const curl_api *api, const char *url, char *why, size_t why_len) {
  CURLU *u = api->url();
  char *scheme = NULL, *host = NULL, *user = NULL, *password = NULL;
  bool ok = false;
  if (!u) snprintf(why, why_len, "out of memory");
  else if (api->url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
           api->url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
           (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) ||
           api->url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host)
    snprintf(why, why_len, "it is not an http or https URL");
  else if (api->url_get(u, CURLUPART_USER, &user, 0) != CURLUE_NO_USER ||
           api->url_get(u, CURLUPART_PASSWORD, &password, 0) != CURLUE_NO_PASSWORD)
    snprintf(why, why_len, "it has a user name or password before its host (USER@HOST), which hides where it goes");
  else if (strcmp(scheme, "https") != 0 && !loopback_host(host))
    snprintf(why, why_len, "it is plain http to %s, which is not a loopback host (OAuth 2.1 wants https)", host);
  else ok = true;
  api->free(scheme);
  api->free(host);
  api->free(user);
  api->free(password);
  if (u) api->url_cleanup(u);
  return ok;
}
