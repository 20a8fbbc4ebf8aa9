/* mk_lsp_progress.h — window/workDoneProgress for background jobs.
 *
 * A progress is created with window/workDoneProgress/create (or uses a
 * workDoneToken the client supplied with its request) and then reports
 * begin, report (percentage + message) and end through $/progress. Until
 * the client has acknowledged `create`, reports are held back (the spec
 * forbids using the token earlier); only the latest report is kept, so a
 * slow client never builds a queue. If the client refuses `create` or
 * does not support work-done progress, reporting is silently skipped —
 * the job itself is unaffected. window/workDoneProgress/cancel reaches
 * the job's cancel callback.
 *
 * Ownership: the set owns its progress objects. A progress stays alive
 * until it has ended AND its create request was answered; callers keep
 * only the numeric id. Free the rpc before the set. */
#ifndef MK_LSP_PROGRESS_H
#define MK_LSP_PROGRESS_H

#include "mk_lsp_rpc.h"

#include <stdbool.h>

typedef void (*mk_lsp_progress_cancel_fn)(void *ctx, int progress_id);

typedef struct mk_lsp_progress mk_lsp_progress;

typedef struct mk_lsp_progress_set {
  mk_lsp_rpc *rpc;
  bool supported;            /* client capability window.workDoneProgress */
  mk_lsp_progress *list;
  int next_id;
} mk_lsp_progress_set;

void mk_lsp_progress_init(mk_lsp_progress_set *s, mk_lsp_rpc *rpc);
void mk_lsp_progress_free(mk_lsp_progress_set *s);

/* Starts a progress and returns its id (> 0), or 0 when the client does
 * not support progress (the other calls then accept 0 and do nothing).
 * `client_token` (may be NULL) is a workDoneToken from the request. */
int mk_lsp_progress_begin(mk_lsp_progress_set *s, const cJSON *client_token, const char *title,
                          const char *message, bool cancellable,
                          mk_lsp_progress_cancel_fn on_cancel, void *ctx);
/* percent in 0..100, or -1 for none; message may be NULL. */
void mk_lsp_progress_report(mk_lsp_progress_set *s, int id, int percent, const char *message);
void mk_lsp_progress_end(mk_lsp_progress_set *s, int id, const char *message);
/* Handles window/workDoneProgress/cancel params. */
void mk_lsp_progress_cancel(mk_lsp_progress_set *s, const cJSON *params);
/* Number of progresses begun and not ended. */
int mk_lsp_progress_active(const mk_lsp_progress_set *s);

#endif
