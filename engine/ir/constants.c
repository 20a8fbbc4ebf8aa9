/* constants.c — tensors a forward makes from constants alone.
 *
 * `torch.tensor(1. / 0.01, device=x.device)` in a forward (SwinV2's
 * attention) makes the same tensor on every call, from a copy out of
 * pageable host memory: the copy synchronises the stream (the host waits for
 * every kernel queued before it) and is not allowed while a CUDA graph is
 * being captured. Emitted code may make such a tensor once per device and
 * reuse it, as torch.compile folds it, when the reuse cannot be observed:
 * nothing writes it or a view of it in place and the program does not
 * return it. */
#include "mk_ir.h"

#include <stdlib.h>
#include <string.h>

/* Cached tensors stay alive with the module: a bound on what one may hold. */
#define CONSTANT_MAX_ELEMENTS (1 << 20)

/* Factories whose result is defined by their arguments. empty* are left out:
 * their contents are whatever memory held, and code fills them in place. */
static bool deterministic_factory(const mk_node *n) {
  if (n->category != MK_OP_FACTORY || (mk_op_flags(n->op) & MK_OPF_RANDOM)) return false;
  return strncmp(n->short_name, "empty", 5) != 0 && strcmp(n->short_name, "new_empty") != 0;
}

/* Ops whose result may be the tensor they read, or share its storage:
 * views, and conversions that return their input when there is nothing to
 * convert (`c.to(device)` on that device, `c.contiguous()`, `c.float()`). */
static bool may_alias_input(const mk_node *n) {
  static const char *const same[] = {"to", "type", "type_as", "contiguous", "detach", "float",
                                     "double", "half", "bfloat16", "cuda", "cpu", "requires_grad",
                                     "as_strided", "data", "view_as", "reshape_as", "expand_as"};
  if (n->category == MK_OP_VIEW || mk_op_is_inplace(n->op)) return true;
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
    if (strcmp(n->short_name, same[i]) == 0) return true;
  return false;
}

/* Marks v and every value that may share its storage (through users that
 * may alias their input); false when one of them is written in place or
 * returned by the program. */
static bool closure_is_read_only(const mk_graph *g, int v, unsigned char *seen) {
  if (v < 0 || v >= g->nvalues) return false;
  if (seen[v]) return true;
  seen[v] = 1;
  const mk_value *val = &g->values[v];
  if (val->is_graph_output) return false;
  for (int u = 0; u < val->nusers; u++) {
    const mk_node *n = &g->nodes[val->users[u]];
    for (int m = 0; m < n->nmutates; m++)
      if (n->mutates[m] == v) return false;
    if (!may_alias_input(n)) continue;
    for (int k = 0; k < n->noutputs; k++)
      if (!closure_is_read_only(g, n->outputs[k], seen)) return false;
  }
  return true;
}

bool mk_graph_node_is_constant(const mk_graph *g, int node) {
  if (g == NULL || node < 0 || node >= g->nnodes) return false;
  const mk_node *n = &g->nodes[node];
  if (!n->replayable || n->ninputs != 0 || n->noutputs != 1 || n->nmutates != 0 ||
      !deterministic_factory(n))
    return false;
  int v = n->outputs[0];
  if (v < 0 || v >= g->nvalues || mk_value_numel(&g->values[v]) > CONSTANT_MAX_ELEMENTS)
    return false;
  unsigned char *seen = calloc((size_t)g->nvalues + 1, 1);
  if (seen == NULL) return false;
  bool ok = closure_is_read_only(g, v, seen);
  free(seen);
  return ok;
}
