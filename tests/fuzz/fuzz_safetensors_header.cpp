// A whole safetensors file: 8-byte length, JSON header, data. Opened like a model file,
// then every small tensor read as float32 and as int32.
#include <unistd.h>

#include <cstdio>

#include "core/error.h"
#include "core/model/safetensors.h"
#include "tests/fuzz/fuzz_target.h"

ATTNVIZ_FUZZ_TARGET(safetensors_header) {
  const std::string path = attnviz::fuzz::write_scratch_file("input.safetensors", data, size);
  if (path.empty()) return;
  try {
    const auto st = attnviz::SafetensorsFile::open(path);
    for (const auto& t : st.tensors()) {
      if (t.numel() > (1 << 20)) continue;
      try {
        st.read_f32(t);
      } catch (const attnviz::Error&) {
      }
      try {
        st.read_i32(t);
      } catch (const attnviz::Error&) {
      }
    }
  } catch (const attnviz::Error&) {
  }
}
