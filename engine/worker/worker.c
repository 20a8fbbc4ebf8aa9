/* worker.c — the worker pool: spawning, JSON-lines framing, handshake,
 * time limits, crash containment, restarts with backoff and shutdown.
 *
 * Life of one worker incarnation: start_worker spawns the process (stdin,
 * stdout, stderr pipes) and sends `hello`; the reply makes it READY;
 * dispatch hands it one job at a time. The incarnation ends when the
 * process has exited AND both output pipes reached EOF (a reply written just
 * before exit is still read), or a short grace after exit; then its four
 * handles are closed and, once all are closed, the supervisor decides:
 * restart (with backoff after failed starts), give up, or, when the pool is
 * closing, close the worker's timers.
 *
 * Every finished job goes to the `done` list and is delivered from a
 * zero-delay timer, so callbacks never run inside submit/cancel/close or in
 * the middle of a state change. */
#include "mk_worker.h"

#include "mk_buf.h"
#include "proc_tree.h"
#include "mk_json.h"

#include <ctype.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#define MK_READ_CHUNK (64 * 1024)
#define MK_EXIT_GRACE_MS 500     /* wait for pipe EOFs after the process exited */
#define MK_EOF_KILL_MS 2000      /* stdout closed but process still alive: kill after */
#define MK_CRASH_TAIL_LINES 20
#define MK_CRASH_TAIL_BYTES 4096
#define MK_MEMWATCH_MS 100       /* resident-memory check of every live worker */
#define MK_GIB (1024.0 * 1024.0 * 1024.0)

typedef struct mk_job {
  uint64_t id;
  char *method;
  cJSON *params;
  mk_worker_kind kind;
  double timeout_s;
  mk_worker_done_cb done;
  mk_worker_progress_cb progress;
  void *data;
  struct mk_job *prev, *next;
  /* outcome */
  int status;
  char kind_s[32];
  mk_buf message;
  int line;
  cJSON *response;
  int worker;          /* index of the worker that ran it, -1 none */
  uint64_t t_dispatch; /* uv_hrtime, 0 if never dispatched */
  double elapsed_ms;
} mk_job;

typedef struct mk_jobq {
  mk_job *head, *tail;
} mk_jobq;

typedef enum {
  WS_STOPPED,  /* never started (lazy) or stopped for good while closing */
  WS_BACKOFF,  /* waiting to restart */
  WS_STARTING, /* spawned, waiting for the hello reply */
  WS_READY,    /* idle */
  WS_BUSY,     /* running w->job */
  WS_DYING,    /* killed or exiting; waiting for the incarnation to end */
  WS_FAILED,   /* given up */
} mk_wstate;

typedef struct mk_wproc {
  mk_worker_pool *pool;
  int index;
  mk_worker_kind kind;
  char visible[64];
  mk_wstate state;

  /* one incarnation */
  uv_process_t proc;
  uv_pipe_t in, out, errp;
  uv_shutdown_t shutdown_req;
  int live_handles;
  bool spawned, exited, out_eof, err_eof, finalizing, handshake_done;
  int64_t exit_status;
  int term_signal;
  int pid;
  int kill_reason;   /* 0: none (death is a crash), else the MK_E* we kill for */
  bool fatal;        /* this failure must not be retried (no python, bad protocol) */
  char death_msg[MK_ERRMSG_MAX];
  uint64_t hello_id;
  mk_buf line;
  bool discard;      /* stop reading stdout: protocol already broken */
  mk_job *job;

  /* supervision across incarnations */
  uv_timer_t timer;  /* handshake / request time limit */
  uv_timer_t aux;    /* restart backoff, exit grace, shutdown grace */
  int start_failures;
  char fail_msg[MK_ERRMSG_MAX];
  bool timers_closed;

  /* stderr, last MK_WORKER_STDERR_KEEP bytes */
  char ring[MK_WORKER_STDERR_KEEP];
  size_t ring_pos, ring_len;
  uint64_t ring_total, ring_mark; /* bytes ever written; total at this spawn */

  cJSON *hello;
  mk_worker_info info;
  bool have_info;

  /* load, across incarnations: what the least-loaded choice compares */
  uint64_t busy_ns;  /* time spent running jobs */
  uint64_t jobs_run; /* jobs dispatched to it that ended */

  char rbuf_out[MK_READ_CHUNK];
  char rbuf_err[MK_READ_CHUNK];
} mk_wproc;

struct mk_worker_pool {
  uv_loop_t *loop;
  mk_worker_config cfg;
  char *python;
  char *pythonpath;
  char **argv;
  int nworkers;
  int ngpus;
  mk_wproc *workers;
  mk_jobq pending, done;
  uv_timer_t deliver;
  uv_timer_t memwatch;   /* unreferenced: never keeps the loop alive */
  uint64_t memory_limit; /* bytes per worker tree, 0: none */
  uint64_t next_id;
  bool closing, finished;
  void (*close_cb)(void *);
  void *close_data;
  int open_handles; /* every handle except `deliver` */
  bool echo_stderr;
  mk_worker_stats stats;
};

/* ---- live workers, for signal handlers ------------------------------------ */

#define MK_LIVE_MAX 256
static volatile sig_atomic_t live_pids[MK_LIVE_MAX]; /* 0: free slot */

static void live_add(int pid) {
  for (int i = 0; i < MK_LIVE_MAX; i++)
    if (live_pids[i] == 0) {
      live_pids[i] = pid;
      return;
    }
}

static void live_remove(int pid) {
  for (int i = 0; i < MK_LIVE_MAX; i++)
    if (live_pids[i] == pid) live_pids[i] = 0;
}

int mk_worker_live_pids(int *out, int max) {
  int n = 0;
  for (int i = 0; i < MK_LIVE_MAX && n < max; i++) {
    int pid = (int)live_pids[i];
    if (pid > 0) out[n++] = pid;
  }
  return n;
}

/* ---- small helpers ------------------------------------------------------ */

const char *mk_worker_kind_name(mk_worker_kind k) {
  switch (k) {
  case MK_WORKER_CPU: return "cpu";
  case MK_WORKER_GPU: return "gpu";
  default: return "any";
  }
}

void mk_worker_config_init(mk_worker_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->gpus = -1;
  cfg->hello_timeout_s = 120;
  cfg->request_timeout_s = 600;
  cfg->max_line = (size_t)64 * 1024 * 1024;
  cfg->max_start_failures = 3;
  cfg->backoff_ms = 250;
  cfg->backoff_max_ms = 8000;
  cfg->shutdown_grace_s = 2;
}

static void jobq_push(mk_jobq *q, mk_job *j) {
  j->next = NULL;
  j->prev = q->tail;
  if (q->tail) q->tail->next = j;
  else q->head = j;
  q->tail = j;
}

static void jobq_remove(mk_jobq *q, mk_job *j) {
  if (j->prev) j->prev->next = j->next;
  else q->head = j->next;
  if (j->next) j->next->prev = j->prev;
  else q->tail = j->prev;
  j->prev = j->next = NULL;
}

static void job_free(mk_job *j) {
  free(j->method);
  cJSON_Delete(j->params);
  cJSON_Delete(j->response);
  mk_buf_free(&j->message);
  free(j);
}

static const char *worker_label(const mk_wproc *w, char *buf, size_t n) {
  if (w->kind == MK_WORKER_CPU) snprintf(buf, n, "cpu worker");
  else snprintf(buf, n, "gpu worker %d (CUDA_VISIBLE_DEVICES=%s)", w->index - 1, w->visible);
  return buf;
}

/* Bounded formatting into a fixed message field (truncation is fine). */
static void set_msg(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_msg(char *dst, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, n, fmt, ap);
  va_end(ap);
}

static void ring_append(mk_wproc *w, const char *p, size_t n) {
  if (n >= MK_WORKER_STDERR_KEEP) {
    p += n - MK_WORKER_STDERR_KEEP;
    n = MK_WORKER_STDERR_KEEP;
  }
  for (size_t i = 0; i < n; i++) {
    w->ring[w->ring_pos] = p[i];
    w->ring_pos = (w->ring_pos + 1) % MK_WORKER_STDERR_KEEP;
  }
  w->ring_len = w->ring_len + n > MK_WORKER_STDERR_KEEP ? MK_WORKER_STDERR_KEEP : w->ring_len + n;
  w->ring_total += n;
}

/* Appends the last `nlines` lines of the ring written since byte `since`,
 * at most `maxbytes` bytes. */
static int ring_tail(const mk_wproc *w, uint64_t since, int nlines, size_t maxbytes, mk_buf *out) {
  size_t len = w->ring_len;
  if (w->ring_total - since < len) len = (size_t)(w->ring_total - since);
  size_t start = (w->ring_pos + MK_WORKER_STDERR_KEEP - len) % MK_WORKER_STDERR_KEEP;
  /* Skip a trailing newline, then walk back nlines line breaks. */
  size_t end = len;
  while (end > 0 && w->ring[(start + end - 1) % MK_WORKER_STDERR_KEEP] == '\n') end--;
  size_t from = end;
  int seen = 0;
  while (from > 0) {
    char c = w->ring[(start + from - 1) % MK_WORKER_STDERR_KEEP];
    if (c == '\n' && ++seen >= nlines) break;
    from--;
  }
  if (end - from > maxbytes) from = end - maxbytes;
  for (size_t i = from; i < end; i++) {
    int rc = mk_buf_putc(out, w->ring[(start + i) % MK_WORKER_STDERR_KEEP]);
    if (rc) return rc;
  }
  return 0;
}

/* ---- completion ----------------------------------------------------------- */

static void on_deliver(uv_timer_t *t);

static void complete_job(mk_worker_pool *p, mk_job *j, int status, const char *kind,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Records the outcome and queues the job for delivery from the loop. */
static void complete_job(mk_worker_pool *p, mk_job *j, int status, const char *kind,
                         const char *fmt, ...) {
  j->status = status;
  if (kind) mk_strlcpy(j->kind_s, kind, sizeof j->kind_s);
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    mk_buf_vprintf(&j->message, fmt, ap);
    va_end(ap);
  }
  if (j->t_dispatch) {
    uint64_t ran = uv_hrtime() - j->t_dispatch;
    j->elapsed_ms = (double)ran / 1e6;
    if (j->worker >= 0) {
      p->workers[j->worker].busy_ns += ran;
      p->workers[j->worker].jobs_run++;
    }
  }
  jobq_push(&p->done, j);
  if (!p->finished) uv_timer_start(&p->deliver, on_deliver, 0, 0);
}

static void deliver_all(mk_worker_pool *p) {
  mk_job *j;
  while ((j = p->done.head) != NULL) {
    jobq_remove(&p->done, j);
    mk_worker_result r;
    memset(&r, 0, sizeof r);
    r.status = j->status;
    r.kind = j->status ? (j->kind_s[0] ? j->kind_s : "internal") : NULL;
    r.message = mk_buf_cstr(&j->message);
    r.line = j->line;
    r.response = j->response;
    if (j->response && j->status == 0) r.result = cJSON_GetObjectItemCaseSensitive(j->response, "result");
    if (j->response && j->status == MK_EWORKER)
      r.error = cJSON_GetObjectItemCaseSensitive(j->response, "error");
    if (j->worker >= 0 && p->workers[j->worker].have_info) r.worker = &p->workers[j->worker].info;
    r.gpu = j->worker > 0 ? p->workers[j->worker].visible : "";
    r.elapsed_ms = j->elapsed_ms;
    j->done(j->data, &r);
    p->stats.completed++;
    job_free(j);
  }
}

static void on_deliver(uv_timer_t *t) { deliver_all(t->data); }

/* ---- process lifecycle ---------------------------------------------------- */

static void dispatch(mk_worker_pool *p);
static void start_worker(mk_wproc *w);
static void maybe_finish(mk_worker_pool *p);

static void kill_worker(mk_wproc *w, int reason) {
  if (w->kill_reason == 0) w->kill_reason = reason;
  if (w->state != WS_FAILED) w->state = WS_DYING;
  uv_timer_stop(&w->timer);
  if (w->spawned && !w->exited && w->pid > 0) {
    /* The worker leads its own process group and its guard adopts what
     * leaves it: the tree takes compilers and escaped children too. */
    if (mk_proc_tree_kill(w->pid) == 0) uv_process_kill(&w->proc, SIGKILL);
  }
}

static void on_timer_closed(uv_handle_t *h) {
  mk_wproc *w = h->data;
  mk_worker_pool *p = w->pool;
  p->open_handles--;
  maybe_finish(p);
}

static void close_worker_timers(mk_wproc *w) {
  if (w->timers_closed) return;
  w->timers_closed = true;
  uv_close((uv_handle_t *)&w->timer, on_timer_closed);
  uv_close((uv_handle_t *)&w->aux, on_timer_closed);
}

/* Fails queued jobs no living worker can ever run. */
static void fail_orphans(mk_worker_pool *p) {
  mk_job *j = p->pending.head;
  while (j) {
    mk_job *next = j->next;
    bool possible = false;
    const char *why = "";
    for (int i = 0; i < p->nworkers; i++) {
      mk_wproc *w = &p->workers[i];
      if (j->kind != MK_WORKER_ANY && w->kind != j->kind) continue;
      if (w->state != WS_FAILED) possible = true;
      else why = w->fail_msg;
    }
    if (!possible) {
      jobq_remove(&p->pending, j);
      complete_job(p, j, MK_ECRASHED, "unavailable", "%s", why);
    }
    j = next;
  }
}

static void give_up(mk_wproc *w) {
  w->state = WS_FAILED;
  fail_orphans(w->pool);
}

static void on_restart(uv_timer_t *t) {
  mk_wproc *w = t->data;
  if (w->state != WS_BACKOFF || w->pool->closing) return;
  start_worker(w);
}

/* All four handles of the incarnation are closed: decide what comes next. */
static void after_incarnation(mk_wproc *w) {
  mk_worker_pool *p = w->pool;
  w->spawned = false;
  mk_buf_reset(&w->line);
  if (p->closing) {
    w->state = WS_STOPPED;
    close_worker_timers(w);
    return;
  }
  /* A hello timeout counts as a failed start; a cancel-kill does not. */
  if (!w->handshake_done && w->kill_reason != MK_ECANCELED) w->start_failures++;
  if (w->fatal || w->start_failures >= p->cfg.max_start_failures) {
    char label[128];
    worker_label(w, label, sizeof label);
    if (w->fatal)
      set_msg(w->fail_msg, sizeof w->fail_msg, "the %s cannot run: %s", label, w->death_msg);
    else
      set_msg(w->fail_msg, sizeof w->fail_msg,
               "the %s failed to start %d times in a row; last failure: %s", label,
               w->start_failures, w->death_msg);
    give_up(w);
    dispatch(p);
    return;
  }
  double delay = 0;
  if (w->start_failures > 0) {
    delay = p->cfg.backoff_ms;
    for (int i = 1; i < w->start_failures && delay < p->cfg.backoff_max_ms; i++) delay *= 2;
    if (delay > p->cfg.backoff_max_ms) delay = p->cfg.backoff_max_ms;
  }
  w->state = WS_BACKOFF;
  uv_timer_start(&w->aux, on_restart, (uint64_t)delay, 0);
}

static void on_proc_handle_closed(uv_handle_t *h) {
  mk_wproc *w = h->data;
  w->pool->open_handles--;
  if (--w->live_handles == 0) after_incarnation(w);
}

static void close_incarnation(mk_wproc *w) {
  uv_handle_t *hs[] = {(uv_handle_t *)&w->proc, (uv_handle_t *)&w->in, (uv_handle_t *)&w->out,
                       (uv_handle_t *)&w->errp};
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
    if (!uv_is_closing(hs[i])) uv_close(hs[i], on_proc_handle_closed);
}

static void describe_exit(const mk_wproc *w, mk_buf *b) {
  if (!w->exited) mk_buf_puts(b, "stopped answering");
  else if (w->term_signal)
    mk_buf_printf(b, "was killed by signal %d (%s)", w->term_signal, strsignal(w->term_signal));
  else mk_buf_printf(b, "exited with status %lld", (long long)w->exit_status);
}

static void handle_line(mk_wproc *w, char *line, size_t len);

/* The process is gone and its pipes are drained: fail what it was doing. */
static void finalize(mk_wproc *w) {
  if (w->finalizing) return;
  w->finalizing = true;
  mk_worker_pool *p = w->pool;
  uv_timer_stop(&w->timer);
  uv_timer_stop(&w->aux);
  /* A reply without its final newline still counts. */
  if (!w->discard && w->line.len > 0) {
    mk_buf tmp = w->line;
    mk_buf_init(&w->line, tmp.cap);
    handle_line(w, tmp.data, tmp.len);
    mk_buf_free(&tmp);
  }
  char label[128];
  worker_label(w, label, sizeof label);
  mk_buf why;
  mk_buf_init(&why, MK_ERRMSG_MAX * 2);
  mk_buf_printf(&why, "the %s ", label);
  describe_exit(w, &why);
  if (!w->handshake_done && w->kill_reason == 0) mk_buf_puts(&why, " before its handshake");
  if (w->job) mk_buf_printf(&why, " while running `%s`", w->job->method);
  mk_buf tail;
  mk_buf_init(&tail, MK_CRASH_TAIL_BYTES + 64);
  /* Only this incarnation's stderr: older lines would mislead. */
  ring_tail(w, w->ring_mark, MK_CRASH_TAIL_LINES, MK_CRASH_TAIL_BYTES, &tail);
  if (w->death_msg[0] == '\0' || w->kill_reason == 0) {
    set_msg(w->death_msg, sizeof w->death_msg, "%s%s%s", mk_buf_cstr(&why),
             tail.len ? "; stderr: " : "", tail.len ? mk_buf_cstr(&tail) : "");
  }
  if (w->job) {
    mk_job *j = w->job;
    w->job = NULL;
    if (w->kill_reason == 0) p->stats.crashes++;
    complete_job(p, j, MK_ECRASHED, "crashed", "%s.%s%s", mk_buf_cstr(&why),
                 tail.len ? "\nlast lines of the worker's stderr:\n" : "",
                 tail.len ? mk_buf_cstr(&tail) : "");
  } else if (w->kill_reason == 0 && w->handshake_done && !p->closing) {
    p->stats.crashes++;
  }
  mk_buf_free(&why);
  mk_buf_free(&tail);
  if (w->state != WS_FAILED) w->state = WS_DYING;
  close_incarnation(w);
}

static void maybe_finalize(mk_wproc *w) {
  if (w->exited && w->out_eof && w->err_eof) finalize(w);
}

static void on_aux(uv_timer_t *t) {
  mk_wproc *w = t->data;
  if (!w->spawned || w->finalizing) return;
  if (w->exited) finalize(w); /* a grandchild keeps the pipes open: stop waiting */
  else kill_worker(w, w->kill_reason ? w->kill_reason : MK_EPROTO);
}

static void on_proc_exit(uv_process_t *proc, int64_t status, int term_signal) {
  mk_wproc *w = proc->data;
  live_remove(w->pid);
  w->exited = true;
  w->exit_status = status;
  w->term_signal = term_signal;
  uv_timer_stop(&w->timer);
  uv_timer_start(&w->aux, on_aux, MK_EXIT_GRACE_MS, 0);
  maybe_finalize(w);
}

/* ---- protocol ------------------------------------------------------------- */

/* Kills the worker because it broke the protocol; fails its job. */
static void protocol_violation(mk_wproc *w, const char *what) {
  mk_worker_pool *p = w->pool;
  p->stats.protocol_errors++;
  w->discard = true;
  char label[128];
  worker_label(w, label, sizeof label);
  set_msg(w->death_msg, sizeof w->death_msg, "the %s broke the protocol: %s", label, what);
  if (w->job) {
    mk_job *j = w->job;
    w->job = NULL;
    complete_job(p, j, MK_EPROTO, "protocol", "%s", w->death_msg);
  }
  kill_worker(w, MK_EPROTO);
}

static void note_garbage(mk_wproc *w, const char *line, size_t len) {
  w->pool->stats.garbage_lines++;
  char head[] = "[stdout] ";
  ring_append(w, head, sizeof head - 1);
  ring_append(w, line, len > 300 ? 300 : len);
  ring_append(w, "\n", 1);
}

static void on_hello(mk_wproc *w, cJSON *msg) {
  mk_worker_pool *p = w->pool;
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(msg, "ok");
  cJSON *res = cJSON_GetObjectItemCaseSensitive(msg, "result");
  const cJSON *proto = cJSON_GetObjectItemCaseSensitive(res, "protocol");
  if (!cJSON_IsTrue(ok) || !cJSON_IsObject(res) || !cJSON_IsNumber(proto) ||
      proto->valueint != MK_WORKER_PROTOCOL) {
    char what[512];
    if (!cJSON_IsTrue(ok))
      snprintf(what, sizeof what, "its handshake failed: %s",
               mk_json_str(cJSON_GetObjectItemCaseSensitive(msg, "error"), "message", ""));
    else
      snprintf(what, sizeof what, "it speaks protocol %d, the engine speaks %d",
               cJSON_IsNumber(proto) ? proto->valueint : -1, MK_WORKER_PROTOCOL);
    w->fatal = true;
    protocol_violation(w, what);
    return;
  }
  cJSON_Delete(w->hello);
  w->hello = cJSON_DetachItemViaPointer(msg, res);
  w->info.index = w->index;
  w->info.kind = w->kind;
  w->info.visible = w->visible;
  w->info.torch = mk_json_str(w->hello, "torch", "");
  w->info.triton = mk_json_str(w->hello, "triton", "");
  w->info.python = mk_json_str(w->hello, "python", "");
  w->info.device = mk_json_str(w->hello, "device", "");
  w->info.cuda = mk_json_str(w->hello, "cuda", "");
  w->info.hello = w->hello;
  w->have_info = true;
  w->handshake_done = true;
  w->start_failures = 0;
  uv_timer_stop(&w->timer);
  w->state = WS_READY;
  dispatch(p);
}

static void on_reply(mk_wproc *w, cJSON *msg) {
  mk_worker_pool *p = w->pool;
  mk_job *j = w->job;
  const cJSON *prog = cJSON_GetObjectItemCaseSensitive(msg, "progress");
  if (cJSON_IsObject(prog)) {
    if (j->progress) {
      const cJSON *fr = cJSON_GetObjectItemCaseSensitive(prog, "fraction");
      j->progress(j->data, mk_json_str(prog, "message", ""), cJSON_IsNumber(fr) ? fr->valuedouble : -1);
    }
    cJSON_Delete(msg);
    return;
  }
  uv_timer_stop(&w->timer);
  w->job = NULL;
  /* A reply read after the process exited completes the job, nothing more. */
  bool alive = w->state == WS_BUSY && !w->exited && !w->finalizing;
  if (alive) w->state = WS_READY;
  j->response = msg;
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(msg, "ok");
  if (cJSON_IsTrue(ok)) {
    complete_job(p, j, 0, NULL, NULL);
  } else {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(msg, "error");
    const cJSON *line = cJSON_GetObjectItemCaseSensitive(e, "line");
    if (cJSON_IsNumber(line)) j->line = line->valueint;
    const char *kind = mk_json_str(e, "kind", "");
    const char *m = mk_json_str(e, "message", "");
    complete_job(p, j, MK_EWORKER, kind[0] ? kind : "internal", "%s",
                 m[0] ? m : "the worker reported an error without a message");
  }
  if (alive) dispatch(p);
}

static void handle_line(mk_wproc *w, char *line, size_t len) {
  while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ')) len--;
  if (len == 0) return;
  cJSON *msg = cJSON_ParseWithLength(line, len);
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
  if (!cJSON_IsObject(msg) || !cJSON_IsNumber(id)) {
    note_garbage(w, line, len);
    cJSON_Delete(msg);
    return;
  }
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(msg, "v");
  if (v && (!cJSON_IsNumber(v) || v->valueint != MK_WORKER_PROTOCOL)) {
    cJSON_Delete(msg);
    w->fatal = true;
    protocol_violation(w, "a reply carries an unknown protocol version");
    return;
  }
  uint64_t rid = (uint64_t)id->valuedouble;
  if (w->state == WS_STARTING && rid == w->hello_id && !w->exited && !w->finalizing) {
    on_hello(w, msg);
    cJSON_Delete(msg);
  } else if (w->job && rid == w->job->id) {
    on_reply(w, msg); /* takes msg */
  } else {
    note_garbage(w, line, len); /* a reply nobody waits for */
    cJSON_Delete(msg);
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  mk_wproc *w = h->data;
  char *base = h == (uv_handle_t *)&w->out ? w->rbuf_out : w->rbuf_err;
  *buf = uv_buf_init(base, MK_READ_CHUNK);
}

static void on_out_eof(mk_wproc *w) {
  w->out_eof = true;
  uv_read_stop((uv_stream_t *)&w->out);
  /* stdout closed but still alive: it can never answer again. */
  if (!w->exited && !w->finalizing) uv_timer_start(&w->aux, on_aux, MK_EOF_KILL_MS, 0);
  maybe_finalize(w);
}

static void on_out_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  mk_wproc *w = s->data;
  if (nread < 0) {
    on_out_eof(w);
    return;
  }
  size_t n = (size_t)nread;
  const char *d = buf->base;
  size_t max_line = w->pool->cfg.max_line;
  while (n > 0 && !w->discard && !w->finalizing) {
    const char *nl = memchr(d, '\n', n);
    size_t take = nl ? (size_t)(nl - d) : n;
    if (w->line.len + take > max_line) {
      char what[160];
      snprintf(what, sizeof what, "a reply line is longer than %zu bytes", max_line);
      protocol_violation(w, what);
      mk_buf_reset(&w->line);
      return;
    }
    mk_buf_append(&w->line, d, take);
    if (!nl) return;
    d += take + 1;
    n -= take + 1;
    /* Hand the line over before parsing: callbacks may re-enter. */
    mk_buf line = w->line;
    mk_buf_init(&w->line, line.cap);
    handle_line(w, line.data ? line.data : (char *)"", line.len);
    mk_buf_free(&line);
  }
}

static void on_err_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  mk_wproc *w = s->data;
  if (nread < 0) {
    w->err_eof = true;
    uv_read_stop(s);
    maybe_finalize(w);
    return;
  }
  ring_append(w, buf->base, (size_t)nread);
  if (w->pool->echo_stderr) fwrite(buf->base, 1, (size_t)nread, stderr);
}

typedef struct mk_write {
  uv_write_t req;
  char *data;
} mk_write;

static void on_written(uv_write_t *req, int status) {
  mk_write *wr = (mk_write *)req;
  /* A failed write means the worker is dying; its exit handles the job. */
  free(wr->data);
  free(wr);
}

static int send_message(mk_wproc *w, uint64_t id, const char *method, const cJSON *params) {
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_printf(&b, "{\"v\":%d,\"id\":%llu,\"method\":", MK_WORKER_PROTOCOL, (unsigned long long)id);
  mk_buf_json_str(&b, method);
  mk_buf_puts(&b, ",\"params\":");
  char *ps = params ? cJSON_PrintUnformatted(params) : NULL;
  mk_buf_puts(&b, ps ? ps : "{}");
  free(ps);
  mk_buf_puts(&b, "}\n");
  if (b.err) {
    int rc = b.err;
    mk_buf_free(&b);
    return rc;
  }
  mk_write *wr = calloc(1, sizeof *wr);
  if (!wr) {
    mk_buf_free(&b);
    return MK_ENOMEM;
  }
  size_t len = 0;
  wr->data = mk_buf_steal(&b, &len);
  uv_buf_t ub = uv_buf_init(wr->data, (unsigned)len);
  int rc = uv_write(&wr->req, (uv_stream_t *)&w->in, &ub, 1, on_written);
  if (rc) {
    free(wr->data);
    free(wr);
    return MK_EIO;
  }
  return 0;
}

static void on_time_limit(uv_timer_t *t) {
  mk_wproc *w = t->data;
  mk_worker_pool *p = w->pool;
  char label[128];
  worker_label(w, label, sizeof label);
  if (w->state == WS_STARTING) {
    set_msg(w->death_msg, sizeof w->death_msg, "the %s did not answer its handshake within %.0f s",
             label, p->cfg.hello_timeout_s);
    kill_worker(w, MK_ETIMEDOUT);
    return;
  }
  if (w->job) {
    mk_job *j = w->job;
    w->job = NULL;
    p->stats.timeouts++;
    double limit = j->timeout_s > 0 ? j->timeout_s : p->cfg.request_timeout_s;
    set_msg(w->death_msg, sizeof w->death_msg, "killed after `%s` ran past %.1f s", j->method,
             limit);
    complete_job(p, j, MK_ETIMEDOUT, "timeout",
                 "`%s` did not finish within %.1f s; the %s was killed and restarts", j->method,
                 limit, label);
  }
  kill_worker(w, MK_ETIMEDOUT);
}

/* ---- memory limit ----------------------------------------------------------
 * A watchdog on the resident size of each worker's process tree. RLIMIT_AS
 * cannot be used (CUDA reserves tens of GiB of address space at init) and
 * RLIMIT_DATA counts reserved, untouched private mappings as well (the CUDA
 * driver's and allocators' arenas); a cgroup's memory.max needs a delegated,
 * writable cgroup v2 subtree, which containers and CI machines mostly lack.
 * What harms the machine is resident memory, so that is what is measured,
 * every MK_MEMWATCH_MS: an allocation faster than that overshoots by at most
 * what it touches in that time. */

static void memory_exceeded(mk_wproc *w, uint64_t rss, int nprocs) {
  mk_worker_pool *p = w->pool;
  char label[128];
  worker_label(w, label, sizeof label);
  double limit = (double)p->memory_limit / MK_GIB;
  p->stats.memory_kills++;
  set_msg(w->death_msg, sizeof w->death_msg,
          "killed: exceeded the memory limit of %.3g GiB (%.2f GiB resident)", limit,
          (double)rss / MK_GIB);
  if (w->job) {
    mk_job *j = w->job;
    w->job = NULL;
    complete_job(p, j, MK_ECRASHED, "oom",
                 "exceeded the memory limit of %.3g GiB (host memory: %.2f GiB resident in %d "
                 "process%s while running `%s`); the %s was killed and restarts",
                 limit, (double)rss / MK_GIB, nprocs, nprocs == 1 ? "" : "es", j->method, label);
  }
  kill_worker(w, MK_ERANGE);
}

static void on_memwatch(uv_timer_t *t) {
  mk_worker_pool *p = t->data;
  if (p->closing || p->memory_limit == 0) return;
  for (int i = 0; i < p->nworkers; i++) {
    mk_wproc *w = &p->workers[i];
    if (!w->spawned || w->exited || w->finalizing || w->pid <= 0 || w->state == WS_DYING) continue;
    int nprocs = 0;
    uint64_t rss = mk_proc_tree_rss(w->pid, &nprocs);
    if (rss > p->memory_limit) memory_exceeded(w, rss, nprocs);
  }
}

/* The configured limit, else $MKEVOLVE_WORKER_MEMORY_GB, else 3/4 of the
 * machine shared by the workers. */
static uint64_t memory_limit_of(const mk_worker_config *cfg, int nworkers) {
  double gb = cfg->memory_limit_gb;
  if (gb == 0) {
    const char *e = getenv("MKEVOLVE_WORKER_MEMORY_GB");
    if (e && e[0]) {
      char *end;
      double v = strtod(e, &end);
      gb = end != e && v == v ? (v > 0 ? v : -1) : 0;
    }
  }
  if (gb < 0) return 0;
  if (gb > 0) return gb > 1e9 ? UINT64_MAX : (uint64_t)(gb * MK_GIB);
  uint64_t share = mk_proc_total_memory() / 4 * 3 / (uint64_t)(nworkers > 0 ? nworkers : 1);
  uint64_t floor = (uint64_t)MK_GIB;
  return share > floor ? share : floor;
}

uint64_t mk_worker_pool_memory_limit(const mk_worker_pool *p) { return p->memory_limit; }

/* ---- spawning ------------------------------------------------------------- */

/* Variables the worker sets itself: never copied from the engine. */
static bool env_is_ours(const char *kv) {
  static const char *const keys[] = {"PYTHONPATH=", "TRITON_INTERPRET=", "CUDA_VISIBLE_DEVICES=",
                                     "PYTHONUNBUFFERED=", "MKWORKER_KIND=", "MKWORKER_INDEX=",
                                     "MKWORKER_PARENT="};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (strncmp(kv, keys[i], strlen(keys[i])) == 0) return true;
  return false;
}

/* `pat` is a name, or a prefix ending in '*'. */
static bool env_name_matches(const char *name, size_t len, const char *pat, size_t plen) {
  if (plen > 0 && pat[plen - 1] == '*') return len >= plen - 1 && strncmp(name, pat, plen - 1) == 0;
  return len == plen && strncmp(name, pat, len) == 0;
}

/* Case-insensitive search of `word` in the name. */
static bool env_name_has(const char *name, size_t len, const char *word) {
  size_t wl = strlen(word);
  for (size_t i = 0; i + wl <= len; i++) {
    size_t k = 0;
    while (k < wl && toupper((unsigned char)name[i + k]) == word[k]) k++;
    if (k == wl) return true;
  }
  return false;
}

bool mk_worker_env_allowed(const char *name, size_t len) {
  /* A credential never reaches candidate code, whatever list names it. */
  static const char *const secret[] = {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD",
                                       "CREDENTIAL", "AUTH", "COOKIE", "SESSION"};
  for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++)
    if (env_name_has(name, len, secret[i])) return false;
  /* What Python, torch, Triton, CUDA and the compilers they run read. */
  static const char *const allow[] = {
      "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM",
      "TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR",
      "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "CC", "CXX", "VIRTUAL_ENV", "CONDA_PREFIX",
      "PYTHONHOME", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS",
      "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CUDA_*", "NVIDIA_*",
      "CUBLAS_*", "CUDNN_*", "NCCL_DEBUG", "TRITON_*", "TORCH_*", "TORCHINDUCTOR_*",
      "PYTORCH_*", "HIP_*", "ROCM_*", "HSA_*", "MKEVOLVE_*", "MKWORKER_*"};
  for (size_t i = 0; i < sizeof allow / sizeof allow[0]; i++)
    if (env_name_matches(name, len, allow[i], strlen(allow[i]))) return true;
  const char *extra = getenv("MKEVOLVE_WORKER_ENV");
  while (extra && *extra) {
    while (*extra == ',' || *extra == ' ') extra++;
    size_t plen = strcspn(extra, ", ");
    if (plen > 0 && env_name_matches(name, len, extra, plen)) return true;
    extra += plen;
  }
  return false;
}

static bool env_passes(const char *kv) {
  const char *eq = strchr(kv, '=');
  return eq && eq > kv && !env_is_ours(kv) && mk_worker_env_allowed(kv, (size_t)(eq - kv));
}

static void free_strv(char **v) {
  if (!v) return;
  for (char **q = v; *q; q++) free(*q);
  free(v);
}

/* The allowed part of the parent's environment with the worker's variables
 * set; MKWORKER_PARENT lets the worker's guard notice a parent that died
 * before it could ask to be told (PR_SET_PDEATHSIG). */
static char **build_env(mk_wproc *w) {
  mk_worker_pool *p = w->pool;
  size_t n = 0;
  for (char **e = environ; e && *e; e++) n++;
  char **env = calloc(n + 9, sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  const char *old_pp = getenv("PYTHONPATH");
  for (char **e = environ; e && *e; e++)
    if (env_passes(*e) && !(env[k++] = mk_strdup(*e))) goto fail;
  if (old_pp && old_pp[0]) env[k] = mk_strdup_printf("PYTHONPATH=%s:%s", p->pythonpath, old_pp);
  else env[k] = mk_strdup_printf("PYTHONPATH=%s", p->pythonpath);
  if (!env[k++]) goto fail;
  if (!(env[k++] = mk_strdup_printf("PYTHONUNBUFFERED=1"))) goto fail;
  if (!(env[k++] = mk_strdup_printf("CUDA_VISIBLE_DEVICES=%s", w->visible))) goto fail;
  if (!(env[k++] = mk_strdup_printf("MKWORKER_KIND=%s", mk_worker_kind_name(w->kind)))) goto fail;
  if (!(env[k++] = mk_strdup_printf("MKWORKER_INDEX=%d", w->index))) goto fail;
  if (!(env[k++] = mk_strdup_printf("MKWORKER_PARENT=%d", (int)uv_os_getpid()))) goto fail;
  if (w->kind == MK_WORKER_CPU && !(env[k++] = mk_strdup_printf("TRITON_INTERPRET=1"))) goto fail;
  return env;
fail:
  free_strv(env);
  return NULL;
}

static void start_worker(mk_wproc *w) {
  mk_worker_pool *p = w->pool;
  w->exited = w->out_eof = w->err_eof = w->finalizing = w->handshake_done = false;
  w->discard = false;
  w->kill_reason = 0;
  w->fatal = false;
  w->death_msg[0] = '\0';
  w->exit_status = 0;
  w->term_signal = 0;
  w->pid = 0;
  w->job = NULL;
  mk_buf_reset(&w->line);
  w->state = WS_STARTING;
  w->spawned = true;
  w->ring_mark = w->ring_total;
  w->live_handles = 4;
  p->open_handles += 4;
  uv_pipe_init(p->loop, &w->in, 0);
  uv_pipe_init(p->loop, &w->out, 0);
  uv_pipe_init(p->loop, &w->errp, 0);
  w->in.data = w->out.data = w->errp.data = w->proc.data = w;

  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
  stdio[0].data.stream = (uv_stream_t *)&w->in;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&w->out;
  stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[2].data.stream = (uv_stream_t *)&w->errp;
  char **env = build_env(w);
  uv_process_options_t opt;
  memset(&opt, 0, sizeof opt);
  opt.exit_cb = on_proc_exit;
  opt.file = p->argv[0];
  opt.args = p->argv;
  opt.env = env;
  opt.stdio_count = 3;
  opt.stdio = stdio;
  opt.flags = UV_PROCESS_DETACHED; /* own process group, killed as a group */
  int rc = env ? uv_spawn(p->loop, &w->proc, &opt) : UV_ENOMEM;
  free_strv(env);
  p->stats.spawns++;
  if (rc != 0) {
    set_msg(w->death_msg, sizeof w->death_msg, "cannot run %s: %s%s", p->argv[0], uv_strerror(rc),
             rc == UV_ENOENT ? " (set MKEVOLVE_PYTHON or run scripts/setup.sh)" : "");
    w->fatal = rc == UV_ENOENT || rc == UV_EACCES;
    w->exited = w->out_eof = w->err_eof = true;
    w->kill_reason = MK_ECRASHED; /* already described */
    w->state = WS_DYING;
    w->finalizing = true;
    close_incarnation(w);
    return;
  }
  w->pid = w->proc.pid;
  live_add(w->pid);
  uv_read_start((uv_stream_t *)&w->out, on_alloc, on_out_read);
  uv_read_start((uv_stream_t *)&w->errp, on_alloc, on_err_read);
  w->hello_id = p->next_id++;
  cJSON *params = cJSON_CreateObject();
  cJSON_AddNumberToObject(params, "protocol", MK_WORKER_PROTOCOL);
  send_message(w, w->hello_id, "hello", params);
  cJSON_Delete(params);
  uv_timer_start(&w->timer, on_time_limit, (uint64_t)(p->cfg.hello_timeout_s * 1000), 0);
}

/* ---- scheduling ----------------------------------------------------------- */

static bool kind_fits(mk_worker_kind want, const mk_wproc *w) {
  return want == MK_WORKER_ANY || want == w->kind;
}

static void send_job(mk_wproc *w, mk_job *j) {
  mk_worker_pool *p = w->pool;
  w->job = j;
  w->state = WS_BUSY;
  j->worker = w->index;
  j->t_dispatch = uv_hrtime();
  double limit = j->timeout_s > 0 ? j->timeout_s : p->cfg.request_timeout_s;
  uv_timer_start(&w->timer, on_time_limit, (uint64_t)(limit * 1000), 0);
  if (send_message(w, j->id, j->method, j->params) != 0) {
    w->job = NULL;
    complete_job(p, j, MK_EPROTO, "protocol", "could not write the request to the worker");
    kill_worker(w, MK_EPROTO);
  }
}

/* Starts a stopped worker able to run `kind` when the jobs of that kind
 * waiting so far in this dispatch pass (`waiting`, counting this one)
 * outnumber the workers already on their way (starting, restarting):
 * several GPUs start as soon as there is work for each, and an idle pool
 * starts nothing. MK_WORKER_ANY jobs only ever start the CPU worker. */
static void ensure_started(mk_worker_pool *p, mk_worker_kind kind, int waiting) {
  int on_way = 0;
  for (int i = 0; i < p->nworkers; i++) {
    mk_wproc *w = &p->workers[i];
    if (!kind_fits(kind, w)) continue;
    if (w->state == WS_STARTING || w->state == WS_BACKOFF || w->state == WS_DYING) on_way++;
    else if (kind == MK_WORKER_ANY && w->state == WS_BUSY) on_way++;
  }
  if (on_way >= waiting) return;
  for (int i = 0; i < p->nworkers; i++) {
    mk_wproc *w = &p->workers[i];
    if (kind == MK_WORKER_ANY && i > 0) break;
    if (kind_fits(kind, w) && w->state == WS_STOPPED) {
      start_worker(w);
      return;
    }
  }
}

/* Whether idle worker `a` should take a job of `kind` before idle worker
 * `b`: the CPU worker first for MK_WORKER_ANY (GPU workers keep their time
 * for timings), then the one that has been busy least so far (the
 * least-loaded GPU), then the lower index. */
static bool less_loaded(mk_worker_kind kind, const mk_wproc *a, const mk_wproc *b) {
  if (kind == MK_WORKER_ANY && (a->kind == MK_WORKER_CPU) != (b->kind == MK_WORKER_CPU))
    return a->kind == MK_WORKER_CPU;
  if (a->busy_ns != b->busy_ns) return a->busy_ns < b->busy_ns;
  return a->index < b->index;
}

static mk_wproc *least_loaded_idle(mk_worker_pool *p, mk_worker_kind kind) {
  mk_wproc *best = NULL;
  for (int i = 0; i < p->nworkers; i++) {
    mk_wproc *w = &p->workers[i];
    if (w->state == WS_READY && kind_fits(kind, w) && (!best || less_loaded(kind, w, best))) best = w;
  }
  return best;
}

/* One job per worker at a time (a GPU worker is the only process timing on
 * its GPU), in FIFO order, each to the least-loaded idle worker of its kind. */
static void dispatch(mk_worker_pool *p) {
  if (p->closing) return;
  fail_orphans(p);
  int waiting[3] = {0, 0, 0}; /* per mk_worker_kind */
  for (mk_job *j = p->pending.head, *next; j; j = next) {
    next = j->next;
    mk_wproc *idle = least_loaded_idle(p, j->kind);
    if (!idle) {
      ensure_started(p, j->kind, ++waiting[j->kind]);
      continue;
    }
    jobq_remove(&p->pending, j);
    send_job(idle, j);
  }
}

/* ---- public API ----------------------------------------------------------- */

int mk_worker_detect_gpus(char (*ids)[64], int max) {
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  int n = 0;
  if (cvd) {
    const char *s = cvd;
    while (*s && n < max) {
      const char *e = strchr(s, ',');
      size_t len = e ? (size_t)(e - s) : strlen(s);
      while (len > 0 && s[0] == ' ') s++, len--;
      while (len > 0 && s[len - 1] == ' ') len--;
      /* CUDA stops at the first invalid entry; "-1" hides everything. */
      if (len == 0 || (len == 2 && strncmp(s, "-1", 2) == 0)) break;
      if (len >= 64) break;
      memcpy(ids[n], s, len);
      ids[n][len] = '\0';
      n++;
      if (!e) break;
      s = e + 1;
    }
    return n;
  }
  DIR *d = opendir("/proc/driver/nvidia/gpus");
  if (!d) return 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL && n < max) {
    if (de->d_name[0] == '.') continue;
    n++;
  }
  closedir(d);
  for (int i = 0; i < n; i++) snprintf(ids[i], 64, "%d", i);
  return n;
}

/* ids[i] = the smallest ordinal not among ids[0..i-1]: stand-in GPUs
 * beyond the detected ones (fake workers only) never share an ordinal with
 * another worker, as two real workers on one GPU must never do. */
static void standin_ordinal(char (*ids)[64], int i) {
  for (int n = 0;; n++) {
    char cand[64];
    snprintf(cand, sizeof cand, "%d", n);
    bool used = false;
    for (int k = 0; k < i && !used; k++) used = strcmp(ids[k], cand) == 0;
    if (!used) {
      memcpy(ids[i], cand, sizeof cand);
      return;
    }
  }
}

static void init_timer(mk_worker_pool *p, uv_timer_t *t, void *data) {
  uv_timer_init(p->loop, t);
  t->data = data;
  p->open_handles++;
}

static void pool_free(mk_worker_pool *p) {
  if (p->workers) {
    for (int i = 0; i < p->nworkers; i++) {
      mk_buf_free(&p->workers[i].line);
      cJSON_Delete(p->workers[i].hello);
    }
  }
  free(p->workers);
  free(p->python);
  free(p->pythonpath);
  free_strv(p->argv);
  free(p);
}

int mk_worker_pool_new(uv_loop_t *loop, const mk_worker_config *cfg, mk_worker_pool **out,
                       mk_errmsg *err) {
  *out = NULL;
  mk_worker_pool *p = calloc(1, sizeof *p);
  if (!p) return mk_errf(err, MK_ENOMEM, "out of memory");
  p->loop = loop;
  if (cfg) p->cfg = *cfg;
  else mk_worker_config_init(&p->cfg);
  mk_worker_config def;
  mk_worker_config_init(&def);
  if (p->cfg.hello_timeout_s <= 0) p->cfg.hello_timeout_s = def.hello_timeout_s;
  if (p->cfg.request_timeout_s <= 0) p->cfg.request_timeout_s = def.request_timeout_s;
  if (p->cfg.max_line == 0) p->cfg.max_line = def.max_line;
  if (p->cfg.max_start_failures <= 0) p->cfg.max_start_failures = def.max_start_failures;
  if (p->cfg.backoff_ms <= 0) p->cfg.backoff_ms = def.backoff_ms;
  if (p->cfg.backoff_max_ms <= 0) p->cfg.backoff_max_ms = def.backoff_max_ms;
  if (p->cfg.shutdown_grace_s <= 0) p->cfg.shutdown_grace_s = def.shutdown_grace_s;
  const char *py = p->cfg.python;
  if (!py || !py[0]) py = getenv("MKEVOLVE_PYTHON");
  if (!py || !py[0]) py = MK_DEFAULT_PYTHON;
  p->python = mk_strdup(py);
  p->pythonpath = mk_strdup(p->cfg.pythonpath ? p->cfg.pythonpath : MK_WORKER_PYTHONPATH);
  p->cfg.python = p->python;
  p->cfg.pythonpath = p->pythonpath;
  size_t argc = 0;
  if (p->cfg.argv)
    while (p->cfg.argv[argc]) argc++;
  p->argv = calloc((argc ? argc : 3) + 1, sizeof *p->argv);
  if (!p->python || !p->pythonpath || !p->argv) goto oom;
  if (argc) {
    for (size_t i = 0; i < argc; i++)
      if (!(p->argv[i] = mk_strdup(p->cfg.argv[i]))) goto oom;
  } else {
    p->argv[0] = mk_strdup(p->python);
    p->argv[1] = mk_strdup("-m");
    p->argv[2] = mk_strdup("mkworker");
    if (!p->argv[0] || !p->argv[1] || !p->argv[2]) goto oom;
  }
  p->cfg.argv = NULL;

  char ids[MK_WORKER_MAX_GPUS][64];
  int ngpus;
  if (p->cfg.gpus < 0) {
    ngpus = mk_worker_detect_gpus(ids, MK_WORKER_MAX_GPUS);
  } else {
    ngpus = p->cfg.gpus > MK_WORKER_MAX_GPUS ? MK_WORKER_MAX_GPUS : p->cfg.gpus;
    char det[MK_WORKER_MAX_GPUS][64];
    int nd = mk_worker_detect_gpus(det, MK_WORKER_MAX_GPUS);
    for (int i = 0; i < ngpus; i++) {
      if (i < nd) memcpy(ids[i], det[i], 64);
      else standin_ordinal(ids, i);
    }
  }
  p->ngpus = ngpus;
  p->nworkers = 1 + ngpus;
  p->workers = calloc((size_t)p->nworkers, sizeof *p->workers);
  if (!p->workers) goto oom;
  const char *echo = getenv("MKEVOLVE_WORKER_STDERR");
  p->echo_stderr = echo && echo[0] == '1';
  p->next_id = 1;
  for (int i = 0; i < p->nworkers; i++) {
    mk_wproc *w = &p->workers[i];
    w->pool = p;
    w->index = i;
    w->kind = i == 0 ? MK_WORKER_CPU : MK_WORKER_GPU;
    if (i > 0) memcpy(w->visible, ids[i - 1], 64);
    w->state = WS_STOPPED;
    mk_buf_init(&w->line, p->cfg.max_line + 1);
    init_timer(p, &w->timer, w);
    init_timer(p, &w->aux, w);
  }
  uv_timer_init(loop, &p->deliver);
  p->deliver.data = p;
  p->memory_limit = memory_limit_of(&p->cfg, p->nworkers);
  uv_timer_init(loop, &p->memwatch);
  p->memwatch.data = p;
  p->open_handles++;
  uv_timer_start(&p->memwatch, on_memwatch, MK_MEMWATCH_MS, MK_MEMWATCH_MS);
  uv_unref((uv_handle_t *)&p->memwatch);
  /* Writing to a dead worker's pipe must give EPIPE, not kill us. */
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  *out = p;
  return 0;
oom:
  pool_free(p);
  return mk_errf(err, MK_ENOMEM, "out of memory");
}

int mk_worker_submit(mk_worker_pool *p, mk_worker_request *req, uint64_t *job_out,
                     mk_errmsg *err) {
  if (job_out) *job_out = 0;
  if (!req || !req->method || !req->method[0] || !req->done) {
    if (req) cJSON_Delete(req->params), req->params = NULL;
    return mk_errf(err, MK_EINVAL, "a worker request needs a method and a callback");
  }
  if (p->closing) {
    cJSON_Delete(req->params);
    req->params = NULL;
    return mk_errf(err, MK_ECANCELED, "the worker pool is shutting down");
  }
  if (req->kind == MK_WORKER_GPU && p->ngpus == 0) {
    cJSON_Delete(req->params);
    req->params = NULL;
    return mk_errf(err, MK_ENOENT, "no GPU is visible to this process (CUDA_VISIBLE_DEVICES / driver)");
  }
  bool possible = false;
  const char *why = "";
  for (int i = 0; i < p->nworkers; i++) {
    if (!kind_fits(req->kind, &p->workers[i])) continue;
    if (p->workers[i].state != WS_FAILED) possible = true;
    else why = p->workers[i].fail_msg;
  }
  if (!possible) {
    cJSON_Delete(req->params);
    req->params = NULL;
    return mk_errf(err, MK_ECRASHED, "%s", why);
  }
  mk_job *j = calloc(1, sizeof *j);
  if (!j || !(j->method = mk_strdup(req->method))) {
    free(j);
    cJSON_Delete(req->params);
    req->params = NULL;
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  j->id = p->next_id++;
  j->params = req->params;
  req->params = NULL;
  j->kind = req->kind;
  j->timeout_s = req->timeout_s;
  j->done = req->done;
  j->progress = req->progress;
  j->data = req->data;
  j->worker = -1;
  mk_buf_init(&j->message, 64 * 1024);
  jobq_push(&p->pending, j);
  if (job_out) *job_out = j->id;
  dispatch(p);
  return 0;
}

int mk_worker_cancel(mk_worker_pool *p, uint64_t id) {
  for (mk_job *j = p->pending.head; j; j = j->next) {
    if (j->id != id) continue;
    jobq_remove(&p->pending, j);
    complete_job(p, j, MK_ECANCELED, "canceled", "cancelled before it ran");
    return 0;
  }
  for (int i = 0; i < p->nworkers; i++) {
    mk_wproc *w = &p->workers[i];
    if (!w->job || w->job->id != id) continue;
    mk_job *j = w->job;
    w->job = NULL;
    complete_job(p, j, MK_ECANCELED, "canceled", "cancelled while running; the worker restarts");
    kill_worker(w, MK_ECANCELED);
    return 0;
  }
  return MK_ENOENT;
}

int mk_worker_pool_warm(mk_worker_pool *p, mk_worker_kind kind) {
  if (p->closing) return MK_ECANCELED;
  if (kind == MK_WORKER_GPU && p->ngpus == 0) return MK_ENOENT;
  for (int i = 0; i < p->nworkers; i++) {
    mk_wproc *w = &p->workers[i];
    if ((kind == MK_WORKER_ANY ? i == 0 : kind_fits(kind, w)) && w->state == WS_STOPPED)
      start_worker(w);
  }
  return 0;
}

int mk_worker_pool_size(const mk_worker_pool *p) { return p->nworkers; }
int mk_worker_pool_gpus(const mk_worker_pool *p) { return p->ngpus; }

const mk_worker_info *mk_worker_pool_info(const mk_worker_pool *p, int index) {
  if (index < 0 || index >= p->nworkers || !p->workers[index].have_info) return NULL;
  return &p->workers[index].info;
}

const mk_worker_info *mk_worker_pool_info_of(const mk_worker_pool *p, mk_worker_kind kind) {
  for (int i = 0; i < p->nworkers; i++)
    if (kind_fits(kind, &p->workers[i]) && p->workers[i].have_info) return &p->workers[i].info;
  return NULL;
}

int mk_worker_pool_identity(const mk_worker_pool *p, mk_worker_kind kind, struct mk_buf *out) {
  if (p == NULL || out == NULL || kind == MK_WORKER_ANY) return MK_EINVAL;
  for (int i = 0; i < p->nworkers; i++) {
    if (!kind_fits(kind, &p->workers[i])) continue;
    mk_buf_printf(out, "kind=%s\npython=%s\npythonpath=%s\nvisible=%s\n",
                  kind == MK_WORKER_GPU ? "gpu" : "cpu", p->python ? p->python : "",
                  p->pythonpath ? p->pythonpath : "", p->workers[i].visible);
    for (int a = 0; p->argv && p->argv[a]; a++) mk_buf_printf(out, "argv=%s\n", p->argv[a]);
    return out->err;
  }
  return MK_ENOENT;
}

int mk_worker_pool_stderr_tail(const mk_worker_pool *p, int index, int nlines, struct mk_buf *out) {
  if (index < 0 || index >= p->nworkers) return MK_EINVAL;
  return ring_tail(&p->workers[index], 0, nlines, MK_WORKER_STDERR_KEEP, out);
}

void mk_worker_pool_stats(const mk_worker_pool *p, mk_worker_stats *out) { *out = p->stats; }

int mk_worker_pool_load(const mk_worker_pool *p, int index, mk_worker_load *out) {
  if (index < 0 || index >= p->nworkers) return MK_EINVAL;
  *out = (mk_worker_load){.jobs = p->workers[index].jobs_run,
                          .busy_s = (double)p->workers[index].busy_ns / 1e9};
  return 0;
}

void mk_worker_pool_retry(mk_worker_pool *p) {
  for (int i = 0; i < p->nworkers; i++) {
    mk_wproc *w = &p->workers[i];
    if (w->state != WS_FAILED || w->spawned) continue;
    w->state = WS_STOPPED;
    w->start_failures = 0;
    w->fail_msg[0] = '\0';
  }
}

static void on_deliver_closed(uv_handle_t *h) {
  mk_worker_pool *p = h->data;
  void (*cb)(void *) = p->close_cb;
  void *data = p->close_data;
  pool_free(p);
  if (cb) cb(data);
}

static void maybe_finish(mk_worker_pool *p) {
  if (!p->closing || p->finished || p->open_handles > 0) return;
  p->finished = true;
  uv_timer_stop(&p->deliver);
  deliver_all(p);
  uv_close((uv_handle_t *)&p->deliver, on_deliver_closed);
}

static void on_shutdown_sent(uv_shutdown_t *req, int status) { (void)req, (void)status; }

static void on_memwatch_closed(uv_handle_t *h) {
  mk_worker_pool *p = h->data;
  p->open_handles--;
  maybe_finish(p);
}

static void on_shutdown_grace(uv_timer_t *t) {
  mk_wproc *w = t->data;
  if (w->spawned && !w->exited) kill_worker(w, MK_ECANCELED);
  else if (w->spawned && !w->finalizing) finalize(w);
}

static void stop_worker(mk_wproc *w) {
  mk_worker_pool *p = w->pool;
  if (!w->spawned) {
    if (w->state != WS_FAILED) w->state = WS_STOPPED;
    uv_timer_stop(&w->aux);
    close_worker_timers(w);
    return;
  }
  if (w->job) {
    mk_job *j = w->job;
    w->job = NULL;
    complete_job(p, j, MK_ECANCELED, "canceled", "cancelled: the engine is shutting down");
  }
  if (w->state == WS_READY && !w->exited) {
    /* Polite first: `shutdown`, EOF on stdin, then SIGKILL after the grace. */
    w->kill_reason = MK_ECANCELED;
    w->state = WS_DYING;
    send_message(w, p->next_id++, "shutdown", NULL);
    uv_shutdown(&w->shutdown_req, (uv_stream_t *)&w->in, on_shutdown_sent);
    uv_timer_start(&w->aux, on_shutdown_grace, (uint64_t)(p->cfg.shutdown_grace_s * 1000), 0);
  } else if (!w->exited) {
    kill_worker(w, MK_ECANCELED);
  }
}

void mk_worker_pool_close(mk_worker_pool *p, void (*close_cb)(void *data), void *data) {
  if (p->closing) return;
  p->closing = true;
  p->close_cb = close_cb;
  p->close_data = data;
  mk_job *j;
  while ((j = p->pending.head) != NULL) {
    jobq_remove(&p->pending, j);
    complete_job(p, j, MK_ECANCELED, "canceled", "cancelled: the engine is shutting down");
  }
  uv_close((uv_handle_t *)&p->memwatch, on_memwatch_closed);
  for (int i = 0; i < p->nworkers; i++) stop_worker(&p->workers[i]);
  maybe_finish(p);
}
