/* runner.c — the one C test runner. Tests register themselves (mk_test.h);
 * this file filters them by area or area/name, runs each, and prints a
 * summary line "N passed, N failed, N skipped" that CI reads. */
#include "mk_test.h"

#include <stdlib.h>

#define MK_TEST_MAX 4096

typedef struct {
  const char *area, *name;
  mk_test_fn fn;
} mk_test_entry;

static mk_test_entry tests[MK_TEST_MAX];
static int ntests;
static int current_failed, current_skipped;
static char skip_reason[256];

void mk_test_register(const char *area, const char *name, mk_test_fn fn) {
  if (ntests < MK_TEST_MAX) tests[ntests++] = (mk_test_entry){area, name, fn};
}

void mk_test_fail(const char *file, int line, const char *expr) {
  fprintf(stderr, "    %s:%d: check failed: %s\n", file, line, expr);
  current_failed = 1;
}

void mk_test_skip(const char *why) {
  current_skipped = 1;
  snprintf(skip_reason, sizeof skip_reason, "%s", why);
}

const char *mk_test_repo_dir(void) {
  const char *d = getenv("MK_REPO_DIR");
  return d ? d : MK_SOURCE_DIR;
}

const char *mk_test_shared_dir(void) {
  const char *d = getenv("MK_SHARED_DIR");
  return d ? d : MK_SOURCE_DIR "/../shared";
}

static int matches(const mk_test_entry *t, const char *filter) {
  if (filter == NULL) return 1;
  size_t alen = strlen(t->area);
  if (strcmp(filter, t->area) == 0) return 1;
  return strncmp(filter, t->area, alen) == 0 && filter[alen] == '/' &&
         strcmp(filter + alen + 1, t->name) == 0;
}

static int by_area_then_name(const void *a, const void *b) {
  const mk_test_entry *x = a, *y = b;
  int c = strcmp(x->area, y->area);
  return c ? c : strcmp(x->name, y->name);
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  /* Workers get an allow-listed environment; the fake workers' switches
   * (FAKE_MODE, FAKE_FLAG, ...) are passed the documented way. */
  setenv("MKEVOLVE_WORKER_ENV", "FAKE_*", 0);
  qsort(tests, (size_t)ntests, sizeof tests[0], by_area_then_name);
  int passed = 0, failed = 0, skipped = 0;
  for (int i = 0; i < ntests; i++) {
    if (!matches(&tests[i], filter)) continue;
    current_failed = current_skipped = 0;
    tests[i].fn();
    if (current_failed) {
      failed++;
      printf("FAIL %s/%s\n", tests[i].area, tests[i].name);
    } else if (current_skipped) {
      skipped++;
      printf("skip %s/%s (%s)\n", tests[i].area, tests[i].name, skip_reason);
    } else {
      passed++;
      printf("ok   %s/%s\n", tests[i].area, tests[i].name);
    }
    fflush(stdout);
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (passed + failed + skipped == 0) {
    fprintf(stderr, "no test matched '%s'\n", filter ? filter : "");
    return 2;
  }
  return failed ? 1 : 0;
}
