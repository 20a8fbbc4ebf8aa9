/* test_frontend.c — positions, parsing, incremental edits and outlines,
 * over hand-written inputs, broken inputs, a generated 10 MB file and
 * every KernelBench problem in ../shared (skipped when absent). */
#include "mk_buf.h"
#include "mk_frontend.h"
#include "mk_test.h"
#include "mk_time.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* ---- positions ------------------------------------------------------------ */

MK_TEST(frontend, lines_with_every_terminator) {
  const char *t = "a\r\nbc\rd\n\nlast";
  mk_text_index ix;
  MK_REQUIRE(mk_text_index_init(&ix, t, strlen(t)) == 0);
  MK_CHECK_INT(ix.nlines, ==, 5);
  MK_CHECK_INT(mk_text_line_start(&ix, 1), ==, 3);
  MK_CHECK_INT(mk_text_line_end(&ix, 0), ==, 1);
  MK_CHECK_INT(mk_text_line_end(&ix, 1), ==, 5);
  MK_CHECK_INT(mk_text_line_start(&ix, 2), ==, 6);
  MK_CHECK_INT(mk_text_line_end(&ix, 2), ==, 7);
  MK_CHECK_INT(mk_text_line_end(&ix, 3), ==, 8);
  MK_CHECK_INT(mk_text_line_end(&ix, 4), ==, 13);
  MK_CHECK_INT(mk_text_line_end(&ix, 99), ==, 13); /* clamped */
  MK_CHECK_INT(mk_text_line_start(&ix, -3), ==, 0);
  int line, col;
  mk_text_offset_to_bytecol(&ix, 2, &line, &col); /* between \r and \n */
  MK_CHECK_INT(line, ==, 0);
  MK_CHECK_INT(col, ==, 1);
  mk_text_offset_to_bytecol(&ix, 1000, &line, &col);
  MK_CHECK_INT(line, ==, 4);
  MK_CHECK_INT(col, ==, 4);
  MK_CHECK_INT(mk_text_bytecol_to_offset(&ix, 1, 99), ==, 5);
  MK_CHECK_INT(mk_text_bytecol_to_offset(&ix, 7, 0), ==, 13);
  MK_CHECK_INT(mk_text_bytecol_to_offset(&ix, -1, 5), ==, 0);
  mk_text_index_free(&ix);
  MK_REQUIRE(mk_text_index_init(&ix, "", 0) == 0);
  MK_CHECK_INT(ix.nlines, ==, 1);
  MK_CHECK_INT(mk_text_line_end(&ix, 0), ==, 0);
  mk_text_index_free(&ix);
  MK_REQUIRE(mk_text_index_init(&ix, "x\n", 2) == 0);
  MK_CHECK_INT(ix.nlines, ==, 2); /* the empty line after the final newline */
  mk_text_index_free(&ix);
}

MK_TEST(frontend, byte_columns_round_down_to_characters) {
  /* é: 2 bytes; 中: 3 bytes; 😀: 4 bytes */
  const char *t = "x = \"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\" # z\n";
  mk_text_index ix;
  MK_REQUIRE(mk_text_index_init(&ix, t, strlen(t)) == 0);
  int line, col;
  mk_text_offset_to_bytecol(&ix, 12, &line, &col); /* inside 😀 */
  MK_CHECK_INT(col, ==, 10);
  mk_text_offset_to_bytecol(&ix, 9, &line, &col); /* inside 中 */
  MK_CHECK_INT(col, ==, 7);
  MK_CHECK_INT(mk_text_bytecol_to_offset(&ix, 0, 500), ==, mk_text_line_end(&ix, 0));
  mk_text_index_free(&ix);
}

MK_TEST(frontend, invalid_utf8_bytes_are_characters) {
  /* a stray continuation, 0xFF, an overlong '/', a UTF-16 surrogate, a truncated 3-byte sequence */
  const char t[] = "\x80\xFF\xC0\xAF\xED\xA0\x80\xE4\xB8z";
  size_t len = sizeof t - 1;
  mk_text_index ix;
  MK_REQUIRE(mk_text_index_init(&ix, t, len) == 0);
  /* every byte is its own character: every offset is a column and back */
  for (size_t off = 0; off <= len; off++) {
    int line, col;
    mk_text_offset_to_bytecol(&ix, off, &line, &col);
    MK_CHECK_INT(col, ==, off);
    MK_CHECK_INT(mk_text_bytecol_to_offset(&ix, line, col), ==, off);
  }
  mk_text_index_free(&ix);
}

MK_TEST(frontend, roundtrip_every_offset_of_mixed_text) {
  const char *t = "def f(\xC3\xA9):\r\n\treturn '\xF0\x9F\x98\x80'\r# \xE4\xB8\xAD\n\n";
  mk_text_index ix;
  MK_REQUIRE(mk_text_index_init(&ix, t, strlen(t)) == 0);
  for (size_t off = 0; off <= ix.len; off++) {
    int line, col;
    mk_text_offset_to_bytecol(&ix, off, &line, &col);
    MK_CHECK_INT(line, ==, mk_text_line_of(&ix, off));
    size_t back = mk_text_bytecol_to_offset(&ix, line, col);
    MK_CHECK(back <= off); /* exact unless inside a character or a terminator */
  }
  mk_text_index_free(&ix);
}

/* ---- outline ----------------------------------------------------------------- */

static const char *kb_sample =
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "class Base(nn.Module):\n"
    "    pass\n"
    "\n"
    "class Model(Base):\n"
    "    \"\"\"Docs.\"\"\"\n"
    "    def __init__(self, in_features, *args, scale: float = 2.0, **kw):\n"
    "        super().__init__()\n"
    "        self.linear = nn.Linear(in_features, 8)\n"
    "\n"
    "    @torch.no_grad()\n"
    "    def forward(self, x, y=None):\n"
    "        \"\"\"Forward docs.\"\"\"\n"
    "        x = self.linear(x)  # gemm\n"
    "        for i in range(2):\n"
    "            x = x * 2\n"
    "            if i:\n"
    "                x = torch.relu(x)\n"
    "            else:\n"
    "                x = x - 1\n"
    "        return x\n"
    "\n"
    "class Helper:\n"
    "    def forward(self):\n"
    "        pass\n"
    "\n"
    "def get_inputs():\n"
    "    return [torch.rand(4, 8)]\n"
    "\n"
    "def get_init_inputs():\n"
    "    return [8]\n";

MK_TEST(frontend, outline_of_a_module) {
  mk_pyoutline o;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_frontend_outline_text(kb_sample, strlen(kb_sample), NULL, &o, &err) == 0);
  MK_CHECK_INT(o.ndiags, ==, 0);
  MK_CHECK(!mk_pyoutline_has_errors(&o));
  MK_CHECK_INT(o.nclasses, ==, 3);
  MK_REQUIRE(o.target == 1);
  const mk_pyclass *m = &o.classes[1];
  MK_CHECK_STR(m->name, "Model");
  MK_CHECK_STR(m->bases, "Base");
  MK_CHECK(m->is_module);             /* through Base */
  MK_CHECK(!o.classes[2].is_module);  /* Helper */
  MK_CHECK(mk_pyoutline_class(&o, "Helper") == NULL);
  MK_CHECK(mk_pyoutline_class(&o, "Model") == m);
  MK_CHECK_INT(m->range.line, ==, 7);
  MK_CHECK_INT(m->name_range.col, ==, 6);
  MK_REQUIRE(m->init.found);
  MK_CHECK_INT(m->init.nparams, ==, 5);
  if (m->init.nparams == 5) {
    MK_CHECK_STR(m->init.params[2], "*args");
    MK_CHECK_STR(m->init.params[3], "scale");
    MK_CHECK_STR(m->init.params[4], "**kw");
  }
  MK_REQUIRE(m->forward.found);
  MK_CHECK_INT(m->forward.range.line, ==, 13); /* decorator included */
  MK_CHECK_INT(m->forward.name_range.line, ==, 14);
  MK_CHECK_INT(m->forward.body.line, ==, 15);
  MK_CHECK_INT(m->forward.body.end_line, ==, 23);
  MK_CHECK_INT(m->forward.nparams, ==, 3);
  MK_CHECK_STR(m->forward.params[2], "y");
  /* docstring, x=, for (header), x*2, if (header), relu, x-1, return */
  static const struct {
    int line, end_line, depth;
    bool compound;
    const char *kind;
  } want[] = {
      {15, 15, 0, false, "docstring"},     {16, 16, 0, false, "expression_statement"},
      {17, 17, 0, true, "for_statement"},  {18, 18, 1, false, "expression_statement"},
      {19, 19, 1, true, "if_statement"},   {20, 20, 2, false, "expression_statement"},
      {22, 22, 2, false, "expression_statement"}, {23, 23, 0, false, "return_statement"},
  };
  MK_CHECK_INT(m->nstmts, ==, 8);
  for (int i = 0; i < m->nstmts && i < 8; i++) {
    MK_CHECK_INT(m->stmts[i].range.line, ==, want[i].line);
    MK_CHECK_INT(m->stmts[i].range.end_line, ==, want[i].end_line);
    MK_CHECK_INT(m->stmts[i].depth, ==, want[i].depth);
    MK_CHECK(m->stmts[i].compound == want[i].compound);
    MK_CHECK_STR(m->stmts[i].kind, want[i].kind);
  }
  MK_CHECK_INT(m->stmts[1].range.col, ==, 8);
  MK_CHECK_INT(m->stmts[1].range.end_col, ==, 26); /* the trailing comment is not part of it */
  MK_CHECK(o.get_inputs.found);
  MK_CHECK_INT(o.get_inputs.range.line, ==, 29);
  MK_CHECK(o.get_init_inputs.found);
  mk_pyoutline_free(&o);
  mk_pyoutline_free(&o); /* idempotent */
}

static bool has_diag(const mk_pyoutline *o, const char *code, const char *needle, mk_diag_severity sev) {
  for (int i = 0; i < o->ndiags; i++)
    if (strcmp(o->diags[i].code, code) == 0 && strstr(o->diags[i].message, needle) && o->diags[i].severity == sev)
      return true;
  return false;
}

MK_TEST(frontend, missing_pieces_are_diagnosed) {
  mk_pyoutline o;
  mk_errmsg err = {{0}};
  const char *no_model = "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n";
  MK_REQUIRE(mk_frontend_outline_text(no_model, strlen(no_model), NULL, &o, &err) == 0);
  MK_CHECK_INT(o.target, ==, -1);
  MK_CHECK(has_diag(&o, "missing-class", "no nn.Module class named Model", MK_DIAG_ERROR));
  MK_CHECK(has_diag(&o, "missing-get-inputs", "get_inputs()", MK_DIAG_ERROR));
  MK_CHECK(has_diag(&o, "missing-get-init-inputs", "get_init_inputs()", MK_DIAG_WARNING));
  MK_CHECK(mk_pyoutline_has_errors(&o));
  mk_pyoutline_free(&o);
  /* the user may point at another class */
  MK_REQUIRE(mk_frontend_outline_text(no_model, strlen(no_model), "Net", &o, &err) == 0);
  MK_CHECK_INT(o.target, ==, 0);
  MK_CHECK(!has_diag(&o, "missing-class", "", MK_DIAG_ERROR));
  mk_pyoutline_free(&o);
  const char *plain = "class Model:\n    def forward(self):\n        pass\ndef get_inputs():\n    return []\n";
  MK_REQUIRE(mk_frontend_outline_text(plain, strlen(plain), NULL, &o, &err) == 0);
  MK_CHECK(has_diag(&o, "not-a-module", "class Model does not derive from nn.Module", MK_DIAG_ERROR));
  MK_CHECK_INT(o.diags[0].range.line, ==, 1);
  MK_CHECK_INT(o.diags[0].range.col, ==, 6);
  mk_pyoutline_free(&o);
  const char *nofwd = "class Model(nn.Module):\n    def __init__(self):\n        pass\n";
  MK_REQUIRE(mk_frontend_outline_text(nofwd, strlen(nofwd), NULL, &o, &err) == 0);
  MK_CHECK(has_diag(&o, "missing-forward", "class Model has no forward method", MK_DIAG_ERROR));
  mk_pyoutline_free(&o);
}

MK_TEST(frontend, syntax_errors_have_positions) {
  mk_pyoutline o;
  mk_errmsg err = {{0}};
  const char *bad =
      "import torch\n"
      "class Model(torch.nn.Module):\n"
      "    def forward(self, x):\n"
      "        y = torch.relu(x\n"
      "        return y $ 2\n"
      "def get_inputs():\n"
      "    return [torch.rand(2)]\n";
  MK_REQUIRE(mk_frontend_outline_text(bad, strlen(bad), NULL, &o, &err) == 0);
  MK_CHECK(o.nsyntax_errors >= 1);
  bool on_line = false;
  for (int i = 0; i < o.ndiags; i++)
    if (strcmp(o.diags[i].code, "syntax") == 0) {
      MK_CHECK(strncmp(o.diags[i].message, "syntax error", 12) == 0);
      on_line |= o.diags[i].range.line >= 4 && o.diags[i].range.line <= 5;
    }
  MK_CHECK(on_line);
  /* error-tolerant: the rest of the file is still outlined */
  MK_CHECK(o.get_inputs.found);
  MK_CHECK(o.target >= 0);
  mk_pyoutline_free(&o);
  /* a missing token is reported as such */
  const char *missing = "def get_inputs(:\n    return [1]\n";
  MK_REQUIRE(mk_frontend_outline_text(missing, strlen(missing), NULL, &o, &err) == 0);
  MK_CHECK(o.nsyntax_errors >= 1);
  mk_pyoutline_free(&o);
}

MK_TEST(frontend, broken_inputs_never_crash) {
  static const char *const inputs[] = {
      "",
      "\xEF\xBB\xBF" "class Model(nn.Module):\n    def forward(self, x):\n        return x\n",
      "class Model(nn.Module)\n    def forward(self, x)\n        return x\n",
      "def get_inputs():\n\treturn [1]\n        x = 1\n",
      "s = \"unterminated\nclass Model(nn.Module):\n",
      "class (nn.Module):\n    def forward(self):\n        pass\n",
      "class Model(nn.Module):\n    def forward\n",
      "@@@\n)))]]]}}}\n\x01\x02\x03\xFF\xFE\n",
      "class Model(nn.Module):\r\n    def forward(self, x):\r\n        return x\r\ndef get_inputs():\r\n    return []\r\n",
  };
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
    mk_pyoutline o;
    mk_errmsg err = {{0}};
    MK_CHECK_INT(mk_frontend_outline_text(inputs[i], strlen(inputs[i]), NULL, &o, &err), ==, 0);
    for (int d = 0; d < o.ndiags; d++) {
      MK_CHECK(o.diags[d].range.line >= 1);
      MK_CHECK(o.diags[d].range.start <= o.diags[d].range.end);
      MK_CHECK(o.diags[d].message && o.diags[d].message[0]);
    }
    mk_pyoutline_free(&o);
  }
  /* NUL bytes inside the text, deep nesting, a very long line */
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_append(&b, "x = 1\0\0\0y = 2\n", 15);
  for (int i = 0; i < 20000; i++) mk_buf_putc(&b, '(');
  mk_buf_puts(&b, "\nz = '");
  for (int i = 0; i < 200000; i++) mk_buf_putc(&b, 'a');
  mk_buf_puts(&b, "'\n");
  mk_pyoutline o;
  mk_errmsg err = {{0}};
  MK_CHECK_INT(mk_frontend_outline_text(b.data, b.len, NULL, &o, &err), ==, 0);
  MK_CHECK(o.nsyntax_errors >= 1);
  MK_CHECK(o.ndiags <= MK_FRONTEND_MAX_SYNTAX_DIAGS + 3);
  mk_pyoutline_free(&o);
  mk_buf_free(&b);
  /* CRLF file above: positions count CRLF as one terminator */
  const char *crlf = inputs[8];
  MK_REQUIRE(mk_frontend_outline_text(crlf, strlen(crlf), NULL, &o, &err) == 0);
  MK_REQUIRE(o.target == 0);
  MK_CHECK_INT(o.classes[0].forward.range.line, ==, 2);
  MK_CHECK_INT(o.classes[0].stmts[0].range.line, ==, 3);
  MK_CHECK_INT(o.classes[0].stmts[0].range.end_col, ==, 16);
  MK_CHECK_INT(o.ndiags, ==, 1); /* only the missing get_init_inputs warning */
  mk_pyoutline_free(&o);
}

/* ---- documents and incremental edits ------------------------------------------------ */

static char *tree_string(const mk_pydoc *d) { return ts_node_string(mk_pydoc_root(d)); }

MK_TEST(frontend, edits_reparse_incrementally) {
  mk_pydoc *d;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_pydoc_new(kb_sample, strlen(kb_sample), &d, &err) == 0);
  size_t len;
  const char *text = mk_pydoc_text(d, &len);
  /* rename Model to Net at its name */
  const char *at = strstr(text, "class Model") + 6;
  size_t start = (size_t)(at - text);
  MK_REQUIRE(mk_pydoc_edit(d, start, start + 5, "Net", 3, &err) == 0);
  mk_pyoutline o;
  MK_REQUIRE(mk_frontend_outline(d, "Net", &o, &err) == 0);
  MK_CHECK(o.target == 1);
  MK_CHECK_INT(o.ndiags, ==, 0);
  mk_pyoutline_free(&o);
  /* break line 16 (0-based 15), then repair it */
  size_t col8 = mk_text_bytecol_to_offset(mk_pydoc_index(d), 15, 8);
  MK_REQUIRE(mk_pydoc_edit(d, col8, col8 + 1, "(", 1, &err) == 0);
  MK_REQUIRE(mk_frontend_outline(d, "Net", &o, &err) == 0);
  MK_CHECK(o.nsyntax_errors >= 1);
  mk_pyoutline_free(&o);
  MK_REQUIRE(mk_pydoc_edit(d, col8, col8 + 1, "x", 1, &err) == 0);
  MK_REQUIRE(mk_frontend_outline(d, "Net", &o, &err) == 0);
  MK_CHECK_INT(o.nsyntax_errors, ==, 0);
  mk_pyoutline_free(&o);
  /* bad ranges leave the document alone */
  text = mk_pydoc_text(d, &len);
  MK_CHECK_INT(mk_pydoc_edit(d, 5, 4, "", 0, &err), ==, MK_EINVAL);
  MK_CHECK_INT(mk_pydoc_edit(d, 0, len + 1, "", 0, &err), ==, MK_EINVAL);
  size_t len2;
  MK_CHECK(mk_pydoc_text(d, &len2) == text && len2 == len);
  MK_REQUIRE(mk_pydoc_set_text(d, "x = 1\n", 6, &err) == 0);
  MK_CHECK_STR(mk_pydoc_text(d, NULL), "x = 1\n");
  MK_CHECK_INT(mk_pydoc_index(d)->nlines, ==, 2);
  mk_pydoc_free(d);
  mk_pydoc_free(NULL);
}

static unsigned rng_next(unsigned *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/* After any sequence of edits, the incrementally maintained tree equals a
 * fresh parse of the same text. */
MK_TEST(frontend, incremental_tree_equals_fresh_parse) {
  static const char *const snippets[] = {"", "x", "(", ")", ":", "\n", "\r\n", "    ", "def f(a):\n  return a\n",
                                         "\xC3\xA9", "'", "\"\"\"", "#", "class K(nn.Module):\n", "\t"};
  unsigned seed = 99;
  mk_pydoc *d;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_pydoc_new(kb_sample, strlen(kb_sample), &d, &err) == 0);
  for (int step = 0; step < 300; step++) {
    size_t len;
    mk_pydoc_text(d, &len);
    size_t a = len ? rng_next(&seed) % (len + 1) : 0;
    size_t b = a + (len > a ? rng_next(&seed) % (len - a + 1) % 12 : 0);
    const char *s = snippets[rng_next(&seed) % (sizeof snippets / sizeof snippets[0])];
    MK_REQUIRE(mk_pydoc_edit(d, a, b, s, strlen(s), &err) == 0);
    if (step % 25 != 24) continue;
    const char *text = mk_pydoc_text(d, &len);
    mk_pydoc *fresh;
    MK_REQUIRE(mk_pydoc_new(text, len, &fresh, &err) == 0);
    char *x = tree_string(d), *y = tree_string(fresh);
    MK_CHECK_STR(x, y);
    free(x);
    free(y);
    mk_pydoc_free(fresh);
  }
  mk_pydoc_free(d);
}

/* ---- scale ------------------------------------------------------------------------- */

MK_TEST(frontend, ten_megabyte_file) {
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_puts(&b, "import torch\nimport torch.nn as nn\n\n");
  for (int i = 0; b.len < 10 * 1024 * 1024; i++)
    mk_buf_printf(&b,
                  "class Block%d(nn.Module):\n"
                  "    def __init__(self, n=%d):\n        super().__init__()\n        self.l = nn.Linear(n, n)\n\n"
                  "    def forward(self, x):\n        x = self.l(x)  # \xC3\xA9\n        return torch.relu(x) * %d\n\n",
                  i, i % 97 + 1, i);
  mk_buf_puts(&b, "class Model(Block0):\n    def forward(self, x):\n        return x\n\n"
                  "def get_inputs():\n    return [torch.rand(1, 1)]\n\ndef get_init_inputs():\n    return []\n");
  MK_REQUIRE(b.err == 0);
  double t0 = mk_now_s();
  mk_pydoc *d;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_pydoc_new(b.data, b.len, &d, &err) == 0);
  double t1 = mk_now_s();
  mk_pyoutline o;
  MK_REQUIRE(mk_frontend_outline(d, NULL, &o, &err) == 0);
  double t2 = mk_now_s();
  MK_CHECK_INT(o.ndiags, ==, 0);
  MK_CHECK(o.nclasses > 40000);
  MK_REQUIRE(o.target == o.nclasses - 1);
  MK_CHECK(o.classes[o.target].is_module);
  MK_CHECK(o.get_inputs.found && o.get_init_inputs.found);
  int last_line = mk_pydoc_index(d)->nlines;
  MK_CHECK_INT(o.get_init_inputs.range.end_line, ==, last_line - 1);
  mk_pyoutline_free(&o);
  /* a keystroke in the middle: incremental */
  size_t mid = b.len / 2;
  while (b.data[mid] != '\n') mid++;
  double t3 = mk_now_s();
  MK_REQUIRE(mk_pydoc_edit(d, mid + 1, mid + 1, "#", 1, &err) == 0);
  double t4 = mk_now_s();
  MK_REQUIRE(mk_frontend_outline(d, NULL, &o, &err) == 0);
  MK_CHECK_INT(o.nsyntax_errors, ==, 0);
  mk_pyoutline_free(&o);
  fprintf(stderr, "    10 MB: parse %.2fs, outline %.2fs, edit+reparse %.3fs\n", t1 - t0, t2 - t1, t4 - t3);
  MK_CHECK(t4 - t3 < t1 - t0); /* incremental beats a full parse */
  mk_pydoc_free(d);
  mk_buf_free(&b);
}

/* ---- KernelBench ------------------------------------------------------------------------ */

static int outline_problem(const char *path, int *nstmts) {
  char *text = NULL;
  size_t len = 0;
  if (mk_read_file(path, 1 << 24, &text, &len) != 0) return -1;
  mk_pyoutline o;
  mk_errmsg err = {{0}};
  int bad = 0;
  if (mk_frontend_outline_text(text, len, NULL, &o, &err) != 0) {
    free(text);
    return 1;
  }
  if (o.ndiags != 0 || o.target < 0) {
    fprintf(stderr, "    %s: %d diagnostics, first: %s\n", path, o.ndiags, o.ndiags ? o.diags[0].message : "");
    bad = 1;
  } else {
    const mk_pyclass *m = &o.classes[o.target];
    bad |= !m->forward.found || !m->init.found || m->nstmts == 0 || m->forward.nparams < 1;
    for (int i = 0; i < m->nstmts; i++) {
      const mk_srange *r = &m->stmts[i].range;
      bad |= r->line < m->forward.body.line || r->end_line > m->forward.body.end_line;
    }
    *nstmts += m->nstmts;
  }
  mk_pyoutline_free(&o);
  free(text);
  return bad;
}

MK_TEST(frontend, every_kernelbench_problem_outlines_cleanly) {
  static const char *const levels[] = {"level1", "level2", "level3"};
  int files = 0, failures = 0, stmts = 0;
  for (size_t l = 0; l < 3; l++) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/kernelbench/%s", mk_test_shared_dir(), levels[l]);
    DIR *dp = opendir(dir);
    if (dp == NULL) continue;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
      size_t n = strlen(e->d_name);
      if (n < 4 || strcmp(e->d_name + n - 3, ".py") != 0) continue;
      char path[2048];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      int rc = outline_problem(path, &stmts);
      if (rc) fprintf(stderr, "    failed: %s\n", path);
      failures += rc != 0;
      files++;
    }
    closedir(dp);
  }
  if (files == 0) {
    mk_test_skip("../shared/kernelbench not found");
    return;
  }
  fprintf(stderr, "    %d problems, %d forward statements\n", files, stmts);
  MK_CHECK_INT(failures, ==, 0);
}

/* The one static check (CLI and language server): the KernelBench pieces
 * with their positions, syntax errors in order, deep nesting iteratively. */
MK_TEST(frontend, static_check_text_finds_the_shape) {
  const char *src = "import torch.nn as nn\n"
                    "class Helper:\n    pass\n"
                    "class Model(nn.Module):\n"
                    "    @staticmethod\n"
                    "    def forward(x):\n        return x\n"
                    "def get_inputs():\n    return []\n";
  mk_frontend_shape s;
  MK_CHECK_INT(mk_frontend_static_check_text(src, strlen(src), NULL, &s), ==, 0);
  MK_CHECK(s.imports_torch);
  MK_CHECK(s.cls.found);
  MK_CHECK_INT(s.cls.name.line, ==, 3);
  MK_CHECK_INT(s.cls.name.col, ==, 6);
  MK_CHECK(s.forward.found);
  MK_CHECK_INT(s.forward.at.line, ==, 5);
  MK_CHECK_INT(s.forward.at.end_line, ==, 6);
  MK_CHECK(s.get_inputs.found);
  MK_CHECK(!s.get_init_inputs.found);
  MK_CHECK(!s.model_new.found);
  MK_CHECK_STR(s.classes, "Helper");
  MK_CHECK_INT(s.nsyntax, ==, 0);

  const char *bad = "x = (1 +\ny = 2\ndef f(:\n  pass\n";
  MK_CHECK_INT(mk_frontend_static_check_text(bad, strlen(bad), "Model", &s), ==, 0);
  MK_CHECK_INT(s.nsyntax, >=, 1);
  MK_CHECK(!s.imports_torch);
  MK_CHECK(!s.cls.found);
  for (int i = 1; i < s.nsyntax; i++) MK_CHECK(s.syntax[i].at.line >= s.syntax[i - 1].at.line);

  size_t n = 200000;
  char *deep = malloc(n + 1);
  MK_REQUIRE(deep != NULL);
  for (size_t i = 0; i < n; i++) deep[i] = i < n / 2 ? '(' : ')';
  deep[n] = 0;
  MK_CHECK_INT(mk_frontend_static_check_text(deep, n, NULL, &s), ==, 0);
  MK_CHECK_INT(s.nsyntax, <=, MK_FRONTEND_STATIC_MAX_SYNTAX);
  free(deep);
}

/* The CLI's file check says the first problem, with a 1-based position. */
MK_TEST(frontend, static_check_file_says_the_first_problem) {
  char dir[] = "/tmp/mk_static_XXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/m.py", dir);
  mk_frontend_static st;
  FILE *f = fopen(path, "w");
  MK_REQUIRE(f != NULL);
  fputs("import torch\nclass Other:\n    pass\n", f);
  fclose(f);
  MK_CHECK_INT(mk_frontend_static_check(path, "Model", true, &st), ==, MK_ENOENT);
  MK_CHECK_STR(st.kind, "missing");
  MK_CHECK(strstr(st.message, "(classes here: Other)") != NULL);
  f = fopen(path, "w");
  MK_REQUIRE(f != NULL);
  fputs("import torch\nclass Model:\n    def f(:\n        pass\n", f);
  fclose(f);
  MK_CHECK_INT(mk_frontend_static_check(path, "Model", false, &st), ==, MK_EPARSE);
  MK_CHECK_STR(st.kind, "syntax_error");
  MK_CHECK_INT(st.line, ==, 3);
  f = fopen(path, "w");
  MK_REQUIRE(f != NULL);
  fputs("class Model:\n    pass\n", f);
  fclose(f);
  MK_CHECK_INT(mk_frontend_static_check(path, "Model", true, &st), ==, MK_ENOENT);
  MK_CHECK(strstr(st.message, "get_inputs") != NULL);
  MK_CHECK_INT(mk_frontend_static_check(path, "Model", false, &st), ==, 0);
  MK_CHECK_INT(mk_frontend_static_check(dir, "Model", false, &st), ==, MK_EINVAL);
  MK_CHECK_STR(st.kind, "not_a_file");
  remove(path);
  rmdir(dir);
}
