/* builtin_gemm.c — GEMM (linear, matmul, mm, bmm, addmm) with a fused epilogue.
 *
 * A tiled tl.dot kernel with grouped program order (L2 reuse), any operand
 * strides (so x @ w.t() and linear's [N, K] weight need no copies), bias in
 * registers and the following elementwise run applied before the single
 * store. fp32 accuracy: tl.dot runs with input_precision "tf32x3" (3xTF32
 * split, faster than cuBLAS fp32 on H200 and within 1e-4) or "ieee"; plain
 * tf32 fails the tolerance and is never proposed (docs/builtin-proposer.md).
 * The "torch" variant keeps cuBLAS for the product and fuses only the
 * epilogue (MK_USES_TORCH). Batched products take one batch dim (bmm, 3-d
 * matmul) or two (4-d matmul: attention's (batch, heads) views, read through
 * their strides, so the transposed head views of a split projection are never
 * copied); leading dims that broadcast stay PyTorch's. */
#include "builtin_internal.h"

#include <stdio.h>
#include <string.h>

typedef bi_gemm_info gemm_info;

/* The letters of an einsum operand ("bijl"): false for an ellipsis, a
 * repeated letter (a diagonal) or anything but [a-zA-Z]. */
static bool einsum_letters(const char *t, size_t len, int rank) {
  if ((int)len != rank) return false;
  for (size_t i = 0; i < len; i++) {
    if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z'))) return false;
    if (memchr(t, t[i], i) != NULL) return false;
  }
  return true;
}

/* A two-operand einsum "A,B->O" with an explicit output as a bmm: every
 * letter is a batch one (in A, B and O), an M one (A and O), an N one (B and
 * O) or a K one (A and B, summed); O lists batch, then M, then N letters
 * (or batch, N, M: the operands swap), so the product [batch, M, N] is O
 * itself in memory (its epilogue indexes it by O's shape). Anything else (a
 * letter summed within one operand, an ellipsis, letters of A and B
 * interleaved in O) stays PyTorch's. */
static int einsum_parse(const mk_graph *g, const mk_node *n, gemm_info *gi, mk_errmsg *err) {
  const char *eq = bi_arg_str(bi_arg(n, 0, "equation"));
  const cJSON *ops = bi_arg(n, 1, NULL);
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(ops, "list");
  gi->a = bi_arg_tensor(list ? cJSON_GetArrayItem(list, 0) : ops);
  gi->b = bi_arg_tensor(list ? cJSON_GetArrayItem(list, 1) : bi_arg(n, 2, NULL));
  int nops = list ? cJSON_GetArraySize(list) : cJSON_GetArraySize(n->args) - 1;
  if (eq == NULL || nops != 2 || gi->a < 0 || gi->b < 0 || gi->a >= g->nvalues || gi->b >= g->nvalues)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: einsum of other than two tensors", n->span.line);
  const char *comma = strchr(eq, ','), *arrow = strstr(eq, "->");
  char buf[3][MK_IR_MAX_RANK + 1];
  size_t len[3];
  if (comma == NULL || arrow == NULL || arrow < comma) goto unsupported;
  const char *part[3] = {eq, comma + 1, arrow + 2};
  size_t plen[3] = {(size_t)(comma - eq), (size_t)(arrow - comma - 1), strlen(arrow + 2)};
  const mk_value *out = n->noutputs > 0 ? &g->values[n->outputs[0]] : NULL;
  int pranks[3] = {g->values[gi->a].rank, g->values[gi->b].rank, out ? out->rank : -1};
  for (int i = 0; i < 3; i++)
    if (plen[i] > MK_IR_MAX_RANK || !einsum_letters(part[i], plen[i], pranks[i])) goto unsupported;
  /* An output whose first letter after the batch ones is B's ("ij,jk->ki"):
   * the same product with the operands swapped (B's rows times A's columns). */
  bool swap = false;
  for (size_t i = 0; i < plen[2]; i++) {
    bool in_a = memchr(part[0], part[2][i], plen[0]) != NULL, in_b = memchr(part[1], part[2][i], plen[1]) != NULL;
    if (in_a && in_b) continue;
    swap = in_b;
    break;
  }
  int order[3] = {swap ? 1 : 0, swap ? 0 : 1, 2}, ranks[3];
  for (int i = 0; i < 3; i++) {
    len[i] = plen[order[i]];
    ranks[i] = pranks[order[i]];
    memcpy(buf[i], part[order[i]], len[i]);
    buf[i][len[i]] = '\0';
  }
  if (swap) {
    int tv = gi->a;
    gi->a = gi->b;
    gi->b = tv;
  }
  /* the output's letters: batch, then M, then N */
  int phase = 0;
  for (size_t i = 0; i < len[2]; i++) {
    bool in_a = strchr(buf[0], buf[2][i]) != NULL, in_b = strchr(buf[1], buf[2][i]) != NULL;
    int kind = in_a && in_b ? 0 : in_a ? 1 : in_b ? 2 : -1;
    if (kind < phase) goto unsupported; /* out of order, or in neither operand */
    phase = kind;
    int *count = kind == 0 ? &gi->nbat : kind == 1 ? &gi->nm : &gi->nn;
    ++*count;
  }
  /* A: batch letters (output order), M letters (output order), K letters (A's order) */
  int na = 0, nb = 0;
  for (size_t i = 0; i < len[2]; i++) {
    const char *at = strchr(buf[0], buf[2][i]);
    if (at) gi->pa[na++] = (int)(at - buf[0]);
  }
  for (size_t i = 0; i < len[0]; i++)
    if (strchr(buf[2], buf[0][i]) == NULL) {
      if (strchr(buf[1], buf[0][i]) == NULL) goto unsupported; /* summed within A alone */
      gi->pa[na++] = (int)i;
      gi->nk++;
    }
  /* B: batch letters, the K letters in A's order, N letters */
  for (int i = 0; i < gi->nbat; i++) gi->pb[nb++] = (int)(strchr(buf[1], buf[2][i]) - buf[1]);
  for (size_t i = 0; i < len[0]; i++)
    if (strchr(buf[2], buf[0][i]) == NULL) gi->pb[nb++] = (int)(strchr(buf[1], buf[0][i]) - buf[1]);
  for (size_t i = 0; i < len[2]; i++)
    if (strchr(buf[0], buf[2][i]) == NULL) gi->pb[nb++] = (int)(strchr(buf[1], buf[2][i]) - buf[1]);
  if (na != (int)len[0] || nb != (int)len[1]) goto unsupported; /* a letter of B alone, summed */
  gi->einsum = true;
  gi->batch_dims = 1;
  gi->a_rank = ranks[0];
  return 0;
unsupported:
  return mk_errf(err, MK_EUNSUPPORTED,
                 "line %d: einsum \"%.60s\" is not a product the GEMM kernel computes (two operands, "
                 "an explicit output listing batch letters, then one operand's, then the other's)",
                 n->span.line, eq);
}

int bi_gemm_parse(const mk_graph *g, const mk_node *n, gemm_info *gi, mk_errmsg *err) {
  char s[64];
  bi_short(n, s, sizeof s);
  *gi = (gemm_info){.a = -1, .b = -1, .bias = -1};
  if (strcmp(s, "einsum") == 0) {
    int rc = einsum_parse(g, n, gi, err);
    if (rc) return rc;
    if (g->values[gi->a].dtype != MK_DTYPE_F32 || g->values[gi->b].dtype != MK_DTYPE_F32)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: einsum of non-fp32 tensors", n->span.line);
    return 0;
  }
  if (strcmp(s, "linear") == 0) {
    gi->a = bi_arg_tensor(bi_arg(n, 0, "input"));
    gi->b = bi_arg_tensor(bi_arg(n, 1, "weight"));
    gi->bias = bi_arg_tensor(bi_arg(n, 2, "bias"));
    gi->weight_nk = true;
  } else if (strcmp(s, "addmm") == 0) {
    gi->bias = bi_arg_tensor(bi_arg(n, 0, "input"));
    gi->a = bi_arg_tensor(bi_arg(n, 1, "mat1"));
    gi->b = bi_arg_tensor(bi_arg(n, 2, "mat2"));
    double beta = 1, alpha = 1;
    bi_arg_number(bi_arg(n, 3, "beta"), &beta);
    bi_arg_number(bi_arg(n, 4, "alpha"), &alpha);
    if (beta != 1 || alpha != 1)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: addmm with beta/alpha", n->span.line);
  } else {
    bool rev = strcmp(s, "rmatmul") == 0;
    gi->a = bi_arg_tensor(bi_arg(n, rev ? 1 : 0, "input"));
    gi->b = bi_arg_tensor(bi_arg(n, rev ? 0 : 1, "other"));
    if (gi->b < 0) gi->b = bi_arg_tensor(bi_arg(n, 1, "mat2"));
  }
  if (gi->a < 0 || gi->b < 0 || gi->a >= g->nvalues || gi->b >= g->nvalues)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s without two tensor operands", n->span.line, s);
  const mk_value *a = &g->values[gi->a], *b = &g->values[gi->b];
  gi->a_rank = a->rank;
  if (a->dtype != MK_DTYPE_F32 || b->dtype != MK_DTYPE_F32)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s of non-fp32 tensors", n->span.line, s);
  if (gi->bias >= 0 && (g->values[gi->bias].rank != 1))
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with a bias that is not 1-d", n->span.line, s);
  if (b->rank == 2 && a->rank >= 2) return 0;
  if (b->rank == 3 && a->rank == 3 && !gi->weight_nk && a->shape[0] == b->shape[0]) {
    gi->batch_dims = 1;
    return 0;
  }
  if (b->rank == 4 && a->rank == 4 && !gi->weight_nk && a->shape[0] == b->shape[0] &&
      a->shape[1] == b->shape[1]) {
    gi->batch_dims = 2;
    return 0;
  }
  if (a->rank == b->rank && a->rank >= 3)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s whose leading dims broadcast or pass 4-d",
                   n->span.line, s);
  return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s of ranks %d and %d", n->span.line, s, a->rank,
                 b->rank);
}

int bi_gemm_check(const mk_graph *g, const mk_node *n, mk_errmsg *err) {
  gemm_info gi;
  return bi_gemm_parse(g, n, &gi, err);
}

static int emit_kernel(bi_emit *e, int s, const gemm_info *gi, const char *kname, const char *sig,
                       mk_errmsg *err) {
  mk_buf *k = e->kernels;
  mk_buf_printf(k,
                "\n\n@triton.jit\ndef %s(a_ptr, b_ptr, %s%sM, N, K, stride_ab, stride_am, stride_ak,\n"
                "        stride_bb, stride_bk, stride_bn, B1, stride_ab1, stride_bb1,\n"
                "        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,\n"
                "        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IDX64: tl.constexpr):\n",
                kname, gi->bias >= 0 ? "bias_ptr, " : "", sig);
  bi_stage_comment(e->p, s, 4, k);
  mk_buf_printf(k,
                "    # grouped program order: GROUP_M row tiles share each column tile in L2;\n"
                "    # batches on the same grid axis (dim 1 of a grid allows only 65535)\n"
                "    pid = tl.program_id(0)\n"
                "    num_m = tl.cdiv(M, BLOCK_M)\n"
                "    num_n = tl.cdiv(N, BLOCK_N)\n"
                "    batch = pid // (num_m * num_n)\n"
                "    pid = pid %% (num_m * num_n)\n"
                "    group = pid // (GROUP_M * num_n)\n"
                "    first_m = group * GROUP_M\n"
                "    group_size = tl.minimum(num_m - first_m, GROUP_M)\n"
                "    pid_m = first_m + (pid %% group_size)\n"
                "    pid_n = (pid %% (GROUP_M * num_n)) // group_size\n"
                "    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)\n"
                "    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)\n"
                "    rk = tl.arange(0, BLOCK_K)\n"
                "    if IDX64:  # an operand's storage or the result has more than 2**31 elements\n"
                "        batch = batch.to(tl.int64)\n"
                "        rm = rm.to(tl.int64)\n"
                "        rn = rn.to(tl.int64)\n"
                "        rk = rk.to(tl.int64)\n"
                "    # a second batch dim (4-d: heads) of B1, each operand by its own strides\n"
                "    b0 = batch // B1\n"
                "    b1 = batch %% B1\n"
                "    a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1\n"
                "    b_base = b_ptr + b0 * stride_bb + b1 * stride_bb1\n"
                "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
                "    for k0 in range(0, K, BLOCK_K):\n"
                "        kk = k0 + rk\n"
                "        a = tl.load(a_base + rm[:, None] * stride_am + kk[None, :] * stride_ak,\n"
                "                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)\n"
                "        b = tl.load(b_base + kk[:, None] * stride_bk + rn[None, :] * stride_bn,\n"
                "                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)\n"
                "        acc += tl.dot(a, b, input_precision=\"%s\")\n",
                e->cfg->precision);
  if (gi->bias >= 0)
    mk_buf_puts(k, "    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]\n");
  mk_buf_puts(k, "    offs = batch * M * N + rm[:, None] * N + rn[None, :]\n"
                 "    mask = (rm[:, None] < M) & (rn[None, :] < N)\n");
  return bi_epi_body(e, s, "acc", "offs", "mask", 4, k, err);
}

static void perm_list(const int *perm, int n, mk_buf *b) {
  mk_buf_putc(b, '(');
  for (int i = 0; i < n; i++) mk_buf_printf(b, "%d, ", perm[i]);
  mk_buf_putc(b, ')');
}

/* An einsum's operands as a bmm's (einsum_parse): A permuted to [batch, M,
 * K], B to [batch, K, N], each group merged by reshape (a view where the
 * strides allow it, a copy otherwise), and es<res> the output's shape. */
static void einsum_operands(const bi_plan *p, const gemm_info *gi, int res, mk_buf *b) {
  int nb = gi->nbat, nm = gi->nm, nk = gi->nk, nn = gi->nn;
  mk_buf_printf(b, "    ea%d = ", res);
  bi_run_name(p, gi->a, b);
  mk_buf_puts(b, ".permute");
  perm_list(gi->pa, nb + nm + nk, b);
  mk_buf_printf(b, "\n    eb%d = ", res);
  bi_run_name(p, gi->b, b);
  mk_buf_puts(b, ".permute");
  perm_list(gi->pb, nb + nk + nn, b);
  mk_buf_printf(b, "\n    es%d = tuple(ea%d.shape[:%d]) + tuple(eb%d.shape[%d:])\n", res, res, nb + nm, res,
                nb + nk);
  mk_buf_printf(b,
                "    a%d = ea%d.reshape(math.prod(ea%d.shape[:%d]), math.prod(ea%d.shape[%d:%d]), "
                "math.prod(ea%d.shape[%d:]))\n",
                res, res, res, nb, res, nb, nb + nm, res, nb + nm);
  mk_buf_printf(b,
                "    b%d = eb%d.reshape(math.prod(eb%d.shape[:%d]), math.prod(eb%d.shape[%d:%d]), "
                "math.prod(eb%d.shape[%d:]))\n",
                res, res, res, nb, res, nb, nb + nk, res, nb + nk);
  mk_buf_printf(b, "    if tuple(ea%d.shape[:%d]) != tuple(eb%d.shape[:%d]):\n"
                   "        raise ValueError(\"einsum batch dims do not match\")\n",
                res, nb, res, nb);
}

int bi_emit_gemm_stage(bi_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  gemm_info gi;
  int rc = bi_gemm_parse(p->g, n, &gi, err);
  if (rc) return rc;
  if (e->cfg->gemm_torch) return bi_emit_torch_stage(e, s, err);
  int res = n->outputs[0];
  char out_shape[32], dev[48];
  snprintf(out_shape, sizeof out_shape, "out%d", res);
  snprintf(dev, sizeof dev, "a%d.device", res);
  mk_buf kname, sig, call;
  mk_buf_init(&kname, 256);
  mk_buf_init(&sig, 0);
  mk_buf_init(&call, 0);
  e->kcount++;
  bi_kernel_name(e, s, "gemm", &kname);
  rc = bi_epi_params(e, s, out_shape, &sig, &call, err);
  if (!rc) rc = emit_kernel(e, s, &gi, mk_buf_cstr(&kname), mk_buf_cstr(&sig), err);
  if (!rc) {
    mk_buf *b = e->body;
    bi_stage_comment(p, s, 4, b);
    if (st->epi >= 0) bi_stage_comment(p, st->epi, 4, b);
    /* A as [batch, M, K] (contiguous rows), B by its own strides; a 4-d A
     * (the head views of attention) by its strides too. */
    if (gi.einsum) {
      einsum_operands(p, &gi, res, b);
    } else {
      mk_buf_printf(b, "    a%d = ", res);
      bi_run_name(p, gi.a, b);
      mk_buf_puts(b, gi.batch_dims == 2 ? "\n" : ".contiguous()\n");
      mk_buf_printf(b, "    b%d = ", res);
      bi_run_name(p, gi.b, b);
      mk_buf_puts(b, "\n");
    }
    /* the second batch dim (heads) and its strides: none below 4-d */
    if (gi.batch_dims < 2) mk_buf_printf(b, "    b1_%d, sab1_%d, sbb1_%d = 1, 0, 0\n", res, res, res);
    if (gi.batch_dims == 2) {
      mk_buf_printf(b, "    bat%d, b1_%d, m%d, k%d = a%d.shape\n", res, res, res, res, res);
      mk_buf_printf(b, "    if tuple(b%d.shape[:2]) != (bat%d, b1_%d):\n"
                       "        raise ValueError(\"batch dims do not match\")\n", res, res, res);
      mk_buf_printf(b, "    n%d = b%d.shape[3]\n", res, res);
      mk_buf_printf(b, "    batch%d = bat%d * b1_%d\n", res, res, res);
      mk_buf_printf(b, "    sab%d, sab1_%d, sam%d, sak%d = a%d.stride()\n", res, res, res, res, res);
      mk_buf_printf(b, "    sbb%d, sbb1_%d, sbk%d, sbn%d = b%d.stride()\n", res, res, res, res, res);
      mk_buf_printf(b, "    out%d = (bat%d, b1_%d, m%d, n%d)\n", res, res, res, res, res);
    } else if (gi.batch_dims == 1) {
      mk_buf_printf(b, "    batch%d, m%d, k%d = a%d.shape\n", res, res, res, res);
      mk_buf_printf(b, "    n%d = b%d.shape[2]\n", res, res);
      mk_buf_printf(b, "    sab%d, sam%d, sak%d = a%d.stride()\n", res, res, res, res);
      mk_buf_printf(b, "    sbb%d, sbk%d, sbn%d = b%d.stride()\n", res, res, res, res);
      if (gi.einsum) mk_buf_printf(b, "    out%d = es%d\n", res, res);
      else mk_buf_printf(b, "    out%d = (batch%d, m%d, n%d)\n", res, res, res, res);
    } else {
      mk_buf_printf(b, "    k%d = a%d.shape[-1]\n", res, res);
      mk_buf_printf(b, "    m%d = a%d.numel() // max(k%d, 1)\n", res, res, res);
      mk_buf_printf(b, "    batch%d, sab%d, sam%d, sak%d = 1, 0, k%d, 1\n", res, res, res, res, res);
      if (gi.weight_nk) {
        mk_buf_printf(b, "    n%d = b%d.shape[0]\n", res, res);
        mk_buf_printf(b, "    sbb%d, sbk%d, sbn%d = 0, b%d.stride(1), b%d.stride(0)\n", res, res, res,
                      res, res);
      } else {
        mk_buf_printf(b, "    n%d = b%d.shape[1]\n", res, res);
        mk_buf_printf(b, "    sbb%d, sbk%d, sbn%d = 0, b%d.stride(0), b%d.stride(1)\n", res, res, res,
                      res, res);
      }
      mk_buf_printf(b, "    out%d = tuple(a%d.shape[:-1]) + (n%d,)\n", res, res, res);
    }
    mk_buf_printf(b, "    if k%d != (b%d.shape[%d] if %s else b%d.shape[-2]):\n"
                     "        raise ValueError(\"matrix shapes do not match\")\n",
                  res, res, gi.weight_nk ? 1 : 0, gi.weight_nk ? "True" : "False", res);
    rc = bi_epi_alloc(e, s, out_shape, dev, b, err);
    if (!rc) {
      mk_buf_printf(b, "    if m%d * n%d * batch%d > 0:\n", res, res, res);
      mk_buf_printf(b,
                    "        grid = (triton.cdiv(m%d, %d) * triton.cdiv(n%d, %d) * batch%d,)\n"
                    "        %s[grid](\n            a%d, b%d, ",
                    res, e->cfg->bm, res, e->cfg->bn, res, mk_buf_cstr(&kname), res, res);
      if (gi.bias >= 0) {
        bi_run_name(p, gi.bias, b);
        mk_buf_puts(b, ", ");
      }
      mk_buf_printf(b,
                    "%sm%d, n%d, k%d, sab%d, sam%d, sak%d, sbb%d, sbk%d, sbn%d,\n"
                    "            b1_%d, sab1_%d, sbb1_%d,\n"
                    "            BLOCK_M=%d, BLOCK_N=%d, BLOCK_K=%d, GROUP_M=8,\n"
                    "            IDX64=max(a%d.untyped_storage().nbytes() // 4,\n"
                    "                      b%d.untyped_storage().nbytes() // 4, batch%d * m%d * n%d) >= 2**31,\n"
                    "            num_warps=%d, num_stages=%d)\n",
                    mk_buf_cstr(&call), res, res, res, res, res, res, res, res, res, res, res, res,
                    e->cfg->bm,
                    e->cfg->bn, e->cfg->bk, res, res, res, res, res, e->cfg->gemm_warps, e->cfg->stages);
    }
  }
  mk_buf_free(&kname);
  mk_buf_free(&sig);
  mk_buf_free(&call);
  return rc;
}
