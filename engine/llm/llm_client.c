/* llm_client.c — chat requests over the libcurl multi interface driven
 * by a libuv loop (curl_multi_socket_action + uv_poll + uv_timer), with a
 * FIFO queue behind a concurrency limit, retries with backoff honouring
 * Retry-After, per-attempt timeouts, cancellation and key redaction.
 *
 * Lifetimes: a request lives from mk_llm_chat_async until its callback has
 * run and its timer handle has closed. The client lives until mk_llm_close
 * and every uv handle it opened has closed. User callbacks may call back
 * into the client (start, cancel, even close): `in_dispatch` defers the
 * teardown until no curl or uv frame of ours is on the stack. */
#include "llm_internal.h"

#include <curl/curl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define RAW_CAP ((size_t)16 * 1024 * 1024)

typedef enum { REQ_QUEUED, REQ_RUNNING, REQ_WAITING, REQ_DONE } req_state;

typedef struct poll_ctx {
  uv_poll_t poll;
  curl_socket_t fd;
  mk_llm *llm;
  struct poll_ctx *next, *prev;
} poll_ctx;

struct mk_llm_req {
  mk_llm *llm;
  mk_llm_req *qnext;            /* queue of requests waiting for a slot */
  mk_llm_req *next, *prev;      /* every live request */
  req_state state;
  CURL *easy;
  char errbuf[CURL_ERROR_SIZE];
  mk_buf body;                  /* the JSON request */
  char *agent, *subkernel;
  mk_llm_progress_fn progress;
  void *progress_data;
  mk_llm_reply_fn done;
  void *data;
  uv_timer_t timer;             /* retry wait, deferred cancel / failure */
  int attempt;
  uint64_t start_ns;
  bool canceled;
  int deferred_status;          /* failure to report from the timer */
  /* Per attempt. */
  mk_buf raw;
  bool raw_overflow;
  mk_llm_sse sse;
  bool sse_on;
  bool sse_init;
  mk_llm_stream_state st;
  long http_status;
  double retry_after;           /* seconds, < 0 when absent */
  /* Usage reported by failed attempts (spent all the same). */
  long spent_in, spent_out;
};

struct mk_llm {
  uv_loop_t *loop;
  mk_llm_config cfg;
  char *endpoint;
  char *key;                    /* NULL when none; never printed */
  struct curl_slist *headers;
  CURLM *multi;
  uv_timer_t timer;             /* curl's timeout */
  poll_ctx *polls;
  mk_llm_req *reqs;
  mk_llm_req *qhead, *qtail;
  int running, pending;
  int open_handles;
  int in_dispatch;
  bool closing, torn_down;
  mk_llm_ledger ledger;
  mk_llm_log_fn log;
  void *log_data;
  uint64_t rng;
};

static void teardown(mk_llm *llm);
static void start_queued(mk_llm *llm);
static void check_multi_info(mk_llm *llm);

/* ---------------------------------------------------------------- misc -- */

void mk_llm_redact(const mk_llm *llm, char *s) {
  if (!llm || !llm->key || !s) return;
  size_t klen = strlen(llm->key);
  if (klen == 0) return;
  static const char mask[] = "[redacted]";
  size_t mlen = sizeof mask - 1;
  char *p;
  while ((p = strstr(s, llm->key)) != NULL) {
    if (klen >= mlen) {
      memcpy(p, mask, mlen);
      memmove(p + mlen, p + klen, strlen(p + klen) + 1);
    } else {
      memset(p, '*', klen);
    }
  }
}

static void llm_log(mk_llm *llm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void llm_log(mk_llm *llm, const char *fmt, ...) {
  if (!llm->log) return;
  mk_buf b;
  mk_buf_init(&b, 8192);
  va_list ap;
  va_start(ap, fmt);
  mk_buf_vprintf(&b, fmt, ap);
  va_end(ap);
  char *s = mk_buf_steal(&b, NULL);
  if (s) {
    mk_llm_redact(llm, s);
    llm->log(llm->log_data, s);
  }
  free(s);
  mk_buf_free(&b);
}

static double rand01(mk_llm *llm) {
  uint64_t x = llm->rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  llm->rng = x;
  return (double)(x >> 11) / (double)(1ULL << 53);
}

/* One of our uv handles finished closing; the last one frees the client. */
static void handle_released(mk_llm *llm) {
  llm->open_handles--;
  if (llm->torn_down && llm->open_handles == 0) {
    if (llm->key) {
      volatile char *k = llm->key;
      for (size_t i = 0; k[i]; i++) k[i] = 0; /* leave no copy in freed memory */
      free(llm->key);
    }
    mk_llm_config_free(&llm->cfg);
    mk_llm_ledger_free(&llm->ledger);
    curl_slist_free_all(llm->headers);
    free(llm->endpoint);
    free(llm);
  }
}

static void handle_closed(uv_handle_t *h) { handle_released(h->data); }

static void enter(mk_llm *llm) { llm->in_dispatch++; }

static void leave(mk_llm *llm) {
  if (--llm->in_dispatch == 0 && llm->closing && !llm->torn_down) teardown(llm);
}

/* ------------------------------------------------------- curl <-> uv -- */

static void on_poll(uv_poll_t *h, int status, int events) {
  poll_ctx *pc = h->data;
  mk_llm *llm = pc->llm;
  int flags = 0;
  if (status < 0) flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  int running;
  enter(llm);
  curl_multi_socket_action(llm->multi, pc->fd, flags, &running);
  check_multi_info(llm);
  leave(llm);
}

static void poll_closed(uv_handle_t *h) {
  poll_ctx *pc = h->data;
  mk_llm *llm = pc->llm;
  free(pc);
  handle_released(llm);
}

static void poll_release(mk_llm *llm, poll_ctx *pc) {
  if (pc->prev) pc->prev->next = pc->next;
  else llm->polls = pc->next;
  if (pc->next) pc->next->prev = pc->prev;
  uv_poll_stop(&pc->poll);
  uv_close((uv_handle_t *)&pc->poll, poll_closed);
}

static int on_socket(CURL *e, curl_socket_t s, int action, void *userp, void *socketp) {
  mk_llm *llm = userp;
  poll_ctx *pc = socketp;
  if (llm->torn_down) return 0;
  if (action == CURL_POLL_REMOVE) {
    if (pc) {
      curl_multi_assign(llm->multi, s, NULL);
      poll_release(llm, pc);
    }
    return 0;
  }
  if (!pc) {
    pc = calloc(1, sizeof *pc);
    if (!pc) return -1;
    pc->fd = s;
    pc->llm = llm;
    if (uv_poll_init_socket(llm->loop, &pc->poll, s) != 0) {
      free(pc);
      return -1;
    }
    pc->poll.data = pc;
    llm->open_handles++;
    pc->next = llm->polls;
    if (llm->polls) llm->polls->prev = pc;
    llm->polls = pc;
    curl_multi_assign(llm->multi, s, pc);
  }
  int ev = 0;
  if (action & CURL_POLL_IN) ev |= UV_READABLE;
  if (action & CURL_POLL_OUT) ev |= UV_WRITABLE;
  uv_poll_start(&pc->poll, ev, on_poll);
  return 0;
}

static void on_curl_timer(uv_timer_t *t) {
  mk_llm *llm = t->data;
  int running;
  enter(llm);
  curl_multi_socket_action(llm->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  check_multi_info(llm);
  leave(llm);
}

static int on_timer_request(CURLM *m, long timeout_ms, void *userp) {
  mk_llm *llm = userp;
  if (llm->torn_down) return 0;
  if (timeout_ms < 0) uv_timer_stop(&llm->timer);
  else uv_timer_start(&llm->timer, on_curl_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

/* ------------------------------------------------------------ requests -- */

static void req_closed(uv_handle_t *h) {
  mk_llm_req *r = h->data;
  mk_llm *llm = r->llm;
  free(r);
  handle_released(llm);
}

static void attempt_reset(mk_llm_req *r) {
  mk_buf_free(&r->raw);
  mk_buf_init(&r->raw, RAW_CAP);
  r->raw_overflow = false;
  if (r->sse_init) mk_llm_sse_free(&r->sse);
  r->sse_init = false;
  r->sse_on = false;
  mk_llm_stream_free_(&r->st);
  mk_llm_stream_init_(&r->st);
  r->http_status = 0;
  r->retry_after = -1;
}

static void detach_easy(mk_llm_req *r) {
  if (!r->easy) return;
  curl_multi_remove_handle(r->llm->multi, r->easy);
  curl_easy_cleanup(r->easy);
  r->easy = NULL;
}

static void queue_remove(mk_llm *llm, mk_llm_req *r) {
  mk_llm_req **pp = &llm->qhead, *prev = NULL;
  while (*pp && *pp != r) {
    prev = *pp;
    pp = &(*pp)->qnext;
  }
  if (!*pp) return;
  *pp = r->qnext;
  if (llm->qtail == r) llm->qtail = prev;
  r->qnext = NULL;
}

static double elapsed_s(const mk_llm_req *r) {
  return (double)(uv_hrtime() - r->start_ns) / 1e9;
}

/* Completes a request: ledger, callback, release. `msg` is for failures. */
static void finish(mk_llm_req *r, int status, const char *msg) {
  mk_llm *llm = r->llm;
  if (r->state == REQ_DONE) return;
  bool was_running = r->state == REQ_RUNNING;
  detach_easy(r);
  if (r->state == REQ_QUEUED) queue_remove(llm, r);
  r->state = REQ_DONE;
  uv_timer_stop(&r->timer);
  if (was_running) llm->running--;
  llm->pending--;
  if (r->next) r->next->prev = r->prev;
  if (r->prev) r->prev->next = r->next;
  else llm->reqs = r->next;

  mk_llm_reply rep;
  memset(&rep, 0, sizeof rep);
  rep.status = status;
  rep.http_status = (int)r->http_status;
  rep.attempts = r->attempt;
  rep.elapsed_s = elapsed_s(r);
  rep.ledger_index = -1;
  if (status) {
    mk_errf(&rep.err, status, "%s", msg ? msg : mk_strerror(status));
    mk_llm_redact(llm, rep.err.text);
  }
  char *text = status == 0 ? mk_buf_steal(&r->st.text, NULL) : NULL;
  rep.text = text ? text : (char *)"";
  rep.model = r->st.model ? r->st.model : llm->cfg.model;
  rep.finish_reason = r->st.finish_reason;
  long tin = r->st.tokens_in, tout = r->st.tokens_out;
  if (status == 0 && !r->st.have_usage) {
    /* The provider sent no usage: estimate (4 characters per token) and say so. */
    rep.usage_estimated = true;
    tin = (long)(r->body.len / 4);
    tout = (long)(strlen(rep.text) / 4);
  } else if (status != 0 && !r->st.have_usage) {
    tin = tout = 0;
  }
  rep.tokens_in = tin + r->spent_in;
  rep.tokens_out = tout + r->spent_out;

  mk_llm_call_record rec = {0};
  rec.agent = r->agent;
  rec.subkernel = r->subkernel;
  rec.model = rep.model;
  rec.status = status;
  rec.outcome = status == 0 ? "ok" : "error";
  rec.detail = status ? rep.err.text : NULL;
  rec.http_status = rep.http_status;
  rec.attempts = rep.attempts;
  rec.elapsed_s = rep.elapsed_s;
  rec.u.tokens_in = rep.tokens_in;
  rec.u.tokens_out = rep.tokens_out;
  rec.u.estimated = rep.usage_estimated;
  rec.u.usd = mk_llm_cost_(&llm->cfg, rep.model, rep.tokens_in, rep.tokens_out);
  int idx = mk_llm_ledger_add(&llm->ledger, &rec);
  rep.ledger_index = idx >= 0 ? idx : -1;
  if (status && status != MK_ECANCELED)
    llm_log(llm, "llm: %s call failed after %d attempt(s): %s", rec.agent ? rec.agent : "chat",
            r->attempt, rep.err.text);

  r->done(r->data, &rep);
  free(text);
  mk_buf_free(&r->body);
  mk_buf_free(&r->raw);
  if (r->sse_init) mk_llm_sse_free(&r->sse);
  mk_llm_stream_free_(&r->st);
  free(r->agent);
  free(r->subkernel);
  uv_close((uv_handle_t *)&r->timer, req_closed);
  if (!llm->closing) start_queued(llm);
}

static void on_sse_event(void *data, const char *event, const char *payload, size_t len) {
  mk_llm_req *r = data;
  size_t added = mk_llm_stream_event_(r->llm->cfg.provider, &r->st, event, payload, len);
  if (added && r->progress) {
    mk_llm_progress p = {.kind = MK_LLM_PROGRESS_TEXT,
                         .delta = mk_buf_cstr(&r->st.text) + r->st.text.len - added,
                         .ndelta = added,
                         .chars = r->st.text.len,
                         .attempt = r->attempt};
    r->progress(r->progress_data, &p);
  }
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata) {
  mk_llm_req *r = userdata;
  size_t n = size * nmemb;
  if (r->canceled) return 0;
  if (r->http_status == 0) {
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->http_status);
    char *ct = NULL;
    curl_easy_getinfo(r->easy, CURLINFO_CONTENT_TYPE, &ct);
    r->sse_on = r->http_status >= 200 && r->http_status < 300 && ct &&
                strncasecmp(ct, "text/event-stream", 17) == 0;
    if (r->sse_on) {
      mk_llm_sse_init(&r->sse, 0, on_sse_event, r);
      r->sse_init = true;
    }
  }
  if (r->sse_on) {
    if (mk_llm_sse_feed(&r->sse, ptr, n)) {
      r->raw_overflow = true;
      return 0;
    }
    /* An in-band error ends the attempt now; no use reading on. */
    return r->st.error ? 0 : n;
  }
  if (mk_buf_append(&r->raw, ptr, n)) {
    r->raw_overflow = true;
    return 0;
  }
  return n;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *userdata) {
  mk_llm_req *r = userdata;
  size_t n = size * nitems;
  char line[512];
  size_t m = n < sizeof line - 1 ? n : sizeof line - 1;
  memcpy(line, buf, m);
  line[m] = '\0';
  while (m > 0 && (line[m - 1] == '\r' || line[m - 1] == '\n')) line[--m] = '\0';
  if (strncasecmp(line, "retry-after-ms:", 15) == 0) {
    double v = strtod(line + 15, NULL);
    if (v >= 0) r->retry_after = v / 1000.0;
  } else if (strncasecmp(line, "retry-after:", 12) == 0 && r->retry_after < 0) {
    const char *v = line + 12;
    while (*v == ' ') v++;
    char *end;
    double secs = strtod(v, &end);
    if (end != v && *end == '\0') {
      r->retry_after = secs >= 0 ? secs : 0;
    } else {
      time_t t = curl_getdate(v, NULL); /* an HTTP date */
      if (t > 0) {
        double d = difftime(t, time(NULL));
        r->retry_after = d > 0 ? d : 0;
      }
    }
  }
  return n;
}

static void on_req_timer(uv_timer_t *t);

static int start_attempt(mk_llm_req *r) {
  mk_llm *llm = r->llm;
  attempt_reset(r);
  r->attempt++;
  CURL *e = curl_easy_init();
  if (!e) return MK_ENOMEM;
  r->easy = e;
  r->errbuf[0] = '\0';
  const mk_llm_config *c = &llm->cfg;
  curl_easy_setopt(e, CURLOPT_URL, llm->endpoint);
  curl_easy_setopt(e, CURLOPT_PRIVATE, r);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, llm->headers);
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, mk_buf_cstr(&r->body));
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body.len);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(c->timeout_s * 1000));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->connect_timeout_s * 1000));
  if (c->stall_timeout_s > 0) {
    /* Less than one byte a second for this long: the stream has stalled. */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)ceil(c->stall_timeout_s));
  }
  /* TLS verification stays on whatever the environment says. Proxies come
   * from http_proxy / https_proxy / no_proxy through libcurl's defaults. */
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
  r->state = REQ_RUNNING;
  llm->running++;
  if (curl_multi_add_handle(llm->multi, e) != CURLM_OK) {
    llm->running--;
    curl_easy_cleanup(e);
    r->easy = NULL;
    return MK_ENET;
  }
  return 0;
}

static void start_queued(mk_llm *llm) {
  while (!llm->closing && llm->qhead && llm->running < llm->cfg.max_concurrency) {
    mk_llm_req *r = llm->qhead;
    llm->qhead = r->qnext;
    if (!llm->qhead) llm->qtail = NULL;
    r->qnext = NULL;
    int rc = start_attempt(r);
    if (rc) {
      /* Report from the loop, not from inside whoever called us. */
      r->state = REQ_WAITING;
      r->deferred_status = rc;
      uv_timer_start(&r->timer, on_req_timer, 0, 0);
    }
  }
}

static void enqueue(mk_llm *llm, mk_llm_req *r, bool front) {
  r->state = REQ_QUEUED;
  r->qnext = NULL;
  if (front) {
    r->qnext = llm->qhead;
    llm->qhead = r;
    if (!llm->qtail) llm->qtail = r;
  } else {
    if (llm->qtail) llm->qtail->qnext = r;
    else llm->qhead = r;
    llm->qtail = r;
  }
}

static void on_req_timer(uv_timer_t *t) {
  mk_llm_req *r = t->data;
  mk_llm *llm = r->llm;
  enter(llm);
  if (r->canceled) {
    finish(r, MK_ECANCELED, "the request was cancelled");
  } else if (r->deferred_status) {
    finish(r, r->deferred_status, "could not start the HTTP transfer");
  } else if (r->state == REQ_WAITING) {
    enqueue(llm, r, true); /* a retry goes before newer requests */
    start_queued(llm);
  }
  leave(llm);
}

/* ---------------------------------------------------- classification -- */

typedef struct outcome {
  int status;
  bool retry;
  char msg[MK_ERRMSG_MAX];
} outcome;

static void set_outcome(outcome *o, int status, bool retry, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_outcome(outcome *o, int status, bool retry, const char *fmt, ...) {
  o->status = status;
  o->retry = retry;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->msg, sizeof o->msg, fmt, ap);
  va_end(ap);
}

static bool http_retryable(long s) {
  return s == 408 || s == 409 || s == 425 || s == 429 || s >= 500;
}

static void classify_http(mk_llm_req *r, outcome *o) {
  mk_llm *llm = r->llm;
  long s = r->http_status;
  char *pm = mk_llm_error_message_(mk_buf_cstr(&r->raw), r->raw.len);
  const char *m = pm ? pm : "no message";
  const char *keyenv = llm->cfg.api_key_env ? llm->cfg.api_key_env
                                            : mk_llm_default_key_env_(llm->cfg.provider);
  if (s == 401 || s == 403)
    set_outcome(o, MK_EAUTH, false,
                "%s rejected the credentials (HTTP %ld: %s); check $%s", llm->endpoint, s, m,
                keyenv);
  else if (http_retryable(s))
    set_outcome(o, s == 429 ? MK_EBUSY : MK_ENET, true, "%s answered HTTP %ld (%s)",
                llm->endpoint, s, m);
  else
    set_outcome(o, MK_EINVAL, false, "%s refused the request (HTTP %ld: %s)", llm->endpoint, s,
                m);
  free(pm);
}

static void classify_body(mk_llm_req *r, outcome *o) {
  mk_llm *llm = r->llm;
  if (r->sse_on) {
    int pending = mk_llm_sse_finish(&r->sse);
    if (r->st.error) {
      set_outcome(o, r->st.error, r->st.retryable_error, "%s", r->st.err.text);
    } else if (!r->st.done && !r->st.finish_reason) {
      set_outcome(o, MK_EPROTO, true,
                  "the reply stream from %s ended before its end marker (%zu characters "
                  "received%s): truncated reply",
                  llm->endpoint, r->st.text.len, pending ? ", last event cut" : "");
    } else {
      o->status = 0;
    }
    return;
  }
  /* A JSON reply: asked for (stream off) or what the server chose to send. */
  if (mk_llm_parse_body_(llm->cfg.provider, mk_buf_cstr(&r->raw), r->raw.len, &r->st))
    set_outcome(o, r->st.err.text[0] ? (r->st.error ? r->st.error : MK_EPROTO) : MK_EPROTO,
                r->st.retryable_error, "%s (from %s)", r->st.err.text, llm->endpoint);
  else
    o->status = 0;
}

static void classify(mk_llm_req *r, CURLcode res, outcome *o) {
  mk_llm *llm = r->llm;
  o->status = 0;
  o->retry = false;
  o->msg[0] = '\0';
  if (r->http_status == 0) curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->http_status);
  if (r->canceled) {
    set_outcome(o, MK_ECANCELED, false, "the request was cancelled");
    return;
  }
  const char *detail = r->errbuf[0] ? r->errbuf : curl_easy_strerror(res);
  switch (res) {
  case CURLE_OK:
    if (r->http_status < 200 || r->http_status >= 300) classify_http(r, o);
    else classify_body(r, o);
    return;
  case CURLE_OPERATION_TIMEDOUT:
    set_outcome(o, MK_ETIMEDOUT, true, "no complete reply from %s in time (%s)", llm->endpoint,
                detail);
    return;
  case CURLE_WRITE_ERROR:
    if (r->st.error) set_outcome(o, r->st.error, r->st.retryable_error, "%s", r->st.err.text);
    else if (r->raw_overflow)
      set_outcome(o, MK_ERANGE, false, "the reply from %s exceeded %zu bytes", llm->endpoint,
                  (size_t)RAW_CAP);
    else set_outcome(o, MK_ENET, false, "writing the reply failed (%s)", detail);
    return;
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_SSL_CERTPROBLEM:
    set_outcome(o, MK_ENET, false, "TLS with %s failed (%s); certificate verification stays on",
                llm->endpoint, detail);
    return;
  case CURLE_PARTIAL_FILE:
  case CURLE_RECV_ERROR:
  case CURLE_SEND_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_COULDNT_CONNECT:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
    set_outcome(o, MK_ENET, true, "network error talking to %s (%s)", llm->endpoint, detail);
    return;
  default:
    set_outcome(o, MK_ENET, false, "HTTP request to %s failed (%s)", llm->endpoint, detail);
    return;
  }
}

static double backoff_delay(mk_llm_req *r) {
  mk_llm *llm = r->llm;
  const mk_llm_config *c = &llm->cfg;
  double d;
  if (r->retry_after >= 0) {
    d = r->retry_after; /* the server knows best */
  } else {
    d = c->backoff_initial_s * pow(2.0, (double)(r->attempt - 1));
    d *= 0.5 + 0.5 * rand01(llm); /* jitter: spread clients hitting the same limit */
  }
  return d < c->backoff_max_s ? d : c->backoff_max_s;
}

static void attempt_done(mk_llm_req *r, CURLcode res) {
  mk_llm *llm = r->llm;
  outcome o;
  classify(r, res, &o);
  if (o.status == 0) {
    finish(r, 0, NULL);
    return;
  }
  if (r->st.have_usage) { /* a failed attempt that still cost tokens */
    r->spent_in += r->st.tokens_in;
    r->spent_out += r->st.tokens_out;
    r->st.tokens_in = r->st.tokens_out = 0;
    r->st.have_usage = false;
  }
  mk_llm_redact(llm, o.msg);
  if (!o.retry || r->attempt > llm->cfg.max_retries || llm->closing) {
    finish(r, o.status, o.msg);
    return;
  }
  double wait = backoff_delay(r);
  detach_easy(r);
  r->state = REQ_WAITING;
  llm->running--;
  llm_log(llm, "llm: attempt %d failed: %s; retrying in %.2fs", r->attempt, o.msg, wait);
  if (r->progress) {
    mk_llm_progress p = {.kind = MK_LLM_PROGRESS_RETRY, .attempt = r->attempt, .wait_s = wait,
                         .reason = o.msg};
    r->progress(r->progress_data, &p);
  }
  uv_timer_start(&r->timer, on_req_timer, (uint64_t)(wait * 1000), 0);
  start_queued(llm);
}

static void check_multi_info(mk_llm *llm) {
  CURLMsg *msg;
  int left;
  while (!llm->torn_down && (msg = curl_multi_info_read(llm->multi, &left)) != NULL) {
    if (msg->msg != CURLMSG_DONE) continue;
    mk_llm_req *r = NULL;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
    CURLcode res = msg->data.result;
    if (r) attempt_done(r, res);
  }
}

/* -------------------------------------------------------------- public -- */

static int build_headers(mk_llm *llm) {
  struct curl_slist *h = NULL, *t;
  mk_buf b;
  mk_buf_init(&b, 8192);
#define ADD(s)                                     \
  do {                                             \
    if (!(t = curl_slist_append(h, (s)))) goto oom; \
    h = t;                                         \
  } while (0)
  ADD("Content-Type: application/json");
  ADD(llm->cfg.stream ? "Accept: text/event-stream" : "Accept: application/json");
  ADD("Expect:"); /* no 100-continue round trip for large prompts */
  mk_buf_printf(&b, "User-Agent: mkevolve/%s", MK_VERSION);
  ADD(mk_buf_cstr(&b));
  if (llm->cfg.provider == MK_LLM_ANTHROPIC) {
    mk_buf_reset(&b);
    mk_buf_printf(&b, "anthropic-version: %s",
                  llm->cfg.anthropic_version ? llm->cfg.anthropic_version : "2023-06-01");
    ADD(mk_buf_cstr(&b));
    if (llm->key) {
      mk_buf_reset(&b);
      mk_buf_printf(&b, "x-api-key: %s", llm->key);
      ADD(mk_buf_cstr(&b));
    }
  } else if (llm->key) {
    mk_buf_reset(&b);
    mk_buf_printf(&b, "Authorization: Bearer %s", llm->key);
    ADD(mk_buf_cstr(&b));
  }
#undef ADD
  if (b.data) memset(b.data, 0, b.alloc);
  mk_buf_free(&b);
  llm->headers = h;
  return 0;
oom:
  if (b.data) memset(b.data, 0, b.alloc);
  mk_buf_free(&b);
  curl_slist_free_all(h);
  return MK_ENOMEM;
}

static bool is_vendor_url(const mk_llm *llm) {
  return strstr(llm->endpoint, "://api.openai.com") || strstr(llm->endpoint, "://api.anthropic.com");
}

static int resolve_endpoint(mk_llm *llm, mk_errmsg *err) {
  const mk_llm_config *c = &llm->cfg;
  bool anth = c->provider == MK_LLM_ANTHROPIC;
  const char *base = c->base_url;
  if (!base || !base[0]) base = getenv(anth ? "ANTHROPIC_BASE_URL" : "OPENAI_BASE_URL");
  if (!base || !base[0]) base = anth ? "https://api.anthropic.com" : "https://api.openai.com/v1";
  if (strncmp(base, "http://", 7) != 0 && strncmp(base, "https://", 8) != 0)
    return mk_errf(err, MK_EINVAL, "llm base URL must start with http:// or https:// (got \"%.200s\")",
                   base);
  size_t n = strlen(base);
  while (n > 0 && base[n - 1] == '/') n--;
  mk_buf b;
  mk_buf_init(&b, 4096);
  mk_buf_append(&b, base, n);
  /* The conventions of each SDK: OpenAI's base includes /v1, Anthropic's not. */
  mk_buf_puts(&b, anth ? "/v1/messages" : "/chat/completions");
  llm->endpoint = mk_buf_steal(&b, NULL);
  mk_buf_free(&b);
  if (!llm->endpoint) return mk_errf(err, MK_ERANGE, "llm base URL too long");
  if (strchr(llm->endpoint, '@'))
    return mk_errf(err, MK_EINVAL, "llm base URL must not carry credentials (user@host)");
  return 0;
}

int mk_llm_new(uv_loop_t *loop, const mk_llm_config *cfg, mk_llm **out, mk_errmsg *err) {
  *out = NULL;
  if (!cfg->model || !cfg->model[0])
    return mk_errf(err, MK_EINVAL, "no LLM model configured (--model or \"model\" in the llm configuration)");
  static bool curl_ready;
  if (!curl_ready) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      return mk_errf(err, MK_ENET, "libcurl failed to initialise");
    curl_ready = true;
  }
  mk_llm *llm = calloc(1, sizeof *llm);
  if (!llm) return mk_errf(err, MK_ENOMEM, "out of memory");
  llm->loop = loop;
  llm->rng = uv_hrtime() | 1;
  int rc = mk_llm_config_copy_(cfg, &llm->cfg);
  if (rc) {
    free(llm);
    return mk_errf(err, rc, "out of memory");
  }
  mk_llm_ledger_init(&llm->ledger, cfg->budget_tokens, cfg->budget_usd);
  rc = resolve_endpoint(llm, err);
  const char *keyenv = cfg->api_key_env ? cfg->api_key_env : mk_llm_default_key_env_(cfg->provider);
  if (!rc) {
    const char *k = getenv(keyenv);
    if (k && k[0]) {
      if (strpbrk(k, "\r\n"))
        rc = mk_errf(err, MK_EAUTH, "$%s contains a line break; it cannot be sent as a header", keyenv);
      else if (!(llm->key = mk_strdup(k)))
        rc = mk_errf(err, MK_ENOMEM, "out of memory");
    } else if (is_vendor_url(llm)) {
      rc = mk_errf(err, MK_EAUTH, "no API key: set $%s (or name another variable with \"api_key_env\")",
                   keyenv);
    }
  }
  if (!rc && cfg->budget_usd > 0 && !mk_llm_config_price(cfg, cfg->model))
    rc = mk_errf(err, MK_EINVAL,
                 "a money budget needs a price for model \"%s\" (\"prices\" in the llm configuration)",
                 cfg->model);
  if (!rc) rc = build_headers(llm) ? mk_errf(err, MK_ENOMEM, "out of memory") : 0;
  if (!rc && !(llm->multi = curl_multi_init())) rc = mk_errf(err, MK_ENOMEM, "curl_multi_init failed");
  if (rc) {
    if (llm->key) memset(llm->key, 0, strlen(llm->key));
    free(llm->key);
    curl_slist_free_all(llm->headers);
    free(llm->endpoint);
    mk_llm_ledger_free(&llm->ledger);
    mk_llm_config_free(&llm->cfg);
    free(llm);
    return rc;
  }
  curl_multi_setopt(llm->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(llm->multi, CURLMOPT_SOCKETDATA, llm);
  curl_multi_setopt(llm->multi, CURLMOPT_TIMERFUNCTION, on_timer_request);
  curl_multi_setopt(llm->multi, CURLMOPT_TIMERDATA, llm);
  uv_timer_init(loop, &llm->timer);
  llm->timer.data = llm;
  llm->open_handles = 1;
  *out = llm;
  return 0;
}

static void teardown(mk_llm *llm) {
  llm->in_dispatch++; /* callbacks below must not re-enter teardown */
  while (llm->reqs) {
    mk_llm_req *r = llm->reqs;
    r->canceled = true;
    finish(r, MK_ECANCELED, "the LLM client was closed");
  }
  llm->in_dispatch--;
  llm->torn_down = true;
  curl_multi_cleanup(llm->multi);
  llm->multi = NULL;
  while (llm->polls) poll_release(llm, llm->polls);
  uv_timer_stop(&llm->timer);
  uv_close((uv_handle_t *)&llm->timer, handle_closed);
}

void mk_llm_close(mk_llm *llm) {
  if (!llm || llm->closing) return;
  llm->closing = true;
  if (llm->in_dispatch == 0) teardown(llm);
}

void mk_llm_set_log(mk_llm *llm, mk_llm_log_fn fn, void *data) {
  llm->log = fn;
  llm->log_data = data;
}

const mk_llm_config *mk_llm_get_config(const mk_llm *llm) { return &llm->cfg; }
mk_llm_ledger *mk_llm_get_ledger(mk_llm *llm) { return &llm->ledger; }
const char *mk_llm_endpoint(const mk_llm *llm) { return llm->endpoint; }
int mk_llm_pending(const mk_llm *llm) { return llm->pending; }

int mk_llm_chat_async(mk_llm *llm, const mk_llm_chat *chat, mk_llm_reply_fn done, void *data,
                      mk_llm_req **req, mk_errmsg *err) {
  if (req) *req = NULL;
  if (!llm || !chat || !done || (chat->nmessages > 0 && !chat->messages) || chat->nmessages < 1)
    return mk_errf(err, MK_EINVAL, "chat request needs at least one message and a callback");
  if (llm->closing) return mk_errf(err, MK_ECANCELED, "the LLM client is closing");
  if (mk_llm_ledger_exhausted(&llm->ledger)) {
    const mk_llm_ledger *l = &llm->ledger;
    long spent = l->total.tokens_in + l->total.tokens_out;
    if (l->budget_usd > 0)
      return mk_errf(err, MK_EBUDGET,
                     "LLM budget exhausted (%ld tokens, $%.4f of $%.4f spent); no further calls are made",
                     spent, l->total.usd, l->budget_usd);
    return mk_errf(err, MK_EBUDGET,
                   "LLM budget exhausted (%ld of %ld tokens spent); no further calls are made", spent,
                   l->budget_tokens);
  }
  for (int i = 0; i < chat->nmessages; i++)
    if (!chat->messages[i].role)
      return mk_errf(err, MK_EINVAL, "chat message %d has no role", i);
  mk_llm_req *r = calloc(1, sizeof *r);
  if (!r) return mk_errf(err, MK_ENOMEM, "out of memory");
  r->llm = llm;
  mk_buf_init(&r->body, (size_t)32 * 1024 * 1024);
  mk_buf_init(&r->raw, RAW_CAP);
  mk_llm_stream_init_(&r->st);
  r->retry_after = -1;
  int rc = mk_llm_build_body_(&llm->cfg, chat, &r->body);
  r->agent = mk_strdup(chat->agent ? chat->agent : "chat");
  r->subkernel = mk_strdup(chat->subkernel);
  if (rc || !r->agent || (chat->subkernel && !r->subkernel)) {
    mk_buf_free(&r->body);
    mk_buf_free(&r->raw);
    mk_llm_stream_free_(&r->st);
    free(r->agent);
    free(r->subkernel);
    free(r);
    return mk_errf(err, rc == MK_ERANGE ? MK_ERANGE : MK_ENOMEM, "could not build the request body");
  }
  r->done = done;
  r->data = data;
  r->progress = chat->progress;
  r->progress_data = chat->progress_data;
  r->start_ns = uv_hrtime();
  uv_timer_init(llm->loop, &r->timer);
  r->timer.data = r;
  llm->open_handles++;
  r->next = llm->reqs;
  if (llm->reqs) llm->reqs->prev = r;
  llm->reqs = r;
  llm->pending++;
  enqueue(llm, r, false);
  if (req) *req = r;
  /* Starting here is safe: curl only calls back our socket/timer hooks, and
   * completion is always reported from the loop. */
  start_queued(llm);
  return 0;
}

void mk_llm_cancel(mk_llm_req *r) {
  if (!r || r->state == REQ_DONE || r->canceled) return;
  r->canceled = true;
  /* Never tear a transfer down from inside a curl callback: do it from the loop. */
  uv_timer_start(&r->timer, on_req_timer, 0, 0);
}

uv_loop_t *mk_llm_loop_(mk_llm *llm) { return llm->loop; }
