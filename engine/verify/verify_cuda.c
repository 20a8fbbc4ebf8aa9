/* verify_cuda.c — the engine's compile step for CUDA C++ candidates.
 *
 * The engine compiles (NVRTC through engine/backend, cubins cached by
 * content in the SQLite cache) and hands the worker the cubin: a compile
 * error becomes the verdict at once, with NVRTC's diagnostics on the
 * candidate's lines, and no worker, GPU or Python is involved in it. */
#include "verify_cuda.h"

#include "mk_buf.h"

#include <stdlib.h>
#include <string.h>

static char *verdict_text(cJSON *o) {
  char *t = o ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  return t;
}

/* compile_error without NVRTC: the reason names what is missing. */
static char *unavailable_report(const char *why) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL) return NULL;
  mk_buf r;
  mk_buf_init(&r, MK_ERRMSG_MAX + 128);
  mk_buf_printf(&r, "CUDA C++ candidates need NVRTC to compile: %s", why);
  cJSON_AddStringToObject(o, "status", "compile_error");
  cJSON_AddStringToObject(o, "reason", mk_buf_cstr(&r));
  cJSON_AddNullToObject(o, "line");
  cJSON_AddStringToObject(o, "backend", "cuda");
  mk_buf_free(&r);
  return verdict_text(o);
}

static void ensure_backend(verify_cuda *vc) {
  if (vc->tried) return;
  vc->tried = true;
  mk_errmsg err = {{0}};
  if (mk_backend_open(NULL, &vc->backend, &err)) mk_strlcpy(vc->why, err.text, sizeof vc->why);
}

int verify_cuda_prepare(verify_cuda *vc, mk_cache *cache, const char *source, cJSON *cand,
                        char **report) {
  *report = NULL;
  const char *src = NULL;
  size_t len = 0;
  int first = 0;
  mk_errmsg err = {{0}};
  int rc = mk_backend_candidate_source(source, &src, &len, &first, &err);
  if (rc == MK_ENOENT) return 0; /* not a CUDA candidate */
  if (rc) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "compile_error");
    cJSON_AddStringToObject(o, "reason", err.text);
    cJSON_AddNullToObject(o, "line");
    *report = verdict_text(o);
    return *report ? 0 : MK_ENOMEM;
  }
  ensure_backend(vc);
  if (vc->backend == NULL) {
    *report = unavailable_report(vc->why);
    return *report ? 0 : MK_ENOMEM;
  }
  char *cuda = mk_strndup(src, len);
  if (cuda == NULL) return MK_ENOMEM;
  mk_backend_result r;
  rc = mk_backend_compile_cached(vc->backend, cache, cuda, "candidate.cu", NULL, first - 1, &r, &err);
  free(cuda);
  if (rc) {
    *report = unavailable_report(err.text);
    return *report ? 0 : MK_ENOMEM;
  }
  if (!r.ok) {
    *report = verdict_text(mk_backend_report(&r));
    mk_backend_result_free(&r);
    return *report ? 0 : MK_ENOMEM;
  }
  mk_buf b64;
  mk_buf_init(&b64, 0);
  mk_backend_base64_encode(r.image, r.image_len, &b64);
  rc = b64.err ? MK_ENOMEM : 0;
  if (rc == 0 && !cJSON_AddStringToObject(cand, "cubin", mk_buf_cstr(&b64))) rc = MK_ENOMEM;
  if (rc == 0) cJSON_AddStringToObject(cand, "nvrtc", mk_backend_version(vc->backend));
  mk_buf_free(&b64);
  mk_backend_result_free(&r);
  return rc;
}

void verify_cuda_close(verify_cuda *vc) {
  mk_backend_close(vc->backend);
  *vc = (verify_cuda){0};
}
