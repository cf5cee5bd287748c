// Composition between heads (Elhage et al. 2021, "A Mathematical Framework for Transformer
// Circuits"), from the weights alone: how much an earlier head's output can feed a later
// head's query (Q), key (K) or value (V).
//
// In the row-vector convention the code uses (q = x·W_Q, out = x·W_V·W_O), head h of layer l
// has W_QK = W_Q,h·W_K,hᵀ (C, C; a score is x_i·W_QK·x_jᵀ before RoPE) and W_OV = W_V,h·W_O,h
// (C, C), with the layer's input-norm weight folded into W_Q, W_K and W_V (diag(w)·W) and a
// sandwich post-norm's weight into W_O (W_O·diag(w)); RoPE and the norms' scales are left
// out. For h1 in l1 < l2 and h2 in l2:
//   Q = ‖W_OV1·W_QK2‖_F / (‖W_OV1‖_F·‖W_QK2‖_F)     (h1's output read as h2's query)
//   K = ‖W_QK2·W_OV1ᵀ‖_F / (‖W_OV1‖_F·‖W_QK2‖_F)    (… as h2's key)
//   V = ‖W_OV1·W_OV2‖_F / (‖W_OV1‖_F·‖W_OV2‖_F)     (… as h2's value)
// These are Elhage's ‖W_QKᵀW_OV‖, ‖W_QK·W_OV‖ and ‖W_OV2·W_OV1‖ written in the transposed
// convention. The (C, C) matrices are never formed: each norm is a trace of (d, d) Gram
// matrices, ‖S_aᵀ·M·S_b‖_F with S·Sᵀ a head's Gram matrix and M = W_O,1·W_Q,2 (d, d).
#pragma once
#include <atomic>
#include <vector>

#include "core/model/model.h"

namespace attnviz {

struct Composition {
  int L = 0, H = 0;           // layers and softmax heads per layer
  std::vector<float> q, k, v; // (L, H, L, H) [l1][h1][l2][h2]; 0 where l2 ≤ l1 or a layer is not softmax attention
  float at(const std::vector<float>& s, int l1, int h1, int l2, int h2) const {
    return s[((static_cast<size_t>(l1) * H + h1) * L + l2) * H + h2];
  }
};

// Every pair of softmax heads in different layers (a hybrid's linear and convolution layers
// get 0). `cancel`, when set during the work, makes it throw Cancelled between layers.
Composition head_composition(const Model& m, const std::atomic<bool>* cancel = nullptr);

}  // namespace attnviz
