/* export_cpp.c — a captured graph's forward as C++ over ATen.
 *
 * One statement per recorded torch call, in the recorded order (the order
 * the user's forward ran them, which every composition keeps), values
 * named v<id> as the capture numbers them. The layout plan (mk_layout.h)
 * is applied after each value is made, as the composed ModelNew does, so
 * the exported program runs every op on the layout it was verified on.
 *
 * In-place calls (x.add_(y), F.relu(x, inplace=True), x += y) become the
 * out-of-place ATen op copied into the modified tensor: the capture gives
 * the new version its own id (docs/protocol.md), bound here to the same
 * tensor, so views and later readers see the update as in Python. Ops that
 * update tensors themselves (batch norm's running statistics in training)
 * are called as they are. */
#include "mk_export.h"

#include "export_internal.h"
#include "mk_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Table rows are ours: a malformed row is a bug, reported as MK_EINVAL. */
static int parse_params(const char *spec, export_param *ps, int *n) {
  *n = 0;
  for (const char *p = spec; *p;) {
    while (*p == ' ') p++;
    if (!*p) break;
    const char *end = strchr(p, ' ');
    if (end == NULL) end = p + strlen(p);
    /* a default may hold spaces only inside braces / quotes: our rows have none */
    const char *colon = memchr(p, ':', (size_t)(end - p));
    if (colon == NULL || *n >= EXPORT_MAX_PARAMS || colon - p >= 48) return MK_EINVAL;
    export_param *q = &ps[(*n)++];
    snprintf(q->name, sizeof q->name, "%.*s", (int)(colon - p), p);
    const char *eq = memchr(colon, '=', (size_t)(end - colon));
    const char *kend = eq ? eq : end;
    if (kend - colon - 1 >= (long)sizeof q->kind) return MK_EINVAL;
    snprintf(q->kind, sizeof q->kind, "%.*s", (int)(kend - colon - 1), colon + 1);
    q->dflt = eq ? eq + 1 : NULL;
    q->dflt_len = eq ? (size_t)(end - eq - 1) : 0;
    p = end;
  }
  return 0;
}

void export_call_free(export_call *c) {
  for (int i = 0; i < EXPORT_MAX_PARAMS; i++) cJSON_Delete(c->owned[i]);
  memset(c->owned, 0, sizeof c->owned);
}

/* Python's matching of positional and keyword arguments to the signature. */
static int bind_args(const mk_node *n, export_call *c, mk_errmsg *err) {
  const export_param *ps = c->ps;
  int np = c->np, i = 0;
  for (const cJSON *a = n->args ? n->args->child : NULL; a; a = a->next, i++) {
    if (i >= np) return mk_errf(err, MK_EUNSUPPORTED, "%s: more positional arguments than its signature has", n->op);
    if (strcmp(ps[i].kind, "L*") == 0) {
      if (a->next == NULL) {
        c->arg[i] = a; /* x.view((2, -1)) or x.view(2) */
        break;
      }
      cJSON *list = cJSON_CreateArray();
      for (const cJSON *r = a; r && list; r = r->next) cJSON_AddItemToArray(list, cJSON_Duplicate(r, 1));
      c->arg[i] = c->owned[i] = list;
      if (list == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
      break;
    }
    c->arg[i] = a;
  }
  for (const cJSON *kw = n->kwargs ? n->kwargs->child : NULL; kw; kw = kw->next) {
    int k = 0;
    while (k < np && strcmp(ps[k].name, kw->string) != 0) k++;
    if (k == np && strcmp(kw->string, "self") == 0) k = 0;
    if (k == np) return mk_errf(err, MK_EUNSUPPORTED, "%s: keyword argument '%.40s' is not exported", n->op, kw->string);
    c->arg[k] = kw;
  }
  return 0;
}

static bool falsy(const cJSON *a) { return a == NULL || cJSON_IsNull(a) || cJSON_IsFalse(a); }

int export_call_bind(const mk_node *n, const export_op *op, export_call *c, mk_errmsg *err) {
  memset(c, 0, sizeof *c);
  c->op = op;
  if (parse_params(op->params, c->ps, &c->np)) return mk_errf(err, MK_EINVAL, "op table row %s is malformed", op->name);
  int rc = bind_args(n, c, err);
  for (int k = 0; !rc && k < c->np; k++) {
    const export_param *q = &c->ps[k];
    if (c->arg[k] == NULL && q->dflt) {
      char tmp[128];
      snprintf(tmp, sizeof tmp, "%.*s", (int)q->dflt_len, q->dflt);
      c->arg[k] = c->owned[k] = cJSON_Parse(tmp);
      if (c->arg[k] == NULL) rc = mk_errf(err, MK_EINVAL, "op table row %s: default of %s is not JSON", op->name, q->name);
    }
    if (!rc && strcmp(q->kind, "X0") == 0 && !falsy(c->arg[k]))
      rc = mk_errf(err, MK_EUNSUPPORTED, "%s (line %d): %s=%s is not exported", n->op, n->span.line, q->name,
                   cJSON_IsTrue(c->arg[k]) ? "True" : "...");
  }
  return rc;
}

/* $name in the template -> the argument's C++. */
static int fill_template(const char *tmpl, const export_call *c, mk_buf *const *spelled, mk_buf *out) {
  for (const char *p = tmpl; *p;) {
    if (*p != '$') {
      mk_buf_putc(out, *p++);
      continue;
    }
    const char *s = ++p;
    while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_') p++;
    int k = export_call_param(c, s, (size_t)(p - s));
    if (k < 0 || spelled[k] == NULL) return MK_EINVAL;
    mk_buf_puts(out, mk_buf_cstr(spelled[k]));
  }
  return out->err;
}

int export_call_param(const export_call *c, const char *name, size_t len) {
  for (int k = 0; k < c->np; k++)
    if (strlen(c->ps[k].name) == len && memcmp(c->ps[k].name, name, len) == 0) return k;
  return -1;
}

static int spell_args(const mk_node *n, const export_call *c, mk_buf **spelled, mk_errmsg *err) {
  for (int k = 0; k < c->np; k++) {
    if (c->ps[k].kind[0] == 'X') continue;
    spelled[k] = malloc(sizeof **spelled);
    if (spelled[k] == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
    mk_buf_init(spelled[k], 1 << 20);
    int rc = export_put_arg(c->ps[k].kind, c->arg[k], spelled[k]);
    if (rc) {
      char *arg = c->arg[k] ? cJSON_PrintUnformatted(c->arg[k]) : NULL;
      rc = mk_errf(err, MK_EUNSUPPORTED, "%s (line %d): argument %s=%.80s cannot be written as C++ (%s)",
                   n->op, n->span.line, c->ps[k].name, arg ? arg : "(missing)", c->ps[k].kind);
      free(arg);
      return rc;
    }
  }
  return 0;
}

/* x[...]: ints, slices, None, Ellipsis and tensors as at::indexing terms. */
static int put_index_term(const cJSON *a, mk_buf *out) {
  if (cJSON_IsNull(a)) return mk_buf_puts(out, "at::indexing::None");
  if (cJSON_IsBool(a)) return mk_buf_puts(out, cJSON_IsTrue(a) ? "true" : "false");
  if (cJSON_IsObject(a) && a->child && a->child->string) {
    const char *k = a->child->string;
    if (strcmp(k, "ellipsis") == 0) return mk_buf_puts(out, "at::indexing::Ellipsis");
    if (strcmp(k, "t") == 0) return mk_buf_printf(out, "at::indexing::TensorIndex(v%d)", a->child->valueint);
    if (strcmp(k, "slice") == 0 && cJSON_GetArraySize(a->child) == 3) {
      mk_buf_puts(out, "at::indexing::Slice(");
      int i = 0;
      for (const cJSON *p = a->child->child; p; p = p->next, i++) {
        if (i) mk_buf_puts(out, ", ");
        int rc = cJSON_IsNull(p) ? mk_buf_puts(out, "at::indexing::None") : export_put_arg("I", p, out);
        if (rc) return MK_EUNSUPPORTED;
      }
      return mk_buf_putc(out, ')');
    }
  }
  return export_put_arg("I", a, out);
}

static int call_getitem(const mk_node *n, mk_buf *out, mk_errmsg *err) {
  const cJSON *self = cJSON_GetArrayItem(n->args, 0), *idx = cJSON_GetArrayItem(n->args, 1);
  if (cJSON_GetArraySize(n->args) != 2 || export_put_arg("T", self, out))
    return mk_errf(err, MK_EUNSUPPORTED, "%s (line %d): indexing that is not tensor[...]", n->op, n->span.line);
  mk_buf_puts(out, ".index({");
  const cJSON *tuple = cJSON_IsObject(idx) && idx->child && idx->child->string &&
                               strcmp(idx->child->string, "tuple") == 0 ? idx->child : NULL;
  int i = 0, rc = 0;
  for (const cJSON *t = tuple ? tuple->child : idx; t && !rc; t = tuple ? t->next : NULL, i++) {
    if (i) mk_buf_puts(out, ", ");
    rc = put_index_term(t, out);
  }
  if (rc) return mk_errf(err, MK_EUNSUPPORTED, "%s (line %d): an index term cannot be written as C++", n->op, n->span.line);
  return mk_buf_puts(out, "})");
}

/* torch.max / torch.min and their methods: the reduction to one value, the
 * reduction along a dim (values, indices), or the elementwise form. */
static int call_max_min(const mk_node *n, bool is_max, mk_buf *out, mk_errmsg *err) {
  const cJSON *a1 = cJSON_GetArrayItem(n->args, 1);
  const cJSON *dim = a1 ? a1 : cJSON_GetObjectItemCaseSensitive(n->kwargs, "dim");
  const cJSON *other = cJSON_GetObjectItemCaseSensitive(n->kwargs, "other");
  const cJSON *keep = cJSON_GetArrayItem(n->args, 2);
  if (keep == NULL) keep = cJSON_GetObjectItemCaseSensitive(n->kwargs, "keepdim");
  mk_buf self;
  mk_buf_init(&self, 4096);
  int rc = export_put_arg("T", cJSON_GetArrayItem(n->args, 0), &self);
  if (!rc && (other || (a1 && cJSON_IsObject(a1) && cJSON_GetObjectItemCaseSensitive(a1, "t")))) {
    mk_buf_printf(out, "at::%s(%s, ", is_max ? "maximum" : "minimum", mk_buf_cstr(&self));
    rc = export_put_arg("T", other ? other : a1, out);
    mk_buf_putc(out, ')');
  } else if (!rc && dim) {
    mk_buf_printf(out, "at::%s(%s, ", is_max ? "max" : "min", mk_buf_cstr(&self));
    rc = export_put_arg("I", dim, out);
    mk_buf_puts(out, ", ");
    if (!rc) rc = keep ? export_put_arg("B", keep, out) : mk_buf_puts(out, "false");
    mk_buf_putc(out, ')');
  } else if (!rc) {
    mk_buf_printf(out, "at::%s(%s)", is_max ? "max" : "min", mk_buf_cstr(&self));
  }
  mk_buf_free(&self);
  return rc ? mk_errf(err, MK_EUNSUPPORTED, "%s (line %d): arguments not exported", n->op, n->span.line) : out->err;
}

/* x.squeeze(), x.squeeze(1), x.squeeze((1, 2)) */
static int call_squeeze(const mk_node *n, mk_buf *out, mk_errmsg *err) {
  const cJSON *dim = cJSON_GetArrayItem(n->args, 1);
  if (dim == NULL) dim = cJSON_GetObjectItemCaseSensitive(n->kwargs, "dim");
  mk_buf_puts(out, "at::squeeze(");
  int rc = export_put_arg("T", cJSON_GetArrayItem(n->args, 0), out);
  if (!rc && dim && !cJSON_IsNull(dim)) {
    mk_buf_puts(out, ", ");
    rc = cJSON_IsNumber(dim) ? export_put_arg("I", dim, out) : export_put_arg("L", dim, out);
  }
  mk_buf_putc(out, ')');
  return rc ? mk_errf(err, MK_EUNSUPPORTED, "%s (line %d): arguments not exported", n->op, n->span.line) : out->err;
}

/* x.split(size, dim) / x.split([sizes], dim) */
static int call_split(const mk_node *n, mk_buf *out, mk_errmsg *err) {
  const cJSON *size = cJSON_GetArrayItem(n->args, 1);
  if (size == NULL) size = cJSON_GetObjectItemCaseSensitive(n->kwargs, "split_size_or_sections");
  if (size == NULL) size = cJSON_GetObjectItemCaseSensitive(n->kwargs, "split_size");
  const cJSON *dim = cJSON_GetArrayItem(n->args, 2);
  if (dim == NULL) dim = cJSON_GetObjectItemCaseSensitive(n->kwargs, "dim");
  bool sections = size && !cJSON_IsNumber(size);
  mk_buf_printf(out, "at::%s(", sections ? "split_with_sizes" : "split");
  int rc = export_put_arg("T", cJSON_GetArrayItem(n->args, 0), out);
  mk_buf_puts(out, ", ");
  if (!rc) rc = export_put_arg(sections ? "L" : "I", size, out);
  mk_buf_puts(out, ", ");
  if (!rc) rc = dim ? export_put_arg("I", dim, out) : mk_buf_puts(out, "0");
  mk_buf_putc(out, ')');
  return rc ? mk_errf(err, MK_EUNSUPPORTED, "%s (line %d): arguments not exported", n->op, n->span.line) : out->err;
}

/* The special forms: 1 and the call written, 0 for table ops. */
static int call_special(const mk_node *n, const char *last, mk_buf *out, mk_errmsg *err, int *rc) {
  bool torch = strncmp(n->op, "torch.", 6) == 0 && strncmp(n->op, "torch.nn.", 9) != 0;
  if (!torch) return 0;
  if (strcmp(last, "__getitem__") == 0) *rc = call_getitem(n, out, err);
  else if (strcmp(last, "max") == 0 || strcmp(last, "min") == 0) *rc = call_max_min(n, last[1] == 'a', out, err);
  else if (strcmp(last, "squeeze") == 0) *rc = call_squeeze(n, out, err);
  else if (strcmp(last, "split") == 0) *rc = call_split(n, out, err);
  else return 0;
  return 1;
}

char export_result_kind(const mk_node *n) {
  const char *last = export_last_component(n->op);
  if (strcmp(last, "split") == 0) return 'V';
  if (strcmp(last, "max") == 0 || strcmp(last, "min") == 0) return n->noutputs > 1 ? 'P' : 'T';
  bool inplace;
  const export_op *op = export_op_find(n->op, &inplace);
  return op ? op->result : 'T';
}

const char *export_last_component(const char *op) {
  const char *dot = strrchr(op, '.');
  return dot ? dot + 1 : op;
}

int mk_export_call_cpp(const mk_graph *g, const mk_node *n, mk_buf *out, mk_errmsg *err) {
  (void)g;
  if (n->op == NULL) return mk_errf(err, MK_EINVAL, "node without an op");
  int rc = 0;
  if (call_special(n, export_last_component(n->op), out, err, &rc)) return rc;
  bool inplace;
  const export_op *op = export_op_find(n->op, &inplace);
  if (op == NULL)
    return mk_errf(err, MK_EUNSUPPORTED, "%s (line %d) has no C++ (ATen) form in the exporter's op table",
                   n->op, n->span.line);
  export_call c;
  mk_buf *spelled[EXPORT_MAX_PARAMS] = {0};
  rc = export_call_bind(n, op, &c, err);
  if (!rc) rc = spell_args(n, &c, spelled, err);
  if (!rc && fill_template(op->tmpl, &c, spelled, out))
    rc = mk_errf(err, MK_EINVAL, "op table row %s: template and parameters disagree", op->name);
  for (int k = 0; k < c.np; k++) {
    if (spelled[k]) mk_buf_free(spelled[k]);
    free(spelled[k]);
  }
  export_call_free(&c);
  return rc;
}

/* ---- statements ------------------------------------------------------------ */

bool export_has_inplace_arg(const mk_node *n) {
  const cJSON *kw = cJSON_GetObjectItemCaseSensitive(n->kwargs, "inplace");
  if (cJSON_IsTrue(kw)) return true;
  bool inplace;
  const export_op *op = export_op_find(n->op, &inplace);
  if (op == NULL || strstr(op->params, "inplace:") == NULL) return false;
  /* the positional slot of `inplace` */
  export_param ps[EXPORT_MAX_PARAMS];
  int np = 0;
  if (parse_params(op->params, ps, &np)) return false;
  for (int k = 0; k < np; k++)
    if (strcmp(ps[k].name, "inplace") == 0) return cJSON_IsTrue(cJSON_GetArrayItem(n->args, k));
  return false;
}

bool export_returned(const cJSON *s, int vid) {
  if (s == NULL) return false;
  if (cJSON_IsObject(s) && s->child && s->child->string && strcmp(s->child->string, "t") == 0)
    return s->child->valueint == vid;
  for (const cJSON *it = s->child; it; it = it->next)
    if (export_returned(it, vid)) return true;
  return false;
}

/* Binds the node's result (`expr`) to v<id> names as its return structure says. */
static int bind_result(const mk_node *n, char kind, const char *expr, mk_buf *out, mk_errmsg *err) {
  const cJSON *s = n->out;
  if (cJSON_IsObject(s) && s->child && s->child->string && strcmp(s->child->string, "t") == 0) {
    if (kind != 'T') return mk_errf(err, MK_EUNSUPPORTED, "%s (line %d): one tensor recorded, several returned", n->op, n->span.line);
    return mk_buf_printf(out, "  at::Tensor v%d = %s;\n", s->child->valueint, expr);
  }
  const cJSON *items = cJSON_IsObject(s) && s->child && s->child->string &&
                               (strcmp(s->child->string, "tuple") == 0 || strcmp(s->child->string, "list") == 0)
                           ? s->child : NULL;
  if (items == NULL) return mk_buf_printf(out, "  (void)%s;\n", expr);
  if (kind == 'T') return mk_errf(err, MK_EUNSUPPORTED, "%s (line %d): several results recorded, one returned", n->op, n->span.line);
  mk_buf_printf(out, "  auto r%d = %s;\n", n->id, expr);
  int i = 0;
  for (const cJSON *it = items->child; it; it = it->next, i++) {
    if (!(cJSON_IsObject(it) && it->child && it->child->string && strcmp(it->child->string, "t") == 0)) continue;
    if (kind == 'P') mk_buf_printf(out, "  at::Tensor v%d = std::get<%d>(r%d);\n", it->child->valueint, i, n->id);
    else mk_buf_printf(out, "  at::Tensor v%d = r%d.at(%d);\n", it->child->valueint, n->id, i);
  }
  return out->err;
}

int export_check_random(const mk_node *n, mk_errmsg *err) {
  if (!(mk_op_flags(n->op) & MK_OPF_RANDOM)) return 0;
  if (strcmp(export_last_component(n->op), "dropout") == 0) {
    const cJSON *p = cJSON_GetArrayItem(n->args, 1);
    if (p == NULL) p = cJSON_GetObjectItemCaseSensitive(n->kwargs, "p");
    const cJSON *training = cJSON_GetArrayItem(n->args, 2);
    if (training == NULL) training = cJSON_GetObjectItemCaseSensitive(n->kwargs, "training");
    /* p = 0.0 is recorded as {"float": 0.0} (docs/protocol.md) */
    const cJSON *pv = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "float") : p;
    if ((cJSON_IsNumber(pv) && pv->valuedouble == 0) || cJSON_IsFalse(training)) return 0;
  }
  return mk_errf(err, MK_EUNSUPPORTED, "%s (line %d) draws random numbers: its result cannot be compared, "
                                       "so it is not exported", n->op, n->span.line);
}

int export_emit_node(const mk_graph *g, const mk_node *n, mk_buf *out, mk_errmsg *err) {
  int rc = export_check_random(n, err);
  if (rc) return rc;
  mk_buf expr;
  mk_buf_init(&expr, 1 << 22);
  rc = mk_export_call_cpp(g, n, &expr, err);
  bool inplace = false;
  const export_op *op = n->op ? export_op_find(n->op, &inplace) : NULL;
  inplace = inplace || export_has_inplace_arg(n);
  mk_buf_printf(out, "  // %s (line %d)\n", n->op, n->span.line);
  if (rc) {
    /* reported by the call */
  } else if (n->nmutates > 0 && inplace) {
    int m = n->mutates[0];
    mk_buf_printf(out, "  v%d.copy_(%s);\n", m, mk_buf_cstr(&expr));
    for (int k = 0; k < n->noutputs; k++) mk_buf_printf(out, "  at::Tensor v%d = v%d;\n", n->outputs[k], m);
  } else if (n->nmutates > 0 && !(op && (op->flags & EXPORT_OP_SELF_MUTATES))) {
    rc = mk_errf(err, MK_EUNSUPPORTED, "%s (line %d) modifies a tensor in place in a way the exporter "
                                       "does not reproduce", n->op, n->span.line);
  } else {
    rc = bind_result(n, export_result_kind(n), mk_buf_cstr(&expr), out, err);
    /* the new versions of what ATen updated itself (running statistics) */
    for (int k = 0, m = 0; !rc && k < n->noutputs && m < n->nmutates; k++)
      if (!export_returned(n->out, n->outputs[k]))
        mk_buf_printf(out, "  at::Tensor v%d = v%d;\n", n->outputs[k], n->mutates[m++]);
  }
  mk_buf_free(&expr);
  return rc;
}

static void emit_conversion(const mk_graph *g, int vid, int conv, mk_buf *out) {
  if (conv == MK_LAYOUT_TO_CL)
    mk_buf_printf(out, "  v%d = v%d.contiguous(at::MemoryFormat::%s);\n", vid, vid,
                  g->values[vid].rank == 5 ? "ChannelsLast3d" : "ChannelsLast");
  else if (conv == MK_LAYOUT_TO_CONTIG)
    mk_buf_printf(out, "  v%d = v%d.contiguous();\n", vid, vid);
}

static bool safe_state_name(const char *s) {
  if (s == NULL || *s == '\0' || strlen(s) > 512) return false;
  for (; *s; s++)
    if (!(*s == '_' || *s == '.' || (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
      return false;
  return true;
}

/* at::Tensor v<id> for every input and state tensor the forward reads. */
static int emit_leaves(const mk_graph *g, const unsigned char *conv, mk_buf *out, mk_errmsg *err) {
  for (int v = 0; v < g->nvalues; v++) {
    const mk_value *val = &g->values[v];
    if (val->kind == MK_VALUE_NODE || (val->nusers == 0 && !val->is_graph_output)) continue;
    if (val->kind == MK_VALUE_INPUT) {
      mk_buf_printf(out, "  at::Tensor v%d = inputs.at(%d);\n", v, val->index);
      emit_conversion(g, v, conv[v], out);
    } else if (val->kind == MK_VALUE_CONST || !safe_state_name(val->name)) {
      return mk_errf(err, MK_EUNSUPPORTED, "the forward reads a tensor that is not an input, parameter, buffer "
                                           "or attribute of the module (value %d): it is not exported", v);
    } else {
      mk_buf_printf(out, "  at::Tensor v%d = w.at(\"%s\");\n", v, val->name);
    }
  }
  return out->err;
}

static int emit_return(const cJSON *s, int *count, mk_buf *out) {
  if (s == NULL) return 0;
  if (cJSON_IsObject(s) && s->child && s->child->string && strcmp(s->child->string, "t") == 0)
    return mk_buf_printf(out, "%sv%d", (*count)++ ? ", " : "", s->child->valueint);
  if (cJSON_IsObject(s) && s->child && s->child->string &&
      (strcmp(s->child->string, "tuple") == 0 || strcmp(s->child->string, "list") == 0))
    s = s->child;
  else if (!cJSON_IsArray(s))
    return 0;
  for (const cJSON *it = s->child; it; it = it->next) emit_return(it, count, out);
  return out->err;
}

/* True if a node between c's first and last and outside c reads a value c
 * updates in place: run earlier, c would change what that node reads. */
static bool sk_has_node(const mk_subkernel *sk, int node) {
  for (int q = 0; q < sk->nnodes; q++)
    if (sk->nodes[q] == node) return true;
  return false;
}

static bool sk_mutates(const mk_graph *g, const mk_subkernel *sk, int vid) {
  for (int k = 0; k < sk->nnodes; k++) {
    const mk_node *w = &g->nodes[sk->nodes[k]];
    for (int m = 0; m < w->nmutates; m++)
      if (w->mutates[m] == vid) return true;
  }
  return false;
}

static bool cuda_moves_a_write(const mk_graph *g, const mk_export_cuda_sk *c) {
  const mk_subkernel *sk = &c->sk;
  for (int j = sk->nodes[0] + 1; j < sk->nodes[sk->nnodes - 1]; j++) {
    if (sk_has_node(sk, j)) continue;
    for (int i = 0; i < g->nodes[j].ninputs; i++)
      if (sk_mutates(g, sk, g->nodes[j].inputs[i])) return true;
  }
  return false;
}

/* A CUDA subkernel's launcher, at the place of its first node. */
static int emit_cuda_sk(const mk_graph *g, const mk_export_cuda_sk *c, const unsigned char *conv,
                        unsigned char *done, mk_buf *out, mk_errmsg *err) {
  for (int i = 0; i < c->sk.ninputs; i++) {
    const mk_value *v = &g->values[c->sk.inputs[i]];
    if (v->kind == MK_VALUE_NODE && v->producer >= 0 && !done[v->producer])
      return mk_errf(err, MK_EUNSUPPORTED, "subkernel sk%d reads v%d, which a later call makes: its nodes "
                                           "interleave with others' in an order the export does not rearrange",
                     c->index, c->sk.inputs[i]);
  }
  if (cuda_moves_a_write(g, c))
    return mk_errf(err, MK_EUNSUPPORTED, "subkernel sk%d updates a tensor in place that a call between its "
                                         "nodes reads: the export does not rearrange them", c->index);
  if (c->backend == MK_EXPORT_TRITON)
    mk_buf_printf(out, "  // ---- sk%d %s: Triton kernels (cubins of the _triton.cpp file), replayed as recorded ----\n",
                  c->index, c->sk.name ? c->sk.name : "?");
  else
    mk_buf_printf(out, "  // ---- sk%d %s: CUDA C++ kernels (namespace sk%d of the .cu file) ----\n", c->index,
                  c->sk.name ? c->sk.name : "?", c->section);
  mk_buf_append(out, c->code.launcher.data, c->code.launcher.len);
  for (int k = 0; k < c->sk.nnodes; k++) done[c->sk.nodes[k]] = 1;
  for (int i = 0; i < c->sk.noutputs; i++) emit_conversion(g, c->sk.outputs[i], conv[c->sk.outputs[i]], out);
  return out->err;
}

static int emit_nodes(const mk_graph *g, const mk_export_cuda *cuda, const unsigned char *conv, mk_buf *out,
                      mk_errmsg *err) {
  unsigned char *done = calloc((size_t)g->nnodes + 1, 1);
  int rc = done ? 0 : mk_errf(err, MK_ENOMEM, "out of memory");
  for (int i = 0; !rc && i < g->nnodes; i++) {
    if (done[i]) continue;
    const mk_export_cuda_sk *c = mk_export_cuda_find_node(cuda, i);
    if (c) {
      rc = emit_cuda_sk(g, c, conv, done, out, err);
      continue;
    }
    const mk_node *n = &g->nodes[i];
    rc = export_emit_node(g, n, out, err);
    for (int k = 0; !rc && k < n->noutputs; k++) emit_conversion(g, n->outputs[k], conv[n->outputs[k]], out);
    done[i] = 1;
  }
  free(done);
  return rc;
}

int mk_export_forward_cpp_cuda(const mk_graph *g, const mk_export_cuda *cuda, mk_buf *out, mk_errmsg *err) {
  /* The C++ forward takes tensors; a Python scalar argument was captured as a
   * constant and a C++ caller could not pass another value (ModelNew guards
   * on it, docs/capture.md). */
  if (g->nscalar_inputs > 0)
    return mk_errf(err, MK_EUNSUPPORTED,
                   "forward argument %d is not a tensor: the C++ forward takes tensors only, and this "
                   "composition is specialised to the argument's captured value",
                   g->scalar_inputs[0].index);
  unsigned char *layout = malloc((size_t)g->nvalues + 1), *conv = malloc((size_t)g->nvalues + 1);
  int rc = layout && conv ? 0 : mk_errf(err, MK_ENOMEM, "out of memory");
  if (!rc && mk_layout_plan(g, layout, conv) < 0) rc = mk_errf(err, MK_ENOMEM, "layout plan: out of memory");
  if (!rc) rc = emit_leaves(g, conv, out, err);
  if (!rc) rc = emit_nodes(g, cuda, conv, out, err);
  if (!rc) {
    int count = 0;
    mk_buf_puts(out, "  return {");
    emit_return(g->outputs, &count, out);
    mk_buf_puts(out, "};\n");
    if (count == 0) rc = mk_errf(err, MK_EUNSUPPORTED, "the forward returns no tensor");
  }
  if (!rc && out->err) rc = mk_errf(err, out->err, "the C++ forward is too large");
  free(layout);
  free(conv);
  return rc;
}

int mk_export_forward_cpp(const mk_graph *g, mk_buf *out, mk_errmsg *err) {
  return mk_export_forward_cpp_cuda(g, NULL, out, err);
}
