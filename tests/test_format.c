/* The format layer: the data model, the writer and the reader, the
   checksum, hostile bytes and the allocator contract. Each test reaches the
   library through its public API. Compiled as C99 and as C++11; run from
   the repository root: build/test_format [name-filter] */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

/* The format 2 checksum: XXH3-64 of the blocks' XXH3-64 values. The two
   fixed values were computed with xxhsum -H3 over `split -b 1048576`
   pieces, their values packed little-endian and hashed again. */
static uint64_t block_checksum_reference(const unsigned char *p, size_t n) {
    size_t blocks = n ? (n - 1) / 1048576 + 1 : 1, i;
    unsigned char *v = (unsigned char *)malloc(blocks * 8);
    uint64_t r;
    for (i = 0; i < blocks; i++) {
        size_t at = i * 1048576, len = n - at < 1048576 ? n - at : 1048576;
        u_put64(v + 8 * i, tb_xxh3_64(p + at, len));
    }
    r = tb_xxh3_64(v, blocks * 8);
    free(v);
    return r;
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

/* A small real bundle: the tb_noargs kernel and its record. */
static unsigned char *small_bundle(size_t *size) {
    tb_bundle *b;
    tb_error e;
    tb_collect_options o;
    unsigned char *buf;
    memset(&o, 0, sizeof o);
    o.recorded_cache_dir = FIXTURE_RECORDED;
    if (tb_bundle_create(NULL, &b, &e) != tb_ok) return NULL;
    if (tb_collect_kernel(b, FIXTURE_CACHE, "72LBHDPVFLKOS26Q3453IVCTHETIPQ7OJOQE6IR3KYFIDK5O264A", 0, &o, &e) !=
            tb_ok ||
        tb_bundle_derive_launch_records(b, &e) != tb_ok) {
        tb_bundle_free(b);
        return NULL;
    }
    buf = u_serialize(b, size);
    tb_bundle_free(b);
    return buf;
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

/* ---------------------------------------------------------------- basics */
TEST(test_result_strings) {
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

/* ---------------------------------------------------------------- sorting */
/* tb__sort's comparator context: the keys the sorted indexes stand for,
   and a count of the comparisons */
typedef struct { const uint32_t *keys; size_t calls; } sort_ctx;
static int sort_cmp_key(const void *a, const void *b, void *ctx) {
    sort_ctx *s = (sort_ctx *)ctx;
    uint32_t x = s->keys[*(const uint32_t *)a], y = s->keys[*(const uint32_t *)b];
    s->calls++;
    return x < y ? -1 : x > y;
}
/* an element larger than the insertion's buffer: the swapped path */
typedef struct { uint32_t key, seq; unsigned char pad[192]; } sort_big;
static int sort_cmp_big(const void *a, const void *b, void *ctx) {
    uint32_t x = ((const sort_big *)a)->key, y = ((const sort_big *)b)->key;
    (void)ctx;
    return x < y ? -1 : x > y;
}

/* idx[0..n) sorted by keys[] and, where keys are equal, by index: the
   input held the indexes in order, so a stable sort leaves ties so */
static int sort_stable_order(const uint32_t *idx, const uint32_t *keys, size_t n) {
    size_t i;
    for (i = 1; i < n; i++)
        if (keys[idx[i - 1]] > keys[idx[i]] || (keys[idx[i - 1]] == keys[idx[i]] && idx[i - 1] > idx[i])) return 0;
    return 1;
}

/* One sort with a context (no lock, no global): the order, equal keys in
   their input order (deterministic, as the weights file's zero-byte
   tensors need), O(n log n) comparisons on sorted, reversed, few-valued
   and sawtooth input, no allocation for small arrays, and an allocation
   failure that leaves the array as it was. */
TEST(test_sort_with_context) {
    enum { N = 100000 };
    static const size_t sizes[] = { 0,   1,   2,   3,    15,   16,   17,   31,   32,    33,
                                    100, 256, 257, 1023, 1024, 1025, 2049, 4097, 25000, N };
    uint32_t *keys = (uint32_t *)malloc(N * sizeof *keys), *idx = (uint32_t *)malloc(N * sizeof *idx);
    tb__ctx c;
    size_t n, i, k, pattern, bound;
    memset(&c, 0, sizeof c);
    REQUIRE(keys && idx);
    for (pattern = 0; pattern < 6; pattern++)
        for (k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            sort_ctx s;
            size_t lg = 1;
            uint64_t x = 88172645463325252ULL;
            n = sizes[k];
            for (i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                keys[i] = pattern == 0 ? (uint32_t)i                      /* sorted */
                        : pattern == 1 ? (uint32_t)(n - i)                /* reversed */
                        : pattern == 2 ? (uint32_t)(x % 3)                /* three values */
                        : pattern == 3 ? 7u                               /* all equal */
                        : pattern == 4 ? (uint32_t)(i % 1000)             /* sawtooth */
                                       : (uint32_t)x;                     /* random */
                idx[i] = (uint32_t)i;
            }
            s.keys = keys, s.calls = 0;
            CHECK(tb__sort(&c, idx, n, sizeof *idx, sort_cmp_key, &s) == tb_ok);
            if (!sort_stable_order(idx, keys, n)) {
                printf("    pattern %zu, %zu elements: out of order\n", pattern, n);
                CHECK(!"sorted, ties in input order");
            }
            while (((size_t)1 << lg) < n) lg++;
            bound = n * (lg + TB__SORT_RUN);
            if (s.calls > bound) {
                printf("    pattern %zu, %zu elements: %zu comparisons, over %zu\n", pattern, n, s.calls, bound);
                CHECK(!"O(n log n) comparisons");
            }
        }
    /* strings: the one comparator, and the search */
    {
        const char *v[] = {"pear", "apple", "fig", "apple", "kiwi", "banana", "cherry", "date", "elder", "grape",
                           "lime", "mango", "nut", "olive", "plum", "quince", "rhubarb", "sloe", "tangerine"};
        const char *key = "mango", *absent = "zucchini";
        size_t nv = sizeof v / sizeof *v;
        const char *const *hit;
        CHECK(tb__sort(&c, v, nv, sizeof *v, tb__cmp_str, NULL) == tb_ok);
        for (i = 1; i < nv; i++) CHECK(strcmp(v[i - 1], v[i]) <= 0);
        hit = (const char *const *)tb__search(&key, v, nv, sizeof *v, tb__cmp_str, NULL);
        CHECK(hit && !strcmp(*hit, "mango"));
        CHECK(!tb__search(&absent, v, nv, sizeof *v, tb__cmp_str, NULL));
        CHECK(!tb__search(&key, v, 0, sizeof *v, tb__cmp_str, NULL));
    }
    /* large elements, stable, past the runs */
    {
        static sort_big big[300];
        for (i = 0; i < 300; i++)
            big[i].key = (uint32_t)(299 - i) / 10, big[i].seq = (uint32_t)i, big[i].pad[0] = (unsigned char)i;
        CHECK(tb__sort(&c, big, 300, sizeof *big, sort_cmp_big, NULL) == tb_ok);
        for (i = 1; i < 300; i++)
            CHECK(big[i - 1].key < big[i].key || (big[i - 1].key == big[i].key && big[i - 1].seq < big[i].seq));
        for (i = 0; i < 300; i++) CHECK(big[i].pad[0] == (unsigned char)big[i].seq);
    }
    /* the scratch: none up to TB__SORT_STACK bytes, else the caller's
       allocator, whose failure leaves the array untouched */
    {
        tb_options o = ca_options();
        tb__ctx cc = tb__ctx_from(&o);
        sort_ctx s;
        s.keys = keys, s.calls = 0;
        for (i = 0; i < N; i++) keys[i] = (uint32_t)(N - i), idx[i] = (uint32_t)i;
        ca_allocs = 0, ca_fail_at = 0;
        CHECK(tb__sort(&cc, idx, TB__SORT_STACK / sizeof *idx, sizeof *idx, sort_cmp_key, &s) == tb_ok);
        CHECK(ca_allocs == 0 && sort_stable_order(idx, keys, TB__SORT_STACK / sizeof *idx));
        for (i = 0; i < N; i++) idx[i] = (uint32_t)i;
        CHECK(tb__sort(&cc, idx, N, sizeof *idx, sort_cmp_key, &s) == tb_err_out_of_memory);
        for (i = 0; i < N; i++)
            if (idx[i] != (uint32_t)i) break;
        CHECK(i == N);
        ca_fail_at = -1;
        CHECK(tb__sort(&cc, idx, N, sizeof *idx, sort_cmp_key, &s) == tb_ok);
        CHECK(ca_allocs == 1 && ca_live == 0 && sort_stable_order(idx, keys, N));
    }
    free(keys);
    free(idx);
}

/* The sorts' callers under failing allocations, past the sort's stack
   scratch: a directory listing of 300 entries and a weights file of 302
   tensors each fail cleanly or succeed, leaking nothing; the listing in
   name order, the tensors in offset order with the two zero-byte ones at
   one offset in header order. */
TEST(test_sort_callers_out_of_memory) {
    char *dir = u_tempdir("sortoom"), path[700], *json = (char *)malloc(40000);
    unsigned char *file = NULL;
    tb_options o = ca_options();
    tb__ctx c = tb__ctx_from(&o);
    tb_error e;
    size_t i, jn = 0, size;
    long n;
    int listed = 0, opened = 0;
    REQUIRE(dir && json);
    for (i = 0; i < 300; i++) {
        FILE *f;
        snprintf(path, sizeof path, "%s/f%03u", dir, (unsigned)(299 - i));
        REQUIRE((f = fopen(path, "w")) != NULL);
        fclose(f);
    }
    for (n = 0; n < 50 && !listed; n++) {
        tb__listing l;
        tb_result r;
        ca_allocs = 0, ca_fail_at = n;
        r = tb__list_open_top(&c, dir, &l, &e);
        CHECK(r == tb_ok || r == tb_err_out_of_memory);
        if (r == tb_ok) {
            listed = 1;
            CHECK(l.count == 300);
            for (i = 0; i < l.count; i++) {
                snprintf(path, sizeof path, "f%03u", (unsigned)i);
                CHECK(!strcmp(l.names[i], path));
            }
            tb__list_close(&c, &l);
        }
        CHECK(ca_live == 0);
    }
    CHECK(listed);
    /* t000 .. t299, four bytes each, the last first in the header; then
       two zero-byte tensors at data byte 0, zb before za */
    jn += (size_t)snprintf(json + jn, 40000 - jn, "{");
    for (i = 0; i < 300; i++)
        jn += (size_t)snprintf(json + jn, 40000 - jn,
                               "\"t%03u\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%u,%u]},",
                               (unsigned)(299 - i), (unsigned)(4 * (299 - i)), (unsigned)(4 * (299 - i) + 4));
    jn += (size_t)snprintf(json + jn, 40000 - jn, "\"zb\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                                                  "\"za\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}");
    size = 8 + jn + 1200;
    REQUIRE((file = (unsigned char *)calloc(1, size)) != NULL);
    u_put64(file, jn);
    memcpy(file + 8, json, jn);
    for (n = 0; n < 50 && !opened; n++) {
        tb_weights *w = NULL;
        tb_result r;
        ca_allocs = 0, ca_fail_at = n;
        r = tb_weights_open_memory(file, size, &o, &w, &e);
        if (r != tb_ok && r != tb_err_out_of_memory) printf("    %s\n", e.message);
        CHECK(r == tb_ok || r == tb_err_out_of_memory);
        if (r == tb_ok) {
            opened = 1;
            CHECK(tb_weights_count(w) == 302);
            CHECK(!strcmp(tb_weights_at(w, 0)->name, "zb") && !strcmp(tb_weights_at(w, 1)->name, "za"));
            for (i = 0; i < 300; i++) {
                snprintf(path, sizeof path, "t%03u", (unsigned)i);
                CHECK(!strcmp(tb_weights_at(w, (uint32_t)i + 2)->name, path));
            }
            CHECK(tb_weights_find(w, "t123") == tb_weights_at(w, 125) &&
                  tb_weights_find(w, "za") == tb_weights_at(w, 1));
            tb_weights_free(w);
        }
        CHECK(ca_live == 0);
    }
    CHECK(opened);
    ca_fail_at = -1;
    u_rmtree(dir);
    free(dir);
    free(json);
    free(file);
}

/* XXH3_64bits values from the xxHash library (xxhsum -H3 prints the same) */
TEST(test_xxh3_vectors) {
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

/* FORMAT.md [R-checksum] */
TEST(test_threads_block_checksum) {
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
/* FORMAT.md [R-format1] */
TEST(test_format_1_0_compatibility) {
    size_t n = 0, n2 = 0;
    unsigned char *old = u_read("tests/fixtures/format-1.0.tbundle", &n), *again;
    tb_bundle *b = NULL;
    tb_error e;
    REQUIRE(old && n > 1000);
    CHECK(u_le16(old + 8) == 1 && u_le16(old + 10) == 0);
    CHECK(u_le64(old + n - 8) == tb_xxh3_64(old, n - 8));
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
    CHECK(again && n2 == n && u_le16(again + 8) == TB_FORMAT_VERSION_MAJOR &&
          u_le16(again + 10) == TB_FORMAT_VERSION_MINOR);
    CHECK(again && memcmp(again + 12, old + 12, n - 20) == 0 && memcmp(again, old, 8) == 0);
    CHECK(again && u_le64(again + n - 8) == tb_bundle_checksum(again, n - 8));
    tb_bundle_free(b);
    b = NULL;
    CHECK_OK(tb_bundle_read_memory(again, n2, NULL, 0, &b, &e), &e);
    CHECK(tb_bundle_format_version(b) == (TB_FORMAT_VERSION_MAJOR << 16 | TB_FORMAT_VERSION_MINOR));
    tb_bundle_free(b);
    b = NULL;
    /* a 1.0 file is checked with the 1.0 checksum: a flipped byte fails */
    old[n / 2] ^= 0x10;
    CHECK(tb_bundle_read_memory(old, n, NULL, 0, &b, &e) == tb_err_checksum && b == NULL);
    CHECK(strstr(e.message, "format 1") != NULL);
    free(again);
    free(old);
}

/* ------------------------------------------------------------ data model */
TEST(test_builder_and_names) {
    tb_bundle *b;
    tb_error e;
    uint32_t k;
    tb_names *nm = NULL;
    tb_launch_config cfg;
    tb_launch_record rec;
    memset(&cfg, 0, sizeof cfg);
    memset(&rec, 0, sizeof rec);
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

TEST(test_bad_names_builder) {
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
    CHECK(tb_bundle_add_kernel(b, longname, 0, &k, &e) == tb_err_limit); /* over the limit: as the reader says */
    longname[255] = 0;
    CHECK_OK(tb_bundle_add_kernel(b, longname, 0, &k, &e), &e);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(tb_bundle_add_artifact(b, k, bad[i], "x", 1, TB_COPY, &e) == tb_err_bad_name);
    CHECK(tb_bundle_kernel_count(b) == 1);
    tb_bundle_free(b);
}

/* The smallest things the format holds: empty files with one-letter names,
   a kernel with no files, a bundle with no kernels: all read back. */
TEST(test_smallest_items_roundtrip) {
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

/* ---------------------------------------------------------------- format */
TEST(test_fixture_roundtrip) {
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

TEST(test_names_fixture) {
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

/* FORMAT.md [R-remaining] */
TEST(test_truncation_every_offset) {
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

/* FORMAT.md [R-checksum] */
TEST(test_every_bit_flip) {
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
TEST(test_bit_flips_unchecked_structure) {
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

/* FORMAT.md [R-magic] [R-version] [R-size] */
TEST(test_header_errors) {
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
    {
        char v[16];
        snprintf(v, sizeof v, "3.%d", TB_FORMAT_VERSION_MINOR);
        CHECK(strstr(e.message, v) != NULL); /* the major and minor the file states */
    }
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
/* FORMAT.md [R-sections] */
TEST(test_unknown_sections) {
    size_t size, nsize;
    unsigned char *buf = small_bundle(&size), *nb;
    tb_bundle *b = NULL;
    tb_error e;
    REQUIRE(buf);
    nsize = size + 16 + 16; /* keeps later payloads 16-byte aligned */
    nb = (unsigned char *)malloc(nsize);
    memcpy(nb, buf, 32);
    u_put32(nb + 32, 99);       /* type */
    u_put32(nb + 36, 0);        /* optional */
    u_put64(nb + 40, 13);       /* 13 bytes + 3 padding */
    memcpy(nb + 48, "from the future\0", 16);
    nb[61] = nb[62] = nb[63] = 0;
    memcpy(nb + 64, buf + 32, size - 32);
    u_put64(nb + 16, nsize);
    u_put32(nb + 24, 3);
    reseal(nb, nsize);
    CHECK_OK(tb_bundle_read_memory(nb, nsize, NULL, 0, &b, &e), &e);
    CHECK(b && tb_bundle_kernel_count(b) == 1);
    tb_bundle_free(b);
    b = NULL;
    u_put32(nb + 36, 1);        /* now required */
    reseal(nb, nsize);
    CHECK(tb_bundle_read_memory(nb, nsize, NULL, 0, &b, &e) == tb_err_unsupported_version);
    CHECK(strstr(e.message, "99") != NULL);
    free(nb);
    free(buf);
}

/* FORMAT.md [R-counts] */
TEST(test_absurd_counts) {
    size_t size;
    unsigned char *buf = small_bundle(&size);
    tb_bundle *b = NULL;
    tb_error e;
    tb_options o = ca_options();
    tb_result r;
    REQUIRE(buf);
    /* kernel count at offset 48 (header 32 + section header 16) */
    CHECK(u_le32(buf + 48) == 1);
    u_put32(buf + 48, 0xFFFFFFFFu);
    reseal(buf, size);
    ca_max_request = 0;
    r = tb_bundle_read_memory(buf, size, &o, 0, &b, &e);
    CHECK(r == tb_err_limit);
    u_put32(buf + 48, 900000);
    reseal(buf, size);
    r = tb_bundle_read_memory(buf, size, &o, 0, &b, &e);
    CHECK(r == tb_err_truncated);
    CHECK(strstr(e.message, "cannot fit") != NULL);
    CHECK(ca_max_request < 4096);  /* refused before allocating for the claimed count */
    u_put32(buf + 48, 1);
    /* artifact total */
    u_put32(buf + 52, 0x7FFFFFFFu);
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, &o, 0, &b, &e) == tb_err_truncated);
    CHECK(ca_max_request < 4096);
    u_put32(buf + 52, 9);
    /* the kernel hash's length */
    u_put32(buf + 56, 0x7FFFFFF0u);
    reseal(buf, size);
    CHECK(tb_bundle_read_memory(buf, size, &o, 0, &b, &e) == tb_err_limit);
    CHECK(e.offset == 56);
    CHECK(b == NULL);
    CHECK(ca_live == 0);
    free(buf);
}

/* Patches names inside a serialized bundle (same length) and reseals it:
   the reader must refuse every unsafe name before anything could write. */
/* FORMAT.md [R-names] */
TEST(test_bad_names_in_bundle) {
    /* separators put into the first artifact name, its length unchanged */
    static const char *const bad[] = {"/", "\\"};
    size_t size, i;
    unsigned char *buf = small_bundle(&size);
    tb_bundle *b = NULL;
    tb_error e;
    REQUIRE(buf);
    CHECK(u_le32(buf + 128) == strlen("__grp__tb_noargs.json"));
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
        uint32_t hl = u_le32(buf + 56);
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
        u_put32(c + 56, 2);  /* hash ".." made by shortening: padding then not zero */
        c[60] = '.';
        c[61] = '.';
        c[62] = 0;
        reseal(c, size);
        CHECK(tb_bundle_read_memory(c, size, NULL, 0, &b, &e) != tb_ok);
        free(c);
    }
    free(buf);
}

TEST(test_allocator_failures) {
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

/* Appending to a bundle read from a buffer copies the shared slices out. */
TEST(test_append_to_read_bundle) {
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

TEST(test_bundle_file_errors) {
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

/* FORMAT.md's reading rules for section 2's fixed fields: reserved fields
   are zero, scratch_present is 0 or 1, and a config flag this version does
   not know is refused as a newer version's (a launch that ignored it could
   go wrong). A one-record bundle, patched at the offsets the spec gives. */
/* FORMAT.md [R-reserved] [R-config-flags] [R-totals] */
TEST(test_format_rules_records) { /* also [R-strings] */
    tb_bundle *b = NULL, *r = NULL;
    tb_error e;
    tb_launch_config cfg;
    tb_launch_record rec;
    size_t size;
    unsigned char *buf;
    memset(&cfg, 0, sizeof cfg);
    memset(&rec, 0, sizeof rec);
    static const struct { size_t at; uint32_t value; tb_result want; } cases[] = {
        {84, 1, tb_err_malformed},             /* section 2's reserved field */
        {76, 0, tb_err_malformed},             /* config_total, not the sum */
        {80, 1, tb_err_malformed},             /* param_total, not the sum */
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
    CHECK(u_le32(buf + 56) == 2 && u_le32(buf + 88) == 1 && buf[92] == 'K' && u_le32(buf + 160) == 1);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char *p = (unsigned char *)malloc(size);
        memcpy(p, buf, size);
        u_put32(p + cases[i].at, cases[i].value);
        reseal(p, size);
        r = NULL;
        if (tb_bundle_read_memory(p, size, NULL, 0, &r, &e) != cases[i].want) {
            printf("    case at %zu: %s\n", cases[i].at, e.message);
            th_failed_now = 1;
        }
        tb_bundle_free(r);
        free(p);
    }
    /* [R-strings] the reader's codes are the builder's: an empty key is a bad
       name, a name over its limit a limit */
    {
        unsigned char *p = (unsigned char *)malloc(size);
        memcpy(p, buf, size);
        u_put32(p + 88, 0), u_put32(p + 92, 0); /* "K" becomes "" */
        reseal(p, size);
        CHECK(tb_bundle_read_memory(p, size, NULL, 0, &r, &e) == tb_err_bad_name && r == NULL);
        free(p);
        rec.cache_key = "";
        CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_bad_name);
        rec.cache_key = "K";
    }
    {
        char longname[TB_MAX_NAME_LENGTH + 2];
        uint32_t k;
        memset(longname, 'h', sizeof longname - 1);
        longname[sizeof longname - 1] = 0;
        CHECK(tb_bundle_add_kernel(b, longname, 0, &k, &e) == tb_err_limit);
        cfg.kernel_hash = longname;
        CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_limit);
        cfg.kernel_hash = "H";
    }
    /* a builder cannot add them either */
    cfg.flags = 8;
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_unsupported_version);
    cfg.flags = 0, cfg.global_scratch.present = 2;
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_malformed);
    tb_bundle_free(b);
    free(buf);
}

/* Large bundles are hashed on several threads, in windows of whole blocks,
   while the memory writer copies or the callback writes in order: the
   bytes must be those a one-thread reference computes. */
TEST(test_threads_parallel_checksum) {
    unsigned char *blob = NULL, *mem, *cb;
    tb_bundle *b = big_bundle(&blob);
    tb_error e;
    size_t size;
    sink_t s;
    REQUIRE(b);
    mem = u_serialize(b, &size);
    REQUIRE(mem);
    CHECK(u_le64(mem + size - 8) == block_checksum_reference(mem, size - 8));
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

/* A file from 16 MiB up is hashed beside the parse. What its read gives is
   what the same bytes read from memory give (code and message), for
   damaged structure behind a valid checksum too; a checksum that does not
   hold wins over damaged structure, as when the two ran in turn. */
static int patch_file(const char *path, size_t at, const void *bytes, size_t n) {
    int fd = open(path, O_WRONLY), ok;
    if (fd < 0) return 0;
    ok = pwrite(fd, bytes, n, (off_t)at) == (ssize_t)n;
    close(fd);
    return ok;
}
TEST(test_large_file_checksum_beside_parse) {
    unsigned char *blob = NULL, *mem;
    tb_bundle *b = big_bundle(&blob), *r = NULL;
    tb_error ef, em;
    tb_result rf, rm;
    size_t size, at;
    char *dir = u_tempdir("bigfile"), path[600];
    REQUIRE(b);
    mem = u_serialize(b, &size);
    REQUIRE(mem && size > ((size_t)16 << 20));
    snprintf(path, sizeof path, "%s/big.tbundle", dir);
    REQUIRE(u_write(path, mem, size) == 0);
    CHECK_OK(tb_bundle_read_file(path, NULL, 0, &r, &ef), &ef);
    CHECK(r && tb_bundle_kernel_count(r) == 1 && tb_bundle_storage(r) == TB_STORAGE_MAPPED);
    tb_bundle_free(r);
    r = NULL;
    for (at = 24; at < 128; at += 3) { /* the header's section count, section 1's header, counts and names */
        unsigned char was = mem[at], trailer[8];
        memcpy(trailer, mem + size - 8, 8);
        mem[at] ^= 0x41;
        /* the checksum stale: a checksum error, whatever the structure says */
        REQUIRE(patch_file(path, at, mem + at, 1));
        CHECK(tb_bundle_read_file(path, NULL, 0, &r, &ef) == tb_err_checksum && !r);
        /* resealed: the structure's own error, as from memory */
        reseal(mem, size);
        REQUIRE(patch_file(path, size - 8, mem + size - 8, 8));
        rf = tb_bundle_read_file(path, NULL, 0, &r, &ef);
        tb_bundle_free(r);
        r = NULL;
        rm = tb_bundle_read_memory(mem, size, NULL, 0, &r, &em);
        tb_bundle_free(r);
        r = NULL;
        CHECK(rf == rm && (rf == tb_ok || strncmp(ef.message, em.message, strlen(em.message)) == 0));
        if (rf != rm || (rf != tb_ok && strncmp(ef.message, em.message, strlen(em.message)) != 0))
            printf("    byte %zu: file %s / memory %s\n", at, ef.message, em.message);
        mem[at] = was;
        memcpy(mem + size - 8, trailer, 8);
        REQUIRE(patch_file(path, at, mem + at, 1) && patch_file(path, size - 8, trailer, 8));
    }
    /* a payload byte: the checksum */
    mem[size / 2] ^= 1;
    REQUIRE(patch_file(path, size / 2, mem + size / 2, 1));
    CHECK(tb_bundle_read_file(path, NULL, 0, &r, &ef) == tb_err_checksum && !r);
    free(mem);
    free(blob);
    tb_bundle_free(b);
    u_rmtree(dir);
    free(dir);
}

/* ------------------------------------------------- FORMAT.md, rule by rule
   Each test below names the rules of docs/FORMAT.md it pins ([R..]);
   tests/format_rules.sh checks that every rule there is named by a test. */

/* A bundle of sections that move freely (strings only, so every offset
   stays a multiple of 8): kernel "HH" without files, one record. */
static unsigned char *movable_bundle(size_t *size) {
    tb_bundle *b;
    tb_error e;
    tb_launch_config cfg;
    tb_launch_record rec;
    uint32_t k;
    unsigned char *buf;
    memset(&cfg, 0, sizeof cfg);
    memset(&rec, 0, sizeof rec);
    cfg.kernel_hash = "HH", cfg.function_name = "f", cfg.binary_name = "f.cubin", cfg.arg_types = "O";
    cfg.num_warps = cfg.num_ctas = 1;
    rec.cache_key = "K", rec.kernel_name = "f", rec.config_count = 1, rec.configs = &cfg;
    if (tb_bundle_create(NULL, &b, &e) != tb_ok) return NULL;
    if (tb_bundle_add_kernel(b, "HH", 0, &k, &e) != tb_ok || tb_bundle_add_launch_record(b, &rec, &e) != tb_ok) {
        tb_bundle_free(b);
        return NULL;
    }
    buf = u_serialize(b, size);
    tb_bundle_free(b);
    return buf;
}

/* The file made of src's sections in the order given (indexes into its
   sections, 0-based), header and trailer fixed up; *size in and out. */
static unsigned char *reorder_sections(const unsigned char *src, size_t *size, const int *order, int n) {
    size_t at[8], len[8], pos = 32, out = 32;
    int count = 0, i;
    unsigned char *dst;
    while (pos < *size - 8 && count < 8) {
        at[count] = pos;
        len[count] = (16 + (size_t)u_le64(src + pos + 8) + 7) & ~(size_t)7;
        pos += len[count++];
    }
    dst = (unsigned char *)malloc(*size * 2);
    memcpy(dst, src, 32);
    for (i = 0; i < n; i++) {
        memcpy(dst + out, src + at[order[i]], len[order[i]]);
        out += len[order[i]];
    }
    out += 8;
    u_put64(dst + 16, out);
    u_put32(dst + 24, (uint32_t)n);
    reseal(dst, out);
    *size = out;
    return dst;
}

static tb_result read_counts(const unsigned char *p, size_t n, uint32_t *kernels, uint32_t *records, tb_error *e) {
    tb_bundle *r = NULL;
    tb_result res = tb_bundle_read_memory(p, n, NULL, 0, &r, e);
    *kernels = r ? tb_bundle_kernel_count(r) : 99;
    *records = r ? tb_bundle_launch_record_count(r) : 99;
    tb_bundle_free(r);
    return res;
}

/* [R-order] sections 1 and 2 in either order, a missing one read as empty,
   a known one twice refused; [R-flags] header flags and reserved field and
   section flags other than bit 0 ignored; [R-padding] padding bytes and
   inner zero bytes refused. */
TEST(test_format_md_sections_and_fields) {
    size_t size, n;
    unsigned char *buf = movable_bundle(&size), *p;
    uint32_t kn, rn;
    tb_error e;
    static const int swapped[] = {1, 0}, only1[] = {0}, only2[] = {1}, twice[] = {0, 1, 1};
    REQUIRE(buf);
    CHECK(u_le32(buf + 32) == 1 && u_le32(buf + 56) == 2 && buf[60] == 'H'); /* the layout assumed: "HH" at 56 */
    n = size, p = reorder_sections(buf, &n, swapped, 2);
    CHECK(read_counts(p, n, &kn, &rn, &e) == tb_ok && kn == 1 && rn == 1);
    free(p);
    n = size, p = reorder_sections(buf, &n, only1, 1);
    CHECK(read_counts(p, n, &kn, &rn, &e) == tb_ok && kn == 1 && rn == 0);
    free(p);
    n = size, p = reorder_sections(buf, &n, only2, 1);
    CHECK(read_counts(p, n, &kn, &rn, &e) == tb_ok && kn == 0 && rn == 1);
    free(p);
    n = size, p = reorder_sections(buf, &n, twice, 3);
    CHECK(read_counts(p, n, &kn, &rn, &e) == tb_err_malformed && strstr(e.message, "twice"));
    free(p);
    p = (unsigned char *)malloc(size);
    memcpy(p, buf, size);
    u_put32(p + 12, 0x5u);  /* header flags */
    u_put32(p + 28, 0x9u);  /* header reserved */
    u_put32(p + 36, 0x3u);  /* section 1: required and an unknown bit */
    reseal(p, size);
    CHECK(read_counts(p, size, &kn, &rn, &e) == tb_ok && kn == 1 && rn == 1);
    memcpy(p, buf, size);
    p[61] = 0; /* the hash "HH" becomes "H\0" */
    reseal(p, size);
    CHECK(read_counts(p, size, &kn, &rn, &e) == tb_err_malformed && strstr(e.message, "NUL"));
    memcpy(p, buf, size);
    p[63] = 1; /* the padding after "HH\0" */
    reseal(p, size);
    CHECK(read_counts(p, size, &kn, &rn, &e) == tb_err_malformed && strstr(e.message, "padding"));
    free(p);
    free(buf);
}

/* [R-strings] the rules of every string field, as builders and readers
   apply them. */
TEST(test_format_md_string_fields) {
    tb_bundle *b;
    tb_error e;
    tb_launch_config cfg;
    tb_launch_record rec;
    tb_config_param param;
    char *longest = (char *)malloc(TB_MAX_STRING_LENGTH + 2);
    memset(&cfg, 0, sizeof cfg);
    memset(&rec, 0, sizeof rec);
    REQUIRE(longest);
    memset(longest, 'k', TB_MAX_STRING_LENGTH + 1);
    longest[TB_MAX_STRING_LENGTH + 1] = 0;
    memset(&cfg, 0, sizeof cfg);
    cfg.kernel_hash = "H", cfg.function_name = "f", cfg.binary_name = "f.cubin", cfg.arg_types = "Oi";
    cfg.num_warps = cfg.num_ctas = 1;
    rec.cache_key = "K", rec.kernel_name = "f", rec.config_count = 1, rec.configs = &cfg;
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    rec.cache_key = "";
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) != tb_ok);
    rec.cache_key = longest;
    {
        tb_result r = tb_bundle_add_launch_record(b, &rec, &e);
        CHECK(r == tb_err_limit);
        if (r != tb_err_limit) printf("    got %s: %s\n", tb_result_string(r), e.message);
    }
    longest[TB_MAX_STRING_LENGTH] = 0; /* exactly the limit */
    CHECK_OK(tb_bundle_add_launch_record(b, &rec, &e), &e);
    rec.cache_key = "K2";
    cfg.binary_name = "../f.cubin"; /* a name */
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) == tb_err_bad_name);
    cfg.binary_name = "f.cubin";
    cfg.arg_divisibility = "1"; /* one per code, or none */
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) != tb_ok);
    cfg.arg_divisibility = "12";
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) != tb_ok);
    cfg.arg_divisibility = "10";
    cfg.arg_types = "Oj"; /* not a code */
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) != tb_ok);
    cfg.arg_types = "Oi";
    param.name = "a/b"; /* never a path: '/' allowed */
    param.value = 7;
    cfg.params = &param, cfg.param_count = 1;
    CHECK_OK(tb_bundle_add_launch_record(b, &rec, &e), &e);
    param.name = "";
    rec.cache_key = "K3";
    CHECK(tb_bundle_add_launch_record(b, &rec, &e) != tb_ok);
    {
        size_t n;
        unsigned char *buf = u_serialize(b, &n);
        tb_bundle *r = NULL;
        CHECK(buf && tb_bundle_read_memory(buf, n, NULL, 0, &r, &e) == tb_ok && tb_bundle_launch_record_count(r) == 2);
        if (r) CHECK(strcmp(tb_bundle_launch_record(r, 1)->configs[0].params[0].name, "a/b") == 0);
        if (r) CHECK(strcmp(tb_bundle_launch_record(r, 0)->configs[0].arg_divisibility, "") == 0); /* absent: "" */
        tb_bundle_free(r);
        free(buf);
    }
    tb_bundle_free(b);
    free(longest);
}

/* tb_kernel_name: NAME of NAME.cubin, else of __grp__NAME.json. */
TEST(test_kernel_name) {
    tb_bundle *b;
    tb_error e;
    uint32_t k;
    char out[8];
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(tb_bundle_add_kernel(b, "A", 0, &k, &e), &e);
    CHECK(tb_kernel_name(tb_bundle_kernel(b, 0), out, sizeof out) == 0 && out[0] == 0);
    CHECK_OK(tb_bundle_add_artifact(b, k, "__grp__add_kernel.json", "{}", 2, TB_COPY, &e), &e);
    CHECK(tb_kernel_name(tb_bundle_kernel(b, 0), out, sizeof out) == 10 && strcmp(out, "add_ker") == 0);
    CHECK_OK(tb_bundle_add_artifact(b, k, "mm.cubin", "x", 1, TB_COPY, &e), &e);
    CHECK(tb_kernel_name(tb_bundle_kernel(b, 0), out, sizeof out) == 2 && strcmp(out, "mm") == 0);
    CHECK(tb_kernel_name(tb_bundle_kernel(b, 0), NULL, 0) == 2);
    tb_bundle_free(b);
}

/* [R-calls] [R-order] section 4: call info and grid rules round trip, the section is
   optional (a reader that does not know it reads the rest), and it must
   follow section 2. */
TEST(test_call_info_and_grid_rules) {
    static const tb_grid_op gx[] = {{TB_GRID_ARG, 1, 0}, {TB_GRID_PARAM, 0, 0}, {TB_GRID_CEILDIV, 0, 0}};
    static const tb_grid_op gy[] = {{TB_GRID_EXTRA, 0, 0}};
    static const tb_grid_op gz[] = {{TB_GRID_CONST, 0, 1}};
    static const tb_config_param ps[] = {{"XBLOCK", 256}};
    static const char *const names[] = {"in_out_ptr0", "xnumel"};
    static const uint32_t mutated[] = {0}, key[] = {1};
    tb_grid_rule g;
    tb_call_info ci;
    tb_launch_config cfg[2];
    tb_launch_record rec;
    tb_bundle *b, *r = NULL;
    tb_error e;
    unsigned char *buf;
    size_t n, at;
    const tb_launch_record *rr;
    memset(&ci, 0, sizeof ci);
    memset(&rec, 0, sizeof rec);
    memset(cfg, 0, sizeof cfg);
    g.op_count[0] = 3, g.op_count[1] = 1, g.op_count[2] = 1;
    g.ops[0] = gx, g.ops[1] = gy, g.ops[2] = gz;
    ci.arg_count = 2, ci.arg_names = names, ci.mutated_count = 1, ci.mutated = mutated, ci.key_count = 1, ci.key = key;
    cfg[0].kernel_hash = "H", cfg[0].function_name = "k", cfg[0].binary_name = "k.cubin", cfg[0].arg_types = "Oi";
    cfg[0].num_warps = cfg[0].num_ctas = 1, cfg[0].params = ps, cfg[0].param_count = 1, cfg[0].grid = &g;
    cfg[1] = cfg[0], cfg[1].grid = NULL; /* a config without a rule */
    rec.cache_key = "K", rec.kernel_name = "k", rec.config_count = 2, rec.configs = cfg, rec.call = &ci;
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(tb_bundle_add_launch_record(b, &rec, &e), &e);
    rec.cache_key = "plain", rec.call = NULL, rec.config_count = 1, rec.configs = &cfg[1];
    CHECK_OK(tb_bundle_add_launch_record(b, &rec, &e), &e);
    buf = u_serialize(b, &n);
    REQUIRE(buf);
    CHECK(u_le32(buf + 24) == 3); /* sections 1, 2 and 4 */
    CHECK_OK(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e), &e);
    REQUIRE(r && tb_bundle_launch_record_count(r) == 2);
    rr = tb_bundle_launch_record(r, 0);
    CHECK(rr->call && rr->call->arg_count == 2 && strcmp(rr->call->arg_names[1], "xnumel") == 0);
    CHECK(rr->call && rr->call->mutated_count == 1 && rr->call->mutated[0] == 0 && rr->call->reset_count == 0 &&
          rr->call->key_count == 1 && rr->call->key[0] == 1);
    CHECK(rr->configs[0].grid && rr->configs[0].grid->op_count[0] == 3 &&
          rr->configs[0].grid->ops[0][1].op == TB_GRID_PARAM);
    CHECK(rr->configs[1].grid == NULL && tb_bundle_launch_record(r, 1)->call == NULL &&
          tb_bundle_launch_record(r, 1)->configs[0].grid == NULL);
    {
        tb_arg a[2];
        int64_t extra[1] = {3};
        uint32_t grid[3];
        a[0] = tb_arg_p(NULL), a[1] = tb_arg_i(1000);
        CHECK_OK(tb_grid_compute(&rr->configs[0], a, 2, extra, 1, grid, &e), &e);
        CHECK(grid[0] == 4 && grid[1] == 3 && grid[2] == 1);
    }
    tb_bundle_free(r);
    r = NULL;
    /* the same bytes again, from the bundle read back */
    {
        size_t n2;
        unsigned char *again = NULL;
        CHECK_OK(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e), &e);
        again = r ? u_serialize(r, &n2) : NULL;
        CHECK(again && n2 == n && memcmp(again, buf, n) == 0);
        free(again);
        tb_bundle_free(r);
        r = NULL;
    }
    /* section 4 is optional: a reader that knows no type 4 skips it */
    for (at = 32; at < n - 8; at += (16 + (size_t)u_le64(buf + at + 8) + 7) & ~(size_t)7)
        if (u_le32(buf + at) == 4) break;
    REQUIRE(at < n - 8 && u_le32(buf + at + 4) == 0);
    u_put32(buf + at, 77);
    reseal(buf, n);
    CHECK_OK(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e), &e);
    CHECK(r && tb_bundle_launch_record(r, 0)->call == NULL && tb_bundle_launch_record(r, 0)->configs[0].grid == NULL);
    tb_bundle_free(r);
    r = NULL;
    /* before section 2: refused */
    u_put32(buf + at, 4);
    {
        size_t m = n;
        static const int order[] = {2, 0, 1};
        unsigned char *p = reorder_sections(buf, &m, order, 3);
        CHECK(tb_bundle_read_memory(p, m, NULL, 0, &r, &e) == tb_err_malformed &&
              strstr(e.message, "before section 2"));
        free(p);
    }
    /* damaged: an operand out of range is refused, not evaluated */
    {
        size_t q;
        int hits = 0;
        for (q = at + 16; q + 16 <= n - 8; q += 8)
            if (u_le32(buf + q) == TB_GRID_ARG && u_le32(buf + q + 4) == 1) {
                u_put32(buf + q + 4, 0); /* ARG 0: a pointer */
                hits++;
                break;
            }
        CHECK(hits == 1);
        reseal(buf, n);
        CHECK(tb_bundle_read_memory(buf, n, NULL, 0, &r, &e) == tb_err_malformed);
    }
    free(buf);
    tb_bundle_free(b);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
