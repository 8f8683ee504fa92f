/* libFuzzer target: the metadata JSON reader. */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    tb_kernel_metadata md;
    tb_error e;
    if (tb_parse_metadata_json((const char *)data, size, &md, &e) == tb_ok) {
        if (!md.name[0] || md.num_warps == 0 || md.num_warps > 32 || strlen(md.name) > TB_MAX_NAME_LENGTH)
            __builtin_trap();
    } else if (!e.message[0]) {
        __builtin_trap();
    }
    return 0;
}
