/* Grid rules (docs/FORMAT.md, section 4's grid programs): tb_grid_compute
   with Python's integer semantics and CUDA's limits, every way a rule
   fails, a builder refusing what a reader refuses; grid expressions
   (tb_grid_parse) and rules attached by the names the IR gives the
   arguments (tb_bundle_add_grid_rule); and the launch-time grid
   (TB_LAUNCH_GRID_AUTO), by name and on a loaded kernel, against
   tb_grid_compute through the stand-in driver (tests/fake_cuda.c). How
   rules travel through the format (section 4's bytes) is tested in
   tests/test_format.c. Compiled as C99 and as C++11; run from the
   repository root after `make build/libfakecuda.so`:
   build/test_grid [name-filter] */
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "fake_client.h"
#include "util.h"

#define OP(o, i, v) {TB_GRID_##o, i, v}
static tb_launch_config grid_config(const char *types, const tb_grid_rule *g, const tb_config_param *ps, uint32_t np) {
    tb_launch_config c;
    memset(&c, 0, sizeof c);
    c.kernel_hash = "H", c.function_name = "k", c.binary_name = "k.cubin", c.arg_types = types;
    c.num_warps = c.num_ctas = 1;
    c.params = ps, c.param_count = np;
    c.grid = g;
    return c;
}
static tb_result run1(const tb_grid_op *ops, uint32_t n, const tb_arg *a, uint32_t na, const char *types, int64_t *out,
                      tb_error *e) {
    static const tb_grid_op one[] = {OP(CONST, 0, 1)};
    static const tb_config_param ps[] = {{"XBLOCK", 128}, {"R", -3}};
    static const int64_t extra[] = {20, -7};
    tb_grid_rule g;
    tb_launch_config c;
    uint32_t grid[3];
    tb_result r;
    tb_bundle *b;
    tb_launch_record rec;
    g.op_count[0] = n, g.ops[0] = ops;
    g.op_count[1] = g.op_count[2] = 1, g.ops[1] = g.ops[2] = one;
    c = grid_config(types, &g, ps, 2);
    /* a builder refuses what a reader refuses */
    memset(&rec, 0, sizeof rec);
    rec.cache_key = "K", rec.kernel_name = "k", rec.config_count = 1, rec.configs = &c;
    if (tb_bundle_create(NULL, &b, e) != tb_ok) return tb_err_out_of_memory;
    r = tb_bundle_add_launch_record(b, &rec, e);
    tb_bundle_free(b);
    if (r != tb_ok) return r;
    r = tb_grid_compute(&c, a, na, extra, 2, grid, e);
    *out = grid[0];
    return r;
}

/* FORMAT.md [R-grid-program] [R-grid-eval]: Python's integer semantics, CUDA's limits, and every way to fail. */
TEST(test_grid_rule_evaluation) {
    tb_arg a[4];
    int64_t v = 0;
    tb_error e;
    uint32_t grid[3];
    /* cdiv(n, XBLOCK) with n = 1000 and 1024 */
    const tb_grid_op cdiv[] = {OP(ARG, 1, 0), OP(PARAM, 0, 0), OP(CEILDIV, 0, 0)};
    /* Inductor's python form: -((n) // -(128)) */
    const tb_grid_op pyform[] = {OP(ARG, 1, 0), OP(CONST, 0, 128), OP(NEG, 0, 0), OP(FLOORDIV, 0, 0), OP(NEG, 0, 0)};
    const tb_grid_op floors[] = { OP(CONST, 0, -7), OP(CONST, 0, 2), OP(FLOORDIV, 0, 0), OP(CONST, 0, 10),
                                  OP(ADD, 0, 0) };
    const tb_grid_op mods[] = {OP(CONST, 0, -7), OP(CONST, 0, 3), OP(MOD, 0, 0)};  /* 2, Python's sign */
    const tb_grid_op minmax[] = {OP(EXTRA, 0, 0), OP(ARG, 2, 0), OP(MAX, 0, 0), OP(CONST, 0, 40), OP(MIN, 0, 0)};
    const tb_grid_op neg_param[] = {OP(PARAM, 1, 0), OP(NEG, 0, 0), OP(EXTRA, 1, 0), OP(NEG, 0, 0),
                                    OP(MUL, 0, 0), OP(CONST, 0, 1), OP(SUB, 0, 0)};
    const tb_grid_op big[] = {OP(CONST, 0, INT64_MAX), OP(CONST, 0, 1), OP(ADD, 0, 0)};
    const tb_grid_op mulo[] = {OP(CONST, 0, (int64_t)1 << 62), OP(CONST, 0, 4), OP(MUL, 0, 0)};
    const tb_grid_op div0[] = {OP(ARG, 1, 0), OP(CONST, 0, 0), OP(CEILDIV, 0, 0)};
    const tb_grid_op minq[] = {OP(CONST, 0, INT64_MIN), OP(CONST, 0, -1), OP(FLOORDIV, 0, 0)};
    const tb_grid_op toolarge[] = {OP(CONST, 0, (int64_t)1 << 31)};
    const tb_grid_op negative[] = {OP(CONST, 0, -1)};
    const tb_grid_op extra_missing[] = {OP(EXTRA, 5, 0)};
    const tb_grid_op u64[] = {OP(ARG, 3, 0)};
    const tb_grid_op ptr[] = {OP(ARG, 0, 0)};
    const tb_grid_op under[] = {OP(CONST, 0, 1), OP(ADD, 0, 0)};
    const tb_grid_op two_left[] = {OP(CONST, 0, 1), OP(CONST, 0, 1)};
    const tb_grid_op future[] = {OP(CONST, 0, 1), {99, 0, 0}};
    const tb_grid_op stray[] = {{TB_GRID_ADD, 0, 5}};
    a[0] = tb_arg_p(NULL), a[1] = tb_arg_i(1000), a[2] = tb_arg_i(-3), a[3] = tb_arg_u(5);
    CHECK(run1(cdiv, 3, a, 4, "OilK", &v, &e) == tb_ok && v == 8);
    a[1] = tb_arg_i(1024);
    CHECK(run1(cdiv, 3, a, 4, "OilK", &v, &e) == tb_ok && v == 8);
    CHECK(run1(pyform, 5, a, 4, "OilK", &v, &e) == tb_ok && v == 8);
    a[1] = tb_arg_i(1025);
    CHECK(run1(pyform, 5, a, 4, "OilK", &v, &e) == tb_ok && v == 9);
    CHECK(run1(floors, 5, a, 4, "OilK", &v, &e) == tb_ok && v == 6); /* -7 // 2 = -4 */
    CHECK(run1(mods, 3, a, 4, "OilK", &v, &e) == tb_ok && v == 2);
    CHECK(run1(minmax, 5, a, 4, "OilK", &v, &e) == tb_ok && v == 20);
    CHECK(run1(neg_param, 7, a, 4, "OilK", &v, &e) == tb_ok && v == 20); /* -(-3) * -(-7) - 1 */
    /* the argument's value is what the kernel reads: an i32 of 0xffffffff is -1, a u32 4294967295 */
    a[1] = tb_arg_u(0xffffffffu);
    {
        const tb_grid_op neg1[] = {OP(ARG, 1, 0), OP(CONST, 0, 2), OP(ADD, 0, 0)};
        CHECK(run1(neg1, 3, a, 4, "OilK", &v, &e) == tb_ok && v == 1);
        CHECK(run1(neg1, 3, a, 4, "OIlK", &v, &e) == tb_err_arg_range); /* 4294967297 > 2^31 - 1 */
    }
    CHECK(run1(big, 3, a, 4, "OilK", &v, &e) == tb_err_arg_range && strstr(e.message, "overflows"));
    CHECK(run1(mulo, 3, a, 4, "OilK", &v, &e) == tb_err_arg_range);
    CHECK(run1(div0, 3, a, 4, "OilK", &v, &e) == tb_err_arg_range && strstr(e.message, "divides by zero"));
    CHECK(run1(minq, 3, a, 4, "OilK", &v, &e) == tb_err_arg_range);
    CHECK(run1(toolarge, 1, a, 4, "OilK", &v, &e) == tb_err_arg_range && strstr(e.message, "outside"));
    CHECK(run1(negative, 1, a, 4, "OilK", &v, &e) == tb_err_arg_range);
    CHECK(run1(extra_missing, 1, a, 4, "OilK", &v, &e) == tb_err_arg_range && strstr(e.message, "grid_args[5]"));
    a[3] = tb_arg_u(0x8000000000000000ull);
    CHECK(run1(u64, 1, a, 4, "OilK", &v, &e) == tb_err_arg_range);
    /* refused when added, as when read */
    CHECK(run1(ptr, 1, a, 4, "OilK", &v, &e) == tb_err_malformed);
    CHECK(run1(under, 2, a, 4, "OilK", &v, &e) == tb_err_malformed);
    CHECK(run1(two_left, 2, a, 4, "OilK", &v, &e) == tb_err_malformed);
    CHECK(run1(future, 2, a, 4, "OilK", &v, &e) == tb_err_unsupported_version);
    CHECK(run1(stray, 1, a, 4, "OilK", &v, &e) == tb_err_malformed);
    CHECK(run1(cdiv, 0, a, 4, "OilK", &v, &e) == tb_err_malformed);
    {
        tb_grid_op deep[TB_GRID_STACK + 1];
        uint32_t i;
        for (i = 0; i <= TB_GRID_STACK; i++) deep[i].op = TB_GRID_CONST, deep[i].index = 0, deep[i].value = 1;
        CHECK(run1(deep, TB_GRID_STACK + 1, a, 4, "OilK", &v, &e) == tb_err_limit);
    }
    /* a caller's own rule is checked before it runs */
    {
        const tb_grid_op lone_add[] = {OP(ADD, 0, 0)};
        tb_grid_rule g;
        tb_launch_config c;
        g.op_count[0] = g.op_count[1] = g.op_count[2] = 1, g.ops[0] = g.ops[1] = g.ops[2] = lone_add;
        c = grid_config("Oi", &g, NULL, 0);
        CHECK(tb_grid_compute(&c, a, 2, NULL, 0, grid, &e) == tb_err_malformed);
    }
    /* no rule */
    {
        tb_launch_config c = grid_config("Oi", NULL, NULL, 0);
        CHECK(tb_grid_compute(&c, a, 2, NULL, 0, grid, &e) == tb_err_not_found && strstr(e.message, "no grid rule"));
    }
    /* hardening 2.0 (4): CONST's unused index must be zero, like every other unused field */
    {
        const tb_grid_op const_index[] = {{TB_GRID_CONST, 3, 1}};
        CHECK(run1(const_index, 1, a, 4, "OilK", &v, &e) == tb_err_malformed);
    }
    /* (10): CEILDIV is exact wherever the result fits, -2^63 included; only -2^63 / -1 overflows */
    {
        const tb_grid_op min_by_2[] = {OP(CONST, 0, INT64_MIN), OP(CONST, 0, 2), OP(CEILDIV, 0, 0),
                                       OP(CONST, 0, (int64_t)1 << 62), OP(ADD, 0, 0), OP(CONST, 0, 5), OP(ADD, 0, 0)};
        const tb_grid_op min_by_min[] = {OP(CONST, 0, INT64_MIN), OP(CONST, 0, INT64_MIN), OP(CEILDIV, 0, 0)};
        const tb_grid_op min_by_m1[] = {OP(CONST, 0, INT64_MIN), OP(CONST, 0, -1), OP(CEILDIV, 0, 0)};
        static const int64_t pairs[][3] = {{-7, 2, -3}, {7, -2, -3}, {-7, -2, 4}, {7, 2, 4}, {6, 3, 2}, {-6, 3, -2},
                                           {INT64_MAX, INT64_MAX, 1}, {INT64_MAX, 2, ((int64_t)1 << 62)},
                                           {1, INT64_MAX, 1}, {-1, INT64_MAX, 0}, {INT64_MIN + 1, -1, INT64_MAX}};
        size_t i;
        CHECK(run1(min_by_2, 7, a, 4, "OilK", &v, &e) == tb_ok && v == 5);
        CHECK(run1(min_by_min, 3, a, 4, "OilK", &v, &e) == tb_ok && v == 1);
        CHECK(run1(min_by_m1, 3, a, 4, "OilK", &v, &e) == tb_err_arg_range && strstr(e.message, "overflows"));
        for (i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            /* CEILDIV(a, b) - want + 7: 7 when exact */
            const tb_grid_op prog[] = {OP(CONST, 0, pairs[i][0]), OP(CONST, 0, pairs[i][1]), OP(CEILDIV, 0, 0),
                                       OP(CONST, 0, pairs[i][2]), OP(SUB, 0, 0), OP(CONST, 0, 7), OP(ADD, 0, 0)};
            tb_result r = run1(prog, 7, a, 4, "OilK", &v, &e);
            CHECK(r == tb_ok && v == 7);
            if (r != tb_ok || v != 7)
                printf("    ceildiv(%lld, %lld)\n", (long long)pairs[i][0], (long long)pairs[i][1]);
        }
    }
    /* (6): a config with params but no params array is refused, not read through NULL */
    {
        const tb_grid_op pa[] = {OP(PARAM, 0, 0)};
        tb_grid_rule g;
        tb_launch_config c;
        g.op_count[0] = g.op_count[1] = g.op_count[2] = 1, g.ops[0] = g.ops[1] = g.ops[2] = pa;
        c = grid_config("Oi", &g, NULL, 0);
        c.param_count = 1;
        CHECK(tb_grid_compute(&c, a, 2, NULL, 0, grid, &e) == tb_err_invalid_argument &&
              strstr(e.message, "params is NULL"));
    }
    /* (3): a bool reads v != 0, as the kernel gets it */
    {
        const tb_grid_op b0[] = {OP(ARG, 1, 0), OP(CONST, 0, 3), OP(ADD, 0, 0)};
        a[1] = tb_arg_i(256);
        CHECK(run1(b0, 3, a, 4, "O?lK", &v, &e) == tb_ok && v == 4);
        a[1] = tb_arg_i(0);
        CHECK(run1(b0, 3, a, 4, "O?lK", &v, &e) == tb_ok && v == 3);
    }
}

/* Grid rules for records from a bare cache (tbundle pack --grid): the
   expression's names are the kernel's arguments as its IR names them, the
   rule goes to every record of the name (or the one of a cache key), and
   tb_grid_compute then gives the grid. Python syntax errors and unknown
   names are refused with the column. */
TEST(test_grid_rule_from_ir_names) {
    tb_bundle *b = u_fixture_bundle(1);
    tb_error e;
    uint32_t n = 0, i, with = 0, grid[3];
    tb_arg a[4];
    const char *names[] = {"n", "m"};
    tb_config_param ps[1] = {{"XBLOCK", 128}};
    tb_grid_op ops[TB_MAX_GRID_OPS];
    REQUIRE(b);
    CHECK_OK(tb_bundle_add_grid_rule(b, "tb_add=cdiv(n, 1024)", &n, &e), &e);
    CHECK(n == 2); /* both specializations of tb_add */
    for (i = 0; i < tb_bundle_launch_record_count(b); i++) {
        const tb_launch_record *r = tb_bundle_launch_record(b, i);
        if (!r->configs[0].grid) continue;
        with++;
        CHECK(strcmp(r->kernel_name, "tb_add") == 0);
        a[0] = a[1] = a[2] = tb_arg_u(0x1000), a[3] = tb_arg_i(3000);
        CHECK_OK(tb_grid_compute(&r->configs[0], a, 4, NULL, 0, grid, &e), &e);
        CHECK(grid[0] == 3 && grid[1] == 1 && grid[2] == 1);
    }
    CHECK(with == 2);
    /* by cache key: that record alone, y given */
    CHECK_OK(tb_bundle_add_grid_rule(b, "AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ=n // 512 + 1, 2", &n, &e),
             &e);
    CHECK(n == 1);
    CHECK(tb_bundle_add_grid_rule(b, "tb_add=cdiv(n, BLOCK)", &n, &e) == tb_err_parse &&
          strstr(e.message, "column 9") && strstr(e.message, "BLOCK"));
    CHECK(tb_bundle_add_grid_rule(b, "tb_add=cdiv(x_ptr, 4)", &n, &e) == tb_err_malformed); /* a pointer: no integer */
    CHECK(tb_bundle_add_grid_rule(b, "nope=1", &n, &e) == tb_err_not_found && n == 0);
    CHECK(tb_bundle_add_grid_rule(b, "tb_add", &n, &e) == tb_err_parse);
    CHECK(tb_bundle_add_grid_rule(b, "tb_add=1,2,3,4", &n, &e) == tb_err_parse);
    /* the parser alone: names, params, folding, errors with columns */
    CHECK_OK(tb_grid_parse("-(n // -XBLOCK) * (2 + 3)", names, 2, ps, 1, ops, &n, &e), &e);
    CHECK(n == 7 && ops[0].op == TB_GRID_ARG && ops[0].index == 0 && ops[1].op == TB_GRID_PARAM &&
          ops[2].op == TB_GRID_NEG && ops[3].op == TB_GRID_FLOORDIV && ops[4].op == TB_GRID_NEG &&
          ops[5].op == TB_GRID_CONST && ops[5].value == 5 && ops[6].op == TB_GRID_MUL);
    CHECK_OK(tb_grid_parse("meta['XBLOCK'] - -9223372036854775807 - 1", names, 2, ps, 1, ops, &n, &e), &e);
    CHECK(n == 5 && ops[1].value == -INT64_MAX);
    CHECK(tb_grid_parse("n / 2", names, 2, ps, 1, ops, &n, &e) == tb_err_parse && strstr(e.message, "column 3"));
    CHECK(tb_grid_parse("9223372036854775808", names, 2, ps, 1, ops, &n, &e) == tb_err_parse);
    CHECK(tb_grid_parse(
              "(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((1))))))))))))))))))))))))))))))))"
              "))))))))))))))))))))))))))))))))",
              names, 2, ps, 1, ops, &n, &e) == tb_err_parse);
    tb_bundle_free(b);
}

/* The grid language's one table (TB__GRID_OPS): a row per operation, its
   name, its spelling and its arity. */
typedef struct op_row {
    uint32_t code;
    const char *name, *text;
    int arity;
} op_row;
#define OP_ROW(code, name, text, arity) {code, name, text, arity},
static const op_row op_rows[] = {TB__GRID_OPS(OP_ROW)};
#undef OP_ROW
#define OP_ROWS (sizeof op_rows / sizeof op_rows[0])
static const op_row *op_row_of(uint32_t code) {
    size_t i;
    for (i = 0; i < OP_ROWS; i++)
        if (op_rows[i].code == code) return &op_rows[i];
    return NULL;
}
/* The builder's check of a rule whose x is ops (what a reader checks). */
static tb_result add_rule(const tb_grid_op *ops, uint32_t n, tb_error *e) {
    static const tb_grid_op one[] = {OP(CONST, 0, 1)};
    static const tb_config_param ps[] = {{"XBLOCK", 128}};
    tb_grid_rule g;
    tb_launch_config c;
    tb_launch_record rec;
    tb_bundle *b;
    tb_result r;
    g.op_count[0] = n, g.ops[0] = ops, g.op_count[1] = g.op_count[2] = 1, g.ops[1] = g.ops[2] = one;
    c = grid_config("Oil", &g, ps, 1);
    memset(&rec, 0, sizeof rec);
    rec.cache_key = "K", rec.kernel_name = "k", rec.config_count = 1, rec.configs = &c;
    if (tb_bundle_create(NULL, &b, e) != tb_ok) return tb_err_out_of_memory;
    r = tb_bundle_add_launch_record(b, &rec, e);
    tb_bundle_free(b);
    return r;
}

/* Issue 39: one table of the operations. Every row's operation written by
   tb_grid_text parses back to itself with tb_grid_parse (EXTRA and SYM have
   no spelling in an expression: refused there); the checker refuses every
   code the table lacks as a newer version's, and takes each operator's
   arity from the table (one value fewer is too few, one more leaves two),
   in grid rules and in program expressions alike. */
TEST(test_grid_language_table) {
    static const char *const names[] = {"n", "m"};
    static const tb_config_param ps[] = {{"XBLOCK", 128}};
    static const int64_t syms[] = {6};
    size_t i;
    uint32_t code;
    tb_error e;
    CHECK(OP_ROWS == 14 && op_rows[0].code == TB_GRID_CONST && op_rows[OP_ROWS - 1].code == TB_GRID_NEG);
    for (i = 0; i < OP_ROWS; i++) {
        const op_row *row = &op_rows[i];
        tb_grid_op prog[4], back[TB_MAX_GRID_OPS], xs[4];
        uint32_t n = 0, m = 0, k;
        char text[200];
        size_t len;
        int writable = row->code != TB_GRID_EXTRA && row->code != TB_GRID_SYM;
        int64_t v = 0;
        memset(prog, 0, sizeof prog);
        CHECK(row->arity >= 0 && row->arity <= 2 && (row->arity == 0) == (row->code <= TB_GRID_SYM) &&
              (row->arity == 0) == (row->text[0] == 0) && row->name[0]);
        if (row->arity == 0) {
            prog[0].op = row->code, n = 1;
            if (row->code == TB_GRID_CONST) prog[0].value = -42;
            if (row->code == TB_GRID_ARG) prog[0].index = 1;
        } else {
            for (k = 0; k < (uint32_t)row->arity; k++) prog[n].op = TB_GRID_ARG, prog[n++].index = k;
            prog[n++].op = row->code;
        }
        len = tb_grid_text(prog, n, names, 2, ps, 1, text, sizeof text);
        CHECK(len == strlen(text) && len > 0 && strcmp(text, "?") != 0);
        CHECK(row->arity == 0 || strstr(text, row->text)); /* the table's spelling */
        if (writable) {
            tb_result r = tb_grid_parse(text, names, 2, ps, 1, back, &m, &e);
            CHECK(r == tb_ok && m == n && memcmp(back, prog, n * sizeof *prog) == 0);
            if (r != tb_ok || m != n || memcmp(back, prog, n * sizeof *prog) != 0)
                printf("    %s: \"%s\" does not parse back (%s)\n", row->name, text,
                       r ? e.message : "other operations");
        } else {
            CHECK(tb_grid_parse(text, names, 2, ps, 1, back, &m, &e) == tb_err_parse);
        }
        if (row->arity == 0) continue;
        /* the arity the checker enforces: as many values as the table says */
        for (k = 0; k < 4; k++) xs[k].op = TB_GRID_CONST, xs[k].index = 0, xs[k].value = 3;
        xs[row->arity].op = row->code, xs[row->arity].value = 0;
        CHECK(tb_expr_eval(xs, (uint32_t)row->arity + 1, NULL, 0, &v, &e) == tb_ok);
        CHECK(add_rule(xs, (uint32_t)row->arity + 1, &e) == tb_ok);
        xs[row->arity - 1] = xs[row->arity];
        CHECK(tb_expr_eval(xs, (uint32_t)row->arity, NULL, 0, &v, &e) == tb_err_malformed &&
              strstr(e.message, "too few values"));
        CHECK(add_rule(xs, (uint32_t)row->arity, &e) == tb_err_malformed && strstr(e.message, "too few values"));
        for (k = 0; k < 4; k++) xs[k].op = TB_GRID_CONST, xs[k].index = 0, xs[k].value = 3;
        xs[row->arity + 1].op = row->code, xs[row->arity + 1].value = 0;
        CHECK(tb_expr_eval(xs, (uint32_t)row->arity + 2, NULL, 0, &v, &e) == tb_err_malformed &&
              strstr(e.message, "leaves 2 values"));
        CHECK(add_rule(xs, (uint32_t)row->arity + 2, &e) == tb_err_malformed && strstr(e.message, "leaves 2 values"));
    }
    /* a code the table lacks is a newer version's, to both checkers, and "?" to the printer */
    for (code = 0; code < 300; code += code < 40 ? 1 : 97) {
        tb_grid_op xs[2] = {OP(CONST, 0, 1), {0, 0, 0}};
        int64_t v = 0;
        char text[8];
        xs[1].op = code == 299 ? 0xFFFFFFFFu : code;
        if (op_row_of(xs[1].op)) continue;
        CHECK(tb_expr_eval(xs, 2, NULL, 0, &v, &e) == tb_err_unsupported_version && strstr(e.message, "unknown"));
        CHECK(add_rule(xs, 2, &e) == tb_err_unsupported_version && strstr(e.message, "unknown"));
        CHECK(tb_grid_text(xs, 2, NULL, 0, NULL, 0, text, sizeof text) == 1 && !strcmp(text, "?"));
    }
    /* which operands each takes stays the caller's: SYM in a rule, ARG in an expression */
    {
        const tb_grid_op sym[] = {OP(SYM, 0, 0)}, arg[] = {OP(ARG, 1, 0)};
        int64_t v = 0;
        CHECK(add_rule(sym, 1, &e) == tb_err_malformed && strstr(e.message, "SYM (a program's symbol) in a grid rule"));
        CHECK(tb_expr_eval(sym, 1, syms, 1, &v, &e) == tb_ok && v == 6);
        CHECK(tb_expr_eval(arg, 1, syms, 1, &v, &e) == tb_err_malformed && strstr(e.message, "a grid rule's operand"));
        CHECK(add_rule(arg, 1, &e) == tb_ok);
    }
}

/* tb_grid_text: tbundle list's text of a rule, snprintf's contract, the
   names it falls back to, "?" for what does not run, and the text of
   programs tb_grid_parse gave parsing back to them. */
TEST(test_grid_text) {
    static const char *const names[] = {"n", "m", NULL};
    static const tb_config_param ps[] = {{"XBLOCK", 128}, {"R", -3}};
    static const char *const exprs[] = {
        "cdiv(n, 1024)", "n // 512 + 1", "-(-n // 65536) % 3", "cdiv(M, 128) * cdiv(N, 128)",
        "min(n, 5, n*3) - max(n // 2, n % 7)", "ceildiv(n, 3) + -(n)", "1 - 9223372036854775807",
        "-9223372036854775808", "-(-9223372036854775808)", "(n+n)*(n-n)//(n%n)", "min(max(min(n,1),2),3)",
        "meta['XBLOCK'] * R - m", "-(n // -XBLOCK) * (2 + 3)", "n - (m - (n - (m - (n - (m - 1)))))",
        "int(n) + max(m)", "-(-(-(n)))", "cdiv(cdiv(n, m), min(n, cdiv(m, XBLOCK)))"};
    static const char *const abc[] = {"n", "m", "M", "N"};
    tb_grid_op ops[TB_MAX_GRID_OPS], back[TB_MAX_GRID_OPS];
    char text[600], small[5];
    uint32_t n = 0, m = 0, i;
    tb_error e;
    /* as tbundle list prints a rule (tests/test_tbundle.sh) */
    CHECK_OK(tb_grid_parse("-(n // -XBLOCK) * (2 + 3)", names, 2, ps, 2, ops, &n, &e), &e);
    CHECK(tb_grid_text(ops, n, names, 2, ps, 2, text, sizeof text) == 25 && !strcmp(text, "(-((n // -(XBLOCK))) * 5)"));
    CHECK(tb_grid_text(ops, n, NULL, 0, NULL, 0, text, sizeof text) == 28 &&
          !strcmp(text, "(-((arg0 // -(param0))) * 5)"));
    CHECK_OK(tb_grid_parse("min(n, m, 7) + cdiv(n, XBLOCK) % max(m, 2) - 1", names, 2, ps, 2, ops, &n, &e), &e);
    CHECK(tb_grid_text(ops, n, names, 2, ps, 2, text, sizeof text) > 0 &&
          !strcmp(text, "((min(min(n, m), 7) + (cdiv(n, XBLOCK) % max(m, 2))) - 1)"));
    /* snprintf's contract: the full length, cut short, always terminated */
    CHECK(tb_grid_text(ops, n, names, 2, ps, 2, NULL, 0) == strlen(text));
    CHECK(tb_grid_text(ops, n, names, 2, ps, 2, small, sizeof small) == strlen(text) && !strcmp(small, "((mi"));
    small[0] = 'x';
    CHECK(tb_grid_text(ops, n, names, 2, ps, 2, small, 1) == strlen(text) && small[0] == 0);
    /* operands without a name, EXTRA and SYM; an index past the names */
    {
        const tb_grid_op o[] = { OP(ARG, 2, 0),   OP(ARG, 7, 0), OP(ADD, 0, 0), OP(PARAM, 5, 0),
                                 OP(EXTRA, 1, 0), OP(MAX, 0, 0), OP(SYM, 3, 0), OP(CONST, 0, INT64_MIN),
                                 OP(MIN, 0, 0),   OP(SUB, 0, 0), OP(SUB, 0, 0) };
        CHECK(tb_grid_text(o, 11, names, 3, ps, 2, text, sizeof text) > 0 &&
              !strcmp(text, "((arg2 + arg7) - (max(param5, grid_args[1]) - min(sym3, -9223372036854775808)))"));
    }
    /* what does not run is "?" */
    {
        const tb_grid_op under[] = {OP(CONST, 0, 1), OP(ADD, 0, 0)}, two[] = {OP(CONST, 0, 1), OP(CONST, 0, 1)};
        const tb_grid_op stray[] = {OP(CONST, 0, 1), {TB_GRID_NEG, 1, 0}};
        tb_grid_op deep[TB_GRID_STACK * 2 + 1];
        for (i = 0; i <= TB_GRID_STACK; i++) deep[i].op = TB_GRID_CONST, deep[i].index = 0, deep[i].value = i;
        for (i = 0; i < TB_GRID_STACK; i++)
            deep[TB_GRID_STACK + 1 + i].op = TB_GRID_SUB, deep[TB_GRID_STACK + 1 + i].index = 0,
                                     deep[TB_GRID_STACK + 1 + i].value = 0;
        CHECK(tb_grid_text(under, 2, NULL, 0, NULL, 0, text, sizeof text) == 1 && !strcmp(text, "?"));
        CHECK(tb_grid_text(two, 2, NULL, 0, NULL, 0, text, sizeof text) == 1 && !strcmp(text, "?"));
        CHECK(tb_grid_text(stray, 2, NULL, 0, NULL, 0, text, sizeof text) == 1 && !strcmp(text, "?"));
        CHECK(tb_grid_text(two, 0, NULL, 0, NULL, 0, text, sizeof text) == 1 && !strcmp(text, "?"));
        CHECK(tb_grid_text(NULL, 3, NULL, 0, NULL, 0, text, sizeof text) == 1 && !strcmp(text, "?"));
        CHECK(tb_grid_text(deep, TB_GRID_STACK * 2 + 1, NULL, 0, NULL, 0, text, sizeof text) == 1 &&
              !strcmp(text, "?"));
        /* one fewer: the deepest the stack may go, nested on the right */
        CHECK(tb_grid_text(deep + 1, TB_GRID_STACK * 2 - 1, NULL, 0, NULL, 0, text, sizeof text) > 0 &&
              !strncmp(text, "(1 - (2 - (3 - ", 15) && strstr(text, "(15 - 16)))"));
    }
    /* a long program, nested on the left (no recursion there), written whole */
    {
        tb_grid_op chain[TB_MAX_GRID_OPS];
        size_t len;
        chain[0].op = TB_GRID_ARG, chain[0].index = 1, chain[0].value = 0;
        for (i = 1; i + 1 < TB_MAX_GRID_OPS; i += 2) {
            chain[i].op = TB_GRID_CONST, chain[i].index = 0, chain[i].value = 1000000 + i;
            chain[i + 1].op = TB_GRID_MUL, chain[i + 1].index = 0, chain[i + 1].value = 0;
        }
        chain[TB_MAX_GRID_OPS - 1].op = TB_GRID_NEG, chain[TB_MAX_GRID_OPS - 1].index = 0,
                                chain[TB_MAX_GRID_OPS - 1].value = 0;
        len = tb_grid_text(chain, TB_MAX_GRID_OPS, names, 2, ps, 2, NULL, 0);
        CHECK(len > 255 && len < sizeof text &&
              tb_grid_text(chain, TB_MAX_GRID_OPS, names, 2, ps, 2, text, sizeof text) == len && strlen(text) == len &&
              !strncmp(text, "-((((", 5) && strstr(text, "((m * 1000001) * 1000003)") &&
              !strcmp(text + len - 11, "* 1000061))"));
        CHECK(tb_grid_parse(text, names, 2, ps, 2, back, &m, &e) == tb_ok && m == TB_MAX_GRID_OPS &&
              !memcmp(back, chain, sizeof chain));
    }
    /* the limit of the round trip: 40 NEGs, 40 levels as "- - ... n", written as 80 */
    {
        char deep_neg[100];
        memset(deep_neg, '-', 40), strcpy(deep_neg + 40, "n");
        CHECK_OK(tb_grid_parse(deep_neg, names, 2, ps, 2, ops, &n, &e), &e);
        CHECK(n == 41 && tb_grid_text(ops, n, names, 2, ps, 2, text, sizeof text) == 40 * 3 + 1);
        CHECK(tb_grid_parse(text, names, 2, ps, 2, back, &m, &e) == tb_err_parse &&
              strstr(e.message, "nested too deeply"));
    }
    /* round trips: a program tb_grid_parse gave, written and parsed again */
    for (i = 0; i < sizeof exprs / sizeof exprs[0]; i++) {
        tb_result r = tb_grid_parse(exprs[i], abc, 4, ps, 2, ops, &n, &e);
        CHECK_OK(r, &e);
        if (r != tb_ok) continue;
        CHECK(tb_grid_text(ops, n, abc, 4, ps, 2, text, sizeof text) == strlen(text));
        r = tb_grid_parse(text, abc, 4, ps, 2, back, &m, &e);
        CHECK(r == tb_ok && m == n && !memcmp(back, ops, n * sizeof *ops));
        if (r != tb_ok || m != n || memcmp(back, ops, n * sizeof *ops)) printf("    %s -> %s\n", exprs[i], text);
    }
}

/* TB_LAUNCH_GRID_AUTO: by name, the grid comes from the chosen config's
   rule (its PARAM operands resolved at load) and grid_args. */
TEST(test_launch_grid_auto) {
    static const size_t sizes[] = {8, 4};
    static const tb_grid_op gx[] = {{TB_GRID_ARG, 1, 0}, {TB_GRID_PARAM, 0, 0}, {TB_GRID_CEILDIV, 0, 0}};
    static const tb_grid_op gy[] = {{TB_GRID_EXTRA, 0, 0}};
    static const tb_grid_op gz[] = {{TB_GRID_CONST, 0, 1}};
    static const tb_config_param ps[2][1] = {{{"XBLOCK", 128}}, {{"XBLOCK", 1024}}};
    tb_grid_rule g;
    tb_bundle *b = NULL;
    tb_kernel_table *t = NULL;
    tb_error e;
    tb_launch_config c[2];
    tb_launch_record r;
    tb_launch_params p;
    tb_arg a[2];
    int64_t extra[1] = {3};
    unsigned gr[3], block, shared, attrs;
    uint32_t kk;
    NEED_FAKE();
    fake.set_params(sizes, 2);
    memset(&r, 0, sizeof r);
    g.op_count[0] = 3, g.op_count[1] = g.op_count[2] = 1, g.ops[0] = gx, g.ops[1] = gy, g.ops[2] = gz;
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(tb_bundle_add_kernel(b, "H", 0, &kk, &e), &e);
    CHECK_OK(tb_bundle_add_artifact(b, kk, "k.cubin", "cubin", 5, TB_COPY, &e), &e);
    c[0] = config("Oi", ""), c[0].params = ps[0], c[0].param_count = 1, c[0].grid = &g;
    c[1] = config("Oi", ""), c[1].params = ps[1], c[1].param_count = 1, c[1].grid = &g;
    r.kernel_name = "k", r.cache_key = "K", r.config_count = 2, r.configs = c;
    CHECK_OK(tb_bundle_add_launch_record(b, &r, &e), &e);
    c[0].grid = NULL, r.cache_key = "K2", r.kernel_name = "norule", r.config_count = 1;
    CHECK_OK(tb_bundle_add_launch_record(b, &r, &e), &e);
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    memset(&p, 0, sizeof p);
    p.args = a, p.arg_count = 2, p.flags = TB_LAUNCH_GRID_AUTO, p.grid_args = extra, p.grid_arg_count = 1;
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_i(1000);
    CHECK_OK(tb_kernel_table_launch(t, "k", 0, &p, &e), &e);
    fake.grid(gr, &block, &shared, &attrs);
    CHECK(gr[0] == 8 && gr[1] == 3 && gr[2] == 1);
    CHECK_OK(tb_kernel_table_launch(t, "k", 1, &p, &e), &e); /* the other config's XBLOCK */
    fake.grid(gr, &block, &shared, &attrs);
    CHECK(gr[0] == 1 && gr[1] == 3 && gr[2] == 1);
    p.grid_arg_count = 0;
    CHECK(tb_kernel_table_launch(t, "k", 0, &p, &e) == tb_err_arg_range && strstr(e.message, "grid_args[0]"));
    CHECK(tb_kernel_table_launch(t, "norule", 0, &p, &e) == tb_err_not_found && strstr(e.message, "no grid rule"));
    tb_kernel_table_free(t);
    tb_bundle_free(b);
}

/* Hardening 2.0 (3, 5): the launch's grid is tb_grid_compute's, and the
   kernel sees what the grid read. A config's 'i' that the cubin takes as
   a 1-byte bool: the kernel gets v != 0, and a grid rule reading it
   refuses anything but 0 and 1 (tb_grid_compute, reading 'i', would say
   another grid). The fast path of CEILDIV(ARG, PARAM) with a constexpr
   near 2^63 computes what the interpreter does, without overflow (UBSan
   in make sanitize). */
static tb_result auto_launch(const tb_loaded_kernel *k, tb_arg *a, uint32_t n, unsigned flags, unsigned *gr,
                             tb_error *e) {
    tb_launch_params p;
    unsigned block, shared, attrs;
    int before = fake.launches();
    tb_result r;
    memset(&p, 0, sizeof p);
    p.args = a, p.arg_count = n, p.flags = TB_LAUNCH_GRID_AUTO | flags;
    gr[0] = gr[1] = gr[2] = 0; /* an empty grid launches nothing */
    if ((r = tb_launch(k, &p, e)) == tb_ok && fake.launches() != before) fake.grid(gr, &block, &shared, &attrs);
    return r;
}
TEST(test_grid_launch_agrees) {
    static const size_t bool_sizes[] = {8, 1};
    static const size_t int_sizes[] = {8, 8};
    static const tb_grid_op gx[] = {{TB_GRID_ARG, 1, 0}, {TB_GRID_CONST, 0, 2}, {TB_GRID_ADD, 0, 0}};
    static const tb_grid_op one[] = {{TB_GRID_CONST, 0, 1}};
    static const tb_grid_op cd[] = {{TB_GRID_ARG, 1, 0}, {TB_GRID_PARAM, 0, 0}, {TB_GRID_CEILDIV, 0, 0}};
    tb_config_param ps[1] = {{"XBLOCK", INT64_MAX}};
    tb_grid_rule g, gc;
    tb_launch_config c;
    tb_loaded_kernel *k = NULL;
    tb_error e;
    tb_arg a[2];
    unsigned gr[3];
    uint32_t want[3];
    int64_t vals[] = {0, 1, 2, 5, 1000, 1023, 1024, 1025, -1, -5, -1024, -1025, INT64_MAX, INT64_MIN,
                      INT64_MAX - 1, INT64_MIN + 1, (int64_t)1 << 62, ((int64_t)1 << 62) + 1, ((int64_t)1 << 62) - 1};
    /* constexprs: powers of two (the shift) and others (the division) */
    static const int64_t blocks[] = {INT64_MAX, (int64_t)1 << 62, ((int64_t)1 << 62) + 1, 1 << 20, 1025, 1024, 1000,
                                     4, 3, 2, 1};
    size_t i, bi;
    NEED_FAKE();
    g.op_count[0] = 3, g.op_count[1] = g.op_count[2] = 1, g.ops[0] = gx, g.ops[1] = g.ops[2] = one;
    /* 'i' in the config, 1 byte in the cubin */
    c = config("Oi", ""), c.grid = &g;
    CHECK_OK(load(&c, bool_sizes, 2, &k, &e), &e);
    REQUIRE(k);
    a[0] = tb_arg_u(0x1000);
    for (i = 0; i < 2; i++) {
        a[1] = tb_arg_i((int64_t)i);
        CHECK_OK(auto_launch(k, a, 2, 0, gr, &e), &e);
        CHECK_OK(tb_grid_compute(&c, a, 2, NULL, 0, want, &e), &e);
        CHECK(gr[0] == want[0] && gr[0] == i + 2 && param_u8(1) == i);
    }
    a[1] = tb_arg_i(256);
    CHECK(auto_launch(k, a, 2, 0, gr, &e) == tb_err_arg_range && strstr(e.message, "pass 0 or 1"));
    /* without a rule reading it, an unchecked launch passes 256 as true, not as its low byte 0 */
    c.grid = NULL;
    tb_unload(k);
    CHECK_OK(load(&c, bool_sizes, 2, &k, &e), &e);
    CHECK_OK(launch(k, a, 2, 0, &e), &e);
    CHECK(param_u8(1) == 1);
    CHECK(launch(k, a, 2, TB_LAUNCH_CHECKED, &e) == tb_err_arg_range); /* checked mode: 0 or 1 only */
    tb_unload(k);
    /* '?' in the config: the grid and the kernel both read v != 0 */
    c = config("O?", ""), c.grid = &g;
    CHECK_OK(load(&c, bool_sizes, 2, &k, &e), &e);
    a[1] = tb_arg_i(256);
    CHECK_OK(auto_launch(k, a, 2, 0, gr, &e), &e);
    CHECK(gr[0] == 3 && param_u8(1) == 1);
    tb_unload(k);
    /* a bool read by cdiv (the launch's own shapes: a power of two, and
       not) still refuses anything but 0 and 1; cdiv of the next argument
       keeps its fast path */
    for (bi = 0; bi < 2; bi++) {
        static const size_t bool_int_sizes[] = {8, 1, 8};
        static const tb_grid_op cd2[] = {{TB_GRID_ARG, 2, 0}, {TB_GRID_PARAM, 0, 0}, {TB_GRID_CEILDIV, 0, 0}};
        tb_arg b3[3];
        ps[0].value = bi ? 3 : 4;
        gc.op_count[0] = gc.op_count[1] = 3, gc.op_count[2] = 1, gc.ops[0] = cd, gc.ops[1] = cd2, gc.ops[2] = one;
        c = config("Oil", ""), c.grid = &gc, c.params = ps, c.param_count = 1;
        CHECK_OK(load(&c, bool_int_sizes, 3, &k, &e), &e);
        REQUIRE(k);
        b3[0] = tb_arg_u(0x1000), b3[1] = tb_arg_i(256), b3[2] = tb_arg_i(9);
        CHECK(auto_launch(k, b3, 3, 0, gr, &e) == tb_err_arg_range && strstr(e.message, "pass 0 or 1"));
        b3[1] = tb_arg_i(1);
        CHECK_OK(auto_launch(k, b3, 3, 0, gr, &e), &e);
        CHECK(gr[0] == 1 && gr[1] == 3 && param_u8(1) == 1);
        b3[2] = tb_arg_i(13);
        CHECK_OK(auto_launch(k, b3, 3, 0, gr, &e), &e);
        CHECK(gr[1] == (bi ? 5u : 4u));
        tb_unload(k);
    }
    /* CEILDIV's fast paths against tb_grid_compute: a constexpr near 2^63,
       powers of two, others; a 64-bit and a 32-bit argument */
    gc.op_count[0] = 3, gc.op_count[1] = gc.op_count[2] = 1, gc.ops[0] = cd, gc.ops[1] = gc.ops[2] = one;
    for (bi = 0; bi < 2 * sizeof blocks / sizeof blocks[0]; bi++) {
        static const size_t i32_sizes[] = {8, 4};
        int wide = bi % 2 == 0;
        ps[0].value = blocks[bi / 2];
        c = config(wide ? "Ol" : "Oi", ""), c.grid = &gc, c.params = ps, c.param_count = 1;
        CHECK_OK(load(&c, wide ? int_sizes : i32_sizes, 2, &k, &e), &e);
        REQUIRE(k);
        for (i = 0; i < sizeof vals / sizeof vals[0]; i++) {
            tb_result r1, r2;
            a[1] = tb_arg_i(vals[i]);
            r1 = auto_launch(k, a, 2, 0, gr, &e);
            r2 = tb_grid_compute(&c, a, 2, NULL, 0, want, &e);
            CHECK(r1 == r2 && (r1 != tb_ok || gr[0] == want[0]));
        }
        tb_unload(k);
    }
}

/* A record whose configs take different argument counts (nothing refuses
   one in a hostile bundle): a grid rule for it is refused, never parsed
   with names past the first config's (review of 2.1.0: an out-of-bounds
   read); and a rule refused for one record changes no other. */
TEST(test_grid_rule_mismatched_configs) {
    static const char *const names[] = {"n"};
    static tb_call_info ci;
    tb_config_param ps[1] = {{"BLOCK", 64}};
    tb_launch_config c[2];
    tb_launch_record r;
    tb_bundle *b = NULL;
    tb_error e;
    uint32_t n = 9;
    memset(c, 0, sizeof c);
    memset(&r, 0, sizeof r);
    memset(&ci, 0, sizeof ci);
    ci.arg_count = 1, ci.arg_names = names;
    c[0].kernel_hash = "H", c[0].function_name = "k", c[0].binary_name = "k.cubin", c[0].arg_types = "i";
    c[0].num_warps = c[0].num_ctas = 1, c[0].params = ps, c[0].param_count = 1;
    c[1] = c[0], c[1].arg_types = "iii";
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    r.cache_key = "K", r.kernel_name = "k", r.config_count = 2, r.configs = c;
    CHECK_OK(tb_bundle_add_launch_record(b, &r, &e), &e);
    c[1].arg_types = "i";
    r.cache_key = "K2", r.call = &ci;
    CHECK_OK(tb_bundle_add_launch_record(b, &r, &e), &e);
    CHECK(tb_bundle_add_grid_rule(b, "K=cdiv(7, BLOCK)", &n, &e) == tb_err_not_found || e.code != tb_ok);
    CHECK(tb_bundle_add_grid_rule(b, "k=cdiv(n, BLOCK)", &n, &e) != tb_ok && n == 0);
    CHECK(tb_bundle_launch_record(b, 1)->configs[0].grid == NULL); /* K2 fits, and was left alone */
    CHECK_OK(tb_bundle_add_grid_rule(b, "K2=cdiv(n, BLOCK)", &n, &e), &e);
    CHECK(n == 1 && tb_bundle_launch_record(b, 1)->configs[1].grid != NULL);
    tb_bundle_free(b);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
