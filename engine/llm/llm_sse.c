/* llm_sse.c — incremental server-sent-events parser (the WHATWG
 * EventSource line rules), fed with whatever chunks the network delivers. */
#include "mk_llm.h"

#include <string.h>

void mk_llm_sse_init(mk_llm_sse *p, size_t max_event, mk_llm_sse_event_fn fn, void *data) {
  memset(p, 0, sizeof *p);
  p->max_event = max_event ? max_event : (size_t)16 * 1024 * 1024;
  mk_buf_init(&p->line, p->max_event);
  mk_buf_init(&p->data, p->max_event);
  mk_buf_init(&p->event, 4096);
  p->fn = fn;
  p->fn_data = data;
}

void mk_llm_sse_free(mk_llm_sse *p) {
  mk_buf_free(&p->line);
  mk_buf_free(&p->data);
  mk_buf_free(&p->event);
}

static void dispatch(mk_llm_sse *p) {
  if (p->have_data) {
    const char *ev = p->event.len ? mk_buf_cstr(&p->event) : "message";
    p->fn(p->fn_data, ev, mk_buf_cstr(&p->data), p->data.len);
  }
  mk_buf_reset(&p->data);
  mk_buf_reset(&p->event);
  p->have_data = false;
}

/* One complete line (without its terminator). */
static int process_line(mk_llm_sse *p, const char *s, size_t n) {
  if (n == 0) {
    dispatch(p);
    return 0;
  }
  if (s[0] == ':') return 0; /* comment / keep-alive */
  const char *colon = memchr(s, ':', n);
  size_t flen = colon ? (size_t)(colon - s) : n;
  const char *v = colon ? colon + 1 : s + n;
  size_t vlen = colon ? n - flen - 1 : 0;
  if (vlen > 0 && v[0] == ' ') {
    v++;
    vlen--;
  }
  if (flen == 4 && memcmp(s, "data", 4) == 0) {
    if (p->have_data && mk_buf_putc(&p->data, '\n')) return MK_ERANGE;
    if (mk_buf_append(&p->data, v, vlen)) return MK_ERANGE;
    p->have_data = true;
  } else if (flen == 5 && memcmp(s, "event", 5) == 0) {
    mk_buf_reset(&p->event);
    if (mk_buf_append(&p->event, v, vlen)) return MK_ERANGE;
  }
  /* id, retry and unknown fields: nothing to do for a one-shot reply. */
  return 0;
}

int mk_llm_sse_feed(mk_llm_sse *p, const char *bytes, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char c = bytes[i];
    if (c == '\n' && p->last_cr) { /* second half of \r\n */
      p->last_cr = false;
      continue;
    }
    p->last_cr = (c == '\r');
    if (c == '\r' || c == '\n') {
      int rc = process_line(p, p->line.data ? p->line.data : "", p->line.len);
      mk_buf_reset(&p->line);
      if (rc) return rc;
      continue;
    }
    /* Copy the run of ordinary bytes at once. */
    size_t j = i;
    while (j < n && bytes[j] != '\r' && bytes[j] != '\n') j++;
    if (mk_buf_append(&p->line, bytes + i, j - i)) return MK_ERANGE;
    i = j - 1;
  }
  return 0;
}

int mk_llm_sse_finish(mk_llm_sse *p) {
  int pending = p->line.len > 0 || p->have_data;
  mk_buf_reset(&p->line);
  mk_buf_reset(&p->data);
  mk_buf_reset(&p->event);
  p->have_data = false;
  return pending;
}
