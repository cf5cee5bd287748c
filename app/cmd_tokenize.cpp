// attnviz-cli tokenize: text → ids and readable pieces with a model's tokenizer or a
// tokenizer file, as Hugging Face's encode(text, add_special_tokens) gives them.
#include <sys/stat.h>

#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/commands.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/limits.h"
#include "core/model/config.h"
#include "core/model/gguf.h"
#include "core/model/paths.h"
#include "core/tokenize/hf_tokenizer.h"
#include "core/tokenize/labels.h"

namespace attnviz {

namespace {

// The tokenizer in a GGUF file's metadata, read without loading any weights (so a
// vocabulary-only GGUF file works too).
std::unique_ptr<Tokenizer> gguf_file_tokenizer(const std::string& spec) {
  const GgufFile f = GgufFile::open(spec);
  const auto data = read_gguf_tokenizer(f);
  if (!data)
    throw Error("GGUF file '" + spec +
                "' has no tokenizer (tokenizer.ggml.tokens)\n  HINT: pass a tokenizer file with --tokenizer FILE.");
  if (const std::string why = gguf_tokenizer_unsupported(*data); !why.empty())
    throw Error("model '" + spec + "': text cannot be encoded: " + why +
                "\n  HINT: pass token ids with --tokens 1,2,3 to the other subcommands.");
  return make_gguf_tokenizer(*data, "GGUF file '" + spec + "'");
}

// The tokenizer of a model directory (or builtin:NAME), checked against its config.json, or
// the one in a GGUF file's metadata.
std::unique_ptr<Tokenizer> model_tokenizer(const std::string& spec, std::string* file) {
  const std::string dir = resolve_model_dir(spec);  // a store name may name a GGUF file
  if (looks_like_gguf(dir)) {
    *file = dir;
    return gguf_file_tokenizer(dir);
  }
  *file = tokenizer_file_in(dir);
  if (file->empty())
    throw Error("model '" + spec + "' has no tokenizer.json or tokenizer.model in " + dir +
                "\n  HINT: pass a tokenizer file with --tokenizer FILE.");
  auto tok = load_tokenizer_file(*file);
  struct stat st {};
  if (stat((dir + "/config.json").c_str(), &st) == 0) {
    // Bounded, non-blocking (a FIFO is refused, not waited on), no NUL, nesting limited.
    const std::string cfg = dir + "/config.json";
    check_tokenizer_fits(*tok, parse_config(read_json_file(cfg, "config.json"), cfg).vocab_size, *file);
  }
  return tok;
}

}  // namespace

Action add_tokenize_command(CLI::App& app, Io& io) {
  struct Opts {
    std::string model, tokenizer, text, text_file;
    bool no_special = false, json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      app.add_subcommand("tokenize", "Text to token ids and readable pieces, as Hugging Face's tokenizer gives them");
  auto* m = cmd->add_option(
      "--model", o->model,
      "model directory, FILE.gguf, builtin:NAME, ollama:NAME[:TAG] or hf:ORG/NAME[@REV] (its tokenizer.json, tokenizer.model or GGUF tokenizer)");
  auto* t = cmd->add_option("--tokenizer", o->tokenizer,
                            "a tokenizer.json (Hugging Face or attnviz's char format), tokenizer.model (SentencePiece) "
                            "or FILE.gguf (its tokenizer metadata)");
  m->excludes(t);
  auto* tx = cmd->add_option("--text", o->text, "the text");
  auto* tf = cmd->add_option("--text-file", o->text_file, "a UTF-8 text file, read byte for byte");
  tx->excludes(tf);
  cmd->add_flag("--no-special", o->no_special, "do not add BOS/EOS (add_special_tokens=False)");
  cmd->add_flag("--json", o->json, "print one JSON object: ids, pieces, bytes, tokenizer, kind");
  return [o, &io, m, t, tx, tf] {
    if (!m->count() && !t->count())
      throw Error("give the tokenizer with --model M or --tokenizer FILE", ErrorKind::Usage);
    if (!tx->count() && !tf->count()) throw Error("give the text with --text S or --text-file F", ErrorKind::Usage);
    std::string file = o->tokenizer;
    const std::unique_ptr<Tokenizer> tok = m->count()                      ? model_tokenizer(o->model, &file)
                                           : looks_like_gguf(o->tokenizer) ? gguf_file_tokenizer(o->tokenizer)
                                                                           : load_tokenizer_file(o->tokenizer);
    std::string text = o->text;
    if (tf->count()) text = read_regular_file(o->text_file, kMaxTextBytes, "--text-file");  // bounded, never blocks
    const std::vector<int> ids = tok->encode_with(text, !o->no_special);
    if (o->json) {
      // Streamed: one array after the other, the labels a chunk at a time, so memory stays
      // the text, the ids and a chunk (not a JSON tree of every piece).
      std::string().swap(text);
      auto str = [](const std::string& s) { return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
      io.out << "{\"ids\":[";
      for (size_t i = 0; i < ids.size(); ++i) io.out << (i ? "," : "") << ids[i];
      const auto* hf = dynamic_cast<const HfTokenizer*>(tok.get());
      for (const char* key : {"pieces", "bytes"}) {
        io.out << "],\"" << key << "\":[";
        for_each_label_chunk(*tok, ids, 4096, [&](size_t first, const std::vector<TokenLabel>& labels) {
          for (size_t k = 0; k < labels.size(); ++k)
            io.out << (first + k ? "," : "") << str(key[0] == 'p' ? display_piece(labels[k].text) : hex_bytes(labels[k].bytes));
        });
      }
      io.out << "]";
      if (hf) {
        io.out << ",\"tokens\":[";  // vocabulary entries, as Hugging Face's get_tokens()
        for (size_t i = 0; i < ids.size(); ++i) io.out << (i ? "," : "") << str(hf->raw_token(ids[i]));
        io.out << "]";
      }
      io.out << ",\"count\":" << ids.size() << ",\"tokenizer\":" << str(file) << ",\"kind\":" << str(tok->kind()) << "}\n";
      return;
    }
    const std::vector<TokenLabel> labels = token_labels(*tok, ids);
    io.out << ids.size() << " tokens (" << tok->kind() << ", " << file << ")\n";
    io.out << "ids:";
    for (int id : ids) io.out << " " << id;
    io.out << "\n";
    for (size_t i = 0; i < ids.size(); ++i) {
      io.out << std::setw(6) << i << std::setw(9) << ids[i] << "  " << display_piece(labels[i].text);
      if (labels[i].continues || labels[i].bytes != labels[i].text)
        io.out << "   [" << hex_bytes(labels[i].bytes) << "]";
      io.out << "\n";
    }
  };
}

}  // namespace attnviz
