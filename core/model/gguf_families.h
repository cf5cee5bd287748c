// The GGUF metadata helpers that the families' own readers (core/model/families/, reached
// through FamilyTraits::gguf_read) share with gguf_model.cpp.
#pragma once
#include <string>

#include "core/model/config.h"
#include "core/model/gguf.h"

namespace attnviz {

// A positive metadata integer that fits an int (fallback < 0: the key is required).
int gguf_positive(const GgufFile& f, const std::string& key, int64_t fallback = -1);
// A positive finite metadata number (`fallback` when absent); `what` describes it in the error.
float gguf_positive_float(const GgufFile& f, const std::string& key, float fallback,
                          const char* what = "a positive number");

// The vocabulary: {arch}.vocab_size when given, else the token embedding's rows.
int gguf_vocab_size(const GgufFile& f, const std::string& arch);

}  // namespace attnviz
