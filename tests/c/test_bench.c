/* test_bench.c — bench records, aggregates (fast_p, geomean) and reports. */
#include "mk_bench.h"
#include "mk_test.h"

#include <math.h>
#include <stdlib.h>

static void add(mk_bench_results *r, const char *id, int level, bool correct, double eager,
                double compile, double ours) {
  mk_bench_record rec = {.id = mk_strdup(id), .level = level, .correct = correct,
                         .eager_ms = eager, .compile_ms = compile, .ours_ms = ours,
                         .gpu_fraction = -1};
  rec.subkernels = calloc(2, sizeof *rec.subkernels);
  rec.nsubkernels = 2;
  rec.subkernels[0] = (mk_bench_subkernel){mk_strdup("conv2d"), mk_strdup("reference"),
                                           mk_strdup("reference"), ours * 0.7, ours * 0.7,
                                           mk_strdup("none faster than PyTorch"), NULL,
                                           mk_strdup("pytorch")};
  rec.subkernels[1] = (mk_bench_subkernel){mk_strdup("add_<gelu>"), mk_strdup("triton_b1024"),
                                           mk_strdup("builtin"), ours, ours * 0.3, NULL, NULL,
                                           NULL /* a record older than "backend": Triton */};
  if (!correct) rec.error = mk_strdup("mismatch: max abs error 0.5 at [0, 3]");
  mk_bench_results_add(r, &rec);
}

static void fixture(mk_bench_results *r) {
  memset(r, 0, sizeof *r);
  r->device = mk_strdup("NVIDIA H200");
  r->proposer = mk_strdup("builtin");
  r->command = mk_strdup("mkevolve bench ../shared/kernelbench/level2 -o out");
  add(r, "level2/a", 2, true, 2.0, 1.0, 1.0);   /* 2x eager, 1x compile */
  add(r, "level2/b", 2, true, 3.0, 2.0, 1.0);   /* 3x, 2x */
  add(r, "level2/c", 2, false, 1.0, 1.0, 0.5);  /* incorrect: counts in no fast_p>0 */
  add(r, "level3/d", 3, true, 1.0, 0.5, 1.25);  /* 0.8x, 0.4x */
}

MK_TEST(bench, fast_p_and_geomean) {
  mk_bench_results r;
  fixture(&r);
  mk_bench_aggregate a;
  mk_bench_aggregate_of(&r, 0, &a);
  MK_CHECK_INT(a.problems, ==, 4);
  MK_CHECK_INT(a.correct, ==, 3);
  MK_CHECK(fabs(a.fast[0].vs_eager - 0.75) < 1e-9);
  MK_CHECK(fabs(a.fast[1].vs_eager - 0.5) < 1e-9);   /* a, b */
  MK_CHECK(fabs(a.fast[3].vs_eager - 0.25) < 1e-9);  /* b (3x > 2) */
  MK_CHECK(fabs(a.fast[1].vs_compile - 0.25) < 1e-9);/* b only; a is exactly 1x */
  MK_CHECK(fabs(a.geomean_vs_eager - cbrt(2.0 * 3.0 * 0.8)) < 1e-9);
  mk_bench_aggregate_of(&r, 3, &a);
  MK_CHECK_INT(a.problems, ==, 1);
  MK_CHECK(fabs(a.fast[1].vs_eager) < 1e-9);
  mk_bench_results_free(&r);
}

MK_TEST(bench, json_round_trip) {
  mk_bench_results r, back;
  fixture(&r);
  mk_buf b;
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_bench_write_json(&r, &b), ==, 0);
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_bench_read_json(mk_buf_cstr(&b), &back, &err) == 0);
  MK_CHECK_INT(back.nrecords, ==, 4);
  MK_CHECK_STR(back.records[2].error, r.records[2].error);
  MK_CHECK_INT(back.records[1].nsubkernels, ==, 2);
  MK_CHECK(strstr(mk_buf_cstr(&b), "\"fast_vs_compile\"") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&b), "\"by_level\"") != NULL);
  /* each subkernel's backend; a record without one (older) reads as Triton */
  MK_CHECK_STR(back.records[1].subkernels[0].backend, "pytorch");
  MK_CHECK_STR(back.records[1].subkernels[1].backend, "triton");
  MK_CHECK(strstr(mk_buf_cstr(&b), "\"subkernels_by_backend\":") != NULL);
  mk_bench_aggregate agg;
  mk_bench_aggregate_of(&back, 0, &agg);
  MK_CHECK_INT(agg.subkernels, ==, 8);
  MK_CHECK_INT(agg.by_backend[MK_BENCH_BACKEND_TRITON], ==, 4);
  MK_CHECK_INT(agg.by_backend[MK_BENCH_BACKEND_PYTORCH], ==, 4);
  MK_CHECK_INT(agg.by_backend[MK_BENCH_BACKEND_CUDA], ==, 0);
  MK_CHECK_INT(agg.native_evals, ==, 0);
  mk_bench_results_free(&back);
  /* Evaluations the native worker ran: kept per record, summed, reported. */
  r.records[0].native_evals = 7;
  r.records[3].native_evals = 5;
  mk_buf_reset(&b);
  MK_CHECK_INT(mk_bench_write_json(&r, &b), ==, 0);
  MK_REQUIRE(mk_bench_read_json(mk_buf_cstr(&b), &back, &err) == 0);
  MK_CHECK_INT(back.records[0].native_evals, ==, 7);
  mk_bench_aggregate_of(&back, 0, &agg);
  MK_CHECK_INT(agg.native_evals, ==, 12);
  MK_CHECK(strstr(mk_buf_cstr(&b), "\"native_worker_evals\":\t12") != NULL ||
           strstr(mk_buf_cstr(&b), "\"native_worker_evals\":12") != NULL);
  mk_buf md;
  mk_buf_init(&md, 0);
  MK_CHECK_INT(mk_bench_write_markdown(&back, &md), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "The native worker ran 12 evaluations.") != NULL);
  mk_buf_free(&md);
  mk_bench_results_free(&back);
  MK_CHECK(mk_bench_read_json("{not json", &back, &err) == MK_EPARSE);
  mk_buf_free(&b);
  mk_bench_results_free(&back);
  mk_bench_results_free(&r);
}

/* Where each problem ran: the host, the GPU that timed the whole program
 * and each subkernel; kept through a record's JSON and shown in both
 * reports, and no "ran on" column for records that do not say. */
MK_TEST(bench, records_say_which_gpu_timed_what) {
  mk_bench_results r;
  fixture(&r);
  mk_buf md, html;
  mk_buf_init(&md, 0);
  mk_buf_init(&html, 0);
  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "ran on") == NULL);
  mk_buf_reset(&md);
  r.records[0].host = mk_strdup("node7");
  r.records[0].gpu = mk_strdup("1");
  r.records[0].subkernels[1].gpu = mk_strdup("0");
  r.records[1].host = mk_strdup("node8");
  cJSON *j = mk_bench_record_to_json(&r.records[0]);
  mk_bench_record back;
  MK_REQUIRE(mk_bench_record_from_json(j, &back, NULL) == 0);
  MK_CHECK_STR(back.host, "node7");
  MK_CHECK_STR(back.gpu, "1");
  MK_CHECK(back.subkernels[0].gpu == NULL);
  MK_CHECK_STR(back.subkernels[1].gpu, "0");
  mk_bench_record_free(&back);
  cJSON_Delete(j);
  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  MK_CHECK_INT(mk_bench_write_html(&r, &html), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "| ran on |") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "| node7 GPU 1 |") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "| node8 |") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "ms on GPU 0 (reference") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&html), "<td class=left>node7 GPU 1</td>") != NULL);
  mk_buf_free(&md);
  mk_buf_free(&html);
  mk_bench_results_free(&r);
}

MK_TEST(bench, markdown_and_html_reports) {
  mk_bench_results r;
  fixture(&r);
  mk_buf md, html;
  mk_buf_init(&md, 0);
  mk_buf_init(&html, 0);
  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  MK_CHECK_INT(mk_bench_write_html(&r, &html), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "| level2/b | yes | 3.000 | 2.000 | 1.000 | 3.00x | 2.00x |") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "## Level 3") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "Subkernels by backend: 0 CUDA C++, 4 Triton, 4 PyTorch (of 8).") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "| triton_b1024 (builtin, triton) |") != NULL);
  const char *h = mk_buf_cstr(&html);
  MK_CHECK(strstr(h, "Subkernels by backend: 0 CUDA C++, 4 Triton, 4 PyTorch (of 8).") != NULL);
  MK_CHECK(strstr(h, "<svg") != NULL);
  MK_CHECK(strstr(h, "add_&lt;gelu&gt;") != NULL); /* escaped */
  MK_CHECK(strstr(h, "add_<gelu>") == NULL);
  MK_CHECK(strstr(h, "http") == NULL);             /* self-contained */
  /* optional: the render suite (tests/suites/60-bench-html.sh) opens this in Chromium */
  const char *dir = getenv("MK_BENCH_HTML_OUT");
  if (dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/report.html", dir);
    MK_CHECK_INT(mk_write_file(path, h, html.len), ==, 0);
  }
  mk_buf_free(&md);
  mk_buf_free(&html);
  mk_bench_results_free(&r);
}

/* ---- cross-check with KernelBench's evaluation ---------------------------- */

static void judge(const char *result_json, const char *error, const mk_bench_record *rec,
                  mk_bench_kbcheck *out) {
  cJSON *j = result_json ? cJSON_Parse(result_json) : NULL;
  if (result_json) MK_REQUIRE(j != NULL);
  mk_bench_kbcheck_judge(j, error, rec, 0.25, out);
  cJSON_Delete(j);
}

MK_TEST(bench, kernelbench_verdicts_are_judged_against_ours) {
  mk_bench_record ok = {.correct = true, .eager_ms = 2.0, .ours_ms = 1.0}; /* 2x vs eager */
  mk_bench_record bad = {.correct = false, .eager_ms = -1, .ours_ms = -1};
  mk_bench_kbcheck kb;
  const char *ev = "\"evaluator\":\"kernelbench.eval.eval_kernel_against_ref\"";
  char text[1024];

  snprintf(text, sizeof text, "{\"available\":true,%s,\"compiled\":true,\"correct\":true,\"speedup\":1.8}", ev);
  judge(text, NULL, &ok, &kb);
  MK_CHECK_INT(kb.status, ==, MK_BENCH_KB_AGREE);
  MK_CHECK(kb.reason == NULL);
  MK_CHECK_STR(kb.evaluator, "kernelbench.eval.eval_kernel_against_ref");
  MK_CHECK(fabs(kb.speedup - 1.8) < 1e-12);
  mk_bench_kbcheck_free(&kb);

  /* the same verdict, timings far apart (2x here, 1.2x there: beyond 25%) */
  snprintf(text, sizeof text, "{\"available\":true,%s,\"compiled\":true,\"correct\":true,\"speedup\":1.2}", ev);
  judge(text, NULL, &ok, &kb);
  MK_CHECK_INT(kb.status, ==, MK_BENCH_KB_DISAGREE);
  MK_CHECK(strstr(kb.reason, "2.00x here, 1.20x by KernelBench") != NULL);
  mk_bench_kbcheck_free(&kb);

  /* KernelBench finding more than we claim is noted, not a disagreement (it
   * times with autograd recording: eager's launches slow down); its times
   * come along. Within the tolerance: no note. */
  snprintf(text, sizeof text, "{\"available\":true,%s,\"compiled\":true,\"correct\":true,"
                              "\"speedup\":2.6,\"runtime\":1.25,\"ref_runtime\":3.25}", ev);
  judge(text, NULL, &ok, &kb);
  MK_CHECK_INT(kb.status, ==, MK_BENCH_KB_AGREE);
  MK_REQUIRE(kb.reason != NULL);
  MK_CHECK(strstr(kb.reason, "finds more: speedup vs eager 2.60x there, 2.00x here") != NULL);
  MK_CHECK(strstr(kb.reason, "its Model ran 3.25, ModelNew 1.25, against 2 and 1 ms here") != NULL);
  MK_CHECK(fabs(kb.runtime - 1.25) < 1e-12 && fabs(kb.ref_runtime - 3.25) < 1e-12);
  mk_bench_kbcheck_free(&kb);
  snprintf(text, sizeof text, "{\"available\":true,%s,\"compiled\":true,\"correct\":true,\"speedup\":2.4}", ev);
  judge(text, NULL, &ok, &kb);
  MK_CHECK_INT(kb.status, ==, MK_BENCH_KB_AGREE);
  MK_CHECK(kb.reason == NULL);
  MK_CHECK(kb.runtime < 0 && kb.ref_runtime < 0);
  mk_bench_kbcheck_free(&kb);

  /* KernelBench fails what we verified: its own words come along */
  snprintf(text, sizeof text,
           "{\"available\":true,%s,\"compiled\":true,\"correct\":false,\"speedup\":null,"
           "\"metadata\":{\"correctness_issue\":\"Output mismatch\",\"hardware\":\"H200\"}}", ev);
  judge(text, NULL, &ok, &kb);
  MK_CHECK_INT(kb.status, ==, MK_BENCH_KB_DISAGREE);
  MK_CHECK(strstr(kb.reason, "finds the ModelNew we verified incorrect") != NULL);
  MK_CHECK(strstr(kb.reason, "correctness_issue: Output mismatch") != NULL);
  MK_CHECK(strstr(kb.reason, "H200") == NULL);
  MK_CHECK_INT(kb.correct, ==, 0);
  mk_bench_kbcheck_free(&kb);

  snprintf(text, sizeof text, "{\"available\":true,%s,\"compiled\":false,\"correct\":false,"
                              "\"metadata\":{\"compilation_error\":\"NameError('tl')\"}}", ev);
  judge(text, NULL, &ok, &kb);
  MK_CHECK_INT(kb.status, ==, MK_BENCH_KB_DISAGREE);
  MK_CHECK(strstr(kb.reason, "could not load") != NULL && strstr(kb.reason, "NameError") != NULL);
  mk_bench_kbcheck_free(&kb);

  /* both reject: agreement; KernelBench accepting what we rejected is not */
  judge("{\"available\":true,\"compiled\":true,\"correct\":false}", NULL, &bad, &kb);
  MK_CHECK_INT(kb.status, ==, MK_BENCH_KB_AGREE);
  mk_bench_kbcheck_free(&kb);
  judge("{\"available\":true,\"compiled\":true,\"correct\":true}", NULL, &bad, &kb);
  MK_CHECK_INT(kb.status, ==, MK_BENCH_KB_DISAGREE);
  MK_CHECK(strstr(kb.reason, "we rejected") != NULL);
  mk_bench_kbcheck_free(&kb);

  /* no verdict: not importable, an evaluation that failed, no worker answer */
  judge("{\"available\":false,\"reason\":\"KernelBench's evaluation code is not importable\"}", NULL,
        &ok, &kb);
  MK_CHECK_INT(kb.status, ==, MK_BENCH_KB_UNAVAILABLE);
  MK_CHECK(strstr(kb.reason, "not importable") != NULL);
  mk_bench_kbcheck_free(&kb);
  judge("{\"available\":true,\"error\":\"KernelBench's evaluation raised AssertionError: CUDA\"}", NULL,
        &ok, &kb);
  MK_CHECK_INT(kb.status, ==, MK_BENCH_KB_ERROR);
  MK_CHECK(strstr(kb.reason, "AssertionError") != NULL);
  mk_bench_kbcheck_free(&kb);
  judge(NULL, "worker crashed", &ok, &kb);
  MK_CHECK_INT(kb.status, ==, MK_BENCH_KB_ERROR);
  MK_CHECK(strstr(kb.reason, "worker crashed") != NULL);
  mk_bench_kbcheck_free(&kb);
}

/* A resumed record's verdict is judged again by the current rule from what it
 * kept of KernelBench's answer: a faster KernelBench timing becomes a note;
 * a slower one stays a disagreement; a verdict on correctness keeps its words. */
MK_TEST(bench, kept_verdicts_are_judged_again) {
  mk_bench_record rec = {.correct = true, .eager_ms = 2.0, .ours_ms = 1.0};
  rec.kb = (mk_bench_kbcheck){.status = MK_BENCH_KB_DISAGREE, .reason = mk_strdup("old rule"),
                              .evaluator = mk_strdup("kernelbench.eval.eval_kernel_against_ref"),
                              .root = mk_strdup("/kb"), .compiled = 1, .correct = 1, .speedup = 2.6,
                              .runtime = -1, .ref_runtime = -1};
  MK_CHECK(mk_bench_kbcheck_rejudge(&rec, 0.25)); /* changed: worth saving */
  MK_CHECK(!mk_bench_kbcheck_rejudge(&rec, 0.25)); /* the same verdict again */
  MK_CHECK_INT(rec.kb.status, ==, MK_BENCH_KB_AGREE);
  MK_REQUIRE(rec.kb.reason != NULL);
  MK_CHECK(strstr(rec.kb.reason, "finds more: speedup vs eager 2.60x there, 2.00x here") != NULL);
  MK_CHECK_STR(rec.kb.root, "/kb");
  MK_CHECK_STR(rec.kb.evaluator, "kernelbench.eval.eval_kernel_against_ref");
  rec.kb.speedup = 1.2;
  mk_bench_kbcheck_rejudge(&rec, 0.25);
  MK_CHECK_INT(rec.kb.status, ==, MK_BENCH_KB_DISAGREE);
  MK_CHECK(strstr(rec.kb.reason, "2.00x here, 1.20x by KernelBench") != NULL);
  mk_bench_kbcheck_free(&rec.kb);
  rec.kb = (mk_bench_kbcheck){.status = MK_BENCH_KB_DISAGREE, .reason = mk_strdup("Output mismatch"),
                              .compiled = 1, .correct = 0, .speedup = -1};
  MK_CHECK(!mk_bench_kbcheck_rejudge(&rec, 0.25));
  MK_CHECK_INT(rec.kb.status, ==, MK_BENCH_KB_DISAGREE);
  MK_CHECK_STR(rec.kb.reason, "Output mismatch");
  mk_bench_kbcheck_free(&rec.kb);
}

MK_TEST(bench, kernelbench_check_in_records_and_reports) {
  mk_bench_results r, back;
  fixture(&r);
  r.records[0].kb = (mk_bench_kbcheck){.status = MK_BENCH_KB_AGREE,
                                       .evaluator = mk_strdup("kernelbench.eval.eval_kernel_against_ref"),
                                       .root = mk_strdup("/opt/KernelBench"), .compiled = 1, .correct = 1,
                                       .speedup = 1.9, .runtime = 0.5, .ref_runtime = 0.95,
                                       .reason = mk_strdup("KernelBench's timing finds more")};
  r.records[1].kb = (mk_bench_kbcheck){.status = MK_BENCH_KB_DISAGREE,
                                       .reason = mk_strdup("KernelBench finds <it> incorrect"),
                                       .root = mk_strdup(""), .compiled = 1, .correct = 0, .speedup = -1};
  r.records[1].modelnew = mk_strdup("modelnew/level2_b.py");
  mk_bench_aggregate a;
  mk_bench_aggregate_of(&r, 0, &a);
  MK_CHECK_INT(a.kb_checked, ==, 2);
  MK_CHECK_INT(a.kb_count[MK_BENCH_KB_AGREE], ==, 1);
  MK_CHECK_INT(a.kb_count[MK_BENCH_KB_DISAGREE], ==, 1);

  mk_buf js, md, html;
  mk_buf_init(&js, 0);
  mk_buf_init(&md, 0);
  mk_buf_init(&html, 0);
  MK_CHECK_INT(mk_bench_write_json(&r, &js), ==, 0);
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_bench_read_json(mk_buf_cstr(&js), &back, &err) == 0);
  MK_CHECK_INT(back.records[0].kb.status, ==, MK_BENCH_KB_AGREE);
  MK_CHECK(fabs(back.records[0].kb.speedup - 1.9) < 1e-9);
  MK_CHECK(fabs(back.records[0].kb.runtime - 0.5) < 1e-9);
  MK_CHECK(fabs(back.records[0].kb.ref_runtime - 0.95) < 1e-9);
  MK_CHECK_STR(back.records[0].kb.reason, "KernelBench's timing finds more");
  MK_CHECK(back.records[1].kb.runtime < 0);
  MK_CHECK_STR(back.records[0].kb.root, "/opt/KernelBench");
  MK_CHECK_STR(back.records[1].kb.root, "");
  MK_CHECK_INT(back.records[1].kb.status, ==, MK_BENCH_KB_DISAGREE);
  MK_CHECK_INT(back.records[1].kb.correct, ==, 0);
  MK_CHECK_STR(back.records[1].kb.reason, "KernelBench finds <it> incorrect");
  MK_CHECK_STR(back.records[1].modelnew, "modelnew/level2_b.py");
  MK_CHECK_INT(back.records[2].kb.status, ==, MK_BENCH_KB_NOT_RUN);
  MK_CHECK(strstr(mk_buf_cstr(&js), "\"kernelbench_check\":\tnull") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&js), "\"disagree\":\t1") != NULL);

  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  const char *m = mk_buf_cstr(&md);
  MK_CHECK(strstr(m, "## Cross-check with KernelBench's evaluation") != NULL);
  MK_CHECK(strstr(m, "2 problems checked by `kernelbench.eval.eval_kernel_against_ref` from /opt/KernelBench: 1 agree, 1 disagree") != NULL);
  MK_CHECK(strstr(m, "- level2/b: **disagrees** — KernelBench finds <it> incorrect") != NULL);
  MK_CHECK(strstr(m, "- level2/a: agrees — KernelBench's timing finds more") != NULL);
  MK_CHECK(strstr(m, "| KernelBench |") != NULL);
  MK_CHECK(strstr(m, "| agrees |") != NULL);

  MK_CHECK_INT(mk_bench_write_html(&r, &html), ==, 0);
  const char *h = mk_buf_cstr(&html);
  MK_CHECK(strstr(h, "1/2</b>KernelBench agrees") != NULL);
  MK_CHECK(strstr(h, "class=bad>KernelBench: KernelBench finds &lt;it&gt; incorrect") != NULL);
  MK_CHECK(strstr(h, "class=note>KernelBench: KernelBench's timing finds more") != NULL);
  MK_CHECK(strstr(h, "<th>KernelBench</th>") != NULL);

  /* without any check the reports keep their old shape */
  mk_bench_results plain;
  fixture(&plain);
  mk_buf_reset(&md);
  MK_CHECK_INT(mk_bench_write_markdown(&plain, &md), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "KernelBench") == NULL);
  mk_bench_results_free(&plain);
  mk_buf_free(&js);
  mk_buf_free(&md);
  mk_buf_free(&html);
  mk_bench_results_free(&back);
  mk_bench_results_free(&r);
}

/* A sweep without timings (the CPU): fast_p > 0 unknown, not 0; the notice
 * instead of empty charts; a note is not an error. */
MK_TEST(bench, untimed_sweep_reports) {
  mk_bench_results r;
  memset(&r, 0, sizeof r);
  r.device = mk_strdup("cpu");
  add(&r, "level2/a", 2, true, -1, -1, -1);
  add(&r, "level2/b", 2, false, -1, -1, -1);
  r.records[0].note = mk_strdup("reduced batch 2 on CPU");
  mk_bench_aggregate a;
  mk_bench_aggregate_of(&r, 0, &a);
  MK_CHECK_INT(a.timed, ==, 0);
  mk_buf j, md, html;
  mk_buf_init(&j, 0);
  mk_buf_init(&md, 0);
  mk_buf_init(&html, 0);
  MK_CHECK_INT(mk_bench_write_json(&r, &j), ==, 0);
  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  MK_CHECK_INT(mk_bench_write_html(&r, &html), ==, 0);
  cJSON *o = cJSON_Parse(mk_buf_cstr(&j));
  const cJSON *fe = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "aggregate"), "fast_vs_eager");
  MK_CHECK(cJSON_IsNull(cJSON_GetObjectItem(fe, "1")));
  MK_CHECK(cJSON_IsNumber(cJSON_GetObjectItem(fe, "0")));
  const cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "problems"), 0);
  MK_CHECK_STR(cJSON_GetObjectItem(p0, "note")->valuestring, "reduced batch 2 on CPU");
  MK_CHECK(cJSON_IsNull(cJSON_GetObjectItem(p0, "error")));
  cJSON_Delete(o);
  MK_CHECK(strstr(mk_buf_cstr(&md), "No timings") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "| 0.50 | n/a | n/a | n/a | n/a |") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "| level2/a | conv2d | PyTorch reference | none faster") != NULL);
  const char *h = mk_buf_cstr(&html);
  MK_CHECK(strstr(h, "class=notice") != NULL);
  MK_CHECK(strstr(h, "aria-label=\"speedup distribution\"") == NULL);
  MK_CHECK(strstr(h, "aria-label=\"time per subkernel\"") == NULL);
  MK_CHECK(strstr(h, "class=note>note: reduced batch") != NULL);
  MK_CHECK(strstr(h, "0.00") == NULL);
  mk_buf_free(&j);
  mk_buf_free(&md);
  mk_buf_free(&html);
  mk_bench_results_free(&r);
}

MK_TEST(bench, slurm_script_quotes_and_directives) {
  const char *fwd[] = {"--time-budget", "20", "--note", "it's \"odd\" $HOME"};
  mk_bench_slurm_job job = {.mkevolve = "/opt/mk evolve/mkevolve", .tasks_file = "/shared/out/slurm/tasks.txt",
                            .outdir = "/shared/out", .partition = "gpu", .time = "01:00:00",
                            .gpus_per_task = 1, .forward = fwd, .nforward = 4};
  mk_buf b;
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_bench_slurm_script(&job, &b), ==, 0);
  const char *s = mk_buf_cstr(&b);
  MK_CHECK(strncmp(s, "#!/bin/bash\n", 12) == 0);
  MK_CHECK(strstr(s, "#SBATCH --partition=gpu\n") != NULL);
  MK_CHECK(strstr(s, "#SBATCH --time=01:00:00\n") != NULL);
  MK_CHECK(strstr(s, "#SBATCH --gpus-per-task=1\n") != NULL);
  MK_CHECK(strstr(s, "#SBATCH --output=/shared/out/slurm/logs/%A_%a.out\n") != NULL);
  MK_CHECK(strstr(s, "--mem") == NULL && strstr(s, "--cpus-per-task") == NULL);
  MK_CHECK(strstr(s, "exec '/opt/mk evolve/mkevolve' bench --slurm-task '/shared/out/slurm/tasks.txt' "
                     "-o '/shared/out' '--time-budget' '20' '--note' 'it'\\''s \"odd\" $HOME'\n") != NULL);
  mk_buf_free(&b);
  job.mkevolve = NULL;
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_bench_slurm_script(&job, &b), ==, MK_EINVAL);
  mk_buf_free(&b);
}

MK_TEST(bench, slurm_array_spec) {
  mk_buf b;
  mk_buf_init(&b, 0);
  int all[] = {0, 1, 2, 3};
  MK_CHECK_INT(mk_bench_slurm_array_spec(all, 4, 2, &b), ==, 0);
  MK_CHECK_STR(mk_buf_cstr(&b), "0-3%2");
  mk_buf_reset(&b);
  int some[] = {1, 4, 5, 6, 9};
  MK_CHECK_INT(mk_bench_slurm_array_spec(some, 5, 0, &b), ==, 0);
  MK_CHECK_STR(mk_buf_cstr(&b), "1,4-6,9");
  mk_buf_reset(&b);
  MK_CHECK_INT(mk_bench_slurm_array_spec(some, 0, 0, &b), ==, MK_EINVAL);
  mk_buf_free(&b);
}

MK_TEST(bench, slurm_task_states) {
  const char *text =
      "JobId=2 ArrayJobId=1 ArrayTaskId=0 JobState=COMPLETED Reason=None ExitCode=0:0 NodeList=n1 X=1\n"
      "JobId=3 ArrayJobId=1 ArrayTaskId=1 JobState=FAILED Reason=NonZeroExitCode ExitCode=0:9 NodeList=n2\n"
      "JobId=1 ArrayJobId=1 ArrayTaskId=2-5%2 JobState=PENDING Reason=JobArrayTaskLimit NodeList=(null)\n"
      "JobId=4 ArrayJobId=1 ArrayTaskId=6 JobState=PREEMPTED Reason=None ExitCode=0:15 NodeList=n1\n";
  mk_bench_slurm_task t[8];
  MK_CHECK_INT(mk_bench_slurm_parse_states(text, t, 8), ==, 3);
  MK_CHECK_INT(t[0].task, ==, 0);
  MK_CHECK_STR(t[0].state, "COMPLETED");
  MK_CHECK_STR(t[0].node, "n1");
  MK_CHECK_INT(t[1].task, ==, 1);
  MK_CHECK_STR(t[1].state, "FAILED");
  MK_CHECK_STR(t[1].exit_code, "0:9");
  MK_CHECK_STR(t[1].reason, "NonZeroExitCode");
  MK_CHECK_INT(t[2].task, ==, 6);
  MK_CHECK_STR(t[2].state, "PREEMPTED");
  MK_CHECK_INT(mk_bench_slurm_parse_states(text, t, 1), ==, 1);
  MK_CHECK(mk_bench_slurm_state_final("FAILED") && mk_bench_slurm_state_final("PREEMPTED"));
  MK_CHECK(mk_bench_slurm_state_final("COMPLETED") && mk_bench_slurm_state_final("NODE_FAIL"));
  MK_CHECK(!mk_bench_slurm_state_final("RUNNING") && !mk_bench_slurm_state_final("PENDING"));
}

/* torch.compile's other modes: kept through the JSON, aggregated over the
 * problems that have them, one summary row per mode, no row without them. */
MK_TEST(bench, other_compile_modes_are_baselines_too) {
  mk_bench_results r, back;
  fixture(&r);
  mk_buf md;
  mk_buf_init(&md, 0);
  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "max-autotune-no-cudagraphs") == NULL);
  r.records[0].compile_max_ms = 0.5; /* a: ours 1.0 -> 0.5x */
  r.records[1].compile_max_ms = 4.0; /* b: ours 1.0 -> 4x */
  r.records[1].compile_ro_ms = 1.5;
  mk_bench_aggregate a;
  mk_bench_aggregate_of(&r, 0, &a);
  MK_CHECK_INT(a.timed_max, ==, 2);
  MK_CHECK_INT(a.timed_ro, ==, 1);
  MK_CHECK(fabs(a.geomean_vs_compile_max - 1.414213562373095) < 1e-9);
  MK_CHECK(fabs(a.geomean_vs_compile_ro - 1.5) < 1e-9);
  MK_CHECK(fabs(a.fast[1].vs_compile_max - 0.25) < 1e-9); /* b only, of 4 problems */
  mk_buf_reset(&md);
  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "| torch.compile max-autotune-no-cudagraphs (2 timed) |") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "| torch.compile reduce-overhead (1 timed) |") != NULL);
  mk_buf b;
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_bench_write_json(&r, &b), ==, 0);
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_bench_read_json(mk_buf_cstr(&b), &back, &err) == 0);
  MK_CHECK(back.records[1].compile_max_ms == 4.0 && back.records[1].compile_ro_ms == 1.5);
  MK_CHECK(back.records[2].compile_max_ms < 0);
  MK_CHECK(strstr(mk_buf_cstr(&b), "\"speedup_vs_compile_max_autotune\"") != NULL);
  mk_bench_results_free(&back);
  mk_buf_free(&b);
  mk_buf_free(&md);
  mk_bench_results_free(&r);
}

/* How often merges and splits won, and which programs are CUDA-graph
 * variants: kept through the JSON, said in the summary and the note column. */
MK_TEST(bench, search_moves_and_cuda_graphs_are_reported) {
  mk_bench_results r, back;
  fixture(&r);
  mk_buf md;
  mk_buf_init(&md, 0);
  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "Search moves") == NULL); /* nothing tried: no line */
  r.records[0].merges_tried = 3;
  r.records[0].merges_won = 1;
  r.records[1].splits_tried = 2;
  r.records[1].cuda_graph = true;
  mk_buf_reset(&md);
  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "merges kept 1 of 3 tried, splits kept 0 of 2 tried; 1 problem "
                                    "emitted as the CUDA-graph variant") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "| CUDA-graph variant |") != NULL);
  /* against compile's own graph mode, where it was timed in the same run */
  r.records[1].compile_ro_ms = 0.99; /* b: ours 1.0 */
  mk_buf_reset(&md);
  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "| CUDA-graph variant (0.99x of compile's reduce-overhead) |") != NULL);
  mk_buf html;
  mk_buf_init(&html, 0);
  MK_CHECK_INT(mk_bench_write_html(&r, &html), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&html), "CUDA-graph variant (0.99x of compile&#39;s reduce-overhead)") != NULL ||
           strstr(mk_buf_cstr(&html), "CUDA-graph variant (0.99x of compile's reduce-overhead)") != NULL);
  mk_buf_free(&html);
  mk_buf b;
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_bench_write_json(&r, &b), ==, 0);
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_bench_read_json(mk_buf_cstr(&b), &back, &err) == 0);
  MK_CHECK_INT(back.records[0].merges_tried, ==, 3);
  MK_CHECK_INT(back.records[0].merges_won, ==, 1);
  MK_CHECK_INT(back.records[1].splits_tried, ==, 2);
  MK_CHECK(back.records[1].cuda_graph && !back.records[0].cuda_graph);
  mk_bench_results_free(&back);
  mk_buf_free(&b);
  mk_buf_free(&md);
  mk_bench_results_free(&r);
}

/* torch.compile's own output under the comparison ours passed: kept through the JSON
 * (true / false / null), and a baseline that fails it is named in both reports. */
MK_TEST(bench, compile_baselines_that_fail_our_comparison_are_named) {
  mk_bench_results r, back;
  fixture(&r);
  mk_buf md, html;
  mk_buf_init(&md, 0);
  mk_buf_init(&html, 0);
  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "torch.compile's own output") == NULL); /* none checked */
  r.records[0].compile_check = 1;
  r.records[0].compile_err = 2e-6;
  r.records[3].compile_check = -1;
  r.records[3].compile_err = 3.5e-3;
  mk_buf_reset(&md);
  MK_CHECK_INT(mk_bench_write_markdown(&r, &md), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&md), "comparison ours passed: checked on 2 problems, fails on 1.") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "- level3/d: torch.compile's own output fails the comparison ours "
                                    "passed (max abs error 0.0035 against eager)") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&md), "- level2/a") == NULL);
  MK_CHECK_INT(mk_bench_write_html(&r, &html), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&html), "fails the comparison ours passed (max abs error 0.0035") != NULL);
  mk_buf b;
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_bench_write_json(&r, &b), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&b), "\"compile_matches_eager\"") != NULL);
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_bench_read_json(mk_buf_cstr(&b), &back, &err) == 0);
  MK_CHECK_INT(back.records[0].compile_check, ==, 1);
  MK_CHECK(fabs(back.records[0].compile_err - 2e-6) < 1e-12);
  MK_CHECK_INT(back.records[1].compile_check, ==, 0);
  MK_CHECK_INT(back.records[3].compile_check, ==, -1);
  MK_CHECK(fabs(back.records[3].compile_err - 3.5e-3) < 1e-12);
  mk_bench_results_free(&back);
  mk_buf_free(&b);
  mk_buf_free(&html);
  mk_buf_free(&md);
  mk_bench_results_free(&r);
}
