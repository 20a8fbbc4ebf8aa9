/* cli_common.h — helpers shared by the CLI subcommands (not public). */
#ifndef MK_CLI_COMMON_H
#define MK_CLI_COMMON_H

#include "mk_buf.h"
#include "mk_session.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Where evolve and bench write their run files (run.jsonl, the composed
 * ModelNew, rounds) unless --workdir says otherwise: a folder in the
 * working directory, never beside the problem (which may sit in someone
 * else's checkout). Each module gets <workdir>/<file stem>/. */
#define MK_CLI_WORKDIR ".mkevolve"

/* Parses one session option (--beam, --budget, --device, ...) at argv
 * position `a` with its value `v` (may be NULL). Returns how many argv
 * entries it used (1 or 2), 0 when `a` is not a session option, or -1
 * when the value is missing or invalid. */
int mk_cli_session_option(mk_session_config *cfg, const char *a, const char *v);

/* Every session option with a line of help, for the usage of evolve and
 * bench (docs/cli.md lists the same). */
void mk_cli_print_session_options(FILE *out);

/* True for -h and --help. */
bool mk_cli_is_help(const char *arg);

/* Gives cfg->workdir its CLI default, <cwd>/MK_CLI_WORKDIR, when --workdir
 * was not given; `buf` (caller's, `size` bytes) holds the path. 0 or
 * MK_EIO / MK_ERANGE. */
int mk_cli_default_workdir(mk_session_config *cfg, char *buf, size_t size);

/* Checks before minutes of search that the file `path` can be written where
 * it is named: its folder exists, is a folder and is writable. 0, or a
 * negative MK_E* code with the reason in `err` ("the folder out does not
 * exist"). Nothing is created. */
int mk_cli_check_output_file(const char *path, mk_errmsg *err);

/* With --proposer llm: checks the merged LLM configuration the way the
 * session will use it (model present, key in the environment for vendor
 * endpoints, a price for a money budget) so mistakes show at once.
 * 0 for other proposers. */
int mk_cli_llm_check(const mk_session_config *cfg, mk_errmsg *err);

/* Frees what the option parser kept (the merged LLM configuration): call
 * after the session has copied its configuration. */
void mk_cli_options_free(void);

/* A module's state as JSON (documented in docs/cli.md). Caller deletes. */
cJSON *mk_cli_module_json(const mk_session_module *m);

/* Closes the session, runs the loop until everything is released, closes
 * the loop. */
void mk_cli_close_session(uv_loop_t *loop, mk_session *s);

int mk_cli_evolve(int argc, char **argv);
int mk_cli_bench(int argc, char **argv);

#endif
