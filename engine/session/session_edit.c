/* session_edit.c — editable variants: a subkernel's kernel in a file of its
 * own that the user edits, and the verification of that file against the
 * subkernel alone (mk_session.h, "editable variants").
 *
 * Ownership: an edit_req owns copies of everything it needs (paths, the
 * text, the subkernel's name and its reference's fingerprint) and looks the
 * module up again when the verdict arrives, so a module re-captured or
 * forgotten meanwhile is noticed (MK_ESTALE) rather than dereferenced. The
 * verifier calls back exactly once per submitted job (also when cancelled
 * or closing), and so does every edit_req. */
#include "mk_buf.h"
#include "mk_json.h"
#include "mk_sha256.h"
#include "session_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EDIT_DIR "edit"
#define REF_TAG "# mkevolve-ref: "
#define MAX_EDIT_BYTES ((size_t)16 << 20)

typedef struct session_edit_req {
  mk_session *s;
  int id;                 /* the session's job id (mk_session_cancel) */
  uint64_t vjob;          /* the verifier's */
  bool cancelled;
  char *edit_path, *module_path, *sk_name, *variant, *source;
  char ref_fp[17];        /* fingerprint of the subkernel's reference when submitted */
  mk_session_edit_cb cb;
  void *data;
  struct session_edit_req *next;
} session_edit_req;

/* ---- names and paths ------------------------------------------------------------------ */

/* 16 hex digits of the sha256 of a subkernel's reference source. */
static void ref_fingerprint(const mk_subkernel_state *st, char out[17]) {
  char hex[65];
  const char *src = st->nvariants > 0 && st->variants[0].cand.source ? st->variants[0].cand.source : "";
  mk_sha256_hex(src, strlen(src), hex);
  memcpy(out, hex, 16);
  out[16] = '\0';
}

/* A variant name as a file-name part: [A-Za-z0-9_-], others become '_'. */
static void file_part(const char *name, mk_buf *out) {
  for (const char *p = name && *name ? name : "variant"; *p; p++)
    mk_buf_putc(out, isalnum((unsigned char)*p) || *p == '_' || *p == '-' ? *p : '_');
}

/* "user_<variant>", or the variant itself when it is a user variant already. */
static char *user_variant_name(const char *variant) {
  if (strncmp(variant, "user_", 5) == 0) return mk_strdup(variant);
  return mk_strdup_printf("user_%s", variant);
}

static int edit_dir_of(mk_session *s, const char *module_path, bool create, char *out, size_t size) {
  if (session_workdir(s, module_path, create, out, size)) return MK_ERANGE;
  size_t len = strlen(out);
  int n = snprintf(out + len, size - len, "/%s", EDIT_DIR);
  if (n < 0 || (size_t)n >= size - len) return MK_ERANGE;
  if (create && mkdir(out, 0755) != 0 && errno != EEXIST) return MK_EIO;
  return 0;
}

static int find_subkernel(const module_state *m, const char *name) {
  for (int i = 0; i < m->part.nsubkernels; i++)
    if (m->part.subkernels[i].name && strcmp(m->part.subkernels[i].name, name) == 0) return i;
  return -1;
}

bool mk_session_is_edit_path(const char *path) {
  const char *slash = path ? strrchr(path, '/') : NULL;
  if (slash == NULL) return false;
  size_t blen = strlen(slash + 1), dlen = (size_t)(slash - path), elen = strlen("/" EDIT_DIR);
  const char *base = slash + 1;
  return dlen >= elen && strncmp(path + dlen - elen, "/" EDIT_DIR, elen) == 0 && blen >= 4 &&
         strcmp(base + blen - 3, ".py") == 0 && strcspn(base, ".") > 0 &&
         strcspn(base, ".") < blen - 3;
}

int mk_session_edit_target(mk_session *s, const char *edit_path, char **module_path,
                           char **subkernel_name, mk_errmsg *err) {
  if (module_path) *module_path = NULL;
  if (subkernel_name) *subkernel_name = NULL;
  const char *slash = edit_path ? strrchr(edit_path, '/') : NULL;
  size_t dlen = slash ? (size_t)(slash - edit_path) : 0;
  const char *base = slash ? slash + 1 : "";
  size_t elen = strlen("/" EDIT_DIR);
  if (!mk_session_is_edit_path(edit_path))
    return mk_errf(err, MK_EINVAL, "%s is not an mkevolve edit file (those are "
                   ".mkevolve/<module>/edit/<subkernel>.<variant>.py, written by \"Edit subkernel\")",
                   edit_path ? edit_path : "(no path)");
  char *found = NULL;
  char dir[4096];
  for (module_state *m = s->modules; m && found == NULL; m = m->next)
    if (edit_dir_of(s, m->path, false, dir, sizeof dir) == 0 && strlen(dir) == dlen &&
        strncmp(dir, edit_path, dlen) == 0)
      found = mk_strdup(m->path);
  if (found == NULL && s->cfg.workdir == NULL) {
    /* <root>/.mkevolve/<stem>/edit -> <root>/<stem>.py */
    const char *edit = edit_path + dlen - elen; /* "/edit/..." */
    const char *stem = edit;
    while (stem > edit_path && stem[-1] != '/') stem--;
    const char *mk = stem - 1; /* the '/' before <stem> */
    static const char tag[] = "/.mkevolve";
    size_t tlen = sizeof tag - 1;
    if (stem < edit && mk - edit_path >= (ptrdiff_t)tlen && strncmp(mk - tlen, tag, tlen) == 0)
      found = mk_strdup_printf("%.*s/%.*s.py", (int)(mk - tlen - edit_path), edit_path,
                               (int)(edit - stem), stem);
  }
  if (found == NULL)
    return mk_errf(err, MK_ENOENT, "no module the session knows has %.*s as its edit folder; "
                   "analyse the module first", (int)dlen, edit_path);
  char *sk = mk_strndup(base, strcspn(base, "."));
  if (sk == NULL) {
    free(found);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  if (module_path) *module_path = found;
  else free(found);
  if (subkernel_name) *subkernel_name = sk;
  else free(sk);
  return 0;
}

/* The variant part of an edit file's name: "<sk>.<variant>.py" -> variant. */
static char *variant_of(const char *edit_path) {
  const char *base = strrchr(edit_path, '/');
  base = base ? base + 1 : edit_path;
  const char *dot = strchr(base, '.');
  size_t len = strlen(base);
  if (dot == NULL || len < 3) return NULL;
  const char *end = base + len - 3; /* ".py" */
  return end > dot + 1 ? mk_strndup(dot + 1, (size_t)(end - dot - 1)) : NULL;
}

/* ---- writing an edit file ----------------------------------------------------------------- */

/* MK_USES_TORCH for the reference: the ops it replays, so an edit that
 * keeps calling some of them still verifies (docs/candidates.md). */
static void uses_torch_line(const module_state *m, const mk_subkernel *sk, mk_buf *b) {
  mk_buf names;
  mk_buf_init(&names, 4096);
  for (int i = 0; i < sk->nnodes; i++) {
    const mk_node *n = &m->g->nodes[sk->nodes[i]];
    char tmp[64];
    const char *sn = n->short_name ? n->short_name : mk_op_short_name(n->op, tmp, sizeof tmp);
    if (sn == NULL || *sn == '\0') continue;
    char quoted[96];
    snprintf(quoted, sizeof quoted, "\"%s\", ", sn);
    if (names.len == 0 || strstr(mk_buf_cstr(&names), quoted) == NULL) mk_buf_puts(&names, quoted);
  }
  if (names.len)
    mk_buf_printf(b, "\n\n# The torch ops the reference replays; drop the ones your kernel computes itself.\n"
                     "MK_USES_TORCH = (%s)\n", mk_buf_cstr(&names));
  mk_buf_free(&names);
}

int mk_session_edit_variant(mk_session *s, const char *path, int subkernel, int variant,
                            char **file_path, mk_errmsg *err) {
  *file_path = NULL;
  module_state *m = session_module(s, path, false);
  if (m == NULL || m->g == NULL) return mk_errf(err, MK_ENOENT, "%s has not been analysed", path);
  if (subkernel < 0 || subkernel >= m->part.nsubkernels)
    return mk_errf(err, MK_EINVAL, "no subkernel %d (the module has %d)", subkernel, m->part.nsubkernels);
  const mk_subkernel *sk = &m->part.subkernels[subkernel];
  const mk_subkernel_state *st = &m->st[subkernel];
  if (variant < 0) variant = st->chosen;
  if (variant >= st->nvariants)
    return mk_errf(err, MK_EINVAL, "subkernel %s has no variant %d (it has %d)", sk->name, variant,
                   st->nvariants);
  const mk_variant *v = &st->variants[variant];
  if (v->cand.source == NULL)
    return mk_errf(err, MK_ENOENT, "variant %d of %s has no source", variant, sk->name);
  char dir[4096];
  int rc = edit_dir_of(s, m->path, true, dir, sizeof dir);
  if (rc) return mk_errf(err, rc, "cannot create the edit folder for %s", path);
  mk_buf fp;
  mk_buf_init(&fp, 8192);
  mk_buf_printf(&fp, "%s/%s.", dir, sk->name);
  file_part(v->cand.name, &fp);
  mk_buf_puts(&fp, ".py");
  if (fp.err) {
    mk_buf_free(&fp);
    return mk_errf(err, MK_ERANGE, "edit file path too long");
  }
  struct stat sb;
  if (stat(mk_buf_cstr(&fp), &sb) == 0) { /* the user's edits stay */
    *file_path = mk_buf_steal(&fp, NULL);
    return *file_path ? 0 : mk_errf(err, MK_ENOMEM, "out of memory");
  }
  char ref_fp[17];
  ref_fingerprint(st, ref_fp);
  char *uname = user_variant_name(v->cand.name ? v->cand.name : "variant");
  const char *slash = strrchr(m->path, '/');
  mk_buf text;
  mk_buf_init(&text, MAX_EDIT_BYTES);
  mk_buf_printf(&text, "# mkevolve: variant \"%s\" of subkernel %s (sk%d, lines %d-%d) of %s\n",
                v->cand.name ? v->cand.name : "?", sk->name, subkernel, sk->first_line, sk->last_line,
                slash ? slash + 1 : m->path);
  mk_buf_printf(&text, REF_TAG "%s (the subkernel's reference when this file was written)\n", ref_fp);
  mk_buf_printf(&text, "# Save to verify this file against that subkernel alone; once it verifies it is\n"
                       "# variant \"%s\" of %s (swap it in from the module). Rules: docs/candidates.md.\n",
                uname ? uname : "user", sk->name);
  mk_buf_puts(&text, v->cand.source);
  if (variant == 0 && strstr(v->cand.source, "MK_USES_TORCH") == NULL) uses_torch_line(m, sk, &text);
  free(uname);
  rc = text.err ? mk_errf(err, MK_ERANGE, "the variant is too large to edit")
                : mk_write_file(mk_buf_cstr(&fp), mk_buf_cstr(&text), text.len);
  if (rc && err && err->text[0] == '\0') mk_errf(err, rc, "cannot write %s: %s", mk_buf_cstr(&fp), mk_strerror(rc));
  mk_buf_free(&text);
  if (rc) {
    mk_buf_free(&fp);
    return rc;
  }
  *file_path = mk_buf_steal(&fp, NULL);
  return *file_path ? 0 : mk_errf(err, MK_ENOMEM, "out of memory");
}

/* ---- verifying an edit file ------------------------------------------------------------------ */

static void req_free(session_edit_req *r) {
  free(r->edit_path);
  free(r->module_path);
  free(r->sk_name);
  free(r->variant);
  free(r->source);
  free(r);
}

static void req_unlink(session_edit_req *r) {
  for (session_edit_req **p = &r->s->edits; *p; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      return;
    }
}

/* The line of the last frame in the candidate's file (the verifier writes
 * it as .../candidates/xx/mk_<sha>.py) of a traceback, 0 when none. */
static int traceback_line(const char *tb) {
  int line = 0;
  for (const char *p = tb ? strstr(tb, "/mk_") : NULL; p; p = strstr(p + 1, "/mk_")) {
    const char *q = strstr(p, ".py\", line ");
    const char *nl = strchr(p, '\n');
    if (q && (nl == NULL || q < nl)) line = atoi(q + strlen(".py\", line "));
  }
  return line;
}

/* Adds the verified edit to the subkernel (replacing a variant of the same
 * name); recomposes when the replaced one was chosen. */
static bool add_variant(mk_session *s, module_state *m, int i, session_edit_req *req,
                        const mk_eval_result *r, const char *report) {
  mk_subkernel_state *st = &m->st[i];
  int at = -1;
  for (int k = 1; k < st->nvariants; k++)
    if (st->variants[k].cand.name && strcmp(st->variants[k].cand.name, req->variant) == 0) at = k;
  if (at < 0 && st->nvariants == st->cap) {
    int cap = st->cap ? st->cap * 2 : 4;
    mk_variant *p = realloc(st->variants, sizeof *p * (size_t)cap);
    if (p == NULL) return false;
    st->variants = p;
    st->cap = cap;
  }
  mk_variant v = {0};
  v.cand.name = mk_strdup(req->variant);
  v.cand.source = mk_strdup(req->source);
  v.cand.origin = mk_strdup("user");
  v.cand.notes = mk_strdup_printf("edited in %s", req->edit_path);
  v.result = *r;
  v.result.report_json = NULL;
  v.report = report ? mk_strdup(report) : NULL;
  if (!v.cand.name || !v.cand.source || !v.cand.origin) {
    mk_candidate_free(&v.cand);
    free(v.report);
    return false;
  }
  if (at < 0) {
    st->variants[st->nvariants++] = v;
  } else {
    mk_candidate_free(&st->variants[at].cand);
    free(st->variants[at].report);
    st->variants[at] = v;
    if (st->chosen == at && m->modelnew_path) {
      mk_errmsg cerr = {{0}};
      mk_session_compose(s, m->path, NULL, NULL, &cerr); /* the chosen text changed */
    }
  }
  return true;
}

static void fail_cb(session_edit_req *req, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_cb(session_edit_req *req, int status, const char *fmt, ...) {
  char msg[MK_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  req->cb(req->data, status, NULL, msg);
}

static void on_edit_verified(void *data, const mk_verify_result *v) {
  session_edit_req *req = data;
  mk_session *s = req->s;
  req_unlink(req);
  module_state *m = session_module(s, req->module_path, false);
  int i = m && m->g ? find_subkernel(m, req->sk_name) : -1;
  char fp[17] = "";
  if (i >= 0) ref_fingerprint(&m->st[i], fp);
  if (req->cancelled || v->status == MK_VERIFY_CANCELED || s->closing) {
    fail_cb(req, MK_ECANCELED, "the verification of %s was cancelled", req->edit_path);
  } else if (i < 0 || strcmp(fp, req->ref_fp) != 0) {
    fail_cb(req, MK_ESTALE, "%s was re-analysed while %s was being verified, and subkernel %s %s",
            req->module_path, req->edit_path, req->sk_name, i < 0 ? "is gone" : "changed");
  } else {
    mk_eval_result r;
    session_runtime_eval_result(v, &r);
    char *report = v->json ? cJSON_PrintUnformatted(v->json) : NULL;
    bool added = r.status == MK_EVAL_OK && m->job == 0 && add_variant(s, m, i, req, &r, report);
    free(report);
    /* NVRTC's diagnostics (mk_backend_report), on the file's own lines. */
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(v->json, "diagnostics");
    int nd = cJSON_IsArray(jd) ? cJSON_GetArraySize(jd) : 0;
    mk_session_edit_diag *diags = nd > 0 ? calloc((size_t)nd, sizeof *diags) : NULL;
    int k = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, jd) {
      if (diags == NULL) break;
      diags[k++] = (mk_session_edit_diag){(int)mk_json_num(d, "line", 0), (int)mk_json_num(d, "column", 0),
                                          mk_json_str(d, "severity", "error"), mk_json_str(d, "message", "")};
    }
    const mk_variant *ref = &m->st[i].variants[0];
    double eager = r.ref_eager_ms > 0 ? r.ref_eager_ms : ref->result.time_ms;
    int line = v->line > 0 ? v->line : r.status == MK_EVAL_OK ? 0 : traceback_line(v->traceback);
    mk_candidate c = {.source = req->source};
    session_module_refresh_views(s, m);
    mk_session_edit_result res = {
        .edit_path = req->edit_path,
        .module_path = req->module_path,
        .subkernel = i,
        .subkernel_name = req->sk_name,
        .variant = req->variant,
        .backend = mk_candidate_backend(&c),
        .status = mk_eval_status_name(r.status),
        .reason = r.status == MK_EVAL_OK ? "" : r.reason,
        .line = line,
        .column = (int)mk_json_num(v->json, "column", 0),
        .diags = diags,
        .ndiags = diags ? k : 0,
        .time_ms = r.time_ms,
        .speedup_eager = eager > 0 && r.time_ms > 0 ? eager / r.time_ms : -1,
        .trials_passed = r.trials_passed,
        .trials = r.trials,
        .added = added,
        .module = &m->view,
    };
    req->cb(req->data, 0, &res, NULL);
    free(diags);
  }
  req_free(req);
}

int mk_session_verify_edit(mk_session *s, const char *edit_path, const char *text,
                           mk_session_edit_cb cb, void *data, int *job, mk_errmsg *err) {
  if (job) *job = 0;
  char *module_path = NULL, *sk_name = NULL;
  int rc = mk_session_edit_target(s, edit_path, &module_path, &sk_name, err);
  if (rc) return rc;
  session_edit_req *req = calloc(1, sizeof *req);
  if (req == NULL) {
    free(module_path);
    free(sk_name);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  *req = (session_edit_req){.s = s, .module_path = module_path, .sk_name = sk_name, .cb = cb,
                            .data = data, .edit_path = mk_strdup(edit_path)};
  char *variant = variant_of(edit_path);
  req->variant = variant ? user_variant_name(variant) : NULL;
  free(variant);
  module_state *m = session_module(s, module_path, false);
  mk_verify *verify = session_runtime_verify(s);
  int i = -1;
  size_t len = 0;
  if (req->edit_path == NULL || req->variant == NULL) rc = mk_errf(err, MK_ENOMEM, "out of memory");
  else if (s->closing || verify == NULL) rc = mk_errf(err, MK_ECANCELED, "the session is closing");
  else if (m == NULL || m->g == NULL)
    rc = mk_errf(err, MK_ENOENT, "%s (the module of %s) has not been analysed", module_path, edit_path);
  else if (m->job)
    rc = mk_errf(err, MK_EBUSY, "an evolve job is running on %s; verify the edit when it ends", module_path);
  else if ((i = find_subkernel(m, sk_name)) < 0) {
    mk_buf names;
    mk_buf_init(&names, 4096);
    for (int k = 0; k < m->part.nsubkernels && k < 16; k++)
      mk_buf_printf(&names, "%s%s", k ? ", " : "", m->part.subkernels[k].name);
    rc = mk_errf(err, MK_EINVAL, "%s has no subkernel named %s (it has: %s)", module_path, sk_name,
                 mk_buf_cstr(&names));
    mk_buf_free(&names);
  } else if (text) {
    req->source = mk_strdup(text);
    if (req->source == NULL) rc = mk_errf(err, MK_ENOMEM, "out of memory");
  } else if ((rc = mk_read_file(edit_path, MAX_EDIT_BYTES, &req->source, &len)) != 0) {
    mk_errf(err, rc, "cannot read %s: %s", edit_path, mk_strerror(rc));
  }
  if (rc == 0 && m->capture_file == NULL) {
    /* Captured from the saved file: the file must still say the same. */
    char *disk = NULL;
    if (mk_read_file(module_path, (size_t)64 << 20, &disk, &len) != 0 || strcmp(disk, m->source) != 0)
      rc = mk_errf(err, MK_ESTALE, "%s changed since it was captured; analyse it again before "
                   "verifying %s", module_path, edit_path);
    free(disk);
  }
  if (rc == 0) {
    ref_fingerprint(&m->st[i], req->ref_fp);
    const char *tag = strstr(req->source, REF_TAG);
    if (tag && strncmp(tag + strlen(REF_TAG), req->ref_fp, 16) != 0)
      rc = mk_errf(err, MK_ESTALE, "subkernel %s of %s changed since %s was written (its reference "
                   "code differs): delete the file and run \"Edit subkernel\" again", sk_name,
                   module_path, edit_path);
  }
  if (rc == 0) {
    mk_verify_options o;
    session_runtime_candidate_options(s, m, &o);
    /* Saving must answer quickly: the edit is compared with eager PyTorch
     * (the hover's torch.compile column falls back to the reference's). */
    o.skip_compile = true;
    o.compile_baselines = false;
    mk_candidate_src src = {.source = req->source, .name = req->variant, .origin = "user"};
    req->id = s->next_job++;
    req->next = s->edits;
    s->edits = req;
    rc = mk_verify_submit_subkernel(verify, m->g, &m->part.subkernels[i], &src, &o, on_edit_verified,
                                    req, &req->vjob, err);
    if (rc) req_unlink(req);
  }
  if (rc) {
    req_free(req);
    return rc;
  }
  if (job) *job = req->id;
  return 0;
}

int session_edit_cancel(mk_session *s, int job) {
  for (session_edit_req *r = s->edits; r; r = r->next)
    if (r->id == job) {
      r->cancelled = true;
      mk_verify *verify = session_runtime_verify(s);
      if (verify) mk_verify_cancel(verify, r->vjob);
      return 0;
    }
  return MK_ENOENT;
}
