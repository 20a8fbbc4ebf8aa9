/* time.c — the monotonic clock (mk_time.h). */
#include "mk_time.h"

#include <time.h>

double mk_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
