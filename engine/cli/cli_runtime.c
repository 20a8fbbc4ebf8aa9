/* cli_runtime.c — paths, option values and error display for the CLI
 * (see cli_runtime.h). */
#include "cli_runtime.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>

int mk_cli_abspath(const char *path, char *out, size_t outsize) {
  char buf[PATH_MAX];
  if (realpath(path, buf)) return mk_strlcpy(out, buf, outsize);
  /* Missing files still get a readable absolute path for messages. */
  if (path[0] == '/') return mk_strlcpy(out, path, outsize);
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return mk_strlcpy(out, path, outsize);
  int n = snprintf(out, outsize, "%s/%s", cwd, path);
  return n < 0 || (size_t)n >= outsize ? MK_ERANGE : 0;
}

int mk_cli_parse_int(const char *s, int lo, int hi, int *out) {
  if (!s || !*s) return MK_EINVAL;
  errno = 0;
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return MK_EINVAL;
  *out = (int)v;
  return 0;
}

int mk_cli_parse_double(const char *s, double lo, double hi, double *out) {
  if (!s || !*s) return MK_EINVAL;
  errno = 0;
  char *end = NULL;
  double v = strtod(s, &end);
  if (errno || *end || !isfinite(v) || v < lo || v > hi) return MK_EINVAL;
  *out = v;
  return 0;
}

/* ---- showing errors ------------------------------------------------------- */

void mk_cli_print_source_line(FILE *out, const char *path, int line) {
  if (line <= 0) return;
  char *src = NULL;
  size_t len = 0;
  if (mk_read_file(path, MK_FRONTEND_MAX_MODULE, &src, &len) != 0) return;
  const char *p = src;
  for (int i = 1; i < line && p; i++) {
    p = memchr(p, '\n', len - (size_t)(p - src));
    if (p) p++;
  }
  if (p && p < src + len) {
    const char *e = memchr(p, '\n', len - (size_t)(p - src));
    int n = (int)(e ? e - p : (src + len) - p);
    if (n > 200) n = 200;
    fprintf(out, "%5d | %.*s\n", line, n, p);
  }
  free(src);
}

/* The quoted file name of a traceback's `  File "...", line N` line, or
 * NULL when the line is not a frame header. */
static const char *frame_file(const char *line, size_t n, size_t *flen) {
  const char *p = line;
  while (p < line + n && *p == ' ') p++;
  if ((size_t)(line + n - p) < 7 || memcmp(p, "File \"", 6) != 0) return NULL;
  p += 6;
  const char *q = memchr(p, '"', (size_t)(line + n - p));
  if (q == NULL) return NULL;
  *flen = (size_t)(q - p);
  return p;
}

int mk_cli_user_traceback(const char *tb, const char *user_file, mk_buf *out) {
  if (tb == NULL || user_file == NULL) return 0;
  size_t ulen = strlen(user_file);
  int frames = 0;
  bool keep = false;       /* inside one of the user's frames */
  const char *last = NULL; /* the last line that is not indented: the exception */
  size_t lastn = 0;
  for (const char *p = tb; *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    size_t flen = 0;
    const char *f = frame_file(p, n, &flen);
    if (f) {
      keep = flen == ulen && memcmp(f, user_file, ulen) == 0;
      frames += keep;
    } else if (n > 0 && p[0] != ' ') {
      keep = false;
      /* "Traceback (most recent call last):" and chained-exception text are not the error */
      if (strncmp(p, "Traceback ", 10) != 0 && strncmp(p, "During handling", 15) != 0 &&
          strncmp(p, "The above exception", 19) != 0) {
        last = p;
        lastn = n;
      }
    }
    /* Caret lines (^^^^) point into the line above; the source line says enough. */
    bool carets = n > 0 && strspn(p, " ^~") == n;
    if (keep && !carets) mk_buf_printf(out, "%.*s\n", (int)n, p);
    p = nl ? nl + 1 : p + n;
  }
  if (frames > 0 && last) mk_buf_printf(out, "%.*s\n", (int)lastn, last);
  return frames;
}

void mk_cli_print_traceback(FILE *out, const char *tb, const char *user_file) {
  if (tb == NULL || tb[0] == '\0') return;
  mk_buf mine;
  mk_buf_init(&mine, 64 * 1024);
  if (mk_cli_user_traceback(tb, user_file, &mine) > 0 && !mine.err) {
    fputs("  traceback (your code; --json has every frame):\n", out);
    tb = mk_buf_cstr(&mine);
  } else {
    fputs("  traceback (last lines):\n", out);
    /* No frame in the user's file: the innermost 12 lines are the useful part. */
    const char *end = tb + strlen(tb);
    int lines = 0;
    const char *start = end;
    while (end > tb && end[-1] == '\n') end--;
    for (start = end; start > tb; start--)
      if (start[-1] == '\n' && ++lines == 12) break;
    tb = start;
  }
  for (const char *p = tb; *p;) {
    const char *nl = strchr(p, '\n');
    int n = (int)(nl ? nl - p : (ptrdiff_t)strlen(p));
    if (n > 0 || nl) fprintf(out, "    %.*s\n", n, p);
    p = nl ? nl + 1 : p + n;
  }
  mk_buf_free(&mine);
}
