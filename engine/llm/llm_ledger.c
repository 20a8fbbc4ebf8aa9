/* llm_ledger.c — token and money accounting: one record per chat call,
 * aggregated on demand per agent, subkernel and model; budgets. */
#include "llm_internal.h"

#include <stdlib.h>
#include <string.h>

void mk_llm_ledger_init(mk_llm_ledger *l, long budget_tokens, double budget_usd) {
  memset(l, 0, sizeof *l);
  l->budget_tokens = budget_tokens;
  l->budget_usd = budget_usd;
}

static void record_free(mk_llm_call_record *r) {
  free(r->agent);
  free(r->subkernel);
  free(r->model);
  free(r->outcome);
  free(r->detail);
}

void mk_llm_ledger_free(mk_llm_ledger *l) {
  for (int i = 0; i < l->ncalls; i++) record_free(&l->calls[i]);
  free(l->calls);
  memset(l, 0, sizeof *l);
}

static void usage_add(mk_llm_usage *a, const mk_llm_usage *b) {
  a->calls += b->calls;
  a->failures += b->failures;
  a->tokens_in += b->tokens_in;
  a->tokens_out += b->tokens_out;
  a->estimated += b->estimated;
  a->usd += b->usd;
}

int mk_llm_ledger_add(mk_llm_ledger *l, const mk_llm_call_record *r) {
  if (l->ncalls == l->cap) {
    int cap = l->cap ? l->cap * 2 : 16;
    mk_llm_call_record *n = realloc(l->calls, (size_t)cap * sizeof *n);
    if (!n) return MK_ENOMEM;
    l->calls = n;
    l->cap = cap;
  }
  mk_llm_call_record c = *r;
  c.agent = mk_strdup(r->agent ? r->agent : "chat");
  c.subkernel = mk_strdup(r->subkernel);
  c.model = mk_strdup(r->model ? r->model : "");
  c.outcome = mk_strdup(r->outcome ? r->outcome : (r->status ? "error" : "ok"));
  c.detail = mk_strdup(r->detail);
  if (!c.agent || !c.model || !c.outcome || (r->subkernel && !c.subkernel) ||
      (r->detail && !c.detail)) {
    record_free(&c);
    return MK_ENOMEM;
  }
  c.u.calls = 1;
  c.u.failures = strcmp(c.outcome, "ok") != 0;
  l->calls[l->ncalls] = c;
  usage_add(&l->total, &c.u);
  return l->ncalls++;
}

int mk_llm_ledger_set_outcome(mk_llm_ledger *l, int index, const char *outcome,
                              const char *detail) {
  if (index < 0 || index >= l->ncalls || !outcome) return MK_EINVAL;
  mk_llm_call_record *c = &l->calls[index];
  char *o = mk_strdup(outcome), *d = mk_strdup(detail);
  if (!o || (detail && !d)) {
    free(o);
    free(d);
    return MK_ENOMEM;
  }
  free(c->outcome);
  free(c->detail);
  c->outcome = o;
  c->detail = d;
  long failed = strcmp(o, "ok") != 0;
  l->total.failures += failed - c->u.failures;
  c->u.failures = failed;
  return 0;
}

bool mk_llm_ledger_exhausted(const mk_llm_ledger *l) {
  if (l->budget_tokens > 0 && l->total.tokens_in + l->total.tokens_out >= l->budget_tokens)
    return true;
  if (l->budget_usd > 0 && l->total.usd >= l->budget_usd) return true;
  return false;
}

static bool eq_or_any(const char *want, const char *have) {
  return want == NULL || (have && strcmp(want, have) == 0);
}

mk_llm_usage mk_llm_ledger_sum(const mk_llm_ledger *l, const char *agent, const char *subkernel) {
  mk_llm_usage u = {0};
  for (int i = 0; i < l->ncalls; i++)
    if (eq_or_any(agent, l->calls[i].agent) && eq_or_any(subkernel, l->calls[i].subkernel))
      usage_add(&u, &l->calls[i].u);
  return u;
}

static cJSON *usage_json(const mk_llm_usage *u) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddNumberToObject(o, "calls", (double)u->calls);
  cJSON_AddNumberToObject(o, "failures", (double)u->failures);
  cJSON_AddNumberToObject(o, "tokens_in", (double)u->tokens_in);
  cJSON_AddNumberToObject(o, "tokens_out", (double)u->tokens_out);
  cJSON_AddNumberToObject(o, "tokens", (double)(u->tokens_in + u->tokens_out));
  cJSON_AddNumberToObject(o, "estimated_calls", (double)u->estimated);
  cJSON_AddNumberToObject(o, "usd", u->usd);
  return o;
}

/* Groups calls by one key (agent, subkernel or model) into {key: usage}. */
static cJSON *group_json(const mk_llm_ledger *l, int which) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  for (int i = 0; i < l->ncalls; i++) {
    const mk_llm_call_record *c = &l->calls[i];
    const char *key = which == 0 ? c->agent : which == 1 ? c->subkernel : c->model;
    if (!key) key = "(none)";
    if (cJSON_GetObjectItemCaseSensitive(o, key)) continue;
    mk_llm_usage u = {0};
    for (int j = i; j < l->ncalls; j++) {
      const mk_llm_call_record *d = &l->calls[j];
      const char *k2 = which == 0 ? d->agent : which == 1 ? d->subkernel : d->model;
      if (strcmp(k2 ? k2 : "(none)", key) == 0) usage_add(&u, &d->u);
    }
    cJSON *uj = usage_json(&u);
    if (uj) cJSON_AddItemToObject(o, key, uj);
  }
  return o;
}

cJSON *mk_llm_ledger_json(const mk_llm_ledger *l, bool with_calls) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddItemToObject(o, "total", usage_json(&l->total));
  cJSON_AddItemToObject(o, "by_agent", group_json(l, 0));
  cJSON_AddItemToObject(o, "by_subkernel", group_json(l, 1));
  cJSON_AddItemToObject(o, "by_model", group_json(l, 2));
  cJSON *b = cJSON_AddObjectToObject(o, "budget");
  if (b) {
    long spent = l->total.tokens_in + l->total.tokens_out;
    if (l->budget_tokens > 0) {
      cJSON_AddNumberToObject(b, "tokens", (double)l->budget_tokens);
      cJSON_AddNumberToObject(b, "tokens_left",
                              (double)(spent < l->budget_tokens ? l->budget_tokens - spent : 0));
    } else {
      cJSON_AddNullToObject(b, "tokens");
    }
    if (l->budget_usd > 0) {
      cJSON_AddNumberToObject(b, "usd", l->budget_usd);
      double left = l->budget_usd - l->total.usd;
      cJSON_AddNumberToObject(b, "usd_left", left > 0 ? left : 0);
    } else {
      cJSON_AddNullToObject(b, "usd");
    }
    cJSON_AddBoolToObject(b, "exhausted", mk_llm_ledger_exhausted(l));
  }
  if (with_calls) {
    cJSON *a = cJSON_AddArrayToObject(o, "calls");
    for (int i = 0; a && i < l->ncalls; i++) {
      const mk_llm_call_record *c = &l->calls[i];
      cJSON *e = cJSON_CreateObject();
      if (!e) break;
      cJSON_AddStringToObject(e, "agent", c->agent);
      if (c->subkernel) cJSON_AddStringToObject(e, "subkernel", c->subkernel);
      else cJSON_AddNullToObject(e, "subkernel");
      cJSON_AddStringToObject(e, "model", c->model);
      cJSON_AddStringToObject(e, "outcome", c->outcome);
      if (c->detail) cJSON_AddStringToObject(e, "detail", c->detail);
      if (c->status) cJSON_AddStringToObject(e, "error", mk_strerror(c->status));
      cJSON_AddNumberToObject(e, "http_status", c->http_status);
      cJSON_AddNumberToObject(e, "attempts", c->attempts);
      cJSON_AddNumberToObject(e, "elapsed_s", c->elapsed_s);
      cJSON_AddNumberToObject(e, "tokens_in", (double)c->u.tokens_in);
      cJSON_AddNumberToObject(e, "tokens_out", (double)c->u.tokens_out);
      cJSON_AddBoolToObject(e, "estimated", c->u.estimated > 0);
      cJSON_AddNumberToObject(e, "usd", c->u.usd);
      cJSON_AddItemToArray(a, e);
    }
  }
  return o;
}

double mk_llm_cost_(const mk_llm_config *c, const char *model, long tin, long tout) {
  const mk_llm_price *p = mk_llm_config_price(c, model);
  if (!p) p = mk_llm_config_price(c, c->model);
  if (!p) return 0;
  return ((double)tin * p->input_per_mtok + (double)tout * p->output_per_mtok) / 1e6;
}
