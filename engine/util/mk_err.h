/* mk_err.h — error codes shared by every engine and lsp module.
 *
 * Convention (after libuv): functions return 0 on success and a negative
 * MK_E* code on failure. Functions that can fail in ways a user must read
 * also take a caller-owned `mk_errmsg` buffer and fill it with one sentence
 * (plus a source line where one applies). */
#ifndef MK_ERR_H
#define MK_ERR_H

#include <stddef.h>

enum {
  MK_OK = 0,
  MK_ENOMEM = -1,      /* allocation failed */
  MK_EINVAL = -2,      /* bad argument or malformed input */
  MK_EIO = -3,         /* file or pipe I/O failed */
  MK_ENOENT = -4,      /* file, class, function or key not found */
  MK_ERANGE = -5,      /* a bounded buffer or limit would be exceeded */
  MK_EPARSE = -6,      /* syntax error in Python, JSON or a reply */
  MK_EUNSUPPORTED = -7,/* construct the engine does not handle */
  MK_ETIMEDOUT = -8,   /* a worker or request ran past its time limit */
  MK_ECRASHED = -9,    /* a worker process died */
  MK_ECANCELED = -10,  /* the job was cancelled */
  MK_EPROTO = -11,     /* peer broke the protocol */
  MK_EWORKER = -12,    /* the worker reported an error (message says which) */
  MK_EMISMATCH = -13,  /* verification found wrong results */
  MK_EBUDGET = -14,    /* budget exhausted */
  MK_EBUSY = -15,      /* resource busy, try again */
  MK_ENET = -16,       /* network / HTTP failure */
  MK_EAUTH = -17,      /* missing or rejected credentials */
  MK_ESTALE = -18,     /* state computed from an input that has changed since */
};

#define MK_ERRMSG_MAX 1024

/* A caller-owned, fixed-size message buffer. Always NUL-terminated. */
typedef struct mk_errmsg {
  char text[MK_ERRMSG_MAX];
} mk_errmsg;

/* Short, static name of an error code ("invalid argument"). Never NULL. */
const char *mk_strerror(int code);

/* Formats into msg (may be NULL: then nothing is written). Returns `code`
 * so callers can write `return mk_errf(msg, MK_EINVAL, "...")`. */
int mk_errf(mk_errmsg *msg, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
