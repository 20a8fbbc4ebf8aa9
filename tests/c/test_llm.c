/* test_llm.c — the offline parts of engine/llm: configuration, ledger,
 * prompt templates and reply parsing (no server involved). */
#include "mk_llm.h"
#include "mk_test.h"

#include <stdlib.h>

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

/* ------------------------------------------------------------ config -- */

MK_TEST(llm, config_loads_every_key) {
  mk_llm_config c;
  mk_llm_config_init(&c);
  cJSON *j = cJSON_Parse(
      "{\"provider\":\"anthropic\",\"model\":\"claude-x\",\"base_url\":\"http://h:1\","
      "\"api_key_env\":\"MY_KEY\",\"timeout_s\":12.5,\"connect_timeout_s\":3,\"stall_timeout_s\":0,"
      "\"max_concurrency\":2,\"max_retries\":7,\"backoff_initial_s\":0.1,\"backoff_max_s\":9,"
      "\"max_tokens\":1000,\"temperature\":0.3,\"stream\":false,\"max_tokens_field\":\"max_completion_tokens\","
      "\"budget\":{\"tokens\":5000,\"usd\":1.5},"
      "\"prices\":{\"claude-*\":{\"input_per_mtok\":3,\"output_per_mtok\":15},"
      "\"claude-x\":{\"input_per_mtok\":1,\"output_per_mtok\":2}}}");
  mk_errmsg err;
  MK_REQUIRE(mk_llm_config_from_json(&c, j, &err) == 0);
  MK_CHECK(c.provider == MK_LLM_ANTHROPIC);
  MK_CHECK_STR(c.model, "claude-x");
  MK_CHECK_STR(c.api_key_env, "MY_KEY");
  MK_CHECK(c.timeout_s == 12.5 && c.max_concurrency == 2 && c.max_retries == 7);
  MK_CHECK(!c.stream && c.temperature == 0.3 && c.budget_tokens == 5000 && c.budget_usd == 1.5);
  MK_CHECK_INT(c.nprices, ==, 2);
  /* Exact match wins over the prefix; the prefix covers the rest. */
  MK_CHECK(mk_llm_config_price(&c, "claude-x")->input_per_mtok == 1);
  MK_CHECK(mk_llm_config_price(&c, "claude-y")->output_per_mtok == 15);
  MK_CHECK(mk_llm_config_price(&c, "gpt-4o") == NULL);
  cJSON *dump = mk_llm_config_to_json(&c);
  char *s = cJSON_PrintUnformatted(dump);
  MK_CHECK(strstr(s, "\"api_key_env\":\"MY_KEY\"") != NULL);
  MK_CHECK(strstr(s, "\"provider\":\"anthropic\"") != NULL);
  free(s);
  cJSON_Delete(dump);
  cJSON_Delete(j);
  mk_llm_config_free(&c);
}

MK_TEST(llm, config_errors_name_the_key_and_change_nothing) {
  mk_llm_config c;
  mk_llm_config_init(&c);
  mk_errmsg err;
  const char *bad[] = {
      "{\"model\":\"m\",\"modle\":\"typo\"}",   "{\"provider\":\"gemini\"}",
      "{\"max_concurrency\":0}",                "{\"max_retries\":1.5}",
      "{\"stream\":1}",                         "{\"budget\":{\"dollars\":3}}",
      "{\"prices\":{\"m\":{\"input_per_mtok\":1}}}", "[1]",
  };
  const char *names[] = {"modle", "provider", "max_concurrency", "max_retries",
                         "stream", "budget.dollars", "input_per_mtok", "object"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cJSON *j = cJSON_Parse(bad[i]);
    MK_CHECK_INT(mk_llm_config_from_json(&c, j, &err), ==, MK_EINVAL);
    if (!strstr(err.text, names[i])) MK_CHECK_STR(err.text, names[i]);
    cJSON_Delete(j);
  }
  MK_CHECK(c.model == NULL); /* the good key of the first object was not applied */
  MK_CHECK_INT(c.max_concurrency, ==, 4);
  mk_llm_config_free(&c);
}

MK_TEST(llm, config_refuses_keys_in_files) {
  mk_llm_config c;
  mk_llm_config_init(&c);
  mk_errmsg err;
  cJSON *j = cJSON_Parse("{\"api_key\":\"sk-live-123456789\"}");
  MK_CHECK_INT(mk_llm_config_from_json(&c, j, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "api_key_env") != NULL);
  MK_CHECK(strstr(err.text, "sk-live") == NULL);
  cJSON_Delete(j);
  mk_llm_config_free(&c);
}

MK_TEST(llm, new_requires_model_key_for_vendor_and_price_for_money_budget) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  mk_llm_config c;
  mk_llm_config_init(&c);
  mk_llm *llm = NULL;
  mk_errmsg err;
  MK_CHECK_INT(mk_llm_new(&loop, &c, &llm, &err), ==, MK_EINVAL); /* no model */
  c.model = mk_strdup("gpt-test");
  c.api_key_env = mk_strdup("MK_TEST_SURELY_UNSET_KEY");
  unsetenv("MK_TEST_SURELY_UNSET_KEY");
  c.base_url = mk_strdup("https://api.openai.com/v1");
  MK_CHECK_INT(mk_llm_new(&loop, &c, &llm, &err), ==, MK_EAUTH);
  MK_CHECK(strstr(err.text, "MK_TEST_SURELY_UNSET_KEY") != NULL);
  /* A local server needs no key. */
  free(c.base_url);
  c.base_url = mk_strdup("http://127.0.0.1:9/v1/");
  MK_REQUIRE(mk_llm_new(&loop, &c, &llm, &err) == 0);
  MK_CHECK_STR(mk_llm_endpoint(llm), "http://127.0.0.1:9/v1/chat/completions");
  mk_llm_close(llm);
  c.budget_usd = 2;
  MK_CHECK_INT(mk_llm_new(&loop, &c, &llm, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "price") != NULL);
  c.provider = MK_LLM_ANTHROPIC;
  c.budget_usd = 0;
  free(c.base_url);
  c.base_url = mk_strdup("http://127.0.0.1:9");
  MK_REQUIRE(mk_llm_new(&loop, &c, &llm, &err) == 0);
  MK_CHECK_STR(mk_llm_endpoint(llm), "http://127.0.0.1:9/v1/messages");
  mk_llm_close(llm);
  uv_run(&loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(&loop), ==, 0);
  mk_llm_config_free(&c);
}

/* ------------------------------------------------------------ ledger -- */

MK_TEST(llm, ledger_aggregates_and_budgets) {
  mk_llm_ledger l;
  mk_llm_ledger_init(&l, 1000, 0);
  mk_llm_call_record r = {.agent = "kernel_writer", .subkernel = "conv", .model = "m"};
  r.u.tokens_in = 100;
  r.u.tokens_out = 50;
  r.u.usd = 0.25;
  MK_CHECK_INT(mk_llm_ledger_add(&l, &r), ==, 0);
  r.agent = "repairer";
  MK_CHECK_INT(mk_llm_ledger_add(&l, &r), ==, 1);
  r.subkernel = "relu";
  r.status = MK_ENET;
  r.u.tokens_in = 7;
  r.u.tokens_out = 0;
  MK_CHECK_INT(mk_llm_ledger_add(&l, &r), ==, 2);
  MK_CHECK_INT(l.total.calls, ==, 3);
  MK_CHECK_INT(l.total.failures, ==, 1);
  MK_CHECK_INT(l.total.tokens_in, ==, 207);
  mk_llm_usage conv = mk_llm_ledger_sum(&l, NULL, "conv");
  MK_CHECK_INT(conv.tokens_in + conv.tokens_out, ==, 300);
  mk_llm_usage rep = mk_llm_ledger_sum(&l, "repairer", NULL);
  MK_CHECK_INT(rep.calls, ==, 2);
  MK_CHECK_INT(mk_llm_ledger_set_outcome(&l, 0, "unusable", "no code"), ==, 0);
  MK_CHECK_INT(l.total.failures, ==, 2);
  MK_CHECK(!mk_llm_ledger_exhausted(&l));
  cJSON *j = mk_llm_ledger_json(&l, true);
  cJSON *t = cJSON_GetObjectItem(j, "total");
  MK_CHECK_INT(cJSON_GetObjectItem(t, "tokens")->valueint, ==, 307);
  cJSON *ba = cJSON_GetObjectItem(j, "by_agent");
  MK_CHECK_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(ba, "repairer"), "tokens_in")->valueint, ==, 107);
  cJSON *bs = cJSON_GetObjectItem(j, "by_subkernel");
  MK_CHECK_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(bs, "relu"), "failures")->valueint, ==, 1);
  MK_CHECK_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "budget"), "tokens_left")->valueint, ==, 693);
  MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "calls")), ==, 3);
  cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "calls"), 0);
  const char *outcome = cJSON_GetObjectItem(c0, "outcome")->valuestring;
  MK_CHECK_STR(outcome, "unusable");
  cJSON_Delete(j);
  r.u.tokens_in = 800;
  mk_llm_ledger_add(&l, &r);
  MK_CHECK(mk_llm_ledger_exhausted(&l));
  mk_llm_ledger_free(&l);
}

/* ----------------------------------------------------------- prompts -- */

MK_TEST(llm, render_variables_and_sections) {
  mk_llm_var v[] = {{"name", "conv"}, {"report", ""}, {"code", "x = {{not a tag}}\n"}, {"n", "3"}};
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_errmsg err;
  const char *t = "A {{name}}/{{ n }}\n{{#report}}\nreport: {{report}}\n{{/report}}\n"
                  "{{^report}}\nno report\n{{/report}}\n{{code}}{{#name}}[{{#n}}{{n}}{{/n}}]{{/name}}";
  MK_REQUIRE(mk_llm_render(t, v, 4, &b, &err) == 0);
  MK_CHECK_STR(mk_buf_cstr(&b), "A conv/3\nno report\nx = {{not a tag}}\n[3]");
  mk_buf_reset(&b);
  MK_CHECK_INT(mk_llm_render("{{nmae}}", v, 4, &b, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "nmae") != NULL);
  MK_CHECK_INT(mk_llm_render("{{#name}} open", v, 4, &b, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "never closed") != NULL);
  MK_CHECK_INT(mk_llm_render("x {{/name}}", v, 4, &b, &err), ==, MK_EINVAL);
  MK_CHECK_INT(mk_llm_render("x {{name", v, 4, &b, &err), ==, MK_EINVAL);
  mk_buf_free(&b);
}

MK_TEST(llm, prompt_file_format) {
  mk_llm_prompt p;
  mk_errmsg err;
  MK_REQUIRE(mk_llm_prompt_parse("t", "# title\n# version: 3\n\n=== system\nS {{a}}\n\n=== user\nU\n", &p,
                                 &err) == 0);
  MK_CHECK_INT(p.version, ==, 3);
  MK_CHECK_STR(p.system, "S {{a}}");
  MK_CHECK_STR(p.user, "U");
  mk_llm_prompt_free(&p);
  MK_CHECK_INT(mk_llm_prompt_parse("t", "=== user\nU\n", &p, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "version") != NULL);
  MK_CHECK_INT(mk_llm_prompt_parse("t", "# version: 1\nstray\n=== user\nU\n", &p, &err), ==, MK_EINVAL);
  MK_CHECK_INT(mk_llm_prompt_parse("t", "# version: 1\n=== system\nS\n", &p, &err), ==, MK_EINVAL);
  MK_CHECK_INT(mk_llm_prompt_parse("t", "# version: 1\n=== user\nU\n=== assistant\nA\n", &p, &err), ==,
               MK_EINVAL);
}

MK_TEST(llm, shipped_prompts_load) {
  const char *agents[] = {"decomposer", "kernel_writer", "repairer", "optimiser", "splitter", "fuser"};
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/prompts", mk_test_repo_dir());
  for (size_t i = 0; i < sizeof agents / sizeof agents[0]; i++) {
    mk_llm_prompt p;
    mk_errmsg err;
    int rc = mk_llm_prompt_load(dir, agents[i], &p, &err);
    if (rc) MK_CHECK_STR(err.text, "");
    MK_REQUIRE(rc == 0);
    MK_CHECK(p.version >= 1);
    MK_CHECK(p.system && strlen(p.system) > 100);
    mk_llm_prompt_free(&p);
  }
  /* The languages' module rules, inserted into the agents' prompts as {{contract}}. */
  const char *contracts[] = {"triton_contract", "cuda_contract"};
  for (size_t i = 0; i < sizeof contracts / sizeof contracts[0]; i++) {
    mk_llm_prompt p;
    mk_errmsg err;
    int rc = mk_llm_prompt_load(dir, contracts[i], &p, &err);
    if (rc) MK_CHECK_STR(err.text, "");
    MK_REQUIRE(rc == 0);
    MK_CHECK(p.system == NULL && strstr(p.user, "{{signature}}") != NULL);
    mk_llm_prompt_free(&p);
  }
  mk_llm_prompt p;
  mk_errmsg err;
  MK_CHECK_INT(mk_llm_prompt_load(dir, "no_such_agent", &p, &err), ==, MK_ENOENT);
  MK_CHECK(strstr(err.text, "no_such_agent.txt") != NULL);
}

/* ------------------------------------------------------------ replies -- */

static const char *KERNEL =
    "@triton.jit\n"
    "def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
    "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    m = i < n\n"
    "    tl.store(y_ptr + i, tl.maximum(tl.load(x_ptr + i, mask=m), 0), mask=m)\n";

MK_TEST(llm, parse_several_variants_with_names_and_missing_imports) {
  mk_buf r;
  mk_buf_init(&r, 0);
  mk_buf_printf(&r,
                "Here are two variants.\n\n### variant: **Block 1024**\nnotes: one block per 1024 elements\n"
                "```python\nimport torch\nimport triton\nimport triton.language as tl\n\n%s\n"
                "def run(x):\n    y = torch.empty_like(x)\n    n = x.numel()\n"
                "    _k[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)\n    return y\n```\n\n"
                "variant: b256\n```py\n%s\ndef run(x):\n    y = torch.empty_like(x)\n"
                "    _k[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)\n    return y\n```\n"
                "Both are correct.\n",
                KERNEL, KERNEL);
  mk_candidate_list l = {0};
  mk_errmsg err;
  MK_CHECK_INT(mk_llm_parse_candidates(mk_buf_cstr(&r), MK_KBACKEND_TRITON, "relu", "llm:m", 8, &l, &err), ==, 2);
  MK_REQUIRE(l.n == 2);
  MK_CHECK_STR(l.items[0].name, "block_1024");
  MK_CHECK_STR(l.items[0].notes, "one block per 1024 elements");
  MK_CHECK_STR(l.items[0].origin, "llm:m");
  MK_CHECK_STR(l.items[1].name, "b256");
  /* The second block forgot its imports: they were added. */
  MK_CHECK(strncmp(l.items[1].source, "import torch\nimport triton\nimport triton.language as tl\n", 56) == 0);
  cands_free(&l);
  /* max bounds the count. */
  MK_CHECK_INT(mk_llm_parse_candidates(mk_buf_cstr(&r), MK_KBACKEND_TRITON, "relu", "llm:m", 1, &l, &err), ==, 1);
  cands_free(&l);
  mk_buf_free(&r);
}

MK_TEST(llm, parse_joins_helper_blocks_and_accepts_unfenced_code) {
  mk_buf r;
  mk_buf_init(&r, 0);
  mk_buf_printf(&r, "First the kernel:\n```python\n%s```\nThen the wrapper:\n```python\n"
                    "def run(x):\n    y = torch.empty_like(x)\n    _k[(1,)](x, y, x.numel(), BLOCK=1024)\n"
                    "    return y\n```\n",
                KERNEL);
  mk_candidate_list l = {0};
  mk_errmsg err;
  MK_CHECK_INT(mk_llm_parse_candidates(mk_buf_cstr(&r), MK_KBACKEND_TRITON, "relu", "llm:m", 4, &l, &err), ==, 1);
  MK_REQUIRE(l.n == 1);
  MK_CHECK(strstr(l.items[0].source, "def _k(") && strstr(l.items[0].source, "def run("));
  MK_CHECK_STR(l.items[0].name, "relu_1");
  cands_free(&l);
  /* No fences at all. */
  MK_CHECK_INT(mk_llm_parse_candidates("Sure!\nimport torch\n\ndef run(x):\n    return x.clamp_min(0)\n",
                                       MK_KBACKEND_TRITON, "relu", "llm:m", 4, &l, &err),
               ==, 1);
  MK_CHECK(strncmp(l.items[0].source, "import torch\n", 13) == 0);
  cands_free(&l);
  mk_buf_free(&r);
}

MK_TEST(llm, parse_rejects_unusable_replies_with_reasons) {
  mk_candidate_list l = {0};
  mk_errmsg err;
  MK_CHECK_INT(mk_llm_parse_candidates("I cannot help with that.", MK_KBACKEND_TRITON, "k", "llm:m", 4, &l, &err), ==, MK_EPARSE);
  MK_CHECK(strstr(err.text, "no code") != NULL);
  MK_CHECK_INT(mk_llm_parse_candidates("```python\ndef helper(x):\n    return x\n```\n", MK_KBACKEND_TRITON, "k", "llm:m", 4, &l, &err),
               ==, MK_EPARSE);
  MK_CHECK(strstr(err.text, "run(") != NULL);
  /* A truncated reply: the fence never closes and the code is cut mid-expression. */
  MK_CHECK_INT(mk_llm_parse_candidates("```python\nimport torch\ndef run(x):\n    return torch.relu(x\n", MK_KBACKEND_TRITON, "k",
                                       "llm:m", 4, &l, &err),
               ==, MK_EPARSE);
  MK_CHECK(strstr(err.text, "truncated") != NULL);
  MK_CHECK_INT(mk_llm_parse_candidates("```python\ndef run(x):\n    return x +\n```\n", MK_KBACKEND_TRITON, "k", "llm:m", 4, &l,
                                       &err),
               ==, MK_EPARSE);
  MK_CHECK(strstr(err.text, "syntax error at line 2") != NULL);
  MK_CHECK_INT(l.n, ==, 0);
  /* An unclosed fence whose code is complete is accepted. */
  MK_CHECK_INT(mk_llm_parse_candidates("```python\ndef run(x):\n    return x\n", MK_KBACKEND_TRITON, "k", "llm:m", 4, &l, &err), ==, 1);
  cands_free(&l);
  /* Duplicates collapse. */
  MK_CHECK_INT(mk_llm_parse_candidates("```python\ndef run(x):\n    return x\n```\n```python\ndef run(x):\n"
                                       "    return x\n```\n",
                                       MK_KBACKEND_TRITON, "k", "llm:m", 4, &l, &err),
               ==, 1);
  cands_free(&l);
}

/* A CUDA C++ candidate of relu(x) * 2 as docs/candidates.md describes it. */
static const char *CUDA_MODULE =
    "import torch\n"
    "\n"
    "MK_BACKEND = \"cuda\"\n"
    "MK_CUDA_SOURCE = r\"\"\"\n"
    "// __global__ in a comment is not a kernel\n"
    "extern \"C\" __global__ void __launch_bounds__(256) relu_mul(const float *__restrict__ x,\n"
    "                                                             float *__restrict__ y, long long n) {\n"
    "  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = fmaxf(x[i], 0.0f) * 2.0f;\n"
    "}\n"
    "\"\"\"\n"
    "MK_CUDA_KERNELS = {\"relu_mul\": \"ffq\"}\n"
    "\n"
    "\n"
    "def run(v3):\n"
    "    y = torch.empty_like(v3)\n"
    "    n = y.numel()\n"
    "    _mk_cuda.launch(\"relu_mul\", ((n + 255) // 256,), (256,), (v3.contiguous(), y, n))\n"
    "    return y\n";

/* CUDA_MODULE with `from` replaced by `to` (once), in a ```python fence. */
static char *cuda_reply(const char *from, const char *to) {
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_puts(&b, "variant: cuda_relu_mul\n```python\n");
  const char *at = from ? strstr(CUDA_MODULE, from) : NULL;
  if (at) {
    mk_buf_append(&b, CUDA_MODULE, (size_t)(at - CUDA_MODULE));
    mk_buf_puts(&b, to);
    mk_buf_puts(&b, at + strlen(from));
  } else {
    mk_buf_puts(&b, CUDA_MODULE);
  }
  mk_buf_puts(&b, "```\n");
  char *s = mk_buf_steal(&b, NULL);
  mk_buf_free(&b);
  return s;
}

/* The reason a CUDA reply with `from` -> `to` is refused under `lang`
 * (empty when it is accepted). */
static void cuda_verdict(mk_kernel_backend lang, const char *from, const char *to, char *why, size_t n) {
  char *reply = cuda_reply(from, to);
  mk_candidate_list l = {0};
  mk_errmsg err = {{0}};
  int rc = mk_llm_parse_candidates(reply, lang, "relu_mul", "llm:m", 4, &l, &err);
  snprintf(why, n, "%s", rc == 1 ? "" : err.text);
  if (rc != 1 && rc != MK_EPARSE) snprintf(why, n, "unexpected status %d", rc);
  cands_free(&l);
  free(reply);
}

/* CUDA C++ replies: accepted where the language was asked for and the
 * contract is kept; otherwise refused with the reason, on the module's line
 * where there is one. */
MK_TEST(llm, parse_checks_cuda_modules_against_the_contract) {
  char *reply = cuda_reply(NULL, NULL);
  mk_candidate_list l = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_llm_parse_candidates(reply, MK_KBACKEND_CUDA, "relu_mul", "llm:m", 4, &l, &err) == 1);
  MK_CHECK_STR(l.items[0].name, "cuda_relu_mul");
  MK_CHECK_STR(l.items[0].source, CUDA_MODULE); /* nothing added: torch is imported */
  cands_free(&l);
  MK_CHECK_INT(mk_llm_parse_candidates(reply, MK_KBACKEND_AUTO, "relu_mul", "llm:m", 4, &l, &err), ==, 1);
  cands_free(&l);
  free(reply);

  char why[MK_ERRMSG_MAX];
  /* The language asked for. */
  cuda_verdict(MK_KBACKEND_TRITON, NULL, NULL, why, sizeof why);
  MK_CHECK(strstr(why, "it is a CUDA C++ candidate, but Triton was asked for") != NULL);
  MK_CHECK_INT(mk_llm_parse_candidates("```python\nimport torch\n\ndef run(v3):\n    return v3\n```\n",
                                       MK_KBACKEND_CUDA, "k", "llm:m", 4, &l, &err), ==, MK_EPARSE);
  MK_CHECK(strstr(err.text, "CUDA C++ was asked for, but it is not a CUDA C++ candidate") != NULL);
  MK_CHECK_INT(mk_llm_parse_candidates("```python\nimport torch\n\ndef run(v3):\n    return v3\n```\n",
                                       MK_KBACKEND_AUTO, "k", "llm:m", 4, &l, &err), ==, 1);
  cands_free(&l);
  /* Half a CUDA module is one: named as such, under either language. */
  cuda_verdict(MK_KBACKEND_CUDA, "MK_BACKEND = \"cuda\"\n", "", why, sizeof why);
  MK_CHECK(strstr(why, "declares MK_BACKEND = \"cuda\"") != NULL);
  cuda_verdict(MK_KBACKEND_TRITON, "MK_BACKEND = \"cuda\"\n", "", why, sizeof why);
  MK_CHECK(strstr(why, "Triton was asked for") != NULL);
  /* The contract's parts. */
  cuda_verdict(MK_KBACKEND_CUDA, "MK_CUDA_SOURCE = r\"\"\"", "CUDA = r\"\"\"", why, sizeof why);
  MK_CHECK(strstr(why, "no MK_CUDA_SOURCE = r\"\"\"...\"\"\" string") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "MK_CUDA_KERNELS = {\"relu_mul\": \"ffq\"}\n", "", why, sizeof why);
  MK_CHECK(strstr(why, "a CUDA candidate without MK_CUDA_KERNELS") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "\"ffq\"", "\"ffx\"", why, sizeof why);
  MK_CHECK(strstr(why, "signature \"ffx\" of relu_mul (f, b, q only)") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "{\"relu_mul\":", "{\"relu_mul2\":", why, sizeof why);
  MK_CHECK(strstr(why, "MK_CUDA_KERNELS lists relu_mul2, but MK_CUDA_SOURCE defines no __global__") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "extern \"C\" __global__", "__global__", why, sizeof why);
  MK_CHECK(strstr(why, "line 6: kernel relu_mul is not extern \"C\"") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "\"ffq\"", "\"fq\"", why, sizeof why);
  MK_CHECK(strstr(why, "line 6: kernel relu_mul takes 3 parameters, but its MK_CUDA_KERNELS signature \"fq\" has 2") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "\"ffq\"", "\"fff\"", why, sizeof why);
  MK_CHECK(strstr(why, "parameter 3 of kernel relu_mul is `long long n`") != NULL);
  MK_CHECK(strstr(why, "a float32 tensor (f) is passed as `float *`") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "\"ffq\"", "\"bfq\"", why, sizeof why);
  MK_CHECK(strstr(why, "parameter 1 of kernel relu_mul is `const float *__restrict__ x`") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "\"ffq\"", "\"qfq\"", why, sizeof why);
  MK_CHECK(strstr(why, "a Python int (q) is passed as a 64-bit integer") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "_mk_cuda.launch(\"relu_mul\"", "_mk_cuda.launch(\"relu\"", why, sizeof why);
  MK_CHECK(strstr(why, "line 18: _mk_cuda.launch(\"relu\", ...) launches a kernel that MK_CUDA_KERNELS does not list") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "    _mk_cuda.launch(", "    print(", why, sizeof why);
  MK_CHECK(strstr(why, "run() launches no CUDA kernel") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "// __global__", "#include <cuda_fp16.h>\n//", why, sizeof why);
  MK_CHECK(strstr(why, "line 5: MK_CUDA_SOURCE has an #include") != NULL);
  cuda_verdict(MK_KBACKEND_CUDA, "\"\"\"\nMK_CUDA_KERNELS", "\nMK_CUDA_KERNELS", why, sizeof why);
  MK_CHECK(strstr(why, "Python syntax error") != NULL); /* the string runs to the end */
  /* An extern "C" block would not survive composition (its kernels go into
   * a namespace, extern "C" dropped): each declaration says it. */
  cuda_verdict(MK_KBACKEND_CUDA, "// __global__ in a comment is not a kernel\nextern \"C\" __global__",
               "extern \"C\" {\n__global__", why, sizeof why);
  MK_CHECK(strstr(why, "line 5: an extern \"C\" { } block: write extern \"C\" on each kernel's own declaration") != NULL);
  /* Other spellings the contract allows: int sizes, void parameter lists,
   * kernels the table does not list, helpers. */
  cuda_verdict(MK_KBACKEND_CUDA, "extern \"C\" __global__",
               "__device__ float two() { return 2.0f; }\nextern \"C\" __global__", why, sizeof why);
  MK_CHECK_STR(why, "");
  cuda_verdict(MK_KBACKEND_CUDA, "long long n) {", "int n) {", why, sizeof why);
  MK_CHECK_STR(why, "");
  cuda_verdict(MK_KBACKEND_CUDA, "\"\"\"\nMK_CUDA_KERNELS", "__global__ void unused(void) {}\n\"\"\"\nMK_CUDA_KERNELS", why, sizeof why);
  MK_CHECK_STR(why, "");
  cuda_verdict(MK_KBACKEND_CUDA, "extern \"C\" __global__",
               "extern \"C\" {\n__global__ void other(void) {}\n}\nextern \"C\" __global__", why, sizeof why);
  MK_CHECK(strstr(why, "line 6: an extern \"C\" { } block") != NULL); /* even around another kernel */
  /* Several refused blocks: every reason, each named by its block. */
  mk_buf two;
  mk_buf_init(&two, 0);
  char *a = cuda_reply("\"ffq\"", "\"fq\"");
  char *b = cuda_reply("extern \"C\" __global__", "__global__");
  mk_buf_printf(&two, "%s\n%s", a, b);
  MK_CHECK_INT(mk_llm_parse_candidates(mk_buf_cstr(&two), MK_KBACKEND_CUDA, "k", "llm:m", 4, &l, &err), ==,
               MK_EPARSE);
  MK_CHECK(strstr(err.text, "code block 1: line 6: kernel relu_mul takes 3 parameters") != NULL);
  MK_CHECK(strstr(err.text, "code block 2: line 6: kernel relu_mul is not extern") != NULL);
  free(a);
  free(b);
  mk_buf_free(&two);
}

MK_TEST(llm, parse_json_from_fences_or_prose) {
  cJSON *j = NULL;
  mk_errmsg err;
  MK_REQUIRE(mk_llm_parse_json("ok:\n```json\n{\"decisions\": []}\n```\n", &j, &err) == 0);
  MK_CHECK(cJSON_IsArray(cJSON_GetObjectItem(j, "decisions")));
  cJSON_Delete(j);
  MK_REQUIRE(mk_llm_parse_json("I'd merge {them}. {\"decisions\": [{\"action\": \"merge\"}]} done", &j, &err) == 0);
  MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "decisions")), ==, 1);
  cJSON_Delete(j);
  MK_CHECK_INT(mk_llm_parse_json("```json\n{\"decisions\": [\n```", &j, &err), ==, MK_EPARSE);
  MK_CHECK(j == NULL);
}
