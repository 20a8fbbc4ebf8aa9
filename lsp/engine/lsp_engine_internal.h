/* lsp_engine_internal.h — shared by the engine backend's files (not a
 * public header): the static checks (lsp_engine_static.c), the
 * rendering of session views into analyses (lsp_engine_render.c) and
 * the backend itself (lsp_engine.c). */
#ifndef MK_LSP_ENGINE_INTERNAL_H
#define MK_LSP_ENGINE_INTERNAL_H

#include "mk_buf.h"
#include "mk_lsp_backend.h"
#include "mk_lsp_engine_config.h"
#include "mk_session.h"

#include <stdbool.h>
#include <stddef.h>

/* What the static checks learned about the file's shape. */
typedef struct lsp_engine_static_info {
  bool capturable;        /* imports torch, no syntax error, Model with forward, get_inputs,
                           * get_init_inputs: worth a capture */
  bool composed;          /* a ModelNew file written by mkevolve (an output, never captured) */
  int forward_line;       /* 0-based `def forward` line, -1 when none */
  int forward_end_line;   /* 0-based last line of forward's body */
} lsp_engine_static_info;

/* Static checks (tree-sitter) into `out`; `info` may be NULL. */
int lsp_engine_static_check(const char *text, size_t len, mk_lsp_analysis *out,
                        lsp_engine_static_info *info);

/* Maps lines of the text a result was computed on ("old") to the current
 * text ("new"): lines before the first difference and after the last one
 * keep their content and move by the length change; lines inside the
 * changed block have no counterpart. */
typedef struct lsp_engine_line_map {
  bool identical;
  int prefix;       /* lines [0, prefix) are the same in both */
  int old_suffix;   /* lines [old_suffix, old_lines) of old ... */
  int new_suffix;   /* ... are lines [new_suffix, new_lines) of new */
} lsp_engine_line_map;

void lsp_engine_line_map_build(lsp_engine_line_map *m, const char *old_text, const char *new_text);
/* New 0-based line of old 0-based `line`, or -1 when it was edited. */
int lsp_engine_line_map_fwd(const lsp_engine_line_map *m, int line);
/* Old line of new `line`, or -1 (the inverse, for positions from the editor). */
int lsp_engine_line_map_back(const lsp_engine_line_map *m, int line);

/* Everything the rendering needs for one document. */
typedef struct lsp_engine_render_in {
  const char *uri;
  const char *text;                 /* current text */
  const lsp_engine_static_info *info;
  const mk_session_module *view;    /* NULL: never captured */
  const lsp_engine_line_map *map;       /* view's text -> current text */
  bool engaged;                     /* the user decomposed or evolved this module */
  bool capturing;                   /* an analysis is running */
  bool dirty;                       /* unsaved changes */
  bool evolving;                    /* an evolve job runs on it */
  const char *composed_path;        /* composed file to point into, or NULL */
  const char *composed_text;        /* its contents, or NULL */
  const char *error;                /* last analysis error for this text, or NULL */
  int error_line;                   /* its 1-based line in the current text, 0 unknown */
  const char *engine_error;         /* the engine could not start, or NULL */
} lsp_engine_render_in;

/* Adds subkernel findings, regions (hover, lenses, actions) and the
 * document's actions to `a` (which already holds the static findings). */
void lsp_engine_render(const lsp_engine_render_in *in, mk_lsp_analysis *a);

/* Markdown: a subkernel's variants table (hover) and a module report. */
void lsp_engine_variants_markdown(const mk_session_module *m, const mk_session_subkernel *sk,
                              mk_buf *out);
void lsp_engine_report_markdown(const mk_session_module *m, mk_buf *out);

/* "1.8x vs eager, 1.2x vs torch.compile, verified 5/5" for a variant. */
void lsp_engine_variant_summary(const mk_session_module *m, const mk_session_variant *v, mk_buf *out);

/* An edit file's verdict (mk_session_verify_edit) as findings on its own
 * lines: NVRTC's diagnostics, the failure at the line it points into (else
 * line 1), or one Information at line 1 when it verified. */
void lsp_engine_edit_findings(const mk_session_edit_result *r, const char *text, mk_lsp_analysis *a);

/* Command ids. */
#define ENGINE_CMD_DECOMPOSE "mkevolve.decompose"
#define ENGINE_CMD_EVOLVE "mkevolve.evolve"
#define ENGINE_CMD_EVOLVE_ALL "mkevolve.evolveAll"
#define ENGINE_CMD_SWAP "mkevolve.swap"
#define ENGINE_CMD_RESTORE "mkevolve.restore"
#define ENGINE_CMD_REPORT "mkevolve.openReport"
#define ENGINE_CMD_EDIT "mkevolve.editVariant"

#endif
