/* lsp_core_links.c — links every object of the language server's protocol
 * core (mk_lsp) with engine/util alone (tests/CMakeLists.txt): that it
 * builds is the check that the core (every lsp/ file outside lsp/engine)
 * needs nothing of the engine. Running it
 * starts a server with no backend (protocol only) and closes it. */
#include "mk_lsp_server.h"

#include <stdio.h>
#include <uv.h>

static int discard(void *ctx, const char *body, size_t len) {
  (void)ctx, (void)body, (void)len;
  return 0;
}

int main(void) {
  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0) return 1;
  mk_lsp_server_options o = {.loop = &loop, .send = discard};
  mk_lsp_server *s = NULL;
  if (mk_lsp_server_new(&o, &s) != 0) return 1;
  mk_lsp_server_close(s);
  uv_run(&loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&loop) == 0 ? 0 : 1;
  puts(rc == 0 ? "ok: the protocol core links and runs without the engine" : "handles left open");
  return rc;
}
