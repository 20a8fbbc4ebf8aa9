/* mk_layout.h — the program's layout plan: which activations live in
 * channels_last, planned once from the captured graph.
 *
 * cuDNN runs the same convolution 1.3-1.65x faster on channels_last inputs
 * (H200, PERF-NOTES), and a reduction over channels walks contiguous memory
 * in that layout; converting per subkernel eats the gain (two copies around
 * every convolution). So the whole program agrees on one layout per value:
 * a 4-d/5-d float activation is channels_last when it is connected to a
 * convolution (produced by one, read by one, or produced from such a value by
 * an op that keeps layouts) and every op that reads it keeps layouts too
 * (convolutions, elementwise ops, batch/group/instance norms, pools,
 * reductions, cat along channels, a channel shuffle's split view; not softmax,
 * whose output PyTorch makes contiguous). Everything else keeps the layout
 * PyTorch gives it; and an island of values joined by layout-keeping ops that
 * an op other than a view reads from outside (softmax) is channels_last only when
 * its convolutions gain more than the copies into and out of it cost, estimated
 * from the captured shapes (layout.c). Graphs without a 2-d/3-d convolution plan nothing, and a
 * convolution over 8 input channels or fewer counts as none (cuDNN's
 * channels_last kernels pad them: 1.65x slower on problem 85, H100).
 *
 * The plan is applied as conversions right after a value is produced (a
 * no-op when it already has the layout): `mk_layout_conversion` says which.
 * A value no op reads (a program output) is never converted: it is returned
 * as its producer made it.
 * The composition applies them at the program's entry and after every
 * subkernel, the verifier to every subkernel's inputs and inside its
 * reference replay, and the builtin generator reads planned inputs in their
 * memory order (docs/design.md, "The layout plan"). */
#ifndef MK_LAYOUT_H
#define MK_LAYOUT_H

#include "mk_ir.h"

typedef enum mk_layout {
  MK_LAYOUT_DEFAULT = 0,       /* what PyTorch gives it */
  MK_LAYOUT_CHANNELS_LAST = 1, /* channels_last (4-d) / channels_last_3d (5-d) */
} mk_layout;

typedef enum mk_layout_conv {
  MK_LAYOUT_KEEP = 0,      /* nothing to do */
  MK_LAYOUT_TO_CL = 1,     /* .contiguous(memory_format=channels_last[_3d]) */
  MK_LAYOUT_TO_CONTIG = 2, /* .contiguous(): a value a view reads, whose producer
                              read channels_last (PyTorch would keep that layout) */
} mk_layout_conv;

/* Plans every value of g. layout[v] and conv[v] (arrays of g->nvalues,
 * caller-owned; conv may be NULL) receive the plan. Returns the number of
 * channels_last values (0: the plan changes nothing), or MK_EINVAL. */
int mk_layout_plan(const mk_graph *g, unsigned char *layout, unsigned char *conv);

/* True if n is a 2-d/3-d convolution over few input channels (8 or fewer,
 * known at capture): it stays in PyTorch's layout, and cuDNN runs it in
 * float32 rather than TF32 (the builtin proposer tries 3xTF32 early). */
bool mk_layout_few_channels(const mk_graph *g, const mk_node *n);

/* A channel shuffle (ShuffleNet's `view(N, c_1, ..., c_k, *S)` -> transposes of
 * the split dims -> `contiguous()` [-> `view(N, C, *S)`]), each value after the
 * split read only by the next op. Read by the layout plan (valid on
 * channels_last strides; the copy is private) and by the builtin generator
 * (folded into a norm's store). */
#define MK_SHUFFLE_MAX_SPLIT 8
#define MK_SHUFFLE_MAX_NODES 12
typedef struct mk_channel_shuffle {
  int k;                               /* split channel dims */
  long long split[MK_SHUFFLE_MAX_SPLIT]; /* their sizes */
  int order[MK_SHUFFLE_MAX_SPLIT];     /* shuffled dim d is split dim order[d] */
  int nodes[MK_SHUFFLE_MAX_NODES];     /* the split, the transposes, contiguous, the merge */
  int nnodes;
  int copy;  /* contiguous()'s output */
  int value; /* the merge's output (v's shape and dtype again), or -1 when none follows */
} mk_channel_shuffle;

/* 1 and *cs when node n, reading v ([N, C, *S]), starts a channel shuffle
 * up to its contiguous() (and merge, when there is one); 0 otherwise. */
int mk_channel_shuffle_at(const mk_graph *g, const mk_node *n, int v, mk_channel_shuffle *cs);

/* The Python suffix that applies conversion c to a value of this rank
 * (".contiguous(memory_format=torch.channels_last)", ...), or "" for KEEP. */
const char *mk_layout_suffix(mk_layout_conv c, int rank);

/* "channels_last" / "contiguous" for the worker's `layouts` parameter, or
 * NULL for KEEP (docs/verify.md). */
const char *mk_layout_conv_name(mk_layout_conv c);

#endif
