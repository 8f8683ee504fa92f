/* Upload of a model's weights from a safetensors file in the page cache:
   tb_model_load's upload (its pinned way and its pageable way) against the
   bandwidth of one cuMemcpyHtoD from pinned memory, and from pageable
   memory, of the same bytes, all in this process (issue 40's goal: the
   pinned way at 0.9x or more of a pinned cuMemcpyHtoD's bandwidth from
   1 GiB on, its setup included). For each size (MiB): writes
   DIR/upload-SIZE.safetensors (one uint8 tensor "w", pseudo-random bytes)
   and reads it once (the page cache), builds a bundle whose one constant
   is that tensor (external, format 2.5), then times, in the primary
   context of device 0, which the bench holds throughout (as a program
   that loads a model holds it):
     - the pinned way's first load: the staging area pinned in it (no
       model holds one), its setup included (pinning, stream, events);
     - the pinned way again while that first model stays loaded: the
       staging area reused, nothing pinned;
     - the pageable way; one cuMemcpyHtoD of the same bytes from pinned
       memory (the bus) and from pageable memory;
   three rounds each, and prints the medians, the GB/s and each way's
   ratio to the pinned copy's bandwidth. --keep leaves the files (for a
   comparison with safetensors.torch.load_file in Python); --staging MIB
   and --threads N give desc.pinned_staging_bytes and desc.upload_threads;
   --sweep also times the reused pinned way for staging bounds of 16 to
   256 MiB and 4 to 16 readers (the numbers in the header's "the upload's
   numbers" are to be chosen from it). The slot's bytes are
   TB_UPLOAD_PIECE, 2 MiB, and an upload pins at most its bytes /
   TB_UPLOAD_PIN_SHARE (32), which also bounds the rings the sweep sees:
   build with make -B build/bench_upload UPLOAD_DEFS="-DTB_UPLOAD_PIECE=N
   -DTB_UPLOAD_PIN_SHARE=1" to try other slots, or rings up to the bound;
   --probe first times the upload's parts (pinning, registering huge
   pages, reads).

       build/bench_upload [--dir DIR] [--keep] [--probe] [--sweep] [--staging MIB] [--threads N]
                          [SIZE_MIB...]   (default 256 1024 4096) */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "../tests/util.h"
#include "bench_util.h"
#include <pthread.h>

typedef int (*fn_alloc_host)(void **, size_t);
typedef int (*fn_free_host)(void *);
typedef int (*fn_alloc)(uint64_t *, size_t);
typedef int (*fn_free)(uint64_t);
typedef int (*fn_h2d)(uint64_t, const void *, size_t);
typedef int (*fn_ctx)(void *);
typedef int (*fn_pop)(void **);

static int write_weights(const char *path, uint64_t n) {
    char json[256];
    size_t h, pad, i;
    unsigned char head[8 + 256], *buf;
    uint64_t left = n, x = 0x9E3779B97F4A7C15ull;
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    snprintf(json, sizeof json, "{\"w\": {\"dtype\": \"U8\", \"shape\": [%llu], \"data_offsets\": [0, %llu]}}",
             (unsigned long long)n, (unsigned long long)n);
    h = strlen(json), pad = (8 - h % 8) % 8;
    for (i = 0; i < 8; i++) head[i] = (unsigned char)((h + pad) >> (8 * i));
    memcpy(head + 8, json, h);
    memset(head + 8 + h, ' ', pad);
    if (fwrite(head, 1, 8 + h + pad, f) != 8 + h + pad || !(buf = (unsigned char *)malloc(1 << 20))) {
        fclose(f);
        return 0;
    }
    while (left) {
        size_t k = left < (1u << 20) ? (size_t)left : (1u << 20);
        for (i = 0; i < k; i++) x ^= x << 13, x ^= x >> 7, x ^= x << 17, buf[i] = (unsigned char)x;
        if (fwrite(buf, 1, k, f) != k) break;
        left -= k;
    }
    free(buf);
    return fclose(f) == 0 && !left;
}

static void warm(const char *path) { /* into the page cache */
    char *buf = (char *)malloc(1 << 20);
    int fd = open(path, O_RDONLY);
    if (fd >= 0 && buf)
        while (read(fd, buf, 1 << 20) > 0) {}
    if (fd >= 0) close(fd);
    free(buf);
}

/* A bundle whose program copies 16 bytes of its one (external) constant. */
static tb_bundle *make_bundle(uint64_t n, tb_error *e) {
    static tb_tensor_spec out;
    static tb_program_constant k;
    static tb_operand ops[2];
    static tb_program_step st;
    tb_program p;
    tb_bundle *b = NULL;
    memset(&out, 0, sizeof out), memset(&k, 0, sizeof k), memset(&st, 0, sizeof st), memset(&p, 0, sizeof p);
    out.name = "out", out.dtype = TB_DTYPE_UINT8, out.rank = 1, out.align = 16, out.shape[0] = 16, out.strides[0] = 1;
    k.name = "w", k.dtype = TB_DTYPE_UINT8, k.flags = TB_CONSTANT_EXTERNAL, k.size = n, k.tensor = "w", k.rank = 1;
    k.shape[0] = (int64_t)n;
    ops[0].space = TB_SPACE_OUTPUT, ops[1].space = TB_SPACE_CONSTANT;
    st.kind = TB_STEP_COPY, st.count = 16, st.operand_count = 2, st.operands = ops;
    p.output_count = 1, p.outputs = &out, p.constant_count = 1, p.constants = &k, p.step_count = 1, p.steps = &st;
    if (tb_bundle_create(NULL, &b, e) != tb_ok) return NULL;
    if (tb_bundle_set_program(b, &p, e) != tb_ok) {
        tb_bundle_free(b);
        return NULL;
    }
    return b;
}

/* --probe: what the upload's parts cost here. Pinning buffers of several
   sizes (one call each, and 8 calls from 8 threads at once), and pread
   from the page cache into pinned buffers with 1 to 16 threads. */
typedef struct {
    fn_alloc_host alloc_host;
    void *ctx;
    fn_ctx push;
    fn_pop pop;
    size_t n;
    void *p;
    int fd;
    uint64_t at, len;
    unsigned char *buf;
} probe_job;
static void *pin_job(void *a) {
    probe_job *j = (probe_job *)a;
    void *popped;
    j->push(j->ctx);
    j->alloc_host(&j->p, j->n);
    j->pop(&popped);
    return NULL;
}
static void *read_job(void *a) {
    probe_job *j = (probe_job *)a;
    uint64_t off;
    for (off = 0; off < j->len; off += j->n)
        if (pread(j->fd, j->buf, j->n, (off_t)(j->at + off)) <= 0) break;
    return NULL;
}
/* --probe: malloc'd memory made huge pages (madvise) and registered
   (cuMemHostRegister), against cuMemAllocHost's 0.5 ms a MiB: a staging
   area pinned this way, if much cheaper, would make the first load's
   setup small. */
static void probe_register(void) {
    typedef int (*fn_reg)(void *, size_t, unsigned);
    typedef int (*fn_unreg)(void *);
    static const size_t mib[] = {2, 16, 64, 256};
    fn_reg reg;
    fn_unreg unreg;
    size_t i;
    int touch;
    BENCH_SYM(reg, "cuMemHostRegister_v2");
    BENCH_SYM(unreg, "cuMemHostUnregister");
    if (!reg || !unreg) return;
    for (touch = 0; touch < 2; touch++)
        for (i = 0; i < sizeof mib / sizeof mib[0]; i++) {
            size_t n = mib[i] << 20;
            void *p = NULL;
            double t0 = now(), t1;
            int rc;
            if (posix_memalign(&p, (size_t)2 << 20, n)) continue;
#ifdef MADV_HUGEPAGE
            madvise(p, n, MADV_HUGEPAGE);
#endif
            if (touch) memset(p, 0, n);
            t1 = now();
            rc = reg(p, n, 0);
            printf("probe: cuMemHostRegister %zu MiB of 2 MiB-aligned memory (MADV_HUGEPAGE%s): %.2f ms (%s%.2f ms to "
                   "touch)\n",
                   mib[i], touch ? ", touched first" : "", (now() - t1) * 1e3, rc ? "FAILED; " : "", (t1 - t0) * 1e3);
            if (!rc) unreg(p);
            free(p);
        }
}
static void probe(const char *dir, fn_alloc_host alloc_host, fn_free_host free_host, fn_ctx push, fn_pop pop,
                  void *ctx) {
    static const size_t mib[] = {1, 2, 4, 8, 16, 64};
    char path[4096];
    size_t i;
    int t, fd;
    double t0;
    for (i = 0; i < sizeof mib / sizeof mib[0]; i++) {
        void *p = NULL;
        t0 = now();
        alloc_host(&p, mib[i] << 20);
        printf("probe: cuMemAllocHost %zu MiB: %.2f ms\n", mib[i], (now() - t0) * 1e3);
        free_host(p);
    }
    {
        probe_job j[8];
        pthread_t tid[8];
        memset(j, 0, sizeof j);
        t0 = now();
        for (t = 0; t < 8; t++) {
            j[t].alloc_host = alloc_host, j[t].ctx = ctx, j[t].push = push, j[t].pop = pop, j[t].n = (size_t)4 << 20;
            pthread_create(&tid[t], NULL, pin_job, &j[t]);
        }
        for (t = 0; t < 8; t++) pthread_join(tid[t], NULL);
        printf("probe: 8 x cuMemAllocHost 4 MiB from 8 threads at once: %.2f ms\n", (now() - t0) * 1e3);
        for (t = 0; t < 8; t++) free_host(j[t].p);
    }
    probe_register();
    snprintf(path, sizeof path, "%s/upload-probe.safetensors", dir);
    if (!write_weights(path, (uint64_t)1 << 30)) return;
    warm(path);
    fd = open(path, O_RDONLY);
    for (t = 1; t <= 16; t = t < 4 ? t + 1 : t + 4) {
        probe_job j[16];
        pthread_t tid[16];
        int k;
        memset(j, 0, sizeof j);
        for (k = 0; k < t; k++) {
            j[k].fd = fd, j[k].n = (size_t)4 << 20, j[k].len = ((uint64_t)1 << 30) / (uint64_t)t / j[k].n * j[k].n;
            j[k].at = 4096 + (uint64_t)k * j[k].len;
            alloc_host((void **)&j[k].buf, j[k].n);
        }
        t0 = now();
        for (k = 0; k < t; k++) pthread_create(&tid[k], NULL, read_job, &j[k]);
        for (k = 0; k < t; k++) pthread_join(tid[k], NULL);
        printf("probe: pread of 1 GiB from the page cache into pinned 4 MiB buffers, %d threads: %.2f ms (%.1f GB/s)\n",
               t, (now() - t0) * 1e3, (double)(j[0].len * (uint64_t)t) / 1e9 / (now() - t0));
        for (k = 0; k < t; k++) free_host(j[k].buf);
    }
    close(fd);
    unlink(path);
}

/* --sweep: the reused pinned way (a model holding an area of the largest
   bound) for each bound and reader count, the median of 3. */
static int sweep(const tb_model_desc *base, uint64_t n, double pinned_copy_ms) {
    static const unsigned mib[] = {16, 32, 64, 128, 256}, readers[] = {4, 8, 12, 15, 16};
    tb_model_desc d = *base;
    tb_model_times t;
    tb_model *holder = NULL;
    double ms[3];
    size_t i, j;
    int r;
    d.pinned_staging_bytes = (uint64_t)256 << 20;
    if (!bench_load_once(&d, &t, &holder)) return 0;
    printf("  sweep (%llu MiB; a staging area of %llu MiB pinned once, in %.1f ms; slots of %zu bytes):\n",
           (unsigned long long)(n >> 20), (unsigned long long)(t.staging_bytes >> 20), t.pin_ms,
           (size_t)TB_UPLOAD_PIECE);
    for (i = 0; i < sizeof mib / sizeof mib[0]; i++)
        for (j = 0; j < sizeof readers / sizeof readers[0]; j++) {
            d.pinned_staging_bytes = (uint64_t)mib[i] << 20, d.upload_threads = readers[j];
            for (r = 0; r < 3; r++) {
                if (!bench_load_once(&d, &t, NULL)) {
                    tb_model_free(holder);
                    return 0;
                }
                ms[r] = t.upload_ms;
            }
            printf("    staging %3u MiB (%3llu MiB used), %2u readers (%2u ran): %8.2f ms, %5.1f GB/s, %.2fx a pinned "
                   "copy\n",
                   mib[i], (unsigned long long)(t.staging_bytes >> 20), readers[j], t.threads, median(ms, 3),
                   (double)n / 1e6 / median(ms, 3), pinned_copy_ms / median(ms, 3));
        }
    tb_model_free(holder);
    return 1;
}

int main(int argc, char **argv) {
    const char *dir = "/tmp";
    int keep = 0, a, nsizes = 0, failed = 0, do_probe = 0, do_sweep = 0;
    uint32_t threads = 0;
    uint64_t staging = 0;
    long sizes[16];
    tb_error e;
    fn_alloc_host alloc_host;
    fn_free_host free_host;
    fn_alloc alloc;
    fn_free dfree;
    fn_h2d h2d;
    fn_ctx push;
    fn_pop pop;
    int (*retain)(void **, int);
    void *ctx = NULL, *popped;
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--dir") && a + 1 < argc) dir = argv[++a];
        else if (!strcmp(argv[a], "--keep")) keep = 1;
        else if (!strcmp(argv[a], "--probe")) do_probe = 1;
        else if (!strcmp(argv[a], "--sweep")) do_sweep = 1;
        else if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = (uint32_t)atoi(argv[++a]);
        else if (!strcmp(argv[a], "--staging") && a + 1 < argc) staging = (uint64_t)atol(argv[++a]) << 20;
        else if (nsizes < 16 && atol(argv[a]) > 0) sizes[nsizes++] = atol(argv[a]);
        else {
            fprintf(stderr,
                    "usage: bench_upload [--dir DIR] [--keep] [--probe] [--sweep] [--staging MIB] [--threads N] "
                    "[SIZE_MIB...]\n");
            return 2;
        }
    }
    if (!nsizes) sizes[0] = 256, sizes[1] = 1024, sizes[2] = 4096, nsizes = 3;
    if (tb_driver_load(&e) != tb_ok) {
        printf("skipped: no CUDA driver (%s)\n", e.message);
        return 0;
    }
    BENCH_SYM(alloc_host, "cuMemAllocHost_v2");
    BENCH_SYM(free_host, "cuMemFreeHost");
    BENCH_SYM(alloc, "cuMemAlloc_v2");
    BENCH_SYM(dfree, "cuMemFree_v2");
    BENCH_SYM(h2d, "cuMemcpyHtoD_v2");
    BENCH_SYM(push, "cuCtxPushCurrent_v2");
    BENCH_SYM(pop, "cuCtxPopCurrent_v2");
    BENCH_SYM(retain, "cuDevicePrimaryCtxRetain");
    {
        typedef int (*fn_name)(char *, int, int);
        fn_name name;
        char gpu[256] = "?";
        char readers[32] = "the default";
        BENCH_SYM(name, "cuDeviceGetName");
        if (name) name(gpu, (int)sizeof gpu, 0);
        if (threads) snprintf(readers, sizeof readers, "%u", threads);
        printf("device 0: %s; %ld cores; slots of %zu bytes, staging bound %llu MiB, pinned at most 1/%u of an upload, "
               "readers: %s\n",
               gpu, sysconf(_SC_NPROCESSORS_ONLN), (size_t)TB_UPLOAD_PIECE,
               (unsigned long long)((staging ? staging : TB_UPLOAD_STAGING) >> 20), (unsigned)TB_UPLOAD_PIN_SHARE,
               readers);
    }
    /* the context, held by the bench: each load finds it current and keeps
       it (made once, outside every timing) */
    if (!retain || retain(&ctx, 0) != 0 || push(ctx) != 0) {
        printf("FAIL: the primary context of device 0\n");
        return 1;
    }
    if (do_probe) probe(dir, alloc_host, free_host, push, pop, ctx);
    for (a = 0; a < nsizes; a++) {
        uint64_t n = (uint64_t)sizes[a] << 20;
        char path[4096];
        double t_first[3], t_reused[9], t_page[3], t_h2d_pin[3], t_h2d_page[3], pin_first[3], pin_alloc = 0, t0;
        tb_bundle *b;
        tb_model *holder = NULL;
        tb_model_desc d;
        tb_model_times tm;
        int r, k;
        void *host = NULL;
        uint64_t dev = 0;
        uint32_t ran = 0;
        snprintf(path, sizeof path, "%s/upload-%ld.safetensors", dir, sizes[a]);
        if (!write_weights(path, n) || !(b = make_bundle(n, &e))) {
            printf("FAIL: could not write %s or make its bundle\n", path);
            failed = 1;
            continue;
        }
        warm(path);
        memset(&d, 0, sizeof d);
        d.bundle = b, d.weights = path, d.pinned_upload_min = 1, d.upload_threads = threads,
        d.pinned_staging_bytes = staging;
        /* the pinned way: a first load (the area pinned in it), kept
           loaded while three more reuse the area; three rounds */
        for (r = 0; r < 3 && !failed; r++) {
            if (!bench_load_once(&d, &tm, &holder)) failed = 1;
            t_first[r] = tm.upload_ms, pin_first[r] = tm.pin_ms, ran = tm.threads;
            for (k = 0; k < 3 && !failed; k++) {
                if (!bench_load_once(&d, &tm, NULL)) failed = 1;
                t_reused[r * 3 + k] = tm.upload_ms;
            }
            tb_model_free(holder);
            holder = NULL;
        }
        d.pinned_upload_min = UINT64_MAX;
        for (r = 0; r < 3 && !failed; r++) {
            if (!bench_load_once(&d, &tm, NULL)) failed = 1;
            t_page[r] = tm.upload_ms;
        }
        if (failed) break;
        t0 = now();
        if (alloc_host(&host, (size_t)n) != 0 || alloc(&dev, (size_t)n) != 0) {
            printf("FAIL: cuMemAllocHost or cuMemAlloc of %llu bytes\n", (unsigned long long)n);
            failed = 1;
            break;
        }
        pin_alloc = (now() - t0) * 1e3;
        memset(host, 1, (size_t)n);
        for (r = 0; r < 3; r++) {
            t0 = now();
            h2d(dev, host, (size_t)n);
            t_h2d_pin[r] = (now() - t0) * 1e3;
        }
        free_host(host);
        host = malloc((size_t)n);
        memset(host, 1, (size_t)n);
        for (r = 0; r < 3; r++) {
            t0 = now();
            h2d(dev, host, (size_t)n);
            t_h2d_page[r] = (now() - t0) * 1e3;
        }
        free(host);
        dfree(dev);
        {
            double first = median(t_first, 3), reused = median(t_reused, 9), page = median(t_page, 3);
            double hp = median(t_h2d_pin, 3), hg = median(t_h2d_page, 3), gb = (double)n / 1e9;
            printf(
                "upload %ld MiB from the page cache: pinned way %.2f ms (%.1f GB/s; a first load, pinning %.1f ms of "
                "it), "
                "%.2f ms reused (%.1f GB/s; the staging area pinned by a loaded model), %u readers; pageable way %.2f "
                "ms "
                "(%.1f GB/s); one cuMemcpyHtoD from pinned memory %.2f ms (%.1f GB/s; pinning the buffer took %.1f ms "
                "more), from pageable memory %.2f ms (%.1f GB/s)\n",
                sizes[a], first, gb / first * 1e3, median(pin_first, 3), reused, gb / reused * 1e3, ran, page,
                gb / page * 1e3, hp, gb / hp * 1e3, pin_alloc, hg, gb / hg * 1e3);
            printf("  ratio to a pinned cuMemcpyHtoD's bandwidth (goal 0.9x from 1 GiB on, setup included): pinned way "
                   "%.2fx its first load, %.2fx reused; pageable way %.2fx\n", hp / first, hp / reused, hp / page);
            d.pinned_upload_min = 1;
            if (do_sweep && !sweep(&d, n, hp)) failed = 1;
        }
        tb_bundle_free(b);
        if (!keep) unlink(path);
    }
    pop(&popped);
    return failed;
}
