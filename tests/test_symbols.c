/* Shapes that vary without a GPU (>>symbols): symbols and expressions
   written and read back, bound from a run's inputs, specialized, refused
   where hostile, evaluated as a reference interpreter does, and run
   through the stand-in driver with instances per tuple of values.
   build/test_symbols [name-filter] */
#include "program_util.h"



/* ---- (2.6) symbols and expressions ---- */
/* x f32[n] -> launch (x, b0, n) and (b0, y, n), grids cdiv(n, 2); z =
   {1...} by a memset of n; n in lo..8. The stored fields are the program
   at n = 8. */
typedef struct dprog {
    tb_tensor_spec in[1], out[2];
    tb_program_buffer buf[1];
    tb_operand ops[3][3];
    tb_program_step steps[3];
    tb_program_symbol sym[1];
    tb_grid_op eops[16][4];
    tb_program_expr ex[16];
    tb_program p;
} dprog;
static void dexpr(dprog *q, uint32_t field, uint32_t index, uint32_t sub, int kind) {
    tb_program_expr *x = &q->ex[q->p.expr_count];
    tb_grid_op *o = q->eops[q->p.expr_count++];
    memset(o, 0, 4 * sizeof *o);
    x->field = field, x->index = index, x->sub = sub, x->ops = o;
    o[0].op = TB_GRID_SYM;
    if (kind == 0) x->op_count = 1;                                /* n */
    else if (kind == 1) x->op_count = 3, o[1].op = TB_GRID_CONST, o[1].value = 4, o[2].op = TB_GRID_MUL; /* 4n */
    else x->op_count = 3, o[1].op = TB_GRID_CONST, o[1].value = 2, o[2].op = TB_GRID_CEILDIV;           /* cdiv(n, 2) */
}
static void make_dyn(dprog *q, int64_t lo) {
    uint32_t i;
    memset(q, 0, sizeof *q);
    spec(&q->in[0], "x", TB_DTYPE_FLOAT32, 8);
    spec(&q->out[0], "y", TB_DTYPE_FLOAT32, 8);
    spec(&q->out[1], "z", TB_DTYPE_FLOAT32, 8);
    q->buf[0].size = 32, q->buf[0].first_step = 0, q->buf[0].last_step = 1;
    q->ops[0][0] = op(TB_SPACE_INPUT, 0, 0), q->ops[0][1] = op(TB_SPACE_BUFFER, 0, 0), q->ops[0][2] = op(0, 0, 8);
    q->ops[1][0] = op(TB_SPACE_BUFFER, 0, 0), q->ops[1][1] = op(TB_SPACE_OUTPUT, 0, 0), q->ops[1][2] = op(0, 0, 8);
    q->ops[2][0] = op(TB_SPACE_OUTPUT, 1, 0);
    for (i = 0; i < 3; i++) q->steps[i].operands = q->ops[i];
    for (i = 0; i < 2; i++) {
        q->steps[i].kind = TB_STEP_LAUNCH, q->steps[i].operand_count = 3;
        q->steps[i].grid[0] = 4, q->steps[i].grid[1] = q->steps[i].grid[2] = 1;
    }
    q->steps[2].kind = TB_STEP_MEMSET, q->steps[2].operand_count = 1, q->steps[2].width = 4;
    q->steps[2].value = 0x3f800000u, q->steps[2].count = 8;
    q->sym[0].name = "n", q->sym[0].min = lo, q->sym[0].max = 8, q->sym[0].divisor = 1;
    q->p.input_count = 1, q->p.inputs = q->in, q->p.output_count = 2, q->p.outputs = q->out;
    q->p.buffer_count = 1, q->p.buffers = q->buf, q->p.workspace_size = 256;
    q->p.step_count = 3, q->p.steps = q->steps, q->p.name = "forward";
    q->p.symbol_count = 1, q->p.symbols = q->sym, q->p.exprs = q->ex;
    dexpr(q, TB_FIELD_INPUT_SIZE, 0, 0, 0);
    dexpr(q, TB_FIELD_OUTPUT_SIZE, 0, 0, 0);
    dexpr(q, TB_FIELD_OUTPUT_SIZE, 1, 0, 0);
    dexpr(q, TB_FIELD_BUFFER_SIZE, 0, 0, 1);
    dexpr(q, TB_FIELD_GRID, 0, 0, 2);
    dexpr(q, TB_FIELD_GRID, 1, 0, 2);
    dexpr(q, TB_FIELD_COUNT, 2, 0, 0);
    dexpr(q, TB_FIELD_OPERAND, 0, 2, 0);
    dexpr(q, TB_FIELD_OPERAND, 1, 2, 0);
}

/* The tables are written and read back as they were (section 6, flag bit
   0), and a program at other values is what its expressions give. */
TEST(test_dynamic_roundtrip_and_specialize) {
    dprog q;
    tb_bundle *b, *r;
    tb_program *at5 = NULL;
    const tb_program *p;
    tb_error e;
    size_t n;
    void *buf;
    int64_t v[1] = {5};
    uint32_t i;
    REQUIRE((b = bundle_with_call(1, 1, &e)) != NULL);
    make_dyn(&q, 2);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((buf = write_mem(b, &n, &e)) != NULL);
    if (getenv("TB_DYNAMIC_SEED"))
        CHECK_OK(tb_bundle_write_file(b, getenv("TB_DYNAMIC_SEED"), 0, &e), &e); /* fuzz/make_corpus.sh */
    CHECK(section_at((const unsigned char *)buf, n, 6) != 0 && section_at((const unsigned char *)buf, n, 5) == 0);
    REQUIRE(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e) == tb_ok);
    REQUIRE((p = tb_bundle_program(r)) != NULL);
    CHECK(same_program(p, &q.p));
    CHECK(p->symbol_count == 1 && !strcmp(p->symbols[0].name, "n") && p->symbols[0].min == 2 && p->symbols[0].max == 8);
    CHECK(p->expr_count == q.p.expr_count);
    for (i = 0; i < p->expr_count && i < q.p.expr_count; i++)
        CHECK(p->exprs[i].field == q.ex[i].field && p->exprs[i].index == q.ex[i].index &&
              p->exprs[i].sub == q.ex[i].sub && p->exprs[i].op_count == q.ex[i].op_count &&
              !memcmp(p->exprs[i].ops, q.ex[i].ops, q.ex[i].op_count * sizeof(tb_grid_op)));
    CHECK_OK(tb_program_specialize(r, p, v, &at5, &e), &e);
    REQUIRE(at5 != NULL);
    CHECK(at5->values && at5->values[0] == 5 && at5->expr_count == 0);
    CHECK(at5->inputs[0].shape[0] == 5 && at5->outputs[0].shape[0] == 5 && at5->outputs[1].shape[0] == 5);
    CHECK(at5->buffers[0].size == 20 && at5->buffers[0].offset == 0);
    CHECK(at5->steps[0].grid[0] == 3 && at5->steps[1].grid[0] == 3 && at5->steps[2].count == 5);
    CHECK(at5->steps[0].operands[2].value == 5 && at5->steps[1].operands[2].value == 5);
    CHECK(p->steps[0].operands[2].value == 8); /* the bundle's program is untouched */
    /* a specialized one is not a program to store */
    CHECK(tb_bundle_add_program(r, at5, &e) == tb_err_invalid_argument);
    tb_program_free(at5);
    v[0] = 9;
    CHECK(tb_program_specialize(r, p, v, &at5, &e) == tb_err_shape && at5 == NULL);
    CHECK(strstr(e.message, "symbol \"n\" is 9") != NULL);
    tb_bundle_free(r);
    free(buf);
    tb_bundle_free(b);
}

/* A run's inputs bind the symbols: from the first size that is the
   symbol alone, checked against its range and every other use.
   [R-symbols-run] */
TEST(test_dynamic_bind) {
    dprog q;
    tb_tensor in[1];
    tb_error e;
    int64_t v[1];
    make_dyn(&q, 2);
    memset(in, 0, sizeof in);
    in[0].dtype = TB_DTYPE_FLOAT32, in[0].rank = 1, in[0].shape[0] = 6, in[0].strides[0] = 1;
    CHECK_OK(tb_program_bind(&q.p, in, 1, v, &e), &e);
    CHECK(v[0] == 6);
    in[0].shape[0] = 9;
    CHECK(tb_program_bind(&q.p, in, 1, v, &e) == tb_err_shape);
    CHECK(strstr(e.message, "input \"x\" dimension 0 is 9: symbol \"n\" takes 2..8") != NULL);
    in[0].shape[0] = 1;
    CHECK(tb_program_bind(&q.p, in, 1, v, &e) == tb_err_shape);
    q.sym[0].divisor = 2;
    in[0].shape[0] = 5;
    CHECK(tb_program_bind(&q.p, in, 1, v, &e) == tb_err_shape);
    CHECK(strstr(e.message, "a multiple of 2") != NULL);
    q.sym[0].divisor = 1;
    in[0].rank = 2;
    CHECK(tb_program_bind(&q.p, in, 1, v, &e) == tb_err_arg_mismatch);
    CHECK(tb_program_bind(&q.p, in, 0, v, &e) == tb_err_arg_mismatch);
    /* a second input of size n that disagrees */
    {
        tb_tensor two[2];
        tb_tensor_spec ins[2];
        ins[0] = q.in[0], ins[1] = q.in[0], ins[1].name = "x2";
        q.p.input_count = 2, q.p.inputs = ins;
        memmove(&q.ex[1], &q.ex[0], q.p.expr_count * sizeof q.ex[0]);
        q.p.expr_count++;
        q.ex[1].index = 1; /* input 1, dimension 0: n */
        memset(two, 0, sizeof two);
        two[0].rank = two[1].rank = 1, two[0].shape[0] = 4, two[1].shape[0] = 6;
        CHECK(tb_program_bind(&q.p, two, 2, v, &e) == tb_err_shape);
        CHECK(strstr(e.message, "input \"x2\" dimension 0 is 6, where input \"x\" dimension 0 made symbol \"n\" 4") !=
              NULL);
        two[1].shape[0] = 4;
        CHECK_OK(tb_program_bind(&q.p, two, 2, v, &e), &e);
    }
}

static void make_dyn2(dprog *q) { make_dyn(q, 2); }

/* tb_program_bind on a caller's program that no checker saw: its input
   expressions checked before they run (a symbol it does not have, a stack
   past TB_GRID_STACK, a dimension past the rank), never a read out of
   bounds. */
TEST(test_dynamic_bind_unchecked) {
    dprog q;
    tb_tensor in[1];
    tb_error e;
    int64_t v[1];
    static const tb_grid_op far[1] = {{TB_GRID_SYM, 1000000, 0}};
    tb_grid_op deep[40];
    int i;
    memset(in, 0, sizeof in);
    in[0].rank = 1, in[0].shape[0] = 6;
    make_dyn(&q, 2);
    q.ex[0].ops = far;
    CHECK(tb_program_bind(&q.p, in, 1, v, &e) == tb_err_malformed);
    for (i = 0; i < 40; i++) deep[i].op = TB_GRID_CONST, deep[i].index = 0, deep[i].value = 1;
    make_dyn(&q, 2);
    q.ex[0].ops = deep, q.ex[0].op_count = 40;
    CHECK(tb_program_bind(&q.p, in, 1, v, &e) == tb_err_limit);
    make_dyn(&q, 2);
    q.ex[0].sub = 30;
    CHECK(tb_program_bind(&q.p, in, 1, v, &e) == tb_err_invalid_argument);
    make_dyn(&q, 2);
    q.ex[0].index = 7;
    CHECK(tb_program_bind(&q.p, in, 1, v, &e) == tb_err_invalid_argument);
    make_dyn(&q, 2);
    q.ex[0].field = TB_FIELD_INPUT_STRIDE; /* (sorting aside) no input binds n */
    CHECK(tb_program_bind(&q.p, in, 1, v, &e) == tb_err_malformed);
    /* its symbols checked as a reader checks them before a range or divisor is used (issue 38 #3: SIGFPE) */
    make_dyn(&q, 2);
    q.sym[0].divisor = 0;
    CHECK(tb_program_bind(&q.p, in, 1, v, &e) == tb_err_malformed);
    CHECK(strstr(e.message, "program symbol 0 (n): range 2..8, divisor 0") != NULL);
    make_dyn(&q, 2);
    q.sym[0].divisor = -1, q.sym[0].min = INT64_MIN;
    in[0].shape[0] = INT64_MIN;
    CHECK(tb_program_bind(&q.p, in, 1, v, &e) == tb_err_malformed);
    CHECK(strstr(e.message, "symbol 0 (n)") != NULL);
}

/* Each rule of the tables broken once. [R-symbols] */
TEST(test_dynamic_refusals) {
    tb_bundle *b;
    tb_error e;
    dprog q;
    int i;
    static const tb_grid_op arg[1] = {{TB_GRID_ARG, 0, 0}};
    static const tb_grid_op sym5[1] = {{TB_GRID_SYM, 5, 0}};
    static const tb_grid_op nine[1] = {{TB_GRID_CONST, 0, 9}};
    static const tb_grid_op bad[1] = {{99, 0, 0}};
    static const tb_grid_op nonmono[5] = { { TB_GRID_CONST, 0, 64 },
                                           { TB_GRID_SYM, 0, 0 },
                                           { TB_GRID_CONST, 0, 4 },
                                           { TB_GRID_MUL, 0, 0 },
                                           { TB_GRID_SUB, 0, 0 } }; /* 64 - 4n: 32 at n = 8, more below */
    REQUIRE((b = bundle_with_call(1, 1, &e)) != NULL);
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.sym[0].min = 9);
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.sym[0].divisor = 0);
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.sym[0].divisor = 3);
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.sym[0].max = (int64_t)1 << 31);
    BROKEN_FROM(make_dyn2, tb_err_bad_name, q.sym[0].name = "");
    BROKEN_FROM(make_dyn2, tb_err_limit, q.p.symbol_count = TB_MAX_PROGRAM_SYMBOLS + 1);
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.p.symbol_count = 0);
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.ex[1].field = 9);
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.ex[1].sub = 1);          /* output 0 has rank 1 */
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.ex[2] = q.ex[1]);        /* twice */
    BROKEN_FROM(make_dyn2, tb_err_malformed, {
        tb_program_expr t = q.ex[1];
        q.ex[1] = q.ex[2];
        q.ex[2] = t;
    }); /* unsorted */
    BROKEN_FROM(make_dyn2, tb_err_malformed,
                (q.ex[4].sub = 0, q.ex[4].field = TB_FIELD_COUNT));     /* a launch has no count */
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.steps[0].grid[0] = 3);   /* its expression gives 4 at n = 8 */
    BROKEN_FROM(make_dyn2, tb_err_malformed, (q.ex[6].ops = nine, q.ex[6].op_count = 1));
    BROKEN_FROM(make_dyn2, tb_err_malformed, (q.ex[6].ops = arg, q.ex[6].op_count = 1));
    BROKEN_FROM(make_dyn2, tb_err_malformed, (q.ex[6].ops = sym5, q.ex[6].op_count = 1));
    BROKEN_FROM(make_dyn2, tb_err_unsupported_version, (q.ex[6].ops = bad, q.ex[6].op_count = 1));
    BROKEN_FROM(make_dyn2, tb_err_limit, q.ex[6].op_count = TB_MAX_EXPR_OPS + 1);
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.ex[4].op_count = 2);     /* leaves two values */
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.ex[0].field = TB_FIELD_INPUT_STRIDE); /* n bound by no input */
    BROKEN_FROM(make_dyn2, tb_err_malformed, q.steps[0].grid[0] = 0);   /* 0 where cdiv(8, 2) is 4 */
    /* a buffer that shrinks as n grows: refused where it outgrows the plan */
    {
        tb_program *at = NULL;
        const tb_program *p;
        int64_t v[1] = {8};
        make_dyn(&q, 2);
        q.ex[3].ops = nonmono, q.ex[3].op_count = 5;
        CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
        p = tb_bundle_program(b);
        CHECK_OK(tb_program_specialize(b, p, v, &at, &e), &e);
        tb_program_free(at);
        v[0] = 5;
        CHECK(tb_program_specialize(b, p, v, &at, &e) == tb_err_malformed && !at);
        CHECK(strstr(e.message, "buffer 0 needs 44 bytes at these sizes, and the plan holds 32") != NULL);
    }
    /* SYM is not an operand of a grid rule */
    {
        static const tb_grid_op sx[1] = {{TB_GRID_SYM, 0, 0}};
        static const tb_grid_op one[1] = {{TB_GRID_CONST, 0, 1}};
        tb_grid_rule g;
        g.op_count[0] = g.op_count[1] = g.op_count[2] = 1, g.ops[0] = sx, g.ops[1] = g.ops[2] = one;
        CHECK(tb_bundle_set_grid_rule(b, 0, 0, &g, &e) == tb_err_malformed);
    }
    (void)i;
    tb_bundle_free(b);
}

/* The evaluator against a reference in 128-bit arithmetic: random
   programs of CONST, SYM and every operator; a result outside 64 bits or
   a division by zero refused, every other the exact one. */
__extension__ typedef __int128 tb_i128;
static int ref_eval(const tb_grid_op *o, uint32_t n, const int64_t *v, int64_t *out) {
    tb_i128 st[TB_GRID_STACK + 1], a, b2, r;
    const tb_i128 lo = -(((tb_i128)1) << 63), hi = (((tb_i128)1) << 63) - 1;
    uint32_t sp = 0, i;
    for (i = 0; i < n; i++) {
        if (o[i].op == TB_GRID_CONST) { st[sp++] = o[i].value; continue; }
        if (o[i].op == TB_GRID_SYM) { st[sp++] = v[o[i].index]; continue; }
        if (o[i].op == TB_GRID_NEG) { r = -st[sp - 1]; if (r < lo || r > hi) return 1; st[sp - 1] = r; continue; }
        b2 = st[--sp], a = st[--sp];
        switch (o[i].op) {
        case TB_GRID_ADD: r = a + b2; break;
        case TB_GRID_SUB: r = a - b2; break;
        case TB_GRID_MUL: r = a * b2; break;
        case TB_GRID_MIN: r = a < b2 ? a : b2; break;
        case TB_GRID_MAX: r = a > b2 ? a : b2; break;
        default: {
            tb_i128 q2, m;
            if (b2 == 0) return 1;
            q2 = a / b2, m = a % b2;
            if (m != 0 && ((m < 0) != (b2 < 0))) q2 -= 1, m += b2; /* floor */
            if (o[i].op == TB_GRID_FLOORDIV) r = q2;
            else if (o[i].op == TB_GRID_MOD) { if (q2 < lo || q2 > hi) return 1; r = m; }
            else r = (a / b2) + ((a % b2 != 0) && ((a % b2 < 0) == (b2 < 0)));
        }
        }
        if (r < lo || r > hi) return 1;
        st[sp++] = r;
    }
    *out = (int64_t)st[0];
    return 0;
}
TEST(test_dynamic_eval_reference) {
    static const uint32_t binops[8] = {TB_GRID_ADD, TB_GRID_SUB, TB_GRID_MUL, TB_GRID_FLOORDIV, TB_GRID_CEILDIV,
                                       TB_GRID_MOD, TB_GRID_MIN, TB_GRID_MAX};
    static const int64_t edge[10] = {0, 1, -1, 2, 7, -7, 16, INT64_MAX, INT64_MIN, 1 << 20};
    uint64_t seed = 12345;
    int t, agree = 0, refused = 0;
    tb_error e;
    for (t = 0; t < 200000; t++) {
        tb_grid_op ops[24];
        int64_t v[3], got = 0, want = 0;
        uint32_t n = 0, depth = 0, i, len;
        int rr, cr;
        for (i = 0; i < 3; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            v[i] = (seed >> 40) % 3 ? (int64_t)((seed >> 33) % 1000) - 300 : edge[(seed >> 20) % 10];
        }
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        len = 1 + (uint32_t)((seed >> 33) % 23);
        while (n < len || depth != 1) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            memset(&ops[n], 0, sizeof ops[n]);
            if (n + depth >= 23) { /* close it */
                if (depth >= 2) ops[n].op = binops[(seed >> 33) % 8], depth--;
                else ops[n].op = TB_GRID_NEG;
            } else if (depth < 2 || ((seed >> 33) % 5 < 2 && depth < TB_GRID_STACK)) {
                if ((seed >> 40) % 2) ops[n].op = TB_GRID_SYM, ops[n].index = (uint32_t)((seed >> 45) % 3);
                else
                    ops[n].op = TB_GRID_CONST,
                    ops[n].value = (seed >> 50) % 4 ? (int64_t)((seed >> 20) % 17) - 8 : edge[(seed >> 24) % 10];
                depth++;
            } else if ((seed >> 37) % 9 == 0) {
                ops[n].op = TB_GRID_NEG;
            } else {
                ops[n].op = binops[(seed >> 41) % 8], depth--;
            }
            n++;
            if (n >= 24) break;
        }
        if (depth != 1) continue;
        rr = ref_eval(ops, n, v, &want);
        cr = tb_expr_eval(ops, n, v, 3, &got, &e) != tb_ok;
        if (rr != cr || (!rr && got != want)) {
            printf("    expression %d: reference %s %lld, tb_expr_eval %s %lld\n", t, rr ? "refuses" : "gives",
                   (long long)want, cr ? "refuses" : "gives", (long long)got);
            CHECK(0);
            break;
        }
        agree++, refused += rr;
    }
    CHECK(agree > 150000 && refused > 1000 && refused < agree);
}

/* The runner: one model runs at each size in range, the symbols bound
   from the input, each new size one instance (and with the graph, one
   capture), a size out of range refused before anything runs, a grid of
   0 blocks skipped. */
TEST(test_dynamic_model_run) {
    dprog q;
    tb_bundle *b;
    tb_model *m;
    tb_model_desc d;
    tb_error e;
    float *x = (float *)dev(32), *y = (float *)dev(32), *z = (float *)dev(32);
    tb_tensor in[1], out[2];
    tb_tensor_spec os[2];
    int before, sets, g, n, graph;
    static const size_t sizes[] = {8, 8, 4};
    NEED_FAKE();
    REQUIRE((b = bundle_with_call(1, 1, &e)) != NULL);
    make_dyn(&q, 0);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    for (graph = 0; graph < 2; graph++) {
        memset(&d, 0, sizeof d);
        d.bundle = b, d.flags = graph ? TB_MODEL_GRAPH : 0, d.instance_cache = 2;
        fake.set_params(sizes, 3);
        REQUIRE(tb_model_load(&d, &m, &e) == tb_ok);
        g = fake.graphs_live();
        for (n = 8; n >= 0; n -= 3) { /* 8, 5, 2 */
            unsigned grid[3], blk, sh, at;
            int k;
            in[0] = tb_tensor_for(tb_model_input(m, 0), x);
            in[0].shape[0] = n;
            CHECK_OK(tb_model_output_specs(m, 0, in, 1, os, 2, &e), &e);
            CHECK(os[0].shape[0] == n && os[1].shape[0] == n);
            out[0] = tb_tensor_for(&os[0], y), out[1] = tb_tensor_for(&os[1], z);
            for (k = 0; k < 8; k++) z[k] = 0;
            before = fake.launches();
            CHECK_OK(tb_model_run(m, in, 1, out, 2, STREAM, &e), &e);
            CHECK(fake.launches() == before + 2);
            CHECK(param_i32(2) == n);
            fake.grid(grid, &blk, &sh, &at);
            CHECK(grid[0] == (unsigned)(n + 1) / 2);
            for (k = 0; k < 8; k++) CHECK(z[k] == (k < n ? 1.0f : 0.0f));
        }
        if (graph) CHECK(fake.graphs_live() == g + 4); /* three sizes, two kept: a graph and its instantiation each */
        /* the size last used again: no new instance */
        in[0].shape[0] = 2, out[0].shape[0] = out[1].shape[0] = 2;
        CHECK_OK(tb_model_run(m, in, 1, out, 2, STREAM, &e), &e);
        if (graph) CHECK(fake.graphs_live() == g + 4);
        /* the caller's workspace (several threads may run so): an instance
           of the call's own, at 6 */
        {
            void *ws = dev((size_t)tb_model_workspace_size(m));
            int k;
            in[0].shape[0] = 6, out[0].shape[0] = out[1].shape[0] = 6;
            for (k = 0; k < 8; k++) z[k] = 0;
            before = fake.launches();
            CHECK_OK(tb_model_run_workspace(m, in, 1, out, 2, ws, STREAM, &e), &e);
            CHECK(fake.launches() == before + 2 && param_i32(2) == 6);
            for (k = 0; k < 8; k++) CHECK(z[k] == (k < 6 ? 1.0f : 0.0f));
            if (graph) CHECK(fake.graphs_live() == g + 4); /* the model's instances untouched */
            free(ws);
        }
        /* 0: no launch at all (grids of 0 blocks), and no memset of 0
           elements asked of the driver (as no copy of 0 bytes), whose
           destination may be address 0: z's data is NULL, as a tensor of no
           bytes may have it (issue 38 #11); the graph captures none either */
        in[0].shape[0] = 0, out[0].shape[0] = out[1].shape[0] = 0;
        out[1].data = NULL;
        before = fake.launches(), sets = fake.memsets();
        CHECK_OK(tb_model_run(m, in, 1, out, 2, STREAM, &e), &e);
        CHECK(fake.launches() == before && fake.memsets() == sets);
        out[1].data = z;
        /* out of range, and outputs that disagree: refused, nothing run */
        in[0].shape[0] = 9, out[0].shape[0] = out[1].shape[0] = 9;
        CHECK(tb_model_run(m, in, 1, out, 2, STREAM, &e) == tb_err_shape);
        CHECK(strstr(e.message, "input \"x\" dimension 0 is 9: symbol \"n\" takes 0..8") != NULL);
        in[0].shape[0] = 4, out[0].shape[0] = 4, out[1].shape[0] = 5;
        CHECK(tb_model_run(m, in, 1, out, 2, STREAM, &e) == tb_err_arg_mismatch);
        CHECK(strstr(e.message, "output \"z\"") != NULL);
        CHECK(fake.launches() == before);
        tb_model_free(m);
        if (graph) CHECK(fake.graphs_live() == g);
    }
    tb_bundle_free(b);
    free(x), free(y), free(z);
}

/* make_dyn at n in 4..8 with outputs y [12 - n] and z [2n - 12] (4 each
   at the maximum), z's memset max(2n - 12, 0) elements: at n = 4 z is
   [-4], at n = 6 y is [6], more than at the maximum. */
static void make_dyn_outputs(dprog *q) {
    static const tb_grid_op y[3] = {{TB_GRID_CONST, 0, 12}, {TB_GRID_SYM, 0, 0}, {TB_GRID_SUB, 0, 0}};
    static const tb_grid_op z[7] = { { TB_GRID_SYM, 0, 0 },    { TB_GRID_CONST, 0, 2 }, { TB_GRID_MUL, 0, 0 },
                                     { TB_GRID_CONST, 0, 12 }, { TB_GRID_SUB, 0, 0 },   { TB_GRID_CONST, 0, 0 },
                                     { TB_GRID_MAX, 0, 0 } };
    make_dyn(q, 4);
    q->out[0].shape[0] = q->out[1].shape[0] = 4, q->steps[2].count = 4;
    q->ex[1].ops = y, q->ex[1].op_count = 3;
    q->ex[2].ops = z, q->ex[2].op_count = 5;
    q->ex[6].ops = z, q->ex[6].op_count = 7;
}

/* tb_model_output_specs refuses what a run refuses, with its code, never
   tb_ok with sizes no run takes (issue 38 #7); each refusal at a size
   says the size (#15). */
TEST(test_dynamic_output_specs_refused) {
    dprog q;
    tb_bundle *b;
    tb_model *m;
    tb_model_desc d;
    tb_error e;
    float *x = (float *)dev(32), *y = (float *)dev(32), *z = (float *)dev(32);
    tb_tensor in[1], out[2];
    tb_tensor_spec os[2];
    tb_result r;
    static const size_t sizes[] = {8, 8, 4};
    NEED_FAKE();
    REQUIRE((b = bundle_with_call(1, 1, &e)) != NULL);
    make_dyn_outputs(&q);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    memset(&d, 0, sizeof d);
    d.bundle = b, d.instance_cache = 2;
    fake.set_params(sizes, 3);
    REQUIRE(tb_model_load(&d, &m, &e) == tb_ok);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    CHECK_OK(tb_model_output_specs(m, 0, in, 1, os, 2, &e), &e); /* n = 8 */
    CHECK(os[0].shape[0] == 4 && os[1].shape[0] == 4);
    out[0] = tb_tensor_for(&os[0], y), out[1] = tb_tensor_for(&os[1], z);
    CHECK_OK(tb_model_run(m, in, 1, out, 2, STREAM, &e), &e);
    /* n = 6: y [6], more than at the maximum */
    in[0].shape[0] = 6;
    r = tb_model_output_specs(m, 0, in, 1, os, 2, &e);
    CHECK(r == tb_err_malformed);
    CHECK(strstr(e.message,
                 "program \"forward\": output \"y\" holds more bytes at these sizes than at every maximum [at n=6]") !=
          NULL);
    out[0].shape[0] = 6, out[1].shape[0] = 0;
    CHECK(tb_model_run(m, in, 1, out, 2, STREAM, &e) == r);
    CHECK(strstr(e.message, "[at n=6]") != NULL);
    /* n = 4: z [-4] */
    in[0].shape[0] = 4;
    r = tb_model_output_specs(m, 0, in, 1, os, 2, &e);
    CHECK(r == tb_err_malformed);
    CHECK(strstr(e.message, "output 1 (z): a negative size or stride [program \"forward\" at n=4]") != NULL);
    out[0].shape[0] = 8, out[1].shape[0] = 0;
    CHECK(tb_model_run(m, in, 1, out, 2, STREAM, &e) == r);
    CHECK(strstr(e.message, "at n=4") != NULL);
    /* out of range: tb_err_shape, as before */
    in[0].shape[0] = 9;
    CHECK(tb_model_output_specs(m, 0, in, 1, os, 2, &e) == tb_err_shape);
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(z);
}

/* The messages of tb_program_specialize's refusals at a size (issue 38
   #15): the program, the field an expression gives (a count is not a
   grid rule) and the symbols' values. */
TEST(test_dynamic_specialize_messages) {
    dprog q;
    tb_bundle *b;
    tb_program *at = NULL;
    tb_error e;
    int64_t v[1] = {4};
    /* 4n // (n - 4): 8 at n = 8, a division by zero at 4 */
    static const tb_grid_op div[7] = { { TB_GRID_SYM, 0, 0 },     { TB_GRID_CONST, 0, 4 }, { TB_GRID_MUL, 0, 0 },
                                       { TB_GRID_SYM, 0, 0 },     { TB_GRID_CONST, 0, 4 }, { TB_GRID_SUB, 0, 0 },
                                       { TB_GRID_FLOORDIV, 0, 0 } };
    /* 2n - 12: 4 at n = 8, -4 at 4 */
    static const tb_grid_op neg[5] = { { TB_GRID_SYM, 0, 0 },
                                       { TB_GRID_CONST, 0, 2 },
                                       { TB_GRID_MUL, 0, 0 },
                                       { TB_GRID_CONST, 0, 12 },
                                       { TB_GRID_SUB, 0, 0 } };
    REQUIRE((b = bundle_with_call(1, 1, &e)) != NULL);
    make_dyn(&q, 4);
    q.ex[6].ops = div, q.ex[6].op_count = 7;
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    CHECK(tb_program_specialize(b, tb_bundle_program(b), v, &at, &e) == tb_err_arg_range && !at);
    CHECK(strstr(e.message, "program \"forward\": the count of step 2 (expression 6): operation 6 of the expression "
                            "overflows or divides by zero [at n=4]") != NULL);
    CHECK(strstr(e.message, "grid") == NULL && strstr(e.message, "rule") == NULL);
    make_dyn(&q, 4);
    q.ex[6].ops = neg, q.ex[6].op_count = 5, q.steps[2].count = 4;
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    CHECK(tb_program_specialize(b, tb_bundle_program(b), v, &at, &e) == tb_err_arg_range && !at);
    CHECK(strstr(e.message, "program \"forward\" step 2: a negative count, -4 [at n=4]") != NULL);
    tb_bundle_free(b);
}

/* desc.instance_cache is at most TB_MAX_INSTANCE_CACHE: more is refused
   at the load, naming the field (UINT32_MAX loaded, then every run asked
   for an array of instances of 1.1 TB: issue 38 #12). */
TEST(test_dynamic_instance_cache_limit) {
    dprog q;
    tb_bundle *b;
    tb_model *m = NULL;
    tb_model_desc d;
    tb_error e;
    float *x = (float *)dev(32), *y = (float *)dev(32), *z = (float *)dev(32);
    tb_tensor in[1], out[2];
    tb_tensor_spec os[2];
    static const size_t sizes[] = {8, 8, 4};
    NEED_FAKE();
    REQUIRE((b = bundle_with_call(1, 1, &e)) != NULL);
    make_dyn(&q, 0);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    memset(&d, 0, sizeof d);
    d.bundle = b;
    fake.set_params(sizes, 3);
    d.instance_cache = UINT32_MAX;
    CHECK(tb_model_load(&d, &m, &e) == tb_err_limit && !m && strstr(e.message, "instance_cache"));
    d.instance_cache = TB_MAX_INSTANCE_CACHE + 1;
    CHECK(tb_model_load(&d, &m, &e) == tb_err_limit && !m && strstr(e.message, "TB_MAX_INSTANCE_CACHE"));
    d.instance_cache = TB_MAX_INSTANCE_CACHE;
    CHECK_OK(tb_model_load(&d, &m, &e), &e);
    REQUIRE(m);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    in[0].shape[0] = 5;
    CHECK_OK(tb_model_output_specs(m, 0, in, 1, os, 2, &e), &e);
    out[0] = tb_tensor_for(&os[0], y), out[1] = tb_tensor_for(&os[1], z);
    CHECK_OK(tb_model_run(m, in, 1, out, 2, STREAM, &e), &e);
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(z);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
