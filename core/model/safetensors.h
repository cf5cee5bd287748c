// A bounds-checked reader and an atomic writer for the safetensors format:
//   [u64 little-endian N][N bytes of JSON header][data buffer]
// header: {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//          "__metadata__": {"key": "value"}}; offsets are relative to the data buffer.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace attnviz {

class MappedFile;  // core/model/pages.h

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

const char* dtype_name(DType t);
size_t dtype_size(DType t);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range inside the data buffer
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Maps the file and validates the whole header; throws attnviz::Error naming the file and
  // the problem (truncated, offsets out of range or overlapping, unknown dtype, ...).
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(const std::string& name) const;  // nullptr when absent

  // Values as float32 (F32 copied; F16, BF16, F64 converted). Throws for integer dtypes.
  std::vector<float> read_f32(const TensorInfo& t) const;
  // The same into out[0, t.numel()). The file's pages under the tensor are then given back
  // (the mapping stays valid; a second read faults them in again), so loading a model holds
  // the weights and one tensor's worth of the file, not the whole file besides.
  void read_f32_into(const TensorInfo& t, float* out) const;
  // Values as int32 (I32 copied; I64/I16/I8/U8 converted with range check).
  std::vector<int32_t> read_i32(const TensorInfo& t) const;
  // The tensor's bytes where they lie in the mapping, and the mapping (weights used in place hold it).
  const uint8_t* bytes(const TensorInfo& t) const { return data_ + t.begin; }
  const std::shared_ptr<const MappedFile>& mapping() const { return map_; }

 private:
  std::string path_;
  std::shared_ptr<const MappedFile> map_;
  const uint8_t* data_ = nullptr;  // start of the data buffer
  uint64_t data_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// The weights of a model directory: DIR/model.safetensors, or when there is none, the
// shards that DIR/model.safetensors.index.json lists ({"weight_map": {tensor name: file
// name}}), each opened and checked as a SafetensorsFile. A shard named in the index but
// missing, a file name that leaves the directory, a tensor in two shards, or a tensor the
// index places in a shard that lacks it: an Error naming the file.
class SafetensorsSet {
 public:
  static SafetensorsSet open_dir(const std::string& dir);

  const std::string& path() const { return path_; }  // model.safetensors or the index
  bool sharded() const { return files_.size() > 1 || index_; }
  const std::vector<TensorInfo>& tensors() const { return all_; }  // every shard's, in file order
  const TensorInfo* find(const std::string& name) const;           // nullptr when absent
  std::vector<float> read_f32(const TensorInfo& t) const;           // t from find() or tensors()
  void read_f32_into(const TensorInfo& t, float* out) const;        // as SafetensorsFile's
  const SafetensorsFile& file_of(const TensorInfo& t) const;        // the shard holding t
  const std::map<std::string, std::string>& metadata() const { return files_.front().metadata(); }

 private:
  std::string path_;
  bool index_ = false;
  std::vector<SafetensorsFile> files_;
  std::vector<TensorInfo> all_;
  std::map<std::string, size_t> owner_;  // tensor name → index in files_
};

// Collects tensors and writes them in one go, through a temporary file renamed into place,
// so a failure never leaves a partial file behind.
// Tensors are written in the order they were added.
class SafetensorsWriter {
 public:
  // Fills slice `i` of a tensor (its shape[1…] elements) into dst.
  using SliceFn = std::function<void(int64_t i, float* dst)>;

  void add_f32(const std::string& name, std::vector<int64_t> shape, const float* values);  // copied
  // Not copied: `values` must stay valid until write() returns.
  void add_f32_ref(const std::string& name, std::vector<int64_t> shape, const float* values);
  // Produced slice by slice along the first dimension while writing, never held whole.
  void add_f32_generated(const std::string& name, std::vector<int64_t> shape, SliceFn fill);
  void add_i32(const std::string& name, std::vector<int64_t> shape, const int32_t* values);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  void write(const std::string& path) const;  // throws attnviz::Error on I/O failure

  // What was added, in order, for readers other than write() (the Python module's arrays).
  struct Entry {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;  // owned data, or:
    const void* ref = nullptr;   // borrowed data, or:
    SliceFn fill;                // generated data
    size_t size() const;         // bytes in the file
  };
  const std::vector<Entry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  void add_4byte(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* values);
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes `bytes` to `path` atomically (temporary file in the same folder, then rename).
void write_file_atomic(const std::string& path, const std::string& bytes);

// Makes the folder `dir` as a whole or not at all. `write` fills a new temporary folder
// beside it (DIR.tmp-attnviz-PID, passed to it); when `write` returns, that folder is
// renamed to `dir`, or, when `dir` already exists, each file is moved into it (replacing
// one of the same name) and the files named in `stale` are removed from it. When `write`
// throws, or the temporary folder cannot be made or moved, everything written is removed,
// `dir` is left as it was, and the error is thrown on (an Error's message names DIR where
// it named the temporary folder; a data Error naming the folder when the folder failed).
void write_dir_atomic(const std::string& dir, const std::function<void(const std::string& tmp)>& write,
                      const std::vector<std::string>& stale = {});

float half_to_float(uint16_t h);
float bf16_to_float(uint16_t b);

}  // namespace attnviz
