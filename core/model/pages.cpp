#include "core/model/pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace attnviz {

void release_file_pages(const void* p, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  const uintptr_t a = (begin + page - 1) / page * page, b = end / page * page;  // whole pages inside
  if (b > a) madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
}

}  // namespace attnviz
