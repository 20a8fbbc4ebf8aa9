/* backend_cache.c — compiles answered from the SQLite cache.
 *
 * The value is JSON: {"ok", "cubin" (base64), "log", "nvrtc"}. The
 * diagnostics are not stored but parsed again from the log, because the
 * same CUDA text may sit at another line in another candidate module (the
 * key is over the CUDA text, not the module). */
#include "mk_backend.h"

#include "mk_buf.h"

#include <stdlib.h>
#include <string.h>

static int from_json(const char *json, int line_offset, mk_backend_result *out) {
  cJSON *o = cJSON_Parse(json);
  if (o == NULL) return MK_EPARSE;
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(o, "ok");
  const cJSON *cubin = cJSON_GetObjectItemCaseSensitive(o, "cubin");
  const cJSON *log = cJSON_GetObjectItemCaseSensitive(o, "log");
  int rc = cJSON_IsBool(ok) && cJSON_IsString(cubin) && cJSON_IsString(log) ? 0 : MK_EPARSE;
  if (rc == 0) {
    out->ok = cJSON_IsTrue(ok);
    rc = mk_backend_base64_decode(cubin->valuestring, strlen(cubin->valuestring), &out->image,
                                  &out->image_len);
  }
  if (rc == 0 && out->ok && out->image_len == 0) rc = MK_EPARSE;
  if (rc == 0) {
    out->log = mk_strdup(log->valuestring);
    rc = out->log ? 0 : MK_ENOMEM;
  }
  if (rc == 0) rc = mk_backend_parse_log(out->log, line_offset, &out->diags, &out->ndiags);
  cJSON_Delete(o);
  return rc;
}

static int to_json(const mk_backend *b, const mk_backend_result *r, mk_buf *out) {
  mk_buf_printf(out, "{\"ok\":%s,\"nvrtc\":", r->ok ? "true" : "false");
  mk_buf_json_str(out, mk_backend_version(b));
  mk_buf_puts(out, ",\"log\":");
  mk_buf_json_str(out, r->log ? r->log : "");
  mk_buf_puts(out, ",\"cubin\":\"");
  if (r->ok) mk_backend_base64_encode(r->image, r->image_len, out);
  return mk_buf_puts(out, "\"}");
}

int mk_backend_compile_cached(const mk_backend *b, mk_cache *cache, const char *cuda_source,
                              const char *name, const mk_backend_options *opt, int line_offset,
                              mk_backend_result *out, mk_errmsg *err) {
  *out = (mk_backend_result){0};
  if (b == NULL || cuda_source == NULL) return mk_errf(err, MK_EINVAL, "no NVRTC or no source");
  char key[65];
  int rc = mk_backend_cache_key(b, cuda_source, opt, key);
  if (rc) return mk_errf(err, rc, "cannot hash the compile (architecture must be sm_XX)");
  char *hit = NULL;
  if (cache && mk_cache_get(cache, key, &hit, NULL, NULL) == 0) {
    rc = from_json(hit, line_offset, out);
    free(hit);
    if (rc == 0) {
      out->cached = true;
      memcpy(out->key, key, sizeof key);
      return 0;
    }
    /* A damaged entry: compile again and overwrite it. */
    mk_backend_result_free(out);
  }
  rc = mk_backend_compile(b, cuda_source, name, opt, line_offset, out, err);
  if (rc || cache == NULL) return rc;
  mk_buf json;
  mk_buf_init(&json, 0);
  if (to_json(b, out, &json) == 0) {
    mk_errmsg perr = {{0}};
    /* A cache that cannot store (read-only, busy) costs a recompile later, nothing else. */
    (void)mk_cache_put(cache, key, "cuda_cubin", json.data, json.len, &perr);
  }
  mk_buf_free(&json);
  return 0;
}
