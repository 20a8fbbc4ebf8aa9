/* mk_pyemit.h — Python source for recorded torch calls.
 *
 * Turns the capture's argument encoding (docs/protocol.md) back into Python
 * literals, and a recorded node into a call statement. One implementation,
 * used by the composer (ModelNew's forward), the reference candidate and the
 * builtin proposer's delegated calls (convolutions, views).
 *
 * The emitted text assumes `import math`, `import torch` and
 * `import torch.nn.functional as F` (mk_pyemit_prelude). Every name that
 * comes from a capture is checked to be an identifier (dotted op names,
 * keywords) or an identifier-like token (dtypes, devices, memory formats),
 * so a hostile capture cannot inject code.
 *
 * Ownership: output goes to a caller-owned mk_buf; inputs are borrowed. */
#ifndef MK_PYEMIT_H
#define MK_PYEMIT_H

#include "mk_buf.h"
#include "mk_err.h"
#include "mk_ir.h"

#include <cjson/cJSON.h>

/* How a value is spelled in emitted code: returns 0 and appends the
 * expression for value `vid` (e.g. "v12", "x", "self.conv.weight"). */
typedef int (*mk_value_namer)(void *ctx, int vid, mk_buf *out);

/* The local name every recorded device constant is spelled as. Captures run
 * on the CPU, so `torch.zeros(n, device=x.device)` records "cpu"; replay maps
 * every device constant to the device it runs on (docs/capture.md), and
 * emitted code must do the same or a GPU run mixes devices. */
#define MK_PYEMIT_DEVICE_VAR "_mk_dev"

/* When any of `nodes` uses a device constant, appends
 * `_mk_dev = <tensor_vid>.device` at `indent` (the device the emitted code
 * runs on, taken from one of its tensors); with tensor_vid < 0 (no tensor in
 * scope) the current GPU, or the CPU where there is none. Nothing when no
 * node uses one. */
int mk_pyemit_device_binding(const mk_graph *g, const int *nodes, int nnodes, int tensor_vid,
                             mk_value_namer namer, void *ctx, int indent, mk_buf *out);

/* The helper emitted code calls for tensors made from constants alone
 * (mk_graph_node_is_constant, mk_ir.h). */
#define MK_PYEMIT_CONST_FN "_mk_const"

/* Appends `vN = _mk_const((id, dtype[, _mk_dev][, sizes]), lambda: <the call>)`
 * for constant node `n`: the tensor is made on the first call per device,
 * default dtype and batch (the sizes that follow it: mk_batch_int), then reused. The module must define the helper
 * (mk_pyemit_constant_helper). */
int mk_pyemit_constant_node(const mk_graph *g, const mk_node *n, mk_value_namer namer, void *ctx,
                            int indent, mk_buf *out, mk_errmsg *err);

/* Appends the module-level definition of MK_PYEMIT_CONST_FN and its cache. */
int mk_pyemit_constant_helper(mk_buf *out);

/* Appends the Python literal for one encoded argument. MK_EUNSUPPORTED (with
 * a reason) for arguments that were not recorded exactly ("opaque"). */
int mk_pyemit_arg(const cJSON *arg, mk_value_namer namer, void *ctx, mk_buf *out, mk_errmsg *err);

/* Appends the Python expression calling node `n` (no assignment), e.g.
 * "F.conv2d(x, self.conv.weight, self.conv.bias, (1, 1), (0, 0), (1, 1), 1)",
 * "(a + b)", "x.view(2, -1)". Fails with MK_EUNSUPPORTED for ops that are not
 * torch callables and for nodes with opaque arguments. */
int mk_pyemit_call(const mk_graph *g, const mk_node *n, mk_value_namer namer, void *ctx,
                   mk_buf *out, mk_errmsg *err);

/* Appends statements (each line indented by `indent`) that run node `n` and
 * bind its tensor outputs to the names the namer gives them. Values a node
 * outputs but does not return are new versions of the tensors it modifies in
 * place (batch norm's running statistics): they are bound to those tensors
 * (skipped when the namer spells both alike). */
int mk_pyemit_node(const mk_graph *g, const mk_node *n, mk_value_namer namer, void *ctx,
                   int indent, mk_buf *out, mk_errmsg *err);

/* Only the `fresh = mutated` lines of mk_pyemit_node: for code that replaces
 * the call itself (a kernel updating batch norm's running statistics) but
 * must name the new versions the way later code reads them. */
int mk_pyemit_mutations(const mk_node *n, mk_value_namer namer, void *ctx, int indent, mk_buf *out);

/* `name = name.contiguous(...)` for value vid when the program's layout plan
 * converts it (conv: its mk_layout_conv, mk_layout.h), at `indent` spaces;
 * nothing for MK_LAYOUT_KEEP. Shared by the composition and the reference
 * candidate, which must convert alike. */
int mk_pyemit_conversion(const mk_graph *g, int vid, int conv, mk_value_namer namer, void *ctx,
                         int indent, mk_buf *out);

/* Shortest Python float literal that reads back to the same double, like
 * repr ("0.5", "1e-05", "2.0", "float('inf')"). */
int mk_pyemit_float(double d, mk_buf *out);

/* Appends the `import` lines every emitted node needs (math, torch, nn, F). */
int mk_pyemit_prelude(mk_buf *out);

/* The expression for a parameter/buffer/attribute path on `self`:
 * "layers.0.weight" -> "self.layers[0].weight". */
int mk_pyemit_self_path(const char *path, mk_buf *out);

#endif
