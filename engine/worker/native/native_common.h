// native_common.h — what the native worker's files share: the error a
// method answers with and the JSON helpers (cJSON, as the engine).
#pragma once

#include <cjson/cJSON.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mkn {

constexpr int kProtocol = 1;

// An error the worker answers with: the protocol's kind and a message.
struct WorkerError : std::runtime_error {
  std::string kind;
  WorkerError(std::string k, const std::string &msg) : std::runtime_error(msg), kind(std::move(k)) {}
};

inline const cJSON *field(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

// The one key of a tagged protocol value ({"t": 3} -> "t"), or nullptr.
inline const char *tag_of(const cJSON *a) {
  return cJSON_IsObject(a) && a->child && a->child->string ? a->child->string : nullptr;
}

// Non-negative ints of a JSON array with min..max entries (bad_request otherwise).
std::vector<int64_t> ints(const cJSON *a, const char *what, size_t min, size_t max);
// A JSON array of ints (any sign); bad_request naming `what` otherwise.
std::vector<int64_t> int_list(const cJSON *a, const char *what);
// The string at key, or bad_request naming the key.
std::string string_param(const cJSON *params, const char *key);
// A protocol number: plain JSON or {"float": x | "inf" | "-inf" | "nan"}.
bool protocol_number(const cJSON *a, double *d, bool *is_float);

} // namespace mkn
