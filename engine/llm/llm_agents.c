/* llm_agents.c — the agents: KernelWriter / Repairer / Optimiser (an
 * asynchronous proposer yielding mk_candidate values), Splitter / Fuser
 * (split and merge decisions) and Decomposer (node groups). Each renders
 * its prompt template from prompts/ with named variables built here from
 * the IR, sends one chat call, and validates the reply; an unusable reply
 * is marked in the ledger (its tokens stay counted) and reported as
 * MK_EPARSE, never a crash. */
#include "mk_num.h"
#include "llm_internal.h"
#include "mk_loop.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define VAR_CAP ((size_t)8 * 1024 * 1024)

/* --------------------------------------------------------- IR to text -- */

static void put_shape(mk_buf *b, const mk_value *v) {
  mk_buf_putc(b, '[');
  for (int i = 0; i < v->rank; i++) mk_buf_printf(b, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
  mk_buf_putc(b, ']');
}

/* How a value is called in prompts and in run()'s signature. */
static void put_value_name(mk_buf *b, const mk_graph *g, int vid) {
  if (vid < 0 || vid >= g->nvalues) {
    mk_buf_printf(b, "v%d", vid);
    return;
  }
  const mk_value *v = &g->values[vid];
  switch (v->kind) {
  case MK_VALUE_INPUT: mk_buf_printf(b, "x%d", v->index); return;
  case MK_VALUE_PARAM:
  case MK_VALUE_BUFFER:
  case MK_VALUE_ATTR:
    if (v->name && v->name[0]) {
      if (isdigit((unsigned char)v->name[0])) mk_buf_putc(b, 'p');
      for (const char *p = v->name; *p; p++)
        mk_buf_putc(b, isalnum((unsigned char)*p) ? *p : '_');
      return;
    }
    break;
  case MK_VALUE_CONST: mk_buf_printf(b, "c%d", vid); return;
  default: break;
  }
  mk_buf_printf(b, "v%d", vid);
}

static const char *kind_text(mk_value_kind k) {
  switch (k) {
  case MK_VALUE_INPUT: return "forward input";
  case MK_VALUE_PARAM: return "parameter";
  case MK_VALUE_BUFFER: return "buffer";
  case MK_VALUE_ATTR: return "tensor attribute";
  case MK_VALUE_CONST: return "constant tensor";
  default: return "intermediate";
  }
}

static void put_value_line(mk_buf *b, const mk_graph *g, int vid) {
  mk_buf_puts(b, "- ");
  put_value_name(b, g, vid);
  if (vid < 0 || vid >= g->nvalues) {
    mk_buf_puts(b, "\n");
    return;
  }
  const mk_value *v = &g->values[vid];
  mk_buf_printf(b, ": %s %s ", kind_text(v->kind), mk_dtype_name(v->dtype));
  put_shape(b, v);
  if (v->name) mk_buf_printf(b, " (%s)", v->name);
  if (v->kind == MK_VALUE_NODE && v->producer >= 0) mk_buf_printf(b, ", made by node %d", v->producer);
  mk_buf_putc(b, '\n');
}

static void put_number(mk_buf *b, double d) {
  if (d == (double)(long long)d && d > -1e15 && d < 1e15) mk_buf_printf(b, "%lld", (long long)d);
  else mk_buf_printf(b, "%.17g", d);
}

/* An argument in the protocol's encoding (docs/protocol.md) as Python. */
static void put_arg(mk_buf *b, const mk_graph *g, const cJSON *a, int depth) {
  if (depth > 16) {
    mk_buf_puts(b, "...");
    return;
  }
  if (!a || cJSON_IsNull(a)) mk_buf_puts(b, "None");
  else if (cJSON_IsBool(a)) mk_buf_puts(b, cJSON_IsTrue(a) ? "True" : "False");
  else if (cJSON_IsNumber(a)) put_number(b, a->valuedouble);
  else if (cJSON_IsString(a)) mk_buf_py_str(b, a->valuestring);
  else if (cJSON_IsArray(a)) {
    mk_buf_putc(b, '[');
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, a) {
      if (i++) mk_buf_puts(b, ", ");
      put_arg(b, g, it, depth + 1);
    }
    mk_buf_putc(b, ']');
  } else if (cJSON_IsObject(a) && a->child) {
    const cJSON *v = a->child;
    const char *k = v->string;
    if (strcmp(k, "t") == 0 && cJSON_IsNumber(v)) put_value_name(b, g, mk_num_int(v->valuedouble, -1));
    else if (strcmp(k, "float") == 0) {
      if (cJSON_IsString(v)) mk_buf_printf(b, "float(\"%s\")", v->valuestring);
      else if (cJSON_IsNumber(v)) {
        put_number(b, v->valuedouble);
        if (mk_num_is_integer(v->valuedouble)) mk_buf_puts(b, ".0");
      }
    } else if (strcmp(k, "tuple") == 0 || strcmp(k, "list") == 0 || strcmp(k, "size") == 0) {
      bool tup = k[0] == 't';
      if (k[0] == 's') mk_buf_puts(b, "torch.Size(");
      mk_buf_putc(b, tup ? '(' : '[');
      const cJSON *it;
      int i = 0;
      cJSON_ArrayForEach(it, v) {
        if (i++) mk_buf_puts(b, ", ");
        put_arg(b, g, it, depth + 1);
      }
      if (tup && i == 1) mk_buf_putc(b, ',');
      mk_buf_putc(b, tup ? ')' : ']');
      if (k[0] == 's') mk_buf_putc(b, ')');
    } else if (strcmp(k, "slice") == 0) {
      mk_buf_puts(b, "slice(");
      const cJSON *it;
      int i = 0;
      cJSON_ArrayForEach(it, v) {
        if (i++) mk_buf_puts(b, ", ");
        put_arg(b, g, it, depth + 1);
      }
      mk_buf_putc(b, ')');
    } else if (strcmp(k, "ellipsis") == 0) mk_buf_puts(b, "...");
    else if ((strcmp(k, "dtype") == 0 || strcmp(k, "memory_format") == 0 || strcmp(k, "layout") == 0) &&
             cJSON_IsString(v))
      mk_buf_printf(b, "torch.%s", v->valuestring);
    else if (strcmp(k, "device") == 0 && cJSON_IsString(v))
      mk_buf_printf(b, "torch.device(\"%s\")", v->valuestring);
    else if (strcmp(k, "dict") == 0) {
      mk_buf_putc(b, '{');
      const cJSON *it;
      int i = 0;
      cJSON_ArrayForEach(it, v) {
        if (i++) mk_buf_puts(b, ", ");
        put_arg(b, g, cJSON_GetArrayItem(it, 0), depth + 1);
        mk_buf_puts(b, ": ");
        put_arg(b, g, cJSON_GetArrayItem(it, 1), depth + 1);
      }
      mk_buf_putc(b, '}');
    } else if (strcmp(k, "opaque") == 0 && cJSON_IsString(v))
      mk_buf_printf(b, "<%s>", v->valuestring);
    else mk_buf_puts(b, "<?>");
  } else {
    mk_buf_puts(b, "<?>");
  }
}

/* "v4 = torch.nn.functional.conv2d(x0, w, b, (1, 1))  # line 14" */
static void put_node(mk_buf *b, const mk_graph *g, const mk_node *n) {
  mk_buf_printf(b, "[node %d] ", n->id);
  for (int i = 0; i < n->noutputs; i++) {
    if (i) mk_buf_puts(b, ", ");
    put_value_name(b, g, n->outputs[i]);
  }
  if (n->noutputs) mk_buf_puts(b, " = ");
  mk_buf_printf(b, "%s(", n->op ? n->op : "?");
  int i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, n->args) {
    if (i++) mk_buf_puts(b, ", ");
    put_arg(b, g, it, 0);
  }
  cJSON_ArrayForEach(it, n->kwargs) {
    if (i++) mk_buf_puts(b, ", ");
    mk_buf_printf(b, "%s=", it->string);
    put_arg(b, g, it, 0);
  }
  mk_buf_putc(b, ')');
  if (n->noutputs == 1 && n->outputs[0] >= 0 && n->outputs[0] < g->nvalues) {
    mk_buf_puts(b, "  # -> ");
    mk_buf_puts(b, mk_dtype_name(g->values[n->outputs[0]].dtype));
    mk_buf_putc(b, ' ');
    put_shape(b, &g->values[n->outputs[0]]);
  }
  if (n->span.line > 0) mk_buf_printf(b, ", line %d", n->span.line);
  if (n->nmutates) mk_buf_puts(b, ", modifies its input in place");
  mk_buf_putc(b, '\n');
}

/* Lines [first, last] of the module, numbered. */
static void put_source_lines(mk_buf *b, const char *src, int first, int last) {
  if (!src || first <= 0) return;
  int line = 1;
  for (const char *p = src; *p && line <= last;) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    if (line >= first) mk_buf_printf(b, "%4d | %.*s\n", line, (int)len, p);
    if (!eol) break;
    p = eol + 1;
    line++;
  }
}

static void put_partition(mk_buf *b, const mk_graph *g, const mk_partition *p) {
  for (int i = 0; i < p->nsubkernels; i++) {
    const mk_subkernel *s = &p->subkernels[i];
    mk_buf_printf(b, "[subkernel %d] %s: nodes", i, s->name ? s->name : "?");
    for (int k = 0; k < s->nnodes; k++) mk_buf_printf(b, " %d", s->nodes[k]);
    mk_buf_puts(b, " (");
    for (int k = 0; k < s->nnodes; k++) {
      int nid = s->nodes[k];
      const mk_node *n = nid >= 0 && nid < g->nnodes ? &g->nodes[nid] : NULL;
      mk_buf_printf(b, "%s%s", k ? ", " : "", n && n->short_name ? n->short_name : n && n->op ? n->op : "?");
    }
    mk_buf_printf(b, "), lines %d-%d\n", s->first_line, s->last_line);
  }
}

/* ---------------------------------------------------------- variables -- */

typedef struct vars {
  mk_llm_var v[32];
  mk_buf store[32];
  int n;
} vars;

static mk_buf *var_buf(vars *vs, const char *name) {
  if (vs->n >= 32) return NULL;
  mk_buf_init(&vs->store[vs->n], VAR_CAP);
  vs->v[vs->n].name = name;
  vs->v[vs->n].value = NULL;
  return &vs->store[vs->n++];
}

static void var_str(vars *vs, const char *name, const char *value) {
  mk_buf *b = var_buf(vs, name);
  if (b && value) mk_buf_puts(b, value);
}

static int vars_finish(vars *vs, mk_errmsg *err) {
  for (int i = 0; i < vs->n; i++) {
    if (vs->store[i].err) return mk_errf(err, MK_ERANGE, "prompt variable %s is too large", vs->v[i].name);
    vs->v[i].value = mk_buf_cstr(&vs->store[i]);
  }
  return 0;
}

static void vars_free(vars *vs) {
  for (int i = 0; i < vs->n; i++) mk_buf_free(&vs->store[i]);
  vs->n = 0;
}

static void subkernel_vars(vars *vs, const mk_graph *g, const mk_subkernel *sk, const char *module_source) {
  var_str(vs, "subkernel_name", sk->name ? sk->name : "subkernel");
  mk_buf *b = var_buf(vs, "signature");
  mk_buf_puts(b, "run(");
  for (int i = 0; i < sk->ninputs; i++) {
    if (i) mk_buf_puts(b, ", ");
    put_value_name(b, g, sk->inputs[i]);
  }
  mk_buf_putc(b, ')');
  b = var_buf(vs, "inputs");
  for (int i = 0; i < sk->ninputs; i++) put_value_line(b, g, sk->inputs[i]);
  b = var_buf(vs, "outputs");
  for (int i = 0; i < sk->noutputs; i++) put_value_line(b, g, sk->outputs[i]);
  var_str(vs, "returns", sk->noutputs == 1 ? "one tensor" : "a tuple of tensors, in the order listed");
  b = var_buf(vs, "ops");
  bool mutates = false;
  for (int i = 0; i < sk->nnodes; i++) {
    int nid = sk->nodes[i];
    if (nid < 0 || nid >= g->nnodes) continue;
    put_node(b, g, &g->nodes[nid]);
    mutates |= g->nodes[nid].nmutates > 0;
  }
  var_str(vs, "mutates", mutates ? "yes" : "");
  b = var_buf(vs, "source_lines");
  put_source_lines(b, module_source, sk->first_line, sk->last_line);
  var_str(vs, "module_source", module_source);
}

static void graph_vars(vars *vs, const mk_graph *g, const char *module_source) {
  mk_buf *b = var_buf(vs, "graph");
  for (int i = 0; i < g->nnodes; i++) put_node(b, g, &g->nodes[i]);
  b = var_buf(vs, "graph_inputs");
  for (int i = 0; i < g->nvalues; i++)
    if (g->values[i].kind == MK_VALUE_INPUT) put_value_line(b, g, i);
  var_str(vs, "module_source", module_source);
  char n[32];
  snprintf(n, sizeof n, "%d", g->nnodes);
  var_str(vs, "num_nodes", n);
  snprintf(n, sizeof n, "%d", g->nnodes > 0 ? g->nnodes - 1 : 0);
  var_str(vs, "last_node", n);
}

static const char *prompts_dir(const mk_llm_config *c) {
  if (c->prompts_dir) return c->prompts_dir;
  const char *e = getenv("MKEVOLVE_PROMPTS");
  return e && e[0] ? e : MK_PROMPTS_DIR;
}

/* Loads and renders an agent's prompt. */
static int render_prompt(mk_llm *llm, const char *agent, vars *vs, mk_buf *sys, mk_buf *user,
                         int *version, mk_errmsg *err) {
  mk_llm_prompt p;
  int rc = mk_llm_prompt_load(prompts_dir(mk_llm_get_config(llm)), agent, &p, err);
  if (rc) return rc;
  *version = p.version;
  rc = vars_finish(vs, err);
  if (!rc && p.system) rc = mk_llm_render(p.system, vs->v, vs->n, sys, err);
  if (!rc) rc = mk_llm_render(p.user, vs->v, vs->n, user, err);
  if (rc && err) {
    /* Name the template, so a user tuning prompts knows where to look. */
    char tmp[MK_ERRMSG_MAX];
    mk_strlcpy(tmp, err->text, sizeof tmp);
    mk_errf(err, rc, "prompts/%s.txt: %s", agent, tmp);
  }
  mk_llm_prompt_free(&p);
  return rc;
}

/* The language as prompts name it: "Triton", "CUDA C++", or both. */
static const char *language_name(mk_kernel_backend b) {
  switch (b) {
  case MK_KBACKEND_CUDA: return "CUDA C++";
  case MK_KBACKEND_AUTO: return "Triton or CUDA C++";
  case MK_KBACKEND_TRITON: break;
  }
  return "Triton";
}

/* The rules of a module in `lang` (prompts/<lang>_contract.txt, rendered
 * with the agent's variables) as variable `contract`, with `language` and
 * `cuda` (non-empty when CUDA C++ is asked for) beside it: one file per
 * language holds its contract, whichever agent asks. */
static int contract_vars(mk_llm *llm, mk_kernel_backend lang, vars *vs, mk_errmsg *err) {
  const char *file = lang == MK_KBACKEND_CUDA ? "cuda_contract" : "triton_contract";
  var_str(vs, "language", language_name(lang));
  var_str(vs, "cuda", lang == MK_KBACKEND_CUDA ? "yes" : "");
  mk_llm_prompt p;
  int rc = mk_llm_prompt_load(prompts_dir(mk_llm_get_config(llm)), file, &p, err);
  if (rc) return rc;
  mk_buf *b = var_buf(vs, "contract");
  rc = b ? vars_finish(vs, err) : mk_errf(err, MK_ERANGE, "too many prompt variables");
  /* `contract` itself is still empty here: a fragment cannot include itself. */
  if (!rc) rc = mk_llm_render(p.user, vs->v, vs->n, b, err);
  if (rc && err) {
    char tmp[MK_ERRMSG_MAX];
    mk_strlcpy(tmp, err->text, sizeof tmp);
    mk_errf(err, rc, "prompts/%s.txt: %s", file, tmp);
  }
  mk_llm_prompt_free(&p);
  return rc;
}

/* ------------------------------------------------------------- common -- */

typedef enum { JOB_PROPOSE, JOB_DECIDE, JOB_DECOMPOSE } job_kind;

typedef struct propose_join propose_join;

typedef struct job {
  job_kind kind;
  mk_llm *llm;
  char agent[32];
  int version;
  int max;
  char *default_name;
  mk_kernel_backend lang;  /* propose: the language asked for */
  propose_join *join;      /* propose: where the answer goes */
  int slot;                /* its index there */
  /* decide / decompose: validation needs the graph and partition; they
   * must outlive the request (documented in mk_llm.h). */
  const mk_graph *g;
  const mk_partition *p;
  mk_llm_decision_kind dkind;
  mk_llm_decisions_fn decide_cb;
  mk_llm_groups_fn groups_cb;
  void *data;
} job;

static void mark_unusable(mk_llm *llm, int idx, const char *why) {
  if (idx >= 0) mk_llm_ledger_set_outcome(mk_llm_get_ledger(llm), idx, "unusable", why);
}

/* The calls of one proposal (one per language asked for) and their
 * answers, until the last has come. */
struct propose_join {
  int ncalls, pending;
  int max;
  mk_kernel_backend lang[2];
  int status[2];
  mk_errmsg err[2];
  mk_candidate_list got[2];
  mk_llm_propose_fn done;
  void *data;
};

/* A name no candidate of `l` has: a collision across two calls gets the
 * language as suffix (then a number). */
static int unique_name(const mk_candidate_list *l, mk_candidate *c, mk_kernel_backend lang) {
  for (int k = 0; k < 100; k++) {
    bool taken = false;
    for (int i = 0; i < l->n && !taken; i++) taken = strcmp(l->items[i].name, c->name) == 0;
    if (!taken) return 0;
    mk_buf nb;
    mk_buf_init(&nb, 256);
    if (k == 0) mk_buf_printf(&nb, "%s_%s", c->name, lang == MK_KBACKEND_CUDA ? "cuda" : "triton");
    else mk_buf_printf(&nb, "%s_%d", c->name, k + 1);
    char *n = nb.err ? NULL : mk_buf_steal(&nb, NULL);
    mk_buf_free(&nb);
    if (n == NULL) return MK_ENOMEM;
    free(c->name);
    c->name = n;
  }
  return 0;
}

/* All calls answered: their candidates interleaved (the first language's
 * first, the second's first, ...) up to the bound, as the builtin generator
 * does for `auto`; a failure only when no call gave any. */
static void join_finish(propose_join *pj) {
  mk_candidate_list out = {0};
  int status = 0;
  for (int i = 0; !status; i++) {
    bool more = false;
    for (int k = 0; k < pj->ncalls && !status; k++) {
      if (pj->status[k] || i >= pj->got[k].n) continue;
      more = true;
      mk_candidate *c = &pj->got[k].items[i];
      if (out.n >= pj->max) continue;
      status = unique_name(&out, c, pj->lang[k]);
      if (!status) status = mk_llm_cand_push_(&out, c);
    }
    if (!more) break;
  }
  mk_errmsg err;
  err.text[0] = '\0';
  if (status) {
    mk_errf(&err, status, "out of memory");
  } else if (out.n == 0) {
    /* A hard error (network, budget) says more than an unusable reply. */
    int k = pj->ncalls > 1 && pj->status[0] == MK_EPARSE && pj->status[1] != MK_EPARSE ? 1 : 0;
    status = pj->status[k] ? pj->status[k] : MK_EPARSE;
    if (pj->ncalls > 1)
      mk_errf(&err, status, "%s: %s; %s: %s", language_name(pj->lang[0]), pj->err[0].text,
              language_name(pj->lang[1]), pj->err[1].text);
    else err = pj->err[0];
  }
  if (status) mk_llm_cand_list_free_(&out);
  pj->done(pj->data, status, &out, status ? &err : NULL);
  for (int k = 0; k < pj->ncalls; k++) mk_llm_cand_list_free_(&pj->got[k]);
  free(pj);
}

/* One call's answer: its status and candidates (taken). */
static void join_answer(propose_join *pj, int slot, int status, const mk_errmsg *err,
                        mk_candidate_list *cands) {
  pj->status[slot] = status;
  if (status && err) pj->err[slot] = *err;
  if (cands) {
    pj->got[slot] = *cands;
    memset(cands, 0, sizeof *cands);
  }
  if (--pj->pending == 0) join_finish(pj);
}

static void on_propose_reply(void *data, mk_llm_reply *rep) {
  job *j = data;
  mk_candidate_list cands = {0};
  mk_errmsg err;
  err.text[0] = '\0';
  int status = rep->status;
  if (status) {
    err = rep->err;
  } else {
    mk_buf origin;
    mk_buf_init(&origin, 1024);
    mk_buf_printf(&origin, "llm:%s", mk_llm_get_config(j->llm)->model);
    int n = mk_llm_parse_candidates(rep->text, j->lang, j->default_name, mk_buf_cstr(&origin), j->max,
                                    &cands, &err);
    mk_buf_free(&origin);
    if (n < 0) {
      status = n;
      if (rep->finish_reason && (strcmp(rep->finish_reason, "length") == 0 ||
                                 strcmp(rep->finish_reason, "max_tokens") == 0)) {
        size_t l = strlen(err.text);
        snprintf(err.text + l, sizeof err.text - l, " (the reply hit the max_tokens limit)");
      }
      mark_unusable(j->llm, rep->ledger_index, err.text);
      mk_llm_cand_list_free_(&cands);
    } else {
      /* The call's tokens are its candidates' cost, spread over them (whole
       * tokens, the remainder on the first: sums stay exact). */
      long spent = rep->tokens_in + rep->tokens_out;
      for (int i = 0; i < cands.n; i++) {
        cands.items[i].cost = (double)(spent / cands.n + (i == 0 ? spent % cands.n : 0));
        if (!cands.items[i].notes) {
          mk_buf nb;
          mk_buf_init(&nb, 256);
          mk_buf_printf(&nb, "%s (prompt v%d, %s)", j->agent, j->version, language_name(j->lang));
          cands.items[i].notes = mk_buf_steal(&nb, NULL);
          mk_buf_free(&nb);
        }
      }
    }
  }
  join_answer(j->join, j->slot, status, status ? &err : NULL, &cands);
  free(j->default_name);
  free(j);
}

static int send_job(mk_llm *llm, job *j, mk_buf *sys, mk_buf *user, const char *subkernel,
                    mk_llm_reply_fn fn, mk_llm_progress_fn progress, void *progress_data,
                    mk_llm_req **handle, mk_errmsg *err) {
  mk_llm_message m = {.role = "user", .content = mk_buf_cstr(user)};
  mk_llm_chat chat = {.system = sys->len ? mk_buf_cstr(sys) : NULL,
                      .messages = &m,
                      .nmessages = 1,
                      .agent = j->agent,
                      .subkernel = subkernel,
                      .progress = progress,
                      .progress_data = progress_data};
  return mk_llm_chat_async(llm, &chat, fn, j, handle, err);
}

/* ------------------------------------------------------------ propose -- */

static const char *agent_for(mk_propose_mode m) {
  switch (m) {
  case MK_PROPOSE_REPAIR: return "repairer";
  case MK_PROPOSE_OPTIMISE: return "optimiser";
  default: return "kernel_writer";
  }
}

/* The languages a proposal asks for, in the order their candidates
 * interleave. NEW: the request's backend (auto: both). REPAIR / OPTIMISE:
 * the parent's language, whatever the backend (a fix or a speed-up of that
 * code; a user's edit may be in the other one); a parent in neither (a
 * PyTorch module) is treated as NEW. CUDA candidates need a GPU: on a CPU
 * device CUDA is dropped, as the builtin generator declines it, and a
 * proposal left with no language is MK_EUNSUPPORTED with that reason
 * (no tokens spent on kernels nothing could run). */
static int propose_languages(const mk_propose_request *req, mk_kernel_backend *langs, int *n,
                             mk_errmsg *err) {
  mk_kernel_backend b = req->backend;
  if (req->mode != MK_PROPOSE_NEW && req->parent) {
    const char *pb = mk_candidate_backend(req->parent);
    if (strcmp(pb, "cuda") == 0) b = MK_KBACKEND_CUDA;
    else if (strcmp(pb, "triton") == 0) b = MK_KBACKEND_TRITON;
  }
  bool cpu = req->device && strncmp(req->device, "cpu", 3) == 0;
  *n = 0;
  if (b != MK_KBACKEND_CUDA) langs[(*n)++] = MK_KBACKEND_TRITON;
  if (b != MK_KBACKEND_TRITON && !cpu) langs[(*n)++] = MK_KBACKEND_CUDA;
  if (*n == 0)
    return mk_errf(err, MK_EUNSUPPORTED, "CUDA candidates need a GPU (device is %s)", req->device);
  return 0;
}

/* A prepared call: its job and rendered prompts. */
typedef struct propose_call {
  job *j;
  mk_buf sys, user;
} propose_call;

static void call_free(propose_call *c) {
  if (c->j) {
    free(c->j->default_name);
    free(c->j);
  }
  c->j = NULL;
  mk_buf_free(&c->sys);
  mk_buf_free(&c->user);
}

/* Renders the agent's prompt for one language, asking for `max` variants. */
static int prepare_call(mk_llm *llm, const mk_propose_request *req, const mk_llm_propose_extra *extra,
                        mk_kernel_backend lang, int max, propose_call *c, mk_errmsg *err) {
  const mk_graph *g = req->graph;
  const mk_subkernel *sk = req->subkernel;
  mk_buf_init(&c->sys, VAR_CAP * 2);
  mk_buf_init(&c->user, VAR_CAP * 4);
  vars vs = {0};
  subkernel_vars(&vs, g, sk, extra->module_source);
  var_str(&vs, "reference_code", extra->reference_code);
  var_str(&vs, "device", req->device ? req->device : "cpu");
  char num[32];
  snprintf(num, sizeof num, "%d", max);
  var_str(&vs, "max_candidates", num);
  var_str(&vs, "parent_name", req->parent ? req->parent->name : NULL);
  var_str(&vs, "parent_source", req->parent ? req->parent->source : NULL);
  /* The verifier's JSON as a readable digest: fewer tokens, same substance. */
  mk_buf *rb = var_buf(&vs, "report");
  if (rb) mk_llm_report_text(req->report, rb);
  mk_buf *b = var_buf(&vs, "best_variants");
  for (int i = 0; b && i < extra->nbest; i++) {
    const mk_candidate *bc = extra->best[i];
    if (!bc || !bc->source) continue;
    mk_buf_printf(b, "### %s", bc->name ? bc->name : "variant");
    if (extra->best_timings && extra->best_timings[i]) mk_buf_printf(b, " (%s)", extra->best_timings[i]);
    mk_buf_printf(b, "\n```python\n%s%s```\n\n", bc->source,
                  bc->source[0] && bc->source[strlen(bc->source) - 1] == '\n' ? "" : "\n");
  }
  job *j = c->j = calloc(1, sizeof *j);
  int rc = j ? 0 : mk_errf(err, MK_ENOMEM, "out of memory");
  if (!rc) {
    j->kind = JOB_PROPOSE;
    j->llm = llm;
    j->lang = lang;
    mk_strlcpy(j->agent, agent_for(req->mode), sizeof j->agent);
    j->max = max;
    /* Names a reply leaves out: the subkernel's, with the language for CUDA. */
    mk_buf nb;
    mk_buf_init(&nb, 512);
    mk_buf_printf(&nb, "%s%s", sk->name ? sk->name : "llm", lang == MK_KBACKEND_CUDA ? "_cuda" : "");
    j->default_name = nb.err ? NULL : mk_buf_steal(&nb, NULL);
    mk_buf_free(&nb);
    if (!j->default_name) rc = mk_errf(err, MK_ENOMEM, "out of memory");
  }
  if (!rc) rc = contract_vars(llm, lang, &vs, err);
  if (!rc) rc = render_prompt(llm, j->agent, &vs, &c->sys, &c->user, &j->version, err);
  vars_free(&vs);
  return rc;
}

int mk_llm_propose_async(mk_llm *llm, const mk_propose_request *req,
                         const mk_llm_propose_extra *extra, mk_llm_propose_fn done, void *data,
                         mk_llm_req **handle, mk_errmsg *err) {
  if (handle) *handle = NULL;
  if (!llm || !req || !req->graph || !req->subkernel || !done)
    return mk_errf(err, MK_EINVAL, "llm proposer needs a graph, a subkernel and a callback");
  if (req->mode != MK_PROPOSE_NEW && (!req->parent || !req->parent->source))
    return mk_errf(err, MK_EINVAL, "%s needs a parent candidate", agent_for(req->mode));
  mk_llm_propose_extra none = {0};
  if (!extra) extra = &none;
  int max = req->max_candidates > 0 ? req->max_candidates : 1;
  mk_kernel_backend langs[2];
  int nlangs = 0;
  int rc = propose_languages(req, langs, &nlangs, err);
  if (rc) return rc;
  /* Two languages share the bound, the first taking the odd one; one
   * variant asked for is the first language's (the builtin `auto` does the
   * same). */
  int share[2] = {nlangs > 1 ? (max + 1) / 2 : max, max / 2};
  if (nlangs > 1 && share[1] == 0) nlangs = 1;
  propose_join *pj = calloc(1, sizeof *pj);
  if (!pj) return mk_errf(err, MK_ENOMEM, "out of memory");
  *pj = (propose_join){.ncalls = nlangs, .pending = nlangs, .max = max, .done = done, .data = data};
  propose_call calls[2] = {{0}};
  /* Every prompt is rendered before anything is sent: a broken template
   * refuses the whole proposal at once. */
  for (int k = 0; k < nlangs && !rc; k++) {
    pj->lang[k] = langs[k];
    rc = prepare_call(llm, req, extra, langs[k], share[k], &calls[k], err);
  }
  for (int k = 0; k < nlangs && !rc; k++) {
    job *j = calls[k].j;
    j->join = pj;
    j->slot = k;
    mk_llm_req *h = NULL;
    mk_errmsg serr = {{0}};
    int src = send_job(llm, j, &calls[k].sys, &calls[k].user, req->subkernel->name, on_propose_reply,
                       extra->progress, extra->progress_data, &h, &serr);
    if (src == 0) {
      calls[k].j = NULL; /* the reply callback owns it now */
      if (handle && nlangs == 1) *handle = h;
    } else if (k == 0) {
      /* Nothing sent yet: refused as a whole, with the reason. */
      rc = src;
      if (err) *err = serr;
    } else {
      /* The first call is on its way: the proposal is that call's, with
       * this refusal as the second reason should that one fail too. */
      pj->pending--;
      pj->status[k] = src;
      pj->err[k] = serr;
    }
  }
  for (int k = 0; k < 2; k++) call_free(&calls[k]);
  if (rc) free(pj);
  return rc;
}

typedef struct sync_ctx {
  bool done;
  int status;
  mk_candidate_list *out;
  mk_errmsg *err;
} sync_ctx;

static void on_sync(void *data, int status, mk_candidate_list *cands, const mk_errmsg *err) {
  sync_ctx *s = data;
  s->done = true;
  s->status = status;
  if (status && err && s->err) *s->err = *err;
  for (int i = 0; i < cands->n; i++)
    if (!s->status && mk_llm_cand_push_(s->out, &cands->items[i])) s->status = MK_ENOMEM;
  mk_llm_cand_list_free_(cands);
}

int mk_llm_propose(mk_llm *llm, const mk_propose_request *req, const mk_llm_propose_extra *extra,
                   mk_candidate_list *out, mk_errmsg *err) {
  sync_ctx s = {.out = out, .err = err};
  int rc = mk_llm_propose_async(llm, req, extra, on_sync, &s, NULL, err);
  if (rc) return rc;
  uv_loop_t *loop = mk_llm_loop_(llm);
  if (mk_loop_run_until(loop, &s.done) != 0)
    return mk_errf(err, MK_EIO, "the event loop stopped before the LLM answered");
  return s.status;
}

/* ------------------------------------------------- decisions / groups -- */

void mk_llm_decisions_free(mk_llm_decisions *d) {
  if (!d) return;
  for (int i = 0; i < d->n; i++) free(d->items[i].reason);
  free(d->items);
  free(d->rejected);
  memset(d, 0, sizeof *d);
}

void mk_llm_groups_free(mk_llm_groups *g) {
  if (!g) return;
  for (int i = 0; i < g->n; i++) {
    free(g->items[i].name);
    free(g->items[i].nodes);
  }
  free(g->items);
  memset(g, 0, sizeof *g);
}

/* Subkernel named by index or by name. */
static int resolve_subkernel(const mk_partition *p, const cJSON *v) {
  if (cJSON_IsNumber(v)) {
    int i = mk_num_int(v->valuedouble, -1);
    return i >= 0 && i < p->nsubkernels ? i : -1;
  }
  if (cJSON_IsString(v))
    for (int i = 0; i < p->nsubkernels; i++)
      if (p->subkernels[i].name && strcmp(p->subkernels[i].name, v->valuestring) == 0) return i;
  return -1;
}

int mk_llm_decisions_from_json(const cJSON *root, mk_llm_decision_kind kind, const mk_graph *g,
                               const mk_partition *p, mk_llm_decisions *out, mk_errmsg *err) {
  memset(out, 0, sizeof *out);
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "decisions");
  if (!cJSON_IsArray(arr))
    return mk_errf(err, MK_EPARSE, "unusable reply: no \"decisions\" array");
  int n = cJSON_GetArraySize(arr);
  out->items = calloc((size_t)(n > 0 ? n : 1), sizeof *out->items);
  if (!out->items) return mk_errf(err, MK_ENOMEM, "out of memory");
  mk_buf why;
  mk_buf_init(&why, 16384);
  const cJSON *it;
  int idx = 0;
  const char *want = kind == MK_LLM_SPLIT ? "split" : "merge";
  cJSON_ArrayForEach(it, arr) {
    idx++;
    const cJSON *action = cJSON_GetObjectItemCaseSensitive(it, "action");
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(it, "reason");
    int s = resolve_subkernel(p, cJSON_GetObjectItemCaseSensitive(it, "subkernel"));
    const char *bad = NULL;
    int at = -1;
    if (!cJSON_IsObject(it)) bad = "not an object";
    else if (!cJSON_IsString(action) || strcmp(action->valuestring, want) != 0) bad = "wrong or missing action";
    else if (s < 0) bad = "unknown subkernel";
    else if (kind == MK_LLM_MERGE && s >= p->nsubkernels - 1) bad = "the last subkernel has no successor to merge with";
    else if (kind == MK_LLM_SPLIT) {
      const cJSON *a = cJSON_GetObjectItemCaseSensitive(it, "at_node");
      const mk_subkernel *sk = &p->subkernels[s];
      at = cJSON_IsNumber(a) ? mk_num_int(a->valuedouble, -1) : -1;
      bool member = false;
      for (int k = 1; k < sk->nnodes; k++) member |= sk->nodes[k] == at;
      if (!member) bad = "at_node is not a node of the subkernel after its first";
    }
    if (bad) {
      mk_buf_printf(&why, "decision %d: %s\n", idx, bad);
      continue;
    }
    mk_llm_decision *d = &out->items[out->n++];
    d->kind = kind;
    d->subkernel = s;
    d->at_node = kind == MK_LLM_SPLIT ? at : -1;
    d->reason = mk_strdup(cJSON_IsString(reason) ? reason->valuestring : "");
  }
  (void)g;
  if (why.len) out->rejected = mk_buf_steal(&why, NULL);
  mk_buf_free(&why);
  return 0;
}

int mk_llm_groups_from_json(const cJSON *root, const mk_graph *g, mk_llm_groups *out, mk_errmsg *err) {
  memset(out, 0, sizeof *out);
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "subkernels");
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
    return mk_errf(err, MK_EPARSE, "unusable reply: no non-empty \"subkernels\" array");
  int n = cJSON_GetArraySize(arr);
  int *owner = malloc(sizeof(int) * (size_t)(g->nnodes > 0 ? g->nnodes : 1));
  out->items = calloc((size_t)n, sizeof *out->items);
  if (!owner || !out->items) {
    free(owner);
    mk_llm_groups_free(out);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  for (int i = 0; i < g->nnodes; i++) owner[i] = -1;
  int rc = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(it, "nodes");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
    int gi = out->n;
    if (!cJSON_IsArray(nodes) || cJSON_GetArraySize(nodes) == 0) {
      rc = mk_errf(err, MK_EPARSE, "unusable reply: subkernel %d has no \"nodes\" list", gi);
      break;
    }
    mk_llm_group *grp = &out->items[out->n++];
    grp->nodes = malloc(sizeof(int) * (size_t)cJSON_GetArraySize(nodes));
    if (!grp->nodes) {
      rc = mk_errf(err, MK_ENOMEM, "out of memory");
      break;
    }
    const cJSON *nv;
    cJSON_ArrayForEach(nv, nodes) {
      int id = cJSON_IsNumber(nv) ? mk_num_int(nv->valuedouble, -1) : -1;
      if (id < 0 || id >= g->nnodes || (double)id != nv->valuedouble) {
        rc = mk_errf(err, MK_EPARSE, "unusable reply: subkernel %d names node %g, not in the graph (0..%d)",
                     gi, cJSON_IsNumber(nv) ? nv->valuedouble : -1.0, g->nnodes - 1);
        break;
      }
      if (owner[id] >= 0) {
        rc = mk_errf(err, MK_EPARSE, "unusable reply: node %d is in subkernels %d and %d", id, owner[id], gi);
        break;
      }
      owner[id] = gi;
      /* Insertion keeps the list ascending. */
      int k = grp->nnodes++;
      while (k > 0 && grp->nodes[k - 1] > id) {
        grp->nodes[k] = grp->nodes[k - 1];
        k--;
      }
      grp->nodes[k] = id;
    }
    if (rc) break;
    char fallback[32];
    snprintf(fallback, sizeof fallback, "group%d", gi);
    mk_buf nb;
    mk_buf_init(&nb, 256);
    const char *raw = cJSON_IsString(name) ? name->valuestring : fallback;
    for (const char *c = raw; *c && nb.len < 48; c++)
      mk_buf_putc(&nb, isalnum((unsigned char)*c) ? (char)tolower((unsigned char)*c) : '_');
    if (nb.len == 0) mk_buf_puts(&nb, fallback);
    for (int k = 0; k < gi; k++)
      if (strcmp(out->items[k].name, mk_buf_cstr(&nb)) == 0) {
        mk_buf_printf(&nb, "_%d", gi);
        break;
      }
    grp->name = mk_buf_steal(&nb, NULL);
    mk_buf_free(&nb);
  }
  for (int i = 0; !rc && i < g->nnodes; i++)
    if (owner[i] < 0) rc = mk_errf(err, MK_EPARSE, "unusable reply: node %d is in no subkernel", i);
  free(owner);
  if (rc) {
    mk_llm_groups_free(out);
    return rc;
  }
  /* Order groups by their first node (a dependence-respecting order for
   * convex groups of an execution-ordered graph). */
  for (int i = 1; i < out->n; i++) {
    mk_llm_group t = out->items[i];
    int k = i;
    while (k > 0 && out->items[k - 1].nodes[0] > t.nodes[0]) {
      out->items[k] = out->items[k - 1];
      k--;
    }
    out->items[k] = t;
  }
  return 0;
}

static void on_json_reply(void *data, mk_llm_reply *rep) {
  job *j = data;
  mk_errmsg err;
  err.text[0] = '\0';
  int status = rep->status;
  cJSON *root = NULL;
  if (status) err = rep->err;
  else status = mk_llm_parse_json(rep->text, &root, &err);
  if (j->kind == JOB_DECIDE) {
    mk_llm_decisions d = {0};
    if (!status) status = mk_llm_decisions_from_json(root, j->dkind, j->g, j->p, &d, &err);
    if (status == MK_EPARSE) mark_unusable(j->llm, rep->ledger_index, err.text);
    d.tokens_in = rep->tokens_in;
    d.tokens_out = rep->tokens_out;
    j->decide_cb(j->data, status, &d, status ? &err : NULL);
  } else {
    mk_llm_groups gr = {0};
    if (!status) status = mk_llm_groups_from_json(root, j->g, &gr, &err);
    if (status == MK_EPARSE) mark_unusable(j->llm, rep->ledger_index, err.text);
    gr.tokens_in = rep->tokens_in;
    gr.tokens_out = rep->tokens_out;
    j->groups_cb(j->data, status, &gr, status ? &err : NULL);
  }
  cJSON_Delete(root);
  free(j->default_name);
  free(j);
}

static int start_json_job(mk_llm *llm, job *j, vars *vs, mk_llm_req **handle, mk_errmsg *err) {
  mk_buf sys, user;
  mk_buf_init(&sys, VAR_CAP * 2);
  mk_buf_init(&user, VAR_CAP * 4);
  int rc = render_prompt(llm, j->agent, vs, &sys, &user, &j->version, err);
  if (!rc) rc = send_job(llm, j, &sys, &user, NULL, on_json_reply, NULL, NULL, handle, err);
  vars_free(vs);
  mk_buf_free(&sys);
  mk_buf_free(&user);
  if (rc) free(j);
  return rc;
}

int mk_llm_decide_async(mk_llm *llm, mk_llm_decision_kind kind, const mk_graph *g,
                        const mk_partition *p, const char *module_source,
                        const char *timings_json, mk_kernel_backend backend,
                        mk_llm_decisions_fn done, void *data, mk_llm_req **handle,
                        mk_errmsg *err) {
  if (handle) *handle = NULL;
  if (!llm || !g || !p || !done) return mk_errf(err, MK_EINVAL, "splitter/fuser need a graph, a partition and a callback");
  job *j = calloc(1, sizeof *j);
  if (!j) return mk_errf(err, MK_ENOMEM, "out of memory");
  j->kind = JOB_DECIDE;
  j->llm = llm;
  j->g = g;
  j->p = p;
  j->dkind = kind;
  j->decide_cb = done;
  j->data = data;
  mk_strlcpy(j->agent, kind == MK_LLM_SPLIT ? "splitter" : "fuser", sizeof j->agent);
  vars vs = {0};
  graph_vars(&vs, g, module_source);
  var_str(&vs, "language", language_name(backend));
  put_partition(var_buf(&vs, "partition"), g, p);
  var_str(&vs, "timings", timings_json);
  char n[32];
  snprintf(n, sizeof n, "%d", p->nsubkernels);
  var_str(&vs, "num_subkernels", n);
  return start_json_job(llm, j, &vs, handle, err);
}

int mk_llm_decompose_async(mk_llm *llm, const mk_graph *g, const char *module_source,
                           const mk_partition *initial, mk_kernel_backend backend,
                           mk_llm_groups_fn done, void *data, mk_llm_req **handle,
                           mk_errmsg *err) {
  if (handle) *handle = NULL;
  if (!llm || !g || !done) return mk_errf(err, MK_EINVAL, "decomposer needs a graph and a callback");
  if (g->nnodes == 0) return mk_errf(err, MK_EINVAL, "the graph has no nodes to decompose");
  job *j = calloc(1, sizeof *j);
  if (!j) return mk_errf(err, MK_ENOMEM, "out of memory");
  j->kind = JOB_DECOMPOSE;
  j->llm = llm;
  j->g = g;
  j->groups_cb = done;
  j->data = data;
  mk_strlcpy(j->agent, "decomposer", sizeof j->agent);
  vars vs = {0};
  graph_vars(&vs, g, module_source);
  var_str(&vs, "language", language_name(backend));
  mk_buf *b = var_buf(&vs, "initial_partition");
  if (initial) put_partition(b, g, initial);
  return start_json_job(llm, j, &vs, handle, err);
}
