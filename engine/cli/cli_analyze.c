/* cli_analyze.c — `mkevolve analyze FILE... [--json] [--class NAME]
 * [--batch N] [--timeout S] [--no-cache]`.
 *
 * Each file is first checked statically (tree-sitter: syntax, the class,
 * get_inputs) so those errors come at once without Python; then captured by
 * the CPU worker (cached by content), parsed into the IR, decomposed
 * (mk_decompose_initial) and printed as text or as the JSON schema of
 * docs/runtime.md ("mkevolve.analyze/1"). Exit status: 0 when every file
 * analysed, 1 when one failed, 2 on a usage error. */
#include "cli_common.h"
#include "cli_runtime.h"
#include "mk_decompose.h"
#include "mk_ir.h"
#include "mk_loop.h"
#include "mk_pyemit.h"
#include "mk_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANALYZE_SCHEMA "mkevolve.analyze/1"

typedef struct analyze_opts {
  bool json;
  const char *class_name;
  int batch;
  double timeout_s;
  bool cache;
} analyze_opts;

typedef struct capture_wait {
  bool done;
  int code;
  char kind[64];
  mk_buf message;
  mk_buf traceback;
  int line;
  mk_graph *graph;
  bool cached;
  double elapsed_ms;
} capture_wait;

static void on_capture(void *data, mk_verify_capture_result *r) {
  capture_wait *w = data;
  w->done = true;
  w->code = r->code;
  mk_strlcpy(w->kind, r->error_kind ? r->error_kind : "", sizeof w->kind);
  mk_buf_puts(&w->message, r->message ? r->message : "");
  mk_buf_puts(&w->traceback, r->traceback ? r->traceback : "");
  w->line = r->line;
  w->graph = r->graph;
  w->cached = r->cached;
  w->elapsed_ms = r->elapsed_ms;
}

/* ---- JSON ---------------------------------------------------------------- */

static cJSON *ints(const int *xs, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(xs[i]));
  return a;
}

static const char *value_kind_name(mk_value_kind k) {
  switch (k) {
  case MK_VALUE_INPUT: return "input";
  case MK_VALUE_PARAM: return "param";
  case MK_VALUE_BUFFER: return "buffer";
  case MK_VALUE_ATTR: return "attr";
  case MK_VALUE_NODE: return "node";
  default: return "const";
  }
}

static cJSON *shape_json(const mk_value *v) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < v->rank; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v->shape[i]));
  return a;
}

/* rep[i] per mk_partition_twins, or NULL (no memory: every subkernel its own). */
static int *twins_of(const mk_graph *g, const mk_partition *p) {
  int *rep = malloc(sizeof *rep * ((size_t)p->nsubkernels + 1));
  if (rep && mk_partition_twins(g, p, rep)) {
    free(rep);
    return NULL;
  }
  return rep;
}

static cJSON *graph_json(const char *file, const analyze_opts *o, const capture_wait *w,
                         const mk_partition *p) {
  const mk_graph *g = w->graph;
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "schema", ANALYZE_SCHEMA);
  cJSON_AddStringToObject(root, "file", file);
  cJSON_AddStringToObject(root, "class", o->class_name);
  if (g->batch > 0) cJSON_AddNumberToObject(root, "batch", g->batch);
  else cJSON_AddNullToObject(root, "batch");
  cJSON_AddStringToObject(root, "source_sha256", g->source_sha256 ? g->source_sha256 : "");
  cJSON_AddBoolToObject(root, "batch_free", g->batch_free);
  if (!g->batch_free) cJSON_AddStringToObject(root, "batch_fixed_why", g->batch_free_why);
  cJSON_AddBoolToObject(root, "cached", w->cached);
  cJSON_AddNumberToObject(root, "elapsed_ms", w->elapsed_ms);
  cJSON_AddNumberToObject(root, "capture_ms", g->capture_ms);
  cJSON *fw = cJSON_AddObjectToObject(root, "forward");
  cJSON_AddNumberToObject(fw, "line", g->forward_line);
  cJSON_AddNumberToObject(fw, "end_line", g->forward_end_line);
  cJSON *vals = cJSON_AddArrayToObject(root, "values");
  for (int i = 0; i < g->nvalues; i++) {
    const mk_value *v = &g->values[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "id", v->id);
    cJSON_AddStringToObject(j, "kind", value_kind_name(v->kind));
    cJSON_AddItemToObject(j, "shape", shape_json(v));
    cJSON_AddStringToObject(j, "dtype", mk_dtype_name(v->dtype));
    if (v->name) cJSON_AddStringToObject(j, "name", v->name);
    if (v->kind == MK_VALUE_INPUT) cJSON_AddNumberToObject(j, "index", v->index);
    if (v->kind == MK_VALUE_NODE) cJSON_AddNumberToObject(j, "producer", v->producer);
    cJSON_AddItemToArray(vals, j);
  }
  cJSON *scalars = cJSON_AddArrayToObject(root, "scalar_inputs");
  for (int k = 0; k < g->nscalar_inputs; k++) {
    const mk_scalar_input *si = &g->scalar_inputs[k];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "index", si->index);
    if (si->value) cJSON_AddItemToObject(j, "value", cJSON_Duplicate(si->value, true));
    else cJSON_AddTrueToObject(j, "opaque");
    cJSON_AddItemToArray(scalars, j);
  }
  cJSON *nodes = cJSON_AddArrayToObject(root, "nodes");
  for (int i = 0; i < g->nnodes; i++) {
    const mk_node *n = &g->nodes[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "id", n->id);
    cJSON_AddStringToObject(j, "op", n->op);
    cJSON_AddStringToObject(j, "short_name", n->short_name);
    cJSON_AddStringToObject(j, "category", mk_op_category_name(n->category));
    cJSON_AddItemToObject(j, "inputs", ints(n->inputs, n->ninputs));
    cJSON_AddItemToObject(j, "outputs", ints(n->outputs, n->noutputs));
    cJSON_AddItemToObject(j, "mutates", ints(n->mutates, n->nmutates));
    if (n->module) cJSON_AddStringToObject(j, "module", n->module);
    else cJSON_AddNullToObject(j, "module");
    if (n->module_type) cJSON_AddStringToObject(j, "module_type", n->module_type);
    else cJSON_AddNullToObject(j, "module_type");
    cJSON *sp = cJSON_AddObjectToObject(j, "span");
    cJSON_AddNumberToObject(sp, "line", n->span.line);
    cJSON_AddNumberToObject(sp, "col", n->span.col);
    cJSON_AddNumberToObject(sp, "end_line", n->span.end_line);
    cJSON_AddNumberToObject(sp, "end_col", n->span.end_col);
    cJSON_AddBoolToObject(j, "replayable", n->replayable);
    cJSON_AddItemToArray(nodes, j);
  }
  cJSON_AddItemToObject(root, "outputs", ints(g->output_values, g->noutput_values));
  cJSON *sts = cJSON_AddArrayToObject(root, "statements");
  for (int i = 0; i < g->nstatements; i++) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "line", g->statements[i].line);
    cJSON_AddNumberToObject(j, "end_line", g->statements[i].end_line);
    cJSON_AddItemToObject(j, "nodes", ints(g->statements[i].nodes, g->statements[i].nnodes));
    cJSON_AddItemToArray(sts, j);
  }
  cJSON *sks = cJSON_AddArrayToObject(root, "subkernels");
  int *twin = p ? twins_of(g, p) : NULL;
  for (int i = 0; p && i < p->nsubkernels; i++) {
    const mk_subkernel *s = &p->subkernels[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "id", s->id);
    cJSON_AddStringToObject(j, "name", s->name ? s->name : "");
    cJSON_AddItemToObject(j, "nodes", ints(s->nodes, s->nnodes));
    cJSON_AddItemToObject(j, "inputs", ints(s->inputs, s->ninputs));
    cJSON_AddItemToObject(j, "outputs", ints(s->outputs, s->noutputs));
    cJSON_AddNumberToObject(j, "anchor", s->anchor);
    cJSON_AddNumberToObject(j, "first_line", s->first_line);
    cJSON_AddNumberToObject(j, "last_line", s->last_line);
    cJSON_AddNumberToObject(j, "twin_of", twin ? twin[i] : i);
    cJSON_AddItemToArray(sks, j);
  }
  free(twin);
  return root;
}

static cJSON *error_json(const char *file, const char *class_name, const char *kind,
                         const char *message, int line, int col, const char *tb) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "schema", ANALYZE_SCHEMA);
  cJSON_AddStringToObject(root, "file", file);
  cJSON_AddStringToObject(root, "class", class_name);
  cJSON *e = cJSON_AddObjectToObject(root, "error");
  cJSON_AddStringToObject(e, "kind", kind);
  cJSON_AddStringToObject(e, "message", message);
  if (line > 0) cJSON_AddNumberToObject(e, "line", line);
  else cJSON_AddNullToObject(e, "line");
  if (col > 0) cJSON_AddNumberToObject(e, "column", col);
  else cJSON_AddNullToObject(e, "column");
  if (tb && tb[0]) cJSON_AddStringToObject(e, "traceback", tb);
  return root;
}

/* ---- text ----------------------------------------------------------------- */

static void print_values_of(const mk_graph *g, mk_value_kind kind, const char *title) {
  bool any = false;
  char shape[256];
  for (int i = 0; i < g->nvalues; i++) {
    const mk_value *v = &g->values[i];
    if (v->kind != kind) continue;
    if (!any) printf("%s:\n", title);
    any = true;
    if (kind == MK_VALUE_INPUT)
      printf("  %%%-4d input %d  %s %s\n", v->id, v->index, mk_shape_str(v, shape, sizeof shape),
             mk_dtype_name(v->dtype));
    else
      printf("  %%%-4d %s  %s %s\n", v->id, v->name ? v->name : "?",
             mk_shape_str(v, shape, sizeof shape), mk_dtype_name(v->dtype));
  }
}

/* Forward arguments that are not tensors, with the value the graph was
 * captured with (a composition is specialised to it). */
static void print_scalar_inputs(const mk_graph *g) {
  for (int k = 0; k < g->nscalar_inputs; k++) {
    const mk_scalar_input *si = &g->scalar_inputs[k];
    mk_buf lit;
    mk_buf_init(&lit, 4096);
    mk_errmsg err = {{0}};
    bool ok = si->value && mk_pyemit_arg(si->value, NULL, NULL, &lit, &err) == 0 && !lit.err;
    if (ok)
      printf("  input %d  not a tensor: %s (compositions are specialised to this value)\n", si->index,
             mk_buf_cstr(&lit));
    else
      printf("  input %d  not a tensor: a %s no Python literal can stand for (compositions keep PyTorch)\n",
             si->index, si->type ? si->type : "value");
    mk_buf_free(&lit);
  }
}

/* Whether a composition runs at any batch (docs/capture.md, "Running at any batch"). */
static void print_batch_free(const mk_graph *g) {
  int sizes = 0;
  for (int i = 0; i < g->nnodes; i++) sizes += g->nodes[i].nbatch_ints;
  if (g->batch_free)
    printf("  batch    free: compositions run at any batch (%d size%s read from tensors)\n", sizes,
           sizes == 1 ? "" : "s");
  else
    printf("  batch    fixed: compositions run at the captured shapes only (%s)\n", g->batch_free_why);
}

static void print_ids(const char *prefix, const int *xs, int n) {
  for (int i = 0; i < n; i++) printf("%s%s%d", i ? ", " : "", prefix, xs[i]);
}

static void print_text(const char *file, const analyze_opts *o, const capture_wait *w,
                       const mk_partition *p) {
  const mk_graph *g = w->graph;
  printf("%s: class %s, %d nodes, %d subkernels", file, o->class_name, g->nnodes,
         p ? p->nsubkernels : 0);
  if (g->batch > 0) printf(", batch reduced to %d", g->batch);
  if (w->cached) printf(" (cached, %.0f ms)\n", w->elapsed_ms);
  else printf(" (captured in %.0f ms, %.0f ms in all)\n", g->capture_ms, w->elapsed_ms);
  print_values_of(g, MK_VALUE_INPUT, "inputs");
  print_scalar_inputs(g);
  print_batch_free(g);
  print_values_of(g, MK_VALUE_PARAM, "parameters");
  print_values_of(g, MK_VALUE_BUFFER, "buffers");
  print_values_of(g, MK_VALUE_ATTR, "attributes");
  print_values_of(g, MK_VALUE_CONST, "constants");
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_graph_print(g, &b);
  puts("graph:");
  const char *s = mk_buf_cstr(&b);
  while (*s) {
    const char *nl = strchr(s, '\n');
    int n = nl ? (int)(nl - s) : (int)strlen(s);
    printf("  %.*s\n", n, s);
    s += n + (nl ? 1 : 0);
  }
  mk_buf_free(&b);
  if (!p) return;
  int *twin = twins_of(g, p);
  int distinct = 0;
  for (int i = 0; i < p->nsubkernels; i++) distinct += !twin || twin[i] == i;
  printf("subkernels (%d, %d distinct):\n", p->nsubkernels, distinct);
  for (int i = 0; i < p->nsubkernels; i++) {
    const mk_subkernel *k = &p->subkernels[i];
    printf("  #%d %s  lines %d-%d  nodes ", k->id, k->name ? k->name : "?", k->first_line,
           k->last_line);
    print_ids("", k->nodes, k->nnodes);
    printf("  in ");
    print_ids("%", k->inputs, k->ninputs);
    printf("  out ");
    print_ids("%", k->outputs, k->noutputs);
    if (twin && twin[i] != i) printf("  (twin of #%d)", twin[i]);
    putchar('\n');
  }
  free(twin);
}

/* ---- driver --------------------------------------------------------------- */

/* The full usage (docs/cli.md): on stdout for --help, on stderr after a
 * usage error. */
static void usage(FILE *out) {
  fputs("usage: mkevolve analyze FILE... [--json] [--class NAME] [--batch N] [--timeout S] "
        "[--no-cache]\n"
        "\n"
        "Prints the operator graph captured from each KernelBench-format FILE (class Model,\n"
        "get_inputs(), get_init_inputs()) and the proposed subkernels.\n"
        "\n"
        "  --json        the mkevolve.analyze/1 schema (one object, or an array for several files)\n"
        "  --class NAME  the module class to capture (default Model)\n"
        "  --batch N     capture with batch N instead of get_inputs()'s\n"
        "  --timeout S   seconds for the worker's start and each capture\n"
        "  --no-cache    capture again even when the file did not change\n",
        out);
}

/* Analyses one file; returns 0 or 1. `json_out` collects JSON objects. */
static int analyze_one(uv_loop_t *loop, mk_session *s, const char *arg, const analyze_opts *o,
                       cJSON *json_out) {
  char file[4096];
  mk_cli_abspath(arg, file, sizeof file);
  mk_frontend_static st;
  if (mk_frontend_static_check(file, o->class_name, true, &st) != 0) {
    if (json_out) {
      cJSON_AddItemToArray(json_out, error_json(file, o->class_name, st.kind, st.message, st.line,
                                                st.col, NULL));
    } else {
      if (st.line > 0) fprintf(stderr, "%s:%d:%d: %s\n", file, st.line, st.col, st.message);
      else fprintf(stderr, "%s: %s\n", file, st.message);
      mk_cli_print_source_line(stderr, file, st.line);
    }
    return 1;
  }
  capture_wait w;
  memset(&w, 0, sizeof w);
  mk_buf_init(&w.message, 64 * 1024);
  mk_buf_init(&w.traceback, 64 * 1024);
  mk_errmsg err;
  int rc = mk_session_capture(s, file, o->class_name, o->batch, on_capture, &w, &err);
  if (rc) {
    w.code = rc;
    mk_strlcpy(w.kind, "internal", sizeof w.kind);
    mk_buf_puts(&w.message, err.text);
  } else {
    (void)mk_loop_run_until(loop, &w.done);
  }
  int status = 0;
  if (w.code != 0 || !w.graph) {
    const char *msg = w.message.len ? mk_buf_cstr(&w.message) : mk_strerror(w.code);
    if (json_out) {
      cJSON_AddItemToArray(json_out, error_json(file, o->class_name, w.kind[0] ? w.kind : "internal",
                                                msg, w.line, 0, mk_buf_cstr(&w.traceback)));
    } else {
      if (w.line > 0) fprintf(stderr, "%s:%d: %s: %s\n", file, w.line, w.kind, msg);
      else fprintf(stderr, "%s: %s: %s\n", file, w.kind, msg);
      mk_cli_print_source_line(stderr, file, w.line);
      mk_cli_print_traceback(stderr, mk_buf_cstr(&w.traceback), file);
    }
    status = 1;
  } else {
    mk_partition part = {0};
    mk_errmsg derr;
    bool have_part = mk_decompose_initial(w.graph, &part, &derr) == 0;
    if (!have_part) fprintf(stderr, "%s: cannot decompose: %s\n", file, derr.text);
    if (json_out) cJSON_AddItemToArray(json_out, graph_json(file, o, &w, have_part ? &part : NULL));
    else print_text(file, o, &w, have_part ? &part : NULL);
    if (have_part) mk_partition_free(&part);
    else status = 1;
  }
  mk_graph_free(w.graph);
  mk_buf_free(&w.message);
  mk_buf_free(&w.traceback);
  return status;
}

/* The session analyze captures through: the session's defaults, with
 * --timeout for the worker's start and each capture, and no cache with
 * --no-cache or MKEVOLVE_NO_CACHE=1. On failure the loop is closed. */
static int open_session(uv_loop_t *loop, const analyze_opts *o, mk_session **s, mk_errmsg *err) {
  int rc = uv_loop_init(loop);
  if (rc) return mk_errf(err, MK_EIO, "cannot start the event loop: %s", uv_strerror(rc));
  mk_session_config cfg;
  mk_session_config_defaults(&cfg);
  cfg.start_timeout_s = cfg.capture_timeout_s = o->timeout_s;
  const char *nc = getenv("MKEVOLVE_NO_CACHE");
  cfg.no_cache = !o->cache || (nc && nc[0] == '1');
  rc = mk_session_new(loop, &cfg, s, err);
  if (rc) {
    *s = NULL;
    mk_cli_close_session(loop, NULL);
  }
  return rc;
}

int mk_cli_analyze(int argc, char **argv) {
  analyze_opts o = {.class_name = "Model", .timeout_s = 120, .cache = true};
  const char **files = calloc((size_t)argc, sizeof *files);
  int nfiles = 0;
  if (!files) return 1;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    bool has_val = i + 1 < argc;
    if (strcmp(a, "--json") == 0) o.json = true;
    else if (strcmp(a, "--no-cache") == 0) o.cache = false;
    else if (strcmp(a, "--class") == 0 && has_val) o.class_name = argv[++i];
    else if (strcmp(a, "--batch") == 0 && has_val) {
      if (mk_cli_parse_int(argv[++i], 1, 1 << 30, &o.batch)) {
        fprintf(stderr, "mkevolve analyze: --batch wants a positive integer\n");
        free(files);
        return 2;
      }
    } else if (strcmp(a, "--timeout") == 0 && has_val) {
      if (mk_cli_parse_double(argv[++i], 0.1, 86400, &o.timeout_s)) {
        fprintf(stderr, "mkevolve analyze: --timeout wants seconds (> 0)\n");
        free(files);
        return 2;
      }
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      free(files);
      return 0;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "mkevolve analyze: unknown option %s\n", a);
      usage(stderr);
      free(files);
      return 2;
    } else {
      files[nfiles++] = a;
    }
  }
  if (nfiles == 0) {
    usage(stderr);
    free(files);
    return 2;
  }
  uv_loop_t loop;
  mk_session *s = NULL;
  mk_errmsg err = {{0}};
  if (open_session(&loop, &o, &s, &err) != 0) {
    fprintf(stderr, "mkevolve analyze: %s\n", err.text);
    free(files);
    return 1;
  }
  cJSON *json = o.json ? cJSON_CreateArray() : NULL;
  int failed = 0;
  for (int i = 0; i < nfiles; i++) {
    if (i > 0 && !o.json) putchar('\n');
    failed |= analyze_one(&loop, s, files[i], &o, json);
    fflush(stdout);
  }
  mk_cli_close_session(&loop, s);
  if (json) {
    /* One file: the object itself; several: an array of them. */
    const cJSON *what = nfiles == 1 ? cJSON_GetArrayItem(json, 0) : json;
    char *text = cJSON_Print(what);
    if (text) puts(text);
    free(text);
    cJSON_Delete(json);
  }
  free(files);
  return failed ? 1 : 0;
}
