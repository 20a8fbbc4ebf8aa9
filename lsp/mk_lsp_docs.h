/* mk_lsp_docs.h — open documents: full and incremental sync, positions.
 *
 * LSP positions are (line, UTF-16 code unit) pairs — the only encoding
 * Neovim 0.7 and vscode-languageclient offer. Documents are stored as
 * UTF-8; this module converts in both directions. Lines end at "\n",
 * "\r\n" or a lone "\r" (as the spec says). Positions past the end of a
 * line clamp to the line end, lines past the end clamp to the document
 * end, and a position inside a surrogate pair rounds down — a client
 * that is slightly off never corrupts the text. Invalid UTF-8 (overlong,
 * surrogates, truncated sequences) counts one unit per byte, as the U+FFFD
 * an editor shows for each. This is the one place positions become UTF-16:
 * the engine speaks bytes.
 *
 * Ownership: the store owns its documents; pointers from mk_lsp_docs_get
 * stay valid until that document is closed or the store freed. */
#ifndef MK_LSP_DOCS_H
#define MK_LSP_DOCS_H

#include "mk_buf.h"
#include "mk_err.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#define MK_LSP_MAX_DOC ((size_t)32 << 20) /* 32 MiB per document */

typedef struct mk_lsp_doc {
  char *uri;
  char *path;       /* local file path for file:// URIs, else NULL */
  char *language;   /* languageId */
  int version;
  uint64_t generation; /* bumped on every change: stale analyses compare it */
  mk_buf text;      /* UTF-8, NUL-terminated */
} mk_lsp_doc;

typedef struct mk_lsp_docs {
  mk_lsp_doc **items;
  int n, cap;
  uint64_t next_generation;
} mk_lsp_docs;

void mk_lsp_docs_init(mk_lsp_docs *d);
void mk_lsp_docs_free(mk_lsp_docs *d);
/* Opens (or replaces) a document with the given text. */
int mk_lsp_docs_open(mk_lsp_docs *d, const char *uri, const char *language, int version,
                     const char *text, size_t len, mk_lsp_doc **out);
mk_lsp_doc *mk_lsp_docs_get(mk_lsp_docs *d, const char *uri);
/* Closes a document; MK_ENOENT if it was not open. */
int mk_lsp_docs_close(mk_lsp_docs *d, const char *uri);

/* Applies didChange's contentChanges (array of {range?, text}) in order.
 * All or nothing: on error (bad change object, inverted range, size cap)
 * the document keeps its previous text and version. */
int mk_lsp_doc_apply_changes(mk_lsp_doc *doc, const cJSON *changes, int version, mk_errmsg *err);

/* Byte offset of an LSP position (clamped as described above). */
size_t mk_lsp_doc_offset(const mk_lsp_doc *doc, int line, int utf16_col);
/* Byte offset of the start of 0-based line `line` (clamped), and its
 * length without the terminator. */
size_t mk_lsp_doc_line(const mk_lsp_doc *doc, int line, size_t *len_out);
/* UTF-16 column of a UTF-8 byte column within 0-based `line` (clamped). */
int mk_lsp_doc_utf16_col(const mk_lsp_doc *doc, int line, size_t byte_col);
/* Number of lines (a trailing newline starts a new, empty line). */
int mk_lsp_doc_line_count(const mk_lsp_doc *doc);

/* Conversions within one line of UTF-8 text (no terminator inside). */
size_t mk_lsp_utf16_to_byte(const char *line, size_t len, int utf16_col);
int mk_lsp_byte_to_utf16(const char *line, size_t len, size_t byte_col);

/* file:// URI <-> local path (percent-decoding/encoding). Return a new
 * string (caller frees) or NULL for URIs of other schemes. */
char *mk_lsp_uri_to_path(const char *uri);
char *mk_lsp_path_to_uri(const char *path);

#endif
