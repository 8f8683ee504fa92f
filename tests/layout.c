/* The layout of the structs that the Python companion mirrors with ctypes
   (triton_bundle.native.c_structs): for each, its sizeof and every field's
   offsetof and sizeof, as the C compiler lays them out, printed as JSON:
     {"tb_error": {"size": 1048, "fields": {"code": [0, 4], ...}}, ...}
   tests/test_layout.py compares them with the ctypes ones. Built as C99
   by make (build/layout). */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include <stddef.h>
#include <stdio.h>

static int first_struct = 1, first_field;

static void begin(const char *name, size_t size) {
    printf("%s\n  \"%s\": {\"size\": %lu, \"fields\": {", first_struct ? "{" : ",", name, (unsigned long)size);
    first_struct = 0;
    first_field = 1;
}
static void field(const char *name, size_t offset, size_t size) {
    printf("%s\"%s\": [%lu, %lu]", first_field ? "" : ", ", name, (unsigned long)offset, (unsigned long)size);
    first_field = 0;
}
static void end(void) { printf("}}"); }

#define BEGIN(T) begin(#T, sizeof(T))
#define FIELD(T, f) field(#f, offsetof(T, f), sizeof(((T *)0)->f))

int main(void) {
    BEGIN(tb_error);
    FIELD(tb_error, code);
    FIELD(tb_error, sys_errno);
    FIELD(tb_error, cuda_result);
    FIELD(tb_error, offset);
    FIELD(tb_error, kernel);
    FIELD(tb_error, file);
    FIELD(tb_error, message);
    end();

    BEGIN(tb_arg);
    FIELD(tb_arg, i);
    FIELD(tb_arg, u);
    FIELD(tb_arg, f);
    FIELD(tb_arg, p);
    end();

    BEGIN(tb_scratch);
    FIELD(tb_scratch, size);
    FIELD(tb_scratch, align);
    FIELD(tb_scratch, present);
    end();

    BEGIN(tb_launch_config);
    FIELD(tb_launch_config, kernel_hash);
    FIELD(tb_launch_config, function_name);
    FIELD(tb_launch_config, binary_name);
    FIELD(tb_launch_config, arg_types);
    FIELD(tb_launch_config, arg_divisibility);
    FIELD(tb_launch_config, num_warps);
    FIELD(tb_launch_config, num_ctas);
    FIELD(tb_launch_config, shared_mem);
    FIELD(tb_launch_config, flags);
    FIELD(tb_launch_config, cluster_dims);
    FIELD(tb_launch_config, global_scratch);
    FIELD(tb_launch_config, profile_scratch);
    FIELD(tb_launch_config, param_count);
    FIELD(tb_launch_config, params);
    FIELD(tb_launch_config, tensordesc_count);
    FIELD(tb_launch_config, tensordescs);
    FIELD(tb_launch_config, grid);
    end();

    BEGIN(tb_launch_record);
    FIELD(tb_launch_record, cache_key);
    FIELD(tb_launch_record, kernel_name);
    FIELD(tb_launch_record, config_count);
    FIELD(tb_launch_record, configs);
    FIELD(tb_launch_record, call);
    end();

    BEGIN(tb_launch_params);
    FIELD(tb_launch_params, grid);
    FIELD(tb_launch_params, stream);
    FIELD(tb_launch_params, args);
    FIELD(tb_launch_params, arg_count);
    FIELD(tb_launch_params, flags);
    FIELD(tb_launch_params, global_scratch);
    FIELD(tb_launch_params, profile_scratch);
    FIELD(tb_launch_params, grid_args);
    FIELD(tb_launch_params, grid_arg_count);
    FIELD(tb_launch_params, arg_bytes);
    end();

    BEGIN(tb_tensor);
    FIELD(tb_tensor, data);
    FIELD(tb_tensor, dtype);
    FIELD(tb_tensor, rank);
    FIELD(tb_tensor, shape);
    FIELD(tb_tensor, strides);
    end();

    BEGIN(tb_tensor_spec);
    FIELD(tb_tensor_spec, name);
    FIELD(tb_tensor_spec, dtype);
    FIELD(tb_tensor_spec, rank);
    FIELD(tb_tensor_spec, align);
    FIELD(tb_tensor_spec, shape);
    FIELD(tb_tensor_spec, strides);
    end();

    BEGIN(tb_program);
    FIELD(tb_program, input_count);
    FIELD(tb_program, output_count);
    FIELD(tb_program, inputs);
    FIELD(tb_program, outputs);
    FIELD(tb_program, constant_count);
    FIELD(tb_program, constants);
    FIELD(tb_program, buffer_count);
    FIELD(tb_program, buffers);
    FIELD(tb_program, workspace_size);
    FIELD(tb_program, step_count);
    FIELD(tb_program, steps);
    FIELD(tb_program, name);
    FIELD(tb_program, symbol_count);
    FIELD(tb_program, symbols);
    FIELD(tb_program, expr_count);
    FIELD(tb_program, exprs);
    FIELD(tb_program, values);
    end();

    BEGIN(tb_model_desc);
    FIELD(tb_model_desc, bundle);
    FIELD(tb_model_desc, table);
    FIELD(tb_model_desc, device);
    FIELD(tb_model_desc, flags);
    FIELD(tb_model_desc, options);
    FIELD(tb_model_desc, upload_chunk);
    FIELD(tb_model_desc, weights);
    FIELD(tb_model_desc, pinned_upload_min);
    FIELD(tb_model_desc, upload_threads);
    FIELD(tb_model_desc, instance_cache);
    FIELD(tb_model_desc, pinned_staging_bytes);
    end();

    printf("\n}\n");
    return 0;
}
