/* builtin_torch.c — anchors delegated to PyTorch: convolutions (cuDNN) and,
 * as a variant, GEMMs (cuBLAS), each followed by the subkernel's elementwise
 * run as one Triton kernel. The candidate declares the delegated ops in
 * MK_USES_TORCH (docs/candidates.md).
 *
 * channels_last variant: the convolution's input and weight are converted to
 * channels_last (1.3-1.65x faster convolutions on H200, bit-identical, see
 * /work/shared/PERF-NOTES.md); the epilogue kernel then reads the conv output
 * through its strides and writes the usual contiguous layout, so nothing
 * downstream sees a different memory format. */
#include "builtin_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct cl_namer {
  const mk_graph *g;
  int in, weight;   /* value ids renamed to their channels_last copies */
} cl_namer;

static int cl_name(void *ctx, int vid, mk_buf *out) {
  cl_namer *c = ctx;
  bi_value_name(c->g, vid, out);
  if (vid == c->in || vid == c->weight) mk_buf_puts(out, "_cl");
  return out->err;
}

static bool is_conv_nd(const char *s, int *nd) {
  if (strncmp(s, "conv", 4) != 0) return false;
  size_t len = strlen(s);
  if (len < 2 || s[len - 1] != 'd') return false;
  *nd = s[len - 2] - '0';
  return *nd >= 1 && *nd <= 3;
}

/* True if a reader of v inside the subkernel is not an elementwise run (a
 * view, another anchor) or v leaves the subkernel: then it must be contiguous. */
static bool needs_contiguous(const bi_plan *p, int s, int v) {
  if (p->is_output[v]) return true;
  const mk_value *val = &p->g->values[v];
  for (int u = 0; u < val->nusers; u++) {
    int nid = val->users[u];
    if (nid < 0 || nid >= p->g->nnodes || p->stage_of[nid] < 0) continue;
    int us = p->stage_of[nid];
    if (us != s && p->st[us].kind != BI_EW) return true;
  }
  return false;
}

static int add_uses_torch(bi_emit *e, const char *name) {
  char quoted[80];
  snprintf(quoted, sizeof quoted, "\"%s\", ", name);
  if (strstr(mk_buf_cstr(e->uses_torch), quoted)) return 0;
  return mk_buf_puts(e->uses_torch, quoted);
}

int bi_emit_torch_stage(bi_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  char sn[64];
  bi_short(n, sn, sizeof sn);
  add_uses_torch(e, sn);
  mk_buf *b = e->body;
  bi_stage_comment(p, s, 4, b);
  int nd = 0;
  int in = bi_arg_tensor(bi_arg(n, 0, "input"));
  int w = bi_arg_tensor(bi_arg(n, 1, "weight"));
  bool cl = e->cfg->channels_last && is_conv_nd(sn, &nd) && nd >= 2 && in >= 0 && w >= 0 &&
            p->g->values[in].rank == nd + 2;
  int rc;
  if (cl) {
    const char *fmt = nd == 2 ? "torch.channels_last" : "torch.channels_last_3d";
    mk_buf_puts(b, "    # channels_last convolution: faster cuDNN kernels, same values\n");
    const int ids[2] = {in, w};
    for (int i = 0; i < 2; i++) {
      mk_buf_indent(b, 4);
      bi_run_name(p, ids[i], b);
      mk_buf_puts(b, "_cl = ");
      bi_run_name(p, ids[i], b);
      mk_buf_printf(b, ".contiguous(memory_format=%s)\n", fmt);
    }
    cl_namer c = {.g = p->g, .in = in, .weight = w};
    rc = mk_pyemit_node(p->g, n, cl_name, &c, 4, b, err);
    if (!rc) {
      int out = n->outputs[0];
      if (needs_contiguous(p, s, out)) {
        mk_buf_indent(b, 4);
        bi_run_name(p, out, b);
        mk_buf_puts(b, " = ");
        bi_run_name(p, out, b);
        mk_buf_puts(b, ".contiguous()\n");
      } else if (e->nstrided < (int)(sizeof e->strided / sizeof e->strided[0])) {
        e->strided[e->nstrided++] = out;
      }
    }
  } else {
    rc = mk_pyemit_node(p->g, n, bi_graph_namer, (void *)p->g, 4, b, err);
  }
  if (rc) return rc;
  /* A GEMM emitted through torch still owns its fused epilogue stage. */
  if (st->epi >= 0) return bi_emit_ew_stage(e, st->epi, err);
  return b->err ? mk_errf(err, MK_ERANGE, "generated code too large") : 0;
}
