/* mk_frontend.h — static, instant analysis of a Python module (no Python).
 *
 * Three layers:
 *  - mk_text_index: line index and position conversions between byte
 *    offsets and (line, UTF-8 byte column). Lines end at "\n", "\r\n" or
 *    a lone "\r" (as in Python's universal newlines); an invalid UTF-8 byte
 *    is a character of its own. UTF-16 columns (what LSP speaks) are the
 *    language server's to convert (lsp/mk_lsp_docs.h).
 *  - mk_pydoc: a document parsed by tree-sitter (python grammar), error
 *    tolerant, with incremental re-parse after byte-range edits.
 *  - mk_pyoutline: what the engine needs from the source before running it:
 *    nn.Module classes with __init__/forward and forward's statements,
 *    module-level get_inputs/get_init_inputs, syntax errors and missing
 *    pieces as diagnostics.
 *
 * Line conventions: mk_text_index uses 0-based lines; mk_srange uses
 * 1-based lines and 0-based UTF-8 byte columns, like the capture's spans
 * (mk_span in mk_ir.h), so the two compare directly.
 *
 * Ownership: every struct here is caller-owned and released by its _free
 * function; strings inside are owned by the struct. An mk_text_index
 * borrows the text it indexes. No I/O. */
#ifndef MK_FRONTEND_H
#define MK_FRONTEND_H

#include "mk_err.h"

#include <stdbool.h>
#include <stddef.h>
#include <tree_sitter/api.h>

/* The generated grammar (third_party/tree-sitter-python, mk_grammar_python). */
const TSLanguage *tree_sitter_python(void);

/* Documents larger than this are refused (tree-sitter offsets are 32-bit). */
#define MK_FRONTEND_MAX_TEXT ((size_t)1 << 30)

/* ---- positions ------------------------------------------------------------ */

typedef struct mk_text_index {
  const char *text; /* borrowed */
  size_t len;
  size_t *line_starts; /* nlines entries; line_starts[0] == 0 */
  int nlines;          /* >= 1 (an empty text has one empty line) */
} mk_text_index;

/* Builds the index of text[0..len). Returns 0 or MK_ENOMEM/MK_ERANGE. */
int mk_text_index_init(mk_text_index *ix, const char *text, size_t len);
void mk_text_index_free(mk_text_index *ix);

/* 0-based line holding byte `offset` (clamped to [0, len]). */
int mk_text_line_of(const mk_text_index *ix, size_t offset);
/* Byte offsets of a line's start and end (end excludes the terminator);
 * lines out of range clamp to the first/last line. */
size_t mk_text_line_start(const mk_text_index *ix, int line);
size_t mk_text_line_end(const mk_text_index *ix, int line);

/* offset -> (line, byte column). An offset inside a line terminator maps to
 * the line's end; inside a multi-byte character, to that character's start. */
void mk_text_offset_to_bytecol(const mk_text_index *ix, size_t offset, int *line, int *col);
/* (line, byte column) -> offset, clamped: a column past the end of the line
 * is the line's end, a line past the end is the end of the text. */
size_t mk_text_bytecol_to_offset(const mk_text_index *ix, int line, int col);

/* ---- documents ----------------------------------------------------------- */

typedef struct mk_pydoc mk_pydoc;

/* Parses a copy of text[0..len). *out is freed with mk_pydoc_free. Syntax
 * errors do not fail this call: they are in the tree (and the outline). */
int mk_pydoc_new(const char *text, size_t len, mk_pydoc **out, mk_errmsg *err);
void mk_pydoc_free(mk_pydoc *d);
/* Replaces bytes [start, old_end) by text[0..len) and re-parses
 * incrementally. Fails with MK_EINVAL (document unchanged) on a bad range. */
int mk_pydoc_edit(mk_pydoc *d, size_t start, size_t old_end, const char *text, size_t len,
                  mk_errmsg *err);
/* Replaces the whole text (full-sync clients); re-parses from scratch. */
int mk_pydoc_set_text(mk_pydoc *d, const char *text, size_t len, mk_errmsg *err);
/* Current text (NUL-terminated; owned by the document, valid until the next edit). */
const char *mk_pydoc_text(const mk_pydoc *d, size_t *len);
const mk_text_index *mk_pydoc_index(const mk_pydoc *d);
/* Root of the current syntax tree (valid until the next edit). */
TSNode mk_pydoc_root(const mk_pydoc *d);

/* ---- outline ---------------------------------------------------------------- */

typedef struct mk_srange {
  size_t start, end;     /* byte offsets, end exclusive */
  int line, col;         /* 1-based line, 0-based UTF-8 byte column */
  int end_line, end_col; /* of the end position */
} mk_srange;

typedef enum mk_diag_severity { /* LSP's numbering */
  MK_DIAG_ERROR = 1,
  MK_DIAG_WARNING = 2,
  MK_DIAG_INFO = 3,
} mk_diag_severity;

typedef struct mk_diag {
  mk_diag_severity severity;
  mk_srange range;
  const char *code; /* static: "syntax", "missing-class", "missing-forward", ... */
  char *message;    /* owned */
} mk_diag;

typedef struct mk_pyfunc {
  bool found;
  char *name;
  mk_srange range;      /* whole definition (decorators included) */
  mk_srange name_range;
  mk_srange body;       /* the block */
  char **params;        /* parameter names as written ("self", "*args", "**kw") */
  int nparams;
} mk_pyfunc;

typedef struct mk_pystmt {
  mk_srange range;
  int depth;        /* 0: directly in forward's body */
  bool compound;    /* if/for/while/with/try/match header (its body follows) */
  const char *kind; /* tree-sitter node type ("expression_statement", "for_statement")
                       or "docstring"; static */
} mk_pystmt;

typedef struct mk_pyclass {
  char *name;
  mk_srange range, name_range;
  char *bases;    /* text between the parentheses, "" if none */
  bool is_module; /* a base mentions Module, or is a module class of this file */
  mk_pyfunc init, forward;
  mk_pystmt *stmts; /* forward's statements in source order, nested ones included */
  int nstmts;
} mk_pyclass;

typedef struct mk_pyoutline {
  mk_pyclass *classes; /* top-level classes in source order */
  int nclasses;
  int target;          /* index of the class asked for, or -1 */
  mk_pyfunc get_inputs, get_init_inputs;
  mk_diag *diags;      /* in source order within each kind: syntax first, then missing pieces */
  int ndiags;
  int nsyntax_errors;  /* all of them, even past the reported limit */
} mk_pyoutline;

#define MK_FRONTEND_MAX_SYNTAX_DIAGS 100

/* Outlines a parsed document. class_name: the class to check for (NULL:
 * "Model"). Missing class / forward / get_inputs are error diagnostics, a
 * missing get_init_inputs a warning. Fails only on MK_ENOMEM. */
int mk_frontend_outline(const mk_pydoc *d, const char *class_name, mk_pyoutline *out, mk_errmsg *err);
/* Parses text and outlines it in one go. */
int mk_frontend_outline_text(const char *text, size_t len, const char *class_name, mk_pyoutline *out,
                             mk_errmsg *err);
void mk_pyoutline_free(mk_pyoutline *o);

/* The module class named `name`, or NULL. */
const mk_pyclass *mk_pyoutline_class(const mk_pyoutline *o, const char *name);
/* True when the outline has at least one error diagnostic. */
bool mk_pyoutline_has_errors(const mk_pyoutline *o);

/* ---- static check of a module file ---------------------------------------- */

/* Largest module file accepted. */
#define MK_FRONTEND_MAX_MODULE ((size_t)4 * 1024 * 1024)

/* What a module argument must be, said when it is a folder. */
#define MK_FRONTEND_DIRECTORY_HINT                                                                 \
  "is a directory; expected a Python file in KernelBench format (class Model, get_inputs(), "   \
  "get_init_inputs()); for every problem in a folder: mkevolve bench DIR"

/* What the static check learns from a module's text, for the language
 * server's diagnostics as much as for the CLI's first error. Positions are
 * tree-sitter's: 0-based lines, 0-based UTF-8 byte columns. */
typedef struct mk_frontend_span {
  int line, col, end_line, end_col;
} mk_frontend_span;

typedef struct mk_frontend_syntax {
  mk_frontend_span at;
  char missing[32]; /* the token tree-sitter inserted ("`)`"), "" for unexpected text */
} mk_frontend_syntax;

typedef struct mk_frontend_def {
  bool found;
  mk_frontend_span at;   /* the whole definition (decorators excluded) */
  mk_frontend_span name; /* its name */
} mk_frontend_def;

/* Syntax errors kept in a shape; the check stops looking after these. */
#define MK_FRONTEND_STATIC_MAX_SYNTAX 20

typedef struct mk_frontend_shape {
  bool imports_torch;        /* an import statement mentions torch */
  mk_frontend_def cls;       /* the class asked for, at top level */
  mk_frontend_def model_new; /* a top-level `class ModelNew` (a composed file) */
  mk_frontend_def forward;   /* cls's forward method */
  mk_frontend_def get_inputs, get_init_inputs; /* top-level functions */
  char classes[256];         /* the other top-level classes, ", "-joined (truncated) */
  mk_frontend_syntax syntax[MK_FRONTEND_STATIC_MAX_SYNTAX]; /* in source order */
  int nsyntax;
} mk_frontend_shape;

/* The static check of a module's text[0..len): syntax errors (iteratively:
 * nesting depth is the user's) and the KernelBench pieces. class_name:
 * NULL is "Model". Fills *out (caller-owned, nothing to free). Returns 0 or
 * MK_ERANGE (larger than MK_FRONTEND_MAX_TEXT) / MK_ENOMEM. */
int mk_frontend_static_check_text(const char *text, size_t len, const char *class_name,
                                  mk_frontend_shape *out);

typedef struct mk_frontend_static {
  int line, col;     /* 1-based; 0 when the problem has no position */
  char kind[32];     /* "syntax_error", "missing", "io_error", "too_large", "not_a_file" */
  char message[1024];
} mk_frontend_static;

/* Reads `path` (bounded) and checks it without running Python, through
 * mk_frontend_static_check_text: a file, not a folder; syntax; class
 * `class_name` at top level; and, with need_inputs, a top-level
 * `get_inputs` function. *out says the first problem. Returns 0 or
 * MK_EINVAL/MK_EPARSE/MK_ENOENT/MK_EIO/MK_ERANGE with *out filled. */
int mk_frontend_static_check(const char *path, const char *class_name, bool need_inputs,
                             mk_frontend_static *out);

#endif
