/* session_stub.c — the engine session facade for the fuzz build of the
 * language server (tests/suites/45-fuzz.sh): the fuzzer drives framing,
 * JSON-RPC and the LSP handlers, never Python workers. Every session
 * refuses to start, so the engine backend takes its error paths. */
#include "mk_session.h"

#include <string.h>

void mk_session_config_defaults(mk_session_config *c) { memset(c, 0, sizeof *c); }

int mk_session_new(uv_loop_t *loop, const mk_session_config *cfg, mk_session **out, mk_errmsg *err) {
  (void)loop, (void)cfg;
  *out = NULL;
  return mk_errf(err, MK_EUNSUPPORTED, "no engine in the fuzz build");
}

int mk_session_set_config(mk_session *s, const mk_session_config *cfg, mk_errmsg *err) {
  (void)s, (void)cfg;
  return mk_errf(err, MK_EUNSUPPORTED, "no engine in the fuzz build");
}

void mk_session_close(mk_session *s, void (*done)(void *data), void *data) {
  (void)s;
  if (done) done(data);
}

int mk_session_analyze(mk_session *s, const char *path, const char *text, mk_session_cb cb,
                       void *data, mk_errmsg *err) {
  (void)s, (void)path, (void)text, (void)cb, (void)data;
  return mk_errf(err, MK_EUNSUPPORTED, "no engine in the fuzz build");
}

int mk_session_evolve(mk_session *s, const char *path, int subkernel, mk_session_progress_cb progress,
                      mk_session_cb done, void *data, int *job, mk_errmsg *err) {
  (void)s, (void)path, (void)subkernel, (void)progress, (void)done, (void)data, (void)job;
  return mk_errf(err, MK_EUNSUPPORTED, "no engine in the fuzz build");
}

int mk_session_cancel(mk_session *s, int job) {
  (void)s, (void)job;
  return MK_ENOENT;
}

const mk_session_module *mk_session_get(mk_session *s, const char *path) {
  (void)s, (void)path;
  return NULL;
}

int mk_session_swap(mk_session *s, const char *path, int subkernel, int variant, mk_errmsg *err) {
  (void)s, (void)path, (void)subkernel, (void)variant;
  return mk_errf(err, MK_EUNSUPPORTED, "no engine in the fuzz build");
}

int mk_session_compose(mk_session *s, const char *path, const char *out_path, char **written,
                       mk_errmsg *err) {
  (void)s, (void)path, (void)out_path, (void)written;
  return mk_errf(err, MK_EUNSUPPORTED, "no engine in the fuzz build");
}

const char *mk_session_device(mk_session *s) {
  (void)s;
  return "cpu";
}

void mk_session_forget(mk_session *s, const char *path) { (void)s, (void)path; }

/* No engine, so no edit files: every document gets the static checks. */
bool mk_session_is_edit_path(const char *path) {
  (void)path;
  return false;
}

int mk_session_edit_variant(mk_session *s, const char *path, int subkernel, int variant,
                            char **file_path, mk_errmsg *err) {
  (void)s, (void)path, (void)subkernel, (void)variant;
  *file_path = NULL;
  return mk_errf(err, MK_EUNSUPPORTED, "no engine in the fuzz build");
}

int mk_session_edit_target(mk_session *s, const char *edit_path, char **module_path,
                           char **subkernel_name, mk_errmsg *err) {
  (void)s, (void)edit_path;
  if (module_path) *module_path = NULL;
  if (subkernel_name) *subkernel_name = NULL;
  return mk_errf(err, MK_EUNSUPPORTED, "no engine in the fuzz build");
}

int mk_session_verify_edit(mk_session *s, const char *edit_path, const char *text,
                           mk_session_edit_cb cb, void *data, int *job, mk_errmsg *err) {
  (void)s, (void)edit_path, (void)text, (void)cb, (void)data;
  if (job) *job = 0;
  return mk_errf(err, MK_EUNSUPPORTED, "no engine in the fuzz build");
}
