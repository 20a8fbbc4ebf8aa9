/* mk_llm.h — LLM providers, agents and the token ledger.
 *
 * Layers, bottom up:
 *   - configuration (mk_llm_config): provider family, model, base URL, the
 *     *name* of the environment variable holding the key, timeouts,
 *     retries, concurrency, budgets, price table; loadable from JSON.
 *   - SSE parser (mk_llm_sse): incremental server-sent-events decoding.
 *   - client (mk_llm): chat requests over the libcurl multi interface driven
 *     by a libuv loop; OpenAI-compatible chat completions and Anthropic
 *     messages, streaming with progress callbacks, per-attempt timeouts,
 *     cancellation, retries with backoff on 429/5xx honouring Retry-After,
 *     a concurrency limit. Every call lands in the ledger.
 *   - ledger (mk_llm_ledger): tokens and money per call, aggregated per
 *     agent, subkernel, model and run; budgets; JSON dump.
 *   - prompts (mk_llm_prompt): plain-text templates in prompts/ with named
 *     variables, one per agent, versioned.
 *   - reply parsing (mk_llm_parse_*): candidates from fenced code, JSON
 *     decisions; an unusable reply is a recorded failure, never a crash.
 *   - agents: KernelWriter/Repairer/Optimiser as an asynchronous proposer
 *     yielding mk_candidate values; Splitter/Fuser/Decomposer returning
 *     structured decisions.
 *
 * The API key is read from the environment when the client is created and
 * lives only in the client; it never appears in logs, error messages, the
 * ledger or the configuration dump (every outgoing string is redacted).
 *
 * Threading: single-threaded, everything on the caller's uv loop. Callbacks
 * run from the loop, never from inside the call that started a request. */
#ifndef MK_LLM_H
#define MK_LLM_H

#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_err.h"
#include "mk_ir.h"
#include "mk_propose.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */

typedef enum mk_llm_provider {
  MK_LLM_OPENAI,    /* OpenAI-compatible /chat/completions (vLLM, SGLang, Ollama, ...) */
  MK_LLM_ANTHROPIC, /* Anthropic /v1/messages */
} mk_llm_provider;

typedef struct mk_llm_price {
  char *model;          /* exact model name, or a prefix ending in '*' ("claude-*") */
  double input_per_mtok;  /* USD per million prompt tokens */
  double output_per_mtok; /* USD per million completion tokens */
} mk_llm_price;

typedef struct mk_llm_config {
  mk_llm_provider provider;
  char *model;            /* required before mk_llm_new */
  char *base_url;         /* NULL: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else the vendor's */
  char *api_key_env;      /* NULL: "OPENAI_API_KEY" / "ANTHROPIC_API_KEY" */
  char *prompts_dir;      /* NULL: $MKEVOLVE_PROMPTS, else the source tree's prompts/ */
  char *anthropic_version;/* NULL: "2023-06-01" */
  char *max_tokens_field; /* OpenAI body key: NULL: "max_tokens" ("max_completion_tokens" for o-series) */
  double timeout_s;       /* per attempt, whole transfer (default 600) */
  double connect_timeout_s;/* default 30 */
  double stall_timeout_s; /* abort an attempt receiving nothing this long (default 120; 0 off) */
  int max_concurrency;    /* requests on the wire at once (default 4) */
  int max_retries;        /* extra attempts after the first (default 4) */
  double backoff_initial_s;/* first retry delay without Retry-After (default 1) */
  double backoff_max_s;   /* cap on any single wait, Retry-After included (default 60) */
  int max_tokens;         /* completion limit per call (default 8192) */
  double temperature;     /* < 0: not sent (provider default; default -1) */
  bool stream;            /* server-sent events (default true) */
  long budget_tokens;     /* prompt+completion tokens per run, 0: unlimited */
  double budget_usd;      /* money per run, 0: unlimited (needs a price for the model) */
  mk_llm_price *prices; int nprices;
} mk_llm_config;

/* Defaults (see field comments). Free with mk_llm_config_free. */
void mk_llm_config_init(mk_llm_config *c);
void mk_llm_config_free(mk_llm_config *c);
/* Applies a JSON object on top of `c`. Keys: provider ("openai" |
 * "anthropic"), model, base_url, api_key_env, prompts_dir,
 * anthropic_version, max_tokens_field, timeout_s, connect_timeout_s,
 * stall_timeout_s, max_concurrency, max_retries, backoff_initial_s,
 * backoff_max_s, max_tokens, temperature, stream, budget {tokens, usd},
 * prices {model: {input_per_mtok, output_per_mtok}}. Unknown keys, wrong
 * types and an "api_key" key (keys belong in the environment) are errors
 * that name the key; on error `c` is unchanged. */
int mk_llm_config_from_json(mk_llm_config *c, const cJSON *obj, mk_errmsg *err);
/* The configuration as JSON for run files (never contains a key; names the
 * key's environment variable only). Caller frees with cJSON_Delete. */
cJSON *mk_llm_config_to_json(const mk_llm_config *c);
const char *mk_llm_provider_name(mk_llm_provider p);
/* Price for a model (exact match first, then the longest '*' prefix), or NULL. */
const mk_llm_price *mk_llm_config_price(const mk_llm_config *c, const char *model);

/* ------------------------------------------------------------------------ */
/* Server-sent events                                                       */

typedef void (*mk_llm_sse_event_fn)(void *data, const char *event, const char *payload,
                                    size_t len);

/* Incremental parser (WHATWG EventSource rules): lines end in \n, \r\n or
 * \r; "data:" lines join with \n; "event:" names the event; ":" comments
 * and unknown fields are ignored; a blank line dispatches. Events larger
 * than `max_event` bytes make feed fail with MK_ERANGE. */
typedef struct mk_llm_sse {
  mk_buf line, data, event;
  bool have_data, last_cr;
  size_t max_event;
  mk_llm_sse_event_fn fn;
  void *fn_data;
} mk_llm_sse;

void mk_llm_sse_init(mk_llm_sse *p, size_t max_event, mk_llm_sse_event_fn fn, void *data);
int mk_llm_sse_feed(mk_llm_sse *p, const char *bytes, size_t n);
/* End of stream: dispatches nothing (an unterminated event is dropped, as
 * EventSource does) and returns 1 if bytes of an unfinished event were
 * pending (a truncated stream), else 0. */
int mk_llm_sse_finish(mk_llm_sse *p);
void mk_llm_sse_free(mk_llm_sse *p);

/* ------------------------------------------------------------------------ */
/* Token ledger                                                             */

typedef struct mk_llm_usage {
  long calls;          /* chat calls completed (any outcome) */
  long failures;       /* calls that failed or whose reply was unusable */
  long tokens_in, tokens_out;
  long estimated;      /* calls whose usage the provider did not report (chars/4) */
  double usd;
} mk_llm_usage;

typedef struct mk_llm_call_record {
  char *agent;         /* "kernel_writer", ... (or "chat") */
  char *subkernel;     /* subkernel name or NULL */
  char *model;
  char *outcome;       /* "ok", "unusable", "error" */
  char *detail;        /* one line (redacted), NULL when ok */
  int status;          /* 0 or MK_E* */
  int http_status, attempts;
  double elapsed_s;
  mk_llm_usage u;      /* this call alone (calls == 1) */
} mk_llm_call_record;

typedef struct mk_llm_ledger {
  mk_llm_call_record *calls; int ncalls, cap;
  mk_llm_usage total;
  long budget_tokens; double budget_usd;
} mk_llm_ledger;

void mk_llm_ledger_init(mk_llm_ledger *l, long budget_tokens, double budget_usd);
void mk_llm_ledger_free(mk_llm_ledger *l);
/* Appends a call (strings copied; NULL allowed except agent/model); returns its index or MK_ENOMEM. */
int mk_llm_ledger_add(mk_llm_ledger *l, const mk_llm_call_record *r);
/* Marks call `index` unusable/failed after the fact (reply parsing). */
int mk_llm_ledger_set_outcome(mk_llm_ledger *l, int index, const char *outcome, const char *detail);
/* True when a budget is set and spent (no new call may start). */
bool mk_llm_ledger_exhausted(const mk_llm_ledger *l);
/* Sums of the calls matching agent / subkernel (NULL: any). */
mk_llm_usage mk_llm_ledger_sum(const mk_llm_ledger *l, const char *agent, const char *subkernel);
/* {"total":{...},"by_agent":{...},"by_subkernel":{...},"by_model":{...},
 *  "budget":{...},"calls":[...]} — each usage object has calls, failures,
 * tokens_in, tokens_out, tokens, estimated_calls, usd. `with_calls` adds the
 * per-call list. Caller frees with cJSON_Delete. */
cJSON *mk_llm_ledger_json(const mk_llm_ledger *l, bool with_calls);

/* ------------------------------------------------------------------------ */
/* Client                                                                   */

typedef struct mk_llm mk_llm;
typedef struct mk_llm_req mk_llm_req;

typedef void (*mk_llm_log_fn)(void *data, const char *line);

/* Creates a client on `loop`. Reads the base URL and key from the
 * environment (per the config), checks that a key exists for the vendors'
 * own endpoints (MK_EAUTH otherwise; local servers may run without one) and
 * that a money budget has a price for the model. `cfg` is copied. */
int mk_llm_new(uv_loop_t *loop, const mk_llm_config *cfg, mk_llm **out, mk_errmsg *err);
/* Cancels every request (their callbacks run with MK_ECANCELED), closes
 * handles; the memory is released once the loop has run the close
 * callbacks (run the loop until it has no active handles). */
void mk_llm_close(mk_llm *llm);
/* Log lines (retries, failures), already redacted. Default: none. */
void mk_llm_set_log(mk_llm *llm, mk_llm_log_fn fn, void *data);
const mk_llm_config *mk_llm_get_config(const mk_llm *llm);
mk_llm_ledger *mk_llm_get_ledger(mk_llm *llm);
/* The resolved endpoint URL (no secrets in it). */
const char *mk_llm_endpoint(const mk_llm *llm);
/* Number of requests queued, on the wire or waiting to retry. */
int mk_llm_pending(const mk_llm *llm);
/* Replaces every occurrence of the key in s (in place) by "[redacted]"-
 * style filler; used on every outgoing string. */
void mk_llm_redact(const mk_llm *llm, char *s);

typedef struct mk_llm_message {
  const char *role;    /* "user" or "assistant" */
  const char *content;
} mk_llm_message;

typedef enum mk_llm_progress_kind {
  MK_LLM_PROGRESS_TEXT,  /* a piece of the reply arrived */
  MK_LLM_PROGRESS_RETRY, /* an attempt failed; waiting `wait_s` before the next */
} mk_llm_progress_kind;

typedef struct mk_llm_progress {
  mk_llm_progress_kind kind;
  const char *delta; size_t ndelta; /* TEXT: the new text */
  size_t chars;                     /* reply characters so far (this attempt) */
  int attempt;                      /* 1-based */
  double wait_s;                    /* RETRY */
  const char *reason;               /* RETRY: why, redacted */
} mk_llm_progress;

typedef void (*mk_llm_progress_fn)(void *data, const mk_llm_progress *p);

typedef struct mk_llm_chat {
  const char *system;                 /* may be NULL */
  const mk_llm_message *messages; int nmessages;
  const char *agent;                  /* ledger key (NULL: "chat") */
  const char *subkernel;              /* ledger key (may be NULL) */
  int max_tokens;                     /* 0: config */
  mk_llm_progress_fn progress; void *progress_data;
} mk_llm_chat;

typedef struct mk_llm_reply {
  int status;          /* 0, or MK_ETIMEDOUT/MK_ENET/MK_EAUTH/MK_EINVAL/MK_EPROTO/MK_ECANCELED/MK_EBUDGET */
  mk_errmsg err;       /* when status != 0 (redacted) */
  char *text;          /* the reply text ("" on failure; owned by the reply) */
  char *model;         /* the model the provider says answered (owned) */
  char *finish_reason; /* "stop", "length", "end_turn", "max_tokens", ... or NULL */
  long tokens_in, tokens_out;
  bool usage_estimated;
  int http_status, attempts;
  double elapsed_s;
  int ledger_index;    /* the call's record in the ledger, -1 if none */
} mk_llm_reply;

/* The callback owns nothing: `reply` is valid during the call only. */
typedef void (*mk_llm_reply_fn)(void *data, mk_llm_reply *reply);

/* Starts a chat request. The messages are copied. Fails synchronously with
 * MK_EBUDGET when the budget is spent and MK_EINVAL on bad arguments;
 * otherwise `done` runs exactly once, later, from the loop. `*req` (may be
 * NULL) receives a handle valid until `done` runs. */
int mk_llm_chat_async(mk_llm *llm, const mk_llm_chat *chat, mk_llm_reply_fn done, void *data,
                      mk_llm_req **req, mk_errmsg *err);
/* Cancels a request; its callback runs later with MK_ECANCELED (unless it
 * already completed in this loop iteration). */
void mk_llm_cancel(mk_llm_req *req);

/* ------------------------------------------------------------------------ */
/* Prompts                                                                  */

typedef struct mk_llm_var {
  const char *name, *value; /* value NULL counts as empty */
} mk_llm_var;

typedef struct mk_llm_prompt {
  char *name;     /* "kernel_writer" */
  int version;    /* from "# version: N" */
  char *system;   /* template text of the "=== system" section */
  char *user;     /* template text of the "=== user" section */
} mk_llm_prompt;

/* Loads prompts/<name>.txt: header lines "# key: value" (version required),
 * then sections "=== system" and "=== user". Errors name the file. */
int mk_llm_prompt_load(const char *dir, const char *name, mk_llm_prompt *out, mk_errmsg *err);
int mk_llm_prompt_parse(const char *name, const char *text, mk_llm_prompt *out, mk_errmsg *err);
void mk_llm_prompt_free(mk_llm_prompt *p);
/* Renders a template: {{name}} is replaced by the variable's value;
 * {{#name}}...{{/name}} keeps its body only when the variable is non-empty,
 * {{^name}}...{{/name}} only when it is empty. An unknown variable or an
 * unbalanced section is MK_EINVAL naming it (typos in tuned prompts are
 * caught, not sent). */
int mk_llm_render(const char *tmpl, const mk_llm_var *vars, int nvars, mk_buf *out,
                  mk_errmsg *err);

/* ------------------------------------------------------------------------ */
/* Reply parsing                                                            */

/* Extracts candidates from a reply: each fenced block (``` or ~~~, any
 * info string) defining a top-level `def run(` is one candidate; blocks
 * without run() that precede one are helpers joined to it; an unclosed
 * final fence or unfenced code is accepted if it parses. Missing standard
 * imports (torch, triton, triton.language as tl, math) are added. Blocks
 * with syntax errors (tree-sitter) are rejected, and so are modules in
 * another language than `lang` asks for (MK_KBACKEND_TRITON: no CUDA C++
 * module; MK_KBACKEND_CUDA: CUDA C++ modules only; MK_KBACKEND_AUTO:
 * either) and CUDA C++ modules that break the candidate contract
 * (mk_backend_check_candidate: MK_CUDA_SOURCE, MK_CUDA_KERNELS and the
 * kernels' signatures). Names come from a "variant: NAME" line before the
 * block, else `default_name`_i; a "notes: ..." line gives the notes. At
 * most `max` candidates (<=0: any), duplicates dropped. Returns the number
 * appended (>= 1), or MK_EPARSE with `err` saying why nothing was usable
 * (every rejected block's reason). Candidates' origin is `origin`. */
int mk_llm_parse_candidates(const char *reply, mk_kernel_backend lang, const char *default_name,
                            const char *origin, int max, mk_candidate_list *out, mk_errmsg *err);
/* The first JSON object in a reply (a ```json block, any fenced block, or
 * the outermost {...} in the text). Caller frees with cJSON_Delete. */
int mk_llm_parse_json(const char *reply, cJSON **out, mk_errmsg *err);
/* True when `source` parses as Python without errors; else fills err with
 * the first error's line. */
bool mk_llm_python_ok(const char *source, mk_errmsg *err);

/* ------------------------------------------------------------------------ */
/* Agents                                                                   */

/* Context a proposer call may use beyond mk_propose_request. Every field is
 * optional. */
typedef struct mk_llm_propose_extra {
  const char *module_source;     /* the user's file (KernelWriter shows the subkernel's lines) */
  const char *reference_code;    /* the reference candidate's source (mk_reference_candidate) */
  const mk_candidate *const *best; int nbest; /* fastest verified variants so far (Optimiser) */
  const char *const *best_timings; /* one line per best[i] ("0.41 ms, 2.3x"), may be NULL */
  mk_llm_progress_fn progress; void *progress_data;
} mk_llm_propose_extra;

/* Ownership of `cands` passes to the callback (free with
 * mk_candidate_list_free); it is empty when status != 0. `err` is NULL on
 * success. On MK_EPARSE the call's tokens are in the ledger as unusable. */
typedef void (*mk_llm_propose_fn)(void *data, int status, mk_candidate_list *cands,
                                  const mk_errmsg *err);

/* The LLM proposer: KernelWriter for MK_PROPOSE_NEW, Repairer for
 * MK_PROPOSE_REPAIR, Optimiser for MK_PROPOSE_OPTIMISE, in the kernel
 * language(s) of req->backend: one chat call per language, asking for up
 * to req->max_candidates variants in all (MK_KBACKEND_AUTO: two calls, one
 * Triton and one CUDA C++, sharing the bound, their candidates
 * interleaved). A REPAIR or OPTIMISE is written in its parent's language.
 * CUDA C++ needs a GPU: on a "cpu" device CUDA is not asked for, and a
 * proposal left with no language fails at once with MK_EUNSUPPORTED.
 * Prompts carry the language's contract (prompts/<language>_contract.txt)
 * and replies are checked against it (mk_llm_parse_candidates). Candidates
 * have origin "llm:<model>" and each call's tokens split over its
 * candidates (sums equal the calls'); the callback gets a failure only when
 * no call gave a candidate. `*handle` is the call's when there is one call,
 * NULL for two (mk_llm_close cancels them). `req` and `extra` are only read
 * during this call. */
int mk_llm_propose_async(mk_llm *llm, const mk_propose_request *req,
                         const mk_llm_propose_extra *extra, mk_llm_propose_fn done, void *data,
                         mk_llm_req **handle, mk_errmsg *err);
/* Blocking form for callers that are not inside the loop's callbacks (CLI):
 * runs the loop until the proposal completes; same contract as
 * mk_builtin_propose (appends to `out`). */
int mk_llm_propose(mk_llm *llm, const mk_propose_request *req, const mk_llm_propose_extra *extra,
                   mk_candidate_list *out, mk_errmsg *err);

/* The LLM proposer as engine/search's mk_proposer (`--proposer llm`).
 * `ctx` (and what it points to) must outlive the search. propose() returns
 * MK_EBUDGET once the ledger's budget is spent (and copies the message into
 * ctx->last_error when set); otherwise the callback runs later from the
 * loop with the candidates, or with a status and message on failure.
 *
 * What each agent is shown beyond mk_propose_request:
 *   - every agent: the subkernel's PyTorch reference (mk_reference_candidate);
 *   - Repairer: the parent and a readable digest of its verification report;
 *   - Optimiser: the parent, its timing, and the fastest verified variants
 *     of the same subkernel so far. The adapter remembers the candidates it
 *     proposed (per subkernel) and learns their verdicts from
 *     mk_llm_proposer_observe (the caller forwards the search's
 *     MK_SEARCH_VARIANT events) and from OPTIMISE requests (whose parent is
 *     verified by definition, with the report carrying its timing).
 * The memory is bounded (oldest entries dropped) and freed by
 * mk_llm_proposer_reset. */
typedef struct mk_llm_seen mk_llm_seen;

typedef struct mk_llm_proposer_ctx {
  mk_llm *llm;                         /* NULL: every proposal is answered with an error */
  const char *module_source;           /* may be NULL */
  mk_llm_progress_fn progress;         /* may be NULL */
  void *progress_data;
  char *last_error;                    /* NULL, or a buffer of MK_ERRMSG_MAX bytes */
  int max_best;                        /* variants shown to the Optimiser (<= 0: 3) */
  mk_llm_seen *seen;                   /* private: zero-initialise, free with _reset */
} mk_llm_proposer_ctx;

mk_proposer mk_llm_proposer(mk_llm_proposer_ctx *ctx);
/* Tells the adapter the verdict on candidate `c` (matched by source text
 * against the candidates it proposed; others are ignored). */
void mk_llm_proposer_observe(mk_llm_proposer_ctx *ctx, const mk_candidate *c,
                             const mk_propose_verdict *v);
/* Frees the adapter's memory (the ctx itself is the caller's). */
void mk_llm_proposer_reset(mk_llm_proposer_ctx *ctx);
/* One line describing a verified result for prompts: "0.412 ms, 2.31x vs
 * eager" or "verified 5/5 trials, untimed (cpu)". */
void mk_llm_timing_line(const mk_propose_verdict *v, mk_buf *out);
/* A verification report (the verifier's JSON, docs/verify.md) as compact
 * readable text for prompts: status, reason, line, errors, the worst
 * element, trials, the traceback's tail, timing. Text that is not a JSON
 * object, or JSON without any of those fields, is copied as is. */
void mk_llm_report_text(const char *report_json, mk_buf *out);

typedef enum mk_llm_decision_kind {
  MK_LLM_SPLIT, /* split subkernel `subkernel` at node `at_node` */
  MK_LLM_MERGE, /* merge subkernels `subkernel` and `subkernel + 1` */
} mk_llm_decision_kind;

typedef struct mk_llm_decision {
  mk_llm_decision_kind kind;
  int subkernel;
  int at_node;  /* SPLIT only, else -1 */
  char *reason;
} mk_llm_decision;

typedef struct mk_llm_decisions {
  mk_llm_decision *items; int n;
  char *rejected;      /* why entries were dropped (one line each), or NULL */
  long tokens_in, tokens_out;
} mk_llm_decisions;

void mk_llm_decisions_free(mk_llm_decisions *d);

/* Ownership of `d` passes to the callback (mk_llm_decisions_free). An
 * empty list with status 0 means "no change proposed". */
typedef void (*mk_llm_decisions_fn)(void *data, int status, mk_llm_decisions *d,
                                    const mk_errmsg *err);

/* Splitter (kind MK_LLM_SPLIT) and Fuser (MK_LLM_MERGE): ask for changes to
 * partition `p`. `timings_json` (may be NULL) is per-subkernel timing text
 * shown to the agent; `backend` the kernel language(s) the subkernels will
 * be written in (the prompts' `language`). Decisions are validated against
 * `p` (indices, split point inside the subkernel and not its first node);
 * invalid entries are dropped and listed in `rejected`. `g` and `p` are read
 * again when the reply arrives: they must stay valid until the callback has
 * run. */
int mk_llm_decide_async(mk_llm *llm, mk_llm_decision_kind kind, const mk_graph *g,
                        const mk_partition *p, const char *module_source,
                        const char *timings_json, mk_kernel_backend backend,
                        mk_llm_decisions_fn done, void *data, mk_llm_req **handle,
                        mk_errmsg *err);

typedef struct mk_llm_group {
  char *name;
  int *nodes; int nnodes; /* ascending */
} mk_llm_group;

typedef struct mk_llm_groups {
  mk_llm_group *items; int n;
  long tokens_in, tokens_out;
} mk_llm_groups;

void mk_llm_groups_free(mk_llm_groups *g);

typedef void (*mk_llm_groups_fn)(void *data, int status, mk_llm_groups *groups,
                                 const mk_errmsg *err);

/* Decomposer: proposes node groups (each becomes a subkernel through
 * mk_subkernel_from_nodes, which checks convexity). The reply is validated:
 * every node exactly once, groups non-empty, ordered by first node.
 * `initial` (may be NULL) is the rule-based partition shown as a start;
 * `backend` as for mk_llm_decide_async. `g` must stay valid until the
 * callback has run. */
int mk_llm_decompose_async(mk_llm *llm, const mk_graph *g, const char *module_source,
                           const mk_partition *initial, mk_kernel_backend backend,
                           mk_llm_groups_fn done, void *data, mk_llm_req **handle,
                           mk_errmsg *err);

/* Validation used by the agents (exposed for tests and other callers). */
int mk_llm_decisions_from_json(const cJSON *root, mk_llm_decision_kind kind, const mk_graph *g,
                               const mk_partition *p, mk_llm_decisions *out, mk_errmsg *err);
int mk_llm_groups_from_json(const cJSON *root, const mk_graph *g, mk_llm_groups *out,
                            mk_errmsg *err);

#endif
