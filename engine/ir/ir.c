/* ir.c — builds the IR from a capture result and prints it.
 *
 * The capture JSON comes from a worker process we do not trust to be bug
 * free, so everything is validated before the graph is handed out: ids,
 * kinds, shapes, that every node value has exactly one producer that runs
 * before its readers, that every {"t": id} in the arguments is a declared
 * input. Errors name the value or node (op and source line) they concern.
 * Unknown fields are ignored so that a newer worker stays readable; a
 * missing args/kwargs/out is normalised in the kept JSON tree. */
#include "ir_internal.h"

#include "mk_buf.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sizes beyond this are refused rather than risking int overflow. */
#define MK_IR_MAX_DIM ((int64_t)1 << 53)

/* ---- dtypes and values ---------------------------------------------------- */

static const struct {
  const char *name, *short_name;
  mk_dtype dtype;
  int size;
} mk_dtypes[] = {
    {"float32", "f32", MK_DTYPE_F32, 4}, {"float16", "f16", MK_DTYPE_F16, 2},
    {"bfloat16", "bf16", MK_DTYPE_BF16, 2}, {"float64", "f64", MK_DTYPE_F64, 8},
    {"int64", "i64", MK_DTYPE_I64, 8},   {"int32", "i32", MK_DTYPE_I32, 4},
    {"int16", "i16", MK_DTYPE_I16, 2},   {"int8", "i8", MK_DTYPE_I8, 1},
    {"uint8", "u8", MK_DTYPE_U8, 1},     {"bool", "bool", MK_DTYPE_BOOL, 1},
};
#define MK_NDTYPES (sizeof mk_dtypes / sizeof mk_dtypes[0])

mk_dtype mk_dtype_from_name(const char *name) {
  if (name == NULL) return MK_DTYPE_UNKNOWN;
  if (strncmp(name, "torch.", 6) == 0) name += 6;
  for (size_t i = 0; i < MK_NDTYPES; i++)
    if (strcmp(mk_dtypes[i].name, name) == 0) return mk_dtypes[i].dtype;
  /* torch's aliases */
  if (strcmp(name, "float") == 0) return MK_DTYPE_F32;
  if (strcmp(name, "half") == 0) return MK_DTYPE_F16;
  if (strcmp(name, "double") == 0) return MK_DTYPE_F64;
  if (strcmp(name, "long") == 0) return MK_DTYPE_I64;
  if (strcmp(name, "int") == 0) return MK_DTYPE_I32;
  return MK_DTYPE_UNKNOWN;
}

const char *mk_dtype_name(mk_dtype d) {
  for (size_t i = 0; i < MK_NDTYPES; i++)
    if (mk_dtypes[i].dtype == d) return mk_dtypes[i].name;
  return "unknown";
}

const char *mk_dtype_short_name(mk_dtype d) {
  for (size_t i = 0; i < MK_NDTYPES; i++)
    if (mk_dtypes[i].dtype == d) return mk_dtypes[i].short_name;
  return "?";
}

int mk_dtype_size(mk_dtype d) {
  for (size_t i = 0; i < MK_NDTYPES; i++)
    if (mk_dtypes[i].dtype == d) return mk_dtypes[i].size;
  return 0;
}

int64_t mk_value_numel(const mk_value *v) {
  int64_t n = 1;
  for (int i = 0; i < v->rank; i++) {
    /* dims are validated < 2^53; saturate instead of overflowing */
    if (v->shape[i] != 0 && n > INT64_MAX / v->shape[i]) return INT64_MAX;
    n *= v->shape[i];
  }
  return n;
}

/* Shape as "[a<sep>b]" with a bounded buffer. */
static const char *shape_fmt(const mk_value *v, const char *sep, char *buf, size_t bufsize) {
  mk_buf b;
  mk_buf_init(&b, bufsize > 0 ? bufsize - 1 : 1);
  mk_buf_putc(&b, '[');
  for (int i = 0; i < v->rank; i++)
    mk_buf_printf(&b, "%s%lld", i ? sep : "", (long long)v->shape[i]);
  mk_buf_putc(&b, ']');
  if (bufsize > 0) mk_strlcpy(buf, b.err ? "[...]" : mk_buf_cstr(&b), bufsize);
  mk_buf_free(&b);
  return buf;
}

const char *mk_shape_str(const mk_value *v, char *buf, size_t bufsize) {
  return shape_fmt(v, ", ", buf, bufsize);
}

const char *mk_value_label(const mk_value *v, char *buf, size_t bufsize) {
  if (bufsize == 0) return buf;
  if (v->name && v->kind != MK_VALUE_NODE && v->kind != MK_VALUE_INPUT)
    mk_strlcpy(buf, v->name, bufsize);
  else
    snprintf(buf, bufsize, "%%%d", v->id);
  return buf;
}

/* ---- argument trees -------------------------------------------------------- */

/* An integral JSON number that fits an int, else `fallback`. */
static int json_int_or(const cJSON *x, int fallback) {
  if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < INT_MIN ||
      x->valuedouble > INT_MAX)
    return fallback;
  return (int)x->valuedouble;
}

/* Container encodings whose payload is an array of encoded values. */
static const char *const mk_arg_containers[] = {"tuple", "list", "size", "slice"};

int mk_arg_foreach_tensor(const cJSON *arg, int (*fn)(void *ctx, int vid), void *ctx) {
  if (cJSON_IsArray(arg)) { /* a bare array: an args list or a dict pair */
    const cJSON *it;
    cJSON_ArrayForEach(it, arg) {
      int rc = mk_arg_foreach_tensor(it, fn, ctx);
      if (rc) return rc;
    }
    return 0;
  }
  if (!cJSON_IsObject(arg)) return 0;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(arg, "t");
  if (t) return fn(ctx, json_int_or(t, -1));
  for (size_t i = 0; i < sizeof mk_arg_containers / sizeof mk_arg_containers[0]; i++) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(arg, mk_arg_containers[i]);
    if (cJSON_IsArray(c)) return mk_arg_foreach_tensor(c, fn, ctx);
  }
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(arg, "dict");
  return cJSON_IsArray(d) ? mk_arg_foreach_tensor(d, fn, ctx) : 0;
}

/* The same over every member of a kwargs object. */
static int kwargs_foreach_tensor(const cJSON *kw, int (*fn)(void *ctx, int vid), void *ctx) {
  const cJSON *it;
  cJSON_ArrayForEach(it, kw) {
    int rc = mk_arg_foreach_tensor(it, fn, ctx);
    if (rc) return rc;
  }
  return 0;
}

/* Known leaf encodings (docs/protocol.md): anything else is not replayable. */
static const char *const mk_arg_leaves[] = {"float",  "ellipsis",      "dtype", "pytype",
                                            "device", "memory_format", "layout"};

/* Checks the form of an encoded argument; sets *opaque when the node cannot
 * be replayed (an "opaque" value, or an encoding this engine does not know:
 * a newer worker's graph stays usable). False for malformed encodings. */
static bool arg_shape_ok(const cJSON *a, bool *opaque) {
  if (cJSON_IsNull(a) || cJSON_IsBool(a) || cJSON_IsNumber(a) || cJSON_IsString(a)) return true;
  if (cJSON_IsArray(a)) return false; /* bare arrays are not an encoding */
  if (!cJSON_IsObject(a)) return false;
  if (cJSON_GetObjectItemCaseSensitive(a, "t")) return true;
  if (cJSON_GetObjectItemCaseSensitive(a, "opaque")) {
    *opaque = true;
    return true;
  }
  for (size_t i = 0; i < sizeof mk_arg_containers / sizeof mk_arg_containers[0]; i++) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(a, mk_arg_containers[i]);
    if (!c) continue;
    if (!cJSON_IsArray(c)) return false;
    const cJSON *it;
    cJSON_ArrayForEach(it, c) if (!arg_shape_ok(it, opaque)) return false;
    return true;
  }
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(a, "dict");
  if (d) {
    if (!cJSON_IsArray(d)) return false;
    const cJSON *pair;
    cJSON_ArrayForEach(pair, d) {
      if (!cJSON_IsArray(pair) || cJSON_GetArraySize(pair) != 2) return false;
      if (!arg_shape_ok(pair->child, opaque) || !arg_shape_ok(pair->child->next, opaque))
        return false;
    }
    return true;
  }
  for (size_t i = 0; i < sizeof mk_arg_leaves / sizeof mk_arg_leaves[0]; i++)
    if (cJSON_GetObjectItemCaseSensitive(a, mk_arg_leaves[i])) return true;
  *opaque = true; /* a newer encoding: keep the graph, run the node through PyTorch */
  return true;
}

/* ---- parsing helpers ------------------------------------------------------- */

typedef struct parse_ctx {
  mk_graph *g;
  mk_errmsg *err;
  char where[256]; /* "node 4 (torch.relu, line 14)" or "value 7" */
} parse_ctx;

static void where_value(parse_ctx *c, int i) { snprintf(c->where, sizeof c->where, "value %d", i); }

static void where_node(parse_ctx *c, const mk_node *n, int i) {
  if (n && n->op && n->span.line > 0)
    snprintf(c->where, sizeof c->where, "node %d (%.120s, line %d)", i, n->op, n->span.line);
  else if (n && n->op)
    snprintf(c->where, sizeof c->where, "node %d (%.120s)", i, n->op);
  else
    snprintf(c->where, sizeof c->where, "node %d", i);
}

static bool json_is_int(const cJSON *x, double lo, double hi) {
  return cJSON_IsNumber(x) && x->valuedouble == floor(x->valuedouble) && x->valuedouble >= lo &&
         x->valuedouble <= hi;
}

/* Reads an integer member; `required` false accepts absence/null (keeps *out). */
static int get_int(parse_ctx *c, const cJSON *o, const char *key, bool required, int lo, int hi,
                   int *out) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  if (x == NULL || cJSON_IsNull(x)) {
    if (!required) return 0;
    return mk_errf(c->err, MK_EINVAL, "capture graph: %s has no \"%s\"", c->where, key);
  }
  if (!json_is_int(x, lo, hi))
    return mk_errf(c->err, MK_EINVAL, "capture graph: %s: \"%s\" must be an integer in [%d, %d]",
                   c->where, key, lo, hi);
  *out = (int)x->valuedouble;
  return 0;
}

/* Reads an optional string member into a new allocation (NULL if absent). */
static int get_str(parse_ctx *c, const cJSON *o, const char *key, bool required, char **out) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  *out = NULL;
  if (x == NULL || cJSON_IsNull(x)) {
    if (!required) return 0;
    return mk_errf(c->err, MK_EINVAL, "capture graph: %s has no \"%s\"", c->where, key);
  }
  if (!cJSON_IsString(x) || (required && x->valuestring[0] == '\0'))
    return mk_errf(c->err, MK_EINVAL, "capture graph: %s: \"%s\" must be a%s string", c->where,
                   key, required ? " non-empty" : "");
  *out = mk_strdup(x->valuestring);
  return *out ? 0 : MK_ENOMEM;
}

/* Reads an array of value ids (all in range) into a new int array. */
static int get_ids(parse_ctx *c, const cJSON *o, const char *key, int **out, int *n) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
  *out = NULL;
  *n = 0;
  if (a == NULL || cJSON_IsNull(a)) return 0;
  if (!cJSON_IsArray(a))
    return mk_errf(c->err, MK_EINVAL, "capture graph: %s: \"%s\" must be an array of value ids",
                   c->where, key);
  int len = cJSON_GetArraySize(a);
  if (len == 0) return 0;
  *out = calloc((size_t)len, sizeof **out);
  if (*out == NULL) return MK_ENOMEM;
  const cJSON *it;
  cJSON_ArrayForEach(it, a) {
    if (!json_is_int(it, 0, (double)c->g->nvalues - 1))
      return mk_errf(c->err, MK_EINVAL,
                     "capture graph: %s: \"%s\" names value %g, which does not exist (%d values)",
                     c->where, key, cJSON_IsNumber(it) ? it->valuedouble : -1.0, c->g->nvalues);
    (*out)[(*n)++] = (int)it->valuedouble;
  }
  return 0;
}

static int parse_span(parse_ctx *c, const cJSON *o, mk_span *s) {
  memset(s, 0, sizeof *s);
  if (o == NULL || cJSON_IsNull(o)) return 0;
  if (!cJSON_IsObject(o))
    return mk_errf(c->err, MK_EINVAL, "capture graph: %s: \"span\" must be an object", c->where);
  int rc = get_int(c, o, "line", true, 1, INT_MAX, &s->line);
  if (!rc) rc = get_int(c, o, "col", false, 0, INT_MAX, &s->col);
  s->end_line = s->line;
  s->end_col = s->col;
  if (!rc) rc = get_int(c, o, "end_line", false, 1, INT_MAX, &s->end_line);
  if (!rc) rc = get_int(c, o, "end_col", false, 0, INT_MAX, &s->end_col);
  if (rc) return rc;
  if (s->end_line < s->line || (s->end_line == s->line && s->end_col < s->col))
    return mk_errf(c->err, MK_EINVAL, "capture graph: %s: span ends before it starts", c->where);
  return 0;
}

/* ---- values ---------------------------------------------------------------- */

static const char *const mk_value_kind_names[] = {
    [MK_VALUE_INPUT] = "input", [MK_VALUE_PARAM] = "param", [MK_VALUE_BUFFER] = "buffer",
    [MK_VALUE_ATTR] = "attr",   [MK_VALUE_NODE] = "node",   [MK_VALUE_CONST] = "const",
};

static int parse_kind(parse_ctx *c, const cJSON *jv, mk_value_kind *kind) {
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(jv, "kind");
  if (!cJSON_IsString(k)) return mk_errf(c->err, MK_EINVAL, "capture graph: %s has no \"kind\"", c->where);
  for (size_t i = 0; i < sizeof mk_value_kind_names / sizeof mk_value_kind_names[0]; i++) {
    if (strcmp(k->valuestring, mk_value_kind_names[i]) == 0) {
      *kind = (mk_value_kind)i;
      return 0;
    }
  }
  return mk_errf(c->err, MK_EINVAL, "capture graph: %s: unknown kind \"%.40s\"", c->where,
                 k->valuestring);
}

static int parse_shape(parse_ctx *c, const cJSON *jv, mk_value *v) {
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(jv, "shape");
  if (!cJSON_IsArray(s)) return mk_errf(c->err, MK_EINVAL, "capture graph: %s has no \"shape\" array", c->where);
  int rank = cJSON_GetArraySize(s);
  if (rank > MK_IR_MAX_RANK)
    return mk_errf(c->err, MK_EUNSUPPORTED, "capture graph: %s has rank %d; the engine supports up to %d",
                   c->where, rank, MK_IR_MAX_RANK);
  const cJSON *d;
  cJSON_ArrayForEach(d, s) {
    if (!json_is_int(d, 0, (double)MK_IR_MAX_DIM))
      return mk_errf(c->err, MK_EINVAL, "capture graph: %s: shape entries must be integers >= 0",
                     c->where);
    v->shape[v->rank++] = (int64_t)d->valuedouble;
  }
  return 0;
}

static int parse_value(parse_ctx *c, int i, const cJSON *jv) {
  mk_value *v = &c->g->values[i];
  v->id = i;
  v->index = v->producer = -1;
  where_value(c, i);
  if (!cJSON_IsObject(jv)) return mk_errf(c->err, MK_EINVAL, "capture graph: %s is not an object", c->where);
  int id = -1;
  int rc = get_int(c, jv, "id", true, 0, INT_MAX, &id);
  if (rc) return rc;
  if (id != i) return mk_errf(c->err, MK_EINVAL, "capture graph: values[%d] has id %d (ids must equal positions)", i, id);
  if ((rc = parse_kind(c, jv, &v->kind)) || (rc = parse_shape(c, jv, v))) return rc;
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(jv, "dtype");
  if (dt && !cJSON_IsNull(dt) && !cJSON_IsString(dt))
    return mk_errf(c->err, MK_EINVAL, "capture graph: %s: \"dtype\" must be a string", c->where);
  v->dtype = mk_dtype_from_name(cJSON_IsString(dt) ? dt->valuestring : NULL);
  bool named = v->kind == MK_VALUE_PARAM || v->kind == MK_VALUE_BUFFER || v->kind == MK_VALUE_ATTR;
  if (v->kind != MK_VALUE_INPUT && v->kind != MK_VALUE_NODE && (rc = get_str(c, jv, "name", named, &v->name)))
    return rc;
  if (v->kind == MK_VALUE_INPUT) return get_int(c, jv, "index", true, 0, INT_MAX, &v->index);
  if (v->kind == MK_VALUE_NODE)
    return get_int(c, jv, "producer", true, 0, c->g->nnodes > 0 ? c->g->nnodes - 1 : -1, &v->producer);
  return 0;
}

/* ---- nodes ----------------------------------------------------------------- */

/* Makes sure `key` exists in the node object with the given default so the
 * graph can point at it (normalises the kept tree). */
static cJSON *ensure_member(cJSON *jn, const char *key, cJSON *(*make)(void)) {
  cJSON *x = cJSON_GetObjectItemCaseSensitive(jn, key);
  if (x) return x;
  x = make();
  if (x && !cJSON_AddItemToObject(jn, key, x)) {
    cJSON_Delete(x);
    return NULL;
  }
  return x;
}

static int parse_node_call(parse_ctx *c, cJSON *jn, mk_node *n) {
  n->args = ensure_member(jn, "args", cJSON_CreateArray);
  n->kwargs = ensure_member(jn, "kwargs", cJSON_CreateObject);
  n->out = ensure_member(jn, "out", cJSON_CreateNull);
  if (!n->args || !n->kwargs || !n->out) return MK_ENOMEM;
  if (!cJSON_IsArray(n->args)) return mk_errf(c->err, MK_EINVAL, "capture graph: %s: \"args\" must be an array", c->where);
  if (!cJSON_IsObject(n->kwargs)) return mk_errf(c->err, MK_EINVAL, "capture graph: %s: \"kwargs\" must be an object", c->where);
  bool opaque = false;
  const cJSON *it;
  cJSON_ArrayForEach(it, n->args) if (!arg_shape_ok(it, &opaque)) goto bad;
  cJSON_ArrayForEach(it, n->kwargs) if (!arg_shape_ok(it, &opaque)) goto bad;
  n->replayable = !opaque;
  return 0;
bad:
  return mk_errf(c->err, MK_EINVAL, "capture graph: %s: malformed argument encoding", c->where);
}

static int parse_node(parse_ctx *c, int i, cJSON *jn) {
  mk_node *n = &c->g->nodes[i];
  n->id = i;
  where_node(c, NULL, i);
  if (!cJSON_IsObject(jn)) return mk_errf(c->err, MK_EINVAL, "capture graph: %s is not an object", c->where);
  int id = -1, rc = get_int(c, jn, "id", true, 0, INT_MAX, &id);
  if (rc) return rc;
  if (id != i) return mk_errf(c->err, MK_EINVAL, "capture graph: nodes[%d] has id %d (ids must equal positions)", i, id);
  if ((rc = get_str(c, jn, "op", true, &n->op))) return rc;
  if ((rc = parse_span(c, cJSON_GetObjectItemCaseSensitive(jn, "span"), &n->span))) return rc;
  where_node(c, n, i);
  if ((rc = get_str(c, jn, "module", false, &n->module)) ||
      (rc = get_str(c, jn, "module_type", false, &n->module_type)))
    return rc;
  if ((rc = get_ids(c, jn, "inputs", &n->inputs, &n->ninputs)) ||
      (rc = get_ids(c, jn, "outputs", &n->outputs, &n->noutputs)) ||
      (rc = get_ids(c, jn, "mutates", &n->mutates, &n->nmutates)))
    return rc;
  if ((rc = parse_node_call(c, jn, n))) return rc;
  const cJSON *rp = cJSON_GetObjectItemCaseSensitive(jn, "replayable");
  if (cJSON_IsFalse(rp)) n->replayable = false; /* the worker knows better */
  char sbuf[128];
  n->short_name = mk_strdup(mk_op_short_name(n->op, sbuf, sizeof sbuf));
  if (n->short_name == NULL) return MK_ENOMEM;
  n->category = mk_op_category_for_call(n->op, n->args, n->kwargs);
  return 0;
}

/* ---- cross-checks ------------------------------------------------------------ */

bool mk_ir_int_in(const int *a, int n, int x) {
  for (int i = 0; i < n; i++)
    if (a[i] == x) return true;
  return false;
}

typedef struct ref_check {
  parse_ctx *c;
  const char *what;        /* "an argument", "the return structure" */
  const int *a; int na;    /* ids a reference may name ... */
  const int *b; int nb;    /* ... or these */
  const char *listed;      /* "its inputs" */
} ref_check;

static int check_ref(void *ctx, int vid) {
  ref_check *r = ctx;
  parse_ctx *c = r->c;
  if (vid < 0 || vid >= c->g->nvalues)
    return mk_errf(c->err, MK_EINVAL, "capture graph: %s: %s refers to value %d, which does not exist",
                   c->where, r->what, vid);
  if (!mk_ir_int_in(r->a, r->na, vid) && !mk_ir_int_in(r->b, r->nb, vid))
    return mk_errf(c->err, MK_EINVAL, "capture graph: %s: %s refers to value %d, which is not listed in %s",
                   c->where, r->what, vid, r->listed);
  return 0;
}

/* Every input must exist before the node runs; outputs are made by it. */
static int check_node_values(parse_ctx *c, const mk_node *n, int *made_by) {
  mk_graph *g = c->g;
  for (int k = 0; k < n->ninputs; k++) {
    const mk_value *v = &g->values[n->inputs[k]];
    if (v->kind == MK_VALUE_NODE && v->producer >= n->id)
      return mk_errf(c->err, MK_EINVAL, "capture graph: %s reads value %d before node %d produces it",
                     c->where, v->id, v->producer);
  }
  for (int k = 0; k < n->noutputs; k++) {
    const mk_value *v = &g->values[n->outputs[k]];
    if (v->kind != MK_VALUE_NODE || v->producer != n->id)
      return mk_errf(c->err, MK_EINVAL,
                     "capture graph: %s lists value %d as an output, but that value is not produced by it",
                     c->where, v->id);
    if (made_by[v->id] >= 0)
      return mk_errf(c->err, MK_EINVAL, "capture graph: %s lists value %d as an output twice", c->where, v->id);
    made_by[v->id] = n->id;
  }
  for (int k = 0; k < n->nmutates; k++)
    if (!mk_ir_int_in(n->inputs, n->ninputs, n->mutates[k]))
      return mk_errf(c->err, MK_EINVAL, "capture graph: %s mutates value %d, which it does not read",
                     c->where, n->mutates[k]);
  return 0;
}

typedef struct ref_seen {
  const mk_node *n;
  unsigned char *seen; /* per input position */
} ref_seen;

static int mark_seen(void *ctx, int vid) {
  ref_seen *r = ctx;
  for (int k = 0; k < r->n->ninputs; k++)
    if (r->n->inputs[k] == vid) r->seen[k] = 1;
  return 0;
}

/* A replayable node's inputs are exactly the tensors in its arguments
 * (an opaque argument may hide tensors, so only then is this skipped). */
static int check_inputs_referenced(parse_ctx *c, const mk_node *n) {
  if (n->ninputs == 0) return 0;
  ref_seen r = {n, calloc((size_t)n->ninputs, 1)};
  if (r.seen == NULL) return MK_ENOMEM;
  mk_arg_foreach_tensor(n->args, mark_seen, &r);
  kwargs_foreach_tensor(n->kwargs, mark_seen, &r);
  int rc = 0;
  for (int k = 0; k < n->ninputs && !rc; k++)
    if (!r.seen[k])
      rc = mk_errf(c->err, MK_EINVAL, "capture graph: %s lists value %d as an input, but no argument passes it",
                   c->where, n->inputs[k]);
  free(r.seen);
  return rc;
}

/* Arguments may only name inputs; the return structure names outputs or
 * (for ops that return an argument unchanged) inputs. Reading a const makes
 * a node non-replayable: the tensor does not exist outside the capture. */
static int check_node_refs(parse_ctx *c, mk_node *n) {
  ref_check r = {c, "an argument", n->inputs, n->ninputs, NULL, 0, "its inputs"};
  int rc = mk_arg_foreach_tensor(n->args, check_ref, &r);
  if (!rc) rc = kwargs_foreach_tensor(n->kwargs, check_ref, &r);
  if (rc) return rc;
  ref_check o = {c, "the return structure", n->outputs, n->noutputs, n->inputs, n->ninputs,
                 "its outputs or inputs"};
  if ((rc = mk_arg_foreach_tensor(n->out, check_ref, &o))) return rc;
  for (int k = 0; k < n->ninputs; k++)
    if (c->g->values[n->inputs[k]].kind == MK_VALUE_CONST) n->replayable = false;
  return n->replayable ? check_inputs_referenced(c, n) : 0;
}

static int check_nodes(parse_ctx *c) {
  mk_graph *g = c->g;
  int *made_by = malloc((size_t)(g->nvalues > 0 ? g->nvalues : 1) * sizeof *made_by);
  if (made_by == NULL) return MK_ENOMEM;
  for (int i = 0; i < g->nvalues; i++) made_by[i] = -1;
  int rc = 0;
  for (int i = 0; i < g->nnodes && !rc; i++) {
    where_node(c, &g->nodes[i], i);
    rc = check_node_values(c, &g->nodes[i], made_by);
    if (!rc) rc = check_node_refs(c, &g->nodes[i]);
  }
  for (int i = 0; i < g->nvalues && !rc; i++)
    if (g->values[i].kind == MK_VALUE_NODE && made_by[i] < 0)
      rc = mk_errf(c->err, MK_EINVAL, "capture graph: value %d names node %d as producer, but that node does not list it",
                   i, g->values[i].producer);
  free(made_by);
  return rc;
}

/* ---- users, outputs, statements -------------------------------------------- */

/* users[v] = nodes reading v, each node once, in node order. */
static int compute_users(mk_graph *g) {
  for (int i = 0; i < g->nnodes; i++) {
    const mk_node *n = &g->nodes[i];
    for (int k = 0; k < n->ninputs; k++) {
      if (mk_ir_int_in(n->inputs, k, n->inputs[k])) continue; /* listed twice */
      mk_value *v = &g->values[n->inputs[k]];
      int *u = realloc(v->users, (size_t)(v->nusers + 1) * sizeof *u);
      if (u == NULL) return MK_ENOMEM;
      v->users = u;
      v->users[v->nusers++] = i;
    }
  }
  return 0;
}

static int add_output(void *ctx, int vid) {
  parse_ctx *c = ctx;
  mk_graph *g = c->g;
  if (vid < 0 || vid >= g->nvalues)
    return mk_errf(c->err, MK_EINVAL, "capture graph: \"outputs\" refers to value %d, which does not exist", vid);
  if (g->values[vid].is_graph_output) return 0;
  int *o = realloc(g->output_values, (size_t)(g->noutput_values + 1) * sizeof *o);
  if (o == NULL) return MK_ENOMEM;
  g->output_values = o;
  g->output_values[g->noutput_values++] = vid;
  g->values[vid].is_graph_output = true;
  return 0;
}

static int parse_outputs(parse_ctx *c, cJSON *root) {
  cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "outputs");
  if (o == NULL) {
    o = cJSON_CreateNull();
    if (o == NULL || !cJSON_AddItemToObject(root, "outputs", o)) {
      cJSON_Delete(o);
      return MK_ENOMEM;
    }
  }
  c->g->outputs = o;
  bool opaque = false;
  if (!arg_shape_ok(o, &opaque))
    return mk_errf(c->err, MK_EINVAL, "capture graph: \"outputs\" is not a valid encoded value");
  return mk_arg_foreach_tensor(o, add_output, c);
}

static int parse_statement(parse_ctx *c, int i, const cJSON *js) {
  mk_statement *st = &c->g->statements[i];
  snprintf(c->where, sizeof c->where, "statement %d", i);
  if (!cJSON_IsObject(js)) return mk_errf(c->err, MK_EINVAL, "capture graph: %s is not an object", c->where);
  int rc = get_int(c, js, "line", true, 1, INT_MAX, &st->line);
  st->end_line = st->line;
  if (!rc) rc = get_int(c, js, "end_line", false, st->line, INT_MAX, &st->end_line);
  if (rc) return rc;
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(js, "nodes");
  int len = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
  if (a && !cJSON_IsArray(a)) return mk_errf(c->err, MK_EINVAL, "capture graph: %s: \"nodes\" must be an array", c->where);
  if (len == 0) return 0;
  st->nodes = calloc((size_t)len, sizeof *st->nodes);
  if (st->nodes == NULL) return MK_ENOMEM;
  const cJSON *it;
  cJSON_ArrayForEach(it, a) {
    if (!json_is_int(it, 0, (double)c->g->nnodes - 1))
      return mk_errf(c->err, MK_EINVAL, "capture graph: %s (line %d) names a node that does not exist",
                     c->where, st->line);
    st->nodes[st->nnodes++] = (int)it->valuedouble;
  }
  return 0;
}

/* ---- top level --------------------------------------------------------------- */

/* Length of a required top-level array, bounded. */
static int array_len(parse_ctx *c, const cJSON *root, const char *key, bool required, int *n) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key);
  *n = 0;
  if (a == NULL && !required) return 0;
  if (!cJSON_IsArray(a)) return mk_errf(c->err, MK_EINVAL, "capture graph: \"%s\" must be an array", key);
  *n = cJSON_GetArraySize(a);
  if (*n > MK_IR_MAX_ITEMS)
    return mk_errf(c->err, MK_ERANGE, "capture graph: %d %s is more than the engine accepts (%d)", *n, key,
                   MK_IR_MAX_ITEMS);
  return 0;
}

static int parse_header(parse_ctx *c, const cJSON *root) {
  mk_graph *g = c->g;
  snprintf(c->where, sizeof c->where, "the graph");
  const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "schema");
  if (schema && !json_is_int(schema, 1, 1))
    return mk_errf(c->err, MK_EUNSUPPORTED, "capture graph: schema %g is not supported (this engine reads schema 1)",
                   cJSON_IsNumber(schema) ? schema->valuedouble : -1.0);
  int rc;
  if ((rc = get_str(c, root, "file", false, &g->file)) || (rc = get_str(c, root, "class", false, &g->class_name)) ||
      (rc = get_str(c, root, "source_sha256", false, &g->source_sha256)))
    return rc;
  if ((rc = get_int(c, root, "batch", false, 1, INT_MAX, &g->batch))) return rc;
  const cJSON *fwd = cJSON_GetObjectItemCaseSensitive(root, "forward");
  if (cJSON_IsObject(fwd)) {
    snprintf(c->where, sizeof c->where, "\"forward\"");
    if ((rc = get_int(c, fwd, "line", false, 1, INT_MAX, &g->forward_line))) return rc;
    g->forward_end_line = g->forward_line;
    if ((rc = get_int(c, fwd, "end_line", false, g->forward_line, INT_MAX, &g->forward_end_line))) return rc;
  }
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "stats"), "capture_ms");
  if (cJSON_IsNumber(ms)) g->capture_ms = ms->valuedouble;
  return 0;
}

static int alloc_tables(parse_ctx *c, const cJSON *root) {
  mk_graph *g = c->g;
  int rc;
  if ((rc = array_len(c, root, "values", true, &g->nvalues)) || (rc = array_len(c, root, "nodes", true, &g->nnodes)) ||
      (rc = array_len(c, root, "statements", false, &g->nstatements)))
    return rc;
  g->values = calloc((size_t)(g->nvalues ? g->nvalues : 1), sizeof *g->values);
  g->nodes = calloc((size_t)(g->nnodes ? g->nnodes : 1), sizeof *g->nodes);
  g->statements = calloc((size_t)(g->nstatements ? g->nstatements : 1), sizeof *g->statements);
  return g->values && g->nodes && g->statements ? 0 : MK_ENOMEM;
}

/* True if a tensor input or an earlier scalar input has forward index `index`. */
static bool input_index_taken(const mk_graph *g, int index) {
  for (int v = 0; v < g->nvalues; v++)
    if (g->values[v].kind == MK_VALUE_INPUT && g->values[v].index == index) return true;
  for (int k = 0; k < g->nscalar_inputs; k++)
    if (g->scalar_inputs[k].index == index) return true;
  return false;
}

static int count_tensor(void *ctx, int vid) {
  (void)vid;
  ++*(int *)ctx;
  return 0;
}

/* "scalar_inputs": [{"index": i, "value": ENC} | {"index": i, "opaque": true,
 * "type": "T"}] (optional; docs/protocol.md). A value that holds a tensor or
 * an opaque part is opaque: no literal can stand for it. */
static int parse_scalar_inputs(parse_ctx *c, const cJSON *root) {
  mk_graph *g = c->g;
  int n = 0, rc = array_len(c, root, "scalar_inputs", false, &n);
  if (rc || n == 0) return rc;
  g->scalar_inputs = calloc((size_t)n, sizeof *g->scalar_inputs);
  if (g->scalar_inputs == NULL) return MK_ENOMEM;
  const cJSON *it;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "scalar_inputs")) {
    snprintf(c->where, sizeof c->where, "scalar input %d", g->nscalar_inputs);
    if (!cJSON_IsObject(it)) return mk_errf(c->err, MK_EINVAL, "capture graph: %s is not an object", c->where);
    mk_scalar_input *si = &g->scalar_inputs[g->nscalar_inputs];
    if ((rc = get_int(c, it, "index", true, 0, MK_IR_MAX_ITEMS, &si->index))) return rc;
    if (input_index_taken(g, si->index))
      return mk_errf(c->err, MK_EINVAL, "capture graph: %s: forward argument %d is already an input",
                     c->where, si->index);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, "value");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
    bool opaque = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "opaque")) || v == NULL;
    if (!opaque && !arg_shape_ok(v, &opaque))
      return mk_errf(c->err, MK_EINVAL, "capture graph: %s: \"value\" is not a valid encoded value", c->where);
    int tensors = 0;
    if (!opaque && (mk_arg_foreach_tensor(v, count_tensor, &tensors) || tensors > 0)) opaque = true;
    si->value = opaque ? NULL : v;
    si->type = cJSON_IsString(type) ? type->valuestring : NULL;
    g->nscalar_inputs++;
  }
  return 0;
}

static int parse_graph(parse_ctx *c, cJSON *root) {
  mk_graph *g = c->g;
  if (!cJSON_IsObject(root)) return mk_errf(c->err, MK_EINVAL, "capture graph: the result is not a JSON object");
  int rc, i = 0;
  if ((rc = parse_header(c, root)) || (rc = alloc_tables(c, root))) return rc;
  cJSON *it;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "values")) if ((rc = parse_value(c, i++, it))) return rc;
  i = 0;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "nodes")) if ((rc = parse_node(c, i++, it))) return rc;
  i = 0;
  cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "statements")) if ((rc = parse_statement(c, i++, it))) return rc;
  if ((rc = check_nodes(c)) || (rc = parse_outputs(c, root)) || (rc = parse_scalar_inputs(c, root)) ||
      (rc = mk_ir_parse_batch(g, root, c->err)))
    return rc;
  return compute_users(g);
}

int mk_graph_from_cjson(cJSON *root, mk_graph **out, mk_errmsg *err) {
  *out = NULL;
  mk_graph *g = calloc(1, sizeof *g);
  if (g == NULL) {
    cJSON_Delete(root);
    return mk_errf(err, MK_ENOMEM, "out of memory reading the capture graph");
  }
  g->json = root;
  parse_ctx c = {g, err, ""};
  int rc = parse_graph(&c, root);
  if (rc) {
    if (rc == MK_ENOMEM) mk_errf(err, rc, "out of memory reading the capture graph");
    mk_graph_free(g);
    return rc;
  }
  *out = g;
  return 0;
}

int mk_graph_from_json(const char *json, size_t len, mk_graph **out, mk_errmsg *err) {
  *out = NULL;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
  if (root == NULL) {
    size_t at = end && end >= json ? (size_t)(end - json) : 0;
    return mk_errf(err, MK_EPARSE, "capture graph: invalid JSON near byte %zu", at);
  }
  return mk_graph_from_cjson(root, out, err);
}

void mk_graph_free(mk_graph *g) {
  if (g == NULL) return;
  free(g->scalar_inputs);
  mk_ir_free_batch(g);
  for (int i = 0; i < g->nvalues && g->values; i++) {
    free(g->values[i].name);
    free(g->values[i].users);
  }
  for (int i = 0; i < g->nnodes && g->nodes; i++) {
    mk_node *n = &g->nodes[i];
    free(n->op);
    free(n->short_name);
    free(n->inputs);
    free(n->outputs);
    free(n->mutates);
    free(n->module);
    free(n->module_type);
  }
  for (int i = 0; i < g->nstatements && g->statements; i++) free(g->statements[i].nodes);
  free(g->values);
  free(g->nodes);
  free(g->statements);
  free(g->output_values);
  free(g->file);
  free(g->class_name);
  free(g->source_sha256);
  cJSON_Delete(g->json);
  free(g);
}

/* ---- printing ------------------------------------------------------------------ */

static void print_value_list(const mk_graph *g, const int *ids, int n, mk_buf *out) {
  char label[160];
  for (int k = 0; k < n; k++)
    mk_buf_printf(out, "%s%s", k ? ", " : "", mk_value_label(&g->values[ids[k]], label, sizeof label));
}

/* "[128,16,30,30] f32" for each output (", "-separated). */
static void print_out_types(const mk_graph *g, const mk_node *n, mk_buf *out) {
  char shape[256];
  for (int k = 0; k < n->noutputs; k++) {
    const mk_value *v = &g->values[n->outputs[k]];
    mk_buf_printf(out, "%s%s %s", k ? ", " : " ", shape_fmt(v, ",", shape, sizeof shape),
                  mk_dtype_short_name(v->dtype));
  }
}

static void print_node(const mk_graph *g, const mk_node *n, mk_buf *out) {
  if (n->noutputs > 0) {
    print_value_list(g, n->outputs, n->noutputs, out);
    mk_buf_puts(out, " = ");
  }
  mk_buf_printf(out, "%s(", n->short_name);
  print_value_list(g, n->inputs, n->ninputs, out);
  mk_buf_putc(out, ')');
  print_out_types(g, n, out);
  if (n->nmutates > 0) {
    mk_buf_puts(out, "  mutates ");
    print_value_list(g, n->mutates, n->nmutates, out);
  }
  if (n->span.line > 0) mk_buf_printf(out, "   line %d", n->span.line);
  if (n->module) mk_buf_printf(out, "  (%s)", n->module);
  if (n->category == MK_OP_OPAQUE) mk_buf_puts(out, "  [opaque]");
  mk_buf_putc(out, '\n');
}

int mk_graph_print(const mk_graph *g, struct mk_buf *out) {
  for (int i = 0; i < g->nnodes; i++) print_node(g, &g->nodes[i], out);
  if (g->noutput_values > 0) {
    mk_buf_puts(out, "return ");
    print_value_list(g, g->output_values, g->noutput_values, out);
    mk_buf_putc(out, '\n');
  }
  return out->err;
}
