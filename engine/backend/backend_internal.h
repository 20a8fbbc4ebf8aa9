/* backend_internal.h — text helpers the backend's files share when they read a
 * candidate module as text (no Python parser: backend_source.c, backend_contract.c).
 * Pointers returned point into the caller's text. */
#ifndef MK_BACKEND_INTERNAL_H
#define MK_BACKEND_INTERNAL_H

/* The first place in text where a line starts with prefix, or NULL. */
const char *mk_backend_line_starting(const char *text, const char *prefix);

/* The 1-based line number of `at`, a pointer into text. */
int mk_backend_line_of(const char *text, const char *at);

#endif
