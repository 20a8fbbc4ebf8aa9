/* mk_decompose.h — subkernels and partitions of a captured graph.
 *
 * A subkernel is a connected, convex set of nodes (no path leaves the set
 * and re-enters it) with the values it reads from outside (`inputs`:
 * activations, parameters, buffers, in first-use order) and the values it
 * produces that are used outside or returned (`outputs`). A partition is an
 * ordered list of subkernels covering every node once, in an order that
 * respects data dependences. Pure functions over the IR: no I/O.
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
 * norm, reduction, pool, softmax, opaque) with the elementwise/view chain
 * that follows it; leading elementwise ops form their own group. */
int mk_decompose_initial(const mk_graph *g, mk_partition *out, mk_errmsg *err);

/* Builds a subkernel from a node set (computes inputs/outputs/lines/name).
 * Fails with MK_EINVAL if the set is empty or not convex. */
int mk_subkernel_from_nodes(const mk_graph *g, const int *nodes, int nnodes, mk_subkernel *out,
                            mk_errmsg *err);

/* Split subkernel `index` at node `at` (nodes < at stay, >= at go to a new
 * subkernel right after). Merge subkernels index and index+1. Both keep
 * the partition valid or fail with MK_EINVAL and leave it unchanged. */
int mk_partition_split(const mk_graph *g, mk_partition *p, int index, int at, mk_errmsg *err);
int mk_partition_merge(const mk_graph *g, mk_partition *p, int index, mk_errmsg *err);

int mk_partition_copy(const mk_partition *src, mk_partition *dst);
void mk_subkernel_free(mk_subkernel *s);
void mk_partition_free(mk_partition *p);

#endif
