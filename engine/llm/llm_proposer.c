/* llm_proposer.c — the LLM agents behind engine/search's mk_proposer
 * interface (`--proposer llm`): adapts mk_llm_propose_async's callback to
 * mk_propose_cb and gives each agent what mk_propose_request lacks: the
 * subkernel's PyTorch reference, and for the Optimiser the fastest verified
 * variants so far.
 *
 * The search only hands a proposer one parent at a time, so the adapter
 * keeps a bounded memory of the candidates it proposed (keyed by the
 * subkernel's node set, which survives renames across partitions) and
 * learns their verdicts from the caller (mk_llm_proposer_observe) and from
 * OPTIMISE requests, whose parent is verified by definition. */
#include "llm_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEEN_MAX 512
#define BEST_DEFAULT 3

typedef struct seen_entry {
  char *key;       /* the subkernel's node ids, "3,4,5" */
  char *name;
  char *source;
  int state;       /* 1 verified, -1 failed, 0 not known yet */
  double rank_ms;  /* INFINITY when untimed */
  char *timing;    /* prompt line for verified entries */
  unsigned long seq;
} seen_entry;

struct mk_llm_seen {
  seen_entry *items;
  int n, cap;
  unsigned long seq;
};

static void entry_free(seen_entry *e) {
  free(e->key);
  free(e->name);
  free(e->source);
  free(e->timing);
}

void mk_llm_proposer_reset(mk_llm_proposer_ctx *ctx) {
  if (!ctx || !ctx->seen) return;
  for (int i = 0; i < ctx->seen->n; i++) entry_free(&ctx->seen->items[i]);
  free(ctx->seen->items);
  free(ctx->seen);
  ctx->seen = NULL;
}

static char *subkernel_key(const mk_subkernel *sk) {
  mk_buf b;
  mk_buf_init(&b, 1 << 20);
  for (int i = 0; i < sk->nnodes; i++) mk_buf_printf(&b, "%s%d", i ? "," : "", sk->nodes[i]);
  char *s = b.err ? NULL : mk_buf_steal(&b, NULL);
  mk_buf_free(&b);
  return s ? s : mk_strdup("");
}

static seen_entry *find_source(mk_llm_seen *m, const char *key, const char *source) {
  for (int i = m ? m->n - 1 : -1; i >= 0; i--) {
    seen_entry *e = &m->items[i];
    if (e->source && source && strcmp(e->source, source) == 0 && (!key || strcmp(e->key, key) == 0))
      return e;
  }
  return NULL;
}

/* Remembers a candidate (or finds it); the oldest entry goes when full. */
static seen_entry *remember(mk_llm_proposer_ctx *ctx, const char *key, const char *name,
                            const char *source) {
  if (!source) return NULL;
  if (!ctx->seen && !(ctx->seen = calloc(1, sizeof *ctx->seen))) return NULL;
  mk_llm_seen *m = ctx->seen;
  seen_entry *e = find_source(m, key, source);
  if (e) return e;
  if (m->n == SEEN_MAX) {
    entry_free(&m->items[0]);
    memmove(m->items, m->items + 1, sizeof *m->items * (size_t)(m->n - 1));
    m->n--;
  }
  if (m->n == m->cap) {
    int cap = m->cap ? m->cap * 2 : 16;
    seen_entry *p = realloc(m->items, sizeof *p * (size_t)cap);
    if (!p) return NULL;
    m->items = p;
    m->cap = cap;
  }
  e = &m->items[m->n];
  *e = (seen_entry){.key = mk_strdup(key), .name = mk_strdup(name ? name : "variant"),
                    .source = mk_strdup(source), .rank_ms = INFINITY, .seq = ++m->seq};
  if (!e->key || !e->name || !e->source) {
    entry_free(e);
    return NULL;
  }
  m->n++;
  return e;
}

static void set_verdict(seen_entry *e, const mk_propose_verdict *r) {
  e->state = r->verified ? 1 : -1;
  e->rank_ms = r->verified && r->time_ms >= 0 ? r->time_ms : INFINITY;
  free(e->timing);
  e->timing = NULL;
  if (e->state > 0) {
    mk_buf b;
    mk_buf_init(&b, 512);
    mk_llm_timing_line(r, &b);
    e->timing = mk_buf_steal(&b, NULL);
    mk_buf_free(&b);
  }
}

void mk_llm_proposer_observe(mk_llm_proposer_ctx *ctx, const mk_candidate *c,
                             const mk_propose_verdict *r) {
  if (!ctx || !c || !r || !c->source) return;
  /* The same code may have been proposed for two subkernels: the verdict
   * of one says nothing about the other, but both keys hold the same text
   * only when the node sets match, so every match is updated. */
  for (int i = 0; ctx->seen && i < ctx->seen->n; i++) {
    seen_entry *e = &ctx->seen->items[i];
    if (strcmp(e->source, c->source) == 0) set_verdict(e, r);
  }
}

/* What an OPTIMISE request's report says about its (verified) parent. */
static void result_from_report(const char *report, mk_propose_verdict *r) {
  *r = (mk_propose_verdict){.verified = true, .time_ms = -1, .ref_eager_ms = -1,
                            .ref_compile_ms = -1};
  cJSON *j = report ? cJSON_Parse(report) : NULL;
  const cJSON *v;
  if ((v = cJSON_GetObjectItemCaseSensitive(j, "trials")) && cJSON_IsNumber(v)) r->trials = v->valueint;
  if ((v = cJSON_GetObjectItemCaseSensitive(j, "trials_passed")) && cJSON_IsNumber(v))
    r->trials_passed = v->valueint;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "timing");
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "available"))) {
    if ((v = cJSON_GetObjectItemCaseSensitive(t, "median_ms")) && cJSON_IsNumber(v)) r->time_ms = v->valuedouble;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(t, "reference_eager");
    if ((v = cJSON_GetObjectItemCaseSensitive(e, "median_ms")) && cJSON_IsNumber(v))
      r->ref_eager_ms = v->valuedouble;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "reference_compile");
    if ((v = cJSON_GetObjectItemCaseSensitive(c, "median_ms")) && cJSON_IsNumber(v))
      r->ref_compile_ms = v->valuedouble;
  }
  cJSON_Delete(j);
}

static int by_rank(const void *a, const void *b) {
  const seen_entry *x = *(seen_entry *const *)a, *y = *(seen_entry *const *)b;
  if (x->rank_ms != y->rank_ms) return x->rank_ms < y->rank_ms ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq; /* untimed: proposal order, as the search ranks */
}

static const char *source_backend(const char *source) {
  mk_candidate c = {.source = (char *)source};
  return mk_candidate_backend(&c);
}

/* The fastest verified variants of `key` other than `parent`, in the
 * parent's language: the Optimiser writes in that language (--backend auto
 * lets Triton and CUDA C++ variants of one subkernel meet), and code it
 * cannot reuse would only invite an answer in the other. */
static int collect_best(mk_llm_proposer_ctx *ctx, const char *key, const char *parent,
                        seen_entry **out, int max) {
  int n = 0;
  const char *lang = parent ? source_backend(parent) : NULL;
  if (lang && strcmp(lang, "pytorch") == 0) lang = NULL; /* such a parent is rewritten as NEW */
  for (int i = 0; ctx->seen && i < ctx->seen->n && n < SEEN_MAX; i++) {
    seen_entry *e = &ctx->seen->items[i];
    if (e->state > 0 && strcmp(e->key, key) == 0 && (!parent || strcmp(e->source, parent) != 0) &&
        (!lang || strcmp(source_backend(e->source), lang) == 0))
      out[n++] = e;
  }
  qsort(out, (size_t)n, sizeof *out, by_rank);
  return n < max ? n : max;
}

typedef struct adapter_call {
  mk_llm_proposer_ctx *ctx;
  char *key;
  mk_propose_cb cb;
  void *data;
} adapter_call;

static void adapter_done(void *data, int status, mk_candidate_list *cands, const mk_errmsg *err) {
  adapter_call *a = data;
  for (int i = 0; status == 0 && cands && i < cands->n; i++)
    remember(a->ctx, a->key, cands->items[i].name, cands->items[i].source);
  /* The search frees the list's contents; the list struct stays ours. */
  a->cb(a->data, status, cands, err ? err->text : NULL);
  free(a->key);
  free(a);
}

static int adapter_propose(void *self, const mk_propose_request *req, mk_propose_cb cb,
                           void *data) {
  mk_llm_proposer_ctx *ctx = self;
  if (!req || !req->subkernel || !req->graph) return MK_EINVAL;
  if (!ctx->llm) {
    cb(data, MK_EINVAL, NULL, "the LLM client is not open (its configuration is being changed)");
    return 0;
  }
  adapter_call *a = calloc(1, sizeof *a);
  if (!a) return MK_ENOMEM;
  *a = (adapter_call){ctx, subkernel_key(req->subkernel), cb, data};
  if (!a->key) {
    free(a);
    return MK_ENOMEM;
  }
  if (req->mode == MK_PROPOSE_OPTIMISE && req->parent && req->parent->source) {
    seen_entry *p = remember(ctx, a->key, req->parent->name, req->parent->source);
    if (p && p->state <= 0) {
      mk_propose_verdict r;
      result_from_report(req->report, &r);
      set_verdict(p, &r);
    }
  }
  mk_candidate ref = {0};
  if (mk_reference_candidate(req->graph, req->subkernel, &ref, NULL)) {
    mk_llm_cand_free_(&ref);
    ref = (mk_candidate){0};
  }
  int max = ctx->max_best > 0 ? ctx->max_best : BEST_DEFAULT;
  seen_entry *best[SEEN_MAX];
  const mk_candidate *best_c[16];
  mk_candidate best_v[16];
  const char *best_t[16];
  int nbest = 0;
  if (req->mode == MK_PROPOSE_OPTIMISE) {
    nbest = collect_best(ctx, a->key, req->parent ? req->parent->source : NULL, best, max > 16 ? 16 : max);
    for (int i = 0; i < nbest; i++) {
      best_v[i] = (mk_candidate){.name = best[i]->name, .source = best[i]->source};
      best_c[i] = &best_v[i];
      best_t[i] = best[i]->timing;
    }
  }
  mk_llm_propose_extra extra = {.module_source = ctx->module_source,
                                .reference_code = ref.source,
                                .best = best_c,
                                .nbest = nbest,
                                .best_timings = best_t,
                                .progress = ctx->progress,
                                .progress_data = ctx->progress_data};
  mk_errmsg err;
  err.text[0] = '\0';
  int rc = mk_llm_propose_async(ctx->llm, req, &extra, adapter_done, a, NULL, &err);
  mk_llm_cand_free_(&ref);
  if (rc) {
    /* Answered at once with the reason (budget spent, a broken prompt
     * template): the search logs it instead of a bare refusal. */
    free(a->key);
    free(a);
    if (ctx->last_error) mk_strlcpy(ctx->last_error, err.text, MK_ERRMSG_MAX);
    cb(data, rc, NULL, err.text[0] ? err.text : mk_strerror(rc));
  }
  return 0;
}

mk_proposer mk_llm_proposer(mk_llm_proposer_ctx *ctx) {
  return (mk_proposer){.self = ctx, .name = "llm", .propose = adapter_propose};
}
