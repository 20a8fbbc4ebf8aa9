/* backend_nvrtc.c — NVRTC loaded with dlopen, and one compile.
 *
 * NVRTC's C API has been stable since CUDA 7 (cubin output since 11.1), so
 * the few functions used are declared here instead of including nvrtc.h:
 * the engine then builds on machines without the toolkit, and one binary
 * works with the NVRTC of whichever CUDA the machine has (the toolkit's,
 * PyTorch's wheel, the nvidia-cuda-nvrtc wheel). */
#include "mk_backend.h"

#include "mk_buf.h"
#include "mk_time.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvrtc_result; /* nvrtcResult: 0 is NVRTC_SUCCESS */
typedef struct nvrtc_prog *nvrtc_program;

typedef struct nvrtc_api {
  nvrtc_result (*version)(int *, int *);
  const char *(*error_string)(nvrtc_result);
  nvrtc_result (*create)(nvrtc_program *, const char *, const char *, int, const char *const *,
                         const char *const *);
  nvrtc_result (*destroy)(nvrtc_program *);
  nvrtc_result (*compile)(nvrtc_program, int, const char *const *);
  nvrtc_result (*log_size)(nvrtc_program, size_t *);
  nvrtc_result (*log)(nvrtc_program, char *);
  nvrtc_result (*cubin_size)(nvrtc_program, size_t *);
  nvrtc_result (*cubin)(nvrtc_program, char *);
} nvrtc_api;

struct mk_backend {
  void *dl;
  nvrtc_api api;
  char library[1024];
  char version[32];
};

/* Compile-time places (CMake: MK_NVRTC_PATHS, ':'-separated like PATH), then sonames. */
#ifndef MK_NVRTC_PATHS
#define MK_NVRTC_PATHS ""
#endif
static const char *const sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL};

static int bind_symbols(mk_backend *b, mk_errmsg *err) {
  struct {
    const char *name;
    void **slot;
  } syms[] = {
      {"nvrtcVersion", (void **)&b->api.version},
      {"nvrtcGetErrorString", (void **)&b->api.error_string},
      {"nvrtcCreateProgram", (void **)&b->api.create},
      {"nvrtcDestroyProgram", (void **)&b->api.destroy},
      {"nvrtcCompileProgram", (void **)&b->api.compile},
      {"nvrtcGetProgramLogSize", (void **)&b->api.log_size},
      {"nvrtcGetProgramLog", (void **)&b->api.log},
      {"nvrtcGetCUBINSize", (void **)&b->api.cubin_size},
      {"nvrtcGetCUBIN", (void **)&b->api.cubin},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].slot = dlsym(b->dl, syms[i].name);
    if (*syms[i].slot == NULL)
      return mk_errf(err, MK_EUNSUPPORTED, "%s has no %s (NVRTC older than CUDA 11.1?)",
                     b->library, syms[i].name);
  }
  return 0;
}

/* Tries one file; appends why not to `tried`. */
static bool try_load(mk_backend *b, const char *path, mk_buf *tried) {
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) {
    const char *why = dlerror();
    mk_buf_printf(tried, "%s%s (%s)", tried->len ? "; " : "", path, why ? why : "not loadable");
    return false;
  }
  b->dl = dl;
  mk_strlcpy(b->library, path, sizeof b->library);
  return true;
}

static bool try_path_list(mk_backend *b, const char *list, mk_buf *tried) {
  const char *p = list;
  while (*p) {
    const char *end = strchr(p, ':');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n > 0 && n < 1024) {
      char path[1024];
      memcpy(path, p, n);
      path[n] = '\0';
      if (try_load(b, path, tried)) return true;
    }
    if (end == NULL) break;
    p = end + 1;
  }
  return false;
}

static bool search_library(mk_backend *b, const char *library, mk_buf *tried) {
  if (library) return try_load(b, library, tried);
  const char *env = getenv("MK_NVRTC_LIBRARY");
  if (env && env[0]) return try_load(b, env, tried);
  if (try_path_list(b, MK_NVRTC_PATHS, tried)) return true;
  for (int i = 0; sonames[i]; i++)
    if (try_load(b, sonames[i], tried)) return true;
  return false;
}

/* libnvrtc loads libnvrtc-builtins.so.X.Y by soname when it compiles. Outside
 * the loader's path (a wheel's lib folder) that fails, so the builtins beside
 * the library are loaded first: dlopen by soname then finds them loaded. */
static void preload_builtins(const mk_backend *b, int major, int minor) {
  const char *slash = strrchr(b->library, '/');
  if (slash == NULL) return; /* found through the loader's path: so are the builtins */
  char path[1200];
  snprintf(path, sizeof path, "%.*s/libnvrtc-builtins.so.%d.%d", (int)(slash - b->library),
           b->library, major, minor);
  /* Kept loaded for the process, like libnvrtc itself (mk_backend_close). */
  if (dlopen(path, RTLD_NOW | RTLD_GLOBAL) == NULL) (void)dlerror();
}

int mk_backend_open(const char *library, mk_backend **out, mk_errmsg *err) {
  *out = NULL;
  mk_backend *b = calloc(1, sizeof *b);
  if (b == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  mk_buf tried;
  mk_buf_init(&tried, 8192);
  if (!search_library(b, library, &tried)) {
    mk_errf(err, MK_EUNSUPPORTED, "the CUDA C++ backend is unavailable: no NVRTC library (%s)",
            mk_buf_cstr(&tried));
    mk_buf_free(&tried);
    free(b);
    return MK_EUNSUPPORTED;
  }
  mk_buf_free(&tried);
  int rc = bind_symbols(b, err);
  int major = 0, minor = 0;
  if (rc == 0 && b->api.version(&major, &minor) != 0)
    rc = mk_errf(err, MK_EUNSUPPORTED, "%s: nvrtcVersion failed", b->library);
  if (rc) {
    dlclose(b->dl);
    free(b);
    return rc;
  }
  snprintf(b->version, sizeof b->version, "%d.%d", major, minor);
  preload_builtins(b, major, minor);
  *out = b;
  return 0;
}

void mk_backend_close(mk_backend *b) {
  if (b == NULL) return;
  /* libnvrtc keeps process-wide state (its builtins library); unloading it
   * while another handle may still compile would pull that away, so the
   * library stays mapped for the life of the process. */
  free(b);
}

const char *mk_backend_library(const mk_backend *b) { return b->library; }
const char *mk_backend_version(const mk_backend *b) { return b->version; }

void mk_backend_result_free(mk_backend_result *r) {
  if (r == NULL) return;
  free(r->image);
  free(r->log);
  free(r->diags);
  *r = (mk_backend_result){0};
}

/* The NVRTC option list: the architecture first, then the extras. */
static int option_list(const mk_backend_options *opt, char *arch_opt, size_t size,
                       const char **opts, int *n) {
  const char *arch = opt && opt->arch ? opt->arch : MK_BACKEND_DEFAULT_ARCH;
  if (strncmp(arch, "sm_", 3) != 0) return MK_EINVAL; /* cubins need a real architecture */
  snprintf(arch_opt, size, "--gpu-architecture=%s", arch);
  *n = 0;
  opts[(*n)++] = arch_opt;
  opts[(*n)++] = "-std=c++17";
  for (int i = 0; opt && i < MK_BACKEND_MAX_OPTIONS && opt->extra[i]; i++) opts[(*n)++] = opt->extra[i];
  return 0;
}

static int read_log(const mk_backend *b, nvrtc_program prog, mk_backend_result *out) {
  size_t n = 0;
  if (b->api.log_size(prog, &n) != 0) n = 0;
  out->log = malloc(n + 1);
  if (out->log == NULL) return MK_ENOMEM;
  out->log[0] = '\0';
  if (n > 0 && b->api.log(prog, out->log) != 0) out->log[0] = '\0';
  out->log[n] = '\0';
  return 0;
}

static int read_cubin(const mk_backend *b, nvrtc_program prog, mk_backend_result *out) {
  size_t n = 0;
  if (b->api.cubin_size(prog, &n) != 0 || n == 0) return MK_EUNSUPPORTED;
  out->image = malloc(n);
  if (out->image == NULL) return MK_ENOMEM;
  if (b->api.cubin(prog, (char *)out->image) != 0) return MK_EUNSUPPORTED;
  out->image_len = n;
  return 0;
}

/* The log's first line ("nvrtc: error: invalid value for --gpu-architecture"),
 * else NVRTC's name for the result code. */
static void first_log_line(const char *log, const char *code_name, char *out, size_t size) {
  while (log && (*log == '\n' || *log == ' ')) log++;
  if (log == NULL || *log == '\0') {
    snprintf(out, size, "NVRTC: %s", code_name);
    return;
  }
  const char *nl = strchr(log, '\n');
  int n = nl ? (int)(nl - log) : (int)strlen(log);
  snprintf(out, size, "%.*s", n, log);
}

int mk_backend_compile(const mk_backend *b, const char *cuda_source, const char *name,
                       const mk_backend_options *opt, int line_offset, mk_backend_result *out,
                       mk_errmsg *err) {
  *out = (mk_backend_result){0};
  if (b == NULL || cuda_source == NULL) return mk_errf(err, MK_EINVAL, "no NVRTC or no source");
  char arch_opt[64];
  const char *opts[MK_BACKEND_MAX_OPTIONS + 2];
  int nopts = 0;
  if (option_list(opt, arch_opt, sizeof arch_opt, opts, &nopts))
    return mk_errf(err, MK_EINVAL, "the architecture must be sm_XX (a cubin target)");
  int rc = mk_backend_cache_key(b, cuda_source, opt, out->key);
  if (rc) return mk_errf(err, rc, "cannot hash the compile");
  nvrtc_program prog = NULL;
  int nr = b->api.create(&prog, cuda_source, name ? name : "candidate.cu", 0, NULL, NULL);
  if (nr != 0) return mk_errf(err, MK_EUNSUPPORTED, "nvrtcCreateProgram: %s", b->api.error_string(nr));
  double t0 = 1e3 * mk_now_s();
  int cr = b->api.compile(prog, nopts, opts);
  out->compile_ms = 1e3 * mk_now_s() - t0;
  rc = read_log(b, prog, out);
  if (rc == 0 && cr == 0) rc = read_cubin(b, prog, out);
  out->ok = rc == 0 && cr == 0;
  b->api.destroy(&prog);
  if (rc == 0) rc = mk_backend_parse_log(out->log, line_offset, &out->diags, &out->ndiags);
  if (rc == MK_EUNSUPPORTED) {
    mk_backend_result_free(out);
    return mk_errf(err, rc, "NVRTC compiled but gave no cubin");
  }
  if (rc) {
    mk_backend_result_free(out);
    return mk_errf(err, rc, "out of memory");
  }
  /* A failure NVRTC did not explain (an option it refused): say so. */
  if (!out->ok && out->ndiags == 0) {
    free(out->diags);
    out->diags = calloc(1, sizeof *out->diags);
    if (out->diags == NULL) {
      mk_backend_result_free(out);
      return mk_errf(err, MK_ENOMEM, "out of memory");
    }
    out->ndiags = 1;
    first_log_line(out->log, b->api.error_string(cr), out->diags[0].message,
                   sizeof out->diags[0].message);
  }
  return 0;
}

int mk_backend_cache_key(const mk_backend *b, const char *cuda_source,
                         const mk_backend_options *opt, char hex[65]) {
  char arch_opt[64];
  const char *opts[MK_BACKEND_MAX_OPTIONS + 2];
  int nopts = 0;
  if (option_list(opt, arch_opt, sizeof arch_opt, opts, &nopts)) return MK_EINVAL;
  mk_buf joined;
  mk_buf_init(&joined, 1 << 16);
  for (int i = 0; i < nopts; i++) {
    mk_buf_puts(&joined, opts[i]);
    mk_buf_putc(&joined, '\0');
  }
  mk_cache_key k;
  mk_cache_key_init(&k, "cuda_cubin");
  mk_cache_key_str(&k, "source", cuda_source);
  mk_cache_key_bytes(&k, "options", joined.data ? joined.data : "", joined.len);
  mk_cache_key_str(&k, "nvrtc", b->version);
  int rc = joined.err ? joined.err : mk_cache_key_final(&k, hex);
  mk_buf_free(&joined);
  return rc;
}
