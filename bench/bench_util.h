/* Shared by the benchmarks: a clock and medians. Include after
   tests/util.h. */
#ifndef TB_BENCH_UTIL_H
#define TB_BENCH_UTIL_H

#include <time.h>

static TB_TEST_UNUSED double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static TB_TEST_UNUSED int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static TB_TEST_UNUSED double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

#endif
