/* lsp_stdio.c — `mkevolve lsp`: the server on stdin/stdout.
 * Owns the process-level concerns: the loop, the stdio transport, exit
 * codes (0 after shutdown+exit, 1 on exit without shutdown or EOF), and
 * SIGPIPE (a vanished editor must not kill us mid-write). */
#include "mk_lsp_server.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct app {
  mk_lsp_server *server;
  mk_lsp_transport *transport;
  mk_lsp_frame_handler frames;
  int code;
  bool done;
} app;

static int app_send(void *ctx, const char *body, size_t len) {
  app *a = ctx;
  return a->transport ? mk_lsp_transport_send(a->transport, body, len) : MK_EIO;
}

static void app_stop(app *a, int code) {
  if (a->done) return;
  a->done = true;
  a->code = code;
  mk_lsp_server_close(a->server);
  mk_lsp_transport_close(a->transport); /* flushes queued replies first */
  a->transport = NULL;
}

static void app_exit(void *ctx, int code) { app_stop(ctx, code); }

static void app_message(void *ctx, const char *body, size_t len) {
  app *a = ctx;
  if (!a->done) a->frames.on_message(a->frames.ctx, body, len);
}

static void app_frame_error(void *ctx, mk_lsp_frame_error kind, const char *why) {
  app *a = ctx;
  if (!a->done) a->frames.on_error(a->frames.ctx, kind, why);
}

static void app_eof(void *ctx) {
  app *a = ctx;
  /* The editor went away without `exit`: per spec that is exit code 1
   * unless it had asked for shutdown. */
  int code = mk_lsp_rpc_state(mk_lsp_server_rpc(a->server)) == MK_LSP_SHUTDOWN ? 0 : 1;
  app_stop(a, code);
}

static void usage(FILE *out) {
  fputs("usage: mkevolve lsp [--stdio]\n"
        "Runs the MKEvolve language server on stdin/stdout (LSP 3.17).\n",
        out);
}

int mk_lsp_main(int argc, char **argv, mk_lsp_backend_new_fn backend_new) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--stdio") == 0) continue;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    }
    fprintf(stderr, "mkevolve lsp: unknown option '%s'\n", argv[i]);
    usage(stderr);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0) {
    fputs("mkevolve lsp: cannot start the event loop\n", stderr);
    return 1;
  }
  app a = {0};
  mk_lsp_backend backend;
  if (backend_new(&loop, &backend) != 0) return 1;
  mk_lsp_server_options o = {.loop = &loop, .backend = backend, .send = app_send,
                             .send_ctx = &a, .on_exit = app_exit, .exit_ctx = &a,
                             .log = stderr};
  if (mk_lsp_server_new(&o, &a.server) != 0) {
    backend.ops->destroy(backend.self);
    return 1;
  }
  a.frames = mk_lsp_server_frames(a.server);
  mk_lsp_transport_events ev = {{app_message, app_frame_error, &a}, app_eof};
  if (mk_lsp_transport_stdio(&loop, STDIN_FILENO, STDOUT_FILENO, &ev, 0, &a.transport) != 0 ||
      mk_lsp_transport_start(a.transport) != 0) {
    a.done = true;
    a.code = 1;
    mk_lsp_server_close(a.server);
    mk_lsp_transport_close(a.transport);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0) fputs("mkevolve lsp: handles left open at exit\n", stderr);
  return a.code;
}
