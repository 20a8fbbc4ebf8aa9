/* test_llm_sse.c — the server-sent-events parser, fed in every chunking. */
#include "mk_llm.h"
#include "mk_test.h"

#include <stdlib.h>

typedef struct {
  mk_buf out; /* "event|payload\n" per dispatched event */
  int n;
} sink;

static void collect(void *data, const char *event, const char *payload, size_t len) {
  sink *s = data;
  mk_buf_printf(&s->out, "%s|%.*s\n", event, (int)len, payload);
  s->n++;
}

static const char *STREAM =
    ": keep-alive\r\n"
    "event: message_start\r\n"
    "data: {\"a\":1}\r\n"
    "\r\n"
    "data: line one\n"
    "data: line two\n"
    "id: 7\n"
    "retry: 100\n"
    "\n"
    "data:no-space\r"
    "\r"
    "event: ignored-without-data\n"
    "\n"
    "data: [DONE]\n"
    "\n";

static const char *EXPECTED =
    "message_start|{\"a\":1}\n"
    "message|line one\nline two\n"
    "message|no-space\n"
    "message|[DONE]\n";

MK_TEST(llm_sse, every_chunking_gives_the_same_events) {
  size_t len = strlen(STREAM);
  for (size_t chunk = 1; chunk <= len; chunk++) {
    sink s = {0};
    mk_buf_init(&s.out, 0);
    mk_llm_sse p;
    mk_llm_sse_init(&p, 0, collect, &s);
    for (size_t off = 0; off < len; off += chunk) {
      size_t n = len - off < chunk ? len - off : chunk;
      MK_CHECK_INT(mk_llm_sse_feed(&p, STREAM + off, n), ==, 0);
    }
    MK_CHECK_INT(mk_llm_sse_finish(&p), ==, 0);
    MK_CHECK_INT(s.n, ==, 4);
    MK_CHECK_STR(mk_buf_cstr(&s.out), EXPECTED);
    mk_llm_sse_free(&p);
    mk_buf_free(&s.out);
  }
}

MK_TEST(llm_sse, truncated_event_is_reported_not_dispatched) {
  sink s = {0};
  mk_buf_init(&s.out, 0);
  mk_llm_sse p;
  mk_llm_sse_init(&p, 0, collect, &s);
  const char *t = "data: whole\n\ndata: {\"cut";
  MK_CHECK_INT(mk_llm_sse_feed(&p, t, strlen(t)), ==, 0);
  MK_CHECK_INT(mk_llm_sse_finish(&p), ==, 1);
  MK_CHECK_INT(s.n, ==, 1);
  MK_CHECK_STR(mk_buf_cstr(&s.out), "message|whole\n");
  /* An event without its blank line is also unfinished. */
  MK_CHECK_INT(mk_llm_sse_feed(&p, "data: x\n", 8), ==, 0);
  MK_CHECK_INT(mk_llm_sse_finish(&p), ==, 1);
  MK_CHECK_INT(s.n, ==, 1);
  mk_llm_sse_free(&p);
  mk_buf_free(&s.out);
}

MK_TEST(llm_sse, oversized_event_fails_cleanly) {
  sink s = {0};
  mk_buf_init(&s.out, 0);
  mk_llm_sse p;
  mk_llm_sse_init(&p, 64, collect, &s);
  char big[200];
  memset(big, 'x', sizeof big);
  MK_CHECK_INT(mk_llm_sse_feed(&p, "data: ", 6), ==, 0);
  MK_CHECK_INT(mk_llm_sse_feed(&p, big, sizeof big), ==, MK_ERANGE);
  MK_CHECK_INT(s.n, ==, 0);
  mk_llm_sse_free(&p);
  mk_buf_free(&s.out);
}
