#include "config/schema.h"

#include <charconv>
#include <cmath>
#include <memory>
#include <sstream>

namespace moelab {
namespace {

Field integer(std::string key, int64_t* p, double min, std::string help,
              std::optional<double> max = std::nullopt) {
  Field f;
  f.key = std::move(key);
  f.value = p;
  f.min = min;
  f.max = max;
  f.help = std::move(help);
  return f;
}

Field real(std::string key, double* p, double min, bool min_exclusive, std::string help,
           std::optional<double> max = std::nullopt) {
  Field f;
  f.key = std::move(key);
  f.value = p;
  f.min = min;
  f.min_exclusive = min_exclusive;
  f.max = max;
  f.help = std::move(help);
  return f;
}

Field integers(std::string key, std::vector<int64_t>* p, double min, std::string help) {
  Field f;
  f.key = std::move(key);
  f.value = p;
  f.min = min;
  f.help = std::move(help);
  return f;
}

Field flag(std::string key, bool* p, std::string help) {
  Field f;
  f.key = std::move(key);
  f.value = p;
  f.help = std::move(help);
  return f;
}

Field text(std::string key, std::string* p, std::string help) {
  Field f;
  f.key = std::move(key);
  f.value = p;
  f.help = std::move(help);
  return f;
}

template <typename E>
Field choice(std::string key, E* p, std::string help) {
  Field f;
  f.key = std::move(key);
  f.value = Choice::of(p);
  f.help = std::move(help);
  return f;
}

std::string format_number(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  // TOML needs a '.' or exponent to read the value back as a float.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::vector<Field> source_fields(const std::string& prefix, DataSource& s) {
  return {
      text(prefix + ".name", &s.name, "label in metrics (\"\" = the last component of dir)"),
      text(prefix + ".dir", &s.dir, "prepared dataset folder"),
      real(prefix + ".weight", &s.weight, 0, true, "relative share of the training sequences"),
      integer(prefix + ".max_unique_tokens", &s.max_unique_tokens, 0,
              "> 0: only its first N tokens, repeated as epochs"),
  };
}

std::vector<Field> eval_set_fields(const std::string& prefix, EvalSet& s) {
  return {
      text(prefix + ".name", &s.name, "its val.csv column is val_loss/<name>"),
      text(prefix + ".dir", &s.dir, "prepared dataset folder"),
      text(prefix + ".split", &s.split, "split evaluated"),
  };
}

std::vector<Field> eval_task_fields(const std::string& prefix, EvalTask& t) {
  return {
      text(prefix + ".name", &t.name, "task in dir; its val.csv columns are task/<name>/<metric>"),
      text(prefix + ".dir", &t.dir, "prepared task folder (moelab tasks prep --out)"),
      integer(prefix + ".interval", &t.interval, 0,
              "steps between scorings, a multiple of eval.interval (0 = every validation)"),
      integer(prefix + ".limit", &t.limit, 0, "its first N items (0 = all)"),
  };
}

template <typename T>
TableList table_list(std::string key, std::vector<T>* items,
                     std::vector<Field> (*fields)(const std::string&, T&), std::string help) {
  TableList list;
  list.key = key;
  list.help = std::move(help);
  list.size = [items] { return items->size(); };
  list.resize = [items](size_t n) { items->resize(n); };
  // A default entry for the dump outlives the call: it is kept with the lambda.
  auto spare = std::make_shared<T>();
  list.entry = [items, fields, key, spare](size_t i) {
    T& item = i < items->size() ? (*items)[i] : *spare;
    return fields(key + "[" + std::to_string(i) + "]", item);
  };
  return list;
}

}  // namespace

std::string toml_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

std::string Field::allowed() const {
  std::ostringstream os;
  if (std::holds_alternative<bool*>(value)) return "true or false";
  if (std::holds_alternative<std::string*>(value)) return "a string";
  if (const auto* c = std::get_if<Choice>(&value)) {
    os << "one of ";
    for (size_t i = 0; i < c->names.size(); ++i) os << (i ? ", " : "") << toml_string(c->names[i]);
    return os.str();
  }
  if (std::holds_alternative<std::vector<int64_t>*>(value)) {
    os << "a list of integers >= " << int64_t(*min);
    return os.str();
  }
  const bool is_int = std::holds_alternative<int64_t*>(value);
  os << (is_int ? "an integer" : "a number");
  auto num = [&](double v) { return is_int ? std::to_string(int64_t(v)) : format_number(v); };
  if (min && max) {
    os << " in " << (min_exclusive ? "(" : "[") << num(*min) << ", " << num(*max) << "]";
  } else if (min) {
    os << (min_exclusive ? " > " : " >= ") << num(*min);
  }
  return os.str();
}

std::string Field::check() const {
  double v = 0;
  if (auto* const* i = std::get_if<int64_t*>(&value)) {
    v = double(**i);
  } else if (auto* const* d = std::get_if<double*>(&value)) {
    v = **d;
    if (!std::isfinite(v)) return "must be finite";
  } else if (auto* const* list = std::get_if<std::vector<int64_t>*>(&value)) {
    for (int64_t x : **list)
      if (x < *min) return "expected " + allowed();
    return "";
  } else {
    return "";
  }
  const bool below = min && (min_exclusive ? v <= *min : v < *min);
  const bool above = max && v > *max;
  return below || above ? "expected " + allowed() : "";
}

std::string Field::value_string() const {
  if (auto* const* i = std::get_if<int64_t*>(&value)) return std::to_string(**i);
  if (auto* const* d = std::get_if<double*>(&value)) return format_number(**d);
  if (auto* const* b = std::get_if<bool*>(&value)) return **b ? "true" : "false";
  if (auto* const* list = std::get_if<std::vector<int64_t>*>(&value)) {
    std::string out = "[";
    for (size_t i = 0; i < (*list)->size(); ++i) {
      out += (i ? ", " : "") + std::to_string((**list)[i]);
    }
    return out + "]";
  }
  if (const auto* c = std::get_if<Choice>(&value)) return toml_string(c->get());
  return toml_string(*std::get<std::string*>(value));
}

std::vector<std::string> schema_sections() {
  return {"model", "moe", "data", "train", "optim", "parallel", "eval", "log", "checkpoint"};
}

namespace {

// [model.rope_scaling]: which keys each type reads is validate()'s concern (load.cpp).
std::vector<Field> rope_scaling_fields(RopeScaling& r) {
  const std::string at = "model.rope_scaling.";
  return {
      choice(at + "type", &r.type, "RoPE frequency scaling for a longer context"),
      real(at + "factor", &r.factor, 1.0, false, "how many times the trained context"),
      integer(at + "original_seq_len", &r.original_seq_len, 0,
              "the context trained at (transformers' original_max_position_embeddings)"),
      real(at + "low_freq_factor", &r.low_freq_factor, 0, true,
           "llama3: wavelengths above original_seq_len / this are divided by factor"),
      real(at + "high_freq_factor", &r.high_freq_factor, 0, true,
           "llama3: wavelengths below original_seq_len / this are kept"),
      real(at + "beta_fast", &r.beta_fast, 0, true,
           "yarn: rotations within original_seq_len above which frequencies are kept"),
      real(at + "beta_slow", &r.beta_slow, 0, true,
           "yarn: rotations below which frequencies are divided by factor"),
      real(at + "mscale", &r.mscale, 0, false,
           "yarn: with mscale_all_dim, sets the attention factor (0 = unset)"),
      real(at + "mscale_all_dim", &r.mscale_all_dim, 0, false,
           "yarn: with mscale, sets the attention factor (0 = unset)"),
      real(at + "attention_factor", &r.attention_factor, 0, false,
           "yarn: cos and sin times this (0 = 0.1 ln(factor) + 1, or from the mscales)"),
      flag(at + "truncate", &r.truncate, "yarn: round the ramp's ends out to whole dimensions"),
  };
}

std::vector<Field> model_fields(ModelConfig& m) {
  std::vector<Field> fields = {
      integer("model.vocab_size", &m.vocab_size, 2, "tokens in the vocabulary (the dataset's)"),
      integer("model.d_model", &m.d_model, 1, "residual stream width"),
      integer("model.n_layers", &m.n_layers, 1, "transformer blocks"),
      integer("model.n_heads", &m.n_heads, 1, "attention heads"),
      integer("model.n_kv_heads", &m.n_kv_heads, 0, "key/value heads (0 = n_heads)"),
      integer("model.head_dim", &m.explicit_head_dim, 0,
              "width of each head (0 = d_model / n_heads)"),
      integer("model.d_ff", &m.d_ff, 1, "dense SwiGLU hidden width"),
      integer("model.seq_len", &m.seq_len, 1, "context length in tokens"),
      real("model.rope_theta", &m.rope_theta, 0, true, "RoPE base"),
      real("model.norm_eps", &m.norm_eps, 0, true, "RMSNorm epsilon"),
      choice("model.qk_norm", &m.qk_norm,
             "RMSNorm on queries and keys before RoPE: per head (Qwen3) or whole (OLMoE)"),
      flag("model.qkv_bias", &m.qkv_bias, "trainable biases on the q, k, v projections (Qwen2)"),
      choice("model.attention", &m.attention,
             "mha (grouped-query with n_kv_heads) or mla (DeepSeek's latent attention)"),
      integer("model.q_lora_rank", &m.q_lora_rank, 0,
              "mla: the query's low-rank bottleneck (0 = full-rank query)"),
      integer("model.kv_lora_rank", &m.kv_lora_rank, 0, "mla: width of the key/value latent"),
      integer("model.qk_nope_head_dim", &m.qk_nope_head_dim, 0,
              "mla: each head's query/key dims without RoPE"),
      integer("model.qk_rope_head_dim", &m.qk_rope_head_dim, 0,
              "mla: each head's query/key dims with RoPE (the key's shared by all heads)"),
      integer("model.v_head_dim", &m.v_head_dim, 0, "mla: each head's value width"),
      flag("model.tie_embeddings", &m.tie_embeddings, "share embedding and output head"),
      real("model.init_std", &m.init_std, 0, true, "std of the normal initialisation"),
      flag("model.scaled_residual_init", &m.scaled_residual_init,
           "residual output projections use init_std / sqrt(2 n_layers)"),
  };
  for (auto& f : rope_scaling_fields(m.rope_scaling)) fields.push_back(std::move(f));
  return fields;
}

std::vector<Field> moe_fields(MoeConfig& e) {
  return {
      flag("moe.enabled", &e.enabled, "replace every dense FFN with routed experts"),
      integer("moe.num_experts", &e.num_experts, 1, "routed experts per layer"),
      integer("moe.top_k", &e.top_k, 1, "experts per token"),
      integer("moe.d_expert", &e.d_expert, 1, "SwiGLU hidden width of each expert"),
      integers("moe.expert_widths", &e.expert_widths, 1,
               "one width per expert (heterogeneous experts; [] = d_expert for all)"),
      integer("moe.num_shared_experts", &e.num_shared_experts, 0, "always-on experts"),
      integer("moe.d_shared", &e.d_shared, 0,
              "shared-expert width (0 = num_shared_experts * d_expert)"),
      flag("moe.shared_expert_gate", &e.shared_expert_gate,
           "the shared expert's output times sigmoid(x . w_g), w_g trained (Qwen2-MoE)"),
      integer("moe.first_dense_layers", &e.first_dense_layers, 0,
              "the first layers keep a dense FFN (DeepSeek's first_k_dense_replace)"),
      integer("moe.layer_interval", &e.layer_interval, 1,
              "after those, every n-th layer is MoE, the rest dense (Qwen's decoder_sparse_step)"),
      choice("moe.gate", &e.gate,
             "gate weights: normalised over the chosen k, or the scores as they are"),
      choice("moe.score", &e.score,
             "router scores: softmax over experts, or a sigmoid each (DeepSeek-V3)"),
      real("moe.route_scale", &e.route_scale, 0, true, "gate weights times this"),
      integer("moe.n_groups", &e.n_groups, 1,
              "expert groups of consecutive ids for group-limited routing (1 = off)"),
      integer("moe.topk_groups", &e.topk_groups, 1,
              "groups a token picks its top_k experts from (DeepSeek's topk_group)"),
      choice("moe.group_score", &e.group_score,
             "a group's score: the sum of its two best affinities (V3) or its best (V2)"),
      real("moe.capacity_factor", &e.capacity_factor, 0, false, "0 = dropless"),
      choice("moe.drop_policy", &e.drop_policy,
             "over capacity: keep assignments in token order or by router score"),
      choice("moe.balance", &e.balance,
             "load balancing: Switch loss per batch or per sequence, routing bias, or none"),
      real("moe.aux_loss_coef", &e.aux_loss_coef, 0, false, "load-balancing alpha"),
      real("moe.bias_update_rate", &e.bias_update_rate, 0, true,
           "aux_free: routing-bias step per optimizer step"),
      real("moe.z_loss_coef", &e.z_loss_coef, 0, false, "router z-loss beta"),
      choice("moe.stats", &e.stats, "load-balance statistics scope"),
  };
}

std::vector<Field> data_fields(DataConfig& d) {
  return {
      text("data.dir", &d.dir, "prepared dataset folder"),
      text("data.train_split", &d.train_split, "split trained on"),
      text("data.val_split", &d.val_split, "split evaluated on"),
      integer("data.prefetch", &d.prefetch, 1, "batches read ahead"),
      integer("data.max_unique_tokens", &d.max_unique_tokens, 0,
              "> 0: train on the first N tokens of the split only, reshuffled every epoch"),
  };
}

std::vector<Field> train_fields(TrainConfig& t) {
  return {
      integer("train.seed", &t.seed, 0, "seed for weights and data order"),
      choice("train.device", &t.device, "where tensors live"),
      choice("train.precision", &t.precision,
             "compute precision; auto = bf16 on CUDA, and on a CPU where native bf16 matmul "
             "(AMX, AVX512-BF16) measures clearly faster than fp32's"),
      choice("train.expert_gemm", &t.expert_gemm,
             "routed experts' GEMMs: auto = the fastest path measured at start, or one forced"),
      integer("train.max_steps", &t.max_steps, 1, "optimizer steps"),
      real("train.compute_budget", &t.compute_budget, 0, false,
           "training FLOPs; > 0 sets max_steps = budget / (FLOPs per token x batch tokens)"),
      integer("train.batch_seqs", &t.batch_seqs, 1, "global batch in sequences"),
      integer("train.batch_tokens", &t.batch_tokens, 0,
              "global batch in tokens (0 = use batch_seqs)"),
      integer("train.micro_batch_seqs", &t.micro_batch_seqs, 0, "per-rank micro batch (0 = all)"),
      integer("train.threads", &t.threads, 0, "intra-op threads per rank (0 = default)"),
      integer("train.max_nonfinite_steps", &t.max_nonfinite_steps, 1,
              "stop after this many non-finite losses in a row"),
      text("train.out_dir", &t.out_dir, "run folder"),
      text("train.init_from", &t.init_from,
           "checkpoint whose weights a fresh run starts from (moelab upcycle / convert write one)"),
      integers(
          "train.profile_steps", &t.profile_steps, 1,
          "[first, last]: steps traced by LibTorch's profiler into <run>/profile/ ([] = none)"),
      choice("train.profile_ranks", &t.profile_ranks, "ranks that write a trace"),
      choice("train.activation_checkpointing", &t.activation_checkpointing,
             "recompute in backward instead of keeping: every block, or each MoE FFN"),
      integer("train.memory_snapshot_step", &t.memory_snapshot_step, 0,
              "cuda: step after which the allocator snapshot is written (0 = none)"),
      integer("train.mtp_depth", &t.mtp_depth, 0,
              "multi-token prediction modules (DeepSeek-V3; 0 = off)"),
      real("train.mtp_loss_weight", &t.mtp_loss_weight, 0, false,
           "lambda: the MTP loss is lambda / depth x the sum of each depth's cross-entropy"),
  };
}

std::vector<Field> optim_fields(OptimConfig& o) {
  return {
      real("optim.lr", &o.lr, 0, true, "peak learning rate"),
      choice("optim.schedule", &o.schedule, "learning-rate schedule after the warmup"),
      real("optim.decay_fraction", &o.decay_fraction, 0, false,
           "wsd: the last fraction of max_steps that decays", 1.0),
      choice("optim.decay_shape", &o.decay_shape, "wsd: the decay's shape"),
      real("optim.min_lr_ratio", &o.min_lr_ratio, 0, false, "decay floor as a fraction of lr", 1.0),
      integer("optim.warmup_steps", &o.warmup_steps, 0, "linear warmup steps"),
      real("optim.beta1", &o.beta1, 0, false, "AdamW beta1", 0.999999),
      real("optim.beta2", &o.beta2, 0, false, "AdamW beta2", 0.999999),
      real("optim.eps", &o.eps, 0, true, "AdamW epsilon"),
      real("optim.weight_decay", &o.weight_decay, 0, false, "decoupled weight decay (matrices)"),
      real("optim.grad_clip", &o.grad_clip, 0, false, "global gradient norm bound (0 = off)"),
  };
}

std::vector<Field> parallel_fields(ParallelConfig& p) {
  return {
      integer("parallel.ep", &p.ep, 1, "expert-parallel group size"),
      choice("parallel.backend", &p.backend, "collective backend"),
      real("parallel.timeout_s", &p.timeout_s, 0, true,
           "seconds a collective may wait for its peers before the job ends"),
      real("parallel.checkpoint_timeout_s", &p.checkpoint_timeout_s, 0, true,
           "seconds a collective may wait for peers writing or reading a checkpoint"),
      real("parallel.phase_timeout_s", &p.phase_timeout_s, 0, true,
           "seconds a collective may wait for peers evaluating, exporting a profile or in "
           "their first step"),
      flag("parallel.overlap_grad_sync", &p.overlap_grad_sync,
           "exchange gradient buckets during backward, as they complete"),
      flag("parallel.shard_optimizer", &p.shard_optimizer,
           "ZeRO-1: gradients reduce-scattered and AdamW state sharded over each parameter's "
           "data-parallel ranks"),
  };
}

std::vector<Field> eval_fields(EvalConfig& v) {
  return {
      integer("eval.interval", &v.interval, 0, "steps between validations (0 = end only)"),
      integer("eval.max_windows", &v.max_windows, 0, "validation windows (0 = all)"),
      integer("eval.batch_seqs", &v.batch_seqs, 1, "sequences per evaluation batch"),
  };
}

std::vector<Field> log_fields(LogConfig& l) {
  return {
      integer("log.interval", &l.interval, 1, "steps between metrics lines"),
      choice("log.progress", &l.progress, "progress display"),
      choice("log.level", &l.level, "log level"),
      flag("log.tensorboard", &l.tensorboard,
           "rank 0 writes TensorBoard event files into <run>/tb/"),
  };
}

std::vector<Field> checkpoint_fields(CheckpointConfig& k) {
  return {
      integer("checkpoint.interval", &k.interval, 0, "steps between checkpoints (0 = end only)"),
      integer("checkpoint.keep", &k.keep, 1, "newest checkpoints kept"),
      text("checkpoint.resume", &k.resume, "\"none\", \"auto\" or a checkpoint folder"),
      flag("checkpoint.async", &k.async,
           "the step waits only for a host copy of the state; a thread per rank writes it"),
  };
}

}  // namespace

// Every key, in the order `moelab config` lists them.
std::vector<Field> schema(Config& c) {
  std::vector<Field> all;
  for (auto&& section : {model_fields(c.model), moe_fields(c.moe), data_fields(c.data),
                         train_fields(c.train), optim_fields(c.optim), parallel_fields(c.parallel),
                         eval_fields(c.eval), log_fields(c.log), checkpoint_fields(c.checkpoint)}) {
    all.insert(all.end(), section.begin(), section.end());
  }
  return all;
}

std::vector<TableList> table_lists(Config& c) {
  return {
      table_list("data.sources", &c.data.sources, &source_fields,
                 "a training mixture, sampled by weight (none = data.dir alone)"),
      table_list("eval.sets", &c.eval.sets, &eval_set_fields,
                 "validation sets, each its own val.csv column (none = data.val_split)"),
      table_list("eval.tasks", &c.eval.tasks, &eval_task_fields,
                 "downstream tasks scored in the loop (docs/evaluation.md)"),
  };
}

}  // namespace moelab
