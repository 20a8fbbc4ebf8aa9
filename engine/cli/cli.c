/* cli.c — subcommand dispatch and usage text for the headless CLI.
 * Each subcommand lives in its own file (cli_<name>.c) and registers here. */
#include "mk_cli.h"

#include "cli_common.h"
#include "cli_runtime.h"

#include <stdio.h>
#include <string.h>

static void print_usage(FILE *out) {
  fputs("usage: mkevolve <command> [options]\n"
        "\n"
        "commands:\n"
        "  analyze FILE... [--json]      operator graph and proposed subkernels\n"
        "  check MODELNEW --against FILE verify a KernelBench-style ModelNew\n"
        "  evolve FILE [-o OUT.py]       decompose, evolve and compose a faster ModelNew\n"
        "  bench PATHS... [-o DIR]       sweep KernelBench-format problems\n"
        "  export MODELNEW -o DIR        a ModelNew as a C++ (libtorch) CMake project with a test\n"
        "  lsp [--stdio]                 run the language server on stdio\n"
        "  help [COMMAND]                this, or COMMAND's full usage (as COMMAND --help)\n"
        "  version                       print the version\n",
        out);
}

int mk_cli_main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "help") == 0 && strcmp(argv[2], "lsp") != 0) {
    char *help[] = {argv[0], argv[2], "--help", NULL};
    if (strcmp(argv[2], "analyze") == 0 || strcmp(argv[2], "check") == 0 ||
        strcmp(argv[2], "evolve") == 0 || strcmp(argv[2], "bench") == 0 ||
        strcmp(argv[2], "export") == 0)
      return mk_cli_main(3, help);
  }
  if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "-h") == 0) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
    printf("mkevolve %s\n", MK_VERSION);
    return 0;
  }
  if (strcmp(argv[1], "analyze") == 0) return mk_cli_analyze(argc, argv);
  if (strcmp(argv[1], "check") == 0) return mk_cli_check(argc, argv);
  if (strcmp(argv[1], "evolve") == 0) return mk_cli_evolve(argc, argv);
  if (strcmp(argv[1], "bench") == 0) return mk_cli_bench(argc, argv);
  if (strcmp(argv[1], "export") == 0) return mk_cli_export(argc, argv);
  fprintf(stderr, "mkevolve: unknown command '%s'\n", argv[1]);
  print_usage(stderr);
  return 2;
}
