// The demo's English corpus is read by package (launch/fortunes-files.sh): the
// text files of Debian's `fortunes` and `fortunes-min`, never what other
// languages' fortune packages add to the same folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "data/data_test_util.h"

namespace {

namespace fs = std::filesystem;

// The packages that own `files`' paths, one per file; every file a text file.
std::vector<std::string> owners_of(const std::vector<std::string>& files) {
  std::string paths;
  for (const std::string& file : files) {
    const std::string ext = fs::path(file).extension().string();
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(file))) << file;
    EXPECT_TRUE(ext != ".dat" && ext != ".u8") << file;
    paths += " '" + file + "'";
  }
  // dpkg-query -S prints "PACKAGE: PATH" for each path's owner.
  std::vector<std::string> lines, owners;
  EXPECT_TRUE(moelab::testing::output_lines("dpkg-query -S" + paths, &lines));
  for (const std::string& line : lines) owners.push_back(line.substr(0, line.find(':')));
  EXPECT_EQ(owners.size(), files.size());
  return owners;
}

// The languages' packages (launch/install-deps.sh installs them) add files to
// the English folder and folders inside it (fortunes-zh: chinese, tang300).
TEST(FortuneFiles, AreTheTextFilesOfTheEnglishPackagesOnly) {
  const std::vector<std::string> files = moelab::testing::fortune_files();
  ASSERT_GT(files.size(), 40u) << "Debian's fortunes (launch/install-deps.sh) are missing";
  for (const std::string& package : owners_of(files)) {
    EXPECT_TRUE(package == "fortunes" || package == "fortunes-min") << package;
  }
}

TEST(FortuneFiles, OfALanguageAreTheTextFilesOfItsPackage) {
  std::vector<std::string> files;
  ASSERT_TRUE(moelab::testing::output_lines(
      MOELAB_SOURCE_DIR "/launch/fortunes-files.sh fortunes-zh fortunes-ru", &files))
      << "launch/install-deps.sh installs fortunes-zh and fortunes-ru";
  std::map<std::string, int> files_of;
  for (const std::string& package : owners_of(files)) ++files_of[package];
  EXPECT_GT(files_of["fortunes-zh"], 0);
  EXPECT_GT(files_of["fortunes-ru"], 0);
  EXPECT_EQ(files_of.size(), 2u);
}

}  // namespace
