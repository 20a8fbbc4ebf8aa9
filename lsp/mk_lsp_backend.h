/* mk_lsp_backend.h — what the server asks of whatever knows the code.
 *
 * The server knows LSP and nothing about kernels. It hands a document's
 * text to a backend and gets back an editor-neutral analysis: findings
 * (become diagnostics), regions (lines a unit of the module covers, with
 * hover markdown, a code-lens label and the actions that apply there) and
 * document-wide actions. Actions are commands the backend itself executes
 * (workspace/executeCommand); long ones report progress and can be
 * cancelled. The engine adapter (lsp_engine.c) is the real backend;
 * tests plug in fakes.
 *
 * Positions here are 0-based lines and UTF-8 byte columns (what the
 * engine and tree-sitter speak); the server converts to UTF-16.
 *
 * Asynchrony: analyze and execute may finish synchronously (calling
 * sink->done before returning) or later on the loop. `done` is called
 * exactly once per started job, also after cancel (rc MK_ECANCELED). */
#ifndef MK_LSP_BACKEND_H
#define MK_LSP_BACKEND_H

#include "mk_err.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum mk_lsp_severity {
  MK_LSP_SEV_ERROR = 1,
  MK_LSP_SEV_WARNING = 2,
  MK_LSP_SEV_INFO = 3,
  MK_LSP_SEV_HINT = 4,
} mk_lsp_severity;

typedef struct mk_lsp_range {
  int line, col;         /* 0-based line, UTF-8 byte column */
  int end_line, end_col; /* exclusive end */
} mk_lsp_range;

typedef struct mk_lsp_note {   /* relatedInformation */
  char *path;                  /* file the note points into (NULL: the document) */
  mk_lsp_range range;
  char *message;
} mk_lsp_note;

typedef struct mk_lsp_finding {
  mk_lsp_range range;
  mk_lsp_severity severity;
  char *code;                  /* short stable id ("syntax", "missing-get-inputs"), may be NULL */
  char *message;
  mk_lsp_note *notes;
  int nnotes;
} mk_lsp_finding;

typedef struct mk_lsp_action {
  char *title;                 /* "Swap subkernel → fused_v3 (1.6x)" */
  char *command;               /* one of the backend's commands */
  cJSON *arguments;            /* JSON array, owned */
  char *kind;                  /* LSP CodeActionKind ("refactor.rewrite"), may be NULL */
  bool preferred;
} mk_lsp_action;

typedef struct mk_lsp_region {
  mk_lsp_range range;
  char *label;                 /* code lens title, may be NULL */
  char *hover;                 /* markdown, may be NULL */
  mk_lsp_action *actions;
  int nactions;
} mk_lsp_region;

typedef struct mk_lsp_analysis {
  mk_lsp_finding *findings;  int nfindings;
  mk_lsp_region *regions;    int nregions;
  mk_lsp_action *actions;    int nactions; /* whole-document actions */
} mk_lsp_analysis;

void mk_lsp_analysis_free(mk_lsp_analysis *a);
/* Builders (copy their string arguments; return MK_ENOMEM on failure). */
int mk_lsp_analysis_add_finding(mk_lsp_analysis *a, mk_lsp_range r, mk_lsp_severity sev,
                                const char *code, const char *message);
int mk_lsp_finding_add_note(mk_lsp_finding *f, const char *path, mk_lsp_range r,
                            const char *message);
int mk_lsp_analysis_add_region(mk_lsp_analysis *a, mk_lsp_range r, const char *label,
                               const char *hover);
/* Appends an action to a region's list (region != NULL) or the document's.
 * `arguments` is taken over. */
int mk_lsp_analysis_add_action(mk_lsp_analysis *a, mk_lsp_region *region, const char *title,
                               const char *command, cJSON *arguments, const char *kind,
                               bool preferred);

/* What the backend is given to analyse (borrowed for the call; copy what
 * an asynchronous job keeps). */
typedef struct mk_lsp_doc_view {
  const char *uri;
  const char *path;     /* local path or NULL */
  const char *text;
  size_t len;
  int version;
  bool saved;           /* analysis after didSave: re-verify what changed */
  bool opened;          /* the first analysis after didOpen */
} mk_lsp_doc_view;

/* The server's end of a job: the backend reports through it. */
typedef struct mk_lsp_sink {
  /* percent 0..100 or -1; message may be NULL. Optional to call. */
  void (*progress)(void *ctx, int percent, const char *message);
  /* Analysis jobs: rc 0 and `analysis` (taken over), or rc < 0 and err.
   * Command jobs: rc and `result` (JSON, taken over, may be NULL) with
   * optional keys "message" (shown to the user), "edit" (a WorkspaceEdit
   * the server applies through workspace/applyEdit), "refresh" (true:
   * re-analyse open documents), "showDocument" (a URI the server asks the
   * client to open with window/showDocument; a client without it is told
   * the file's path in a message). */
  void (*done)(void *ctx, int rc, mk_lsp_analysis *analysis, cJSON *result, const char *err);
  void *ctx;
} mk_lsp_sink;

/* What the server offers a backend for things that are not job results. */
typedef struct mk_lsp_backend_host {
  /* window/showMessage: type 1 error, 2 warning, 3 info, 4 log. */
  void (*show_message)(void *ctx, int type, const char *text);
  /* Results changed outside a job (cache filled by another run): the
   * server re-analyses open documents. */
  void (*refresh)(void *ctx);
  /* Background work that belongs to no request (an analysis the backend
   * started on its own): window/workDoneProgress, not cancellable.
   * begin returns an id (0: the client shows no progress; the other
   * calls accept 0). */
  int (*progress_begin)(void *ctx, const char *title, const char *message);
  void (*progress_report)(void *ctx, int id, int percent, const char *message);
  void (*progress_end)(void *ctx, int id, const char *message);
  /* The editor's current text of the open document at local `path` (a
   * copy the caller frees), or NULL when it is not open. */
  char *(*open_text)(void *ctx, const char *path);
  /* What the client can do with workspace edits (MK_LSP_CLIENT_* bits). */
  unsigned (*client_caps)(void *ctx);
  void *ctx;
} mk_lsp_backend_host;

enum {
  MK_LSP_CLIENT_APPLY_EDIT = 1u << 0,     /* workspace/applyEdit */
  MK_LSP_CLIENT_DOC_CHANGES = 1u << 1,    /* WorkspaceEdit.documentChanges */
  MK_LSP_CLIENT_CREATE_FILES = 1u << 2,   /* resource operation "create" */
  MK_LSP_CLIENT_SHOW_DOCUMENT = 1u << 3,  /* window/showDocument */
};

typedef struct mk_lsp_backend_ops {
  /* Receives the host right after the server starts. Optional. */
  void (*attach)(void *self, const mk_lsp_backend_host *host);
  /* Commands execute() accepts (NULL-terminated). */
  const char *const *(*commands)(void *self);
  /* Analyses a document; *job is set to a non-zero id for cancel. */
  int (*analyze)(void *self, const mk_lsp_doc_view *doc, const mk_lsp_sink *sink, uint64_t *job);
  /* Runs a command with its JSON arguments (array, may be NULL). */
  int (*execute)(void *self, const char *command, const cJSON *arguments, const mk_lsp_sink *sink,
                 uint64_t *job, mk_errmsg *err);
  /* Requests cancellation; the job still ends through done(). */
  void (*cancel)(void *self, uint64_t job);
  /* New settings, as the editor sent them (initializationOptions,
   * didChangeConfiguration or the pulled "mkevolve" section: flat or under
   * a "mkevolve" key; mk_lsp_settings_scope). Called once at initialize
   * (settings NULL when there were none) and on every change; updates are
   * partial. Returns 0, or MK_EINVAL with err naming the refused keys (the
   * server shows it). The core's own keys (mk_lsp_settings.h) are in the
   * object too: ignore them. */
  int (*configure)(void *self, const cJSON *settings, mk_errmsg *err);
  /* A document was closed (drop caches). Optional. */
  void (*closed)(void *self, const char *uri);
  void (*destroy)(void *self);
} mk_lsp_backend_ops;

typedef struct mk_lsp_backend {
  const mk_lsp_backend_ops *ops;
  void *self;
} mk_lsp_backend;

#endif
