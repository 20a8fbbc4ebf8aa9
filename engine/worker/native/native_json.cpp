// native_json.cpp — JSON helpers of the native worker (native_common.h).
#include "native_common.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace mkn {

std::vector<int64_t> ints(const cJSON *a, const char *what, size_t min, size_t max) {
  std::vector<int64_t> out;
  const cJSON *it;
  if (!cJSON_IsArray(a)) throw WorkerError("bad_request", std::string(what) + " must be an array of ints");
  cJSON_ArrayForEach(it, a) {
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble != (double)(int64_t)it->valuedouble)
      throw WorkerError("bad_request", std::string(what) + " must hold non-negative ints");
    out.push_back((int64_t)it->valuedouble);
  }
  if (out.size() < min || out.size() > max)
    throw WorkerError("bad_request", std::string(what) + " has " + std::to_string(out.size()) +
                                         " entries (" + std::to_string(min) + " to " +
                                         std::to_string(max) + ")");
  return out;
}

std::vector<int64_t> int_list(const cJSON *a, const char *what) {
  std::vector<int64_t> out;
  const cJSON *it;
  if (!cJSON_IsArray(a)) throw WorkerError("bad_request", std::string(what) + " must be an array of ints");
  cJSON_ArrayForEach(it, a) {
    if (!cJSON_IsNumber(it) || it->valuedouble != (double)(int64_t)it->valuedouble)
      throw WorkerError("bad_request", std::string(what) + " must hold ints");
    out.push_back((int64_t)it->valuedouble);
  }
  return out;
}

std::string string_param(const cJSON *params, const char *key) {
  const cJSON *v = field(params, key);
  if (!cJSON_IsString(v)) throw WorkerError("bad_request", std::string("`") + key + "` must be a string");
  return v->valuestring;
}

bool protocol_number(const cJSON *a, double *d, bool *is_float) {
  if (cJSON_IsNumber(a)) {
    *d = a->valuedouble;
    *is_float = a->valuedouble != std::floor(a->valuedouble);
    return true;
  }
  const char *t = tag_of(a);
  if (t == nullptr || std::strcmp(t, "float") != 0) return false;
  const cJSON *v = a->child;
  *is_float = true;
  if (cJSON_IsNumber(v)) *d = v->valuedouble;
  else if (cJSON_IsString(v) && std::strcmp(v->valuestring, "inf") == 0) *d = std::numeric_limits<double>::infinity();
  else if (cJSON_IsString(v) && std::strcmp(v->valuestring, "-inf") == 0) *d = -std::numeric_limits<double>::infinity();
  else if (cJSON_IsString(v) && std::strcmp(v->valuestring, "nan") == 0) *d = std::numeric_limits<double>::quiet_NaN();
  else return false;
  return true;
}

} // namespace mkn
