// native_aten.cpp — ATen operators by name, overloads matched by schema
// (native_aten.h says why this matcher).
#include "native_aten.h"

#include "native_common.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <limits>
#include <map>
#include <optional>
#include <sstream>

namespace mkn {

const char *tag_name(Arg::Tag t) {
  switch (t) {
  case Arg::Tag::None: return "None";
  case Arg::Tag::Bool: return "bool";
  case Arg::Tag::Int: return "int";
  case Arg::Tag::Double: return "float";
  case Arg::Tag::Str: return "str";
  case Arg::Tag::Tensor: return "Tensor";
  case Arg::Tag::IntList: return "int[]";
  case Arg::Tag::DoubleList: return "float[]";
  case Arg::Tag::TensorList: return "Tensor[]";
  case Arg::Tag::Dtype: return "ScalarType";
  case Arg::Tag::MemoryFormat: return "MemoryFormat";
  case Arg::Tag::Device: return "Device";
  }
  return "?";
}

namespace {

// Every overload of each aten:: name, built once from the dispatcher.
const std::vector<c10::OperatorHandle> &overloads(const std::string &name) {
  static std::map<std::string, std::vector<c10::OperatorHandle>> table;
  static bool built = false;
  if (!built) {
    auto &d = c10::Dispatcher::singleton();
    for (const c10::OperatorName &op : d.getAllOpNames()) {
      if (op.name.rfind("aten::", 0) != 0) continue;
      auto h = d.findOp(op);
      if (h && h->hasSchema()) table[op.name.substr(6)].push_back(*h);
    }
    built = true;
  }
  static const std::vector<c10::OperatorHandle> none;
  auto it = table.find(name);
  return it == table.end() ? none : it->second;
}

// The cost of passing `a` for schema argument `s` (0 as is, 1 converted),
// or -1 when it does not fit; *out gets the IValue to push.
int fit(const Arg &a, const c10::Argument &s, c10::IValue *out) {
  using K = c10::TypeKind;
  using T = Arg::Tag;
  c10::TypePtr t = s.real_type();
  if (t->kind() == K::OptionalType) {
    if (a.tag == T::None) {
      *out = c10::IValue();
      return 0;
    }
    t = t->expectRef<c10::OptionalType>().getElementType();
  } else if (a.tag == T::None) {
    return -1;
  }
  *out = a.v;
  switch (t->kind()) {
  case K::TensorType: return a.tag == T::Tensor ? 0 : -1;
  case K::NumberType: return a.tag == T::Int || a.tag == T::Double || a.tag == T::Bool ? 0 : -1;
  case K::IntType:
  case K::SymIntType: return a.tag == T::Int ? 0 : -1;
  case K::FloatType:
  case K::SymFloatType:
    if (a.tag == T::Double) return 0;
    if (a.tag != T::Int) return -1;
    *out = c10::IValue((double)a.v.toInt());
    return 1;
  case K::BoolType:
  case K::SymBoolType: return a.tag == T::Bool ? 0 : -1;
  case K::StringType: return a.tag == T::Str ? 0 : -1;
  case K::ScalarTypeType: return a.tag == T::Dtype ? 0 : -1;
  case K::MemoryFormatType: return a.tag == T::MemoryFormat ? 0 : -1;
  case K::DeviceObjType: return a.tag == T::Device ? 0 : -1;
  case K::ListType: {
    K e = t->expectRef<c10::ListType>().getElementType()->kind();
    if (e == K::IntType || e == K::SymIntType) return a.tag == T::IntList ? 0 : -1;
    if (e == K::TensorType) return a.tag == T::TensorList ? 0 : -1;
    if (e == K::FloatType) return a.tag == T::DoubleList ? 0 : -1;
    return -1;
  }
  default: return -1;
  }
}

struct Plan {
  std::optional<c10::OperatorHandle> op;
  std::vector<c10::IValue> stack;
  int cost = std::numeric_limits<int>::max(), defaults = 0;
  bool is_default = false;
};

// The stack for `op`, or false when the values do not fit its schema.
bool try_overload(const c10::OperatorHandle &op, const std::vector<Arg> &args, const Kwargs &kwargs, Plan *p) {
  const c10::FunctionSchema &s = op.schema();
  const auto &params = s.arguments();
  if (args.size() > params.size()) return false;
  for (const auto &a : params)
    if (a.is_out()) return false;
  for (const auto &kw : kwargs) {
    bool known = false;
    for (const auto &a : params) known = known || a.name() == kw.first;
    if (!known) return false;
  }
  p->stack.clear();
  p->cost = 0;
  p->defaults = 0;
  for (size_t i = 0; i < params.size(); i++) {
    const Arg *given = i < args.size() ? &args[i] : nullptr;
    for (const auto &kw : kwargs)
      if (kw.first == params[i].name()) {
        if (given) return false; // given twice
        given = &kw.second;
      }
    c10::IValue v;
    if (given) {
      int c = fit(*given, params[i], &v);
      if (c < 0) return false;
      p->cost += c;
    } else if (params[i].default_value()) {
      v = *params[i].default_value();
      p->defaults++;
    } else {
      return false;
    }
    p->stack.push_back(std::move(v));
  }
  p->op = op;
  p->is_default = s.overload_name().empty();
  return true;
}

std::string describe(const std::string &name, const std::vector<Arg> &args, const Kwargs &kwargs) {
  std::ostringstream o;
  o << "aten::" << name << "(";
  for (size_t i = 0; i < args.size(); i++) o << (i ? ", " : "") << tag_name(args[i].tag);
  for (size_t i = 0; i < kwargs.size(); i++)
    o << (i || !args.empty() ? ", " : "") << kwargs[i].first << "=" << tag_name(kwargs[i].second.tag);
  o << ")";
  return o.str();
}

Plan choose(const std::string &name, const std::vector<Arg> &args, const Kwargs &kwargs) {
  const auto &ops = overloads(name);
  if (ops.empty()) throw WorkerError("unsupported", "aten::" + name + " is not an operator of this libtorch");
  Plan best, p;
  for (const auto &op : ops) {
    if (!try_overload(op, args, kwargs, &p)) continue;
    bool better = !best.op || p.cost < best.cost || (p.cost == best.cost && p.defaults < best.defaults) ||
                  (p.cost == best.cost && p.defaults == best.defaults && p.is_default && !best.is_default);
    if (better) best = p;
  }
  if (!best.op) {
    std::ostringstream o;
    o << "no overload of aten::" << name << " takes " << describe(name, args, kwargs) << "; its schemas:";
    for (const auto &op : ops) o << "\n  " << op.schema();
    throw WorkerError("unsupported", o.str());
  }
  return best;
}

} // namespace

c10::IValue call_aten(const std::string &name, const std::vector<Arg> &args, const Kwargs &kwargs,
                      std::string *schema) {
  Plan p = choose(name, args, kwargs);
  if (schema) {
    std::ostringstream o;
    o << p.op->schema();
    *schema = o.str();
  }
  size_t nret = p.op->schema().returns().size();
  p.op->callBoxed(&p.stack);
  if (nret == 1 && p.stack.size() == 1) return std::move(p.stack[0]);
  return c10::ivalue::Tuple::create(std::move(p.stack));
}

} // namespace mkn
