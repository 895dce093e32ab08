// Typed run configuration. Every field has a default; the TOML schema that fills
// these structs (names, types, allowed ranges) lives in schema.cpp, so the
// struct and its validation stay in one obvious place.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/choices.h"

namespace moelab {

// model.rope_scaling: RoPE's frequencies stretched for a context longer than
// the one trained at (model/rope.h has the formulas). "llama3" reads factor,
// original_seq_len and the two frequency factors; "yarn" reads factor,
// original_seq_len, the betas, mscale, mscale_all_dim, attention_factor and
// truncate. The names are transformers' rope_parameters keys, except
// original_seq_len (original_max_position_embeddings).
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;            // context stretch: wavelengths grow up to this
  int64_t original_seq_len = 0;   // the context trained at before the stretch
  double low_freq_factor = 1.0;   // llama3: wavelengths above original / this are divided by factor
  double high_freq_factor = 4.0;  // llama3: below original / this they are kept
  double beta_fast = 32.0;        // yarn: rotations over original_seq_len where the ramp ends
  double beta_slow = 1.0;         //       and where it starts (interpolated below)
  double mscale = 0.0;            // yarn: with mscale_all_dim (both > 0), the attention factor
  double mscale_all_dim = 0.0;    //       is mscale(factor, mscale) / mscale(factor, all_dim)
  double attention_factor = 0.0;  // yarn: cos and sin times this; 0 = from factor and mscales
  bool truncate = true;           // yarn: the ramp's ends rounded out to whole dimensions
};

struct ModelConfig {
  int64_t vocab_size = 4096;  // must match the dataset's tokenizer
  int64_t d_model = 256;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 0;  // 0 = n_heads (plain multi-head); fewer = grouped-query
  int64_t d_ff = 1024;     // dense SwiGLU hidden width
  int64_t seq_len = 256;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double norm_eps = 1e-5;
  // RMSNorm on queries and keys before RoPE: none, per head (Qwen3, over each
  // head's dims) or full (OLMoE, over the whole projection).
  QkNorm qk_norm = QkNorm::kNone;
  // model.head_dim: each head's width; 0 = d_model / n_heads. Set, the heads
  // need not tile d_model (Qwen3: d_model 1024, 16 heads of 128).
  int64_t explicit_head_dim = 0;
  bool qkv_bias = false;  // trainable biases on the q, k, v projections (Qwen2)
  // model.attention = "mla" (DeepSeek-V2/V3, model/latent_attention.h): the
  // query through a rank-q_lora_rank bottleneck (0 = one full-rank projection),
  // keys and values from one kv_lora_rank-wide latent per token; each head's
  // query and key are qk_nope_head_dim dims without RoPE and qk_rope_head_dim
  // with (the RoPE key shared by all heads), its value v_head_dim wide.
  AttentionKind attention = AttentionKind::kMha;
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool tie_embeddings = false;
  double init_std = 0.02;
  bool scaled_residual_init = true;  // output projections get std / sqrt(2 * n_layers)

  int64_t kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  int64_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : d_model / n_heads; }
  bool latent_attention() const { return attention == AttentionKind::kMla; }
  // Each head's query/key and value widths (the scores' and the weighted sum's).
  int64_t qk_head_dim() const {
    return latent_attention() ? qk_nope_head_dim + qk_rope_head_dim : head_dim();
  }
  int64_t value_head_dim() const { return latent_attention() ? v_head_dim : head_dim(); }
  // Whether the heads' widths are set apart from d_model (any d_model fits them).
  bool heads_apart_from_d_model() const { return explicit_head_dim > 0 || latent_attention(); }
};

struct MoeConfig {
  bool enabled = false;
  int64_t num_experts = 4;
  int64_t top_k = 2;
  int64_t d_expert = 512;
  std::vector<int64_t> expert_widths;  // heterogeneous experts: one width each ([] = d_expert)
  int64_t num_shared_experts = 0;
  int64_t d_shared = 0;  // shared-expert width; 0 = num_shared_experts * d_expert
  // The shared expert's output times sigmoid(x . w_g) per token (Qwen2-MoE),
  // w_g [1, d_model] trained; x the FFN input the experts get.
  bool shared_expert_gate = false;
  Gate gate = Gate::kTopkSoftmax;  // topk_softmax (Mixtral) or full_softmax
  Score score = Score::kSoftmax;   // softmax or sigmoid (DeepSeek-V3); router.h
  double route_scale = 1.0;        // gates times this (DeepSeek's routed_scaling_factor)
  // Group-limited routing (DeepSeek-V2/V3, router.h): the experts split into
  // n_groups groups of consecutive ids; a token picks its topk_groups best
  // groups, then its top_k experts among theirs. n_groups = 1: off.
  int64_t n_groups = 1;
  int64_t topk_groups = 1;
  GroupScore group_score = GroupScore::kTop2Sum;
  double capacity_factor = 0.0;  // 0 = dropless
  DropPolicy drop_policy = DropPolicy::kPosition;
  Balance balance = Balance::kSwitch;
  double aux_loss_coef = 0.01;     // Switch load-balancing alpha
  double bias_update_rate = 1e-3;  // aux_free: bias step per optimizer step
  double z_loss_coef = 0.001;      // router z-loss beta
  BalanceStats stats = BalanceStats::kGlobal;

  // Routed expert e's SwiGLU width.
  int64_t expert_width(int64_t e) const {
    return expert_widths.empty() ? d_expert : expert_widths[size_t(e)];
  }
  // The width of the one always-on SwiGLU (0: none).
  int64_t shared_width() const { return d_shared > 0 ? d_shared : num_shared_experts * d_expert; }
  // Which layers are MoE (the rest are dense SwiGLUs of model.d_ff): after the
  // first `first_dense_layers`, every `layer_interval`-th, counting so that the
  // last of each group is MoE (DeepSeek's first_k_dense_replace, Qwen's
  // decoder_sparse_step: layer l is MoE when (l - first + 1) % interval == 0).
  int64_t first_dense_layers = 0;
  int64_t layer_interval = 1;
  bool is_moe_layer(int64_t layer) const {
    return enabled && layer >= first_dense_layers &&
           (layer - first_dense_layers + 1) % layer_interval == 0;
  }
};

// One dataset of a training mixture ([[data.sources]]).
struct DataSource {
  std::string name = "";          // "" = the last component of dir
  std::string dir = "";           // prepared dataset folder
  double weight = 1.0;            // relative share of the training sequences
  int64_t max_unique_tokens = 0;  // > 0: only its first N tokens, repeated as epochs
};

struct DataConfig {
  std::string dir = "";  // prepared dataset folder (holds train/ and val/)
  std::string train_split = "train";
  std::string val_split = "val";
  int64_t prefetch = 4;             // batches read ahead on the loader thread
  int64_t max_unique_tokens = 0;    // > 0: train on the split's first N tokens, epoch after epoch
  std::vector<DataSource> sources;  // a mixture instead of dir alone (config/data_sets.h)
};

struct TrainConfig {
  int64_t seed = 0;
  TrainDevice device = TrainDevice::kCpu;
  Precision precision = Precision::kAuto;      // model/precision.h
  ExpertGemm expert_gemm = ExpertGemm::kAuto;  // model/expert_gemm.h
  int64_t max_steps = 1000;
  double compute_budget = 0;        // training FLOPs; > 0 sets max_steps (apply_compute_budget)
  int64_t batch_seqs = 16;          // global batch in sequences (used when batch_tokens = 0)
  int64_t batch_tokens = 0;         // global batch in tokens; overrides batch_seqs when > 0
  int64_t micro_batch_seqs = 0;     // per-rank micro batch; 0 = whole local batch at once
  int64_t threads = 0;              // intra-op threads per rank; 0 = leave LibTorch's default
  int64_t max_nonfinite_steps = 5;  // stop after this many non-finite losses in a row
  std::string out_dir = "runs/default";
  std::string init_from = "";  // a checkpoint folder whose weights a fresh run starts from
  // Profiling (train/step_profiler.h): steps [first, last] traced ([] = none),
  // on rank 0 or all ranks; on CUDA, the allocator snapshot after a step (0 = none).
  std::vector<int64_t> profile_steps;
  ProfileRanks profile_ranks = ProfileRanks::kRank0;
  int64_t memory_snapshot_step = 0;
  // Recomputed in backward instead of kept: nothing, every block, or each MoE FFN.
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::kNone;
  // Multi-token prediction (DeepSeek-V3, model/mtp.h): D sequential modules, the
  // k-th predicting token i + k + 1; their mean cross-entropies, times
  // mtp_loss_weight / D, join the training loss. 0 = off.
  int64_t mtp_depth = 0;
  double mtp_loss_weight = 0.3;
};

struct OptimConfig {
  double lr = 3e-3;
  Schedule schedule = Schedule::kCosine;         // lr_schedule.h
  double min_lr_ratio = 0.1;                     // the decay ends at lr * min_lr_ratio
  double decay_fraction = 0.2;                   // wsd: the last fraction of max_steps decays
  DecayShape decay_shape = DecayShape::kLinear;  // wsd: linear or sqrt (1 - sqrt(progress))
  int64_t warmup_steps = 100;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // 0 = no clipping
};

struct ParallelConfig {
  int64_t ep = 1;  // expert-parallel group size
  Backend backend = Backend::kAuto;
  // A collective that has not completed after this many seconds ends the job
  // (comm/watchdog.h): a dead, frozen or cut-off peer never hangs a run.
  double timeout_s = 600;
  // How long a collective waits, past timeout_s, for peers whose heartbeats say
  // they are busy on purpose and progressing: writing or reading a checkpoint,
  // or in another long phase (evaluation, profiler export, the first step).
  double checkpoint_timeout_s = 3600;
  double phase_timeout_s = 3600;
  // Start each gradient bucket's all-reduce during backward, as soon as its
  // gradients are complete (parallel/grad_sync.h), instead of after backward.
  bool overlap_grad_sync = true;
  // ZeRO-1: AdamW's moments sharded over each parameter's data-parallel group
  // (parallel/optimizer_shards.h).
  bool shard_optimizer = false;
};

// One validation set ([[eval.sets]]): its loss gets its own val.csv column.
struct EvalSet {
  std::string name = "";
  std::string dir = "";
  std::string split = "val";
};

// One downstream task ([[eval.tasks]]): a task of a prepared task folder
// (`moelab tasks prep`), scored during training; its val.csv columns are
// task/<name>/<metric> (docs/evaluation.md).
struct EvalTask {
  std::string name = "";
  std::string dir = "";
  int64_t interval = 0;  // steps between scorings, a multiple of eval.interval (0 = eval.interval)
  int64_t limit = 0;     // its first N items (0 = all)
};

struct EvalConfig {
  int64_t interval = 100;   // steps between validations (0 = only at the end)
  int64_t max_windows = 0;  // 0 = the whole validation split
  int64_t batch_seqs = 16;
  std::vector<EvalSet> sets;  // [] = data.val_split of the training data alone
  std::vector<EvalTask> tasks;
};

struct LogConfig {
  int64_t interval = 10;  // steps between metrics.jsonl lines
  ProgressMode progress = ProgressMode::kAuto;
  LogLevel level = LogLevel::kInfo;
  bool tensorboard = true;  // rank 0 writes <run>/tb/ event files
};

struct CheckpointConfig {
  int64_t interval = 0;         // steps between checkpoints (0 = only at the end)
  int64_t keep = 2;             // newest checkpoints kept
  std::string resume = "none";  // "none" | "auto" | path of a checkpoint folder
  // The step waits only for a copy of the state into host memory; a thread per
  // rank writes it (checkpoint/run_checkpoint.h).
  bool async = false;
};

struct Config {
  ModelConfig model;
  MoeConfig moe;
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  ParallelConfig parallel;
  EvalConfig eval;
  LogConfig log;
  CheckpointConfig checkpoint;

  // Where the values came from, for messages: a file path or "<defaults>", and
  // for each key set explicitly, "file:line:col" or "--set key=value".
  std::string source = "<defaults>";
  std::map<std::string, std::string> origin;

  int64_t moe_layers() const {
    int64_t n = 0;
    for (int64_t l = 0; l < model.n_layers; ++l) n += moe.is_moe_layer(l);
    return n;
  }
};

}  // namespace moelab
