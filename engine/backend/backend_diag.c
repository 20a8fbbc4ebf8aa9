/* backend_diag.c — NVRTC's log as diagnostics on the candidate's lines.
 *
 * NVRTC (the EDG front end) prints each problem as
 *     candidate.cu(12): error: identifier "y" is undefined
 *         y = x + 1;
 *         ^
 * that is a header line with the CUDA line, the source line indented by a
 * fixed prefix, and a caret under the column. Only the header is required:
 * the caret, when present, gives the column. Lines are shifted by the
 * candidate line the CUDA source starts on, so the editor underlines the
 * line in the Python module the user sees. */
#include "mk_backend.h"

#include "mk_buf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "(12): error: msg" after the program name: fills line, severity, message. */
static bool parse_header(const char *s, size_t len, mk_backend_diag *d) {
  const char *open = memchr(s, '(', len);
  if (open == NULL) return false;
  const char *p = open + 1, *end = s + len;
  if (p >= end || !isdigit((unsigned char)*p)) return false;
  long line = 0;
  while (p < end && isdigit((unsigned char)*p)) line = line * 10 + (*p++ - '0');
  if (end - p < 3 || p[0] != ')' || p[1] != ':' || p[2] != ' ') return false;
  p += 3;
  static const struct {
    const char *word;
    mk_backend_severity sev;
  } kinds[] = {{"catastrophic error", MK_BACKEND_ERROR}, {"error", MK_BACKEND_ERROR},
               {"warning", MK_BACKEND_WARNING}, {"remark", MK_BACKEND_NOTE},
               {"note", MK_BACKEND_NOTE}};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    size_t wl = strlen(kinds[i].word);
    if ((size_t)(end - p) < wl || strncmp(p, kinds[i].word, wl) != 0) continue;
    const char *q = p + wl;
    while (q < end && *q != ':') q++; /* " #177-D" diagnostic numbers */
    if (q >= end) return false;
    q++;
    while (q < end && *q == ' ') q++;
    *d = (mk_backend_diag){.line = (int)(line > 1 << 30 ? 0 : line), .severity = kinds[i].sev};
    size_t ml = (size_t)(end - q);
    if (ml >= sizeof d->message) ml = sizeof d->message - 1;
    memcpy(d->message, q, ml);
    d->message[ml] = '\0';
    return true;
  }
  return false;
}

/* A caret line: spaces then '^' and nothing else. Its column, or 0. */
static int caret_column(const char *s, size_t len) {
  size_t i = 0;
  while (i < len && s[i] == ' ') i++;
  if (i >= len || s[i] != '^') return 0;
  for (size_t k = i + 1; k < len; k++)
    if (s[k] != ' ' && s[k] != '\r') return 0;
  return (int)i + 1;
}

/* Width of the indentation NVRTC puts before the echoed source line: the
 * echoed line minus the real one. Without the real line, the known prefix. */
#define ECHO_PREFIX 2

int mk_backend_parse_log(const char *log, int line_offset, mk_backend_diag **out, int *n) {
  *out = NULL;
  *n = 0;
  if (log == NULL) return 0;
  int cap = 0;
  mk_backend_diag *ds = NULL;
  int last = -1;       /* diagnostic the caret lines belong to */
  int since_head = 0;  /* lines since its header */
  for (const char *s = log; *s;) {
    const char *nl = strchr(s, '\n');
    size_t len = nl ? (size_t)(nl - s) : strlen(s);
    mk_backend_diag d;
    if (parse_header(s, len, &d)) {
      if (*n == cap) {
        cap = cap ? cap * 2 : 8;
        mk_backend_diag *nd = realloc(ds, (size_t)cap * sizeof *nd);
        if (nd == NULL) {
          free(ds);
          return MK_ENOMEM;
        }
        ds = nd;
      }
      if (d.line > 0) d.line += line_offset;
      ds[*n] = d;
      last = (*n)++;
      since_head = 0;
    } else if (last >= 0 && ++since_head == 2) {
      int col = caret_column(s, len);
      if (col > ECHO_PREFIX) ds[last].column = col - ECHO_PREFIX;
    }
    if (nl == NULL) break;
    s = nl + 1;
  }
  *out = ds;
  return 0;
}

static const char *severity_name(mk_backend_severity s) {
  switch (s) {
  case MK_BACKEND_ERROR: return "error";
  case MK_BACKEND_WARNING: return "warning";
  case MK_BACKEND_NOTE: return "note";
  }
  return "error";
}

/* The first error, else the first diagnostic. */
static const mk_backend_diag *first_error(const mk_backend_result *r) {
  for (int i = 0; i < r->ndiags; i++)
    if (r->diags[i].severity == MK_BACKEND_ERROR) return &r->diags[i];
  return r->ndiags > 0 ? &r->diags[0] : NULL;
}

cJSON *mk_backend_report(const mk_backend_result *r) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL) return NULL;
  const mk_backend_diag *d = first_error(r);
  mk_buf reason;
  mk_buf_init(&reason, 4096);
  mk_buf_puts(&reason, "CUDA compile error");
  if (d && d->line > 0) mk_buf_printf(&reason, " at line %d", d->line);
  if (d && d->column > 0) mk_buf_printf(&reason, ":%d", d->column);
  if (d) mk_buf_printf(&reason, ": %s", d->message);
  cJSON_AddStringToObject(o, "status", r->ok ? "ok" : "compile_error");
  cJSON_AddStringToObject(o, "reason", r->ok ? "" : mk_buf_cstr(&reason));
  mk_buf_free(&reason);
  if (d && d->line > 0 && !r->ok) cJSON_AddNumberToObject(o, "line", d->line);
  else cJSON_AddNullToObject(o, "line");
  if (d && d->column > 0 && !r->ok) cJSON_AddNumberToObject(o, "column", d->column);
  cJSON_AddStringToObject(o, "traceback", r->log ? r->log : "");
  cJSON *arr = cJSON_AddArrayToObject(o, "diagnostics");
  for (int i = 0; arr && i < r->ndiags; i++) {
    cJSON *e = cJSON_CreateObject();
    if (e == NULL) break;
    cJSON_AddNumberToObject(e, "line", r->diags[i].line);
    cJSON_AddNumberToObject(e, "column", r->diags[i].column);
    cJSON_AddStringToObject(e, "severity", severity_name(r->diags[i].severity));
    cJSON_AddStringToObject(e, "message", r->diags[i].message);
    cJSON_AddItemToArray(arr, e);
  }
  cJSON_AddStringToObject(o, "backend", "cuda");
  return o;
}
