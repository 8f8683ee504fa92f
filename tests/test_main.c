/* The CPU test suite: data model, format, parsers, conversions, collect and
   emit. Compiled as C99 and as C++11. Run from the repository root:
       build/test_main [name-filter]          */
#define TRITON_BUNDLE_IMPLEMENTATION
#define TB__PACK_HELD_MAX 1 /* the pack reads ahead only while nothing read is unwritten: its byte budget at work */
#include "../triton_bundle.h"
#include "harness.h"
#include "util.h"
#include "fp16_vectors.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

static const char *filter;

/* ---------------------------------------------------------------- basics */
static void test_result_strings(void) {
    int i, j;
    for (i = 0; i < (int)tb_result_count_; i++) {
        const char *s = tb_result_string((tb_result)i);
        CHECK(s && *s && strcmp(s, "unknown result") != 0);
        for (j = 0; j < i; j++) CHECK(strcmp(s, tb_result_string((tb_result)j)) != 0);
    }
    CHECK(strcmp(tb_result_string((tb_result)999), "unknown result") == 0);
    CHECK(strcmp(tb_version(), TB_VERSION_STRING) == 0);
    CHECK(tb_ok == 0);
}

/* XXH3_64bits values from the xxHash library (xxhsum -H3 prints the same) */
static void test_xxh3_vectors(void) {
    static const struct { size_t len; unsigned long long h; } v[] = {
        {17, 0x208BDE5EE2BED407ULL},   {128, 0xF92B70EAA21A6288ULL},  {129, 0xF8F76713F2BB60FAULL},
        {240, 0xCCC7375172C41F03ULL},  {241, 0x0B3B630948CE4A00ULL},  {1024, 0x23BC880EBF0D29C6ULL},
        {1025, 0xC09FDFBC398C7D82ULL}, {2048, 0x19F6F9C987331373ULL}, {4096, 0xA3C19F8174CDE0BBULL},
        {100000, 0xCCF90DF7E7E37036ULL}};
    static const char *text = "Nobody inspects the spammish repetition";
    unsigned char *b = (unsigned char *)malloc(100000), *copy = (unsigned char *)malloc(100000);
    size_t i, bad = 0;
    CHECK(tb_xxh3_64("", 0) == 0x2D06800538D394C2ULL);
    CHECK(tb_xxh3_64("a", 1) == 0xE6C632B61E964E1FULL);
    CHECK(tb_xxh3_64("abc", 3) == 0x78AF5F94892F3950ULL);
    CHECK(tb_xxh3_64(text, strlen(text)) == 0x6CB00603B5CC47E9ULL);
    for (i = 0; i < 100000; i++) b[i] = (unsigned char)(i * 31 + 7);
    for (i = 0; i < sizeof v / sizeof v[0]; i++) CHECK(tb_xxh3_64(b, v[i].len) == v[i].h);
    /* streaming in uneven pieces, with and without the copy, equals one shot */
    srand(99);
    for (i = 0; i < 300; i++) {
        size_t len = (size_t)rand() % 100000, off = 0;
        tb__xxh h, hc;
        tb__xxh_init(&h);
        tb__xxh_init(&hc);
        memset(copy, 0, len);
        while (off < len) {
            size_t c = (size_t)rand() % (rand() % 4 ? 300 : 9000);
            if (c > len - off) c = len - off;
            tb__xxh_update(&h, b + off, c);
            tb__xxh_update_to(&hc, copy + off, b + off, c);
            off += c;
        }
        if (tb__xxh_digest(&h) != tb_xxh3_64(b, len) || tb__xxh_digest(&hc) != tb_xxh3_64(b, len) ||
            memcmp(copy, b, len) != 0)
            bad++;
    }
    CHECK(bad == 0);
    free(b);
    free(copy);
}

/* The format 2 checksum: XXH3-64 of the blocks' XXH3-64 values. The two
   fixed values were computed with xxhsum -H3 over `split -b 1048576`
   pieces, their values packed little-endian and hashed again. */
static uint64_t block_checksum_reference(const unsigned char *p, size_t n) {
    size_t blocks = n ? (n - 1) / 1048576 + 1 : 1, i;
    unsigned char *v = (unsigned char *)malloc(blocks * 8);
    uint64_t r;
    for (i = 0; i < blocks; i++) {
        size_t at = i * 1048576, len = n - at < 1048576 ? n - at : 1048576;
        tb__put64(v + 8 * i, tb_xxh3_64(p + at, len));
    }
    r = tb_xxh3_64(v, blocks * 8);
    free(v);
    return r;
}

static void test_threads_block_checksum(void) {
    size_t n = (size_t)40 << 20, i, bad = 0;
    size_t sizes[] = {0, 1, 100, 1048575, 1048576, 1048577, 3 * 1048576 + 5, 8 * 1048576, 17 * 1048576 + 3,
                      (size_t)40 << 20};
    unsigned char *b = (unsigned char *)malloc(n);
    REQUIRE(b);
    for (i = 0; i < n; i++) b[i] = (unsigned char)((uint32_t)i * 2654435761u >> 13);
    CHECK(tb_bundle_checksum(b, 100) == 0x5680EAA8FABF77DAULL);
    CHECK(tb_bundle_checksum(b, 3 * 1048576 + 5) == 0xCA34026D3D50EA03ULL);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (tb_bundle_checksum(b, sizes[i]) != block_checksum_reference(b, sizes[i])) bad++;
    CHECK(bad == 0);
    /* one changed byte in any block changes it */
    {
        uint64_t before = tb_bundle_checksum(b, n);
        b[(size_t)33 << 20] ^= 1;
        CHECK(tb_bundle_checksum(b, n) != before && tb_bundle_checksum(b, n) == block_checksum_reference(b, n));
    }
    free(b);
}

/* A file the 1.0 writer produced (triton_bundle.h 1.0.0, one fixture
   kernel) still reads, with its whole-file XXH3-64 checked; its contents
   written again come out as format 2.1 with the same sections. */
static void test_format_1_0_compatibility(void) {
    size_t n = 0, n2 = 0;
    unsigned char *old = u_read("tests/fixtures/format-1.0.tbundle", &n), *again;
    tb_bundle *b = NULL;
    tb_error e;
    REQUIRE(old && n > 1000);
    CHECK(tb__le16(old + 8) == 1 && tb__le16(old + 10) == 0);
    CHECK(tb__le64(old + n - 8) == tb_xxh3_64(old, n - 8));
    CHECK_OK(tb_bundle_read_memory(old, n, NULL, 0, &b, &e), &e);
    CHECK(tb_bundle_format_version(b) == 0x10000u && tb_bundle_kernel_count(b) == 1);
    {
        tb_bundle *built = NULL;
        CHECK_OK(tb_bundle_create(NULL, &built, &e), &e);
        CHECK(tb_bundle_format_version(built) == 0 && tb_bundle_format_version(NULL) == 0);
        tb_bundle_free(built);
    }
    CHECK(tb_bundle_launch_record_count(b) == 1);
    again = u_serialize(b, &n2);
    CHECK(again && n2 == n && tb__le16(again + 8) == 2 && tb__le16(again + 10) == 1);
    CHECK(again && memcmp(again + 12, old + 12, n - 20) == 0 && memcmp(again, old, 8) == 0);
    CHECK(again && tb__le64(again + n - 8) == tb_bundle_checksum(again, n - 8));
    tb_bundle_free(b);
    b = NULL;
    CHECK_OK(tb_bundle_read_memory(again, n2, NULL, 0, &b, &e), &e);
    CHECK(tb_bundle_format_version(b) == 0x20001u);
    tb_bundle_free(b);
    b = NULL;
    /* a 1.0 file is checked with the 1.0 checksum: a flipped byte fails */
    old[n / 2] ^= 0x10;
    CHECK(tb_bundle_read_memory(old, n, NULL, 0, &b, &e) == tb_err_checksum && b == NULL);
    CHECK(strstr(e.message, "format 1") != NULL);
    free(again);
    free(old);
}

/* write through a callback in odd-sized pieces must equal the memory writer */
typedef struct { unsigned char *buf; size_t n, cap; int fail_at; int calls; } sink_t;
static int sink_cb(void *user, const void *data, size_t size) {
    sink_t *s = (sink_t *)user;
    if (s->fail_at && ++s->calls >= s->fail_at) return -1;
    if (s->n + size > s->cap) return -1;
    memcpy(s->buf + s->n, data, size);
    s->n += size;
    return 0;
}

/* ------------------------------------------------------------ data model */
static void test_builder_and_names(void) {
    tb_bundle *b;
    tb_error e;
    uint32_t k;
    tb_names *nm = NULL;
    tb_launch_config cfg;
    tb_launch_record rec;
    tb_config_param params[1];
    static const unsigned char bytes[] = {1, 2, 3};
    static const char json[] = "{}";
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    REQUIRE(b);
    CHECK(tb_bundle_storage(b) == TB_STORAGE_OWNED);
    CHECK_OK(tb_bundle_add_kernel(b, "HASH1", 3, &k, &e), &e);
    CHECK(k == 0);
    CHECK_OK(tb_bundle_add_artifact(b, k, "k.cubin", bytes, 3, TB_COPY, &e), &e);
    CHECK_OK(tb_bundle_add_artifact(b, k, "k.json", json, 2, TB_REFERENCE, &e), &e);
    CHECK_OK(tb_bundle_add_artifact(b, k, "empty.ttir", NULL, 0, TB_COPY, &e), &e);
    CHECK(tb_bundle_add_artifact(b, k, "k.cubin", bytes, 3, TB_COPY, &e) == tb_err_invalid_argument);
    CHECK(tb_bundle_add_artifact(b, 7, "x", bytes, 3, TB_COPY, &e) == tb_err_invalid_argument);
    CHECK(tb_bundle_kernel(b, 0)->artifact_count == 3);
    CHECK(tb_bundle_kernel(b, 0)->device == 3);
    CHECK(tb_kernel_find_artifact(tb_bundle_kernel(b, 0), "k.cubin")->data != (const void *)bytes);
    CHECK(memcmp(tb_kernel_find_artifact(tb_bundle_kernel(b, 0), "k.cubin")->data, bytes, 3) == 0);
    CHECK(tb_kernel_find_artifact(tb_bundle_kernel(b, 0), "k.json")->data == (const void *)json); /* referenced */
    CHECK(tb_bundle_find_kernel(b, "HASH1") == tb_bundle_kernel(b, 0));
    CHECK(tb_bundle_find_kernel(b, "nope") == NULL);

    memset(&cfg, 0, sizeof cfg);
    cfg.kernel_hash = "HASH1";
    cfg.function_name = "k";
    cfg.binary_name = "k.cubin";
    cfg.arg_types = "OOi";
    cfg.arg_divisibility = "110";
    cfg.num_warps = 4;
    cfg.num_ctas = 1;
    params[0].name = "XBLOCK";
    params[0].value = 1024;
    cfg.param_count = 1;
    cfg.params = params;
    rec.cache_key = "key1";
    rec.kernel_name = "k_static";
    rec.config_count = 1;
    rec.configs = &cfg;
    CHECK_OK(tb_bundle_add_launch_record(b, &rec, &e), &e);
    CHECK(tb_bundle_launch_record(b, 0)->configs[0].params[0].value == 1024);
    CHECK(tb_bundle_launch_record(b, 0)->configs[0].arg_types != cfg.arg_types);
    cfg.arg_types = "OOz";
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_unsupported_type);
    cfg.arg_types = "OOi";
    cfg.arg_divisibility = "11";
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_malformed);
    cfg.arg_divisibility = "";
    cfg.num_warps = 0;
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_malformed);
    cfg.num_warps = 4;
    cfg.binary_name = "../k.cubin";
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_bad_name);
    CHECK(tb_bundle_launch_record_count(b) == 1);

    CHECK_OK(tb_bundle_names(b, &nm, &e), &e);
    REQUIRE(nm);
    CHECK(nm->cached_count == 1 && strcmp(nm->cached[0], "k") == 0);
    CHECK(nm->static_count == 1 && strcmp(nm->statically_launched[0], "k_static") == 0);
    tb_names_free(nm);
    tb_bundle_free(b);
}

/* The smallest things the format holds: empty files with one-letter names,
   a kernel with no files, a bundle with no kernels: all read back. */
static void test_smallest_items_roundtrip(void) {
    tb_bundle *b, *r = NULL;
    tb_error e;
    uint32_t k, i;
    unsigned char *buf;
    size_t n;
    char name[2] = {0, 0};
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    buf = u_serialize(b, &n);
    CHECK(buf && tb_bundle_read_memory(buf, n, NULL, 0, &r, &e) == tb_ok && tb_bundle_kernel_count(r) == 0);
    tb_bundle_free(r);
    free(buf);
    CHECK_OK(tb_bundle_add_kernel(b, "A", 0, &k, &e), &e);
    buf = u_serialize(b, &n); /* kernels, but no file in any: found by the fuzzer */
    r = NULL;
    CHECK(buf && tb_bundle_read_memory(buf, n, NULL, 0, &r, &e) == tb_ok && tb_bundle_kernel_count(r) == 1);
    tb_bundle_free(r);
    free(buf);
    CHECK_OK(tb_bundle_add_kernel(b, "B", 0, &k, &e), &e);
    for (i = 0; i < 26; i++) {
        name[0] = (char)('a' + i);
        CHECK_OK(tb_bundle_add_artifact(b, k, name, NULL, 0, TB_COPY, &e), &e);
    }
    buf = u_serialize(b, &n);
    REQUIRE(buf);
    r = NULL;
    CHECK_OK(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e), &e);
    CHECK(r && tb_bundle_kernel_count(r) == 2 && tb_bundle_kernel(r, 0)->artifact_count == 0 &&
          tb_bundle_kernel(r, 1)->artifact_count == 26 && tb_bundle_kernel(r, 1)->artifacts[25].size == 0);
    tb_bundle_free(r);
    free(buf);
    tb_bundle_free(b);
}

static void test_bad_names_builder(void) {
    static const char *bad[] = {"", ".", "..", "a/b", "/abs", "a\\b", "../x"};
    char longname[300];
    tb_bundle *b;
    tb_error e;
    uint32_t k;
    size_t i;
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    REQUIRE(b);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(tb_bundle_add_kernel(b, bad[i], 0, &k, &e) == tb_err_bad_name);
        CHECK(strstr(e.message, "safe file name") != NULL);
    }
    memset(longname, 'a', 256);
    longname[256] = 0;
    CHECK(tb_bundle_add_kernel(b, longname, 0, &k, &e) == tb_err_bad_name);
    longname[255] = 0;
    CHECK_OK(tb_bundle_add_kernel(b, longname, 0, &k, &e), &e);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(tb_bundle_add_artifact(b, k, bad[i], "x", 1, TB_COPY, &e) == tb_err_bad_name);
    CHECK(tb_bundle_kernel_count(b) == 1);
    tb_bundle_free(b);
}

static void test_arg_codes(void) {
    static const char *sig[] = {"*fp32", "*i8", "i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16",
                                "u32", "u64", "fp16", "bf16", "fp32", "fp64", "constexpr"};
    char out[64];
    char code;
    tb_error e;
    CHECK_OK(tb_arg_types_from_signature(sig, sizeof sig / sizeof sig[0], out, sizeof out, &e), &e);
    CHECK(strcmp(out, "OO?bhil?BHIKeyfd") == 0); /* i1 and u1: a 1-byte bool */
    CHECK(tb_arg_code_from_triton_type("nvTmaDesc", &code, &e) == tb_err_unsupported_type);
    CHECK(strstr(e.message, "TMA") != NULL);
    CHECK(tb_arg_code_from_triton_type("tensordesc<fp16[128, 32]>", &code, &e) == tb_ok && code == 'T');
    CHECK(tb_arg_code_size('T') == 8);
    CHECK(tb_arg_code_from_triton_type("fp8e4nv", &code, &e) == tb_err_unsupported_type);
    CHECK(strstr(e.message, "fp8e4nv") != NULL && strstr(e.message, "fp8 scalar") != NULL);
    CHECK(tb_arg_code_from_triton_type("*", &code, &e) == tb_err_unsupported_type);
    CHECK(tb_arg_types_from_signature(sig, 4, out, 3, &e) == tb_err_limit);
    CHECK(tb_arg_code_size('O') == 8 && tb_arg_code_size('b') == 1 && tb_arg_code_size('y') == 2 &&
          tb_arg_code_size('I') == 4 && tb_arg_code_size('?') == 1 && tb_arg_code_size('x') == 0);
}

/* ---------------------------------------------------------------- format */
static void test_fixture_roundtrip(void) {
    tb_bundle *b = u_fixture_bundle(1), *r = NULL, *rc = NULL, *rf = NULL;
    unsigned char *buf, *buf2;
    size_t size, size2;
    tb_error e;
    uint32_t i, j, files = 0;
    char path[512];
    char *dir;
    REQUIRE(b);
    CHECK(tb_bundle_kernel_count(b) == FIXTURE_KERNELS);
    CHECK(tb_bundle_launch_record_count(b) == FIXTURE_KERNELS);
    buf = u_serialize(b, &size);
    REQUIRE(buf);
    CHECK_OK(tb_bundle_read_memory(buf, size, NULL, 0, &r, &e), &e);
    CHECK_OK(tb_bundle_read_memory(buf, size, NULL, TB_READ_COPY, &rc, &e), &e);
    dir = u_tempdir("rt");
    snprintf(path, sizeof path, "%s/f.tbundle", dir);
    CHECK_OK(tb_bundle_write_file(b, path, TB_WRITE_FSYNC, &e), &e);
    CHECK_OK(tb_bundle_read_file(path, NULL, 0, &rf, &e), &e);
    REQUIRE(r && rc && rf);
    CHECK(tb_bundle_storage(r) == TB_STORAGE_VIEW);
    CHECK(tb_bundle_storage(rc) == TB_STORAGE_OWNED);
    CHECK(tb_bundle_storage(rf) == TB_STORAGE_MAPPED);
    CHECK(tb_bundle_kernel_count(r) == FIXTURE_KERNELS);
    for (i = 0; i < tb_bundle_kernel_count(b); i++) {
        const tb_kernel *k = tb_bundle_kernel(b, i), *k2 = tb_bundle_kernel(rf, i);
        CHECK(strcmp(k->hash, k2->hash) == 0 && k->artifact_count == k2->artifact_count);
        for (j = 0; j < k->artifact_count; j++) {
            const tb_artifact *a = &k->artifacts[j], *a2 = &k2->artifacts[j];
            unsigned char *disk;
            size_t dn;
            files++;
            CHECK(strcmp(a->name, a2->name) == 0 && a->size == a2->size && memcmp(a->data, a2->data, a->size) == 0);
            CHECK(((uintptr_t)a2->data & 15u) == 0);  /* mapped bytes can go to the driver */
            CHECK(a2->data == (const void *)((const unsigned char *)a2->data));
            snprintf(path, sizeof path, "%s/%s/%s", FIXTURE_CACHE, k->hash, a->name);
            disk = u_read(path, &dn);
            REQUIRE(disk);
            if (strstr(a->name, ".json")) {
                /* every recorded path became the sentinel */
                CHECK(tb__memmem(a->data, a->size, FIXTURE_RECORDED) == NULL);
                if (strncmp(a->name, "__grp__", 7) == 0) CHECK(tb__memmem(a->data, a->size, "[REPLACE]/") != NULL);
            } else {
                CHECK(dn == a->size && memcmp(disk, a->data, dn) == 0);
            }
            free(disk);
        }
    }
    CHECK(files == FIXTURE_FILES);
    for (i = 0; i < tb_bundle_launch_record_count(b); i++) {
        const tb_launch_config *c1 = &tb_bundle_launch_record(b, i)->configs[0];
        const tb_launch_config *c2 = &tb_bundle_launch_record(rc, i)->configs[0];
        CHECK(strcmp(c1->arg_types, c2->arg_types) == 0 && strcmp(c1->function_name, c2->function_name) == 0);
        CHECK(c1->num_warps == c2->num_warps && c1->shared_mem == c2->shared_mem);
        CHECK(c1->global_scratch.present == 1 && c2->profile_scratch.present == 1);
    }
    /* the format is canonical: re-serializing what was read gives the same bytes */
    buf2 = u_serialize(rf, &size2);
    CHECK(buf2 && size2 == size && memcmp(buf, buf2, size) == 0);
    free(buf2);
    /* the writer's callback path gives the same bytes */
    {
        sink_t s;
        memset(&s, 0, sizeof s);
        s.buf = (unsigned char *)malloc(size);
        s.cap = size;
        CHECK_OK(tb_bundle_write_callback(b, sink_cb, &s, &e), &e);
        CHECK(s.n == size && memcmp(s.buf, buf, size) == 0);
        s.n = 0;
        s.fail_at = 3;
        CHECK(tb_bundle_write_callback(b, sink_cb, &s, &e) == tb_err_io);
        free(s.buf);
    }
    /* count then fill */
    CHECK(tb_bundle_write_memory(b, buf, size - 1, &size2, &e) == tb_err_invalid_argument);
    CHECK(size2 == size);
    tb_bundle_free(r);
    tb_bundle_free(rc);
    tb_bundle_free(rf);
    tb_bundle_free(b);
    free(buf);
    u_rmtree(dir);
    free(dir);
}

/* Deriving twice adds nothing; a kernel that has a record (of several
   configs) keeps it. */
static void test_derive_idempotent(void) {
    tb_bundle *b = u_fixture_bundle(0);
    tb_error e;
    tb_launch_config cfg[2];
    tb_launch_record rec;
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

static void test_names_fixture(void) {
    tb_bundle *b = u_fixture_bundle(1);
    tb_names *nm = NULL;
    tb_error e;
    uint32_t i, adds = 0;
    REQUIRE(b);
    CHECK_OK(tb_bundle_names(b, &nm, &e), &e);
    REQUIRE(nm);
    CHECK(nm->cached_count == FIXTURE_KERNELS);
    CHECK(nm->static_count == FIXTURE_KERNELS);
    for (i = 0; i < nm->cached_count; i++) adds += strcmp(nm->cached[i], "tb_add") == 0;
    CHECK(adds == 2);
    tb_names_free(nm);
    tb_bundle_free(b);
}

/* A small real bundle: the tb_noargs kernel and its record. */
static unsigned char *small_bundle(size_t *size) {
    tb_bundle *b;
    tb_error e;
    tb_collect_options o;
    unsigned char *buf;
    memset(&o, 0, sizeof o);
    o.recorded_cache_dir = FIXTURE_RECORDED;
    if (tb_bundle_create(NULL, &b, &e) != tb_ok) return NULL;
    if (tb_collect_kernel(b, FIXTURE_CACHE, "72LBHDPVFLKOS26Q3453IVCTHETIPQ7OJOQE6IR3KYFIDK5O264A", 0, &o, &e) != tb_ok ||
        tb_bundle_derive_launch_records(b, &e) != tb_ok) {
        tb_bundle_free(b);
        return NULL;
    }
    buf = u_serialize(b, size);
    tb_bundle_free(b);
    return buf;
}

static void reseal(unsigned char *buf, size_t size) { tb__put64(buf + size - 8, tb_bundle_checksum(buf, size - 8)); }

static void test_truncation_every_offset(void) {
    size_t size, i;
    unsigned char *buf = small_bundle(&size), *copy;
    tb_bundle *b;
    tb_error e;
    REQUIRE(buf);
    CHECK(size > 4096);
    for (i = 0; i < size; i++) {
        copy = (unsigned char *)malloc(i ? i : 1);
        memcpy(copy, buf, i);
        b = NULL;
        if (tb_bundle_read_memory(copy, i, NULL, 0, &b, &e) == tb_ok || b) {
            CHECK(!"truncated bundle accepted");
            tb_bundle_free(b);
            free(copy);
            break;
        }
        CHECK(e.code == tb_err_truncated || e.code == tb_err_bad_magic);
        free(copy);
    }
    CHECK_OK(tb_bundle_read_memory(buf, size, NULL, 0, &b, &e), &e);
    tb_bundle_free(b);
    free(buf);
}

static void test_every_bit_flip(void) {
    size_t size, i;
    int bit;
    unsigned char *buf = small_bundle(&size);
    tb_bundle *b;
    tb_error e;
    unsigned undetected = 0;
    REQUIRE(buf);
    for (i = 0; i < size; i++)
        for (bit = 0; bit < 8; bit++) {
            buf[i] ^= (unsigned char)(1u << bit);
            b = NULL;
            if (tb_bundle_read_memory(buf, size, NULL, 0, &b, &e) == tb_ok) undetected++;
            tb_bundle_free(b);
            buf[i] ^= (unsigned char)(1u << bit);
        }
    CHECK(undetected == 0);
    free(buf);
}

/* Flips with the checksum skipped: the structure checks alone must never
   crash, and whatever loads must still hold safe names. */
static void test_bit_flips_unchecked_structure(void) {
    size_t size, i, accepted = 0;
    int bit;
    unsigned char *buf = small_bundle(&size);
    tb_bundle *b;
    tb_error e;
    REQUIRE(buf);
    for (i = 0; i < size; i += 3)
        for (bit = 0; bit < 8; bit += 3) {
            buf[i] ^= (unsigned char)(1u << bit);
            b = NULL;
            if (tb_bundle_read_memory(buf, size, NULL, TB_READ_NO_CHECKSUM, &b, &e) == tb_ok) {
                uint32_t k, a;
                accepted++;
                for (k = 0; k < tb_bundle_kernel_count(b); k++) {
                    const tb_kernel *kn = tb_bundle_kernel(b, k);
                    CHECK(tb__valid_name(kn->hash, strlen(kn->hash)));
                    for (a = 0; a < kn->artifact_count; a++)
                        CHECK(tb__valid_name(kn->artifacts[a].name, strlen(kn->artifacts[a].name)));
                }
            }
            tb_bundle_free(b);
            buf[i] ^= (unsigned char)(1u << bit);
        }
    CHECK(accepted > 0); /* flips inside payload bytes load fine without the checksum */
    free(buf);
}

static void test_header_errors(void) {
    size_t size;
    unsigned char *buf = small_bundle(&size), *big;
    tb_bundle *b = NULL;
    tb_error e;
    REQUIRE(buf);
    buf[1] = 'X';
    CHECK(tb_bundle_read_memory(buf, size, NULL, 0, &b, &e) == tb_err_bad_magic);
    CHECK(e.offset == 0);
    buf[1] = 'T';
    CHECK(tb_bundle_read_memory("GIF89a", 6, NULL, 0, &b, &e) == tb_err_bad_magic);
    CHECK(tb_bundle_read_memory("", 0, NULL, 0, &b, &e) == tb_err_truncated);
    /* a newer major version is refused by name, even with a good checksum,
       and so is major 0 */
    buf[8] = 3;
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, NULL, 0, &b, &e) == tb_err_unsupported_version);
    CHECK(strstr(e.message, "3.1") != NULL);
    buf[8] = 0;
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, NULL, 0, &b, &e) == tb_err_unsupported_version);
    /* major 1 with a format 2 checksum is damage, not a version */
    buf[8] = 1;
    CHECK(tb_bundle_read_memory(buf, size, NULL, 0, &b, &e) == tb_err_checksum);
    /* a newer minor version reads */
    buf[8] = 2;
    buf[10] = 7;
    reseal(buf, size);
    CHECK_OK(tb_bundle_read_memory(buf, size, NULL, 0, &b, &e), &e);
    tb_bundle_free(b);
    b = NULL;
    buf[10] = 0;
    reseal(buf, size);
    /* checksum mismatch names the offset of the trailer */
    buf[size - 1] ^= 1;
    CHECK(tb_bundle_read_memory(buf, size, NULL, 0, &b, &e) == tb_err_checksum);
    CHECK(e.offset == (long long)(size - 8));
    buf[size - 1] ^= 1;
    /* trailing bytes */
    big = (unsigned char *)malloc(size + 8);
    memcpy(big, buf, size);
    memset(big + size, 0, 8);
    CHECK(tb_bundle_read_memory(big, size + 8, NULL, 0, &b, &e) == tb_err_malformed);
    free(big);
    CHECK(b == NULL);
    free(buf);
}

/* Inserts a section after the header: unknown optional ones are skipped,
   unknown required ones refused. */
static void test_unknown_sections(void) {
    size_t size, nsize;
    unsigned char *buf = small_bundle(&size), *nb;
    tb_bundle *b = NULL;
    tb_error e;
    REQUIRE(buf);
    nsize = size + 16 + 16; /* keeps later payloads 16-byte aligned */
    nb = (unsigned char *)malloc(nsize);
    memcpy(nb, buf, 32);
    tb__put32(nb + 32, 99);       /* type */
    tb__put32(nb + 36, 0);        /* optional */
    tb__put64(nb + 40, 13);       /* 13 bytes + 3 padding */
    memcpy(nb + 48, "from the future\0", 16);
    nb[61] = nb[62] = nb[63] = 0;
    memcpy(nb + 64, buf + 32, size - 32);
    tb__put64(nb + 16, nsize);
    tb__put32(nb + 24, 3);
    reseal(nb, nsize);
    CHECK_OK(tb_bundle_read_memory(nb, nsize, NULL, 0, &b, &e), &e);
    CHECK(b && tb_bundle_kernel_count(b) == 1);
    tb_bundle_free(b);
    b = NULL;
    tb__put32(nb + 36, 1);        /* now required */
    reseal(nb, nsize);
    CHECK(tb_bundle_read_memory(nb, nsize, NULL, 0, &b, &e) == tb_err_unsupported_version);
    CHECK(strstr(e.message, "99") != NULL);
    free(nb);
    free(buf);
}

/* counting allocator: the largest request and the balance */
static size_t ca_live, ca_max_request, ca_allocs;
static long ca_fail_at = -1;
static void *ca_alloc(void *u, size_t n) {
    size_t *p;
    (void)u;
    if (ca_fail_at >= 0 && (long)ca_allocs >= ca_fail_at) return NULL;
    ca_allocs++;
    if (n > ca_max_request) ca_max_request = n;
    p = (size_t *)malloc(n + 16);
    if (!p) return NULL;
    *p = n;
    ca_live++;
    return (char *)p + 16;
}
static void ca_free(void *u, void *ptr) {
    (void)u;
    if (!ptr) return;
    ca_live--;
    free((char *)ptr - 16);
}
static void *ca_realloc(void *u, void *ptr, size_t n) {
    void *np;
    if (!ptr) return ca_alloc(u, n);
    np = ca_alloc(u, n);
    if (!np) return NULL;
    memcpy(np, ptr, *(size_t *)((char *)ptr - 16) < n ? *(size_t *)((char *)ptr - 16) : n);
    ca_free(u, ptr);
    return np;
}
static tb_options ca_options(void) {
    tb_options o;
    memset(&o, 0, sizeof o);
    o.allocator.alloc = ca_alloc;
    o.allocator.realloc = ca_realloc;
    o.allocator.free = ca_free;
    return o;
}

static void test_absurd_counts(void) {
    size_t size;
    unsigned char *buf = small_bundle(&size);
    tb_bundle *b = NULL;
    tb_error e;
    tb_options o = ca_options();
    tb_result r;
    REQUIRE(buf);
    /* kernel count at offset 48 (header 32 + section header 16) */
    CHECK(tb__le32(buf + 48) == 1);
    tb__put32(buf + 48, 0xFFFFFFFFu);
    reseal(buf, size);
    ca_max_request = 0;
    r = tb_bundle_read_memory(buf, size, &o, 0, &b, &e);
    CHECK(r == tb_err_limit);
    tb__put32(buf + 48, 900000);
    reseal(buf, size);
    r = tb_bundle_read_memory(buf, size, &o, 0, &b, &e);
    CHECK(r == tb_err_truncated);
    CHECK(strstr(e.message, "cannot fit") != NULL);
    CHECK(ca_max_request < 4096);  /* refused before allocating for the claimed count */
    tb__put32(buf + 48, 1);
    /* artifact total */
    tb__put32(buf + 52, 0x7FFFFFFFu);
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, &o, 0, &b, &e) == tb_err_truncated);
    CHECK(ca_max_request < 4096);
    tb__put32(buf + 52, 9);
    /* the kernel hash's length */
    tb__put32(buf + 56, 0x7FFFFFF0u);
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, &o, 0, &b, &e) == tb_err_limit);
    CHECK(e.offset == 56);
    CHECK(b == NULL);
    CHECK(ca_live == 0);
    free(buf);
}

/* Patches names inside a serialized bundle (same length) and reseals it:
   the reader must refuse every unsafe name before anything could write. */
static void test_bad_names_in_bundle(void) {
    /* separators put into the first artifact name, its length unchanged */
    static const char *const bad[] = {"/", "\\"};
    size_t size, i;
    unsigned char *buf = small_bundle(&size);
    tb_bundle *b = NULL;
    tb_error e;
    REQUIRE(buf);
    CHECK(tb__le32(buf + 128) == strlen("__grp__tb_noargs.json"));
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char *c = (unsigned char *)malloc(size);
        memcpy(c, buf, size);
        c[132 + 3] = (unsigned char)bad[i][0];
        reseal(c, size);
        CHECK(tb_bundle_read_memory(c, size, NULL, 0, &b, &e) == tb_err_bad_name);
        CHECK(e.offset == 128 && strstr(e.message, "artifact name") != NULL);
        CHECK(b == NULL);
        free(c);
    }
    /* same-length replacement of the kernel hash: ".." padded name "../../../..." */
    {
        unsigned char *c = (unsigned char *)malloc(size);
        uint32_t hl = tb__le32(buf + 56);
        memcpy(c, buf, size);
        memset(c + 60, '.', hl);
        c[61] = '/';
        reseal(c, size);
        CHECK(tb_bundle_read_memory(c, size, NULL, 0, &b, &e) == tb_err_bad_name);
        CHECK(e.offset == 56);
        CHECK(strstr(e.message, "kernel hash") != NULL);
        memset(c + 60, '.', hl);
        c[60 + hl - 1] = 0; /* embedded NUL */
        reseal(c, size);
        CHECK(tb_bundle_read_memory(c, size, NULL, 0, &b, &e) == tb_err_malformed);
        memcpy(c, buf, size);
        tb__put32(c + 56, 2);  /* hash ".." made by shortening: padding then not zero */
        c[60] = '.';
        c[61] = '.';
        c[62] = 0;
        reseal(c, size);
        CHECK(tb_bundle_read_memory(c, size, NULL, 0, &b, &e) != tb_ok);
        free(c);
    }
    free(buf);
}

static void test_allocator_failures(void) {
    size_t size;
    unsigned char *buf = small_bundle(&size);
    tb_options o = ca_options();
    tb_error e;
    long n;
    int saw_oom = 0, saw_ok = 0;
    REQUIRE(buf);
    for (n = 0; n < 40; n++) {
        tb_bundle *b = NULL;
        tb_result r;
        ca_allocs = 0;
        ca_fail_at = n;
        r = tb_bundle_read_memory(buf, size, &o, TB_READ_COPY, &b, &e);
        if (r == tb_err_out_of_memory) saw_oom = 1;
        else if (r == tb_ok) saw_ok = 1;
        else CHECK(!"unexpected result");
        CHECK((r == tb_ok) == (b != NULL));
        tb_bundle_free(b);
        CHECK(ca_live == 0);
    }
    /* building and collecting under failing allocations */
    for (n = 0; n < 200; n++) {
        tb_bundle *b = NULL;
        tb_collect_options co;
        memset(&co, 0, sizeof co);
        co.recorded_cache_dir = FIXTURE_RECORDED;
        ca_allocs = 0;
        ca_fail_at = n;
        if (tb_bundle_create(&o, &b, &e) == tb_ok) {
            tb_collect_cache(b, FIXTURE_CACHE, &co, NULL, &e);
            tb_bundle_derive_launch_records(b, &e);
            tb_bundle_free(b);
        }
        CHECK(ca_live == 0);
    }
    /* the streaming pack (one thread: this allocator counts without locks) */
    {
        char *out = u_tempdir("packoom"), path[700];
        tb_pack_options po;
        int packed = 0, refused = 0;
        memset(&po, 0, sizeof po);
        po.collect.recorded_cache_dir = FIXTURE_RECORDED;
        po.collect.threads = 1;
        snprintf(path, sizeof path, "%s/b.tbundle", out);
        for (n = 0; n < 120; n++) {
            tb_result r;
            ca_allocs = 0;
            ca_fail_at = n;
            r = tb_pack_cache(FIXTURE_CACHE, path, &po, &o, NULL, &e);
            CHECK(ca_live == 0);
            if (r == tb_ok) packed++, unlink(path);
            else refused++;
            CHECK(u_count_entries(out, NULL) == 0);
        }
        CHECK(packed > 0 && refused > 0);
        u_rmtree(out);
        free(out);
    }
    ca_fail_at = -1;
    CHECK(saw_oom && saw_ok);
    free(buf);
}

/* --------------------------------------------------------------- parsers */
static void test_metadata_json_fixture(void) {
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
}

static void test_metadata_json_errors(void) {
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
        unsigned char *s = u_read(FIXTURE_CACHE "/AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ/tb_add.json", &n);
        REQUIRE(s);
        for (k = 0; k < n - 1; k++) CHECK(tb_parse_metadata_json((const char *)s, k, &md, &e) == tb_err_parse);
        free(s);
    }
}

static void test_ttfunc_fixture(void) {
    struct { const char *path, *fn, *types, *div; } cases[] = {
        {"WP4C7CSHRKNSVR76XZZ5T3MQKYJA4YDGZGC324HEJSBGTCPWN23A/tb_scalars.source", "tb_scalars", "Obhilbhileyfd",
         "1001101110000"},
        {"FICZDYIEHYTLJCYVG6Q353UAVW2KLMS5O63E5EBZEJQ6G6KKXVQQ/tb_matmul.source", "tb_matmul", "OOOiiiiii", "111111111"},
        {"AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ/tb_add.source", "tb_add", "OOOi", "1110"},
        {"JHIE2WWBT63JNC3MNKM4MXLWCU2GE3PH4XRUCMZMHZGOHBAFJKTA/tb_add.ttir", "tb_add", "OOOi", "1111"},
        {"72LBHDPVFLKOS26Q3453IVCTHETIPQ7OJOQE6IR3KYFIDK5O264A/tb_noargs.source", "tb_noargs", "", ""},
        {"CGP5WEMPIL5XNJDOE6BA37VRCQTQMF7JU35PELJMPT6XGWEE5CWQ/triton_per_fused_gelu_native_layer_norm_0.source",
         "triton_per_fused_gelu_native_layer_norm_0", "OOOOOOii", "11111111"},
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
        CHECK(tb_parse_ttfunc("tt.func public @k(%a: i32, %b: i32, %c: i32, %d: i32, %e: i32, %f: i32, %g: i32, %h: i32) {",
                              80, "k", types, div, 4, &e) != tb_ok);
    }
    {
        /* Triton 3.6 compiles a bool (i1 or u1) to a 1-byte parameter: '?' */
        const char *b = "tt.func public @k(%flag: i1 loc(\"f\"), %x: i8, %p: !tt.ptr<f32> {tt.divisibility = 16 : i32}) {";
        char types[8], div[8];
        tb_error e;
        CHECK_OK(tb_parse_ttfunc(b, strlen(b), "k", types, div, sizeof types, &e), &e);
        CHECK(strcmp(types, "?bO") == 0 && strcmp(div, "001") == 0);
    }
}

/* Records derived from the IR say so: checked mode then takes either
   reading of an integer (u8 reads as i8 there). */
static void test_derived_records_flag_ir_types(void) {
    tb_bundle *b = u_fixture_bundle(1);
    uint32_t i;
    REQUIRE(b);
    CHECK(tb_bundle_launch_record_count(b) == FIXTURE_KERNELS);
    for (i = 0; i < tb_bundle_launch_record_count(b); i++)
        CHECK(tb_bundle_launch_record(b, i)->configs[0].flags & TB_CONFIG_TYPES_FROM_IR);
    tb_bundle_free(b);
}

/* ----------------------------------------------------------- conversions */
static void test_fp16_vectors(void) {
    size_t i;
    unsigned bad = 0;
    for (i = 0; i < sizeof fp16_vectors / sizeof fp16_vectors[0]; i++) {
        double d;
        uint64_t bits = fp16_vectors[i].d;
        memcpy(&d, &bits, 8);
        if (tb_fp16_from_double(d) != fp16_vectors[i].h) {
            if (bad++ < 5) printf("    %.17g -> %04x, want %04x\n", d, tb_fp16_from_double(d), fp16_vectors[i].h);
        }
    }
    CHECK(bad == 0);
    CHECK(tb_fp16_from_double(1.5) == 0x3E00);
    CHECK(tb_fp16_from_double(-2.25) == 0xC080);
    CHECK(tb_fp16_from_double(0.0 / 0.0) == 0x7E00 || tb_fp16_from_double(0.0 / 0.0) == 0xFE00);
    /* every finite fp16 survives the round trip */
    for (i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        if (((h >> 10) & 31) == 31) continue;
        if (tb_fp16_from_double(tb_fp16_to_double(h)) != h) bad++;
    }
    CHECK(bad == 0);
}

static void test_bf16_triton_packing(void) {
    CHECK(tb_bf16_from_double(-2.25) == 0xC010);
    CHECK(tb_bf16_from_double(1.5) == 0x3FC0);
    CHECK(tb_bf16_from_double(3.14159) == 0x4049);
    /* float 0x3F80C000: Triton truncates to 0x3F80 (round-to-nearest would give 0x3F81) */
    CHECK(tb_bf16_from_double(1.005859375) == 0x3F80);
    CHECK(tb_bf16_to_double(0xC010) == -2.25);
}

static void test_pack_args(void) {
    tb_arg s;
    tb_error e;
    unsigned char *p = (unsigned char *)&s;
    CHECK(sizeof(tb_arg) == 8);
    CHECK_OK(tb_pack_arg('b', tb_arg_i(-7), 1, &s, &e), &e);
    CHECK(p[0] == 0xF9 && p[1] == 0);
    CHECK_OK(tb_pack_arg('B', tb_arg_u(200), 1, &s, &e), &e);
    CHECK(p[0] == 200);
    /* checked mode takes what Triton 3.6's launcher takes (i8 0..255 with
       Python's "b"), and what the bits can hold, no more */
    CHECK_OK(tb_pack_arg('b', tb_arg_i(200), 1, &s, &e), &e);
    CHECK(p[0] == 200);
    CHECK(tb_pack_arg('b', tb_arg_i(256), 1, &s, &e) == tb_err_arg_range);
    CHECK(strstr(e.message, "256") != NULL);
    CHECK(tb_pack_arg('b', tb_arg_i(-129), 1, &s, &e) == tb_err_arg_range);
    CHECK_OK(tb_pack_arg('b', tb_arg_i(256), 0, &s, &e), &e); /* unchecked: the low bits */
    CHECK(p[0] == 0);
    CHECK(tb_pack_arg('B', tb_arg_i(-1), 1, &s, &e) == tb_ok && p[0] == 0xFF);
    CHECK(tb_pack_arg('B', tb_arg_i(256), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_pack_arg('B', tb_arg_i(-129), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_pack_arg('?', tb_arg_i(1), 1, &s, &e) == tb_ok && p[0] == 1 && p[1] == 0);
    CHECK(tb_pack_arg('?', tb_arg_i(0), 1, &s, &e) == tb_ok && p[0] == 0);
    CHECK(tb_pack_arg('?', tb_arg_i(2), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_pack_arg('?', tb_arg_i(-1), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_pack_arg('h', tb_arg_i(-32769), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_pack_arg('h', tb_arg_i(32768), 1, &s, &e) == tb_err_arg_range); /* Triton refuses it too */
    CHECK(tb_pack_arg('H', tb_arg_i(-32768), 1, &s, &e) == tb_ok && p[0] == 0x00 && p[1] == 0x80);
    CHECK(tb_pack_arg('H', tb_arg_u(65536), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_pack_arg('I', tb_arg_i(-1), 1, &s, &e) == tb_ok && *(uint32_t *)(void *)p == 0xffffffffu);
    CHECK(tb_pack_arg('I', tb_arg_u(0x100000000ULL), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_pack_arg('H', tb_arg_u(60000), 1, &s, &e) == tb_ok && p[0] == 0x60 && p[1] == 0xEA);
    CHECK(tb_pack_arg('i', tb_arg_i((int64_t)1 << 31), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_pack_arg('i', tb_arg_i(-70000), 1, &s, &e) == tb_ok && *(int32_t *)(void *)p == -70000);
    CHECK(tb_pack_arg('I', tb_arg_u(4000000000u), 1, &s, &e) == tb_ok && *(uint32_t *)(void *)p == 4000000000u);
    CHECK(tb_pack_arg('K', tb_arg_u(9223372036854779904ULL), 1, &s, &e) == tb_ok && s.u == 9223372036854779904ULL);
    CHECK(tb_pack_arg('e', tb_arg_f(1.5), 1, &s, &e) == tb_ok && p[0] == 0x00 && p[1] == 0x3E && p[2] == 0);
    CHECK(tb_pack_arg('e', tb_arg_f(70000.0), 1, &s, &e) == tb_err_arg_range);
    CHECK(tb_pack_arg('y', tb_arg_f(-2.25), 1, &s, &e) == tb_ok && p[0] == 0x10 && p[1] == 0xC0);
    CHECK(tb_pack_arg('f', tb_arg_f(3.14159), 1, &s, &e) == tb_ok && *(float *)(void *)p == 3.14159f);
    CHECK(tb_pack_arg('d', tb_arg_f(2.718281828459045), 1, &s, &e) == tb_ok && s.f == 2.718281828459045);
    CHECK(tb_pack_arg('O', tb_arg_p((void *)0x1234), 1, &s, &e) == tb_ok && s.u == 0x1234);
    CHECK(tb_pack_arg('x', tb_arg_i(0), 1, &s, &e) == tb_err_unsupported_type);
}

static void test_too_many_args(void) {
    tb_bundle *b;
    tb_error e;
    tb_launch_config cfg;
    tb_launch_record rec;
    char types[TB_MAX_ARGS + 2];
    memset(types, 'i', sizeof types);
    types[TB_MAX_ARGS + 1] = 0;
    memset(&cfg, 0, sizeof cfg);
    cfg.kernel_hash = "H";
    cfg.function_name = "k";
    cfg.binary_name = "k.cubin";
    cfg.arg_types = types;
    cfg.num_warps = 4;
    cfg.num_ctas = 1;
    rec.cache_key = "k";
    rec.kernel_name = "k";
    rec.config_count = 1;
    rec.configs = &cfg;
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_limit);
    CHECK(strstr(e.message, "TB_MAX_ARGS") != NULL);
    types[TB_MAX_ARGS] = 0;
    CHECK_OK(tb_bundle_add_launch_record(b, &rec, &e), &e);
    tb_bundle_free(b);
}

/* The launcher's CPU-side behaviour where no GPU is present. */
static void test_launcher_without_driver(void) {
    tb_error e;
    tb_loaded_kernel *k = (tb_loaded_kernel *)1;
    tb_launch_config cfg;
    tb_result r = tb_driver_load(&e);
    if (r == tb_ok) SKIP("a CUDA driver is present here; the GPU suite covers loading");
    CHECK(r == tb_err_no_driver || r == tb_err_no_device);
    CHECK(strstr(e.message, "libcuda") != NULL);
    memset(&cfg, 0, sizeof cfg);
    cfg.kernel_hash = "H";
    cfg.function_name = "k";
    cfg.binary_name = "k.cubin";
    cfg.arg_types = "";
    cfg.num_warps = 4;
    cfg.num_ctas = 1;
    CHECK(tb_load_cubin("x", 1, &cfg, NULL, NULL, &k, &e) == r);
    CHECK(k == NULL);
    CHECK(tb_driver_symbol("cuMemAlloc_v2") == NULL);
}

/* ------------------------------------------------------------ filesystem */
static int files_equal(const char *a, const char *b) {
    size_t na, nb;
    unsigned char *x = u_read(a, &na), *y = u_read(b, &nb);
    int eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

/* Checks a cache written by emit against the fixture: every file identical,
   JSON with the recorded path swapped for the new one. */
static int check_emitted(const char *cache, int quiet) {
    tb_bundle *b = u_fixture_bundle(0);
    uint32_t i, j;
    int bad = 0;
    if (!b) return 1;
    for (i = 0; i < tb_bundle_kernel_count(b); i++) {
        const tb_kernel *k = tb_bundle_kernel(b, i);
        char dir[600];
        snprintf(dir, sizeof dir, "%s/%s", cache, k->hash);
        if (u_count_entries(dir, NULL) != (int)k->artifact_count) {
            if (!quiet) printf("    %s holds %d files, want %u\n", dir, u_count_entries(dir, NULL), k->artifact_count);
            bad++;
            continue;
        }
        for (j = 0; j < k->artifact_count; j++) {
            char got[900], want[900];
            snprintf(got, sizeof got, "%s/%s", dir, k->artifacts[j].name);
            snprintf(want, sizeof want, "%s/%s/%s", FIXTURE_CACHE, k->hash, k->artifacts[j].name);
            if (strstr(k->artifacts[j].name, ".json")) {
                size_t n, m, rn;
                unsigned char *g = u_read(got, &n), *w = u_read(want, &m), *expect;
                char abs[600], from[600];
                tb__absolute(dir, abs, sizeof abs, NULL);
                snprintf(from, sizeof from, "%s/%s", FIXTURE_RECORDED, k->hash);
                expect = NULL;
                if (w && tb__replace_size(w, m, from, abs, &rn) >= 0 && (expect = (unsigned char *)malloc(rn + 1)))
                    tb__replace_into(expect, w, m, from, abs);
                if (!g || !expect || n != rn || memcmp(g, expect, n) != 0) {
                    if (!quiet) printf("    %s differs from the fixture with paths swapped\n", got);
                    bad++;
                }
                free(g);
                free(w);
                free(expect);
            } else if (!files_equal(got, want)) {
                if (!quiet) printf("    %s differs from the fixture\n", got);
                bad++;
            }
        }
    }
    tb_bundle_free(b);
    return bad;
}

static void test_collect_emit_fixture(void) {
    tb_bundle *b = u_fixture_bundle(1);
    char *dir = u_tempdir("emit");
    char cache[600];
    tb_emit_report rep;
    tb_names *nm = NULL;
    tb_error e;
    REQUIRE(b);
    snprintf(cache, sizeof cache, "%s/nested/cache", dir);
    CHECK_OK(tb_emit(b, cache, NULL, &rep, &nm, &e), &e);
    CHECK(rep.written == FIXTURE_KERNELS && rep.present == 0 && rep.failed == 0);
    CHECK(nm && nm->cached_count == FIXTURE_KERNELS && nm->static_count == FIXTURE_KERNELS);
    tb_names_free(nm);
    CHECK(check_emitted(cache, 0) == 0);
    CHECK(u_count_entries(cache, "tmp.") == 0);
    /* a second emit finds everything present and writes nothing */
    CHECK_OK(tb_emit(b, cache, NULL, &rep, NULL, &e), &e);
    CHECK(rep.written == 0 && rep.present == FIXTURE_KERNELS);
    /* emitted cache collects back to the same bundle bytes */
    {
        tb_bundle *b2;
        unsigned char *s1, *s2;
        size_t n1, n2;
        CHECK_OK(tb_bundle_create(NULL, &b2, &e), &e);
        CHECK_OK(tb_collect_cache(b2, cache, NULL, NULL, &e), &e);
        CHECK_OK(tb_bundle_derive_launch_records(b2, &e), &e);
        s1 = u_serialize(b, &n1);
        s2 = u_serialize(b2, &n2);
        CHECK(s1 && s2 && n1 == n2 && memcmp(s1, s2, n1) == 0);
        free(s1);
        free(s2);
        tb_bundle_free(b2);
    }
    /* an empty directory under the final name is replaced */
    {
        char p[700];
        tb_bundle *one;
        uint32_t k;
        snprintf(p, sizeof p, "%s/c2", dir);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/c2/HASHX", dir);
        mkdir(p, 0755);
        CHECK_OK(tb_bundle_create(NULL, &one, &e), &e);
        CHECK_OK(tb_bundle_add_kernel(one, "HASHX", 0, &k, &e), &e);
        CHECK_OK(tb_bundle_add_artifact(one, k, "a.json", "[REPLACE]/a", 11, TB_COPY, &e), &e);
        snprintf(p, sizeof p, "%s/c2", dir);
        CHECK_OK(tb_emit(one, p, NULL, &rep, NULL, &e), &e);
        CHECK(rep.written == 1);
        snprintf(p, sizeof p, "%s/c2/HASHX/a.json", dir);
        {
            size_t n;
            unsigned char *s = u_read(p, &n);
            char want[700];
            snprintf(want, sizeof want, "%s/c2/HASHX/a", dir);
            CHECK(s && n == strlen(want) && memcmp(s, want, n) == 0);
            free(s);
        }
        tb_bundle_free(one);
    }
    tb_bundle_free(b);
    u_rmtree(dir);
    free(dir);
}

static void make_dir(const char *base, const char *name) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", base, name);
    mkdir(p, 0755);
}
static void make_file(const char *base, const char *name, const char *content) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", base, name);
    u_write(p, content, strlen(content));
}

static void test_collect_edge_cases(void) {
    char *dir = u_tempdir("coll"), *outside = u_tempdir("outside");
    char p[700];
    tb_bundle *b;
    tb_error e;
    tb_collect_report rep;
    const tb_kernel *k;
    /* a kernel dir, a launcher dir (no __grp__), a file, a tmp dir, a symlinked kernel dir */
    make_dir(dir, "K1");
    make_file(dir, "K1/__grp__k.json", "{\"child_paths\": {\"k.cubin\": \"DIR/K1/k.cubin\"}}");
    make_file(dir, "K1/k.cubin", "CUBIN");
    make_dir(dir, "K1/sub");
    make_file(dir, "K1/sub/hidden", "no");
    make_file(outside, "secret", "SECRET");
    snprintf(p, sizeof p, "%s/secret", outside);
    snprintf(p + 300, 300, "%s/K1/link.json", dir);
    CHECK(symlink(p, p + 300) == 0);
    make_dir(dir, "LAUNCHER");
    make_file(dir, "LAUNCHER/__triton_launcher.so", "ELF");
    make_file(dir, "plainfile", "x");
    make_dir(dir, "tmp.123");
    make_file(dir, "tmp.123/__grp__x.json", "{}");
    snprintf(p, sizeof p, "%s/K1", dir);
    snprintf(p + 300, 300, "%s/KLINK", dir);
    CHECK(symlink(p, p + 300) == 0);
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(tb_collect_cache(b, dir, NULL, &rep, &e), &e);
    CHECK(rep.collected == 1 && rep.failed == 0 && rep.skipped == 4);
    k = tb_bundle_find_kernel(b, "K1");
    REQUIRE(k);
    CHECK(k->artifact_count == 2);            /* no symlinked file, no subdirectory */
    CHECK(tb_kernel_find_artifact(k, "link.json") == NULL);
    CHECK(tb_kernel_find_artifact(k, "hidden") == NULL);
    CHECK(tb_bundle_find_kernel(b, "KLINK") == NULL);
    /* missing kernel directory */
    CHECK(tb_collect_kernel(b, dir, "NOPE", 0, NULL, &e) == tb_err_not_found);
    CHECK(strstr(e.message, "NOPE") != NULL);
    CHECK(tb_collect_kernel(b, dir, "KLINK", 0, NULL, &e) != tb_ok); /* never through a link */
    CHECK(tb_collect_cache(b, "/nonexistent/cache", NULL, NULL, &e) == tb_err_not_found);
    /* the sentinel already in a JSON file fails that kernel, cleanly */
    make_dir(dir, "K2");
    make_file(dir, "K2/__grp__k.json", "{\"p\": \"[REPLACE]/k.cubin\"}");
    make_file(dir, "K2/k.cubin", "CUBIN");
    CHECK(tb_collect_kernel(b, dir, "K2", 0, NULL, &e) == tb_err_sentinel);
    CHECK(strcmp(e.kernel, "K2") == 0 && strstr(e.file, "__grp__") != NULL);
    CHECK(tb_bundle_find_kernel(b, "K2") == NULL);
    CHECK(tb_bundle_kernel_count(b) == 1);
    tb_bundle_free(b);
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK(tb_collect_cache(b, dir, NULL, &rep, &e) == tb_err_sentinel);
    CHECK(rep.collected == 1 && rep.failed == 1);
    tb_bundle_free(b);
    u_rmtree(dir);
    u_rmtree(outside);
    free(dir);
    free(outside);
}

static void test_collect_path_swap(void) {
    /* a cache written where it is now: its own absolute path is swapped */
    char *dir = u_tempdir("swap");
    char content[800], p[700];
    tb_bundle *b;
    tb_error e;
    const tb_artifact *a;
    make_dir(dir, "H");
    snprintf(content, sizeof content, "{\"a\": \"%s/H/k.cubin\", \"b\": \"%s/H/k.json\"}", dir, dir);
    make_file(dir, "H/__grp__k.json", content);
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(tb_collect_kernel(b, dir, "H", 0, NULL, &e), &e);
    a = tb_kernel_find_artifact(tb_bundle_find_kernel(b, "H"), "__grp__k.json");
    REQUIRE(a);
    CHECK(a->size == strlen("{\"a\": \"[REPLACE]/k.cubin\", \"b\": \"[REPLACE]/k.json\"}"));
    CHECK(memcmp(a->data, "{\"a\": \"[REPLACE]/k.cubin\", \"b\": \"[REPLACE]/k.json\"}", (size_t)a->size) == 0);
    /* relative cache paths resolve against the working directory */
    if (getcwd(p, sizeof p)) {
        char rel[700];
        tb_bundle *b2;
        CHECK(chdir(dir) == 0);
        snprintf(rel, sizeof rel, ".");
        CHECK_OK(tb_bundle_create(NULL, &b2, &e), &e);
        CHECK_OK(tb_collect_kernel(b2, rel, "H", 0, NULL, &e), &e);
        a = tb_kernel_find_artifact(tb_bundle_find_kernel(b2, "H"), "__grp__k.json");
        CHECK(a && tb__memmem(a->data, (size_t)a->size, "[REPLACE]/k.cubin") != NULL);
        tb_bundle_free(b2);
        CHECK(chdir(p) == 0);
    }
    tb_bundle_free(b);
    u_rmtree(dir);
    free(dir);
}

static void test_emit_hostile_targets(void) {
    char *dir = u_tempdir("host"), *outside = u_tempdir("outside2");
    char p[700], q[700];
    tb_bundle *b;
    tb_error e;
    tb_emit_report rep;
    uint32_t k;
    /* the target name is a symlink to a directory elsewhere: never written through */
    snprintf(p, sizeof p, "%s/EVIL", dir);
    CHECK(symlink(outside, p) == 0);
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(tb_bundle_add_kernel(b, "EVIL", 0, &k, &e), &e);
    CHECK_OK(tb_bundle_add_artifact(b, k, "f.cubin", "x", 1, TB_COPY, &e), &e);
    CHECK(tb_emit(b, dir, NULL, &rep, NULL, &e) == tb_err_io);
    CHECK(rep.failed == 1 && strstr(e.message, "not a directory") != NULL);
    CHECK(u_count_entries(outside, NULL) == 0);
    CHECK(u_count_entries(dir, "tmp.") == 0);
    /* a cache path that cannot be a directory */
    snprintf(q, sizeof q, "%s/afile", dir);
    u_write(q, "x", 1);
    snprintf(q, sizeof q, "%s/afile/cache", dir);
    CHECK(tb_emit(b, q, NULL, &rep, NULL, &e) == tb_err_io);
    CHECK(strstr(e.message, "afile") != NULL);
    tb_bundle_free(b);
    u_rmtree(dir);
    u_rmtree(outside);
    free(dir);
    free(outside);
}

static void test_emit_readonly_dir(void) {
    char *dir = u_tempdir("ro");
    tb_bundle *b = u_fixture_bundle(0);
    tb_error e;
    tb_emit_report rep;
    REQUIRE(b);
    chmod(dir, 0555);
    if (access(dir, W_OK) == 0) {
        chmod(dir, 0755);
        tb_bundle_free(b);
        u_rmtree(dir);
        free(dir);
        SKIP("running as root: permissions do not stop writes (the file-size test covers write failures)");
    }
    CHECK(tb_emit(b, dir, NULL, &rep, NULL, &e) == tb_err_io);
    CHECK(rep.failed == FIXTURE_KERNELS && e.sys_errno == EACCES);
    chmod(dir, 0755);
    CHECK(u_count_entries(dir, NULL) == 0);
    tb_bundle_free(b);
    u_rmtree(dir);
    free(dir);
}

/* A bundle of blocks on several threads (40 MiB + a small kernel) */
static tb_bundle *big_bundle(unsigned char **blob_out) {
    size_t n = (size_t)40 << 20, i;
    unsigned char *blob = (unsigned char *)malloc(n);
    tb_bundle *b;
    tb_error e;
    uint32_t k;
    if (!blob) return NULL;
    for (i = 0; i < n; i++) blob[i] = (unsigned char)((uint32_t)i * 2654435761u >> 13);
    if (tb_bundle_create(NULL, &b, &e) != tb_ok) return NULL;
    if (tb_bundle_add_kernel(b, "BIG", 0, &k, &e) || tb_bundle_add_artifact(b, k, "a.cubin", blob, n - 12345, TB_REFERENCE, &e) ||
        tb_bundle_add_artifact(b, k, "b.bin", blob + 7, 12345, TB_REFERENCE, &e)) {
        tb_bundle_free(b);
        return NULL;
    }
    *blob_out = blob;
    return b;
}

/* A real full disk and a real read-only filesystem: a 160 KiB tmpfs, then
   the same remounted read-only. Needs mount privileges; skipped without. */
static void test_emit_full_disk_and_readonly_fs(void) {
    char *dir = u_tempdir("fs");
    char cmd[800];
    tb_bundle *b = u_fixture_bundle(0);
    tb_emit_report rep;
    tb_error e;
    tb_result r;
    REQUIRE(b);
    snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=160k tbtest %s 2>/dev/null", dir);
    if (geteuid() != 0 || system(cmd) != 0) {
        tb_bundle_free(b);
        u_rmtree(dir);
        free(dir);
        SKIP("cannot mount a small tmpfs here (needs root and mount rights)");
    }
    r = tb_emit(b, dir, NULL, &rep, NULL, &e);
    CHECK(r == tb_err_io && rep.failed > 0 && rep.written > 0);
    CHECK(e.sys_errno == ENOSPC);
    CHECK(u_count_entries(dir, "tmp.") == 0);
    {   /* a bundle file too large for the file system: ENOSPC, and the
           temporary file is gone */
        unsigned char *blob = NULL;
        tb_bundle *big = big_bundle(&blob);
        char p[900];
        int before = u_count_entries(dir, NULL);
        REQUIRE(big);
        snprintf(p, sizeof p, "%s/big.tbundle", dir);
        CHECK(tb_bundle_write_file(big, p, 0, &e) == tb_err_io && e.sys_errno == ENOSPC);
        CHECK(u_count_entries(dir, NULL) == before);
        CHECK(tb_pack_cache(FIXTURE_CACHE, p, NULL, NULL, NULL, &e) == tb_err_io && e.sys_errno == ENOSPC);
        CHECK(u_count_entries(dir, NULL) == before);
        tb_bundle_free(big);
        free(blob);
    }
    {
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            char p[1400];
            const tb_kernel *k = tb_bundle_find_kernel(b, de->d_name);
            if (de->d_name[0] == '.') continue;
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            CHECK(k && u_count_entries(p, NULL) == (int)k->artifact_count); /* complete, or absent */
        }
        if (d) closedir(d);
    }
    snprintf(cmd, sizeof cmd, "mount -o remount,ro %s", dir);
    CHECK(system(cmd) == 0);
    {
        int before = u_count_entries(dir, NULL);
        tb_emit_options eo;
        memset(&eo, 0, sizeof eo);
        eo.threads = 1;
        r = tb_emit(b, dir, &eo, &rep, NULL, &e);
        CHECK(r == tb_err_io && e.sys_errno == EROFS && rep.failed > 0);
        CHECK(rep.written == 0 && strstr(e.message, "temporary directory") != NULL);
        CHECK(u_count_entries(dir, NULL) == before);
    }
    snprintf(cmd, sizeof cmd, "umount %s", dir);
    CHECK(system(cmd) == 0);
    tb_bundle_free(b);
    u_rmtree(dir);
    free(dir);
}

/* Write failure: a file-size limit makes large files fail mid-write. */
/* The readers and writers in threads: the same bundle, the same cache, the
   same reports, callbacks in kernel order. */
static void test_threads_collect_same_bundle(void) {
    unsigned threads[] = {1, 2, 3, 8};
    unsigned char *ref = NULL;
    size_t ref_n = 0, t;
    char *dir = u_tempdir("thr");
    char p[700];
    for (t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        tb_bundle *b;
        tb_error e;
        tb_collect_options o;
        tb_collect_report rep;
        unsigned char *buf;
        size_t n;
        memset(&o, 0, sizeof o);
        o.recorded_cache_dir = FIXTURE_RECORDED;
        o.threads = threads[t];
        CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
        CHECK_OK(tb_collect_cache(b, FIXTURE_CACHE, &o, &rep, &e), &e);
        CHECK(rep.collected == FIXTURE_KERNELS);
        buf = u_serialize(b, &n);
        if (!ref) {
            ref = buf;
            ref_n = n;
        } else {
            CHECK(buf && n == ref_n && memcmp(buf, ref, n) == 0);
            free(buf);
        }
        tb_bundle_free(b);
    }
    free(ref);
    /* a failing kernel in the middle: the same first error and counts */
    snprintf(p, sizeof p, "cp -r %s/* %s/ && mkdir %s/MIDDLE && echo '[REPLACE]' > %s/MIDDLE/__grp__x.json", FIXTURE_CACHE,
             dir, dir, dir);
    CHECK(system(p) == 0);
    for (t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        tb_bundle *b;
        tb_error e;
        tb_collect_options o;
        tb_collect_report rep;
        memset(&o, 0, sizeof o);
        o.threads = threads[t];
        CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
        CHECK(tb_collect_cache(b, dir, &o, &rep, &e) == tb_err_sentinel);
        CHECK(strcmp(e.kernel, "MIDDLE") == 0);
        CHECK(rep.collected == FIXTURE_KERNELS && rep.failed == 1 && tb_bundle_kernel_count(b) == FIXTURE_KERNELS);
        tb_bundle_free(b);
    }
    u_rmtree(dir);
    free(dir);
}

/* Large bundles are hashed on several threads, in windows of whole blocks,
   while the memory writer copies or the callback writes in order: the
   bytes must be those a one-thread reference computes. */
static void test_threads_parallel_checksum(void) {
    unsigned char *blob = NULL, *mem, *cb;
    tb_bundle *b = big_bundle(&blob);
    tb_error e;
    size_t size;
    sink_t s;
    REQUIRE(b);
    mem = u_serialize(b, &size);
    REQUIRE(mem);
    CHECK(tb__le64(mem + size - 8) == block_checksum_reference(mem, size - 8));
    memset(&s, 0, sizeof s);
    s.buf = cb = (unsigned char *)malloc(size);
    s.cap = size;
    CHECK_OK(tb_bundle_write_callback(b, sink_cb, &s, &e), &e);
    CHECK(s.n == size && memcmp(cb, mem, size) == 0);
    {
        tb_bundle *r = NULL;
        CHECK_OK(tb_bundle_read_memory(cb, size, NULL, 0, &r, &e), &e);
        tb_bundle_free(r);
        cb[size / 2] ^= 4; /* a block in the middle, hashed by another thread */
        CHECK(tb_bundle_read_memory(cb, size, NULL, 0, &r, &e) == tb_err_checksum && r == NULL);
    }
    free(mem);
    free(cb);
    free(blob);
    tb_bundle_free(b);
}

/* A cache of n kernels made from the fixture's (several pack batches),
   plus entries that are no kernels and one kernel that is refused. */
static char *pack_test_cache(uint32_t n) {
    char *dir = u_tempdir("pack"), cmd[1400];
    tb_bundle *fix = u_fixture_bundle(0), *big = fix ? replicated_bundle(fix, n) : NULL;
    tb_error e;
    if (!big || tb_emit(big, dir, NULL, NULL, NULL, &e) != tb_ok) {
        tb_bundle_free(big), tb_bundle_free(fix);
        return dir;
    }
    snprintf(cmd, sizeof cmd,
             "cd %s && echo note > notes.txt && mkdir tmp.stale nogrp && echo x > nogrp/a.cubin && "
             "mkdir REFUSED && echo '[REPLACE]' > REFUSED/__grp__x.json",
             dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: %s failed\n", cmd);
    tb_bundle_free(big);
    tb_bundle_free(fix);
    return dir;
}

/* The streaming pack writes the bytes that collect + derive + write give,
   for any thread count, and leaves out what they leave out. */
static void test_threads_pack_cache(void) {
    char *cache = pack_test_cache(70), *out = u_tempdir("packout"), path[700];
    unsigned threads[] = {1, 2, 3, 8};
    unsigned char *ref, *got;
    size_t ref_n = 0, got_n = 0, t;
    int no_records;
    for (no_records = 0; no_records < 2; no_records++) {
        tb_bundle *b;
        tb_collect_options co;
        tb_collect_report crep;
        tb_error e;
        memset(&co, 0, sizeof co);
        CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
        CHECK(tb_collect_cache(b, cache, &co, &crep, &e) == tb_err_sentinel);
        if (!no_records) CHECK_OK(tb_bundle_derive_launch_records(b, &e), &e);
        ref = u_serialize(b, &ref_n);
        REQUIRE(ref);
        CHECK(crep.collected == 70 && crep.failed == 1 && crep.skipped == 3);
        for (t = 0; t < sizeof threads / sizeof threads[0]; t++) {
            tb_pack_options po;
            tb_pack_report rep;
            memset(&po, 0, sizeof po);
            po.collect.threads = threads[t];
            po.no_launch_records = no_records;
            snprintf(path, sizeof path, "%s/b%u.tbundle", out, threads[t]);
            CHECK_OK(tb_pack_cache(cache, path, &po, NULL, &rep, &e), &e);
            CHECK(rep.collect.collected == 70 && rep.collect.failed == 1 && rep.collect.skipped == 3);
            CHECK(rep.first_failure.code == tb_err_sentinel && strcmp(rep.first_failure.kernel, "REFUSED") == 0);
            CHECK(rep.records == (no_records ? 0 : tb_bundle_launch_record_count(b)) && rep.bytes == ref_n);
            got = u_read(path, &got_n);
            CHECK(got && got_n == ref_n && memcmp(got, ref, ref_n) == 0);
            free(got);
        }
        free(ref);
        tb_bundle_free(b);
    }
    CHECK(u_count_entries(out, NULL) == 4); /* the bundles, no temporaries */
    u_rmtree(cache);
    u_rmtree(out);
    free(cache);
    free(out);
}

/* stop_on_error fails the pack and leaves nothing; an output it cannot
   create fails cleanly; a missing cache is not found. */
static void test_pack_cache_failures(void) {
    char *cache = pack_test_cache(20), *out = u_tempdir("packfail"), path[700];
    tb_pack_options po;
    tb_pack_report rep;
    tb_error e;
    memset(&po, 0, sizeof po);
    po.collect.stop_on_error = 1;
    snprintf(path, sizeof path, "%s/b.tbundle", out);
    CHECK(tb_pack_cache(cache, path, &po, NULL, &rep, &e) == tb_err_sentinel);
    CHECK(strcmp(e.kernel, "REFUSED") == 0 && u_count_entries(out, NULL) == 0);
    po.collect.stop_on_error = 0;
    snprintf(path, sizeof path, "%s/no/such/dir/b.tbundle", out);
    CHECK(tb_pack_cache(cache, path, &po, NULL, &rep, &e) == tb_err_io && e.sys_errno == ENOENT);
    snprintf(path, sizeof path, "%s/b.tbundle", out);
    CHECK(tb_pack_cache("/nonexistent/cache", path, &po, NULL, &rep, &e) == tb_err_not_found);
    CHECK(tb_pack_cache(NULL, path, &po, NULL, &rep, &e) == tb_err_invalid_argument);
    CHECK(tb_pack_cache(cache, "", &po, NULL, &rep, &e) == tb_err_invalid_argument);
    CHECK(u_count_entries(out, NULL) == 0);
    /* the output is a directory: the rename fails, the temporary goes */
    snprintf(path, sizeof path, "%s/adir", out);
    CHECK(mkdir(path, 0755) == 0);
    CHECK(tb_pack_cache(cache, path, &po, NULL, &rep, &e) == tb_err_io && e.sys_errno == EISDIR);
    CHECK(u_count_entries(out, NULL) == 1 && rmdir(path) == 0);
    /* the cache is a file */
    snprintf(path, sizeof path, "%s/b.tbundle", out);
    CHECK(u_write(path, "x", 1) == 0);
    CHECK(tb_pack_cache(path, path, &po, NULL, &rep, &e) != tb_ok);
    CHECK(unlink(path) == 0);
    /* an empty cache packs into an empty bundle that reads */
    {
        tb_bundle *b = NULL;
        CHECK_OK(tb_pack_cache(out, path, NULL, NULL, &rep, &e), &e);
        CHECK_OK(tb_bundle_read_file(path, NULL, 0, &b, &e), &e);
        CHECK(b && tb_bundle_kernel_count(b) == 0 && rep.collect.collected == 0);
        tb_bundle_free(b);
    }
    u_rmtree(cache);
    u_rmtree(out);
    free(cache);
    free(out);
}

typedef struct { uint32_t calls, next; int in_order; } order_t;
static void order_cb(void *user, uint32_t index, const tb_kernel *k, tb_emit_status s, const tb_error *e) {
    order_t *o = (order_t *)user;
    (void)k;
    o->calls++;
    if (index != o->next++) o->in_order = 0;
    if ((s == TB_EMIT_FAILED) != (e != NULL)) o->in_order = 0;
}

static void test_threads_emit(void) {
    tb_bundle *b = u_fixture_bundle(1);
    unsigned threads[] = {1, 2, 4, 8};
    size_t t;
    REQUIRE(b);
    for (t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        char *dir = u_tempdir("thremit");
        tb_emit_options eo;
        tb_emit_report rep;
        tb_names *nm = NULL;
        tb_error e;
        order_t ord = {0, 0, 1};
        memset(&eo, 0, sizeof eo);
        eo.threads = threads[t];
        eo.on_kernel = order_cb;
        eo.user = &ord;
        CHECK_OK(tb_emit(b, dir, &eo, &rep, &nm, &e), &e);
        CHECK(rep.written == FIXTURE_KERNELS && ord.calls == FIXTURE_KERNELS && ord.in_order);
        CHECK(nm && nm->cached_count == FIXTURE_KERNELS);
        tb_names_free(nm);
        CHECK(check_emitted(dir, 0) == 0);
        CHECK(u_count_entries(dir, "tmp.") == 0);
        u_rmtree(dir);
        free(dir);
    }
    tb_bundle_free(b);
}

static void test_emit_write_failure(void) {
    char *dir = u_tempdir("fsize");
    pid_t pid;
    int status = 0;
    pid = fork();
    if (pid == 0) {
        struct rlimit rl;
        tb_bundle *b = u_fixture_bundle(0);
        tb_emit_report rep;
        tb_error e;
        tb_result r;
        signal(SIGXFSZ, SIG_IGN);
        rl.rlim_cur = rl.rlim_max = 20000;
        setrlimit(RLIMIT_FSIZE, &rl);
        tb_emit_options eo;
        memset(&eo, 0, sizeof eo);
        eo.threads = 3; /* failures in writer threads are reported like any */
        r = tb_emit(b, dir, &eo, &rep, NULL, &e);
        /* kernels with a file over 20000 bytes fail; the rest are written */
        _exit(r == tb_err_io && rep.failed > 0 && rep.written > 0 && e.sys_errno == EFBIG &&
                      strstr(e.message, "writing") != NULL
                  ? 0
                  : 1);
    }
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(u_count_entries(dir, "tmp.") == 0);
    /* what exists is complete */
    CHECK(u_count_entries(dir, NULL) > 0 && u_count_entries(dir, NULL) < (int)FIXTURE_KERNELS);
    {
        DIR *d = opendir(dir);
        struct dirent *de;
        tb_bundle *f = u_fixture_bundle(0);
        while (d && (de = readdir(d)) != NULL) {
            char p[700];
            const tb_kernel *k = tb_bundle_find_kernel(f, de->d_name);
            if (de->d_name[0] == '.') continue;
            CHECK(k != NULL);
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            if (k) CHECK(u_count_entries(p, NULL) == (int)k->artifact_count);
        }
        if (d) closedir(d);
        tb_bundle_free(f);
    }
    /* a later emit without the limit completes the cache */
    {
        tb_bundle *b = u_fixture_bundle(0);
        tb_emit_report rep;
        tb_error e;
        CHECK_OK(tb_emit(b, dir, NULL, &rep, NULL, &e), &e);
        CHECK(rep.failed == 0 && rep.written + rep.present == FIXTURE_KERNELS);
        CHECK(check_emitted(dir, 0) == 0);
        tb_bundle_free(b);
    }
    u_rmtree(dir);
    free(dir);
}

static int torture_rounds(int dflt) {
    const char *s = getenv("TB_TORTURE_ROUNDS");
    return s && atoi(s) > 0 ? atoi(s) : dflt;
}

static void test_concurrent_emit(void) {
    tb_bundle *b = u_fixture_bundle(1);
    unsigned char *buf;
    size_t size;
    int round, rounds = torture_rounds(6), i;
    REQUIRE(b);
    buf = u_serialize(b, &size);
    tb_bundle_free(b);
    REQUIRE(buf);
    for (round = 0; round < rounds; round++) {
        char *dir = u_tempdir("conc");
        pid_t pids[8];
        int ok = 1;
        for (i = 0; i < 8; i++) {
            pids[i] = fork();
            if (pids[i] == 0) {
                tb_bundle *r = NULL;
                tb_error e;
                tb_emit_report rep;
                if (tb_bundle_read_memory(buf, size, NULL, 0, &r, &e) != tb_ok) _exit(3);
                tb_emit_options eo;
                memset(&eo, 0, sizeof eo);
                eo.threads = (unsigned)(1 + i % 3); /* writer threads inside the racing processes too */
                if (tb_emit(r, dir, &eo, &rep, NULL, &e) != tb_ok) _exit(4);
                _exit(rep.written + rep.present == FIXTURE_KERNELS && rep.failed == 0 ? 0 : 5);
            }
        }
        for (i = 0; i < 8; i++) {
            int st = 0;
            waitpid(pids[i], &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ok = 0;
        }
        CHECK(ok);
        CHECK(check_emitted(dir, 0) == 0);
        CHECK(u_count_entries(dir, "tmp.") == 0);
        CHECK(u_count_entries(dir, NULL) == (int)FIXTURE_KERNELS);
        u_rmtree(dir);
        free(dir);
        if (th_failed_now) break;
    }
    free(buf);
}

static int crash_check_dir(const tb_bundle *b, const char *sub, int *tmp_seen) {
    DIR *d = opendir(sub);
    struct dirent *de;
    int partial = 0;
    while (d && (de = readdir(d)) != NULL) {
        char p[1400];
        const tb_kernel *k;
        if (de->d_name[0] == '.') continue;
        if (strncmp(de->d_name, "tmp.", 4) == 0) {
            (*tmp_seen)++;
            continue;
        }
        k = tb_bundle_find_kernel(b, de->d_name);
        snprintf(p, sizeof p, "%s/%s", sub, de->d_name);
        if (!k || u_count_entries(p, NULL) != (int)k->artifact_count) partial++;
    }
    if (d) closedir(d);
    return partial;
}

static void test_crash_during_emit(void) {
    tb_bundle *b = u_fixture_bundle(0);
    int round, rounds = torture_rounds(12), partial_seen = 0, tmp_seen = 0, dirs = 0;
    REQUIRE(b);
    srand(12345);
    for (round = 0; round < rounds; round++) {
        char *dir = u_tempdir("crash");
        pid_t pid = fork();
        int st, i;
        if (pid == 0) {
            tb_emit_report rep;
            tb_error e;
            for (i = 0;; i++) {
                char sub[700];
                snprintf(sub, sizeof sub, "%s/c%d", dir, i);
                tb_emit(b, sub, NULL, &rep, NULL, &e);
            }
        }
        usleep((useconds_t)(rand() % 5000));
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        for (i = 0;; i++) {
            char sub[700];
            struct stat sst;
            tb_emit_report rep;
            tb_error e;
            uint32_t removed = 0;
            snprintf(sub, sizeof sub, "%s/c%d", dir, i);
            if (stat(sub, &sst) != 0) break;
            dirs++;
            /* whatever stands under a final name is complete */
            partial_seen += crash_check_dir(b, sub, &tmp_seen);
            /* a later run completes the cache and the cleaner removes the debris */
            CHECK(tb_emit(b, sub, NULL, &rep, NULL, &e) == tb_ok);
            CHECK(check_emitted(sub, 0) == 0);
            CHECK_OK(tb_remove_stale_temporaries(sub, 0, &removed, &e), &e);
            CHECK(u_count_entries(sub, "tmp.") == 0);
        }
        u_rmtree(dir);
        free(dir);
        if (th_failed_now) break;
    }
    CHECK(partial_seen == 0);
    CHECK(dirs > 0);
    printf("    %d rounds, %d caches interrupted, %d leftover temporary directories removed\n", rounds, dirs, tmp_seen);
    tb_bundle_free(b);
}

static void test_stale_temporaries(void) {
    char *dir = u_tempdir("stale");
    char p[700];
    struct timespec ts[2];
    uint32_t removed = 9;
    tb_error e;
    make_dir(dir, "tmp.old");
    make_file(dir, "tmp.old/a.cubin", "x");
    make_dir(dir, "tmp.new");
    make_dir(dir, "KEEP");
    make_file(dir, "tmp.file", "not a directory");
    snprintf(p, sizeof p, "%s/tmp.old", dir);
    ts[0].tv_sec = ts[1].tv_sec = time(NULL) - 7200;
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    CHECK(utimensat(AT_FDCWD, p, ts, 0) == 0);
    CHECK_OK(tb_remove_stale_temporaries(dir, 3600, &removed, &e), &e);
    CHECK(removed == 1);
    CHECK(u_count_entries(dir, NULL) == 3);
    CHECK(u_count_entries(dir, "tmp.new") == 1 && u_count_entries(dir, "KEEP") == 1);
    CHECK(tb_remove_stale_temporaries("/nonexistent/x", 0, &removed, &e) == tb_err_not_found);
    u_rmtree(dir);
    free(dir);
}

static void test_cache_dir_resolution(void) {
    char out[512];
    tb_error e;
    char *saved[3];
    const char *names[3] = {"TRITON_CACHE_DIR", "TRITON_HOME", "HOME"};
    int i;
    for (i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        saved[i] = v ? strdup(v) : NULL;
    }
    setenv("TRITON_CACHE_DIR", "/a/cache", 1);
    setenv("TRITON_HOME", "/th", 1);
    setenv("HOME", "/home/u", 1);
    CHECK_OK(tb_cache_dir_resolve("/explicit", out, sizeof out, &e), &e);
    CHECK(strcmp(out, "/explicit") == 0);
    CHECK_OK(tb_cache_dir_resolve(NULL, out, sizeof out, &e), &e);
    CHECK(strcmp(out, "/a/cache") == 0);
    unsetenv("TRITON_CACHE_DIR");
    CHECK_OK(tb_cache_dir_resolve(NULL, out, sizeof out, &e), &e);
    CHECK(strcmp(out, "/th/.triton/cache") == 0);
    unsetenv("TRITON_HOME");
    CHECK_OK(tb_cache_dir_resolve(NULL, out, sizeof out, &e), &e);
    CHECK(strcmp(out, "/home/u/.triton/cache") == 0);
    unsetenv("HOME");
    CHECK(tb_cache_dir_resolve(NULL, out, sizeof out, &e) == tb_err_not_found);
    CHECK(tb_cache_dir_resolve("/x", out, 2, &e) == tb_err_limit);
    for (i = 0; i < 3; i++) {
        if (saved[i]) setenv(names[i], saved[i], 1);
        free(saved[i]);
    }
}

typedef struct { tb_bundler *z; int id; } put_arg;
static const char *fixture_hashes[] = {
    "72LBHDPVFLKOS26Q3453IVCTHETIPQ7OJOQE6IR3KYFIDK5O264A", "AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ",
    "BZKRPD2AY727DRXXOIVFYBASOFZSYKHHVDQGYJ6MYRYW6SERA72Q", "CGP5WEMPIL5XNJDOE6BA37VRCQTQMF7JU35PELJMPT6XGWEE5CWQ",
    "FICZDYIEHYTLJCYVG6Q353UAVW2KLMS5O63E5EBZEJQ6G6KKXVQQ", "JHIE2WWBT63JNC3MNKM4MXLWCU2GE3PH4XRUCMZMHZGOHBAFJKTA",
    "PCNIMKBUN2LEPJMIPGUWWT5X7J6NYOT4JOMX2RKDF2NXKJC2OVXA", "WP4C7CSHRKNSVR76XZZ5T3MQKYJA4YDGZGC324HEJSBGTCPWN23A"};

static void *put_thread(void *p) {
    put_arg *a = (put_arg *)p;
    int i;
    tb_error e;
    for (i = 0; i < 200; i++) tb_bundler_put(a->z, fixture_hashes[(i + a->id) % 8], 0, &e);
    tb_bundler_put(a->z, "MISSINGHASH", 0, &e);
    return NULL;
}

static void test_bundler_threads(void) {
    tb_bundler *z;
    tb_error e;
    pthread_t th[4];
    put_arg args[4];
    tb_bundle *b = NULL;
    tb_names *nm = NULL;
    tb_collect_report rep;
    tb_collect_options o;
    tb_launch_config cfg;
    tb_launch_record rec;
    int i;
    memset(&o, 0, sizeof o);
    o.recorded_cache_dir = FIXTURE_RECORDED;
    CHECK_OK(tb_bundler_begin(NULL, FIXTURE_CACHE, &z, &e), &e);
    REQUIRE(z);
    for (i = 0; i < 4; i++) {
        args[i].z = z;
        args[i].id = i;
        pthread_create(&th[i], NULL, put_thread, &args[i]);
    }
    for (i = 0; i < 4; i++) pthread_join(th[i], NULL);
    memset(&cfg, 0, sizeof cfg);
    cfg.kernel_hash = fixture_hashes[1];
    cfg.function_name = "tb_add";
    cfg.binary_name = "tb_add.cubin";
    cfg.arg_types = "OOOi";
    cfg.num_warps = 4;
    cfg.num_ctas = 1;
    rec.cache_key = "add-key";
    rec.kernel_name = "tb_add";
    rec.config_count = 1;
    rec.configs = &cfg;
    CHECK_OK(tb_bundler_put_launch_record(z, &rec, &e), &e);
    CHECK_OK(tb_bundler_collect(z, &o, &b, &nm, &rep, &e), &e);
    CHECK(rep.collected == FIXTURE_KERNELS && rep.missing == 1 && rep.failed == 0);
    CHECK(b && tb_bundle_kernel_count(b) == FIXTURE_KERNELS && tb_bundle_launch_record_count(b) == 1);
    CHECK(nm && nm->cached_count == FIXTURE_KERNELS && nm->static_count == 1);
    tb_names_free(nm);
    tb_bundle_free(b);
    /* collected: the next round starts empty */
    CHECK_OK(tb_bundler_collect(z, &o, &b, NULL, &rep, &e), &e);
    CHECK(b && tb_bundle_kernel_count(b) == 0 && tb_bundle_launch_record_count(b) == 0);
    tb_bundle_free(b);
    tb_bundler_put(z, fixture_hashes[0], 0, &e);
    tb_bundler_end(z); /* discards what was not collected */
}

static void test_bundle_file_errors(void) {
    char *dir = u_tempdir("files");
    char p[700];
    tb_bundle *b = NULL;
    tb_error e;
    CHECK(tb_bundle_read_file("/nonexistent/x.tbundle", NULL, 0, &b, &e) == tb_err_not_found);
    CHECK(strstr(e.message, "/nonexistent/x.tbundle") != NULL);
    snprintf(p, sizeof p, "%s/empty", dir);
    u_write(p, "", 0);
    CHECK(tb_bundle_read_file(p, NULL, 0, &b, &e) == tb_err_truncated);
    CHECK(strstr(e.message, p) != NULL);
    snprintf(p, sizeof p, "%s/text", dir);
    u_write(p, "hello world, not a bundle at all", 32);
    CHECK(tb_bundle_read_file(p, NULL, TB_READ_COPY, &b, &e) == tb_err_bad_magic);
    CHECK(tb_bundle_read_file(dir, NULL, 0, &b, &e) == tb_err_io);
    CHECK(b == NULL);
    {
        tb_bundle *f = u_fixture_bundle(0);
        snprintf(p, sizeof p, "%s/no/such/dir/x.tbundle", dir);
        CHECK(tb_bundle_write_file(f, p, 0, &e) == tb_err_io);
        snprintf(p, sizeof p, "%s/copy.tbundle", dir);
        CHECK_OK(tb_bundle_write_file(f, p, 0, &e), &e);
        CHECK_OK(tb_bundle_read_file(p, NULL, TB_READ_COPY, &b, &e), &e);
        CHECK(b && tb_bundle_kernel_count(b) == FIXTURE_KERNELS);
        tb_bundle_free(b);
        tb_bundle_free(f);
        CHECK(u_count_entries(dir, "copy.tbundle.tmp") == 0);
    }
    u_rmtree(dir);
    free(dir);
}

/* Appending to a bundle read from a buffer copies the shared slices out. */
static void test_append_to_read_bundle(void) {
    size_t size;
    unsigned char *buf = small_bundle(&size);
    tb_bundle *b = NULL;
    tb_error e;
    uint32_t k;
    REQUIRE(buf);
    CHECK_OK(tb_bundle_read_memory(buf, size, NULL, 0, &b, &e), &e);
    REQUIRE(b);
    CHECK_OK(tb_bundle_add_artifact(b, 0, "extra.txt", "hi", 2, TB_COPY, &e), &e);
    CHECK(tb_bundle_kernel(b, 0)->artifact_count == 9);
    CHECK(tb_kernel_find_artifact(tb_bundle_kernel(b, 0), "tb_noargs.cubin") != NULL);
    CHECK_OK(tb_bundle_add_kernel(b, "NEW", 1, &k, &e), &e);
    CHECK(k == 1 && tb_bundle_kernel_count(b) == 2);
    tb_bundle_free(b);
    free(buf);
}

/* FORMAT.md's reading rules for section 2's fixed fields: reserved fields
   are zero, scratch_present is 0 or 1, and a config flag this version does
   not know is refused as a newer version's (a launch that ignored it could
   go wrong). A one-record bundle, patched at the offsets the spec gives. */
static void test_format_rules_records(void) {
    tb_bundle *b = NULL, *r = NULL;
    tb_error e;
    tb_launch_config cfg;
    tb_launch_record rec;
    size_t size;
    unsigned char *buf;
    static const struct { size_t at; uint32_t value; tb_result want; } cases[] = {
        {84, 1, tb_err_malformed},             /* section 2's reserved field */
        {108, 7, tb_err_malformed},            /* the record's reserved field */
        {204, 2, tb_err_malformed},            /* global_scratch_present 2 */
        {220, 3, tb_err_malformed},            /* profile_scratch_present 3 */
        {172, 8, tb_err_unsupported_version},  /* config flag bit 3 */
        {172, 7, tb_ok},                       /* the three known flags */
    };
    size_t i;
    memset(&cfg, 0, sizeof cfg);
    cfg.kernel_hash = "H", cfg.function_name = "f", cfg.binary_name = "f.cubin", cfg.arg_types = "O";
    cfg.num_warps = cfg.num_ctas = 1;
    rec.cache_key = "K", rec.kernel_name = "f", rec.config_count = 1, rec.configs = &cfg;
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(tb_bundle_add_launch_record(b, &rec, &e), &e);
    buf = u_serialize(b, &size);
    REQUIRE(buf && size == 232);
    /* the layout the offsets assume: section 2 at 56, "K" at 88, num_warps at 160 */
    CHECK(tb__le32(buf + 56) == 2 && tb__le32(buf + 88) == 1 && buf[92] == 'K' && tb__le32(buf + 160) == 1);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char *p = (unsigned char *)malloc(size);
        memcpy(p, buf, size);
        tb__put32(p + cases[i].at, cases[i].value);
        reseal(p, size);
        r = NULL;
        CHECK(tb_bundle_read_memory(p, size, NULL, 0, &r, &e) == cases[i].want);
        tb_bundle_free(r);
        free(p);
    }
    /* a builder cannot add them either */
    cfg.flags = 8;
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_unsupported_version);
    cfg.flags = 0, cfg.global_scratch.present = 2;
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_malformed);
    tb_bundle_free(b);
    free(buf);
}

/* The TMA fixture: its record takes a tensor descriptor ('T') that the
   kernel reads through TMA; the description survives the format (section
   3), and damaged descriptions are refused. */
#define TMA_CACHE "tests/fixtures/triton-3.6-sm90-tma/cache"
static void test_tensordesc_records(void) {
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
    CHECK(tb__le32(buf + 24) == 3); /* kernels, records, tensor descriptors */
    CHECK_OK(tb_bundle_read_memory(buf, size, NULL, 0, &r, &e), &e);
    REQUIRE(r);
    c = &tb_bundle_launch_record(r, 0)->configs[0];
    CHECK(c->tensordesc_count == 1 && memcmp(c->tensordescs, tb_bundle_launch_record(b, 0)->configs[0].tensordescs,
                                             sizeof(tb_tensordesc_meta)) == 0);
    tb_bundle_free(r);
    r = NULL;
    /* section 3 is the last 8 + 64 bytes before the trailer, after its 16-byte header */
    sec3 = buf + size - 8 - 72;
    CHECK(tb__le32(sec3 - 16) == 3 && tb__le32(sec3) == 1);
    sec3[8 + 4] = 2; /* the entry names argument 2, which is no 'T' */
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, NULL, 0, &r, &e) == tb_err_malformed && strstr(e.message, "tensor descriptor"));
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
            size_t len = (size_t)tb__le64(buf + at + 8);
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
        CHECK(tb_bundle_read_memory(sw, size, NULL, 0, &r, &e) == tb_err_malformed && strstr(e.message, "before section 2"));
        free(sw);
    }
    /* without section 3 the 'T' has no description: refused */
    tb__put32(buf + 24, 2);
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

#ifndef TB_NO_LAUNCHER
/* A record by hand: name, key, arg types and divisibility. */
static tb_result add_spec(tb_bundle *b, const char *key, const char *name, const char *types, const char *div,
                          uint32_t configs) {
    tb_launch_config cfg[2];
    tb_launch_record rec;
    tb_error e;
    memset(cfg, 0, sizeof cfg);
    cfg[0].kernel_hash = key;
    cfg[0].function_name = name;
    cfg[0].binary_name = "k.cubin";
    cfg[0].arg_types = types;
    cfg[0].arg_divisibility = div;
    cfg[0].num_warps = cfg[0].num_ctas = 1;
    cfg[1] = cfg[0];
    cfg[1].num_warps = 8;
    rec.cache_key = key;
    rec.kernel_name = name;
    rec.config_count = configs;
    rec.configs = cfg;
    return tb_bundle_add_launch_record(b, &rec, &e);
}

/* Launch by name chooses among a kernel's specializations from the
   arguments: the most specialized whose assumptions hold. No GPU: find
   names the record that select would load. */
static void test_table_specialization_choice(void) {
    tb_bundle *b = NULL;
    tb_kernel_table *t = NULL;
    tb_error e;
    uint32_t rec = 99, i;
    tb_arg a[3];
    const char *names[] = {"k_mid", "k_general", "k_all", "k_other", "k_three"};
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(add_spec(b, "k_mid", "k", "OOi", "100", 1), &e);
    CHECK_OK(add_spec(b, "k_general", "k", "OOi", "000", 2), &e);
    CHECK_OK(add_spec(b, "k_all", "k", "OOi", "111", 1), &e);
    CHECK_OK(add_spec(b, "k_other", "other", "O", "1", 1), &e);
    CHECK_OK(add_spec(b, "k_three", "only_aligned", "OOi", "110", 1), &e);
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_u(0x2000), a[2] = tb_arg_i(64);
    CHECK_OK(tb_kernel_table_find(t, "k", 0, a, 3, &rec, &e), &e);
    CHECK(rec == 2); /* all three assumptions hold */
    a[2] = tb_arg_i(100);
    CHECK_OK(tb_kernel_table_find(t, "k", 0, a, 3, &rec, &e), &e);
    CHECK(rec == 0); /* n not divisible by 16 */
    a[1] = tb_arg_u(0x2004);
    CHECK_OK(tb_kernel_table_find(t, "k", 0, a, 3, &rec, &e), &e);
    CHECK(rec == 0);
    a[0] = tb_arg_u(0x1004);
    CHECK_OK(tb_kernel_table_find(t, "k", 0, a, 3, &rec, &e), &e);
    CHECK(rec == 1); /* a misaligned first pointer: the general one */
    CHECK_OK(tb_kernel_table_find(t, "k", 1, a, 3, &rec, &e), &e);
    CHECK(rec == 1); /* config 1 exists only there */
    a[0] = tb_arg_u(0x1000), a[2] = tb_arg_i(64);
    CHECK_OK(tb_kernel_table_find(t, "k", 1, a, 3, &rec, &e), &e);
    CHECK(rec == 1);
    /* no arguments (tb_kernel_table_get): the fewest assumptions */
    CHECK_OK(tb_kernel_table_find(t, "k", 0, NULL, 0, &rec, &e), &e);
    CHECK(rec == 1);
    /* a cache key is one record, whatever the arguments */
    for (i = 0; i < 5; i++) {
        CHECK_OK(tb_kernel_table_find(t, names[i], 0, NULL, 0, &rec, &e), &e);
        CHECK(rec == i);
    }
    /* none fits: the error names the argument */
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_u(0x2008);
    CHECK(tb_kernel_table_find(t, "only_aligned", 0, a, 3, &rec, &e) == tb_err_misaligned);
    CHECK(strstr(e.message, "argument 1") != NULL && strstr(e.message, "0x2008") != NULL);
    CHECK(tb_kernel_table_find(t, "k", 0, a, 2, &rec, &e) == tb_err_arg_mismatch);
    CHECK(tb_kernel_table_find(t, "k_mid", 0, a, 2, &rec, &e) == tb_err_arg_mismatch);
    CHECK(tb_kernel_table_find(t, "k", 2, a, 3, &rec, &e) == tb_err_arg_mismatch);
    CHECK(tb_kernel_table_find(t, "k", 2, NULL, 0, &rec, &e) == tb_err_invalid_argument);
    CHECK(tb_kernel_table_find(t, "nope", 0, a, 3, &rec, &e) == tb_err_not_found);
    CHECK(tb_kernel_table_find(t, "k_mid", 5, NULL, 0, &rec, &e) == tb_err_invalid_argument);
    /* by key, the arguments must still fit the one record */
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_u(0x2000), a[2] = tb_arg_i(100);
    CHECK(tb_kernel_table_find(t, "k_all", 0, a, 3, &rec, &e) == tb_err_misaligned && strstr(e.message, "argument 2"));
    CHECK_OK(tb_kernel_table_find(t, "k_mid", 0, a, 3, &rec, &e), &e);
    tb_kernel_table_free(t);
    tb_bundle_free(b);
    /* two compilations of one name with the same assumptions (another dtype,
       block size...): the arguments cannot tell them apart, so no guess */
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(add_spec(b, "fp16", "same", "OOi", "110", 1), &e);
    CHECK_OK(add_spec(b, "fp32", "same", "OOi", "110", 1), &e);
    CHECK_OK(add_spec(b, "general", "same", "OOi", "000", 1), &e);
    CHECK_OK(add_spec(b, "unknown", "alone", "O", "", 1), &e);
    CHECK_OK(add_spec(b, "unknown1", "twice", "O", "", 1), &e);
    CHECK_OK(add_spec(b, "unknown2", "twice", "O", "", 1), &e);
    CHECK_OK(add_spec(b, "known", "mixed", "O", "1", 1), &e);
    CHECK_OK(add_spec(b, "unknown3", "mixed", "O", "", 1), &e);
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_u(0x2000), a[2] = tb_arg_i(7);
    CHECK(tb_kernel_table_find(t, "same", 0, a, 3, &rec, &e) == tb_err_invalid_argument);
    CHECK(strstr(e.message, "fp16") && strstr(e.message, "fp32") && strstr(e.message, "cache key"));
    a[0] = tb_arg_u(0x1004); /* only the general one fits */
    CHECK(tb_kernel_table_find(t, "same", 0, a, 3, &rec, &e) == tb_ok && rec == 2);
    CHECK(tb_kernel_table_find(t, "same", 0, NULL, 0, &rec, &e) == tb_ok && rec == 2);
    CHECK(tb_kernel_table_find(t, "alone", 0, a, 1, &rec, &e) == tb_ok && rec == 3); /* unknown, but alone */
    CHECK(tb_kernel_table_find(t, "twice", 0, a, 1, &rec, &e) == tb_err_invalid_argument);
    CHECK(tb_kernel_table_find(t, "twice", 0, NULL, 0, &rec, &e) == tb_err_invalid_argument);
    a[0] = tb_arg_u(0x1000);
    CHECK(tb_kernel_table_find(t, "mixed", 0, a, 1, &rec, &e) == tb_ok && rec == 6);
    a[0] = tb_arg_u(0x1004); /* the known one does not fit; the unknown one is no safe fallback */
    CHECK(tb_kernel_table_find(t, "mixed", 0, a, 1, &rec, &e) == tb_err_misaligned);
    tb_kernel_table_free(t);
    tb_bundle_free(b);
}

/* Thousands of records and names: every key and name is found, each
   name's specializations chained in order. */
static void test_table_index_large(void) {
    tb_bundle *b = NULL;
    tb_kernel_table *t = NULL;
    tb_error e;
    uint32_t i, rec, n = 5000;
    char key[32], name[32];
    tb_arg a[1];
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    for (i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key%u", i);
        snprintf(name, sizeof name, "name%u", i / 2);
        CHECK_OK(add_spec(b, key, name, "O", i % 2 ? "1" : "0", 1), &e);
    }
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    for (i = 0; i < n; i++) {
        snprintf(key, sizeof key, "key%u", i);
        CHECK(tb_kernel_table_find(t, key, 0, NULL, 0, &rec, &e) == tb_ok && rec == i);
        if (i % 2) continue;
        snprintf(name, sizeof name, "name%u", i / 2);
        a[0] = tb_arg_u(0x100);
        CHECK(tb_kernel_table_find(t, name, 0, a, 1, &rec, &e) == tb_ok && rec == i + 1);
        a[0] = tb_arg_u(0x104);
        CHECK(tb_kernel_table_find(t, name, 0, a, 1, &rec, &e) == tb_ok && rec == i);
        if (th_failed_now) break;
    }
    tb_kernel_table_free(t);
    tb_bundle_free(b);
}
#endif

int main(int argc, char **argv) {
    filter = argc > 1 ? argv[1] : NULL;
    RUN(test_result_strings);
    RUN(test_xxh3_vectors);
    RUN(test_threads_block_checksum);
    RUN(test_format_1_0_compatibility);
    RUN(test_builder_and_names);
    RUN(test_bad_names_builder);
    RUN(test_smallest_items_roundtrip);
    RUN(test_arg_codes);
    RUN(test_fixture_roundtrip);
    RUN(test_names_fixture);
    RUN(test_derive_idempotent);
    RUN(test_truncation_every_offset);
    RUN(test_every_bit_flip);
    RUN(test_bit_flips_unchecked_structure);
    RUN(test_header_errors);
    RUN(test_unknown_sections);
    RUN(test_absurd_counts);
    RUN(test_bad_names_in_bundle);
    RUN(test_allocator_failures);
    RUN(test_append_to_read_bundle);
    RUN(test_bundle_file_errors);
    RUN(test_metadata_json_fixture);
    RUN(test_metadata_json_errors);
    RUN(test_ttfunc_fixture);
    RUN(test_derived_records_flag_ir_types);
    RUN(test_tensordesc_records);
    RUN(test_format_rules_records);
#ifndef TB_NO_LAUNCHER
    RUN(test_table_specialization_choice);
    RUN(test_table_index_large);
#endif
    RUN(test_fp16_vectors);
    RUN(test_bf16_triton_packing);
    RUN(test_pack_args);
    RUN(test_too_many_args);
    RUN(test_launcher_without_driver);
    RUN(test_collect_emit_fixture);
    RUN(test_collect_edge_cases);
    RUN(test_collect_path_swap);
    RUN(test_emit_hostile_targets);
    RUN(test_emit_readonly_dir);
    RUN(test_threads_collect_same_bundle);
    RUN(test_threads_emit);
    RUN(test_threads_parallel_checksum);
    RUN(test_threads_pack_cache);
    RUN(test_pack_cache_failures);
    RUN(test_emit_write_failure);
    RUN(test_emit_full_disk_and_readonly_fs);
    RUN(test_concurrent_emit);
    RUN(test_crash_during_emit);
    RUN(test_stale_temporaries);
    RUN(test_cache_dir_resolution);
    RUN(test_bundler_threads);
    return th_finish();
}
