/* mk_lsp_engine_config.h — the engine backend's settings (the protocol
 * core's own, debounceMs and codeLens, are in mk_lsp_settings.h).
 *
 * From initializationOptions and workspace/didChangeConfiguration, either
 * flat or under a "mkevolve" key:
 *   pythonPath      Python that runs the workers
 *   backend         "auto" | "cuda" | "cpu"
 *   proposer        "builtin" | "llm"
 *   kernelBackend   "triton" | "cuda" | "auto": the kernels' language,
 *                   either proposer's (`--backend`; "backend" above is the
 *                   device)
 *   llm             { provider, model, baseUrl, apiKeyEnv }
 *   budget          number (candidates per evolve run, all subkernels
 *                   together: the same budget as `mkevolve evolve --budget`)
 *                   or { proposals, tokens, seconds }
 *   beam            { width, depth }: the search's beam (--beam, --depth)
 *   tolerance       number (atol = rtol) or { atol, rtol }; 0 is honoured
 *   trials          seeded trials per verification (--trials)
 *   composeMode     "file" (write <stem>_new.py) | "inplace"
 *   timeout         number (seconds, both) or { capture, verify }: the
 *                   limit of one capture job and of one verification job
 * Every engine setting left out keeps the engine's default
 * (mk_session_config_defaults): the editor and `mkevolve evolve` / `check`
 * with no settings verify the same way. The one default of the server's
 * own is the capture limit: 60 s, so an import-time hang does not hold a
 * worker for minutes while the user types.
 * Updates are partial: keys that are absent keep their value; a key with
 * a bad value keeps its value and is named in the returned message, so a
 * typo never resets the rest. Fixed-size fields: values that do not fit
 * are refused the same way. */
#ifndef MK_LSP_ENGINE_CONFIG_H
#define MK_LSP_ENGINE_CONFIG_H

#include "mk_err.h"
#include "mk_session.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

typedef struct mk_lsp_engine_config {
  /* The engine's settings (budget, beam, tolerance, trials, timeouts):
   * the session's defaults, overridden by the user's settings. Its string
   * fields are unused here: the strings below are carried instead and
   * lent to the session by mk_lsp_engine_config_session. */
  mk_session_config session;
  char python[1024];       /* "": the engine's default ($MKEVOLVE_PYTHON or the build's) */
  char backend[16];
  char proposer[16];
  char llm_provider[64];   /* the LLM strings: "" is the LLM configuration's default */
  char llm_model[256];
  char llm_base_url[1024];
  char llm_key_env[128];   /* name of the environment variable, never the key */
  char compose_mode[16];
} mk_lsp_engine_config;

/* Fills defaults: the engine's (mk_session_config_defaults) and the
 * backend's own (compose mode, capture limit). */
void mk_lsp_engine_config_defaults(mk_lsp_engine_config *c);
/* The session configuration for `c`: c->session with the strings of `c`
 * lent to it (valid while `c` is) and the LLM part as JSON in *llm_json
 * (caller frees; out->llm_config_json points to it). */
void mk_lsp_engine_config_session(const mk_lsp_engine_config *c, mk_session_config *out, char **llm_json);
/* Applies settings (NULL or non-object: no change). Returns 0, or
 * MK_EINVAL with err naming every refused key (the others are applied). */
int mk_lsp_engine_config_apply(mk_lsp_engine_config *c, const cJSON *settings, mk_errmsg *err);
/* The configuration as JSON (for logs and the engine). Caller frees. */
cJSON *mk_lsp_engine_config_to_json(const mk_lsp_engine_config *c);

#endif
