/* session_internal.h — shared between the session's files: the per-module
 * state (session.c) and the runtime glue (session_runtime.c: worker pool,
 * capture, the evaluator over the verification API). Not a public header. */
#ifndef MK_SESSION_INTERNAL_H
#define MK_SESSION_INTERNAL_H

#include "mk_decompose.h"
#include "mk_ir.h"
#include "mk_search.h"
#include "mk_session.h"

#include <stdint.h>
#include <stdio.h>

typedef struct session_runtime session_runtime;

struct module_state;

/* What the evaluator adapter needs to find its way back. */
typedef struct session_eval_ctx {
  struct mk_session *s;
  struct module_state *m;
  double limit_s;           /* the search's limit for the next jobs (mk_evaluator.limit), 0: none */
} session_eval_ctx;

typedef struct module_state {
  char *path;
  char *source;             /* text the graph was captured from */
  char *capture_file;       /* the private copy captured when that text was unsaved
                               (NULL: the module's own file); g->file names it */
  char **input_names;       /* forward's parameters (without self), for emitted code */
  int ninput_names;
  bool forward_takes_more; /* parameters past the plain ones (defaults, *args, **kw) */
  mk_graph *g;
  mk_partition part;
  mk_subkernel_state *st;   /* one per subkernel of part */
  int batch;                /* reduced batch used, 0 for full shapes */
  char note[256];
  char *modelnew_path;
  char *run_log;            /* the last evolve's log file, or NULL */
  double eager_ms, compile_ms, ours_ms;
  double compile_max_ms, compile_ro_ms; /* the other compile modes, < 0 unknown */
  int compile_check;        /* mk_session_module.compile_check */
  double compile_err;
  char compile_note[256];   /* mk_session_module.compile_note */
  mk_session_moves moves;   /* the last evolve's merges/splits and CUDA-graph choice */
  bool fixed_shapes;        /* its composition guards every input's whole shape
                               (mk_search_result.fixed_shapes) */
  bool plain_subclass;      /* it kept the plain subclass (mk_search_result.plain_subclass) */
  int native_evals;         /* its evaluations the native worker ran */
  double gpu_fraction;     /* roofline fraction of ours_ms, < 0 unknown */
  char gpu[64];             /* the GPU (CUDA_VISIBLE_DEVICES) that timed ours_ms, "" none */
  long tokens_in, tokens_out;
  int job;                  /* running evolve job id, 0 when idle */
  int running_subkernel;    /* -1 all */
  mk_search *search;
  /* The running evolve's progress (session_progress): the search's last
   * fraction and message, and the candidates the evaluator saw. */
  mk_session_progress_cb progress;
  void *progress_data;
  double evolve_t0;         /* seconds (uv_hrtime) when the evolve started */
  double fraction;
  char phase[160];
  int cand_submitted, cand_done, cand_ok;
  int plan_candidates;      /* the search's CPU plan: candidates planned in all, 0: no plan */
  double plan_eta_s;        /* its estimate of the time left, < 0: none */
  double plan_eta_at;       /* seconds into the evolve when it was made */
  /* The first whole-program verification of the evolve that failed: why a
   * verified kernel was reverted to PyTorch. */
  char final_failure[256];
  session_eval_ctx eval;    /* the evaluator's context while a search runs */
  uint64_t *verify_jobs;    /* verifications submitted for it, not yet called back */
  int nverify_jobs, capverify_jobs;
  /* views, rebuilt by session_module_refresh_views */
  mk_session_module view;
  mk_session_subkernel *sk_views;
  mk_session_variant *var_views;
  int *line_pool;
  char **strings; int nstrings, capstrings;
  struct module_state *next;
} module_state;

struct session_edit_req;

struct mk_session {
  uv_loop_t *loop;
  mk_session_config cfg;
  char *cfg_strings[8];     /* owned copies of the config's strings */
  session_runtime *rt;
  module_state *modules;
  int next_job;
  bool closing;
  struct session_edit_req *edits; /* edit verifications in flight (session_edit.c) */
};

/* ---- runtime glue (session_runtime.c) ---- */
int session_runtime_open(mk_session *s, mk_errmsg *err);
void session_runtime_close(mk_session *s, void (*done)(void *data), void *data);
const char *session_runtime_device(mk_session *s); /* "cpu" or the GPU's name */
bool session_runtime_timed(mk_session *s);
/* The session's worker pool (session_kbcheck.c submits its own method). */
struct mk_worker_pool *session_runtime_pool(mk_session *s);
/* The session's verifier (session_check.c), NULL while closing. */
struct mk_verify *session_runtime_verify(mk_session *s);
/* The options of a one-shot check (mk_session_check): the session's
 * verification settings, its seed, device and job limit. */
void session_runtime_check_options(mk_session *s, int batch, mk_verify_options *o);

/* The options a candidate of module m is verified with (the search's and
 * an edit file's alike): the session's settings, m's batch, the device. */
void session_runtime_candidate_options(mk_session *s, const module_state *m, mk_verify_options *o);
/* A verifier's verdict as the search's result (report_json left NULL). */
void session_runtime_eval_result(const mk_verify_result *v, mk_eval_result *out);

typedef void (*session_capture_cb)(void *data, int status, mk_graph *g, int batch,
                                   const char *error);
/* Captures `path` (batch per the config: reduced on CPU when needed). */
int session_runtime_capture(mk_session *s, const char *path, session_capture_cb cb, void *data,
                            mk_errmsg *err);
/* The evaluator the search uses for module m. */
mk_evaluator session_runtime_evaluator(mk_session *s, module_state *m);
/* The proposer named in the config (builtin or llm). */
int session_runtime_proposer(mk_session *s, module_state *m, mk_proposer *out, mk_errmsg *err);
/* LLM proposer bookkeeping: a search's verdict on a variant (teaches the
 * Optimiser which variants are fastest), dropping a module's memory, and
 * run-log lines: "llm_config" when an evolve of m starts, "llm_usage" when
 * it ends (the ledger of the calls made since it started, and the
 * session's total); nothing without an LLM client. */
void session_runtime_search_event(mk_session *s, module_state *m, const mk_search_event *ev);
/* Where LLM progress (text arriving, retries) of m's evolve is reported,
 * as the search's last fraction with a longer message; NULL to stop. */
void session_runtime_set_progress(mk_session *s, module_state *m, mk_session_progress_cb cb,
                                  void *data);
void session_runtime_forget(mk_session *s, module_state *m);
void session_runtime_log_llm(mk_session *s, module_state *m, FILE *log, const char *event);
/* Tokens the LLM calls of m's current evolve spent (the ledger since its
 * "llm_config"); 0 without an LLM client. The search itself knows only an
 * opaque cost per candidate. */
void session_runtime_llm_run_tokens(mk_session *s, module_state *m, long *in, long *out);

/* ---- editable variants (session_edit.c) ---- */
/* Cancels edit verification `job`: 0, or MK_ENOENT when it is not one. */
int session_edit_cancel(mk_session *s, int job);

/* ---- state (session.c) ---- */
/* The run folder of module `path` (config's workdir, else .mkevolve/<stem>
 * beside it), created when `create`. */
int session_workdir(mk_session *s, const char *path, bool create, char *out, size_t size);
/* Reports m's evolve progress with the candidate counts and an ETA
 * (nothing when no evolve of m reports progress). */
void session_progress(mk_session *s, module_state *m);
module_state *session_module(mk_session *s, const char *path, bool create);
void session_module_refresh_views(mk_session *s, module_state *m);
/* Frees every module and the session itself (after the runtime stopped). */
void session_free(mk_session *s);

#endif
