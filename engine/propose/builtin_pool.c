/* builtin_pool.c — pooling (max/avg 1-3d, adaptive). */
#include "builtin_internal.h"

int bi_pool_check(const mk_graph *g, const mk_node *n, mk_errmsg *err) {
  (void)g;
  return mk_errf(err, MK_EUNSUPPORTED, "line %d: pooling (%s) is not generated yet", n->span.line, n->op);
}

int bi_emit_pool_stage(bi_emit *e, int s, mk_errmsg *err) {
  return bi_pool_check(e->p->g, &e->p->g->nodes[e->p->st[s].nodes[0]], err);
}
