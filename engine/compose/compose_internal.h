/* compose_internal.h — private interface between compose.c,
 * compose_cuda.c (the CUDA C++ sections of a ModelNew) and
 * compose_convert.c (the layout plan's conversions). */
#ifndef MK_COMPOSE_INTERNAL_H
#define MK_COMPOSE_INTERNAL_H

#include "mk_buf.h"
#include "mk_err.h"

#include <stdbool.h>

/* Appends `source` to body with its top-level def/class names, and the
 * names in NULL-terminated `extra` (may be NULL), prefixed wherever they
 * are code; its import lines go to `imports` (NULL: dropped). */
int compose_rewrite(const char *source, const char *prefix, const char *const *extra,
                    mk_buf *body, mk_buf *imports);

/* The CUDA C++ of a composition: every CUDA candidate's kernels, each in a
 * namespace of its section (sk<i>), built once by
 * torch.utils.cpp_extension.load_inline (KernelBench's format). */
typedef struct compose_cuda {
  mk_buf decls;  /* C++ declarations of the launch functions (cpp_sources) */
  mk_buf source; /* kernels and launch functions (cuda_sources) */
  mk_buf names;  /* "\"sk1__k1_ew\", " entries of load_inline's functions= */
  int sections;
  bool launcher;  /* the launcher class is written */
} compose_cuda;

void compose_cuda_init(compose_cuda *cc);
void compose_cuda_free(compose_cuda *cc);
/* Writes a CUDA candidate's section (prefix "sk<i>_"): its Python with
 * MK_CUDA_SOURCE moved into cc, names prefixed (_mk_cuda and MK_CUDA_KERNELS
 * too), then its launcher; imports to `imports`. MK_EPARSE with a reason when
 * the candidate's MK_CUDA_SOURCE or MK_CUDA_KERNELS cannot be read. */
int compose_cuda_section(compose_cuda *cc, const char *source, const char *prefix,
                         mk_buf *sections, mk_buf *imports, mk_errmsg *err);
/* The launcher class the CUDA sections use, before the first one (once). */
void compose_cuda_launcher(compose_cuda *cc, mk_buf *sections);
/* The build: the C++ texts and the load_inline call (nothing when cc has no
 * section). */
int compose_cuda_build(compose_cuda *cc, mk_buf *out);

/* The layout plan's conversions (compose_convert.c): the module-level
 * `_mk_convert(x, fmt)` helper (a tiled Triton transpose for large tensors,
 * PyTorch's copy otherwise; PyTorch's copy only with `triton` false, for a
 * module of CUDA C++ sections alone), and one conversion statement in the forward:
 * `name = _mk_convert(name, <format>)` for conv (an mk_layout_conv) of a
 * value of `rank`; nothing for MK_LAYOUT_KEEP. */
int compose_convert_helper(mk_buf *out, bool triton);
int compose_convert(mk_buf *out, const char *name, int conv, int rank);

#endif
