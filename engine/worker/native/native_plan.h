// native_plan.h — a builtin CUDA candidate's launch plan (MK_CUDA_PLAN,
// docs/candidates.md) run without Python: the C++ launcher's helpers as
// steps over named values, torch and view stages through the ATen
// interpreter, kernels launched from the cubin the engine compiled, each
// launch checked against the kernel's signature first.
#pragma once

#include "native_interp.h"

#include <ATen/core/Tensor.h>
#include <cjson/cJSON.h>

#include <string>
#include <vector>

namespace mkn {

// An error of the candidate itself (a shape it refuses, a launch that
// fails): the verdict runtime_error, not an error of the request.
struct CandidateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The MK_CUDA_PLAN of a candidate's source, parsed (the caller frees it);
// `unsupported` when it has none (the Python worker verifies it then).
cJSON *read_plan(const std::string &source);

class Plan {
public:
  // plan: the parsed MK_CUDA_PLAN (borrowed); cubin: the module's image.
  // Checks the plan's shape (bad_request); loads the cubin on first use.
  Plan(const cJSON *plan, std::string cubin);
  ~Plan();
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;
  // run(*inputs): the outputs in the plan's order. `values`, `state`: for
  // the node steps (the graph's values, the model's tensors). With `record`,
  // nothing is launched: each launch is appended to it instead, as JSON
  // (kernel, grid, block, args: {"int": n} or {"ptr": {shape, strides,
  // dtype}}), so the plan can be compared with run()'s launches on a CPU.
  std::vector<at::Tensor> run(const std::vector<at::Tensor> &inputs, const cJSON *values, State &state,
                              cJSON *record = nullptr);
  size_t ninputs() const;

private:
  void *function(const std::string &kernel);
  const cJSON *plan_;
  std::string cubin_;
  void *module_ = nullptr;
  std::vector<std::pair<std::string, void *>> functions_;
};

} // namespace mkn
