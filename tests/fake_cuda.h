/* What tests/fake_cuda.c (build/libfakecuda.so, a stand-in driver) records
   and how a test reads it back (dlsym on the library's handle). */
#ifndef TB_FAKE_CUDA_H
#define TB_FAKE_CUDA_H
#include <stdint.h>

/* the arguments of the last cuTensorMapEncodeTiled */
typedef struct fake_encode {
    int dtype, interleave, swizzle, l2, fill, aligned;
    uint32_t rank, box[5], estr[5];
    uint64_t dims[5], strides[5];
    uintptr_t base;
} fake_encode;

#endif
