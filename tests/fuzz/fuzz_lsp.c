/* fuzz_lsp.c — libFuzzer target: the whole server behind the framer.
 *
 * Input: byte 0 picks the read size (1..256 bytes per feed, so partial
 * reads and several messages per read are both exercised), the rest is
 * the raw stream a client would write. Half the runs get a valid
 * initialize first so the post-initialize handlers (sync, hover, code
 * actions, executeCommand, cancellation) are reachable. The server runs
 * with the real engine backend (tree-sitter static checks on whatever
 * text the fuzzer opens). Any crash, sanitizer report or leak is a bug. */
#include "mk_lsp_engine.h"
#include "mk_lsp_server.h"

#include <stdint.h>
#include <string.h>

static mk_lsp_transport *g_t;
static int sink_global(void *ctx, const char *body, size_t len) {
  return g_t ? mk_lsp_transport_send(g_t, body, len) : 0;
}

static const char INIT_BODY[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"capabilities\":"
    "{\"window\":{\"workDoneProgress\":true}}}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t step = (size_t)(data[0] & 0x7f) + 1;
  bool init = data[0] & 0x80;
  data++;
  size--;
  uv_loop_t loop;
  uv_loop_init(&loop);
  mk_buf out;
  mk_buf_init(&out, 16 << 20);
  mk_lsp_backend b;
  mk_lsp_engine_backend_new(&loop, &b);
  mk_lsp_server *s;
  mk_lsp_server_options o = {.loop = &loop, .backend = b, .send = sink_global};
  if (mk_lsp_server_new(&o, &s) != 0) return 0;
  mk_lsp_transport_events ev = {mk_lsp_server_frames(s), NULL};
  mk_lsp_transport_memory(&ev, &out, 1 << 20, &g_t);
  if (init) {
    mk_buf f;
    mk_buf_init(&f, 0);
    mk_lsp_frame_write(&f, INIT_BODY, sizeof INIT_BODY - 1);
    mk_lsp_transport_feed(g_t, f.data, f.len);
    mk_buf_free(&f);
  }
  for (size_t i = 0; i < size; i += step) {
    size_t n = size - i < step ? size - i : step;
    mk_lsp_transport_feed(g_t, (const char *)data + i, n);
    uv_run(&loop, UV_RUN_NOWAIT);
  }
  mk_lsp_transport_feed_eof(g_t);
  mk_lsp_server_close(s);
  mk_lsp_transport_close(g_t);
  g_t = NULL;
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  mk_buf_free(&out);
  return 0;
}
