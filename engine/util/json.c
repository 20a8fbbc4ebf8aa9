/* json.c — cJSON member helpers (mk_json.h). */
#include "mk_json.h"

static const cJSON *member(const cJSON *o, const char *key) {
  return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

const char *mk_json_str(const cJSON *o, const char *key, const char *dflt) {
  const cJSON *v = member(o, key);
  return cJSON_IsString(v) ? v->valuestring : dflt;
}

double mk_json_num(const cJSON *o, const char *key, double dflt) {
  const cJSON *v = member(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

void mk_json_add_str(cJSON *o, const char *key, const char *v) {
  if (v) cJSON_AddStringToObject(o, key, v);
  else cJSON_AddNullToObject(o, key);
}

void mk_json_add_ms(cJSON *o, const char *key, double v) {
  if (v >= 0) cJSON_AddNumberToObject(o, key, v);
  else cJSON_AddNullToObject(o, key);
}
