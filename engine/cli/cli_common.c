/* cli_common.c — session options shared by `evolve` and `bench`, the JSON
 * form of a module's state, and orderly session shutdown. */
#include "cli_common.h"

#include "mk_buf.h"
#include "mk_loop.h"
#include "mk_llm.h"
#include "mk_json.h"
#include "mk_bench.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* LLM options: --llm-config gives the base object, --model / --provider /
 * --base-url / --api-key-env override its keys whatever their order on the
 * command line; the merged object is what the session gets as
 * llm_config_json. One command line per process, so the state is static. */
static struct {
  cJSON *base;       /* from --llm-config */
  cJSON *over;       /* from the flags */
  char *merged;      /* cfg->llm_config_json points here */
  bool llm_flag;     /* an LLM flag was given */
  bool builtin;      /* --proposer builtin was given */
} llm_opts;

static int llm_merge(mk_session_config *cfg) {
  cJSON *m = llm_opts.base ? cJSON_Duplicate(llm_opts.base, true) : cJSON_CreateObject();
  if (m == NULL) return -1;
  const cJSON *it;
  cJSON_ArrayForEach(it, llm_opts.over) {
    cJSON_DeleteItemFromObjectCaseSensitive(m, it->string);
    cJSON_AddItemToObject(m, it->string, cJSON_Duplicate(it, true));
  }
  char *text = cJSON_PrintUnformatted(m);
  cJSON_Delete(m);
  if (text == NULL) return -1;
  free(llm_opts.merged);
  llm_opts.merged = text;
  cfg->llm_config_json = text;
  return 0;
}

/* An LLM flag implies --proposer llm; with an explicit builtin it is a mistake. */
static int llm_flag(mk_session_config *cfg, const char *a) {
  llm_opts.llm_flag = true;
  if (llm_opts.builtin) {
    fprintf(stderr, "mkevolve: %s applies to --proposer llm, not builtin\n", a);
    return -1;
  }
  cfg->proposer = "llm";
  return llm_merge(cfg);
}

static int llm_set(mk_session_config *cfg, const char *a, const char *key, const char *v) {
  if (v == NULL || !*v) return -1;
  if (llm_opts.over == NULL && (llm_opts.over = cJSON_CreateObject()) == NULL) return -1;
  cJSON_DeleteItemFromObjectCaseSensitive(llm_opts.over, key);
  cJSON_AddStringToObject(llm_opts.over, key, v);
  return llm_flag(cfg, a) ? -1 : 2;
}

/* --llm-config takes a JSON object or the path of a file holding one. */
static int llm_config_option(mk_session_config *cfg, const char *v) {
  if (v == NULL) return -1;
  char *text = NULL;
  size_t len = 0;
  const char *p = v;
  while (*p == ' ' || *p == '\t' || *p == '\n') p++;
  if (*p != '{') {
    int rc = mk_read_file(v, (size_t)4 << 20, &text, &len);
    if (rc) {
      fprintf(stderr, "mkevolve: --llm-config %s: %s\n", v, mk_strerror(rc));
      return -1;
    }
  }
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithOpts(text ? text : v, &end, false);
  if (!cJSON_IsObject(j)) {
    long at = end ? (long)(end - (text ? text : v)) : 0;
    fprintf(stderr, "mkevolve: --llm-config %s: not a JSON object (near character %ld)\n",
            text ? v : "", at);
    cJSON_Delete(j);
    free(text);
    return -1;
  }
  free(text);
  mk_llm_config probe;
  mk_llm_config_init(&probe);
  mk_errmsg err = {{0}};
  int rc = mk_llm_config_from_json(&probe, j, &err);
  mk_llm_config_free(&probe);
  if (rc) {
    fprintf(stderr, "mkevolve: --llm-config: %s\n", err.text);
    cJSON_Delete(j);
    return -1;
  }
  cJSON_Delete(llm_opts.base);
  llm_opts.base = j;
  return llm_merge(cfg) ? -1 : 2;
}

int mk_cli_llm_check(const mk_session_config *cfg, mk_errmsg *err) {
  if (cfg->proposer == NULL || strcmp(cfg->proposer, "llm") != 0) return 0;
  mk_llm_config c;
  mk_llm_config_init(&c);
  int rc = 0;
  if (cfg->llm_config_json) {
    cJSON *j = cJSON_Parse(cfg->llm_config_json);
    rc = j ? mk_llm_config_from_json(&c, j, err) : mk_errf(err, MK_EPARSE, "bad LLM configuration");
    cJSON_Delete(j);
  }
  if (!rc && (c.model == NULL || !*c.model))
    rc = mk_errf(err, MK_EINVAL,
                 "--proposer llm needs a model: --model NAME, or \"model\" in --llm-config");
  if (!rc && cfg->search.max_cost > 0 && c.budget_tokens <= 0) /* the LLM's cost is tokens */
    c.budget_tokens = (long)cfg->search.max_cost;
  if (!rc) {
    /* The client's own checks (key present for vendor endpoints, price for
     * a money budget), before minutes of capture and verification. */
    uv_loop_t loop;
    uv_loop_init(&loop);
    mk_llm *llm = NULL;
    rc = mk_llm_new(&loop, &c, &llm, err);
    if (llm) mk_llm_close(llm);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  }
  mk_llm_config_free(&c);
  return rc;
}

void mk_cli_options_free(void) {
  cJSON_Delete(llm_opts.base);
  cJSON_Delete(llm_opts.over);
  free(llm_opts.merged);
  memset(&llm_opts, 0, sizeof llm_opts);
}

static int parse_int(const char *v, int lo, int hi, int *out) {
  if (v == NULL) return -1;
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || *end || end == v || x < lo || x > hi) return -1;
  *out = (int)x;
  return 0;
}

static int parse_double(const char *v, double lo, double *out) {
  if (v == NULL) return -1;
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || *end || end == v || !(x >= lo)) return -1;
  *out = x;
  return 0;
}

int mk_cli_session_option(mk_session_config *cfg, const char *a, const char *v) {
  int i;
  double d;
  if (strcmp(a, "--budget") == 0) return parse_int(v, 1, 1000000, &cfg->search.max_proposals) ? -1 : 2;
  if (strcmp(a, "--beam") == 0) return parse_int(v, 1, 64, &cfg->search.beam_width) ? -1 : 2;
  if (strcmp(a, "--depth") == 0) return parse_int(v, 0, 64, &cfg->search.depth) ? -1 : 2;
  if (strcmp(a, "--trials") == 0) return parse_int(v, 1, 1000, &cfg->verify.trials) ? -1 : 2;
  if (strcmp(a, "--seed") == 0) {
    if (parse_int(v, 0, 2147483647, &i)) return -1;
    cfg->search.seed = (unsigned long long)i;
    return 2;
  }
  if (strcmp(a, "--atol") == 0) return parse_double(v, 0, &cfg->verify.atol) ? -1 : 2;
  if (strcmp(a, "--rtol") == 0) return parse_double(v, 0, &cfg->verify.rtol) ? -1 : 2;
  if (strcmp(a, "--time-budget") == 0) return parse_double(v, 0, &cfg->search.max_seconds) ? -1 : 2;
  if (strcmp(a, "--job-timeout") == 0) return parse_double(v, 1, &cfg->job_timeout_s) ? -1 : 2;
  if (strcmp(a, "--token-budget") == 0) {
    if (parse_double(v, 0, &d)) return -1;
    cfg->search.max_cost = d; /* the LLM proposer's cost unit */
    return 2;
  }
  if (strcmp(a, "--batch") == 0) {
    if (v && strcmp(v, "full") == 0) cfg->batch = -1;
    else if (v && strcmp(v, "auto") == 0) cfg->batch = 0;
    else if (parse_int(v, 1, 1 << 20, &cfg->batch)) return -1;
    return 2;
  }
  if (strcmp(a, "--proposer") == 0) {
    if (v == NULL || (strcmp(v, "builtin") && strcmp(v, "llm"))) return -1;
    llm_opts.builtin = strcmp(v, "builtin") == 0;
    if (llm_opts.builtin && llm_opts.llm_flag) {
      fprintf(stderr, "mkevolve: --proposer builtin with LLM options (--model, --provider, ...)\n");
      return -1;
    }
    cfg->proposer = v;
    return 2;
  }
  if (strcmp(a, "--model") == 0) return llm_set(cfg, a, "model", v);
  if (strcmp(a, "--base-url") == 0) return llm_set(cfg, a, "base_url", v);
  if (strcmp(a, "--api-key-env") == 0) return llm_set(cfg, a, "api_key_env", v);
  if (strcmp(a, "--provider") == 0) {
    if (v == NULL || (strcmp(v, "openai") && strcmp(v, "anthropic"))) {
      fprintf(stderr, "mkevolve: --provider is openai (any OpenAI-compatible server) or anthropic\n");
      return -1;
    }
    return llm_set(cfg, a, "provider", v);
  }
  if (strcmp(a, "--backend") == 0)
    return mk_kernel_backend_parse(v, &cfg->search.backend) ? -1 : 2;
  if (strcmp(a, "--monolithic") == 0) {
    cfg->monolithic = true;
    return 1;
  }
  if (strcmp(a, "--device") == 0) {
    if (v == NULL || (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda"))) return -1;
    cfg->device = v;
    return 2;
  }
  if (strcmp(a, "--gpus") == 0) return parse_int(v, 1, 64, &cfg->gpus) ? -1 : 2;
  if (strcmp(a, "--python") == 0) return v ? (cfg->python = v, 2) : -1;
  if (strcmp(a, "--llm-config") == 0) {
    return llm_config_option(cfg, v); /* configures the LLM; --proposer llm uses it */
  }
  if (strcmp(a, "--native-worker") == 0 || strcmp(a, "--no-native-worker") == 0) {
    cfg->verify.native = strcmp(a, "--native-worker") == 0;
    return 1;
  }
  if (strcmp(a, "--cache-dir") == 0) return v ? (cfg->cache_dir = v, 2) : -1;
  if (strcmp(a, "--workdir") == 0) return v ? (cfg->workdir = v, 2) : -1;
  if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
    cfg->log_stderr = true;
    return 1;
  }
  return 0;
}

void mk_cli_print_session_options(FILE *out) {
  fputs("session options (evolve and bench):\n"
        "  --proposer builtin|llm     who writes kernels: the builtin generator or an LLM\n"
        "  --backend triton|cuda|auto the kernels' language, for either proposer: Triton (default),\n"
        "                             CUDA C++ (NVRTC; the PyTorch reference where there is no\n"
        "                             kernel), or both competing in one beam (GPU only for CUDA)\n"
        "  --budget N                 candidates per run, all subkernels together\n"
        "  --beam W                   beam width per subkernel\n"
        "  --depth D                  beam steps after the first proposals\n"
        "  --seed S                   seed of proposals and trials\n"
        "  --device auto|cpu|cuda     auto: a GPU when there is one, else the CPU (Triton's\n"
        "                             interpreter: correctness only, no timings)\n"
        "  --gpus N                   use the first N visible GPUs (default: all), one worker\n"
        "                             each; bench also evolves N problems at a time\n"
        "  --batch N|full|auto        inputs' batch; auto reduces it on the CPU\n"
        "  --trials N                 seeded trials per verification\n"
        "  --atol X, --rtol X         tolerances against PyTorch\n"
        "  --time-budget SECONDS      wall-clock budget of the search\n"
        "  --token-budget N           LLM tokens per run\n"
        "  --job-timeout S            seconds per verification job\n"
        "  --llm-config JSON|FILE     every LLM setting (docs/llm.md)\n"
        "  --model M                  LLM model; with --provider openai|anthropic, --base-url URL,\n"
        "                             --api-key-env VAR (any of these selects --proposer llm)\n"
        "  --monolithic               the whole forward as one subkernel (direct synthesis)\n"
        "  --python PATH              the workers' Python (default $MKEVOLVE_PYTHON or .venv)\n"
        "  --native-worker            on a GPU, verify builtin CUDA candidates in mkworker-native\n"
        "                             (the default; --no-native-worker: in the Python worker)\n"
        "  --cache-dir DIR            the verdict cache (default $MKEVOLVE_CACHE_DIR or\n"
        "                             ~/.cache/mkevolve)\n"
        "  --workdir DIR              run files, DIR/<file stem>/run.jsonl (default ./" MK_CLI_WORKDIR ")\n"
        "  -v, --verbose              echo the workers' stderr and LLM retries\n",
        out);
}

bool mk_cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int mk_cli_default_workdir(mk_session_config *cfg, char *buf, size_t size) {
  if (cfg->workdir) return 0;
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) == NULL) return MK_EIO;
  int n = snprintf(buf, size, "%s/%s", cwd, MK_CLI_WORKDIR);
  if (n < 0 || (size_t)n >= size) return MK_ERANGE;
  cfg->workdir = buf;
  return 0;
}

int mk_cli_check_output_file(const char *path, mk_errmsg *err) {
  char copy[4096];
  int len = snprintf(copy, sizeof copy, "%s", path);
  if (len < 0 || (size_t)len >= sizeof copy)
    return mk_errf(err, MK_ERANGE, "cannot write %s: path too long", path);
  if (len == 0) return mk_errf(err, MK_EINVAL, "cannot write an empty path: name a file");
  if (path[len - 1] == '/') return mk_errf(err, MK_EINVAL, "cannot write %s: it is a folder", path);
  const char *dir = dirname(copy); /* ".", "/" or the folder part; may point into copy */
  struct stat sb;
  if (stat(dir, &sb) != 0)
    return mk_errf(err, MK_ENOENT, "cannot write %s: the folder %s does not exist", path, dir);
  if (!S_ISDIR(sb.st_mode))
    return mk_errf(err, MK_EINVAL, "cannot write %s: %s is not a folder", path, dir);
  if (access(dir, W_OK) != 0)
    return mk_errf(err, MK_EIO, "cannot write %s: the folder %s is not writable", path, dir);
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
    return mk_errf(err, MK_EINVAL, "cannot write %s: it is a folder", path);
  return 0;
}

static const char *state_name(mk_sk_state s) {
  switch (s) {
  case MK_SK_REFERENCE: return "reference";
  case MK_SK_RUNNING: return "running";
  case MK_SK_VERIFIED: return "verified";
  case MK_SK_FAILED: return "failed";
  case MK_SK_SLOWER: return "slower";
  }
  return "reference";
}

/* What the subkernel's chosen variant runs on: "pytorch", "triton", "cuda". */
static const char *chosen_backend(const mk_session_subkernel *sk) {
  const mk_session_variant *v = sk->chosen > 0 && sk->chosen < sk->nvariants ? &sk->variants[sk->chosen] : NULL;
  return v && v->backend ? v->backend : "pytorch";
}

cJSON *mk_cli_module_json(const mk_session_module *m) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "file", m->path);
  cJSON_AddStringToObject(o, "class", m->class_name);
  cJSON_AddStringToObject(o, "device", m->device);
  cJSON_AddBoolToObject(o, "timed", m->timed);
  cJSON_AddStringToObject(o, "note", m->note ? m->note : "");
  mk_json_add_ms(o, "eager_ms", m->eager_ms);
  mk_json_add_ms(o, "compile_ms", m->compile_ms);
  mk_json_add_ms(o, "ours_ms", m->ours_ms);
  mk_json_add_ms(o, "compile_max_autotune_ms", m->compile_max_ms > 0 ? m->compile_max_ms : -1);
  mk_json_add_ms(o, "compile_reduce_overhead_ms", m->compile_ro_ms > 0 ? m->compile_ro_ms : -1);
  mk_bench_json_add_compile_check(o, m->compile_check, m->compile_err);
  cJSON_AddBoolToObject(o, "cuda_graph", m->moves.cuda_graph);
  cJSON *moves = cJSON_AddObjectToObject(o, "search");
  cJSON_AddNumberToObject(moves, "merges_tried", m->moves.merges_tried);
  cJSON_AddNumberToObject(moves, "merges_won", m->moves.merges_won);
  cJSON_AddNumberToObject(moves, "splits_tried", m->moves.splits_tried);
  cJSON_AddNumberToObject(moves, "splits_won", m->moves.splits_won);
  cJSON_AddNumberToObject(moves, "fused_at_start", m->moves.fused);
  cJSON_AddNumberToObject(moves, "native_worker_evals", m->native_evals);
  if (m->gpu && *m->gpu) cJSON_AddStringToObject(o, "gpu", m->gpu); /* which GPU timed it */
  cJSON_AddNumberToObject(o, "tokens_in", (double)m->tokens_in);
  cJSON_AddNumberToObject(o, "tokens_out", (double)m->tokens_out);
  cJSON *counts = cJSON_AddObjectToObject(o, "backend_counts"); /* chosen variants */
  static const char *const backends[] = {"cuda", "triton", "pytorch"};
  for (int k = 0; k < 3; k++) {
    int n = 0;
    for (int i = 0; i < m->nsubkernels; i++) n += strcmp(chosen_backend(&m->subkernels[i]), backends[k]) == 0;
    cJSON_AddNumberToObject(counts, backends[k], n);
  }
  cJSON *sks = cJSON_AddArrayToObject(o, "subkernels");
  for (int i = 0; i < m->nsubkernels; i++) {
    const mk_session_subkernel *sk = &m->subkernels[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "index", sk->index);
    cJSON_AddStringToObject(j, "name", sk->name);
    cJSON_AddStringToObject(j, "ops", sk->ops);
    cJSON_AddNumberToObject(j, "first_line", sk->first_line);
    cJSON_AddNumberToObject(j, "last_line", sk->last_line);
    cJSON_AddStringToObject(j, "state", state_name(sk->state));
    cJSON_AddNumberToObject(j, "chosen", sk->chosen);
    cJSON_AddStringToObject(j, "backend", chosen_backend(sk));
    cJSON_AddStringToObject(j, "summary", sk->summary);
    cJSON *vs = cJSON_AddArrayToObject(j, "variants");
    for (int k = 0; k < sk->nvariants; k++) {
      const mk_session_variant *v = &sk->variants[k];
      cJSON *jv = cJSON_CreateObject();
      cJSON_AddStringToObject(jv, "name", v->name);
      cJSON_AddStringToObject(jv, "origin", v->origin);
      cJSON_AddStringToObject(jv, "backend", v->backend ? v->backend : "pytorch");
      cJSON_AddStringToObject(jv, "status", v->status);
      if (v->reason && *v->reason) cJSON_AddStringToObject(jv, "reason", v->reason);
      mk_json_add_ms(jv, "time_ms", v->time_ms);
      if (v->gpu && *v->gpu) cJSON_AddStringToObject(jv, "gpu", v->gpu);
      mk_json_add_ms(jv, "speedup_vs_eager", v->speedup_eager);
      mk_json_add_ms(jv, "speedup_vs_compile", v->speedup_compile);
      cJSON_AddNumberToObject(jv, "max_abs_err", v->max_abs_err);
      if (v->ref_tf32_noise > 0) cJSON_AddNumberToObject(jv, "ref_tf32_noise", v->ref_tf32_noise);
      cJSON_AddNumberToObject(jv, "trials_passed", v->trials_passed);
      cJSON_AddNumberToObject(jv, "trials", v->trials);
      cJSON_AddNumberToObject(jv, "tokens", (double)v->tokens);
      cJSON_AddItemToArray(vs, jv);
    }
    cJSON_AddItemToArray(sks, j);
  }
  return o;
}

static void on_closed(void *data) { *(bool *)data = true; }

void mk_cli_close_session(uv_loop_t *loop, mk_session *s) {
  bool closed = false;
  if (s) {
    mk_session_close(s, on_closed, &closed);
    (void)mk_loop_run_until(loop, &closed);
  }
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
}
