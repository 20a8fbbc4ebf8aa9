/* compose_cuda.c — CUDA C++ candidates in a composed ModelNew, in
 * KernelBench's own format: the CUDA source compiled by
 * torch.utils.cpp_extension.load_inline at import, kernels launched through
 * the functions it binds (KernelBench's example ModelNew does the same).
 *
 * Each CUDA section's kernels go into a C++ namespace of their own (sk<i>),
 * with `extern "C"` dropped so that the same kernel name in two sections
 * (every builtin module starts at _k1_) never collides; one host function
 * per kernel (sk<i>_<kernel>) checks the tensors and launches it on torch's
 * current stream, so CUDA-event timing and CUDA-graph capture see it as
 * they see Triton's launches. One load_inline call builds every section
 * (one nvcc run per ModelNew), named by the hash of its text so a file
 * loaded again reuses torch's build. The section's Python keeps its run()
 * unchanged: `_mk_cuda` becomes sk<i>__mk_cuda, a small launcher over the
 * built module. */
#include "compose_internal.h"

#include "mk_backend.h"
#include "mk_sha256.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

void compose_cuda_init(compose_cuda *cc) {
  mk_buf_init(&cc->decls, 0);
  mk_buf_init(&cc->source, 0);
  mk_buf_init(&cc->names, 0);
  cc->sections = 0;
  cc->launcher = false;
}

void compose_cuda_free(compose_cuda *cc) {
  mk_buf_free(&cc->decls);
  mk_buf_free(&cc->source);
  mk_buf_free(&cc->names);
}

/* The CUDA text with `extern "C"` dropped: inside a namespace the kernels
 * need C++ names, or two sections' _k1_ kernels would be one symbol. */
static void append_without_extern_c(mk_buf *out, const char *src, size_t len) {
  static const char ext[] = "extern \"C\"";
  const char *p = src, *end = src + len;
  while (p < end) {
    const char *hit = NULL;
    for (const char *q = p; q + sizeof ext - 1 <= end && !hit; q++)
      if (memcmp(q, ext, sizeof ext - 1) == 0) hit = q;
    if (hit == NULL) break;
    mk_buf_append(out, p, (size_t)(hit - p));
    p = hit + sizeof ext - 1;
    while (p < end && *p == ' ') p++;
  }
  mk_buf_append(out, p, (size_t)(end - p));
}

/* The host function that launches kernel k of namespace ns. */
static void emit_launch_function(compose_cuda *cc, const char *ns, const char *prefix,
                                 const mk_backend_kernel *k) {
  mk_buf *s = &cc->source;
  mk_buf head;
  mk_buf_init(&head, 0);
  mk_buf_printf(&head, "void %s%s(int64_t gx, int64_t gy, int64_t gz, int64_t bx, int64_t by, "
                       "int64_t bz, int64_t shared", prefix, k->name);
  for (int i = 0; k->sig[i]; i++)
    mk_buf_printf(&head, k->sig[i] == 'q' ? ", int64_t a%d" : ", torch::Tensor a%d", i);
  mk_buf_puts(&head, ")");
  mk_buf_printf(&cc->decls, "%s;\n", mk_buf_cstr(&head));
  mk_buf_printf(&cc->names, "\"%s%s\", ", prefix, k->name);
  mk_buf_printf(s, "\n%s {\n", mk_buf_cstr(&head));
  mk_buf_free(&head);
  int first_tensor = -1;
  for (int i = 0; k->sig[i]; i++) {
    if (k->sig[i] == 'q') continue;
    if (first_tensor < 0) first_tensor = i;
    mk_buf_printf(s, "  mk_check_tensor(a%d, %s, \"%s\", %d);\n", i,
                  k->sig[i] == 'f' ? "at::kFloat" : "at::kBool", k->name, i);
  }
  mk_buf_puts(s, "  if (gx <= 0 || gy <= 0 || gz <= 0) return;  // an empty grid: nothing to do\n");
  if (first_tensor >= 0)
    mk_buf_printf(s, "  const c10::cuda::CUDAGuard guard(a%d.device());\n", first_tensor);
  mk_buf_printf(s, "  %s::%s<<<dim3((unsigned)gx, (unsigned)gy, (unsigned)gz), "
                   "dim3((unsigned)bx, (unsigned)by, (unsigned)bz), (size_t)shared, "
                   "c10::cuda::getCurrentCUDAStream()>>>(", ns, k->name);
  for (int i = 0; k->sig[i]; i++) {
    if (i) mk_buf_puts(s, ", ");
    if (k->sig[i] == 'q') mk_buf_printf(s, "(long long)a%d", i);
    else mk_buf_printf(s, "a%d.data_ptr<%s>()", i, k->sig[i] == 'f' ? "float" : "bool");
  }
  mk_buf_puts(s, ");\n  C10_CUDA_KERNEL_LAUNCH_CHECK();\n}\n");
}

/* The module line `MK_CUDA_SOURCE = r"""` starts on, and the end of the
 * line its closing quotes are on. */
static void cuda_block(const char *module, const char *src, size_t len, const char **from,
                       const char **to) {
  const char *b = src;
  while (b > module && !(b[-1] == '\n' && strncmp(b, "MK_CUDA_SOURCE = r", 18) == 0)) b--;
  const char *e = src + len + 3; /* past the closing """ */
  while (*e && *e != '\n') e++;
  *from = b;
  *to = *e ? e + 1 : e;
}

static const char launcher_class[] =
    "\n\nclass _MkCudaKernels:\n"
    "    \"\"\"`_mk_cuda` of a CUDA C++ subkernel of this file: launches its kernels\n"
    "    through the functions load_inline built (below), on torch's current stream.\"\"\"\n"
    "\n"
    "    def __init__(self, prefix, kernels):\n"
    "        self._prefix = prefix\n"
    "        self._kernels = dict(kernels)\n"
    "        self._fns = {}\n"
    "\n"
    "    def launch(self, name, grid, block, args, shared=0):\n"
    "        sig = self._kernels[name]\n"
    "        if len(args) != len(sig):\n"
    "            raise TypeError(f\"{name} takes {len(sig)} arguments, {len(args)} given\")\n"
    "        fn = self._fns.get(name)\n"
    "        if fn is None:  # looked up once: the build is made after the sections\n"
    "            fn = self._fns[name] = getattr(_mk_cuda_ext, self._prefix + name)\n"
    "        fn(*(*grid, 1, 1)[:3], *(*block, 1, 1)[:3], shared, *args)\n";

void compose_cuda_launcher(compose_cuda *cc, mk_buf *sections) {
  if (!cc->launcher) mk_buf_puts(sections, launcher_class);
  cc->launcher = true;
}

int compose_cuda_section(compose_cuda *cc, const char *source, const char *prefix,
                         mk_buf *sections, mk_buf *imports, mk_errmsg *err) {
  const char *src = NULL;
  size_t len = 0;
  int first_line = 0;
  int rc = mk_backend_candidate_source(source, &src, &len, &first_line, err);
  if (rc) return rc == MK_ENOENT ? mk_errf(err, MK_EPARSE, "a CUDA candidate without MK_CUDA_SOURCE") : rc;
  mk_backend_kernel ks[MK_BACKEND_MAX_KERNELS];
  int nk = 0;
  if ((rc = mk_backend_candidate_kernels(source, ks, MK_BACKEND_MAX_KERNELS, &nk, err)) != 0) return rc;
  char ns[32];
  snprintf(ns, sizeof ns, "%.*s", (int)strcspn(prefix, "_"), prefix); /* "sk3_" -> "sk3" */
  /* The kernels, in the section's namespace. */
  mk_buf_printf(&cc->source, "\n// ---- %s ----\nnamespace %s {\n", ns, ns);
  append_without_extern_c(&cc->source, src, len);
  mk_buf_printf(&cc->source, "}  // namespace %s\n", ns);
  for (int i = 0; i < nk; i++) emit_launch_function(cc, ns, prefix, &ks[i]);
  /* The Python: the module without its CUDA text, names prefixed. */
  const char *from, *to;
  cuda_block(source, src, len, &from, &to);
  mk_buf py;
  mk_buf_init(&py, 0);
  mk_buf_append(&py, source, (size_t)(from - source));
  mk_buf_printf(&py, "# MK_CUDA_SOURCE: namespace %s of _mk_cuda_source (below)\n", ns);
  mk_buf_puts(&py, to);
  compose_cuda_launcher(cc, sections); /* when the caller did not */
  cc->sections++;
  static const char *const extra[] = {"_mk_cuda", "MK_CUDA_KERNELS", "MK_BACKEND", NULL};
  rc = py.err ? py.err : compose_rewrite(mk_buf_cstr(&py), prefix, extra, sections, imports);
  mk_buf_free(&py);
  if (rc) return mk_errf(err, rc, "the CUDA section could not be written");
  mk_buf_printf(sections, "\n\n%s_mk_cuda = _MkCudaKernels(\"%s\", %sMK_CUDA_KERNELS)\n", prefix,
                prefix, prefix);
  mk_buf_puts(imports, "from torch.utils.cpp_extension import load_inline\n");
  if (cc->source.err || cc->decls.err || cc->names.err || sections->err || imports->err)
    return mk_errf(err, MK_ERANGE, "composed file too large");
  return 0;
}

/* Helpers of every launch function, once. */
static const char cuda_head[] =
    "#include <torch/extension.h>\n"
    "#include <c10/cuda/CUDAException.h>\n"
    "#include <c10/cuda/CUDAGuard.h>\n"
    "#include <c10/cuda/CUDAStream.h>\n"
    "\n"
    "// The launch functions' check of a tensor argument (MK_CUDA_KERNELS: f, b).\n"
    "static void mk_check_tensor(const torch::Tensor &t, at::ScalarType want, const char *kernel,\n"
    "                            int i) {\n"
    "  TORCH_CHECK(t.is_cuda(), kernel, \": argument \", i, \" must be a CUDA tensor, not on \",\n"
    "              t.device());\n"
    "  TORCH_CHECK(t.scalar_type() == want, kernel, \": argument \", i, \" must be \",\n"
    "              c10::toString(want), \", not \", c10::toString(t.scalar_type()));\n"
    "}\n";

int compose_cuda_build(compose_cuda *cc, mk_buf *out) {
  if (cc->sections == 0) return 0;
  mk_buf text;
  mk_buf_init(&text, 0);
  mk_buf_puts(&text, cuda_head);
  mk_buf_append(&text, cc->source.data, cc->source.len);
  char hex[65];
  mk_sha256 h;
  uint8_t digest[32];
  mk_sha256_init(&h);
  mk_sha256_update(&h, cc->decls.data, cc->decls.len);
  mk_sha256_update(&h, text.data, text.len);
  mk_sha256_final(&h, digest);
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  mk_buf_puts(out, "\n\n# ---- CUDA C++ kernels of the chosen subkernels, built once at import by\n"
                   "# torch.utils.cpp_extension.load_inline (nvcc; KernelBench's format). ----\n");
  mk_buf_printf(out, "_mk_cuda_cpp = r\"\"\"\n%s\"\"\"\n\n", mk_buf_cstr(&cc->decls));
  mk_buf_printf(out, "_mk_cuda_source = r\"\"\"\n%s\"\"\"\n\n", mk_buf_cstr(&text));
  /* Named by content: torch rebuilds only when the text changed. */
  int nlen = cc->names.len >= 2 ? (int)cc->names.len - 2 : 0; /* without the last ", " */
  mk_buf_printf(out, "_mk_cuda_ext = load_inline(\n    name=\"mk_cuda_%.16s\",\n"
                     "    cpp_sources=_mk_cuda_cpp,\n    cuda_sources=_mk_cuda_source,\n"
                     "    functions=[%.*s],\n    extra_cuda_cflags=[\"-O3\"],\n    verbose=False,\n)\n",
                hex, nlen, mk_buf_cstr(&cc->names));
  int rc = text.err;
  mk_buf_free(&text);
  return rc ? rc : out->err;
}
