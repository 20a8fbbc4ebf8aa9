/* builtin_internal.h — private interface between the builtin proposer's files.
 *
 * Not a public header: only the builtin_*.c files of engine/propose include it. The builtin
 * generator works in three steps:
 *   1. plan   (builtin_plan.c): split a subkernel into stages — runs of
 *      elementwise ops, view ops, and one "anchor" per heavy op — and decide
 *      which elementwise runs fuse into the anchor next to them (prologue or
 *      epilogue);
 *   2. emit   (builtin_ew.c, _reduce.c, _norm.c, _pool.c, _gemm.c, _torch.c,
 *      chosen per op family by builtin_family.c; builtin_fuse.c carries
 *      elementwise prologues and epilogues into anchors): each stage appends
 *      a Triton kernel (or a delegated torch call) and its launcher lines for
 *      one configuration;
 *   3. assemble (builtin_propose.c): one Python module per variant, with a
 *      `run(...)` that runs the stages in order.
 * Every generated name is derived from value ids and op names, so the same
 * subkernel always gives the same text (deterministic proposals). */
#ifndef MK_BUILTIN_INTERNAL_H
#define MK_BUILTIN_INTERNAL_H

#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_err.h"
#include "mk_ir.h"
#include "mk_propose.h"
#include "mk_pyemit.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

/* ---- arguments of recorded calls (builtin_emit.c) ---------------------- */

/* The argument at position `pos` of node n, or its keyword `kw` (either may be
 * -1 / NULL). For torch.Tensor methods position 0 is `self`. NULL if absent. */
const cJSON *bi_arg(const mk_node *n, int pos, const char *kw);
/* True if the argument is absent or None. */
bool bi_arg_none(const cJSON *a);
/* Numeric value of a Python number argument ({"float": x} included).
 * Returns false for anything else (tensors, None, strings). */
bool bi_arg_number(const cJSON *a, double *out);
bool bi_arg_int(const cJSON *a, long long *out);
bool bi_arg_bool(const cJSON *a, bool def, bool *ok);
/* Tensor value id of an argument {"t": id}, or -1. */
int bi_arg_tensor(const cJSON *a);
/* Integer list from an int or a tuple/list/size of ints. Returns the count
 * (0..max) or -1 when the argument is not of that form. */
int bi_arg_ints(const cJSON *a, long long *out, int max);
/* String argument or NULL. */
const char *bi_arg_str(const cJSON *a);

/* Recorded calls are written as Python by mk_pyemit_node (mk_pyemit.h). */
/* Float literal for Triton code (never an int: "2.0"). */
int bi_tl_float(double d, mk_buf *out);

/* ---- value naming shared by reference and generated modules ------------ */

/* Python parameter name of value `vid` in run(...): graph inputs "x0",
 * parameters/buffers/attributes by their sanitized state name
 * ("conv_weight"), node values "v12". Unique within a graph. */
int bi_value_name(const mk_graph *g, int vid, mk_buf *out);
/* An mk_value_namer over bi_value_name (ctx is the graph). */
int bi_graph_namer(void *ctx, int vid, mk_buf *out);

/* run(...) signature and return line of a subkernel (builtin_ref.c). */
int bi_emit_run_signature(const mk_graph *g, const mk_subkernel *sk, mk_buf *out);
int bi_emit_return(const mk_graph *g, const mk_subkernel *sk, mk_buf *out);
/* Short op name: last dotted component without surrounding underscores and
 * without the in-place "_" ("torch.Tensor.__iadd__" -> "iadd"). */
const char *bi_short(const mk_node *n, char *buf, size_t size);

/* ---- plan (builtin_plan.c) ---------------------------------------------- */

typedef enum bi_kind {
  BI_EW,      /* elementwise run: one Triton kernel over its broadcast shape */
  BI_VIEW,    /* metadata op replayed in the launcher (view/reshape/flatten...) */
  BI_REDUCE,  /* sum/mean/max/min/amax/amin/logsumexp over dims */
  BI_SOFTMAX, /* softmax / log_softmax over one dim */
  BI_NORM,    /* layer/group/instance/batch norm */
  BI_POOL,    /* max/avg pool 1-3d, adaptive pools */
  BI_GEMM,    /* linear / matmul / mm / bmm / addmm */
  BI_TORCH,   /* conv, conv_transpose: delegated to PyTorch (MK_USES_TORCH) */
  BI_REPLAY,  /* a data op no kernel writes (cat, roll, indexing with tensors, zeros_like,
                 torch.tensor): its recorded torch call, declared in MK_USES_TORCH, so the
                 rest of the subkernel still gets kernels (builtin_family.c) */
} bi_kind;

typedef struct bi_stage {
  bi_kind kind;
  int *nodes;
  int nnodes;      /* EW: the run in order; other kinds: exactly one node */
  int pro, epi;    /* indices of EW stages fused before / after, -1 if none */
  int fused_into;  /* EW stage fused into that anchor stage, else -1 */
  /* A norm whose normalised value (after its epilogue) only the next anchor
   * reads, as its input: the norm's stage computes the statistics alone (a
   * scale and shift per sample and channel), and that anchor applies them
   * while it loads, so the full-size normalised tensor never reaches memory.
   * apply_into (on the norm): that anchor; pro_norm (on it): the norm. -1: none.
   * A norm whose value (after its epilogue) only another norm's epilogue reads
   * is applied there too (decide_norm_on_epilogue_load): apply_into names that
   * epilogue's EW stage, and epi_norm (on the reading norm) the applied one. */
  int apply_into, pro_norm, epi_norm;
  /* A reduction with keepdim whose value only the next elementwise run reads,
   * that run over the reduction's input shape (`x / sqrt(mean(x**2, 1, True))`,
   * `x - x.max(-1, keepdim=True)`): the reduction's kernel runs it on the
   * tiles it reduced, the reduced value broadcast from registers, so the
   * reduced tensor is never stored and read back and the run costs no launch
   * (bi_plan_fuse_broadcast_epilogues; on the run: fused_into). -1: none. */
  int bcast_epi;
  int rank;        /* EW: rank of the broadcast shape */
  int64_t shape[MK_IR_MAX_RANK]; /* EW: broadcast shape at capture */
} bi_stage;

typedef struct bi_plan {
  const mk_graph *g;
  const mk_subkernel *sk;
  bi_stage *st;
  int nst;
  int *stage_of;   /* node id -> stage index, -1 outside the subkernel */
  bool *is_input;  /* value id -> is a subkernel input */
  bool *is_output; /* value id -> is a subkernel output */
  unsigned char *layout; /* value id -> the program's layout plan (mk_layout.h) */
  /* Stages [chain_lo, chain_hi] computed by one kernel (builtin_conv.c): a
   * value read only inside them does not escape. -1: none. Set on a copy of
   * the plan while that kernel is written. */
  int chain_lo, chain_hi;
} bi_plan;

/* Builds the plan; MK_EUNSUPPORTED (with reason) for nodes the generator
 * cannot write. Free with bi_plan_free. */
int bi_plan_build(const mk_graph *g, const mk_subkernel *sk, bi_plan *out, mk_errmsg *err);
void bi_plan_free(bi_plan *p);
/* Gives each reduction the plan can (bi_stage.bcast_epi) its broadcast
 * epilogue; true if any. The Triton generator's alone: other generators
 * build their own plans without it. */
bool bi_plan_fuse_broadcast_epilogues(bi_plan *p);
/* Fewest programs a reduction with a broadcast epilogue runs with, at the
 * captured shapes (one per outer index and block of up to 256 kept columns;
 * one per row for a reduction over the last dims), over those of the plan. */
int64_t bi_plan_broadcast_programs(const bi_plan *p);
/* Drops the plan's norms applied on load (apply_into / pro_norm): each such
 * norm is written by its own kernel and stored, as without them. */
void bi_plan_store_norms(bi_plan *p);
/* True if the plan has a norm applied on load. */
bool bi_plan_norm_on_load(const bi_plan *p);
/* True if value v is the value of a norm (or of its epilogue) applied on load
 * by another norm's epilogue (epi_norm): it is never stored, so an in-place op
 * of that epilogue on it writes a fresh tensor, and only where it escapes. */
bool bi_plan_applied_value(const bi_plan *p, int v);
/* Gives back to their own stage the epilogues of norms that write in place
 * (`out += bn(...)`): only the channel-tiled norm stores into its in-place
 * target, so the other configurations are written from this plan. True if
 * it unfused any. */
bool bi_plan_unfuse_inplace_epilogues(bi_plan *p);
/* Value ids produced inside stage s and read outside it (by a later stage
 * not fused with it, or as a subkernel output). Returns the count. */
int bi_stage_stored(const bi_plan *p, int s, int *out, int max);
/* True if value v is read by any node of the subkernel outside stage s (and
 * outside the stages fused with s), or is a subkernel output. */
bool bi_value_escapes(const bi_plan *p, int s, int v);
/* True if value v is a subkernel output that another subkernel reads and
 * the program's layout plan does not make channels_last. Such values leave
 * in the default (contiguous) layout: the reader was verified and timed on
 * the layout the plan gives it, so another layout would make the composed
 * program slower than the sum of its measured parts (H200: the whole program
 * lost to eager on two problems where every part won, before the plan).
 * Values only returned by the program may leave channels_last. */
bool bi_feeds_other_subkernel(const bi_plan *p, int v);
/* True if two captured shapes are the same (rank and every dim). */
bool bi_same_shape(int ra, const int64_t *a, int rb, const int64_t *b);
/* The value id a stage produces as its main result. */
int bi_stage_result(const bi_plan *p, int s);
/* Readable short name of a stage from its op names ("relu_add"). */
int bi_stage_label(const bi_plan *p, int s, mk_buf *out);

/* ---- emission context -------------------------------------------------- */

/* One configuration for every kernel family; each emitter reads what it
 * needs. `index` picks within each family's table. */
typedef struct bi_config {
  int block;        /* elementwise / row block */
  int block_r, block_i; /* reductions: reduced x kept tile */
  int bm, bn, bk;   /* GEMM tile */
  int gemm_warps;   /* GEMM num_warps (warps: the other kernels') */
  int warps, stages;
  const char *precision; /* GEMM: "ieee" or "tf32x3" */
  bool gemm_torch;  /* GEMM via torch (cuBLAS) + Triton epilogue */
  bool channels_last; /* conv in channels_last */
  /* Convolutions as Triton implicit GEMMs with the tail fused (builtin_conv.c)
   * instead of cuDNN calls: tile, warps, stages and the dot's precision. */
  bool conv_igemm;
  int conv_bm, conv_bn, conv_bk, conv_warps, conv_stages;
  const char *conv_precision; /* "tf32", "tf32x3" or "ieee" */
  bool conv_pack;             /* packs taps into K blocks below 16 input channels */
  /* A few-channel stem (bi_conv_stem_ok) from a zero-padded copy of its input
   * with the channels rounded up to 4: one K block per kernel row, whose
   * (tap, channel) run is contiguous, no bounds per tap (builtin_conv.c). */
  bool conv_stem;
  int conv_round;             /* inputs rounded to TF32 as the reference does:
                                 0 no, 1 truncation, 2 to nearest */
  int norm_split;   /* norms: programs per row (0: one program loops over its row;
                       -1: several whole rows per program in registers) */
  /* A norm the plan lets its pool apply while loading (apply_into) is
   * normalised and stored by its own kernel instead, for the pool to read:
   * the verifier picks between the two (builtin_propose.c). */
  bool norm_stored;
  /* Batch norms (training) of channels_last values on [pixels x channels]
   * tiles (builtin_norm.c, "_ctile"); other norms of the module take the
   * split-rows layout (norm_split = 32). */
  bool norm_ctile;
} bi_config;

typedef struct bi_emit {
  const bi_plan *p;
  const bi_config *cfg;
  mk_buf *kernels;  /* @triton.jit functions */
  mk_buf *body;     /* lines of run(...), indented 4 */
  mk_buf *uses_torch; /* "'conv2d', " list for MK_USES_TORCH */
  bool need_bcast;  /* the _bcast_strides helper is used */
  bool need_pool;   /* the _pool_out_size helper is used */
  int kcount;       /* kernels emitted so far (unique names) */
  /* Values this module makes in channels_last (conv outputs, elementwise
   * stages run in that memory order): readers use their strides or run in
   * their order (bi_ew_channels_last). */
  int cl_values[32];
  int ncl;
  /* Convolution outputs computed without their bias, which the one
   * elementwise stage reading them adds while loading (per channel). */
  struct {
    int value, bias;
  } folded[8];
  int nfolded;
  bool need_channel_bias; /* the _mk_add_channel_bias helper is used */
  bool need_const;        /* a replayed constant tensor is made once (mk_pyemit_constant_helper) */
  bool need_cl_helpers;   /* _mk_cl_view and _mk_cl_order are used */
  bool need_gn_affine;    /* _mk_gn_affine is used (builtin_conv.c) */
  bool need_bn_affine;    /* _mk_bn_affine is used (builtin_conv.c) */
  bool need_tf32_round;   /* _mk_tf32_round is used (builtin_conv.c, "tf32p") */
  /* The anchor loading through a norm applied on load (pro_norm) names the
   * (sample * C + channel) index of the element it loads, the same for every
   * tap of one output (a pool: its "t"), so the norm's scale and shift are
   * loaded once per output (bi_norm_load_once); bi_norm_load requires it. */
  const char *nc_index;
  /* Last stage an implicit-GEMM convolution computed with its chain; the
   * stages up to it are not emitted again (-1: none). */
  int chain_end;
  /* run(...) parameters the module wants in channels_last (conv weights):
   * listed in MK_CHANNELS_LAST so ModelNew converts them once. */
  mk_buf *cl_params;
  /* Values of the subkernel's inputs the module reads in any memory layout
   * (it makes its own copy in the layout it reads): listed by run()
   * position in MK_ANY_LAYOUT_INPUTS, so ModelNew does not convert them
   * first. */
  int any_layout[8];
  int nany_layout;
  /* Norm stages written on channel tiles (cfg->norm_ctile), and why the
   * first one that could not be was declined ("" if none). */
  int ctile_used;
  char ctile_why[320];
  /* bi_epi_alloc / bi_ew_alloc_lines allocate 4-d/5-d outputs channels_last
   * (the anchor stores them in that memory order). */
  bool alloc_cl;
} bi_emit;

/* True if value v is one this module makes in channels_last. */
bool bi_is_cl_value(const bi_emit *e, int v);
/* Records v as made in channels_last (no-op when the table is full: readers
 * then take the general strided path, which is correct for any layout). */
void bi_add_cl_value(bi_emit *e, int v);
/* The bias value folded into the loads of v, or -1. */
int bi_folded_bias(const bi_emit *e, int v);
/* True if EW stage s runs in channels_last memory order: it is not fused
 * into an anchor, has rank 4 or 5, reads a full-shape operand this module
 * made in channels_last, and writes in place only into such operands. Its
 * outputs are then allocated channels_last and every other operand is read
 * through its strides. */
bool bi_ew_channels_last(const bi_emit *e, int s);

/* The Python name a value has inside run(...). */
int bi_run_name(const bi_plan *p, int vid, mk_buf *out);

/* Elementwise (builtin_ew.c). */
typedef struct bi_ew_bind {
  int value;          /* value computed in registers by the enclosing kernel, or -1 */
  const char *var;    /* its variable name */
  const char *store_offs; /* offsets the stage's stores use, when not its loads' (NULL) */
  /* Offsets in channels_last memory order of the same elements (NULL: none):
   * leaves that are channels_last values of this module with the stage's
   * shape are passed dense in that layout (a no-op for them) and loaded
   * there, instead of through the stride of every dim. */
  const char *cl_offs;
  /* A second value the enclosing kernel computes in registers: a norm's value
   * applied while loading (epi_norm), which the stage reads as a leaf. */
  struct {
    bool on;
    int value;
    const char *var;
  } applied;
} bi_ew_bind;
/* Appends to `sig` the kernel parameters the EW stage needs (leaf pointers,
 * output pointers, dims, strides, all prefixed by `pfx`) and to `call` the
 * launcher expressions passing them. `shape_var` is the launcher's variable
 * holding the stage's runtime shape. */
int bi_ew_params(bi_emit *e, int s, const char *pfx, const char *shape_var, bi_ew_bind bind,
                 mk_buf *sig, mk_buf *call, mk_errmsg *err);
/* Appends kernel code (at `indent`) computing stage s at flat offsets `offs`
 * (mask `mask`) of its broadcast shape; stores the values that escape when
 * `store` is true. The result is in variable "v<id>" (bi_stage_result). */
int bi_ew_body(bi_emit *e, int s, const char *pfx, const char *offs, const char *mask,
               bi_ew_bind bind, bool store, int indent, mk_buf *out, mk_errmsg *err);
/* True if the epilogue stage s, computed on [pixels x channels] tiles of the
 * value `bound` (builtin_norm.c's channel tiles), reads only numbers, 0-d or
 * per-channel ([C, 1, 1] / [1, C, 1, 1]) tensors and channels_last values
 * of this module with its shape, and writes in place into none of them
 * (`applied`, a value the tile computes by applying a norm while loading, or
 * -1, counts as computed: it may be written in place); else false with the
 * reason in `why`. */
bool bi_ew_tile_leaves_ok(const bi_emit *e, int s, int bound, int applied, char *why, size_t why_size);
/* Launcher lines computing the EW stage's runtime shape into `shape_var`
 * (the bound value's shape given as the expression `bind_shape`). */
int bi_ew_shape_lines(bi_emit *e, int s, const char *shape_var, bi_ew_bind bind,
                      const char *bind_shape, mk_buf *out, mk_errmsg *err);
/* Launcher lines allocating the escaping outputs of stage s with shape
 * `shape_var` (in-place outputs alias their mutated input). */
int bi_ew_alloc_lines(bi_emit *e, int s, const char *shape_var, const char *like,
                      mk_buf *out, mk_errmsg *err);
/* Launcher expression for the device of a tensor EW stage s reads. */
int bi_ew_device_of(bi_emit *e, int s, bi_ew_bind bind, mk_buf *out, mk_errmsg *err);
/* torch's name of a dtype ("float32"), NULL for one the IR does not know. */
const char *bi_torch_dtype(mk_dtype d);
/* A whole standalone EW stage: kernel + launcher. */
int bi_emit_ew_stage(bi_emit *e, int s, mk_errmsg *err);
/* Whether op short name is an elementwise op the generator can write. */
bool bi_ew_supported(const mk_node *n, mk_errmsg *err);

/* Anchors (one file each). */
int bi_emit_reduce_stage(bi_emit *e, int s, mk_errmsg *err);  /* REDUCE and SOFTMAX */
int bi_emit_norm_stage(bi_emit *e, int s, mk_errmsg *err);
int bi_emit_pool_stage(bi_emit *e, int s, mk_errmsg *err);
/* Python source of the launcher helper _pool_out_size (torch's formula). */
const char *bi_pool_helper(void);
int bi_emit_gemm_stage(bi_emit *e, int s, mk_errmsg *err);
int bi_emit_torch_stage(bi_emit *e, int s, mk_errmsg *err);
/* A convolution as a Triton implicit GEMM with the elementwise stage, channel
 * reduction or pool (and its epilogue) after it in one kernel; sets
 * e->chain_end (builtin_conv.c). */
int bi_emit_conv_igemm(bi_emit *e, int s, mk_errmsg *err);
/* Names parameter w for MK_CHANNELS_LAST: ModelNew keeps it channels_last,
 * so a per-call conversion to that layout is a no-op (builtin_torch.c). */
void bi_want_cl_param(bi_emit *e, int w);
/* Adds op `name` (a short name) to the module's MK_USES_TORCH, once. */
int bi_declare_torch_op(bi_emit *e, const char *name);
/* True if node n is a data op the generator replays as its recorded torch
 * call (BI_REPLAY): data movement or a factory, not random, not in place,
 * every argument recorded exactly (builtin_family.c). */
bool bi_is_replayed(const mk_node *n);
/* A group norm or batch norm node as the norm emitter reads it
 * (builtin_norm.c): false for any other node or arguments it cannot write. */
typedef struct bi_gn_info {
  bool batch;           /* batch_norm (else group_norm) */
  bool batch_stats;     /* batch_norm: statistics of the batch (training), else the running ones */
  int in, weight, bias; /* value ids, -1 if absent */
  int rmean, rvar;      /* batch_norm's running statistics, -1 if absent */
  long long groups;     /* group_norm */
  double eps, momentum;
} bi_gn_info;
bool bi_group_norm_info(const mk_graph *g, const mk_node *n, bi_gn_info *out);
/* Any norm node as the norm emitter reads it (builtin_norm.c), for the CUDA
 * generator (builtin_cuda_norm.c): the same checks and reasons as the Triton
 * plan, so both backends accept the same nodes. */
typedef enum bi_norm_kind { BI_NK_LAYER, BI_NK_RMS, BI_NK_GROUP, BI_NK_INSTANCE, BI_NK_BATCH } bi_norm_kind;
typedef struct bi_norm_info {
  bi_norm_kind kind;
  int in, weight, bias, rmean, rvar; /* value ids, -1 if absent */
  double eps, momentum;
  bool batch_stats; /* statistics from the input (else the running ones) */
  bool l2;          /* F.normalize(p=2): rstd = 1 / max(||row||_2, eps) */
  long long groups; /* group_norm */
  int nnorm;        /* layer / rms: normalized trailing dims */
  int rank;         /* input rank */
} bi_norm_info;
int bi_norm_parse(const mk_graph *g, const mk_node *n, bi_norm_info *out, mk_errmsg *err);
/* True if the implicit GEMM of conv stage s is likely to beat cuDNN: its
 * chain keeps a full-size tensor from memory (a reduction, pool or norm), or
 * the GEMM's reduction dim (input channels x taps) is short. Otherwise its
 * variants are proposed after the cuDNN ones. */
bool bi_conv_igemm_promising(bi_plan *p, int s);
/* True if stage s is a convolution whose implicit GEMM carries every later
 * stage of the plan (and there is one): the whole subkernel is one kernel
 * (plus a statistics pass for a norm), nothing in between reaches memory. */
bool bi_conv_chain_covers(bi_plan *p, int s);
/* True if node n is a convolution bi_emit_conv_igemm computes. */
/* True if value v, made by stages [lo, hi] of the module, may be left in
 * channels_last: it feeds no other subkernel in the default layout (it is a
 * planned channels_last value or returned only), and every other stage of the
 * module reading it reads strides (elementwise runs, anchors loading it that
 * walk channels_last well: not a reduction over the width or the pixels) or,
 * under configuration cfg (NULL: none), is a convolution handed to cuDNN in
 * channels_last, which wants its input so. */
bool bi_cl_output_ok(const bi_plan *p, const bi_config *cfg, int lo, int hi, int v);
/* True if n is a convolution the implicit GEMM computes over fewer input
 * channels (at capture) than a dot's K (16): its packed variant applies. */
bool bi_conv_narrow(const mk_graph *g, const mk_node *n);
/* True if node n is a 2-d convolution the stem loop computes: groups 1, no
 * dilation, not transposed, few input channels (mk_layout_few_channels) whose
 * kernel row (width times the channels rounded up to 4) fits one K block of 64. */
bool bi_conv_stem_ok(const mk_graph *g, const mk_node *n);
bool bi_conv_igemm_supported(const mk_graph *g, const mk_node *n);
/* A reduction or softmax node as the reduce emitter reads it. */
typedef struct bi_reduce_info {
  char op[64];   /* sum, mean, max, min, logsumexp, softmax, log_softmax, norm1, norm2,
                    argmax, argmin, cumsum, cumprod, tril, triu, mse_loss,
                    l1_loss, smooth_l1_loss, huber_loss, kl_div */
  int lo, hi;    /* reduced dims (inclusive), in the input's rank */
  bool keepdim;
  int rank;      /* input rank */
  long long diag; /* tril / triu: the diagonal */
  /* losses (mse_loss, l1_loss, smooth_l1_loss, huber_loss, kl_div) over every
   * element of input and target: */
  int target;     /* the target's value id, or -1 */
  double param;   /* smooth_l1's beta, huber's delta; kl_div: 1 when log_target */
  int divide;     /* 0: sum, 1: mean over the elements, 2: batchmean (over dim 0) */
} bi_reduce_info;
int bi_reduce_parse(const mk_graph *g, const mk_node *n, bi_reduce_info *ri, mk_errmsg *err);
/* A pooling node as the pool emitter reads it. */
typedef struct bi_pool_info {
  bool is_max, adaptive;
  int nd; /* spatial dims, 1..3 */
  long long k[3], st[3], pad[3], dil[3];
  long long osz[3]; /* adaptive output size, -1 = keep the input size */
  bool ceil_mode, count_include_pad;
  long long divisor; /* divisor_override, 0 if none */
  int in, rank;
} bi_pool_info;
int bi_pool_parse(const mk_graph *g, const mk_node *n, bi_pool_info *pi, mk_errmsg *err);
/* Checks (at plan time) whether an anchor node is one this generator writes. */
int bi_reduce_check(const mk_graph *g, const mk_node *n, mk_errmsg *err);
int bi_norm_check(const mk_graph *g, const mk_node *n, mk_errmsg *err);
int bi_pool_check(const mk_graph *g, const mk_node *n, mk_errmsg *err);
int bi_gemm_check(const mk_graph *g, const mk_node *n, mk_errmsg *err);
/* A GEMM node's operands as the Triton emitter reads them (builtin_gemm.c);
 * the CUDA GEMM (builtin_cuda_gemm.c) reads them the same way. */
typedef struct bi_gemm_info {
  int a, b, bias;  /* value ids (bias -1 if none) */
  bool weight_nk;  /* b is [N, K] (linear) */
  int batch_dims;  /* 0; 1: bmm / 3-d matmul; 2: 4-d matmul (batch, heads) */
  int a_rank;
  /* A two-operand einsum as a bmm: A's dims permuted to [batch, M, K] and B's
   * to [batch, K, N] (pa / pb, each group's dims merged), the output
   * [batch, M, N] in the equation's own order of those letters. */
  bool einsum;
  int pa[MK_IR_MAX_RANK], pb[MK_IR_MAX_RANK];
  int nbat, nm, nk, nn; /* letters of each kind */
} bi_gemm_info;
/* MK_EUNSUPPORTED with the reason for a GEMM the emitters do not write. */
int bi_gemm_parse(const mk_graph *g, const mk_node *n, bi_gemm_info *gi, mk_errmsg *err);
/* Norm work layouts that apply to the plan's norm stages: bit 0 row loop
 * (always), bit 1 split rows (input statistics, rows of >= 4096 elements at
 * capture), bit 2 rows in registers (contiguous rows of <= 8192), bit 3
 * channel tiles (a 4-d/5-d batch norm with batch statistics and no
 * prologue: whether its input is a channels_last value is known only while
 * a configuration is written, which declines the layout otherwise). */
int bi_norm_modes(const bi_plan *p);
/* The annotation of a tensor's dim d in a kernel's signature: ": tl.constexpr"
 * for every dim but the first (the batch), so divisions by dims compile to a
 * multiply and a shift (builtin_ew.c, bi_ew_params); "" for d == 0. */
static inline const char *bi_dim_constexpr(int d) { return d > 0 ? ": tl.constexpr" : ""; }
/* True if every norm stage of the plan has rows short enough at capture
 * (<= 256 elements) that the rows-in-registers layout should be tried
 * before the row loop, whose one program per row would leave most of its
 * block's lanes idle (a LayerNorm over a conv output's last dim). */
bool bi_norm_short_rows(const bi_plan *p);
/* True if v is a fresh version of a running statistic output by norm node n. */
bool bi_norm_state_output(const mk_node *n, int v);
/* True if norm node n can be applied by another kernel while it loads: its
 * affine map depends on the sample and channel alone (group, instance and
 * batch norms over spatial dims). */
bool bi_norm_applies_on_load(const mk_graph *g, const mk_node *n);
/* True if norm node n is a batch norm with batch statistics over a 4-d/5-d
 * tensor: one the channel tiles can write (builtin_norm.c, "_ctile"). */
bool bi_norm_on_channel_tiles(const mk_graph *g, const mk_node *n);
/* Kernel parameters and loading lines of a norm applied while its reader
 * loads (stage `norm`, whose stage `reader` has pro_norm == norm): the norm's
 * input (or prologue), its scale and shift, its epilogue. Used through
 * bi_pro_params / bi_pro_load / bi_anchor_input_shape. */
int bi_norm_load_params(bi_emit *e, int norm, const char *in_shape_var, mk_buf *sig, mk_buf *call,
                        mk_errmsg *err);
int bi_norm_load(bi_emit *e, int norm, const char *var, const char *offs, const char *mask,
                 const char *other, int indent, mk_buf *out, mk_errmsg *err);
/* With e->nc_index set: the lines loading the norm's scale and shift of the
 * current output once, before its taps (mask: the output's). */
int bi_norm_load_once(bi_emit *e, const char *mask, int indent, mk_buf *out);

/* ---- fused prologues and epilogues (builtin_fuse.c) ---------------------- */

/* Shared epilogue helper for anchors: after computing the anchor's value in
 * variable `var` at flat output offsets `offs` / `mask`, apply the fused
 * epilogue (if any) and store everything that escapes. Launcher side: fills
 * `sig`/`call` with the epilogue's parameters. Two calls: params then body. */
int bi_epi_params(bi_emit *e, int s, const char *out_shape_var, mk_buf *sig, mk_buf *call,
                  mk_errmsg *err);
int bi_epi_body(bi_emit *e, int s, const char *var, const char *offs, const char *mask,
                int indent, mk_buf *out, mk_errmsg *err);
/* Launcher lines before the anchor's launch: allocate the anchor's output
 * (`out_shape_var` must be set) and the epilogue's outputs. */
int bi_epi_alloc(bi_emit *e, int s, const char *out_shape_var, const char *like, mk_buf *out,
                 mk_errmsg *err);
/* Prologue: parameters and in-kernel computation of the anchor's input. When
 * the anchor has no prologue these load the input tensor `in_vid`. The value
 * is left in variable `var`. */
int bi_pro_params(bi_emit *e, int s, int in_vid, const char *in_shape_var, mk_buf *sig,
                  mk_buf *call, mk_errmsg *err);
int bi_pro_load(bi_emit *e, int s, int in_vid, const char *var, const char *offs,
                const char *mask, const char *other, int indent, mk_buf *out, mk_errmsg *err);
/* The direct load of input in_vid (no prologue) without the conv bias folded
 * into it: the caller adds the bias another way (a norm applied on load
 * folds it into its shift). */
int bi_input_load_unbiased(bi_emit *e, int in_vid, const char *var, const char *offs,
                           const char *mask, const char *other, int indent, mk_buf *out);
/* The launcher expression for the anchor's input tensor (materialised by an
 * earlier stage or a subkernel input), used for shapes: "v12". When the input
 * comes from a fused prologue, the prologue's broadcast shape variable. */
int bi_anchor_input_shape(bi_emit *e, int s, int in_vid, const char *shape_var, mk_buf *out,
                          mk_errmsg *err);

/* ---- op families (builtin_family.c) --------------------------------------- */

/* One family of ops the generator writes: its stage kind, the short op names
 * it covers (or a matcher where names are not enough), the plan-time check
 * of a node (NULL: always writable) and the emitter of its stage. */
typedef struct bi_family {
  bi_kind kind;
  const char *name;
  const char *const *ops;                                /* NULL-terminated, or NULL */
  bool (*match)(const mk_node *n, const char *short_op); /* instead of ops, or NULL */
  int (*check)(const mk_graph *g, const mk_node *n, mk_errmsg *err);
  int (*emit)(bi_emit *e, int s, mk_errmsg *err);
} bi_family;

/* The family of node n (the first that matches, elementwise first), or NULL. */
const bi_family *bi_family_of_node(const mk_node *n);
/* The family that emits stages of `kind`. */
const bi_family *bi_family_of_kind(bi_kind kind);

/* Kernel name for stage s: "_k<count>_<label>_kernel". */
int bi_kernel_name(bi_emit *e, int s, const char *what, mk_buf *out);

/* Comment line naming the ops a stage replaces (with source lines). */
int bi_stage_comment(const bi_plan *p, int s, int indent, mk_buf *out);

#endif
