/* export_triton.c — Triton subkernels of a ModelNew compiled into the export.
 *
 * A Triton candidate's launch logic is Python (its run(): output shapes,
 * grids, strides). mkworker.export_triton runs the ModelNew once on the
 * problem's inputs and records, per Triton subkernel, every ATen call its
 * run() makes and every kernel launch (grid, arguments), then compiles each
 * launched kernel ahead of time for the exact specialisation it ran with
 * (a cubin for sm_<arch>). This file turns that plan into C++: the
 * subkernel's nodes are recovered from its call in the forward (as for CUDA
 * subkernels), and its run() becomes a replay at the place of its first
 * node -- its inputs checked against the recorded shapes and dtypes (the
 * export is for the shapes of get_inputs()), each ATen call through
 * at::_ops::<op>::call with the recorded arguments, each launch through
 * cuLaunchKernel with the live tensors' pointers and the recorded ints. The
 * cubins go into <ns>_triton.cpp as byte arrays, loaded with
 * cuModuleLoadData into torch's primary context on first use. */
#include "mk_export.h"

#include "export_internal.h"

#include "mk_backend.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the plan ---------------------------------------------------------------------------- */

static int read_kernels(const cJSON *plan, mk_export_cuda *c, mk_errmsg *err) {
  const cJSON *ks = cJSON_GetObjectItemCaseSensitive(plan, "kernels");
  const cJSON *arch = cJSON_GetObjectItemCaseSensitive(plan, "arch");
  if (!cJSON_IsArray(ks) || !cJSON_IsNumber(arch))
    return mk_errf(err, MK_EPARSE, "the Triton plan has no kernels or arch");
  int n = cJSON_GetArraySize(ks);
  c->arch = arch->valueint;
  if (n == 0) return 0;
  c->kernels = calloc((size_t)n, sizeof *c->kernels);
  if (c->kernels == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  for (const cJSON *k = ks->child; k; k = k->next) {
    mk_export_triton_kernel *x = &c->kernels[c->nkernels++];
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(k, "name");
    const cJSON *cubin = cJSON_GetObjectItemCaseSensitive(k, "cubin");
    const cJSON *shared = cJSON_GetObjectItemCaseSensitive(k, "shared");
    const cJSON *warps = cJSON_GetObjectItemCaseSensitive(k, "num_warps");
    if (!cJSON_IsString(name) || !cJSON_IsString(cubin) || !cJSON_IsNumber(shared) || !cJSON_IsNumber(warps))
      return mk_errf(err, MK_EPARSE, "Triton kernel %d of the plan lacks name, cubin, shared or num_warps",
                     c->nkernels - 1);
    snprintf(x->name, sizeof x->name, "%s", name->valuestring);
    for (const char *p = x->name; *p; p++)
      if (!(*p == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
        return mk_errf(err, MK_EPARSE, "Triton kernel name %s is not an identifier", x->name);
    uint8_t *bin = NULL;
    size_t size = 0;
    if (mk_backend_base64_decode(cubin->valuestring, strlen(cubin->valuestring), &bin, &size) == 0) {
      x->cubin = bin;
      x->size = size;
    }
    if (x->cubin == NULL || x->size < 4 || memcmp(x->cubin, "\x7f" "ELF", 4) != 0)
      return mk_errf(err, MK_EPARSE, "Triton kernel %s: its cubin is not an ELF file", x->name);
    x->shared = shared->valueint;
    x->num_warps = warps->valueint;
    x->arch = c->arch;
    if (x->num_warps < 1 || x->num_warps > 32 || x->shared < 0)
      return mk_errf(err, MK_EPARSE, "Triton kernel %s: num_warps %d, shared %d", x->name, x->num_warps,
                     x->shared);
  }
  return 0;
}

/* ---- C++ for recorded values --------------------------------------------------------------- */

typedef struct replay {
  const char *where; /* "subkernel sk2 (batch_norm_relu)" */
  int nvars;         /* vars 0..nvars-1 are declared as t<var> */
  int ntmp;          /* results of tuple-returning calls: r<n> */
  mk_buf *out;
} replay;

static int need_var(replay *r, const cJSON *v, int *var, mk_errmsg *err) {
  if (!cJSON_IsNumber(v) || v->valueint < 0 || v->valueint >= r->nvars)
    return mk_errf(err, MK_EPARSE, "%s: the plan names a tensor it does not make", r->where);
  *var = v->valueint;
  return 0;
}

static void put_double(mk_buf *b, double x) {
  if (isnan(x)) mk_buf_puts(b, "std::numeric_limits<double>::quiet_NaN()");
  else if (isinf(x)) mk_buf_puts(b, x > 0 ? "std::numeric_limits<double>::infinity()"
                                          : "-std::numeric_limits<double>::infinity()");
  else mk_buf_printf(b, "%.17g", x);
}

static int put_ints(replay *r, const cJSON *v, mk_errmsg *err) {
  if (!cJSON_IsArray(v)) return mk_errf(err, MK_EPARSE, "%s: a list of ints that is not a list", r->where);
  mk_buf_puts(r->out, "std::vector<int64_t>{");
  for (const cJSON *x = v->child; x; x = x->next) {
    if (!cJSON_IsNumber(x)) return mk_errf(err, MK_EPARSE, "%s: a list of ints holds a non-number", r->where);
    mk_buf_printf(r->out, "%s%.0f", x == v->child ? "" : ", ", x->valuedouble);
  }
  mk_buf_puts(r->out, "}");
  return 0;
}

static const char *dtype_cpp(const char *name) {
  static const char *const map[][2] = {
      {"float32", "Float"}, {"float64", "Double"}, {"float16", "Half"}, {"bfloat16", "BFloat16"},
      {"int64", "Long"},    {"int32", "Int"},      {"int16", "Short"},  {"int8", "Char"},
      {"uint8", "Byte"},    {"bool", "Bool"},
  };
  for (size_t i = 0; name && i < sizeof map / sizeof map[0]; i++)
    if (strcmp(map[i][0], name) == 0) return map[i][1];
  return NULL;
}

static const char *memfmt_cpp(const char *name) {
  if (name == NULL) return NULL;
  if (!strcmp(name, "contiguous_format")) return "Contiguous";
  if (!strcmp(name, "channels_last")) return "ChannelsLast";
  if (!strcmp(name, "channels_last_3d")) return "ChannelsLast3d";
  if (!strcmp(name, "preserve_format")) return "Preserve";
  return NULL;
}

/* One recorded argument [kind, value] as a C++ expression of the type at::_ops wants. */
static int put_arg(replay *r, const cJSON *a, mk_errmsg *err) {
  const cJSON *k = cJSON_GetArrayItem(a, 0), *v = cJSON_GetArrayItem(a, 1);
  if (!cJSON_IsString(k)) return mk_errf(err, MK_EPARSE, "%s: an argument without a kind", r->where);
  char kind[32];
  snprintf(kind, sizeof kind, "%s", k->valuestring);
  size_t kl = strlen(kind);
  bool opt = kl > 0 && kind[kl - 1] == '?';
  if (opt) kind[kl - 1] = '\0';
  mk_buf *o = r->out;
  int var = 0;
  if (v == NULL || cJSON_IsNull(v)) {
    if (!opt && strcmp(kind, "generator") != 0)
      return mk_errf(err, MK_EPARSE, "%s: no value for a %s argument", r->where, kind);
    if (!strcmp(kind, "tensor")) mk_buf_puts(o, "::std::optional<at::Tensor>()");
    else mk_buf_puts(o, "::std::nullopt");
    return 0;
  }
  if (!strcmp(kind, "tensor")) {
    if (need_var(r, v, &var, err)) return MK_EPARSE;
    mk_buf_printf(o, opt ? "::std::optional<at::Tensor>(t%d)" : "t%d", var);
  } else if (!strcmp(kind, "tensors")) {
    if (!cJSON_IsArray(v)) return mk_errf(err, MK_EPARSE, "%s: a tensor list that is not a list", r->where);
    mk_buf_puts(o, "std::vector<at::Tensor>{");
    for (const cJSON *x = v->child; x; x = x->next) {
      if (need_var(r, x, &var, err)) return MK_EPARSE;
      mk_buf_printf(o, "%st%d", x == v->child ? "" : ", ", var);
    }
    mk_buf_puts(o, "}");
  } else if (!strcmp(kind, "int") && cJSON_IsNumber(v)) {
    mk_buf_printf(o, "int64_t(%.0f)", v->valuedouble);
  } else if (!strcmp(kind, "ints") || !strcmp(kind, "symints")) {
    bool sym = kind[0] == 's';
    mk_buf_puts(o, opt ? (sym ? "at::OptionalSymIntArrayRef(" : "at::OptionalIntArrayRef(")
                       : (sym ? "c10::fromIntArrayRefSlow(" : "at::IntArrayRef("));
    if (opt && sym) mk_buf_puts(o, "c10::fromIntArrayRefSlow(");
    if (put_ints(r, v, err)) return MK_EPARSE;
    mk_buf_puts(o, opt && sym ? "))" : ")");
  } else if (!strcmp(kind, "float") && cJSON_IsNumber(v)) {
    mk_buf_puts(o, "double(");
    put_double(o, v->valuedouble);
    mk_buf_puts(o, ")");
  } else if (!strcmp(kind, "bool") && cJSON_IsBool(v)) {
    mk_buf_puts(o, cJSON_IsTrue(v) ? "true" : "false");
  } else if (!strcmp(kind, "scalar") && cJSON_IsObject(v) && v->child) {
    const cJSON *x = v->child;
    if (!strcmp(x->string, "b") && cJSON_IsBool(x)) mk_buf_printf(o, "at::Scalar(%s)", cJSON_IsTrue(x) ? "true" : "false");
    else if (!strcmp(x->string, "i") && cJSON_IsNumber(x)) mk_buf_printf(o, "at::Scalar(int64_t(%.0f))", x->valuedouble);
    else if (!strcmp(x->string, "f") && cJSON_IsNumber(x)) {
      mk_buf_puts(o, "at::Scalar(double(");
      put_double(o, x->valuedouble);
      mk_buf_puts(o, "))");
    } else return mk_errf(err, MK_EPARSE, "%s: a malformed scalar", r->where);
  } else if (!strcmp(kind, "dtype") && cJSON_IsString(v) && dtype_cpp(v->valuestring)) {
    mk_buf_printf(o, "at::ScalarType::%s", dtype_cpp(v->valuestring));
  } else if (!strcmp(kind, "layout") && cJSON_IsString(v) && !strcmp(v->valuestring, "strided")) {
    mk_buf_puts(o, "at::kStrided");
  } else if (!strcmp(kind, "device") && cJSON_IsString(v)) {
    mk_buf_puts(o, "dev");
  } else if (!strcmp(kind, "memfmt") && cJSON_IsString(v) && memfmt_cpp(v->valuestring)) {
    mk_buf_printf(o, "at::MemoryFormat::%s", memfmt_cpp(v->valuestring));
  } else if (!strcmp(kind, "str") && cJSON_IsString(v)) {
    for (const char *p = v->valuestring; *p; p++)
      if (*p == '"' || *p == '\\' || *p == '\n' || (unsigned char)*p < 32)
        return mk_errf(err, MK_EUNSUPPORTED, "%s: a string argument the export does not quote", r->where);
    mk_buf_printf(o, "c10::string_view(\"%s\")", v->valuestring);
  } else {
    return mk_errf(err, MK_EUNSUPPORTED, "%s: a recorded argument of kind %s the export does not write in C++",
                   r->where, k->valuestring);
  }
  return 0;
}

static bool is_ident(const char *s) {
  if (s == NULL || *s == '\0' || (*s >= '0' && *s <= '9')) return false;
  for (; *s; s++)
    if (!(*s == '_' || (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
      return false;
  return true;
}

/* A recorded ATen call: at::_ops::<op>[_<overload>]::call(...), its results as new t<var>. */
static int put_op(replay *r, const cJSON *step, mk_errmsg *err) {
  const cJSON *op = cJSON_GetObjectItemCaseSensitive(step, "op");
  const cJSON *ov = cJSON_GetObjectItemCaseSensitive(step, "overload");
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(step, "args");
  const cJSON *result = cJSON_GetObjectItemCaseSensitive(step, "result");
  const cJSON *outs = cJSON_GetObjectItemCaseSensitive(step, "out");
  if (!cJSON_IsString(op) || !is_ident(op->valuestring) || !cJSON_IsString(ov) ||
      (ov->valuestring[0] && !is_ident(ov->valuestring)) || !cJSON_IsArray(args) || !cJSON_IsString(result) ||
      !cJSON_IsArray(outs))
    return mk_errf(err, MK_EPARSE, "%s: a malformed ATen step in the plan", r->where);
  mk_buf call;
  mk_buf_init(&call, 0);
  mk_buf *saved = r->out;
  r->out = &call;
  mk_buf_printf(&call, "at::_ops::%s%s%s::call(", op->valuestring, ov->valuestring[0] ? "_" : "", ov->valuestring);
  int rc = 0;
  for (const cJSON *a = args->child; a && !rc; a = a->next) {
    if (a != args->child) mk_buf_puts(&call, ", ");
    rc = put_arg(r, a, err);
  }
  mk_buf_puts(&call, ")");
  r->out = saved;
  if (rc) {
    mk_buf_free(&call);
    return rc;
  }
  const char *res = result->valuestring;
  int nouts = cJSON_GetArraySize(outs), k = 0;
  /* results already known (an in-place op returns its self) are not redeclared */
  if (nouts == 0 || !strcmp(res, "none")) {
    mk_buf_printf(r->out, "    %s;\n", mk_buf_cstr(&call));
  } else if (!strcmp(res, "tensor") && nouts == 1) {
    int v = outs->child->valueint;
    if (v < r->nvars) mk_buf_printf(r->out, "    %s;  // t%d, in place\n", mk_buf_cstr(&call), v);
    else mk_buf_printf(r->out, "    at::Tensor t%d = %s;\n", v, mk_buf_cstr(&call));
  } else if (!strcmp(res, "tuple") || !strcmp(res, "tensors")) {
    int tmp = r->ntmp++;
    mk_buf_printf(r->out, "    auto r%d = %s;\n", tmp, mk_buf_cstr(&call));
    for (const cJSON *x = outs->child; x; x = x->next, k++)
      if (x->valueint >= r->nvars)
        mk_buf_printf(r->out, !strcmp(res, "tuple") ? "    at::Tensor t%d = std::get<%d>(r%d);\n"
                                                    : "    at::Tensor t%d = r%d.at(%d);\n",
                      x->valueint, !strcmp(res, "tuple") ? k : tmp, !strcmp(res, "tuple") ? tmp : k);
  } else {
    rc = mk_errf(err, MK_EPARSE, "%s: an ATen step with result %s", r->where, res);
  }
  mk_buf_free(&call);
  for (const cJSON *x = outs->child; x && !rc; x = x->next) {
    if (!cJSON_IsNumber(x) || x->valueint > r->nvars)
      return mk_errf(err, MK_EPARSE, "%s: the plan's tensors are not numbered in order", r->where);
    if (x->valueint == r->nvars) r->nvars++;
  }
  return rc;
}

static const cJSON *launch_arg(const cJSON *args, const char *name) {
  for (const cJSON *a = args ? args->child : NULL; a; a = a->next) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(a, "name");
    if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return a;
  }
  return NULL;
}

/* The C type of an int or float parameter from its PTX type and Triton's ("i32", "u64", "fp32"). */
static const char *scalar_cpp(const char *ptx, const char *type) {
  bool uns = type && type[0] == 'u';
  if (!strcmp(ptx, "f32")) return "float";
  if (!strcmp(ptx, "f64")) return "double";
  if (ptx[1] == '6' || !strcmp(ptx + 1, "64")) return uns ? "uint64_t" : "int64_t";
  if (!strcmp(ptx + 1, "32")) return uns ? "uint32_t" : "int32_t";
  if (!strcmp(ptx + 1, "16")) return uns ? "uint16_t" : "int16_t";
  if (!strcmp(ptx + 1, "8")) return uns ? "uint8_t" : "int8_t";
  return NULL;
}

/* A recorded launch: the parameters the compiled kernel kept, the scratch pointers, cuLaunchKernel. */
static int put_launch(replay *r, const cJSON *step, const cJSON *kernels, const mk_export_cuda *c, mk_errmsg *err) {
  const cJSON *kid = cJSON_GetObjectItemCaseSensitive(step, "kernel");
  const cJSON *grid = cJSON_GetObjectItemCaseSensitive(step, "grid");
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(step, "args");
  if (!cJSON_IsNumber(kid) || kid->valueint < 0 || kid->valueint >= c->nkernels || !cJSON_IsArray(grid) ||
      cJSON_GetArraySize(grid) != 3 || !cJSON_IsArray(args))
    return mk_errf(err, MK_EPARSE, "%s: a malformed launch in the plan", r->where);
  const cJSON *k = cJSON_GetArrayItem(kernels, kid->valueint);
  const cJSON *params = cJSON_GetObjectItemCaseSensitive(k, "params");
  const cJSON *scratch = cJSON_GetObjectItemCaseSensitive(k, "scratch");
  const char *kname = c->kernels[kid->valueint].name;
  if (!cJSON_IsArray(params) || !cJSON_IsNumber(scratch))
    return mk_errf(err, MK_EPARSE, "%s: kernel %s has no parameter list in the plan", r->where, kname);
  double g[3];
  for (int i = 0; i < 3; i++) {
    const cJSON *x = cJSON_GetArrayItem(grid, i);
    g[i] = cJSON_IsNumber(x) ? x->valuedouble : -1;
    if (g[i] < 0 || g[i] > (i == 0 ? 2147483647.0 : 65535.0))
      return mk_errf(err, MK_EUNSUPPORTED, "%s: kernel %s's grid dimension %d is %.0f, beyond CUDA's limit",
                     r->where, kname, i, g[i]);
  }
  mk_buf *o = r->out;
  mk_buf_printf(o, "    {  // %s, grid (%.0f, %.0f, %.0f)\n", kname, g[0], g[1], g[2]);
  int n = 0;
  for (const cJSON *p = params->child; p; p = p->next, n++) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "name");
    const cJSON *ptx = cJSON_GetObjectItemCaseSensitive(p, "ptx");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
    if (!cJSON_IsString(name) || !is_ident(name->valuestring) || !cJSON_IsString(ptx) || !cJSON_IsString(type))
      return mk_errf(err, MK_EPARSE, "%s: kernel %s has a malformed parameter", r->where, kname);
    const cJSON *a = launch_arg(args, name->valuestring);
    if (a == NULL)
      return mk_errf(err, MK_EPARSE, "%s: the launch of %s has no argument %s", r->where, kname, name->valuestring);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(a, "t"), *v = cJSON_GetObjectItemCaseSensitive(a, "v");
    if (t) {
      int var = 0;
      if (need_var(r, t, &var, err)) return MK_EPARSE;
      const cJSON *al = cJSON_GetObjectItemCaseSensitive(p, "align16");
      mk_buf_printf(o, "      uint64_t a%d = mk_tr_ptr(t%d, %s, %d, \"%s\");\n", n, var,
                    cJSON_IsTrue(al) ? "true" : "false", kid->valueint, name->valuestring);
      continue;
    }
    const char *ct = scalar_cpp(ptx->valuestring, type->valuestring);
    if (ct == NULL || !(cJSON_IsNumber(v) || cJSON_IsBool(v)))
      return mk_errf(err, MK_EUNSUPPORTED, "%s: kernel %s's parameter %s (%s, .%s) is not an int or float the "
                                           "export passes", r->where, kname, name->valuestring, type->valuestring,
                     ptx->valuestring);
    mk_buf_printf(o, "      %s a%d = ", ct, n);
    if (cJSON_IsBool(v)) mk_buf_puts(o, cJSON_IsTrue(v) ? "1" : "0");
    else if (ct[0] == 'f' || ct[0] == 'd') put_double(o, v->valuedouble);
    else if (ct[0] == 'u') mk_buf_printf(o, "%.0fULL", v->valuedouble);
    else mk_buf_printf(o, "static_cast<%s>(%.0fLL)", ct, v->valuedouble);
    mk_buf_puts(o, ";\n");
  }
  int ns = scratch->valueint;
  if (ns < 0 || ns > 4) return mk_errf(err, MK_EPARSE, "%s: kernel %s: %d scratch parameters", r->where, kname, ns);
  for (int i = 0; i < ns; i++)
    mk_buf_printf(o, "      uint64_t a%d = 0;  // scratch pointer: this kernel needs none\n", n + i);
  mk_buf_puts(o, "      void *args[] = {");
  for (int i = 0; i < n + ns; i++) mk_buf_printf(o, "%s&a%d", i ? ", " : "", i);
  if (n + ns == 0) mk_buf_puts(o, "nullptr");
  mk_buf_printf(o, "};\n      mk_tr_launch(%d, dev, %.0fu, %.0fu, %.0fu, args);\n    }\n", kid->valueint, g[0], g[1],
                g[2]);
  return 0;
}

static int put_input_shape(mk_buf *o, const cJSON *a) {
  mk_buf_puts(o, "{");
  for (const cJSON *x = a ? a->child : NULL; x; x = x->next) {
    if (!cJSON_IsNumber(x)) return MK_EPARSE;
    mk_buf_printf(o, "%s%.0f", x == a->child ? "" : ", ", x->valuedouble);
  }
  mk_buf_puts(o, "}");
  return 0;
}

/* The replay of one Triton subkernel (its recorded tape `jsk`) as C++ statements. */
static int triton_launcher(const mk_graph *g, const mk_subkernel *sk, const mk_export_subkernel *esk,
                           const cJSON *jsk, const cJSON *kernels, const mk_export_cuda *c, mk_buf *o,
                           mk_errmsg *err) {
  (void)g;
  char where[300];
  snprintf(where, sizeof where, "subkernel sk%d (%s)", esk->index, esk->name);
  const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(jsk, "inputs");
  const cJSON *steps = cJSON_GetObjectItemCaseSensitive(jsk, "steps");
  const cJSON *outputs = cJSON_GetObjectItemCaseSensitive(jsk, "outputs");
  if (!cJSON_IsArray(inputs) || !cJSON_IsArray(steps) || !cJSON_IsArray(outputs))
    return mk_errf(err, MK_EPARSE, "%s: the plan lacks its inputs, steps or outputs", where);
  if (cJSON_GetArraySize(inputs) != sk->ninputs)
    return mk_errf(err, MK_EUNSUPPORTED, "%s: its run() got %d arguments, the graph gives it %d inputs", where,
                   cJSON_GetArraySize(inputs), sk->ninputs);
  if (cJSON_GetArraySize(outputs) != sk->noutputs)
    return mk_errf(err, MK_EUNSUPPORTED, "%s: its run() returned %d tensors, the graph wants %d", where,
                   cJSON_GetArraySize(outputs), sk->noutputs);
  for (int i = 0; i < sk->noutputs; i++) mk_buf_printf(o, "  at::Tensor v%d;\n", sk->outputs[i]);
  mk_buf_puts(o, "  {\n");
  replay r = {.where = where, .nvars = 0, .out = o};
  int i = 0, first = -1;
  mk_buf restore;
  mk_buf_init(&restore, 0);
  for (const cJSON *in = inputs->child; in; in = in->next, i++) {
    const cJSON *var = cJSON_GetObjectItemCaseSensitive(in, "var");
    const cJSON *same = cJSON_GetObjectItemCaseSensitive(in, "same_as");
    if (cJSON_IsNumber(same)) continue; /* the same tensor as an earlier argument */
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(in, "tensor")) || !cJSON_IsNumber(var) ||
        var->valueint != r.nvars) {
      mk_buf_free(&restore);
      return mk_errf(err, MK_EUNSUPPORTED, "%s: its argument %d is not a tensor", where, i);
    }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(in, "dtype");
    const char *ct = cJSON_IsString(dt) ? dtype_cpp(dt->valuestring) : NULL;
    if (ct == NULL) {
      mk_buf_free(&restore);
      return mk_errf(err, MK_EUNSUPPORTED, "%s: its argument %d has a dtype the export does not read", where, i);
    }
    if (first < 0) {
      first = sk->inputs[i];
      mk_buf_printf(o, "    const at::Device dev = mk_tr_device(v%d, \"%s\");\n"
                       "    const c10::cuda::CUDAGuard guard(dev);\n", first, where);
    }
    mk_buf_printf(o, "    at::Tensor t%d = mk_tr_input(v%d, ", r.nvars, sk->inputs[i]);
    if (put_input_shape(o, cJSON_GetObjectItemCaseSensitive(in, "sizes")) ||
        (mk_buf_puts(o, ", "), put_input_shape(o, cJSON_GetObjectItemCaseSensitive(in, "strides")))) {
      mk_buf_free(&restore);
      return mk_errf(err, MK_EPARSE, "%s: argument %d's recorded shape is malformed", where, i);
    }
    mk_buf_printf(o, ", at::ScalarType::%s, \"%s\", %d);\n", ct, where, i);
    mk_buf_printf(&restore, "    mk_tr_restore(v%d, t%d);\n", sk->inputs[i], r.nvars);
    r.nvars++;
  }
  if (first < 0) {
    mk_buf_free(&restore);
    return mk_errf(err, MK_EUNSUPPORTED, "%s: it reads no tensor (the replay takes its device from one)", where);
  }
  int rc = 0;
  for (const cJSON *s = steps->child; s && !rc; s = s->next) {
    if (cJSON_GetObjectItemCaseSensitive(s, "launch")) rc = put_launch(&r, s, kernels, c, err);
    else rc = put_op(&r, s, err);
  }
  i = 0;
  for (const cJSON *x = outputs->child; x && !rc; x = x->next, i++) {
    int var = 0;
    if (need_var(&r, x, &var, err)) rc = MK_EPARSE;
    else mk_buf_printf(o, "    v%d = t%d;\n", sk->outputs[i], var);
  }
  if (!rc) mk_buf_printf(o, "%s  }\n", mk_buf_cstr(&restore));
  mk_buf_free(&restore);
  return rc ? rc : (o->err ? mk_errf(err, o->err, "%s: its replay is too large", where) : 0);
}

static const cJSON *plan_subkernel(const cJSON *sks, int index) {
  for (const cJSON *s = sks ? sks->child : NULL; s; s = s->next) {
    const cJSON *i = cJSON_GetObjectItemCaseSensitive(s, "index");
    if (cJSON_IsNumber(i) && i->valueint == index) return s;
  }
  return NULL;
}

int mk_export_triton_plan(const mk_graph *g, const mk_export_modelnew *m, const char *plan, mk_export_cuda *c,
                          mk_errmsg *err) {
  if (g == NULL || m == NULL || plan == NULL || c == NULL)
    return mk_errf(err, MK_EINVAL, "graph, ModelNew and plan are required");
  cJSON *root = cJSON_Parse(plan);
  const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "schema");
  if (root == NULL || !cJSON_IsString(schema) || strcmp(schema->valuestring, "mkevolve.export-triton/1") != 0) {
    cJSON_Delete(root);
    return mk_errf(err, MK_EPARSE, "not a plan of mkworker.export_triton (schema mkevolve.export-triton/1)");
  }
  int rc = c->nkernels ? mk_errf(err, MK_EINVAL, "Triton kernels planned twice") : read_kernels(root, c, err);
  const cJSON *sks = cJSON_GetObjectItemCaseSensitive(root, "subkernels");
  const cJSON *kernels = cJSON_GetObjectItemCaseSensitive(root, "kernels");
  const char *fwd = m->text ? export_modelnew_forward(m->text) : NULL;
  for (int i = 0; i < m->nsubkernels && !rc; i++) {
    const mk_export_subkernel *esk = &m->subkernels[i];
    if (esk->backend != MK_EXPORT_TRITON) continue;
    if (fwd == NULL) rc = mk_errf(err, MK_EPARSE, "the ModelNew's forward is missing");
    else if (esk->index != i) rc = mk_errf(err, MK_EPARSE, "subkernel sk%d is listed at place %d", esk->index, i);
    const cJSON *jsk = plan_subkernel(sks, esk->index);
    if (!rc && jsk == NULL)
      rc = mk_errf(err, MK_EPARSE, "subkernel sk%d (%s): the Triton plan has no recording of it", esk->index,
                   esk->name);
    if (rc) break;
    mk_export_cuda_sk *grown = realloc(c->sks, sizeof *grown * ((size_t)c->n + 1));
    if (grown == NULL) {
      rc = mk_errf(err, MK_ENOMEM, "out of memory");
      break;
    }
    c->sks = grown;
    mk_export_cuda_sk *x = &c->sks[c->n++]; /* freed with the rest, also after a failure */
    memset(x, 0, sizeof *x);
    x->index = esk->index;
    x->section = esk->section;
    x->backend = MK_EXPORT_TRITON;
    mk_buf_init(&x->code.cuda, 0);
    mk_buf_init(&x->code.kernels, 0);
    mk_buf_init(&x->code.launcher, 0);
    rc = export_recover_subkernel(g, esk, fwd, esk->index, &x->sk, err);
    if (!rc) rc = triton_launcher(g, &x->sk, esk, jsk, kernels, c, &x->code.launcher, err);
  }
  cJSON_Delete(root);
  return rc;
}

/* ---- the generated files -------------------------------------------------------------------- */

static const char helpers[] =
    "// What the Triton subkernels' replays (below, in forward) call: their inputs checked\n"
    "// against the shapes the export recorded, their kernels loaded from the embedded cubins\n"
    "// (cuModuleLoadData, torch's primary context) and launched on torch's current stream.\n"
    "namespace {\n\n"
    "void mk_tr_check(CUresult r, const char *what, const char *kernel) {\n"
    "  if (r == CUDA_SUCCESS) return;\n"
    "  const char *s = nullptr;\n"
    "  cuGetErrorString(r, &s);\n"
    "  throw std::runtime_error(std::string(what) + \" (Triton kernel \" + kernel + \"): \" + (s ? s : \"CUDA error\"));\n"
    "}\n\n"
    "std::string mk_tr_shape(at::IntArrayRef s) {\n"
    "  std::string out = \"[\";\n"
    "  for (size_t i = 0; i < s.size(); i++) out += (i ? \", \" : \"\") + std::to_string(s[i]);\n"
    "  return out + \"]\";\n"
    "}\n\n"
    "at::Device mk_tr_device(const at::Tensor &t, const char *where) {\n"
    "  if (!t.is_cuda())\n"
    "    throw std::runtime_error(std::string(where) + \" runs compiled Triton kernels: its tensors must be on a \"\n"
    "                             \"CUDA device, not \" + t.device().str());\n"
    "  return t.device();\n"
    "}\n\n"
    "// An argument of the subkernel: the shape and dtype recorded at export (the export is for the\n"
    "// shapes of get_inputs()); laid out as recorded (a copy when the layout differs, written back\n"
    "// after the subkernel by mk_tr_restore, so in-place updates reach the caller's tensor).\n"
    "at::Tensor mk_tr_input(const at::Tensor &t, std::vector<int64_t> sizes, std::vector<int64_t> strides,\n"
    "                       at::ScalarType dtype, const char *where, int arg) {\n"
    "  if (t.sizes() != at::IntArrayRef(sizes) || t.scalar_type() != dtype)\n"
    "    throw std::runtime_error(std::string(where) + \": argument \" + std::to_string(arg) + \" is \" +\n"
    "                             mk_tr_shape(t.sizes()) + \" \" + c10::toString(t.scalar_type()) +\n"
    "                             \", and its Triton kernels were exported for \" + mk_tr_shape(sizes) + \" \" +\n"
    "                             c10::toString(dtype) + \" (the shapes of get_inputs(): export again for others)\");\n"
    "  if (t.strides() == at::IntArrayRef(strides)) return t;\n"
    "  return at::empty_strided(sizes, strides, t.options()).copy_(t);\n"
    "}\n\n"
    "void mk_tr_restore(const at::Tensor &t, const at::Tensor &used) {\n"
    "  if (!used.is_same(t) && t.is_non_overlapping_and_dense()) const_cast<at::Tensor &>(t).copy_(used);\n"
    "}\n\n"
    "uint64_t mk_tr_ptr(const at::Tensor &t, bool align16, int kernel, const char *param) {\n"
    "  const uint64_t p = reinterpret_cast<uint64_t>(t.data_ptr());\n"
    "  if (!t.is_cuda() || (align16 && p % 16 != 0))\n"
    "    throw std::runtime_error(std::string(\"Triton kernel \") + triton::kernels[kernel].name + \": argument \" +\n"
    "                             param + (t.is_cuda() ? \" is not 16-byte aligned, as it was when the kernel was \"\n"
    "                                                   \"compiled\" : \" is not a CUDA tensor\"));\n"
    "  return p;\n"
    "}\n\n"
    "// Kernel k on device dev: loaded once per device, checked against the GPU.\n"
    "CUfunction mk_tr_function(int k, const at::Device &dev) {\n"
    "  static std::mutex mutex;\n"
    "  static std::map<std::pair<int, int>, CUfunction> loaded;\n"
    "  const std::lock_guard<std::mutex> lock(mutex);\n"
    "  const auto key = std::make_pair(k, static_cast<int>(dev.index()));\n"
    "  const auto hit = loaded.find(key);\n"
    "  if (hit != loaded.end()) return hit->second;\n"
    "  const triton::Kernel &kd = triton::kernels[k];\n"
    "  CUdevice cu = 0;\n"
    "  mk_tr_check(cuInit(0), \"cuInit\", kd.name);\n"
    "  mk_tr_check(cuDeviceGet(&cu, dev.index()), \"cuDeviceGet\", kd.name);\n"
    "  int major = 0, minor = 0;\n"
    "  mk_tr_check(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cu), \"cuDeviceGetAttribute\", kd.name);\n"
    "  mk_tr_check(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cu), \"cuDeviceGetAttribute\", kd.name);\n"
    "  if (major * 10 + minor != kd.arch)\n"
    "    throw std::runtime_error(std::string(\"Triton kernel \") + kd.name + \" was compiled for sm_\" +\n"
    "                             std::to_string(kd.arch) + \" (mkevolve export --arch \" + std::to_string(kd.arch) +\n"
    "                             \"), and GPU \" + std::to_string(dev.index()) + \" is sm_\" +\n"
    "                             std::to_string(major * 10 + minor) + \": export again with --arch \" +\n"
    "                             std::to_string(major * 10 + minor));\n"
    "  CUcontext ctx = nullptr;  // the runtime's (torch's) primary context of that device\n"
    "  mk_tr_check(cuDevicePrimaryCtxRetain(&ctx, cu), \"cuDevicePrimaryCtxRetain\", kd.name);\n"
    "  mk_tr_check(cuCtxSetCurrent(ctx), \"cuCtxSetCurrent\", kd.name);\n"
    "  CUmodule mod = nullptr;\n"
    "  CUfunction fn = nullptr;\n"
    "  mk_tr_check(cuModuleLoadData(&mod, kd.cubin), \"cuModuleLoadData\", kd.name);\n"
    "  mk_tr_check(cuModuleGetFunction(&fn, mod, kd.name), \"cuModuleGetFunction\", kd.name);\n"
    "  if (kd.shared > 49152) {  // as Triton's launcher: opt in to the dynamic shared memory it needs\n"
    "    int optin = 0, fixed = 0;\n"
    "    mk_tr_check(cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, cu),\n"
    "                \"cuDeviceGetAttribute\", kd.name);\n"
    "    mk_tr_check(cuFuncGetAttribute(&fixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn), \"cuFuncGetAttribute\", kd.name);\n"
    "    if (kd.shared > optin - fixed)\n"
    "      throw std::runtime_error(std::string(\"Triton kernel \") + kd.name + \" needs \" + std::to_string(kd.shared) +\n"
    "                               \" bytes of shared memory; GPU \" + std::to_string(dev.index()) + \" allows \" +\n"
    "                               std::to_string(optin - fixed));\n"
    "    mk_tr_check(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - fixed),\n"
    "                \"cuFuncSetAttribute\", kd.name);\n"
    "  }\n"
    "  loaded.emplace(key, fn);\n"
    "  return fn;\n"
    "}\n\n"
    "void mk_tr_launch(int k, const at::Device &dev, unsigned gx, unsigned gy, unsigned gz, void **args) {\n"
    "  if (gx == 0 || gy == 0 || gz == 0) return;  // as Triton: an empty grid launches nothing\n"
    "  const triton::Kernel &kd = triton::kernels[k];\n"
    "  CUfunction fn = mk_tr_function(k, dev);\n"
    "  CUstream stream = c10::cuda::getCurrentCUDAStream(dev.index()).stream();\n"
    "  mk_tr_check(cuLaunchKernel(fn, gx, gy, gz, 32 * kd.num_warps, 1, 1, kd.shared, stream, args, nullptr),\n"
    "              \"cuLaunchKernel\", kd.name);\n"
    "}\n\n"
    "}  // namespace\n\n";

const char *export_triton_helpers(void) { return helpers; }

int export_triton_files(const char *ns, const char *composed_from, const mk_export_cuda *c, mk_buf *cpp, mk_buf *h,
                        mk_errmsg *err) {
  mk_buf_printf(h, "// Generated by `mkevolve export` (docs/export.md): the Triton kernels compiled ahead of\n"
                   "// time for sm_%d, embedded in %s_triton.cpp as cubins.\n"
                   "#pragma once\n\n#include <cstddef>\n\nnamespace %s {\nnamespace triton {\n\n"
                   "struct Kernel {\n  const char *name;            // its entry point\n"
                   "  const unsigned char *cubin;  // the ELF image cuModuleLoadData takes\n  size_t size;\n"
                   "  int shared;                  // dynamic shared memory per block, bytes\n"
                   "  int num_warps;               // 32 * num_warps threads per block\n"
                   "  int arch;                    // compiled for sm_<arch> (90: sm_90)\n};\n\n"
                   "extern const Kernel kernels[];\nextern const int nkernels;\n\n"
                   "}  // namespace triton\n}  // namespace %s\n",
                c->arch, ns, ns, ns);
  mk_buf_printf(cpp, "// Generated by `mkevolve export` (docs/export.md) from %s\n"
                     "// The Triton kernels the ModelNew launches, compiled by Triton for sm_%d\n"
                     "// (mkworker.export_triton) for the specialisation each launch used.\n"
                     "#include \"%s_triton.h\"\n\nnamespace %s {\nnamespace triton {\nnamespace {\n",
                composed_from ? composed_from : "?", c->arch, ns, ns);
  for (int k = 0; k < c->nkernels; k++) {
    const mk_export_triton_kernel *x = &c->kernels[k];
    mk_buf_printf(cpp, "\n// %s: %zu bytes, %d warps, %d bytes of shared memory\n"
                       "alignas(16) const unsigned char cubin%d[] = {", x->name, x->size, x->num_warps, x->shared, k);
    for (size_t i = 0; i < x->size; i++) mk_buf_printf(cpp, "%s%u,", i % 32 ? "" : "\n", x->cubin[i]);
    mk_buf_puts(cpp, "\n};\n");
  }
  mk_buf_puts(cpp, "\n}  // namespace\n\nextern const Kernel kernels[] = {\n");
  for (int k = 0; k < c->nkernels; k++) {
    const mk_export_triton_kernel *x = &c->kernels[k];
    mk_buf_printf(cpp, "    {\"%s\", cubin%d, sizeof cubin%d, %d, %d, %d},\n", x->name, k, k, x->shared,
                  x->num_warps, x->arch);
  }
  if (c->nkernels == 0) mk_buf_puts(cpp, "    {\"\", nullptr, 0, 0, 1, 0},\n");
  mk_buf_printf(cpp, "};\nextern const int nkernels = %d;\n\n}  // namespace triton\n}  // namespace %s\n",
                c->nkernels, ns);
  return cpp->err || h->err ? mk_errf(err, MK_ERANGE, "the Triton kernels' file is too large") : 0;
}
