/* mk_worker.h — supervised runtime worker processes on a libuv loop.
 *
 * A pool runs one CPU worker (TRITON_INTERPRET=1, no GPU visible) and one
 * worker per visible GPU (CUDA_VISIBLE_DEVICES=<that GPU>), each a
 * `python -m mkworker` process speaking JSON lines (docs/protocol.md).
 * Workers start lazily, when there is a job for them (one more worker of a
 * kind for each job of that kind waiting), and handle one request at a
 * time, so no two jobs ever run on one GPU at once; jobs wait in a FIFO
 * queue and go to the least-loaded idle worker of the kind they ask for
 * (the one that has been busy least so far; mk_worker_pool_load).
 *
 * Supervision (docs/runtime.md): a `hello` handshake before any job; a
 * per-request time limit (the worker is killed, the job fails with
 * MK_ETIMEDOUT, the worker restarts); a dead worker fails its job with
 * MK_ECRASHED and the tail of its stderr, then restarts with backoff; a
 * worker that dies before finishing its handshake too many times in a row
 * is given up with a clear error. Response lines are bounded; stdout lines
 * that are not protocol messages are kept with stderr and otherwise ignored.
 *
 * Callback contract: mk_worker_submit either returns an error (and never
 * calls back) or returns 0 and then calls `done` exactly once, always from
 * the loop (never from inside submit, cancel or close), even when the job
 * is cancelled or the pool closes. Workers are process-group leaders; a
 * kill takes their whole process tree (compilers, and anything that left
 * the group) with them. Workers get a scrubbed environment: an allow-list
 * (mk_worker_env_allowed), never a key or a token.
 *
 * Ownership: the pool is created by mk_worker_pool_new and freed by the
 * pool itself after mk_worker_pool_close's callback; params handed to
 * submit become the pool's. */
#ifndef MK_WORKER_H
#define MK_WORKER_H

#include "mk_err.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define MK_WORKER_PROTOCOL 1
#define MK_WORKER_MAX_GPUS 64
#define MK_WORKER_STDERR_KEEP (64 * 1024)

typedef enum mk_worker_kind {
  MK_WORKER_ANY = 0, /* any worker; the CPU one is started if none runs */
  MK_WORKER_CPU = 1,
  MK_WORKER_GPU = 2,
} mk_worker_kind;

typedef struct mk_worker_config {
  /* Python interpreter. NULL: $MKEVOLVE_PYTHON, else MK_DEFAULT_PYTHON. */
  const char *python;
  /* Prepended to PYTHONPATH. NULL: MK_WORKER_PYTHONPATH. */
  const char *pythonpath;
  /* NULL-terminated command run instead of `python -m mkworker` (tests use
   * fake workers). The environment is prepared the same way. */
  const char *const *argv;
  /* GPU workers: -1 detects ($CUDA_VISIBLE_DEVICES, else
   * /proc/driver/nvidia/gpus), 0 runs none, N runs N: the first N detected,
   * and beyond those stand-in ordinals ("N-1"...) that only fake workers
   * (argv, tests) can use. Callers that start real workers ask for at
   * most what mk_worker_detect_gpus finds (mk_cli's --gpus does). */
  int gpus;
  double hello_timeout_s;   /* handshake limit; default 120 */
  double request_timeout_s; /* default per-request limit; default 600 */
  size_t max_line;          /* longest accepted response line; default 64 MiB */
  int max_start_failures;   /* deaths before a completed handshake, in a row; default 3 */
  double backoff_ms;        /* first restart delay after a failed start; default 250 */
  double backoff_max_ms;    /* default 8000 */
  double shutdown_grace_s;  /* wait after `shutdown` before SIGKILL; default 2 */
  /* Host memory one worker and everything it started may keep resident, in
   * GiB: 0 takes $MKEVOLVE_WORKER_MEMORY_GB, else 3/4 of the machine's
   * memory shared by the pool's workers (at least 1 GiB); < 0: no limit. A
   * worker over it is killed and its job fails with kind "oom" and "exceeded
   * the memory limit of N GiB" (docs/runtime.md says why a watchdog on the
   * resident size and not RLIMIT_AS/RLIMIT_DATA). */
  double memory_limit_gb;
} mk_worker_config;

/* Fills every field with its default (python NULL, gpus -1, ...). */
void mk_worker_config_init(mk_worker_config *cfg);

/* What a worker said in its handshake; strings point into `hello`. */
typedef struct mk_worker_info {
  int index;             /* position in the pool: 0 is the CPU worker */
  mk_worker_kind kind;   /* MK_WORKER_CPU or MK_WORKER_GPU */
  const char *visible;   /* CUDA_VISIBLE_DEVICES given to it ("" for CPU) */
  const char *torch, *triton, *python, *device, *cuda; /* "" when unknown */
  const cJSON *hello;    /* the whole hello result */
} mk_worker_info;

typedef struct mk_worker_result {
  /* 0, or MK_EWORKER (the worker answered with an error), MK_ETIMEDOUT,
   * MK_ECRASHED, MK_ECANCELED, MK_EPROTO (bad or oversized reply), or
   * MK_ENOENT (no worker of the requested kind could run). */
  int status;
  /* Error kind: the worker's ("python_error", "syntax_error", "oom", ...)
   * or the supervisor's ("timeout", "crashed", "canceled", "protocol",
   * "unavailable"); NULL when status is 0. */
  const char *kind;
  const char *message;   /* one readable paragraph; "" when status is 0 */
  int line;              /* line in the user's file, 0 when unknown */
  cJSON *response;       /* the parsed response line, or NULL; the callback
                          * may detach items from it (freed afterwards) */
  cJSON *result;         /* response["result"] when status is 0 */
  const cJSON *error;    /* response["error"] for MK_EWORKER */
  const mk_worker_info *worker; /* who ran it; NULL if none did */
  const char *gpu;       /* CUDA_VISIBLE_DEVICES of the GPU worker that ran it, "" otherwise */
  double elapsed_ms;     /* from dispatch to answer (0 if never dispatched) */
} mk_worker_result;

typedef void (*mk_worker_done_cb)(void *data, mk_worker_result *res);
typedef void (*mk_worker_progress_cb)(void *data, const char *message, double fraction);

typedef struct mk_worker_request {
  const char *method;           /* copied */
  cJSON *params;                /* object or NULL ({}); owned by the pool after submit */
  mk_worker_kind kind;
  double timeout_s;             /* 0: the pool's request_timeout_s */
  mk_worker_done_cb done;       /* required */
  mk_worker_progress_cb progress; /* optional; called from the loop */
  void *data;
} mk_worker_request;

typedef struct mk_worker_pool mk_worker_pool;

/* Creates a pool on `loop`; no process starts until a job needs one.
 * Ignores SIGPIPE process-wide when it is at its default (a dead worker's
 * pipe must not kill the engine). *out is freed by the pool after close. */
int mk_worker_pool_new(uv_loop_t *loop, const mk_worker_config *cfg, mk_worker_pool **out,
                       mk_errmsg *err);

/* Queues a request. On success *job_out (may be NULL) gets an id for
 * mk_worker_cancel and `done` will be called exactly once. Fails (no
 * callback; params freed) with MK_EINVAL, MK_ENOENT when the pool has no
 * worker of that kind (no GPU), MK_ECRASHED when those workers were given
 * up (err says why), MK_ECANCELED when the pool is closing. */
int mk_worker_submit(mk_worker_pool *p, mk_worker_request *req, uint64_t *job_out, mk_errmsg *err);

/* Cancels a queued or running job: `done` comes with MK_ECANCELED. A
 * running job's worker is killed and restarted (a cancelled job may be a
 * hang). Returns MK_ENOENT when the job already finished. */
int mk_worker_cancel(mk_worker_pool *p, uint64_t job);

/* Starts the workers of `kind` now (ahead of the first job). */
int mk_worker_pool_warm(mk_worker_pool *p, mk_worker_kind kind);

/* Number of workers (1 + GPUs) and how many are GPU workers. */
int mk_worker_pool_size(const mk_worker_pool *p);
int mk_worker_pool_gpus(const mk_worker_pool *p);

/* Handshake info of worker `index`, NULL until its first hello. Valid until
 * the worker restarts (copy what you keep). */
const mk_worker_info *mk_worker_pool_info(const mk_worker_pool *p, int index);
/* Handshake info of some worker of `kind` that has finished one, or NULL. */
const mk_worker_info *mk_worker_pool_info_of(const mk_worker_pool *p, mk_worker_kind kind);

/* How the first worker of `kind` (CPU or GPU, not ANY) is started: the
 * interpreter, PYTHONPATH, a replacement command, CUDA_VISIBLE_DEVICES, as
 * text appended to `out` (an mk_buf *). Pools with equal identities start
 * the same worker, so a handshake remembered for one (engine/verify's
 * env memo) may stand for the other's. MK_ENOENT: no worker of that kind. */
struct mk_buf;
int mk_worker_pool_identity(const mk_worker_pool *p, mk_worker_kind kind, struct mk_buf *out);

/* Appends the last `nlines` lines of worker `index`'s stderr to `out`
 * (an mk_buf *). */
struct mk_buf;
int mk_worker_pool_stderr_tail(const mk_worker_pool *p, int index, int nlines, struct mk_buf *out);

/* What worker `index` has done so far, across restarts: jobs that ended
 * after reaching it, and the seconds they ran. MK_EINVAL for a bad index. */
typedef struct mk_worker_load {
  uint64_t jobs;
  double busy_s;
} mk_worker_load;
int mk_worker_pool_load(const mk_worker_pool *p, int index, mk_worker_load *out);

/* Counters for tests and status displays. */
typedef struct mk_worker_stats {
  uint64_t spawns, crashes, timeouts, protocol_errors, garbage_lines, completed;
  uint64_t memory_kills; /* workers killed for going over the memory limit */
} mk_worker_stats;

/* The memory limit the pool enforces per worker, in bytes (0: none). */
uint64_t mk_worker_pool_memory_limit(const mk_worker_pool *p);
void mk_worker_pool_stats(const mk_worker_pool *p, mk_worker_stats *out);

/* Gives given-up workers a new chance (after the user fixed the Python). */
void mk_worker_pool_retry(mk_worker_pool *p);

/* Fails every job with MK_ECANCELED, asks idle workers to shut down (then
 * kills them after the grace period), closes every handle and finally
 * calls close_cb (may be NULL) and frees the pool. Call once. */
void mk_worker_pool_close(mk_worker_pool *p, void (*close_cb)(void *data), void *data);

/* GPUs this process may use: $CUDA_VISIBLE_DEVICES entries when set, else
 * the count of /proc/driver/nvidia/gpus. Writes at most `max` ordinal
 * strings (the CUDA_VISIBLE_DEVICES value for each worker) into `ids`,
 * each of size 64. Returns the count. */
int mk_worker_detect_gpus(char (*ids)[64], int max);

/* Whether the engine's variable `name` is passed to workers: an allow-list
 * (PATH, HOME, locale, temporary directories, LD_LIBRARY_PATH, CUDA_*,
 * TRITON_*, TORCH*, MKEVOLVE_*, ...) plus the names or `PREFIX*` patterns
 * listed in $MKEVOLVE_WORKER_ENV (comma-separated); a name that looks like
 * a credential (KEY, TOKEN, SECRET, PASSWORD, ...) never is. */
bool mk_worker_env_allowed(const char *name, size_t len);

/* Process ids of every live worker (its guard) of every pool in this
 * process, for a signal handler: async-signal-safe (a fixed array, no
 * allocation). Writes at most `max`; returns the count. */
int mk_worker_live_pids(int *out, int max);

/* Name of a kind: "any", "cpu", "gpu". */
const char *mk_worker_kind_name(mk_worker_kind k);

#endif
