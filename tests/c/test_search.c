/* test_search.c — the search state machine with a fake proposer and a fake
 * evaluator: choices, budget, reverts, split/merge decisions, run log. */
#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_search.h"
#include "mk_test.h"

#include <math.h>
#include <stdlib.h>
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
  const char *const *names;
  int nnames;
} fake_prop;

static int fake_propose(void *self, const mk_propose_request *req, mk_propose_cb cb, void *data) {
  fake_prop *fp = self;
  fp->calls++;
  mk_candidate_list *l = calloc(1, sizeof *l);
  if (req->mode == MK_PROPOSE_NEW) {
    for (int i = 0; i < fp->nnames && i < req->max_candidates; i++) {
      mk_candidate c = {.name = mk_strdup(fp->names[i]), .origin = mk_strdup("fake"),
                        .source = mk_strdup("def run(*a):\n    return a[0]\n")};
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
  double ref_ms;
  bool timed;
} fake_eval;

static int fake_evaluate(void *self, const mk_graph *g, const mk_subkernel *sk,
                         const mk_candidate *c, mk_eval_cb cb, void *data) {
  fake_eval *fe = self;
  fe->evaluations++;
  mk_eval_result r = {.status = MK_EVAL_OK, .time_ms = -1, .ref_eager_ms = -1, .ref_compile_ms = -1};
  if (strcmp(c->origin, "reference") == 0) {
    r.time_ms = fe->timed ? fe->ref_ms : -1;
  } else if (strncmp(c->name, "bad", 3) == 0) {
    r.status = MK_EVAL_MISMATCH;
    snprintf(r.reason, sizeof r.reason, "max abs error 1.0 at [0, 0]");
  } else {
    r.time_ms = fe->timed ? atof(strchr(c->name, '_') + 1) : -1;
  }
  r.trials = 5;
  r.trials_passed = r.status == MK_EVAL_OK ? 5 : 0;
  cb(data, &r);
  return 0;
}

static int fake_evaluate_composition(void *self, const char *path, mk_eval_cb cb, void *data) {
  fake_eval *fe = self;
  mk_eval_result r = {.status = MK_EVAL_OK, .time_ms = 1.0};
  if (fe->compositions++ < fe->fail_compositions) {
    r.status = MK_EVAL_MISMATCH;
    snprintf(r.reason, sizeof r.reason, "composition differs");
  }
  MK_CHECK(access(path, R_OK) == 0);
  cb(data, &r);
  return 0;
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

static int run_search(fake_prop *fp, fake_eval *fe, mk_search_config *cfg, outcome *o,
                      mk_graph **gout) {
  mk_errmsg err = {{0}};
  mk_graph *g = NULL;
  if (mk_graph_from_json(GRAPH_JSON, strlen(GRAPH_JSON), &g, &err)) {
    fprintf(stderr, "graph: %s\n", err.text);
    return -1;
  }
  mk_partition p = {0};
  if (mk_decompose_initial(g, &p, &err)) {
    mk_graph_free(g);
    return -1;
  }
  mk_proposer prop = {.self = fp, .name = "fake", .propose = fake_propose};
  mk_evaluator ev = {.self = fe, .evaluate = fake_evaluate,
                     .evaluate_composition = fake_evaluate_composition, .timed = fe->timed};
  int rc = mk_search_start(g, &p, SOURCE, cfg, prop, ev, NULL, on_done, o, NULL, &err);
  mk_partition_free(&p);
  *gout = g;
  return rc;
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
  mk_search_result_free(o.res);
  mk_graph_free(g);
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
  MK_CHECK_INT(fe.compositions, ==, 2);
  MK_CHECK(o.res->reverted > 0);
  for (int i = 0; i < o.res->partition.nsubkernels; i++)
    MK_CHECK_INT(o.res->states[i].chosen, ==, 0);
  mk_search_result_free(o.res);
  mk_graph_free(g);
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
