/* mk_cli.h — the headless command line: `mkevolve analyze|check|evolve|bench`.
 * app/main.c hands every subcommand except `lsp` to mk_cli_main. */
#ifndef MK_CLI_H
#define MK_CLI_H

/* Runs one subcommand; argv[0] is the program, argv[1] the subcommand.
 * Returns the process exit status (0 ok, 1 failure, 2 usage error). */
int mk_cli_main(int argc, char **argv);

#endif
