/* builtin_cuda.h — private interface of the builtin proposer's CUDA C++ files.
 *
 * The CUDA generator reads the same stage plan as the Triton emitters
 * (bi_plan, builtin_plan.c) and writes, per configuration, one candidate
 * module (docs/candidates.md, "CUDA C++ candidates"): the CUDA text in
 * MK_CUDA_SOURCE, the kernels' parameter signatures in MK_CUDA_KERNELS, and
 * a `run(...)` that launches them through `_mk_cuda`, the launcher the
 * worker binds to the cubin the engine compiled (engine/backend).
 *
 * Files: builtin_cuda_ew.c (elementwise runs: expressions, broadcasting and
 * strided leaves), builtin_cuda_reduce.c (reductions and softmax over a run
 * of dims), builtin_cuda_norm.c (layer / RMS / group / instance / batch
 * norms, F.normalize), builtin_cuda_pool.c (max / avg / adaptive pools 1-3d),
 * builtin_cuda_gemm.c (linear / matmul / mm / bmm / addmm on tensor cores,
 * 3xTF32 or TF32, with bias and the following elementwise run fused),
 * builtin_cuda_propose.c (stages in order, the module, variants).
 * Values are float32 (comparison results bool); other dtypes are refused
 * with a reason. Of the Triton plan's fusion decisions only a GEMM's epilogue
 * is kept: every other EW run is its own kernel. */
#ifndef MK_BUILTIN_CUDA_H
#define MK_BUILTIN_CUDA_H

#include "builtin_internal.h"

/* A GEMM configuration (builtin_cuda_gemm.c): block tile BM x BN, BK deep;
 * warp tile WM x WN; split: 3xTF32 (float32-accurate) rather than plain TF32. */
typedef struct bc_gemm_cfg {
  int bm, bn, bk, wm, wn;
  bool split;
} bc_gemm_cfg;

typedef struct bc_emit {
  const bi_plan *p;
  int threads;        /* threads per block of every kernel (GEMMs: their own) */
  const bc_gemm_cfg *gemm; /* GEMM tiles and precision; NULL: no GEMM configuration */
  bool gemm_core;     /* the GEMM device helpers are in the CUDA text already */
  int split;          /* norms with input statistics: blocks per row (0: one block per row) */
  bool need_pool;     /* the launcher helper _pool_out_size is used */
  mk_buf *cuda;       /* MK_CUDA_SOURCE text */
  mk_buf *sigs;       /* MK_CUDA_KERNELS entries: "name": "signature", */
  mk_buf *body;       /* lines of run(...), indented 4 */
  mk_buf *uses_torch; /* "'conv2d', " entries of MK_USES_TORCH */
  int kcount;         /* kernels so far (unique names) */
  /* mkevolve export (mk_builtin_cuda_cpp_for): run(...) also as C++, or NULL. */
  mk_buf *cpp;            /* C++ statements, values named v<id> */
  const char *cpp_ns;     /* namespace of the kernels' host launch functions */
  mk_builtin_cuda_node_fn cpp_node; /* a torch / view stage's recorded call as C++ */
  void *cpp_node_ctx;
  /* The launch plan (builtin_cuda_plan.c): its steps so far, or NULL when
   * not written; plan_gap says why a stage has none (then there is no plan). */
  cJSON *plan;
  char plan_gap[256];
} bc_emit;

/* ---- the launch plan (builtin_cuda_plan.c; MK_CUDA_PLAN) ---------------------- */

/* True while the plan is being written (no stage without a plan form yet). */
bool bc_plan_on(const bc_emit *e);
/* A stage has no plan form: the module gets no plan; the first reason stays. */
void bc_plan_gap(bc_emit *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends step {"op", "out", "args": []}; NULL (and nothing) when the plan is off. */
cJSON *bc_plan_step(bc_emit *e, const char *op, const char *out);
void bc_plan_arg_name(cJSON *step, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void bc_plan_arg_int(cJSON *step, long long v);
void bc_plan_arg(cJSON *step, cJSON *v); /* takes v */
cJSON *bc_plan_name(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
cJSON *bc_plan_item(const char *list, int d);   /* {"item": [list, d]} */
cJSON *bc_plan_tagged(const char *tag, cJSON *v); /* {tag: v}, takes v */
/* A launch step (grid: one INT, taken); its kernel arguments go to its "args". */
cJSON *bc_plan_launch(bc_emit *e, const char *kernel, const char *when, cJSON *grid, int block);
/* A torch or view stage's node in ATen form, or the plan's gap with the reason. */
int bc_plan_node(bc_emit *e, const mk_node *n);
/* `MK_CUDA_PLAN = r"""{json}"""` for the module (nothing when the plan has a gap). */
int bc_plan_module(const bc_emit *e, const mk_subkernel *sk, const char *sigs, mk_buf *out);

/* Parameter kinds of MK_CUDA_KERNELS signatures (one character each). */
#define BC_ARG_F32 'f'  /* float32 tensor (pointer) */
#define BC_ARG_BOOL 'b' /* bool tensor (pointer) */
#define BC_ARG_I64 'q'  /* Python int -> long long */

/* The C type of a value the generator can hold in a register, or NULL. */
const char *bc_ctype(mk_dtype d);
/* Appends a float literal in CUDA syntax ("0.5f", infinities and NaN as bit casts). */
int bc_float(double d, mk_buf *out);
/* Starts a kernel: name "_k<count>_<what>_<label>", registers its signature. */
int bc_kernel_name(bc_emit *e, int s, const char *what, mk_buf *out);
int bc_register_kernel(bc_emit *e, const char *name, const char *sig);

int bc_emit_ew_stage(bc_emit *e, int s, mk_errmsg *err);
int bc_emit_reduce_stage(bc_emit *e, int s, mk_errmsg *err); /* REDUCE and SOFTMAX */
int bc_emit_norm_stage(bc_emit *e, int s, mk_errmsg *err);
int bc_emit_pool_stage(bc_emit *e, int s, mk_errmsg *err);
int bc_emit_gemm_stage(bc_emit *e, int s, mk_errmsg *err); /* with its epilogue stage, if any */
/* True if the plan has a GEMM stage: the GEMM configurations apply, no other. */
bool bc_plan_has_gemm(const bi_plan *p);

/* An elementwise stage s fused as the epilogue of another stage's kernel,
 * whose value `bound` is in a register (builtin_cuda_ew.c). The kernel's
 * element at flat offset `offs` of the stage's contiguous shape.
 * Parameters (each followed by ", ") and their launcher arguments, given the
 * launcher's shape tuple `shape`: */
int bc_epi_params(bc_emit *e, int s, int bound, const char *shape, mk_buf *sig, mk_buf *types, mk_buf *call,
                  mk_errmsg *err);
/* run(...) lines allocating the stage's stored values (`like`: a device). */
int bc_epi_alloc(bc_emit *e, int s, const char *shape, const char *like, mk_buf *py);
/* The kernel lines computing and storing the stage from register `var`. */
int bc_epi_body(bc_emit *e, int s, int bound, const char *var, int ind, mk_buf *k, mk_errmsg *err);
/* The C++ launcher's lines (allocations, leaves) into prep and its
 * arguments (each after ", ") into args; `shape` a std::vector<int64_t>,
 * `like` a tensor on the device. */
int bc_epi_cpp(bc_emit *e, int s, int bound, int res, const char *shape, const char *like, mk_buf *prep,
               mk_buf *args, mk_errmsg *err);

/* The same for the launch plan: the steps before the anchor's launch
 * (allocations, checked leaves, broadcast strides; temporaries named
 * ea<res>_<i>, est<res>_<i>), then the launch step's arguments. */
int bc_epi_plan_prep(bc_emit *e, int s, int bound, int res, const char *shape, const char *like, mk_errmsg *err);
int bc_epi_plan_args(bc_emit *e, int s, int bound, int res, const char *shape, cJSON *launch, mk_errmsg *err);

/* Shortest row (at capture) the split-rows norm variant is proposed for:
 * shorter rows leave most of a row's blocks without work (builtin_norm.c's rule). */
#define BC_NORM_SPLIT_ROW 4096
/* Blocks per row of the split-rows variant (`_split32`, as Triton's). */
#define BC_NORM_SPLIT 32
/* True if the plan has a norm with input statistics whose rows are long
 * enough for the split-rows variant. */
bool bc_norm_splits(const bi_plan *p);
/* `// replaces: op (line N), ...` before a stage's C++ statements. */
void bc_cpp_comment(const bc_emit *e, int s);

/* Device helpers every module's CUDA text starts with. */
const char *bc_prelude(void);
/* Python helpers of the launcher (_mk_full, _mk_inplace, _mk_bstrides). */
const char *bc_py_helpers(void);

#endif
