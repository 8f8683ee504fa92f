/* The launcher without a GPU: the library opens tests/fake_cuda.c's
   build/libfakecuda.so instead of libcuda.so.1 (TB_LIBCUDA_NAME), which
   answers with fixed values and records what each launch was given. So the
   parameter layouts (bools, tensor descriptors with and without TMA), the
   CUtensorMap encoding's arguments and the launch attributes are checked
   on every CI run, and the GPU suite checks the same against a real
   driver. The same stand-in serves tests/test_table.c (the launch by
   name), test_grid.c (the launch-time grid), test_autotune.c and
   test_graphs.c. Run from the repository root after
   `make build/libfakecuda.so`: build/test_launcher [name-filter] */
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "fake_client.h"

#include <dlfcn.h>

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

/* Every argument reaches the kernel, converted where its code says so,
   with the scratch pointers after them, at counts from none to
   TB_MAX_ARGS; one argument too many is refused. */
TEST(test_argument_counts) {
    static const uint32_t counts[] = {0, 1, 2, 3, 62, 63, 64, 100, TB_MAX_ARGS};
    static size_t sizes[TB_MAX_ARGS + 2];
    static char types[TB_MAX_ARGS + 1];
    static tb_arg a[TB_MAX_ARGS];
    size_t ci;
    NEED_FAKE();
    for (ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        uint32_t n = counts[ci], i;
        int bad = 0;
        tb_launch_config c;
        tb_loaded_kernel *k = NULL;
        tb_launch_params p;
        tb_error e;
        for (i = 0; i < n; i++) { /* int32, fp32 (converted), int64 in turn */
            types[i] = "ifl"[i % 3];
            sizes[i] = i % 3 == 2 ? 8 : 4;
            a[i] = i % 3 == 1 ? tb_arg_f(0.5 + i) : tb_arg_i(-(int64_t)i * 1000003);
        }
        types[n] = 0;
        sizes[n] = sizes[n + 1] = 8;
        c = config(types, "");
        c.global_scratch.present = c.profile_scratch.present = 1;
        c.global_scratch.size = c.profile_scratch.size = 64;
        CHECK_OK(load(&c, sizes, (int)n + 2, &k, &e), &e);
        REQUIRE(k);
        memset(&p, 0, sizeof p);
        p.grid[0] = p.grid[1] = p.grid[2] = 1;
        p.args = n ? a : NULL, p.arg_count = n;
        p.global_scratch = (void *)(uintptr_t)0x5000, p.profile_scratch = (void *)(uintptr_t)0x6000;
        CHECK_OK(tb_launch(k, &p, &e), &e);
        for (i = 0; i < n; i++) {
            float f;
            if (i % 3 == 1) memcpy(&f, fake.param((int)i), 4), bad += f != (float)(0.5 + i);
            else if (i % 3 == 0) bad += param_i32((int)i) != (int32_t)(-(int64_t)i * 1000003);
            else bad += param_i64((int)i) != -(int64_t)i * 1000003;
        }
        CHECK(bad == 0);
        CHECK(param_i64((int)n) == 0x5000 && param_i64((int)n + 1) == 0x6000);
        p.arg_count = n + 1; /* one too many: refused before anything reaches the driver */
        CHECK(tb_launch(k, &p, &e) == tb_err_arg_mismatch);
        tb_unload(k);
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
    CHECK(tb_launch(k, &p, &e) == tb_err_invalid_argument && strstr(e.message, "more blocks than a CUDA launch takes"));
    p.grid[0] = 1u << 30; /* times 2 blocks a cluster: 2^31, one over CUDA's x */
    CHECK(tb_launch(k, &p, &e) == tb_err_invalid_argument);
    p.grid[0] = (1u << 30) - 1, p.grid[1] = 32767;
    CHECK_OK(tb_launch(k, &p, &e), &e);
    p.grid[1] = 32768; /* y: a cluster of 1, so 32768 is fine; z as well */
    CHECK_OK(tb_launch(k, &p, &e), &e);
    tb_unload(k);
    c.shared_mem = 0xffffff00u;
    CHECK(load(&c, none, 2, &k, &e) == tb_err_shared_memory && k == NULL);
    c.shared_mem = 0, c.cluster_dims[0] = 65536, c.cluster_dims[1] = 65536, c.cluster_dims[2] = 1;
    CHECK(load(&c, none, 2, &k, &e) == tb_err_malformed && k == NULL);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
