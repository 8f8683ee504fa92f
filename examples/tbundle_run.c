/* tbundle run: a program of a model's bundle (export_model, export_programs)
   run once on the GPU, its inputs read from .npy files and its outputs
   written as .npy files; --bench times it. A translation unit of tbundle
   (tbundle_cli.h: what it shares with tbundle.c, which holds main and the
   header's implementation). */
#include "tbundle_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const usage_run =
    "usage: tbundle run MODEL [--program NAME] [--in FILE.npy]... [--out DIR] [--weights FILE] [--graph] [--bench N] "
    "[--device N] [-v]\n"
    "  Runs the program MODEL holds (a whole compiled model, as the Python companion's\n"
    "  export_model writes it) once on the GPU and writes its outputs to DIR/out0.npy,\n"
    "  DIR/out1.npy..., printing one line for each. Tensors are NumPy .npy files\n"
    "  (format 1.0, 2.0 or 3.0, C order) of exactly the dtype and shape the program\n"
    "  states ('tbundle list MODEL' shows them; a program whose sizes vary takes any\n"
    "  shape in its symbols' ranges, bound from the inputs). bfloat16 and the float8 dtypes have no\n"
    "  NumPy type: their tensors are read and written as their bit patterns, bfloat16\n"
    "  as '<u2' and float8 as '|u1' .npy files, of the tensor's shape (PyTorch:\n"
    "  t.view(torch.int16).numpy().view('<u2'), t.view(torch.uint8).numpy(); and back,\n"
    "  torch.from_numpy(a.view('<i2')).view(torch.bfloat16)). A tensor whose strides\n"
    "  are not C order's is read and written in C order all the same: run places the\n"
    "  elements (an input whose strides make elements share memory, such as a stride\n"
    "  of 0, needs equal values in the .npy where they do). Everything is checked\n"
    "  before the GPU is touched: a MODEL without a program, a wrong count of --in, a\n"
    "  file that is no .npy, a dtype or shape other than the input's fail (1).\n"
    "  --program NAME the program to run, of a bundle of several (export_programs:\n"
    "                 prefill, decode...); default: the bundle's one program\n"
    "  --in FILE.npy  an input, in the program's order: one --in for each input\n"
    "  --out DIR      the directory for the outputs (default: the current one), made\n"
    "                 if missing; each file is written beside its place and renamed\n"
    "                 into it\n"
    "  --weights FILE the safetensors file of MODEL's external constants (exported with\n"
    "                 weights=...): default, the file its weights.file names, beside\n"
    "                 MODEL; a checkpoint of the same names, dtypes and shapes (a\n"
    "                 fine-tuned one) runs without a new export\n"
    "  --graph        run the program as one CUDA graph (TB_MODEL_GRAPH)\n"
    "  --bench N      then time N more runs, 1 to 1000000, after 3 to warm up: each one\n"
    "                 from its launch to its completion (the stream synchronized); prints\n"
    "                 'load MS ms' (tb_model_load: constants uploaded, kernels loaded),\n"
    "                 'median US us', 'min US us', 'max US us' and 'runs N', a line each;\n"
    "                 then 'upload MS ms' (tb_model_load with the kernels loaded already),\n"
    "                 'h2d MS ms' (one pageable host-to-device copy of the constants'\n"
    "                 bytes), 'constants N bytes' and 'upload_memory MS ms' (the load\n"
    "                 from the bundle read into memory), the medians of 5\n"
    "  --device N     the CUDA device, 0 or more (default 0); its primary context is\n"
    "                 used\n"
    "  -v             print each phase of the load (driver, context, kernels, memory, upload)\n";

static int verbose; /* -v: the load's phases */

/* mkdir -p: 0, or -1 with errno. */
static int mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path), i;
    if (n == 0 || n >= sizeof buf) return errno = ENAMETOOLONG, -1;
    memcpy(buf, path, n + 1);
    for (i = 1; i <= n; i++)
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
            buf[i] = c;
        }
    return 0;
}

/* ---- run: a model's program on the GPU ----
   Everything run needs from the files is checked before the driver is
   loaded (the program, the count of inputs, each .npy's header, dtype,
   shape and bytes), so that those refusals need no GPU. */

#define BENCH_WARMUP 3
#define BENCH_MAX 1000000L
#define NPY_MAX_HEADER 65536u /* numpy itself reads 10000 at most by default */

/* n bytes at offset off of fd; 0 if an error (errno) or the end of the
   file (errno 0) came first */
static int read_at(int fd, void *buf, size_t n, uint64_t off) {
    char *p = (char *)buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0;
            return 0;
        }
        p += r, n -= (size_t)r, off += (uint64_t)r;
    }
    return 1;
}

static int write_all(int fd, const void *buf, size_t n) {
    const char *p = (const char *)buf;
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            return 0;
        }
        p += r, n -= (size_t)r;
    }
    return 1;
}

/* ---- .npy files (NumPy's format 1.0, 2.0 and 3.0) ----
   "\x93NUMPY", major, minor, the header's length (u16 in 1.0, u32 after),
   then the header: a Python dict literal of exactly 'descr' (a type
   string), 'fortran_order' (True or False) and 'shape' (a tuple of
   integers), padded with spaces and ended by a newline; the data follow,
   all of it and nothing after. Every length is checked against the file
   before it is used, and the header is read only up to its stated end. */
typedef struct {
    char descr[16];
    int fortran_order;
    uint32_t rank;
    int64_t shape[TB_MAX_TENSOR_DIMS];
    uint64_t data;               /* the data's offset in the file */
} npy_header;

typedef struct {
    const char *p, *end, *start;
} npy_in;

static void npy_ws(npy_in *in) {
    while (in->p < in->end && (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r')) in->p++;
}
static int npy_is(npy_in *in, char c) { return in->p < in->end && *in->p == c; }
/* a Python string literal without escapes, 'abc' or "abc": [*s, *s + *n) */
static int npy_str(npy_in *in, const char **s, size_t *n) {
    char q;
    if (!npy_is(in, '\'') && !npy_is(in, '"')) return 0;
    q = *in->p++;
    *s = in->p;
    while (in->p < in->end && *in->p != q) {
        if (*in->p == '\\' || *in->p == '\n') return 0;
        in->p++;
    }
    if (in->p >= in->end) return 0;
    *n = (size_t)(in->p++ - *s);
    return 1;
}
static int npy_word(npy_in *in, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(in->end - in->p) < n || memcmp(in->p, w, n)) return 0;
    in->p += n;
    return 1;
}
/* a size: digits, no sign and no leading zero, within int64 */
static int npy_int(npy_in *in, int64_t *v) {
    const char *s = in->p;
    uint64_t x = 0;
    while (in->p < in->end && *in->p >= '0' && *in->p <= '9') {
        unsigned d = (unsigned)(*in->p - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10) return 0;
        x = x * 10 + d;
        in->p++;
    }
    if (in->p == s || (*s == '0' && in->p - s > 1)) return 0;
    *v = (int64_t)x;
    return 1;
}

/* The header's dictionary (n bytes at text): 1 and h, else 0 and why. */
static int npy_dict(const char *text, size_t n, npy_header *h, char *why, size_t cap) {
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    npy_in in;
    int seen[3] = {0, 0, 0}, key;
    const char *nul = (const char *)memchr(text, 0, n);
    if (nul) /* as NumPy refuses it: '<i8\0' is not '<i8' */
        return snprintf(why, cap, "its header holds a NUL byte (byte %ld of it): NumPy refuses such a header",
                        (long)(nul - text)),
               0;
    in.p = in.start = text;
    in.end = text + n;
    npy_ws(&in);
    if (!npy_is(&in, '{')) return snprintf(why, cap, "its header is no dictionary ('{' expected)"), 0;
    in.p++;
    for (;;) {
        const char *k, *v;
        size_t kn, vn;
        char shown[40];
        npy_ws(&in);
        if (npy_is(&in, '}')) break; /* {} or a trailing comma */
        if (!npy_str(&in, &k, &kn))
            return snprintf(why, cap, "a key (a quoted string) expected at byte %ld of its header",
                            (long)(in.p - in.start)), 0;
        for (key = 0; key < 3 && !(strlen(keys[key]) == kn && !memcmp(k, keys[key], kn)); key++) {
        }
        if (key == 3) {
            snprintf(shown, sizeof shown, "%.*s", (int)(kn < 32 ? kn : 32), k);
            return snprintf(why, cap,
                            "its header has the key '%s' (a .npy header holds descr, fortran_order and shape)",
                            E(shown)),
                   0;
        }
        if (seen[key]) return snprintf(why, cap, "its header has '%s' twice", keys[key]), 0;
        seen[key] = 1;
        npy_ws(&in);
        if (!npy_is(&in, ':')) return snprintf(why, cap, "':' expected after '%s' in its header", keys[key]), 0;
        in.p++;
        npy_ws(&in);
        if (key == 0) {
            if (npy_is(&in, '['))
                return snprintf(why, cap, "it holds a structured array (descr is a list): only plain arrays are read"),
                       0;
            if (!npy_str(&in, &v, &vn) || vn == 0 || vn >= sizeof h->descr)
                return snprintf(why, cap, "its descr is no type string ('<f4', '|u1'...)"), 0;
            memcpy(h->descr, v, vn);
            h->descr[vn] = 0;
        } else if (key == 1) {
            if (npy_word(&in, "False")) h->fortran_order = 0;
            else if (npy_word(&in, "True")) h->fortran_order = 1;
            else return snprintf(why, cap, "its fortran_order is neither True nor False"), 0;
        } else {
            if (!npy_is(&in, '(')) return snprintf(why, cap, "its shape is no tuple"), 0;
            in.p++;
            h->rank = 0;
            for (;;) {
                npy_ws(&in);
                if (npy_is(&in, ')')) break; /* () or a trailing comma */
                if (h->rank == TB_MAX_TENSOR_DIMS)
                    return snprintf(why, cap, "its shape has more than %u dimensions", TB_MAX_TENSOR_DIMS), 0;
                if (!npy_int(&in, &h->shape[h->rank]))
                    return snprintf(why, cap, "its shape holds something other than sizes (integers 0 to 2^63 - 1)"), 0;
                h->rank++;
                npy_ws(&in);
                if (npy_is(&in, ',')) in.p++;
                else if (!npy_is(&in, ')')) return snprintf(why, cap, "',' or ')' expected in its shape"), 0;
            }
            in.p++;
        }
        npy_ws(&in);
        if (npy_is(&in, ',')) in.p++;
        else if (!npy_is(&in, '}'))
            return snprintf(why, cap, "',' or '}' expected after '%s' in its header", keys[key]), 0;
    }
    in.p++;
    npy_ws(&in);
    if (in.p != in.end) return snprintf(why, cap, "its header holds bytes after the dictionary"), 0;
    for (key = 0; key < 3; key++)
        if (!seen[key]) return snprintf(why, cap, "its header has no '%s'", keys[key]), 0;
    return 1;
}

/* The header of the .npy file fd (size bytes): 1 and h, else 0 and why. */
static int npy_header_read(int fd, uint64_t size, npy_header *h, char *why, size_t cap) {
    unsigned char pre[12];
    uint64_t start, len;
    char *text;
    int ok;
    memset(h, 0, sizeof *h);
    if (!read_at(fd, pre, size < 12 ? (size_t)size : 12, 0))
        return snprintf(why, cap, "cannot read it: %s", errno ? strerror(errno) : "it ended early"), 0;
    if (size < 6 || memcmp(pre, "\x93NUMPY", 6)) return snprintf(why, cap, "not a .npy file (no \\x93NUMPY magic)"), 0;
    if (size < 10)
        return snprintf(why, cap, "truncated: %llu bytes, shorter than a .npy header", (unsigned long long)size), 0;
    if (pre[7] != 0 || pre[6] < 1 || pre[6] > 3)
        return snprintf(why, cap, ".npy format %u.%u: this reader takes 1.0, 2.0 and 3.0", pre[6], pre[7]), 0;
    if (pre[6] == 1) {
        start = 10;
        len = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
    } else {
        if (size < 12)
            return snprintf(why, cap, "truncated: %llu bytes, shorter than a .npy header", (unsigned long long)size), 0;
        start = 12;
        len = (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 | (uint64_t)pre[11] << 24;
    }
    if (len > NPY_MAX_HEADER)
        return snprintf(why, cap, "its header length, %llu bytes, is over the %u this reader takes",
                        (unsigned long long)len, NPY_MAX_HEADER),
               0;
    if (len > size - start)
        return snprintf(why, cap, "truncated: its header ends at byte %llu, the file at %llu",
                        (unsigned long long)(start + len), (unsigned long long)size), 0;
    if (!(text = (char *)malloc((size_t)len + 1))) return snprintf(why, cap, "out of memory"), 0;
    if (!read_at(fd, text, (size_t)len, start)) {
        snprintf(why, cap, "cannot read its header: %s", errno ? strerror(errno) : "the file ended early");
        free(text);
        return 0;
    }
    ok = npy_dict(text, (size_t)len, h, why, cap);
    free(text);
    h->data = start + len;
    return ok;
}

/* A descr is the dtype's: the same string, or for a one-byte type, any
   byte order mark ('|u1', '<u1', '>u1' are one type). */
static int npy_descr_is(const char *got, const char *want) {
    if (!strcmp(got, want)) return 1;
    return want[0] == '|' && (got[0] == '<' || got[0] == '>' || got[0] == '=') && !strcmp(got + 1, want + 1);
}

/* "(2, 3)", "(4,)", "()" */
static void npy_shape_text(const int64_t *v, uint32_t n, char *buf, size_t cap) {
    size_t o = 1;
    uint32_t i;
    buf[0] = '(';
    for (i = 0; i < n && i < TB_MAX_TENSOR_DIMS && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)v[i]);
    if (o < cap) snprintf(buf + o, cap - o, n == 1 ? ",)" : ")");
}

/* ---- a tensor's elements in C order, and where its strides put them ----
   Element i of the C order (the .npy's) sits at element off of the extent.
   The walk keeps off within the extent: the largest offset it reaches is
   sum((size - 1) * stride), the extent's last element. */
typedef struct {
    const tb_tensor_spec *t;
    uint64_t idx[TB_MAX_TENSOR_DIMS], off;
} walk_t;
static void walk_start(walk_t *w, const tb_tensor_spec *t) {
    memset(w, 0, sizeof *w);
    w->t = t;
}
static void walk_next(walk_t *w) {
    uint32_t d;
    for (d = w->t->rank; d-- > 0;) {
        if (++w->idx[d] < (uint64_t)w->t->shape[d]) {
            w->off += (uint64_t)w->t->strides[d];
            return;
        }
        w->off -= (w->idx[d] - 1) * (uint64_t)w->t->strides[d];
        w->idx[d] = 0;
    }
}

/* The elements of t, and their bytes (es each); UINT64_MAX if either
   overflows (a stride of 0 lets a small extent hold that many). */
static uint64_t spec_elements(const tb_tensor_spec *t, uint32_t es, uint64_t *bytes) {
    uint64_t n = 1;
    uint32_t d;
    *bytes = UINT64_MAX;
    for (d = 0; d < t->rank; d++) {
        if (t->shape[d] == 0) return *bytes = 0;
        if (n > UINT64_MAX / (uint64_t)t->shape[d]) return UINT64_MAX;
        n *= (uint64_t)t->shape[d];
    }
    if (n > UINT64_MAX / (es ? es : 1)) return UINT64_MAX;
    *bytes = n * es;
    return n;
}

/* Whether two elements may share memory: the dimensions of a size above 1,
   by stride, each stride past the span of the smaller ones. */
static int spec_may_overlap(const tb_tensor_spec *t) {
    uint32_t order[TB_MAX_TENSOR_DIMS], n = 0, i, j;
    uint64_t span = 0;
    for (i = 0; i < t->rank; i++)
        if (t->shape[i] > 1) order[n++] = i;
    for (i = 1; i < n; i++)
        for (j = i; j > 0 && t->strides[order[j]] < t->strides[order[j - 1]]; j--) {
            uint32_t x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    for (i = 0; i < n; i++) {
        if ((uint64_t)t->strides[order[i]] <= span) return 1;
        span += (uint64_t)(t->shape[order[i]] - 1) * (uint64_t)t->strides[order[i]];
    }
    return 0;
}

/* The C-order elements of src into the extent dst (extent bytes, zeroed).
   Elements that share memory must be equal: 0 if two are not, with
   *clash the C-order index of the second; -1 if the walk would leave the
   extent (a spec whose extent is wrong: never, from a reader). */
static int scatter(const tb_tensor_spec *t, uint32_t es, const unsigned char *src, unsigned char *dst, uint64_t extent,
                   uint64_t *clash) {
    uint64_t bytes, n = spec_elements(t, es, &bytes), i, slots = extent / es;
    unsigned char *seen = NULL;
    walk_t w;
    if (spec_may_overlap(t) && !(seen = (unsigned char *)calloc((size_t)(slots / 8 + 1), 1))) return -2;
    walk_start(&w, t);
    for (i = 0; i < n; i++, walk_next(&w)) {
        unsigned char *at = dst + w.off * es;
        if (w.off >= slots) {
            free(seen);
            return -1;
        }
        if (seen && (seen[w.off / 8] & (1u << (w.off % 8)))) {
            if (memcmp(at, src + i * es, es)) {
                *clash = i;
                free(seen);
                return 0;
            }
            continue;
        }
        if (seen) seen[w.off / 8] |= (unsigned char)(1u << (w.off % 8));
        memcpy(at, src + i * es, es);
    }
    free(seen);
    return 1;
}

/* The extent src (extent bytes) into C order at dst; 0 if the walk would
   leave the extent. */
static int gather(const tb_tensor_spec *t, uint32_t es, const unsigned char *src, uint64_t extent, unsigned char *dst) {
    uint64_t bytes, n = spec_elements(t, es, &bytes), i, slots = extent / es;
    walk_t w;
    walk_start(&w, t);
    for (i = 0; i < n; i++, walk_next(&w)) {
        if (w.off >= slots) return 0;
        memcpy(dst + i * es, src + w.off * es, es);
    }
    return 1;
}

/* C-order index i of t as "[1, 0]" */
static const char *index_text(const tb_tensor_spec *t, uint64_t i, char *buf) {
    int64_t idx[TB_MAX_TENSOR_DIMS];
    uint32_t d;
    for (d = t->rank; d-- > 0;) {
        idx[d] = (int64_t)(i % (uint64_t)t->shape[d]);
        i /= (uint64_t)t->shape[d];
    }
    return dims_text(idx, t->rank, buf);
}

/* One tensor of the run: its bytes on the host as its spec lays them out
   (extent bytes), and on the device. */
typedef struct {
    unsigned char *host;
    uint64_t extent;
    void *raw;                   /* the allocation (tb_model_device_alloc; NULL: none) */
    void *dev;                   /* raw rounded up to the spec's align */
} run_tensor;

/* bfloat16 and float8: no NumPy type, their bit patterns in .npy files */
static int bit_patterns(uint32_t dtype) {
    return dtype == TB_DTYPE_BFLOAT16 || dtype == TB_DTYPE_FLOAT8_E4M3FN || dtype == TB_DTYPE_FLOAT8_E5M2 ||
           dtype == TB_DTYPE_FLOAT8_E4M3FNUZ || dtype == TB_DTYPE_FLOAT8_E5M2FNUZ;
}

/* "bfloat16 [2, 3], a '<u2' .npy (its bit patterns)": the spec's */
static const char *spec_text(const tb_tensor_spec *t, char *buf, size_t cap) {
    char d1[DIMS_TEXT];
    const char *npy = tb_dtype_npy(t->dtype);
    snprintf(buf, cap, "%s %s, a '%s' .npy%s", dtype_text(t->dtype), dims_text(t->shape, t->rank, d1), npy ? npy : "?",
             bit_patterns(t->dtype) ? " (bfloat16 and float8 are read as their bit patterns)" : "");
    return buf;
}

/* An input's .npy file, open, its header read: each file is opened and
   read once (npy_open, then read_input). */
typedef struct {
    int fd;                      /* -1: not open */
    uint64_t size;
    npy_header h;
} npy_file;

/* Opens the .npy at path for input i (spec t: its name) and reads its
   header into f: 0, or 1 with the cause printed (f->fd -1, or open for
   the caller to close). */
static int npy_open(const char *path, uint32_t i, const tb_tensor_spec *t, npy_file *f) {
    struct stat st;
    char why[400];
    if ((f->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
        fprintf(stderr, "%s: %s (input %u '%s'): %s\n", prog, E(path), i, E(t->name), strerror(errno));
        return 1;
    }
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "%s: %s (input %u '%s'): not a regular file\n", prog, E(path), i, E(t->name));
        return 1;
    }
    f->size = (uint64_t)st.st_size;
    if (!npy_header_read(f->fd, f->size, &f->h, why, sizeof why)) {
        fprintf(stderr, "%s: %s (input %u '%s'): %s\n", prog, E(path), i, E(t->name), why);
        return 1;
    }
    return 0;
}

/* Input i (spec t) from the .npy at path (f: open, its header read) into
   rt->host: 0, or 1 with the cause printed. */
static int read_input(const char *path, uint32_t i, const tb_tensor_spec *t, const npy_file *f, run_tensor *rt) {
    const npy_header h = f->h;
    char want[300], d1[DIMS_TEXT];
    const char *npy = tb_dtype_npy(t->dtype);
    uint32_t es = tb_dtype_size(t->dtype), d, long_dims = 0;
    uint64_t n, bytes, clash = 0;
    unsigned char *data = NULL;
    int fd = f->fd, r, st_ = 1, shape_ok;
    memset(rt, 0, sizeof *rt);
    if (!npy || !es) { /* a reader refuses such a dtype */
        fprintf(stderr, "%s: input %u '%s': the program's dtype %u has no .npy type\n", prog, i, E(t->name), t->dtype);
        goto done;
    }
    shape_ok = h.rank == t->rank;
    for (d = 0; shape_ok && d < h.rank; d++) shape_ok = h.shape[d] == t->shape[d];
    if (!npy_descr_is(h.descr, npy) || !shape_ok) {
        fprintf(stderr, "%s: %s (input %u '%s'): holds '%s' %s; the input is %s\n", prog, E(path), i, E(t->name),
                E(h.descr), dims_text(h.shape, h.rank, d1), spec_text(t, want, sizeof want));
        goto done;
    }
    for (d = 0; d < h.rank; d++) long_dims += h.shape[d] > 1;
    if (h.fortran_order && long_dims > 1) { /* one dimension of more than 1: the same bytes in either order */
        fprintf(stderr, "%s: %s (input %u '%s'): in Fortran order (fortran_order True): save it in C order "
                "(numpy.ascontiguousarray)\n", prog, E(path), i, E(t->name));
        goto done;
    }
    if ((n = spec_elements(t, es, &bytes)) == UINT64_MAX || bytes > (uint64_t)SIZE_MAX) {
        fprintf(stderr, "%s: input %u '%s': %s has more bytes than this machine can hold\n", prog, i, E(t->name),
                dims_text(t->shape, t->rank, d1));
        goto done;
    }
    if (f->size - h.data != bytes) {
        fprintf(stderr, "%s: %s (input %u '%s'): holds %llu bytes of data; '%s' %s is %llu bytes\n", prog, E(path), i,
                E(t->name), (unsigned long long)(f->size - h.data), E(h.descr), dims_text(h.shape, h.rank, d1),
                (unsigned long long)bytes);
        goto done;
    }
    rt->extent = tb_tensor_spec_extent(t);
    if (rt->extent == UINT64_MAX || rt->extent > (uint64_t)SIZE_MAX - 4096 || (n && rt->extent < es)) {
        fprintf(stderr, "%s: input %u '%s': its extent is out of range\n", prog, i, E(t->name));
        goto done;
    }
    if (!(rt->host = (unsigned char *)calloc((size_t)rt->extent + 1, 1))) {
        fprintf(stderr, "%s: input %u '%s': cannot allocate %llu bytes\n", prog, i, E(t->name),
                (unsigned long long)rt->extent);
        goto done;
    }
    if (bytes && spec_contiguous(t) && bytes == rt->extent) {
        data = rt->host;
    } else if (bytes && !(data = (unsigned char *)malloc((size_t)bytes))) {
        fprintf(stderr, "%s: input %u '%s': cannot allocate %llu bytes\n", prog, i, E(t->name),
                (unsigned long long)bytes);
        goto done;
    }
    if (bytes && !read_at(fd, data, (size_t)bytes, h.data)) {
        fprintf(stderr, "%s: %s (input %u '%s'): cannot read its data: %s\n", prog, E(path), i, E(t->name),
                errno ? strerror(errno) : "the file ended early");
        goto done;
    }
    if (bytes && data != rt->host) {
        r = scatter(t, es, data, rt->host, rt->extent, &clash);
        if (r == 0) {
            fprintf(stderr,
                    "%s: %s (input %u '%s'): the input's strides %s make elements share memory, and element %s "
                    "differs from an earlier one at its place\n",
                    prog, E(path), i, E(t->name), dims_text(t->strides, t->rank, d1), index_text(t, clash, want));
            goto done;
        }
        if (r < 0) {
            fprintf(stderr, "%s: input %u '%s': %s\n", prog, i, E(t->name),
                    r == -1 ? "its strides reach past its extent" : "out of memory");
            goto done;
        }
    }
    st_ = 0;
done:
    if (data != rt->host) free(data);
    if (st_) {
        free(rt->host);
        rt->host = NULL;
    }
    return st_;
}

/* Output i (spec t; its extent bytes at host) as DIR/out<i>.npy, in C
   order: written beside it and renamed. 0, or 1 with the cause printed. */
static int write_output(const char *dir, uint32_t i, const tb_tensor_spec *t, const unsigned char *host,
                        uint64_t extent) {
    static int mask = -1;
    char head[512], shape[DIMS_TEXT], name[48], d1[DIMS_TEXT];
    const char *npy = tb_dtype_npy(t->dtype);
    uint32_t es = tb_dtype_size(t->dtype);
    uint64_t bytes;
    unsigned char *c_order = NULL;
    const unsigned char *data = host;
    char *path = NULL, *tmp = NULL;
    size_t n;
    int fd, st = 1, ok, err;
    if (mask < 0) {
        mask = (int)umask(0);
        umask((mode_t)mask);
    }
    if (!npy || !es) {
        fprintf(stderr, "%s: output %u '%s': the program's dtype %u has no .npy type\n", prog, i, E(t->name), t->dtype);
        return 1;
    }
    if (spec_elements(t, es, &bytes) == UINT64_MAX || bytes > (uint64_t)SIZE_MAX) {
        fprintf(stderr, "%s: output %u '%s': %s has more bytes than this machine can hold\n", prog, i, E(t->name),
                dims_text(t->shape, t->rank, d1));
        return 1;
    }
    if (bytes && !(spec_contiguous(t) && bytes == extent)) {
        if (!(c_order = (unsigned char *)malloc((size_t)bytes)) || !gather(t, es, host, extent, c_order)) {
            fprintf(stderr, "%s: output %u '%s': %s\n", prog, i, E(t->name),
                    c_order ? "its strides reach past its extent" : "out of memory");
            goto done;
        }
        data = c_order;
    }
    npy_shape_text(t->shape, t->rank, shape, sizeof shape);
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    n = 10 + (size_t)snprintf(head + 10, sizeof head - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                              npy, shape);
    while ((n + 1) % 64) head[n++] = ' '; /* as numpy pads: the data 64-byte aligned */
    head[n++] = '\n';
    head[8] = (char)((n - 10) & 0xff);
    head[9] = (char)((n - 10) >> 8);
    snprintf(name, sizeof name, "out%u.npy", i);
    path = join(dir, name);
    snprintf(name, sizeof name, ".out%u.npy.XXXXXX", i);
    tmp = join(dir, name);
    if (!path || !tmp) goto done;
    if ((fd = mkstemp(tmp)) < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, E(tmp), strerror(errno));
        goto done;
    }
    ok = fchmod(fd, (mode_t)(0666 & ~mask)) == 0 && write_all(fd, head, n) &&
         (!bytes || write_all(fd, data, (size_t)bytes));
    err = errno;
    if (close(fd) != 0 && ok) ok = 0, err = errno;
    if (!ok) {
        fprintf(stderr, "%s: %s: %s\n", prog, E(tmp), err ? strerror(err) : "short write");
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, E(path), strerror(errno));
        unlink(tmp);
        goto done;
    }
    printf("wrote %s: output %u %s, %s %s\n", E(path), i, E(t->name), dtype_text(t->dtype),
           dims_text(t->shape, t->rank, d1));
    st = 0;
done:
    free(c_order);
    free(path);
    free(tmp);
    return st;
}

/* ---- the device: through the header's model calls (tb_model_device_alloc,
   tb_model_copy_to_device, tb_model_stream_create, tb_model_synchronize...),
   each of which makes the model's context (the primary context of
   --device) current for itself: no driver entry point of run's own ---- */

/* A model call that failed (r): 1, what it was for and the library's
   message printed. */
static int model_failed(tb_result r, const char *what, const tb_error *e) {
    if (r == tb_ok) return 0;
    fprintf(stderr, "%s: %s: %s\n", prog, what, e->message);
    return 1;
}

/* Device memory for a tensor of spec t: its extent, the start rounded up
   to the spec's align (at least one byte, so that every tensor has an
   address of its own); with host, the bytes copied in. */
static int device_tensor(tb_model *model, run_tensor *rt, const tb_tensor_spec *t, const char *what, uint32_t i,
                         int upload) {
    char ctx[300];
    uint64_t align = t->align > 1 ? t->align : 1;
    tb_error e;
    snprintf(ctx, sizeof ctx, "%s %u '%s' (%llu bytes)", what, i, E(t->name), (unsigned long long)rt->extent);
    if (model_failed(tb_model_device_alloc(model, (size_t)(rt->extent + align - 1 + (rt->extent == 0)), &rt->raw, &e),
                     ctx, &e)) {
        rt->raw = NULL;
        return 0;
    }
    rt->dev = (void *)(((uintptr_t)rt->raw + (uintptr_t)(align - 1)) & ~(uintptr_t)(align - 1));
    if (upload && rt->extent &&
        model_failed(tb_model_copy_to_device(model, rt->dev, rt->host, (size_t)rt->extent, NULL, &e), ctx, &e))
        return 0;
    return 1;
}

/* One run, waited for. */
static int cmp_double(const void *a, const void *b);
/* --bench's load rows, each the median of 5 after one to warm up: 'upload'
   is tb_model_load with the kernels already loaded (a table the model
   shares): the constants uploaded, the workspace allocated, the steps
   resolved; 'h2d' is one cuMemcpyHtoD of as many bytes from pageable
   memory, the baseline of the load goal, in this process. */
static void run_logger(void *user, tb_log_level level, const char *message) {
    (void)user;
    if (level <= TB_LOG_INFO) fprintf(stderr, "%s: %s\n", prog, message);
}
static const tb_options run_log = {{NULL, NULL, NULL, NULL}, run_logger, NULL};

static int bench_upload(tb_model *model, const tb_bundle *b, const char *path, const tb_model_desc *base,
                        uint64_t bytes) {
    double t[6], h[6], t0;
    tb_kernel_table *table = NULL;
    tb_model_desc d = *base;
    tb_model *m = NULL;
    tb_error e;
    void *dev = NULL;
    unsigned char *host = NULL;
    int k, st = 1;
    if (tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &table, &e) != tb_ok) return fail(&e);
    d.table = table, d.flags = 0;
    for (k = 0; k < 6; k++) {
        t0 = now();
        if (tb_model_load(&d, &m, &e) != tb_ok) {
            fail(&e);
            goto done;
        }
        t[k] = (now() - t0) * 1e3;
        tb_model_free(m);
    }
    if (bytes && (!(host = (unsigned char *)malloc((size_t)bytes)) ||
                  model_failed(tb_model_device_alloc(model, (size_t)bytes, &dev, &e), "the upload baseline", &e)))
        goto done;
    if (host) memset(host, 1, (size_t)bytes); /* pages touched, as a model's host weights are */
    for (k = 0; k < 6; k++) {
        t0 = now();
        if (bytes &&
            model_failed(tb_model_copy_to_device(model, dev, host, (size_t)bytes, NULL, &e), "the upload baseline", &e))
            goto done;
        h[k] = (now() - t0) * 1e3;
    }
    qsort(t + 1, 5, sizeof t[0], cmp_double);
    qsort(h + 1, 5, sizeof h[0], cmp_double);
    printf("upload %.3f ms\nh2d %.3f ms\nconstants %llu bytes\n", t[3], h[3], (unsigned long long)bytes);
    /* the same from a bundle read into memory (TB_READ_COPY): the constants
       are copied from its bytes, no file read on the way */
    if (path) {
        tb_bundle *mem = NULL;
        if (tb_bundle_read_file(path, NULL, TB_READ_COPY, &mem, &e) != tb_ok) {
            fail(&e);
            goto done;
        }
        d.bundle = mem;
        tb_kernel_table_free(table);
        table = NULL;
        if (tb_kernel_table_create(mem, NULL, NULL, TB_TABLE_LAZY, &table, &e) != tb_ok) {
            tb_bundle_free(mem);
            fail(&e);
            goto done;
        }
        d.table = table;
        for (k = 0; k < 6; k++) {
            t0 = now();
            if (tb_model_load(&d, &m, &e) != tb_ok) {
                tb_bundle_free(mem);
                fail(&e);
                goto done;
            }
            t[k] = (now() - t0) * 1e3;
            tb_model_free(m);
        }
        tb_kernel_table_free(table);
        table = NULL;
        tb_bundle_free(mem);
        qsort(t + 1, 5, sizeof t[0], cmp_double);
        printf("upload_memory %.3f ms\n", t[3]);
    }
    st = 0;
done:
    tb_model_device_free(model, dev);
    free(host);
    tb_kernel_table_free(table);
    return st;
}

static uint32_t run_index; /* the program run_once runs (run_opts.index) */
static int run_once(tb_model *model, const tb_program *p, const tb_tensor *in, const tb_tensor *out, void *stream) {
    tb_error e;
    if (tb_model_run_program(model, run_index, in, p->input_count, out, p->output_count, stream, &e) != tb_ok)
        return fail(&e);
    return model_failed(tb_model_synchronize(model, stream, &e), "the run", &e);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    const char *model, *out, *program;
    const char *weights;         /* --weights, or the bundle's weights.file beside MODEL */
    char weights_path[4096];
    int graph, device;
    int make_out;                /* --out is missing: made once the run has succeeded, never for a failed one */
    long bench;
    uint32_t index;              /* the program's, in the bundle */
} run_opts;

/* A bundle with external constants (2.5): its weights file, --weights or
   the file its "weights.file" property names in MODEL's directory, checked
   (every tensor, its dtype and shape) before the GPU is touched. */
static int run_weights(run_opts *o, const tb_bundle *b) {
    const char *f = tb_bundle_property(b, "weights.file");
    tb_weights *w = NULL;
    tb_error e;
    uint32_t i, n = 0;
    int given = o->weights != NULL;
    for (i = 0; i < tb_bundle_program(b)->constant_count; i++)
        n += (tb_bundle_program(b)->constants[i].flags & TB_CONSTANT_EXTERNAL) != 0;
    if (!n) return 0;
    if (!o->weights) {
        if (tb_weights_path_beside(b, o->model, o->weights_path, sizeof o->weights_path, &e) != tb_ok) {
            fprintf(stderr, "%s: %s keeps %u constants in a weights file: %s; give it with --weights FILE\n", prog,
                    E(o->model), n, e.message);
            return 1;
        }
        o->weights = o->weights_path;
    }
    if (tb_weights_open(o->weights, NULL, &w, &e) != tb_ok || tb_weights_check(w, b, 0, &e) != tb_ok) {
        tb_weights_free(w);
        fail(&e);
        if (given) fprintf(stderr, "%s: (the weights file given with --weights)\n", prog);
        else
            fprintf(stderr,
                    "%s: (the weights file the bundle names, weights.file = %s, beside it; --weights FILE gives "
                    "another)\n",
                    prog, E(f));
        return 1;
    }
    tb_weights_free(w);
    return 0;
}

/* The inputs read (host; ins: their specs at the run's sizes), on the
   device: load (the model retains --device's primary context), run, write
   the outputs, and --bench. */
static int run_on_device(const run_opts *o, const tb_bundle *b, const tb_program *p, const tb_tensor_spec *ins,
                         run_tensor *in, run_tensor *out) {
    tb_error e;
    tb_model_desc desc;
    tb_model *model = NULL;
    tb_tensor *tin = NULL, *tout = NULL;
    tb_tensor_spec *outs = NULL;
    void *stream = NULL;
    double t0, load_ms = 0, *times = NULL, median;
    int count = 0, st = 1;
    uint32_t i;
    long k;
    if (tb_driver_load(&e) != tb_ok) return fail(&e);
    if (tb_driver_device_count(&count, &e) != tb_ok) return fail(&e);
    if (o->device >= count) {
        fprintf(stderr, "%s: --device %d: this machine has %d CUDA device%s\n", prog, o->device, count,
                count == 1 ? "" : "s");
        return 1;
    }
    memset(&desc, 0, sizeof desc);
    desc.bundle = b;
    desc.device = o->device;
    desc.flags = o->graph ? TB_MODEL_GRAPH : 0u;
    desc.weights = o->weights;
    if (verbose) desc.options = &run_log; /* the load's phases */
    t0 = now();
    if (tb_model_load(&desc, &model, &e) != tb_ok) {
        model = NULL;
        fail(&e);
        goto done;
    }
    load_ms = (now() - t0) * 1e3;
    tin = (tb_tensor *)calloc((size_t)p->input_count + 1, sizeof *tin);
    tout = (tb_tensor *)calloc((size_t)p->output_count + 1, sizeof *tout);
    outs = (tb_tensor_spec *)calloc((size_t)p->output_count + 1, sizeof *outs);
    if (!tin || !tout || !outs) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    for (i = 0; i < p->input_count; i++) {
        if (!device_tensor(model, &in[i], &ins[i], "input", i, 1)) goto done;
        tin[i] = tb_tensor_for(&ins[i], in[i].dev);
    }
    /* the outputs' specs on these inputs: the program's own, or (2.6) at
       the sizes the inputs bind, refused as the run would refuse them */
    if (tb_model_output_specs(model, run_index, tin, p->input_count, outs, p->output_count, &e) != tb_ok) {
        fprintf(stderr, "%s: program '%s': %s\n", prog, E(p->name), e.message);
        goto done;
    }
    for (i = 0; i < p->output_count; i++) {
        out[i].extent = tb_tensor_spec_extent(&outs[i]);
        if (out[i].extent == UINT64_MAX || out[i].extent > (uint64_t)SIZE_MAX - 4096) {
            fprintf(stderr, "%s: output %u '%s': its extent is out of range\n", prog, i, E(outs[i].name));
            goto done;
        }
        if (!device_tensor(model, &out[i], &outs[i], "output", i, 0)) goto done;
        tout[i] = tb_tensor_for(&outs[i], out[i].dev);
    }
    /* the copies from pageable memory may still be on their way */
    if (model_failed(tb_model_synchronize(model, NULL, &e), "the inputs' copies", &e) ||
        model_failed(tb_model_stream_create(model, &stream, &e), "the run's stream", &e))
        goto done;
    if (run_once(model, p, tin, tout, stream)) goto done;
    if (o->make_out && mkdirs(o->out) != 0) {
        fprintf(stderr, "%s: --out %s: %s\n", prog, E(o->out), strerror(errno));
        goto done;
    }
    for (i = 0; i < p->output_count; i++) {
        if (!(out[i].host = (unsigned char *)malloc((size_t)out[i].extent + 1))) {
            fprintf(stderr, "%s: output %u '%s': cannot allocate %llu bytes\n", prog, i, E(outs[i].name),
                    (unsigned long long)out[i].extent);
            goto done;
        }
        if ((out[i].extent && model_failed(tb_model_copy_to_host(model, out[i].host, out[i].dev, (size_t)out[i].extent,
                                                                 NULL, &e), "the outputs", &e)) ||
            write_output(o->out, i, &outs[i], out[i].host, out[i].extent))
            goto done;
        free(out[i].host);
        out[i].host = NULL;
    }
    if (o->bench) {
        if (!(times = (double *)malloc((size_t)o->bench * sizeof *times))) {
            fprintf(stderr, "%s: out of memory\n", prog);
            goto done;
        }
        for (k = 0; k < BENCH_WARMUP; k++)
            if (run_once(model, p, tin, tout, stream)) goto done;
        for (k = 0; k < o->bench; k++) {
            t0 = now();
            if (run_once(model, p, tin, tout, stream)) goto done;
            times[k] = (now() - t0) * 1e6;
        }
        qsort(times, (size_t)o->bench, sizeof *times, cmp_double);
        median = o->bench % 2 ? times[o->bench / 2] : (times[o->bench / 2 - 1] + times[o->bench / 2]) / 2;
        printf("load %.3f ms\nmedian %.3f us\nmin %.3f us\nmax %.3f us\nruns %ld\n", load_ms, median, times[0],
               times[o->bench - 1], o->bench);
        if (bench_upload(model, b, o->model, &desc, tb_model_constant_bytes(model))) goto done;
    }
    st = 0;
done:
    if (stream) tb_model_synchronize(model, stream, &e); /* nothing in flight when the memory goes */
    for (i = 0; i < p->input_count; i++) /* (no model: nothing was allocated) */
        tb_model_device_free(model, in[i].raw);
    for (i = 0; i < p->output_count; i++) {
        tb_model_device_free(model, out[i].raw);
        free(out[i].host);
        out[i].host = NULL;
    }
    tb_model_stream_free(model, stream);
    tb_model_free(model);
    free(tin);
    free(tout);
    free(outs);
    free(times);
    return st;
}

/* (2.6) The input specs of a program with symbols at the sizes of the
   .npy files (f: their headers read): the symbols bound from the files'
   shapes as a run binds them (tb_program_bind: a size outside its range
   refused with the runner's message), then each input's size and stride
   expressions evaluated at those values (tb_expr_eval), as the run's
   instance holds them; read_input checks each file against them. (The
   outputs' specs come from the model: tb_model_output_specs.) 0, or 1
   with the cause printed. */
static int at_input_sizes(const tb_program *p, const npy_file *f, tb_tensor_spec *specs) {
    tb_tensor *t = (tb_tensor *)calloc((size_t)p->input_count + 1, sizeof *t);
    int64_t values[TB_MAX_PROGRAM_SYMBOLS];
    tb_error e;
    uint32_t i, d;
    int st = 1;
    if (!t) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    for (i = 0; i < p->input_count; i++) {
        t[i].dtype = p->inputs[i].dtype, t[i].rank = f[i].h.rank;
        for (d = 0; d < f[i].h.rank && d < TB_MAX_TENSOR_DIMS; d++) t[i].shape[d] = f[i].h.shape[d];
    }
    if (tb_program_bind(p, t, p->input_count, values, &e) != tb_ok) {
        fprintf(stderr, "%s: program '%s': %s\n", prog, E(p->name), e.message);
        goto done;
    }
    for (i = 0; i < p->expr_count; i++) {
        const tb_program_expr *x = &p->exprs[i];
        int size = x->field == TB_FIELD_INPUT_SIZE;
        int64_t v;
        if ((!size && x->field != TB_FIELD_INPUT_STRIDE) || x->index >= p->input_count || x->sub >= TB_MAX_TENSOR_DIMS)
            continue; /* (a reader refuses the last two) */
        if (tb_expr_eval(x->ops, x->op_count, values, p->symbol_count, &v, &e) != tb_ok) {
            fprintf(stderr, "%s: program '%s': input %u '%s' %s %u: %s\n", prog, E(p->name), x->index,
                    E(p->inputs[x->index].name), size ? "dimension" : "stride", x->sub, e.message);
            goto done;
        }
        if (size) specs[x->index].shape[x->sub] = v;
        else specs[x->index].strides[x->sub] = v;
    }
    st = 0;
done:
    free(t);
    return st;
}

/* The inputs from the .npy files into in, each file opened and read once;
   specs: the inputs' specs the run uses, the program's own or (2.6) at
   the files' sizes. Without symbols each file is checked against its
   input as it is read; with them every header is read first, the sizes
   bound (at_input_sizes), then each file checked and read. 0, or 1 with
   the cause printed. */
static int read_inputs(const tb_program *p, const char **files, tb_tensor_spec *specs, run_tensor *in) {
    npy_file *f = (npy_file *)calloc((size_t)p->input_count + 1, sizeof *f);
    uint32_t i;
    int st = 1;
    if (!f) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    for (i = 0; i < p->input_count; i++) f[i].fd = -1;
    for (i = 0; i < p->input_count; i++) {
        specs[i] = p->inputs[i];
        if (npy_open(files[i], i, &p->inputs[i], &f[i])) goto done;
        if (p->symbol_count) continue; /* read once every size is known */
        if (read_input(files[i], i, &specs[i], &f[i], &in[i])) goto done;
        close(f[i].fd);
        f[i].fd = -1;
    }
    if (p->symbol_count && at_input_sizes(p, f, specs)) goto done;
    for (i = 0; p->symbol_count && i < p->input_count; i++)
        if (read_input(files[i], i, &specs[i], &f[i], &in[i])) goto done;
    st = 0;
done:
    for (i = 0; i < p->input_count; i++)
        if (f[i].fd >= 0) close(f[i].fd);
    free(f);
    return st;
}

/* MODEL's program, its inputs from the .npy files: all checked, then run. */
static int run_model(run_opts *o, const char **files, uint32_t nfiles) {
    tb_bundle *b;
    const tb_program *p;
    run_tensor *in = NULL, *out = NULL;
    tb_tensor_spec *specs = NULL;
    struct stat st;
    char want[300];
    uint32_t i;
    int status = 1;
    if (open_bundle(o->model, 0, &b)) return 1;
    if (!(p = tb_bundle_program(b))) {
        fprintf(stderr,
                "%s: %s holds no program (a whole compiled model, format 2.3): nothing to run ('tbundle list %s' "
                "shows what it holds)\n",
                prog, E(o->model), E(o->model));
        goto done;
    }
    run_index = 0;
    if (o->program) {
        for (i = 0; i < tb_bundle_program_count(b) && strcmp(tb_bundle_program_at(b, i)->name, o->program); i++) {}
        if (i == tb_bundle_program_count(b)) {
            fprintf(stderr, "%s: %s has no program '%s'; it has:", prog, E(o->model), E(o->program));
            for (i = 0; i < tb_bundle_program_count(b) && i < 32; i++)
                fprintf(stderr, " %s", E(tb_bundle_program_at(b, i)->name));
            fprintf(stderr, "\n");
            goto done;
        }
        p = tb_bundle_program_at(b, i), run_index = i;
    } else if (tb_bundle_program_count(b) > 1) {
        fprintf(stderr, "%s: %s holds %u programs: name one with --program (", prog, E(o->model),
                tb_bundle_program_count(b));
        for (i = 0; i < tb_bundle_program_count(b) && i < 32; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", E(tb_bundle_program_at(b, i)->name));
        fprintf(stderr, ")\n");
        goto done;
    }
    if (run_weights(o, b)) goto done;
    if (nfiles != p->input_count) {
        fprintf(stderr, "%s: %s's program takes %u input%s, got %u --in\n", prog, E(o->model), p->input_count,
                p->input_count == 1 ? "" : "s", nfiles);
        for (i = nfiles; i < p->input_count && i < nfiles + 16; i++)
            fprintf(stderr, "%s: missing input %u '%s': %s\n", prog, i, E(p->inputs[i].name),
                    spec_text(&p->inputs[i], want, sizeof want));
        if (p->input_count > nfiles + 16) fprintf(stderr, "%s: and %u more\n", prog, p->input_count - nfiles - 16);
        if (nfiles > p->input_count)
            fprintf(stderr, "%s: the first one too many: --in %s\n", prog, E(files[p->input_count]));
        goto done;
    }
    /* a missing --out is made (as unpack makes its cache), but only once the
       run has succeeded: a failed run leaves nothing behind */
    if (stat(o->out, &st) != 0) {
        if (errno != ENOENT) {
            fprintf(stderr, "%s: --out %s: %s\n", prog, E(o->out), strerror(errno));
            goto done;
        }
        o->make_out = 1;
    } else if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: --out %s: not a directory\n", prog, E(o->out));
        goto done;
    }
    in = (run_tensor *)calloc((size_t)p->input_count + 1, sizeof *in);
    out = (run_tensor *)calloc((size_t)p->output_count + 1, sizeof *out);
    specs = (tb_tensor_spec *)calloc((size_t)p->input_count + 1, sizeof *specs);
    if (!in || !out || !specs) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    if (read_inputs(p, files, specs, in)) goto done;
    status = run_on_device(o, b, p, specs, in, out);
done:
    if (in)
        for (i = 0; i < p->input_count; i++) free(in[i].host);
    free(in);
    free(out);
    free(specs);
    tb_bundle_free(b);
    return status;
}

/* N of --bench and --device: an integer from lo to hi; 0 (the usage error
   printed) if not */
static int parse_count(const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || !(*s >= '0' && *s <= '9')) {
        bad_usage(usage_run,
                  lo ? "%s needs a positive integer, got '%s'" : "%s needs a device number, 0 or more, got '%s'", opt,
                  E(s));
        return 0;
    }
    if (v > hi) {
        bad_usage(usage_run, "%s takes at most %ld, got '%s'", opt, hi, E(s));
        return 0;
    }
    *out = v;
    return 1;
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    const char **files = (const char **)calloc((size_t)argc + 1, sizeof *files);
    uint32_t nfiles = 0;
    long v;
    int i, dashes = 0, st = 2;
    memset(&o, 0, sizeof o);
    o.out = ".";
    if (!files) return 1;
    for (i = 0; i < argc; i++) {
        const char *a = argv[i];
        int opt = is_option(a, &dashes);
        if (opt < 0) continue;
        if (!opt) {
            if (o.model) {
                st = bad_usage(usage_run,
                               "unexpected argument '%s' for run (it takes one MODEL; inputs come with --in)", E(a));
                goto done;
            }
            o.model = a;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            st = usage(usage_run, 0);
            goto done;
        } else if (!strcmp(a, "--in") || !strcmp(a, "--out") || !strcmp(a, "--bench") || !strcmp(a, "--device") ||
                   !strcmp(a, "--program") || !strcmp(a, "--weights")) {
            if (missing_value(a, i, argc, usage_run)) goto done;
            if (!strcmp(a, "--in")) files[nfiles++] = argv[++i];
            else if (!strcmp(a, "--weights")) o.weights = argv[++i];
            else if (!strcmp(a, "--program")) o.program = argv[++i];
            else if (!strcmp(a, "--out")) o.out = argv[++i];
            else if (!strcmp(a, "--bench")) {
                if (!parse_count(a, argv[++i], 1, BENCH_MAX, &o.bench)) goto done;
            } else {
                if (!parse_count(a, argv[++i], 0, INT_MAX, &v)) goto done;
                o.device = (int)v;
            }
        } else if (!strcmp(a, "--graph")) {
            o.graph = 1;
        } else if (!strcmp(a, "-v")) {
            verbose = 1;
        } else {
            st = bad_usage(usage_run, "unknown option '%s' for run", E(a));
            goto done;
        }
    }
    if (!o.model) {
        st = bad_usage(usage_run, "run needs MODEL");
        goto done;
    }
    st = run_model(&o, files, nfiles);
    if (fflush(stdout) != 0 || ferror(stdout)) st = 1;
done:
    free(files);
    return st;
}
