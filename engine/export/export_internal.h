/* export_internal.h — what the exporter's files share (not public). */
#ifndef MK_EXPORT_INTERNAL_H
#define MK_EXPORT_INTERNAL_H

#include "mk_buf.h"
#include "mk_err.h"
#include "mk_ir.h"
#include "mk_propose.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

#define EXPORT_OP_SELF_MUTATES 1u /* ATen updates the tensors the call mutates (running stats) */

/* One row of the op table (export_ops.c): the Python signature the call was
 * recorded against and the ATen call it becomes. */
typedef struct export_op {
  const char *forms;  /* "F", "M", "T" or "*" (which torch namespaces) */
  const char *name;   /* last component of the op's name, in-place "_" dropped */
  const char *params; /* "name:KIND[=default] ..." */
  const char *tmpl;   /* ATen expression with $name placeholders */
  char result;        /* 'T' one tensor, 'P' std::tuple, 'V' std::vector */
  unsigned flags;     /* EXPORT_OP_* */
} export_op;

/* The row for a dotted op name, or NULL; *inplace says the name is an
 * in-place form (add_, __iadd__). */
const export_op *export_op_find(const char *op, bool *inplace);
int export_op_count(void);
const export_op *export_op_at(int i);
/* Appends the C++ for argument `a` (NULL: absent) of kind `kind`;
 * MK_EUNSUPPORTED when it cannot be spelled so. */
int export_put_arg(const char *kind, const cJSON *a, mk_buf *out);
/* Node n's recorded call as C++ statements declaring at::Tensor v<id> for
 * its results (export_cpp.c); MK_EUNSUPPORTED names what it cannot write. */
int export_emit_node(const mk_graph *g, const mk_node *n, mk_buf *out, mk_errmsg *err);

/* The subkernel the k-th call of the ModelNew's forward (`fwd`: its def line)
 * runs: its nodes, recovered from the values the call reads and returns, and
 * checked against the header's lines (export_cuda.c). */
struct mk_export_subkernel;
int export_recover_subkernel(const mk_graph *g, const struct mk_export_subkernel *esk, const char *fwd, int k,
                             mk_subkernel *sk, mk_errmsg *err);
/* The ModelNew's forward (its def line), or NULL. */
const char *export_modelnew_forward(const char *text);

/* What the Triton replays call (export_triton.c): mk_tr_input, mk_tr_ptr,
 * mk_tr_launch, the cubins' loading; for <ns>.cpp. */
const char *export_triton_helpers(void);
/* <ns>_triton.h and <ns>_triton.cpp (the cubins as byte arrays). */
struct mk_export_cuda;
int export_triton_files(const char *ns, const char *composed_from, const struct mk_export_cuda *c, mk_buf *cpp,
                        mk_buf *h, mk_errmsg *err);

/* The C++ helpers a CUDA subkernel's launcher calls (mk_broadcast, mk_full,
 * ...; mk_builtin_cuda_cpp_for), for the generated <ns>.cpp. */
const char *export_cuda_helpers(void);
/* <ns>_kernels.cu (each section's kernels once, in namespace <ns>::sk<i>,
 * and their host launch functions in <ns>::sk<i>::launch) into cu, and the
 * launch functions' declarations (<ns>_kernels.h) into h. */
int export_cuda_kernels(const char *ns, const char *composed_from, const struct mk_export_cuda *c, mk_buf *cu,
                        mk_buf *h, mk_errmsg *err);

#endif
