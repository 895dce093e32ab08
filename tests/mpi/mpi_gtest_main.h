// main() body shared by the multi-rank GoogleTest binaries: MPI for the whole
// run, full output from rank 0, only failures (tagged with the rank) from the
// others, and one exit code that every rank agrees on.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

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

inline int run_mpi_tests(int* argc, char*** argv) {
  MpiSession session(argc, argv);
  ::testing::InitGoogleTest(argc, *argv);
  const int rank = MpiSession::rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int local = RUN_ALL_TESTS();
  int global = local;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return global;
}

}  // namespace moelab
