/* test_llm_agents.c — the agents end to end against the scripted fake
 * provider: prompts rendered from the IR, candidates and decisions parsed
 * and validated, tokens split and recorded, unusable replies contained. */
#include "../llm/fake_server.h"

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
  MK_CHECK_STR(g.c.items[1].notes, "kernel_writer (prompt v1)");
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
  MK_REQUIRE(mk_llm_decide_async(x.llm, MK_LLM_SPLIT, &x.gf.g, &x.gf.p, MODULE, "linear: 0.2 ms\nrelu_mul: 0.05 ms",
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
  MK_REQUIRE(mk_llm_decide_async(x.llm, MK_LLM_MERGE, &x.gf.g, &x.gf.p, NULL, NULL, on_decided, &g2, NULL, &err) == 0);
  MK_REQUIRE(run_until(&x.loop, &g2.done, 20));
  MK_CHECK_INT(g2.status, ==, 0);
  MK_REQUIRE(g2.d.n == 1);
  MK_CHECK(g2.d.items[0].kind == MK_LLM_MERGE && g2.d.items[0].subkernel == 0 && g2.d.items[0].at_node == -1);
  mk_llm_decisions_free(&g2.d);

  dgot g3 = {0};
  MK_REQUIRE(mk_llm_decide_async(x.llm, MK_LLM_MERGE, &x.gf.g, &x.gf.p, NULL, NULL, on_decided, &g3, NULL, &err) == 0);
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
  MK_REQUIRE(mk_llm_decompose_async(x.llm, &x.gf.g, MODULE, &x.gf.p, on_groups, &g, NULL, &err) == 0);
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
    MK_REQUIRE(mk_llm_decompose_async(x.llm, &x.gf.g, MODULE, NULL, on_groups, &b, NULL, &err) == 0);
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
