/* llm_provider.c — the two wire formats: request bodies, streaming
 * events and whole replies of OpenAI-compatible chat completions and of
 * Anthropic messages, including their usage fields. */
#include "llm_internal.h"

#include <stdlib.h>
#include <string.h>

void mk_llm_stream_init_(mk_llm_stream_state *s) {
  memset(s, 0, sizeof *s);
  mk_buf_init(&s->text, (size_t)64 * 1024 * 1024);
}

void mk_llm_stream_free_(mk_llm_stream_state *s) {
  mk_buf_free(&s->text);
  free(s->model);
  free(s->finish_reason);
  memset(s, 0, sizeof *s);
}

static void set_owned(char **dst, const cJSON *v) {
  if (!cJSON_IsString(v)) return;
  char *s = mk_strdup(v->valuestring);
  if (!s) return;
  free(*dst);
  *dst = s;
}

static long num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) && v->valuedouble > 0 ? (long)v->valuedouble : 0;
}

static size_t append_text(mk_llm_stream_state *s, const cJSON *v) {
  if (!cJSON_IsString(v) || !v->valuestring[0]) return 0;
  size_t n = strlen(v->valuestring);
  mk_buf_append(&s->text, v->valuestring, n);
  return n;
}

/* An in-band error object: {"error": {"type"/"code", "message"}}. */
static void stream_error(mk_llm_stream_state *s, const cJSON *e) {
  const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
  const char *t = cJSON_IsString(type) ? type->valuestring : "error";
  /* Overload and rate limits mid-stream are worth another attempt. */
  s->retryable_error = strstr(t, "overloaded") || strstr(t, "rate_limit") ||
                       strstr(t, "server_error") || strstr(t, "api_error");
  s->error = s->retryable_error ? MK_ENET : MK_EPROTO;
  mk_errf(&s->err, s->error, "provider reported %s in the stream: %.300s", t,
          cJSON_IsString(msg) ? msg->valuestring : "(no message)");
}

static void openai_usage(mk_llm_stream_state *s, const cJSON *u) {
  if (!cJSON_IsObject(u)) return;
  s->tokens_in = num(u, "prompt_tokens");
  s->tokens_out = num(u, "completion_tokens");
  s->have_usage = true;
}

static size_t openai_event(mk_llm_stream_state *s, const char *payload, size_t len) {
  if (len == 6 && memcmp(payload, "[DONE]", 6) == 0) {
    s->done = true;
    return 0;
  }
  cJSON *j = cJSON_ParseWithLength(payload, len);
  if (!j) {
    s->error = MK_EPROTO;
    s->retryable_error = true;
    mk_errf(&s->err, MK_EPROTO, "malformed JSON in the reply stream");
    return 0;
  }
  size_t added = 0;
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
  if (e) stream_error(s, e);
  set_owned(&s->model, cJSON_GetObjectItemCaseSensitive(j, "model"));
  const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
  if (ch) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(ch, "delta");
    added += append_text(s, cJSON_GetObjectItemCaseSensitive(d, "content"));
    const cJSON *fr = cJSON_GetObjectItemCaseSensitive(ch, "finish_reason");
    if (cJSON_IsString(fr)) set_owned(&s->finish_reason, fr);
  }
  openai_usage(s, cJSON_GetObjectItemCaseSensitive(j, "usage"));
  cJSON_Delete(j);
  return added;
}

static void anthropic_usage(mk_llm_stream_state *s, const cJSON *u) {
  if (!cJSON_IsObject(u)) return;
  /* Cached prompt tokens are billed too: they count as prompt tokens. */
  long in = num(u, "input_tokens") + num(u, "cache_creation_input_tokens") +
            num(u, "cache_read_input_tokens");
  if (in > 0) s->tokens_in = in;
  /* output_tokens in message_delta is cumulative, so assign. */
  if (cJSON_GetObjectItemCaseSensitive(u, "output_tokens")) s->tokens_out = num(u, "output_tokens");
  s->have_usage = true;
}

static size_t anthropic_event(mk_llm_stream_state *s, const char *event, const char *payload,
                              size_t len) {
  cJSON *j = cJSON_ParseWithLength(payload, len);
  if (!j) {
    s->error = MK_EPROTO;
    s->retryable_error = true;
    mk_errf(&s->err, MK_EPROTO, "malformed JSON in the reply stream (event %s)", event);
    return 0;
  }
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
  const char *t = cJSON_IsString(type) ? type->valuestring : event;
  size_t added = 0;
  if (strcmp(t, "message_start") == 0) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
    set_owned(&s->model, cJSON_GetObjectItemCaseSensitive(m, "model"));
    anthropic_usage(s, cJSON_GetObjectItemCaseSensitive(m, "usage"));
  } else if (strcmp(t, "content_block_delta") == 0) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "delta");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(d, "type");
    if (cJSON_IsString(dt) && strcmp(dt->valuestring, "text_delta") == 0)
      added += append_text(s, cJSON_GetObjectItemCaseSensitive(d, "text"));
  } else if (strcmp(t, "message_delta") == 0) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "delta");
    set_owned(&s->finish_reason, cJSON_GetObjectItemCaseSensitive(d, "stop_reason"));
    anthropic_usage(s, cJSON_GetObjectItemCaseSensitive(j, "usage"));
  } else if (strcmp(t, "message_stop") == 0) {
    s->done = true;
  } else if (strcmp(t, "error") == 0) {
    stream_error(s, cJSON_GetObjectItemCaseSensitive(j, "error"));
  } /* ping, content_block_start/stop: nothing to record */
  cJSON_Delete(j);
  return added;
}

size_t mk_llm_stream_event_(mk_llm_provider p, mk_llm_stream_state *s, const char *event,
                            const char *payload, size_t len) {
  if (s->error) return 0; /* the attempt has already failed */
  return p == MK_LLM_ANTHROPIC ? anthropic_event(s, event, payload, len)
                               : openai_event(s, payload, len);
}

int mk_llm_parse_body_(mk_llm_provider p, const char *body, size_t len, mk_llm_stream_state *s) {
  cJSON *j = cJSON_ParseWithLength(body, len);
  if (!j || !cJSON_IsObject(j)) {
    cJSON_Delete(j);
    s->retryable_error = true;
    return mk_errf(&s->err, MK_EPROTO, "the provider's reply is not valid JSON (%zu bytes)", len);
  }
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
  if (e && !cJSON_IsNull(e)) {
    stream_error(s, e);
    cJSON_Delete(j);
    return s->error;
  }
  set_owned(&s->model, cJSON_GetObjectItemCaseSensitive(j, "model"));
  int rc = 0;
  if (p == MK_LLM_ANTHROPIC) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(j, "content"), *blk;
    if (!cJSON_IsArray(content)) rc = MK_EPROTO;
    cJSON_ArrayForEach(blk, content) {
      const cJSON *bt = cJSON_GetObjectItemCaseSensitive(blk, "type");
      if (cJSON_IsString(bt) && strcmp(bt->valuestring, "text") == 0)
        append_text(s, cJSON_GetObjectItemCaseSensitive(blk, "text"));
    }
    set_owned(&s->finish_reason, cJSON_GetObjectItemCaseSensitive(j, "stop_reason"));
    anthropic_usage(s, cJSON_GetObjectItemCaseSensitive(j, "usage"));
  } else {
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(ch, "message");
    if (!cJSON_IsObject(msg)) rc = MK_EPROTO;
    append_text(s, cJSON_GetObjectItemCaseSensitive(msg, "content"));
    set_owned(&s->finish_reason, cJSON_GetObjectItemCaseSensitive(ch, "finish_reason"));
    openai_usage(s, cJSON_GetObjectItemCaseSensitive(j, "usage"));
  }
  cJSON_Delete(j);
  if (rc) {
    s->retryable_error = true;
    return mk_errf(&s->err, rc, "the provider's reply has no %s",
                   p == MK_LLM_ANTHROPIC ? "content array" : "choices[0].message");
  }
  s->done = true;
  return 0;
}

int mk_llm_build_body_(const mk_llm_config *c, const mk_llm_chat *chat, mk_buf *out) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return MK_ENOMEM;
  cJSON_AddStringToObject(o, "model", c->model);
  int max_tokens = chat->max_tokens > 0 ? chat->max_tokens : c->max_tokens;
  cJSON *msgs = cJSON_CreateArray();
  if (c->provider == MK_LLM_OPENAI && chat->system) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "system");
    cJSON_AddStringToObject(m, "content", chat->system);
    cJSON_AddItemToArray(msgs, m);
  }
  for (int i = 0; i < chat->nmessages; i++) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", chat->messages[i].role);
    cJSON_AddStringToObject(m, "content", chat->messages[i].content ? chat->messages[i].content : "");
    cJSON_AddItemToArray(msgs, m);
  }
  if (c->provider == MK_LLM_ANTHROPIC) {
    cJSON_AddNumberToObject(o, "max_tokens", max_tokens);
    if (chat->system) cJSON_AddStringToObject(o, "system", chat->system);
    cJSON_AddItemToObject(o, "messages", msgs);
  } else {
    cJSON_AddItemToObject(o, "messages", msgs);
    cJSON_AddNumberToObject(o, c->max_tokens_field ? c->max_tokens_field : "max_tokens",
                            max_tokens);
  }
  if (c->temperature >= 0) cJSON_AddNumberToObject(o, "temperature", c->temperature);
  if (c->stream) {
    cJSON_AddBoolToObject(o, "stream", 1);
    /* Without this OpenAI-compatible servers send no usage when streaming. */
    if (c->provider == MK_LLM_OPENAI) {
      cJSON *so = cJSON_AddObjectToObject(o, "stream_options");
      cJSON_AddBoolToObject(so, "include_usage", 1);
    }
  }
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!s) return MK_ENOMEM;
  int rc = mk_buf_puts(out, s);
  free(s);
  return rc;
}

char *mk_llm_error_message_(const char *body, size_t len) {
  cJSON *j = cJSON_ParseWithLength(body, len);
  if (!j) return NULL;
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
  const cJSON *m = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "message") : e;
  if (!cJSON_IsString(m)) m = cJSON_GetObjectItemCaseSensitive(j, "message");
  char *r = NULL;
  if (cJSON_IsString(m)) {
    size_t n = strlen(m->valuestring);
    r = mk_strndup(m->valuestring, n < 300 ? n : 300);
  }
  cJSON_Delete(j);
  return r;
}
