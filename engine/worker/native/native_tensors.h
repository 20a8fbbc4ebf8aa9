// native_tensors.h — the tensor file (.mkt) the Python worker writes
// (mkworker/export_data.py, docs/export.md "The tensor file"): named,
// C-contiguous tensors, no pickle. The native worker reads a model's state
// and each trial's inputs from it, and writes values it computed.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mkn {

using Named = std::vector<std::pair<std::string, at::Tensor>>;

// The protocol's name of a dtype ("float32"); unsupported for others.
const char *dtype_name(at::ScalarType t);
// The dtype of a protocol name ("float32"), or nullopt: the one table of
// names, shared by the tensor files and the interpreter.
std::optional<at::ScalarType> dtype_named(const std::string &name);

// Every tensor of the file at `path` (on the CPU), in file order; throws
// WorkerError(bad_request) naming the file and what is wrong.
Named read_tensors(const std::string &path);
// Writes named tensors (any device, any layout) to `path`.
void write_tensors(const std::string &path, const Named &tensors);
// The file at `path`, read once per (path, size, mtime) and kept; later
// calls get the same tensors (callers clone what they change).
const Named &cached_tensors(const std::string &path);

} // namespace mkn
