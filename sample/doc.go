// Package sample picks the next token from a model's logits: greedy argmax or
// llama.cpp's default sampler chain (penalties, top-k, top-p, min-p,
// temperature), drawn with a counter-based random number.
//
// The CPU engine calls this package directly; the CUDA backend re-implements
// it as kernels that must choose the same tokens. That is why randomness is
// stateless (Uniform is a pure function of seed and step, so a kernel needs no
// generator state) and why the arithmetic below is spelled out exactly.
//
// # The chain, as a GPU twin must reproduce it
//
// Sample(logits) with Params p at step s (Sampler.Step before the call):
//
//  1. Penalties, in float32, only when p.PenaltyLastN > 0 and some penalty is
//     on. For each distinct token t in the history (Sampler.Recent) with
//     0 <= t < len(logits), occurring c times, with l = logits[t]:
//     if the repeat penalty r is on (r != 0 and r != 1), l = l*r when l <= 0
//     and l = l/r otherwise; then l = l - (float32(c)*freq + presence), where
//     presence counts once and each operation is rounded to float32 on its
//     own (no fused multiply-add: compile the kernel with --fmad=false or use
//     __fmul_rn/__fadd_rn).
//  2. Greedy (p.Temperature <= 0): return Argmax of the penalized logits.
//  3. Candidates are the tokens whose penalized logit is not NaN, ordered by
//     logit descending and then by token id ascending. None: return -1.
//  4. Top-k (0 < k < len(logits)): keep the first k candidates.
//  5. Let m be the first candidate's logit and d(l) the float64 shift
//     d = 0 if l == m, else float64(l) - float64(m). (So +Inf logits share all
//     the mass equally, and if every logit is -Inf all are equally likely.)
//  6. Top-p (0 < p.TopP < 1): w_i = exp(d_i), Z = sum of w_i in candidate
//     order, all float64. Walking the candidates in order with
//     cum += w_i / Z, keep the prefix that ends at the first i with
//     cum >= float64(p.TopP); if none, keep all.
//  7. Min-p (p.MinP > 0): keep the prefix of candidates with
//     d_i >= log(float64(p.MinP)), which is p_i >= MinP * p_max; the first
//     candidate is always kept.
//  8. Temperature and draw: w_i = exp(d_i / float64(p.Temperature)),
//     Z = sum of w_i in order, x = float64(Uniform(p.Seed, s)) * Z. Return the
//     first candidate i whose running sum w_0 + ... + w_i exceeds x (x < cum).
//     Zero-weight candidates are never returned.
//
// Top-p's probabilities are the softmax over the candidates left by top-k,
// before temperature, as in llama.cpp. When top-k is off, Z in step 6 is
// summed over all candidates in token-id order instead, so that only the
// kept prefix has to be sorted; it is the same number up to rounding in the
// last bits. (Top-k, top-p and min-p all off is the one case that sorts the
// whole vocabulary.)
//
// Everything but exp and the order of float64 sums is exact IEEE arithmetic,
// so a twin that follows these steps in float64 picks the same token except
// when x or the top-p target lies within float64 rounding error of a
// boundary, a chance per draw far below 10^-9. A float32 twin would disagree
// about once in 10^7 draws.
package sample
