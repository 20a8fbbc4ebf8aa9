/* export_aten.c — recorded torch calls in ATen form, for the native
 * worker's interpreter (docs/native-worker.md).
 *
 * The same op table as the C++ export (export_ops.c) and the same binding
 * of Python arguments to each row's signature (export_call_bind); only the
 * last step differs: instead of pasting C++ spellings into the row's
 * template, the template is read as a small expression —
 *   at::NAME(e, ...) | $p.METHOD(e, ...) | std::get<K>(e) | $p
 *   | true | false | at::kFloat ... | at::TensorOptions().dtype(e)
 * — and each parameter becomes a protocol-encoded value normalised to the
 * kind the row gives it (a single int repeated for L2, a Python float as
 * {"float": x}, stride=None as the empty list, ...). Everything the engine
 * knows about Python call signatures stays here; the worker only resolves
 * an aten:: name and positional / keyword values against ATen's schemas.
 *
 * A node's form:
 *   {"node": id, "op": "torch.relu", "line": L, "call": CALL,
 *    "copy_into": m               in-place: the result is copied into value m
 *                                 and every output id is bound to m;
 *    "out": structure,            otherwise: the result bound as the capture's
 *                                 `out` says (a tensor, a tuple or list of them);
 *    "alias": [[v, m], ...]}      fresh ids of tensors ATen updated itself
 *                                 (batch norm's running statistics) bound to m
 *   CALL = {"op": "aten::conv2d", "args": [...], "kwargs": {...}, "select": k}
 * where an argument may itself be {"call": CALL} (a template nesting two
 * ATen calls), and "select" takes item k of a tuple result. "mk::index" is
 * the one op that is not ATen's: Python's x[...] (args: the tensor and the
 * list of index terms, as recorded), which the worker runs through
 * at::indexing like the C++ export. */
#include "mk_export.h"

#include "export_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arguments -------------------------------------------------------------- */

static const char *tag_of(const cJSON *a) {
  return cJSON_IsObject(a) && a->child && a->child->string ? a->child->string : NULL;
}

static bool is_tensor(const cJSON *a) {
  const char *t = tag_of(a);
  return t && strcmp(t, "t") == 0 && cJSON_IsNumber(a->child);
}


/* Floats always tagged: the worker must not guess int from 2.0. */
static cJSON *float_value(double d) {
  cJSON *o = cJSON_CreateObject();
  if (isnan(d)) cJSON_AddStringToObject(o, "float", "nan");
  else if (isinf(d)) cJSON_AddStringToObject(o, "float", d > 0 ? "inf" : "-inf");
  else cJSON_AddNumberToObject(o, "float", d);
  return o;
}

static cJSON *int_value(double d) { return cJSON_CreateNumber(d); }

static cJSON *scalar_value(const cJSON *a) {
  double d;
  bool f;
  if (cJSON_IsBool(a)) return cJSON_CreateBool(cJSON_IsTrue(a));
  if (!export_number_of(a, &d, &f)) return NULL;
  return f ? float_value(d) : int_value(d);
}

static const cJSON *seq_items(const cJSON *a) {
  if (cJSON_IsArray(a)) return a;
  const char *t = tag_of(a);
  if (t && (strcmp(t, "tuple") == 0 || strcmp(t, "list") == 0 || strcmp(t, "size") == 0)) return a->child;
  return NULL;
}

static cJSON *tagged(const char *tag, cJSON *body) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL || body == NULL || !cJSON_AddItemToObject(o, tag, body)) {
    cJSON_Delete(o);
    cJSON_Delete(body);
    return NULL;
  }
  return o;
}

/* {"list": [ints]}; a single int is repeated `repeat` times (L2: 3 -> [3, 3]). */
static cJSON *int_list(const cJSON *a, int repeat) {
  double d;
  bool f;
  cJSON *items = cJSON_CreateArray();
  if (export_number_of(a, &d, &f)) {
    for (int i = 0; !f && i < (repeat > 0 ? repeat : 1); i++) cJSON_AddItemToArray(items, int_value(d));
    if (f) cJSON_Delete(items), items = NULL;
    return tagged("list", items);
  }
  const cJSON *seq = seq_items(a);
  for (const cJSON *it = seq ? seq->child : NULL; it; it = it->next) {
    if (!export_number_of(it, &d, &f) || f) {
      cJSON_Delete(items);
      return NULL;
    }
    cJSON_AddItemToArray(items, int_value(d));
  }
  if (seq == NULL) cJSON_Delete(items), items = NULL;
  return tagged("list", items);
}

static cJSON *tensor_list(const cJSON *a) {
  const cJSON *seq = seq_items(a);
  if (seq == NULL) return NULL;
  cJSON *items = cJSON_CreateArray();
  for (const cJSON *it = seq->child; it; it = it->next) {
    if (!is_tensor(it)) {
      cJSON_Delete(items);
      return NULL;
    }
    cJSON_AddItemToArray(items, cJSON_Duplicate(it, 1));
  }
  return tagged("list", items);
}

static const char *const dtype_names[] = {"float32", "float64", "float16", "bfloat16", "int64",
                                          "int32",   "int16",   "int8",    "uint8",    "bool"};
static const char *const memory_formats[] = {"contiguous_format", "channels_last", "channels_last_3d",
                                             "preserve_format"};

static cJSON *named_tag(const cJSON *a, const char *tag, const char *const *names, size_t n) {
  const char *t = tag_of(a);
  if (t == NULL || strcmp(t, tag) != 0 || !cJSON_IsString(a->child)) return NULL;
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], a->child->valuestring) == 0) return cJSON_Duplicate(a, 1);
  return NULL;
}

/* Argument `a` (NULL: absent) of kind `kind` as the worker reads it; NULL
 * when it has no ATen form (the same cases export_put_arg refuses). */
static cJSON *aten_arg(const char *kind, const cJSON *a) {
  bool optional = kind[strlen(kind) - 1] == '?';
  if (optional && (a == NULL || cJSON_IsNull(a))) return cJSON_CreateNull();
  if (a == NULL) return NULL;
  double d;
  bool f;
  switch (kind[0]) {
  case 'T':
    if (kind[1] == 'L') return tensor_list(a);
    if (is_tensor(a)) return cJSON_Duplicate(a, 1);
    return kind[1] == 'S' ? scalar_value(a) : NULL;
  case 'S':
    if (kind[1] == 'T') return cJSON_IsString(a) && strlen(a->valuestring) <= 64 ? cJSON_Duplicate(a, 1) : NULL;
    return scalar_value(a);
  case 'I':
    return export_number_of(a, &d, &f) && !f ? int_value(d) : NULL;
  case 'F':
    return export_number_of(a, &d, &f) ? float_value(d) : NULL;
  case 'B':
    return cJSON_IsBool(a) ? cJSON_Duplicate(a, 1) : NULL;
  case 'L':
    if (cJSON_IsNull(a)) return tagged("list", cJSON_CreateArray()); /* stride=None: the kernel size */
    return int_list(a, kind[1] >= '1' && kind[1] <= '3' ? kind[1] - '0' : 0);
  case 'D':
    return named_tag(a, "dtype", dtype_names, sizeof dtype_names / sizeof dtype_names[0]);
  case 'M':
    return named_tag(a, "memory_format", memory_formats, sizeof memory_formats / sizeof memory_formats[0]);
  default:
    return NULL;
  }
}

/* ---- templates -------------------------------------------------------------- */

typedef struct tmpl_reader {
  const char *p;
  const export_call *call;
  cJSON *const *values; /* each parameter's ATen value (NULL for X kinds) */
  const char *why;      /* set on failure */
} tmpl_reader;

static bool eat(tmpl_reader *r, const char *s) {
  size_t n = strlen(s);
  if (strncmp(r->p, s, n) != 0) return false;
  r->p += n;
  return true;
}

static size_t ident_len(const char *p) {
  size_t n = 0;
  while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') || (p[n] >= '0' && p[n] <= '9') ||
         p[n] == '_')
    n++;
  return n;
}

static cJSON *read_expr(tmpl_reader *r, cJSON *kwargs);

/* Arguments up to ')' into call["args"] (and TensorOptions into kwargs). */
static bool read_args(tmpl_reader *r, cJSON *call) {
  cJSON *args = cJSON_GetObjectItemCaseSensitive(call, "args");
  cJSON *kwargs = cJSON_GetObjectItemCaseSensitive(call, "kwargs");
  if (eat(r, ")")) return true;
  for (;;) {
    cJSON *e = read_expr(r, kwargs);
    if (e == NULL) return false;
    if (cJSON_IsInvalid(e)) cJSON_Delete(e); /* went into kwargs */
    else cJSON_AddItemToArray(args, e);
    if (eat(r, ")")) return true;
    if (!eat(r, ", ")) {
      r->why = "expected ',' or ')'";
      return false;
    }
  }
}

static cJSON *new_call(const char *name, size_t len) {
  cJSON *call = cJSON_CreateObject();
  char op[96];
  snprintf(op, sizeof op, "aten::%.*s", (int)len, name);
  cJSON_AddStringToObject(call, "op", op);
  cJSON_AddArrayToObject(call, "args");
  cJSON_AddObjectToObject(call, "kwargs");
  return call;
}

static cJSON *nested(cJSON *call) { return tagged("call", call); }

static cJSON *param_value(tmpl_reader *r) {
  size_t n = ident_len(r->p);
  int k = export_call_param(r->call, r->p, n);
  r->p += n;
  if (k < 0 || r->values[k] == NULL) {
    r->why = "a $parameter that is not in the row";
    return NULL;
  }
  return cJSON_Duplicate(r->values[k], 1);
}

/* One expression; NULL with r->why on failure. An expression that is a
 * keyword argument (TensorOptions().dtype(x)) goes into kwargs and an
 * invalid cJSON item is returned in its place. */
static cJSON *read_expr(tmpl_reader *r, cJSON *kwargs) {
  if (eat(r, "true")) return cJSON_CreateTrue();
  if (eat(r, "false")) return cJSON_CreateFalse();
  if (eat(r, "std::get<")) {
    int k = atoi(r->p);
    r->p += strspn(r->p, "0123456789");
    if (!eat(r, ">(")) return r->why = "std::get<K>(", NULL;
    cJSON *inner = read_expr(r, kwargs);
    if (inner == NULL || !eat(r, ")") || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(inner, "call"))) {
      cJSON_Delete(inner);
      return r->why = r->why ? r->why : "std::get of something that is not a call", NULL;
    }
    cJSON_AddNumberToObject(cJSON_GetObjectItemCaseSensitive(inner, "call"), "select", k);
    return inner;
  }
  if (eat(r, "at::TensorOptions().dtype(")) {
    cJSON *d = read_expr(r, NULL);
    if (d == NULL || !eat(r, ")") || kwargs == NULL) {
      cJSON_Delete(d);
      return r->why = r->why ? r->why : "TensorOptions outside a call", NULL;
    }
    cJSON_AddItemToObject(kwargs, "dtype", d);
    cJSON *placeholder = cJSON_CreateObject();
    placeholder->type = cJSON_Invalid;
    return placeholder;
  }
  if (eat(r, "at::")) {
    size_t n = ident_len(r->p);
    const char *name = r->p;
    r->p += n;
    if (!eat(r, "(")) { /* a constant: at::kFloat */
      static const char *const consts[][2] = {{"kFloat", "float32"}, {"kDouble", "float64"}, {"kLong", "int64"}};
      for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
        if (strlen(consts[i][0]) == n && memcmp(consts[i][0], name, n) == 0)
          return tagged("dtype", cJSON_CreateString(consts[i][1]));
      return r->why = "an at:: constant the ATen form does not know", NULL;
    }
    cJSON *call = new_call(name, n);
    if (!read_args(r, call)) {
      cJSON_Delete(call);
      return NULL;
    }
    return nested(call);
  }
  if (eat(r, "$")) {
    cJSON *self = param_value(r);
    if (self == NULL || !eat(r, ".")) return self;
    size_t n = ident_len(r->p);
    cJSON *call = new_call(r->p, n);
    r->p += n;
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(call, "args"), self);
    if (!eat(r, "(") || !read_args(r, call)) {
      cJSON_Delete(call);
      return r->why = r->why ? r->why : "a method without arguments", NULL;
    }
    return nested(call);
  }
  r->why = "a term the ATen form does not read";
  return NULL;
}

/* The row's template as a CALL, the parameters' values put in. */
static int template_call(const mk_node *n, const export_call *c, cJSON *const *values, cJSON **call,
                         mk_errmsg *err) {
  tmpl_reader r = {.p = c->op->tmpl, .call = c, .values = values};
  cJSON *e = read_expr(&r, NULL);
  cJSON *inner = e ? cJSON_DetachItemFromObjectCaseSensitive(e, "call") : NULL;
  cJSON_Delete(e);
  if (inner == NULL || *r.p != '\0') {
    cJSON_Delete(inner);
    return mk_errf(err, MK_EINVAL, "op table row %s (%s): template has no ATen form: %s", c->op->name, n->op,
                   r.why ? r.why : "not one call");
  }
  *call = inner;
  return 0;
}

static int table_call(const mk_node *n, cJSON **call, mk_errmsg *err) {
  bool inplace;
  const export_op *op = export_op_find(n->op, &inplace);
  if (op == NULL)
    return mk_errf(err, MK_EUNSUPPORTED, "%s (line %d) has no ATen form in the exporter's op table", n->op,
                   n->span.line);
  export_call c;
  cJSON *values[EXPORT_MAX_PARAMS] = {0};
  int rc = export_call_bind(n, op, &c, err);
  for (int k = 0; !rc && k < c.np; k++) {
    if (c.ps[k].kind[0] == 'X') continue;
    values[k] = aten_arg(c.ps[k].kind, c.arg[k]);
    if (values[k] == NULL) {
      char *arg = c.arg[k] ? cJSON_PrintUnformatted(c.arg[k]) : NULL;
      rc = mk_errf(err, MK_EUNSUPPORTED, "%s (line %d): argument %s=%.80s has no ATen form (%s)", n->op,
                   n->span.line, c.ps[k].name, arg ? arg : "(missing)", c.ps[k].kind);
      free(arg);
    }
  }
  if (!rc) rc = template_call(n, &c, values, call, err);
  for (int k = 0; k < EXPORT_MAX_PARAMS; k++) cJSON_Delete(values[k]);
  export_call_free(&c);
  return rc;
}

/* ---- special forms (export_cpp.c's call_special) ---------------------------- */

static const cJSON *arg_or_kw(const mk_node *n, int pos, const char *kw) {
  const cJSON *a = cJSON_GetArrayItem(n->args, pos);
  return a ? a : cJSON_GetObjectItemCaseSensitive(n->kwargs, kw);
}

static cJSON *call_of(const char *op, cJSON *const *args, int nargs) {
  cJSON *call = cJSON_CreateObject();
  cJSON_AddStringToObject(call, "op", op);
  cJSON *a = cJSON_AddArrayToObject(call, "args");
  cJSON_AddObjectToObject(call, "kwargs");
  bool ok = true;
  for (int i = 0; i < nargs; i++) {
    if (args[i] == NULL) ok = false;
    else cJSON_AddItemToArray(a, args[i]);
  }
  if (!ok) cJSON_Delete(call), call = NULL;
  return call;
}

/* x[...]: the recorded terms, checked to be ints, bools, slices of ints,
 * None, Ellipsis or tensors. */
static bool index_term_ok(const cJSON *t) {
  double d;
  bool f;
  if (cJSON_IsNull(t) || cJSON_IsBool(t) || is_tensor(t)) return true;
  if (export_number_of(t, &d, &f)) return !f;
  const char *tag = tag_of(t);
  if (tag && strcmp(tag, "ellipsis") == 0) return true;
  if (tag && strcmp(tag, "slice") == 0 && cJSON_GetArraySize(t->child) == 3) {
    for (const cJSON *p = t->child->child; p; p = p->next)
      if (!cJSON_IsNull(p) && !(export_number_of(p, &d, &f) && !f)) return false;
    return true;
  }
  return false;
}

static cJSON *getitem(const mk_node *n) {
  const cJSON *self = cJSON_GetArrayItem(n->args, 0), *idx = cJSON_GetArrayItem(n->args, 1);
  if (cJSON_GetArraySize(n->args) != 2 || !is_tensor(self)) return NULL;
  const char *tag = tag_of(idx);
  bool tuple = tag && strcmp(tag, "tuple") == 0;
  cJSON *terms = cJSON_CreateArray();
  for (const cJSON *t = tuple ? idx->child->child : idx; t; t = tuple ? t->next : NULL) {
    if (!index_term_ok(t)) {
      cJSON_Delete(terms);
      return NULL;
    }
    cJSON_AddItemToArray(terms, cJSON_Duplicate(t, 1));
  }
  cJSON *args[] = {cJSON_Duplicate(self, 1), tagged("list", terms)};
  return call_of("mk::index", args, 2);
}

static cJSON *max_min(const mk_node *n, bool is_max) {
  const cJSON *a1 = cJSON_GetArrayItem(n->args, 1);
  const cJSON *dim = a1 ? a1 : cJSON_GetObjectItemCaseSensitive(n->kwargs, "dim");
  const cJSON *other = cJSON_GetObjectItemCaseSensitive(n->kwargs, "other");
  const cJSON *keep = arg_or_kw(n, 2, "keepdim");
  cJSON *self = aten_arg("T", cJSON_GetArrayItem(n->args, 0));
  if (other || is_tensor(a1)) {
    cJSON *args[] = {self, aten_arg("T", other ? other : a1)};
    return call_of(is_max ? "aten::maximum" : "aten::minimum", args, 2);
  }
  if (dim) {
    cJSON *args[] = {self, aten_arg("I", dim), keep ? aten_arg("B", keep) : cJSON_CreateFalse()};
    return call_of(is_max ? "aten::max" : "aten::min", args, 3);
  }
  return call_of(is_max ? "aten::max" : "aten::min", &self, 1);
}

static cJSON *squeeze(const mk_node *n) {
  const cJSON *dim = arg_or_kw(n, 1, "dim");
  cJSON *args[] = {aten_arg("T", cJSON_GetArrayItem(n->args, 0)), NULL};
  if (dim == NULL || cJSON_IsNull(dim)) return call_of("aten::squeeze", args, 1);
  args[1] = cJSON_IsNumber(dim) ? aten_arg("I", dim) : aten_arg("L", dim);
  return call_of("aten::squeeze", args, 2);
}

static cJSON *split(const mk_node *n) {
  const cJSON *size = cJSON_GetArrayItem(n->args, 1);
  if (size == NULL) size = cJSON_GetObjectItemCaseSensitive(n->kwargs, "split_size_or_sections");
  if (size == NULL) size = cJSON_GetObjectItemCaseSensitive(n->kwargs, "split_size");
  const cJSON *dim = arg_or_kw(n, 2, "dim");
  bool sections = size && !cJSON_IsNumber(size);
  cJSON *args[] = {aten_arg("T", cJSON_GetArrayItem(n->args, 0)), aten_arg(sections ? "L" : "I", size),
                   dim ? aten_arg("I", dim) : cJSON_CreateNumber(0)};
  return call_of(sections ? "aten::split_with_sizes" : "aten::split", args, 3);
}

int export_aten_special(const mk_node *n, cJSON **call, mk_errmsg *err, int *rc) {
  bool torch = strncmp(n->op, "torch.", 6) == 0 && strncmp(n->op, "torch.nn.", 9) != 0;
  if (!torch) return 0;
  const char *last = export_last_component(n->op);
  if (strcmp(last, "__getitem__") == 0) *call = getitem(n);
  else if (strcmp(last, "max") == 0 || strcmp(last, "min") == 0) *call = max_min(n, last[1] == 'a');
  else if (strcmp(last, "squeeze") == 0) *call = squeeze(n);
  else if (strcmp(last, "split") == 0) *call = split(n);
  else return 0;
  *rc = *call ? 0 : mk_errf(err, MK_EUNSUPPORTED, "%s (line %d): arguments with no ATen form", n->op, n->span.line);
  return 1;
}

/* ---- nodes -------------------------------------------------------------------- */

static int bind_node(const mk_node *n, cJSON *form, mk_errmsg *err) {
  bool inplace = false;
  const export_op *op = export_op_find(n->op, &inplace);
  inplace = inplace || export_has_inplace_arg(n);
  if (n->nmutates > 0 && inplace) { /* as export_emit_node: out of place, copied into the tensor */
    cJSON_AddNumberToObject(form, "copy_into", n->mutates[0]);
    return 0;
  }
  if (n->nmutates > 0 && !(op && (op->flags & EXPORT_OP_SELF_MUTATES)))
    return mk_errf(err, MK_EUNSUPPORTED, "%s (line %d) modifies a tensor in place in a way the ATen form "
                                         "does not reproduce", n->op, n->span.line);
  cJSON_AddItemToObject(form, "out", n->out ? cJSON_Duplicate(n->out, 1) : cJSON_CreateNull());
  cJSON *alias = cJSON_AddArrayToObject(form, "alias");
  for (int k = 0, m = 0; k < n->noutputs && m < n->nmutates; k++) {
    if (export_returned(n->out, n->outputs[k])) continue;
    cJSON *pair = cJSON_CreateArray();
    cJSON_AddItemToArray(pair, cJSON_CreateNumber(n->outputs[k]));
    cJSON_AddItemToArray(pair, cJSON_CreateNumber(n->mutates[m++]));
    cJSON_AddItemToArray(alias, pair);
  }
  return 0;
}

int mk_export_node_aten(const mk_graph *g, const mk_node *n, cJSON **out, mk_errmsg *err) {
  (void)g;
  *out = NULL;
  if (n->op == NULL) return mk_errf(err, MK_EINVAL, "node without an op");
  int rc = export_check_random(n, err);
  cJSON *call = NULL;
  if (!rc && !export_aten_special(n, &call, err, &rc)) rc = table_call(n, &call, err);
  if (rc) return rc;
  cJSON *form = cJSON_CreateObject();
  cJSON_AddNumberToObject(form, "node", n->id);
  cJSON_AddStringToObject(form, "op", n->op);
  cJSON_AddNumberToObject(form, "line", n->span.line);
  cJSON_AddItemToObject(form, "call", call);
  cJSON *outputs = cJSON_AddArrayToObject(form, "outputs");
  for (int k = 0; k < n->noutputs; k++) cJSON_AddItemToArray(outputs, cJSON_CreateNumber(n->outputs[k]));
  rc = bind_node(n, form, err);
  if (rc) cJSON_Delete(form);
  else *out = form;
  return rc;
}

int mk_export_graph_aten(const mk_graph *g, cJSON **out, mk_errmsg *err) {
  *out = NULL;
  cJSON *all = cJSON_CreateArray();
  if (all == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  for (int i = 0; i < g->nnodes; i++) {
    cJSON *form = NULL;
    int rc = mk_export_node_aten(g, &g->nodes[i], &form, err);
    if (rc) {
      cJSON_Delete(all);
      return rc;
    }
    cJSON_AddItemToArray(all, form);
  }
  *out = all;
  return 0;
}
