/* The GPU suite: every public fixture kernel launched from C and checked
   against tests/fixtures/.../expected.json. Every test is skipped (never
   passed) where no CUDA driver or GPU is present. Run from the repository
   root: build/test_gpu [name-filter] */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "util.h"

#include <pthread.h>
#include <time.h>


#define H_ADD "AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ"
#define H_ADD16 "JHIE2WWBT63JNC3MNKM4MXLWCU2GE3PH4XRUCMZMHZGOHBAFJKTA"
#define H_SCALARS "WP4C7CSHRKNSVR76XZZ5T3MQKYJA4YDGZGC324HEJSBGTCPWN23A"
#define H_MATMUL "FICZDYIEHYTLJCYVG6Q353UAVW2KLMS5O63E5EBZEJQ6G6KKXVQQ"
#define H_NOARGS "72LBHDPVFLKOS26Q3453IVCTHETIPQ7OJOQE6IR3KYFIDK5O264A"

/* The driver calls the tests need beyond the library, through the same
   loaded libcuda (no CUDA headers here either). */
typedef unsigned long long devptr;
static struct {
    int (*mem_alloc)(devptr *, size_t);
    int (*mem_free)(devptr);
    int (*htod)(devptr, const void *, size_t);
    int (*dtoh)(void *, devptr, size_t);
    int (*memset8)(devptr, unsigned char, size_t);
    int (*ctx_sync)(void);
    int (*ctx_set)(void *);
    int (*primary_retain)(void **, int);
} cu;

static int gpu_state; /* 0 unknown, 1 ready, -1 none */
static void *gpu_ctx;   /* device 0's primary context */
static char gpu_reason[700];
static tb_bundle *bundle;       /* the fixture, read back from a mapped file */
static tb_kernel_table *table;
static char *workdir;

#define LOAD_SYM(field, name)                                      \
    do {                                                           \
        void *s_ = tb_driver_symbol(name);                         \
        if (!s_) {                                                 \
            snprintf(gpu_reason, sizeof gpu_reason, "no %s", name); \
            return -1;                                             \
        }                                                          \
        memcpy(&cu.field, &s_, sizeof s_);                         \
    } while (0)

static int gpu_init(void) {
    tb_error e;
    int n = 0;
    void *ctx = NULL;
    char path[600];
    tb_bundle *b;
    if (tb_driver_load(&e) != tb_ok) {
        snprintf(gpu_reason, sizeof gpu_reason, "no CUDA driver or GPU: %s", e.message);
        return -1;
    }
    if (tb_driver_device_count(&n, &e) != tb_ok || n == 0) {
        snprintf(gpu_reason, sizeof gpu_reason, "no CUDA device");
        return -1;
    }
    LOAD_SYM(mem_alloc, "cuMemAlloc_v2");
    LOAD_SYM(mem_free, "cuMemFree_v2");
    LOAD_SYM(htod, "cuMemcpyHtoD_v2");
    LOAD_SYM(dtoh, "cuMemcpyDtoH_v2");
    LOAD_SYM(memset8, "cuMemsetD8_v2");
    LOAD_SYM(ctx_sync, "cuCtxSynchronize");
    LOAD_SYM(ctx_set, "cuCtxSetCurrent");
    LOAD_SYM(primary_retain, "cuDevicePrimaryCtxRetain");
    if (cu.primary_retain(&ctx, 0) != 0 || cu.ctx_set(ctx) != 0 || !(gpu_ctx = ctx)) {
        snprintf(gpu_reason, sizeof gpu_reason, "cannot make device 0's context current");
        return -1;
    }
    /* the fixture as a bundle file, read back zero-copy from a mapping */
    b = u_fixture_bundle(1);
    workdir = u_tempdir("gpu");
    snprintf(path, sizeof path, "%s/fixture.tbundle", workdir);
    if (!b || tb_bundle_write_file(b, path, 0, &e) != tb_ok ||
        tb_bundle_read_file(path, NULL, 0, &bundle, &e) != tb_ok) {
        snprintf(gpu_reason, sizeof gpu_reason, "fixture bundle: %s", e.message);
        tb_bundle_free(b);
        return -1;
    }
    tb_bundle_free(b);
    if (tb_kernel_table_create(bundle, NULL, NULL, 0, &table, &e) != tb_ok) {
        snprintf(gpu_reason, sizeof gpu_reason, "loading the fixture kernels failed: %s", e.message);
        gpu_state = -2; /* a GPU is here: this is a failure, not a skip */
        return -2;
    }
    return 1;
}

#define NEED_GPU()                                                                    \
    do {                                                                              \
        if (!gpu_state) gpu_state = gpu_init();                                       \
        if (gpu_state == -1) SKIP("%s", gpu_reason);                                  \
        if (gpu_state == -2) {                                                        \
            printf("    FAIL: %s\n", gpu_reason);                                     \
            th_failed_now = 1;                                                        \
            return;                                                                   \
        }                                                                             \
    } while (0)

static double sqrt_approx(double v) {
    double x = v > 1 ? v : 1;
    int i;
    if (v <= 0) return 0;
    for (i = 0; i < 200; i++) x = 0.5 * (x + v / x);
    return x;
}

static devptr dalloc(size_t n) {
    devptr p = 0;
    if (cu.mem_alloc(&p, n) != 0) return 0;
    return p;
}

static const tb_loaded_kernel *get(const char *key) {
    const tb_loaded_kernel *k = NULL;
    tb_error e;
    if (tb_kernel_table_get(table, key, 0, &k, &e) != tb_ok) printf("    get %s: %s\n", key, e.message);
    return k;
}

/* x[i] = 0.5 i, y[i] = 2 i; returns 1 if out == x + y exactly; *sum (if
   given) receives the sum of out */
static int run_add_sum(const tb_loaded_kernel *k, int n, unsigned flags, tb_error *e, tb_result *res, double *sum) {
    float *x = (float *)malloc(n * sizeof(float)), *y = (float *)malloc(n * sizeof(float));
    float *out = (float *)malloc(n * sizeof(float));
    devptr dx = dalloc(n * 4), dy = dalloc(n * 4), dout = dalloc(n * 4);
    tb_arg args[4];
    tb_launch_params p;
    int i, ok = 1;
    for (i = 0; i < n; i++) x[i] = 0.5f * i, y[i] = 2.0f * i;
    cu.htod(dx, x, n * 4);
    cu.htod(dy, y, n * 4);
    cu.memset8(dout, 0xFF, n * 4);
    args[0] = tb_arg_u(dx);
    args[1] = tb_arg_u(dy);
    args[2] = tb_arg_u(dout);
    args[3] = tb_arg_i(n);
    memset(&p, 0, sizeof p);
    p.grid[0] = (uint32_t)((n + 1023) / 1024);
    p.grid[1] = p.grid[2] = 1;
    p.args = args;
    p.arg_count = 4;
    p.flags = flags;
    *res = tb_launch(k, &p, e);
    if (*res == tb_ok && cu.ctx_sync() != 0) ok = 0;
    cu.dtoh(out, dout, n * 4);
    for (i = 0; i < n && ok; i++) ok = out[i] == x[i] + y[i];
    if (sum)
        for (*sum = 0, i = 0; i < n; i++) *sum += out[i];
    cu.mem_free(dx);
    cu.mem_free(dy);
    cu.mem_free(dout);
    free(x);
    free(y);
    free(out);
    return ok;
}

static int run_add(const tb_loaded_kernel *k, int n, unsigned flags, tb_error *e, tb_result *res) {
    return run_add_sum(k, n, flags, e, res, NULL);
}

TEST(gpu_tb_add) {
    const tb_loaded_kernel *k;
    tb_error e;
    tb_result r;
    double sum = 0;
    NEED_GPU();
    k = get(H_ADD);
    REQUIRE(k);
    /* expected.json: n = 5000, grid 5, out == x + y exactly, sum 31243750 */
    CHECK(run_add_sum(k, 5000, 0, &e, &r, &sum) && r == tb_ok);
    CHECK(sum == 31243750.0);
}

/* tb_add has two specializations in the fixture: n divisible by 16
   (H_ADD16, "1111") and not (H_ADD, "1110"); both assume 16-byte aligned
   pointers. By name, the arguments choose. */
static int add_by_name(int n, int misalign, tb_result *r, tb_error *e, const tb_loaded_kernel **chosen) {
    devptr dx = dalloc(4096 * 4 + 64), dy = dalloc(4096 * 4), dout = dalloc(4096 * 4);
    float x[4096], y[4096], out[4096];
    tb_arg a[4];
    tb_launch_params p;
    int i, ok = 1;
    for (i = 0; i < n; i++) x[i] = 0.25f * i, y[i] = 3.0f * i;
    cu.htod(dx + (misalign ? 4 : 0), x, (size_t)n * 4);
    cu.htod(dy, y, (size_t)n * 4);
    cu.memset8(dout, 0, 4096 * 4);
    a[0] = tb_arg_u(dx + (misalign ? 4 : 0)), a[1] = tb_arg_u(dy), a[2] = tb_arg_u(dout), a[3] = tb_arg_i(n);
    memset(&p, 0, sizeof p);
    p.grid[0] = (uint32_t)(n + 1023) / 1024, p.grid[1] = p.grid[2] = 1;
    p.args = a, p.arg_count = 4;
    *chosen = NULL;
    *r = tb_kernel_table_select(table, "tb_add", 0, a, 4, chosen, e);
    if (*r == tb_ok) *r = tb_kernel_table_launch(table, "tb_add", 0, &p, e);
    if (*r == tb_ok && cu.ctx_sync() != 0) ok = 0;
    cu.dtoh(out, dout, (size_t)n * 4);
    for (i = 0; *r == tb_ok && i < n && ok; i++) ok = out[i] == x[i] + y[i];
    cu.mem_free(dx);
    cu.mem_free(dy);
    cu.mem_free(dout);
    return ok;
}

TEST(gpu_launch_by_name) {
    const tb_loaded_kernel *k;
    tb_error e;
    tb_result r;
    NEED_GPU();
    CHECK(add_by_name(4096, 0, &r, &e, &k) && r == tb_ok);
    CHECK(k == get(H_ADD16)); /* n % 16 == 0: the more specialized cubin */
    CHECK(add_by_name(4000 + 7, 0, &r, &e, &k) && r == tb_ok);
    CHECK(k == get(H_ADD)); /* not divisible: the general one */
    CHECK(get("tb_add") == get(H_ADD)); /* no arguments: the fewest assumptions */
    add_by_name(1024, 1, &r, &e, &k); /* x 4 bytes off: every tb_add cubin assumes alignment */
    CHECK(r == tb_err_misaligned && strstr(e.message, "argument 0") != NULL && k == NULL);
}

/* A Triton kernel that reads through TMA, launched from C: the launcher
   encodes the CUtensorMap from a tb_tensor_desc (PyTorch's static launcher
   refuses these kernels). tests/fixtures/triton-3.6-sm90-tma: y = 2 x. */
TEST(gpu_tensor_descriptor) {
    tb_loaded_kernel *k = NULL;
    tb_error e;
    tb_tensor_desc d;
    tb_arg a[4];
    tb_launch_params p;
    enum { M = 128, N = 96 };
    static float x[M * N], y[M * N];
    devptr dx, dy;
    int i, ok = 1, pass;
    NEED_GPU();
    CHECK_OK(tb_load_from_cache("tests/fixtures/triton-3.6-sm90-tma/cache",
                                "T76FDK4MEKBGYSX2JGO7B7I5XRQZ5ED5PUQ37QFJARTCHVIR2TAA", NULL, NULL, NULL, NULL, &k, &e),
             &e);
    REQUIRE(k);
    for (i = 0; i < M * N; i++) x[i] = (float)((i * 37) % 1001) * 0.125f - 40.0f;
    dx = dalloc(sizeof x), dy = dalloc(sizeof y);
    cu.htod(dx, x, sizeof x);
    for (pass = 0; pass < 2; pass++) { /* unchecked, then checked */
        cu.memset8(dy, 0, sizeof y);
        memset(&d, 0, sizeof d);
        d.base = (const void *)(uintptr_t)dx;
        d.rank = 2;
        d.shape[0] = M, d.shape[1] = N;
        d.strides[0] = N, d.strides[1] = 1;
        a[0] = tb_arg_p(&d), a[1] = tb_arg_u(dy), a[2] = tb_arg_i(M), a[3] = tb_arg_i(N);
        memset(&p, 0, sizeof p);
        p.grid[0] = 4, p.grid[1] = 3, p.grid[2] = 1;
        p.args = a, p.arg_count = 4;
        p.flags = pass ? TB_LAUNCH_CHECKED : 0;
        CHECK_OK(tb_launch(k, &p, &e), &e);
        CHECK(cu.ctx_sync() == 0);
        cu.dtoh(y, dy, sizeof y);
        for (i = 0; i < M * N && ok; i++) ok = y[i] == 2 * x[i];
        CHECK(ok);
    }
    /* a descriptor of the wrong rank, or a last stride other than 1 */
    d.rank = 3;
    CHECK(tb_launch(k, &p, &e) == tb_err_invalid_argument && strstr(e.message, "rank 2"));
    d.rank = 2, d.strides[1] = 2;
    CHECK(tb_launch(k, &p, &e) == tb_err_invalid_argument);
    d.strides[1] = 1, d.base = (const void *)(uintptr_t)(dx + 4); /* TMA wants 16-byte aligned bases */
    CHECK(tb_launch(k, &p, &e) == tb_err_cuda && strstr(e.message, "cuTensorMapEncodeTiled"));
    cu.mem_free(dx);
    cu.mem_free(dy);
    tb_unload(k);
}

TEST(gpu_tb_add_n16) {
    const tb_loaded_kernel *k;
    tb_error e;
    tb_result r;
    NEED_GPU();
    k = get(H_ADD16);
    REQUIRE(k);
    CHECK(run_add(k, 1024, TB_LAUNCH_CHECKED, &e, &r) && r == tb_ok);
    /* the cubin assumes n % 16 == 0: checked mode refuses 1000 */
    CHECK(!run_add(k, 1000, TB_LAUNCH_CHECKED, &e, &r) && r == tb_err_misaligned);
    CHECK(strstr(e.message, "divisible by 16") != NULL);
}

static const double scalar_values_expected[12] = {-7.0, -300.0, -70000.0, -1099511627776.0, 200.0, 60000.0,
                                                   4000000000.0, 9.223372036854779904e18, 1.5, -2.25,
                                                   3.141590118408203, 2.718281828459045};

static int64_t scalar_u8 = 200; /* the u8 argument */

static int run_scalars(const tb_loaded_kernel *k, unsigned flags, double *out, tb_error *e, tb_result *r) {
    devptr d = dalloc(12 * 8);
    tb_arg a[13];
    tb_launch_params p;
    int ok = 1;
    a[0] = tb_arg_u(d);
    a[1] = tb_arg_i(-7);
    a[2] = tb_arg_i(-300);
    a[3] = tb_arg_i(-70000);
    a[4] = tb_arg_i(-1099511627776LL);
    a[5] = tb_arg_i(scalar_u8);
    a[6] = tb_arg_u(60000);
    a[7] = tb_arg_u(4000000000ULL);
    a[8] = tb_arg_u(9223372036854779904ULL);
    a[9] = tb_arg_f(1.5);
    a[10] = tb_arg_f(-2.25);
    a[11] = tb_arg_f(3.14159);
    a[12] = tb_arg_f(2.718281828459045);
    memset(&p, 0, sizeof p);
    p.grid[0] = p.grid[1] = p.grid[2] = 1;
    p.args = a;
    p.arg_count = 13;
    p.flags = flags;
    cu.memset8(d, 0, 12 * 8);
    *r = tb_launch(k, &p, e);
    if (*r == tb_ok && cu.ctx_sync() != 0) ok = 0;
    cu.dtoh(out, d, 12 * 8);
    cu.mem_free(d);
    return ok;
}

TEST(gpu_tb_scalars) {
    tb_loaded_kernel *k = NULL, *kir = NULL;
    tb_error e;
    tb_result r;
    double out[12];
    int i;
    NEED_GPU();
    /* straight from the cache, with the signed/unsigned codes the IR cannot tell */
    CHECK_OK(tb_load_from_cache(FIXTURE_CACHE, H_SCALARS, NULL, "ObhilBHIKeyfd", NULL, NULL, &k, &e), &e);
    REQUIRE(k);
    CHECK(run_scalars(k, TB_LAUNCH_CHECKED, out, &e, &r) && r == tb_ok);
    for (i = 0; i < 12; i++) {
        if (out[i] != scalar_values_expected[i])
            printf("    out[%d] = %.17g, want %.17g\n", i, out[i], scalar_values_expected[i]);
        CHECK(out[i] == scalar_values_expected[i]);
    }
    /* with the codes read from the IR (u8 as i8 ...) the bits still arrive right */
    CHECK_OK(tb_load_from_cache(FIXTURE_CACHE, H_SCALARS, "tb_scalars", NULL, NULL, NULL, &kir, &e), &e);
    REQUIRE(kir);
    CHECK(run_scalars(kir, 0, out, &e, &r) && r == tb_ok);
    for (i = 0; i < 12; i++) CHECK(out[i] == scalar_values_expected[i]);
    /* ... and checked mode, knowing the IR has no signedness
       (TB_CONFIG_TYPES_FROM_IR), takes 200, 60000 and 4e9 as the unsigned
       values they are */
    CHECK(run_scalars(kir, TB_LAUNCH_CHECKED, out, &e, &r) && r == tb_ok);
    for (i = 0; i < 12; i++) CHECK(out[i] == scalar_values_expected[i]);
    /* but 256 fits neither reading of a byte */
    scalar_u8 = 256;
    run_scalars(kir, TB_LAUNCH_CHECKED, out, &e, &r);
    CHECK(r == tb_err_arg_range && strstr(e.message, "argument 5") != NULL);
    run_scalars(k, TB_LAUNCH_CHECKED, out, &e, &r);
    CHECK(r == tb_err_arg_range);
    scalar_u8 = 200;
    tb_unload(k);
    tb_unload(kir);
}

TEST(gpu_tb_matmul) {
    const tb_loaded_kernel *k;
    tb_kernel_info info;
    tb_error e;
    const int M = 512, N = 512, K = 512;
    uint16_t *a = (uint16_t *)malloc(M * K * 2), *b = (uint16_t *)malloc(K * N * 2);
    float *c = (float *)malloc(M * N * 4);
    double *ad = (double *)malloc(M * K * 8), *bd = (double *)malloc(K * N * 8), num = 0, den = 0;
    devptr da, db, dc;
    tb_arg args[9];
    tb_launch_params p;
    int i, j, q;
    unsigned seed = 12345;
    NEED_GPU();
    k = get(H_MATMUL);
    REQUIRE(k);
    tb_loaded_kernel_info(k, &info);
    CHECK(info.registers > 0 && info.param_check == 1 && info.param_count == 11);
    for (i = 0; i < M * K; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = tb_fp16_from_double(((int)(seed >> 16) % 2001 - 1000) / 1000.0);
        ad[i] = tb_fp16_to_double(a[i]);
    }
    for (i = 0; i < K * N; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = tb_fp16_from_double(((int)(seed >> 16) % 2001 - 1000) / 1000.0);
        bd[i] = tb_fp16_to_double(b[i]);
    }
    da = dalloc(M * K * 2), db = dalloc(K * N * 2), dc = dalloc(M * N * 4);
    cu.htod(da, a, M * K * 2);
    cu.htod(db, b, K * N * 2);
    cu.memset8(dc, 0xFF, M * N * 4); /* NaN: unwritten outputs fail */
    args[0] = tb_arg_u(da), args[1] = tb_arg_u(db), args[2] = tb_arg_u(dc);
    args[3] = tb_arg_i(M), args[4] = tb_arg_i(N), args[5] = tb_arg_i(K);
    args[6] = tb_arg_i(K), args[7] = tb_arg_i(N), args[8] = tb_arg_i(N); /* stride_am, stride_bk, stride_cm */
    memset(&p, 0, sizeof p);
    p.grid[0] = 4, p.grid[1] = 4, p.grid[2] = 1;
    p.args = args;
    p.arg_count = 9;
    p.flags = TB_LAUNCH_CHECKED;
    CHECK_OK(tb_launch(k, &p, &e), &e);
    CHECK(cu.ctx_sync() == 0);
    cu.dtoh(c, dc, M * N * 4);
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double ref = 0;
            for (q = 0; q < K; q++) ref += ad[i * K + q] * bd[q * N + j];
            num += (c[i * N + j] - ref) * (c[i * N + j] - ref);
            den += ref * ref;
        }
    printf("    relative error %.3g (registers %d, spills %d)\n", sqrt_approx(num / den), info.registers, info.spills);
    CHECK(num / den < 1e-10); /* relative error below 1e-5 */
    cu.mem_free(da), cu.mem_free(db), cu.mem_free(dc);
    free(a), free(b), free(c), free(ad), free(bd);
}

TEST(gpu_tb_noargs) {
    const tb_loaded_kernel *k;
    tb_launch_params p;
    tb_error e;
    NEED_GPU();
    k = get(H_NOARGS);
    REQUIRE(k);
    memset(&p, 0, sizeof p);
    p.grid[0] = p.grid[1] = p.grid[2] = 1;
    CHECK_OK(tb_launch(k, &p, &e), &e);
    CHECK(cu.ctx_sync() == 0);
}

static const tb_launch_config *config_of(const char *hash) {
    uint32_t i;
    for (i = 0; i < tb_bundle_launch_record_count(bundle); i++)
        if (!strcmp(tb_bundle_launch_record(bundle, i)->cache_key, hash))
            return &tb_bundle_launch_record(bundle, i)->configs[0];
    return NULL;
}

TEST(gpu_wrong_argument_lists) {
    tb_launch_config cfg;
    tb_loaded_kernel *k = NULL;
    tb_error e;
    const tb_loaded_kernel *good;
    tb_launch_params p;
    memset(&cfg, 0, sizeof cfg);
    tb_arg args[5];
    NEED_GPU();
    cfg = *config_of(H_ADD);
    cfg.arg_divisibility = "";
    cfg.arg_types = "OOOii"; /* one too many */
    CHECK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e) == tb_err_arg_mismatch);
    CHECK(k == NULL && strstr(e.message, "takes 6 parameters") != NULL);
    cfg.arg_types = "OOO"; /* one too few */
    CHECK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e) == tb_err_arg_mismatch);
    cfg.arg_types = "OOOl"; /* wrong size */
    CHECK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e) == tb_err_arg_mismatch);
    CHECK(strstr(e.message, "parameter 3 is 4 bytes") != NULL);
    cfg.arg_types = "OOOi";
    cfg.global_scratch.present = 0; /* the cubin still takes the scratch pointer */
    CHECK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e) == tb_err_arg_mismatch);
    cfg.global_scratch.present = 1;
    cfg.function_name = "not_in_the_cubin";
    CHECK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e) == tb_err_not_found);
    /* a launch with the wrong count never reaches the driver */
    good = get(H_ADD);
    REQUIRE(good);
    memset(&p, 0, sizeof p);
    memset(args, 0, sizeof args);
    p.grid[0] = p.grid[1] = p.grid[2] = 1;
    p.args = args;
    p.arg_count = 5;
    CHECK(tb_launch(good, &p, &e) == tb_err_arg_mismatch);
    p.arg_count = 3;
    CHECK(tb_launch(good, &p, &e) == tb_err_arg_mismatch);
}

TEST(gpu_zero_grid) {
    const tb_loaded_kernel *k;
    tb_launch_params p;
    tb_arg args[4];
    tb_error e;
    devptr d;
    unsigned char out[64];
    int i, dims, untouched = 1;
    NEED_GPU();
    k = get(H_ADD);
    REQUIRE(k);
    d = dalloc(64);
    for (dims = 0; dims < 3; dims++) {
        cu.memset8(d, 0xAB, 64);
        args[0] = tb_arg_u(d), args[1] = tb_arg_u(d), args[2] = tb_arg_u(d), args[3] = tb_arg_i(16);
        memset(&p, 0, sizeof p);
        p.grid[0] = p.grid[1] = p.grid[2] = 1;
        p.grid[dims] = 0;
        p.args = args;
        p.arg_count = 4;
        CHECK_OK(tb_launch(k, &p, &e), &e);
        CHECK(cu.ctx_sync() == 0);
        cu.dtoh(out, d, 64);
        for (i = 0; i < 64; i++) untouched &= out[i] == 0xAB;
    }
    CHECK(untouched);
    cu.mem_free(d);
}

typedef struct { const tb_loaded_kernel *k, *noargs; int ok; } thread_arg;
static void *launch_thread(void *p) {
    thread_arg *t = (thread_arg *)p;
    int i, n = 4096;
    tb_error e;
    tb_result r = tb_ok;
    tb_launch_params lp;
    /* no context is current on a new thread: the launcher makes the kernel's current */
    memset(&lp, 0, sizeof lp);
    lp.grid[0] = lp.grid[1] = lp.grid[2] = 1;
    t->ok = tb_launch(t->noargs, &lp, &e) == tb_ok;
    if (!t->ok) printf("    launch without a current context: %s\n", e.message);
    cu.ctx_set(gpu_ctx); /* for the test's own allocations */
    for (i = 0; i < 50 && t->ok; i++) t->ok = run_add(t->k, n, 0, &e, &r) && r == tb_ok;
    return NULL;
}

TEST(gpu_threads) {
    thread_arg ta[8];
    pthread_t th[8];
    int i;
    NEED_GPU();
    for (i = 0; i < 8; i++) {
        ta[i].k = get(H_ADD);
        ta[i].noargs = get(H_NOARGS);
        REQUIRE(ta[i].k && ta[i].noargs);
        pthread_create(&th[i], NULL, launch_thread, &ta[i]);
    }
    for (i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        CHECK(ta[i].ok);
    }
}

TEST(gpu_load_unload_cycles) {
    const tb_launch_config *cfg;
    tb_error e;
    int i, n = 10000;
    struct timespec t0, t1;
    NEED_GPU();
    cfg = config_of(H_NOARGS);
    REQUIRE(cfg);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < n; i++) {
        tb_loaded_kernel *k = NULL;
        if (tb_load_config(bundle, cfg, NULL, NULL, &k, &e) != tb_ok) {
            printf("    cycle %d: %s\n", i, e.message);
            CHECK(!"load failed");
            break;
        }
        if (i % 1000 == 0) {
            tb_launch_params p;
            memset(&p, 0, sizeof p);
            p.grid[0] = p.grid[1] = p.grid[2] = 1;
            CHECK_OK(tb_launch(k, &p, &e), &e);
        }
        tb_unload(k);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(cu.ctx_sync() == 0);
    printf("    %d load/unload cycles, %.1f us each\n", i,
           ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / (i ? i : 1));
}

TEST(gpu_checked_mode) {
    const tb_loaded_kernel *k;
    tb_launch_params p;
    tb_arg args[4];
    tb_error e;
    devptr d;
    NEED_GPU();
    k = get(H_ADD);
    REQUIRE(k);
    d = dalloc(4096);
    args[0] = tb_arg_u(d + 4); /* not 16-byte aligned: the cubin assumes it is */
    args[1] = tb_arg_u(d), args[2] = tb_arg_u(d), args[3] = tb_arg_i(16);
    memset(&p, 0, sizeof p);
    p.grid[0] = p.grid[1] = p.grid[2] = 1;
    p.args = args;
    p.arg_count = 4;
    p.flags = TB_LAUNCH_CHECKED;
    CHECK(tb_launch(k, &p, &e) == tb_err_misaligned);
    CHECK(strstr(e.message, "argument 0") != NULL);
    args[0] = tb_arg_u(d);
    args[3] = tb_arg_i((int64_t)1 << 40); /* does not fit i32 */
    CHECK(tb_launch(k, &p, &e) == tb_err_arg_range);
    args[3] = tb_arg_i(16);
    CHECK_OK(tb_launch(k, &p, &e), &e);
    CHECK(cu.ctx_sync() == 0);
    cu.mem_free(d);
}

TEST(gpu_shared_memory_limit) {
    tb_launch_config cfg;
    tb_loaded_kernel *k = NULL;
    tb_error e;
    memset(&cfg, 0, sizeof cfg);
    NEED_GPU();
    cfg = *config_of(H_MATMUL);
    cfg.shared_mem = 1u << 20;
    CHECK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e) == tb_err_shared_memory);
    CHECK(strstr(e.message, "1048576") != NULL && strstr(e.message, "allows") != NULL);
    CHECK(k == NULL);
}

/* Sizes that wrapped 32-bit arithmetic in 1.1.0: a shared_mem near 2^32
   passed the opt-in check, huge cluster dimensions overflowed the grid. */
TEST(gpu_hostile_sizes) {
    tb_launch_config cfg;
    tb_loaded_kernel *k = NULL;
    tb_launch_params p;
    tb_error e;
    memset(&cfg, 0, sizeof cfg);
    NEED_GPU();
    cfg = *config_of(H_NOARGS);
    cfg.shared_mem = 0xffffff00u;
    CHECK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e) == tb_err_shared_memory);
    CHECK(k == NULL);
    cfg = *config_of(H_NOARGS);
    cfg.num_ctas = 2;
    cfg.cluster_dims[0] = 65536, cfg.cluster_dims[1] = 65536, cfg.cluster_dims[2] = 1;
    CHECK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e) == tb_err_malformed);
    CHECK(k == NULL && strstr(e.message, "cluster") != NULL);
    cfg.cluster_dims[0] = 2, cfg.cluster_dims[1] = 1;
    CHECK_OK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e), &e);
    REQUIRE(k);
    memset(&p, 0, sizeof p);
    p.grid[0] = 0x80000000u, p.grid[1] = p.grid[2] = 1; /* times 2 is past what CUDA takes in x (2^31 - 1) */
    CHECK(tb_launch(k, &p, &e) == tb_err_invalid_argument &&
          strstr(e.message, "more blocks than a CUDA launch takes") != NULL);
    {
        devptr z = 0;
        void *params[2];
        params[0] = params[1] = &z; /* its two scratch pointers */
        CHECK(tb_launch_raw(k, 0x80000000u, 1, 1, NULL, params, &e) == tb_err_invalid_argument &&
              strstr(e.message, "more blocks than a CUDA launch takes") != NULL);
    }
    tb_unload(k);
}

TEST(gpu_raw_launch) {
    const tb_loaded_kernel *k;
    tb_kernel_info info;
    tb_error e;
    float x[1024], out[1024];
    devptr dx, dout, gs = 0, ps = 0;
    int n = 1024, i, ok = 1;
    void *params[6];
    NEED_GPU();
    k = get(H_ADD);
    REQUIRE(k);
    tb_loaded_kernel_info(k, &info);
    CHECK(info.param_count == 6 && info.arg_count == 4);
    for (i = 0; i < n; i++) x[i] = (float)i;
    dx = dalloc(n * 4), dout = dalloc(n * 4);
    cu.htod(dx, x, n * 4);
    params[0] = &dx, params[1] = &dx, params[2] = &dout, params[3] = &n, params[4] = &gs, params[5] = &ps;
    CHECK_OK(tb_launch_raw(k, 1, 1, 1, NULL, params, &e), &e);
    CHECK(cu.ctx_sync() == 0);
    cu.dtoh(out, dout, n * 4);
    for (i = 0; i < n; i++) ok &= out[i] == 2.0f * i;
    CHECK(ok);
    cu.mem_free(dx), cu.mem_free(dout);
}

TEST(gpu_launch_attributes) {
    tb_launch_config cfg;
    tb_loaded_kernel *k = NULL;
    tb_launch_params p;
    tb_error e;
    memset(&cfg, 0, sizeof cfg);
    NEED_GPU();
    cfg = *config_of(H_NOARGS);
    memset(&p, 0, sizeof p);
    p.grid[0] = 2, p.grid[1] = p.grid[2] = 1;
    cfg.flags = TB_CONFIG_PDL | TB_CONFIG_COOPERATIVE;
    CHECK_OK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e), &e);
    if (k) CHECK_OK(tb_launch(k, &p, &e), &e);
    CHECK(cu.ctx_sync() == 0);
    tb_unload(k);
    k = NULL;
    cfg.flags = 0;
    cfg.num_ctas = 2; /* a cluster of 2 blocks per program */
    CHECK_OK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e), &e);
    if (k) CHECK_OK(tb_launch(k, &p, &e), &e);
    CHECK(cu.ctx_sync() == 0);
    tb_unload(k);
}

TEST(gpu_scratch_required) {
    tb_launch_config cfg;
    tb_loaded_kernel *k = NULL;
    tb_launch_params p;
    tb_error e;
    devptr s;
    memset(&cfg, 0, sizeof cfg);
    NEED_GPU();
    cfg = *config_of(H_NOARGS);
    cfg.global_scratch.size = 1024;
    cfg.global_scratch.align = 128;
    CHECK_OK(tb_load_config(bundle, &cfg, NULL, NULL, &k, &e), &e);
    REQUIRE(k);
    memset(&p, 0, sizeof p);
    p.grid[0] = p.grid[1] = p.grid[2] = 1;
    CHECK(tb_launch(k, &p, &e) == tb_err_scratch);
    CHECK(strstr(e.message, "1024") != NULL);
    s = dalloc(1024);
    p.global_scratch = (void *)(uintptr_t)s;
    CHECK_OK(tb_launch(k, &p, &e), &e);
    CHECK(cu.ctx_sync() == 0);
    cu.mem_free(s);
    tb_unload(k);
}

TEST(gpu_kernel_table_lookup) {
    tb_kernel_table *t = NULL;
    const tb_loaded_kernel *k = NULL, *k2 = NULL;
    tb_error e;
    NEED_GPU();
    CHECK_OK(tb_kernel_table_create(bundle, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    CHECK_OK(tb_kernel_table_get(t, "tb_matmul", 0, &k, &e), &e);
    CHECK_OK(tb_kernel_table_get(t, H_MATMUL, 0, &k2, &e), &e);
    CHECK(k && k == k2); /* loaded once, on first use */
    CHECK(tb_kernel_table_get(t, "tb_matmul", 1, &k, &e) == tb_err_invalid_argument);
    CHECK(tb_kernel_table_get(t, "no_such_kernel", 0, &k, &e) == tb_err_not_found);
    tb_kernel_table_free(t);
}

/* A kernel loaded for device 1 launches on device 1, whatever context the
   launching thread has current. Skipped with fewer than two GPUs. */
TEST(gpu_second_device) {
    tb_load_options lo;
    tb_loaded_kernel *k = NULL;
    tb_kernel_info info;
    tb_error e;
    void *ctx1 = NULL;
    int ndev = 0, i, ok = 1, n = 4096;
    devptr dx, dy, dout;
    float *x, *out;
    tb_arg args[4];
    tb_launch_params p;
    NEED_GPU();
    tb_driver_device_count(&ndev, &e);
    if (ndev < 2) SKIP("one CUDA device here; this needs two");
    memset(&lo, 0, sizeof lo);
    lo.device = 1;
    lo.flags = TB_LOAD_PRIMARY_CONTEXT;
    CHECK_OK(tb_load_config(bundle, config_of(H_ADD), NULL, &lo, &k, &e), &e);
    REQUIRE(k);
    tb_loaded_kernel_info(k, &info);
    CHECK(info.device == 1);
    /* device 1's memory */
    REQUIRE(cu.primary_retain(&ctx1, 1) == 0 && cu.ctx_set(ctx1) == 0);
    x = (float *)malloc(n * 4);
    out = (float *)malloc(n * 4);
    for (i = 0; i < n; i++) x[i] = (float)i;
    dx = dalloc(n * 4), dy = dalloc(n * 4), dout = dalloc(n * 4);
    REQUIRE(dx && dy && dout);
    cu.htod(dx, x, n * 4);
    cu.htod(dy, x, n * 4);
    /* launched with device 0's context current */
    cu.ctx_set(gpu_ctx);
    args[0] = tb_arg_u(dx), args[1] = tb_arg_u(dy), args[2] = tb_arg_u(dout), args[3] = tb_arg_i(n);
    memset(&p, 0, sizeof p);
    p.grid[0] = (uint32_t)(n / 1024), p.grid[1] = p.grid[2] = 1;
    p.args = args;
    p.arg_count = 4;
    CHECK_OK(tb_launch(k, &p, &e), &e);
    cu.ctx_set(ctx1);
    CHECK(cu.ctx_sync() == 0);
    cu.dtoh(out, dout, n * 4);
    for (i = 0; i < n; i++) ok &= out[i] == 2.0f * i;
    CHECK(ok);
    /* a kernel loaded while device 1's context is current belongs to it */
    {
        tb_loaded_kernel *k2 = NULL;
        CHECK_OK(tb_load_config(bundle, config_of(H_NOARGS), NULL, NULL, &k2, &e), &e);
        tb_loaded_kernel_info(k2, &info);
        CHECK(k2 && info.device == 1);
        tb_unload(k2);
    }
    cu.mem_free(dx), cu.mem_free(dy), cu.mem_free(dout);
    cu.ctx_set(gpu_ctx);
    tb_unload(k);
    free(x);
    free(out);
}

/* A launch runs in the kernel's context whatever is current: on the
   kernel's stream (which carries its context) and on the NULL stream
   (where the library makes the kernel's context current), with another
   context of the device current and with none; another context's stream
   is refused. */
TEST(gpu_launch_contexts) {
    typedef int (*ctx_create_t)(void **, unsigned, int);
    typedef int (*ctx_destroy_t)(void *);
    typedef int (*stream_create_t)(void **, unsigned);
    typedef int (*stream_sync_t)(void *);
    typedef int (*stream_destroy_t)(void *);
    ctx_create_t ctx_create;
    ctx_destroy_t ctx_destroy;
    stream_create_t stream_create;
    stream_sync_t stream_sync;
    stream_destroy_t stream_destroy;
    const tb_loaded_kernel *k;
    void *other = NULL, *mine = NULL, *theirs = NULL, *sym;
    int n = 4096, i, round;
    devptr dx, dout;
    float *x, *out;
    tb_arg args[4];
    tb_launch_params p;
    tb_error e;
    NEED_GPU();
    k = get(H_ADD);
    REQUIRE(k);
    sym = tb_driver_symbol("cuCtxCreate_v2"), memcpy(&ctx_create, &sym, sizeof sym);
    sym = tb_driver_symbol("cuCtxDestroy_v2"), memcpy(&ctx_destroy, &sym, sizeof sym);
    sym = tb_driver_symbol("cuStreamCreate"), memcpy(&stream_create, &sym, sizeof sym);
    sym = tb_driver_symbol("cuStreamSynchronize"), memcpy(&stream_sync, &sym, sizeof sym);
    sym = tb_driver_symbol("cuStreamDestroy_v2"), memcpy(&stream_destroy, &sym, sizeof sym);
    REQUIRE(ctx_create && ctx_destroy && stream_create && stream_sync && stream_destroy);
    cu.ctx_set(gpu_ctx);
    REQUIRE(stream_create(&mine, 1) == 0);
    x = (float *)malloc(n * 4);
    out = (float *)malloc(n * 4);
    for (i = 0; i < n; i++) x[i] = (float)i;
    dx = dalloc(n * 4), dout = dalloc(n * 4);
    REQUIRE(dx && dout && x && out);
    cu.htod(dx, x, n * 4);
    REQUIRE(ctx_create(&other, 0, 0) == 0); /* now current */
    REQUIRE(stream_create(&theirs, 1) == 0);
    args[0] = tb_arg_u(dx), args[1] = tb_arg_u(dx), args[2] = tb_arg_u(dout), args[3] = tb_arg_i(n);
    memset(&p, 0, sizeof p);
    p.grid[0] = (uint32_t)(n / 1024), p.grid[1] = p.grid[2] = 1;
    p.args = args, p.arg_count = 4;
    for (round = 0; round < 4; round++) {
        int ok = 1;
        void *cur = round < 2 ? other : NULL;
        cu.ctx_set(gpu_ctx);
        cu.memset8(dout, 0xFF, n * 4);
        cu.ctx_sync();
        cu.ctx_set(cur);
        p.stream = round % 2 ? NULL : mine;
        CHECK_OK(tb_launch(k, &p, &e), &e);
        CHECK_OK(tb_kernel_table_launch(table, H_ADD, 0, &p, &e), &e);
        cu.ctx_set(gpu_ctx);
        CHECK(cu.ctx_sync() == 0);
        cu.dtoh(out, dout, n * 4);
        for (i = 0; i < n; i++) ok &= out[i] == 2.0f * i;
        CHECK(ok);
        if (!ok) printf("    round %d (%s current, %s stream)\n", round, cur ? "another context" : "no context",
                        p.stream ? "the kernel's" : "the NULL");
    }
    /* another context's stream: refused, with either context current */
    p.stream = theirs;
    cu.ctx_set(other);
    CHECK(tb_launch(k, &p, &e) == tb_err_cuda && strstr(e.message, "cuLaunchKernel"));
    cu.ctx_set(gpu_ctx);
    CHECK(tb_launch(k, &p, &e) == tb_err_cuda);
    cu.ctx_set(other);
    stream_destroy(theirs);
    cu.ctx_set(gpu_ctx);
    CHECK(ctx_destroy(other) == 0);
    cu.ctx_set(gpu_ctx);
    stream_destroy(mine);
    cu.mem_free(dx), cu.mem_free(dout);
    free(x), free(out);
}

TEST(gpu_device_out_of_range) {
    tb_load_options lo;
    tb_loaded_kernel *k = NULL;
    tb_error e;
    NEED_GPU();
    memset(&lo, 0, sizeof lo);
    lo.device = 99;
    lo.flags = TB_LOAD_PRIMARY_CONTEXT;
    CHECK(tb_load_config(bundle, config_of(H_NOARGS), NULL, &lo, &k, &e) == tb_err_no_device);
    CHECK(strstr(e.message, "99") != NULL && k == NULL);
}

/* ---------------------------------------------------- autotune and graphs */
/* A record of two configs of tb_add (the one cubin twice), its grid rule
   cdiv(n, 1024), keyed on n; mutated marks the argument written in place. */
static tb_bundle *tune_bundle(int mutated_out) {
    static const tb_grid_op gx[] = {{TB_GRID_ARG, 3, 0}, {TB_GRID_CONST, 0, 1024}, {TB_GRID_CEILDIV, 0, 0}};
    static const tb_grid_op one[] = {{TB_GRID_CONST, 0, 1}};
    static const char *const names[] = {"x", "y", "out", "n"};
    static const uint32_t mutated[] = {2}, key[] = {3};
    static tb_grid_rule g;
    static tb_call_info ci;
    const tb_launch_record *src = NULL;
    const tb_kernel *k = tb_bundle_find_kernel(bundle, H_ADD);
    tb_launch_config c[2];
    tb_launch_record r;
    tb_bundle *b = NULL;
    tb_error e;
    uint32_t i, kk;
    for (i = 0; i < tb_bundle_launch_record_count(bundle); i++)
        if (!strcmp(tb_bundle_launch_record(bundle, i)->cache_key, H_ADD)) src = tb_bundle_launch_record(bundle, i);
    if (!src || !k || tb_bundle_create(NULL, &b, &e) || tb_bundle_add_kernel(b, H_ADD, 0, &kk, &e)) return NULL;
    for (i = 0; i < k->artifact_count; i++)
        if (tb_bundle_add_artifact(b, kk, k->artifacts[i].name, k->artifacts[i].data, k->artifacts[i].size,
                                   TB_REFERENCE, &e))
            return NULL;
    g.op_count[0] = 3, g.op_count[1] = g.op_count[2] = 1, g.ops[0] = gx, g.ops[1] = g.ops[2] = one;
    memset(&ci, 0, sizeof ci);
    ci.arg_count = 4, ci.arg_names = names, ci.key_count = 1, ci.key = key;
    if (mutated_out) ci.mutated_count = 1, ci.mutated = mutated;
    c[0] = src->configs[0], c[0].grid = &g;
    c[1] = c[0];
    memset(&r, 0, sizeof r);
    r.cache_key = "tune_add", r.kernel_name = "tune_add", r.config_count = 2, r.configs = c, r.call = &ci;
    if (tb_bundle_add_launch_record(b, &r, &e)) {
        printf("    %s\n", e.message);
        tb_bundle_free(b);
        return NULL;
    }
    return b;
}

/* out = x + y in place (out is x): the trials must run on a copy, or x
   would have y added once per trial. */
TEST(gpu_autotune_mutated_argument) {
    int n = 100000, i, ok = 1;
    float *x = (float *)malloc(n * 4), *y = (float *)malloc(n * 4), *got = (float *)malloc(n * 4);
    devptr dx, dy;
    tb_bundle *b;
    tb_kernel_table *t = NULL;
    tb_launch_params p;
    tb_arg a[4];
    size_t bytes[4];
    tb_autotune_options ao;
    tb_error e;
    uint32_t cfg = 9;
    double ms = 0;
    char *dir, path[600];
    NEED_GPU();
    b = tune_bundle(1);
    REQUIRE(b);
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    memset(&ao, 0, sizeof ao);
    ao.rep_ms = 20, ao.warmup_ms = 5; /* a quicker tune than do_bench's defaults */
    CHECK_OK(tb_kernel_table_set_autotune(t, &ao, &e), &e);
    dx = dalloc(n * 4), dy = dalloc(n * 4);
    for (i = 0; i < n; i++) x[i] = 0.25f * i, y[i] = 1.0f + i;
    cu.htod(dx, x, n * 4);
    cu.htod(dy, y, n * 4);
    a[0] = tb_arg_u(dx), a[1] = tb_arg_u(dy), a[2] = tb_arg_u(dx), a[3] = tb_arg_i(n);
    bytes[0] = bytes[1] = bytes[2] = (size_t)n * 4, bytes[3] = 0;
    memset(&p, 0, sizeof p);
    p.args = a, p.arg_count = 4, p.flags = TB_LAUNCH_GRID_AUTO, p.arg_bytes = bytes;
    CHECK_OK(tb_kernel_table_launch(t, "tune_add", TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(cu.ctx_sync() == 0);
    cu.dtoh(got, dx, n * 4);
    for (i = 0; i < n && ok; i++) ok = got[i] == x[i] + y[i];
    CHECK(ok); /* exactly one addition: the trials ran on a copy */
    CHECK_OK(tb_kernel_table_choice(t, "tune_add", a, 4, &cfg, &ms, &e), &e);
    CHECK(cfg < 2 && ms > 0);
    printf("    tuned: config %u, %.4f ms\n", cfg, ms);
    /* saved and read back by another table: it launches at once */
    dir = u_tempdir("gputune");
    snprintf(path, sizeof path, "%s/choices", dir);
    CHECK_OK(tb_kernel_table_save_choices(t, path, &e), &e);
    tb_kernel_table_free(t);
    t = NULL;
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    CHECK_OK(tb_kernel_table_load_choices(t, path, &e), &e);
    {
        uint32_t cfg2 = 9;
        CHECK(tb_kernel_table_choice(t, "tune_add", a, 4, &cfg2, NULL, &e) == tb_ok && cfg2 == cfg);
    }
    u_rmtree(dir);
    free(dir);
    tb_kernel_table_free(t);
    tb_bundle_free(b);
    cu.mem_free(dx);
    cu.mem_free(dy);
    free(x), free(y), free(got);
}

/* A captured sequence replays like plain launches, bit for bit, before and
   after an update gives one launch new buffers; an untuned autotune launch
   is refused inside the capture, a tuned one is captured. */
TEST(gpu_graph_capture_update) {
    enum { N = 5000, L = 4 };
    int (*stream_create)(void **, unsigned) = NULL, (*stream_sync)(void *) = NULL, (*stream_destroy)(void *) = NULL;
    void *s1 = tb_driver_symbol("cuStreamCreate"), *s2 = tb_driver_symbol("cuStreamSynchronize");
    void *s3 = tb_driver_symbol("cuStreamDestroy_v2"), *stream = NULL;
    devptr x[L + 1], y[L + 1], out[L + 1], plain[L + 1];
    float *hx = (float *)malloc(N * 4), *h1 = (float *)malloc(N * 4), *h2 = (float *)malloc(N * 4);
    tb_graph *g = NULL;
    tb_launch_params p;
    tb_arg a[L + 1][4];
    tb_error e;
    tb_bundle *tb_ = NULL;
    tb_kernel_table *tt = NULL;
    const tb_loaded_kernel *k;
    int i, j, ok = 1;
    NEED_GPU();
    memcpy(&stream_create, &s1, sizeof s1), memcpy(&stream_sync, &s2, sizeof s2),
        memcpy(&stream_destroy, &s3, sizeof s3);
    REQUIRE(stream_create && stream_sync && stream_destroy && stream_create(&stream, 1) == 0);
    k = get(H_ADD);
    REQUIRE(k);
    for (j = 0; j <= L; j++) {
        x[j] = dalloc(N * 4), y[j] = dalloc(N * 4), out[j] = dalloc(N * 4), plain[j] = dalloc(N * 4);
        for (i = 0; i < N; i++) hx[i] = 0.5f * i + (float)j;
        cu.htod(x[j], hx, N * 4);
        for (i = 0; i < N; i++) hx[i] = 3.0f - (float)i * j;
        cu.htod(y[j], hx, N * 4);
        cu.memset8(out[j], 0, N * 4);
        cu.memset8(plain[j], 0, N * 4);
        a[j][0] = tb_arg_u(x[j]), a[j][1] = tb_arg_u(y[j]), a[j][2] = tb_arg_u(out[j]), a[j][3] = tb_arg_i(N);
    }
    /* tune the autotune record for N first (outside the capture) */
    tb_ = tune_bundle(0);
    REQUIRE(tb_);
    CHECK_OK(tb_kernel_table_create(tb_, NULL, NULL, TB_TABLE_LAZY, &tt, &e), &e);
    {
        tb_autotune_options ao;
        memset(&ao, 0, sizeof ao);
        ao.rep_ms = 10, ao.warmup_ms = 2;
        tb_kernel_table_set_autotune(tt, &ao, &e);
    }
    memset(&p, 0, sizeof p);
    p.stream = stream, p.arg_count = 4;
    p.args = a[L], p.flags = TB_LAUNCH_GRID_AUTO;
    CHECK_OK(tb_kernel_table_launch(tt, "tune_add", TB_CONFIG_AUTOTUNE, &p, &e), &e);
    stream_sync(stream);
    CHECK_OK(tb_graph_begin(stream, NULL, &g, &e), &e);
    REQUIRE(g);
    p.flags = 0, p.grid[0] = (N + 1023) / 1024, p.grid[1] = p.grid[2] = 1;
    for (j = 0; j < L - 1; j++) {
        p.args = a[j];
        CHECK_OK(tb_launch(k, &p, &e), &e);
    }
    p.args = a[L - 1], p.flags = TB_LAUNCH_GRID_AUTO;
    CHECK_OK(tb_kernel_table_launch(tt, "tune_add", TB_CONFIG_AUTOTUNE, &p, &e), &e); /* tuned for N: captured */
    {
        tb_arg other[4];
        memcpy(other, a[L - 1], sizeof other);
        other[3] = tb_arg_i(N - 1); /* a size not tuned: it would benchmark */
        p.args = other;
        CHECK(tb_kernel_table_launch(tt, "tune_add", TB_CONFIG_AUTOTUNE, &p, &e) == tb_err_invalid_argument &&
              strstr(e.message, "captured"));
    }
    CHECK_OK(tb_graph_end(g, &e), &e);
    CHECK(tb_graph_launch_count(g) == L);
    CHECK_OK(tb_graph_launch(g, stream, &e), &e);
    /* the same launches, plain, into other buffers */
    p.flags = 0;
    for (j = 0; j < L; j++) {
        tb_arg b4[4];
        memcpy(b4, a[j], sizeof b4);
        b4[2] = tb_arg_u(plain[j]);
        p.args = b4;
        CHECK_OK(tb_launch(k, &p, &e), &e);
    }
    CHECK(stream_sync(stream) == 0);
    for (j = 0; j < L && ok; j++) {
        cu.dtoh(h1, out[j], N * 4);
        cu.dtoh(h2, plain[j], N * 4);
        ok = memcmp(h1, h2, N * 4) == 0;
    }
    CHECK(ok);
    /* update launch 1 to read x[L], y[L] and write out[L]; replay */
    p.args = a[L], p.flags = 0, p.grid[0] = p.grid[1] = p.grid[2] = 0; /* the captured grid */
    CHECK_OK(tb_graph_update(g, 1, &p, &e), &e);
    CHECK(tb_graph_update(g, L, &p, &e) == tb_err_invalid_argument);
    cu.memset8(out[L], 0, N * 4);
    CHECK_OK(tb_graph_launch(g, stream, &e), &e);
    {
        tb_arg b4[4];
        memcpy(b4, a[L], sizeof b4);
        b4[2] = tb_arg_u(plain[L]);
        p.args = b4, p.grid[0] = (N + 1023) / 1024, p.grid[1] = p.grid[2] = 1;
        CHECK_OK(tb_launch(k, &p, &e), &e);
    }
    CHECK(stream_sync(stream) == 0);
    cu.dtoh(h1, out[L], N * 4);
    cu.dtoh(h2, plain[L], N * 4);
    CHECK(memcmp(h1, h2, N * 4) == 0 && h1[7] == 0.5f * 7 + L + 3.0f - 7.0f * L);
    tb_graph_free(g);
    tb_kernel_table_free(tt);
    tb_bundle_free(tb_);
    for (j = 0; j <= L; j++) cu.mem_free(x[j]), cu.mem_free(y[j]), cu.mem_free(out[j]), cu.mem_free(plain[j]);
    stream_destroy(stream);
    free(hx), free(h1), free(h2);
}

/* A program over the fixture's tb_add, run by the runner on the GPU:
   out = (x + c) + y through a workspace buffer, z = 1.0 but for 16 of
   c's values copied in (a memset and a copy); directly, as a graph on
   static buffers (the memset and copy write an output), and, for the
   launches-only part, as a graph whose nodes are updated when the output
   moves. Every value checked exactly. */
#define MN 4096
static tb_program_step model_steps[4];
static tb_operand model_ops[4][4];
static uint32_t add_record(void) {
    uint32_t i;
    for (i = 0; i < tb_bundle_launch_record_count(bundle); i++)
        if (!strcmp(tb_bundle_launch_record(bundle, i)->cache_key, H_ADD)) return i;
    return 0xffffffffu;
}
static tb_operand mop(uint32_t space, uint32_t index, uint64_t value) {
    tb_operand o;
    o.space = space, o.index = index, o.value = value;
    return o;
}
static int model_check(const float *x, const float *y, const float *c, devptr dout, devptr dz, int with_z) {
    static float out[MN], z[MN];
    int i, ok = cu.ctx_sync() == 0;
    cu.dtoh(out, dout, sizeof out);
    if (with_z) cu.dtoh(z, dz, sizeof z);
    for (i = 0; i < MN && ok; i++) {
        float b0 = x[i] + c[i];
        ok = out[i] == b0 + y[i] && (!with_z || z[i] == (i < 16 ? c[i + 4] : 1.0f));
    }
    return ok;
}
TEST(gpu_model_program) {
    static float x[MN], y[MN], c[MN];
    tb_tensor_spec in[2], outs[2];
    tb_program_constant k;
    tb_program_buffer buf;
    tb_program p;
    tb_model_desc d;
    tb_model *m = NULL;
    tb_tensor ti[2], to[2];
    tb_error e;
    uint32_t rec, i, pass;
    devptr dx, dy, dout, dout2, dz;
    int (*stream_create)(void **, unsigned) = NULL;
    void *s1 = tb_driver_symbol("cuStreamCreate"), *stream = NULL;
    NEED_GPU();
    REQUIRE((rec = add_record()) != 0xffffffffu);
    memcpy(&stream_create, &s1, sizeof s1);
    REQUIRE(stream_create && stream_create(&stream, 1) == 0);
    for (i = 0; i < MN; i++) x[i] = 0.5f * i, y[i] = 2.0f * i, c[i] = 3.25f * i - 7;
    memset(in, 0, sizeof in), memset(outs, 0, sizeof outs), memset(&k, 0, sizeof k), memset(&p, 0, sizeof p);
    for (i = 0; i < 4; i++) {
        tb_tensor_spec *t = i < 2 ? &in[i] : &outs[i - 2];
        t->name = i == 0 ? "x" : i == 1 ? "y" : i == 2 ? "out" : "z";
        t->dtype = TB_DTYPE_FLOAT32, t->rank = 1, t->align = 16, t->shape[0] = MN, t->strides[0] = 1;
    }
    k.name = "c", k.dtype = TB_DTYPE_FLOAT32, k.size = sizeof c, k.data = c;
    buf.offset = 0, buf.size = sizeof c, buf.first_step = 0, buf.last_step = 1;
    memset(model_steps, 0, sizeof model_steps);
    model_ops[0][0] = mop(TB_SPACE_INPUT, 0, 0), model_ops[0][1] = mop(TB_SPACE_CONSTANT, 0, 0);
    model_ops[0][2] = mop(TB_SPACE_BUFFER, 0, 0), model_ops[0][3] = mop(0, 0, MN);
    model_ops[1][0] = mop(TB_SPACE_BUFFER, 0, 0), model_ops[1][1] = mop(TB_SPACE_INPUT, 1, 0);
    model_ops[1][2] = mop(TB_SPACE_OUTPUT, 0, 0), model_ops[1][3] = mop(0, 0, MN);
    model_ops[2][0] = mop(TB_SPACE_OUTPUT, 1, 0);
    model_ops[3][0] = mop(TB_SPACE_OUTPUT, 1, 0), model_ops[3][1] = mop(TB_SPACE_CONSTANT, 0, 16);
    for (i = 0; i < 2; i++) {
        model_steps[i].kind = TB_STEP_LAUNCH, model_steps[i].record = rec, model_steps[i].operand_count = 4;
        model_steps[i].grid[0] = MN / 1024, model_steps[i].grid[1] = model_steps[i].grid[2] = 1;
    }
    model_steps[2].kind = TB_STEP_MEMSET, model_steps[2].operand_count = 1, model_steps[2].width = 4;
    model_steps[2].value = 0x3f800000u, model_steps[2].count = MN;
    model_steps[3].kind = TB_STEP_COPY, model_steps[3].operand_count = 2, model_steps[3].count = 64;
    for (i = 0; i < 4; i++) model_steps[i].operands = model_ops[i];
    p.input_count = 2, p.inputs = in, p.output_count = 2, p.outputs = outs, p.constant_count = 1, p.constants = &k;
    p.buffer_count = 1, p.buffers = &buf, p.workspace_size = sizeof c, p.step_count = 4, p.steps = model_steps;
    dx = dalloc(sizeof x), dy = dalloc(sizeof y), dout = dalloc(sizeof x), dout2 = dalloc(sizeof x),
    dz = dalloc(sizeof x);
    REQUIRE(dx && dy && dout && dout2 && dz);
    cu.htod(dx, x, sizeof x), cu.htod(dy, y, sizeof y);
    for (pass = 0; pass < 3; pass++) { /* direct, graph on static buffers, graph with node updates */
        int with_z = pass < 2;
        p.output_count = with_z ? 2 : 1, p.step_count = with_z ? 4 : 2;
        CHECK_OK(tb_bundle_set_program(bundle, &p, &e), &e);
        memset(&d, 0, sizeof d);
        d.bundle = bundle, d.table = pass == 1 ? table : NULL, d.flags = pass ? TB_MODEL_GRAPH : 0;
        CHECK_OK(tb_model_load(&d, &m, &e), &e);
        REQUIRE(m);
        ti[0] = tb_tensor_for(tb_model_input(m, 0), (void *)(uintptr_t)dx);
        ti[1] = tb_tensor_for(tb_model_input(m, 1), (void *)(uintptr_t)dy);
        to[0] = tb_tensor_for(tb_model_output(m, 0), (void *)(uintptr_t)dout);
        if (with_z) to[1] = tb_tensor_for(tb_model_output(m, 1), (void *)(uintptr_t)dz);
        cu.memset8(dout, 0xFF, sizeof x), cu.memset8(dz, 0xFF, sizeof x);
        CHECK_OK(tb_model_run(m, ti, 2, to, p.output_count, stream, &e), &e);
        CHECK(model_check(x, y, c, dout, dz, with_z));
        cu.memset8(dout2, 0xFF, sizeof x), cu.memset8(dz, 0xFF, sizeof x);
        to[0].data = (void *)(uintptr_t)dout2; /* moved: updated, or copied out of the static buffer */
        CHECK_OK(tb_model_run(m, ti, 2, to, p.output_count, stream, &e), &e);
        CHECK(model_check(x, y, c, dout2, dz, with_z));
        ti[0].data = (void *)(uintptr_t)(dx + 4); /* the cubin assumes 16-byte alignment */
        CHECK(tb_model_run(m, ti, 2, to, p.output_count, stream, &e) == tb_err_misaligned);
        tb_model_free(m);
        m = NULL;
    }
    CHECK_OK(tb_bundle_set_program(bundle, NULL, &e), &e);
    cu.mem_free(dx), cu.mem_free(dy), cu.mem_free(dout), cu.mem_free(dout2), cu.mem_free(dz);
}


/* Two programs over one shared state, run with nothing but the model's
   own device calls (no driver prototypes): "acc" adds x into the state s
   (tb_add(s, x, s)), "read" copies s to out. acc twice, then read: s0 +
   2x; a reset puts s0 back. And the caller's memory checked against the
   driver's allocations: a tensor past its allocation's end, an output on
   an input, refused before anything runs. */
TEST(gpu_model_programs_device_calls) {
    static float x[MN], s0[MN], out[MN];
    tb_tensor_spec xs, outs;
    tb_program_constant k;
    tb_program pa, pr;
    tb_program_step sa[1], sr[1];
    tb_operand oa[4], orr[2];
    tb_model_desc d;
    tb_model *m = NULL;
    tb_bundle *b = NULL;
    tb_tensor tx, tout;
    tb_error e;
    uint32_t rec, i, j, pass, acc = 9, rd = 9;
    void *dx = NULL, *dout = NULL, *stream = NULL;
    int ok;
    NEED_GPU();
    REQUIRE((rec = add_record()) != 0xffffffffu);
    for (i = 0; i < MN; i++) x[i] = 0.25f * i, s0[i] = 1.0f - i;
    memset(&xs, 0, sizeof xs), memset(&k, 0, sizeof k), memset(&pa, 0, sizeof pa), memset(&pr, 0, sizeof pr);
    memset(sa, 0, sizeof sa), memset(sr, 0, sizeof sr);
    xs.name = "x", xs.dtype = TB_DTYPE_FLOAT32, xs.rank = 1, xs.align = 16, xs.shape[0] = MN, xs.strides[0] = 1;
    outs = xs, outs.name = "out";
    k.name = "s", k.dtype = TB_DTYPE_FLOAT32, k.size = sizeof s0, k.data = s0,
    k.flags = TB_CONSTANT_STATE | TB_CONSTANT_SHARED;
    oa[0] = mop(TB_SPACE_CONSTANT, 0, 0), oa[1] = mop(TB_SPACE_INPUT, 0, 0), oa[2] = mop(TB_SPACE_CONSTANT, 0, 0),
    oa[3] = mop(0, 0, MN);
    sa[0].kind = TB_STEP_LAUNCH, sa[0].record = rec, sa[0].operand_count = 4, sa[0].operands = oa;
    sa[0].grid[0] = MN / 1024, sa[0].grid[1] = sa[0].grid[2] = 1;
    orr[0] = mop(TB_SPACE_OUTPUT, 0, 0), orr[1] = mop(TB_SPACE_CONSTANT, 0, 0);
    sr[0].kind = TB_STEP_COPY, sr[0].operand_count = 2, sr[0].count = sizeof s0, sr[0].operands = orr;
    pa.name = "acc", pa.input_count = 1, pa.inputs = &xs, pa.constant_count = 1, pa.constants = &k, pa.step_count = 1,
    pa.steps = sa;
    pr.name = "read", pr.output_count = 1, pr.outputs = &outs, pr.constant_count = 1, pr.constants = &k,
    pr.step_count = 1, pr.steps = sr;
    /* a bundle of its own: the fixture's records and kernels, and the two programs */
    {
        size_t n = 0;
        void *buf = NULL;
        CHECK_OK(tb_bundle_write_memory(bundle, NULL, 0, &n, &e), &e);
        REQUIRE((buf = malloc(n)) != NULL);
        CHECK_OK(tb_bundle_write_memory(bundle, buf, n, NULL, &e), &e);
        CHECK_OK(tb_bundle_read_memory(buf, n, NULL, TB_READ_COPY, &b, &e), &e);
        free(buf);
        REQUIRE(b);
    }
    CHECK_OK(tb_bundle_add_program(b, &pa, &e), &e);
    CHECK_OK(tb_bundle_add_program(b, &pr, &e), &e);
    for (pass = 0; pass < 2; pass++) { /* direct, then graphs */
        memset(&d, 0, sizeof d);
        d.bundle = b, d.flags = pass ? TB_MODEL_GRAPH : 0;
        CHECK_OK(tb_model_load(&d, &m, &e), &e);
        REQUIRE(m);
        CHECK_OK(tb_model_find_program(m, "acc", &acc, &e), &e);
        CHECK_OK(tb_model_find_program(m, "read", &rd, &e), &e);
        CHECK_OK(tb_model_device_alloc(m, 2 * sizeof x, &dx, &e), &e); /* x, and room for an output beside it */
        CHECK_OK(tb_model_device_alloc(m, sizeof out, &dout, &e), &e);
        CHECK_OK(tb_model_stream_create(m, &stream, &e), &e);
        REQUIRE(dx && dout && stream);
        CHECK_OK(tb_model_copy_to_device(m, dx, x, sizeof x, NULL, &e), &e);
        tx = tb_tensor_for(&xs, dx), tout = tb_tensor_for(&outs, dout);
        CHECK_OK(tb_model_run_program(m, acc, &tx, 1, NULL, 0, stream, &e), &e);
        CHECK_OK(tb_model_run_program(m, acc, &tx, 1, NULL, 0, stream, &e), &e);
        CHECK_OK(tb_model_run_program(m, rd, NULL, 0, &tout, 1, stream, &e), &e);
        memset(out, 0, sizeof out);
        CHECK_OK(tb_model_copy_to_host(m, out, dout, sizeof out, stream, &e), &e);
        CHECK_OK(tb_model_synchronize(m, stream, &e), &e);
        for (ok = 1, j = 0; j < MN && ok; j++) ok = out[j] == (s0[j] + x[j]) + x[j];
        CHECK(ok);
        CHECK_OK(tb_model_reset_state(m, stream, &e), &e);
        CHECK_OK(tb_model_run_program(m, rd, NULL, 0, &tout, 1, stream, &e), &e);
        CHECK_OK(tb_model_copy_to_host(m, out, dout, sizeof out, stream, &e), &e);
        CHECK_OK(tb_model_synchronize(m, stream, &e), &e);
        CHECK(!memcmp(out, s0, sizeof out));
        /* the driver's allocations: x in the second half of its own: fits;
           4 KiB later: past the end of it, and of dout where the driver put
           dout right after it (the check follows allocations that touch,
           as memory mapped in pieces does) */
        tx.data = (char *)dx + sizeof x;
        CHECK_OK(tb_model_run_program(m, acc, &tx, 1, NULL, 0, stream, &e), &e);
        {
            char *end = (char *)dx + 2 * sizeof x;
            if ((char *)dout == end) end += sizeof out;
            tx.data = end - sizeof x + 4096;
        }
        CHECK(tb_model_run_program(m, acc, &tx, 1, NULL, 0, stream, &e) == tb_err_invalid_argument &&
              strstr(e.message, "the allocation there holds"));
        CHECK_OK(tb_model_synchronize(m, stream, &e), &e);
        tb_model_stream_free(m, stream);
        tb_model_device_free(m, dx), tb_model_device_free(m, dout);
        tb_model_free(m);
        m = NULL;
    }
    tb_bundle_free(b);
}

int main(int argc, char **argv) {
    th_run_all(argc, argv);
    tb_kernel_table_free(table);
    tb_bundle_free(bundle);
    if (workdir) u_rmtree(workdir);
    free(workdir);
    return th_finish();
}
