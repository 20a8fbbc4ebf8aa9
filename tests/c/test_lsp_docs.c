/* test_lsp_docs.c — document store: UTF-16 positions, incremental sync. */
#include "mk_lsp_docs.h"
#include "mk_test.h"

#include <stdlib.h>
#include <string.h>

/* "aé😀b": bytes a(1) é(2) 😀(4) b(1); UTF-16 units a é 😀😀 b. */
static const char LINE[] = "a\xc3\xa9\xf0\x9f\x98\x80" "b";

MK_TEST(lsp_docs, utf16_conversions) {
  size_t n = strlen(LINE);
  MK_CHECK_INT(mk_lsp_utf16_to_byte(LINE, n, 0), ==, 0);
  MK_CHECK_INT(mk_lsp_utf16_to_byte(LINE, n, 1), ==, 1);
  MK_CHECK_INT(mk_lsp_utf16_to_byte(LINE, n, 2), ==, 3);
  MK_CHECK_INT(mk_lsp_utf16_to_byte(LINE, n, 3), ==, 3); /* inside the pair: rounds down */
  MK_CHECK_INT(mk_lsp_utf16_to_byte(LINE, n, 4), ==, 7);
  MK_CHECK_INT(mk_lsp_utf16_to_byte(LINE, n, 5), ==, 8);
  MK_CHECK_INT(mk_lsp_utf16_to_byte(LINE, n, 99), ==, 8); /* clamps */
  MK_CHECK_INT(mk_lsp_byte_to_utf16(LINE, n, 1), ==, 1);
  MK_CHECK_INT(mk_lsp_byte_to_utf16(LINE, n, 3), ==, 2);
  MK_CHECK_INT(mk_lsp_byte_to_utf16(LINE, n, 5), ==, 2); /* mid-sequence: rounds down */
  MK_CHECK_INT(mk_lsp_byte_to_utf16(LINE, n, 7), ==, 4);
  MK_CHECK_INT(mk_lsp_byte_to_utf16(LINE, n, 8), ==, 5);
  MK_CHECK_INT(mk_lsp_byte_to_utf16(LINE, n, 100), ==, 5);
}

/* é: 2 bytes, 1 unit; 中: 3 bytes, 1 unit; 😀: 4 bytes, 2 units. */
MK_TEST(lsp_docs, utf16_columns_of_wide_characters) {
  const char *t = "x = \"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\" # z";
  size_t n = strlen(t);
  MK_CHECK_INT(mk_lsp_byte_to_utf16(t, n, 5), ==, 5);  /* é */
  MK_CHECK_INT(mk_lsp_byte_to_utf16(t, n, 7), ==, 6);  /* 中 */
  MK_CHECK_INT(mk_lsp_byte_to_utf16(t, n, 10), ==, 7); /* 😀 */
  MK_CHECK_INT(mk_lsp_byte_to_utf16(t, n, 14), ==, 9); /* closing quote */
  MK_CHECK_INT(mk_lsp_byte_to_utf16(t, n, 12), ==, 7); /* inside 😀: rounds down */
  MK_CHECK_INT(mk_lsp_utf16_to_byte(t, n, 8), ==, 10); /* inside the surrogate pair */
  MK_CHECK_INT(mk_lsp_utf16_to_byte(t, n, 9), ==, 14);
}

/* Invalid UTF-8 counts one unit per byte, and every byte boundary maps to
 * a column and back. */
MK_TEST(lsp_docs, invalid_utf8_counts_one_unit_per_byte) {
  /* a stray continuation, 0xFF, an overlong '/', a UTF-16 surrogate, a truncated 3-byte sequence */
  const char t[] = "\x80\xFF\xC0\xAF\xED\xA0\x80\xE4\xB8z";
  size_t len = sizeof t - 1;
  MK_CHECK_INT(mk_lsp_byte_to_utf16(t, len, len), ==, 10);
  for (size_t off = 0; off <= len; off++)
    MK_CHECK_INT(mk_lsp_utf16_to_byte(t, len, mk_lsp_byte_to_utf16(t, len, off)), ==, off);
}

MK_TEST(lsp_docs, roundtrip_every_byte_of_mixed_text) {
  const char *t = "def f(\xC3\xA9): return '\xF0\x9F\x98\x80' # \xE4\xB8\xAD";
  size_t n = strlen(t);
  for (size_t off = 0; off <= n; off++) {
    size_t back = mk_lsp_utf16_to_byte(t, n, mk_lsp_byte_to_utf16(t, n, off));
    MK_CHECK(back <= off); /* exact unless inside a character */
    MK_CHECK(off - back < 4);
  }
}

static int change(mk_lsp_doc *d, const char *json, int version) {
  cJSON *c = cJSON_Parse(json);
  MK_CHECK(c != NULL);
  mk_errmsg err = {{0}};
  int rc = mk_lsp_doc_apply_changes(d, c, version, &err);
  cJSON_Delete(c);
  return rc;
}

MK_TEST(lsp_docs, incremental_sync) {
  mk_lsp_docs docs;
  mk_lsp_docs_init(&docs);
  mk_lsp_doc *d;
  const char *text = "x = 1\r\ny = \"\xf0\x9f\x98\x80\"\nz\n";
  MK_REQUIRE(mk_lsp_docs_open(&docs, "file:///t/a.py", "python", 1, text, strlen(text), &d) == 0);
  MK_CHECK_INT(mk_lsp_doc_line_count(d), ==, 4);
  uint64_t g = d->generation;
  int rc;
  /* Insert after the emoji (UTF-16 col 7 = y,space,=,space,",😀 pair). */
  rc = change(d, "[{\"range\":{\"start\":{\"line\":1,\"character\":7},\"end\":{\"line\":1,"
                         "\"character\":7}},\"text\":\"!\"}]", 2);
  MK_CHECK_INT(rc, ==, 0);
  MK_CHECK_STR(mk_buf_cstr(&d->text), "x = 1\r\ny = \"\xf0\x9f\x98\x80!\"\nz\n");
  MK_CHECK_INT(d->version, ==, 2);
  MK_CHECK(d->generation != g);
  /* Delete across the CRLF line break, then two changes in sequence. */
  rc = change(d, "[{\"range\":{\"start\":{\"line\":0,\"character\":5},\"end\":{\"line\":1,"
                         "\"character\":0}},\"text\":\"; \"},"
                         "{\"range\":{\"start\":{\"line\":0,\"character\":0},\"end\":{\"line\":0,"
                         "\"character\":1}},\"text\":\"w\"}]", 3);
  MK_CHECK_INT(rc, ==, 0);
  MK_CHECK_STR(mk_buf_cstr(&d->text), "w = 1; y = \"\xf0\x9f\x98\x80!\"\nz\n");
  /* Past-the-end positions clamp to the end of the document. */
  rc = change(d, "[{\"range\":{\"start\":{\"line\":9,\"character\":0},\"end\":{\"line\":12,"
                         "\"character\":4}},\"text\":\"tail\"}]", 4);
  MK_CHECK_INT(rc, ==, 0);
  MK_CHECK_STR(mk_buf_cstr(&d->text), "w = 1; y = \"\xf0\x9f\x98\x80!\"\nz\ntail");
  /* Inverted range and malformed change: refused, text and version kept. */
  rc = change(d, "[{\"range\":{\"start\":{\"line\":1,\"character\":1},\"end\":{\"line\":0,"
                         "\"character\":0}},\"text\":\"X\"}]", 5);
  MK_CHECK_INT(rc, ==, MK_EINVAL);
  rc = change(d, "[{\"text\":\"ok\"},{\"range\":5,\"text\":\"X\"}]", 5);
  MK_CHECK_INT(rc, ==, MK_EINVAL);
  rc = change(d, "{}", 5);
  MK_CHECK_INT(rc, ==, MK_EINVAL);
  MK_CHECK_STR(mk_buf_cstr(&d->text), "w = 1; y = \"\xf0\x9f\x98\x80!\"\nz\ntail");
  MK_CHECK_INT(d->version, ==, 4);
  /* Full replacement. */
  rc = change(d, "[{\"text\":\"new\\n\"}]", 6);
  MK_CHECK_INT(rc, ==, 0);
  MK_CHECK_STR(mk_buf_cstr(&d->text), "new\n");
  MK_CHECK_INT(mk_lsp_doc_line_count(d), ==, 2);
  MK_CHECK(mk_lsp_docs_get(&docs, "file:///t/a.py") == d);
  MK_CHECK_INT(mk_lsp_docs_close(&docs, "file:///t/a.py"), ==, 0);
  MK_CHECK_INT(mk_lsp_docs_close(&docs, "file:///t/a.py"), ==, MK_ENOENT);
  mk_lsp_docs_free(&docs);
}

MK_TEST(lsp_docs, positions_in_document) {
  mk_lsp_docs docs;
  mk_lsp_docs_init(&docs);
  mk_lsp_doc *d;
  const char *text = "ab\r\xc3\xa9z\n";
  MK_REQUIRE(mk_lsp_docs_open(&docs, "u", "", 0, text, strlen(text), &d) == 0);
  MK_CHECK_INT(mk_lsp_doc_offset(d, 1, 1), ==, 5); /* lone CR ends a line */
  MK_CHECK_INT(mk_lsp_doc_utf16_col(d, 1, 3), ==, 2);
  MK_CHECK_INT(mk_lsp_doc_offset(d, 0, 50), ==, 2);
  MK_CHECK_INT(mk_lsp_doc_offset(d, 2, 0), ==, 7);
  MK_CHECK_INT(mk_lsp_doc_offset(d, 40, 3), ==, 7);
  mk_lsp_docs_free(&docs);
}

MK_TEST(lsp_docs, uris) {
  char *p = mk_lsp_uri_to_path("file:///home/u/my%20model%C3%A9.py");
  MK_CHECK_STR(p, "/home/u/my model\xc3\xa9.py");
  char *u = mk_lsp_path_to_uri(p);
  MK_CHECK_STR(u, "file:///home/u/my%20model%C3%A9.py");
  free(p);
  free(u);
  MK_CHECK(mk_lsp_uri_to_path("untitled:Untitled-1") == NULL);
  MK_CHECK(mk_lsp_uri_to_path("file:///a%00b") == NULL);
  p = mk_lsp_uri_to_path("file://localhost/x.py");
  MK_CHECK_STR(p, "/x.py");
  free(p);
}
