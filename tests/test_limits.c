/* A reader may lower any TB_MAX_* limit (docs/FORMAT.md, [R-limits]): this
   program defines smaller ones before the implementation and builds
   bundles by hand, byte by byte, from the layout FORMAT.md gives. Compiled
   as C99 and as C++11; run from the repository root:
   build/test_limits [name-filter] */
#define TB_MAX_KERNELS 2u
#define TB_MAX_NAME_LENGTH 4u
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "util.h"

/* A 2.1 bundle of kernels without files, named names[0..n), and an empty
   section 2; *size set. */
static unsigned char *hand_bundle(const char *const *names, int n, size_t *size) {
    unsigned char *p = (unsigned char *)calloc(1, 4096);
    size_t pos = 32 + 16 + 8, len;
    int i;
    for (i = 0; i < n; i++) {
        len = strlen(names[i]);
        u_put32(p + pos, (uint32_t)len);
        memcpy(p + pos + 4, names[i], len);
        pos += (4 + len + 1 + 7) & ~(size_t)7;
        pos += 8; /* device 0, no artifacts */
    }
    memcpy(p, "\x89TBUND\r\n", 8);
    p[8] = 2, p[10] = 1;
    u_put32(p + 24, 2);
    u_put32(p + 32, 1), u_put32(p + 36, 1), u_put64(p + 40, pos - 48);
    u_put32(p + 48, (uint32_t)n);
    u_put32(p + pos, 2), u_put32(p + pos + 4, 1), u_put64(p + pos + 8, 16);
    pos += 16 + 16 + 8;
    u_put64(p + 16, pos);
    reseal(p, pos);
    *size = pos;
    return p;
}

TEST(test_lowered_limits) {
    static const char *const two[] = {"A", "BB"}, *const three[] = {"A", "B", "C"}, *const longer[] = {"ABCDE"};
    size_t n;
    unsigned char *p;
    tb_bundle *b = NULL;
    tb_error e;
    p = hand_bundle(two, 2, &n);
    CHECK_OK(tb_bundle_read_memory(p, n, NULL, 0, &b, &e), &e); /* within the lowered limits */
    CHECK(b && tb_bundle_kernel_count(b) == 2 && strcmp(tb_bundle_kernel(b, 1)->hash, "BB") == 0);
    tb_bundle_free(b);
    free(p);
    p = hand_bundle(three, 3, &n);
    CHECK(tb_bundle_read_memory(p, n, NULL, 0, &b, &e) == tb_err_limit && strstr(e.message, "kernel count"));
    free(p);
    p = hand_bundle(longer, 1, &n);
    CHECK(tb_bundle_read_memory(p, n, NULL, 0, &b, &e) == tb_err_limit && strstr(e.message, "limit 4"));
    free(p);
    CHECK(b == NULL);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
