/* pydoc.c — a Python document kept parsed by tree-sitter.
 *
 * The language server applies each edit as it arrives and re-parses
 * incrementally: tree-sitter reuses every subtree the edit did not touch,
 * so a keystroke in a 10 MB file costs milliseconds. The text is owned
 * here (NUL-terminated) and the line index is rebuilt after each edit. */
#include "mk_frontend.h"

#include "mk_buf.h"

#include <stdlib.h>
#include <string.h>

struct mk_pydoc {
  char *text;
  size_t len;
  mk_text_index index;
  TSParser *parser;
  TSTree *tree;
};

static int parse_now(mk_pydoc *d, TSTree *old, mk_errmsg *err) {
  TSTree *t = ts_parser_parse_string(d->parser, old, d->text, (uint32_t)d->len);
  if (t == NULL) return mk_errf(err, MK_EPARSE, "the Python parser gave up on this document");
  if (d->tree) ts_tree_delete(d->tree);
  d->tree = t;
  return 0;
}

/* Takes ownership of text (malloc'ed, NUL-terminated) and indexes it. */
static int adopt_text(mk_pydoc *d, char *text, size_t len, mk_errmsg *err) {
  mk_text_index ix;
  int rc = mk_text_index_init(&ix, text, len);
  if (rc) {
    free(text);
    return mk_errf(err, rc, "cannot index a document of %zu bytes", len);
  }
  mk_text_index_free(&d->index);
  free(d->text);
  d->text = text;
  d->len = len;
  d->index = ix;
  return 0;
}

static char *copy_text(const char *text, size_t len) {
  char *t = malloc(len + 1);
  if (t == NULL) return NULL;
  if (len) memcpy(t, text, len);
  t[len] = '\0';
  return t;
}

int mk_pydoc_new(const char *text, size_t len, mk_pydoc **out, mk_errmsg *err) {
  *out = NULL;
  if (len > MK_FRONTEND_MAX_TEXT)
    return mk_errf(err, MK_ERANGE, "the document is %zu bytes; the limit is %zu", len, MK_FRONTEND_MAX_TEXT);
  mk_pydoc *d = calloc(1, sizeof *d);
  char *t = copy_text(text, len);
  if (d == NULL || t == NULL || (d->parser = ts_parser_new()) == NULL) {
    free(t);
    mk_pydoc_free(d);
    return mk_errf(err, MK_ENOMEM, "out of memory opening a document");
  }
  if (!ts_parser_set_language(d->parser, tree_sitter_python())) {
    free(t);
    mk_pydoc_free(d);
    return mk_errf(err, MK_EUNSUPPORTED, "the tree-sitter library cannot load this Python grammar (ABI %u)",
                   ts_language_version(tree_sitter_python()));
  }
  int rc = adopt_text(d, t, len, err);
  if (!rc) rc = parse_now(d, NULL, err);
  if (rc) {
    mk_pydoc_free(d);
    return rc;
  }
  *out = d;
  return 0;
}

void mk_pydoc_free(mk_pydoc *d) {
  if (d == NULL) return;
  if (d->tree) ts_tree_delete(d->tree);
  if (d->parser) ts_parser_delete(d->parser);
  mk_text_index_free(&d->index);
  free(d->text);
  free(d);
}

/* tree-sitter's point: rows counted by "\n" only, columns in bytes. */
static TSPoint ts_point_at(const char *text, size_t offset) {
  TSPoint p = {0, 0};
  size_t line_start = 0;
  const char *at = text, *end = text + offset;
  while (at < end) {
    const char *nl = memchr(at, '\n', (size_t)(end - at));
    if (nl == NULL) break;
    p.row++;
    line_start = (size_t)(nl - text) + 1;
    at = nl + 1;
  }
  p.column = (uint32_t)(offset - line_start);
  return p;
}

int mk_pydoc_edit(mk_pydoc *d, size_t start, size_t old_end, const char *text, size_t len, mk_errmsg *err) {
  if (start > old_end || old_end > d->len)
    return mk_errf(err, MK_EINVAL, "edit range %zu..%zu is outside the document (%zu bytes)", start, old_end, d->len);
  size_t new_len = d->len - (old_end - start) + len;
  if (new_len > MK_FRONTEND_MAX_TEXT)
    return mk_errf(err, MK_ERANGE, "the edit would make the document %zu bytes; the limit is %zu", new_len,
                   MK_FRONTEND_MAX_TEXT);
  char *t = malloc(new_len + 1);
  if (t == NULL) return mk_errf(err, MK_ENOMEM, "out of memory applying an edit");
  memcpy(t, d->text, start);
  if (len) memcpy(t + start, text, len);
  memcpy(t + start + len, d->text + old_end, d->len - old_end);
  t[new_len] = '\0';
  TSInputEdit e = {
      .start_byte = (uint32_t)start,
      .old_end_byte = (uint32_t)old_end,
      .new_end_byte = (uint32_t)(start + len),
      .start_point = ts_point_at(d->text, start),
      .old_end_point = ts_point_at(d->text, old_end),
      .new_end_point = ts_point_at(t, start + len),
  };
  int rc = adopt_text(d, t, new_len, err);
  if (rc) return rc;
  ts_tree_edit(d->tree, &e);
  return parse_now(d, d->tree, err);
}

int mk_pydoc_set_text(mk_pydoc *d, const char *text, size_t len, mk_errmsg *err) {
  if (len > MK_FRONTEND_MAX_TEXT)
    return mk_errf(err, MK_ERANGE, "the document is %zu bytes; the limit is %zu", len, MK_FRONTEND_MAX_TEXT);
  char *t = copy_text(text, len);
  if (t == NULL) return mk_errf(err, MK_ENOMEM, "out of memory replacing a document");
  int rc = adopt_text(d, t, len, err);
  return rc ? rc : parse_now(d, NULL, err);
}

const char *mk_pydoc_text(const mk_pydoc *d, size_t *len) {
  if (len) *len = d->len;
  return d->text;
}

const mk_text_index *mk_pydoc_index(const mk_pydoc *d) { return &d->index; }

TSNode mk_pydoc_root(const mk_pydoc *d) { return ts_tree_root_node(d->tree); }
