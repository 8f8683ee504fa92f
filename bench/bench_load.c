/* Many loads of one model in one process (issue 40): loads and frees
   MODEL N times (default 20) in device 0's primary context, which the
   bench holds (as a server holds it between models), and prints each
   load's time and phases (tb_model_load_times), the device memory free
   after each free (cuMemGetInfo) against before the first load and after
   the first free (the driver keeps what its first module load and stream
   reserve for the context's life: the same after every free, not a leak)
   and the host memory the uploads hold pinned (tb_model_pinned_bytes)
   while loaded and after the free. Then two
   loads at once: a second model loaded while the first stays loaded
   shares the first's staging area (nothing pinned again). Then, with
   --serial, the same loads with TB_MODEL_SERIAL_LOAD (the kernels loaded
   before the upload, not beside it), alternated with the default way, for
   the comparison. Its last lines:

       loads: N, device memory free after the last free - after the first = D bytes (0: no growth)
       loads: pinned after each free 0 (max), the last load / the second = R
       two at once: the second reused the staging area (1), pinned P bytes
       serial vs beside: medians A ms / B ms

   and "ok" or "FAIL" lines for the checks (no growth of device
   or pinned memory; the last load within 1.1x the second).

       build/bench_load MODEL [--weights FILE] [--loads N] [--serial] */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "../tests/util.h"
#include "bench_util.h"

static int (*mem_info)(size_t *, size_t *);

static size_t free_bytes(void) {
    size_t f = 0, t = 0;
    return mem_info && mem_info(&f, &t) == 0 ? f : 0;
}

/* One load (bench_util.h's): its times, and the bytes pinned while it is
   loaded; freed unless keep. */
static int load_once(const tb_model_desc *d, tb_model_times *t, uint64_t *pinned_loaded, tb_model **keep) {
    tb_model *m = NULL;
    if (!bench_load_once(d, t, &m)) return 0;
    *pinned_loaded = tb_model_pinned_bytes();
    if (keep) *keep = m;
    else tb_model_free(m);
    return 1;
}

int main(int argc, char **argv) {
    const char *path = NULL, *weights = NULL;
    char wpath[4096];
    int a, n = 20, serial = 0, i, ok = 1;
    tb_bundle *b = NULL;
    tb_error e;
    tb_model_desc d;
    tb_model_times t;
    uint64_t pinned, pinned_after_max = 0;
    size_t free0, free1 = 0, free_last = 0;
    double *ms;
    void *ctx = NULL;
    int (*retain)(void **, int);
    int (*push)(void *);
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--weights") && a + 1 < argc) weights = argv[++a];
        else if (!strcmp(argv[a], "--loads") && a + 1 < argc) n = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--serial")) serial = 1;
        else if (!path && argv[a][0] != '-') path = argv[a];
        else {
            fprintf(stderr, "usage: bench_load MODEL [--weights FILE] [--loads N] [--serial]\n");
            return 2;
        }
    }
    if (!path || n < 2) {
        fprintf(stderr, "usage: bench_load MODEL [--weights FILE] [--loads N (2 or more)] [--serial]\n");
        return 2;
    }
    if (tb_bundle_read_file(path, NULL, 0, &b, &e) != tb_ok) {
        fprintf(stderr, "bench_load: %s: %s\n", path, e.message);
        return 1;
    }
    if (!weights && tb_bundle_property(b, "weights.file")) {
        if (tb_weights_path_beside(b, path, wpath, sizeof wpath, &e) != tb_ok) {
            fprintf(stderr, "bench_load: %s\n", e.message);
            return 1;
        }
        weights = wpath;
    }
    if (tb_driver_load(&e) != tb_ok) {
        printf("skipped: no CUDA driver (%s)\n", e.message);
        tb_bundle_free(b);
        return 0;
    }
    BENCH_SYM(mem_info, "cuMemGetInfo_v2");
    BENCH_SYM(retain, "cuDevicePrimaryCtxRetain");
    BENCH_SYM(push, "cuCtxPushCurrent_v2");
    if (!retain || !push || retain(&ctx, 0) != 0 || push(ctx) != 0) {
        printf("skipped: no device 0 context\n");
        return 0;
    }
    if (!(ms = (double *)malloc((size_t)n * 2 * sizeof *ms))) return 1;
    memset(&d, 0, sizeof d);
    d.bundle = b, d.weights = weights;
    free0 = free_bytes();
    printf("%s: %d loads and frees, device 0's context held; device memory free before: %zu bytes\n", path, n, free0);
    printf("load | total ms | context | kernels | memory | upload | pinning | beside | pinned while loaded | "
           "pinned after free | device free after - before\n");
    for (i = 0; i < n && ok; i++) {
        size_t f;
        uint64_t after;
        if (!(ok = load_once(&d, &t, &pinned, NULL))) break;
        f = free_bytes(), after = tb_model_pinned_bytes();
        if (after > pinned_after_max) pinned_after_max = after;
        ms[i] = t.total_ms, free_last = f;
        if (!i) free1 = f;
        printf("%d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %u | %llu | %llu | %lld\n", i + 1, t.total_ms,
               t.context_ms, t.kernels_ms, t.memory_ms, t.upload_ms, t.pin_ms, t.beside, (unsigned long long)pinned,
               (unsigned long long)after, (long long)f - (long long)free0);
    }
    if (!ok) return 1;
    printf("loads: %d, device memory free after the last free - after the first = %lld bytes (0: no growth); "
           "kept by the driver since the first load: %lld bytes\n",
           n, (long long)free_last - (long long)free1, (long long)free0 - (long long)free1);
    printf("loads: pinned after each free %llu (max), the last load / the second = %.3f\n",
           (unsigned long long)pinned_after_max, ms[n - 1] / ms[1]);
    printf("%s no device memory kept by the frees (no growth from the first free to the last)\n",
           free_last == free1 ? "ok  " : "FAIL");
    printf("%s no pinned memory kept after the frees\n", pinned_after_max == 0 ? "ok  " : "FAIL");
    printf("%s the last load within 1.1x the second (%.1f ms, %.1f ms)\n", ms[n - 1] <= 1.1 * ms[1] ? "ok  " : "FAIL",
           ms[n - 1], ms[1]);
    {
        tb_model *first = NULL, *second = NULL;
        tb_model_times t2;
        uint64_t p1 = 0, p2 = 0;
        if (!load_once(&d, &t, &p1, &first) || !load_once(&d, &t2, &p2, &second)) {
            printf("FAIL two models at once: a load failed\n");
            ok = 0;
        } else {
            printf("two at once: the second reused the staging area (%u), pinned %llu bytes with one, %llu with "
                   "two (the bound %llu)\n",
                   t2.reused, (unsigned long long)p1, (unsigned long long)p2, (unsigned long long)TB_UPLOAD_STAGING);
            if (!t.pinned) printf("ok   two models at once: no staging area (the pageable way: a small upload)\n");
            else printf("%s two models at once share the staging area\n", t2.reused && p2 == p1 ? "ok  " : "FAIL");
        }
        tb_model_free(second), tb_model_free(first);
    }
    if (serial) { /* alternated, so that both ways see the same host */
        /* per way: the total, the kernels' and the upload's times */
        double v[2][3][4];
        int w, k;
        for (i = 0; i < 8 && ok; i++) {
            d.flags = (i & 1) ? TB_MODEL_SERIAL_LOAD : 0;
            ok = load_once(&d, &t, &pinned, NULL);
            v[i & 1][0][i / 2] = t.total_ms, v[i & 1][1][i / 2] = t.kernels_ms, v[i & 1][2][i / 2] = t.upload_ms;
        }
        for (w = 0; w < 2 && ok; w++)
            for (k = 0; k < 3; k++) qsort(v[w][k], 4, sizeof(double), cmp_double);
        if (ok)
            printf("serial vs beside: medians %.1f ms / %.1f ms (kernels then upload / kernels beside the upload); "
                   "kernels %.1f / %.1f ms, upload %.1f / %.1f ms\n",
                   (v[1][0][1] + v[1][0][2]) / 2, (v[0][0][1] + v[0][0][2]) / 2, (v[1][1][1] + v[1][1][2]) / 2,
                   (v[0][1][1] + v[0][1][2]) / 2, (v[1][2][1] + v[1][2][2]) / 2, (v[0][2][1] + v[0][2][2]) / 2);
    }
    free(ms);
    tb_bundle_free(b);
    return ok ? 0 : 1;
}
