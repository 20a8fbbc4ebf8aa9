/* mk_lsp_server.h — the MKEvolve language server.
 *
 * Ties the layers together: framed bodies go to the JSON-RPC layer, whose
 * handlers keep the document store in sync, schedule debounced analyses
 * (one uv_timer per document), run backend jobs with work-done progress,
 * and turn analyses into diagnostics, code actions, code lenses and
 * hovers. Every handler answers from state already in memory; anything
 * slow runs as a backend job on the loop, so hover never waits on a
 * worker.
 *
 * Ownership: the server takes over its backend (destroyed when the server
 * is). mk_lsp_server_close starts teardown; the memory is released once
 * libuv has closed the server's timers, i.e. after the loop runs again. */
#ifndef MK_LSP_SERVER_H
#define MK_LSP_SERVER_H

#include "mk_lsp_backend.h"
#include "mk_lsp_docs.h"
#include "mk_lsp_rpc.h"
#include "mk_lsp_settings.h"
#include "mk_lsp_transport.h"

#include <stdio.h>
#include <uv.h>

typedef struct mk_lsp_server mk_lsp_server;

typedef struct mk_lsp_server_options {
  uv_loop_t *loop;
  mk_lsp_backend backend; /* taken over; ops may be NULL (protocol only) */
  /* Where message bodies go (usually mk_lsp_transport_send). */
  int (*send)(void *ctx, const char *body, size_t len);
  void *send_ctx;
  /* `exit` arrived (code 0 after shutdown, else 1). Optional. */
  void (*on_exit)(void *ctx, int code);
  void *exit_ctx;
  FILE *log;              /* diagnostics for humans (stderr); may be NULL */
} mk_lsp_server_options;

int mk_lsp_server_new(const mk_lsp_server_options *o, mk_lsp_server **out);
/* Cancels jobs, stops timers, destroys the backend; frees after the loop
 * has closed the handles. Safe to call from inside a handler (then the
 * rest happens once the handler returns). */
void mk_lsp_server_close(mk_lsp_server *s);

/* The framer callbacks that feed this server. */
mk_lsp_frame_handler mk_lsp_server_frames(mk_lsp_server *s);

/* Read-only views for tests and benchmarks. */
mk_lsp_rpc *mk_lsp_server_rpc(mk_lsp_server *s);
mk_lsp_docs *mk_lsp_server_docs(mk_lsp_server *s);
const mk_lsp_settings *mk_lsp_server_settings(const mk_lsp_server *s);
/* Number of backend jobs started and not yet done. */
int mk_lsp_server_jobs(const mk_lsp_server *s);

/* Makes the backend a server runs with (the engine's: mk_lsp_engine_backend_new). */
typedef int (*mk_lsp_backend_new_fn)(uv_loop_t *loop, mk_lsp_backend *out);

/* `mkevolve lsp [--stdio]`: runs the server, with the backend made by
 * `backend_new`, on stdin/stdout until `exit` or EOF; returns the process
 * exit status. argv[0] is "lsp". */
int mk_lsp_main(int argc, char **argv, mk_lsp_backend_new_fn backend_new);

#endif
