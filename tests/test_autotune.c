/* Autotuning: the choices file (docs/FORMAT.md, "Autotune choices") read,
   written and refused without a GPU, from files and from memory; and
   TB_CONFIG_AUTOTUNE against the stand-in driver (tests/fake_cuda.c), whose
   launches take the time their cubin names: every config benchmarked once
   per size key, threads tuning once (make tsan runs this program under
   ThreadSanitizer), choices saved and read by a new table. Compiled as C99
   and as C++11; run from the repository root after
   `make build/libfakecuda.so`: build/test_autotune [name-filter] */
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "fake_client.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>

/* FORMAT.md [R-choices]. The autotune choices file, without a GPU: read, kept per size key,
   written back the same, keys escaped, and hostile files refused whole
   (docs/FORMAT.md, "Autotune choices"). */
static tb_kernel_table *choices_table(tb_bundle **b) {
    static const char *const names[] = {"x", "n"};
    static const uint32_t key[] = {1};
    static tb_call_info ci;
    tb_launch_config c[2];
    tb_launch_record r;
    tb_kernel_table *t = NULL;
    tb_error e;
    memset(&ci, 0, sizeof ci);
    ci.arg_count = 2, ci.arg_names = names, ci.key_count = 1, ci.key = key;
    memset(c, 0, sizeof c);
    memset(&r, 0, sizeof r);
    c[0].kernel_hash = "H0", c[0].function_name = "k", c[0].binary_name = "k.cubin", c[0].arg_types = "Oi";
    c[0].num_warps = c[0].num_ctas = 1;
    c[1] = c[0], c[1].kernel_hash = "H1";
    r.cache_key = "K\tkey %", r.kernel_name = "k", r.config_count = 2, r.configs = c, r.call = &ci;
    if (tb_bundle_create(NULL, b, &e) || tb_bundle_add_launch_record(*b, &r, &e)) return NULL;
    if (tb_kernel_table_create(*b, NULL, NULL, TB_TABLE_LAZY, &t, &e)) return NULL;
    return t;
}
static tb_result load_text(tb_kernel_table *t, const char *dir, const char *text, tb_error *e) {
    char path[600];
    snprintf(path, sizeof path, "%s/c.txt", dir);
    u_write(path, text, strlen(text));
    return tb_kernel_table_load_choices(t, path, e);
}
TEST(test_autotune_choices_file) {
    tb_bundle *b = NULL, *b2 = NULL;
    tb_kernel_table *t = choices_table(&b);
    tb_error e;
    tb_arg a[2];
    uint32_t cfg = 9;
    double ms = 0;
    char *dir = u_tempdir("choices"), path[600];
    const char *good = "triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t0.250000\n";
    size_t n;
    unsigned char *back;
    static const struct { const char *text; tb_result want; } bad[] = {
        {"triton_bundle autotune 2\n", tb_err_bad_magic},
        {"", tb_err_bad_magic},
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t0.25", tb_err_parse},        /* no newline */
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\n", tb_err_parse},            /* four fields */
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t0.25\tx\n", tb_err_parse},   /* six */
        {"triton_bundle autotune 1\nK%G9key\tH1\t1\t1024\t0.25\n", tb_err_parse},             /* a bad escape */
        {"triton_bundle autotune 1\nK%00key\tH1\t1\t1024\t0.25\n", tb_err_parse},             /* a NUL */
        {"triton_bundle autotune 1\nK key\tH1\t1\t1024\t0.25\n", tb_err_parse},               /* a raw space */
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t99999\t1024\t0.25\n", tb_err_parse},  /* config out of range */
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1,,2\t0.25\n", tb_err_parse},      /* an empty key value */
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t99999999999999999999\t0.25\n", tb_err_parse},
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\tnan\n", tb_err_parse},
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t-1\n", tb_err_parse},
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t-1\t1024\t0.25\n", tb_err_parse},
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t+5\n", tb_err_parse},   /* only digits and a point */
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t1e3\n", tb_err_parse},
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t0x1p-2\n", tb_err_parse},
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t 5\n", tb_err_parse},
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t5.\n", tb_err_parse},
        /* token syntax (hardening 2.0): only the writer's spelling */
        {"triton_bundle autotune 1\nK%1Zkey\tH1\t1\t1024\t0.25\n", tb_err_parse},        /* decoded to 's' once */
        {"triton_bundle autotune 1\nK%09key%20%2a\tH1\t1\t1024\t0.25\n", tb_err_parse},  /* lowercase hex */
        {"triton_bundle autotune 1\nK%09key%20%25\tH%31\t1\t1024\t0.25\n", tb_err_parse}, /* '1' needs no escape */
        {"triton_bundle autotune 1\nK%09key%20%2\tH1\t1\t1024\t0.25\n", tb_err_parse},   /* one digit */
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t01\t1024\t0.25\n", tb_err_parse},  /* leading zero */
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t01024\t0.25\n", tb_err_parse},
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t-0\t0.25\n", tb_err_parse},
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t+5\t0.25\n", tb_err_parse},
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t00.25\n", tb_err_parse},
        {"triton_bundle autotune 1\n\tH1\t1\t1024\t0.25\n", tb_err_parse},                 /* empty key */
        {"triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t0.25\r\n", tb_err_parse}, /* CR LF */
    };
    size_t i;
    REQUIRE(t);
    a[0] = tb_arg_p(NULL), a[1] = tb_arg_i(1024);
    CHECK(tb_kernel_table_choice(t, "k", a, 2, &cfg, &ms, &e) == tb_err_not_found);
    CHECK_OK(load_text(t, dir, good, &e), &e);
    CHECK_OK(tb_kernel_table_choice(t, "k", a, 2, &cfg, &ms, &e), &e);
    CHECK(cfg == 1 && ms == 0.25);
    a[1] = tb_arg_i(2048);
    CHECK(tb_kernel_table_choice(t, "k", a, 2, &cfg, &ms, &e) == tb_err_not_found); /* another size key */
    a[1] = tb_arg_i(1024);
    snprintf(path, sizeof path, "%s/saved.txt", dir);
    CHECK_OK(tb_kernel_table_save_choices(t, path, &e), &e);
    back = u_read(path, &n);
    CHECK(back && n == strlen(good) && memcmp(back, good, n) == 0);
    free(back);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tb_result r = load_text(t, dir, bad[i].text, &e);
        CHECK(r == bad[i].want);
        if (r != bad[i].want) printf("    case %zu: %s\n", i, e.message);
    }
    /* the error names the line and the column, and carries no stale errno */
    errno = ENOENT;
    CHECK(load_text(t, dir, "triton_bundle autotune 1\nK%1Zkey\tH1\t1\t1024\t0.25\n", &e) == tb_err_parse);
    CHECK(strstr(e.message, "line 2, column 2") && strstr(e.message, "uppercase hex") && e.sys_errno == 0 &&
          !strstr(e.message, strerror(ENOENT)));
    CHECK(load_text(t, dir, "triton_bundle autotune 1\nK%09key%20%25\tH1\t5000\t1024\t0.25\n", &e) == tb_err_parse);
    CHECK(strstr(e.message, "line 2, column 18") && strstr(e.message, "config index is over"));
    CHECK(load_text(t, dir, "triton_bundle autotune 1\nK%09key%20%25\tH1\t1\t1024\t0.25\nK\tH1\t1\t7\t1.5", &e) ==
          tb_err_parse);
    CHECK(strstr(e.message, "line 3, column 1") && strstr(e.message, "newline"));
    /* a refused file changed nothing */
    CHECK(tb_kernel_table_choice(t, "k", a, 2, &cfg, &ms, &e) == tb_ok && cfg == 1 && ms == 0.25);
    /* stale entries (a record or a cubin this bundle lacks) are skipped, the rest read */
    CHECK_OK(load_text(t, dir, "triton_bundle autotune 1\nOTHER\tH1\t1\t7\t1\nK%09key%20%25\tH0\t1\t7\t1\n"
                              "K%09key%20%25\tH0\t0\t8\t2\n", &e), &e);
    a[1] = tb_arg_i(7);
    CHECK(tb_kernel_table_choice(t, "k", a, 2, &cfg, &ms, &e) == tb_err_not_found);
    a[1] = tb_arg_i(8);
    CHECK(tb_kernel_table_choice(t, "k", a, 2, &cfg, &ms, &e) == tb_ok && cfg == 0 && ms == 2);
    /* lines without key values ("-"): found by fuzz_choices (NULL + 0 under UBSan) */
    CHECK_OK(load_text(t, dir, "triton_bundle autotune 1\nK%09key%20%25\tH0\t0\t-\t1.5\n", &e), &e);
    snprintf(path, sizeof path, "%s/none", dir);
    CHECK(tb_kernel_table_load_choices(t, path, &e) == tb_err_not_found);
    CHECK(tb_kernel_table_load_choices(t, dir, &e) == tb_err_io && strstr(e.message, "not a regular file"));
    /* the memory doors: the same text, no file */
    {
        size_t need = 0, got = 0;
        char small[8], *text;
        tb_kernel_table *t2;
        CHECK_OK(tb_kernel_table_load_choices_memory(t, good, strlen(good), &e), &e);
        CHECK_OK(tb_kernel_table_save_choices_memory(t, NULL, 0, &need, &e), &e);
        CHECK(need > strlen("triton_bundle autotune 1\n"));
        CHECK(tb_kernel_table_save_choices_memory(t, small, sizeof small, &got, &e) == tb_err_invalid_argument &&
              got == need);
        REQUIRE((text = (char *)malloc(need)) != NULL);
        CHECK_OK(tb_kernel_table_save_choices_memory(t, text, need, &got, &e), &e);
        CHECK(got == need);
        REQUIRE((t2 = choices_table(&b2)) != NULL);
        CHECK_OK(tb_kernel_table_load_choices_memory(t2, text, got, &e), &e);
        a[1] = tb_arg_i(1024);
        CHECK(tb_kernel_table_choice(t2, "k", a, 2, &cfg, &ms, &e) == tb_ok && cfg == 1 && ms == 0.25);
        CHECK(tb_kernel_table_load_choices_memory(t2, "triton_bundle autotune 1\nK%1Z\tH1\t1\t-\t1\n", 36, &e) ==
              tb_err_parse);
        CHECK(tb_kernel_table_load_choices_memory(t2, NULL, 5, &e) == tb_err_invalid_argument);
        free(text);
        tb_kernel_table_free(t2);
        tb_bundle_free(b2);
    }
    tb_kernel_table_free(t);
    tb_bundle_free(b);
    u_rmtree(dir);
    free(dir);
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

/* Autotune options short enough for the stand-in driver's benchmarks. */
static tb_autotune_options quick_tune(void) {
    tb_autotune_options ao;
    memset(&ao, 0, sizeof ao);
    ao.max_reps = 5, ao.flush_bytes = 4096, ao.warmup_ms = 1, ao.rep_ms = 2;
    return ao;
}

/* Size keys longer than the launch memo holds (7 values;
   a record without call info keys on all its integer arguments): each
   value tells keys apart, the choice is found again without a benchmark,
   and it survives a save and a load. */
TEST(test_autotune_long_keys) {
    static const size_t sizes[] = {8, 4, 4, 4, 4, 4, 4, 4};
    static const char *const names[] = {"x", "a", "b", "c", "d", "e", "f", "g"};
    static const uint32_t key[] = {1, 2, 3, 4, 5, 6, 7};
    static const tb_grid_op one[] = {{TB_GRID_CONST, 0, 1}};
    char h[2][4] = {"H0", "H1"}, cub[2][8] = {"fakeT3", "fakeT1"}, path[600], *dir = u_tempdir("longkey");
    const char *rname[2] = {"keyed", "plain"};
    tb_grid_rule g;
    tb_call_info ci;
    tb_bundle *b = NULL;
    tb_kernel_table *t = NULL, *t2 = NULL;
    tb_error e;
    tb_launch_config c[2];
    tb_launch_record r;
    tb_launch_params p;
    tb_arg a[8];
    tb_autotune_options ao;
    tb_options opts;
    uint32_t kk, i, v, cfg;
    int before, logs;
    NEED_FAKE();
    fake.set_params(sizes, 8);
    memset(&opts, 0, sizeof opts);
    opts.log = tune_logger;
    memset(&ci, 0, sizeof ci);
    g.op_count[0] = g.op_count[1] = g.op_count[2] = 1, g.ops[0] = g.ops[1] = g.ops[2] = one;
    ci.arg_count = 8, ci.arg_names = names, ci.key_count = 7, ci.key = key;
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    for (i = 0; i < 2; i++) {
        CHECK_OK(tb_bundle_add_kernel(b, h[i], 0, &kk, &e), &e);
        CHECK_OK(tb_bundle_add_artifact(b, kk, "k.cubin", cub[i], 7, TB_COPY, &e), &e);
        c[i] = config("Oiiiiiii", ""), c[i].kernel_hash = h[i], c[i].grid = &g;
    }
    for (i = 0; i < 2; i++) {
        memset(&r, 0, sizeof r);
        r.kernel_name = rname[i], r.cache_key = rname[i], r.config_count = 2, r.configs = c, r.call = i ? NULL : &ci;
        CHECK_OK(tb_bundle_add_launch_record(b, &r, &e), &e);
    }
    CHECK_OK(tb_kernel_table_create(b, &opts, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    ao = quick_tune();
    CHECK_OK(tb_kernel_table_set_autotune(t, &ao, &e), &e);
    memset(&p, 0, sizeof p);
    p.args = a, p.arg_count = 8, p.flags = TB_LAUNCH_GRID_AUTO;
    for (i = 0; i < 2; i++) {
        a[0] = tb_arg_p(NULL);
        for (v = 1; v < 8; v++) a[v] = tb_arg_i((int64_t)(100 * v));
        logs = tune_logs;
        CHECK_OK(tb_kernel_table_launch(t, rname[i], TB_CONFIG_AUTOTUNE, &p, &e), &e);
        CHECK(tune_logs == logs + 1);
        before = fake.launches();
        CHECK_OK(tb_kernel_table_launch(t, rname[i], TB_CONFIG_AUTOTUNE, &p, &e), &e);
        CHECK(fake.launches() == before + 1 && tune_logs == logs + 1); /* found again */
        for (v = 1; v < 8; v++) { /* each value, the last ones past the inline copies too, is a new key */
            a[v] = tb_arg_i((int64_t)(100 * v + 1));
            CHECK_OK(tb_kernel_table_launch(t, rname[i], TB_CONFIG_AUTOTUNE, &p, &e), &e);
            CHECK(tune_logs == logs + 1 + (int)v);
            a[v] = tb_arg_i((int64_t)(100 * v));
        }
        before = fake.launches();
        CHECK_OK(tb_kernel_table_launch(t, rname[i], TB_CONFIG_AUTOTUNE, &p, &e), &e);
        CHECK(fake.launches() == before + 1);
        CHECK_OK(tb_kernel_table_choice(t, rname[i], a, 8, &cfg, NULL, &e), &e);
        CHECK(cfg == 1); /* "fakeT1" */
    }
    snprintf(path, sizeof path, "%s/choices", dir);
    CHECK_OK(tb_kernel_table_save_choices(t, path, &e), &e);
    CHECK_OK(tb_kernel_table_create(b, &opts, NULL, TB_TABLE_LAZY, &t2, &e), &e);
    REQUIRE(t2);
    CHECK_OK(tb_kernel_table_load_choices(t2, path, &e), &e);
    logs = tune_logs;
    for (i = 0; i < 2; i++) {
        a[7] = tb_arg_i(701);
        CHECK_OK(tb_kernel_table_launch(t2, rname[i], TB_CONFIG_AUTOTUNE, &p, &e), &e);
        a[7] = tb_arg_i(700);
        CHECK_OK(tb_kernel_table_launch(t2, rname[i], TB_CONFIG_AUTOTUNE, &p, &e), &e);
    }
    CHECK(tune_logs == logs); /* every key came from the file */
    tb_kernel_table_free(t2);
    tb_kernel_table_free(t);
    tb_bundle_free(b);
    u_rmtree(dir);
    free(dir);
}

/* The per-thread launch memo (TB_CONFIG_AUTOTUNE by name or key, a
   resolution the table alone decides): what it launches is what the long
   way would, when the caller's buffer is rewritten with another name, a
   loaded choice replaces the tuned one, the arguments break the record's
   assumptions or change its size key, and the table is made anew. */
static uintptr_t function_of(tb_kernel_table *t, const char *key, uint32_t cfg, tb_launch_params p) {
    const tb_loaded_kernel *k = NULL;
    tb_error e;
    p.flags = 0, p.grid[0] = p.grid[1] = p.grid[2] = 1;
    if (tb_kernel_table_get(t, key, cfg, &k, &e) != tb_ok || tb_launch(k, &p, &e) != tb_ok) return 0;
    return fake.function();
}
static tb_bundle *memo_bundle(const char *alpha_cubin) {
    static const uint32_t key[] = {1};
    static const char *const names[] = {"x", "n"};
    static const tb_grid_op one[] = {{TB_GRID_CONST, 0, 1}};
    static tb_grid_rule g;
    static tb_call_info ci;
    const char *hash[3] = {"H0", "H1", "H2"}, *cub[3] = {"fakeT3", "fakeT1", "fakeT2"};
    tb_launch_config c[3];
    tb_launch_record r;
    tb_bundle *b = NULL;
    tb_error e;
    uint32_t kk, i;
    memset(&ci, 0, sizeof ci);
    ci.arg_count = 2, ci.arg_names = names, ci.key_count = 1, ci.key = key;
    g.op_count[0] = g.op_count[1] = g.op_count[2] = 1, g.ops[0] = g.ops[1] = g.ops[2] = one;
    if (tb_bundle_create(NULL, &b, &e)) return NULL;
    for (i = 0; i < 3; i++) {
        if (tb_bundle_add_kernel(b, hash[i], 0, &kk, &e) ||
            tb_bundle_add_artifact(b, kk, "k.cubin", i == 0 && alpha_cubin ? alpha_cubin : cub[i], 7, TB_COPY, &e))
            return NULL;
        c[i] = config("Oi", "10"), c[i].kernel_hash = hash[i], c[i].grid = &g;
    }
    memset(&r, 0, sizeof r);
    r.call = &ci;
    r.kernel_name = "alpha", r.cache_key = "alpha_key", r.config_count = 2, r.configs = c; /* H0, H1 */
    if (tb_bundle_add_launch_record(b, &r, &e)) return NULL;
    r.kernel_name = "beta", r.cache_key = "beta_key", r.config_count = 1, r.configs = &c[2]; /* H2 */
    if (tb_bundle_add_launch_record(b, &r, &e)) return NULL;
    return b;
}
TEST(test_launch_memo) {
    static const size_t sizes[] = {8, 4};
    char name[16], text[200];
    tb_bundle *b, *b2;
    tb_kernel_table *t = NULL;
    tb_error e;
    tb_launch_params p;
    tb_arg a[2];
    tb_autotune_options ao;
    tb_options opts;
    uintptr_t alpha0, alpha1, beta;
    int logs;
    NEED_FAKE();
    fake.set_params(sizes, 2);
    b = memo_bundle(NULL);
    REQUIRE(b);
    memset(&opts, 0, sizeof opts);
    opts.log = tune_logger;
    CHECK_OK(tb_kernel_table_create(b, &opts, NULL, 0, &t, &e), &e);
    REQUIRE(t);
    ao = quick_tune();
    CHECK_OK(tb_kernel_table_set_autotune(t, &ao, &e), &e);
    memset(&p, 0, sizeof p);
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_i(1024);
    p.args = a, p.arg_count = 2, p.flags = TB_LAUNCH_GRID_AUTO;
    alpha0 = function_of(t, "alpha_key", 0, p), alpha1 = function_of(t, "alpha_key", 1, p);
    beta = function_of(t, "beta_key", 0, p);
    REQUIRE(alpha0 && alpha1 && beta && alpha0 != alpha1 && alpha1 != beta);
    strcpy(name, "alpha");
    logs = tune_logs;
    CHECK_OK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == alpha1 && tune_logs == logs + 1); /* tuned: "fakeT1" */
    CHECK_OK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == alpha1 && tune_logs == logs + 1);
    /* the same buffer, another name */
    strcpy(name, "beta");
    CHECK_OK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == beta);
    CHECK_OK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == beta);
    strcpy(name, "alphb"); /* same length, one byte apart: no such name */
    CHECK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e) == tb_err_not_found);
    strcpy(name, "alpha");
    CHECK_OK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == alpha1);
    /* the cache key, memoized too */
    CHECK_OK(tb_kernel_table_launch(t, "alpha_key", TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK_OK(tb_kernel_table_launch(t, "alpha_key", TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == alpha1);
    /* a loaded choice replaces the tuned one: the next launch follows it */
    snprintf(text, sizeof text, "triton_bundle autotune 1\nalpha_key\tH0\t0\t1024\t0.5\n");
    CHECK_OK(tb_kernel_table_load_choices_memory(t, text, strlen(text), &e), &e);
    CHECK_OK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == alpha0);
    CHECK_OK(tb_kernel_table_launch(t, "alpha_key", TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == alpha0);
    /* the record's assumption broken: refused, memo or not */
    a[0] = tb_arg_u(0x1004);
    CHECK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e) == tb_err_misaligned);
    a[0] = tb_arg_u(0x1000);
    /* another size key: tuned anew, then each key keeps its own choice */
    a[1] = tb_arg_i(2048);
    logs = tune_logs;
    CHECK_OK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == alpha1 && tune_logs == logs + 1);
    a[1] = tb_arg_i(1024);
    CHECK_OK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == alpha0 && tune_logs == logs + 1);
    p.arg_count = 1; /* the wrong count: the long way's error */
    CHECK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e) == tb_err_arg_mismatch);
    p.arg_count = 2;
    {
        /* no arguments at all, twice (the first must not leave a memo the
           second trusts): refused both times */
        tb_launch_params q = p;
        q.args = NULL, q.arg_count = 0, q.flags = 0, q.grid[0] = q.grid[1] = q.grid[2] = 1;
        CHECK(tb_kernel_table_launch(t, "beta", TB_CONFIG_AUTOTUNE, &q, &e) == tb_err_arg_mismatch);
        CHECK(tb_kernel_table_launch(t, "beta", TB_CONFIG_AUTOTUNE, &q, &e) == tb_err_arg_mismatch);
        CHECK(tb_kernel_table_launch(t, "beta_key", TB_CONFIG_AUTOTUNE, &q, &e) == tb_err_arg_mismatch);
        CHECK(tb_kernel_table_launch(t, "beta_key", TB_CONFIG_AUTOTUNE, &q, &e) == tb_err_arg_mismatch);
    }
    tb_kernel_table_free(t);
    /* a table made anew (maybe at the same address) over another bundle:
       "alpha" is now another cubin */
    b2 = memo_bundle("fakeT4");
    REQUIRE(b2);
    t = NULL;
    CHECK_OK(tb_kernel_table_create(b2, &opts, NULL, 0, &t, &e), &e);
    REQUIRE(t);
    CHECK_OK(tb_kernel_table_set_autotune(t, &ao, &e), &e);
    alpha1 = function_of(t, "alpha_key", 1, p);
    logs = tune_logs;
    CHECK_OK(tb_kernel_table_launch(t, name, TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == alpha1 && tune_logs == logs + 1); /* tuned in this table, its own kernel */
    tb_kernel_table_free(t);
    tb_bundle_free(b2);
    tb_bundle_free(b);
}

/* A table made at the address of a freed one (an allocator that hands the
   last freed block of a size back first): its launches by the same string
   are its own, not the memo of the freed table's. */
static struct { void *block[256]; size_t size[256]; int n; } recycle;
static void *recycle_alloc(void *user, size_t size) {
    int i;
    (void)user;
    for (i = recycle.n - 1; i >= 0; i--)
        if (recycle.size[i] == size) {
            void *p = recycle.block[i];
            recycle.block[i] = recycle.block[recycle.n - 1], recycle.size[i] = recycle.size[recycle.n - 1];
            recycle.n--;
            return p;
        }
    {
        size_t *p = (size_t *)malloc(size + 16);
        if (!p) return NULL;
        *p = size;
        return (char *)p + 16;
    }
}
static void recycle_free(void *user, void *ptr) {
    (void)user;
    if (!ptr) return;
    if (recycle.n < 256) {
        recycle.block[recycle.n] = ptr, recycle.size[recycle.n] = *(size_t *)((char *)ptr - 16), recycle.n++;
        return;
    }
    free((char *)ptr - 16);
}
static void *recycle_realloc(void *user, void *ptr, size_t size) {
    void *q = recycle_alloc(user, size);
    if (q && ptr) {
        size_t old = *(size_t *)((char *)ptr - 16);
        memcpy(q, ptr, old < size ? old : size);
        recycle_free(user, ptr);
    }
    return q;
}
TEST(test_launch_memo_new_table) {
    static const size_t sizes[] = {8, 4};
    tb_bundle *b = memo_bundle(NULL), *b2 = memo_bundle("fakeT4");
    tb_kernel_table *t = NULL, *first;
    tb_error e;
    tb_launch_params p;
    tb_arg a[2];
    tb_autotune_options ao;
    tb_options opts;
    uintptr_t alpha1;
    int logs, i;
    NEED_FAKE();
    REQUIRE(b && b2);
    fake.set_params(sizes, 2);
    memset(&opts, 0, sizeof opts);
    opts.log = tune_logger;
    opts.allocator.alloc = recycle_alloc, opts.allocator.realloc = recycle_realloc, opts.allocator.free = recycle_free;
    ao = quick_tune();
    memset(&p, 0, sizeof p);
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_i(1024);
    p.args = a, p.arg_count = 2, p.flags = TB_LAUNCH_GRID_AUTO;
    CHECK_OK(tb_kernel_table_create(b, &opts, NULL, 0, &t, &e), &e);
    REQUIRE(t);
    first = t;
    CHECK_OK(tb_kernel_table_set_autotune(t, &ao, &e), &e);
    CHECK_OK(tb_kernel_table_launch(t, "alpha", TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK_OK(tb_kernel_table_launch(t, "alpha", TB_CONFIG_AUTOTUNE, &p, &e), &e); /* memoized */
    tb_kernel_table_free(t);
    t = NULL;
    CHECK_OK(tb_kernel_table_create(b2, &opts, NULL, 0, &t, &e), &e);
    REQUIRE(t);
    CHECK(t == first); /* the freed table's address: the case to test */
    CHECK_OK(tb_kernel_table_set_autotune(t, &ao, &e), &e);
    alpha1 = function_of(t, "alpha_key", 1, p);
    logs = tune_logs;
    CHECK_OK(tb_kernel_table_launch(t, "alpha", TB_CONFIG_AUTOTUNE, &p, &e), &e);
    CHECK(fake.function() == alpha1 && tune_logs == logs + 1); /* tuned here: not the old table's memo */
    tb_kernel_table_free(t);
    for (i = 0; i < recycle.n; i++) free((char *)recycle.block[i] - 16);
    recycle.n = 0;
    tb_bundle_free(b2);
    tb_bundle_free(b);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
