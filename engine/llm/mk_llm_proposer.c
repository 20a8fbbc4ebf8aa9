/* mk_llm_proposer.c — the LLM agents behind engine/search's mk_proposer
 * interface (`--proposer llm`): adapts mk_llm_propose_async's callback to
 * mk_propose_cb. */
#include "mk_llm_internal.h"

#include <stdlib.h>

typedef struct adapter_call {
  mk_propose_cb cb;
  void *data;
} adapter_call;

static void adapter_done(void *data, int status, mk_candidate_list *cands, const mk_errmsg *err) {
  adapter_call *a = data;
  /* The search frees the list's contents; the list struct stays ours. */
  a->cb(a->data, status, cands, err ? err->text : NULL);
  free(a);
}

static int adapter_propose(void *self, const mk_propose_request *req, mk_propose_cb cb,
                           void *data) {
  mk_llm_proposer_ctx *ctx = self;
  adapter_call *a = malloc(sizeof *a);
  if (!a) return MK_ENOMEM;
  a->cb = cb;
  a->data = data;
  mk_llm_propose_extra extra = {.module_source = ctx->module_source,
                                .progress = ctx->progress,
                                .progress_data = ctx->progress_data};
  mk_errmsg err;
  int rc = mk_llm_propose_async(ctx->llm, req, &extra, adapter_done, a, NULL, &err);
  if (rc) {
    free(a);
    if (ctx->last_error) mk_strlcpy(ctx->last_error, err.text, MK_ERRMSG_MAX);
  }
  return rc;
}

mk_proposer mk_llm_proposer(mk_llm_proposer_ctx *ctx) {
  return (mk_proposer){.self = ctx, .name = "llm", .propose = adapter_propose};
}
