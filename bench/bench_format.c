/* Format benchmark: write and read a ~200 MB bundle against memcpy of the
   same bytes, in the same process, alternating, median of several runs.
   usage: bench_format [MB] (default 200) */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "../tests/util.h"

#include "bench_util.h"

#define RUNS 7

int main(int argc, char **argv) {
    double target_mb = argc > 1 ? atof(argv[1]) : 200.0;
    tb_bundle *fix = u_fixture_bundle(1), *big, *r;
    tb_error e;
    size_t size = 0, fixture_bytes = 0;
    unsigned char *src, *dst;
    uint32_t copies, i, j;
    double t_memcpy[RUNS], t_write[RUNS], t_read[RUNS], t_view[RUNS], t_hash[RUNS], t_xxh3[RUNS];
    int run;
    if (!fix) return 1;
    for (i = 0; i < tb_bundle_kernel_count(fix); i++)
        for (j = 0; j < tb_bundle_kernel(fix, i)->artifact_count; j++)
            fixture_bytes += (size_t)tb_bundle_kernel(fix, i)->artifacts[j].size;
    copies = (uint32_t)(target_mb * 1e6 / (double)fixture_bytes) + 1;
    big = replicated_bundle(fix, copies * tb_bundle_kernel_count(fix));
    if (!big) return 1;
    tb_bundle_write_memory(big, NULL, 0, &size, &e);
    src = (unsigned char *)malloc(size);
    dst = (unsigned char *)malloc(size);
    memset(src, 1, size); /* fault the pages in */
    memset(dst, 2, size);
    tb_bundle_write_memory(big, src, size, NULL, &e);
    for (run = 0; run < RUNS; run++) {
        double t0 = now();
        memcpy(dst, src, size);
        t_memcpy[run] = now() - t0;
        t0 = now();
        if (tb_bundle_write_memory(big, dst, size, NULL, &e) != tb_ok) return 1;
        t_write[run] = now() - t0;
        t0 = now();
        if (tb_bundle_read_memory(dst, size, NULL, 0, &r, &e) != tb_ok) {
            fprintf(stderr, "%s\n", e.message);
            return 1;
        }
        t_read[run] = now() - t0;
        tb_bundle_free(r);
        t0 = now();
        if (tb_bundle_read_memory(dst, size, NULL, TB_READ_NO_CHECKSUM, &r, &e) != tb_ok) return 1;
        t_view[run] = now() - t0;
        tb_bundle_free(r);
        t0 = now();
        if (tb_bundle_checksum(dst, size) == 42) printf("(unlikely)\n");
        t_hash[run] = now() - t0;
        t0 = now();
        if (tb_xxh3_64(dst, size) == 42) printf("(unlikely)\n");
        t_xxh3[run] = now() - t0;
    }
    {
        double m = median(t_memcpy, RUNS), w = median(t_write, RUNS), rd = median(t_read, RUNS),
               v = median(t_view, RUNS);
        double mb = size / 1e6;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        /* the documented policy: 1 MiB blocks hashed on up to 8 threads, at least 8 blocks each */
        long threads = cpus < 8 ? cpus : 8, most = (long)(size >> 23);
        if (threads > most) threads = most;
        if (threads < 1) threads = 1;
        printf("format: %.0f MB bundle, %u kernels, median of %d runs, checksum on %ld threads\n", mb,
               tb_bundle_kernel_count(big), RUNS, threads);
        printf("  memcpy                 %8.1f ms  %6.2f GB/s\n", m * 1e3, mb / m / 1e3);
        printf("  write (with checksum)  %8.1f ms  %6.2f GB/s  %.2fx memcpy bandwidth (goal >= 0.8)\n", w * 1e3,
               mb / w / 1e3, m / w);
        printf("  read, verified         %8.1f ms  %6.2f GB/s  %.2fx memcpy bandwidth (goal >= 0.5)\n", rd * 1e3,
               mb / rd / 1e3, m / rd);
        printf("  read, zero-copy, no checksum %5.2f ms  (%.0fx faster than memcpy: structure only)\n", v * 1e3, m / v);
        printf("  the checksum alone     %8.1f ms  %6.2f GB/s\n", median(t_hash, RUNS) * 1e3,
               mb / median(t_hash, RUNS) / 1e3);
        printf("  one XXH3-64, one core  %8.1f ms  %6.2f GB/s  (format 1's checksum)\n", median(t_xxh3, RUNS) * 1e3,
               mb / median(t_xxh3, RUNS) / 1e3);
    }
    free(src);
    free(dst);
    tb_bundle_free(big);
    tb_bundle_free(fix);
    return 0;
}
