// native_compare.cpp — compare.py's element comparison in ATen (native_compare.h).
#include "native_compare.h"

#include "native_tensors.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>

namespace mkn {

namespace {

void fail(Comparison &c, const std::string &reason) {
  c.ok = false;
  if (c.reason.empty()) c.reason = reason;
}

std::vector<int64_t> unravel(int64_t flat, at::IntArrayRef shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    int64_t d = shape[i];
    idx[i] = d ? flat % d : 0;
    flat = d ? flat / d : 0;
  }
  return idx;
}

std::string fmt(const char *f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

std::string shape_str(at::IntArrayRef s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); i++) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

std::string dtype_str(at::ScalarType t) {
  try {
    return dtype_name(t);
  } catch (const std::exception &) {
    return c10::toString(t);
  }
}

void compare_exact(const at::Tensor &expected, const at::Tensor &actual, Comparison &c, int output_index,
                   const std::string &label) {
  at::Tensor eq = at::eq(expected, actual).reshape(-1);
  int64_t nfail = (~eq).sum().item<int64_t>();
  if (!nfail) return;
  c.failing += nfail;
  int64_t flat = eq.to(at::kByte).argmin().item<int64_t>();
  double e = expected.reshape(-1)[flat].to(at::kDouble).item<double>();
  double a = actual.reshape(-1)[flat].to(at::kDouble).item<double>();
  c.max_abs = std::max(c.max_abs, std::fabs(a - e));
  if (c.worst_index.empty() && c.worst_output < 0) {
    c.worst_output = output_index;
    c.worst_index = unravel(flat, expected.sizes());
    c.worst_expected = e;
    c.worst_actual = a;
  }
  fail(c, label + ": " + std::to_string(nfail) + " of " + std::to_string(expected.numel()) +
              " elements differ (exact dtype " + dtype_str(expected.scalar_type()) + ")");
}

} // namespace

cJSON *finite_or_str(double x) {
  if (std::isfinite(x)) return cJSON_CreateNumber(x);
  return cJSON_CreateString(std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf"));
}

void compare_tensor(const at::Tensor &expected, const at::Tensor &actual, double atol, double rtol, Comparison &c,
                    int output_index, const std::string &label) {
  if (!actual.defined()) return fail(c, label + " is missing, the reference returns a tensor");
  if (actual.sizes() != expected.sizes())
    return fail(c, label + " has shape " + shape_str(actual.sizes()) + ", the reference " + shape_str(expected.sizes()));
  if (actual.scalar_type() != expected.scalar_type())
    return fail(c, label + " has dtype " + dtype_str(actual.scalar_type()) + ", the reference " +
                       dtype_str(expected.scalar_type()));
  if (actual.device() != expected.device())
    return fail(c, label + " is on " + actual.device().str() + ", the reference on " + expected.device().str());
  int64_t n = expected.numel();
  c.elements += n;
  if (n == 0) return;
  if (expected.scalar_type() == at::kBool || !(expected.is_floating_point() || expected.is_complex()))
    return compare_exact(expected, actual, c, output_index, label);
  at::Tensor e = expected.detach().to(at::kDouble).reshape(-1), a = actual.detach().to(at::kDouble).reshape(-1);
  at::Tensor e_nan = at::isnan(e), a_nan = at::isnan(a), e_fin = at::isfinite(e), a_fin = at::isfinite(a);
  at::Tensor diff = (a - e).abs(), tol = atol + rtol * e.abs();
  at::Tensor same_inf = at::isinf(e) & at::isinf(a) & (at::sign(a) == at::sign(e));
  at::Tensor passed = (e_fin & a_fin & (diff <= tol)) | (e_nan & a_nan) | same_inf;
  at::Tensor bad_nan = a_nan & ~e_nan, bad_inf = at::isinf(a) & ~same_inf;
  int64_t nfail = (~passed).sum().item<int64_t>();
  c.failing += nfail;
  c.nan += bad_nan.sum().item<int64_t>();
  c.inf += bad_inf.sum().item<int64_t>();
  at::Tensor both_fin = e_fin & a_fin;
  if (both_fin.any().item<bool>()) {
    c.max_abs = std::max(c.max_abs, diff.index({both_fin}).max().item<double>());
    at::Tensor big = both_fin & (e.abs() >= std::max(atol, 1e-30));
    if (big.any().item<bool>())
      c.max_rel = std::max(c.max_rel, (diff.index({big}) / e.index({big}).abs()).max().item<double>());
  }
  if ((bad_nan | bad_inf).any().item<bool>()) c.max_abs = std::numeric_limits<double>::infinity();
  if (!nfail) return;
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor excess = at::where(both_fin, diff - tol, at::full_like(diff, inf));
  excess = at::where(passed, at::full_like(diff, -inf), excess);
  int64_t flat = excess.argmax().item<int64_t>();
  double worst = excess[flat].item<double>();
  if (worst > c.worst_excess) {
    c.worst_excess = worst;
    c.worst_output = output_index;
    c.worst_index = unravel(flat, expected.sizes());
    c.worst_expected = e[flat].item<double>();
    c.worst_actual = a[flat].item<double>();
  }
  std::string at_ = "";
  for (size_t i = 0; i < c.worst_index.size(); i++) at_ += (i ? ", " : "") + std::to_string(c.worst_index[i]);
  std::string what = c.nan || c.inf ? std::to_string(c.nan) + " NaN and " + std::to_string(c.inf) +
                                          " Inf values where the reference is finite"
                                    : std::to_string(nfail) + " of " + std::to_string(n) +
                                          " elements differ by more than atol + rtol*|ref| (max abs error " +
                                          fmt("%.3g", c.max_abs) + ")";
  fail(c, label + ": " + what + "; worst at [" + at_ + "]: expected " + fmt("%.6g", c.worst_expected) + ", got " +
              fmt("%.6g", c.worst_actual));
}

Comparison compare_outputs(const std::vector<at::Tensor> &expected, const std::vector<at::Tensor> &actual,
                           double atol, double rtol, const std::vector<std::string> &names) {
  Comparison c;
  if (actual.size() != expected.size()) {
    std::string kind = expected.size() == 1 ? "a tensor" : "a tuple of " + std::to_string(expected.size()) + " tensors";
    fail(c, "returned " + std::to_string(actual.size()) + " value(s); the reference returns " + kind);
    return c;
  }
  for (size_t i = 0; i < expected.size(); i++)
    compare_tensor(expected[i], actual[i], atol, rtol, c, (int)i,
                   i < names.size() ? names[i] : "output " + std::to_string(i));
  return c;
}

cJSON *Comparison::to_json() const {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddBoolToObject(o, "ok", ok);
  cJSON_AddStringToObject(o, "reason", reason.c_str());
  cJSON_AddNumberToObject(o, "elements", (double)elements);
  cJSON_AddNumberToObject(o, "failing_elements", (double)failing);
  cJSON_AddNumberToObject(o, "nan", (double)nan);
  cJSON_AddNumberToObject(o, "inf", (double)inf);
  cJSON_AddItemToObject(o, "max_abs_error", finite_or_str(max_abs));
  cJSON_AddItemToObject(o, "max_rel_error", finite_or_str(max_rel));
  if (worst_output < 0) {
    cJSON_AddNullToObject(o, "worst");
  } else {
    cJSON *w = cJSON_AddObjectToObject(o, "worst");
    cJSON_AddNumberToObject(w, "output", worst_output);
    cJSON *idx = cJSON_AddArrayToObject(w, "index");
    for (int64_t i : worst_index) cJSON_AddItemToArray(idx, cJSON_CreateNumber((double)i));
    cJSON_AddItemToObject(w, "expected", finite_or_str(worst_expected));
    cJSON_AddItemToObject(w, "actual", finite_or_str(worst_actual));
  }
  return o;
}

} // namespace mkn
