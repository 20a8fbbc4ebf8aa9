// mkworker_native.cpp — the native runtime worker (issue #18): a C++17 shim
// over libtorch and the CUDA driver API that speaks the workers' protocol
// (docs/protocol.md: JSON lines on stdin/stdout, one response per request,
// matched by id) and starts without a Python interpreter, so the engine's
// pool can supervise it like `python -m mkworker` (mk_worker_config.argv).
//
// Methods: `hello` (protocol 1, libtorch's version, the device), `launch`
// (loads a cubin the engine compiled with NVRTC and launches one of its
// kernels on tensors built from seeds, the way a CUDA candidate's run()
// does through mkworker/cuda_runtime.py; returns what the tensors hold),
// `shutdown`. Anything else is `bad_request` naming the methods it has:
// capture and verification stay with the Python worker for now.
//
// The driver API is loaded with dlopen (libcuda.so.1), never linked, so the
// worker builds and answers on machines without a GPU (CI): `launch` then
// fails with kind `unsupported` and a reason.
#include <ATen/ATen.h>
#include <torch/version.h>

#include <cjson/cJSON.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int kProtocol = 1;

// An error the worker answers with: the protocol's kind and a message.
struct WorkerError : std::runtime_error {
  std::string kind;
  WorkerError(std::string k, const std::string &msg) : std::runtime_error(msg), kind(std::move(k)) {}
};

// ---- the CUDA driver API, loaded at run time --------------------------------

using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;

struct Driver {
  void *lib = nullptr;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int *) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice *, int) = nullptr;
  CUresult (*cuDeviceGetName)(char *, int, CUdevice) = nullptr;
  CUresult (*cuDriverGetVersion)(int *) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule *, const void *) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char **) = nullptr;
  std::string why; // why it is unavailable ("" when loaded)
  int devices = 0;
};

template <typename F> bool sym(void *lib, const char *name, F &fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

// Loads libcuda once; `why` says what is missing when it could not.
Driver &driver() {
  static Driver d;
  static bool tried = false;
  if (tried) return d;
  tried = true;
  d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (d.lib == nullptr) {
    d.why = "no CUDA driver (libcuda.so.1 does not load: no GPU on this machine)";
    return d;
  }
  bool ok = sym(d.lib, "cuInit", d.cuInit) && sym(d.lib, "cuDeviceGetCount", d.cuDeviceGetCount) &&
            sym(d.lib, "cuDeviceGet", d.cuDeviceGet) && sym(d.lib, "cuDeviceGetName", d.cuDeviceGetName) &&
            sym(d.lib, "cuDriverGetVersion", d.cuDriverGetVersion) &&
            sym(d.lib, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain) &&
            sym(d.lib, "cuCtxSetCurrent", d.cuCtxSetCurrent) &&
            sym(d.lib, "cuCtxSynchronize", d.cuCtxSynchronize) &&
            sym(d.lib, "cuModuleLoadData", d.cuModuleLoadData) &&
            sym(d.lib, "cuModuleUnload", d.cuModuleUnload) &&
            sym(d.lib, "cuModuleGetFunction", d.cuModuleGetFunction) &&
            sym(d.lib, "cuLaunchKernel", d.cuLaunchKernel) &&
            sym(d.lib, "cuGetErrorString", d.cuGetErrorString);
  if (!ok) {
    d.why = "libcuda.so.1 lacks a driver API function the worker needs";
  } else if (d.cuInit(0) != 0 || d.cuDeviceGetCount(&d.devices) != 0 || d.devices == 0) {
    d.why = "the CUDA driver sees no device";
  }
  return d;
}

void check(CUresult rc, const char *what) {
  if (rc == 0) return;
  const char *msg = nullptr;
  driver().cuGetErrorString(rc, &msg);
  throw WorkerError("python_error", std::string(what) + " failed: " + (msg ? msg : "CUDA error") +
                                        " (" + std::to_string(rc) + ")");
}

// ---- JSON helpers -------------------------------------------------------------

const cJSON *field(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

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

std::string base64_decode(const char *s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  int bits = 0, acc = 0;
  for (; *s && *s != '='; s++) {
    int v = val(*s);
    if (v < 0) throw WorkerError("bad_request", "cubin is not base64");
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back((char)((acc >> bits) & 0xff));
    }
  }
  return out;
}

// ---- methods ------------------------------------------------------------------

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
  for (const char *name : {"hello", "launch", "shutdown"}) cJSON_AddItemToArray(m, cJSON_CreateString(name));
  return r;
}

// One argument of `launch`: a tensor made from a seed (f: float32 randn,
// b: bool from randn > 0), zeros to be written, or an int.
struct Arg {
  char kind = 'q';
  at::Tensor t;
  long long q = 0;
  void *ptr = nullptr;
};

Arg make_arg(char kind, const cJSON *spec, int i) {
  Arg a;
  a.kind = kind;
  std::string where = "args[" + std::to_string(i) + "]";
  if (kind == 'q') {
    const cJSON *v = field(spec, "int");
    if (!cJSON_IsNumber(v)) throw WorkerError("bad_request", where + " must be {\"int\": n} (signature q)");
    a.q = (long long)v->valuedouble;
    return a;
  }
  auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  const cJSON *shape = field(spec, "randn") ? field(spec, "randn") : field(spec, "zeros");
  if (shape == nullptr) throw WorkerError("bad_request", where + " must be {\"randn\": shape, \"seed\": s} or {\"zeros\": shape}");
  std::vector<int64_t> dims = ints(shape, where.c_str(), 0, 8);
  if (field(spec, "randn")) {
    const cJSON *seed = field(spec, "seed");
    at::manual_seed(cJSON_IsNumber(seed) ? (uint64_t)seed->valuedouble : 0);
    a.t = at::randn(dims, opts);
    if (kind == 'b') a.t = a.t > 0;
  } else {
    a.t = at::zeros(dims, opts.dtype(kind == 'b' ? at::kBool : at::kFloat));
  }
  a.ptr = a.t.data_ptr();
  return a;
}

cJSON *launch(const cJSON *params) {
  Driver &d = driver();
  if (!d.why.empty()) throw WorkerError("unsupported", "launch needs a GPU: " + d.why);
  const cJSON *cubin = field(params, "cubin"), *sig = field(params, "signature");
  const cJSON *kernel = field(params, "kernel"), *args = field(params, "args");
  if (!cJSON_IsString(cubin) || !cJSON_IsString(sig) || !cJSON_IsString(kernel) || !cJSON_IsArray(args))
    throw WorkerError("bad_request", "launch takes cubin (base64), kernel, signature and args");
  std::string sigs = sig->valuestring;
  if (sigs.find_first_not_of("fbq") != std::string::npos)
    throw WorkerError("bad_request", "signature holds f, b and q only");
  if ((size_t)cJSON_GetArraySize(args) != sigs.size())
    throw WorkerError("bad_request", "the kernel takes " + std::to_string(sigs.size()) + " arguments, " +
                                         std::to_string(cJSON_GetArraySize(args)) + " given");
  std::vector<int64_t> grid = ints(field(params, "grid"), "grid", 1, 3);
  std::vector<int64_t> block = ints(field(params, "block"), "block", 1, 3);
  grid.resize(3, 1);
  block.resize(3, 1);
  std::string image = base64_decode(cubin->valuestring);
  // torch's primary context is the driver's: make it current on this thread.
  (void)at::zeros({1}, at::TensorOptions().device(at::kCUDA));
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  check(d.cuDeviceGet(&dev, 0), "cuDeviceGet");
  check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  std::vector<Arg> values;
  for (int i = 0; i < (int)sigs.size(); i++) values.push_back(make_arg(sigs[i], cJSON_GetArrayItem(args, i), i));
  std::vector<void *> ptrs;
  for (Arg &a : values) ptrs.push_back(a.kind == 'q' ? (void *)&a.q : (void *)&a.ptr);
  CUmodule mod = nullptr;
  check(d.cuModuleLoadData(&mod, image.data()), "cuModuleLoadData");
  CUfunction fn = nullptr;
  CUresult rc = d.cuModuleGetFunction(&fn, mod, kernel->valuestring);
  if (rc != 0) {
    d.cuModuleUnload(mod);
    check(rc, (std::string("cuModuleGetFunction(") + kernel->valuestring + ")").c_str());
  }
  auto t0 = std::chrono::steady_clock::now();
  rc = d.cuLaunchKernel(fn, (unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2], (unsigned)block[0],
                        (unsigned)block[1], (unsigned)block[2], 0, nullptr, ptrs.data(), nullptr);
  if (rc == 0) rc = d.cuCtxSynchronize();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  d.cuModuleUnload(mod);
  check(rc, "cuLaunchKernel");
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "wall_ms", ms);
  cJSON *out = cJSON_AddArrayToObject(r, "tensors");
  for (size_t i = 0; i < values.size(); i++) {
    if (values[i].kind == 'q') continue;
    at::Tensor f = values[i].t.to(at::kDouble);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", (double)i);
    cJSON_AddNumberToObject(o, "sum", f.sum().item<double>());
    cJSON_AddNumberToObject(o, "abs_max", f.numel() ? f.abs().max().item<double>() : 0.0);
    cJSON_AddItemToArray(out, o);
  }
  return r;
}

// ---- the loop -------------------------------------------------------------------

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
    else if (name == "shutdown") result = cJSON_CreateObject(), more = false;
    else
      throw WorkerError("bad_request", "unknown method '" + name + "' (known: hello, launch, shutdown: "
                                       "the native worker; capture and verification are the Python worker's)");
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

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!handle(line)) break;
  }
  return 0;
}
