/* env_memo.c — worker handshakes remembered across runs (see env_memo.h). */
#include "env_memo.h"

#include "mk_buf.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MEMO_KIND "env_memo"
#define NVIDIA_DIR "/proc/driver/nvidia"

static int memo_key(const char *identity, char hex[65]) {
  mk_cache_key k;
  mk_cache_key_init(&k, MEMO_KIND);
  mk_cache_key_str(&k, "identity", identity);
  return mk_cache_key_final(&k, hex);
}

/* [size, mtime seconds, mtime nanoseconds] of `path`, or NULL when it is gone. */
static cJSON *stamp_of(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return NULL;
  cJSON *a = cJSON_CreateArray();
  cJSON_AddItemToArray(a, cJSON_CreateNumber((double)st.st_size));
  cJSON_AddItemToArray(a, cJSON_CreateNumber((double)st.st_mtim.tv_sec));
  cJSON_AddItemToArray(a, cJSON_CreateNumber((double)st.st_mtim.tv_nsec));
  return a;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The driver's version and every GPU's description, as one text; NULL
 * when the driver cannot be read (then a GPU hello is never trusted). */
static char *driver_text(void) {
  char *version = NULL;
  if (mk_read_file(NVIDIA_DIR "/version", 1 << 16, &version, NULL) != 0) return NULL;
  mk_buf b;
  mk_buf_init(&b, 1 << 20);
  mk_buf_puts(&b, version);
  free(version);
  DIR *d = opendir(NVIDIA_DIR "/gpus");
  char *names[64];
  int n = 0;
  for (struct dirent *e; d && n < 64 && (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.') names[n++] = mk_strdup(e->d_name);
  if (d) closedir(d);
  qsort(names, (size_t)n, sizeof names[0], by_name);
  for (int i = 0; i < n; i++) {
    char path[512], *info = NULL;
    snprintf(path, sizeof path, NVIDIA_DIR "/gpus/%s/information", names[i] ? names[i] : "");
    if (names[i] && mk_read_file(path, 1 << 16, &info, NULL) == 0) {
      mk_buf_printf(&b, "\n[%s]\n%s", names[i], info);
      free(info);
    }
    free(names[i]);
  }
  return mk_buf_steal(&b, NULL);
}

int mk_env_memo_store(mk_cache *c, const char *identity, bool gpu, const cJSON *hello) {
  const cJSON *files = cJSON_GetObjectItemCaseSensitive(hello, "env_files");
  if (c == NULL || identity == NULL || !cJSON_IsArray(files) || cJSON_GetArraySize(files) == 0)
    return MK_EINVAL;
  cJSON *memo = cJSON_CreateObject();
  cJSON_AddItemToObject(memo, "hello", cJSON_Duplicate(hello, 1));
  cJSON *stamps = cJSON_AddArrayToObject(memo, "stamps");
  int rc = 0;
  for (const cJSON *f = files->child; f && !rc; f = f->next) {
    cJSON *st = cJSON_IsString(f) ? stamp_of(f->valuestring) : NULL;
    if (st == NULL) {
      rc = MK_ENOENT; /* a file it names is not there: nothing to check it against later */
      break;
    }
    cJSON *entry = cJSON_CreateArray();
    cJSON_AddItemToArray(entry, cJSON_CreateString(f->valuestring));
    cJSON_AddItemToArray(entry, st);
    cJSON_AddItemToArray(stamps, entry);
  }
  char *driver = gpu ? driver_text() : NULL;
  if (gpu && driver == NULL) rc = MK_ENOENT;
  if (driver) cJSON_AddStringToObject(memo, "driver", driver);
  free(driver);
  char hex[65];
  char *text = rc ? NULL : cJSON_PrintUnformatted(memo);
  if (!rc && (text == NULL || memo_key(identity, hex))) rc = MK_ENOMEM;
  if (!rc) rc = mk_cache_put(c, hex, MEMO_KIND, text, strlen(text), NULL);
  free(text);
  cJSON_Delete(memo);
  return rc;
}

static bool stamps_match(const cJSON *stamps) {
  if (!cJSON_IsArray(stamps)) return false;
  for (const cJSON *e = stamps->child; e; e = e->next) {
    const cJSON *path = cJSON_GetArrayItem(e, 0), *was = cJSON_GetArrayItem(e, 1);
    if (!cJSON_IsString(path) || !cJSON_IsArray(was)) return false;
    cJSON *now = stamp_of(path->valuestring);
    bool same = now != NULL && cJSON_Compare(now, was, true);
    cJSON_Delete(now);
    if (!same) return false;
  }
  return true;
}

cJSON *mk_env_memo_load(mk_cache *c, const char *identity, bool gpu) {
  char hex[65], *text = NULL;
  if (c == NULL || identity == NULL || memo_key(identity, hex)) return NULL;
  if (mk_cache_get(c, hex, &text, NULL, NULL) != 0) return NULL;
  cJSON *memo = cJSON_Parse(text);
  free(text);
  cJSON *hello = NULL;
  bool ok = memo && stamps_match(cJSON_GetObjectItemCaseSensitive(memo, "stamps"));
  if (ok && gpu) {
    const cJSON *was = cJSON_GetObjectItemCaseSensitive(memo, "driver");
    char *now = driver_text();
    ok = now && cJSON_IsString(was) && strcmp(now, was->valuestring) == 0;
    free(now);
  }
  if (ok) hello = cJSON_DetachItemFromObjectCaseSensitive(memo, "hello");
  cJSON_Delete(memo);
  return cJSON_IsObject(hello) ? hello : (cJSON_Delete(hello), NULL);
}
