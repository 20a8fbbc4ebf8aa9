/* lsp_backend.c — builders and destructors for backend results. */
#include "mk_lsp_backend.h"

#include "mk_buf.h"

#include <stdlib.h>
#include <string.h>

/* Grows an array of `size`-byte elements to hold one more. */
static void *grow(void *arr, int n, size_t size) {
  if ((n & (n - 1)) != 0 && n != 0) return arr; /* capacity is the next power of two */
  int cap = n ? n * 2 : 4;
  return realloc(arr, (size_t)cap * size);
}

static void action_free(mk_lsp_action *x) {
  free(x->title);
  free(x->command);
  free(x->kind);
  cJSON_Delete(x->arguments);
}

void mk_lsp_analysis_free(mk_lsp_analysis *a) {
  if (a == NULL) return;
  for (int i = 0; i < a->nfindings; i++) {
    mk_lsp_finding *f = &a->findings[i];
    free(f->code);
    free(f->message);
    for (int k = 0; k < f->nnotes; k++) {
      free(f->notes[k].path);
      free(f->notes[k].message);
    }
    free(f->notes);
  }
  free(a->findings);
  for (int i = 0; i < a->nregions; i++) {
    mk_lsp_region *r = &a->regions[i];
    free(r->label);
    free(r->hover);
    for (int k = 0; k < r->nactions; k++) action_free(&r->actions[k]);
    free(r->actions);
  }
  free(a->regions);
  for (int i = 0; i < a->nactions; i++) action_free(&a->actions[i]);
  free(a->actions);
  memset(a, 0, sizeof *a);
}

int mk_lsp_analysis_add_finding(mk_lsp_analysis *a, mk_lsp_range r, mk_lsp_severity sev,
                                const char *code, const char *message) {
  mk_lsp_finding *arr = grow(a->findings, a->nfindings, sizeof *arr);
  if (arr == NULL) return MK_ENOMEM;
  a->findings = arr;
  mk_lsp_finding *f = &arr[a->nfindings];
  memset(f, 0, sizeof *f);
  f->range = r;
  f->severity = sev;
  f->code = code ? mk_strdup(code) : NULL;
  f->message = mk_strdup(message ? message : "");
  a->nfindings++;
  return f->message == NULL || (code && f->code == NULL) ? MK_ENOMEM : 0;
}

int mk_lsp_finding_add_note(mk_lsp_finding *f, const char *path, mk_lsp_range r,
                            const char *message) {
  mk_lsp_note *arr = grow(f->notes, f->nnotes, sizeof *arr);
  if (arr == NULL) return MK_ENOMEM;
  f->notes = arr;
  mk_lsp_note *n = &arr[f->nnotes++];
  n->path = path ? mk_strdup(path) : NULL;
  n->range = r;
  n->message = mk_strdup(message ? message : "");
  return n->message == NULL ? MK_ENOMEM : 0;
}

int mk_lsp_analysis_add_region(mk_lsp_analysis *a, mk_lsp_range r, const char *label,
                               const char *hover) {
  mk_lsp_region *arr = grow(a->regions, a->nregions, sizeof *arr);
  if (arr == NULL) return MK_ENOMEM;
  a->regions = arr;
  mk_lsp_region *g = &arr[a->nregions++];
  memset(g, 0, sizeof *g);
  g->range = r;
  g->label = label ? mk_strdup(label) : NULL;
  g->hover = hover ? mk_strdup(hover) : NULL;
  return (label && !g->label) || (hover && !g->hover) ? MK_ENOMEM : 0;
}

int mk_lsp_analysis_add_action(mk_lsp_analysis *a, mk_lsp_region *region, const char *title,
                               const char *command, cJSON *arguments, const char *kind,
                               bool preferred) {
  mk_lsp_action **arrp = region ? &region->actions : &a->actions;
  int *np = region ? &region->nactions : &a->nactions;
  mk_lsp_action *arr = grow(*arrp, *np, sizeof *arr);
  if (arr == NULL) {
    cJSON_Delete(arguments);
    return MK_ENOMEM;
  }
  *arrp = arr;
  mk_lsp_action *x = &arr[(*np)++];
  x->title = mk_strdup(title);
  x->command = mk_strdup(command);
  x->arguments = arguments;
  x->kind = kind ? mk_strdup(kind) : NULL;
  x->preferred = preferred;
  return x->title == NULL || x->command == NULL ? MK_ENOMEM : 0;
}
