// native_interp.cpp — the ATen interpreter of a captured graph (native_interp.h).
#include "native_interp.h"

#include "native_aten.h"
#include "native_common.h"
#include "native_tensors.h"

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <cstring>
#include <functional>
#include <optional>

namespace mkn {

namespace {

const std::pair<const char *, at::MemoryFormat> kFormats[] = {
    {"contiguous_format", at::MemoryFormat::Contiguous},
    {"channels_last", at::MemoryFormat::ChannelsLast},
    {"channels_last_3d", at::MemoryFormat::ChannelsLast3d},
    {"preserve_format", at::MemoryFormat::Preserve},
};

std::string where(const cJSON *form) {
  const cJSON *op = field(form, "op"), *line = field(form, "line"), *node = field(form, "node");
  std::string s = "node " + std::to_string(cJSON_IsNumber(node) ? node->valueint : -1);
  if (cJSON_IsString(op)) s += " (" + std::string(op->valuestring);
  if (cJSON_IsNumber(line)) s += ", line " + std::to_string(line->valueint);
  return s + (cJSON_IsString(op) ? ")" : "");
}

} // namespace

Interpreter::Interpreter(const cJSON *values, State &state, const cJSON *layouts)
    : values_(values), state_(state), layouts_(layouts) {}

void Interpreter::apply_layout(int vid) {
  const cJSON *how = cJSON_IsObject(layouts_) ? field(layouts_, std::to_string(vid).c_str()) : nullptr;
  if (!cJSON_IsString(how) || env_.count(vid) == 0) return;
  at::Tensor &t = env_[vid];
  if (std::strcmp(how->valuestring, "contiguous") == 0) t = t.contiguous();
  else if (t.dim() == 4) t = t.contiguous(at::MemoryFormat::ChannelsLast);
  else if (t.dim() == 5) t = t.contiguous(at::MemoryFormat::ChannelsLast3d);
}

void Interpreter::bind_inputs(const Named &inputs) {
  const cJSON *v;
  cJSON_ArrayForEach(v, values_) {
    const cJSON *kind = field(v, "kind"), *index = field(v, "index"), *id = field(v, "id");
    if (!cJSON_IsString(kind) || std::strcmp(kind->valuestring, "input") != 0) continue;
    if (!cJSON_IsNumber(index) || !cJSON_IsNumber(id)) throw WorkerError("bad_request", "an input value without index or id");
    std::string name = "input." + std::to_string(index->valueint);
    bool found = false;
    for (auto &[n, t] : inputs)
      if (n == name) env_[id->valueint] = t, found = true;
    if (!found) throw WorkerError("bad_request", "the inputs file has no " + name);
    apply_layout(id->valueint);
  }
}

at::Tensor Interpreter::get(int vid) {
  auto it = env_.find(vid);
  if (it != env_.end()) return it->second;
  const cJSON *v = cJSON_GetArrayItem(values_, vid);
  const cJSON *kind = field(v, "kind"), *name = field(v, "name");
  if (!cJSON_IsString(kind)) throw WorkerError("bad_request", "value " + std::to_string(vid) + " is not in the graph");
  std::string k = kind->valuestring;
  if ((k == "param" || k == "buffer" || k == "attr") && cJSON_IsString(name)) {
    auto s = state_.find(name->valuestring);
    if (s == state_.end())
      throw WorkerError("bad_request", "the state file has no " + std::string(name->valuestring) + " (value " +
                                           std::to_string(vid) + ")");
    return env_[vid] = s->second;
  }
  if (k == "const")
    throw WorkerError("unsupported", "value " + std::to_string(vid) + " is a tensor made outside forward: not replayable");
  throw WorkerError("bad_request", "value " + std::to_string(vid) + " (" + k + ") is not available: its producer did not run");
}

namespace {

Arg scalar_arg(const cJSON *a) {
  double d;
  bool f;
  Arg r;
  if (cJSON_IsBool(a)) return {Arg::Tag::Bool, c10::IValue((bool)cJSON_IsTrue(a))};
  if (!protocol_number(a, &d, &f)) return r;
  if (f || !cJSON_IsNumber(a)) return {Arg::Tag::Double, c10::IValue(d)};
  return {Arg::Tag::Int, c10::IValue((int64_t)d)};
}

} // namespace

c10::IValue Interpreter::eval(const cJSON *call, const cJSON *form) {
  const cJSON *op = field(call, "op"), *args = field(call, "args"), *kwargs = field(call, "kwargs");
  if (!cJSON_IsString(op) || !cJSON_IsArray(args))
    throw WorkerError("bad_request", where(form) + ": a call needs op and args");
  // Arguments: protocol values (docs/protocol.md) as the engine normalised them.
  std::function<Arg(const cJSON *)> decode = [&](const cJSON *a) -> Arg {
    if (cJSON_IsNull(a)) return Arg{};
    if (cJSON_IsBool(a) || cJSON_IsNumber(a)) return scalar_arg(a);
    if (cJSON_IsString(a)) return {Arg::Tag::Str, c10::IValue(std::string(a->valuestring))};
    const char *tag = tag_of(a);
    if (tag == nullptr) throw WorkerError("bad_request", where(form) + ": an argument the worker does not read");
    if (!std::strcmp(tag, "float")) return scalar_arg(a);
    if (!std::strcmp(tag, "t")) return {Arg::Tag::Tensor, c10::IValue(get(a->child->valueint))};
    if (!std::strcmp(tag, "call")) {
      c10::IValue r = eval(a->child, form);
      if (!r.isTensor()) throw WorkerError("bad_request", where(form) + ": a nested call that gives no tensor");
      return {Arg::Tag::Tensor, r};
    }
    if (!std::strcmp(tag, "dtype") || !std::strcmp(tag, "memory_format")) {
      if (!cJSON_IsString(a->child)) throw WorkerError("bad_request", where(form) + ": a bad " + tag);
      std::string s = a->child->valuestring;
      if (tag[0] == 'd') {
        if (auto t = dtype_named(s)) return {Arg::Tag::Dtype, c10::IValue(*t)};
      } else {
        for (auto &m : kFormats)
          if (s == m.first) return {Arg::Tag::MemoryFormat, c10::IValue(m.second)};
      }
      throw WorkerError("unsupported", where(form) + ": " + tag + " " + s);
    }
    if (!std::strcmp(tag, "list") || !std::strcmp(tag, "tuple") || !std::strcmp(tag, "size")) {
      std::vector<int64_t> is;
      std::vector<double> ds;
      std::vector<at::Tensor> ts;
      bool floats = false;
      const cJSON *it;
      cJSON_ArrayForEach(it, a->child) {
        Arg e = decode(it);
        if (e.tag == Arg::Tag::Tensor) ts.push_back(e.v.toTensor());
        else if (e.tag == Arg::Tag::Int) is.push_back(e.v.toInt()), ds.push_back((double)e.v.toInt());
        else if (e.tag == Arg::Tag::Double) ds.push_back(e.v.toDouble()), floats = true;
        else throw WorkerError("unsupported", where(form) + ": a list of " + tag_name(e.tag));
      }
      if (!ts.empty() && !ds.empty()) throw WorkerError("unsupported", where(form) + ": a list of tensors and numbers");
      if (!ts.empty()) return {Arg::Tag::TensorList, c10::IValue(ts)};
      if (floats) return {Arg::Tag::DoubleList, c10::IValue(ds)};
      return {Arg::Tag::IntList, c10::IValue(is)};
    }
    throw WorkerError("unsupported", where(form) + ": an argument tagged " + tag);
  };
  std::string name = op->valuestring;
  if (name == "mk::index") return eval_index(call, form);
  if (name.rfind("aten::", 0) != 0) throw WorkerError("unsupported", where(form) + ": op " + name);
  std::vector<Arg> pos;
  const cJSON *a;
  cJSON_ArrayForEach(a, args) pos.push_back(decode(a));
  Kwargs kw;
  cJSON_ArrayForEach(a, kwargs) kw.emplace_back(a->string, decode(a));
  std::string schema;
  c10::IValue r = call_aten(name.substr(6), pos, kw, &schema);
  const cJSON *node = field(form, "node");
  schemas_.push_back("node " + std::to_string(cJSON_IsNumber(node) ? node->valueint : -1) + ": " + schema);
  const cJSON *select = field(call, "select");
  if (cJSON_IsNumber(select)) {
    if (!r.isTuple() || select->valueint < 0 || (size_t)select->valueint >= r.toTupleRef().elements().size())
      throw WorkerError("bad_request", where(form) + ": select of something that is not a tuple that long");
    return r.toTupleRef().elements()[select->valueint];
  }
  return r;
}

// Python's x[...] through at::indexing, term by term as the C++ export writes it.
c10::IValue Interpreter::eval_index(const cJSON *call, const cJSON *form) {
  const cJSON *args = field(call, "args");
  const cJSON *self = cJSON_GetArrayItem(args, 0), *terms = cJSON_GetArrayItem(args, 1);
  if (std::strcmp(tag_of(self) ? tag_of(self) : "", "t") != 0)
    throw WorkerError("bad_request", where(form) + ": indexing needs a tensor");
  using namespace at::indexing;
  std::vector<TensorIndex> idx;
  const cJSON *t;
  auto opt_int = [&](const cJSON *p) -> std::optional<c10::SymInt> {
    if (cJSON_IsNull(p)) return std::nullopt;
    return c10::SymInt((int64_t)p->valuedouble);
  };
  const cJSON *list = tag_of(terms) ? terms->child : nullptr;
  cJSON_ArrayForEach(t, list) {
    const char *tag = tag_of(t);
    if (cJSON_IsNull(t)) idx.emplace_back(None);
    else if (cJSON_IsBool(t)) idx.emplace_back((bool)cJSON_IsTrue(t));
    else if (cJSON_IsNumber(t)) idx.emplace_back((int64_t)t->valuedouble);
    else if (tag && !std::strcmp(tag, "ellipsis")) idx.emplace_back(Ellipsis);
    else if (tag && !std::strcmp(tag, "t")) idx.emplace_back(get(t->child->valueint));
    else if (tag && !std::strcmp(tag, "slice") && cJSON_GetArraySize(t->child) == 3)
      idx.emplace_back(Slice(opt_int(cJSON_GetArrayItem(t->child, 0)), opt_int(cJSON_GetArrayItem(t->child, 1)),
                             opt_int(cJSON_GetArrayItem(t->child, 2))));
    else throw WorkerError("unsupported", where(form) + ": an index term the worker does not read");
  }
  return c10::IValue(get(self->child->valueint).index(idx));
}

void Interpreter::bind_out(const cJSON *s, const c10::IValue &v, const cJSON *form) {
  const char *tag = tag_of(s);
  if (tag && !std::strcmp(tag, "t")) {
    if (!v.isTensor()) throw WorkerError("internal", where(form) + ": a tensor was recorded, ATen returned another kind");
    env_[s->child->valueint] = v.toTensor();
    return;
  }
  if (!tag || (std::strcmp(tag, "tuple") != 0 && std::strcmp(tag, "list") != 0)) return;
  std::vector<c10::IValue> items;
  if (v.isTuple()) items = v.toTupleRef().elements().vec();
  else if (v.isTensorList()) for (const at::Tensor &t : v.toTensorVector()) items.emplace_back(t);
  else if (v.isList()) items = v.toListRef().vec();
  if (items.size() != (size_t)cJSON_GetArraySize(s->child))
    throw WorkerError("internal", where(form) + ": the result's structure differs from the capture");
  size_t i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, s->child) bind_out(e, items[i++], form);
}

void Interpreter::run(const cJSON *form) {
  const cJSON *call = field(form, "call");
  if (!cJSON_IsObject(call)) throw WorkerError("bad_request", where(form) + ": a node form needs a call");
  c10::IValue r;
  try {
    r = eval(call, form);
  } catch (const WorkerError &) {
    throw;
  } catch (const std::exception &e) { // ATen's own errors (c10::Error): which node, and ATen's first line
    std::string msg = e.what();
    throw WorkerError("python_error", where(form) + ": " + msg.substr(0, msg.find('\n')));
  }
  const cJSON *into = field(form, "copy_into"), *outputs = field(form, "outputs"), *o;
  if (cJSON_IsNumber(into)) { // in place, as export_emit_node writes it
    at::Tensor dst = get(into->valueint);
    if (!r.isTensor()) throw WorkerError("internal", where(form) + ": an in-place op that gives no tensor");
    dst.copy_(r.toTensor());
    cJSON_ArrayForEach(o, outputs) env_[o->valueint] = dst;
  } else {
    bind_out(field(form, "out"), r, form);
    cJSON_ArrayForEach(o, field(form, "alias")) env_[cJSON_GetArrayItem(o, 0)->valueint] = get(cJSON_GetArrayItem(o, 1)->valueint);
  }
  cJSON_ArrayForEach(o, outputs) apply_layout(o->valueint);
}

std::vector<const cJSON *> forms_of(const cJSON *forms, const std::vector<int64_t> &nodes) {
  std::map<int64_t, const cJSON *> by_id;
  const cJSON *f;
  cJSON_ArrayForEach(f, forms) {
    const cJSON *id = field(f, "node");
    if (cJSON_IsNumber(id)) by_id[(int64_t)id->valuedouble] = f;
  }
  std::vector<const cJSON *> out;
  for (int64_t n : nodes) {
    auto it = by_id.find(n);
    if (it == by_id.end()) throw WorkerError("bad_request", "node " + std::to_string(n) + " has no ATen form in `aten`");
    out.push_back(it->second);
  }
  return out;
}

} // namespace mkn
