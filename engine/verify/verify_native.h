/* verify_native.h — private to engine/verify: which subkernel jobs go to the
 * native worker (engine/worker/native, docs/native-worker.md) and the state
 * it runs on.
 *
 * A job goes there when the verifier has a native pool
 * (mk_verify_set_native_pool), the option allows it (mk_verify_options.native),
 * it runs on a GPU, its candidate carries a launch plan (MK_CUDA_PLAN: the
 * builtin CUDA generator's) and every node of the graph has an ATen form
 * (mk_export_graph_aten). Everything else goes to the Python worker, as do
 * jobs the native worker refuses (`unsupported`, `bad_request`): one reply
 * per job either way. The model's state and each trial's inputs are written
 * once per (graph, seed, batch, trials) by the Python worker's write_state,
 * into a folder of this verifier's (removed when it closes). */
#ifndef MK_VERIFY_NATIVE_H
#define MK_VERIFY_NATIVE_H

#include "mk_err.h"
#include "mk_ir.h"
#include "mk_worker.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct verify_native {
  mk_worker_pool *pool; /* borrowed; NULL: no native worker */
  char root[256];       /* this verifier's state folder, "" until the first is needed */
  uint64_t routed, fallbacks, states;
} verify_native;

/* The most bytes a state may take on disk (model state plus every trial's
 * inputs): a larger one stays with the Python worker, which draws in memory. */
#define VERIFY_NATIVE_STATE_MAX ((int64_t)2 << 30)

/* The graph's ATen forms (caller-owned) when the job may go to the native
 * worker; NULL otherwise (`why` then says why, for the logs). */
cJSON *verify_native_route(const verify_native *vn, bool allowed, bool gpu, const mk_graph *g, int trials,
                           const char *source, char *why, size_t why_len);
/* Bytes of the state write_state would write for g (captured shapes). */
int64_t verify_native_state_bytes(const mk_graph *g, int trials);

/* The folder of the state for (graph, seed, batch, trials) into `dir`
 * (created with the verifier's root); MK_EIO when no folder can be made. */
int verify_native_state_dir(verify_native *vn, const cJSON *graph, long long seed, int batch, int trials,
                            char *dir, size_t len);
/* True when `dir` holds a complete state (written, then renamed into place). */
bool verify_native_state_ready(const char *dir, int trials);
/* Adds state_file and inputs_files (dir/state.mkt, dir/inputs_<t>.mkt) to params. */
void verify_native_add_state(cJSON *params, const char *dir, int trials);
/* Moves a state written under `tmp` into `dir` (another job's state that
 * got there first is kept; tmp is then removed). */
void verify_native_state_commit(const char *tmp, const char *dir);
/* Removes the verifier's state folder. */
void verify_native_close(verify_native *vn);

#endif
