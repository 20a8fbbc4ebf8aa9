/* cli_check.c — `mkevolve check MODELNEW.py --against PROBLEM.py
 * [--trials N] [--atol X] [--rtol X] [--device cpu|cuda] [--class NAME]
 * [--ref-class NAME] [--batch N] [--seed N] [--timeout S] [--no-cache]
 * [--json]`.
 *
 * A drop-in correctness-and-speed check for a KernelBench-style pair:
 * both files are checked statically first (instant syntax errors), then
 * the worker runs verify_composition (docs/verify.md) and a small table
 * says whether the ModelNew is correct, how far off it is, and (on a GPU)
 * eager / torch.compile / ModelNew times and speedups. Exit status 0 when
 * correct, 1 when not (or on any error), 2 on a usage error. */
#include "cli_common.h"
#include "cli_runtime.h"
#include "mk_loop.h"
#include "mk_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct check_wait {
  bool done;
  mk_verify_status status;
  char status_name[32];
  int code;
  mk_buf reason, traceback;
  char kind[64], device[128], timing_reason[512];
  int line, trials, trials_passed;
  double max_abs, max_rel;
  int64_t failing, elements;
  bool timing, cached, suspicious;
  mk_verify_time eager, compiled, ours;
  double sp_eager, sp_compile, elapsed_ms;
  cJSON *json;
} check_wait;

static void on_checked(void *data, const mk_verify_result *r, const char *status) {
  check_wait *w = data;
  w->done = true;
  w->status = r->status;
  mk_strlcpy(w->status_name, status, sizeof w->status_name);
  w->code = r->code;
  mk_buf_puts(&w->reason, r->reason);
  mk_buf_puts(&w->traceback, r->traceback);
  mk_strlcpy(w->kind, r->error_kind, sizeof w->kind);
  mk_strlcpy(w->device, r->device, sizeof w->device);
  mk_strlcpy(w->timing_reason, r->timing_reason, sizeof w->timing_reason);
  w->line = r->line;
  w->trials = r->trials;
  w->trials_passed = r->trials_passed;
  w->max_abs = r->max_abs_error;
  w->max_rel = r->max_rel_error;
  w->failing = r->failing_elements;
  w->elements = r->elements;
  w->timing = r->timing_available;
  w->cached = r->cached;
  w->suspicious = r->suspicious;
  w->eager = r->eager;
  w->compiled = r->compiled;
  w->ours = r->ours;
  w->sp_eager = r->speedup_vs_eager;
  w->sp_compile = r->speedup_vs_compile;
  w->elapsed_ms = r->elapsed_ms;
  w->json = r->json ? cJSON_Duplicate(r->json, 1) : NULL;
}

/* The full usage (docs/cli.md): on stdout for --help, on stderr after a
 * usage error. */
static void usage(FILE *out) {
  fputs("usage: mkevolve check MODELNEW.py --against PROBLEM.py [--trials N] [--atol X] "
        "[--rtol X]\n"
        "                      [--device auto|cpu|cuda] [--class NAME] [--ref-class NAME] [--batch N]\n"
        "                      [--seed N] [--timeout S] [--no-cache] [--json]\n"
        "\n"
        "Verifies a KernelBench-style ModelNew against its problem (seeded trials, guards) and,\n"
        "on a GPU, times it against eager and torch.compile. Exit status 0 when correct.\n"
        "\n"
        "  --against FILE    the problem (class Model, get_inputs(), get_init_inputs())\n"
        "  --trials N        seeded trials\n"
        "  --atol X --rtol X tolerances\n"
        "  --device D        auto (a GPU when there is one), cpu (Triton interpreter) or cuda\n"
        "  --class NAME      the class in MODELNEW.py (default ModelNew)\n"
        "  --ref-class NAME  the class in the problem (default Model)\n"
        "  --batch N         inputs with batch N instead of get_inputs()'s\n"
        "  --seed N          first trial's seed\n"
        "  --timeout S       seconds for the whole check\n"
        "  --no-cache        verify again even when neither file changed\n"
        "  --json            the mkevolve.check/1 schema\n",
        out);
}

static void print_time(const char *label, const mk_verify_time *t) {
  if (t->available)
    printf("  %-15s %.4g ms  (min %.4g, spread %.1f%%)\n", label, t->median_ms, t->min_ms,
           t->spread * 100);
  else printf("  %-15s n/a\n", label);
}

static long long nonfinite(const check_wait *w, const char *key) {
  const cJSON *nf = cJSON_GetObjectItemCaseSensitive(w->json, "nonfinite");
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(nf, key);
  return cJSON_IsNumber(v) ? (long long)v->valuedouble : 0;
}

/* The error figures, only when values were compared: a wrong shape or
 * dtype fails before any element is compared, and "max abs error 0, 0 of
 * 0 elements" would read as a pass (the "why" line says what failed). NaN
 * and Inf where the reference is finite are counted, not hidden in a 0. */
static void print_errors(const check_wait *w) {
  if (w->elements <= 0) return;
  long long nan = nonfinite(w, "nan"), inf = nonfinite(w, "inf");
  if (nan + inf > 0)
    printf("  %-15s %lld NaN and %lld Inf values where the reference is finite\n", "max abs error",
           nan, inf);
  else printf("  %-15s %.3g\n", "max abs error", w->max_abs);
  printf("  %-15s %.3g\n", "max rel error", w->max_rel);
  printf("  %-15s %lld of %lld elements\n", "failing", (long long)w->failing, (long long)w->elements);
}

static void print_table(const char *file, const char *ref, const mk_verify_options *o,
                        const check_wait *w) {
  bool ok = w->status == MK_VERIFY_OK;
  printf("check %s\n against %s\n", file, ref);
  printf("  %-15s %s, %d trials, atol %g, rtol %g%s\n", "setup", w->device[0] ? w->device : "?",
         o->trials, o->atol, o->rtol, w->cached ? " (cached result)" : "");
  if (ok) printf("  %-15s yes (%d/%d trials)\n", "correct", w->trials_passed, w->trials);
  else
    printf("  %-15s NO: %s\n", "correct", w->status_name);
  print_errors(w);
  if (w->timing) {
    print_time("eager", &w->eager);
    print_time("torch.compile", &w->compiled);
    print_time("ModelNew", &w->ours);
    if (w->sp_eager > 0) printf("  %-15s %.2fx vs eager", "speedup", w->sp_eager);
    if (w->sp_compile > 0) printf(", %.2fx vs torch.compile", w->sp_compile);
    if (w->sp_eager > 0) putchar('\n');
    if (w->suspicious) printf("  %-15s passed the stricter re-check\n", "note");
  } else {
    printf("  %-15s %s\n", "timing", w->timing_reason[0] ? w->timing_reason : "not available");
  }
  /* the worker's notes: "no custom kernel ran: ...", a failed load_state_dict */
  const cJSON *note;
  cJSON_ArrayForEach(note, cJSON_GetObjectItemCaseSensitive(w->json, "notes"))
    if (cJSON_IsString(note)) printf("  %-15s %s\n", "note", note->valuestring);
}

/* What `check` runs with: the session's defaults (the same verification
 * settings as `evolve` and the editors), the check's own limit of 600 s
 * for the worker's start and for the check, and the user's options. */
static void check_config(mk_session_config *c) {
  mk_session_config_defaults(c);
  c->job_timeout_s = c->start_timeout_s = 600;
  const char *nc = getenv("MKEVOLVE_NO_CACHE");
  c->no_cache = nc && nc[0] == '1';
}

/* Runs the check through a session; 0, or 1 with the reason on stderr. */
static int run_check(const mk_session_config *cfg, const char *file, const char *cls,
                     const char *ref, const char *ref_cls, int batch, check_wait *w) {
  uv_loop_t loop;
  if (uv_loop_init(&loop)) {
    fputs("mkevolve check: cannot start the event loop\n", stderr);
    return 1;
  }
  mk_session *s = NULL;
  mk_errmsg err = {{0}};
  int rc = mk_session_new(&loop, cfg, &s, &err);
  if (!rc) rc = mk_session_check(s, file, cls, ref, ref_cls, batch, on_checked, w, &err);
  if (rc) fprintf(stderr, "mkevolve check: %s\n", err.text);
  else (void)mk_loop_run_until(&loop, &w->done);
  mk_cli_close_session(&loop, s);
  return rc ? 1 : 0;
}

int mk_cli_check(int argc, char **argv) {
  mk_session_config cfg;
  check_config(&cfg);
  int batch = 0, seed = 0;
  const char *file = NULL, *ref = NULL, *cls = "ModelNew", *ref_cls = "Model";
  bool json = false;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (strcmp(a, "--json") == 0) json = true;
    else if (strcmp(a, "--no-cache") == 0) cfg.no_cache = true;
    else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (val && strcmp(a, "--against") == 0) ref = argv[++i];
    else if (val && strcmp(a, "--class") == 0) cls = argv[++i];
    else if (val && strcmp(a, "--ref-class") == 0) ref_cls = argv[++i];
    else if (val && strcmp(a, "--trials") == 0)
      bad = mk_cli_parse_int(argv[++i], 1, 1000, &cfg.verify.trials);
    else if (val && strcmp(a, "--atol") == 0)
      bad = mk_cli_parse_double(argv[++i], 0, 1e9, &cfg.verify.atol);
    else if (val && strcmp(a, "--rtol") == 0)
      bad = mk_cli_parse_double(argv[++i], 0, 1e9, &cfg.verify.rtol);
    else if (val && strcmp(a, "--batch") == 0) bad = mk_cli_parse_int(argv[++i], 1, 1 << 30, &batch);
    else if (val && strcmp(a, "--timeout") == 0) {
      bad = mk_cli_parse_double(argv[++i], 0.1, 86400, &cfg.job_timeout_s);
      cfg.start_timeout_s = cfg.job_timeout_s;
    } else if (val && strcmp(a, "--seed") == 0) {
      bad = mk_cli_parse_int(argv[++i], 0, 0x7fffffff, &seed);
      cfg.search.seed = (unsigned long long)seed;
    } else if (val && strcmp(a, "--device") == 0) {
      const char *d = argv[++i];
      if (strcmp(d, "cpu") == 0 || strcmp(d, "cuda") == 0 || strcmp(d, "auto") == 0) cfg.device = d;
      else if (strcmp(d, "gpu") == 0) cfg.device = "cuda";
      else bad = 1;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "mkevolve check: unknown or incomplete option %s\n", a);
      usage(stderr);
      return 2;
    } else if (!file) file = a;
    else {
      fprintf(stderr, "mkevolve check: one ModelNew file at a time (got %s and %s)\n", file, a);
      return 2;
    }
    if (bad) {
      fprintf(stderr, "mkevolve check: bad value for %s\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!file || !ref) {
    usage(stderr);
    return 2;
  }
  char fabs_[4096], rabs[4096];
  mk_cli_abspath(file, fabs_, sizeof fabs_);
  mk_cli_abspath(ref, rabs, sizeof rabs);
  /* Instant, Python-free checks of both files; the reference first. */
  mk_frontend_static st;
  const char *bad = NULL;
  if (mk_frontend_static_check(rabs, ref_cls, true, &st) != 0) bad = rabs;
  else if (mk_frontend_static_check(fabs_, cls, false, &st) != 0) bad = fabs_;
  if (bad) {
    if (st.line > 0) fprintf(stderr, "%s:%d:%d: %s\n", bad, st.line, st.col, st.message);
    else fprintf(stderr, "%s: %s\n", bad, st.message);
    return 1;
  }
  check_wait w;
  memset(&w, 0, sizeof w);
  mk_buf_init(&w.reason, 64 * 1024);
  mk_buf_init(&w.traceback, 64 * 1024);
  if (run_check(&cfg, fabs_, cls, rabs, ref_cls, batch, &w) != 0) {
    mk_buf_free(&w.reason);
    mk_buf_free(&w.traceback);
    return 1;
  }
  int status = w.status == MK_VERIFY_OK ? 0 : 1;
  if (json) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", "mkevolve.check/1");
    cJSON_AddStringToObject(root, "file", fabs_);
    cJSON_AddStringToObject(root, "against", rabs);
    cJSON_AddStringToObject(root, "status", w.status_name);
    cJSON_AddBoolToObject(root, "correct", w.status == MK_VERIFY_OK);
    cJSON_AddBoolToObject(root, "cached", w.cached);
    cJSON_AddStringToObject(root, "reason", mk_buf_cstr(&w.reason));
    if (w.line > 0) cJSON_AddNumberToObject(root, "line", w.line);
    else cJSON_AddNullToObject(root, "line");
    if (w.json) cJSON_AddItemToObject(root, "result", w.json);
    else cJSON_AddNullToObject(root, "result");
    w.json = NULL;
    char *text = cJSON_Print(root);
    if (text) puts(text);
    free(text);
    cJSON_Delete(root);
  } else if (w.status == MK_VERIFY_ERROR || w.status == MK_VERIFY_CRASHED ||
             w.status == MK_VERIFY_TIMEOUT || w.status == MK_VERIFY_CANCELED) {
    /* No verdict: say why, with the line when the worker knows it. */
    /* Errors without a verdict concern the reference (the problem file). */
    if (w.line > 0) fprintf(stderr, "%s:%d: ", rabs, w.line);
    /* the kind only when it adds to the status ("crashed", not "crashed crashed") */
    const char *st_name = w.status_name;
    bool kind = w.kind[0] && strcmp(w.kind, st_name) != 0;
    fprintf(stderr, "mkevolve check: %s%s%s: %s\n", st_name, kind ? " " : "", kind ? w.kind : "",
            mk_buf_cstr(&w.reason));
    if (w.traceback.len) fprintf(stderr, "%s\n", mk_buf_cstr(&w.traceback));
  } else {
    print_table(fabs_, rabs, &cfg.verify, &w);
    if (w.status != MK_VERIFY_OK) {
      if (w.line > 0) printf("  %-15s %s:%d: %s\n", "why", fabs_, w.line, mk_buf_cstr(&w.reason));
      else printf("  %-15s %s\n", "why", mk_buf_cstr(&w.reason));
    }
  }
  cJSON_Delete(w.json);
  mk_buf_free(&w.reason);
  mk_buf_free(&w.traceback);
  return status;
}
