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

typedef struct mk_cli_static {
  int line, col;     /* 1-based; 0 when the problem has no position */
  char kind[32];     /* "syntax_error", "missing", "io_error", "too_large" */
  char message[1024];
} mk_cli_static;

/* Reads `path` (bounded) and checks it without running Python: syntax,
 * class `class_name` at top level, and, with need_inputs, a top-level
 * `get_inputs` function. Returns 0 or MK_EPARSE/MK_ENOENT/MK_EIO/MK_ERANGE
 * with *out filled. */
int mk_cli_static_check(const char *path, const char *class_name, bool need_inputs,
                        mk_cli_static *out);

/* Absolute, normalised path of `path` into out (bounded). */
int mk_cli_abspath(const char *path, char *out, size_t outsize);

/* Parses a number option value; 0 or MK_EINVAL. */
int mk_cli_parse_int(const char *s, int lo, int hi, int *out);
int mk_cli_parse_double(const char *s, double lo, double hi, double *out);

/* The subcommands (cli_analyze.c, cli_check.c); argv[1] is the command. */
int mk_cli_analyze(int argc, char **argv);
int mk_cli_check(int argc, char **argv);

#endif
