/* bench_results.c — benchmark records, their JSON form and aggregates
 * (fast_p, geometric means) as KernelBench defines them: fast_p is the
 * fraction of all problems that are correct and more than p times faster. */
#include "mk_bench.h"
#include "mk_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double mk_bench_speedup(double base_ms, double ours_ms) {
  if (!(base_ms > 0) || !(ours_ms > 0)) return -1.0;
  return base_ms / ours_ms;
}

void mk_bench_json_add_compile_check(cJSON *o, int check, double max_abs_err) {
  if (check == 0) {
    cJSON_AddNullToObject(o, "compile_matches_eager");
    cJSON_AddNullToObject(o, "compile_max_abs_error");
    return;
  }
  cJSON_AddBoolToObject(o, "compile_matches_eager", check > 0);
  mk_json_add_ms(o, "compile_max_abs_error", max_abs_err);
}

/* The inverse of mk_bench_json_add_compile_check; records without it read as unchecked. */
static void get_compile_check(const cJSON *json, int *check, double *max_abs_err) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(json, "compile_matches_eager");
  *check = cJSON_IsBool(m) ? (cJSON_IsTrue(m) ? 1 : -1) : 0;
  *max_abs_err = mk_json_num(json, "compile_max_abs_error", -1);
}

static void fast_of(const mk_bench_results *r, int level, double p, mk_bench_fast *f) {
  int n = 0, fe = 0, fc = 0, fm = 0, fr = 0;
  for (int i = 0; i < r->nrecords; i++) {
    const mk_bench_record *rec = &r->records[i];
    if (level && rec->level != level) continue;
    n++;
    if (!rec->correct) continue;
    double se = mk_bench_speedup(rec->eager_ms, rec->ours_ms);
    double sc = mk_bench_speedup(rec->compile_ms, rec->ours_ms);
    /* p = 0 counts correctness alone, as KernelBench's fast_0 does */
    if (p == 0 || se > p) fe++;
    if (p == 0 || sc > p) fc++;
    if (p == 0 || mk_bench_speedup(rec->compile_max_ms, rec->ours_ms) > p) fm++;
    if (p == 0 || mk_bench_speedup(rec->compile_ro_ms, rec->ours_ms) > p) fr++;
  }
  f->p = p;
  f->vs_eager = n ? (double)fe / n : 0;
  f->vs_compile = n ? (double)fc / n : 0;
  f->vs_compile_max = n ? (double)fm / n : 0;
  f->vs_compile_ro = n ? (double)fr / n : 0;
}

static const char *const backend_names[] = {"cuda", "triton", "pytorch"};

const char *mk_bench_backend_name(int index) {
  return index >= 0 && index < 3 ? backend_names[index] : "pytorch";
}

int mk_bench_subkernel_backend(const mk_bench_subkernel *sk) {
  for (int k = 0; sk->backend && k < 3; k++)
    if (strcmp(sk->backend, backend_names[k]) == 0) return k;
  if (sk->backend || sk->origin == NULL || strcmp(sk->origin, "reference") == 0)
    return MK_BENCH_BACKEND_PYTORCH; /* an unknown name is no kernel we can vouch for */
  return MK_BENCH_BACKEND_TRITON;
}

void mk_bench_aggregate_of(const mk_bench_results *r, int level, mk_bench_aggregate *out) {
  memset(out, 0, sizeof *out);
  static const double ps[4] = {0, 1, 1.5, 2};
  for (int k = 0; k < 4; k++) fast_of(r, level, ps[k], &out->fast[k]);
  double le = 0, lc = 0, lm = 0, lr = 0;
  int ne = 0, nc = 0;
  for (int i = 0; i < r->nrecords; i++) {
    const mk_bench_record *rec = &r->records[i];
    if (level && rec->level != level) continue;
    out->problems++;
    if (rec->kb.status != MK_BENCH_KB_NOT_RUN) out->kb_checked++;
    if ((unsigned)rec->kb.status < 5) out->kb_count[rec->kb.status]++;
    out->tokens_in += rec->tokens_in;
    out->tokens_out += rec->tokens_out;
    out->cost_usd += rec->cost_usd;
    out->wall_s += rec->wall_s;
    out->native_evals += rec->native_evals;
    out->timed += rec->eager_ms > 0 && rec->ours_ms > 0;
    for (int k = 0; k < rec->nsubkernels; k++) {
      out->subkernels++;
      out->by_backend[mk_bench_subkernel_backend(&rec->subkernels[k])]++;
    }
    if (!rec->correct) continue;
    out->correct++;
    double se = mk_bench_speedup(rec->eager_ms, rec->ours_ms);
    double sc = mk_bench_speedup(rec->compile_ms, rec->ours_ms);
    if (se > 0) le += log(se), ne++;
    if (sc > 0) lc += log(sc), nc++;
    double sm = mk_bench_speedup(rec->compile_max_ms, rec->ours_ms);
    double sr = mk_bench_speedup(rec->compile_ro_ms, rec->ours_ms);
    if (sm > 0) lm += log(sm), out->timed_max++;
    if (sr > 0) lr += log(sr), out->timed_ro++;
  }
  out->geomean_vs_eager = ne ? exp(le / ne) : -1;
  out->geomean_vs_compile = nc ? exp(lc / nc) : -1;
  out->geomean_vs_compile_max = out->timed_max ? exp(lm / out->timed_max) : -1;
  out->geomean_vs_compile_ro = out->timed_ro ? exp(lr / out->timed_ro) : -1;
}

cJSON *mk_bench_record_to_json(const mk_bench_record *rec) {
  cJSON *o = cJSON_CreateObject();
  mk_json_add_str(o, "id", rec->id);
  mk_json_add_str(o, "path", rec->path);
  cJSON_AddNumberToObject(o, "level", rec->level);
  cJSON_AddBoolToObject(o, "correct", rec->correct);
  mk_json_add_str(o, "error", rec->error);
  mk_json_add_str(o, "note", rec->note);
  mk_json_add_ms(o, "eager_ms", rec->eager_ms);
  mk_json_add_ms(o, "compile_ms", rec->compile_ms);
  mk_json_add_ms(o, "ours_ms", rec->ours_ms);
  mk_json_add_ms(o, "speedup_vs_eager", mk_bench_speedup(rec->eager_ms, rec->ours_ms));
  mk_json_add_ms(o, "speedup_vs_compile", mk_bench_speedup(rec->compile_ms, rec->ours_ms));
  mk_json_add_ms(o, "compile_max_autotune_ms", rec->compile_max_ms > 0 ? rec->compile_max_ms : -1);
  mk_json_add_ms(o, "compile_reduce_overhead_ms", rec->compile_ro_ms > 0 ? rec->compile_ro_ms : -1);
  mk_json_add_ms(o, "speedup_vs_compile_max_autotune", mk_bench_speedup(rec->compile_max_ms, rec->ours_ms));
  mk_json_add_ms(o, "speedup_vs_compile_reduce_overhead",
         mk_bench_speedup(rec->compile_ro_ms, rec->ours_ms));
  mk_bench_json_add_compile_check(o, rec->compile_check, rec->compile_err);
  cJSON *moves = cJSON_AddObjectToObject(o, "search");
  cJSON_AddNumberToObject(moves, "merges_tried", rec->merges_tried);
  cJSON_AddNumberToObject(moves, "merges_won", rec->merges_won);
  cJSON_AddNumberToObject(moves, "splits_tried", rec->splits_tried);
  cJSON_AddNumberToObject(moves, "splits_won", rec->splits_won);
  cJSON_AddNumberToObject(moves, "fused_at_start", rec->fused);
  cJSON_AddNumberToObject(moves, "native_worker_evals", rec->native_evals);
  cJSON_AddBoolToObject(o, "cuda_graph", rec->cuda_graph);
  cJSON_AddNumberToObject(o, "tokens_in", (double)rec->tokens_in);
  cJSON_AddNumberToObject(o, "tokens_out", (double)rec->tokens_out);
  cJSON_AddNumberToObject(o, "cost_usd", rec->cost_usd);
  cJSON_AddNumberToObject(o, "wall_s", rec->wall_s);
  mk_json_add_ms(o, "gpu_fraction", rec->gpu_fraction);
  mk_json_add_str(o, "modelnew", rec->modelnew);
  mk_json_add_str(o, "host", rec->host);
  mk_json_add_str(o, "gpu", rec->gpu);
  cJSON_AddItemToObject(o, "kernelbench_check", mk_bench_kbcheck_to_json(&rec->kb));
  cJSON *sks = cJSON_AddArrayToObject(o, "subkernels");
  for (int i = 0; i < rec->nsubkernels; i++) {
    const mk_bench_subkernel *s = &rec->subkernels[i];
    cJSON *j = cJSON_CreateObject();
    mk_json_add_str(j, "name", s->name);
    mk_json_add_str(j, "variant", s->variant);
    mk_json_add_str(j, "origin", s->origin);
    cJSON_AddStringToObject(j, "backend", backend_names[mk_bench_subkernel_backend(s)]);
    mk_json_add_ms(j, "ref_ms", s->ref_ms);
    mk_json_add_ms(j, "ours_ms", s->ours_ms);
    mk_json_add_str(j, "reason", s->reason);
    mk_json_add_str(j, "gpu", s->gpu);
    cJSON_AddItemToArray(sks, j);
  }
  return o;
}

static char *get_str(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? mk_strdup(v->valuestring) : NULL;
}

int mk_bench_record_from_json(const cJSON *json, mk_bench_record *out, mk_errmsg *err) {
  memset(out, 0, sizeof *out);
  if (!cJSON_IsObject(json)) return mk_errf(err, MK_EINVAL, "bench record is not an object");
  out->id = get_str(json, "id");
  if (out->id == NULL) return mk_errf(err, MK_EINVAL, "bench record without id");
  out->path = get_str(json, "path");
  out->level = (int)mk_json_num(json, "level", 0);
  out->correct = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(json, "correct"));
  out->error = get_str(json, "error");
  out->note = get_str(json, "note");
  /* Records written before "note" existed kept the note of a correct run
   * (e.g. "reduced batch 2 on CPU") in "error". */
  if (out->correct && out->error && out->note == NULL) {
    out->note = out->error;
    out->error = NULL;
  }
  out->eager_ms = mk_json_num(json, "eager_ms", -1);
  out->compile_ms = mk_json_num(json, "compile_ms", -1);
  out->ours_ms = mk_json_num(json, "ours_ms", -1);
  out->compile_max_ms = mk_json_num(json, "compile_max_autotune_ms", -1);
  out->compile_ro_ms = mk_json_num(json, "compile_reduce_overhead_ms", -1);
  get_compile_check(json, &out->compile_check, &out->compile_err);
  const cJSON *moves = cJSON_GetObjectItemCaseSensitive(json, "search");
  out->merges_tried = (int)mk_json_num(moves, "merges_tried", 0);
  out->merges_won = (int)mk_json_num(moves, "merges_won", 0);
  out->splits_tried = (int)mk_json_num(moves, "splits_tried", 0);
  out->splits_won = (int)mk_json_num(moves, "splits_won", 0);
  out->fused = (int)mk_json_num(moves, "fused_at_start", 0);
  out->native_evals = (int)mk_json_num(moves, "native_worker_evals", 0);
  out->cuda_graph = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(json, "cuda_graph"));
  out->tokens_in = (long)mk_json_num(json, "tokens_in", 0);
  out->tokens_out = (long)mk_json_num(json, "tokens_out", 0);
  out->cost_usd = mk_json_num(json, "cost_usd", 0);
  out->wall_s = mk_json_num(json, "wall_s", 0);
  out->gpu_fraction = mk_json_num(json, "gpu_fraction", -1);
  out->modelnew = get_str(json, "modelnew");
  out->host = get_str(json, "host");
  out->gpu = get_str(json, "gpu");
  mk_bench_kbcheck_from_json(cJSON_GetObjectItemCaseSensitive(json, "kernelbench_check"), &out->kb);
  const cJSON *sks = cJSON_GetObjectItemCaseSensitive(json, "subkernels");
  int n = cJSON_IsArray(sks) ? cJSON_GetArraySize(sks) : 0;
  if (n > 0) {
    out->subkernels = calloc((size_t)n, sizeof *out->subkernels);
    if (out->subkernels == NULL) return MK_ENOMEM;
    const cJSON *j;
    cJSON_ArrayForEach(j, sks) {
      mk_bench_subkernel *s = &out->subkernels[out->nsubkernels++];
      s->name = get_str(j, "name");
      s->variant = get_str(j, "variant");
      s->origin = get_str(j, "origin");
      s->backend = get_str(j, "backend");
      s->ref_ms = mk_json_num(j, "ref_ms", -1);
      s->ours_ms = mk_json_num(j, "ours_ms", -1);
      s->reason = get_str(j, "reason");
      s->gpu = get_str(j, "gpu");
    }
  }
  return 0;
}

void mk_bench_record_free(mk_bench_record *rec) {
  free(rec->id);
  free(rec->path);
  free(rec->error);
  free(rec->note);
  for (int i = 0; i < rec->nsubkernels; i++) {
    free(rec->subkernels[i].name);
    free(rec->subkernels[i].variant);
    free(rec->subkernels[i].origin);
    free(rec->subkernels[i].backend);
    free(rec->subkernels[i].reason);
    free(rec->subkernels[i].gpu);
  }
  free(rec->subkernels);
  free(rec->modelnew);
  free(rec->host);
  free(rec->gpu);
  mk_bench_kbcheck_free(&rec->kb);
  memset(rec, 0, sizeof *rec);
}

int mk_bench_results_add(mk_bench_results *r, mk_bench_record *rec) {
  if (r->nrecords == r->cap) {
    int cap = r->cap ? r->cap * 2 : 32;
    mk_bench_record *p = realloc(r->records, sizeof *p * (size_t)cap);
    if (p == NULL) return MK_ENOMEM;
    r->records = p;
    r->cap = cap;
  }
  r->records[r->nrecords++] = *rec;
  memset(rec, 0, sizeof *rec);
  return 0;
}

void mk_bench_results_free(mk_bench_results *r) {
  for (int i = 0; i < r->nrecords; i++) mk_bench_record_free(&r->records[i]);
  free(r->records);
  free(r->command);
  free(r->device);
  free(r->proposer);
  free(r->started);
  free(r->note);
  memset(r, 0, sizeof *r);
}

static cJSON *aggregate_json(const mk_bench_aggregate *a) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "problems", a->problems);
  cJSON_AddNumberToObject(o, "correct", a->correct);
  cJSON_AddNumberToObject(o, "timed", a->timed);
  cJSON *fe = cJSON_AddObjectToObject(o, "fast_vs_eager");
  cJSON *fc = cJSON_AddObjectToObject(o, "fast_vs_compile");
  for (int k = 0; k < 4; k++) {
    char key[16];
    snprintf(key, sizeof key, "%g", a->fast[k].p);
    /* Without a single timing, "0% faster" would be a claim: unknown. */
    bool known = k == 0 || a->timed > 0;
    mk_json_add_ms(fe, key, known ? a->fast[k].vs_eager : -1);
    mk_json_add_ms(fc, key, known ? a->fast[k].vs_compile : -1);
  }
  mk_json_add_ms(o, "geomean_vs_eager", a->geomean_vs_eager);
  mk_json_add_ms(o, "geomean_vs_compile", a->geomean_vs_compile);
  cJSON_AddNumberToObject(o, "tokens_in", (double)a->tokens_in);
  cJSON_AddNumberToObject(o, "tokens_out", (double)a->tokens_out);
  cJSON_AddNumberToObject(o, "cost_usd", a->cost_usd);
  cJSON_AddNumberToObject(o, "wall_s", a->wall_s);
  cJSON *sb = cJSON_AddObjectToObject(o, "subkernels_by_backend");
  for (int k = 0; k < 3; k++) cJSON_AddNumberToObject(sb, backend_names[k], a->by_backend[k]);
  cJSON_AddNumberToObject(o, "native_worker_evals", a->native_evals);
  cJSON *kb = cJSON_AddObjectToObject(o, "kernelbench_check");
  cJSON_AddNumberToObject(kb, "checked", a->kb_checked);
  for (int k = MK_BENCH_KB_AGREE; k <= MK_BENCH_KB_ERROR; k++)
    cJSON_AddNumberToObject(kb, mk_bench_kb_status_name((mk_bench_kb_status)k), a->kb_count[k]);
  return o;
}

int mk_bench_write_json(const mk_bench_results *r, mk_buf *out) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "schema", 1);
  mk_json_add_str(o, "command", r->command);
  mk_json_add_str(o, "device", r->device);
  mk_json_add_str(o, "proposer", r->proposer);
  mk_json_add_str(o, "started", r->started);
  mk_json_add_str(o, "note", r->note);
  cJSON *probs = cJSON_AddArrayToObject(o, "problems");
  for (int i = 0; i < r->nrecords; i++) cJSON_AddItemToArray(probs, mk_bench_record_to_json(&r->records[i]));
  mk_bench_aggregate a;
  mk_bench_aggregate_of(r, 0, &a);
  cJSON *agg = aggregate_json(&a);
  cJSON *by = cJSON_AddObjectToObject(agg, "by_level");
  for (int level = 1; level <= 3; level++) {
    mk_bench_aggregate al;
    mk_bench_aggregate_of(r, level, &al);
    if (al.problems == 0) continue;
    char key[8];
    snprintf(key, sizeof key, "%d", level);
    cJSON_AddItemToObject(by, key, aggregate_json(&al));
  }
  cJSON_AddItemToObject(o, "aggregate", agg);
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  if (text == NULL) return MK_ENOMEM;
  int rc = mk_buf_puts(out, text);
  mk_buf_putc(out, '\n');
  free(text);
  return rc;
}

int mk_bench_read_json(const char *text, mk_bench_results *out, mk_errmsg *err) {
  memset(out, 0, sizeof *out);
  cJSON *o = cJSON_Parse(text);
  if (o == NULL) return mk_errf(err, MK_EPARSE, "results.json is not valid JSON");
  out->command = get_str(o, "command");
  out->device = get_str(o, "device");
  out->proposer = get_str(o, "proposer");
  out->started = get_str(o, "started");
  out->note = get_str(o, "note");
  const cJSON *probs = cJSON_GetObjectItemCaseSensitive(o, "problems");
  const cJSON *j;
  int rc = 0;
  cJSON_ArrayForEach(j, probs) {
    mk_bench_record rec;
    rc = mk_bench_record_from_json(j, &rec, err);
    if (rc) {
      mk_bench_record_free(&rec);
      break;
    }
    rc = mk_bench_results_add(out, &rec);
    if (rc) break;
  }
  cJSON_Delete(o);
  if (rc) mk_bench_results_free(out);
  return rc;
}
