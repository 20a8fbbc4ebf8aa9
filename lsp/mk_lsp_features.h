/* mk_lsp_features.h — analyses rendered as LSP results.
 *
 * Pure functions from (document, analysis) to the JSON the client gets:
 * diagnostics, hover, code actions, code lenses. Byte columns become
 * UTF-16 columns here, against the document's current text (or, for
 * related information in another file, that file's text when it is
 * open). No I/O, no state: the server calls them with what it holds.
 *
 * Ownership: returned cJSON belongs to the caller. */
#ifndef MK_LSP_FEATURES_H
#define MK_LSP_FEATURES_H

#include "mk_lsp_backend.h"
#include "mk_lsp_docs.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

/* LSP Range for a backend range in `doc`. */
cJSON *mk_lsp_range_json(const mk_lsp_doc *doc, mk_lsp_range r);
/* PublishDiagnosticsParams for doc (analysis may be NULL: clears). */
cJSON *mk_lsp_diagnostics_json(const mk_lsp_doc *doc, const mk_lsp_analysis *a,
                               mk_lsp_docs *open_docs, bool related_info);
/* Hover at (line, UTF-16 col): the innermost region covering the line that
 * has hover text, or JSON null. */
cJSON *mk_lsp_hover_json(const mk_lsp_doc *doc, const mk_lsp_analysis *a, int line, int col);
/* Code actions for a line range [first, last]: actions of every region
 * that overlaps it, then the document's. `literals`: CodeAction objects
 * (client has codeActionLiteralSupport) rather than bare Commands.
 * `only` (may be NULL) is the context's kind filter. */
cJSON *mk_lsp_code_actions_json(const mk_lsp_analysis *a, int first, int last, bool literals,
                                const cJSON *only);
/* Code lenses: one per region with a label and at least one action. */
cJSON *mk_lsp_code_lenses_json(const mk_lsp_doc *doc, const mk_lsp_analysis *a);
/* The title of the action that runs (command, arguments), or NULL. */
const char *mk_lsp_action_title(const mk_lsp_analysis *a, const char *command,
                                const cJSON *arguments);

#endif
