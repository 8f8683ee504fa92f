/* tbundle: pack a Triton cache into a bundle file, list, verify and unpack it.

     tbundle pack [-o FILE] [--as DIR] [--keep-going] [--allow-empty] [--no-records] [--fsync] [--threads N] [-v]
                  CACHE_DIR [HASH...]
     tbundle list [--json] FILE
     tbundle unpack [--fsync] [--threads N] [-v] FILE CACHE_DIR
     tbundle verify FILE
     tbundle clean [--age SECONDS] CACHE_DIR
     tbundle run MODEL [--in FILE.npy]... [--out DIR] [--graph] [--bench N] [--device N]

   Options may stand anywhere among the arguments; "--" ends them, so that
   a path starting with '-' can follow. Exit status: 0 success, 1 failure (a
   message on stderr names the file and the cause), 2 usage error (the
   message names the option or value at fault, then the usage follows). A
   command that fails leaves its output as it was: pack replaces FILE only
   when it succeeds. Bundles are read through their descriptor, so a file
   changed or truncated by another process while tbundle runs gives an
   error, never a crash. Names from bundles are printed with control bytes
   escaped as \xNN (as \u00XX in list --json).

   This file holds main, the commands but two, and the header's
   implementation; run is tbundle_run.c and generate is generate.c,
   translation units linked with it (tbundle_cli.h: what they share):
       cc -std=c99 -I. -DGENERATE_NO_MAIN -o tbundle examples/tbundle.c \
          examples/tbundle_run.c examples/generate.c -ldl -lpthread */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "triton_bundle.h" /* -I the repository root, or the installed header (pkg-config --cflags triton_bundle) */
#include "tbundle_cli.h"   /* what this file shares with tbundle_run.c (run) and generate.c (generate) */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *prog = "tbundle";

static const char *usage_pack =
    "usage: tbundle pack [-o FILE] [--as DIR] [--grid KERNEL=EXPR[,EXPR[,EXPR]]]... [--keep-going] [--allow-empty]\n"
    "                    [--no-records] [--fsync] [--threads N] [-v] CACHE_DIR [HASH...]\n"
    "  Packs every kernel directory of CACHE_DIR, CACHE_DIR/<hash>/ holding a\n"
    "  __grp__*.json (~/.triton/cache, not ~/.triton), or the named ones, into FILE\n"
    "  (default: triton_kernels.tbundle). A CACHE_DIR with no kernel directory is an\n"
    "  error. Absolute paths of the cache inside .json files become the sentinel\n"
    "  [REPLACE]; paths that still name another <dir>/<hash>/ (a cache that was\n"
    "  moved) are packed as they are, with a warning that gives the --as to use.\n"
    "  CACHE_DIR may be a symlink; links inside it are never followed. A kernel\n"
    "  directory holds regular files only: links, subdirectories, FIFOs and devices\n"
    "  in it are left out. FILE is replaced only if the pack succeeds.\n"
    "  --as DIR       the cache path the .json files name, if the cache was moved\n"
    "                 since Triton wrote it (default: CACHE_DIR's absolute path)\n"
    "  --grid KERNEL=EXPR[,EXPR[,EXPR]]\n"
    "                 the grid (x, y, z; y and z default to 1) of every record of kernel\n"
    "                 name KERNEL, or of the one whose cache key is KERNEL (to pick one\n"
    "                 specialization), so that TB_LAUNCH_GRID_AUTO can launch it. EXPR is\n"
    "                 Python's syntax over the kernel's argument names (as its IR names\n"
    "                 them), integers, + - * // %, cdiv, min and max; a constexpr, which a\n"
    "                 cache has inlined, is written as its value:\n"
    "                   --grid 'tb_add=cdiv(n, 1024)'. Repeatable.\n"
    "  --keep-going   pack the kernels that can be read and warn about the others\n"
    "                 (default: any kernel that cannot be packed fails the pack)\n"
    "  --allow-empty  a CACHE_DIR with no kernel directory gives a bundle of none\n"
    "  --no-records   do not derive static launch records from NAME.json/NAME.source\n"
    "  --fsync        flush the file to disk before renaming it into place\n"
    "  --threads N    reader threads, 1 to 64 (default: one per CPU, at most 8)\n"
    "  -v             print the time each step took on stderr\n";
static const char *usage_list =
    "usage: tbundle list [--json] FILE\n"
    "  Prints the kernels (hash, device, files, bytes), the launch records and, when\n"
    "  FILE holds one, the program: its inputs and outputs (name, dtype, shape, and\n"
    "  strides when they are not C order's), constants (count, bytes, how many are\n"
    "  state), workspace bytes and steps (count, and how many of each kind).\n"
    "  --json  one JSON object on stdout instead (keys may be added later; skip\n"
    "          the ones you do not know):\n"
    "    {\"file\", \"format\": {\"major\", \"minor\"},\n"
    "     \"kernels\": [{\"hash\", \"name\", \"device\", \"target\" (from NAME.json, or null),\n"
    "                  \"files\": [{\"name\", \"size\"}], \"bytes\"}],\n"
    "     \"records\": [{\"cache_key\", \"kernel_name\",\n"
    "                  \"call\": {\"arg_names\", \"mutated\", \"reset\", \"key\"} or null (indexes),\n"
    "                  \"configs\": [{\"kernel_hash\", \"function_name\", \"binary_name\",\n"
    "                    \"arg_types\", \"arg_divisibility\", \"num_warps\", \"num_ctas\",\n"
    "                    \"num_stages\" (the param, else NAME.json's, else null), \"shared_mem\",\n"
    "                    \"cluster_dims\", \"flags\": [\"cooperative\", \"pdl\", \"types_from_ir\"],\n"
    "                    \"global_scratch\", \"profile_scratch\": {\"size\", \"align\"} or null,\n"
    "                    \"params\": [{\"name\", \"value\"}], \"tensordescs\": [{\"tma\", \"rank\",\n"
    "                    \"swizzle\", \"elem_size\", \"elem_type\", \"fp4_padded\", \"block\"}],\n"
    "                    \"grid\": {\"text\", \"ops\": [x, y, z: [{\"op\", \"index\" or \"value\"}]]}\n"
    "                            or null}]}],\n"
    "     \"program\": {\"name\", \"inputs\", \"outputs\": [{\"name\", \"dtype\", \"shape\",\n"
    "                   \"strides\", \"align\", \"contiguous\", \"extent\" (bytes)}],\n"
    "                 \"constants\": {\"count\", \"bytes\", \"state\", \"external\"}, \"buffers\",\n"
    "                 \"workspace_size\", \"steps\": {\"count\", \"launch\", \"memset\", \"copy\"},\n"
    "                 \"symbols\": [{\"name\", \"min\", \"max\", \"divisor\", \"input\", \"dim\"}]\n"
    "                 and \"expressions\" (a count), where its sizes vary}\n"
    "                or null: the first program,\n"
    "     \"programs\": [every program, each as \"program\"],\n"
    "     \"properties\": {key: value} (generate.max_seq, weights.file...),\n"
    "     \"totals\": {\"kernels\", \"files\", \"bytes\", \"records\"}}\n"
    "          Control bytes in names come as \\u00XX, each byte XX that is not\n"
    "          UTF-8 as \\udcXX: Python's surrogateescape (the string's\n"
    "          .encode('utf-8', 'surrogateescape') gives the bytes back).\n";
static const char *usage_unpack =
    "usage: tbundle unpack [--replace] [--fsync] [--threads N] [-v] FILE CACHE_DIR\n"
    "  Writes each kernel to CACHE_DIR/HASH through a temporary directory and one\n"
    "  rename. A kernel already there is compared with the bundle's (each of its\n"
    "  files, byte for byte): one that is the same is left alone; one that differs\n"
    "  (a damaged copy) is named and left as it is, and unpack exits 1. Prints\n"
    "  emitted/present/failed, and differ/replaced when some differ.\n"
    "  --replace     replace the kernels that differ: the bundle's written beside,\n"
    "                the old one renamed aside, the new one renamed in\n"
    "  --fsync       flush files and directories to disk before and after each rename\n"
    "  --threads N   writer threads (default: one per CPU, at most 4; 8 on tmpfs)\n"
    "  -v            print the time each step took on stderr\n";
static const char *usage_verify = "usage: tbundle verify FILE\n  Checks the structure, names and checksum of FILE.\n";
static const char *usage_clean =
    "usage: tbundle clean [--age SECONDS] CACHE_DIR\n"
    "  Removes CACHE_DIR/tmp.* directories left by crashed writers, older than\n"
    "  SECONDS (default 3600). A directory a live writer still holds (its flock)\n"
    "  is never removed, whatever its age.\n";

int usage(const char *text, int status) {
    fputs(text, status ? stderr : stdout);
    return status;
}

static const char *esc(const char *s, char *buf, size_t cap);

/* s escaped (esc) into one of four rotating buffers, for messages that name
   several arguments */
const char *E(const char *s) {
    static char buf[4][1100];
    static int k;
    k = (k + 1) & 3;
    return esc(s, buf[k], sizeof buf[k]);
}

/* A usage error: one line saying what was wrong (arguments passed through
   E), then the command's usage line (the first of its text) and where the
   rest is, on stderr; status 2. */
int bad_usage(const char *text, const char *fmt, ...) {
    va_list ap;
    const char *end = text, *cmd = text + 15; /* "usage: tbundle CMD ..." */
    int n = 0;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    do { /* the usage line and its continuations ("      [--more]") */
        const char *nl = strchr(end, '\n');
        end = nl ? nl + 1 : end + strlen(end);
    } while (!strncmp(end, "    ", 4) && end[strspn(end, " ")] == '[');
    while (cmd[n] && cmd[n] != ' ' && cmd[n] != '\n') n++;
    fprintf(stderr, "%.*ssee '%s %.*s --help'\n", (int)(end - text), text, prog, n, cmd);
    return 2;
}

int fail(const tb_error *e) {
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
int is_option(const char *a, int *after_dashes) {
    if (*after_dashes) return 0;
    if (!strcmp(a, "--")) {
        *after_dashes = 1;
        return -1; /* consumed */
    }
    return a[0] == '-' && a[1] != 0;
}

double now(void) {
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
    if (s == TB_EMIT_FAILED || s == TB_EMIT_DIFFERS) fprintf(stderr, "%s: %s\n", prog, e->message);
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
int missing_value(const char *a, int i, int argc, const char *text) {
    if (i + 1 < argc) return 0;
    bad_usage(text, "option '%s' needs a value", E(a));
    return 1;
}

/* ---- what pack looks at before packing ----
   The library's own rules, from the outside: a kernel directory is an
   entry of CACHE_DIR that is a directory (not a link), not tmp.*, holding a
   __grp__*.json. */
typedef struct {
    char **v;
    size_t n, cap;
} strlist;

static int strlist_add(strlist *l, const char *s, size_t n) {
    char *c;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **v = (char **)realloc(l->v, cap * sizeof *v);
        if (!v) return 0;
        l->v = v;
        l->cap = cap;
    }
    if (!(c = (char *)malloc(n + 1))) return 0;
    memcpy(c, s, n);
    c[n] = 0;
    l->v[l->n++] = c;
    return 1;
}

static void strlist_free(strlist *l) {
    while (l->n) free(l->v[--l->n]);
    free(l->v);
    l->v = NULL;
    l->cap = 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int is_grp(const char *name) {
    size_t n = strlen(name);
    return n > 12 && !strncmp(name, "__grp__", 7) && !strcmp(name + n - 5, ".json");
}

/* The directory dfd/name (not followed if a link), listed; NULL if it
   is no directory or cannot be read. */
static DIR *open_subdir(int dfd, const char *name) {
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d;
    if (fd < 0) return NULL;
    if (!(d = fdopendir(fd))) close(fd);
    return d;
}

/* ---- a cache packed from where Triton did not write it ----
   Pack replaces <RECORDED>/<hash> in each kernel's .json files by the
   sentinel (RECORDED: --as DIR, else CACHE_DIR's absolute path). Paths
   that name <DIR>/<hash>/<file> for another DIR (hash: the name of an
   entry of this cache, or one that looks like Triton's hash) are left as they
   are: the cache was moved, or is reached by another path, and the
   unpacked kernels would name the old place. Other absolute paths (extern
   libraries such as libdevice) are no cache paths. */
#define MOVED_DIRS 4
typedef struct moved_t {
    char recorded[4096];        /* "": unknown, no check */
    const strlist *known;       /* the cache's entries (or the named hashes), sorted */
    uint32_t files;             /* .json files naming another cache directory */
    uint32_t dirs;              /* distinct such directories, the first MOVED_DIRS */
    int more;                   /* and more than those */
    char *dir[MOVED_DIRS];
    uint32_t dir_files[MOVED_DIRS];
} moved_t;

/* The library's absolute path of a cache directory: DIR as given if
   absolute, else the working directory joined with it (a leading "./"
   dropped); trailing slashes removed. Links are not resolved. */
static int absolute(const char *dir, char *out, size_t cap) {
    size_t n;
    if (dir[0] == '/') {
        if ((n = strlen(dir)) >= cap) return 0;
        memcpy(out, dir, n + 1);
    } else {
        const char *d = (dir[0] == '.' && dir[1] == '/') ? dir + 2 : dir;
        if (!getcwd(out, cap)) return 0;
        n = strlen(out);
        if (!(dir[0] == '.' && dir[1] == 0)) {
            if (n + 1 + strlen(d) >= cap) return 0;
            if (n > 1) out[n++] = '/';
            memcpy(out + n, d, strlen(d) + 1);
        }
        n = strlen(out);
    }
    while (n > 1 && out[n - 1] == '/') out[--n] = 0;
    return 1;
}

/* Triton's cache directory names: the base32 SHA-256 of 3.x (52 of
   A-Z2-7), the hex digests of 2.x (32 or 64 of 0-9a-f). */
static int looks_like_hash(const char *s, size_t n) {
    size_t i;
    if (n == 52) {
        for (i = 0; i < n; i++)
            if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '2' && s[i] <= '7'))) return 0;
        return 1;
    }
    if (n == 32 || n == 64) {
        for (i = 0; i < n; i++)
            if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
        return 1;
    }
    return 0;
}

/* s (n bytes, perhaps holding a NUL) is one of the sorted names known */
static int known_hash(const strlist *known, const char *s, size_t n) {
    size_t lo = 0, hi = known ? known->n : 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2, len = strlen(known->v[mid]);
        int c = memcmp(known->v[mid], s, len < n ? len : n);
        if (!c) c = len < n ? -1 : len > n;
        if (!c) return 1;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

/* The cache directory an absolute path s (n bytes) names as
   <DIR>/<hash>/<file>: its length, with *dir_len; 0 if none. */
static int cache_path(const moved_t *m, const char *s, size_t n, size_t *dir_len) {
    size_t f, h;
    if (n < 4 || s[0] != '/') return 0;
    for (f = n; f > 0 && s[f - 1] != '/'; f--) {
    }
    if (f == n || f < 2) return 0;         /* no file name, or no hash before it */
    for (h = f - 1; h > 0 && s[h - 1] != '/'; h--) {
    }
    if (h == 0 || h == f - 1) return 0;   /* an empty hash component */
    if (!looks_like_hash(s + h, f - 1 - h) && !known_hash(m->known, s + h, f - 1 - h)) return 0;
    *dir_len = h > 1 ? h - 1 : 1;          /* "/" for /<hash>/<file> */
    return 1;
}

/* Checks the JSON strings of one .json file; 1 if one names another cache
   directory (the first such directory counted). */
static int check_json_paths(moved_t *m, const char *p, size_t size) {
    const char *end = p + size, *q;
    size_t rl = strlen(m->recorded), dl;
    for (; p < end; p++) {
        if (*p != '"') continue;
        for (q = p + 1; q < end && *q != '"'; q++)
            if (*q == '\\' && ++q == end) break;
        if (q >= end) break;
        if (cache_path(m, p + 1, (size_t)(q - p - 1), &dl) && !(dl == rl && !memcmp(p + 1, m->recorded, rl))) {
            uint32_t i;
            for (i = 0; i < m->dirs; i++)
                if (strlen(m->dir[i]) == dl && !memcmp(m->dir[i], p + 1, dl)) break;
            if (i == m->dirs) {
                if (i == MOVED_DIRS) {
                    m->more = 1;
                    return 1;
                }
                if (!(m->dir[i] = (char *)malloc(dl + 1))) return 0;
                memcpy(m->dir[i], p + 1, dl);
                m->dir[i][dl] = 0;
                m->dir_files[i] = 0;
                m->dirs++;
            }
            m->dir_files[i]++;
            return 1;
        }
        p = q;
    }
    return 0;
}

/* A regular file dfd/name, read whole (at most 64 MiB); NULL if not. */
static char *read_small(int dfd, const char *name, size_t *size) {
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    char *buf = NULL;
    size_t got = 0;
    if (fd < 0) return NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= (64 << 20) &&
        (buf = (char *)malloc((size_t)st.st_size + 1)) != NULL) {
        ssize_t r;
        while (got < (size_t)st.st_size && (r = read(fd, buf + got, (size_t)st.st_size - got)) > 0) got += (size_t)r;
    }
    close(fd);
    *size = got;
    return buf;
}

/* 1 if the open directory d holds a __grp__*.json (or any_dir: a named
   hash, which needs none); then, with m, its .json files are checked. */
static int scan_kernel_dir(DIR *d, moved_t *m, int any_dir) {
    struct dirent *de;
    int grp = any_dir;
    while (!grp && (de = readdir(d)) != NULL) grp = is_grp(de->d_name);
    if (!grp || !m || !m->recorded[0]) return grp;
    rewinddir(d);
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name), size;
        char *data;
        if (n < 6 || strcmp(de->d_name + n - 5, ".json")) continue;
        if ((data = read_small(dirfd(d), de->d_name, &size)) != NULL) {
            m->files += (uint32_t)check_json_paths(m, data, size);
            free(data);
        }
    }
    return 1;
}

/* The entries of cache that may be kernel directories (not tmp.*), sorted;
   *self: cache itself holds a __grp__*.json (it is a kernel directory, not
   a cache). -1 if cache cannot be listed: pack then says why. */
static int list_cache(const char *cache, strlist *out, int *self) {
    DIR *d = opendir(cache);
    struct dirent *de;
    int st = 0;
    *self = 0;
    if (!d) return -1;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (is_grp(nm)) *self = 1;
        if (!strcmp(nm, ".") || !strcmp(nm, "..") || !strncmp(nm, "tmp.", 4)) continue;
        if (!strlist_add(out, nm, strlen(nm))) st = -1;
    }
    closedir(d);
    if (out->n > 1) qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return st;
}

/* How many of the entries of cache are kernel directories, counting up to
   max; with m, their .json files are checked too. named: the entries are
   named hashes, kernel directories with or without a __grp__ file. */
static size_t kernel_dirs(const char *cache, const strlist *entries, size_t max, moved_t *m, int named) {
    int cfd = open(cache, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    size_t i, found = 0;
    if (cfd < 0) return 0;
    for (i = 0; i < entries->n && found < max; i++) {
        DIR *d = open_subdir(cfd, entries->v[i]);
        if (!d) continue;
        found += (size_t)scan_kernel_dir(d, m, named);
        closedir(d);
    }
    close(cfd);
    return found;
}

/* the .json check on a thread of its own, beside the pack */
typedef struct {
    moved_t *m;
    const char *cache;
    const strlist *entries;
} check_job;
static void *check_thread(void *p) {
    check_job *j = (check_job *)p;
    kernel_dirs(j->cache, j->entries, (size_t)-1, j->m, 0);
    return NULL;
}

/* dir + "/" + name, without doubling a trailing slash of dir */
char *join(const char *dir, const char *name) {
    size_t n = strlen(dir);
    char *p;
    while (n > 1 && dir[n - 1] == '/') n--;
    if (!(p = (char *)malloc(n + strlen(name) + 2))) return NULL;
    sprintf(p, "%.*s/%s", (int)n, dir, name);
    return p;
}

/* CACHE_DIR holds no kernel directory: say what was expected and what
   the directory looks like instead. */
static void explain_empty(const char *cache, int self, const char *out) {
    char *sub = join(cache, "cache");
    strlist k;
    size_t found = 0;
    int subself;
    memset(&k, 0, sizeof k);
    fprintf(stderr,
            "%s: %s holds no Triton kernel directories: a Triton cache holds one directory per kernel, "
            "CACHE_DIR/<hash>/, each with a __grp__NAME.json file\n",
            prog, E(cache));
    if (sub && list_cache(sub, &k, &subself) == 0) found = kernel_dirs(sub, &k, (size_t)-1, NULL, 0);
    if (found)
        fprintf(stderr, "%s: %s is a Triton cache (%lu kernel directories): tbundle pack %s\n", prog, E(sub),
                (unsigned long)found, E(sub));
    else if (self) {
        char abs[4096], *slash = absolute(cache, abs, sizeof abs) ? strrchr(abs, '/') : NULL;
        if (slash && slash[1]) {
            *slash = 0;
            fprintf(stderr, "%s: %s is itself a kernel directory: tbundle pack %s %s\n", prog, E(cache),
                    E(slash == abs ? "/" : abs), E(slash + 1));
        }
    }
    fprintf(stderr, "%s: %s not written (--allow-empty writes a bundle of no kernels)\n", prog, E(out));
    strlist_free(&k);
    free(sub);
}

/* The warning, once, with the --as that would fix it. */
static void report_moved(const moved_t *m, const char *as, const char *out) {
    uint32_t i, best = 0;
    if (!m->files) return;
    for (i = 1; i < m->dirs; i++)
        if (m->dir_files[i] > m->dir_files[best]) best = i;
    fprintf(stderr,
            "%s: warning: %u .json file(s) name paths under %s/<hash>/, not under %s/<hash>/ (%s); those paths "
            "were packed as they are, so kernels unpacked from %s would still name %s\n",
            prog, m->files, E(m->dir[best]), E(m->recorded), as ? "the --as directory" : "where they are packed from",
            E(out), E(m->dir[best]));
    if (m->dirs > 1) {
        fprintf(stderr, "%s: warning: the .json files name %s%u cache directories:", prog, m->more ? "more than " : "",
                m->dirs);
        for (i = 0; i < m->dirs; i++) fprintf(stderr, " %s (%u file(s))", E(m->dir[i]), m->dir_files[i]);
        fputc('\n', stderr);
    }
    fprintf(stderr,
            "%s: if Triton wrote this cache at %s (it was moved since, or is reached here by another path), "
            "pack it with --as %s\n",
            prog, E(m->dir[best]), E(m->dir[best]));
}

static void moved_free(moved_t *m) {
    while (m->dirs) free(m->dir[--m->dirs]);
}

/* Named hashes: collect them into a bundle, derive, write. */
static int pack_named(const char *cache, const char **hashes, int count, const tb_pack_options *po, int keep_going,
                      const char *out) {
    const tb_collect_options *co = &po->collect;
    int records = !po->no_launch_records;
    unsigned write_flags = po->write_flags;
    tb_bundle *b = NULL;
    tb_error e;
    uint32_t failed = 0, g;
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
    for (g = 0; g < po->grid_rule_count; g++) /* as tb_pack_cache applies them */
        if (tb_bundle_add_grid_rule(b, po->grid_rules[g], NULL, &e) != tb_ok) {
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
    const char **grids = (const char **)calloc((size_t)argc + 1, sizeof *grids);
    int i, n = 0, ngrids = 0, dashes = 0, keep_going = 0, allow_empty = 0, self = 0, checking = 0, st = 2;
    progress_t pg;
    strlist entries; /* CACHE_DIR's, or the named hashes */
    moved_t moved;
    check_job job;
    pthread_t checker;
    memset(&po, 0, sizeof po);
    memset(&entries, 0, sizeof entries);
    memset(&moved, 0, sizeof moved);
    if (!pos || !grids) return 1;
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
        } else if (!strcmp(a, "--grid")) {
            if (missing_value(a, i, argc, usage_pack)) goto done;
            if (!strchr(argv[i + 1], '=')) {
                st = bad_usage(usage_pack, "--grid needs KERNEL=EXPR[,EXPR[,EXPR]], got '%s'", E(argv[i + 1]));
                goto done;
            }
            grids[ngrids++] = argv[++i];
        } else if (!strcmp(a, "--keep-going")) keep_going = 1;
        else if (!strcmp(a, "--no-records")) po.no_launch_records = 1;
        else if (!strcmp(a, "--fsync")) po.write_flags = TB_WRITE_FSYNC;
        else if (!strcmp(a, "--allow-empty")) allow_empty = 1;
        else if (!strcmp(a, "-v")) verbose = 1;
        else { st = bad_usage(usage_pack, "unknown option '%s' for pack", E(a)); goto done; }
    }
    if (n < 1) { st = bad_usage(usage_pack, "pack needs CACHE_DIR"); goto done; }
    {
        struct stat sb;
        if (stat(pos[0], &sb) == 0 && !S_ISDIR(sb.st_mode)) {
            fprintf(stderr,
                    "%s: %s is a file; pack takes a cache directory (Triton's, such as ~/.triton/cache)%s%s%s\n", prog,
                    E(pos[0]), S_ISREG(sb.st_mode) ? ": to see a bundle, 'tbundle list " : "",
                    S_ISREG(sb.st_mode) ? E(pos[0]) : "", S_ISREG(sb.st_mode) ? "'" : "");
            st = 1;
            goto done;
        }
    }
    if (ngrids && po.no_launch_records) {
        st = bad_usage(usage_pack, "--grid needs launch records: drop --no-records");
        goto done;
    }
    po.grid_rules = grids, po.grid_rule_count = (uint32_t)ngrids;
    pg.start = step_start = now();
    pg.last = 0;
    po.collect.progress = collect_progress;
    po.collect.user = &pg;
    if (!keep_going) po.collect.flags |= TB_STOP_ON_ERROR;
    if (!absolute(po.collect.recorded_cache_dir ? po.collect.recorded_cache_dir : pos[0], moved.recorded,
                  sizeof moved.recorded))
        moved.recorded[0] = 0; /* no check */
    if (n > 1) { /* the named kernel directories: a few, looked at first */
        for (i = 1; i < n; i++)
            if (!strlist_add(&entries, pos[i], strlen(pos[i]))) break;
        if (entries.n > 1) qsort(entries.v, entries.n, sizeof *entries.v, cmp_str);
        moved.known = &entries;
        kernel_dirs(pos[0], &entries, (size_t)-1, &moved, 1);
    } else if (list_cache(pos[0], &entries, &self) == 0) {
        /* A directory with no kernel directory is a mistake (~/.triton for
           ~/.triton/cache) unless --allow-empty. One that cannot be listed
           is left to the pack, which says why. */
        if (!allow_empty && kernel_dirs(pos[0], &entries, 1, NULL, 0) == 0) {
            explain_empty(pos[0], self, out);
            st = 1;
            goto done;
        }
        /* the .json files of every kernel, on a thread beside the pack */
        moved.known = &entries;
        job.m = &moved;
        job.cache = pos[0];
        job.entries = &entries;
        checking = pthread_create(&checker, NULL, check_thread, &job) == 0;
        if (!checking) check_thread(&job);
    }
    step("look over the cache");
    if (n > 1) {
        st = pack_named(pos[0], pos + 1, n - 1, &po, keep_going, out);
        fflush(stdout);
        if (st == 0) report_moved(&moved, po.collect.recorded_cache_dir, out);
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
    fflush(stdout);
    if (checking) pthread_join(checker, NULL), checking = 0;
    report_moved(&moved, po.collect.recorded_cache_dir, out);
    st = 0;
done:
    if (checking) pthread_join(checker, NULL);
    strlist_free(&entries);
    moved_free(&moved);
    free(pos);
    free(grids);
    return st;
}

/* The tool must not crash (SIGBUS) if another process truncates the file
   while it runs. A mapped bundle is safe for what the library does with
   it (it reads the file with pread and copies payloads by offset, never
   through the mapping), which is all that unpack, verify and list do;
   copy (TB_READ_COPY) where the tool reads payloads itself (list --json
   parses each NAME.json). */
int open_bundle(const char *path, unsigned flags, tb_bundle **b) {
    tb_error e;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr,
                "%s: %s is a directory, and this command takes a bundle FILE; did you mean 'tbundle pack %s'?\n", prog,
                E(path), E(path));
        return 1;
    }
    if (tb_bundle_read_file(path, NULL, flags, b, &e) != tb_ok) return fail(&e);
    return 0;
}

static int one_path(int argc, char **argv, const char *text, const char *cmd, int *json, const char **path);

static void print_scratch(const char *name, const tb_scratch *s) {
    if (s->present) printf(" %s=%llu/%u", name, (unsigned long long)s->size, s->align);
}

/* ---- programs (format 2.3, section 5) ---- */

/* a dtype's name; "dtype N" for a number outside the table (which a reader
   refuses) */
const char *dtype_text(uint32_t dtype) {
    static char buf[4][24];
    static int k;
    const char *n = tb_dtype_name(dtype);
    if (n) return n;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "dtype %u", dtype);
    return buf[k];
}

/* "[2, 3]" (at most TB_MAX_TENSOR_DIMS values: 8 * 22 + 3 bytes: DIMS_TEXT) */
const char *dims_text(const int64_t *v, uint32_t n, char *buf) {
    size_t o = 1;
    uint32_t i;
    buf[0] = '[';
    for (i = 0; i < n && i < TB_MAX_TENSOR_DIMS; i++)
        o += (size_t)snprintf(buf + o, DIMS_TEXT - o, "%s%lld", i ? ", " : "", (long long)v[i]);
    snprintf(buf + o, DIMS_TEXT - o, "]");
    return buf;
}

/* The strides are C order's for the sizes (those of a size-1 dimension do
   not count, as in PyTorch's is_contiguous): the extent is then the
   elements, one after the other. A size of 0 holds nothing: contiguous. */
int spec_contiguous(const tb_tensor_spec *t) {
    uint64_t want = 1;
    uint32_t d;
    for (d = 0; d < t->rank && d < TB_MAX_TENSOR_DIMS; d++)
        if (t->shape[d] == 0) return 1;
    for (d = t->rank < TB_MAX_TENSOR_DIMS ? t->rank : TB_MAX_TENSOR_DIMS; d-- > 0;) {
        if (t->shape[d] != 1 && (uint64_t)t->strides[d] != want) return 0;
        want *= (uint64_t)t->shape[d];
    }
    return 1;
}

typedef struct {
    uint32_t kinds[4];           /* steps: other (none: a reader refuses them), launch, memset, copy */
    uint32_t state;              /* constants that are state */
    uint32_t external;           /* constants in a weights file (2.5) */
    unsigned long long constant_bytes;
} program_counts;
static void count_program(const tb_program *p, program_counts *c) {
    uint32_t i;
    memset(c, 0, sizeof *c);
    for (i = 0; i < p->step_count; i++) c->kinds[p->steps[i].kind <= TB_STEP_COPY ? p->steps[i].kind : 0]++;
    for (i = 0; i < p->constant_count; i++) {
        c->constant_bytes += p->constants[i].size;
        if (p->constants[i].flags & TB_CONSTANT_STATE) c->state++;
        if (p->constants[i].flags & TB_CONSTANT_EXTERNAL) c->external++;
    }
}

static void list_tensor(const char *what, uint32_t i, const tb_tensor_spec *t) {
    char e1[1100], d1[DIMS_TEXT];
    printf("    %s %u %s  %s %s", what, i, esc(t->name, e1, sizeof e1), dtype_text(t->dtype),
           dims_text(t->shape, t->rank, d1));
    if (!spec_contiguous(t)) printf("  strides %s", dims_text(t->strides, t->rank, d1));
    printf("\n");
}

/* (2.6) the input dimension that binds symbol k: the first size that is
   the symbol alone */
static void symbol_input(const tb_program *p, uint32_t k, uint32_t *in, uint32_t *dim) {
    uint32_t i;
    for (i = 0; i < p->expr_count; i++) {
        const tb_program_expr *x = &p->exprs[i];
        if (x->field == TB_FIELD_INPUT_SIZE && x->op_count == 1 && x->ops[0].op == TB_GRID_SYM &&
            x->ops[0].index == k) {
            *in = x->index, *dim = x->sub;
            return;
        }
    }
}

static void list_program(const tb_program *p, int several) {
    program_counts c;
    uint32_t i;
    char e1[1100];
    count_program(p, &c);
    printf("program %s  inputs %u  outputs %u  steps %u (launch %u, memset %u, copy %u)\n", esc(p->name, e1, sizeof e1),
           p->input_count, p->output_count, p->step_count, c.kinds[TB_STEP_LAUNCH], c.kinds[TB_STEP_MEMSET],
           c.kinds[TB_STEP_COPY]);
    printf("    constants %u%s  bytes %llu  state %u", p->constant_count, several ? " (shared by the programs)" : "",
           c.constant_bytes, c.state);
    if (c.external) printf("  external %u (tensors of the weights file)", c.external);
    printf("\n");
    printf("    workspace %llu bytes  buffers %u\n", (unsigned long long)p->workspace_size, p->buffer_count);
    if (p->symbol_count) printf("    symbols %u, expressions %u (the sizes below are at every symbol's maximum)\n",
                                p->symbol_count, p->expr_count);
    for (i = 0; i < p->symbol_count; i++) {
        uint32_t in = 0, dim = 0;
        symbol_input(p, i, &in, &dim);
        printf("    symbol %s  %lld..%lld", esc(p->symbols[i].name, e1, sizeof e1), (long long)p->symbols[i].min,
               (long long)p->symbols[i].max);
        if (p->symbols[i].divisor > 1) printf(" (multiples of %lld)", (long long)p->symbols[i].divisor);
        printf("  from input %u dimension %u\n", in, dim);
    }
    for (i = 0; i < p->input_count; i++) list_tensor("input", i, &p->inputs[i]);
    for (i = 0; i < p->output_count; i++) list_tensor("output", i, &p->outputs[i]);
}

/* ---- list --json ----
   Strings are written as JSON strings: quote and backslash escaped, control
   bytes (C0, DEL and C1) as \u00XX, valid UTF-8 as it is, and each byte
   XX that is not as the lone surrogate \udcXX (as Python's
   errors="surrogateescape" decodes), so that any name a bundle holds gives
   valid JSON, and two names that differ give two strings that differ. */

/* The UTF-8 sequence at p: its length when valid; else minus the length
   of its maximal invalid subpart (a lead byte and the continuation bytes
   that fit it, or one byte). */
static long utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0], lo = 0x80, hi = 0xbf;
    long n, i;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0) lo = 0xa0;   /* overlong */
        if (c == 0xed) hi = 0x9f;   /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0) lo = 0x90;   /* overlong */
        if (c == 0xf4) hi = 0x8f;   /* past U+10FFFF */
    } else return -1;
    for (i = 1; i < n; i++, lo = 0x80, hi = 0xbf)
        if (p + i >= end || p[i] < lo || p[i] > hi) return -i;
    return n;
}

static void jstrn(const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    putchar('"');
    while (p < end) {
        unsigned c = *p;
        long len;
        if (c == '"' || c == '\\') {
            putchar('\\');
            putchar((int)c);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            printf("\\u00%c%c", hex[c >> 4], hex[c & 15]);
            p++;
        } else if (c < 0x80) {
            putchar((int)c);
            p++;
        } else if ((len = utf8_seq(p, end)) < 0) {
            /* 0x80..0xff: U+DC80..U+DCFF */
            for (; len < 0; len++, p++) printf("\\udc%c%c", hex[*p >> 4], hex[*p & 15]);
        } else if (c == 0xc2 && p[1] < 0xa0) { /* U+0080..U+009F, C1 controls */
            printf("\\u00%c%c", hex[p[1] >> 4], hex[p[1] & 15]);
            p += 2;
        } else {
            fwrite(p, 1, (size_t)len, stdout);
            p += len;
        }
    }
    putchar('"');
}
static void jstr(const char *s) { jstrn(s, strlen(s)); }
static void jkey(const char *k) { printf(", \"%s\": ", k); } /* a member after the first */

/* A reader of the JSON a kernel's NAME.json holds (bytes from a bundle:
   anything), enough to find a top-level member; it gives up on text that
   does not parse, and reads nothing past the artifact's bytes. */
typedef struct {
    const unsigned char *p, *end;
} jin;
static void jin_ws(jin *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}
/* a string; [*s, *s + *n) is its raw text, escapes as they are */
static int jin_string(jin *j, const unsigned char **s, size_t *n) {
    jin_ws(j);
    if (j->p >= j->end || *j->p != '"') return 0;
    *s = ++j->p;
    while (j->p < j->end && *j->p != '"') {
        if (*j->p < 0x20 || (*j->p == '\\' && ++j->p == j->end)) return 0;
        j->p++;
    }
    if (j->p >= j->end) return 0;
    *n = (size_t)(j->p++ - *s);
    return 1;
}
static int jin_value(jin *j, int depth) {
    const unsigned char *s;
    size_t n;
    jin_ws(j);
    if (j->p >= j->end || depth > 64) return 0;
    if (*j->p == '"') return jin_string(j, &s, &n);
    if (*j->p == '{' || *j->p == '[') {
        unsigned char close = *j->p == '{' ? '}' : ']';
        j->p++;
        jin_ws(j);
        if (j->p < j->end && *j->p == close) return j->p++, 1;
        for (;;) {
            if (close == '}') {
                if (!jin_string(j, &s, &n)) return 0;
                jin_ws(j);
                if (j->p >= j->end || *j->p != ':') return 0;
                j->p++;
            }
            if (!jin_value(j, depth + 1)) return 0;
            jin_ws(j);
            if (j->p >= j->end) return 0;
            if (*j->p == close) return j->p++, 1;
            if (*j->p++ != ',') return 0;
        }
    }
    s = j->p; /* a number, true, false or null */
    while (j->p < j->end && *j->p && strchr("+-.0123456789eEtruefalsn", *j->p)) j->p++; /* loosely */
    return j->p > s;
}
/* The value of the top-level member key of a JSON object: j positioned
   at it (whitespace skipped); 0 if none or the text does not parse. */
static int jin_member(const tb_artifact *a, const char *key, jin *j) {
    const unsigned char *s;
    size_t n, kl = strlen(key);
    if (!a->data || !a->size) return 0;
    j->p = (const unsigned char *)a->data;
    j->end = j->p + a->size;
    jin_ws(j);
    if (j->p >= j->end || *j->p++ != '{') return 0;
    for (;;) {
        if (!jin_string(j, &s, &n)) return 0;
        jin_ws(j);
        if (j->p >= j->end || *j->p++ != ':') return 0;
        jin_ws(j);
        if (n == kl && !memcmp(s, key, n)) return j->p < j->end;
        if (!jin_value(j, 1)) return 0;
        jin_ws(j);
        if (j->p >= j->end || *j->p++ != ',') return 0;
    }
}
/* A JSON integer at j (no fraction, exponent or leading zero; within
   int64): 1 and *v */
static int jin_int(jin *j, long long *v) {
    char buf[24];
    size_t n = 0, minus;
    const unsigned char *p = j->p;
    if (p < j->end && *p == '-') buf[n++] = (char)*p++;
    minus = n;
    while (p < j->end && *p >= '0' && *p <= '9' && n < 20) buf[n++] = (char)*p++;
    if (n == minus || (buf[minus] == '0' && n > minus + 1) || (p < j->end && *p && strchr(".eE0123456789", *p)))
        return 0;
    buf[n] = 0;
    errno = 0;
    *v = strtoll(buf, NULL, 10);
    if (errno) return 0;
    j->p = p;
    return 1;
}

/* The NAME.json of a config's binary (NAME.cubin), or of a kernel */
static const tb_artifact *metadata_of(const tb_kernel *k, const char *binary) {
    char name[TB_MAX_NAME_LENGTH + 8];
    const char *dot;
    size_t n;
    if (!k) return NULL;
    if (binary) {
        dot = strrchr(binary, '.');
        n = dot ? (size_t)(dot - binary) : strlen(binary);
        if (n > TB_MAX_NAME_LENGTH) return NULL;
        memcpy(name, binary, n);
    } else if ((n = tb_kernel_name(k, name, sizeof name)) == 0 || n > TB_MAX_NAME_LENGTH) {
        return NULL;
    }
    memcpy(name + n, ".json", 6);
    return tb_kernel_find_artifact(k, name);
}

/* The value at j if it is a scalar: 1 a string without escapes (*v, *vn),
   2 an integer (*x), 3 true, false or null (*v); else 0. */
static int jin_scalar(jin *j, const unsigned char **v, size_t *vn, long long *x) {
    static const char *const lit[] = {"true", "false", "null"};
    int q;
    if (*j->p == '"') return jin_string(j, v, vn) && !memchr(*v, '\\', *vn);
    if (jin_int(j, x)) return 2;
    for (q = 0; q < 3; q++) {
        size_t n = strlen(lit[q]);
        if ((size_t)(j->end - j->p) >= n && !memcmp(j->p, lit[q], n)) {
            *v = (const unsigned char *)lit[q];
            return 3;
        }
    }
    return 0;
}

/* "target" of a kernel's NAME.json ({"backend": "cuda", "arch": 90,
   "warp_size": 32} in Triton 3.6) as an object of its scalar members;
   null if there is none. */
static void json_target(const tb_kernel *k) {
    const tb_artifact *a = metadata_of(k, NULL);
    const unsigned char *key, *v;
    size_t kn, vn;
    long long x;
    int first = 1, kind;
    jin j, at;
    if (!a || !jin_member(a, "target", &j) || *j.p != '{') {
        fputs("null", stdout);
        return;
    }
    j.p++;
    putchar('{');
    for (;;) {
        jin_ws(&j);
        if (j.p >= j.end || *j.p == '}' || !jin_string(&j, &key, &kn)) break;
        jin_ws(&j);
        if (j.p >= j.end || *j.p++ != ':') break;
        jin_ws(&j);
        at = j;
        if (!jin_value(&j, 1)) break;
        if (!memchr(key, '\\', kn) && (kind = jin_scalar(&at, &v, &vn, &x)) != 0) {
            if (!first) fputs(", ", stdout);
            jstrn((const char *)key, kn);
            fputs(": ", stdout);
            if (kind == 1) jstrn((const char *)v, vn);
            else if (kind == 2) printf("%lld", x);
            else fputs((const char *)v, stdout);
            first = 0;
        }
        jin_ws(&j);
        if (j.p >= j.end || *j.p++ != ',') break;
    }
    putchar('}');
}

/* num_stages: the config's param of that name (the exporters keep it
   there), else its NAME.json's; null if neither */
static void json_num_stages(const tb_bundle *b, const tb_launch_config *c) {
    const tb_artifact *a;
    long long v;
    uint32_t q;
    jin j;
    for (q = 0; q < c->param_count; q++)
        if (!strcmp(c->params[q].name, "num_stages")) {
            printf("%lld", (long long)c->params[q].value);
            return;
        }
    a = metadata_of(tb_bundle_find_kernel(b, c->kernel_hash), c->binary_name);
    if (a && jin_member(a, "num_stages", &j) && jin_int(&j, &v)) printf("%lld", v);
    else fputs("null", stdout);
}

static void json_indexes(const char *key, const uint32_t *v, uint32_t n) {
    uint32_t i;
    jkey(key);
    putchar('[');
    for (i = 0; i < n; i++) printf("%s%u", i ? ", " : "", v[i]);
    putchar(']');
}

static void json_scratch(const char *key, const tb_scratch *s) {
    jkey(key);
    if (s->present) printf("{\"size\": %llu, \"align\": %u}", (unsigned long long)s->size, s->align);
    else fputs("null", stdout);
}

static void json_grid(const tb_launch_record *r, const tb_launch_config *c) {
    static const char *const names[] = {"add", "sub", "mul", "floordiv", "cdiv", "mod", "min", "max", "neg"};
    char dim[3][300], text[1000];
    uint32_t d, i;
    for (d = 0; d < 3; d++)
        tb_grid_text(c->grid->ops[d], c->grid->op_count[d], r->call ? r->call->arg_names : NULL,
                     r->call ? r->call->arg_count : 0, c->params, c->param_count, dim[d], sizeof dim[d]);
    snprintf(text, sizeof text, "(%s, %s, %s)", dim[0], dim[1], dim[2]); /* as the plain list prints it */
    fputs("{\"text\": ", stdout);
    jstr(text);
    fputs(", \"ops\": [", stdout);
    for (d = 0; d < 3; d++) {
        printf("%s[", d ? ", " : "");
        for (i = 0; i < c->grid->op_count[d]; i++) {
            const tb_grid_op *o = &c->grid->ops[d][i];
            printf("%s{\"op\": ", i ? ", " : "");
            if (o->op == TB_GRID_CONST) printf("\"const\", \"value\": %lld}", (long long)o->value);
            else if (o->op >= TB_GRID_ARG && o->op <= TB_GRID_EXTRA)
                printf("\"%s\", \"index\": %u}",
                       o->op == TB_GRID_ARG     ? "arg"
                       : o->op == TB_GRID_PARAM ? "param"
                                                : "extra",
                       o->index);
            else if (o->op >= TB_GRID_ADD && o->op <= TB_GRID_NEG) printf("\"%s\"}", names[o->op - TB_GRID_ADD]);
            else printf("%u}", o->op);
        }
        putchar(']');
    }
    fputs("]}", stdout);
}

static void json_dims(const char *key, const int64_t *v, uint32_t n) {
    uint32_t i;
    jkey(key);
    putchar('[');
    for (i = 0; i < n && i < TB_MAX_TENSOR_DIMS; i++) printf("%s%lld", i ? ", " : "", (long long)v[i]);
    putchar(']');
}

static void json_tensors(const tb_tensor_spec *t, uint32_t n) {
    uint32_t i;
    putchar('[');
    for (i = 0; i < n; i++) {
        uint64_t extent = tb_tensor_spec_extent(&t[i]);
        fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", stdout);
        jstr(t[i].name);
        jkey("dtype");
        jstr(dtype_text(t[i].dtype));
        json_dims("shape", t[i].shape, t[i].rank);
        json_dims("strides", t[i].strides, t[i].rank);
        printf(", \"align\": %u, \"contiguous\": %s, \"extent\": ", t[i].align,
               spec_contiguous(&t[i]) ? "true" : "false");
        if (extent == UINT64_MAX) fputs("null}", stdout); /* overflows: a reader refuses it */
        else printf("%llu}", (unsigned long long)extent);
    }
    putchar(']');
}

/* the program's inputs and outputs, and its other parts counted; null if none */
static void json_program(const tb_program *p) {
    program_counts c;
    uint32_t i;
    if (!p) {
        fputs("null", stdout);
        return;
    }
    count_program(p, &c);
    fputs("{\"name\": ", stdout);
    jstr(p->name);
    fputs(", \"inputs\": ", stdout);
    json_tensors(p->inputs, p->input_count);
    fputs(",\n \"outputs\": ", stdout);
    json_tensors(p->outputs, p->output_count);
    printf(",\n \"constants\": {\"count\": %u, \"bytes\": %llu, \"state\": %u, \"external\": %u}, \"buffers\": %u, "
           "\"workspace_size\": %llu, \"steps\": {\"count\": %u, \"launch\": %u, \"memset\": %u, \"copy\": %u}",
           p->constant_count, c.constant_bytes, c.state, c.external, p->buffer_count,
           (unsigned long long)p->workspace_size, p->step_count, c.kinds[TB_STEP_LAUNCH], c.kinds[TB_STEP_MEMSET],
           c.kinds[TB_STEP_COPY]);
    fputs(",\n \"symbols\": [", stdout); /* (2.6) */
    for (i = 0; i < p->symbol_count; i++) {
        uint32_t in = 0, dim = 0;
        symbol_input(p, i, &in, &dim);
        fputs(i ? ", {\"name\": " : "{\"name\": ", stdout);
        jstr(p->symbols[i].name);
        printf(", \"min\": %lld, \"max\": %lld, \"divisor\": %lld, \"input\": %u, \"dim\": %u}",
               (long long)p->symbols[i].min, (long long)p->symbols[i].max, (long long)p->symbols[i].divisor, in, dim);
    }
    printf("], \"expressions\": %u}", p->expr_count);
}

static void list_json(const char *path, const tb_bundle *b) {
    uint32_t i, j, q, files = 0, nk = tb_bundle_kernel_count(b), nr = tb_bundle_launch_record_count(b);
    unsigned long long bytes = 0;
    char name[TB_MAX_NAME_LENGTH + 1];
    fputs("{\"file\": ", stdout);
    jstr(path);
    printf(", \"format\": {\"major\": %u, \"minor\": %u}, \"kernels\": [",
           (unsigned)(tb_bundle_format_version(b) >> 16), (unsigned)(tb_bundle_format_version(b) & 0xffff));
    for (i = 0; i < nk; i++) {
        const tb_kernel *k = tb_bundle_kernel(b, i);
        unsigned long long kb = 0;
        printf("%s\n{\"hash\": ", i ? "," : "");
        jstr(k->hash);
        jkey("name");
        if (!tb_kernel_name(k, name, sizeof name)) name[0] = 0;
        jstr(name);
        printf(", \"device\": %d, \"target\": ", (int)k->device);
        json_target(k);
        fputs(", \"files\": [", stdout);
        for (j = 0; j < k->artifact_count; j++) {
            printf("%s{\"name\": ", j ? ", " : "");
            jstr(k->artifacts[j].name);
            printf(", \"size\": %llu}", (unsigned long long)k->artifacts[j].size);
            kb += k->artifacts[j].size;
        }
        printf("], \"bytes\": %llu}", kb);
        files += k->artifact_count;
        bytes += kb;
    }
    fputs("],\n\"records\": [", stdout);
    for (i = 0; i < nr; i++) {
        const tb_launch_record *r = tb_bundle_launch_record(b, i);
        printf("%s\n{\"cache_key\": ", i ? "," : "");
        jstr(r->cache_key);
        jkey("kernel_name");
        jstr(r->kernel_name);
        jkey("call");
        if (r->call) {
            fputs("{\"arg_names\": [", stdout);
            for (j = 0; j < r->call->arg_count; j++) {
                if (j) fputs(", ", stdout);
                jstr(r->call->arg_names[j]);
            }
            putchar(']');
            json_indexes("mutated", r->call->mutated, r->call->mutated_count);
            json_indexes("reset", r->call->reset, r->call->reset_count);
            json_indexes("key", r->call->key, r->call->key_count);
            putchar('}');
        } else {
            fputs("null", stdout);
        }
        fputs(", \"configs\": [", stdout);
        for (j = 0; j < r->config_count; j++) {
            const tb_launch_config *c = &r->configs[j];
            static const char *const flag[] = {"cooperative", "pdl", "types_from_ir"};
            int first = 1;
            printf("%s{\"kernel_hash\": ", j ? ", " : "");
            jstr(c->kernel_hash);
            jkey("function_name");
            jstr(c->function_name);
            jkey("binary_name");
            jstr(c->binary_name);
            jkey("arg_types");
            jstr(c->arg_types);
            jkey("arg_divisibility");
            jstr(c->arg_divisibility);
            printf(", \"num_warps\": %u, \"num_ctas\": %u, \"num_stages\": ", c->num_warps, c->num_ctas);
            json_num_stages(b, c);
            printf(", \"shared_mem\": %u, \"cluster_dims\": [%u, %u, %u], \"flags\": [", c->shared_mem,
                   c->cluster_dims[0], c->cluster_dims[1], c->cluster_dims[2]);
            for (q = 0; q < 3; q++)
                if (c->flags & (1u << q)) printf("%s\"%s\"", first ? "" : ", ", flag[q]), first = 0;
            putchar(']');
            json_scratch("global_scratch", &c->global_scratch);
            json_scratch("profile_scratch", &c->profile_scratch);
            fputs(", \"params\": [", stdout);
            for (q = 0; q < c->param_count; q++) {
                printf("%s{\"name\": ", q ? ", " : "");
                jstr(c->params[q].name);
                printf(", \"value\": %lld}", (long long)c->params[q].value);
            }
            fputs("], \"tensordescs\": [", stdout);
            for (q = 0; q < c->tensordesc_count; q++) {
                const tb_tensordesc_meta *t = &c->tensordescs[q];
                uint32_t d;
                printf("%s{\"tma\": %u, \"rank\": %u, \"swizzle\": %u, \"elem_size\": %u, \"elem_type\": %u, "
                       "\"fp4_padded\": %u, \"block\": [",
                       q ? ", " : "", t->tma, t->rank, t->swizzle, t->elem_size, t->elem_type, t->fp4_padded);
                for (d = 0; d < t->rank && d < TB_MAX_TENSOR_RANK; d++) printf("%s%u", d ? ", " : "", t->block[d]);
                fputs("]}", stdout);
            }
            fputs("], \"grid\": ", stdout);
            if (c->grid) json_grid(r, c);
            else fputs("null", stdout);
            putchar('}');
        }
        fputs("]}", stdout);
    }
    fputs("],\n\"program\": ", stdout);
    json_program(tb_bundle_program(b));
    fputs(",\n\"programs\": [", stdout);
    for (i = 0; i < tb_bundle_program_count(b); i++) {
        if (i) fputs(",\n ", stdout);
        json_program(tb_bundle_program_at(b, i));
    }
    fputs("],\n\"properties\": {", stdout);
    for (i = 0; i < tb_bundle_property_count(b); i++) {
        const char *key, *value = tb_bundle_property_at(b, i, &key);
        if (i) fputs(", ", stdout);
        jstr(key);
        fputs(": ", stdout);
        jstr(value);
    }
    printf("},\n\"totals\": {\"kernels\": %u, \"files\": %u, \"bytes\": %llu, \"records\": %u}}\n", nk, files, bytes,
           nr);
}

static int cmd_list(int argc, char **argv) {
    tb_bundle *b;
    uint32_t i, j, files = 0;
    unsigned long long bytes = 0;
    char e1[1100], e2[1100], e3[1100];
    const char *path;
    int json = 0, st = one_path(argc, argv, usage_list, "list", &json, &path);
    if (st >= 0) return st;
    if (open_bundle(path, json ? TB_READ_COPY : 0, &b)) return 1;
    if (json) {
        list_json(path, b);
        tb_bundle_free(b);
        return fflush(stdout) != 0 || ferror(stdout);
    }
    for (i = 0; i < tb_bundle_kernel_count(b); i++) {
        const tb_kernel *k = tb_bundle_kernel(b, i);
        unsigned long long kb = 0;
        for (j = 0; j < k->artifact_count; j++) kb += k->artifacts[j].size;
        printf("kernel %s  device %d  files %u  bytes %llu\n", esc(k->hash, e1, sizeof e1), k->device,
               k->artifact_count, kb);
        {
            int w = 40; /* the widest name of the kernel's files: each size in one column after it */
            for (j = 0; j < k->artifact_count; j++) {
                int n = (int)strlen(esc(k->artifacts[j].name, e1, sizeof e1));
                if (n > w) w = n;
            }
            for (j = 0; j < k->artifact_count; j++)
                printf("    %-*s  %10llu\n", w, esc(k->artifacts[j].name, e1, sizeof e1),
                       (unsigned long long)k->artifacts[j].size);
        }
        files += k->artifact_count;
        bytes += kb;
    }
    for (i = 0; i < tb_bundle_launch_record_count(b); i++) {
        const tb_launch_record *r = tb_bundle_launch_record(b, i);
        printf("record %s  kernel %s  configs %u\n", esc(r->cache_key, e1, sizeof e1),
               esc(r->kernel_name, e2, sizeof e2), r->config_count);
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
            printf("    config %u: %s in %s  args \"%s\"  warps %u  ctas %u  shared %u", j,
                   esc(c->function_name, e1, sizeof e1), esc(c->binary_name, e2, sizeof e2),
                   esc(c->arg_types, e3, sizeof e3), c->num_warps, c->num_ctas, c->shared_mem);
            print_scratch("global_scratch", &c->global_scratch);
            print_scratch("profile_scratch", &c->profile_scratch);
            if (c->flags & TB_CONFIG_COOPERATIVE) printf(" cooperative");
            if (c->flags & TB_CONFIG_PDL) printf(" pdl");
            for (q = 0; q < c->param_count; q++)
                printf(" %s=%lld", esc(c->params[q].name, e1, sizeof e1), (long long)c->params[q].value);
            if (c->grid) {
                for (q = 0; q < 3; q++) {
                    tb_grid_text(c->grid->ops[q], c->grid->op_count[q], r->call ? r->call->arg_names : NULL,
                                 r->call ? r->call->arg_count : 0, c->params, c->param_count, e2, sizeof e2);
                    printf("%s%s", q ? ", " : "  grid (", esc(e2, e1, sizeof e1));
                }
                printf(")");
            }
            printf("\n");
        }
    }
    for (i = 0; i < tb_bundle_program_count(b); i++)
        list_program(tb_bundle_program_at(b, i), tb_bundle_program_count(b) > 1);
    for (i = 0; i < tb_bundle_property_count(b); i++) {
        const char *key, *value = tb_bundle_property_at(b, i, &key);
        printf("property %s = %s\n", esc(key, e1, sizeof e1), esc(value, e2, sizeof e2));
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
    if (open_bundle(path, 0, &b)) return 1;
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
            if (n == 2)
                return bad_usage(usage_unpack, "unexpected argument '%s' for unpack (it takes FILE CACHE_DIR)", E(a));
            pos[n++] = a;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(usage_unpack, 0);
        else if (!strcmp(a, "--fsync")) eo.flags |= TB_EMIT_FSYNC;
        else if (!strcmp(a, "--replace")) eo.flags |= TB_EMIT_REPLACE;
        else if (!strcmp(a, "--threads")) {
            if (missing_value(a, i, argc, usage_unpack) || !parse_threads(argv[++i], &eo.threads, usage_unpack))
                return 2;
        } else if (!strcmp(a, "-v")) verbose = 1;
        else return bad_usage(usage_unpack, "unknown option '%s' for unpack", E(a));
    }
    if (n != 2)
        return bad_usage(usage_unpack, n ? "unpack needs CACHE_DIR after FILE" : "unpack needs FILE and CACHE_DIR");
    step_start = now();
    if (open_bundle(pos[0], 0, &b)) return 1;
    step("read");
    ep.p.start = now();
    ep.p.last = 0;
    ep.total = tb_bundle_kernel_count(b);
    eo.on_kernel = emit_progress;
    eo.user = &ep;
    eo.flags |= TB_EMIT_VERIFY; /* a kernel already there must be the bundle's */
    r = tb_emit(b, pos[1], &eo, &rep, NULL, &e);
    step("emit");
    if (verbose) fprintf(stderr, "%s: %u writer%s\n", prog, rep.threads, rep.threads == 1 ? "" : "s");
    if (r != tb_ok && !rep.written && !rep.present && !rep.failed && !rep.differs && !rep.replaced) {
        tb_bundle_free(b);
        return fail(&e); /* the cache directory itself (a regular file, say): no counts to show */
    }
    printf("emitted %u, present %u, failed %u", rep.written, rep.present, rep.failed);
    if (rep.differs || rep.replaced) printf(", differ %u, replaced %u", rep.differs, rep.replaced);
    printf("\n");
    if (rep.differs)
        fprintf(stderr,
                "%s: %u kernel%s in %s differ%s from the bundle's and %s left as %s (--replace replaces them)\n", prog,
                rep.differs, rep.differs == 1 ? "" : "s", E(pos[1]), rep.differs == 1 ? "s" : "",
                rep.differs == 1 ? "was" : "were", rep.differs == 1 ? "it was" : "they were");
    tb_bundle_free(b);
    if (r != tb_ok && rep.failed == 0 && rep.differs == 0) return fail(&e);
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
            if (cache)
                return bad_usage(usage_clean, "unexpected argument '%s' for clean (it takes one CACHE_DIR)",
                                 E(argv[i]));
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

/* tbundle generate: examples/generate.c, the example program, is the one
   implementation (linked in, built with GENERATE_NO_MAIN) */
static double start_s;

/* The commands' usage lines (each command's own, so they cannot drift
   apart), then how to learn more. */
static int top_usage(int status) {
    const char *const all[] = {usage_pack, usage_list, usage_unpack, usage_verify, usage_clean, usage_run};
    FILE *f = status ? stderr : stdout;
    size_t k;
    fputs("tbundle: Triton kernel bundles: pack a Triton cache into one file, list, verify or unpack it,\n"
          "run a program of an exported model, generate text with a model's prefill and decode\n"
          "usage: tbundle COMMAND [ARGS]\n", f);
    for (k = 0; k < sizeof all / sizeof all[0]; k++) {
        const char *t = all[k] + 15, *end = all[k]; /* past "usage: tbundle " */
        int first = 1;
        do { /* the usage line and its continuations, as bad_usage prints them, 13 columns left */
            const char *nl = strchr(end, '\n'), *from = first ? t : end + 13;
            end = nl ? nl + 1 : end + strlen(end);
            fprintf(f, "  %.*s", (int)(end - from), from);
            first = 0;
        } while (!strncmp(end, "    ", 4) && end[strspn(end, " ")] == '[');
    }
    fprintf(f, "  generate %s\n", gen_usage_line);
    fputs("'tbundle COMMAND --help' explains each. Options go anywhere; '--' ends them.\n"
          "'tbundle --version' prints the version and the formats it writes and reads.\n", f);
    return status;
}

int main(int argc, char **argv) {
    start_s = now();
    if (argc < 2) return top_usage(2);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return top_usage(0);
    if (!strcmp(argv[1], "--version"))
        return printf("tbundle %s (writes format %d.%d, reads 1.x to %d.x)\n", tb_version(), TB_FORMAT_VERSION_MAJOR,
                      TB_FORMAT_VERSION_MINOR, TB_FORMAT_VERSION_MAJOR) < 0;
    if (!strcmp(argv[1], "pack")) return cmd_pack(argc - 2, argv + 2);
    if (!strcmp(argv[1], "list")) return cmd_list(argc - 2, argv + 2);
    if (!strcmp(argv[1], "unpack")) return cmd_unpack(argc - 2, argv + 2);
    if (!strcmp(argv[1], "verify")) return cmd_verify(argc - 2, argv + 2);
    if (!strcmp(argv[1], "clean")) return cmd_clean(argc - 2, argv + 2);
    if (!strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(argv[1], "generate")) return generate_main(argc - 1, argv + 1, "tbundle generate", start_s);
    fprintf(stderr, "%s: unknown command '%s'\n", prog, E(argv[1]));
    return top_usage(2);
}
