// The model in use: its config, parameter counts per part, and head_size = n_embd / n_head.
// It keeps nothing of its own: a FunctionPanel titled "Model" draws it (no trace needed).
#pragma once
#include "ui/panels/panel.h"

namespace attnviz::ui {

void draw_model_panel(FrameContext& ctx);

}  // namespace attnviz::ui
