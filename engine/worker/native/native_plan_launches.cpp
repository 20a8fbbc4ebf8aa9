// native_plan_launches.cpp — the `plan_launches` method: a candidate's launch
// plan (MK_CUDA_PLAN) run on the CPU with every launch recorded instead of
// made (kernel, grid, block, each argument's int or tensor shape, strides and
// dtype). Nothing needs a GPU, so the tests hold the plan to the launches
// the candidate's Python run() makes on the same inputs
// (tests/python/test_native_plan.py).
//
// Params: candidate {source}, graph | graph_file (its values, for the plan's
// torch stages), inputs_file (input.<i>: run's arguments in order; the file
// holds them contiguous), channels_last (indices of inputs to convert to
// channels_last / channels_last_3d first). Result:
// {"launches": [...], "outputs": [{shape, strides, dtype}]}, or with
// "candidate_error" (the launches before it) where the plan refuses the
// inputs, as run() raises ValueError.
#include "native_common.h"
#include "native_methods.h"
#include "native_plan.h"
#include "native_tensors.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <fstream>
#include <memory>
#include <sstream>

namespace mkn {

namespace {

cJSON *ints_of(at::IntArrayRef xs) {
  cJSON *a = cJSON_CreateArray();
  for (int64_t x : xs) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)x));
  return a;
}

} // namespace

cJSON *plan_launches(const cJSON *params) {
  const cJSON *source = field(field(params, "candidate"), "source");
  if (!cJSON_IsString(source)) throw WorkerError("bad_request", "`candidate` must be {source}");
  std::unique_ptr<cJSON, void (*)(cJSON *)> plan(read_plan(source->valuestring), cJSON_Delete);
  const cJSON *graph = field(params, "graph");
  std::unique_ptr<cJSON, void (*)(cJSON *)> owned(nullptr, cJSON_Delete);
  if (!cJSON_IsObject(graph)) {
    std::ifstream in(string_param(params, "graph_file"));
    std::stringstream text;
    text << in.rdbuf();
    owned.reset(cJSON_Parse(text.str().c_str()));
    graph = owned.get();
  }
  const cJSON *values = field(graph, "values");
  if (!cJSON_IsArray(values)) throw WorkerError("bad_request", "`graph` (with values) is required");
  std::vector<at::Tensor> inputs;
  const Named &file = read_tensors(string_param(params, "inputs_file"));
  for (size_t i = 0;; i++) {
    bool found = false;
    for (auto &[name, t] : file)
      if (name == "input." + std::to_string(i)) inputs.push_back(t), found = true;
    if (!found) break;
  }
  const cJSON *cl;
  cJSON_ArrayForEach(cl, field(params, "channels_last")) {
    if (!cJSON_IsNumber(cl) || cl->valueint < 0 || (size_t)cl->valueint >= inputs.size())
      throw WorkerError("bad_request", "`channels_last` must list input indices");
    at::Tensor &t = inputs[(size_t)cl->valueint];
    if (t.dim() == 4) t = t.contiguous(at::MemoryFormat::ChannelsLast);
    else if (t.dim() == 5) t = t.contiguous(at::MemoryFormat::ChannelsLast3d);
  }
  Plan run(plan.get(), "");
  State state;
  cJSON *r = cJSON_CreateObject();
  cJSON *launches = cJSON_AddArrayToObject(r, "launches");
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> outs;
  try {
    outs = run.run(inputs, values, state, launches);
  } catch (const CandidateError &e) { // the candidate refuses these inputs, as run() raises ValueError
    cJSON_AddStringToObject(r, "candidate_error", e.what());
    return r;
  }
  cJSON *o = cJSON_AddArrayToObject(r, "outputs");
  for (const at::Tensor &t : outs) {
    cJSON *d = cJSON_CreateObject();
    cJSON_AddItemToObject(d, "shape", ints_of(t.sizes()));
    cJSON_AddItemToObject(d, "strides", ints_of(t.strides()));
    cJSON_AddStringToObject(d, "dtype", dtype_name(t.scalar_type()));
    cJSON_AddItemToArray(o, d);
  }
  return r;
}

} // namespace mkn
