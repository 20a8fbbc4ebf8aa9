/* mk_propose.h — the proposer seam: the interface the search calls
 * (mk_proposer), implemented by the builtin generator (here) and the LLM
 * agents (engine/llm), which therefore sit beside the search, not above it.
 *
 * A proposer turns a subkernel (plus, optionally, a parent candidate and its
 * verification report) into candidate implementations. A candidate is the
 * text of a Python module (docs/candidates.md) defining `run(*inputs)`,
 * which takes the subkernel's input values in order and returns its output
 * values (one tensor, or a tuple in order). Proposers never run code; the
 * verifier decides what is correct and fast.
 *
 * Ownership: candidate lists own their strings; free with
 * mk_candidate_list_free. */
#ifndef MK_PROPOSE_H
#define MK_PROPOSE_H

#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_err.h"
#include "mk_ir.h"

#include <stdbool.h>

typedef enum mk_propose_mode {
  MK_PROPOSE_NEW,      /* first versions of a subkernel */
  MK_PROPOSE_REPAIR,   /* fix `parent` given `report` (compile error, mismatch) */
  MK_PROPOSE_OPTIMISE, /* make verified `parent` faster given its timing */
} mk_propose_mode;

/* Which kernel language the builtin generator writes (`--backend`):
 * Triton only, CUDA C++ only (the PyTorch reference where the CUDA
 * generator has no kernel), or both competing in the same beam. The
 * default lives in mk_search_config_defaults. */
typedef enum mk_kernel_backend {
  MK_KBACKEND_TRITON,
  MK_KBACKEND_CUDA,
  MK_KBACKEND_AUTO,
} mk_kernel_backend;

/* "triton", "cuda", "auto". */
const char *mk_kernel_backend_name(mk_kernel_backend b);
/* Parses one of the names above; MK_EINVAL (out untouched) otherwise. */
int mk_kernel_backend_parse(const char *name, mk_kernel_backend *out);

typedef struct mk_candidate {
  char *name;    /* short variant name: "triton_ew_b1024_w4" */
  char *source;  /* Python module text defining run(...) */
  char *origin;  /* "builtin", "llm:<model>", "reference" */
  char *notes;   /* one line: what this variant does differently (may be NULL) */
  /* What proposing it spent, in the proposer's own unit (the LLM
   * proposer's: tokens; the builtin's: 0). Opaque to the search, which only
   * adds it up against its budget (mk_search_config.max_cost). */
  double cost;
} mk_candidate;

typedef struct mk_candidate_list {
  mk_candidate *items;
  int n, cap;
} mk_candidate_list;

typedef struct mk_propose_request {
  const mk_graph *graph;
  const mk_subkernel *subkernel;
  mk_propose_mode mode;
  const mk_candidate *parent; /* REPAIR / OPTIMISE, else NULL */
  const char *report;         /* verifier's JSON report on parent, or NULL */
  int max_candidates;         /* upper bound on candidates returned */
  unsigned long long seed;    /* for deterministic choices */
  const char *device;         /* "cpu" or a GPU name: proposers may tune to it */
  mk_kernel_backend backend;  /* the builtin generator's language(s); LLM proposers write Triton */
} mk_propose_request;

/* The verifier's word on a candidate, as much as a proposer learns from it
 * (the LLM's Optimiser ranks its variants by it). Whoever holds the full
 * verdict (the session) fills it. */
typedef struct mk_propose_verdict {
  bool verified;
  double time_ms;        /* median; < 0 when untimed (CPU) */
  double ref_eager_ms;   /* < 0 or 0 when unknown */
  double ref_compile_ms; /* < 0 or 0 when unknown */
  int trials_passed, trials;
} mk_propose_verdict;

typedef void (*mk_propose_cb)(void *data, int status, mk_candidate_list *cands, const char *err);

/* A proposer as the search sees it: fills a candidate list (ownership passes
 * to the callback's receiver) and calls cb exactly once, or returns < 0. */
typedef struct mk_proposer {
  void *self;
  const char *name;
  int (*propose)(void *self, const mk_propose_request *req, mk_propose_cb cb, void *data);
  /* Optional (NULL: no opinion). True if this proposer writes subkernel sk
   * as one fused kernel whose intermediate values never reach memory. The
   * search merges neighbours whose union it fuses before its beams start
   * (docs/design.md, "Fusion across layer boundaries"): waiting for the
   * merge phase leaves it no time on heavy programs. Synchronous, cheap.
   * `backend`: the kernel language(s) the search asks for. */
  bool (*fuses)(void *self, const mk_graph *g, const mk_subkernel *sk, mk_kernel_backend backend);
} mk_proposer;

/* The builtin generator wrapped as an mk_proposer (synchronous underneath:
 * the callback runs before propose returns). */
mk_proposer mk_builtin_proposer(void);

/* Builtin generator (engine/propose/builtin_*.c): synchronous, no network.
 * Appends 0..max_candidates candidates; returns MK_EUNSUPPORTED (with a
 * reason) when it cannot write any kernel for this subkernel. */
int mk_builtin_propose(const mk_propose_request *req, mk_candidate_list *out, mk_errmsg *err);
/* The builtin generator's mk_proposer.fuses: a convolution (implicit GEMM)
 * whose kernel carries every later stage of the subkernel (its elementwise
 * stages, a group or batch norm, a channel reduction or pool, and what
 * follows that on the tile); or a subkernel ending in a pool that applies
 * the one norm before it while loading (the normalised tensor never stored),
 * with no other norm or pool; or one ending in a batch norm whose epilogue
 * applies the one other norm while loading (ShuffleNet's `out += shortcut`);
 * or one GEMM whose epilogue carries every other stage that computes
 * (attention's scale, mask and activation after q @ k^T); or reductions
 * whose kernels carry every other stage, the run after each broadcasting
 * its value back over its input (an RMS norm written out). */
bool mk_builtin_fuses(const mk_graph *g, const mk_subkernel *sk);

/* Builtin CUDA C++ generator (engine/propose/builtin_cuda_*.c): the same
 * stage plan written as CUDA C++ candidates (docs/candidates.md, "CUDA C++
 * candidates"): elementwise runs, reductions and softmax; views and
 * convolutions as torch calls. MK_EUNSUPPORTED with a reason for other
 * stages and on a CPU device (CUDA candidates need a GPU). */
int mk_builtin_cuda_propose(const mk_propose_request *req, mk_candidate_list *out, mk_errmsg *err);

/* A builtin CUDA C++ candidate again, for `mkevolve export` (docs/export.md):
 * the same kernels, and its run(...) written as C++ statements over ATen
 * instead of Python, so the export runs the kernels the ModelNew verified
 * without parsing Python. `variant` is the candidate's name ("cuda_t256");
 * values are named v<id> (the exporter's names) and the statements declare
 * `at::Tensor v<id>` for every value the subkernel makes that leaves a
 * kernel. Torch and view stages are written by `node` (the exporter's ATen
 * spelling of one recorded call). Kernel launches call
 * `<kernel_ns>::<kernel>(grid, block, stream, args...)`, host functions the
 * caller writes from `kernels`, through helpers the caller defines:
 * mk_broadcast, mk_full, mk_inplace, mk_bstrides, mk_prod, mk_reduced_shape,
 * mk_ptr<T>, mk_stream, mk_launch (engine/export/export_cuda.c). */
typedef int (*mk_builtin_cuda_node_fn)(void *ctx, const mk_graph *g, const mk_node *n, mk_buf *out,
                                       mk_errmsg *err);
typedef struct mk_builtin_cuda_cpp {
  mk_buf cuda;     /* MK_CUDA_SOURCE of the candidate, byte for byte */
  mk_buf kernels;  /* one line per kernel: "<name> <sig>\n", sig one of f b q per parameter */
  mk_buf launcher; /* the C++ statements, indented 2 */
} mk_builtin_cuda_cpp;
/* *out is initialised here; free it with mk_builtin_cuda_cpp_free (also after
 * a failure). MK_EUNSUPPORTED for a variant the generator does not make or a
 * subkernel it has no kernel for. */
int mk_builtin_cuda_cpp_for(const mk_graph *g, const mk_subkernel *sk, const char *variant,
                            const char *kernel_ns, mk_builtin_cuda_node_fn node, void *node_ctx,
                            mk_builtin_cuda_cpp *out, mk_errmsg *err);
void mk_builtin_cuda_cpp_free(mk_builtin_cuda_cpp *c);

/* The PyTorch reference as a candidate: run(...) replays the subkernel's
 * nodes with the same torch calls (always correct by construction). */
int mk_reference_candidate(const mk_graph *g, const mk_subkernel *sk, mk_candidate *out,
                           mk_errmsg *err);

/* What a candidate runs on, from its text: "pytorch" for the reference (or
 * NULL) and for modules with no kernel of their own (only torch calls),
 * "cuda" for CUDA C++ candidates (`MK_BACKEND = "cuda"`), else "triton".
 * A static string. */
const char *mk_candidate_backend(const mk_candidate *c);

/* The builtin generator for `req->backend`: mk_builtin_propose (triton),
 * mk_builtin_cuda_propose (cuda), or both (auto: their candidates
 * interleaved, default configurations first, at most max_candidates; the
 * Triton generator's reason when neither has any). A parent's own backend
 * decides for REPAIR / OPTIMISE under auto. */
int mk_builtin_propose_backend(const mk_propose_request *req, mk_candidate_list *out,
                               mk_errmsg *err);

int mk_candidate_list_push(mk_candidate_list *l, mk_candidate c); /* takes ownership of c */
void mk_candidate_free(mk_candidate *c);
void mk_candidate_list_free(mk_candidate_list *l);

#endif
