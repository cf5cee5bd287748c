// Read-only file mappings that weights are read from, and giving their pages back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace attnviz {

// A regular file mapped read-only (private). Keeps the file open, so that a model whose
// weights stay in the mapping can tell, before it reads them, that the file has been
// truncated meanwhile (a read past the file's new end would raise SIGBUS and kill the process).
class MappedFile {
 public:
  // Maps `size` bytes of the open file `fd` (nothing for 0) and takes ownership of fd; an
  // Error naming `path` when mmap fails (fd is closed then too).
  static std::shared_ptr<const MappedFile> map(int fd, uint64_t size, const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // An Error naming the file when it is now shorter than when it was mapped.
  void check_size() const;

 private:
  MappedFile() = default;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

// Drops the whole pages inside [p, p + bytes) of a private read-only file mapping from the
// process (madvise MADV_DONTNEED). Nothing is lost: a later read faults them in from the
// file again. The loaders (safetensors, GGUF) call it after converting each tensor, so a
// model being loaded holds its float32 weights and one tensor of the file, not both whole.
void release_file_pages(const void* p, size_t bytes);

}  // namespace attnviz
