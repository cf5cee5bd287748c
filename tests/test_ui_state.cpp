// ui/app_state, ui/settings and ui/worker: the GUI's logic without ImGui.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <cstdlib>
#include <filesystem>

#include "core/model/model.h"
#include "core/engine/importance.h"
#include "core/model/random_model.h"
#include "ui/state/window_backgrounds.h"
#include "test_util.h"
#include "ui/state/app_state.h"
#include "ui/jobs/importance_job.h"
#include "ui/state/settings.h"
#include "ui/state/typing_probe.h"
#include "ui/state/worker.h"

using namespace attnviz;
using namespace attnviz::ui;

TEST(UiState, ClampSelectionWhenModelChanges) {
  AppState s;
  s.layer = 11;
  s.head = 11;
  s.kv_group = 3;
  s.block_size = 2048;
  ModelDims small;  // e.g. the tiny preset: 4 layers, 8 heads, 2 KV heads, context 1024
  small.n_layer = 4;
  small.n_head = 8;
  small.n_kv_head = 2;
  small.n_ctx = 1024;
  clamp_selection(s, small);
  EXPECT_EQ(s.layer, 3);
  EXPECT_EQ(s.head, 7);
  EXPECT_EQ(s.kv_group, 1);
  EXPECT_EQ(s.block_size, 1024);  // out of range → the model's context
  s.block_size = 8;
  s.layer = -4;
  clamp_selection(s, small);
  EXPECT_EQ(s.block_size, 8);  // in range: kept
  EXPECT_EQ(s.layer, 0);
  s.block_size = 0;
  clamp_selection(s, small);
  EXPECT_EQ(s.block_size, 1024);
  ModelDims none;  // before any model: nothing breaks
  clamp_selection(s, none);
  EXPECT_EQ(s.layer, 0);
  EXPECT_EQ(s.head, 0);
}

TEST(UiState, Navigation) {
  AppState s;
  ModelDims m;
  m.n_layer = 4;
  m.n_head = 8;
  m.n_kv_head = 2;
  step_layer(s, m, -1);
  EXPECT_EQ(s.layer, 3);  // wraps
  step_layer(s, m, +1);
  EXPECT_EQ(s.layer, 0);
  s.head = 3;
  step_head(s, m, +1);
  EXPECT_EQ(s.head, 4);
  EXPECT_EQ(s.kv_group, 1);  // follows the head's KV group
  s.stage = Stage::Probs;
  step_stage(s, +1);
  EXPECT_EQ(s.stage, Stage::Q);
  step_stage(s, -2);
  EXPECT_EQ(s.stage, Stage::Masked);
  s.stage = Stage::Scores;
  step_stage(s, -1);
  EXPECT_EQ(s.stage, Stage::Out);  // wraps to the last tab
  EXPECT_EQ(stage_tab_order().size(), size_t(kStageCount));
  // The capped tab exists only on a layer that soft-caps: stepping skips it elsewhere (and
  // implicit only on a linear-attention layer).
  EXPECT_EQ(stage_tabs(false).size(), size_t(kStageCount - 2));
  s.stage = Stage::Scaled;
  step_stage(s, +1);
  EXPECT_EQ(s.stage, Stage::Masked);
  step_stage(s, -1, /*capped=*/true);
  EXPECT_EQ(s.stage, Stage::Capped);
  step_stage(s, +1, true);
  EXPECT_EQ(s.stage, Stage::Masked);
  s.stage = Stage::Capped;
  fit_stage(s, true);
  EXPECT_EQ(s.stage, Stage::Capped);
  fit_stage(s, false);  // moved to a layer that does not soft-cap
  EXPECT_EQ(s.stage, Stage::Masked);
}

// A hybrid (Qwen3.5-like: layers 0-2 linear with 6 value heads of 4 × 5, layer 3 softmax with
// 4 query heads over 2 KV heads of 8; LFM2-like convolution layers): each layer's heads, its
// tabs, its memory.
TEST(UiState, HybridLayersHaveTheirOwnHeadsTabsAndMemory) {
  ModelConfig c;
  c.n_layer = 4, c.n_head = 4, c.n_kv_head = 2, c.head_size = 8, c.n_embd = 32, c.n_ctx = 64;
  c.linear = LinearAttnDims{3, 6, 4, 5, 4};
  for (int l = 0; l < 4; ++l) {
    LayerSpec sp;
    sp.mixer = l < 3 ? Mixer::GatedDeltaNet : Mixer::Softmax;
    c.layer_specs.push_back(sp);
  }
  const ModelDims m = ModelDims::of(c);
  EXPECT_EQ(m.layer_heads, (std::vector<int>{6, 6, 6, 4}));
  AppState s;
  s.layer = 0, s.head = 5;
  clamp_selection(s, m);
  EXPECT_EQ(s.head, 5);  // value head 5 exists on a linear layer
  step_head(s, m, +1);
  EXPECT_EQ(s.head, 0);  // wraps within the layer's 6 heads
  s.head = 5;
  step_layer(s, m, -1);  // to layer 3, softmax: 4 heads
  EXPECT_EQ(s.layer, 3);
  EXPECT_EQ(s.head, 3);
  // A linear layer's tabs: implicit, Q, K, V, out; a softmax stage becomes implicit and back.
  EXPECT_EQ(stage_tabs(false, Mixer::GatedDeltaNet),
            (std::vector<Stage>{Stage::Implicit, Stage::Q, Stage::K, Stage::V, Stage::Out}));
  EXPECT_TRUE(stage_tabs(false, Mixer::ShortConv).empty());
  s.stage = Stage::Probs;
  fit_stage(s, false, Mixer::GatedDeltaNet);
  EXPECT_EQ(s.stage, Stage::Implicit);
  step_stage(s, +1, false, Mixer::GatedDeltaNet);
  EXPECT_EQ(s.stage, Stage::Q);
  s.stage = Stage::Implicit;
  fit_stage(s, false, Mixer::Softmax);
  EXPECT_EQ(s.stage, Stage::Probs);
  s.stage = Stage::V;
  step_stage(s, +1, false, Mixer::ShortConv);  // nothing to step through: unchanged
  EXPECT_EQ(s.stage, Stage::V);
  // Ablation does not cover hybrids yet: cleared.
  s.ablation.heads = {{3, 1}};
  clamp_ablation(s, m);
  EXPECT_TRUE(s.ablation.heads.empty());
  // Memory: only layer 3 keeps K and V (2 × T × KV × d × 4 B); the linear layers keep
  // 6 memories of 4 × 5 and the convolution's last 3 inputs of 2·3·4 + 6·5 = 54 channels.
  EXPECT_EQ(kv_cache_bytes_layers(c, 10, c.n_kv_head), 2 * 10 * 2 * 8 * 4);
  EXPECT_EQ(layer_state_values(c, 0), 6 * 4 * 5 + 3 * 54);
  EXPECT_EQ(layer_state_values(c, 3), 0);
  EXPECT_EQ(recurrent_state_bytes(c), 3 * (6 * 4 * 5 + 3 * 54) * 4);
  // An LFM2-like convolution layer: its last K − 1 inputs of C channels, and no heads.
  c.layer_specs[1].mixer = Mixer::ShortConv;
  c.short_conv_kernel = 3;
  EXPECT_EQ(layer_state_values(c, 1), 2 * 32);
  EXPECT_EQ(ModelDims::of(c).heads_at(1), 0);
  EXPECT_EQ(layer_kind(c.layer(1)), "short convolution");
  EXPECT_EQ(layer_kind(c.layer(0)), "linear attention");
}

// A local layer of window W: query i sees keys [i − W + 1, i]; its KV cache keeps min(T, W)
// entries; the tooltip's numbers honour the window and the soft-cap.
TEST(UiState, LocalWindowSeenKeysCacheAndCellNumbers) {
  EXPECT_EQ(seen_keys(0, 4).first, 0);
  EXPECT_EQ(seen_keys(3, 4).first, 0);
  EXPECT_EQ(seen_keys(4, 4).first, 1);
  EXPECT_EQ(seen_keys(9, 4).count(), 4);
  EXPECT_EQ(seen_keys(9, 1).first, 9);  // W = 1: itself only
  EXPECT_EQ(seen_keys(9, 0).first, 0);  // global
  EXPECT_FALSE(seen_keys(9, 0).local);
  EXPECT_TRUE(outside_window(5, 1, 4));
  EXPECT_FALSE(outside_window(5, 2, 4));
  EXPECT_FALSE(outside_window(5, 6, 4));  // the future is the causal mask, not the window
  EXPECT_EQ(kv_entries(10, 4), 4);
  EXPECT_EQ(kv_entries(3, 4), 3);
  EXPECT_EQ(kv_entries(10, 0), 10);
  LayerSpec spec;
  spec.window = 512;
  EXPECT_EQ(layer_kind(spec), "local W=512");
  spec.window = 0;
  spec.rope = false;
  EXPECT_EQ(layer_kind(spec), "global no RoPE");

  nlohmann::json j = config_to_json(test::small_config("llama", 4, 32, 4, 2, 64, 64));
  j["model_type"] = "gemma3_text";
  j["sliding_window"] = 4;
  j["sliding_window_pattern"] = 2;  // layers 0, 2 local; 1, 3 global
  j["hidden_act"] = "gelu_pytorch_tanh";
  const ModelConfig c = parse_config(j, "test config");
  ASSERT_EQ(c.layer(0).window, 4);
  ASSERT_EQ(c.layer(1).window, 0);
  // 2 global layers × 10 + 2 local × 4 entries, × 2 (K, V) × 2 KV heads × d 8 × 4 B.
  EXPECT_EQ(kv_cache_bytes_layers(c, 10, 2), (2 * 10 + 2 * 4) * 2 * 2 * 8 * 4);

  LayerTrace lt;
  lt.window = 2;
  lt.scale = 0.5f;
  lt.softcap = 1.f;
  const float srow[] = {4.f, -2.f, 1.f, 0.f};  // row i = 2
  const CellNumbers a = cell_numbers(lt, srow, 2, 0);
  EXPECT_TRUE(a.masked);
  EXPECT_TRUE(a.outside);
  EXPECT_FALSE(a.future);
  EXPECT_EQ(a.first, 1);
  EXPECT_FLOAT_EQ(a.scaled, 2.f);
  EXPECT_FLOAT_EQ(a.capped, std::tanh(2.f));
  EXPECT_EQ(a.exp, 0.0);
  const CellNumbers b = cell_numbers(lt, srow, 2, 2);
  EXPECT_FALSE(b.masked);
  // The row max and sum run over keys 1 … 2 only (key 0, the largest score, is outside).
  EXPECT_NEAR(b.row_max, std::tanh(0.5), 1e-6);
  EXPECT_NEAR(b.row_sum, 1.0 + std::exp(std::tanh(-1.0) - std::tanh(0.5)), 1e-6);
  EXPECT_TRUE(cell_numbers(lt, srow, 2, 3).future);
}

TEST(UiState, HoverIsOneFrameDelayed) {
  AppState s;
  s.hover(5);
  EXPECT_EQ(s.hovered_token, -1);  // panels drawn this frame still see last frame's
  s.end_frame();
  EXPECT_EQ(s.hovered_token, 5);
  s.end_frame();  // nothing hovered this frame
  EXPECT_EQ(s.hovered_token, -1);
}

TEST(UiState, WindowAndDropped) {
  WindowInfo w = window_info(5, 8);
  EXPECT_EQ(w.dropped, 0);
  EXPECT_EQ(w.T, 5);
  w = window_info(8, 8);
  EXPECT_EQ(w.dropped, 0);
  EXPECT_EQ(w.T, 8);
  w = window_info(12, 8);  // the window keeps the last block_size tokens
  EXPECT_EQ(w.dropped, 4);
  EXPECT_EQ(w.T, 8);
  w = window_info(1000, 1);
  EXPECT_EQ(w.dropped, 999);
  EXPECT_EQ(w.T, 1);
  w = window_info(0, 8);
  EXPECT_EQ(w.T, 0);
  EXPECT_EQ(w.dropped, 0);
}

TEST(UiState, ChipLabels) {
  EXPECT_EQ(chip_label(" "), "\xE2\x90\xA3");
  EXPECT_EQ(chip_label("\n"), "\xE2\x86\xB5");
  EXPECT_EQ(chip_label("a b"), "a\xE2\x90\xA3" "b");
  EXPECT_EQ(chip_label("\x01"), "\\x01");
  EXPECT_EQ(chip_label("\xE7\x8C\xAB"), "\xE7\x8C\xAB");  // 猫 unchanged
  EXPECT_EQ(chip_label(""), "\xE2\x88\x85");
}

TEST(UiState, KvGrouping) {
  // 32 query heads share 8 KV heads: kv = h // 4
  EXPECT_EQ(group_size(32, 8), 4);
  for (int h = 0; h < 32; ++h) EXPECT_EQ(kv_head_of(h, 32, 8), h / 4);
  EXPECT_EQ(query_heads_of(2, 32, 8), (std::vector<int>{8, 9, 10, 11}));
  // MHA: each head its own; MQA: all on one
  for (int h = 0; h < 12; ++h) EXPECT_EQ(kv_head_of(h, 12, 12), h);
  for (int h = 0; h < 12; ++h) EXPECT_EQ(kv_head_of(h, 12, 1), 0);
  EXPECT_EQ(query_heads_of(0, 12, 1).size(), 12u);
  // agrees with core's ModelConfig
  ModelConfig c = preset_config("tiny");
  for (int h = 0; h < c.n_head; ++h) EXPECT_EQ(kv_head_of(h, c.n_head, c.n_kv_head), c.kv_head_of(h));
}

TEST(UiState, KvCacheBytesMatchAWorkedExample) {
  // 1000 (seqlen) × 32 (nhead) × 128 (d) × 4 bytes = 16.4 MB; with 8 KV heads 4.1 MB.
  EXPECT_EQ(kv_tensor_bytes(1000, 32, 128), 16384000);
  EXPECT_EQ(kv_tensor_bytes(1000, 8, 128), 4096000);
  EXPECT_EQ(format_bytes(kv_tensor_bytes(1000, 32, 128)), "16.4 MB");
  EXPECT_EQ(format_bytes(kv_tensor_bytes(1000, 8, 128)), "4.1 MB");
  EXPECT_EQ(format_bytes(kv_tensor_bytes(1000, 32, 128) - kv_tensor_bytes(1000, 8, 128)), "12.3 MB");  // "省了 12.3 MB"
  // The whole cache: K and V, every layer.
  EXPECT_EQ(kv_cache_bytes(1000, 8, 128, 32), 2LL * 32 * 4096000);
  EXPECT_EQ(kv_cache_bytes(10, 2, 8, 4, 2), 2LL * 4 * 10 * 2 * 8 * 2);  // fp16
  EXPECT_EQ(format_bytes(999), "999 B");
  EXPECT_EQ(format_bytes(2500), "2.5 kB");
  EXPECT_EQ(format_bytes(1200000000), "1.20 GB");
}

TEST(UiState, ParameterCountsMatchTheLoadedModel) {
  for (const char* preset : {"tiny", "tiny-gpt2"}) {
    ModelConfig c = preset_config(preset);
    c.n_layer = 2;
    const std::string dir = test::make_model_dir(c, 3, std::string("params-") + preset);
    const auto m = load_model(dir);
    const ParamCounts p = parameter_counts(m->config);
    EXPECT_EQ(p.total(), m->parameter_count()) << preset;
    EXPECT_EQ(p.token_embedding, int64_t(c.vocab_size) * c.n_embd);
    EXPECT_GT(p.attention, 0);
    EXPECT_GT(p.mlp, 0);
  }
}

TEST(UiState, TopKAndSampling) {
  const float logits[] = {0.f, 2.f, 1.f, -1.f};
  const auto top = top_k_probs(logits, 4, 1.f, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id, 1);
  EXPECT_EQ(top[1].id, 2);
  const double z = std::exp(0.0) + std::exp(2.0) + std::exp(1.0) + std::exp(-1.0);
  EXPECT_NEAR(top[0].p, std::exp(2.0) / z, 1e-6);
  // temperature 0: greedy; high temperature flattens
  EXPECT_EQ(top_k_probs(logits, 4, 0.f, 1)[0].p, 1.f);
  EXPECT_LT(top_k_probs(logits, 4, 10.f, 1)[0].p, top[0].p);
  EXPECT_EQ(sample_token(logits, 4, 0.f, 0.99), 1);
  // u walks the cumulative distribution in id order
  EXPECT_EQ(sample_token(logits, 4, 1.f, 0.0), 0);
  EXPECT_EQ(sample_token(logits, 4, 1.f, 0.5), 1);
  EXPECT_EQ(sample_token(logits, 4, 1.f, 0.9999999), 3);
}

TEST(UiSettings, RoundTripAndConfigDir) {
  AppState s;
  s.model_spec = "builtin:poems-zh";
  s.backend = "gpu";
  s.text = "\xE6\x98\xA5\xE6\xB1\x9F";
  s.block_size = 8;
  s.layer = 2;
  s.head = 5;
  s.stage = Stage::Masked;
  s.temperature = 0.7f;
  s.presentation = true;
  s.probs_colormap = Colormap::Magma;
  PanelVisibility vis{{"Model", false}};
  AppState t;
  PanelVisibility vis2;
  ASSERT_TRUE(settings_from_json(settings_to_json(s, vis), t, vis2));
  EXPECT_EQ(t.model_spec, s.model_spec);
  EXPECT_EQ(t.backend, "gpu");
  EXPECT_EQ(t.text, s.text);
  EXPECT_EQ(t.block_size, 8);
  EXPECT_EQ(t.layer, 2);
  EXPECT_EQ(t.head, 5);
  EXPECT_EQ(t.stage, Stage::Masked);
  EXPECT_FLOAT_EQ(t.temperature, 0.7f);
  EXPECT_TRUE(t.presentation);
  EXPECT_EQ(t.probs_colormap, Colormap::Magma);
  EXPECT_EQ(vis2.at("Model"), false);
  AppState u;
  EXPECT_FALSE(settings_from_json("not json", u, vis2));
  EXPECT_TRUE(settings_from_json("{\"layer\": \"x\", \"head\": 3}", u, vis2));  // wrong types ignored
  EXPECT_EQ(u.layer, 0);
  EXPECT_EQ(u.head, 3);

  const std::string dir = test::temp_dir("xdg");
  setenv("XDG_CONFIG_HOME", dir.c_str(), 1);
  EXPECT_EQ(config_dir(), (std::filesystem::path(dir) / "attnviz").string());
  save_settings(s, vis);
  AppState back;
  PanelVisibility vis3;
  EXPECT_TRUE(load_settings(back, vis3));
  EXPECT_EQ(back.text, s.text);

  // A settings file nested too deep (or not JSON, or a FIFO) is not read: the defaults stay
  // and the reason names the file (the GUI prints it and shows it in the status bar).
  const std::string settings = (std::filesystem::path(dir) / "attnviz" / "settings.json").string();
  test::write_bytes(settings, "{\"layer\": 3, \"panels\": {\"x\": " + std::string(300000, '[') + std::string(300000, ']') + "}}");
  AppState deep;
  std::string why;
  EXPECT_FALSE(load_settings(deep, vis3, &why));
  EXPECT_EQ(deep.layer, 0);
  EXPECT_NE(why.find(settings + ": JSON nested more than"), std::string::npos) << why;
  EXPECT_NE(why.find("under \"panels\" → \"x\" → [0]"), std::string::npos) << why;
  why.clear();
  EXPECT_FALSE(settings_from_json("[1, 2]", deep, vis3, &why));
  EXPECT_NE(why.find("not a JSON object"), std::string::npos) << why;
  std::filesystem::remove(settings);
  why.clear();
  EXPECT_FALSE(load_settings(deep, vis3, &why));  // no file: nothing to say
  EXPECT_EQ(why, "");
  ASSERT_EQ(mkfifo(settings.c_str(), 0600), 0);
  EXPECT_FALSE(load_settings(deep, vis3, &why));  // not waited on
  EXPECT_NE(why.find("not a regular file"), std::string::npos) << why;
  unsetenv("XDG_CONFIG_HOME");
}

TEST(UiTyping, EachKeyWaitsForTheFrameThatShowsItsResult) {
  using namespace std::chrono_literals;
  TypingProbe p("a\xE7\x8C\xAB");  // two keys: 'a' and 猫 (one UTF-8 character)
  const auto t0 = TypingProbe::Clock::time_point{} + 1s;
  EXPECT_EQ(p.press(t0), "a");
  EXPECT_EQ(p.press(t0 + 1ms), "");  // still waiting for the first key's frame
  p.presented(3, 0.5, 1.0, 2.0, t0 + 2ms);     // a frame before the key was posted does not count
  p.posted(4);
  p.presented(3, 0.5, 1.0, 2.0, t0 + 5ms);     // an older result does not count
  EXPECT_TRUE(p.latency_ms().empty());
  p.presented(4, 0.75, 1.5, 2.5, t0 + 12ms);   // the frame that shows request 4
  ASSERT_EQ(p.latency_ms().size(), 1u);
  EXPECT_DOUBLE_EQ(p.latency_ms()[0], 12.0);
  EXPECT_DOUBLE_EQ(p.forward_ms()[0], 0.75);
  EXPECT_FALSE(p.finished());
  EXPECT_EQ(p.press(t0 + 20ms), "\xE7\x8C\xAB");
  p.posted(6);
  p.presented(7, 1.0, 1.0, 2.0, t0 + 50ms);  // a newer result also shows the key
  EXPECT_TRUE(p.finished());
  EXPECT_EQ(p.press(t0 + 60ms), "");
  const std::string j = p.report_json();
  EXPECT_NE(j.find("\"keys\":2"), std::string::npos) << j;
  EXPECT_NE(j.find("\"max_ms\":30.0"), std::string::npos) << j;
  EXPECT_NE(j.find("\"ui_ms\":[1.5,1.0]"), std::string::npos) << j;
  EXPECT_NE(j.find("\"draw_ms\":[2.5,2.0]"), std::string::npos) << j;
}

TEST(UiWorker, WakesTheEventLoopAfterEachResult) {
  ModelConfig c = preset_config("tiny");
  c.n_layer = 1;
  const std::string dir = test::make_model_dir(c, 6, "worker-wake");
  Worker w;
  std::atomic<int> wakes{0};
  w.set_on_publish([&] { ++wakes; });
  Request r;
  r.model_spec = dir;
  r.text = "hi";
  ASSERT_TRUE(w.wait_for(w.post(r), 60000));
  r.text = "hi!";
  ASSERT_TRUE(w.wait_for(w.post(r), 60000));
  for (int i = 0; i < 100 && wakes < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(wakes.load(), 2);
}

TEST(UiWorker, PublishesTracesAndKeepsTheLastGoodOne) {
  ModelConfig c = preset_config("tiny");
  c.n_layer = 2;
  const std::string dir = test::make_model_dir(c, 5, "worker");
  Worker w;
  Request r;
  r.model_spec = dir;
  r.text = "hello";
  uint64_t id = w.post(r);
  ASSERT_TRUE(w.wait_for(id, 60000));
  auto s = w.latest();
  ASSERT_TRUE(s->error.empty()) << s->error;
  ASSERT_TRUE(s->trace);
  EXPECT_EQ(s->trace->T(), 5);
  EXPECT_TRUE(s->random_weights);
  EXPECT_EQ(s->backend_name, "cpu");
  const uint64_t good_serial = s->trace_serial;

  // One more character: computed through the KV cache from position 5.
  r.text = "hello!";
  id = w.post(r);
  ASSERT_TRUE(w.wait_for(id, 60000));
  s = w.latest();
  EXPECT_EQ(s->trace->T(), 6);
  EXPECT_EQ(s->recomputed_from, 5);
  EXPECT_GT(s->trace_serial, good_serial);

  // Characters the tokenizer does not know: left out and listed, the rest runs (no blank
  // panels); the text stays as typed.
  r.text = "he\xE7\x8C\xAB" "llo!\xE7\x8C\xAB\xE2\x82\xAC";  // he猫llo!猫€
  id = w.post(r);
  ASSERT_TRUE(w.wait_for(id, 60000));
  s = w.latest();
  EXPECT_TRUE(s->error.empty()) << s->error;
  EXPECT_EQ(s->trace->T(), 6);  // h e l l o !
  EXPECT_EQ(s->skipped, (std::vector<std::string>{"\xE7\x8C\xAB", "\xE2\x82\xAC"}));
  EXPECT_EQ(s->skipped_count, 3);
  EXPECT_EQ(s->trace_text, r.text);
  // Nothing it knows: an error that says so, and what to do.
  const auto before = s->trace;
  r.text = "\xE7\x8C\xAB\xE7\x8C\xAB";
  id = w.post(r);
  ASSERT_TRUE(w.wait_for(id, 60000));
  s = w.latest();
  EXPECT_NE(s->error.find("none of the characters typed is in this model's vocabulary"), std::string::npos) << s->error;
  EXPECT_EQ(s->trace, before);  // the last good result stays

  // block_size 4: the window slides, 2 dropped.
  r.text = "hello!";
  r.block_size = 4;
  id = w.post(r);
  ASSERT_TRUE(w.wait_for(id, 60000));
  s = w.latest();
  EXPECT_TRUE(s->error.empty());
  EXPECT_EQ(s->trace->T(), 4);
  EXPECT_EQ(s->trace->dropped, 2);
  EXPECT_EQ(s->all_ids.size(), 6u);

  // A bad model directory: an error, no crash, the old model and trace stay.
  Request bad = r;
  bad.model_spec = dir + "/does-not-exist";
  id = w.post(bad);
  ASSERT_TRUE(w.wait_for(id, 60000));
  s = w.latest();
  EXPECT_NE(s->error.find("could not load model"), std::string::npos);
  EXPECT_TRUE(s->trace);
}

TEST(UiState, AblationComparisonAndClamp) {
  const float ablated[] = {0.f, 2.f, 1.f, -1.f}, clean[] = {3.f, 0.f, 0.f, 0.f};
  const auto top = compare_top_k(ablated, clean, 4, 1.f, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id, 1);  // ordered by the ablated distribution
  const double zc = std::exp(3.0) + 3.0;
  EXPECT_NEAR(top[0].p_clean, 1.0 / zc, 1e-6);
  EXPECT_NEAR(top[1].p_clean, 1.0 / zc, 1e-6);
  EXPECT_NEAR(top[0].p, top_k_probs(ablated, 4, 1.f, 1)[0].p, 1e-7);

  AppState s;
  s.ablation.toggle(1, 3);
  ModelDims m;
  m.n_layer = 2, m.n_head = 4;
  clamp_ablation(s, m);
  EXPECT_EQ(s.ablation.heads.size(), 1u);
  m.n_head = 2;  // a smaller model: the list no longer applies
  clamp_ablation(s, m);
  EXPECT_TRUE(s.ablation.empty());
}

TEST(UiWorker, AblatedRequestsPublishTheAblatedTraceAndTheCleanPrediction) {
  ModelConfig c = preset_config("tiny");
  c.n_layer = 2;
  const std::string dir = test::make_model_dir(c, 6, "worker-ablate");
  const auto model = load_model(dir);
  Worker w;
  Request r;
  r.model_spec = dir;
  r.text = "hello hello";
  r.ablation = Ablation{AblationMode::Zero, {{0, 0}, {1, 1}}};
  ASSERT_TRUE(w.wait_for(w.post(r), 60000));
  auto s = w.latest();
  ASSERT_TRUE(s->error.empty()) << s->error;
  EXPECT_EQ(s->trace->ablation, r.ablation);
  // The clean side is the plain model's run; the loss is the ablated trace's.
  Engine plain(model, make_cpu_backend()), ablated(model, make_cpu_backend());
  ablated.set_ablation(r.ablation);
  const Trace& pt = plain.run_text(r.text);
  const int V = c.vocab_size, T = pt.T();
  ASSERT_EQ(s->clean_logits.size(), static_cast<size_t>(V));
  for (int v = 0; v < V; ++v) EXPECT_NEAR(s->clean_logits[v], pt.logits.data[static_cast<size_t>(T - 1) * V + v], 1e-5);
  EXPECT_NEAR(s->clean_loss, mean_next_token_loss(pt), 1e-6);
  EXPECT_NEAR(s->loss, mean_next_token_loss(ablated.run_text(r.text)), 1e-6);
  EXPECT_NE(s->loss, s->clean_loss);

  // Switching the ablation off: a new trace, no comparison.
  r.ablation = {};
  ASSERT_TRUE(w.wait_for(w.post(r), 60000));
  s = w.latest();
  EXPECT_TRUE(s->trace->ablation.empty());
  EXPECT_TRUE(s->clean_logits.empty());
  EXPECT_NEAR(s->loss, mean_next_token_loss(pt), 1e-6);
}

TEST(UiImportanceJob, ComputesTheGridInTheBackgroundAndCancelsOnANewRequest) {
  const auto model = load_model(test::make_model_dir(test::small_config("llama", 2, 16, 2, 1, 20, 16), 8, "job"));
  const std::vector<int> a = test::random_ids(9, 20, 1), b = test::random_ids(11, 20, 2);
  ImportanceJob job;
  job.request(model, a);
  job.request(model, b);  // replaces the first
  for (int i = 0; i < 6000 && !job.idle(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(job.idle());
  const auto st = job.status();
  ASSERT_TRUE(st.grid) << st.error;
  EXPECT_EQ(st.grid_window, b);
  EXPECT_EQ(st.done, st.total);
  Engine e(model, make_cpu_backend());
  const ImportanceGrid want = head_importance(e, b);
  ASSERT_EQ(st.grid->heads.size(), want.heads.size());
  for (size_t i = 0; i < want.heads.size(); ++i) {
    EXPECT_NEAR(st.grid->heads[i].zero, want.heads[i].zero, 1e-9);
    EXPECT_NEAR(st.grid->heads[i].mean, want.heads[i].mean, 1e-9);
  }
}

// ---- window backgrounds ----

namespace attnviz::ui {
namespace {

TEST(WindowBackgrounds, OnlyWhereSomethingLiesUnder) {
  // Tiled: touching, and sharing a border pixel or two, as the layout places them.
  const std::vector<WinRect> tiled = {{0, 20, 400, 300}, {400, 20, 800, 300}, {0, 320, 1200, 600}, {1198, 20, 400, 902}};
  const std::vector<WinRect> bars = {{0, 0, 1600, 20}, {0, 922, 1600, 38}};
  EXPECT_EQ(panels_needing_background(tiled, bars, false), std::vector<bool>(4, false));
  // Moving: every one.
  EXPECT_EQ(panels_needing_background(tiled, bars, true), std::vector<bool>(4, true));
  // One dragged over two others: those three, not the fourth.
  std::vector<WinRect> moved = tiled;
  moved[0] = {300, 200, 300, 200};
  EXPECT_EQ(panels_needing_background(moved, bars, false), (std::vector<bool>{true, true, true, false}));
  // Over the status bar, or not drawn last frame.
  moved = tiled;
  moved[2].h = 640;
  moved[1].w = 0;
  EXPECT_EQ(panels_needing_background(moved, bars, false), (std::vector<bool>{false, true, true, false}));
  // A panel not drawn does not count as lying under another.
  moved = tiled;
  moved[0] = {0, 0, 0, 0};
  moved[1] = {0, 20, 1200, 300};
  EXPECT_EQ(panels_needing_background(moved, bars, false), (std::vector<bool>{true, false, false, false}));
}

}  // namespace
}  // namespace attnviz::ui

TEST(UiState, GemmaFourSharedLayersKeepNoKvCache) {
  // Gemma 4 E2B as released (its config.json): 35 layers, every fifth global (4, 9, …, 34),
  // the others sliding over 512 tokens; head_dim 256, global_head_dim 512; one KV head; the
  // last 20 layers (15–34) read the K and V of an earlier layer and keep none.
  const ModelConfig c = preset_config("gemma4-e2b");
  for (int64_t T : {100, 1000, 32768}) {
    int64_t want = 0, unshared = 0;
    for (int l = 0; l < 35; ++l) {
      const bool global = l % 5 == 4;
      const int64_t entries = global ? T : std::min<int64_t>(T, 512), d = global ? 512 : 256;
      const int64_t layer = 2 * entries * 1 * d * 4;  // K and V, float32
      unshared += layer;
      if (l < 15) want += layer;
    }
    EXPECT_EQ(kv_cache_bytes_layers(c, T, -1), want) << T;
    EXPECT_EQ(kv_cache_bytes_layers(c, T, -1, 4, /*shared_keep_own*/ true), unshared) << T;
  }
  EXPECT_EQ(layer_kind(c.layer(14)), "global");
  EXPECT_EQ(layer_kind(c.layer(15)), "local W=512, K and V of layer 13");
  EXPECT_EQ(layer_kind(c.layer(34)), "global, K and V of layer 14");
}

TEST(UiState, ScaledTabNamesTheScaleWhereItIsNotOneOverRootD) {
  // A llama: 1/√d on every layer; Gemma 4: 1 (QK-norm sets the size); another scale on one layer.
  const ModelConfig llama = preset_config("tiny");
  EXPECT_TRUE(scale_is_inv_sqrt_d(llama, 0));
  EXPECT_EQ(stage_title(Stage::Scaled, llama, 0), stage_label(Stage::Scaled));
  const ModelConfig g4 = preset_config("gemma4-e2b");
  EXPECT_FALSE(scale_is_inv_sqrt_d(g4, 0));
  EXPECT_EQ(stage_title(Stage::Scaled, g4, 0), "scaled \xC3\x97" "1");
  EXPECT_EQ(stage_title(Stage::Probs, g4, 0), stage_label(Stage::Probs));
  ModelConfig custom = llama;
  custom.layer_specs.assign(static_cast<size_t>(custom.n_layer), custom.layer(0));
  custom.layer_specs[1].scale = 0.0625f;
  EXPECT_TRUE(scale_is_inv_sqrt_d(custom, 0));
  EXPECT_EQ(stage_title(Stage::Scaled, custom, 1), "scaled \xC3\x97" "0.0625");
}
