/* cli_runtime.h — internal helpers shared by `mkevolve analyze` and
 * `mkevolve check`: an instant static check of a module file (tree-sitter,
 * no Python) and the runtime's set-up and tear-down (loop, worker pool,
 * cache, verifier). Not a public engine header. */
#ifndef MK_CLI_RUNTIME_H
#define MK_CLI_RUNTIME_H

#include "mk_buf.h"
#include "mk_cache.h"
#include "mk_verify.h"
#include "mk_worker.h"

#include <stdbool.h>
#include <stdio.h>
#include <uv.h>

/* Largest module file the CLI accepts. */
#define MK_CLI_MAX_MODULE ((size_t)4 * 1024 * 1024)

typedef struct mk_cli_rt {
  uv_loop_t loop;
  mk_worker_pool *pool;
  mk_cache *cache; /* NULL when disabled or unavailable */
  mk_verify *verify;
} mk_cli_rt;

/* Starts the runtime. timeout_s bounds the worker handshake and each
 * request. The cache is skipped with use_cache false or MKEVOLVE_NO_CACHE=1;
 * a cache that cannot open is a warning on stderr, not an error. */
int mk_cli_rt_open(mk_cli_rt *rt, double timeout_s, bool use_cache, mk_errmsg *err);
/* Runs the loop until *done becomes true (callbacks set it). */
void mk_cli_rt_wait(mk_cli_rt *rt, const bool *done);
/* Closes everything and drains the loop. */
void mk_cli_rt_close(mk_cli_rt *rt);

/* What a module argument must be, said when it is a folder. */
#define MK_CLI_DIRECTORY_HINT                                                                      \
  "is a directory; expected a Python file in KernelBench format (class Model, get_inputs(), "   \
  "get_init_inputs()); for every problem in a folder: mkevolve bench DIR"

typedef struct mk_cli_static {
  int line, col;     /* 1-based; 0 when the problem has no position */
  char kind[32];     /* "syntax_error", "missing", "io_error", "too_large", "not_a_file" */
  char message[1024];
} mk_cli_static;

/* Reads `path` (bounded) and checks it without running Python: a file, not
 * a folder; syntax; class `class_name` at top level; and, with need_inputs,
 * a top-level `get_inputs` function. Returns 0 or
 * MK_EINVAL/MK_EPARSE/MK_ENOENT/MK_EIO/MK_ERANGE with *out filled. */
int mk_cli_static_check(const char *path, const char *class_name, bool need_inputs,
                        mk_cli_static *out);

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

#endif
