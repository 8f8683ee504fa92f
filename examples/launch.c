/* launch: load tb_add out of a bundle file and run it, with no Python and no
   CUDA headers. usage: launch BUNDLE
   Exit 0 when the result is right, or when there is no GPU to run on (it
   says why); 1 on any failure. */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "triton_bundle.h" /* -I the repository root, or the installed header (pkg-config --cflags triton_bundle) */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long devptr;

int main(int argc, char **argv) {
    tb_bundle *bundle = NULL;
    tb_kernel_table *table = NULL;
    const tb_loaded_kernel *add = NULL;
    tb_error e;
    int (*mem_alloc)(devptr *, size_t), (*htod)(devptr, const void *, size_t), (*dtoh)(void *, devptr, size_t);
    int (*sync)(void), (*mem_free)(devptr), (*retain)(void **, int), (*set_current)(void *);
    void *sym, *ctx = NULL;
    enum { N = 5000 };
    static float x[N], y[N], out[N];
    devptr dx = 0, dy = 0, dout = 0;
    double sum = 0;
    int i, bad = 0;
    tb_arg args[4];
    tb_launch_params p;

    if (argc != 2) {
        fprintf(stderr, "usage: launch BUNDLE\n");
        return 2;
    }
    if (tb_driver_load(&e) != tb_ok) {
        printf("launch: no GPU to run on here (%s); skipped\n", e.message);
        return 0;
    }
    if (tb_bundle_read_file(argv[1], NULL, 0, &bundle, &e) != tb_ok ||
        tb_kernel_table_create(bundle, NULL, NULL, TB_TABLE_LAZY, &table, &e) != tb_ok ||
        tb_kernel_table_get(table, "tb_add", 0, &add, &e) != tb_ok) {
        fprintf(stderr, "launch: %s\n", e.message);
        return 1;
    }
    /* memory through the same driver the library loaded */
#define SYM(var, name) (sym = tb_driver_symbol(name), memcpy(&var, &sym, sizeof sym), sym != NULL)
    if (!SYM(mem_alloc, "cuMemAlloc_v2") || !SYM(htod, "cuMemcpyHtoD_v2") || !SYM(dtoh, "cuMemcpyDtoH_v2") ||
        !SYM(sync, "cuCtxSynchronize") || !SYM(mem_free, "cuMemFree_v2") || !SYM(retain, "cuDevicePrimaryCtxRetain") ||
        !SYM(set_current, "cuCtxSetCurrent")) {
        fprintf(stderr, "launch: the driver lacks a memory entry point\n");
        return 1;
    }
    if (retain(&ctx, 0) || set_current(ctx) || mem_alloc(&dx, sizeof x) || mem_alloc(&dy, sizeof y) ||
        mem_alloc(&dout, sizeof out)) {
        fprintf(stderr, "launch: cannot allocate device memory\n");
        return 1;
    }
    for (i = 0; i < N; i++) x[i] = 0.5f * i, y[i] = 2.0f * i;
    htod(dx, x, sizeof x);
    htod(dy, y, sizeof y);

    args[0] = tb_arg_u(dx);
    args[1] = tb_arg_u(dy);
    args[2] = tb_arg_u(dout);
    args[3] = tb_arg_i(N);
    memset(&p, 0, sizeof p);
    p.grid[0] = (N + 1023) / 1024; /* BLOCK = 1024 is baked into this cubin */
    p.grid[1] = p.grid[2] = 1;
    p.args = args;
    p.arg_count = 4;
    p.flags = TB_LAUNCH_CHECKED;
    if (tb_launch(add, &p, &e) != tb_ok || sync() != 0) {
        fprintf(stderr, "launch: %s\n", e.message);
        return 1;
    }
    dtoh(out, dout, sizeof out);
    for (i = 0; i < N; i++) {
        bad += out[i] != x[i] + y[i];
        sum += out[i];
    }
    printf("launch: tb_add over %d elements: %s (sum %.1f, expected 31243750.0)\n", N,
           bad ? "WRONG" : "out == x + y", sum);
    mem_free(dx);
    mem_free(dy);
    mem_free(dout);
    tb_kernel_table_free(table);
    tb_bundle_free(bundle);
    return bad || sum != 31243750.0;
}
