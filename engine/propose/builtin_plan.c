/* builtin_plan.c — splits a subkernel into stages the generator can emit.
 *
 * Stages follow the subkernel's node order: runs of elementwise ops (each one
 * Triton kernel over its broadcast shape), view ops (replayed as metadata
 * calls in the launcher), and one stage per heavy op (reduction, softmax,
 * norm, pool, GEMM, convolution). An elementwise run right after a Triton
 * anchor becomes its epilogue (computed on the anchor's registers before the
 * single store); a run right before a reduction/norm/pool whose only product
 * is the anchor's input becomes its prologue (computed while loading). */
#include "builtin_internal.h"

#include "mk_layout.h"

#include <stdlib.h>
#include <string.h>

const char *bi_short(const mk_node *n, char *buf, size_t size) {
  const char *op = n->op ? n->op : "";
  const char *last = strrchr(op, '.');
  /* a property getter ("torch.Tensor.T.__get__"): the property names it, as
   * the op table reads it */
  if (last && last > op && strcmp(last + 1, "__get__") == 0) return mk_op_short_name(op, buf, size);
  last = last ? last + 1 : op;
  while (*last == '_') last++;
  size_t len = strlen(last);
  while (len > 0 && last[len - 1] == '_') len--;
  if (len >= size) len = size - 1;
  memcpy(buf, last, len);
  buf[len] = '\0';
  return buf;
}

static int classify(const mk_graph *g, const mk_node *n, bi_kind *kind, mk_errmsg *err) {
  const bi_family *f = bi_family_of_node(n);
  if (f) {
    *kind = f->kind;
    return f->check ? f->check(g, n, err) : 0;
  }
  /* An elementwise op with arguments the generator cannot write: say why. */
  mk_errmsg why = {{0}};
  if (n->category == MK_OP_ELEMENTWISE && !bi_ew_supported(n, &why) && why.text[0])
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s", n->span.line, why.text);
  return mk_errf(err, MK_EUNSUPPORTED, "line %d: the builtin generator has no kernel for %s",
                 n->span.line, n->op);
}

static bool node_in_sk(const bi_plan *p, int nid) {
  return nid >= 0 && nid < p->g->nnodes && p->stage_of[nid] != -2;
}

/* Broadcast of two captured shapes (right-aligned); false if incompatible. */
static bool bcast(int ra, const int64_t *a, int rb, const int64_t *b, int *ro, int64_t *o) {
  int r = ra > rb ? ra : rb;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - ra), ib = i - (r - rb);
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    o[i] = da == 1 ? db : da;
  }
  *ro = r;
  return true;
}

bool bi_same_shape(int ra, const int64_t *a, int rb, const int64_t *b) {
  if (ra != rb) return false;
  for (int i = 0; i < ra; i++)
    if (a[i] != b[i]) return false;
  return true;
}

/* Does value v (made by a node of nodes[lo..hi]) have a reader outside that run? */
static bool used_outside_run(const bi_plan *p, const int *nodes, int lo, int hi, int v) {
  if (p->is_output[v]) return true;
  const mk_value *val = &p->g->values[v];
  for (int u = 0; u < val->nusers; u++) {
    int nid = val->users[u];
    if (!node_in_sk(p, nid)) continue;
    bool inside = false;
    for (int k = lo; k <= hi && !inside; k++) inside = nodes[k] == nid;
    if (!inside) return true;
  }
  return false;
}

/* Whether the run nodes[lo..hi] is one valid EW kernel: every value it must
 * store has the run's broadcast shape (in-place results on outside tensors
 * must be stored too). Fills the run's shape. */
static bool run_valid(const bi_plan *p, const int *nodes, int lo, int hi, int *rank,
                      int64_t *shape) {
  int r = 0;
  int64_t sh[MK_IR_MAX_RANK] = {0};
  for (int k = lo; k <= hi; k++) {
    const mk_node *n = &p->g->nodes[nodes[k]];
    for (int o = 0; o < n->noutputs; o++) {
      const mk_value *v = &p->g->values[n->outputs[o]];
      int64_t tmp[MK_IR_MAX_RANK];
      int rt;
      if (!bcast(r, sh, v->rank, v->shape, &rt, tmp)) return false;
      r = rt;
      memcpy(sh, tmp, sizeof tmp);
    }
  }
  for (int k = lo; k <= hi; k++) {
    const mk_node *n = &p->g->nodes[nodes[k]];
    for (int o = 0; o < n->noutputs; o++) {
      int v = n->outputs[o];
      bool stored = used_outside_run(p, nodes, lo, hi, v) || n->nmutates > 0;
      const mk_value *val = &p->g->values[v];
      if (stored && !bi_same_shape(val->rank, val->shape, r, sh)) return false;
    }
  }
  *rank = r;
  memcpy(shape, sh, sizeof sh);
  return true;
}

static int push_stage(bi_plan *p, bi_kind kind, const int *nodes, int nnodes) {
  bi_stage *ns = realloc(p->st, (size_t)(p->nst + 1) * sizeof *ns);
  if (ns == NULL) return MK_ENOMEM;
  p->st = ns;
  bi_stage *s = &p->st[p->nst];
  *s = (bi_stage){.kind = kind, .pro = -1, .epi = -1, .fused_into = -1, .apply_into = -1,
                  .pro_norm = -1, .epi_norm = -1, .bcast_epi = -1};
  s->nodes = malloc((size_t)nnodes * sizeof *s->nodes);
  if (s->nodes == NULL) return MK_ENOMEM;
  memcpy(s->nodes, nodes, (size_t)nnodes * sizeof *nodes);
  s->nnodes = nnodes;
  for (int i = 0; i < nnodes; i++) p->stage_of[nodes[i]] = p->nst;
  p->nst++;
  return 0;
}

/* Splits one maximal sequence of elementwise nodes into valid runs, longest first. */
static int add_ew_runs(bi_plan *p, const int *q, int nq) {
  int i = 0;
  while (i < nq) {
    int j = nq - 1, rank = 0;
    int64_t shape[MK_IR_MAX_RANK];
    while (j > i && !run_valid(p, q, i, j, &rank, shape)) j--;
    if (j == i && !run_valid(p, q, i, i, &rank, shape)) {
      /* A single op always has one shape; reaching here means broadcasting
       * failed at capture shapes, which torch would have refused. */
      const mk_value *v = &p->g->values[p->g->nodes[q[i]].outputs[0]];
      rank = v->rank;
      memcpy(shape, v->shape, sizeof shape);
    }
    int rc = push_stage(p, BI_EW, q + i, j - i + 1);
    if (rc) return rc;
    p->st[p->nst - 1].rank = rank;
    memcpy(p->st[p->nst - 1].shape, shape, sizeof shape);
    i = j + 1;
  }
  return 0;
}

bool bi_feeds_other_subkernel(const bi_plan *p, int v) {
  if (v < 0 || v >= p->g->nvalues || !p->is_output[v]) return false;
  if (p->layout && p->layout[v] == MK_LAYOUT_CHANNELS_LAST) return false;
  const mk_value *val = &p->g->values[v];
  for (int u = 0; u < val->nusers; u++)
    if (!node_in_sk(p, val->users[u])) return true;
  return false;
}

int bi_stage_result(const bi_plan *p, int s) {
  const bi_stage *st = &p->st[s];
  const mk_node *n = &p->g->nodes[st->nodes[st->nnodes - 1]];
  return n->noutputs > 0 ? n->outputs[0] : -1;
}

/* The main tensor input of an anchor (the activation it reduces/normalises). */
static int anchor_input(const bi_plan *p, int s) {
  const mk_node *n = &p->g->nodes[p->st[s].nodes[0]];
  return bi_arg_tensor(bi_arg(n, 0, "input"));
}

bool bi_value_escapes(const bi_plan *p, int s, int v) {
  if (v < 0 || v >= p->g->nvalues) return false;
  if (p->is_output[v]) return true;
  const bi_stage *st = &p->st[s];
  const mk_value *val = &p->g->values[v];
  for (int u = 0; u < val->nusers; u++) {
    int nid = val->users[u];
    if (!node_in_sk(p, nid)) continue;
    int us = p->stage_of[nid];
    if (us == s) continue;
    /* Inside a chain one kernel computes (an implicit-GEMM convolution and
     * the stages after it), readers get the value in registers. */
    if (p->chain_lo >= 0 && s >= p->chain_lo && s <= p->chain_hi && us >= p->chain_lo &&
        us <= p->chain_hi)
      continue;
    /* A prologue's result is consumed in registers by its anchor. */
    if (st->fused_into >= 0 && p->st[st->fused_into].pro == s && us == st->fused_into &&
        v == anchor_input(p, us))
      continue;
    /* An anchor's result is consumed in registers by its epilogue. */
    if (st->epi >= 0 && us == st->epi) continue;
    if (st->bcast_epi >= 0 && us == st->bcast_epi && v == bi_stage_result(p, s)) continue;
    /* A norm (or its epilogue) applied by the anchor that loads it. */
    if (st->apply_into >= 0 && us == st->apply_into) continue;
    if (st->fused_into >= 0 && p->st[st->fused_into].epi == s &&
        p->st[st->fused_into].apply_into == us)
      continue;
    return true;
  }
  return false;
}

int bi_stage_stored(const bi_plan *p, int s, int *out, int max) {
  int n = 0;
  const bi_stage *st = &p->st[s];
  for (int i = 0; i < st->nnodes; i++) {
    const mk_node *node = &p->g->nodes[st->nodes[i]];
    for (int o = 0; o < node->noutputs; o++) {
      int v = node->outputs[o];
      /* In-place results are stored into their target, unless the target is
       * a norm's value applied on load (never stored): then where they escape. */
      bool mut = st->kind == BI_EW && node->nmutates > 0 && !bi_plan_applied_value(p, node->mutates[0]);
      if ((mut || bi_value_escapes(p, s, v)) && n < max) out[n++] = v;
    }
  }
  return n;
}

/* The norm stage whose value, or its epilogue's, stage t makes (v, its
 * result), or -1. */
static int norm_making(const bi_plan *p, int t, int v) {
  const bi_stage *st = &p->st[t];
  int ns = -1;
  if (st->kind == BI_NORM && st->epi < 0) ns = t;
  else if (st->kind == BI_EW && st->fused_into >= 0 && p->st[st->fused_into].kind == BI_NORM &&
           p->st[st->fused_into].epi == t)
    ns = st->fused_into;
  return ns >= 0 && bi_stage_result(p, t) == v ? ns : -1;
}

bool bi_plan_applied_value(const bi_plan *p, int v) {
  if (v < 0 || v >= p->g->nvalues) return false;
  int prod = p->g->values[v].producer;
  if (prod < 0 || prod >= p->g->nnodes || p->stage_of[prod] < 0) return false;
  int ns = norm_making(p, p->stage_of[prod], v);
  return ns >= 0 && p->st[ns].apply_into >= 0;
}

/* True if value v is made by a node of stage s. */
static bool produced_in_stage(const bi_plan *p, int s, int v) {
  for (int i = 0; i < p->st[s].nnodes; i++) {
    const mk_node *n = &p->g->nodes[p->st[s].nodes[i]];
    for (int k = 0; k < n->noutputs; k++)
      if (n->outputs[k] == v) return true;
  }
  return false;
}

static void decide_fusion(bi_plan *p) {
  for (int s = 0; s < p->nst; s++) {
    bi_stage *a = &p->st[s];
    bool triton_anchor = a->kind == BI_REDUCE || a->kind == BI_SOFTMAX || a->kind == BI_NORM ||
                         a->kind == BI_POOL || a->kind == BI_GEMM;
    if (!triton_anchor) continue;
    const mk_node *an = &p->g->nodes[a->nodes[0]];
    /* Epilogue: the next EW run has the anchor's output shape and reads it. */
    if (s + 1 < p->nst && p->st[s + 1].kind == BI_EW && p->st[s + 1].fused_into < 0) {
      bi_stage *e = &p->st[s + 1];
      const mk_value *ov = &p->g->values[an->outputs[0]];
      bool reads = false;
      for (int i = 0; i < e->nnodes && !reads; i++) {
        const mk_node *en = &p->g->nodes[e->nodes[i]];
        for (int k = 0; k < en->ninputs; k++) reads |= en->inputs[k] == an->outputs[0];
      }
      /* Only the anchor's first output may be needed (not max's indices). */
      bool extra = false;
      for (int o = 1; o < an->noutputs; o++)
        extra |= bi_value_escapes(p, s, an->outputs[o]) && !bi_norm_state_output(an, an->outputs[o]);
      /* An in-place op in the run is an epilogue of norms only, and only
       * where it writes a tensor from outside (`out += shortcut` after a
       * batch norm): the tiled norm stores it into its target at the offsets
       * it read it from (builtin_ew.c); other anchors' stores assume a fresh
       * output, and an in-place op on the norm's own result (relu_) keeps
       * its stage. */
      bool mutated_leaf = false;
      for (int i = 0; i < e->nnodes; i++) {
        const mk_node *en = &p->g->nodes[e->nodes[i]];
        for (int m = 0; m < en->nmutates; m++)
          mutated_leaf |= a->kind != BI_NORM || en->mutates[m] == an->outputs[0] ||
                          produced_in_stage(p, s + 1, en->mutates[m]);
      }
      if (reads && !extra && !mutated_leaf && bi_same_shape(ov->rank, ov->shape, e->rank, e->shape)) {
        a->epi = s + 1;
        e->fused_into = s;
      }
    }
    /* Prologue: the previous EW run only feeds this anchor's input. */
    if (a->kind != BI_GEMM && s > 0 && p->st[s - 1].kind == BI_EW && p->st[s - 1].fused_into < 0) {
      int in = anchor_input(p, s);
      bi_stage *pr = &p->st[s - 1];
      if (in >= 0 && bi_stage_result(p, s - 1) == in) {
        pr->fused_into = s;
        a->pro = s - 1;
        int stored[8];
        int ns = bi_stage_stored(p, s - 1, stored, 8);
        const mk_value *iv = &p->g->values[in];
        bool ok = ns == 0 && bi_same_shape(iv->rank, iv->shape, pr->rank, pr->shape);
        for (int i = 0; i < pr->nnodes; i++) ok &= p->g->nodes[pr->nodes[i]].nmutates == 0;
        /* The input read by other nodes of the anchor (weights) is not the prologue's. */
        if (!ok) {
          pr->fused_into = -1;
          a->pro = -1;
        }
      }
    }
  }
}

/* True if every reader of value v is node `only` (or a node of stage `within`,
 * when >= 0), and v is no subkernel output. */
static bool read_only_by(const bi_plan *p, int v, int only, int within) {
  if (v < 0 || v >= p->g->nvalues || p->is_output[v]) return false;
  const mk_value *val = &p->g->values[v];
  for (int u = 0; u < val->nusers; u++) {
    int nid = val->users[u];
    if (nid == only) continue;
    if (within >= 0 && node_in_sk(p, nid) && p->stage_of[nid] == within) continue;
    return false;
  }
  return true;
}

/* True if norm stage ns's value v (its epilogue's result, or its own without
 * one) reaches only its reader, node `node` or the nodes of stage `stage`
 * (-1: none): the normalised value feeds its epilogue alone (or, without one,
 * the reader), and each value the epilogue makes feeds the epilogue, v the
 * reader alone. Such a norm can be applied by that reader while it loads. */
static bool norm_value_read_only_by(const bi_plan *p, int ns, int v, int node, int stage) {
  const mk_node *nn = &p->g->nodes[p->st[ns].nodes[0]];
  int epi = p->st[ns].epi;
  if (!read_only_by(p, nn->outputs[0], epi < 0 ? node : -1, epi < 0 ? stage : epi)) return false;
  for (int i = 0; epi >= 0 && i < p->st[epi].nnodes; i++) {
    const mk_node *en = &p->g->nodes[p->st[epi].nodes[i]];
    for (int o = 0; o < en->noutputs; o++)
      if (!read_only_by(p, en->outputs[o], en->outputs[o] == v ? node : -1,
                        en->outputs[o] == v ? stage : epi))
        return false;
  }
  return true;
}

/* The norm stage whose normalised value (after its epilogue, if any) is
 * exactly the input of pool stage s and read nowhere else, or -1. */
static int norm_feeding(const bi_plan *p, int s) {
  const bi_stage *a = &p->st[s];
  if (a->kind != BI_POOL || a->pro >= 0 || s < 1) return -1;
  const mk_node *an = &p->g->nodes[a->nodes[0]];
  /* A pool over the dims after (sample, channel): every tap of one output
   * lies in one (sample, channel), whose scale and shift it loads once. */
  bi_pool_info pi;
  if (bi_pool_parse(p->g, an, &pi, NULL) || pi.rank != pi.nd + 2) return -1;
  int in = anchor_input(p, s);
  if (in < 0) in = bi_arg_tensor(bi_arg(an, 0, "self"));
  int uses = 0;
  for (int k = 0; k < an->ninputs; k++) uses += an->inputs[k] == in;
  if (in < 0 || uses != 1) return -1;
  int ns = norm_making(p, s - 1, in);
  if (ns < 0 || !bi_norm_applies_on_load(p->g, &p->g->nodes[p->st[ns].nodes[0]])) return -1;
  return norm_value_read_only_by(p, ns, in, a->nodes[0], -1) ? ns : -1;
}

/* A norm followed by a pool of its normalised value: the pool applies the
 * norm while loading (what torch.compile's generated code does for a group
 * norm and its max pool: on problem 85 the normalised tensor is 520 MB,
 * written once and read again when it is stored). */
static void decide_norm_on_load(bi_plan *p) {
  for (int s = 0; s < p->nst; s++) {
    int ns = norm_feeding(p, s);
    if (ns < 0) continue;
    p->st[s].pro_norm = ns;
    p->st[ns].apply_into = s;
  }
}

/* The norm stage whose value (after its epilogue, if any) is the leaf v of
 * norm stage b's epilogue, read nowhere else, of b's shape, a batch norm the
 * channel tiles can write, or -1. Its input is read again by b's kernel, so
 * nothing in the subkernel may write that input in place. */
static int norm_of_epilogue_leaf(const bi_plan *p, int b, int v) {
  int prod = p->g->values[v].producer;
  if (prod < 0 || prod >= p->g->nnodes || p->stage_of[prod] < 0) return -1;
  int t = p->stage_of[prod], ns = norm_making(p, t, v);
  if (ns < 0 || ns >= b) return -1;
  const bi_stage *a = &p->st[ns];
  if (a->apply_into >= 0 || a->pro >= 0 || a->pro_norm >= 0 || a->epi_norm >= 0) return -1;
  const mk_node *nn = &p->g->nodes[a->nodes[0]];
  const mk_node *bn = &p->g->nodes[p->st[b].nodes[0]];
  if (!bi_norm_on_channel_tiles(p->g, nn)) return -1;
  const mk_value *val = &p->g->values[v], *bo = &p->g->values[bn->outputs[0]];
  if (!bi_same_shape(val->rank, val->shape, bo->rank, bo->shape)) return -1;
  if (!norm_value_read_only_by(p, ns, v, -1, p->st[b].epi)) return -1;
  int in = anchor_input(p, ns);
  if (in < 0 || in == anchor_input(p, b)) return -1; /* one input read twice: one norm */
  for (int i = 0; i < p->sk->nnodes; i++) {
    const mk_node *n = &p->g->nodes[p->sk->nodes[i]];
    for (int m = 0; m < n->nmutates; m++)
      if (n->mutates[m] == in) return -1;
  }
  return ns;
}

/* A batch norm whose value only another batch norm's epilogue reads (ResNet's
 * and ShuffleNet's `out = relu(bn3(conv3(..))); out += bn(conv(x))`): that
 * epilogue applies it while loading (its statistics computed first), so its
 * full-size value is never written and read back (torch.compile's last
 * kernel of ShuffleNetUnit does the same: docs/bench/profiles-h100). Only
 * the channel tiles write it (builtin_norm.c); the proposer keeps the stored
 * plan as a twin (bi_plan_store_norms). */
static void decide_norm_on_epilogue_load(bi_plan *p) {
  for (int b = 0; b < p->nst; b++) {
    bi_stage *st = &p->st[b];
    if (st->kind != BI_NORM || st->epi < 0 || st->apply_into >= 0 || st->pro >= 0 || st->pro_norm >= 0 ||
        !bi_norm_on_channel_tiles(p->g, &p->g->nodes[st->nodes[0]]))
      continue;
    const bi_stage *e = &p->st[st->epi];
    int res = p->g->nodes[st->nodes[0]].outputs[0];
    for (int i = 0; i < e->nnodes && st->epi_norm < 0; i++) {
      const mk_node *en = &p->g->nodes[e->nodes[i]];
      for (int k = 0; k < en->ninputs && st->epi_norm < 0; k++) {
        int v = en->inputs[k];
        if (v < 0 || v >= p->g->nvalues || v == res || produced_in_stage(p, st->epi, v)) continue;
        int a = norm_of_epilogue_leaf(p, b, v);
        if (a < 0) continue;
        p->st[a].apply_into = st->epi;
        st->epi_norm = a;
      }
    }
  }
}

/* True for a view of values made outside the subkernel (a slice of a buffer:
 * attention's `self.bias[:, :, :T, :T]`): it depends on nothing the subkernel
 * computes, so its stage comes first (a line of the launcher) instead of
 * cutting an elementwise run in two; the run can then be the epilogue of the
 * GEMM before it, reading the view. */
static bool view_of_outside_values(const bi_plan *p, const mk_node *n, bi_kind kind) {
  if (kind != BI_VIEW || n->nmutates > 0) return false;
  for (int k = 0; k < n->ninputs; k++) {
    int prod = p->g->values[n->inputs[k]].producer;
    if (prod >= 0 && p->stage_of[prod] != -2) return false;
  }
  return true;
}

int bi_plan_build(const mk_graph *g, const mk_subkernel *sk, bi_plan *out, mk_errmsg *err) {
  *out = (bi_plan){.g = g, .sk = sk, .chain_lo = -1, .chain_hi = -1};
  out->stage_of = malloc((size_t)(g->nnodes + 1) * sizeof *out->stage_of);
  out->is_input = calloc((size_t)g->nvalues + 1, sizeof *out->is_input);
  out->is_output = calloc((size_t)g->nvalues + 1, sizeof *out->is_output);
  out->layout = calloc((size_t)g->nvalues + 1, 1);
  int *q = malloc((size_t)(sk->nnodes + 1) * sizeof *q);
  if (!out->stage_of || !out->is_input || !out->is_output || !out->layout || !q ||
      mk_layout_plan(g, out->layout, NULL) < 0) {
    free(q);
    bi_plan_free(out);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  for (int i = 0; i < g->nnodes; i++) out->stage_of[i] = -2; /* -2: not in the subkernel */
  for (int i = 0; i < sk->nnodes; i++) {
    if (sk->nodes[i] < 0 || sk->nodes[i] >= g->nnodes) {
      free(q);
      bi_plan_free(out);
      return mk_errf(err, MK_EINVAL, "subkernel names node %d, which does not exist", sk->nodes[i]);
    }
    out->stage_of[sk->nodes[i]] = -1;
  }
  for (int i = 0; i < sk->ninputs; i++)
    if (sk->inputs[i] >= 0 && sk->inputs[i] < g->nvalues) out->is_input[sk->inputs[i]] = true;
  for (int i = 0; i < sk->noutputs; i++)
    if (sk->outputs[i] >= 0 && sk->outputs[i] < g->nvalues) out->is_output[sk->outputs[i]] = true;

  int rc = 0, nq = 0;
  for (int i = 0; i < sk->nnodes && rc == 0; i++) {
    const mk_node *n = &g->nodes[sk->nodes[i]];
    bi_kind kind;
    if (n->replayable && classify(g, n, &kind, NULL) == 0 && view_of_outside_values(out, n, kind))
      rc = push_stage(out, kind, &sk->nodes[i], 1);
  }
  for (int i = 0; i < sk->nnodes && rc == 0; i++) {
    const mk_node *n = &g->nodes[sk->nodes[i]];
    if (out->stage_of[sk->nodes[i]] >= 0) continue; /* an outside view, taken first */
    if (!n->replayable) {
      rc = mk_errf(err, MK_EUNSUPPORTED, "line %d: %s reads a value that was not recorded exactly",
                   n->span.line, n->op);
      break;
    }
    bi_kind kind;
    rc = classify(g, n, &kind, err);
    if (rc) break;
    if (kind == BI_EW) {
      if (n->noutputs < 1) {
        rc = mk_errf(err, MK_EUNSUPPORTED, "line %d: %s returns no tensor", n->span.line, n->op);
        break;
      }
      q[nq++] = sk->nodes[i];
      continue;
    }
    if (nq) {
      rc = add_ew_runs(out, q, nq);
      nq = 0;
      if (rc) break;
    }
    rc = push_stage(out, kind, &sk->nodes[i], 1);
  }
  if (rc == 0 && nq) rc = add_ew_runs(out, q, nq);
  free(q);
  if (rc) {
    if (rc == MK_ENOMEM) mk_errf(err, rc, "out of memory");
    bi_plan_free(out);
    return rc;
  }
  decide_fusion(out);
  decide_norm_on_load(out);
  decide_norm_on_epilogue_load(out);
  return 0;
}

/* The ops whose kernel keeps one value per kept column (acc), which the
 * broadcast epilogue reads: not the arg-reductions (indices), scans,
 * triangles or losses. */
static bool broadcastable_reduce(const char *op) {
  static const char *const ops[] = {"sum", "mean", "max", "min", "norm2", "norm1", "logsumexp"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(op, ops[i]) == 0) return true;
  return false;
}

/* True if stage t (the run after reduction s) can be s's broadcast epilogue. */
static bool broadcast_epilogue_fits(const bi_plan *p, int s, int t) {
  const bi_stage *a = &p->st[s], *e = &p->st[t];
  if (a->kind != BI_REDUCE || a->epi >= 0 || a->bcast_epi >= 0 || a->apply_into >= 0) return false;
  if (e->kind != BI_EW || e->fused_into >= 0) return false;
  const mk_node *an = &p->g->nodes[a->nodes[0]];
  bi_reduce_info ri;
  mk_errmsg ignored = {{0}};
  if (bi_reduce_parse(p->g, an, &ri, &ignored) || !broadcastable_reduce(ri.op) || !ri.keepdim ||
      ri.target >= 0 || ri.rank < 1 || ri.lo > ri.hi)
    return false;
  for (int o = 1; o < an->noutputs; o++) /* max's indices */
    if (bi_value_escapes(p, s, an->outputs[o])) return false;
  int in = anchor_input(p, s), res = an->outputs[0];
  if (in < 0) return false;
  const mk_value *iv = &p->g->values[in];
  if (!bi_same_shape(iv->rank, iv->shape, e->rank, e->shape)) return false;
  for (int i = 0; i < e->nnodes; i++)
    if (p->g->nodes[e->nodes[i]].nmutates > 0) return false;
  return read_only_by(p, res, -1, t);
}

bool bi_plan_fuse_broadcast_epilogues(bi_plan *p) {
  bool any = false;
  for (int s = 0; s + 1 < p->nst; s++) {
    if (!broadcast_epilogue_fits(p, s, s + 1)) continue;
    p->st[s].bcast_epi = s + 1;
    p->st[s + 1].fused_into = s;
    any = true;
  }
  return any;
}

int64_t bi_plan_broadcast_programs(const bi_plan *p) {
  int64_t fewest = -1;
  for (int s = 0; s < p->nst; s++) {
    if (p->st[s].bcast_epi < 0) continue;
    bi_reduce_info ri;
    mk_errmsg ignored = {{0}};
    if (bi_reduce_parse(p->g, &p->g->nodes[p->st[s].nodes[0]], &ri, &ignored)) continue;
    const mk_value *iv = &p->g->values[anchor_input(p, s)];
    int64_t outer = 1, r = 1, inner = 1;
    for (int d = 0; d < ri.lo; d++) outer *= iv->shape[d];
    for (int d = ri.lo; d <= ri.hi; d++) r *= iv->shape[d];
    for (int d = ri.hi + 1; d < iv->rank; d++) inner *= iv->shape[d];
    int64_t n = outer * (inner + 255) / 256;
    if (ri.hi == iv->rank - 1) { /* rows packed 256 / next_pow2(R) to a program (builtin_reduce.c) */
      int64_t w = 1;
      while (w < r && w < 256) w *= 2;
      n = (outer + 256 / w - 1) / (256 / w);
    }
    if (fewest < 0 || n < fewest) fewest = n;
  }
  return fewest;
}

void bi_plan_store_norms(bi_plan *p) {
  for (int s = 0; s < p->nst; s++) p->st[s].apply_into = p->st[s].pro_norm = p->st[s].epi_norm = -1;
}

bool bi_plan_norm_on_load(const bi_plan *p) {
  for (int s = 0; s < p->nst; s++)
    if (p->st[s].apply_into >= 0) return true;
  return false;
}

/* True if stage s is an EW run with an in-place op. */
static bool writes_in_place(const bi_plan *p, int s) {
  for (int i = 0; i < p->st[s].nnodes; i++)
    if (p->g->nodes[p->st[s].nodes[i]].nmutates > 0) return true;
  return false;
}

bool bi_plan_unfuse_inplace_epilogues(bi_plan *p) {
  bool any = false;
  for (int s = 0; s < p->nst; s++) {
    int e = p->st[s].epi;
    if (p->st[s].kind != BI_NORM || e < 0 || !writes_in_place(p, e)) continue;
    if (p->st[s].epi_norm >= 0) p->st[p->st[s].epi_norm].apply_into = -1; /* its reader is gone */
    p->st[s].epi_norm = -1;
    p->st[s].epi = -1;
    p->st[e].fused_into = -1;
    any = true;
  }
  return any;
}

void bi_plan_free(bi_plan *p) {
  if (p == NULL) return;
  for (int i = 0; i < p->nst; i++) free(p->st[i].nodes);
  free(p->st);
  free(p->stage_of);
  free(p->is_input);
  free(p->is_output);
  free(p->layout);
  *p = (bi_plan){0};
}

int bi_stage_label(const bi_plan *p, int s, mk_buf *out) {
  const bi_stage *st = &p->st[s];
  size_t start = out->len;
  for (int i = 0; i < st->nnodes && i < 4; i++) {
    char buf[64];
    bi_short(&p->g->nodes[st->nodes[i]], buf, sizeof buf);
    if (i) mk_buf_putc(out, '_');
    for (char *c = buf; *c; c++) mk_buf_putc(out, (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ? *c : '_');
  }
  if (st->nnodes > 4) mk_buf_puts(out, "_etc");
  if (out->len == start) mk_buf_puts(out, "stage");
  return out->err;
}

int bi_stage_comment(const bi_plan *p, int s, int indent, mk_buf *out) {
  const bi_stage *st = &p->st[s];
  mk_buf_indent(out, indent);
  mk_buf_puts(out, "# replaces:");
  for (int i = 0; i < st->nnodes; i++) {
    const mk_node *n = &p->g->nodes[st->nodes[i]];
    mk_buf_printf(out, "%s %s (line %d)", i ? "," : "", n->op, n->span.line);
  }
  return mk_buf_putc(out, '\n');
}
