// `moelab prep` on damaged inputs of each format: exit 2, one error line naming
// the file, no crash and no dataset left behind.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/run_moelab.h"

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(CliPrep, DamagedInputsExitTwoNamingTheFile) {
  const std::string dir = testing::TempDir() + "/prep_input_errors";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // A zstd frame header and nothing after it.
  write_bytes(dir + "/cut.jsonl.zst", std::string("\x28\xB5\x2F\xFD\x24\x40", 6));
  write_bytes(dir + "/bad.parquet", "PAR1 this is not a parquet file");
  write_bytes(dir + "/bad.idx", "NOTMEGATRON and some more bytes to fill a header");
  write_bytes(dir + "/bad.bin", "xx");
  const std::pair<std::string, std::string> cases[] = {
      {"--format jsonl " + dir + "/cut.jsonl.zst", dir + "/cut.jsonl.zst: after line 0"},
      {"--format parquet " + dir + "/bad.parquet", dir + "/bad.parquet: not a readable Parquet"},
      {"--format megatron " + dir + "/bad --vocab-size 10 --eos-id 1",
       dir + "/bad.idx: not a Megatron index"}};
  for (const auto& [args, message] : cases) {
    const moelab::testing::MoelabResult r =
        moelab::testing::moelab("prep " + args + " --force --out " + dir + "/out");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir + "/out/train/manifest.json")) << args;
  }
}

// A tokenizer.json that states an id of 10^12 (which once ended prep with
// std::bad_alloc) or nests deeper than any real file: exit 2 naming the file
// and the field.
TEST(CliPrep, HostileTokenizerJsonExitsTwoNamingTheFileAndTheField) {
  const std::string dir = testing::TempDir() + "/prep_hostile_tokenizer";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  write_bytes(dir + "/corpus.txt", "some text\n");
  write_bytes(dir + "/huge_id.json",
              R"({"model": {"type": "BPE", "vocab": {"a": 1000000000000}, "merges": []}})");
  write_bytes(dir + "/deep.json",
              "{\"model\": " + std::string(5000, '[') + std::string(5000, ']') + "}");
  const std::pair<std::string, std::string> cases[] = {
      {"huge_id.json", "huge_id.json: model.vocab.a: 1000000000000 is out of range"},
      {"deep.json", "deep.json: model[0][0]"}};
  for (const auto& [file, message] : cases) {
    const moelab::testing::MoelabResult r =
        moelab::testing::moelab("prep --input " + dir + "/corpus.txt --tokenizer " + dir + "/" +
                                file + " --force --out " + dir + "/out");
    EXPECT_EQ(r.code, 2) << file << "\n" << r.output;
    EXPECT_NE(r.output.find(dir + "/" + message), std::string::npos) << file << "\n" << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  }
}

// A tokenizer SentencePiece refuses to train (fewer pieces than the corpus's
// required characters: here 600 distinct CJK characters for 64 pieces): exit 2
// naming the input, with SentencePiece's own reason.
TEST(CliPrep, RefusedTokenizerTrainingShowsTheTrainersReason) {
  const std::string dir = testing::TempDir() + "/prep_refused_tokenizer";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string poems;
  for (char32_t c = 0x4E00; c < 0x4E00 + 600; ++c) {
    // Each character as UTF-8 (three bytes in this block), ten to a line.
    poems += {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
              static_cast<char>(0x80 | (c & 0x3F))};
    if (c % 10 == 9) poems += "\n";
  }
  write_bytes(dir + "/poems.txt", poems);
  const moelab::testing::MoelabResult r = moelab::testing::moelab(
      "prep --input " + dir + "/poems.txt --vocab-size 64 --force --out " + dir + "/out");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("training a tokenizer on " + dir + "/poems.txt"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Vocabulary size is smaller than required_chars. 64 vs "),
            std::string::npos)
      << r.output;
}

// Without SentencePiece's tools on the PATH (the PATH holds every other
// program of /usr/bin, which MPI's start needs) the error names the package.
TEST(CliPrep, MissingSentencePieceToolsNameThePackage) {
  const std::string dir = testing::TempDir() + "/prep_no_spm";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/bin");
  for (const auto& program : std::filesystem::directory_iterator("/usr/bin")) {
    const std::string name = program.path().filename().string();
    if (name.rfind("spm_", 0) != 0) {
      std::filesystem::create_symlink(program.path(), dir + "/bin/" + name);
    }
  }
  write_bytes(dir + "/corpus.txt", "some text\n");
  const moelab::testing::MoelabResult r = moelab::testing::moelab(
      "/usr/bin/env PATH=" + dir + "/bin ",
      "prep --input " + dir + "/corpus.txt --vocab-size 64 --force --out " + dir + "/out");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(
      r.output.find("spm_train: not found (is the Debian package 'sentencepiece' installed?)"),
      std::string::npos)
      << r.output;
}

}  // namespace
