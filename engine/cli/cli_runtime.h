/* cli_runtime.h — internal helpers shared by the CLI's subcommands:
 * paths, option values, and showing a worker's errors (source lines, the
 * user's traceback frames). The runtime itself (worker pool, cache,
 * verifier) is the session's: every subcommand goes through mk_session;
 * the static check of a module file is the frontend's
 * (mk_frontend_static_check). Not a public engine header. */
#ifndef MK_CLI_RUNTIME_H
#define MK_CLI_RUNTIME_H

#include "mk_buf.h"
#include "mk_frontend.h"

#include <stdbool.h>
#include <stdio.h>

/* Prints " 12 | <source line>" of `path` under an error; nothing when the
 * line does not exist. */
void mk_cli_print_source_line(FILE *out, const char *path, int line);

/* The frames of Python traceback `tb` that lie in `user_file` (each frame's
 * header and source line, caret lines dropped) followed by the exception
 * line, appended to `out`. Returns how many frames were the user's; with
 * none, nothing is appended. Library frames (torch, mkworker) say nothing
 * to someone debugging their own module. */
int mk_cli_user_traceback(const char *tb, const char *user_file, mk_buf *out);

/* Prints a worker's traceback under an error: the user's frames when some
 * are in `user_file`, else the last lines. */
void mk_cli_print_traceback(FILE *out, const char *tb, const char *user_file);

/* Absolute, normalised path of `path` into out (bounded). */
int mk_cli_abspath(const char *path, char *out, size_t outsize);

/* Parses a number option value; 0 or MK_EINVAL. */
int mk_cli_parse_int(const char *s, int lo, int hi, int *out);
int mk_cli_parse_double(const char *s, double lo, double hi, double *out);

/* The subcommands (cli_analyze.c, cli_check.c); argv[1] is the command. */
int mk_cli_analyze(int argc, char **argv);
int mk_cli_check(int argc, char **argv);
/* cli_export.c: `mkevolve export` (docs/export.md). */
int mk_cli_export(int argc, char **argv);

#endif
