/* cache.c — SQLite-backed content-addressed cache (see mk_cache.h).
 *
 * Key derivation: sha256("mkcache/1\0" kind "\0" then, for each field in
 * name order, name "\0" tag digest). Each field contributes the digest of
 * its value, so keys over large inputs (a reference subgraph, a candidate
 * source) cost one pass over them and the builder stays fixed-size. */
#include "mk_cache.h"

#include "mk_buf.h"
#include "mk_sha256.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct mk_cache {
  sqlite3 *db;
  char *path;
  sqlite3_stmt *get, *put;
};

/* ---- key builder ---------------------------------------------------------- */

void mk_cache_key_init(mk_cache_key *k, const char *kind) {
  memset(k, 0, sizeof *k);
  if (!kind || !kind[0] || mk_strlcpy(k->kind, kind, sizeof k->kind) != 0) k->err = MK_EINVAL;
}

static int add_field(mk_cache_key *k, const char *name, uint8_t tag, const void *data, size_t len) {
  if (k->err) return k->err;
  if (!name || !name[0] || strlen(name) >= MK_CACHE_NAME_MAX) return k->err = MK_EINVAL;
  if (k->nfields >= MK_CACHE_MAX_FIELDS) return k->err = MK_ERANGE;
  for (int i = 0; i < k->nfields; i++)
    if (strcmp(k->fields[i].name, name) == 0) return k->err = MK_EINVAL;
  int i = k->nfields++;
  mk_strlcpy(k->fields[i].name, name, sizeof k->fields[i].name);
  k->fields[i].tag = tag;
  mk_sha256 s;
  mk_sha256_init(&s);
  if (len) mk_sha256_update(&s, data, len);
  mk_sha256_final(&s, k->fields[i].digest);
  return 0;
}

int mk_cache_key_str(mk_cache_key *k, const char *name, const char *value) {
  if (!value) return add_field(k, name, 'n', NULL, 0);
  return add_field(k, name, 's', value, strlen(value));
}

int mk_cache_key_bytes(mk_cache_key *k, const char *name, const void *data, size_t len) {
  if (!data && len) return k->err ? k->err : (k->err = MK_EINVAL);
  return add_field(k, name, 's', data, len);
}

int mk_cache_key_int(mk_cache_key *k, const char *name, int64_t value) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)value);
  return mk_cache_key_str(k, name, buf);
}

int mk_cache_key_double(mk_cache_key *k, const char *name, double value) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.17g", value);
  return mk_cache_key_str(k, name, buf);
}

static int by_name(const void *a, const void *b) {
  const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
  return strcmp(x->string ? x->string : "", y->string ? y->string : "");
}

static int canon_number(double d, mk_buf *out) {
  if (!isfinite(d)) return mk_buf_puts(out, "null"); /* cJSON prints these as null too */
  if (d == floor(d) && fabs(d) < 9007199254740992.0) return mk_buf_printf(out, "%lld", (long long)d);
  return mk_buf_printf(out, "%.17g", d);
}

int mk_cache_canonical_json(const cJSON *v, mk_buf *out) {
  if (!v) return mk_buf_puts(out, "null");
  if (cJSON_IsNull(v)) return mk_buf_puts(out, "null");
  if (cJSON_IsTrue(v)) return mk_buf_puts(out, "true");
  if (cJSON_IsFalse(v)) return mk_buf_puts(out, "false");
  if (cJSON_IsNumber(v)) return canon_number(v->valuedouble, out);
  if (cJSON_IsString(v)) return mk_buf_json_str(out, v->valuestring);
  if (cJSON_IsRaw(v)) return mk_buf_puts(out, v->valuestring ? v->valuestring : "null");
  if (cJSON_IsArray(v)) {
    mk_buf_putc(out, '[');
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
      if (i) mk_buf_putc(out, ',');
      mk_cache_canonical_json(c, out);
    }
    return mk_buf_putc(out, ']');
  }
  if (cJSON_IsObject(v)) {
    int n = cJSON_GetArraySize(v);
    const cJSON **kids = n ? malloc((size_t)n * sizeof *kids) : NULL;
    if (n && !kids) return out->err = MK_ENOMEM;
    int i = 0;
    for (const cJSON *c = v->child; c && i < n; c = c->next) kids[i++] = c;
    if (i > 1) qsort(kids, (size_t)i, sizeof *kids, by_name);
    mk_buf_putc(out, '{');
    for (int j = 0; j < i; j++) {
      if (j) mk_buf_putc(out, ',');
      mk_buf_json_str(out, kids[j]->string);
      mk_buf_putc(out, ':');
      mk_cache_canonical_json(kids[j], out);
    }
    free(kids);
    return mk_buf_putc(out, '}');
  }
  return out->err = MK_EINVAL;
}

int mk_cache_key_json(mk_cache_key *k, const char *name, const cJSON *value) {
  if (!value) return mk_cache_key_str(k, name, NULL);
  mk_buf b;
  mk_buf_init(&b, 0);
  int rc = mk_cache_canonical_json(value, &b);
  if (rc || b.err) {
    mk_buf_free(&b);
    return k->err ? k->err : (k->err = rc ? rc : MK_EINVAL);
  }
  rc = mk_cache_key_bytes(k, name, mk_buf_cstr(&b), b.len);
  mk_buf_free(&b);
  return rc;
}

static int by_field_name(const void *a, const void *b) {
  return strcmp((const char *)a, (const char *)b); /* name is the first member */
}

int mk_cache_key_final(const mk_cache_key *k, char hex[65]) {
  hex[0] = '\0';
  if (k->err) return k->err;
  int order[MK_CACHE_MAX_FIELDS];
  for (int i = 0; i < k->nfields; i++) order[i] = i;
  /* Insertion sort by name: at most MK_CACHE_MAX_FIELDS fields. */
  for (int i = 1; i < k->nfields; i++) {
    int x = order[i], j = i - 1;
    while (j >= 0 && by_field_name(k->fields[order[j]].name, k->fields[x].name) > 0) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = x;
  }
  mk_sha256 s;
  mk_sha256_init(&s);
  static const char magic[] = "mkcache/1";
  mk_sha256_update(&s, magic, sizeof magic); /* includes the NUL */
  mk_sha256_update(&s, k->kind, strlen(k->kind) + 1);
  for (int i = 0; i < k->nfields; i++) {
    const char *name = k->fields[order[i]].name;
    mk_sha256_update(&s, name, strlen(name) + 1);
    mk_sha256_update(&s, &k->fields[order[i]].tag, 1);
    mk_sha256_update(&s, k->fields[order[i]].digest, 32);
  }
  uint8_t d[32];
  mk_sha256_final(&s, d);
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    hex[2 * i] = digits[d[i] >> 4];
    hex[2 * i + 1] = digits[d[i] & 15];
  }
  hex[64] = '\0';
  return 0;
}

int mk_cache_capture_key(const char *source_sha256, const char *class_name, int batch,
                         const char *torch_version, const char *worker_version, char hex[65]) {
  mk_cache_key k;
  mk_cache_key_init(&k, "capture");
  mk_cache_key_str(&k, "source_sha256", source_sha256);
  mk_cache_key_str(&k, "class", class_name ? class_name : "Model");
  mk_cache_key_int(&k, "batch", batch);
  mk_cache_key_str(&k, "torch", torch_version);
  mk_cache_key_str(&k, "worker", worker_version ? worker_version : "");
  return mk_cache_key_final(&k, hex);
}

/* ---- database ------------------------------------------------------------- */

int mk_cache_default_path(mk_buf *out) {
  const char *dir = getenv("MKEVOLVE_CACHE_DIR");
  if (dir && dir[0]) return mk_buf_printf(out, "%s/cache.sqlite", dir);
  const char *xdg = getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0]) return mk_buf_printf(out, "%s/mkevolve/cache.sqlite", xdg);
  const char *home = getenv("HOME");
  if (!home || !home[0]) return MK_ENOENT;
  return mk_buf_printf(out, "%s/.cache/mkevolve/cache.sqlite", home);
}

/* mkdir -p of the directory part of `path`. */
static int make_parent_dirs(const char *path) {
  char *dup = mk_strdup(path);
  if (!dup) return MK_ENOMEM;
  char *slash = strrchr(dup, '/');
  if (!slash || slash == dup) {
    free(dup);
    return 0;
  }
  *slash = '\0';
  for (char *p = dup + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(dup, 0755) != 0 && errno != EEXIST) {
      free(dup);
      return MK_EIO;
    }
    *p = '/';
  }
  int rc = mkdir(dup, 0755) != 0 && errno != EEXIST ? MK_EIO : 0;
  free(dup);
  return rc;
}

static int db_error(mk_cache *c, mk_errmsg *err, const char *what) {
  int code = sqlite3_errcode(c->db);
  int rc = code == SQLITE_BUSY || code == SQLITE_LOCKED ? MK_EBUSY : MK_EIO;
  return mk_errf(err, rc, "cache %s (%s): %s", what, c->path, sqlite3_errmsg(c->db));
}

static const char *const schema_sql =
    "CREATE TABLE IF NOT EXISTS entries ("
    "  key TEXT PRIMARY KEY,"
    "  kind TEXT NOT NULL,"
    "  value TEXT NOT NULL,"
    "  created REAL NOT NULL"
    ");"
    "CREATE INDEX IF NOT EXISTS entries_kind ON entries(kind);";

int mk_cache_open(const char *path, int busy_timeout_ms, mk_cache **out, mk_errmsg *err) {
  *out = NULL;
  mk_buf p;
  mk_buf_init(&p, 4096);
  if (path) mk_buf_puts(&p, path);
  else if (mk_cache_default_path(&p) != 0) {
    mk_buf_free(&p);
    return mk_errf(err, MK_ENOENT, "no cache location: set MKEVOLVE_CACHE_DIR or HOME");
  }
  if (p.err) {
    mk_buf_free(&p);
    return mk_errf(err, MK_ERANGE, "cache path is too long");
  }
  mk_cache *c = calloc(1, sizeof *c);
  if (!c) {
    mk_buf_free(&p);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  c->path = mk_buf_steal(&p, NULL);
  mk_buf_free(&p);
  if (!c->path) {
    free(c);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  if (strcmp(c->path, ":memory:") != 0 && make_parent_dirs(c->path) != 0) {
    int rc = mk_errf(err, MK_EIO, "cannot create the directory of the cache %s: %s", c->path,
                     strerror(errno));
    mk_cache_close(c);
    return rc;
  }
  int rc = sqlite3_open_v2(c->path, &c->db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                               SQLITE_OPEN_URI /* mk_cache_merge attaches read-only */, NULL);
  if (rc != SQLITE_OK) {
    rc = c->db ? db_error(c, err, "cannot be opened")
               : mk_errf(err, MK_ENOMEM, "cannot open the cache %s", c->path);
    mk_cache_close(c);
    return rc;
  }
  sqlite3_busy_timeout(c->db, busy_timeout_ms > 0 ? busy_timeout_ms : 5000);
  /* WAL lets readers and one writer work at once across processes; where
   * the file system cannot do WAL (network mounts) SQLite keeps its rollback
   * journal, which is still correct, only slower. */
  sqlite3_exec(c->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
  sqlite3_exec(c->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
  int version = -1;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(c->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    version = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  if (version < 0) {
    rc = db_error(c, err, "is not readable (a corrupt file? delete it to start afresh)");
    mk_cache_close(c);
    return rc;
  }
  if (version > MK_CACHE_SCHEMA) {
    rc = mk_errf(err, MK_EUNSUPPORTED,
                 "cache %s was written by a newer mkevolve (schema %d, this one knows %d)",
                 c->path, version, MK_CACHE_SCHEMA);
    mk_cache_close(c);
    return rc;
  }
  if (sqlite3_exec(c->db, schema_sql, NULL, NULL, NULL) != SQLITE_OK ||
      (version == 0 &&
       sqlite3_exec(c->db, "PRAGMA user_version=1", NULL, NULL, NULL) != SQLITE_OK)) {
    rc = db_error(c, err, "cannot be initialised");
    mk_cache_close(c);
    return rc;
  }
  if (sqlite3_prepare_v2(c->db, "SELECT value FROM entries WHERE key = ?1", -1, &c->get, NULL) !=
          SQLITE_OK ||
      sqlite3_prepare_v2(c->db,
                         "INSERT OR REPLACE INTO entries(key, kind, value, created) "
                         "VALUES (?1, ?2, ?3, ?4)",
                         -1, &c->put, NULL) != SQLITE_OK) {
    rc = db_error(c, err, "cannot prepare statements");
    mk_cache_close(c);
    return rc;
  }
  *out = c;
  return 0;
}

void mk_cache_close(mk_cache *c) {
  if (!c) return;
  sqlite3_finalize(c->get);
  sqlite3_finalize(c->put);
  if (c->db) sqlite3_close(c->db);
  free(c->path);
  free(c);
}

const char *mk_cache_path(const mk_cache *c) { return c->path; }

int mk_cache_get(mk_cache *c, const char *key, char **json_out, size_t *len_out, mk_errmsg *err) {
  *json_out = NULL;
  if (len_out) *len_out = 0;
  sqlite3_reset(c->get);
  sqlite3_bind_text(c->get, 1, key, -1, SQLITE_STATIC);
  int rc = sqlite3_step(c->get);
  if (rc == SQLITE_DONE) {
    sqlite3_reset(c->get);
    return MK_ENOENT;
  }
  if (rc != SQLITE_ROW) {
    rc = db_error(c, err, "lookup failed");
    sqlite3_reset(c->get);
    return rc;
  }
  const unsigned char *v = sqlite3_column_text(c->get, 0);
  int n = sqlite3_column_bytes(c->get, 0);
  char *copy = v ? mk_strndup((const char *)v, (size_t)n) : NULL;
  sqlite3_reset(c->get);
  if (!copy) return mk_errf(err, MK_ENOMEM, "out of memory");
  *json_out = copy;
  if (len_out) *len_out = (size_t)n;
  return 0;
}

int mk_cache_put(mk_cache *c, const char *key, const char *kind, const char *json, size_t len,
                 mk_errmsg *err) {
  if (!key || !kind || !json || len > 0x7fffffff) return mk_errf(err, MK_EINVAL, "bad cache entry");
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  sqlite3_reset(c->put);
  sqlite3_bind_text(c->put, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(c->put, 2, kind, -1, SQLITE_STATIC);
  sqlite3_bind_text(c->put, 3, json, (int)len, SQLITE_STATIC);
  sqlite3_bind_double(c->put, 4, (double)ts.tv_sec + ts.tv_nsec / 1e9);
  int rc = sqlite3_step(c->put);
  int out = rc == SQLITE_DONE ? 0 : db_error(c, err, "write failed");
  sqlite3_reset(c->put);
  sqlite3_clear_bindings(c->put);
  return out;
}

static int exec_with_text(mk_cache *c, const char *sql, const char *arg, mk_errmsg *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK)
    return db_error(c, err, "statement failed");
  if (arg) sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  int out = rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : db_error(c, err, "statement failed");
  sqlite3_finalize(st);
  return out;
}

int mk_cache_delete(mk_cache *c, const char *key, mk_errmsg *err) {
  return exec_with_text(c, "DELETE FROM entries WHERE key = ?1", key, err);
}

int mk_cache_clear(mk_cache *c, const char *kind, mk_errmsg *err) {
  return kind ? exec_with_text(c, "DELETE FROM entries WHERE kind = ?1", kind, err)
              : exec_with_text(c, "DELETE FROM entries", NULL, err);
}

int mk_cache_export(mk_cache *c, const char *path, mk_errmsg *err) {
  return exec_with_text(c, "VACUUM INTO ?1", path, err);
}

int mk_cache_merge(mk_cache *c, const char *path, int64_t *added, mk_errmsg *err) {
  if (added) *added = 0;
  mk_buf uri;
  mk_buf_init(&uri, 8192);
  mk_buf_puts(&uri, "file:");
  for (const char *p = path; *p; p++) { /* a URI, so that it opens read-only */
    if (*p == '%' || *p == '?' || *p == '#') mk_buf_printf(&uri, "%%%02X", (unsigned char)*p);
    else mk_buf_putc(&uri, *p);
  }
  /* immutable: no lock is taken, as files on a shared file system need
   * (bench --slurm writes them once, then renames them into place) */
  mk_buf_puts(&uri, "?mode=ro&immutable=1");
  int rc = uri.err ? uri.err : exec_with_text(c, "ATTACH DATABASE ?1 AS other", mk_buf_cstr(&uri), err);
  mk_buf_free(&uri);
  if (rc) return rc;
  int before = sqlite3_total_changes(c->db);
  rc = exec_with_text(c, "INSERT OR IGNORE INTO main.entries(key, kind, value, created) "
                         "SELECT key, kind, value, created FROM other.entries", NULL, err);
  if (!rc && added) *added = sqlite3_total_changes(c->db) - before;
  sqlite3_exec(c->db, "DETACH DATABASE other", NULL, NULL, NULL);
  return rc;
}

int64_t mk_cache_count(mk_cache *c, const char *kind) {
  sqlite3_stmt *st = NULL;
  const char *sql = kind ? "SELECT count(*) FROM entries WHERE kind = ?1"
                         : "SELECT count(*) FROM entries";
  if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) return MK_EIO;
  if (kind) sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
  int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : MK_EIO;
  sqlite3_finalize(st);
  return n;
}
