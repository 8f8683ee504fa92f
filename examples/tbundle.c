/* tbundle: pack a Triton cache into a bundle file, list, verify and unpack it.

     tbundle pack [-o FILE] [--as DIR] [--no-records] [--fsync] [--threads N] [-v] CACHE_DIR [HASH...]
     tbundle list FILE
     tbundle unpack [--fsync] [--threads N] [-v] FILE CACHE_DIR
     tbundle verify FILE
     tbundle clean [--age SECONDS] CACHE_DIR

   Exit status: 0 success, 1 failure (a message on stderr names the file and
   the cause), 2 usage error. */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog = "tbundle";

static const char *usage_pack =
    "usage: tbundle pack [-o FILE] [--as DIR] [--no-records] [--fsync] [--threads N] [-v] CACHE_DIR [HASH...]\n"
    "  Packs every kernel directory of CACHE_DIR (one holding __grp__*.json), or the\n"
    "  named ones, into FILE (default: triton_kernels.tbundle). Absolute paths of the\n"
    "  cache inside .json files become the sentinel [REPLACE].\n"
    "  --as DIR      the cache path the .json files name, if the cache was moved\n"
    "                since Triton wrote it (default: CACHE_DIR's absolute path)\n"
    "  --no-records  do not derive static launch records from NAME.json/NAME.source\n"
    "  --fsync       flush the file to disk before renaming it into place\n"
    "  --threads N   reader threads (default: one per CPU, at most 8)\n"
    "  -v            print the time each step took on stderr\n";
static const char *usage_list = "usage: tbundle list FILE\n  Prints the kernels (hash, device, files, bytes) and launch records.\n";
static const char *usage_unpack =
    "usage: tbundle unpack [--fsync] [--threads N] [-v] FILE CACHE_DIR\n"
    "  Writes each kernel to CACHE_DIR/HASH through a temporary directory and one\n"
    "  rename; kernels already there are left alone. Prints emitted/present/failed.\n"
    "  --fsync       flush files and directories to disk before and after each rename\n"
    "  --threads N   writer threads (default: one per CPU, at most 4)\n"
    "  -v            print the time each step took on stderr\n";
static const char *usage_verify = "usage: tbundle verify FILE\n  Checks the structure, names and checksum of FILE.\n";
static const char *usage_clean =
    "usage: tbundle clean [--age SECONDS] CACHE_DIR\n"
    "  Removes CACHE_DIR/tmp.* directories left by crashed writers, older than\n"
    "  SECONDS (default 3600).\n";

static int usage(const char *text, int status) {
    fputs(text, status ? stderr : stdout);
    return status;
}

static int fail(const tb_error *e) {
    fprintf(stderr, "%s: %s\n", prog, e->message);
    return 1;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* progress on stderr, only once a run has taken over a second */
typedef struct { double start, last; } progress_t;
static void show_progress(progress_t *p, uint32_t done, uint32_t total, const char *what) {
    double t = now();
    if (t - p->start < 1.0 || (t - p->last < 0.25 && done != total) || !isatty(2)) return;
    p->last = t;
    fprintf(stderr, "\r%s %u/%u kernels", what, done, total);
    if (done == total) fputc('\n', stderr);
}
static void collect_progress(void *user, uint32_t done, uint32_t total) {
    show_progress((progress_t *)user, done, total, "packing");
}
typedef struct { progress_t p; uint32_t total; } emit_progress_t;
static void emit_progress(void *user, uint32_t index, const tb_kernel *k, tb_emit_status s, const tb_error *e) {
    emit_progress_t *ep = (emit_progress_t *)user;
    (void)k;
    if (s == TB_EMIT_FAILED) fprintf(stderr, "%s: %s\n", prog, e->message);
    show_progress(&ep->p, index + 1, ep->total, "unpacking");
}

static int verbose;
static double step_start;
static void step(const char *what) {
    double t = now();
    if (verbose && what) fprintf(stderr, "%s: %s %.1f ms\n", prog, what, (t - step_start) * 1e3);
    step_start = t;
}

/* --threads N: 1 to 64 */
static int parse_threads(const char *s, unsigned *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > 64) return 0;
    *out = (unsigned)v;
    return 1;
}

/* Named hashes: collect them into a bundle, derive, write. */
static int pack_named(const char *cache, char **hashes, int count, const tb_collect_options *co, int records,
                      unsigned write_flags, const char *out) {
    tb_bundle *b = NULL;
    tb_error e;
    uint32_t failed = 0;
    int i;
    if (tb_bundle_create(NULL, &b, &e) != tb_ok) return fail(&e);
    for (i = 0; i < count; i++)
        if (tb_collect_kernel(b, cache, hashes[i], 0, co, &e) != tb_ok) {
            fprintf(stderr, "%s: %s\n", prog, e.message);
            failed++;
        }
    step("collect");
    if (records && tb_bundle_derive_launch_records(b, &e) != tb_ok) {
        tb_bundle_free(b);
        return fail(&e);
    }
    step("derive launch records");
    if (tb_bundle_write_file(b, out, write_flags, &e) != tb_ok) {
        tb_bundle_free(b);
        return fail(&e);
    }
    step("write");
    printf("packed %u kernels, %u launch records into %s\n", tb_bundle_kernel_count(b),
           tb_bundle_launch_record_count(b), out);
    tb_bundle_free(b);
    return failed ? 1 : 0;
}

static int cmd_pack(int argc, char **argv) {
    const char *out = "triton_kernels.tbundle", *cache = NULL;
    tb_pack_options po;
    tb_pack_report rep;
    tb_error e;
    int i, first_hash = 0;
    progress_t pg;
    memset(&po, 0, sizeof po);
    for (i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(usage_pack, 0);
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--as") && i + 1 < argc) po.collect.recorded_cache_dir = argv[++i];
        else if (!strcmp(argv[i], "--no-records")) po.no_launch_records = 1;
        else if (!strcmp(argv[i], "--fsync")) po.write_flags = TB_WRITE_FSYNC;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            if (!parse_threads(argv[++i], &po.collect.threads)) return usage(usage_pack, 2);
        } else if (!strcmp(argv[i], "-v")) verbose = 1;
        else if (argv[i][0] == '-') return usage(usage_pack, 2);
        else if (!cache) cache = argv[i], first_hash = i + 1;
        else break;
    }
    if (!cache) return usage(usage_pack, 2);
    pg.start = step_start = now();
    pg.last = 0;
    po.collect.progress = collect_progress;
    po.collect.user = &pg;
    if (first_hash < argc)
        return pack_named(cache, argv + first_hash, argc - first_hash, &po.collect, !po.no_launch_records,
                          po.write_flags, out);
    /* the whole cache: read and written in one streaming pass */
    if (tb_pack_cache(cache, out, &po, NULL, &rep, &e) != tb_ok) return fail(&e);
    step("collect, derive launch records and write");
    if (rep.collect.failed)
        fprintf(stderr, "%s: %u kernel(s) could not be packed; first: %s\n", prog, rep.collect.failed,
                rep.first_failure.message);
    printf("packed %u kernels, %u launch records into %s\n", rep.collect.collected, rep.records, out);
    return rep.collect.failed ? 1 : 0;
}

static int open_bundle(const char *path, tb_bundle **b) {
    tb_error e;
    if (tb_bundle_read_file(path, NULL, 0, b, &e) != tb_ok) return fail(&e);
    return 0;
}

static void print_scratch(const char *name, const tb_scratch *s) {
    if (s->present) printf(" %s=%llu/%u", name, (unsigned long long)s->size, s->align);
}

static int cmd_list(int argc, char **argv) {
    tb_bundle *b;
    uint32_t i, j, files = 0;
    unsigned long long bytes = 0;
    if (argc == 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) return usage(usage_list, 0);
    if (argc != 1 || argv[0][0] == '-') return usage(usage_list, 2);
    if (open_bundle(argv[0], &b)) return 1;
    for (i = 0; i < tb_bundle_kernel_count(b); i++) {
        const tb_kernel *k = tb_bundle_kernel(b, i);
        unsigned long long kb = 0;
        for (j = 0; j < k->artifact_count; j++) kb += k->artifacts[j].size;
        printf("kernel %s  device %d  files %u  bytes %llu\n", k->hash, k->device, k->artifact_count, kb);
        for (j = 0; j < k->artifact_count; j++)
            printf("    %-48s %10llu\n", k->artifacts[j].name, (unsigned long long)k->artifacts[j].size);
        files += k->artifact_count;
        bytes += kb;
    }
    for (i = 0; i < tb_bundle_launch_record_count(b); i++) {
        const tb_launch_record *r = tb_bundle_launch_record(b, i);
        printf("record %s  kernel %s  configs %u\n", r->cache_key, r->kernel_name, r->config_count);
        for (j = 0; j < r->config_count; j++) {
            const tb_launch_config *c = &r->configs[j];
            uint32_t q;
            printf("    config %u: %s in %s  args \"%s\"  warps %u  ctas %u  shared %u", j, c->function_name,
                   c->binary_name, c->arg_types, c->num_warps, c->num_ctas, c->shared_mem);
            print_scratch("global_scratch", &c->global_scratch);
            print_scratch("profile_scratch", &c->profile_scratch);
            if (c->flags & TB_LAUNCH_COOPERATIVE) printf(" cooperative");
            if (c->flags & TB_LAUNCH_PDL) printf(" pdl");
            for (q = 0; q < c->param_count; q++) printf(" %s=%lld", c->params[q].name, (long long)c->params[q].value);
            printf("\n");
        }
    }
    printf("%u kernels, %u files, %llu bytes, %u launch records\n", tb_bundle_kernel_count(b), files, bytes,
           tb_bundle_launch_record_count(b));
    tb_bundle_free(b);
    return 0;
}

static int cmd_verify(int argc, char **argv) {
    tb_bundle *b;
    if (argc == 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) return usage(usage_verify, 0);
    if (argc != 1 || argv[0][0] == '-') return usage(usage_verify, 2);
    if (open_bundle(argv[0], &b)) return 1;
    printf("%s: ok (format %u.%u, %u kernels, %u launch records, checksum verified)\n", argv[0],
           (unsigned)(tb_bundle_format_version(b) >> 16), (unsigned)(tb_bundle_format_version(b) & 0xffff),
           tb_bundle_kernel_count(b), tb_bundle_launch_record_count(b));
    tb_bundle_free(b);
    return 0;
}

static int cmd_unpack(int argc, char **argv) {
    tb_bundle *b;
    tb_emit_options eo;
    tb_emit_report rep;
    emit_progress_t ep;
    tb_error e;
    tb_result r;
    int i, n = 0;
    const char *pos[2];
    memset(&eo, 0, sizeof eo);
    for (i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(usage_unpack, 0);
        if (!strcmp(argv[i], "--fsync")) eo.flags |= TB_EMIT_FSYNC;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            if (!parse_threads(argv[++i], &eo.threads)) return usage(usage_unpack, 2);
        } else if (!strcmp(argv[i], "-v")) verbose = 1;
        else if (argv[i][0] == '-' || n == 2) return usage(usage_unpack, 2);
        else pos[n++] = argv[i];
    }
    if (n != 2) return usage(usage_unpack, 2);
    step_start = now();
    if (open_bundle(pos[0], &b)) return 1;
    step("read");
    ep.p.start = now();
    ep.p.last = 0;
    ep.total = tb_bundle_kernel_count(b);
    eo.on_kernel = emit_progress;
    eo.user = &ep;
    r = tb_emit(b, pos[1], &eo, &rep, NULL, &e);
    step("emit");
    printf("emitted %u, present %u, failed %u\n", rep.written, rep.present, rep.failed);
    tb_bundle_free(b);
    if (r != tb_ok && rep.failed == 0) return fail(&e); /* the cache directory itself */
    return r == tb_ok ? 0 : 1;
}

static int cmd_clean(int argc, char **argv) {
    double age = 3600;
    const char *cache = NULL;
    uint32_t removed = 0;
    tb_error e;
    int i;
    for (i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(usage_clean, 0);
        if (!strcmp(argv[i], "--age") && i + 1 < argc) {
            char *end;
            age = strtod(argv[++i], &end);
            if (*end || age < 0) return usage(usage_clean, 2);
        } else if (argv[i][0] == '-' || cache) {
            return usage(usage_clean, 2);
        } else {
            cache = argv[i];
        }
    }
    if (!cache) return usage(usage_clean, 2);
    if (tb_remove_stale_temporaries(cache, age, &removed, &e) != tb_ok) return fail(&e);
    printf("removed %u stale temporary directories\n", removed);
    return 0;
}

int main(int argc, char **argv) {
    static const char *top =
        "usage: tbundle COMMAND [ARGS]\n"
        "  pack [-o FILE] [--as DIR] [--no-records] [--fsync] [--threads N] [-v] CACHE_DIR [HASH...]\n"
        "  list FILE\n"
        "  unpack [--fsync] [--threads N] [-v] FILE CACHE_DIR\n"
        "  verify FILE\n"
        "  clean [--age SECONDS] CACHE_DIR\n"
        "'tbundle COMMAND --help' explains each.\n";
    if (argc < 2) return usage(top, 2);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return usage(top, 0);
    if (!strcmp(argv[1], "--version")) return printf("tbundle %s (writes format %d.%d, reads 1.x to %d.x)\n", tb_version(),
                                                     TB_FORMAT_VERSION_MAJOR, TB_FORMAT_VERSION_MINOR, TB_FORMAT_VERSION_MAJOR) < 0;
    if (!strcmp(argv[1], "pack")) return cmd_pack(argc - 2, argv + 2);
    if (!strcmp(argv[1], "list")) return cmd_list(argc - 2, argv + 2);
    if (!strcmp(argv[1], "unpack")) return cmd_unpack(argc - 2, argv + 2);
    if (!strcmp(argv[1], "verify")) return cmd_verify(argc - 2, argv + 2);
    if (!strcmp(argv[1], "clean")) return cmd_clean(argc - 2, argv + 2);
    fprintf(stderr, "%s: unknown command '%s'\n", prog, argv[1]);
    return usage(top, 2);
}
