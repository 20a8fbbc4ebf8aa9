// native_driver.cpp — the CUDA driver API loaded with dlopen (native_driver.h).
#include "native_driver.h"

#include "native_common.h"

#include <ATen/ATen.h>

#include <dlfcn.h>

namespace mkn {

template <typename F> static bool sym(void *lib, const char *name, F &fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

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
            sym(d.lib, "cuGetErrorString", d.cuGetErrorString) && sym(d.lib, "cuEventCreate", d.cuEventCreate) &&
            sym(d.lib, "cuEventRecord", d.cuEventRecord) &&
            sym(d.lib, "cuEventSynchronize", d.cuEventSynchronize) &&
            sym(d.lib, "cuEventElapsedTime", d.cuEventElapsedTime) &&
            sym(d.lib, "cuEventDestroy_v2", d.cuEventDestroy);
  if (!ok) {
    d.why = "libcuda.so.1 lacks a driver API function the worker needs";
  } else if (d.cuInit(0) != 0 || d.cuDeviceGetCount(&d.devices) != 0 || d.devices == 0) {
    d.why = "the CUDA driver sees no device";
  } else if (!at::hasCUDA()) {
    d.why = "this libtorch has no CUDA support";
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

void use_primary_context() {
  Driver &d = driver();
  (void)at::zeros({1}, at::TensorOptions().device(at::kCUDA));
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  check(d.cuDeviceGet(&dev, 0), "cuDeviceGet");
  check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
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

} // namespace mkn
