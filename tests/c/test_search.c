/* test_search.c — the search state machine with a fake proposer and a fake
 * evaluator: choices, budget, reverts, split/merge decisions, run log. */
#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_search.h"
#include "mk_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* x -> relu -> (linear) -> mul -> sum: two or three subkernels. */
static const char *GRAPH_JSON =
    "{\"schema\":1,\"file\":\"/tmp/m.py\",\"class\":\"Model\",\"source_sha256\":\"0\",\"batch\":null,"
    "\"values\":["
    "{\"id\":0,\"kind\":\"input\",\"index\":0,\"shape\":[4,8],\"dtype\":\"float32\"},"
    "{\"id\":1,\"kind\":\"param\",\"name\":\"fc.weight\",\"shape\":[8,8],\"dtype\":\"float32\"},"
    "{\"id\":2,\"kind\":\"param\",\"name\":\"fc.bias\",\"shape\":[8],\"dtype\":\"float32\"},"
    "{\"id\":3,\"kind\":\"node\",\"producer\":0,\"shape\":[4,8],\"dtype\":\"float32\"},"
    "{\"id\":4,\"kind\":\"node\",\"producer\":1,\"shape\":[4,8],\"dtype\":\"float32\"},"
    "{\"id\":5,\"kind\":\"node\",\"producer\":2,\"shape\":[4,8],\"dtype\":\"float32\"},"
    "{\"id\":6,\"kind\":\"node\",\"producer\":3,\"shape\":[4],\"dtype\":\"float32\"}],"
    "\"nodes\":["
    "{\"id\":0,\"op\":\"torch.relu\",\"args\":[{\"t\":0}],\"kwargs\":{},\"inputs\":[0],\"outputs\":[3],"
    "\"out\":{\"t\":3},\"mutates\":[],\"span\":{\"line\":5,\"col\":8,\"end_line\":5,\"end_col\":20}},"
    "{\"id\":1,\"op\":\"torch.nn.functional.linear\",\"args\":[{\"t\":3},{\"t\":1},{\"t\":2}],\"kwargs\":{},"
    "\"inputs\":[3,1,2],\"outputs\":[4],\"out\":{\"t\":4},\"mutates\":[],\"module\":\"fc\",\"module_type\":\"Linear\","
    "\"span\":{\"line\":6,\"col\":8,\"end_line\":6,\"end_col\":18}},"
    "{\"id\":2,\"op\":\"torch.Tensor.__mul__\",\"args\":[{\"t\":4},{\"float\":2.0}],\"kwargs\":{},\"inputs\":[4],"
    "\"outputs\":[5],\"out\":{\"t\":5},\"mutates\":[],\"span\":{\"line\":7,\"col\":8,\"end_line\":7,\"end_col\":15}},"
    "{\"id\":3,\"op\":\"torch.sum\",\"args\":[{\"t\":5}],\"kwargs\":{\"dim\":1},\"inputs\":[5],\"outputs\":[6],"
    "\"out\":{\"t\":6},\"mutates\":[],\"span\":{\"line\":8,\"col\":15,\"end_line\":8,\"end_col\":33}}],"
    "\"outputs\":{\"t\":6},\"forward\":{\"line\":4,\"end_line\":8},"
    "\"batch_free\":{\"ok\":true,\"why\":null,\"inputs\":[0]},"
    "\"statements\":[{\"line\":5,\"end_line\":5,\"nodes\":[0]},{\"line\":6,\"end_line\":6,\"nodes\":[1]},"
    "{\"line\":7,\"end_line\":7,\"nodes\":[2]},{\"line\":8,\"end_line\":8,\"nodes\":[3]}],"
    "\"stats\":{\"capture_ms\":1.0,\"nodes\":4}}";

static const char *SOURCE =
    "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n"
    "    def forward(self, x):\n        x = torch.relu(x)\n        x = self.fc(x)\n"
    "        x = x * 2.0\n        return torch.sum(x, dim=1)\n";

/* Fake proposer: for every request, three candidates named
 * "<status>_<time>" where the evaluator reads its verdict from the name. */
typedef struct fake_prop {
  int calls;
  mk_kernel_backend backend; /* of the last request */
  const char *const *names;
  int nnames;
  bool fresh; /* every request (OPTIMISE too) gets new candidates */
  bool fuse;     /* give mk_proposer.fuses: yes to subkernels holding fuse_node and another */
  int fuse_node;
  int fuse_nodes; /* > 0: ... and exactly this many nodes */
  int fuses_asked;
} fake_prop;

static bool fake_fuses(void *self, const mk_graph *g, const mk_subkernel *sk, mk_kernel_backend backend) {
  (void)g;
  (void)backend;
  fake_prop *fp = self;
  fp->fuses_asked++;
  for (int i = 0; i < sk->nnodes; i++)
    if (sk->nodes[i] == fp->fuse_node) return sk->nnodes > 1 && (fp->fuse_nodes <= 0 || sk->nnodes == fp->fuse_nodes);
  return false;
}

static int fake_propose(void *self, const mk_propose_request *req, mk_propose_cb cb, void *data) {
  fake_prop *fp = self;
  fp->calls++;
  fp->backend = req->backend;
  mk_candidate_list *l = calloc(1, sizeof *l);
  if (req->mode == MK_PROPOSE_NEW || fp->fresh) {
    for (int i = 0; i < fp->nnames && i < req->max_candidates; i++) {
      mk_buf src;
      mk_buf_init(&src, 0);
      mk_buf_printf(&src, "# %s for subkernel %d\n%sdef run(*a):\n    return a[0]\n", fp->names[i],
                    req->subkernel->id, strstr(fp->names[i], "cuda") ? "MK_BACKEND = \"cuda\"\n" : "");
      if (fp->fresh) mk_buf_printf(&src, "# request %d\n", fp->calls);
      mk_candidate c = {.name = mk_strdup(fp->names[i]), .origin = mk_strdup("fake"),
                        .source = mk_buf_steal(&src, NULL)};
      mk_candidate_list_push(l, c);
    }
  }
  cb(data, 0, l, NULL);
  free(l);
  return 0;
}

typedef struct fake_eval {
  int evaluations, compositions;
  int fail_compositions; /* the first N composition checks fail */
  int widen_compositions; /* the first N pass only within the reference's TF32 error */
  double ref_ms;
  bool timed;
  double graph_ms;       /* > 0: time of the CUDA-graph variant (else 1.0 like the others) */
  double delay_s;        /* each evaluation takes this long (wall-time budgets) */
  int graph_checks;      /* compositions sent through evaluate_graph */
  const char *graph_report; /* the graph variant's report_json (NULL: none) */
  int other_batch_failures; /* the first N pass, then fail at another batch */
  char guards[4][96];       /* each composition's shape guard line, in order */
  int prepares;             /* prepare_check calls */
  bool prepared_graph;      /* the last one's `graph` */
  int evaluations_at_prepare; /* evaluations before it (-1: none yet) */
} fake_eval;

static void fake_prepare_check(void *self, bool graph) {
  fake_eval *fe = self;
  fe->prepares++;
  fe->prepared_graph = graph;
  fe->evaluations_at_prepare = fe->evaluations;
}

/* The `if x0.shape...` line of a composed file, into out. */
static void read_guard(const char *path, char *out, size_t size) {
  char *text = NULL;
  size_t len = 0;
  out[0] = '\0';
  if (mk_read_file(path, 1 << 22, &text, &len) != 0) return;
  const char *g = strstr(text, "        if x0.shape");
  if (g) snprintf(out, size, "%.*s", (int)strcspn(g + 8, "\n"), g + 8);
  free(text);
}

static int fake_evaluate(void *self, const mk_graph *g, const mk_subkernel *sk,
                         const mk_candidate *c, mk_eval_cb cb, void *data) {
  fake_eval *fe = self;
  fe->evaluations++;
  if (fe->delay_s > 0) usleep((useconds_t)(fe->delay_s * 1e6));
  mk_eval_result r = {.status = MK_EVAL_OK, .time_ms = -1, .ref_eager_ms = -1, .ref_compile_ms = -1};
  if (strcmp(c->origin, "reference") == 0) {
    r.time_ms = fe->timed ? fe->ref_ms : -1;
  } else if (strncmp(c->name, "bad", 3) == 0) {
    r.status = MK_EVAL_MISMATCH;
    snprintf(r.reason, sizeof r.reason, "max abs error 1.0 at [0, 0]");
  } else {
    r.time_ms = fe->timed ? atof(strchr(c->name, '_') + 1) : -1;
    /* "ok_<time>@<ref>": the reference timed beside it, in the same run */
    const char *at = strchr(c->name, '@');
    if (fe->timed && at) r.ref_eager_ms = atof(at + 1);
    /* "wide_<time>": passed only the TF32-aware comparison (docs/verify.md) */
    if (strncmp(c->name, "wide", 4) == 0) r.ref_tf32_noise = 5e-4;
  }
  r.trials = 5;
  r.trials_passed = r.status == MK_EVAL_OK ? 5 : 0;
  cb(data, &r);
  return 0;
}

static int fake_evaluate_composition(void *self, const char *path, mk_eval_cb cb, void *data) {
  fake_eval *fe = self;
  mk_eval_result r = {.status = MK_EVAL_OK, .time_ms = 1.0};
  if (fe->graph_ms > 0 && strstr(path, "modelnew.graph.py") != NULL) r.time_ms = fe->graph_ms;
  if (strstr(path, ".graph.py") != NULL) r.report_json = fe->graph_report;
  if (fe->compositions < fe->widen_compositions) r.ref_tf32_noise = 5e-4;
  if (fe->compositions < 4) read_guard(path, fe->guards[fe->compositions], sizeof fe->guards[0]);
  if (fe->compositions < fe->other_batch_failures) {
    r.other_batch = 3;
    snprintf(r.other_batch_failure, sizeof r.other_batch_failure, "output: 12 of 24 elements differ");
  }
  if (fe->compositions++ < fe->fail_compositions) {
    r.status = MK_EVAL_MISMATCH;
    snprintf(r.reason, sizeof r.reason, "composition differs");
  }
  MK_CHECK(access(path, R_OK) == 0);
  cb(data, &r);
  return 0;
}

/* The graph check: counted, then judged like any composition. */
static int fake_evaluate_graph(void *self, const char *path, mk_eval_cb cb, void *data) {
  ((fake_eval *)self)->graph_checks++;
  return fake_evaluate_composition(self, path, cb, data);
}

typedef struct outcome {
  int done, status;
  mk_search_result *res;
} outcome;

static void on_done(void *data, int status, mk_search_result *res, const char *error) {
  outcome *o = data;
  o->done++;
  o->status = status;
  o->res = res;
}

/* One subkernel per node (relu | linear | mul | sum) when `per_node`. */
static int run_search_in(fake_prop *fp, fake_eval *fe, mk_search_config *cfg, outcome *o,
                         mk_graph **gout, bool per_node) {
  mk_errmsg err = {{0}};
  mk_graph *g = NULL;
  if (mk_graph_from_json(GRAPH_JSON, strlen(GRAPH_JSON), &g, &err)) {
    fprintf(stderr, "graph: %s\n", err.text);
    return -1;
  }
  mk_partition p = {0};
  if (mk_decompose_initial(g, &p, &err) ||
      (per_node && (mk_partition_split(g, &p, 1, 2, &err) || mk_partition_split(g, &p, 2, 3, &err)))) {
    fprintf(stderr, "partition: %s\n", err.text);
    mk_partition_free(&p);
    mk_graph_free(g);
    return -1;
  }
  mk_proposer prop = {.self = fp, .name = "fake", .propose = fake_propose,
                      .fuses = fp->fuse ? fake_fuses : NULL};
  mk_evaluator ev = {.self = fe, .evaluate = fake_evaluate,
                     .evaluate_composition = fake_evaluate_composition,
                     .evaluate_graph = fake_evaluate_graph, .prepare_check = fake_prepare_check,
                     .timed = fe->timed};
  int rc = mk_search_start(g, &p, SOURCE, cfg, prop, ev, NULL, on_done, o, NULL, &err);
  mk_partition_free(&p);
  *gout = g;
  return rc;
}

static int run_search(fake_prop *fp, fake_eval *fe, mk_search_config *cfg, outcome *o,
                      mk_graph **gout) {
  return run_search_in(fp, fe, cfg, o, gout, false);
}

static void config(mk_search_config *cfg) {
  mk_search_config_defaults(cfg);
  cfg->workdir = "/tmp";
  cfg->try_split = false;
  cfg->try_merge = false;
}

MK_TEST(search, picks_fastest_verified_variant) {
  const char *names[] = {"ok_3.0", "bad_1", "ok_0.5", "ok_2.0"};
  fake_prop fp = {.names = names, .nnames = 4};
  fake_eval fe = {.ref_ms = 4.0, .timed = true};
  mk_search_config cfg;
  config(&cfg);
  char work[] = "/tmp/mk_search_work_XXXXXX";
  MK_REQUIRE(mkdtemp(work) != NULL);
  cfg.workdir = work;
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  MK_CHECK_INT(o.done, ==, 1);
  MK_CHECK_INT(o.status, ==, 0);
  MK_REQUIRE(o.res != NULL);
  for (int i = 0; i < o.res->partition.nsubkernels; i++) {
    const mk_subkernel_state *st = &o.res->states[i];
    MK_CHECK_STR(st->variants[st->chosen].cand.name, "ok_0.5");
  }
  MK_CHECK(o.res->failed > 0);
  MK_CHECK(o.res->modelnew_path != NULL);
  /* every evaluated candidate's source is kept in the workdir */
  char path[700];
  snprintf(path, sizeof path, "%s/candidates/%s.ok_0_5.py", work, o.res->partition.subkernels[0].name);
  MK_CHECK(access(path, R_OK) == 0);
  char rm[800];
  snprintf(rm, sizeof rm, "rm -rf '%s'", work);
  MK_CHECK(system(rm) == 0);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* Runs a timed search (reference 4 ms) over `names` and checks the variant
 * chosen for every subkernel: `want`, or the reference when NULL. */
static void expect_chosen(const char *const *names, int n, const char *want) {
  fake_prop fp = {.names = names, .nnames = n};
  fake_eval fe = {.ref_ms = 4.0, .timed = true};
  mk_search_config cfg;
  config(&cfg);
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  for (int i = 0; i < o.res->partition.nsubkernels; i++) {
    const mk_subkernel_state *st = &o.res->states[i];
    if (want) MK_CHECK_STR(st->variants[st->chosen].cand.name, want);
    else MK_CHECK_INT(st->chosen, ==, 0);
  }
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* Candidates timed at different moments compare by their ratio to the
 * reference timed beside them, not by raw milliseconds (the device drifts). */
MK_TEST(search, variants_rank_by_the_reference_timed_beside_them) {
  const char *names[] = {"ok_1.0@1.0", "ok_1.5@3.0", "ok_2.0@1.5"};
  expect_chosen(names, 3, "ok_1.5@3.0"); /* 0.5x its reference */
  /* raw times below the reference's, ratios above 1: the reference stays */
  const char *slower[] = {"ok_1.0@0.9", "ok_2.0@1.5"};
  expect_chosen(slower, 2, NULL);
}

/* A variant that passed only within the reference's TF32 error loses to any
 * that passed the plain comparison (KernelBench compares with the reference
 * itself), and is chosen only when it is the only verified one. */
MK_TEST(search, plain_pass_wins_over_tf32_widened_pass) {
  const char *names[] = {"wide_0.5", "ok_2.0", "ok_3.0"};
  expect_chosen(names, 3, "ok_2.0");
  const char *only_wide[] = {"bad_1", "wide_1.0", "wide_0.7"};
  expect_chosen(only_wide, 3, "wide_0.7");
}

MK_TEST(search, reference_stays_when_nothing_is_faster) {
  const char *names[] = {"ok_9.0", "bad_1"};
  fake_prop fp = {.names = names, .nnames = 2};
  fake_eval fe = {.ref_ms = 1.0, .timed = true};
  mk_search_config cfg;
  config(&cfg);
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  for (int i = 0; i < o.res->partition.nsubkernels; i++)
    MK_CHECK_INT(o.res->states[i].chosen, ==, 0);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

MK_TEST(search, failed_composition_reverts_to_reference) {
  const char *names[] = {"ok_0.1"};
  fake_prop fp = {.names = names, .nnames = 1};
  fake_eval fe = {.ref_ms = 1.0, .timed = true, .fail_compositions = 1};
  mk_search_config cfg;
  config(&cfg);
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  MK_CHECK_INT(o.status, ==, 0);
  /* the composition fails, the reference passes, then its CUDA-graph variant (not faster) */
  MK_CHECK_INT(fe.compositions, ==, 3);
  MK_CHECK(!o.res->cuda_graph);
  MK_CHECK(o.res->reverted > 0);
  for (int i = 0; i < o.res->partition.nsubkernels; i++)
    MK_CHECK_INT(o.res->states[i].chosen, ==, 0);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* A composition that passes only within the reference's own TF32 error is
 * not accepted (KernelBench compares with the reference itself): composed
 * again without the variants that needed the widening; where none did, the
 * reference, as after a mismatch. */
MK_TEST(search, tf32_widened_composition_is_not_accepted) {
  const struct { const char *names[2]; int widen, compositions; const char *want; } cases[] = {
      {{"wide_0.5", "bad_1"}, 1, 2, NULL},   /* again without the widened variants: the reference */
      {{"ok_0.5", "bad_1"}, 1, 2, NULL},     /* plain parts, widened whole: the reference */
      {{"ok_0.5", "bad_1"}, 0, 1, "ok_0.5"}, /* a plain pass is kept */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    fake_prop fp = {.names = cases[c].names, .nnames = 2};
    fake_eval fe = {.ref_ms = 4.0, .timed = true, .widen_compositions = cases[c].widen};
    mk_search_config cfg;
    config(&cfg);
    cfg.try_cuda_graph = false;
    char work[] = "/tmp/mk_search_work_XXXXXX";
    MK_REQUIRE(mkdtemp(work) != NULL);
    cfg.workdir = work;
    outcome o = {0};
    mk_graph *g = NULL;
    MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
    MK_REQUIRE(o.res != NULL);
    MK_CHECK_INT(o.status, ==, 0);
    MK_CHECK_INT(fe.compositions, ==, cases[c].compositions);
    MK_CHECK((o.res->reverted > 0) == (cases[c].want == NULL));
    for (int i = 0; i < o.res->partition.nsubkernels; i++) {
      const mk_subkernel_state *st = &o.res->states[i];
      if (cases[c].want) MK_CHECK_STR(st->variants[st->chosen].cand.name, cases[c].want);
      else MK_CHECK_INT(st->chosen, ==, 0);
    }
    /* The first check's file is kept beside the second's. */
    char path[256];
    snprintf(path, sizeof path, "%s/modelnew.round0-plain.py", work);
    MK_CHECK((access(path, R_OK) == 0) == (c == 0));
    mk_search_result_free(o.res);
    mk_graph_free(g);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", work);
    MK_CHECK_INT(system(rm), ==, 0);
  }
}

/* A composition that passes at its batch but fails at another (which its
 * batch-free guard lets through) is composed again with every input's whole
 * shape guarded, same variants; that one is kept. */
MK_TEST(search, composition_failing_at_another_batch_guards_its_whole_shape) {
  const char *names[] = {"ok_0.5"};
  fake_prop fp = {.names = names, .nnames = 1};
  fake_eval fe = {.ref_ms = 4.0, .timed = true, .other_batch_failures = 1};
  mk_search_config cfg;
  config(&cfg);
  cfg.try_cuda_graph = false;
  char work[] = "/tmp/mk_search_work_XXXXXX";
  MK_REQUIRE(mkdtemp(work) != NULL);
  cfg.workdir = work;
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  MK_CHECK_INT(o.status, ==, 0);
  MK_CHECK_INT(fe.compositions, ==, 2);
  MK_CHECK_STR(fe.guards[0], "if x0.shape[1:] != (8,):");
  MK_CHECK_STR(fe.guards[1], "if x0.shape != (4, 8):");
  MK_CHECK(o.res->fixed_shapes && !o.res->plain_subclass);
  MK_CHECK_INT(o.res->reverted, ==, 0);
  for (int i = 0; i < o.res->partition.nsubkernels; i++)
    MK_CHECK_STR(o.res->states[i].variants[o.res->states[i].chosen].cand.name, "ok_0.5");
  char *log = NULL;
  size_t len = 0;
  char path[256];
  snprintf(path, sizeof path, "%s/run.jsonl", work);
  if (mk_read_file(path, 1 << 22, &log, &len) == 0) {
    MK_CHECK(strstr(log, "\"other_batch_failure\":\"output: 12 of 24 elements differ\"") != NULL);
    free(log);
  }
  mk_search_result_free(o.res);
  mk_graph_free(g);
  char rm[300];
  snprintf(rm, sizeof rm, "rm -rf '%s'", work);
  MK_CHECK_INT(system(rm), ==, 0);
}

MK_TEST(search, proposal_budget_is_respected) {
  const char *names[] = {"ok_3.0", "ok_2.0", "ok_1.0", "ok_0.9"};
  fake_prop fp = {.names = names, .nnames = 4};
  fake_eval fe = {.ref_ms = 4.0, .timed = true};
  mk_search_config cfg;
  config(&cfg);
  cfg.max_proposals = 3;
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  MK_CHECK_INT(o.res->proposals, <=, 3);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

MK_TEST(search, duplicate_proposals_cost_nothing) {
  const char *names[] = {"ok_2.0", "ok_2.0", "ok_2.0"};
  fake_prop fp = {.names = names, .nnames = 3};
  fake_eval fe = {.ref_ms = 4.0, .timed = true};
  mk_search_config cfg;
  config(&cfg);
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  /* one candidate per subkernel: the two copies were dropped unverified */
  MK_CHECK_INT(o.res->proposals, ==, o.res->partition.nsubkernels);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

MK_TEST(search, untimed_run_takes_verified_kernel_and_logs) {
  const char *names[] = {"bad_1", "ok_1.0"};
  fake_prop fp = {.names = names, .nnames = 2};
  fake_eval fe = {.timed = false};
  mk_search_config cfg;
  config(&cfg);
  cfg.try_split = true;
  cfg.try_merge = true; /* merges need timings: must be skipped */
  char path[] = "/tmp/mk_search_log_XXXXXX";
  int fd = mkstemp(path);
  MK_REQUIRE(fd >= 0);
  close(fd);
  cfg.log = fopen(path, "w");
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  fclose(cfg.log);
  MK_REQUIRE(o.res != NULL);
  MK_CHECK_INT(o.res->merges, ==, 0);
  for (int i = 0; i < o.res->partition.nsubkernels; i++) {
    const mk_subkernel_state *st = &o.res->states[i];
    MK_CHECK_STR(st->variants[st->chosen].cand.name, "ok_1.0");
  }
  char *log = NULL;
  size_t n = 0;
  MK_REQUIRE(mk_read_file(path, 1 << 20, &log, &n) == 0);
  MK_CHECK(strstr(log, "\"event\":\"start\"") != NULL);
  MK_CHECK(strstr(log, "\"event\":\"evaluated\"") != NULL);
  MK_CHECK(strstr(log, "\"event\":\"done\"") != NULL);
  free(log);
  remove(path);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* --backend reaches the proposer; the run log says which backend each
 * variant and each chosen subkernel uses, and how many of each. */
MK_TEST(search, run_log_says_each_backend) {
  const char *names[] = {"cudaok_1.0"};
  fake_prop fp = {.names = names, .nnames = 1};
  fake_eval fe = {.timed = false};
  mk_search_config cfg;
  config(&cfg);
  cfg.backend = MK_KBACKEND_AUTO;
  char path[] = "/tmp/mk_search_blog_XXXXXX";
  int fd = mkstemp(path);
  MK_REQUIRE(fd >= 0);
  close(fd);
  cfg.log = fopen(path, "w");
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  fclose(cfg.log);
  MK_REQUIRE(o.res != NULL);
  MK_CHECK_INT(fp.backend, ==, MK_KBACKEND_AUTO);
  char *log = NULL;
  size_t n = 0;
  MK_REQUIRE(mk_read_file(path, 1 << 20, &log, &n) == 0);
  MK_CHECK(strstr(log, "\"event\":\"start\"") && strstr(log, "\"backend\":\"auto\""));
  MK_CHECK(strstr(log, "\"origin\":\"reference\",\"backend\":\"pytorch\"") != NULL);
  MK_CHECK(strstr(log, "\"origin\":\"fake\",\"backend\":\"cuda\"") != NULL);
  char counts[128];
  int nsk = o.res->partition.nsubkernels;
  snprintf(counts, sizeof counts, "\"backend_counts\":{\"pytorch\":0,\"triton\":0,\"cuda\":%d}", nsk);
  MK_CHECK(strstr(log, counts) != NULL);
  MK_CHECK(strstr(log, "\"backends\":[\"cuda\"") != NULL);
  free(log);
  remove(path);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* ---- cancel: a deferred evaluator with a cancel hook ----------------------- */

/* Holds every evaluation until pumped, like a worker; `cancel` marks the
 * undelivered ones, which then call back with MK_EVAL_CANCELLED. */
typedef struct held {
  mk_eval_cb cb;
  void *data;
  bool composition;
  bool delivered, cancelled;
  char name[64];
} held;

typedef struct deferred_eval {
  held jobs[64];
  int njobs;
  int cancels;           /* cancel hook calls */
  int after_cancel;      /* evaluations submitted after the hook ran */
} deferred_eval;

static int deferred_add(deferred_eval *de, mk_eval_cb cb, void *data, bool composition, const char *name) {
  if (de->njobs == 64) return MK_ENOMEM;
  if (de->cancels) de->after_cancel++;
  held *h = &de->jobs[de->njobs++];
  *h = (held){.cb = cb, .data = data, .composition = composition};
  snprintf(h->name, sizeof h->name, "%s", name);
  return 0;
}

static int deferred_evaluate(void *self, const mk_graph *g, const mk_subkernel *sk,
                             const mk_candidate *c, mk_eval_cb cb, void *data) {
  return deferred_add(self, cb, data, false, c->name ? c->name : "?");
}

static int deferred_composition(void *self, const char *path, mk_eval_cb cb, void *data) {
  return deferred_add(self, cb, data, true, "composition");
}

static void deferred_cancel(void *self) {
  deferred_eval *de = self;
  de->cancels++;
  for (int i = 0; i < de->njobs; i++)
    if (!de->jobs[i].delivered) de->jobs[i].cancelled = true;
}

/* Delivers job i: its verdict from the name (ok_* verified, bad_* not), or
 * CANCELLED when cancelled. Counts deliveries to catch doubles. */
static void deferred_deliver(deferred_eval *de, int i) {
  held *h = &de->jobs[i];
  MK_REQUIRE(!h->delivered);
  h->delivered = true;
  mk_eval_result r = {.status = MK_EVAL_OK, .time_ms = -1, .min_ms = -1, .ref_eager_ms = -1,
                      .ref_compile_ms = -1, .trials = 5, .trials_passed = 5};
  if (h->cancelled) {
    r.status = MK_EVAL_CANCELLED;
    r.trials_passed = 0;
    snprintf(r.reason, sizeof r.reason, "cancelled");
  } else if (strncmp(h->name, "bad", 3) == 0) {
    r.status = MK_EVAL_MISMATCH;
    r.trials_passed = 0;
    snprintf(r.reason, sizeof r.reason, "max abs error 1.0");
  }
  h->cb(h->data, &r);
}

/* Delivers every job not yet delivered (new ones included), oldest first. */
static int deferred_pump(deferred_eval *de) {
  int n = 0;
  for (int i = 0; i < de->njobs; i++)
    if (!de->jobs[i].delivered) {
      deferred_deliver(de, i);
      n++;
    }
  return n;
}

MK_TEST(search, cancel_aborts_evaluations_in_flight) {
  const char *names[] = {"ok_a", "ok_b", "bad_c", "ok_d"};
  fake_prop fp = {.names = names, .nnames = 4};
  deferred_eval de = {0};
  mk_search_config cfg;
  config(&cfg);
  cfg.beam_width = 2;
  cfg.cpu_seconds = 0; /* an untimed evaluator without the CPU plan: the beam's batches in flight */
  outcome o = {0};
  mk_errmsg err = {{0}};
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(GRAPH_JSON, strlen(GRAPH_JSON), &g, &err) == 0);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  MK_REQUIRE(p.nsubkernels >= 2);
  mk_proposer prop = {.self = &fp, .name = "fake", .propose = fake_propose};
  mk_evaluator ev = {.self = &de, .evaluate = deferred_evaluate,
                     .evaluate_composition = deferred_composition, .cancel = deferred_cancel};
  mk_search *s = NULL;
  MK_REQUIRE(mk_search_start(g, &p, SOURCE, &cfg, prop, ev, NULL, on_done, &o, &s, &err) == 0);
  /* References, then the first subkernel's proposals are in flight. */
  int refs = de.njobs;
  MK_CHECK_INT(refs, ==, p.nsubkernels);
  for (int i = 0; i < refs; i++) deferred_deliver(&de, i); /* not what they start */
  int first = de.njobs;
  MK_REQUIRE(first > p.nsubkernels); /* candidates of the first subkernel submitted */
  /* One candidate is verified; the others are still running. */
  deferred_deliver(&de, p.nsubkernels);
  MK_CHECK_STR(de.jobs[p.nsubkernels].name, "ok_a");
  MK_CHECK_INT(o.done, ==, 0);
  mk_search_cancel(s);
  MK_CHECK_INT(de.cancels, ==, 1);
  mk_search_cancel(s); /* twice: the hook runs once */
  MK_CHECK_INT(de.cancels, ==, 1);
  MK_CHECK_INT(o.done, ==, 0); /* the callbacks in flight have not arrived */
  int cancelled = 0;
  for (int i = 0; i < de.njobs; i++) cancelled += de.jobs[i].cancelled;
  MK_CHECK(cancelled >= 2);
  deferred_pump(&de); /* each arrives once, cancelled */
  MK_CHECK_INT(de.after_cancel, ==, 0); /* nothing new started, no final verification */
  MK_CHECK_INT(o.done, ==, 1);
  MK_CHECK_INT(o.status, ==, MK_ECANCELED);
  MK_REQUIRE(o.res != NULL);
  /* The best composition so far: the verified kernel, composed. */
  MK_CHECK(o.res->modelnew_path != NULL && access(o.res->modelnew_path, R_OK) == 0);
  MK_CHECK_INT(o.res->final.status, ==, MK_EVAL_CANCELLED);
  int chosen_ok_a = 0;
  for (int i = 0; i < o.res->partition.nsubkernels; i++) {
    const mk_subkernel_state *st = &o.res->states[i];
    for (int k = 0; k < st->nvariants; k++) MK_CHECK(st->variants[k].result.status != MK_EVAL_CANCELLED);
    if (st->chosen > 0) {
      MK_CHECK_STR(st->variants[st->chosen].cand.name, "ok_a");
      MK_CHECK(st->variants[st->chosen].result.status == MK_EVAL_OK);
      chosen_ok_a++;
    }
  }
  MK_CHECK_INT(chosen_ok_a, ==, 1);
  MK_CHECK_INT(o.res->verified, ==, 1);
  MK_CHECK_INT(o.res->failed, ==, 0); /* cancelled is not failed */
  char *composed = NULL;
  size_t len = 0;
  MK_REQUIRE(mk_read_file(o.res->modelnew_path, 1 << 20, &composed, &len) == 0);
  MK_CHECK(strstr(composed, "ok_a") != NULL);
  free(composed);
  mk_search_result_free(o.res);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* An evaluator that calls back from inside cancel: the search may finish
 * (and be freed) before mk_search_cancel returns. */
static void sync_cancel(void *self) {
  deferred_eval *de = self;
  deferred_cancel(de);
  deferred_pump(de);
}

MK_TEST(search, cancel_with_synchronous_callbacks) {
  const char *names[] = {"ok_a", "ok_b"};
  fake_prop fp = {.names = names, .nnames = 2};
  deferred_eval de = {0};
  mk_search_config cfg;
  config(&cfg);
  outcome o = {0};
  mk_errmsg err = {{0}};
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(GRAPH_JSON, strlen(GRAPH_JSON), &g, &err) == 0);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_proposer prop = {.self = &fp, .name = "fake", .propose = fake_propose};
  mk_evaluator ev = {.self = &de, .evaluate = deferred_evaluate,
                     .evaluate_composition = deferred_composition, .cancel = sync_cancel};
  mk_search *s = NULL;
  MK_REQUIRE(mk_search_start(g, &p, SOURCE, &cfg, prop, ev, NULL, on_done, &o, &s, &err) == 0);
  mk_search_cancel(s); /* the references are in flight */
  MK_CHECK_INT(o.done, ==, 1);
  MK_CHECK_INT(o.status, ==, MK_ECANCELED);
  MK_CHECK_INT(de.after_cancel, ==, 0);
  for (int i = 0; i < de.njobs; i++) MK_CHECK(de.jobs[i].delivered);
  MK_REQUIRE(o.res != NULL);
  for (int i = 0; i < o.res->partition.nsubkernels; i++) MK_CHECK_INT(o.res->states[i].chosen, ==, 0);
  mk_search_result_free(o.res);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* Counts what the fake evaluator saw for the twins test. */
typedef struct count_eval {
  fake_eval fe;
  int references;
  int per_subkernel[16];
} count_eval;

static int counting_evaluate(void *self, const mk_graph *g, const mk_subkernel *sk,
                             const mk_candidate *c, mk_eval_cb cb, void *data) {
  count_eval *ce = self;
  if (strcmp(c->origin, "reference") == 0) ce->references++;
  if (sk->id >= 0 && sk->id < 16) ce->per_subkernel[sk->id]++;
  return fake_evaluate(&ce->fe, g, sk, c, cb, data);
}

/* Repeated blocks: twins are neither timed nor searched again; they take
 * their representative's verified variants, and the budget goes to the
 * distinct subkernels only. */
MK_TEST(search, twins_share_the_representatives_variants) {
  char path[1024], *text = NULL, *source = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/tests/fixtures/propose/repeated_blocks.json", mk_test_repo_dir());
  MK_REQUIRE(mk_read_file(path, 1 << 24, &text, &len) == 0);
  snprintf(path, sizeof path, "%s/tests/fixtures/propose/repeated_blocks.py", mk_test_repo_dir());
  MK_REQUIRE(mk_read_file(path, 1 << 20, &source, NULL) == 0);
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(text, len, &g, NULL) == 0);
  free(text);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, NULL) == 0);
  MK_REQUIRE(p.nsubkernels == 9);
  const char *names[] = {"ok_0.5", "ok_0.25"};
  fake_prop fp = {.names = names, .nnames = 2};
  count_eval ce = {.fe = {.ref_ms = 1.0, .timed = true}};
  mk_search_config cfg;
  config(&cfg);
  cfg.depth = 0;
  outcome o = {0};
  mk_proposer prop = {.self = &fp, .name = "fake", .propose = fake_propose};
  mk_evaluator ev = {.self = &ce, .evaluate = counting_evaluate,
                     .evaluate_composition = fake_evaluate_composition, .timed = true};
  MK_REQUIRE(mk_search_start(g, &p, source, &cfg, prop, ev, NULL, on_done, &o, NULL, NULL) == 0);
  MK_REQUIRE(o.res != NULL);
  MK_CHECK_INT(o.status, ==, 0);
  MK_CHECK_INT(ce.references, ==, 5); /* 9 subkernels, 5 distinct */
  MK_CHECK_INT(fp.calls, ==, 5);
  MK_CHECK_INT(o.res->proposals, ==, 10);
  static const int twins[] = {3, 4, 5, 7};
  for (int k = 0; k < 4; k++) MK_CHECK_INT(ce.per_subkernel[twins[k]], ==, 0);
  for (int i = 0; i < o.res->partition.nsubkernels; i++) {
    const mk_subkernel_state *st = &o.res->states[i];
    MK_REQUIRE(st->nvariants == 3);
    MK_CHECK_STR(st->variants[st->chosen].cand.name, "ok_0.25");
    MK_CHECK(st->variants[0].result.time_ms == 1.0); /* the reference's timing, shared */
  }
  /* the composed file pastes each distinct kernel once */
  char *composed = NULL;
  MK_REQUIRE(mk_read_file(o.res->modelnew_path, 1 << 22, &composed, NULL) == 0);
  int sections = 0;
  for (const char *q = composed; (q = strstr(q, "# ---- sk")) != NULL; q++) sections++;
  MK_CHECK_INT(sections, ==, 5);
  MK_CHECK(strstr(composed, "sk0_run(") != NULL && strstr(composed, "sk3_run(") == NULL);
  free(composed);
  mk_search_result_free(o.res);
  mk_partition_free(&p);
  free(source);
  mk_graph_free(g);
}

/* A session's fresh states carry an untimed reference: a timed search must
 * time it, so a verified candidate slower than PyTorch is not chosen. */
MK_TEST(search, untimed_prior_reference_is_timed) {
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(GRAPH_JSON, strlen(GRAPH_JSON), &g, NULL) == 0);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, NULL) == 0);
  mk_subkernel_state *prior = calloc((size_t)p.nsubkernels, sizeof *prior);
  MK_REQUIRE(prior != NULL);
  for (int i = 0; i < p.nsubkernels; i++) {
    prior[i].variants = calloc(1, sizeof *prior[i].variants);
    prior[i].nvariants = prior[i].cap = 1;
    MK_REQUIRE(mk_reference_candidate(g, &p.subkernels[i], &prior[i].variants[0].cand, NULL) == 0);
    prior[i].variants[0].result = (mk_eval_result){.status = MK_EVAL_OK, .time_ms = -1};
  }
  const char *names[] = {"ok_3.0"};
  fake_prop fp = {.names = names, .nnames = 1};
  count_eval ce = {.fe = {.ref_ms = 1.0, .timed = true}};
  mk_search_config cfg;
  config(&cfg);
  cfg.prior = prior;
  cfg.nprior = p.nsubkernels;
  outcome o = {0};
  mk_proposer prop = {.self = &fp, .name = "fake", .propose = fake_propose};
  mk_evaluator ev = {.self = &ce, .evaluate = counting_evaluate,
                     .evaluate_composition = fake_evaluate_composition, .timed = true};
  MK_REQUIRE(mk_search_start(g, &p, SOURCE, &cfg, prop, ev, NULL, on_done, &o, NULL, NULL) == 0);
  MK_REQUIRE(o.res != NULL);
  MK_CHECK_INT(ce.references, ==, p.nsubkernels);
  for (int i = 0; i < o.res->partition.nsubkernels; i++) {
    MK_CHECK(o.res->states[i].variants[0].result.time_ms == 1.0);
    MK_CHECK_INT(o.res->states[i].chosen, ==, 0); /* 3 ms candidate vs 1 ms PyTorch */
  }
  for (int i = 0; i < p.nsubkernels; i++) {
    mk_candidate_free(&prior[i].variants[0].cand);
    free(prior[i].variants);
  }
  free(prior);
  mk_search_result_free(o.res);
  mk_partition_free(&p);
  mk_graph_free(g);
}

static int slow_composition(void *self, const char *path, mk_eval_cb cb, void *data) {
  fake_eval *fe = self;
  fe->compositions++;
  /* the composed program is correct but slower than eager; the plain subclass
   * is not; graph_ms > 0: the time of the slower one replayed as a graph */
  char *text = NULL;
  MK_CHECK(mk_read_file(path, 1 << 22, &text, NULL) == 0);
  bool plain = text && strstr(text, "    pass\n") != NULL;
  free(text);
  double ms = plain ? 1.0 : 1.5;
  if (strstr(path, "modelnew.round0.graph.py") != NULL) ms = fe->graph_ms > 0 ? fe->graph_ms : 1.5;
  mk_eval_result r = {.status = MK_EVAL_OK, .time_ms = ms, .ref_eager_ms = 1.0};
  cb(data, &r);
  return 0;
}

/* A composition with kernels, correct but slower than eager, may be
 * launch-bound: its CUDA-graph variant is verified before the reference
 * takes over, and kept (with its kernels chosen) when faster than eager and
 * than the reference round; otherwise the reference round stands. */
static void check_rescue(double graph_ms, bool kept) {
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(GRAPH_JSON, strlen(GRAPH_JSON), &g, NULL) == 0);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, NULL) == 0);
  const char *names[] = {"ok_0.5"};
  fake_prop fp = {.names = names, .nnames = 1};
  fake_eval fe = {.ref_ms = 1.0, .timed = true, .graph_ms = graph_ms};
  mk_search_config cfg;
  config(&cfg);
  outcome o = {0};
  mk_proposer prop = {.self = &fp, .name = "fake", .propose = fake_propose};
  mk_evaluator ev = {.self = &fe, .evaluate = fake_evaluate, .evaluate_composition = slow_composition,
                     .timed = true};
  MK_REQUIRE(mk_search_start(g, &p, SOURCE, &cfg, prop, ev, NULL, on_done, &o, NULL, NULL) == 0);
  MK_REQUIRE(o.res != NULL);
  MK_CHECK_INT(o.status, ==, 0);
  MK_CHECK_INT(fe.compositions, ==, 4); /* round 0, its graph, the reference round, its graph */
  MK_CHECK(o.res->cuda_graph == kept);
  MK_CHECK(o.res->final.time_ms == (kept ? graph_ms : 1.0));
  int chosen = 0;
  for (int i = 0; i < o.res->partition.nsubkernels; i++) chosen += o.res->states[i].chosen > 0;
  if (kept) {
    MK_CHECK(o.res->plain_ms == 1.5);
    MK_CHECK(chosen > 0);
    MK_CHECK_INT(o.res->reverted, ==, 0);
    MK_CHECK(strstr(o.res->modelnew_path, "modelnew.round0.graph.py") != NULL);
  } else {
    MK_CHECK_INT(chosen, ==, 0);
    MK_CHECK(o.res->reverted > 0);
    /* the plain subclass's graph was not faster either: the plain subclass */
    char *text = NULL;
    MK_REQUIRE(mk_read_file(o.res->modelnew_path, 1 << 22, &text, NULL) == 0);
    MK_CHECK(strstr(text, "class ModelNew(Model):\n    pass\n") != NULL);
    free(text);
  }
  /* what the session writes for `evolve -o` (mk_session_compose) follows these */
  MK_CHECK(o.res->plain_subclass == !kept);
  MK_CHECK(!o.res->fixed_shapes);
  mk_search_result_free(o.res);
  mk_partition_free(&p);
  mk_graph_free(g);
}

MK_TEST(search, slower_composition_kept_as_a_graph_when_that_is_fastest) { check_rescue(0.6, true); }

MK_TEST(search, slower_composition_graph_not_faster_than_eager_gives_way) { check_rescue(1.1, false); }

/* Correct is not enough: a composition slower than eager (and so is its
 * graph) gives way to the plain subclass (the user's Model), never worse
 * than PyTorch. */
MK_TEST(search, slower_composition_falls_back_to_the_model) { check_rescue(0, false); }

/* On a GPU the verified composition is tried again as one CUDA graph and
 * kept when faster; untimed (CPU) runs never try it. */
MK_TEST(search, cuda_graph_variant_kept_only_when_faster) {
  for (int timed = 0; timed <= 1; timed++) {
    const char *names[] = {"ok_0.5"};
    fake_prop fp = {.names = names, .nnames = 1};
    fake_eval fe = {.ref_ms = 1.0, .timed = timed, .graph_ms = 0.5};
    mk_search_config cfg;
    config(&cfg);
    outcome o = {0};
    mk_graph *g = NULL;
    MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
    MK_REQUIRE(o.res != NULL);
    MK_CHECK_INT(o.status, ==, 0);
    MK_CHECK_INT(fe.compositions, ==, timed ? 2 : 1);
    MK_CHECK_INT(fe.graph_checks, ==, timed ? 1 : 0); /* the variant through evaluate_graph */
    MK_CHECK(o.res->cuda_graph == (bool)timed);
    if (timed) {
      MK_CHECK(o.res->final.time_ms == 0.5);
      MK_CHECK(o.res->plain_ms == 1.0);
      MK_CHECK(strstr(o.res->modelnew_path, "modelnew.graph.py") != NULL);
    }
    mk_search_result_free(o.res);
    mk_graph_free(g);
  }
}

/* Reads the run log into text and returns the start of the line of the
 * first `event` (NULL: none). */
static const char *event_line(FILE *log, const char *event, char *text, size_t size) {
  rewind(log);
  size_t n = fread(text, 1, size - 1, log);
  text[n] = '\0';
  char needle[96];
  snprintf(needle, sizeof needle, "\"event\":\"%s\"", event);
  const char *line = strstr(text, needle);
  if (line == NULL) return NULL;
  while (line > text && line[-1] != '\n') line--;
  return line;
}

/* A graph variant whose capture failed (a host-to-device copy in the
 * forward, say) ran its plain forward: the verifier says so in its report
 * (`cuda_graph_captured`), and the run log's cuda_graph event and the
 * result's reason carry why, not "not faster". */
MK_TEST(search, graph_variant_that_never_captured_says_why) {
  const char *names[] = {"ok_0.5"};
  fake_prop fp = {.names = names, .nnames = 1};
  fake_eval fe = {.ref_ms = 1.0, .timed = true, .graph_ms = 1.2,
                  .graph_report = "{\"status\": \"ok\", \"cuda_graph_captured\": false, \"notes\": "
                                  "[\"its CUDA graph never captured (RuntimeError: operation not "
                                  "permitted when stream is capturing): the plain forward ran\"]}"};
  mk_search_config cfg;
  config(&cfg);
  FILE *log = tmpfile();
  MK_REQUIRE(log != NULL);
  cfg.log = log;
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  MK_CHECK(!o.res->cuda_graph);
  MK_CHECK(strstr(o.res->cuda_graph_reason, "never captured (RuntimeError: operation not permitted") != NULL);
  char text[1 << 14];
  const char *line = event_line(log, "cuda_graph", text, sizeof text);
  MK_REQUIRE(line != NULL);
  MK_CHECK(strstr(line, "\"captured\":false,\"why\":\"its CUDA graph never captured") != NULL);
  fclose(log);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* The seconds torch.compile took to compile the reference for the baselines
 * come after the search's budget and grow with the network: the run log's
 * whole-program events say them, per mode. */
MK_TEST(search, whole_program_events_say_the_compile_seconds) {
  const char *names[] = {"ok_0.5"};
  fake_prop fp = {.names = names, .nnames = 1};
  fake_eval fe = {.ref_ms = 1.0, .timed = true, .graph_ms = 0.4,
                  .graph_report = "{\"status\": \"ok\", \"cuda_graph_captured\": true, \"timing\": "
                                  "{\"reference_compile\": {\"median_ms\": 1, \"compile_s\": 12.5}, "
                                  "\"reference_compile_modes\": {\"reduce-overhead\": "
                                  "{\"median_ms\": 0.5, \"compile_s\": 30}}}}"};
  mk_search_config cfg;
  config(&cfg);
  FILE *log = tmpfile();
  MK_REQUIRE(log != NULL);
  cfg.log = log;
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  char text[1 << 14];
  const char *line = event_line(log, "cuda_graph", text, sizeof text);
  MK_REQUIRE(line != NULL);
  MK_CHECK(strstr(line, "\"compile_s\":{\"default\":12.5,\"reduce-overhead\":30}") != NULL);
  /* the plain composition's report has no timing block: no key */
  line = event_line(log, "final_verify", text, sizeof text);
  MK_REQUIRE(line != NULL);
  const char *end = strchr(line, '\n');
  MK_REQUIRE(end != NULL);
  MK_CHECK(strstr(line, "compile_s") == NULL || strstr(line, "compile_s") > end);
  fclose(log);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* A timed search tells the evaluator once, before its first evaluation, that
 * the whole-program check will come (with its CUDA-graph variant when that
 * is tried), so the check's compiles can start beside the search; an
 * untimed one (the CPU) does not. */
MK_TEST(search, timed_search_prepares_the_check_first) {
  const char *names[] = {"ok_0.5"};
  for (int c = 0; c < 3; c++) {
    fake_prop fp = {.names = names, .nnames = 1};
    fake_eval fe = {.ref_ms = 1.0, .timed = c < 2, .evaluations_at_prepare = -1};
    mk_search_config cfg;
    config(&cfg);
    cfg.try_cuda_graph = c == 0;
    outcome o = {0};
    mk_graph *g = NULL;
    MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
    MK_REQUIRE(o.res != NULL);
    MK_CHECK_INT(fe.prepares, ==, c < 2 ? 1 : 0);
    if (c < 2) {
      MK_CHECK_INT(fe.evaluations_at_prepare, ==, 0);
      MK_CHECK(fe.prepared_graph == (c == 0));
    }
    mk_search_result_free(o.res);
    mk_graph_free(g);
  }
}

/* Merges are judged by time: every one tried is counted, those kept too. */
MK_TEST(search, merges_tried_and_kept_are_counted) {
  const char *names[] = {"ok_0.5"};
  fake_prop fp = {.names = names, .nnames = 1};
  fake_eval fe = {.ref_ms = 4.0, .timed = true};
  mk_search_config cfg;
  config(&cfg);
  cfg.try_merge = true;
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  /* each merged pair runs at 0.5 ms where apart they took 1.0 ms: every merge tried wins */
  MK_CHECK(o.res->merges_tried >= 1);
  MK_CHECK_INT(o.res->merges, ==, o.res->merges_tried);
  MK_CHECK_INT(o.res->splits_tried, ==, 0);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* ---- the CPU plan ------------------------------------------------------------ */

MK_TEST(search, cpu_plan_shares_the_budget) {
  mk_cpu_plan p = {.budget_s = 150, .subkernels_left = 1};
  /* One subkernel: half for its candidate, half for the check's run of its kernel. */
  MK_CHECK(fabs(mk_cpu_plan_candidate_limit(&p) - 75) < 1e-9);
  p.subkernels_left = 4;
  MK_CHECK(fabs(mk_cpu_plan_candidate_limit(&p) - 30) < 1e-9);
  p.job_cap_s = 20; /* the configured job limit is the ceiling */
  MK_CHECK(fabs(mk_cpu_plan_candidate_limit(&p) - 20) < 1e-9);
  /* What is spent and kept for the check is not shared out again. */
  p = (mk_cpu_plan){.budget_s = 150, .spent_s = 60, .base_s = 10, .reserve_s = 20, .subkernels_left = 2};
  MK_CHECK(fabs(mk_cpu_plan_candidate_limit(&p) - 20) < 1e-9);
  p.spent_s = 100; /* 20 s left for 3 parts: the least a job needs, while that and its check fit */
  MK_CHECK(fabs(mk_cpu_plan_candidate_limit(&p) - MK_CPU_PLAN_MIN_JOB_S) < 1e-9);
  p.spent_s = 105;
  MK_CHECK(mk_cpu_plan_candidate_limit(&p) == 0);
  /* After a job ran past 20 s, the next needs at least 30 s. */
  p = (mk_cpu_plan){.budget_s = 150, .spent_s = 60, .subkernels_left = 40, .floor_s = 30};
  MK_CHECK(fabs(mk_cpu_plan_candidate_limit(&p) - 30) < 1e-9);
  MK_CHECK(fabs(mk_cpu_plan_job_need(&p) - 30) < 1e-9);
  p.spent_s = 95;
  MK_CHECK(mk_cpu_plan_candidate_limit(&p) == 0);
  /* A kernel's share of the check: per call x copies x trials. */
  MK_CHECK(fabs(mk_cpu_plan_kernel_cost(0.5, 3, 5) - 7.5) < 1e-9);
  MK_CHECK(mk_cpu_plan_kernel_cost(0, 3, 5) == 0);
  p = (mk_cpu_plan){.budget_s = 150, .spent_s = 50, .base_s = 10, .reserve_s = 20};
  MK_CHECK(mk_cpu_plan_affords(&p, 70));
  MK_CHECK(!mk_cpu_plan_affords(&p, 71));
  /* The check gets the budget left, or half again its planned cost. */
  MK_CHECK(fabs(mk_cpu_plan_final_limit(&p) - 100) < 1e-9);
  p.spent_s = 140;
  MK_CHECK(fabs(mk_cpu_plan_final_limit(&p) - 45) < 1e-9);
  p.job_cap_s = 30;
  MK_CHECK(fabs(mk_cpu_plan_final_limit(&p) - 30) < 1e-9);
  p = (mk_cpu_plan){.budget_s = 150, .spent_s = 150};
  MK_CHECK(fabs(mk_cpu_plan_final_limit(&p) - MK_CPU_PLAN_MIN_JOB_S) < 1e-9);
  /* ETA: the mean job for each planned candidate, then the check. */
  p = (mk_cpu_plan){.budget_s = 150, .base_s = 4, .reserve_s = 6};
  MK_CHECK(fabs(mk_cpu_plan_eta(&p, 5, 3) - 25) < 1e-9);
  MK_CHECK(mk_cpu_plan_eta(&p, 0, 3) < 0);
  /* The check without kernels runs at least that much of the program twice per trial. */
  MK_CHECK(fabs(mk_cpu_plan_check_base(0.5, 5) - 5) < 1e-9);
  MK_CHECK(mk_cpu_plan_check_base(0, 5) == 0);
}

/* An untimed evaluator whose verdicts and costs come from the candidate's
 * name: "ok*" verified, "bad*" mismatch, "slow*" runs past its limit, "big*"
 * verified but 100 s a call. Every job costs `cost_s`; limits are recorded. */
typedef struct cpu_eval {
  int evaluations, compositions, references;
  double cost_s, run_s, prefix_s;
  double limit;              /* the last limit set */
  double limits[32];         /* the limit each evaluation ran under */
  double composition_limit;
} cpu_eval;

static void cpu_eval_limit(void *self, double seconds) { ((cpu_eval *)self)->limit = seconds; }

static int cpu_evaluate(void *self, const mk_graph *g, const mk_subkernel *sk, const mk_candidate *c,
                        mk_eval_cb cb, void *data) {
  cpu_eval *ce = self;
  mk_eval_result r = {.status = MK_EVAL_OK, .time_ms = -1, .ref_eager_ms = -1, .ref_compile_ms = -1,
                      .trials = 5, .trials_passed = 5, .cost_s = ce->cost_s, .run_s = ce->run_s,
                      .prefix_s = ce->prefix_s};
  if (strcmp(c->origin, "reference") == 0) { /* a fresh search checks its references first */
    ce->references++;
    cb(data, &r);
    return 0;
  }
  if (ce->evaluations < 32) ce->limits[ce->evaluations] = ce->limit;
  ce->evaluations++;
  if (strncmp(c->name, "bad", 3) == 0) {
    r.status = MK_EVAL_MISMATCH;
    r.trials_passed = 0;
    snprintf(r.reason, sizeof r.reason, "max abs error 1.0 at [0, 0]");
  } else if (strncmp(c->name, "slow", 4) == 0) {
    r.status = MK_EVAL_TIMEOUT;
    r.trials_passed = r.trials = 0;
    r.cost_s = ce->limit;
    snprintf(r.reason, sizeof r.reason, "killed after `verify_subkernel` ran past %.1f s", ce->limit);
  } else if (strncmp(c->name, "big", 3) == 0) {
    r.run_s = 100;
  }
  cb(data, &r);
  return 0;
}

static int cpu_composition(void *self, const char *path, mk_eval_cb cb, void *data) {
  cpu_eval *ce = self;
  ce->compositions++;
  ce->composition_limit = ce->limit;
  mk_eval_result r = {.status = MK_EVAL_OK, .time_ms = -1, .trials = 5, .trials_passed = 5};
  cb(data, &r);
  return 0;
}

static int run_cpu_search(fake_prop *fp, cpu_eval *ce, mk_search_config *cfg, outcome *o,
                          mk_graph **gout) {
  mk_errmsg err = {{0}};
  mk_graph *g = NULL;
  if (mk_graph_from_json(GRAPH_JSON, strlen(GRAPH_JSON), &g, &err)) return -1;
  mk_partition p = {0};
  if (mk_decompose_initial(g, &p, &err)) {
    mk_graph_free(g);
    return -1;
  }
  mk_proposer prop = {.self = fp, .name = "fake", .propose = fake_propose};
  mk_evaluator ev = {.self = ce, .evaluate = cpu_evaluate, .evaluate_composition = cpu_composition,
                     .limit = cpu_eval_limit, .timed = false};
  int rc = mk_search_start(g, &p, SOURCE, cfg, prop, ev, NULL, on_done, o, NULL, &err);
  mk_partition_free(&p);
  *gout = g;
  return rc;
}

static int generated_evaluations(const mk_search_result *r) {
  int n = 0;
  for (int i = 0; i < r->partition.nsubkernels; i++) n += r->states[i].nvariants - 1;
  return n;
}

/* The plan evaluates in proposer order, at most depth + 1 candidates per
 * subkernel, and the first verified one is chosen (an untimed choice has
 * nothing else to go by). */
MK_TEST(search, cpu_plan_evaluates_in_order_within_depth) {
  const char *names[] = {"bad_1", "ok_2", "ok_3", "ok_4"};
  fake_prop fp = {.names = names, .nnames = 4};
  cpu_eval ce = {.cost_s = 2, .run_s = 0.1};
  mk_search_config cfg;
  config(&cfg);
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_cpu_search(&fp, &ce, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  int n = o.res->partition.nsubkernels;
  MK_REQUIRE(n >= 2);
  MK_CHECK_INT(o.status, ==, 0);
  for (int i = 0; i < n; i++) {
    const mk_subkernel_state *st = &o.res->states[i];
    MK_CHECK_INT(st->nvariants, ==, 1 + cfg.depth + 1); /* the reference, bad_1, ok_2, ok_3 */
    MK_CHECK_STR(st->variants[st->chosen].cand.name, "ok_2");
    MK_CHECK_STR(st->plan_reason, "");
  }
  MK_CHECK_INT(o.res->proposals, ==, (cfg.depth + 1) * n);
  /* Every job ran under a limit: the budget's share, never above it. */
  for (int i = 0; i < ce.evaluations && i < 32; i++) MK_CHECK(ce.limits[i] > 0 && ce.limits[i] <= 75);
  MK_CHECK(ce.composition_limit > 0);
  mk_search_result_free(o.res);
  mk_graph_free(g);

  /* Once a subkernel has its verified kernel, it gets more only from a full
   * share: here its kernel's 17.5 s in the check (3.5 s x 5 trials) leave
   * 17.5 s for two parts, under the 10 s a job needs, so it stops at ok_2. */
  cpu_eval ce2 = {.cost_s = 1, .run_s = 3.5};
  config(&cfg);
  cfg.cpu_seconds = 35;
  outcome o2 = {0};
  MK_REQUIRE(run_cpu_search(&fp, &ce2, &cfg, &o2, &g) == 0);
  MK_REQUIRE(o2.res != NULL);
  MK_CHECK_INT(o2.res->states[0].nvariants, ==, 3);
  MK_CHECK_STR(o2.res->states[0].variants[o2.res->states[0].chosen].cand.name, "ok_2");
  mk_search_result_free(o2.res);
  mk_graph_free(g);
}

/* A small --budget is shared between the subkernels as the beam shares it:
 * the first does not take it all. */
MK_TEST(search, cpu_plan_shares_the_proposal_budget) {
  const char *names[] = {"bad_1", "ok_2", "ok_3"};
  fake_prop fp = {.names = names, .nnames = 3};
  cpu_eval ce = {.cost_s = 1, .run_s = 0.1};
  mk_search_config cfg;
  config(&cfg);
  cfg.beam_width = 1;
  cfg.max_proposals = 2;
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_cpu_search(&fp, &ce, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL && o.res->partition.nsubkernels == 2);
  for (int i = 0; i < 2; i++) MK_CHECK_INT(o.res->states[i].proposals, ==, 1);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* A candidate that runs past its limit ends its subkernel (the next would
 * cost as much), and the verdict says which limit it was. */
MK_TEST(search, cpu_plan_timeout_is_the_reason) {
  const char *names[] = {"slow_1", "ok_2"};
  fake_prop fp = {.names = names, .nnames = 2};
  cpu_eval ce = {.cost_s = 1, .run_s = 0.1};
  mk_search_config cfg;
  config(&cfg);
  cfg.cpu_seconds = 60;
  cfg.job_timeout_s = 300;
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_cpu_search(&fp, &ce, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  const mk_subkernel_state *st = &o.res->states[0];
  MK_CHECK_INT(st->nvariants, ==, 2);
  MK_CHECK_INT(st->chosen, ==, 0);
  MK_CHECK_INT(st->variants[1].result.status, ==, MK_EVAL_TIMEOUT);
  MK_CHECK(strstr(st->variants[1].result.reason, "ran past") != NULL);
  MK_CHECK(strstr(st->variants[1].result.reason, "the CPU plan's limit for this candidate") != NULL);
  MK_CHECK(strstr(st->variants[1].result.reason, "of a 60 s budget") != NULL);
  /* The first job had the whole budget's share: 60 s over (subkernels + 1). */
  int n = o.res->partition.nsubkernels;
  MK_CHECK(fabs(ce.limits[0] - 60.0 / (n + 1)) < 1.0);
  /* The next subkernel (a longer prefix to replay) would need at least half
   * again that long (30 s): with it and its check's share more than is left,
   * it is not started, and says so. */
  MK_REQUIRE(n == 2);
  MK_CHECK_INT(ce.evaluations, ==, 1);
  MK_CHECK(strstr(o.res->states[1].plan_reason, "cannot pay for another job of the 30 s one needs here") != NULL);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* A verified kernel the whole-program check cannot afford stays out, and so
 * does every subkernel once the budget is spent: each says so. */
MK_TEST(search, cpu_plan_keeps_pytorch_where_the_budget_ends) {
  const char *names[] = {"big_1"};
  fake_prop fp = {.names = names, .nnames = 1};
  cpu_eval ce = {.cost_s = 1};
  mk_search_config cfg;
  config(&cfg);
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_cpu_search(&fp, &ce, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  for (int i = 0; i < o.res->partition.nsubkernels; i++) {
    const mk_subkernel_state *st = &o.res->states[i];
    MK_CHECK_INT(st->chosen, ==, 0);
    MK_CHECK(st->planned_out);
    /* 100 s a call, in 5 trials and the check's one at a smaller batch */
    MK_CHECK(strstr(st->plan_reason, "would add ~600 s (1 copy x 6 trials)") != NULL);
    MK_CHECK(strstr(st->plan_reason, "past the CPU budget of 150 s") != NULL);
  }
  mk_search_result_free(o.res);
  mk_graph_free(g);

  /* A program whose eager run alone (20 s a trial through the first subkernel,
   * twice in each of 5 trials and the check's sixth) outgrows the budget keeps
   * PyTorch, and says so. */
  const char *one[] = {"ok_1"};
  fake_prop fp3 = {.names = one, .nnames = 1};
  cpu_eval ce3 = {.cost_s = 1, .run_s = 0.01, .prefix_s = 20};
  config(&cfg);
  outcome o3 = {0};
  MK_REQUIRE(run_cpu_search(&fp3, &ce3, &cfg, &o3, &g) == 0);
  MK_REQUIRE(o3.res != NULL);
  MK_CHECK_INT(o3.res->states[0].chosen, ==, 0);
  MK_CHECK(strstr(o3.res->states[0].plan_reason, "which already needs ~240 s") != NULL);
  mk_search_result_free(o3.res);
  mk_graph_free(g);

  /* 15 s cannot pay for one useful job: nothing is tried, and the reason says why. */
  const char *oks[] = {"ok_1"};
  fake_prop fp2 = {.names = oks, .nnames = 1};
  cpu_eval ce2 = {.cost_s = 1};
  config(&cfg);
  cfg.cpu_seconds = 15;
  outcome o2 = {0};
  MK_REQUIRE(run_cpu_search(&fp2, &ce2, &cfg, &o2, &g) == 0);
  MK_REQUIRE(o2.res != NULL);
  MK_CHECK_INT(ce2.evaluations, ==, 0);
  MK_CHECK_INT(generated_evaluations(o2.res), ==, 0);
  for (int i = 0; i < o2.res->partition.nsubkernels; i++)
    MK_CHECK(strstr(o2.res->states[i].plan_reason, "not tried: what is left of the CPU budget of 15 s") != NULL);
  MK_CHECK_INT(ce2.compositions, ==, 1); /* the plain program is still verified */
  mk_search_result_free(o2.res);
  mk_graph_free(g);
}

/* Under a wall-time budget the first subkernels in budget order do not spend
 * it all on their beams: each gets a slice of three quarters of it, so every
 * subkernel's candidates are evaluated (before the slices, the first one's
 * OPTIMISE steps ran until the budget was gone and the rest kept PyTorch). */
MK_TEST(search, wall_budget_is_shared_by_the_subkernels) {
  const char *names[] = {"ok_1.0", "ok_1.5"};
  fake_prop fp = {.names = names, .nnames = 2, .fresh = true};
  fake_eval fe = {.ref_ms = 4.0, .timed = true, .delay_s = 0.05};
  mk_search_config cfg;
  config(&cfg);
  cfg.gpu_seconds = 1.2;
  cfg.depth = 12;
  cfg.beam_width = 2;
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  MK_REQUIRE(o.res != NULL);
  MK_REQUIRE(o.res->partition.nsubkernels >= 2);
  for (int i = 0; i < o.res->partition.nsubkernels; i++) {
    MK_CHECK(o.res->states[i].proposals > 0);
    MK_CHECK(o.res->states[i].chosen > 0); /* a candidate, faster than the reference */
  }
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* The slice ends the NEW step too: a subkernel's proposals are evaluated a
 * few at a time, and those left when its share of the wall budget is spent
 * are dropped (logged), so the next subkernel still gets candidates. */
MK_TEST(search, wall_slice_stops_the_first_proposals_too) {
  const char *names[] = {"ok_1.0", "ok_1.1", "ok_1.2", "ok_1.3", "ok_1.4", "ok_1.5", "ok_1.6", "ok_1.7"};
  fake_prop fp = {.names = names, .nnames = 8};
  fake_eval fe = {.ref_ms = 4.0, .timed = true, .delay_s = 0.1};
  mk_search_config cfg;
  config(&cfg);
  cfg.gpu_seconds = 1.0;
  cfg.depth = 0;
  char path[] = "/tmp/mk_search_slog_XXXXXX";
  int fd = mkstemp(path);
  MK_REQUIRE(fd >= 0);
  close(fd);
  cfg.log = fopen(path, "w");
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
  fclose(cfg.log);
  MK_REQUIRE(o.res != NULL);
  MK_REQUIRE(o.res->partition.nsubkernels == 2);
  for (int i = 0; i < 2; i++) {
    MK_CHECK_INT(o.res->states[i].proposals, >, 0);
    MK_CHECK_INT(o.res->states[i].proposals, <, 8);
  }
  char *log = NULL;
  size_t n = 0;
  MK_REQUIRE(mk_read_file(path, 1 << 20, &log, &n) == 0);
  MK_CHECK(strstr(log, "\"event\":\"not_evaluated\"") != NULL);
  free(log);
  remove(path);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* Neighbours whose union the proposer fuses into one kernel are merged before
 * the beams (the merge phase comes too late under a wall budget); merges off,
 * nothing is merged. */
MK_TEST(search, fused_neighbours_merge_before_the_beams) {
  const char *names[] = {"ok_1.0"};
  for (int merge = 0; merge < 2; merge++) {
    fake_prop fp = {.names = names, .nnames = 1, .fuse = true, .fuse_node = 0};
    fake_eval fe = {.ref_ms = 4.0, .timed = true};
    mk_search_config cfg;
    config(&cfg);
    cfg.try_merge = merge;
    outcome o = {0};
    mk_graph *g = NULL;
    MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
    MK_REQUIRE(o.res != NULL);
    if (merge) {
      MK_CHECK_INT(o.res->fused, ==, 1);
      MK_CHECK_INT(o.res->partition.nsubkernels, ==, 1); /* relu + linear/mul/sum */
      MK_CHECK_INT(o.res->partition.subkernels[0].nnodes, ==, 4);
      MK_CHECK_INT(o.res->states[0].chosen, >, 0);
    } else {
      MK_CHECK_INT(o.res->fused, ==, 0);
      MK_CHECK_INT(fp.fuses_asked, ==, 0);
      MK_CHECK_INT(o.res->partition.nsubkernels, ==, 2);
    }
    mk_search_result_free(o.res);
    mk_graph_free(g);
  }
}

/* A subkernel and its neighbour that do not fuse are tried with the next
 * ones too (ShuffleNet: a convolution and a counter update between two norms
 * whose pair fuses): relu, linear and mul fuse only together, so the first
 * merge takes three subkernels, and the sum stays apart. */
MK_TEST(search, premerge_reaches_past_neighbours_that_do_not_fuse_alone) {
  const char *names[] = {"ok_1.0"};
  fake_prop fp = {.names = names, .nnames = 1, .fuse = true, .fuse_node = 0, .fuse_nodes = 3};
  fake_eval fe = {.ref_ms = 4.0, .timed = true};
  mk_search_config cfg;
  config(&cfg);
  cfg.try_merge = true;
  char path[] = "/tmp/mk_search_plog_XXXXXX";
  int fd = mkstemp(path);
  MK_REQUIRE(fd >= 0);
  close(fd);
  cfg.log = fopen(path, "w");
  outcome o = {0};
  mk_graph *g = NULL;
  MK_REQUIRE(run_search_in(&fp, &fe, &cfg, &o, &g, true) == 0);
  fclose(cfg.log);
  MK_REQUIRE(o.res != NULL);
  MK_CHECK_INT(o.res->fused, ==, 2);
  char *log = NULL;
  size_t n = 0;
  MK_REQUIRE(mk_read_file(path, 1 << 20, &log, &n) == 0);
  const char *ev = strstr(log, "\"event\":\"fused\"");
  MK_CHECK(ev != NULL && strstr(ev + 1, "\"event\":\"fused\"") == NULL); /* one premerge */
  MK_CHECK(strstr(log, "\"between\":1") != NULL);                     /* past the linear */
  free(log);
  remove(path);
  mk_search_result_free(o.res);
  mk_graph_free(g);
}

/* On a GPU an unset --time-budget is the device's budget (gpu_seconds): past it no
 * new candidate is proposed and the run ends with what it has, verified; an explicit
 * --time-budget replaces it, and 0 means none. */
MK_TEST(search, gpu_wall_budget_stops_proposing) {
  const char *names[] = {"ok_0.5", "ok_2.0"};
  for (int mode = 0; mode < 3; mode++) {
    fake_prop fp = {.names = names, .nnames = 2};
    fake_eval fe = {.ref_ms = 4.0, .timed = true};
    mk_search_config cfg;
    config(&cfg);
    MK_CHECK(cfg.max_seconds < 0 && cfg.gpu_seconds == 150); /* the defaults */
    if (mode == 0) cfg.gpu_seconds = 1e-9;                  /* spent before the first proposal */
    if (mode == 1) cfg.gpu_seconds = 1e-9, cfg.max_seconds = 0; /* explicit: no budget */
    if (mode == 2) cfg.gpu_seconds = 0, cfg.max_seconds = 1e-9; /* explicit budget wins */
    outcome o = {0};
    mk_graph *g = NULL;
    MK_REQUIRE(run_search(&fp, &fe, &cfg, &o, &g) == 0);
    MK_CHECK_INT(o.done, ==, 1);
    MK_REQUIRE(o.res != NULL);
    if (mode == 1) {
      MK_CHECK(o.res->proposals > 0);
    } else {
      MK_CHECK_INT(o.res->proposals, ==, 0);
      MK_CHECK(o.res->modelnew_path != NULL); /* the reference composition, still written */
    }
    mk_search_result_free(o.res);
    mk_graph_free(g);
  }
}
