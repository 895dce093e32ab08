// The node-local rank that picks a rank's GPU, from each launcher's variable.
// (The MPI shared-memory fallback is tested under mpirun: tests/mpi/comm_collectives.cpp;
// across hosts: tests/cluster/multihost_test.sh.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "comm/cuda_device.h"
#include "util/error.h"

namespace moelab {
namespace {

const char* kVariables[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"};

// Clears the launcher variables for one test and puts them back after.
class NodeLocalRank : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVariables) {
      if (const char* value = std::getenv(v)) saved_.emplace_back(v, value);
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : kVariables) unsetenv(v);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(NodeLocalRank, ReadsEachLauncherInOrder) {
  setenv("MPI_LOCALRANKID", "5", 1);  // MPICH / Hydra
  EXPECT_EQ(node_local_rank(), 5);
  setenv("SLURM_LOCALID", "3", 1);  // srun wins over MPICH's
  EXPECT_EQ(node_local_rank(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);  // Open MPI's mpirun wins over both
  EXPECT_EQ(node_local_rank(), 1);
}

TEST_F(NodeLocalRank, WithoutALauncherOrMpiIsZero) {
  EXPECT_EQ(node_local_rank(), 0);
  setenv("SLURM_LOCALID", "", 1);  // empty counts as unset
  EXPECT_EQ(node_local_rank(), 0);
}

TEST_F(NodeLocalRank, ABadValueIsAnInputErrorNamingTheVariable) {
  for (const char* bad : {"-1", "two", "3x", "99999999"}) {
    setenv("SLURM_LOCALID", bad, 1);
    try {
      node_local_rank();
      ADD_FAILURE() << "accepted SLURM_LOCALID=" << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("SLURM_LOCALID = '" + std::string(bad) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace moelab
