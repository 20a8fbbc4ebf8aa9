/* llm_reply.c — turning LLM replies into candidates and JSON decisions.
 * Replies are untrusted text: fences may be missing, unclosed (truncated
 * replies), split over several blocks or mixed with prose. Whatever is
 * accepted is complete, syntactically valid Python (checked with the
 * tree-sitter grammar the engine already links) defining run(). */
#include "llm_internal.h"
#include "mk_backend.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <tree_sitter/api.h>

const TSLanguage *tree_sitter_python(void);

/* ---------------------------------------------------- candidate lists -- */

void mk_llm_cand_free_(mk_candidate *c) {
  free(c->name);
  free(c->source);
  free(c->origin);
  free(c->notes);
  memset(c, 0, sizeof *c);
}

int mk_llm_cand_push_(mk_candidate_list *l, mk_candidate *c) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 4;
    mk_candidate *n = realloc(l->items, (size_t)cap * sizeof *n);
    if (!n) return MK_ENOMEM;
    l->items = n;
    l->cap = cap;
  }
  l->items[l->n++] = *c;
  memset(c, 0, sizeof *c);
  return 0;
}

void mk_llm_cand_list_free_(mk_candidate_list *l) {
  for (int i = 0; i < l->n; i++) mk_llm_cand_free_(&l->items[i]);
  free(l->items);
  memset(l, 0, sizeof *l);
}

/* ------------------------------------------------------------- python -- */

static bool first_error(TSNode n, TSPoint *at) {
  if (ts_node_is_missing(n) || strcmp(ts_node_type(n), "ERROR") == 0) {
    *at = ts_node_start_point(n);
    return true;
  }
  if (!ts_node_has_error(n)) return false;
  uint32_t k = ts_node_child_count(n);
  for (uint32_t i = 0; i < k; i++)
    if (first_error(ts_node_child(n, i), at)) return true;
  *at = ts_node_start_point(n);
  return true;
}

bool mk_llm_python_ok(const char *source, mk_errmsg *err) {
  TSParser *p = ts_parser_new();
  if (!p) return mk_errf(err, MK_ENOMEM, "out of memory"), false;
  ts_parser_set_language(p, tree_sitter_python());
  TSTree *t = ts_parser_parse_string(p, NULL, source, (uint32_t)strlen(source));
  bool ok = false;
  if (t) {
    TSNode root = ts_tree_root_node(t);
    TSPoint at;
    if (!first_error(root, &at)) ok = true;
    else mk_errf(err, MK_EPARSE, "Python syntax error at line %u", at.row + 1);
    ts_tree_delete(t);
  } else {
    mk_errf(err, MK_EPARSE, "Python source could not be parsed");
  }
  ts_parser_delete(p);
  return ok;
}

/* A line starting at column 0 with `prefix`. */
static bool has_line(const char *src, const char *prefix) {
  size_t n = strlen(prefix);
  for (const char *p = src; p; p = strchr(p, '\n')) {
    if (*p == '\n') p++;
    if (strncmp(p, prefix, n) == 0) return true;
    if (!*p) break;
  }
  return false;
}

static bool defines_run(const char *src) { return has_line(src, "def run("); }

static bool uses(const char *src, const char *dotted) {
  size_t n = strlen(dotted);
  for (const char *p = strstr(src, dotted); p; p = strstr(p + 1, dotted))
    if (p == src || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.')) return true;
  (void)n;
  return false;
}

/* Prepends the standard imports a reply forgot. */
static int fix_imports(const char *code, mk_buf *out) {
  if (uses(code, "torch.") && !has_line(code, "import torch") && !has_line(code, "from torch"))
    mk_buf_puts(out, "import torch\n");
  if (uses(code, "triton.") && !has_line(code, "import triton\n") && !has_line(code, "import triton\r") &&
      !has_line(code, "from triton"))
    mk_buf_puts(out, "import triton\n");
  if (uses(code, "tl.") && !has_line(code, "import triton.language as tl"))
    mk_buf_puts(out, "import triton.language as tl\n");
  if (uses(code, "math.") && !has_line(code, "import math")) mk_buf_puts(out, "import math\n");
  mk_buf_puts(out, code);
  size_t len = out->len;
  if (len > 0 && out->data[len - 1] != '\n') mk_buf_putc(out, '\n');
  return out->err;
}

/* ------------------------------------------------------------- fences -- */

typedef struct block {
  const char *info; size_t ninfo;
  const char *code; size_t ncode;
  const char *before; size_t nbefore; /* prose since the previous block */
  bool closed;
} block;

#define MAX_BLOCKS 64

/* Splits a reply into fenced blocks (CommonMark-ish: ``` or ~~~, up to 3
 * spaces of indent, closed by a fence of the same char at least as long). */
static int split_blocks(const char *s, block *b, int max) {
  int n = 0;
  const char *prose = s;
  const char *p = s;
  while (*p && n < max) {
    const char *eol = strchr(p, '\n');
    const char *next = eol ? eol + 1 : p + strlen(p);
    const char *q = p;
    int indent = 0;
    while (*q == ' ' && indent < 4) q++, indent++;
    char fc = *q;
    size_t flen = 0;
    if (indent < 4 && (fc == '`' || fc == '~'))
      while (q[flen] == fc) flen++;
    if (flen >= 3) {
      block *k = &b[n++];
      memset(k, 0, sizeof *k);
      k->before = prose;
      k->nbefore = (size_t)(p - prose);
      const char *info = q + flen;
      while (*info == ' ') info++;
      const char *ie = eol ? eol : info + strlen(info);
      while (ie > info && isspace((unsigned char)ie[-1])) ie--;
      k->info = info;
      k->ninfo = (size_t)(ie - info);
      k->code = next;
      const char *r = next;
      while (*r) {
        const char *e2 = strchr(r, '\n');
        const char *n2 = e2 ? e2 + 1 : r + strlen(r);
        const char *t = r;
        int ind = 0;
        while (*t == ' ' && ind < 4) t++, ind++;
        size_t cl = 0;
        while (t[cl] == fc) cl++;
        const char *rest = t + cl;
        while (*rest == ' ' || *rest == '\t' || *rest == '\r') rest++;
        if (ind < 4 && cl >= flen && (*rest == '\n' || *rest == '\0')) {
          k->ncode = (size_t)(r - next);
          k->closed = true;
          p = n2;
          break;
        }
        r = n2;
      }
      if (!k->closed) {
        k->ncode = strlen(next);
        p = next + k->ncode;
      }
      prose = p;
      continue;
    }
    p = next;
  }
  return n;
}

static bool python_info(const block *k) {
  if (k->ninfo == 0) return true;
  static const char *ok[] = {"python", "py", "python3", "triton"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    size_t n = strlen(ok[i]);
    if (k->ninfo >= n && strncasecmp(k->info, ok[i], n) == 0 &&
        (k->ninfo == n || !isalnum((unsigned char)k->info[n])))
      return true;
  }
  return false;
}

/* Finds "key: value" (markdown decoration allowed) in prose; copies value. */
static char *prose_field(const char *s, size_t n, const char *key) {
  size_t klen = strlen(key);
  const char *end = s + n;
  char *found = NULL;
  for (const char *p = s; p < end;) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *le = eol ? eol : end;
    const char *q = p;
    while (q < le && (*q == ' ' || *q == '#' || *q == '*' || *q == '-' || *q == '>' || *q == '_'))
      q++;
    if ((size_t)(le - q) > klen && strncasecmp(q, key, klen) == 0) {
      const char *v = q + klen;
      while (v < le && (*v == '*' || *v == '_')) v++;
      if (v < le && *v == ':') {
        v++;
        while (v < le && (*v == ' ' || *v == '*' || *v == '_' || *v == '`')) v++;
        const char *ve = le;
        while (ve > v && (isspace((unsigned char)ve[-1]) || ve[-1] == '*' || ve[-1] == '_' ||
                          ve[-1] == '`'))
          ve--;
        if (ve > v) {
          free(found);
          found = mk_strndup(v, (size_t)(ve - v) > 200 ? 200 : (size_t)(ve - v));
        }
      }
    }
    p = eol ? eol + 1 : end;
  }
  return found;
}

/* Lowercase [a-z0-9_], at most 48 characters, never empty. */
static char *sanitize_name(const char *raw, const char *fallback, int index) {
  mk_buf b;
  mk_buf_init(&b, 256);
  if (raw) {
    for (const char *p = raw; *p && b.len < 48; p++) {
      char c = (char)tolower((unsigned char)*p);
      if (isalnum((unsigned char)c)) mk_buf_putc(&b, c);
      else if (b.len > 0 && b.data[b.len - 1] != '_') mk_buf_putc(&b, '_');
    }
    while (b.len > 0 && b.data[b.len - 1] == '_') b.len--;
    if (b.data) b.data[b.len] = '\0';
  }
  if (b.len == 0) mk_buf_printf(&b, "%s_%d", fallback, index);
  char *s = mk_buf_steal(&b, NULL);
  mk_buf_free(&b);
  return s;
}

typedef struct parse_ctx {
  mk_kernel_backend lang; /* the language asked for; auto: either */
  const char *default_name, *origin;
  int max;
  mk_candidate_list *out;
  int added;
  mk_buf why; /* reasons for rejected blocks */
} parse_ctx;

static bool name_taken(const mk_candidate_list *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->items[i].name, name) == 0) return true;
  return false;
}

static void reject(parse_ctx *c, const char *fmt, const char *a, const char *b) {
  if (c->why.len) mk_buf_puts(&c->why, "; ");
  mk_buf_printf(&c->why, fmt, a, b);
}

/* Whether a module is in a language the request asked for and, when it is
 * CUDA C++, keeps the candidate contract (mk_backend_check_candidate): a
 * contract broken here would fail later with a poorer reason, or on a CPU
 * worker not at all. Either marker of a CUDA module (MK_BACKEND = "cuda",
 * MK_CUDA_SOURCE) makes it one, so that half a CUDA module is named as such. */
static bool language_ok(mk_kernel_backend lang, const char *src, mk_errmsg *err) {
  bool cuda = has_line(src, "MK_BACKEND = \"cuda\"") || mk_backend_is_cuda_candidate(src);
  if (cuda && lang == MK_KBACKEND_TRITON)
    return mk_errf(err, MK_EPARSE, "it is a CUDA C++ candidate, but Triton was asked for"), false;
  if (!cuda && lang == MK_KBACKEND_CUDA)
    return mk_errf(err, MK_EPARSE, "CUDA C++ was asked for, but it is not a CUDA C++ candidate "
                   "(MK_BACKEND = \"cuda\", MK_CUDA_SOURCE, MK_CUDA_KERNELS)"), false;
  return !cuda || mk_backend_check_candidate(src, err) == 0;
}

/* Validates one assembled module and appends it as a candidate. */
static int offer(parse_ctx *c, const char *code, const char *prose, size_t nprose, bool closed,
                 const char *label) {
  if (c->max > 0 && c->added >= c->max) return 0;
  mk_buf src;
  mk_buf_init(&src, (size_t)4 * 1024 * 1024);
  if (fix_imports(code, &src)) {
    mk_buf_free(&src);
    reject(c, "%s is too large%s", label, "");
    return 0;
  }
  mk_errmsg perr;
  if (!mk_llm_python_ok(mk_buf_cstr(&src), &perr)) {
    reject(c, "%s: %s", label, closed ? perr.text : "the code is cut off (truncated reply)");
    mk_buf_free(&src);
    return 0;
  }
  mk_errmsg lerr;
  if (!language_ok(c->lang, mk_buf_cstr(&src), &lerr)) {
    reject(c, "%s: %s", label, lerr.text);
    mk_buf_free(&src);
    return 0;
  }
  for (int i = 0; i < c->out->n; i++)
    if (strcmp(c->out->items[i].source, mk_buf_cstr(&src)) == 0) {
      reject(c, "%s duplicates an earlier variant%s", label, "");
      mk_buf_free(&src);
      return 0;
    }
  char *raw = prose ? prose_field(prose, nprose, "variant") : NULL;
  if (!raw && prose) raw = prose_field(prose, nprose, "name");
  mk_candidate cand = {0};
  cand.name = sanitize_name(raw, c->default_name, c->out->n + 1);
  free(raw);
  if (cand.name && name_taken(c->out, cand.name)) {
    char *n2 = sanitize_name(NULL, cand.name, c->out->n + 1);
    free(cand.name);
    cand.name = n2;
  }
  cand.notes = prose ? prose_field(prose, nprose, "notes") : NULL;
  cand.origin = mk_strdup(c->origin);
  cand.source = mk_buf_steal(&src, NULL);
  mk_buf_free(&src);
  if (!cand.name || !cand.origin || !cand.source || mk_llm_cand_push_(c->out, &cand)) {
    mk_llm_cand_free_(&cand);
    return MK_ENOMEM;
  }
  c->added++;
  return 0;
}

/* Replies with no fence at all: the code from its first code-looking line. */
static int offer_unfenced(parse_ctx *c, const char *reply) {
  static const char *starts[] = {"import ", "from ", "def ", "@triton", "MK_USES_TORCH", "MK_BACKEND",
                                 "MK_CUDA_SOURCE", "class "};
  for (const char *p = reply; p && *p; p = strchr(p, '\n')) {
    if (*p == '\n') p++;
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++)
      if (strncmp(p, starts[i], strlen(starts[i])) == 0) {
        if (!defines_run(p)) {
          reject(c, "the reply's code defines no top-level run(...)%s%s", "", "");
          return 0;
        }
        return offer(c, p, reply, (size_t)(p - reply), true, "the unfenced code");
      }
  }
  reject(c, "the reply contains no code block%s%s", "", "");
  return 0;
}

int mk_llm_parse_candidates(const char *reply, mk_kernel_backend lang, const char *default_name,
                            const char *origin, int max, mk_candidate_list *out, mk_errmsg *err) {
  parse_ctx c = {.lang = lang, .default_name = default_name ? default_name : "llm", .origin = origin,
                 .max = max, .out = out};
  mk_buf_init(&c.why, 4096);
  block *b = calloc(MAX_BLOCKS, sizeof *b);
  if (!b) return mk_errf(err, MK_ENOMEM, "out of memory");
  int nb = split_blocks(reply ? reply : "", b, MAX_BLOCKS);
  int rc = 0;
  int npy = 0;
  for (int i = 0; i < nb; i++) npy += python_info(&b[i]);
  if (npy == 0) {
    rc = offer_unfenced(&c, reply ? reply : "");
  } else {
    /* Group: helper blocks before a run() block join it; helper blocks after
     * the last run() block join that last group (Python resolves names at
     * call time, so order inside the module does not matter). */
    int group_start = -1, last_run = -1;
    for (int i = 0; i < nb; i++) {
      if (!python_info(&b[i])) continue;
      char *blk = mk_strndup(b[i].code, b[i].ncode);
      if (blk && defines_run(blk)) last_run = i;
      free(blk);
    }
    mk_buf code;
    mk_buf_init(&code, (size_t)4 * 1024 * 1024);
    for (int i = 0; i < nb && !rc; i++) {
      if (!python_info(&b[i])) continue;
      char *blk = mk_strndup(b[i].code, b[i].ncode);
      if (!blk) {
        rc = MK_ENOMEM;
        break;
      }
      if (group_start < 0) group_start = i;
      if (code.len) mk_buf_putc(&code, '\n');
      mk_buf_puts(&code, blk);
      bool run_here = defines_run(blk);
      free(blk);
      bool tail_helpers_follow = (i == last_run);
      if (run_here && tail_helpers_follow) {
        for (int j = i + 1; j < nb; j++) {
          if (!python_info(&b[j])) continue;
          char *h = mk_strndup(b[j].code, b[j].ncode);
          if (h && !defines_run(h)) {
            mk_buf_putc(&code, '\n');
            mk_buf_puts(&code, h);
          }
          free(h);
        }
      }
      if (run_here) {
        char label[64];
        snprintf(label, sizeof label, "code block %d", i + 1);
        bool closed = b[i].closed;
        rc = offer(&c, mk_buf_cstr(&code), b[group_start].before, b[group_start].nbefore, closed,
                   label);
        mk_buf_reset(&code);
        group_start = -1;
        if (tail_helpers_follow) break;
      }
    }
    if (!rc && last_run < 0)
      reject(&c, "no code block defines a top-level run(...)%s%s", "", "");
    mk_buf_free(&code);
  }
  free(b);
  if (rc) {
    mk_buf_free(&c.why);
    return mk_errf(err, rc, "out of memory");
  }
  if (c.added == 0) {
    rc = mk_errf(err, MK_EPARSE, "unusable reply: %s", c.why.len ? mk_buf_cstr(&c.why) : "no code");
    mk_buf_free(&c.why);
    return rc;
  }
  mk_buf_free(&c.why);
  return c.added;
}

/* -------------------------------------------------------------- json -- */

static cJSON *try_object(const char *s, size_t n) {
  cJSON *j = cJSON_ParseWithLength(s, n);
  if (j && !cJSON_IsObject(j)) {
    cJSON_Delete(j);
    j = NULL;
  }
  return j;
}

int mk_llm_parse_json(const char *reply, cJSON **out, mk_errmsg *err) {
  *out = NULL;
  if (!reply) return mk_errf(err, MK_EPARSE, "unusable reply: empty");
  block b[MAX_BLOCKS];
  int nb = split_blocks(reply, b, MAX_BLOCKS);
  /* ```json blocks first, then any block. */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < nb; i++) {
      bool is_json = b[i].ninfo >= 4 && strncasecmp(b[i].info, "json", 4) == 0;
      if (pass == 0 && !is_json) continue;
      if (pass == 1 && is_json) continue;
      cJSON *j = try_object(b[i].code, b[i].ncode);
      if (j) {
        *out = j;
        return 0;
      }
    }
  /* Bare JSON somewhere in prose: try each '{' as a start. */
  int tries = 0;
  for (const char *p = strchr(reply, '{'); p && tries < 256; p = strchr(p + 1, '{'), tries++) {
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(p, &end, 0);
    if (j && cJSON_IsObject(j)) {
      *out = j;
      return 0;
    }
    cJSON_Delete(j);
  }
  return mk_errf(err, MK_EPARSE, "unusable reply: no JSON object found%s",
                 nb > 0 ? " (a block was present but is not valid JSON)" : "");
}
