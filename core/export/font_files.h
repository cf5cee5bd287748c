// Finding font files through fontconfig: used by the image exporters (and the GUI) so that
// Chinese and other non-Latin token labels render.
#pragma once
#include <string>

namespace attnviz {

struct FontFile {
  std::string path;  // "" when none was found
  int index = 0;     // face index inside a .ttc collection
};

// The best match for the fontconfig `pattern` (e.g. "Noto Sans CJK SC") that has code
// point `must_have` (0: any).
FontFile find_font_file(const char* pattern, unsigned must_have = 0);

// A font for labels that covers Latin and CJK when one is installed (Noto Sans CJK from
// fonts-noto-cjk), else any sans font that covers Latin.
FontFile find_label_font();

}  // namespace attnviz
