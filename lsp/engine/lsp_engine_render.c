/* lsp_engine_render.c — a session's view of a module, rendered as an
 * editor-neutral analysis: one finding per subkernel on the lines it
 * covers (information when verified, warning when slower or not yet
 * verified, error when every variant failed), a region per subkernel
 * (hover table of variants, code lens, Evolve / Swap / Restore actions),
 * a region over forward (Decompose, Evolve all) — all moved through a
 * line map when the editor's text differs from what was analysed. Pure:
 * no I/O, no session calls. */
#include "lsp_engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- line map ----------------------------------------------------------------- */

/* Offsets of line starts; returns the count (a text without a final
 * newline still has its last line). Caller frees *starts. */
static int line_starts(const char *t, size_t **starts) {
  size_t n = 1, len = strlen(t);
  for (size_t i = 0; i < len; i++) n += t[i] == '\n';
  size_t *s = malloc((n + 1) * sizeof *s);
  if (s == NULL) {
    *starts = NULL;
    return -1;
  }
  size_t k = 0;
  s[k++] = 0;
  for (size_t i = 0; i < len; i++)
    if (t[i] == '\n') s[k++] = i + 1;
  s[k] = len + 1; /* one past the virtual newline of the last line */
  *starts = s;
  return (int)n;
}

static bool same_line(const char *a, const size_t *as, int i, const char *b, const size_t *bs,
                      int j) {
  size_t la = as[i + 1] - as[i], lb = bs[j + 1] - bs[j];
  return la == lb && memcmp(a + as[i], b + bs[j], la - 1) == 0;
}

void lsp_engine_line_map_build(lsp_engine_line_map *m, const char *old_text, const char *new_text) {
  *m = (lsp_engine_line_map){.identical = true};
  if (old_text == NULL || new_text == NULL || strcmp(old_text, new_text) == 0) return;
  m->identical = false;
  size_t *os = NULL, *ns = NULL;
  int no = line_starts(old_text, &os), nn = line_starts(new_text, &ns);
  if (no < 0 || nn < 0) { /* out of memory: nothing maps */
    *m = (lsp_engine_line_map){.identical = false, .prefix = 0, .old_suffix = 1 << 30,
                           .new_suffix = 1 << 30};
    free(os);
    free(ns);
    return;
  }
  int p = 0;
  while (p < no && p < nn && same_line(old_text, os, p, new_text, ns, p)) p++;
  int i = no, j = nn;
  while (i > p && j > p && same_line(old_text, os, i - 1, new_text, ns, j - 1)) i--, j--;
  m->prefix = p;
  m->old_suffix = i;
  m->new_suffix = j;
  free(os);
  free(ns);
}

int lsp_engine_line_map_fwd(const lsp_engine_line_map *m, int line) {
  if (m == NULL || m->identical) return line;
  if (line < m->prefix) return line;
  if (line >= m->old_suffix) return line - m->old_suffix + m->new_suffix;
  return -1;
}

int lsp_engine_line_map_back(const lsp_engine_line_map *m, int line) {
  if (m == NULL || m->identical) return line;
  if (line < m->prefix) return line;
  if (line >= m->new_suffix) return line - m->new_suffix + m->old_suffix;
  return -1;
}

/* ---- text helpers --------------------------------------------------------------- */

/* Byte columns of the first non-blank character and the end of 0-based
 * `line` of `text`; false when the text has no such line. */
static bool line_cols(const char *text, int line, int *first, int *end) {
  const char *p = text;
  for (int i = 0; i < line; i++) {
    p = strchr(p, '\n');
    if (p == NULL) return false;
    p++;
  }
  size_t len = strcspn(p, "\r\n");
  size_t lead = 0;
  while (lead < len && (p[lead] == ' ' || p[lead] == '\t')) lead++;
  *first = (int)(lead == len ? 0 : lead);
  *end = (int)len;
  return true;
}

/* 0-based line of the first line of `text` starting with `prefix`, or -1. */
static int find_line(const char *text, const char *prefix) {
  if (text == NULL) return -1;
  size_t n = strlen(prefix);
  int line = 0;
  for (const char *p = text; p && *p; line++) {
    if (strncmp(p, prefix, n) == 0) return line;
    p = strchr(p, '\n');
    if (p) p++;
  }
  return -1;
}

/* Markdown table cells must not contain a bare '|' or a newline. */
static void md_cell(mk_buf *b, const char *s, size_t max) {
  size_t n = 0;
  for (; s && *s && n < max; s++, n++) {
    if (*s == '|') mk_buf_puts(b, "\\|");
    else if (*s == '\n' || *s == '\r') mk_buf_putc(b, ' ');
    else mk_buf_putc(b, *s);
  }
  if (s && *s) mk_buf_puts(b, "…");
}

static void fmt_ms(mk_buf *b, double ms) {
  if (ms < 0) mk_buf_puts(b, "—");
  else if (ms < 1) mk_buf_printf(b, "%.3f", ms);
  else mk_buf_printf(b, "%.2f", ms);
}

static void fmt_x(mk_buf *b, double x) {
  if (x < 0) mk_buf_puts(b, "—");
  else mk_buf_printf(b, "%.2fx", x);
}

/* ---- summaries and tables --------------------------------------------------------- */

void lsp_engine_variant_summary(const mk_session_module *m, const mk_session_variant *v, mk_buf *out) {
  if (v->speedup_eager > 0) {
    mk_buf_printf(out, "%.2fx vs eager", v->speedup_eager);
    if (v->speedup_compile > 0) mk_buf_printf(out, ", %.2fx vs torch.compile", v->speedup_compile);
    mk_buf_printf(out, ", verified %d/%d", v->trials_passed, v->trials);
  } else {
    mk_buf_printf(out, "verified %d/%d (untimed on %s)", v->trials_passed, v->trials,
                  m->device && *m->device ? m->device : "cpu");
  }
}

static const char *state_name(mk_sk_state s) {
  switch (s) {
  case MK_SK_REFERENCE: return "PyTorch reference";
  case MK_SK_RUNNING: return "evolving";
  case MK_SK_VERIFIED: return "verified variant chosen";
  case MK_SK_FAILED: return "no variant verified";
  case MK_SK_SLOWER: return "verified variants, none faster";
  }
  return "?";
}

void lsp_engine_variants_markdown(const mk_session_module *m, const mk_session_subkernel *sk,
                              mk_buf *out) {
  mk_buf_printf(out, "**sk%d · %s** — `", sk->index, sk->name ? sk->name : "?");
  md_cell(out, sk->ops, 200);
  mk_buf_printf(out, "` (lines %d–%d)\n\n", sk->first_line, sk->last_line);
  mk_buf_printf(out, "_%s_ — %s\n\n", state_name(sk->state), sk->summary ? sk->summary : "");
  mk_buf_puts(out, "| | variant | origin | status | median ms | min ms | vs eager | vs compile "
                   "| trials | tokens |\n"
                   "|---|---|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (int k = 0; k < sk->nvariants; k++) {
    const mk_session_variant *v = &sk->variants[k];
    mk_buf_puts(out, v->chosen ? "| ✓ | " : "| | ");
    md_cell(out, v->name, 60);
    mk_buf_puts(out, " | ");
    md_cell(out, v->origin, 40);
    mk_buf_puts(out, " | ");
    md_cell(out, v->status, 20);
    mk_buf_puts(out, " | ");
    fmt_ms(out, v->time_ms);
    mk_buf_puts(out, " | ");
    fmt_ms(out, v->min_ms);
    mk_buf_puts(out, " | ");
    fmt_x(out, v->speedup_eager);
    mk_buf_puts(out, " | ");
    fmt_x(out, v->speedup_compile);
    if (k == 0) mk_buf_puts(out, " | — | ");
    else mk_buf_printf(out, " | %d/%d | ", v->trials_passed, v->trials);
    mk_buf_printf(out, "%ld |\n", v->tokens);
  }
  bool any_reason = false;
  for (int k = 1; k < sk->nvariants; k++) {
    const mk_session_variant *v = &sk->variants[k];
    if (v->reason == NULL || *v->reason == '\0') continue;
    if (!any_reason) mk_buf_puts(out, "\nWhy variants failed:\n");
    any_reason = true;
    mk_buf_puts(out, "- `");
    md_cell(out, v->name, 60);
    mk_buf_puts(out, "`: ");
    md_cell(out, v->reason, 300);
    if (strcmp(v->status, "mismatch") == 0) mk_buf_printf(out, " (max abs error %.3g)", v->max_abs_err);
    mk_buf_putc(out, '\n');
  }
  /* Verified against the exact result because PyTorch's own reference runs
   * TF32 (docs/verify.md): say so, with both errors, so "verified" is not
   * read as "within 1e-4 of eager". */
  bool any_tf32 = false;
  for (int k = 1; k < sk->nvariants; k++) {
    const mk_session_variant *v = &sk->variants[k];
    if (v->ref_tf32_noise <= 0) continue;
    if (!any_tf32) mk_buf_puts(out, "\nChecked against the full-FP32 result (PyTorch's reference runs TF32):\n");
    any_tf32 = true;
    mk_buf_puts(out, "- `");
    md_cell(out, v->name, 60);
    mk_buf_printf(out, "`: max abs error %.3g; the reference's own %.3g\n", v->max_abs_err,
                  v->ref_tf32_noise);
  }
  mk_buf_printf(out, "\n_%s%s%s%s_\n", m->device && *m->device ? m->device : "cpu",
                m->timed ? "" : " · untimed: correctness only",
                m->note && *m->note ? " · " : "", m->note ? m->note : "");
}

void lsp_engine_report_markdown(const mk_session_module *m, mk_buf *out) {
  mk_buf_printf(out, "# MKEvolve report: %s\n\n", m->path);
  mk_buf_printf(out, "- class: `%s`\n- device: %s%s\n", m->class_name ? m->class_name : "Model",
                m->device ? m->device : "cpu", m->timed ? "" : " (untimed: correctness only)");
  if (m->note && *m->note) mk_buf_printf(out, "- note: %s\n", m->note);
  mk_buf_printf(out, "- subkernels: %d\n", m->nsubkernels);
  if (m->modelnew_path) mk_buf_printf(out, "- composed ModelNew: `%s`\n", m->modelnew_path);
  if (m->ours_ms > 0) {
    mk_buf_puts(out, "- whole program: ");
    fmt_ms(out, m->ours_ms);
    mk_buf_puts(out, " ms (eager ");
    fmt_ms(out, m->eager_ms);
    mk_buf_puts(out, " ms, torch.compile ");
    fmt_ms(out, m->compile_ms);
    mk_buf_puts(out, " ms)\n");
    /* a baseline that would fail the check ours passed is said, not hidden */
    if (m->compile_note && *m->compile_note) mk_buf_printf(out, "- %s\n", m->compile_note);
  }
  if (m->tokens_in + m->tokens_out > 0)
    mk_buf_printf(out, "- LLM tokens: %ld in, %ld out\n", m->tokens_in, m->tokens_out);
  for (int i = 0; i < m->nsubkernels; i++) {
    mk_buf_puts(out, "\n## ");
    lsp_engine_variants_markdown(m, &m->subkernels[i], out);
  }
}

/* ---- analysis ------------------------------------------------------------------------ */

static cJSON *args_uri(const char *uri) {
  cJSON *arr = cJSON_CreateArray(), *o = cJSON_CreateObject();
  if (arr == NULL || o == NULL) {
    cJSON_Delete(arr);
    cJSON_Delete(o);
    return NULL;
  }
  cJSON_AddStringToObject(o, "uri", uri);
  cJSON_AddItemToArray(arr, o);
  return arr;
}

static cJSON *args_sk(const char *uri, int sk, int variant) {
  cJSON *arr = args_uri(uri);
  cJSON *o = arr ? cJSON_GetArrayItem(arr, 0) : NULL;
  if (o) {
    cJSON_AddNumberToObject(o, "subkernel", sk);
    if (variant >= 0) cJSON_AddNumberToObject(o, "variant", variant);
  }
  return arr;
}

static int count_state(const mk_session_module *m, mk_sk_state st) {
  int n = 0;
  for (int i = 0; i < m->nsubkernels; i++) n += m->subkernels[i].state == st;
  return n;
}

static void forward_region(const lsp_engine_render_in *in, mk_lsp_analysis *a) {
  const lsp_engine_static_info *info = in->info;
  if (info->forward_line < 0) return;
  int end_col = 0, first = 0;
  line_cols(in->text, info->forward_end_line, &first, &end_col);
  mk_lsp_range r = {info->forward_line, 0, info->forward_end_line, end_col};
  const mk_session_module *m = in->view;
  char label[256];
  int n = m ? m->nsubkernels : 0;
  if (in->evolving) snprintf(label, sizeof label, "mkevolve: evolving…");
  else if (m == NULL && in->capturing) snprintf(label, sizeof label, "mkevolve: analysing…");
  else if (m == NULL) snprintf(label, sizeof label, "mkevolve: Decompose into subkernels");
  else if (!in->engaged)
    snprintf(label, sizeof label, "mkevolve: Decompose into %d subkernel%s", n, n == 1 ? "" : "s");
  else
    snprintf(label, sizeof label, "mkevolve: Evolve all (%d/%d verified)",
             count_state(m, MK_SK_VERIFIED), n);
  if (mk_lsp_analysis_add_region(a, r, label, NULL) != 0) return;
  mk_lsp_region *g = &a->regions[a->nregions - 1];
  char decomp[128];
  if (m) snprintf(decomp, sizeof decomp, "Decompose into subkernels (%d)", n);
  else snprintf(decomp, sizeof decomp, "Decompose into subkernels");
  bool evolve_first = m != NULL && in->engaged;
  if (!evolve_first)
    mk_lsp_analysis_add_action(a, g, decomp, ENGINE_CMD_DECOMPOSE, args_uri(in->uri),
                               "refactor.rewrite", true);
  if (m)
    mk_lsp_analysis_add_action(a, g, "Evolve all subkernels", ENGINE_CMD_EVOLVE_ALL,
                               args_uri(in->uri), "refactor.rewrite", evolve_first);
  if (evolve_first)
    mk_lsp_analysis_add_action(a, g, "Decompose into subkernels (update the composed file)",
                               ENGINE_CMD_DECOMPOSE, args_uri(in->uri), "refactor.rewrite", false);
  if (m && in->engaged)
    mk_lsp_analysis_add_action(a, g, "Open the MKEvolve report", ENGINE_CMD_REPORT,
                               args_uri(in->uri), "source", false);
}

/* The finding for one subkernel: severity and message by its state. */
static void subkernel_finding(const lsp_engine_render_in *in, const mk_session_subkernel *sk,
                              mk_lsp_range r, mk_lsp_analysis *a) {
  const mk_session_module *m = in->view;
  mk_buf msg;
  mk_buf_init(&msg, 4096);
  mk_lsp_severity sev = MK_LSP_SEV_INFO;
  const char *code = "subkernel";
  const char *name = sk->name ? sk->name : "subkernel";
  const mk_session_variant *c = sk->nvariants > 0 ? &sk->variants[sk->chosen] : NULL;
  switch (sk->state) {
  case MK_SK_VERIFIED:
    mk_buf_printf(&msg, "%s: ", name);
    lsp_engine_variant_summary(m, c, &msg);
    mk_buf_printf(&msg, " — %s", c->name);
    code = "subkernel-verified";
    break;
  case MK_SK_RUNNING:
    mk_buf_printf(&msg, "%s: evolving…", name);
    code = "subkernel-running";
    break;
  case MK_SK_REFERENCE:
    mk_buf_printf(&msg, "%s: not yet verified — runs the PyTorch reference (%s)", name, sk->ops);
    sev = in->engaged ? MK_LSP_SEV_WARNING : MK_LSP_SEV_HINT;
    code = "subkernel-unverified";
    break;
  case MK_SK_SLOWER: {
    double best = -1;
    for (int k = 1; k < sk->nvariants; k++)
      if (strcmp(sk->variants[k].status, "ok") == 0 && sk->variants[k].speedup_eager > best)
        best = sk->variants[k].speedup_eager;
    int nok = 0;
    for (int k = 1; k < sk->nvariants; k++) nok += strcmp(sk->variants[k].status, "ok") == 0;
    if (!m->timed || best > 1.0) {
      /* Untimed, or a faster variant exists: the reference was chosen
       * (restored), not forced by speed. */
      mk_buf_printf(&msg, "%s: runs the PyTorch reference; %d verified variant%s to swap in", name,
                    nok, nok == 1 ? "" : "s");
      if (best > 0) mk_buf_printf(&msg, " (best %.2fx vs eager)", best);
      else mk_buf_printf(&msg, " (untimed on %s)", m->device && *m->device ? m->device : "cpu");
      code = "subkernel-reference";
      break;
    }
    mk_buf_printf(&msg, "%s: slower than PyTorch", name);
    if (best > 0) mk_buf_printf(&msg, " (best verified variant %.2fx vs eager)", best);
    mk_buf_puts(&msg, "; keeping the PyTorch reference");
    sev = MK_LSP_SEV_WARNING;
    code = "subkernel-slower";
    break;
  }
  case MK_SK_FAILED: {
    /* The most telling failure: a mismatch (numbers) beats other errors. */
    const mk_session_variant *w = NULL;
    for (int k = 1; k < sk->nvariants; k++) {
      const mk_session_variant *v = &sk->variants[k];
      if (w == NULL || (strcmp(v->status, "mismatch") == 0 && strcmp(w->status, "mismatch") != 0))
        w = v;
    }
    mk_buf_printf(&msg, "%s: incorrect — no variant verified (%d tried)", name, sk->nvariants - 1);
    if (w) {
      mk_buf_printf(&msg, "; %s: %s", w->name, w->status);
      if (strcmp(w->status, "mismatch") == 0) mk_buf_printf(&msg, ", max abs error %.3g", w->max_abs_err);
      if (w->reason && *w->reason) mk_buf_printf(&msg, ": %.400s", w->reason);
    }
    sev = MK_LSP_SEV_ERROR;
    code = strcmp(w ? w->status : "", "compile_error") == 0 ? "subkernel-compile-error"
                                                           : "subkernel-incorrect";
    break;
  }
  }
  if (mk_lsp_analysis_add_finding(a, r, sev, code, mk_buf_cstr(&msg)) == 0 && in->composed_path) {
    char head[64];
    snprintf(head, sizeof head, "# ---- sk%d ", sk->index);
    int line = find_line(in->composed_text, head);
    if (line < 0) line = find_line(in->composed_text, "class ModelNew");
    if (line >= 0) {
      char note[256];
      snprintf(note, sizeof note, "sk%d %s in the composed ModelNew", sk->index, name);
      mk_lsp_range nr = {line, 0, line, 0};
      mk_lsp_finding_add_note(&a->findings[a->nfindings - 1], in->composed_path, nr, note);
    }
  }
  mk_buf_free(&msg);
}

static void subkernel_region(const lsp_engine_render_in *in, const mk_session_subkernel *sk,
                             mk_lsp_range r, mk_lsp_analysis *a) {
  const mk_session_module *m = in->view;
  mk_buf hover, label;
  mk_buf_init(&hover, 1 << 20);
  mk_buf_init(&label, 1024);
  lsp_engine_variants_markdown(m, sk, &hover);
  mk_buf_printf(&label, "sk%d %s: %s", sk->index, sk->name ? sk->name : "?",
                sk->summary ? sk->summary : "");
  int rc = mk_lsp_analysis_add_region(a, r, mk_buf_cstr(&label), mk_buf_cstr(&hover));
  mk_buf_free(&hover);
  mk_buf_free(&label);
  if (rc != 0) return;
  mk_lsp_region *g = &a->regions[a->nregions - 1];
  char title[512];
  snprintf(title, sizeof title, "Evolve subkernel %s", sk->name ? sk->name : "?");
  mk_lsp_analysis_add_action(a, g, title, ENGINE_CMD_EVOLVE, args_sk(in->uri, sk->index, -1),
                             "refactor.rewrite", false);
  for (int k = 1; k < sk->nvariants; k++) {
    const mk_session_variant *v = &sk->variants[k];
    if (k == sk->chosen || strcmp(v->status, "ok") != 0) continue;
    if (v->speedup_eager > 0)
      snprintf(title, sizeof title, "Swap subkernel %s → %s (%.2fx)", sk->name, v->name,
               v->speedup_eager);
    else
      snprintf(title, sizeof title, "Swap subkernel %s → %s (verified %d/%d, untimed)", sk->name,
               v->name, v->trials_passed, v->trials);
    mk_lsp_analysis_add_action(a, g, title, ENGINE_CMD_SWAP, args_sk(in->uri, sk->index, k),
                               "refactor.rewrite", false);
  }
  if (sk->nvariants > 0) {
    snprintf(title, sizeof title, "Edit subkernel %s (variant %s)", sk->name ? sk->name : "?",
             sk->variants[sk->chosen].name);
    mk_lsp_analysis_add_action(a, g, title, ENGINE_CMD_EDIT, args_sk(in->uri, sk->index, sk->chosen),
                               "refactor.rewrite", false);
  }
  if (sk->chosen > 0) {
    snprintf(title, sizeof title, "Restore PyTorch reference for %s", sk->name);
    mk_lsp_analysis_add_action(a, g, title, ENGINE_CMD_RESTORE, args_sk(in->uri, sk->index, -1),
                               "refactor.rewrite", false);
  }
}

void lsp_engine_render(const lsp_engine_render_in *in, mk_lsp_analysis *a) {
  mk_lsp_range top = {0, 0, 0, 0};
  if (in->engine_error)
    mk_lsp_analysis_add_finding(a, top, MK_LSP_SEV_ERROR, "engine-unavailable", in->engine_error);
  if (in->error) {
    mk_lsp_range r = top;
    int first = 0, end = 0;
    if (in->error_line > 0 && line_cols(in->text, in->error_line - 1, &first, &end))
      r = (mk_lsp_range){in->error_line - 1, first, in->error_line - 1, end};
    char msg[MK_ERRMSG_MAX + 64];
    snprintf(msg, sizeof msg, "mkevolve could not analyse the module: %s", in->error);
    mk_lsp_analysis_add_finding(a, r, MK_LSP_SEV_ERROR, "analysis-failed", msg);
  }
  if (!in->info->capturable) return;
  forward_region(in, a);
  const mk_session_module *m = in->view;
  for (int i = 0; m && i < m->nsubkernels; i++) {
    const mk_session_subkernel *sk = &m->subkernels[i];
    int l0 = lsp_engine_line_map_fwd(in->map, sk->first_line - 1);
    int l1 = lsp_engine_line_map_fwd(in->map, sk->last_line - 1);
    if (l0 < 0) continue; /* edited since the analysis: nothing to say until saved */
    if (l1 < l0) l1 = l0;
    int first = 0, end = 0, f1 = 0, e1 = 0;
    if (!line_cols(in->text, l0, &first, &end) || !line_cols(in->text, l1, &f1, &e1)) continue;
    mk_lsp_range r = {l0, first, l1, e1};
    subkernel_finding(in, sk, r, a);
    subkernel_region(in, sk, r, a);
  }
}

/* ---- edit files ------------------------------------------------------------------------ */

/* The range of 1-based `line` (from byte column `col`, 1-based, when known)
 * to its end; line 1 of the file when the text has no such line. */
static mk_lsp_range edit_range(const char *text, int line, int col) {
  int first = 0, end = 0;
  if (line < 1 || !line_cols(text, line - 1, &first, &end)) {
    line = 1;
    if (!line_cols(text, 0, &first, &end)) return (mk_lsp_range){0, 0, 0, 0};
  }
  int start = col > 0 && col - 1 <= end ? col - 1 : first;
  return (mk_lsp_range){line - 1, start, line - 1, end > start ? end : start};
}

void lsp_engine_edit_findings(const mk_session_edit_result *r, const char *text, mk_lsp_analysis *a) {
  mk_buf msg;
  mk_buf_init(&msg, 8192);
  if (strcmp(r->status, "ok") == 0) {
    if (r->time_ms > 0 && r->speedup_eager > 0)
      mk_buf_printf(&msg, "verified: %.2fx vs PyTorch (%.3f ms)", r->speedup_eager, r->time_ms);
    else
      mk_buf_puts(&msg, "verified (untimed on CPU)");
    mk_buf_printf(&msg, " %d/%d", r->trials_passed, r->trials);
    if (r->added)
      mk_buf_printf(&msg, " — now variant %s of subkernel %s (swap it in from the module)", r->variant,
                    r->subkernel_name);
    else
      mk_buf_printf(&msg, " — not added to %s: an evolve ran on the module meanwhile", r->subkernel_name);
    mk_lsp_analysis_add_finding(a, edit_range(text, 1, 0), MK_LSP_SEV_INFO, "edit-verified",
                                mk_buf_cstr(&msg));
    mk_buf_free(&msg);
    return;
  }
  char code[96];
  snprintf(code, sizeof code, "edit-%s", r->status);
  for (char *p = code; *p; p++)
    if (*p == '_') *p = '-';
  if (strcmp(r->status, "compile_error") == 0 && r->ndiags > 0) {
    for (int i = 0; i < r->ndiags; i++) {
      const mk_session_edit_diag *d = &r->diags[i];
      mk_lsp_severity sev = strcmp(d->severity, "warning") == 0 ? MK_LSP_SEV_WARNING
                            : strstr(d->severity, "error") ? MK_LSP_SEV_ERROR
                                                             : MK_LSP_SEV_INFO;
      mk_buf_reset(&msg);
      mk_buf_printf(&msg, "%s (NVRTC, %s)", d->message, r->variant);
      mk_lsp_analysis_add_finding(a, edit_range(text, d->line, d->column), sev, code, mk_buf_cstr(&msg));
    }
    mk_buf_free(&msg);
    return;
  }
  mk_buf_printf(&msg, "%s: %s", r->status, r->reason && *r->reason ? r->reason : "(no reason given)");
  mk_lsp_analysis_add_finding(a, edit_range(text, r->line, r->line > 0 ? r->column : 0),
                              MK_LSP_SEV_ERROR, code, mk_buf_cstr(&msg));
  mk_buf_free(&msg);
}
