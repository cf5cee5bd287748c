// Two looks: the normal dark theme, and presentation mode (high contrast for projectors:
// pure black and white, thick borders, yellow highlights). Sizes scale with the DPI.
#pragma once

namespace attnviz::ui {

void apply_theme(bool presentation, float scale);

}  // namespace attnviz::ui
