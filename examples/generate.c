/* generate: greedy text generation from C with nothing but triton_bundle.h
   (no cuda.h, no Python): a bundle's prefill and decode programs over one
   KV cache, as the Python companion's export_programs writes them. Ids in,
   ids out (no tokenizer).

       generate MODEL --prompt-ids 15496,11,995 [--max-new N] [--eos ID] [--weights FILE] [--graph] [--bench]
                [--serial-load]

   The bundle holds (README, "Generate text from C"):
     prefill      (2.6) one program whose length varies: input "ids" int64
                  [1, T], T a symbol of the program (its range: the
                  prompt lengths it takes); output 0 the logits [1, T, V]
                  (float32, float16 or bfloat16). A prompt shorter than
                  the range's minimum is right-padded with 0 to it
     prefill_<T>  or, without it, one per prompt length T (a bucket): the
                  same, the prompt right-padded with 0 to the smallest T
                  that holds it
     decode       inputs "ids" int64 [1, 1] (the last token) and "pos"
                  int64 [1] (its position); output 0 the logits [1, 1, V],
                  and, optionally, "next_token" int64 [1, 1]: their argmax,
                  which saves copying the logits out each token
     generate.max_seq  a property: the positions the KV cache holds
   The prompt runs at its own length (or in its bucket); the first new
   token is the argmax of the logits at the prompt's last position; each
   further one is the decode step's. Generation stops after --max-new
   tokens (default: until the cache is full), at --eos (default: the
   property generate.eos, if any) or at the cache's end; a --max-new past
   the cache's end is refused before anything runs, as an empty prompt or
   one longer than the prefill takes is. It prints the new ids, comma
   separated (the first as soon as it is known), and the timings; --bench
   adds the time to first token from the start of the process against one
   pageable copy of the weights, the load's phases (tb_model_load_times)
   and the decode step's median. --serial-load loads the kernels before
   the weights' upload instead of beside it (TB_MODEL_SERIAL_LOAD), to
   compare.
   With next_token, the host does not wait for each token: the steps are
   queued on the stream (the token copied on the device to the next step's
   ids) and their tokens read back once per GEN_EOS_CHUNK steps when there
   is an end-of-sequence id (steps queued past it only write cache
   positions that were free), else once at the end; a token's time is then
   its chunk's average, and --bench's decode_median the median of those
   (with no end-of-sequence id, one chunk: the mean over the steps).

   Build: cc -std=c99 -o generate generate.c -ldl -lpthread
   (tbundle generate is this program: built with -DGENERATE_NO_MAIN, it is
   a translation unit of tbundle, which links it with tbundle.c, the file
   that holds the header's implementation.) */
#ifdef GENERATE_NO_MAIN
#include "tbundle_cli.h" /* generate_main and gen_usage_line, as tbundle.c calls them */
#else
#define TRITON_BUNDLE_IMPLEMENTATION
#endif
#include "triton_bundle.h" /* -I the repository root, or the installed header (pkg-config --cflags triton_bundle) */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GEN_MAX_PROMPT 1048576
/* decode steps queued between two looks for --eos (argmax on the device) */
#define GEN_EOS_CHUNK 16
/* the most positions a cache may hold (generate.max_seq): the step counts are 32-bit */
#define GEN_MAX_SEQ ((int64_t)1 << 30)

static double gen_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Ends the line of ids that the first token began (printed early), before
   a message on standard error: the two streams may share one file. */
static void gen_end_line(int *printed) {
    if (!*printed) return;
    putchar('\n');
    fflush(stdout);
    *printed = 0;
}

static int gen_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The index of the largest of n logits of dtype dt at p, every stride
   elements: the first one where several are equal, the first NaN if any
   (as torch.argmax). */
static int64_t gen_argmax(const unsigned char *p, uint32_t dt, uint64_t n, uint64_t stride) {
    uint64_t i, best = 0;
    double bv = -INFINITY;
    for (i = 0; i < n; i++) {
        const unsigned char *q = p + i * stride * tb_dtype_size(dt);
        double v;
        uint16_t h;
        float f;
        if (dt == TB_DTYPE_FLOAT32) memcpy(&f, q, 4), v = f;
        else memcpy(&h, q, 2), v = dt == TB_DTYPE_FLOAT16 ? tb_fp16_to_double(h) : tb_bf16_to_double(h);
        if (v != v) return (int64_t)i;
        if (i == 0 || v > bv) bv = v, best = i;
    }
    return (int64_t)best;
}

/* The input of program p named `name`, else its input `fallback`. */
static int gen_input(const tb_program *p, const char *name, uint32_t fallback) {
    uint32_t i;
    for (i = 0; i < p->input_count; i++)
        if (!strcmp(p->inputs[i].name, name)) return (int)i;
    return fallback < p->input_count ? (int)fallback : -1;
}

const char gen_usage_line[] =
    "MODEL --prompt-ids ID,ID,... [--max-new N] [--eos ID] [--weights FILE] [--graph] [--bench] [--serial-load]";
static int gen_usage(const char *prog, int status) {
    fprintf(status ? stderr : stdout,
            "usage: %s %s\n"
            "  Greedy generation with MODEL's prefill program (its length varying, or one\n"
            "  prefill_<T> per prompt length) and decode program over one KV cache:\n"
            "  prints the new token ids, comma separated, and the timings.\n"
            "  --prompt-ids  the prompt, 1 or more token ids, each under the logits' vocabulary\n"
            "  --max-new N   at most N new tokens (default: until the cache is full)\n"
            "  --eos ID      stop after this id (default: the bundle's generate.eos, if any)\n"
            "  --weights FILE  the safetensors file of a bundle exported with weights outside it\n"
            "                (default: the file its property weights.file names, beside MODEL)\n"
            "  --graph       replay each program as a CUDA graph\n"
            "  --bench       also print the time to first token from the process's start, one\n"
            "                pageable copy of the weights, the load's phases, and the decode\n"
            "                step's median (with next_token, steps are timed by chunk: see\n"
            "                generate.c)\n"
            "  --serial-load load the kernels, then upload the weights (default: both at once)\n", prog,
            gen_usage_line);
    return status;
}

/* A signed 64-bit integer, all of s; 0 if not. */
static int gen_int(const char *s, int64_t *out) {
    char *end;
    long long v;
    if (!*s) return 0;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (*end || errno) return 0;
    *out = (int64_t)v;
    return 1;
}

typedef struct gen_buf {
    void *dev;
    uint64_t bytes;
} gen_buf;

int generate_main(int argc, char **argv, const char *prog, double t_start) {
    const char *path = NULL, *ids_text = NULL, *eos_text = NULL, *weights = NULL;
    char weights_path[4096];
    int64_t *prompt = NULL, max_new = -1, eos = 0, max_seq = 0, tok, *out = NULL;
    uint32_t nprompt = 0, i, np, bucket = UINT32_MAX, decode = UINT32_MAX, count = 0;
    uint64_t bucket_len = 0, largest = 0;
    int64_t dyn_min = 0, dyn_max = 0;
    int a, graph = 0, bench = 0, serial = 0, has_eos = 0, status = 1, ids_in, pos_in, next_out = -1, dynamic = 0;
    int printed = 0; /* the first id printed (and flushed) as soon as it is known */
    tb_bundle *b = NULL;
    tb_model *m = NULL;
    tb_model_desc d;
    tb_error e;
    void *stream = NULL;
    gen_buf pin, pout, dids, dpos, dout, dnext;
    unsigned char *logits = NULL;
    double t_load = 0, t_prefill = 0, t_first = 0, t_first_wall = 0, t_load0 = 0, *step_s = NULL;
    const tb_program *pp, *pd;
    const char *v;
    memset(&pin, 0, sizeof pin), memset(&pout, 0, sizeof pout), memset(&dids, 0, sizeof dids);
    memset(&dpos, 0, sizeof dpos), memset(&dout, 0, sizeof dout), memset(&dnext, 0, sizeof dnext);
    for (a = 1; a < argc; a++) {
        const char *x = argv[a];
        if (!strcmp(x, "--help") || !strcmp(x, "-h")) return gen_usage(prog, 0);
        if (!strcmp(x, "--graph")) graph = 1;
        else if (!strcmp(x, "--bench")) bench = 1;
        else if (!strcmp(x, "--serial-load")) serial = 1;
        else if (!strcmp(x, "--prompt-ids") || !strcmp(x, "--max-new") || !strcmp(x, "--eos") ||
                 !strcmp(x, "--weights")) {
            if (a + 1 >= argc) {
                fprintf(stderr, "%s: %s needs a value\n", prog, x);
                return gen_usage(prog, 2);
            }
            if (!strcmp(x, "--prompt-ids")) ids_text = argv[++a];
            else if (!strcmp(x, "--eos")) eos_text = argv[++a];
            else if (!strcmp(x, "--weights")) weights = argv[++a];
            else if (!gen_int(argv[++a], &max_new) || max_new < 1) {
                fprintf(stderr, "%s: --max-new needs a positive integer, got '%s'\n", prog, argv[a]);
                return gen_usage(prog, 2);
            }
        } else if (x[0] == '-') {
            fprintf(stderr, "%s: unknown option '%s' for generate\n", prog, x);
            return gen_usage(prog, 2);
        } else if (!path) {
            path = x;
        } else {
            fprintf(stderr, "%s: unexpected argument '%s' (generate takes one MODEL)\n", prog, x);
            return gen_usage(prog, 2);
        }
    }
    if (!path || !ids_text) {
        fprintf(stderr, "%s: generate needs MODEL and --prompt-ids\n", prog);
        return gen_usage(prog, 2);
    }
    if (eos_text && !(has_eos = gen_int(eos_text, &eos))) {
        fprintf(stderr, "%s: --eos needs an integer id, got '%s'\n", prog, eos_text);
        return gen_usage(prog, 2);
    }
    /* the prompt: ids separated by commas */
    {
        const char *s = ids_text;
        size_t cap = 1;
        for (; *s; s++) cap += *s == ',';
        if (cap > GEN_MAX_PROMPT || !(prompt = (int64_t *)malloc(cap * sizeof *prompt))) {
            fprintf(stderr, "%s: --prompt-ids: too many ids\n", prog);
            return 2;
        }
        for (s = ids_text; *ids_text && s;) {
            char item[32];
            const char *c = strchr(s, ',');
            size_t n = c ? (size_t)(c - s) : strlen(s);
            if (n == 0 || n >= sizeof item) break;
            memcpy(item, s, n), item[n] = 0;
            if (!gen_int(item, &prompt[nprompt]) || prompt[nprompt] < 0) break;
            nprompt++;
            s = c ? c + 1 : NULL;
        }
        if (!*ids_text || s) {
            fprintf(stderr,
                    "%s: --prompt-ids takes ids 0 or more separated by commas, such as 15496,11,995; got '%s'%s\n",
                    prog, ids_text, *ids_text ? "" : " (an empty prompt)");
            free(prompt);
            return 2;
        }
    }
    /* the bundle: its prefill (one of symbols, or buckets), decode and
       cache length, all checked before the GPU is touched */
    if (tb_bundle_read_file(path, NULL, 0, &b, &e) != tb_ok) goto fail;
    np = tb_bundle_program_count(b);
    for (i = 0; i < np; i++) {
        const tb_program *p = tb_bundle_program_at(b, i);
        int64_t t;
        if (!strcmp(p->name, "decode")) decode = i;
        if (!strcmp(p->name, "prefill") && p->symbol_count == 1 && p->input_count == 1 && p->inputs[0].rank == 2) {
            /* (2.6) its length is the symbol of ids' dimension 1: the
               prompt's own, or the range's minimum for a shorter one */
            const tb_program_symbol *y = &p->symbols[0];
            dyn_min = y->min, dyn_max = y->max;
            largest = (uint64_t)y->max, dynamic = 1;
            if ((int64_t)nprompt <= y->max) {
                bucket = i, bucket_len = (uint64_t)(nprompt < y->min ? y->min : nprompt);
                if (bucket_len % (uint64_t)y->divisor)
                    bucket_len += (uint64_t)y->divisor - bucket_len % (uint64_t)y->divisor;
                if (bucket_len > (uint64_t)y->max) bucket = UINT32_MAX;
            }
            continue;
        }
        if (dynamic || strncmp(p->name, "prefill_", 8) || !gen_int(p->name + 8, &t) || t < 1) continue;
        if ((uint64_t)t > largest) largest = (uint64_t)t;
        if ((uint64_t)t >= nprompt && (bucket == UINT32_MAX || (uint64_t)t < bucket_len))
            bucket = i, bucket_len = (uint64_t)t;
    }
    if (!largest || decode == UINT32_MAX) {
        fprintf(stderr, "%s: %s has no %s program: generation needs a prefill (or prefill_<T> programs) and decode "
                "(export_programs)\n", prog, path, largest ? "decode" : "prefill");
        goto done;
    }
    if (bucket == UINT32_MAX) {
        if (dynamic)
            fprintf(stderr, "%s: the prompt has %u tokens, and the prefill takes %lld to %lld\n", prog, nprompt,
                    (long long)dyn_min, (long long)dyn_max);
        else
            fprintf(stderr, "%s: the prompt has %u tokens, and the largest prefill bucket holds %llu\n", prog, nprompt,
                    (unsigned long long)largest);
        goto done;
    }
    if (!(v = tb_bundle_property(b, "generate.max_seq")) || !gen_int(v, &max_seq) || max_seq < 1) {
        fprintf(stderr, "%s: %s does not say how many positions its cache holds (the property generate.max_seq)\n",
                prog, path);
        goto done;
    }
    if (!has_eos && (v = tb_bundle_property(b, "generate.eos")) && gen_int(v, &eos)) has_eos = 1;
    pp = tb_bundle_program_at(b, bucket), pd = tb_bundle_program_at(b, decode);
    ids_in = gen_input(pd, "ids", 0), pos_in = gen_input(pd, "pos", 1);
    for (i = 0; i < pd->output_count; i++)
        if (!strcmp(pd->outputs[i].name, "next_token")) next_out = (int)i;
    if (pp->input_count != 1 || pp->inputs[0].dtype != TB_DTYPE_INT64 || pp->inputs[0].rank != 2 ||
        pp->inputs[0].shape[0] != 1 || pd->input_count != 2 || ids_in < 0 || pos_in < 0 || ids_in == pos_in ||
        pd->inputs[ids_in].dtype != TB_DTYPE_INT64 || tb_tensor_spec_extent(&pd->inputs[ids_in]) != 8 ||
        pd->inputs[pos_in].dtype != TB_DTYPE_INT64 || tb_tensor_spec_extent(&pd->inputs[pos_in]) != 8 ||
        !pp->output_count || !pd->output_count || pp->outputs[0].rank < 2 || pd->outputs[0].rank < 1 ||
        (pp->outputs[0].dtype != TB_DTYPE_FLOAT32 && pp->outputs[0].dtype != TB_DTYPE_FLOAT16 &&
         pp->outputs[0].dtype != TB_DTYPE_BFLOAT16) ||
        pd->outputs[0].dtype != pp->outputs[0].dtype ||
        pp->outputs[0].shape[pp->outputs[0].rank - 2] != (dynamic ? dyn_max : (int64_t)bucket_len) ||
        (next_out >= 0 &&
         (pd->outputs[next_out].dtype != TB_DTYPE_INT64 || tb_tensor_spec_extent(&pd->outputs[next_out]) != 8)) ||
        /* the prompt is copied as T contiguous ids: ids' extent must hold them (strides [0, 0] make it 8 bytes) */
        pp->inputs[0].strides[1] != 1 || pp->inputs[0].shape[1] < 1 ||
        tb_tensor_spec_extent(&pp->inputs[0]) != (uint64_t)pp->inputs[0].shape[1] * 8u) {
        fprintf(stderr,
                "%s: programs %s and decode are not as generation takes them: %s \"ids\" int64 [1, T], contiguous, and "
                "logits [1, T, V]; decode \"ids\" int64 [1, 1], \"pos\" int64 [1], logits [1, 1, V] of the same dtype "
                "and, optionally, \"next_token\" int64 [1, 1] (batch 1)\n",
                prog, pp->name, pp->name);
        goto done;
    }
    if (max_seq > GEN_MAX_SEQ) {
        fprintf(stderr, "%s: %s says its cache holds %lld positions; generate takes at most %lld\n", prog, path,
                (long long)max_seq, (long long)GEN_MAX_SEQ);
        goto done;
    }
    /* an id past the logits' vocabulary would reach the model's embedding
       kernel, whose device-side assert loses the CUDA context: refused
       here, before anything runs (the runner cannot see an index inside a
       model) */
    {
        const tb_tensor_spec *lp = &pp->outputs[0], *ld = &pd->outputs[0];
        int64_t vocab =
            lp->shape[lp->rank - 1] < ld->shape[ld->rank - 1] ? lp->shape[lp->rank - 1] : ld->shape[ld->rank - 1];
        for (i = 0; i < nprompt; i++)
            if (prompt[i] >= vocab) {
                fprintf(stderr, "%s: prompt id %lld (position %u) is past the vocabulary: the logits have %lld entries "
                        "(ids 0 to %lld)\n", prog, (long long)prompt[i], i, (long long)vocab, (long long)(vocab - 1));
                goto done;
            }
    }
    if (max_new < 0) max_new = max_seq - nprompt;
    if (max_new > max_seq - (int64_t)nprompt) { /* (not nprompt + max_new: --max-new may be near INT64_MAX) */
        fprintf(stderr, "%s: %u prompt tokens and --max-new %lld pass the cache's %lld positions: at most %lld new "
                "tokens\n", prog, nprompt, (long long)max_new, (long long)max_seq, (long long)(max_seq - nprompt));
        goto done;
    }
    if (max_new < 1) {
        fprintf(stderr, "%s: the prompt fills the cache's %lld positions: no room for a new token\n", prog,
                (long long)max_seq);
        goto done;
    }
    if (!(out = (int64_t *)malloc((size_t)max_new * sizeof *out)) ||
        !(step_s = (double *)malloc((size_t)max_new * sizeof *step_s)))
        goto oom;
    /* a bundle whose weights are a safetensors file (2.5): --weights, else
       the file its property weights.file names, beside the bundle */
    {
        uint32_t n = 0; /* (the programs share one table of constants) */
        for (i = 0; i < pp->constant_count; i++) n += (pp->constants[i].flags & TB_CONSTANT_EXTERNAL) != 0;
        if (n && !weights) {
            if (tb_weights_path_beside(b, path, weights_path, sizeof weights_path, &e) != tb_ok) {
                fprintf(stderr, "%s: %s keeps its weights in a safetensors file: %s; give it with --weights FILE\n",
                        prog, path, e.message);
                goto done;
            }
            weights = weights_path;
        }
        if (!n) weights = NULL; /* nothing to read from it */
    }
    /* load: weights uploaded once for every program; device memory */
    memset(&d, 0, sizeof d);
    d.bundle = b, d.flags = (graph ? TB_MODEL_GRAPH : 0) | (serial ? TB_MODEL_SERIAL_LOAD : 0), d.weights = weights;
    t_load0 = gen_now();
    if (tb_model_load(&d, &m, &e) != tb_ok) goto fail;
    t_load = gen_now();
    pin.bytes = tb_tensor_spec_extent(&pp->inputs[0]), pout.bytes = tb_tensor_spec_extent(&pp->outputs[0]);
    dout.bytes = tb_tensor_spec_extent(&pd->outputs[0]), dids.bytes = dpos.bytes = 8;
    dnext.bytes = next_out >= 0 ? 8 : 0;
    if (!(logits = (unsigned char *)malloc((size_t)(pout.bytes > dout.bytes ? pout.bytes : dout.bytes)))) goto oom;
    if (tb_model_device_alloc(m, (size_t)pin.bytes, &pin.dev, &e) ||
        tb_model_device_alloc(m, (size_t)pout.bytes, &pout.dev, &e) || tb_model_device_alloc(m, 8, &dids.dev, &e) ||
        tb_model_device_alloc(m, 8, &dpos.dev, &e) || tb_model_device_alloc(m, (size_t)dout.bytes, &dout.dev, &e) ||
        (dnext.bytes && tb_model_device_alloc(m, 8, &dnext.dev, &e)) || tb_model_stream_create(m, &stream, &e))
        goto fail;
    /* prefill: the prompt padded to the bucket; the first new token from
       the logits at its last real position */
    {
        uint32_t prefill;
        int64_t *padded = (int64_t *)calloc((size_t)bucket_len, sizeof *padded);
        tb_tensor_spec lspec = pp->outputs[0];
        const tb_tensor_spec *lo = &lspec;
        uint32_t r = lo->rank;
        uint64_t es, row, lbytes;
        tb_tensor tin, tout;
        if (!padded) goto oom;
        memcpy(padded, prompt, nprompt * sizeof *prompt);
        tb_model_find_program(m, pp->name, &prefill, &e);
        tin = tb_tensor_for(&pp->inputs[0], pin.dev);
        if (dynamic) { /* (2.6) ids [1, T] at this T; the logits' spec there */
            tin.shape[1] = (int64_t)bucket_len, tin.strides[0] = (int64_t)bucket_len;
            if (tb_model_output_specs(m, prefill, &tin, 1, &lspec, 1, &e) != tb_ok) {
                free(padded);
                goto fail;
            }
        }
        es = tb_dtype_size(lo->dtype), row = (uint64_t)lo->strides[r - 2] * (nprompt - 1) * es;
        lbytes = tb_tensor_spec_extent(lo);
        /* the logits at this length must hold the prompt's last position
           and fit the buffer sized at the maximum: a program whose output
           at T has fewer positions (T // 4 * 4, say) is refused here */
        if (lo->shape[r - 2] < (int64_t)nprompt || lo->shape[r - 1] < 1 || lo->strides[r - 2] < 0 ||
            lo->strides[r - 1] < 0 || lbytes > pout.bytes || row >= lbytes ||
            ((uint64_t)(lo->shape[r - 1] - 1) * (uint64_t)lo->strides[r - 1] + 1) * es > lbytes - row) {
            fprintf(stderr, "%s: %s's logits at length %llu (%lld positions) do not hold the prompt's last position "
                    "(%u): generation reads the logits there\n", prog, pp->name, (unsigned long long)bucket_len,
                    (long long)lo->shape[r - 2], nprompt - 1);
            free(padded);
            goto done;
        }
        tout = tb_tensor_for(lo, pout.dev);
        if (tb_model_copy_to_device(m, pin.dev, padded, (size_t)bucket_len * 8, NULL, &e) != tb_ok ||
            tb_model_run_program(m, prefill, &tin, 1, &tout, 1, stream, &e) != tb_ok ||
            tb_model_copy_to_host(m, logits, (const char *)pout.dev + row, (size_t)(lbytes - row), stream, &e) !=
                tb_ok) {
            free(padded);
            goto fail;
        }
        free(padded);
        tok = gen_argmax(logits, lo->dtype, (uint64_t)lo->shape[r - 1], (uint64_t)lo->strides[r - 1]);
        t_first = gen_now();
        t_prefill = t_first - t_load;
        out[count++] = tok;
        printf("%lld", (long long)tok); /* the first token as soon as it is known: the time to it is the user's wait */
        fflush(stdout);
        printed = 1;
        {
            struct timespec wall; /* the wall clock, for a caller that timed the process's start */
            clock_gettime(CLOCK_REALTIME, &wall);
            t_first_wall = (double)wall.tv_sec + wall.tv_nsec * 1e-9;
        }
    }
    /* decode: one token a step at the next position, until a stop */
    {
        uint32_t dec = decode;
        int64_t pos = nprompt;
        tb_tensor tin[2], tout[8];
        const tb_tensor_spec *lo = &pd->outputs[0];
        memset(tout, 0, sizeof tout);
        if (pd->output_count > 8) {
            gen_end_line(&printed);
            fprintf(stderr, "%s: decode has %u outputs; generation takes at most 8\n", prog, pd->output_count);
            goto done;
        }
        tin[ids_in] = tb_tensor_for(&pd->inputs[ids_in], dids.dev),
        tin[pos_in] = tb_tensor_for(&pd->inputs[pos_in], dpos.dev);
        for (i = 0; i < pd->output_count; i++) { /* outputs other than these two: scratch of their own */
            void *o = (int)i == next_out ? dnext.dev : i == 0 ? dout.dev : NULL;
            if (!o && tb_model_device_alloc(m, (size_t)tb_tensor_spec_extent(&pd->outputs[i]), &o, &e)) goto fail;
            tout[i] = tb_tensor_for(&pd->outputs[i], o);
        }
        if (tb_model_copy_to_device(m, dids.dev, &tok, 8, NULL, &e) != tb_ok) goto fail;
        if (next_out >= 0 && (int64_t)count < max_new && !(has_eos && tok == eos)) {
            /* the argmax on the device: each step's token is the next step's
               ids (a device copy), its position comes from a table uploaded
               once, and the tokens are logged on the device, so that the host
               waits once a chunk of steps (all of them without an
               end-of-sequence id), not once a token. Steps queued past an
               end-of-sequence token stay within the cache (max_new was
               checked against it) and their tokens are dropped. */
            uint32_t total = (uint32_t)(max_new - (int64_t)count), k = 0, j, n;
            uint32_t chunk = has_eos ? GEN_EOS_CHUNK : total;
            int64_t *hpos = (int64_t *)malloc((size_t)total * sizeof *hpos);
            char *dposes = NULL, *dlog = NULL;
            int stop = 0;
            if (!hpos) goto oom;
            for (j = 0; j < total; j++) hpos[j] = pos + (int64_t)j;
            if (tb_model_device_alloc(m, (size_t)total * 8, (void **)&dposes, &e) != tb_ok ||
                tb_model_device_alloc(m, (size_t)total * 8, (void **)&dlog, &e) != tb_ok ||
                tb_model_copy_to_device(m, dposes, hpos, (size_t)total * 8, NULL, &e) != tb_ok) {
                free(hpos), tb_model_device_free(m, dposes), tb_model_device_free(m, dlog);
                goto fail;
            }
            free(hpos);
            while (k < total && !stop) {
                double t0 = gen_now(), each;
                n = total - k < chunk ? total - k : chunk;
                for (j = 0; j < n; j++)
                    if (tb_model_copy_on_device(m, dpos.dev, dposes + (size_t)(k + j) * 8, 8, stream, &e) != tb_ok ||
                        tb_model_run_program(m, dec, tin, 2, tout, pd->output_count, stream, &e) != tb_ok ||
                        tb_model_copy_on_device(m, dids.dev, dnext.dev, 8, stream, &e) != tb_ok ||
                        tb_model_copy_on_device(m, dlog + (size_t)(k + j) * 8, dnext.dev, 8, stream, &e) != tb_ok)
                        break;
                if (j < n ||
                    tb_model_copy_to_host(m, out + count, dlog + (size_t)k * 8, (size_t)n * 8, stream, &e) != tb_ok ||
                    tb_model_synchronize(m, stream, &e) != tb_ok) {
                    tb_model_device_free(m, dposes), tb_model_device_free(m, dlog);
                    goto fail;
                }
                each = (gen_now() - t0) / n;
                for (j = 0; j < n && !stop; j++) {
                    step_s[count - 1] = each;
                    tok = out[count++];
                    stop = has_eos && tok == eos;
                }
                k += n;
            }
            tb_model_device_free(m, dposes), tb_model_device_free(m, dlog);
        }
        while (next_out < 0 && (int64_t)count < max_new && !(has_eos && tok == eos)) {
            /* the argmax on the host, from the logits */
            double t0 = gen_now();
            if (tb_model_copy_to_device(m, dpos.dev, &pos, 8, stream, &e) != tb_ok ||
                tb_model_run_program(m, dec, tin, 2, tout, pd->output_count, stream, &e) != tb_ok ||
                tb_model_copy_to_host(m, logits, dout.dev, (size_t)dout.bytes, stream, &e) != tb_ok)
                goto fail;
            tok = gen_argmax(logits, lo->dtype, (uint64_t)lo->shape[lo->rank - 1], (uint64_t)lo->strides[lo->rank - 1]);
            if (tb_model_copy_to_device(m, dids.dev, &tok, 8, stream, &e) != tb_ok) goto fail;
            step_s[count - 1] = gen_now() - t0;
            out[count++] = tok;
            pos++;
        }
        for (i = 1; i < pd->output_count; i++)
            if ((int)i != next_out) tb_model_device_free(m, tout[i].data);
    }
    if (tb_model_synchronize(m, stream, &e) != tb_ok) goto fail;
    for (i = 1; i < count; i++) printf(",%lld", (long long)out[i]);
    gen_end_line(&printed);
    {
        double dsum = 0, med = 0;
        for (i = 0; i + 1 < count; i++) dsum += step_s[i];
        fprintf(stderr,
                "%s: %u prompt tokens (%s), %u new; load %.1f ms, prefill %.3f ms, decode %.1f us/token "
                "(%.0f tokens/s)%s\n",
                prog, nprompt, pp->name, count, (t_load - t_start) * 1e3, t_prefill * 1e3,
                count > 1 ? dsum / (count - 1) * 1e6 : 0.0, count > 1 ? (count - 1) / dsum : 0.0,
                graph ? ", graph" : "");
        if (bench) {
            /* one pageable copy of the weights' bytes, the load's baseline */
            uint64_t cb = tb_model_constant_bytes(m);
            void *dev = NULL, *host = cb ? malloc((size_t)cb) : NULL;
            double t0, h2d = 0;
            if (count > 1) {
                qsort(step_s, count - 1, sizeof *step_s, gen_cmp);
                med = step_s[(count - 1) / 2];
            }
            if (cb && host && tb_model_device_alloc(m, (size_t)cb, &dev, &e) == tb_ok) {
                memset(host, 1, (size_t)cb);
                t0 = gen_now();
                if (tb_model_copy_to_device(m, dev, host, (size_t)cb, NULL, &e) == tb_ok) h2d = gen_now() - t0;
                tb_model_device_free(m, dev);
            }
            free(host);
            printf(
                "time_to_first_token %.3f ms\nload %.3f ms\nprefill %.3f ms\nh2d_weights %.3f ms\nweights %llu bytes\n"
                "decode_median %.3f us\ndecode_tokens %u\nfirst_token_wall %.6f s\n",
                (t_first - t_start) * 1e3, (t_load - t_start) * 1e3, t_prefill * 1e3, h2d * 1e3, (unsigned long long)cb,
                med * 1e6, count > 1 ? count - 1 : 0, t_first_wall);
            {
                /* the first token's wait, phase by phase: before the load
                   (the bundle read, the arguments), then the load's own */
                tb_model_times lt;
                tb_model_load_times(m, &lt);
                printf("phase_before_load %.3f ms\nphase_driver %.3f ms\nphase_weights_file %.3f ms\n"
                       "phase_context %.3f ms\nphase_kernels %.3f ms\nphase_memory %.3f ms\nphase_upload %.3f ms\n"
                       "phase_pinning %.3f ms\nphase_first_prefill %.3f ms\nkernels_beside_upload %u\n"
                       "upload_threads %u\nstaging_bytes %llu\n",
                       (t_load0 - t_start) * 1e3, lt.driver_ms, lt.weights_ms, lt.context_ms, lt.kernels_ms,
                       lt.memory_ms, lt.upload_ms, lt.pin_ms, t_prefill * 1e3, lt.beside, lt.threads,
                       (unsigned long long)lt.staging_bytes);
            }
        }
    }
    status = 0;
    goto done;
oom:
    gen_end_line(&printed);
    fprintf(stderr, "%s: out of memory\n", prog);
    goto done;
fail:
    gen_end_line(&printed);
    fprintf(stderr, "%s: %s\n", prog, e.message);
done:
    gen_end_line(&printed);
    if (m) {
        if (stream) tb_model_synchronize(m, stream, &e);
        tb_model_device_free(m, pin.dev), tb_model_device_free(m, pout.dev), tb_model_device_free(m, dids.dev);
        tb_model_device_free(m, dpos.dev), tb_model_device_free(m, dout.dev), tb_model_device_free(m, dnext.dev);
        tb_model_stream_free(m, stream);
        tb_model_free(m);
    }
    tb_bundle_free(b);
    free(prompt), free(out), free(step_s), free(logits);
    return status;
}

#ifndef GENERATE_NO_MAIN
int main(int argc, char **argv) { return generate_main(argc, argv, "generate", gen_now()); }
#endif
