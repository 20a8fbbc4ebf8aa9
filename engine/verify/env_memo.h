/* env_memo.h — worker handshakes remembered across runs (internal to
 * engine/verify).
 *
 * Every cached verdict is keyed by the worker's environment (torch, triton,
 * Python, device, CUDA, the worker's own sources), which the engine learns
 * from the worker's `hello`. Starting a worker to learn it costs seconds
 * (importing torch, initialising CUDA), so a repeated `mkevolve check`
 * would cost a worker start instead of a lookup. The memo keeps the last
 * hello per pool identity (mk_worker_pool_identity) in the cache, with the
 * size and modification time of every file the hello names in `env_files`
 * (the interpreter, torch/version.py, triton/__init__.py, the worker's
 * sources) and, for GPU workers, the NVIDIA driver's description of the
 * driver and the GPUs (/proc/driver/nvidia). A remembered hello is trusted
 * only while all of those are unchanged; a miss falls back to a real
 * handshake, which then refreshes the memo.
 *
 * Ownership: load returns a new cJSON the caller deletes. */
#ifndef MK_ENV_MEMO_H
#define MK_ENV_MEMO_H

#include "mk_cache.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

/* Remembers `hello` for `identity`; gpu: also stamps the NVIDIA driver.
 * A hello without env_files (an older or fake worker) is not remembered:
 * nothing could tell when it goes stale. */
int mk_env_memo_store(mk_cache *c, const char *identity, bool gpu, const cJSON *hello);

/* The hello remembered for `identity` when every stamp still matches, else
 * NULL (never remembered, a file changed or vanished, another driver). */
cJSON *mk_env_memo_load(mk_cache *c, const char *identity, bool gpu);

#endif
