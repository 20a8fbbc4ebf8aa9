/* mk_export.h — a composed ModelNew as a C++ project over libtorch
 * (`mkevolve export`, docs/export.md).
 *
 * Three steps, each usable alone:
 *   1. mk_export_read_modelnew: what a ModelNew file written by
 *      engine/compose says about itself (the class it came from, the
 *      original module, each subkernel's variant and the language of its
 *      kernel), read from the text compose writes;
 *   2. mk_export_forward_cpp: C++ (ATen) for a captured graph, one
 *      statement per recorded torch call, the layout plan applied as the
 *      ModelNew applies it; ops it cannot express fail with MK_EUNSUPPORTED
 *      naming the op and its line;
 *   3. mk_export_write_project: the CMake project (library, header, test,
 *      manifest) into a folder. The weights and the example inputs and
 *      outputs the test compares against are written by the worker
 *      package's helper (mkworker.export_data), which reads the manifest.
 *
 * Ownership: outputs go to caller-owned buffers or structs (freed with
 * mk_export_modelnew_free); inputs are borrowed. */
#ifndef MK_EXPORT_H
#define MK_EXPORT_H

#include "mk_buf.h"
#include "mk_err.h"
#include "mk_ir.h"

#include <stdbool.h>

#define MK_EXPORT_MAX_SUBKERNELS 4096

/* The language a chosen subkernel runs in. */
typedef enum mk_export_backend {
  MK_EXPORT_PYTORCH, /* the PyTorch reference, or a candidate of torch calls only */
  MK_EXPORT_TRITON,  /* a candidate with @triton.jit kernels */
  MK_EXPORT_CUDA,    /* a CUDA C++ candidate (MK_BACKEND = "cuda") */
} mk_export_backend;

typedef struct mk_export_subkernel {
  int index;           /* sk<index> in the file */
  char name[128];      /* subkernel name ("conv2d_relu") */
  char variant[128];   /* "reference" or the chosen candidate's name */
  int first_line, last_line;
  int section;         /* sk<section> holds its code (twins share one); -1 for the reference */
  mk_export_backend backend;
} mk_export_subkernel;

typedef struct mk_export_modelnew {
  char class_name[128];   /* the original module's class ("Model") */
  char source_path[1024]; /* the problem file it was composed from, as written */
  char *module_source;    /* the original module, verbatim; owned */
  mk_export_subkernel *subkernels; /* owned */
  int nsubkernels;
  bool plain;             /* "no subkernel could be replaced": ModelNew is the Model */
} mk_export_modelnew;

/* Reads a ModelNew written by engine/compose (or the search's plain
 * fallback). MK_EPARSE with a reason for any other file. `out` is the
 * caller's; free it with mk_export_modelnew_free (also after a failure). */
int mk_export_read_modelnew(const char *text, mk_export_modelnew *out, mk_errmsg *err);
void mk_export_modelnew_free(mk_export_modelnew *m);
const char *mk_export_backend_name(mk_export_backend b);

/* The C++ of graph g's forward, as the body of
 *   std::vector<at::Tensor> forward(const Weights &w, const std::vector<at::Tensor> &inputs)
 * where w.at("state.name") gives a parameter, buffer or tensor attribute by
 * name. Returned tensors are those of g->outputs, depth first. Appends to
 * caller-owned `out`; MK_EUNSUPPORTED names the first op (and its line)
 * it cannot express. */
int mk_export_forward_cpp(const mk_graph *g, mk_buf *out, mk_errmsg *err);

/* One C++ expression for node n's call (no statement), with values named
 * v<id>; exposed for tests. */
int mk_export_call_cpp(const mk_graph *g, const mk_node *n, mk_buf *out, mk_errmsg *err);

typedef struct mk_export_project {
  const char *dir;          /* output folder (created when missing) */
  const char *ns;           /* C++ namespace of the library (an identifier) */
  const char *problem_file; /* problem.py: written by the caller into dir */
  const char *class_name;
  const char *composed_from;/* the ModelNew file, for the README and comments */
  const mk_graph *g;
  const mk_export_modelnew *m;
  const char *device;       /* "cpu" or "cuda": where the example data is made and tested */
  double atol, rtol;        /* the test's tolerances */
  int seed;
} mk_export_project;

/* Writes dir/CMakeLists.txt, dir/<ns>.h, dir/<ns>.cpp, dir/<ns>_test.cpp,
 * dir/export.json (the manifest mkworker.export_data reads) and
 * dir/README.md. MK_EIO naming the file that could not be written. */
int mk_export_write_project(const mk_export_project *p, mk_errmsg *err);

/* A C++ identifier for a namespace made from a problem path
 * ("level2/40_Matmul.py" -> "mk_40_Matmul"), into out (bounded). */
void mk_export_namespace_for(const char *path, char *out, size_t size);

#endif
