/* mk_lsp_config.h — the server's settings.
 *
 * From initializationOptions and workspace/didChangeConfiguration, either
 * flat or under a "mkevolve" key:
 *   pythonPath      Python that runs the workers
 *   backend         "auto" | "cuda" | "cpu"
 *   proposer        "builtin" | "llm"
 *   llm             { provider, model, baseUrl, apiKeyEnv }
 *   budget          number (proposals per subkernel) or
 *                   { proposals, tokens, seconds }
 *   tolerance       number (atol = rtol) or { atol, rtol }
 *   debounceMs      delay between the last edit and re-analysis
 *   composeMode     "file" (write <stem>_new.py) | "inplace"
 *   codeLens        bool
 *   timeout         number (seconds, both) or { capture, verify }: the
 *                   limit of one capture job (60 s: an import-time hang
 *                   should not hold a worker for minutes) and of one
 *                   verification job (300 s)
 * Updates are partial: keys that are absent keep their value; a key with
 * a bad value keeps its value and is named in the returned message, so a
 * typo never resets the rest. Fixed-size fields: values that do not fit
 * are refused the same way. */
#ifndef MK_LSP_CONFIG_H
#define MK_LSP_CONFIG_H

#include "mk_err.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

typedef struct mk_lsp_config {
  char python[1024];
  char backend[16];
  char proposer[16];
  char llm_provider[64];
  char llm_model[256];
  char llm_base_url[1024];
  char llm_key_env[128];   /* name of the environment variable, never the key */
  int budget_proposals;
  long long budget_tokens;  /* 0: unlimited */
  double budget_seconds;    /* 0: unlimited */
  double atol, rtol;
  int debounce_ms;
  char compose_mode[16];
  bool code_lens;
  double capture_timeout_s, verify_timeout_s;
} mk_lsp_config;

/* Fills defaults (python from $MKEVOLVE_PYTHON or the build's default). */
void mk_lsp_config_defaults(mk_lsp_config *c);
/* Applies settings (NULL or non-object: no change). Returns 0, or
 * MK_EINVAL with err naming every refused key (the others are applied). */
int mk_lsp_config_apply(mk_lsp_config *c, const cJSON *settings, mk_errmsg *err);
/* The configuration as JSON (for logs and the engine). Caller frees. */
cJSON *mk_lsp_config_to_json(const mk_lsp_config *c);

#endif
