/* bench_kbcheck.c — what a cross-check with KernelBench's own evaluation
 * says about a bench record: agreement, disagreement (and on what), or no
 * verdict (KernelBench not importable, or its evaluation failed). The
 * evaluation itself runs in a worker (mkworker/kbcheck.py); this file only
 * judges its answer and keeps it in the record's JSON. */
#include "mk_bench.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[] = {"not run", "agree", "disagree", "unavailable", "error"};

const char *mk_bench_kb_status_name(mk_bench_kb_status s) {
  return (unsigned)s < sizeof status_names / sizeof *status_names ? status_names[s] : "not run";
}

/* Not run, every verdict unknown. */
static void set_unknown(mk_bench_kbcheck *kb) {
  memset(kb, 0, sizeof *kb);
  kb->compiled = kb->correct = -1;
  kb->speedup = kb->runtime = kb->ref_runtime = -1;
}

void mk_bench_kbcheck_free(mk_bench_kbcheck *kb) {
  free(kb->reason);
  free(kb->evaluator);
  free(kb->root);
  set_unknown(kb);
}

static int tristate(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

static double positive_number(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) && v->valuedouble > 0 ? v->valuedouble : -1;
}

/* compiled, correct, speedup and KernelBench's two times: the worker's
 * answer and the record's JSON spell them the same way. */
static void read_verdicts(const cJSON *o, mk_bench_kbcheck *out) {
  out->compiled = tristate(o, "compiled");
  out->correct = tristate(o, "correct");
  out->speedup = positive_number(o, "speedup");
  out->runtime = positive_number(o, "runtime");
  out->ref_runtime = positive_number(o, "ref_runtime");
}

static const char *text_of(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* KernelBench's own words on why it failed the kernel, from its metadata. */
static void why_incorrect(const cJSON *result, mk_buf *b) {
  static const char *const keys[] = {"compilation_error", "runtime_error", "correctness_issue",
                                     "max_difference", "correctness_trials"};
  const cJSON *meta = cJSON_GetObjectItemCaseSensitive(result, "metadata");
  bool any = false;
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, keys[k]);
    if (!cJSON_IsString(v)) continue;
    mk_buf_printf(b, "%s %s: %.300s", any ? ";" : " (", keys[k], v->valuestring);
    any = true;
  }
  if (any) mk_buf_putc(b, ')');
}

static void set_reason(mk_bench_kbcheck *out, mk_buf *b) {
  out->reason = b->err ? mk_strdup("(reason too long)") : mk_buf_steal(b, NULL);
}

void mk_bench_kbcheck_judge(const cJSON *result, const char *error, const mk_bench_record *rec,
                            double speed_tolerance, mk_bench_kbcheck *out) {
  set_unknown(out);
  mk_buf b;
  mk_buf_init(&b, 4096);
  if (result == NULL) {
    out->status = MK_BENCH_KB_ERROR;
    mk_buf_printf(&b, "the worker could not run the check: %s", error ? error : "unknown error");
    set_reason(out, &b);
    return;
  }
  const char *evaluator = text_of(result, "evaluator");
  if (evaluator) out->evaluator = mk_strdup(evaluator);
  if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(result, "available"))) {
    out->status = MK_BENCH_KB_UNAVAILABLE;
    mk_buf_puts(&b, text_of(result, "reason") ? text_of(result, "reason")
                                              : "KernelBench's evaluation code is not importable");
    set_reason(out, &b);
    return;
  }
  if (text_of(result, "error")) {
    out->status = MK_BENCH_KB_ERROR;
    mk_buf_puts(&b, text_of(result, "error"));
    set_reason(out, &b);
    return;
  }
  read_verdicts(result, out);
  bool kb_correct = out->correct == 1;
  if (kb_correct != rec->correct) {
    out->status = MK_BENCH_KB_DISAGREE;
    if (rec->correct) {
      mk_buf_puts(&b, out->compiled == 0 ? "KernelBench could not load the ModelNew we verified"
                                         : "KernelBench finds the ModelNew we verified incorrect");
      why_incorrect(result, &b);
    } else {
      mk_buf_puts(&b, "KernelBench finds correct a ModelNew we rejected");
    }
    set_reason(out, &b);
    return;
  }
  /* The speeds: a disagreement is a speedup we claim and KernelBench does
   * not find (ours above its own beyond the tolerance). KernelBench finding
   * more is noted, not a disagreement: it times both sides with autograd
   * recording, which slows eager's many small launches (launch-bound nets:
   * 1.97x there, 1.51x here on DenseNet-121, H100) while our kernels record
   * nothing, so its figure is the less conservative one. */
  double ours = mk_bench_speedup(rec->eager_ms, rec->ours_ms);
  double limit = log1p(speed_tolerance > 0 ? speed_tolerance : 0);
  double gap = rec->correct && ours > 0 && out->speedup > 0 ? log(ours / out->speedup) : 0;
  if (gap > limit) {
    out->status = MK_BENCH_KB_DISAGREE;
    mk_buf_printf(&b, "speedup vs eager %.2fx here, %.2fx by KernelBench's timing (tolerance %.0f%%)",
                  ours, out->speedup, 100 * speed_tolerance);
    set_reason(out, &b);
    return;
  }
  out->status = MK_BENCH_KB_AGREE;
  if (-gap <= limit) {
    mk_buf_free(&b);
    return;
  }
  mk_buf_printf(&b, "KernelBench's timing finds more: speedup vs eager %.2fx there, %.2fx here "
                    "(beyond the %.0f%% tolerance)", out->speedup, ours, 100 * speed_tolerance);
  if (out->ref_runtime > 0 && out->runtime > 0)
    mk_buf_printf(&b, "; its Model ran %.3g, ModelNew %.3g, against %.3g and %.3g ms here",
                  out->ref_runtime, out->runtime, rec->eager_ms, rec->ours_ms);
  mk_buf_puts(&b, "; the figure reported is ours, the lower");
  set_reason(out, &b);
}

bool mk_bench_kbcheck_rejudge(mk_bench_record *rec, double speed_tolerance) {
  mk_bench_kbcheck *kb = &rec->kb;
  bool verdict = kb->status == MK_BENCH_KB_AGREE || kb->status == MK_BENCH_KB_DISAGREE;
  if (!verdict || (kb->correct == 1) != rec->correct) return false;
  cJSON *answer = mk_bench_kbcheck_to_json(kb);
  if (answer == NULL) return false;
  cJSON_AddBoolToObject(answer, "available", 1);
  cJSON_DeleteItemFromObjectCaseSensitive(answer, "reason");
  mk_bench_kbcheck again;
  mk_bench_kbcheck_judge(answer, NULL, rec, speed_tolerance, &again);
  cJSON_Delete(answer);
  bool changed = again.status != kb->status ||
                 (again.reason == NULL) != (kb->reason == NULL) ||
                 (again.reason && strcmp(again.reason, kb->reason) != 0);
  again.root = kb->root;
  kb->root = NULL;
  mk_bench_kbcheck_free(kb);
  *kb = again;
  return changed;
}

cJSON *mk_bench_kbcheck_to_json(const mk_bench_kbcheck *kb) {
  if (kb->status == MK_BENCH_KB_NOT_RUN) return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "status", mk_bench_kb_status_name(kb->status));
  if (kb->reason) cJSON_AddStringToObject(o, "reason", kb->reason);
  else cJSON_AddNullToObject(o, "reason");
  if (kb->evaluator) cJSON_AddStringToObject(o, "evaluator", kb->evaluator);
  else cJSON_AddNullToObject(o, "evaluator");
  if (kb->root) cJSON_AddStringToObject(o, "root", kb->root);
  else cJSON_AddNullToObject(o, "root");
  const char *keys[2] = {"compiled", "correct"};
  int vals[2] = {kb->compiled, kb->correct};
  for (int k = 0; k < 2; k++) {
    if (vals[k] < 0) cJSON_AddNullToObject(o, keys[k]);
    else cJSON_AddBoolToObject(o, keys[k], vals[k]);
  }
  const char *times[3] = {"speedup", "runtime", "ref_runtime"};
  double tvals[3] = {kb->speedup, kb->runtime, kb->ref_runtime};
  for (int k = 0; k < 3; k++) {
    if (tvals[k] > 0) cJSON_AddNumberToObject(o, times[k], tvals[k]);
    else cJSON_AddNullToObject(o, times[k]);
  }
  return o;
}

void mk_bench_kbcheck_from_json(const cJSON *json, mk_bench_kbcheck *out) {
  set_unknown(out);
  if (!cJSON_IsObject(json)) return;
  const char *status = text_of(json, "status");
  for (int k = 1; status && k < (int)(sizeof status_names / sizeof *status_names); k++)
    if (strcmp(status, status_names[k]) == 0) out->status = (mk_bench_kb_status)k;
  if (out->status == MK_BENCH_KB_NOT_RUN) return;
  if (text_of(json, "reason")) out->reason = mk_strdup(text_of(json, "reason"));
  if (text_of(json, "evaluator")) out->evaluator = mk_strdup(text_of(json, "evaluator"));
  const cJSON *root = cJSON_GetObjectItemCaseSensitive(json, "root");
  if (cJSON_IsString(root)) out->root = mk_strdup(root->valuestring);
  read_verdicts(json, out);
}
