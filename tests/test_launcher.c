/* The launcher without a GPU: the library opens tests/fake_cuda.c's
   build/libfakecuda.so instead of libcuda.so.1 (TB_LIBCUDA_NAME), which
   answers with fixed values and records what each launch was given. So the
   parameter layouts (bools, tensor descriptors with and without TMA), the
   CUtensorMap encoding's arguments, the launch by name and the launch
   attributes are checked on every CI run, and the GPU suite checks the same
   against a real driver. Run from the repository root after
   `make build/libfakecuda.so`: build/test_launcher [name-filter] */
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "fake_client.h"

#include <dlfcn.h>
#include <pthread.h>
#include "util.h"



/* A 1-byte bool: '?', or PyTorch's 'i' for an i1 parameter. */
TEST(test_bools) {
    static const size_t sizes[] = {1, 4, 8, 8};
    tb_launch_config c;
    tb_loaded_kernel *k = NULL;
    tb_error e;
    memset(&c, 0, sizeof c);
    tb_arg a[2];
    int pass;
    NEED_FAKE();
    for (pass = 0; pass < 2; pass++) {
        c = config(pass ? "ii" : "?i", "");
        c.global_scratch.present = c.profile_scratch.present = 1;
        CHECK_OK(load(&c, sizes, 4, &k, &e), &e);
        REQUIRE(k);
        a[0] = tb_arg_i(1), a[1] = tb_arg_i(-5);
        CHECK_OK(launch(k, a, 2, TB_LAUNCH_CHECKED, &e), &e);
        CHECK(param_u8(0) == 1 && param_i32(1) == -5);
        a[0] = tb_arg_i(2);
        CHECK(launch(k, a, 2, TB_LAUNCH_CHECKED, &e) == tb_err_arg_range);
        tb_unload(k);
        k = NULL;
    }
    /* a 4-byte parameter where the record says bool: refused, with both sizes */
    {
        static const size_t wrong[] = {4, 4, 8, 8};
        c = config("?i", "");
        c.global_scratch.present = c.profile_scratch.present = 1;
        CHECK(load(&c, wrong, 4, &k, &e) == tb_err_arg_mismatch && strstr(e.message, "4 bytes") && k == NULL);
    }
}

/* A tensor descriptor Triton lowered to TMA: the map is encoded from the
   tb_tensor_desc as Triton's launcher does, then shape (i32) and strides (i64). */
TEST(test_tensordesc_tma) {
    static const size_t sizes[] = {128, 4, 4, 8, 8, 8, 4};
    tb_launch_config c = config("TOi", "011");
    tb_tensordesc_meta m;
    tb_tensor_desc d;
    tb_loaded_kernel *k = NULL;
    tb_error e;
    tb_arg a[3];
    const fake_encode *en;
    NEED_FAKE();
    memset(&m, 0, sizeof m);
    m.tma = 1, m.rank = 2, m.swizzle = 3, m.elem_size = 4, m.elem_type = 7, m.block[0] = 32, m.block[1] = 16;
    c.tensordesc_count = 1, c.tensordescs = &m;
    CHECK_OK(load(&c, sizes, 7, &k, &e), &e);
    REQUIRE(k);
    memset(&d, 0, sizeof d);
    d.base = (const void *)(uintptr_t)0x7000100, d.rank = 2;
    d.shape[0] = 128, d.shape[1] = 96, d.strides[0] = 100, d.strides[1] = 1, d.padding_nan = 1;
    a[0] = tb_arg_p(&d), a[1] = tb_arg_u(0x8000), a[2] = tb_arg_i(96);
    CHECK_OK(launch(k, a, 3, TB_LAUNCH_CHECKED, &e), &e);
    en = fake.encode();
    CHECK(en->dtype == 7 && en->rank == 2 && en->base == 0x7000100 && en->aligned);
    CHECK(en->dims[0] == 96 && en->dims[1] == 128);          /* innermost first */
    CHECK(en->strides[0] == 400);                            /* bytes: 100 elements of 4 */
    CHECK(en->box[0] == 16 && en->box[1] == 32 && en->estr[0] == 1 && en->estr[1] == 1);
    CHECK(en->swizzle == 3 && en->fill == 1 && en->l2 == 2 && en->interleave == 0);
    CHECK(*(const uint32_t *)fake.param(0) == 2);            /* the encoded map itself went in */
    CHECK(param_i32(1) == 128 && param_i32(2) == 96 && param_i64(3) == 100 && param_i64(4) == 1);
    CHECK(param_i64(5) == 0x8000 && param_i32(6) == 96);
    /* fp4_padded doubles the innermost size; elem_type 8 is the driver's 10 */
    tb_unload(k);
    m.fp4_padded = 1, m.elem_type = 8, m.elem_size = 1;
    CHECK_OK(load(&c, sizes, 7, &k, &e), &e);
    REQUIRE(k);
    d.padding_nan = 0;
    CHECK_OK(launch(k, a, 3, 0, &e), &e);
    en = fake.encode();
    CHECK(en->dtype == 10 && en->dims[0] == 192 && en->strides[0] == 100 && en->fill == 0);
    CHECK(param_i32(2) == 192);
    /* a descriptor that does not suit: rank, last stride, an unaligned base */
    d.rank = 3;
    CHECK(launch(k, a, 3, 0, &e) == tb_err_invalid_argument);
    d.rank = 2, d.strides[1] = 2;
    CHECK(launch(k, a, 3, 0, &e) == tb_err_invalid_argument);
    d.strides[1] = 1, d.base = (const void *)(uintptr_t)0x7000104;
    CHECK(launch(k, a, 3, 0, &e) == tb_err_cuda && strstr(e.message, "cuTensorMapEncodeTiled"));
    a[0] = tb_arg_p(NULL);
    CHECK(launch(k, a, 3, 0, &e) == tb_err_invalid_argument);
    tb_unload(k);
    /* rank 1 */
    {
        static const size_t one[] = {128, 4, 8, 8, 4};
        m.fp4_padded = 0, m.elem_type = 5, m.elem_size = 2, m.rank = 1, m.block[0] = 64, m.block[1] = 0;
        CHECK_OK(load(&c, one, 5, &k, &e), &e);
        REQUIRE(k);
        d.base = (const void *)(uintptr_t)0x7000100, d.rank = 1, d.shape[0] = 1000, d.strides[0] = 1;
        a[0] = tb_arg_p(&d);
        CHECK_OK(launch(k, a, 3, 0, &e), &e);
        en = fake.encode();
        CHECK(en->rank == 1 && en->dims[0] == 1000 && en->box[0] == 64 && param_i32(1) == 1000 && param_i64(2) == 1);
        tb_unload(k);
    }
}

/* A descriptor Triton did not lower to TMA: base, shape and strides as i64,
   the padding byte, shape as i32, strides as i64. */
TEST(test_tensordesc_plain) {
    static const size_t sizes[] = {8, 8, 8, 8, 8, 1, 4, 4, 8, 8, 4};
    tb_launch_config c = config("Ti", "");
    tb_tensordesc_meta m;
    tb_tensor_desc d;
    tb_loaded_kernel *k = NULL;
    tb_error e;
    tb_arg a[2];
    int before;
    NEED_FAKE();
    memset(&m, 0, sizeof m);
    m.rank = 2;
    c.tensordesc_count = 1, c.tensordescs = &m;
    CHECK_OK(load(&c, sizes, 11, &k, &e), &e);
    REQUIRE(k);
    memset(&d, 0, sizeof d);
    d.base = (const void *)(uintptr_t)0x5000, d.rank = 2;
    d.shape[0] = 7, d.shape[1] = 9, d.strides[0] = 9, d.strides[1] = 1, d.padding_nan = 1;
    a[0] = tb_arg_p(&d), a[1] = tb_arg_i(-3);
    before = fake.launches();
    CHECK_OK(launch(k, a, 2, 0, &e), &e);
    CHECK(fake.launches() == before + 1);
    CHECK(param_i64(0) == 0x5000 && param_i64(1) == 7 && param_i64(2) == 9 && param_i64(3) == 9 && param_i64(4) == 1);
    CHECK(param_u8(5) == 1 && param_i32(6) == 7 && param_i32(7) == 9 && param_i64(8) == 9 && param_i64(9) == 1);
    CHECK(param_i32(10) == -3);
    tb_unload(k);
    /* the same cubin seen as TMA: the parameter check names the mismatch */
    m.tma = 1, m.elem_size = 4, m.block[0] = m.block[1] = 8;
    CHECK(load(&c, sizes, 11, &k, &e) == tb_err_arg_mismatch && k == NULL);
}

/* Launch attributes, grid arithmetic, and sizes that wrapped in 1.1. */
TEST(test_attributes_and_sizes) {
    static const size_t none[] = {8, 8};
    tb_launch_config c = config("", "");
    tb_loaded_kernel *k = NULL;
    tb_error e;
    tb_launch_params p;
    unsigned g[3], block, shared, attrs;
    NEED_FAKE();
    c.global_scratch.present = c.profile_scratch.present = 1;
    c.num_ctas = 2, c.flags = TB_CONFIG_COOPERATIVE | TB_CONFIG_PDL, c.shared_mem = 100000;
    CHECK_OK(load(&c, none, 2, &k, &e), &e);
    REQUIRE(k);
    memset(&p, 0, sizeof p);
    p.grid[0] = 5, p.grid[1] = 2, p.grid[2] = 1;
    CHECK_OK(tb_launch(k, &p, &e), &e);
    fake.grid(g, &block, &shared, &attrs);
    CHECK(g[0] == 10 && g[1] == 2 && g[2] == 1 && block == 128 && shared == 100000 && attrs == 4);
    p.grid[0] = 0x80000000u;
    CHECK(tb_launch(k, &p, &e) == tb_err_invalid_argument && strstr(e.message, "exceeds"));
    tb_unload(k);
    c.shared_mem = 0xffffff00u;
    CHECK(load(&c, none, 2, &k, &e) == tb_err_shared_memory && k == NULL);
    c.shared_mem = 0, c.cluster_dims[0] = 65536, c.cluster_dims[1] = 65536, c.cluster_dims[2] = 1;
    CHECK(load(&c, none, 2, &k, &e) == tb_err_malformed && k == NULL);
}

/* TB_CONFIG_AUTOTUNE against the stand-in driver, whose launches take the
   time their cubin names: the fastest config is chosen once per size key,
   trials run on a copy of the written argument, a second launch does not
   benchmark, two threads tune once, and a saved choice launches at once in
   a new table. */
static int tune_logs;
static volatile double zero_for_nan = 0; /* 0.0 / it: a NaN the compiler does not fold */
static void tune_logger(void *user, tb_log_level level, const char *msg) {
    (void)user;
    if (level == TB_LOG_INFO && strncmp(msg, "autotune ", 9) == 0) __atomic_add_fetch(&tune_logs, 1, __ATOMIC_RELAXED);
}
typedef struct { tb_kernel_table *t; tb_launch_params p; tb_result r; } tune_job;
static void *tune_thread(void *arg) {
    tune_job *j = (tune_job *)arg;
    tb_error e;
    j->r = tb_kernel_table_launch(j->t, "k", TB_CONFIG_AUTOTUNE, &j->p, &e);
    return NULL;
}
TEST(test_autotune_fake) {
    static const size_t sizes[] = {8, 4};
    static const char *const names[] = {"io", "n"};
    static const uint32_t mutated[] = {0}, key[] = {1};
    static const tb_grid_op one[] = {{TB_GRID_CONST, 0, 1}};
    char h[3][4] = {"H0", "H1", "H2"}, cub[3][8] = {"fakeT3", "fakeT1", "fakeT2"};
    tb_grid_rule g;
    tb_call_info ci;
    tb_bundle *b = NULL;
    tb_kernel_table *t = NULL, *t2 = NULL;
    tb_error e;
    tb_launch_config c[3];
    tb_launch_record r;
    tb_launch_params p;
    tb_arg a[2];
    tb_autotune_options ao;
    tb_options opts;
    size_t bytes[2] = {64, 0};
    unsigned char data[64];
    uint32_t kk, i, cfg = 9;
    int before;
    double ms = -1;
    char *dir = u_tempdir("tune"), path[600];
    NEED_FAKE();
    fake.set_params(sizes, 2);
    memset(&opts, 0, sizeof opts);
    opts.log = tune_logger;
    memset(&r, 0, sizeof r);
    memset(&ci, 0, sizeof ci);
    g.op_count[0] = g.op_count[1] = g.op_count[2] = 1, g.ops[0] = g.ops[1] = g.ops[2] = one;
    ci.arg_count = 2, ci.arg_names = names, ci.mutated_count = 1, ci.mutated = mutated, ci.key_count = 1, ci.key = key;
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    for (i = 0; i < 3; i++) {
        CHECK_OK(tb_bundle_add_kernel(b, h[i], 0, &kk, &e), &e);
        CHECK_OK(tb_bundle_add_artifact(b, kk, "k.cubin", cub[i], 7, TB_COPY, &e), &e);
        c[i] = config("Oi", ""), c[i].kernel_hash = h[i], c[i].grid = &g;
    }
    r.kernel_name = "k", r.cache_key = "K", r.config_count = 3, r.configs = c, r.call = &ci;
    CHECK_OK(tb_bundle_add_launch_record(b, &r, &e), &e);
    CHECK_OK(tb_kernel_table_create(b, &opts, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    memset(&ao, 0, sizeof ao);
    ao.max_reps = 20, ao.flush_bytes = 4096, ao.warmup_ms = 5, ao.rep_ms = 10;
    CHECK_OK(tb_kernel_table_set_autotune(t, &ao, &e), &e);
    memset(&p, 0, sizeof p);
    memset(data, 7, sizeof data);
    a[0] = tb_arg_p(data), a[1] = tb_arg_i(1024);
    p.args = a, p.arg_count = 2, p.flags = TB_LAUNCH_GRID_AUTO;
    CHECK(tb_kernel_table_launch(t, "k", TB_CONFIG_AUTOTUNE, &p, &e) == tb_err_invalid_argument &&
          strstr(e.message, "arg_bytes") && strstr(e.message, "io"));
    p.arg_bytes = bytes;
    p.flags = 0, p.grid[0] = p.grid[1] = p.grid[2] = 1;
    CHECK(tb_kernel_table_launch(t, "k", TB_CONFIG_AUTOTUNE, &p, &e) == tb_err_invalid_argument &&
          strstr(e.message, "TB_LAUNCH_GRID_AUTO"));
    p.flags = TB_LAUNCH_GRID_AUTO;
    p.stream = (void *)0xCA97; /* being captured */
    CHECK(tb_kernel_table_launch(t, "k", TB_CONFIG_AUTOTUNE, &p, &e) == tb_err_invalid_argument &&
          strstr(e.message, "captured"));
    p.stream = NULL;
    {
        const tb_loaded_kernel *sel = NULL;
        CHECK(tb_kernel_table_select(t, "k", TB_CONFIG_AUTOTUNE, a, 2, &sel, &e) == tb_err_not_found && !sel);
    }
    before = fake.launches();
    CHECK_OK(tb_kernel_table_launch(t, "k", TB_CONFIG_AUTOTUNE, &p, &e), &e);
    {
        const tb_loaded_kernel *sel = NULL, *one = NULL;
        CHECK_OK(tb_kernel_table_select(t, "k", TB_CONFIG_AUTOTUNE, a, 2, &sel, &e), &e);
        CHECK_OK(tb_kernel_table_get(t, "K", 1, &one, &e), &e);
        CHECK(sel && sel == one); /* the tuned choice, without benchmarking */
    }
    CHECK(fake.launches() - before > 3 * 10); /* every config benchmarked */
    CHECK(*(void *const *)fake.param(0) == (void *)data); /* the real launch: the caller's buffer */
    CHECK_OK(tb_kernel_table_choice(t, "k", a, 2, &cfg, &ms, &e), &e);
    CHECK(cfg == 1 && ms == 1.0); /* "fakeT1": the fastest */
    CHECK(tune_logs == 1);
    before = fake.launches();
    CHECK_OK(tb_kernel_table_launch(t, "k", TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.launches() == before + 1 && tune_logs == 1); /* tuned: one launch */
    /* more repetitions than the first tune's events hold, and other sizes:
       three threads, two on one size (tuned once) and one on another */
    ao.max_reps = 40;
    CHECK_OK(tb_kernel_table_set_autotune(t, &ao, &e), &e);
    {
        tune_job jobs[3];
        pthread_t th[3];
        tb_arg a2[2], a3[2];
        a2[0] = a3[0] = a[0], a2[1] = tb_arg_i(4096), a3[1] = tb_arg_i(8192);
        for (i = 0; i < 3; i++) {
            jobs[i].t = t, jobs[i].p = p, jobs[i].p.args = i == 2 ? a3 : a2, jobs[i].r = tb_err_io;
            pthread_create(&th[i], NULL, tune_thread, &jobs[i]);
        }
        for (i = 0; i < 3; i++) pthread_join(th[i], NULL);
        CHECK(jobs[0].r == tb_ok && jobs[1].r == tb_ok && jobs[2].r == tb_ok && tune_logs == 3);
    }
    /* saved, and read by a new table: no benchmark */
    snprintf(path, sizeof path, "%s/choices", dir);
    CHECK_OK(tb_kernel_table_save_choices(t, path, &e), &e);
    CHECK_OK(tb_kernel_table_create(b, &opts, NULL, TB_TABLE_LAZY, &t2, &e), &e);
    REQUIRE(t2);
    CHECK_OK(tb_kernel_table_load_choices(t2, path, &e), &e);
    before = fake.launches();
    CHECK_OK(tb_kernel_table_launch(t2, "k", TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.launches() == before + 1 && tune_logs == 3);
    CHECK_OK(tb_kernel_table_choice(t2, "k", a, 2, &cfg, &ms, &e), &e);
    CHECK(cfg == 1);
    /* hardening 2.0 (7): a repetition count past what the event array can
       hold (2 events a repetition: 2^31 made 0 events) is clamped, as are
       times that are NaN or huge; tuning a new size key still works */
    ao.max_reps = 0x80000000u, ao.warmup_ms = 0.0 / zero_for_nan, ao.rep_ms = 1e300, ao.flush_bytes = 4096;
    CHECK_OK(tb_kernel_table_set_autotune(t2, &ao, &e), &e);
    a[1] = tb_arg_i(4096);
    CHECK_OK(tb_kernel_table_launch(t2, "k", TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK_OK(tb_kernel_table_choice(t2, "k", a, 2, &cfg, &ms, &e), &e);
    CHECK(cfg == 1);
    tb_kernel_table_free(t2);
    tb_kernel_table_free(t);
    tb_bundle_free(b);
    u_rmtree(dir);
    free(dir);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
