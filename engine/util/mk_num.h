/* mk_num.h — conversions of untrusted JSON numbers (doubles) to integers.
 *
 * Casting a double outside the target's range (or NaN) to an integer is
 * undefined behaviour in C; LSP ids and versions and LLM replies come from
 * peers we do not control, so every such cast goes through these. Clang's
 * -fsanitize=float-cast-overflow (tests/suites/45-fuzz.sh) checks it. */
#ifndef MK_NUM_H
#define MK_NUM_H

#include <limits.h>
#include <stdbool.h>

/* `v` as an int when it is one exactly; otherwise `fallback`. */
static inline int mk_num_int(double v, int fallback) {
  if (!(v >= (double)INT_MIN && v <= (double)INT_MAX)) return fallback;
  int i = (int)v;
  return (double)i == v ? i : fallback;
}

/* `v` clamped to [lo, hi] and truncated (NaN gives lo). */
static inline int mk_num_clamp(double v, int lo, int hi) {
  if (!(v >= (double)lo)) return lo;
  if (v >= (double)hi) return hi;
  return (int)v;
}

/* Whether `v` is an integer within +-2^63 (a cast to long long is defined). */
static inline bool mk_num_is_integer(double v) {
  if (!(v > -9223372036854775808.0 && v < 9223372036854775808.0)) return false;
  return v == (double)(long long)v;
}

#endif
