/* lsp_transport.c — Content-Length framing and the stdio / in-memory
 * transports. The framer treats its input as hostile: every limit is
 * checked before memory is touched, and every malformed frame is reported
 * and skipped rather than trusted. */
#include "mk_lsp_transport.h"

#include "mk_err.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Input is processed in slices so one huge feed never grows the buffer
 * past max_body + header + slice. */
#define FEED_SLICE ((size_t)64 * 1024)
static const char CL_NAME[] = "content-length";

/* ---- UTF-8 ---------------------------------------------------------------- */

bool mk_lsp_utf8_valid(const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < len) {
    unsigned c = s[i];
    if (c < 0x80) { i++; continue; }
    size_t n;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; min = 0x10000; }
    else return false;
    if (len - i <= n) return false;
    for (size_t k = 1; k <= n; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

/* ---- framer --------------------------------------------------------------- */

void mk_lsp_framer_init(mk_lsp_framer *f, size_t max_body) {
  f->max_body = max_body ? max_body : MK_LSP_DEFAULT_MAX_BODY;
  mk_buf_init(&f->in, f->max_body + 2 * MK_LSP_MAX_HEADER + FEED_SLICE);
  f->skip = 0;
  f->resync = false;
}

void mk_lsp_framer_free(mk_lsp_framer *f) { mk_buf_free(&f->in); }

static void report(const mk_lsp_frame_handler *h, mk_lsp_frame_error kind, const char *why) {
  if (h->on_error) h->on_error(h->ctx, kind, why);
}

/* Finds "\r\n\r\n" in s[0..n); returns the offset after it or 0. A bare
 * LF before it (a peer framing with "\n\n") sets *bare_lf to the offset
 * after that LF and returns 0: searching on would take the *next* frame's
 * CRLFs as this header's end and lose that well-framed message. */
static size_t header_end(const char *s, size_t n, size_t *bare_lf) {
  *bare_lf = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\n' && (i == 0 || s[i - 1] != '\r')) {
      *bare_lf = i + 1;
      return 0;
    }
    if (i + 3 < n && s[i] == '\r' && s[i + 1] == '\n' && s[i + 2] == '\r' && s[i + 3] == '\n')
      return i + 4;
  }
  return 0;
}

/* Parses one header block (without the final blank line). Sets *len to
 * Content-Length. Returns 0 or MK_EPARSE with *why set. */
static int parse_headers(const char *s, size_t n, size_t *len, const char **why) {
  bool have = false;
  size_t value = 0;
  size_t i = 0;
  while (i < n) {
    size_t eol = i;
    while (eol + 1 < n && !(s[eol] == '\r' && s[eol + 1] == '\n')) eol++;
    if (eol + 1 >= n) eol = n; /* last line: no CRLF inside the block */
    const char *line = s + i;
    size_t ll = eol - i;
    const char *colon = memchr(line, ':', ll);
    if (colon == NULL || colon == line) {
      *why = "header line without a name and ':'";
      return MK_EPARSE;
    }
    size_t nl = (size_t)(colon - line);
    if (nl == sizeof CL_NAME - 1 && strncasecmp(line, CL_NAME, nl) == 0) {
      const char *v = colon + 1, *end = line + ll;
      while (v < end && (*v == ' ' || *v == '\t')) v++;
      while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
      if (v == end) { *why = "empty Content-Length"; return MK_EPARSE; }
      size_t x = 0;
      for (; v < end; v++) {
        if (!isdigit((unsigned char)*v)) { *why = "Content-Length is not a number"; return MK_EPARSE; }
        if (x > (SIZE_MAX - 9) / 10) { *why = "Content-Length overflows"; return MK_EPARSE; }
        x = x * 10 + (size_t)(*v - '0');
      }
      if (have && x != value) { *why = "conflicting Content-Length headers"; return MK_EPARSE; }
      have = true;
      value = x;
    }
    i = eol + 2;
  }
  if (!have) { *why = "no Content-Length header"; return MK_EPARSE; }
  *len = value;
  return 0;
}

/* Looks for the start of a Content-Length header (case-insensitive) in
 * s[0..n). Returns its offset, or n minus a possible partial match. */
static size_t resync_point(const char *s, size_t n) {
  size_t k = sizeof CL_NAME - 1;
  for (size_t i = 0; i < n; i++) {
    size_t m = 0;
    while (m < k && i + m < n && tolower((unsigned char)s[i + m]) == CL_NAME[m]) m++;
    if (m == k || i + m == n) return i; /* full match, or a prefix cut by the end */
  }
  return n;
}

/* Consumes complete frames from f->in starting at *pos. */
static void drain(mk_lsp_framer *f, size_t *pos, const mk_lsp_frame_handler *h) {
  for (;;) {
    char *s = f->in.data + *pos;
    size_t n = f->in.len - *pos;
    if (n == 0) return;
    if (f->skip) {
      size_t d = f->skip < n ? f->skip : n;
      *pos += d;
      f->skip -= d;
      continue;
    }
    if (f->resync) {
      size_t p = resync_point(s, n);
      *pos += p;
      if (p == n || n - p < sizeof CL_NAME - 1) return; /* need more bytes to decide */
      f->resync = false;
      continue;
    }
    size_t bare = 0;
    size_t hend = header_end(s, n, &bare);
    if (bare) {
      report(h, MK_LSP_FRAME_BAD_HEADER, "header line ended by a bare LF (CRLF required)");
      *pos += bare;
      f->resync = true;
      continue;
    }
    if (hend == 0) {
      if (n > MK_LSP_MAX_HEADER) {
        report(h, MK_LSP_FRAME_HEADER_TOO_LONG, "header block longer than 8 KiB");
        *pos += n;
        f->resync = true;
      }
      return;
    }
    size_t blen = 0;
    const char *why = NULL;
    if (hend > MK_LSP_MAX_HEADER) {
      report(h, MK_LSP_FRAME_HEADER_TOO_LONG, "header block longer than 8 KiB");
      *pos += hend;
      f->resync = true;
      continue;
    }
    if (parse_headers(s, hend - 4, &blen, &why) != 0) {
      report(h, MK_LSP_FRAME_BAD_HEADER, why);
      *pos += hend;
      f->resync = true;
      continue;
    }
    if (blen > f->max_body) {
      report(h, MK_LSP_FRAME_TOO_LARGE, "message larger than the size cap; skipped");
      *pos += hend;
      f->skip = blen;
      continue;
    }
    if (n - hend < blen) return; /* body incomplete */
    char *body = s + hend;
    *pos += hend + blen;
    if (!mk_lsp_utf8_valid(body, blen)) {
      report(h, MK_LSP_FRAME_BAD_UTF8, "message body is not valid UTF-8");
      continue;
    }
    /* Hand out a NUL-terminated body without copying: the byte after it is
     * either the next frame (restored below) or the buffer's own NUL. */
    char saved = body[blen];
    body[blen] = '\0';
    if (h->on_message) h->on_message(h->ctx, body, blen);
    body[blen] = saved;
  }
}

int mk_lsp_framer_feed(mk_lsp_framer *f, const char *data, size_t len,
                       const mk_lsp_frame_handler *h) {
  while (len > 0) {
    /* Discarding an oversized body needs no buffering. */
    if (f->skip && f->in.len == 0) {
      size_t d = f->skip < len ? f->skip : len;
      f->skip -= d;
      data += d;
      len -= d;
      continue;
    }
    size_t take = len < FEED_SLICE ? len : FEED_SLICE;
    if (mk_buf_append(&f->in, data, take) != 0) {
      mk_buf_reset(&f->in);
      f->resync = true;
      report(h, MK_LSP_FRAME_TOO_LARGE, "input buffer exhausted; resynchronising");
      return MK_ENOMEM;
    }
    data += take;
    len -= take;
    size_t pos = 0;
    drain(f, &pos, h);
    if (pos > 0) {
      memmove(f->in.data, f->in.data + pos, f->in.len - pos);
      f->in.len -= pos;
      f->in.data[f->in.len] = '\0';
    }
  }
  return 0;
}

void mk_lsp_framer_eof(mk_lsp_framer *f, const mk_lsp_frame_handler *h) {
  bool blank = true;
  for (size_t i = 0; i < f->in.len; i++)
    if (!isspace((unsigned char)f->in.data[i])) blank = false;
  if ((f->in.len > 0 && !blank && !f->resync) || f->skip)
    report(h, MK_LSP_FRAME_TRUNCATED, "input ended inside a message");
  mk_buf_reset(&f->in);
  f->skip = 0;
}

int mk_lsp_frame_write(mk_buf *out, const char *body, size_t len) {
  mk_buf_printf(out, "Content-Length: %zu\r\n\r\n", len);
  return mk_buf_append(out, body, len);
}

/* ---- transports ----------------------------------------------------------- */

typedef enum { T_MEMORY, T_STREAM } t_kind;

struct mk_lsp_transport {
  t_kind kind;
  mk_lsp_transport_events ev;
  mk_lsp_framer framer;
  mk_buf *mem_out;          /* T_MEMORY */
  uv_loop_t *loop;          /* T_STREAM */
  union { uv_pipe_t pipe; uv_tty_t tty; uv_tcp_t tcp; } in_h, out_h;
  bool in_stream, out_stream; /* handle initialised (else: plain fd I/O) */
  int in_fd, out_fd;
  uv_fs_t fs_read;          /* input from a regular file */
  uv_shutdown_t shutdown;   /* flushes output before closing it */
  char fs_buf[FEED_SLICE];
  bool fs_reading;
  size_t pending;           /* bytes in flight in uv_write */
  int open_handles;         /* handles still to close */
  int feeding;              /* re-entrancy depth of feed */
  bool closing, eof_sent;
};

static void deliver_eof(mk_lsp_transport *t) {
  if (t->eof_sent) return;
  t->eof_sent = true;
  mk_lsp_framer_eof(&t->framer, &t->ev.frames);
  if (t->ev.on_eof) t->ev.on_eof(t->ev.frames.ctx);
}

static void maybe_free(mk_lsp_transport *t) {
  if (!t->closing || t->feeding || t->open_handles > 0 || t->fs_reading) return;
  mk_lsp_framer_free(&t->framer);
  free(t);
}

int mk_lsp_transport_memory(const mk_lsp_transport_events *ev, mk_buf *out, size_t max_body,
                            mk_lsp_transport **out_t) {
  mk_lsp_transport *t = calloc(1, sizeof *t);
  if (t == NULL) return MK_ENOMEM;
  t->kind = T_MEMORY;
  t->ev = *ev;
  t->mem_out = out;
  mk_lsp_framer_init(&t->framer, max_body);
  *out_t = t;
  return 0;
}

int mk_lsp_transport_feed(mk_lsp_transport *t, const char *data, size_t len) {
  if (t->closing) return MK_EINVAL;
  t->feeding++;
  /* Stop mid-buffer if a message closed us (exit): feed slice by slice. */
  int rc = 0;
  while (len > 0 && !t->closing && rc == 0) {
    size_t take = len < FEED_SLICE ? len : FEED_SLICE;
    rc = mk_lsp_framer_feed(&t->framer, data, take, &t->ev.frames);
    data += take;
    len -= take;
  }
  t->feeding--;
  maybe_free(t);
  return rc;
}

void mk_lsp_transport_feed_eof(mk_lsp_transport *t) {
  if (t->closing) return;
  t->feeding++;
  deliver_eof(t);
  t->feeding--;
  maybe_free(t);
}

/* Writes all of buf to a blocking fd (output to a regular file). */
static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return MK_EIO;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

typedef struct {
  uv_write_t req;
  mk_lsp_transport *t;
  char *data;
  size_t len;
} write_req;

static void on_written(uv_write_t *req, int status) {
  write_req *w = (write_req *)req;
  w->t->pending -= w->len;
  if (status < 0) fprintf(stderr, "mkevolve lsp: write failed: %s\n", uv_strerror(status));
  free(w->data);
  free(w);
}

int mk_lsp_transport_send(mk_lsp_transport *t, const char *body, size_t len) {
  if (t->closing) return MK_EIO;
  mk_buf frame;
  mk_buf_init(&frame, 0);
  if (mk_lsp_frame_write(&frame, body, len) != 0) {
    mk_buf_free(&frame);
    return MK_ENOMEM;
  }
  if (t->kind == T_MEMORY) {
    int rc = mk_buf_append(t->mem_out, frame.data, frame.len);
    mk_buf_free(&frame);
    return rc;
  }
  if (!t->out_stream) {
    int rc = write_all(t->out_fd, frame.data, frame.len);
    mk_buf_free(&frame);
    return rc;
  }
  write_req *w = calloc(1, sizeof *w);
  if (w == NULL) {
    mk_buf_free(&frame);
    return MK_ENOMEM;
  }
  w->t = t;
  w->data = mk_buf_steal(&frame, &w->len);
  uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
  int rc = uv_write(&w->req, (uv_stream_t *)&t->out_h, &b, 1, on_written);
  if (rc < 0) {
    fprintf(stderr, "mkevolve lsp: write failed: %s\n", uv_strerror(rc));
    free(w->data);
    free(w);
    return MK_EIO;
  }
  t->pending += w->len;
  return 0;
}

size_t mk_lsp_transport_pending(const mk_lsp_transport *t) { return t->pending; }

/* Opens fd as a libuv stream when it is one; returns 1 if opened, 0 if the
 * fd is a regular file (plain I/O), or a negative code. */
static int open_stream(mk_lsp_transport *t, int fd, void *h, bool readable) {
  uv_handle_type ty = uv_guess_handle(fd);
  int rc;
  switch (ty) {
    case UV_NAMED_PIPE:
      if ((rc = uv_pipe_init(t->loop, h, 0)) < 0) return rc;
      rc = uv_pipe_open(h, fd);
      break;
    case UV_TTY:
      if ((rc = uv_tty_init(t->loop, h, fd, 0)) < 0) return rc;
      break;
    case UV_TCP:
      if ((rc = uv_tcp_init(t->loop, h)) < 0) return rc;
      rc = uv_tcp_open(h, fd);
      break;
    case UV_FILE:
      return 0;
    default:
      return UV_EINVAL;
  }
  ((uv_handle_t *)h)->data = t;
  t->open_handles++;
  (void)readable;
  return rc < 0 ? rc : 1;
}

static void on_closed(uv_handle_t *h) {
  mk_lsp_transport *t = h->data;
  t->open_handles--;
  maybe_free(t);
}

static void on_flushed(uv_shutdown_t *req, int status) {
  (void)status;
  mk_lsp_transport *t = req->data;
  uv_close((uv_handle_t *)&t->out_h, on_closed);
}

/* Closes input at once; output after libuv has written what is queued,
 * so the reply to `shutdown` is not lost when `exit` follows it. */
static void close_handles(mk_lsp_transport *t) {
  if (t->in_stream) {
    t->in_stream = false;
    uv_close((uv_handle_t *)&t->in_h, on_closed);
  }
  if (t->out_stream) {
    t->out_stream = false;
    t->shutdown.data = t;
    if (uv_shutdown(&t->shutdown, (uv_stream_t *)&t->out_h, on_flushed) < 0)
      uv_close((uv_handle_t *)&t->out_h, on_closed);
  }
}

int mk_lsp_transport_stdio(uv_loop_t *loop, int in_fd, int out_fd,
                           const mk_lsp_transport_events *ev, size_t max_body,
                           mk_lsp_transport **out_t) {
  mk_lsp_transport *t = calloc(1, sizeof *t);
  if (t == NULL) return MK_ENOMEM;
  t->kind = T_STREAM;
  t->ev = *ev;
  t->loop = loop;
  t->in_fd = in_fd;
  t->out_fd = out_fd;
  mk_lsp_framer_init(&t->framer, max_body);
  int rc = open_stream(t, in_fd, &t->in_h, true);
  if (rc >= 0) t->in_stream = rc == 1;
  int rc2 = rc < 0 ? rc : open_stream(t, out_fd, &t->out_h, false);
  if (rc2 >= 0) t->out_stream = rc2 == 1;
  *out_t = NULL;
  if (rc < 0 || rc2 < 0) {
    fprintf(stderr, "mkevolve lsp: cannot use stdio: %s\n", uv_strerror(rc < 0 ? rc : rc2));
    /* Handles already initialised close on the next loop turn, which
     * frees the transport. */
    t->closing = true;
    close_handles(t);
    maybe_free(t);
    return MK_EIO;
  }
  *out_t = t;
  return 0;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  mk_lsp_transport *t = h->data;
  *buf = uv_buf_init(t->fs_buf, sizeof t->fs_buf);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  mk_lsp_transport *t = s->data;
  if (n > 0) {
    mk_lsp_transport_feed(t, buf->base, (size_t)n);
  } else if (n < 0) {
    if (n != UV_EOF) fprintf(stderr, "mkevolve lsp: read failed: %s\n", uv_strerror((int)n));
    uv_read_stop(s);
    mk_lsp_transport_feed_eof(t);
  }
}

static void fs_read_next(mk_lsp_transport *t);

/* GCC's -Wuse-after-free cannot see that fs_reading keeps t alive through
 * mk_lsp_transport_feed (maybe_free refuses while it is set). */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif
static void fs_read_cb(uv_fs_t *req) {
  mk_lsp_transport *t = req->data;
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  t->fs_reading = false;
  if (t->closing) {
    maybe_free(t);
    return;
  }
  if (n > 0) {
    /* A message handler may close the transport: stay "reading" so the
     * feed cannot free t under us; free it here instead. */
    t->fs_reading = true;
    mk_lsp_transport_feed(t, t->fs_buf, (size_t)n);
    t->fs_reading = false;
    if (!t->closing) fs_read_next(t);
    else maybe_free(t);
    return;
  }
  if (n < 0) fprintf(stderr, "mkevolve lsp: read failed: %s\n", uv_strerror((int)n));
  mk_lsp_transport_feed_eof(t);
}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic pop
#endif

static void fs_read_next(mk_lsp_transport *t) {
  uv_buf_t b = uv_buf_init(t->fs_buf, sizeof t->fs_buf);
  t->fs_read.data = t;
  if (uv_fs_read(t->loop, &t->fs_read, t->in_fd, &b, 1, -1, fs_read_cb) == 0)
    t->fs_reading = true;
  else
    mk_lsp_transport_feed_eof(t);
}

int mk_lsp_transport_start(mk_lsp_transport *t) {
  if (t->kind != T_STREAM || t->closing) return 0;
  if (t->in_stream) {
    int rc = uv_read_start((uv_stream_t *)&t->in_h, alloc_cb, read_cb);
    return rc < 0 ? MK_EIO : 0;
  }
  fs_read_next(t);
  return 0;
}

void mk_lsp_transport_close(mk_lsp_transport *t) {
  if (t == NULL || t->closing) return;
  t->closing = true;
  if (t->kind == T_STREAM) {
    if (t->in_stream) uv_read_stop((uv_stream_t *)&t->in_h);
    if (t->fs_reading) uv_cancel((uv_req_t *)&t->fs_read);
    close_handles(t);
  }
  maybe_free(t);
}
