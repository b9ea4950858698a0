/* ScaLAPACK pdgemr2d baseline for benchmarks/redistribution.py.
 *
 * Moves an N x N float64 matrix, block-cyclic with NB x NB blocks, from a
 * Pr x Pc process grid (the first Pr*Pc ranks, row-major) to a Qr x Qc grid
 * (the first Qr*Qc ranks), as the Python benchmark's 2-D cases do. Each
 * repeat allocates the destination block afresh (malloc: its pages are first
 * touched by pdgemr2d, as the engine's freshly allocated output is), PAUSE
 * seconds after the previous repeat freed its memory (as the benchmark waits
 * before each of its own repeats), and is timed as the slowest rank's wall
 * time. The first result is checked entry
 * by entry against the global matrix A(i, j) = i * N + j.
 *
 * Built by the benchmark at run time with Debian's MPICH (mpicc.mpich,
 * libscalapack-mpich-dev) and run under Debian's mpiexec.mpich: a separate
 * program from the Python ranks (which use the pip mpich wheel).
 *
 * usage: pdgemr2d N NB Pr Pc Qr Qc REPS [PAUSE]   ->   one line "pdgemr2d_s t1 t2 ..." on rank 0
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

extern void Cblacs_pinfo(int *me, int *np);
extern void Cblacs_get(int ctxt, int what, int *val);
extern void Cblacs_gridinit(int *ctxt, const char *order, int nprow, int npcol);
extern void Cblacs_gridinfo(int ctxt, int *nprow, int *npcol, int *myrow, int *mycol);
extern void Cblacs_gridexit(int ctxt);
extern int numroc_(const int *n, const int *nb, const int *iproc, const int *isrc, const int *nprocs);
extern void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb, const int *irsrc,
                      const int *icsrc, const int *ictxt, const int *lld, int *info);
extern void pdgemr2d_(const int *m, const int *n, const double *a, const int *ia, const int *ja, const int *desca,
                      double *b, const int *ib, const int *jb, const int *descb, const int *ictxt);

typedef struct { int ctxt, myrow, mycol, nprow, npcol, mloc, nloc, desc[9]; } Grid;

static void grid(Grid *g, int base, int pr, int pc, int n, int nb) {
    int zero = 0, info = 0;
    Cblacs_get(base, 0, &g->ctxt);
    Cblacs_gridinit(&g->ctxt, "Row", pr, pc);
    g->myrow = g->mycol = -1;
    g->mloc = g->nloc = 0;
    for (int i = 0; i < 9; i++) g->desc[i] = 0;
    g->desc[1] = -1;  /* outside this grid: pdgemr2d wants ctxt -1 in the descriptor */
    if (g->ctxt < 0) return;
    Cblacs_gridinfo(g->ctxt, &g->nprow, &g->npcol, &g->myrow, &g->mycol);
    g->mloc = numroc_(&n, &nb, &g->myrow, &zero, &g->nprow);
    g->nloc = numroc_(&n, &nb, &g->mycol, &zero, &g->npcol);
    int lld = g->mloc > 1 ? g->mloc : 1;
    descinit_(g->desc, &n, &n, &nb, &nb, &zero, &zero, &g->ctxt, &lld, &info);
}

/* global index of local index l on process coordinate p (block-cyclic, source 0) */
static long gidx(int l, int nb, int p, int np) { return (long)(l / nb) * np * nb + (long)p * nb + l % nb; }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (argc != 8 && argc != 9) {
        fprintf(stderr, "usage: %s N NB Pr Pc Qr Qc REPS\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[1]), nb = atoi(argv[2]), pr = atoi(argv[3]), pc = atoi(argv[4]);
    int qr = atoi(argv[5]), qc = atoi(argv[6]), reps = atoi(argv[7]);
    double pause = argc > 8 ? atof(argv[8]) : 0.0;
    int me, np, base, one = 1;
    Cblacs_pinfo(&me, &np);
    Cblacs_get(-1, 0, &base);
    int all = base;
    Cblacs_gridinit(&all, "Row", 1, np);  /* the context holding both grids */
    Grid a, b;
    grid(&a, base, pr, pc, n, nb);
    grid(&b, base, qr, qc, n, nb);
    double *A = NULL;
    if (a.ctxt >= 0) {  /* column-major local block, A(i, j) = i * N + j */
        A = malloc(sizeof(double) * ((size_t)a.mloc * a.nloc + 1));
        for (int j = 0; j < a.nloc; j++) {
            long gj = gidx(j, nb, a.mycol, a.npcol);
            for (int i = 0; i < a.mloc; i++) A[(size_t)j * a.mloc + i] = (double)(gidx(i, nb, a.myrow, a.nprow) * n + gj);
        }
    }
    double *times = malloc(sizeof(double) * reps);
    long bad = 0;
    for (int r = 0; r < reps; r++) {
        struct timespec ts = {(time_t)pause, (long)((pause - (time_t)pause) * 1e9)};
        nanosleep(&ts, NULL);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        double *B = b.ctxt >= 0 ? malloc(sizeof(double) * ((size_t)b.mloc * b.nloc + 1)) : NULL;
        pdgemr2d_(&n, &n, A, &one, &one, a.desc, B, &one, &one, b.desc, &all);
        double dt = MPI_Wtime() - t0, worst;
        MPI_Reduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        times[r] = worst;
        if (r == 0 && B)
            for (int j = 0; j < b.nloc; j++) {
                long gj = gidx(j, nb, b.mycol, b.npcol);
                for (int i = 0; i < b.mloc; i++)
                    bad += B[(size_t)j * b.mloc + i] != (double)(gidx(i, nb, b.myrow, b.nprow) * n + gj);
            }
        free(B);
    }
    long allbad = 0;
    MPI_Reduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0) {
        if (allbad) printf("pdgemr2d_wrong %ld\n", allbad);
        printf("pdgemr2d_s");
        for (int r = 0; r < reps; r++) printf(" %.6f", times[r]);
        printf("\n");
    }
    free(times);
    free(A);
    if (a.ctxt >= 0) Cblacs_gridexit(a.ctxt);
    if (b.ctxt >= 0) Cblacs_gridexit(b.ctxt);
    MPI_Finalize();
    return 0;
}
