// Where attnviz finds its data (built-in models, shaders): installed under
// PREFIX/share/attnviz, or the source tree when run from the build tree.
#pragma once
#include <string>
#include <vector>

namespace attnviz {

// Data directories to search, in order: $ATTNVIZ_DATA_DIR, <exe>/../share/attnviz,
// the source tree this binary was built from.
std::vector<std::string> data_dirs();
// Adds a folder to search after $ATTNVIZ_DATA_DIR (the Python module's share/attnviz, found
// beside its install prefix: python3 is not installed where attnviz is).
void add_data_dir(const std::string& dir);

// "builtin:NAME" → the built-in model's directory (error listing the choices when NAME is
// unknown); "ollama:NAME[:TAG]" and "hf:ORG/NAME[@REVISION]" → the file or directory they
// name in the local stores (core/model/stores.h); anything else is returned as is.
std::string resolve_model_dir(const std::string& spec);

// Names of the built-in models that can be found.
std::vector<std::string> builtin_models();

// The model's sample text: DIR/sample.txt (at most 64 kB of UTF-8) where `model_dir` is a
// directory that has one (every built-in model does); "" otherwise.
std::string sample_text(const std::string& model_dir);

}  // namespace attnviz
