/* pyemit.c — Python source for recorded torch calls.
 *
 * Turns the protocol's argument encoding (docs/protocol.md) back into Python
 * literals and a node into a call expression. Common forms are spelled the
 * way a person would write them (`F.relu(x)`, `x.view(...)`, `a + b`) so the
 * emitted code reads like hand-written code; anything else keeps its exact
 * dotted name, which is always valid. Shared by the composer, the reference
 * candidate and the builtin proposer (one spelling of every recorded call). */
#include "mk_pyemit.h"

#include "mk_layout.h"

#include <stdlib.h>

#include <math.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>

/* Binary operator dunders printed infix. */
static const struct {
  const char *dunder;
  const char *op;
  int reflected;
} infix_ops[] = {
    {"__add__", "+", 0},      {"__radd__", "+", 1},     {"__sub__", "-", 0},
    {"__rsub__", "-", 1},     {"__mul__", "*", 0},      {"__rmul__", "*", 1},
    {"__truediv__", "/", 0},  {"__rtruediv__", "/", 1}, {"__floordiv__", "//", 0},
    {"__rfloordiv__", "//", 1}, {"__matmul__", "@", 0}, {"__rmatmul__", "@", 1},
    {"__pow__", "**", 0},     {"__rpow__", "**", 1},    {"__mod__", "%", 0},
    {"__rmod__", "%", 1},     {"__and__", "&", 0},      {"__or__", "|", 0},
    {"__xor__", "^", 0},      {"__lt__", "<", 0},       {"__le__", "<=", 0},
    {"__gt__", ">", 0},       {"__ge__", ">=", 0},      {"__eq__", "==", 0},
    {"__ne__", "!=", 0},
};

/* What writing one argument needs: the namer of tensor values, and the node
 * whose arguments these are (NULL for a bare value), whose sizes that follow
 * the batch are written as expressions of its tensors' shapes. */
typedef struct emitter {
  mk_value_namer namer;
  void *ctx;
  const mk_node *node;
} emitter;

static int emit_arg(const cJSON *arg, const emitter *e, mk_buf *out, mk_errmsg *err);

static int emit_seq(const cJSON *items, const char *open, const char *close, int one_comma,
                    const emitter *e, mk_buf *out, mk_errmsg *err) {
  mk_buf_puts(out, open);
  int n = 0;
  for (const cJSON *it = items ? items->child : NULL; it; it = it->next, n++) {
    if (n) mk_buf_puts(out, ", ");
    int rc = emit_arg(it, e, out, err);
    if (rc) return rc;
  }
  if (n == 1 && one_comma) mk_buf_putc(out, ',');
  return mk_buf_puts(out, close);
}

int mk_pyemit_float(double d, mk_buf *out) {
  if (isnan(d)) return mk_buf_puts(out, "float('nan')");
  if (isinf(d)) return mk_buf_puts(out, d > 0 ? "float('inf')" : "float('-inf')");
  char tmp[64];
  /* Shortest repr that round-trips, as Python's float repr would. */
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, d);
    double back;
    if (sscanf(tmp, "%lf", &back) == 1 && back == d) break;
  }
  mk_buf_puts(out, tmp);
  if (strpbrk(tmp, ".eEn") == NULL) mk_buf_puts(out, ".0");
  return out->err;
}

/* A size that follows the batch: num * t.shape[dim] // den + off, written
 * the way a person would (`v3.shape[0]`, `(8 * v3.shape[0])`). */
static int emit_batch_int(const mk_batch_int *b, const emitter *e, mk_buf *out) {
  bool bare = b->num == 1 && b->den == 1 && b->off == 0;
  if (!bare) mk_buf_putc(out, '(');
  if (b->num != 1) mk_buf_printf(out, "%lld * ", (long long)b->num);
  int rc = e->namer(e->ctx, b->vid, out);
  if (rc) return rc;
  mk_buf_printf(out, ".shape[%d]", b->dim);
  if (b->den != 1) mk_buf_printf(out, " // %lld", (long long)b->den);
  if (b->off > 0) mk_buf_printf(out, " + %lld", (long long)b->off);
  if (b->off < 0) mk_buf_printf(out, " - %lld", -(long long)b->off);
  if (!bare) mk_buf_putc(out, ')');
  return out->err;
}

static int emit_number(const cJSON *arg, mk_buf *out) {
  double d = arg->valuedouble;
  if (d == floor(d) && fabs(d) < 9007199254740992.0) return mk_buf_printf(out, "%.0f", d);
  return mk_pyemit_float(d, out);
}

/* {"float": x} where x is a number or "inf"/"-inf"/"nan". */
static int emit_tagged_float(const cJSON *v, mk_buf *out, mk_errmsg *err) {
  if (cJSON_IsNumber(v)) return mk_pyemit_float(v->valuedouble, out);
  if (cJSON_IsString(v)) {
    if (strcmp(v->valuestring, "inf") == 0) return mk_pyemit_float(INFINITY, out);
    if (strcmp(v->valuestring, "-inf") == 0) return mk_pyemit_float(-INFINITY, out);
    if (strcmp(v->valuestring, "nan") == 0) return mk_pyemit_float(NAN, out);
  }
  return mk_errf(err, MK_EINVAL, "bad float encoding");
}

static int emit_slice(const cJSON *parts, const emitter *e, mk_buf *out, mk_errmsg *err) {
  if (!cJSON_IsArray(parts) || cJSON_GetArraySize(parts) != 3)
    return mk_errf(err, MK_EINVAL, "bad slice encoding");
  mk_buf_puts(out, "slice(");
  for (int i = 0; i < 3; i++) {
    if (i) mk_buf_puts(out, ", ");
    const cJSON *v = cJSON_GetArrayItem(parts, i);
    if (v == NULL || cJSON_IsNull(v)) {
      mk_buf_puts(out, "None");
      continue;
    }
    int rc = emit_arg(v, e, out, err);
    if (rc) return rc;
  }
  return mk_buf_putc(out, ')');
}

static int emit_dict(const cJSON *pairs, const emitter *e, mk_buf *out, mk_errmsg *err) {
  mk_buf_putc(out, '{');
  int n = 0;
  for (const cJSON *p = pairs ? pairs->child : NULL; p; p = p->next, n++) {
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2)
      return mk_errf(err, MK_EINVAL, "bad dict encoding");
    if (n) mk_buf_puts(out, ", ");
    int rc = emit_arg(cJSON_GetArrayItem(p, 0), e, out, err);
    if (!rc) rc = mk_buf_puts(out, ": ");
    if (!rc) rc = emit_arg(cJSON_GetArrayItem(p, 1), e, out, err);
    if (rc) return rc;
  }
  return mk_buf_putc(out, '}');
}

/* Names like "float32", "cuda:0", "channels_last": checked to be identifier-ish
 * so a hostile capture cannot inject code into the emitted file. */
static int is_safe_token(const char *s) {
  if (s == NULL || *s == '\0') return 0;
  for (; *s; s++)
    if (!(*s == '_' || *s == ':' || (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') ||
          (*s >= 'A' && *s <= 'Z')))
      return 0;
  return 1;
}

static int emit_tagged(const cJSON *arg, const emitter *e, mk_buf *out, mk_errmsg *err) {
  const cJSON *tag = arg->child;
  if (tag == NULL) return mk_buf_puts(out, "{}");
  const char *k = tag->string;
  if (strcmp(k, "t") == 0) {
    if (!cJSON_IsNumber(tag)) return mk_errf(err, MK_EINVAL, "bad tensor reference");
    return e->namer(e->ctx, tag->valueint, out);
  }
  if (strcmp(k, "tuple") == 0) return emit_seq(tag, "(", ")", 1, e, out, err);
  if (strcmp(k, "list") == 0) return emit_seq(tag, "[", "]", 0, e, out, err);
  if (strcmp(k, "size") == 0) return emit_seq(tag, "torch.Size([", "])", 0, e, out, err);
  if (strcmp(k, "float") == 0) return emit_tagged_float(tag, out, err);
  if (strcmp(k, "slice") == 0) return emit_slice(tag, e, out, err);
  if (strcmp(k, "ellipsis") == 0) return mk_buf_puts(out, "...");
  if (strcmp(k, "dict") == 0) return emit_dict(tag, e, out, err);
  if (!cJSON_IsString(tag) || !is_safe_token(tag->valuestring))
    return mk_errf(err, MK_EUNSUPPORTED, "argument '%s' cannot be written as Python", k);
  if (strcmp(k, "dtype") == 0) return mk_buf_printf(out, "torch.%s", tag->valuestring);
  if (strcmp(k, "pytype") == 0) { /* `dtype=bool`: Python's scalar types by name */
    static const char *const types[] = {"bool", "int", "float", "complex"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
      if (strcmp(tag->valuestring, types[i]) == 0) return mk_buf_puts(out, types[i]);
    return mk_errf(err, MK_EUNSUPPORTED, "Python type '%s' cannot be written as Python", tag->valuestring);
  }
  /* Captures run on the CPU: a recorded device is the program's device
   * (`device=x.device`), as replay reads it. The emitter binds the name
   * before the first call that uses it (mk_pyemit_device_binding). */
  if (strcmp(k, "device") == 0) return mk_buf_puts(out, MK_PYEMIT_DEVICE_VAR);
  if (strcmp(k, "memory_format") == 0 || strcmp(k, "layout") == 0)
    return mk_buf_printf(out, "torch.%s", tag->valuestring);
  return mk_errf(err, MK_EUNSUPPORTED, "argument of kind '%s' cannot be written as Python", k);
}

static int emit_arg(const cJSON *arg, const emitter *e, mk_buf *out, mk_errmsg *err) {
  if (arg == NULL || cJSON_IsNull(arg)) return mk_buf_puts(out, "None");
  if (cJSON_IsTrue(arg)) return mk_buf_puts(out, "True");
  if (cJSON_IsFalse(arg)) return mk_buf_puts(out, "False");
  if (cJSON_IsNumber(arg)) {
    const mk_batch_int *b = mk_node_batch_int(e->node, arg);
    return b && e->namer ? emit_batch_int(b, e, out) : emit_number(arg, out);
  }
  if (cJSON_IsString(arg)) return mk_buf_py_str(out, arg->valuestring);
  if (cJSON_IsArray(arg)) return emit_seq(arg, "[", "]", 0, e, out, err);
  if (cJSON_IsObject(arg)) {
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(arg, "opaque");
    if (op)
      return mk_errf(err, MK_EUNSUPPORTED, "an argument could not be recorded exactly (%.80s)",
                     cJSON_IsString(op) ? op->valuestring : "?");
    return emit_tagged(arg, e, out, err);
  }
  return mk_errf(err, MK_EINVAL, "unknown argument encoding");
}

int mk_pyemit_arg(const cJSON *arg, mk_value_namer namer, void *ctx, mk_buf *out, mk_errmsg *err) {
  emitter e = {namer, ctx, NULL};
  return emit_arg(arg, &e, out, err);
}

int mk_pyemit_self_path(const char *path, mk_buf *out) {
  mk_buf_puts(out, "self");
  const char *p = path;
  while (*p) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    int digits = n > 0;
    for (size_t i = 0; i < n; i++)
      if (p[i] < '0' || p[i] > '9') digits = 0;
    if (digits) mk_buf_printf(out, "[%.*s]", (int)n, p);
    else mk_buf_printf(out, ".%.*s", (int)n, p);
    p += n;
    if (*p == '.') p++;
  }
  return out->err;
}

static int is_identifier(const char *s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++)
    if (!(s[i] == '_' || (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
          (s[i] >= 'A' && s[i] <= 'Z')))
      return 0;
  return 1;
}

static int emit_args_list(const mk_node *n, int skip_first, const emitter *e, mk_buf *out,
                          mk_errmsg *err) {
  int count = 0;
  const cJSON *a = n->args ? n->args->child : NULL;
  if (skip_first && a) a = a->next;
  for (; a; a = a->next, count++) {
    if (count) mk_buf_puts(out, ", ");
    int rc = emit_arg(a, e, out, err);
    if (rc) return rc;
  }
  for (const cJSON *kw = n->kwargs ? n->kwargs->child : NULL; kw; kw = kw->next, count++) {
    /* A keyword is pasted into code: it must be an identifier. */
    if (kw->string == NULL || !is_identifier(kw->string, strlen(kw->string)))
      return mk_errf(err, MK_EUNSUPPORTED, "keyword '%.60s' is not an identifier",
                     kw->string ? kw->string : "");
    if (count) mk_buf_puts(out, ", ");
    mk_buf_printf(out, "%s=", kw->string);
    int rc = emit_arg(kw, e, out, err);
    if (rc) return rc;
  }
  return out->err;
}

/* Every component of a dotted op name must be an identifier. */
static int is_dotted_name(const char *op) {
  const char *p = op;
  while (*p) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    if (!is_identifier(p, n)) return 0;
    p += n;
    if (*p == '.') p++;
  }
  return strncmp(op, "torch.", 6) == 0;
}

static int emit_infix(const mk_node *n, const char *method, const emitter *e, mk_buf *out,
                      mk_errmsg *err, int *done) {
  *done = 0;
  if (cJSON_GetArraySize(n->args) != 2 || (n->kwargs && n->kwargs->child)) return 0;
  for (size_t i = 0; i < sizeof infix_ops / sizeof infix_ops[0]; i++) {
    if (strcmp(method, infix_ops[i].dunder) != 0) continue;
    const cJSON *a = cJSON_GetArrayItem(n->args, infix_ops[i].reflected ? 1 : 0);
    const cJSON *b = cJSON_GetArrayItem(n->args, infix_ops[i].reflected ? 0 : 1);
    mk_buf_putc(out, '(');
    int rc = emit_arg(a, e, out, err);
    if (!rc) rc = mk_buf_printf(out, " %s ", infix_ops[i].op);
    if (!rc) rc = emit_arg(b, e, out, err);
    if (!rc) rc = mk_buf_putc(out, ')');
    *done = 1;
    return rc;
  }
  return 0;
}

int mk_pyemit_call(const mk_graph *g, const mk_node *n, mk_value_namer namer, void *ctx,
                   mk_buf *out, mk_errmsg *err) {
  (void)g;
  if (n->op == NULL || !is_dotted_name(n->op))
    return mk_errf(err, MK_EUNSUPPORTED, "op '%.200s' is not a torch callable", n->op ? n->op : "");
  static const char tensor_prefix[] = "torch.Tensor.";
  static const char f_prefix[] = "torch.nn.functional.";
  const emitter e = {namer, ctx, n};
  if (strncmp(n->op, tensor_prefix, sizeof tensor_prefix - 1) == 0 && n->args &&
      cJSON_GetArraySize(n->args) >= 1) {
    const char *method = n->op + sizeof tensor_prefix - 1;
    int done = 0;
    int rc = emit_infix(n, method, &e, out, err, &done);
    if (rc || done) return rc;
    const cJSON *self_arg = n->args->child;
    bool self_tensor = cJSON_IsObject(self_arg) && cJSON_GetObjectItemCaseSensitive(self_arg, "t");
    if (strncmp(method, "__", 2) != 0 && self_tensor) {
      /* x.view(...) rather than torch.Tensor.view(x, ...) */
      rc = emit_arg(n->args->child, &e, out, err);
      if (!rc) rc = mk_buf_printf(out, ".%s(", method);
      if (!rc) rc = emit_args_list(n, 1, &e, out, err);
      if (!rc) rc = mk_buf_putc(out, ')');
      return rc;
    }
  }
  if (strncmp(n->op, f_prefix, sizeof f_prefix - 1) == 0)
    mk_buf_printf(out, "F.%s(", n->op + sizeof f_prefix - 1);
  else
    mk_buf_printf(out, "%s(", n->op);
  int rc = emit_args_list(n, 0, &e, out, err);
  if (!rc) rc = mk_buf_putc(out, ')');
  return rc;
}

/* Walks the node's return structure, emitting one assignment per tensor
 * found at `path` (a chain of [i] subscripts on `_r`). */
static int bind_outputs(const cJSON *s, mk_buf *path, mk_value_namer namer, void *ctx, int indent,
                        mk_buf *out) {
  if (s == NULL || !cJSON_IsObject(s) || s->child == NULL) return 0;
  const cJSON *tag = s->child;
  if (strcmp(tag->string, "t") == 0) {
    mk_buf_indent(out, indent);
    namer(ctx, tag->valueint, out);
    return mk_buf_printf(out, " = _r%s\n", mk_buf_cstr(path));
  }
  if (strcmp(tag->string, "tuple") && strcmp(tag->string, "list")) return 0;
  int i = 0;
  for (const cJSON *it = tag->child; it; it = it->next, i++) {
    size_t mark = path->len;
    mk_buf_printf(path, "[%d]", i);
    int rc = bind_outputs(it, path, namer, ctx, indent, out);
    path->len = mark;
    if (path->data) path->data[mark] = '\0';
    if (rc) return rc;
  }
  return out->err;
}

static void mark_returned(const cJSON *s, int *ids, int *n, int max) {
  if (s == NULL) return;
  if (cJSON_IsObject(s) && s->child && s->child->string && strcmp(s->child->string, "t") == 0) {
    if (*n < max) ids[(*n)++] = s->child->valueint;
    return;
  }
  for (const cJSON *it = s->child; it; it = it->next) mark_returned(it, ids, n, max);
}

/* `fresh = mutated` for each output the call does not return: the capture
 * gives a tensor modified in place a new value id (docs/protocol.md), and
 * code after the call reads it by that id. */
int mk_pyemit_mutations(const mk_node *n, mk_value_namer namer, void *ctx, int indent, mk_buf *out) {
  if (n->nmutates == 0) return 0;
  int ret[64], nret = 0;
  mark_returned(n->out, ret, &nret, 64);
  int m = 0;
  for (int k = 0; k < n->noutputs && m < n->nmutates; k++) {
    int vid = n->outputs[k];
    bool returned = false;
    for (int i = 0; i < nret && !returned; i++) returned = ret[i] == vid;
    if (returned) continue;
    int target = n->mutates[m++];
    if (target == vid) continue;
    mk_buf a, b;
    mk_buf_init(&a, 4096);
    mk_buf_init(&b, 4096);
    namer(ctx, vid, &a);
    namer(ctx, target, &b);
    if (!a.err && !b.err && strcmp(mk_buf_cstr(&a), mk_buf_cstr(&b)) != 0) {
      mk_buf_indent(out, indent);
      mk_buf_printf(out, "%s = %s\n", mk_buf_cstr(&a), mk_buf_cstr(&b));
    }
    mk_buf_free(&a);
    mk_buf_free(&b);
  }
  return out->err;
}

int mk_pyemit_node(const mk_graph *g, const mk_node *n, mk_value_namer namer, void *ctx, int indent,
                   mk_buf *out, mk_errmsg *err) {
  const cJSON *s = n->out;
  int single = s && cJSON_IsObject(s) && s->child && s->child->string &&
               strcmp(s->child->string, "t") == 0;
  mk_buf_indent(out, indent);
  if (single) {
    namer(ctx, s->child->valueint, out);
    mk_buf_puts(out, " = ");
  } else {
    mk_buf_puts(out, "_r = ");
  }
  int rc = mk_pyemit_call(g, n, namer, ctx, out, err);
  if (rc) return rc;
  mk_buf_putc(out, '\n');
  if (!single) {
    mk_buf path;
    mk_buf_init(&path, 4096);
    rc = bind_outputs(s, &path, namer, ctx, indent, out);
    mk_buf_free(&path);
    if (rc) return rc;
  }
  rc = mk_pyemit_mutations(n, namer, ctx, indent, out);
  return rc ? rc : out->err;
}

/* The first device constant inside an encoded argument ("cpu"), or NULL. */
static const char *first_device(const cJSON *arg) {
  if (arg == NULL) return NULL;
  if (cJSON_IsObject(arg) && arg->child && arg->child->string &&
      strcmp(arg->child->string, "device") == 0 && cJSON_IsString(arg->child))
    return arg->child->valuestring;
  if (cJSON_IsArray(arg) || cJSON_IsObject(arg))
    for (const cJSON *c = arg->child; c; c = c->next) {
      const char *d = first_device(c);
      if (d) return d;
    }
  return NULL;
}

int mk_pyemit_constant_node(const mk_graph *g, const mk_node *n, mk_value_namer namer, void *ctx,
                            int indent, mk_buf *out, mk_errmsg *err) {
  if (n->noutputs != 1) return mk_errf(err, MK_EINVAL, "node %d makes %d tensors, not one", n->id, n->noutputs);
  mk_buf_indent(out, indent);
  namer(ctx, n->outputs[0], out);
  /* The key: the node, the default dtype (torch.tensor(1.5) follows it),
   * the device the call spells as MK_PYEMIT_DEVICE_VAR, if it names one, and
   * the sizes it takes from the batch. */
  mk_buf_printf(out, " = " MK_PYEMIT_CONST_FN "((%d, torch.get_default_dtype()", n->id);
  if (first_device(n->args) || first_device(n->kwargs)) mk_buf_puts(out, ", " MK_PYEMIT_DEVICE_VAR);
  /* and each size that follows the batch: one tensor per batch seen */
  const emitter e = {namer, ctx, n};
  for (int k = 0; k < n->nbatch_ints; k++) {
    mk_buf_puts(out, ", ");
    int rc = emit_batch_int(&n->batch_ints[k], &e, out);
    if (rc) return rc;
  }
  mk_buf_puts(out, "), lambda: ");
  int rc = mk_pyemit_call(g, n, namer, ctx, out, err);
  if (rc) return rc;
  return mk_buf_puts(out, ")\n");
}

int mk_pyemit_constant_helper(mk_buf *out) {
  return mk_buf_puts(out,
                     "\n\n# Tensors the forward makes from constants alone, made once per device and\n"
                     "# reused (nothing writes or returns them): no host-to-device copy per call,\n"
                     "# and the forward can be captured as a CUDA graph.\n"
                     "_MK_CONSTS: dict = {}\n\n\n"
                     "def " MK_PYEMIT_CONST_FN "(key, make):\n"
                     "    t = _MK_CONSTS.get(key)\n"
                     "    if t is None:\n"
                     "        t = _MK_CONSTS[key] = make()\n"
                     "    return t\n");
}

int mk_pyemit_device_binding(const mk_graph *g, const int *nodes, int nnodes, int tensor_vid,
                             mk_value_namer namer, void *ctx, int indent, mk_buf *out) {
  const char *recorded = NULL;
  for (int i = 0; i < nnodes && recorded == NULL; i++) {
    if (nodes[i] < 0 || nodes[i] >= g->nnodes) continue;
    const mk_node *n = &g->nodes[nodes[i]];
    recorded = first_device(n->args);
    if (recorded == NULL) recorded = first_device(n->kwargs);
  }
  if (recorded == NULL) return 0;
  mk_buf_indent(out, indent);
  mk_buf_puts(out, MK_PYEMIT_DEVICE_VAR " = ");
  if (tensor_vid >= 0 && tensor_vid < g->nvalues) {
    namer(ctx, tensor_vid, out);
    mk_buf_puts(out, ".device\n");
  } else {
    /* No tensor to take the device from (a run() that only makes tensors):
     * the current GPU where there is one, where workers verify and
     * compositions run; the recorded "cpu" would be wrong on every GPU. */
    mk_buf_puts(out, "torch.device('cuda', torch.cuda.current_device()) "
                     "if torch.cuda.is_available() else torch.device('cpu')\n");
  }
  return out->err;
}

int mk_pyemit_prelude(mk_buf *out) {
  return mk_buf_puts(out,
                     "import math\n\nimport torch\nimport torch.nn as nn\n"
                     "import torch.nn.functional as F\n");
}

int mk_pyemit_conversion(const mk_graph *g, int vid, int conv, mk_value_namer namer, void *ctx,
                         int indent, mk_buf *out) {
  if (g == NULL || vid < 0 || vid >= g->nvalues) return 0;
  const char *suffix = mk_layout_suffix((mk_layout_conv)conv, g->values[vid].rank);
  if (*suffix == '\0') return 0;
  mk_buf_indent(out, indent);
  namer(ctx, vid, out);
  mk_buf_puts(out, " = ");
  namer(ctx, vid, out);
  mk_buf_puts(out, suffix);
  return mk_buf_putc(out, '\n');
}
