/* Programs (format 2.3, section 5) and the runner without a GPU: a program
   built with tb_bundle_set_program, written and read back (memory and
   mapped file), each of FORMAT.md's section 5 rules broken once and
   refused with its code, every truncation refused, and a model loaded and
   run through the stand-in driver (tests/fake_cuda.c), whose "device"
   memory is host memory: constants uploaded, memset and copy steps done,
   launches given the right pointers, the caller's tensors checked, the
   graph replayed and updated, state kept across runs and reset. Run from
   the repository root after `make build/libfakecuda.so`:
   build/test_program [name-filter] */
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TB_UPLOAD_PIECE 64 /* pinned uploads in pieces of 64 bytes: the ring of staging buffers turns */
#define TB_UPLOAD_STAGING 768 /* 12 slots of them by default */
#define TB_UPLOAD_PIN_SHARE 4 /* pinned: a quarter of an upload's bytes at most */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "fake_client.h"
#include "util.h"

#define STREAM ((void *)(uintptr_t)0x5100)

static const float w_data[2] = {1.5f, 2.5f};
static const int32_t st_data[1] = {5};

/* The test program's parts, filled by make(); tests change a copy. */
typedef struct prog {
    tb_tensor_spec in[1], out[3];
    tb_program_constant k[2];
    tb_program_buffer buf[2];
    tb_operand ops[6][3];
    tb_program_step steps[6];
    tb_program p;
} prog;

static void spec(tb_tensor_spec *t, const char *name, uint32_t dtype, int64_t n) {
    memset(t, 0, sizeof *t);
    t->name = name, t->dtype = dtype, t->rank = 1, t->align = 16, t->shape[0] = n, t->strides[0] = 1;
}
static tb_operand op(uint32_t space, uint32_t index, uint64_t value) {
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
static void make(prog *q) {
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

static const char fake_cubin[16] = "fake cubin";
/* A bundle with kernel H (k.cubin) and its record "rec" (O O i, the two
   pointers 16-byte aligned). */
static tb_bundle *bundle_with_record(tb_error *e) {
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

static void *write_mem(const tb_bundle *b, size_t *n, tb_error *e) {
    void *buf;
    if (tb_bundle_write_memory(b, NULL, 0, n, e) != tb_ok || !(buf = malloc(*n))) return NULL;
    if (tb_bundle_write_memory(b, buf, *n, NULL, e) != tb_ok) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int same_program(const tb_program *a, const tb_program *b) {
    uint32_t i;
    if (a->input_count != b->input_count || a->output_count != b->output_count || a->constant_count != b->constant_count ||
        a->buffer_count != b->buffer_count || a->step_count != b->step_count || a->workspace_size != b->workspace_size)
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
            x->width != y->width || x->value != y->value || x->count != y->count || x->operand_count != y->operand_count ||
            memcmp(x->operands, y->operands, x->operand_count * sizeof *x->operands))
            return 0;
    }
    return 1;
}

/* Written, read back from memory and from a mapped file: the same
   program, the constants' bytes at 64-byte offsets, read through the
   checked path; the file says format 2.3. */
TEST(test_program_round_trip) {
    prog q;
    tb_bundle *b, *r = NULL, *f = NULL, *r2 = NULL;
    tb_error e;
    size_t n = 0;
    void *buf;
    float w[2];
    int32_t s = 0;
    char path[256];
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK(tb_bundle_program(b) == NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE(tb_bundle_program(b) != NULL);
    CHECK(same_program(tb_bundle_program(b), &q.p));
    REQUIRE((buf = write_mem(b, &n, &e)) != NULL);
    CHECK(((unsigned char *)buf)[10] == TB_FORMAT_VERSION_MINOR); /* the writer's minor version */
    CHECK_OK(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e), &e);
    REQUIRE(r && tb_bundle_program(r));
    CHECK(same_program(tb_bundle_program(r), &q.p));
    CHECK(((uintptr_t)tb_bundle_program(r)->constants[0].data - (uintptr_t)buf) % 64 == 0);
    CHECK_OK(tb_program_read_constant(r, 0, 0, w, 8, &e), &e);
    CHECK(w[0] == 1.5f && w[1] == 2.5f);
    CHECK(tb_program_read_constant(r, 0, 4, w, 8, &e) == tb_err_invalid_argument); /* past its end */
    CHECK(tb_program_read_constant(r, 2, 0, w, 1, &e) == tb_err_invalid_argument);
    snprintf(path, sizeof path, "build/test_program.%d.tbundle", (int)getpid());
    CHECK_OK(tb_bundle_write_file(b, path, 0, &e), &e);
    if (getenv("TB_PROGRAM_SEED")) CHECK_OK(tb_bundle_write_file(b, getenv("TB_PROGRAM_SEED"), 0, &e), &e); /* fuzz/make_corpus.sh */
    CHECK_OK(tb_bundle_read_file(path, NULL, 0, &f, &e), &e);
    REQUIRE(f && tb_bundle_program(f));
    CHECK(tb_bundle_format_version(f) == (0x20000u | TB_FORMAT_VERSION_MINOR));
    CHECK(same_program(tb_bundle_program(f), &q.p));
    CHECK_OK(tb_program_read_constant(f, 1, 0, &s, 4, &e), &e);
    CHECK(s == 5);
    /* rewritten from the mapping: the same bytes */
    {
        size_t m = 0;
        void *again = write_mem(f, &m, &e);
        CHECK(again && m == n && !memcmp(again, buf, n));
        free(again);
    }
    /* truncated under the mapping: a clean error, never SIGBUS */
    CHECK(truncate(path, 64) == 0);
    CHECK(tb_program_read_constant(f, 1, 0, &s, 4, &e) == tb_err_io);
    /* a program in a file that says 2.2 or older: refused */
    {
        unsigned char *old = (unsigned char *)malloc(n);
        REQUIRE(old);
        memcpy(old, buf, n);
        old[10] = 2;
        CHECK(tb_bundle_read_memory(old, n, NULL, TB_READ_NO_CHECKSUM, &r2, &e) == tb_err_malformed && !r2);
        CHECK(strstr(e.message, "2.3") != NULL);
        free(old);
    }
    CHECK_OK(tb_bundle_set_program(b, NULL, &e), &e);
    CHECK(tb_bundle_program(b) == NULL);
    tb_bundle_free(f);
    unlink(path);
    tb_bundle_free(r);
    tb_bundle_free(b);
    free(buf);
}

/* One rule of FORMAT.md's section 5 broken at a time: each refused with
   its code by tb_bundle_set_program, which runs the reader's checker. */
TEST(test_program_rules) {
    tb_bundle *b;
    tb_error e;
    prog q;
    int i;
    REQUIRE((b = bundle_with_record(&e)) != NULL);
#define BROKEN(code, change) BROKEN_FROM(make, code, change)
    BROKEN(tb_err_unsupported_type, q.in[0].dtype = 99);
    BROKEN(tb_err_limit, q.in[0].rank = 9);
    BROKEN(tb_err_malformed, q.in[0].align = 24);
    BROKEN(tb_err_malformed, q.in[0].shape[0] = -1);
    BROKEN(tb_err_bad_name, q.out[1].name = "");
    BROKEN(tb_err_malformed, q.out[1].name = "y");                       /* two outputs named y */
    BROKEN(tb_err_malformed, q.k[0].flags = 2);
    BROKEN(tb_err_malformed, q.buf[0].size = 600);                       /* past the workspace */
    BROKEN(tb_err_malformed, q.buf[0].last_step = 6);                    /* past the steps */
    BROKEN(tb_err_malformed, (q.buf[1].offset = 8, q.buf[1].first_step = 1)); /* live together, sharing bytes */
    BROKEN(tb_err_malformed, q.steps[1].record = 1);
    BROKEN(tb_err_malformed, q.steps[1].config = 1);
    BROKEN(tb_err_malformed, q.steps[1].operand_count = 2);
    BROKEN(tb_err_malformed, q.steps[1].grid[1] = 0);
    BROKEN(tb_err_malformed, q.steps[1].grid[1] = 65536);
    BROKEN(tb_err_malformed, q.steps[1].count = 1);                      /* a launch with memset fields */
    BROKEN(tb_err_malformed, q.ops[1][2] = op(TB_SPACE_INPUT, 0, 0));    /* a pointer for an int */
    BROKEN(tb_err_malformed, q.ops[1][0] = op(0, 0, 64));                /* a literal for a pointer */
    BROKEN(tb_err_malformed, q.ops[1][2] = op(0, 0, (uint64_t)1 << 40)); /* does not fit i32 */
    BROKEN(tb_err_malformed, q.ops[1][1] = op(TB_SPACE_OUTPUT, 0, 8));   /* not 16-byte aligned (div 1) */
    BROKEN(tb_err_malformed, q.out[0].align = 4);                        /* the cubin assumes 16 */
    BROKEN(tb_err_malformed, q.ops[1][1] = op(TB_SPACE_OUTPUT, 5, 0));   /* no such output */
    BROKEN(tb_err_malformed, q.ops[1][1] = op(7, 0, 0));                 /* no such space */
    BROKEN(tb_err_malformed, q.ops[1][1] = op(TB_SPACE_OUTPUT, 0, 32));  /* past its extent */
    BROKEN(tb_err_malformed, q.ops[1][0] = op(TB_SPACE_BUFFER, 1, 0));   /* buffer 1 lives at step 2 only */
    BROKEN(tb_err_malformed, q.steps[2].width = 3);
    BROKEN(tb_err_malformed, (q.steps[2].width = 1, q.steps[2].value = 256));
    BROKEN(tb_err_malformed, q.steps[2].count = 5);                      /* 20 bytes into 16 */
    BROKEN(tb_err_malformed, q.steps[2].count = (uint64_t)1 << 62);      /* overflows */
    BROKEN(tb_err_malformed, q.steps[3].count = 9);                      /* past the constant */
    BROKEN(tb_err_malformed, q.ops[3][0] = op(TB_SPACE_CONSTANT, 0, 0)); /* writes a read-only constant */
    BROKEN(tb_err_malformed, q.k[1].flags = 0);                          /* the memset now writes a read-only one */
    BROKEN(tb_err_malformed, (q.ops[3][0] = op(TB_SPACE_OUTPUT, 1, 0), q.ops[3][1] = op(TB_SPACE_OUTPUT, 1, 4))); /* overlap */
    BROKEN(tb_err_malformed, q.steps[4].kind = 4);
    BROKEN(tb_err_malformed, q.steps[4].operand_count = 1);
    /* a size 0: extent 0 whatever the other sizes and strides (FORMAT.md, as the Python reader; issue 38 #6), once
       each size and stride is in 0 .. 2^63 - 1 */
    BROKEN(tb_ok, (q.in[0].rank = 2, q.in[0].shape[0] = (int64_t)1 << 62, q.in[0].strides[0] = (int64_t)1 << 62,
                   q.in[0].shape[1] = 0, q.in[0].strides[1] = 1));
    CHECK(tb_tensor_spec_extent(&q.in[0]) == 0);
    BROKEN(tb_err_malformed, (q.in[0].rank = 2, q.in[0].shape[0] = 0, q.in[0].shape[1] = 2, q.in[0].strides[1] = -1));
    CHECK(tb_tensor_spec_extent(&q.in[0]) == UINT64_MAX);
#undef BROKEN
    make(&q);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    tb_bundle_free(b);
}

/* Is e's message want, byte for byte? */
static int message_is(const tb_error *e, const char *want) {
    if (!strcmp(e->message, want)) return 1;
    printf("    message \"%s\", not \"%s\"\n", e->message, want);
    return 0;
}

/* The step kinds' table (TB__STEP_KINDS) agrees with TB_STEP_* and with
   the checker: its rows are the kinds 1.. in order, with the names
   Python's STEP_NAMES spells; a step of each kind takes the operands its
   row says (-1: one per argument code of the record's config), one more
   or one fewer refused; a memset's or copy's message names it; and a
   number that is no kind (0, one past the last) is refused. */
TEST(test_program_step_kinds) {
    static const struct { uint32_t kind; const char *name; int operands; } rows[] = {
#define ROW(code, name, operands, writes) {code, name, operands},
        TB__STEP_KINDS(ROW)
#undef ROW
    };
    static const char *const names[] = {"launch", "memset", "copy"};
    static const uint32_t no_kind[2] = {0, TB__STEP_KIND_COUNT + 1};
    const uint32_t n = (uint32_t)(sizeof rows / sizeof rows[0]);
    tb_bundle *b;
    tb_error e;
    prog q;
    char msg[256];
    uint32_t k, s, want, wrong[2], i;
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK(n == TB__STEP_KIND_COUNT && n == sizeof names / sizeof names[0]);
    CHECK(TB_STEP_LAUNCH == 1 && TB_STEP_MEMSET == 2 && TB_STEP_COPY == 3);
    CHECK(!tb__step_kind(0) && !tb__step_kind(n + 1) && !tb__step_kind(UINT32_MAX));
    for (k = 0; k < n && k < sizeof names / sizeof names[0]; k++) {
        const tb__step_kind_row *sk = tb__step_kind(rows[k].kind);
        CHECK(rows[k].kind == k + 1 && !strcmp(rows[k].name, names[k]));
        CHECK(sk == &tb__step_kinds[k] && sk->kind == rows[k].kind && sk->operands == rows[k].operands &&
              !strcmp(sk->name, rows[k].name));
        make(&q);
        for (s = 0; s < q.p.step_count && q.steps[s].kind != rows[k].kind; s++) {}
        REQUIRE(s < q.p.step_count); /* make() has a step of every kind */
        want = rows[k].operands >= 0 ? (uint32_t)rows[k].operands : (uint32_t)strlen("OOi"); /* the record's codes */
        CHECK(q.steps[s].operand_count == want);
        CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
        wrong[0] = want - 1, wrong[1] = want + 1;
        for (i = 0; i < 2; i++) {
            make(&q);
            q.steps[s].operand_count = wrong[i];
            snprintf(msg, sizeof msg, "malformed input: program step %u: %u operands, it takes %u [program \"forward\"]", s,
                     wrong[i], want);
            CHECK(tb_bundle_set_program(b, &q.p, &e) == tb_err_malformed && message_is(&e, msg));
        }
        if (rows[k].operands < 0) continue; /* a launch has a record, a config and a grid */
        make(&q);
        q.steps[s].config = 1;
        snprintf(msg, sizeof msg, "malformed input: program step %u: a %s's record, config or grid is not 0 [program \"forward\"]",
                 s, names[k]);
        CHECK(tb_bundle_set_program(b, &q.p, &e) == tb_err_malformed && message_is(&e, msg));
    }
    for (i = 0; i < 2; i++) {
        make(&q);
        q.steps[4].kind = no_kind[i];
        snprintf(msg, sizeof msg, "malformed input: program step 4: kind %u is not a step [program \"forward\"]",
                 no_kind[i]);
        CHECK(tb_bundle_set_program(b, &q.p, &e) == tb_err_malformed && message_is(&e, msg));
    }
    tb_bundle_free(b);
}

/* Every prefix of a program bundle, and every byte of its program
   section changed, read without the checksum: an error or a bundle,
   never a crash (ASan watches); a prefix is always refused. */
TEST(test_program_hostile_bytes) {
    prog q;
    tb_bundle *b, *r;
    tb_error e;
    size_t n = 0, i, start;
    unsigned char *buf;
    int ok = 1, loaded = 0;
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((buf = (unsigned char *)write_mem(b, &n, &e)) != NULL);
    for (i = 0; i < n; i++) {
        r = NULL;
        if (tb_bundle_read_memory(buf, i, NULL, TB_READ_NO_CHECKSUM, &r, &e) == tb_ok) ok = 0;
        tb_bundle_free(r);
    }
    CHECK(ok);
    /* the program section: the last one, before the constants' bytes */
    for (start = 0, i = 32; i + 16 < n;) {
        uint64_t len;
        uint32_t type = (uint32_t)buf[i] | (uint32_t)buf[i + 1] << 8;
        memcpy(&len, buf + i + 8, 8);
        if (type == 5) start = i;
        i += 16 + ((len + 7) & ~(uint64_t)7);
    }
    REQUIRE(start > 0);
    for (i = start; i < n - 8; i++) {
        unsigned v;
        for (v = 1; v < 256; v <<= 2) {
            buf[i] ^= (unsigned char)v;
            r = NULL;
            if (tb_bundle_read_memory(buf, n, NULL, TB_READ_NO_CHECKSUM, &r, &e) == tb_ok) {
                loaded++;
                /* (a changed section type is an unknown optional section: skipped) */
                CHECK(i < start + 16 || tb_bundle_program(r) != NULL);
            } else {
                CHECK(e.message[0] != 0);
            }
            tb_bundle_free(r);
            buf[i] ^= (unsigned char)v;
        }
    }
    CHECK(loaded > 0); /* the constants' bytes are free to change */
    free(buf);
    tb_bundle_free(b);
}

static tb_model *load_model(const tb_bundle *b, unsigned flags, tb_error *e) {
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
static void *dev(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 256, n)) return NULL;
    if (fake_ready()) fake.track(p, n);
    return p;
}

/* The model runs: the launches get the caller's and the workspace's
   pointers, the memset and the copies write the outputs, the state
   persists across runs until reset. */
TEST(test_model_run) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    float *x = (float *)dev(16), *y = (float *)dev(16), *z = (float *)dev(16);
    int32_t *s = (int32_t *)dev(4);
    tb_tensor in[1], out[3];
    int before;
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    CHECK(tb_model_input_count(m) == 1 && tb_model_output_count(m) == 3);
    CHECK(!strcmp(tb_model_output(m, 1)->name, "z") && tb_model_output(m, 3) == NULL);
    CHECK(tb_model_workspace_size(m) >= 512 && tb_model_workspace_size(m) % 256 == 0);
    CHECK(tb_model_constant_bytes(m) == 128 && tb_model_state_count(m) == 1); /* at multiples of 64 */
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    before = fake.launches();
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(fake.launches() == before + 2);
    CHECK((uintptr_t)param_i64(1) == (uintptr_t)y && param_i32(2) == 4); /* the last launch: (b0, y, 4) */
    CHECK(z[0] == 1.0f && z[1] == 1.0f && z[2] == 1.5f && z[3] == 2.5f);
    CHECK(s[0] == 5);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(s[0] == 7); /* the first run set the state */
    CHECK_OK(tb_model_reset_state(m, STREAM, &e), &e);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(s[0] == 5);
    /* the caller's workspace */
    {
        void *ws = dev((size_t)tb_model_workspace_size(m));
        CHECK(tb_model_run_workspace(m, in, 1, out, 3, NULL, STREAM, &e) == tb_err_invalid_argument);
        CHECK_OK(tb_model_run_workspace(m, in, 1, out, 3, ws, STREAM, &e), &e);
        CHECK((uintptr_t)param_i64(0) == (uintptr_t)ws); /* b0 at offset 0 of it */
        free(ws);
    }
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(z), free(s);
}

/* The caller's tensors are checked before anything runs, and a refusal
   names the tensor and what was expected. */
TEST(test_model_refusals) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    tb_model_desc d;
    float *x = (float *)dev(32), *y = (float *)dev(16), *z = (float *)dev(16);
    int32_t *s = (int32_t *)dev(4);
    tb_tensor in[1], out[3], t;
    int before;
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    memset(&d, 0, sizeof d);
    d.bundle = b;
    CHECK(tb_model_load(&d, &m, &e) == tb_err_not_found && !m); /* no program yet */
    CHECK(strstr(e.message, "no program") != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    d.flags = 0x80;
    CHECK(tb_model_load(&d, &m, &e) == tb_err_invalid_argument);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    before = fake.launches();
    CHECK(tb_model_run(m, in, 0, out, 3, STREAM, &e) == tb_err_arg_mismatch);
    t = in[0];
    in[0].dtype = TB_DTYPE_FLOAT16;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_arg_mismatch);
    CHECK(strstr(e.message, "input \"x\"") && strstr(e.message, "expected float32 rank 1 [4]") && strstr(e.message, "got float16"));
    in[0] = t, in[0].shape[0] = 8;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_arg_mismatch);
    in[0] = t, in[0].strides[0] = 2;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_arg_mismatch && strstr(e.message, "strides"));
    in[0] = t, in[0].data = (char *)x + 4;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_misaligned && strstr(e.message, "\"x\""));
    in[0] = t, in[0].data = (void *)(uintptr_t)0xBAD000;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument && strstr(e.message, "device"));
    in[0] = t;
    out[2].data = NULL;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument && strstr(e.message, "\"s\""));
    CHECK(fake.launches() == before); /* nothing ran */
    tb_model_free(m);
    REQUIRE((m = load_model(b, TB_MODEL_GRAPH, &e)) != NULL);
    out[2].data = s;
    CHECK(tb_model_run(m, in, 1, out, 3, NULL, &e) == tb_err_invalid_argument); /* the graph needs a stream */
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(z), free(s);
}

/* With the graph: captured on the first run, replayed after; a program
   whose only input and output users are launches updates those nodes
   when the pointers change; one whose memsets and copies write outputs
   copies through static buffers. */
TEST(test_model_graph) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    float *x = (float *)dev(16), *y = (float *)dev(16), *y2 = (float *)dev(16), *z = (float *)dev(16);
    int32_t *s = (int32_t *)dev(4);
    tb_tensor in[1], out[3];
    int before;
    NEED_FAKE();
    make(&q);
    /* launches only: x -> b0 -> y */
    q.p.output_count = 1, q.p.step_count = 2, q.p.constant_count = 0, q.buf[1].last_step = 1, q.buf[1].first_step = 1;
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, TB_MODEL_GRAPH, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    {   /* tb_model_execute (2.7): TB_RUN_NO_GRAPH runs the steps, even on the
           legacy stream, and captures nothing; an unknown flag is refused */
        tb_run_desc d;
        int graphs = fake.graphs_live();
        memset(&d, 0, sizeof d);
        d.inputs = in, d.input_count = 1, d.outputs = out, d.output_count = 1, d.flags = TB_RUN_NO_GRAPH;
        before = fake.launches();
        CHECK_OK(tb_model_execute(m, &d, &e), &e);
        CHECK(fake.launches() == before + 2 && fake.graphs_live() == graphs);
        d.flags = 6u;
        CHECK(tb_model_execute(m, &d, &e) == tb_err_invalid_argument && strstr(e.message, "unknown bits 0x6"));
        CHECK(tb_model_execute(m, NULL, &e) == tb_err_invalid_argument && strstr(e.message, "desc is NULL"));
        d.flags = 0; /* the graph: it needs a stream */
        CHECK(tb_model_execute(m, &d, &e) == tb_err_invalid_argument && strstr(e.message, "needs a stream"));
        d.program = 1;
        CHECK(tb_model_execute(m, &d, &e) == tb_err_invalid_argument && strstr(e.message, "program 1 does not exist"));
        CHECK(fake.launches() == before + 2 && fake.graphs_live() == graphs); /* nothing more ran */
    }
    before = fake.launches();
    CHECK_OK(tb_model_run(m, in, 1, out, 1, STREAM, &e), &e); /* captured, then replayed */
    CHECK(fake.launches() == before + 2);
    CHECK((uintptr_t)param_i64(1) == (uintptr_t)y);
    out[0].data = y2;
    CHECK_OK(tb_model_run(m, in, 1, out, 1, STREAM, &e), &e); /* the node updated */
    CHECK(fake.launches() == before + 4);
    CHECK((uintptr_t)param_i64(1) == (uintptr_t)y2);
    tb_model_free(m);
    /* the full program: its memset and copies touch outputs, so static buffers */
    make(&q);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, TB_MODEL_GRAPH, &e)) != NULL);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    before = fake.launches();
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(fake.launches() == before + 2);
    CHECK((uintptr_t)param_i64(1) != (uintptr_t)y); /* the static output buffer */
    CHECK(z[0] == 1.0f && z[3] == 2.5f); /* copied out of it */
    tb_model_free(m);
    /* a memset that writes the input: copied back out of its static buffer */
    make(&q);
    q.ops[2][0] = op(TB_SPACE_INPUT, 0, 0);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, TB_MODEL_GRAPH, &e)) != NULL);
    x[0] = x[3] = 9.0f;
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(x[0] == 1.0f && x[3] == 1.0f);
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(y2), free(z), free(s);
}

/* From a mapped file: the constants read with pread in pieces (4 bytes
   here) and uploaded; a file truncated before the load is an I/O error,
   never SIGBUS. */
TEST(test_model_from_file) {
    prog q;
    tb_bundle *b, *f = NULL;
    tb_model *m;
    tb_error e;
    char path[256];
    float *x = (float *)dev(16), *y = (float *)dev(16), *z = (float *)dev(16);
    int32_t *s = (int32_t *)dev(4);
    tb_tensor in[1], out[3];
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    snprintf(path, sizeof path, "build/test_program_file.%d.tbundle", (int)getpid());
    CHECK_OK(tb_bundle_write_file(b, path, 0, &e), &e);
    CHECK_OK(tb_bundle_read_file(path, NULL, 0, &f, &e), &e);
    REQUIRE(f);
    REQUIRE((m = load_model(f, 0, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(z[0] == 1.0f && z[1] == 1.0f && z[2] == 1.5f && z[3] == 2.5f && s[0] == 5);
    tb_model_free(m);
    CHECK(truncate(path, 200) == 0);
    CHECK(load_model(f, 0, &e) == NULL && e.code == tb_err_io);
    tb_bundle_free(f);
    tb_bundle_free(b);
    unlink(path);
    free(x), free(y), free(z), free(s);
}


/* bundle_with_record, its record told what its arguments are (in_ptr0,
   out_ptr0, xnumel: the kernel writes argument 1, reads 0) and given a
   grid rule, x = cdiv(xnumel, 2), when rule is set; num_ctas as given. */
static const char *const call_names[3] = {"in_ptr0", "out_ptr0", "xnumel"};
static tb_bundle *bundle_with_call(int rule, uint32_t num_ctas, tb_error *e) {
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

/* A launch may not write a read-only constant: refused where the record
   says the argument is written (out_ptr0 here), as a memset's or copy's
   destination is [R-program-operands]; taken where it is state, or where
   the record says nothing of what the kernel writes. */
TEST(test_program_launch_writes_constant) {
    tb_bundle *b, *plain;
    tb_error e;
    prog q;
    REQUIRE((b = bundle_with_call(0, 1, &e)) != NULL);
    REQUIRE((plain = bundle_with_record(&e)) != NULL);
    make(&q);
    q.k[0].size = 16, q.k[0].data = "0123456789abcdef";
    q.ops[1][1] = op(TB_SPACE_CONSTANT, 0, 0); /* step 1's out_ptr0: constant w */
    CHECK(tb_bundle_set_program(b, &q.p, &e) == tb_err_malformed);
    CHECK(strstr(e.message, "step 1: argument 1, which the kernel writes, is constant 0") != NULL);
    CHECK_OK(tb_bundle_set_program(plain, &q.p, &e), &e); /* no call info: the kernel's business */
    q.k[0].flags = TB_CONSTANT_STATE;
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    make(&q);
    q.k[0].size = 16, q.k[0].data = "0123456789abcdef";
    q.ops[0][0] = op(TB_SPACE_CONSTANT, 0, 0); /* in_ptr0: read */
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    tb_bundle_free(b);
    tb_bundle_free(plain);
}

/* A launch step's grid, its clusters counted, fits CUDA's launch, and it
   is what its config's grid rule gives for the step's operands
   [R-program-grid]: both checked when the program is set or read, so
   that a program that loads never stops partway through a run. */
TEST(test_program_grid_checks) {
    tb_bundle *b;
    tb_error e;
    prog q;
    REQUIRE((b = bundle_with_call(0, 4, &e)) != NULL); /* 4 blocks a cluster */
    make(&q);
    q.steps[1].grid[0] = 0x7fffffffu; /* fits alone, not times 4 */
    CHECK(tb_bundle_set_program(b, &q.p, &e) == tb_err_malformed && strstr(e.message, "clusters of 4 x 1 x 1"));
    q.steps[1].grid[0] = (1u << 29);
    CHECK(tb_bundle_set_program(b, &q.p, &e) == tb_err_malformed);
    q.steps[1].grid[0] = (1u << 29) - 1;
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    tb_bundle_free(b);
    REQUIRE((b = bundle_with_call(1, 1, &e)) != NULL); /* x = cdiv(xnumel, 2); xnumel 4 */
    make(&q);
    q.steps[1].grid[0] = 2; /* step 0's is 2 */
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    q.steps[1].grid[0] = 1000000;
    CHECK(tb_bundle_set_program(b, &q.p, &e) == tb_err_malformed && strstr(e.message, "grid rule gives 2 x 1 x 1"));
    q.steps[1].grid[0] = 2, q.steps[1].grid[1] = 3;
    CHECK(tb_bundle_set_program(b, &q.p, &e) == tb_err_malformed && strstr(e.message, "program step 1"));
    tb_bundle_free(b);
}

/* A second record with a cache key the bundle has is refused at the door
   (a program's step checked against one record would run another's
   kernel), and writing never sees one. */
TEST(test_bundle_record_key_unique) {
    tb_bundle *b, *r = NULL;
    tb_error e;
    tb_launch_config cfg = config("Oi", "");
    tb_launch_record rec;
    uint32_t i;
    size_t n = 0;
    void *buf;
    char key[32];
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    memset(&rec, 0, sizeof rec);
    rec.cache_key = "rec", rec.kernel_name = "other", rec.config_count = 1, rec.configs = &cfg;
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_invalid_argument && strstr(e.message, "\"rec\" already"));
    CHECK(tb_bundle_launch_record_count(b) == 1);
    for (i = 0; i < 300; i++) { /* the index grows */
        snprintf(key, sizeof key, "key%u", i);
        rec.cache_key = key;
        CHECK_OK(tb_bundle_add_launch_record(b, &rec, &e), &e);
    }
    rec.cache_key = "key123";
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_invalid_argument);
    /* read back, then added to: the index is rebuilt from the read records */
    REQUIRE((buf = write_mem(b, &n, &e)) != NULL);
    CHECK_OK(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e), &e);
    REQUIRE(r);
    CHECK(tb_bundle_add_launch_record(r, &rec, &e) == tb_err_invalid_argument);
    rec.cache_key = "key300";
    CHECK_OK(tb_bundle_add_launch_record(r, &rec, &e), &e);
    CHECK(tb_bundle_launch_record_count(r) == 302);
    tb_bundle_free(r);
    free(buf);
    tb_bundle_free(b);
}

/* A program whose constants lie in a mapped file that was truncated:
   tb_bundle_set_program copies them through the file, so the truncation
   is tb_err_io, never SIGBUS; and a set that fails leaves the bundle's
   programs as they were. */
TEST(test_set_program_from_truncated_file) {
    prog q;
    tb_bundle *b, *f = NULL, *other;
    tb_error e;
    char path[256];
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    REQUIRE((other = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    snprintf(path, sizeof path, "build/test_program_trunc.%d.tbundle", (int)getpid());
    CHECK_OK(tb_bundle_write_file(b, path, 0, &e), &e);
    CHECK_OK(tb_bundle_read_file(path, NULL, 0, &f, &e), &e);
    REQUIRE(f && tb_bundle_program(f));
    CHECK_OK(tb_bundle_set_program(other, tb_bundle_program(f), &e), &e); /* whole: copied */
    CHECK(truncate(path, 100) == 0);
    CHECK(tb_bundle_set_program(other, tb_bundle_program(f), &e) == tb_err_io);
    CHECK(tb_bundle_program(other) && tb_bundle_program(other)->constant_count == 2); /* still the first copy */
    CHECK(tb_bundle_set_program(f, tb_bundle_program(f), &e) == tb_err_io); /* its own program */
    tb_bundle_free(f);
    tb_bundle_free(other);
    tb_bundle_free(b);
    unlink(path);
}

/* Constants copied into a bundle sit at multiples of 64 as addresses,
   whatever the arena held before them. */
TEST(test_program_constants_aligned) {
    prog q;
    tb_bundle *b;
    tb_error e;
    tb_program_constant k[24];
    static char names[24][8];
    static const unsigned char bytes[200] = {1};
    const tb_program *p;
    uint32_t i;
    int ok = 1;
    make(&q);
    for (i = 0; i < 24; i++) {
        snprintf(names[i], sizeof names[i], "c%u", i);
        memset(&k[i], 0, sizeof k[i]);
        k[i].name = names[i], k[i].dtype = TB_DTYPE_UINT8, k[i].size = 1 + 7 * i, k[i].data = bytes;
    }
    q.p.constants = k, q.p.constant_count = 24, q.p.step_count = 2, q.p.output_count = 1;
    q.buf[1].first_step = q.buf[1].last_step = 1;
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((p = tb_bundle_program(b)) != NULL);
    for (i = 0; i < p->constant_count; i++) ok &= (uintptr_t)p->constants[i].data % 64 == 0;
    CHECK(ok);
    tb_bundle_free(b);
}

/* The caller's memory: each tensor inside its allocation, no tensor the
   program writes sharing bytes with another or with the workspace, the
   workspace device memory of the size the model needs. */
TEST(test_model_caller_memory) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    tb_tensor_spec in2[2];
    char *x = (char *)dev(64), *y = (char *)dev(16), *z = (char *)dev(16), *s = (char *)dev(4), *small = (char *)dev(8);
    char *ws;
    tb_tensor in[2], out[3];
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_call(0, 1, &e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    in[0].data = small; /* 8 bytes for 16 */
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument &&
          strstr(e.message, "input \"x\": it needs 16 bytes") && strstr(e.message, "holds 8 of them"));
    in[0].data = x + 48; /* the last 16 of 64: fits, from a thread where no
                            context is current: the checks ask the driver in
                            the model's context, which the run enters first */
    fake.set_current(NULL);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(fake.ctx_depth() == 0); /* what it pushed, popped */
    fake.set_current((void *)0x1000);
    out[0].data = x + 48; /* an output on the input */
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument &&
          strstr(e.message, "share bytes") && strstr(e.message, "input \"x\"") && strstr(e.message, "output \"y\""));
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument); /* still, with the same pointers */
    out[0].data = x + 32; /* beside it */
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    out[2].data = z; /* an output inside another */
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument && strstr(e.message, "output \"s\""));
    out[2].data = s;
    /* the caller's workspace */
    ws = (char *)dev((size_t)tb_model_workspace_size(m));
    CHECK_OK(tb_model_run_workspace(m, in, 1, out, 3, ws, STREAM, &e), &e);
    {   /* the same through tb_model_execute's workspace field */
        tb_run_desc d;
        memset(&d, 0, sizeof d);
        d.inputs = in, d.input_count = 1, d.outputs = out, d.output_count = 3, d.workspace = ws, d.stream = STREAM;
        CHECK_OK(tb_model_execute(m, &d, &e), &e);
        d.workspace = (void *)(uintptr_t)0xBAD000;
        CHECK(tb_model_execute(m, &d, &e) == tb_err_invalid_argument && strstr(e.message, "not memory of CUDA device"));
    }
    fake.set_current(NULL);
    CHECK_OK(tb_model_run_workspace(m, in, 1, out, 3, ws, STREAM, &e), &e);
    CHECK(tb_model_run_workspace(m, in, 1, out, 3, (void *)(uintptr_t)0xBAD000, STREAM, &e) == tb_err_invalid_argument);
    CHECK(fake.ctx_depth() == 0); /* a refused run leaves the context too */
    fake.set_current((void *)0x1000);
    CHECK(tb_model_run_workspace(m, in, 1, out, 3, (void *)(uintptr_t)0xBAD000, STREAM, &e) == tb_err_invalid_argument &&
          strstr(e.message, "not memory of CUDA device"));
    fake.track(ws, 256); /* as if the allocation were smaller */
    CHECK(tb_model_run_workspace(m, in, 1, out, 3, ws, STREAM, &e) == tb_err_invalid_argument &&
          strstr(e.message, "holds 256 of them"));
    fake.track(ws, (size_t)tb_model_workspace_size(m));
    out[1].data = ws + 256; /* an output in the workspace */
    CHECK(tb_model_run_workspace(m, in, 1, out, 3, ws, STREAM, &e) == tb_err_invalid_argument &&
          strstr(e.message, "the \"workspace\""));
    tb_model_free(m);
    /* two inputs the program only reads may share bytes; not one it writes */
    make(&q);
    in2[0] = q.in[0], in2[1] = q.in[0];
    in2[1].name = "x2";
    q.p.inputs = in2, q.p.input_count = 2;
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    in[1] = tb_tensor_for(&in2[1], x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    CHECK_OK(tb_model_run(m, in, 2, out, 3, STREAM, &e), &e);
    tb_model_free(m);
    q.ops[2][0] = op(TB_SPACE_INPUT, 1, 0); /* the memset now writes input x2 */
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    CHECK(tb_model_run(m, in, 2, out, 3, STREAM, &e) == tb_err_invalid_argument && strstr(e.message, "input \"x2\""));
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(z), free(s), free(small), free(ws);
}

/* Messages that say what is wrong: a NULL array with the right count, a
   tensor of rank 9, a flag that needs another, a run that fails partway
   names its step. */
TEST(test_model_messages) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    tb_model_desc d;
    char *x = (char *)dev(16), *y = (char *)dev(16), *z = (char *)dev(16), *s = (char *)dev(4);
    tb_tensor in[1], out[3];
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    memset(&d, 0, sizeof d);
    d.bundle = b, d.flags = TB_MODEL_STATIC_IO;
    CHECK(tb_model_load(&d, &m, &e) == tb_err_invalid_argument && !m && strstr(e.message, "with TB_MODEL_GRAPH"));
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    CHECK(tb_model_run(m, NULL, 1, out, 3, STREAM, &e) == tb_err_invalid_argument &&
          strstr(e.message, "the inputs array is NULL") && strstr(e.message, "takes 1 inputs"));
    CHECK(tb_model_run(m, in, 1, out, 2, STREAM, &e) == tb_err_arg_mismatch &&
          strstr(e.message, "1 input and 2 outputs given; program \"forward\" takes 1 and 3"));
    in[0].rank = 9;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_arg_mismatch && strstr(e.message, "got float32 of rank 9 (over 8)"));
    in[0].rank = 1;
    fake.fail_launches(2, 700); /* step 1 of the program, then none */
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_cuda && strstr(e.message, "[program \"forward\" step 0]"));
    fake.fail_launches(0, 0);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(z), free(s);
}

/* Device memory, copies and streams through the model, in its context:
   what a program with no cuda.h runs a model with. */
TEST(test_model_device_calls) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    void *p = NULL, *p2 = NULL, *stream = NULL;
    char host[33] = "the bytes that go there and back", back[32];
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    CHECK(tb_model_context(m) != NULL && tb_model_device(m) == 0);
    CHECK_OK(tb_model_device_alloc(m, 32, &p, &e), &e);
    CHECK_OK(tb_model_device_alloc(m, 32, &p2, &e), &e);
    REQUIRE(p && p2);
    CHECK_OK(tb_model_stream_create(m, &stream, &e), &e);
    CHECK(stream != NULL);
    CHECK_OK(tb_model_copy_to_device(m, p, host, 32, NULL, &e), &e);
    CHECK_OK(tb_model_copy_on_device(m, p2, p, 32, stream, &e), &e);
    memset(back, 0, sizeof back);
    CHECK_OK(tb_model_copy_to_host(m, back, p2, 32, stream, &e), &e);
    CHECK_OK(tb_model_synchronize(m, stream, &e), &e);
    CHECK_OK(tb_model_synchronize(m, NULL, &e), &e);
    CHECK(!memcmp(back, host, 32));
    CHECK(tb_model_copy_to_host(m, NULL, p2, 4, NULL, &e) == tb_err_invalid_argument);
    CHECK_OK(tb_model_copy_to_host(m, NULL, p2, 0, NULL, &e), &e); /* nothing to copy */
    CHECK(tb_model_device_alloc(NULL, 8, &p, &e) == tb_err_invalid_argument && p == NULL);
    CHECK_OK(tb_model_device_alloc(m, 0, &p, &e), &e);
    CHECK(p == NULL);
    /* from a thread where no context is current: each call enters the
       model's and leaves it, the stack as it was */
    fake.set_current(NULL);
    CHECK_OK(tb_model_device_alloc(m, 16, &p, &e), &e);
    CHECK_OK(tb_model_copy_to_device(m, p, host, 16, stream, &e), &e);
    CHECK_OK(tb_model_synchronize(m, stream, &e), &e);
    tb_model_device_free(m, p);
    CHECK(fake.ctx_depth() == 0);
    fake.set_current((void *)0x1000);
    tb_model_stream_free(m, stream);
    tb_model_device_free(m, p2);
    tb_model_device_free(m, NULL);
    tb_model_free(m);
    CHECK(fake.ctx_depth() == 0);
    tb_bundle_free(b);
}


/* Two programs over shared state, as a prefill and a decode share a KV
   cache: "fill" copies its input into the state kv (and the weight w to
   its output); "step" copies kv to its output, then its input into kv[0].
   Both use w and kv, so the bundle holds each once. */
static const float pw_data[4] = {0.5f, 1.5f, 2.5f, 3.5f};
static const int32_t kv_data[4] = {7, 7, 7, 7};
typedef struct progs2 {
    tb_tensor_spec ain[1], aout[1], bin[1], bout[1];
    tb_program_constant ak[2], bk[2];
    tb_program_buffer bbuf[1];
    tb_operand aops[2][2], bops[3][2];
    tb_program_step asteps[2], bsteps[3];
    tb_program a, b;
} progs2;
static void make2(progs2 *q) {
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
static tb_bundle *bundle_with_programs(progs2 *q, tb_error *e) {
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
static size_t section_at(const unsigned char *buf, size_t n, uint32_t want) {
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

/* Several programs [R-programs]: added, their constants joined by name
   (one w, one kv), written as section 6 and read back from memory and a
   mapped file, found by name; a bundle of one program named "forward"
   still writes section 5. */
TEST(test_programs_round_trip) {
    progs2 q;
    tb_bundle *b, *r = NULL, *f = NULL;
    tb_error e;
    size_t n = 0;
    unsigned char *buf;
    char path[256];
    const tb_program *pa, *pb;
    REQUIRE((b = bundle_with_programs(&q, &e)) != NULL);
    CHECK(tb_bundle_program_count(b) == 2);
    pa = tb_bundle_find_program(b, "fill"), pb = tb_bundle_find_program(b, "step");
    REQUIRE(pa && pb && tb_bundle_find_program(b, "forward") == NULL && tb_bundle_program(b) == pa);
    CHECK(pa->constants == pb->constants && pa->constant_count == 2 && pb->constant_count == 2);
    CHECK(pb->steps[0].operands[1].index == 1 && pb->steps[2].operands[0].index == 1); /* kv: renumbered to the table */
    REQUIRE((buf = (unsigned char *)write_mem(b, &n, &e)) != NULL);
    CHECK(section_at(buf, n, 6) != 0 && section_at(buf, n, 5) == 0);
    CHECK_OK(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e), &e);
    REQUIRE(r && tb_bundle_program_count(r) == 2);
    CHECK(!strcmp(tb_bundle_program_at(r, 0)->name, "fill") && !strcmp(tb_bundle_program_at(r, 1)->name, "step"));
    CHECK(tb_bundle_program_at(r, 2) == NULL);
    CHECK(tb_bundle_program_at(r, 1)->constants[1].flags == (TB_CONSTANT_STATE | TB_CONSTANT_SHARED));
    CHECK(same_program(tb_bundle_program_at(r, 1), pb));
    snprintf(path, sizeof path, "build/test_programs.%d.tbundle", (int)getpid());
    CHECK_OK(tb_bundle_write_file(b, path, 0, &e), &e);
    if (getenv("TB_PROGRAMS_SEED")) CHECK_OK(tb_bundle_write_file(b, getenv("TB_PROGRAMS_SEED"), 0, &e), &e); /* fuzz/make_corpus.sh */
    CHECK_OK(tb_bundle_read_file(path, NULL, 0, &f, &e), &e);
    REQUIRE(f && tb_bundle_program_count(f) == 2);
    CHECK(same_program(tb_bundle_program_at(f, 0), pa));
    {
        int32_t kv[4];
        CHECK_OK(tb_program_read_constant(f, 1, 0, kv, 16, &e), &e);
        CHECK(kv[0] == 7 && kv[3] == 7);
    }
    /* one program named forward: section 5, which 2.3 readers run */
    {
        prog one;
        size_t m = 0;
        unsigned char *b5;
        make(&one);
        CHECK_OK(tb_bundle_set_program(b, &one.p, &e), &e);
        CHECK(tb_bundle_program_count(b) == 1 && !strcmp(tb_bundle_program(b)->name, "forward"));
        REQUIRE((b5 = (unsigned char *)write_mem(b, &m, &e)) != NULL);
        CHECK(section_at(b5, m, 5) != 0 && section_at(b5, m, 6) == 0);
        free(b5);
    }
    tb_bundle_free(f);
    unlink(path);
    tb_bundle_free(r);
    free(buf);
    tb_bundle_free(b);
}

/* What sharing refuses [R-program-sharing], when programs are added and
   when their bytes are read. */
TEST(test_programs_refusals) {
    progs2 q;
    tb_bundle *b, *r = NULL;
    tb_error e;
    size_t n = 0, at, i;
    unsigned char *buf, *m;
    static const float other[4] = {9, 9, 9, 9};
    REQUIRE((b = bundle_with_programs(&q, &e)) != NULL);
    make2(&q);
    CHECK(tb_bundle_add_program(b, &q.b, &e) == tb_err_invalid_argument && strstr(e.message, "named \"step\" already"));
    q.b.name = "step2";
    q.bk[1].data = other; /* w with other bytes */
    CHECK(tb_bundle_add_program(b, &q.b, &e) == tb_err_invalid_argument && strstr(e.message, "other bytes"));
    make2(&q), q.b.name = "step2";
    q.bk[1].dtype = TB_DTYPE_INT32; /* w of another dtype */
    CHECK(tb_bundle_add_program(b, &q.b, &e) == tb_err_invalid_argument && strstr(e.message, "\"w\""));
    make2(&q), q.b.name = "step2";
    q.bk[0].flags = TB_CONSTANT_STATE; /* kv: state, not shared */
    CHECK(tb_bundle_add_program(b, &q.b, &e) == tb_err_invalid_argument && strstr(e.message, "TB_CONSTANT_SHARED"));
    make2(&q), q.b.name = "step2";
    q.bk[0].flags = TB_CONSTANT_SHARED; /* shared, not state */
    CHECK(tb_bundle_add_program(b, &q.b, &e) == tb_err_malformed);
    make2(&q), q.b.name = "step2";
    q.bk[1].name = "kv"; /* twice in one program */
    CHECK(tb_bundle_add_program(b, &q.b, &e) == tb_err_invalid_argument && strstr(e.message, "two constants named \"kv\", both named so"));
    CHECK(tb_bundle_program_count(b) == 2 && tb_bundle_program(b)->constant_count == 2); /* as it was */
    make2(&q), q.b.name = "";
    CHECK(tb_bundle_add_program(b, &q.b, &e) == tb_err_bad_name);
    tb_bundle_free(b);
    /* two programs writing one state constant that is not shared: refused
       when the second is added, and when a file says so */
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    make2(&q);
    q.ak[1].flags = q.bk[0].flags = TB_CONSTANT_STATE;
    CHECK_OK(tb_bundle_add_program(b, &q.a, &e), &e);
    CHECK(tb_bundle_add_program(b, &q.b, &e) == tb_err_invalid_argument);
    tb_bundle_free(b);
    REQUIRE((b = bundle_with_programs(&q, &e)) != NULL);
    REQUIRE((buf = (unsigned char *)write_mem(b, &n, &e)) != NULL);
    REQUIRE((at = section_at(buf, n, 6)) != 0);
    m = (unsigned char *)malloc(n);
    REQUIRE(m);
    /* kv's flags: the second constant's entry (after w's: name "w" in 8 bytes, 24 of fields) */
    memcpy(m, buf, n);
    i = at + 16 + 16 + (4 + 2 + 2) + 24 + (4 + 3 + 1) + 4;
    CHECK(m[i] == 3);
    m[i] = 1;
    CHECK(tb_bundle_read_memory(m, n, NULL, TB_READ_NO_CHECKSUM, &r, &e) == tb_err_malformed && !r &&
          strstr(e.message, "not marked shared"));
    m[i] = 2; /* shared, not state */
    CHECK(tb_bundle_read_memory(m, n, NULL, TB_READ_NO_CHECKSUM, &r, &e) == tb_err_malformed && !r);
    memcpy(m, buf, n);
    m[10] = 3; /* section 6 in a file that says 2.3 */
    CHECK(tb_bundle_read_memory(m, n, NULL, TB_READ_NO_CHECKSUM, &r, &e) == tb_err_malformed && !r && strstr(e.message, "2.4"));
    memcpy(m, buf, n);
    /* the second program's name "step" made "fill" */
    for (i = at; i + 4 < n && memcmp(m + i, "step", 4); i++) {}
    REQUIRE(i + 4 < n);
    memcpy(m + i, "fill", 4);
    CHECK(tb_bundle_read_memory(m, n, NULL, TB_READ_NO_CHECKSUM, &r, &e) == tb_err_malformed && !r && strstr(e.message, "two programs"));
    free(m);
    free(buf);
    tb_bundle_free(b);
}

/* A model of several programs: one upload of the constants, one
   workspace for the largest, state that one program writes and the other
   reads, a program by name or index, each with its own graph, and the
   shared state reset. */
TEST(test_model_programs) {
    progs2 q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    uint32_t fill = 9, step = 9;
    int32_t *x = (int32_t *)dev(16), *o = (int32_t *)dev(16), *t = (int32_t *)dev(4);
    float *y = (float *)dev(16);
    tb_tensor ain, aout, bin, bout;
    int round;
    NEED_FAKE();
    REQUIRE((b = bundle_with_programs(&q, &e)) != NULL);
    for (round = 0; round < 2; round++) {
        REQUIRE((m = load_model(b, round ? TB_MODEL_GRAPH : 0, &e)) != NULL);
        CHECK(tb_model_program_count(m) == 2 && tb_model_program(m, 2) == NULL);
        CHECK_OK(tb_model_find_program(m, "fill", &fill, &e), &e);
        CHECK_OK(tb_model_find_program(m, "step", &step, &e), &e);
        CHECK(fill == 0 && step == 1);
        CHECK(tb_model_find_program(m, "decode", &step, &e) == tb_err_not_found && step == UINT32_MAX &&
              strstr(e.message, "it has 2: \"fill\", \"step\""));
        step = 1;
        CHECK(tb_model_constant_bytes(m) == 128 && tb_model_state_count(m) == 1); /* w and kv, once */
        CHECK(tb_model_workspace_size(m) >= 4096);
        ain = tb_tensor_for(tb_model_program(m, fill)->inputs, x);
        aout = tb_tensor_for(tb_model_program(m, fill)->outputs, y);
        bin = tb_tensor_for(tb_model_program(m, step)->inputs, t);
        bout = tb_tensor_for(tb_model_program(m, step)->outputs, o);
        x[0] = 1, x[1] = 2, x[2] = 3, x[3] = 4, t[0] = 40;
        CHECK_OK(tb_model_run_program(m, step, &bin, 1, &bout, 1, STREAM, &e), &e);
        CHECK(o[0] == 7 && o[3] == 7); /* the state as the bundle has it */
        CHECK_OK(tb_model_run_program(m, fill, &ain, 1, &aout, 1, STREAM, &e), &e);
        CHECK(y[0] == 0.5f && y[3] == 3.5f);
        CHECK_OK(tb_model_run_program(m, step, &bin, 1, &bout, 1, STREAM, &e), &e);
        CHECK(o[0] == 1 && o[1] == 2 && o[3] == 4); /* what fill wrote */
        CHECK_OK(tb_model_run_program(m, step, &bin, 1, &bout, 1, STREAM, &e), &e);
        CHECK(o[0] == 40 && o[1] == 2); /* what step wrote */
        CHECK(tb_model_run_program(m, 2, &bin, 1, &bout, 1, STREAM, &e) == tb_err_invalid_argument &&
              strstr(e.message, "program 2 does not exist"));
        CHECK(tb_model_run_program(m, fill, &bin, 1, &bout, 1, STREAM, &e) == tb_err_arg_mismatch); /* step's tensors */
        CHECK(tb_model_run(m, &ain, 1, &aout, 1, STREAM, &e) == tb_ok); /* program 0 */
        CHECK_OK(tb_model_reset_state(m, STREAM, &e), &e);
        CHECK_OK(tb_model_run_program(m, step, &bin, 1, &bout, 1, STREAM, &e), &e);
        CHECK(o[0] == 7 && o[1] == 7);
        if (!round) {
            void *ws = dev((size_t)tb_model_workspace_size(m));
            CHECK_OK(tb_model_run_program_workspace(m, step, &bin, 1, &bout, 1, ws, STREAM, &e), &e);
            CHECK(o[0] == 40);
            free(ws);
        }
        tb_model_free(m);
    }
    tb_bundle_free(b);
    free(x), free(o), free(t), free(y);
}


/* Properties (2.4): set, replaced, removed, read back; a bundle that has
   any is written as section 6, even with one program named forward, or
   none [R-properties]. */
TEST(test_bundle_properties) {
    prog q;
    tb_bundle *b, *r = NULL;
    tb_error e;
    size_t n = 0;
    unsigned char *buf;
    const char *key = NULL;
    char big[300];
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK(tb_bundle_property(b, "generate.max_seq") == NULL && tb_bundle_property_count(b) == 0);
    CHECK_OK(tb_bundle_set_property(b, "generate.max_seq", "128", &e), &e);
    CHECK_OK(tb_bundle_set_property(b, "note", "", &e), &e);
    CHECK_OK(tb_bundle_set_property(b, "generate.max_seq", "256", &e), &e); /* replaced */
    CHECK(tb_bundle_property_count(b) == 2 && !strcmp(tb_bundle_property(b, "generate.max_seq"), "256"));
    CHECK(!strcmp(tb_bundle_property_at(b, 1, &key), "") && !strcmp(key, "note"));
    CHECK(tb_bundle_set_property(b, "", "x", &e) == tb_err_bad_name);
    memset(big, 'k', sizeof big - 1), big[sizeof big - 1] = 0;
    CHECK(tb_bundle_set_property(b, big, "x", &e) == tb_err_limit);
    /* properties alone */
    REQUIRE((buf = (unsigned char *)write_mem(b, &n, &e)) != NULL);
    CHECK(section_at(buf, n, 6) != 0);
    CHECK_OK(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e), &e);
    REQUIRE(r);
    CHECK(tb_bundle_program_count(r) == 0 && !strcmp(tb_bundle_property(r, "generate.max_seq"), "256") &&
          tb_bundle_property(r, "note") && !*tb_bundle_property(r, "note"));
    tb_bundle_free(r), free(buf), r = NULL;
    /* with one program named forward: section 6 all the same */
    make(&q);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((buf = (unsigned char *)write_mem(b, &n, &e)) != NULL);
    CHECK(section_at(buf, n, 6) != 0 && section_at(buf, n, 5) == 0);
    CHECK_OK(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e), &e);
    REQUIRE(r);
    CHECK(tb_bundle_program_count(r) == 1 && same_program(tb_bundle_program(r), &q.p) && tb_bundle_property_count(r) == 2);
    tb_bundle_free(r), free(buf), r = NULL;
    /* removed: section 5 again */
    CHECK_OK(tb_bundle_set_property(b, "note", NULL, &e), &e);
    CHECK_OK(tb_bundle_set_property(b, "generate.max_seq", NULL, &e), &e);
    CHECK(tb_bundle_property_count(b) == 0);
    REQUIRE((buf = (unsigned char *)write_mem(b, &n, &e)) != NULL);
    CHECK(section_at(buf, n, 5) != 0 && section_at(buf, n, 6) == 0);
    free(buf);
    tb_bundle_free(b);
}

/* ---- weights files (safetensors) and external constants (2.5) ---- */

/* A safetensors file's bytes: header JSON (padded to 8 with spaces, as
   safetensors writes it) and data. */
static unsigned char *st_bytes(const char *json, const void *data, size_t data_n, size_t *n) {
    size_t h = strlen(json), pad = (8 - h % 8) % 8;
    unsigned char *p = (unsigned char *)malloc(8 + h + pad + data_n + 1);
    uint64_t hl = h + pad;
    int i;
    if (!p) return NULL;
    for (i = 0; i < 8; i++) p[i] = (unsigned char)(hl >> (8 * i));
    memcpy(p + 8, json, h);
    memset(p + 8 + h, ' ', pad);
    if (data_n) memcpy(p + 8 + h + pad, data, data_n);
    *n = 8 + h + pad + data_n;
    return p;
}
static int st_write(const char *path, const char *json, const void *data, size_t data_n) {
    size_t n;
    unsigned char *p = st_bytes(json, data, data_n, &n);
    FILE *f = fopen(path, "wb");
    int ok = p && f && fwrite(p, 1, n, f) == n;
    if (f) ok = fclose(f) == 0 && ok;
    free(p);
    return ok;
}

/* zlib's CRC-32, and the header read as safetensors' reader reads it. */
TEST(test_weights_read) {
    static const float w[2] = {1.5f, 2.5f};
    unsigned char d[24];
    const char *json = "{\"__metadata__\": {\"format\": \"pt\"}, \"model.w\": {\"dtype\": \"F32\", \"shape\": [2], "
                       "\"data_offsets\": [0, 8]}, \"b\": {\"shape\": [2, 2], \"data_offsets\": [8, 16], \"dtype\": \"BF16\", "
                       "\"extra\": [1, {\"x\": null}]}, \"i\": {\"dtype\": \"I64\", \"shape\": [], \"data_offsets\": [16, 24]}}";
    size_t n;
    unsigned char *p;
    tb_weights *wt = NULL;
    const tb_weights_tensor *t;
    float got[2];
    uint32_t crc = 0;
    tb_error e;
    CHECK(tb_crc32(0, "123456789", 9) == 0xCBF43926u);
    CHECK(tb_crc32(tb_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u);
    memcpy(d, w, 8);
    memset(d + 8, 7, 16);
    REQUIRE((p = st_bytes(json, d, 24, &n)) != NULL);
    CHECK_OK(tb_weights_open_memory(p, n, NULL, &wt, &e), &e);
    REQUIRE(wt);
    CHECK(tb_weights_count(wt) == 3);
    CHECK(tb_weights_find(wt, "nope") == NULL && tb_weights_find(wt, "__metadata__") == NULL);
    REQUIRE((t = tb_weights_find(wt, "model.w")) != NULL);
    CHECK(t->dtype == TB_DTYPE_FLOAT32 && t->rank == 1 && t->shape[0] == 2 && t->size == 8);
    CHECK(t == tb_weights_at(wt, 0)); /* in the order of the bytes */
    CHECK_OK(tb_weights_read(wt, t, 0, got, 8, &e), &e);
    CHECK(got[0] == 1.5f && got[1] == 2.5f);
    CHECK(tb_weights_read(wt, t, 4, got, 8, &e) == tb_err_invalid_argument);
    CHECK_OK(tb_weights_crc32(wt, t, &crc, &e), &e);
    CHECK(crc == tb_crc32(0, w, 8));
    t = tb_weights_find(wt, "b");
    CHECK(t && t->dtype == TB_DTYPE_BFLOAT16 && t->rank == 2 && t->size == 8);
    t = tb_weights_find(wt, "i");
    CHECK(t && t->dtype == TB_DTYPE_INT64 && t->rank == 0 && t->size == 8);
    tb_weights_free(wt);
    free(p);
}

/* Malformed headers: each refused with its code, never a crash. [R-weights] */
TEST(test_weights_refusals) {
    static const struct {
        const char *json;
        size_t data;
        tb_result code;
    } bad[] = {
        {"[]", 0, tb_err_malformed},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}", 8, tb_err_parse},
        {"{\"a\": {\"dtype\": \"F31\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, tb_err_unsupported_type},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, tb_err_malformed},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 12, tb_err_malformed}, /* a tail */
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4, tb_err_truncated},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"b\": {\"dtype\": \"U8\", \"shape\": [4], "
         "\"data_offsets\": [4, 8]}}", 8, tb_err_malformed}, /* overlap */
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12, tb_err_malformed}, /* a hole */
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"a\": {\"dtype\": \"F32\", \"shape\": [0], "
         "\"data_offsets\": [8, 8]}}", 8, tb_err_malformed}, /* a name twice */
        {"{\"\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, tb_err_bad_name},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,2], \"data_offsets\": [0, 8]}}", 8, tb_err_limit},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2,], \"data_offsets\": [0, 8]}}", 8, tb_err_parse},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8, tb_err_parse},
        {"{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 8]}}", 8, tb_err_malformed},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8, 9]}}", 8, tb_err_malformed},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 8]}}", 8, tb_err_malformed},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [02], \"data_offsets\": [0, 8]}}", 8, tb_err_parse},    /* a leading zero */
        {"{\"__metadata__\": {\"x\": 1.e+}, \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, tb_err_parse},
        {"{\"a\": {\"dtype\": \"F32\", \"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, tb_err_malformed},
        {"{\"__metadata__\": {}, \"__metadata__\": {}}", 0, tb_err_malformed},
        {"{\"a\\ud83d\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, tb_err_parse}, /* a lone surrogate */
        {"{\"a\xff\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, tb_err_parse},   /* not UTF-8 */
        {"", 0, tb_err_parse},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}} x", 8, tb_err_malformed},
        {"{\"a\": 5}", 0, tb_err_malformed},
    };
    unsigned char zeros[16] = {0}, *p;
    size_t i, n, k;
    int ok = 1;
    tb_weights *w;
    tb_error e;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tb_result r;
        w = NULL;
        REQUIRE((p = st_bytes(bad[i].json, zeros, bad[i].data, &n)) != NULL);
        r = tb_weights_open_memory(p, n, NULL, &w, &e);
        if (r != bad[i].code || !strstr(e.message, "safetensors")) printf("    case %zu: got %s (%s)\n", i, tb_result_string(r), e.message);
        CHECK(r == bad[i].code && !w && strstr(e.message, "safetensors"));
        free(p);
    }
    /* every prefix of a good file refused, and every byte of its header changed: an error or a file, never a crash */
    REQUIRE((p = st_bytes("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"__metadata__\": {}}", zeros, 8, &n)) != NULL);
    for (k = 0; k < n; k++)
        if (tb_weights_open_memory(p, k, NULL, &w, &e) == tb_ok) ok = 0, tb_weights_free(w);
    for (k = 0; k + 8 < n; k++) {
        unsigned v;
        for (v = 1; v < 256; v <<= 1) {
            p[k] ^= (unsigned char)v;
            w = NULL;
            if (tb_weights_open_memory(p, n, NULL, &w, &e) == tb_ok) tb_weights_free(w);
            else if (!e.message[0]) ok = 0;
            p[k] ^= (unsigned char)v;
        }
    }
    free(p);
    CHECK(ok);
    /* a header length past the file, or over the limit */
    {
        unsigned char h[16] = {16, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
        CHECK(tb_weights_open_memory(h, 10, NULL, &w, &e) == tb_err_truncated);
        h[0] = 0xff, h[4] = 0xff;
        CHECK(tb_weights_open_memory(h, 10, NULL, &w, &e) == tb_err_limit);
    }
    CHECK(tb_weights_open("build/no-such.safetensors", NULL, &w, &e) == tb_err_not_found && strstr(e.file, "no-such"));
    /* accepted: a name past U+FFFF written as a surrogate pair (found by its UTF-8), and a size 0 beside sizes
       whose product alone would pass 2^64 (the tensor's bytes are 0) */
    REQUIRE((p = st_bytes("{\"x\\ud83d\\ude00\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                          "\"z\": {\"dtype\": \"F32\", \"shape\": [4611686018427387904, 4611686018427387904, 0], "
                          "\"data_offsets\": [8, 8]}}", zeros, 8, &n)) != NULL);
    w = NULL;
    CHECK_OK(tb_weights_open_memory(p, n, NULL, &w, &e), &e);
    CHECK(w && tb_weights_find(w, "x\xf0\x9f\x98\x80") && tb_weights_find(w, "z") && tb_weights_find(w, "z")->size == 0);
    tb_weights_free(w);
    free(p);
}

/* Keys with their escapes decoded, whatever their length, as safetensors'
   reader reads them (issue 38 #4): dtype written in escapes is dtype, twice beside a
   plain one; a tensor name of TB_MAX_STRING_LENGTH bytes, not one more. [R-weights] */
/* The weights file a bundle names, beside the bundle (tbundle run and
   generate, run_model): none named, a name with a directory, a path that
   does not fit (an error, never a truncated path). */
TEST(test_weights_path_beside) {
    tb_bundle *b;
    tb_error e;
    char out[64];
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK(tb_weights_path_beside(b, "m/x.tbundle", out, sizeof out, &e) == tb_err_not_found && !*out &&
          strstr(e.message, "names no weights file"));
    CHECK_OK(tb_bundle_set_property(b, "weights.file", "w.safetensors", &e), &e);
    CHECK_OK(tb_weights_path_beside(b, "models/a/x.tbundle", out, sizeof out, &e), &e);
    CHECK(!strcmp(out, "models/a/w.safetensors"));
    CHECK_OK(tb_weights_path_beside(b, "x.tbundle", out, sizeof out, &e), &e);
    CHECK(!strcmp(out, "w.safetensors"));
    CHECK(tb_weights_path_beside(b, "x.tbundle", out, 13, &e) == tb_err_limit && !*out); /* 14 bytes with its NUL */
    CHECK_OK(tb_weights_path_beside(b, "x.tbundle", out, 14, &e), &e);
    CHECK_OK(tb_bundle_set_property(b, "weights.file", "../w.safetensors", &e), &e);
    CHECK(tb_weights_path_beside(b, "m/x.tbundle", out, sizeof out, &e) == tb_err_not_found && strstr(e.message, "plain file name"));
    CHECK_OK(tb_bundle_set_property(b, "weights.file", "..", &e), &e);
    CHECK(tb_weights_path_beside(b, "m/x.tbundle", out, sizeof out, &e) == tb_err_not_found);
    CHECK(tb_weights_path_beside(NULL, "m/x.tbundle", out, sizeof out, &e) == tb_err_invalid_argument);
    tb_bundle_free(b);
}

TEST(test_weights_keys_decoded) {
    static const char esc[] = "\\u0064\\u0074\\u0079\\u0070\\u0065"; /* dtype, 30 bytes escaped */
    unsigned char zeros[8] = {0}, *p;
    char json[512], *big;
    size_t n, k;
    tb_weights *w = NULL;
    tb_error e;
    snprintf(json, sizeof json, "{\"a\": {\"%s\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", esc);
    REQUIRE((p = st_bytes(json, zeros, 8, &n)) != NULL);
    CHECK_OK(tb_weights_open_memory(p, n, NULL, &w, &e), &e);
    CHECK(w && tb_weights_find(w, "a") && tb_weights_find(w, "a")->dtype == TB_DTYPE_FLOAT32);
    tb_weights_free(w), w = NULL;
    free(p);
    /* an unknown key of 40 bytes with an escape: read to its end and skipped */
    REQUIRE((p = st_bytes("{\"a\": {\"dtype\": \"F32\", \"x\\u0022xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": 1, \"shape\": [2], "
                          "\"data_offsets\": [0, 8]}}", zeros, 8, &n)) != NULL);
    CHECK_OK(tb_weights_open_memory(p, n, NULL, &w, &e), &e);
    tb_weights_free(w), w = NULL;
    free(p);
    snprintf(json, sizeof json, "{\"a\": {\"dtype\": \"F32\", \"%s\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", esc);
    REQUIRE((p = st_bytes(json, zeros, 8, &n)) != NULL);
    CHECK(tb_weights_open_memory(p, n, NULL, &w, &e) == tb_err_malformed && !w && strstr(e.message, "twice"));
    free(p);
    /* the longest name: TB_MAX_STRING_LENGTH bytes; one more is tb_err_limit */
    REQUIRE((big = (char *)malloc(TB_MAX_STRING_LENGTH + 100)) != NULL);
    for (k = TB_MAX_STRING_LENGTH; k <= TB_MAX_STRING_LENGTH + 1; k++) {
        tb_result r;
        big[0] = '{', big[1] = '"';
        memset(big + 2, 'n', k);
        strcpy(big + 2 + k, "\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [0, 8]}}");
        REQUIRE((p = st_bytes(big, zeros, 8, &n)) != NULL);
        w = NULL;
        r = tb_weights_open_memory(p, n, NULL, &w, &e);
        if (k == TB_MAX_STRING_LENGTH) CHECK(r == tb_ok && w && tb_weights_count(w) == 1);
        else CHECK(r == tb_err_limit && !w && strstr(e.message, "TB_MAX_STRING_LENGTH"));
        tb_weights_free(w);
        free(p);
    }
    free(big);
}

/* The test program with its weight w external: tensor "model.w" of a
   weights file. */
static void make_external(prog *q) {
    make(q);
    q->k[0].flags = TB_CONSTANT_EXTERNAL, q->k[0].data = NULL;
    q->k[0].tensor = "model.w", q->k[0].rank = 1, q->k[0].shape[0] = 2;
    q->k[0].crc32 = tb_crc32(0, w_data, 8);
}

/* An external constant round trip: section 6 at 2.5, no bytes in the
   bundle, the tensor's name, shape and CRC kept; its rules. [R-external] */
TEST(test_external_constants) {
    prog q;
    tb_bundle *b, *r = NULL;
    tb_error e;
    size_t n = 0, n_inline = 0;
    void *buf, *buf2;
    float w[2];
    int i;
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    make(&q);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((buf = write_mem(b, &n_inline, &e)) != NULL);
    free(buf);
    make_external(&q);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((buf = write_mem(b, &n, &e)) != NULL);
    CHECK(((unsigned char *)buf)[10] == TB_FORMAT_VERSION_MINOR);
    CHECK_OK(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e), &e);
    REQUIRE(r && tb_bundle_program(r));
    if (getenv("TB_EXTERNAL_SEED")) CHECK_OK(tb_bundle_write_file(r, getenv("TB_EXTERNAL_SEED"), 0, &e), &e); /* fuzz/make_corpus.sh */
    {
        const tb_program_constant *k = &tb_bundle_program(r)->constants[0];
        CHECK(k->flags == TB_CONSTANT_EXTERNAL && !k->data && k->size == 8 && !strcmp(k->tensor, "model.w") && k->rank == 1 &&
              k->shape[0] == 2 && k->crc32 == tb_crc32(0, w_data, 8));
        CHECK(tb_bundle_program(r)->constants[1].tensor == NULL);
    }
    CHECK(tb_program_read_constant(r, 0, 0, w, 8, &e) == tb_err_not_found && strstr(e.message, "model.w"));
    /* an external constant after one the bundle holds (a state one, as a KV cache before the weights): read back */
    {
        tb_bundle *b2 = NULL, *r2 = NULL;
        prog q2;
        tb_program_constant swap;
        size_t n2 = 0;
        void *buf3;
        make_external(&q2);
        swap = q2.k[0], q2.k[0] = q2.k[1], q2.k[1] = swap;
        q2.ops[3][1] = op(TB_SPACE_CONSTANT, 1, 0), q2.ops[4][1] = op(TB_SPACE_CONSTANT, 0, 0), q2.ops[5][0] = op(TB_SPACE_CONSTANT, 0, 0);
        REQUIRE((b2 = bundle_with_record(&e)) != NULL);
        CHECK_OK(tb_bundle_set_program(b2, &q2.p, &e), &e);
        REQUIRE((buf3 = write_mem(b2, &n2, &e)) != NULL);
        CHECK_OK(tb_bundle_read_memory(buf3, n2, NULL, 0, &r2, &e), &e);
        CHECK(r2 && (tb_bundle_program(r2)->constants[1].flags & TB_CONSTANT_EXTERNAL) && tb_bundle_program(r2)->constants[0].data);
        tb_bundle_free(r2);
        tb_bundle_free(b2);
        free(buf3);
    }
    REQUIRE((buf2 = write_mem(r, &n_inline, &e)) != NULL); /* rewritten: the same bytes */
    CHECK(n_inline == n && !memcmp(buf, buf2, n));
    free(buf2);
    tb_bundle_free(r);
    /* the same file saying 2.4: refused */
    ((unsigned char *)buf)[10] = 4;
    r = NULL;
    CHECK(tb_bundle_read_memory(buf, n, NULL, TB_READ_NO_CHECKSUM, &r, &e) == tb_err_malformed && !r && strstr(e.message, "2.5"));
    free(buf);
    /* its rules */
#define BROKEN(code, change) BROKEN_FROM(make_external, code, change)
    BROKEN(tb_err_invalid_argument, q.k[0].shape[0] = 3);         /* 12 bytes, not 8 */
    BROKEN(tb_err_bad_name, q.k[0].tensor = "");
    BROKEN(tb_err_bad_name, q.k[0].tensor = NULL);
    BROKEN(tb_err_limit, q.k[0].rank = 9);
    BROKEN(tb_err_malformed, q.k[1].flags = TB_CONSTANT_STATE | TB_CONSTANT_EXTERNAL); /* state is the bundle's */
#undef BROKEN
    /* a size past 2^63 - 1 beside a size 0 (0 bytes): refused by the checker and the reader, as each size is
       checked before a 0 ends the product (FORMAT.md; the Python reader; issue 38 #5) */
    {
        tb_program_constant k3[3];
        static const unsigned char mark[8] = {0xed, 0x5e, 0xad, 0x7e, 0xed, 0x5e, 0xad, 0x7e};
        unsigned char *at;
        make_external(&q);
        k3[0] = q.k[0], k3[1] = q.k[1], k3[2] = q.k[0];
        k3[2].name = "empty", k3[2].tensor = "model.empty", k3[2].rank = 2, k3[2].size = 0, k3[2].crc32 = 0;
        k3[2].shape[0] = 0, k3[2].shape[1] = 0x7ead5eed7ead5eedll; /* in range: taken */
        q.p.constants = k3, q.p.constant_count = 3;
        CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
        REQUIRE((buf = write_mem(b, &n, &e)) != NULL);
        REQUIRE((at = (unsigned char *)memmem(buf, n, mark, 8)) != NULL);
        memset(at, 0xff, 8); /* 2^64 - 1 */
        r = NULL;
        CHECK(tb_bundle_read_memory(buf, n, NULL, TB_READ_NO_CHECKSUM, &r, &e) == tb_err_malformed && !r);
        CHECK(strstr(e.message, "program constant 2") != NULL);
        free(buf);
        k3[2].shape[1] = -1;
        CHECK(tb_bundle_set_program(b, &q.p, &e) == tb_err_invalid_argument);
        CHECK(strstr(e.message, "program constant 2 (empty)") != NULL);
    }
    tb_bundle_free(b);
}

/* The test program run once on x, y, z, s. */
static tb_result run_test_program(tb_model *m, float *x, float *y, float *z, int32_t *s, tb_error *e) {
    tb_tensor in[1], out[3];
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    return tb_model_run(m, in, 1, out, 3, STREAM, e);
}

/* A model whose weight is in a weights file: loaded from it (the
   pageable way and the pinned way, pieces of 64 bytes through the ring
   of 12 staging slots), and every mismatch refused before any upload. */
TEST(test_model_weights_file) {
    prog q;
    tb_bundle *b;
    tb_model *m = NULL;
    tb_model_desc d;
    tb_error e;
    static const size_t sizes[] = {8, 8, 4};
    float *x = (float *)dev(16), *y = (float *)dev(16), *z = (float *)dev(16);
    int32_t *s = (int32_t *)dev(4);
    char path[256], json[512];
    float big[2000];
    int way, i;
    NEED_FAKE();
    for (i = 0; i < 2000; i++) big[i] = (float)i;
    memcpy(big + 1000, w_data, 8);
    snprintf(path, sizeof path, "build/test_weights.%d.safetensors", (int)getpid());
    /* "pad" first: model.w lies at data byte 4000 */
    snprintf(json, sizeof json, "{\"pad\": {\"dtype\": \"F32\", \"shape\": [1000], \"data_offsets\": [0, 4000]}, \"model.w\": "
             "{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4000, 4008]}, \"tail\": {\"dtype\": \"F32\", \"shape\": "
             "[998], \"data_offsets\": [4008, 8000]}}");
    REQUIRE(st_write(path, json, big, 8000));
    make_external(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    q.k[0].name = "big", q.k[0].tensor = "tail", q.k[0].shape[0] = 998, q.k[0].size = 3992; /* a constant of 63 pieces */
    q.k[0].crc32 = tb_crc32(0, big + 1002, 3992);
    {
        tb_program_constant k3[3];
        k3[0] = q.k[0], k3[2] = q.k[1];
        make_external(&q);
        k3[1] = q.k[0];
        q.k[0] = k3[1], q.k[1] = k3[2];
        q.p.constants = k3, q.p.constant_count = 3;
        q.ops[3][1] = op(TB_SPACE_CONSTANT, 1, 0), q.ops[4][1] = op(TB_SPACE_CONSTANT, 2, 0), q.ops[5][0] = op(TB_SPACE_CONSTANT, 2, 0);
        CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    }
    CHECK_OK(tb_bundle_set_property(b, "weights.file", "model.safetensors", &e), &e);
    fake.set_params(sizes, 3);
    memset(&d, 0, sizeof d);
    d.bundle = b;
    CHECK(tb_model_load(&d, &m, &e) == tb_err_invalid_argument && !m && strstr(e.message, "desc.weights") &&
          strstr(e.message, "model.safetensors"));
    d.weights = "/nonexistent/model.safetensors"; /* a missing file: named, with the one the bundle was exported with */
    CHECK(tb_model_load(&d, &m, &e) == tb_err_not_found && !m &&
          strstr(e.message, "exported with the weights file \"model.safetensors\""));
    d.bundle = NULL; /* the usual cause: a tb_bundle_read_file whose result went unchecked */
    CHECK(tb_model_load(&d, &m, &e) == tb_err_invalid_argument && strstr(e.message, "did reading it fail?"));
    d.bundle = b;
    for (way = 0; way < 2; way++) {
        d.weights = path, d.flags = TB_MODEL_VERIFY_WEIGHTS, d.upload_chunk = 16;
        d.pinned_upload_min = way ? 1 : UINT64_MAX, d.upload_threads = 3;
        m = NULL;
        CHECK_OK(tb_model_load(&d, &m, &e), &e);
        REQUIRE(m);
        memset(z, 0, 16);
        CHECK_OK(run_test_program(m, x, y, z, s, &e), &e);
        CHECK(z[0] == 1.0f && z[1] == 1.0f && z[2] == 1.5f && z[3] == 2.5f); /* w from the file */
        {
            float back[998];
            CHECK(tb_model_copy_to_host(m, back, (void *)(uintptr_t)m->const_addr[0] /* (the implementation is in this file) */, sizeof back, NULL, &e) == tb_ok);
            CHECK(!memcmp(back, big + 1002, sizeof back));
        }
        CHECK(tb_model_upload_ms(m) >= 0);
        tb_model_free(m);
    }
    /* many readers on few slots, again and again: each reader takes the
       next piece after each wait (a reader that kept the piece it saw
       before waiting read it twice and could mark its slot with a stale
       piece, and the copier then waited for ever) */
    {
        int round, same = 1;
        d.flags = 0, d.pinned_upload_min = 1, d.upload_threads = 12;
        for (round = 0; round < 40 && same; round++) {
            float back[998];
            m = NULL;
            CHECK_OK(tb_model_load(&d, &m, &e), &e);
            REQUIRE(m);
            CHECK_OK(tb_model_copy_to_host(m, back, (void *)(uintptr_t)m->const_addr[0], sizeof back, NULL, &e), &e);
            same = !memcmp(back, big + 1002, sizeof back);
            tb_model_free(m);
        }
        CHECK(same);
        d.flags = TB_MODEL_VERIFY_WEIGHTS;
    }
    /* mismatches, each before any upload (the CRC-32's: over the bytes read for it) */
    {
        tb_program_constant *k = (tb_program_constant *)&tb_bundle_program(b)->constants[1];
        const char *keep = k->tensor;
        k->tensor = "model.v";
        CHECK(tb_model_load(&d, &m, &e) == tb_err_not_found && strstr(e.message, "model.v") && strstr(e.message, "\"w\""));
        k->tensor = keep, k->dtype = TB_DTYPE_INT32;
        CHECK(tb_model_load(&d, &m, &e) == tb_err_arg_mismatch && strstr(e.message, "float32 [2]") && strstr(e.message, "int32 [2]"));
        k->dtype = TB_DTYPE_FLOAT32, k->shape[0] = 1, k->rank = 2, k->shape[1] = 2;
        CHECK(tb_model_load(&d, &m, &e) == tb_err_arg_mismatch && strstr(e.message, "[1, 2]"));
        k->rank = 1, k->shape[0] = 2, k->crc32 ^= 1;
        CHECK(tb_model_load(&d, &m, &e) == tb_err_checksum && strstr(e.message, "another checkpoint"));
        d.flags = 0; /* a fine-tuned checkpoint: the CRC is not checked unless asked */
        CHECK_OK(tb_model_load(&d, &m, &e), &e);
        tb_model_free(m);
        k->crc32 ^= 1;
    }
    /* the file cut short under an open tb_weights: a clean error */
    {
        tb_weights *w = NULL;
        float v[2];
        CHECK_OK(tb_weights_open(path, NULL, &w, &e), &e);
        REQUIRE(w);
        CHECK(truncate(path, 100) == 0);
        CHECK(tb_weights_read(w, tb_weights_find(w, "model.w"), 0, v, 8, &e) == tb_err_io);
        tb_weights_free(w);
        CHECK(tb_model_load(&d, &m, &e) == tb_err_truncated && !m);
    }
    unlink(path);
    tb_bundle_free(b);
    free(x), free(y), free(z), free(s);
}

/* zlib's crc32_combine (the upload's pieces' CRC-32s put together) is
   the CRC-32 of the bytes one after the other, at every split. */
TEST(test_crc32_combine) {
    unsigned char bytes[300];
    uint32_t i, a, ok = 1;
    for (i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 7 + 3);
    for (a = 0; a <= sizeof bytes && ok; a++)
        ok = tb__crc32_combine(tb_crc32(0, bytes, a), tb_crc32(0, bytes + a, sizeof bytes - a), sizeof bytes - a) ==
             tb_crc32(0, bytes, sizeof bytes);
    CHECK(ok);
    CHECK(tb__crc32_combine(0, 0, 0) == 0 && tb__crc32_combine(0x12345678u, 0, 0) == 0x12345678u);
}

/* The weights file rewritten during the load, between its checks and its
   upload (the stand-in's cuMemAlloc, which comes between them, rewrites
   one float of the tensor "tail"): with TB_MODEL_VERIFY_WEIGHTS the
   CRC-32s are those of the bytes read for the upload, so the load fails
   (it checked one read of the file and uploaded another, and said tb_ok:
   issue 38 #8); without it the load takes the bytes it read. The pageable
   way (pieces of 16 bytes) and the pinned way (of 64, 3 readers): a
   constant of many pieces, their CRC-32s put together in order. */
typedef struct rewrite {
    const char *path;
    uint64_t at;
    float v;
} rewrite;
static void rewrite_file(void *arg) {
    const rewrite *w = (const rewrite *)arg;
    int fd = open(w->path, O_WRONLY);
    if (fd >= 0) {
        if (pwrite(fd, &w->v, 4, (off_t)w->at) != 4) printf("    the rewrite failed\n");
        close(fd);
    }
}
TEST(test_model_weights_verify_upload) {
    prog q;
    tb_bundle *b;
    tb_model *m = NULL;
    tb_model_desc d;
    tb_program_constant k3[3];
    tb_error e;
    static const size_t sizes[] = {8, 8, 4};
    char path[256], json[512];
    float data[1000], back[998];
    rewrite rw;
    size_t n;
    unsigned char *head;
    int way, verify;
    NEED_FAKE();
    for (n = 0; n < 1000; n++) data[n] = (float)n;
    memcpy(data, w_data, 8);
    snprintf(path, sizeof path, "build/test_weights_rw.%d.safetensors", (int)getpid());
    snprintf(json, sizeof json, "{\"model.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"tail\": "
             "{\"dtype\": \"F32\", \"shape\": [998], \"data_offsets\": [8, 4000]}}");
    REQUIRE((head = st_bytes(json, data, sizeof data, &n)) != NULL);
    free(head);
    rw.path = path, rw.at = n - sizeof data + 8 + 4 * 498, rw.v = -1.0f; /* tail[498] */
    make_external(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    k3[0] = q.k[0], k3[1] = q.k[0], k3[2] = q.k[1];
    k3[0].name = "big", k3[0].tensor = "tail", k3[0].shape[0] = 998, k3[0].size = 3992;
    k3[0].crc32 = tb_crc32(0, data + 2, 3992);
    q.p.constants = k3, q.p.constant_count = 3;
    q.ops[3][1] = op(TB_SPACE_CONSTANT, 1, 0), q.ops[4][1] = op(TB_SPACE_CONSTANT, 2, 0), q.ops[5][0] = op(TB_SPACE_CONSTANT, 2, 0);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    fake.set_params(sizes, 3);
    for (way = 0; way < 2; way++)
        for (verify = 0; verify < 2; verify++) {
            REQUIRE(st_write(path, json, data, sizeof data));
            memset(&d, 0, sizeof d);
            d.bundle = b, d.weights = path, d.flags = verify ? TB_MODEL_VERIFY_WEIGHTS : 0, d.upload_chunk = 16;
            d.pinned_upload_min = way ? 1 : UINT64_MAX, d.upload_threads = 3;
            CHECK_OK(tb_model_load(&d, &m, &e), &e); /* the file as exported: loads, verified or not */
            tb_model_free(m);
            m = NULL;
            fake.on_alloc(rewrite_file, &rw);
            if (verify) {
                CHECK(tb_model_load(&d, &m, &e) == tb_err_checksum && !m);
                CHECK(strstr(e.message, "\"big\"") && strstr(e.message, "\"tail\"") && strstr(e.message, "changed during the load"));
            } else {
                CHECK_OK(tb_model_load(&d, &m, &e), &e);
                REQUIRE(m);
                CHECK_OK(tb_model_copy_to_host(m, back, (void *)(uintptr_t)m->const_addr[0], sizeof back, NULL, &e), &e);
                CHECK(back[498] == -1.0f && back[497] == 499.0f && back[499] == 501.0f); /* the bytes it read */
                tb_model_free(m);
                m = NULL;
            }
            fake.on_alloc(NULL, NULL);
        }
    unlink(path);
    tb_bundle_free(b);
}

/* A weights file past 4 GiB (sparse): the tensor at data byte 2^32 + 64
   is found, read and uploaded from there (64-bit offsets all the way). */
TEST(test_weights_past_4gib) {
    prog q;
    tb_bundle *b;
    tb_model *m = NULL;
    tb_model_desc d;
    tb_error e;
    static const size_t sizes[] = {8, 8, 4};
    char path[256], json[512];
    size_t n;
    unsigned char *head;
    uint64_t pad = ((uint64_t)1 << 32) + 64, data_at;
    int fd, way;
    float *x = (float *)dev(16), *y = (float *)dev(16), *z = (float *)dev(16);
    int32_t *s = (int32_t *)dev(4);
    NEED_FAKE();
    if (sizeof(off_t) < 8) SKIP("32-bit off_t");
    snprintf(path, sizeof path, "build/test_weights_big.%d.safetensors", (int)getpid());
    snprintf(json, sizeof json, "{\"pad\": {\"dtype\": \"U8\", \"shape\": [%llu], \"data_offsets\": [0, %llu]}, \"model.w\": "
             "{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [%llu, %llu]}}", (unsigned long long)pad,
             (unsigned long long)pad, (unsigned long long)pad, (unsigned long long)pad + 8);
    REQUIRE((head = st_bytes(json, NULL, 0, &n)) != NULL);
    data_at = n;
    fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    REQUIRE(fd >= 0);
    CHECK(write(fd, head, n) == (ssize_t)n);
    CHECK(pwrite(fd, w_data, 8, (off_t)(data_at + pad)) == 8); /* the gap stays a hole */
    close(fd);
    free(head);
    make_external(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    fake.set_params(sizes, 3);
    for (way = 0; way < 2; way++) {
        memset(&d, 0, sizeof d);
        d.bundle = b, d.weights = path, d.flags = TB_MODEL_VERIFY_WEIGHTS, d.pinned_upload_min = way ? 1 : UINT64_MAX;
        m = NULL;
        CHECK_OK(tb_model_load(&d, &m, &e), &e);
        REQUIRE(m);
        memset(z, 0, 16);
        CHECK_OK(run_test_program(m, x, y, z, s, &e), &e);
        CHECK(z[2] == 1.5f && z[3] == 2.5f);
        tb_model_free(m);
    }
    unlink(path);
    tb_bundle_free(b);
    free(x), free(y), free(z), free(s);
}

/* ---- the staging area: pinned once, reused, freed with its last model ---- */
/* A bundle whose one constant is the weights file's tensor "w" (uint8
   [n], external) and whose program copies 16 bytes of it out: its
   upload is n bytes of pieces of 64 (TB_UPLOAD_PIECE here). */
typedef struct staged {
    tb_tensor_spec out;
    tb_program_constant k;
    tb_operand ops[2];
    tb_program_step st;
    tb_program p;
} staged;
static tb_bundle *staged_bundle(staged *q, const unsigned char *bytes, uint64_t n, tb_error *e) {
    tb_bundle *b = NULL;
    memset(q, 0, sizeof *q);
    spec(&q->out, "out", TB_DTYPE_UINT8, 16);
    q->k.name = "w", q->k.dtype = TB_DTYPE_UINT8, q->k.flags = TB_CONSTANT_EXTERNAL, q->k.size = n, q->k.tensor = "w";
    q->k.rank = 1, q->k.shape[0] = (int64_t)n, q->k.crc32 = tb_crc32(0, bytes, (size_t)n);
    q->ops[0] = op(TB_SPACE_OUTPUT, 0, 0), q->ops[1] = op(TB_SPACE_CONSTANT, 0, 0);
    q->st.kind = TB_STEP_COPY, q->st.count = 16, q->st.operand_count = 2, q->st.operands = q->ops;
    q->p.output_count = 1, q->p.outputs = &q->out, q->p.constant_count = 1, q->p.constants = &q->k;
    q->p.step_count = 1, q->p.steps = &q->st;
    if (tb_bundle_create(NULL, &b, e) != tb_ok) return NULL;
    if (tb_bundle_set_program(b, &q->p, e) != tb_ok) {
        tb_bundle_free(b);
        return NULL;
    }
    return b;
}
/* Loads d, checks the bytes on the "device" against the file's (each
   load verifies its CRC-32 too), frees; 1 when all went well. */
static int staged_load(const tb_model_desc *d, const unsigned char *bytes, size_t n, tb_model_times *t, tb_error *e) {
    tb_model *m = NULL;
    unsigned char *back = (unsigned char *)malloc(n);
    int ok = back && tb_model_load(d, &m, e) == tb_ok && m &&
             tb_model_copy_to_host(m, back, (void *)(uintptr_t)m->const_addr[0], n, NULL, e) == tb_ok && !memcmp(back, bytes, n);
    if (m && t) tb_model_load_times(m, t);
    tb_model_free(m);
    free(back);
    return ok;
}
typedef struct staged_job {
    tb_model_desc d;
    const unsigned char *bytes;
    size_t n;
    void *ctx;                   /* NULL: the thread's own current context */
    int rounds, ok;
    tb_model_times last;
} staged_job;
static void *staged_thread(void *arg) {
    staged_job *j = (staged_job *)arg;
    tb_error e;
    int r;
    if (j->ctx) fake.set_current(j->ctx);
    j->ok = 1;
    for (r = 0; r < j->rounds && j->ok; r++) j->ok = staged_load(&j->d, j->bytes, j->n, &j->last, &e);
    if (!j->ok) printf("    a load on a thread: %s\n", e.message);
    return NULL;
}
/* Issue 40: 20 loads and frees leave no device or pinned memory; while a
   model holds the staging area the loads after it pin nothing; a bound
   holds (slots of half of it; under two slots, nothing pinned); pinning
   that fails goes the pageable way; two loads at once in one context
   take turns with the area (never more pinned than one bound), in two
   contexts each pins within its own; the bytes uploaded are the file's. */
TEST(test_model_staging_area) {
    staged q;
    tb_bundle *b;
    tb_model *holder = NULL;
    tb_model_desc d;
    tb_model_times t;
    tb_error e;
    char path[256], json[256];
    unsigned char bytes[4000];
    uint64_t dev0, pin, peak, calls;
    size_t piece = 0;
    uint32_t pin_slots = 0;
    int i, ok, reused;
    NEED_FAKE();
    for (i = 0; i < (int)sizeof bytes; i++) bytes[i] = (unsigned char)(i * 131 + (i >> 8));
    snprintf(path, sizeof path, "build/test_staging.%d.safetensors", (int)getpid());
    snprintf(json, sizeof json, "{\"w\": {\"dtype\": \"U8\", \"shape\": [4000], \"data_offsets\": [0, 4000]}}");
    REQUIRE(st_write(path, json, bytes, sizeof bytes));
    REQUIRE((b = staged_bundle(&q, bytes, sizeof bytes, &e)) != NULL);
    /* the ring's shape: slots of 64 (TB_UPLOAD_PIECE here), no more than
       the upload has pieces, none under two; pinned, a quarter of the
       bytes (TB_UPLOAD_PIN_SHARE here), two slots at least */
    CHECK(tb__ring_shape(768, 4000, &piece, &pin_slots) == 12 && piece == 64 && pin_slots == 12);
    CHECK(tb__ring_shape(2048, 4000, &piece, &pin_slots) == 32 && pin_slots == 16); /* 1000 bytes */
    CHECK(tb__ring_shape(768, 100, &piece, &pin_slots) == 2 && piece == 64 && pin_slots == 2);
    CHECK(tb__ring_shape(768, 600, &piece, &pin_slots) == 10 && pin_slots == 3);
    CHECK(tb__ring_shape(200, 4000, &piece, &pin_slots) == 3 && piece == 64 && pin_slots == 3);
    CHECK(tb__ring_shape(127, 4000, &piece, &pin_slots) == 0 && piece == 0 && pin_slots == 0);
    CHECK(tb__ring_shape(768, 0, &piece, &pin_slots) == 0);
    tb_model_load_times(NULL, &t);
    CHECK(t.total_ms == 0 && t.pinned == 0 && t.upload_bytes == 0);
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 0);
    memset(&d, 0, sizeof d);
    d.bundle = b, d.weights = path, d.flags = TB_MODEL_VERIFY_WEIGHTS, d.pinned_upload_min = 1, d.upload_threads = 4;
    /* 20 loads and frees: each pins the area (no model holds it between
       them) and its free unpins it; no device memory stays */
    for (i = 0, ok = 1; i < 20 && ok; i++) {
        uint64_t dv;
        ok = staged_load(&d, bytes, sizeof bytes, &t, &e);
        fake.memory(&dv, &pin, &peak, &calls);
        ok = ok && dv == dev0 && pin == 0 && peak == 768 && calls == 1 && t.pinned && !t.reused && t.staging_bytes == 768 &&
             t.upload_bytes == sizeof bytes && t.threads >= 1 && t.threads <= 4 && t.upload_ms >= t.pin_ms;
        if (!ok) printf("    load %d: %s; device %llu (%llu before), pinned %llu, peak %llu, %llu pins\n", i, e.message,
                        (unsigned long long)dv, (unsigned long long)dev0, (unsigned long long)pin,
                        (unsigned long long)peak, (unsigned long long)calls);
    }
    CHECK(ok);
    CHECK(t.total_ms >= t.upload_ms && t.kernels_ms >= 0 && t.context_ms >= 0 && t.weights_ms > 0);
    /* while a model holds it, 20 more loads pin nothing */
    CHECK_OK(tb_model_load(&d, &holder, &e), &e);
    REQUIRE(holder);
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 768 && calls == 1);
    for (i = 0, ok = 1, reused = 1; i < 20 && ok; i++) {
        ok = staged_load(&d, bytes, sizeof bytes, &t, &e);
        reused = reused && t.pinned && t.reused && t.pin_ms == 0 && t.staging_bytes == 768;
    }
    CHECK(ok && reused);
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 768 && peak == 768 && calls == 0);
    /* a smaller bound uses part of the held area; a larger one pins it
       again, larger (a quarter of the upload: 16 slots), and the next
       one uses all of it */
    d.pinned_staging_bytes = 200;
    CHECK(staged_load(&d, bytes, sizeof bytes, &t, &e) && t.reused && t.staging_bytes == 192);
    d.pinned_staging_bytes = 2048;
    CHECK(staged_load(&d, bytes, sizeof bytes, &t, &e) && !t.reused && t.staging_bytes == 1024);
    CHECK(staged_load(&d, bytes, sizeof bytes, &t, &e) && t.reused && t.staging_bytes == 1024);
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 1024 && calls == 1 && peak <= 1024);
    tb_model_free(holder);
    holder = NULL;
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 0);
    /* a bound of three slots pins three; one under two slots, nothing (the pageable way) */
    d.pinned_staging_bytes = 200;
    CHECK(staged_load(&d, bytes, sizeof bytes, &t, &e) && t.pinned && t.staging_bytes == 192);
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 0 && peak == 192 && calls == 1);
    d.pinned_staging_bytes = 100;
    CHECK(staged_load(&d, bytes, sizeof bytes, &t, &e) && !t.pinned && t.staging_bytes == 0 && t.pin_ms == 0);
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 0 && peak == 0 && calls == 0);
    d.pinned_staging_bytes = 0;
    /* pinning refused (a host's locked-memory limit): the pageable way */
    fake.pin_limit(100);
    CHECK(staged_load(&d, bytes, sizeof bytes, &t, &e) && !t.pinned && t.upload_bytes == sizeof bytes);
    fake.pin_limit(UINT64_MAX);
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 0 && calls == 0);
    /* two loads at once, again and again. One context: they take turns
       with the one area, never more than one bound pinned. Two contexts:
       the second pins its own while the first holds the area, each
       within its bound. */
    {
        staged_job j[2];
        pthread_t tid[2];
        int k, two;
        for (two = 0; two < 2; two++) {
            memset(j, 0, sizeof j);
            for (k = 0; k < 2; k++) {
                j[k].d = d, j[k].bytes = bytes, j[k].n = sizeof bytes, j[k].rounds = 25;
                j[k].ctx = two && k ? (void *)0x2000 : NULL;
            }
            for (k = 0; k < 2; k++) REQUIRE(pthread_create(&tid[k], NULL, staged_thread, &j[k]) == 0);
            for (k = 0; k < 2; k++) pthread_join(tid[k], NULL);
            CHECK(j[0].ok && j[1].ok);
            fake.memory(&dev0, &pin, &peak, &calls);
            CHECK(pin == 0 && peak <= (two ? 2u : 1u) * 768 && calls >= 1);
            if (peak > (two ? 2u : 1u) * 768) printf("    %s: peak %llu pinned bytes\n", two ? "two contexts" : "one context",
                                                     (unsigned long long)peak);
        }
    }
    unlink(path);
    tb_bundle_free(b);
}


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
    if (getenv("TB_DYNAMIC_SEED")) CHECK_OK(tb_bundle_write_file(b, getenv("TB_DYNAMIC_SEED"), 0, &e), &e); /* fuzz/make_corpus.sh */
    CHECK(section_at((const unsigned char *)buf, n, 6) != 0 && section_at((const unsigned char *)buf, n, 5) == 0);
    REQUIRE(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e) == tb_ok);
    REQUIRE((p = tb_bundle_program(r)) != NULL);
    CHECK(same_program(p, &q.p));
    CHECK(p->symbol_count == 1 && !strcmp(p->symbols[0].name, "n") && p->symbols[0].min == 2 && p->symbols[0].max == 8);
    CHECK(p->expr_count == q.p.expr_count);
    for (i = 0; i < p->expr_count && i < q.p.expr_count; i++)
        CHECK(p->exprs[i].field == q.ex[i].field && p->exprs[i].index == q.ex[i].index && p->exprs[i].sub == q.ex[i].sub &&
              p->exprs[i].op_count == q.ex[i].op_count && !memcmp(p->exprs[i].ops, q.ex[i].ops, q.ex[i].op_count * sizeof(tb_grid_op)));
    CHECK_OK(tb_program_specialize(r, p, v, &at5, &e), &e);
    REQUIRE(at5 != NULL);
    CHECK(at5->values && at5->values[0] == 5 && at5->expr_count == 0);
    CHECK(at5->inputs[0].shape[0] == 5 && at5->outputs[0].shape[0] == 5 && at5->outputs[1].shape[0] == 5);
    CHECK(at5->buffers[0].size == 20 && at5->buffers[0].offset == 0);
    CHECK(at5->steps[0].grid[0] == 3 && at5->steps[1].grid[0] == 3 && at5->steps[2].count == 5);
    CHECK(at5->steps[0].operands[2].value == 5 && at5->steps[1].operands[2].value == 5);
    CHECK(p->steps[0].operands[2].value == 8); /* the bundle's program is untouched */
    CHECK(tb_bundle_add_program(r, at5, &e) == tb_err_invalid_argument); /* a specialized one is not a program to store */
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
        CHECK(strstr(e.message, "input \"x2\" dimension 0 is 6, where input \"x\" dimension 0 made symbol \"n\" 4") != NULL);
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
    static const tb_grid_op nonmono[5] = {{TB_GRID_CONST, 0, 64}, {TB_GRID_SYM, 0, 0}, {TB_GRID_CONST, 0, 4}, {TB_GRID_MUL, 0, 0},
                                          {TB_GRID_SUB, 0, 0}}; /* 64 - 4n: 32 at n = 8, more below */
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
    BROKEN_FROM(make_dyn2, tb_err_malformed, { tb_program_expr t = q.ex[1]; q.ex[1] = q.ex[2]; q.ex[2] = t; }); /* unsorted */
    BROKEN_FROM(make_dyn2, tb_err_malformed, (q.ex[4].sub = 0, q.ex[4].field = TB_FIELD_COUNT)); /* a launch has no count */
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
                else ops[n].op = TB_GRID_CONST, ops[n].value = (seed >> 50) % 4 ? (int64_t)((seed >> 20) % 17) - 8 : edge[(seed >> 24) % 10];
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
            printf("    expression %d: reference %s %lld, tb_expr_eval %s %lld\n", t, rr ? "refuses" : "gives", (long long)want,
                   cr ? "refuses" : "gives", (long long)got);
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
    static const tb_grid_op z[7] = {{TB_GRID_SYM, 0, 0}, {TB_GRID_CONST, 0, 2}, {TB_GRID_MUL, 0, 0}, {TB_GRID_CONST, 0, 12},
                                    {TB_GRID_SUB, 0, 0}, {TB_GRID_CONST, 0, 0}, {TB_GRID_MAX, 0, 0}};
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
    CHECK(strstr(e.message, "program \"forward\": output \"y\" holds more bytes at these sizes than at every maximum [at n=6]") != NULL);
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
    static const tb_grid_op div[7] = {{TB_GRID_SYM, 0, 0}, {TB_GRID_CONST, 0, 4}, {TB_GRID_MUL, 0, 0}, {TB_GRID_SYM, 0, 0},
                                      {TB_GRID_CONST, 0, 4}, {TB_GRID_SUB, 0, 0}, {TB_GRID_FLOORDIV, 0, 0}};
    /* 2n - 12: 4 at n = 8, -4 at 4 */
    static const tb_grid_op neg[5] = {{TB_GRID_SYM, 0, 0}, {TB_GRID_CONST, 0, 2}, {TB_GRID_MUL, 0, 0}, {TB_GRID_CONST, 0, 12},
                                      {TB_GRID_SUB, 0, 0}};
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

/* Runs with the caller's workspace write nothing of the model's, which
   other threads run at once: a refused one cleared the model's "the
   tensors checked last passed" (io_ok), a write that raced with every
   other thread's (ThreadSanitizer, issue 38 #10). Deterministic: the
   model's record as it was after a refused run; under make tsan: four
   threads running accepted and refused ones at once. The program copies
   x to y and sets y[2..3] = 2: no launch, no state. */
typedef struct wsrun {
    tb_model *m;
    const float *x;
    float *y;
    void *ws;
    int ok, refused, right;
} wsrun;
static void *ws_thread(void *arg) {
    wsrun *t = (wsrun *)arg;
    tb_tensor in[1], out[1];
    tb_error e;
    int i;
    for (i = 0; i < 200; i++) {
        in[0] = tb_tensor_for(tb_model_input(t->m, 0), (void *)(uintptr_t)t->x);
        out[0] = tb_tensor_for(tb_model_output(t->m, 0), t->y);
        t->y[0] = t->y[1] = t->y[2] = t->y[3] = 0;
        t->ok += tb_model_run_workspace(t->m, in, 1, out, 1, t->ws, STREAM, &e) == tb_ok;
        t->right += t->y[0] == t->x[0] && t->y[1] == t->x[1] && t->y[2] == 2.0f && t->y[3] == 2.0f;
        in[0].shape[0] = 8; /* refused */
        t->refused += tb_model_run_workspace(t->m, in, 1, out, 1, t->ws, STREAM, &e) == tb_err_arg_mismatch;
    }
    return NULL;
}
TEST(test_model_workspace_threads) {
    tb_tensor_spec ins[1], outs[1];
    tb_operand ops[2][2];
    tb_program_step steps[2];
    tb_program p;
    tb_bundle *b = NULL;
    tb_model *m = NULL;
    tb_model_desc d;
    tb_tensor in[1], out[1];
    tb_error e;
    wsrun t[4];
    pthread_t tid[4];
    float *x = (float *)dev(16), *y = (float *)dev(16);
    int i, started = 0;
    NEED_FAKE();
    memset(&p, 0, sizeof p), memset(steps, 0, sizeof steps);
    spec(&ins[0], "x", TB_DTYPE_FLOAT32, 4);
    spec(&outs[0], "y", TB_DTYPE_FLOAT32, 4);
    ops[0][0] = op(TB_SPACE_OUTPUT, 0, 0), ops[0][1] = op(TB_SPACE_INPUT, 0, 0);
    ops[1][0] = op(TB_SPACE_OUTPUT, 0, 8);
    steps[0].kind = TB_STEP_COPY, steps[0].operand_count = 2, steps[0].count = 16, steps[0].operands = ops[0];
    steps[1].kind = TB_STEP_MEMSET, steps[1].operand_count = 1, steps[1].width = 4, steps[1].value = 0x40000000u;
    steps[1].count = 2, steps[1].operands = ops[1];
    p.input_count = 1, p.inputs = ins, p.output_count = 1, p.outputs = outs;
    p.workspace_size = 256, p.step_count = 2, p.steps = steps;
    REQUIRE(tb_bundle_create(NULL, &b, &e) == tb_ok);
    CHECK_OK(tb_bundle_set_program(b, &p, &e), &e);
    memset(&d, 0, sizeof d);
    d.bundle = b;
    CHECK_OK(tb_model_load(&d, &m, &e), &e);
    REQUIRE(m && tb_model_workspace_size(m) > 0);
    for (i = 0; i < 4; i++) x[i] = (float)(i + 1);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    CHECK_OK(tb_model_run(m, in, 1, out, 1, STREAM, &e), &e);
    CHECK(m->progs[0].io_ok == 1 && y[1] == 2.0f && y[3] == 2.0f);
    memset(t, 0, sizeof t);
    t[0].ws = dev((size_t)tb_model_workspace_size(m));
    REQUIRE(t[0].ws != NULL);
    in[0].shape[0] = 8;
    CHECK(tb_model_run_workspace(m, in, 1, out, 1, t[0].ws, STREAM, &e) == tb_err_arg_mismatch);
    CHECK(m->progs[0].io_ok == 1); /* the refused run wrote nothing of the model's */
    for (i = 0; i < 4; i++) {
        t[i].m = m, t[i].x = x, t[i].y = (float *)dev(16);
        if (i) t[i].ws = dev((size_t)tb_model_workspace_size(m));
    }
    for (i = 0; i < 4; i++)
        if (t[i].y && t[i].ws && pthread_create(&tid[i], NULL, ws_thread, &t[i]) == 0) started++;
        else break;
    for (i = 0; i < started; i++) pthread_join(tid[i], NULL);
    CHECK(started == 4);
    for (i = 0; i < started; i++) CHECK(t[i].ok == 200 && t[i].right == 200 && t[i].refused == 200);
    CHECK(m->progs[0].io_ok == 1);
    for (i = 0; i < 4; i++) free(t[i].y), free(t[i].ws);
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
