/* main.c — the `mkevolve` executable: `lsp` starts the language server
 * (lsp/), every other subcommand is the engine's headless CLI
 * (engine/cli), with the engine's backend (lsp/engine). The only file
 * that knows both. */
#include "signals.h"
#include "mk_cli.h"
#include "mk_lsp_engine.h"
#include "mk_lsp_server.h"

#include <string.h>

int main(int argc, char **argv) {
  mk_app_signals_install(); /* workers stop with us (signals.c) */
  if (argc >= 2 && strcmp(argv[1], "lsp") == 0) return mk_lsp_main(argc - 1, argv + 1, mk_lsp_engine_backend_new);
  return mk_cli_main(argc, argv);
}
