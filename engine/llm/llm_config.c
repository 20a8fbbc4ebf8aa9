/* llm_config.c — the LLM configuration: defaults, JSON loading (strict:
 * unknown keys and keys-in-config are errors), JSON dump for run files,
 * price lookup. */
#include "llm_internal.h"
#include "mk_json.h"

#include <stdlib.h>
#include <string.h>

void mk_llm_config_init(mk_llm_config *c) {
  memset(c, 0, sizeof *c);
  c->provider = MK_LLM_OPENAI;
  c->timeout_s = 600;
  c->connect_timeout_s = 30;
  c->stall_timeout_s = 120;
  c->max_concurrency = 4;
  c->max_retries = 4;
  c->backoff_initial_s = 1;
  c->backoff_max_s = 60;
  c->max_tokens = 8192;
  c->temperature = -1;
  c->stream = true;
}

static void prices_free(mk_llm_price *p, int n) {
  for (int i = 0; i < n; i++) free(p[i].model);
  free(p);
}

void mk_llm_config_free(mk_llm_config *c) {
  free(c->model);
  free(c->base_url);
  free(c->api_key_env);
  free(c->prompts_dir);
  free(c->anthropic_version);
  free(c->max_tokens_field);
  prices_free(c->prices, c->nprices);
  memset(c, 0, sizeof *c);
}

const char *mk_llm_provider_name(mk_llm_provider p) {
  return p == MK_LLM_ANTHROPIC ? "anthropic" : "openai";
}

/* Deep copy, so that from_json can work on a copy and commit atomically. */
static int config_copy(const mk_llm_config *src, mk_llm_config *dst) {
  *dst = *src;
  dst->model = mk_strdup(src->model);
  dst->base_url = mk_strdup(src->base_url);
  dst->api_key_env = mk_strdup(src->api_key_env);
  dst->prompts_dir = mk_strdup(src->prompts_dir);
  dst->anthropic_version = mk_strdup(src->anthropic_version);
  dst->max_tokens_field = mk_strdup(src->max_tokens_field);
  dst->prices = NULL;
  dst->nprices = 0;
  if (src->nprices > 0) {
    dst->prices = calloc((size_t)src->nprices, sizeof *dst->prices);
    if (!dst->prices) goto fail;
    for (int i = 0; i < src->nprices; i++) {
      dst->prices[i] = src->prices[i];
      dst->prices[i].model = mk_strdup(src->prices[i].model);
      dst->nprices = i + 1;
      if (!dst->prices[i].model) goto fail;
    }
  }
  if ((src->model && !dst->model) || (src->base_url && !dst->base_url) ||
      (src->api_key_env && !dst->api_key_env) || (src->prompts_dir && !dst->prompts_dir) ||
      (src->anthropic_version && !dst->anthropic_version) ||
      (src->max_tokens_field && !dst->max_tokens_field))
    goto fail;
  return 0;
fail:
  mk_llm_config_free(dst);
  return MK_ENOMEM;
}

int mk_llm_config_copy_(const mk_llm_config *src, mk_llm_config *dst) {
  return config_copy(src, dst);
}

static int set_str(char **dst, const cJSON *v, const char *key, mk_errmsg *err) {
  if (cJSON_IsNull(v)) {
    free(*dst);
    *dst = NULL;
    return 0;
  }
  if (!cJSON_IsString(v) || v->valuestring[0] == '\0')
    return mk_errf(err, MK_EINVAL, "llm configuration: \"%s\" must be a non-empty string", key);
  char *s = mk_strdup(v->valuestring);
  if (!s) return MK_ENOMEM;
  free(*dst);
  *dst = s;
  return 0;
}

static int set_num(double *dst, const cJSON *v, const char *key, double lo, double hi,
                   mk_errmsg *err) {
  if (!cJSON_IsNumber(v) || v->valuedouble < lo || v->valuedouble > hi)
    return mk_errf(err, MK_EINVAL, "llm configuration: \"%s\" must be a number in [%g, %g]", key,
                   lo, hi);
  *dst = v->valuedouble;
  return 0;
}

static int set_int(int *dst, const cJSON *v, const char *key, int lo, int hi, mk_errmsg *err) {
  double d = 0;
  int rc = set_num(&d, v, key, lo, hi, err);
  if (rc) return rc;
  if (d != (double)(int)d)
    return mk_errf(err, MK_EINVAL, "llm configuration: \"%s\" must be an integer", key);
  *dst = (int)d;
  return 0;
}

static int load_budget(mk_llm_config *c, const cJSON *v, mk_errmsg *err) {
  if (!cJSON_IsObject(v))
    return mk_errf(err, MK_EINVAL, "llm configuration: \"budget\" must be an object");
  const cJSON *it;
  cJSON_ArrayForEach(it, v) {
    if (strcmp(it->string, "tokens") == 0) {
      double d = 0;
      int rc = set_num(&d, it, "budget.tokens", 0, 1e15, err);
      if (rc) return rc;
      c->budget_tokens = (long)d;
    } else if (strcmp(it->string, "usd") == 0) {
      int rc = set_num(&c->budget_usd, it, "budget.usd", 0, 1e9, err);
      if (rc) return rc;
    } else {
      return mk_errf(err, MK_EINVAL, "llm configuration: unknown key \"budget.%s\"", it->string);
    }
  }
  return 0;
}

static int load_prices(mk_llm_config *c, const cJSON *v, mk_errmsg *err) {
  if (!cJSON_IsObject(v))
    return mk_errf(err, MK_EINVAL,
                   "llm configuration: \"prices\" must be an object {model: {input_per_mtok, "
                   "output_per_mtok}}");
  int n = cJSON_GetArraySize(v);
  mk_llm_price *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  if (!p) return MK_ENOMEM;
  int i = 0, rc = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, v) {
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(it, "input_per_mtok");
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(it, "output_per_mtok");
    if (!cJSON_IsObject(it) || !cJSON_IsNumber(in) || !cJSON_IsNumber(out) ||
        in->valuedouble < 0 || out->valuedouble < 0 || cJSON_GetArraySize(it) != 2) {
      rc = mk_errf(err, MK_EINVAL,
                   "llm configuration: price for \"%s\" needs exactly input_per_mtok and "
                   "output_per_mtok (non-negative USD per million tokens)",
                   it->string);
      break;
    }
    p[i].model = mk_strdup(it->string);
    if (!p[i].model) {
      rc = MK_ENOMEM;
      break;
    }
    p[i].input_per_mtok = in->valuedouble;
    p[i].output_per_mtok = out->valuedouble;
    i++;
  }
  if (rc) {
    prices_free(p, i);
    return rc;
  }
  prices_free(c->prices, c->nprices);
  c->prices = p;
  c->nprices = i;
  return 0;
}

static int apply_key(mk_llm_config *c, const cJSON *it, mk_errmsg *err) {
  const char *k = it->string;
  if (strcmp(k, "provider") == 0) {
    if (cJSON_IsString(it) && strcmp(it->valuestring, "openai") == 0) c->provider = MK_LLM_OPENAI;
    else if (cJSON_IsString(it) && strcmp(it->valuestring, "anthropic") == 0)
      c->provider = MK_LLM_ANTHROPIC;
    else
      return mk_errf(err, MK_EINVAL,
                     "llm configuration: \"provider\" must be \"openai\" or \"anthropic\"");
    return 0;
  }
  if (strcmp(k, "api_key") == 0 || strcmp(k, "key") == 0)
    return mk_errf(err, MK_EINVAL,
                   "llm configuration: \"%s\" is not accepted (keys do not belong in files); put "
                   "the key in an environment variable and name it with \"api_key_env\"",
                   k);
  if (strcmp(k, "model") == 0) return set_str(&c->model, it, k, err);
  if (strcmp(k, "base_url") == 0) return set_str(&c->base_url, it, k, err);
  if (strcmp(k, "api_key_env") == 0) return set_str(&c->api_key_env, it, k, err);
  if (strcmp(k, "prompts_dir") == 0) return set_str(&c->prompts_dir, it, k, err);
  if (strcmp(k, "anthropic_version") == 0) return set_str(&c->anthropic_version, it, k, err);
  if (strcmp(k, "max_tokens_field") == 0) return set_str(&c->max_tokens_field, it, k, err);
  if (strcmp(k, "timeout_s") == 0) return set_num(&c->timeout_s, it, k, 0.01, 86400, err);
  if (strcmp(k, "connect_timeout_s") == 0)
    return set_num(&c->connect_timeout_s, it, k, 0.01, 3600, err);
  if (strcmp(k, "stall_timeout_s") == 0) return set_num(&c->stall_timeout_s, it, k, 0, 86400, err);
  if (strcmp(k, "max_concurrency") == 0) return set_int(&c->max_concurrency, it, k, 1, 256, err);
  if (strcmp(k, "max_retries") == 0) return set_int(&c->max_retries, it, k, 0, 100, err);
  if (strcmp(k, "backoff_initial_s") == 0)
    return set_num(&c->backoff_initial_s, it, k, 0, 3600, err);
  if (strcmp(k, "backoff_max_s") == 0) return set_num(&c->backoff_max_s, it, k, 0, 86400, err);
  if (strcmp(k, "max_tokens") == 0) return set_int(&c->max_tokens, it, k, 1, 10000000, err);
  if (strcmp(k, "temperature") == 0) {
    if (cJSON_IsNull(it)) {
      c->temperature = -1;
      return 0;
    }
    return set_num(&c->temperature, it, k, 0, 2, err);
  }
  if (strcmp(k, "stream") == 0) {
    if (!cJSON_IsBool(it))
      return mk_errf(err, MK_EINVAL, "llm configuration: \"stream\" must be true or false");
    c->stream = cJSON_IsTrue(it);
    return 0;
  }
  if (strcmp(k, "budget") == 0) return load_budget(c, it, err);
  if (strcmp(k, "prices") == 0) return load_prices(c, it, err);
  return mk_errf(err, MK_EINVAL, "llm configuration: unknown key \"%s\"", k);
}

int mk_llm_config_from_json(mk_llm_config *c, const cJSON *obj, mk_errmsg *err) {
  if (!cJSON_IsObject(obj))
    return mk_errf(err, MK_EINVAL, "llm configuration must be a JSON object");
  mk_llm_config tmp;
  if (config_copy(c, &tmp)) return mk_errf(err, MK_ENOMEM, "out of memory");
  const cJSON *it;
  cJSON_ArrayForEach(it, obj) {
    int rc = apply_key(&tmp, it, err);
    if (rc) {
      mk_llm_config_free(&tmp);
      return rc;
    }
  }
  mk_llm_config_free(c);
  *c = tmp;
  return 0;
}

const char *mk_llm_default_key_env_(mk_llm_provider p) {
  return p == MK_LLM_ANTHROPIC ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
}

cJSON *mk_llm_config_to_json(const mk_llm_config *c) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "provider", mk_llm_provider_name(c->provider));
  mk_json_add_str(o, "model", c->model);
  mk_json_add_str(o, "base_url", c->base_url);
  /* The variable's name only: the value never leaves the client. */
  cJSON_AddStringToObject(o, "api_key_env",
                          c->api_key_env ? c->api_key_env : mk_llm_default_key_env_(c->provider));
  mk_json_add_str(o, "prompts_dir", c->prompts_dir);
  cJSON_AddNumberToObject(o, "timeout_s", c->timeout_s);
  cJSON_AddNumberToObject(o, "connect_timeout_s", c->connect_timeout_s);
  cJSON_AddNumberToObject(o, "stall_timeout_s", c->stall_timeout_s);
  cJSON_AddNumberToObject(o, "max_concurrency", c->max_concurrency);
  cJSON_AddNumberToObject(o, "max_retries", c->max_retries);
  cJSON_AddNumberToObject(o, "backoff_initial_s", c->backoff_initial_s);
  cJSON_AddNumberToObject(o, "backoff_max_s", c->backoff_max_s);
  cJSON_AddNumberToObject(o, "max_tokens", c->max_tokens);
  if (c->temperature >= 0) cJSON_AddNumberToObject(o, "temperature", c->temperature);
  else cJSON_AddNullToObject(o, "temperature");
  cJSON_AddBoolToObject(o, "stream", c->stream);
  cJSON *b = cJSON_AddObjectToObject(o, "budget");
  if (b) {
    cJSON_AddNumberToObject(b, "tokens", (double)c->budget_tokens);
    cJSON_AddNumberToObject(b, "usd", c->budget_usd);
  }
  cJSON *p = cJSON_AddObjectToObject(o, "prices");
  for (int i = 0; p && i < c->nprices; i++) {
    cJSON *e = cJSON_AddObjectToObject(p, c->prices[i].model);
    if (!e) continue;
    cJSON_AddNumberToObject(e, "input_per_mtok", c->prices[i].input_per_mtok);
    cJSON_AddNumberToObject(e, "output_per_mtok", c->prices[i].output_per_mtok);
  }
  return o;
}

const mk_llm_price *mk_llm_config_price(const mk_llm_config *c, const char *model) {
  if (!model) return NULL;
  const mk_llm_price *best = NULL;
  size_t best_len = 0;
  for (int i = 0; i < c->nprices; i++) {
    const char *m = c->prices[i].model;
    size_t n = strlen(m);
    if (strcmp(m, model) == 0) return &c->prices[i];
    if (n > 0 && m[n - 1] == '*' && strncmp(m, model, n - 1) == 0 && n - 1 >= best_len) {
      best = &c->prices[i];
      best_len = n - 1;
    }
  }
  return best;
}
