// Shared by the study tests: file writing, and a tiny
// base config plus a 3-variant study around it.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "common/temp_dir.h"
#include "study/study_spec.h"
#include "util/error.h"

namespace moelab::testing {

inline void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The InputError message parse_study throws for `text`, or "" if none.
inline std::string error_of(const std::string& text) {
  try {
    parse_study(text, "/studies/s.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A fabricated run folder: validation at steps 5 and 10 (best + 0.5, then
// best) and, when `done`, its DONE record.
inline void write_run(const std::string& dir, double best, bool done) {
  write_file(dir + "/val.csv", "step,tokens,val_loss,best_val_loss\n5,640," +
                                   std::to_string(best + 0.5) + "," + std::to_string(best + 0.5) +
                                   "\n10,1280," + std::to_string(best) + "," +
                                   std::to_string(best) + "\n");
  if (done) {
    write_file(dir + "/DONE",
               "{\"steps\": 10, \"tokens\": 1280, \"best_val_loss\": " + std::to_string(best) +
                   ", \"final_val_loss\": " + std::to_string(best + 0.01) +
                   ", \"nonfinite_steps\": 0, \"wall_seconds\": 2.0}\n");
  }
}

// d_model 32, 2 layers, seq_len 32: trains in about a second on one core.
inline std::string tiny_base_config(const std::string& data_dir) {
  return "[model]\nvocab_size = 128\nd_model = 32\nn_layers = 2\nn_heads = 2\nd_ff = 64\n"
         "seq_len = 32\n\n[data]\ndir = \"" +
         data_dir +
         "\"\n\n[train]\nmax_steps = 10\nbatch_seqs = 4\nprecision = \"fp32\"\n\n"
         "[optim]\nwarmup_steps = 2\n\n[eval]\ninterval = 5\n\n[log]\nprogress = \"off\"\n";
}

// moe (4 experts, top-2) and two dense variants matched to its active and total
// parameter counts; `extra` is appended to the [study] table.
inline std::string tiny_study(const std::string& out_root, const std::string& seeds = "[0, 1]",
                              const std::string& extra = "") {
  return "[study]\nname = \"tiny\"\nbase = \"base.toml\"\nseeds = " + seeds + "\nout_root = \"" +
         out_root + "\"\n" + extra +
         "\n[study.set]\n\"train.max_steps\" = 10\n\n"
         "[[variant]]\nname = \"moe\"\nset = { \"moe.enabled\" = true, \"moe.num_experts\" = 4, "
         "\"moe.top_k\" = 2, \"moe.d_expert\" = 32 }\n\n"
         "[[variant]]\nname = \"dense_active\"\nmatch = { variant = \"moe\", target = "
         "\"active\" }\n\n"
         "[[variant]]\nname = \"dense_total\"\nmatch = { variant = \"moe\", target = \"total\" "
         "}\n";
}

}  // namespace moelab::testing
