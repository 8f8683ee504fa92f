/* libFuzzer target: the bundle reader, with and without the checksum, then
   every accessor over what loaded and a re-serialization that must read back. */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    unsigned flags[2] = {0, TB_READ_NO_CHECKSUM};
    int f;
    for (f = 0; f < 2; f++) {
        tb_bundle *b = NULL, *again = NULL;
        tb_error e;
        tb_names *nm = NULL;
        size_t n = 0;
        uint32_t i, j;
        void *buf;
        if (tb_bundle_read_memory(data, size, NULL, flags[f], &b, &e) != tb_ok) {
            if (b || !e.message[0]) __builtin_trap();
            continue;
        }
        for (i = 0; i < tb_bundle_kernel_count(b); i++) {
            const tb_kernel *k = tb_bundle_kernel(b, i);
            for (j = 0; j < k->artifact_count; j++)
                if (k->artifacts[j].size &&
                    ((const unsigned char *)k->artifacts[j].data)[k->artifacts[j].size - 1] == 0x5a)
                    n++;
        }
        tb_bundle_names(b, &nm, &e);
        tb_names_free(nm);
        if (tb_bundle_write_memory(b, NULL, 0, &n, &e) == tb_ok && (buf = malloc(n)) != NULL) {
            if (tb_bundle_write_memory(b, buf, n, NULL, &e) != tb_ok ||
                tb_bundle_read_memory(buf, n, NULL, 0, &again, &e) != tb_ok)
                __builtin_trap(); /* what loads must write and read back */
            tb_bundle_free(again);
            free(buf);
        }
        tb_bundle_free(b);
    }
    return 0;
}
