/* Shared by the benchmarks: a clock, medians, and bundles of many kernels
   made from the fixture's. Include after tests/util.h. */
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

/* n kernels: the fixture's, in turn, under new hashes; bytes referenced */
static TB_TEST_UNUSED tb_bundle *replicated_bundle(const tb_bundle *fix, uint32_t n) {
    tb_bundle *big;
    tb_error e;
    uint32_t c, j, k;
    if (tb_bundle_create(NULL, &big, &e) != tb_ok) return NULL;
    for (c = 0; c < n; c++) {
        const tb_kernel *kn = tb_bundle_kernel(fix, c % tb_bundle_kernel_count(fix));
        char hash[64];
        snprintf(hash, sizeof hash, "%.44s%08u", kn->hash, c);
        if (tb_bundle_add_kernel(big, hash, 0, &k, &e) != tb_ok) break;
        for (j = 0; j < kn->artifact_count; j++)
            tb_bundle_add_artifact(big, k, kn->artifacts[j].name, kn->artifacts[j].data, kn->artifacts[j].size,
                                   TB_REFERENCE, &e);
    }
    return big;
}

#endif
