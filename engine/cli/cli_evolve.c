/* cli_evolve.c — `mkevolve evolve FILE`: analyse, evolve every subkernel,
 * compose and verify, then print a table per subkernel and write ModelNew.
 *
 *   mkevolve evolve FILE [-o OUT.py] [--json] [-q] [session options]
 *
 * (usage() lists every option; the session options are cli_common.c's).
 * FILE is checked statically first (tree-sitter: syntax, class Model,
 * get_inputs), so those errors come at once, before any worker starts. Run
 * files go to ./.mkevolve/<stem>/ unless --workdir says otherwise; the
 * closing lines name the ModelNew, how to run it on a CPU-only machine, and
 * the run log.
 *
 * With an LLM, the summary ends with the token ledger (per agent, per
 * subkernel, the run's total and money when the configuration has prices),
 * and --json output carries it as "llm". */
#include "cli_common.h"
#include "cli_runtime.h"
#include "mk_buf.h"
#include "mk_session.h"
#include "mk_time.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct evolve_cli {
  uv_loop_t *loop;
  mk_session *session;
  const char *file;
  const char *out;
  bool json, quiet, tty, monolithic;
  mk_kernel_backend backend; /* --backend, as the search ran */
  int status;
  char error[2048];
  int last_pct;
  double last_line_s; /* when the last progress line was printed (logs) */
  char last_phase[160]; /* its phase (the message before " | ") */
} evolve_cli;

/* Seconds between progress lines in a log (not a terminal) when the
 * percentage does not move: a long CPU step still shows it is alive. */
#define PROGRESS_LOG_EVERY_S 30.0

/* The session's message carries the phase (subkernel and step), the
 * candidates done/submitted and the ETA. */
static void progress(void *data, double fraction, const char *message) {
  evolve_cli *c = data;
  if (c->quiet) return;
  int pct = (int)(fraction * 100 + 0.5);
  double t = mk_now_s();
  if (c->tty) {
    int filled = pct * 20 / 100;
    fprintf(stderr, "\r[%.*s%*s] %3d%% %-100.100s", filled, "####################", 20 - filled, "",
            pct, message ? message : "");
  } else {
    /* A line per new phase (subkernel, step), per 10%, and every 30 s. */
    const char *msg = message ? message : "";
    int phase_len = (int)(strstr(msg, " | ") ? strstr(msg, " | ") - msg : (ptrdiff_t)strlen(msg));
    bool new_phase = phase_len != (int)strlen(c->last_phase) || strncmp(msg, c->last_phase, (size_t)phase_len);
    if (new_phase || pct / 10 != c->last_pct / 10 || c->last_pct < 0 ||
        t - c->last_line_s >= PROGRESS_LOG_EVERY_S || strstr(msg, "LLM attempt")) {
      fprintf(stderr, "[%3d%%] %s\n", pct, msg);
      c->last_line_s = t;
      snprintf(c->last_phase, sizeof c->last_phase, "%.*s", phase_len, msg);
    }
  }
  c->last_pct = pct;
  fflush(stderr);
}

static void fmt_x(char *buf, size_t n, double x) {
  if (x > 0) snprintf(buf, n, "%.2fx", x);
  else snprintf(buf, n, "-");
}

static void fmt_ms(char *buf, size_t n, double x) {
  if (x >= 0) snprintf(buf, n, "%.3f", x);
  else snprintf(buf, n, "-");
}

/* "chosen: 2 CUDA C++, 1 Triton, 3 PyTorch (--backend auto)" */
static void print_backends(const mk_session_module *m, mk_kernel_backend b, FILE *out) {
  static const char *const keys[] = {"cuda", "triton", "pytorch"};
  static const char *const words[] = {"CUDA C++", "Triton", "PyTorch"};
  fprintf(out, "subkernels by backend:");
  for (int k = 0; k < 3; k++) {
    int n = 0;
    for (int i = 0; i < m->nsubkernels; i++) {
      const mk_session_subkernel *sk = &m->subkernels[i];
      const char *v = sk->chosen > 0 && sk->chosen < sk->nvariants ? sk->variants[sk->chosen].backend : NULL;
      n += strcmp(v ? v : "pytorch", keys[k]) == 0;
    }
    fprintf(out, "%s %d %s", k ? "," : "", n, words[k]);
  }
  fprintf(out, " (--backend %s)\n", mk_kernel_backend_name(b));
}

static void print_table(const mk_session_module *m, mk_kernel_backend backend, FILE *out) {
  fprintf(out, "\n%-3s %-30s %-9s %-34s %9s %8s %8s %7s\n", "#", "subkernel", "lines", "variant",
          "ms", "eager", "compile", "trials");
  for (int i = 0; i < m->nsubkernels; i++) {
    const mk_session_subkernel *sk = &m->subkernels[i];
    const mk_session_variant *v = &sk->variants[sk->chosen];
    char lines[32], ms[32], se[32], sc[32], tr[32];
    snprintf(lines, sizeof lines, "%d-%d", sk->first_line, sk->last_line);
    fmt_ms(ms, sizeof ms, v->time_ms);
    fmt_x(se, sizeof se, v->speedup_eager);
    fmt_x(sc, sizeof sc, v->speedup_compile);
    snprintf(tr, sizeof tr, "%d/%d", v->trials_passed, v->trials);
    fprintf(out, "%-3d %-30.30s %-9s %-34.34s %9s %8s %8s %7s\n", i, sk->name, lines,
            sk->chosen ? v->name : "PyTorch reference", ms, se, sc, sk->chosen ? tr : "-");
    if (sk->chosen == 0) fprintf(out, "    why PyTorch: %s\n", sk->summary); /* the true reason */
  }
  print_backends(m, backend, out);
  char e[32], c[32], o[32], se[32], sc[32];
  fmt_ms(e, sizeof e, m->eager_ms);
  fmt_ms(c, sizeof c, m->compile_ms);
  fmt_ms(o, sizeof o, m->ours_ms);
  fmt_x(se, sizeof se, m->eager_ms > 0 && m->ours_ms > 0 ? m->eager_ms / m->ours_ms : -1);
  fmt_x(sc, sizeof sc, m->compile_ms > 0 && m->ours_ms > 0 ? m->compile_ms / m->ours_ms : -1);
  if (m->timed)
    fprintf(out, "\nwhole program on %s%s%s%s: eager %s ms, torch.compile %s ms, ours %s ms "
                 "(%s vs eager, %s vs torch.compile)\n",
            m->device, m->gpu && *m->gpu ? " (GPU " : "", m->gpu && *m->gpu ? m->gpu : "",
            m->gpu && *m->gpu ? ")" : "", e, c, o, se, sc);
  else /* dashes for times that cannot exist would read as missing data */
    fprintf(out, "\nno timings on %s: correctness only (Triton's interpreter runs the kernels as "
                 "Python; a time there says nothing about a GPU)\n",
            m->device);
  if (m->timed && m->moves.cuda_graph)
    fprintf(out, "the emitted ModelNew replays the composition as a CUDA graph (the plain "
                 "forward where a graph would be wrong; docs/design.md)\n");
  if (m->compile_max_ms > 0 || m->compile_ro_ms > 0) {
    char mx[32], ro[32];
    fmt_ms(mx, sizeof mx, m->compile_max_ms);
    fmt_ms(ro, sizeof ro, m->compile_ro_ms);
    fprintf(out, "torch.compile max-autotune-no-cudagraphs %s ms, reduce-overhead %s ms (same run)\n",
            mx, ro);
  }
  if (m->timed && m->compile_note && *m->compile_note) fprintf(out, "%s\n", m->compile_note);
  if (m->note && *m->note) fprintf(out, "note: %s\n", m->note);
  if (m->tokens_in + m->tokens_out > 0)
    fprintf(out, "tokens spent on the variants tried: %ld in, %ld out\n", m->tokens_in, m->tokens_out);
}

static long usage_long(const cJSON *u, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(u, key);
  return cJSON_IsNumber(v) ? (long)v->valuedouble : 0;
}

static double usage_usd(const cJSON *u) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(u, "usd");
  return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void print_usage_row(FILE *out, const char *name, const cJSON *u, bool money) {
  fprintf(out, "  %-34.34s %6ld %7ld %11ld %11ld", name, usage_long(u, "calls"),
          usage_long(u, "failures"), usage_long(u, "tokens_in"), usage_long(u, "tokens_out"));
  if (money) fprintf(out, " %10.4f", usage_usd(u));
  long est = usage_long(u, "estimated_calls");
  if (est) fprintf(out, "  (%ld estimated)", est);
  fputc('\n', out);
}

static void print_usage_group(FILE *out, const char *title, const cJSON *group, bool money) {
  if (!cJSON_IsObject(group) || group->child == NULL) return;
  fprintf(out, "  %-34s %6s %7s %11s %11s%s\n", title, "calls", "failed", "tokens in", "tokens out",
          money ? "        USD" : "");
  const cJSON *it;
  cJSON_ArrayForEach(it, group) print_usage_row(out, it->string, it, money);
  fputc('\n', out);
}

/* The token ledger: what the run cost, per agent and per subkernel. */
static void print_ledger(const cJSON *l, bool monolithic, FILE *out) {
  const cJSON *total = cJSON_GetObjectItemCaseSensitive(l, "total");
  const cJSON *prov = cJSON_GetObjectItemCaseSensitive(l, "provider");
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(l, "model");
  const cJSON *ep = cJSON_GetObjectItemCaseSensitive(l, "endpoint");
  bool money = usage_usd(total) > 0;
  fprintf(out, "\nLLM %s %s at %s (%s synthesis)\n", cJSON_IsString(prov) ? prov->valuestring : "?",
          cJSON_IsString(model) ? model->valuestring : "?", cJSON_IsString(ep) ? ep->valuestring : "?",
          monolithic ? "monolithic" : "modular");
  print_usage_group(out, "agent", cJSON_GetObjectItemCaseSensitive(l, "by_agent"), money);
  print_usage_group(out, "subkernel", cJSON_GetObjectItemCaseSensitive(l, "by_subkernel"), money);
  fprintf(out, "tokens (LLM ledger): %ld in, %ld out, %ld calls, %ld failed or unusable",
          usage_long(total, "tokens_in"), usage_long(total, "tokens_out"), usage_long(total, "calls"),
          usage_long(total, "failures"));
  if (money) fprintf(out, ", $%.4f", usage_usd(total));
  fputc('\n', out);
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(l, "budget");
  const cJSON *bt = cJSON_GetObjectItemCaseSensitive(b, "tokens");
  const cJSON *bu = cJSON_GetObjectItemCaseSensitive(b, "usd");
  if (cJSON_IsNumber(bt))
    fprintf(out, "budget: %ld tokens, %ld left\n", (long)bt->valuedouble, usage_long(b, "tokens_left"));
  if (cJSON_IsNumber(bu)) {
    const cJSON *left = cJSON_GetObjectItemCaseSensitive(b, "usd_left");
    fprintf(out, "budget: $%.4f, $%.4f left\n", bu->valuedouble,
            cJSON_IsNumber(left) ? left->valuedouble : 0.0);
  }
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "exhausted")))
    fprintf(out, "the LLM budget was spent: the search stopped asking for proposals\n");
}

static void print_json(const mk_session_module *m, const cJSON *ledger, const evolve_cli *c,
                       const char *out_path, int status, FILE *out) {
  bool monolithic = c->monolithic;
  cJSON *o = mk_cli_module_json(m);
  cJSON_AddStringToObject(o, "modelnew", out_path ? out_path : "");
  cJSON_AddBoolToObject(o, "verified", status == 0);
  cJSON_AddStringToObject(o, "mode", monolithic ? "monolithic" : "modular");
  cJSON_AddStringToObject(o, "backend", mk_kernel_backend_name(c->backend));
  if (ledger) cJSON_AddItemToObject(o, "llm", cJSON_Duplicate(ledger, true));
  /* Every token the run spent (unusable replies too), as llm.total says. */
  const cJSON *total = cJSON_GetObjectItemCaseSensitive(ledger, "total");
  if (cJSON_IsObject(total)) {
    cJSON_ReplaceItemInObjectCaseSensitive(o, "tokens_in", cJSON_CreateNumber(usage_long(total, "tokens_in")));
    cJSON_ReplaceItemInObjectCaseSensitive(o, "tokens_out", cJSON_CreateNumber(usage_long(total, "tokens_out")));
  }
  char *text = cJSON_Print(o);
  if (text) fprintf(out, "%s\n", text);
  free(text);
  cJSON_Delete(o);
}

/* The lines a user needs after the table: where the file is, how to run it
 * here, and where the log of the run is. */
static void print_closing(const mk_session_module *m, const char *written, FILE *out) {
  if (written) fprintf(out, "ModelNew written to %s (verified as a whole)\n", written);
  bool kernels = false;
  for (int i = 0; i < m->nsubkernels; i++) kernels |= m->subkernels[i].chosen > 0;
  /* Triton finds no driver on a CPU-only machine ("0 active drivers")
   * unless its interpreter is asked for. */
  if (written && kernels && !m->timed)
    fprintf(out, "it runs Triton kernels: on a machine without a GPU, run it with "
                 "TRITON_INTERPRET=1 (as the verification did)\n");
  if (m->run_log) fprintf(out, "run log: %s\n", m->run_log);
}

static void on_evolved(void *data, int status, const mk_session_module *m, const char *error) {
  evolve_cli *c = data;
  if (c->tty && !c->quiet) fputc('\n', stderr);
  c->status = status;
  if (error) snprintf(c->error, sizeof c->error, "%s", error);
  if (m == NULL) {
    uv_stop(c->loop);
    return;
  }
  mk_errmsg err = {{0}};
  char *written = NULL;
  if (status == 0 && mk_session_compose(c->session, c->file, c->out, &written, &err)) {
    snprintf(c->error, sizeof c->error, "%s", err.text);
    c->status = MK_EIO;
  }
  cJSON *ledger = mk_session_llm_ledger(c->session, true);
  if (c->json) print_json(m, ledger, c, written, c->status, stdout);
  else print_table(m, c->backend, stdout);
  if (ledger && !c->json) print_ledger(ledger, c->monolithic, stdout);
  cJSON_Delete(ledger);
  if (!c->json) print_closing(m, written, stdout);
  free(written);
  uv_stop(c->loop); /* the worker pool keeps the loop alive: close it now */
}

static void on_analyzed(void *data, int status, const mk_session_module *m, const char *error) {
  evolve_cli *c = data;
  if (status) {
    c->status = status;
    snprintf(c->error, sizeof c->error, "%s", error ? error : mk_strerror(status));
    uv_stop(c->loop);
    return;
  }
  if (!c->quiet)
    fprintf(stderr, "%s: %d subkernels on %s%s%s\n", c->file, m->nsubkernels, m->device,
            m->note && *m->note ? "; " : "", m->note ? m->note : "");
  mk_errmsg err = {{0}};
  int rc = mk_session_evolve(c->session, c->file, -1, progress, on_evolved, c, NULL, &err);
  if (rc) {
    c->status = rc;
    snprintf(c->error, sizeof c->error, "%s", err.text);
    uv_stop(c->loop);
  }
}

/* The full usage (docs/cli.md): on stdout for --help, on stderr after a
 * usage error. */
static void usage(FILE *out) {
  fputs("usage: mkevolve evolve FILE [-o OUT.py] [--json] [-q] [session options]\n"
        "\n"
        "Decomposes the KernelBench-format FILE (class Model, get_inputs(), get_init_inputs())\n"
        "into subkernels, evolves each, verifies every candidate against PyTorch, and writes\n"
        "the composed ModelNew, verified as a whole.\n"
        "\n"
        "  -o, --output OUT.py        where to write ModelNew (default <workdir>/<stem>/ModelNew.py)\n"
        "  --json                     the summary as JSON (docs/cli.md)\n"
        "  -q, --quiet                no progress on stderr\n"
        "\n",
        out);
  mk_cli_print_session_options(out);
}

int mk_cli_evolve(int argc, char **argv) {
  mk_session_config cfg;
  mk_session_config_defaults(&cfg);
  evolve_cli c = {.last_pct = -1, .tty = isatty(2)};
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int used = mk_cli_session_option(&cfg, a, v);
    if (used < 0) {
      fprintf(stderr, "mkevolve evolve: bad value for %s\n", a);
      mk_cli_options_free();
      return 2;
    }
    if (used > 0) {
      i += used - 1;
      continue;
    }
    if (mk_cli_is_help(a)) {
      usage(stdout);
      mk_cli_options_free();
      return 0;
    }
    if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && v) c.out = argv[++i];
    else if (strcmp(a, "--json") == 0) c.json = true;
    else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) c.quiet = true;
    else if (a[0] != '-' && c.file == NULL) c.file = a;
    else {
      fprintf(stderr, "mkevolve evolve: unknown option '%s'\n", a);
      usage(stderr);
      mk_cli_options_free();
      return 2;
    }
  }
  if (c.file == NULL) {
    usage(stderr);
    mk_cli_options_free();
    return 2;
  }
  char abs_file[4096];
  mk_cli_abspath(c.file, abs_file, sizeof abs_file);
  c.file = abs_file;
  /* Syntax errors, a missing class or get_inputs, a folder: at once, before
   * a worker starts (seconds) or the LLM configuration is checked. */
  mk_frontend_static st;
  if (mk_frontend_static_check(c.file, "Model", true, &st) != 0) {
    if (st.line > 0) fprintf(stderr, "%s:%d:%d: %s\n", c.file, st.line, st.col, st.message);
    else fprintf(stderr, "%s: %s\n", c.file, st.message);
    mk_cli_print_source_line(stderr, c.file, st.line);
    mk_cli_options_free();
    return 1;
  }
  mk_errmsg err = {{0}};
  /* A wrong -o shows now, not after the search. */
  if (c.out && mk_cli_check_output_file(c.out, &err)) {
    fprintf(stderr, "mkevolve evolve: %s\n", err.text);
    mk_cli_options_free();
    return 1;
  }
  char workdir[4096];
  if (mk_cli_default_workdir(&cfg, workdir, sizeof workdir)) {
    fprintf(stderr, "mkevolve evolve: cannot name the work directory (./%s); give --workdir DIR\n",
            MK_CLI_WORKDIR);
    mk_cli_options_free();
    return 1;
  }
  c.monolithic = cfg.monolithic;
  c.backend = cfg.search.backend;
  if (mk_cli_llm_check(&cfg, &err)) {
    fprintf(stderr, "mkevolve evolve: %s\n", err.text);
    mk_cli_options_free();
    return 2;
  }

  uv_loop_t loop;
  uv_loop_init(&loop);
  c.loop = &loop;
  int rc = mk_session_new(&loop, &cfg, &c.session, &err);
  mk_cli_options_free(); /* the session copied the merged LLM configuration */
  if (rc) {
    fprintf(stderr, "mkevolve evolve: %s\n", err.text);
    uv_loop_close(&loop);
    return 1;
  }
  if (mk_session_analyze(c.session, c.file, NULL, on_analyzed, &c, &err)) {
    c.status = MK_EINVAL;
    snprintf(c.error, sizeof c.error, "%s", err.text);
  } else {
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  mk_cli_close_session(&loop, c.session);
  if (c.status) {
    fprintf(stderr, "mkevolve evolve: %s\n", c.error[0] ? c.error : mk_strerror(c.status));
    return 1;
  }
  return 0;
}
