/* lsp_rpc.c — JSON-RPC dispatch, reply bookkeeping, LSP lifecycle.
 * Every path that receives a request ends in exactly one reply or in a
 * logged refusal of a message that was not a request. */
#include "mk_num.h"
#include "mk_lsp_rpc.h"

#include "mk_buf.h"
#include "mk_err.h"

#include <math.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mk_lsp_request {
  mk_lsp_rpc *rpc;
  cJSON *id;               /* owned copy of the request's id */
  char *method;
  mk_lsp_handle handle;
  bool in_handler, answered, deferred;
  mk_lsp_cancel_fn on_cancel;
  void *cancel_ctx;
  mk_lsp_request *next;    /* in rpc->open while deferred */
};

typedef struct outgoing {
  long long id;
  mk_lsp_response_fn fn;
  void *ctx;
  struct outgoing *next;
} outgoing;

struct mk_lsp_rpc {
  mk_lsp_rpc_hooks hooks;
  const mk_lsp_method *methods;
  int nmethods;
  void *hctx;
  mk_lsp_state state;
  mk_lsp_request *open;    /* deferred, unanswered */
  int nopen;
  outgoing *calls;
  long long next_call_id;
  mk_lsp_handle next_handle;
};

static void logf_(mk_lsp_rpc *rpc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(mk_lsp_rpc *rpc, const char *fmt, ...) {
  if (rpc->hooks.log == NULL) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  rpc->hooks.log(rpc->hooks.ctx, msg);
}

int mk_lsp_rpc_new(const mk_lsp_rpc_hooks *hooks, const mk_lsp_method *methods, int nmethods,
                   void *hctx, mk_lsp_rpc **out) {
  mk_lsp_rpc *rpc = calloc(1, sizeof *rpc);
  if (rpc == NULL) return MK_ENOMEM;
  rpc->hooks = *hooks;
  rpc->methods = methods;
  rpc->nmethods = nmethods;
  rpc->hctx = hctx;
  rpc->next_call_id = 1;
  rpc->next_handle = 1;
  *out = rpc;
  return 0;
}

mk_lsp_state mk_lsp_rpc_state(const mk_lsp_rpc *rpc) { return rpc->state; }
int mk_lsp_rpc_open_requests(const mk_lsp_rpc *rpc) { return rpc->nopen; }
const char *mk_lsp_request_method(const mk_lsp_request *req) { return req->method; }

/* ---- sending -------------------------------------------------------------- */

/* Serialises and sends msg (freed here). */
static int send_json(mk_lsp_rpc *rpc, cJSON *msg) {
  if (msg == NULL) return MK_ENOMEM;
  cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
  char *text = cJSON_PrintUnformatted(msg);
  cJSON_Delete(msg);
  if (text == NULL) return MK_ENOMEM;
  int rc = rpc->hooks.send(rpc->hooks.ctx, text, strlen(text));
  cJSON_free(text);
  return rc;
}

/* Builds a response envelope; `id` is copied (NULL: JSON null). */
static cJSON *envelope(const cJSON *id) {
  cJSON *msg = cJSON_CreateObject();
  if (msg == NULL) return NULL;
  cJSON *idc = id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull();
  if (idc == NULL) {
    cJSON_Delete(msg);
    return NULL;
  }
  cJSON_AddItemToObject(msg, "id", idc);
  return msg;
}

static void send_result(mk_lsp_rpc *rpc, const cJSON *id, cJSON *result) {
  cJSON *msg = envelope(id);
  if (msg == NULL) {
    cJSON_Delete(result);
    return;
  }
  cJSON_AddItemToObject(msg, "result", result ? result : cJSON_CreateNull());
  send_json(rpc, msg);
}

static void send_error(mk_lsp_rpc *rpc, const cJSON *id, int code, const char *message) {
  cJSON *msg = envelope(id);
  if (msg == NULL) return;
  cJSON *err = cJSON_AddObjectToObject(msg, "error");
  if (err) {
    cJSON_AddNumberToObject(err, "code", code);
    cJSON_AddStringToObject(err, "message", message ? message : "");
  }
  send_json(rpc, msg);
}

int mk_lsp_rpc_notify(mk_lsp_rpc *rpc, const char *method, cJSON *params) {
  if (rpc->state == MK_LSP_EXITED) {
    cJSON_Delete(params);
    return MK_EINVAL;
  }
  cJSON *msg = cJSON_CreateObject();
  if (msg == NULL) {
    cJSON_Delete(params);
    return MK_ENOMEM;
  }
  cJSON_AddStringToObject(msg, "method", method);
  if (params) cJSON_AddItemToObject(msg, "params", params);
  return send_json(rpc, msg);
}

int mk_lsp_rpc_call(mk_lsp_rpc *rpc, const char *method, cJSON *params,
                    mk_lsp_response_fn on_response, void *ctx) {
  if (rpc->state == MK_LSP_EXITED) {
    cJSON_Delete(params);
    return MK_EINVAL;
  }
  outgoing *o = calloc(1, sizeof *o);
  cJSON *msg = cJSON_CreateObject();
  if (o == NULL || msg == NULL) {
    free(o);
    cJSON_Delete(msg);
    cJSON_Delete(params);
    return MK_ENOMEM;
  }
  o->id = rpc->next_call_id++;
  o->fn = on_response;
  o->ctx = ctx;
  o->next = rpc->calls;
  rpc->calls = o;
  cJSON_AddNumberToObject(msg, "id", (double)o->id);
  cJSON_AddStringToObject(msg, "method", method);
  if (params) cJSON_AddItemToObject(msg, "params", params);
  return send_json(rpc, msg);
}

/* ---- requests ------------------------------------------------------------- */

static void request_free(mk_lsp_request *req) {
  cJSON_Delete(req->id);
  free(req->method);
  free(req);
}

static void unlink_open(mk_lsp_rpc *rpc, mk_lsp_request *req) {
  for (mk_lsp_request **p = &rpc->open; *p; p = &(*p)->next) {
    if (*p == req) {
      *p = req->next;
      rpc->nopen--;
      return;
    }
  }
}

/* Bookkeeping common to every answer; returns false if already answered. */
static bool claim_answer(mk_lsp_request *req) {
  if (req->answered) return false;
  req->answered = true;
  return true;
}

/* Frees a request once it is answered and nobody holds it. */
static void settle(mk_lsp_request *req) {
  if (req->in_handler || !req->answered) return;
  if (req->deferred) unlink_open(req->rpc, req);
  request_free(req);
}

void mk_lsp_reply(mk_lsp_request *req, cJSON *result) {
  if (!claim_answer(req)) {
    cJSON_Delete(result);
    return;
  }
  mk_lsp_rpc *rpc = req->rpc;
  if (strcmp(req->method, "initialize") == 0 && rpc->state == MK_LSP_UNINITIALIZED)
    rpc->state = MK_LSP_RUNNING;
  send_result(rpc, req->id, result);
  settle(req);
}

void mk_lsp_reply_error(mk_lsp_request *req, int code, const char *message) {
  if (!claim_answer(req)) return;
  send_error(req->rpc, req->id, code, message);
  settle(req);
}

mk_lsp_handle mk_lsp_request_defer(mk_lsp_request *req, mk_lsp_cancel_fn on_cancel, void *ctx) {
  if (req->answered) return 0;
  if (!req->deferred) {
    req->deferred = true;
    req->handle = req->rpc->next_handle++;
    req->next = req->rpc->open;
    req->rpc->open = req;
    req->rpc->nopen++;
  }
  req->on_cancel = on_cancel;
  req->cancel_ctx = ctx;
  return req->handle;
}

static mk_lsp_request *find_handle(mk_lsp_rpc *rpc, mk_lsp_handle h) {
  for (mk_lsp_request *r = rpc->open; r; r = r->next)
    if (r->handle == h) return r;
  return NULL;
}

bool mk_lsp_rpc_reply(mk_lsp_rpc *rpc, mk_lsp_handle h, cJSON *result) {
  mk_lsp_request *req = h ? find_handle(rpc, h) : NULL;
  if (req == NULL || req->answered) {
    cJSON_Delete(result);
    return false;
  }
  mk_lsp_reply(req, result);
  return true;
}

bool mk_lsp_rpc_reply_error(mk_lsp_rpc *rpc, mk_lsp_handle h, int code, const char *message) {
  mk_lsp_request *req = h ? find_handle(rpc, h) : NULL;
  if (req == NULL || req->answered) return false;
  mk_lsp_reply_error(req, code, message);
  return true;
}

/* The client gave up on request `id`: answer it now, tell its owner. The
 * handle is retired: the owner's later reply finds nothing and is dropped. */
static void cancel_request(mk_lsp_rpc *rpc, const cJSON *id) {
  if (id == NULL || !(cJSON_IsNumber(id) || cJSON_IsString(id))) return;
  for (mk_lsp_request *r = rpc->open; r; r = r->next) {
    /* an exact (raw) id matches the number a cancel names for it */
    bool same = cJSON_IsRaw(r->id) && cJSON_IsNumber(id)
                    ? strtod(r->id->valuestring, NULL) == id->valuedouble
                    : cJSON_Compare(r->id, id, 1);
    if (r->answered || !same) continue;
    r->answered = true;
    send_error(rpc, r->id, MK_RPC_REQUEST_CANCELLED, "request cancelled");
    mk_lsp_handle h = r->handle;
    /* A reply the owner makes from on_cancel is dropped (answered). */
    if (r->on_cancel) r->on_cancel(r->cancel_ctx, h);
    r = find_handle(rpc, h);
    if (r) {
      unlink_open(rpc, r);
      request_free(r);
    }
    return;
  }
}

static const mk_lsp_method *find_method(mk_lsp_rpc *rpc, const char *name) {
  for (int i = 0; i < rpc->nmethods; i++)
    if (strcmp(rpc->methods[i].name, name) == 0) return &rpc->methods[i];
  return NULL;
}

static void handle_request(mk_lsp_rpc *rpc, const cJSON *id, const char *method,
                           const cJSON *params) {
  if (strcmp(method, "initialize") == 0 && rpc->state != MK_LSP_UNINITIALIZED) {
    send_error(rpc, id, MK_RPC_INVALID_REQUEST, "initialize may be sent only once");
    return;
  }
  if (rpc->state == MK_LSP_UNINITIALIZED && strcmp(method, "initialize") != 0) {
    send_error(rpc, id, MK_RPC_SERVER_NOT_INITIALIZED, "server not initialized");
    return;
  }
  if (rpc->state == MK_LSP_SHUTDOWN) {
    if (strcmp(method, "shutdown") == 0) send_result(rpc, id, NULL);
    else send_error(rpc, id, MK_RPC_INVALID_REQUEST, "server is shutting down");
    return;
  }
  if (strcmp(method, "shutdown") == 0) {
    rpc->state = MK_LSP_SHUTDOWN;
    if (rpc->hooks.on_shutdown) rpc->hooks.on_shutdown(rpc->hooks.ctx);
    send_result(rpc, id, NULL);
    return;
  }
  const mk_lsp_method *m = find_method(rpc, method);
  if (m == NULL || m->request == NULL) {
    char msg[256];
    snprintf(msg, sizeof msg, "method not found: %.200s", method);
    send_error(rpc, id, MK_RPC_METHOD_NOT_FOUND, msg);
    return;
  }
  if (params && !cJSON_IsObject(params) && !cJSON_IsArray(params)) {
    send_error(rpc, id, MK_RPC_INVALID_PARAMS, "params must be an object or an array");
    return;
  }
  mk_lsp_request *req = calloc(1, sizeof *req);
  if (req) {
    req->rpc = rpc;
    req->id = cJSON_Duplicate(id, 1);
    req->method = mk_strdup(method);
  }
  if (req == NULL || req->id == NULL || req->method == NULL) {
    if (req) request_free(req);
    send_error(rpc, id, MK_RPC_INTERNAL_ERROR, "out of memory");
    return;
  }
  req->in_handler = true;
  m->request(rpc->hctx, req, params);
  req->in_handler = false;
  if (!req->answered && !req->deferred) {
    logf_(rpc, "handler for %s returned without a reply", method);
    mk_lsp_reply_error(req, MK_RPC_INTERNAL_ERROR, "the server produced no reply");
    return;
  }
  settle(req);
}

static void handle_notification(mk_lsp_rpc *rpc, const char *method, const cJSON *params) {
  if (strcmp(method, "exit") == 0) {
    int code = rpc->state == MK_LSP_SHUTDOWN ? 0 : 1;
    rpc->state = MK_LSP_EXITED;
    if (rpc->hooks.on_exit) rpc->hooks.on_exit(rpc->hooks.ctx, code);
    return;
  }
  if (rpc->state != MK_LSP_RUNNING) return; /* spec: dropped before init / after shutdown */
  if (strcmp(method, "$/cancelRequest") == 0) {
    cancel_request(rpc, cJSON_IsObject(params) ? cJSON_GetObjectItemCaseSensitive(params, "id")
                                               : NULL);
    return;
  }
  const mk_lsp_method *m = find_method(rpc, method);
  if (m == NULL || m->notify == NULL) {
    if (strncmp(method, "$/", 2) != 0) logf_(rpc, "ignored notification %.200s", method);
    return;
  }
  m->notify(rpc->hctx, params);
}

static void handle_response(mk_lsp_rpc *rpc, const cJSON *id, const cJSON *msg) {
  if (!cJSON_IsNumber(id)) {
    logf_(rpc, "response with a non-numeric id dropped");
    return;
  }
  for (outgoing **p = &rpc->calls; *p; p = &(*p)->next) {
    outgoing *o = *p;
    if ((double)o->id != id->valuedouble) continue;
    *p = o->next;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(msg, "error");
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(msg, "result");
    if (o->fn) o->fn(o->ctx, err ? NULL : res, err);
    free(o);
    return;
  }
  logf_(rpc, "response to unknown request %g dropped", id->valuedouble);
}

int mk_lsp_json_depth(const char *s, size_t len, int limit) {
  int depth = 0, max = 0;
  bool in_str = false;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (in_str) {
      if (c == '\\') i++;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '[' || c == '{') {
      if (++depth > max && (max = depth) > limit) return max;
    } else if (c == ']' || c == '}') depth--;
  }
  return max;
}

/* The text of the top-level member "id" when it is an integer literal
 * (bounded), for ids a double cannot hold: cJSON parses numbers as doubles,
 * so 2^53 + 1 would come back as 2^53 or as 9.007e+15. */
static bool raw_integer_id(const char *s, size_t n, char *out, size_t outsz) {
  int depth = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '{' || c == '[') depth++;
    else if (c == '}' || c == ']') depth--;
    else if (c == '"') {
      size_t start = ++i;
      while (i < n && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
      if (i >= n) return false;
      bool is_id = depth == 1 && i - start == 2 && strncmp(s + start, "id", 2) == 0;
      size_t j = i + 1;
      while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n')) j++;
      if (!is_id || j >= n || s[j] != ':') continue;
      j++;
      while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n')) j++;
      size_t k = j + (j < n && s[j] == '-');
      while (k < n && isdigit((unsigned char)s[k])) k++;
      if (k == j || k - j >= outsz || (k < n && strchr(".eE", s[k]))) return false;
      memcpy(out, s + j, k - j);
      out[k - j] = '\0';
      return true;
    }
  }
  return false;
}

/* Replaces a numeric id beyond 2^53 by its exact text (a raw item, echoed
 * as written). */
static void keep_exact_id(cJSON *msg, const char *body, size_t len) {
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
  if (!cJSON_IsNumber(id) || fabs(id->valuedouble) < 9007199254740992.0) return;
  char tok[48];
  if (!raw_integer_id(body, len, tok, sizeof tok)) return;
  cJSON *raw = cJSON_CreateRaw(tok);
  if (raw) cJSON_ReplaceItemInObjectCaseSensitive(msg, "id", raw);
}

static bool valid_id(const cJSON *id) {
  if (cJSON_IsString(id) || cJSON_IsRaw(id)) return true;
  /* Integers only: a fractional id cannot be echoed back faithfully. */
  return cJSON_IsNumber(id) && mk_num_is_integer(id->valuedouble);
}

void mk_lsp_rpc_receive(mk_lsp_rpc *rpc, const char *body, size_t len) {
  if (rpc->state == MK_LSP_EXITED) return;
  if (mk_lsp_json_depth(body, len, MK_LSP_MAX_DEPTH) > MK_LSP_MAX_DEPTH) {
    logf_(rpc, "message nested deeper than %d levels refused", MK_LSP_MAX_DEPTH);
    send_error(rpc, NULL, MK_RPC_PARSE_ERROR, "JSON nested too deeply");
    return;
  }
  cJSON *msg = cJSON_ParseWithLengthOpts(body, len, NULL, 0);
  if (msg == NULL) {
    logf_(rpc, "unparseable JSON message refused");
    send_error(rpc, NULL, MK_RPC_PARSE_ERROR, "invalid JSON");
    return;
  }
  if (!cJSON_IsObject(msg)) {
    send_error(rpc, NULL, MK_RPC_INVALID_REQUEST,
               cJSON_IsArray(msg) ? "batch messages are not supported" : "message is not an object");
    cJSON_Delete(msg);
    return;
  }
  keep_exact_id(msg, body, len);
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
  const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
  const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
  if (cJSON_IsString(method)) {
    if (id == NULL) handle_notification(rpc, method->valuestring, params);
    else if (!valid_id(id)) send_error(rpc, NULL, MK_RPC_INVALID_REQUEST, "invalid request id");
    else handle_request(rpc, id, method->valuestring, params);
  } else if (method == NULL && id &&
             (cJSON_GetObjectItemCaseSensitive(msg, "result") ||
              cJSON_GetObjectItemCaseSensitive(msg, "error"))) {
    handle_response(rpc, id, msg);
  } else {
    send_error(rpc, valid_id(id) ? id : NULL, MK_RPC_INVALID_REQUEST,
               "message has neither a method nor a result");
  }
  cJSON_Delete(msg);
}

void mk_lsp_rpc_frame_error(mk_lsp_rpc *rpc, mk_lsp_frame_error kind, const char *why) {
  logf_(rpc, "dropped a message: %s", why);
  if (kind == MK_LSP_FRAME_BAD_UTF8 && rpc->state != MK_LSP_EXITED)
    send_error(rpc, NULL, MK_RPC_PARSE_ERROR, "message is not valid UTF-8");
}

void mk_lsp_rpc_free(mk_lsp_rpc *rpc) {
  if (rpc == NULL) return;
  while (rpc->open) {
    mk_lsp_request *r = rpc->open;
    rpc->open = r->next;
    if (!r->answered && rpc->state != MK_LSP_EXITED)
      send_error(rpc, r->id, MK_RPC_REQUEST_CANCELLED, "server stopped");
    request_free(r);
  }
  rpc->state = MK_LSP_EXITED; /* callbacks below cannot send */
  while (rpc->calls) {
    outgoing *o = rpc->calls;
    rpc->calls = o->next;
    if (o->fn) o->fn(o->ctx, NULL, NULL); /* lets the owner release ctx */
    free(o);
  }
  free(rpc);
}
