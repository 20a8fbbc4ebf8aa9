/* test_util.c — mk_buf, mk_err, mk_sha256, mk_loop, mk_json, mk_time and mk_utf8. */
#include "mk_buf.h"
#include "mk_err.h"
#include "mk_json.h"
#include "mk_loop.h"
#include "mk_sha256.h"
#include "mk_test.h"
#include "mk_time.h"
#include "mk_utf8.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

MK_TEST(util, buf_grows_and_formats) {
  mk_buf b;
  mk_buf_init(&b, 0);
  for (int i = 0; i < 1000; i++) MK_CHECK_INT(mk_buf_printf(&b, "%d,", i), ==, 0);
  MK_CHECK(b.len > 3000);
  MK_CHECK(strncmp(mk_buf_cstr(&b), "0,1,2,", 6) == 0);
  mk_buf_free(&b);
}

MK_TEST(util, buf_cap_is_enforced_and_sticky) {
  mk_buf b;
  mk_buf_init(&b, 8);
  MK_CHECK_INT(mk_buf_puts(&b, "12345678"), ==, 0);
  MK_CHECK_INT(mk_buf_puts(&b, "9"), ==, MK_ERANGE);
  MK_CHECK_INT(mk_buf_puts(&b, ""), ==, MK_ERANGE); /* sticky */
  MK_CHECK(mk_buf_steal(&b, NULL) == NULL);
  mk_buf_free(&b);
}

MK_TEST(util, buf_escapes_json) {
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_json_str(&b, "a\"b\\c\n\x01");
  MK_CHECK_STR(mk_buf_cstr(&b), "\"a\\\"b\\\\c\\n\\u0001\"");
  mk_buf_free(&b);
}

MK_TEST(util, strlcpy_truncates) {
  char d[4];
  MK_CHECK_INT(mk_strlcpy(d, "abcdef", sizeof d), ==, MK_ERANGE);
  MK_CHECK_STR(d, "abc");
  MK_CHECK_INT(mk_strlcpy(d, "ab", sizeof d), ==, 0);
  MK_CHECK_STR(d, "ab");
}

MK_TEST(util, sha256_vectors) {
  char hex[65];
  mk_sha256_hex("", 0, hex);
  MK_CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  mk_sha256_hex("abc", 3, hex);
  MK_CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  mk_sha256_hex(m, strlen(m), hex);
  MK_CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

MK_TEST(util, read_file_limits) {
  char path[] = "/tmp/mk_test_read_XXXXXX";
  int fd = mkstemp(path);
  MK_REQUIRE(fd >= 0);
  close(fd);
  MK_CHECK_INT(mk_write_file(path, "hello world", 11), ==, 0);
  char *data = NULL;
  size_t n = 0;
  MK_CHECK_INT(mk_read_file(path, 100, &data, &n), ==, 0);
  MK_CHECK_STR(data, "hello world");
  free(data);
  MK_CHECK_INT(mk_read_file(path, 5, &data, &n), ==, MK_ERANGE);
  MK_CHECK_INT(mk_read_file("/nonexistent/x", 5, &data, &n), ==, MK_ENOENT);
  remove(path);
}

MK_TEST(util, strerror_names_every_code) {
  for (int c = 0; c >= MK_ESTALE; c--) MK_CHECK(strcmp(mk_strerror(c), "unknown error") != 0);
}

/* ---- mk_loop ------------------------------------------------------------ */

static void set_flag(uv_timer_t *t) { *(bool *)t->data = true; }

/* A zero-delay timer sets the flag while a far timer keeps the loop alive
 * (as idle worker pipes do): the wait must end with the flag, not with the
 * far timer. A UV_RUN_ONCE loop on libuv < 1.45 slept the full 5 s here. */
MK_TEST(util, loop_run_until_returns_when_a_timer_sets_the_flag) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  bool done = false, far_fired = false;
  uv_timer_t now_timer, far_timer;
  uv_timer_init(&loop, &now_timer);
  uv_timer_init(&loop, &far_timer);
  now_timer.data = &done;
  far_timer.data = &far_fired;
  uv_timer_start(&far_timer, set_flag, 5000, 0);
  /* First round: flag set from the timers at the top of an iteration. */
  uv_timer_start(&now_timer, set_flag, 0, 0);
  uint64_t t0 = uv_hrtime();
  MK_CHECK_INT(mk_loop_run_until(&loop, &done), ==, 0);
  /* Second round, as for the second file of `mkevolve analyze A B`. */
  done = false;
  uv_timer_start(&now_timer, set_flag, 0, 0);
  MK_CHECK_INT(mk_loop_run_until(&loop, &done), ==, 0);
  double ms = (double)(uv_hrtime() - t0) / 1e6;
  MK_CHECK(done);
  MK_CHECK(!far_fired);
  MK_CHECK(ms < 2000);
  uv_close((uv_handle_t *)&now_timer, NULL);
  uv_close((uv_handle_t *)&far_timer, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(&loop), ==, 0);
}

/* A loop with nothing left that could set the flag: an error, not a hang. */
MK_TEST(util, loop_run_until_reports_a_drained_loop) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  bool done = false;
  MK_CHECK_INT(mk_loop_run_until(&loop, &done), ==, MK_EIO);
  MK_CHECK_INT(uv_loop_close(&loop), ==, 0);
}

MK_TEST(util, strdup_printf_formats_into_a_new_string) {
  char *s = mk_strdup_printf("%s-%d", "ab", 42);
  MK_REQUIRE(s != NULL);
  MK_CHECK_STR(s, "ab-42");
  free(s);
  s = mk_strdup_printf("%s", "");
  MK_REQUIRE(s != NULL);
  MK_CHECK_STR(s, "");
  free(s);
}

MK_TEST(util, json_members_read_with_fallbacks_and_write_nulls) {
  cJSON *o = cJSON_Parse("{\"s\":\"x\",\"n\":2.5,\"b\":true}");
  MK_REQUIRE(o != NULL);
  MK_CHECK_STR(mk_json_str(o, "s", NULL), "x");
  MK_CHECK(mk_json_str(o, "n", NULL) == NULL);      /* not a string */
  MK_CHECK_STR(mk_json_str(o, "missing", "d"), "d");
  MK_CHECK(mk_json_str(NULL, "s", NULL) == NULL);   /* no object */
  MK_CHECK(mk_json_num(o, "n", -1) == 2.5);
  MK_CHECK(mk_json_num(o, "b", -1) == -1);          /* a bool is not a number */
  cJSON *w = cJSON_CreateObject();
  mk_json_add_str(w, "a", "v");
  mk_json_add_str(w, "b", NULL);
  mk_json_add_ms(w, "c", 0.0);
  mk_json_add_ms(w, "d", -1.0);
  char *text = cJSON_PrintUnformatted(w);
  MK_CHECK_STR(text, "{\"a\":\"v\",\"b\":null,\"c\":0,\"d\":null}");
  free(text);
  cJSON_Delete(w);
  cJSON_Delete(o);
}

MK_TEST(util, now_s_is_monotonic_seconds) {
  double a = mk_now_s();
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  double b = mk_now_s();
  MK_CHECK(b - a >= 0.019);
  MK_CHECK(b - a < 5.0);
}

MK_TEST(util, utf8_char_is_strict) {
  int u;
  MK_CHECK_INT(mk_utf8_char((const unsigned char *)"a", 1, &u), ==, 1);
  MK_CHECK_INT(u, ==, 1);
  MK_CHECK_INT(mk_utf8_char((const unsigned char *)"\xC3\xA9", 2, &u), ==, 2); /* é */
  MK_CHECK_INT(mk_utf8_char((const unsigned char *)"\xE4\xB8\xAD", 3, &u), ==, 3); /* 中 */
  MK_CHECK_INT(u, ==, 1);
  MK_CHECK_INT(mk_utf8_char((const unsigned char *)"\xF0\x9F\x98\x80", 4, &u), ==, 4); /* 😀 */
  MK_CHECK_INT(u, ==, 2);
  /* invalid: one byte, one unit each */
  const char *bad[] = {"\x80", "\xFF", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    MK_CHECK_INT(mk_utf8_char((const unsigned char *)bad[i], strlen(bad[i]), &u), ==, 1);
    MK_CHECK_INT(u, ==, 1);
  }
  MK_CHECK_INT(mk_utf8_char((const unsigned char *)"\xE4\xB8", 2, NULL), ==, 1); /* truncated */
}
