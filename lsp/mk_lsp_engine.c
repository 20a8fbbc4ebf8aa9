/* mk_lsp_engine.c — engine backend: static checks with tree-sitter.
 *
 * The checks here use tree-sitter-python directly because the engine's
 * frontend module (engine/frontend) has not landed yet; when it does they
 * move behind its API, and the session facade (engine/session) adds
 * subkernel regions, variants and commands in analyze/execute below. */
#include "mk_lsp_engine.h"

#include "mk_buf.h"

#include <stdlib.h>
#include <string.h>
#include <tree_sitter/api.h>

const TSLanguage *tree_sitter_python(void);

#define MAX_SYNTAX_FINDINGS 20

typedef struct engine {
  uv_loop_t *loop;
  mk_lsp_backend_host host;
  mk_lsp_config config;
  uint64_t next_job;
} engine;

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

static void module_checks(TSNode root, const char *text, mk_lsp_analysis *out) {
  toplevel t;
  memset(&t, 0, sizeof t);
  t.model = t.model_new = t.forward = t.get_inputs = t.get_init_inputs = (TSNode){0};
  scan_toplevel(root, text, &t);
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
  module_checks(root, text, out);
  ts_tree_delete(tree);
  ts_parser_delete(p);
  return 0;
}

/* ---- backend ops ---------------------------------------------------------- */

static const char *const engine_commands[] = {NULL};

static const char *const *e_commands(void *self) {
  (void)self;
  return engine_commands;
}

static int e_analyze(void *self, const mk_lsp_doc_view *doc, const mk_lsp_sink *sink,
                     uint64_t *job) {
  engine *e = self;
  *job = ++e->next_job;
  mk_lsp_analysis a;
  int rc = mk_lsp_engine_static_check(doc->text, doc->len, &a);
  if (rc != 0) {
    mk_lsp_analysis_free(&a);
    sink->done(sink->ctx, rc, NULL, NULL, "static checks failed");
    return 0;
  }
  sink->done(sink->ctx, 0, &a, NULL, NULL);
  mk_lsp_analysis_free(&a); /* the server took the contents; this frees nothing */
  return 0;
}

static int e_execute(void *self, const char *command, const cJSON *arguments,
                     const mk_lsp_sink *sink, uint64_t *job, mk_errmsg *err) {
  (void)self, (void)arguments, (void)sink, (void)job;
  return mk_errf(err, MK_ENOENT, "unknown command %s", command);
}

static void e_cancel(void *self, uint64_t job) { (void)self, (void)job; }

static void e_configure(void *self, const mk_lsp_config *cfg) {
  engine *e = self;
  e->config = *cfg;
}

static void e_attach(void *self, const mk_lsp_backend_host *host) {
  engine *e = self;
  e->host = *host;
}

static void e_destroy(void *self) { free(self); }

static const mk_lsp_backend_ops engine_ops = {
    .attach = e_attach,
    .commands = e_commands,
    .analyze = e_analyze,
    .execute = e_execute,
    .cancel = e_cancel,
    .configure = e_configure,
    .closed = NULL,
    .destroy = e_destroy,
};

int mk_lsp_engine_backend_new(uv_loop_t *loop, mk_lsp_backend *out) {
  engine *e = calloc(1, sizeof *e);
  if (e == NULL) return MK_ENOMEM;
  e->loop = loop;
  mk_lsp_config_defaults(&e->config);
  out->ops = &engine_ops;
  out->self = e;
  return 0;
}
