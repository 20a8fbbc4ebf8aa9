/* llm_report.c — verification reports and timings as prompt text.
 *
 * The verifier's report (docs/verify.md) is a JSON object of a few hundred
 * to a few thousand characters (per-trial lists, torch call lists, nested
 * timing objects). Agents need its substance, not its syntax: the digest
 * keeps what a kernel engineer would read first and costs a fraction of
 * the tokens. */
#include "llm_internal.h"

#include <math.h>
#include <string.h>

#define TRACEBACK_LINES 30
#define DIAGNOSTICS_MAX 20

static const char *str_of(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

static bool num_of(const cJSON *o, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (cJSON_IsNumber(v)) {
    *out = v->valuedouble;
    return true;
  }
  if (cJSON_IsString(v) && (strcmp(v->valuestring, "inf") == 0 || strcmp(v->valuestring, "nan") == 0)) {
    *out = strcmp(v->valuestring, "inf") == 0 ? INFINITY : NAN;
    return true;
  }
  return false;
}

static void put_g(mk_buf *b, double d) {
  if (isinf(d)) mk_buf_puts(b, "inf");
  else if (isnan(d)) mk_buf_puts(b, "nan");
  else mk_buf_printf(b, "%.6g", d);
}

/* The last TRACEBACK_LINES lines: the frame that raised is at the end. */
static void put_traceback(mk_buf *b, const char *tb) {
  int lines = 0;
  const char *start = tb + strlen(tb);
  while (start > tb) {
    if (start[-1] == '\n' && start[0] != '\0' && ++lines > TRACEBACK_LINES) break;
    start--;
  }
  if (start > tb) mk_buf_puts(b, "  ...\n");
  mk_buf_puts(b, start);
  if (b->len && b->data[b->len - 1] != '\n') mk_buf_putc(b, '\n');
}

/* The first TRACEBACK_LINES lines: a compiler's first error is the cause,
 * the later ones often its echoes. */
static void put_head(mk_buf *b, const char *log) {
  const char *p = log;
  for (int lines = 0; *p && lines < TRACEBACK_LINES; lines++) {
    const char *eol = strchr(p, '\n');
    p = eol ? eol + 1 : p + strlen(p);
  }
  size_t n = (size_t)(p - log);
  while (n > 0 && (log[n - 1] == '\n' || log[n - 1] == '\r' || log[n - 1] == ' ')) n--;
  mk_buf_append(b, log, n);
  mk_buf_putc(b, '\n');
  if (*p) mk_buf_puts(b, "  ...\n");
}

/* A compiler's diagnostics (NVRTC's, engine/backend), already on the
 * candidate module's lines. False when there are none. */
static bool put_diagnostics(mk_buf *b, const cJSON *diags) {
  if (!cJSON_IsArray(diags) || cJSON_GetArraySize(diags) == 0) return false;
  mk_buf_puts(b, "compiler diagnostics (line:column in the candidate module):\n");
  const cJSON *d;
  int i = 0, n = cJSON_GetArraySize(diags);
  cJSON_ArrayForEach(d, diags) {
    if (i++ == DIAGNOSTICS_MAX) {
      mk_buf_printf(b, "  ... %d more\n", n - DIAGNOSTICS_MAX);
      break;
    }
    double line = 0, col = 0;
    num_of(d, "line", &line);
    num_of(d, "column", &col);
    const char *sev = str_of(d, "severity"), *msg = str_of(d, "message");
    mk_buf_printf(b, "  line %d:%d: %s: %s\n", (int)line, (int)col, sev ? sev : "error", msg ? msg : "");
  }
  return true;
}

static void put_worst(mk_buf *b, const cJSON *w) {
  if (!cJSON_IsObject(w)) return;
  double d;
  mk_buf_puts(b, "first wrong element:");
  if (num_of(w, "output", &d)) mk_buf_printf(b, " output %d", (int)d);
  const cJSON *idx = cJSON_GetObjectItemCaseSensitive(w, "index");
  if (cJSON_IsArray(idx)) {
    mk_buf_puts(b, " at [");
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, idx) mk_buf_printf(b, "%s%lld", i++ ? ", " : "", (long long)it->valuedouble);
    mk_buf_putc(b, ']');
  }
  if (num_of(w, "expected", &d)) {
    mk_buf_puts(b, ": expected ");
    put_g(b, d);
  }
  if (num_of(w, "actual", &d)) {
    mk_buf_puts(b, ", got ");
    put_g(b, d);
  }
  if (num_of(w, "trial", &d)) mk_buf_printf(b, " (trial %d)", (int)d);
  mk_buf_putc(b, '\n');
}

static void put_timing(mk_buf *b, const cJSON *t) {
  if (!cJSON_IsObject(t)) return;
  if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "available"))) {
    const char *why = str_of(t, "reason");
    mk_buf_printf(b, "timing: not available%s%s\n", why ? ": " : "", why ? why : "");
    return;
  }
  double d;
  mk_buf_puts(b, "timing:");
  if (num_of(t, "median_ms", &d)) mk_buf_printf(b, " median %.4g ms", d);
  if (num_of(t, "min_ms", &d)) mk_buf_printf(b, ", min %.4g ms", d);
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(t, "reference_eager");
  if (num_of(e, "median_ms", &d)) mk_buf_printf(b, "; PyTorch eager %.4g ms", d);
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "reference_compile");
  if (num_of(c, "median_ms", &d)) mk_buf_printf(b, ", torch.compile %.4g ms", d);
  if (num_of(t, "speedup_vs_eager", &d) && d > 0) mk_buf_printf(b, "; %.2fx vs eager", d);
  if (num_of(t, "speedup_vs_compile", &d) && d > 0) mk_buf_printf(b, ", %.2fx vs torch.compile", d);
  const char *dev = str_of(t, "device");
  if (dev) mk_buf_printf(b, " on %s", dev);
  mk_buf_putc(b, '\n');
}

void mk_llm_report_text(const char *report_json, mk_buf *out) {
  if (report_json == NULL) return;
  cJSON *r = cJSON_Parse(report_json);
  if (!cJSON_IsObject(r)) {
    cJSON_Delete(r);
    mk_buf_puts(out, report_json);
    return;
  }
  size_t start = out->len;
  const char *s;
  double d, d2;
  if ((s = str_of(r, "status"))) mk_buf_printf(out, "status: %s\n", s);
  if ((s = str_of(r, "reason"))) mk_buf_printf(out, "reason: %s\n", s);
  if (num_of(r, "line", &d)) {
    double col;
    if (num_of(r, "column", &col) && col > 0)
      mk_buf_printf(out, "line in the candidate: %d, column %d\n", (int)d, (int)col);
    else
      mk_buf_printf(out, "line in the candidate: %d\n", (int)d);
  }
  if (num_of(r, "trials_passed", &d) && num_of(r, "trials", &d2))
    mk_buf_printf(out, "trials passed: %d of %d\n", (int)d, (int)d2);
  if (num_of(r, "max_abs_error", &d)) {
    mk_buf_puts(out, "max abs error: ");
    put_g(out, d);
    if (num_of(r, "max_rel_error", &d)) {
      mk_buf_puts(out, ", max rel error: ");
      put_g(out, d);
    }
    mk_buf_putc(out, '\n');
  }
  if (num_of(r, "failing_elements", &d) && d > 0) {
    mk_buf_printf(out, "wrong elements: %.0f", d);
    if (num_of(r, "elements", &d2)) mk_buf_printf(out, " of %.0f", d2);
    mk_buf_putc(out, '\n');
  }
  const cJSON *nf = cJSON_GetObjectItemCaseSensitive(r, "nonfinite");
  if (num_of(nf, "nan", &d) && num_of(nf, "inf", &d2) && d + d2 > 0)
    mk_buf_printf(out, "non-finite values where the reference is finite: %.0f NaN, %.0f Inf\n", d, d2);
  put_worst(out, cJSON_GetObjectItemCaseSensitive(r, "worst"));
  const cJSON *tol = cJSON_GetObjectItemCaseSensitive(r, "tolerance");
  if (num_of(tol, "atol", &d) && num_of(tol, "rtol", &d2))
    mk_buf_printf(out, "tolerance: atol %g, rtol %g\n", d, d2);
  if ((s = str_of(r, "error_kind"))) mk_buf_printf(out, "error kind: %s\n", s);
  const cJSON *calls = cJSON_GetObjectItemCaseSensitive(r, "torch_calls");
  if (cJSON_IsArray(calls) && cJSON_GetArraySize(calls) > 0) {
    mk_buf_puts(out, "torch calls made by the candidate:");
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, calls) if (cJSON_IsString(it) && i++ < 20) mk_buf_printf(out, " %s", it->valuestring);
    mk_buf_putc(out, '\n');
  }
  put_timing(out, cJSON_GetObjectItemCaseSensitive(r, "timing"));
  bool compiled = put_diagnostics(out, cJSON_GetObjectItemCaseSensitive(r, "diagnostics"));
  if ((s = str_of(r, "traceback")) && compiled) {
    /* NVRTC's log shows each error's source line and a caret; its own line
     * numbers count from the first line of MK_CUDA_SOURCE. */
    mk_buf_puts(out, "compiler log (first lines; its line numbers count from the first line of "
                     "MK_CUDA_SOURCE):\n");
    put_head(out, s);
  } else if (s) {
    mk_buf_puts(out, "traceback (last lines):\n");
    put_traceback(out, s);
  }
  /* Not the verifier's format (another tool's report): show it as it is. */
  if (out->len == start) mk_buf_puts(out, report_json);
  cJSON_Delete(r);
}

void mk_llm_timing_line(const mk_propose_verdict *r, mk_buf *out) {
  if (r->time_ms >= 0) {
    mk_buf_printf(out, "%.4g ms", r->time_ms);
    if (r->ref_eager_ms > 0) mk_buf_printf(out, ", %.2fx vs eager", r->ref_eager_ms / r->time_ms);
    if (r->ref_compile_ms > 0)
      mk_buf_printf(out, ", %.2fx vs torch.compile", r->ref_compile_ms / r->time_ms);
    return;
  }
  mk_buf_printf(out, "verified %d/%d trials, untimed", r->trials_passed, r->trials);
}
