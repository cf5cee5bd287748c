// A model.safetensors.index.json beside two small shards (a.safetensors holds "x",
// b.safetensors holds "y"): opened as a sharded model's weights, every tensor then read.
#include <filesystem>

#include "core/error.h"
#include "core/model/safetensors.h"
#include "tests/fuzz/fuzz_target.h"

namespace {
const std::string& shard_dir() {
  static const std::string dir = [] {
    const std::string d = attnviz::fuzz::scratch_dir() + "/shards";
    std::filesystem::create_directories(d);
    const float v[4] = {1, 2, 3, 4};
    for (const char* name : {"a", "b"}) {
      attnviz::SafetensorsWriter w;
      w.add_f32(name[0] == 'a' ? "x" : "y", {2, 2}, v);
      w.write(d + "/" + name + ".safetensors");
    }
    return d;
  }();
  return dir;
}
}  // namespace

ATTNVIZ_FUZZ_TARGET(shard_index) {
  const std::string& dir = shard_dir();
  if (FILE* f = std::fopen((dir + "/model.safetensors.index.json").c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return;
  }
  try {
    const auto set = attnviz::SafetensorsSet::open_dir(dir);
    for (const auto& t : set.tensors()) (void)set.read_f32(t);
  } catch (const attnviz::Error&) {
  }
}
