// native_job.cpp — a request's graph, forms and state; prefix replay and
// reference (native_job.h).
#include "native_job.h"

#include "native_common.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace mkn {

void load_job(const cJSON *params, Job &job, const char *device_override) {
  job.graph = field(params, "graph");
  if (!cJSON_IsObject(job.graph)) {
    const cJSON *gf = field(params, "graph_file");
    if (!cJSON_IsString(gf)) throw WorkerError("bad_request", "`graph` (object) or `graph_file` (path) is required");
    std::ifstream in(gf->valuestring);
    if (!in) throw WorkerError("bad_request", std::string(gf->valuestring) + ": cannot read the graph file");
    std::stringstream text;
    text << in.rdbuf();
    job.owned = cJSON_Parse(text.str().c_str());
    if (!cJSON_IsObject(job.owned)) throw WorkerError("bad_request", std::string(gf->valuestring) + ": not a JSON graph");
    job.graph = job.owned;
  }
  job.values = field(job.graph, "values");
  if (!cJSON_IsArray(job.values)) throw WorkerError("bad_request", "the graph has no values");
  job.aten = field(params, "aten");
  if (!cJSON_IsArray(job.aten))
    throw WorkerError("bad_request", "`aten` (each node's ATen form, from the engine) is required");
  job.layouts = field(params, "layouts");
  const cJSON *dev = field(params, "device");
  std::string device = device_override ? device_override : cJSON_IsString(dev) ? dev->valuestring : "cpu";
  if (device != "cpu" && device != "cuda") throw WorkerError("bad_request", "`device` is cpu or cuda");
  if (device == "cuda" && !at::hasCUDA()) throw WorkerError("unsupported", "device cuda: this worker has no GPU");
  job.device = at::Device(device == "cuda" ? at::kCUDA : at::kCPU);
  for (auto &[name, t] : cached_tensors(string_param(params, "state_file")))
    job.state[name] = t.to(job.device, /*non_blocking=*/false, /*copy=*/true);
}

Subkernel subkernel_of(const cJSON *p) {
  Subkernel sk;
  sk.nodes = int_list(field(p, "nodes"), "nodes");
  sk.inputs = int_list(field(p, "inputs"), "inputs");
  sk.outputs = int_list(field(p, "outputs"), "outputs");
  if (sk.nodes.empty()) throw WorkerError("bad_request", "`nodes` must name at least one node");
  return sk;
}

Named trial_inputs(const Job &job, const std::string &path) {
  Named out;
  for (auto &[name, t] : cached_tensors(path)) out.emplace_back(name, t.to(job.device, false, true));
  return out;
}

at::Tensor exact_copy(const at::Tensor &t) {
  at::Tensor c = at::empty_strided(t.sizes(), t.strides(), t.options());
  c.copy_(t);
  return c;
}

std::vector<at::Tensor> replay(Job &job, const Named &inputs, const std::vector<int64_t> &vids,
                               std::vector<std::string> *schemas) {
  c10::NoGradGuard no_grad;
  Interpreter in(job.values, job.state, job.layouts);
  in.bind_inputs(inputs);
  const cJSON *form;
  cJSON_ArrayForEach(form, job.aten) in.run(form);
  std::vector<at::Tensor> out;
  for (int64_t v : vids) out.push_back(exact_copy(in.get((int)v)));
  if (schemas) *schemas = in.schemas();
  return out;
}

std::vector<at::Tensor> reference(Job &job, const Subkernel &sk, const std::vector<at::Tensor> &inputs,
                                  std::vector<std::string> *schemas) {
  c10::NoGradGuard no_grad;
  if (inputs.size() != sk.inputs.size()) throw WorkerError("internal", "the subkernel's inputs and their values differ in count");
  Interpreter in(job.values, job.state, job.layouts);
  for (size_t i = 0; i < inputs.size(); i++) in.bind((int)sk.inputs[i], inputs[i]);
  for (const cJSON *form : forms_of(job.aten, sk.nodes)) in.run(form);
  std::vector<at::Tensor> out;
  for (int64_t v : sk.outputs) out.push_back(in.get((int)v));
  if (schemas) *schemas = in.schemas();
  return out;
}

double seconds_since(const std::chrono::steady_clock::time_point &t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace mkn
