/* lsp_docs.c — document store, incremental edits, UTF-16 positions. */
#include "mk_lsp_docs.h"
#include "mk_utf8.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

void mk_lsp_docs_init(mk_lsp_docs *d) { memset(d, 0, sizeof *d); }

static void doc_free(mk_lsp_doc *doc) {
  if (doc == NULL) return;
  free(doc->uri);
  free(doc->path);
  free(doc->language);
  mk_buf_free(&doc->text);
  free(doc);
}

void mk_lsp_docs_free(mk_lsp_docs *d) {
  for (int i = 0; i < d->n; i++) doc_free(d->items[i]);
  free(d->items);
  memset(d, 0, sizeof *d);
}

static int find(const mk_lsp_docs *d, const char *uri) {
  for (int i = 0; i < d->n; i++)
    if (strcmp(d->items[i]->uri, uri) == 0) return i;
  return -1;
}

mk_lsp_doc *mk_lsp_docs_get(mk_lsp_docs *d, const char *uri) {
  int i = uri ? find(d, uri) : -1;
  return i < 0 ? NULL : d->items[i];
}

int mk_lsp_docs_open(mk_lsp_docs *d, const char *uri, const char *language, int version,
                     const char *text, size_t len, mk_lsp_doc **out) {
  if (len > MK_LSP_MAX_DOC) return MK_ERANGE;
  mk_lsp_doc *doc = calloc(1, sizeof *doc);
  if (doc == NULL) return MK_ENOMEM;
  mk_buf_init(&doc->text, MK_LSP_MAX_DOC);
  doc->uri = mk_strdup(uri);
  doc->path = mk_lsp_uri_to_path(uri);
  doc->language = mk_strdup(language ? language : "");
  doc->version = version;
  doc->generation = ++d->next_generation;
  if (doc->uri == NULL || doc->language == NULL || mk_buf_append(&doc->text, text, len) != 0 ||
      mk_buf_cstr(&doc->text) == NULL) {
    doc_free(doc);
    return MK_ENOMEM;
  }
  int i = find(d, uri);
  if (i >= 0) {
    doc_free(d->items[i]);
    d->items[i] = doc;
  } else {
    if (d->n == d->cap) {
      int cap = d->cap ? d->cap * 2 : 8;
      mk_lsp_doc **p = realloc(d->items, (size_t)cap * sizeof *p);
      if (p == NULL) {
        doc_free(doc);
        return MK_ENOMEM;
      }
      d->items = p;
      d->cap = cap;
    }
    d->items[d->n++] = doc;
  }
  if (out) *out = doc;
  return 0;
}

int mk_lsp_docs_close(mk_lsp_docs *d, const char *uri) {
  int i = find(d, uri);
  if (i < 0) return MK_ENOENT;
  doc_free(d->items[i]);
  memmove(&d->items[i], &d->items[i + 1], (size_t)(d->n - i - 1) * sizeof d->items[0]);
  d->n--;
  return 0;
}

/* ---- positions ------------------------------------------------------------ */

size_t mk_lsp_utf16_to_byte(const char *line, size_t len, int utf16_col) {
  if (utf16_col <= 0) return 0;
  const unsigned char *p = (const unsigned char *)line;
  size_t i = 0;
  long units = 0;
  while (i < len) {
    int u;
    size_t n = mk_utf8_char(p + i, len - i, &u);
    if (units + u > utf16_col) break; /* inside a surrogate pair: round down */
    units += u;
    i += n;
  }
  return i;
}

int mk_lsp_byte_to_utf16(const char *line, size_t len, size_t byte_col) {
  if (byte_col > len) byte_col = len;
  const unsigned char *p = (const unsigned char *)line;
  size_t i = 0;
  int units = 0;
  while (i < byte_col) {
    int u;
    size_t n = mk_utf8_char(p + i, len - i, &u);
    if (i + n > byte_col) break; /* byte column inside a character: round down */
    units += u;
    i += n;
  }
  return units;
}

/* Returns the end of the line starting at `start` (offset of its terminator)
 * and sets *next to the start of the following line (or len). */
static size_t line_end(const char *s, size_t len, size_t start, size_t *next) {
  size_t i = start;
  while (i < len && s[i] != '\n' && s[i] != '\r') i++;
  if (i < len && s[i] == '\r' && i + 1 < len && s[i + 1] == '\n') *next = i + 2;
  else *next = i < len ? i + 1 : len;
  return i;
}

size_t mk_lsp_doc_line(const mk_lsp_doc *doc, int line, size_t *len_out) {
  const char *s = doc->text.data ? doc->text.data : "";
  size_t len = doc->text.len, start = 0, next = 0;
  for (int l = 0; l < line; l++) {
    if (line_end(s, len, start, &next) == len) { /* asked past the last line */
      *len_out = 0;
      return len;
    }
    start = next;
  }
  *len_out = line_end(s, len, start, &next) - start;
  return start;
}

size_t mk_lsp_doc_offset(const mk_lsp_doc *doc, int line, int utf16_col) {
  if (line < 0) return 0;
  size_t len;
  size_t start = mk_lsp_doc_line(doc, line, &len);
  if (start >= doc->text.len) return doc->text.len;
  return start + mk_lsp_utf16_to_byte(doc->text.data + start, len, utf16_col);
}

int mk_lsp_doc_utf16_col(const mk_lsp_doc *doc, int line, size_t byte_col) {
  size_t len;
  size_t start = mk_lsp_doc_line(doc, line, &len);
  if (start >= doc->text.len) return 0;
  return mk_lsp_byte_to_utf16(doc->text.data + start, len, byte_col);
}

int mk_lsp_doc_line_count(const mk_lsp_doc *doc) {
  const char *s = doc->text.data ? doc->text.data : "";
  size_t len = doc->text.len, start = 0, next;
  int n = 1;
  while (start < len) {
    size_t e = line_end(s, len, start, &next);
    if (e == len) break;
    n++;
    start = next;
  }
  return n;
}

/* ---- edits ---------------------------------------------------------------- */

static int get_pos(const cJSON *pos, int *line, int *col) {
  const cJSON *l = cJSON_GetObjectItemCaseSensitive(pos, "line");
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(pos, "character");
  if (!cJSON_IsNumber(l) || !cJSON_IsNumber(c) || l->valuedouble < 0 || c->valuedouble < 0 ||
      l->valuedouble > 1e9 || c->valuedouble > 1e9)
    return MK_EINVAL;
  *line = (int)l->valuedouble;
  *col = (int)c->valuedouble;
  return 0;
}

/* Applies one change to `text` (a scratch copy). */
static int apply_one(mk_lsp_doc *scratch, const cJSON *ch, mk_errmsg *err) {
  const cJSON *text = cJSON_GetObjectItemCaseSensitive(ch, "text");
  const cJSON *range = cJSON_GetObjectItemCaseSensitive(ch, "range");
  if (!cJSON_IsString(text)) return mk_errf(err, MK_EINVAL, "content change without text");
  size_t tlen = strlen(text->valuestring);
  if (range == NULL || cJSON_IsNull(range)) {
    mk_buf_reset(&scratch->text);
    if (mk_buf_append(&scratch->text, text->valuestring, tlen) != 0)
      return mk_errf(err, MK_ERANGE, "document larger than %zu bytes", (size_t)MK_LSP_MAX_DOC);
    return 0;
  }
  int sl, sc, el, ec;
  if (!cJSON_IsObject(range) ||
      get_pos(cJSON_GetObjectItemCaseSensitive(range, "start"), &sl, &sc) != 0 ||
      get_pos(cJSON_GetObjectItemCaseSensitive(range, "end"), &el, &ec) != 0)
    return mk_errf(err, MK_EINVAL, "content change with a malformed range");
  if (el < sl || (el == sl && ec < sc))
    return mk_errf(err, MK_EINVAL, "content change range ends before it starts (%d:%d-%d:%d)", sl,
                   sc, el, ec);
  size_t a = mk_lsp_doc_offset(scratch, sl, sc), b = mk_lsp_doc_offset(scratch, el, ec);
  if (b < a) b = a; /* both clamped past the end */
  size_t old = scratch->text.len;
  if (old - (b - a) + tlen > MK_LSP_MAX_DOC)
    return mk_errf(err, MK_ERANGE, "document larger than %zu bytes", (size_t)MK_LSP_MAX_DOC);
  mk_buf out;
  mk_buf_init(&out, MK_LSP_MAX_DOC);
  mk_buf_append(&out, scratch->text.data, a);
  mk_buf_append(&out, text->valuestring, tlen);
  if (mk_buf_append(&out, scratch->text.data + b, old - b) != 0) {
    mk_buf_free(&out);
    return mk_errf(err, MK_ENOMEM, "out of memory applying a change");
  }
  mk_buf_free(&scratch->text);
  scratch->text = out;
  return 0;
}

int mk_lsp_doc_apply_changes(mk_lsp_doc *doc, const cJSON *changes, int version, mk_errmsg *err) {
  if (!cJSON_IsArray(changes)) return mk_errf(err, MK_EINVAL, "contentChanges is not an array");
  mk_lsp_doc scratch = *doc;
  mk_buf_init(&scratch.text, MK_LSP_MAX_DOC);
  if (mk_buf_append(&scratch.text, doc->text.data ? doc->text.data : "", doc->text.len) != 0) {
    mk_buf_free(&scratch.text);
    return mk_errf(err, MK_ENOMEM, "out of memory applying a change");
  }
  const cJSON *ch;
  cJSON_ArrayForEach(ch, changes) {
    int rc = cJSON_IsObject(ch) ? apply_one(&scratch, ch, err)
                                : mk_errf(err, MK_EINVAL, "content change is not an object");
    if (rc != 0) {
      mk_buf_free(&scratch.text);
      return rc;
    }
  }
  mk_buf_cstr(&scratch.text);
  mk_buf_free(&doc->text);
  doc->text = scratch.text;
  doc->version = version;
  doc->generation++;
  return 0;
}

/* ---- URIs ----------------------------------------------------------------- */

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = tolower(c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

char *mk_lsp_uri_to_path(const char *uri) {
  if (uri == NULL || strncmp(uri, "file://", 7) != 0) return NULL;
  const char *p = uri + 7;
  if (*p != '/') { /* file://host/path: only localhost is local */
    if (strncmp(p, "localhost/", 10) != 0) return NULL;
    p += 9;
  }
  mk_buf out;
  mk_buf_init(&out, 65536);
  for (; *p && *p != '?' && *p != '#'; p++) {
    int h, l;
    if (*p == '%' && (h = hexval((unsigned char)p[1])) >= 0 && (l = hexval((unsigned char)p[2])) >= 0) {
      char c = (char)(h * 16 + l);
      if (c == '\0') { /* a NUL in a path cannot be honoured */
        mk_buf_free(&out);
        return NULL;
      }
      mk_buf_putc(&out, c);
      p += 2;
    } else {
      mk_buf_putc(&out, *p);
    }
  }
  return mk_buf_steal(&out, NULL);
}

char *mk_lsp_path_to_uri(const char *path) {
  if (path == NULL || path[0] != '/') return NULL;
  mk_buf out;
  mk_buf_init(&out, 65536);
  mk_buf_puts(&out, "file://");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if (isalnum(*p) || strchr("/-._~", *p)) mk_buf_putc(&out, (char)*p);
    else mk_buf_printf(&out, "%%%02X", *p);
  }
  return mk_buf_steal(&out, NULL);
}
