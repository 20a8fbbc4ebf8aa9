/* lsp_progress.c — work-done progress tokens and their lifecycle. */
#include "mk_lsp_progress.h"

#include "mk_buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mk_lsp_progress {
  mk_lsp_progress_set *set;
  int id;
  cJSON *token;
  char *title, *begin_message;
  bool cancellable;
  bool create_pending;  /* waiting for the client's answer to create */
  bool usable;          /* token acknowledged (or given by the client) */
  bool began, ended;    /* begin sent / end requested */
  int percent;          /* latest report held back while create is pending */
  char *held_message;
  bool held;
  char *end_message;
  mk_lsp_progress_cancel_fn on_cancel;
  void *ctx;
  mk_lsp_progress *next;
};

void mk_lsp_progress_init(mk_lsp_progress_set *s, mk_lsp_rpc *rpc) {
  memset(s, 0, sizeof *s);
  s->rpc = rpc;
  s->next_id = 1;
}

static void progress_free(mk_lsp_progress *p) {
  cJSON_Delete(p->token);
  free(p->title);
  free(p->begin_message);
  free(p->held_message);
  free(p->end_message);
  free(p);
}

static void unlink_free(mk_lsp_progress *p) {
  for (mk_lsp_progress **q = &p->set->list; *q; q = &(*q)->next) {
    if (*q == p) {
      *q = p->next;
      break;
    }
  }
  progress_free(p);
}

void mk_lsp_progress_free(mk_lsp_progress_set *s) {
  while (s->list) {
    mk_lsp_progress *p = s->list;
    s->list = p->next;
    progress_free(p);
  }
}

static mk_lsp_progress *find(mk_lsp_progress_set *s, int id) {
  for (mk_lsp_progress *p = s->list; p; p = p->next)
    if (p->id == id) return p;
  return NULL;
}

static void send_value(mk_lsp_progress *p, cJSON *value) {
  cJSON *params = cJSON_CreateObject();
  if (params == NULL || value == NULL) {
    cJSON_Delete(params);
    cJSON_Delete(value);
    return;
  }
  cJSON_AddItemToObject(params, "token", cJSON_Duplicate(p->token, 1));
  cJSON_AddItemToObject(params, "value", value);
  mk_lsp_rpc_notify(p->set->rpc, "$/progress", params);
}

static void send_begin(mk_lsp_progress *p) {
  cJSON *v = cJSON_CreateObject();
  if (v == NULL) return;
  cJSON_AddStringToObject(v, "kind", "begin");
  cJSON_AddStringToObject(v, "title", p->title);
  cJSON_AddBoolToObject(v, "cancellable", p->cancellable);
  if (p->begin_message) cJSON_AddStringToObject(v, "message", p->begin_message);
  cJSON_AddNumberToObject(v, "percentage", 0);
  p->began = true;
  send_value(p, v);
}

static void send_report(mk_lsp_progress *p, int percent, const char *message) {
  cJSON *v = cJSON_CreateObject();
  if (v == NULL) return;
  cJSON_AddStringToObject(v, "kind", "report");
  if (percent >= 0) cJSON_AddNumberToObject(v, "percentage", percent > 100 ? 100 : percent);
  if (message) cJSON_AddStringToObject(v, "message", message);
  send_value(p, v);
}

static void send_end(mk_lsp_progress *p) {
  cJSON *v = cJSON_CreateObject();
  if (v == NULL) return;
  cJSON_AddStringToObject(v, "kind", "end");
  if (p->end_message) cJSON_AddStringToObject(v, "message", p->end_message);
  send_value(p, v);
}

/* Sends whatever was held back while `create` was pending. */
static void flush(mk_lsp_progress *p) {
  if (!p->usable) return;
  if (!p->began) send_begin(p);
  if (p->held) {
    send_report(p, p->percent, p->held_message);
    p->held = false;
  }
  if (p->ended) send_end(p);
}

static void on_created(void *ctx, const cJSON *result, const cJSON *error) {
  mk_lsp_progress *p = ctx;
  p->create_pending = false;
  /* Both NULL: the rpc is going away; never touch it again. */
  p->usable = error == NULL && !(result == NULL && error == NULL);
  if (p->usable) flush(p);
  if (p->ended) unlink_free(p);
}

int mk_lsp_progress_begin(mk_lsp_progress_set *s, const cJSON *client_token, const char *title,
                          const char *message, bool cancellable,
                          mk_lsp_progress_cancel_fn on_cancel, void *ctx) {
  bool have_client_token = cJSON_IsString(client_token) || cJSON_IsNumber(client_token);
  if (!s->supported && !have_client_token) return 0;
  mk_lsp_progress *p = calloc(1, sizeof *p);
  if (p == NULL) return 0;
  p->set = s;
  p->id = s->next_id++;
  p->title = mk_strdup(title ? title : "mkevolve");
  p->begin_message = message ? mk_strdup(message) : NULL;
  p->cancellable = cancellable;
  p->on_cancel = on_cancel;
  p->ctx = ctx;
  p->percent = -1;
  if (have_client_token) {
    p->token = cJSON_Duplicate(client_token, 1);
  } else {
    char tok[64];
    snprintf(tok, sizeof tok, "mkevolve/%d", p->id);
    p->token = cJSON_CreateString(tok);
  }
  if (p->title == NULL || p->token == NULL) {
    progress_free(p);
    return 0;
  }
  p->next = s->list;
  s->list = p;
  if (have_client_token) {
    p->usable = true;
    send_begin(p);
    return p->id;
  }
  cJSON *params = cJSON_CreateObject();
  if (params) cJSON_AddItemToObject(params, "token", cJSON_Duplicate(p->token, 1));
  p->create_pending = true;
  if (mk_lsp_rpc_call(s->rpc, "window/workDoneProgress/create", params, on_created, p) != 0)
    p->create_pending = false; /* never usable; freed at end */
  return p->id;
}

void mk_lsp_progress_report(mk_lsp_progress_set *s, int id, int percent, const char *message) {
  mk_lsp_progress *p = id ? find(s, id) : NULL;
  if (p == NULL || p->ended) return;
  if (p->usable) {
    send_report(p, percent, message);
    return;
  }
  if (!p->create_pending) return;
  free(p->held_message);
  p->held_message = message ? mk_strdup(message) : NULL;
  p->percent = percent;
  p->held = true;
}

void mk_lsp_progress_end(mk_lsp_progress_set *s, int id, const char *message) {
  mk_lsp_progress *p = id ? find(s, id) : NULL;
  if (p == NULL || p->ended) return;
  p->ended = true;
  p->end_message = message ? mk_strdup(message) : NULL;
  if (p->create_pending) return; /* on_created sends end and frees */
  if (p->usable) send_end(p);
  unlink_free(p);
}

void mk_lsp_progress_cancel(mk_lsp_progress_set *s, const cJSON *params) {
  const cJSON *tok = cJSON_IsObject(params) ? cJSON_GetObjectItemCaseSensitive(params, "token") : NULL;
  if (tok == NULL) return;
  for (mk_lsp_progress *p = s->list; p; p = p->next) {
    if (p->ended || !cJSON_Compare(p->token, tok, 1)) continue;
    if (p->cancellable && p->on_cancel) p->on_cancel(p->ctx, p->id);
    return;
  }
}

int mk_lsp_progress_active(const mk_lsp_progress_set *s) {
  int n = 0;
  for (const mk_lsp_progress *p = s->list; p; p = p->next) n += !p->ended;
  return n;
}
