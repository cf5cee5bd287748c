#include "core/model/pages.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/limits.h"

namespace attnviz {

std::shared_ptr<const MappedFile> MappedFile::map(int fd, uint64_t size, const std::string& path) {
  std::shared_ptr<MappedFile> m(new MappedFile);
  m->fd_ = fd;
  m->path_ = path;
  if (size > 0) {
    void* a = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (a == MAP_FAILED) throw Error("cannot map '" + excerpt(path, kPathExcerptBytes) + "': " + std::strerror(errno));
    m->data_ = static_cast<const uint8_t*>(a);
    m->size_ = size;
  }
  return m;
}

MappedFile::~MappedFile() {
  if (data_ && size_) munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

void MappedFile::check_size() const {
  struct stat st {};
  if (fd_ < 0 || fstat(fd_, &st) != 0) return;
  if (static_cast<uint64_t>(st.st_size) < size_)
    throw Error("the model file '" + excerpt(path_, kPathExcerptBytes) + "' has been truncated while in use (" +
                std::to_string(st.st_size) + " bytes, was " + std::to_string(size_) +
                "); its weights can no longer be read\n  HINT: open the model again once the file is complete.");
}

void release_file_pages(const void* p, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  const uintptr_t a = (begin + page - 1) / page * page, b = end / page * page;  // whole pages inside
  if (b > a) madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
}

}  // namespace attnviz
