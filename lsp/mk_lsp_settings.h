/* mk_lsp_settings.h — the protocol core's own settings.
 *
 * From initializationOptions and workspace/didChangeConfiguration, flat or
 * under a "mkevolve" key:
 *   debounceMs   delay between the last edit and re-analysis (default 400)
 *   codeLens     bool (default true)
 * Every other key is the backend's (mk_lsp_backend_ops.configure gets the
 * same object); the core neither reads nor refuses them. Updates are
 * partial: absent keys keep their value, a bad value keeps the old one and
 * is named in the returned message. */
#ifndef MK_LSP_SETTINGS_H
#define MK_LSP_SETTINGS_H

#include "mk_err.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

typedef struct mk_lsp_settings {
  int debounce_ms;
  bool code_lens;
} mk_lsp_settings;

/* The one place the core's defaults live. */
void mk_lsp_settings_defaults(mk_lsp_settings *s);
/* Applies `settings` (NULL or non-object: no change). Returns 0, or
 * MK_EINVAL with err naming every refused key (the others are applied). */
int mk_lsp_settings_apply(mk_lsp_settings *s, const cJSON *settings, mk_errmsg *err);
/* The object holding the settings: settings["mkevolve"] when that is an
 * object, else settings itself (editors send either). Borrowed. */
const cJSON *mk_lsp_settings_scope(const cJSON *settings);

#endif
