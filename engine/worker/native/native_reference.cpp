// native_reference.cpp — the `run_reference` method: one trial of the
// captured graph through the ATen interpreter, with no candidate. It is
// the interpreter half of verify_subkernel (prefix replay, then the
// subkernel's nodes as its reference), usable on any device, so the tests
// compare it with the Python worker's replay of the same graph and seeds
// on a CPU (tests/c/test_native_worker.c).
//
// Params: graph | graph_file, aten, state_file, inputs_files (trials 0..t,
// replayed in order on one state as verify_subkernel's trials leave the
// model's buffers; the last one is reported), layouts, device; then either
// `values` (ids to report from the whole replay) or `subkernel` {nodes,
// inputs, outputs} (its reference's outputs, on copies of its inputs from
// the replay); optionally `expected_file` (tensors named
// v<id>, e.g. the Python worker's) with `atol` / `rtol` (default 1e-4), and
// `out_file` to write the values computed (v<id>); `explain` adds the
// schema of every ATen overload the last trial ran (`schemas`).
#include "native_common.h"
#include "native_compare.h"
#include "native_job.h"
#include "native_methods.h"
#include "native_tensors.h"

#include <ATen/ATen.h>

namespace mkn {

namespace {

double number_param(const cJSON *params, const char *key, double dflt) {
  const cJSON *v = field(params, key);
  if (v == nullptr) return dflt;
  if (!cJSON_IsNumber(v) || v->valuedouble < 0) throw WorkerError("bad_request", std::string("`") + key + "` must be a non-negative number");
  return v->valuedouble;
}

cJSON *describe(int64_t vid, const at::Tensor &t) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "id", (double)vid);
  cJSON *shape = cJSON_AddArrayToObject(o, "shape");
  for (int64_t s : t.sizes()) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)s));
  cJSON *strides = cJSON_AddArrayToObject(o, "strides");
  for (int64_t s : t.strides()) cJSON_AddItemToArray(strides, cJSON_CreateNumber((double)s));
  cJSON_AddStringToObject(o, "dtype", dtype_name(t.scalar_type()));
  cJSON_AddItemToObject(o, "sum", finite_or_str(t.numel() ? t.to(at::kDouble).sum().item<double>() : 0.0));
  return o;
}

} // namespace

cJSON *run_reference(const cJSON *params) {
  auto t0 = std::chrono::steady_clock::now();
  Job job;
  load_job(params, job);
  const cJSON *files = field(params, "inputs_files"), *f;
  if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) == 0)
    throw WorkerError("bad_request", "`inputs_files` must list each trial's inputs file, in order");
  std::vector<std::string> trials;
  cJSON_ArrayForEach(f, files) {
    if (!cJSON_IsString(f)) throw WorkerError("bad_request", "`inputs_files` must hold paths");
    trials.push_back(f->valuestring);
  }
  for (size_t t = 0; t + 1 < trials.size(); t++) replay(job, trial_inputs(job, trials[t]), {});
  Named inputs = trial_inputs(job, trials.back());
  const cJSON *skp = field(params, "subkernel");
  std::vector<int64_t> ids;
  std::vector<at::Tensor> got;
  std::vector<std::string> schemas, sk_schemas;
  double prefix_s = 0, reference_s = 0;
  if (cJSON_IsObject(skp)) {
    Subkernel sk = subkernel_of(skp);
    std::vector<at::Tensor> xs = replay(job, inputs, sk.inputs, &schemas);
    prefix_s = seconds_since(t0);
    auto t1 = std::chrono::steady_clock::now();
    got = reference(job, sk, xs, &sk_schemas);
    reference_s = seconds_since(t1);
    ids = sk.outputs;
  } else {
    ids = int_list(field(params, "values"), "values");
    got = replay(job, inputs, ids, &schemas);
    prefix_s = seconds_since(t0);
  }
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "device", job.device.str().c_str());
  cJSON *outs = cJSON_AddArrayToObject(r, "outputs");
  Named named;
  for (size_t i = 0; i < ids.size(); i++) {
    cJSON_AddItemToArray(outs, describe(ids[i], got[i]));
    named.emplace_back("v" + std::to_string(ids[i]), got[i]);
  }
  const cJSON *out_file = field(params, "out_file");
  if (cJSON_IsString(out_file)) write_tensors(out_file->valuestring, named);
  const cJSON *exp_file = field(params, "expected_file");
  if (cJSON_IsString(exp_file)) {
    const Named &expected = cached_tensors(exp_file->valuestring);
    std::vector<at::Tensor> want;
    std::vector<std::string> names;
    for (int64_t v : ids) {
      std::string name = "v" + std::to_string(v);
      at::Tensor found;
      for (auto &[n, t] : expected)
        if (n == name) found = t;
      if (!found.defined()) throw WorkerError("bad_request", std::string(exp_file->valuestring) + " has no " + name);
      want.push_back(found.to(job.device));
      names.push_back("value " + std::to_string(v));
    }
    Comparison c = compare_outputs(want, got, number_param(params, "atol", 1e-4), number_param(params, "rtol", 1e-4), names);
    cJSON_AddStringToObject(r, "status", c.ok ? "ok" : "mismatch");
    cJSON_AddItemToObject(r, "comparison", c.to_json());
  }
  if (cJSON_IsTrue(field(params, "explain"))) {
    cJSON *a = cJSON_AddArrayToObject(r, "schemas");
    for (auto *list : {&schemas, &sk_schemas})
      for (const std::string &s : *list) cJSON_AddItemToArray(a, cJSON_CreateString(s.c_str()));
  }
  cJSON_AddNumberToObject(r, "prefix_s", prefix_s);
  cJSON_AddNumberToObject(r, "reference_s", reference_s);
  return r;
}

} // namespace mkn
