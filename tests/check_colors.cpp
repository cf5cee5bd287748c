// check_colors F.png R,G,B:N ...: exit 0 when the PNG holds at least N pixels within 8 of
// each colour R,G,B (per channel); otherwise says which colour was short, exit 1.
#include <stb_image.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: check_colors F.png R,G,B:N ...\n");
    return 2;
  }
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load(argv[1], &w, &h, &n, 3);
  if (!px) {
    std::fprintf(stderr, "%s: cannot decode: %s\n", argv[1], stbi_failure_reason());
    return 1;
  }
  int bad = 0;
  for (int a = 2; a < argc; ++a) {
    int r, g, b, need;
    if (std::sscanf(argv[a], "%d,%d,%d:%d", &r, &g, &b, &need) != 4) {
      std::fprintf(stderr, "bad colour '%s' (R,G,B:N)\n", argv[a]);
      return 2;
    }
    int count = 0;
    for (int k = 0; k < w * h; ++k)
      count += std::abs(px[3 * k] - r) <= 8 && std::abs(px[3 * k + 1] - g) <= 8 && std::abs(px[3 * k + 2] - b) <= 8;
    std::printf("%s: %d pixels of %d,%d,%d (need %d)\n", argv[1], count, r, g, b, need);
    bad += count < need;
  }
  stbi_image_free(px);
  return bad ? 1 : 0;
}
