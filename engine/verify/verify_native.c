/* verify_native.c — routing to the native worker and its state (verify_native.h). */
#define _XOPEN_SOURCE 700
#include "verify_native.h"

#include "mk_buf.h"
#include "mk_export.h"
#include "mk_sha256.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int64_t verify_native_state_bytes(const mk_graph *g, int trials) {
  int64_t total = 0;
  for (int v = 0; v < g->nvalues; v++) {
    const mk_value *val = &g->values[v];
    if (val->kind == MK_VALUE_NODE || val->kind == MK_VALUE_CONST) continue;
    int64_t n = mk_dtype_size(val->dtype);
    for (int d = 0; d < val->rank; d++) n *= val->shape[d];
    total += val->kind == MK_VALUE_INPUT ? n * trials : n;
  }
  return total;
}

cJSON *verify_native_route(const verify_native *vn, bool allowed, bool gpu, const mk_graph *g, int trials,
                           const char *source, char *why, size_t why_len) {
  const char *no = NULL;
  if (vn->pool == NULL) no = "no native worker";
  else if (!allowed) no = "the native worker is turned off";
  else if (!gpu) no = "not a GPU job";
  else if (strstr(source, "\nMK_CUDA_PLAN = r\"\"\"\n") == NULL) no = "the candidate has no launch plan";
  else if (verify_native_state_bytes(g, trials) > VERIFY_NATIVE_STATE_MAX) no = "its state would take over 2 GiB on disk";
  if (no) {
    snprintf(why, why_len, "%s", no);
    return NULL;
  }
  cJSON *aten = NULL;
  mk_errmsg err = {{0}};
  if (mk_export_graph_aten(g, &aten, &err)) {
    snprintf(why, why_len, "%s", err.text);
    return NULL;
  }
  return aten;
}

int verify_native_state_dir(verify_native *vn, const cJSON *graph, long long seed, int batch, int trials,
                            char *dir, size_t len) {
  if (vn->root[0] == '\0') {
    const char *tmp = getenv("TMPDIR");
    snprintf(vn->root, sizeof vn->root, "%s/mkevolve-native-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(vn->root) == NULL) {
      vn->root[0] = '\0';
      return MK_EIO;
    }
  }
  /* The draws depend on the module's text, its path (relative imports), the
   * class, the seed, the batch and how many trials: nothing else. */
  const cJSON *sha = cJSON_GetObjectItemCaseSensitive(graph, "source_sha256");
  const cJSON *file = cJSON_GetObjectItemCaseSensitive(graph, "file");
  const cJSON *cls = cJSON_GetObjectItemCaseSensitive(graph, "class");
  mk_buf id;
  mk_buf_init(&id, 8192);
  mk_buf_printf(&id, "%s\n%s\n%s\n%lld\n%d\n%d", cJSON_IsString(sha) ? sha->valuestring : "",
                cJSON_IsString(file) ? file->valuestring : "", cJSON_IsString(cls) ? cls->valuestring : "Model",
                seed, batch, trials);
  char hex[65];
  mk_sha256_hex(id.data, id.len, hex);
  mk_buf_free(&id);
  int n = snprintf(dir, len, "%s/%.24s", vn->root, hex);
  return n > 0 && (size_t)n < len ? 0 : MK_ERANGE;
}

static void file_in(char *out, size_t len, const char *dir, const char *name) { snprintf(out, len, "%s/%s", dir, name); }

bool verify_native_state_ready(const char *dir, int trials) {
  char path[1024], name[64];
  struct stat st;
  file_in(path, sizeof path, dir, "state.mkt");
  if (stat(path, &st) != 0) return false;
  snprintf(name, sizeof name, "inputs_%d.mkt", trials - 1);
  file_in(path, sizeof path, dir, name);
  return stat(path, &st) == 0;
}

void verify_native_add_state(cJSON *params, const char *dir, int trials) {
  char path[1024], name[64];
  file_in(path, sizeof path, dir, "state.mkt");
  cJSON_AddStringToObject(params, "state_file", path);
  cJSON *files = cJSON_AddArrayToObject(params, "inputs_files");
  for (int t = 0; t < trials; t++) {
    snprintf(name, sizeof name, "inputs_%d.mkt", t);
    file_in(path, sizeof path, dir, name);
    cJSON_AddItemToArray(files, cJSON_CreateString(path));
  }
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)st, (void)flag, (void)f;
  remove(path);
  return 0;
}

static void remove_tree(const char *dir) { nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

void verify_native_state_commit(const char *tmp, const char *dir) {
  if (rename(tmp, dir) != 0) remove_tree(tmp); /* another job's state is there already */
}

void verify_native_close(verify_native *vn) {
  if (vn->root[0]) remove_tree(vn->root);
  vn->root[0] = '\0';
}
