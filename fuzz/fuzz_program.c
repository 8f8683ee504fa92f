/* libFuzzer target: programs (format 2.3, section 5; 2.4, section 6)
   read and, when one loads, run. The input is a bundle (read without the checksum, so that
   mutations reach the program's structure). A program the reader accepts
   is written and read back, then loaded as a model and run, directly and
   as a graph (updated in place, and through static buffers), and with a
   workspace of the caller's, against the stand-in driver (build/libfakecuda.so: run from
   the repository root), whose "device" memory is host memory and whose
   memset and copy steps write it: so AddressSanitizer sees any memory a
   checked program could make the runner touch outside what it allocated
   or was given. Every program of the bundle runs, in turn, on one loaded
   model. A program with symbols (2.6) runs at every maximum (its own
   fields), at every minimum and at the middle of its ranges, each through
   tb_program_specialize's specs, and at a size out of its range, which
   must be refused. Seeds: fuzz/corpus/program (tests/test_program.c writes one
   program with TB_PROGRAM_SEED, two with TB_PROGRAMS_SEED and one with
   symbols with TB_DYNAMIC_SEED; tests/mkprogram.c --generate a prefill and
   decode pair). */
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "../tests/fake_client.h"

#define STREAM ((void *)(uintptr_t)0x5100)
#define MAX_IO_BYTES ((uint64_t)1 << 20) /* larger tensors: not run */

/* The stand-in driver reports one parameter list for every kernel: that
   of the program's first launch (its codes' sizes, then its scratch
   pointers), so that programs whose launches take the same arguments
   load and run their launches (the seed's three), and others fail to
   load cleanly. */
static void set_params_of(const tb_bundle *b, const tb_program *p) {
    size_t sizes[64];
    uint32_t s, i, n = 0;
    for (s = 0; s < p->step_count; s++) {
        const tb_launch_config *cf;
        if (p->steps[s].kind != TB_STEP_LAUNCH) continue;
        cf = &tb_bundle_launch_record(b, p->steps[s].record)->configs[p->steps[s].config];
        for (i = 0; cf->arg_types[i] && n < 62; i++) sizes[n++] = tb_arg_code_size(cf->arg_types[i]);
        if (cf->global_scratch.present) sizes[n++] = 8;
        if (cf->profile_scratch.present) sizes[n++] = 8;
        break;
    }
    fake.set_params(sizes, (int)n);
}

/* Runs program `pi` of loaded model m on memory of its own: with the
   caller's workspace (workspace != 0), then twice as the model was loaded. */
static void run_sizes(tb_model *m, const tb_program *p, uint32_t pi, int workspace);
static void run_program(tb_model *m, const tb_bundle *b, const tb_program *p, uint32_t pi, int workspace) {
    uint32_t k;
    int64_t v[TB_MAX_PROGRAM_SYMBOLS];
    tb_program *at = NULL;
    tb_error e;
    run_sizes(m, p, pi, workspace);
    if (!p->symbol_count || p->symbol_count > TB_MAX_PROGRAM_SYMBOLS) return;
    for (k = 0; k < p->symbol_count; k++) v[k] = p->symbols[k].min;
    if (tb_program_specialize(b, p, v, &at, &e) == tb_ok) run_sizes(m, at, pi, workspace);
    else if (!e.message[0]) __builtin_trap();
    tb_program_free(at), at = NULL;
    for (k = 0; k < p->symbol_count; k++)
        v[k] = (p->symbols[k].min + p->symbols[k].max) / 2 / p->symbols[k].divisor * p->symbols[k].divisor;
    if (tb_program_specialize(b, p, v, &at, &e) == tb_ok) run_sizes(m, at, pi, workspace);
    else if (!e.message[0]) __builtin_trap();
    if (at && p->symbols[0].max < 0x7fffffff) { /* one past the range: refused before anything runs */
        tb_tensor in[16];
        uint32_t i;
        int launches = fake.launches();
        if (p->input_count > 16) goto done;
        for (i = 0; i < p->input_count; i++) in[i] = tb_tensor_for(&at->inputs[i], NULL);
        for (i = 0; i < p->expr_count; i++)
            if (p->exprs[i].field == TB_FIELD_INPUT_SIZE && p->exprs[i].op_count == 1 &&
                p->exprs[i].ops[0].op == TB_GRID_SYM && p->exprs[i].ops[0].index == 0)
                in[p->exprs[i].index].shape[p->exprs[i].sub] = p->symbols[0].max + 1;
        if (tb_model_run_program(m, pi, in, p->input_count, NULL, 0, STREAM, &e) == tb_ok ||
            fake.launches() != launches)
            __builtin_trap();
    }
done:
    tb_program_free(at);
}
/* Runs program `pi` of loaded model m with tensors of p's specs (the
   model's program, or one specialized from it). */
static void run_sizes(tb_model *m, const tb_program *p, uint32_t pi, int workspace) {
    tb_tensor in[16], out[16];
    void *mem[33];
    uint32_t i, n = 0;
    uint64_t total = 0;
    tb_error e;
    if (p->input_count > 16 || p->output_count > 16) return;
    for (i = 0; i < p->input_count + p->output_count; i++) {
        const tb_tensor_spec *s = i < p->input_count ? &p->inputs[i] : &p->outputs[i - p->input_count];
        total += tb_tensor_spec_extent(s);
        if (total > MAX_IO_BYTES) return;
    }
    for (i = 0; i < p->input_count + p->output_count; i++) {
        const tb_tensor_spec *s = i < p->input_count ? &p->inputs[i] : &p->outputs[i - p->input_count];
        uint64_t x = tb_tensor_spec_extent(s);
        void *q = NULL;
        size_t align = s->align < sizeof(void *) ? sizeof(void *) : s->align;
        if (posix_memalign(&q, align, x ? (size_t)x : 1)) q = NULL;
        if (q) fake.track(q, x ? (size_t)x : 1); /* "device" memory of that size */
        mem[n++] = q;
        if (i < p->input_count) in[i] = tb_tensor_for(s, q);
        else out[i - p->input_count] = tb_tensor_for(s, q);
    }
    if (workspace) { /* the caller's workspace: no graph */
        void *w = NULL;
        uint64_t wn = tb_model_workspace_size(m);
        if (wn <= MAX_IO_BYTES && !posix_memalign(&w, 256, wn ? (size_t)wn : 1)) {
            fake.track(w, wn ? (size_t)wn : 1);
            mem[n++] = w;
            if (tb_model_run_program_workspace(m, pi, in, p->input_count, out, p->output_count, w, STREAM, &e) !=
                    tb_ok &&
                !e.message[0])
                __builtin_trap();
        }
    }
    for (i = 0; i < 2; i++)
        if (tb_model_run_program(m, pi, in, p->input_count, out, p->output_count, STREAM, &e) != tb_ok && !e.message[0])
            __builtin_trap();
    while (n) free(mem[--n]);
}

/* Loads the bundle as a model and runs each of its programs in turn (they
   share the constants and the state), then resets the state. */
static void run_model(const tb_bundle *b, unsigned flags, int workspace) {
    uint32_t pi, count = tb_bundle_program_count(b);
    tb_model_desc d;
    tb_model *m = NULL;
    tb_error e;
    memset(&d, 0, sizeof d);
    d.bundle = b, d.flags = flags, d.upload_chunk = 64;
    set_params_of(b, tb_bundle_program(b));
    if (tb_model_load(&d, &m, &e) != tb_ok) {
        if (m || !e.message[0]) __builtin_trap();
        return;
    }
    if (tb_model_program_count(m) != count) __builtin_trap();
    for (pi = 0; pi < count; pi++) run_program(m, b, tb_model_program(m, pi), pi, workspace);
    if (tb_model_reset_state(m, STREAM, &e) != tb_ok && !e.message[0]) __builtin_trap();
    tb_model_free(m);
}

/* inputs whose program ran a launch (reported at exit): a fuzzer whose
   programs never launch tests the runner's copies and memsets alone */
static long ran_launches, ran_inputs;
static void report(void) {
    fprintf(stderr, "fuzz_program: %ld of %ld inputs ran a launch\n", ran_launches, ran_inputs);
}
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    atexit(report);
    return 0;
}
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    tb_bundle *b = NULL, *again = NULL;
    tb_error e;
    size_t n = 0;
    void *buf;
    int launches;
    if (!fake_ready()) __builtin_trap();
    launches = fake.launches();
    if (tb_bundle_read_memory(data, size, NULL, TB_READ_NO_CHECKSUM, &b, &e) != tb_ok) {
        if (b || !e.message[0]) __builtin_trap();
        return 0;
    }
    if (!tb_bundle_program(b)) {
        tb_bundle_free(b);
        return 0;
    }
    ran_inputs++;
    if (tb_bundle_write_memory(b, NULL, 0, &n, &e) == tb_ok && (buf = malloc(n)) != NULL) {
        if (tb_bundle_write_memory(b, buf, n, NULL, &e) != tb_ok ||
            tb_bundle_read_memory(buf, n, NULL, 0, &again, &e) != tb_ok || !tb_bundle_program(again))
            __builtin_trap(); /* what loads must write and read back, program included */
        tb_bundle_free(again);
        free(buf);
    }
    run_model(b, 0, 1);
    run_model(b, TB_MODEL_GRAPH, 0);
    run_model(b, TB_MODEL_GRAPH | TB_MODEL_STATIC_IO, 0);
    if (fake.launches() != launches) ran_launches++;
    tb_bundle_free(b);
    return 0;
}
