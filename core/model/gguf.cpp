#include "core/model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/limits.h"
#include "core/model/pages.h"

namespace attnviz {

namespace {

constexpr uint64_t kMaxDims = 4;  // ggml's GGML_MAX_DIMS

// Smallest encoding of one value of each type, in bytes: what a count is checked against
// before anything is reserved for it.
uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    case GgufValueType::STRING: return 8;  // the length
    case GgufValueType::ARRAY: return 12;  // element type + count
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::F64); }

// Reads little-endian fields from [p, end), checking each read against the end first.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size, const std::string& path) : base_(base), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  // `what` names the field for the error message.
  void need(uint64_t n, const std::string& what) const {
    if (n > left())
      throw fail("truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
                 ", but the file ends after " + std::to_string(left()));
  }
  template <class T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(base_[pos_ + i]) << (8 * i));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what + " length");
    if (n > left())
      throw fail(what + ": string length " + std::to_string(n) + " is longer than the " + std::to_string(left()) +
                 " bytes left in the file");
    std::string s(reinterpret_cast<const char*>(base_ + pos_), n);
    pos_ += n;
    return s;
  }
  // Steps over `n` bytes (checked like a read).
  void skip(uint64_t n, const std::string& what) {
    need(n, what);
    pos_ += n;
  }
  // `count` items of at least `min_bytes` each must fit in what is left of the file.
  void check_count(uint64_t count, uint64_t min_bytes, const std::string& what) const {
    if (count > left() / min_bytes)
      throw fail(what + " " + std::to_string(count) + " is larger than the file could hold (" +
                 std::to_string(left()) + " bytes left, at least " + std::to_string(min_bytes) + " per item)");
  }
  Error fail(const std::string& why) const {
    return Error("GGUF file '" + path_ + "': " + why +
                 "\n  HINT: the file is damaged or not a GGUF model; download or convert it again.");
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

int64_t to_i64(uint64_t v, Cursor& c, const std::string& what) {
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw c.fail(what + ": value " + std::to_string(v) + " is out of range");
  return static_cast<int64_t>(v);
}

// One scalar of type `t` into `v` (i, f or s).
// `what` names the value in messages: "metadata 'KEY'".
void read_scalar(Cursor& c, GgufValueType t, GgufValue& v, const std::string& what) {
  switch (t) {
    case GgufValueType::U8: v.i = c.read<uint8_t>(what); break;
    case GgufValueType::I8: v.i = static_cast<int8_t>(c.read<uint8_t>(what)); break;
    case GgufValueType::U16: v.i = c.read<uint16_t>(what); break;
    case GgufValueType::I16: v.i = static_cast<int16_t>(c.read<uint16_t>(what)); break;
    case GgufValueType::U32: v.i = c.read<uint32_t>(what); break;
    case GgufValueType::I32: v.i = static_cast<int32_t>(c.read<uint32_t>(what)); break;
    case GgufValueType::U64: v.i = to_i64(c.read<uint64_t>(what), c, what); break;
    case GgufValueType::I64: v.i = static_cast<int64_t>(c.read<uint64_t>(what)); break;
    case GgufValueType::BOOL: {
      const uint8_t b = c.read<uint8_t>(what);
      if (b > 1) throw c.fail(what + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
      v.i = b;
      break;
    }
    case GgufValueType::F32: {
      const uint32_t bits = c.read<uint32_t>(what);
      float f;
      std::memcpy(&f, &bits, 4);
      v.f = f;
      break;
    }
    case GgufValueType::F64: {
      const uint64_t bits = c.read<uint64_t>(what);
      std::memcpy(&v.f, &bits, 8);
      break;
    }
    case GgufValueType::STRING: v.s = c.string(what); break;
    case GgufValueType::ARRAY: throw c.fail(what + ": nested arrays are not supported");
  }
}

// With keep_arrays false, an array's elements are stepped over (each string's length still
// checked) and not kept: the value says only the array's element type.
GgufValue read_value(Cursor& c, GgufValueType t, const std::string& key, bool keep_arrays) {
  const std::string what = "metadata '" + key + "'";
  GgufValue v;
  v.type = t;
  if (t != GgufValueType::ARRAY) {
    read_scalar(c, t, v, what);
    return v;
  }
  const uint32_t et = c.read<uint32_t>("metadata '" + key + "' array type");
  if (!valid_value_type(et))
    throw c.fail("metadata '" + key + "': unknown array element type " + std::to_string(et));
  v.array_type = static_cast<GgufValueType>(et);
  if (v.array_type == GgufValueType::ARRAY) throw c.fail("metadata '" + key + "': nested arrays are not supported");
  const uint64_t n = c.read<uint64_t>("metadata '" + key + "' array length");
  c.check_count(n, min_value_bytes(v.array_type), "metadata '" + key + "': array length");
  if (!keep_arrays) {
    if (v.array_type != GgufValueType::STRING) c.skip(n * min_value_bytes(v.array_type), what);  // fits: checked above
    else
      for (uint64_t i = 0; i < n; ++i) c.skip(c.read<uint64_t>(what), what);
    return v;
  }
  GgufValue e;
  if (v.array_type == GgufValueType::STRING) {
    v.strings.reserve(n);
    for (uint64_t i = 0; i < n; ++i) v.strings.push_back(c.string("metadata '" + key + "'[" + std::to_string(i) + "]"));
  } else if (v.array_type == GgufValueType::F32 || v.array_type == GgufValueType::F64) {
    v.floats.reserve(n);
    for (uint64_t i = 0; i < n; ++i) read_scalar(c, v.array_type, e, what), v.floats.push_back(e.f);
  } else {
    v.ints.reserve(n);
    for (uint64_t i = 0; i < n; ++i) read_scalar(c, v.array_type, e, what), v.ints.push_back(e.i);
  }
  return v;
}

}  // namespace

const char* gguf_value_type_name(GgufValueType t) {
  static const char* const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "?";
}

bool GgufValue::is_int() const {
  switch (type) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16: case GgufValueType::I16:
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::U64: case GgufValueType::I64:
    case GgufValueType::BOOL:
      return true;
    default:
      return false;
  }
}
bool GgufValue::is_float() const { return type == GgufValueType::F32 || type == GgufValueType::F64; }

GgufFile GgufFile::open(const std::string& path) { return open(path, true); }
GgufFile GgufFile::open_metadata(const std::string& path) { return open(path, false); }

GgufFile GgufFile::open(const std::string& path, bool full) {
  // Non-blocking: a FIFO named x.gguf is refused below instead of waited on.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("'" + path + "' is not a regular file");
  }
  GgufFile f;
  f.path_ = path;
  f.size_ = static_cast<uint64_t>(st.st_size);
  f.map_ = MappedFile::map(fd, f.size_, path);  // owns fd from here
  f.base_ = f.map_->data();
  Cursor c(f.base_, f.size_, f.path_);

  // --- header
  c.need(4, "the magic");
  if (std::memcmp(f.base_, "GGUF", 4) != 0) {
    std::string seen;
    for (int i = 0; i < 4; ++i) seen += (f.base_[i] >= 32 && f.base_[i] < 127) ? static_cast<char>(f.base_[i]) : '?';
    throw c.fail("wrong magic \"" + seen + "\" (a GGUF file starts with \"GGUF\")");
  }
  c.read<uint32_t>("the magic");
  f.version_ = c.read<uint32_t>("the version");
  if (f.version_ != 2 && f.version_ != 3)
    throw c.fail("unsupported GGUF version " + std::to_string(f.version_) + " (attnviz reads versions 2 and 3)");
  const uint64_t n_tensors = c.read<uint64_t>("the tensor count");
  const uint64_t n_kv = c.read<uint64_t>("the metadata count");
  // A key/value takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at least
  // 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset).
  c.check_count(n_kv, 13, "metadata count");
  c.check_count(n_tensors, 24, "tensor count");

  // --- metadata
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string key = c.string("metadata key #" + std::to_string(k));
    const uint32_t t = c.read<uint32_t>("metadata '" + key + "' type");
    if (!valid_value_type(t)) throw c.fail("metadata '" + key + "': unknown value type " + std::to_string(t));
    GgufValue v = read_value(c, static_cast<GgufValueType>(t), key, full);
    if (!f.kv_.emplace(key, std::move(v)).second) throw c.fail("metadata key '" + key + "' appears twice");
  }
  if (const GgufValue* a = f.find_key("general.alignment")) {
    if (a->type != GgufValueType::U32)
      throw c.fail("metadata 'general.alignment' must be a u32, found " + std::string(gguf_value_type_name(a->type)));
    if (a->i == 0 || (a->i & (a->i - 1)) != 0)
      throw c.fail("metadata 'general.alignment' = " + std::to_string(a->i) + " is not a power of two");
    f.alignment_ = static_cast<uint64_t>(a->i);
  }
  if (!full) return f;

  // --- tensor infos
  f.tensors_.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    t.name = c.string("tensor name #" + std::to_string(k));
    const std::string tn = "tensor '" + t.name + "'";
    const uint32_t n_dims = c.read<uint32_t>(tn + " dimension count");
    if (n_dims == 0 || n_dims > kMaxDims)
      throw c.fail(tn + ": " + std::to_string(n_dims) + " dimensions (1 to " + std::to_string(kMaxDims) + " expected)");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>(tn + " shape");
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(numel, ne, &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw c.fail(tn + ": the element count of its shape overflows 64 bits");
      t.ne.push_back(static_cast<int64_t>(ne));
    }
    t.numel = static_cast<int64_t>(numel);
    const uint32_t type = c.read<uint32_t>(tn + " type");
    const GgmlTypeInfo* info = ggml_type_info(type);
    if (!info)
      throw c.fail(tn + ": unknown tensor type " + std::to_string(type) + " (attnviz reads " + supported_ggml_types() + ")");
    if (!info->supported())
      throw c.fail(tn + ": tensor type " + info->name + " is not supported (attnviz reads " + supported_ggml_types() +
                   ")");
    t.type = static_cast<GgmlType>(type);
    if (t.ne[0] % info->block_elems != 0)
      throw c.fail(tn + ": rows of " + std::to_string(t.ne[0]) + " values are not whole " + info->name + " blocks of " +
                   std::to_string(info->block_elems));
    // Checked: numel is below 2^63, but numel · 4 bytes (F32) need not be.
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel / info->block_elems, static_cast<uint64_t>(info->block_bytes), &nbytes) ||
        nbytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw c.fail(tn + ": its byte count (" + std::to_string(numel) + " elements of " + info->name +
                   ") overflows 64 bits; the file is damaged");
    t.nbytes = nbytes;
    t.offset = c.read<uint64_t>(tn + " offset");
    if (t.offset % f.alignment_ != 0)
      throw c.fail(tn + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                   std::to_string(f.alignment_));
    if (!f.by_name_.emplace(t.name, f.tensors_.size()).second) throw c.fail("tensor '" + t.name + "' appears twice");
    f.tensors_.push_back(std::move(t));
  }

  // --- data: starts at the next multiple of the alignment.
  const uint64_t pos = c.pos();
  f.data_start_ = pos + (f.alignment_ - pos % f.alignment_) % f.alignment_;
  if (f.data_start_ > f.size_ && !f.tensors_.empty())
    throw c.fail("truncated: the data section would start at " + std::to_string(f.data_start_) +
                 ", past the end of the file (" + std::to_string(f.size_) + " bytes)");
  const uint64_t data_size = f.data_start_ <= f.size_ ? f.size_ - f.data_start_ : 0;
  std::vector<const GgufTensorInfo*> order;
  for (const auto& t : f.tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      throw c.fail("tensor '" + t.name + "' (" + std::to_string(t.nbytes) + " bytes at data offset " +
                   std::to_string(t.offset) + ") runs past the end of the file (" + std::to_string(data_size) +
                   " data bytes); the file is truncated");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i - 1]->offset + order[i - 1]->nbytes > order[i]->offset && order[i - 1]->nbytes && order[i]->nbytes)
      throw c.fail("tensors '" + order[i - 1]->name + "' and '" + order[i]->name + "' overlap (bytes " +
                   std::to_string(order[i - 1]->offset) + "+" + std::to_string(order[i - 1]->nbytes) + " and " +
                   std::to_string(order[i]->offset) + "+" + std::to_string(order[i]->nbytes) + ")");
  return f;
}

const GgufValue* GgufFile::find_key(const std::string& key) const {
  const auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find_key(key);
  if (!v)
    throw Error("GGUF file '" + path_ + "': missing metadata key '" + key +
                "'\n  HINT: the file was written for another architecture or by a converter attnviz does not know.");
  if (!v->is_int())
    throw Error("GGUF file '" + path_ + "': metadata '" + key + "' must be an integer, found " +
                gguf_value_type_name(v->type));
  return v->i;
}
int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const {
  return find_key(key) ? get_int(key) : fallback;
}
int GgufFile::get_int_in(const std::string& key, int64_t lo, int64_t hi) const {
  return checked_int(get_int(key), lo, hi, "GGUF file '" + path_ + "': metadata '" + key + "'");
}
int GgufFile::get_int_in(const std::string& key, int64_t lo, int64_t hi, int fallback) const {
  return find_key(key) ? get_int_in(key, lo, hi) : fallback;
}
double GgufFile::get_float(const std::string& key, double fallback) const {
  const GgufValue* v = find_key(key);
  if (!v) return fallback;
  if (v->is_float()) return v->f;
  if (v->is_int() && v->type != GgufValueType::BOOL) return static_cast<double>(v->i);
  throw Error("GGUF file '" + path_ + "': metadata '" + key + "' must be a number, found " +
              gguf_value_type_name(v->type));
}
std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find_key(key);
  if (!v) throw Error("GGUF file '" + path_ + "': missing metadata key '" + key + "'");
  if (v->type != GgufValueType::STRING)
    throw Error("GGUF file '" + path_ + "': metadata '" + key + "' must be a string, found " +
                gguf_value_type_name(v->type));
  return v->s;
}
bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  const GgufValue* v = find_key(key);
  if (!v) return fallback;
  if (v->type != GgufValueType::BOOL)
    throw Error("GGUF file '" + path_ + "': metadata '" + key + "' must be a bool, found " +
                gguf_value_type_name(v->type));
  return v->i != 0;
}

std::vector<float> GgufFile::read_f32(const GgufTensorInfo& t) const {
  std::vector<float> out(static_cast<size_t>(t.numel));
  dequantize(t.type, data(t), t.numel, out.data());
  return out;
}

void GgufFile::release(const GgufTensorInfo& t) const { release_file_pages(data(t), t.nbytes); }

bool looks_like_gguf(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return true;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  char magic[4] = {};
  const bool yes = ::read(fd, magic, 4) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
  ::close(fd);
  return yes;
}

std::unique_ptr<GgufTokenizerData> read_gguf_tokenizer(const GgufFile& f) {
  const GgufValue* tokens = f.find_key("tokenizer.ggml.tokens");
  if (!tokens) return nullptr;
  const std::string where = "GGUF file '" + f.path() + "': ";
  auto array_of = [&](const std::string& key, const GgufValue& v, bool strings) {
    if (v.type != GgufValueType::ARRAY || (strings != (v.array_type == GgufValueType::STRING)))
      throw Error(where + "metadata '" + key + "' must be an array of " + (strings ? "strings" : "numbers"));
  };
  array_of("tokenizer.ggml.tokens", *tokens, true);
  auto t = std::make_unique<GgufTokenizerData>();
  t->model = f.get_string("tokenizer.ggml.model");
  if (f.find_key("tokenizer.ggml.pre")) t->pre = f.get_string("tokenizer.ggml.pre");
  t->tokens = tokens->strings;
  const size_t n = t->tokens.size();
  auto same_length = [&](const std::string& key, size_t m) {
    if (m != n)
      throw Error(where + "metadata '" + key + "' has " + std::to_string(m) + " entries but 'tokenizer.ggml.tokens' has " +
                  std::to_string(n) + "\n  HINT: the tokenizer arrays must have one entry per token.");
  };
  if (const GgufValue* v = f.find_key("tokenizer.ggml.scores")) {
    array_of("tokenizer.ggml.scores", *v, false);
    same_length("tokenizer.ggml.scores", v->array_size());
    for (double s : v->floats) t->scores.push_back(static_cast<float>(s));
    for (int64_t s : v->ints) t->scores.push_back(static_cast<float>(s));
  }
  if (const GgufValue* v = f.find_key("tokenizer.ggml.token_type")) {
    array_of("tokenizer.ggml.token_type", *v, false);
    same_length("tokenizer.ggml.token_type", v->array_size());
    if (!v->floats.empty()) throw Error(where + "metadata 'tokenizer.ggml.token_type' must hold integers");
    for (size_t i = 0; i < v->ints.size(); ++i)
      t->token_type.push_back(checked_int(v->ints[i], std::numeric_limits<int32_t>::min(),
                                          std::numeric_limits<int32_t>::max(),
                                          where + "metadata 'tokenizer.ggml.token_type'[" + std::to_string(i) + "]"));
  }
  if (const GgufValue* v = f.find_key("tokenizer.ggml.merges")) {
    array_of("tokenizer.ggml.merges", *v, true);
    t->merges = v->strings;
  }
  auto id = [&](const char* key) {
    const int64_t i = f.get_int(key, -1);
    if (i != -1 && (i < 0 || static_cast<uint64_t>(i) >= n))
      throw Error(where + "metadata '" + key + "' = " + std::to_string(i) + " is not a token id (the vocabulary has " +
                  std::to_string(n) + " tokens)");
    return i;
  };
  t->bos_id = id("tokenizer.ggml.bos_token_id");
  t->eos_id = id("tokenizer.ggml.eos_token_id");
  t->unk_id = id("tokenizer.ggml.unknown_token_id");
  t->pad_id = id("tokenizer.ggml.padding_token_id");
  auto tri = [&](const char* key) { return f.find_key(key) ? static_cast<int>(f.get_bool(key, false)) : -1; };
  t->add_bos = tri("tokenizer.ggml.add_bos_token");
  t->add_eos = tri("tokenizer.ggml.add_eos_token");
  t->add_space_prefix = tri("tokenizer.ggml.add_space_prefix");
  return t;
}

}  // namespace attnviz
