// native_compare.h — a candidate's outputs against the reference's, element
// by element, exactly as mkworker/compare.py does: |a - e| <= atol + rtol*|e|
// in float64; NaN passes only where the reference is NaN, an infinity only
// where the reference has the same one; NaN / Inf where the reference is
// finite fail and are counted apart; integer and bool dtypes compare
// exactly; the worst element is the largest excess (non-finite first).
#pragma once

#include <ATen/core/Tensor.h>
#include <cjson/cJSON.h>

#include <limits>
#include <string>
#include <vector>

namespace mkn {

struct Comparison {
  bool ok = true;
  std::string reason;
  int64_t elements = 0, failing = 0, nan = 0, inf = 0;
  double max_abs = 0, max_rel = 0;
  int worst_output = -1; // -1: no worst element
  std::vector<int64_t> worst_index;
  double worst_expected = 0, worst_actual = 0;
  double worst_excess = -std::numeric_limits<double>::infinity();
  // compare.py's Comparison.to_json (the caller owns the object).
  cJSON *to_json() const;
};

// Accumulates one tensor's comparison into c (compare.py's compare_tensor).
void compare_tensor(const at::Tensor &expected, const at::Tensor &actual, double atol, double rtol, Comparison &c,
                    int output_index, const std::string &label);
// Every output in order (compare.py's compare_outputs); names label them.
Comparison compare_outputs(const std::vector<at::Tensor> &expected, const std::vector<at::Tensor> &actual,
                           double atol, double rtol, const std::vector<std::string> &names);
// A float as the protocol spells it: a number, or "nan" / "inf" / "-inf".
cJSON *finite_or_str(double x);

} // namespace mkn
