// native_launch.cpp — the `launch` method: loads a cubin the engine compiled
// with NVRTC and launches one of its kernels on tensors built from seeds,
// the way a CUDA candidate's run() does through mkworker/cuda_runtime.py;
// returns what the tensors hold (sum, largest magnitude).
#include "native_common.h"
#include "native_driver.h"
#include "native_methods.h"

#include <ATen/ATen.h>

#include <chrono>

namespace mkn {

// One argument of `launch`: a tensor made from a seed (f: float32 randn,
// b: bool from randn > 0), zeros to be written, or an int.
namespace {
struct LaunchArg {
  char kind = 'q';
  at::Tensor t;
  long long q = 0;
  void *ptr = nullptr;
};

} // namespace

static LaunchArg make_arg(char kind, const cJSON *spec, int i) {
  LaunchArg a;
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
  use_primary_context();
  std::vector<LaunchArg> values;
  for (int i = 0; i < (int)sigs.size(); i++) values.push_back(make_arg(sigs[i], cJSON_GetArrayItem(args, i), i));
  std::vector<void *> ptrs;
  for (LaunchArg &a : values) ptrs.push_back(a.kind == 'q' ? (void *)&a.q : (void *)&a.ptr);
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

} // namespace mkn
