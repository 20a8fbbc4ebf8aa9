/* test_cache.c — cache keys (canonical, order-free, stable) and the SQLite
 * store, including two processes writing the same file at once. */
#include "mk_buf.h"
#include "mk_cache.h"
#include "mk_test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void tmp_path(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "/tmp/mk_test_cache.%d/%s", (int)getpid(), name);
}

static void cleanup(const char *path) {
  char b[1100];
  snprintf(b, sizeof b, "%s", path);
  unlink(b);
  snprintf(b, sizeof b, "%s-wal", path);
  unlink(b);
  snprintf(b, sizeof b, "%s-shm", path);
  unlink(b);
  char *slash = strrchr((char *)path, '/');
  if (slash) {
    snprintf(b, sizeof b, "%.*s", (int)(slash - path), path);
    rmdir(b);
  }
}

static void key_of(char hex[65], const char *kind, const char *a, const char *b) {
  mk_cache_key k;
  mk_cache_key_init(&k, kind);
  mk_cache_key_str(&k, "a", a);
  mk_cache_key_str(&k, "b", b);
  MK_CHECK_INT(mk_cache_key_final(&k, hex), ==, 0);
}

MK_TEST(cache, key_is_order_free_and_sensitive) {
  char h1[65], h2[65], h3[65], h4[65], h5[65];
  key_of(h1, "verify", "x", "y");
  mk_cache_key k;
  mk_cache_key_init(&k, "verify");
  mk_cache_key_str(&k, "b", "y");
  mk_cache_key_str(&k, "a", "x");
  MK_CHECK_INT(mk_cache_key_final(&k, h2), ==, 0);
  MK_CHECK_STR(h1, h2);
  key_of(h3, "verify", "x", "z");
  MK_CHECK(strcmp(h1, h3) != 0);
  key_of(h4, "capture", "x", "y");
  MK_CHECK(strcmp(h1, h4) != 0);
  /* Field boundaries matter: ("xy", "") differs from ("x", "y"). */
  key_of(h5, "verify", "xy", "");
  MK_CHECK(strcmp(h1, h5) != 0);
  char n1[65], n2[65];
  key_of(n1, "verify", "x", NULL);
  key_of(n2, "verify", "x", "");
  MK_CHECK(strcmp(n1, n2) != 0);
  MK_CHECK_INT(strlen(h1), ==, 64);
}

MK_TEST(cache, key_is_stable_across_versions) {
  /* Pinned: a change here orphans every user's cache; bump "mkcache/N". */
  char h[65];
  key_of(h, "verify", "x", "y");
  mk_cache_key k;
  mk_cache_key_init(&k, "verify");
  mk_cache_key_str(&k, "a", "x");
  mk_cache_key_str(&k, "b", "y");
  char again[65];
  mk_cache_key_final(&k, again);
  MK_CHECK_STR(h, again);
  /* = sha256("mkcache/1\0verify\0" "a\0s" sha256("x") "b\0s" sha256("y")), by Python. */
  MK_CHECK_STR(h, "5d0d1dde26f163952973f2569b3dfee297466fe610a993dfb1c642e60fad2798");
}

MK_TEST(cache, key_errors) {
  char h[65];
  mk_cache_key k;
  mk_cache_key_init(&k, "verify");
  mk_cache_key_str(&k, "a", "1");
  MK_CHECK_INT(mk_cache_key_str(&k, "a", "2"), ==, MK_EINVAL);
  MK_CHECK_INT(mk_cache_key_final(&k, h), ==, MK_EINVAL);
  MK_CHECK_STR(h, "");
  mk_cache_key_init(&k, "");
  MK_CHECK_INT(mk_cache_key_final(&k, h), ==, MK_EINVAL);
  mk_cache_key_init(&k, "many");
  char name[16];
  for (int i = 0; i < MK_CACHE_MAX_FIELDS; i++) {
    snprintf(name, sizeof name, "f%d", i);
    MK_CHECK_INT(mk_cache_key_int(&k, name, i), ==, 0);
  }
  MK_CHECK_INT(mk_cache_key_int(&k, "one_more", 1), ==, MK_ERANGE);
  mk_cache_key_init(&k, "long");
  MK_CHECK_INT(mk_cache_key_str(&k, "a_field_name_that_is_far_too_long_to_be_a_cache_key_name", "x"),
               ==, MK_EINVAL);
}

MK_TEST(cache, key_numbers_and_json) {
  char h1[65], h2[65], h3[65];
  mk_cache_key k;
  mk_cache_key_init(&k, "t");
  mk_cache_key_double(&k, "atol", 1e-4);
  mk_cache_key_final(&k, h1);
  mk_cache_key_init(&k, "t");
  mk_cache_key_double(&k, "atol", 1.0001e-4);
  mk_cache_key_final(&k, h2);
  MK_CHECK(strcmp(h1, h2) != 0);

  cJSON *a = cJSON_Parse("{\"b\": [1, 2.5, {\"y\": null, \"x\": true}], \"a\": \"s\"}");
  cJSON *b = cJSON_Parse("{\"a\":\"s\",\"b\":[1,2.5,{\"x\":true,\"y\":null}]}");
  cJSON *c = cJSON_Parse("{\"a\":\"s\",\"b\":[2.5,1,{\"x\":true,\"y\":null}]}");
  mk_buf out;
  mk_buf_init(&out, 0);
  mk_cache_canonical_json(a, &out);
  MK_CHECK_STR(mk_buf_cstr(&out), "{\"a\":\"s\",\"b\":[1,2.5,{\"x\":true,\"y\":null}]}");
  mk_buf_reset(&out);
  cJSON *empty = cJSON_Parse("{\"e\":{},\"l\":[],\"n\":-3,\"f\":0.1}");
  mk_cache_canonical_json(empty, &out);
  MK_CHECK_STR(mk_buf_cstr(&out), "{\"e\":{},\"f\":0.10000000000000001,\"l\":[],\"n\":-3}");
  cJSON_Delete(empty);
  mk_buf_free(&out);
  mk_cache_key_init(&k, "t");
  mk_cache_key_json(&k, "g", a);
  mk_cache_key_final(&k, h1);
  mk_cache_key_init(&k, "t");
  mk_cache_key_json(&k, "g", b);
  mk_cache_key_final(&k, h2);
  mk_cache_key_init(&k, "t");
  mk_cache_key_json(&k, "g", c);
  mk_cache_key_final(&k, h3);
  MK_CHECK_STR(h1, h2);
  MK_CHECK(strcmp(h1, h3) != 0); /* arrays keep their order */
  cJSON_Delete(a);
  cJSON_Delete(b);
  cJSON_Delete(c);

  char c1[65], c2[65], c3[65], c4[65];
  MK_CHECK_INT(mk_cache_capture_key("abc", "Model", 0, "2.13.0", "w1", c1), ==, 0);
  mk_cache_capture_key("abc", "Model", 2, "2.13.0", "w1", c2);
  mk_cache_capture_key("abc", "Model", 0, "2.11.0+cu130", "w1", c3);
  mk_cache_capture_key("abc", "Model", 0, "2.13.0", "w2", c4); /* another worker records otherwise */
  MK_CHECK(strcmp(c1, c2) != 0);
  MK_CHECK(strcmp(c1, c3) != 0);
  MK_CHECK(strcmp(c1, c4) != 0);
}

MK_TEST(cache, put_get_replace_delete) {
  char path[512];
  tmp_path(path, sizeof path, "a/b/cache.sqlite"); /* directories are created */
  mk_cache *c = NULL;
  mk_errmsg err;
  int rc = mk_cache_open(path, 0, &c, &err);
  if (rc) fprintf(stderr, "open: %s\n", err.text);
  MK_REQUIRE(rc == 0);
  MK_CHECK_STR(mk_cache_path(c), path);
  char *v = NULL;
  size_t len = 0;
  MK_CHECK_INT(mk_cache_get(c, "k1", &v, &len, &err), ==, MK_ENOENT);
  MK_CHECK(v == NULL);
  const char *j1 = "{\"status\":\"pass\",\"text\":\"caf\xc3\xa9\"}";
  MK_CHECK_INT(mk_cache_put(c, "k1", "verify", j1, strlen(j1), &err), ==, 0);
  MK_CHECK_INT(mk_cache_get(c, "k1", &v, &len, &err), ==, 0);
  MK_CHECK_STR(v, j1);
  MK_CHECK_INT(len, ==, strlen(j1));
  free(v);
  MK_CHECK_INT(mk_cache_put(c, "k1", "verify", "{}", 2, &err), ==, 0);
  MK_CHECK_INT(mk_cache_get(c, "k1", &v, &len, &err), ==, 0);
  MK_CHECK_STR(v, "{}");
  free(v);
  mk_cache_put(c, "k2", "capture", "[]", 2, &err);
  MK_CHECK_INT(mk_cache_count(c, NULL), ==, 2);
  MK_CHECK_INT(mk_cache_count(c, "capture"), ==, 1);
  MK_CHECK_INT(mk_cache_delete(c, "k1", &err), ==, 0);
  MK_CHECK_INT(mk_cache_get(c, "k1", &v, &len, &err), ==, MK_ENOENT);
  MK_CHECK_INT(mk_cache_clear(c, "capture", &err), ==, 0);
  MK_CHECK_INT(mk_cache_count(c, NULL), ==, 0);
  mk_cache_close(c);
  /* Persisted across handles. */
  MK_REQUIRE(mk_cache_open(path, 0, &c, &err) == 0);
  mk_cache_put(c, "k3", "verify", "3", 1, &err);
  mk_cache_close(c);
  MK_REQUIRE(mk_cache_open(path, 0, &c, &err) == 0);
  MK_CHECK_INT(mk_cache_get(c, "k3", &v, &len, &err), ==, 0);
  MK_CHECK_STR(v, "3");
  free(v);
  mk_cache_close(c);
  cleanup(path);
  char d[512];
  tmp_path(d, sizeof d, "a");
  rmdir(d);
  tmp_path(d, sizeof d, "");
  rmdir(d);
}

MK_TEST(cache, default_path) {
  const char *old = getenv("MKEVOLVE_CACHE_DIR");
  char keep[512] = "";
  if (old) snprintf(keep, sizeof keep, "%s", old);
  setenv("MKEVOLVE_CACHE_DIR", "/x/y", 1);
  mk_buf b;
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_cache_default_path(&b), ==, 0);
  MK_CHECK_STR(mk_buf_cstr(&b), "/x/y/cache.sqlite");
  mk_buf_reset(&b);
  unsetenv("MKEVOLVE_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  if (!xdg) {
    mk_cache_default_path(&b);
    MK_CHECK(strstr(mk_buf_cstr(&b), "/.cache/mkevolve/cache.sqlite") != NULL);
  }
  mk_buf_free(&b);
  if (old) setenv("MKEVOLVE_CACHE_DIR", keep, 1);
}

MK_TEST(cache, bad_files_give_clear_errors) {
  mk_cache *c = NULL;
  mk_errmsg err;
  MK_CHECK(mk_cache_open("/proc/mk_no_such_dir/cache.sqlite", 0, &c, &err) != 0);
  MK_CHECK(c == NULL);
  MK_CHECK(strstr(err.text, "/proc/mk_no_such_dir") != NULL);
  char path[512];
  tmp_path(path, sizeof path, "corrupt.sqlite");
  char dir[512];
  tmp_path(dir, sizeof dir, "");
  mkdir(dir, 0755);
  FILE *f = fopen(path, "w");
  MK_REQUIRE(f != NULL);
  for (int i = 0; i < 200; i++) fputs("this is not an SQLite database at all. ", f);
  fclose(f);
  MK_CHECK(mk_cache_open(path, 0, &c, &err) != 0);
  MK_CHECK(c == NULL);
  MK_CHECK(strstr(err.text, path) != NULL);
  cleanup(path);
}

/* Two processes hammer the same file; neither loses a write. */
static int child_writes(const char *path, int who, int n) {
  mk_cache *c = NULL;
  mk_errmsg err;
  if (mk_cache_open(path, 20000, &c, &err) != 0) {
    fprintf(stderr, "child %d: %s\n", who, err.text);
    return 100;
  }
  int bad = 0;
  char key[64], val[64];
  for (int i = 0; i < n; i++) {
    snprintf(key, sizeof key, "w%d-%d", who, i);
    snprintf(val, sizeof val, "{\"who\":%d,\"i\":%d}", who, i);
    if (mk_cache_put(c, key, "stress", val, strlen(val), &err) != 0) {
      fprintf(stderr, "child %d put: %s\n", who, err.text);
      bad++;
    }
    /* Read the other writer's entries while it writes. */
    snprintf(key, sizeof key, "w%d-%d", 1 - who, i / 2);
    char *v = NULL;
    int rc = mk_cache_get(c, key, &v, NULL, &err);
    if (rc != 0 && rc != MK_ENOENT) bad++;
    free(v);
  }
  mk_cache_close(c);
  return bad > 99 ? 99 : bad;
}

MK_TEST(cache, two_processes_write_concurrently) {
  char path[512];
  tmp_path(path, sizeof path, "shared.sqlite");
  enum { N = 300 };
  pid_t kids[2];
  for (int who = 0; who < 2; who++) {
    kids[who] = fork();
    MK_REQUIRE(kids[who] >= 0);
    if (kids[who] == 0) _exit(child_writes(path, who, N));
  }
  for (int who = 0; who < 2; who++) {
    int st = 0;
    MK_CHECK(waitpid(kids[who], &st, 0) == kids[who]);
    MK_CHECK(WIFEXITED(st));
    MK_CHECK_INT(WEXITSTATUS(st), ==, 0);
  }
  mk_cache *c = NULL;
  mk_errmsg err;
  MK_REQUIRE(mk_cache_open(path, 0, &c, &err) == 0);
  MK_CHECK_INT(mk_cache_count(c, "stress"), ==, 2 * N);
  char *v = NULL;
  MK_CHECK_INT(mk_cache_get(c, "w1-299", &v, NULL, &err), ==, 0);
  MK_CHECK_STR(v, "{\"who\":1,\"i\":299}");
  free(v);
  mk_cache_close(c);
  cleanup(path);
}

/* Two machines' caches: one exported to a file of its own, merged into the
 * other by key (what is there stays, what is missing is added), twice
 * without adding anything the second time. */
MK_TEST(cache, export_and_merge_by_key) {
  char a_path[512], b_path[512], x_path[512];
  tmp_path(a_path, sizeof a_path, "node_a/cache.sqlite");
  tmp_path(b_path, sizeof b_path, "node_b/cache.sqlite");
  tmp_path(x_path, sizeof x_path, "node_b/export?#%.sqlite"); /* URI characters in the name */
  mk_cache *a = NULL, *b = NULL;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_cache_open(a_path, 0, &a, &err) == 0);
  MK_REQUIRE(mk_cache_open(b_path, 0, &b, &err) == 0);
  MK_CHECK_INT(mk_cache_put(a, "shared", "verify", "{\"from\":\"a\"}", 12, &err), ==, 0);
  MK_CHECK_INT(mk_cache_put(a, "only_a", "verify", "{}", 2, &err), ==, 0);
  MK_CHECK_INT(mk_cache_put(b, "shared", "verify", "{\"from\":\"b\"}", 12, &err), ==, 0);
  MK_CHECK_INT(mk_cache_put(b, "only_b", "capture", "[]", 2, &err), ==, 0);
  unlink(x_path);
  int rc = mk_cache_export(b, x_path, &err);
  if (rc) fprintf(stderr, "export: %s\n", err.text);
  MK_REQUIRE(rc == 0);
  MK_CHECK_INT(mk_cache_export(b, x_path, &err), !=, 0); /* never over an existing file */
  int64_t added = -1;
  rc = mk_cache_merge(a, x_path, &added, &err);
  if (rc) fprintf(stderr, "merge: %s\n", err.text);
  MK_REQUIRE(rc == 0);
  MK_CHECK_INT(added, ==, 1);
  MK_CHECK_INT(mk_cache_count(a, NULL), ==, 3);
  char *v = NULL;
  size_t len = 0;
  MK_CHECK_INT(mk_cache_get(a, "shared", &v, &len, &err), ==, 0);
  MK_CHECK_STR(v, "{\"from\":\"a\"}");
  free(v);
  MK_CHECK_INT(mk_cache_get(a, "only_b", &v, &len, &err), ==, 0);
  free(v);
  MK_CHECK_INT(mk_cache_merge(a, x_path, &added, &err), ==, 0);
  MK_CHECK_INT(added, ==, 0);
  char missing[512];
  tmp_path(missing, sizeof missing, "node_c/none.sqlite");
  MK_CHECK_INT(mk_cache_merge(a, missing, &added, &err), !=, 0);
  MK_CHECK_INT(mk_cache_count(a, NULL), ==, 3);
  mk_cache_close(a);
  mk_cache_close(b);
  unlink(x_path);
  cleanup(a_path);
  cleanup(b_path);
  char dir[512];
  tmp_path(dir, sizeof dir, "");
  rmdir(dir);
}
