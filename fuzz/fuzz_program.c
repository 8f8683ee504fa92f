/* libFuzzer target: programs (format 2.3, section 5) read and, when one
   loads, run. The input is a bundle (read without the checksum, so that
   mutations reach the program's structure). A program the reader accepts
   is written and read back, then loaded as a model and run, directly and
   as a graph, against the stand-in driver (build/libfakecuda.so: run from
   the repository root), whose "device" memory is host memory and whose
   memset and copy steps write it: so AddressSanitizer sees any memory a
   checked program could make the runner touch outside what it allocated
   or was given. Seeds: fuzz/corpus/program (tests/test_program.c writes
   one with TB_PROGRAM_SEED). */
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "../tests/fake_client.h"

#define STREAM ((void *)(uintptr_t)0x5100)
#define MAX_IO_BYTES ((uint64_t)1 << 20) /* larger tensors: not run */

static void run_model(const tb_bundle *b, unsigned flags) {
    static const size_t sizes[] = {8, 8, 8, 8, 8, 8, 8, 8};
    const tb_program *p = tb_bundle_program(b);
    tb_tensor in[16], out[16];
    void *mem[32];
    uint32_t i, n = 0;
    uint64_t total = 0;
    tb_model_desc d;
    tb_model *m = NULL;
    tb_error e;
    if (p->input_count > 16 || p->output_count > 16) return;
    for (i = 0; i < p->input_count + p->output_count; i++) {
        const tb_tensor_spec *s = i < p->input_count ? &p->inputs[i] : &p->outputs[i - p->input_count];
        total += tb_tensor_spec_extent(s);
        if (total > MAX_IO_BYTES) return;
    }
    memset(&d, 0, sizeof d);
    d.bundle = b, d.flags = flags, d.upload_chunk = 64;
    fake.set_params(sizes, 8);
    if (tb_model_load(&d, &m, &e) != tb_ok) {
        if (m || !e.message[0]) __builtin_trap();
        return;
    }
    for (i = 0; i < p->input_count + p->output_count; i++) {
        const tb_tensor_spec *s = i < p->input_count ? &p->inputs[i] : &p->outputs[i - p->input_count];
        uint64_t x = tb_tensor_spec_extent(s);
        void *q = NULL;
        size_t align = s->align < sizeof(void *) ? sizeof(void *) : s->align;
        if (posix_memalign(&q, align, x ? (size_t)x : 1)) q = NULL;
        mem[n++] = q;
        if (i < p->input_count) in[i] = tb_tensor_for(s, q);
        else out[i - p->input_count] = tb_tensor_for(s, q);
    }
    for (i = 0; i < 2; i++)
        if (tb_model_run(m, in, p->input_count, out, p->output_count, STREAM, &e) != tb_ok && !e.message[0]) __builtin_trap();
    if (tb_model_reset_state(m, STREAM, &e) != tb_ok && !e.message[0]) __builtin_trap();
    tb_model_free(m);
    while (n) free(mem[--n]);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    tb_bundle *b = NULL, *again = NULL;
    tb_error e;
    size_t n = 0;
    void *buf;
    if (!fake_ready()) __builtin_trap();
    if (tb_bundle_read_memory(data, size, NULL, TB_READ_NO_CHECKSUM, &b, &e) != tb_ok) {
        if (b || !e.message[0]) __builtin_trap();
        return 0;
    }
    if (!tb_bundle_program(b)) {
        tb_bundle_free(b);
        return 0;
    }
    if (tb_bundle_write_memory(b, NULL, 0, &n, &e) == tb_ok && (buf = malloc(n)) != NULL) {
        if (tb_bundle_write_memory(b, buf, n, NULL, &e) != tb_ok || tb_bundle_read_memory(buf, n, NULL, 0, &again, &e) != tb_ok ||
            !tb_bundle_program(again))
            __builtin_trap(); /* what loads must write and read back, program included */
        tb_bundle_free(again);
        free(buf);
    }
    run_model(b, 0);
    run_model(b, TB_MODEL_GRAPH);
    tb_bundle_free(b);
    return 0;
}
