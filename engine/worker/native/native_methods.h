// native_methods.h — the native worker's protocol methods, one file each;
// each takes the request's params and returns the result object (the
// caller's), or throws WorkerError (the protocol's error kinds).
#pragma once

#include <cjson/cJSON.h>

namespace mkn {

// native_launch.cpp: one cubin kernel on tensors made from seeds.
cJSON *launch(const cJSON *params);
// native_reference.cpp: the captured graph through the ATen interpreter
// (the prefix and a subkernel's reference), compared with expected values.
cJSON *run_reference(const cJSON *params);
// native_verify.cpp: a builtin CUDA candidate's launch plan against the
// interpreted reference (docs/verify.md's params and result).
cJSON *verify_subkernel(const cJSON *params);
// native_plan_launches.cpp: a launch plan run on the CPU, its launches
// recorded instead of made (what the tests compare with run()'s).
cJSON *plan_launches(const cJSON *params);

} // namespace mkn
