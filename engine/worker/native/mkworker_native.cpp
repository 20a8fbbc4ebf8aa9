// mkworker_native.cpp — the native runtime worker (issue #18): a C++17 shim
// over libtorch and the CUDA driver API that speaks the workers' protocol
// (docs/protocol.md: JSON lines on stdin/stdout, one response per request,
// matched by id) and starts without a Python interpreter, so the engine's
// pool can supervise it like `python -m mkworker` (mk_worker_config.argv).
// docs/native-worker.md describes it whole.
//
// Methods: `hello` (protocol 1, libtorch's version, the device, the
// methods), `launch` (native_launch.cpp), `run_reference`
// (native_reference.cpp: the captured graph through the ATen interpreter),
// `verify_subkernel` (native_verify.cpp: a builtin CUDA candidate's launch
// plan against the interpreted reference, on a GPU), `plan_launches`
// (native_plan_launches.cpp: a plan's launches recorded on the CPU),
// `shutdown`. Anything else is `bad_request` naming the methods it has:
// capture stays with the Python worker.
//
// This file is the loop: read a line, answer it, one response per request;
// a method's WorkerError is its error kind, libtorch's exceptions are
// `internal` (or `oom`). A crash ends the process: the engine's supervisor
// fails that one job and restarts the worker.
#include "native_common.h"
#include "native_driver.h"
#include "native_methods.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

namespace mkn {
namespace {

const char *const kMethods[] = {"hello", "launch", "run_reference", "verify_subkernel", "plan_launches", "shutdown"};

cJSON *hello(const cJSON *) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "protocol", kProtocol);
  cJSON_AddStringToObject(r, "torch", TORCH_VERSION);
  cJSON_AddStringToObject(r, "triton", "");
  cJSON_AddStringToObject(r, "python", "");
  cJSON_AddBoolToObject(r, "native", true);
  Driver &d = driver();
  if (d.why.empty()) {
    char name[256] = {0};
    CUdevice dev = 0;
    int version = 0;
    d.cuDeviceGet(&dev, 0);
    d.cuDeviceGetName(name, sizeof name, dev);
    d.cuDriverGetVersion(&version);
    cJSON_AddStringToObject(r, "device", name);
    std::string cuda = std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
    cJSON_AddStringToObject(r, "cuda", cuda.c_str());
  } else {
    cJSON_AddStringToObject(r, "device", "cpu");
    cJSON_AddNullToObject(r, "cuda");
    cJSON_AddStringToObject(r, "cuda_unavailable", d.why.c_str());
  }
  cJSON *m = cJSON_AddArrayToObject(r, "methods");
  for (const char *name : kMethods) cJSON_AddItemToArray(m, cJSON_CreateString(name));
  return r;
}

void send(cJSON *msg) {
  char *line = cJSON_PrintUnformatted(msg);
  if (line) {
    std::fputs(line, stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  cJSON_free(line);
  cJSON_Delete(msg);
}

cJSON *envelope(const cJSON *id) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddNumberToObject(m, "v", kProtocol);
  if (cJSON_IsNumber(id)) cJSON_AddNumberToObject(m, "id", id->valuedouble);
  else cJSON_AddNullToObject(m, "id");
  return m;
}

void send_error(const cJSON *id, const std::string &kind, const std::string &message) {
  cJSON *m = envelope(id);
  cJSON_AddBoolToObject(m, "ok", false);
  cJSON *e = cJSON_AddObjectToObject(m, "error");
  cJSON_AddStringToObject(e, "kind", kind.c_str());
  cJSON_AddStringToObject(e, "message", message.c_str());
  send(m);
}

// Answers one line; false after `shutdown`.
bool handle(const std::string &line) {
  cJSON *req = cJSON_Parse(line.c_str());
  if (!cJSON_IsObject(req)) {
    cJSON_Delete(req);
    send_error(nullptr, "bad_request", "the request is not a JSON object");
    return true;
  }
  const cJSON *id = field(req, "id"), *method = field(req, "method"), *params = field(req, "params");
  bool more = true;
  try {
    if (!cJSON_IsNumber(id) || !cJSON_IsString(method))
      throw WorkerError("bad_request", "a request needs a numeric id and a method");
    std::string name = method->valuestring;
    cJSON *result = nullptr;
    if (name == "hello") result = hello(params);
    else if (name == "launch") result = launch(params);
    else if (name == "run_reference") result = run_reference(params);
    else if (name == "verify_subkernel") result = verify_subkernel(params);
    else if (name == "plan_launches") result = plan_launches(params);
    else if (name == "shutdown") result = cJSON_CreateObject(), more = false;
    else
      throw WorkerError("bad_request", "unknown method '" + name + "' (known: hello, launch, run_reference, "
                                       "verify_subkernel, plan_launches, shutdown: the native worker; capture "
                                       "is the Python worker's)");
    cJSON *m = envelope(id);
    cJSON_AddBoolToObject(m, "ok", true);
    cJSON_AddItemToObject(m, "result", result);
    send(m);
  } catch (const WorkerError &e) {
    send_error(id, e.kind, e.what());
  } catch (const std::exception &e) { // libtorch's errors (c10::Error), out of memory
    bool oom = std::strstr(e.what(), "out of memory") != nullptr;
    send_error(id, oom ? "oom" : "internal", e.what());
  }
  cJSON_Delete(req);
  return more;
}

} // namespace
} // namespace mkn

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!mkn::handle(line)) break;
  }
  return 0;
}
