/* The filesystem layer: collect, pack and emit of Triton caches, bundle
   files, threads, full disks, crashes and concurrent writers. Compiled as
   C99 and as C++11; run from the repository root:
   build/test_fs [name-filter]
   Tests whose names hold "emit" are the races that `make torture` repeats
   (TB_TORTURE_ROUNDS). */
#define TB__PACK_HELD_MAX 1 /* the pack reads ahead only while nothing read is unwritten: its byte budget at work */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

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

typedef struct { uint32_t calls, next; int in_order; } order_t;

static void order_cb(void *user, uint32_t index, const tb_kernel *k, tb_emit_status s, const tb_error *e) {
    order_t *o = (order_t *)user;
    (void)k;
    o->calls++;
    if (index != o->next++) o->in_order = 0;
    if ((s == TB_EMIT_FAILED) != (e != NULL)) o->in_order = 0;
}

static int torture_rounds(int dflt) {
    const char *s = getenv("TB_TORTURE_ROUNDS");
    return s && atoi(s) > 0 ? atoi(s) : dflt;
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

TEST(test_collect_emit_fixture) {
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

/* FORMAT.md [R-kernel-dir] */
TEST(test_collect_edge_cases) {
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

/* Hardening 2.0, FORMAT.md (6) [R-kernel-dir]: a directory whose only
   __grp__*.json is a symlink is no kernel: before, it was collected
   without that file, and its unpacked copy was then no kernel. Skipped
   whole, with a warning; one with a regular __grp__ file beside a linked
   one is a kernel (the link left out, as every link). */
static int grp_warnings;
static void grp_logger(void *user, tb_log_level level, const char *msg) {
    (void)user;
    if (level == TB_LOG_WARN && strstr(msg, "__grp__") && strstr(msg, "skipped")) grp_warnings++;
}
TEST(test_collect_grp_symlink) {
    char *dir = u_tempdir("grplink");
    char p[700];
    tb_bundle *b;
    tb_error e;
    tb_collect_report rep;
    tb_options o;
    const tb_kernel *k;
    make_dir(dir, "REAL");
    make_file(dir, "REAL/__grp__k.json", "{}");
    make_file(dir, "REAL/k.cubin", "CUBIN");
    make_dir(dir, "LINKED");
    make_file(dir, "LINKED/k.cubin", "CUBIN");
    snprintf(p, sizeof p, "%s/REAL/__grp__k.json", dir);
    snprintf(p + 350, 350, "%s/LINKED/__grp__k.json", dir);
    CHECK(symlink(p, p + 350) == 0);
    make_dir(dir, "BOTH");
    make_file(dir, "BOTH/__grp__a.json", "{}");
    snprintf(p + 350, 350, "%s/BOTH/__grp__b.json", dir);
    CHECK(symlink(p, p + 350) == 0);
    memset(&o, 0, sizeof o);
    o.log = grp_logger;
    grp_warnings = 0;
    CHECK_OK(tb_bundle_create(&o, &b, &e), &e);
    CHECK_OK(tb_collect_cache(b, dir, NULL, &rep, &e), &e);
    CHECK(rep.collected == 2 && rep.failed == 0);
    CHECK(tb_bundle_find_kernel(b, "LINKED") == NULL && grp_warnings == 1);
    REQUIRE((k = tb_bundle_find_kernel(b, "BOTH")) != NULL);
    CHECK(k->artifact_count == 1 && tb_kernel_find_artifact(k, "__grp__a.json"));
    tb_bundle_free(b);
    u_rmtree(dir);
    free(dir);
}

TEST(test_collect_path_swap) {
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

TEST(test_emit_hostile_targets) {
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

TEST(test_emit_readonly_dir) {
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

/* Write failure: a file-size limit makes large files fail mid-write. */
/* The readers and writers in threads: the same bundle, the same cache, the
   same reports, callbacks in kernel order. */
/* FORMAT.md [R-collect-order] */
TEST(test_threads_collect_same_bundle) {
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
    snprintf(p, sizeof p, "cp -r %s/* %s/ && mkdir %s/MIDDLE && echo '[REPLACE]' > %s/MIDDLE/__grp__x.json",
             FIXTURE_CACHE, dir, dir, dir);
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

TEST(test_threads_emit) {
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

/* Emit's writers: every flag but stop-on-error keeps them (2.3.0 to 2.5.0
   gave TB_EMIT_VERIFY the bit of TB_STOP_ON_ERROR, so every verifying emit,
   which every tbundle unpack is, wrote alone). Counted by the report. */
TEST(test_emit_writers_with_flags) {
    tb_bundle *fix = u_fixture_bundle(0), *big = fix ? replicated_bundle(fix, 64) : NULL;
    unsigned flags[] = {0, TB_EMIT_VERIFY, TB_EMIT_REPLACE, TB_EMIT_VERIFY | TB_EMIT_REPLACE | TB_EMIT_FSYNC};
    size_t f;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    REQUIRE(big && tb_bundle_kernel_count(big) == 64);
    CHECK(TB_EMIT_VERIFY != TB_STOP_ON_ERROR && TB_EMIT_STOP_ON_ERROR == TB_STOP_ON_ERROR);
    for (f = 0; f < sizeof flags / sizeof flags[0]; f++) {
        char *dir = u_tempdir("writers");
        tb_emit_options eo;
        tb_emit_report rep;
        tb_error e;
        int round;
        for (round = 0; round < 2; round++) { /* into an empty cache, then onto the same kernels */
            memset(&eo, 0, sizeof eo);
            eo.flags = flags[f];
            eo.threads = 4;
            CHECK_OK(tb_emit(big, dir, &eo, &rep, NULL, &e), &e);
            CHECK(rep.threads == 4);
            CHECK(round ? rep.present == 64 : rep.written == 64);
            eo.threads = 0; /* the default: more than one writer where there is more than one core */
            CHECK_OK(tb_emit(big, dir, &eo, &rep, NULL, &e), &e);
            CHECK(rep.present == 64 && (cpus > 1 ? rep.threads > 1 : rep.threads == 1));
        }
        /* stop-on-error, alone or with the others, writes alone */
        memset(&eo, 0, sizeof eo);
        eo.flags = flags[f] | TB_EMIT_STOP_ON_ERROR;
        eo.threads = 4;
        CHECK_OK(tb_emit(big, dir, &eo, &rep, NULL, &e), &e);
        CHECK(rep.threads == 1 && rep.present == 64);
        u_rmtree(dir);
        free(dir);
    }
    {   /* a flag no version defines is refused, before anything is written */
        char *dir = u_tempdir("writers");
        tb_emit_options eo;
        tb_emit_report rep;
        tb_error e;
        memset(&eo, 0, sizeof eo);
        eo.flags = 16u;
        CHECK(tb_emit(big, dir, &eo, &rep, NULL, &e) == tb_err_invalid_argument);
        CHECK(rep.written == 0 && u_count_entries(dir, "") == 0);
        u_rmtree(dir);
        free(dir);
    }
    tb_bundle_free(big);
    tb_bundle_free(fix);
}

/* The streaming pack writes the bytes that collect + derive + write give,
   for any thread count, and leaves out what they leave out. */
TEST(test_threads_pack_cache) {
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

/* TB_STOP_ON_ERROR fails the pack and leaves nothing; an output it cannot
   create fails cleanly; a missing cache is not found. */
TEST(test_pack_cache_failures) {
    char *cache = pack_test_cache(20), *out = u_tempdir("packfail"), path[700];
    tb_pack_options po;
    tb_pack_report rep;
    tb_error e;
    memset(&po, 0, sizeof po);
    po.collect.flags = TB_STOP_ON_ERROR;
    snprintf(path, sizeof path, "%s/b.tbundle", out);
    CHECK(tb_pack_cache(cache, path, &po, NULL, &rep, &e) == tb_err_sentinel);
    CHECK(strcmp(e.kernel, "REFUSED") == 0 && u_count_entries(out, NULL) == 0);
    po.collect.flags = 0;
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

TEST(test_emit_write_failure) {
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

/* A real full disk and a real read-only filesystem: a 160 KiB tmpfs, then
   the same remounted read-only. Needs mount privileges; skipped without. */
TEST(test_emit_full_disk_and_readonly_fs) {
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

TEST(test_concurrent_emit) {
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

TEST(test_crash_during_emit) {
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

TEST(test_stale_temporaries) {
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

TEST(test_cache_dir_resolution) {
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

TEST(test_bundler_threads) {
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
    memset(&cfg, 0, sizeof cfg);
    memset(&rec, 0, sizeof rec);
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

/* [R-sentinel] exactly FORMAT.md's sentinel rule: a plain substring
   replace of <cache>/<hash> in files whose names end in ".json" (so
   <cache>/<hash>X/ too, and not a JSON-escaped path nor a ".JSON" file),
   and on emit the target made absolute with trailing slashes dropped. */
TEST(test_sentinel_rule_exact) {
    char *dir = u_tempdir("sent"), cache[600], json[4096], esc[1300], want[4096], p[700];
    tb_bundle *b = NULL;
    tb_error e;
    const tb_artifact *a;
    size_t i, j, n;
    unsigned char *s;
    tb_emit_report rep;
    snprintf(cache, sizeof cache, "%s/c", dir);
    make_dir(dir, "c");
    make_dir(cache, "HASH");
    for (i = j = 0; cache[i] && j + 3 < sizeof esc; i++) { /* the JSON-escaped form: \/ */
        if (cache[i] == '/') esc[j++] = '\\';
        esc[j++] = cache[i];
    }
    esc[j] = 0;
    snprintf(json, sizeof json, "{\"a\": \"%s/HASH/k.cubin\", \"b\": \"%s/HASHX/y\", \"c\": \"%s\\/HASH\"}", cache,
             cache, esc);
    make_file(cache, "HASH/__grp__k.json", json);
    snprintf(json, sizeof json, "%s/HASH/z", cache);
    make_file(cache, "HASH/k.JSON", json);
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(tb_collect_kernel(b, cache, "HASH", 0, NULL, &e), &e);
    REQUIRE(tb_bundle_kernel_count(b) == 1);
    a = tb_kernel_find_artifact(tb_bundle_kernel(b, 0), "__grp__k.json");
    snprintf(want, sizeof want, "{\"a\": \"[REPLACE]/k.cubin\", \"b\": \"[REPLACE]X/y\", \"c\": \"%s\\/HASH\"}", esc);
    CHECK(a && a->size == strlen(want) && memcmp(a->data, want, strlen(want)) == 0);
    a = tb_kernel_find_artifact(tb_bundle_kernel(b, 0), "k.JSON");
    CHECK(a && a->size == strlen(json) && memcmp(a->data, json, strlen(json)) == 0); /* not a .json */
    snprintf(p, sizeof p, "%s/out//", dir);
    CHECK_OK(tb_emit(b, p, NULL, &rep, NULL, &e), &e);
    snprintf(p, sizeof p, "%s/out/HASH/__grp__k.json", dir);
    s = u_read(p, &n);
    snprintf(want, sizeof want, "{\"a\": \"%s/out/HASH/k.cubin\", \"b\": \"%s/out/HASHX/y\", \"c\": \"%s\\/HASH\"}",
             dir, dir, esc);
    CHECK(s && n == strlen(want) && memcmp(s, want, n) == 0);
    free(s);
    tb_bundle_free(b);
    /* a .json that already holds the sentinel cannot be restored: refused */
    make_file(cache, "HASH/__grp__k.json", "[REPLACE]");
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK(tb_collect_kernel(b, cache, "HASH", 0, NULL, &e) == tb_err_sentinel);
    tb_bundle_free(b);
    u_rmtree(dir);
    free(dir);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
