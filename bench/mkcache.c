/* mkcache: writes a Triton-shaped cache of N kernel directories, copies of
   the fixture's kernels under new hashes, as a large real cache looks.
   usage: mkcache CACHE_DIR N */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "../tests/util.h"
#include "bench_util.h"

int main(int argc, char **argv) {
    tb_bundle *fix, *big;
    tb_error e;
    tb_emit_report rep;
    uint32_t n, c, i;
    if (argc != 3 || (n = (uint32_t)atoi(argv[2])) == 0) {
        fprintf(stderr, "usage: mkcache CACHE_DIR N\n");
        return 2;
    }
    fix = u_fixture_bundle(0);
    if (!fix || !(big = replicated_bundle(fix, n))) return 1;
    if (tb_emit(big, argv[1], NULL, &rep, NULL, &e) != tb_ok) {
        fprintf(stderr, "mkcache: %s\n", e.message);
        return 1;
    }
    for (i = 0, c = 0; i < tb_bundle_kernel_count(big); i++) c += tb_bundle_kernel(big, i)->artifact_count;
    printf("mkcache: %u kernel directories, %u files in %s\n", rep.written, c, argv[1]);
    tb_bundle_free(big);
    tb_bundle_free(fix);
    return 0;
}
