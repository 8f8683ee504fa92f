/* libFuzzer target: the safetensors reader (tb_weights_open_memory). A
   file it accepts has every tensor found by its name, inside the data,
   and readable whole; its CRC-32 computes. Seeds: fuzz/corpus/weights
   (written by the Python companion's weights.write_file, and a file of
   the C tests' shapes). */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    tb_weights *w = NULL;
    tb_error e;
    uint32_t i, crc;
    unsigned char buf[64];
    uint64_t end = 0;
    if (tb_weights_open_memory(data, size, NULL, &w, &e) != tb_ok) {
        if (w || !e.message[0]) __builtin_trap();
        return 0;
    }
    for (i = 0; i < tb_weights_count(w); i++) {
        const tb_weights_tensor *t = tb_weights_at(w, i);
        if (!t || tb_weights_find(w, t->name) != t || t->offset < 8 || t->offset > size || t->size > size - t->offset ||
            t->offset < end)
            __builtin_trap(); /* found by name, inside the file, in order of bytes */
        end = t->offset + t->size;
        if (tb_weights_read(w, t, 0, buf, t->size < sizeof buf ? (size_t)t->size : sizeof buf, &e) != tb_ok ||
            tb_weights_crc32(w, t, &crc, &e) != tb_ok)
            __builtin_trap();
    }
    if (tb_weights_count(w) && end != size) __builtin_trap(); /* the data covered to the end */
    tb_weights_free(w);
    return 0;
}
