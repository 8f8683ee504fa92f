/* The kernel table: the choice among a kernel's specializations from the
   arguments (tb_kernel_table_find, no GPU needed), its index over
   thousands of keys and names, and the launch by name, which runs the
   cubin the arguments choose, through the stand-in driver
   (tests/fake_cuda.c). The table's grids are tested in tests/test_grid.c,
   its autotuning in tests/test_autotune.c. Compiled as C99 and as C++11;
   run from the repository root after `make build/libfakecuda.so`:
   build/test_table [name-filter] */
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "fake_client.h"

/* A record by hand: name, key, arg types and divisibility. */
static tb_result add_spec(tb_bundle *b, const char *key, const char *name, const char *types, const char *div,
                          uint32_t configs) {
    tb_launch_config cfg[2];
    tb_launch_record rec;
    tb_error e;
    memset(&cfg, 0, sizeof cfg);
    memset(&rec, 0, sizeof rec);
    memset(cfg, 0, sizeof cfg);
    cfg[0].kernel_hash = key;
    cfg[0].function_name = name;
    cfg[0].binary_name = "k.cubin";
    cfg[0].arg_types = types;
    cfg[0].arg_divisibility = div;
    cfg[0].num_warps = cfg[0].num_ctas = 1;
    cfg[1] = cfg[0];
    cfg[1].num_warps = 8;
    rec.cache_key = key;
    rec.kernel_name = name;
    rec.config_count = configs;
    rec.configs = cfg;
    return tb_bundle_add_launch_record(b, &rec, &e);
}

/* Launch by name chooses among a kernel's specializations from the
   arguments: the most specialized whose assumptions hold. No GPU: find
   names the record that select would load. */
TEST(test_table_specialization_choice) {
    tb_bundle *b = NULL;
    tb_kernel_table *t = NULL;
    tb_error e;
    uint32_t rec = 99, i;
    tb_arg a[3];
    const char *names[] = {"k_mid", "k_general", "k_all", "k_other", "k_three"};
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(add_spec(b, "k_mid", "k", "OOi", "100", 1), &e);
    CHECK_OK(add_spec(b, "k_general", "k", "OOi", "000", 2), &e);
    CHECK_OK(add_spec(b, "k_all", "k", "OOi", "111", 1), &e);
    CHECK_OK(add_spec(b, "k_other", "other", "O", "1", 1), &e);
    CHECK_OK(add_spec(b, "k_three", "only_aligned", "OOi", "110", 1), &e);
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_u(0x2000), a[2] = tb_arg_i(64);
    CHECK_OK(tb_kernel_table_find(t, "k", 0, a, 3, &rec, &e), &e);
    CHECK(rec == 2); /* all three assumptions hold */
    a[2] = tb_arg_i(100);
    CHECK_OK(tb_kernel_table_find(t, "k", 0, a, 3, &rec, &e), &e);
    CHECK(rec == 0); /* n not divisible by 16 */
    a[1] = tb_arg_u(0x2004);
    CHECK_OK(tb_kernel_table_find(t, "k", 0, a, 3, &rec, &e), &e);
    CHECK(rec == 0);
    a[0] = tb_arg_u(0x1004);
    CHECK_OK(tb_kernel_table_find(t, "k", 0, a, 3, &rec, &e), &e);
    CHECK(rec == 1); /* a misaligned first pointer: the general one */
    CHECK_OK(tb_kernel_table_find(t, "k", 1, a, 3, &rec, &e), &e);
    CHECK(rec == 1); /* config 1 exists only there */
    a[0] = tb_arg_u(0x1000), a[2] = tb_arg_i(64);
    CHECK_OK(tb_kernel_table_find(t, "k", 1, a, 3, &rec, &e), &e);
    CHECK(rec == 1);
    /* no arguments (tb_kernel_table_get): the fewest assumptions */
    CHECK_OK(tb_kernel_table_find(t, "k", 0, NULL, 0, &rec, &e), &e);
    CHECK(rec == 1);
    /* a cache key is one record, whatever the arguments */
    for (i = 0; i < 5; i++) {
        CHECK_OK(tb_kernel_table_find(t, names[i], 0, NULL, 0, &rec, &e), &e);
        CHECK(rec == i);
    }
    /* none fits: the error names the argument */
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_u(0x2008);
    CHECK(tb_kernel_table_find(t, "only_aligned", 0, a, 3, &rec, &e) == tb_err_misaligned);
    CHECK(strstr(e.message, "argument 1") != NULL && strstr(e.message, "0x2008") != NULL);
    CHECK(tb_kernel_table_find(t, "k", 0, a, 2, &rec, &e) == tb_err_arg_mismatch);
    CHECK(tb_kernel_table_find(t, "k_mid", 0, a, 2, &rec, &e) == tb_err_arg_mismatch);
    CHECK(tb_kernel_table_find(t, "k", 2, a, 3, &rec, &e) == tb_err_arg_mismatch);
    CHECK(tb_kernel_table_find(t, "k", 2, NULL, 0, &rec, &e) == tb_err_invalid_argument);
    CHECK(tb_kernel_table_find(t, "nope", 0, a, 3, &rec, &e) == tb_err_not_found);
    CHECK(tb_kernel_table_find(t, "k_mid", 5, NULL, 0, &rec, &e) == tb_err_invalid_argument);
    /* by key, the arguments must still fit the one record */
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_u(0x2000), a[2] = tb_arg_i(100);
    CHECK(tb_kernel_table_find(t, "k_all", 0, a, 3, &rec, &e) == tb_err_misaligned && strstr(e.message, "argument 2"));
    CHECK_OK(tb_kernel_table_find(t, "k_mid", 0, a, 3, &rec, &e), &e);
    tb_kernel_table_free(t);
    tb_bundle_free(b);
    /* two compilations of one name with the same assumptions (another dtype,
       block size...): the arguments cannot tell them apart, so no guess */
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(add_spec(b, "fp16", "same", "OOi", "110", 1), &e);
    CHECK_OK(add_spec(b, "fp32", "same", "OOi", "110", 1), &e);
    CHECK_OK(add_spec(b, "general", "same", "OOi", "000", 1), &e);
    CHECK_OK(add_spec(b, "unknown", "alone", "O", "", 1), &e);
    CHECK_OK(add_spec(b, "unknown1", "twice", "O", "", 1), &e);
    CHECK_OK(add_spec(b, "unknown2", "twice", "O", "", 1), &e);
    CHECK_OK(add_spec(b, "known", "mixed", "O", "1", 1), &e);
    CHECK_OK(add_spec(b, "unknown3", "mixed", "O", "", 1), &e);
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_u(0x2000), a[2] = tb_arg_i(7);
    CHECK(tb_kernel_table_find(t, "same", 0, a, 3, &rec, &e) == tb_err_invalid_argument);
    CHECK(strstr(e.message, "fp16") && strstr(e.message, "fp32") && strstr(e.message, "cache key"));
    a[0] = tb_arg_u(0x1004); /* only the general one fits */
    CHECK(tb_kernel_table_find(t, "same", 0, a, 3, &rec, &e) == tb_ok && rec == 2);
    CHECK(tb_kernel_table_find(t, "same", 0, NULL, 0, &rec, &e) == tb_ok && rec == 2);
    CHECK(tb_kernel_table_find(t, "alone", 0, a, 1, &rec, &e) == tb_ok && rec == 3); /* unknown, but alone */
    CHECK(tb_kernel_table_find(t, "twice", 0, a, 1, &rec, &e) == tb_err_invalid_argument);
    CHECK(tb_kernel_table_find(t, "twice", 0, NULL, 0, &rec, &e) == tb_err_invalid_argument);
    a[0] = tb_arg_u(0x1000);
    CHECK(tb_kernel_table_find(t, "mixed", 0, a, 1, &rec, &e) == tb_ok && rec == 6);
    a[0] = tb_arg_u(0x1004); /* the known one does not fit; the unknown one is no safe fallback */
    CHECK(tb_kernel_table_find(t, "mixed", 0, a, 1, &rec, &e) == tb_err_misaligned);
    tb_kernel_table_free(t);
    tb_bundle_free(b);
}

/* Assumptions past argument 63 (the spec keeps those under 64 as a bit
   mask, the rest as a list): each is checked, in argument order, on the
   path of a name with one record and of a name with several. */
TEST(test_table_many_arguments) {
    char types[81], div[81], div2[81];
    tb_arg a[80];
    tb_bundle *b = NULL;
    tb_kernel_table *t = NULL;
    tb_error e;
    uint32_t rec = 99, i;
    memset(types, 'O', 80), types[80] = 0;
    memset(div, '0', 80), div[80] = 0;
    div[3] = div[63] = div[64] = div[70] = '1';
    memcpy(div2, div, sizeof div);
    div2[70] = '0';
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(add_spec(b, "one", "wide_one", types, div, 1), &e);
    CHECK_OK(add_spec(b, "all", "wide", types, div, 1), &e);
    CHECK_OK(add_spec(b, "but70", "wide", types, div2, 1), &e);
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    for (i = 0; i < 80; i++) a[i] = tb_arg_u(0x1000 + 0x100 * (uint64_t)i);
    CHECK(tb_kernel_table_find(t, "wide_one", 0, a, 80, &rec, &e) == tb_ok && rec == 0);
    CHECK(tb_kernel_table_find(t, "wide", 0, a, 80, &rec, &e) == tb_ok && rec == 1);
    a[70] = tb_arg_u(0x7004);
    CHECK(tb_kernel_table_find(t, "wide_one", 0, a, 80, &rec, &e) == tb_err_misaligned &&
          strstr(e.message, "argument 70"));
    CHECK(tb_kernel_table_find(t, "wide", 0, a, 80, &rec, &e) == tb_ok && rec == 2);
    a[64] = tb_arg_u(0x6408);
    CHECK(tb_kernel_table_find(t, "wide_one", 0, a, 80, &rec, &e) == tb_err_misaligned &&
          strstr(e.message, "argument 64"));
    CHECK(tb_kernel_table_find(t, "wide", 0, a, 80, &rec, &e) == tb_err_misaligned && strstr(e.message, "argument 64"));
    a[63] = tb_arg_u(0x6302);
    CHECK(tb_kernel_table_find(t, "wide_one", 0, a, 80, &rec, &e) == tb_err_misaligned &&
          strstr(e.message, "argument 63"));
    a[3] = tb_arg_u(0x301);
    CHECK(tb_kernel_table_find(t, "wide_one", 0, a, 80, &rec, &e) == tb_err_misaligned &&
          strstr(e.message, "argument 3 "));
    CHECK(tb_kernel_table_find(t, "one", 0, a, 80, &rec, &e) == tb_err_misaligned && strstr(e.message, "argument 3 "));
    tb_kernel_table_free(t);
    tb_bundle_free(b);
}

/* Thousands of records and names: every key and name is found, each
   name's specializations chained in order. */
TEST(test_table_index_large) {
    tb_bundle *b = NULL;
    tb_kernel_table *t = NULL;
    tb_error e;
    uint32_t i, rec, n = 5000;
    char key[32], name[32];
    tb_arg a[1];
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    for (i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key%u", i);
        snprintf(name, sizeof name, "name%u", i / 2);
        CHECK_OK(add_spec(b, key, name, "O", i % 2 ? "1" : "0", 1), &e);
    }
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    for (i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key%u", i);
        CHECK(tb_kernel_table_find(t, key, 0, NULL, 0, &rec, &e) == tb_ok && rec == i);
        if (i % 2) continue;
        snprintf(name, sizeof name, "name%u", i / 2);
        a[0] = tb_arg_u(0x100);
        CHECK(tb_kernel_table_find(t, name, 0, a, 1, &rec, &e) == tb_ok && rec == i + 1);
        a[0] = tb_arg_u(0x104);
        CHECK(tb_kernel_table_find(t, name, 0, a, 1, &rec, &e) == tb_ok && rec == i);
        if (th_failed_now) break;
    }
    tb_kernel_table_free(t);
    tb_bundle_free(b);
}

/* The launch by name runs the cubin that the arguments choose. */
TEST(test_launch_by_name) {
    static const size_t sizes[] = {8, 4};
    tb_bundle *b = NULL;
    tb_kernel_table *t = NULL;
    tb_error e;
    tb_launch_config c[2];
    tb_launch_record r;
    tb_launch_params p;
    memset(&c, 0, sizeof c);
    memset(&r, 0, sizeof r);
    tb_arg a[2];
    const tb_loaded_kernel *aligned = NULL, *general = NULL;
    uint32_t kk;
    uintptr_t fa, fg;
    NEED_FAKE();
    fake.set_params(sizes, 2);
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(tb_bundle_add_kernel(b, "HA", 0, &kk, &e), &e);
    CHECK_OK(tb_bundle_add_artifact(b, kk, "k.cubin", "cubin A", 7, TB_COPY, &e), &e);
    CHECK_OK(tb_bundle_add_kernel(b, "HG", 0, &kk, &e), &e);
    CHECK_OK(tb_bundle_add_artifact(b, kk, "k.cubin", "cubin G", 7, TB_COPY, &e), &e);
    c[0] = config("Oi", "11"), c[0].kernel_hash = "HA";
    c[1] = config("Oi", "00"), c[1].kernel_hash = "HG";
    r.kernel_name = "k", r.config_count = 1;
    r.cache_key = "HA", r.configs = &c[0];
    CHECK_OK(tb_bundle_add_launch_record(b, &r, &e), &e);
    r.cache_key = "HG", r.configs = &c[1];
    CHECK_OK(tb_bundle_add_launch_record(b, &r, &e), &e);
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, 0, &t, &e), &e);
    REQUIRE(t);
    CHECK_OK(tb_kernel_table_get(t, "HA", 0, &aligned, &e), &e);
    CHECK_OK(tb_kernel_table_get(t, "HG", 0, &general, &e), &e);
    REQUIRE(aligned && general && aligned != general);
    memset(&p, 0, sizeof p);
    p.grid[0] = p.grid[1] = p.grid[2] = 1;
    p.args = a, p.arg_count = 2;
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_i(64);
    CHECK_OK(tb_kernel_table_launch(t, "k", 0, &p, &e), &e);
    fa = fake.function();
    a[1] = tb_arg_i(65);
    CHECK_OK(tb_kernel_table_launch(t, "k", 0, &p, &e), &e);
    fg = fake.function();
    CHECK(fa != fg);
    a[0] = tb_arg_u(0x1008), a[1] = tb_arg_i(64);
    CHECK_OK(tb_kernel_table_launch(t, "k", 0, &p, &e), &e);
    CHECK(fake.function() == fg);
    a[0] = tb_arg_u(0x2000);
    CHECK_OK(tb_kernel_table_launch(t, "k", 0, &p, &e), &e);
    CHECK(fake.function() == fa);
    tb_kernel_table_free(t);
    tb_bundle_free(b);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
