/* mk_lsp_rpc.h — JSON-RPC 2.0 with the LSP lifecycle on top.
 *
 * Takes message bodies from the framer and guarantees, whatever arrives:
 *   - exactly one reply per request (a handler that forgets to answer gets
 *     an InternalError sent for it; a second answer is dropped);
 *   - notifications are never answered;
 *   - requests before `initialize` get ServerNotInitialized; after
 *     `shutdown` they get InvalidRequest, and a second `shutdown` is
 *     answered with null again; `exit` reports exit code 0 after shutdown
 *     and 1 without it;
 *   - `$/cancelRequest` answers a pending request with RequestCancelled
 *     (once) and tells its owner, who stops work and later replies into
 *     the void; unknown methods get MethodNotFound; malformed JSON, invalid
 *     UTF-8 and JSON nested deeper than MK_LSP_MAX_DEPTH get ParseError.
 *
 * Requests that finish later (background jobs) are deferred: the handler
 * takes a handle (a number, never a pointer, so a stale owner cannot touch
 * freed memory) and replies through it.
 *
 * Ownership: cJSON arguments named `result`/`params` passed to send
 * functions are taken over (freed here); cJSON given to handlers is
 * borrowed for the call. */
#ifndef MK_LSP_RPC_H
#define MK_LSP_RPC_H

#include "mk_lsp_transport.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#define MK_LSP_MAX_DEPTH 128

/* JSON-RPC and LSP error codes. */
enum {
  MK_RPC_PARSE_ERROR = -32700,
  MK_RPC_INVALID_REQUEST = -32600,
  MK_RPC_METHOD_NOT_FOUND = -32601,
  MK_RPC_INVALID_PARAMS = -32602,
  MK_RPC_INTERNAL_ERROR = -32603,
  MK_RPC_SERVER_NOT_INITIALIZED = -32002,
  MK_RPC_UNKNOWN_ERROR = -32001,
  MK_RPC_REQUEST_FAILED = -32803,
  MK_RPC_SERVER_CANCELLED = -32802,
  MK_RPC_CONTENT_MODIFIED = -32801,
  MK_RPC_REQUEST_CANCELLED = -32800,
};

typedef enum mk_lsp_state {
  MK_LSP_UNINITIALIZED, /* before `initialize` */
  MK_LSP_RUNNING,       /* `initialize` received */
  MK_LSP_SHUTDOWN,      /* `shutdown` answered; waiting for `exit` */
  MK_LSP_EXITED,        /* `exit` received: nothing more is processed */
} mk_lsp_state;

typedef struct mk_lsp_rpc mk_lsp_rpc;
typedef struct mk_lsp_request mk_lsp_request; /* valid during its handler only */
typedef uint64_t mk_lsp_handle;              /* a deferred request; 0 is none */

typedef void (*mk_lsp_request_fn)(void *ctx, mk_lsp_request *req, const cJSON *params);
typedef void (*mk_lsp_notify_fn)(void *ctx, const cJSON *params);
/* Reply to a server-to-client request: result or error (the other NULL);
 * both NULL when the rpc is freed before the client answered. */
typedef void (*mk_lsp_response_fn)(void *ctx, const cJSON *result, const cJSON *error);
/* Called when a deferred request is cancelled by the client. */
typedef void (*mk_lsp_cancel_fn)(void *ctx, mk_lsp_handle h);

typedef struct mk_lsp_method {
  const char *name;
  mk_lsp_request_fn request; /* exactly one of request/notify is set */
  mk_lsp_notify_fn notify;
} mk_lsp_method;

typedef struct mk_lsp_rpc_hooks {
  /* Sends one message body (the rpc frames nothing: the transport does). */
  int (*send)(void *ctx, const char *body, size_t len);
  /* `shutdown` arrived (first time): stop background work. Optional. */
  void (*on_shutdown)(void *ctx);
  /* `exit` arrived: code is 0 after shutdown, 1 otherwise. */
  void (*on_exit)(void *ctx, int code);
  /* A message was dropped or refused (for logs). Optional. */
  void (*log)(void *ctx, const char *msg);
  void *ctx;
} mk_lsp_rpc_hooks;

/* Creates an rpc dispatching to `methods` (borrowed: must outlive the rpc)
 * with handler context `hctx`. */
int mk_lsp_rpc_new(const mk_lsp_rpc_hooks *hooks, const mk_lsp_method *methods, int nmethods,
                   void *hctx, mk_lsp_rpc **out);
/* Frees the rpc. Deferred requests still open are answered with
 * RequestCancelled first; pending outgoing requests get their callback
 * with (NULL, NULL) and must not send from it. */
void mk_lsp_rpc_free(mk_lsp_rpc *rpc);

/* Processes one message body (from the framer). */
void mk_lsp_rpc_receive(mk_lsp_rpc *rpc, const char *body, size_t len);
/* Reports a frame the transport dropped: replies ParseError (id null) for
 * a body that is not UTF-8, logs the others. */
void mk_lsp_rpc_frame_error(mk_lsp_rpc *rpc, mk_lsp_frame_error kind, const char *why);

mk_lsp_state mk_lsp_rpc_state(const mk_lsp_rpc *rpc);

/* ---- answering requests --------------------------------------------------- */

const char *mk_lsp_request_method(const mk_lsp_request *req);
/* Replies with `result` (taken; NULL means JSON null). */
void mk_lsp_reply(mk_lsp_request *req, cJSON *result);
void mk_lsp_reply_error(mk_lsp_request *req, int code, const char *message);
/* Keeps the request open past its handler. The owner must answer it with
 * mk_lsp_rpc_reply / _reply_error; on_cancel (optional) is called if the
 * client cancels it first (the client already has its answer then). */
mk_lsp_handle mk_lsp_request_defer(mk_lsp_request *req, mk_lsp_cancel_fn on_cancel, void *ctx);
/* Answers a deferred request. Unknown or already answered handles (the
 * client cancelled) are ignored; `result` is freed either way. Returns
 * true when the reply was sent. */
bool mk_lsp_rpc_reply(mk_lsp_rpc *rpc, mk_lsp_handle h, cJSON *result);
bool mk_lsp_rpc_reply_error(mk_lsp_rpc *rpc, mk_lsp_handle h, int code, const char *message);
/* Number of deferred requests not yet answered. */
int mk_lsp_rpc_open_requests(const mk_lsp_rpc *rpc);

/* ---- server to client ----------------------------------------------------- */

int mk_lsp_rpc_notify(mk_lsp_rpc *rpc, const char *method, cJSON *params);
/* Sends a request; on_response (optional) gets the client's answer. */
int mk_lsp_rpc_call(mk_lsp_rpc *rpc, const char *method, cJSON *params,
                    mk_lsp_response_fn on_response, void *ctx);

/* Depth of the deepest array/object in a JSON text (strings skipped);
 * stops counting at limit+1. */
int mk_lsp_json_depth(const char *s, size_t len, int limit);

#endif
