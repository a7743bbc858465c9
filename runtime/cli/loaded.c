/* loaded.c - see loaded.h. */
#include "cli/loaded.h"

#include <uv.h>

static void close_handle(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static bool load_and_look(const char *path, const bundle *source, bool (*look)(vm *v, void *arg, buf *err), void *arg,
                          buf *err) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  server srv;
  server_options opts;
  server_options_defaults(&opts);
  lua_app app = {0};
  server_init(&srv, &opts, &VM_APP_OPS, &app);
  vm *v = vm_new(&srv, &loop, path, source, NULL, err);
  bool ok = v && look(v, arg, err);
  vm_free(v);
  uv_walk(&loop, close_handle, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return ok;
}

bool with_loaded_scripts(const char *path, bool (*look)(vm *v, void *arg, buf *err), void *arg, buf *err) {
  return load_and_look(path, NULL, look, arg, err);
}

bool with_loaded_bundle(const bundle *b, bool (*look)(vm *v, void *arg, buf *err), void *arg, buf *err) {
  /* The bundle's name stands for the folder it was built from, as in a
   * built program (main.c). */
  return load_and_look(b->name, b, look, arg, err);
}
