/* The launcher without a driver: argument codes and their conversions
   (fp16/bf16 bits, checked ranges), the fixed-size argument arrays, and the
   errors when no libcuda can be opened. (tests/test_launcher.c covers what
   needs a driver, with a stand-in one; the kernel table, grid rules and
   autotuning have their own programs: tests/test_table.c, test_grid.c and
   test_autotune.c.) Compiled as C99 and as C++11; run from the repository
   root: build/test_args [name-filter] */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "fp16_vectors.h"

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

int main(int argc, char **argv) { return th_main(argc, argv); }
