/* propose_backend.c — the kernel language choice (`--backend triton|cuda|auto`):
 * what a candidate runs on, and the builtin generator for a choice (Triton,
 * CUDA C++, or both competing in one beam). The choice's names are in
 * propose_backend_name.c. */
#include "mk_propose.h"

#include <stdlib.h>
#include <string.h>

/* `MK_BACKEND = "cuda"` at the start of a line (docs/candidates.md). */
static bool declares_cuda(const char *src) {
  static const char key[] = "MK_BACKEND = \"cuda\"";
  for (const char *p = strstr(src, key); p; p = strstr(p + 1, key))
    if (p == src || p[-1] == '\n') return true;
  return false;
}

const char *mk_candidate_backend(const mk_candidate *c) {
  if (c == NULL || c->source == NULL || (c->origin && strcmp(c->origin, "reference") == 0))
    return "pytorch";
  if (declares_cuda(c->source)) return "cuda";
  /* @triton.jit, also under @triton.autotune / @triton.heuristics */
  return strstr(c->source, "triton.jit") ? "triton" : "pytorch";
}

/* Moves b's candidates into a, alternating with a's own, at most max. */
static int interleave(mk_candidate_list *a, mk_candidate_list *b, int max, mk_candidate_list *out) {
  int rc = 0;
  for (int i = 0; i < a->n || i < b->n; i++) {
    mk_candidate_list *from[2] = {a, b};
    for (int k = 0; k < 2; k++) {
      if (i >= from[k]->n) continue;
      mk_candidate c = from[k]->items[i];
      from[k]->items[i] = (mk_candidate){0};
      if (rc || (max > 0 && out->n >= max)) mk_candidate_free(&c);
      else rc = mk_candidate_list_push(out, c); /* frees c on failure */
    }
  }
  return rc;
}

/* Both generators; the candidates of either, interleaved. EUNSUPPORTED with
 * the Triton reason only when neither wrote anything. */
static int propose_both(const mk_propose_request *req, mk_candidate_list *out, mk_errmsg *err) {
  mk_candidate_list t = {0}, c = {0};
  mk_errmsg terr = {{0}}, cerr = {{0}};
  int trc = mk_builtin_propose(req, &t, &terr);
  int crc = mk_builtin_cuda_propose(req, &c, &cerr);
  int rc = 0;
  bool tfail = trc != 0 && !(trc == MK_EUNSUPPORTED && t.n > 0);
  bool cfail = crc != 0 && !(crc == MK_EUNSUPPORTED && c.n > 0);
  if (tfail && cfail) /* a hard error first, else both reasons */
    rc = mk_errf(err, trc != MK_EUNSUPPORTED ? trc : crc, "%s; CUDA C++: %s", terr.text, cerr.text);
  else if (tfail && trc != MK_EUNSUPPORTED) rc = mk_errf(err, trc, "%s", terr.text);
  else if (cfail && crc != MK_EUNSUPPORTED) rc = mk_errf(err, crc, "%s", cerr.text);
  if (rc == 0 && interleave(&t, &c, req->max_candidates, out))
    rc = mk_errf(err, MK_ENOMEM, "out of memory");
  mk_candidate_list_free(&t);
  mk_candidate_list_free(&c);
  return rc;
}

int mk_builtin_propose_backend(const mk_propose_request *req, mk_candidate_list *out,
                               mk_errmsg *err) {
  if (req == NULL) return mk_errf(err, MK_EINVAL, "no request given");
  mk_kernel_backend b = req->backend;
  /* Repairing or optimising a variant stays in its language. */
  if (b == MK_KBACKEND_AUTO && req->parent && req->mode != MK_PROPOSE_NEW) {
    const char *pb = mk_candidate_backend(req->parent);
    if (strcmp(pb, "cuda") == 0) b = MK_KBACKEND_CUDA;
    else if (strcmp(pb, "triton") == 0) b = MK_KBACKEND_TRITON;
  }
  switch (b) {
  case MK_KBACKEND_CUDA: return mk_builtin_cuda_propose(req, out, err);
  case MK_KBACKEND_AUTO: return propose_both(req, out, err);
  case MK_KBACKEND_TRITON: break;
  }
  return mk_builtin_propose(req, out, err);
}
