/* builtin_emit.c — small emitters shared by the builtin proposer and the
 * reference candidate: reading recorded call arguments, writing them back as
 * Python (docs/protocol.md's encoding), naming values, and the candidate list.
 *
 * Common call forms are written the way a person would (`a + b`,
 * `x.view(...)`, `torch.nn.functional.relu(x)` keeps its full dotted name so
 * no import alias is needed). */
#include "builtin_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- argument access --------------------------------------------------- */

const cJSON *bi_arg(const mk_node *n, int pos, const char *kw) {
  if (pos >= 0 && n->args) {
    const cJSON *a = cJSON_GetArrayItem(n->args, pos);
    if (a) return a;
  }
  if (kw && n->kwargs) return cJSON_GetObjectItemCaseSensitive(n->kwargs, kw);
  return NULL;
}

bool bi_arg_none(const cJSON *a) { return a == NULL || cJSON_IsNull(a); }

bool bi_arg_number(const cJSON *a, double *out) {
  if (a == NULL) return false;
  if (cJSON_IsBool(a)) {
    *out = cJSON_IsTrue(a) ? 1.0 : 0.0;
    return true;
  }
  if (cJSON_IsNumber(a)) {
    *out = a->valuedouble;
    return true;
  }
  const cJSON *f = cJSON_IsObject(a) ? cJSON_GetObjectItemCaseSensitive(a, "float") : NULL;
  if (f == NULL) return false;
  if (cJSON_IsNumber(f)) {
    *out = f->valuedouble;
    return true;
  }
  if (cJSON_IsString(f)) {
    if (strcmp(f->valuestring, "inf") == 0) *out = INFINITY;
    else if (strcmp(f->valuestring, "-inf") == 0) *out = -INFINITY;
    else if (strcmp(f->valuestring, "nan") == 0) *out = NAN;
    else return false;
    return true;
  }
  return false;
}

bool bi_arg_int(const cJSON *a, long long *out) {
  if (a == NULL || !cJSON_IsNumber(a)) return false;
  double d = a->valuedouble;
  if (d != floor(d) || fabs(d) > 9e15) return false;
  *out = (long long)d;
  return true;
}

bool bi_arg_bool(const cJSON *a, bool def, bool *ok) {
  if (ok) *ok = true;
  if (bi_arg_none(a)) return def;
  if (cJSON_IsBool(a)) return cJSON_IsTrue(a);
  if (cJSON_IsNumber(a)) return a->valuedouble != 0;
  if (ok) *ok = false;
  return def;
}

int bi_arg_tensor(const cJSON *a) {
  if (a == NULL || !cJSON_IsObject(a)) return -1;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(a, "t");
  return (t && cJSON_IsNumber(t)) ? t->valueint : -1;
}

int bi_arg_ints(const cJSON *a, long long *out, int max) {
  long long v;
  if (bi_arg_int(a, &v)) {
    if (max < 1) return -1;
    out[0] = v;
    return 1;
  }
  if (a == NULL) return -1;
  const cJSON *seq = a;
  if (cJSON_IsObject(a)) {
    seq = cJSON_GetObjectItemCaseSensitive(a, "tuple");
    if (!seq) seq = cJSON_GetObjectItemCaseSensitive(a, "list");
    if (!seq) seq = cJSON_GetObjectItemCaseSensitive(a, "size");
  }
  if (seq == NULL || !cJSON_IsArray(seq)) return -1;
  int n = 0;
  for (const cJSON *it = seq->child; it; it = it->next) {
    if (n >= max || !bi_arg_int(it, &v)) return -1;
    out[n++] = v;
  }
  return n;
}

const char *bi_arg_str(const cJSON *a) {
  return (a && cJSON_IsString(a)) ? a->valuestring : NULL;
}

/* ---- Python literals ---------------------------------------------------- */

int bi_py_float(double d, mk_buf *out) {
  if (isnan(d)) return mk_buf_puts(out, "float('nan')");
  if (isinf(d)) return mk_buf_puts(out, d > 0 ? "float('inf')" : "float('-inf')");
  char tmp[64];
  /* Shortest representation that reads back to the same double, like repr. */
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, d);
    if (strtod(tmp, NULL) == d) break;
  }
  mk_buf_puts(out, tmp);
  if (strpbrk(tmp, ".eEn") == NULL) mk_buf_puts(out, ".0");
  return out->err;
}

int bi_tl_float(double d, mk_buf *out) {
  /* Triton kernels have no float('inf'): spell infinities as a huge literal
   * that overflows to inf in fp32 arithmetic the same way. */
  if (isinf(d)) return mk_buf_puts(out, d > 0 ? "float(\"inf\")" : "float(\"-inf\")");
  if (isnan(d)) return mk_buf_puts(out, "float(\"nan\")");
  return bi_py_float(d, out);
}

static int emit_seq(const cJSON *items, const char *open, const char *close, bool one_comma,
                    bi_namer namer, void *ctx, mk_buf *out, mk_errmsg *err) {
  mk_buf_puts(out, open);
  int n = 0;
  for (const cJSON *it = items ? items->child : NULL; it; it = it->next, n++) {
    if (n) mk_buf_puts(out, ", ");
    int rc = bi_py_arg(it, namer, ctx, out, err);
    if (rc) return rc;
  }
  if (n == 1 && one_comma) mk_buf_putc(out, ',');
  return mk_buf_puts(out, close);
}

/* dtype names, devices, memory formats: identifier-like tokens only, so a
 * hostile capture cannot inject code into a candidate. */
static bool safe_token(const char *s) {
  if (s == NULL || *s == '\0') return false;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_' || *s == ':')) return false;
  return true;
}

static int emit_tagged(const cJSON *a, bi_namer namer, void *ctx, mk_buf *out, mk_errmsg *err) {
  const cJSON *tag = a->child;
  if (tag == NULL) return mk_errf(err, MK_EINVAL, "empty argument object");
  const char *k = tag->string;
  if (strcmp(k, "t") == 0) {
    if (!cJSON_IsNumber(tag)) return mk_errf(err, MK_EINVAL, "bad tensor reference");
    return namer(ctx, tag->valueint, out);
  }
  if (strcmp(k, "tuple") == 0) return emit_seq(tag, "(", ")", true, namer, ctx, out, err);
  if (strcmp(k, "list") == 0) return emit_seq(tag, "[", "]", false, namer, ctx, out, err);
  if (strcmp(k, "size") == 0) return emit_seq(tag, "torch.Size([", "])", false, namer, ctx, out, err);
  if (strcmp(k, "float") == 0) {
    double d;
    if (!bi_arg_number(a, &d)) return mk_errf(err, MK_EINVAL, "bad float encoding");
    return bi_py_float(d, out);
  }
  if (strcmp(k, "ellipsis") == 0) return mk_buf_puts(out, "...");
  if (strcmp(k, "slice") == 0) {
    if (!cJSON_IsArray(tag) || cJSON_GetArraySize(tag) != 3)
      return mk_errf(err, MK_EINVAL, "bad slice encoding");
    return emit_seq(tag, "slice(", ")", false, namer, ctx, out, err);
  }
  if (strcmp(k, "dict") == 0) {
    mk_buf_putc(out, '{');
    int n = 0;
    for (const cJSON *p = tag->child; p; p = p->next, n++) {
      if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2)
        return mk_errf(err, MK_EINVAL, "bad dict encoding");
      if (n) mk_buf_puts(out, ", ");
      int rc = bi_py_arg(cJSON_GetArrayItem(p, 0), namer, ctx, out, err);
      if (!rc) rc = mk_buf_puts(out, ": ");
      if (!rc) rc = bi_py_arg(cJSON_GetArrayItem(p, 1), namer, ctx, out, err);
      if (rc) return rc;
    }
    return mk_buf_putc(out, '}');
  }
  if (strcmp(k, "opaque") == 0)
    return mk_errf(err, MK_EUNSUPPORTED, "an argument could not be recorded exactly (%.80s)",
                   cJSON_IsString(tag) ? tag->valuestring : "?");
  if (!cJSON_IsString(tag) || !safe_token(tag->valuestring))
    return mk_errf(err, MK_EUNSUPPORTED, "argument of kind '%.40s' cannot be written as Python", k);
  if (strcmp(k, "dtype") == 0 || strcmp(k, "memory_format") == 0 || strcmp(k, "layout") == 0)
    return mk_buf_printf(out, "torch.%s", tag->valuestring);
  if (strcmp(k, "device") == 0) return mk_buf_printf(out, "torch.device('%s')", tag->valuestring);
  return mk_errf(err, MK_EUNSUPPORTED, "argument of kind '%.40s' cannot be written as Python", k);
}

int bi_py_arg(const cJSON *a, bi_namer namer, void *ctx, mk_buf *out, mk_errmsg *err) {
  if (a == NULL || cJSON_IsNull(a)) return mk_buf_puts(out, "None");
  if (cJSON_IsTrue(a)) return mk_buf_puts(out, "True");
  if (cJSON_IsFalse(a)) return mk_buf_puts(out, "False");
  if (cJSON_IsNumber(a)) {
    long long v;
    if (bi_arg_int(a, &v)) return mk_buf_printf(out, "%lld", v);
    return bi_py_float(a->valuedouble, out);
  }
  if (cJSON_IsString(a)) return mk_buf_py_str(out, a->valuestring);
  if (cJSON_IsArray(a)) return emit_seq(a, "[", "]", false, namer, ctx, out, err);
  if (cJSON_IsObject(a)) return emit_tagged(a, namer, ctx, out, err);
  return mk_errf(err, MK_EINVAL, "unknown argument encoding");
}

static const struct {
  const char *dunder, *op;
  bool reflected;
} infix[] = {
    {"__add__", "+", false},       {"__radd__", "+", true},      {"__iadd__", "+=", false},
    {"__sub__", "-", false},       {"__rsub__", "-", true},      {"__isub__", "-=", false},
    {"__mul__", "*", false},       {"__rmul__", "*", true},      {"__imul__", "*=", false},
    {"__truediv__", "/", false},   {"__rtruediv__", "/", true},  {"__itruediv__", "/=", false},
    {"__floordiv__", "//", false}, {"__rfloordiv__", "//", true}, {"__matmul__", "@", false},
    {"__rmatmul__", "@", true},    {"__pow__", "**", false},     {"__rpow__", "**", true},
    {"__mod__", "%", false},       {"__rmod__", "%", true},      {"__and__", "&", false},
    {"__or__", "|", false},        {"__xor__", "^", false},      {"__lt__", "<", false},
    {"__le__", "<=", false},       {"__gt__", ">", false},       {"__ge__", ">=", false},
    {"__eq__", "==", false},       {"__ne__", "!=", false},
};

static bool is_ident(const char *s, size_t n) {
  if (n == 0 || isdigit((unsigned char)s[0])) return false;
  for (size_t i = 0; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return false;
  return true;
}

static bool is_torch_dotted(const char *op) {
  if (strncmp(op, "torch.", 6) != 0) return false;
  for (const char *p = op; *p;) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    if (!is_ident(p, n)) return false;
    p += n;
    if (*p == '.') p++;
  }
  return true;
}

static int emit_call_args(const mk_node *n, int skip, bi_namer namer, void *ctx, mk_buf *out,
                          mk_errmsg *err) {
  int count = 0;
  const cJSON *a = n->args ? n->args->child : NULL;
  for (int i = 0; a && i < skip; i++) a = a->next;
  for (; a; a = a->next, count++) {
    if (count) mk_buf_puts(out, ", ");
    int rc = bi_py_arg(a, namer, ctx, out, err);
    if (rc) return rc;
  }
  for (const cJSON *kw = n->kwargs ? n->kwargs->child : NULL; kw; kw = kw->next, count++) {
    if (!is_ident(kw->string, strlen(kw->string)))
      return mk_errf(err, MK_EUNSUPPORTED, "keyword '%.60s' is not an identifier", kw->string);
    if (count) mk_buf_puts(out, ", ");
    mk_buf_printf(out, "%s=", kw->string);
    int rc = bi_py_arg(kw, namer, ctx, out, err);
    if (rc) return rc;
  }
  return out->err;
}

int bi_py_call(const mk_node *n, bi_namer namer, void *ctx, mk_buf *out, mk_errmsg *err) {
  if (n->op == NULL || !is_torch_dotted(n->op))
    return mk_errf(err, MK_EUNSUPPORTED, "op '%.200s' is not a torch callable", n->op ? n->op : "");
  static const char tensor_prefix[] = "torch.Tensor.";
  const size_t tp = sizeof tensor_prefix - 1;
  int nargs = n->args ? cJSON_GetArraySize(n->args) : 0;
  if (strncmp(n->op, tensor_prefix, tp) == 0 && nargs >= 1) {
    const char *method = n->op + tp;
    bool nokw = n->kwargs == NULL || n->kwargs->child == NULL;
    for (size_t i = 0; nargs == 2 && nokw && i < sizeof infix / sizeof infix[0]; i++) {
      if (strcmp(method, infix[i].dunder) != 0) continue;
      if (infix[i].op[strlen(infix[i].op) - 1] == '=' && strcmp(infix[i].op, "==") &&
          strcmp(infix[i].op, "!=") && strcmp(infix[i].op, "<=") && strcmp(infix[i].op, ">="))
        break; /* augmented assignment is a statement: call the dunder instead */
      const cJSON *a = cJSON_GetArrayItem(n->args, infix[i].reflected ? 1 : 0);
      const cJSON *b = cJSON_GetArrayItem(n->args, infix[i].reflected ? 0 : 1);
      mk_buf_putc(out, '(');
      int rc = bi_py_arg(a, namer, ctx, out, err);
      if (!rc) rc = mk_buf_printf(out, " %s ", infix[i].op);
      if (!rc) rc = bi_py_arg(b, namer, ctx, out, err);
      if (!rc) rc = mk_buf_putc(out, ')');
      return rc;
    }
    /* x.method(args) when x is a tensor; torch.Tensor.__iadd__(x, y) style otherwise. */
    if (bi_arg_tensor(n->args->child) >= 0) {
      int rc = bi_py_arg(n->args->child, namer, ctx, out, err);
      if (!rc) rc = mk_buf_printf(out, ".%s(", method);
      if (!rc) rc = emit_call_args(n, 1, namer, ctx, out, err);
      if (!rc) rc = mk_buf_putc(out, ')');
      return rc;
    }
  }
  mk_buf_printf(out, "%s(", n->op);
  int rc = emit_call_args(n, 0, namer, ctx, out, err);
  if (!rc) rc = mk_buf_putc(out, ')');
  return rc;
}

/* Emits `name = _r[i][j]` for each tensor in the return structure. */
static int bind_outputs(const cJSON *s, mk_buf *path, bi_namer namer, void *ctx, int indent,
                        mk_buf *out) {
  if (s == NULL || !cJSON_IsObject(s) || s->child == NULL) return 0;
  const cJSON *tag = s->child;
  if (strcmp(tag->string, "t") == 0) {
    mk_buf_indent(out, indent);
    namer(ctx, tag->valueint, out);
    return mk_buf_printf(out, " = _r%s\n", mk_buf_cstr(path));
  }
  if (strcmp(tag->string, "tuple") != 0 && strcmp(tag->string, "list") != 0) return 0;
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

int bi_py_node(const mk_graph *g, const mk_node *n, bi_namer namer, void *ctx, int indent,
               mk_buf *out, mk_errmsg *err) {
  (void)g;
  const cJSON *s = n->out;
  bool single = s && cJSON_IsObject(s) && s->child && strcmp(s->child->string, "t") == 0;
  mk_buf_indent(out, indent);
  if (single) {
    namer(ctx, s->child->valueint, out);
    mk_buf_puts(out, " = ");
  } else {
    mk_buf_puts(out, "_r = ");
  }
  int rc = bi_py_call(n, namer, ctx, out, err);
  if (rc) return rc;
  mk_buf_putc(out, '\n');
  if (!single) {
    mk_buf path;
    mk_buf_init(&path, 4096);
    rc = bind_outputs(s, &path, namer, ctx, indent, out);
    mk_buf_free(&path);
    if (rc) return rc;
  }
  /* Fresh ids of tensors modified in place but not returned (batch norm's
   * running statistics) name the same tensor as before. */
  int returned = n->noutputs - n->nmutates;
  for (int i = 0; i < n->nmutates; i++) {
    int fresh_idx = returned + i;
    if (fresh_idx < 0 || fresh_idx >= n->noutputs) continue;
    int fresh = n->outputs[fresh_idx];
    bool in_out = false;
    for (int k = 0; k < returned; k++) in_out |= n->outputs[k] == fresh;
    if (in_out || fresh == n->mutates[i]) continue;
    mk_buf_indent(out, indent);
    namer(ctx, fresh, out);
    mk_buf_puts(out, " = ");
    namer(ctx, n->mutates[i], out);
    mk_buf_putc(out, '\n');
  }
  return out->err;
}

/* ---- value names ---------------------------------------------------------- */

static const char *const reserved[] = {
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
    "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
    "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return",
    "try", "while", "with", "yield", "torch", "triton", "tl", "math", "run", "F", "nn",
    "MK_USES_TORCH", "shape", "grid", "n", "float", "int", "len", "range", "tuple", "max", "min",
    /* kernel locals of the generated code */
    "offs", "mask", "pid", "acc", "rows", "cols", "row", "col", "out", "numel", "other",
    "BLOCK", "BLOCK_R", "BLOCK_I", "BLOCK_M", "BLOCK_N", "BLOCK_K",
};

static void sanitize(const char *name, mk_buf *out) {
  for (const char *p = name; *p; p++)
    mk_buf_putc(out, isalnum((unsigned char)*p) ? *p : '_');
}

/* Names of generated temporaries look like x0 / v12 / c3 / s12 / _anything:
 * a state name of that form gets a "p_" prefix so nothing collides. */
static bool looks_generated(const char *s) {
  if (s[0] == '_') return true;
  if (s[0] == 'D' && isdigit((unsigned char)s[1])) return true; /* dims D0.. */
  if (s[0] != 'x' && s[0] != 'v' && s[0] != 'c' && s[0] != 's') return false;
  const char *p = s + 1;
  if (*p == '\0') return false;
  while (*p == '_' || isalpha((unsigned char)*p)) p++; /* "sh12", "s_12" */
  if (!isdigit((unsigned char)*p)) return false;
  for (; *p; p++)
    if (!isdigit((unsigned char)*p)) return false;
  return true;
}

int bi_value_name(const mk_graph *g, int vid, mk_buf *out) {
  if (vid < 0 || vid >= g->nvalues) return mk_buf_printf(out, "bad%d", vid < 0 ? 0 : vid);
  const mk_value *v = &g->values[vid];
  switch (v->kind) {
  case MK_VALUE_INPUT: return mk_buf_printf(out, "x%d", v->index >= 0 ? v->index : vid);
  case MK_VALUE_NODE: return mk_buf_printf(out, "v%d", vid);
  case MK_VALUE_CONST: return mk_buf_printf(out, "c%d", vid);
  default: break;
  }
  if (v->name == NULL || v->name[0] == '\0') return mk_buf_printf(out, "p%d", vid);
  mk_buf tmp;
  mk_buf_init(&tmp, 1024);
  sanitize(v->name, &tmp);
  const char *s = mk_buf_cstr(&tmp);
  bool bad = isdigit((unsigned char)s[0]) || looks_generated(s);
  for (size_t i = 0; !bad && i < sizeof reserved / sizeof reserved[0]; i++)
    bad = strcmp(s, reserved[i]) == 0;
  /* Two state names that sanitize alike ("a.b_c", "a_b.c") get their ids. */
  bool clash = false;
  for (int i = 0; i < g->nvalues && !clash; i++) {
    const mk_value *o = &g->values[i];
    if (i == vid || o->name == NULL || o->kind == MK_VALUE_INPUT || o->kind == MK_VALUE_NODE)
      continue;
    if (strcmp(o->name, v->name) == 0) continue; /* versions of one buffer share a name */
    mk_buf t2;
    mk_buf_init(&t2, 1024);
    sanitize(o->name, &t2);
    clash = strcmp(mk_buf_cstr(&t2), s) == 0;
    mk_buf_free(&t2);
  }
  mk_buf_printf(out, "%s%s", bad ? "p_" : "", s);
  if (clash) mk_buf_printf(out, "_%d", vid);
  mk_buf_free(&tmp);
  return out->err;
}

int bi_graph_namer(void *ctx, int vid, mk_buf *out) {
  return bi_value_name((const mk_graph *)ctx, vid, out);
}

/* ---- candidate lists ---------------------------------------------------------- */

int mk_candidate_list_push(mk_candidate_list *l, mk_candidate c) {
  if (l->n == l->cap) {
    int ncap = l->cap ? l->cap * 2 : 8;
    mk_candidate *items = realloc(l->items, (size_t)ncap * sizeof *items);
    if (items == NULL) {
      mk_candidate_free(&c);
      return MK_ENOMEM;
    }
    l->items = items;
    l->cap = ncap;
  }
  l->items[l->n++] = c;
  return 0;
}

void mk_candidate_free(mk_candidate *c) {
  if (c == NULL) return;
  free(c->name);
  free(c->source);
  free(c->origin);
  free(c->notes);
  *c = (mk_candidate){0};
}

void mk_candidate_list_free(mk_candidate_list *l) {
  if (l == NULL) return;
  for (int i = 0; i < l->n; i++) mk_candidate_free(&l->items[i]);
  free(l->items);
  *l = (mk_candidate_list){0};
}
