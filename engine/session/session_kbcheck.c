/* session_kbcheck.c — mk_session_kernelbench_check: hands a problem and an
 * emitted ModelNew to a worker's `kernelbench_check` method
 * (engine/worker/python/mkworker/kbcheck.py), which runs KernelBench's own
 * evaluation in a fresh interpreter. The session only routes the request:
 * a GPU worker when there is one (KernelBench asserts CUDA), the CPU worker
 * otherwise, with a request limit above the evaluation's own so that the
 * worker reports a hang itself. Judging the answer is the caller's. */
#include "mk_worker.h"
#include "session_internal.h"

#include <stdlib.h>

typedef struct kbcheck_req {
  mk_session_json_cb cb;
  void *data;
} kbcheck_req;

static void on_answer(void *data, mk_worker_result *res) {
  kbcheck_req *req = data;
  if (res->status == 0) req->cb(req->data, 0, res->result, NULL);
  else req->cb(req->data, res->status, NULL, res->message && *res->message ? res->message
                                                                           : mk_strerror(res->status));
  free(req);
}

void mk_session_kbcheck_opts_defaults(mk_session_kbcheck_opts *o) {
  *o = (mk_session_kbcheck_opts){.trials = 5, .perf_trials = 100, .measure = true, .seed = 42,
                                 .timeout_s = 900};
}

/* Ownership: the params object goes to the pool; the callback's result is
 * the pool's (borrowed for the call). */
int mk_session_kernelbench_check(mk_session *s, const char *ref_path, const char *new_path,
                                 const mk_session_kbcheck_opts *opts, mk_session_json_cb cb,
                                 void *data, mk_errmsg *err) {
  mk_worker_pool *pool = session_runtime_pool(s);
  if (pool == NULL || cb == NULL || ref_path == NULL || new_path == NULL)
    return mk_errf(err, MK_EINVAL, "kernelbench check: no session, paths or callback");
  if (opts->trials < 1 || opts->perf_trials < 1 || !(opts->timeout_s > 0))
    return mk_errf(err, MK_EINVAL, "kernelbench check: trials, timing trials and the time limit "
                   "must be positive");
  double timeout = opts->timeout_s;
  cJSON *params = cJSON_CreateObject();
  cJSON_AddStringToObject(params, "ref", ref_path);
  cJSON_AddStringToObject(params, "new", new_path);
  if (opts->root) cJSON_AddStringToObject(params, "root", opts->root);
  cJSON_AddNumberToObject(params, "trials", opts->trials);
  cJSON_AddNumberToObject(params, "perf_trials", opts->perf_trials);
  cJSON_AddBoolToObject(params, "measure", opts->measure);
  cJSON_AddNumberToObject(params, "seed", (double)(opts->seed % 2147483647ULL));
  cJSON_AddNumberToObject(params, "timeout_s", timeout);
  kbcheck_req *req = malloc(sizeof *req);
  if (req == NULL) {
    cJSON_Delete(params);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  *req = (kbcheck_req){cb, data};
  mk_worker_request wr = {.method = "kernelbench_check", .params = params,
                          .kind = session_runtime_timed(s) ? MK_WORKER_GPU : MK_WORKER_CPU,
                          .timeout_s = timeout + 60, .done = on_answer, .data = req};
  int rc = mk_worker_submit(pool, &wr, NULL, err);
  if (rc) free(req);
  return rc;
}
