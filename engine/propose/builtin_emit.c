/* builtin_emit.c — small helpers shared by the builtin proposer and the
 * reference candidate: reading recorded call arguments, Triton float
 * literals, naming values, and the candidate list. Recorded calls are written
 * back as Python by engine/pyemit (mk_pyemit.h), the composer's emitter. */
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

int bi_tl_float(double d, mk_buf *out) {
  /* Inside @triton.jit functions float("inf") is a constant expression. */
  if (isinf(d)) return mk_buf_puts(out, d > 0 ? "float(\"inf\")" : "float(\"-inf\")");
  if (isnan(d)) return mk_buf_puts(out, "float(\"nan\")");
  return mk_pyemit_float(d, out);
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
