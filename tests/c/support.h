/* support.h — what several C test areas share (tests/c/support.c): a small
 * captured model and its source, and a fixture composed of the builtin CUDA
 * generator's candidates. Test code only; not an area of its own. */
#ifndef MK_TEST_SUPPORT_H
#define MK_TEST_SUPPORT_H

#include "mk_buf.h"
#include "mk_compose.h"
#include "mk_decompose.h"
#include "mk_err.h"
#include "mk_ir.h"
#include "mk_propose.h"

#include <stdbool.h>

/* True if the workers' Python (MK_DEFAULT_PYTHON) imports torch and triton:
 * tests that run candidates or workers skip without it. */
bool mk_test_python_ready(void);

/* The captured graph tests/fixtures/<dir>/<name>, or NULL (the parse error
 * printed). Free with mk_graph_free. */
mk_graph *mk_test_load_graph(const char *dir, const char *name);

/* A captured graph (relu -> linear -> 2.0 * y -> sum, returning the sum and
 * the relu) and the module source it was captured from. */
extern const char *const mk_test_small_graph_json;
extern const char *const mk_test_small_source;
/* A graph whose forward takes a Python scalar (`x * s`, captured with s = 2.5)
 * and its module source. */
extern const char *const mk_test_scalar_graph_json;
extern const char *const mk_test_scalar_source;

/* A propose fixture composed into a ModelNew (mk_test_compose_cuda). */
typedef struct mk_test_composed {
  mk_graph *g;
  mk_partition p;
  mk_candidate_list *lists;
  const mk_candidate **chosen;
  mk_buf out;
  int ncuda;
} mk_test_composed;

/* Composes tests/fixtures/propose/<name> with each subkernel's first CUDA
 * candidate (the reference where the CUDA generator has none), or, with
 * `mixed`, Triton for subkernel 0 and CUDA for the rest. *c is the caller's;
 * free it with mk_test_composed_free whatever this returns. */
int mk_test_compose_cuda(const char *name, bool mixed, mk_test_composed *c, mk_errmsg *err);
void mk_test_composed_free(mk_test_composed *c);

#endif
