/* The launcher without a driver: argument codes and their conversions
   (fp16/bf16 bits, checked ranges), the fixed-size argument arrays, the
   kernel table's choice of specialization, and the errors when no libcuda
   can be opened. (tests/test_launcher.c covers what needs a driver, with a
   stand-in one.) Compiled as C99 and as C++11; run from the repository
   root: build/test_args [name-filter] */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "util.h"
#include "fp16_vectors.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

TEST(test_arg_codes) {
    static const char *sig[] = {"*fp32", "*i8", "i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16",
                                "u32", "u64", "fp16", "bf16", "fp32", "fp64", "constexpr"};
    char out[64];
    char code;
    tb_error e;
    CHECK_OK(tb_arg_types_from_signature(sig, sizeof sig / sizeof sig[0], out, sizeof out, &e), &e);
    CHECK(strcmp(out, "OO?bhil?BHIKeyfd") == 0); /* i1 and u1: a 1-byte bool */
    CHECK(tb_arg_code_from_triton_type("nvTmaDesc", &code, &e) == tb_err_unsupported_type);
    CHECK(strstr(e.message, "TMA") != NULL);
    CHECK(tb_arg_code_from_triton_type("tensordesc<fp16[128, 32]>", &code, &e) == tb_ok && code == 'T');
    CHECK(tb_arg_code_size('T') == 8);
    CHECK(tb_arg_code_from_triton_type("fp8e4nv", &code, &e) == tb_err_unsupported_type);
    CHECK(strstr(e.message, "fp8e4nv") != NULL && strstr(e.message, "fp8 scalar") != NULL);
    CHECK(tb_arg_code_from_triton_type("*", &code, &e) == tb_err_unsupported_type);
    CHECK(tb_arg_types_from_signature(sig, 4, out, 3, &e) == tb_err_limit);
    CHECK(tb_arg_code_size('O') == 8 && tb_arg_code_size('b') == 1 && tb_arg_code_size('y') == 2 &&
          tb_arg_code_size('I') == 4 && tb_arg_code_size('?') == 1 && tb_arg_code_size('x') == 0);
}

/* ----------------------------------------------------------- conversions */
TEST(test_fp16_vectors) {
    size_t i;
    unsigned bad = 0;
    for (i = 0; i < sizeof fp16_vectors / sizeof fp16_vectors[0]; i++) {
        double d;
        uint64_t bits = fp16_vectors[i].d;
        memcpy(&d, &bits, 8);
        if (tb_fp16_from_double(d) != fp16_vectors[i].h) {
            if (bad++ < 5) printf("    %.17g -> %04x, want %04x\n", d, tb_fp16_from_double(d), fp16_vectors[i].h);
        }
    }
    CHECK(bad == 0);
    CHECK(tb_fp16_from_double(1.5) == 0x3E00);
    CHECK(tb_fp16_from_double(-2.25) == 0xC080);
    CHECK(tb_fp16_from_double(0.0 / 0.0) == 0x7E00 || tb_fp16_from_double(0.0 / 0.0) == 0xFE00);
    /* every finite fp16 survives the round trip */
    for (i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        if (((h >> 10) & 31) == 31) continue;
        if (tb_fp16_from_double(tb_fp16_to_double(h)) != h) bad++;
    }
    CHECK(bad == 0);
}

TEST(test_bf16_triton_packing) {
    CHECK(tb_bf16_from_double(-2.25) == 0xC010);
    CHECK(tb_bf16_from_double(1.5) == 0x3FC0);
    CHECK(tb_bf16_from_double(3.14159) == 0x4049);
    /* float 0x3F80C000: Triton truncates to 0x3F80 (round-to-nearest would give 0x3F81) */
    CHECK(tb_bf16_from_double(1.005859375) == 0x3F80);
    CHECK(tb_bf16_to_double(0xC010) == -2.25);
}

TEST(test_pack_args) {
    tb_arg s;
    tb_error e;
    unsigned char *p = (unsigned char *)&s;
    CHECK(sizeof(tb_arg) == 8);
    CHECK_OK(tb_arg_convert('b', tb_arg_i(-7), 1, &s, &e), &e);
    CHECK(p[0] == 0xF9 && p[1] == 0);
    CHECK_OK(tb_arg_convert('B', tb_arg_u(200), 1, &s, &e), &e);
    CHECK(p[0] == 200);
    /* checked mode takes what Triton 3.6's launcher takes (i8 0..255 with
       Python's "b"), and what the bits can hold, no more */
    CHECK_OK(tb_arg_convert('b', tb_arg_i(200), 1, &s, &e), &e);
    CHECK(p[0] == 200);
    CHECK(tb_arg_convert('b', tb_arg_i(256), 1, &s, &e) == tb_err_arg_range);
    CHECK(strstr(e.message, "256") != NULL);
    CHECK(tb_arg_convert('b', tb_arg_i(-129), 1, &s, &e) == tb_err_arg_range);
    CHECK_OK(tb_arg_convert('b', tb_arg_i(256), 0, &s, &e), &e); /* unchecked: the low bits */
    CHECK(p[0] == 0);
    CHECK(tb_arg_convert('B', tb_arg_i(-1), 1, &s, &e) == tb_ok && p[0] == 0xFF);
    CHECK(tb_arg_convert('B', tb_arg_i(256), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_arg_convert('B', tb_arg_i(-129), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_arg_convert('?', tb_arg_i(1), 1, &s, &e) == tb_ok && p[0] == 1 && p[1] == 0);
    CHECK(tb_arg_convert('?', tb_arg_i(0), 1, &s, &e) == tb_ok && p[0] == 0);
    CHECK(tb_arg_convert('?', tb_arg_i(2), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_arg_convert('?', tb_arg_i(-1), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_arg_convert('h', tb_arg_i(-32769), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_arg_convert('h', tb_arg_i(32768), 1, &s, &e) == tb_err_arg_range); /* Triton refuses it too */
    CHECK(tb_arg_convert('H', tb_arg_i(-32768), 1, &s, &e) == tb_ok && p[0] == 0x00 && p[1] == 0x80);
    CHECK(tb_arg_convert('H', tb_arg_u(65536), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_arg_convert('I', tb_arg_i(-1), 1, &s, &e) == tb_ok && *(uint32_t *)(void *)p == 0xffffffffu);
    CHECK(tb_arg_convert('I', tb_arg_u(0x100000000ULL), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_arg_convert('H', tb_arg_u(60000), 1, &s, &e) == tb_ok && p[0] == 0x60 && p[1] == 0xEA);
    CHECK(tb_arg_convert('i', tb_arg_i((int64_t)1 << 31), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_arg_convert('i', tb_arg_i(-70000), 1, &s, &e) == tb_ok && *(int32_t *)(void *)p == -70000);
    CHECK(tb_arg_convert('I', tb_arg_u(4000000000u), 1, &s, &e) == tb_ok && *(uint32_t *)(void *)p == 4000000000u);
    CHECK(tb_arg_convert('K', tb_arg_u(9223372036854779904ULL), 1, &s, &e) == tb_ok && s.u == 9223372036854779904ULL);
    CHECK(tb_arg_convert('e', tb_arg_f(1.5), 1, &s, &e) == tb_ok && p[0] == 0x00 && p[1] == 0x3E && p[2] == 0);
    CHECK(tb_arg_convert('e', tb_arg_f(70000.0), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_arg_convert('y', tb_arg_f(-2.25), 1, &s, &e) == tb_ok && p[0] == 0x10 && p[1] == 0xC0);
    CHECK(tb_arg_convert('f', tb_arg_f(3.14159), 1, &s, &e) == tb_ok && *(float *)(void *)p == 3.14159f);
    CHECK(tb_arg_convert('d', tb_arg_f(2.718281828459045), 1, &s, &e) == tb_ok && s.f == 2.718281828459045);
    CHECK(tb_arg_convert('O', tb_arg_p((void *)0x1234), 1, &s, &e) == tb_ok && s.u == 0x1234);
    CHECK(tb_arg_convert('x', tb_arg_i(0), 1, &s, &e) == tb_err_unsupported_type);
}

TEST(test_too_many_args) {
    tb_bundle *b;
    tb_error e;
    tb_launch_config cfg;
    tb_launch_record rec;
    memset(&cfg, 0, sizeof cfg);
    memset(&rec, 0, sizeof rec);
    char types[TB_MAX_ARGS + 2];
    memset(types, 'i', sizeof types);
    types[TB_MAX_ARGS + 1] = 0;
    memset(&cfg, 0, sizeof cfg);
    cfg.kernel_hash = "H";
    cfg.function_name = "k";
    cfg.binary_name = "k.cubin";
    cfg.arg_types = types;
    cfg.num_warps = 4;
    cfg.num_ctas = 1;
    rec.cache_key = "k";
    rec.kernel_name = "k";
    rec.config_count = 1;
    rec.configs = &cfg;
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_limit);
    CHECK(strstr(e.message, "TB_MAX_ARGS") != NULL);
    types[TB_MAX_ARGS] = 0;
    CHECK_OK(tb_bundle_add_launch_record(b, &rec, &e), &e);
    tb_bundle_free(b);
}

/* The launcher's CPU-side behaviour where no GPU is present. */
TEST(test_launcher_without_driver) {
    tb_error e;
    tb_loaded_kernel *k = (tb_loaded_kernel *)1;
    tb_launch_config cfg;
    tb_result r = tb_driver_load(&e);
    memset(&cfg, 0, sizeof cfg);
    if (r == tb_ok) SKIP("a CUDA driver is present here; the GPU suite covers loading");
    CHECK(r == tb_err_no_driver || r == tb_err_no_device);
    CHECK(strstr(e.message, "libcuda") != NULL);
    cfg.kernel_hash = "H";
    cfg.function_name = "k";
    cfg.binary_name = "k.cubin";
    cfg.arg_types = "";
    cfg.num_warps = 4;
    cfg.num_ctas = 1;
    CHECK(tb_load_cubin("x", 1, &cfg, NULL, NULL, &k, &e) == r);
    CHECK(k == NULL);
    CHECK(tb_driver_symbol("cuMemAlloc_v2") == NULL);
}

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

int main(int argc, char **argv) { return th_main(argc, argv); }
