/* mk_static.c — mk_frontend_static_check: a module file checked without
 * running Python (a file, not a folder; bounded size; syntax; the class;
 * get_inputs), so the CLI's commands report those errors at once. */
#include "mk_buf.h"
#include "mk_frontend.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static void set(mk_frontend_static *o, const char *kind, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void set(mk_frontend_static *o, const char *kind, int line, int col, const char *fmt, ...) {
  o->line = line;
  o->col = col;
  mk_strlcpy(o->kind, kind, sizeof o->kind);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->message, sizeof o->message, fmt, ap);
  va_end(ap);
}

int mk_frontend_static_check(const char *path, const char *class_name, bool need_inputs,
                        mk_frontend_static *out) {
  memset(out, 0, sizeof *out);
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    /* fopen succeeds on a folder and reading it fails with EISDIR, which
     * said "i/o error": say what it is and what is expected instead. */
    set(out, "not_a_file", 0, 0, "%s", MK_FRONTEND_DIRECTORY_HINT);
    return MK_EINVAL;
  }
  char *src = NULL;
  size_t len = 0;
  int rc = mk_read_file(path, MK_FRONTEND_MAX_MODULE, &src, &len);
  if (rc == MK_ERANGE) {
    set(out, "too_large", 0, 0, "the file is larger than %zu MiB; mkevolve analyses modules up to "
        "that size", MK_FRONTEND_MAX_MODULE >> 20);
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
