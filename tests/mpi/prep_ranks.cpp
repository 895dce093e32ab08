// ranks: 1 2 3
// `moelab prep` under N ranks writes exactly the bytes a single process writes.
// Rank 0 first prepares a reference alone (MPI_COMM_SELF), then all ranks
// prepare together; every file must match byte for byte.
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "data/prep.h"
#include "util/error.h"
#include "util/log.h"
#include "util/mpi_session.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::map<std::string, std::string> files_of(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file())
      files[fs::relative(entry.path(), dir).string()] = read_bytes(entry);
  }
  return files;
}

// A folder every rank sees: created by rank 0, its name broadcast.
fs::path shared_temp_dir() {
  std::string path(256, '\0');
  if (MpiSession::rank() == 0) {
    std::string pattern = (fs::temp_directory_path() / "moelab_prep_ranks_XXXXXX").string();
    path = mkdtemp(pattern.data());
    path.resize(256, '\0');
  }
  MPI_Bcast(path.data(), 256, MPI_CHAR, 0, MPI_COMM_WORLD);
  return fs::path(path.c_str());
}

std::string document(int i) {
  static const char* kWords[] = {"alpha", "beta",  "gamma", "delta",
                                 "river", "stone", "light", "quiet"};
  std::string text;
  for (int w = 0; w < 4 + i % 9; ++w)
    text += std::string(w ? " " : "") + kWords[(i * 7 + w * 3) % 8];
  return text + ".";
}

void write_corpora(const fs::path& dir) {
  std::ofstream text(dir / "corpus.txt");
  for (int i = 0; i < 257; ++i) text << document(i) << "\n<|endoftext|>\n";
  std::ofstream jsonl(dir / "corpus.jsonl");
  for (int i = 0; i < 131; ++i) {
    if (i % 17 == 5) jsonl << "{broken json\n";
    jsonl << "{\"text\": \"" << document(i + 1000) << "\"}\n";
  }
}

// Reference on rank 0 alone, then the same preparation on every rank.
void expect_same_output_for_all_ranks(PrepOptions options, const fs::path& dir) {
  if (MpiSession::rank() == 0) {
    options.out_dir = (dir / "reference").string();
    run_prep(options, MPI_COMM_SELF);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  options.out_dir = (dir / "parallel").string();
  run_prep(options, MPI_COMM_WORLD);
  int same = 1;
  if (MpiSession::rank() == 0) {
    const auto reference = files_of(dir / "reference");
    const auto parallel = files_of(dir / "parallel");
    EXPECT_GE(reference.size(), 4u);
    for (const auto& [name, bytes] : reference) {
      const auto found = parallel.find(name);
      const bool match = found != parallel.end() && found->second == bytes;
      EXPECT_TRUE(match) << name << " differs at " << MpiSession::size() << " ranks";
      same &= match;
    }
    EXPECT_EQ(reference.size(), parallel.size());
  }
  MPI_Bcast(&same, 1, MPI_INT, 0, MPI_COMM_WORLD);
  EXPECT_TRUE(same);
  MPI_Barrier(MPI_COMM_WORLD);
  if (MpiSession::rank() == 0) fs::remove_all(dir);
}

TEST(PrepRanks, TextWithCarvedValidationIsIdenticalForAnyRankCount) {
  const fs::path dir = shared_temp_dir();
  if (MpiSession::rank() == 0) write_corpora(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  PrepOptions options;
  options.inputs = {(dir / "corpus.txt").string()};
  options.val_fraction = 0.1;
  options.tokenizer.vocab_size = 60;
  options.tokenizer.character_coverage = 1.0;
  options.shard_tokens = 400;
  options.block_docs = 5;  // many exchange rounds
  expect_same_output_for_all_ranks(options, dir);
}

TEST(PrepRanks, JsonlWithSkippedLinesAndThreadsIsIdenticalForAnyRankCount) {
  const fs::path dir = shared_temp_dir();
  if (MpiSession::rank() == 0) write_corpora(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  PrepOptions options;
  options.inputs = {(dir / "corpus.jsonl").string()};
  options.corpus.format = CorpusFormat::kJsonl;
  options.corpus.on_bad_json = BadJsonPolicy::kSkip;
  options.val_count = 10;
  options.tokenizer.vocab_size = 60;
  options.tokenizer.character_coverage = 1.0;
  options.shard_tokens = 300;
  options.block_docs = 4;
  options.threads = 2;
  expect_same_output_for_all_ranks(options, dir);
}

TEST(PrepRanks, BadInputOnOneRankStopsEveryRankWithTheSameError) {
  const fs::path dir = shared_temp_dir();
  if (MpiSession::rank() == 0) write_corpora(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  PrepOptions options;
  options.inputs = {(dir / "corpus.jsonl").string()};
  options.corpus.format = CorpusFormat::kJsonl;  // bad lines fail by default
  options.tokenizer_model = "";
  options.tokenizer.vocab_size = 60;
  options.tokenizer.character_coverage = 1.0;
  options.out_dir = (dir / "out").string();
  try {
    run_prep(options, MPI_COMM_WORLD);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("corpus.jsonl:6: invalid JSON"), std::string::npos)
        << error.what();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (MpiSession::rank() == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace moelab

int main(int argc, char** argv) {
  moelab::MpiSession session(&argc, &argv);
  moelab::init_logging(moelab::MpiSession::rank(), "warn");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
