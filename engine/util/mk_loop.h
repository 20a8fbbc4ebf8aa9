/* mk_loop.h — waiting on a libuv loop for one result.
 *
 * The synchronous front ends (the CLI, the blocking LLM call) submit an
 * asynchronous job and then wait for its callback. The obvious
 * `while (!done) uv_run(loop, UV_RUN_ONCE)` is wrong on libuv < 1.45 (the
 * Debian 12 and Ubuntu 22.04 packages): one UV_RUN_ONCE iteration runs the
 * timers that are due first and then blocks in poll, so a callback fired by
 * a timer (the verifier delivers cache hits that way) sets `done` and the
 * caller still sleeps until some unrelated I/O arrives — forever, when the
 * only other handles are idle worker pipes. mk_loop_run_until checks the
 * flag right before every poll and stops the loop there. */
#ifndef MK_LOOP_H
#define MK_LOOP_H

#include <stdbool.h>
#include <uv.h>

/* Runs `loop` until *done is true. Returns 0 once it is, MK_EIO when the
 * loop ran out of work first (nothing could ever set the flag), MK_ENOMEM
 * when libuv could not set up the check. Must not be called from inside a
 * callback of the same loop (libuv loops are not re-entrant). */
int mk_loop_run_until(uv_loop_t *loop, const bool *done);

#endif
