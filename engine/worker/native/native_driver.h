// native_driver.h — the CUDA driver API, loaded at run time (dlopen of
// libcuda.so.1, never linked), so the worker builds and answers on
// machines without a GPU (CI): `why` then says what is missing.
#pragma once

#include <string>

namespace mkn {

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
  CUresult (*cuEventCreate)(void **, unsigned) = nullptr;
  CUresult (*cuEventRecord)(void *, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(void *) = nullptr;
  CUresult (*cuEventElapsedTime)(float *, void *, void *) = nullptr;
  CUresult (*cuEventDestroy)(void *) = nullptr;
  std::string why; // why it is unavailable ("" when loaded)
  int devices = 0;
};

// Loads libcuda once (later calls return the same object).
Driver &driver();
// Throws WorkerError(python_error) naming `what` and the driver's message.
void check(CUresult rc, const char *what);
// Makes torch's primary context current on this thread (a CUDA tensor
// first, so torch created it).
void use_primary_context();
// base64 text -> bytes; bad_request when it is not base64.
std::string base64_decode(const char *s);

} // namespace mkn
