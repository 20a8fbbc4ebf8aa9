/* text.c — line index and position conversions between byte offsets and
 * (line, UTF-8 byte column), what tree-sitter and the capture speak; all
 * agree on what a line is (\n, \r\n or a lone \r) and on invalid UTF-8
 * (each bad byte is one character). UTF-16 columns are the editor's
 * business: the language server converts (lsp/lsp_docs.c). */
#include "mk_frontend.h"
#include "mk_utf8.h"

#include <stdint.h>
#include <stdlib.h>

int mk_text_index_init(mk_text_index *ix, const char *text, size_t len) {
  ix->text = text;
  ix->len = len;
  ix->nlines = 0;
  ix->line_starts = NULL;
  if (len >= (size_t)INT32_MAX) return MK_ERANGE;
  size_t cap = 64;
  size_t *starts = malloc(cap * sizeof *starts);
  if (starts == NULL) return MK_ENOMEM;
  size_t n = 0;
  starts[n++] = 0;
  for (size_t i = 0; i < len; i++) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    if (text[i] == '\r' && i + 1 < len && text[i + 1] == '\n') i++;
    if (n == cap) {
      size_t *s = realloc(starts, cap * 2 * sizeof *s);
      if (s == NULL) {
        free(starts);
        return MK_ENOMEM;
      }
      starts = s;
      cap *= 2;
    }
    starts[n++] = i + 1;
  }
  ix->line_starts = starts;
  ix->nlines = (int)n;
  return 0;
}

void mk_text_index_free(mk_text_index *ix) {
  free(ix->line_starts);
  ix->line_starts = NULL;
  ix->nlines = 0;
}

int mk_text_line_of(const mk_text_index *ix, size_t offset) {
  if (offset > ix->len) offset = ix->len;
  int lo = 0, hi = ix->nlines - 1; /* last line whose start <= offset */
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (ix->line_starts[mid] <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

static int clamp_line(const mk_text_index *ix, int line) {
  return line < 0 ? 0 : line >= ix->nlines ? ix->nlines - 1 : line;
}

size_t mk_text_line_start(const mk_text_index *ix, int line) { return ix->line_starts[clamp_line(ix, line)]; }

size_t mk_text_line_end(const mk_text_index *ix, int line) {
  line = clamp_line(ix, line);
  size_t start = ix->line_starts[line];
  size_t end = line + 1 < ix->nlines ? ix->line_starts[line + 1] : ix->len;
  if (end > start && ix->text[end - 1] == '\n') end--;
  if (end > start && ix->text[end - 1] == '\r') end--;
  return end;
}

/* Start of the character containing `offset` (searching from the line start). */
static size_t char_floor(const char *text, size_t line_start, size_t line_end, size_t offset) {
  const unsigned char *p = (const unsigned char *)text;
  size_t at = line_start;
  while (at < offset && at < line_end) {
    size_t n = mk_utf8_char(p + at, line_end - at, NULL);
    if (at + n > offset) break;
    at += n;
  }
  return at;
}

void mk_text_offset_to_bytecol(const mk_text_index *ix, size_t offset, int *line, int *col) {
  if (offset > ix->len) offset = ix->len;
  int l = mk_text_line_of(ix, offset);
  size_t start = ix->line_starts[l], end = mk_text_line_end(ix, l);
  *line = l;
  *col = (int)(char_floor(ix->text, start, end, offset < end ? offset : end) - start);
}

size_t mk_text_bytecol_to_offset(const mk_text_index *ix, int line, int col) {
  if (line < 0) return 0;
  if (line >= ix->nlines) return ix->len;
  size_t start = ix->line_starts[line], end = mk_text_line_end(ix, line);
  if (col <= 0) return start;
  return (size_t)col >= end - start ? end : start + (size_t)col;
}
