/*
 * inspect.c - `luamcp inspect PATH [--json]`: what the scripts in PATH
 * serve (tools with their arguments, resources, templates, prompts), read
 * by loading them as `luamcp run` does, without serving anything.
 */
#include "cli/inspect.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#include "cli/loaded.h"
#include "cli/suggest.h"

typedef struct inspect_request {
  bool json;
} inspect_request;

/* mcp._inspect(json) returns the text to print. */
static bool print_inspection(vm *v, void *arg, buf *err) {
  inspect_request *r = arg;
  lua_State *L = v->L;
  lua_pushboolean(L, r->json);
  if (!vm_call_library(v, "_inspect", 1)) goto failed;
  size_t n;
  const char *text = lua_tolstring(L, -1, &n);
  fwrite(text, 1, n, stdout);
  lua_pop(L, 1);
  return true;
failed:
  buf_printf(err, "inspect: %s", lua_tostring(L, -1));
  lua_pop(L, 1);
  return false;
}

void inspect_usage(FILE *to) {
  fputs("Usage: luamcp inspect PATH [--json]\n"
        "  Load the scripts in PATH as `luamcp run` does, serve nothing, and print what\n"
        "  they register: tools with their arguments, resources, templates, prompts.\n"
        "  --json   the wire entries clients get (tools/list and the others) as one JSON object\n",
        to);
}

int inspect_command(int argc, char **argv) {
  const char *path = NULL;
  inspect_request r = {false};
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) r.json = true;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      inspect_usage(stdout);
      return 0;
    } else if (argv[i][0] == '-' || path) {
      if (argv[i][0] == '-') fprintf(stderr, "luamcp inspect: unknown option %s%s\n", argv[i], suggest_option(argv[i], inspect_usage));
      else fprintf(stderr, "luamcp inspect: unexpected %s\n", argv[i]);
      inspect_usage(stderr);
      return 2;
    } else path = argv[i];
  }
  if (!path) {
    inspect_usage(stderr);
    return 2;
  }
  buf err = BUF_INIT;
  bool ok = with_loaded_scripts(path, print_inspection, &r, &err);
  if (!ok) fprintf(stderr, "luamcp: %s\n", err.data ? err.data : "cannot load the scripts");
  buf_free(&err);
  return ok ? 0 : 1;
}
