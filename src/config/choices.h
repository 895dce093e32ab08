// The config keys that take one of a few names, each an enum class with ONE
// name table (ChoiceNames<E>::names). Parsing, --set overrides, the allowed
// values in messages, the resolved-config dump and run.json all spell a value
// through that table, so what moelab writes is what its configs accept.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace moelab {

// model.attention: multi-head attention with RoPE (grouped-query with n_kv_heads),
// or DeepSeek-V2/V3's multi-head latent attention (model/latent_attention.h).
enum class AttentionKind { kMha, kMla };
// model.qk_norm: RMSNorm on queries and keys before RoPE, per head (Qwen3) or
// over the whole projection (OLMoE).
enum class QkNorm { kNone, kHead, kFull };
// model.rope_scaling.type: RoPE frequencies as trained, or stretched for a longer
// context as Llama 3.1 ("llama3") or YaRN ("yarn") define it (model/rope.h).
enum class RopeScalingType { kNone, kLlama3, kYarn };
// moe.gate: the k selected scores normalised to sum to 1, or as they are (model/router.h).
enum class Gate { kTopkSoftmax, kFullSoftmax };
// moe.score: router scores as a softmax over experts, or a sigmoid each (DeepSeek-V3).
enum class Score { kSoftmax, kSigmoid };
// moe.group_score: how group-limited routing scores a group of experts, by the sum
// of its two best affinities (DeepSeek-V3) or by its best one (DeepSeek-V2).
enum class GroupScore { kTop2Sum, kMax };
// moe.drop_policy: who keeps a full expert's seat, by token order or router score.
enum class DropPolicy { kPosition, kScore };
// moe.balance: Switch loss per batch or per sequence, a routing bias, or nothing
// (model/moe_layer.h).
enum class Balance { kSwitch, kSequence, kAuxFree, kNone };
// moe.stats: load-balance statistics over all data-parallel ranks or this micro-batch's.
enum class BalanceStats { kGlobal, kMicroBatch };
// train.device: where tensors live.
enum class TrainDevice { kCpu, kCuda };
// train.precision: kAuto resolves per device (model/precision.h) to kFp32 or kBf16.
enum class Precision { kAuto, kFp32, kBf16 };
// train.expert_gemm: how the routed experts' GEMMs run (model/expert_gemm.h):
// measured at start (kAuto), or one path forced.
enum class ExpertGemm { kAuto, kGrouped, kGroupedAvx512, kPerExpert, kPadded };
// train.profile_ranks: the ranks that write a profiler trace.
enum class ProfileRanks { kRank0, kAll };
// train.activation_checkpointing: what a block recomputes in backward instead of keeping.
enum class ActivationCheckpointing { kNone, kFull, kMoe };
// optim.schedule: the learning rate after the warmup (train/lr_schedule.h).
enum class Schedule { kCosine, kLinear, kConstant, kWsd };
// optim.decay_shape: the shape of a wsd decay.
enum class DecayShape { kLinear, kSqrt };
// parallel.backend: kAuto is NCCL for CUDA tensors where built in, else MPI.
enum class Backend { kAuto, kMpi, kNccl };
// log.progress: kAuto is a bar on a terminal, plain lines otherwise (metrics/progress.h).
enum class ProgressMode { kAuto, kBar, kPlain, kOff };
// log.level: the least severe message logged.
enum class LogLevel { kDebug, kInfo, kWarn, kError };

template <typename E>
struct Named {
  E value;
  const char* name;
};

// ChoiceNames<E>::names: every value of E with its spelling, in the order
// messages list them.
template <typename E>
struct ChoiceNames;

template <>
struct ChoiceNames<AttentionKind> {
  static constexpr Named<AttentionKind> names[] = {{AttentionKind::kMha, "mha"},
                                                   {AttentionKind::kMla, "mla"}};
};
template <>
struct ChoiceNames<QkNorm> {
  static constexpr Named<QkNorm> names[] = {
      {QkNorm::kNone, "none"}, {QkNorm::kHead, "head"}, {QkNorm::kFull, "full"}};
};
template <>
struct ChoiceNames<RopeScalingType> {
  static constexpr Named<RopeScalingType> names[] = {{RopeScalingType::kNone, "none"},
                                                     {RopeScalingType::kLlama3, "llama3"},
                                                     {RopeScalingType::kYarn, "yarn"}};
};
template <>
struct ChoiceNames<Gate> {
  static constexpr Named<Gate> names[] = {{Gate::kTopkSoftmax, "topk_softmax"},
                                          {Gate::kFullSoftmax, "full_softmax"}};
};
template <>
struct ChoiceNames<Score> {
  static constexpr Named<Score> names[] = {{Score::kSoftmax, "softmax"},
                                           {Score::kSigmoid, "sigmoid"}};
};
template <>
struct ChoiceNames<GroupScore> {
  static constexpr Named<GroupScore> names[] = {{GroupScore::kTop2Sum, "top2_sum"},
                                                {GroupScore::kMax, "max"}};
};
template <>
struct ChoiceNames<DropPolicy> {
  static constexpr Named<DropPolicy> names[] = {{DropPolicy::kPosition, "position"},
                                                {DropPolicy::kScore, "score"}};
};
template <>
struct ChoiceNames<Balance> {
  static constexpr Named<Balance> names[] = {{Balance::kSwitch, "switch"},
                                             {Balance::kSequence, "sequence"},
                                             {Balance::kAuxFree, "aux_free"},
                                             {Balance::kNone, "none"}};
};
template <>
struct ChoiceNames<BalanceStats> {
  static constexpr Named<BalanceStats> names[] = {{BalanceStats::kGlobal, "global"},
                                                  {BalanceStats::kMicroBatch, "micro_batch"}};
};
template <>
struct ChoiceNames<TrainDevice> {
  static constexpr Named<TrainDevice> names[] = {{TrainDevice::kCpu, "cpu"},
                                                 {TrainDevice::kCuda, "cuda"}};
};
template <>
struct ChoiceNames<Precision> {
  static constexpr Named<Precision> names[] = {
      {Precision::kAuto, "auto"}, {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}};
};
template <>
struct ChoiceNames<ExpertGemm> {
  static constexpr Named<ExpertGemm> names[] = {{ExpertGemm::kAuto, "auto"},
                                                {ExpertGemm::kGrouped, "grouped"},
                                                {ExpertGemm::kGroupedAvx512, "grouped_avx512"},
                                                {ExpertGemm::kPerExpert, "per_expert"},
                                                {ExpertGemm::kPadded, "padded"}};
};
template <>
struct ChoiceNames<ProfileRanks> {
  static constexpr Named<ProfileRanks> names[] = {{ProfileRanks::kRank0, "rank0"},
                                                  {ProfileRanks::kAll, "all"}};
};
template <>
struct ChoiceNames<ActivationCheckpointing> {
  static constexpr Named<ActivationCheckpointing> names[] = {
      {ActivationCheckpointing::kNone, "none"},
      {ActivationCheckpointing::kFull, "full"},
      {ActivationCheckpointing::kMoe, "moe"}};
};
template <>
struct ChoiceNames<Schedule> {
  static constexpr Named<Schedule> names[] = {{Schedule::kCosine, "cosine"},
                                              {Schedule::kLinear, "linear"},
                                              {Schedule::kConstant, "constant"},
                                              {Schedule::kWsd, "wsd"}};
};
template <>
struct ChoiceNames<DecayShape> {
  static constexpr Named<DecayShape> names[] = {{DecayShape::kLinear, "linear"},
                                                {DecayShape::kSqrt, "sqrt"}};
};
template <>
struct ChoiceNames<Backend> {
  static constexpr Named<Backend> names[] = {
      {Backend::kAuto, "auto"}, {Backend::kMpi, "mpi"}, {Backend::kNccl, "nccl"}};
};
template <>
struct ChoiceNames<ProgressMode> {
  static constexpr Named<ProgressMode> names[] = {{ProgressMode::kAuto, "auto"},
                                                  {ProgressMode::kBar, "bar"},
                                                  {ProgressMode::kPlain, "plain"},
                                                  {ProgressMode::kOff, "off"}};
};
template <>
struct ChoiceNames<LogLevel> {
  static constexpr Named<LogLevel> names[] = {{LogLevel::kDebug, "debug"},
                                              {LogLevel::kInfo, "info"},
                                              {LogLevel::kWarn, "warn"},
                                              {LogLevel::kError, "error"}};
};

// The spelling of `value`, e.g. "aux_free" for Balance::kAuxFree.
template <typename E>
std::string choice_name(E value) {
  for (const auto& n : ChoiceNames<E>::names)
    if (n.value == value) return n.name;
  throw std::logic_error("choice_name: a value missing from its name table");
}

// The value spelled `name`; nullopt when it is none of E's names.
template <typename E>
std::optional<E> parse_choice(const std::string& name) {
  for (const auto& n : ChoiceNames<E>::names)
    if (name == n.name) return n.value;
  return std::nullopt;
}

// Every spelling of E, in table order.
template <typename E>
std::vector<std::string> choice_names() {
  std::vector<std::string> out;
  for (const auto& n : ChoiceNames<E>::names) out.push_back(n.name);
  return out;
}

}  // namespace moelab
