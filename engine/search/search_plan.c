/* search_plan.c — the CPU plan's arithmetic (see mk_search.h).
 *
 * Under Triton's interpreter a kernel costs what its Python emulation costs:
 * seconds for a small GEMM, minutes for a large one, and nothing predicts it
 * better than a measurement. The plan therefore never guesses from shapes
 * or problem names: it shares the wall time left between the jobs still to
 * run, after the whole-program check (which runs every kept kernel again,
 * each twin once per forward) has taken what measured kernels will cost it. */
#include "mk_search.h"

static double clamp_job(const mk_cpu_plan *p, double s) {
  if (p->job_cap_s > 0 && s > p->job_cap_s) s = p->job_cap_s;
  return s;
}

static double budget_after_check(const mk_cpu_plan *p) {
  return p->budget_s - p->spent_s - p->base_s - p->reserve_s;
}

static double job_floor(const mk_cpu_plan *p) {
  return p->floor_s > MK_CPU_PLAN_MIN_JOB_S ? p->floor_s : MK_CPU_PLAN_MIN_JOB_S;
}

/* The candidate's own share and, as much again, the share its kernel will
 * take in the whole-program check: hence subkernels_left + 1 parts. A deep
 * network has more subkernels than the budget has useful jobs: then they
 * are tried in order at the least a job needs, while that and its check's
 * share are left, and the rest are not started (the reason says so). */
double mk_cpu_plan_candidate_limit(const mk_cpu_plan *p) {
  int parts = (p->subkernels_left > 0 ? p->subkernels_left : 1) + 1;
  double avail = budget_after_check(p), need = job_floor(p);
  double share = avail / parts;
  if (share >= need) return clamp_job(p, share);
  if (avail >= 2 * need) return clamp_job(p, need);
  return 0;
}

double mk_cpu_plan_job_need(const mk_cpu_plan *p) { return job_floor(p); }

double mk_cpu_plan_share(const mk_cpu_plan *p) {
  int parts = (p->subkernels_left > 0 ? p->subkernels_left : 1) + 1;
  return budget_after_check(p) / parts;
}

double mk_cpu_plan_kernel_cost(double run_s, int copies, int trials) {
  if (run_s <= 0) return 0;
  return run_s * (copies > 0 ? copies : 1) * (trials > 0 ? trials : 1);
}

bool mk_cpu_plan_affords(const mk_cpu_plan *p, double add_s) {
  return budget_after_check(p) - add_s >= 0;
}

/* Half again the planned cost covers the spread of the interpreter's speed
 * on a shared machine; the budget left is never withheld from the check. */
double mk_cpu_plan_final_limit(const mk_cpu_plan *p) {
  double left = p->budget_s - p->spent_s;
  double planned = 1.5 * (p->base_s + p->reserve_s);
  double s = left > planned ? left : planned;
  if (s < MK_CPU_PLAN_MIN_JOB_S) s = MK_CPU_PLAN_MIN_JOB_S;
  return clamp_job(p, s);
}

double mk_cpu_plan_eta(const mk_cpu_plan *p, double per_candidate_s, int candidates_left) {
  if (per_candidate_s <= 0) return -1;
  return per_candidate_s * (candidates_left > 0 ? candidates_left : 0) + p->base_s + p->reserve_s;
}

/* A lower bound, never a guess: eager time does not scale with any one
 * count (a FLOP-scaled estimate from a network's first layers, large and
 * memory-bound, came out ten times too high on ResNet-101), so the plan
 * keeps what it measured and lets deeper jobs raise it. */
double mk_cpu_plan_check_base(double prefix_s, int trials) {
  if (prefix_s <= 0) return 0;
  return 2.0 * (trials > 0 ? trials : 1) * prefix_s;
}
