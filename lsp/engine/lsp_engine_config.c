/* lsp_engine_config.c — the engine backend's settings, parsed with per-key validation. */
#include "mk_lsp_engine_config.h"
#include "mk_lsp_settings.h"

#include "mk_buf.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void mk_lsp_engine_config_defaults(mk_lsp_engine_config *c) {
  memset(c, 0, sizeof *c);
  mk_session_config_defaults(&c->session);
  /* An import-time hang should not hold a worker for minutes while the
   * user types: the editor's captures get a limit of their own. */
  c->session.capture_timeout_s = 60;
  if (c->session.device) mk_strlcpy(c->backend, c->session.device, sizeof c->backend);
  if (c->session.proposer) mk_strlcpy(c->proposer, c->session.proposer, sizeof c->proposer);
  mk_strlcpy(c->compose_mode, "file", sizeof c->compose_mode);
}

/* The LLM part of the configuration as the engine's JSON (docs/llm.md):
 * only the keys the user set, so the LLM configuration's defaults apply. */
static char *llm_json(const mk_lsp_engine_config *c) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL) return NULL;
  if (c->llm_provider[0]) cJSON_AddStringToObject(o, "provider", c->llm_provider);
  if (c->llm_model[0]) cJSON_AddStringToObject(o, "model", c->llm_model);
  if (c->llm_base_url[0]) cJSON_AddStringToObject(o, "base_url", c->llm_base_url);
  if (c->llm_key_env[0]) cJSON_AddStringToObject(o, "api_key_env", c->llm_key_env);
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return s;
}

void mk_lsp_engine_config_session(const mk_lsp_engine_config *c, mk_session_config *out, char **json) {
  *out = c->session;
  out->python = c->python[0] ? c->python : NULL;
  out->device = c->backend[0] ? c->backend : NULL; /* NULL: the session's default */
  out->proposer = c->proposer[0] ? c->proposer : NULL;
  out->cache_dir = out->workdir = NULL;
  *json = llm_json(c);
  out->llm_config_json = *json;
}

/* Collects the names of refused keys into one message. */
typedef struct {
  mk_buf bad;
} refusals;

static void refuse(refusals *r, const char *key, const char *why) {
  mk_buf_printf(&r->bad, "%s%s (%s)", r->bad.len ? ", " : "", key, why);
}

static void set_str(refusals *r, const cJSON *obj, const char *key, char *dst, size_t size,
                    const char *const *allowed) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (v == NULL || cJSON_IsNull(v)) return;
  if (!cJSON_IsString(v)) return refuse(r, key, "expected a string");
  if (strlen(v->valuestring) >= size) return refuse(r, key, "too long");
  if (allowed) {
    bool ok = false;
    for (int i = 0; allowed[i]; i++) ok = ok || strcmp(allowed[i], v->valuestring) == 0;
    if (!ok) return refuse(r, key, "not one of the accepted values");
  }
  mk_strlcpy(dst, v->valuestring, size);
}

static bool get_num(refusals *r, const cJSON *obj, const char *key, double lo, double hi,
                    double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (v == NULL || cJSON_IsNull(v)) return false;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
      v->valuedouble > hi) {
    refuse(r, key, "expected a number in range");
    return false;
  }
  *out = v->valuedouble;
  return true;
}

int mk_lsp_engine_config_apply(mk_lsp_engine_config *c, const cJSON *settings, mk_errmsg *err) {
  if (!cJSON_IsObject(settings)) return 0;
  const cJSON *s = mk_lsp_settings_scope(settings);
  refusals r;
  mk_buf_init(&r.bad, 4096);
  static const char *const backends[] = {"auto", "cuda", "cpu", NULL};
  static const char *const proposers[] = {"builtin", "llm", NULL};
  static const char *const modes[] = {"file", "inplace", NULL};
  set_str(&r, s, "pythonPath", c->python, sizeof c->python, NULL);
  set_str(&r, s, "backend", c->backend, sizeof c->backend, backends);
  set_str(&r, s, "proposer", c->proposer, sizeof c->proposer, proposers);
  set_str(&r, s, "composeMode", c->compose_mode, sizeof c->compose_mode, modes);
  const cJSON *llm = cJSON_GetObjectItemCaseSensitive(s, "llm");
  if (cJSON_IsObject(llm)) {
    set_str(&r, llm, "provider", c->llm_provider, sizeof c->llm_provider, NULL);
    set_str(&r, llm, "model", c->llm_model, sizeof c->llm_model, NULL);
    set_str(&r, llm, "baseUrl", c->llm_base_url, sizeof c->llm_base_url, NULL);
    set_str(&r, llm, "apiKeyEnv", c->llm_key_env, sizeof c->llm_key_env, NULL);
  } else if (llm && !cJSON_IsNull(llm)) {
    refuse(&r, "llm", "expected an object");
  }
  double x;
  mk_session_config *e = &c->session;
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(s, "budget");
  if (cJSON_IsNumber(b)) {
    if (get_num(&r, s, "budget", 1, 1e6, &x)) e->search.max_proposals = (int)x;
  } else if (cJSON_IsObject(b)) {
    if (get_num(&r, b, "proposals", 1, 1e6, &x)) e->search.max_proposals = (int)x;
    if (get_num(&r, b, "tokens", 0, 1e15, &x)) e->search.max_cost = x;
    if (get_num(&r, b, "seconds", 0, 1e9, &x)) e->search.max_seconds = x;
  } else if (b && !cJSON_IsNull(b)) {
    refuse(&r, "budget", "expected a number or an object");
  }
  const cJSON *beam = cJSON_GetObjectItemCaseSensitive(s, "beam");
  if (cJSON_IsObject(beam)) { /* the same bounds as --beam and --depth */
    if (get_num(&r, beam, "width", 1, 64, &x)) e->search.beam_width = (int)x;
    if (get_num(&r, beam, "depth", 0, 64, &x)) e->search.depth = (int)x;
  } else if (beam && !cJSON_IsNull(beam)) {
    refuse(&r, "beam", "expected an object { width, depth }");
  }
  const cJSON *kb = cJSON_GetObjectItemCaseSensitive(s, "kernelBackend"); /* as --backend */
  if (cJSON_IsString(kb)) {
    if (mk_kernel_backend_parse(kb->valuestring, &e->search.backend))
      refuse(&r, "kernelBackend", "not one of the accepted values");
  } else if (kb && !cJSON_IsNull(kb)) {
    refuse(&r, "kernelBackend", "expected a string");
  }
  if (get_num(&r, s, "trials", 1, 1000, &x)) e->verify.trials = (int)x;
  const cJSON *to = cJSON_GetObjectItemCaseSensitive(s, "timeout");
  if (cJSON_IsNumber(to)) {
    if (get_num(&r, s, "timeout", 1, 86400, &x)) e->capture_timeout_s = e->job_timeout_s = x;
  } else if (cJSON_IsObject(to)) {
    if (get_num(&r, to, "capture", 1, 86400, &x)) e->capture_timeout_s = x;
    if (get_num(&r, to, "verify", 1, 86400, &x)) e->job_timeout_s = x;
  } else if (to) {
    refuse(&r, "timeout", "expected a number or an object");
  }
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "tolerance");
  if (cJSON_IsNumber(t)) {
    if (get_num(&r, s, "tolerance", 0, 1e3, &x)) e->verify.atol = e->verify.rtol = x;
  } else if (cJSON_IsObject(t)) {
    if (get_num(&r, t, "atol", 0, 1e3, &x)) e->verify.atol = x;
    if (get_num(&r, t, "rtol", 0, 1e3, &x)) e->verify.rtol = x;
  } else if (t && !cJSON_IsNull(t)) {
    refuse(&r, "tolerance", "expected a number or an object");
  }
  int rc = 0;
  if (r.bad.len) rc = mk_errf(err, MK_EINVAL, "mkevolve: settings ignored: %s", mk_buf_cstr(&r.bad));
  mk_buf_free(&r.bad);
  return rc;
}

cJSON *mk_lsp_engine_config_to_json(const mk_lsp_engine_config *c) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL) return NULL;
  cJSON_AddStringToObject(o, "pythonPath", c->python);
  cJSON_AddStringToObject(o, "backend", c->backend);
  cJSON_AddStringToObject(o, "proposer", c->proposer);
  cJSON_AddStringToObject(o, "kernelBackend", mk_kernel_backend_name(c->session.search.backend));
  cJSON *llm = cJSON_AddObjectToObject(o, "llm");
  if (llm) {
    cJSON_AddStringToObject(llm, "provider", c->llm_provider);
    cJSON_AddStringToObject(llm, "model", c->llm_model);
    cJSON_AddStringToObject(llm, "baseUrl", c->llm_base_url);
    cJSON_AddStringToObject(llm, "apiKeyEnv", c->llm_key_env);
  }
  const mk_session_config *e = &c->session;
  cJSON *to = cJSON_AddObjectToObject(o, "timeout");
  if (to) {
    cJSON_AddNumberToObject(to, "capture", e->capture_timeout_s);
    cJSON_AddNumberToObject(to, "verify", e->job_timeout_s);
  }
  cJSON *b = cJSON_AddObjectToObject(o, "budget");
  if (b) {
    cJSON_AddNumberToObject(b, "proposals", e->search.max_proposals);
    cJSON_AddNumberToObject(b, "tokens", e->search.max_cost);
    cJSON_AddNumberToObject(b, "seconds", e->search.max_seconds);
  }
  cJSON *bm = cJSON_AddObjectToObject(o, "beam");
  if (bm) {
    cJSON_AddNumberToObject(bm, "width", e->search.beam_width);
    cJSON_AddNumberToObject(bm, "depth", e->search.depth);
  }
  cJSON_AddNumberToObject(o, "trials", e->verify.trials);
  cJSON *t = cJSON_AddObjectToObject(o, "tolerance");
  if (t) {
    cJSON_AddNumberToObject(t, "atol", e->verify.atol);
    cJSON_AddNumberToObject(t, "rtol", e->verify.rtol);
  }
  cJSON_AddStringToObject(o, "composeMode", c->compose_mode);
  return o;
}
