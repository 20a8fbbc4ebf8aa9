/* bench_report.c — the Markdown summary and the self-contained HTML report
 * (inline CSS and SVG; opens with no network). Plots: distribution of
 * speedups vs eager, per-problem bars vs both baselines (log scale), and
 * time per subkernel for each problem; a sweep without timings (the CPU)
 * gets a notice saying why instead of empty plots, "n/a" for what it cannot
 * know, and, like every sweep, what each subkernel became. */
#include "mk_bench.h"
#include "mk_verify.h"

#include <stdio.h>

#include <math.h>
#include <string.h>

static const char *or_dash(const char *s) { return s && *s ? s : "-"; }

static void md_ms(mk_buf *b, double v) {
  if (v >= 0) mk_buf_printf(b, " %.3f |", v);
  else mk_buf_puts(b, " n/a |");
}

static void md_x(mk_buf *b, double v) {
  if (v > 0) mk_buf_printf(b, " %.2fx |", v);
  else mk_buf_puts(b, " n/a |");
}

/* Why a sweep has no timings, said once wherever the numbers would be. */
#define NO_TIMINGS                                                                                 \
  "No timings: these problems ran on the CPU, where Triton kernels run in Triton's interpreter "   \
  "(TRITON_INTERPRET=1), which executes each kernel as Python; a time there says nothing about a " \
  "GPU, so speedups and fast_p are n/a. What a CPU sweep does show: whether each composed "        \
  "program is correct, and what each subkernel became."

/* What subkernel k of rec became: its kernel (and who wrote it), or the
 * PyTorch reference. */
static bool replaced(const mk_bench_subkernel *sk) {
  return sk->origin && strcmp(sk->origin, "reference") != 0;
}

/* Whether any record says where it ran (older records do not): only then
 * do the tables get a "ran on" column. */
static bool any_where(const mk_bench_results *r) {
  for (int i = 0; i < r->nrecords; i++)
    if (r->records[i].host || r->records[i].gpu) return true;
  return false;
}

/* "node3 GPU 1", "node3", "GPU 1" or "": where the record's problem ran and
 * which GPU timed the whole program. */
static void where_of(const mk_bench_record *rec, char *out, size_t n) {
  snprintf(out, n, "%s%s%s%s", rec->host ? rec->host : "", rec->host && rec->gpu ? " " : "",
           rec->gpu ? "GPU " : "", rec->gpu ? rec->gpu : "");
}

static void md_subkernels(mk_buf *b, const mk_bench_results *r) {
  mk_buf_puts(b, "\n## What each subkernel became\n\n| problem | subkernel | became | why / time |\n"
                 "|---|---|---|---|\n");
  for (int i = 0; i < r->nrecords; i++) {
    const mk_bench_record *rec = &r->records[i];
    for (int k = 0; k < rec->nsubkernels; k++) {
      const mk_bench_subkernel *sk = &rec->subkernels[k];
      mk_buf_printf(b, "| %s | %s | ", rec->id, or_dash(sk->name));
      if (replaced(sk))
        mk_buf_printf(b, "%s (%s, %s) |", or_dash(sk->variant), sk->origin,
                      mk_bench_backend_name(mk_bench_subkernel_backend(sk)));
      else mk_buf_puts(b, "PyTorch reference |");
      if (sk->ours_ms >= 0)
        mk_buf_printf(b, " %.3f ms%s%s (reference %.3f ms) |\n", sk->ours_ms, sk->gpu ? " on GPU " : "",
                      sk->gpu ? sk->gpu : "", sk->ref_ms);
      else mk_buf_printf(b, " %s |\n", replaced(sk) ? "verified" : or_dash(sk->reason));
    }
  }
}

/* How often the decomposition moves won, and how many programs are CUDA-graph
 * variants: merges and splits are kept only when measured faster. */
static void md_moves(mk_buf *b, const mk_bench_results *r) {
  int mt = 0, mw = 0, st = 0, sw = 0, graphs = 0, fused = 0;
  for (int i = 0; i < r->nrecords; i++) {
    const mk_bench_record *rec = &r->records[i];
    fused += rec->fused;
    mt += rec->merges_tried, mw += rec->merges_won;
    st += rec->splits_tried, sw += rec->splits_won;
    graphs += rec->cuda_graph;
  }
  if (mt + st + graphs + fused == 0) return;
  mk_buf_printf(b, "\nSearch moves: %d merge%s made at the start (one fused kernel covers the union), "
                   "merges kept %d of %d tried, splits kept %d of %d tried; "
                   "%d problem%s emitted as the CUDA-graph variant of the composition.\n",
                fused, fused == 1 ? "" : "s", mw, mt, sw, st, graphs, graphs == 1 ? "" : "s");
}

/* "CUDA-graph variant", with its speedup against torch.compile's own graph mode
 * (reduce-overhead) when that was timed in the same run: a graph against compile's
 * default mode says more about the graph than about our kernels. "" otherwise. */
static void graph_note(const mk_bench_record *rec, char *out, size_t size) {
  out[0] = '\0';
  if (!rec->cuda_graph) return;
  double ro = mk_bench_speedup(rec->compile_ro_ms, rec->ours_ms);
  if (ro > 0) snprintf(out, size, "CUDA-graph variant (%.2fx of compile's reduce-overhead)", ro);
  else snprintf(out, size, "CUDA-graph variant");
}

/* How many torch.compile baselines were checked under the comparison ours passed, and
 * which failed it (docs/bench.md "Baselines"). */
static void md_compile_check(mk_buf *b, const mk_bench_results *r) {
  int checked = 0, failed = 0;
  for (int i = 0; i < r->nrecords; i++) {
    checked += r->records[i].compile_check != 0;
    failed += r->records[i].compile_check < 0;
  }
  if (checked == 0) return;
  mk_buf_printf(b, "\ntorch.compile's own output under the comparison ours passed: checked on %d "
                   "problem%s, fails on %d.\n",
                checked, checked == 1 ? "" : "s", failed);
  for (int i = 0; i < r->nrecords; i++) {
    const mk_bench_record *rec = &r->records[i];
    if (rec->compile_check >= 0) continue;
    char note[256];
    mk_verify_compile_check_note(rec->compile_check, rec->compile_err, note, sizeof note);
    mk_buf_printf(b, "- %s: %s\n", rec->id, note);
  }
}

/* "Subkernels by backend: 3 CUDA C++, 5 Triton, 4 PyTorch (of 12)." and, where
 * the native worker ran any, " The native worker ran 40 evaluations." */
static void backend_line(mk_buf *b, const mk_bench_aggregate *a) {
  mk_buf_printf(b, "Subkernels by backend: %d CUDA C++, %d Triton, %d PyTorch (of %d).",
                a->by_backend[MK_BENCH_BACKEND_CUDA], a->by_backend[MK_BENCH_BACKEND_TRITON],
                a->by_backend[MK_BENCH_BACKEND_PYTORCH], a->subkernels);
  if (a->native_evals > 0)
    mk_buf_printf(b, " The native worker ran %d evaluation%s.", a->native_evals,
                  a->native_evals == 1 ? "" : "s");
}

static void md_aggregate(mk_buf *b, const mk_bench_aggregate *a) {
  mk_buf_puts(b, "| baseline | problems | correct | fast_0 | fast_1 | fast_1.5 | fast_2 | geomean |\n");
  mk_buf_puts(b, "|---|---|---|---|---|---|---|---|\n");
  for (int vs = 0; vs < 2; vs++) {
    mk_buf_printf(b, "| %s | %d | %d |", vs ? "torch.compile" : "eager", a->problems, a->correct);
    for (int k = 0; k < 4; k++) {
      if (k > 0 && a->timed == 0) mk_buf_puts(b, " n/a |");
      else mk_buf_printf(b, " %.2f |", vs ? a->fast[k].vs_compile : a->fast[k].vs_eager);
    }
    md_x(b, vs ? a->geomean_vs_compile : a->geomean_vs_eager);
    mk_buf_putc(b, '\n');
  }
  /* The other compile modes, where they were timed (same run, docs/bench.md). */
  for (int mode = 0; mode < 2; mode++) {
    int timed = mode ? a->timed_ro : a->timed_max;
    if (timed == 0) continue;
    mk_buf_printf(b, "| torch.compile %s (%d timed) | %d | %d |",
                  mode ? "reduce-overhead" : "max-autotune-no-cudagraphs", timed, a->problems,
                  a->correct);
    for (int k = 0; k < 4; k++)
      mk_buf_printf(b, " %.2f |", mode ? a->fast[k].vs_compile_ro : a->fast[k].vs_compile_max);
    md_x(b, mode ? a->geomean_vs_compile_ro : a->geomean_vs_compile_max);
    mk_buf_putc(b, '\n');
  }
}

/* Per-problem cell of the cross-check column. */
static const char *kb_cell(mk_bench_kb_status s) {
  switch (s) {
  case MK_BENCH_KB_AGREE: return "agrees";
  case MK_BENCH_KB_DISAGREE: return "**disagrees**";
  case MK_BENCH_KB_UNAVAILABLE: return "not importable";
  case MK_BENCH_KB_ERROR: return "no verdict";
  default: return "-";
  }
}

/* The evaluator (and the checkout it came from) named by the first record
 * that found one. */
static const mk_bench_kbcheck *kb_first_found(const mk_bench_results *r) {
  for (int i = 0; i < r->nrecords; i++)
    if (r->records[i].kb.evaluator) return &r->records[i].kb;
  return NULL;
}

static void md_kbcheck(mk_buf *b, const mk_bench_results *r, const mk_bench_aggregate *a) {
  const mk_bench_kbcheck *found = kb_first_found(r);
  mk_buf_printf(b, "\n## Cross-check with KernelBench's evaluation\n\n%d problems checked", a->kb_checked);
  if (found) {
    mk_buf_printf(b, " by `%s`", found->evaluator);
    if (found->root) mk_buf_printf(b, " from %s", *found->root ? found->root : "the installed package");
  }
  mk_buf_printf(b, ": %d agree, %d disagree, %d not checked (KernelBench not importable), "
                   "%d without a verdict.\n",
                a->kb_count[MK_BENCH_KB_AGREE], a->kb_count[MK_BENCH_KB_DISAGREE],
                a->kb_count[MK_BENCH_KB_UNAVAILABLE], a->kb_count[MK_BENCH_KB_ERROR]);
  bool listed = false;
  const char *last_reason = NULL;
  for (int i = 0; i < r->nrecords; i++) {
    const mk_bench_kbcheck *k = &r->records[i].kb;
    /* an agreement is listed only with its note (KernelBench timed more) */
    if (k->status == MK_BENCH_KB_NOT_RUN || (k->status == MK_BENCH_KB_AGREE && !k->reason)) continue;
    if (!listed) mk_buf_putc(b, '\n');
    listed = true;
    /* "not importable" repeats one reason for every problem: say it once */
    bool same = k->status == MK_BENCH_KB_UNAVAILABLE && last_reason && k->reason &&
                strcmp(last_reason, k->reason) == 0;
    mk_buf_printf(b, "- %s: %s%s%s\n", r->records[i].id, kb_cell(k->status), same ? "" : " — ",
                  same ? " (same reason)" : or_dash(k->reason));
    if (k->status == MK_BENCH_KB_UNAVAILABLE) last_reason = k->reason;
  }
}

int mk_bench_write_markdown(const mk_bench_results *r, mk_buf *b) {
  mk_buf_printf(b, "# MKEvolve bench — %s, proposer %s\n\n", or_dash(r->device), or_dash(r->proposer));
  if (r->command) mk_buf_printf(b, "Command: `%s`  \n", r->command);
  if (r->started) mk_buf_printf(b, "Started: %s  \n", r->started);
  if (r->note) mk_buf_printf(b, "Note: %s  \n", r->note);
  mk_buf_puts(b, "\nfast_p = fraction of all problems that are correct and more than p times faster "
                 "(fast_0 = correct). Times are medians measured in one run. \"% of limit\": the "
                 "time the device needs at least (the graph's FLOPs at the float32 matmul rate "
                 "with TF32, its minimum bytes at the copy bandwidth, whichever is longer) over "
                 "ours.\n\n## All problems\n\n");
  mk_bench_aggregate a;
  mk_bench_aggregate_of(r, 0, &a);
  if (a.timed == 0) mk_buf_puts(b, "> " NO_TIMINGS "\n\n");
  md_aggregate(b, &a);
  for (int level = 1; level <= 3; level++) {
    mk_bench_aggregate al;
    mk_bench_aggregate_of(r, level, &al);
    if (al.problems == 0) continue;
    mk_buf_printf(b, "\n## Level %d\n\n", level);
    md_aggregate(b, &al);
  }
  if (a.tokens_in + a.tokens_out > 0)
    mk_buf_printf(b, "\nTokens: %ld in, %ld out; cost $%.2f.\n", a.tokens_in, a.tokens_out, a.cost_usd);
  mk_buf_printf(b, "\nWall time: %.0f s.\n\n", a.wall_s);
  backend_line(b, &a);
  mk_buf_putc(b, '\n');
  md_moves(b, r);
  md_compile_check(b, r);
  bool kb = a.kb_checked > 0;
  if (kb) md_kbcheck(b, r, &a);
  bool where = any_where(r);
  mk_buf_puts(b, "\n## Per problem\n\n");
  mk_buf_printf(b, "| problem | correct | eager ms | compile ms | ours ms | vs eager | vs compile | "
                   "%% of limit | subkernels (replaced) | wall s | note |%s%s\n"
                   "|---|---|---|---|---|---|---|---|---|---|---|%s%s\n",
                kb ? " KernelBench |" : "", where ? " ran on |" : "", kb ? "---|" : "",
                where ? "---|" : "");
  for (int i = 0; i < r->nrecords; i++) {
    const mk_bench_record *rec = &r->records[i];
    int nreplaced = 0;
    for (int k = 0; k < rec->nsubkernels; k++) nreplaced += replaced(&rec->subkernels[k]);
    mk_buf_printf(b, "| %s | %s |", rec->id, rec->correct ? "yes" : "**no**");
    md_ms(b, rec->eager_ms);
    md_ms(b, rec->compile_ms);
    md_ms(b, rec->ours_ms);
    md_x(b, mk_bench_speedup(rec->eager_ms, rec->ours_ms));
    md_x(b, mk_bench_speedup(rec->compile_ms, rec->ours_ms));
    if (rec->gpu_fraction >= 0) mk_buf_printf(b, " %.1f%% |", 100 * rec->gpu_fraction);
    else mk_buf_puts(b, " n/a |");
    char graph[96];
    graph_note(rec, graph, sizeof graph);
    mk_buf_printf(b, " %d (%d) | %.1f | %s%s%s%s%s |", rec->nsubkernels, nreplaced, rec->wall_s,
                  rec->error ? rec->error : "", rec->error && rec->note ? "; " : "",
                  rec->note ? rec->note : "", (rec->error || rec->note) && graph[0] ? "; " : "", graph);
    if (kb) mk_buf_printf(b, " %s |", kb_cell(rec->kb.status));
    char at[256];
    where_of(rec, at, sizeof at);
    if (where) mk_buf_printf(b, " %s |", at);
    mk_buf_putc(b, '\n');
  }
  md_subkernels(b, r);
  return b->err;
}

/* ---- HTML ---------------------------------------------------------------- */

static void html_text(mk_buf *b, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '<': mk_buf_puts(b, "&lt;"); break;
    case '>': mk_buf_puts(b, "&gt;"); break;
    case '&': mk_buf_puts(b, "&amp;"); break;
    case '"': mk_buf_puts(b, "&quot;"); break;
    default: mk_buf_putc(b, *s);
    }
  }
}

static const char *CSS =
    "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px}"
    ".cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:8px;"
    "padding:10px 14px;min-width:140px}.card b{display:block;font-size:20px}"
    "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:4px 8px;"
    "text-align:right}td:first-child,th:first-child{text-align:left}.bad{color:#b00020}"
    ".notice{background:#eef4fb;border-left:4px solid #1565c0;padding:8px 12px;color:#123}"
    ".note{color:#555}td.left,th.left{text-align:left}"
    "svg text{font:11px system-ui,sans-serif}";

static void card(mk_buf *b, const char *label, const char *fmt, double v) {
  mk_buf_printf(b, "<div class=card><b>");
  if (v >= 0) mk_buf_printf(b, fmt, v);
  else mk_buf_puts(b, "n/a");
  mk_buf_printf(b, "</b>%s</div>", label);
}

/* Histogram of log2(speedup vs eager) in half-octave bins from 1/8x to 8x. */
static void svg_histogram(mk_buf *b, const mk_bench_results *r) {
  enum { NB = 12 };
  int bins[NB] = {0};
  int maxc = 1;
  for (int i = 0; i < r->nrecords; i++) {
    double s = mk_bench_speedup(r->records[i].eager_ms, r->records[i].ours_ms);
    if (!r->records[i].correct || s <= 0) continue;
    int k = (int)floor((log2(s) + 3.0) * 2.0);
    k = k < 0 ? 0 : k >= NB ? NB - 1 : k;
    if (++bins[k] > maxc) maxc = bins[k];
  }
  int w = 600, h = 220, left = 40, bottom = 30, bw = (w - left) / NB;
  mk_buf_printf(b, "<svg role=img aria-label=\"speedup distribution\" width=%d height=%d>", w, h);
  for (int k = 0; k < NB; k++) {
    int bh = (h - bottom - 10) * bins[k] / maxc;
    double lo = pow(2.0, k / 2.0 - 3.0);
    mk_buf_printf(b, "<rect x=%d y=%d width=%d height=%d fill=\"%s\"><title>%.2fx-%.2fx: %d</title></rect>",
                  left + k * bw + 1, h - bottom - bh, bw - 2, bh, lo >= 1 ? "#2e7d32" : "#c62828", lo,
                  lo * M_SQRT2, bins[k]);
    if (k % 2 == 0) mk_buf_printf(b, "<text x=%d y=%d>%gx</text>", left + k * bw, h - 12, lo);
  }
  mk_buf_printf(b, "<line x1=%d x2=%d y1=%d y2=%d stroke=#999 />", left, w, h - bottom, h - bottom);
  mk_buf_printf(b, "<text x=0 y=12>count (max %d)</text></svg>", maxc);
}

/* Horizontal bars of log2 speedup per problem, vs eager and vs compile. */
static void svg_bars(mk_buf *b, const mk_bench_results *r) {
  int row = 18, label = 300, w = 900, mid = label + (w - label) / 2;
  double scale = (w - label) / 2 / 3.0; /* 3 octaves each side */
  int h = row * r->nrecords + 44;
  mk_buf_printf(b, "<svg role=img aria-label=\"speedup per problem\" width=%d height=%d>", w, h);
  for (int i = 0; i < r->nrecords; i++) {
    const mk_bench_record *rec = &r->records[i];
    int y = 24 + i * row;
    mk_buf_printf(b, "<text x=0 y=%d>", y + 11);
    html_text(b, rec->id);
    mk_buf_puts(b, "</text>");
    for (int vs = 0; vs < 2; vs++) {
      double s = mk_bench_speedup(vs ? rec->compile_ms : rec->eager_ms, rec->ours_ms);
      if (!rec->correct || s <= 0) continue;
      double l = log2(s);
      l = l > 3 ? 3 : l < -3 ? -3 : l;
      int x0 = l >= 0 ? mid : mid + (int)(l * scale);
      int len = (int)(fabs(l) * scale);
      mk_buf_printf(b, "<rect x=%d y=%d width=%d height=7 fill=\"%s\"><title>%.2fx vs %s</title></rect>", x0,
                    y + 1 + vs * 8, len > 0 ? len : 1, vs ? "#1565c0" : "#2e7d32", s,
                    vs ? "torch.compile" : "eager");
    }
    if (!rec->correct) mk_buf_printf(b, "<text x=%d y=%d class=bad>incorrect</text>", mid + 4, y + 11);
  }
  mk_buf_printf(b, "<line x1=%d x2=%d y1=0 y2=%d stroke=#555 />", mid, mid, h - 20);
  mk_buf_printf(b, "<text x=%d y=%d>1x</text><text x=%d y=%d>8x faster</text><text x=%d y=%d>8x slower</text>",
                mid - 6, h - 6, w - 70, h - 6, label, h - 6);
  mk_buf_puts(b, "<text x=620 y=10 fill=#2e7d32>vs eager</text><text x=700 y=10 fill=#1565c0>vs torch.compile</text></svg>");
}

/* Stacked bars: the chosen variant's time of each subkernel, per problem. */
static void svg_subkernels(mk_buf *b, const mk_bench_results *r) {
  static const char *colors[] = {"#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457"};
  int row = 18, label = 300, w = 900;
  double maxt = 0;
  for (int i = 0; i < r->nrecords; i++) {
    double t = 0;
    for (int k = 0; k < r->records[i].nsubkernels; k++)
      if (r->records[i].subkernels[k].ours_ms > 0) t += r->records[i].subkernels[k].ours_ms;
    if (t > maxt) maxt = t;
  }
  int h = row * r->nrecords + 20;
  mk_buf_printf(b, "<svg role=img aria-label=\"time per subkernel\" width=%d height=%d>", w, h);
  for (int i = 0; i < r->nrecords; i++) {
    const mk_bench_record *rec = &r->records[i];
    int y = 4 + i * row;
    mk_buf_printf(b, "<text x=0 y=%d>", y + 11);
    html_text(b, rec->id);
    mk_buf_puts(b, "</text>");
    double x = label;
    for (int k = 0; k < rec->nsubkernels; k++) {
      double t = rec->subkernels[k].ours_ms;
      if (!(t > 0) || maxt <= 0) continue;
      double len = t / maxt * (w - label - 10);
      mk_buf_printf(b, "<rect x=%.1f y=%d width=%.1f height=12 fill=\"%s\"><title>", x, y + 1,
                    len < 1 ? 1 : len, colors[k % 6]);
      html_text(b, rec->subkernels[k].name);
      mk_buf_printf(b, ": %.3f ms (", t);
      html_text(b, or_dash(rec->subkernels[k].variant));
      mk_buf_puts(b, ")</title></rect>");
      x += len;
    }
  }
  mk_buf_puts(b, "</svg>");
}

static void html_table(mk_buf *b, const mk_bench_results *r, bool kb) {
  bool where = any_where(r);
  mk_buf_printf(b, "<table><tr><th>problem</th><th>correct</th><th>eager ms</th><th>compile ms</th>"
                   "<th>ours ms</th><th>vs eager</th><th>vs compile</th><th>%% of limit</th><th>subkernels</th>"
                   "<th>wall s</th>%s%s</tr>", kb ? "<th>KernelBench</th>" : "",
                where ? "<th class=left>ran on</th>" : "");
  for (int i = 0; i < r->nrecords; i++) {
    const mk_bench_record *rec = &r->records[i];
    mk_buf_puts(b, "<tr><td>");
    html_text(b, rec->id);
    mk_buf_printf(b, "</td><td%s>%s</td>", rec->correct ? "" : " class=bad", rec->correct ? "yes" : "no");
    double vals[3] = {rec->eager_ms, rec->compile_ms, rec->ours_ms};
    for (int k = 0; k < 3; k++) {
      if (vals[k] >= 0) mk_buf_printf(b, "<td>%.3f</td>", vals[k]);
      else mk_buf_puts(b, "<td>n/a</td>");
    }
    for (int vs = 0; vs < 2; vs++) {
      double s = mk_bench_speedup(vs ? rec->compile_ms : rec->eager_ms, rec->ours_ms);
      if (s > 0) mk_buf_printf(b, "<td>%.2fx</td>", s);
      else mk_buf_puts(b, "<td>n/a</td>");
    }
    if (rec->gpu_fraction >= 0) mk_buf_printf(b, "<td>%.1f%%</td>", 100 * rec->gpu_fraction);
    else mk_buf_puts(b, "<td>n/a</td>");
    mk_buf_printf(b, "<td>%d</td><td>%.1f</td>", rec->nsubkernels, rec->wall_s);
    if (kb) {
      const char *cell = kb_cell(rec->kb.status);
      bool bad = rec->kb.status == MK_BENCH_KB_DISAGREE;
      mk_buf_printf(b, "<td%s>%s</td>", bad ? " class=bad" : "", bad ? "disagrees" : cell);
    }
    if (where) {
      char at[256];
      where_of(rec, at, sizeof at);
      mk_buf_puts(b, "<td class=left>");
      html_text(b, at);
      mk_buf_puts(b, "</td>");
    }
    mk_buf_puts(b, "</tr>");
    /* Failures in red; how a problem ran (a reduced batch) is not one. */
    bool kb_bad = rec->kb.status == MK_BENCH_KB_DISAGREE;
    const char *kb_text = rec->kb.status == MK_BENCH_KB_AGREE || kb_bad ? rec->kb.reason : NULL;
    char cc[256], graph[96];
    mk_verify_compile_check_note(rec->compile_check, rec->compile_err, cc, sizeof cc);
    graph_note(rec, graph, sizeof graph);
    const char *notes[5] = {rec->error, kb_text, rec->note, cc[0] ? cc : NULL, graph[0] ? graph : NULL};
    for (int k = 0; k < 5; k++) {
      if (notes[k] == NULL) continue;
      bool bad = k == 0 || (k == 1 && kb_bad);
      mk_buf_printf(b, "<tr><td colspan=%d class=%s>%s", 10 + kb + where, bad ? "bad" : "note",
                    k == 1 ? "KernelBench: " : k == 2 ? "note: " : "");
      html_text(b, notes[k]);
      mk_buf_puts(b, "</td></tr>");
    }
  }
  mk_buf_puts(b, "</table>");
}

/* Per problem, what each subkernel became: its kernel and who wrote it, or
 * the PyTorch reference and why (what a CPU sweep has to say). */
static void html_subkernels(mk_buf *b, const mk_bench_results *r) {
  mk_buf_puts(b, "<table aria-label=\"what each subkernel became\"><tr><th>problem</th><th class=left>subkernel</th>"
                 "<th class=left>became</th><th class=left>why / time</th></tr>");
  for (int i = 0; i < r->nrecords; i++) {
    const mk_bench_record *rec = &r->records[i];
    for (int k = 0; k < rec->nsubkernels; k++) {
      const mk_bench_subkernel *sk = &rec->subkernels[k];
      mk_buf_puts(b, "<tr><td>");
      if (k == 0) html_text(b, rec->id);
      mk_buf_puts(b, "</td><td class=left>");
      html_text(b, or_dash(sk->name));
      mk_buf_puts(b, "</td><td class=left>");
      if (replaced(sk)) {
        html_text(b, or_dash(sk->variant));
        mk_buf_puts(b, " (");
        html_text(b, sk->origin);
        mk_buf_printf(b, ", %s)", mk_bench_backend_name(mk_bench_subkernel_backend(sk)));
      } else {
        mk_buf_puts(b, "PyTorch reference");
      }
      mk_buf_puts(b, "</td><td class=left>");
      if (sk->ours_ms >= 0) mk_buf_printf(b, "%.3f ms (reference %.3f ms)", sk->ours_ms, sk->ref_ms);
      else html_text(b, replaced(sk) ? "verified" : or_dash(sk->reason));
      mk_buf_puts(b, "</td></tr>");
    }
  }
  mk_buf_puts(b, "</table>");
}

static bool any_subkernel_time(const mk_bench_results *r) {
  for (int i = 0; i < r->nrecords; i++)
    for (int k = 0; k < r->records[i].nsubkernels; k++)
      if (r->records[i].subkernels[k].ours_ms > 0) return true;
  return false;
}

int mk_bench_write_html(const mk_bench_results *r, mk_buf *b) {
  mk_bench_aggregate a;
  mk_bench_aggregate_of(r, 0, &a);
  mk_buf_printf(b, "<!doctype html><html lang=en><head><meta charset=utf-8><title>MKEvolve bench</title>"
                   "<style>%s</style></head><body><h1>MKEvolve bench — ", CSS);
  html_text(b, or_dash(r->device));
  mk_buf_puts(b, ", proposer ");
  html_text(b, or_dash(r->proposer));
  mk_buf_puts(b, "</h1><p>");
  if (r->command) {
    mk_buf_puts(b, "Command: <code>");
    html_text(b, r->command);
    mk_buf_puts(b, "</code><br>");
  }
  if (r->note) html_text(b, r->note);
  mk_buf_puts(b, "</p>");
  bool timed = a.timed > 0;
  if (!timed) mk_buf_puts(b, "<p class=notice role=note>" NO_TIMINGS "</p>");
  mk_buf_puts(b, "<div class=cards>");
  card(b, "problems", "%.0f", a.problems);
  card(b, "correct (fast_0)", "%.0f%%", 100 * a.fast[0].vs_eager);
  card(b, "fast_1 vs eager", "%.0f%%", timed ? 100 * a.fast[1].vs_eager : -1);
  card(b, "fast_1 vs torch.compile", "%.0f%%", timed ? 100 * a.fast[1].vs_compile : -1);
  card(b, "geomean vs eager", "%.2fx", a.geomean_vs_eager);
  card(b, "geomean vs torch.compile", "%.2fx", a.geomean_vs_compile);
  if (a.tokens_in + a.tokens_out > 0) card(b, "tokens", "%.0f", (double)(a.tokens_in + a.tokens_out));
  if (a.kb_checked > 0) {
    mk_buf_printf(b, "<div class=card><b%s>%d/%d</b>KernelBench agrees</div>",
                  a.kb_count[MK_BENCH_KB_DISAGREE] ? " class=bad" : "", a.kb_count[MK_BENCH_KB_AGREE],
                  a.kb_checked);
  }
  mk_buf_puts(b, "</div><p>");
  backend_line(b, &a);
  mk_buf_puts(b, "</p>");
  if (a.kb_count[MK_BENCH_KB_UNAVAILABLE] > 0) {
    const char *why = NULL;
    for (int i = 0; i < r->nrecords && !why; i++)
      if (r->records[i].kb.status == MK_BENCH_KB_UNAVAILABLE) why = r->records[i].kb.reason;
    mk_buf_printf(b, "<p class=bad>KernelBench cross-check: %d problems not checked: ",
                  a.kb_count[MK_BENCH_KB_UNAVAILABLE]);
    html_text(b, or_dash(why));
    mk_buf_puts(b, "</p>");
  }
  /* Charts of numbers that do not exist would be empty frames. */
  if (timed) {
    mk_buf_puts(b, "<h2>Speedup vs eager: distribution</h2>");
    svg_histogram(b, r);
    mk_buf_puts(b, "<h2>Speedup per problem (log scale)</h2>");
    svg_bars(b, r);
  }
  if (any_subkernel_time(r)) {
    mk_buf_puts(b, "<h2>Time per subkernel (chosen variants)</h2>");
    svg_subkernels(b, r);
  }
  mk_buf_puts(b, "<h2>Problems</h2>");
  html_table(b, r, a.kb_checked > 0);
  mk_buf_puts(b, "<h2>What each subkernel became</h2>");
  html_subkernels(b, r);
  return mk_buf_puts(b, "</body></html>\n");
}
