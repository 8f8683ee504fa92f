/* The parsers layer: Triton's metadata JSON, the tt.func line of the IR,
   and the launch records derived from them (tensor descriptors included).
   Compiled as C99 and as C++11; run from the repository root:
   build/test_parsers [name-filter] */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

/* The TMA fixture: its record takes a tensor descriptor ('T') that the
   kernel reads through TMA; the description survives the format (section
   3), and damaged descriptions are refused. */
#define TMA_CACHE "tests/fixtures/triton-3.6-sm90-tma/cache"

/* Deriving twice adds nothing; a kernel that has a record (of several
   configs) keeps it. */
TEST(test_derive_idempotent) {
    tb_bundle *b = u_fixture_bundle(0);
    tb_error e;
    tb_launch_config cfg[2];
    tb_launch_record rec;
    memset(&cfg, 0, sizeof cfg);
    memset(&rec, 0, sizeof rec);
    REQUIRE(b);
    memset(cfg, 0, sizeof cfg);
    cfg[0].kernel_hash = cfg[1].kernel_hash = "AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ";
    cfg[0].function_name = cfg[1].function_name = "tb_add";
    cfg[0].binary_name = cfg[1].binary_name = "tb_add.cubin";
    cfg[0].arg_types = cfg[1].arg_types = "OOOi";
    cfg[0].num_warps = 4, cfg[1].num_warps = 8;
    cfg[0].num_ctas = cfg[1].num_ctas = 1;
    rec.cache_key = "my-autotuner";
    rec.kernel_name = "tb_add";
    rec.config_count = 2;
    rec.configs = cfg;
    CHECK_OK(tb_bundle_add_launch_record(b, &rec, &e), &e);
    CHECK_OK(tb_bundle_derive_launch_records(b, &e), &e);
    CHECK(tb_bundle_launch_record_count(b) == FIXTURE_KERNELS); /* 7 derived + the one given */
    CHECK_OK(tb_bundle_derive_launch_records(b, &e), &e);
    CHECK(tb_bundle_launch_record_count(b) == FIXTURE_KERNELS);
    CHECK(strcmp(tb_bundle_launch_record(b, 0)->cache_key, "my-autotuner") == 0);
    tb_bundle_free(b);
}

/* --------------------------------------------------------------- parsers */
TEST(test_metadata_json_fixture) {
    size_t n;
    unsigned char *s = u_read(FIXTURE_CACHE "/FICZDYIEHYTLJCYVG6Q353UAVW2KLMS5O63E5EBZEJQ6G6KKXVQQ/tb_matmul.json", &n);
    tb_kernel_metadata md;
    tb_error e;
    REQUIRE(s);
    CHECK_OK(tb_parse_metadata_json((const char *)s, n, &md, &e), &e);
    CHECK(strcmp(md.name, "tb_matmul") == 0);
    CHECK(md.num_warps == 8 && md.num_ctas == 1 && md.shared == 131072);
    CHECK(md.global_scratch.present && md.global_scratch.size == 0 && md.global_scratch.align == 1);
    CHECK(md.profile_scratch.present && md.profile_scratch.size == 0);
    CHECK(md.flags == 0);
    free(s);
    /* FORMAT.md [R-scratch], hardening 2.0 (7): no scratch keys (Triton before 3.3): not present, align 1, as
       Python's exporter writes it (C wrote 0 before) */
    {
        const char *old = "{\"name\": \"k\", \"num_warps\": 4}";
        CHECK_OK(tb_parse_metadata_json(old, strlen(old), &md, &e), &e);
        CHECK(!md.global_scratch.present && md.global_scratch.size == 0 && md.global_scratch.align == 1);
        CHECK(!md.profile_scratch.present && md.profile_scratch.align == 1);
    }
}

TEST(test_metadata_json_errors) {
    static const char *bad[] = {
        "", "[]", "{", "{\"name\":", "{\"name\": \"k\"}", "{\"num_warps\": 4}",
        "{\"name\": \"k\", \"num_warps\": 4,}", "{\"name\": \"k\", \"num_warps\": -4}",
        "{\"name\": \"k\", \"num_warps\": 4.5}", "{\"name\": \"k\", \"num_warps\": 99999999999999999999999}",
        "{\"name\": \"k\", \"num_warps\": 4} x", "{\"name\": \"k\\q\", \"num_warps\": 4}",
        "{\"name\": \"k\", \"num_warps\": 4, \"launch_pdl\": 1}",
        "{\"name\": \"k\", \"num_warps\": 4, \"cluster_dims\": [1, 2]}",
        "{\"name\": \"\", \"num_warps\": 4}", "{\"name\": \"k\\u0000\", \"num_warps\": 4}"};
    static const char *good =
        "{\"x\": {\"a\": [1, 2.5e3, true, null, \"s\\\"\"]}, \"name\": \"k\\u00e9\", \"num_warps\": 4,"
        " \"launch_pdl\": true, \"launch_cooperative_grid\": false, \"cluster_dims\": [2, 1, 1], \"maxnreg\": null}";
    tb_kernel_metadata md;
    tb_error e;
    size_t i;
    char deep[400];
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tb_result r = tb_parse_metadata_json(bad[i], strlen(bad[i]), &md, &e);
        CHECK(r == tb_err_parse);
        if (r != tb_err_parse) printf("    accepted: %s\n", bad[i]);
    }
    CHECK_OK(tb_parse_metadata_json(good, strlen(good), &md, &e), &e);
    CHECK(strcmp(md.name, "k\xc3\xa9") == 0);
    CHECK(md.flags == TB_CONFIG_PDL && md.cluster_dims[0] == 2);
    CHECK(!md.global_scratch.present);
    /* nesting beyond TB_MAX_JSON_DEPTH */
    strcpy(deep, "{\"x\": ");
    for (i = 0; i < 150; i++) strcat(deep, "[");
    CHECK(tb_parse_metadata_json(deep, strlen(deep), &md, &e) == tb_err_parse);
    CHECK(strstr(e.message, "deeply") != NULL);
    /* every truncation of a real file */
    {
        size_t n, k;
        unsigned char *s =
            u_read(FIXTURE_CACHE "/AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ/tb_add.json", &n);
        REQUIRE(s);
        for (k = 0; k < n - 1; k++) CHECK(tb_parse_metadata_json((const char *)s, k, &md, &e) == tb_err_parse);
        free(s);
    }
}

/* FORMAT.md [R-derive] */
TEST(test_ttfunc_fixture) {
    struct { const char *path, *fn, *types, *div;
    } cases[] = {
        { "WP4C7CSHRKNSVR76XZZ5T3MQKYJA4YDGZGC324HEJSBGTCPWN23A/tb_scalars.source", "tb_scalars", "Obhilbhileyfd",
          "1001101110000" },
        { "FICZDYIEHYTLJCYVG6Q353UAVW2KLMS5O63E5EBZEJQ6G6KKXVQQ/tb_matmul.source", "tb_matmul", "OOOiiiiii",
          "111111111" },
        { "AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ/tb_add.source", "tb_add", "OOOi", "1110" },
        { "JHIE2WWBT63JNC3MNKM4MXLWCU2GE3PH4XRUCMZMHZGOHBAFJKTA/tb_add.ttir", "tb_add", "OOOi", "1111" },
        { "72LBHDPVFLKOS26Q3453IVCTHETIPQ7OJOQE6IR3KYFIDK5O264A/tb_noargs.source", "tb_noargs", "", "" },
        { "CGP5WEMPIL5XNJDOE6BA37VRCQTQMF7JU35PELJMPT6XGWEE5CWQ/triton_per_fused_gelu_native_layer_norm_0.source",
          "triton_per_fused_gelu_native_layer_norm_0", "OOOOOOii", "11111111" },
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512], types[TB_MAX_ARGS + 1], div[TB_MAX_ARGS + 1];
        size_t n, k;
        unsigned char *s;
        tb_error e;
        snprintf(path, sizeof path, "%s/%s", FIXTURE_CACHE, cases[i].path);
        s = u_read(path, &n);
        REQUIRE(s);
        CHECK_OK(tb_parse_ttfunc((const char *)s, n, cases[i].fn, types, div, sizeof types, &e), &e);
        CHECK(strcmp(types, cases[i].types) == 0);
        CHECK(strcmp(div, cases[i].div) == 0);
        CHECK(tb_parse_ttfunc((const char *)s, n, "nope", types, div, sizeof types, &e) == tb_err_not_found);
        /* any prefix of the text: an error or the same answer, never a crash */
        for (k = 0; k < n; k += 7) {
            tb_result r = tb_parse_ttfunc((const char *)s, k, cases[i].fn, types, div, sizeof types, &e);
            if (r == tb_ok) CHECK(strcmp(types, cases[i].types) == 0);
        }
        free(s);
    }
    {
        /* a tensor descriptor: Triton's IR lists its shape (i32) and strides
           (i64) after it, which the launcher takes from the descriptor */
        const char *tma = "tt.func public @k(%a: !tt.tensordesc<tensor<128x32xf16>> loc(\"a\"), %a_0: i32, %a_1: i32, "
                          "%a_2: i64, %a_3: i64, %n: i32 {tt.divisibility = 16 : i32}) {";
        const char *cut = "tt.func public @k(%a: !tt.tensordesc<tensor<128x32xf16>> loc(\"a\"), %a_0: i32, %n: i32) {";
        const char *fp8 = "tt.func public @k(%a: f8E4M3FN) {";
        char types[8], div[8];
        tb_error e;
        CHECK_OK(tb_parse_ttfunc(tma, strlen(tma), "k", types, div, sizeof types, &e), &e);
        CHECK(strcmp(types, "Ti") == 0 && strcmp(div, "01") == 0);
        CHECK(tb_parse_ttfunc(cut, strlen(cut), "k", types, div, sizeof types, &e) == tb_err_parse);
        CHECK(tb_parse_ttfunc(fp8, strlen(fp8), "k", types, div, sizeof types, &e) == tb_err_unsupported_type);
        CHECK(tb_parse_ttfunc(
                  "tt.func public @k(%a: i32, %b: i32, %c: i32, %d: i32, %e: i32, %f: i32, %g: i32, %h: i32) {", 80,
                  "k", types, div, 4, &e) != tb_ok);
    }
    {
        /* Triton 3.6 compiles a bool (i1 or u1) to a 1-byte parameter: '?' */
        const char *b =
            "tt.func public @k(%flag: i1 loc(\"f\"), %x: i8, %p: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {";
        char types[8], div[8];
        tb_error e;
        CHECK_OK(tb_parse_ttfunc(b, strlen(b), "k", types, div, sizeof types, &e), &e);
        CHECK(strcmp(types, "?bO") == 0 && strcmp(div, "001") == 0);
    }
}

/* Records derived from the IR say so: checked mode then takes either
   reading of an integer (u8 reads as i8 there). */
/* FORMAT.md [R-derive] */
TEST(test_derived_records_flag_ir_types) {
    tb_bundle *b = u_fixture_bundle(1);
    uint32_t i;
    REQUIRE(b);
    CHECK(tb_bundle_launch_record_count(b) == FIXTURE_KERNELS);
    for (i = 0; i < tb_bundle_launch_record_count(b); i++)
        CHECK(tb_bundle_launch_record(b, i)->configs[0].flags & TB_CONFIG_TYPES_FROM_IR);
    tb_bundle_free(b);
}

/* FORMAT.md [R-tensordesc-meta]. Hardening 2.0 (8): a tensordesc_meta shorter than the IR's
   descriptors derives no record (the rest are not plain descriptors: the
   kernel was compiled for TMA), and says so at TB_LOG_WARN; before, the
   record was left out silently (TB_LOG_INFO). */
static int meta_warnings;
static void meta_logger(void *user, tb_log_level level, const char *msg) {
    (void)user;
    if (level == TB_LOG_WARN && strstr(msg, "no launch record") && strstr(msg, "tensor descriptors")) meta_warnings++;
}
TEST(test_tensordesc_meta_short) {
    static const char json[] = "{\"name\": \"k2\", \"num_warps\": 4, \"tensordesc_meta\": [{\"swizzle\": 3, "
                               "\"elem_size\": 4, \"elem_type\": 7, \"block_size\": [32, 32], \"fp4_padded\": false}]}";
    static const char ir[] =
        "  tt.func public @k2(%a: !tt.tensordesc<tensor<32x32xf32>> loc(\"a\"(#loc)), %a_0: i32, %a_1: i32, %a_2: i64, "
        "%a_3: i64, %b: !tt.tensordesc<tensor<32x32xf32>> loc(\"b\"(#loc)), %b_0: i32, %b_1: i32, %b_2: i64, %b_3: "
        "i64, "
        "%n: i32) attributes {noinline = false} {\n";
    tb_bundle *b = NULL;
    tb_options o;
    tb_error e;
    uint32_t k;
    memset(&o, 0, sizeof o);
    o.log = meta_logger;
    meta_warnings = 0;
    CHECK_OK(tb_bundle_create(&o, &b, &e), &e);
    CHECK_OK(tb_bundle_add_kernel(b, "H2", 0, &k, &e), &e);
    CHECK_OK(tb_bundle_add_artifact(b, k, "k2.cubin", "CUBIN", 5, TB_COPY, &e), &e);
    CHECK_OK(tb_bundle_add_artifact(b, k, "k2.json", json, strlen(json), TB_COPY, &e), &e);
    CHECK_OK(tb_bundle_add_artifact(b, k, "k2.source", ir, strlen(ir), TB_COPY, &e), &e);
    CHECK_OK(tb_bundle_derive_launch_records(b, &e), &e);
    CHECK(tb_bundle_launch_record_count(b) == 0 && meta_warnings == 1);
    tb_bundle_free(b);
}

/* FORMAT.md [R-tensordesc] [R-order] */
TEST(test_tensordesc_records) {
    tb_bundle *b = NULL, *r = NULL;
    tb_error e;
    tb_collect_options o;
    tb_collect_report rep;
    const tb_launch_config *c;
    size_t size;
    unsigned char *buf, *sec3;
    memset(&o, 0, sizeof o);
    o.recorded_cache_dir = "/tmp/probe_cache";
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(tb_collect_cache(b, TMA_CACHE, &o, &rep, &e), &e);
    CHECK_OK(tb_bundle_derive_launch_records(b, &e), &e);
    REQUIRE(tb_bundle_launch_record_count(b) == 1);
    c = &tb_bundle_launch_record(b, 0)->configs[0];
    CHECK(strcmp(c->arg_types, "TOii") == 0 && strcmp(c->arg_divisibility, "0111") == 0);
    REQUIRE(c->tensordesc_count == 1 && c->tensordescs);
    CHECK(c->tensordescs[0].tma == 1 && c->tensordescs[0].rank == 2 && c->tensordescs[0].swizzle == 3 &&
          c->tensordescs[0].elem_size == 4 && c->tensordescs[0].elem_type == 7 && c->tensordescs[0].block[0] == 32 &&
          c->tensordescs[0].block[1] == 32 && c->tensordescs[0].fp4_padded == 0);
    buf = u_serialize(b, &size);
    REQUIRE(buf);
    CHECK(u_le32(buf + 24) == 3); /* kernels, records, tensor descriptors */
    CHECK_OK(tb_bundle_read_memory(buf, size, NULL, 0, &r, &e), &e);
    REQUIRE(r);
    c = &tb_bundle_launch_record(r, 0)->configs[0];
    CHECK(c->tensordesc_count == 1 && memcmp(c->tensordescs, tb_bundle_launch_record(b, 0)->configs[0].tensordescs,
                                             sizeof(tb_tensordesc_meta)) == 0);
    tb_bundle_free(r);
    r = NULL;
    /* section 3 is the last 8 + 64 bytes before the trailer, after its 16-byte header */
    sec3 = buf + size - 8 - 72;
    CHECK(u_le32(sec3 - 16) == 3 && u_le32(sec3) == 1);
    sec3[8 + 4] = 2; /* the entry names argument 2, which is no 'T' */
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, NULL, 0, &r, &e) == tb_err_malformed &&
          strstr(e.message, "tensor descriptor"));
    sec3[8 + 4] = 0;
    sec3[8 + 12] = 6; /* rank 6 */
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, NULL, 0, &r, &e) == tb_err_malformed);
    sec3[8 + 12] = 2;
    sec3[8 + 52] = 1; /* a reserved field */
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, NULL, 0, &r, &e) == tb_err_malformed);
    sec3[8 + 52] = 0;
    sec3[8 + 32] = 0; /* block 0 */
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, NULL, 0, &r, &e) == tb_err_malformed && strstr(e.message, "block"));
    sec3[8 + 32] = 32;
    reseal(buf, size);
    CHECK_OK(tb_bundle_read_memory(buf, size, NULL, 0, &r, &e), &e);
    tb_bundle_free(r);
    r = NULL;
    /* section 3 before section 2: refused (its entries name configs) */
    {
        size_t at = 32, span[3][2], q, o = 32;
        unsigned char *sw = (unsigned char *)malloc(size);
        for (q = 0; q < 3; q++) {
            size_t len = (size_t)u_le64(buf + at + 8);
            span[q][0] = at, span[q][1] = 16 + ((len + 7) & ~(size_t)7);
            at += span[q][1];
        }
        memcpy(sw, buf, 32);
        for (q = 0; q < 3; q++) { /* 1, 3, 2 */
            size_t which = q == 0 ? 0 : q == 1 ? 2 : 1;
            memcpy(sw + o, buf + span[which][0], span[which][1]);
            o += span[which][1];
        }
        memcpy(sw + o, buf + o, size - o);
        CHECK(o == size - 8);
        reseal(sw, size);
        CHECK(tb_bundle_read_memory(sw, size, NULL, 0, &r, &e) == tb_err_malformed &&
              strstr(e.message, "before section 2"));
        free(sw);
    }
    /* without section 3 the 'T' has no description: refused */
    u_put32(buf + 24, 2);
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, NULL, 0, &r, &e) == tb_err_malformed);
    free(buf);
    /* a builder's record must describe each 'T' */
    {
        tb_launch_record rec = *tb_bundle_launch_record(b, 0);
        tb_launch_config cf = rec.configs[0];
        rec.cache_key = "other";
        rec.configs = &cf;
        cf.tensordesc_count = 0;
        CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_malformed);
        cf.tensordesc_count = 1;
        CHECK_OK(tb_bundle_add_launch_record(b, &rec, &e), &e);
    }
    tb_bundle_free(b);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
