/* cli_export.c — `mkevolve export MODELNEW.py -o DIR`: a composed ModelNew
 * as a CMake project over libtorch (docs/export.md).
 *
 * The ModelNew's text says where it came from and what each subkernel is
 * (engine/export reads it); the original module it embeds is written to
 * DIR/problem.py and captured through the session (the one door to the
 * workers); engine/export writes the C++; mkworker.export_data then
 * instantiates the Model as KernelBench does and writes its weights, the
 * example inputs and the Model's outputs the generated test compares with. */
#include "cli_common.h"
#include "cli_runtime.h"
#include "mk_export.h"
#include "mk_loop.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct export_opts {
  const char *modelnew, *out_dir, *ns, *device, *python;
  double atol, rtol, timeout_s;
  int seed, arch;
  bool kernels_as_pytorch, no_data;
  bool device_given; /* --device was passed (else cuda when CUDA kernels are compiled in) */
} export_opts;

static void usage(FILE *out) {
  fputs("usage: mkevolve export MODELNEW.py -o DIR [--namespace NAME] [--device cpu|cuda]\n"
        "                       [--atol X] [--rtol X] [--seed N] [--kernels-as-pytorch]\n"
        "                       [--arch sm_NN] [--no-data] [--python PATH] [--timeout S]\n"
        "\n"
        "Writes a CMake project that runs the composition of MODELNEW.py (a ModelNew written by\n"
        "`mkevolve evolve`) from C++ over libtorch: a library (NAME.h, NAME.cpp: load_weights,\n"
        "forward), its weights (DIR/data/weights.mkt) and a test executable that compares its\n"
        "outputs with the PyTorch Model's on recorded inputs (docs/export.md).\n"
        "\n"
        "  -o DIR                the project folder (created)\n"
        "  --namespace NAME      C++ namespace and target name (default mk_<problem stem>)\n"
        "  --device cpu|cuda     where the reference outputs are made and the test runs (default cpu;\n"
        "                        cuda when CUDA C++ subkernels are compiled in)\n"
        "  --atol X, --rtol X    the test's tolerances (default 1e-4 each)\n"
        "  --seed N              seed for the Model's weights and the inputs (default 0)\n"
        "  --kernels-as-pytorch  export Triton and CUDA C++ subkernels as their verified PyTorch\n"
        "                        reference (ATen); without it CUDA C++ subkernels of the builtin\n"
        "                        generator are compiled in (nvcc), and Triton ones are compiled\n"
        "                        ahead of time (cubins, for the shapes of get_inputs() only)\n"
        "  --arch sm_NN          the GPU the Triton kernels are compiled for (default sm_90)\n"
        "  --no-data             write no weights and no example (Triton kernels still run Python)\n"
        "  --python PATH         the Python that writes the data (default $MKEVOLVE_PYTHON or .venv)\n"
        "  --timeout S           seconds for the worker's start and the capture (default 120)\n",
        out);
}

/* 0 parsed, 1 --help, 2 usage error. */
static int parse_args(int argc, char **argv, export_opts *o) {
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (mk_cli_is_help(a)) return 1;
    if (!strcmp(a, "--kernels-as-pytorch")) o->kernels_as_pytorch = true;
    else if (!strcmp(a, "--no-data")) o->no_data = true;
    else if (v && (!strcmp(a, "-o") || !strcmp(a, "--out"))) o->out_dir = argv[++i];
    else if (v && !strcmp(a, "--namespace")) o->ns = argv[++i];
    else if (v && !strcmp(a, "--python")) o->python = argv[++i];
    else if (v && !strcmp(a, "--device")) {
      o->device = argv[++i];
      o->device_given = true;
      if (strcmp(o->device, "cpu") && strcmp(o->device, "cuda")) return 2;
    } else if (v && !strcmp(a, "--atol")) {
      if (mk_cli_parse_double(argv[++i], 0, 1e9, &o->atol)) return 2;
    } else if (v && !strcmp(a, "--rtol")) {
      if (mk_cli_parse_double(argv[++i], 0, 1e9, &o->rtol)) return 2;
    } else if (v && !strcmp(a, "--timeout")) {
      if (mk_cli_parse_double(argv[++i], 0.1, 86400, &o->timeout_s)) return 2;
    } else if (v && !strcmp(a, "--arch")) {
      const char *s = argv[++i];
      if (!strncmp(s, "sm_", 3)) s += 3;
      if (mk_cli_parse_int(s, 50, 1000, &o->arch)) return 2;
    } else if (v && !strcmp(a, "--seed")) {
      if (mk_cli_parse_int(argv[++i], 0, 1 << 30, &o->seed)) return 2;
    } else if (a[0] == '-' || o->modelnew) {
      return 2;
    } else {
      o->modelnew = a;
    }
  }
  return o->modelnew && o->out_dir ? 0 : 2;
}

static bool valid_namespace(const char *s) {
  if (s == NULL || !*s || strlen(s) > 64 || (*s >= '0' && *s <= '9')) return false;
  for (; *s; s++)
    if (!(*s == '_' || (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
      return false;
  return true;
}

/* With --kernels-as-pytorch, says which kernels run as their PyTorch
 * reference; without it CUDA C++ subkernels are compiled in
 * (mk_export_cuda_plan) and Triton ones compiled ahead of time
 * (plan_triton), after the capture. */
static int check_kernels(const mk_export_modelnew *m, const export_opts *o, mk_errmsg *err) {
  bool cpu = o->device_given && strcmp(o->device, "cuda") != 0;
  if (!o->kernels_as_pytorch && !cpu) return 0;
  mk_buf list;
  mk_buf_init(&list, 1 << 16);
  int n = 0;
  for (int i = 0; i < m->nsubkernels; i++) {
    const mk_export_subkernel *sk = &m->subkernels[i];
    if (sk->backend == MK_EXPORT_PYTORCH || (!o->kernels_as_pytorch && sk->backend != MK_EXPORT_TRITON)) continue;
    mk_buf_printf(&list, "%ssk%d %s (%s: %s)", n++ ? ", " : "", sk->index, sk->name,
                  sk->backend == MK_EXPORT_CUDA ? "CUDA C++" : "Triton", sk->variant);
  }
  int rc = 0;
  if (n && !o->kernels_as_pytorch) /* Triton kernels compiled in run on a GPU only */
    rc = mk_errf(err, MK_EUNSUPPORTED,
                 "%d subkernel%s run%s a Triton kernel, which the export compiles for a GPU (sm_%d): the test "
                 "cannot run on --device %s: %.600s. Leave --device out (cuda), or pass --kernels-as-pytorch to "
                 "export them as their verified PyTorch reference (ATen calls; docs/export.md)",
                 n, n == 1 ? "" : "s", n == 1 ? "s" : "", o->arch, o->device, mk_buf_cstr(&list));
  else if (n)
    fprintf(stderr, "mkevolve export: %d subkernel%s exported as the PyTorch reference (--kernels-as-pytorch): %s\n",
            n, n == 1 ? "" : "s", mk_buf_cstr(&list));
  mk_buf_free(&list);
  return rc;
}

/* The CUDA C++ subkernels to compile in, and the device they need. */
static int plan_cuda(const mk_graph *g, const mk_export_modelnew *m, const export_opts *o, mk_export_cuda *cuda,
                     const char **device) {
  mk_errmsg err = {{0}};
  *device = o->device;
  if (o->kernels_as_pytorch) return 0;
  if (mk_export_cuda_plan(g, m, cuda, &err) != 0) {
    fprintf(stderr, "mkevolve export: %s: %s (--kernels-as-pytorch exports CUDA subkernels as their PyTorch "
                    "reference)\n", o->modelnew, err.text);
    return 1;
  }
  if (cuda->n == 0) return 0;
  if (o->device_given && strcmp(o->device, "cuda") != 0) {
    fprintf(stderr, "mkevolve export: %d CUDA C++ subkernel%s compiled in: the test runs on --device cuda, not %s\n",
            cuda->n, cuda->n == 1 ? " is" : "s are", o->device);
    return 1;
  }
  *device = "cuda";
  fprintf(stderr, "mkevolve export: %d CUDA C++ subkernel%s compiled in (nvcc; the project needs a CUDA libtorch)\n",
          cuda->n, cuda->n == 1 ? "" : "s");
  return 0;
}

static const char *helper_python(const export_opts *o) {
  const char *py = o->python ? o->python : getenv("MKEVOLVE_PYTHON");
  return py == NULL || !*py ? MK_DEFAULT_PYTHON : py;
}

/* Runs `py -m module args...` with the worker package on PYTHONPATH; 0 when it exits 0. */
static int run_module(const export_opts *o, char *const *args) {
  const char *py = helper_python(o);
  const char *wp = getenv("MKEVOLVE_WORKER_PATH");
  if (wp == NULL || !*wp) wp = MK_WORKER_PYTHONPATH;
  const char *old = getenv("PYTHONPATH");
  char *pp = old && *old ? mk_strdup_printf("%s:%s", wp, old) : mk_strdup(wp);
  int status = 1;
  char *argv[16] = {(char *)py, "-m"};
  int n = 2;
  for (; args[n - 2] && n < 15; n++) argv[n] = args[n - 2];
  argv[n] = NULL;
  if (pp && setenv("PYTHONPATH", pp, 1) == 0) {
    pid_t pid;
    int wst = 0;
    if (posix_spawnp(&pid, py, NULL, NULL, argv, environ) != 0)
      fprintf(stderr, "mkevolve export: cannot run %s (set MKEVOLVE_PYTHON or --python)\n", py);
    else if (waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0)
      status = 0;
    else
      fprintf(stderr, "mkevolve export: %s -m %s failed (above)\n", py, args[0]);
  }
  free(pp);
  return status;
}

/* The Triton subkernels compiled ahead of time: mkworker.export_triton records
 * their launches (running the ModelNew once) and compiles their kernels for
 * --arch; engine/export turns its plan into the replays. */
static int plan_triton(const mk_graph *g, const mk_export_modelnew *m, const export_opts *o, const char *modelnew,
                       const char *dir, mk_export_cuda *cuda, const char **device) {
  if (o->kernels_as_pytorch) return 0;
  mk_buf list;
  mk_buf_init(&list, 1 << 16);
  int n = 0;
  for (int i = 0; i < m->nsubkernels; i++) {
    const mk_export_subkernel *sk = &m->subkernels[i];
    if (sk->backend != MK_EXPORT_TRITON) continue;
    mk_buf_printf(&list, "%s%d:%d:", n++ ? "," : "", sk->index, sk->section);
    for (const char *p = sk->name; *p; p++) mk_buf_putc(&list, *p == ',' || *p == ':' ? '_' : *p);
  }
  if (n == 0) {
    mk_buf_free(&list);
    return 0;
  }
  if (o->device_given && strcmp(o->device, "cuda") != 0) {
    fprintf(stderr, "mkevolve export: %d Triton subkernel%s compiled in: the test runs on --device cuda, not %s "
                    "(--kernels-as-pytorch exports them as ATen calls)\n",
            n, n == 1 ? " is" : "s are", o->device);
    mk_buf_free(&list);
    return 1;
  }
  char arch[16], seed[16];
  snprintf(arch, sizeof arch, "%d", o->arch);
  snprintf(seed, sizeof seed, "%d", o->seed);
  char *plan_path = mk_strdup_printf("%s/.triton_plan.json", dir);
  char *args[] = {"mkworker.export_triton", (char *)modelnew, plan_path, "--arch", arch, "--seed", seed,
                  "--subkernels", (char *)mk_buf_cstr(&list), NULL};
  fprintf(stderr, "mkevolve export: compiling %d Triton subkernel%s for sm_%d (running the ModelNew once to "
                  "record their launches)\n", n, n == 1 ? "" : "s", o->arch);
  int status = plan_path ? run_module(o, args) : 1;
  mk_buf_free(&list);
  char *text = NULL;
  size_t len = 0;
  if (!status && mk_read_file(plan_path, 1u << 30, &text, &len) != 0) {
    fprintf(stderr, "mkevolve export: cannot read %s\n", plan_path);
    status = 1;
  }
  if (plan_path) unlink(plan_path);
  free(plan_path);
  mk_errmsg err = {{0}};
  if (!status && mk_export_triton_plan(g, m, text, cuda, &err) != 0) {
    fprintf(stderr, "mkevolve export: %s: %s (--kernels-as-pytorch exports Triton subkernels as their PyTorch "
                    "reference)\n", o->modelnew, err.text);
    status = 1;
  }
  free(text);
  if (status) return status;
  *device = "cuda";
  fprintf(stderr, "mkevolve export: %d Triton subkernel%s compiled in (%d kernels for sm_%d; the project needs a "
                  "CUDA libtorch and the CUDA driver API)\n",
          n, n == 1 ? "" : "s", cuda->nkernels, o->arch);
  return 0;
}

typedef struct capture_wait {
  bool done;
  int code, line;
  mk_graph *graph;
  mk_buf message, traceback;
} capture_wait;

static void on_capture(void *data, mk_verify_capture_result *r) {
  capture_wait *w = data;
  w->done = true;
  w->code = r->code;
  w->line = r->line;
  w->graph = r->graph;
  mk_buf_puts(&w->message, r->message ? r->message : "");
  mk_buf_puts(&w->traceback, r->traceback ? r->traceback : "");
}

/* Captures class_name of `file` through a session of its own. */
static int capture(const char *file, const char *class_name, const export_opts *o, mk_graph **g) {
  uv_loop_t loop;
  if (uv_loop_init(&loop)) return 1;
  mk_session_config cfg;
  mk_session_config_defaults(&cfg);
  cfg.start_timeout_s = cfg.capture_timeout_s = o->timeout_s;
  cfg.no_cache = true; /* a fresh folder: nothing to reuse */
  if (o->python) cfg.python = o->python;
  mk_session *s = NULL;
  mk_errmsg err = {{0}};
  if (mk_session_new(&loop, &cfg, &s, &err)) {
    fprintf(stderr, "mkevolve export: %s\n", err.text);
    mk_cli_close_session(&loop, NULL);
    return 1;
  }
  capture_wait w = {0};
  mk_buf_init(&w.message, 64 * 1024);
  mk_buf_init(&w.traceback, 64 * 1024);
  int rc = mk_session_capture(s, file, class_name, 0, on_capture, &w, &err);
  if (rc) mk_buf_puts(&w.message, err.text);
  else (void)mk_loop_run_until(&loop, &w.done);
  mk_cli_close_session(&loop, s);
  int status = 0;
  if (rc || w.code || w.graph == NULL) {
    fprintf(stderr, "%s:%d: cannot capture %s: %s\n", file, w.line, class_name,
            w.message.len ? mk_buf_cstr(&w.message) : mk_strerror(rc ? rc : w.code));
    mk_cli_print_traceback(stderr, mk_buf_cstr(&w.traceback), file);
    mk_graph_free(w.graph);
    status = 1;
  } else {
    *g = w.graph;
  }
  mk_buf_free(&w.message);
  mk_buf_free(&w.traceback);
  return status;
}

/* python -m mkworker.export_data DIR/export.json, with the worker package on
 * PYTHONPATH; its output goes to the terminal. */
static int run_helper(const export_opts *o, const char *dir) {
  char *manifest = mk_strdup_printf("%s/export.json", dir);
  char *args[] = {"mkworker.export_data", manifest, NULL};
  int status = manifest ? run_module(o, args) : 1;
  free(manifest);
  return status;
}

static int write_problem(const char *dir, const mk_export_modelnew *m, char *path, size_t size) {
  if (mkdir(dir, 0777) != 0 && access(dir, W_OK) != 0) {
    fprintf(stderr, "mkevolve export: cannot create %s\n", dir);
    return 1;
  }
  snprintf(path, size, "%s/problem.py", dir);
  if (mk_write_file(path, m->module_source, strlen(m->module_source)) != 0) {
    fprintf(stderr, "mkevolve export: cannot write %s\n", path);
    return 1;
  }
  return 0;
}

static int export_run(const export_opts *o) {
  char *text = NULL;
  size_t len = 0;
  if (mk_read_file(o->modelnew, 64u << 20, &text, &len) != 0) {
    fprintf(stderr, "mkevolve export: cannot read %s\n", o->modelnew);
    return 1;
  }
  mk_export_modelnew m;
  mk_errmsg err = {{0}};
  int rc = mk_export_read_modelnew(text, &m, &err);
  free(text);
  if (!rc) rc = check_kernels(&m, o, &err);
  if (rc) {
    fprintf(stderr, "mkevolve export: %s: %s\n", o->modelnew, err.text);
    mk_export_modelnew_free(&m);
    return 1;
  }
  char dir[4096], problem[4200], modelnew[4096], ns[80];
  mk_cli_abspath(o->out_dir, dir, sizeof dir);
  mk_cli_abspath(o->modelnew, modelnew, sizeof modelnew);
  mk_export_namespace_for(m.source_path[0] ? m.source_path : o->modelnew, ns, sizeof ns);
  if (o->ns) snprintf(ns, sizeof ns, "%s", o->ns);
  mk_graph *g = NULL;
  mk_export_cuda cuda = {0};
  const char *device = o->device;
  int status = write_problem(dir, &m, problem, sizeof problem);
  if (!status) status = capture(problem, m.class_name, o, &g);
  if (!status) status = plan_cuda(g, &m, o, &cuda, &device);
  if (!status) status = plan_triton(g, &m, o, modelnew, dir, &cuda, &device);
  if (!status) {
    mk_export_project p = {.dir = dir, .ns = ns, .problem_file = "problem.py", .class_name = m.class_name,
                           .composed_from = modelnew, .g = g, .m = &m, .cuda = &cuda, .device = device,
                           .atol = o->atol, .rtol = o->rtol, .seed = o->seed};
    if (mk_export_write_project(&p, &err) != 0) {
      fprintf(stderr, "mkevolve export: %s\n", err.text);
      status = 1;
    }
  }
  mk_export_cuda_free(&cuda);
  if (!status && !o->no_data) status = run_helper(o, dir);
  if (!status)
    printf("exported %s (class %s, %d subkernels, %d recorded calls) to %s\n"
           "  build and test: cmake -S %s -B %s/build -DCMAKE_PREFIX_PATH=\"$(python -c 'import torch; "
           "print(torch.utils.cmake_prefix_path)')\" && cmake --build %s/build && %s/build/%s_test %s/data\n",
           modelnew, m.class_name, m.nsubkernels, g ? g->nnodes : 0, dir, dir, dir, dir, dir, ns, dir);
  mk_graph_free(g);
  mk_export_modelnew_free(&m);
  return status;
}

int mk_cli_export(int argc, char **argv) {
  export_opts o = {.device = "cpu", .atol = 1e-4, .rtol = 1e-4, .timeout_s = 120, .arch = MK_EXPORT_DEFAULT_ARCH};
  int p = parse_args(argc, argv, &o);
  if (p == 1) {
    usage(stdout);
    return 0;
  }
  if (p == 2 || (o.ns && !valid_namespace(o.ns))) {
    if (o.ns && !valid_namespace(o.ns)) fprintf(stderr, "mkevolve export: --namespace wants a C++ identifier\n");
    usage(stderr);
    return 2;
  }
  return export_run(&o);
}
