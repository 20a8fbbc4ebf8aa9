/* llm_internal.h — declarations shared by the files of engine/llm only
 * (not part of the public API). */
#ifndef MK_LLM_INTERNAL_H
#define MK_LLM_INTERNAL_H

#include "mk_llm.h"

/* llm_config.c */
int mk_llm_config_copy_(const mk_llm_config *src, mk_llm_config *dst);
const char *mk_llm_default_key_env_(mk_llm_provider p);

/* llm_ledger.c: USD for a call under the configured price (0 if none). */
double mk_llm_cost_(const mk_llm_config *c, const char *model, long tin, long tout);

/* Candidate lists without depending on engine/propose's implementation. */
int mk_llm_cand_push_(mk_candidate_list *l, mk_candidate *c); /* takes ownership; c zeroed */
void mk_llm_cand_free_(mk_candidate *c);
void mk_llm_cand_list_free_(mk_candidate_list *l);

/* llm_client.c: the loop a client runs on. */
uv_loop_t *mk_llm_loop_(mk_llm *llm);

/* Provider wire formats (llm_provider.c). */
typedef struct mk_llm_stream_state {
  mk_buf text;
  char *model;
  char *finish_reason;
  long tokens_in, tokens_out;
  bool have_usage;
  bool done;        /* end marker seen ([DONE] / message_stop) */
  int error;        /* MK_E* from an error event, else 0 */
  mk_errmsg err;
  bool retryable_error;
} mk_llm_stream_state;

void mk_llm_stream_init_(mk_llm_stream_state *s);
void mk_llm_stream_free_(mk_llm_stream_state *s);
/* One SSE event; returns the number of text bytes appended (for progress). */
size_t mk_llm_stream_event_(mk_llm_provider p, mk_llm_stream_state *s, const char *event,
                            const char *payload, size_t len);
/* A whole non-streaming JSON body. */
int mk_llm_parse_body_(mk_llm_provider p, const char *body, size_t len, mk_llm_stream_state *s);
/* The request body. */
int mk_llm_build_body_(const mk_llm_config *c, const mk_llm_chat *chat, mk_buf *out);
/* The provider's error message from an error body ("error.message"), or NULL. */
char *mk_llm_error_message_(const char *body, size_t len);

#endif
