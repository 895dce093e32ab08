// Sparse upcycling: the experts of an MoE layer made from one dense FFN.
//   granularity 1: every expert is a copy of the FFN. With identical experts
//     and gates that sum to 1 (topk_softmax) the layer computes the FFN exactly.
//   granularity g > 1: the FFN's hidden units are cut into g consecutive
//     slices of d_ff / g; expert e is slice e mod g (num_experts a multiple of
//     g), its w2 times g, so that a token whose top-k holds one copy of every
//     slice with equal gates 1/g gets the FFN's output back.
//   reinit_fraction r (Drop-Upcycling): in each expert, round(r x width) hidden
//     units drawn at random get new w1/w3 rows and w2 columns, drawn from a
//     normal with the mean and std of the FFN matrix they replace, so the
//     copies start to differ.
#pragma once

#include <cstdint>
#include <vector>

#include "convert/conversion_options.h"
#include "convert/ffn_split.h"

namespace moelab {

// InputError naming the option for granularity not dividing d_ff or the
// expert count, or a fraction outside [0, 1].
std::vector<FfnWeights> upcycle_experts(const FfnWeights& ffn, const UpcycleOptions& options);

}  // namespace moelab
