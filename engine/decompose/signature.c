/* signature.c — structural signatures of subkernels, and twins.
 *
 * Deep networks repeat themselves: ResNet-101's 33 bottleneck blocks give
 * the same conv + batch-norm + relu subkernel dozens of times, with the
 * same shapes and only different parameter tensors. Two subkernels compute
 * the same function of their inputs when their nodes call the same ops with
 * the same arguments up to a renaming of tensors, and their inputs have the
 * same kinds, shapes and dtypes. The signature is that description as text,
 * with every tensor renamed to its local number (the subkernel's inputs
 * first, in mk_subkernel.inputs order, then the values its nodes produce);
 * equal signatures mean interchangeable candidates (docs/candidates.md: a
 * candidate sees only its inputs, in that order). Parameter *values* are not
 * part of it: a candidate is verified on the reference's own semantics, and
 * the composed program is verified as a whole afterwards. */
#include "mk_decompose.h"

#include "mk_buf.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct local_ids {
  const mk_graph *g;
  int *local; /* local[vid] = local number, or -1 */
  int next;
  bool unique; /* a const tensor: never a twin */
} local_ids;

static int local_of(local_ids *ids, int vid) {
  if (vid < 0 || vid >= ids->g->nvalues) return -1;
  if (ids->local[vid] < 0) ids->local[vid] = ids->next++;
  return ids->local[vid];
}

/* Writes `arg` as JSON with every {"t": id} replaced by its local number. */
static int write_arg(local_ids *ids, const cJSON *arg, mk_buf *out) {
  if (arg == NULL) return mk_buf_puts(out, "null");
  if (cJSON_IsObject(arg)) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(arg, "t");
    if (t && cJSON_IsNumber(t) && arg->child == t && t->next == NULL)
      return mk_buf_printf(out, "{\"t\":%d}", local_of(ids, t->valueint));
  }
  if (cJSON_IsArray(arg) || cJSON_IsObject(arg)) {
    bool obj = cJSON_IsObject(arg);
    mk_buf_putc(out, obj ? '{' : '[');
    for (const cJSON *it = arg->child; it; it = it->next) {
      if (it != arg->child) mk_buf_putc(out, ',');
      if (obj) {
        mk_buf_json_str(out, it->string ? it->string : "");
        mk_buf_putc(out, ':');
      }
      write_arg(ids, it, out);
    }
    return mk_buf_putc(out, obj ? '}' : ']');
  }
  char *text = cJSON_PrintUnformatted(arg);
  if (text == NULL) return out->err = MK_ENOMEM;
  mk_buf_puts(out, text);
  free(text);
  return out->err;
}

static const char *kind_class(mk_value_kind k) {
  switch (k) {
  case MK_VALUE_INPUT:
  case MK_VALUE_NODE: return "act"; /* an activation, whoever made it */
  case MK_VALUE_PARAM: return "param";
  case MK_VALUE_BUFFER: return "buffer";
  case MK_VALUE_ATTR: return "attr";
  case MK_VALUE_CONST: return "const";
  }
  return "?";
}

static void write_value_type(const mk_value *v, mk_buf *out) {
  mk_buf_printf(out, "%s:%s[", kind_class(v->kind), mk_dtype_name(v->dtype));
  for (int d = 0; d < v->rank; d++) mk_buf_printf(out, "%s%lld", d ? "," : "", (long long)v->shape[d]);
  mk_buf_putc(out, ']');
}

static void write_id_list(local_ids *ids, const char *tag, const int *v, int n, mk_buf *out) {
  mk_buf_printf(out, " %s(", tag);
  for (int i = 0; i < n; i++) mk_buf_printf(out, "%s%d", i ? "," : "", local_of(ids, v[i]));
  mk_buf_putc(out, ')');
}

static void write_node(local_ids *ids, const mk_node *n, mk_buf *out) {
  mk_buf_printf(out, "%s ", n->op);
  write_arg(ids, n->args, out);
  mk_buf_putc(out, ' ');
  write_arg(ids, n->kwargs, out);
  mk_buf_puts(out, " -> ");
  write_arg(ids, n->out, out);
  write_id_list(ids, "mut", n->mutates, n->nmutates, out);
  write_id_list(ids, "outs", n->outputs, n->noutputs, out);
  for (int k = 0; k < n->noutputs; k++) {
    int vid = n->outputs[k];
    if (vid < 0 || vid >= ids->g->nvalues) continue;
    mk_buf_putc(out, ' ');
    write_value_type(&ids->g->values[vid], out);
  }
  mk_buf_putc(out, '\n');
}

int mk_subkernel_signature(const mk_graph *g, const mk_subkernel *sk, mk_buf *out) {
  if (g == NULL || sk == NULL || out == NULL) return MK_EINVAL;
  local_ids ids = {.g = g, .local = malloc(sizeof(int) * ((size_t)g->nvalues + 1))};
  if (ids.local == NULL) return MK_ENOMEM;
  for (int i = 0; i < g->nvalues; i++) ids.local[i] = -1;
  int rc = 0;
  mk_buf_puts(out, "in");
  for (int i = 0; i < sk->ninputs && !rc; i++) {
    int vid = sk->inputs[i];
    if (vid < 0 || vid >= g->nvalues) rc = MK_EINVAL;
    else if (g->values[vid].kind == MK_VALUE_CONST) rc = MK_EUNSUPPORTED;
    else {
      local_of(&ids, vid);
      mk_buf_putc(out, ' ');
      write_value_type(&g->values[vid], out);
    }
  }
  mk_buf_putc(out, '\n');
  for (int i = 0; i < sk->nnodes && !rc; i++) {
    int nid = sk->nodes[i];
    if (nid < 0 || nid >= g->nnodes) rc = MK_EINVAL;
    else if (!g->nodes[nid].replayable) rc = MK_EUNSUPPORTED; /* its behaviour is not all in its args */
    else write_node(&ids, &g->nodes[nid], out);
  }
  if (!rc) write_id_list(&ids, "returns", sk->outputs, sk->noutputs, out);
  free(ids.local);
  return rc ? rc : out->err;
}

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h;
}

int mk_partition_twins(const mk_graph *g, const mk_partition *p, int *rep) {
  if (g == NULL || p == NULL || rep == NULL) return MK_EINVAL;
  int n = p->nsubkernels;
  char **sig = calloc((size_t)n + 1, sizeof *sig);
  uint64_t *hash = calloc((size_t)n + 1, sizeof *hash);
  int rc = sig && hash ? 0 : MK_ENOMEM;
  for (int i = 0; i < n && !rc; i++) {
    rep[i] = i;
    mk_buf b;
    mk_buf_init(&b, 0);
    int src = mk_subkernel_signature(g, &p->subkernels[i], &b);
    if (src) {
      mk_buf_free(&b); /* no signature (a const, an opaque argument): a subkernel of its own */
      if (src == MK_ENOMEM) rc = src;
      continue;
    }
    size_t len = 0;
    sig[i] = mk_buf_steal(&b, &len);
    hash[i] = fnv1a(sig[i] ? sig[i] : "", len);
    for (int j = 0; j < i && sig[i]; j++)
      if (rep[j] == j && sig[j] && hash[j] == hash[i] && strcmp(sig[j], sig[i]) == 0) {
        rep[i] = j;
        break;
      }
  }
  for (int i = 0; sig && i < n; i++) free(sig[i]);
  free(sig);
  free(hash);
  if (rc)
    for (int i = 0; i < n; i++) rep[i] = i;
  return rc;
}
