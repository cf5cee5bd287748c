#include "core/export/font_files.h"

#include <fontconfig/fontconfig.h>

#include <cctype>
#include <string>

namespace attnviz {

namespace {
bool is_opentype(std::string path) {
  const auto dot = path.rfind('.');
  std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "ttf" || ext == "otf" || ext == "ttc";
}
}  // namespace

FontFile find_font_file(const char* pattern, unsigned must_have) {
  FontFile out;
  // A configuration of our own, destroyed before returning: nothing of fontconfig's stays
  // allocated after a lookup (LeakSanitizer checks that).
  FcConfig* config = FcInitLoadConfigAndFonts();
  if (!config) return out;
  FcPattern* pat = FcNameParse(reinterpret_cast<const FcChar8*>(pattern));
  if (!pat) {
    FcConfigDestroy(config);
    return out;
  }
  FcConfigSubstitute(config, pat, FcMatchPattern);
  FcDefaultSubstitute(pat);
  FcResult res = FcResultNoMatch;
  FcPattern* match = FcFontMatch(config, pat, &res);
  if (match) {
    FcChar8* file = nullptr;
    FcCharSet* cs = nullptr;
    const bool has = must_have == 0 ||
                     (FcPatternGetCharSet(match, FC_CHARSET, 0, &cs) == FcResultMatch && FcCharSetHasChar(cs, must_have));
    // stb_truetype (ours and ImGui's) reads TrueType/OpenType only, not Type 1 or bitmaps.
    if (has && FcPatternGetString(match, FC_FILE, 0, &file) == FcResultMatch && is_opentype(reinterpret_cast<const char*>(file))) {
      out.path = reinterpret_cast<const char*>(file);
      int index = 0;
      if (FcPatternGetInteger(match, FC_INDEX, 0, &index) == FcResultMatch) out.index = index;
    }
    FcPatternDestroy(match);
  }
  FcPatternDestroy(pat);
  FcConfigDestroy(config);
  return out;
}

FontFile find_label_font() {
  for (const char* p : {"Noto Sans CJK SC", "Noto Sans CJK", "sans-serif:lang=zh-cn"}) {
    FontFile f = find_font_file(p, 0x4E2D);  // 中
    if (!f.path.empty()) return f;
  }
  return find_font_file("DejaVu Sans", 'A');
}

}  // namespace attnviz
