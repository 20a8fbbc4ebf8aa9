/* mk_cache.h — content-addressed result cache in SQLite.
 *
 * Keys are SHA-256 digests over named fields (a builder: the order in
 * which fields are added does not matter, names must be unique, a NULL
 * value differs from ""), values are JSON text. One table holds every
 * kind of entry (verification results, captures, ...); `kind` is part of
 * the key and stored for inspection.
 *
 * Several processes (editor daemon, CLI runs) share one file: WAL journal
 * and a busy timeout, so readers never block and writers wait briefly.
 * Calls block for at most the busy timeout (default 5 s); values are small.
 *
 * Ownership: mk_cache_open gives a handle the caller closes; mk_cache_get
 * returns a malloc'd string the caller frees. Not thread-safe: one handle
 * per thread. */
#ifndef MK_CACHE_H
#define MK_CACHE_H

#include "mk_err.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#define MK_CACHE_SCHEMA 1
#define MK_CACHE_MAX_FIELDS 48
#define MK_CACHE_NAME_MAX 48

typedef struct mk_cache mk_cache;

struct mk_buf;
/* Appends the default cache path: $MKEVOLVE_CACHE_DIR/cache.sqlite, else
 * $XDG_CACHE_HOME/mkevolve/cache.sqlite, else ~/.cache/mkevolve/cache.sqlite. */
int mk_cache_default_path(struct mk_buf *out);

/* Opens (creating the file and its directories) the cache at `path`, or
 * the default when NULL. busy_timeout_ms <= 0 means 5000. */
int mk_cache_open(const char *path, int busy_timeout_ms, mk_cache **out, mk_errmsg *err);
void mk_cache_close(mk_cache *c);
/* The file this handle uses. */
const char *mk_cache_path(const mk_cache *c);

/* ---- key builder ---- */
typedef struct mk_cache_key {
  char kind[MK_CACHE_NAME_MAX];
  struct {
    char name[MK_CACHE_NAME_MAX];
    uint8_t tag;        /* 's' string/bytes, 'n' NULL */
    uint8_t digest[32]; /* sha256 of the value */
  } fields[MK_CACHE_MAX_FIELDS];
  int nfields;
  int err; /* first error; reported by mk_cache_key_final */
} mk_cache_key;

/* Starts a key of `kind` ("verify_subkernel", "capture", ...). */
void mk_cache_key_init(mk_cache_key *k, const char *kind);
/* Adds a field; all return the builder's error state (0 while fine). */
int mk_cache_key_str(mk_cache_key *k, const char *name, const char *value);
int mk_cache_key_bytes(mk_cache_key *k, const char *name, const void *data, size_t len);
int mk_cache_key_int(mk_cache_key *k, const char *name, int64_t value);
/* Doubles are hashed from their shortest round-trip text ("%.17g"). */
int mk_cache_key_double(mk_cache_key *k, const char *name, double value);
/* JSON is canonicalised first: object members sorted by name, no spaces,
 * so two equal documents with different member order hash the same. */
int mk_cache_key_json(mk_cache_key *k, const char *name, const cJSON *value);
/* Writes the 64-hex-digit key. Fails with MK_EINVAL (duplicate or bad
 * name) or MK_ERANGE (too many fields). */
int mk_cache_key_final(const mk_cache_key *k, char hex[65]);

/* Canonical JSON text of `v` (sorted members), appended to out. */
int mk_cache_canonical_json(const cJSON *v, struct mk_buf *out);

/* The capture key of docs/runtime.md: (source sha256, class, batch, torch,
 * the worker's version). */
int mk_cache_capture_key(const char *source_sha256, const char *class_name, int batch,
                         const char *torch_version, const char *worker_version, char hex[65]);

/* ---- entries ---- */
/* Looks `key` up. 0 and *json_out (caller frees) on a hit, MK_ENOENT on a
 * miss, MK_EIO/MK_EBUSY with a message otherwise. */
int mk_cache_get(mk_cache *c, const char *key, char **json_out, size_t *len_out, mk_errmsg *err);
/* Stores (replacing) `json` under key. */
int mk_cache_put(mk_cache *c, const char *key, const char *kind, const char *json, size_t len,
                 mk_errmsg *err);
int mk_cache_delete(mk_cache *c, const char *key, mk_errmsg *err);
/* Entries of `kind` (NULL: all), or a negative error. */
int64_t mk_cache_count(mk_cache *c, const char *kind);
/* Removes entries of `kind` (NULL: all). */
int mk_cache_clear(mk_cache *c, const char *kind, mk_errmsg *err);

/* ---- caches of several machines (bench --slurm; docs/bench.md) ----
 * A key is the digest of everything its value depends on, so two caches
 * merge by key: an entry already present stays (an equal key means the same
 * computation), a missing one is added. */
/* Writes a self-contained copy of the cache to `path` (which must not
 * exist): one file, no journal beside it, safe to copy anywhere. */
int mk_cache_export(mk_cache *c, const char *path, mk_errmsg *err);
/* Adds every entry of the cache file `path` whose key is missing here;
 * *added (may be NULL) gets how many. The other file is only read, as
 * immutable (no lock): it must not change while it is merged. */
int mk_cache_merge(mk_cache *c, const char *path, int64_t *added, mk_errmsg *err);

#endif
