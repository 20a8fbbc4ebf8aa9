// native_interp.h — the captured graph run through ATen: each node's ATen
// form (the engine's mk_export_node_aten, export_aten.c) called through the
// dispatcher, values kept by the capture's ids, as mkworker/replay.py runs
// the recorded Python calls. Leaves come from the model's state (by
// state_dict name) and the trial's inputs (input.<i>), both as the Python
// worker wrote them (native_tensors.h); the layout plan converts each
// listed value right after it is made, as replay's `layouts` does.
#pragma once

#include "native_tensors.h"

#include <ATen/core/Tensor.h>
#include <cjson/cJSON.h>

#include <map>
#include <string>
#include <vector>

namespace mkn {

using State = std::map<std::string, at::Tensor>;

class Interpreter {
public:
  // values: the graph's "values" (borrowed, outlives this); state: the
  // model's tensors by name, updated in place by ops that update them
  // (running statistics; borrowed); layouts: {"<vid>": "channels_last" |
  // "contiguous"} or null (borrowed).
  Interpreter(const cJSON *values, State &state, const cJSON *layouts);
  // Binds the trial's inputs (input.<i>) to the graph's input values, each
  // converted to its planned layout.
  void bind_inputs(const Named &inputs);
  // Binds value vid (a subkernel's input) to t.
  void bind(int vid, const at::Tensor &t) { env_[vid] = t; }
  // Runs one node's ATen form; throws WorkerError naming the node.
  void run(const cJSON *form);
  // Value vid: made by a node run, bound, or a leaf of the model's state.
  at::Tensor get(int vid);
  // The schema of every ATen overload run so far, in order ("node N: schema").
  const std::vector<std::string> &schemas() const { return schemas_; }

private:
  c10::IValue eval(const cJSON *call, const cJSON *form);
  c10::IValue eval_index(const cJSON *call, const cJSON *form);
  void bind_out(const cJSON *structure, const c10::IValue &v, const cJSON *form);
  void apply_layout(int vid);

  const cJSON *values_;
  State &state_;
  const cJSON *layouts_;
  std::map<int, at::Tensor> env_;
  std::vector<std::string> schemas_;
};

// Every form of `forms` (a JSON array of node forms) whose node id is in
// `nodes`, in the order of `nodes`; bad_request for a node with no form.
std::vector<const cJSON *> forms_of(const cJSON *forms, const std::vector<int64_t> &nodes);

} // namespace mkn
