/* cli_common.c — session options shared by `evolve` and `bench`, the JSON
 * form of a module's state, and orderly session shutdown. */
#include "cli_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
  if (strcmp(a, "--budget") == 0) return parse_int(v, 1, 1000000, &cfg->max_proposals) ? -1 : 2;
  if (strcmp(a, "--beam") == 0) return parse_int(v, 1, 64, &cfg->beam_width) ? -1 : 2;
  if (strcmp(a, "--depth") == 0) return parse_int(v, 0, 64, &cfg->depth) ? -1 : 2;
  if (strcmp(a, "--trials") == 0) return parse_int(v, 1, 1000, &cfg->trials) ? -1 : 2;
  if (strcmp(a, "--seed") == 0) {
    if (parse_int(v, 0, 2147483647, &i)) return -1;
    cfg->seed = (unsigned long long)i;
    return 2;
  }
  if (strcmp(a, "--atol") == 0) return parse_double(v, 0, &cfg->atol) ? -1 : 2;
  if (strcmp(a, "--rtol") == 0) return parse_double(v, 0, &cfg->rtol) ? -1 : 2;
  if (strcmp(a, "--time-budget") == 0) return parse_double(v, 0, &cfg->max_seconds) ? -1 : 2;
  if (strcmp(a, "--job-timeout") == 0) return parse_double(v, 1, &cfg->job_timeout_s) ? -1 : 2;
  if (strcmp(a, "--token-budget") == 0) {
    if (parse_double(v, 0, &d)) return -1;
    cfg->max_tokens = (long)d;
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
    cfg->proposer = v;
    return 2;
  }
  if (strcmp(a, "--device") == 0) {
    if (v == NULL || (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda"))) return -1;
    cfg->device = v;
    return 2;
  }
  if (strcmp(a, "--python") == 0) return v ? (cfg->python = v, 2) : -1;
  if (strcmp(a, "--llm-config") == 0) return v ? (cfg->llm_config_json = v, 2) : -1;
  if (strcmp(a, "--cache-dir") == 0) return v ? (cfg->cache_dir = v, 2) : -1;
  if (strcmp(a, "--workdir") == 0) return v ? (cfg->workdir = v, 2) : -1;
  if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
    cfg->log_stderr = true;
    return 1;
  }
  return 0;
}

static void add_ms(cJSON *o, const char *k, double v) {
  if (v >= 0) cJSON_AddNumberToObject(o, k, v);
  else cJSON_AddNullToObject(o, k);
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

cJSON *mk_cli_module_json(const mk_session_module *m) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "file", m->path);
  cJSON_AddStringToObject(o, "class", m->class_name);
  cJSON_AddStringToObject(o, "device", m->device);
  cJSON_AddBoolToObject(o, "timed", m->timed);
  cJSON_AddStringToObject(o, "note", m->note ? m->note : "");
  add_ms(o, "eager_ms", m->eager_ms);
  add_ms(o, "compile_ms", m->compile_ms);
  add_ms(o, "ours_ms", m->ours_ms);
  cJSON_AddNumberToObject(o, "tokens_in", (double)m->tokens_in);
  cJSON_AddNumberToObject(o, "tokens_out", (double)m->tokens_out);
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
    cJSON_AddStringToObject(j, "summary", sk->summary);
    cJSON *vs = cJSON_AddArrayToObject(j, "variants");
    for (int k = 0; k < sk->nvariants; k++) {
      const mk_session_variant *v = &sk->variants[k];
      cJSON *jv = cJSON_CreateObject();
      cJSON_AddStringToObject(jv, "name", v->name);
      cJSON_AddStringToObject(jv, "origin", v->origin);
      cJSON_AddStringToObject(jv, "status", v->status);
      if (v->reason && *v->reason) cJSON_AddStringToObject(jv, "reason", v->reason);
      add_ms(jv, "time_ms", v->time_ms);
      add_ms(jv, "speedup_vs_eager", v->speedup_eager);
      add_ms(jv, "speedup_vs_compile", v->speedup_compile);
      cJSON_AddNumberToObject(jv, "max_abs_err", v->max_abs_err);
      cJSON_AddNumberToObject(jv, "trials_passed", v->trials_passed);
      cJSON_AddNumberToObject(jv, "trials", v->trials);
      cJSON_AddNumberToObject(jv, "tokens", (double)v->tokens);
      cJSON_AddItemToArray(vs, jv);
    }
    cJSON_AddItemToArray(sks, j);
  }
  return o;
}

static void on_closed(void *data) { *(int *)data = 1; }

void mk_cli_close_session(uv_loop_t *loop, mk_session *s) {
  int closed = 0;
  if (s) mk_session_close(s, on_closed, &closed);
  while (!closed && s && uv_run(loop, UV_RUN_ONCE)) {
  }
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
}
