// native_verify.cpp — `verify_subkernel` without Python: a builtin CUDA
// candidate's launch plan (MK_CUDA_PLAN) against the subkernel's reference,
// both on the trial's inputs from the prefix replay, compared as
// compare.py compares, then timed (docs/verify.md's params and result;
// docs/native-worker.md says what differs from the Python worker).
//
// Params: those of the Python worker's verify_subkernel (graph | graph_file,
// nodes, inputs, outputs, candidate {source, name, origin, cubin}, trials,
// seed, atol, rtol, timing, batch, layouts) plus what the engine adds for
// this worker: `aten` (every node's ATen form), `state_file` and
// `inputs_files` (one per trial, from the Python worker's write_state).
//
// Trials: the whole graph is replayed on trial t's inputs (the model's
// buffers updated as the forward updates them, trial after trial), the
// subkernel's inputs copied with their strides for each side; even trials
// run the candidate first. A candidate that fails to run is `runtime_error`
// (trials stop); one whose outputs or in-place updates differ is `mismatch`
// (the other trials still run); one that writes an input the reference does
// not write is `rejected`. A CUDA error that leaves the context unusable
// ends the process with exit code 70, as the Python worker does, so the
// supervisor reports the job `crashed` and restarts the worker.
#include "native_common.h"
#include "native_compare.h"
#include "native_driver.h"
#include "native_job.h"
#include "native_methods.h"
#include "native_plan.h"
#include "native_timing.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <unistd.h>

#include <cmath>
#include <memory>
#include <cstring>
#include <limits>

namespace mkn {

namespace {

// Errors after which no CUDA call can succeed in this process (cudaErrorIllegalAddress, ...).
bool sticky(int rc) { return rc == 700 || rc == 701 || rc == 702 || rc == 709 || rc == 714 || rc == 715 || rc == 719; }

void sync_or_die() {
  int rc = driver().cuCtxSynchronize();
  if (rc == 0) return;
  const char *msg = nullptr;
  driver().cuGetErrorString(rc, &msg);
  if (sticky(rc)) {
    std::fprintf(stderr, "mkworker-native: the CUDA context is unusable after the candidate ran (%s, %d): exiting\n",
                 msg ? msg : "CUDA error", rc);
    std::fflush(stderr);
    _exit(70);
  }
  throw CandidateError(std::string("the candidate's kernels failed: ") + (msg ? msg : "CUDA error"));
}

// Bit for bit, as the Python worker compares an input with its pristine copy
// (at::equal would call a NaN changed).
bool same_bits(const at::Tensor &a, const at::Tensor &b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  return at::equal(a.contiguous().reshape(-1).view(at::kByte), b.contiguous().reshape(-1).view(at::kByte));
}

std::vector<at::Tensor> copies(const std::vector<at::Tensor> &xs) {
  std::vector<at::Tensor> out;
  for (const at::Tensor &x : xs) out.push_back(exact_copy(x));
  return out;
}

double number(const cJSON *params, const char *key) {
  const cJSON *v = field(params, key);
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || !std::isfinite(v->valuedouble))
    throw WorkerError("bad_request", std::string("`") + key + "` is required: a finite number >= 0");
  return v->valuedouble;
}

std::string label(const Job &job, int64_t vid) {
  const cJSON *v = cJSON_GetArrayItem(job.values, (int)vid);
  const cJSON *name = field(v, "name"), *kind = field(v, "kind");
  std::string s = "v" + std::to_string(vid);
  if (cJSON_IsString(name)) s += " (" + std::string(name->valuestring) + ")";
  else if (cJSON_IsString(kind)) s += " (" + std::string(kind->valuestring) + ")";
  return s;
}

struct Outcome {
  std::string status = "ok", reason;
  int passed = 0;
  Comparison all;
  cJSON *worst = nullptr; // owned until the result takes it
  ~Outcome() { cJSON_Delete(worst); }
  void fail(const std::string &s, const std::string &r) {
    if (status == "ok" || (status == "mismatch" && s != "mismatch")) status = s, reason = r;
  }
};

} // namespace

cJSON *verify_subkernel(const cJSON *params) {
  Driver &d = driver();
  if (!d.why.empty()) throw WorkerError("unsupported", "verify_subkernel of a CUDA candidate needs a GPU: " + d.why);
  const cJSON *cand = field(params, "candidate");
  const cJSON *source = field(cand, "source"), *cubin = field(cand, "cubin");
  if (!cJSON_IsString(source) || !cJSON_IsString(cubin))
    throw WorkerError("bad_request", "`candidate` must be {source, name, origin, cubin (base64)}");
  const cJSON *tr = field(params, "trials");
  if (!cJSON_IsNumber(tr) || tr->valueint < 1 || tr->valueint > 1000)
    throw WorkerError("bad_request", "`trials` must be between 1 and 1000");
  int trials = tr->valueint;
  double atol = number(params, "atol"), rtol = number(params, "rtol");
  const cJSON *seedj = field(params, "seed");
  int64_t seed = cJSON_IsNumber(seedj) ? (int64_t)seedj->valuedouble : 0;
  const cJSON *files = field(params, "inputs_files");
  if (cJSON_GetArraySize(files) != trials)
    throw WorkerError("bad_request", "`inputs_files` must give one file per trial");
  std::unique_ptr<cJSON, void (*)(cJSON *)> plan(read_plan(source->valuestring), cJSON_Delete);
  use_primary_context();
  Job job;
  load_job(params, job, "cuda");
  Subkernel sk = subkernel_of(params);
  Plan run(plan.get(), base64_decode(cubin->valuestring));
  if (run.ninputs() != sk.inputs.size())
    throw WorkerError("bad_request", "the plan's run takes " + std::to_string(run.ninputs()) + " inputs, the subkernel has " +
                                         std::to_string(sk.inputs.size()));
  std::vector<std::string> names;
  for (size_t i = 0; i < sk.outputs.size(); i++) names.push_back("output " + std::to_string(i) + " = " + label(job, sk.outputs[i]));
  Outcome out;
  std::unique_ptr<cJSON, void (*)(cJSON *)> trials_json(cJSON_CreateArray(), cJSON_Delete); // freed on a throw
  cJSON *per_trial = trials_json.get();
  for (int t = 0; t < trials; t++) {
    int64_t s = seed + 1 + t;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<at::Tensor> base = replay(job, trial_inputs(job, cJSON_GetArrayItem(files, t)->valuestring), sk.inputs);
    double inputs_s = seconds_since(t0);
    std::vector<at::Tensor> ref_in = copies(base), cand_in = copies(base), ref_out, cand_out;
    bool cand_first = t % 2 == 0;
    double ref_s = 0, cand_s = 0;
    std::string error;
    auto run_ref = [&] {
      auto a = std::chrono::steady_clock::now();
      ref_out = reference(job, sk, ref_in);
      check(d.cuCtxSynchronize(), "the reference");
      ref_s = seconds_since(a);
    };
    auto run_cand = [&] {
      auto a = std::chrono::steady_clock::now();
      try {
        c10::NoGradGuard no_grad;
        cand_out = run.run(cand_in, job.values, job.state);
        sync_or_die();
      } catch (const CandidateError &e) {
        error = e.what();
      } catch (const c10::Error &e) {
        std::string m = e.what();
        error = m.substr(0, m.find('\n'));
      }
      cand_s = seconds_since(a);
    };
    if (cand_first) run_cand(), run_ref();
    else run_ref(), run_cand();
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddNumberToObject(rec, "trial", t);
    cJSON_AddNumberToObject(rec, "seed", (double)s);
    cJSON_AddStringToObject(rec, "order", cand_first ? "candidate_first" : "reference_first");
    cJSON_AddItemToArray(per_trial, rec);
    if (!error.empty()) {
      out.fail("runtime_error", "trial " + std::to_string(t) + " (seed " + std::to_string(s) + "): " + error);
      cJSON_AddStringToObject(rec, "status", "runtime_error");
      cJSON_AddBoolToObject(rec, "passed", false);
      break;
    }
    Comparison c = compare_outputs(ref_out, cand_out, atol, rtol, names);
    std::string status = c.ok ? "ok" : "mismatch", why = c.reason;
    for (size_t i = 0; i < base.size(); i++) { // in-place discipline
      bool ref_wrote = !same_bits(ref_in[i], base[i]), cand_wrote = !same_bits(cand_in[i], base[i]);
      std::string in = "input " + std::to_string(i) + " = " + label(job, sk.inputs[i]);
      if (cand_wrote && !ref_wrote) {
        status = "rejected", why = in + " was modified by the candidate; the reference does not modify it";
        break;
      }
      if (ref_wrote) {
        Comparison u;
        compare_tensor(ref_in[i], cand_in[i], atol, rtol, u, (int)i, in + " (updated in place)");
        if (!u.ok && status == "ok") status = "mismatch", why = u.reason;
      }
    }
    cJSON_AddStringToObject(rec, "status", status.c_str());
    cJSON_AddBoolToObject(rec, "passed", status == "ok");
    cJSON_AddItemToObject(rec, "max_abs_error", finite_or_str(c.max_abs));
    cJSON_AddNumberToObject(rec, "failing_elements", (double)c.failing);
    cJSON_AddNumberToObject(rec, "inputs_s", inputs_s);
    cJSON_AddNumberToObject(rec, "reference_s", ref_s);
    cJSON_AddNumberToObject(rec, "candidate_s", cand_s);
    out.all.elements += c.elements, out.all.failing += c.failing, out.all.nan += c.nan, out.all.inf += c.inf;
    out.all.max_abs = std::max(out.all.max_abs, c.max_abs), out.all.max_rel = std::max(out.all.max_rel, c.max_rel);
    if (status == "ok") {
      out.passed++;
      continue;
    }
    if (!out.worst && c.worst_output >= 0) {
      cJSON *w = c.to_json();
      out.worst = cJSON_DetachItemFromObject(w, "worst");
      cJSON_Delete(w);
      cJSON_AddNumberToObject(out.worst, "trial", t);
      cJSON_AddNumberToObject(out.worst, "seed", (double)s);
    }
    out.fail(status, "trial " + std::to_string(t) + " (seed " + std::to_string(s) + "): " + why);
    if (status == "rejected") break;
  }
  std::unique_ptr<cJSON, void (*)(cJSON *)> result(cJSON_CreateObject(), cJSON_Delete); // freed on a throw
  cJSON *r = result.get();
  cJSON_AddStringToObject(r, "status", out.status.c_str());
  cJSON_AddStringToObject(r, "reason", out.reason.c_str());
  cJSON_AddNullToObject(r, "line");
  cJSON_AddNullToObject(r, "traceback");
  cJSON_AddNullToObject(r, "error_kind");
  cJSON_AddNumberToObject(r, "trials", trials);
  cJSON_AddNumberToObject(r, "trials_passed", out.passed);
  cJSON_AddItemToObject(r, "max_abs_error", finite_or_str(out.all.max_abs));
  cJSON_AddItemToObject(r, "max_rel_error", finite_or_str(out.all.max_rel));
  if (out.worst) cJSON_AddItemToObject(r, "worst", out.worst), out.worst = nullptr;
  else cJSON_AddNullToObject(r, "worst");
  cJSON_AddNumberToObject(r, "failing_elements", (double)out.all.failing);
  cJSON_AddNumberToObject(r, "elements", (double)out.all.elements);
  cJSON *nf = cJSON_AddObjectToObject(r, "nonfinite");
  cJSON_AddNumberToObject(nf, "nan", (double)out.all.nan);
  cJSON_AddNumberToObject(nf, "inf", (double)out.all.inf);
  cJSON_AddItemToObject(r, "per_trial", trials_json.release());
  cJSON_AddArrayToObject(r, "torch_calls");
  cJSON_AddNullToObject(r, "reference_tf32");
  char name[256] = {0};
  CUdevice dev = 0;
  d.cuDeviceGet(&dev, 0);
  d.cuDeviceGetName(name, sizeof name, dev);
  const cJSON *timing = field(params, "timing");
  if (out.status == "ok" && !cJSON_IsFalse(timing)) {
    std::vector<at::Tensor> xs = replay(job, trial_inputs(job, cJSON_GetArrayItem(files, 0)->valuestring), sk.inputs);
    std::vector<at::Tensor> ref_in = copies(xs), cand_in = copies(xs);
    cJSON_AddItemToObject(r, "timing", time_interleaved([&] { reference(job, sk, ref_in); },
                                                        [&] { run.run(cand_in, job.values, job.state); }, name));
  } else {
    cJSON *tm = cJSON_AddObjectToObject(r, "timing");
    cJSON_AddBoolToObject(tm, "available", false);
    cJSON_AddStringToObject(tm, "reason", out.status == "ok" ? "not timed: timing is off" : ("not timed: " + out.status).c_str());
  }
  cJSON_AddNullToObject(r, "suspicious");
  cJSON_AddStringToObject(r, "device", name);
  cJSON *tol = cJSON_AddObjectToObject(r, "tolerance");
  cJSON_AddNumberToObject(tol, "atol", atol);
  cJSON_AddNumberToObject(tol, "rtol", rtol);
  const cJSON *batch = field(params, "batch");
  cJSON_AddItemToObject(r, "batch", cJSON_IsNumber(batch) ? cJSON_CreateNumber(batch->valuedouble) : cJSON_CreateNull());
  cJSON_AddBoolToObject(r, "native", true);
  return result.release();
}

} // namespace mkn
