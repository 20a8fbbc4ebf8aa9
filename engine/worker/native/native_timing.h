// native_timing.h — timing a subkernel's reference and candidate on the GPU
// with CUDA events (the driver API's), interleaved as mkworker/timing.py
// does: each warmed up (3 calls and 50 ms), then rounds in which each runs
// once, the order rotated every round, until about 300 ms per callable (10
// to 100 rounds); before each call a buffer of 64 MiB (over twice any L2 of
// these GPUs) is written and the device synchronised. No torch.compile here:
// the reference is timed eager only.
#pragma once

#include <cjson/cJSON.h>

#include <functional>
#include <string>
#include <vector>

namespace mkn {

// The `timing` object of docs/verify.md for reference (eager) and candidate.
cJSON *time_interleaved(const std::function<void()> &reference, const std::function<void()> &candidate,
                        const std::string &device);

} // namespace mkn
