/* mk_lsp_engine_static.c — the engine backend's static checks, in-process
 * with tree-sitter (microseconds, on every analysis): syntax errors at
 * their exact position, and for files importing torch the KernelBench
 * shape (class Model with forward, get_inputs, get_init_inputs). They
 * also say whether a file is worth a capture and where forward is. */
#include "mk_lsp_engine.h"
#include "mk_lsp_engine_internal.h"

#include <stdlib.h>
#include <string.h>
#include <tree_sitter/api.h>

const TSLanguage *tree_sitter_python(void);

#define MAX_SYNTAX_FINDINGS 20



static mk_lsp_range node_range(TSNode n) {
  TSPoint a = ts_node_start_point(n), b = ts_node_end_point(n);
  return (mk_lsp_range){(int)a.row, (int)a.column, (int)b.row, (int)b.column};
}

/* Reports ERROR and MISSING nodes, iteratively (a hostile file nests
 * arbitrarily deep; recursion would not). */
static void syntax_errors(TSNode root, mk_lsp_analysis *out) {
  if (!ts_node_has_error(root)) return;
  TSTreeCursor c = ts_tree_cursor_new(root);
  int found = 0;
  for (;;) {
    TSNode n = ts_tree_cursor_current_node(&c);
    bool descend = ts_node_has_error(n);
    if (ts_node_is_missing(n)) {
      char msg[160];
      snprintf(msg, sizeof msg, "syntax error: missing '%.100s'", ts_node_type(n));
      mk_lsp_range r = node_range(n);
      mk_lsp_analysis_add_finding(out, r, MK_LSP_SEV_ERROR, "syntax", msg);
      found++;
      descend = false;
    } else if (strcmp(ts_node_type(n), "ERROR") == 0) {
      mk_lsp_range r = node_range(n);
      if (r.end_line > r.line) { /* underline the first line only: the rest is noise */
        r.end_line = r.line;
        r.end_col = r.col + 1;
      }
      mk_lsp_analysis_add_finding(out, r, MK_LSP_SEV_ERROR, "syntax", "syntax error");
      found++;
      descend = false;
    }
    if (found >= MAX_SYNTAX_FINDINGS) break;
    if (descend && ts_tree_cursor_goto_first_child(&c)) continue;
    while (!ts_tree_cursor_goto_next_sibling(&c))
      if (!ts_tree_cursor_goto_parent(&c)) goto done;
  }
done:
  ts_tree_cursor_delete(&c);
}

static bool node_text_is(TSNode n, const char *text, const char *name) {
  if (ts_node_is_null(n)) return false;
  uint32_t a = ts_node_start_byte(n), b = ts_node_end_byte(n);
  size_t len = strlen(name);
  return b - a == len && memcmp(text + a, name, len) == 0;
}

/* Unwraps `@decorator\n def f` to the definition. */
static TSNode definition(TSNode n) {
  if (strcmp(ts_node_type(n), "decorated_definition") == 0)
    return ts_node_child_by_field_name(n, "definition", 10);
  return n;
}

typedef struct {
  bool imports_torch;
  TSNode model, model_new, forward, get_inputs, get_init_inputs;
} toplevel;

static void scan_toplevel(TSNode root, const char *text, toplevel *t) {
  uint32_t n = ts_node_named_child_count(root);
  for (uint32_t i = 0; i < n; i++) {
    TSNode c = definition(ts_node_named_child(root, i));
    if (ts_node_is_null(c)) continue;
    const char *ty = ts_node_type(c);
    if (strcmp(ty, "import_statement") == 0 || strcmp(ty, "import_from_statement") == 0) {
      uint32_t a = ts_node_start_byte(c), b = ts_node_end_byte(c);
      for (uint32_t k = a; k + 5 <= b && !t->imports_torch; k++)
        t->imports_torch = memcmp(text + k, "torch", 5) == 0;
    } else if (strcmp(ty, "class_definition") == 0) {
      TSNode name = ts_node_child_by_field_name(c, "name", 4);
      if (node_text_is(name, text, "Model")) t->model = c;
      if (node_text_is(name, text, "ModelNew")) t->model_new = c;
    } else if (strcmp(ty, "function_definition") == 0) {
      TSNode name = ts_node_child_by_field_name(c, "name", 4);
      if (node_text_is(name, text, "get_inputs")) t->get_inputs = c;
      if (node_text_is(name, text, "get_init_inputs")) t->get_init_inputs = c;
    }
  }
  if (ts_node_is_null(t->model)) return;
  TSNode body = ts_node_child_by_field_name(t->model, "body", 4);
  uint32_t m = ts_node_is_null(body) ? 0 : ts_node_named_child_count(body);
  for (uint32_t i = 0; i < m; i++) {
    TSNode c = definition(ts_node_named_child(body, i));
    if (!ts_node_is_null(c) && strcmp(ts_node_type(c), "function_definition") == 0 &&
        node_text_is(ts_node_child_by_field_name(c, "name", 4), text, "forward"))
      t->forward = c;
  }
}

static void module_checks(TSNode root, const char *text, mk_lsp_analysis *out,
                          engine_static_info *info) {
  toplevel t;
  memset(&t, 0, sizeof t);
  t.model = t.model_new = t.forward = t.get_inputs = t.get_init_inputs = (TSNode){0};
  scan_toplevel(root, text, &t);
  if (!ts_node_is_null(t.forward)) {
    info->forward_line = (int)ts_node_start_point(t.forward).row;
    info->forward_end_line = (int)ts_node_end_point(t.forward).row;
  }
  /* Files mkevolve composed start with this line (engine/compose). */
  info->composed = !ts_node_is_null(t.model_new) && strncmp(text, "# ModelNew composed by MKEvolve", 31) == 0;
  info->capturable = t.imports_torch && !ts_node_has_error(root) && !ts_node_is_null(t.model) &&
                     !ts_node_is_null(t.forward) && !ts_node_is_null(t.get_inputs) &&
                     !ts_node_is_null(t.get_init_inputs) && !info->composed;
  if (!t.imports_torch) return;
  mk_lsp_range top = {0, 0, 0, 0};
  if (ts_node_is_null(t.model)) {
    if (ts_node_is_null(t.model_new))
      mk_lsp_analysis_add_finding(
          out, top, MK_LSP_SEV_WARNING, "missing-model",
          "no `class Model`: mkevolve optimises KernelBench-style modules "
          "(class Model(nn.Module) with get_inputs() and get_init_inputs())");
    return;
  }
  mk_lsp_range at = node_range(ts_node_child_by_field_name(t.model, "name", 4));
  if (ts_node_is_null(t.forward))
    mk_lsp_analysis_add_finding(out, at, MK_LSP_SEV_ERROR, "missing-forward",
                                "class Model has no forward() method");
  if (ts_node_is_null(t.get_inputs))
    mk_lsp_analysis_add_finding(out, at, MK_LSP_SEV_ERROR, "missing-get-inputs",
                                "no get_inputs(): mkevolve needs it to build the forward's inputs");
  if (ts_node_is_null(t.get_init_inputs))
    mk_lsp_analysis_add_finding(out, at, MK_LSP_SEV_ERROR, "missing-get-init-inputs",
                                "no get_init_inputs(): mkevolve needs it to construct Model");
}

int mk_lsp_engine_static_check(const char *text, size_t len, mk_lsp_analysis *out) {
  return engine_static_check(text, len, out, NULL);
}

int engine_static_check(const char *text, size_t len, mk_lsp_analysis *out,
                        engine_static_info *info) {
  engine_static_info scratch;
  if (info == NULL) info = &scratch;
  *info = (engine_static_info){.forward_line = -1, .forward_end_line = -1};
  memset(out, 0, sizeof *out);
  if (len > UINT32_MAX) return MK_ERANGE;
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
  TSNode root = ts_tree_root_node(tree);
  syntax_errors(root, out);
  module_checks(root, text, out, info);
  ts_tree_delete(tree);
  ts_parser_delete(p);
  return 0;
}
