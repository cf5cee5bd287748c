// Readable token labels: what token chips, heatmap axes, next-token lists and exports show.
//
// A label is the text the token adds to the decoded text: byte-level pieces ("Ġthe") and
// SentencePiece pieces ("▁the") come out as " the" (display_piece / the GUI's chip label
// then make the space visible). A character whose UTF-8 bytes are split over several
// tokens (a CJK character in GPT-2, byte-fallback tokens) is shown whole on the token that
// holds its first byte and as "…" on the tokens that only continue it; `bytes` keeps what
// each token really holds, for tooltips. Special tokens are shown as written ("<s>").
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/tokenize/tokenizer.h"

namespace attnviz {

struct TokenLabel {
  std::string text;        // valid UTF-8; "…" for a token that only continues a character
  std::string bytes;       // the bytes this token adds to the text (maybe part of a character)
  bool continues = false;  // holds bytes of a character that began in an earlier token
};

// One label per id, in order; the ids are read together so split characters are found.
std::vector<TokenLabel> token_labels(const Tokenizer& tok, const std::vector<int>& ids);

// The same labels, `chunk` ids at a time (a chunk may be longer: it ends only before a
// token whose bytes begin a character, or a special token, so each chunk's labels equal
// the whole list's). `fn(first, labels)` gets labels of ids[first ...]. Memory stays a
// chunk's, whatever the number of ids (tokenize --json streams through this).
void for_each_label_chunk(const Tokenizer& tok, const std::vector<int>& ids, size_t chunk,
                          const std::function<void(size_t first, const std::vector<TokenLabel>& labels)>& fn);

// "E4 B8 AD" for tooltips.
std::string hex_bytes(const std::string& bytes);

}  // namespace attnviz
