// main() body shared by the multi-rank GoogleTest binaries: MPI for the whole
// run, full output from rank 0, only failures (tagged with the rank) from the
// others, and one exit code that every rank agrees on. A fatal failure (ASSERT,
// or an exception out of the test body) on any rank aborts all ranks: that rank
// leaves the test early, and the others would wait for it in a collective until
// ctest's timeout.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>

#include "util/mpi_session.h"

namespace moelab {

// Prints failed assertions of a non-zero rank, which has no default printer.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
};

class AbortOnFatalFailure : public ::testing::EmptyTestEventListener {
 public:
  explicit AbortOnFatalFailure(int rank) : rank_(rank) {}
  // Remembered here: asking the UnitTest for it while a result is being reported
  // would take a lock gtest already holds.
  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.fatally_failed()) return;
    std::fprintf(stderr, "[rank %d] fatal failure in %s: aborting every rank\n", rank_,
                 test_.empty() ? "set-up" : test_.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

 private:
  int rank_;
  std::string test_;
};

inline int run_mpi_tests(int* argc, char*** argv) {
  MpiSession session(argc, argv);
  ::testing::InitGoogleTest(argc, *argv);
  const int rank = MpiSession::rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  // Appended last, so the failure is printed before the abort.
  ::testing::UnitTest::GetInstance()->listeners().Append(new AbortOnFatalFailure(rank));
  const int local = RUN_ALL_TESTS();
  int global = local;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return global;
}

}  // namespace moelab
