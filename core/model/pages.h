// Giving back the pages of a read-only file mapping once a tensor has been read from it.
#pragma once
#include <cstddef>

namespace attnviz {

// Drops the whole pages inside [p, p + bytes) of a private read-only file mapping from the
// process (madvise MADV_DONTNEED). Nothing is lost: a later read faults them in from the
// file again. The loaders (safetensors, GGUF) call it after converting each tensor, so a
// model being loaded holds its float32 weights and one tensor of the file, not both whole.
void release_file_pages(const void* p, size_t bytes);

}  // namespace attnviz
