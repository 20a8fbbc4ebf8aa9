/* mk_lsp_transport.h — LSP base protocol: Content-Length framing.
 *
 * Two halves. The framer is a pure incremental parser: bytes go in (any
 * split: one byte at a time, several messages per read), complete message
 * bodies come out through a callback. It never trusts its peer: headers
 * are bounded, Content-Length is capped, bodies must be valid UTF-8, and a
 * malformed header block is reported and skipped so the stream resyncs on
 * the next "Content-Length:" instead of wedging or crashing.
 *
 * The transport wraps a framer around a byte source and sink: a libuv
 * stream (stdio of `mkevolve lsp`) or an in-memory pipe (tests, fuzzing),
 * where the caller feeds input with mk_lsp_transport_feed and reads what
 * the server wrote from an mk_buf.
 *
 * Ownership: the transport owns its framer and its libuv handles; close it
 * with mk_lsp_transport_close and free it in the close callback (stream
 * transports) or right away (memory transports). */
#ifndef MK_LSP_TRANSPORT_H
#define MK_LSP_TRANSPORT_H

#include "mk_buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#define MK_LSP_MAX_HEADER 8192                       /* bytes in one header block */
#define MK_LSP_DEFAULT_MAX_BODY ((size_t)64 << 20)   /* 64 MiB: larger is refused */

/* Why a frame was dropped (reported through on_error; the stream goes on). */
typedef enum mk_lsp_frame_error {
  MK_LSP_FRAME_BAD_HEADER = 1, /* unparseable header line or no Content-Length */
  MK_LSP_FRAME_TOO_LARGE,      /* Content-Length above the cap: body skipped */
  MK_LSP_FRAME_HEADER_TOO_LONG,/* no blank line within MK_LSP_MAX_HEADER bytes */
  MK_LSP_FRAME_BAD_UTF8,       /* body is not valid UTF-8 */
  MK_LSP_FRAME_TRUNCATED,      /* EOF inside a header or body */
} mk_lsp_frame_error;

typedef struct mk_lsp_frame_handler {
  /* One complete, UTF-8 valid body (not NUL-terminated in the stream, but
   * body[len] is '\0' here). Borrowed: copy what you keep. */
  void (*on_message)(void *ctx, const char *body, size_t len);
  /* A dropped frame; `why` is a static or short-lived sentence. */
  void (*on_error)(void *ctx, mk_lsp_frame_error kind, const char *why);
  void *ctx;
} mk_lsp_frame_handler;

typedef struct mk_lsp_framer {
  mk_buf in;           /* unconsumed input */
  size_t max_body;
  size_t skip;         /* body bytes still to discard after TOO_LARGE */
  bool resync;         /* after a broken header: skip to the next Content-Length */
} mk_lsp_framer;

/* Initialises a framer refusing bodies above max_body (0: default cap). */
void mk_lsp_framer_init(mk_lsp_framer *f, size_t max_body);
void mk_lsp_framer_free(mk_lsp_framer *f);
/* Feeds bytes; calls the handler for each complete body or dropped frame.
 * Returns 0, or MK_ENOMEM if buffering failed (input is then dropped). */
int mk_lsp_framer_feed(mk_lsp_framer *f, const char *data, size_t len,
                       const mk_lsp_frame_handler *h);
/* End of input: reports MK_LSP_FRAME_TRUNCATED if a frame was cut off. */
void mk_lsp_framer_eof(mk_lsp_framer *f, const mk_lsp_frame_handler *h);

/* Returns true when s[0..len) is valid UTF-8 (no overlongs, surrogates or
 * code points above U+10FFFF). */
bool mk_lsp_utf8_valid(const char *s, size_t len);

/* Appends a framed message ("Content-Length: N\r\n\r\n" + body) to out. */
int mk_lsp_frame_write(mk_buf *out, const char *body, size_t len);

/* ---- transports ---------------------------------------------------------- */

typedef struct mk_lsp_transport mk_lsp_transport;

typedef struct mk_lsp_transport_events {
  mk_lsp_frame_handler frames;
  void (*on_eof)(void *ctx); /* input closed (or failed); ctx is frames.ctx */
} mk_lsp_transport_events;

/* In-memory transport: output is appended to `out` (caller-owned, must
 * outlive the transport); input comes from mk_lsp_transport_feed. */
int mk_lsp_transport_memory(const mk_lsp_transport_events *ev, mk_buf *out, size_t max_body,
                            mk_lsp_transport **out_t);
/* Stream transport over file descriptors (stdin/stdout): pipes, TTYs and
 * sockets through libuv; regular files as input are read with uv_fs. */
int mk_lsp_transport_stdio(uv_loop_t *loop, int in_fd, int out_fd,
                           const mk_lsp_transport_events *ev, size_t max_body,
                           mk_lsp_transport **out_t);

/* Starts delivering input (stream transports); no-op for memory ones. */
int mk_lsp_transport_start(mk_lsp_transport *t);
/* Feeds input bytes (memory transports; also usable on stream ones). */
int mk_lsp_transport_feed(mk_lsp_transport *t, const char *data, size_t len);
/* Signals end of input (memory transports). */
void mk_lsp_transport_feed_eof(mk_lsp_transport *t);
/* Frames and sends one message body. Output order is preserved. */
int mk_lsp_transport_send(mk_lsp_transport *t, const char *body, size_t len);
/* Bytes queued in libuv but not yet written (0 for memory transports). */
size_t mk_lsp_transport_pending(const mk_lsp_transport *t);
/* Stops input, closes handles; frees the transport once libuv is done with
 * it (for memory transports: at once). */
void mk_lsp_transport_close(mk_lsp_transport *t);

#endif
