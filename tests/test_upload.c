/* Weights files and the upload without a GPU (>>weights, >>upload): the
   safetensors reader and its refusals, EXTERNAL constants read from a
   weights file, the CRC-32 of the bytes uploaded, files past 4 GiB, and
   the pinned staging area (bounds, reuse, 20 loads, two at once) through
   the stand-in driver. build/test_upload [name-filter] */
#include "program_util.h"


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
    const char *json =
        "{\"__metadata__\": {\"format\": \"pt\"}, \"model.w\": {\"dtype\": \"F32\", \"shape\": [2], "
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
        { "[]", 0, tb_err_malformed },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}", 8, tb_err_parse },
        { "{\"a\": {\"dtype\": \"F31\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, tb_err_unsupported_type },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, tb_err_malformed },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 12,
          tb_err_malformed }, /* a tail */
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 4, tb_err_truncated },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"b\": {\"dtype\": \"U8\", "
          "\"shape\": [4], "
          "\"data_offsets\": [4, 8]}}",
          8, tb_err_malformed }, /* overlap */
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12,
          tb_err_malformed }, /* a hole */
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"a\": {\"dtype\": \"F32\", "
          "\"shape\": [0], "
          "\"data_offsets\": [8, 8]}}",
          8, tb_err_malformed }, /* a name twice */
        { "{\"\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, tb_err_bad_name },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,2], \"data_offsets\": [0, 8]}}", 8, tb_err_limit },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [2,], \"data_offsets\": [0, 8]}}", 8, tb_err_parse },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8, tb_err_parse },
        { "{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 8]}}", 8, tb_err_malformed },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8, 9]}}", 8, tb_err_malformed },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 8]}}", 8,
          tb_err_malformed },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [02], \"data_offsets\": [0, 8]}}", 8,
          tb_err_parse }, /* a leading zero */
        { "{\"__metadata__\": {\"x\": 1.e+}, \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
          tb_err_parse },
        { "{\"a\": {\"dtype\": \"F32\", \"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
          tb_err_malformed },
        { "{\"__metadata__\": {}, \"__metadata__\": {}}", 0, tb_err_malformed },
        { "{\"a\\ud83d\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
          tb_err_parse }, /* a lone surrogate */
        { "{\"a\xff\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8,
          tb_err_parse }, /* not UTF-8 */
        { "", 0, tb_err_parse },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}} x", 8, tb_err_malformed },
        { "{\"a\": 5}", 0, tb_err_malformed },
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
        if (r != bad[i].code || !strstr(e.message, "safetensors"))
            printf("    case %zu: got %s (%s)\n", i, tb_result_string(r), e.message);
        CHECK(r == bad[i].code && !w && strstr(e.message, "safetensors"));
        free(p);
    }
    /* every prefix of a good file refused, and every byte of its header changed: an error or a file, never a crash */
    REQUIRE(
        (p = st_bytes("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"__metadata__\": {}}",
                      zeros, 8, &n)) != NULL);
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
    CHECK(w && tb_weights_find(w, "x\xf0\x9f\x98\x80") && tb_weights_find(w, "z") &&
          tb_weights_find(w, "z")->size == 0);
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
    CHECK(tb_weights_path_beside(b, "m/x.tbundle", out, sizeof out, &e) == tb_err_not_found &&
          strstr(e.message, "plain file name"));
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
    REQUIRE(
        (p = st_bytes("{\"a\": {\"dtype\": \"F32\", \"x\\u0022xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": 1, \"shape\": [2], "
                      "\"data_offsets\": [0, 8]}}",
                      zeros, 8, &n)) != NULL);
    CHECK_OK(tb_weights_open_memory(p, n, NULL, &w, &e), &e);
    tb_weights_free(w), w = NULL;
    free(p);
    snprintf(json, sizeof json,
             "{\"a\": {\"dtype\": \"F32\", \"%s\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", esc);
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
    if (getenv("TB_EXTERNAL_SEED"))
        CHECK_OK(tb_bundle_write_file(r, getenv("TB_EXTERNAL_SEED"), 0, &e), &e); /* fuzz/make_corpus.sh */
    {
        const tb_program_constant *k = &tb_bundle_program(r)->constants[0];
        CHECK(k->flags == TB_CONSTANT_EXTERNAL && !k->data && k->size == 8 && !strcmp(k->tensor, "model.w") &&
              k->rank == 1 && k->shape[0] == 2 && k->crc32 == tb_crc32(0, w_data, 8));
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
        q2.ops[3][1] = op(TB_SPACE_CONSTANT, 1, 0), q2.ops[4][1] = op(TB_SPACE_CONSTANT, 0, 0),
        q2.ops[5][0] = op(TB_SPACE_CONSTANT, 0, 0);
        REQUIRE((b2 = bundle_with_record(&e)) != NULL);
        CHECK_OK(tb_bundle_set_program(b2, &q2.p, &e), &e);
        REQUIRE((buf3 = write_mem(b2, &n2, &e)) != NULL);
        CHECK_OK(tb_bundle_read_memory(buf3, n2, NULL, 0, &r2, &e), &e);
        CHECK(r2 && (tb_bundle_program(r2)->constants[1].flags & TB_CONSTANT_EXTERNAL) &&
              tb_bundle_program(r2)->constants[0].data);
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
    CHECK(tb_bundle_read_memory(buf, n, NULL, TB_READ_NO_CHECKSUM, &r, &e) == tb_err_malformed && !r &&
          strstr(e.message, "2.5"));
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
    snprintf(json, sizeof json,
             "{\"pad\": {\"dtype\": \"F32\", \"shape\": [1000], \"data_offsets\": [0, 4000]}, \"model.w\": "
             "{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4000, 4008]}, \"tail\": {\"dtype\": \"F32\", "
             "\"shape\": "
             "[998], \"data_offsets\": [4008, 8000]}}");
    REQUIRE(st_write(path, json, big, 8000));
    make_external(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    q.k[0].name = "big", q.k[0].tensor = "tail", q.k[0].shape[0] = 998,
    q.k[0].size = 3992; /* a constant of 63 pieces */
    q.k[0].crc32 = tb_crc32(0, big + 1002, 3992);
    {
        tb_program_constant k3[3];
        k3[0] = q.k[0], k3[2] = q.k[1];
        make_external(&q);
        k3[1] = q.k[0];
        q.k[0] = k3[1], q.k[1] = k3[2];
        q.p.constants = k3, q.p.constant_count = 3;
        q.ops[3][1] = op(TB_SPACE_CONSTANT, 1, 0), q.ops[4][1] = op(TB_SPACE_CONSTANT, 2, 0),
        q.ops[5][0] = op(TB_SPACE_CONSTANT, 2, 0);
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
            CHECK(tb_model_copy_to_host(m, back,
                                        (void *)(uintptr_t)m->const_addr[0] /* (the implementation is in this file) */,
                                        sizeof back, NULL, &e) == tb_ok);
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
        CHECK(tb_model_load(&d, &m, &e) == tb_err_not_found && strstr(e.message, "model.v") &&
              strstr(e.message, "\"w\""));
        k->tensor = keep, k->dtype = TB_DTYPE_INT32;
        CHECK(tb_model_load(&d, &m, &e) == tb_err_arg_mismatch && strstr(e.message, "float32 [2]") &&
              strstr(e.message, "int32 [2]"));
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
    snprintf(json, sizeof json,
             "{\"model.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"tail\": "
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
    q.ops[3][1] = op(TB_SPACE_CONSTANT, 1, 0), q.ops[4][1] = op(TB_SPACE_CONSTANT, 2, 0),
    q.ops[5][0] = op(TB_SPACE_CONSTANT, 2, 0);
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
                CHECK(strstr(e.message, "\"big\"") && strstr(e.message, "\"tail\"") &&
                      strstr(e.message, "changed during the load"));
            } else {
                CHECK_OK(tb_model_load(&d, &m, &e), &e);
                REQUIRE(m);
                CHECK_OK(tb_model_copy_to_host(m, back, (void *)(uintptr_t)m->const_addr[0], sizeof back, NULL, &e),
                         &e);
                CHECK(back[498] == -1.0f && back[497] == 499.0f && back[499] == 501.0f); /* the bytes it read */
                tb_model_free(m);
                m = NULL;
            }
            fake.on_alloc(NULL, NULL);
        }
    unlink(path);
    tb_bundle_free(b);
}

/* Issue 40: a load's kernels load on a thread of their own while the
   calling thread uploads (the stand-in's module load waits for a copy to
   start: one does while it waits), unless TB_MODEL_SERIAL_LOAD, which
   loads them first on the calling thread (no copy yet); both give the
   same model. A kernel that fails to load fails the load the same way
   either way, after the upload's thread is done: nothing left over. The
   kernels' thread starts with no context current (the stand-in as the
   driver): each module still loads in the model's context, and every
   context pushed on any thread is popped. */
TEST(test_model_load_beside) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_model_desc d;
    tb_model_times t;
    tb_error e;
    static const size_t sizes[] = {8, 8, 4};
    char path[256], json[256], first[sizeof e.message];
    float *x = (float *)dev(16), *y = (float *)dev(16), *z = (float *)dev(16);
    int32_t *s = (int32_t *)dev(4);
    uint64_t dev0, pin, peak, calls, dv;
    int serial, loads, saw, other, bare, net;
    NEED_FAKE();
    snprintf(path, sizeof path, "build/test_beside.%d.safetensors", (int)getpid());
    snprintf(json, sizeof json, "{\"model.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}");
    REQUIRE(st_write(path, json, w_data, 8));
    make_external(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    fake.memory(&dev0, &pin, &peak, &calls);
    fake.bare_threads(1);
    net = fake.ctx_net();
    for (serial = 0; serial < 2; serial++) {
        memset(&d, 0, sizeof d);
        d.bundle = b, d.weights = path, d.flags = serial ? TB_MODEL_SERIAL_LOAD : 0, d.pinned_upload_min = 1;
        fake.set_params(sizes, 3);
        fake.module_waits(serial ? 30 : 10000);
        m = NULL;
        CHECK_OK(tb_model_load(&d, &m, &e), &e);
        fake.module_overlap(&loads, &saw, &other, &bare);
        fake.module_waits(0);
        if (loads != 1 || saw != !serial || other != !serial || bare)
            printf("    %d loads, %d saw a copy, %d on another thread, %d with no context\n", loads, saw, other, bare);
        if (serial) CHECK(loads == 1 && saw == 0 && other == 0); /* the kernel first, then the upload */
        else CHECK(loads == 1 && saw == 1 && other == 1);        /* the upload ran while the kernel loaded */
        CHECK(bare == 0 && fake.ctx_net() == net);               /* in a context; none left pushed */
        REQUIRE(m);
        tb_model_load_times(m, &t);
        CHECK(t.beside == (uint32_t)!serial && t.kernels_ms > 0 && t.upload_bytes == 8);
        CHECK(serial ? t.kernels_ms >= 25 : t.kernels_ms >= 0); /* the 30 ms wait is the kernels' phase */
        CHECK(fake.ctx_depth() == 0);
        memset(z, 0, 16);
        CHECK_OK(run_test_program(m, x, y, z, s, &e), &e);
        CHECK(z[0] == 1.0f && z[2] == 1.5f && z[3] == 2.5f && s[0] == 5);
        tb_model_free(m);
        /* the function reports 2 parameters, the record says 3: refused the same way */
        fake.set_params(sizes, 2);
        m = NULL;
        CHECK(tb_model_load(&d, &m, &e) == tb_err_arg_mismatch && !m);
        if (serial) CHECK(!strcmp(first, e.message));
        else snprintf(first, sizeof first, "%s", e.message);
        CHECK(fake.ctx_depth() == 0 && fake.ctx_net() == net);
        fake.memory(&dv, &pin, &peak, &calls);
        CHECK(dv == dev0 && pin == 0);
    }
    fake.bare_threads(0);
    fake.set_params(sizes, 3);
    d.flags = 64u; /* not a flag */
    CHECK(tb_model_load(&d, &m, &e) == tb_err_invalid_argument && strstr(e.message, "0x40"));
    unlink(path);
    tb_bundle_free(b);
    free(x), free(y), free(z), free(s);
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
    snprintf(json, sizeof json,
             "{\"pad\": {\"dtype\": \"U8\", \"shape\": [%llu], \"data_offsets\": [0, %llu]}, \"model.w\": "
             "{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [%llu, %llu]}}",
             (unsigned long long)pad, (unsigned long long)pad, (unsigned long long)pad, (unsigned long long)pad + 8);
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
             tb_model_copy_to_host(m, back, (void *)(uintptr_t)m->const_addr[0], n, NULL, e) == tb_ok &&
             !memcmp(back, bytes, n);
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
        ok = ok && dv == dev0 && pin == 0 && peak == 768 && calls == 1 && t.pinned && !t.reused &&
             t.staging_bytes == 768 && t.upload_bytes == sizeof bytes && t.threads >= 1 && t.threads <= 4 &&
             t.upload_ms >= t.pin_ms;
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
    CHECK(pin == 768 && calls == 1 && tb_model_pinned_bytes() == 768);
    for (i = 0, ok = 1, reused = 1; i < 20 && ok; i++) {
        ok = staged_load(&d, bytes, sizeof bytes, &t, &e);
        reused = reused && t.pinned && t.reused && t.pin_ms == 0 && t.staging_bytes == 768;
    }
    CHECK(ok && reused);
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 768 && peak == 768 && calls == 0);
    /* a smaller bound uses part of the held area; a larger one whose
       pinning fails uses the area as it is (still pinned, held, no pin
       left over); a larger one pins it again, larger (a quarter of the
       upload: 16 slots), the old area unpinned once the new one is there,
       and the next one uses all of it */
    d.pinned_staging_bytes = 200;
    CHECK(staged_load(&d, bytes, sizeof bytes, &t, &e) && t.reused && t.staging_bytes == 192);
    d.pinned_staging_bytes = 2048;
    fake.pin_limit(900);
    CHECK(staged_load(&d, bytes, sizeof bytes, &t, &e) && t.pinned && t.reused && t.staging_bytes == 768 &&
          t.pin_ms == 0);
    fake.pin_limit(UINT64_MAX);
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 768 && calls == 0);
    CHECK(staged_load(&d, bytes, sizeof bytes, &t, &e) && !t.reused && t.staging_bytes == 1024);
    CHECK(staged_load(&d, bytes, sizeof bytes, &t, &e) && t.reused && t.staging_bytes == 1024);
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 1024 && calls == 1 && peak <= 768 + 1024 && tb_model_pinned_bytes() == 1024);
    tb_model_free(holder);
    holder = NULL;
    fake.memory(&dev0, &pin, &peak, &calls);
    CHECK(pin == 0 && tb_model_pinned_bytes() == 0);
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
            CHECK(pin == 0 && peak <= (two ? 2u : 1u) * 768 && calls >= 1 && tb_model_pinned_bytes() == 0);
            if (peak > (two ? 2u : 1u) * 768)
                printf("    %s: peak %llu pinned bytes\n", two ? "two contexts" : "one context",
                       (unsigned long long)peak);
        }
    }
    unlink(path);
    tb_bundle_free(b);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
