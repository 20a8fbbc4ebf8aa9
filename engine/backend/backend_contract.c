/* backend_contract.c — the CUDA C++ candidate contract (docs/candidates.md,
 * "CUDA C++ candidates") checked on a module's text, without compiling it:
 * the kernel table `MK_CUDA_KERNELS`, and whether the kernels it lists are
 * `extern "C" __global__` functions of `MK_CUDA_SOURCE` whose parameters
 * match their signatures.
 *
 * Why before NVRTC: a module that breaks the contract may still compile
 * (a mangled kernel name, an `int *` where the launcher passes a float32
 * tensor), and would fail later where the reason is poorer (a missing
 * function at cuModuleGetFunction on a GPU, a wild pointer) or never on a
 * CPU worker, which stops at the first launch. Compile errors themselves
 * stay NVRTC's to report, on the module's lines.
 *
 * The scan is textual (comments and string literals skipped, braces and
 * parentheses balanced); it reads declarations, never evaluates code. */
#include "backend_internal.h"
#include "mk_backend.h"

#include <stdio.h>
#include <string.h>

static bool ident_char(char c) {
  return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The next "..." string at or after *p before `end`, copied into out. */
static bool next_string(const char **p, const char *end, char *out, size_t size) {
  const char *q = *p;
  while (q < end && *q != '"') q++;
  if (q >= end) return false;
  const char *s = ++q;
  while (q < end && *q != '"') q++;
  if (q >= end || (size_t)(q - s) >= size) return false;
  memcpy(out, s, (size_t)(q - s));
  out[q - s] = '\0';
  *p = q + 1;
  return true;
}

int mk_backend_candidate_kernels(const char *module_text, mk_backend_kernel *out, int max, int *n,
                                 mk_errmsg *err) {
  *n = 0;
  const char *p = module_text ? mk_backend_line_starting(module_text, "MK_CUDA_KERNELS = {") : NULL;
  if (p == NULL) return mk_errf(err, MK_EPARSE, "a CUDA candidate without MK_CUDA_KERNELS");
  p += strlen("MK_CUDA_KERNELS = {");
  const char *end = strchr(p, '}');
  if (end == NULL) return mk_errf(err, MK_EPARSE, "MK_CUDA_KERNELS is not closed");
  for (;;) {
    mk_backend_kernel k;
    if (!next_string(&p, end, k.name, sizeof k.name)) break;
    if (!next_string(&p, end, k.sig, sizeof k.sig))
      return mk_errf(err, MK_EPARSE, "MK_CUDA_KERNELS: kernel %s without a readable signature", k.name);
    if (*n >= max) return mk_errf(err, MK_EPARSE, "MK_CUDA_KERNELS: more than %d kernels", max);
    for (const char *c = k.name; *c; c++)
      if (!ident_char(*c)) return mk_errf(err, MK_EPARSE, "MK_CUDA_KERNELS: %s is not a kernel name", k.name);
    if (k.name[0] == '\0' || k.sig[strspn(k.sig, "fbq")] != '\0')
      return mk_errf(err, MK_EPARSE, "MK_CUDA_KERNELS: signature \"%s\" of %s (f, b, q only)", k.sig,
                     k.name[0] ? k.name : "\"\"");
    out[(*n)++] = k;
  }
  return *n > 0 ? 0 : mk_errf(err, MK_EPARSE, "MK_CUDA_KERNELS names no kernel");
}

/* ---- the CUDA text's kernels ---------------------------------------------- */

typedef struct cuda_kernel {
  char name[128];
  bool extern_c;  /* `extern "C"` in its own declaration */
  const char *params, *params_end; /* inside the parentheses */
  const char *at;                  /* `__global__` */
} cuda_kernel;

/* Past a comment, string or character literal starting at p (p itself
 * when there is none). */
static const char *skip_noise(const char *p, const char *end) {
  if (p + 1 < end && p[0] == '/' && p[1] == '/') {
    while (p < end && *p != '\n') p++;
    return p;
  }
  if (p + 1 < end && p[0] == '/' && p[1] == '*') {
    const char *q = p + 2;
    while (q + 1 < end && !(q[0] == '*' && q[1] == '/')) q++;
    return q + 1 < end ? q + 2 : end;
  }
  if (*p == '"' || *p == '\'') {
    char quote = *p;
    const char *q = p + 1;
    while (q < end && *q != quote && *q != '\n') q += (*q == '\\' && q + 1 < end) ? 2 : 1;
    return q < end ? q + 1 : end;
  }
  return p;
}

static bool word_at(const char *p, const char *start, const char *end, const char *word) {
  size_t n = strlen(word);
  return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 && (p == start || !ident_char(p[-1])) &&
         (p + n == end || !ident_char(p[n]));
}

/* The matching ')' of the '(' at p, or NULL. */
static const char *close_paren(const char *p, const char *end) {
  int depth = 0;
  for (const char *q = p; q < end;) {
    const char *s = skip_noise(q, end);
    if (s != q) {
      q = s;
      continue;
    }
    if (*q == '(') depth++;
    else if (*q == ')' && --depth == 0) return q;
    q++;
  }
  return NULL;
}

/* The name and parameter list of the kernel declared after `__global__` at
 * g: the first identifier followed by '(' that is not an attribute
 * (`__launch_bounds__(256)`). False when the declaration cannot be read. */
static bool read_declaration(const char *g, const char *end, cuda_kernel *k) {
  const char *q = g + strlen("__global__");
  while (q < end && *q != '{' && *q != ';') {
    const char *s = skip_noise(q, end);
    if (s != q) {
      q = s;
      continue;
    }
    if (!ident_char(*q)) {
      q++;
      continue;
    }
    const char *w = q;
    while (q < end && ident_char(*q)) q++;
    const char *after = q;
    while (after < end && (*after == ' ' || *after == '\t' || *after == '\n' || *after == '\r')) after++;
    if (after >= end || *after != '(') continue;
    const char *close = close_paren(after, end);
    if (close == NULL) return false;
    if ((size_t)(q - w) == strlen("__launch_bounds__") && memcmp(w, "__launch_bounds__", (size_t)(q - w)) == 0) {
      q = close + 1;
      continue;
    }
    snprintf(k->name, sizeof k->name, "%.*s", (int)(q - w), w);
    k->params = after + 1;
    k->params_end = close;
    return true;
  }
  return false;
}

/* Every `__global__` function of the CUDA text, in order, and whether it is
 * `extern "C"` (in its declaration or an `extern "C" {}` block); *block
 * gets the first such block, or NULL. Returns the number found (at most
 * max). */
static int find_kernels(const char *src, size_t len, cuda_kernel *out, int max, const char **block) {
  const char *end = src + len;
  int n = 0, depth = 0;
  int c_blocks[16], nc = 0; /* brace depths of open extern "C" { blocks */
  bool pending_c = false;   /* `extern "C"` seen in the current declaration */
  *block = NULL;
  for (const char *p = src; p < end;) {
    if (p + 10 <= end && memcmp(p, "extern \"C\"", 10) == 0 && word_at(p, src, end, "extern")) {
      const char *q = p + 10;
      while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
      if (q < end && *q == '{') {
        if (*block == NULL) *block = p;
        if (nc < 16) c_blocks[nc++] = depth + 1;
        depth++;
        p = q + 1;
        continue;
      }
      pending_c = true;
      p += 10;
      continue;
    }
    const char *s = skip_noise(p, end);
    if (s != p) {
      p = s;
      continue;
    }
    if (*p == '{' || *p == '}' || *p == ';') {
      if (*p == '{') depth++;
      if (*p == '}') {
        if (nc > 0 && c_blocks[nc - 1] == depth) nc--;
        depth--;
      }
      pending_c = false;
      p++;
      continue;
    }
    if (word_at(p, src, end, "__global__")) {
      cuda_kernel k = {.at = p, .extern_c = pending_c || nc > 0};
      if (read_declaration(p, end, &k) && n < max) out[n++] = k;
      p += strlen("__global__");
      continue;
    }
    p++;
  }
  return n;
}

/* ---- parameters against signature letters --------------------------------- */

static bool has_word(const char *p, const char *end, const char *word) {
  for (const char *q = p; q < end; q++)
    if (word_at(q, p, end, word)) return true;
  return false;
}

static bool is_pointer(const char *p, const char *end) {
  return memchr(p, '*', (size_t)(end - p)) != NULL || memchr(p, '[', (size_t)(end - p)) != NULL;
}

static bool integer_type(const char *p, const char *end) {
  static const char *const words[] = {"int", "long", "short", "unsigned", "signed", "size_t",
                                      "int64_t", "uint64_t", "int32_t", "uint32_t", "ptrdiff_t"};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (has_word(p, end, words[i])) return true;
  return false;
}

/* Why parameter [p, end) cannot take signature letter `kind`, or NULL. */
static const char *param_mismatch(char kind, const char *p, const char *end) {
  bool ptr = is_pointer(p, end);
  switch (kind) {
  case 'f':
    if (!ptr || !has_word(p, end, "float")) return "a float32 tensor (f) is passed as `float *`";
    return NULL;
  case 'b':
    if (!ptr || !has_word(p, end, "bool")) return "a bool tensor (b) is passed as `bool *`";
    return NULL;
  default:
    if (ptr || !integer_type(p, end) || has_word(p, end, "float") || has_word(p, end, "double"))
      return "a Python int (q) is passed as a 64-bit integer (`long long`)";
    return NULL;
  }
}

static void trimmed(const char **p, const char **end) {
  while (*p < *end && (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')) (*p)++;
  while (*end > *p && ((*end)[-1] == ' ' || (*end)[-1] == '\t' || (*end)[-1] == '\n' || (*end)[-1] == '\r'))
    (*end)--;
}

/* The parameters of kernel k, split at top-level commas: *n of them (0 for
 * `()` and `(void)`), at most max kept in from/to. */
static void split_params(const cuda_kernel *k, const char **from, const char **to, int max, int *n) {
  const char *a = k->params, *b = k->params_end;
  trimmed(&a, &b);
  *n = 0;
  if (a == b || ((size_t)(b - a) == 4 && memcmp(a, "void", 4) == 0)) return;
  int depth = 0;
  const char *start = k->params;
  for (const char *q = k->params; q <= k->params_end; q++) {
    if (q < k->params_end && (*q == '(' || *q == '<' || *q == '[')) depth++;
    else if (q < k->params_end && (*q == ')' || *q == '>' || *q == ']')) depth--;
    if (q < k->params_end && !(*q == ',' && depth == 0)) continue;
    const char *s = start, *e = q;
    trimmed(&s, &e);
    if (*n < max) {
      from[*n] = s;
      to[*n] = e;
    }
    (*n)++;
    start = q + 1;
  }
}

/* Checks kernel k's parameters against `sig`: their number, then each
 * one's kind; `at_line` names the kernel's line in errors. */
static int check_params(const cuda_kernel *k, const char *sig, int at_line, mk_errmsg *err) {
  const char *from[64], *to[64];
  int n = 0;
  split_params(k, from, to, 64, &n);
  int want = (int)strlen(sig);
  if (n != want)
    return mk_errf(err, MK_EPARSE, "line %d: kernel %s takes %d parameter%s, but its MK_CUDA_KERNELS "
                   "signature \"%s\" has %d (one letter per parameter: f, b, q)", at_line, k->name, n,
                   n == 1 ? "" : "s", sig, want);
  for (int i = 0; i < n && i < 64; i++) {
    const char *why = param_mismatch(sig[i], from[i], to[i]);
    if (why)
      return mk_errf(err, MK_EPARSE, "line %d: parameter %d of kernel %s is `%.*s`, but its "
                     "MK_CUDA_KERNELS signature \"%s\" says %s", at_line, i + 1, k->name,
                     (int)(to[i] - from[i] > 80 ? 80 : to[i] - from[i]), from[i], sig, why);
  }
  return 0;
}

/* ---- launches in the Python --------------------------------------------------- */

/* Every `_mk_cuda.launch("name"` outside MK_CUDA_SOURCE names a listed kernel;
 * at least one launch exists. */
static int check_launches(const char *module, const char *cuda, size_t cuda_len,
                          const mk_backend_kernel *ks, int nk, mk_errmsg *err) {
  static const char call[] = "_mk_cuda.launch(";
  int launches = 0;
  for (const char *p = strstr(module, call); p; p = strstr(p + 1, call)) {
    if (p >= cuda && p < cuda + cuda_len) continue;
    launches++;
    const char *q = p + sizeof call - 1;
    while (*q == ' ' || *q == '\n') q++;
    if (*q != '"' && *q != '\'') continue; /* a name held in a variable: the launcher checks it */
    char quote = *q++;
    const char *e = strchr(q, quote);
    if (e == NULL) continue;
    bool listed = false;
    for (int i = 0; i < nk && !listed; i++)
      listed = strlen(ks[i].name) == (size_t)(e - q) && memcmp(ks[i].name, q, (size_t)(e - q)) == 0;
    if (!listed)
      return mk_errf(err, MK_EPARSE, "line %d: _mk_cuda.launch(\"%.*s\", ...) launches a kernel "
                     "that MK_CUDA_KERNELS does not list",
                     mk_backend_line_of(module, p), (int)(e - q > 100 ? 100 : e - q), q);
  }
  if (launches == 0)
    return mk_errf(err, MK_EPARSE, "run() launches no CUDA kernel: a CUDA candidate launches its "
                   "kernels with _mk_cuda.launch(name, grid, block, args)");
  return 0;
}

/* ---- the whole contract ------------------------------------------------------- */

#define MAX_FOUND 128

int mk_backend_check_candidate(const char *module_text, mk_errmsg *err) {
  if (module_text == NULL) return mk_errf(err, MK_EINVAL, "no module text");
  if (mk_backend_line_starting(module_text, "MK_BACKEND = \"cuda\"") == NULL)
    return mk_errf(err, MK_EPARSE, "a CUDA candidate declares MK_BACKEND = \"cuda\" at the start "
                   "of a line");
  const char *cuda = NULL;
  size_t len = 0;
  int first = 0;
  int rc = mk_backend_candidate_source(module_text, &cuda, &len, &first, err);
  if (rc == MK_ENOENT)
    return mk_errf(err, MK_EPARSE, "no MK_CUDA_SOURCE = r\"\"\"...\"\"\" string: the CUDA C++ goes "
                   "into that module-level raw string, not a separate block");
  if (rc) return rc;
  /* Line by line: a preprocessor line starts with '#' after blanks. */
  for (const char *p = cuda; p < cuda + len;) {
    const char *eol = memchr(p, '\n', (size_t)(cuda + len - p));
    const char *q = p;
    while (q < cuda + len && (*q == ' ' || *q == '\t')) q++;
    if (q < cuda + len && *q == '#') {
      q++;
      while (q < cuda + len && (*q == ' ' || *q == '\t')) q++;
      if ((size_t)(cuda + len - q) >= 7 && memcmp(q, "include", 7) == 0)
        return mk_errf(err, MK_EPARSE, "line %d: MK_CUDA_SOURCE has an #include: candidates use "
                       "NVRTC's built-in functions only (no headers)", mk_backend_line_of(module_text, p));
    }
    p = eol ? eol + 1 : cuda + len;
  }
  mk_backend_kernel ks[MK_BACKEND_MAX_KERNELS];
  int nk = 0;
  if ((rc = mk_backend_candidate_kernels(module_text, ks, MK_BACKEND_MAX_KERNELS, &nk, err)) != 0) return rc;
  cuda_kernel found[MAX_FOUND];
  const char *block = NULL;
  int nf = find_kernels(cuda, len, found, MAX_FOUND, &block);
  /* The composer puts each candidate's kernels in a C++ namespace of its
   * own and drops `extern "C"` there (compose_cuda.c): a block's braces
   * would be left at namespace scope. */
  if (block)
    return mk_errf(err, MK_EPARSE, "line %d: an extern \"C\" { } block: write extern \"C\" on each "
                   "kernel's own declaration instead", mk_backend_line_of(module_text, block));
  for (int i = 0; i < nk; i++) {
    const cuda_kernel *k = NULL;
    for (int j = 0; j < nf && !k; j++)
      if (strcmp(found[j].name, ks[i].name) == 0) k = &found[j];
    if (k == NULL)
      return mk_errf(err, MK_EPARSE, "MK_CUDA_KERNELS lists %s, but MK_CUDA_SOURCE defines no "
                     "__global__ function of that name", ks[i].name);
    int at = mk_backend_line_of(module_text, k->at);
    if (!k->extern_c)
      return mk_errf(err, MK_EPARSE, "line %d: kernel %s is not extern \"C\": its name would be "
                     "mangled and the launcher could not find it", at, k->name);
    if ((rc = check_params(k, ks[i].sig, at, err)) != 0) return rc;
  }
  return check_launches(module_text, cuda, len, ks, nk, err);
}
