/* Where does each rank run? Prints one line per rank:
 *   rank R size S host H local_rank L sum X
 * L is Open MPI's OMPI_COMM_WORLD_LOCAL_RANK (or Slurm's SLURM_LOCALID under
 * srun), and X the MPI_Allreduce sum of 1..S, so a line also proves that the
 * rank talked to every other (across hosts, over TCP). Ranks print one at a
 * time, in order, but lines from other hosts reach mpirun through their own
 * daemon and may still come out of order: sort them to compare.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[256] = "?";
  gethostname(host, sizeof host);
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (!local) local = getenv("SLURM_LOCALID");
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  for (int r = 0; r < size; r++) {
    if (r == rank) {
      printf("rank %d size %d host %s local_rank %s sum %ld\n", rank, size, host,
             local ? local : "?", sum);
      fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return sum == (long)size * (size + 1) / 2 ? 0 : 1;
}
