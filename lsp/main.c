/* main.c — the `mkevolve` executable: `lsp` starts the language server,
 * every other subcommand is the engine's headless CLI. */
#include "mk_cli.h"

int main(int argc, char **argv) { return mk_cli_main(argc, argv); }
