/* mk_backend.h — the CUDA C++ backend: compiles CUDA C++ candidates with
 * NVRTC, caches the cubin by content, and turns NVRTC's log into
 * diagnostics on the candidate's own lines.
 *
 * NVRTC is loaded at run time (dlopen), never linked: the engine builds and
 * runs on machines without the CUDA toolkit, and then the backend reports
 * itself unavailable with the reason (mk_backend_open fails with
 * MK_EUNSUPPORTED). Where it looks, in order (docs/backend.md):
 *   1. $MK_NVRTC_LIBRARY, when set (only there: a wrong path is an error,
 *      not a silent fall-back);
 *   2. the paths CMake found at configure time (FindCUDAToolkit's library
 *      directory, the nvidia-cuda-nvrtc wheel in the project's .venv);
 *   3. the sonames libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so.
 *
 * A candidate (docs/candidates.md) carries its CUDA C++ in a module-level
 * raw string `MK_CUDA_SOURCE = r"""..."""`; mk_backend_candidate_source
 * finds it and the line it starts on, so NVRTC's line numbers map back to
 * the candidate module the editor shows.
 *
 * Cache: cubins are stored in the SQLite cache (mk_cache.h, kind
 * "cuda_cubin") under a key over the CUDA source, the NVRTC options and the
 * NVRTC version; failed compiles are stored too (their log), since a
 * compile is a pure function of those three.
 *
 * Threads: after mk_backend_open, mk_backend_compile may be called from
 * several threads at once (NVRTC programs are independent); the cache
 * functions follow mk_cache's rule (one handle per thread).
 *
 * Ownership: mk_backend_open gives a handle the caller closes; results are
 * caller-owned (mk_backend_result_free); mk_backend_report returns a cJSON
 * object the caller deletes. */
#ifndef MK_BACKEND_H
#define MK_BACKEND_H

#include "mk_cache.h"
#include "mk_err.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The one default target: H200 / H100 (compute capability 9.0). */
#define MK_BACKEND_DEFAULT_ARCH "sm_90"
#define MK_BACKEND_MAX_OPTIONS 16
#define MK_BACKEND_MSG_MAX 512

typedef struct mk_backend mk_backend;

/* Loads NVRTC. `library` NULL: the search order above. MK_EUNSUPPORTED with
 * the reason (every place tried) when there is none. */
int mk_backend_open(const char *library, mk_backend **out, mk_errmsg *err);
void mk_backend_close(mk_backend *b);
/* The file NVRTC was loaded from; its version ("13.0"). */
const char *mk_backend_library(const mk_backend *b);
const char *mk_backend_version(const mk_backend *b);

typedef struct mk_backend_options {
  const char *arch;                            /* NULL: MK_BACKEND_DEFAULT_ARCH; "sm_XX" -> cubin */
  const char *extra[MK_BACKEND_MAX_OPTIONS];   /* more NVRTC options, NULL-terminated */
} mk_backend_options;

typedef enum mk_backend_severity {
  MK_BACKEND_ERROR,
  MK_BACKEND_WARNING,
  MK_BACKEND_NOTE,
} mk_backend_severity;

typedef struct mk_backend_diag {
  int line;   /* 1-based, in the candidate module (after line mapping); 0 unknown */
  int column; /* 1-based, 0 unknown */
  mk_backend_severity severity;
  char message[MK_BACKEND_MSG_MAX];
} mk_backend_diag;

typedef struct mk_backend_result {
  bool ok;                /* compiled: `image` holds the cubin */
  uint8_t *image;
  size_t image_len;
  char *log;              /* NVRTC's log as it printed it ("" when empty) */
  mk_backend_diag *diags; /* parsed from the log, errors first in log order */
  int ndiags;
  bool cached;            /* came from the cache */
  double compile_ms;      /* NVRTC time (0 when cached) */
  char key[65];           /* the cache key of this compile */
} mk_backend_result;

void mk_backend_result_free(mk_backend_result *r);

/* Compiles `cuda_source` (program name `name`, e.g. "candidate.cu"). Line
 * numbers in the diagnostics are shifted by `line_offset` (the candidate
 * line of the CUDA source's first line minus one). A failed compile is a
 * result (ok false, diagnostics); the return value is an error only when
 * there is no result (MK_ENOMEM, MK_EINVAL, NVRTC refusing to run). */
int mk_backend_compile(const mk_backend *b, const char *cuda_source, const char *name,
                       const mk_backend_options *opt, int line_offset, mk_backend_result *out,
                       mk_errmsg *err);

/* The cache key of a compile: source, options (arch included) and NVRTC version. */
int mk_backend_cache_key(const mk_backend *b, const char *cuda_source,
                         const mk_backend_options *opt, char hex[65]);
/* As mk_backend_compile, answered from `cache` when it holds the key and
 * stored there afterwards (cache may be NULL). */
int mk_backend_compile_cached(const mk_backend *b, mk_cache *cache, const char *cuda_source,
                              const char *name, const mk_backend_options *opt, int line_offset,
                              mk_backend_result *out, mk_errmsg *err);

/* ---- candidate modules ---------------------------------------------------- */

/* Finds `MK_CUDA_SOURCE = r"""...` at the start of a line of a candidate
 * module. 0: *src / *len give the CUDA text (inside the module text, not
 * copied) and *first_line the module line of its first line. MK_ENOENT when
 * the module has none (a Triton or PyTorch candidate); MK_EPARSE when the
 * string is not a closed raw triple-quoted string. */
int mk_backend_candidate_source(const char *module_text, const char **src, size_t *len,
                                int *first_line, mk_errmsg *err);
/* True if the module text is a CUDA C++ candidate. */
bool mk_backend_is_cuda_candidate(const char *module_text);

/* One entry of a candidate's `MK_CUDA_KERNELS = {"name": "sig", ...}`. */
#define MK_BACKEND_MAX_KERNELS 64
typedef struct mk_backend_kernel {
  char name[128];
  char sig[64]; /* one letter per parameter: f float32 tensor, b bool tensor, q int64 */
} mk_backend_kernel;

/* Reads `MK_CUDA_KERNELS = {...}` (at the start of a line) into out[0..max):
 * *n entries. MK_EPARSE with the reason when it is missing, not closed,
 * empty, longer than max, or holds a name that is not an identifier or a
 * signature with letters other than f, b, q. */
int mk_backend_candidate_kernels(const char *module_text, mk_backend_kernel *out, int max, int *n,
                                 mk_errmsg *err);

/* Checks a module against the CUDA candidate contract without compiling it
 * (docs/candidates.md): `MK_BACKEND = "cuda"`, a closed `MK_CUDA_SOURCE` raw
 * string without #include, a readable MK_CUDA_KERNELS whose every kernel is
 * an `extern "C" __global__` function of the source (extern "C" in its own
 * declaration: the composer drops it to place the kernels in a namespace,
 * which an `extern "C" { }` block would not survive) with one parameter per
 * signature letter of the matching kind (f `float *`, b `bool *`, q an
 * integer), and a run that launches through `_mk_cuda.launch` only kernels
 * the table lists. 0, or MK_EPARSE with the first violation (its module line
 * where it has one). Compile errors are NVRTC's to find. */
int mk_backend_check_candidate(const char *module_text, mk_errmsg *err);

/* ---- diagnostics ---------------------------------------------------------- */

/* Parses an NVRTC log ("name(12): error: ...", the source line, the caret)
 * into diagnostics with lines shifted by line_offset and columns from the
 * caret. *out is malloc'd (caller frees), *n its count. */
int mk_backend_parse_log(const char *log, int line_offset, mk_backend_diag **out, int *n);

/* The verifier's result object for a failed compile (docs/verify.md):
 * {"status": "compile_error", "reason": "line L:C: error: ...", "line": L,
 *  "column": C, "traceback": <log>, "diagnostics": [{line, column, severity,
 *  message}...]}, so the editor shows it like any other failure. */
cJSON *mk_backend_report(const mk_backend_result *r);

/* ---- base64 (cubins travel inside JSON: cache entries, worker params) ----- */

/* Appends the standard base64 text of data[0..len) to out. */
struct mk_buf;
int mk_backend_base64_encode(const uint8_t *data, size_t len, struct mk_buf *out);
/* Decodes standard base64 (no line breaks). *out malloc'd, caller frees. */
int mk_backend_base64_decode(const char *text, size_t len, uint8_t **out, size_t *out_len);

#endif
