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

#if defined(TRITON_BUNDLE_H) && !defined(TB_NO_LAUNCHER)
/* A driver entry point into a function pointer (no cuda.h here). */
#define BENCH_SYM(var, name)                    \
    do {                                        \
        void *p_ = tb_driver_symbol(name);      \
        memcpy(&var, &p_, sizeof var);          \
    } while (0)

/* One load of d: its times in *t; 0 on failure (said). held: the model is
   left loaded, in *held; else freed. */
static TB_TEST_UNUSED int bench_load_once(const tb_model_desc *d, tb_model_times *t, tb_model **held) {
    tb_model *m = NULL;
    tb_error e;
    if (tb_model_load(d, &m, &e) != tb_ok) {
        printf("FAIL: tb_model_load: %s\n", e.message);
        return 0;
    }
    tb_model_load_times(m, t);
    if (held) *held = m;
    else tb_model_free(m);
    return 1;
}
#endif

#endif
