/* builtin_ew.c — elementwise expression codegen.
 *
 * An elementwise run is computed at flat offsets of its broadcast output
 * shape. Every tensor it reads from outside (a "leaf") is loaded at the
 * offset its own broadcasting implies: a full-shape leaf at `offs`, a
 * per-channel parameter at ((offs // inner) % C) * stride, a 0-d tensor once.
 * The broadcast pattern (which dims are real for each leaf) is decided from
 * the captured shapes; the sizes and strides themselves are read from the
 * tensors at run time, and the launcher checks the pattern still holds.
 *
 * The same body is used standalone (one kernel per run), as the epilogue of
 * an anchor (the anchor's value is bound to a register) and as a prologue
 * (computed while an anchor loads its input). */
#include "builtin_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- dtypes ------------------------------------------------------------- */

/* torch's name of a dtype, NULL for one the IR does not know. */
const char *bi_torch_dtype(mk_dtype d) {
  return d == MK_DTYPE_UNKNOWN ? NULL : mk_dtype_name(d);
}

static const char *tl_dtype(mk_dtype d) {
  switch (d) {
  case MK_DTYPE_F32: return "tl.float32";
  case MK_DTYPE_F16: return "tl.float16";
  case MK_DTYPE_BF16: return "tl.bfloat16";
  case MK_DTYPE_F64: return "tl.float64";
  case MK_DTYPE_I64: return "tl.int64";
  case MK_DTYPE_I32: return "tl.int32";
  case MK_DTYPE_I16: return "tl.int16";
  case MK_DTYPE_I8: return "tl.int8";
  case MK_DTYPE_U8: return "tl.uint8";
  case MK_DTYPE_BOOL: return "tl.int1";
  default: return NULL;
  }
}

int bi_run_name(const bi_plan *p, int vid, mk_buf *out) { return bi_value_name(p->g, vid, out); }

/* ---- which ops ----------------------------------------------------------- */

typedef enum {
  A_UNARY,  /* f(x) */
  A_BINARY, /* f(a, b) */
  A_OTHER,  /* handled case by case */
} ew_arity;

/* The table of elementwise ops (ew_ops, below with their emitters). */
typedef struct ew_op ew_op;
static const ew_op *find_op(const char *s);

bool bi_ew_supported(const mk_node *n, mk_errmsg *err) {
  char s[64];
  bi_short(n, s, sizeof s);
  if (find_op(s) == NULL) return false;
  if (n->noutputs < 1) return false;
  /* max/min with a dim are reductions, not elementwise. */
  if ((strcmp(s, "max") == 0 || strcmp(s, "min") == 0) && bi_arg_tensor(bi_arg(n, 1, "other")) < 0)
    return false;
  if (strncmp(s, "dropout", 7) == 0 || strstr(s, "alpha_dropout")) {
    double p = 0.5;
    bi_arg_number(bi_arg(n, 1, "p"), &p);
    bool training = bi_arg_bool(bi_arg(n, 2, "training"), true, NULL);
    if (p != 0.0 && training) {
      if (err) mk_errf(err, MK_EUNSUPPORTED, "dropout with p=%g in training mode is random", p);
      return false;
    }
  }
  if (strcmp(s, "pow") == 0 || strcmp(s, "rpow") == 0) {
    /* pow needs a number on one side: a**2, 2**x. */
    double d;
    bool num_exp = bi_arg_number(bi_arg(n, 1, "exponent"), &d);
    bool num_base = bi_arg_number(bi_arg(n, 0, "self"), &d);
    if (!num_exp && !num_base) {
      if (err) mk_errf(err, MK_EUNSUPPORTED, "pow with a tensor exponent");
      return false;
    }
  }
  if (strcmp(s, "div") == 0 || strcmp(s, "divide") == 0) {
    const char *mode = bi_arg_str(bi_arg(n, 2, "rounding_mode"));
    if (mode && strcmp(mode, "floor") && strcmp(mode, "trunc")) return false;
  }
  if (strcmp(s, "gelu") == 0) {
    const char *a = bi_arg_str(bi_arg(n, 1, "approximate"));
    if (a && strcmp(a, "none") && strcmp(a, "tanh")) return false;
  }
  return true;
}

/* ---- leaves ---------------------------------------------------------------- */

typedef struct leaf {
  int vid;
  bool bound;        /* computed in registers by the enclosing kernel */
  bool scalar;       /* loaded once (0-d or fully broadcast) */
  bool full;         /* same shape as the run and dense in its order: loaded at offs */
  bool mutated;      /* an in-place op of the run writes back into it */
  int bias;          /* folded conv bias added per channel on load, or -1 */
  int cdim;          /* iteration position of the channel dim (when bias >= 0) */
  bool cl;           /* the stage runs in channels_last order */
  int nruns;
  int run_lo[MK_IR_MAX_RANK], run_hi[MK_IR_MAX_RANK];
} leaf;

#define MAX_LEAVES 64

static bool produced_in(const bi_plan *p, int s, int vid) {
  const mk_value *v = &p->g->values[vid];
  return v->kind == MK_VALUE_NODE && v->producer >= 0 && p->stage_of[v->producer] == s;
}

bool bi_is_cl_value(const bi_emit *e, int v) {
  for (int i = 0; i < e->ncl; i++)
    if (e->cl_values[i] == v) return true;
  return false;
}

void bi_add_cl_value(bi_emit *e, int v) {
  if (bi_is_cl_value(e, v)) return;
  if (e->ncl < (int)(sizeof e->cl_values / sizeof e->cl_values[0])) e->cl_values[e->ncl++] = v;
}

int bi_folded_bias(const bi_emit *e, int v) {
  for (int i = 0; i < e->nfolded; i++)
    if (e->folded[i].value == v) return e->folded[i].bias;
  return -1;
}

/* Logical dim at iteration position d of a rank-R stage. In channels_last
 * order the channel dim is innermost: (0, 2, ..., R-1, 1). */
static int iter_dim(bool cl, int R, int d) {
  if (!cl || d == 0) return d;
  return d == R - 1 ? 1 : d + 1;
}

static bool same_dims(const mk_value *v, const bi_stage *st) {
  return bi_same_shape(v->rank, v->shape, st->rank, st->shape);
}

static void leaf_pattern(const bi_emit *e, int s, bool cl, leaf *l) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  const mk_value *v = &p->g->values[l->vid];
  int R = st->rank;
  bool real[MK_IR_MAX_RANK] = {false};
  int nreal = 0;
  for (int d = 0; d < R; d++) {
    int L = iter_dim(cl, R, d);
    int j = L - (R - v->rank);
    if (j < 0) continue;
    if (v->shape[j] == 1 && st->shape[L] != 1) continue;
    if (st->shape[L] == 1) continue; /* index is always 0 */
    real[d] = true;
    nreal++;
  }
  l->scalar = nreal == 0;
  l->full = v->rank == R && nreal > 0;
  /* A run over a single element (0-d shape, num_batches_tracked += 1): the
   * same-shape leaf is "full" at offset 0, so an in-place op can store it. */
  if (v->rank == R && nreal == 0) {
    int64_t numel = 1;
    for (int d = 0; d < R; d++) numel *= st->shape[d];
    if (numel == 1) {
      l->full = true;
      l->scalar = false;
    }
  }
  l->full = l->full && same_dims(v, st);
  /* Is the leaf dense in the iteration order? Contiguous tensors are in the
   * default order, the module's channels_last values in channels_last order;
   * any other leaf is read through the stride of every real dim. */
  bool dense = cl == bi_is_cl_value(e, l->vid);
  if (!dense) l->full = false;
  l->nruns = 0;
  for (int d = 0; d < R; d++) {
    if (!real[d]) continue;
    /* Merge consecutive real dims (valid on a leaf dense in this order). */
    if (dense && l->nruns > 0 && l->run_hi[l->nruns - 1] == d - 1) {
      l->run_hi[l->nruns - 1] = d;
      continue;
    }
    l->run_lo[l->nruns] = d;
    l->run_hi[l->nruns] = d;
    l->nruns++;
  }
}

static void add_leaf(leaf *ls, int *nl, int vid, bi_ew_bind bind) {
  for (int i = 0; i < *nl; i++)
    if (ls[i].vid == vid) return;
  if (*nl >= MAX_LEAVES) return;
  bool bound = vid == bind.value || (bind.applied.on && vid == bind.applied.value);
  ls[*nl] = (leaf){.vid = vid, .bound = bound, .bias = -1};
  (*nl)++;
}

static void collect_tensors(const cJSON *a, int *ids, int *n, int max) {
  if (a == NULL) return;
  int t = bi_arg_tensor(a);
  if (t >= 0) {
    if (*n < max) ids[(*n)++] = t;
    return;
  }
  if (cJSON_IsArray(a) || cJSON_IsObject(a))
    for (const cJSON *c = a->child; c; c = c->next) collect_tensors(c, ids, n, max);
}

/* The tensors stage s reads from outside itself, in first-use order. */
static int collect_leaves(const bi_plan *p, int s, bi_ew_bind bind, leaf *ls, int *nl,
                          mk_errmsg *err) {
  const bi_stage *st = &p->st[s];
  *nl = 0;
  for (int i = 0; i < st->nnodes; i++) {
    const mk_node *n = &p->g->nodes[st->nodes[i]];
    int ids[32], cnt = 0;
    collect_tensors(n->args, ids, &cnt, 32);
    collect_tensors(n->kwargs, ids, &cnt, 32);
    for (int k = 0; k < cnt; k++) {
      if (ids[k] < 0 || ids[k] >= p->g->nvalues)
        return mk_errf(err, MK_EINVAL, "node %d reads value %d, which does not exist", n->id, ids[k]);
      if (!produced_in(p, s, ids[k])) add_leaf(ls, nl, ids[k], bind);
    }
  }
  if (*nl >= MAX_LEAVES) return mk_errf(err, MK_EUNSUPPORTED, "elementwise run reads too many tensors");
  for (int i = 0; i < *nl; i++)
    for (int k = 0; k < st->nnodes; k++) {
      const mk_node *n = &p->g->nodes[st->nodes[k]];
      for (int m = 0; m < n->nmutates; m++) ls[i].mutated |= n->mutates[m] == ls[i].vid;
    }
  return 0;
}

static bool leaves_allow_cl(const bi_emit *e, int s, const leaf *ls, int nl) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  if (st->fused_into >= 0 || (st->rank != 4 && st->rank != 5)) return false;
  /* What another subkernel reads is written in the default layout. */
  int stored[64];
  int ns = bi_stage_stored(p, s, stored, 64);
  for (int i = 0; i < ns; i++)
    if (bi_feeds_other_subkernel(p, stored[i])) return false;
  bool lead = false;
  for (int i = 0; i < nl; i++) {
    bool cl = bi_is_cl_value(e, ls[i].vid);
    if (ls[i].mutated && !cl) return false;
    lead |= cl && same_dims(&p->g->values[ls[i].vid], st);
  }
  return lead;
}

static int stage_leaves(const bi_emit *e, int s, bi_ew_bind bind, leaf *ls, int *nl, mk_errmsg *err);

bool bi_ew_tile_leaves_ok(const bi_emit *e, int s, int bound, int applied, char *why, size_t why_size) {
  leaf ls[MAX_LEAVES];
  int nl = 0;
  mk_errmsg err = {{0}};
  bi_ew_bind bind = {.value = bound, .var = "y", .cl_offs = "soffs"}; /* as the tile binds it */
  bind.applied.on = applied >= 0;
  bind.applied.value = applied;
  bind.applied.var = "ya";
  if (stage_leaves(e, s, bind, ls, &nl, &err)) {
    snprintf(why, why_size, "its epilogue: %s", err.text);
    return false;
  }
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  for (int i = 0; i < nl; i++) {
    if (ls[i].bound) continue;
    mk_buf name;
    mk_buf_init(&name, 64);
    bi_run_name(p, ls[i].vid, &name);
    bool cl_same = same_dims(&p->g->values[ls[i].vid], st) && bi_is_cl_value(e, ls[i].vid);
    bool ok = !ls[i].mutated || (cl_same && !ls[i].scalar); /* in place at the tile's offsets */
    if (ok && !ls[i].scalar) {
      bool per_channel = ls[i].nruns == 1 && ls[i].run_lo[0] == 1 && ls[i].run_hi[0] == 1;
      ok = per_channel || cl_same;
    }
    if (!ok)
      snprintf(why, why_size, "its epilogue %s %s, neither a number, per channel, nor a channels_last "
               "value of its shape", ls[i].mutated ? "writes in place into" : "reads",
               mk_buf_cstr(&name));
    mk_buf_free(&name);
    if (!ok) return false;
  }
  return true;
}

bool bi_ew_channels_last(const bi_emit *e, int s) {
  leaf ls[MAX_LEAVES];
  int nl = 0;
  mk_errmsg ignored = {{0}};
  bi_ew_bind nobind = {.value = -1, .var = NULL};
  if (collect_leaves(e->p, s, nobind, ls, &nl, &ignored)) return false;
  return leaves_allow_cl(e, s, ls, nl);
}

static bool inplace_at_cl_offs(const bi_emit *e, int s, bi_ew_bind bind, const leaf *l);

static int stage_leaves(const bi_emit *e, int s, bi_ew_bind bind, leaf *ls, int *nl,
                        mk_errmsg *err) {
  int rc = collect_leaves(e->p, s, bind, ls, nl, err);
  if (rc) return rc;
  bool cl = bind.value < 0 && leaves_allow_cl(e, s, ls, *nl);
  int R = e->p->st[s].rank;
  for (int i = 0; i < *nl; i++) {
    ls[i].cl = cl;
    ls[i].cdim = cl ? R - 1 : 1;
    leaf_pattern(e, s, cl, &ls[i]);
    if (ls[i].mutated && !ls[i].full && !ls[i].bound && !inplace_at_cl_offs(e, s, bind, &ls[i]))
      return mk_errf(err, MK_EUNSUPPORTED, "an in-place op writes a tensor of another shape");
    /* A folded bias needs the channel index of a full-shape leaf. */
    if (!ls[i].bound && same_dims(&e->p->g->values[ls[i].vid], &e->p->st[s]))
      ls[i].bias = bi_folded_bias(e, ls[i].vid);
  }
  return 0;
}

/* ---- expressions ------------------------------------------------------------ */

typedef struct ew_ctx {
  const bi_emit *e;
  int s;
  const char *pfx;
  bi_ew_bind bind;
} ew_ctx;

static int reg_name(const ew_ctx *c, int vid, mk_buf *out) {
  if (vid == c->bind.value) return mk_buf_puts(out, c->bind.var);
  if (c->bind.applied.on && vid == c->bind.applied.value) return mk_buf_puts(out, c->bind.applied.var);
  if (produced_in(c->e->p, c->s, vid)) return mk_buf_printf(out, "v%d", vid);
  mk_buf_puts(out, c->pfx);
  return bi_run_name(c->e->p, vid, out);
}

/* Appends the Triton operand for an argument: a register or a literal. */
static int operand(const ew_ctx *c, const cJSON *a, mk_buf *out, mk_errmsg *err) {
  int t = bi_arg_tensor(a);
  if (t >= 0) return reg_name(c, t, out);
  double d;
  long long iv;
  if (a && cJSON_IsNumber(a) && bi_arg_int(a, &iv)) return mk_buf_printf(out, "%lld", iv);
  if (bi_arg_number(a, &d)) return bi_tl_float(d, out);
  return mk_errf(err, MK_EUNSUPPORTED, "an elementwise operand is neither a tensor nor a number");
}

/* Operand as a separate string (for templates that repeat it). */
static int operand_str(const ew_ctx *c, const cJSON *a, char *buf, size_t size, mk_errmsg *err) {
  mk_buf b;
  mk_buf_init(&b, size);
  int rc = operand(c, a, &b, err);
  if (rc == 0 && b.err == 0) mk_strlcpy(buf, mk_buf_cstr(&b), size);
  else if (rc == 0) rc = mk_errf(err, MK_ERANGE, "operand too long");
  mk_buf_free(&b);
  return rc;
}

static double num_or(const cJSON *a, double def) {
  double d;
  return bi_arg_number(a, &d) ? d : def;
}

static int flt(mk_buf *o, double d) { return bi_tl_float(d, o); }

/* tanh via exp: exact to a few ulps in fp32 and the same on every Triton. */
static void emit_tanh(mk_buf *o, const char *x) {
  mk_buf_printf(o, "(1.0 - 2.0 / (tl.exp(2.0 * (%s)) + 1.0))", x);
}

static void emit_softplus(mk_buf *o, const char *x, double beta, double threshold) {
  mk_buf_printf(o, "tl.where((%s) * ", x);
  flt(o, beta);
  mk_buf_puts(o, " > ");
  flt(o, threshold);
  mk_buf_printf(o, ", %s, tl.log(1.0 + tl.exp((%s) * ", x, x);
  flt(o, beta);
  mk_buf_puts(o, ")) / ");
  flt(o, beta);
  mk_buf_puts(o, ")");
}

/* ---- the elementwise ops ---------------------------------------------------- */

/* What an op's emitter gets: the node, its short name, its first two operands
 * as expressions (A always, B for binary ops; "" when absent) and the kernel's
 * context for any other operand. */
typedef struct ew_call {
  const ew_ctx *c;
  const mk_node *n;
  const char *s;
  const char *A, *B;
} ew_call;

typedef int (*ew_emit_fn)(const ew_call *x, mk_buf *o, mk_errmsg *err);

/* One row per op family: the short names it covers (space-separated), the
 * operands node_expr prepares, and either a template (`$A`, `$B` stand for
 * the operands) or an emitter for what reads more arguments. */
typedef struct ew_op {
  const char *names;
  ew_arity arity;
  const char *tmpl;
  ew_emit_fn emit;
} ew_op;

static bool is(const ew_call *x, const char *name) { return strcmp(x->s, name) == 0; }

/* add/sub with torch's alpha; torch.rsub(a, b, alpha) = b - alpha * a and
 * Tensor.__rsub__(self, other) = other - self. */
static int emit_add_sub(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  double alpha = num_or(bi_arg(x->n, 2, "alpha"), 1.0);
  bool minus = !(is(x, "add") || is(x, "radd") || is(x, "iadd"));
  bool rev = is(x, "rsub");
  const char *a = rev ? x->B : x->A, *b = rev ? x->A : x->B;
  mk_buf_printf(o, "%s %s ", a, minus ? "-" : "+");
  if (alpha != 1.0) {
    flt(o, alpha);
    mk_buf_puts(o, " * ");
  }
  return mk_buf_printf(o, "%s", b);
}

static int emit_div(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  bool rev = is(x, "rtruediv") || is(x, "rdiv");
  const char *a = rev ? x->B : x->A, *b = rev ? x->A : x->B;
  const char *mode = bi_arg_str(bi_arg(x->n, 2, "rounding_mode"));
  if (mode && strcmp(mode, "floor") == 0) return mk_buf_printf(o, "tl.floor(%s / %s)", a, b);
  if (mode && strcmp(mode, "trunc") == 0)
    return mk_buf_printf(o, "tl.where(%s / %s < 0, tl.ceil(%s / %s), tl.floor(%s / %s))", a, b, a,
                         b, a, b);
  return mk_buf_printf(o, "%s / %s", a, b);
}

static int emit_floordiv(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  bool rev = is(x, "rfloordiv");
  return mk_buf_printf(o, "tl.floor(%s / %s)", rev ? x->B : x->A, rev ? x->A : x->B);
}

static int emit_pow(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  bool rev = is(x, "rpow");
  const char *base = rev ? x->B : x->A, *ex = rev ? x->A : x->B;
  const cJSON *exa = rev ? bi_arg(x->n, 0, "self") : bi_arg(x->n, 1, "exponent");
  double e;
  if (bi_arg_number(exa, &e)) {
    if (e == 1.0) return mk_buf_printf(o, "%s", base);
    if (e == 2.0) return mk_buf_printf(o, "%s * %s", base, base);
    if (e == 3.0) return mk_buf_printf(o, "%s * %s * %s", base, base, base);
    if (e == 0.5) return mk_buf_printf(o, "tl.sqrt(%s)", base);
    if (e == -1.0) return mk_buf_printf(o, "1.0 / %s", base);
    if (e == -0.5) return mk_buf_printf(o, "tl.rsqrt(%s)", base);
    if (e == 0.0) return mk_buf_printf(o, "%s * 0.0 + 1.0", base);
    if (e == floor(e) && fabs(e) <= 8) {
      /* Integer powers of negative bases keep their sign: repeated products. */
      mk_buf_puts(o, e < 0 ? "1.0 / (" : "(");
      for (int i = 0; i < (int)fabs(e); i++) mk_buf_printf(o, "%s%s", i ? " * " : "", base);
      return mk_buf_puts(o, ")");
    }
    /* Non-integer exponent: negative bases give nan, as in torch. */
    mk_buf_printf(o, "tl.exp(%s * tl.log(%s))", ex, base);
    return o->err;
  }
  /* number ** tensor */
  double b;
  const cJSON *ba = rev ? bi_arg(x->n, 1, "other") : bi_arg(x->n, 0, "self");
  if (bi_arg_number(ba, &b) && b > 0) {
    mk_buf_printf(o, "tl.exp(%s * ", ex);
    flt(o, log(b));
    return mk_buf_puts(o, ")");
  }
  return mk_errf(err, MK_EUNSUPPORTED, "pow with these operands");
}

static int emit_tanh_op(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  emit_tanh(o, x->A);
  return o->err;
}

static int emit_mish(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  mk_buf sp;
  mk_buf_init(&sp, 4096);
  emit_softplus(&sp, x->A, 1.0, 20.0);
  mk_buf_printf(o, "%s * ", x->A);
  emit_tanh(o, mk_buf_cstr(&sp));
  mk_buf_free(&sp);
  return o->err;
}

static int emit_tanhshrink(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  mk_buf_printf(o, "%s - ", x->A);
  emit_tanh(o, x->A);
  return o->err;
}

static int emit_cast(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  const char *t = tl_dtype(x->c->e->p->g->values[x->n->outputs[0]].dtype);
  if (t == NULL) return mk_errf(err, MK_EUNSUPPORTED, "cast to an unknown dtype");
  return mk_buf_printf(o, "(%s).to(%s)", x->A, t);
}

static int emit_leaky_relu(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  mk_buf_printf(o, "tl.where(%s > 0, %s, %s * ", x->A, x->A, x->A);
  flt(o, num_or(bi_arg(x->n, 1, "negative_slope"), 0.01));
  return mk_buf_puts(o, ")");
}

static int emit_elu(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  double alpha = num_or(bi_arg(x->n, 1, "alpha"), 1.0);
  mk_buf_printf(o, "tl.where(%s > 0, %s, ", x->A, x->A);
  flt(o, alpha);
  if (is(x, "celu")) {
    mk_buf_printf(o, " * (tl.exp(%s / ", x->A);
    flt(o, alpha);
    return mk_buf_puts(o, ") - 1.0))");
  }
  return mk_buf_printf(o, " * (tl.exp(%s) - 1.0))", x->A);
}

static int emit_gelu(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  const char *A = x->A, *ap = bi_arg_str(bi_arg(x->n, 1, "approximate"));
  if (ap && strcmp(ap, "tanh") == 0) {
    mk_buf inner;
    mk_buf_init(&inner, 8192);
    mk_buf_printf(&inner, "0.7978845608028654 * (%s + 0.044715 * %s * %s * %s)", A, A, A, A);
    mk_buf_printf(o, "0.5 * %s * (1.0 + ", A);
    emit_tanh(o, mk_buf_cstr(&inner));
    mk_buf_free(&inner);
    return mk_buf_puts(o, ")");
  }
  return mk_buf_printf(o, "0.5 * %s * (1.0 + tl.erf(%s * 0.7071067811865476))", A, A);
}

static int emit_softplus_op(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  emit_softplus(o, x->A, num_or(bi_arg(x->n, 1, "beta"), 1.0),
                num_or(bi_arg(x->n, 2, "threshold"), 20.0));
  return o->err;
}

static int emit_hardtanh(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  mk_buf_printf(o, "tl.minimum(tl.maximum(%s, ", x->A);
  flt(o, num_or(bi_arg(x->n, 1, "min_val"), -1.0));
  mk_buf_puts(o, "), ");
  flt(o, num_or(bi_arg(x->n, 2, "max_val"), 1.0));
  return mk_buf_puts(o, ")");
}

/* torch.clamp: min(max(x, lo), hi), so hi wins when lo > hi. */
static int emit_clamp(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  const cJSON *lo = is(x, "clamp_max") ? NULL : bi_arg(x->n, 1, "min");
  const cJSON *hi = is(x, "clamp_min") ? NULL : bi_arg(x->n, is(x, "clamp_max") ? 1 : 2, "max");
  char L[512] = "", H[512] = "";
  int rc;
  if (!bi_arg_none(lo) && (rc = operand_str(x->c, lo, L, sizeof L, err))) return rc;
  if (!bi_arg_none(hi) && (rc = operand_str(x->c, hi, H, sizeof H, err))) return rc;
  if (H[0]) mk_buf_puts(o, "tl.minimum(");
  if (L[0]) mk_buf_printf(o, "tl.maximum(%s, %s)", x->A, L);
  else mk_buf_puts(o, x->A);
  if (H[0]) mk_buf_printf(o, ", %s)", H);
  return o->err;
}

/* nan_to_num(x, nan=0.0, posinf=None, neginf=None): None is the largest /
 * lowest finite value of x's dtype, written for float32 (another dtype
 * with a limit left to None is refused: its limits differ). */
static int emit_nan_to_num(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  const double fmax = 3.4028234663852886e38;
  const mk_graph *g = x->c->e->p->g;
  bool f32 = x->n->noutputs > 0 && g->values[x->n->outputs[0]].dtype == MK_DTYPE_F32;
  if (!f32 && (bi_arg_none(bi_arg(x->n, 2, "posinf")) || bi_arg_none(bi_arg(x->n, 3, "neginf"))))
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: nan_to_num of a %s tensor with a default limit",
                   x->n->span.line, mk_dtype_name(g->values[x->n->outputs[0]].dtype));
  mk_buf_printf(o, "tl.where(%s != %s, ", x->A, x->A);
  flt(o, num_or(bi_arg(x->n, 1, "nan"), 0.0));
  mk_buf_printf(o, ", tl.where(%s == float(\"inf\"), ", x->A);
  flt(o, num_or(bi_arg(x->n, 2, "posinf"), fmax));
  mk_buf_printf(o, ", tl.where(%s == float(\"-inf\"), ", x->A);
  flt(o, num_or(bi_arg(x->n, 3, "neginf"), -fmax));
  return mk_buf_printf(o, ", %s)))", x->A);
}

/* torch.remainder / `%` (the divisor's sign, as Python's): Triton's `%` is
 * C's fmod, corrected as ATen does where the signs differ. `rmod` is
 * `number % tensor`. */
static int emit_remainder(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  bool rev = is(x, "rmod") || is(x, "rremainder");
  const char *a = rev ? x->B : x->A, *b = rev ? x->A : x->B;
  return mk_buf_printf(o, "tl.where((%s %% %s != 0) & ((%s %% %s < 0) != (%s < 0)), %s %% %s + %s, %s %% %s)", a, b,
                       a, b, b, a, b, b, a, b);
}

static int emit_threshold(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  mk_buf_printf(o, "tl.where(%s > ", x->A);
  flt(o, num_or(bi_arg(x->n, 1, "threshold"), 0.0));
  mk_buf_printf(o, ", %s, ", x->A);
  flt(o, num_or(bi_arg(x->n, 2, "value"), 0.0));
  return mk_buf_puts(o, ")");
}

static int emit_where(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  char X[512], Y[512], C[512];
  int rc;
  if ((rc = operand_str(x->c, bi_arg(x->n, 1, "input"), X, sizeof X, err))) return rc;
  if ((rc = operand_str(x->c, bi_arg(x->n, 2, "other"), Y, sizeof Y, err))) return rc;
  if ((rc = operand_str(x->c, bi_arg(x->n, 0, "condition"), C, sizeof C, err))) return rc;
  return mk_buf_printf(o, "tl.where(%s != 0, %s, %s)", C, X, Y);
}

/* x.masked_fill(mask, value): the value (a number, -inf for attention's
 * causal mask, or a 0-d tensor) where the mask is set. */
static int emit_masked_fill(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  char M[512], V[512];
  int rc;
  if ((rc = operand_str(x->c, bi_arg(x->n, 1, "mask"), M, sizeof M, err))) return rc;
  if ((rc = operand_str(x->c, bi_arg(x->n, 2, "value"), V, sizeof V, err))) return rc;
  return mk_buf_printf(o, "tl.where(%s != 0, %s, %s)", M, V, x->A);
}

static int emit_addc(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  char T1[512], T2[512];
  int rc;
  if ((rc = operand_str(x->c, bi_arg(x->n, 1, "tensor1"), T1, sizeof T1, err))) return rc;
  if ((rc = operand_str(x->c, bi_arg(x->n, 2, "tensor2"), T2, sizeof T2, err))) return rc;
  mk_buf_printf(o, "%s + ", x->A);
  flt(o, num_or(bi_arg(x->n, 3, "value"), 1.0));
  return mk_buf_printf(o, " * (%s %s %s)", T1, is(x, "addcmul") ? "*" : "/", T2);
}

static int emit_lerp(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  char E[512], W[512];
  int rc;
  if ((rc = operand_str(x->c, bi_arg(x->n, 1, "end"), E, sizeof E, err))) return rc;
  if ((rc = operand_str(x->c, bi_arg(x->n, 2, "weight"), W, sizeof W, err))) return rc;
  return mk_buf_printf(o, "%s + %s * (%s - %s)", x->A, W, E, x->A);
}

static int emit_shrink(const ew_call *x, mk_buf *o, mk_errmsg *err) {
  (void)err;
  const char *A = x->A;
  char L[64];
  mk_buf lb;
  mk_buf_init(&lb, sizeof L);
  flt(&lb, num_or(bi_arg(x->n, 1, "lambd"), 0.5));
  mk_strlcpy(L, mk_buf_cstr(&lb), sizeof L);
  mk_buf_free(&lb);
  if (is(x, "hardshrink")) return mk_buf_printf(o, "tl.where(tl.abs(%s) > %s, %s, 0.0)", A, L, A);
  return mk_buf_printf(o, "tl.where(%s > %s, %s - %s, tl.where(%s < -%s, %s + %s, 0.0))", A, L, A,
                       L, A, L, A, L);
}

static const ew_op ew_ops[] = {
    {"add radd iadd sub subtract isub rsub", A_BINARY, NULL, emit_add_sub},
    {"mul multiply rmul imul", A_BINARY, "$A * $B", NULL},
    {"div divide truediv true_divide itruediv rtruediv rdiv", A_BINARY, NULL, emit_div},
    {"floordiv rfloordiv floor_divide", A_BINARY, NULL, emit_floordiv},
    {"remainder mod rmod", A_BINARY, NULL, emit_remainder},
    {"fmod", A_BINARY, "$A % $B", NULL},
    {"pow rpow", A_BINARY, NULL, emit_pow},
    {"maximum fmax max", A_BINARY, "tl.maximum($A, $B)", NULL},
    {"minimum fmin min", A_BINARY, "tl.minimum($A, $B)", NULL},
    {"lt less", A_BINARY, "$A < $B", NULL},
    {"le", A_BINARY, "$A <= $B", NULL},
    {"gt greater", A_BINARY, "$A > $B", NULL},
    {"ge", A_BINARY, "$A >= $B", NULL},
    {"eq", A_BINARY, "$A == $B", NULL},
    {"ne", A_BINARY, "$A != $B", NULL},
    {"logical_and and", A_BINARY, "($A != 0) & ($B != 0)", NULL},
    {"logical_or or", A_BINARY, "($A != 0) | ($B != 0)", NULL},
    {"neg negative", A_UNARY, "-$A", NULL},
    {"pos clone detach identity", A_UNARY, "$A", NULL},
    {"abs", A_UNARY, "tl.abs($A)", NULL},
    {"exp", A_UNARY, "tl.exp($A)", NULL},
    {"exp2", A_UNARY, "tl.exp2($A)", NULL},
    {"expm1", A_UNARY, "tl.exp($A) - 1.0", NULL},
    {"log", A_UNARY, "tl.log($A)", NULL},
    {"log2", A_UNARY, "tl.log2($A)", NULL},
    {"log10", A_UNARY, "tl.log($A) * 0.4342944819032518", NULL},
    {"log1p", A_UNARY, "tl.log(1.0 + $A)", NULL},
    {"sqrt", A_UNARY, "tl.sqrt($A)", NULL},
    {"rsqrt", A_UNARY, "tl.rsqrt($A)", NULL},
    {"reciprocal", A_UNARY, "1.0 / $A", NULL},
    {"square", A_UNARY, "$A * $A", NULL},
    {"sin", A_UNARY, "tl.sin($A)", NULL},
    {"cos", A_UNARY, "tl.cos($A)", NULL},
    {"tan", A_UNARY, "tl.sin($A) / tl.cos($A)", NULL},
    {"tanh", A_UNARY, NULL, emit_tanh_op},
    {"sigmoid", A_UNARY, "1.0 / (1.0 + tl.exp(-$A))", NULL},
    {"erf", A_UNARY, "tl.erf($A)", NULL},
    {"floor", A_UNARY, "tl.floor($A)", NULL},
    {"ceil", A_UNARY, "tl.ceil($A)", NULL},
    {"sign", A_UNARY, "tl.where($A > 0, 1.0, tl.where($A < 0, -1.0, 0.0))", NULL},
    {"relu", A_UNARY, "tl.where($A > 0, $A, 0.0)", NULL},
    {"relu6", A_UNARY, "tl.minimum(tl.maximum($A, 0.0), 6.0)", NULL},
    {"silu", A_UNARY, "$A / (1.0 + tl.exp(-$A))", NULL},
    {"mish", A_UNARY, NULL, emit_mish},
    {"selu", A_UNARY,
     "1.0507009873554805 * tl.where($A > 0, $A, 1.6732632423543772 * (tl.exp($A) - 1.0))", NULL},
    {"hardswish", A_UNARY, "$A * tl.minimum(tl.maximum($A + 3.0, 0.0), 6.0) / 6.0", NULL},
    {"hardsigmoid", A_UNARY, "tl.minimum(tl.maximum($A + 3.0, 0.0), 6.0) / 6.0", NULL},
    {"logsigmoid", A_UNARY, "tl.minimum($A, 0.0) - tl.log(1.0 + tl.exp(-tl.abs($A)))", NULL},
    {"softsign", A_UNARY, "$A / (1.0 + tl.abs($A))", NULL},
    {"tanhshrink", A_UNARY, NULL, emit_tanhshrink},
    {"logical_not", A_UNARY, "$A == 0", NULL},
    {"float half bfloat16", A_UNARY, NULL, emit_cast},
    {"to type_as", A_OTHER, NULL, emit_cast},
    {"leaky_relu", A_OTHER, NULL, emit_leaky_relu},
    {"elu celu", A_OTHER, NULL, emit_elu},
    {"gelu", A_OTHER, NULL, emit_gelu},
    {"softplus", A_OTHER, NULL, emit_softplus_op},
    {"hardtanh", A_OTHER, NULL, emit_hardtanh},
    {"clamp clip clamp_min clamp_max", A_OTHER, NULL, emit_clamp},
    {"threshold", A_OTHER, NULL, emit_threshold},
    {"nan_to_num", A_OTHER, NULL, emit_nan_to_num},
    {"where", A_OTHER, NULL, emit_where},
    {"masked_fill", A_OTHER, NULL, emit_masked_fill},
    /* p == 0 or eval mode (bi_ew_supported refuses the rest): identity */
    {"dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout", A_OTHER, "$A",
     NULL},
    {"addcmul addcdiv", A_OTHER, NULL, emit_addc},
    {"lerp", A_OTHER, NULL, emit_lerp},
    {"hardshrink softshrink", A_OTHER, NULL, emit_shrink},
};

/* True if `name` is one of the space-separated words of `names`. */
static bool names_have(const char *names, const char *name) {
  size_t len = strlen(name);
  for (const char *p = names; *p;) {
    const char *end = strchr(p, ' ');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == len && memcmp(p, name, len) == 0) return true;
    if (end == NULL) break;
    p = end + 1;
  }
  return false;
}

static const ew_op *find_op(const char *s) {
  for (size_t i = 0; i < sizeof ew_ops / sizeof ew_ops[0]; i++)
    if (names_have(ew_ops[i].names, s)) return &ew_ops[i];
  return NULL;
}

/* A template with `$A` and `$B` replaced by the operands. */
static int emit_template(const char *tmpl, const ew_call *x, mk_buf *o) {
  for (const char *p = tmpl; *p; p++) {
    if (p[0] == '$' && (p[1] == 'A' || p[1] == 'B')) {
      mk_buf_puts(o, p[1] == 'A' ? x->A : x->B);
      p++;
    } else {
      mk_buf_putc(o, *p);
    }
  }
  return o->err;
}

/* Appends the expression for node n: its operands, then its row's template
 * or emitter. */
static int node_expr(const ew_ctx *c, const mk_node *n, mk_buf *o, mk_errmsg *err) {
  char s[64];
  bi_short(n, s, sizeof s);
  char A[512] = "", B[512] = "";
  int rc = 0;
  const cJSON *a0 = bi_arg(n, 0, "input");
  if (a0 == NULL) a0 = bi_arg(n, 0, "self");
  const ew_op *op = find_op(s);
  if (op == NULL) return mk_errf(err, MK_EUNSUPPORTED, "no elementwise kernel for %s", n->op);
  if (a0) rc = operand_str(c, a0, A, sizeof A, err);
  if (rc) return rc;
  if (op->arity == A_BINARY) {
    const cJSON *a1 = bi_arg(n, 1, "other");
    if (a1 == NULL) a1 = bi_arg(n, 1, "exponent");
    if (a1 == NULL) return mk_errf(err, MK_EUNSUPPORTED, "%s without a second operand", n->op);
    rc = operand_str(c, a1, B, sizeof B, err);
    if (rc) return rc;
  }
  ew_call x = {c, n, s, A, B};
  return op->tmpl ? emit_template(op->tmpl, &x, o) : op->emit(&x, o, err);
}

/* ---- kernel parameters and body --------------------------------------------- */

static int dims_product(const char *pfx, int lo, int hi, mk_buf *out) {
  for (int d = lo; d <= hi; d++) mk_buf_printf(out, "%s%sD%d", d > lo ? " * " : "", pfx, d);
  return out->err;
}

/* What the launcher appends to a leaf's name when it passes it (and takes its
 * strides): the leaf must be in the layout its kernel code reads. In place
 * targets and leaves read through their strides are passed as they are;
 * channels_last leaves of a channels_last stage are made so (a no-op for the
 * conv outputs they come from); other dense leaves are made contiguous. */
/* A leaf loaded at the bind's channels_last offsets (bi_ew_bind.cl_offs). */
static bool at_cl_offs(const bi_emit *e, int s, bi_ew_bind bind, const leaf *l) {
  return bind.cl_offs && !l->bound && !l->mutated && !l->scalar && bi_is_cl_value(e, l->vid) &&
         same_dims(&e->p->g->values[l->vid], &e->p->st[s]);
}

/* An in-place target read and written at the bind's channels_last offsets: a
 * channels_last value of this module with the stage's shape, passed as it is
 * (the composition and the verifier give it its planned layout), as
 * ResNet's and ShuffleNet's `out += shortcut` after a tiled batch norm. */
static bool inplace_at_cl_offs(const bi_emit *e, int s, bi_ew_bind bind, const leaf *l) {
  return bind.cl_offs && !l->bound && l->mutated && !l->scalar && bi_is_cl_value(e, l->vid) &&
         same_dims(&e->p->g->values[l->vid], &e->p->st[s]);
}

static const char *leaf_layout(const bi_emit *e, const leaf *l, int R) {
  bool cl_value = bi_is_cl_value(e, l->vid);
  if (l->mutated) return "";
  if (l->cl && cl_value && l->full)
    return R == 5 ? ".contiguous(memory_format=torch.channels_last_3d)"
                  : ".contiguous(memory_format=torch.channels_last)";
  if (l->cl || cl_value) return "";
  return ".contiguous()";
}

int bi_ew_params(bi_emit *e, int s, const char *pfx, const char *shape_var, bi_ew_bind bind,
                 mk_buf *sig, mk_buf *call, mk_errmsg *err) {
  leaf ls[MAX_LEAVES];
  int nl = 0;
  int rc = stage_leaves(e, s, bind, ls, &nl, err);
  if (rc) return rc;
  const bi_plan *p = e->p;
  int R = p->st[s].rank;
  bool cl = nl > 0 && ls[0].cl;
  for (int i = 0; i < nl; i++) {
    if (ls[i].bound) continue;
    mk_buf_printf(sig, "%s", pfx);
    bi_run_name(p, ls[i].vid, sig);
    mk_buf_puts(sig, "_ptr, ");
    bi_run_name(p, ls[i].vid, call);
    mk_buf_puts(call, at_cl_offs(e, s, bind, &ls[i])
                          ? (R == 5 ? ".contiguous(memory_format=torch.channels_last_3d)"
                                    : ".contiguous(memory_format=torch.channels_last)")
                          : leaf_layout(e, &ls[i], R));
    mk_buf_puts(call, ", ");
    if (ls[i].bias >= 0) {
      mk_buf_printf(sig, "%s", pfx);
      bi_run_name(p, ls[i].vid, sig);
      mk_buf_puts(sig, "_bias_ptr, ");
      bi_run_name(p, ls[i].bias, call);
      mk_buf_puts(call, ".contiguous(), ");
    }
  }
  /* Outputs that are not written back into a leaf. */
  int stored[64];
  bool fused = p->st[s].fused_into >= 0;
  int ns = fused && p->st[p->st[s].fused_into].pro == s ? 0 : bi_stage_stored(p, s, stored, 64);
  for (int i = 0; i < ns; i++) {
    const mk_value *v = &p->g->values[stored[i]];
    const mk_node *prod = &p->g->nodes[v->producer];
    bool alias = false;
    for (int m = 0; m < prod->nmutates; m++)
      for (int l = 0; l < nl; l++) alias |= ls[l].vid == prod->mutates[m] && !ls[l].bound;
    if (alias) continue;
    mk_buf_printf(sig, "%s", pfx);
    bi_run_name(p, stored[i], sig);
    mk_buf_puts(sig, "_ptr, ");
    bi_run_name(p, stored[i], call);
    mk_buf_puts(call, ", ");
  }
  /* Every dim but the first as a compile-time constant: the channel index of a
   * broadcast operand, `offs // (D2 * D3) % D1`, is then a multiply and a shift
   * instead of integer divisions by runtime values, 7% of an NCHW tail on an
   * H100 (docs/bench/probes-h100); Triton compiles once per shape, as inductor
   * does, and the batch stays a runtime value. */
  for (int d = 0; d < R; d++) {
    mk_buf_printf(sig, "%sD%d%s, ", pfx, d, bi_dim_constexpr(d));
    mk_buf_printf(call, "%s[%d], ", shape_var, iter_dim(cl, R, d));
  }
  for (int i = 0; i < nl; i++) {
    if (ls[i].bound || ls[i].scalar || ls[i].full || at_cl_offs(e, s, bind, &ls[i])) continue;
    for (int r = 0; r < ls[i].nruns; r++) {
      mk_buf_printf(sig, "%s", pfx);
      bi_run_name(p, ls[i].vid, sig);
      mk_buf_printf(sig, "_stride%d, ", ls[i].run_hi[r]);
    }
    if (ls[i].nruns == 0) continue;
    /* Strides of the run ends, checked against the captured broadcast pattern. */
    mk_buf_puts(call, "*_bcast_strides(");
    if (cl) {
      mk_buf_puts(call, "_mk_cl_view(");
      bi_run_name(p, ls[i].vid, call);
      mk_buf_printf(call, ", %d), _mk_cl_order(%s), (", R, shape_var);
    } else {
      bi_run_name(p, ls[i].vid, call);
      mk_buf_printf(call, "%s, %s, (", leaf_layout(e, &ls[i], R), shape_var);
    }
    for (int r = 0; r < ls[i].nruns; r++)
      mk_buf_printf(call, "(%d, %d), ", ls[i].run_lo[r], ls[i].run_hi[r]);
    mk_buf_puts(call, ")), ");
    e->need_bcast = true;
    e->need_cl_helpers |= cl;
  }
  return sig->err ? sig->err : call->err;
}

static int leaf_index(const bi_plan *p, const leaf *l, int R, const char *pfx, const char *offs,
                      mk_buf *out) {
  if (l->full) return mk_buf_puts(out, offs);
  for (int r = 0; r < l->nruns; r++) {
    int lo = l->run_lo[r], hi = l->run_hi[r];
    if (r) mk_buf_puts(out, " + ");
    mk_buf_puts(out, "(");
    if (hi < R - 1) {
      mk_buf_printf(out, "(%s // (", offs);
      dims_product(pfx, hi + 1, R - 1, out);
      mk_buf_puts(out, "))");
    } else {
      mk_buf_printf(out, "%s", offs);
    }
    if (lo > 0) {
      mk_buf_puts(out, " % (");
      dims_product(pfx, lo, hi, out);
      mk_buf_puts(out, ")");
    }
    mk_buf_printf(out, ") * %s", pfx);
    bi_run_name(p, l->vid, out);
    mk_buf_printf(out, "_stride%d", hi);
  }
  return out->err;
}

/* The conv bias left out of the conv call, added to the leaf once loaded: its
 * channel index is the leaf's channel dim in the iteration order. */
static int load_folded_bias(const ew_ctx *c, const leaf *l, int R, const char *offs,
                            const char *mask, int indent, mk_buf *out) {
  mk_buf_indent(out, indent);
  reg_name(c, l->vid, out);
  mk_buf_puts(out, " += tl.load(");
  mk_buf_puts(out, c->pfx);
  bi_run_name(c->e->p, l->vid, out);
  mk_buf_printf(out, "_bias_ptr + ((%s", offs);
  if (l->cdim < R - 1) {
    mk_buf_puts(out, " // (");
    dims_product(c->pfx, l->cdim + 1, R - 1, out);
    mk_buf_puts(out, ")");
  }
  mk_buf_printf(out, ") %% %sD%d), mask=%s, other=0)  # conv bias, folded\n", c->pfx, l->cdim,
                mask);
  return out->err;
}

int bi_ew_body(bi_emit *e, int s, const char *pfx, const char *offs, const char *mask,
               bi_ew_bind bind, bool store, int indent, mk_buf *out, mk_errmsg *err) {
  leaf ls[MAX_LEAVES];
  int nl = 0;
  int rc = stage_leaves(e, s, bind, ls, &nl, err);
  if (rc) return rc;
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  ew_ctx c = {.e = e, .s = s, .pfx = pfx, .bind = bind};
  for (int i = 0; i < nl; i++) {
    if (ls[i].bound) continue;
    mk_buf_indent(out, indent);
    reg_name(&c, ls[i].vid, out);
    mk_buf_puts(out, " = tl.load(");
    mk_buf_puts(out, pfx);
    bi_run_name(p, ls[i].vid, out);
    if (ls[i].scalar) {
      mk_buf_puts(out, "_ptr)\n");
      continue;
    }
    mk_buf_puts(out, "_ptr + ");
    if (at_cl_offs(e, s, bind, &ls[i]) || inplace_at_cl_offs(e, s, bind, &ls[i]))
      mk_buf_puts(out, bind.cl_offs); /* dense channels_last */
    else leaf_index(p, &ls[i], st->rank, pfx, offs, out);
    mk_buf_printf(out, ", mask=%s, other=0)\n", mask);
    if (ls[i].bias >= 0) load_folded_bias(&c, &ls[i], st->rank, offs, mask, indent, out);
  }
  for (int i = 0; i < st->nnodes; i++) {
    const mk_node *n = &p->g->nodes[st->nodes[i]];
    mk_buf_indent(out, indent);
    mk_buf_printf(out, "v%d = ", n->outputs[0]);
    rc = node_expr(&c, n, out, err);
    if (rc) return rc;
    char sn[64];
    mk_buf_printf(out, "  # %s (line %d)\n", bi_short(n, sn, sizeof sn), n->span.line);
  }
  if (!store) return out->err;
  int stored[64];
  int ns = bi_stage_stored(p, s, stored, 64);
  for (int i = 0; i < ns; i++) {
    const mk_value *v = &p->g->values[stored[i]];
    const mk_node *prod = &p->g->nodes[v->producer];
    int target = stored[i];
    const char *target_offs = bind.store_offs ? bind.store_offs : offs;
    for (int m = 0; m < prod->nmutates; m++)
      for (int l = 0; l < nl; l++)
        if (ls[l].vid == prod->mutates[m] && !ls[l].bound) {
          target = ls[l].vid;
          if (inplace_at_cl_offs(e, s, bind, &ls[l])) target_offs = bind.cl_offs; /* where it was read */
        }
    mk_buf_indent(out, indent);
    mk_buf_printf(out, "tl.store(%s", pfx);
    bi_run_name(p, target, out);
    mk_buf_printf(out, "_ptr + %s, v%d, mask=%s)\n", target_offs, stored[i], mask);
  }
  return out->err;
}

int bi_ew_shape_lines(bi_emit *e, int s, const char *shape_var, bi_ew_bind bind,
                      const char *bind_shape, mk_buf *out, mk_errmsg *err) {
  leaf ls[MAX_LEAVES];
  int nl = 0;
  int rc = stage_leaves(e, s, bind, ls, &nl, err);
  if (rc) return rc;
  mk_buf_printf(out, "    %s = torch.broadcast_shapes(", shape_var);
  for (int i = 0; i < nl; i++) {
    if (ls[i].bound) mk_buf_printf(out, "%s, ", bind_shape);
    else {
      bi_run_name(e->p, ls[i].vid, out);
      mk_buf_puts(out, ".shape, ");
    }
  }
  return mk_buf_puts(out, ")\n");
}

/* A tensor the stage reads, to take the device from. */
int bi_ew_device_of(bi_emit *e, int s, bi_ew_bind bind, mk_buf *out, mk_errmsg *err) {
  leaf ls[MAX_LEAVES];
  int nl = 0;
  int rc = stage_leaves(e, s, bind, ls, &nl, err);
  if (rc) return rc;
  for (int i = 0; i < nl; i++) {
    if (ls[i].bound) continue;
    bi_run_name(e->p, ls[i].vid, out);
    return mk_buf_puts(out, ".device");
  }
  return mk_errf(err, MK_EUNSUPPORTED, "elementwise run reads no tensor");
}

int bi_ew_alloc_lines(bi_emit *e, int s, const char *shape_var, const char *like, mk_buf *out,
                      mk_errmsg *err) {
  const bi_plan *p = e->p;
  bool cl = bi_ew_channels_last(e, s) || (e->alloc_cl && (p->st[s].rank == 4 || p->st[s].rank == 5));
  int stored[64];
  int ns = bi_stage_stored(p, s, stored, 64);
  for (int i = 0; i < ns; i++) {
    const mk_value *v = &p->g->values[stored[i]];
    const mk_node *prod = &p->g->nodes[v->producer];
    if (prod->nmutates > 0 && !produced_in(p, s, prod->mutates[0]) &&
        !bi_plan_applied_value(p, prod->mutates[0])) {
      /* In place on a tensor from outside: same tensor, as in the reference
       * (a norm's value applied on load has no tensor: a fresh one, below). */
      mk_buf_indent(out, 4);
      bi_run_name(p, stored[i], out);
      mk_buf_puts(out, " = ");
      bi_run_name(p, prod->mutates[0], out);
      mk_buf_puts(out, "\n");
      continue;
    }
    const char *dt = bi_torch_dtype(v->dtype);
    if (dt == NULL) return mk_errf(err, MK_EUNSUPPORTED, "value %d has an unknown dtype", stored[i]);
    mk_buf_indent(out, 4);
    bi_run_name(p, stored[i], out);
    mk_buf_printf(out, " = torch.empty(%s, device=%s, dtype=torch.%s%s)\n", shape_var, like, dt,
                  !cl ? "" : p->st[s].rank == 5 ? ", memory_format=torch.channels_last_3d"
                                                : ", memory_format=torch.channels_last");
  }
  return out->err;
}

int bi_kernel_name(bi_emit *e, int s, const char *what, mk_buf *out) {
  mk_buf_printf(out, "_%s", what);
  if (s >= 0) {
    mk_buf_putc(out, '_');
    bi_stage_label(e->p, s, out);
  }
  return mk_buf_printf(out, "_kernel%d", e->kcount);
}

int bi_emit_ew_stage(bi_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  bi_ew_bind nobind = {.value = -1, .var = NULL};
  int res = bi_stage_result(p, s);
  int stored[64];
  int ns = bi_stage_stored(p, s, stored, 64);
  if (ns == 0) return 0; /* nothing it computes is used: dead code */
  char shape_var[32], n_var[32];
  snprintf(shape_var, sizeof shape_var, "shape%d", res);
  snprintf(n_var, sizeof n_var, "n%d", res);
  mk_buf kname, sig, call, dev;
  mk_buf_init(&kname, 256);
  mk_buf_init(&sig, 0);
  mk_buf_init(&call, 0);
  mk_buf_init(&dev, 256);
  e->kcount++;
  bi_kernel_name(e, s, "ew", &kname);
  int rc = bi_ew_params(e, s, "", shape_var, nobind, &sig, &call, err);
  if (!rc) rc = bi_ew_device_of(e, s, nobind, &dev, err);
  if (!rc) {
    /* kernel */
    mk_buf *k = e->kernels;
    mk_buf_printf(k, "\n\n@triton.jit\ndef %s(%snumel, BLOCK: tl.constexpr, IDX64: tl.constexpr):\n",
                  mk_buf_cstr(&kname), mk_buf_cstr(&sig));
    bi_stage_comment(p, s, 4, k);
    mk_buf_puts(k, "    pid = tl.program_id(0)\n"
                   "    lanes = tl.arange(0, BLOCK)\n"
                   "    if IDX64:  # more than 2**31 elements: 64-bit offsets\n"
                   "        pid = pid.to(tl.int64)\n"
                   "        lanes = lanes.to(tl.int64)\n"
                   "    offs = pid * BLOCK + lanes\n"
                   "    mask = offs < numel\n");
    rc = bi_ew_body(e, s, "", "offs", "mask", nobind, true, 4, k, err);
  }
  if (!rc) {
    mk_buf *b = e->body;
    bi_stage_comment(p, s, 4, b);
    rc = bi_ew_shape_lines(e, s, shape_var, nobind, NULL, b, err);
    if (!rc) rc = bi_ew_alloc_lines(e, s, shape_var, mk_buf_cstr(&dev), b, err);
    if (!rc) {
      mk_buf_printf(b, "    %s = math.prod(%s)\n", n_var, shape_var);
      mk_buf_printf(b, "    if %s > 0:\n", n_var);
      mk_buf_printf(b, "        %s[(triton.cdiv(%s, %d),)](\n            %s%s, BLOCK=%d, IDX64=%s >= 2**31, "
                       "num_warps=%d)\n",
                    mk_buf_cstr(&kname), n_var, e->cfg->block, mk_buf_cstr(&call), n_var,
                    e->cfg->block, n_var, e->cfg->warps);
    }
  }
  (void)st;
  /* Its outputs are channels_last too: the next stages read them in that order. */
  if (!rc && bi_ew_channels_last(e, s))
    for (int i = 0; i < ns; i++) bi_add_cl_value(e, stored[i]);
  mk_buf_free(&kname);
  mk_buf_free(&sig);
  mk_buf_free(&call);
  mk_buf_free(&dev);
  if (!rc && (e->kernels->err || e->body->err)) rc = mk_errf(err, MK_ERANGE, "generated code too large");
  return rc;
}
