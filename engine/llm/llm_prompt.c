/* llm_prompt.c — prompt templates: loading prompts/<agent>.txt (header
 * with a version, "=== system" and "=== user" sections) and rendering
 * {{variables}} and {{#conditional}}...{{/conditional}} sections. Values
 * are inserted verbatim and never re-scanned (code may contain braces). */
#include "mk_llm.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

void mk_llm_prompt_free(mk_llm_prompt *p) {
  free(p->name);
  free(p->system);
  free(p->user);
  memset(p, 0, sizeof *p);
}

/* Strips one trailing newline run so sections do not end in blank lines. */
static char *section_dup(const char *s, size_t n) {
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
  return mk_strndup(s, n);
}

int mk_llm_prompt_parse(const char *name, const char *text, mk_llm_prompt *out, mk_errmsg *err) {
  memset(out, 0, sizeof *out);
  int version = -1;
  const char *sys = NULL, *usr = NULL, *sys_end = NULL, *usr_end = NULL;
  const char *p = text;
  int lineno = 0;
  bool in_header = true;
  while (*p) {
    lineno++;
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    const char *next = eol ? eol + 1 : p + len;
    if (len >= 4 && strncmp(p, "=== ", 4) == 0) {
      in_header = false;
      const char *sec = p + 4;
      size_t slen = len - 4;
      while (slen > 0 && isspace((unsigned char)sec[slen - 1])) slen--;
      if (sys && !sys_end) sys_end = p;
      if (usr && !usr_end) usr_end = p;
      if (slen == 6 && strncmp(sec, "system", 6) == 0 && !sys) sys = next;
      else if (slen == 4 && strncmp(sec, "user", 4) == 0 && !usr) usr = next;
      else
        return mk_errf(err, MK_EINVAL, "prompt %s, line %d: unknown or repeated section \"%.*s\"",
                       name, lineno, (int)slen, sec);
    } else if (in_header) {
      if (len > 0 && p[0] == '#') {
        const char *v = p + 1;
        while (*v == ' ') v++;
        if (strncmp(v, "version:", 8) == 0) version = atoi(v + 8);
      } else if (len > 0 && strspn(p, " \t\r") != len) {
        return mk_errf(err, MK_EINVAL,
                       "prompt %s, line %d: text before the first \"=== system\" / \"=== user\" "
                       "section (header lines start with '#')",
                       name, lineno);
      }
    }
    p = next;
  }
  if (sys && !sys_end) sys_end = p;
  if (usr && !usr_end) usr_end = p;
  if (version < 1)
    return mk_errf(err, MK_EINVAL, "prompt %s: missing \"# version: N\" header line", name);
  if (!usr) return mk_errf(err, MK_EINVAL, "prompt %s: missing \"=== user\" section", name);
  out->name = mk_strdup(name);
  out->version = version;
  out->system = sys ? section_dup(sys, (size_t)(sys_end - sys)) : NULL;
  out->user = section_dup(usr, (size_t)(usr_end - usr));
  if (!out->name || !out->user || (sys && !out->system)) {
    mk_llm_prompt_free(out);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  return 0;
}

int mk_llm_prompt_load(const char *dir, const char *name, mk_llm_prompt *out, mk_errmsg *err) {
  mk_buf path;
  mk_buf_init(&path, 4096);
  mk_buf_printf(&path, "%s/%s.txt", dir, name);
  if (path.err) {
    mk_buf_free(&path);
    return mk_errf(err, MK_ERANGE, "prompt path too long");
  }
  char *text = NULL;
  int rc = mk_read_file(mk_buf_cstr(&path), (size_t)1024 * 1024, &text, NULL);
  if (rc) {
    rc = mk_errf(err, rc == MK_ERANGE ? MK_ERANGE : MK_ENOENT, "cannot read prompt template %s (%s)",
                 mk_buf_cstr(&path), mk_strerror(rc));
    mk_buf_free(&path);
    return rc;
  }
  rc = mk_llm_prompt_parse(mk_buf_cstr(&path), text, out, err);
  free(text);
  mk_buf_free(&path);
  if (!rc) {
    free(out->name);
    out->name = mk_strdup(name);
    if (!out->name) {
      mk_llm_prompt_free(out);
      return mk_errf(err, MK_ENOMEM, "out of memory");
    }
  }
  return rc;
}

static const mk_llm_var *find_var(const mk_llm_var *vars, int n, const char *name, size_t len) {
  for (int i = 0; i < n; i++)
    if (strlen(vars[i].name) == len && strncmp(vars[i].name, name, len) == 0) return &vars[i];
  return NULL;
}

typedef struct tag {
  char kind;          /* 0 plain, '#', '^', '/' */
  const char *name;
  size_t nlen;
  const char *start, *end; /* the whole {{...}} */
} tag;

/* Next tag at or after p (before lim); 0 none, 1 found, <0 malformed. */
static int next_tag(const char *p, const char *lim, tag *t) {
  const char *o = p;
  for (;;) {
    o = strstr(o, "{{");
    if (!o || o >= lim) return 0;
    const char *c = strstr(o + 2, "}}");
    if (!c || c >= lim) return MK_EINVAL;
    const char *n = o + 2;
    while (n < c && *n == ' ') n++;
    char kind = 0;
    if (n < c && (*n == '#' || *n == '^' || *n == '/')) kind = *n++;
    while (n < c && *n == ' ') n++;
    const char *e = n;
    while (e < c && (isalnum((unsigned char)*e) || *e == '_')) e++;
    const char *after = e;
    while (after < c && *after == ' ') after++;
    if (e == n || after != c) { /* not a tag of ours ("{{ x + y }}"): literal text */
      o += 2;
      continue;
    }
    t->kind = kind;
    t->name = n;
    t->nlen = (size_t)(e - n);
    t->start = o;
    t->end = c + 2;
    return 1;
  }
}

/* A section tag alone on its line swallows that line's newline. */
static const char *skip_standalone(const char *line_start_ok, const tag *t, const char *lim) {
  bool at_line_start = t->start == line_start_ok || t->start[-1] == '\n';
  if (at_line_start && t->end < lim && *t->end == '\n') return t->end + 1;
  return t->end;
}

static int render_range(const char *base, const char *p, const char *lim, const mk_llm_var *vars,
                        int nvars, mk_buf *out, mk_errmsg *err, int depth) {
  if (depth > 32) return mk_errf(err, MK_EINVAL, "prompt sections nested too deeply");
  tag t;
  int rc;
  while ((rc = next_tag(p, lim, &t)) == 1) {
    mk_buf_append(out, p, (size_t)(t.start - p));
    const mk_llm_var *v = find_var(vars, nvars, t.name, t.nlen);
    if (!v)
      return mk_errf(err, MK_EINVAL, "prompt uses unknown variable \"%.*s\"", (int)t.nlen, t.name);
    bool nonempty = v->value && v->value[0];
    if (t.kind == 0) {
      if (v->value) mk_buf_puts(out, v->value);
      p = t.end;
      continue;
    }
    if (t.kind == '/')
      return mk_errf(err, MK_EINVAL, "prompt closes section \"%.*s\" that is not open", (int)t.nlen,
                     t.name);
    /* Find the matching close, counting nested sections of the same name. */
    const char *body = skip_standalone(base, &t, lim);
    const char *q = body;
    int level = 1;
    tag u;
    const char *close_start = NULL, *close_end = NULL;
    while (level > 0) {
      int r2 = next_tag(q, lim, &u);
      if (r2 != 1) break;
      if (u.nlen == t.nlen && strncmp(u.name, t.name, t.nlen) == 0) {
        if (u.kind == '#' || u.kind == '^') level++;
        else if (u.kind == '/' && --level == 0) {
          close_start = u.start;
          close_end = skip_standalone(base, &u, lim);
        }
      }
      q = u.end;
    }
    if (!close_start)
      return mk_errf(err, MK_EINVAL, "prompt section \"%.*s\" is never closed", (int)t.nlen, t.name);
    bool keep = t.kind == '#' ? nonempty : !nonempty;
    if (keep) {
      rc = render_range(base, body, close_start, vars, nvars, out, err, depth + 1);
      if (rc) return rc;
    }
    p = close_end;
  }
  if (rc < 0) return mk_errf(err, MK_EINVAL, "prompt has an unterminated \"{{\" tag");
  mk_buf_append(out, p, (size_t)(lim - p));
  return out->err ? mk_errf(err, out->err, "rendered prompt too large") : 0;
}

int mk_llm_render(const char *tmpl, const mk_llm_var *vars, int nvars, mk_buf *out,
                  mk_errmsg *err) {
  if (!tmpl) return 0;
  return render_range(tmpl, tmpl, tmpl + strlen(tmpl), vars, nvars, out, err, 0);
}
