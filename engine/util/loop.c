/* loop.c — see mk_loop.h for why this is not a UV_RUN_ONCE loop. */
#include "mk_loop.h"

#include "mk_err.h"

/* Runs before every poll: once the flag is set, stop, so that poll returns
 * at once instead of waiting for I/O. */
static void on_prepare(uv_prepare_t *p) {
  const bool *done = p->data;
  if (*done) uv_stop(p->loop);
}

int mk_loop_run_until(uv_loop_t *loop, const bool *done) {
  if (*done) return 0;
  uv_prepare_t check;
  if (uv_prepare_init(loop, &check) != 0) return MK_ENOMEM;
  check.data = (void *)done;
  uv_prepare_start(&check, on_prepare);
  /* Unreferenced: the check alone must not keep a drained loop alive. */
  uv_unref((uv_handle_t *)&check);
  while (!*done) {
    if (uv_run(loop, UV_RUN_DEFAULT) == 0 && !*done) break;
  }
  uv_close((uv_handle_t *)&check, NULL);
  /* The close completes in the next iteration; the handle lives on this
   * stack, so run that iteration now (it does not block). */
  uv_run(loop, UV_RUN_NOWAIT);
  return *done ? 0 : MK_EIO;
}
