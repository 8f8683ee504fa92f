/* The programs' tests' shared part (test_program.c, test_symbols.c,
   test_runner.c, test_upload.c): the header built against the stand-in
   driver (tests/fake_cuda.c) with small upload pieces, a small program
   (make) and its bundle, the helpers that load and run it. Each test
   file includes it once, as its one translation unit. */
#ifndef TB_TEST_PROGRAM_UTIL_H
#define TB_TEST_PROGRAM_UTIL_H
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TB_UPLOAD_PIECE 64 /* pinned uploads in pieces of 64 bytes: the ring of staging buffers turns */
#define TB_UPLOAD_STAGING 768 /* 12 slots of them by default */
#define TB_UPLOAD_PIN_SHARE 4 /* pinned: a quarter of an upload's bytes at most */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "fake_client.h"
#include "util.h"
/* helpers a test file may leave unused */
#define TP_UNUSED __attribute__((unused))

#define STREAM ((void *)(uintptr_t)0x5100)

static TP_UNUSED const float w_data[2] = {1.5f, 2.5f};
static TP_UNUSED const int32_t st_data[1] = {5};

/* The test program's parts, filled by make(); tests change a copy. */
typedef struct prog {
    tb_tensor_spec in[1], out[3];
    tb_program_constant k[2];
    tb_program_buffer buf[2];
    tb_operand ops[6][3];
    tb_program_step steps[6];
    tb_program p;
} prog;

static TP_UNUSED void spec(tb_tensor_spec *t, const char *name, uint32_t dtype, int64_t n) {
    memset(t, 0, sizeof *t);
    t->name = name, t->dtype = dtype, t->rank = 1, t->align = 16, t->shape[0] = n, t->strides[0] = 1;
}
static TP_UNUSED tb_operand op(uint32_t space, uint32_t index, uint64_t value) {
    tb_operand o;
    o.space = space, o.index = index, o.value = value;
    return o;
}

/* One rule broken: the program maker's program with `change` made, which
   tb_bundle_set_program (the reader's checker) must refuse with `code`. */
#define BROKEN_FROM(maker, code, change)                                                      \
    do {                                                                                      \
        maker(&q);                                                                            \
        change;                                                                               \
        i = (int)tb_bundle_set_program(b, &q.p, &e);                                          \
        if (i != (int)(code)) printf("    %s: got %s (%s)\n", #change, tb_result_string((tb_result)i), e.message); \
        CHECK(i == (int)(code));                                                              \
    } while (0)

/* x f32[4] -> launch (x, b0, 4), launch (b0, y, 4); z = {1, 1, w[0], w[1]}
   by a memset and a copy; s = the state st, then st = 7. */
static TP_UNUSED void make(prog *q) {
    uint32_t i;
    memset(q, 0, sizeof *q);
    spec(&q->in[0], "x", TB_DTYPE_FLOAT32, 4);
    spec(&q->out[0], "y", TB_DTYPE_FLOAT32, 4);
    spec(&q->out[1], "z", TB_DTYPE_FLOAT32, 4);
    spec(&q->out[2], "s", TB_DTYPE_INT32, 1);
    q->k[0].name = "w", q->k[0].dtype = TB_DTYPE_FLOAT32, q->k[0].size = 8, q->k[0].data = w_data;
    q->k[1].name = "st", q->k[1].dtype = TB_DTYPE_INT32, q->k[1].size = 4, q->k[1].data = st_data;
    q->k[1].flags = TB_CONSTANT_STATE;
    q->buf[0].offset = 0, q->buf[0].size = 16, q->buf[0].first_step = 0, q->buf[0].last_step = 1;
    q->buf[1].offset = 256, q->buf[1].size = 16, q->buf[1].first_step = 2, q->buf[1].last_step = 2;
    q->ops[0][0] = op(TB_SPACE_INPUT, 0, 0), q->ops[0][1] = op(TB_SPACE_BUFFER, 0, 0), q->ops[0][2] = op(0, 0, 4);
    q->ops[1][0] = op(TB_SPACE_BUFFER, 0, 0), q->ops[1][1] = op(TB_SPACE_OUTPUT, 0, 0), q->ops[1][2] = op(0, 0, 4);
    q->ops[2][0] = op(TB_SPACE_OUTPUT, 1, 0);
    q->ops[3][0] = op(TB_SPACE_OUTPUT, 1, 8), q->ops[3][1] = op(TB_SPACE_CONSTANT, 0, 0);
    q->ops[4][0] = op(TB_SPACE_OUTPUT, 2, 0), q->ops[4][1] = op(TB_SPACE_CONSTANT, 1, 0);
    q->ops[5][0] = op(TB_SPACE_CONSTANT, 1, 0);
    for (i = 0; i < 6; i++) q->steps[i].operands = q->ops[i];
    q->steps[0].kind = q->steps[1].kind = TB_STEP_LAUNCH;
    q->steps[0].operand_count = q->steps[1].operand_count = 3;
    q->steps[0].grid[0] = 2, q->steps[0].grid[1] = q->steps[0].grid[2] = 1;
    q->steps[1].grid[0] = q->steps[1].grid[1] = q->steps[1].grid[2] = 1;
    q->steps[2].kind = TB_STEP_MEMSET, q->steps[2].operand_count = 1, q->steps[2].width = 4;
    q->steps[2].value = 0x3f800000u, q->steps[2].count = 4;
    q->steps[3].kind = TB_STEP_COPY, q->steps[3].operand_count = 2, q->steps[3].count = 8;
    q->steps[4].kind = TB_STEP_COPY, q->steps[4].operand_count = 2, q->steps[4].count = 4;
    q->steps[5].kind = TB_STEP_MEMSET, q->steps[5].operand_count = 1, q->steps[5].width = 4;
    q->steps[5].value = 7, q->steps[5].count = 1;
    q->p.input_count = 1, q->p.inputs = q->in;
    q->p.output_count = 3, q->p.outputs = q->out;
    q->p.constant_count = 2, q->p.constants = q->k;
    q->p.buffer_count = 2, q->p.buffers = q->buf;
    q->p.workspace_size = 512;
    q->p.step_count = 6, q->p.steps = q->steps;
}

static TP_UNUSED const char fake_cubin[16] = "fake cubin";
/* A bundle with kernel H (k.cubin) and its record "rec" (O O i, the two
   pointers 16-byte aligned). */
static TP_UNUSED tb_bundle *bundle_with_record(tb_error *e) {
    tb_bundle *b = NULL;
    tb_launch_config cfg;
    tb_launch_record rec;
    uint32_t ki;
    if (tb_bundle_create(NULL, &b, e) != tb_ok) return NULL;
    memset(&cfg, 0, sizeof cfg);
    memset(&rec, 0, sizeof rec);
    cfg.kernel_hash = "H", cfg.function_name = "k", cfg.binary_name = "k.cubin";
    cfg.arg_types = "OOi", cfg.arg_divisibility = "110", cfg.num_warps = 4, cfg.num_ctas = 1;
    rec.cache_key = "rec", rec.kernel_name = "k", rec.config_count = 1, rec.configs = &cfg;
    if (tb_bundle_add_kernel(b, "H", 0, &ki, e) != tb_ok ||
        tb_bundle_add_artifact(b, ki, "k.cubin", fake_cubin, sizeof fake_cubin, TB_COPY, e) != tb_ok ||
        tb_bundle_add_launch_record(b, &rec, e) != tb_ok) {
        tb_bundle_free(b);
        return NULL;
    }
    return b;
}

static TP_UNUSED void *write_mem(const tb_bundle *b, size_t *n, tb_error *e) {
    void *buf;
    if (tb_bundle_write_memory(b, NULL, 0, n, e) != tb_ok || !(buf = malloc(*n))) return NULL;
    if (tb_bundle_write_memory(b, buf, *n, NULL, e) != tb_ok) {
        free(buf);
        return NULL;
    }
    return buf;
}

static TP_UNUSED int same_program(const tb_program *a, const tb_program *b) {
    uint32_t i;
    if (a->input_count != b->input_count || a->output_count != b->output_count ||
        a->constant_count != b->constant_count || a->buffer_count != b->buffer_count ||
        a->step_count != b->step_count || a->workspace_size != b->workspace_size)
        return 0;
    for (i = 0; i < a->input_count + a->output_count; i++) {
        const tb_tensor_spec *x = i < a->input_count ? &a->inputs[i] : &a->outputs[i - a->input_count];
        const tb_tensor_spec *y = i < b->input_count ? &b->inputs[i] : &b->outputs[i - b->input_count];
        if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->rank != y->rank || x->align != y->align ||
            memcmp(x->shape, y->shape, x->rank * 8) || memcmp(x->strides, y->strides, x->rank * 8))
            return 0;
    }
    for (i = 0; i < a->constant_count; i++)
        if (strcmp(a->constants[i].name, b->constants[i].name) || a->constants[i].size != b->constants[i].size ||
            a->constants[i].flags != b->constants[i].flags || a->constants[i].dtype != b->constants[i].dtype)
            return 0;
    for (i = 0; i < a->buffer_count; i++)
        if (memcmp(&a->buffers[i], &b->buffers[i], sizeof a->buffers[i])) return 0;
    for (i = 0; i < a->step_count; i++) {
        const tb_program_step *x = &a->steps[i], *y = &b->steps[i];
        if (x->kind != y->kind || x->record != y->record || x->config != y->config || memcmp(x->grid, y->grid, 12) ||
            x->width != y->width || x->value != y->value || x->count != y->count ||
            x->operand_count != y->operand_count ||
            memcmp(x->operands, y->operands, x->operand_count * sizeof *x->operands))
            return 0;
    }
    return 1;
}


static TP_UNUSED tb_model *load_model(const tb_bundle *b, unsigned flags, tb_error *e) {
    static const size_t sizes[] = {8, 8, 4};
    tb_model_desc d;
    tb_model *m = NULL;
    memset(&d, 0, sizeof d);
    d.bundle = b, d.flags = flags, d.upload_chunk = 4; /* pieces of 4 bytes: the double buffer turns */
    fake.set_params(sizes, 3);
    if (tb_model_load(&d, &m, e) != tb_ok) return NULL;
    return m;
}

/* aligned host "device" memory for the stand-in driver, which it knows
   the size of (cuMemGetAddressRange) */
static TP_UNUSED void *dev(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 256, n)) return NULL;
    if (fake_ready()) fake.track(p, n);
    return p;
}

/* bundle_with_record, its record told what its arguments are (in_ptr0,
   out_ptr0, xnumel: the kernel writes argument 1, reads 0) and given a
   grid rule, x = cdiv(xnumel, 2), when rule is set; num_ctas as given. */
static TP_UNUSED const char *const call_names[3] = {"in_ptr0", "out_ptr0", "xnumel"};

static TP_UNUSED tb_bundle *bundle_with_call(int rule, uint32_t num_ctas, tb_error *e) {
    static const tb_grid_op x[3] = {{TB_GRID_ARG, 2, 0}, {TB_GRID_CONST, 0, 2}, {TB_GRID_CEILDIV, 0, 0}};
    static const tb_grid_op one[1] = {{TB_GRID_CONST, 0, 1}};
    tb_bundle *b = NULL;
    tb_launch_config cfg;
    tb_launch_record rec;
    tb_call_info ci;
    tb_grid_rule g;
    uint32_t ki;
    if (tb_bundle_create(NULL, &b, e) != tb_ok) return NULL;
    memset(&cfg, 0, sizeof cfg);
    memset(&rec, 0, sizeof rec);
    memset(&ci, 0, sizeof ci);
    cfg.kernel_hash = "H", cfg.function_name = "k", cfg.binary_name = "k.cubin";
    cfg.arg_types = "OOi", cfg.arg_divisibility = "110", cfg.num_warps = 4, cfg.num_ctas = num_ctas;
    g.op_count[0] = 3, g.op_count[1] = g.op_count[2] = 1, g.ops[0] = x, g.ops[1] = g.ops[2] = one;
    if (rule) cfg.grid = &g;
    ci.arg_count = 3, ci.arg_names = call_names;
    rec.cache_key = "rec", rec.kernel_name = "k", rec.config_count = 1, rec.configs = &cfg, rec.call = &ci;
    if (tb_bundle_add_kernel(b, "H", 0, &ki, e) != tb_ok ||
        tb_bundle_add_artifact(b, ki, "k.cubin", fake_cubin, sizeof fake_cubin, TB_COPY, e) != tb_ok ||
        tb_bundle_add_launch_record(b, &rec, e) != tb_ok) {
        tb_bundle_free(b);
        return NULL;
    }
    return b;
}

/* Two programs over shared state, as a prefill and a decode share a KV
   cache: "fill" copies its input into the state kv (and the weight w to
   its output); "step" copies kv to its output, then its input into kv[0].
   Both use w and kv, so the bundle holds each once. */
static TP_UNUSED const float pw_data[4] = {0.5f, 1.5f, 2.5f, 3.5f};

static TP_UNUSED const int32_t kv_data[4] = {7, 7, 7, 7};

typedef struct progs2 {
    tb_tensor_spec ain[1], aout[1], bin[1], bout[1];
    tb_program_constant ak[2], bk[2];
    tb_program_buffer bbuf[1];
    tb_operand aops[2][2], bops[3][2];
    tb_program_step asteps[2], bsteps[3];
    tb_program a, b;
} progs2;

static TP_UNUSED void make2(progs2 *q) {
    uint32_t i;
    memset(q, 0, sizeof *q);
    spec(&q->ain[0], "x", TB_DTYPE_INT32, 4);
    spec(&q->aout[0], "y", TB_DTYPE_FLOAT32, 4);
    spec(&q->bin[0], "t", TB_DTYPE_INT32, 1);
    spec(&q->bout[0], "o", TB_DTYPE_INT32, 4);
    q->ak[0].name = "w", q->ak[0].dtype = TB_DTYPE_FLOAT32, q->ak[0].size = 16, q->ak[0].data = pw_data;
    q->ak[1].name = "kv", q->ak[1].dtype = TB_DTYPE_INT32, q->ak[1].size = 16, q->ak[1].data = kv_data;
    q->ak[1].flags = TB_CONSTANT_STATE | TB_CONSTANT_SHARED;
    q->bk[0] = q->ak[1], q->bk[1] = q->ak[0]; /* the other order: matched by name */
    q->aops[0][0] = op(TB_SPACE_CONSTANT, 1, 0), q->aops[0][1] = op(TB_SPACE_INPUT, 0, 0);
    q->aops[1][0] = op(TB_SPACE_OUTPUT, 0, 0), q->aops[1][1] = op(TB_SPACE_CONSTANT, 0, 0);
    q->bops[0][0] = op(TB_SPACE_BUFFER, 0, 0), q->bops[0][1] = op(TB_SPACE_CONSTANT, 0, 0);
    q->bops[1][0] = op(TB_SPACE_OUTPUT, 0, 0), q->bops[1][1] = op(TB_SPACE_BUFFER, 0, 0);
    q->bops[2][0] = op(TB_SPACE_CONSTANT, 0, 0), q->bops[2][1] = op(TB_SPACE_INPUT, 0, 0);
    for (i = 0; i < 2; i++) {
        q->asteps[i].kind = TB_STEP_COPY, q->asteps[i].operand_count = 2, q->asteps[i].count = 16;
        q->asteps[i].operands = q->aops[i];
    }
    for (i = 0; i < 3; i++) {
        q->bsteps[i].kind = TB_STEP_COPY, q->bsteps[i].operand_count = 2, q->bsteps[i].count = i == 2 ? 4 : 16;
        q->bsteps[i].operands = q->bops[i];
    }
    q->bbuf[0].size = 16, q->bbuf[0].first_step = 0, q->bbuf[0].last_step = 1;
    q->a.name = "fill", q->a.input_count = 1, q->a.inputs = q->ain, q->a.output_count = 1, q->a.outputs = q->aout;
    q->a.constant_count = 2, q->a.constants = q->ak, q->a.step_count = 2, q->a.steps = q->asteps;
    q->b.name = "step", q->b.input_count = 1, q->b.inputs = q->bin, q->b.output_count = 1, q->b.outputs = q->bout;
    q->b.constant_count = 2, q->b.constants = q->bk, q->b.step_count = 3, q->b.steps = q->bsteps;
    q->b.buffer_count = 1, q->b.buffers = q->bbuf, q->b.workspace_size = 4096;
}

static TP_UNUSED tb_bundle *bundle_with_programs(progs2 *q, tb_error *e) {
    tb_bundle *b = bundle_with_record(e);
    if (!b) return NULL;
    make2(q);
    if (tb_bundle_add_program(b, &q->a, e) != tb_ok || tb_bundle_add_program(b, &q->b, e) != tb_ok) {
        tb_bundle_free(b);
        return NULL;
    }
    return b;
}

/* the section's offset in a bundle's bytes, by type */
static TP_UNUSED size_t section_at(const unsigned char *buf, size_t n, uint32_t want) {
    size_t i = 32;
    while (i + 16 < n) {
        uint64_t len;
        uint32_t type = (uint32_t)buf[i] | (uint32_t)buf[i + 1] << 8;
        memcpy(&len, buf + i + 8, 8);
        if (type == want) return i;
        i += 16 + ((len + 7) & ~(uint64_t)7);
    }
    return 0;
}
#endif
