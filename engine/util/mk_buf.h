/* mk_buf.h — a growable byte buffer with a hard size cap.
 *
 * Every string the engine builds (generated Triton source, JSON lines,
 * LSP frames) goes through mk_buf so that no code path does unchecked
 * strcat/sprintf. A buffer refuses to grow past `cap` bytes and reports
 * MK_ERANGE; after any failure the buffer is marked failed and further
 * appends are no-ops, so a long emitter can check once at the end. */
#ifndef MK_BUF_H
#define MK_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct mk_buf {
  char *data;   /* NUL-terminated when len > 0 or after mk_buf_cstr */
  size_t len;
  size_t alloc;
  size_t cap;   /* hard limit on len; 0 means MK_BUF_DEFAULT_CAP */
  int err;      /* first error (0 if none) */
} mk_buf;

#define MK_BUF_DEFAULT_CAP ((size_t)256 * 1024 * 1024)

/* Initialises an empty buffer that may grow to `cap` bytes (0: default). */
void mk_buf_init(mk_buf *b, size_t cap);
/* Frees the storage; the buffer may be re-initialised. */
void mk_buf_free(mk_buf *b);
/* Drops the contents, keeps the storage and clears the error. */
void mk_buf_reset(mk_buf *b);

int mk_buf_append(mk_buf *b, const void *p, size_t n);
int mk_buf_puts(mk_buf *b, const char *s);
int mk_buf_putc(mk_buf *b, char c);
int mk_buf_printf(mk_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int mk_buf_vprintf(mk_buf *b, const char *fmt, va_list ap);
/* Appends `n` copies of the space character (indentation). */
int mk_buf_indent(mk_buf *b, int n);
/* Appends s as a JSON string literal, quotes included. */
int mk_buf_json_str(mk_buf *b, const char *s);
/* Appends s as a Python string literal (double quotes, escaped). */
int mk_buf_py_str(mk_buf *b, const char *s);

/* Returns the contents as a C string (never NULL, "" when empty). */
const char *mk_buf_cstr(mk_buf *b);
/* Hands the storage to the caller (free() it); the buffer becomes empty.
 * Returns NULL if the buffer is in the failed state. */
char *mk_buf_steal(mk_buf *b, size_t *len_out);

/* Bounded string copy: copies at most dst_size-1 bytes and NUL-terminates.
 * Returns MK_ERANGE when src was truncated. */
int mk_strlcpy(char *dst, const char *src, size_t dst_size);
/* strdup that returns NULL on NULL input or allocation failure. */
char *mk_strdup(const char *s);
char *mk_strndup(const char *s, size_t n);
/* printf into a new string (caller frees); NULL when out of memory or past
 * MK_BUF_DEFAULT_CAP. */
char *mk_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *mk_strdup_vprintf(const char *fmt, va_list ap);

/* Reads a whole file into a new NUL-terminated string (caller frees).
 * Refuses files larger than max_bytes with MK_ERANGE. */
int mk_read_file(const char *path, size_t max_bytes, char **out, size_t *len_out);
/* Writes data atomically (temp file + rename). */
int mk_write_file(const char *path, const char *data, size_t len);

#endif
