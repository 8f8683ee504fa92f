/* Helpers shared by the test programs: temporary directories, whole-file
   reads, the fixture bundle. Include after triton_bundle.h. */
#ifndef TB_TEST_UTIL_H
#define TB_TEST_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__GNUC__) || defined(__clang__)
#define TB_TEST_UNUSED __attribute__((unused))
#else
#define TB_TEST_UNUSED
#endif

#define FIXTURE_CACHE "tests/fixtures/triton-3.6-sm90/cache"
#define FIXTURE_RECORDED "/tmp/triton_cache" /* where Triton wrote it */
#define FIXTURE_KERNELS 8u
#define FIXTURE_FILES 64u

static TB_TEST_UNUSED char *u_tempdir(const char *tag) {
    const char *base = getenv("TMPDIR");
    char *p = (char *)malloc(512);
    snprintf(p, 512, "%s/tbtest-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(p)) {
        perror("mkdtemp");
        exit(2);
    }
    return p;
}

static TB_TEST_UNUSED void u_rmtree(const char *path) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", path, path);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", path);
}

static TB_TEST_UNUSED unsigned char *u_read(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (unsigned char *)malloc((size_t)n + 1);
    if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    *size = (size_t)n;
    return buf;
}

static TB_TEST_UNUSED int u_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok;
    if (!f) return -1;
    ok = fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* entries of a directory, not counting . and .. */
static TB_TEST_UNUSED int u_count_entries(const char *path, const char *prefix) {
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (prefix && strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        n++;
    }
    closedir(d);
    return n;
}

/* The fixture cache as a bundle (paths swapped for the sentinel). */
static TB_TEST_UNUSED tb_bundle *u_fixture_bundle(int with_records) {
    tb_bundle *b = NULL;
    tb_error e;
    tb_collect_options o;
    tb_collect_report rep;
    memset(&o, 0, sizeof o);
    o.recorded_cache_dir = FIXTURE_RECORDED;
    if (tb_bundle_create(NULL, &b, &e) != tb_ok) return NULL;
    if (tb_collect_cache(b, FIXTURE_CACHE, &o, &rep, &e) != tb_ok || rep.collected != FIXTURE_KERNELS) {
        fprintf(stderr, "fixture collect failed: %s\n", e.message);
        tb_bundle_free(b);
        return NULL;
    }
    if (with_records && tb_bundle_derive_launch_records(b, &e) != tb_ok) {
        fprintf(stderr, "derive failed: %s\n", e.message);
        tb_bundle_free(b);
        return NULL;
    }
    return b;
}

static TB_TEST_UNUSED unsigned char *u_serialize(const tb_bundle *b, size_t *size) {
    tb_error e;
    unsigned char *buf;
    if (tb_bundle_write_memory(b, NULL, 0, size, &e) != tb_ok) return NULL;
    buf = (unsigned char *)malloc(*size);
    if (tb_bundle_write_memory(b, buf, *size, NULL, &e) != tb_ok) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* n kernels: the fixture's, in turn, under new hashes; bytes referenced */
static TB_TEST_UNUSED tb_bundle *replicated_bundle(const tb_bundle *fix, uint32_t n) {
    tb_bundle *big;
    tb_error e;
    uint32_t c, j, k;
    if (tb_bundle_create(NULL, &big, &e) != tb_ok) return NULL;
    for (c = 0; c < n; c++) {
        const tb_kernel *kn = tb_bundle_kernel(fix, c % tb_bundle_kernel_count(fix));
        char hash[64];
        snprintf(hash, sizeof hash, "%.44s%08u", kn->hash, c);
        if (tb_bundle_add_kernel(big, hash, 0, &k, &e) != tb_ok) break;
        for (j = 0; j < kn->artifact_count; j++)
            tb_bundle_add_artifact(big, k, kn->artifacts[j].name, kn->artifacts[j].data, kn->artifacts[j].size,
                                   TB_REFERENCE, &e);
    }
    return big;
}


/* Little-endian fields of a bundle, for tests that build or damage one by
   hand. */
static TB_TEST_UNUSED void u_put32(unsigned char *p, uint32_t v) {
    int i;
    for (i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static TB_TEST_UNUSED void u_put64(unsigned char *p, uint64_t v) {
    int i;
    for (i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static TB_TEST_UNUSED uint32_t u_le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static TB_TEST_UNUSED uint32_t u_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static TB_TEST_UNUSED uint64_t u_le64(const unsigned char *p) {
    return (uint64_t)u_le32(p) | (uint64_t)u_le32(p + 4) << 32;
}

/* A bundle damaged by hand gets a valid checksum again, so that the reader
   reaches the damage. */
static TB_TEST_UNUSED void reseal(unsigned char *buf, size_t size) {
    u_put64(buf + size - 8, tb_bundle_checksum(buf, size - 8));
}

/* One 40 MiB kernel (two files) referencing *blob_out: large enough for the
   threaded checksum. */
static TB_TEST_UNUSED tb_bundle *big_bundle(unsigned char **blob_out) {
    size_t n = (size_t)40 << 20, i;
    unsigned char *blob = (unsigned char *)malloc(n);
    tb_bundle *b;
    tb_error e;
    uint32_t k;
    if (!blob) return NULL;
    for (i = 0; i < n; i++) blob[i] = (unsigned char)((uint32_t)i * 2654435761u >> 13);
    if (tb_bundle_create(NULL, &b, &e) != tb_ok) return NULL;
    if (tb_bundle_add_kernel(b, "BIG", 0, &k, &e) ||
        tb_bundle_add_artifact(b, k, "a.cubin", blob, n - 12345, TB_REFERENCE, &e) ||
        tb_bundle_add_artifact(b, k, "b.bin", blob + 7, 12345, TB_REFERENCE, &e)) {
        tb_bundle_free(b);
        free(blob);
        return NULL;
    }
    *blob_out = blob;
    return b;
}

#endif
