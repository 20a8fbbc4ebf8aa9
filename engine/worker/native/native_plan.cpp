// native_plan.cpp — the launch plan's interpreter (native_plan.h).
#include "native_plan.h"

#include "native_common.h"
#include "native_driver.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <variant>

namespace mkn {

namespace {

using Ints = std::vector<int64_t>;

struct Env {
  std::map<std::string, at::Tensor> tensors;
  std::map<std::string, Ints> lists;
  std::map<std::string, int64_t> ints;

  const at::Tensor &tensor(const cJSON *name) {
    if (!cJSON_IsString(name)) throw WorkerError("bad_request", "launch plan: a tensor argument that is not a name");
    auto it = tensors.find(name->valuestring);
    if (it == tensors.end()) throw WorkerError("bad_request", std::string("launch plan: no tensor ") + name->valuestring);
    return it->second;
  }
  Ints list(const cJSON *a) {
    if (cJSON_IsArray(a)) return int_list(a, "launch plan: a shape");
    if (!cJSON_IsString(a)) throw WorkerError("bad_request", "launch plan: a list argument that is not a name");
    auto it = lists.find(a->valuestring);
    if (it == lists.end()) throw WorkerError("bad_request", std::string("launch plan: no int list ") + a->valuestring);
    return it->second;
  }
  // An INT: a literal, a name, {"item": [list, d]}, {"cdiv": [INT, k]}.
  int64_t integer(const cJSON *a) {
    if (cJSON_IsNumber(a)) return (int64_t)a->valuedouble;
    if (cJSON_IsString(a)) {
      auto it = ints.find(a->valuestring);
      if (it == ints.end()) throw WorkerError("bad_request", std::string("launch plan: no int ") + a->valuestring);
      return it->second;
    }
    const char *tag = tag_of(a);
    if (tag && !std::strcmp(tag, "item") && cJSON_GetArraySize(a->child) == 2) {
      Ints l = list(cJSON_GetArrayItem(a->child, 0));
      int64_t d = (int64_t)cJSON_GetArrayItem(a->child, 1)->valuedouble;
      if (d < 0 || d >= (int64_t)l.size()) throw CandidateError("launch plan: an index past the end of a shape");
      return l[(size_t)d];
    }
    if (tag && (!std::strcmp(tag, "size") || !std::strcmp(tag, "stride")) && cJSON_GetArraySize(a->child) == 2) {
      const at::Tensor &t = tensor(cJSON_GetArrayItem(a->child, 0));
      int64_t d = (int64_t)cJSON_GetArrayItem(a->child, 1)->valuedouble;
      if (d < 0) d += t.dim(); // from the end, as Python's shape[-1]
      if (d < 0 || d >= t.dim()) throw CandidateError("launch plan: a dim past the tensor's rank");
      return tag[1] == 'i' ? t.size(d) : t.stride(d);
    }
    if (tag && !std::strcmp(tag, "len")) return (int64_t)list(a->child).size();
    if (tag && !std::strcmp(tag, "innermost_channels")) {
      const at::Tensor &t = tensor(a->child);
      return t.dim() > 1 && t.stride(1) == 1 && t.size(1) > 1 ? 1 : 0;
    }
    if (tag && !std::strcmp(tag, "pool_out") && cJSON_GetArraySize(a->child) == 6) {
      // torch's pooling_output_shape, as the Python launcher's _pool_out_size
      int64_t size = integer(cJSON_GetArrayItem(a->child, 0)), k = integer(cJSON_GetArrayItem(a->child, 1));
      int64_t s = integer(cJSON_GetArrayItem(a->child, 2)), p = integer(cJSON_GetArrayItem(a->child, 3));
      int64_t d = integer(cJSON_GetArrayItem(a->child, 4));
      bool ceil_mode = cJSON_IsTrue(cJSON_GetArrayItem(a->child, 5));
      if (s <= 0) throw WorkerError("bad_request", "launch plan: a pool stride <= 0");
      int64_t num = size + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
      int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1; // Python's floor division
      if (ceil_mode && (out - 1) * s >= size + p) out -= 1;
      if (out < 1) throw CandidateError("pooling window larger than the padded input");
      return out;
    }
    if (tag && cJSON_GetArraySize(a->child) == 2 &&
        (!std::strcmp(tag, "add") || !std::strcmp(tag, "mul") || !std::strcmp(tag, "div") || !std::strcmp(tag, "max"))) {
      int64_t x = integer(cJSON_GetArrayItem(a->child, 0)), y = integer(cJSON_GetArrayItem(a->child, 1));
      if (!std::strcmp(tag, "add")) return x + y;
      if (!std::strcmp(tag, "mul")) return x * y;
      if (!std::strcmp(tag, "max")) return std::max(x, y);
      if (y == 0) throw CandidateError("launch plan: division by zero"); // div: floor division, as Python's //
      return x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0);
    }
    if (tag && !std::strcmp(tag, "cdiv") && cJSON_GetArraySize(a->child) == 2) {
      int64_t x = integer(cJSON_GetArrayItem(a->child, 0)), k = integer(cJSON_GetArrayItem(a->child, 1));
      if (k <= 0) throw WorkerError("bad_request", "launch plan: cdiv by a non-positive int");
      return (x + k - 1) / k;
    }
    throw WorkerError("bad_request", "launch plan: an int the worker does not read");
  }
};

const cJSON *arg(const cJSON *step, int i) { return cJSON_GetArrayItem(field(step, "args"), i); }

std::string out_name(const cJSON *step) {
  const cJSON *o = field(step, "out");
  if (!cJSON_IsString(o)) throw WorkerError("bad_request", "launch plan: a step without `out`");
  return o->valuestring;
}

// s[lo:hi] as a Python slice (negative bounds from the end, clamped)
int64_t prod(const Ints &s, int64_t lo, int64_t hi) {
  int64_t n = (int64_t)s.size();
  if (lo < 0) lo += n;
  if (hi < 0) hi += n;
  lo = std::clamp<int64_t>(lo, 0, n);
  hi = std::clamp<int64_t>(hi, 0, n);
  int64_t p = 1;
  for (int64_t i = lo; i < hi; i++) p *= s[(size_t)i];
  return p;
}

} // namespace

// The MK_CUDA_PLAN of a candidate's source (docs/candidates.md), parsed; the caller frees it.
cJSON *read_plan(const std::string &source) {
  const std::string head = "\nMK_CUDA_PLAN = r\"\"\"\n";
  size_t a = source.find(head);
  if (a == std::string::npos)
    throw WorkerError("unsupported", "the candidate has no MK_CUDA_PLAN: the Python worker verifies it");
  a += head.size();
  size_t b = source.find("\n\"\"\"", a);
  cJSON *plan = b == std::string::npos ? nullptr : cJSON_Parse(source.substr(a, b - a).c_str());
  if (!cJSON_IsObject(plan)) {
    cJSON_Delete(plan);
    throw WorkerError("bad_request", "the candidate's MK_CUDA_PLAN is not a JSON object");
  }
  return plan;
}

Plan::Plan(const cJSON *plan, std::string cubin) : plan_(plan), cubin_(std::move(cubin)) {
  const cJSON *v = field(plan, "version");
  if (!cJSON_IsNumber(v) || v->valueint != 1) throw WorkerError("bad_request", "MK_CUDA_PLAN: version 1 is read");
  for (const char *k : {"inputs", "outputs", "steps"})
    if (!cJSON_IsArray(field(plan, k))) throw WorkerError("bad_request", std::string("MK_CUDA_PLAN: no ") + k);
  if (!cJSON_IsObject(field(plan, "kernels"))) throw WorkerError("bad_request", "MK_CUDA_PLAN: no kernels");
}

Plan::~Plan() {
  if (module_) driver().cuModuleUnload(module_);
}

size_t Plan::ninputs() const { return (size_t)cJSON_GetArraySize(field(plan_, "inputs")); }

void *Plan::function(const std::string &kernel) {
  for (auto &[name, fn] : functions_)
    if (name == kernel) return fn;
  Driver &d = driver();
  if (module_ == nullptr) check(d.cuModuleLoadData(&module_, cubin_.data()), "cuModuleLoadData");
  void *fn = nullptr;
  if (d.cuModuleGetFunction(&fn, module_, kernel.c_str()) != 0)
    throw CandidateError("the cubin has no kernel " + kernel);
  functions_.emplace_back(kernel, fn);
  return fn;
}

namespace {

cJSON *ints_json(at::IntArrayRef xs) {
  cJSON *a = cJSON_CreateArray();
  for (int64_t x : xs) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)x));
  return a;
}

} // namespace

std::vector<at::Tensor> Plan::run(const std::vector<at::Tensor> &inputs, const cJSON *values, State &state,
                                  cJSON *record) {
  Env env;
  if (inputs.size() != ninputs())
    throw WorkerError("internal", "run takes " + std::to_string(ninputs()) + " inputs, " +
                                      std::to_string(inputs.size()) + " given");
  size_t i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, field(plan_, "inputs")) env.tensors[it->valuestring] = inputs[i++];
  Interpreter nodes(values, state, nullptr);
  for (auto &[name, t] : env.tensors)
    if (name.size() > 1 && name[0] == 'v') nodes.bind(std::stoi(name.substr(1)), t);
  const cJSON *step;
  cJSON_ArrayForEach(step, field(plan_, "steps")) {
    const cJSON *opj = field(step, "op");
    if (!cJSON_IsString(opj)) throw WorkerError("bad_request", "launch plan: a step without op");
    std::string op = opj->valuestring;
    if (op == "node") {
      const cJSON *form = field(step, "form");
      nodes.run(form);
      const cJSON *o;
      cJSON_ArrayForEach(o, field(form, "outputs")) env.tensors["v" + std::to_string(o->valueint)] = nodes.get(o->valueint);
    } else if (op == "broadcast") {
      Ints shape;
      const cJSON *a;
      cJSON_ArrayForEach(a, field(step, "args")) shape = at::infer_size(shape, env.tensor(a).sizes());
      env.lists[out_name(step)] = shape;
    } else if (op == "list") {
      Ints l;
      const cJSON *a;
      cJSON_ArrayForEach(a, field(step, "args")) l.push_back(env.integer(a));
      env.lists[out_name(step)] = l;
    } else if (op == "int") {
      env.ints[out_name(step)] = env.integer(arg(step, 0));
    } else if (op == "reshape") {
      env.tensors[out_name(step)] = env.tensor(arg(step, 0)).reshape(env.list(arg(step, 1)));
    } else if (op == "with_last") {
      Ints l = env.list(arg(step, 0));
      if (l.empty()) throw CandidateError("launch plan: the last item of an empty shape");
      l.back() = env.integer(arg(step, 1));
      env.lists[out_name(step)] = l;
    } else if (op == "require_equal") {
      const cJSON *msg = arg(step, 2);
      if (env.integer(arg(step, 0)) != env.integer(arg(step, 1)))
        throw CandidateError(cJSON_IsString(msg) ? msg->valuestring : "a size the candidate refuses");
    } else if (op == "require_multiple") {
      int64_t x = env.integer(arg(step, 0)), k = env.integer(arg(step, 1));
      const cJSON *msg = arg(step, 2);
      if (k == 0 || x % k != 0) throw CandidateError(cJSON_IsString(msg) ? msg->valuestring : "a size the candidate refuses");
    } else if (op == "unsqueeze") {
      env.tensors[out_name(step)] = env.tensor(arg(step, 0)).unsqueeze(env.integer(arg(step, 1)));
    } else if (op == "numel") {
      env.ints[out_name(step)] = env.tensor(arg(step, 0)).numel();
    } else if (op == "sizes") {
      env.lists[out_name(step)] = env.tensor(arg(step, 0)).sizes().vec();
    } else if (op == "empty") {
      const cJSON *dt = arg(step, 2);
      at::ScalarType type = cJSON_IsString(dt) && !std::strcmp(dt->valuestring, "bool") ? at::kBool : at::kFloat;
      std::string out = out_name(step);
      const cJSON *mf = arg(step, 3);
      at::MemoryFormat format = at::MemoryFormat::Contiguous;
      if (cJSON_IsString(mf))
        format = !std::strcmp(mf->valuestring, "channels_last_3d") ? at::MemoryFormat::ChannelsLast3d
                                                                   : at::MemoryFormat::ChannelsLast;
      env.tensors[out] = at::empty(env.list(arg(step, 0)), env.tensor(arg(step, 1)).options().dtype(type), format);
      if (out[0] == 'v') nodes.bind(std::stoi(out.substr(1)), env.tensors[out]);
    } else if (op == "alias") {
      std::string out = out_name(step);
      env.tensors[out] = env.tensor(arg(step, 0));
      if (out[0] == 'v') nodes.bind(std::stoi(out.substr(1)), env.tensors[out]);
    } else if (op == "full" || op == "inplace") {
      const at::Tensor &t = env.tensor(arg(step, 0));
      Ints shape = env.list(arg(step, 1));
      if (t.sizes() != at::IntArrayRef(shape))
        throw CandidateError("operand shape differs from the captured one");
      if (op == "inplace" && !t.is_contiguous())
        throw CandidateError("an in-place operand must be contiguous with the run's shape");
      env.tensors[out_name(step)] = op == "full" ? t.contiguous() : t;
    } else if (op == "contiguous") {
      env.tensors[out_name(step)] = env.tensor(arg(step, 0)).contiguous();
    } else if (op == "bstrides") {
      env.lists[out_name(step)] = env.tensor(arg(step, 0)).expand(env.list(arg(step, 1))).strides().vec();
    } else if (op == "prod") {
      Ints l = env.list(arg(step, 0));
      env.ints[out_name(step)] =
          prod(l, env.integer(arg(step, 1)), cJSON_IsNull(arg(step, 2)) ? (int64_t)l.size() : env.integer(arg(step, 2)));
    } else if (op == "mul") {
      env.ints[out_name(step)] = env.integer(arg(step, 0)) * env.integer(arg(step, 1));
    } else if (op == "reduced_shape") {
      Ints s = env.list(arg(step, 0));
      size_t lo = (size_t)arg(step, 1)->valuedouble, hi = (size_t)arg(step, 2)->valuedouble;
      Ints out(s.begin(), s.begin() + (ptrdiff_t)std::min(lo, s.size()));
      if (cJSON_IsTrue(arg(step, 3))) out.insert(out.end(), hi - lo + 1, 1);
      if (hi + 1 < s.size()) out.insert(out.end(), s.begin() + (ptrdiff_t)(hi + 1), s.end());
      env.lists[out_name(step)] = out;
    } else if (op == "launch") {
      const cJSON *when = field(step, "when");
      if (when && env.integer(when) <= 0) continue;
      const cJSON *kernel = field(step, "kernel");
      const cJSON *sig = cJSON_IsString(kernel) ? field(field(plan_, "kernels"), kernel->valuestring) : nullptr;
      if (!cJSON_IsString(sig)) throw WorkerError("bad_request", "launch plan: a launch of a kernel not in `kernels`");
      std::string s = sig->valuestring;
      const cJSON *args = field(step, "args");
      if ((size_t)cJSON_GetArraySize(args) != s.size())
        throw CandidateError(std::string(kernel->valuestring) + " takes " + std::to_string(s.size()) + " arguments, " +
                             std::to_string(cJSON_GetArraySize(args)) + " given");
      std::vector<void *> ptrs(s.size());
      std::vector<long long> qs(s.size());
      std::vector<void *> slots(s.size());
      cJSON *rec = record ? cJSON_CreateObject() : nullptr, *rargs = nullptr;
      if (rec) {
        cJSON_AddStringToObject(rec, "kernel", kernel->valuestring);
        rargs = cJSON_AddArrayToObject(rec, "args");
        cJSON_AddItemToArray(record, rec);
      }
      for (size_t k = 0; k < s.size(); k++) {
        const cJSON *a = cJSON_GetArrayItem(args, (int)k);
        if (s[k] == 'q') {
          if (!field(a, "int")) throw CandidateError("argument " + std::to_string(k) + " of " + kernel->valuestring + " must be an int");
          qs[k] = env.integer(field(a, "int"));
          slots[k] = &qs[k];
          if (rargs) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "int", (double)qs[k]);
            cJSON_AddItemToArray(rargs, o);
          }
        } else {
          if (!field(a, "ptr")) throw CandidateError("argument " + std::to_string(k) + " of " + kernel->valuestring + " must be a tensor");
          const at::Tensor &t = env.tensor(field(a, "ptr"));
          at::ScalarType want = s[k] == 'b' ? at::kBool : at::kFloat;
          if (rargs) {
            cJSON *o = cJSON_CreateObject(), *p = cJSON_AddObjectToObject(o, "ptr");
            cJSON_AddItemToObject(p, "shape", ints_json(t.sizes()));
            cJSON_AddItemToObject(p, "strides", ints_json(t.strides()));
            cJSON_AddStringToObject(p, "dtype", t.scalar_type() == at::kBool ? "bool" : t.scalar_type() == at::kFloat ? "float32" : "other");
            cJSON_AddItemToArray(rargs, o);
          }
          if (t.scalar_type() != want || (!t.is_cuda() && !record))
            throw CandidateError("argument " + std::to_string(k) + " of " + kernel->valuestring + " must be a " +
                                 (s[k] == 'b' ? "bool" : "float32") + " CUDA tensor");
          ptrs[k] = t.data_ptr();
          slots[k] = &ptrs[k];
        }
      }
      unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
      int gi = 0, bi = 0;
      const cJSON *g;
      cJSON_ArrayForEach(g, field(step, "grid")) if (gi < 3) grid[gi++] = (unsigned)env.integer(g);
      cJSON_ArrayForEach(g, field(step, "block")) if (bi < 3) block[bi++] = (unsigned)env.integer(g);
      if (rec) {
        cJSON *gj = cJSON_AddArrayToObject(rec, "grid"), *bj = cJSON_AddArrayToObject(rec, "block");
        for (int q = 0; q < gi; q++) cJSON_AddItemToArray(gj, cJSON_CreateNumber(grid[q]));
        for (int q = 0; q < bi; q++) cJSON_AddItemToArray(bj, cJSON_CreateNumber(block[q]));
        continue; // recorded, not launched
      }
      void *fn = function(kernel->valuestring);
      // torch's current stream in this process is the default one: nothing here changes it.
      int rc = driver().cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, nullptr,
                                       slots.data(), nullptr);
      if (rc != 0) {
        const char *msg = nullptr;
        driver().cuGetErrorString(rc, &msg);
        throw CandidateError(std::string("launching ") + kernel->valuestring + " failed: " + (msg ? msg : "CUDA error"));
      }
    } else {
      throw WorkerError("bad_request", "launch plan: unknown step " + op);
    }
  }
  std::vector<at::Tensor> out;
  cJSON_ArrayForEach(it, field(plan_, "outputs")) out.push_back(env.tensor(it));
  return out;
}

} // namespace mkn
