/* libFuzzer target: tb_grid_parse, the grid expression compiler (tbundle
   pack --grid). The input, NUL-terminated and cut at 4 KiB, is parsed over
   fixed argument names and two params. A refusal is tb_err_parse whose
   message names the column, inside the text, that the error offset gives.
   A program is a rule dimension: 1..TB_MAX_GRID_OPS operations, each
   known, operands in range, unused fields zero, the stack never short and
   one value left, folded as far as the Python companion's _fold_ops folds;
   the same input gives the same program again. The parser does not bound
   the stack's depth: tb_bundle_set_grid_rule takes the program if it stays
   within TB_GRID_STACK and refuses it with tb_err_limit if not, and a rule
   it took evaluates to a grid or to tb_err_arg_range. tb_grid_text writes
   the program back: "?" past TB_GRID_STACK, else a text that parses to the
   same program, or that nests past the parser's 64 levels. */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"

#define NARGS 5u
static const char *const names[NARGS] = {"n", "m", "x_numel", "XBLOCK", "ks0"};
static const char types[] = "iilKh"; /* every argument an integer: a rule may read any */
static const tb_config_param params[2] = {{"XBLOCK", 1024}, {"R0_BLOCK", 64}};

/* a op b fits in int64 (the folds _fold_ops makes) */
static int folds(uint32_t op, int64_t a, int64_t b) {
    int64_t v;
    switch (op) {
    case TB_GRID_ADD: return !__builtin_add_overflow(a, b, &v);
    case TB_GRID_SUB: return !__builtin_sub_overflow(a, b, &v);
    case TB_GRID_MUL: return !__builtin_mul_overflow(a, b, &v);
    case TB_GRID_MIN: case TB_GRID_MAX: return 1;
    default: return 0; /* FLOORDIV, MOD, CEILDIV are never folded */
    }
}

/* the rule x = ops, y = z = 1 on a one-record bundle: taken, or refused with
   tb_err_limit exactly when the stack goes past TB_GRID_STACK; taken, it
   evaluates for a few argument vectors to a grid or tb_err_arg_range */
static void set_rule(const tb_grid_op *ops, uint32_t n, uint32_t depth) {
    static const tb_grid_op one = {TB_GRID_CONST, 0, 1};
    static const tb_arg argv[3][NARGS] = {
        {{1000}, {7}, {3}, {128}, {0}},
        {{-1}, {INT64_MAX}, {INT64_MIN}, {1}, {65535}},
        {{0}, {-1024}, {1 << 20}, {(int64_t)1 << 40}, {-1}}};
    tb_launch_config c;
    tb_launch_record rec;
    tb_grid_rule g;
    tb_bundle *b = NULL;
    tb_error e;
    tb_result r;
    uint32_t grid[3], v;
    memset(&c, 0, sizeof c);
    c.kernel_hash = "HASH", c.function_name = "k", c.binary_name = "k.cubin", c.arg_types = types;
    c.arg_divisibility = "", c.num_warps = 4, c.num_ctas = 1, c.param_count = 2, c.params = params;
    memset(&rec, 0, sizeof rec);
    rec.cache_key = "HASH", rec.kernel_name = "k", rec.config_count = 1, rec.configs = &c;
    if (tb_bundle_create(NULL, &b, &e) != tb_ok) return; /* out of memory */
    if (tb_bundle_add_launch_record(b, &rec, &e) != tb_ok) __builtin_trap();
    g.op_count[0] = n, g.ops[0] = ops;
    g.op_count[1] = g.op_count[2] = 1, g.ops[1] = g.ops[2] = &one;
    r = tb_bundle_set_grid_rule(b, 0, TB_ALL_CONFIGS, &g, &e);
    if (depth > TB_GRID_STACK ? r != tb_err_limit : r != tb_ok) __builtin_trap();
    if (r == tb_ok) {
        const tb_launch_config *cf = &tb_bundle_launch_record(b, 0)->configs[0];
        if (!cf->grid || cf->grid->op_count[0] != n || memcmp(cf->grid->ops[0], ops, n * sizeof *ops)) __builtin_trap();
        for (v = 0; v < 3; v++) {
            r = tb_grid_compute(cf, argv[v], NARGS, NULL, 0, grid, &e);
            if (r != tb_ok && (r != tb_err_arg_range || !e.message[0])) __builtin_trap();
            if (r == tb_ok && (grid[1] != 1 || grid[2] != 1)) __builtin_trap();
        }
    }
    tb_bundle_free(b);
}

/* the program written back by tb_grid_text, and parsed again */
static void text_back(const tb_grid_op *ops, uint32_t n, uint32_t depth) {
    static char buf[16384];
    tb_grid_op back[TB_MAX_GRID_OPS];
    uint32_t m = 0;
    tb_error e;
    tb_result r;
    size_t len = tb_grid_text(ops, n, names, NARGS, params, 2, buf, sizeof buf);
    if (len >= sizeof buf || strlen(buf) != len || tb_grid_text(ops, n, names, NARGS, params, 2, NULL, 0) != len)
        __builtin_trap();
    if (depth > TB_GRID_STACK) {
        if (strcmp(buf, "?")) __builtin_trap();
        return;
    }
    r = tb_grid_parse(buf, names, NARGS, params, 2, back, &m, &e);
    if (r == tb_ok ? m != n || memcmp(back, ops, n * sizeof *ops)
                   : r != tb_err_parse || !strstr(e.message, "nested too deeply"))
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static char text[4096 + 1];
    tb_grid_op ops[TB_MAX_GRID_OPS], again[TB_MAX_GRID_OPS];
    uint32_t n = 0, n2 = 0, i, depth = 0, most = 0;
    size_t len = size < 4096 ? size : 4096;
    tb_error e, e2;
    tb_result r;
    memcpy(text, data, len);
    text[len] = 0;
    len = strlen(text);
    memset(&e, 0, sizeof e);
    r = tb_grid_parse(text, names, NARGS, params, 2, ops, &n, &e);
    if (tb_grid_parse(text, names, NARGS, params, 2, again, &n2, &e2) != r) __builtin_trap();
    if (r != tb_ok) {
        const char *at = strstr(e.message, "column ");
        unsigned long col;
        if (r != tb_err_parse || !at || n != 0) __builtin_trap();
        col = strtoul(at + 7, NULL, 10);
        if (col < 1 || col > len + 1 || e.offset != (long long)col - 1 || strcmp(e.message, e2.message))
            __builtin_trap();
        return 0;
    }
    if (n < 1 || n > TB_MAX_GRID_OPS || n2 != n || memcmp(ops, again, n * sizeof *ops)) __builtin_trap();
    for (i = 0; i < n; i++) {
        const tb_grid_op *o = &ops[i];
        switch (o->op) {
        case TB_GRID_CONST:
            if (o->index) __builtin_trap();
            depth++;
            break;
        case TB_GRID_ARG:
        case TB_GRID_PARAM:
            if (o->value || o->index >= (o->op == TB_GRID_ARG ? NARGS : 2u)) __builtin_trap();
            depth++;
            break;
        case TB_GRID_NEG: /* of a constant only where it is INT64_MIN, whose negation does not fit */
            if (o->index || o->value || depth < 1 ||
                (ops[i - 1].op == TB_GRID_CONST && ops[i - 1].value != INT64_MIN))
                __builtin_trap();
            break;
        case TB_GRID_ADD: case TB_GRID_SUB: case TB_GRID_MUL: case TB_GRID_FLOORDIV: case TB_GRID_CEILDIV:
        case TB_GRID_MOD: case TB_GRID_MIN: case TB_GRID_MAX: /* of two constants only where it does not fold */
            if (o->index || o->value || depth < 2 ||
                (ops[i - 1].op == TB_GRID_CONST && ops[i - 2].op == TB_GRID_CONST &&
                 folds(o->op, ops[i - 2].value, ops[i - 1].value)))
                __builtin_trap();
            depth--;
            break;
        default: /* EXTRA is never written, and nothing else exists */
            __builtin_trap();
        }
        if (depth > most) most = depth;
    }
    if (depth != 1) __builtin_trap();
    set_rule(ops, n, most);
    text_back(ops, n, most);
    return 0;
}
