/* builtin_ref.c — the PyTorch reference as a candidate.
 *
 * run(...) replays the subkernel's recorded calls one by one, with the exact
 * arguments the capture saw, so it is correct by construction and is the
 * variant every search starts from (and falls back to). Values the program's
 * layout plan converts (mk_layout.h) are converted right after they are
 * made, as in the composed program. */
#include "builtin_internal.h"

#include "mk_layout.h"

#include <stdlib.h>
#include <string.h>

/* `v = v.contiguous(...)` after node n for each output the plan converts. */
static int emit_planned_conversions(const mk_graph *g, const mk_node *n, const unsigned char *conv,
                                    mk_buf *b) {
  for (int k = 0; conv && k < n->noutputs; k++) {
    int v = n->outputs[k];
    if (v >= 0 && v < g->nvalues) mk_pyemit_conversion(g, v, conv[v], bi_graph_namer, (void *)g, 4, b);
  }
  return b->err;
}

int bi_emit_run_signature(const mk_graph *g, const mk_subkernel *sk, mk_buf *out) {
  mk_buf_puts(out, "def run(");
  for (int i = 0; i < sk->ninputs; i++) {
    if (i) mk_buf_puts(out, ", ");
    bi_value_name(g, sk->inputs[i], out);
  }
  mk_buf_puts(out, "):\n");
  /* Recorded devices are the device run() is given its tensors on. */
  return mk_pyemit_device_binding(g, sk->nodes, sk->nnodes, sk->ninputs ? sk->inputs[0] : -1,
                                  bi_graph_namer, (void *)g, 4, out);
}

int bi_emit_return(const mk_graph *g, const mk_subkernel *sk, mk_buf *out) {
  mk_buf_puts(out, "    return ");
  if (sk->noutputs == 0) return mk_buf_puts(out, "()\n");
  for (int i = 0; i < sk->noutputs; i++) {
    if (i) mk_buf_puts(out, ", ");
    bi_value_name(g, sk->outputs[i], out);
  }
  return mk_buf_puts(out, "\n");
}

int mk_reference_candidate(const mk_graph *g, const mk_subkernel *sk, mk_candidate *out,
                           mk_errmsg *err) {
  if (g == NULL || sk == NULL || out == NULL) return mk_errf(err, MK_EINVAL, "no subkernel given");
  *out = (mk_candidate){0};
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_printf(&b, "\"\"\"PyTorch reference for subkernel %s (lines %d-%d): the recorded calls.\"\"\"\n",
                sk->name ? sk->name : "?", sk->first_line, sk->last_line);
  mk_buf_puts(&b, "import math  # noqa: F401  (recorded arguments may use math constants)\n\n"
                  "import torch\nimport torch.nn.functional as F  # noqa: F401\n\n\n");
  bi_emit_run_signature(g, sk, &b);
  unsigned char *layout = malloc((size_t)g->nvalues + 1), *conv = malloc((size_t)g->nvalues + 1);
  if (layout == NULL || conv == NULL || mk_layout_plan(g, layout, conv) < 0) {
    free(conv);
    conv = NULL; /* no plan: the calls as recorded */
  }
  free(layout);
  int rc = 0;
  int last_line = -1;
  for (int i = 0; i < sk->nnodes && rc == 0; i++) {
    int nid = sk->nodes[i];
    if (nid < 0 || nid >= g->nnodes) {
      rc = mk_errf(err, MK_EINVAL, "subkernel %s names node %d, which does not exist",
                   sk->name ? sk->name : "?", nid);
      break;
    }
    const mk_node *n = &g->nodes[nid];
    if (!n->replayable) {
      rc = mk_errf(err, MK_EUNSUPPORTED,
                   "line %d: %s cannot be replayed (an argument was not recorded exactly)",
                   n->span.line, n->op);
      break;
    }
    if (n->span.line != last_line) {
      mk_buf_printf(&b, "    # line %d\n", n->span.line);
      last_line = n->span.line;
    }
    rc = mk_pyemit_node(g, n, bi_graph_namer, (void *)g, 4, &b, err);
    if (rc && err && err->text[0] == '\0') mk_errf(err, rc, "node %d (%s) cannot be written", nid, n->op);
    if (rc == 0) rc = emit_planned_conversions(g, n, conv, &b);
  }
  free(conv);
  if (rc == 0) {
    bi_emit_return(g, sk, &b);
    if (b.err) rc = mk_errf(err, b.err, "reference source too large");
  }
  if (rc) {
    mk_buf_free(&b);
    return rc;
  }
  out->source = mk_buf_steal(&b, NULL);
  out->name = mk_strdup("reference");
  out->origin = mk_strdup("reference");
  out->notes = mk_strdup("the recorded PyTorch calls");
  mk_buf_free(&b);
  if (!out->source || !out->name || !out->origin || !out->notes) {
    mk_candidate_free(out);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  return 0;
}
