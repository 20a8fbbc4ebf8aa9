/* mk_ir.h — the engine's operator graph (IR).
 *
 * Built from the worker's capture JSON (docs/protocol.md). Nodes are torch
 * calls in execution order; values are tensors (forward inputs, parameters,
 * buffers, attributes, node results). Every node keeps its exact call
 * (args/kwargs as cJSON in the protocol's encoding) so it can be replayed
 * and emitted as Python, and its source span for the editor.
 *
 * Ownership: an mk_graph owns everything it points to, including the cJSON
 * trees; mk_graph_free releases it all. Pointers into a graph stay valid
 * until then. No I/O here: the graph comes from a JSON string. */
#ifndef MK_IR_H
#define MK_IR_H

#include "mk_err.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MK_IR_MAX_RANK 8

typedef enum mk_value_kind {
  MK_VALUE_INPUT,  /* forward argument */
  MK_VALUE_PARAM,  /* nn.Parameter (state_dict name) */
  MK_VALUE_BUFFER, /* registered buffer (state_dict name) */
  MK_VALUE_ATTR,   /* plain tensor attribute of a submodule */
  MK_VALUE_NODE,   /* produced by a node */
  MK_VALUE_CONST,  /* tensor from outside forward that is none of the above */
} mk_value_kind;

typedef enum mk_dtype {
  MK_DTYPE_UNKNOWN, MK_DTYPE_F32, MK_DTYPE_F16, MK_DTYPE_BF16, MK_DTYPE_F64,
  MK_DTYPE_I64, MK_DTYPE_I32, MK_DTYPE_I16, MK_DTYPE_I8, MK_DTYPE_U8, MK_DTYPE_BOOL,
} mk_dtype;

/* What kind of computation an op is; drives decomposition and the builtin
 * proposer. Decided by the op table in ops.c, never by the worker. */
typedef enum mk_op_category {
  MK_OP_OPAQUE,      /* unknown to the engine: runs through PyTorch */
  MK_OP_ELEMENTWISE, /* output[i] depends on inputs[i] (with broadcasting) */
  MK_OP_REDUCTION,   /* sum/mean/max/min/logsumexp/... over dims */
  MK_OP_SOFTMAX,     /* softmax / log_softmax */
  MK_OP_NORM,        /* batch/layer/group/instance/rms norm */
  MK_OP_POOL,        /* max/avg pooling, adaptive pooling */
  MK_OP_MATMUL,      /* linear, matmul, mm, bmm, addmm, einsum-as-gemm */
  MK_OP_CONV,        /* convolution, transposed convolution */
  MK_OP_VIEW,        /* view/reshape/flatten/permute/transpose/squeeze/cat-free shape ops */
  MK_OP_FACTORY,     /* tensors made from nothing (zeros, randn, arange) */
  MK_OP_RNN,         /* lstm/gru/rnn */
  MK_OP_ATTENTION,   /* scaled_dot_product_attention */
  MK_OP_DATA,        /* cat/stack/split/chunk/index/gather/pad: data movement */
  MK_OP_SCAN,        /* cumsum/cumprod/cummax/logcumsumexp: prefix scans along a dim */
} mk_op_category;
#define MK_OP_NCATEGORIES (MK_OP_SCAN + 1)

/* Op flags (mk_op_flags). */
#define MK_OPF_RANDOM 1u /* draws random numbers: results cannot be compared exactly */

typedef struct mk_span {
  int line, col;         /* 1-based line, 0-based UTF-8 byte column */
  int end_line, end_col; /* exclusive end column */
} mk_span;

typedef struct mk_value {
  int id;
  mk_value_kind kind;
  mk_dtype dtype;
  int rank;
  int64_t shape[MK_IR_MAX_RANK];
  char *name;     /* state_dict key / attribute path; NULL for inputs and nodes */
  int index;      /* forward argument index for inputs, else -1 */
  int producer;   /* node id for MK_VALUE_NODE, else -1 */
  int *users;     /* ids of nodes that read this value, in order */
  int nusers;
  bool is_graph_output;
} mk_value;

/* An integer argument that is a size computed from the batch (`x.size(0)` read
 * in Python): at every batch it equals num * shape(vid)[dim] // den + off, with
 * vid one of the node's own tensor arguments (docs/capture.md, "Running at any
 * batch"). pyemit writes that expression instead of the captured number. */
typedef struct mk_batch_int {
  const cJSON *leaf;      /* the captured number in args/kwargs (into the graph's json) */
  int vid, dim;           /* the tensor argument and the dim whose size it follows */
  int64_t num, den, off;  /* den >= 1 */
} mk_batch_int;

typedef struct mk_node {
  int id;
  char *op;                /* dotted name, e.g. "torch.nn.functional.conv2d" */
  char *short_name;        /* mk_op_short_name of op: "conv2d", "add", "iadd"; owned */
  mk_op_category category; /* mk_op_category_for_call: refined by the arguments */
  /* The three below point into the graph's `json` tree (owned by the graph,
   * never NULL: a missing args/kwargs is normalised to []/{}, out to null). */
  cJSON *args;             /* JSON array (protocol encoding) */
  cJSON *kwargs;           /* JSON object */
  cJSON *out;              /* structure of the return value */
  int *inputs;  int ninputs;   /* tensor values read, first-appearance order */
  int *outputs; int noutputs;  /* tensor values produced */
  int *mutates; int nmutates;  /* values modified in place */
  char *module;            /* dotted module path ("layer1.0.conv1") or NULL */
  char *module_type;       /* "Conv2d" or NULL */
  mk_span span;
  bool replayable;         /* false when an arg is opaque or reads a const */
  mk_batch_int *batch_ints; int nbatch_ints; /* sizes that follow the batch */
} mk_node;

typedef struct mk_statement {
  int line, end_line;
  int *nodes; int nnodes;
} mk_statement;

/* A forward argument that is not a tensor (`s: float`). The graph was
 * captured with its value, which the ops read as a constant: a composition
 * is specialised to it and guards on it (docs/capture.md, "Scalar inputs"). */
typedef struct mk_scalar_input {
  int index;           /* forward argument index */
  const cJSON *value;  /* the captured value (protocol encoding, into the graph's json);
                          NULL when opaque */
  const char *type;    /* Python type name of an opaque one (into json), else NULL */
} mk_scalar_input;

typedef struct mk_graph {
  char *file;
  char *class_name;
  char *source_sha256;
  int batch;               /* reduced batch size, 0 when full shapes */
  mk_value *values; int nvalues;
  mk_node *nodes;   int nnodes;
  cJSON *outputs;          /* structure of forward's return; points into json */
  int *output_values; int noutput_values; /* tensor values returned */
  mk_scalar_input *scalar_inputs; int nscalar_inputs; /* by index */
  /* Whether code emitted from the graph runs at any batch: every size that
   * follows the batch is a node's batch_int. Then only dim 0 of batch_inputs
   * may differ from the capture; otherwise every input's shape is fixed, and
   * batch_free_why (into json; NULL when free) says why. */
  bool batch_free;
  const char *batch_free_why;
  int *batch_inputs; int nbatch_inputs; /* input values whose dim 0 is the batch */
  int forward_line, forward_end_line;
  mk_statement *statements; int nstatements;
  double capture_ms;
  cJSON *json;             /* the whole capture result, kept for re-sending; owned */
} mk_graph;

/* Parses a capture result (the "result" object of a capture response, as
 * text). On success *out is a new graph the caller frees with mk_graph_free.
 * Validates ids, references and shapes; errors name the offending node. */
int mk_graph_from_json(const char *json, size_t len, mk_graph **out, mk_errmsg *err);
/* The same from an already-parsed object; takes ownership of `root`
 * (freed on failure too). */
int mk_graph_from_cjson(cJSON *root, mk_graph **out, mk_errmsg *err);
void mk_graph_free(mk_graph *g);

/* The batch size of `n` whose captured number is `leaf` (a cJSON number in its
 * args/kwargs), or NULL when that number is a plain constant. */
const mk_batch_int *mk_node_batch_int(const mk_node *n, const cJSON *leaf);

/* Human-readable listing: one line per node with op, shapes and source line.
 * Appends to `out` (an mk_buf *, declared opaque here to keep this header
 * free of util types). Returns 0 or MK_ERANGE/MK_ENOMEM. */
struct mk_buf;
int mk_graph_print(const mk_graph *g, struct mk_buf *out);

/* Op table (ops.c). Ops are looked up by their last dotted component
 * (dunders kept as is, one trailing "_" of an in-place form dropped), so
 * "torch.relu", "torch.nn.functional.relu", "torch.Tensor.relu_" and
 * "torch._C._nn.relu" are one entry. Names outside `torch.` are opaque. */
mk_op_category mk_op_category_of(const char *op);
/* The category of one call: mk_op_category_of refined by the arguments
 * where the name alone is ambiguous: torch.max(a, b) / x.min(other=t) are
 * elementwise while torch.max(x) / x.max(dim) are reductions; x[1:, None]
 * (basic indexing) is a view while x[idx] is data movement; torch.where(c)
 * (one argument) is data-dependent, hence opaque. args/kwargs may be NULL. */
mk_op_category mk_op_category_for_call(const char *op, const cJSON *args, const cJSON *kwargs);
const char *mk_op_category_name(mk_op_category c);
/* MK_OPF_* flags of an op (0 for unknown ops). */
unsigned mk_op_flags(const char *op);
/* True for ops that modify their first argument: "add_", "__iadd__", ... */
bool mk_op_is_inplace(const char *op);
/* Heavy categories anchor a fusion group: conv, matmul, norm, pool,
 * attention, rnn. Reductions, softmax and scans also anchor one when they
 * do not end a chain (mk_decompose.h). */
bool mk_op_is_heavy(mk_op_category c);
/* Number of entries in the table and entry i (for tests and docs). */
int mk_op_table_size(void);
const char *mk_op_table_name(int i, mk_op_category *category);
/* Last dotted component with leading/trailing "__" and a trailing "_" (in-place) removed:
 * "torch.Tensor.__iadd__" -> "iadd", "torch.Tensor.add_" -> "add"; for a
 * property getter ("torch.Tensor.T.__get__") the property name ("T").
 * Writes into buf (bounded, truncated if needed) and returns buf. */
const char *mk_op_short_name(const char *op, char *buf, size_t bufsize);

/* True when node `node` makes a tensor from constants alone (a factory such
 * as torch.tensor / full / arange with no tensor argument, nothing random, at
 * most 2^20 elements) and the program can never tell one such tensor from
 * another: nothing writes it or a view of it in place and the program does
 * not return it (constants.c). Emitted code may then make it once per device
 * and reuse it (no host-to-device copy per call, CUDA graphs can capture the
 * forward). */
bool mk_graph_node_is_constant(const mk_graph *g, int node);

/* Roofline cost (cost.c): the FLOPs of the matrix work (matmul family,
 * convolutions, attention, recurrent layers; one FLOP per output element for
 * the rest) and the minimum bytes any implementation moves (forward inputs,
 * parameters and buffers read once, returned tensors written once). */
typedef struct mk_graph_cost_t {
  double flops;
  double bytes;
} mk_graph_cost_t;
double mk_node_flops(const mk_graph *g, const mk_node *n);
int mk_graph_cost(const mk_graph *g, mk_graph_cost_t *out);
/* Fraction of the device's limit a measured time reaches:
 * max(flops / flops_per_s, bytes / bytes_per_s) / measured; -1 when an
 * argument is missing or not positive. */
double mk_roofline_fraction(const mk_graph_cost_t *cost, double flops_per_s, double bytes_per_s,
                            double measured_ms);

/* "float32" -> MK_DTYPE_F32; unknown names (complex64, ...) -> MK_DTYPE_UNKNOWN. */
mk_dtype mk_dtype_from_name(const char *name);
/* torch's name without the prefix ("float32"); "unknown" for MK_DTYPE_UNKNOWN. */
const char *mk_dtype_name(mk_dtype d);
/* Compact name for listings: "f32", "bf16", "i64", "bool", "?". */
const char *mk_dtype_short_name(mk_dtype d);
/* Bytes per element, 0 for unknown. */
int mk_dtype_size(mk_dtype d);

/* Number of elements of a value (product of its shape; 1 for scalars). */
int64_t mk_value_numel(const mk_value *v);
/* Formats a shape as "[128, 3, 32, 32]" into buf (bounded). */
const char *mk_shape_str(const mk_value *v, char *buf, size_t bufsize);
/* Name of a value in listings: the state_dict name for params/buffers/attrs
 * with a name, else "%<id>". Writes into buf (bounded) and returns it. */
const char *mk_value_label(const mk_value *v, char *buf, size_t bufsize);
/* Calls fn for every tensor reference ({"t": id}) inside an encoded
 * argument tree, in order; stops and returns fn's value when non-zero. */
int mk_arg_foreach_tensor(const cJSON *arg, int (*fn)(void *ctx, int vid), void *ctx);

#endif
