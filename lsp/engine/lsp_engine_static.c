/* lsp_engine_static.c — the engine backend's static checks, rendered
 * from the one static check of engine/frontend (mk_frontend_static_check_text,
 * microseconds, on every analysis): syntax errors at their exact position,
 * and for files importing torch the KernelBench shape (class Model with
 * forward, get_inputs, get_init_inputs). They also say whether a file is
 * worth a capture and where forward is. */
#include "mk_frontend.h"
#include "mk_lsp_engine.h"
#include "lsp_engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mk_lsp_range range_of(mk_frontend_span s) {
  return (mk_lsp_range){s.line, s.col, s.end_line, s.end_col};
}

static void syntax_findings(const mk_frontend_shape *s, mk_lsp_analysis *out) {
  for (int i = 0; i < s->nsyntax; i++) {
    const mk_frontend_syntax *e = &s->syntax[i];
    mk_lsp_range r = range_of(e->at);
    if (e->missing[0]) {
      char msg[160];
      snprintf(msg, sizeof msg, "syntax error: missing '%s'", e->missing);
      mk_lsp_analysis_add_finding(out, r, MK_LSP_SEV_ERROR, "syntax", msg);
      continue;
    }
    if (r.end_line > r.line) { /* underline the first line only: the rest is noise */
      r.end_line = r.line;
      r.end_col = r.col + 1;
    }
    mk_lsp_analysis_add_finding(out, r, MK_LSP_SEV_ERROR, "syntax", "syntax error");
  }
}

static void kernelbench_findings(const mk_frontend_shape *s, mk_lsp_analysis *out) {
  if (!s->cls.found) {
    if (!s->model_new.found)
      mk_lsp_analysis_add_finding(
          out, (mk_lsp_range){0, 0, 0, 0}, MK_LSP_SEV_WARNING, "missing-model",
          "no `class Model`: mkevolve optimises KernelBench-style modules "
          "(class Model(nn.Module) with get_inputs() and get_init_inputs())");
    return;
  }
  mk_lsp_range at = range_of(s->cls.name);
  if (!s->forward.found)
    mk_lsp_analysis_add_finding(out, at, MK_LSP_SEV_ERROR, "missing-forward",
                                "class Model has no forward() method");
  if (!s->get_inputs.found)
    mk_lsp_analysis_add_finding(out, at, MK_LSP_SEV_ERROR, "missing-get-inputs",
                                "no get_inputs(): mkevolve needs it to build the forward's inputs");
  if (!s->get_init_inputs.found)
    mk_lsp_analysis_add_finding(out, at, MK_LSP_SEV_ERROR, "missing-get-init-inputs",
                                "no get_init_inputs(): mkevolve needs it to construct Model");
}

static void shape_info(const mk_frontend_shape *s, const char *text, lsp_engine_static_info *info) {
  if (s->forward.found) {
    info->forward_line = s->forward.at.line;
    info->forward_end_line = s->forward.at.end_line;
  }
  /* Files mkevolve composed start with this line (engine/compose). */
  info->composed = s->model_new.found && strncmp(text, "# ModelNew composed by MKEvolve", 31) == 0;
  info->capturable = s->imports_torch && s->nsyntax == 0 && s->cls.found && s->forward.found &&
                     s->get_inputs.found && s->get_init_inputs.found && !info->composed;
}

int mk_lsp_engine_static_check(const char *text, size_t len, mk_lsp_analysis *out) {
  return lsp_engine_static_check(text, len, out, NULL);
}

int lsp_engine_static_check(const char *text, size_t len, mk_lsp_analysis *out,
                        lsp_engine_static_info *info) {
  lsp_engine_static_info scratch;
  if (info == NULL) info = &scratch;
  *info = (lsp_engine_static_info){.forward_line = -1, .forward_end_line = -1};
  memset(out, 0, sizeof *out);
  mk_frontend_shape *s = malloc(sizeof *s);
  if (s == NULL) return MK_ENOMEM;
  int rc = mk_frontend_static_check_text(text, len, "Model", s);
  if (rc == 0) {
    syntax_findings(s, out);
    shape_info(s, text, info);
    if (s->imports_torch) kernelbench_findings(s, out);
  }
  free(s);
  return rc;
}
