/* export_modelnew.c — what a composed ModelNew says about itself.
 *
 * engine/compose writes a fixed shape (compose.c, emit_header and
 * mk_compose_modelnew): a header naming the problem, its class and every
 * subkernel with its chosen variant; the original module after a marker
 * line; then one section per distinct kernel ("# ---- sk<i> ... ----"),
 * the CUDA build, and class ModelNew. Reading that text (rather than
 * importing the file) needs no GPU, no nvcc and no Triton: a file
 * composed on a GPU machine exports anywhere. */
#include "mk_export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char first_line[] = "# ModelNew composed by MKEvolve ";
static const char plain_line[] = "# ModelNew composed by MKEvolve: no subkernel could be replaced.\n";
static const char module_marker[] = "# ---- the original module (verbatim) ----\n";

const char *mk_export_backend_name(mk_export_backend b) {
  switch (b) {
  case MK_EXPORT_TRITON: return "triton";
  case MK_EXPORT_CUDA: return "cuda";
  case MK_EXPORT_PYTORCH:
  default: return "pytorch";
  }
}

void mk_export_modelnew_free(mk_export_modelnew *m) {
  if (m == NULL) return;
  free(m->module_source);
  free(m->subkernels);
  free(m->text);
  memset(m, 0, sizeof *m);
}

static const char *next_line(const char *p) {
  const char *e = strchr(p, '\n');
  return e ? e + 1 : p + strlen(p);
}

/* "# ModelNew composed by MKEvolve 0.1.0 from PATH (class NAME).": PATH and
 * NAME (the path may hold spaces and parentheses: the class is the last
 * " (class " of the line). */
static int read_first_line(const char *text, mk_export_modelnew *m, mk_errmsg *err) {
  const char *e = strchr(text, '\n');
  if (e == NULL) return mk_errf(err, MK_EPARSE, "not a ModelNew composed by MKEvolve");
  const char *from = strstr(text, " from ");
  const char *cls = NULL;
  for (const char *q = text; (q = strstr(q, " (class ")) != NULL && q < e; q++) cls = q;
  if (from == NULL || from > e || cls == NULL || cls < from || e - cls < 10 || e[-2] != ')' || e[-1] != '.')
    return mk_errf(err, MK_EPARSE, "the first line does not name the problem and its class");
  snprintf(m->source_path, sizeof m->source_path, "%.*s", (int)(cls - from - 6), from + 6);
  const char *name = cls + 8;
  int n = (int)(e - 2 - name);
  if (n <= 0 || n >= (int)sizeof m->class_name)
    return mk_errf(err, MK_EPARSE, "the first line names no class");
  snprintf(m->class_name, sizeof m->class_name, "%.*s", n, name);
  return 0;
}

static int add_subkernel(mk_export_modelnew *m, const mk_export_subkernel *sk, mk_errmsg *err) {
  if (m->nsubkernels >= MK_EXPORT_MAX_SUBKERNELS)
    return mk_errf(err, MK_ERANGE, "more than %d subkernels", MK_EXPORT_MAX_SUBKERNELS);
  mk_export_subkernel *grown = realloc(m->subkernels, sizeof *grown * ((size_t)m->nsubkernels + 1));
  if (grown == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  m->subkernels = grown;
  m->subkernels[m->nsubkernels++] = *sk;
  return 0;
}

/* "#   sk3 conv2d_relu    lines 12-14  triton_x (builtin)" and the twin line
 * "#       (the kernel of sk1)" under it. */
static int read_subkernel_lines(const char *text, mk_export_modelnew *m, mk_errmsg *err) {
  for (const char *p = text; *p && p[0] == '#'; p = next_line(p)) {
    mk_export_subkernel sk = {.section = -1};
    int twin = -1, used = 0;
    if (sscanf(p, "#       (the kernel of sk%d)", &twin) == 1 && m->nsubkernels > 0) {
      m->subkernels[m->nsubkernels - 1].section = twin;
      continue;
    }
    if (sscanf(p, "#   sk%d %127s lines %d-%d %127s %n", &sk.index, sk.name, &sk.first_line,
               &sk.last_line, sk.variant, &used) != 5)
      continue;
    (void)sscanf(p + used, "(%63[^)])", sk.origin);
    if (strcmp(sk.variant, "reference") != 0) sk.section = sk.index;
    int rc = add_subkernel(m, &sk, err);
    if (rc) return rc;
  }
  return 0;
}

/* The text of section sk<k> (from its marker to the next marker), or NULL. */
static const char *find_section(const char *sections, int k, const char **end) {
  char marker[48];
  snprintf(marker, sizeof marker, "\n# ---- sk%d ", k);
  const char *s = strstr(sections, marker);
  if (s == NULL) return NULL;
  const char *e = strstr(s + 1, "\n# ---- ");
  *end = e ? e : s + strlen(s);
  return s;
}

static bool section_has(const char *s, const char *e, const char *needle) {
  size_t n = strlen(needle);
  for (const char *q = s; q + n <= e; q++)
    if (memcmp(q, needle, n) == 0) return true;
  return false;
}

static int read_backends(const char *sections, mk_export_modelnew *m, mk_errmsg *err) {
  for (int i = 0; i < m->nsubkernels; i++) {
    mk_export_subkernel *sk = &m->subkernels[i];
    if (sk->section < 0) continue;
    const char *end = NULL, *s = find_section(sections, sk->section, &end);
    if (s == NULL)
      return mk_errf(err, MK_EPARSE, "subkernel sk%d: its code (section sk%d) is not in the file",
                     sk->index, sk->section);
    if (section_has(s, end, "_MkCudaKernels(") || section_has(s, end, "MK_BACKEND = \"cuda\""))
      sk->backend = MK_EXPORT_CUDA;
    else if (section_has(s, end, "@triton.jit"))
      sk->backend = MK_EXPORT_TRITON;
  }
  return 0;
}

/* The original module: after its marker line, up to the first section, the
 * CUDA launcher, the channels_last helper or class ModelNew, whichever comes
 * first (compose writes them in that order, each after a blank line). */
static int read_module(const char *text, mk_export_modelnew *m, const char **rest, mk_errmsg *err) {
  const char *start = strstr(text, module_marker);
  if (start == NULL) return mk_errf(err, MK_EPARSE, "the original module's marker line is missing");
  start += sizeof module_marker - 1;
  static const char *const ends[] = {"\n\n# ---- sk", "\n\nclass _MkCudaKernels:",
                                     "\n\n# ---- CUDA C++ kernels", "\n\ndef _mk_keep_channels_last(",
                                     "\n\nclass ModelNew("};
  const char *end = NULL;
  for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
    const char *e = strstr(start, ends[i]);
    if (e && (end == NULL || e < end)) end = e;
  }
  if (end == NULL) return mk_errf(err, MK_EPARSE, "class ModelNew is missing");
  m->module_source = mk_strndup(start, (size_t)(end - start));
  *rest = end;
  return m->module_source ? 0 : mk_errf(err, MK_ENOMEM, "out of memory");
}

/* The search's last resort: the header line, the module, `class
 * ModelNew(Model): pass`. */
static int read_plain(const char *text, mk_export_modelnew *m, mk_errmsg *err) {
  const char *src = text + sizeof plain_line - 1;
  const char *cls = NULL;
  for (const char *q = src; (q = strstr(q, "\n\nclass ModelNew(")) != NULL; q++) cls = q;
  if (cls == NULL) return mk_errf(err, MK_EPARSE, "class ModelNew is missing");
  const char *name = cls + 17, *close = strchr(name, ')');
  if (close == NULL || close - name <= 0 || close - name >= (long)sizeof m->class_name)
    return mk_errf(err, MK_EPARSE, "class ModelNew names no base class");
  snprintf(m->class_name, sizeof m->class_name, "%.*s", (int)(close - name), name);
  m->plain = true;
  m->module_source = mk_strndup(src, (size_t)(cls - src));
  return m->module_source ? 0 : mk_errf(err, MK_ENOMEM, "out of memory");
}

/* A kernel section no header line accounts for (a header line too long to
 * read): listed anyway, so a Triton or CUDA kernel is never missed. */
static int read_unlisted_sections(const char *sections, mk_export_modelnew *m, mk_errmsg *err) {
  for (const char *p = strstr(sections, "\n# ---- sk"); p; p = strstr(p + 1, "\n# ---- sk")) {
    int k = -1;
    if (sscanf(p, "\n# ---- sk%d ", &k) != 1 || k < 0) continue;
    bool listed = false;
    for (int i = 0; i < m->nsubkernels && !listed; i++) listed = m->subkernels[i].section == k;
    if (listed) continue;
    mk_export_subkernel sk = {.index = k, .section = k, .first_line = 0, .last_line = 0};
    snprintf(sk.name, sizeof sk.name, "?");
    snprintf(sk.variant, sizeof sk.variant, "?");
    int rc = add_subkernel(m, &sk, err);
    if (rc) return rc;
  }
  return 0;
}

int mk_export_read_modelnew(const char *text, mk_export_modelnew *out, mk_errmsg *err) {
  memset(out, 0, sizeof *out);
  if (text == NULL) return mk_errf(err, MK_EINVAL, "no text");
  if ((out->text = mk_strdup(text)) == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  if (strncmp(text, plain_line, sizeof plain_line - 1) == 0) return read_plain(text, out, err);
  if (strncmp(text, first_line, sizeof first_line - 1) != 0)
    return mk_errf(err, MK_EPARSE, "not a ModelNew composed by MKEvolve (its first line is not "
                                   "\"# ModelNew composed by MKEvolve ...\")");
  int rc = read_first_line(text, out, err);
  if (!rc) rc = read_subkernel_lines(next_line(text), out, err);
  const char *rest = NULL;
  if (!rc) rc = read_module(text, out, &rest, err);
  if (!rc) rc = read_unlisted_sections(rest, out, err);
  if (!rc) rc = read_backends(rest, out, err);
  return rc;
}
