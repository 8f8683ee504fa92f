/* Programs (format 2.3, section 5) without a GPU: a program built with
   tb_bundle_set_program, written and read back (memory and mapped file),
   each of FORMAT.md's section 5 rules broken once and refused with its
   code, every truncation refused; several programs sharing constants;
   bundle properties. The symbols are test_symbols.c's, the runner
   test_runner.c's, weights files and the upload test_upload.c's.
   build/test_program [name-filter] */
#include "program_util.h"

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
    if (getenv("TB_PROGRAM_SEED"))
        CHECK_OK(tb_bundle_write_file(b, getenv("TB_PROGRAM_SEED"), 0, &e), &e); /* fuzz/make_corpus.sh */
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
    BROKEN(tb_err_malformed,
           (q.ops[3][0] = op(TB_SPACE_OUTPUT, 1, 0), q.ops[3][1] = op(TB_SPACE_OUTPUT, 1, 4))); /* overlap */
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
            snprintf(msg, sizeof msg,
                     "malformed input: program step %u: %u operands, it takes %u [program \"forward\"]", s, wrong[i],
                     want);
            CHECK(tb_bundle_set_program(b, &q.p, &e) == tb_err_malformed && message_is(&e, msg));
        }
        if (rows[k].operands < 0) continue; /* a launch has a record, a config and a grid */
        make(&q);
        q.steps[s].config = 1;
        snprintf(msg, sizeof msg,
                 "malformed input: program step %u: a %s's record, config or grid is not 0 [program \"forward\"]", s,
                 names[k]);
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
    if (getenv("TB_PROGRAMS_SEED"))
        CHECK_OK(tb_bundle_write_file(b, getenv("TB_PROGRAMS_SEED"), 0, &e), &e); /* fuzz/make_corpus.sh */
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
    CHECK(tb_bundle_add_program(b, &q.b, &e) == tb_err_invalid_argument &&
          strstr(e.message, "two constants named \"kv\", both named so"));
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
    CHECK(tb_bundle_read_memory(m, n, NULL, TB_READ_NO_CHECKSUM, &r, &e) == tb_err_malformed && !r &&
          strstr(e.message, "2.4"));
    memcpy(m, buf, n);
    /* the second program's name "step" made "fill" */
    for (i = at; i + 4 < n && memcmp(m + i, "step", 4); i++) {}
    REQUIRE(i + 4 < n);
    memcpy(m + i, "fill", 4);
    CHECK(tb_bundle_read_memory(m, n, NULL, TB_READ_NO_CHECKSUM, &r, &e) == tb_err_malformed && !r &&
          strstr(e.message, "two programs"));
    free(m);
    free(buf);
    tb_bundle_free(b);
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
    CHECK(tb_bundle_program_count(r) == 1 && same_program(tb_bundle_program(r), &q.p) &&
          tb_bundle_property_count(r) == 2);
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

int main(int argc, char **argv) { return th_main(argc, argv); }
