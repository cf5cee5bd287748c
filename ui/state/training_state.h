// The logic under the Training panel, without ImGui: the form (preset or shape, corpus,
// optimisation) turned into session options, which buttons a session state allows, which
// weights the other panels show (the newest, or a kept snapshot picked on the timeline),
// the plotted series and the induction marker. Unit-tested in tests/test_training_state.cpp.
//
// Dimension letters as in core/model/config.h: L layers, H query heads.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/train/session.h"

namespace attnviz::ui {

// What the panel's widgets edit: the trainer's options themselves (a preset fills them;
// the shape fields are editable only without one), and how the session publishes.
struct TrainingForm {
  std::string preset = "induction-head";  // a train_preset_names() entry, or "" for a custom shape
  TrainOptions train;
  int publish_every = 25;   // steps between models shown in every panel
  int snapshot_every = 50;  // steps between kept snapshots
  int budget_mb = 256;      // memory for the snapshots
};

// The form with a preset's values (usage Error for an unknown name).
TrainingForm form_for_preset(const std::string& name);
// The session options of the form, with repeat_frac clamped to [0, 1], validation at
// least at the end, and the intervals at least 1.
SessionOptions session_options(const TrainingForm& f);

// Which buttons make sense in a state.
struct TrainingButtons {
  bool start = false, pause = false, resume = false, stop = false, reset = false, save = false;
};
TrainingButtons buttons_for(SessionState s, bool has_run);

// The kept step nearest to `want` (the earlier one on a tie); −1 when none is kept.
int nearest_kept_step(const std::vector<int>& kept, int want);
// `k` kept steps for a filmstrip, spread evenly from the first to the last (all of them
// when fewer are kept).
std::vector<int> filmstrip_steps(const std::vector<int>& kept, int k);

// One head's score at every scored step: (scores.size()). `index` = layer·H + head.
std::vector<float> head_series(const SessionStatus& s, int index, bool induction);
// Steps of the score points: (scores.size()).
std::vector<int> score_steps(const SessionStatus& s);
// The head with the highest induction score at the last scored step, as layer·H + head;
// −1 before any score.
int best_induction_head(const SessionStatus& s);
// "induction head formed at step 1100 (23 s): layer 1 head 2", or "" before it formed.
std::string induction_note(const SessionStatus& s);

// The filmstrip of the GUI: head (layer, head) on `text` at up to `k` kept snapshots of
// `session` (filmstrip_steps), written to `path` (.png or .svg). Returns the line to show;
// throws an Error when nothing is kept, the text has characters outside the vocabulary, or
// the head or the path is bad.
std::string write_session_filmstrip(const TrainingSession& session, int k, const std::string& text, int layer, int head,
                                    const std::string& path);

// The text to show while the model trains: `text` when the vocabulary covers it, else
// `text` lower-cased without the characters the vocabulary lacks, else a sentence typed
// twice from the vocabulary's letters.
std::string text_for_vocabulary(const std::string& text, const std::vector<std::string>& vocab);

}  // namespace attnviz::ui
