/* run_model: a model exported by the Python companion's export_model, run
   from C with nothing but triton_bundle.h (no cuda.h, no CUDA toolkit):
   load the bundle, make the inputs, run, print the first values of each
   output. It is the README's "Run a model from C" as a whole program.

       run_model MODEL [IN.npy]... [--expect REF.npy]... [--weights FILE] [--graph]

   Each IN.npy is an input, in the program's order, of exactly its dtype
   and size (C order); without them the inputs are made here (0.01 * i for
   floats, i % 7 for integers). Each --expect REF.npy is an output's
   expected bytes: the run must give exactly those, or run_model says
   where they differ and exits 1. bfloat16 and float8 .npy files hold
   their bit patterns ('<u2', '|u1'), as tbundle run writes them. A bundle
   exported with its weights in a safetensors file reads them from
   --weights FILE, else from the file its property weights.file names,
   beside MODEL. Every file is checked before the driver is loaded.

   Build: cc -std=c99 -o run_model run_model.c -ldl -lpthread */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "triton_bundle.h" /* -I the repository root, or the installed header (pkg-config --cflags triton_bundle) */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The data of an .npy file holding `bytes` bytes of dtype `dtype`, or NULL
   with the reason printed (a small reader: C order, the descr checked). */
static unsigned char *read_npy(const char *path, uint32_t dtype, uint64_t bytes) {
    FILE *f = fopen(path, "rb");
    unsigned char head[12], *data = NULL;
    char *text = NULL;
    size_t hlen;
    long end;
    if (!f) {
        perror(path);
        return NULL;
    }
    if (fread(head, 1, 10, f) != 10 || memcmp(head, "\x93NUMPY", 6)) {
        fprintf(stderr, "%s: not an .npy file\n", path);
        goto done;
    }
    if (head[6] == 1) hlen = (size_t)head[8] | (size_t)head[9] << 8;
    else if (fread(head + 10, 1, 2, f) == 2)
        hlen = (size_t)head[8] | (size_t)head[9] << 8 | (size_t)head[10] << 16 | (size_t)head[11] << 24;
    else goto done;
    if (!(text = (char *)calloc(hlen + 1, 1)) || fread(text, 1, hlen, f) != hlen) goto done;
    if (!strstr(text, tb_dtype_npy(dtype)) || strstr(text, "'fortran_order': True")) {
        const char *d = strstr(text, "'descr': '");
        int n = 0;
        if (d) d += 10, n = (int)strcspn(d, "'");
        fprintf(stderr, "%s: holds %.*s%s; the tensor is %s ('%s', C order)\n", path, d ? n : 1, d ? d : "?",
                strstr(text, "'fortran_order': True") ? " in Fortran order" : "", tb_dtype_name(dtype),
                tb_dtype_npy(dtype));
        goto done;
    }
    if (fseek(f, 0, SEEK_END) || (end = ftell(f)) < 0 ||
        (uint64_t)end - (10 + (head[6] == 1 ? 0 : 2) + hlen) != bytes) {
        fprintf(stderr, "%s: its data is not the %llu bytes the tensor holds\n", path, (unsigned long long)bytes);
        goto done;
    }
    if (fseek(f, (long)(end - (long)bytes), SEEK_SET) || !(data = (unsigned char *)malloc(bytes ? bytes : 1)) ||
        fread(data, 1, bytes, f) != bytes) {
        free(data);
        data = NULL;
        fprintf(stderr, "%s: cannot read its data\n", path);
    }
done:
    free(text);
    fclose(f);
    return data;
}

/* Element i of a tensor's bytes as a double (integers exactly). */
static double element(const unsigned char *p, uint32_t dtype, uint64_t i) {
    uint32_t n = tb_dtype_size(dtype);
    union { float f; double d; int8_t i8; int16_t i16; int32_t i32; int64_t i64; uint8_t u8; uint16_t u16;
            uint32_t u32; uint64_t u64; } v;
    memcpy(&v, p + i * n, n);
    switch (dtype) {
    case TB_DTYPE_FLOAT32: return v.f;
    case TB_DTYPE_FLOAT64: return v.d;
    case TB_DTYPE_FLOAT16: return tb_fp16_to_double(v.u16);
    case TB_DTYPE_BFLOAT16: return tb_bf16_to_double(v.u16);
    case TB_DTYPE_INT8: return v.i8;
    case TB_DTYPE_INT16: return v.i16;
    case TB_DTYPE_INT32: return v.i32;
    case TB_DTYPE_INT64: return (double)v.i64;
    case TB_DTYPE_UINT16: return v.u16;
    case TB_DTYPE_UINT32: return v.u32;
    case TB_DTYPE_UINT64: return (double)v.u64;
    default: return v.u8; /* uint8, bool, float8 (its bits) */
    }
}

/* Made inputs: 0.01 * i for floats, i % 7 for integers. */
static void make_input(unsigned char *p, uint32_t dtype, uint64_t count) {
    uint32_t n = tb_dtype_size(dtype);
    uint64_t i;
    for (i = 0; i < count; i++) {
        union { float f; double d; uint16_t u16; int64_t i64; } v;
        memset(&v, 0, sizeof v);
        if (dtype == TB_DTYPE_FLOAT32) v.f = 0.01f * (float)i;
        else if (dtype == TB_DTYPE_FLOAT64) v.d = 0.01 * (double)i;
        else if (dtype == TB_DTYPE_FLOAT16) v.u16 = tb_fp16_from_double(0.01 * (double)i);
        else if (dtype == TB_DTYPE_BFLOAT16) v.u16 = tb_bf16_from_double(0.01 * (double)i);
        else v.i64 = (int64_t)(i % 7); /* little-endian: the low bytes for any width */
        memcpy(p + i * n, &v, n);
    }
}

static const char usage[] = "usage: run_model MODEL [IN.npy]... [--expect REF.npy]... [--weights FILE] [--graph]\n";

int main(int argc, char **argv) {
    const char *path = NULL, *ins[64], *refs[64], *weights = NULL;
    char weights_path[4096];
    const tb_program *p;
    uint32_t nin = 0, nref = 0, i;
    int a, graph = 0, status = 1;
    tb_bundle *b = NULL;
    tb_model *m = NULL;
    tb_model_desc d;
    tb_error e;
    void *stream = NULL, *dev[128];
    unsigned char *host[128];
    tb_tensor tin[64], tout[64];
    memset(dev, 0, sizeof dev);
    memset(host, 0, sizeof host);
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--graph")) graph = 1;
        else if (!strcmp(argv[a], "--expect") && a + 1 < argc && nref < 64) refs[nref++] = argv[++a];
        else if (!strcmp(argv[a], "--weights") && a + 1 < argc) weights = argv[++a];
        else if (argv[a][0] == '-' || (path && nin == 64)) {
            fprintf(stderr, "%s", usage);
            return 2;
        } else if (!path) path = argv[a];
        else ins[nin++] = argv[a];
    }
    if (!path) {
        fprintf(stderr, "%s", usage);
        return 2;
    }
    /* 1. The bundle, its program and the inputs' files, all checked before
       the driver is touched (a bad input is named as such, with or
       without a GPU) */
    if (tb_bundle_read_file(path, NULL, 0, &b, &e) != tb_ok) goto fail;
    p = tb_bundle_program(b);
    if (!p) {
        fprintf(stderr, "run_model: %s holds no program (export_model writes one)\n", path);
        goto done;
    }
    if (p->input_count > 64 || p->output_count > 64 || (nin && nin != p->input_count) || nref > p->output_count) {
        fprintf(stderr,
                "run_model: the model takes %u inputs and gives %u outputs; %u inputs and %u references given\n",
                p->input_count, p->output_count, nin, nref);
        goto done;
    }
    for (i = 0; i < p->input_count + p->output_count; i++) {
        int is_in = i < p->input_count;
        const tb_tensor_spec *s = is_in ? &p->inputs[i] : &p->outputs[i - p->input_count];
        uint64_t bytes = tb_tensor_spec_extent(s);
        if (is_in && nin) host[i] = read_npy(ins[i], s->dtype, bytes);
        else host[i] = (unsigned char *)calloc(bytes ? bytes : 1, 1);
        if (!host[i]) goto done;
        if (is_in && !nin) make_input(host[i], s->dtype, bytes / tb_dtype_size(s->dtype));
    }
    /* a bundle whose weights are a safetensors file (2.5): --weights, else
       the file its property weights.file names, beside the bundle */
    if (!weights && tb_weights_path_beside(b, path, weights_path, sizeof weights_path, &e) == tb_ok)
        weights = weights_path; /* (none named: a bundle with external constants is refused by the load, naming them) */
    /* 2. The model loaded: weights uploaded once, kernels loaded, in the
       device's primary context (the context rule: every tb_model_* call
       below makes it current for itself) */
    memset(&d, 0, sizeof d);
    d.bundle = b, d.flags = graph ? TB_MODEL_GRAPH : 0;
    d.weights = weights; /* (read only where the bundle has external constants) */
    if (tb_model_load(&d, &m, &e) != tb_ok) goto fail;
    /* 3. Device memory for each tensor, the inputs copied in, a stream */
    for (i = 0; i < tb_model_input_count(m) + tb_model_output_count(m); i++) {
        int is_in = i < tb_model_input_count(m);
        const tb_tensor_spec *s = is_in ? tb_model_input(m, i) : tb_model_output(m, i - tb_model_input_count(m));
        uint64_t bytes = tb_tensor_spec_extent(s);
        if (tb_model_device_alloc(m, (size_t)bytes, &dev[i], &e) != tb_ok) goto fail;
        if (is_in && tb_model_copy_to_device(m, dev[i], host[i], (size_t)bytes, NULL, &e) != tb_ok) goto fail;
        if (is_in) tin[i] = tb_tensor_for(s, dev[i]);
        else tout[i - tb_model_input_count(m)] = tb_tensor_for(s, dev[i]);
    }
    if (tb_model_stream_create(m, &stream, &e) != tb_ok) goto fail;
    /* 4. Run, then the outputs back */
    if (tb_model_run(m, tin, tb_model_input_count(m), tout, tb_model_output_count(m), stream, &e) != tb_ok) goto fail;
    status = 0;
    for (i = 0; i < tb_model_output_count(m); i++) {
        const tb_tensor_spec *s = tb_model_output(m, i);
        uint32_t k = tb_model_input_count(m) + i, r;
        uint64_t bytes = tb_tensor_spec_extent(s), count = bytes / tb_dtype_size(s->dtype), j;
        if (tb_model_copy_to_host(m, host[k], dev[k], (size_t)bytes, stream, &e) != tb_ok ||
            tb_model_synchronize(m, stream, &e) != tb_ok)
            goto fail;
        printf("output %u %s %s [", i, s->name, tb_dtype_name(s->dtype));
        for (r = 0; r < s->rank; r++) printf("%s%lld", r ? ", " : "", (long long)s->shape[r]);
        printf("]:");
        for (j = 0; j < count && j < 8; j++) printf(" %.6g", element(host[k], s->dtype, j));
        printf("%s\n", count > 8 ? " ..." : "");
        if (i < nref) {
            unsigned char *want = read_npy(refs[i], s->dtype, bytes);
            if (!want) {
                status = 1;
                continue;
            }
            for (j = 0; j < bytes && want[j] == host[k][j]; j++) {}
            if (j < bytes) {
                printf("output %u differs from %s from byte %llu (element %llu: %.9g, expected %.9g)\n", i, refs[i],
                       (unsigned long long)j, (unsigned long long)(j / tb_dtype_size(s->dtype)),
                       element(host[k], s->dtype, j / tb_dtype_size(s->dtype)),
                       element(want, s->dtype, j / tb_dtype_size(s->dtype)));
                status = 1;
            } else {
                printf("output %u equals %s, bit for bit\n", i, refs[i]);
            }
            free(want);
        }
    }
    goto done;
fail:
    fprintf(stderr, "run_model: %s\n", e.message);
    status = 1;
done:
    if (stream) tb_model_synchronize(m, stream, &e);
    for (i = 0; i < 128; i++) {
        if (m) tb_model_device_free(m, dev[i]);
        free(host[i]);
    }
    tb_model_stream_free(m, stream);
    tb_model_free(m);
    tb_bundle_free(b);
    return status;
}
