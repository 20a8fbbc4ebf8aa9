// native_timing.cpp — CUDA-event timing, interleaved (native_timing.h).
#include "native_timing.h"

#include "native_common.h"
#include "native_driver.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

namespace mkn {

namespace {

void sync() { check(driver().cuCtxSynchronize(), "cuCtxSynchronize"); }

// One call's device time in ms, between events on the default stream.
double timed_call(const std::function<void()> &fn, at::Tensor &flush) {
  Driver &d = driver();
  flush.zero_();
  sync();
  void *start = nullptr, *end = nullptr;
  check(d.cuEventCreate(&start, 0), "cuEventCreate");
  check(d.cuEventCreate(&end, 0), "cuEventCreate");
  check(d.cuEventRecord(start, nullptr), "cuEventRecord");
  fn();
  check(d.cuEventRecord(end, nullptr), "cuEventRecord");
  check(d.cuEventSynchronize(end), "cuEventSynchronize");
  float ms = 0;
  check(d.cuEventElapsedTime(&ms, start, end), "cuEventElapsedTime");
  d.cuEventDestroy(start);
  d.cuEventDestroy(end);
  return ms;
}

cJSON *stats(std::vector<double> t, int warmup) {
  std::sort(t.begin(), t.end());
  auto q = [&](double f) { return t[(size_t)std::min<double>(t.size() - 1, f * (t.size() - 1) + 0.5)]; };
  double mean = 0;
  for (double x : t) mean += x;
  mean /= (double)t.size();
  double median = q(0.5);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "median_ms", median);
  cJSON_AddNumberToObject(o, "min_ms", t.front());
  cJSON_AddNumberToObject(o, "max_ms", t.back());
  cJSON_AddNumberToObject(o, "mean_ms", mean);
  cJSON_AddNumberToObject(o, "spread", median > 0 ? (q(0.75) - q(0.25)) / median : 0);
  cJSON_AddNumberToObject(o, "trials", (double)t.size());
  cJSON_AddNumberToObject(o, "warmup_calls", warmup);
  cJSON_AddNumberToObject(o, "interleaved_with", 1);
  return o;
}

int warm(const std::function<void()> &fn) {
  auto t0 = std::chrono::steady_clock::now();
  int calls = 0;
  while (calls < 3 || std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 0.05) {
    fn();
    sync();
    calls++;
  }
  return calls;
}

} // namespace

cJSON *time_interleaved(const std::function<void()> &reference, const std::function<void()> &candidate,
                        const std::string &device) {
  at::Tensor flush = at::empty({64 << 20}, at::TensorOptions().device(at::kCUDA).dtype(at::kByte));
  int wr = warm(reference), wc = warm(candidate);
  std::vector<double> tr, tc;
  double first = timed_call(reference, flush) + timed_call(candidate, flush);
  int rounds = (int)std::clamp(300.0 / std::max(first / 2, 1e-3), 10.0, 100.0);
  for (int r = 0; r < rounds; r++) {
    if (r % 2 == 0) tr.push_back(timed_call(reference, flush)), tc.push_back(timed_call(candidate, flush));
    else tc.push_back(timed_call(candidate, flush)), tr.push_back(timed_call(reference, flush));
  }
  cJSON *t = cJSON_CreateObject();
  cJSON_AddBoolToObject(t, "available", true);
  cJSON_AddStringToObject(t, "device", device.c_str());
  cJSON_AddStringToObject(t, "protocol", "native worker: cuda-events (driver API), 64 MiB written before each call, "
                                         "device synchronised, eager reference and candidate interleaved");
  cJSON *eager = stats(tr, wr), *cand = stats(tc, wc);
  double re = cJSON_GetObjectItem(eager, "median_ms")->valuedouble, ce = cJSON_GetObjectItem(cand, "median_ms")->valuedouble;
  cJSON_AddItemToObject(t, "reference_eager", eager);
  cJSON *comp = cJSON_AddObjectToObject(t, "reference_compile");
  cJSON_AddBoolToObject(comp, "available", false);
  cJSON_AddStringToObject(comp, "reason", "the native worker has no torch.compile (no Python)");
  cJSON_AddItemToObject(t, "candidate", cand);
  cJSON_AddNumberToObject(t, "median_ms", ce);
  cJSON_AddNumberToObject(t, "min_ms", cJSON_GetObjectItem(cand, "min_ms")->valuedouble);
  cJSON_AddNumberToObject(t, "spread", cJSON_GetObjectItem(cand, "spread")->valuedouble);
  cJSON_AddNumberToObject(t, "speedup_vs_eager", ce > 0 ? re / ce : 0);
  cJSON_AddNullToObject(t, "speedup_vs_compile");
  return t;
}

} // namespace mkn
