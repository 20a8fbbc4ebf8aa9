// native_aten.h — calling ATen operators by name through libtorch's
// dispatcher, the overload chosen by matching the given values against
// each overload's schema.
//
// Why our own matcher and not FunctionSchema::checkAndNormalizeInputs: the
// engine writes each call in the C++ API's shape (export_ops.c's templates
// are at::NAME(...) calls), where keyword-only schema arguments are passed
// by position (at::add(x, y, alpha)) and an int converts to a double; the
// JIT's check refuses both, and it types ScalarType / MemoryFormat as plain
// ints, so it could not tell a dtype from an int. The matcher reads each
// argument's real type instead: positional values fill the schema in order
// (kwarg-only included, as C++ does), named values fill by name, the rest
// take their defaults; out= overloads are never candidates. Of the
// overloads that accept the values, the one with the fewest conversions
// wins, then the one with the fewest defaults filled in (to.dtype over
// to.dtype_layout), then the default overload (clamp's Scalar? form when
// both bounds are None), then registration order.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <utility>
#include <vector>

namespace mkn {

// A decoded argument: its protocol kind and its value. The kind is kept
// beside the IValue because ATen boxes a dtype or a memory format as an int.
struct Arg {
  enum class Tag { None, Bool, Int, Double, Str, Tensor, IntList, DoubleList, TensorList, Dtype, MemoryFormat, Device };
  Tag tag = Tag::None;
  c10::IValue v;
};

using Kwargs = std::vector<std::pair<std::string, Arg>>;

// The result of aten::<name> (the name without "aten::") on the values.
// Throws WorkerError: `unsupported` when no overload accepts them (the
// message lists what was given and the overloads' schemas).
// *schema (when not null) gets the schema of the overload that ran.
c10::IValue call_aten(const std::string &name, const std::vector<Arg> &args, const Kwargs &kwargs,
                      std::string *schema = nullptr);

const char *tag_name(Arg::Tag t);

} // namespace mkn
