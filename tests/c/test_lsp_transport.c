/* test_lsp_transport.c — Content-Length framing against hostile input. */
#include "mk_lsp_transport.h"
#include "mk_test.h"

#include <stdlib.h>
#include <string.h>

#define MAXGOT 32

typedef struct {
  char *bodies[MAXGOT];
  int nbodies;
  mk_lsp_frame_error errors[MAXGOT];
  int nerrors;
} got;

static void on_msg(void *ctx, const char *body, size_t len) {
  got *g = ctx;
  MK_CHECK(body[len] == '\0');
  if (g->nbodies < MAXGOT) g->bodies[g->nbodies++] = strndup(body, len);
}

static void on_err(void *ctx, mk_lsp_frame_error kind, const char *why) {
  got *g = ctx;
  MK_CHECK(why != NULL && *why);
  if (g->nerrors < MAXGOT) g->errors[g->nerrors++] = kind;
}

static void got_free(got *g) {
  for (int i = 0; i < g->nbodies; i++) free(g->bodies[i]);
}

/* Feeds `in` (len bytes) in pieces of `step` bytes to a fresh framer. */
static void run(const char *in, size_t len, size_t step, size_t max_body, got *g) {
  memset(g, 0, sizeof *g);
  mk_lsp_framer f;
  mk_lsp_framer_init(&f, max_body);
  mk_lsp_frame_handler h = {on_msg, on_err, g};
  for (size_t i = 0; i < len; i += step) {
    size_t n = len - i < step ? len - i : step;
    MK_CHECK_INT(mk_lsp_framer_feed(&f, in + i, n, &h), ==, 0);
  }
  mk_lsp_framer_eof(&f, &h);
  mk_lsp_framer_free(&f);
}

static const char TWO[] = "Content-Length: 7\r\n\r\n{\"a\":1}Content-Length: 2\r\n\r\n[]";

MK_TEST(lsp_transport, several_messages_per_read) {
  got g;
  run(TWO, strlen(TWO), 4096, 0, &g);
  MK_CHECK_INT(g.nbodies, ==, 2);
  MK_CHECK_INT(g.nerrors, ==, 0);
  if (g.nbodies == 2) {
    MK_CHECK_STR(g.bodies[0], "{\"a\":1}");
    MK_CHECK_STR(g.bodies[1], "[]");
  }
  got_free(&g);
}

MK_TEST(lsp_transport, partial_reads_byte_by_byte) {
  for (size_t step = 1; step <= 9; step++) {
    got g;
    run(TWO, strlen(TWO), step, 0, &g);
    MK_CHECK_INT(g.nbodies, ==, 2);
    MK_CHECK_INT(g.nerrors, ==, 0);
    if (g.nbodies == 2) MK_CHECK_STR(g.bodies[1], "[]");
    got_free(&g);
  }
}

MK_TEST(lsp_transport, headers_case_and_extra_fields) {
  const char *in = "content-length:   3 \r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
                   "\r\nabc";
  got g;
  run(in, strlen(in), 5, 0, &g);
  MK_CHECK_INT(g.nbodies, ==, 1);
  MK_CHECK_INT(g.nerrors, ==, 0);
  if (g.nbodies) MK_CHECK_STR(g.bodies[0], "abc");
  got_free(&g);
}

MK_TEST(lsp_transport, bad_headers_resync_to_next_message) {
  const char *cases[] = {
      "garbage without colon\r\n\r\n{}Content-Length: 2\r\n\r\nok",
      "Content-Length: 12x\r\n\r\n{}Content-Length: 2\r\n\r\nok",
      "Content-Length: \r\n\r\nContent-Length: 2\r\n\r\nok",
      "Content-Length: 99999999999999999999999999\r\n\r\nContent-Length: 2\r\n\r\nok",
      "Content-Type: x\r\n\r\n{}Content-Length: 2\r\n\r\nok",
      "Content-Length: 2\r\nContent-Length: 3\r\n\r\nabcContent-Length: 2\r\n\r\nok",
      /* LF-only framing: dropped, and the well-framed message after it kept */
      "Content-Length: 2\n\n{}Content-Length: 2\r\n\r\nok",
      "Content-Length: 2\r\n\n{}Content-Length: 2\r\n\r\nok",
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (size_t step = 1; step <= 64; step *= 4) {
      got g;
      run(cases[i], strlen(cases[i]), step, 0, &g);
      MK_CHECK_INT(g.nerrors, >=, 1);
      if (g.nerrors) MK_CHECK_INT(g.errors[0], ==, MK_LSP_FRAME_BAD_HEADER);
      MK_CHECK_INT(g.nbodies, ==, 1);
      if (g.nbodies) MK_CHECK_STR(g.bodies[g.nbodies - 1], "ok");
      got_free(&g);
    }
  }
}

MK_TEST(lsp_transport, size_cap_skips_body) {
  char in[512];
  char big[200];
  memset(big, 'x', sizeof big);
  int n = snprintf(in, sizeof in, "Content-Length: 200\r\n\r\n%.200sContent-Length: 2\r\n\r\nok", big);
  for (size_t step = 1; step <= 256; step *= 4) {
    got g;
    run(in, (size_t)n, step, 100, &g);
    MK_CHECK_INT(g.nerrors, ==, 1);
    if (g.nerrors) MK_CHECK_INT(g.errors[0], ==, MK_LSP_FRAME_TOO_LARGE);
    MK_CHECK_INT(g.nbodies, ==, 1);
    if (g.nbodies) MK_CHECK_STR(g.bodies[0], "ok");
    got_free(&g);
  }
}

MK_TEST(lsp_transport, header_without_end_is_bounded) {
  size_t n = MK_LSP_MAX_HEADER * 3;
  char *in = malloc(n + 64);
  MK_REQUIRE(in != NULL);
  memset(in, 'H', n);
  memcpy(in + n, "\r\n\r\nContent-Length: 2\r\n\r\nok", 28);
  got g;
  run(in, n + 28, 1000, 0, &g);
  MK_CHECK_INT(g.nerrors, >=, 1);
  if (g.nerrors) MK_CHECK_INT(g.errors[0], ==, MK_LSP_FRAME_HEADER_TOO_LONG);
  MK_CHECK_INT(g.nbodies, ==, 1);
  got_free(&g);
  free(in);
}

MK_TEST(lsp_transport, invalid_utf8_body_dropped) {
  const char in[] = "Content-Length: 4\r\n\r\n\"\xff\xfe\"Content-Length: 2\r\n\r\nok";
  got g;
  run(in, sizeof in - 1, 3, 0, &g);
  MK_CHECK_INT(g.nerrors, ==, 1);
  if (g.nerrors) MK_CHECK_INT(g.errors[0], ==, MK_LSP_FRAME_BAD_UTF8);
  MK_CHECK_INT(g.nbodies, ==, 1);
  got_free(&g);
}

MK_TEST(lsp_transport, truncated_at_eof) {
  const char *in = "Content-Length: 10\r\n\r\nabc";
  got g;
  run(in, strlen(in), 2, 0, &g);
  MK_CHECK_INT(g.nbodies, ==, 0);
  MK_CHECK_INT(g.nerrors, ==, 1);
  if (g.nerrors) MK_CHECK_INT(g.errors[0], ==, MK_LSP_FRAME_TRUNCATED);
  got_free(&g);
}

MK_TEST(lsp_transport, utf8_validation) {
  MK_CHECK(mk_lsp_utf8_valid("plain", 5));
  MK_CHECK(mk_lsp_utf8_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9)); /* é € 😀 */
  MK_CHECK(!mk_lsp_utf8_valid("\xc0\x80", 2));          /* overlong NUL */
  MK_CHECK(!mk_lsp_utf8_valid("\xe0\x80\xaf", 3));      /* overlong '/' */
  MK_CHECK(!mk_lsp_utf8_valid("\xed\xa0\x80", 3));      /* surrogate */
  MK_CHECK(!mk_lsp_utf8_valid("\xf4\x90\x80\x80", 4));  /* above U+10FFFF */
  MK_CHECK(!mk_lsp_utf8_valid("\xe2\x82", 2));          /* cut short */
  MK_CHECK(!mk_lsp_utf8_valid("\x80", 1));              /* lone continuation */
}

static void mem_msg(void *ctx, const char *body, size_t len) { on_msg(ctx, body, len); }

MK_TEST(lsp_transport, memory_transport_frames_output) {
  mk_buf out;
  mk_buf_init(&out, 0);
  got g;
  memset(&g, 0, sizeof g);
  mk_lsp_transport_events ev = {{mem_msg, on_err, &g}, NULL};
  mk_lsp_transport *t;
  MK_REQUIRE(mk_lsp_transport_memory(&ev, &out, 0, &t) == 0);
  MK_CHECK_INT(mk_lsp_transport_send(t, "{\"x\":\"\xc3\xa9\"}", 11), ==, 0);
  MK_CHECK_STR(mk_buf_cstr(&out), "Content-Length: 11\r\n\r\n{\"x\":\"\xc3\xa9\"}");
  MK_CHECK_INT(mk_lsp_transport_feed(t, TWO, strlen(TWO)), ==, 0);
  MK_CHECK_INT(g.nbodies, ==, 2);
  mk_lsp_transport_close(t);
  got_free(&g);
  mk_buf_free(&out);
}
