// attnviz-cli in-process: every subcommand has --help, dump writes the pinned tensors, and
// bad input gives a clear message on stderr with exit code 1 (data) or 2 (usage).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/model/chat_source.h"
#include "core/model/safetensors.h"
#include "tests/cli_run.h"
#include "tests/test_util.h"

namespace attnviz {
namespace {

using Result = CliResult;
using test::cli;

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(test::make_model_dir(test::small_config("llama", 2, 32, 4, 2, 96, 16), 3, "cli"));
  }
  static std::string* model_;
  std::string out_ = test::temp_dir("cli-out") + "/d.safetensors";
};
std::string* Cli::model_ = nullptr;

TEST_F(Cli, EverySubcommandHasHelp) {
  for (const char* sub : {"dump", "bench", "info", "random", "export", "train", "eval", "heads", "chat"}) {
    const auto r = cli({sub, "--help"});
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("--"), std::string::npos) << sub;
  }
  EXPECT_EQ(cli({"--help"}).code, 0);
}

TEST_F(Cli, DumpWritesEveryPinnedTensorAndMetadata) {
  const auto r = cli({"dump", "--model", *model_, "--text", "Hello, attention!", "--block-size", "12", "--out", out_});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto f = SafetensorsFile::open(out_);
  const int T = 12, H = 4, KV = 2, d = 8;
  EXPECT_EQ(f.find("tokens")->dtype, DType::I32);
  EXPECT_EQ(f.find("tokens")->shape, (std::vector<int64_t>{T}));
  for (int l = 0; l < 2; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    for (const char* s : {"q", "out"}) EXPECT_EQ(f.find(p + s)->shape, (std::vector<int64_t>{H, T, d})) << s;
    for (const char* s : {"k", "v"}) EXPECT_EQ(f.find(p + s)->shape, (std::vector<int64_t>{KV, T, d})) << s;
    for (const char* s : {"scores", "scaled", "masked", "probs"})
      EXPECT_EQ(f.find(p + s)->shape, (std::vector<int64_t>{H, T, T})) << s;
  }
  EXPECT_EQ(f.find("logits")->shape, (std::vector<int64_t>{T, 96}));
  EXPECT_EQ(f.metadata().at("block_size"), "12");
  EXPECT_EQ(f.metadata().at("dropped"), "5");  // 17 characters, window 12
  EXPECT_EQ(f.metadata().at("backend"), "cpu");
  EXPECT_EQ(f.metadata().at("model"), *model_);
  // the window is the LAST 12 characters: "o, attention!" minus the first → ", attention!"
  const auto toks = f.read_i32(*f.find("tokens"));
  EXPECT_EQ(toks.back(), '!' - ' ' + 1);  // random models' vocab: "\n", then ' '…'~'
}

// --layers/--heads/--stages write only those tensors, under the pinned names; a selected
// head's values equal that head in the full dump (k and v: the KV heads the heads read).
TEST_F(Cli, DumpSelectionsWriteOnlyWhatIsAsked) {
  const std::string full = test::temp_dir("cli-full") + "/full.safetensors";
  ASSERT_EQ(cli({"dump", "--model", *model_, "--text", "Hello, attention!", "--out", full}).code, 0);
  const auto r = cli({"dump", "--model", *model_, "--text", "Hello, attention!", "--layers", "1", "--heads", "3,0",
                      "--stages", "k,scaled,probs", "--out", out_});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto f = SafetensorsFile::open(out_), g = SafetensorsFile::open(full);
  std::vector<std::string> names;
  for (const auto& t : f.tensors()) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"layers.1.k", "layers.1.probs", "layers.1.scaled", "tokens"}));
  EXPECT_EQ(f.metadata().at("selection"), "layers=1;heads=3,0;stages=k,scaled,probs");
  const int T = 16, d = 8;  // window 16 of 17 characters
  // Two runs agree to float rounding, not always bit for bit (the kernels' sums depend on
  // where the buffers land in memory): within 1e-5 of the matrix's largest magnitude.
  auto same = [](const float* x, const float* y, int n) {
    float scale = 0.f;
    for (int e = 0; e < n; ++e) scale = std::max(scale, std::abs(y[e]));
    for (int e = 0; e < n; ++e)
      if (!(std::abs(x[e] - y[e]) <= 1e-5f * std::max(scale, 1e-6f))) return false;
    return true;
  };
  for (const char* s : {"probs", "scaled"}) {
    const auto a = f.read_f32(*f.find(std::string("layers.1.") + s)), b = g.read_f32(*g.find(std::string("layers.1.") + s));
    ASSERT_EQ(a.size(), 2u * T * T) << s;
    EXPECT_TRUE(same(a.data(), b.data() + 3 * T * T, T * T)) << s << ": head 3 first";
    EXPECT_TRUE(same(a.data() + T * T, b.data(), T * T)) << s << ": then head 0";
    EXPECT_FALSE(same(a.data(), b.data(), T * T)) << s << ": head 3 is not head 0";
  }
  const auto k = f.read_f32(*f.find("layers.1.k")), kf = g.read_f32(*g.find("layers.1.k"));
  ASSERT_EQ(k.size(), 2u * T * d);  // heads 3 and 0 read KV heads 1 and 0 (group 2)
  EXPECT_TRUE(same(k.data(), kf.data() + T * d, T * d));
  EXPECT_TRUE(same(k.data() + T * d, kf.data(), T * d));
  // Only logits, and a range of layers.
  ASSERT_EQ(cli({"dump", "--model", *model_, "--tokens", "1,2,3", "--layers", "0-1", "--stages", "logits", "--out", out_}).code, 0);
  EXPECT_EQ(SafetensorsFile::open(out_).tensors().size(), 2u);  // tokens, logits
}

TEST_F(Cli, DumpAcceptsTokensForAnyModel) {
  const auto r = cli({"dump", "--model", *model_, "--tokens", "1, 2,3", "--out", out_});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(SafetensorsFile::open(out_).read_i32(*SafetensorsFile::open(out_).find("tokens")), (std::vector<int32_t>{1, 2, 3}));
}

// Bad input: code, and a message fragment that must appear on stderr.
struct Bad {
  const char* name;
  std::vector<std::string> args;  // {M} is replaced by the model dir, {O} by the output path
  int code;
  const char* message;
};

void PrintTo(const Bad& b, std::ostream* os) { *os << b.name; }

class CliBadInput : public Cli, public ::testing::WithParamInterface<Bad> {};

TEST_P(CliBadInput, ClearMessageAndExitCode) {
  auto args = GetParam().args;
  for (auto& a : args) {
    if (a == "{M}") a = *model_;
    if (a.rfind("{O}", 0) == 0) a = out_ + a.substr(3);
  }
  const auto r = cli(args);
  EXPECT_EQ(r.code, GetParam().code) << r.err;
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(std::filesystem::path(out_).parent_path())) << "no output file on failure";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliBadInput,
    ::testing::Values(
        Bad{"missing_model_dir", {"dump", "--model", "/no/such/model", "--tokens", "1", "--out", "{O}"}, 1, "does not exist"},
        Bad{"token_id_too_large", {"dump", "--model", "{M}", "--tokens", "1,96", "--out", "{O}"}, 1, "token id 96 at position 1"},
        Bad{"negative_token_id", {"dump", "--model", "{M}", "--tokens", "-1", "--out", "{O}"}, 1, "outside the vocabulary"},
        Bad{"empty_text", {"dump", "--model", "{M}", "--text", "", "--out", "{O}"}, 1, "no tokens"},
        Bad{"unknown_character", {"dump", "--model", "{M}", "--text", "tea 茶", "--out", "{O}"}, 1, "'茶' (U+8336) at position 4"},
        Bad{"token_not_integer", {"dump", "--model", "{M}", "--tokens", "1,x", "--out", "{O}"}, 2, "'x' is not an integer"},
        Bad{"no_input", {"dump", "--model", "{M}", "--out", "{O}"}, 2, "--text S, --tokens 1,2,3 or --chat"},
        Bad{"block_size_too_big", {"dump", "--model", "{M}", "--tokens", "1", "--block-size", "17", "--out", "{O}"}, 2, "takes 1 … 16"},
        Bad{"unknown_backend", {"dump", "--model", "{M}", "--tokens", "1", "--backend", "tpu", "--out", "{O}"}, 2, "backend"},
        Bad{"missing_out", {"dump", "--model", "{M}", "--tokens", "1"}, 2, "--out is required"},
        Bad{"unwritable_out", {"dump", "--model", "{M}", "--tokens", "1", "--out", "/no/such/dir/x.safetensors"}, 1, "cannot write"},
        Bad{"bench_too_long", {"bench", "--model", "{M}", "--length", "17"}, 2, "longer than the window"},
        Bad{"unknown_builtin", {"info", "--model", "builtin:nope"}, 1, "unknown built-in model"},
        Bad{"export_unknown_stage", {"export", "--model", "{M}", "--tokens", "1", "--stage", "attn", "--out", "{O}.png"}, 2, "unknown stage 'attn'"},
        Bad{"export_unknown_format", {"export", "--model", "{M}", "--tokens", "1", "--out", "{O}.gif"}, 2, "must end in .png, .svg, .csv or .npy"},
        Bad{"export_csv_grid", {"export", "--model", "{M}", "--tokens", "1,2", "--head", "all", "--out", "{O}.csv"}, 2, "one matrix"},
        Bad{"export_head_range", {"export", "--model", "{M}", "--tokens", "1,2", "--head", "4", "--out", "{O}.png"}, 2, "heads are 0 … 3"},
        Bad{"export_kv_head_range", {"export", "--model", "{M}", "--tokens", "1,2", "--stage", "k", "--head", "2", "--out", "{O}.png"}, 2, "KV heads are 0 … 1"},
        Bad{"export_bad_layer", {"export", "--model", "{M}", "--tokens", "1,2", "--layer", "x", "--out", "{O}.png"}, 2, "not a number or 'all'"},
        Bad{"export_unwritable", {"export", "--model", "{M}", "--tokens", "1,2", "--out", "/no/such/dir/a.png"}, 1, "cannot write"},
        Bad{"ablate_layer_range", {"dump", "--model", "{M}", "--tokens", "1,2", "--ablate", "2:0", "--out", "{O}"}, 2, "out of range"},
        Bad{"ablate_head_range", {"export", "--model", "{M}", "--tokens", "1,2", "--ablate", "0:4", "--out", "{O}.png"}, 2, "out of range"},
        Bad{"ablate_malformed", {"dump", "--model", "{M}", "--tokens", "1,2", "--ablate", "0-1", "--out", "{O}"}, 2, "is not layer:head"},
        Bad{"ablate_duplicate", {"dump", "--model", "{M}", "--tokens", "1,2", "--ablate", "1:1,0:2,1:1", "--out", "{O}"}, 2, "listed twice"},
        Bad{"ablate_trailing_comma", {"dump", "--model", "{M}", "--tokens", "1,2", "--ablate", "0:1,", "--out", "{O}"}, 2, "is not a list"},
        Bad{"dump_layers_range", {"dump", "--model", "{M}", "--tokens", "1,2", "--layers", "0,2", "--out", "{O}"}, 2, "2 is out of range"},
        Bad{"dump_heads_backwards", {"dump", "--model", "{M}", "--tokens", "1,2", "--heads", "3-1", "--out", "{O}"}, 2, "runs backwards"},
        Bad{"dump_heads_twice", {"dump", "--model", "{M}", "--tokens", "1,2", "--heads", "0-2,1", "--out", "{O}"}, 2, "1 is listed twice"},
        Bad{"dump_heads_not_index", {"dump", "--model", "{M}", "--tokens", "1,2", "--heads", "a", "--out", "{O}"}, 2, "'a' is not an index"},
        Bad{"dump_stage_unknown", {"dump", "--model", "{M}", "--tokens", "1,2", "--stages", "probs,attn", "--out", "{O}"}, 2, "unknown stage 'attn'"},
        Bad{"ablate_bad_mode", {"dump", "--model", "{M}", "--tokens", "1,2", "--ablate", "0:1", "--ablate-mode", "half", "--out", "{O}"}, 2, "is not a mode"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(Cli, ModelWithoutTokenizerNeedsTokens) {
  const std::string dir = test::make_model_dir(test::small_config("gpt2", 1, 16, 2, 2, 10, 8), 4, "notok");
  std::filesystem::remove(dir + "/tokenizer.json");
  const auto r = cli({"dump", "--model", dir, "--text", "ab", "--out", out_});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("has no tokenizer.json"), std::string::npos) << r.err;
}

TEST_F(Cli, BenchJsonHasThePinnedKeys) {
  const auto r = cli({"bench", "--model", *model_, "--length", "8", "--reps", "3", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"length", "reps", "median_ms", "min_ms", "backend"}) EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["length"], 8);
  EXPECT_EQ(j["reps"], 3);
  EXPECT_LE(j["min_ms"].get<double>(), j["median_ms"].get<double>());
}

TEST_F(Cli, InfoShowsHeadSizeAndGrouping) {
  const auto r = cli({"info", "--model", *model_});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("n_embd      32 = n_head 4 x head_size 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("query head h reads KV head h / 2"), std::string::npos) << r.out;
}

TEST_F(Cli, DumpRecordsTheAblatedRunEvenWithAWholeLayerAblated) {
  const auto r = cli({"dump", "--model", *model_, "--tokens", "1,2,3,4", "--ablate", "0:0,0:1,0:2,0:3", "--out", out_});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto f = SafetensorsFile::open(out_);
  EXPECT_EQ(f.metadata().at("ablate"), "0:0,0:1,0:2,0:3");
  EXPECT_EQ(f.metadata().at("ablate_mode"), "zero");
  const auto out = f.read_f32(*f.find("layers.0.out"));  // (H, T, d): every head's output replaced by 0
  for (float v : out) EXPECT_EQ(v, 0.f);
}

TEST_F(Cli, EvalWithAnAblationReportsItAndAHigherLoss) {
  const std::string text = test::temp_dir("cli-eval") + "/t.txt";
  test::write_bytes(text, "attention attention attention");
  const auto clean = cli({"eval", "--model", *model_, "--text-file", text, "--json"});
  const auto ablated = cli({"eval", "--model", *model_, "--text-file", text, "--json", "--ablate", "1:2", "--ablate-mode", "mean"});
  ASSERT_EQ(clean.code, 0) << clean.err;
  ASSERT_EQ(ablated.code, 0) << ablated.err;
  const auto a = nlohmann::json::parse(ablated.out), c = nlohmann::json::parse(clean.out);
  EXPECT_EQ(a["ablate"], "1:2");
  EXPECT_EQ(a["ablate_mode"], "mean");
  EXPECT_FALSE(c.contains("ablate"));
  EXPECT_NE(a["loss_nats"].get<double>(), c["loss_nats"].get<double>());
}

TEST_F(Cli, HeadsJsonKeepsItsKeysAndAddsTheStatistics) {
  const auto r = cli({"heads", "--model", *model_, "--tokens", "1,2,3,1,2,3", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["heads"].size(), 8u);
  for (const char* key : {"layer", "head", "kv_head", "previous_token", "induction", "first_token", "self", "label",
                          "entropy_bits", "mean_distance", "sink", "diagonal"})
    EXPECT_TRUE(j["heads"][0].contains(key)) << key;
}

TEST_F(Cli, HeadsImportanceGivesAnLByHGridPerMode) {
  const auto r = cli({"heads", "--model", *model_, "--tokens", "1,2,3,1,2,3", "--importance", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["targets"], 5);
  EXPECT_GT(j["base_loss_nats"].get<double>(), 0.0);
  ASSERT_EQ(j["heads"].size(), 8u);
  for (const char* grid : {"grid_zero", "grid_mean"}) {
    ASSERT_EQ(j[grid].size(), 2u) << grid;
    EXPECT_EQ(j[grid][1].size(), 4u) << grid;
  }
  EXPECT_EQ(j["grid_zero"][1][2], j["heads"][6]["zero"]);
}

}  // namespace
}  // namespace attnviz

namespace attnviz {
namespace {

// bench and eval on hybrid models (Qwen3.5's linear layers, LFM2's convolutions): bench times
// a head of its softmax layers only (it read every layer's softmax, and a linear layer has
// none), eval runs; dump writes each layer kind's own tensors.
// --chat FILE.json runs the text the model's chat template renders (chat_template.jinja in
// the model directory), tokenized without added special tokens, as apply_chat_template's
// encode does: the same ids as `tokenize --no-special` on what `chat` prints.
TEST_F(Cli, ChatRunsTheTextTheTemplateRenders) {
  const std::string dir = test::make_model_dir(test::small_config("llama", 2, 32, 4, 2, 96, 64), 3, "cli-chat");
  const std::string msgs = test::temp_dir("cli-chat") + "/m.json";
  {
    std::ofstream(dir + "/chat_template.jinja")
        << "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
    std::ofstream(msgs) << R"([{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"}])";
  }
  const auto shown = cli({"chat", "--model", dir, "--messages", msgs});
  ASSERT_EQ(shown.code, 0) << shown.err;
  EXPECT_EQ(shown.out, "<user>Hi there\n<assistant>Hello!\n<assistant>");
  EXPECT_EQ(cli({"chat", "--model", dir, "--messages", msgs, "--no-generation-prompt"}).out,
            "<user>Hi there\n<assistant>Hello!\n");
  const auto ids = cli({"tokenize", "--model", dir, "--text", shown.out, "--no-special", "--json"});
  ASSERT_EQ(ids.code, 0) << ids.err;
  const std::string out = test::temp_dir("cli-chat") + "/d.safetensors";
  const auto r = cli({"dump", "--model", dir, "--chat", msgs, "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto f = SafetensorsFile::open(out);
  EXPECT_EQ(f.read_i32(*f.find("tokens")), nlohmann::json::parse(ids.out)["ids"].get<std::vector<int32_t>>());
  // Bad input: no template, text and chat together, a file that is not a list of messages.
  const auto none = cli({"dump", "--model", *model_, "--chat", msgs, "--out", out});
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("has no chat template"), std::string::npos) << none.err;
  EXPECT_EQ(cli({"dump", "--model", dir, "--chat", msgs, "--text", "x", "--out", out}).code, 2);
  std::ofstream(msgs) << R"({"role": "user"})";
  const auto bad = cli({"dump", "--model", dir, "--chat", msgs, "--out", out});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("not a list of messages"), std::string::npos) << bad.err;
}

// What stderr shows of an error that quotes input: control characters escaped (no terminal
// escape sequence, no carriage return, no forged "error:" line), and a bounded length.
TEST(CliErrorOutput, QuotedInputIsEscapedAndCut) {
  const std::string d = test::temp_dir("cli-err");
  const std::string msgs = d + "/m.json", tmpl = d + "/t.jinja", huge = d + "/huge.jinja";
  std::ofstream(msgs) << R"([{"role": "user", "content": "Hi"}])";
  std::ofstream(tmpl) << "{{ raise_exception('bad\x1b[2J\x1b]0;owned\x07\r\nerror: forged line') }}";
  std::ofstream(huge) << "{{ raise_exception('x' * 4000000) }}";
  const auto r = cli({"chat", "--template", tmpl, "--messages", msgs});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("the template raised an error: bad"), std::string::npos) << r.err;
  for (char c : r.err) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << int(c) << " in " << r.err;
  EXPECT_EQ(r.err.find("\nerror:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  const auto big = cli({"chat", "--template", huge, "--messages", msgs});
  EXPECT_EQ(big.code, 1);
  EXPECT_LE(big.err.size(), kMaxPrintedMessageBytes + 100) << big.err.size();
  EXPECT_NE(big.err.find("the template raised an error: xxx"), std::string::npos);
  // An unknown subcommand is quoted safely too.
  const auto sub = cli({"du\x1b[2Jmp"});
  EXPECT_EQ(sub.code, 2);
  EXPECT_EQ(sub.err.find('\x1b'), std::string::npos) << sub.err;
}

TEST(CliErrorOutput, FormatMessageEscapesEveryControlAndIndentsLines) {
  EXPECT_EQ(format_message("error", "a\nb\n  HINT: c"), "error: a\n  b\n  HINT: c\n");
  EXPECT_EQ(format_message("error", "\x1b[2J\x07\r\x7f"), "error: \\x1B[2J\\x07\\x0D\\x7F\n");
  EXPECT_EQ(format_message("warning", "C1 \xc2\x9b and bad \xff\xc3 UTF-8, kept: \xc3\xa9"),
            "warning: C1 \\xC2\\x9B and bad \\xFF\\xC3 UTF-8, kept: \xc3\xa9\n");
  const std::string cut = format_message("note", std::string(kMaxPrintedMessageBytes * 3, 'y'));
  EXPECT_LT(cut.size(), kMaxPrintedMessageBytes + 100);
  EXPECT_NE(cut.find("(" + std::to_string(kMaxPrintedMessageBytes * 3) + " bytes in all)"), std::string::npos);
}

// --template of an empty file names the file; a chat messages file past the limit is refused
// before it is parsed.
TEST(CliErrorOutput, EmptyTemplateAndHugeMessagesFiles) {
  const std::string d = test::temp_dir("cli-chat-limits");
  const std::string msgs = d + "/m.json", empty = d + "/empty.jinja", huge = d + "/huge.json";
  std::ofstream(msgs) << R"([{"role": "user", "content": "Hi"}])";
  std::ofstream(empty).flush();
  const auto e = cli({"chat", "--template", empty, "--messages", msgs});
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find("empty.jinja' (--template) is empty"), std::string::npos) << e.err;
  {
    std::ofstream f(huge);
    f << "[";
    const std::string one = R"({"role": "user", "content": "message of forty bytes"})";
    for (int64_t n = 0; n * static_cast<int64_t>(one.size() + 1) < kMaxChatMessagesBytes + 1000; ++n)
      f << (n ? "," : "") << one;
    f << "]";
  }
  std::ofstream(d + "/t.jinja") << "{{ messages|length }}";
  const auto h = cli({"chat", "--template", d + "/t.jinja", "--messages", huge});
  EXPECT_EQ(h.code, 1);
  EXPECT_NE(h.err.find("more than the"), std::string::npos) << h.err;
}

TEST(CliHybrid, BenchEvalAndDumpRunOnEveryLayerKind) {
  const std::string dir = test::temp_dir("cli-hybrid");
  for (const char* preset : {"qwen3.5-0.8b", "lfm2-350m"}) {
    const std::string m = dir + "/" + preset;
    ASSERT_EQ(test::cli({"random", "--preset", preset, "--layers", "4", "--embd", "32", "--heads", "4", "--kv-heads", "2",
                         "--vocab", "100", "--context", "64", "--out", m})
                  .code,
              0);
    const auto b = test::cli({"bench", "--model", m, "--length", "20", "--reps", "2", "--json"});
    ASSERT_EQ(b.code, 0) << preset << ": " << b.err;
    const auto j = nlohmann::json::parse(b.out);
    EXPECT_GT(j["median_ms"].get<double>(), 0) << preset;
    EXPECT_TRUE(j["head_median_ms"].is_number()) << preset << ": its softmax layers' heads are timed";
    test::write_bytes(dir + "/t.txt", "the cat sat on the mat and the dog sat on the cat");
    const auto e = test::cli({"eval", "--model", m, "--text-file", dir + "/t.txt", "--json"});
    ASSERT_EQ(e.code, 0) << preset << ": " << e.err;
    EXPECT_TRUE(std::isfinite(nlohmann::json::parse(e.out)["loss_nats"].get<double>())) << preset;
    const std::string out = dir + "/d.safetensors";
    ASSERT_EQ(test::cli({"dump", "--model", m, "--tokens", "1,2,3,4", "--out", out}).code, 0) << preset;
    const SafetensorsFile f = SafetensorsFile::open(out);
    const bool qwen = std::string(preset) == "qwen3.5-0.8b";
    EXPECT_EQ(f.find("layers.0.implicit") != nullptr, qwen) << preset;  // layer 0: linear or a convolution
    EXPECT_EQ(f.find("layers.0.q") != nullptr, qwen) << preset;
    EXPECT_NE(f.find(qwen ? "layers.3.gate" : "layers.2.probs"), nullptr) << preset;
  }
}

}  // namespace
}  // namespace attnviz
