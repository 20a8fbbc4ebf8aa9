// native_job.h — what run_reference and verify_subkernel share: the
// request's graph, ATen forms and model state, the prefix replay that makes
// a subkernel's inputs and the reference run of its nodes.
#pragma once

#include "native_interp.h"

#include <ATen/core/Tensor.h>
#include <cjson/cJSON.h>

#include <chrono>
#include <string>
#include <vector>

namespace mkn {

struct Subkernel {
  std::vector<int64_t> nodes, inputs, outputs;
};

struct Job {
  cJSON *owned = nullptr;          // graph_file's parsed text
  const cJSON *graph = nullptr;    // borrowed from the request or `owned`
  const cJSON *values = nullptr;   // graph["values"]
  const cJSON *aten = nullptr;     // the engine's node forms (mk_export_graph_aten)
  const cJSON *layouts = nullptr;  // the layout plan, or null
  at::Device device{at::kCPU};
  State state;                     // the model's tensors, this job's own copies
  Job() = default;
  Job(const Job &) = delete;
  Job &operator=(const Job &) = delete;
  ~Job() { cJSON_Delete(owned); }
};

// Reads graph / graph_file, aten, layouts, device and state_file (bad_request
// naming what is missing); the state is copied onto the job's device.
// `device` (when not null) replaces the params' device.
void load_job(const cJSON *params, Job &job, const char *device = nullptr);
// The subkernel's nodes / inputs / outputs of the params (verify_subkernel's keys).
Subkernel subkernel_of(const cJSON *sk);
// A trial's inputs file (input.<i>) on the job's device.
Named trial_inputs(const Job &job, const std::string &path);
// Replays the whole graph on the trial's inputs (updating the job's state as
// the forward does) and returns copies of the values `vids`, each with its
// sizes and strides (replay.py's exact-layout copies).
// *schemas (when not null) gets the overloads run (Interpreter::schemas).
std::vector<at::Tensor> replay(Job &job, const Named &inputs, const std::vector<int64_t> &vids,
                               std::vector<std::string> *schemas = nullptr);
// The subkernel's nodes through the interpreter on `inputs` (its reference).
std::vector<at::Tensor> reference(Job &job, const Subkernel &sk, const std::vector<at::Tensor> &inputs,
                                  std::vector<std::string> *schemas = nullptr);
// A copy of t with the same sizes and strides.
at::Tensor exact_copy(const at::Tensor &t);
// Seconds since `t0` (std::chrono::steady_clock).
double seconds_since(const std::chrono::steady_clock::time_point &t0);

} // namespace mkn
