/* test_layout.c — the program's layout plan (engine/ir/layout.c) on
 * captured fixtures: which values go channels_last, which conversions are
 * applied where, and that graphs without convolutions plan nothing. */
#include "mk_buf.h"
#include "mk_layout.h"
#include "mk_pyemit.h"
#include "mk_test.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>

static mk_graph *load(const char *dir, const char *name) { return mk_test_load_graph(dir, name); }

/* The value node `nid` produces first. */
static int out_of(const mk_graph *g, int nid) { return g->nodes[nid].outputs[0]; }

MK_TEST(layout, conv_net_plans_channels_last_up_to_the_view) {
  mk_graph *g = load("propose", "conv_net.json");
  MK_CHECK(g != NULL);
  if (!g) return;
  unsigned char *lay = calloc((size_t)g->nvalues, 1), *conv = calloc((size_t)g->nvalues, 1);
  int n = mk_layout_plan(g, lay, conv);
  MK_CHECK(n > 0);
  /* The program's input is read by the stem convolution: converted at entry. */
  MK_CHECK_INT(lay[0], ==, MK_LAYOUT_CHANNELS_LAST);
  MK_CHECK_INT(conv[0], ==, MK_LAYOUT_TO_CL);
  for (int nid = 0; nid < g->nnodes; nid++) {
    const mk_node *nd = &g->nodes[nid];
    int v = out_of(g, nid);
    const char *s = nd->short_name;
    if (strcmp(s, "conv2d") == 0 || strcmp(s, "batch_norm") == 0 || strcmp(s, "cat") == 0 ||
        strcmp(s, "max_pool2d") == 0) {
      MK_CHECK_INT(lay[v], ==, MK_LAYOUT_CHANNELS_LAST);
      MK_CHECK_INT(conv[v], ==, MK_LAYOUT_TO_CL);
    }
    if (strcmp(s, "relu") == 0 && nd->nmutates > 0) {
      /* relu(inplace=True): the batch norm's tensor, same layout, no copy */
      MK_CHECK_INT(lay[v], ==, MK_LAYOUT_CHANNELS_LAST);
      MK_CHECK_INT(conv[v], ==, MK_LAYOUT_KEEP);
    }
    if (strcmp(s, "adaptive_avg_pool2d") == 0) {
      /* read by `view`: leaves channels_last before it */
      MK_CHECK_INT(lay[v], ==, MK_LAYOUT_DEFAULT);
      MK_CHECK_INT(conv[v], ==, MK_LAYOUT_TO_CONTIG);
    }
    if (strcmp(s, "view") == 0 || strcmp(s, "linear") == 0) {
      MK_CHECK_INT(lay[v], ==, MK_LAYOUT_DEFAULT);
      MK_CHECK_INT(conv[v], ==, MK_LAYOUT_KEEP);
    }
  }
  /* Parameters (conv weights, running statistics) are never planned here. */
  for (int v = 0; v < g->nvalues; v++)
    if (g->values[v].kind != MK_VALUE_INPUT && g->values[v].kind != MK_VALUE_NODE)
      MK_CHECK_INT(lay[v], ==, MK_LAYOUT_DEFAULT);
  free(lay);
  free(conv);
  mk_graph_free(g);
}

/* UNet's double conv (conv -> batch norm -> softmax over the width, twice): in
 * channels_last every block pays a conversion into it and the softmax's copy out,
 * more than its narrow convolutions (12 and 16 channels, 3x3) gain, so the plan
 * leaves it in PyTorch's layout. A softmax after a wide convolution (256 channels
 * into a 3x3: 2,304 multiply-adds per output) keeps its island channels_last; the
 * norm the softmax reads stays in the default layout either way. */
MK_TEST(layout, softmax_islands_are_channels_last_only_where_the_convolutions_pay) {
  mk_graph *g = load("propose", "conv_softmax.json");
  MK_REQUIRE(g != NULL);
  unsigned char *lay = calloc((size_t)g->nvalues, 1), *conv = calloc((size_t)g->nvalues, 1);
  MK_CHECK_INT(mk_layout_plan(g, lay, conv), ==, 0);
  for (int v = 0; v < g->nvalues; v++) MK_CHECK_INT(conv[v], ==, MK_LAYOUT_KEEP);
  free(lay);
  free(conv);
  mk_graph_free(g);

  g = load("propose", "conv_softmax_wide.json");
  MK_REQUIRE(g != NULL);
  lay = calloc((size_t)g->nvalues, 1);
  conv = calloc((size_t)g->nvalues, 1);
  MK_CHECK(mk_layout_plan(g, lay, conv) > 0);
  int softmaxes = 0, convs = 0;
  for (int nid = 0; nid < g->nnodes; nid++) {
    const mk_node *nd = &g->nodes[nid];
    int v = out_of(g, nid);
    if (strcmp(nd->short_name, "conv2d") == 0) {
      convs++;
      MK_CHECK_INT(lay[v], ==, MK_LAYOUT_CHANNELS_LAST);
    }
    if (strcmp(nd->short_name, "batch_norm") == 0) {
      MK_CHECK_INT(lay[v], ==, MK_LAYOUT_DEFAULT); /* read by the softmax */
      MK_CHECK_INT(conv[v], ==, MK_LAYOUT_KEEP);
    }
    if (strcmp(nd->short_name, "softmax") == 0 && softmaxes++ == 0) {
      MK_CHECK_INT(lay[v], ==, MK_LAYOUT_CHANNELS_LAST); /* read by the first convolution */
      MK_CHECK_INT(conv[v], ==, MK_LAYOUT_TO_CL);
    }
  }
  MK_CHECK_INT(softmaxes, ==, 2);
  MK_CHECK_INT(convs, ==, 2);
  free(lay);
  free(conv);
  mk_graph_free(g);
}

/* A channel shuffle (view -> transpose -> contiguous -> view) between a
 * batch norm and a convolution: the split view is valid on channels_last
 * strides and contiguous() makes a private copy, so the norm's output stays
 * channels_last (no copy to NCHW before the view) and the shuffled value,
 * though a view, is converted for the convolution that reads it. A split
 * whose reader is not a transpose or contiguous() (a sum over a split dim),
 * and a view merging channels with the pixels, still leave channels_last
 * first. */
MK_TEST(layout, channel_shuffle_keeps_channels_last_around_it) {
  mk_graph *g = load("propose", "conv_shuffle.json");
  MK_REQUIRE(g != NULL);
  unsigned char *lay = calloc((size_t)g->nvalues, 1), *conv = calloc((size_t)g->nvalues, 1);
  MK_CHECK(mk_layout_plan(g, lay, conv) > 0);
  /* %16 batch norm -> %19 view -> %20 transpose -> %21 contiguous -> %22 view -> %23 conv */
  MK_CHECK_INT(lay[16], ==, MK_LAYOUT_CHANNELS_LAST);
  MK_CHECK_INT(conv[16], ==, MK_LAYOUT_TO_CL);
  for (int v = 19; v <= 21; v++) {
    MK_CHECK_INT(lay[v], ==, MK_LAYOUT_DEFAULT);
    MK_CHECK_INT(conv[v], ==, MK_LAYOUT_KEEP);
  }
  MK_CHECK_INT(lay[22], ==, MK_LAYOUT_CHANNELS_LAST);
  MK_CHECK_INT(conv[22], ==, MK_LAYOUT_TO_CL);
  /* %24 conv -> %25 view(n, 3, -1): leaves channels_last before the view */
  MK_CHECK_INT(lay[24], ==, MK_LAYOUT_DEFAULT);
  MK_CHECK_INT(conv[24], ==, MK_LAYOUT_TO_CONTIG);
  MK_CHECK_INT(conv[28], ==, MK_LAYOUT_KEEP); /* a view of a value others read: never converted */
  /* %29 conv -> %30 split read by a sum */
  MK_CHECK_INT(lay[29], ==, MK_LAYOUT_DEFAULT);
  MK_CHECK_INT(conv[29], ==, MK_LAYOUT_TO_CONTIG);
  free(lay);
  free(conv);
  mk_graph_free(g);
}

/* A convolution over 8 input channels or fewer stays in PyTorch's layout
 * (cuDNN's channels_last kernels pad them): programs whose convolutions all
 * read few channels (conv_tails: 5, conv_pixel_reductions: 3 and 2) plan
 * nothing, where the same structures over more channels (conv_layouts) do. */
MK_TEST(layout, few_channel_convolutions_keep_the_default_layout) {
  const char *fixtures[] = {"conv_tails.json", "conv_pixel_reductions.json"};
  for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
    mk_graph *g = load("propose", fixtures[i]);
    MK_REQUIRE(g != NULL);
    unsigned char *lay = calloc((size_t)g->nvalues, 1), *conv = calloc((size_t)g->nvalues, 1);
    MK_CHECK_INT(mk_layout_plan(g, lay, conv), ==, 0);
    free(lay);
    free(conv);
    mk_graph_free(g);
  }
}

MK_TEST(layout, conv3d_and_layer_readers) {
  /* conv_layouts: a conv3d tail plans channels_last_3d; a value returned and
   * also read by a layout-keeping op stays channels_last. */
  mk_graph *g = load("propose", "conv_layouts.json");
  MK_CHECK(g != NULL);
  if (!g) return;
  unsigned char *lay = calloc((size_t)g->nvalues, 1), *conv = calloc((size_t)g->nvalues, 1);
  MK_CHECK(mk_layout_plan(g, lay, conv) > 0);
  for (int nid = 0; nid < g->nnodes; nid++) {
    const mk_node *nd = &g->nodes[nid];
    if (strcmp(nd->short_name, "conv3d") == 0) {
      int v = out_of(g, nid);
      MK_CHECK_INT(lay[v], ==, MK_LAYOUT_CHANNELS_LAST);
      MK_CHECK_STR(mk_layout_suffix((mk_layout_conv)conv[v], g->values[v].rank),
                   ".contiguous(memory_format=torch.channels_last_3d)");
    }
  }
  free(lay);
  free(conv);
  mk_graph_free(g);
}

MK_TEST(layout, graphs_without_convolutions_plan_nothing) {
  const char *fixtures[] = {"linear_epilogue.json", "norms.json", "reductions.json", "matmul_bmm.json"};
  for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
    mk_graph *g = load("propose", fixtures[i]);
    MK_CHECK(g != NULL);
    if (!g) continue;
    unsigned char *lay = calloc((size_t)g->nvalues, 1), *conv = calloc((size_t)g->nvalues, 1);
    MK_CHECK_INT(mk_layout_plan(g, lay, conv), ==, 0);
    for (int v = 0; v < g->nvalues; v++) {
      MK_CHECK_INT(lay[v], ==, MK_LAYOUT_DEFAULT);
      MK_CHECK_INT(conv[v], ==, MK_LAYOUT_KEEP);
    }
    free(lay);
    free(conv);
    mk_graph_free(g);
  }
}

MK_TEST(layout, names_and_bad_arguments) {
  MK_CHECK_INT(mk_layout_plan(NULL, NULL, NULL), ==, MK_EINVAL);
  MK_CHECK_STR(mk_layout_suffix(MK_LAYOUT_KEEP, 4), "");
  MK_CHECK_STR(mk_layout_suffix(MK_LAYOUT_TO_CL, 4), ".contiguous(memory_format=torch.channels_last)");
  MK_CHECK_STR(mk_layout_suffix(MK_LAYOUT_TO_CONTIG, 5), ".contiguous()");
  MK_CHECK_STR(mk_layout_conv_name(MK_LAYOUT_TO_CL), "channels_last");
  MK_CHECK_STR(mk_layout_conv_name(MK_LAYOUT_TO_CONTIG), "contiguous");
  MK_CHECK(mk_layout_conv_name(MK_LAYOUT_KEEP) == NULL);
}

static int plain_namer(void *ctx, int vid, mk_buf *out) {
  (void)ctx;
  return mk_buf_printf(out, "v%d", vid);
}

MK_TEST(layout, conversions_are_written_as_python) {
  mk_graph *g = load("propose", "conv_net.json");
  MK_REQUIRE(g != NULL);
  unsigned char *lay = calloc((size_t)g->nvalues, 1), *conv = calloc((size_t)g->nvalues, 1);
  MK_REQUIRE(mk_layout_plan(g, lay, conv) > 0);
  mk_buf b;
  mk_buf_init(&b, 0);
  for (int v = 0; v < g->nvalues; v++) MK_CHECK_INT(mk_pyemit_conversion(g, v, conv[v], plain_namer, NULL, 4, &b), ==, 0);
  const char *py = mk_buf_cstr(&b);
  MK_CHECK(strstr(py, "    v0 = v0.contiguous(memory_format=torch.channels_last)\n") == py); /* the input first */
  MK_CHECK(strstr(py, ".contiguous()\n") != NULL);                                              /* before the view */
  mk_buf_reset(&b);
  MK_CHECK_INT(mk_pyemit_conversion(g, 0, MK_LAYOUT_KEEP, plain_namer, NULL, 4, &b), ==, 0);
  MK_CHECK_INT(mk_pyemit_conversion(g, -1, MK_LAYOUT_TO_CL, plain_namer, NULL, 4, &b), ==, 0);
  MK_CHECK_INT((int)b.len, ==, 0);
  mk_buf_free(&b);
  free(lay);
  free(conv);
  mk_graph_free(g);
}

/* A value no op reads (a program output) keeps the layout its producer gave
 * it: planned channels_last where PyTorch would keep it so, but never
 * converted, which would be a pass over the output for nothing. */
MK_TEST(layout, program_outputs_are_not_converted) {
  const char *fixtures[] = {"conv_layouts.json", "conv_chain.json", "conv_tails.json"};
  int planned_cl = 0;
  for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
    mk_graph *g = load("propose", fixtures[f]);
    MK_REQUIRE(g != NULL);
    unsigned char *lay = calloc((size_t)g->nvalues, 1), *conv = calloc((size_t)g->nvalues, 1);
    MK_REQUIRE(lay != NULL && conv != NULL);
    mk_layout_plan(g, lay, conv);
    for (int v = 0; v < g->nvalues; v++) {
      if (g->values[v].kind != MK_VALUE_NODE || g->values[v].nusers > 0) continue;
      MK_CHECK_INT(conv[v], ==, MK_LAYOUT_KEEP);
      planned_cl += lay[v] == MK_LAYOUT_CHANNELS_LAST;
    }
    free(lay);
    free(conv);
    mk_graph_free(g);
  }
  MK_CHECK(planned_cl > 0); /* some were channels_last: the rule was exercised */
}
