/* libFuzzer target: CUDA graph calls in any order, through the stand-in
   driver (build/libfakecuda.so: run from the repository root). Each input
   byte is a step: load or unload one of two kernels, create or free a
   kernel table, begin, launch into, end, update, replay or free a graph.
   The program keeps its own handles valid (it never launches a kernel it
   unloaded) but frees tables and kernels while a graph holds their
   launches, which tb_graph_* must survive (hardening 2.0, 1). Every call
   succeeds or fails with a message; ASan and UBSan watch the rest. */
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "../tests/fake_client.h"

#define STREAM ((void *)(uintptr_t)0x5100)
static tb_bundle *bundle;

static void setup(void) {
    static const tb_grid_op gx[] = {{TB_GRID_ARG, 1, 0}, {TB_GRID_CONST, 0, 64}, {TB_GRID_CEILDIV, 0, 0}};
    static const tb_grid_op one[] = {{TB_GRID_CONST, 0, 1}};
    static tb_grid_rule g;
    tb_launch_config c = config("Oi", "");
    tb_launch_record r;
    uint32_t kk;
    tb_error e;
    g.op_count[0] = 3, g.op_count[1] = g.op_count[2] = 1, g.ops[0] = gx, g.ops[1] = g.ops[2] = one;
    c.grid = &g;
    memset(&r, 0, sizeof r);
    r.kernel_name = "k", r.cache_key = "K", r.config_count = 1, r.configs = &c;
    if (tb_bundle_create(NULL, &bundle, &e) || tb_bundle_add_kernel(bundle, "H", 0, &kk, &e) ||
        tb_bundle_add_artifact(bundle, kk, "k.cubin", "cubin", 5, TB_COPY, &e) ||
        tb_bundle_add_launch_record(bundle, &r, &e))
        __builtin_trap();
}

static void check(tb_result r, const tb_error *e) {
    if (r != tb_ok && !e->message[0]) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static const size_t sizes[] = {8, 4};
    tb_loaded_kernel *k[2] = {NULL, NULL};
    tb_kernel_table *t = NULL;
    tb_graph *g = NULL;
    tb_launch_config c = config("Oi", "");
    tb_launch_params p;
    tb_arg a[2];
    tb_error e;
    size_t i;
    if (!fake_ready()) return 0;
    if (!bundle) setup();
    memset(&p, 0, sizeof p);
    p.args = a, p.arg_count = 2, p.stream = STREAM, p.grid[0] = p.grid[1] = p.grid[2] = 1;
    for (i = 0; i < size && i < 64; i++) {
        unsigned op = data[i] % 11, which = (data[i] / 11) & 1;
        a[0] = tb_arg_u(0x1000 + 16 * i), a[1] = tb_arg_i((int64_t)data[i] - 100);
        p.flags = data[i] & 0x80 ? TB_LAUNCH_GRID_AUTO : 0;
        e.message[0] = 0;
        switch (op) {
        case 0: if (!k[which]) check(load(&c, sizes, 2, &k[which], &e), &e); break;
        case 1: tb_unload(k[which]); k[which] = NULL; break;
        case 2: if (!t) check(tb_kernel_table_create(bundle, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e); break;
        case 3: tb_kernel_table_free(t); t = NULL; break;
        case 4: if (!g) check(tb_graph_begin(STREAM, NULL, &g, &e), &e); break;
        case 5: if (k[which]) check(tb_launch(k[which], &p, &e), &e); break;
        case 6: if (t) check(tb_kernel_table_launch(t, "k", 0, &p, &e), &e); break;
        case 7: if (g) check(tb_graph_end(g, &e), &e); break;
        case 8: if (g) check(tb_graph_update(g, data[i] % 4, &p, &e), &e); break;
        case 9: if (g) check(tb_graph_launch(g, STREAM, &e), &e); break;
        default: tb_graph_free(g); g = NULL; break;
        }
    }
    tb_graph_free(g);
    tb_kernel_table_free(t);
    tb_unload(k[0]);
    tb_unload(k[1]);
    if (fake.graphs_live() != 0) __builtin_trap(); /* every graph and exec destroyed */
    return 0;
}
