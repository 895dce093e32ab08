// The demo's English corpus is read by package (launch/fortunes-files.sh): the
// text files of Debian's `fortunes` and `fortunes-min`, never what other
// languages' fortune packages add to the same folder.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/data_test_util.h"

namespace {

namespace fs = std::filesystem;

TEST(FortuneFiles, AreTheTextFilesOfTheEnglishPackagesOnly) {
  const std::vector<std::string> files = moelab::testing::fortune_files();
  ASSERT_GT(files.size(), 40u) << "Debian's fortunes (launch/install-deps.sh) are missing";
  std::string paths;
  for (const std::string& file : files) {
    const std::string ext = fs::path(file).extension().string();
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(file))) << file;
    EXPECT_TRUE(ext != ".dat" && ext != ".u8") << file;
    paths += " '" + file + "'";
  }
  // dpkg-query -S prints "PACKAGE: PATH" for each path's owner.
  std::vector<std::string> owners;
  ASSERT_TRUE(moelab::testing::output_lines("dpkg-query -S" + paths, &owners));
  ASSERT_EQ(owners.size(), files.size());
  for (const std::string& line : owners) {
    const std::string package = line.substr(0, line.find(':'));
    EXPECT_TRUE(package == "fortunes" || package == "fortunes-min") << line;
  }
}

}  // namespace
