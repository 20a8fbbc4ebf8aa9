/* lsp_server.c — lifecycle, document sync, debounced analysis, jobs
 * and the request handlers. Handlers answer from in-memory state; backend
 * work runs as jobs that report progress and finish through a sink. */
#include "mk_num.h"
#include "mk_lsp_server.h"

#include "mk_buf.h"
#include "mk_lsp_features.h"
#include "mk_lsp_progress.h"
#include "mk_json.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct job job;

/* Per open document: its debounce timer and latest analysis. */
typedef struct docstate {
  mk_lsp_server *s;
  char *uri;
  uv_timer_t timer;
  bool saved_pending;       /* the scheduled analysis follows a save */
  bool opened_pending;      /* the scheduled analysis follows didOpen */
  mk_lsp_analysis analysis; /* last analysis that matched the text */
  bool has_analysis;
  job *running;             /* analysis in flight, or NULL */
  struct docstate *next;
} docstate;

enum { JOB_ANALYZE, JOB_COMMAND };

struct job {
  mk_lsp_server *s;
  int kind;
  uint64_t backend_id;
  docstate *ds;             /* analysis target; NULL once the document closed */
  uint64_t generation;      /* document generation analysed */
  int progress;             /* progress id, 0 if none */
  char *title;
  mk_lsp_handle reply;      /* executeCommand awaiting this job */
  bool starting, finished, cancelled;
  job *next;
};

struct mk_lsp_server {
  uv_loop_t *loop;
  mk_lsp_backend backend;
  mk_lsp_server_options opt;
  mk_lsp_rpc *rpc;
  mk_lsp_docs docs;
  mk_lsp_settings settings;
  mk_lsp_progress_set progress;
  docstate *states;
  job *jobs;
  int njobs;
  int open_handles;
  bool closing, in_dispatch;
  /* client capabilities */
  bool cap_related, cap_literals, cap_lens_refresh, cap_config_pull, cap_apply_edit;
  bool cap_doc_changes, cap_create_files, cap_show_document;
  char *root_path;
};

static const char *const no_commands[] = {NULL};

static void slog(mk_lsp_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void slog(mk_lsp_server *s, const char *fmt, ...) {
  if (s->opt.log == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("mkevolve lsp: ", s->opt.log);
  vfprintf(s->opt.log, fmt, ap);
  fputc('\n', s->opt.log);
  va_end(ap);
  fflush(s->opt.log);
}

static void show_message(mk_lsp_server *s, int type, const char *text) {
  cJSON *p = cJSON_CreateObject();
  if (p == NULL) return;
  cJSON_AddNumberToObject(p, "type", type);
  cJSON_AddStringToObject(p, "message", text);
  mk_lsp_rpc_notify(s->rpc, "window/showMessage", p);
}

static void log_message(mk_lsp_server *s, int type, const char *text) {
  cJSON *p = cJSON_CreateObject();
  if (p == NULL) return;
  cJSON_AddNumberToObject(p, "type", type);
  cJSON_AddStringToObject(p, "message", text);
  mk_lsp_rpc_notify(s->rpc, "window/logMessage", p);
}

static const char *const *backend_commands(mk_lsp_server *s) {
  if (s->backend.ops == NULL || s->backend.ops->commands == NULL) return no_commands;
  const char *const *c = s->backend.ops->commands(s->backend.self);
  return c ? c : no_commands;
}

static bool json_bool_path(const cJSON *o, const char *const *path) {
  for (; *path && o; path++) o = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, *path) : NULL;
  return cJSON_IsTrue(o);
}

/* ---- document states ------------------------------------------------------ */

static docstate *state_get(mk_lsp_server *s, const char *uri) {
  for (docstate *d = s->states; d; d = d->next)
    if (strcmp(d->uri, uri) == 0) return d;
  return NULL;
}

static void maybe_free_server(mk_lsp_server *s);

static void on_state_closed(uv_handle_t *h) {
  docstate *d = h->data;
  mk_lsp_server *s = d->s;
  mk_lsp_analysis_free(&d->analysis);
  free(d->uri);
  free(d);
  s->open_handles--;
  maybe_free_server(s);
}

static docstate *state_new(mk_lsp_server *s, const char *uri) {
  docstate *d = calloc(1, sizeof *d);
  if (d == NULL) return NULL;
  d->uri = mk_strdup(uri);
  if (d->uri == NULL || uv_timer_init(s->loop, &d->timer) != 0) {
    free(d->uri);
    free(d);
    return NULL;
  }
  d->s = s;
  d->timer.data = d;
  s->open_handles++;
  d->next = s->states;
  s->states = d;
  return d;
}

static void cancel_job(job *j);

static void state_drop(mk_lsp_server *s, docstate *d) {
  for (docstate **p = &s->states; *p; p = &(*p)->next) {
    if (*p == d) {
      *p = d->next;
      break;
    }
  }
  if (d->running) {
    job *j = d->running;
    d->running = NULL;
    j->ds = NULL;
    cancel_job(j);
  }
  uv_timer_stop(&d->timer);
  uv_close((uv_handle_t *)&d->timer, on_state_closed);
}

/* ---- jobs ----------------------------------------------------------------- */

static void job_free(job *j) {
  mk_lsp_server *s = j->s;
  for (job **p = &s->jobs; *p; p = &(*p)->next) {
    if (*p == j) {
      *p = j->next;
      s->njobs--;
      break;
    }
  }
  free(j->title);
  free(j);
}

static job *job_new(mk_lsp_server *s, int kind, const char *title) {
  job *j = calloc(1, sizeof *j);
  if (j == NULL) return NULL;
  j->s = s;
  j->kind = kind;
  j->title = mk_strdup(title ? title : "mkevolve");
  j->next = s->jobs;
  s->jobs = j;
  s->njobs++;
  return j;
}

static void cancel_job(job *j) {
  if (j->cancelled || j->finished) return;
  j->cancelled = true;
  if (!j->starting && j->s->backend.ops && j->s->backend.ops->cancel)
    j->s->backend.ops->cancel(j->s->backend.self, j->backend_id);
}

static void on_progress_cancel(void *ctx, int progress_id) {
  mk_lsp_server *s = ctx;
  /* cancel_job may finish and free the job at once: stop iterating. */
  for (job *j = s->jobs; j; j = j->next) {
    if (j->progress == progress_id) {
      cancel_job(j);
      return;
    }
  }
}

static void on_request_cancel(void *ctx, mk_lsp_handle h) {
  mk_lsp_server *s = ctx;
  for (job *j = s->jobs; j; j = j->next) {
    if (j->reply == h) {
      j->reply = 0;
      cancel_job(j);
      return;
    }
  }
}

static void sink_progress(void *ctx, int percent, const char *message) {
  job *j = ctx;
  mk_lsp_server *s = j->s;
  if (j->finished || s->closing) return;
  if (j->progress == 0)
    j->progress = mk_lsp_progress_begin(&s->progress, NULL, j->title, message, true,
                                        on_progress_cancel, s);
  mk_lsp_progress_report(&s->progress, j->progress, percent, message);
}

static void publish(mk_lsp_server *s, mk_lsp_doc *doc, const mk_lsp_analysis *a) {
  cJSON *p = mk_lsp_diagnostics_json(doc, a, &s->docs, s->cap_related);
  if (p) mk_lsp_rpc_notify(s->rpc, "textDocument/publishDiagnostics", p);
}

static void schedule_all(mk_lsp_server *s);

static void finish_analysis(job *j, int rc, mk_lsp_analysis *a, const char *err) {
  mk_lsp_server *s = j->s;
  docstate *d = j->ds;
  if (d && d->running == j) d->running = NULL;
  mk_lsp_doc *doc = d ? mk_lsp_docs_get(&s->docs, d->uri) : NULL;
  if (doc == NULL || j->cancelled || doc->generation != j->generation) {
    mk_lsp_analysis_free(a); /* stale: a newer analysis is scheduled */
    return;
  }
  if (rc != 0) {
    /* The analysis itself failed (worker crashed, bad Python): that is a
     * diagnostic too, at the top of the file, never a dead server. */
    mk_lsp_analysis failed = {0};
    mk_lsp_range top = {0, 0, 0, 0};
    char msg[MK_ERRMSG_MAX + 64];
    snprintf(msg, sizeof msg, "mkevolve could not analyse this file: %s",
             err && *err ? err : mk_strerror(rc));
    mk_lsp_analysis_add_finding(&failed, top, MK_LSP_SEV_ERROR, "analysis-failed", msg);
    mk_lsp_analysis_free(&d->analysis);
    d->analysis = failed;
    d->has_analysis = true;
    mk_lsp_analysis_free(a);
  } else {
    mk_lsp_analysis_free(&d->analysis);
    d->analysis = a ? *a : (mk_lsp_analysis){0};
    if (a) memset(a, 0, sizeof *a);
    d->has_analysis = true;
  }
  publish(s, doc, &d->analysis);
  if (s->cap_lens_refresh && s->settings.code_lens)
    mk_lsp_rpc_call(s->rpc, "workspace/codeLens/refresh", NULL, NULL, NULL);
}

static void apply_edit_result(mk_lsp_server *s, const cJSON *edit, const char *label) {
  if (!cJSON_IsObject(edit)) return;
  if (!s->cap_apply_edit) {
    show_message(s, 2, "mkevolve: the editor cannot apply workspace edits; result not applied");
    return;
  }
  cJSON *p = cJSON_CreateObject();
  if (p == NULL) return;
  cJSON_AddStringToObject(p, "label", label);
  cJSON_AddItemToObject(p, "edit", cJSON_Duplicate(edit, 1));
  mk_lsp_rpc_call(s->rpc, "workspace/applyEdit", p, NULL, NULL);
}

/* window/showDocument for a command's "showDocument" URI, or the path in a
 * message for a client that cannot show documents. */
static void show_document(mk_lsp_server *s, const char *uri) {
  if (s->cap_show_document) {
    cJSON *p = cJSON_CreateObject();
    if (p == NULL) return;
    cJSON_AddStringToObject(p, "uri", uri);
    cJSON_AddBoolToObject(p, "takeFocus", true);
    mk_lsp_rpc_call(s->rpc, "window/showDocument", p, NULL, NULL);
    return;
  }
  char *path = mk_lsp_uri_to_path(uri);
  char msg[4200];
  snprintf(msg, sizeof msg, "mkevolve: open %.4096s", path ? path : uri);
  free(path);
  show_message(s, 3, msg);
}

static void finish_command(job *j, int rc, cJSON *result, const char *err) {
  mk_lsp_server *s = j->s;
  if (rc == 0) {
    const char *msg = mk_json_str(result, "message", NULL);
    if (msg) show_message(s, 3, msg);
    const char *doc = mk_json_str(result, "showDocument", NULL);
    if (doc) show_document(s, doc);
    apply_edit_result(s, cJSON_GetObjectItemCaseSensitive(result, "edit"), j->title);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(result, "refresh"))) schedule_all(s);
    mk_lsp_rpc_reply(s->rpc, j->reply, result);
    return;
  }
  cJSON_Delete(result);
  char msg[MK_ERRMSG_MAX + 128];
  if (rc == MK_ECANCELED || j->cancelled) {
    snprintf(msg, sizeof msg, "%s: cancelled", j->title);
    mk_lsp_rpc_reply_error(s->rpc, j->reply, MK_RPC_REQUEST_CANCELLED, msg);
    return;
  }
  snprintf(msg, sizeof msg, "%s failed: %s", j->title, err && *err ? err : mk_strerror(rc));
  show_message(s, 1, msg);
  mk_lsp_rpc_reply_error(s->rpc, j->reply, MK_RPC_REQUEST_FAILED, msg);
}

static void sink_done(void *ctx, int rc, mk_lsp_analysis *a, cJSON *result, const char *err) {
  job *j = ctx;
  mk_lsp_server *s = j->s;
  if (j->finished) { /* a backend bug: done twice. Refuse, keep running. */
    slog(s, "backend finished job %s twice", j->title);
    mk_lsp_analysis_free(a);
    cJSON_Delete(result);
    return;
  }
  j->finished = true;
  if (j->progress) {
    const char *end = rc == 0 ? "done" : rc == MK_ECANCELED ? "cancelled" : "failed";
    mk_lsp_progress_end(&s->progress, j->progress, end);
  }
  if (s->closing) {
    mk_lsp_analysis_free(a);
    cJSON_Delete(result);
  } else if (j->kind == JOB_ANALYZE) {
    finish_analysis(j, rc, a, err);
  } else {
    mk_lsp_analysis_free(a);
    finish_command(j, rc, result, err);
  }
  if (!j->starting) job_free(j);
}

/* ---- analysis scheduling -------------------------------------------------- */

static void start_analysis(docstate *d) {
  mk_lsp_server *s = d->s;
  mk_lsp_doc *doc = mk_lsp_docs_get(&s->docs, d->uri);
  if (doc == NULL || s->backend.ops == NULL || s->backend.ops->analyze == NULL) return;
  if (d->running) { /* stale: the text changed under it */
    job *old = d->running;
    d->running = NULL;
    cancel_job(old);
  }
  const char *base = doc->path ? strrchr(doc->path, '/') : NULL;
  char title[256];
  snprintf(title, sizeof title, "mkevolve: analysing %s", base ? base + 1 : doc->uri);
  job *j = job_new(s, JOB_ANALYZE, title);
  if (j == NULL) return;
  j->ds = d;
  j->generation = doc->generation;
  d->running = j;
  mk_lsp_doc_view view = {doc->uri, doc->path, mk_buf_cstr(&doc->text), doc->text.len,
                          doc->version, d->saved_pending, d->opened_pending};
  d->saved_pending = false;
  d->opened_pending = false;
  mk_lsp_sink sink = {sink_progress, sink_done, j};
  j->starting = true;
  int rc = s->backend.ops->analyze(s->backend.self, &view, &sink, &j->backend_id);
  if (rc != 0 && !j->finished) sink_done(j, rc, NULL, NULL, "the analysis could not start");
  j->starting = false;
  if (j->finished) {
    job_free(j);
    return;
  }
  if (j->cancelled) { /* cancelled while starting: tell the backend now */
    j->cancelled = false;
    cancel_job(j);
  }
}

static void on_debounce(uv_timer_t *t) { start_analysis(t->data); }

/* Analyses after `delay_ms` of quiet (0: on the next loop turn, so a burst
 * of messages read together still coalesces). */
static void schedule(mk_lsp_server *s, docstate *d, int delay_ms) {
  if (s->closing || mk_lsp_rpc_state(s->rpc) != MK_LSP_RUNNING) return;
  uv_timer_start(&d->timer, on_debounce, (uint64_t)(delay_ms < 0 ? 0 : delay_ms), 0);
}

static void schedule_all(mk_lsp_server *s) {
  for (docstate *d = s->states; d; d = d->next) schedule(s, d, 0);
}

static void host_show(void *ctx, int type, const char *text) { show_message(ctx, type, text); }
static void host_refresh(void *ctx) { schedule_all(ctx); }

static int host_progress_begin(void *ctx, const char *title, const char *message) {
  mk_lsp_server *s = ctx;
  if (s->closing || mk_lsp_rpc_state(s->rpc) != MK_LSP_RUNNING) return 0;
  return mk_lsp_progress_begin(&s->progress, NULL, title, message, false, NULL, NULL);
}

static void host_progress_report(void *ctx, int id, int percent, const char *message) {
  mk_lsp_server *s = ctx;
  if (!s->closing) mk_lsp_progress_report(&s->progress, id, percent, message);
}

static void host_progress_end(void *ctx, int id, const char *message) {
  mk_lsp_server *s = ctx;
  if (!s->closing) mk_lsp_progress_end(&s->progress, id, message);
}

static char *host_open_text(void *ctx, const char *path) {
  mk_lsp_server *s = ctx;
  for (int i = 0; path && i < s->docs.n; i++) {
    const mk_lsp_doc *d = s->docs.items[i];
    if (d->path && strcmp(d->path, path) == 0)
      return mk_strndup(d->text.data ? d->text.data : "", d->text.len);
  }
  return NULL;
}

static unsigned host_client_caps(void *ctx) {
  mk_lsp_server *s = ctx;
  return (s->cap_apply_edit ? MK_LSP_CLIENT_APPLY_EDIT : 0u) |
         (s->cap_doc_changes ? MK_LSP_CLIENT_DOC_CHANGES : 0u) |
         (s->cap_create_files ? MK_LSP_CLIENT_CREATE_FILES : 0u) |
         (s->cap_show_document ? MK_LSP_CLIENT_SHOW_DOCUMENT : 0u);
}

/* ---- lifecycle ------------------------------------------------------------ */

/* The core takes its own keys; the backend gets the whole object. Each
 * names the keys it refused. */
static void apply_settings(mk_lsp_server *s, const cJSON *settings) {
  mk_errmsg err = {{0}};
  if (mk_lsp_settings_apply(&s->settings, settings, &err) != 0) show_message(s, 2, err.text);
  if (s->backend.ops && s->backend.ops->configure) {
    mk_errmsg berr = {{0}};
    if (s->backend.ops->configure(s->backend.self, settings, &berr) != 0)
      show_message(s, 2, berr.text);
  }
}

static void on_initialize(void *ctx, mk_lsp_request *req, const cJSON *params) {
  mk_lsp_server *s = ctx;
  const cJSON *caps = cJSON_GetObjectItemCaseSensitive(params, "capabilities");
  static const char *const p_progress[] = {"window", "workDoneProgress", NULL};
  static const char *const p_related[] = {"textDocument", "publishDiagnostics",
                                          "relatedInformation", NULL};
  static const char *const p_refresh[] = {"workspace", "codeLens", "refreshSupport", NULL};
  static const char *const p_config[] = {"workspace", "configuration", NULL};
  static const char *const p_edit[] = {"workspace", "applyEdit", NULL};
  s->progress.supported = json_bool_path(caps, p_progress);
  s->cap_related = json_bool_path(caps, p_related);
  s->cap_lens_refresh = json_bool_path(caps, p_refresh);
  s->cap_config_pull = json_bool_path(caps, p_config);
  s->cap_apply_edit = json_bool_path(caps, p_edit);
  static const char *const p_doc_changes[] = {"workspace", "workspaceEdit", "documentChanges", NULL};
  static const char *const p_show_doc[] = {"window", "showDocument", "support", NULL};
  s->cap_doc_changes = json_bool_path(caps, p_doc_changes);
  s->cap_show_document = json_bool_path(caps, p_show_doc);
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive(caps, "workspace");
  const cJSON *ops = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(ws, "workspaceEdit"), "resourceOperations");
  s->cap_create_files = false;
  const cJSON *op, *op_list = cJSON_IsArray(ops) ? ops : NULL;
  cJSON_ArrayForEach(op, op_list) {
    if (cJSON_IsString(op) && strcmp(op->valuestring, "create") == 0) s->cap_create_files = true;
  }
  /* Resource operations only exist inside documentChanges: a client that
   * offers them handles documentChanges (Neovim 0.7 says only this). */
  if (s->cap_create_files) s->cap_doc_changes = true;
  const cJSON *td = cJSON_GetObjectItemCaseSensitive(caps, "textDocument");
  const cJSON *ca = cJSON_GetObjectItemCaseSensitive(td, "codeAction");
  s->cap_literals = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ca, "codeActionLiteralSupport"));
  const char *root = mk_json_str(params, "rootUri", NULL);
  free(s->root_path);
  s->root_path = root ? mk_lsp_uri_to_path(root) : NULL;
  apply_settings(s, cJSON_GetObjectItemCaseSensitive(params, "initializationOptions"));

  cJSON *res = cJSON_CreateObject();
  cJSON *c = cJSON_AddObjectToObject(res, "capabilities");
  cJSON *sync = cJSON_AddObjectToObject(c, "textDocumentSync");
  cJSON_AddBoolToObject(sync, "openClose", true);
  cJSON_AddNumberToObject(sync, "change", 2); /* incremental */
  cJSON *save = cJSON_AddObjectToObject(sync, "save");
  cJSON_AddBoolToObject(save, "includeText", false);
  cJSON_AddBoolToObject(c, "hoverProvider", true);
  cJSON *cap = cJSON_AddObjectToObject(c, "codeActionProvider");
  cJSON *kinds = cJSON_AddArrayToObject(cap, "codeActionKinds");
  cJSON_AddItemToArray(kinds, cJSON_CreateString("refactor.rewrite"));
  cJSON_AddItemToArray(kinds, cJSON_CreateString("source"));
  cJSON *lens = cJSON_AddObjectToObject(c, "codeLensProvider");
  cJSON_AddBoolToObject(lens, "resolveProvider", false);
  cJSON *exec = cJSON_AddObjectToObject(c, "executeCommandProvider");
  cJSON *cmds = cJSON_AddArrayToObject(exec, "commands");
  for (const char *const *k = backend_commands(s); *k; k++)
    cJSON_AddItemToArray(cmds, cJSON_CreateString(*k));
  cJSON_AddStringToObject(c, "positionEncoding", "utf-16");
  cJSON *info = cJSON_AddObjectToObject(res, "serverInfo");
  cJSON_AddStringToObject(info, "name", "mkevolve");
  cJSON_AddStringToObject(info, "version", MK_VERSION);
  mk_lsp_reply(req, res);
}

static void on_config_pulled(void *ctx, const cJSON *result, const cJSON *error) {
  mk_lsp_server *s = ctx;
  if (result == NULL || s->closing) return;
  const cJSON *first = cJSON_IsArray(result) ? cJSON_GetArrayItem(result, 0) : NULL;
  if (!cJSON_IsObject(first)) return;
  apply_settings(s, first);
  schedule_all(s);
}

static void pull_config(mk_lsp_server *s) {
  if (!s->cap_config_pull) return;
  cJSON *p = cJSON_CreateObject();
  cJSON *items = cJSON_AddArrayToObject(p, "items");
  cJSON *it = cJSON_CreateObject();
  cJSON_AddStringToObject(it, "section", "mkevolve");
  cJSON_AddItemToArray(items, it);
  mk_lsp_rpc_call(s->rpc, "workspace/configuration", p, on_config_pulled, s);
}

static void on_initialized(void *ctx, const cJSON *params) {
  (void)params;
  pull_config(ctx);
}

static void on_did_change_configuration(void *ctx, const cJSON *params) {
  mk_lsp_server *s = ctx;
  const cJSON *settings = cJSON_GetObjectItemCaseSensitive(params, "settings");
  if (cJSON_IsObject(settings) && cJSON_GetArraySize(settings) > 0) {
    apply_settings(s, settings);
      schedule_all(s);
  } else {
    pull_config(s); /* "settings": null means: ask (pull model) */
  }
}

/* ---- text synchronisation ------------------------------------------------- */

static const char *doc_uri(const cJSON *params) {
  return mk_json_str(cJSON_GetObjectItemCaseSensitive(params, "textDocument"), "uri", NULL);
}

static void on_did_open(void *ctx, const cJSON *params) {
  mk_lsp_server *s = ctx;
  const cJSON *td = cJSON_GetObjectItemCaseSensitive(params, "textDocument");
  const char *uri = mk_json_str(td, "uri", NULL), *text = mk_json_str(td, "text", NULL);
  const cJSON *ver = cJSON_GetObjectItemCaseSensitive(td, "version");
  if (uri == NULL || text == NULL) {
    slog(s, "didOpen without uri or text ignored");
    return;
  }
  mk_lsp_doc *doc;
  int rc = mk_lsp_docs_open(&s->docs, uri, mk_json_str(td, "languageId", NULL),
                            cJSON_IsNumber(ver) ? mk_num_int(ver->valuedouble, 0) : 0, text, strlen(text), &doc);
  if (rc != 0) {
    char msg[512];
    snprintf(msg, sizeof msg, "mkevolve: cannot open %.300s: %s", uri, mk_strerror(rc));
    show_message(s, 1, msg);
    return;
  }
  docstate *d = state_get(s, uri);
  if (d == NULL) d = state_new(s, uri);
  if (d) d->opened_pending = true;
  if (d) schedule(s, d, 0);
}

static void on_did_change(void *ctx, const cJSON *params) {
  mk_lsp_server *s = ctx;
  const char *uri = doc_uri(params);
  mk_lsp_doc *doc = uri ? mk_lsp_docs_get(&s->docs, uri) : NULL;
  if (doc == NULL) {
    slog(s, "didChange for a document that is not open: %s", uri ? uri : "(no uri)");
    return;
  }
  const cJSON *ver = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(params, "textDocument"), "version");
  mk_errmsg err = {{0}};
  int rc = mk_lsp_doc_apply_changes(doc, cJSON_GetObjectItemCaseSensitive(params, "contentChanges"),
                                    cJSON_IsNumber(ver) ? mk_num_int(ver->valuedouble, doc->version + 1) : doc->version + 1, &err);
  if (rc != 0) {
    /* The text is unchanged; saying so beats silently diverging. */
    char msg[MK_ERRMSG_MAX + 64];
    snprintf(msg, sizeof msg, "mkevolve: edit refused (%s); reopen the file to resync", err.text);
    show_message(s, 1, msg);
    return;
  }
  docstate *d = state_get(s, uri);
  if (d) schedule(s, d, s->settings.debounce_ms);
}

static void on_did_save(void *ctx, const cJSON *params) {
  mk_lsp_server *s = ctx;
  const char *uri = doc_uri(params);
  docstate *d = uri ? state_get(s, uri) : NULL;
  if (d == NULL) return;
  const char *text = mk_json_str(params, "text", NULL);
  mk_lsp_doc *doc = mk_lsp_docs_get(&s->docs, uri);
  if (text && doc && (strlen(text) != doc->text.len || strcmp(text, mk_buf_cstr(&doc->text)) != 0))
    mk_lsp_docs_open(&s->docs, uri, doc->language, doc->version, text, strlen(text), NULL);
  d->saved_pending = true;
  schedule(s, d, 0);
}

static void on_did_close(void *ctx, const cJSON *params) {
  mk_lsp_server *s = ctx;
  const char *uri = doc_uri(params);
  mk_lsp_doc *doc = uri ? mk_lsp_docs_get(&s->docs, uri) : NULL;
  if (doc == NULL) return;
  publish(s, doc, NULL); /* clear what we said about it */
  if (s->backend.ops && s->backend.ops->closed) s->backend.ops->closed(s->backend.self, uri);
  docstate *d = state_get(s, uri);
  if (d) state_drop(s, d);
  mk_lsp_docs_close(&s->docs, uri);
}

/* ---- feature requests ----------------------------------------------------- */

/* Looks up the document and its analysis for a request; replies with an
 * error and returns NULL when the document is not open. */
static mk_lsp_doc *request_doc(mk_lsp_server *s, mk_lsp_request *req, const cJSON *params,
                               const mk_lsp_analysis **a) {
  const char *uri = doc_uri(params);
  mk_lsp_doc *doc = uri ? mk_lsp_docs_get(&s->docs, uri) : NULL;
  if (doc == NULL) {
    mk_lsp_reply_error(req, MK_RPC_INVALID_PARAMS, "document is not open");
    return NULL;
  }
  docstate *d = state_get(s, uri);
  *a = d && d->has_analysis ? &d->analysis : NULL;
  return doc;
}

static bool get_position(const cJSON *pos, int *line, int *col) {
  const cJSON *l = cJSON_GetObjectItemCaseSensitive(pos, "line");
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(pos, "character");
  if (!cJSON_IsNumber(l) || !cJSON_IsNumber(c) || l->valuedouble < 0 || c->valuedouble < 0)
    return false;
  *line = mk_num_clamp(l->valuedouble, 0, 1000000000);
  *col = mk_num_clamp(c->valuedouble, 0, 1000000000);
  return true;
}

static void on_hover(void *ctx, mk_lsp_request *req, const cJSON *params) {
  mk_lsp_server *s = ctx;
  const mk_lsp_analysis *a;
  mk_lsp_doc *doc = request_doc(s, req, params, &a);
  if (doc == NULL) return;
  int line, col;
  if (!get_position(cJSON_GetObjectItemCaseSensitive(params, "position"), &line, &col)) {
    mk_lsp_reply_error(req, MK_RPC_INVALID_PARAMS, "hover needs a position");
    return;
  }
  mk_lsp_reply(req, mk_lsp_hover_json(doc, a, line, col));
}

static void on_code_action(void *ctx, mk_lsp_request *req, const cJSON *params) {
  mk_lsp_server *s = ctx;
  const mk_lsp_analysis *a;
  mk_lsp_doc *doc = request_doc(s, req, params, &a);
  if (doc == NULL) return;
  const cJSON *range = cJSON_GetObjectItemCaseSensitive(params, "range");
  int l0, c0, l1, c1;
  if (!get_position(cJSON_GetObjectItemCaseSensitive(range, "start"), &l0, &c0) ||
      !get_position(cJSON_GetObjectItemCaseSensitive(range, "end"), &l1, &c1)) {
    mk_lsp_reply_error(req, MK_RPC_INVALID_PARAMS, "codeAction needs a range");
    return;
  }
  const cJSON *only = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(params, "context"), "only");
  mk_lsp_reply(req, mk_lsp_code_actions_json(a, l0, l1 < l0 ? l0 : l1, s->cap_literals, only));
}

static void on_code_lens(void *ctx, mk_lsp_request *req, const cJSON *params) {
  mk_lsp_server *s = ctx;
  const mk_lsp_analysis *a;
  mk_lsp_doc *doc = request_doc(s, req, params, &a);
  if (doc == NULL) return;
  mk_lsp_reply(req, s->settings.code_lens ? mk_lsp_code_lenses_json(doc, a) : cJSON_CreateArray());
}

static const char *title_for(mk_lsp_server *s, const char *command, const cJSON *args) {
  for (docstate *d = s->states; d; d = d->next) {
    const char *t = d->has_analysis ? mk_lsp_action_title(&d->analysis, command, args) : NULL;
    if (t) return t;
  }
  return command;
}

static void on_execute_command(void *ctx, mk_lsp_request *req, const cJSON *params) {
  mk_lsp_server *s = ctx;
  const char *command = mk_json_str(params, "command", NULL);
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
  if (command == NULL || (args && !cJSON_IsArray(args))) {
    mk_lsp_reply_error(req, MK_RPC_INVALID_PARAMS, "executeCommand needs a command and an argument array");
    return;
  }
  bool known = false;
  for (const char *const *k = backend_commands(s); *k && !known; k++) known = strcmp(*k, command) == 0;
  if (!known || s->backend.ops->execute == NULL) {
    char msg[300];
    snprintf(msg, sizeof msg, "unknown command: %.200s", command);
    mk_lsp_reply_error(req, MK_RPC_INVALID_PARAMS, msg);
    return;
  }
  job *j = job_new(s, JOB_COMMAND, title_for(s, command, args));
  if (j == NULL) {
    mk_lsp_reply_error(req, MK_RPC_INTERNAL_ERROR, "out of memory");
    return;
  }
  /* Long commands (evolve) answer when they end; the client sees progress
   * meanwhile and may cancel through the request or the progress. */
  j->reply = mk_lsp_request_defer(req, on_request_cancel, s);
  j->progress = mk_lsp_progress_begin(&s->progress,
                                      cJSON_GetObjectItemCaseSensitive(params, "workDoneToken"),
                                      j->title, NULL, true, on_progress_cancel, s);
  mk_lsp_sink sink = {sink_progress, sink_done, j};
  mk_errmsg err = {{0}};
  j->starting = true;
  int rc = s->backend.ops->execute(s->backend.self, command, args, &sink, &j->backend_id, &err);
  if (rc != 0 && !j->finished) sink_done(j, rc, NULL, NULL, err.text);
  j->starting = false;
  if (j->finished) {
    job_free(j);
    return;
  }
  if (j->cancelled) {
    j->cancelled = false;
    cancel_job(j);
  }
}

static void on_progress_cancel_note(void *ctx, const cJSON *params) {
  mk_lsp_server *s = ctx;
  mk_lsp_progress_cancel(&s->progress, params);
}

static void on_set_trace(void *ctx, const cJSON *params) { (void)ctx, (void)params; }

static const mk_lsp_method methods[] = {
    {"initialize", on_initialize, NULL},
    {"initialized", NULL, on_initialized},
    {"workspace/didChangeConfiguration", NULL, on_did_change_configuration},
    {"textDocument/didOpen", NULL, on_did_open},
    {"textDocument/didChange", NULL, on_did_change},
    {"textDocument/didSave", NULL, on_did_save},
    {"textDocument/didClose", NULL, on_did_close},
    {"textDocument/hover", on_hover, NULL},
    {"textDocument/codeAction", on_code_action, NULL},
    {"textDocument/codeLens", on_code_lens, NULL},
    {"workspace/executeCommand", on_execute_command, NULL},
    {"window/workDoneProgress/cancel", NULL, on_progress_cancel_note},
    {"$/setTrace", NULL, on_set_trace},
};

/* ---- rpc hooks and framing ------------------------------------------------ */

static int hook_send(void *ctx, const char *body, size_t len) {
  mk_lsp_server *s = ctx;
  return s->opt.send ? s->opt.send(s->opt.send_ctx, body, len) : 0;
}

static void stop_all_jobs(mk_lsp_server *s) {
  for (docstate *d = s->states; d; d = d->next) uv_timer_stop(&d->timer);
  /* Restart the scan after each cancel: a backend may finish (and the
   * server free) the job inside cancel. */
  for (;;) {
    job *j = s->jobs;
    while (j && (j->cancelled || j->finished)) j = j->next;
    if (j == NULL) break;
    cancel_job(j);
  }
}

static void hook_shutdown(void *ctx) { stop_all_jobs(ctx); }

static void hook_exit(void *ctx, int code) {
  mk_lsp_server *s = ctx;
  stop_all_jobs(s);
  if (s->opt.on_exit) s->opt.on_exit(s->opt.exit_ctx, code);
}

static void hook_log(void *ctx, const char *msg) {
  mk_lsp_server *s = ctx;
  slog(s, "%s", msg);
  if (mk_lsp_rpc_state(s->rpc) == MK_LSP_RUNNING) log_message(s, 4, msg);
}

static void frame_message(void *ctx, const char *body, size_t len) {
  mk_lsp_server *s = ctx;
  if (s->closing) return;
  s->in_dispatch = true;
  mk_lsp_rpc_receive(s->rpc, body, len);
  s->in_dispatch = false;
  maybe_free_server(s);
}

static void frame_error(void *ctx, mk_lsp_frame_error kind, const char *why) {
  mk_lsp_server *s = ctx;
  if (!s->closing) mk_lsp_rpc_frame_error(s->rpc, kind, why);
}

mk_lsp_frame_handler mk_lsp_server_frames(mk_lsp_server *s) {
  return (mk_lsp_frame_handler){frame_message, frame_error, s};
}

int mk_lsp_server_new(const mk_lsp_server_options *o, mk_lsp_server **out) {
  mk_lsp_server *s = calloc(1, sizeof *s);
  if (s == NULL) return MK_ENOMEM;
  s->loop = o->loop;
  s->opt = *o;
  s->backend = o->backend;
  mk_lsp_docs_init(&s->docs);
  mk_lsp_settings_defaults(&s->settings);
  mk_lsp_rpc_hooks hooks = {hook_send, hook_shutdown, hook_exit, hook_log, s};
  int rc = mk_lsp_rpc_new(&hooks, methods, (int)(sizeof methods / sizeof methods[0]), s, &s->rpc);
  if (rc != 0) {
    free(s);
    return rc;
  }
  mk_lsp_progress_init(&s->progress, s->rpc);
  if (s->backend.ops && s->backend.ops->attach) {
    mk_lsp_backend_host host = {host_show,           host_refresh,     host_progress_begin,
                                host_progress_report, host_progress_end, host_open_text,
                                host_client_caps,     s};
    s->backend.ops->attach(s->backend.self, &host);
  }
  *out = s;
  return 0;
}

static void maybe_free_server(mk_lsp_server *s) {
  if (!s->closing || s->in_dispatch || s->open_handles > 0) return;
  mk_lsp_rpc_free(s->rpc); /* answers open requests, releases progress creates */
  mk_lsp_progress_free(&s->progress);
  mk_lsp_docs_free(&s->docs);
  free(s->root_path);
  free(s);
}

void mk_lsp_server_close(mk_lsp_server *s) {
  if (s == NULL || s->closing) return;
  stop_all_jobs(s);
  s->closing = true;
  /* The backend promises no callbacks after destroy; jobs it never
   * finished are released here. */
  if (s->backend.ops && s->backend.ops->destroy) s->backend.ops->destroy(s->backend.self);
  s->backend.ops = NULL;
  for (docstate *d = s->states; d; d = d->next) d->running = NULL;
  while (s->jobs) job_free(s->jobs);
  while (s->states) state_drop(s, s->states);
  maybe_free_server(s);
}

mk_lsp_rpc *mk_lsp_server_rpc(mk_lsp_server *s) { return s->rpc; }
mk_lsp_docs *mk_lsp_server_docs(mk_lsp_server *s) { return &s->docs; }
const mk_lsp_settings *mk_lsp_server_settings(const mk_lsp_server *s) { return &s->settings; }
int mk_lsp_server_jobs(const mk_lsp_server *s) { return s->njobs; }
