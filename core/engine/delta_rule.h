// The gated delta rule (Qwen3.5's linear-attention layers, Mixer::GatedDeltaNet) as pure
// functions on row-major float arrays: the causal depthwise convolution in front of it,
// the recurrence, and the exact (T, T) matrix it is equivalent to.
//
// For one value head, with q_t, k_t (dk), v_t (dv), β_t ∈ (0, 1) and the log-decay g_t ≤ 0,
// the memory S (dk, dv) starts at 0 and for t = 0 … T−1:
//   S ← e^{g_t}·S;  δ = β_t·(v_t − Sᵀk_t);  S ← S + k_t·δᵀ;  o_t = Sᵀq_t.
// With a zero start, o_t = Σ_{s≤t} A[t,s]·v_s exactly, where row t of A comes from a backward
// sweep: w ← q_t; for s = t, t−1, …, 0: A[t,s] = β_s·(w·k_s); w ← e^{g_s}·(w − β_s·(w·k_s)·k_s).
// A's rows need not sum to 1 and its entries may be negative: the delta rule overwrites
// what memory held. Letters: T tokens, Ch channels, K taps, dk / dv key / value dims.
#pragma once
#include <cstdint>

namespace attnviz {

// Rows between the recorded snapshots of a linear layer's memory (LayerTrace::state_snaps):
// an edit at row p replays at most this many rows before it.
constexpr int kStateEvery = 256;

// out[t − r0, ch] = act(Σ_k w[ch·K + k] · x[t − (K−1) + k, ch] + bias[ch]) for rows t of
// [r0, T), with rows before 0 read as zero; act is SiLU (Qwen3.5's convolution) or nothing
// (LFM2's), bias null for none. x (T, Ch) and out (T − r0, Ch), rows ldx / ldo floats
// apart; w (Ch, K). Also LFM2's short convolution (Mixer::ShortConv).
void causal_conv(const float* x, int64_t ldx, int T, int Ch, const float* w, int K, int r0, float* out, int64_t ldo,
                 const float* bias, bool silu);

// x (n) scaled to unit length, as Hugging Face's l2norm: x · (Σx² + 1e-6)^−½, then × `scale`.
void l2_normalize(float* x, int n, float scale = 1.f);

// Hugging Face's softplus (threshold 20): x above 20 as is, else log(1 + eᵡ).
float softplus(float x);

// The recurrence for one head over rows [t0, t1): q, k rows ldk apart (dk each), v rows ldv
// apart (dv), beta and g contiguous, all indexed by row. `S` (row-major (dk, dv)) holds the
// state after row t0 − 1 (zeros before row 0) and after row t1 − 1: held in float, so that a
// copy taken between two calls continues exactly as the state would have. o (rows ldo
// apart, indexed by row) gets o_t, or nothing when null (a replay). In float, vectorized.
void delta_rule_head(const float* q, const float* k, int64_t ldk, const float* v, int64_t ldv, const float* beta,
                     const float* g, int t0, int t1, int dk, int dv, float* S, float* o, int64_t ldo);

// Rows [r0, r1) of one head's A (each T wide, row-major, rows lda apart): A[t, s] for s ≤ t
// by the backward sweep, 0 for s > t. Inputs as delta_rule_head's; in float, rows swept in
// blocks that share each key, each row's values the same whatever block it is in.
void delta_rule_rows(const float* q, const float* k, int64_t ldk, const float* beta, const float* g, int T, int dk,
                     int r0, int r1, float* A, int64_t lda);

}  // namespace attnviz
