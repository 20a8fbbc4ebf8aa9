/* ir_internal.h — what the files of engine/ir share and nobody else needs. */
#ifndef MK_IR_INTERNAL_H
#define MK_IR_INTERNAL_H

#include "mk_ir.h"

/* Upper bound on any list in a capture graph (values, nodes, sizes). */
#define MK_IR_MAX_ITEMS 10000000

/* Whether x is among the n ints at a. */
bool mk_ir_int_in(const int *a, int n, int x);

/* Reads "batch_free" and every node's "batch_ints" (batch.c) once the nodes
 * are parsed and checked; a graph without them is not batch-free. */
int mk_ir_parse_batch(mk_graph *g, const cJSON *root, mk_errmsg *err);
/* Frees what mk_ir_parse_batch allocated (mk_graph_free calls it). */
void mk_ir_free_batch(mk_graph *g);

#endif
