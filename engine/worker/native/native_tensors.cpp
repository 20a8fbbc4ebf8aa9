// native_tensors.cpp — reading and writing the .mkt tensor file (native_tensors.h).
#include "native_tensors.h"

#include "native_common.h"

#include <ATen/ATen.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <memory>

namespace mkn {

namespace {

const std::pair<const char *, at::ScalarType> kDtypes[] = {
    {"float32", at::kFloat}, {"float64", at::kDouble}, {"float16", at::kHalf},  {"bfloat16", at::kBFloat16},
    {"int64", at::kLong},    {"int32", at::kInt},      {"int16", at::kShort},  {"int8", at::kChar},
    {"uint8", at::kByte},    {"bool", at::kBool},
};

struct File {
  std::FILE *f;
  std::string path;
  void read(void *p, size_t n) {
    if (n && std::fread(p, 1, n, f) != n) throw WorkerError("bad_request", path + ": the tensor file ends early");
  }
  template <typename T> T get() {
    T v;
    read(&v, sizeof v); // little-endian hosts only (x86-64, aarch64)
    return v;
  }
  std::string str() {
    uint32_t n = get<uint32_t>();
    if (n > 4096) throw WorkerError("bad_request", path + ": a name longer than 4096 bytes");
    std::string s(n, '\0');
    read(s.data(), n);
    return s;
  }
};

at::ScalarType dtype_of(const std::string &name, const std::string &path) {
  if (auto t = dtype_named(name)) return *t;
  throw WorkerError("bad_request", path + ": unknown dtype " + name);
}

void put(std::FILE *f, const void *p, size_t n) {
  if (n && std::fwrite(p, 1, n, f) != n) throw WorkerError("internal", "cannot write a tensor file");
}

void put_str(std::FILE *f, const std::string &s) {
  uint32_t n = (uint32_t)s.size();
  put(f, &n, sizeof n);
  put(f, s.data(), s.size());
}

} // namespace

std::optional<at::ScalarType> dtype_named(const std::string &name) {
  for (auto &d : kDtypes)
    if (name == d.first) return d.second;
  return std::nullopt;
}

const char *dtype_name(at::ScalarType t) {
  for (auto &d : kDtypes)
    if (t == d.second) return d.first;
  throw WorkerError("unsupported", std::string("dtype ") + c10::toString(t) + " has no tensor-file name");
}

Named read_tensors(const std::string &path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> fp(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!fp) throw WorkerError("bad_request", path + ": cannot open the tensor file");
  File f{fp.get(), path};
  char magic[8];
  f.read(magic, 8);
  if (std::memcmp(magic, "MKTENS1\n", 8) != 0) throw WorkerError("bad_request", path + ": not an mkevolve tensor file");
  uint32_t count = f.get<uint32_t>();
  Named out;
  for (uint32_t i = 0; i < count; i++) {
    std::string name = f.str();
    at::ScalarType dtype = dtype_of(f.str(), path);
    uint32_t rank = f.get<uint32_t>();
    if (rank > 16) throw WorkerError("bad_request", path + ": " + name + " has rank above 16");
    std::vector<int64_t> sizes(rank);
    for (auto &s : sizes) s = f.get<int64_t>();
    uint64_t nbytes = f.get<uint64_t>();
    at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(dtype));
    if (nbytes != (uint64_t)t.nbytes())
      throw WorkerError("bad_request", path + ": " + name + " holds " + std::to_string(nbytes) +
                                           " bytes, its shape needs " + std::to_string(t.nbytes()));
    f.read(t.data_ptr(), nbytes);
    out.emplace_back(std::move(name), std::move(t));
  }
  return out;
}

void write_tensors(const std::string &path, const Named &tensors) {
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> fp(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!fp) throw WorkerError("bad_request", path + ": cannot create the tensor file");
  std::FILE *f = fp.get();
  put(f, "MKTENS1\n", 8);
  uint32_t count = (uint32_t)tensors.size();
  put(f, &count, sizeof count);
  for (auto &[name, t] : tensors) {
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    put_str(f, name);
    put_str(f, dtype_name(c.scalar_type()));
    uint32_t rank = (uint32_t)c.dim();
    put(f, &rank, sizeof rank);
    for (int64_t s : c.sizes()) put(f, &s, sizeof s);
    uint64_t nbytes = c.nbytes();
    put(f, &nbytes, sizeof nbytes);
    put(f, c.data_ptr(), nbytes);
  }
}

const Named &cached_tensors(const std::string &path) {
  struct Entry {
    off_t size;
    long long mtime_ns;
    Named tensors;
  };
  static std::map<std::string, Entry> cache;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) throw WorkerError("bad_request", path + ": no such tensor file");
  long long mtime = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
  auto it = cache.find(path);
  if (it != cache.end() && it->second.size == st.st_size && it->second.mtime_ns == mtime) return it->second.tensors;
  if (cache.size() >= 64) cache.clear(); // a bound: one problem's state and trials fit many times
  Entry &e = cache[path];
  e = Entry{st.st_size, mtime, read_tensors(path)};
  return e.tensors;
}

} // namespace mkn
