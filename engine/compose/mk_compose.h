/* mk_compose.h — emits a composition as a KernelBench-format `ModelNew`.
 *
 * The emitted file is self-contained Python: the user's module source
 * verbatim (so `ModelNew(Model)` inherits __init__: same parameters, same
 * names, same initialisation order — KernelBench's seeded construction and
 * load_state_dict both work), then one section per distinct chosen
 * candidate's code (top-level names prefixed so sections never collide;
 * subkernels whose candidates have the same source share one section),
 * then `class ModelNew(Model)` whose forward calls the subkernels in order.
 * Subkernels whose choice is the PyTorch reference are emitted inline as
 * the recorded torch calls.
 *
 * Python for single IR nodes lives in engine/pyemit (mk_pyemit.h), shared
 * with the proposers.
 *
 * Ownership: output goes to a caller-owned mk_buf; inputs are borrowed. */
#ifndef MK_COMPOSE_H
#define MK_COMPOSE_H

#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_err.h"
#include "mk_ir.h"
#include "mk_propose.h"
#include "mk_pyemit.h" /* node and argument emitters (moved out of compose) */

typedef struct mk_compose_options {
  const char *module_source;     /* the user's file text (required) */
  const char *source_path;       /* for the header comment */
  const char *const *input_names;/* forward's parameter names, or NULL: x0, x1, ... */
  int ninput_names;
  bool forward_takes_more;       /* the user's forward has *args or **kwargs; with more
                                    input_names than captured inputs (a default get_inputs()
                                    does not pass), the same: ModelNew takes them too and runs
                                    the user's forward when any is passed */
  const char *note;              /* extra header line, e.g. "reduced batch 2" (may be NULL) */
  /* Guard every input's whole shape although the graph is batch-free: the
   * composition failed the check at another batch (docs/capture.md). */
  bool fixed_shapes;
} mk_compose_options;

/* Emits the ModelNew file. chosen[i] is the candidate for subkernel i, or
 * NULL (or a candidate with origin "reference") for the PyTorch reference. */
int mk_compose_modelnew(const mk_graph *g, const mk_partition *p, const mk_candidate *const *chosen,
                        const mk_compose_options *opt, mk_buf *out, mk_errmsg *err);

/* The last resort, always correct: ModelNew is the user's Model unchanged
 * (`class ModelNew(Model): pass` after the module's source). Appends to
 * caller-owned `out`. */
int mk_compose_plain_subclass(const mk_graph *g, const char *module_source, mk_buf *out);

/* The CUDA-graph variant of a composed file (compose_graph.c): modelnew_source
 * unchanged, then a subclass of the same name (class_name, NULL: "ModelNew")
 * whose forward replays the composed forward as one CUDA graph per input
 * signature, with a fresh output every call and the plain forward wherever a
 * graph would be wrong (autograd, CPU tensors, uncapturable code). Fails
 * with MK_EINVAL when the class is missing or the file is already a graph
 * variant. Appends to caller-owned `out`. */
int mk_compose_cuda_graph(const char *modelnew_source, const char *class_name, mk_buf *out,
                          mk_errmsg *err);

/* Prefixes every top-level name (def/class/assignment) of a candidate module
 * with `prefix` and drops its import lines (the file imports once). */
int mk_compose_prefix_candidate(const char *source, const char *prefix, mk_buf *out,
                                mk_errmsg *err);

#endif
