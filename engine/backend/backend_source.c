/* backend_source.c — the CUDA C++ inside a candidate module.
 *
 * A CUDA candidate is still a Python module (docs/candidates.md); its CUDA
 * text is the module-level assignment `MK_CUDA_SOURCE = r"""` ... `"""`.
 * A raw triple-quoted string holds CUDA unchanged (backslashes included),
 * and the only thing it cannot hold is `"""`, which CUDA code never needs.
 * Finding it textually (no Python parser) keeps the compile independent of
 * the worker; the line it starts on maps NVRTC's lines to the module's. */
#include "backend_internal.h"
#include "mk_backend.h"

#include <string.h>

static const char marker[] = "MK_CUDA_SOURCE = r\"\"\"";

const char *mk_backend_line_starting(const char *text, const char *prefix) {
  for (const char *p = strstr(text, prefix); p; p = strstr(p + 1, prefix))
    if (p == text || p[-1] == '\n') return p;
  return NULL;
}

int mk_backend_line_of(const char *text, const char *at) {
  int n = 1;
  for (const char *p = text; p < at; p++) n += *p == '\n';
  return n;
}

int mk_backend_candidate_source(const char *module_text, const char **src, size_t *len,
                                int *first_line, mk_errmsg *err) {
  if (module_text == NULL) return mk_errf(err, MK_EINVAL, "no module text");
  const char *m = mk_backend_line_starting(module_text, marker);
  if (m == NULL) return mk_errf(err, MK_ENOENT, "the module has no MK_CUDA_SOURCE");
  const char *start = m + sizeof marker - 1;
  /* The usual layout opens the string and starts CUDA on the next line. */
  if (*start == '\n') start++;
  const char *end = strstr(start, "\"\"\"");
  if (end == NULL)
    return mk_errf(err, MK_EPARSE, "line %d: MK_CUDA_SOURCE is not closed by \"\"\"",
                   mk_backend_line_of(module_text, m));
  *src = start;
  *len = (size_t)(end - start);
  *first_line = mk_backend_line_of(module_text, start);
  return 0;
}

bool mk_backend_is_cuda_candidate(const char *module_text) {
  return module_text != NULL && mk_backend_line_starting(module_text, marker) != NULL;
}
