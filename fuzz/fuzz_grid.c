/* libFuzzer target: the launch-time grid path against tb_grid_compute.
   Each input is a config (a launch argument's code, the size the cubin
   gives it, two params, three grid programs) and a launch's arguments and
   grid_args. The config is loaded through the stand-in driver
   (build/libfakecuda.so: run from the repository root), which resolves
   params and picks the fast paths (a constant, CEILDIV(ARG, constant)),
   and launched with TB_LAUNCH_GRID_AUTO. The launched grid must be
   tb_grid_compute's, and a refusal on one side a refusal on the other;
   the one allowed difference is a launch refusing a bool the cubin holds
   where the config says integer (hardening 2.0, 3). Under UBSan this also
   finds any overflow in either path. */
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "../tests/fake_client.h"

typedef struct { const unsigned char *p; size_t n; } in_t;
static uint64_t take(in_t *in, size_t bytes) {
    uint64_t v = 0;
    size_t i;
    for (i = 0; i < bytes && in->n; i++, in->p++, in->n--) v |= (uint64_t)*in->p << (8 * i);
    return v;
}
/* values near the edges more often than uniform bytes would give them */
static int64_t value(in_t *in) {
    static const int64_t edge[] = { 0,     1,         -1, 2, 1024, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1,
                                    65535, 2147483647 };
    uint64_t sel = take(in, 1);
    if (sel < 176) /* an edge, nudged by -5..+5: wrapping, as the bits it stands for */
        return (int64_t)((uint64_t)edge[sel % (sizeof edge / sizeof edge[0])] + (sel / 16) - 5);
    return (int64_t)take(in, 8);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static const char codes[] = "?bhilBHIK";
    static const unsigned code_bytes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8};
    static const uint32_t ops[] = { TB_GRID_CONST, TB_GRID_ARG, TB_GRID_PARAM,    TB_GRID_EXTRA,   TB_GRID_ADD,
                                    TB_GRID_SUB,   TB_GRID_MUL, TB_GRID_FLOORDIV, TB_GRID_CEILDIV, TB_GRID_MOD,
                                    TB_GRID_MIN,   TB_GRID_MAX, TB_GRID_NEG };
    in_t in = {data, size};
    char types[4] = "O?l";
    size_t sizes[3] = {8, 1, 8};
    tb_config_param ps[2] = {{"A", 0}, {"B", 0}};
    tb_grid_op prog[3][8];
    tb_grid_rule g;
    tb_launch_config c;
    tb_loaded_kernel *k = NULL;
    tb_launch_params p;
    tb_arg a[3];
    int64_t extra[2];
    uint32_t want[3], d, i, ci;
    unsigned gr[3], block, shared, attrs;
    tb_error e1, e2;
    tb_result r1, r2, rl;
    int converted, before;
    if (size < 8 || !fake_ready()) return 0;
    ci = (uint32_t)(take(&in, 1) % 9);
    types[1] = codes[ci];
    /* PyTorch's 'i' or 'I' for an i1: a 1-byte parameter in the cubin */
    converted = (types[1] == 'i' || types[1] == 'I') && (take(&in, 1) & 1);
    sizes[1] = converted ? 1 : code_bytes[ci];
    ps[0].value = value(&in), ps[1].value = value(&in);
    for (d = 0; d < 3; d++) {
        g.op_count[d] = 1 + (uint32_t)(take(&in, 1) % 8);
        for (i = 0; i < g.op_count[d]; i++) {
            tb_grid_op *o = &prog[d][i];
            uint64_t sel = take(&in, 1);
            o->op = ops[sel % 13];
            o->index = (uint32_t)(sel / 13) % 4;
            o->value = o->op == TB_GRID_CONST ? value(&in) : 0;
            if (o->op >= TB_GRID_ADD || o->op == TB_GRID_CONST) o->index = 0;
        }
        g.ops[d] = prog[d];
    }
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_i(value(&in)), a[2] = tb_arg_i(value(&in));
    extra[0] = value(&in), extra[1] = value(&in);
    c = config(types, ""), c.params = ps, c.param_count = 2, c.grid = &g;
    r1 = tb_grid_compute(&c, a, 3, extra, 2, want, &e1);
    rl = load(&c, sizes, 3, &k, &e2);
    if (rl != tb_ok) { /* a rule the reader refuses: tb_grid_compute refused it first */
        if (r1 == tb_ok || rl != r1) __builtin_trap();
        return 0;
    }
    memset(&p, 0, sizeof p);
    p.args = a, p.arg_count = 3, p.flags = TB_LAUNCH_GRID_AUTO, p.grid_args = extra, p.grid_arg_count = 2;
    before = fake.launches();
    r2 = tb_launch(k, &p, &e2);
    gr[0] = gr[1] = gr[2] = 0;
    if (r2 == tb_ok && fake.launches() != before) fake.grid(gr, &block, &shared, &attrs);
    if (converted && a[1].u > 1 && r2 == tb_err_arg_range && strstr(e2.message, "pass 0 or 1")) {
        /* the allowed difference */
    } else if (r1 != r2) {
        __builtin_trap();
    } else if (r1 == tb_ok && (want[0] && want[1] && want[2]) &&
               (gr[0] != want[0] || gr[1] != want[1] || gr[2] != want[2])) {
        __builtin_trap();
    } else if (r1 != tb_ok && !e2.message[0]) {
        __builtin_trap();
    }
    tb_unload(k);
    return 0;
}
