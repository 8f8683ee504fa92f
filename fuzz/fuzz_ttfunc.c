/* libFuzzer target: the tt.func argument parser, by name and by any name. */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    char types[TB_MAX_ARGS + 1], div[TB_MAX_ARGS + 1];
    tb_error e;
    int pass;
    for (pass = 0; pass < 2; pass++) {
        if (tb_parse_ttfunc((const char *)data, size, pass ? "tb_add" : NULL, types, div, sizeof types, &e) == tb_ok) {
            size_t i, n = strlen(types);
            if (strlen(div) != n) __builtin_trap();
            for (i = 0; i < n; i++)
                if (!tb_arg_code_size(types[i]) || (div[i] != '0' && div[i] != '1')) __builtin_trap();
        }
    }
    return 0;
}
