/* builtin_fuse.c — what an anchor (reduction, norm, pool, GEMM, conv) needs to
 * carry elementwise stages fused into it: the epilogue applied to the anchor's
 * value before it is stored (bi_epi_*) and the prologue computed while loading
 * its input (bi_pro_*), on top of the elementwise emitter (builtin_ew.c). */
#include "builtin_internal.h"

#include <string.h>

/* The anchor's own value is stored when it escapes: read outside the anchor
 * and its epilogue, or a subkernel output (without an epilogue it is one of
 * those, unless a chain that fuses its reader computes it: builtin_conv.c's
 * pixel reductions read a pool's value in registers). */
int bi_epi_alloc(bi_emit *e, int s, const char *out_shape_var, const char *like, mk_buf *out,
                 mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  const mk_node *an = &p->g->nodes[st->nodes[0]];
  int av = an->outputs[0];
  const mk_value *v = &p->g->values[av];
  const char *dt = bi_torch_dtype(v->dtype);
  if (dt == NULL) return mk_errf(err, MK_EUNSUPPORTED, "anchor output has an unknown dtype");
  if (bi_value_escapes(p, s, av)) {
    mk_buf_indent(out, 4);
    bi_run_name(p, av, out);
    mk_buf_printf(out, " = torch.empty(%s, device=%s, dtype=torch.%s%s)\n", out_shape_var, like, dt,
                  !e->alloc_cl || (v->rank != 4 && v->rank != 5) ? ""
                  : v->rank == 5 ? ", memory_format=torch.channels_last_3d"
                                 : ", memory_format=torch.channels_last");
  }
  if (st->epi >= 0) return bi_ew_alloc_lines(e, st->epi, out_shape_var, like, out, err);
  return out->err;
}

int bi_epi_params(bi_emit *e, int s, const char *out_shape_var, mk_buf *sig, mk_buf *call,
                  mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  int av = p->g->nodes[st->nodes[0]].outputs[0];
  if (bi_value_escapes(p, s, av)) {
    bi_run_name(p, av, sig);
    mk_buf_puts(sig, "_ptr, ");
    bi_run_name(p, av, call);
    mk_buf_puts(call, ", ");
  }
  if (st->epi < 0) return sig->err;
  bi_ew_bind bind = {.value = av, .var = "acc"};
  return bi_ew_params(e, st->epi, "epi_", out_shape_var, bind, sig, call, err);
}

int bi_epi_body(bi_emit *e, int s, const char *var, const char *offs, const char *mask, int indent,
                mk_buf *out, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  int av = p->g->nodes[st->nodes[0]].outputs[0];
  if (bi_value_escapes(p, s, av)) {
    mk_buf_indent(out, indent);
    mk_buf_puts(out, "tl.store(");
    bi_run_name(p, av, out);
    mk_buf_printf(out, "_ptr + %s, %s, mask=%s)\n", offs, var, mask);
  }
  if (st->epi < 0) return out->err;
  mk_buf_indent(out, indent);
  mk_buf_puts(out, "# fused epilogue\n");
  bi_ew_bind bind = {.value = av, .var = var};
  return bi_ew_body(e, st->epi, "epi_", offs, mask, bind, true, indent, out, err);
}

/* An anchor without a prologue reads its input directly. A contiguous input is
 * loaded at the anchor's flat offsets; a channels_last one (a conv output or
 * a channels_last elementwise stage of this module) through its strides, so
 * no contiguous copy is made; a conv bias folded into it is added per
 * channel while loading (never where the load is masked: padding stays
 * `other`). */
static bool direct_input_strided(const bi_emit *e, int in_vid) { return bi_is_cl_value(e, in_vid); }

static int direct_input_params(bi_emit *e, int in_vid, mk_buf *sig, mk_buf *call) {
  const bi_plan *p = e->p;
  bool strided = direct_input_strided(e, in_vid);
  int bias = bi_folded_bias(e, in_vid);
  int R = p->g->values[in_vid].rank;
  bi_run_name(p, in_vid, sig);
  mk_buf_puts(sig, "_ptr, ");
  bi_run_name(p, in_vid, call);
  mk_buf_puts(call, strided ? ", " : ".contiguous(), ");
  if (!strided && bias < 0) return sig->err ? sig->err : call->err;
  for (int d = 0; d < R; d++) { /* the dims as constants: bi_dim_constexpr */
    bi_run_name(p, in_vid, sig);
    mk_buf_printf(sig, "_D%d%s, ", d, bi_dim_constexpr(d));
  }
  mk_buf_puts(call, "*");
  bi_run_name(p, in_vid, call);
  mk_buf_puts(call, ".shape, ");
  if (strided) {
    for (int d = 0; d < R; d++) {
      bi_run_name(p, in_vid, sig);
      mk_buf_printf(sig, "_S%d, ", d);
    }
    mk_buf_puts(call, "*");
    bi_run_name(p, in_vid, call);
    mk_buf_puts(call, ".stride(), ");
  }
  if (bias >= 0) {
    bi_run_name(p, in_vid, sig);
    mk_buf_puts(sig, "_bias_ptr, ");
    bi_run_name(p, bias, call);
    mk_buf_puts(call, ".contiguous(), ");
  }
  return sig->err ? sig->err : call->err;
}

/* Index of logical dim d at flat offset `offs` of a dense tensor of dims name_D*. */
static void dim_index(const bi_plan *p, int vid, int R, int d, const char *offs, mk_buf *out) {
  mk_buf_printf(out, "((%s", offs);
  if (d < R - 1) {
    mk_buf_puts(out, " // (");
    for (int k = d + 1; k < R; k++) {
      if (k > d + 1) mk_buf_puts(out, " * ");
      bi_run_name(p, vid, out);
      mk_buf_printf(out, "_D%d", k);
    }
    mk_buf_puts(out, ")");
  }
  mk_buf_puts(out, ")");
  if (d > 0) {
    mk_buf_puts(out, " % ");
    bi_run_name(p, vid, out);
    mk_buf_printf(out, "_D%d", d);
  }
  mk_buf_puts(out, ")");
}

static int direct_input_load(bi_emit *e, int in_vid, const char *var, const char *offs,
                             const char *mask, const char *other, int indent, mk_buf *out,
                             bool with_bias) {
  const bi_plan *p = e->p;
  bool strided = direct_input_strided(e, in_vid);
  int bias = with_bias ? bi_folded_bias(e, in_vid) : -1;
  int R = p->g->values[in_vid].rank;
  mk_buf_printf(out, "%s = tl.load(", var);
  bi_run_name(p, in_vid, out);
  mk_buf_puts(out, "_ptr + ");
  if (strided) {
    for (int d = 0; d < R; d++) {
      if (d) mk_buf_puts(out, " + ");
      dim_index(p, in_vid, R, d, offs, out);
      mk_buf_puts(out, " * ");
      bi_run_name(p, in_vid, out);
      mk_buf_printf(out, "_S%d", d);
    }
    if (R == 0) mk_buf_puts(out, "0");
  } else {
    mk_buf_puts(out, offs);
  }
  mk_buf_printf(out, ", mask=%s, other=%s).to(tl.float32)\n", mask, other);
  if (bias < 0 || R < 2) return out->err;
  mk_buf_indent(out, indent);
  mk_buf_printf(out, "%s = tl.where(%s, %s + tl.load(", var, mask, var);
  bi_run_name(p, in_vid, out);
  mk_buf_puts(out, "_bias_ptr + ");
  dim_index(p, in_vid, R, 1, offs, out);
  mk_buf_printf(out, ", mask=%s, other=0), %s)  # conv bias, folded\n", mask, other);
  return out->err;
}

int bi_pro_params(bi_emit *e, int s, int in_vid, const char *in_shape_var, mk_buf *sig,
                  mk_buf *call, mk_errmsg *err) {
  const bi_stage *st = &e->p->st[s];
  if (st->pro_norm >= 0) return bi_norm_load_params(e, st->pro_norm, in_shape_var, sig, call, err);
  if (st->pro < 0) return direct_input_params(e, in_vid, sig, call);
  bi_ew_bind nobind = {.value = -1, .var = NULL};
  return bi_ew_params(e, st->pro, "pro_", in_shape_var, nobind, sig, call, err);
}

int bi_pro_load(bi_emit *e, int s, int in_vid, const char *var, const char *offs, const char *mask,
                const char *other, int indent, mk_buf *out, mk_errmsg *err) {
  const bi_stage *st = &e->p->st[s];
  if (st->pro_norm >= 0)
    return bi_norm_load(e, st->pro_norm, var, offs, mask, other, indent, out, err);
  mk_buf_indent(out, indent);
  if (st->pro < 0) return direct_input_load(e, in_vid, var, offs, mask, other, indent, out, true);
  mk_buf_puts(out, "# fused prologue\n");
  bi_ew_bind nobind = {.value = -1, .var = NULL};
  int rc = bi_ew_body(e, st->pro, "pro_", offs, mask, nobind, false, indent, out, err);
  if (rc) return rc;
  mk_buf_indent(out, indent);
  return mk_buf_printf(out, "%s = tl.where(%s, v%d, %s).to(tl.float32)\n", var, mask,
                       bi_stage_result(e->p, st->pro), other);
}

int bi_input_load_unbiased(bi_emit *e, int in_vid, const char *var, const char *offs,
                           const char *mask, const char *other, int indent, mk_buf *out) {
  mk_buf_indent(out, indent);
  return direct_input_load(e, in_vid, var, offs, mask, other, indent, out, false);
}

int bi_anchor_input_shape(bi_emit *e, int s, int in_vid, const char *shape_var, mk_buf *out,
                          mk_errmsg *err) {
  const bi_stage *st = &e->p->st[s];
  if (st->pro_norm >= 0) {
    /* The normalised value has the norm's input's shape. */
    const mk_node *nn = &e->p->g->nodes[e->p->st[st->pro_norm].nodes[0]];
    return bi_anchor_input_shape(e, st->pro_norm, bi_arg_tensor(bi_arg(nn, 0, "input")), shape_var,
                                 out, err);
  }
  if (st->pro < 0) {
    mk_buf_printf(out, "    %s = ", shape_var);
    bi_run_name(e->p, in_vid, out);
    mk_buf_puts(out, ".shape\n");
    mk_buf_printf(out, "    %s_device = ", shape_var);
    bi_run_name(e->p, in_vid, out);
    return mk_buf_puts(out, ".device\n");
  }
  bi_ew_bind nobind = {.value = -1, .var = NULL};
  int rc = bi_ew_shape_lines(e, st->pro, shape_var, nobind, NULL, out, err);
  if (rc) return rc;
  mk_buf_printf(out, "    %s_device = ", shape_var);
  rc = bi_ew_device_of(e, st->pro, nobind, out, err);
  if (rc) return rc;
  return mk_buf_puts(out, "\n");
}
