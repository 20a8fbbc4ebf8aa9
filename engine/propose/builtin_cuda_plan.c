/* builtin_cuda_plan.c — the launch plan: run() as data (MK_CUDA_PLAN).
 *
 * The CUDA emitters write each candidate's launcher three times from the same
 * decisions: Python (run(), which the Python worker calls), C++ (the export's
 * launcher) and, here, a declarative plan the native worker executes without
 * Python (docs/candidates.md, "MK_CUDA_PLAN"). A plan is JSON:
 *
 *   {"version": 1, "inputs": ["v3", ...], "outputs": ["v9", ...],
 *    "kernels": {"_k1_ew_...": "ffq", ...},          the MK_CUDA_KERNELS signatures
 *    "steps": [STEP, ...]}
 *
 * Names are the C++ launcher's: v<id> for values, a<res>_<i>, shape<res>,
 * ... for the launcher's temporaries. Each STEP is {"op": ..., "out": name,
 * "args": [...]} mirroring one helper of the C++ launcher (export_cuda.c):
 *   node       a torch or view stage: "form" is the node's ATen form
 *              (mk_export_node_aten), its results bound to v<id>
 *   broadcast  out = torch.broadcast_shapes(args' sizes)
 *   sizes      out = the tensor's sizes
 *   list       out = the int list of args (INTs)
 *   int        out = the INT args[0]
 *   reshape    out = args[0].reshape(list args[1])
 *   require_multiple  the candidate refuses its inputs (args[2], the message)
 *              unless INT args[0] is a multiple of args[1]
 *   require_equal     the same unless INT args[0] == INT args[1]
 *   with_last  out = list args[0] with its last item replaced by INT args[1]
 *   unsqueeze  out = args[0].unsqueeze(args[1])
 *   numel      out = the tensor's element count
 *   empty      out = an empty tensor of shape args[0] (a name or a literal list), on
 *              args[1]'s device, dtype args[2], memory format args[3] when given
 *              ("channels_last", "channels_last_3d")
 *   alias      out = the tensor args[0]
 *   full       out = args[0] made contiguous, its shape checked against args[1]
 *   inplace    out = args[0], checked to have shape args[1] and be contiguous
 *   contiguous out = args[0].contiguous()
 *   bstrides   out = the strides of args[0] broadcast to shape args[1]
 *   prod       out = product of args[0][args[1]:args[2]] (a Python slice of INTs; null: the end)
 *   mul        out = args[0] * args[1]
 *   reduced_shape  out = mk_reduced_shape(args[0], lo, hi, keepdim)
 *   launch     kernel, grid, block (ints or int names), args: {"ptr": tensor} or
 *              {"int": INT}; skipped unless the int named by "when" is > 0
 * An INT is a literal, a name, {"item": [list, d]}, {"cdiv": [INT, k]},
 * {"size": [tensor, d]}, {"stride": [tensor, d]} (d < 0 from the end),
 * {"len": list}, {"innermost_channels": tensor}
 * (1 when dim 1 has stride 1 and more than one element: channels_last) or
 * {"pool_out": [INT size, k, stride, pad, dilation, ceil_mode]} (torch's
 * pooling output length; below 1 is the candidate's error), or
 * {"add" | "mul" | "div" | "max": [INT, INT]} (div: floor division).
 *
 * Every stage kind has a plan form; a torch or view stage whose node has no
 * ATen form leaves bc_emit.plan_gap set: the module then has no MK_CUDA_PLAN
 * and the engine sends the candidate to the Python worker. */
#include "builtin_cuda.h"

#include "mk_export.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool bc_plan_on(const bc_emit *e) { return e->plan != NULL && e->plan_gap[0] == '\0'; }

void bc_plan_gap(bc_emit *e, const char *fmt, ...) {
  if (e->plan == NULL || e->plan_gap[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->plan_gap, sizeof e->plan_gap, fmt, ap);
  va_end(ap);
}

cJSON *bc_plan_step(bc_emit *e, const char *op, const char *out) {
  if (!bc_plan_on(e)) return NULL;
  cJSON *st = cJSON_CreateObject();
  cJSON_AddStringToObject(st, "op", op);
  if (out) cJSON_AddStringToObject(st, "out", out);
  cJSON_AddArrayToObject(st, "args");
  cJSON_AddItemToArray(e->plan, st);
  return st;
}

void bc_plan_arg_name(cJSON *step, const char *fmt, ...) {
  if (step == NULL) return;
  char name[96];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  cJSON_AddItemToArray(cJSON_GetObjectItem(step, "args"), cJSON_CreateString(name));
}

void bc_plan_arg_int(cJSON *step, long long v) {
  if (step) cJSON_AddItemToArray(cJSON_GetObjectItem(step, "args"), cJSON_CreateNumber((double)v));
}

void bc_plan_arg(cJSON *step, cJSON *v) {
  if (step) cJSON_AddItemToArray(cJSON_GetObjectItem(step, "args"), v);
  else cJSON_Delete(v);
}

cJSON *bc_plan_name(const char *fmt, ...) {
  char name[96];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  return cJSON_CreateString(name);
}

cJSON *bc_plan_item(const char *list, int d) {
  cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "item");
  cJSON_AddItemToArray(a, cJSON_CreateString(list));
  cJSON_AddItemToArray(a, cJSON_CreateNumber(d));
  return o;
}

cJSON *bc_plan_tagged(const char *tag, cJSON *v) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, tag, v);
  return o;
}

cJSON *bc_plan_launch(bc_emit *e, const char *kernel, const char *when, cJSON *grid, int block) {
  cJSON *st = bc_plan_step(e, "launch", NULL);
  if (st == NULL) {
    cJSON_Delete(grid);
    return NULL;
  }
  cJSON_AddStringToObject(st, "kernel", kernel);
  if (when) cJSON_AddStringToObject(st, "when", when);
  cJSON *g = cJSON_AddArrayToObject(st, "grid");
  cJSON_AddItemToArray(g, grid);
  cJSON *b = cJSON_AddArrayToObject(st, "block");
  cJSON_AddItemToArray(b, cJSON_CreateNumber(block));
  return st;
}

int bc_plan_node(bc_emit *e, const mk_node *n) {
  if (!bc_plan_on(e)) return 0;
  cJSON *form = NULL;
  mk_errmsg err = {{0}};
  if (mk_export_node_aten(e->p->g, n, &form, &err)) {
    bc_plan_gap(e, "%s", err.text);
    return 0;
  }
  cJSON *st = bc_plan_step(e, "node", NULL);
  cJSON_AddItemToObject(st, "form", form);
  return 0;
}

int bc_plan_module(const bc_emit *e, const mk_subkernel *sk, const char *sigs, mk_buf *out) {
  if (!bc_plan_on(e)) return 0;
  cJSON *plan = cJSON_CreateObject();
  cJSON_AddNumberToObject(plan, "version", 1);
  cJSON *in = cJSON_AddArrayToObject(plan, "inputs"), *outs = cJSON_AddArrayToObject(plan, "outputs");
  for (int i = 0; i < sk->ninputs; i++) cJSON_AddItemToArray(in, bc_plan_name("v%d", sk->inputs[i]));
  for (int i = 0; i < sk->noutputs; i++) cJSON_AddItemToArray(outs, bc_plan_name("v%d", sk->outputs[i]));
  cJSON *k = cJSON_AddObjectToObject(plan, "kernels");
  /* MK_CUDA_KERNELS entries: `    "name": "sig",` lines */
  for (const char *p = strchr(sigs, '"'); p; p = strchr(p, '"')) {
    const char *ne = strchr(p + 1, '"');
    const char *ss = ne ? strchr(ne + 1, '"') : NULL;
    const char *se = ss ? strchr(ss + 1, '"') : NULL;
    if (se == NULL) break;
    char name[160], sig[160];
    snprintf(name, sizeof name, "%.*s", (int)(ne - p - 1), p + 1);
    snprintf(sig, sizeof sig, "%.*s", (int)(se - ss - 1), ss + 1);
    cJSON_AddStringToObject(k, name, sig);
    p = se + 1;
  }
  cJSON_AddItemToObject(plan, "steps", cJSON_Duplicate(e->plan, 1));
  char *text = cJSON_PrintUnformatted(plan);
  cJSON_Delete(plan);
  if (text == NULL) return MK_ENOMEM;
  int rc = mk_buf_printf(out, "# The launch plan: run() as data, for the native worker (docs/candidates.md).\n"
                              "MK_CUDA_PLAN = r\"\"\"\n%s\n\"\"\"\n", text);
  cJSON_free(text);
  return rc;
}
