/* cli_runtime.c — static module check and runtime lifetime for the CLI
 * (see cli_runtime.h). */
#include "cli_runtime.h"
#include "mk_loop.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    /* fopen succeeds on a folder and reading it fails with EISDIR, which
     * said "i/o error": say what it is and what is expected instead. */
    set(out, "not_a_file", 0, 0, "%s", MK_CLI_DIRECTORY_HINT);
    return MK_EINVAL;
  }
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

/* ---- showing errors ------------------------------------------------------- */

void mk_cli_print_source_line(FILE *out, const char *path, int line) {
  if (line <= 0) return;
  char *src = NULL;
  size_t len = 0;
  if (mk_read_file(path, MK_CLI_MAX_MODULE, &src, &len) != 0) return;
  const char *p = src;
  for (int i = 1; i < line && p; i++) {
    p = memchr(p, '\n', len - (size_t)(p - src));
    if (p) p++;
  }
  if (p && p < src + len) {
    const char *e = memchr(p, '\n', len - (size_t)(p - src));
    int n = (int)(e ? e - p : (src + len) - p);
    if (n > 200) n = 200;
    fprintf(out, "%5d | %.*s\n", line, n, p);
  }
  free(src);
}

/* The quoted file name of a traceback's `  File "...", line N` line, or
 * NULL when the line is not a frame header. */
static const char *frame_file(const char *line, size_t n, size_t *flen) {
  const char *p = line;
  while (p < line + n && *p == ' ') p++;
  if ((size_t)(line + n - p) < 7 || memcmp(p, "File \"", 6) != 0) return NULL;
  p += 6;
  const char *q = memchr(p, '"', (size_t)(line + n - p));
  if (q == NULL) return NULL;
  *flen = (size_t)(q - p);
  return p;
}

int mk_cli_user_traceback(const char *tb, const char *user_file, mk_buf *out) {
  if (tb == NULL || user_file == NULL) return 0;
  size_t ulen = strlen(user_file);
  int frames = 0;
  bool keep = false;       /* inside one of the user's frames */
  const char *last = NULL; /* the last line that is not indented: the exception */
  size_t lastn = 0;
  for (const char *p = tb; *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    size_t flen = 0;
    const char *f = frame_file(p, n, &flen);
    if (f) {
      keep = flen == ulen && memcmp(f, user_file, ulen) == 0;
      frames += keep;
    } else if (n > 0 && p[0] != ' ') {
      keep = false;
      /* "Traceback (most recent call last):" and chained-exception text are not the error */
      if (strncmp(p, "Traceback ", 10) != 0 && strncmp(p, "During handling", 15) != 0 &&
          strncmp(p, "The above exception", 19) != 0) {
        last = p;
        lastn = n;
      }
    }
    /* Caret lines (^^^^) point into the line above; the source line says enough. */
    bool carets = n > 0 && strspn(p, " ^~") == n;
    if (keep && !carets) mk_buf_printf(out, "%.*s\n", (int)n, p);
    p = nl ? nl + 1 : p + n;
  }
  if (frames > 0 && last) mk_buf_printf(out, "%.*s\n", (int)lastn, last);
  return frames;
}

void mk_cli_print_traceback(FILE *out, const char *tb, const char *user_file) {
  if (tb == NULL || tb[0] == '\0') return;
  mk_buf mine;
  mk_buf_init(&mine, 64 * 1024);
  if (mk_cli_user_traceback(tb, user_file, &mine) > 0 && !mine.err) {
    fputs("  traceback (your code; --json has every frame):\n", out);
    tb = mk_buf_cstr(&mine);
  } else {
    fputs("  traceback (last lines):\n", out);
    /* No frame in the user's file: the innermost 12 lines are the useful part. */
    const char *end = tb + strlen(tb);
    int lines = 0;
    const char *start = end;
    while (end > tb && end[-1] == '\n') end--;
    for (start = end; start > tb; start--)
      if (start[-1] == '\n' && ++lines == 12) break;
    tb = start;
  }
  for (const char *p = tb; *p;) {
    const char *nl = strchr(p, '\n');
    int n = (int)(nl ? nl - p : (ptrdiff_t)strlen(p));
    if (n > 0 || nl) fprintf(out, "    %.*s\n", n, p);
    p = nl ? nl + 1 : p + n;
  }
  mk_buf_free(&mine);
}
