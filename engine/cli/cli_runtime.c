/* cli_runtime.c — static module check and runtime lifetime for the CLI
 * (see cli_runtime.h). */
#include "cli_runtime.h"
#include "mk_loop.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tree_sitter/api.h>
#include <unistd.h>
#include <stdarg.h>

const TSLanguage *tree_sitter_python(void);

/* ---- runtime -------------------------------------------------------------- */

int mk_cli_rt_open(mk_cli_rt *rt, double timeout_s, bool use_cache, mk_errmsg *err) {
  memset(rt, 0, sizeof *rt);
  int rc = uv_loop_init(&rt->loop);
  if (rc) return mk_errf(err, MK_EIO, "cannot start the event loop: %s", uv_strerror(rc));
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  /* The worker's package from elsewhere, as `evolve` and `bench` honour it. */
  const char *wp = getenv("MKEVOLVE_WORKER_PATH");
  if (wp && wp[0]) cfg.pythonpath = wp;
  if (timeout_s > 0) {
    cfg.hello_timeout_s = timeout_s;
    cfg.request_timeout_s = timeout_s;
  }
  if ((rc = mk_worker_pool_new(&rt->loop, &cfg, &rt->pool, err))) {
    uv_loop_close(&rt->loop);
    return rc;
  }
  const char *nc = getenv("MKEVOLVE_NO_CACHE");
  if (use_cache && !(nc && nc[0] == '1')) {
    mk_errmsg cerr;
    if (mk_cache_open(NULL, 0, &rt->cache, &cerr) != 0) {
      fprintf(stderr, "mkevolve: warning: running without the result cache: %s\n", cerr.text);
      rt->cache = NULL;
    }
  }
  if ((rc = mk_verify_new(&rt->loop, rt->pool, rt->cache, &rt->verify, err))) {
    mk_cli_rt_close(rt);
    return rc;
  }
  return 0;
}

void mk_cli_rt_wait(mk_cli_rt *rt, const bool *done) { (void)mk_loop_run_until(&rt->loop, done); }

static void on_pool_closed(void *data) { *(bool *)data = true; }

void mk_cli_rt_close(mk_cli_rt *rt) {
  if (rt->verify) mk_verify_close(rt->verify);
  rt->verify = NULL;
  if (rt->pool) {
    bool closed = false;
    mk_worker_pool_close(rt->pool, on_pool_closed, &closed);
    mk_cli_rt_wait(rt, &closed);
    rt->pool = NULL;
  }
  uv_run(&rt->loop, UV_RUN_DEFAULT);
  uv_loop_close(&rt->loop);
  mk_cache_close(rt->cache);
  rt->cache = NULL;
}

/* ---- static check --------------------------------------------------------- */

static bool find_error(TSNode n, TSNode *out) {
  if (strcmp(ts_node_type(n), "ERROR") == 0 || ts_node_is_missing(n)) {
    *out = n;
    return true;
  }
  if (!ts_node_has_error(n)) return false;
  uint32_t k = ts_node_child_count(n);
  for (uint32_t i = 0; i < k; i++)
    if (find_error(ts_node_child(n, i), out)) return true;
  return false;
}

static bool name_is(TSNode def, const char *src, const char *name) {
  TSNode id = ts_node_child_by_field_name(def, "name", 4);
  if (ts_node_is_null(id)) return false;
  uint32_t a = ts_node_start_byte(id), b = ts_node_end_byte(id);
  return strlen(name) == b - a && memcmp(src + a, name, b - a) == 0;
}

/* Collects top-level class names into `names` (for the error message). */
static bool top_level_has(TSNode root, const char *src, const char *type, const char *name,
                          mk_buf *names) {
  uint32_t k = ts_node_named_child_count(root);
  for (uint32_t i = 0; i < k; i++) {
    TSNode c = ts_node_named_child(root, i);
    if (strcmp(ts_node_type(c), "decorated_definition") == 0)
      c = ts_node_child_by_field_name(c, "definition", 10);
    if (ts_node_is_null(c) || strcmp(ts_node_type(c), type) != 0) continue;
    if (name_is(c, src, name)) return true;
    if (names) {
      TSNode id = ts_node_child_by_field_name(c, "name", 4);
      if (!ts_node_is_null(id)) {
        if (names->len) mk_buf_puts(names, ", ");
        mk_buf_append(names, src + ts_node_start_byte(id),
                      ts_node_end_byte(id) - ts_node_start_byte(id));
      }
    }
  }
  return false;
}

static void set(mk_cli_static *o, const char *kind, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void set(mk_cli_static *o, const char *kind, int line, int col, const char *fmt, ...) {
  o->line = line;
  o->col = col;
  mk_strlcpy(o->kind, kind, sizeof o->kind);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->message, sizeof o->message, fmt, ap);
  va_end(ap);
}

int mk_cli_static_check(const char *path, const char *class_name, bool need_inputs,
                        mk_cli_static *out) {
  memset(out, 0, sizeof *out);
  char *src = NULL;
  size_t len = 0;
  int rc = mk_read_file(path, MK_CLI_MAX_MODULE, &src, &len);
  if (rc == MK_ERANGE) {
    set(out, "too_large", 0, 0, "the file is larger than %zu MiB; mkevolve analyses modules up to "
        "that size", MK_CLI_MAX_MODULE >> 20);
    return rc;
  }
  if (rc) {
    set(out, "io_error", 0, 0, "cannot read the file: %s", rc == MK_ENOENT ? "no such file"
                                                                         : mk_strerror(rc));
    return rc;
  }
  if (memchr(src, '\0', len)) {
    free(src);
    set(out, "syntax_error", 0, 0, "the file contains NUL bytes: not Python source");
    return MK_EPARSE;
  }
  TSParser *parser = ts_parser_new();
  ts_parser_set_language(parser, tree_sitter_python());
  TSTree *tree = ts_parser_parse_string(parser, NULL, src, (uint32_t)len);
  TSNode root = ts_tree_root_node(tree);
  rc = 0;
  TSNode bad;
  if (ts_node_has_error(root) && find_error(root, &bad)) {
    TSPoint p = ts_node_start_point(bad);
    if (ts_node_is_missing(bad))
      set(out, "syntax_error", (int)p.row + 1, (int)p.column + 1, "syntax error: missing `%s`",
          ts_node_type(bad));
    else
      set(out, "syntax_error", (int)p.row + 1, (int)p.column + 1, "syntax error");
    rc = MK_EPARSE;
  } else {
    mk_buf names;
    mk_buf_init(&names, 512);
    if (!top_level_has(root, src, "class_definition", class_name, &names)) {
      set(out, "missing", 0, 0, "no top-level class `%s`%s%s%s", class_name,
          names.len ? " (classes here: " : "", mk_buf_cstr(&names), names.len ? ")" : "");
      rc = MK_ENOENT;
    } else if (need_inputs &&
               !top_level_has(root, src, "function_definition", "get_inputs", NULL)) {
      set(out, "missing", 0, 0, "no top-level function `get_inputs()` (KernelBench format)");
      rc = MK_ENOENT;
    }
    mk_buf_free(&names);
  }
  ts_tree_delete(tree);
  ts_parser_delete(parser);
  free(src);
  return rc;
}

int mk_cli_abspath(const char *path, char *out, size_t outsize) {
  char buf[PATH_MAX];
  if (realpath(path, buf)) return mk_strlcpy(out, buf, outsize);
  /* Missing files still get a readable absolute path for messages. */
  if (path[0] == '/') return mk_strlcpy(out, path, outsize);
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return mk_strlcpy(out, path, outsize);
  int n = snprintf(out, outsize, "%s/%s", cwd, path);
  return n < 0 || (size_t)n >= outsize ? MK_ERANGE : 0;
}

int mk_cli_parse_int(const char *s, int lo, int hi, int *out) {
  if (!s || !*s) return MK_EINVAL;
  errno = 0;
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return MK_EINVAL;
  *out = (int)v;
  return 0;
}

int mk_cli_parse_double(const char *s, double lo, double hi, double *out) {
  if (!s || !*s) return MK_EINVAL;
  errno = 0;
  char *end = NULL;
  double v = strtod(s, &end);
  if (errno || *end || !isfinite(v) || v < lo || v > hi) return MK_EINVAL;
  *out = v;
  return 0;
}
