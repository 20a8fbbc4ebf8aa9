/* session_check.c — the session's one-shot doors: mk_session_capture (a
 * capture and nothing more, for `mkevolve analyze`) and mk_session_check
 * (a ModelNew against its problem, for `mkevolve check` and the editors).
 * They keep no module state: the caller gets the verifier's answer. Going
 * through the session means one runtime (worker pool, cache, verifier) and
 * one set of verification settings for every door. */
#include "session_internal.h"

#include <stdlib.h>

typedef struct check_req {
  mk_session_check_cb cb;
  void *data;
} check_req;

static void on_checked(void *data, const mk_verify_result *r) {
  check_req *req = data;
  req->cb(req->data, r, mk_verify_status_name(r->status));
  free(req);
}

int mk_session_capture(mk_session *s, const char *path, const char *class_name, int batch,
                       mk_session_capture_cb cb, void *data, mk_errmsg *err) {
  mk_verify *v = session_runtime_verify(s);
  if (v == NULL || s->closing) return mk_errf(err, MK_ECANCELED, "the session is closing");
  double limit = s->cfg.capture_timeout_s > 0 ? s->cfg.capture_timeout_s : s->cfg.job_timeout_s;
  return mk_verify_submit_capture(v, path, class_name, batch, limit, cb, data, NULL, err);
}

/* Ownership: req is freed by on_checked (or here when the submit fails). */
int mk_session_check(mk_session *s, const char *new_path, const char *new_class,
                     const char *ref_path, const char *ref_class, int batch,
                     mk_session_check_cb cb, void *data, mk_errmsg *err) {
  mk_verify *v = session_runtime_verify(s);
  if (v == NULL || s->closing) return mk_errf(err, MK_ECANCELED, "the session is closing");
  if (cb == NULL) return mk_errf(err, MK_EINVAL, "mk_session_check needs a callback");
  check_req *req = malloc(sizeof *req);
  if (req == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  *req = (check_req){cb, data};
  mk_verify_options o;
  session_runtime_check_options(s, batch, &o);
  int rc = mk_verify_submit_composition(v, new_path, new_class, ref_path, ref_class, &o, on_checked,
                                        req, NULL, err);
  if (rc) free(req);
  return rc;
}
