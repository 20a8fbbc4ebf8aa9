/* mk_decompose.h — subkernels and partitions of a captured graph.
 *
 * A subkernel is a convex set of nodes (no path leaves the set and re-enters
 * it) with the values it reads from outside (`inputs`: activations,
 * parameters, buffers, in first-use order) and the values it produces that
 * are used outside or returned (`outputs`, in production order). The
 * initial decomposition makes connected subkernels; a merge may join two
 * adjacent independent ones (horizontal fusion), so connectivity is not an
 * invariant. A partition is an ordered list of subkernels covering every
 * node once, in an order that respects data dependences (which also makes
 * every subkernel convex). Pure functions over the IR: no I/O. The rules
 * and their reasons: docs/ir.md.
 *
 * Ownership: partitions own their subkernels; mk_partition_free frees all. */
#ifndef MK_DECOMPOSE_H
#define MK_DECOMPOSE_H

#include "mk_err.h"
#include "mk_ir.h"

typedef struct mk_subkernel {
  int id;             /* index in the partition */
  char *name;         /* readable, unique in the partition: "conv2d_sub_tanh" */
  int *nodes;   int nnodes;   /* ascending node ids */
  int *inputs;  int ninputs;  /* value ids read from outside, first-use order */
  int *outputs; int noutputs; /* value ids needed outside (or graph outputs) */
  int anchor;         /* node id of the heavy op, or -1 for a pure chain */
  int first_line, last_line; /* source lines covered (1-based) */
} mk_subkernel;

typedef struct mk_partition {
  mk_subkernel *subkernels;
  int nsubkernels;
} mk_partition;

/* Initial decomposition: fusion groups, each a heavy op (conv, matmul,
 * norm, pool, attention, rnn) with the elementwise/view/data chain that
 * follows it; a reduction/softmax/scan ends the chain it follows, or
 * anchors its own group when it follows none; leading elementwise ops form
 * their own group; opaque ops stand alone. A chain stops at a value that
 * escapes it (returned, or read by a heavy op or an earlier node outside).
 * *out is overwritten (not freed first); the caller frees it. */
int mk_decompose_initial(const mk_graph *g, mk_partition *out, mk_errmsg *err);

/* Builds a subkernel from a node set in any order (computes sorted nodes,
 * inputs/outputs/anchor/lines/name; id = 0). Fails with MK_EINVAL if the
 * set is empty, names a node twice or out of range, or is not convex.
 * *out is overwritten; free it with mk_subkernel_free. The name is unique
 * only within the subkernel; partition functions make it unique there. */
int mk_subkernel_from_nodes(const mk_graph *g, const int *nodes, int nnodes, mk_subkernel *out,
                            mk_errmsg *err);

/* Checks every partition invariant: each node in exactly one subkernel,
 * nodes ascending, dependences only on earlier subkernels, inputs/outputs/
 * anchor/lines as mk_subkernel_from_nodes computes them, ids equal to
 * positions, names unique, non-empty identifiers. */
int mk_partition_validate(const mk_graph *g, const mk_partition *p, mk_errmsg *err);

/* Index of the subkernel holding node `node`, or -1. */
int mk_partition_find(const mk_partition *p, int node);

/* Split subkernel `index` at node `at` (nodes < at stay, >= at go to a new
 * subkernel right after). Merge subkernels index and index+1. Both keep
 * the partition valid or fail with MK_EINVAL and leave it unchanged. */
int mk_partition_split(const mk_graph *g, mk_partition *p, int index, int at, mk_errmsg *err);
int mk_partition_merge(const mk_graph *g, mk_partition *p, int index, mk_errmsg *err);

/* The structural signature of a subkernel (signature.c): its inputs' kinds,
 * dtypes and shapes, then each node's op and exact arguments with tensors
 * renumbered locally, then its outputs. Subkernels with equal signatures
 * compute the same function of their inputs, so a candidate verified for
 * one serves the other. Appends to `out` (an mk_buf *); MK_EUNSUPPORTED
 * when the subkernel reads a const tensor or has a node that is not
 * replayable (its behaviour is not all in its arguments). */
struct mk_buf;
int mk_subkernel_signature(const mk_graph *g, const mk_subkernel *sk, struct mk_buf *out);

/* Twins: rep[i] = the first subkernel with the same signature as subkernel
 * i (rep[i] == i for the first of each kind and for subkernels without a
 * signature). rep has p->nsubkernels entries. MK_ENOMEM leaves rep[i] = i. */
int mk_partition_twins(const mk_graph *g, const mk_partition *p, int *rep);

/* Deep copies; *dst is overwritten. MK_ENOMEM leaves *dst empty. */
int mk_subkernel_copy(const mk_subkernel *src, mk_subkernel *dst);
int mk_partition_copy(const mk_partition *src, mk_partition *dst);
/* Free the contents (not the struct itself) and zero them; NULL-safe. */
void mk_subkernel_free(mk_subkernel *s);
void mk_partition_free(mk_partition *p);

#endif
