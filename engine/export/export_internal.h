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
/* A call bound to its row's Python signature (export_cpp.c): each
 * parameter's recorded argument, a default from the row, or NULL (absent,
 * no default). `arg` items are borrowed from the node or from `owned`. */
#define EXPORT_MAX_PARAMS 16
typedef struct export_param {
  char name[48];
  char kind[8];
  const char *dflt; /* JSON text of the default in the row, or NULL (required) */
  size_t dflt_len;
} export_param;
typedef struct export_call {
  const export_op *op;
  export_param ps[EXPORT_MAX_PARAMS];
  int np;
  const cJSON *arg[EXPORT_MAX_PARAMS];
  cJSON *owned[EXPORT_MAX_PARAMS]; /* defaults and collected varargs */
} export_call;
/* Binds node n's positional and keyword arguments to op's signature the way
 * Python does, fills the row's defaults and refuses X0 parameters that are
 * set. *c is the caller's; export_call_free it whatever this returns. Both
 * the C++ spelling and the ATen form (export_aten.c) start here. */
int export_call_bind(const mk_node *n, const export_op *op, export_call *c, mk_errmsg *err);
void export_call_free(export_call *c);
/* The index of parameter `name` (len bytes) in c, or -1. */
int export_call_param(const export_call *c, const char *name, size_t len);
/* MK_EUNSUPPORTED (with the reason) for calls that draw random numbers. */
int export_check_random(const mk_node *n, mk_errmsg *err);
/* True where the call updates its first argument in place through
 * `inplace=True` (F.relu(x, inplace=True)). */
bool export_has_inplace_arg(const mk_node *n);
/* True when the structure s (a node's `out`) holds value vid. */
bool export_returned(const cJSON *s, int vid);
/* 'T' one tensor, 'P' a tuple, 'V' a list: what node n's call returns. */
char export_result_kind(const mk_node *n);
/* The last dotted component of an op name ("relu" of "torch.relu"). */
const char *export_last_component(const char *op);
/* The special forms' ATen form (export_aten.c): 1 and *call set (or *rc an
 * error) for x[...], max / min, squeeze and split; 0 for table ops. */
int export_aten_special(const mk_node *n, cJSON **call, mk_errmsg *err, int *rc);
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

/* A Python number in the protocol's encoding (docs/protocol.md) as a double:
 * plain numbers, {"float": x} and its "inf"/"-inf"/"nan" tags; *is_float says
 * whether Python had a float. False for anything else. Shared by the C++
 * export (export_ops.c) and the ATen forms (export_aten.c). */
bool export_number_of(const cJSON *a, double *d, bool *is_float);

#endif
