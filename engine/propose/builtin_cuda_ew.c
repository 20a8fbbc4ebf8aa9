/* builtin_cuda_ew.c — elementwise runs as CUDA C++ kernels.
 *
 * One thread per element of the run's broadcast shape (flat offset `offs`).
 * A leaf with the run's shape at capture is passed contiguous and read at
 * `offs` (the launcher checks its shape at run time); every other leaf —
 * broadcast parameters, 0-d tensors, views with any strides — is read
 * through its broadcast strides (torch.broadcast_to(t, shape).stride(), 0
 * on broadcast dims) at the thread's multi-index, so no layout or broadcast
 * pattern needs to match the capture. Registers are float (bool for
 * comparisons); the expressions follow the Triton emitter's (builtin_ew.c)
 * so both backends compute the same formulas. */
#include "builtin_cuda.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *bc_ctype(mk_dtype d) {
  switch (d) {
  case MK_DTYPE_F32: return "float";
  case MK_DTYPE_BOOL: return "bool";
  default: return NULL;
  }
}

int bc_float(double d, mk_buf *out) {
  if (isnan(d)) return mk_buf_puts(out, "__int_as_float(0x7fc00000)");
  if (isinf(d)) return mk_buf_puts(out, d > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)");
  char t[64];
  snprintf(t, sizeof t, "%.9g", d);
  mk_buf_puts(out, t);
  if (!strpbrk(t, ".e")) mk_buf_puts(out, ".0");
  return mk_buf_putc(out, 'f');
}

/* ---- leaves ------------------------------------------------------------------- */

typedef struct cleaf {
  int vid;
  bool full;    /* the run's shape at capture: contiguous, read at offs */
  bool mutated; /* an in-place op of the run writes into it */
  bool bound;   /* a fused epilogue's anchor value: in a register, not a parameter */
} cleaf;

#define BC_MAX_LEAVES 64

static bool made_in(const bi_plan *p, int s, int vid) {
  const mk_value *v = &p->g->values[vid];
  return v->kind == MK_VALUE_NODE && v->producer >= 0 && p->stage_of[v->producer] == s;
}

static void tensors_of(const cJSON *a, int *ids, int *n, int max) {
  if (a == NULL) return;
  int t = bi_arg_tensor(a);
  if (t >= 0) {
    if (*n < max) ids[(*n)++] = t;
    return;
  }
  if (cJSON_IsArray(a) || cJSON_IsObject(a))
    for (const cJSON *c = a->child; c; c = c->next) tensors_of(c, ids, n, max);
}

static bool same_dims(const mk_value *v, const bi_stage *st) {
  if (v->rank != st->rank) return false;
  for (int d = 0; d < v->rank; d++)
    if (v->shape[d] != st->shape[d]) return false;
  return true;
}

static int leaves_of(const bi_plan *p, int s, cleaf *ls, int *nl, mk_errmsg *err) {
  const bi_stage *st = &p->st[s];
  *nl = 0;
  for (int i = 0; i < st->nnodes; i++) {
    const mk_node *n = &p->g->nodes[st->nodes[i]];
    int ids[32], cnt = 0;
    tensors_of(n->args, ids, &cnt, 32);
    tensors_of(n->kwargs, ids, &cnt, 32);
    for (int k = 0; k < cnt; k++) {
      if (ids[k] < 0 || ids[k] >= p->g->nvalues)
        return mk_errf(err, MK_EINVAL, "node %d reads value %d, which does not exist", n->id, ids[k]);
      if (made_in(p, s, ids[k])) continue;
      bool seen = false;
      for (int j = 0; j < *nl && !seen; j++) seen = ls[j].vid == ids[k];
      if (seen) continue;
      if (*nl >= BC_MAX_LEAVES) return mk_errf(err, MK_EUNSUPPORTED, "elementwise run reads too many tensors");
      const mk_value *v = &p->g->values[ids[k]];
      if (v->dtype != MK_DTYPE_F32 && v->dtype != MK_DTYPE_BOOL)
        return mk_errf(err, MK_EUNSUPPORTED, "line %d: the CUDA generator writes float32 kernels only (%s reads another dtype)",
                       n->span.line, n->op);
      ls[*nl] = (cleaf){.vid = ids[k], .full = same_dims(v, st)};
      (*nl)++;
    }
  }
  for (int i = 0; i < *nl; i++)
    for (int k = 0; k < st->nnodes; k++) {
      const mk_node *n = &p->g->nodes[st->nodes[k]];
      for (int m = 0; m < n->nmutates; m++) ls[i].mutated |= n->mutates[m] == ls[i].vid;
    }
  for (int i = 0; i < *nl; i++)
    if (ls[i].mutated && !ls[i].full)
      return mk_errf(err, MK_EUNSUPPORTED, "an in-place op writes a tensor of another shape");
  return 0;
}

/* ---- expressions ---------------------------------------------------------------- */

typedef struct cctx {
  const bi_plan *p;
  int s;
} cctx;

static int reg(const cctx *c, int vid, mk_buf *out) {
  if (made_in(c->p, c->s, vid)) return mk_buf_printf(out, "v%d", vid);
  mk_buf_puts(out, "r_");
  return bi_run_name(c->p, vid, out);
}

static int operand(const cctx *c, const cJSON *a, char *buf, size_t size, mk_errmsg *err) {
  mk_buf b;
  mk_buf_init(&b, size);
  int t = bi_arg_tensor(a);
  double d;
  int rc = 0;
  if (t >= 0) reg(c, t, &b);
  else if (bi_arg_number(a, &d)) bc_float(d, &b);
  else rc = mk_errf(err, MK_EUNSUPPORTED, "an elementwise operand is neither a tensor nor a number");
  if (rc == 0 && b.err) rc = mk_errf(err, MK_ERANGE, "operand too long");
  if (rc == 0) mk_strlcpy(buf, mk_buf_cstr(&b), size);
  mk_buf_free(&b);
  return rc;
}

static double num_or(const cJSON *a, double def) {
  double d;
  return bi_arg_number(a, &d) ? d : def;
}

static int lit(const cJSON *a, double def, char *buf, size_t size) {
  mk_buf b;
  mk_buf_init(&b, size);
  bc_float(num_or(a, def), &b);
  int rc = b.err;
  if (rc == 0) mk_strlcpy(buf, mk_buf_cstr(&b), size);
  mk_buf_free(&b);
  return rc;
}

/* Unary ops whose CUDA form is one template over the operand "%1$s". */
static const struct {
  const char *name;
  const char *fmt; /* uses the operand as the only %s, possibly repeated */
  int uses;        /* how many times the operand appears */
} unary[] = {
    {"neg", "(-%s)", 1}, {"negative", "(-%s)", 1}, {"pos", "%s", 1}, {"clone", "%s", 1},
    {"detach", "%s", 1}, {"identity", "%s", 1}, {"float", "%s", 1}, {"abs", "fabsf(%s)", 1},
    {"exp", "expf(%s)", 1}, {"exp2", "exp2f(%s)", 1}, {"expm1", "expm1f(%s)", 1},
    {"log", "logf(%s)", 1}, {"log2", "log2f(%s)", 1}, {"log10", "log10f(%s)", 1},
    {"log1p", "log1pf(%s)", 1}, {"sqrt", "sqrtf(%s)", 1}, {"rsqrt", "rsqrtf(%s)", 1},
    {"reciprocal", "(1.0f / %s)", 1}, {"square", "(%s * %s)", 2}, {"sin", "sinf(%s)", 1},
    {"cos", "cosf(%s)", 1}, {"tan", "tanf(%s)", 1}, {"tanh", "tanhf(%s)", 1},
    {"sigmoid", "mk_sigmoid(%s)", 1}, {"erf", "erff(%s)", 1}, {"floor", "floorf(%s)", 1},
    {"ceil", "ceilf(%s)", 1}, {"sign", "mk_sign(%s)", 1}, {"relu", "mk_relu(%s)", 1},
    {"relu6", "mk_min(mk_max(%s, 0.0f), 6.0f)", 1}, {"silu", "(%s * mk_sigmoid(%s))", 2},
    {"mish", "(%s * tanhf(mk_softplus(%s, 1.0f, 20.0f)))", 2},
    {"selu", "(1.05070099f * ((%s) > 0.0f ? (%s) : 1.67326319f * expm1f(%s)))", 3},
    {"hardswish", "(%s * mk_min(mk_max(%s + 3.0f, 0.0f), 6.0f) / 6.0f)", 2},
    {"hardsigmoid", "(mk_min(mk_max(%s + 3.0f, 0.0f), 6.0f) / 6.0f)", 1},
    {"logsigmoid", "(fminf(%s, 0.0f) - log1pf(expf(-fabsf(%s))))", 2},
    {"softsign", "(%s / (1.0f + fabsf(%s)))", 2}, {"tanhshrink", "(%s - tanhf(%s))", 2},
    {"logical_not", "(%s == 0)", 1},
};

/* Binary ops: "%s" twice, first A then B. */
static const struct {
  const char *name;
  const char *fmt;
  bool rev; /* operands swapped (__rsub__, __rtruediv__) */
} binary[] = {
    {"mul", "(%s * %s)", false}, {"multiply", "(%s * %s)", false}, {"rmul", "(%s * %s)", false},
    {"imul", "(%s * %s)", false}, {"div", "(%s / %s)", false}, {"divide", "(%s / %s)", false},
    {"truediv", "(%s / %s)", false}, {"true_divide", "(%s / %s)", false},
    {"itruediv", "(%s / %s)", false}, {"rtruediv", "(%s / %s)", true}, {"rdiv", "(%s / %s)", true},
    {"floordiv", "floorf(%s / %s)", false}, {"floor_divide", "floorf(%s / %s)", false},
    {"rfloordiv", "floorf(%s / %s)", true}, {"maximum", "mk_max(%s, %s)", false},
    {"minimum", "mk_min(%s, %s)", false}, {"max", "mk_max(%s, %s)", false},
    {"min", "mk_min(%s, %s)", false}, {"fmax", "fmaxf(%s, %s)", false},
    {"fmin", "fminf(%s, %s)", false}, {"lt", "(%s < %s)", false}, {"less", "(%s < %s)", false},
    {"le", "(%s <= %s)", false}, {"gt", "(%s > %s)", false}, {"greater", "(%s > %s)", false},
    {"ge", "(%s >= %s)", false}, {"eq", "(%s == %s)", false}, {"ne", "(%s != %s)", false},
    {"logical_and", "((%s != 0) && (%s != 0))", false}, {"and", "((%s != 0) && (%s != 0))", false},
    {"logical_or", "((%s != 0) || (%s != 0))", false}, {"or", "((%s != 0) || (%s != 0))", false},
};

static int unary_expr(const char *s, const char *A, mk_buf *o) {
  for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++) {
    if (strcmp(unary[i].name, s) != 0) continue;
    if (unary[i].uses == 1) return mk_buf_printf(o, unary[i].fmt, A) ? o->err : 1;
    if (unary[i].uses == 2) return mk_buf_printf(o, unary[i].fmt, A, A) ? o->err : 1;
    return mk_buf_printf(o, unary[i].fmt, A, A, A) ? o->err : 1;
  }
  return 0;
}

static int first_operand(const cctx *c, const mk_node *n, char *A, size_t size, mk_errmsg *err) {
  const cJSON *a0 = bi_arg(n, 0, "input");
  if (a0 == NULL) a0 = bi_arg(n, 0, "self");
  if (a0 == NULL) return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s without an input", n->span.line, n->op);
  return operand(c, a0, A, size, err);
}

static int pow_expr(const cctx *c, const mk_node *n, bool rev, const char *A, const char *B, mk_buf *o,
                    mk_errmsg *err) {
  const char *base = rev ? B : A;
  double e;
  if (bi_arg_number(rev ? bi_arg(n, 0, "self") : bi_arg(n, 1, "exponent"), &e)) {
    if (e == 2.0) return mk_buf_printf(o, "(%s * %s)", base, base);
    if (e == 3.0) return mk_buf_printf(o, "(%s * %s * %s)", base, base, base);
    if (e == 0.5) return mk_buf_printf(o, "sqrtf(%s)", base);
    if (e == -1.0) return mk_buf_printf(o, "(1.0f / %s)", base);
    if (e == 1.0) return mk_buf_printf(o, "%s", base);
    mk_buf_printf(o, "powf(%s, ", base);
    bc_float(e, o);
    return mk_buf_puts(o, ")");
  }
  double b;
  if (bi_arg_number(rev ? bi_arg(n, 1, "other") : bi_arg(n, 0, "self"), &b)) {
    mk_buf_puts(o, "powf(");
    bc_float(b, o);
    return mk_buf_printf(o, ", %s)", rev ? A : B);
  }
  (void)c;
  return mk_errf(err, MK_EUNSUPPORTED, "line %d: pow with a tensor exponent", n->span.line);
}

static int other_expr(const cctx *c, const mk_node *n, const char *s, const char *A, mk_buf *o,
                      mk_errmsg *err) {
  char X[512], Y[512], Z[512];
  int rc;
#define IS(x) (strcmp(s, x) == 0)
  if (IS("to") || IS("type_as")) {
    if (c->p->g->values[n->outputs[0]].dtype != MK_DTYPE_F32)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: a cast to another dtype than float32", n->span.line);
    return mk_buf_printf(o, "%s", A);
  }
  if (IS("leaky_relu")) {
    if ((rc = lit(bi_arg(n, 1, "negative_slope"), 0.01, X, sizeof X))) return rc;
    return mk_buf_printf(o, "((%s) > 0.0f ? (%s) : (%s) * %s)", A, A, A, X);
  }
  if (IS("elu") || IS("celu")) {
    if ((rc = lit(bi_arg(n, 1, "alpha"), 1.0, X, sizeof X))) return rc;
    if (IS("celu")) return mk_buf_printf(o, "((%s) > 0.0f ? (%s) : %s * expm1f((%s) / %s))", A, A, X, A, X);
    return mk_buf_printf(o, "((%s) > 0.0f ? (%s) : %s * expm1f(%s))", A, A, X, A);
  }
  if (IS("gelu")) {
    const char *ap = bi_arg_str(bi_arg(n, 1, "approximate"));
    if (ap && strcmp(ap, "tanh") == 0)
      return mk_buf_printf(o, "(0.5f * (%s) * (1.0f + tanhf(0.797884561f * ((%s) + 0.044715f * (%s) * (%s) * (%s)))))",
                           A, A, A, A, A);
    return mk_buf_printf(o, "(0.5f * (%s) * (1.0f + erff((%s) * 0.707106781f)))", A, A);
  }
  if (IS("softplus")) {
    if ((rc = lit(bi_arg(n, 1, "beta"), 1.0, X, sizeof X)) || (rc = lit(bi_arg(n, 2, "threshold"), 20.0, Y, sizeof Y)))
      return rc;
    return mk_buf_printf(o, "mk_softplus(%s, %s, %s)", A, X, Y);
  }
  if (IS("hardtanh")) {
    if ((rc = lit(bi_arg(n, 1, "min_val"), -1.0, X, sizeof X)) || (rc = lit(bi_arg(n, 2, "max_val"), 1.0, Y, sizeof Y)))
      return rc;
    return mk_buf_printf(o, "mk_min(mk_max(%s, %s), %s)", A, X, Y);
  }
  if (IS("clamp") || IS("clip") || IS("clamp_min") || IS("clamp_max")) {
    const cJSON *lo = IS("clamp_max") ? NULL : bi_arg(n, 1, "min");
    const cJSON *hi = IS("clamp_min") ? NULL : bi_arg(n, IS("clamp_max") ? 1 : 2, "max");
    X[0] = Y[0] = '\0';
    if (!bi_arg_none(lo) && (rc = operand(c, lo, X, sizeof X, err))) return rc;
    if (!bi_arg_none(hi) && (rc = operand(c, hi, Y, sizeof Y, err))) return rc;
    /* torch.clamp is min(max(x, lo), hi): hi wins when lo > hi. */
    if (Y[0]) mk_buf_puts(o, "mk_min(");
    if (X[0]) mk_buf_printf(o, "mk_max(%s, %s)", A, X);
    else mk_buf_puts(o, A);
    if (Y[0]) mk_buf_printf(o, ", %s)", Y);
    return o->err;
  }
  if (IS("threshold")) {
    if ((rc = lit(bi_arg(n, 1, "threshold"), 0.0, X, sizeof X)) || (rc = lit(bi_arg(n, 2, "value"), 0.0, Y, sizeof Y)))
      return rc;
    return mk_buf_printf(o, "((%s) > %s ? (%s) : %s)", A, X, A, Y);
  }
  if (IS("where")) {
    if ((rc = operand(c, bi_arg(n, 0, "condition"), Z, sizeof Z, err)) ||
        (rc = operand(c, bi_arg(n, 1, "input"), X, sizeof X, err)) ||
        (rc = operand(c, bi_arg(n, 2, "other"), Y, sizeof Y, err)))
      return rc;
    return mk_buf_printf(o, "((%s) != 0 ? (float)(%s) : (float)(%s))", Z, X, Y);
  }
  if (strstr(s, "dropout")) return mk_buf_printf(o, "%s", A); /* p == 0 or eval: identity */
  if (IS("addcmul") || IS("addcdiv")) {
    if ((rc = operand(c, bi_arg(n, 1, "tensor1"), X, sizeof X, err)) ||
        (rc = operand(c, bi_arg(n, 2, "tensor2"), Y, sizeof Y, err)) ||
        (rc = lit(bi_arg(n, 3, "value"), 1.0, Z, sizeof Z)))
      return rc;
    return mk_buf_printf(o, "(%s + %s * (%s %s %s))", A, Z, X, IS("addcmul") ? "*" : "/", Y);
  }
  if (IS("lerp")) {
    if ((rc = operand(c, bi_arg(n, 1, "end"), X, sizeof X, err)) ||
        (rc = operand(c, bi_arg(n, 2, "weight"), Y, sizeof Y, err)))
      return rc;
    return mk_buf_printf(o, "(%s + %s * (%s - %s))", A, Y, X, A);
  }
  if (IS("hardshrink") || IS("softshrink")) {
    if ((rc = lit(bi_arg(n, 1, "lambd"), 0.5, X, sizeof X))) return rc;
    if (IS("hardshrink")) return mk_buf_printf(o, "(fabsf(%s) > %s ? (%s) : 0.0f)", A, X, A);
    return mk_buf_printf(o, "((%s) > %s ? (%s) - %s : ((%s) < -%s ? (%s) + %s : 0.0f))", A, X, A, X, A, X, A, X);
  }
#undef IS
  return mk_errf(err, MK_EUNSUPPORTED, "line %d: the CUDA generator has no kernel for %s", n->span.line, n->op);
}

static int node_expr(const cctx *c, const mk_node *n, mk_buf *o, mk_errmsg *err) {
  char s[64], A[512], B[512];
  bi_short(n, s, sizeof s);
  int rc = first_operand(c, n, A, sizeof A, err);
  if (rc) return rc;
  if ((rc = unary_expr(s, A, o)) != 0) return rc < 0 ? rc : 0;
  const cJSON *a1 = bi_arg(n, 1, "other");
  if (a1 == NULL) a1 = bi_arg(n, 1, "exponent");
  bool add = !strcmp(s, "add") || !strcmp(s, "radd") || !strcmp(s, "iadd");
  bool sub = !strcmp(s, "sub") || !strcmp(s, "subtract") || !strcmp(s, "isub") || !strcmp(s, "rsub");
  bool pw = !strcmp(s, "pow") || !strcmp(s, "rpow");
  for (size_t i = 0; i < sizeof binary / sizeof binary[0] && !add && !sub && !pw; i++) {
    if (strcmp(binary[i].name, s) != 0) continue;
    if (a1 == NULL) return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s without a second operand", n->span.line, n->op);
    if ((rc = operand(c, a1, B, sizeof B, err))) return rc;
    const char *mode = bi_arg_str(bi_arg(n, 2, "rounding_mode"));
    const char *x = binary[i].rev ? B : A, *y = binary[i].rev ? A : B;
    if (mode && strcmp(mode, "floor") == 0) return mk_buf_printf(o, "floorf(%s / %s)", x, y);
    if (mode && strcmp(mode, "trunc") == 0) return mk_buf_printf(o, "truncf(%s / %s)", x, y);
    return mk_buf_printf(o, binary[i].fmt, x, y);
  }
  if (add || sub || pw) {
    if (a1 == NULL) return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s without a second operand", n->span.line, n->op);
    if ((rc = operand(c, a1, B, sizeof B, err))) return rc;
    if (pw) return pow_expr(c, n, strcmp(s, "rpow") == 0, A, B, o, err);
    /* torch.rsub(a, b, alpha) = b - alpha * a. */
    bool rev = strcmp(s, "rsub") == 0;
    double alpha = num_or(bi_arg(n, 2, "alpha"), 1.0);
    mk_buf_printf(o, "(%s %s ", rev ? B : A, sub ? "-" : "+");
    if (alpha != 1.0) {
      bc_float(alpha, o);
      mk_buf_puts(o, " * ");
    }
    return mk_buf_printf(o, "%s)", rev ? A : B);
  }
  return other_expr(c, n, s, A, o, err);
}

/* ---- the stage ------------------------------------------------------------------- */

/* Where each stored value goes: the leaf an in-place op writes back into, or itself. */
static int store_target(const bi_plan *p, const cleaf *ls, int nl, int v) {
  const mk_node *prod = &p->g->nodes[p->g->values[v].producer];
  for (int m = 0; m < prod->nmutates; m++)
    for (int l = 0; l < nl; l++)
      if (ls[l].vid == prod->mutates[m]) return ls[l].vid;
  return v;
}

static void params(bc_emit *e, int s, const cleaf *ls, int nl, const int *stored, int ns,
                   mk_buf *sig, mk_buf *types, mk_buf *call, const char *shape, bool numel) {
  const bi_plan *p = e->p;
  for (int i = 0; i < nl; i++) {
    if (ls[i].bound) continue;
    const mk_value *v = &p->g->values[ls[i].vid];
    mk_buf_printf(sig, "%s%s *%sp_", ls[i].mutated ? "" : "const ", bc_ctype(v->dtype),
                  ls[i].mutated ? "" : "__restrict__ ");
    bi_run_name(p, ls[i].vid, sig);
    mk_buf_puts(sig, ", ");
    mk_buf_putc(types, v->dtype == MK_DTYPE_BOOL ? BC_ARG_BOOL : BC_ARG_F32);
    bool checked = ls[i].mutated || ls[i].full; /* read at offs: shape (and layout) checked */
    mk_buf_puts(call, ls[i].mutated ? "_mk_inplace(" : ls[i].full ? "_mk_full(" : "");
    bi_run_name(p, ls[i].vid, call);
    if (checked) mk_buf_printf(call, ", %s)", shape);
    mk_buf_puts(call, ", ");
  }
  for (int i = 0; i < ns; i++) {
    if (store_target(p, ls, nl, stored[i]) != stored[i]) continue;
    const mk_value *v = &p->g->values[stored[i]];
    mk_buf_printf(sig, "%s *__restrict__ p_", bc_ctype(v->dtype));
    bi_run_name(p, stored[i], sig);
    mk_buf_puts(sig, ", ");
    mk_buf_putc(types, v->dtype == MK_DTYPE_BOOL ? BC_ARG_BOOL : BC_ARG_F32);
    bi_run_name(p, stored[i], call);
    mk_buf_puts(call, ", ");
  }
  int R = p->st[s].rank;
  for (int d = 0; d < R; d++) {
    mk_buf_printf(sig, "long long D%d, ", d);
    mk_buf_putc(types, BC_ARG_I64);
  }
  if (R) mk_buf_printf(call, "*%s, ", shape);
  for (int i = 0; i < nl; i++) {
    if (ls[i].full || ls[i].bound) continue;
    for (int d = 0; d < R; d++) {
      mk_buf_puts(sig, "long long st_");
      bi_run_name(p, ls[i].vid, sig);
      mk_buf_printf(sig, "_%d, ", d);
      mk_buf_putc(types, BC_ARG_I64);
    }
    if (R) {
      mk_buf_puts(call, "*_mk_bstrides(");
      bi_run_name(p, ls[i].vid, call);
      mk_buf_printf(call, ", %s), ", shape);
    }
  }
  if (!numel) return;
  mk_buf_puts(sig, "long long numel");
  mk_buf_putc(types, BC_ARG_I64);
}

static void index_lines(bc_emit *e, int s, const cleaf *ls, int nl, int ind, mk_buf *k) {
  int R = e->p->st[s].rank;
  bool any = false;
  for (int i = 0; i < nl; i++) any |= !ls[i].full && !ls[i].bound;
  if (!any || R == 0) return;
  mk_buf_indent(k, ind);
  mk_buf_puts(k, "long long rest = offs;\n");
  for (int d = R - 1; d >= 0; d--) {
    mk_buf_indent(k, ind);
    if (d > 0) {
      mk_buf_printf(k, "const long long i%d = rest %% D%d;\n", d, d);
      mk_buf_indent(k, ind);
      mk_buf_printf(k, "rest /= D%d;\n", d);
    } else {
      mk_buf_puts(k, "const long long i0 = rest;\n");
    }
  }
}

static void load_lines(bc_emit *e, int s, const cleaf *ls, int nl, const char *bound_var, int ind, mk_buf *k) {
  const bi_plan *p = e->p;
  int R = p->st[s].rank;
  for (int i = 0; i < nl; i++) {
    const mk_value *v = &p->g->values[ls[i].vid];
    mk_buf_indent(k, ind);
    mk_buf_printf(k, "const %s r_", bc_ctype(v->dtype));
    bi_run_name(p, ls[i].vid, k);
    if (ls[i].bound) {
      mk_buf_printf(k, " = %s;  // the anchor's value, in a register\n", bound_var);
      continue;
    }
    mk_buf_puts(k, " = p_");
    bi_run_name(p, ls[i].vid, k);
    if (ls[i].full || R == 0) {
      mk_buf_puts(k, ls[i].full ? "[offs];\n" : "[0];\n");
      continue;
    }
    mk_buf_puts(k, "[");
    for (int d = 0; d < R; d++) {
      mk_buf_printf(k, "%si%d * st_", d ? " + " : "", d);
      bi_run_name(p, ls[i].vid, k);
      mk_buf_printf(k, "_%d", d);
    }
    mk_buf_puts(k, "];\n");
  }
}

static int compute_lines(bc_emit *e, int s, int ind, mk_buf *k, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  cctx c = {.p = p, .s = s};
  for (int i = 0; i < st->nnodes; i++) {
    const mk_node *n = &p->g->nodes[st->nodes[i]];
    const char *ct = bc_ctype(p->g->values[n->outputs[0]].dtype);
    if (ct == NULL)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: the CUDA generator writes float32 kernels only (%s)",
                     n->span.line, n->op);
    mk_buf_indent(k, ind);
    mk_buf_printf(k, "const %s v%d = ", ct, n->outputs[0]);
    int rc = node_expr(&c, n, k, err);
    if (rc) return rc;
    char sn[64];
    mk_buf_printf(k, ";  // %s (line %d)\n", bi_short(n, sn, sizeof sn), n->span.line);
  }
  return 0;
}

static void launcher_lines(bc_emit *e, int s, const cleaf *ls, int nl, const int *stored, int ns,
                           const char *kname, const char *call, int res) {
  const bi_plan *p = e->p;
  mk_buf *b = e->body;
  bi_stage_comment(p, s, 4, b);
  mk_buf_printf(b, "    shape%d = torch.broadcast_shapes(", res);
  for (int i = 0; i < nl; i++) {
    bi_run_name(p, ls[i].vid, b);
    mk_buf_puts(b, ".shape, ");
  }
  mk_buf_puts(b, ")\n");
  for (int i = 0; i < ns; i++) {
    int target = store_target(p, ls, nl, stored[i]);
    mk_buf_indent(b, 4);
    bi_run_name(p, stored[i], b);
    mk_buf_puts(b, " = ");
    if (target != stored[i]) {
      bi_run_name(p, target, b); /* in place on a tensor from outside, as the reference */
      mk_buf_putc(b, '\n');
      continue;
    }
    mk_buf_printf(b, "torch.empty(shape%d, device=", res);
    bi_run_name(p, ls[0].vid, b);
    mk_buf_printf(b, ".device, dtype=torch.%s)\n",
                  p->g->values[stored[i]].dtype == MK_DTYPE_BOOL ? "bool" : "float32");
  }
  mk_buf_printf(b, "    n%d = math.prod(shape%d)\n    if n%d > 0:\n", res, res, res);
  mk_buf_printf(b, "        _mk_cuda.launch(\"%s\", ((n%d + %d) // %d,), (%d,),\n                        (%sn%d))\n",
                kname, res, e->threads - 1, e->threads, e->threads, call, res);
}

/* The launcher above as C++ (mkevolve export): the same shape, allocations,
 * checks and arguments, in the kernel's parameter order. */
static void cpp_launcher_lines(bc_emit *e, int s, const cleaf *ls, int nl, const int *stored, int ns,
                               const char *kname, int res) {
  const bi_plan *p = e->p;
  mk_buf *b = e->cpp;
  int R = p->st[s].rank;
  bc_cpp_comment(e, s);
  mk_buf_printf(b, "  const std::vector<int64_t> shape%d = mk_broadcast({", res);
  for (int i = 0; i < nl; i++) mk_buf_printf(b, "%sv%d.sizes()", i ? ", " : "", ls[i].vid);
  mk_buf_puts(b, "});\n");
  for (int i = 0; i < ns; i++) {
    int target = store_target(p, ls, nl, stored[i]);
    if (target != stored[i]) { /* in place on a tensor from outside, as the reference */
      mk_buf_printf(b, "  at::Tensor v%d = v%d;\n", stored[i], target);
      continue;
    }
    mk_buf_printf(b, "  at::Tensor v%d = at::empty(shape%d, at::TensorOptions().device(v%d.device()).dtype(at::k%s));\n",
                  stored[i], res, ls[0].vid, p->g->values[stored[i]].dtype == MK_DTYPE_BOOL ? "Bool" : "Float");
  }
  for (int i = 0; i < nl; i++) {
    if (ls[i].full || ls[i].mutated)
      mk_buf_printf(b, "  const at::Tensor a%d_%d = mk_%s(v%d, shape%d);\n", res, i,
                    ls[i].mutated ? "inplace" : "full", ls[i].vid, res);
    else if (R)
      mk_buf_printf(b, "  const std::vector<int64_t> st%d_%d = mk_bstrides(v%d, shape%d);\n", res, i, ls[i].vid, res);
  }
  mk_buf_printf(b, "  const int64_t n%d = mk_prod(shape%d, 0, %d);\n  if (n%d > 0) {\n", res, res, R, res);
  mk_buf_printf(b, "    const c10::cuda::CUDAGuard guard(v%d.device());\n", ls[0].vid);
  mk_buf_printf(b, "    mk_launch(\"%s\", %s::%s((n%d + %d) / %d, %d, mk_stream(v%d)", kname, e->cpp_ns, kname, res,
                e->threads - 1, e->threads, e->threads, ls[0].vid);
  for (int i = 0; i < nl; i++) {
    const char *t = p->g->values[ls[i].vid].dtype == MK_DTYPE_BOOL ? "bool" : "float";
    if (ls[i].full || ls[i].mutated) mk_buf_printf(b, ", mk_ptr<%s>(a%d_%d)", t, res, i);
    else mk_buf_printf(b, ", mk_ptr<%s>(v%d)", t, ls[i].vid);
  }
  for (int i = 0; i < ns; i++)
    if (store_target(p, ls, nl, stored[i]) == stored[i])
      mk_buf_printf(b, ", mk_ptr<%s>(v%d)", p->g->values[stored[i]].dtype == MK_DTYPE_BOOL ? "bool" : "float",
                    stored[i]);
  for (int d = 0; d < R; d++) mk_buf_printf(b, ", shape%d[%d]", res, d);
  for (int i = 0; i < nl; i++)
    for (int d = 0; d < R && !ls[i].full && !ls[i].mutated; d++) mk_buf_printf(b, ", st%d_%d[%d]", res, i, d);
  mk_buf_printf(b, ", n%d));\n  }\n", res);
}

/* The launcher above as launch-plan steps (builtin_cuda_plan.c): the C++
 * launcher's helpers, in its order, so the three forms pass the same. */
static void plan_launcher(bc_emit *e, int s, const cleaf *ls, int nl, const int *stored, int ns, const char *kname,
                          int res) {
  if (!bc_plan_on(e)) return;
  const bi_plan *p = e->p;
  int R = p->st[s].rank;
  char shape[32], n[32];
  snprintf(shape, sizeof shape, "shape%d", res);
  snprintf(n, sizeof n, "n%d", res);
  cJSON *st = bc_plan_step(e, "broadcast", shape);
  for (int i = 0; i < nl; i++) bc_plan_arg_name(st, "v%d", ls[i].vid);
  for (int i = 0; i < ns; i++) {
    int target = store_target(p, ls, nl, stored[i]);
    char out[32];
    snprintf(out, sizeof out, "v%d", stored[i]);
    if (target != stored[i]) {
      bc_plan_arg_name(bc_plan_step(e, "alias", out), "v%d", target);
      continue;
    }
    st = bc_plan_step(e, "empty", out);
    bc_plan_arg_name(st, "%s", shape);
    bc_plan_arg_name(st, "v%d", ls[0].vid);
    bc_plan_arg_name(st, "%s", p->g->values[stored[i]].dtype == MK_DTYPE_BOOL ? "bool" : "float32");
  }
  for (int i = 0; i < nl; i++) {
    char out[48];
    if (ls[i].full || ls[i].mutated) {
      snprintf(out, sizeof out, "a%d_%d", res, i);
      st = bc_plan_step(e, ls[i].mutated ? "inplace" : "full", out);
    } else if (R) {
      snprintf(out, sizeof out, "st%d_%d", res, i);
      st = bc_plan_step(e, "bstrides", out);
    } else {
      continue;
    }
    bc_plan_arg_name(st, "v%d", ls[i].vid);
    bc_plan_arg_name(st, "%s", shape);
  }
  st = bc_plan_step(e, "prod", n);
  bc_plan_arg_name(st, "%s", shape);
  bc_plan_arg_int(st, 0);
  bc_plan_arg_int(st, R);
  cJSON *cdiv = cJSON_CreateObject(), *c = cJSON_AddArrayToObject(cdiv, "cdiv");
  cJSON_AddItemToArray(c, cJSON_CreateString(n));
  cJSON_AddItemToArray(c, cJSON_CreateNumber(e->threads));
  st = bc_plan_launch(e, kname, n, cdiv, e->threads);
  for (int i = 0; i < nl; i++)
    bc_plan_arg(st, bc_plan_tagged("ptr", ls[i].full || ls[i].mutated ? bc_plan_name("a%d_%d", res, i)
                                                                         : bc_plan_name("v%d", ls[i].vid)));
  for (int i = 0; i < ns; i++)
    if (store_target(p, ls, nl, stored[i]) == stored[i])
      bc_plan_arg(st, bc_plan_tagged("ptr", bc_plan_name("v%d", stored[i])));
  for (int d = 0; d < R; d++) bc_plan_arg(st, bc_plan_tagged("int", bc_plan_item(shape, d)));
  for (int i = 0; i < nl; i++)
    for (int d = 0; d < R && !ls[i].full && !ls[i].mutated; d++) {
      char list[48];
      snprintf(list, sizeof list, "st%d_%d", res, i);
      bc_plan_arg(st, bc_plan_tagged("int", bc_plan_item(list, d)));
    }
  bc_plan_arg(st, bc_plan_tagged("int", cJSON_CreateString(n)));
}

int bc_emit_ew_stage(bc_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  cleaf ls[BC_MAX_LEAVES];
  int nl = 0;
  int rc = leaves_of(p, s, ls, &nl, err);
  if (rc) return rc;
  int stored[64];
  int ns = bi_stage_stored(p, s, stored, 64);
  if (ns == 0) return 0; /* nothing it computes is used */
  if (nl == 0) return mk_errf(err, MK_EUNSUPPORTED, "elementwise run reads no tensor");
  int res = bi_stage_result(p, s);
  mk_buf kname, sig, types, call, shape;
  mk_buf_init(&kname, 256);
  mk_buf_init(&sig, 0);
  mk_buf_init(&types, 1024);
  mk_buf_init(&call, 0);
  mk_buf_init(&shape, 64);
  mk_buf_printf(&shape, "shape%d", res);
  bc_kernel_name(e, s, "ew", &kname);
  params(e, s, ls, nl, stored, ns, &sig, &types, &call, mk_buf_cstr(&shape), true);
  mk_buf *k = e->cuda;
  mk_buf_printf(k, "\n// replaces:");
  for (int i = 0; i < p->st[s].nnodes; i++) {
    const mk_node *n = &p->g->nodes[p->st[s].nodes[i]];
    mk_buf_printf(k, "%s %s (line %d)", i ? "," : "", n->op, n->span.line);
  }
  mk_buf_printf(k, "\nextern \"C\" __global__ void %s(%s) {\n", mk_buf_cstr(&kname), mk_buf_cstr(&sig));
  mk_buf_puts(k, "  const long long offs = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                 "  if (offs >= numel) return;\n");
  index_lines(e, s, ls, nl, 2, k);
  load_lines(e, s, ls, nl, NULL, 2, k);
  rc = compute_lines(e, s, 2, k, err);
  for (int i = 0; rc == 0 && i < ns; i++) {
    mk_buf_puts(k, "  p_");
    bi_run_name(p, store_target(p, ls, nl, stored[i]), k);
    mk_buf_printf(k, "[offs] = v%d;\n", stored[i]);
  }
  mk_buf_puts(k, "}\n");
  if (rc == 0) {
    launcher_lines(e, s, ls, nl, stored, ns, mk_buf_cstr(&kname), mk_buf_cstr(&call), res);
    if (e->cpp) cpp_launcher_lines(e, s, ls, nl, stored, ns, mk_buf_cstr(&kname), res);
    plan_launcher(e, s, ls, nl, stored, ns, mk_buf_cstr(&kname), res);
    rc = bc_register_kernel(e, mk_buf_cstr(&kname), mk_buf_cstr(&types));
  }
  if (rc == 0 && (sig.err || call.err || types.err || k->err || e->body->err || (e->cpp && e->cpp->err)))
    rc = mk_errf(err, MK_ERANGE, "generated code too large");
  mk_buf_free(&kname);
  mk_buf_free(&sig);
  mk_buf_free(&types);
  mk_buf_free(&call);
  mk_buf_free(&shape);
  return rc;
}

/* ---- an elementwise stage as another kernel's epilogue --------------------------------
 *
 * The stage's leaves, as above, except the anchor's value `bound`: the anchor
 * kernel holds it in a register. The element's flat offset in the stage's
 * (contiguous) shape is the kernel's `offs`. */

static int epi_leaves(const bi_plan *p, int s, int bound, cleaf *ls, int *nl, mk_errmsg *err) {
  int rc = leaves_of(p, s, ls, nl, err);
  for (int i = 0; rc == 0 && i < *nl; i++) ls[i].bound = ls[i].vid == bound;
  return rc;
}

int bc_epi_params(bc_emit *e, int s, int bound, const char *shape, mk_buf *sig, mk_buf *types, mk_buf *call,
                  mk_errmsg *err) {
  cleaf ls[BC_MAX_LEAVES];
  int nl = 0, stored[64];
  int rc = epi_leaves(e->p, s, bound, ls, &nl, err);
  if (rc) return rc;
  int ns = bi_stage_stored(e->p, s, stored, 64);
  params(e, s, ls, nl, stored, ns, sig, types, call, shape, false);
  return 0;
}

int bc_epi_alloc(bc_emit *e, int s, const char *shape, const char *like, mk_buf *py) {
  const bi_plan *p = e->p;
  int stored[64];
  int ns = bi_stage_stored(p, s, stored, 64);
  for (int i = 0; i < ns; i++) {
    mk_buf_indent(py, 4);
    bi_run_name(p, stored[i], py);
    mk_buf_printf(py, " = torch.empty(%s, device=%s, dtype=torch.%s)\n", shape, like,
                  p->g->values[stored[i]].dtype == MK_DTYPE_BOOL ? "bool" : "float32");
  }
  return py->err;
}

int bc_epi_body(bc_emit *e, int s, int bound, const char *var, int ind, mk_buf *k, mk_errmsg *err) {
  const bi_plan *p = e->p;
  cleaf ls[BC_MAX_LEAVES];
  int nl = 0, stored[64];
  int rc = epi_leaves(p, s, bound, ls, &nl, err);
  if (rc) return rc;
  int ns = bi_stage_stored(p, s, stored, 64);
  mk_buf_indent(k, ind);
  mk_buf_puts(k, "// fused epilogue:");
  for (int i = 0; i < p->st[s].nnodes; i++) {
    const mk_node *n = &p->g->nodes[p->st[s].nodes[i]];
    mk_buf_printf(k, "%s %s (line %d)", i ? "," : "", n->op, n->span.line);
  }
  mk_buf_putc(k, '\n');
  index_lines(e, s, ls, nl, ind, k);
  load_lines(e, s, ls, nl, var, ind, k);
  rc = compute_lines(e, s, ind, k, err);
  for (int i = 0; rc == 0 && i < ns; i++) {
    mk_buf_indent(k, ind);
    mk_buf_puts(k, "p_");
    bi_run_name(p, stored[i], k);
    mk_buf_printf(k, "[offs] = v%d;\n", stored[i]);
  }
  return rc;
}

int bc_epi_cpp(bc_emit *e, int s, int bound, int res, const char *shape, const char *like, mk_buf *prep,
               mk_buf *args, mk_errmsg *err) {
  const bi_plan *p = e->p;
  cleaf ls[BC_MAX_LEAVES];
  int nl = 0, stored[64];
  int rc = epi_leaves(p, s, bound, ls, &nl, err);
  if (rc) return rc;
  int ns = bi_stage_stored(p, s, stored, 64);
  int R = p->st[s].rank;
  for (int i = 0; i < ns; i++)
    mk_buf_printf(prep, "  at::Tensor v%d = at::empty(%s, at::TensorOptions().device(%s.device()).dtype(at::k%s));\n",
                  stored[i], shape, like, p->g->values[stored[i]].dtype == MK_DTYPE_BOOL ? "Bool" : "Float");
  for (int i = 0; i < nl; i++) {
    if (ls[i].bound) continue;
    if (ls[i].full)
      mk_buf_printf(prep, "  const at::Tensor ea%d_%d = mk_full(v%d, %s);\n", res, i, ls[i].vid, shape);
    else if (R)
      mk_buf_printf(prep, "  const std::vector<int64_t> est%d_%d = mk_bstrides(v%d, %s);\n", res, i, ls[i].vid, shape);
  }
  for (int i = 0; i < nl; i++) {
    if (ls[i].bound) continue;
    const char *t = p->g->values[ls[i].vid].dtype == MK_DTYPE_BOOL ? "bool" : "float";
    if (ls[i].full) mk_buf_printf(args, ", mk_ptr<%s>(ea%d_%d)", t, res, i);
    else mk_buf_printf(args, ", mk_ptr<%s>(v%d)", t, ls[i].vid);
  }
  for (int i = 0; i < ns; i++)
    mk_buf_printf(args, ", mk_ptr<%s>(v%d)", p->g->values[stored[i]].dtype == MK_DTYPE_BOOL ? "bool" : "float",
                  stored[i]);
  for (int d = 0; d < R; d++) mk_buf_printf(args, ", %s[%d]", shape, d);
  for (int i = 0; i < nl; i++)
    for (int d = 0; d < R && !ls[i].full && !ls[i].bound; d++) mk_buf_printf(args, ", est%d_%d[%d]", res, i, d);
  return prep->err || args->err ? mk_errf(err, MK_ERANGE, "generated code too large") : 0;
}

/* The epilogue's part of its anchor's launch plan (builtin_cuda_plan.c), as
 * run() passes it (params above): its stored values allocated with the
 * anchor's output shape `shape` on `like`'s device, leaves read at the flat
 * offset checked (full / inplace), the others' broadcast strides. */
int bc_epi_plan_prep(bc_emit *e, int s, int bound, int res, const char *shape, const char *like, mk_errmsg *err) {
  if (!bc_plan_on(e)) return 0;
  const bi_plan *p = e->p;
  cleaf ls[BC_MAX_LEAVES];
  int nl = 0, stored[64];
  int rc = epi_leaves(p, s, bound, ls, &nl, err);
  if (rc) return rc;
  int ns = bi_stage_stored(p, s, stored, 64);
  for (int i = 0; i < ns; i++) {
    char out[32];
    snprintf(out, sizeof out, "v%d", stored[i]);
    cJSON *st = bc_plan_step(e, "empty", out);
    bc_plan_arg_name(st, "%s", shape);
    bc_plan_arg_name(st, "%s", like);
    bc_plan_arg_name(st, "%s", p->g->values[stored[i]].dtype == MK_DTYPE_BOOL ? "bool" : "float32");
  }
  for (int i = 0; i < nl; i++) {
    if (ls[i].bound || !(ls[i].full || ls[i].mutated || p->st[s].rank)) continue;
    char out[48];
    snprintf(out, sizeof out, "%s%d_%d", ls[i].full || ls[i].mutated ? "ea" : "est", res, i);
    cJSON *st = bc_plan_step(e, ls[i].mutated ? "inplace" : ls[i].full ? "full" : "bstrides", out);
    bc_plan_arg_name(st, "v%d", ls[i].vid);
    bc_plan_arg_name(st, "%s", shape);
  }
  return 0;
}

int bc_epi_plan_args(bc_emit *e, int s, int bound, int res, const char *shape, cJSON *launch, mk_errmsg *err) {
  if (launch == NULL) return 0;
  const bi_plan *p = e->p;
  cleaf ls[BC_MAX_LEAVES];
  int nl = 0, stored[64];
  int rc = epi_leaves(p, s, bound, ls, &nl, err);
  if (rc) return rc;
  int ns = bi_stage_stored(p, s, stored, 64), R = p->st[s].rank;
  for (int i = 0; i < nl; i++) {
    if (ls[i].bound) continue;
    bc_plan_arg(launch, bc_plan_tagged("ptr", ls[i].full || ls[i].mutated ? bc_plan_name("ea%d_%d", res, i)
                                                                           : bc_plan_name("v%d", ls[i].vid)));
  }
  for (int i = 0; i < ns; i++)
    if (store_target(p, ls, nl, stored[i]) == stored[i])
      bc_plan_arg(launch, bc_plan_tagged("ptr", bc_plan_name("v%d", stored[i])));
  for (int d = 0; d < R; d++) bc_plan_arg(launch, bc_plan_tagged("int", bc_plan_item(shape, d)));
  for (int i = 0; i < nl; i++)
    for (int d = 0; d < R && !ls[i].full && !ls[i].bound; d++) {
      char list[48];
      snprintf(list, sizeof list, "est%d_%d", res, i);
      bc_plan_arg(launch, bc_plan_tagged("int", bc_plan_item(list, d)));
    }
  return 0;
}
