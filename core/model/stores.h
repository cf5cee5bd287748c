// The model stores other tools leave on the disk, found without configuration, and the
// model names that point into them (every --model takes them, through resolve_model_dir):
//
//   ollama    $OLLAMA_MODELS, else ~/.ollama/models, else /usr/share/ollama/.ollama/models
//             (the first that exists): manifests/REGISTRY/NAMESPACE/NAME/TAG (JSON) whose
//             layer of mediaType application/vnd.ollama.image.model is blobs/sha256-HEX.
//             Named as Ollama names them: "gemma3:4b" (registry.ollama.ai/library),
//             "ns/name:tag" (another namespace), "registry/ns/name:tag" (another registry).
//   hf        $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
//             ~/.cache/huggingface/hub: models--ORG--NAME/refs/main holds a commit,
//             snapshots/COMMIT/ the files (often symlinks into blobs/). Named "ORG/NAME"; a
//             snapshot without config.json gives one entry per .gguf ("ORG/NAME/FILE.gguf").
//   lmstudio  ~/.lmstudio/models/PUBLISHER/REPO/*.gguf and ~/.cache/lm-studio/models (the
//             same layout): named "PUBLISHER/REPO/FILE.gguf".
//   llamacpp  $LLAMA_CACHE, else ~/.cache/llama.cpp: *.gguf, named by the file name.
// ~ is $HOME. Names: "ollama:NAME[:TAG]" (tag "latest" by default) and
// "hf:ORG/NAME[@REVISION]" (a ref under refs/ or a commit under snapshots/; "main" by default).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attnviz {

// One model found in a store. Everything comes from headers: a GGUF file's metadata (not
// its tensors), a config.json, file sizes.
struct StoredModel {
  std::string source;        // "ollama", "hf", "lmstudio" or "llamacpp"
  std::string name;          // as the store's own tool names it (see above)
  std::string path;          // the GGUF file or the snapshot directory (the store's root when the store is unreadable)
  std::string architecture;  // GGUF general.architecture, or config.json's model_type (text_config's when multimodal)
  std::string file_type;     // GGUF general.file_type as llama.cpp names it ("Q4_K_M"), or config.json's torch_dtype
  uint64_t bytes = 0;        // the GGUF file's size, or the sum of the snapshot's weight files
  bool opens = false;        // whether attnviz can load it, as far as the headers tell
  std::string reason;        // why not, in a few words ("" when it opens)
};

// Every model in every store that exists, sorted by source then name. Never throws: an
// unreadable store, a broken manifest, a missing blob, a symlink loop, a FIFO or device, a
// name --model would refuse, a symlink leading out of its store each become an entry with
// opens = false and the reason. A folder reached again through a symlink is walked once; a
// folder of more than 10,000 entries, or a store of more than 20,000, is cut with an entry
// (name "(store)") saying so.
std::vector<StoredModel> list_stored_models();

// llama.cpp's name for a GGUF general.file_type (LLAMA_FTYPE_MOSTLY_*): 15 → "Q4_K_M";
// "type N" for a number it does not know.
std::string gguf_file_type_name(int64_t file_type);

// What --model takes to open `m`: "ollama:NAME", "hf:ORG/NAME" for a snapshot's model
// directory, else its path (a Hugging Face snapshot's GGUF files, LM Studio, llama.cpp).
// Every entry listed as opening opens with it.
std::string stored_model_spec(const StoredModel& m);

// Whether `spec` is a store name ("ollama:…" or "hf:…").
bool is_store_name(const std::string& spec);

// A store name → the path it names: the Ollama model blob (a GGUF file), or the Hugging Face
// snapshot directory (its only .gguf file when it has no config.json). Throws attnviz::Error
// saying what was looked for, where, and what is there instead (with a hint).
std::string resolve_store_name(const std::string& spec);

}  // namespace attnviz
