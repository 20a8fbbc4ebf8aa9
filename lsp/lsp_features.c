/* lsp_features.c — diagnostics, hover, code actions, code lenses. */
#include "mk_lsp_features.h"

#include <stdlib.h>
#include <string.h>

static cJSON *position(const mk_lsp_doc *doc, int line, int byte_col) {
  cJSON *p = cJSON_CreateObject();
  if (p == NULL) return NULL;
  if (line < 0) line = 0;
  if (byte_col < 0) byte_col = 0;
  int col = doc ? mk_lsp_doc_utf16_col(doc, line, (size_t)byte_col) : byte_col;
  cJSON_AddNumberToObject(p, "line", line);
  cJSON_AddNumberToObject(p, "character", col);
  return p;
}

cJSON *mk_lsp_range_json(const mk_lsp_doc *doc, mk_lsp_range r) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL) return NULL;
  int el = r.end_line, ec = r.end_col;
  if (el < r.line || (el == r.line && ec < r.col)) { /* never hand out an inverted range */
    el = r.line;
    ec = r.col;
  }
  cJSON_AddItemToObject(o, "start", position(doc, r.line, r.col));
  cJSON_AddItemToObject(o, "end", position(doc, el, ec));
  return o;
}

static cJSON *related(const mk_lsp_doc *doc, const mk_lsp_finding *f, mk_lsp_docs *open_docs) {
  cJSON *arr = cJSON_CreateArray();
  for (int k = 0; arr && k < f->nnotes; k++) {
    const mk_lsp_note *n = &f->notes[k];
    char *uri = n->path ? mk_lsp_path_to_uri(n->path) : mk_strdup(doc->uri);
    if (uri == NULL) continue;
    /* Columns convert against that file's text when the editor has it
     * open; otherwise byte columns stand in (exact for ASCII sources). */
    const mk_lsp_doc *target = n->path ? mk_lsp_docs_get(open_docs, uri) : doc;
    cJSON *ri = cJSON_CreateObject();
    cJSON *loc = cJSON_AddObjectToObject(ri, "location");
    if (loc) {
      cJSON_AddStringToObject(loc, "uri", uri);
      cJSON_AddItemToObject(loc, "range", mk_lsp_range_json(target, n->range));
    }
    cJSON_AddStringToObject(ri, "message", n->message);
    cJSON_AddItemToArray(arr, ri);
    free(uri);
  }
  return arr;
}

cJSON *mk_lsp_diagnostics_json(const mk_lsp_doc *doc, const mk_lsp_analysis *a,
                               mk_lsp_docs *open_docs, bool related_info) {
  cJSON *params = cJSON_CreateObject();
  if (params == NULL) return NULL;
  cJSON_AddStringToObject(params, "uri", doc->uri);
  cJSON_AddNumberToObject(params, "version", doc->version);
  cJSON *diags = cJSON_AddArrayToObject(params, "diagnostics");
  for (int i = 0; a && diags && i < a->nfindings; i++) {
    const mk_lsp_finding *f = &a->findings[i];
    cJSON *d = cJSON_CreateObject();
    if (d == NULL) break;
    cJSON_AddItemToObject(d, "range", mk_lsp_range_json(doc, f->range));
    cJSON_AddNumberToObject(d, "severity", f->severity);
    if (f->code) cJSON_AddStringToObject(d, "code", f->code);
    cJSON_AddStringToObject(d, "source", "mkevolve");
    cJSON_AddStringToObject(d, "message", f->message);
    if (f->nnotes > 0) {
      if (related_info) {
        cJSON_AddItemToObject(d, "relatedInformation", related(doc, f, open_docs));
      }
    }
    cJSON_AddItemToArray(diags, d);
  }
  return params;
}

/* The region to describe at `line`: the narrowest one covering it. */
static const mk_lsp_region *region_at(const mk_lsp_analysis *a, int line, bool need_hover) {
  const mk_lsp_region *best = NULL;
  for (int i = 0; a && i < a->nregions; i++) {
    const mk_lsp_region *r = &a->regions[i];
    if (line < r->range.line || line > r->range.end_line) continue;
    if (need_hover && r->hover == NULL) continue;
    if (best == NULL || r->range.end_line - r->range.line < best->range.end_line - best->range.line)
      best = r;
  }
  return best;
}

cJSON *mk_lsp_hover_json(const mk_lsp_doc *doc, const mk_lsp_analysis *a, int line, int col) {
  (void)col;
  const mk_lsp_region *r = region_at(a, line, true);
  if (r == NULL) return cJSON_CreateNull();
  cJSON *h = cJSON_CreateObject();
  cJSON *contents = cJSON_AddObjectToObject(h, "contents");
  if (contents) {
    cJSON_AddStringToObject(contents, "kind", "markdown");
    cJSON_AddStringToObject(contents, "value", r->hover);
  }
  cJSON_AddItemToObject(h, "range", mk_lsp_range_json(doc, r->range));
  return h;
}

static bool kind_allowed(const char *kind, const cJSON *only) {
  if (!cJSON_IsArray(only) || cJSON_GetArraySize(only) == 0) return true;
  const char *k = kind ? kind : "";
  const cJSON *o;
  cJSON_ArrayForEach(o, only) {
    if (!cJSON_IsString(o)) continue;
    size_t n = strlen(o->valuestring);
    /* "refactor" admits "refactor.rewrite" (hierarchical kinds). */
    if (strncmp(k, o->valuestring, n) == 0 && (k[n] == '\0' || k[n] == '.')) return true;
  }
  return false;
}

static cJSON *command_json(const mk_lsp_action *x, const char *title) {
  cJSON *c = cJSON_CreateObject();
  if (c == NULL) return NULL;
  cJSON_AddStringToObject(c, "title", title);
  cJSON_AddStringToObject(c, "command", x->command);
  cJSON_AddItemToObject(c, "arguments",
                        x->arguments ? cJSON_Duplicate(x->arguments, 1) : cJSON_CreateArray());
  return c;
}

static void add_action(cJSON *out, const mk_lsp_action *x, bool literals, const cJSON *only) {
  if (!kind_allowed(x->kind, only)) return;
  if (!literals) {
    cJSON_AddItemToArray(out, command_json(x, x->title));
    return;
  }
  cJSON *ca = cJSON_CreateObject();
  if (ca == NULL) return;
  cJSON_AddStringToObject(ca, "title", x->title);
  if (x->kind) cJSON_AddStringToObject(ca, "kind", x->kind);
  if (x->preferred) cJSON_AddBoolToObject(ca, "isPreferred", true);
  cJSON_AddItemToObject(ca, "command", command_json(x, x->title));
  cJSON_AddItemToArray(out, ca);
}

cJSON *mk_lsp_code_actions_json(const mk_lsp_analysis *a, int first, int last, bool literals,
                                const cJSON *only) {
  cJSON *out = cJSON_CreateArray();
  if (out == NULL || a == NULL) return out;
  for (int i = 0; i < a->nregions; i++) {
    const mk_lsp_region *r = &a->regions[i];
    if (last < r->range.line || first > r->range.end_line) continue;
    for (int k = 0; k < r->nactions; k++) add_action(out, &r->actions[k], literals, only);
  }
  for (int k = 0; k < a->nactions; k++) add_action(out, &a->actions[k], literals, only);
  return out;
}

cJSON *mk_lsp_code_lenses_json(const mk_lsp_doc *doc, const mk_lsp_analysis *a) {
  cJSON *out = cJSON_CreateArray();
  for (int i = 0; out && a && i < a->nregions; i++) {
    const mk_lsp_region *r = &a->regions[i];
    if (r->label == NULL || r->nactions == 0) continue;
    cJSON *lens = cJSON_CreateObject();
    mk_lsp_range at = {r->range.line, 0, r->range.line, 0};
    cJSON_AddItemToObject(lens, "range", mk_lsp_range_json(doc, at));
    cJSON_AddItemToObject(lens, "command", command_json(&r->actions[0], r->label));
    cJSON_AddItemToArray(out, lens);
  }
  return out;
}

static const char *match_title(const mk_lsp_action *xs, int n, const char *command,
                               const cJSON *arguments) {
  for (int k = 0; k < n; k++) {
    if (strcmp(xs[k].command, command) != 0) continue;
    bool both_empty = (xs[k].arguments == NULL || cJSON_GetArraySize(xs[k].arguments) == 0) &&
                      (arguments == NULL || cJSON_GetArraySize(arguments) == 0);
    if (both_empty || (xs[k].arguments && arguments && cJSON_Compare(xs[k].arguments, arguments, 1)))
      return xs[k].title;
  }
  return NULL;
}

const char *mk_lsp_action_title(const mk_lsp_analysis *a, const char *command,
                                const cJSON *arguments) {
  if (a == NULL) return NULL;
  const char *t = match_title(a->actions, a->nactions, command, arguments);
  for (int i = 0; t == NULL && i < a->nregions; i++)
    t = match_title(a->regions[i].actions, a->regions[i].nactions, command, arguments);
  return t;
}
