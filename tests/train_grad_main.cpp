// attnviz_train_grad: the trainer's loss and gradient for one batch, for the PyTorch parity
// test (tests/reference/train_parity.py).
//   attnviz_train_grad MODEL_DIR B T ID,ID,... OUT_DIR
// The B·(T+1) ids are B rows of T+1 tokens: inputs = row[0..T), targets = row[1..T].
// Prints the loss (%.17g) on stdout; writes the gradients to OUT_DIR as a model directory
// (HF names and layouts, exactly like a checkpoint), so gradient and weight share a name.
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>

#include "core/train/backward.h"
#include "core/model/model.h"
#include "core/tokenize/tokenizer.h"
#include "core/train/train.h"

int main(int argc, char** argv) {
  using namespace attnviz;
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s MODEL_DIR B T ID,ID,... OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    const auto m = load_model(argv[1]);
    const int B = std::stoi(argv[2]), T = std::stoi(argv[3]);
    std::vector<int> all;
    std::stringstream ss(argv[4]);
    for (std::string item; std::getline(ss, item, ',');) all.push_back(std::stoi(item));
    if (static_cast<int>(all.size()) != B * (T + 1)) throw std::runtime_error("need B*(T+1) ids");
    std::vector<int> in, tg;
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        in.push_back(all[b * (T + 1) + t]);
        tg.push_back(all[b * (T + 1) + t + 1]);
      }
    Params<float> p = params_from_weights<float>(m->weights);
    if (m->config.tie_embeddings) p.lm_head.resize(0, 0);
    Params<float> g = zeros_like(p);
    Activations<float> acts;
    const float loss = model_loss<float>(m->config, p, in, tg, B, T, &g, acts);
    std::vector<std::string> vocab;
    for (int i = 0; i < m->config.vocab_size; ++i) vocab.push_back("<" + std::to_string(i) + ">");
    save_checkpoint(argv[5], m->config, g, vocab, nullptr, nullptr);
    std::printf("%.17g\n", static_cast<double>(loss));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
