/* err.c — error names and message formatting. */
#include "mk_err.h"

#include <stdarg.h>
#include <stdio.h>

const char *mk_strerror(int code) {
  switch (code) {
  case MK_OK: return "ok";
  case MK_ENOMEM: return "out of memory";
  case MK_EINVAL: return "invalid argument";
  case MK_EIO: return "i/o error";
  case MK_ENOENT: return "not found";
  case MK_ERANGE: return "limit exceeded";
  case MK_EPARSE: return "parse error";
  case MK_EUNSUPPORTED: return "unsupported";
  case MK_ETIMEDOUT: return "timed out";
  case MK_ECRASHED: return "crashed";
  case MK_ECANCELED: return "cancelled";
  case MK_EPROTO: return "protocol error";
  case MK_EWORKER: return "worker error";
  case MK_EMISMATCH: return "results differ";
  case MK_EBUDGET: return "budget exhausted";
  case MK_EBUSY: return "busy";
  case MK_ENET: return "network error";
  case MK_EAUTH: return "authentication failed";
  case MK_ESTALE: return "stale";
  default: return "unknown error";
  }
}

int mk_errf(mk_errmsg *msg, int code, const char *fmt, ...) {
  if (msg == NULL) return code;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg->text, sizeof msg->text, fmt, ap);
  va_end(ap);
  if (n < 0) msg->text[0] = '\0';
  return code;
}
