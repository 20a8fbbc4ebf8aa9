/* builtin_proposer.c — the builtin generator behind the asynchronous mk_proposer
 * interface, in the request's kernel language (mk_builtin_propose_backend).
 * It is synchronous, so the callback runs before propose returns (the
 * search is written for that). */
#include "mk_propose.h"

#include <stdlib.h>

static int builtin_propose(void *self, const mk_propose_request *req, mk_propose_cb cb,
                           void *data) {
  (void)self;
  mk_candidate_list *list = calloc(1, sizeof *list);
  if (list == NULL) return MK_ENOMEM;
  mk_errmsg err = {{0}};
  int rc = mk_builtin_propose_backend(req, list, &err);
  cb(data, rc == MK_EUNSUPPORTED && list->n > 0 ? 0 : rc, list, err.text[0] ? err.text : NULL);
  free(list);
  return 0;
}

/* Only the Triton generator has the implicit-GEMM chains and the norms
 * applied by the pools that read them. */
static bool builtin_fuses(void *self, const mk_graph *g, const mk_subkernel *sk,
                          mk_kernel_backend backend) {
  (void)self;
  return backend != MK_KBACKEND_CUDA && mk_builtin_fuses(g, sk);
}

mk_proposer mk_builtin_proposer(void) {
  return (mk_proposer){.self = NULL, .name = "builtin", .propose = builtin_propose,
                       .fuses = builtin_fuses};
}
