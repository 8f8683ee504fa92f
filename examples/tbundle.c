/* tbundle: pack a Triton cache into a bundle file, list, verify and unpack it.

     tbundle pack [-o FILE] [--as DIR] [--keep-going] [--no-records] [--fsync] [--threads N] [-v] CACHE_DIR [HASH...]
     tbundle list FILE
     tbundle unpack [--fsync] [--threads N] [-v] FILE CACHE_DIR
     tbundle verify FILE
     tbundle clean [--age SECONDS] CACHE_DIR

   Options may stand anywhere among the arguments; "--" ends them, so that
   a path starting with '-' can follow. Exit status: 0 success, 1 failure (a
   message on stderr names the file and the cause), 2 usage error. A
   command that fails leaves its output as it was: pack replaces FILE only
   when it succeeds. Bundles are read into memory (TB_READ_COPY), so a file
   changed or truncated by another process while tbundle runs gives an
   error, never a crash. Names from bundles are printed with control bytes
   escaped as \xNN. */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog = "tbundle";

static const char *usage_pack =
    "usage: tbundle pack [-o FILE] [--as DIR] [--keep-going] [--no-records] [--fsync] [--threads N] [-v] CACHE_DIR [HASH...]\n"
    "  Packs every kernel directory of CACHE_DIR (one holding __grp__*.json), or the\n"
    "  named ones, into FILE (default: triton_kernels.tbundle). Absolute paths of the\n"
    "  cache inside .json files become the sentinel [REPLACE]. CACHE_DIR may be a\n"
    "  symlink; links inside it are never followed. A kernel directory holds regular\n"
    "  files only: links, subdirectories, FIFOs and devices in it are left out.\n"
    "  FILE is replaced only if the pack succeeds.\n"
    "  --as DIR      the cache path the .json files name, if the cache was moved\n"
    "                since Triton wrote it (default: CACHE_DIR's absolute path)\n"
    "  --keep-going  pack the kernels that can be read and warn about the others\n"
    "                (default: any kernel that cannot be packed fails the pack)\n"
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
    "  SECONDS (default 3600). A directory a live writer still holds (its flock)\n"
    "  is never removed, whatever its age.\n";

static int usage(const char *text, int status) {
    fputs(text, status ? stderr : stdout);
    return status;
}

static const char *esc(const char *s, char *buf, size_t cap);

/* s escaped (esc) into one of four rotating buffers, for messages that name
   several arguments */
static const char *E(const char *s) {
    static char buf[4][1100];
    static int k;
    k = (k + 1) & 3;
    return esc(s, buf[k], sizeof buf[k]);
}

/* A usage error: one line saying what was wrong (arguments passed through
   E), then the command's usage on stderr; status 2. */
static int bad_usage(const char *text, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return usage(text, 2);
}

static int fail(const tb_error *e) {
    fprintf(stderr, "%s: %s\n", prog, e->message); /* the library escapes its messages */
    return 1;
}

/* s with control bytes and backslashes as \xNN, for printing names that
   come from a bundle: a hash "a\nb" must not forge a line of output, nor an
   ESC sequence reach the terminal. */
static const char *esc(const char *s, char *buf, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (; *s && o + 5 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != 0x7f && c != '\\') {
            buf[o++] = (char)c;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        }
    }
    buf[o] = 0;
    return buf;
}

/* Options anywhere: argv[i] is an option if it starts with '-' (and is not
   "-" alone) and no "--" came before it. */
static int is_option(const char *a, int *after_dashes) {
    if (*after_dashes) return 0;
    if (!strcmp(a, "--")) {
        *after_dashes = 1;
        return -1; /* consumed */
    }
    return a[0] == '-' && a[1] != 0;
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

/* --threads N: 1 to 64. 0 (the usage error printed, naming the value) if
   s is not that. */
static int parse_threads(const char *s, unsigned *out, const char *text) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1) {
        bad_usage(text, "--threads needs a positive integer, got '%s'", E(s));
        return 0;
    }
    if (v > 64) {
        bad_usage(text, "--threads takes at most 64, got '%s'", E(s));
        return 0;
    }
    *out = (unsigned)v;
    return 1;
}

/* Options that take a value: 1 if a is one of names and has no value
   after it (the usage error printed). */
static int missing_value(const char *a, int i, int argc, const char *text) {
    if (i + 1 < argc) return 0;
    bad_usage(text, "option '%s' needs a value", E(a));
    return 1;
}

/* Named hashes: collect them into a bundle, derive, write. */
static int pack_named(const char *cache, const char **hashes, int count, const tb_collect_options *co, int records,
                      unsigned write_flags, int keep_going, const char *out) {
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
    if (failed && !keep_going) {
        fprintf(stderr, "%s: %u of %d kernels could not be packed; %s left as it was (--keep-going packs the rest)\n",
                prog, failed, count, out);
        tb_bundle_free(b);
        return 1;
    }
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
    return 0;
}

static int cmd_pack(int argc, char **argv) {
    const char *out = "triton_kernels.tbundle";
    const char **pos = (const char **)calloc((size_t)argc + 1, sizeof *pos);
    tb_pack_options po;
    tb_pack_report rep;
    tb_error e;
    int i, n = 0, dashes = 0, keep_going = 0, st = 2;
    progress_t pg;
    memset(&po, 0, sizeof po);
    if (!pos) return 1;
    for (i = 0; i < argc; i++) {
        const char *a = argv[i];
        int opt = is_option(a, &dashes);
        if (opt < 0) continue;
        if (!opt) pos[n++] = a;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { st = usage(usage_pack, 0); goto done; }
        else if (!strcmp(a, "-o") || !strcmp(a, "--as") || !strcmp(a, "--threads")) {
            if (missing_value(a, i, argc, usage_pack)) goto done;
            if (a[1] == 'o') out = argv[++i];
            else if (a[2] == 'a') po.collect.recorded_cache_dir = argv[++i];
            else if (!parse_threads(argv[++i], &po.collect.threads, usage_pack)) goto done;
        } else if (!strcmp(a, "--keep-going")) keep_going = 1;
        else if (!strcmp(a, "--no-records")) po.no_launch_records = 1;
        else if (!strcmp(a, "--fsync")) po.write_flags = TB_WRITE_FSYNC;
        else if (!strcmp(a, "-v")) verbose = 1;
        else { st = bad_usage(usage_pack, "unknown option '%s' for pack", E(a)); goto done; }
    }
    if (n < 1) { st = bad_usage(usage_pack, "pack needs CACHE_DIR"); goto done; }
    pg.start = step_start = now();
    pg.last = 0;
    po.collect.progress = collect_progress;
    po.collect.user = &pg;
    if (!keep_going) po.collect.flags |= TB_STOP_ON_ERROR;
    if (n > 1) {
        st = pack_named(pos[0], pos + 1, n - 1, &po.collect, !po.no_launch_records, po.write_flags, keep_going, out);
        goto done;
    }
    /* the whole cache: read and written in one streaming pass */
    if (tb_pack_cache(pos[0], out, &po, NULL, &rep, &e) != tb_ok) {
        st = fail(&e);
        if (!keep_going && rep.collect.failed) /* a kernel was refused, not the pack itself */
            fprintf(stderr, "%s: %s left as it was (--keep-going packs the kernels that can be read)\n", prog, out);
        goto done;
    }
    step("collect, derive launch records and write");
    if (rep.collect.failed)
        fprintf(stderr, "%s: warning: %u kernel(s) left out; first: %s\n", prog, rep.collect.failed,
                rep.first_failure.message);
    printf("packed %u kernels, %u launch records into %s\n", rep.collect.collected, rep.records, out);
    st = 0;
done:
    free(pos);
    return st;
}

/* Read into memory: the tool must not crash (SIGBUS) if another process
   truncates the file under a mapping while it runs. */
static int open_bundle(const char *path, tb_bundle **b) {
    tb_error e;
    if (tb_bundle_read_file(path, NULL, TB_READ_COPY, b, &e) != tb_ok) return fail(&e);
    return 0;
}

static int one_path(int argc, char **argv, const char *text, const char *cmd, int *json, const char **path);

static void print_scratch(const char *name, const tb_scratch *s) {
    if (s->present) printf(" %s=%llu/%u", name, (unsigned long long)s->size, s->align);
}

/* One dimension of a grid rule as infix text, operands by name. */
static void grid_text(const tb_grid_op *ops, uint32_t n, const tb_launch_record *r, const tb_launch_config *c,
                      char *out, size_t cap) {
    static char st[TB_GRID_STACK][256];
    char a[256], b[256];
    uint32_t sp = 0, i;
    for (i = 0; i < n && sp <= TB_GRID_STACK; i++) {
        const tb_grid_op *o = &ops[i];
        static const char *const sym[] = {"+", "-", "*", "//", "cdiv", "%", "min", "max"};
        if (o->op == TB_GRID_CONST) snprintf(st[sp++], 256, "%lld", (long long)o->value);
        else if (o->op == TB_GRID_ARG && r->call && r->call->arg_count) snprintf(st[sp++], 256, "%.200s", r->call->arg_names[o->index]);
        else if (o->op == TB_GRID_ARG) snprintf(st[sp++], 256, "arg%u", o->index);
        else if (o->op == TB_GRID_PARAM) snprintf(st[sp++], 256, "%.200s", c->params[o->index].name);
        else if (o->op == TB_GRID_EXTRA) snprintf(st[sp++], 256, "grid_args[%u]", o->index);
        else if (o->op == TB_GRID_NEG) {
            snprintf(a, sizeof a, "%s", st[sp - 1]);
            snprintf(st[sp - 1], 256, "-(%.240s)", a);
        } else {
            snprintf(b, sizeof b, "%s", st[--sp]);
            snprintf(a, sizeof a, "%s", st[sp - 1]);
            if (o->op >= TB_GRID_ADD && o->op <= TB_GRID_MOD && o->op != TB_GRID_CEILDIV)
                snprintf(st[sp - 1], 256, "(%.120s %s %.120s)", a, sym[o->op - TB_GRID_ADD], b);
            else snprintf(st[sp - 1], 256, "%s(%.120s, %.120s)", sym[o->op - TB_GRID_ADD], a, b);
        }
    }
    snprintf(out, cap, "%s", sp ? st[sp - 1] : "?");
}

static int cmd_list(int argc, char **argv) {
    tb_bundle *b;
    uint32_t i, j, files = 0;
    unsigned long long bytes = 0;
    char e1[1100], e2[1100], e3[1100];
    const char *path;
    int st = one_path(argc, argv, usage_list, "list", NULL, &path);
    if (st >= 0) return st;
    if (open_bundle(path, &b)) return 1;
    for (i = 0; i < tb_bundle_kernel_count(b); i++) {
        const tb_kernel *k = tb_bundle_kernel(b, i);
        unsigned long long kb = 0;
        for (j = 0; j < k->artifact_count; j++) kb += k->artifacts[j].size;
        printf("kernel %s  device %d  files %u  bytes %llu\n", esc(k->hash, e1, sizeof e1), k->device, k->artifact_count,
               kb);
        for (j = 0; j < k->artifact_count; j++)
            printf("    %-48s %10llu\n", esc(k->artifacts[j].name, e1, sizeof e1), (unsigned long long)k->artifacts[j].size);
        files += k->artifact_count;
        bytes += kb;
    }
    for (i = 0; i < tb_bundle_launch_record_count(b); i++) {
        const tb_launch_record *r = tb_bundle_launch_record(b, i);
        printf("record %s  kernel %s  configs %u\n", esc(r->cache_key, e1, sizeof e1), esc(r->kernel_name, e2, sizeof e2),
               r->config_count);
        if (r->call && r->call->arg_count) {
            printf("    args");
            for (j = 0; j < r->call->arg_count; j++) printf(" %s", esc(r->call->arg_names[j], e1, sizeof e1));
            for (j = 0; j < r->call->mutated_count; j++)
                printf("%s%s", j ? " " : "  mutated ", esc(r->call->arg_names[r->call->mutated[j]], e1, sizeof e1));
            printf("\n");
        }
        for (j = 0; j < r->config_count; j++) {
            const tb_launch_config *c = &r->configs[j];
            uint32_t q;
            printf("    config %u: %s in %s  args \"%s\"  warps %u  ctas %u  shared %u", j, esc(c->function_name, e1, sizeof e1),
                   esc(c->binary_name, e2, sizeof e2), esc(c->arg_types, e3, sizeof e3), c->num_warps, c->num_ctas,
                   c->shared_mem);
            print_scratch("global_scratch", &c->global_scratch);
            print_scratch("profile_scratch", &c->profile_scratch);
            if (c->flags & TB_CONFIG_COOPERATIVE) printf(" cooperative");
            if (c->flags & TB_CONFIG_PDL) printf(" pdl");
            for (q = 0; q < c->param_count; q++)
                printf(" %s=%lld", esc(c->params[q].name, e1, sizeof e1), (long long)c->params[q].value);
            if (c->grid) {
                for (q = 0; q < 3; q++) {
                    grid_text(c->grid->ops[q], c->grid->op_count[q], r, c, e2, sizeof e2);
                    printf("%s%s", q ? ", " : "  grid (", esc(e2, e1, sizeof e1));
                }
                printf(")");
            }
            printf("\n");
        }
    }
    printf("%u kernels, %u files, %llu bytes, %u launch records\n", tb_bundle_kernel_count(b), files, bytes,
           tb_bundle_launch_record_count(b));
    tb_bundle_free(b);
    return 0;
}

/* list and verify: one FILE, "--" allowed before it, and for list (json
   not NULL) --json. Returns -1 to go on with *path set, else the exit
   status (0 for --help, 2 for a usage error, the usage printed). */
static int one_path(int argc, char **argv, const char *text, const char *cmd, int *json, const char **path) {
    int i, dashes = 0;
    *path = NULL;
    for (i = 0; i < argc; i++) {
        const char *a = argv[i];
        int opt = is_option(a, &dashes);
        if (opt < 0) continue;
        if (!opt) {
            if (*path) return bad_usage(text, "unexpected argument '%s' for %s (it takes one FILE)", E(a), cmd);
            *path = a;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            return usage(text, 0);
        } else if (json && !strcmp(a, "--json")) {
            *json = 1;
        } else {
            return bad_usage(text, "unknown option '%s' for %s", E(a), cmd);
        }
    }
    if (!*path) return bad_usage(text, "%s needs FILE", cmd);
    return -1;
}

static int cmd_verify(int argc, char **argv) {
    tb_bundle *b;
    const char *path;
    char e1[1100];
    int st = one_path(argc, argv, usage_verify, "verify", NULL, &path);
    if (st >= 0) return st;
    if (open_bundle(path, &b)) return 1;
    printf("%s: ok (format %u.%u, %u kernels, %u launch records, checksum verified)\n", esc(path, e1, sizeof e1),
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
    int i, n = 0, dashes = 0;
    const char *pos[2];
    memset(&eo, 0, sizeof eo);
    for (i = 0; i < argc; i++) {
        const char *a = argv[i];
        int opt = is_option(a, &dashes);
        if (opt < 0) continue;
        if (!opt) {
            if (n == 2) return bad_usage(usage_unpack, "unexpected argument '%s' for unpack (it takes FILE CACHE_DIR)", E(a));
            pos[n++] = a;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(usage_unpack, 0);
        else if (!strcmp(a, "--fsync")) eo.flags |= TB_EMIT_FSYNC;
        else if (!strcmp(a, "--threads")) {
            if (missing_value(a, i, argc, usage_unpack) || !parse_threads(argv[++i], &eo.threads, usage_unpack)) return 2;
        } else if (!strcmp(a, "-v")) verbose = 1;
        else return bad_usage(usage_unpack, "unknown option '%s' for unpack", E(a));
    }
    if (n != 2) return bad_usage(usage_unpack, n ? "unpack needs CACHE_DIR after FILE" : "unpack needs FILE and CACHE_DIR");
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
    int i, dashes = 0;
    for (i = 0; i < argc; i++) {
        int opt = is_option(argv[i], &dashes);
        if (opt < 0) continue;
        if (!opt) {
            if (cache) return bad_usage(usage_clean, "unexpected argument '%s' for clean (it takes one CACHE_DIR)", E(argv[i]));
            cache = argv[i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            return usage(usage_clean, 0);
        } else if (!strcmp(argv[i], "--age")) {
            char *end;
            if (missing_value(argv[i], i, argc, usage_clean)) return 2;
            age = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !(age >= 0))
                return bad_usage(usage_clean, "--age needs a number of seconds, 0 or more, got '%s'", E(argv[i]));
        } else {
            return bad_usage(usage_clean, "unknown option '%s' for clean", E(argv[i]));
        }
    }
    if (!cache) return bad_usage(usage_clean, "clean needs CACHE_DIR");
    if (tb_remove_stale_temporaries(cache, age, &removed, &e) != tb_ok) return fail(&e);
    printf("removed %u stale temporary directories\n", removed);
    return 0;
}

int main(int argc, char **argv) {
    static const char *top =
        "usage: tbundle COMMAND [ARGS]\n"
        "  pack [-o FILE] [--as DIR] [--keep-going] [--no-records] [--fsync] [--threads N] [-v] CACHE_DIR [HASH...]\n"
        "  list FILE\n"
        "  unpack [--fsync] [--threads N] [-v] FILE CACHE_DIR\n"
        "  verify FILE\n"
        "  clean [--age SECONDS] CACHE_DIR\n"
        "'tbundle COMMAND --help' explains each. Options go anywhere; '--' ends them.\n";
    if (argc < 2) return usage(top, 2);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return usage(top, 0);
    if (!strcmp(argv[1], "--version")) return printf("tbundle %s (writes format %d.%d, reads 1.x to %d.x)\n", tb_version(),
                                                     TB_FORMAT_VERSION_MAJOR, TB_FORMAT_VERSION_MINOR, TB_FORMAT_VERSION_MAJOR) < 0;
    if (!strcmp(argv[1], "pack")) return cmd_pack(argc - 2, argv + 2);
    if (!strcmp(argv[1], "list")) return cmd_list(argc - 2, argv + 2);
    if (!strcmp(argv[1], "unpack")) return cmd_unpack(argc - 2, argv + 2);
    if (!strcmp(argv[1], "verify")) return cmd_verify(argc - 2, argv + 2);
    if (!strcmp(argv[1], "clean")) return cmd_clean(argc - 2, argv + 2);
    fprintf(stderr, "%s: unknown command '%s'\n", prog, E(argv[1]));
    return usage(top, 2);
}
