/* mk_test.h — the test framework: self-registering tests, one runner.
 *
 *   MK_TEST(area, name) { MK_CHECK(1 + 1 == 2); }
 *
 * Each test file registers its tests at load time; the single runner
 * (tests/c/runner.c, binary `mk_tests`) runs one area or all of them:
 *   mk_tests            all areas
 *   mk_tests ir         only area "ir"
 *   mk_tests ir/parse   one test
 * A failed check prints file:line and the expression and fails the test;
 * the test continues so one run reports every broken check. */
#ifndef MK_TEST_H
#define MK_TEST_H

#include <stdio.h>
#include <string.h>

typedef void (*mk_test_fn)(void);

void mk_test_register(const char *area, const char *name, mk_test_fn fn);
void mk_test_fail(const char *file, int line, const char *expr);
/* Directory of the repository (for fixtures), and of ../shared. */
const char *mk_test_repo_dir(void);
const char *mk_test_shared_dir(void);
/* Marks the running test skipped with a reason (e.g. "no GPU"). */
void mk_test_skip(const char *why);

#define MK_TEST(area, name)                                                   \
  static void mk_test_##area##_##name(void);                                  \
  __attribute__((constructor)) static void mk_test_reg_##area##_##name(void) { \
    mk_test_register(#area, #name, mk_test_##area##_##name);                  \
  }                                                                           \
  static void mk_test_##area##_##name(void)

#define MK_CHECK(expr)                                       \
  do {                                                       \
    if (!(expr)) mk_test_fail(__FILE__, __LINE__, #expr);    \
  } while (0)

#define MK_CHECK_INT(a, op, b)                                                    \
  do {                                                                            \
    long long mk_a_ = (long long)(a), mk_b_ = (long long)(b);                     \
    if (!(mk_a_ op mk_b_)) {                                                      \
      char mk_m_[256];                                                            \
      snprintf(mk_m_, sizeof mk_m_, "%s %s %s (%lld vs %lld)", #a, #op, #b, mk_a_, mk_b_); \
      mk_test_fail(__FILE__, __LINE__, mk_m_);                                    \
    }                                                                             \
  } while (0)

#define MK_CHECK_STR(a, b)                                                        \
  do {                                                                            \
    const char *mk_a_ = (a), *mk_b_ = (b);                                        \
    if (mk_a_ == NULL || mk_b_ == NULL || strcmp(mk_a_, mk_b_) != 0) {            \
      char mk_m_[1024];                                                           \
      snprintf(mk_m_, sizeof mk_m_, "%.150s == %.150s (\"%.300s\" vs \"%.300s\")", #a, #b, \
               mk_a_ ? mk_a_ : "(null)", mk_b_ ? mk_b_ : "(null)");                \
      mk_test_fail(__FILE__, __LINE__, mk_m_);                                    \
    }                                                                             \
  } while (0)

/* Fails the test and returns from it when expr is false (for preconditions). */
#define MK_REQUIRE(expr)                                     \
  do {                                                       \
    if (!(expr)) {                                           \
      mk_test_fail(__FILE__, __LINE__, #expr);               \
      return;                                                \
    }                                                        \
  } while (0)

#endif
