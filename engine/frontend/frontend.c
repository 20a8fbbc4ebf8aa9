/* frontend.c — the outline of a Python module: classes, methods,
 * forward's statements, get_inputs/get_init_inputs and diagnostics.
 *
 * Only the module's top level and class bodies are walked for definitions
 * (that is where KernelBench puts them), so outlining costs little beyond
 * the parse even for huge files; the syntax-error walk descends only into
 * subtrees that tree-sitter marks as containing an error. */
#include "mk_frontend.h"

#include "mk_buf.h"

#include <stdlib.h>
#include <string.h>

#define MK_STMT_MAX_DEPTH 64

typedef struct outline_ctx {
  const mk_pydoc *doc;
  const char *text;
  const mk_text_index *ix;
  mk_pyoutline *o;
} outline_ctx;

/* Grows an array of n elements so that element n fits: capacity doubles
 * at powers of two (n itself is the only size stored). */
static int grow(void *arrp, int n, size_t elem) {
  void **arr = arrp;
  if (n != 0 && (n < 4 || (n & (n - 1)) != 0)) return 0;
  size_t cap = n == 0 ? 4 : (size_t)n * 2;
  void *p = realloc(*arr, cap * elem);
  if (p == NULL) return MK_ENOMEM;
  *arr = p;
  return 0;
}

/* Children are visited with a cursor: ts_node_named_child(i) walks from
 * the first child each time, quadratic on a file with 50k definitions. */
typedef int (*child_fn)(void *ctx, TSNode child);

static int each_named_child(TSNode parent, child_fn fn, void *ctx) {
  TSTreeCursor cur = ts_tree_cursor_new(parent);
  int rc = 0;
  if (ts_tree_cursor_goto_first_child(&cur)) {
    do {
      TSNode ch = ts_tree_cursor_current_node(&cur);
      if (ts_node_is_named(ch)) rc = fn(ctx, ch);
    } while (!rc && ts_tree_cursor_goto_next_sibling(&cur));
  }
  ts_tree_cursor_delete(&cur);
  return rc;
}

/* ---- ranges and text ---------------------------------------------------- */

static mk_srange range_of(const outline_ctx *c, TSNode n) {
  mk_srange r = {ts_node_start_byte(n), ts_node_end_byte(n), 0, 0, 0, 0};
  mk_text_offset_to_bytecol(c->ix, r.start, &r.line, &r.col);
  mk_text_offset_to_bytecol(c->ix, r.end, &r.end_line, &r.end_col);
  r.line++;
  r.end_line++;
  return r;
}

static char *node_text(const outline_ctx *c, TSNode n) {
  uint32_t a = ts_node_start_byte(n), b = ts_node_end_byte(n);
  return mk_strndup(c->text + a, b - a);
}

static bool node_is(TSNode n, const char *type) { return !ts_node_is_null(n) && strcmp(ts_node_type(n), type) == 0; }

static TSNode field(TSNode n, const char *name) {
  return ts_node_child_by_field_name(n, name, (uint32_t)strlen(name));
}

static bool text_equals(const outline_ctx *c, TSNode n, const char *s) {
  uint32_t a = ts_node_start_byte(n), b = ts_node_end_byte(n);
  size_t len = strlen(s);
  return b - a == len && memcmp(c->text + a, s, len) == 0;
}

/* ---- diagnostics ----------------------------------------------------------- */

static int add_diag(outline_ctx *c, mk_diag_severity sev, mk_srange range, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int add_diag(outline_ctx *c, mk_diag_severity sev, mk_srange range, const char *code, const char *fmt, ...) {
  mk_pyoutline *o = c->o;
  if (grow(&o->diags, o->ndiags, sizeof *o->diags)) return MK_ENOMEM;
  va_list ap;
  va_start(ap, fmt);
  char *msg = mk_strdup_vprintf(fmt, ap);
  va_end(ap);
  if (msg == NULL) msg = mk_strdup("(message too long)");
  if (msg == NULL) return MK_ENOMEM;
  o->diags[o->ndiags++] = (mk_diag){sev, range, code, msg};
  return 0;
}

/* "unexpected 'foo'" from the first line of an ERROR node's text. */
static int syntax_error_diag(outline_ctx *c, TSNode n) {
  mk_srange r = range_of(c, n);
  const char *s = c->text + r.start;
  size_t len = r.end - r.start, k = 0;
  while (k < len && k < 40 && s[k] != '\n' && s[k] != '\r') k++;
  if (len == 0) return add_diag(c, MK_DIAG_ERROR, r, "syntax", "syntax error");
  return add_diag(c, MK_DIAG_ERROR, r, "syntax", "syntax error: unexpected '%.*s%s'", (int)k, s,
                  k < len ? "..." : "");
}

static int missing_diag(outline_ctx *c, TSNode n) {
  return add_diag(c, MK_DIAG_ERROR, range_of(c, n), "syntax", "syntax error: missing '%s'", ts_node_type(n));
}

static int report_error_node(outline_ctx *c, TSNode n) {
  c->o->nsyntax_errors++;
  if (c->o->nsyntax_errors > MK_FRONTEND_MAX_SYNTAX_DIAGS) return 0;
  return ts_node_is_missing(n) ? missing_diag(c, n) : syntax_error_diag(c, n);
}

/* Pre-order walk with a cursor (no recursion: nesting depth is the user's),
 * descending only where has_error says an error lies below. */
static int collect_syntax_errors(outline_ctx *c, TSNode root) {
  if (!ts_node_has_error(root)) return 0;
  TSTreeCursor cur = ts_tree_cursor_new(root);
  int rc = 0;
  for (bool more = true; more && !rc;) {
    TSNode n = ts_tree_cursor_current_node(&cur);
    bool bad = node_is(n, "ERROR") || ts_node_is_missing(n);
    if (bad) rc = report_error_node(c, n);
    if (!bad && ts_node_has_error(n) && ts_tree_cursor_goto_first_child(&cur)) continue;
    while (!ts_tree_cursor_goto_next_sibling(&cur)) {
      if (!ts_tree_cursor_goto_parent(&cur)) {
        more = false;
        break;
      }
    }
  }
  ts_tree_cursor_delete(&cur);
  return rc;
}

/* ---- functions --------------------------------------------------------------- */

static void pyfunc_free(mk_pyfunc *f) {
  free(f->name);
  for (int i = 0; i < f->nparams; i++) free(f->params[i]);
  free(f->params);
  memset(f, 0, sizeof *f);
}

/* The name a parameter node binds ("x", "*args", "**kw"); NULL-node for
 * separators ("*", "/"). */
static TSNode param_name_node(TSNode p) {
  const char *t = ts_node_type(p);
  if (strcmp(t, "identifier") == 0 || strcmp(t, "list_splat_pattern") == 0 ||
      strcmp(t, "dictionary_splat_pattern") == 0)
    return p;
  if (strcmp(t, "default_parameter") == 0 || strcmp(t, "typed_default_parameter") == 0) return field(p, "name");
  if (strcmp(t, "typed_parameter") == 0) {
    TSNode first = ts_node_named_child(p, 0);
    return first;
  }
  TSNode none = {{0}, NULL, NULL};
  return none;
}

typedef struct param_ctx {
  outline_ctx *c;
  mk_pyfunc *f;
} param_ctx;

static int read_param(void *ctx, TSNode p) {
  param_ctx *pc = ctx;
  TSNode name = param_name_node(p);
  if (ts_node_is_null(name)) return 0;
  if (grow(&pc->f->params, pc->f->nparams, sizeof *pc->f->params)) return MK_ENOMEM;
  char *s = node_text(pc->c, name);
  if (s == NULL) return MK_ENOMEM;
  pc->f->params[pc->f->nparams++] = s;
  return 0;
}

static int read_params(outline_ctx *c, TSNode params, mk_pyfunc *f) {
  param_ctx pc = {c, f};
  return each_named_child(params, read_param, &pc);
}

/* def_node: function_definition; outer: the decorated_definition around it or the def itself. */
static int read_function(outline_ctx *c, TSNode def_node, TSNode outer, mk_pyfunc *f) {
  pyfunc_free(f);
  TSNode name = field(def_node, "name"), body = field(def_node, "body"), params = field(def_node, "parameters");
  f->found = true;
  f->range = range_of(c, outer);
  if (!ts_node_is_null(name)) {
    f->name_range = range_of(c, name);
    if ((f->name = node_text(c, name)) == NULL) return MK_ENOMEM;
  }
  f->body = ts_node_is_null(body) ? f->range : range_of(c, body);
  return ts_node_is_null(params) ? 0 : read_params(c, params, f);
}

/* The definition inside a possibly decorated statement, or a null node. */
static TSNode definition_of(TSNode stmt, const char *type) {
  if (node_is(stmt, type)) return stmt;
  if (node_is(stmt, "decorated_definition")) {
    TSNode def = field(stmt, "definition");
    if (node_is(def, type)) return def;
  }
  TSNode none = {{0}, NULL, NULL};
  return none;
}

/* ---- forward's statements ---------------------------------------------------------- */

static bool is_compound(const char *t) {
  static const char *const kinds[] = {"if_statement", "for_statement", "while_statement", "with_statement",
                                      "try_statement", "match_statement"};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(t, kinds[i]) == 0) return true;
  return false;
}

/* End of a compound statement's header: the end of the last token before
 * its first block, comments skipped. */
static uint32_t header_end(TSNode stmt) {
  uint32_t n = ts_node_child_count(stmt), end = 0;
  for (uint32_t i = 0; i < n; i++) {
    TSNode ch = ts_node_child(stmt, i);
    if (node_is(ch, "block")) break;
    if (!node_is(ch, "comment")) end = ts_node_end_byte(ch);
  }
  return end;
}

static int push_stmt(outline_ctx *c, mk_pyclass *k, TSNode n, int depth, const char *kind, bool compound) {
  if (grow(&k->stmts, k->nstmts, sizeof *k->stmts)) return MK_ENOMEM;
  mk_srange r = range_of(c, n);
  if (compound) { /* the header only: up to the ':' before the first block */
    uint32_t end = header_end(n);
    if (end > r.start && end < r.end) {
      r.end = end;
      mk_text_offset_to_bytecol(c->ix, end, &r.end_line, &r.end_col);
      r.end_line++;
    }
  }
  k->stmts[k->nstmts++] = (mk_pystmt){r, depth, compound, kind};
  return 0;
}

typedef struct walk_ctx {
  outline_ctx *c;
  mk_pyclass *k;
  int depth;
} walk_ctx;

static int walk_stmt(void *ctx, TSNode s);

/* Blocks of a compound statement: its body and those of elif/else/except/
 * finally/case clauses, in source order; statements inside are one deeper. */
static int walk_compound_part(void *ctx, TSNode ch) {
  walk_ctx *w = ctx;
  if (node_is(ch, "block")) {
    if (w->depth > MK_STMT_MAX_DEPTH) return 0;
    return each_named_child(ch, walk_stmt, w);
  }
  if (strstr(ts_node_type(ch), "clause") && !node_is(ch, "case_clause")) return each_named_child(ch, walk_compound_part, w);
  return 0;
}

static int walk_stmt(void *ctx, TSNode s) {
  walk_ctx *w = ctx;
  const char *t = ts_node_type(s);
  if (strcmp(t, "comment") == 0) return 0;
  bool docstring = w->depth == 0 && w->k->nstmts == 0 && strcmp(t, "expression_statement") == 0 &&
                   node_is(ts_node_named_child(s, 0), "string");
  bool compound = is_compound(t) || strcmp(t, "case_clause") == 0;
  int rc = push_stmt(w->c, w->k, s, w->depth, docstring ? "docstring" : t, compound);
  if (rc || !compound) return rc;
  walk_ctx inner = {w->c, w->k, w->depth + 1};
  return each_named_child(s, walk_compound_part, &inner);
}

static int walk_block(outline_ctx *c, mk_pyclass *k, TSNode block, int depth) {
  walk_ctx w = {c, k, depth};
  return each_named_child(block, walk_stmt, &w);
}

/* ---- classes ----------------------------------------------------------------------- */

static void pyclass_free(mk_pyclass *k) {
  free(k->name);
  free(k->bases);
  pyfunc_free(&k->init);
  pyfunc_free(&k->forward);
  free(k->stmts);
}

typedef struct class_ctx {
  outline_ctx *c;
  mk_pyclass *k;
} class_ctx;

/* A later definition replaces an earlier one, as in Python. */
static int read_method(void *ctx, TSNode stmt) {
  class_ctx *cc = ctx;
  outline_ctx *c = cc->c;
  mk_pyclass *k = cc->k;
  TSNode def = definition_of(stmt, "function_definition");
  TSNode name = ts_node_is_null(def) ? def : field(def, "name");
  if (ts_node_is_null(name)) return 0;
  if (text_equals(c, name, "__init__")) return read_function(c, def, stmt, &k->init);
  if (!text_equals(c, name, "forward")) return 0;
  int rc = read_function(c, def, stmt, &k->forward);
  free(k->stmts);
  k->stmts = NULL;
  k->nstmts = 0;
  TSNode fbody = field(def, "body");
  if (!rc && !ts_node_is_null(fbody)) rc = walk_block(c, k, fbody, 0);
  return rc;
}

static int read_methods(outline_ctx *c, TSNode body, mk_pyclass *k) {
  class_ctx cc = {c, k};
  return each_named_child(body, read_method, &cc);
}

static int read_bases(outline_ctx *c, TSNode cls, mk_pyclass *k) {
  TSNode sup = field(cls, "superclasses");
  if (ts_node_is_null(sup)) return (k->bases = mk_strdup("")) ? 0 : MK_ENOMEM;
  uint32_t a = ts_node_start_byte(sup), b = ts_node_end_byte(sup);
  if (b - a >= 2 && c->text[a] == '(' && c->text[b - 1] == ')') {
    a++;
    b--;
  }
  k->bases = mk_strndup(c->text + a, b - a);
  if (k->bases == NULL) return MK_ENOMEM;
  k->is_module = strstr(k->bases, "Module") != NULL;
  return 0;
}

static int read_class(outline_ctx *c, TSNode stmt, TSNode cls) {
  mk_pyoutline *o = c->o;
  if (grow(&o->classes, o->nclasses, sizeof *o->classes)) return MK_ENOMEM;
  mk_pyclass *k = &o->classes[o->nclasses++];
  memset(k, 0, sizeof *k);
  TSNode name = field(cls, "name"), body = field(cls, "body");
  k->range = range_of(c, stmt);
  k->name_range = ts_node_is_null(name) ? k->range : range_of(c, name);
  k->name = ts_node_is_null(name) ? mk_strdup("") : node_text(c, name);
  if (k->name == NULL) return MK_ENOMEM;
  int rc = read_bases(c, cls, k);
  if (!rc && !ts_node_is_null(body)) rc = read_methods(c, body, k);
  return rc;
}

static bool is_ident_char(char ch) {
  return ch == '_' || (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
         (unsigned char)ch >= 0x80;
}

/* Is base list `bases` naming a module class of this file? Matches whole
 * identifiers only ("Base" must not match "BaseModel"). */
static bool names_module_class(const mk_pyoutline *o, const char *bases) {
  for (int i = 0; i < o->nclasses; i++) {
    const mk_pyclass *b = &o->classes[i];
    size_t len = strlen(b->name);
    if (!b->is_module || len == 0) continue;
    for (const char *p = strstr(bases, b->name); p; p = strstr(p + 1, b->name))
      if ((p == bases || !is_ident_char(p[-1])) && !is_ident_char(p[len])) return true;
  }
  return false;
}

/* class A(nn.Module); class B(A): B is a module too. Iterate to a fixpoint. */
static void propagate_module_bases(mk_pyoutline *o) {
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < o->nclasses; i++)
      if (!o->classes[i].is_module && names_module_class(o, o->classes[i].bases)) {
        o->classes[i].is_module = true;
        changed = true;
      }
  }
}

/* ---- top level ----------------------------------------------------------------------- */

static int read_top_statement(void *ctx, TSNode stmt) {
  outline_ctx *c = ctx;
  TSNode cls = definition_of(stmt, "class_definition");
  if (!ts_node_is_null(cls)) return read_class(c, stmt, cls);
  TSNode fn = definition_of(stmt, "function_definition");
  TSNode name = ts_node_is_null(fn) ? fn : field(fn, "name");
  if (ts_node_is_null(name)) return 0;
  if (text_equals(c, name, "get_inputs")) return read_function(c, fn, stmt, &c->o->get_inputs);
  if (text_equals(c, name, "get_init_inputs")) return read_function(c, fn, stmt, &c->o->get_init_inputs);
  return 0;
}

static int read_top_level(outline_ctx *c, TSNode root) { return each_named_child(root, read_top_statement, c); }

static mk_srange file_start(void) { return (mk_srange){0, 0, 1, 0, 1, 0}; }

static int check_target(outline_ctx *c, const char *class_name) {
  mk_pyoutline *o = c->o;
  o->target = -1;
  int plain = -1;
  for (int i = 0; i < o->nclasses; i++) {
    if (strcmp(o->classes[i].name, class_name) != 0) continue;
    if (o->classes[i].is_module) o->target = i;
    else plain = i;
  }
  if (o->target < 0 && plain >= 0)
    return add_diag(c, MK_DIAG_ERROR, o->classes[plain].name_range, "not-a-module",
                    "class %s does not derive from nn.Module", class_name);
  if (o->target < 0)
    return add_diag(c, MK_DIAG_ERROR, file_start(), "missing-class",
                    "no nn.Module class named %s in this file", class_name);
  const mk_pyclass *k = &o->classes[o->target];
  if (!k->forward.found)
    return add_diag(c, MK_DIAG_ERROR, k->name_range, "missing-forward", "class %s has no forward method", class_name);
  return 0;
}

static int check_functions(outline_ctx *c) {
  int rc = 0;
  if (!c->o->get_inputs.found)
    rc = add_diag(c, MK_DIAG_ERROR, file_start(), "missing-get-inputs",
                  "no module-level get_inputs(): the engine builds the forward's inputs from it");
  if (!rc && !c->o->get_init_inputs.found)
    rc = add_diag(c, MK_DIAG_WARNING, file_start(), "missing-get-init-inputs",
                  "no module-level get_init_inputs(): the model will be built with no arguments");
  return rc;
}

int mk_frontend_outline(const mk_pydoc *d, const char *class_name, mk_pyoutline *out, mk_errmsg *err) {
  memset(out, 0, sizeof *out);
  out->target = -1;
  size_t len;
  outline_ctx c = {d, mk_pydoc_text(d, &len), mk_pydoc_index(d), out};
  TSNode root = mk_pydoc_root(d);
  int rc = collect_syntax_errors(&c, root);
  if (!rc) rc = read_top_level(&c, root);
  if (!rc) {
    propagate_module_bases(out);
    rc = check_target(&c, class_name ? class_name : "Model");
  }
  if (!rc) rc = check_functions(&c);
  if (rc) {
    mk_pyoutline_free(out);
    return mk_errf(err, rc, "out of memory outlining the document");
  }
  return 0;
}

int mk_frontend_outline_text(const char *text, size_t len, const char *class_name, mk_pyoutline *out,
                             mk_errmsg *err) {
  memset(out, 0, sizeof *out);
  out->target = -1;
  mk_pydoc *d;
  int rc = mk_pydoc_new(text, len, &d, err);
  if (rc) return rc;
  rc = mk_frontend_outline(d, class_name, out, err);
  mk_pydoc_free(d);
  return rc;
}

void mk_pyoutline_free(mk_pyoutline *o) {
  if (o == NULL) return;
  for (int i = 0; i < o->nclasses; i++) pyclass_free(&o->classes[i]);
  free(o->classes);
  for (int i = 0; i < o->ndiags; i++) free(o->diags[i].message);
  free(o->diags);
  pyfunc_free(&o->get_inputs);
  pyfunc_free(&o->get_init_inputs);
  memset(o, 0, sizeof *o);
  o->target = -1;
}

const mk_pyclass *mk_pyoutline_class(const mk_pyoutline *o, const char *name) {
  for (int i = 0; i < o->nclasses; i++)
    if (o->classes[i].is_module && strcmp(o->classes[i].name, name) == 0) return &o->classes[i];
  return NULL;
}

bool mk_pyoutline_has_errors(const mk_pyoutline *o) {
  for (int i = 0; i < o->ndiags; i++)
    if (o->diags[i].severity == MK_DIAG_ERROR) return true;
  return false;
}
