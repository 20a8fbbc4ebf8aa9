/* mk_lsp_engine.h — the backend that connects the language server to the
 * engine. The only lsp/ file that knows what a KernelBench module is: it
 * turns engine results (static checks now; subkernels, variants and
 * timings from engine/session once it lands) into the editor-neutral
 * analysis of mk_lsp_backend.h.
 *
 * Static checks (run on every analysis, in-process, microseconds):
 *   - syntax errors and missing tokens, at their exact position;
 *   - for files that import torch: no `class Model` (unless the file is a
 *     composed `ModelNew`), Model without `forward`, no `get_inputs()`,
 *     no `get_init_inputs()`.
 * Files that do not import torch get syntax errors only. */
#ifndef MK_LSP_ENGINE_H
#define MK_LSP_ENGINE_H

#include "mk_lsp_backend.h"

#include <uv.h>

/* Creates the engine backend on `loop`. out->ops/self are set; the server
 * that receives it destroys it. */
int mk_lsp_engine_backend_new(uv_loop_t *loop, mk_lsp_backend *out);

/* The static checks alone, on a text (for tests and the fuzz target). */
int mk_lsp_engine_static_check(const char *text, size_t len, mk_lsp_analysis *out);

#endif
