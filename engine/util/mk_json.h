/* mk_json.h — the few cJSON helpers every module wanted: reading a member
 * with a fallback, and writing a member that may be absent (null). They
 * live here once instead of as a static copy per file.
 *
 * Ownership: getters return borrowed pointers into `o` (valid while `o`
 * is); adders copy their string arguments into `o`. A NULL or non-object
 * `o` reads as empty. */
#ifndef MK_JSON_H
#define MK_JSON_H

#include <cjson/cJSON.h>

/* The string member `key` of `o`, or `dflt` when it is absent or not a string. */
const char *mk_json_str(const cJSON *o, const char *key, const char *dflt);
/* The number member `key` of `o`, or `dflt`. */
double mk_json_num(const cJSON *o, const char *key, double dflt);

/* Adds "key": v, or "key": null when v is NULL. */
void mk_json_add_str(cJSON *o, const char *key, const char *v);
/* Adds a time or ratio that is unknown when negative: "key": v, or "key": null. */
void mk_json_add_ms(cJSON *o, const char *key, double v);

#endif
