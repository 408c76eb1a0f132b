/* Open MPI's MPI_Allreduce timed as `murmur bench allreduce` times its own:
 * warm-up rounds, then timed rounds each started by a barrier, the slowest
 * rank's time per round. Built and run by bench/peers/allreduce.sh:
 *
 *   mpicc -O2 bench/peers/allreduce_mpi.c -o build/bench/allreduce_mpi
 *   mpirun -np N --mca btl tcp,self build/bench/allreduce_mpi BYTES ITERS WARMUP
 *
 * One line per timed round ending in time_ms= and busbw_gbps= (nccl-tests'
 * bus bandwidth: BYTES / time x 2(N-1)/N). Not part of libmurmur: it needs
 * mpi.h, which only `make bench-peers` installs.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define ITERS_MAX 1000

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc != 4) {
        if (rank == 0)
            fprintf(stderr, "usage: allreduce_mpi BYTES ITERS WARMUP\n");
        MPI_Finalize();
        return 2;
    }
    long size = atol(argv[1]);
    int iters = atoi(argv[2]), warmup = atoi(argv[3]);
    if (size <= 0 || size % 4 || iters < 1 || iters > ITERS_MAX || warmup < 0) {
        if (rank == 0)
            fprintf(stderr, "allreduce_mpi: bad arguments\n");
        MPI_Finalize();
        return 2;
    }
    long count = size / 4;
    float *x = malloc((size_t)size);
    if (!x)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (long j = 0; j < count; j++)
        x[j] = (float)((j * 2654435761u + (unsigned)rank) % 2001u) / 1000.0f - 1.0f;
    double times[ITERS_MAX], slowest[ITERS_MAX];
    for (int r = 0; r < warmup + iters; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = MPI_Wtime() - t0;
        for (long j = 0; j < count; j++) /* the mean, as murmur computes */
            x[j] /= (float)n;
        if (r >= warmup)
            times[r - warmup] = t;
    }
    MPI_Reduce(times, slowest, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double ring = 2.0 * (n - 1) / n;
        for (int k = 0; k < iters; k++) {
            double algbw = (double)size / slowest[k] / 1e9;
            printf("mpi agents=%d size=%ld run=%d algbw_gbps=%.4f time_ms=%.3f busbw_gbps=%.4f\n",
                   n, size, k + 1, algbw, slowest[k] * 1e3, algbw * ring);
        }
    }
    free(x);
    MPI_Finalize();
    return 0;
}
