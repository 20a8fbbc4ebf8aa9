/* export_cuda.c — CUDA C++ subkernels of a ModelNew compiled into the export.
 *
 * The ModelNew says which subkernels run a CUDA candidate and, in its
 * forward, which values each one reads and returns (`v25, v26 =
 * sk5_run(y, v22)`). From those and the captured graph this file recovers
 * each such subkernel's nodes (everything its outputs depend on, back to
 * what it reads), asks the builtin CUDA generator for the same candidate
 * again (mk_builtin_cuda_cpp_for: its kernels, and its run() as C++) and
 * checks that the kernels it gets back are, byte for byte, the ones in the
 * ModelNew's CUDA source: a wrong node set, another generator version or an
 * edited file fails the export instead of exporting other kernels than the
 * verified ones. Only candidates of the builtin generator can be
 * regenerated; an LLM's CUDA candidate has its launcher in Python only. */
#include "mk_export.h"

#include "export_internal.h"
#include "mk_propose.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mk_export_cuda_free(mk_export_cuda *c) {
  if (c == NULL) return;
  for (int i = 0; i < c->n; i++) {
    mk_subkernel_free(&c->sks[i].sk);
    mk_builtin_cuda_cpp_free(&c->sks[i].code);
  }
  free(c->sks);
  for (int i = 0; i < c->nkernels; i++) free(c->kernels[i].cubin);
  free(c->kernels);
  memset(c, 0, sizeof *c);
}

int mk_export_cuda_count(const mk_export_cuda *c, mk_export_backend b) {
  int n = 0;
  for (int i = 0; c && i < c->n; i++) n += c->sks[i].backend == b;
  return n;
}

const mk_export_cuda_sk *mk_export_cuda_find_node(const mk_export_cuda *c, int node) {
  for (int i = 0; c && i < c->n; i++)
    for (int k = 0; k < c->sks[i].sk.nnodes; k++)
      if (c->sks[i].sk.nodes[k] == node) return &c->sks[i];
  return NULL;
}

/* ---- the ModelNew's forward ---------------------------------------------------- */

/* The forward of class ModelNew, or NULL. */
const char *export_modelnew_forward(const char *text) {
  const char *cls = strstr(text, "\nclass ModelNew(");
  return cls ? strstr(cls, "\n    def forward(self") : NULL;
}

/* The value a name of the forward stands for: v<id>, a forward parameter
 * (`params` is the def line) or self.<state name>; -1 when none. */
static int value_of_name(const mk_graph *g, const char *name, size_t len, const char *params) {
  int id;
  char buf[600];
  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, name, len);
  buf[len] = '\0';
  char tail;
  if (sscanf(buf, "v%d%c", &id, &tail) == 1) return id >= 0 && id < g->nvalues ? id : -1;
  if (strncmp(buf, "self.", 5) == 0) {
    for (int v = 0; v < g->nvalues; v++) {
      const mk_value *val = &g->values[v];
      if (val->kind != MK_VALUE_NODE && val->kind != MK_VALUE_INPUT && val->name && strcmp(val->name, buf + 5) == 0)
        return v;
    }
    return -1;
  }
  /* def forward(self, x, y): x is input 0 */
  int index = 0;
  for (const char *p = strchr(params, ','); p && *p != ')'; index++) {
    p++;
    while (*p == ' ') p++;
    size_t n = strcspn(p, ",)");
    if (n == len && memcmp(p, buf, len) == 0) {
      for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].kind == MK_VALUE_INPUT && g->values[v].index == index) return v;
      return -1;
    }
    p += n;
  }
  return -1;
}

/* "a, b" -> value ids; MK_EUNSUPPORTED on a name that is not a value. */
static int names_to_values(const mk_graph *g, const char *s, const char *e, const char *params, int *ids,
                           int max, int *n) {
  *n = 0;
  while (s < e) {
    while (s < e && (*s == ' ' || *s == ',')) s++;
    const char *t = s;
    while (t < e && *t != ',') t++;
    const char *end = t;
    while (end > s && end[-1] == ' ') end--;
    if (end > s) {
      if (*n >= max) return MK_ERANGE;
      int v = value_of_name(g, s, (size_t)(end - s), params);
      if (v < 0) return MK_EUNSUPPORTED;
      ids[(*n)++] = v;
    }
    s = t;
  }
  return 0;
}

typedef struct call_io {
  int *in, nin, *out, nout;
} call_io;

/* The k-th subkernel's call in the forward (its comment is the k-th
 * "# <name> — lines a-b — <variant>" line): what it reads and returns. */
static int read_call(const mk_graph *g, const char *fwd, int k, call_io *io, mk_errmsg *err) {
  const char *params = fwd + 1;
  const char *p = fwd;
  for (int seen = -1; p && seen < k;) {
    p = strchr(p + 1, '\n'); /* p: the newline before a line */
    const char *eol = p ? strchr(p + 1, '\n') : NULL, *dash = p ? strstr(p + 1, " \xe2\x80\x94 lines ") : NULL;
    if (p && strncmp(p, "\n        # ", 11) == 0 && dash && (eol == NULL || dash < eol)) seen++;
  }
  const char *line = p ? strchr(p + 1, '\n') : NULL;
  const char *eol = line ? strchr(line + 1, '\n') : NULL;
  const char *eq = line ? strstr(line, " = sk") : NULL;
  const char *open = eq ? strchr(eq, '(') : NULL;
  const char *close = NULL; /* the last ')' of the call's line */
  for (const char *q = open; q && eol && q < eol; q++)
    if (*q == ')') close = q;
  if (eol == NULL || eq == NULL || eq > eol || open == NULL || close == NULL || close > eol)
    return mk_errf(err, MK_EPARSE, "subkernel sk%d: its call is not in the ModelNew's forward", k);
  int rc = names_to_values(g, line + 1, eq, params, io->out, 256, &io->nout);
  if (!rc) rc = names_to_values(g, open + 1, close, params, io->in, 256, &io->nin);
  if (rc)
    return mk_errf(err, MK_EUNSUPPORTED, "subkernel sk%d: its call `%.*s` names a value the export cannot "
                                         "match with the captured graph (an in-place update of a state?)",
                   k, (int)(eol - line - 9), line + 9);
  return 0;
}

/* ---- nodes ------------------------------------------------------------------------ */

static bool in_list(const int *ids, int n, int v) {
  for (int i = 0; i < n; i++)
    if (ids[i] == v) return true;
  return false;
}

/* The nodes the outputs depend on, back to the values the call reads. */
static int slice_nodes(const mk_graph *g, const call_io *io, int *nodes, int *n, mk_errmsg *err) {
  int *stack = malloc(sizeof *stack * ((size_t)g->nnodes + 1));
  char *mark = calloc((size_t)g->nnodes + 1, 1);
  if (stack == NULL || mark == NULL) {
    free(stack);
    free(mark);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  int top = 0;
  *n = 0;
  for (int i = 0; i < io->nout; i++) {
    const mk_value *v = &g->values[io->out[i]];
    if (v->kind == MK_VALUE_NODE && v->producer >= 0 && !mark[v->producer]) {
      mark[v->producer] = 1;
      stack[top++] = v->producer;
    }
  }
  while (top > 0) {
    const mk_node *nd = &g->nodes[stack[--top]];
    nodes[(*n)++] = nd->id;
    for (int i = 0; i < nd->ninputs; i++) {
      const mk_value *v = &g->values[nd->inputs[i]];
      if (in_list(io->in, io->nin, nd->inputs[i]) || v->kind != MK_VALUE_NODE || v->producer < 0) continue;
      if (!mark[v->producer]) {
        mark[v->producer] = 1;
        stack[top++] = v->producer;
      }
    }
  }
  free(stack);
  free(mark);
  return 0;
}

static bool same_list(const int *a, int na, const int *b, int nb) {
  if (na != nb) return false;
  for (int i = 0; i < na; i++)
    if (a[i] != b[i]) return false;
  return true;
}

/* The subkernel the k-th call runs, checked against the call and the header. */
int export_recover_subkernel(const mk_graph *g, const mk_export_subkernel *esk, const char *fwd, int k,
                             mk_subkernel *sk, mk_errmsg *err) {
  int in[256], out[256];
  call_io io = {.in = in, .out = out};
  int rc = read_call(g, fwd, k, &io, err);
  if (rc) return rc;
  int *nodes = malloc(sizeof *nodes * ((size_t)g->nnodes + 1)), n = 0;
  if (nodes == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  rc = slice_nodes(g, &io, nodes, &n, err);
  if (!rc && n == 0) rc = mk_errf(err, MK_EUNSUPPORTED, "subkernel sk%d returns no value a node makes", k);
  if (!rc) rc = mk_subkernel_from_nodes(g, nodes, n, sk, err);
  free(nodes);
  if (rc) return rc;
  if (!same_list(sk->outputs, sk->noutputs, io.out, io.nout) || !same_list(sk->inputs, sk->ninputs, io.in, io.nin) ||
      sk->first_line != esk->first_line || sk->last_line != esk->last_line)
    return mk_errf(err, MK_EUNSUPPORTED, "subkernel sk%d (%s): the nodes recovered from its call do not make "
                                         "the subkernel the ModelNew names (lines %d-%d)",
                   k, esk->name, esk->first_line, esk->last_line);
  return 0;
}

/* ---- the kernels ----------------------------------------------------------------- */

/* The candidate's CUDA text as compose put it in namespace sk<section>:
 * `extern "C"` dropped (compose_cuda.c). */
static void without_extern_c(const char *src, mk_buf *out) {
  static const char ext[] = "extern \"C\"";
  for (const char *p = src;;) {
    const char *hit = strstr(p, ext);
    if (hit == NULL) {
      mk_buf_puts(out, p);
      return;
    }
    mk_buf_append(out, p, (size_t)(hit - p));
    p = hit + sizeof ext - 1;
    while (*p == ' ') p++;
  }
}

static int check_same_kernels(const mk_export_modelnew *m, const mk_export_subkernel *esk,
                              mk_builtin_cuda_cpp *code, mk_errmsg *err) {
  mk_buf want;
  mk_buf_init(&want, 0);
  mk_buf_printf(&want, "namespace sk%d {\n", esk->section);
  without_extern_c(mk_buf_cstr(&code->cuda), &want);
  mk_buf_printf(&want, "}  // namespace sk%d\n", esk->section);
  int rc = want.err ? mk_errf(err, MK_ENOMEM, "out of memory") : 0;
  if (!rc && strstr(m->text, mk_buf_cstr(&want)) == NULL)
    rc = mk_errf(err, MK_EUNSUPPORTED, "subkernel sk%d (%s, %s): the builtin CUDA generator no longer writes the "
                                       "kernels this ModelNew verified (another MKEvolve version, or an edited file)",
                 esk->index, esk->name, esk->variant);
  mk_buf_free(&want);
  return rc;
}

/* The exporter's C++ for a torch / view stage of a CUDA candidate. */
static int node_cpp(void *ctx, const mk_graph *g, const mk_node *n, mk_buf *out, mk_errmsg *err) {
  (void)ctx;
  return export_emit_node(g, n, out, err);
}

static int add_cuda_sk(const mk_graph *g, const mk_export_modelnew *m, const mk_export_subkernel *esk,
                       const char *fwd, mk_export_cuda *c, mk_errmsg *err) {
  if (strcmp(esk->origin, "builtin") != 0)
    return mk_errf(err, MK_EUNSUPPORTED, "subkernel sk%d (%s: %s) is a CUDA candidate from %s, not from the builtin "
                                         "generator: its launcher exists in Python only",
                   esk->index, esk->name, esk->variant, esk->origin[0] ? esk->origin : "an unknown origin");
  mk_export_cuda_sk *grown = realloc(c->sks, sizeof *grown * ((size_t)c->n + 1));
  if (grown == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  c->sks = grown;
  mk_export_cuda_sk *x = &c->sks[c->n];
  memset(x, 0, sizeof *x);
  x->index = esk->index;
  x->section = esk->section;
  x->backend = MK_EXPORT_CUDA;
  int rc = export_recover_subkernel(g, esk, fwd, esk->index, &x->sk, err);
  char ns[32];
  snprintf(ns, sizeof ns, "sk%d::launch", esk->section); /* host functions beside the kernels */
  if (!rc) rc = mk_builtin_cuda_cpp_for(g, &x->sk, esk->variant, ns, node_cpp, NULL, &x->code, err);
  if (!rc) rc = check_same_kernels(m, esk, &x->code, err);
  c->n++; /* freed with the rest, also after a failure */
  return rc;
}

int mk_export_cuda_plan(const mk_graph *g, const mk_export_modelnew *m, mk_export_cuda *out, mk_errmsg *err) {
  memset(out, 0, sizeof *out);
  if (g == NULL || m == NULL) return mk_errf(err, MK_EINVAL, "graph and ModelNew are required");
  const char *fwd = m->text ? export_modelnew_forward(m->text) : NULL;
  int rc = 0;
  for (int i = 0; i < m->nsubkernels && !rc; i++) {
    const mk_export_subkernel *esk = &m->subkernels[i];
    if (esk->backend != MK_EXPORT_CUDA) continue;
    if (fwd == NULL) return mk_errf(err, MK_EPARSE, "the ModelNew's forward is missing");
    if (esk->index != i) return mk_errf(err, MK_EPARSE, "subkernel sk%d is listed at place %d", esk->index, i);
    rc = add_cuda_sk(g, m, esk, fwd, out, err);
    if (rc && err && !strstr(err->text, "sk")) {
      char tmp[sizeof err->text];
      snprintf(tmp, sizeof tmp, "%s", err->text);
      mk_errf(err, rc, "subkernel sk%d (%s): %s", esk->index, esk->name, tmp);
    }
  }
  return rc;
}

/* ---- the generated files --------------------------------------------------------- */

static const char helpers[] =
    "// What the CUDA subkernels' launchers (below, in forward) call: the C++ of the\n"
    "// helpers their Python run() uses (_mk_full, _mk_inplace, _mk_bstrides).\n"
    "namespace {\n\n"
    "std::vector<int64_t> mk_broadcast(std::initializer_list<at::IntArrayRef> shapes) {\n"
    "  std::vector<int64_t> out;\n"
    "  for (at::IntArrayRef s : shapes) out = at::infer_size(out, s);\n"
    "  return out;\n"
    "}\n\n"
    "// A leaf read at the flat offset: it must have the run's shape, as at capture.\n"
    "at::Tensor mk_full(const at::Tensor &t, const std::vector<int64_t> &shape) {\n"
    "  TORCH_CHECK(t.sizes() == at::IntArrayRef(shape), \"operand shape \", t.sizes(),\n"
    "              \" differs from the captured one \", at::IntArrayRef(shape));\n"
    "  return t.contiguous();\n"
    "}\n\n"
    "// A leaf written in place: the run's shape and contiguous, so the kernel writes it.\n"
    "at::Tensor mk_inplace(const at::Tensor &t, const std::vector<int64_t> &shape) {\n"
    "  TORCH_CHECK(t.sizes() == at::IntArrayRef(shape) && t.is_contiguous(),\n"
    "              \"an in-place operand must be contiguous with the run's shape\");\n"
    "  return t;\n"
    "}\n\n"
    "// Strides of t broadcast to shape (0 on broadcast dims), whatever its layout.\n"
    "std::vector<int64_t> mk_bstrides(const at::Tensor &t, const std::vector<int64_t> &shape) {\n"
    "  return t.expand(shape).strides().vec();\n"
    "}\n\n"
    "// The product of s[a:b], clamped as a Python slice.\n"
    "int64_t mk_prod(const std::vector<int64_t> &s, size_t a, size_t b) {\n"
    "  int64_t p = 1;\n"
    "  for (size_t i = a; i < b && i < s.size(); i++) p *= s[i];\n"
    "  return p;\n"
    "}\n\n"
    "// s[:lo] + (1,) * (hi - lo + 1) + s[hi + 1:] with keepdim, s[:lo] + s[hi + 1:] without.\n"
    "std::vector<int64_t> mk_reduced_shape(const std::vector<int64_t> &s, size_t lo, size_t hi, bool keep) {\n"
    "  std::vector<int64_t> out(s.begin(), s.begin() + std::min(lo, s.size()));\n"
    "  if (keep) out.insert(out.end(), hi - lo + 1, 1);\n"
    "  if (hi + 1 < s.size()) out.insert(out.end(), s.begin() + (hi + 1), s.end());\n"
    "  return out;\n"
    "}\n\n"
    "// Output length of a pooling window over `size` (torch's pooling_output_shape; the\n"
    "// Python launchers' _pool_out_size).\n"
    "int64_t mk_pool_out_size(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {\n"
    "  const int64_t num = size + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);\n"
    "  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;  // Python's floor division\n"
    "  if (ceil_mode && (out - 1) * s >= size + p) out -= 1;\n"
    "  TORCH_CHECK(out >= 1, \"pooling window larger than the padded input\");\n"
    "  return out;\n"
    "}\n\n"
    "// The pointer a kernel gets: a CUDA tensor of the kernel's element type.\n"
    "template <typename T>\n"
    "T *mk_ptr(const at::Tensor &t) {\n"
    "  TORCH_CHECK(t.is_cuda(), \"a CUDA subkernel's operand must be a CUDA tensor, not on \", t.device());\n"
    "  TORCH_CHECK(t.scalar_type() == c10::CppTypeToScalarType<T>::value, \"a CUDA subkernel's operand is \",\n"
    "              t.scalar_type(), \", not \", c10::CppTypeToScalarType<T>::value);\n"
    "  return t.data_ptr<T>();\n"
    "}\n\n"
    "// torch's current stream on t's device: kernels queue behind the ATen calls before them.\n"
    "void *mk_stream(const at::Tensor &t) {\n"
    "  TORCH_CHECK(t.is_cuda(), \"CUDA kernels need CUDA tensors, not \", t.device());\n"
    "  return static_cast<void *>(c10::cuda::getCurrentCUDAStream(t.device().index()).stream());\n"
    "}\n\n"
    "void mk_launch(const char *kernel, const char *error) {\n"
    "  if (error != nullptr) throw std::runtime_error(std::string(kernel) + \": \" + error);\n"
    "}\n\n"
    "}  // namespace\n\n";

const char *export_cuda_helpers(void) { return helpers; }

/* "name sig" lines -> host launch functions (declaration into h, definition into cu). */
static void launch_functions(const char *ns, const mk_export_cuda_sk *x, mk_buf *cu, mk_buf *h) {
  const char *lines = x->code.kernels.data ? x->code.kernels.data : "";
  for (const char *p = lines; *p;) {
    size_t nl = strcspn(p, " "), sl = strcspn(p + nl + 1, "\n");
    mk_buf head;
    mk_buf_init(&head, 0);
    mk_buf_printf(&head, "const char *%.*s(long long grid, int block, void *stream", (int)nl, p);
    for (size_t i = 0; i < sl; i++) {
      char t = p[nl + 1 + i];
      mk_buf_printf(&head, t == 'q' ? ", long long a%zu" : t == 'b' ? ", bool *a%zu" : ", float *a%zu", i);
    }
    mk_buf_puts(&head, ")");
    mk_buf_printf(h, "%s;\n", mk_buf_cstr(&head));
    mk_buf_printf(cu, "%s {\n  if (grid > 2147483647LL) return \"grid too large\";\n"
                      "  ::%s::sk%d::%.*s<<<dim3((unsigned)grid), dim3((unsigned)block), 0, (cudaStream_t)stream>>>(",
                  mk_buf_cstr(&head), ns, x->section, (int)nl, p);
    mk_buf_free(&head);
    for (size_t i = 0; i < sl; i++) mk_buf_printf(cu, "%sa%zu", i ? ", " : "", i);
    mk_buf_puts(cu, ");\n  const cudaError_t e = cudaGetLastError();\n"
                    "  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);\n}\n");
    p += nl + 1 + sl;
    if (*p == '\n') p++;
  }
}

static bool section_written(const mk_export_cuda *c, int upto, int section) {
  for (int i = 0; i < upto; i++)
    if (c->sks[i].backend == MK_EXPORT_CUDA && c->sks[i].section == section) return true;
  return false;
}

int export_cuda_kernels(const char *ns, const char *composed_from, const mk_export_cuda *c, mk_buf *cu,
                        mk_buf *h, mk_errmsg *err) {
  mk_buf_printf(h, "// Generated by `mkevolve export` (docs/export.md): the host functions that launch the\n"
                   "// CUDA C++ subkernels' kernels (%s_kernels.cu) on a stream. Each returns nullptr, or the\n"
                   "// CUDA error of the launch. No CUDA or torch header needed to include it.\n"
                   "#pragma once\n\nnamespace %s {\n", ns, ns);
  mk_buf_printf(cu, "// Generated by `mkevolve export` (docs/export.md) from %s\n"
                    "// The kernels of the CUDA C++ subkernels, as the builtin generator wrote them and the\n"
                    "// ModelNew verified them (one namespace per kernel section, `extern \"C\"` dropped as\n"
                    "// in the ModelNew's load_inline source), and the host functions that launch them.\n"
                    "#include <cuda_runtime.h>\n\n#include \"%s_kernels.h\"\n",
                composed_from ? composed_from : "?", ns);
  for (int i = 0; i < c->n; i++) {
    const mk_export_cuda_sk *x = &c->sks[i];
    if (x->backend != MK_EXPORT_CUDA || section_written(c, i, x->section))
      continue; /* Triton ones have cubins; twins share their section's kernels */
    mk_buf_printf(cu, "\nnamespace %s {\nnamespace sk%d {\n", ns, x->section);
    without_extern_c(x->code.cuda.data ? x->code.cuda.data : "", cu);
    mk_buf_printf(cu, "\nnamespace launch {\n\n");
    mk_buf_printf(h, "namespace sk%d {\nnamespace launch {\n", x->section);
    launch_functions(ns, x, cu, h);
    mk_buf_printf(cu, "\n}  // namespace launch\n}  // namespace sk%d\n}  // namespace %s\n", x->section, ns);
    mk_buf_printf(h, "}  // namespace launch\n}  // namespace sk%d\n", x->section);
  }
  mk_buf_printf(h, "}  // namespace %s\n", ns);
  return cu->err || h->err ? mk_errf(err, MK_ERANGE, "the CUDA kernels' file is too large") : 0;
}
