/* mk_time.h — the monotonic clock, in seconds, for elapsed times and
 * deadlines (never for dates: CLOCK_MONOTONIC does not jump with the wall
 * clock). One definition instead of a static now_s per file. */
#ifndef MK_TIME_H
#define MK_TIME_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double mk_now_s(void);

#endif
