/* verify_cuda.h — private to engine/verify: CUDA C++ candidates are compiled
 * by the engine (engine/backend, NVRTC) before a worker sees them. */
#ifndef MK_VERIFY_CUDA_H
#define MK_VERIFY_CUDA_H

#include "mk_backend.h"

#include <cjson/cJSON.h>

typedef struct verify_cuda {
  mk_backend *backend; /* opened on the first CUDA candidate */
  bool tried;
  char why[MK_ERRMSG_MAX]; /* why there is none */
} verify_cuda;

/* For a CUDA candidate: compiles it (answered from `cache` when known) and
 * adds "cubin" (base64) to the job's candidate object `cand`. Returns 0 and
 * *report NULL when the worker should verify it; 0 and *report (malloc'd
 * JSON text, a compile_error verdict) when the compile failed or no NVRTC
 * is available, so no worker is needed; MK_ENOMEM otherwise. */
int verify_cuda_prepare(verify_cuda *vc, mk_cache *cache, const char *source, cJSON *cand,
                        char **report);
void verify_cuda_close(verify_cuda *vc);

#endif
