/* test_lsp_engine.c — the engine backend's pure parts: the static
 * checks' shape info, the line map that moves results onto edited text,
 * and the rendering of a session view (made up here, one subkernel per
 * state) into findings, regions, hovers and actions. The backend on a
 * real session is exercised in test_lsp_server.c (engine_session_*). */
#include "lsp_engine_internal.h"
#include "mk_test.h"
#include "mk_verify.h"

#include <stdlib.h>
#include <string.h>

/* Short names keep mk_test's message buffer within bounds. */
#define CHECK_S(a, b)    \
  do {                   \
    const char *x_ = (a); \
    const char *y_ = (b); \
    MK_CHECK_STR(x_, y_); \
  } while (0)

static const char *MODULE =
    "import torch\n"                                   /* 0 */
    "import torch.nn as nn\n"                          /* 1 */
    "\n"                                               /* 2 */
    "class Model(nn.Module):\n"                        /* 3 */
    "    def __init__(self):\n"                        /* 4 */
    "        super().__init__()\n"                     /* 5 */
    "\n"                                               /* 6 */
    "    def forward(self, x):\n"                      /* 7 */
    "        x = torch.relu(x)\n"                      /* 8 */
    "        x = x * 2\n"                              /* 9 */
    "        x = torch.tanh(x)\n"                      /* 10 */
    "        y = x + 1\n"                              /* 11 */
    "        return y - 3\n"                           /* 12 */
    "\n"                                               /* 13 */
    "def get_inputs():\n"                              /* 14 */
    "    return [torch.randn(4, 8)]\n"                 /* 15 */
    "\n"                                               /* 16 */
    "def get_init_inputs():\n"                         /* 17 */
    "    return []\n";                                 /* 18 */

MK_TEST(lsp_engine, static_info) {
  mk_lsp_analysis a;
  lsp_engine_static_info info;
  MK_CHECK_INT(lsp_engine_static_check(MODULE, strlen(MODULE), &a, &info), ==, 0);
  MK_CHECK_INT(a.nfindings, ==, 0);
  MK_CHECK(info.capturable);
  MK_CHECK(!info.composed);
  MK_CHECK_INT(info.forward_line, ==, 7);
  MK_CHECK_INT(info.forward_end_line, ==, 12);
  mk_lsp_analysis_free(&a);
  const char *composed = "# ModelNew composed by MKEvolve 0.1.0 from m.py (class Model).\n"
                         "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                         "        return x\ndef get_inputs():\n    return []\n"
                         "def get_init_inputs():\n    return []\n"
                         "class ModelNew(Model):\n    pass\n";
  MK_CHECK_INT(lsp_engine_static_check(composed, strlen(composed), &a, &info), ==, 0);
  MK_CHECK(info.composed);
  MK_CHECK(!info.capturable); /* an output: never captured */
  mk_lsp_analysis_free(&a);
  const char *broken = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x:\n";
  MK_CHECK_INT(lsp_engine_static_check(broken, strlen(broken), &a, &info), ==, 0);
  MK_CHECK(!info.capturable);
  MK_CHECK_INT(a.nfindings, >=, 1);
  mk_lsp_analysis_free(&a);
}

MK_TEST(lsp_engine, line_map) {
  lsp_engine_line_map m;
  lsp_engine_line_map_build(&m, "a\nb\nc\nd\n", "a\nb\nc\nd\n");
  MK_CHECK(m.identical);
  MK_CHECK_INT(lsp_engine_line_map_fwd(&m, 3), ==, 3);
  /* two lines inserted at the top: everything moves by two */
  lsp_engine_line_map_build(&m, "a\nb\nc\nd\n", "x\ny\na\nb\nc\nd\n");
  MK_CHECK(!m.identical);
  MK_CHECK_INT(lsp_engine_line_map_fwd(&m, 0), ==, 2);
  MK_CHECK_INT(lsp_engine_line_map_fwd(&m, 3), ==, 5);
  MK_CHECK_INT(lsp_engine_line_map_back(&m, 5), ==, 3);
  MK_CHECK_INT(lsp_engine_line_map_back(&m, 1), ==, -1);
  /* line c edited: it has no counterpart, its neighbours keep theirs */
  lsp_engine_line_map_build(&m, "a\nb\nc\nd\n", "a\nb\nC!\nd\n");
  MK_CHECK_INT(lsp_engine_line_map_fwd(&m, 1), ==, 1);
  MK_CHECK_INT(lsp_engine_line_map_fwd(&m, 2), ==, -1);
  MK_CHECK_INT(lsp_engine_line_map_fwd(&m, 3), ==, 3);
  /* a line deleted in the middle */
  lsp_engine_line_map_build(&m, "a\nb\nc\nd\ne", "a\nb\nd\ne");
  MK_CHECK_INT(lsp_engine_line_map_fwd(&m, 2), ==, -1);
  MK_CHECK_INT(lsp_engine_line_map_fwd(&m, 3), ==, 2);
  MK_CHECK_INT(lsp_engine_line_map_fwd(&m, 4), ==, 3);
  /* no old text: identity (nothing to move) */
  lsp_engine_line_map_build(&m, NULL, "a\n");
  MK_CHECK(m.identical);
}

/* A made-up view: sk0 verified (timed), sk1 failed, sk2 reference. */
typedef struct fixture {
  mk_session_variant v0[3], v1[2], v2[1];
  mk_session_subkernel sk[3];
  int l0[1], l1[2], l2[2];
  mk_session_module m;
} fixture;

static mk_session_variant variant(const char *name, const char *status, double sp, bool chosen) {
  return (mk_session_variant){.name = name, .origin = "builtin", .status = status,
                              .reason = strcmp(status, "ok") ? "max abs error 0.5 at [0, 3]" : "",
                              .time_ms = sp > 0 ? 1.0 / sp : -1, .min_ms = sp > 0 ? 0.9 / sp : -1,
                              .speedup_eager = sp, .speedup_compile = sp > 0 ? sp / 1.5 : -1,
                              .max_abs_err = strcmp(status, "ok") ? 0.5 : 0, .trials_passed = 5,
                              .trials = 5, .tokens = 0, .chosen = chosen};
}

static void fixture_init(fixture *f, bool timed) {
  memset(f, 0, sizeof *f);
  f->v0[0] = variant("reference", "ok", timed ? 1.0 : -1, false);
  f->v0[1] = variant("triton_relu_b1024", "ok", timed ? 1.8 : -1, true);
  f->v0[2] = variant("triton_relu_b256", "ok", timed ? 1.6 : -1, false);
  f->v1[0] = variant("reference", "ok", -1, true);
  f->v1[1] = variant("triton_tanh_bad", "mismatch", -1, false);
  f->v2[0] = variant("reference", "ok", -1, true);
  f->l0[0] = 9;
  f->l1[0] = 10, f->l1[1] = 11;
  f->l2[0] = 12, f->l2[1] = 13;
  f->sk[0] = (mk_session_subkernel){0, "relu_mul", "relu + mul", 9, 10, f->l0, 1, MK_SK_VERIFIED,
                                    f->v0, 3, 1, "triton_relu_b1024: 1.80x vs eager"};
  f->sk[1] = (mk_session_subkernel){1, "tanh", "tanh", 11, 11, f->l1, 1, MK_SK_FAILED, f->v1, 2, 0,
                                    "no verified variant yet (1 tried)"};
  f->sk[2] = (mk_session_subkernel){2, "add_sub", "add + sub", 12, 13, f->l2, 2, MK_SK_REFERENCE,
                                    f->v2, 1, 0, "PyTorch reference (not evolved yet)"};
  f->m = (mk_session_module){.path = "/w/m.py", .class_name = "Model",
                             .device = timed ? "NVIDIA H200" : "cpu", .timed = timed, .note = "",
                             .subkernels = f->sk, .nsubkernels = 3, .modelnew_path = NULL,
                             .eager_ms = -1, .compile_ms = -1, .ours_ms = -1};
}

static const mk_lsp_finding *finding(const mk_lsp_analysis *a, const char *code) {
  for (int i = 0; i < a->nfindings; i++)
    if (a->findings[i].code && strcmp(a->findings[i].code, code) == 0) return &a->findings[i];
  return NULL;
}

static int count_actions(const mk_lsp_analysis *a, const char *command) {
  int n = 0;
  for (int i = 0; i < a->nregions; i++)
    for (int k = 0; k < a->regions[i].nactions; k++) n += strcmp(a->regions[i].actions[k].command, command) == 0;
  return n;
}

static void render(const fixture *f, const char *text, const char *captured, bool engaged,
                   mk_lsp_analysis *a) {
  lsp_engine_static_info info;
  MK_CHECK_INT(lsp_engine_static_check(text, strlen(text), a, &info), ==, 0);
  lsp_engine_line_map map;
  lsp_engine_line_map_build(&map, captured, text);
  const char *composed = "# header\n# ---- sk0 relu_mul: x ----\nx\n# ---- sk1 tanh ----\nclass ModelNew:\n";
  lsp_engine_render_in in = {.uri = "file:///w/m.py", .text = text, .info = &info, .view = &f->m,
                         .map = &map, .engaged = engaged, .composed_path = "/w/m_new.py",
                         .composed_text = composed};
  lsp_engine_render(&in, a);
}

MK_TEST(lsp_engine, render_states) {
  fixture f;
  fixture_init(&f, true);
  mk_lsp_analysis a;
  render(&f, MODULE, MODULE, false, &a);
  const mk_lsp_finding *ok = finding(&a, "subkernel-verified");
  MK_REQUIRE(ok != NULL);
  MK_CHECK_INT(ok->severity, ==, MK_LSP_SEV_INFO);
  CHECK_S(ok->message, "relu_mul: 1.80x vs eager, 1.20x vs torch.compile, verified 5/5 — triton_relu_b1024");
  MK_CHECK_INT(ok->range.line, ==, 8);   /* 1-based 9 -> 0-based 8 */
  MK_CHECK_INT(ok->range.col, ==, 8);    /* first non-blank */
  MK_CHECK_INT(ok->range.end_line, ==, 9);
  MK_REQUIRE(ok->nnotes == 1);
  CHECK_S(ok->notes[0].path, "/w/m_new.py");
  MK_CHECK_INT(ok->notes[0].range.line, ==, 1);
  const mk_lsp_finding *bad = finding(&a, "subkernel-incorrect");
  MK_REQUIRE(bad != NULL);
  MK_CHECK_INT(bad->severity, ==, MK_LSP_SEV_ERROR);
  MK_CHECK(strstr(bad->message, "max abs error 0.5") != NULL);
  MK_CHECK(strstr(bad->message, "triton_tanh_bad: mismatch") != NULL);
  MK_CHECK_INT(bad->notes[0].range.line, ==, 3);
  const mk_lsp_finding *ref = finding(&a, "subkernel-unverified");
  MK_REQUIRE(ref != NULL);
  MK_CHECK_INT(ref->severity, ==, MK_LSP_SEV_HINT); /* untouched module: a hint */
  MK_CHECK_INT(ref->range.line, ==, 11);
  MK_CHECK_INT(ref->notes[0].range.line, ==, 4);   /* no section: the ModelNew class */
  /* regions: forward + one per subkernel; swaps only to verified, unchosen variants */
  MK_CHECK_INT(a.nregions, ==, 4);
  MK_CHECK_INT(count_actions(&a, ENGINE_CMD_SWAP), ==, 1);
  MK_CHECK_INT(count_actions(&a, ENGINE_CMD_RESTORE), ==, 1);
  MK_CHECK_INT(count_actions(&a, ENGINE_CMD_EVOLVE), ==, 3);
  MK_CHECK_INT(count_actions(&a, ENGINE_CMD_DECOMPOSE), ==, 1);
  MK_CHECK_INT(count_actions(&a, ENGINE_CMD_EVOLVE_ALL), ==, 1);
  const mk_lsp_region *fwd = &a.regions[0];
  MK_CHECK_INT(fwd->range.line, ==, 7);
  CHECK_S(fwd->label, "mkevolve: Decompose into 3 subkernels");
  CHECK_S(fwd->actions[0].command, ENGINE_CMD_DECOMPOSE);
  const mk_lsp_region *r0 = &a.regions[1];
  bool swap_title = false;
  for (int k = 0; k < r0->nactions; k++)
    swap_title |= strcmp(r0->actions[k].title, "Swap subkernel relu_mul → triton_relu_b256 (1.60x)") == 0;
  MK_CHECK(swap_title);
  MK_REQUIRE(r0->hover != NULL);
  MK_CHECK(strstr(r0->hover, "| | variant | origin | status | median ms |") != NULL);
  MK_CHECK(strstr(r0->hover, "| ✓ | triton_relu_b1024 | builtin | ok | 0.556 | 0.500 | 1.80x | 1.20x | 5/5 | 0 |") != NULL);
  MK_CHECK(strstr(r0->hover, "full-FP32") == NULL); /* every variant passed the plain check */
  mk_lsp_analysis_free(&a);
  /* A variant verified against the FP32 result (a TF32 reference) says so on hover. */
  f.v0[2].ref_tf32_noise = 5.4e-4;
  f.v0[2].max_abs_err = 2e-4;
  render(&f, MODULE, MODULE, false, &a);
  MK_REQUIRE(a.nregions > 1 && a.regions[1].hover != NULL);
  MK_CHECK(strstr(a.regions[1].hover, "Checked against the full-FP32 result (PyTorch's reference runs TF32):\n"
                                      "- `triton_relu_b256`: max abs error 0.0002; the reference's own 0.00054\n") != NULL);
  mk_lsp_analysis_free(&a);
  f.v0[2].ref_tf32_noise = 0;
  /* once the user decomposed, an unverified subkernel is a warning, and
   * the forward lens runs Evolve all */
  render(&f, MODULE, MODULE, true, &a);
  MK_CHECK_INT(finding(&a, "subkernel-unverified")->severity, ==, MK_LSP_SEV_WARNING);
  CHECK_S(a.regions[0].actions[0].command, ENGINE_CMD_EVOLVE_ALL);
  mk_lsp_analysis_free(&a);
}

MK_TEST(lsp_engine, render_untimed_and_slower) {
  fixture f;
  fixture_init(&f, false);
  mk_lsp_analysis a;
  render(&f, MODULE, MODULE, true, &a);
  CHECK_S(finding(&a, "subkernel-verified")->message,
               "relu_mul: verified 5/5 (untimed on cpu) — triton_relu_b1024");
  mk_lsp_analysis_free(&a);
  /* timed, verified variants exist but none beats PyTorch: a warning */
  fixture_init(&f, true);
  f.v0[1] = variant("triton_relu_b1024", "ok", 0.7, false);
  f.v0[2] = variant("triton_relu_b256", "ok", 0.8, false);
  f.sk[0].chosen = 0;
  f.sk[0].state = MK_SK_SLOWER;
  render(&f, MODULE, MODULE, true, &a);
  const mk_lsp_finding *slow = finding(&a, "subkernel-slower");
  MK_REQUIRE(slow != NULL);
  MK_CHECK_INT(slow->severity, ==, MK_LSP_SEV_WARNING);
  MK_CHECK(strstr(slow->message, "0.80x vs eager") != NULL);
  MK_CHECK_INT(count_actions(&a, ENGINE_CMD_RESTORE), ==, 0);
  mk_lsp_analysis_free(&a);
}

MK_TEST(lsp_engine, render_follows_edits) {
  fixture f;
  fixture_init(&f, true);
  mk_lsp_analysis a;
  /* two comment lines above the class: every result moves down by two */
  char *shifted = malloc(strlen(MODULE) + 64);
  MK_REQUIRE(shifted != NULL);
  strcpy(shifted, "# one\n# two\n");
  strcat(shifted, MODULE);
  render(&f, shifted, MODULE, false, &a);
  MK_CHECK_INT(finding(&a, "subkernel-verified")->range.line, ==, 10);
  MK_CHECK_INT(finding(&a, "subkernel-unverified")->range.line, ==, 13);
  mk_lsp_analysis_free(&a);
  /* the tanh line edited (unsaved): its result is withheld, the others stay */
  char *edited = mk_strdup(MODULE);
  char *at = strstr(edited, "torch.tanh");
  memcpy(at, "torch.sinh", 10);
  render(&f, edited, MODULE, false, &a);
  MK_CHECK(finding(&a, "subkernel-incorrect") == NULL);
  MK_CHECK(finding(&a, "subkernel-verified") != NULL);
  MK_CHECK(finding(&a, "subkernel-unverified") != NULL);
  mk_lsp_analysis_free(&a);
  free(shifted);
  free(edited);
}

MK_TEST(lsp_engine, report_markdown) {
  fixture f;
  fixture_init(&f, true);
  f.m.ours_ms = 1.0, f.m.eager_ms = 1.5, f.m.compile_ms = 1.2;
  mk_buf b;
  mk_buf_init(&b, 0);
  lsp_engine_report_markdown(&f.m, &b);
  const char *s = mk_buf_cstr(&b);
  MK_CHECK(strstr(s, "# MKEvolve report: /w/m.py") != NULL);
  MK_CHECK(strstr(s, "- whole program: 1.00 ms (eager 1.50 ms, torch.compile 1.20 ms)") != NULL);
  MK_CHECK(strstr(s, "## **sk2 · add_sub**") != NULL);
  MK_CHECK(strstr(s, "`triton_tanh_bad`: max abs error 0.5 at [0, 3] (max abs error 0.5)") != NULL);
  MK_CHECK(strstr(s, "torch.compile's own output") == NULL); /* not checked */
  /* a torch.compile baseline that fails the comparison ours passed is said */
  char note[256];
  f.m.compile_check = -1, f.m.compile_err = 2.5e-3;
  f.m.compile_note = mk_verify_compile_check_note(f.m.compile_check, f.m.compile_err, note, sizeof note);
  mk_buf_reset(&b);
  lsp_engine_report_markdown(&f.m, &b);
  MK_CHECK(strstr(mk_buf_cstr(&b), "- torch.compile's own output fails the comparison ours passed "
                                   "(max abs error 0.0025 against eager)\n") != NULL);
  mk_buf_free(&b);
}
