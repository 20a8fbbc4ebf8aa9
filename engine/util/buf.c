/* buf.c — bounded growable buffer and small string/file helpers. */
#include "mk_buf.h"

#include "mk_err.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mk_buf_init(mk_buf *b, size_t cap) {
  b->data = NULL;
  b->len = 0;
  b->alloc = 0;
  b->cap = cap ? cap : MK_BUF_DEFAULT_CAP;
  b->err = 0;
}

void mk_buf_free(mk_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->alloc = 0;
  b->err = 0;
}

void mk_buf_reset(mk_buf *b) {
  b->len = 0;
  b->err = 0;
  if (b->data) b->data[0] = '\0';
}

/* Makes room for `extra` more bytes plus the terminating NUL. */
static int mk_buf_reserve(mk_buf *b, size_t extra) {
  if (b->err) return b->err;
  if (extra > b->cap || b->len > b->cap - extra) return b->err = MK_ERANGE;
  size_t need = b->len + extra + 1;
  if (need <= b->alloc) return 0;
  size_t n = b->alloc ? b->alloc : 64;
  while (n < need) n = n > SIZE_MAX / 2 ? need : n * 2;
  char *p = realloc(b->data, n);
  if (p == NULL) return b->err = MK_ENOMEM;
  b->data = p;
  b->alloc = n;
  return 0;
}

int mk_buf_append(mk_buf *b, const void *p, size_t n) {
  int rc = mk_buf_reserve(b, n);
  if (rc) return rc;
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int mk_buf_puts(mk_buf *b, const char *s) { return mk_buf_append(b, s, strlen(s)); }

int mk_buf_putc(mk_buf *b, char c) { return mk_buf_append(b, &c, 1); }

int mk_buf_vprintf(mk_buf *b, const char *fmt, va_list ap) {
  if (b->err) return b->err;
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return b->err = MK_EINVAL;
  int rc = mk_buf_reserve(b, (size_t)n);
  if (rc) return rc;
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
  return 0;
}

int mk_buf_printf(mk_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = mk_buf_vprintf(b, fmt, ap);
  va_end(ap);
  return rc;
}

int mk_buf_indent(mk_buf *b, int n) {
  for (int i = 0; i < n; i++) {
    int rc = mk_buf_putc(b, ' ');
    if (rc) return rc;
  }
  return 0;
}

/* Shared escaper: JSON and Python agree on these escapes for the
 * characters we emit; both get \uXXXX for other control bytes. */
static int mk_buf_quoted(mk_buf *b, const char *s) {
  mk_buf_putc(b, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': mk_buf_puts(b, "\\\""); break;
    case '\\': mk_buf_puts(b, "\\\\"); break;
    case '\n': mk_buf_puts(b, "\\n"); break;
    case '\r': mk_buf_puts(b, "\\r"); break;
    case '\t': mk_buf_puts(b, "\\t"); break;
    default:
      if (*p < 0x20) mk_buf_printf(b, "\\u%04x", *p);
      else mk_buf_putc(b, (char)*p);
    }
  }
  return mk_buf_putc(b, '"');
}

int mk_buf_json_str(mk_buf *b, const char *s) { return mk_buf_quoted(b, s ? s : ""); }

int mk_buf_py_str(mk_buf *b, const char *s) { return mk_buf_quoted(b, s ? s : ""); }

const char *mk_buf_cstr(mk_buf *b) { return b->data ? b->data : ""; }

char *mk_buf_steal(mk_buf *b, size_t *len_out) {
  if (b->err) return NULL;
  if (b->data == NULL && mk_buf_reserve(b, 0)) return NULL;
  if (b->len == 0) b->data[0] = '\0';
  char *p = b->data;
  if (len_out) *len_out = b->len;
  b->data = NULL;
  b->len = b->alloc = 0;
  return p;
}

int mk_strlcpy(char *dst, const char *src, size_t dst_size) {
  if (dst_size == 0) return MK_ERANGE;
  size_t n = strlen(src);
  if (n >= dst_size) {
    memcpy(dst, src, dst_size - 1);
    dst[dst_size - 1] = '\0';
    return MK_ERANGE;
  }
  memcpy(dst, src, n + 1);
  return 0;
}

char *mk_strdup_vprintf(const char *fmt, va_list ap) {
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_vprintf(&b, fmt, ap);
  char *s = mk_buf_steal(&b, NULL);
  mk_buf_free(&b);
  return s;
}

char *mk_strdup_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = mk_strdup_vprintf(fmt, ap);
  va_end(ap);
  return s;
}

char *mk_strdup(const char *s) { return s ? mk_strndup(s, strlen(s)) : NULL; }

char *mk_strndup(const char *s, size_t n) {
  if (s == NULL) return NULL;
  char *p = malloc(n + 1);
  if (p == NULL) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

int mk_read_file(const char *path, size_t max_bytes, char **out, size_t *len_out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (f == NULL) return errno == ENOENT ? MK_ENOENT : MK_EIO;
  mk_buf b;
  mk_buf_init(&b, max_bytes);
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (mk_buf_append(&b, chunk, n)) break;
  }
  int io_err = ferror(f);
  fclose(f);
  if (b.err || io_err) {
    int rc = b.err ? b.err : MK_EIO;
    mk_buf_free(&b);
    return rc;
  }
  *out = mk_buf_steal(&b, len_out);
  return *out ? 0 : MK_ENOMEM;
}

int mk_write_file(const char *path, const char *data, size_t len) {
  char tmp[4096];
  int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  if (n < 0 || (size_t)n >= sizeof tmp) return MK_ERANGE;
  FILE *f = fopen(tmp, "wb");
  if (f == NULL) return MK_EIO;
  size_t w = fwrite(data, 1, len, f);
  int close_rc = fclose(f);
  if (w != len || close_rc != 0 || rename(tmp, path) != 0) {
    remove(tmp);
    return MK_EIO;
  }
  return 0;
}
