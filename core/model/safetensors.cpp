#include "core/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/model/pages.h"

namespace attnviz {

namespace {

struct DTypeName {
  DType t;
  const char* name;
  size_t size;
};
constexpr DTypeName kDTypes[] = {
    {DType::F64, "F64", 8}, {DType::F32, "F32", 4}, {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2}, {DType::I64, "I64", 8}, {DType::I32, "I32", 4},
    {DType::I16, "I16", 2}, {DType::I8, "I8", 1},   {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1},
};

bool parse_dtype(const std::string& s, DType* out) {
  for (const auto& d : kDTypes)
    if (s == d.name) { *out = d.t; return true; }
  return false;
}

}  // namespace

const char* dtype_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.t == t) return d.name;
  return "?";
}
size_t dtype_size(DType t) {
  for (const auto& d : kDTypes)
    if (d.t == t) return d.size;
  return 0;
}

int64_t TensorInfo::numel() const { return checked_product(shape, "tensor '" + excerpt(name) + "'"); }

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);              // subnormal
  else if (exp == 31) v = mant ? NAN : INFINITY;                           // inf / nan
  else v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// ---------------------------------------------------------------- reading


SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto fail = [&](const std::string& why) -> Error {
    return Error("safetensors file '" + excerpt(path, kPathExcerptBytes) + "': " + why +
                 "\n  HINT: the file is not a valid safetensors file; re-export or re-download it.");
  };
  // Non-blocking open: a FIFO or device is refused here instead of blocking the reader.
  int fd = open_regular_file(path, "safetensors file");
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error("cannot read safetensors file '" + excerpt(path, kPathExcerptBytes) + "': " + std::strerror(errno));
  }
  SafetensorsFile f;
  f.path_ = path;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  f.map_ = MappedFile::map(fd, size, path);  // owns fd from here
  const uint8_t* bytes = f.map_->data();

  if (size < 8) throw fail("truncated: " + std::to_string(size) + " bytes, fewer than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > size - 8)
    throw fail("header length " + std::to_string(n) + " runs past the end of the file (" +
               std::to_string(size) + " bytes); the file is truncated or corrupt");
  if (std::memchr(bytes + 8, 0, n) != nullptr)
    throw fail("header holds a NUL byte; a JSON header never does (junk after the header JSON?)");
  const nlohmann::json header =
      parse_json(std::string_view(reinterpret_cast<const char*>(bytes + 8), n),
                 "safetensors file '" + excerpt(path, kPathExcerptBytes) + "': header",
                 "\n  HINT: the file is not a valid safetensors file; re-export or re-download it.");
  if (!header.is_object()) throw fail("header is not a JSON object");
  f.data_ = bytes + 8 + n;
  f.data_size_ = size - 8 - n;

  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw fail("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw fail("__metadata__ value '" + excerpt(m.key()) + "' is not a string");
        f.metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const auto& j = *it;
    TensorInfo t;
    t.name = it.key();
    const std::string where = "tensor '" + excerpt(t.name) + "'";
    if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") || !j.contains("data_offsets"))
      throw fail(where + " needs dtype, shape and data_offsets");
    if (!j["dtype"].is_string() || !parse_dtype(j["dtype"].get<std::string>(), &t.dtype))
      throw fail(where + " has unknown dtype " + json_excerpt(j["dtype"]) +
                 " (supported: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)");
    if (!j["shape"].is_array()) throw fail(where + ": shape is not an array");
    for (const auto& d : j["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) throw fail(where + ": bad dimension " + json_excerpt(d));
      t.shape.push_back(d.get<int64_t>());
    }
    const auto& off = j["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw fail(where + ": data_offsets must be [begin, end]");
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.begin > t.end) throw fail(where + ": data_offsets begin > end");
    if (t.end > f.data_size_)
      throw fail(where + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                 ") run past the data buffer (" + std::to_string(f.data_size_) + " bytes); the file is truncated");
    // overflow-checked element and byte counts
    int64_t numel = 0, nbytes = 0;
    try {
      numel = checked_product(t.shape, where + ": shape");
      nbytes = checked_product({numel, static_cast<int64_t>(dtype_size(t.dtype))}, where + ": shape");
    } catch (const Error& e) {
      throw fail(e.what());
    }
    if (static_cast<uint64_t>(nbytes) != t.end - t.begin)
      throw fail(where + ": shape " + shape_str_of(t.shape) + " of " + dtype_name(t.dtype) + " needs " +
                 std::to_string(nbytes) + " bytes but data_offsets give " + std::to_string(t.end - t.begin));
    f.tensors_.push_back(std::move(t));
  }
  // No two tensors may share bytes.
  std::vector<const TensorInfo*> by_begin;
  for (const auto& t : f.tensors_)
    if (t.end > t.begin) by_begin.push_back(&t);
  std::sort(by_begin.begin(), by_begin.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_begin.size(); ++i)
    if (by_begin[i]->begin < by_begin[i - 1]->end)
      throw fail("tensors '" + excerpt(by_begin[i - 1]->name) + "' and '" + excerpt(by_begin[i]->name) +
                 "' overlap in the data buffer");
  return f;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<float> SafetensorsFile::read_f32(const TensorInfo& t) const {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  read_f32_into(t, out.data());
  return out;
}

void SafetensorsFile::read_f32_into(const TensorInfo& t, float* out) const {
  const int64_t n = t.numel();
  const uint8_t* p = data_ + t.begin;
  switch (t.dtype) {
    case DType::F32: if (n) std::memcpy(out, p, n * 4); break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, p + 2 * i, 2); out[i] = half_to_float(h); }
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, p + 2 * i, 2); out[i] = bf16_to_float(h); }
      break;
    case DType::F64:
      for (int64_t i = 0; i < n; ++i) { double d; std::memcpy(&d, p + 8 * i, 8); out[i] = static_cast<float>(d); }
      break;
    default:
      throw Error("tensor '" + t.name + "' in '" + path_ + "' has dtype " + dtype_name(t.dtype) +
                  "; a floating-point tensor (F32, F16, BF16) was expected");
  }
  release_file_pages(p, static_cast<size_t>(t.end - t.begin));
}

std::vector<int32_t> SafetensorsFile::read_i32(const TensorInfo& t) const {
  const int64_t n = t.numel();
  std::vector<int32_t> out(static_cast<size_t>(n));
  const uint8_t* p = data_ + t.begin;
  for (int64_t i = 0; i < n; ++i) {
    int64_t v;
    switch (t.dtype) {
      case DType::I32: { int32_t x; std::memcpy(&x, p + 4 * i, 4); v = x; break; }
      case DType::I64: { std::memcpy(&v, p + 8 * i, 8); break; }
      case DType::I16: { int16_t x; std::memcpy(&x, p + 2 * i, 2); v = x; break; }
      case DType::I8: v = static_cast<int8_t>(p[i]); break;
      case DType::U8: v = p[i]; break;
      default:
        throw Error("tensor '" + t.name + "' in '" + path_ + "' has dtype " + dtype_name(t.dtype) +
                    "; an integer tensor was expected");
    }
    if (v < INT32_MIN || v > INT32_MAX) throw Error("tensor '" + t.name + "': value out of int32 range");
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

// ---------------------------------------------------------------- writing

namespace {
// Writes to `path` atomically (temporary file, rename): `body` writes the content and
// returns false on a write error.
void write_atomic(const std::string& path, const std::function<bool(FILE*)>& body);

int64_t element_count(const std::vector<int64_t>& shape) { return checked_product(shape, "tensor to write"); }
}  // namespace

size_t SafetensorsWriter::Entry::size() const {
  return ref || fill ? static_cast<size_t>(element_count(shape)) * 4 : bytes.size();
}

void SafetensorsWriter::add_f32_ref(const std::string& name, std::vector<int64_t> shape, const float* values) {
  Entry e;
  e.name = name, e.dtype = DType::F32, e.shape = std::move(shape);
  e.ref = values;
  entries_.push_back(std::move(e));
}

void SafetensorsWriter::add_f32_generated(const std::string& name, std::vector<int64_t> shape, SliceFn fill) {
  if (shape.empty()) throw Error("add_f32_generated: '" + name + "' needs at least one dimension");
  Entry e;
  e.name = name, e.dtype = DType::F32, e.shape = std::move(shape);
  e.fill = std::move(fill);
  entries_.push_back(std::move(e));
}

// A copy of the n = numel(shape) 4-byte values at `values`.
void SafetensorsWriter::add_4byte(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* values) {
  Entry e;
  e.name = name, e.dtype = dtype, e.shape = std::move(shape);
  const int64_t n = checked_product({element_count(e.shape), 4}, "tensor '" + excerpt(name) + "'") / 4;
  e.bytes.resize(static_cast<size_t>(n) * 4);
  if (n) std::memcpy(e.bytes.data(), values, e.bytes.size());
  entries_.push_back(std::move(e));
}

void SafetensorsWriter::add_f32(const std::string& name, std::vector<int64_t> shape, const float* values) {
  add_4byte(name, DType::F32, std::move(shape), values);
}

void SafetensorsWriter::add_i32(const std::string& name, std::vector<int64_t> shape, const int32_t* values) {
  add_4byte(name, DType::I32, std::move(shape), values);
}

void SafetensorsWriter::write(const std::string& path) const {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& e : entries_) {
    header[e.name] = {{"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.size()}}};
    offset += e.size();
  }
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h.push_back(' ');  // keep the data buffer 8-byte aligned
  std::string head;  // the 8-byte length and the header; the tensors are streamed after it
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) head.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  head += h;
  // Streamed to the file tensor by tensor rather than assembled in one string first: a
  // dump of gpt2-small at T=1024 is 2.6 GB, and a third copy of it in memory is not needed.
  write_atomic(path, [&](FILE* fp) {
    auto put = [fp](const void* data, size_t size) { return size == 0 || std::fwrite(data, 1, size, fp) == size; };
    if (!put(head.data(), head.size())) return false;
    std::vector<float> slice;
    for (const auto& e : entries_) {
      if (e.fill) {
        const int64_t n = e.shape[0], per = element_count(e.shape) / std::max<int64_t>(n, 1);
        slice.resize(static_cast<size_t>(per));
        for (int64_t i = 0; i < n; ++i) {
          e.fill(i, slice.data());
          if (!put(slice.data(), slice.size() * 4)) return false;
        }
      } else if (!put(e.ref ? e.ref : e.bytes.data(), e.size())) {
        return false;
      }
    }
    return true;
  });
}

namespace {
// Why a write failed, with a hint for the limits a user can do something about.
std::string write_failure(const std::string& path, int err) {
  std::string m = "cannot write '" + excerpt(path, kPathExcerptBytes) + "': " + std::strerror(err) + " (nothing was written)";
  if (err == EFBIG)
    m += "\n  HINT: the file is larger than the file-size limit allows (ulimit -f, or the file system's maximum); "
         "raise the limit or write less (a shorter text, fewer stages).";
  else if (err == ENOSPC || err == EDQUOT)
    m += "\n  HINT: the disk or your quota is full; free some space or choose another --out path.";
  return m;
}

void write_atomic(const std::string& path, const std::function<bool(FILE*)>& body) {
  const std::string tmp = path + ".tmp-attnviz";
  FILE* fp = std::fopen(tmp.c_str(), "wb");
  if (!fp)
    throw Error("cannot write '" + excerpt(path, kPathExcerptBytes) + "': " + std::strerror(errno) +
                "\n  HINT: check that the folder exists and is writable, or choose another --out path.");
  bool ok = false;
  try {
    errno = 0;
    ok = body(fp);
  } catch (...) {
    std::fclose(fp);
    std::remove(tmp.c_str());
    throw;
  }
  int err = ok ? 0 : errno;  // the failed fwrite's reason, before fclose can change errno
  const bool closed = std::fclose(fp) == 0;
  if (ok && !closed) err = errno;  // the buffered rest failed to reach the file
  if (!ok || !closed) {
    std::remove(tmp.c_str());
    throw Error(write_failure(path, err ? err : EIO));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    throw Error(write_failure(path, err));
  }
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  write_atomic(path, [&](FILE* fp) { return bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), fp) == bytes.size(); });
}

void write_dir_atomic(const std::string& dir, const std::function<void(const std::string& tmp)>& write,
                      const std::vector<std::string>& stale) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string base = dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  if (fs::exists(base, ec) && !fs::is_directory(base, ec))
    throw Error("cannot create '" + excerpt(base, kPathExcerptBytes) + "': it exists and is not a folder" +
                "\n  HINT: choose another --out path.");
  const std::string tmp = base + ".tmp-attnviz-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);  // a leftover of an earlier run killed mid-way
  const fs::path parent = fs::path(base).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec || !fs::create_directory(tmp, ec) || ec)
    throw Error("cannot create '" + excerpt(tmp, kPathExcerptBytes) + "': " + (ec ? ec.message() : "it exists") +
                "\n  HINT: check that the folder above --out exists and is writable, or choose another --out path.");
  try {
    write(tmp);
    if (!fs::exists(base, ec)) {
      fs::rename(tmp, base);  // the whole folder at once
      return;
    }
    for (const auto& e : fs::directory_iterator(tmp)) fs::rename(e.path(), fs::path(base) / e.path().filename());
    for (const std::string& name : stale) fs::remove(fs::path(base) / name, ec);
    fs::remove(tmp, ec);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw Error("cannot write '" + excerpt(base, kPathExcerptBytes) + "': " + e.code().message() + " (nothing was written)");
  } catch (const Error& e) {  // a file's error names the path the user gave, not the temporary one
    fs::remove_all(tmp, ec);
    std::string m = e.what();
    for (size_t at = m.find(tmp); at != std::string::npos; at = m.find(tmp, at + base.size())) m.replace(at, tmp.size(), base);
    throw Error(m, e.kind);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

SafetensorsSet SafetensorsSet::open_dir(const std::string& dir) {
  SafetensorsSet set;
  const std::string single = dir + "/model.safetensors", index = dir + "/model.safetensors.index.json";
  struct stat st {};
  if (stat(single.c_str(), &st) == 0 || stat(index.c_str(), &st) != 0) {  // no index: the one file (or its error)
    set.path_ = single;
    set.files_.push_back(SafetensorsFile::open(single));
  } else {
    set.path_ = index;
    set.index_ = true;
    const std::string where = excerpt(index, kPathExcerptBytes);
    const nlohmann::json j = read_json_file(index, "model.safetensors.index.json");
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty())
      throw Error(where + ": no \"weight_map\" object (tensor name → shard file)\n  HINT: the index Hugging Face "
                  "writes beside sharded weights; re-download it.");
    std::map<std::string, std::string> wanted;  // tensor → shard, as the index says
    std::vector<std::string> shards;            // in first-named order
    std::unordered_set<std::string> named;      // the same shards, looked up in O(1)
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string())
        throw Error(where + ": weight_map[\"" + excerpt(name) + "\"] must be a file name, found " + json_excerpt(file));
      const std::string f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." || f == "..")
        throw Error(where + ": shard '" + excerpt(f) + "' is not a plain file name in the model directory");
      wanted[name] = f;
      if (named.insert(f).second) {
        shards.push_back(f);
        if (static_cast<int64_t>(shards.size()) > kMaxShards)
          throw Error(where + " names more than " + std::to_string(kMaxShards) +
                      " shard files, more than attnviz opens\n  HINT: the index is damaged; re-download it.");
      }
    }
    std::map<std::string, std::string> seen;  // tensor → the shard that holds it
    for (const std::string& f : shards) {
      const std::string path = dir + "/" + f;
      if (stat(path.c_str(), &st) != 0)
        throw Error(where + " names shard '" + excerpt(f) + "', which is not in '" + excerpt(dir, kPathExcerptBytes) +
                    "'\n  HINT: download every model-XXXXX-of-YYYYY.safetensors file the index lists.");
      set.files_.push_back(SafetensorsFile::open(path));
      for (const TensorInfo& t : set.files_.back().tensors()) {
        if (auto it = seen.find(t.name); it != seen.end())
          throw Error("tensor '" + excerpt(t.name) + "' is in two shards, '" + excerpt(it->second) + "' and '" +
                      excerpt(f) + "'\n  HINT: the shards do not belong together; re-download them.");
        seen[t.name] = f;
      }
    }
    for (const auto& [name, f] : wanted)
      if (auto it = seen.find(name); it == seen.end() || it->second != f)
        throw Error(where + " places tensor '" + excerpt(name) + "' in '" + excerpt(f) + "', " +
                    (it == seen.end() ? std::string("but no shard holds it") : "but it is in '" + excerpt(it->second) + "'"));
  }
  for (size_t i = 0; i < set.files_.size(); ++i)
    for (const TensorInfo& t : set.files_[i].tensors()) {
      set.owner_[t.name] = i;
      set.all_.push_back(t);
    }
  return set;
}

const TensorInfo* SafetensorsSet::find(const std::string& name) const {
  const auto it = owner_.find(name);
  return it == owner_.end() ? nullptr : files_[it->second].find(name);
}

std::vector<float> SafetensorsSet::read_f32(const TensorInfo& t) const {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  read_f32_into(t, out.data());
  return out;
}

const SafetensorsFile& SafetensorsSet::file_of(const TensorInfo& t) const {
  if (!find(t.name)) throw Error(path_ + ": no tensor '" + excerpt(t.name) + "'");
  return files_[owner_.at(t.name)];
}

void SafetensorsSet::read_f32_into(const TensorInfo& t, float* out) const {
  const TensorInfo* own = find(t.name);
  if (!own) throw Error(path_ + ": no tensor '" + excerpt(t.name) + "'");
  files_[owner_.at(t.name)].read_f32_into(*own, out);
}

}  // namespace attnviz
