/* test_llm_agents.c — the agents end to end against the scripted fake
 * provider: prompts rendered from the IR, candidates and decisions parsed
 * and validated, tokens split and recorded, unusable replies contained. */
#include "../llm/fake_server.h"
#include "mk_backend.h"
#include "mk_session.h"
#include "mk_verify.h"
#include "support.h"

#include <stdio.h>

/* A three-node graph: linear -> relu -> mul by 2.0, in a two-subkernel partition. */
typedef struct gfix {
  mk_graph g;
  mk_value values[6];
  mk_node nodes[3];
  int in0[3], out0[1], in1[1], out1[1], in2[1], out2[1];
  mk_subkernel sks[2];
  int sk0_nodes[1], sk1_nodes[2], sk0_in[3], sk0_out[1], sk1_in[1], sk1_out[1];
  mk_partition p;
} gfix;

static const char *MODULE =
    "import torch\n"
    "class Model(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.lin = torch.nn.Linear(8, 16)\n"
    "    def forward(self, x):\n"
    "        y = self.lin(x)\n"
    "        return torch.relu(y) * 2.0\n";

static void value(mk_value *v, int id, mk_value_kind k, const char *name, int index, int producer, int r0, int r1) {
  memset(v, 0, sizeof *v);
  v->id = id;
  v->kind = k;
  v->dtype = MK_DTYPE_F32;
  v->name = (char *)name;
  v->index = index;
  v->producer = producer;
  v->rank = r1 ? 2 : 1;
  v->shape[0] = r0;
  v->shape[1] = r1;
}

static void gfix_init(gfix *f) {
  memset(f, 0, sizeof *f);
  value(&f->values[0], 0, MK_VALUE_INPUT, NULL, 0, -1, 4, 8);
  value(&f->values[1], 1, MK_VALUE_PARAM, "lin.weight", -1, -1, 16, 8);
  value(&f->values[2], 2, MK_VALUE_PARAM, "lin.bias", -1, -1, 16, 0);
  value(&f->values[3], 3, MK_VALUE_NODE, NULL, -1, 0, 4, 16);
  value(&f->values[4], 4, MK_VALUE_NODE, NULL, -1, 1, 4, 16);
  value(&f->values[5], 5, MK_VALUE_NODE, NULL, -1, 2, 4, 16);
  const char *ops[3] = {"torch.nn.functional.linear", "torch.relu", "torch.Tensor.__mul__"};
  const char *shorts[3] = {"linear", "relu", "mul"};
  const char *args[3] = {"[{\"t\":0},{\"t\":1},{\"t\":2}]", "[{\"t\":3}]", "[{\"t\":4},{\"float\":2.0}]"};
  int lines[3] = {7, 8, 8};
  f->in0[0] = 0, f->in0[1] = 1, f->in0[2] = 2, f->out0[0] = 3;
  f->in1[0] = 3, f->out1[0] = 4, f->in2[0] = 4, f->out2[0] = 5;
  int *ins[3] = {f->in0, f->in1, f->in2}, nins[3] = {3, 1, 1};
  int *outs[3] = {f->out0, f->out1, f->out2};
  for (int i = 0; i < 3; i++) {
    mk_node *n = &f->nodes[i];
    n->id = i;
    n->op = (char *)ops[i];
    n->short_name = (char *)shorts[i];
    n->args = cJSON_Parse(args[i]);
    n->kwargs = cJSON_CreateObject();
    n->inputs = ins[i];
    n->ninputs = nins[i];
    n->outputs = outs[i];
    n->noutputs = 1;
    n->span.line = lines[i];
    n->replayable = true;
  }
  f->g.values = f->values;
  f->g.nvalues = 6;
  f->g.nodes = f->nodes;
  f->g.nnodes = 3;
  f->sk0_nodes[0] = 0;
  f->sk1_nodes[0] = 1, f->sk1_nodes[1] = 2;
  memcpy(f->sk0_in, f->in0, sizeof f->sk0_in);
  f->sk0_out[0] = 3, f->sk1_in[0] = 3, f->sk1_out[0] = 5;
  f->sks[0] = (mk_subkernel){.id = 0, .name = "linear", .nodes = f->sk0_nodes, .nnodes = 1, .inputs = f->sk0_in,
                             .ninputs = 3, .outputs = f->sk0_out, .noutputs = 1, .anchor = 0,
                             .first_line = 7, .last_line = 7};
  f->sks[1] = (mk_subkernel){.id = 1, .name = "relu_mul", .nodes = f->sk1_nodes, .nnodes = 2, .inputs = f->sk1_in,
                             .ninputs = 1, .outputs = f->sk1_out, .noutputs = 1, .anchor = -1,
                             .first_line = 8, .last_line = 8};
  f->p.subkernels = f->sks;
  f->p.nsubkernels = 2;
}

static void gfix_free(gfix *f) {
  for (int i = 0; i < 3; i++) {
    cJSON_Delete(f->nodes[i].args);
    cJSON_Delete(f->nodes[i].kwargs);
  }
}

static void cands_free(mk_candidate_list *l) {
  for (int i = 0; i < l->n; i++) {
    free(l->items[i].name);
    free(l->items[i].source);
    free(l->items[i].origin);
    free(l->items[i].notes);
  }
  free(l->items);
  memset(l, 0, sizeof *l);
}

typedef struct pgot {
  bool done;
  int status;
  mk_candidate_list c;
  char err[MK_ERRMSG_MAX];
} pgot;

static void on_proposed(void *data, int status, mk_candidate_list *cands, const mk_errmsg *err) {
  pgot *g = data;
  g->done = true;
  g->status = status;
  g->c = *cands; /* take ownership */
  memset(cands, 0, sizeof *cands);
  if (err) mk_strlcpy(g->err, err->text, sizeof g->err);
}

/* Builds a JSON script with one reply whose text is `text` (escaped). */
static char *script1(const char *text, int tin, int tout) {
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_puts(&b, "{\"replies\":[{\"text\":");
  mk_buf_json_str(&b, text);
  mk_buf_printf(&b, ",\"usage\":{\"in\":%d,\"out\":%d},\"chunk\":64}]}", tin, tout);
  char *s = mk_buf_steal(&b, NULL);
  mk_buf_free(&b);
  return s;
}

typedef struct afx {
  fake_llm f;
  uv_loop_t loop;
  mk_llm_config cfg;
  mk_llm *llm;
  gfix gf;
} afx;

static bool afx_open(afx *x, const char *script, mk_llm_provider p) {
  memset(x, 0, sizeof *x);
  gfix_init(&x->gf);
  if (fake_start(&x->f, script)) {
    mk_test_skip("cannot start tests/llm/fake_llm.py");
    return false;
  }
  uv_loop_init(&x->loop);
  fake_config(&x->cfg, &x->f, p);
  mk_errmsg err;
  if (mk_llm_new(&x->loop, &x->cfg, &x->llm, &err)) {
    MK_CHECK_STR(err.text, "");
    return false;
  }
  return true;
}

static void afx_close(afx *x) {
  if (x->llm) close_and_drain(&x->loop, x->llm);
  mk_llm_config_free(&x->cfg);
  fake_stop(&x->f);
  gfix_free(&x->gf);
}

/* The user prompt the fake server received in request i. */
static char *sent_prompt(afx *x, int i, const char *field) {
  cJSON *log = fake_log(&x->f);
  cJSON *b = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(log, "requests"), i), "body");
  cJSON *msgs = cJSON_GetObjectItem(b, "messages");
  cJSON *m = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
  const cJSON *v = field ? cJSON_GetObjectItem(b, field) : cJSON_GetObjectItem(m, "content");
  char *s = mk_strdup(cJSON_IsString(v) ? v->valuestring : "");
  cJSON_Delete(log);
  return s;
}

/* The system prompt of request i, in either wire format (Anthropic's
 * "system" field, OpenAI's first message). */
static char *sent_system(afx *x, int i) {
  cJSON *log = fake_log(&x->f);
  cJSON *b = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(log, "requests"), i), "body");
  const cJSON *v = cJSON_GetObjectItem(b, "system");
  const cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItem(b, "messages"), 0);
  if (!cJSON_IsString(v) && cJSON_IsString(cJSON_GetObjectItem(m0, "role")) &&
      strcmp(cJSON_GetObjectItem(m0, "role")->valuestring, "system") == 0)
    v = cJSON_GetObjectItem(m0, "content");
  char *s = mk_strdup(cJSON_IsString(v) ? v->valuestring : "");
  cJSON_Delete(log);
  return s;
}

static const char *TWO_VARIANTS =
    "variant: fused_relu_mul_b1024\nnotes: one pass, 1024 per block\n"
    "```python\nimport torch\nimport triton\nimport triton.language as tl\n\n"
    "@triton.jit\ndef _k(x, y, n, B: tl.constexpr):\n    i = tl.program_id(0) * B + tl.arange(0, B)\n"
    "    m = i < n\n    tl.store(y + i, tl.maximum(tl.load(x + i, mask=m), 0.0) * 2.0, mask=m)\n\n"
    "def run(v3):\n    y = torch.empty_like(v3)\n    n = v3.numel()\n"
    "    _k[(triton.cdiv(n, 1024),)](v3, y, n, B=1024)\n    return y\n```\n\n"
    "variant: fused_relu_mul_b256\n"
    "```python\n@triton.jit\ndef _k(x, y, n, B: tl.constexpr):\n    i = tl.program_id(0) * B + tl.arange(0, B)\n"
    "    m = i < n\n    tl.store(y + i, tl.maximum(tl.load(x + i, mask=m), 0.0) * 2.0, mask=m)\n\n"
    "def run(v3):\n    y = torch.empty_like(v3)\n    _k[(triton.cdiv(v3.numel(), 256),)](v3, y, v3.numel(), B=256)\n"
    "    return y\n```\n";

MK_TEST(llm_agents, kernel_writer_yields_candidates_with_tokens) {
  afx x;
  char *script = script1(TWO_VARIANTS, 101, 31);
  bool ok = afx_open(&x, script, MK_LLM_OPENAI);
  free(script);
  if (!ok) return afx_close(&x);
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[1], .mode = MK_PROPOSE_NEW,
                            .max_candidates = 4, .device = "NVIDIA H200"};
  mk_llm_propose_extra extra = {.module_source = MODULE};
  pgot g = {0};
  mk_errmsg err;
  mk_llm_req *h = NULL;
  MK_REQUIRE(mk_llm_propose_async(x.llm, &req, &extra, on_proposed, &g, &h, &err) == 0);
  MK_CHECK(h != NULL && !g.done);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_REQUIRE(g.c.n == 2);
  MK_CHECK_STR(g.c.items[0].name, "fused_relu_mul_b1024");
  MK_CHECK_STR(g.c.items[0].notes, "one pass, 1024 per block");
  MK_CHECK_STR(g.c.items[1].name, "fused_relu_mul_b256");
  MK_CHECK_STR(g.c.items[1].notes, "kernel_writer (prompt v2, Triton)");
  MK_CHECK_STR(g.c.items[0].origin, "llm:gpt-test");
  MK_CHECK(strncmp(g.c.items[1].source, "import torch\n", 13) == 0); /* imports added */
  /* the call's tokens (101 in, 31 out) are its candidates' cost, whole */
  MK_CHECK_INT((long)g.c.items[0].cost + (long)g.c.items[1].cost, ==, 132);
  MK_CHECK(g.c.items[0].cost == (double)(long)g.c.items[0].cost);
  /* The prompt carries the subkernel: signature, shapes, ops, source lines, device. */
  char *p = sent_prompt(&x, 0, NULL);
  if (getenv("MK_TEST_VERBOSE")) fprintf(stderr, "--- kernel_writer prompt ---\n%s\n", p);
  MK_CHECK(strstr(p, "`run(v3)`") != NULL);
  MK_CHECK(strstr(p, "- v3: intermediate float32 [4, 16], made by node 0") != NULL);
  MK_CHECK(strstr(p, "[node 1] v4 = torch.relu(v3)  # -> float32 [4, 16], line 8") != NULL);
  MK_CHECK(strstr(p, "[node 2] v5 = torch.Tensor.__mul__(v4, 2.0)") != NULL);
  MK_CHECK(strstr(p, "   8 |         return torch.relu(y) * 2.0") != NULL);
  MK_CHECK(strstr(p, "NVIDIA H200") != NULL);
  MK_CHECK(strstr(p, "up to 4 different variants") != NULL);
  MK_CHECK(strstr(p, "{{") == NULL);
  free(p);
  char *sys = sent_prompt(&x, 0, "model");
  MK_CHECK_STR(sys, "gpt-test");
  free(sys);
  mk_llm_usage u = mk_llm_ledger_sum(mk_llm_get_ledger(x.llm), "kernel_writer", "relu_mul");
  MK_CHECK_INT(u.calls, ==, 1);
  MK_CHECK_INT(u.tokens_in + u.tokens_out, ==, 132);
  cands_free(&g.c);
  afx_close(&x);
}

MK_TEST(llm_agents, unusable_reply_counts_against_budget_and_is_recorded) {
  afx x;
  char *script = script1("Sorry, I would rather describe the kernel in words.", 500, 40);
  bool ok = afx_open(&x, script, MK_LLM_ANTHROPIC);
  free(script);
  if (!ok) return afx_close(&x);
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[0], .mode = MK_PROPOSE_NEW,
                            .max_candidates = 2};
  pgot g = {0};
  mk_errmsg err;
  MK_REQUIRE(mk_llm_propose_async(x.llm, &req, NULL, on_proposed, &g, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, MK_EPARSE);
  MK_CHECK_INT(g.c.n, ==, 0);
  MK_CHECK(strstr(g.err, "unusable reply") != NULL);
  mk_llm_ledger *l = mk_llm_get_ledger(x.llm);
  MK_CHECK_INT(l->total.tokens_in, ==, 500);
  MK_CHECK_INT(l->total.failures, ==, 1);
  MK_CHECK_STR(l->calls[0].outcome, "unusable");
  MK_CHECK(strstr(l->calls[0].detail, "no code") != NULL);
  cands_free(&g.c);
  afx_close(&x);
}

MK_TEST(llm_agents, repairer_and_optimiser_see_parent_report_and_best) {
  mk_buf s;
  mk_buf_init(&s, 0);
  mk_buf_puts(&s, "{\"replies\":[");
  for (int i = 0; i < 2; i++) {
    mk_buf_puts(&s, i ? ",{\"text\":" : "{\"text\":");
    mk_buf_json_str(&s, "```python\nimport torch\ndef run(v3):\n    return torch.clamp_min(v3, 0) * 2.0\n```\n");
    mk_buf_puts(&s, "}");
  }
  mk_buf_puts(&s, "]}");
  afx x;
  bool ok = afx_open(&x, mk_buf_cstr(&s), MK_LLM_OPENAI);
  mk_buf_free(&s);
  if (!ok) return afx_close(&x);
  mk_candidate parent = {.name = "bad_variant", .source = "def run(v3):\n    return v3 * 3\n",
                         .origin = "llm:gpt-test"};
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[1], .mode = MK_PROPOSE_REPAIR,
                            .max_candidates = 1};
  mk_errmsg err;
  pgot g = {0};
  MK_CHECK_INT(mk_llm_propose_async(x.llm, &req, NULL, on_proposed, &g, NULL, &err), ==, MK_EINVAL);
  req.parent = &parent;
  req.report = "{\"ok\": false, \"kind\": \"mismatch\", \"max_abs_err\": 3.5}";
  MK_REQUIRE(mk_llm_propose_async(x.llm, &req, NULL, on_proposed, &g, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_CHECK_INT(g.c.n, ==, 1);
  char *p = sent_prompt(&x, 0, NULL);
  MK_CHECK(strstr(p, "The failing candidate `bad_variant`") != NULL);
  MK_CHECK(strstr(p, "return v3 * 3") != NULL);
  MK_CHECK(strstr(p, "\"max_abs_err\": 3.5") != NULL);
  MK_CHECK(strstr(p, "(no report") == NULL);
  free(p);
  cands_free(&g.c);

  /* Optimiser, through the blocking form, with the best variants so far. */
  const mk_candidate *best[1] = {&parent};
  const char *timings[1] = {"0.042 ms, 1.7x over PyTorch"};
  mk_llm_propose_extra extra = {.best = best, .nbest = 1, .best_timings = timings};
  req.mode = MK_PROPOSE_OPTIMISE;
  req.report = NULL;
  mk_candidate_list out = {0};
  MK_CHECK_INT(mk_llm_propose(x.llm, &req, &extra, &out, &err), ==, 0);
  MK_CHECK_INT(out.n, ==, 1);
  p = sent_prompt(&x, 1, NULL);
  MK_CHECK(strstr(p, "### bad_variant (0.042 ms, 1.7x over PyTorch)") != NULL);
  MK_CHECK(strstr(p, "verification and timing report") == NULL); /* no report: section dropped */
  free(p);
  MK_CHECK_INT(mk_llm_ledger_sum(mk_llm_get_ledger(x.llm), "repairer", NULL).calls, ==, 1);
  MK_CHECK_INT(mk_llm_ledger_sum(mk_llm_get_ledger(x.llm), "optimiser", NULL).calls, ==, 1);
  cands_free(&out);
  afx_close(&x);
}

MK_TEST(llm_agents, provider_failure_reaches_the_proposer_callback) {
  afx x;
  if (!afx_open(&x, "{\"replies\":[{\"status\":401}]}", MK_LLM_OPENAI)) return afx_close(&x);
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[1], .max_candidates = 1};
  mk_candidate_list out = {0};
  mk_errmsg err;
  MK_CHECK_INT(mk_llm_propose(x.llm, &req, NULL, &out, &err), ==, MK_EAUTH);
  MK_CHECK_INT(out.n, ==, 0);
  MK_CHECK(strstr(err.text, "HTTP 401") != NULL);
  afx_close(&x);
}

typedef struct dgot {
  bool done;
  int status;
  mk_llm_decisions d;
  mk_llm_groups gr;
  char err[MK_ERRMSG_MAX];
} dgot;

static void on_decided(void *data, int status, mk_llm_decisions *d, const mk_errmsg *err) {
  dgot *g = data;
  g->done = true;
  g->status = status;
  g->d = *d;
  memset(d, 0, sizeof *d);
  if (err) mk_strlcpy(g->err, err->text, sizeof g->err);
}

static void on_groups(void *data, int status, mk_llm_groups *gr, const mk_errmsg *err) {
  dgot *g = data;
  g->done = true;
  g->status = status;
  g->gr = *gr;
  memset(gr, 0, sizeof *gr);
  if (err) mk_strlcpy(g->err, err->text, sizeof g->err);
}

MK_TEST(llm_agents, splitter_and_fuser_decisions_are_validated) {
  mk_buf s;
  mk_buf_init(&s, 0);
  mk_buf_puts(&s, "{\"replies\":[{\"text\":");
  mk_buf_json_str(&s, "Here:\n```json\n{\"decisions\": [\n"
                      " {\"action\": \"split\", \"subkernel\": \"relu_mul\", \"at_node\": 2, \"reason\": \"mul is separate\"},\n"
                      " {\"action\": \"split\", \"subkernel\": 1, \"at_node\": 1, \"reason\": \"first node\"},\n"
                      " {\"action\": \"split\", \"subkernel\": 0, \"at_node\": 0},\n"
                      " {\"action\": \"merge\", \"subkernel\": 0}]}\n```");
  mk_buf_puts(&s, ",\"usage\":{\"in\":70,\"out\":20}},{\"text\":");
  mk_buf_json_str(&s, "{\"decisions\": [{\"action\": \"merge\", \"subkernel\": 0, \"reason\": \"epilogue\"},"
                      " {\"action\": \"merge\", \"subkernel\": 1, \"reason\": \"no successor\"}]}");
  mk_buf_puts(&s, "},{\"text\":\"no idea\"}]}");
  afx x;
  bool ok = afx_open(&x, mk_buf_cstr(&s), MK_LLM_ANTHROPIC);
  mk_buf_free(&s);
  if (!ok) return afx_close(&x);
  mk_errmsg err;
  dgot g = {0};
  MK_REQUIRE(mk_llm_decide_async(x.llm, MK_LLM_SPLIT, &x.gf.g, &x.gf.p, MODULE, "linear: 0.2 ms\nrelu_mul: 0.05 ms", MK_KBACKEND_TRITON,
                                 on_decided, &g, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_REQUIRE(g.d.n == 1);
  MK_CHECK(g.d.items[0].kind == MK_LLM_SPLIT);
  MK_CHECK_INT(g.d.items[0].subkernel, ==, 1);
  MK_CHECK_INT(g.d.items[0].at_node, ==, 2);
  MK_CHECK_STR(g.d.items[0].reason, "mul is separate");
  MK_CHECK(g.d.rejected && strstr(g.d.rejected, "decision 2") && strstr(g.d.rejected, "decision 3") &&
           strstr(g.d.rejected, "decision 4"));
  MK_CHECK_INT(g.d.tokens_in, ==, 70);
  char *p = sent_prompt(&x, 0, NULL);
  MK_CHECK(strstr(p, "[subkernel 1] relu_mul: nodes 1 2 (relu, mul), lines 8-8") != NULL);
  MK_CHECK(strstr(p, "relu_mul: 0.05 ms") != NULL);
  free(p);
  mk_llm_decisions_free(&g.d);

  dgot g2 = {0};
  MK_REQUIRE(mk_llm_decide_async(x.llm, MK_LLM_MERGE, &x.gf.g, &x.gf.p, NULL, NULL, MK_KBACKEND_TRITON, on_decided, &g2, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &g2.done, 20));
  MK_CHECK_INT(g2.status, ==, 0);
  MK_REQUIRE(g2.d.n == 1);
  MK_CHECK(g2.d.items[0].kind == MK_LLM_MERGE && g2.d.items[0].subkernel == 0 && g2.d.items[0].at_node == -1);
  mk_llm_decisions_free(&g2.d);

  dgot g3 = {0};
  MK_REQUIRE(mk_llm_decide_async(x.llm, MK_LLM_MERGE, &x.gf.g, &x.gf.p, NULL, NULL, MK_KBACKEND_TRITON, on_decided, &g3, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &g3.done, 20));
  MK_CHECK_INT(g3.status, ==, MK_EPARSE);
  MK_CHECK_STR(mk_llm_get_ledger(x.llm)->calls[2].outcome, "unusable");
  MK_CHECK_INT(mk_llm_ledger_sum(mk_llm_get_ledger(x.llm), "fuser", NULL).failures, ==, 1);
  mk_llm_decisions_free(&g3.d);
  afx_close(&x);
}

MK_TEST(llm_agents, decomposer_groups_cover_every_node_once) {
  mk_buf s;
  mk_buf_init(&s, 0);
  mk_buf_puts(&s, "{\"replies\":[{\"text\":");
  mk_buf_json_str(&s, "```json\n{\"subkernels\": [{\"name\": \"Relu Mul\", \"nodes\": [2, 1]},"
                      " {\"name\": \"gemm\", \"nodes\": [0]}]}\n```");
  mk_buf_puts(&s, "},{\"text\":");
  mk_buf_json_str(&s, "{\"subkernels\": [{\"name\": \"a\", \"nodes\": [0, 1]}, {\"name\": \"b\", \"nodes\": [1, 2]}]}");
  mk_buf_puts(&s, "},{\"text\":");
  mk_buf_json_str(&s, "{\"subkernels\": [{\"name\": \"a\", \"nodes\": [0, 1]}]}");
  mk_buf_puts(&s, "}]}");
  afx x;
  bool ok = afx_open(&x, mk_buf_cstr(&s), MK_LLM_OPENAI);
  mk_buf_free(&s);
  if (!ok) return afx_close(&x);
  mk_errmsg err;
  dgot g = {0};
  MK_REQUIRE(mk_llm_decompose_async(x.llm, &x.gf.g, MODULE, &x.gf.p, MK_KBACKEND_TRITON, on_groups, &g, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_REQUIRE(g.gr.n == 2);
  MK_CHECK_STR(g.gr.items[0].name, "gemm"); /* ordered by first node */
  MK_CHECK_STR(g.gr.items[1].name, "relu_mul");
  MK_CHECK(g.gr.items[1].nnodes == 2 && g.gr.items[1].nodes[0] == 1 && g.gr.items[1].nodes[1] == 2);
  char *p = sent_prompt(&x, 0, NULL);
  MK_CHECK(strstr(p, "self.lin = torch.nn.Linear(8, 16)") != NULL);
  MK_CHECK(strstr(p, "[node 0] v3 = torch.nn.functional.linear(x0, lin_weight, lin_bias)") != NULL);
  MK_CHECK(strstr(p, "- x0: forward input float32 [4, 8]") != NULL);
  free(p);
  mk_llm_groups_free(&g.gr);
  for (int i = 0; i < 2; i++) {
    dgot b = {0};
    MK_REQUIRE(mk_llm_decompose_async(x.llm, &x.gf.g, MODULE, NULL, MK_KBACKEND_TRITON, on_groups, &b, NULL, &err) == 0);
    MK_REQUIRE(run_until(&x.loop, &b.done, 20));
    MK_CHECK_INT(b.status, ==, MK_EPARSE);
    MK_CHECK(strstr(b.err, i == 0 ? "node 1 is in subkernels 0 and 1" : "node 2 is in no subkernel") != NULL);
    mk_llm_groups_free(&b.gr);
  }
  MK_CHECK_INT(mk_llm_get_ledger(x.llm)->total.failures, ==, 2);
  afx_close(&x);
}

MK_TEST(llm_agents, broken_prompt_template_is_reported_before_any_call) {
  afx x;
  if (!afx_open(&x, "{\"replies\":[]}", MK_LLM_OPENAI)) return afx_close(&x);
  char dir[] = "/tmp/mk_prompts_XXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/kernel_writer.txt", dir);
  FILE *f = fopen(path, "w");
  MK_REQUIRE(f != NULL);
  fputs("# version: 2\n=== user\nWrite {{subkernel_nmae}}\n", f);
  fclose(f);
  char contract[256];
  snprintf(contract, sizeof contract, "%s/triton_contract.txt", dir);
  MK_REQUIRE((f = fopen(contract, "w")) != NULL);
  fputs("# version: 1\n=== user\nDefine {{signature}}.\n", f);
  fclose(f);
  close_and_drain(&x.loop, x.llm);
  uv_loop_init(&x.loop);
  x.cfg.prompts_dir = mk_strdup(dir);
  mk_errmsg err;
  MK_REQUIRE(mk_llm_new(&x.loop, &x.cfg, &x.llm, &err) == 0);
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[1], .max_candidates = 1};
  pgot g = {0};
  MK_CHECK_INT(mk_llm_propose_async(x.llm, &req, NULL, on_proposed, &g, NULL, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "kernel_writer.txt") && strstr(err.text, "subkernel_nmae"));
  MK_CHECK_INT(mk_llm_get_ledger(x.llm)->ncalls, ==, 0);
  unlink(path);
  unlink(contract);
  rmdir(dir);
  afx_close(&x);
}

typedef struct sgot {
  bool done;
  int status;
  int n;
  long tokens;
  char err[MK_ERRMSG_MAX];
} sgot;

static void on_search_cb(void *data, int status, mk_candidate_list *cands, const char *err) {
  sgot *g = data;
  g->done = true;
  g->status = status;
  g->n = cands ? cands->n : 0;
  for (int i = 0; cands && i < cands->n; i++) g->tokens += (long)cands->items[i].cost;
  if (err) mk_strlcpy(g->err, err, sizeof g->err);
  if (cands) cands_free(cands); /* what the search does with mk_candidate_list_free */
}

MK_TEST(llm_agents, search_proposer_adapter) {
  mk_buf s;
  mk_buf_init(&s, 0);
  mk_buf_puts(&s, "{\"replies\":[{\"text\":");
  mk_buf_json_str(&s, TWO_VARIANTS);
  mk_buf_puts(&s, ",\"usage\":{\"in\":90,\"out\":30}},{\"text\":\"nothing useful\",\"usage\":{\"in\":9,\"out\":1}}]}");
  afx x;
  bool ok = afx_open(&x, mk_buf_cstr(&s), MK_LLM_OPENAI);
  mk_buf_free(&s);
  if (!ok) return afx_close(&x);
  char last[MK_ERRMSG_MAX] = "";
  mk_llm_proposer_ctx ctx = {.llm = x.llm, .module_source = MODULE, .last_error = last};
  mk_proposer pr = mk_llm_proposer(&ctx);
  MK_CHECK_STR(pr.name, "llm");
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[1], .max_candidates = 2};
  sgot g = {0}, g2 = {0};
  MK_REQUIRE(pr.propose(pr.self, &req, on_search_cb, &g) == 0);
  MK_REQUIRE(pr.propose(pr.self, &req, on_search_cb, &g2) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20) && run_until(&x.loop, &g2.done, 20));
  /* Concurrent requests: replies are consumed in arrival order, so match by outcome. */
  sgot *good = g.status == 0 ? &g : &g2, *bad = g.status == 0 ? &g2 : &g;
  MK_CHECK_INT(good->status, ==, 0);
  MK_CHECK_INT(good->n, ==, 2);
  MK_CHECK_INT(good->tokens, ==, 120);
  MK_CHECK_INT(bad->status, ==, MK_EPARSE);
  MK_CHECK(strstr(bad->err, "unusable reply") != NULL);
  MK_CHECK_INT(mk_llm_get_ledger(x.llm)->total.tokens_in, ==, 99);
  mk_llm_proposer_reset(&ctx);
  afx_close(&x);
}

/* Keeps the candidates the search would receive (sources and names). */
typedef struct kgot {
  bool done;
  int status;
  mk_candidate_list c;
  char err[MK_ERRMSG_MAX];
} kgot;

static void on_search_keep(void *data, int status, mk_candidate_list *cands, const char *err) {
  kgot *g = data;
  g->done = true;
  g->status = status;
  if (cands) {
    g->c = *cands;
    memset(cands, 0, sizeof *cands);
  }
  if (err) mk_strlcpy(g->err, err, sizeof g->err);
}

MK_TEST(llm_agents, adapter_gives_reference_and_fastest_variants_to_the_optimiser) {
  mk_buf s;
  mk_buf_init(&s, 0);
  mk_buf_puts(&s, "{\"replies\":[{\"text\":");
  mk_buf_json_str(&s, TWO_VARIANTS);
  mk_buf_puts(&s, "},{\"text\":\"no code\"},{\"text\":\"no code\"}]}");
  afx x;
  bool ok = afx_open(&x, mk_buf_cstr(&s), MK_LLM_OPENAI);
  mk_buf_free(&s);
  if (!ok) return afx_close(&x);
  mk_llm_proposer_ctx ctx = {.llm = x.llm, .module_source = MODULE};
  mk_proposer pr = mk_llm_proposer(&ctx);
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[1], .mode = MK_PROPOSE_NEW,
                            .max_candidates = 2, .device = "cpu"};
  kgot g = {0};
  MK_REQUIRE(pr.propose(pr.self, &req, on_search_keep, &g) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_REQUIRE(g.status == 0 && g.c.n == 2);
  char *p = sent_prompt(&x, 0, NULL);
  /* The PyTorch reference of relu_mul, as mk_reference_candidate writes it. */
  MK_CHECK(strstr(p, "Reference implementation") != NULL);
  MK_CHECK(strstr(p, "def run(") != NULL && strstr(p, "torch.relu") != NULL);
  free(p);

  /* Verdicts: b1024 verified at 0.5 ms, b256 verified at 0.25 ms (eager 1 ms). */
  mk_propose_verdict r1 = {.verified = true, .time_ms = 0.5, .ref_eager_ms = 1.0,
                           .ref_compile_ms = -1, .trials_passed = 5, .trials = 5};
  mk_propose_verdict r2 = r1;
  r2.time_ms = 0.25;
  mk_llm_proposer_observe(&ctx, &g.c.items[0], &r1);
  mk_llm_proposer_observe(&ctx, &g.c.items[1], &r2);
  mk_candidate stranger = {.name = "builtin", .source = "def run(v3):\n    return v3\n"};
  mk_llm_proposer_observe(&ctx, &stranger, &r2); /* not ours: ignored */

  /* OPTIMISE the slower one: the faster one is shown with its timing, the parent is not repeated. */
  req.mode = MK_PROPOSE_OPTIMISE;
  req.parent = &g.c.items[0];
  req.report = "{\"status\": \"ok\", \"trials\": 5, \"trials_passed\": 5, \"timing\": {\"available\": true, "
               "\"median_ms\": 0.5, \"reference_eager\": {\"median_ms\": 1.0}, \"speedup_vs_eager\": 2.0}}";
  kgot g2 = {0};
  MK_REQUIRE(pr.propose(pr.self, &req, on_search_keep, &g2) == 0);
  MK_REQUIRE(run_until(&x.loop, &g2.done, 20));
  MK_CHECK_INT(g2.status, ==, MK_EPARSE);
  p = sent_prompt(&x, 1, NULL);
  if (getenv("MK_TEST_VERBOSE")) fprintf(stderr, "--- optimiser prompt ---\n%s\n", p);
  MK_CHECK(strstr(p, "The fastest verified variants so far") != NULL);
  MK_CHECK(strstr(p, "### fused_relu_mul_b256 (0.25 ms, 4.00x vs eager)") != NULL);
  MK_CHECK(strstr(p, "### fused_relu_mul_b1024") == NULL);
  MK_CHECK(strstr(p, "### builtin") == NULL);
  MK_CHECK(strstr(p, "timing: median 0.5 ms; PyTorch eager 1 ms; 2.00x vs eager") != NULL);
  MK_CHECK(strstr(p, "\"timing\"") == NULL); /* a digest, not the raw JSON */
  free(p);

  /* OPTIMISE the faster one: the slower is now the other variant shown. */
  req.parent = &g.c.items[1];
  kgot g3 = {0};
  MK_REQUIRE(pr.propose(pr.self, &req, on_search_keep, &g3) == 0);
  MK_REQUIRE(run_until(&x.loop, &g3.done, 20));
  p = sent_prompt(&x, 2, NULL);
  MK_CHECK(strstr(p, "### fused_relu_mul_b1024 (0.5 ms, 2.00x vs eager)") != NULL);
  MK_CHECK(strstr(p, "### fused_relu_mul_b256") == NULL);
  free(p);
  cands_free(&g.c);
  cands_free(&g2.c);
  cands_free(&g3.c);
  mk_llm_proposer_reset(&ctx);
  MK_CHECK(ctx.seen == NULL);
  afx_close(&x);
}

MK_TEST(llm_agents, adapter_reports_refusals_through_the_callback) {
  afx x;
  char *script = script1(TWO_VARIANTS, 10, 10);
  bool ok = afx_open(&x, script, MK_LLM_OPENAI);
  free(script);
  if (!ok) return afx_close(&x);
  mk_llm_get_ledger(x.llm)->budget_tokens = 5;
  mk_llm_get_ledger(x.llm)->total.tokens_in = 5; /* spent */
  char last[MK_ERRMSG_MAX] = "";
  mk_llm_proposer_ctx ctx = {.llm = x.llm, .last_error = last};
  mk_proposer pr = mk_llm_proposer(&ctx);
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[0], .max_candidates = 1};
  kgot g = {0};
  MK_CHECK_INT(pr.propose(pr.self, &req, on_search_keep, &g), ==, 0);
  MK_CHECK(g.done); /* answered at once, with the reason */
  MK_CHECK_INT(g.status, ==, MK_EBUDGET);
  MK_CHECK(strstr(g.err, "budget") != NULL);
  MK_CHECK_STR(last, g.err);
  mk_llm_proposer_reset(&ctx);
  afx_close(&x);
}

MK_TEST(llm_agents, report_digest_and_timing_line) {
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_llm_report_text(
      "{\"status\": \"mismatch\", \"reason\": \"output 0 differs\", \"line\": null, \"trials\": 5, "
      "\"trials_passed\": 0, \"max_abs_error\": 0.1, \"max_rel_error\": \"inf\", "
      "\"worst\": {\"output\": 0, \"index\": [0, 6, 52], \"expected\": 0.5, \"actual\": 0.6, \"trial\": 1}, "
      "\"failing_elements\": 120, \"elements\": 1000, \"nonfinite\": {\"nan\": 0, \"inf\": 0}, "
      "\"per_trial\": [{\"trial\": 0}], \"torch_calls\": [\"torch.empty_like\"], "
      "\"timing\": {\"available\": false, \"reason\": \"no timing on the CPU\"}, "
      "\"tolerance\": {\"atol\": 0.0001, \"rtol\": 0.0001}, \"traceback\": null}",
      &b);
  const char *t = mk_buf_cstr(&b);
  if (getenv("MK_TEST_VERBOSE")) fprintf(stderr, "%s", t);
  MK_CHECK(strstr(t, "status: mismatch\nreason: output 0 differs\n") != NULL);
  MK_CHECK(strstr(t, "trials passed: 0 of 5") != NULL);
  MK_CHECK(strstr(t, "max abs error: 0.1, max rel error: inf") != NULL);
  MK_CHECK(strstr(t, "wrong elements: 120 of 1000") != NULL);
  MK_CHECK(strstr(t, "first wrong element: output 0 at [0, 6, 52]: expected 0.5, got 0.6 (trial 1)") != NULL);
  MK_CHECK(strstr(t, "torch calls made by the candidate: torch.empty_like") != NULL);
  MK_CHECK(strstr(t, "timing: not available: no timing on the CPU") != NULL);
  MK_CHECK(strstr(t, "per_trial") == NULL && strstr(t, "line in the candidate") == NULL);
  MK_CHECK(strstr(t, "non-finite") == NULL);

  /* A long traceback keeps its tail (where the error is). */
  mk_buf_reset(&b);
  mk_buf tb;
  mk_buf_init(&tb, 0);
  mk_buf_puts(&tb, "{\"status\": \"compile_error\", \"line\": 12, \"traceback\": \"");
  for (int i = 0; i < 60; i++) mk_buf_printf(&tb, "frame %d\\n", i);
  mk_buf_puts(&tb, "NameError: name 'tl_load' is not defined\"}");
  mk_llm_report_text(mk_buf_cstr(&tb), &b);
  t = mk_buf_cstr(&b);
  MK_CHECK(strstr(t, "line in the candidate: 12") != NULL);
  MK_CHECK(strstr(t, "NameError: name 'tl_load' is not defined") != NULL);
  MK_CHECK(strstr(t, "frame 59") != NULL && strstr(t, "frame 10\n") == NULL);

  /* A CUDA compile error (mk_backend_report): NVRTC's diagnostics on the
   * module's lines, then the head of its log (the first error is the cause). */
  mk_buf_reset(&b);
  mk_buf_reset(&tb);
  mk_buf_puts(&tb, "{\"status\": \"compile_error\", \"reason\": \"CUDA compile error at line 9:10: "
                   "identifier \\\"k\\\" is undefined\", \"line\": 9, \"column\": 10, \"diagnostics\": [");
  for (int i = 0; i < 25; i++)
    mk_buf_printf(&tb, "%s{\"line\": %d, \"column\": 10, \"severity\": \"error\", \"message\": \"m%d\"}",
                  i ? ", " : "", 9 + i, i);
  mk_buf_puts(&tb, "], \"traceback\": \"");
  for (int i = 0; i < 40; i++) mk_buf_printf(&tb, "candidate.cu(%d): error: m%d\\n", 3 + i, i);
  mk_buf_puts(&tb, "\\n\", \"backend\": \"cuda\"}");
  mk_llm_report_text(mk_buf_cstr(&tb), &b);
  t = mk_buf_cstr(&b);
  if (getenv("MK_TEST_VERBOSE")) fprintf(stderr, "%s", t);
  MK_CHECK(strstr(t, "line in the candidate: 9, column 10\n") != NULL);
  MK_CHECK(strstr(t, "compiler diagnostics (line:column in the candidate module):\n"
                     "  line 9:10: error: m0\n  line 10:10: error: m1\n") != NULL);
  MK_CHECK(strstr(t, "  line 28:10: error: m19\n  ... 5 more\n") != NULL);
  MK_CHECK(strstr(t, "line 29:10") == NULL); /* the 21st diagnostic is counted, not shown */
  MK_CHECK(strstr(t, "compiler log (first lines") != NULL);
  MK_CHECK(strstr(t, "candidate.cu(3): error: m0\n") != NULL);
  MK_CHECK(strstr(t, "candidate.cu(32): error: m29\n  ...\n") != NULL);
  MK_CHECK(strstr(t, "candidate.cu(33)") == NULL && strstr(t, "traceback") == NULL);
  mk_buf_free(&tb);

  /* Not the verifier's JSON, or not JSON at all: as it is. */
  mk_buf_reset(&b);
  mk_llm_report_text("Segmentation fault in worker", &b);
  MK_CHECK_STR(mk_buf_cstr(&b), "Segmentation fault in worker");
  mk_buf_reset(&b);
  mk_llm_report_text("{\"kind\": \"other\"}", &b);
  MK_CHECK_STR(mk_buf_cstr(&b), "{\"kind\": \"other\"}");

  mk_buf_reset(&b);
  mk_propose_verdict r = {.verified = true, .time_ms = 0.412, .ref_eager_ms = 0.824,
                          .ref_compile_ms = 0.618};
  mk_llm_timing_line(&r, &b);
  MK_CHECK_STR(mk_buf_cstr(&b), "0.412 ms, 2.00x vs eager, 1.50x vs torch.compile");
  mk_buf_reset(&b);
  r = (mk_propose_verdict){.verified = true, .time_ms = -1, .trials_passed = 5, .trials = 5};
  mk_llm_timing_line(&r, &b);
  MK_CHECK_STR(mk_buf_cstr(&b), "verified 5/5 trials, untimed");
  mk_buf_free(&b);
}

/* ---- CUDA C++ (--backend cuda | auto) --------------------------------------- */

/* relu(v3) * 2 as a CUDA C++ candidate (docs/candidates.md); BROKEN reads a
 * name nothing declares, on the module's line 8. */
#define CUDA_HEAD                                                                           \
  "import torch\n"                                                                          \
  "\n"                                                                                      \
  "MK_BACKEND = \"cuda\"\n"                                                                 \
  "MK_CUDA_SOURCE = r\"\"\"\n"                                                              \
  "extern \"C\" __global__ void relu_mul(const float *__restrict__ x, float *__restrict__ y,\n" \
  "                                      long long n) {\n"                                  \
  "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
#define CUDA_TAIL                                                                           \
  "}\n"                                                                                     \
  "\"\"\"\n"                                                                                \
  "MK_CUDA_KERNELS = {\"relu_mul\": \"ffq\"}\n"                                             \
  "\n"                                                                                      \
  "\n"                                                                                      \
  "def run(v3):\n"                                                                          \
  "    y = torch.empty_like(v3)\n"                                                          \
  "    n = y.numel()\n"                                                                     \
  "    _mk_cuda.launch(\"relu_mul\", ((n + 255) // 256,), (256,), (v3.contiguous(), y, n))\n" \
  "    return y\n"
static const char *CUDA_GOOD = CUDA_HEAD "  if (i < n) y[i] = fmaxf(x[i], 0.0f) * 2.0f;\n" CUDA_TAIL;
static const char *CUDA_BROKEN = CUDA_HEAD "  if (i < n) y[i] = fmaxf(x[i], 0.0f) * undeclared_scale;\n" CUDA_TAIL;
static const char *CUDA_FIXED = CUDA_HEAD "  if (i < n) y[i] = x[i] > 0.0f ? x[i] * 2.0f : 0.0f;\n" CUDA_TAIL;

/* Appends a scripted reply: `text` (fenced as a variant when `variant` is
 * set) for a request whose prompt holds every `match` string. */
static void step(mk_buf *s, const char *match1, const char *match2, const char *variant, const char *text) {
  mk_buf_puts(s, s->len > 13 ? ",{" : "{");
  if (match1) {
    mk_buf_puts(s, "\"match\":[");
    mk_buf_json_str(s, match1);
    if (match2) {
      mk_buf_putc(s, ',');
      mk_buf_json_str(s, match2);
    }
    mk_buf_puts(s, "],");
  }
  mk_buf body;
  mk_buf_init(&body, 0);
  if (variant) mk_buf_printf(&body, "variant: %s\n```python\n%s```\n", variant, text);
  else mk_buf_puts(&body, text);
  mk_buf_puts(s, "\"text\":");
  mk_buf_json_str(s, mk_buf_cstr(&body));
  mk_buf_puts(s, ",\"usage\":{\"in\":100,\"out\":50}}");
  mk_buf_free(&body);
}

/* Two CUDA variants in one reply: GOOD (named) and BROKEN. */
static char *two_cuda_variants(void) {
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_printf(&b, "variant: cuda_relu_mul\nnotes: one thread per element\n```python\n%s```\n\n"
                    "variant: cuda_relu_mul_scaled\n```python\n%s```\n", CUDA_GOOD, CUDA_BROKEN);
  char *t = mk_buf_steal(&b, NULL);
  mk_buf_free(&b);
  return t;
}

static const char *WRITER_CUDA = "You write CUDA C++ kernels that compute exactly";
static const char *WRITER_TRITON = "You write Triton kernels that compute exactly";

/* --backend cuda: the KernelWriter is asked for CUDA C++ with the contract
 * (and no Triton rules); CUDA modules come back as candidates; on a CPU
 * device nothing is asked (CUDA candidates need a GPU) and no call is made. */
MK_TEST(llm_agents, cuda_backend_asks_for_cuda_with_the_contract) {
  mk_buf s;
  mk_buf_init(&s, 0);
  mk_buf_puts(&s, "{\"replies\":[");
  char *two = two_cuda_variants();
  step(&s, WRITER_CUDA, NULL, NULL, two);
  free(two);
  mk_buf_puts(&s, "]}");
  afx x;
  bool ok = afx_open(&x, mk_buf_cstr(&s), MK_LLM_OPENAI);
  mk_buf_free(&s);
  if (!ok) return afx_close(&x);
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[1], .mode = MK_PROPOSE_NEW,
                            .max_candidates = 4, .device = "cpu", .backend = MK_KBACKEND_CUDA};
  pgot g = {0};
  mk_errmsg err;
  MK_CHECK_INT(mk_llm_propose_async(x.llm, &req, NULL, on_proposed, &g, NULL, &err), ==, MK_EUNSUPPORTED);
  MK_CHECK_STR(err.text, "CUDA candidates need a GPU (device is cpu)");
  MK_CHECK_INT(mk_llm_get_ledger(x.llm)->ncalls, ==, 0);

  req.device = "NVIDIA H100 80GB HBM3";
  MK_REQUIRE(mk_llm_propose_async(x.llm, &req, &(mk_llm_propose_extra){.module_source = MODULE}, on_proposed,
                                  &g, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_REQUIRE(g.c.n == 2);
  MK_CHECK_STR(g.c.items[0].name, "cuda_relu_mul");
  MK_CHECK_STR(g.c.items[0].source, CUDA_GOOD);
  MK_CHECK_STR(g.c.items[1].name, "cuda_relu_mul_scaled");
  MK_CHECK_STR(g.c.items[1].notes, "kernel_writer (prompt v2, CUDA C++)");
  for (int i = 0; i < g.c.n; i++) MK_CHECK_STR(mk_candidate_backend(&g.c.items[i]), "cuda");
  char *sys = sent_system(&x, 0), *user = sent_prompt(&x, 0, NULL);
  if (getenv("MK_TEST_VERBOSE")) fprintf(stderr, "--- CUDA kernel_writer ---\n%s\n---\n%s\n", sys, user);
  /* The system prompt: the language and docs/candidates.md's contract. */
  MK_CHECK(strstr(sys, WRITER_CUDA) != NULL);
  MK_CHECK(strstr(sys, "Define `run(v3)` at top level") != NULL);
  MK_CHECK(strstr(sys, "MK_BACKEND = \"cuda\"") != NULL);
  MK_CHECK(strstr(sys, "MK_CUDA_SOURCE = r\"\"\"") != NULL);
  MK_CHECK(strstr(sys, "MK_CUDA_KERNELS = {") != NULL);
  MK_CHECK(strstr(sys, "f = float32 tensor") && strstr(sys, "b = bool tensor") && strstr(sys, "q = Python int"));
  MK_CHECK(strstr(sys, "`extern \"C\" __global__ void` kernels") != NULL);
  MK_CHECK(strstr(sys, "No #include") != NULL);
  MK_CHECK(strstr(sys, "_mk_cuda.launch(\"<kernel name>\", grid, block, args, shared=0)") != NULL);
  MK_CHECK(strstr(sys, "Allowed imports: torch, math. Nothing else") != NULL);
  MK_CHECK(strstr(sys, "triton.language") == NULL && strstr(sys, "Triton") == NULL);
  /* The user prompt: the subkernel, and what to write. */
  MK_CHECK(strstr(user, "target device: NVIDIA H100 80GB HBM3") != NULL);
  MK_CHECK(strstr(user, "up to 4 different variants (different threads per block") != NULL);
  MK_CHECK(strstr(user, "in CUDA C++.") != NULL);
  MK_CHECK(strstr(user, "{{") == NULL && strstr(sys, "{{") == NULL);
  free(sys);
  free(user);
  cands_free(&g.c);
  afx_close(&x);
}

/* --backend auto: one KernelWriter call per language, the bound shared
 * (Triton takes the odd one), candidates interleaved Triton, CUDA, Triton,
 * ... as the builtin generator's; a name both calls used is told apart; a
 * language whose reply is unusable leaves the other's candidates; one
 * variant asked for, or a CPU device, is Triton's alone. */
MK_TEST(llm_agents, auto_backend_lets_both_languages_compete) {
  mk_buf s;
  mk_buf_init(&s, 0);
  mk_buf_puts(&s, "{\"replies\":[");
  step(&s, WRITER_TRITON, "up to 2 different", NULL, TWO_VARIANTS);
  mk_buf cuda2;
  mk_buf_init(&cuda2, 0);
  mk_buf_printf(&cuda2, "variant: cuda_relu_mul\n```python\n%s```\nvariant: fused_relu_mul_b256\n```python\n%s```\n",
                CUDA_GOOD, CUDA_FIXED);
  step(&s, WRITER_CUDA, "up to 2 different", NULL, mk_buf_cstr(&cuda2));
  mk_buf_free(&cuda2);
  step(&s, WRITER_TRITON, "up to 2 different", NULL, TWO_VARIANTS);
  step(&s, WRITER_CUDA, "up to 1 different", NULL, "I would rather not write CUDA today.");
  step(&s, WRITER_TRITON, "up to 1 different", NULL, TWO_VARIANTS);
  step(&s, WRITER_TRITON, "target device: cpu", NULL, TWO_VARIANTS);
  mk_buf_puts(&s, "]}");
  afx x;
  bool ok = afx_open(&x, mk_buf_cstr(&s), MK_LLM_OPENAI);
  mk_buf_free(&s);
  if (!ok) return afx_close(&x);
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[1], .mode = MK_PROPOSE_NEW,
                            .max_candidates = 4, .device = "NVIDIA H100", .backend = MK_KBACKEND_AUTO};
  pgot g = {0};
  mk_errmsg err;
  mk_llm_req *h = (mk_llm_req *)&g;
  MK_REQUIRE(mk_llm_propose_async(x.llm, &req, NULL, on_proposed, &g, &h, &err) == 0);
  MK_CHECK(h == NULL); /* two calls: no single handle */
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_REQUIRE(g.c.n == 4);
  const char *names[4] = {"fused_relu_mul_b1024", "cuda_relu_mul", "fused_relu_mul_b256", "fused_relu_mul_b256_cuda"};
  const char *langs[4] = {"triton", "cuda", "triton", "cuda"};
  for (int i = 0; i < 4; i++) {
    MK_CHECK_STR(g.c.items[i].name, names[i]);
    MK_CHECK_STR(mk_candidate_backend(&g.c.items[i]), langs[i]);
  }
  /* Each call's tokens (150) spread over its own two candidates. */
  MK_CHECK_INT((long)(g.c.items[0].cost + g.c.items[1].cost + g.c.items[2].cost + g.c.items[3].cost), ==, 300);
  MK_CHECK_INT(mk_llm_ledger_sum(mk_llm_get_ledger(x.llm), "kernel_writer", "relu_mul").calls, ==, 2);
  cands_free(&g.c);

  /* Three asked for: two Triton, one CUDA; the CUDA reply is unusable, so
   * the proposal is Triton's two, and the ledger says why the other failed. */
  req.max_candidates = 3;
  g = (pgot){0};
  MK_REQUIRE(mk_llm_propose_async(x.llm, &req, NULL, on_proposed, &g, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_CHECK_INT(g.c.n, ==, 2);
  MK_CHECK_STR(mk_candidate_backend(&g.c.items[0]), "triton");
  mk_llm_ledger *l = mk_llm_get_ledger(x.llm);
  MK_REQUIRE(l->ncalls == 4);
  int unusable = 0;
  for (int i = 2; i < 4; i++) unusable += strcmp(l->calls[i].outcome, "unusable") == 0;
  MK_CHECK_INT(unusable, ==, 1);
  cands_free(&g.c);

  /* One asked for: Triton only, one call. */
  req.max_candidates = 1;
  g = (pgot){0};
  MK_REQUIRE(mk_llm_propose_async(x.llm, &req, NULL, on_proposed, &g, &h, &err) == 0);
  MK_CHECK(h != NULL);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_CHECK_INT(g.c.n, ==, 1);
  MK_CHECK_INT(mk_llm_get_ledger(x.llm)->ncalls, ==, 5);
  cands_free(&g.c);

  /* A CPU device: CUDA is not asked for, Triton gets the whole bound. */
  req.max_candidates = 2;
  req.device = "cpu";
  g = (pgot){0};
  MK_REQUIRE(mk_llm_propose_async(x.llm, &req, NULL, on_proposed, &g, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_CHECK_INT(g.c.n, ==, 2);
  MK_CHECK_INT(mk_llm_get_ledger(x.llm)->ncalls, ==, 6);
  char *p = sent_prompt(&x, 5, NULL);
  MK_CHECK(strstr(p, "up to 2 different variants") != NULL);
  free(p);
  cands_free(&g.c);
  afx_close(&x);
}

typedef struct vgot {
  bool done;
  int calls;
  int status, line;
  char reason[1024];
  char *json;
} vgot;

static void on_verdict(void *data, const mk_verify_result *r) {
  vgot *v = data;
  v->done = true;
  v->calls++;
  v->status = r->status;
  v->line = r->line;
  snprintf(v->reason, sizeof v->reason, "%s", r->reason ? r->reason : "");
  /* What the search keeps as the variant's report and hands the Repairer. */
  v->json = r->json ? cJSON_PrintUnformatted(r->json) : NULL;
}

static void on_pool_closed(void *data) { *(bool *)data = true; }

/* The line of `text` that holds `needle` (1-based), or 0. */
static int line_with(const char *text, const char *needle) {
  const char *at = strstr(text, needle);
  int n = 1;
  for (const char *p = text; at && p < at; p++) n += *p == '\n';
  return at ? n : 0;
}

/* A CUDA reply as the verifier judges it: the compilable one compiles with
 * NVRTC; the broken one is a compile_error on the module's own line, found
 * by the engine (no worker: this pool's Python does not exist). Its report
 * reaches the Repairer with NVRTC's diagnostics on the candidate's lines,
 * and the repair is asked in the parent's language whatever the backend. */
MK_TEST(llm_agents, cuda_compile_errors_reach_the_repairer_on_the_candidates_lines) {
  mk_backend *b = NULL;
  mk_errmsg err = {{0}};
  if (mk_backend_open(NULL, &b, &err) == MK_EUNSUPPORTED) {
    mk_test_skip(err.text);
    return;
  }
  MK_REQUIRE(b != NULL);
  mk_buf s;
  mk_buf_init(&s, 0);
  mk_buf_puts(&s, "{\"replies\":[");
  char *two = two_cuda_variants();
  step(&s, WRITER_CUDA, NULL, NULL, two);
  free(two);
  step(&s, "fixing a CUDA C++ kernel that failed verification", "undeclared_scale", "cuda_relu_mul_fixed",
       CUDA_FIXED);
  mk_buf_puts(&s, "]}");
  afx x;
  bool ok = afx_open(&x, mk_buf_cstr(&s), MK_LLM_ANTHROPIC);
  mk_buf_free(&s);
  if (!ok) {
    mk_backend_close(b);
    return afx_close(&x);
  }
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[1], .mode = MK_PROPOSE_NEW,
                            .max_candidates = 2, .device = "NVIDIA H200", .backend = MK_KBACKEND_CUDA};
  mk_candidate_list c = {0};
  MK_REQUIRE(mk_llm_propose(x.llm, &req, NULL, &c, &err) == 0);
  MK_REQUIRE(c.n == 2);

  /* The compilable one: NVRTC gives a cubin for the GPU (sm_90). */
  const char *src = NULL;
  size_t len = 0;
  int first = 0;
  MK_REQUIRE(mk_backend_candidate_source(c.items[0].source, &src, &len, &first, &err) == 0);
  char *cuda = mk_strndup(src, len);
  mk_backend_result r;
  MK_REQUIRE(mk_backend_compile(b, cuda, "candidate.cu", NULL, first - 1, &r, &err) == 0);
  MK_CHECK(r.ok && r.image_len > 0);
  mk_backend_result_free(&r);
  free(cuda);
  mk_backend_close(b);

  /* The broken one, through the verifier. */
  char path[1024], *text = NULL;
  size_t tlen = 0;
  snprintf(path, sizeof path, "%s/tests/fixtures/propose/ew_broadcast.json", mk_test_repo_dir());
  MK_REQUIRE(mk_read_file(path, 1 << 24, &text, &tlen) == 0);
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(text, tlen, &g, &err) == 0);
  free(text);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  const char *argv[] = {"/nonexistent/python", NULL};
  mk_worker_config wc;
  mk_worker_config_init(&wc);
  wc.argv = argv;
  mk_worker_pool *pool = NULL;
  mk_verify *v = NULL;
  MK_REQUIRE(mk_worker_pool_new(&x.loop, &wc, &pool, &err) == 0);
  MK_REQUIRE(mk_verify_new(&x.loop, pool, NULL, &v, &err) == 0);
  mk_candidate_src cs = {.source = c.items[1].source, .name = c.items[1].name, .origin = c.items[1].origin};
  mk_verify_options opt;
  mk_verify_options_init(&opt);
  vgot verdict = {0};
  MK_REQUIRE(mk_verify_submit_subkernel(v, g, &p.subkernels[0], &cs, &opt, on_verdict, &verdict, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &verdict.done, 30));
  MK_CHECK_INT(verdict.calls, ==, 1);
  int bad_line = line_with(CUDA_BROKEN, "undeclared_scale");
  MK_CHECK_INT(verdict.status, ==, MK_VERIFY_COMPILE_ERROR);
  MK_CHECK_INT(verdict.line, ==, bad_line);
  MK_CHECK(strstr(verdict.reason, "undeclared_scale") != NULL);
  MK_REQUIRE(verdict.json != NULL);
  mk_verify_close(v);
  bool done = false;
  mk_worker_pool_close(pool, on_pool_closed, &done);
  MK_REQUIRE(run_until(&x.loop, &done, 15));
  mk_partition_free(&p);
  mk_graph_free(g);

  /* The Repairer: asked under --backend triton, it still writes CUDA C++
   * (its parent's language), shown NVRTC's diagnostics on the module's lines. */
  req.mode = MK_PROPOSE_REPAIR;
  req.backend = MK_KBACKEND_TRITON;
  req.parent = &c.items[1];
  req.report = verdict.json;
  req.max_candidates = 1;
  mk_candidate_list fixed = {0};
  MK_REQUIRE(mk_llm_propose(x.llm, &req, NULL, &fixed, &err) == 0);
  MK_REQUIRE(fixed.n == 1);
  MK_CHECK_STR(fixed.items[0].name, "cuda_relu_mul_fixed");
  MK_CHECK_STR(mk_candidate_backend(&fixed.items[0]), "cuda");
  char *prompt = sent_prompt(&x, 1, NULL);
  char *system = sent_system(&x, 1);
  if (getenv("MK_TEST_VERBOSE")) fprintf(stderr, "--- CUDA repairer ---\n%s\n---\n%s\n", system, prompt);
  char want[256];
  snprintf(want, sizeof want, "status: compile_error\nreason: CUDA compile error at line %d:", bad_line);
  MK_CHECK(strstr(prompt, want) != NULL);
  snprintf(want, sizeof want, "compiler diagnostics (line:column in the candidate module):\n  line %d:", bad_line);
  MK_CHECK(strstr(prompt, want) != NULL);
  MK_CHECK(strstr(prompt, "error: identifier \"undeclared_scale\" is undefined") != NULL);
  MK_CHECK(strstr(prompt, "compiler log (first lines") != NULL);
  MK_CHECK(strstr(prompt, "candidate.cu(") != NULL); /* NVRTC's own log, source line and caret */
  MK_CHECK(strstr(prompt, "The failing candidate `cuda_relu_mul_scaled`") != NULL);
  MK_CHECK(strstr(prompt, "Return up to 1 fixed module(s), in CUDA C++.") != NULL);
  MK_CHECK(strstr(system, "fixing a CUDA C++ kernel that failed verification") != NULL);
  MK_CHECK(strstr(system, "compiled with NVRTC") != NULL);
  MK_CHECK(strstr(system, "MK_CUDA_KERNELS = {") != NULL);
  free(prompt);
  free(system);
  free(verdict.json);
  cands_free(&fixed);
  cands_free(&c);
  afx_close(&x);
}

/* ---- through the session (the door the CLI and the language server use) ---- */

/* relu(x * 2) + 1: one subkernel, run(x0). */
static const char *TINY =
    "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n\n"
    "    def forward(self, x):\n        y = torch.relu(x * 2.0)\n        return y + 1.0\n\n\n"
    "def get_inputs():\n    return [torch.randn(4, 64)]\n\n\n"
    "def get_init_inputs():\n    return []\n";

static const char *TINY_TRITON =
    "import torch\nimport triton\nimport triton.language as tl\n\n\n"
    "@triton.jit\n"
    "def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    m = offs < n\n"
    "    x = tl.load(x_ptr + offs, mask=m)\n"
    "    tl.store(y_ptr + offs, tl.maximum(x * 2.0, 0.0) + 1.0, mask=m)\n\n\n"
    "def run(x0):\n"
    "    x0 = x0.contiguous()\n"
    "    y = torch.empty_like(x0)\n"
    "    n = x0.numel()\n"
    "    _k[(triton.cdiv(n, 256),)](x0, y, n, BLOCK=256)\n"
    "    return y\n";

#define TINY_CUDA(EXPR)                                                                    \
  "import torch\n\nMK_BACKEND = \"cuda\"\nMK_CUDA_SOURCE = r\"\"\"\n"                       \
  "extern \"C\" __global__ void relu2p1(const float *x, float *y, long long n) {\n"         \
  "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"              \
  "  if (i < n) y[i] = " EXPR ";\n"                                                        \
  "}\n\"\"\"\nMK_CUDA_KERNELS = {\"relu2p1\": \"ffq\"}\n\n\n"                               \
  "def run(x0):\n"                                                                         \
  "    y = torch.empty_like(x0)\n"                                                         \
  "    n = y.numel()\n"                                                                    \
  "    _mk_cuda.launch(\"relu2p1\", ((n + 255) // 256,), (256,), (x0.contiguous(), y, n))\n" \
  "    return y\n"

typedef struct sess_done {
  bool called;
  int status;
  char error[1024];
} sess_done;

static void on_session(void *data, int status, const mk_session_module *m, const char *error) {
  sess_done *d = data;
  (void)m;
  d->called = true;
  d->status = status;
  snprintf(d->error, sizeof d->error, "%s", error ? error : "");
}

typedef struct edit_got {
  bool called;
  int status, line;
  char verdict[64], reason[1024], backend[32];
} edit_got;

static void on_edit(void *data, int status, const mk_session_edit_result *r, const char *error) {
  edit_got *e = data;
  e->called = true;
  e->status = status;
  if (r == NULL) {
    snprintf(e->reason, sizeof e->reason, "%s", error ? error : "");
    return;
  }
  snprintf(e->verdict, sizeof e->verdict, "%s", r->status);
  snprintf(e->reason, sizeof e->reason, "%s", r->reason);
  snprintf(e->backend, sizeof e->backend, "%s", r->backend);
  e->line = r->line;
}

static void on_session_closed(void *data) { *(bool *)data = true; }

/* Number of requests whose prompt holds `needle`. */
static int requests_with(afx *x, const char *needle) {
  cJSON *log = fake_log(&x->f);
  const cJSON *r;
  int n = 0;
  cJSON_ArrayForEach(r, cJSON_GetObjectItem(log, "requests")) {
    char *body = cJSON_PrintUnformatted(cJSON_GetObjectItem(r, "body"));
    cJSON *b = body ? cJSON_Parse(body) : NULL; /* unescaped text of the prompt */
    const cJSON *m;
    bool hit = false;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(b, "messages")) {
      const cJSON *c = cJSON_GetObjectItem(m, "content");
      hit |= cJSON_IsString(c) && strstr(c->valuestring, needle) != NULL;
    }
    n += hit;
    cJSON_Delete(b);
    free(body);
  }
  cJSON_Delete(log);
  return n;
}

/* The session's LLM proposer follows the kernel backend (`--backend`, the
 * server's `kernelBackend`): on the CPU, `cuda` asks the LLM for nothing and
 * keeps PyTorch with the reason; `auto` asks for Triton only and the LLM's
 * kernel is chosen. A CUDA C++ reply, verified on the CPU: compiled by NVRTC,
 * then a runtime_error (CUDA candidates need a GPU); a broken one is a
 * compile_error on its own line. */
MK_TEST(llm_agents, session_llm_proposer_follows_the_kernel_backend) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  mk_buf s;
  mk_buf_init(&s, 0);
  mk_buf_puts(&s, "{\"replies\":[");
  step(&s, WRITER_TRITON, "Subkernel `", "triton_relu2p1", TINY_TRITON);
  mk_buf_puts(&s, "]}");
  afx x;
  bool ok = afx_open(&x, mk_buf_cstr(&s), MK_LLM_OPENAI);
  mk_buf_free(&s);
  if (!ok) return afx_close(&x);
  char dir[] = "/tmp/mk_llm_session_XXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  char file[256], cache[256], llm_json[512];
  snprintf(file, sizeof file, "%s/tiny.py", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(llm_json, sizeof llm_json,
           "{\"model\": \"gpt-test\", \"base_url\": \"%s/v1\", \"api_key_env\": \"MK_TEST_LLM_KEY\", "
           "\"max_retries\": 0}", x.f.base);
  MK_REQUIRE(mk_write_file(file, TINY, strlen(TINY)) == 0);
  mk_session_config cfg;
  mk_session_config_defaults(&cfg);
  cfg.device = "cpu";
  cfg.cache_dir = cache;
  cfg.proposer = "llm";
  cfg.llm_config_json = llm_json;
  cfg.search.backend = MK_KBACKEND_CUDA;
  mk_session *ss = NULL;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_session_new(&x.loop, &cfg, &ss, &err) == 0);
  sess_done d = {0};
  MK_REQUIRE(mk_session_analyze(ss, file, NULL, on_session, &d, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &d.called, 120));
  MK_REQUIRE(d.status == 0);

  /* cuda on the CPU: no request, the reference kept with the reason. */
  d = (sess_done){0};
  MK_REQUIRE(mk_session_evolve(ss, file, -1, NULL, on_session, &d, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &d.called, 300));
  MK_CHECK_INT(d.status, ==, 0);
  const mk_session_module *m = mk_session_get(ss, file);
  MK_REQUIRE(m && m->nsubkernels == 1);
  MK_CHECK(strstr(m->subkernels[0].summary, "CUDA candidates need a GPU") != NULL);
  MK_CHECK_INT(m->subkernels[0].nvariants, ==, 1);
  if (getenv("MK_TEST_VERBOSE")) fprintf(stderr, "  cuda: %s\n", m->subkernels[0].summary);
  cJSON *log = fake_log(&x.f);
  MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(log, "requests")), ==, 0);
  cJSON_Delete(log);

  /* auto on the CPU: the KernelWriter is asked for Triton only. */
  cfg.search.backend = MK_KBACKEND_AUTO;
  MK_REQUIRE(mk_session_set_config(ss, &cfg, &err) == 0);
  d = (sess_done){0};
  MK_REQUIRE(mk_session_evolve(ss, file, -1, NULL, on_session, &d, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &d.called, 300));
  MK_CHECK_INT(d.status, ==, 0);
  MK_CHECK(requests_with(&x, WRITER_TRITON) >= 1);
  MK_CHECK_INT(requests_with(&x, "CUDA C++"), ==, 0);
  m = mk_session_get(ss, file);
  const mk_session_subkernel *sk = &m->subkernels[0];
  MK_REQUIRE(sk->chosen > 0 && sk->chosen < sk->nvariants);
  MK_CHECK_STR(sk->variants[sk->chosen].name, "triton_relu2p1");
  MK_CHECK_STR(sk->variants[sk->chosen].origin, "llm:gpt-test");
  MK_CHECK_STR(sk->variants[sk->chosen].backend, "triton");
  if (getenv("MK_TEST_VERBOSE"))
    fprintf(stderr, "  auto: %s (%s), %d LLM requests\n", sk->variants[sk->chosen].name, sk->summary,
            requests_with(&x, "Subkernel `"));

  /* CUDA C++ replies (read by the agents' parser) verified on the CPU. */
  mk_backend *b = NULL;
  mk_errmsg berr = {{0}};
  if (mk_backend_open(NULL, &b, &berr) == MK_EUNSUPPORTED) {
    fprintf(stderr, "  (CUDA verdict cases skipped: %s)\n", berr.text);
  } else {
    mk_backend_close(b);
    mk_buf r;
    mk_buf_init(&r, 0);
    mk_buf_printf(&r, "variant: cuda_ok\n```python\n%s```\nvariant: cuda_broken\n```python\n%s```\n",
                  TINY_CUDA("fmaxf(x[i] * 2.0f, 0.0f) + 1.0f"), TINY_CUDA("fmaxf(x[i] * two, 0.0f) + 1.0f"));
    mk_candidate_list c = {0};
    MK_REQUIRE(mk_llm_parse_candidates(mk_buf_cstr(&r), MK_KBACKEND_CUDA, "tiny", "llm:gpt-test", 4, &c, &err) == 2);
    mk_buf_free(&r);
    char *edit = NULL;
    MK_REQUIRE(mk_session_edit_variant(ss, file, 0, -1, &edit, &err) == 0);
    edit_got e = {0};
    MK_REQUIRE(mk_session_verify_edit(ss, edit, c.items[0].source, on_edit, &e, NULL, &err) == 0);
    MK_REQUIRE(run_until(&x.loop, &e.called, 120));
    MK_CHECK_INT(e.status, ==, 0);
    MK_CHECK_STR(e.verdict, "runtime_error");
    MK_CHECK_STR(e.backend, "cuda");
    MK_CHECK(strstr(e.reason, "CUDA candidates need a GPU") != NULL);
    if (getenv("MK_TEST_VERBOSE")) fprintf(stderr, "  %s: %s\n", e.verdict, e.reason);
    e = (edit_got){0};
    MK_REQUIRE(mk_session_verify_edit(ss, edit, c.items[1].source, on_edit, &e, NULL, &err) == 0);
    MK_REQUIRE(run_until(&x.loop, &e.called, 60));
    MK_CHECK_STR(e.verdict, "compile_error");
    MK_CHECK_INT(e.line, ==, line_with(c.items[1].source, "* two"));
    MK_CHECK(strstr(e.reason, "\"two\" is undefined") != NULL);
    if (getenv("MK_TEST_VERBOSE")) fprintf(stderr, "  compile_error at line %d: %s\n", e.line, e.reason);
    free(edit);
    cands_free(&c);
  }

  bool closed = false;
  mk_session_close(ss, on_session_closed, &closed);
  MK_CHECK(run_until(&x.loop, &closed, 30));
  mk_buf rm;
  mk_buf_init(&rm, 4096);
  mk_buf_printf(&rm, "rm -rf '%s'", dir);
  MK_CHECK_INT(system(mk_buf_cstr(&rm)), ==, 0);
  mk_buf_free(&rm);
  afx_close(&x);
}

/* Under auto, the search adapter's Optimiser stays in its parent's
 * language: a CUDA parent is optimised in CUDA C++ and shown the fastest
 * CUDA variants only (a faster Triton one is not offered as a model). */
MK_TEST(llm_agents, adapter_optimises_in_the_parents_language) {
  mk_buf s;
  mk_buf_init(&s, 0);
  mk_buf_puts(&s, "{\"replies\":[");
  step(&s, WRITER_TRITON, NULL, NULL, TWO_VARIANTS);
  mk_buf cuda2;
  mk_buf_init(&cuda2, 0);
  mk_buf_printf(&cuda2, "variant: cuda_a\n```python\n%s```\nvariant: cuda_b\n```python\n%s```\n", CUDA_GOOD,
                CUDA_FIXED);
  step(&s, WRITER_CUDA, NULL, NULL, mk_buf_cstr(&cuda2));
  mk_buf_free(&cuda2);
  step(&s, "making a correct CUDA C++ kernel faster", NULL, "cuda_c", CUDA_BROKEN);
  mk_buf_puts(&s, "]}");
  afx x;
  bool ok = afx_open(&x, mk_buf_cstr(&s), MK_LLM_OPENAI);
  mk_buf_free(&s);
  if (!ok) return afx_close(&x);
  mk_llm_proposer_ctx ctx = {.llm = x.llm, .module_source = MODULE};
  mk_proposer pr = mk_llm_proposer(&ctx);
  mk_propose_request req = {.graph = &x.gf.g, .subkernel = &x.gf.sks[1], .mode = MK_PROPOSE_NEW,
                            .max_candidates = 4, .device = "NVIDIA H100", .backend = MK_KBACKEND_AUTO};
  kgot g = {0};
  MK_REQUIRE(pr.propose(pr.self, &req, on_search_keep, &g) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_REQUIRE(g.status == 0 && g.c.n == 4);
  /* Verified: Triton b1024 at 0.1 ms (the fastest), cuda_a at 0.4, cuda_b at 0.3. */
  double ms[4] = {0.1, 0.4, 0.2, 0.3};
  for (int i = 0; i < 4; i++) {
    mk_propose_verdict v = {.verified = true, .time_ms = ms[i], .ref_eager_ms = 1.0, .ref_compile_ms = -1,
                            .trials_passed = 5, .trials = 5};
    mk_llm_proposer_observe(&ctx, &g.c.items[i], &v);
  }
  MK_REQUIRE(strcmp(g.c.items[1].name, "cuda_a") == 0 && strcmp(g.c.items[3].name, "cuda_b") == 0);
  req.mode = MK_PROPOSE_OPTIMISE;
  req.parent = &g.c.items[1];
  req.max_candidates = 1;
  kgot g2 = {0};
  MK_REQUIRE(pr.propose(pr.self, &req, on_search_keep, &g2) == 0);
  MK_REQUIRE(run_until(&x.loop, &g2.done, 20));
  MK_CHECK_INT(g2.status, ==, 0);
  MK_REQUIRE(g2.c.n == 1);
  MK_CHECK_STR(mk_candidate_backend(&g2.c.items[0]), "cuda");
  char *p = sent_prompt(&x, 2, NULL);
  MK_CHECK(strstr(p, "### cuda_b (0.3 ms, 3.33x vs eager)") != NULL);
  MK_CHECK(strstr(p, "### fused_relu_mul") == NULL);
  MK_CHECK(strstr(p, "faster variant(s) in CUDA C++") != NULL);
  free(p);
  cands_free(&g.c);
  cands_free(&g2.c);
  mk_llm_proposer_reset(&ctx);
  afx_close(&x);
}
