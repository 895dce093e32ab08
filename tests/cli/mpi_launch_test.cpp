// The launch variables a job-starting command must not hand down (see
// forget_mpi_launch): Open MPI's singleton and launcher identity goes, the
// user's own Open MPI tunables stay.
#include <gtest/gtest.h>

#include <cstdlib>

#include "util/mpi_session.h"

namespace moelab {
namespace {

TEST(MpiLaunchVariables, LaunchIdentityButNotTunables) {
  for (const char* name :
       {"OMPI_MCA_orte_launch", "OMPI_MCA_ess", "OMPI_MCA_ess_base_jobid",
        "OMPI_MCA_orte_precondition_transports", "OMPI_MCA_pmix", "OMPI_COMMAND",
        "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_NAMESPACE", "PMIX_RANK", "ORTE_SCHIZO_DETECTION"}) {
    EXPECT_TRUE(is_mpi_launch_variable(name)) << name;
  }
  for (const char* name : {"OMPI_MCA_btl", "OMPI_MCA_btl_vader_single_copy_mechanism",
                           "OMPI_MCA_coll_tuned_use_dynamic_rules", "OPAL_PREFIX", "SLURM_JOB_ID",
                           "OMP_NUM_THREADS", "PATH", "OMPI"}) {
    EXPECT_FALSE(is_mpi_launch_variable(name)) << name;
  }
}

TEST(MpiLaunchVariables, ForgetUnsetsOnlyLaunchVariables) {
  setenv("OMPI_MCA_orte_launch", "1", 1);
  setenv("PMIX_NAMESPACE", "slurm.pmix.7.0", 1);
  setenv("OMPI_MCA_btl", "self,vader", 1);
  forget_mpi_launch();
  EXPECT_EQ(std::getenv("OMPI_MCA_orte_launch"), nullptr);
  EXPECT_EQ(std::getenv("PMIX_NAMESPACE"), nullptr);
  ASSERT_NE(std::getenv("OMPI_MCA_btl"), nullptr);
  EXPECT_STREQ(std::getenv("OMPI_MCA_btl"), "self,vader");
  unsetenv("OMPI_MCA_btl");
}

}  // namespace
}  // namespace moelab
