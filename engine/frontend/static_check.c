/* static_check.c — the static check of a module without running Python: one
 * tree-sitter pass that finds syntax errors and the KernelBench pieces
 * (mk_frontend_static_check_text), used by the language server's
 * diagnostics, and the CLI's file check on top of it, which says the first
 * problem at once (mk_frontend_static_check). */
#include "mk_buf.h"
#include "mk_frontend.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static mk_frontend_span span_of(TSNode n) {
  TSPoint a = ts_node_start_point(n), b = ts_node_end_point(n);
  return (mk_frontend_span){(int)a.row, (int)a.column, (int)b.row, (int)b.column};
}

static void add_syntax(mk_frontend_shape *s, TSNode n) {
  mk_frontend_syntax *e = &s->syntax[s->nsyntax++];
  e->at = span_of(n);
  e->missing[0] = '\0';
  if (ts_node_is_missing(n)) mk_strlcpy(e->missing, ts_node_type(n), sizeof e->missing);
}

/* ERROR and MISSING nodes in source order, iteratively (a hostile file
 * nests arbitrarily deep; recursion would not), descending only where
 * has_error says an error lies below. */
static void find_syntax_errors(TSNode root, mk_frontend_shape *s) {
  if (!ts_node_has_error(root)) return;
  TSTreeCursor c = ts_tree_cursor_new(root);
  for (;;) {
    TSNode n = ts_tree_cursor_current_node(&c);
    bool descend = ts_node_has_error(n);
    if (ts_node_is_missing(n) || strcmp(ts_node_type(n), "ERROR") == 0) {
      add_syntax(s, n);
      descend = false;
    }
    if (s->nsyntax >= MK_FRONTEND_STATIC_MAX_SYNTAX) break;
    if (descend && ts_tree_cursor_goto_first_child(&c)) continue;
    while (!ts_tree_cursor_goto_next_sibling(&c))
      if (!ts_tree_cursor_goto_parent(&c)) goto done;
  }
done:
  ts_tree_cursor_delete(&c);
}

static TSNode name_node(TSNode def) { return ts_node_child_by_field_name(def, "name", 4); }

static bool name_is(TSNode def, const char *text, const char *name) {
  TSNode id = name_node(def);
  if (ts_node_is_null(id)) return false;
  uint32_t a = ts_node_start_byte(id), b = ts_node_end_byte(id);
  return strlen(name) == b - a && memcmp(text + a, name, b - a) == 0;
}

/* Unwraps `@decorator\n def f` to the definition. */
static TSNode definition(TSNode n) {
  if (strcmp(ts_node_type(n), "decorated_definition") == 0)
    return ts_node_child_by_field_name(n, "definition", 10);
  return n;
}

static void set_def(mk_frontend_def *d, TSNode def) {
  d->found = true;
  d->at = span_of(def);
  d->name = span_of(name_node(def));
}

static bool mentions_torch(TSNode import, const char *text) {
  uint32_t a = ts_node_start_byte(import), b = ts_node_end_byte(import);
  for (uint32_t k = a; k + 5 <= b; k++)
    if (memcmp(text + k, "torch", 5) == 0) return true;
  return false;
}

/* Appends a class's name to the ", "-joined list, whole or not at all. */
static void list_class(mk_frontend_shape *s, TSNode def, const char *text) {
  TSNode id = name_node(def);
  if (ts_node_is_null(id)) return;
  size_t used = strlen(s->classes), n = ts_node_end_byte(id) - ts_node_start_byte(id);
  size_t sep = used ? 2 : 0;
  if (used + sep + n >= sizeof s->classes) return;
  memcpy(s->classes + used, ", ", sep);
  memcpy(s->classes + used + sep, text + ts_node_start_byte(id), n);
  s->classes[used + sep + n] = '\0';
}

static void scan_toplevel(TSNode root, const char *text, const char *cls, mk_frontend_shape *s,
                          TSNode *cls_node) {
  uint32_t n = ts_node_named_child_count(root);
  for (uint32_t i = 0; i < n; i++) {
    TSNode c = definition(ts_node_named_child(root, i));
    if (ts_node_is_null(c)) continue;
    const char *ty = ts_node_type(c);
    if (strcmp(ty, "import_statement") == 0 || strcmp(ty, "import_from_statement") == 0) {
      s->imports_torch = s->imports_torch || mentions_torch(c, text);
    } else if (strcmp(ty, "class_definition") == 0) {
      if (name_is(c, text, cls)) {
        set_def(&s->cls, c);
        *cls_node = c;
      } else {
        list_class(s, c, text);
      }
      if (name_is(c, text, "ModelNew")) set_def(&s->model_new, c);
    } else if (strcmp(ty, "function_definition") == 0) {
      if (name_is(c, text, "get_inputs")) set_def(&s->get_inputs, c);
      if (name_is(c, text, "get_init_inputs")) set_def(&s->get_init_inputs, c);
    }
  }
}

static void find_forward(TSNode cls, const char *text, mk_frontend_shape *s) {
  TSNode body = ts_node_child_by_field_name(cls, "body", 4);
  uint32_t m = ts_node_is_null(body) ? 0 : ts_node_named_child_count(body);
  for (uint32_t i = 0; i < m; i++) {
    TSNode c = definition(ts_node_named_child(body, i));
    if (!ts_node_is_null(c) && strcmp(ts_node_type(c), "function_definition") == 0 &&
        name_is(c, text, "forward"))
      set_def(&s->forward, c);
  }
}

int mk_frontend_static_check_text(const char *text, size_t len, const char *class_name,
                                  mk_frontend_shape *out) {
  memset(out, 0, sizeof *out);
  if (len > MK_FRONTEND_MAX_TEXT) return MK_ERANGE;
  TSParser *p = ts_parser_new();
  if (p == NULL) return MK_ENOMEM;
  if (!ts_parser_set_language(p, tree_sitter_python())) {
    ts_parser_delete(p);
    return MK_EINVAL;
  }
  TSTree *tree = ts_parser_parse_string(p, NULL, text, (uint32_t)len);
  if (tree == NULL) {
    ts_parser_delete(p);
    return MK_ENOMEM;
  }
  TSNode root = ts_tree_root_node(tree), cls = {0};
  find_syntax_errors(root, out);
  scan_toplevel(root, text, class_name ? class_name : "Model", out, &cls);
  if (out->cls.found) find_forward(cls, text, out);
  ts_tree_delete(tree);
  ts_parser_delete(p);
  return 0;
}

/* ---- the CLI's file check ---------------------------------------------- */

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

/* The first problem of a shape, or 0. */
static int first_problem(const mk_frontend_shape *s, const char *class_name, bool need_inputs,
                         mk_frontend_static *out) {
  if (s->nsyntax > 0) {
    const mk_frontend_syntax *e = &s->syntax[0];
    if (e->missing[0])
      set(out, "syntax_error", e->at.line + 1, e->at.col + 1, "syntax error: missing `%s`",
          e->missing);
    else
      set(out, "syntax_error", e->at.line + 1, e->at.col + 1, "syntax error");
    return MK_EPARSE;
  }
  if (!s->cls.found) {
    set(out, "missing", 0, 0, "no top-level class `%s`%s%s%s", class_name,
        s->classes[0] ? " (classes here: " : "", s->classes, s->classes[0] ? ")" : "");
    return MK_ENOENT;
  }
  if (need_inputs && !s->get_inputs.found) {
    set(out, "missing", 0, 0, "no top-level function `get_inputs()` (KernelBench format)");
    return MK_ENOENT;
  }
  return 0;
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
  mk_frontend_shape *shape = malloc(sizeof *shape);
  if (shape == NULL) {
    free(src);
    set(out, "io_error", 0, 0, "out of memory");
    return MK_ENOMEM;
  }
  rc = mk_frontend_static_check_text(src, len, class_name, shape);
  if (rc == 0) rc = first_problem(shape, class_name, need_inputs, out);
  else set(out, "io_error", 0, 0, "cannot parse the file: %s", mk_strerror(rc));
  free(shape);
  free(src);
  return rc;
}
