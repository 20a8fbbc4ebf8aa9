/* compose.c — writes a composition as a KernelBench-format ModelNew file.
 *
 * Layout of the emitted file:
 *   header comment (source, subkernels and the variant chosen for each)
 *   imports (the union of what the candidates import)
 *   the user's module source, verbatim
 *   one section per distinct non-reference candidate: its code with its
 *     functions and classes prefixed (sk<i>_) so sections never collide;
 *     subkernels whose candidate has the same source call that section
 *   class ModelNew(Model): forward calls the subkernels in order
 * ModelNew inherits __init__ so parameters, buffers and their initialisation
 * order are exactly the user's.
 *
 * The layout plan (mk_layout.h) is applied here: forward converts its inputs
 * and every value a subkernel produces as the plan says (a no-op when the
 * value already has that layout), which is what the verifier gave each
 * subkernel, except where a PyTorch call on channels_last inputs returns
 * channels_last anyway; __init__ keeps the weights of convolutions with
 * planned channels_last inputs in channels_last. */
#include "mk_compose.h"

#include "compose_internal.h"
#include "mk_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct namer_ctx {
  const mk_graph *g;
  int *alias;                    /* alias[vid] = vid it is a new version of, or -1 */
  unsigned char *layout;         /* the layout plan (mk_layout_plan): layout[vid] */
  unsigned char *conv;           /* conv[vid]: the conversion right after vid is made */
  const char *const *input_names;
  int ninput_names;
  bool takes_more; /* mk_compose_options.forward_takes_more */
  bool fixed_shapes; /* mk_compose_options.fixed_shapes */
  bool converts;                 /* the forward converts a value (needs _mk_convert) */
} namer_ctx;

static int value_name(void *vctx, int vid, mk_buf *out) {
  namer_ctx *c = vctx;
  if (vid < 0 || vid >= c->g->nvalues) return out->err = MK_EINVAL;
  while (c->alias[vid] >= 0) vid = c->alias[vid];
  const mk_value *v = &c->g->values[vid];
  switch (v->kind) {
  case MK_VALUE_INPUT:
    if (v->index >= 0 && v->index < c->ninput_names) return mk_buf_puts(out, c->input_names[v->index]);
    return mk_buf_printf(out, "x%d", v->index);
  case MK_VALUE_PARAM:
  case MK_VALUE_BUFFER:
  case MK_VALUE_ATTR:
    return mk_pyemit_self_path(v->name ? v->name : "", out);
  case MK_VALUE_NODE:
    return mk_buf_printf(out, "v%d", vid);
  case MK_VALUE_CONST:
  default:
    return out->err = MK_EUNSUPPORTED;
  }
}

/* Values a node outputs but does not return are new versions of the values
 * it mutates (docs/protocol.md): alias them so later code uses the same name. */
static void collect_returned(const cJSON *s, int *returned, int nvalues) {
  if (s == NULL) return;
  if (cJSON_IsObject(s) && s->child && s->child->string && strcmp(s->child->string, "t") == 0) {
    int vid = s->child->valueint;
    if (vid >= 0 && vid < nvalues) returned[vid] = 1;
    return;
  }
  for (const cJSON *it = s->child; it; it = it->next) collect_returned(it, returned, nvalues);
}

static int build_aliases(const mk_graph *g, int *alias) {
  for (int i = 0; i < g->nvalues; i++) alias[i] = -1;
  int *returned = calloc((size_t)g->nvalues + 1, sizeof *returned);
  if (returned == NULL) return MK_ENOMEM;
  for (int i = 0; i < g->nnodes; i++) {
    const mk_node *n = &g->nodes[i];
    collect_returned(n->out, returned, g->nvalues);
    int m = 0;
    for (int k = 0; k < n->noutputs && m < n->nmutates; k++) {
      int vid = n->outputs[k];
      if (vid >= 0 && vid < g->nvalues && !returned[vid]) alias[vid] = n->mutates[m++];
    }
  }
  free(returned);
  return 0;
}

static int is_reference(const mk_candidate *c) {
  return c == NULL || (c->origin && strcmp(c->origin, "reference") == 0);
}

/* ---- candidate rewriting ------------------------------------------------ */

static int is_ident_char(char c) {
  return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

typedef struct name_list {
  char names[64][128];
  int n;
} name_list;

/* "def foo(" / "async def foo(" / "class Foo" at column 0 -> foo. */
static void collect_def(const char *line, name_list *names) {
  const char *p = line;
  if (strncmp(p, "async def ", 10) == 0) p += 10;
  else if (strncmp(p, "def ", 4) == 0) p += 4;
  else if (strncmp(p, "class ", 6) == 0) p += 6;
  else return;
  size_t n = 0;
  while (is_ident_char(p[n])) n++;
  if (n == 0 || n >= sizeof names->names[0] || names->n >= 64) return;
  memcpy(names->names[names->n], p, n);
  names->names[names->n][n] = '\0';
  names->n++;
}

static int starts_import(const char *line) {
  return strncmp(line, "import ", 7) == 0 || strncmp(line, "from ", 5) == 0;
}

static const char *line_end(const char *p) {
  const char *e = strchr(p, '\n');
  return e ? e : p + strlen(p);
}

/* Lexer state carried across lines: inside a triple-quoted string or not. */
typedef struct lex_state {
  char triple; /* '"' or '\'' while inside a triple-quoted string, else 0 */
} lex_state;

/* Appends `line` with every whole-word occurrence of a collected name that is
 * code (not in a string or comment) and not an attribute (not after '.')
 * prefixed. */
static void append_renamed(mk_buf *out, const char *p, size_t len, const name_list *names,
                           const char *prefix, lex_state *lx) {
  size_t i = 0;
  char quote = 0; /* single-line string delimiter */
  while (i < len) {
    char c = p[i];
    if (lx->triple) {
      if (c == lx->triple && i + 2 < len && p[i + 1] == c && p[i + 2] == c) {
        mk_buf_append(out, p + i, 3);
        i += 3;
        lx->triple = 0;
        continue;
      }
      mk_buf_putc(out, p[i++]);
      continue;
    }
    if (quote) {
      if (c == '\\' && i + 1 < len) {
        mk_buf_append(out, p + i, 2);
        i += 2;
        continue;
      }
      if (c == quote) quote = 0;
      mk_buf_putc(out, p[i++]);
      continue;
    }
    if (c == '#') { /* comment: the rest of the line as is */
      mk_buf_append(out, p + i, len - i);
      return;
    }
    if (c == '"' || c == '\'') {
      if (i + 2 < len && p[i + 1] == c && p[i + 2] == c) {
        lx->triple = c;
        mk_buf_append(out, p + i, 3);
        i += 3;
      } else {
        quote = c;
        mk_buf_putc(out, p[i++]);
      }
      continue;
    }
    if (is_ident_char(c) && (i == 0 || !is_ident_char(p[i - 1]))) {
      size_t j = i;
      while (j < len && is_ident_char(p[j])) j++;
      int hit = 0;
      if (i == 0 || p[i - 1] != '.') {
        for (int k = 0; k < names->n && !hit; k++)
          hit = strlen(names->names[k]) == j - i && memcmp(names->names[k], p + i, j - i) == 0;
      }
      if (hit) mk_buf_puts(out, prefix);
      mk_buf_append(out, p + i, j - i);
      i = j;
    } else {
      mk_buf_putc(out, p[i++]);
    }
  }
}

/* Import statements may continue over several lines inside parentheses. */
static const char *skip_statement(const char *p, mk_buf *imports) {
  int depth = 0;
  const char *q = p;
  for (;;) {
    const char *e = line_end(q);
    for (const char *c = q; c < e; c++) depth += (*c == '(') - (*c == ')');
    if (imports) {
      mk_buf_append(imports, q, (size_t)(e - q));
      mk_buf_putc(imports, '\n');
    }
    q = *e ? e + 1 : e;
    if (depth <= 0 || *q == '\0') return q;
  }
}

int compose_rewrite(const char *source, const char *prefix, const char *const *extra,
                    mk_buf *body, mk_buf *imports) {
  name_list names = {.n = 0};
  for (int i = 0; extra && extra[i] && names.n < 64; i++)
    if (strlen(extra[i]) < sizeof names.names[0]) strcpy(names.names[names.n++], extra[i]);
  for (const char *p = source; *p;) {
    collect_def(p, &names);
    const char *e = line_end(p);
    p = *e ? e + 1 : e;
  }
  lex_state lx = {0};
  for (const char *p = source; *p;) {
    if (!lx.triple && starts_import(p)) {
      p = skip_statement(p, imports);
      continue;
    }
    const char *e = line_end(p);
    append_renamed(body, p, (size_t)(e - p), &names, prefix, &lx);
    mk_buf_putc(body, '\n');
    p = *e ? e + 1 : e;
  }
  return body->err ? body->err : imports ? imports->err : 0;
}

static int rewrite_candidate(const char *source, const char *prefix, mk_buf *body,
                             mk_buf *imports) {
  return compose_rewrite(source, prefix, NULL, body, imports);
}

int mk_compose_prefix_candidate(const char *source, const char *prefix, mk_buf *out,
                                mk_errmsg *err) {
  int rc = rewrite_candidate(source, prefix, out, NULL);
  return rc ? mk_errf(err, rc, "could not rewrite candidate: %s", mk_strerror(rc)) : 0;
}

/* Adds each import line of `imports` to `all` unless already present. */
static void merge_imports(mk_buf *all, const char *imports) {
  for (const char *p = imports; *p;) {
    const char *e = line_end(p);
    size_t n = (size_t)(e - p);
    int seen = 0;
    for (const char *q = mk_buf_cstr(all); *q && !seen;) {
      const char *qe = line_end(q);
      seen = (size_t)(qe - q) == n && memcmp(q, p, n) == 0;
      q = *qe ? qe + 1 : qe;
    }
    if (!seen && n > 0) {
      mk_buf_append(all, p, n);
      mk_buf_putc(all, '\n');
    }
    p = *e ? e + 1 : e;
  }
}

/* ---- parameters kept in channels_last ------------------------------------- */

static bool is_state_name_char(char c) { return is_ident_char(c) || c == '.'; }

/* Appends to `names` ("\"a.b\", " each, no repeats) the state names a
 * candidate lists in its `MK_CHANNELS_LAST = ("conv.weight", ...)` line: the
 * parameters its kernels read in channels_last (docs/candidates.md). Names
 * that are not dotted identifiers are ignored: they are pasted into code. */
/* The text after `key` on the first line of source that starts with it (the
 * candidate's declaration lines, docs/candidates.md), or NULL; *end receives
 * that line's end. */
static const char *declared(const char *source, const char *key, const char **end) {
  size_t n = strlen(key);
  for (const char *p = source; p && *p;) {
    const char *e = line_end(p);
    if (strncmp(p, key, n) == 0) {
      *end = e;
      return p + n;
    }
    p = *e ? e + 1 : e;
  }
  return NULL;
}

static void collect_cl_params(const char *source, mk_buf *names) {
  const char *e = NULL, *list = declared(source, "MK_CHANNELS_LAST = (", &e);
  for (const char *q = list; q && q < e && *q != ')'; q++) {
    if (*q != '"' && *q != '\'') continue;
    const char *start = ++q;
    while (q < e && is_state_name_char(*q)) q++;
    if (q >= e || *q != start[-1] || q == start || q - start > 200) break;
    char quoted[256];
    snprintf(quoted, sizeof quoted, "\"%.*s\", ", (int)(q - start), start);
    if (strstr(mk_buf_cstr(names), quoted) == NULL) mk_buf_puts(names, quoted);
  }
}

/* Adds `"name", ` to names unless it is there; only dotted identifiers
 * (the name is pasted into code). */
static void add_cl_name(mk_buf *names, const char *name) {
  size_t len = strlen(name);
  if (len == 0 || len > 200) return;
  for (const char *c = name; *c; c++)
    if (!is_state_name_char(*c)) return;
  char quoted[256];
  snprintf(quoted, sizeof quoted, "\"%s\", ", name);
  if (strstr(mk_buf_cstr(names), quoted) == NULL) mk_buf_puts(names, quoted);
}

/* The weights of convolutions whose input the plan makes channels_last:
 * cuDNN then reads both in that layout without a per-call conversion. */
static void collect_planned_weights(const mk_graph *g, const unsigned char *layout, mk_buf *names) {
  for (int i = 0; i < g->nnodes; i++) {
    const mk_node *n = &g->nodes[i];
    if (n->category != MK_OP_CONV || n->ninputs < 2 || n->inputs[0] < 0) continue;
    if (layout[n->inputs[0]] != MK_LAYOUT_CHANNELS_LAST) continue;
    const mk_value *w = &g->values[n->inputs[1]];
    if (w->kind == MK_VALUE_PARAM && w->name) add_cl_name(names, w->name);
  }
}

/* ModelNew.__init__ when a chosen kernel or the layout plan reads conv
 * weights in channels_last: they are converted once, here, so the per-call
 * conversion is a no-op (in-place updates such as load_state_dict keep the
 * layout). */
static int emit_init(const mk_graph *g, const mk_partition *p, const mk_candidate *const *chosen,
                     const unsigned char *layout, mk_buf *out) {
  mk_buf names;
  mk_buf_init(&names, 1 << 16);
  for (int s = 0; s < p->nsubkernels; s++) {
    const mk_candidate *c = chosen ? chosen[s] : NULL;
    if (!is_reference(c)) collect_cl_params(c->source, &names);
  }
  collect_planned_weights(g, layout, &names);
  if (names.len > 0) {
    mk_buf_puts(out, "    def __init__(self, *args, **kwargs):\n"
                     "        super().__init__(*args, **kwargs)\n"
                     "        # conv weights the kernels read in channels_last: converted once\n");
    mk_buf_printf(out, "        _mk_keep_channels_last(self, (%s))\n\n", mk_buf_cstr(&names));
  }
  int rc = names.err;
  mk_buf_free(&names);
  return rc ? rc : out->err;
}

static const char keep_cl_helper[] =
    "\n\ndef _mk_keep_channels_last(module, names):\n"
    "    \"\"\"Stores the named 4-d/5-d parameters of `module` in channels_last.\"\"\"\n"
    "    for name in names:\n"
    "        try:\n"
    "            p = module.get_parameter(name)\n"
    "        except AttributeError:\n"
    "            continue\n"
    "        fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(p.dim())\n"
    "        if fmt is not None:\n"
    "            p.data = p.data.contiguous(memory_format=fmt)\n";

/* ---- conversions the chosen kernels make unneeded ------------------------- */

/* True if the candidate's `MK_ANY_LAYOUT_INPUTS = (0, 2, )` line lists run()'s
 * parameter `index`: it reads that input in any memory layout, converting it
 * itself in a pass it makes anyway (docs/candidates.md). */
static bool takes_any_layout(const char *source, int index) {
  const char *e = NULL, *list = declared(source, "MK_ANY_LAYOUT_INPUTS = (", &e);
  for (const char *q = list; q && q < e && *q != ')';) {
    if (*q < '0' || *q > '9') {
      q++;
      continue;
    }
    long v = 0;
    while (q < e && *q >= '0' && *q <= '9' && v < 100000) v = v * 10 + (*q++ - '0');
    if (v == index) return true;
  }
  return false;
}

/* True if the plan's conversion of v is for nothing: v is read, and only by
 * subkernels whose chosen candidates take it in any layout (an implicit-GEMM
 * convolution makes its own channels_last copy, TF32-rounded, in one pass:
 * converting first doubles that pass). */
static bool conversion_unneeded(const mk_partition *p, const mk_candidate *const *chosen, int v) {
  bool read = false;
  for (int s = 0; s < p->nsubkernels; s++) {
    const mk_subkernel *sk = &p->subkernels[s];
    for (int i = 0; i < sk->ninputs; i++) {
      if (sk->inputs[i] != v) continue;
      const mk_candidate *c = chosen ? chosen[s] : NULL;
      if (is_reference(c) || !takes_any_layout(c->source, i)) return false;
      read = true;
    }
  }
  return read;
}

static void drop_unneeded_conversions(const mk_graph *g, const mk_partition *p,
                                      const mk_candidate *const *chosen, unsigned char *conv) {
  for (int v = 0; v < g->nvalues; v++)
    if (conv[v] == MK_LAYOUT_TO_CL && conversion_unneeded(p, chosen, v)) conv[v] = MK_LAYOUT_KEEP;
}

/* ---- forward ------------------------------------------------------------ */

/* `v = _mk_convert(v, <format>)` for value vid when the layout plan converts
 * it (compose_convert.c). */
static int emit_conversion(namer_ctx *nc, int vid, mk_buf *out) {
  if (vid < 0 || vid >= nc->g->nvalues || nc->conv[vid] == MK_LAYOUT_KEEP) return 0;
  mk_buf name;
  mk_buf_init(&name, 64);
  value_name(nc, vid, &name);
  int rc = name.err ? name.err : compose_convert(out, mk_buf_cstr(&name), nc->conv[vid], nc->g->values[vid].rank);
  mk_buf_free(&name);
  nc->converts = true;
  return rc;
}

/* True if PyTorch op n already returns v in channels_last: every 4-d/5-d
 * activation it reads is planned channels_last, and the plan makes v
 * channels_last only where n keeps layouts (a convolution, elementwise op,
 * norm, pool, ... on channels_last inputs returns channels_last). The
 * conversion is then a no-op call, left out of the forward: a deep network's
 * forward would otherwise pay one Python call per layer (launch-bound nets). */
static bool pytorch_keeps_channels_last(const namer_ctx *nc, const mk_node *n, int v) {
  if (v < 0 || v >= nc->g->nvalues || nc->conv[v] != MK_LAYOUT_TO_CL) return false;
  int activations = 0;
  for (int k = 0; k < n->ninputs; k++) {
    int in = n->inputs[k];
    const mk_value *iv = &nc->g->values[in];
    if (iv->kind != MK_VALUE_INPUT && iv->kind != MK_VALUE_NODE) continue;
    if (iv->rank != 4 && iv->rank != 5) continue;
    if (nc->layout[in] != MK_LAYOUT_CHANNELS_LAST) return false;
    activations++;
  }
  return activations > 0;
}

static int emit_reference_subkernel(const mk_graph *g, const mk_subkernel *sk, namer_ctx *nc,
                                    mk_buf *out, mk_errmsg *err) {
  for (int i = 0; i < sk->nnodes; i++) {
    const mk_node *n = &g->nodes[sk->nodes[i]];
    int rc = mk_graph_node_is_constant(g, n->id) ? mk_pyemit_constant_node(g, n, value_name, nc, 8, out, err)
                                                  : mk_pyemit_node(g, n, value_name, nc, 8, out, err);
    if (rc) return err && err->text[0] ? rc : mk_errf(err, rc, "node %d (%s) at line %d cannot be emitted", n->id, n->op, n->span.line);
    for (int k = 0; k < n->noutputs; k++)
      if (!pytorch_keeps_channels_last(nc, n, n->outputs[k])) emit_conversion(nc, n->outputs[k], out);
  }
  return out->err;
}

/* True if the chosen candidates are CUDA C++ and none is Triton: KernelBench
 * then runs the module by plain exec (kbcheck.backend_for), where no Triton
 * kernel can be defined. */
static bool cuda_only(const mk_partition *p, const mk_candidate *const *chosen) {
  bool cuda = false;
  for (int s = 0; s < p->nsubkernels; s++) {
    const mk_candidate *c = chosen ? chosen[s] : NULL;
    if (is_reference(c)) continue;
    if (strcmp(mk_candidate_backend(c), "cuda") != 0) return false;
    cuda = true;
  }
  return cuda;
}

/* True if a subkernel the forward writes inline makes a constant tensor
 * (mk_graph_node_is_constant): the module then defines the cache helper. */
static bool inline_constants(const mk_graph *g, const mk_partition *p, const mk_candidate *const *chosen) {
  for (int s = 0; s < p->nsubkernels; s++)
    if (is_reference(chosen ? chosen[s] : NULL))
      for (int i = 0; i < p->subkernels[s].nnodes; i++)
        if (mk_graph_node_is_constant(g, p->subkernels[s].nodes[i])) return true;
  return false;
}

/* section_of[s] = the first subkernel whose chosen candidate has the same
 * source as subkernel s's (s itself when none): repeated blocks of a deep
 * network paste and compile each distinct kernel once. */
static int *find_sections(const mk_partition *p, const mk_candidate *const *chosen) {
  int *section_of = malloc(sizeof *section_of * ((size_t)p->nsubkernels + 1));
  if (section_of == NULL) return NULL;
  for (int s = 0; s < p->nsubkernels; s++) {
    section_of[s] = s;
    const mk_candidate *c = chosen ? chosen[s] : NULL;
    if (is_reference(c) || c->source == NULL) continue;
    for (int t = 0; t < s; t++) {
      const mk_candidate *o = chosen[t];
      if (section_of[t] == t && !is_reference(o) && o->source && strcmp(o->source, c->source) == 0) {
        section_of[s] = t;
        break;
      }
    }
  }
  return section_of;
}

/* True if nothing the program returns or keeps depends on subkernel sk: no
 * value it makes is read by another subkernel or returned, none of its nodes
 * writes a tensor in place, and none draws random numbers (skipping a draw
 * would shift the random stream of the ops after it). The forward does not
 * run it: nn.MultiheadAttention's averaged weights, which `out, _ =
 * attn(x, x, x)` drops, cost eager a pass over [batch, L, L] for nothing. */
static bool subkernel_is_dead(const mk_graph *g, const mk_subkernel *sk) {
  if (sk->noutputs > 0) return false;
  for (int i = 0; i < sk->nnodes; i++) {
    const mk_node *n = &g->nodes[sk->nodes[i]];
    if (n->nmutates > 0 || (mk_op_flags(n->op) & MK_OPF_RANDOM)) return false;
  }
  return true;
}

static int emit_candidate_call(const mk_subkernel *sk, int index, namer_ctx *nc, mk_buf *out) {
  mk_buf_indent(out, 8);
  for (int i = 0; i < sk->noutputs; i++) {
    if (i) mk_buf_puts(out, ", ");
    value_name(nc, sk->outputs[i], out);
  }
  mk_buf_printf(out, "%s = sk%d_run(", sk->noutputs ? "" : "_", index);
  for (int i = 0; i < sk->ninputs; i++) {
    if (i) mk_buf_puts(out, ", ");
    value_name(nc, sk->inputs[i], out);
  }
  mk_buf_puts(out, ")\n");
  for (int i = 0; i < sk->noutputs; i++) emit_conversion(nc, sk->outputs[i], out);
  return out->err;
}

/* The name of forward argument i: the user's, else x<i>. */
static void forward_arg_name(const namer_ctx *nc, int i, mk_buf *out) {
  if (i < nc->ninput_names) mk_buf_puts(out, nc->input_names[i]);
  else mk_buf_printf(out, "x%d", i);
}

/* `super().forward(a, b, ...` with every forward argument, then `tail`
 * (the rest of the call). */
static void emit_super_call(const namer_ctx *nc, int ninputs, const char *tail, mk_buf *out) {
  mk_buf_puts(out, "            return super().forward(");
  for (int i = 0; i < ninputs; i++) {
    if (i) mk_buf_puts(out, ", ");
    forward_arg_name(nc, i, out);
  }
  mk_buf_puts(out, tail);
}

/* The captured graph read each non-tensor forward argument as a constant, so
 * the kernels are specialised to its value (as torch.compile specialises on
 * Python scalars): any other value runs the user's forward, never a kernel
 * made for another one. An argument no literal can stand for (an object, a
 * list holding tensors) cannot be guarded: the composition is refused. */
static int emit_scalar_guard(const mk_graph *g, namer_ctx *nc, int ninputs, mk_buf *out,
                             mk_errmsg *err) {
  if (g->nscalar_inputs == 0) return 0;
  mk_buf_puts(out, "        # specialised to the captured value of each non-tensor argument\n"
                   "        if not (");
  for (int k = 0; k < g->nscalar_inputs; k++) {
    const mk_scalar_input *si = &g->scalar_inputs[k];
    mk_buf name;
    mk_buf_init(&name, 256);
    forward_arg_name(nc, si->index, &name);
    if (si->value == NULL) {
      int rc = mk_errf(err, MK_EUNSUPPORTED,
                       "forward argument %d (%s) is a %s, not a tensor or a Python literal: a "
                       "composition cannot be specialised to it",
                       si->index, mk_buf_cstr(&name), si->type ? si->type : "value");
      mk_buf_free(&name);
      return rc;
    }
    mk_buf_printf(out, "%s_mk_same(%s, ", k ? " and " : "", mk_buf_cstr(&name));
    mk_buf_free(&name);
    mk_errmsg aerr = {{0}};
    if (mk_pyemit_arg(si->value, value_name, nc, out, &aerr))
      return mk_errf(err, MK_EUNSUPPORTED, "forward argument %d cannot be written as Python: %s",
                     si->index, aerr.text);
    mk_buf_putc(out, ')');
  }
  mk_buf_puts(out, "):\n");
  emit_super_call(nc, ninputs, ")\n", out);
  return out->err;
}

static bool is_batch_input(const mk_graph *g, int vid) {
  for (int k = 0; k < g->nbatch_inputs; k++)
    if (g->batch_inputs[k] == vid) return true;
  return false;
}

/* The kernels were made and verified at the captured shapes, and the graph
 * fixes every size it read in Python (docs/capture.md, "Running at any
 * batch"): any other shape runs the user's forward. When every size that
 * follows the batch is written as an expression of a tensor's shape (a
 * batch-free graph), dim 0 of the batched inputs is free. */
static int emit_shape_guard(const mk_graph *g, namer_ctx *nc, int ninputs, mk_buf *out) {
  int guarded = 0;
  for (int v = 0; v < g->nvalues; v++) guarded += g->values[v].kind == MK_VALUE_INPUT;
  if (guarded == 0) return 0;
  bool batch_free = g->batch_free && !nc->fixed_shapes;
  if (batch_free) {
    mk_buf_puts(out, "        # made for the captured shapes; dim 0 of each batched input is free\n");
  } else if (g->batch_free) {
    mk_buf_puts(out, "        # made for the captured shapes (at another batch it failed the check)\n");
  } else {
    mk_buf_puts(out, "        # made for the captured shapes (");
    for (const char *c = g->batch_free_why; *c && c - g->batch_free_why < 200; c++)
      mk_buf_putc(out, (unsigned char)*c < 0x20 ? ' ' : *c); /* one comment line, whatever it says */
    mk_buf_puts(out, ")\n");
  }
  mk_buf_puts(out, "        if ");
  int k = 0;
  for (int v = 0; v < g->nvalues; v++) {
    const mk_value *val = &g->values[v];
    if (val->kind != MK_VALUE_INPUT) continue;
    bool free0 = batch_free && is_batch_input(g, v);
    if (k++) mk_buf_puts(out, " or ");
    forward_arg_name(nc, val->index, out);
    mk_buf_puts(out, free0 ? ".shape[1:] != (" : ".shape != (");
    int first = free0 ? 1 : 0;
    for (int d = first; d < val->rank; d++)
      mk_buf_printf(out, "%s%lld", d > first ? ", " : "", (long long)val->shape[d]);
    if (val->rank - first == 1) mk_buf_putc(out, ',');
    mk_buf_putc(out, ')');
  }
  mk_buf_puts(out, ":\n");
  emit_super_call(nc, ninputs, ")\n", out);
  return out->err;
}

static const char same_helper[] =
    "\n\ndef _mk_same(a, b) -> bool:\n"
    "    \"\"\"Whether a forward argument is the value ModelNew was specialised to.\"\"\"\n"
    "    if type(a) is not type(b):\n"
    "        return False\n"
    "    if isinstance(a, (list, tuple)):\n"
    "        return len(a) == len(b) and all(_mk_same(x, y) for x, y in zip(a, b))\n"
    "    if isinstance(a, dict):\n"
    "        return a.keys() == b.keys() and all(_mk_same(a[k], b[k]) for k in a)\n"
    "    return a == b or (a != a and b != b)  # NaN is the value it was specialised to\n";

static int emit_forward(const mk_graph *g, const mk_partition *p, const mk_candidate *const *chosen,
                        const int *section_of, namer_ctx *nc, mk_buf *out, mk_errmsg *err) {
  int ninputs = 0;
  for (int i = 0; i < g->nvalues; i++)
    if (g->values[i].kind == MK_VALUE_INPUT && g->values[i].index + 1 > ninputs)
      ninputs = g->values[i].index + 1;
  for (int k = 0; k < g->nscalar_inputs; k++)
    if (g->scalar_inputs[k].index + 1 > ninputs) ninputs = g->scalar_inputs[k].index + 1;
  mk_buf_puts(out, "    def forward(self");
  for (int i = 0; i < ninputs; i++) {
    mk_buf_puts(out, ", ");
    forward_arg_name(nc, i, out);
  }
  if (nc->takes_more || nc->ninput_names > ninputs) {
    /* The user's forward takes more than the captured inputs (a parameter
     * with a default that get_inputs() does not pass, *args, **kwargs):
     * passing any of them runs it, since the graph was captured without them. */
    mk_buf_puts(out, ", *_mk_args, **_mk_kwargs):\n"
                     "        if _mk_args or _mk_kwargs:  # arguments the capture did not see\n");
    emit_super_call(nc, ninputs, ninputs ? ", *_mk_args, **_mk_kwargs)\n" : "*_mk_args, **_mk_kwargs)\n", out);
  } else {
    mk_buf_puts(out, "):\n");
  }
  int grc = emit_scalar_guard(g, nc, ninputs, out, err);
  if (!grc) grc = emit_shape_guard(g, nc, ninputs, out);
  if (grc) return grc;
  /* The program's device, for the recorded device constants of the PyTorch
   * calls written inline below: the first input's (replay's rule,
   * docs/capture.md). Kernels' run() bind their own. */
  int first_input = -1;
  for (int v = 0; v < g->nvalues; v++)
    if (g->values[v].kind == MK_VALUE_INPUT &&
        (first_input < 0 || g->values[v].index < g->values[first_input].index))
      first_input = v;
  int *inline_nodes = malloc(sizeof *inline_nodes * ((size_t)g->nnodes + 1)), ninline = 0;
  if (inline_nodes == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  for (int s = 0; s < p->nsubkernels; s++)
    if (is_reference(chosen ? chosen[s] : NULL))
      for (int i = 0; i < p->subkernels[s].nnodes && ninline < g->nnodes; i++)
        inline_nodes[ninline++] = p->subkernels[s].nodes[i];
  mk_pyemit_device_binding(g, inline_nodes, ninline, first_input, value_name, nc, 8, out);
  free(inline_nodes);
  for (int v = 0; v < g->nvalues; v++)
    if (g->values[v].kind == MK_VALUE_INPUT) emit_conversion(nc, v, out);
  for (int s = 0; s < p->nsubkernels; s++) {
    const mk_subkernel *sk = &p->subkernels[s];
    const mk_candidate *c = chosen ? chosen[s] : NULL;
    if (subkernel_is_dead(g, sk)) {
      mk_buf_printf(out, "        # %s — lines %d-%d — not run: nothing reads what it computes\n",
                    sk->name, sk->first_line, sk->last_line);
      continue;
    }
    mk_buf_printf(out, "        # %s — lines %d-%d — %s\n", sk->name, sk->first_line,
                  sk->last_line, is_reference(c) ? "PyTorch reference" : c->name);
    int rc = is_reference(c) ? emit_reference_subkernel(g, sk, nc, out, err)
                             : emit_candidate_call(sk, section_of[s], nc, out);
    if (rc) return rc;
  }
  mk_buf_puts(out, "        return ");
  int rc = mk_pyemit_arg(g->outputs, value_name, nc, out, err);
  if (rc) return rc;
  return mk_buf_putc(out, '\n');
}

static void emit_header(const mk_graph *g, const mk_partition *p, const mk_candidate *const *chosen,
                        const int *section_of, const mk_compose_options *opt, mk_buf *out) {
  mk_buf_printf(out, "# ModelNew composed by MKEvolve %s from %s (class %s).\n", MK_VERSION,
                opt->source_path ? opt->source_path : (g->file ? g->file : "?"),
                g->class_name ? g->class_name : "Model");
  if (opt->note) mk_buf_printf(out, "# %s\n", opt->note);
  bool triton = false, cuda = false;
  for (int s = 0; s < p->nsubkernels; s++) {
    const mk_candidate *c = chosen ? chosen[s] : NULL;
    bool is_cuda = !is_reference(c) && strcmp(mk_candidate_backend(c), "cuda") == 0;
    triton |= !is_reference(c) && !is_cuda; /* any other module may run Triton */
    cuda |= is_cuda;
  }
  /* Triton needs a GPU driver ("0 active drivers") unless its interpreter is asked for. */
  if (triton)
    mk_buf_puts(out, "# It runs Triton kernels: on a machine without a GPU, set TRITON_INTERPRET=1\n"
                     "# (Triton's CPU interpreter) in the environment before Python starts.\n");
  if (cuda)
    mk_buf_puts(out, "# It runs CUDA C++ kernels, compiled at import by torch.utils.cpp_extension.load_inline:\n"
                     "# it needs a GPU, nvcc and ninja (torch caches the build by the source's hash).\n");
  mk_buf_puts(out, "# Subkernels (each verified against PyTorch before it was chosen):\n");
  for (int s = 0; s < p->nsubkernels; s++) {
    const mk_candidate *c = chosen ? chosen[s] : NULL;
    mk_buf_printf(out, "#   sk%d %-28s lines %d-%d  %s (%s)\n", s, p->subkernels[s].name,
                  p->subkernels[s].first_line, p->subkernels[s].last_line,
                  is_reference(c) ? "reference" : c->name,
                  is_reference(c) ? "PyTorch" : (c->origin ? c->origin : "?"));
    if (section_of[s] != s) mk_buf_printf(out, "#       (the kernel of sk%d)\n", section_of[s]);
  }
}

static int emit_sections(const mk_partition *p, const mk_candidate *const *chosen,
                         const int *section_of, mk_buf *imports, mk_buf *sections,
                         compose_cuda *cc, mk_errmsg *err) {
  for (int s = 0; s < p->nsubkernels; s++) {
    const mk_candidate *c = chosen ? chosen[s] : NULL;
    if (is_reference(c) || section_of[s] != s) continue;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "sk%d_", s);
    mk_buf cand_imports;
    mk_buf_init(&cand_imports, 0);
    bool cuda = strcmp(mk_candidate_backend(c), "cuda") == 0;
    if (cuda) compose_cuda_launcher(cc, sections);
    mk_buf_printf(sections, "\n\n# ---- sk%d %s: %s (%s) ----\n", s, p->subkernels[s].name,
                  c->name ? c->name : "candidate", c->origin ? c->origin : "?");
    int rc = 0;
    /* CUDA C++: kernels to the load_inline build, launcher in the section */
    if (cuda)
      rc = compose_cuda_section(cc, c->source, prefix, sections, &cand_imports, err);
    else if ((rc = rewrite_candidate(c->source ? c->source : "", prefix, sections, &cand_imports)))
      mk_errf(err, rc, "subkernel %d: candidate could not be rewritten", s);
    merge_imports(imports, mk_buf_cstr(&cand_imports));
    mk_buf_free(&cand_imports);
    if (rc) return rc;
  }
  return 0;
}

int mk_compose_plain_subclass(const mk_graph *g, const char *module_source, mk_buf *out) {
  mk_buf_printf(out, "# ModelNew composed by MKEvolve: no subkernel could be replaced.\n");
  mk_buf_puts(out, module_source ? module_source : "");
  mk_buf_printf(out, "\n\nclass ModelNew(%s):\n    pass\n", g && g->class_name ? g->class_name : "Model");
  return out->err;
}

int mk_compose_modelnew(const mk_graph *g, const mk_partition *p, const mk_candidate *const *chosen,
                        const mk_compose_options *opt, mk_buf *out, mk_errmsg *err) {
  if (g == NULL || p == NULL || opt == NULL || opt->module_source == NULL)
    return mk_errf(err, MK_EINVAL, "compose: graph, partition and module source are required");
  namer_ctx nc = {.g = g, .input_names = opt->input_names, .ninput_names = opt->ninput_names,
                  .takes_more = opt->forward_takes_more, .fixed_shapes = opt->fixed_shapes};
  nc.alias = malloc(sizeof *nc.alias * ((size_t)g->nvalues + 1));
  nc.layout = malloc((size_t)g->nvalues + 1);
  nc.conv = malloc((size_t)g->nvalues + 1);
  int *section_of = find_sections(p, chosen);
  if (nc.alias == NULL || nc.layout == NULL || nc.conv == NULL || section_of == NULL ||
      build_aliases(g, nc.alias) || mk_layout_plan(g, nc.layout, nc.conv) < 0) {
    free(nc.alias);
    free(nc.layout);
    free(nc.conv);
    free(section_of);
    return mk_errf(err, MK_ENOMEM, "compose: out of memory");
  }
  drop_unneeded_conversions(g, p, chosen, nc.conv);
  mk_buf imports, sections;
  mk_buf_init(&imports, 0);
  mk_buf_init(&sections, 0);
  compose_cuda cc;
  compose_cuda_init(&cc);
  mk_pyemit_prelude(&imports);
  int rc = emit_sections(p, chosen, section_of, &imports, &sections, &cc, err);
  if (!rc) {
    emit_header(g, p, chosen, section_of, opt, out);
    mk_buf_putc(out, '\n');
    mk_buf_append(out, imports.data ? imports.data : "", imports.len);
    mk_buf_puts(out, "\n# ---- the original module (verbatim) ----\n");
    mk_buf_puts(out, opt->module_source);
    if (out->len && out->data[out->len - 1] != '\n') mk_buf_putc(out, '\n');
    mk_buf_append(out, sections.data ? sections.data : "", sections.len);
    compose_cuda_build(&cc, out);
    mk_buf init;
    mk_buf_init(&init, 0);
    rc = emit_init(g, p, chosen, nc.layout, &init);
    if (rc) mk_errf(err, rc, "compose: out of memory");
    else if (init.len) mk_buf_puts(out, keep_cl_helper);
    if (inline_constants(g, p, chosen)) mk_pyemit_constant_helper(out);
    mk_buf fwd;
    mk_buf_init(&fwd, 0);
    if (!rc) rc = emit_forward(g, p, chosen, section_of, &nc, &fwd, err);
    if (nc.converts) compose_convert_helper(out, !cuda_only(p, chosen));
    if (g->nscalar_inputs > 0) mk_buf_puts(out, same_helper);
    mk_buf_printf(out, "\n\nclass ModelNew(%s):\n", g->class_name ? g->class_name : "Model");
    mk_buf_puts(out, "    \"\"\"The same module, composed of verified subkernels.\"\"\"\n\n");
    mk_buf_append(out, init.data ? init.data : "", init.len);
    mk_buf_append(out, fwd.data ? fwd.data : "", fwd.len);
    if (fwd.err) out->err = fwd.err;
    mk_buf_free(&init);
    mk_buf_free(&fwd);
  }
  if (!rc && out->err) rc = mk_errf(err, out->err, "compose: output too large");
  mk_buf_free(&imports);
  mk_buf_free(&sections);
  compose_cuda_free(&cc);
  free(nc.alias);
  free(nc.layout);
  free(nc.conv);
  free(section_of);
  return rc;
}
