/* lsp_engine.c — the backend that connects the language server to the
 * engine's session facade (engine/session/mk_session.h).
 *
 * Analyses answer at once: static checks (lsp_engine_static.c) plus
 * whatever the session knows about the module, moved through a line map
 * onto the editor's text (lsp_engine_render.c). When the editor's text
 * differs from what the session captured, a capture starts in the
 * background (with its own progress); when it lands the server is asked
 * to re-analyse, which then renders the new view. So hover, code actions
 * and lenses never wait for a worker. Unsaved text is captured too (the
 * analysis runs after the debounce; the session captures a private copy).
 *
 * Commands (workspace/executeCommand) are jobs: decompose, evolve, evolve
 * all, swap, restore, open report. One that needs a fresh capture waits
 * for it; evolve runs on the session with progress and is cancelled
 * through mk_session_cancel. The composed ModelNew reaches the editor as
 * a WorkspaceEdit (an open buffer is replaced, a closed file is written
 * and then touched so the editor loads it) or, in "inplace" mode, as a
 * generated section at the end of the module itself.
 *
 * Every engine failure (no Python, a capture error, a crashed worker) is
 * a diagnostic or an error reply; nothing here ends the process. */
#include "mk_lsp_engine.h"

#include "mk_buf.h"
#include "mk_lsp_docs.h"
#include "lsp_engine_internal.h"
#include "mk_session.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_MODULE_BYTES ((size_t)32 << 20)
#define INPLACE_MARKER "# ==== mkevolve: composed ModelNew (generated; edits below are overwritten) ===="

typedef struct engine engine;
typedef struct modstate modstate;
typedef struct ejob ejob;

/* CMD_VERIFY_EDIT is no command: it is the analysis of an edit file
 * (saved or opened), a job like the commands so it can wait for a capture
 * of its module. */
enum { CMD_DECOMPOSE, CMD_EVOLVE, CMD_EVOLVE_ALL, CMD_SWAP, CMD_RESTORE, CMD_REPORT, CMD_EDIT,
       CMD_VERIFY_EDIT };

static const char *const lsp_engine_commands[] = {
    ENGINE_CMD_DECOMPOSE, ENGINE_CMD_EVOLVE, ENGINE_CMD_EVOLVE_ALL, ENGINE_CMD_SWAP,
    ENGINE_CMD_RESTORE,   ENGINE_CMD_REPORT, ENGINE_CMD_EDIT,       NULL};

struct ejob {
  engine *e;
  uint64_t id;
  int cmd;
  mk_lsp_sink sink;
  char *path;
  char *uri;
  int subkernel;         /* -1: all, or resolve from position_line */
  int variant;
  int position_line;     /* 0-based line in the editor's text, -1 none */
  mk_session *session;   /* the session an evolve runs on */
  int session_job;
  int last_percent;
  bool waiting;          /* for a capture of its module */
  bool running;          /* evolve submitted to the session */
  bool cancelled;
  bool detached;         /* already answered (cancelled); the session still winds down */
  char *edit_path;       /* CMD_VERIFY_EDIT: the edit file (path is its module) */
  char *text;            /* CMD_VERIFY_EDIT: the text verified */
  ejob *next;
};

/* What the last verification of an edit file said, and about which text:
 * analyses between saves show it moved through a line map. */
typedef struct editstate {
  char *path;
  char *text;
  mk_lsp_analysis a;
  struct editstate *next;
} editstate;

struct modstate {
  char *path;
  char *captured;        /* text the session's view was captured from */
  char *capturing_text;  /* text of the capture in flight, NULL when none */
  char *error;           /* last capture error, NULL when none */
  char *error_text;      /* the text it belongs to */
  int error_line;        /* 1-based line in error_text, 0 unknown */
  bool recapture;        /* the file changed during a capture or an evolve */
  bool engaged;          /* decomposed or evolved: unverified is then a warning */
  char *target;          /* composed file the user asked for (file mode) */
  ejob *evolve;          /* evolve running on it */
  int progress;          /* host progress of the capture */
  modstate *next;
};

typedef struct capreq {
  engine *e;
  mk_session *session;
  char *path;
} capreq;

struct engine {
  uv_loop_t *loop;
  mk_lsp_backend_host host;
  bool has_host;
  mk_lsp_engine_config config;
  mk_session *session;
  char *session_error;   /* why the session could not start */
  bool told_cpu, told_session_error;
  bool destroyed;
  int closing_sessions;
  int pending_captures;
  uint64_t next_job;
  modstate *mods;
  ejob *jobs;
  editstate *edits;
};

/* ---- small helpers ------------------------------------------------------------------ */

static void show(engine *e, int type, const char *text) {
  if (e->has_host && !e->destroyed && e->host.show_message) e->host.show_message(e->host.ctx, type, text);
}

static void refresh(engine *e) {
  if (e->has_host && !e->destroyed && e->host.refresh) e->host.refresh(e->host.ctx);
}

static unsigned client_caps(engine *e) {
  return e->has_host && e->host.client_caps ? e->host.client_caps(e->host.ctx) : 0;
}

static char *open_text(engine *e, const char *path) {
  return e->has_host && e->host.open_text ? e->host.open_text(e->host.ctx, path) : NULL;
}

static char *read_disk(const char *path) {
  char *text = NULL;
  size_t len = 0;
  if (mk_read_file(path, MAX_MODULE_BYTES, &text, &len) != 0) return NULL;
  if (strlen(text) != len) { /* a NUL inside: not a module we can compare */
    free(text);
    return NULL;
  }
  return text;
}

/* What the user sees of `path`: the editor's text when it is open (saved
 * or not), else the file. */
static char *current_text(engine *e, const char *path) {
  char *text = open_text(e, path);
  return text ? text : read_disk(path);
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static void set_str(char **dst, const char *src) {
  free(*dst);
  *dst = src ? mk_strdup(src) : NULL;
}

/* ---- module state ------------------------------------------------------------------- */

static modstate *mod_get(engine *e, const char *path, bool create) {
  for (modstate *m = e->mods; m; m = m->next)
    if (strcmp(m->path, path) == 0) return m;
  if (!create) return NULL;
  modstate *m = calloc(1, sizeof *m);
  if (m == NULL || (m->path = mk_strdup(path)) == NULL) {
    free(m);
    return NULL;
  }
  m->next = e->mods;
  e->mods = m;
  return m;
}

static void mod_free(modstate *m) {
  free(m->path);
  free(m->captured);
  free(m->capturing_text);
  free(m->error);
  free(m->error_text);
  free(m->target);
  free(m);
}

static const mk_session_module *view_of(engine *e, const char *path) {
  return e->session ? mk_session_get(e->session, path) : NULL;
}

/* ---- jobs ----------------------------------------------------------------------------- */

static void job_unlink_free(ejob *j) {
  engine *e = j->e;
  for (ejob **p = &e->jobs; *p; p = &(*p)->next)
    if (*p == j) {
      *p = j->next;
      break;
    }
  free(j->path);
  free(j->uri);
  free(j->edit_path);
  free(j->text);
  free(j);
}

/* Ends a job towards the server (unless the server is gone) and frees it. */
static void job_finish(ejob *j, int rc, cJSON *result, const char *err) {
  engine *e = j->e;
  if (!e->destroyed && !j->detached) j->sink.done(j->sink.ctx, rc, NULL, result, err);
  else cJSON_Delete(result);
  job_unlink_free(j);
}

static void job_fail(ejob *j, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void job_fail(ejob *j, int rc, const char *fmt, ...) {
  char msg[MK_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  job_finish(j, rc, NULL, msg);
}

static void maybe_free_engine(engine *e) {
  if (!e->destroyed || e->closing_sessions > 0 || e->jobs || e->pending_captures > 0) return;
  while (e->mods) {
    modstate *m = e->mods;
    e->mods = m->next;
    mod_free(m);
  }
  while (e->edits) {
    editstate *es = e->edits;
    e->edits = es->next;
    free(es->path);
    free(es->text);
    mk_lsp_analysis_free(&es->a);
    free(es);
  }
  free(e->session_error);
  free(e);
}

/* ---- the session ---------------------------------------------------------------------- */

static bool ensure_session(engine *e) {
  if (e->session) return true;
  if (e->session_error) return false;
  mk_session_config sc;
  char *json = NULL;
  mk_lsp_engine_config_session(&e->config, &sc, &json);
  mk_errmsg err = {{0}};
  int rc = mk_session_new(e->loop, &sc, &e->session, &err);
  free(json);
  if (rc == 0) return true;
  e->session = NULL;
  char msg[MK_ERRMSG_MAX + 128];
  snprintf(msg, sizeof msg, "mkevolve: the engine could not start (%s); check mkevolve.pythonPath and mkevolve.backend",
           err.text[0] ? err.text : mk_strerror(rc));
  e->session_error = mk_strdup(msg);
  if (!e->told_session_error) show(e, 1, msg);
  e->told_session_error = true;
  return false;
}

static void fail_waiting(engine *e, const char *path, int rc, const char *why);
static void resume_waiting(engine *e, modstate *m, int status, const char *error);

static void on_session_closed(void *data) {
  engine *e = data;
  e->closing_sessions--;
  maybe_free_engine(e);
}

/* Closes the session (jobs on it end as cancelled) and forgets what it
 * knew: the next analysis captures again on a fresh one. */
static void drop_session(engine *e) {
  if (e->session == NULL) return;
  mk_session *s = e->session;
  e->session = NULL;
  for (modstate *m = e->mods; m; m = m->next) {
    free(m->captured);
    m->captured = NULL;
    if (m->capturing_text) { /* its callback comes from the old session and is ignored */
      free(m->capturing_text);
      m->capturing_text = NULL;
      if (e->has_host && !e->destroyed && e->host.progress_end)
        e->host.progress_end(e->host.ctx, m->progress, "restarted");
      m->progress = 0;
      if (!e->destroyed) resume_waiting(e, m, MK_ECANCELED, "the engine restarted (settings changed)");
    }
  }
  e->closing_sessions++;
  mk_session_close(s, on_session_closed, e);
}

/* ---- capture ---------------------------------------------------------------------------- */

static void run_command(ejob *j);
static void capture(engine *e, modstate *m, const char *text);

/* "line 12: message" (what the session reports) -> 12 and "message". */
static const char *split_line(const char *error, int *line) {
  *line = 0;
  int n = 0, used = 0;
  if (error && sscanf(error, "line %d: %n", &n, &used) == 1 && used > 0) {
    *line = n;
    return error + used;
  }
  return error ? error : "capture failed";
}

static void resume_waiting(engine *e, modstate *m, int status, const char *error) {
  /* Restart the scan after each job: running one may finish (free) it. */
  for (;;) {
    ejob *j = e->jobs;
    while (j && !(j->waiting && strcmp(j->path, m->path) == 0)) j = j->next;
    if (j == NULL) return;
    j->waiting = false;
    if (status) job_fail(j, status, "the analysis of %s failed: %s", base_name(m->path), error);
    else run_command(j);
  }
}

static void fail_waiting(engine *e, const char *path, int rc, const char *why) {
  modstate *m = mod_get(e, path, false);
  if (m) resume_waiting(e, m, rc ? rc : MK_EINVAL, why);
}

static void on_captured(void *data, int status, const mk_session_module *view, const char *error) {
  capreq *req = data;
  engine *e = req->e;
  e->pending_captures--;
  modstate *m = e->destroyed ? NULL : mod_get(e, req->path, false);
  if (m == NULL || req->session != e->session) { /* the server or the session went away */
    free(req->path);
    free(req);
    maybe_free_engine(e);
    return;
  }
  if (e->has_host && e->host.progress_end)
    e->host.progress_end(e->host.ctx, m->progress, status ? "failed" : "done");
  m->progress = 0;
  char *text = m->capturing_text;
  m->capturing_text = NULL;
  if (status == 0 && view) {
    free(m->captured);
    m->captured = text;
    set_str(&m->error, NULL);
    set_str(&m->error_text, NULL);
    if (!view->timed && !e->told_cpu) {
      e->told_cpu = true;
      show(e, 3, "mkevolve: no GPU visible — correctness only, on CPU (kernels run under the Triton "
                 "interpreter; speedups are not measured)");
    }
  } else {
    int line;
    const char *msg = split_line(error, &line);
    set_str(&m->error, msg && *msg ? msg : mk_strerror(status ? status : MK_EINVAL));
    free(m->error_text);
    m->error_text = text;
    m->error_line = line;
  }
  resume_waiting(e, m, status ? status : (view ? 0 : MK_EINVAL), m->error);
  if (m->recapture && m->evolve == NULL) {
    m->recapture = false;
    char *now = current_text(e, m->path);
    if (now && (m->captured == NULL || strcmp(now, m->captured) != 0)) capture(e, m, now);
    free(now);
  }
  free(req->path);
  free(req);
  refresh(e);
}

/* Starts (or schedules) a capture of `text`: the saved file's contents or
 * the editor's unsaved text. One per module at a time; an evolve on stale
 * text is cancelled first (its results would describe code that no longer
 * exists), so callers never pass unsaved text while an evolve runs. */
static void capture(engine *e, modstate *m, const char *text) {
  if (m->capturing_text) {
    if (strcmp(m->capturing_text, text) != 0) m->recapture = true;
    return;
  }
  if (m->evolve) {
    m->recapture = true;
    if (!m->evolve->cancelled && m->evolve->running) {
      m->evolve->cancelled = true;
      mk_session_cancel(m->evolve->session, m->evolve->session_job);
    }
    return;
  }
  if (!ensure_session(e)) {
    fail_waiting(e, m->path, MK_EINVAL, e->session_error);
    return;
  }
  capreq *req = calloc(1, sizeof *req);
  char *copy = mk_strdup(text);
  if (req == NULL || copy == NULL || (req->path = mk_strdup(m->path)) == NULL) {
    free(req);
    free(copy);
    fail_waiting(e, m->path, MK_ENOMEM, "out of memory");
    return;
  }
  req->e = e;
  req->session = e->session;
  mk_errmsg err = {{0}};
  /* The session captures the saved file when `text` equals it, else a
   * private copy of the editor's text (same name, same line numbers). */
  int rc = mk_session_analyze(e->session, m->path, copy, on_captured, req, &err);
  if (rc) {
    free(req->path);
    free(req);
    set_str(&m->error, err.text[0] ? err.text : mk_strerror(rc));
    free(m->error_text);
    m->error_text = copy;
    m->error_line = 0;
    fail_waiting(e, m->path, rc, m->error);
    return;
  }
  e->pending_captures++;
  m->capturing_text = copy;
  if (e->has_host && e->host.progress_begin) {
    char title[300];
    snprintf(title, sizeof title, "mkevolve: analysing %.200s", base_name(m->path));
    m->progress = e->host.progress_begin(e->host.ctx, title, "capturing the operator graph");
  }
}

/* ---- analysis -------------------------------------------------------------------------- */

static void analyze_module(engine *e, const mk_lsp_doc_view *doc, const lsp_engine_static_info *info,
                           mk_lsp_analysis *a) {
  modstate *m = mod_get(e, doc->path, true);
  if (m == NULL) return;
  char *disk = read_disk(doc->path);
  bool dirty = disk == NULL || strlen(disk) != doc->len || memcmp(disk, doc->text, doc->len) != 0;
  const mk_session_module *view = view_of(e, m->path);
  if (view == NULL && m->captured) {
    free(m->captured);
    m->captured = NULL;
  }
  bool stale = m->captured == NULL || strcmp(m->captured, doc->text) != 0;
  bool failed_here = m->error_text && strcmp(m->error_text, doc->text) == 0;
  /* A failure on this very text is retried on save only (a flaky worker),
   * never on every keystroke-driven re-analysis. Unsaved text is captured
   * too (this runs after the debounce), except while an evolve runs on the
   * module: the edit would cancel it; results follow the edit through the
   * line map until the evolve ends and the text is captured then. */
  /* A backend made without a loop (static checks only) has no engine to capture with. */
  if (e->loop && stale && (!failed_here || (doc->saved && !dirty)) &&
      (!dirty || m->evolve == NULL)) {
    capture(e, m, doc->text);
    view = view_of(e, m->path);
  }
  free(disk);
  lsp_engine_line_map map, emap;
  lsp_engine_line_map_build(&map, m->captured, doc->text);
  lsp_engine_line_map_build(&emap, m->error_text, doc->text);
  int error_line = m->error_line > 0 ? lsp_engine_line_map_fwd(&emap, m->error_line - 1) + 1 : 0;
  const char *composed_path = m->target ? m->target : view ? view->modelnew_path : NULL;
  char *composed_text = composed_path ? open_text(e, composed_path) : NULL;
  if (composed_path && composed_text == NULL) composed_text = read_disk(composed_path);
  lsp_engine_render_in in = {
      .uri = doc->uri,
      .text = doc->text,
      .info = info,
      .view = m->captured ? view : NULL,
      .map = &map,
      .engaged = m->engaged,
      .capturing = m->capturing_text != NULL,
      .dirty = dirty,
      .evolving = m->evolve != NULL,
      .composed_path = composed_text ? composed_path : NULL,
      .composed_text = composed_text,
      .error = m->error && (emap.identical || error_line > 0) ? m->error : NULL,
      .error_line = error_line,
      .engine_error = e->session_error,
  };
  lsp_engine_render(&in, a);
  free(composed_text);
}

/* ---- edit files ------------------------------------------------------------------------ */

/* An edit file the session wrote, inside a .mkevolve folder (so a user's own
 * `edit/` folder keeps its static checks). */
static bool is_edit_path(const char *path) {
  return mk_session_is_edit_path(path) && strstr(path, "/.mkevolve/") != NULL;
}

static editstate *edit_get(engine *e, const char *path, bool create) {
  for (editstate *es = e->edits; es; es = es->next)
    if (strcmp(es->path, path) == 0) return es;
  if (!create) return NULL;
  editstate *es = calloc(1, sizeof *es);
  if (es == NULL || (es->path = mk_strdup(path)) == NULL) {
    free(es);
    return NULL;
  }
  es->next = e->edits;
  e->edits = es;
  return es;
}

/* The findings of `from` (about `old_text`) moved onto `new_text`; those on
 * edited lines are left out until the next save. */
static void copy_mapped(const mk_lsp_analysis *from, const char *old_text, const char *new_text,
                        mk_lsp_analysis *to) {
  lsp_engine_line_map map;
  lsp_engine_line_map_build(&map, old_text, new_text);
  for (int i = 0; i < from->nfindings; i++) {
    const mk_lsp_finding *f = &from->findings[i];
    int l0 = lsp_engine_line_map_fwd(&map, f->range.line);
    int l1 = lsp_engine_line_map_fwd(&map, f->range.end_line);
    if (l0 < 0 || l1 < 0) continue;
    mk_lsp_range r = {l0, f->range.col, l1, f->range.end_col};
    mk_lsp_analysis_add_finding(to, r, f->severity, f->code, f->message);
  }
}

static void run_verify_edit(ejob *j);

/* A newer verification of edit file `path` makes the older ones stale: each
 * is answered (cancelled) and its verification stopped in the session. */
static void cancel_edit_jobs(engine *e, const char *path) {
  for (;;) {
    ejob *j = e->jobs;
    while (j && !(j->cmd == CMD_VERIFY_EDIT && !j->cancelled && strcmp(j->edit_path, path) == 0)) j = j->next;
    if (j == NULL) return;
    j->cancelled = true;
    if (!j->running) { /* waiting for its module's capture */
      job_finish(j, MK_ECANCELED, NULL, "cancelled: a newer save");
      continue;
    }
    if (!j->detached && !e->destroyed) j->sink.done(j->sink.ctx, MK_ECANCELED, NULL, NULL, "cancelled");
    j->detached = true;
    if (j->session == e->session) mk_session_cancel(j->session, j->session_job);
  }
}

/* An edit file is a candidate, not a model: no static checks. A save (or
 * the opening of a file on disk) verifies it against its subkernel, after a
 * capture of its module when the session's is missing or stale; other
 * analyses show the last verdict moved onto the current text. */
static int analyze_edit(engine *e, const mk_lsp_doc_view *doc, const mk_lsp_sink *sink, uint64_t *job) {
  editstate *es = edit_get(e, doc->path, true);
  struct stat sb;
  bool verify = e->loop && strlen(doc->text) == doc->len &&
                (doc->saved || (doc->opened && stat(doc->path, &sb) == 0));
  if (!verify) {
    mk_lsp_analysis a = {0};
    if (es && es->text) copy_mapped(&es->a, es->text, doc->text, &a);
    sink->done(sink->ctx, 0, &a, NULL, NULL);
    mk_lsp_analysis_free(&a);
    return 0;
  }
  cancel_edit_jobs(e, doc->path);
  ejob *j = calloc(1, sizeof *j);
  if (j == NULL) return MK_ENOMEM;
  *j = (ejob){.e = e, .id = ++e->next_job, .cmd = CMD_VERIFY_EDIT, .sink = *sink, .subkernel = -1,
              .variant = -1, .position_line = -1};
  j->edit_path = mk_strdup(doc->path);
  j->text = mk_strdup(doc->text);
  j->next = e->jobs;
  e->jobs = j;
  *job = j->id;
  if (j->edit_path == NULL || j->text == NULL) {
    job_fail(j, MK_ENOMEM, "out of memory");
    return 0;
  }
  if (!ensure_session(e)) {
    job_fail(j, MK_EINVAL, "%s", e->session_error ? e->session_error : "the engine could not start");
    return 0;
  }
  mk_errmsg err = {{0}};
  int rc = mk_session_edit_target(e->session, doc->path, &j->path, NULL, &err);
  if (rc) {
    job_fail(j, rc, "%s", err.text);
    return 0;
  }
  modstate *m = mod_get(e, j->path, true);
  char *now = m ? current_text(e, j->path) : NULL;
  if (now == NULL) {
    job_fail(j, MK_EIO, "cannot read %s, the module of this edit file", j->path);
    return 0;
  }
  if (m->evolve) {
    free(now);
    job_fail(j, MK_EBUSY, "an evolve job is running on %s; save again when it ends", base_name(j->path));
    return 0;
  }
  if (view_of(e, j->path) == NULL || m->captured == NULL || strcmp(m->captured, now) != 0) {
    j->waiting = true;
    j->sink.progress(j->sink.ctx, -1, "capturing the module first");
    capture(e, m, now);
    free(now);
    return 0;
  }
  free(now);
  run_verify_edit(j);
  return 0;
}

static void on_edit_verified(void *data, int status, const mk_session_edit_result *r, const char *error) {
  ejob *j = data;
  engine *e = j->e;
  if (e->destroyed || j->session != e->session) {
    job_finish(j, MK_ECANCELED, NULL, "the engine restarted");
    maybe_free_engine(e);
    return;
  }
  if (status) {
    if (status == MK_ECANCELED || j->cancelled) job_finish(j, MK_ECANCELED, NULL, "cancelled");
    else job_fail(j, status, "%s", error && *error ? error : mk_strerror(status));
    return;
  }
  mk_lsp_analysis a = {0};
  lsp_engine_edit_findings(r, j->text, &a);
  editstate *es = j->cancelled ? NULL : edit_get(e, j->edit_path, true);
  if (es) { /* the latest verdict on this file, for the analyses until the next save */
    mk_lsp_analysis_free(&es->a);
    set_str(&es->text, j->text);
    copy_mapped(&a, j->text, j->text, &es->a);
  }
  if (!j->detached) j->sink.done(j->sink.ctx, 0, &a, NULL, NULL);
  mk_lsp_analysis_free(&a);
  bool changed = r->added || (es && j->detached);
  job_unlink_free(j);
  if (changed) refresh(e); /* the module's new variant (its Swap action, the hover) */
}

static void run_verify_edit(ejob *j) {
  engine *e = j->e;
  mk_errmsg err = {{0}};
  j->session = e->session;
  int rc = mk_session_verify_edit(e->session, j->edit_path, j->text, on_edit_verified, j,
                                  &j->session_job, &err);
  if (rc) return job_fail(j, rc, "%s", err.text[0] ? err.text : mk_strerror(rc));
  j->running = true;
  j->sink.progress(j->sink.ctx, -1, "verifying the edit against its subkernel");
}

static int e_analyze(void *self, const mk_lsp_doc_view *doc, const mk_lsp_sink *sink,
                     uint64_t *job) {
  engine *e = self;
  if (doc->path && is_edit_path(doc->path)) return analyze_edit(e, doc, sink, job);
  *job = ++e->next_job;
  mk_lsp_analysis a;
  lsp_engine_static_info info;
  int rc = lsp_engine_static_check(doc->text, doc->len, &a, &info);
  if (rc != 0) {
    mk_lsp_analysis_free(&a);
    sink->done(sink->ctx, rc, NULL, NULL, "static checks failed");
    return 0;
  }
  if (doc->path && info.capturable && strlen(doc->text) == doc->len) analyze_module(e, doc, &info, &a);
  sink->done(sink->ctx, 0, &a, NULL, NULL);
  mk_lsp_analysis_free(&a); /* the server took the contents; this frees nothing */
  return 0;
}

/* ---- writing the composed file --------------------------------------------------------- */

/* A WorkspaceEdit replacing the whole of `old` (the editor's text of
 * `path`) with `text`. */
static cJSON *replace_edit(const char *path, const char *old, const char *text, unsigned caps) {
  char *uri = mk_lsp_path_to_uri(path);
  if (uri == NULL) return NULL;
  int last = 0;
  const char *tail = old;
  for (const char *p = old; *p; p++)
    if (*p == '\n') {
      last++;
      tail = p + 1;
    }
  int col = mk_lsp_byte_to_utf16(tail, strlen(tail), strlen(tail));
  cJSON *edit = cJSON_CreateObject();
  cJSON *te = cJSON_CreateObject();
  cJSON *range = cJSON_CreateObject();
  cJSON *start = cJSON_AddObjectToObject(range, "start"), *end = cJSON_AddObjectToObject(range, "end");
  cJSON_AddNumberToObject(start, "line", 0);
  cJSON_AddNumberToObject(start, "character", 0);
  cJSON_AddNumberToObject(end, "line", last);
  cJSON_AddNumberToObject(end, "character", col);
  cJSON_AddItemToObject(te, "range", range);
  cJSON_AddStringToObject(te, "newText", text);
  if (caps & MK_LSP_CLIENT_DOC_CHANGES) {
    cJSON *dc = cJSON_AddArrayToObject(edit, "documentChanges");
    cJSON *tde = cJSON_CreateObject();
    cJSON *id = cJSON_AddObjectToObject(tde, "textDocument");
    cJSON_AddStringToObject(id, "uri", uri);
    cJSON_AddNullToObject(id, "version");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(tde, "edits"), te);
    cJSON_AddItemToArray(dc, tde);
  } else {
    cJSON *changes = cJSON_AddObjectToObject(edit, "changes");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(changes, uri), te);
  }
  free(uri);
  return edit;
}

/* Puts `text` into `path`: through the editor when it has the file open
 * (the buffer is replaced; saving is the user's call), else on disk, and
 * then an empty edit of the file so that editors load it. */
static int deliver(engine *e, const char *path, const char *text, cJSON **edit, mk_buf *msg,
                   mk_errmsg *err) {
  unsigned caps = client_caps(e);
  char *open = open_text(e, path);
  if (open && (caps & MK_LSP_CLIENT_APPLY_EDIT)) {
    *edit = strcmp(open, text) == 0 ? NULL : replace_edit(path, open, text, caps);
    free(open);
    mk_buf_printf(msg, "updated %s in the editor", path);
    return 0;
  }
  free(open);
  int rc = mk_write_file(path, text, strlen(text));
  if (rc) return mk_errf(err, rc, "cannot write %s: %s", path, mk_strerror(rc));
  mk_buf_printf(msg, "wrote %s", path);
  if ((caps & MK_LSP_CLIENT_APPLY_EDIT) && (caps & MK_LSP_CLIENT_DOC_CHANGES)) {
    char *uri = mk_lsp_path_to_uri(path);
    if (uri) {
      cJSON *ed = cJSON_CreateObject();
      cJSON *tde = cJSON_CreateObject();
      cJSON *id = cJSON_AddObjectToObject(tde, "textDocument");
      cJSON_AddStringToObject(id, "uri", uri);
      cJSON_AddNullToObject(id, "version");
      cJSON_AddArrayToObject(tde, "edits");
      cJSON_AddItemToArray(cJSON_AddArrayToObject(ed, "documentChanges"), tde);
      *edit = ed;
      free(uri);
    }
  }
  return 0;
}

/* The module with its generated section (if any) replaced by the composed
 * program minus its verbatim copy of the module. */
static char *merge_inplace(const char *module, const char *composed, mk_errmsg *err) {
  const char *verb = strstr(composed, "# ---- the original module (verbatim) ----");
  if (verb == NULL) {
    mk_errf(err, MK_EUNSUPPORTED, "the composed file has no verbatim module section to replace");
    return NULL;
  }
  const char *after = NULL;
  for (const char *p = strchr(verb, '\n'); p; p = strchr(p + 1, '\n')) {
    if (strncmp(p + 1, "# ---- sk", 9) == 0 || strncmp(p + 1, "class ModelNew", 14) == 0) {
      after = p + 1;
      break;
    }
  }
  if (after == NULL) {
    mk_errf(err, MK_EUNSUPPORTED, "the composed file has no ModelNew after the module");
    return NULL;
  }
  const char *mark = strstr(module, INPLACE_MARKER);
  size_t keep = mark ? (size_t)(mark - module) : strlen(module);
  while (keep > 0 && (module[keep - 1] == '\n' || module[keep - 1] == ' ')) keep--;
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_append(&b, module, keep);
  mk_buf_printf(&b, "\n\n\n%s\n", INPLACE_MARKER);
  mk_buf_append(&b, composed, (size_t)(verb - composed));
  mk_buf_puts(&b, after);
  if (b.err) {
    mk_errf(err, b.err, "out of memory");
    mk_buf_free(&b);
    return NULL;
  }
  return mk_buf_steal(&b, NULL);
}

/* "<dir>/<stem>_new.py" beside the module. */
static char *target_path(const char *module) {
  mk_buf b;
  mk_buf_init(&b, 8192);
  const char *dot = strrchr(module, '.');
  const char *slash = strrchr(module, '/');
  size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - module) : strlen(module);
  mk_buf_append(&b, module, stem);
  mk_buf_puts(&b, "_new.py");
  return b.err ? (mk_buf_free(&b), NULL) : mk_buf_steal(&b, NULL);
}

/* Composes the current choices and hands the result to the editor. */
static int compose_output(engine *e, modstate *m, cJSON **edit, mk_buf *msg, mk_errmsg *err) {
  char *written = NULL;
  int rc = mk_session_compose(e->session, m->path, NULL, &written, err);
  if (rc) return rc;
  char *composed = read_disk(written);
  free(written);
  if (composed == NULL) return mk_errf(err, MK_EIO, "cannot read the composed file back");
  if (strcmp(e->config.compose_mode, "inplace") == 0) {
    char *module = open_text(e, m->path);
    if (module == NULL) module = read_disk(m->path);
    char *merged = module ? merge_inplace(module, composed, err) : NULL;
    if (module == NULL) rc = mk_errf(err, MK_EIO, "cannot read %s", m->path);
    else if (merged == NULL) rc = MK_EUNSUPPORTED;
    else rc = deliver(e, m->path, merged, edit, msg, err);
    free(module);
    free(merged);
  } else {
    char *target = target_path(m->path);
    if (target == NULL) rc = mk_errf(err, MK_ENOMEM, "out of memory");
    else rc = deliver(e, target, composed, edit, msg, err);
    if (rc == 0) {
      free(m->target);
      m->target = target;
    } else {
      free(target);
    }
  }
  free(composed);
  return rc;
}

/* ---- commands ------------------------------------------------------------------------------ */

static cJSON *result_new(const char *message, cJSON *edit) {
  cJSON *r = cJSON_CreateObject();
  if (r == NULL) {
    cJSON_Delete(edit);
    return NULL;
  }
  if (message) cJSON_AddStringToObject(r, "message", message);
  if (edit) cJSON_AddItemToObject(r, "edit", edit);
  cJSON_AddBoolToObject(r, "refresh", true);
  return r;
}

/* The subkernel covering 0-based editor line `line`, or -1. */
static int subkernel_at(engine *e, modstate *m, const mk_session_module *v, int line) {
  char *text = open_text(e, m->path);
  lsp_engine_line_map map;
  lsp_engine_line_map_build(&map, m->captured, text ? text : m->captured);
  free(text);
  int old = lsp_engine_line_map_back(&map, line);
  if (old < 0) return -1;
  int best = -1;
  for (int i = 0; i < v->nsubkernels; i++) {
    const mk_session_subkernel *sk = &v->subkernels[i];
    for (int k = 0; k < sk->nlines; k++)
      if (sk->lines[k] - 1 == old) return i;
    if (old >= sk->first_line - 1 && old <= sk->last_line - 1 && best < 0) best = i;
  }
  return best;
}

static void summary_line(const mk_session_module *v, mk_buf *b) {
  int verified = 0;
  for (int i = 0; i < v->nsubkernels; i++) verified += v->subkernels[i].state == MK_SK_VERIFIED;
  mk_buf_printf(b, "%d/%d subkernel%s verified", verified, v->nsubkernels,
                v->nsubkernels == 1 ? "" : "s");
  for (int i = 0; i < v->nsubkernels && i < 6; i++) {
    const mk_session_subkernel *sk = &v->subkernels[i];
    mk_buf_printf(b, "%s %s: %s", i ? ";" : " —", sk->name, sk->summary ? sk->summary : "");
  }
}

static void on_evolve_progress(void *data, double fraction, const char *message) {
  ejob *j = data;
  if (j->e->destroyed || j->cancelled || j->detached) return;
  int pct = (int)(fraction * 100.0 + 0.5);
  if (pct < j->last_percent) pct = j->last_percent; /* never backwards */
  if (pct > 100) pct = 100;
  j->last_percent = pct;
  j->sink.progress(j->sink.ctx, pct, message);
}

static void on_evolved(void *data, int status, const mk_session_module *v, const char *error) {
  ejob *j = data;
  engine *e = j->e;
  modstate *m = mod_get(e, j->path, false);
  if (m && m->evolve == j) m->evolve = NULL;
  if (e->destroyed || j->session != e->session) {
    job_finish(j, MK_ECANCELED, NULL, "the engine restarted");
    maybe_free_engine(e);
    return;
  }
  if (status == MK_ECANCELED || (status && j->cancelled)) {
    job_finish(j, MK_ECANCELED, NULL, "cancelled");
  } else if (status) {
    job_fail(j, status, "%s", error && *error ? error : mk_strerror(status));
  } else {
    mk_buf msg;
    mk_buf_init(&msg, 1 << 16);
    mk_buf_printf(&msg, "mkevolve: evolved %s — ", base_name(j->path));
    if (v) summary_line(v, &msg);
    cJSON *edit = NULL;
    mk_errmsg err = {{0}};
    if (m && (m->target || strcmp(e->config.compose_mode, "inplace") == 0) && m->engaged) {
      mk_buf where;
      mk_buf_init(&where, 8192);
      if (compose_output(e, m, &edit, &where, &err) == 0)
        mk_buf_printf(&msg, " (%s)", mk_buf_cstr(&where));
      else mk_buf_printf(&msg, " (the composed file was not updated: %s)", err.text);
      mk_buf_free(&where);
    }
    job_finish(j, 0, result_new(mk_buf_cstr(&msg), edit), NULL);
    mk_buf_free(&msg);
  }
  if (m && m->recapture) {
    m->recapture = false;
    char *now = current_text(e, m->path);
    if (now && (m->captured == NULL || strcmp(now, m->captured) != 0)) capture(e, m, now);
    free(now);
  }
  refresh(e);
}

static void cmd_evolve(ejob *j, modstate *m, const mk_session_module *v) {
  engine *e = j->e;
  if (m->evolve && m->evolve->detached)
    return job_fail(j, MK_EBUSY, "the cancelled evolve job on %s is still stopping; try again in "
                    "a moment", base_name(m->path));
  if (m->evolve)
    return job_fail(j, MK_EBUSY, "an evolve job is already running on %s (cancel it first)",
                    base_name(m->path));
  int sk = j->cmd == CMD_EVOLVE_ALL ? -1 : j->subkernel;
  if (j->cmd == CMD_EVOLVE && sk < 0 && j->position_line >= 0) sk = subkernel_at(e, m, v, j->position_line);
  if (j->cmd == CMD_EVOLVE && (sk < 0 || sk >= v->nsubkernels))
    return job_fail(j, MK_EINVAL, "no subkernel %s", j->position_line >= 0 ? "on this line" : "with that index");
  mk_errmsg err = {{0}};
  j->session = e->session;
  int rc = mk_session_evolve(e->session, m->path, sk, on_evolve_progress, on_evolved, j,
                             &j->session_job, &err);
  if (rc) return job_fail(j, rc, "%s", err.text[0] ? err.text : mk_strerror(rc));
  j->running = true;
  m->evolve = j;
  m->engaged = true;
  j->sink.progress(j->sink.ctx, 0, sk < 0 ? "evolving every subkernel" : "evolving one subkernel");
  refresh(e);
}

static void cmd_swap(ejob *j, modstate *m, const mk_session_module *v) {
  engine *e = j->e;
  if (m->evolve)
    return job_fail(j, MK_EBUSY, "an evolve job is running on %s; swap when it ends", base_name(m->path));
  int sk = j->subkernel;
  if (sk < 0 && j->position_line >= 0) sk = subkernel_at(e, m, v, j->position_line);
  if (sk < 0 || sk >= v->nsubkernels)
    return job_fail(j, MK_EINVAL, "no subkernel %s", j->position_line >= 0 ? "on this line" : "with that index");
  int variant = j->cmd == CMD_RESTORE ? 0 : j->variant;
  if (j->cmd == CMD_SWAP && variant < 1)
    return job_fail(j, MK_EINVAL, "no verified variant chosen (pick one of the Swap code actions)");
  mk_errmsg err = {{0}};
  int rc = mk_session_swap(e->session, m->path, sk, variant, &err);
  if (rc) return job_fail(j, rc, "%s", err.text[0] ? err.text : mk_strerror(rc));
  m->engaged = true;
  v = view_of(e, m->path);
  mk_buf msg;
  mk_buf_init(&msg, 1 << 16);
  const mk_session_subkernel *s = v && sk < v->nsubkernels ? &v->subkernels[sk] : NULL;
  if (s && variant == 0) mk_buf_printf(&msg, "mkevolve: %s runs the PyTorch reference again", s->name);
  else if (s) mk_buf_printf(&msg, "mkevolve: %s now runs %s (%s)", s->name, s->variants[variant].name, s->summary);
  cJSON *edit = NULL;
  if (m->target || strcmp(e->config.compose_mode, "inplace") == 0) {
    mk_buf where;
    mk_buf_init(&where, 8192);
    if (compose_output(e, m, &edit, &where, &err) == 0) mk_buf_printf(&msg, "; %s", mk_buf_cstr(&where));
    else mk_buf_printf(&msg, "; the composed file was not updated: %s", err.text);
    mk_buf_free(&where);
  }
  job_finish(j, 0, result_new(mk_buf_cstr(&msg), edit), NULL);
  mk_buf_free(&msg);
}

static void cmd_decompose(ejob *j, modstate *m, const mk_session_module *v) {
  engine *e = j->e;
  cJSON *edit = NULL;
  mk_buf where;
  mk_buf_init(&where, 8192);
  mk_errmsg err = {{0}};
  int rc = compose_output(e, m, &edit, &where, &err);
  if (rc) {
    mk_buf_free(&where);
    return job_fail(j, rc, "%s", err.text[0] ? err.text : mk_strerror(rc));
  }
  m->engaged = true;
  mk_buf msg;
  mk_buf_init(&msg, 1 << 16);
  mk_buf_printf(&msg, "mkevolve: %s decomposed into %d subkernel%s: ", base_name(m->path),
                v->nsubkernels, v->nsubkernels == 1 ? "" : "s");
  for (int i = 0; i < v->nsubkernels && i < 8; i++)
    mk_buf_printf(&msg, "%s%s (%s)", i ? ", " : "", v->subkernels[i].name, v->subkernels[i].ops);
  mk_buf_printf(&msg, "; %s", mk_buf_cstr(&where));
  mk_buf_free(&where);
  job_finish(j, 0, result_new(mk_buf_cstr(&msg), edit), NULL);
  mk_buf_free(&msg);
}

/* Writes report.md in the module's run folder and answers its URI. */
static void cmd_report(ejob *j, modstate *m, const mk_session_module *v) {
  mk_buf path, md;
  mk_buf_init(&path, 8192);
  mk_buf_init(&md, 1 << 22);
  const char *slash = strrchr(m->path, '/');
  int dirlen = slash ? (int)(slash - m->path) : 1;
  const char *stem = slash ? slash + 1 : m->path;
  mk_buf_printf(&path, "%.*s/.mkevolve", dirlen, slash ? m->path : ".");
  mkdir(mk_buf_cstr(&path), 0755);
  mk_buf_printf(&path, "/%.*s", (int)strcspn(stem, "."), stem);
  mkdir(mk_buf_cstr(&path), 0755);
  mk_buf_puts(&path, "/report.md");
  lsp_engine_report_markdown(v, &md);
  int rc = path.err || md.err ? MK_ERANGE : mk_write_file(mk_buf_cstr(&path), mk_buf_cstr(&md), md.len);
  if (rc) {
    job_fail(j, rc, "cannot write %s: %s", mk_buf_cstr(&path), mk_strerror(rc));
  } else {
    char *uri = mk_lsp_path_to_uri(mk_buf_cstr(&path));
    cJSON *r = cJSON_CreateObject();
    if (r && uri) cJSON_AddStringToObject(r, "uri", uri);
    free(uri);
    job_finish(j, 0, r, NULL);
  }
  mk_buf_free(&path);
  mk_buf_free(&md);
}

/* Writes the chosen (or asked) variant of a subkernel to its edit file and
 * asks the editor to open it. */
static void cmd_edit(ejob *j, modstate *m, const mk_session_module *v) {
  engine *e = j->e;
  int sk = j->subkernel;
  if (sk < 0 && j->position_line >= 0) sk = subkernel_at(e, m, v, j->position_line);
  if (sk < 0 || sk >= v->nsubkernels)
    return job_fail(j, MK_EINVAL, "no subkernel %s", j->position_line >= 0 ? "on this line" : "with that index");
  char *file = NULL;
  mk_errmsg err = {{0}};
  int rc = mk_session_edit_variant(e->session, m->path, sk, j->variant, &file, &err);
  if (rc) return job_fail(j, rc, "%s", err.text[0] ? err.text : mk_strerror(rc));
  char *uri = mk_lsp_path_to_uri(file);
  free(file);
  cJSON *r = cJSON_CreateObject();
  if (r && uri) {
    cJSON_AddStringToObject(r, "uri", uri);
    cJSON_AddStringToObject(r, "showDocument", uri);
  }
  free(uri);
  job_finish(j, 0, r, NULL);
}

/* Runs a job whose module has a current capture. */
static void run_command(ejob *j) {
  engine *e = j->e;
  modstate *m = mod_get(e, j->path, false);
  const mk_session_module *v = m ? view_of(e, j->path) : NULL;
  if (j->cancelled) return job_finish(j, MK_ECANCELED, NULL, "cancelled");
  if (m == NULL || v == NULL)
    return job_fail(j, MK_ENOENT, "%s has not been analysed", j->path ? base_name(j->path) : "?");
  switch (j->cmd) {
  case CMD_DECOMPOSE: return cmd_decompose(j, m, v);
  case CMD_EVOLVE:
  case CMD_EVOLVE_ALL: return cmd_evolve(j, m, v);
  case CMD_SWAP:
  case CMD_RESTORE: return cmd_swap(j, m, v);
  case CMD_REPORT: return cmd_report(j, m, v);
  case CMD_EDIT: return cmd_edit(j, m, v);
  case CMD_VERIFY_EDIT: return run_verify_edit(j);
  }
  job_fail(j, MK_EINVAL, "unknown command");
}

static int command_kind(const char *c) {
  static const struct { const char *name; int kind; } k[] = {
      {ENGINE_CMD_DECOMPOSE, CMD_DECOMPOSE}, {ENGINE_CMD_EVOLVE, CMD_EVOLVE},
      {ENGINE_CMD_EVOLVE_ALL, CMD_EVOLVE_ALL}, {ENGINE_CMD_SWAP, CMD_SWAP},
      {ENGINE_CMD_RESTORE, CMD_RESTORE},     {ENGINE_CMD_REPORT, CMD_REPORT},
      {ENGINE_CMD_EDIT, CMD_EDIT}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    if (strcmp(c, k[i].name) == 0) return k[i].kind;
  return -1;
}

static int int_member(const cJSON *o, const char *key, int dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e6 ? (int)v->valuedouble : dflt;
}

/* The module a URI-less openReport means: the most recently known one. */
static const char *any_module(engine *e) {
  for (modstate *m = e->mods; m; m = m->next)
    if (view_of(e, m->path)) return m->path;
  return NULL;
}

static int e_execute(void *self, const char *command, const cJSON *arguments,
                     const mk_lsp_sink *sink, uint64_t *job, mk_errmsg *err) {
  engine *e = self;
  int kind = command_kind(command);
  if (kind < 0) return mk_errf(err, MK_ENOENT, "unknown command %s", command);
  const cJSON *arg = cJSON_GetArrayItem(arguments, 0);
  const cJSON *uri = cJSON_GetObjectItemCaseSensitive(arg, "uri");
  char *path = cJSON_IsString(uri) ? mk_lsp_uri_to_path(uri->valuestring) : NULL;
  if (path == NULL && kind == CMD_REPORT && any_module(e)) path = mk_strdup(any_module(e));
  if (path == NULL)
    return mk_errf(err, MK_EINVAL, "%s needs [{\"uri\": \"file://…\"}] naming a Python module", command);
  ejob *j = calloc(1, sizeof *j);
  if (j == NULL) {
    free(path);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  *j = (ejob){.e = e, .id = ++e->next_job, .cmd = kind, .sink = *sink, .path = path,
              .subkernel = int_member(arg, "subkernel", -1), .variant = int_member(arg, "variant", -1),
              .position_line = -1};
  j->uri = cJSON_IsString(uri) ? mk_strdup(uri->valuestring) : NULL;
  const cJSON *pos = cJSON_GetObjectItemCaseSensitive(arg, "position");
  if (cJSON_IsObject(pos)) j->position_line = int_member(pos, "line", -1);
  j->next = e->jobs;
  e->jobs = j;
  *job = j->id;
  modstate *m = mod_get(e, path, true);
  char *disk = read_disk(path);
  if (m == NULL || disk == NULL) {
    free(disk);
    job_fail(j, MK_EIO, "cannot read %s", path);
    return 0;
  }
  /* Commands act on the saved file: capture it first if the session's
   * view is older (or there is none). */
  if (view_of(e, path) == NULL || m->captured == NULL || strcmp(m->captured, disk) != 0) {
    if (m->evolve && kind != CMD_REPORT) {
      free(disk);
      job_fail(j, MK_EBUSY, "an evolve job is running on %s (cancel it first)", base_name(path));
      return 0;
    }
    j->waiting = true;
    capture(e, m, disk);
    free(disk);
    return 0;
  }
  free(disk);
  run_command(j);
  return 0;
}

static void e_cancel(void *self, uint64_t id) {
  engine *e = self;
  for (ejob *j = e->jobs; j; j = j->next) {
    if (j->id != id || j->cancelled) continue;
    if (j->cmd == CMD_VERIFY_EDIT && j->running) {
      /* A newer analysis (an edit after the save) replaces this one: answer
       * now, but let the verification of the saved text finish, so its
       * verdict is kept (and the worker not restarted); a newer save stops
       * it (cancel_edit_jobs). */
      if (!j->detached && !e->destroyed) j->sink.done(j->sink.ctx, MK_ECANCELED, NULL, NULL, "cancelled");
      j->detached = true;
      return;
    }
    j->cancelled = true;
    if (j->waiting) {
      job_finish(j, MK_ECANCELED, NULL, "cancelled");
    } else if (j->running) {
      /* The session cancels the verifications in flight in the workers;
       * their callbacks still arrive from the loop: answer the user now
       * and let the session wind down behind. */
      mk_session_cancel(j->session, j->session_job);
      if (!e->destroyed) j->sink.done(j->sink.ctx, MK_ECANCELED, NULL, NULL, "cancelled");
      j->detached = true;
      refresh(e);
    }
    return;
  }
}

/* ---- configuration and lifetime ------------------------------------------------------------- */

/* Takes a new configuration; a new Python or device starts a new session. */
static void apply_config(engine *e, const mk_lsp_engine_config *cfg) {
  bool restart = strcmp(cfg->python, e->config.python) != 0 || strcmp(cfg->backend, e->config.backend) != 0;
  e->config = *cfg;
  if (e->session_error) { /* a new configuration deserves a new attempt */
    free(e->session_error);
    e->session_error = NULL;
    e->told_session_error = false;
  }
  if (e->session == NULL) return;
  if (restart) {
    drop_session(e);
    return;
  }
  mk_session_config sc;
  char *json = NULL;
  mk_lsp_engine_config_session(cfg, &sc, &json);
  mk_errmsg err = {{0}};
  if (mk_session_set_config(e->session, &sc, &err)) show(e, 2, err.text);
  free(json);
}

static int e_configure(void *self, const cJSON *settings, mk_errmsg *err) {
  engine *e = self;
  mk_lsp_engine_config next = e->config;
  int rc = mk_lsp_engine_config_apply(&next, settings, err);
  apply_config(e, &next);
  return rc;
}

static void e_attach(void *self, const mk_lsp_backend_host *host) {
  engine *e = self;
  e->host = *host;
  e->has_host = true;
}

static void e_destroy(void *self) {
  engine *e = self;
  e->destroyed = true;
  /* Waiting jobs end here (the server no longer listens); running evolves
   * end through their callbacks while the session closes. */
  for (ejob *j = e->jobs, *next; j; j = next) {
    next = j->next;
    if (!j->running) job_unlink_free(j);
  }
  drop_session(e);
  maybe_free_engine(e);
}

static const char *const *e_commands(void *self) {
  (void)self;
  return lsp_engine_commands;
}

static const mk_lsp_backend_ops lsp_engine_ops = {
    .attach = e_attach,
    .commands = e_commands,
    .analyze = e_analyze,
    .execute = e_execute,
    .cancel = e_cancel,
    .configure = e_configure,
    .closed = NULL,
    .destroy = e_destroy,
};

int mk_lsp_engine_backend_new(uv_loop_t *loop, mk_lsp_backend *out) {
  engine *e = calloc(1, sizeof *e);
  if (e == NULL) return MK_ENOMEM;
  e->loop = loop;
  mk_lsp_engine_config_defaults(&e->config);
  out->ops = &lsp_engine_ops;
  out->self = e;
  return 0;
}
