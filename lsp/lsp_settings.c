/* lsp_settings.c — the protocol core's settings (mk_lsp_settings.h). */
#include "mk_lsp_settings.h"

#include "mk_buf.h"

#include <math.h>

void mk_lsp_settings_defaults(mk_lsp_settings *s) {
  *s = (mk_lsp_settings){.debounce_ms = 400, .code_lens = true};
}

const cJSON *mk_lsp_settings_scope(const cJSON *settings) {
  const cJSON *nested = cJSON_GetObjectItemCaseSensitive(settings, "mkevolve");
  return cJSON_IsObject(nested) ? nested : settings;
}

int mk_lsp_settings_apply(mk_lsp_settings *s, const cJSON *settings, mk_errmsg *err) {
  if (!cJSON_IsObject(settings)) return 0;
  const cJSON *o = mk_lsp_settings_scope(settings);
  mk_buf bad;
  mk_buf_init(&bad, 1024);
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "debounceMs");
  if (cJSON_IsNumber(d) && isfinite(d->valuedouble) && d->valuedouble >= 0 &&
      d->valuedouble <= 60000)
    s->debounce_ms = (int)d->valuedouble;
  else if (d && !cJSON_IsNull(d))
    mk_buf_puts(&bad, "debounceMs (expected a number in range)");
  const cJSON *cl = cJSON_GetObjectItemCaseSensitive(o, "codeLens");
  if (cJSON_IsBool(cl))
    s->code_lens = cJSON_IsTrue(cl);
  else if (cl && !cJSON_IsNull(cl))
    mk_buf_printf(&bad, "%scodeLens (expected true or false)", bad.len ? ", " : "");
  int rc = 0;
  if (bad.len) rc = mk_errf(err, MK_EINVAL, "mkevolve: settings ignored: %s", mk_buf_cstr(&bad));
  mk_buf_free(&bad);
  return rc;
}
