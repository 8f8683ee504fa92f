/* SPDX-License-Identifier: MIT-0 */
/* triton_bundle.h - v2.16.0 - format 2.6 - carry compiled Triton GPU kernels from a Triton
   cache to a running program, with no Python at run time.
   MIT No Attribution licence (MIT-0), at the end of the file and in LICENSE.

   WHAT IT IS
   One C99 header (also valid C++11) that does six things:
     1. a bundle data model: kernels (a Triton cache directory: hash, device,
        files), static launch records (all a program needs to launch a cubin
        without Triton) and the names metadata;
     2. a binary format: versioned, little-endian, length-prefixed, XXH3
        checksummed, safe on hostile input, readable zero-copy;
     3. collect/emit of Triton cache directories, atomic under concurrent
        writers and crashes (one temporary directory + one rename per kernel),
        and tb_pack_cache, which streams a whole cache into a bundle file;
     4. a static launcher: libcuda loaded with dlopen at run time, cubins loaded
        from memory, launches with fixed-size argument arrays (no allocation),
        every parameter type of a Triton 3.6 signature passed right (bools,
        signed and unsigned integers, fp16/bf16, tensor descriptors encoded
        for TMA), and a kernel table that launches by name, choosing the
        specialization that the arguments fit;
     5. how to call them: grid rules computed from the arguments
        (TB_LAUNCH_GRID_AUTO), autotuning on first use (TB_CONFIG_AUTOTUNE)
        and CUDA graphs (tb_graph_*); the Python package python/triton_bundle exports
        records with configs and grid rules from torch.compile and Triton;
     6. a whole torch.compile'd model from C: programs (inputs, outputs,
        weights, memory plan, steps) in the bundle, which the Python
        companion's export_model and export_programs capture, and a runner
        (tb_model_*) that uploads the weights once and runs the steps, or
        replays them as one CUDA graph, bit-identical to PyTorch's compiled
        model; several programs over shared state (prefill and decode over
        one KV cache) generate text from C.

   USING IT
   In exactly one C or C++ file:
       #define TRITON_BUNDLE_IMPLEMENTATION
       #include "triton_bundle.h"
   everywhere else just #include "triton_bundle.h". In the implementation
   file include it before any system header (it asks for POSIX 2008), or
   compile that file with -D_POSIX_C_SOURCE=200809L. Link with -ldl -lpthread.
   No CUDA headers or toolkit are needed to build; libcuda.so.1 is opened on
   the first launcher call.

   GLOSSARY
     cache entry    one directory of Triton's cache, <cache>/<hash>/, and its
                    files (tb_kernel: hash, device, artifacts); "kernel" in the
                    format and the Filesystem section
     record         a static launch record (tb_launch_record): a cache key, a
                    kernel name, one or more configs, optional call info
     config         one compiled variant of a record (tb_launch_config): its
                    cubin (kernel_hash, binary_name), argument codes, num_warps,
                    params (constexprs), scratch, tensor descriptors, grid rule
     loaded kernel  a config whose cubin the driver loaded (tb_loaded_kernel),
                    with everything a launch needs decided
     program        one compiled function of a model (tb_program, format
                    sections 5 and 6): its name ("forward", "prefill_64",
                    "decode"), inputs and outputs (tb_tensor_spec), the
                    constants (weights and buffers, their bytes stored
                    once, in a table the bundle's programs share), the
                    workspace plan and the steps (launch, memset, copy)
     symbol         (2.6) a size of a program that varies (a batch, a
                    sequence length), with a range and a divisor; the
                    program's fields that follow it have expressions
                    (tb_program_expr, the grid language with SYM), and
                    its stored fields are the program at every maximum
     instance       a program with symbols at one tuple of their values
                    (tb_program_specialize); a model keeps a few, each with
                    its steps resolved and its graph
     weights file   a safetensors file (>>weights) holding a program's
                    external constants by name: a bundle refers to each
                    weight's tensor (name, dtype, shape, CRC-32) instead of
                    storing its bytes, and a load reads them from the file
     space          where a step's pointer operand points: an input, an
                    output, a constant or a workspace buffer, plus a byte
                    offset (a literal is a scalar argument's value)
     state          a constant the model updates in place (running
                    statistics, caches): kept across runs, reset on request;
                    shared state is one that several programs use (a KV
                    cache that prefill fills and decode reads)
     model          a bundle's programs loaded for running (tb_model):
                    constants on the device once, one workspace, the
                    kernels loaded
     context        the CUDA context a model's calls run in (the one
                    current at load, else the device's primary context):
                    every tb_model_* call makes it current for itself and
                    restores the caller's before it returns
     Objects from here on are made with create(desc) and freed with free,
     where a zeroed desc means the defaults.

   CONTENTS (grep the tag: each section's banner carries it, with the same
   title, in the declarations and again in the implementation)
     >>core      results, errors, options; allocation, logging, strings, sorting,
                 threads, atomics
     >>arena     (implementation only) a bundle's strings and copied bytes
     >>args      argument codes and their conversion to kernel parameters
     >>grid      grid rules: the language, tb_grid_compute, plans, expressions
     >>model     bundles, kernels, records, names: the data model and its arrays
     >>format    the binary format: the block checksum, the one writer, the reader
     >>fs        bundle files; collect, pack and emit of Triton caches
     >>parsers   Triton's metadata JSON, the tt.func line, the autotune choices text
     >>derive    launch records derived from a cache entry's own files
     >>program   programs: dtypes, tensor specs, the one checker, section 5
     >>symbols   shapes that vary: symbols, expressions, bind, specialize
     >>weights   safetensors weights files: the header checked, tensors by name
     >>driver    libcuda through dlopen (TB_NO_LAUNCHER leaves out this and below)
     >>load      a cubin to a loaded kernel: the driver-free plan, the driver steps
     >>launch    the launch path
     >>table     the kernel table: by name or cache key, specializations, loads
     >>autotune  choices per record and size key, the benchmark, the choices file
     >>graphs    CUDA graph capture, replay and update
     >>runner    a program on the GPU: load, run, graph replay, state
     >>upload    (implementation only) file bytes to the device: the reader
                 threads, the pinned staging area, the copies
     >>device    device memory, copies and streams in a model's context

   API AT A GLANCE (every fallible call returns tb_result, tb_ok == 0)
     >>core      tb_result_string, tb_version; tb_error (code, message, kernel,
                 file, offset, errno, CUresult)
     >>args      tb_arg_i/_u/_f/_p, tb_tensor_desc (TMA), tb_arg_convert,
                 tb_arg_code_size, tb_arg_code_from_triton_type,
                 tb_arg_types_from_signature (Triton's signature to codes),
                 tb_fp16_from_double, tb_fp16_to_double, tb_bf16_from_double,
                 tb_bf16_to_double
     >>grid      tb_grid_compute(config, args, arg_count, grid_args, grid_arg_count,
                 grid[3], &err), tb_grid_parse (a Python-syntax expression to a
                 rule's program), tb_grid_text (a program back to text)
     >>model     tb_bundle_create, tb_bundle_free, tb_bundle_add_kernel,
                 tb_bundle_add_artifact, tb_bundle_add_launch_record,
                 tb_bundle_kernel_count, tb_bundle_kernel, tb_bundle_find_kernel,
                 tb_kernel_find_artifact, tb_kernel_name, tb_bundle_launch_record_count,
                 tb_bundle_launch_record, tb_bundle_storage, tb_bundle_names,
                 tb_names_free; tb_bundle_property, tb_bundle_property_count,
                 tb_bundle_property_at, tb_bundle_set_property (key/value
                 strings, 2.4); grid rules in a bundle: tb_bundle_set_grid_rule,
                 tb_bundle_add_grid_rule ("KERNEL=EXPR,...")
     >>format    tb_bundle_write_file, tb_bundle_write_memory,
                 tb_bundle_write_callback, tb_bundle_read_file (mapped, read with
                 pread), tb_bundle_read_memory (a view or a copy),
                 tb_bundle_checksum, tb_xxh3_64, tb_bundle_format_version
     >>fs        tb_pack_cache (a whole cache, streaming), tb_collect_cache,
                 tb_collect_kernel, tb_emit (into a Triton cache),
                 tb_remove_stale_temporaries, tb_cache_dir_resolve;
                 PyTorch's bundler lifecycle: tb_bundler_begin, tb_bundler_put,
                 tb_bundler_put_launch_record, tb_bundler_collect, tb_bundler_end
     >>parsers   tb_parse_metadata_json, tb_parse_ttfunc
     >>derive    tb_bundle_derive_launch_records
     >>program   tb_bundle_program, tb_bundle_program_count,
                 tb_bundle_program_at, tb_bundle_find_program,
                 tb_bundle_set_program, tb_bundle_add_program (checked,
                 copied; constants matched by name),
                 tb_program_read_constant
                 (the checked read path), tb_tensor_spec_extent, tb_dtype_name,
                 tb_dtype_size, tb_dtype_npy, tb_dtype_from_name
     >>symbols   tb_expr_eval, tb_program_bind, tb_program_specialize,
                 tb_program_free (2.6)
     >>weights   tb_weights_open, tb_weights_open_memory, tb_weights_count,
                 tb_weights_at, tb_weights_find, tb_weights_read,
                 tb_weights_crc32, tb_weights_check (a bundle's external
                 constants against a file), tb_weights_path_beside (the
                 file a bundle names, beside it), tb_weights_free, tb_crc32
     >>driver    tb_driver_load, tb_driver_symbol, tb_driver_device_count
     >>load      tb_load_config, tb_load_cubin, tb_load_from_cache, tb_unload,
                 tb_loaded_kernel_info
     >>launch    tb_launch (TB_LAUNCH_GRID_AUTO: the grid from the config's rule;
                 TB_LAUNCH_CHECKED), tb_launch_raw
     >>table     tb_kernel_table_create, tb_kernel_table_launch (by name or key),
                 tb_kernel_table_get, tb_kernel_table_select, tb_kernel_table_find,
                 tb_kernel_table_free
     >>autotune  TB_CONFIG_AUTOTUNE (the fastest config, tuned on first use),
                 tb_kernel_table_set_autotune, tb_kernel_table_choice,
                 tb_kernel_table_save_choices, tb_kernel_table_load_choices,
                 tb_kernel_table_save_choices_memory,
                 tb_kernel_table_load_choices_memory
     >>graphs    tb_graph_begin, tb_graph_end, tb_graph_launch, tb_graph_update,
                 tb_graph_launch_count, tb_graph_free (a graph keeps the kernels
                 it captured loaded until tb_graph_free)
     >>runner    tb_model_load(&desc, &model, &err), tb_model_input_count,
                 tb_model_output_count, tb_model_input, tb_model_output,
                 tb_tensor_for, tb_model_workspace_size,
                 tb_model_constant_bytes, tb_model_upload_ms, tb_model_load_times
                 (2.7: each phase of a load, and its upload), tb_model_pinned_bytes
                 (2.8: the host memory uploads hold pinned), tb_model_state_count, tb_model_run,
                 tb_model_run_workspace (the caller's workspace: several
                 threads), tb_model_reset_state, tb_model_free;
                 several programs: tb_model_program_count, tb_model_program,
                 tb_model_find_program, tb_model_run_program,
                 tb_model_run_program_workspace, tb_model_output_specs (2.6:
                 the outputs at the inputs' sizes); tb_model_execute (2.7:
                 one run described by a tb_run_desc, which the four
                 tb_model_run* calls wrap)
     >>device    device memory and streams in the model's context (no
                 cuda.h): tb_model_device_alloc, tb_model_device_free, tb_model_copy_to_device,
                 tb_model_copy_to_host, tb_model_copy_on_device,
                 tb_model_stream_create, tb_model_stream_free,
                 tb_model_synchronize, tb_model_context, tb_model_device

   EXAMPLE (pack a cache, then launch a kernel out of the bundle)
       tb_bundle *b = NULL; tb_error e;
       tb_bundle_create(NULL, &b, &e);
       if (tb_collect_cache(b, "/home/me/.triton/cache", NULL, NULL, &e))
           fprintf(stderr, "%s\n", e.message);
       tb_bundle_derive_launch_records(b, &e);  // one record per cubin
       tb_bundle_write_file(b, "kernels.tbundle", 0, &e);
       tb_bundle_free(b);  // (tb_pack_cache does these steps in one pass)

       tb_bundle_read_file("kernels.tbundle", NULL, 0, &b, &e); // mmap, zero-copy
       tb_kernel_table *t;
       tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e);
       tb_arg a[4] = { tb_arg_p(x), tb_arg_p(y), tb_arg_p(out), tb_arg_i(n) };
       tb_launch_params p;
       memset(&p, 0, sizeof p);               // zero means default
       p.grid[0] = (uint32_t)(n + 1023) / 1024; p.grid[1] = p.grid[2] = 1;
       p.args = a; p.arg_count = 4;
       // by name: of the specializations Triton compiled for tb_add (x, y,
       // out 16-byte aligned or not, n divisible by 16 or not), the most
       // specialized one these arguments satisfy
       if (tb_kernel_table_launch(t, "tb_add", 0, &p, &e)) fprintf(stderr, "%s\n", e.message);
       tb_kernel_table_free(t); tb_bundle_free(b);

   EXAMPLE (grid rules: give a record from a bare cache its grid, then launch
   it with its arguments alone)
       tb_bundle *b; tb_error e; uint32_t grid[3], changed = 0;
       tb_bundle_read_file("kernels.tbundle", NULL, 0, &b, &e);
       // names are the kernel's arguments as its IR names them; a constexpr
       // the cache inlined (BLOCK_SIZE = 1024) is written as its value
       if (tb_bundle_add_grid_rule(b, "tb_add=cdiv(n, 1024)", &changed, &e))
           fprintf(stderr, "%s\n", e.message);      // parse errors name the column
       const tb_launch_record *r = tb_bundle_launch_record(b, 0);
       tb_arg a[4] = { tb_arg_p(x), tb_arg_p(y), tb_arg_p(out), tb_arg_i(n) };
       if (tb_grid_compute(&r->configs[0], a, 4, NULL, 0, grid, &e) == tb_ok)
           printf("grid %u x %u x %u\n", grid[0], grid[1], grid[2]);
       // or launch with p.flags = TB_LAUNCH_GRID_AUTO: the grid is computed the same way
       tb_bundle_free(b);

   EXAMPLE (run a model that the Python companion's export_model wrote,
   with nothing but this header: device memory, copies and a stream through
   the model, in its context; examples/run_model.c is a whole program)
       tb_bundle *b; tb_model *m; tb_error e; tb_model_desc d;
       void *x = NULL, *y = NULL, *stream = NULL;
       static float host_x[8 * 256], host_y[8 * 256];   // the specs' sizes
       tb_bundle_read_file("mlp.tbundle", NULL, 0, &b, &e);
       memset(&d, 0, sizeof d);                 // zero means default
       d.bundle = b; d.flags = TB_MODEL_GRAPH;  // replay as one CUDA graph
       if (tb_model_load(&d, &m, &e)) {         // constants uploaded once
           fprintf(stderr, "%s\n", e.message); return;
       }
       const tb_tensor_spec *xs = tb_model_input(m, 0), *ys = tb_model_output(m, 0);
       tb_model_device_alloc(m, (size_t)tb_tensor_spec_extent(xs), &x, &e);
       tb_model_device_alloc(m, (size_t)tb_tensor_spec_extent(ys), &y, &e);
       tb_model_stream_create(m, &stream, &e);
       tb_model_copy_to_device(m, x, host_x, sizeof host_x, NULL, &e);
       tb_tensor in = tb_tensor_for(xs, x), out = tb_tensor_for(ys, y);
       if (tb_model_run(m, &in, 1, &out, 1, stream, &e))
           fprintf(stderr, "%s\n", e.message);  // names a tensor that does not fit
       tb_model_copy_to_host(m, host_y, y, sizeof host_y, stream, &e);
       tb_model_synchronize(m, stream, &e);     // host_y holds the output
       tb_model_stream_free(m, stream);
       tb_model_device_free(m, x); tb_model_device_free(m, y);
       tb_model_free(m); tb_bundle_free(b);

   EXAMPLE (a program whose sizes vary, 2.6: one bundle run at the sizes of
   its inputs; encoder.tbundle's ids are int64 [batch, seq], batch 2..16
   and seq 8..128, exported with export_model's dynamic_shapes)
       tb_bundle *b; tb_model *m; tb_error e; tb_model_desc d; tb_tensor_spec os;
       void *ids = NULL, *hidden = NULL, *stream = NULL;
       tb_bundle_read_file("encoder.tbundle", NULL, 0, &b, &e);
       memset(&d, 0, sizeof d);
       d.bundle = b; d.flags = TB_MODEL_GRAPH;  // a graph per size, 8 kept (d.instance_cache)
       if (tb_model_load(&d, &m, &e)) { fprintf(stderr, "%s\n", e.message); return; }
       const tb_program *p = tb_model_program(m, 0);
       for (uint32_t k = 0; k < p->symbol_count; k++)          // batch 2..16, seq 8..128
           printf("%s %lld..%lld\n", p->symbols[k].name, (long long)p->symbols[k].min,
                  (long long)p->symbols[k].max);
       // the specs are the program at every maximum: allocations that fit every size
       tb_model_device_alloc(m, (size_t)tb_tensor_spec_extent(tb_model_input(m, 0)), &ids, &e);
       tb_model_device_alloc(m, (size_t)tb_tensor_spec_extent(tb_model_output(m, 0)), &hidden, &e);
       tb_model_stream_create(m, &stream, &e);
       tb_tensor in = tb_tensor_for(tb_model_input(m, 0), ids);
       in.shape[0] = 3; in.shape[1] = 40; in.strides[0] = 40;  // this call: 3 x 40 tokens
       if (tb_model_output_specs(m, 0, &in, 1, &os, 1, &e)) {  // its output's sizes there
           fprintf(stderr, "%s\n", e.message); return;      // tb_err_shape: out of range
       }
       tb_tensor out = tb_tensor_for(&os, hidden);
       if (tb_model_run(m, &in, 1, &out, 1, stream, &e))      // binds batch = 3, seq = 40
           fprintf(stderr, "%s\n", e.message);
       tb_model_stream_free(m, stream);
       tb_model_device_free(m, ids); tb_model_device_free(m, hidden);
       tb_model_free(m); tb_bundle_free(b);

   THE CONTEXT RULE (a model's calls)
   tb_model_load runs in the CUDA context current when it is called, or,
   when none is, in the primary context of desc.device, which the model
   retains. Every tb_model_* call, the device memory and stream calls
   included, makes that context current for its own duration and restores
   whatever was current before it returns: no call leaves a context
   current, and a program needs none of its own. Allocate, copy and make
   streams through the model (tb_model_device_alloc...), and run the model
   on a stream of its context. A program that also calls the driver itself
   makes tb_model_context(m) current first.

   EXAMPLE (list a bundle's kernels, files and launch records)
       tb_bundle *b; tb_error e; uint32_t i, j;
       if (tb_bundle_read_file("kernels.tbundle", NULL, 0, &b, &e) != tb_ok) {
           fprintf(stderr, "%s\n", e.message);      // says what, where and why
           return;
       }
       for (i = 0; i < tb_bundle_kernel_count(b); i++) {
           const tb_kernel *k = tb_bundle_kernel(b, i);  // a cache directory
           char name[256];
           tb_kernel_name(k, name, sizeof name);          // NAME of NAME.cubin
           printf("%s %s (%u files)\n", k->hash, name, k->artifact_count);
           for (j = 0; j < k->artifact_count; j++)
               printf("  %s %llu bytes\n", k->artifacts[j].name,
                      (unsigned long long)k->artifacts[j].size);
       }
       for (i = 0; i < tb_bundle_launch_record_count(b); i++) {
           const tb_launch_record *r = tb_bundle_launch_record(b, i);
           // the kernel's name; several records may share it (specializations)
           printf("%s: %s, %u config(s), args \"%s\"\n", r->cache_key, r->kernel_name,
                  r->config_count, r->configs[0].arg_types);
       }
       tb_bundle_free(b);

   STRINGS
   Every string a bundle hands out is NUL-terminated and never NULL; an
   optional one that is absent is "" (arg_divisibility). Builders may pass
   NULL for arg_divisibility; the bundle stores "".

   OPTIONS (define before including the implementation)
     TB_STATIC             all functions static (private copy per file)
     TB_ASSERT(x)          default assert(x)
     TB_MALLOC(u,sz) TB_REALLOC(u,p,sz) TB_FREE(u,p)
                           all three or none; u is tb_allocator.user
     TB_MAX_*              sanity limits applied to every input (see below;
                           TB_MAX_ARGS at most 65535)
     TB_NO_LAUNCHER        leave out the CUDA driver / launcher section and its
                           declarations (define it alike in every file)
     TB_LIBCUDA_NAME       the driver library dlopen opens, default "libcuda.so.1"
     TB_NO_LAUNCH_MEMO     no per-thread memo of launches with TB_CONFIG_AUTOTUNE
                           (GCC and Clang builds keep, per thread, 8 entries of
                           192 bytes; each holds while its table lives and no
                           choice is replaced)
     TB_UPLOAD_PIECE       a model's pinned upload: a staging slot's bytes (2 MiB)
     TB_UPLOAD_STAGING     the default of tb_model_desc.pinned_staging_bytes,
                           the most host memory an upload pins (64 MiB)
     TB_UPLOAD_THREADS     the most reader threads an upload starts by default
                           (12; one per core but one)
     TB_UPLOAD_PINNED_MIN  the default of tb_model_desc.pinned_upload_min (64 MiB)
     TB_UPLOAD_PIN_SHARE   an upload pins at most its bytes / this (32)
   Runtime options are structs in which zero means "default": tb_options
   (allocator, logger), tb_collect_options, tb_pack_options, tb_emit_options,
   tb_load_options, tb_launch_params, tb_model_desc.

   ERROR CONTRACT
   Every fallible call returns tb_result (tb_ok == 0) and, when given a
   tb_error*, fills it on failure with the code, a full sentence in
   .message and, where they apply, the kernel, the file, the byte offset in
   the bundle, errno and the CUresult. tb_result_string() names every code.
   On failure the library frees whatever it allocated and leaves outputs
   NULL; emit never leaves a partial kernel directory; no input makes the
   library write outside the target directory, not even a bundle rewritten
   after it was checked (names and lengths are copied before they are
   checked; see tb_bundle_read_memory). A cleaner never removes a live
   writer's temporary directory (writers hold a flock on it). Messages
   escape control bytes that come from names.
   What no call can check: the values inside a caller's tensors. A run
   checks every tensor's dtype, sizes, strides and extent against the
   program, never the data: an index that a model reads from its inputs
   (a token id into an embedding, a position into a KV cache) reaches
   Inductor's device-side bound check, whose assert loses the CUDA context
   of the process (every later call fails with CUDA_ERROR_ASSERT). A C
   caller checks such values before the run, as tbundle generate checks
   each prompt id against the logits' vocabulary and each position
   against generate.max_seq.

   FORMAT
   Bundle format 2.6, specified byte by byte in docs/FORMAT.md. A reader
   refuses a newer major version and skips unknown optional sections; it
   still reads formats 2.5, 2.4, 2.3, 2.2, 2.1, 2.0 and 1.0 (triton_bundle.h
   2.4.0, 2.3.0, 2.2.0, 2.0.0, 1.2.0, 1.1.0 and 1.0.0; the checksum of 1.0 is one
   XXH3-64 over the file). Writers write 2.6, whose sections 4 (grid rules,
   call info), 5 (one program named "forward") and 6 (several programs
   sharing their constants) are optional, so 2.0 to 2.5 readers read its
   files (a 2.3 reader runs a section 5 program, and sees none in section
   6), except that a 2.4 reader refuses a bundle with external constants
   (2.5: its weights in a safetensors file) and a 2.5 reader one with a
   program whose sizes vary (2.6: symbols), each for its unknown flag.

   CHANGES IN 2.0 (from 1.2)
   tb_pack_arg is tb_arg_convert; tb_collect_options.stop_on_error is the
   flag TB_STOP_ON_ERROR in .flags (as in tb_emit_options, whose
   TB_EMIT_STOP_ON_ERROR it replaces); tb_launch_config has .grid and
   tb_launch_record .call (2.2): zero whole structs before filling them
   (memset), as the examples do. New: grid rules and TB_LAUNCH_GRID_AUTO,
   tb_grid_compute, tb_call_info, tb_kernel_name, autotune
   (TB_CONFIG_AUTOTUNE, tb_launch_params.arg_bytes) and CUDA graphs
   (tb_graph_*).

   CHANGES IN 2.1 (from 2.0; additions and fixes, no call changes)
   Grid rules from C (tb_grid_parse, tb_bundle_set_grid_rule,
   tb_bundle_add_grid_rule, tb_pack_options.grid_rules); the autotune
   choices in memory (tb_kernel_table_save_choices_memory, _load_...);
   a graph keeps the kernels it captured; a mapped bundle is read with
   pread, never through its mapping; bools reach the kernel as v != 0.

   CHANGES IN 2.2 (from 2.1; additions, no call changes; format 2.3)
   Programs and the runner: a whole torch.compile'd model in a bundle
   (>>program: tb_bundle_program, tb_bundle_set_program,
   tb_program_read_constant, the dtypes) and run from C (>>runner:
   tb_model_*), with tbundle run and export_model in the Python companion.

   CHANGES IN 2.3 (from 2.2; additions and checks, no call changes; format 2.4)
   Several programs in a bundle sharing constants and state
   (tb_bundle_add_program, tb_model_run_program...; section 6); device
   memory and streams through a model (tb_model_device_alloc...), so that a
   program needs no cuda.h; tb_program has a name (a new last field). New
   refusals: a second launch record with a cache key the bundle has; a
   launch step that writes a read-only constant, or whose grid is not its
   config's rule's or, clusters counted, past CUDA's launch; a run whose
   tensors overlap where the program writes, or lie past their allocation;
   TB_MODEL_STATIC_IO without TB_MODEL_GRAPH. A run's failure names its
   program and step.

   CHANGES IN 2.4 (from 2.3; additions, no call changes; format 2.5)
   Weights in safetensors files: external constants
   (TB_CONSTANT_EXTERNAL: tb_program_constant's new last fields tensor,
   rank, crc32, shape), tb_model_desc.weights and TB_MODEL_VERIFY_WEIGHTS,
   the >>weights section (tb_weights_*, tb_crc32); large uploads through
   pinned buffers and reader threads (tb_model_desc.pinned_upload_min,
   .upload_threads; tb_model_upload_ms).

   CHANGES IN 2.5 (from 2.4; additions, no call changes; format 2.6)
   Shapes that vary: tb_program's new last fields symbol_count, symbols,
   expr_count, exprs and values; TB_GRID_SYM; tb_expr_eval,
   tb_program_bind, tb_program_specialize, tb_program_free; a run of a
   program with symbols binds them from its inputs' sizes (tb_err_shape,
   a new last result code, when they are out of range or disagree) and
   keeps an instance per tuple of values (tb_model_desc.instance_cache);
   tb_model_output_specs; a launch whose grid is 0 blocks is skipped.
   tb_tensor moved before tb_program (it is tb_program_bind's argument).

   CHANGES IN 2.6 (from 2.5; fixes and additions, one flag's value; format 2.6)
   TB_EMIT_VERIFY is 8u (2.3 to 2.5 gave it the bit of TB_STOP_ON_ERROR,
   so a verifying emit wrote with one thread): code that names it builds
   unchanged; TB_EMIT_STOP_ON_ERROR names TB_STOP_ON_ERROR for emit. Every
   flag family is checked at compile time for bits that collide; tb_emit
   refuses flags it does not know; tb_emit_report.threads counts its
   writers. TB_MODEL_VERIFY_WEIGHTS checks the CRC-32 of the bytes uploaded
   (after the upload, the file read once); tb_model_output_specs refuses
   what a run at those sizes refuses, with the run's code;
   desc.instance_cache is at most TB_MAX_INSTANCE_CACHE (tb_err_limit);
   tb_program_bind checks a caller's symbols (tb_err_malformed); a tensor
   with a size 0 has extent 0 whatever its strides; safetensors keys are
   decoded whatever their length; tb_err_arg_mismatch's string covers
   tensors too. New: TB_EMIT_STOP_ON_ERROR, TB_MAX_INSTANCE_CACHE,
   tb_weights_path_beside.

   CHANGES IN 2.7 (from 2.6; additions, no call changes; format 2.6)
   New: tb_model_execute with tb_run_desc (the four tb_model_run* calls
   wrap it) and TB_RUN_NO_GRAPH; tb_grid_text (a grid program back to
   tb_grid_parse's syntax); tb_model_load_times with tb_model_times (each
   phase of a load); tb_model_desc.pinned_staging_bytes (the most host
   memory an upload pins: one staging area a process, reused by later
   loads, freed with the last model that used it). Sections: >>symbols
   (out of >>program), >>upload and >>device (out of >>runner); bundle
   properties and the bundle's grid rules (tb_bundle_set_grid_rule,
   tb_bundle_add_grid_rule) in >>model; >>args and >>grid before >>model,
   tb_grid_op and tb_grid_rule declared in >>grid (tb_bundle,
   tb_config_param and tb_launch_config typedef'd there and defined in the
   model's section: source that names them builds unchanged). Readers of
   an upload: at most 12 by default. Without GCC or Clang atomics a
   kernel-table lookup no longer returns a NULL kernel.

   CHANGES IN 2.8 (from 2.7; additions, no call changes, one behaviour
   change; format 2.6)
   tb_model_load loads the kernels' modules on a thread of its own while
   the calling thread uploads the constants, so the allocator and logger
   of desc.options (and of a desc.table) are now called from two threads
   during a load: a single-threaded allocator (an arena, say) needs
   TB_MODEL_SERIAL_LOAD, which loads the kernels first, as 2.7 did. A
   kernel that fails to load fails the load once the upload is done. New:
   tb_model_times.beside, tb_model_pinned_bytes (the host memory uploads
   hold pinned).

   CHANGES IN 2.9 (from 2.8; the C library is unchanged; format 2.6)
   The Python companion's exporter gives a decode step's one-row products
   one config instead of coordinate descent's (options["narrow_mm_config"]).

   CHANGES IN 2.10 (from 2.9; the C library is unchanged; format 2.6)
   The exporter times a decode step's costly reductions in the step itself
   and gives each a candidate config 3% and 0.25 us faster than its own,
   where the step's Inductor kernels together then take less
   (options["program_tuning"]).

   CHANGES IN 2.11 (from 2.10; the C library is unchanged; format 2.6)
   The exporter compiles a decode step (where its probe finds one-row
   products, on compute capability 9 or more, with a PyTorch that has the
   option) with Inductor's programmatic dependent launch (options["pdl"]):
   its configs carry the "pdl" flag (TB_CONFIG_PDL, from Triton's
   launch_pdl), which the launcher already honoured: the device may start
   such a kernel while the one before it ends, and the kernel waits for
   that one (gdc_wait) before it reads what that one wrote or writes what
   it read or wrote, else after its first read. The exporter clears the
   flag of a kernel that never waits, and plans the workspace so that a
   kernel touches no bytes the one before it used.

   CHANGES IN 2.12 (from 2.11; format 2.6)
   The exporter compiles an argmax over a long row (a greedy token over
   the vocabulary) in two stages, the same index (options["split_argmax"]),
   keeps a buffer's workspace bytes longer only where a launch with the
   "pdl" flag follows its last use (across steps the runner may skip), not
   everywhere, and clears the flag of a kernel that lets the next one start
   before its own wait. In C, only tb_graph_update's refusal of a launch
   with launch attributes now names them all (clusters, cooperative,
   programmatic dependent launch).

   CHANGES IN 2.13 (from 2.12; the C library is unchanged; format 2.6)
   The exporter compiles a decode step's eager attention (one query per
   head, float16 or bfloat16, at most 512 positions of a head of 64, 256
   of 128, 128 of 256) into one Triton kernel of its own
   (options["decode_attention"]) where Inductor made four; the bundle
   carries and launches it like any other kernel.

   CHANGES IN 2.14 (from 2.13; the C library is unchanged; format 2.6)
   That kernel also applies the rotary embedding of the query (transformers'
   q * cos + rotate_half(q) * sin, found with the attention), and waits for
   the kernel before it, so the exporter gives it programmatic dependent
   launch (the config's "pdl" flag); the in-program tuning tries four more
   tilings (longer steps, 16 warps).

   CHANGES IN 2.15 (from 2.14; the C library is unchanged; format 2.6)
   The exporter has Inductor store a decode step's SiLU(gate) * up once (in
   the 1B step, from the kernel of the gate and up products), where it was
   computed again in each program of the down product
   (options["store_activation"]).

   CHANGES IN 2.16 (from 2.15; the C library is unchanged; format 2.6)
   The exporter turns on Inductor's combo kernels for a decode step
   (options["combo"]): the query's, key's and value's products, which read
   one input, run as one kernel (in the 1B step 148 launches where there
   were 166).

   THREADS
   A bundle is safe to read from many threads; building one is not.
   Lifetimes: a kernel table and a loaded kernel live until their free
   (tb_kernel_table_free, tb_unload), except that a graph holds the kernels
   it captured until tb_graph_free, so either order of freeing is safe.
   tb_bundler_put, tb_launch and the kernel table's lookups and launches
   (tb_kernel_table_get, _select, _find, _launch, autotuned ones included:
   one thread benchmarks a key, the others wait for its choice) are
   thread-safe. A graph is captured from one thread; tb_graph_launch may
   run from any.
   tb_collect_cache, tb_pack_cache and tb_emit use worker threads of their
   own (options .threads; the result does not depend on their number);
   tb_model_load one to load kernels beside the upload, and readers; and
   writing or verifying a bundle of 16 MiB or more hashes its 1 MiB blocks
   on up to 8 threads.
   POSIX: the library needs pthreads (the Core section sizes worker teams);
   only the Filesystem section calls the file API (openat family, mmap,
   pread, flock), and only the Driver section calls dlopen.
*/
#if defined(TRITON_BUNDLE_IMPLEMENTATION) && !defined(_WIN32) && !defined(_POSIX_C_SOURCE) && \
    !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE) && !defined(_XOPEN_SOURCE)
/* the filesystem section needs POSIX 2008 (openat, fdopendir); include this
   header first in the implementation file, or define this yourself */
#define _POSIX_C_SOURCE 200809L
#endif

#ifndef TRITON_BUNDLE_H
#define TRITON_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#define TB_VERSION_MAJOR 2
#define TB_VERSION_MINOR 16
#define TB_VERSION_PATCH 0
#define TB_VERSION_STRING "2.16.0"
#define TB_FORMAT_VERSION_MAJOR 2
#define TB_FORMAT_VERSION_MINOR 6

#ifndef TBDEF
#ifdef TB_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define TBDEF static __attribute__((unused)) /* a file may use only part of the API */
#else
#define TBDEF static
#endif
#else
#ifdef __cplusplus
#define TBDEF extern "C"
#else
#define TBDEF extern
#endif
#endif
#endif

/* Sanity limits: inputs beyond them are refused with tb_err_limit. */
#ifndef TB_MAX_KERNELS
#define TB_MAX_KERNELS 1000000u
#endif
#ifndef TB_MAX_ARTIFACTS_PER_KERNEL
#define TB_MAX_ARTIFACTS_PER_KERNEL 4096u
#endif
#ifndef TB_MAX_ARTIFACT_SIZE
#define TB_MAX_ARTIFACT_SIZE (((uint64_t)1) << 32)
#endif
#ifndef TB_MAX_NAME_LENGTH
#define TB_MAX_NAME_LENGTH 255u
#endif
#ifndef TB_MAX_STRING_LENGTH
#define TB_MAX_STRING_LENGTH 65536u
#endif
#ifndef TB_MAX_RECORDS
#define TB_MAX_RECORDS 1000000u
#endif
#ifndef TB_MAX_CONFIGS_PER_RECORD
#define TB_MAX_CONFIGS_PER_RECORD 4096u
#endif
#ifndef TB_MAX_PARAMS_PER_CONFIG
#define TB_MAX_PARAMS_PER_CONFIG 256u
#endif
#ifndef TB_MAX_SECTIONS
#define TB_MAX_SECTIONS 1024u
#endif
/* Cache paths one .json file may name (collect) or sentinels it may hold
   (emit); Triton's own name a handful. */
#ifndef TB_MAX_SENTINELS
#define TB_MAX_SENTINELS 4096u
#endif
#ifndef TB_MAX_JSON_DEPTH
#define TB_MAX_JSON_DEPTH 64
#endif
#ifndef TB_MAX_TEXT_SIZE
#define TB_MAX_TEXT_SIZE (((uint64_t)1) << 30)
#endif
/* Kernel arguments, scratch pointers excluded. CUDA's classic parameter
   block is 4 KiB; 512 eight-byte slots fill it, and a launch keeps two
   arrays of this size on the stack (8 KiB), never on the heap. PyTorch's
   121 is too few for large Inductor fusions. */
#ifndef TB_MAX_ARGS
#define TB_MAX_ARGS 512u
#endif
/* TB_MAX_ARGS is at most 65535: a loaded kernel keeps argument indices in
   16 bits. Checked in C, not by the preprocessor, so that a definition
   with a cast works; a larger value fails to compile here. */
typedef char tb__TB_MAX_ARGS_is_at_most_65535[(TB_MAX_ARGS) <= 65535u ? 1 : -1];

/* ======================================================================
   >>core  Core: results, errors, options
   ====================================================================== */
typedef enum tb_result {
    tb_ok = 0,
    tb_err_invalid_argument,
    tb_err_out_of_memory,
    tb_err_io,
    tb_err_truncated,
    tb_err_bad_magic,
    tb_err_unsupported_version,
    tb_err_checksum,
    tb_err_malformed,
    tb_err_limit,
    tb_err_bad_name,
    tb_err_not_found,
    tb_err_sentinel,
    tb_err_unsupported_type,
    tb_err_parse,
    tb_err_no_driver,
    tb_err_no_device,
    tb_err_cuda,
    tb_err_arg_mismatch,
    tb_err_arg_range,
    tb_err_misaligned,
    tb_err_shared_memory,
    tb_err_scratch,
    tb_err_shape,         /* (2.6) an input's size outside its symbol's range, or disagreeing with another */
    tb_result_count_
} tb_result;

typedef struct tb_error {
    tb_result code;
    int sys_errno;        /* errno of the failing OS call, 0 if none */
    int cuda_result;      /* CUresult of the failing driver call, 0 if none */
    long long offset;     /* byte offset in the bundle input, -1 if none */
    char kernel[128];     /* kernel hash or name concerned, "" if none */
    char file[256];       /* file or path concerned, "" if none */
    char message[640];    /* one sentence with all of the above */
} tb_error;

TBDEF const char *tb_result_string(tb_result r);
TBDEF const char *tb_version(void);

/* Options: allocator and logger (zero means default) */
typedef struct tb_allocator {
    void *(*alloc)(void *user, size_t size);
    void *(*realloc)(void *user, void *ptr, size_t size);
    void (*free)(void *user, void *ptr);
    void *user;
} tb_allocator;

typedef enum tb_log_level { TB_LOG_ERROR = 0, TB_LOG_WARN, TB_LOG_INFO, TB_LOG_DEBUG } tb_log_level;

/* The allocator and the logger may be called from the worker threads of
   tb_collect_cache, tb_pack_cache and tb_emit, and (2.8) of tb_model_load
   (its desc.options', and a desc.table's): give thread-safe ones, or set
   those options' threads to 1 (for tb_model_load: TB_MODEL_SERIAL_LOAD). */
typedef struct tb_options {
    tb_allocator allocator;  /* all three functions or none */
    void (*log)(void *user, tb_log_level level, const char *message);
    void *log_user;
} tb_options;

/* ======================================================================
   >>args  Arguments: codes and conversions
   ====================================================================== */
/* Triton signature type ("*fp32", "i32", "u1", "bf16", "constexpr", ...) to
   an argument code; *code = 0 for constexpr (dropped). TMA descriptors and
   tensordesc<...> are refused with tb_err_unsupported_type. */
TBDEF tb_result tb_arg_code_from_triton_type(const char *type, char *code, tb_error *err);
/* A whole signature to a NUL-terminated code string. */
TBDEF tb_result tb_arg_types_from_signature(const char *const *types, size_t count, char *out,
                                            size_t out_capacity, tb_error *err);
/* Bytes the code occupies as a kernel parameter; 0 for an unknown code. */
TBDEF uint32_t tb_arg_code_size(char code);
/* One 8-byte argument slot, converted at launch to the parameter's type:
   integers from .i/.u, floats from .f, pointers from .p. */
typedef union tb_arg {
    int64_t i;
    uint64_t u;
    double f;
    void *p;
} tb_arg;

static inline tb_arg tb_arg_i(int64_t v) { tb_arg a; a.i = v; return a; }
static inline tb_arg tb_arg_u(uint64_t v) { tb_arg a; a.u = v; return a; }
static inline tb_arg tb_arg_f(double v) { tb_arg a; a.f = v; return a; }
static inline tb_arg tb_arg_p(const void *v) { tb_arg a; a.u = (uint64_t)(uintptr_t)v; return a; }

/* fp16: round to nearest even, straight from double (as PyFloat_Pack2).
   bf16: as Triton's launcher: double -> float (nearest even), then the top
   16 bits (truncation). */
TBDEF uint16_t tb_fp16_from_double(double value);
TBDEF uint16_t tb_bf16_from_double(double value);
TBDEF double tb_fp16_to_double(uint16_t bits);
TBDEF double tb_bf16_to_double(uint16_t bits);
/* Converts one argument to its parameter bytes (little-endian, in the low
   bytes of *slot). checked: range errors for narrowing. */
TBDEF tb_result tb_arg_convert(char code, tb_arg value, int checked, tb_arg *slot, tb_error *err);
/* ======================================================================
   >>grid  Grid rules: the language, evaluation and expressions
   ====================================================================== */
/* The model's types that grid rules name (defined in >>model): */
typedef struct tb_bundle tb_bundle;
typedef struct tb_config_param tb_config_param;
typedef struct tb_launch_config tb_launch_config;
/* Grid rules (format 2.2): how a config's grid follows from a launch's
   arguments, so that a runtime can launch a kernel by name with its
   arguments alone (TB_LAUNCH_GRID_AUTO). One small program per dimension
   (tb_grid_rule, tb_grid_op: >>model), in postfix order over 64-bit signed
   integers: operands push a value, operators pop two (NEG: one) and push
   one. Division and modulo are Python's (floor), as Inductor's and
   Triton's grid expressions are written; an overflow, a division by zero
   or a grid out of CUDA's range is an error, never a wrong launch. Records
   that the Python companion exports carry them; records derived from a
   bare cache do not. A program's expressions (2.6, >>program) are the
   same language over CONST, SYM and the operators. The implementation's
   TB__GRID_OPS table is the one list of the operations: each one's name,
   its spelling in a grid expression and the values it pops. */
#define TB_GRID_CONST 1u     /* push value */
#define TB_GRID_ARG 2u       /* push launch argument `index` (an integer or bool code) */
#define TB_GRID_PARAM 3u     /* push the config's param `index` (a constexpr such as XBLOCK) */
#define TB_GRID_EXTRA 4u     /* push tb_launch_params.grid_args[index] (Inductor's _grid_0...) */
#define TB_GRID_SYM 5u       /* (2.6) push the program's symbol `index`: program expressions only, never a grid rule */
#define TB_GRID_ADD 16u
#define TB_GRID_SUB 17u
#define TB_GRID_MUL 18u
#define TB_GRID_FLOORDIV 19u /* a // b, rounding toward minus infinity */
#define TB_GRID_CEILDIV 20u  /* ceil(a / b): triton.cdiv, Inductor's -(a // -b) */
#define TB_GRID_MOD 21u      /* a % b, the sign of b */
#define TB_GRID_MIN 22u
#define TB_GRID_MAX 23u
#define TB_GRID_NEG 24u
#ifndef TB_MAX_GRID_OPS
#define TB_MAX_GRID_OPS 64u      /* per dimension */
#endif
#define TB_GRID_STACK 16u        /* deepest stack a program may reach */
#define TB_MAX_GRID_EXTRA 8u     /* grid_args a rule may read */
/* Grid rules (format 2.2): a config's grid from a launch's arguments, one
   program per dimension in the grid language (the operations TB_GRID_*,
   the limits and the language: >>grid). */
typedef struct tb_grid_op {
    uint32_t op;                 /* TB_GRID_* (>>grid) */
    uint32_t index;              /* ARG, PARAM, EXTRA: which; else 0 */
    int64_t value;               /* CONST: the value; else 0 */
} tb_grid_op;
typedef struct tb_grid_rule {
    uint32_t op_count[3];        /* x, y, z: each 1..TB_MAX_GRID_OPS */
    const tb_grid_op *ops[3];
} tb_grid_rule;
/* The grid config's rule gives for these launch arguments (arg_count =
   strlen(config->arg_types)) and grid_args (Inductor's fixed grids pass
   theirs: the EXTRA operands). tb_err_not_found: the config has no rule;
   tb_err_arg_range: an overflow, a division by zero, a missing grid_arg,
   or a grid past CUDA's limits (x < 2^31, y and z < 65536). */
TBDEF tb_result tb_grid_compute(const tb_launch_config *config, const tb_arg *args, uint32_t arg_count,
                                const int64_t *grid_args, uint32_t grid_arg_count, uint32_t grid[3],
                                tb_error *err);
/* Compiles one grid expression in Python's syntax, as the Python companion
   writes them: integer literals, names, + - * // %, unary minus,
   parentheses, cdiv (or triton.cdiv, ceildiv), min, max, int() and
   meta['NAME']. A name is the argument of that name (arg_names[i]), else
   the param of that name (a constexpr the config records; one a bare cache
   inlined is written as its value). Constant parts are folded as the
   Python companion folds them, so both give one program for one string.
   The grammar is a strict subset of Python's: integers within int64
   (-9223372036854775808 is INT64_MIN), no trailing commas, comments,
   bools or line breaks; 64 levels of nesting at most. ops holds
   TB_MAX_GRID_OPS; tb_err_parse names the column. */
TBDEF tb_result tb_grid_parse(const char *expr, const char *const *arg_names, uint32_t arg_count,
                              const tb_config_param *params, uint32_t param_count, tb_grid_op *ops,
                              uint32_t *op_count, tb_error *err);
/* tb_grid_parse's inverse, for people and tools (tbundle list): a
   program as one infix expression, written into buf (cap bytes, always
   NUL-terminated when cap > 0, cut short if it does not fit; buf may be
   NULL when cap is 0); returns the text's full length, as snprintf does.
   Operands: CONST its value, ARG arg_names[index] ("argN" without one),
   PARAM params[index].name ("paramN" without one), EXTRA grid_args[N],
   SYM symN; operators as the grid language writes them: (a + b), (a - b),
   (a * b), (a // b), (a % b), cdiv(a, b), min(a, b), max(a, b), -(a).
   Given the names it was parsed with (identifiers), the text of a program
   tb_grid_parse gave parses back to that program, unless its parentheses
   nest past the parser's 64 levels (each operator adds one, a NEG two).
   ops that are no program of the language (none, an op this version does
   not know, an operator with an index or a value, a short stack or one
   past TB_GRID_STACK, other than one value left) give "?". */
TBDEF size_t tb_grid_text(const tb_grid_op *ops, uint32_t op_count, const char *const *arg_names, uint32_t arg_count,
                          const tb_config_param *params, uint32_t param_count, char *buf, size_t cap);

/* ======================================================================
   >>model  Data model: bundles, kernels, records, names
   ====================================================================== */
/* One file of a kernel directory. data is 16-byte aligned when it comes
   from a bundle file, so a cubin can go straight to the driver. */
typedef struct tb_artifact {
    const char *name;
    const void *data;
    uint64_t size;
} tb_artifact;

/* One Triton cache directory: <cache>/<hash>/ and its files. */
typedef struct tb_kernel {
    const char *hash;
    int32_t device;
    uint32_t artifact_count;
    const tb_artifact *artifacts;
} tb_kernel;

typedef struct tb_scratch {
    uint64_t size;
    uint32_t align;
    uint32_t present;   /* 1: the kernel takes this scratch pointer parameter */
} tb_scratch;

struct tb_config_param {  /* (typedef: >>grid) */
    const char *name;   /* e.g. "XBLOCK" */
    int64_t value;
};

/* Config flags (tb_launch_config.flags), a field of their own: launch
   flags (tb_launch_params.flags) are TB_LAUNCH_*. */
#define TB_CONFIG_COOPERATIVE 1u  /* cooperative grid launch */
#define TB_CONFIG_PDL 2u          /* programmatic dependent launch */
/* the names of 1.1 and before, kept so that code using them builds */
#define TB_LAUNCH_COOPERATIVE TB_CONFIG_COOPERATIVE
#define TB_LAUNCH_PDL TB_CONFIG_PDL
/* arg_types were read from the IR (tbundle pack on a bare cache), which
   has no signedness: u8 reads as i8, and so on. Checked mode then takes a
   value in the signed or the unsigned range of the width. */
#define TB_CONFIG_TYPES_FROM_IR 4u

/* How a Triton tensor descriptor argument (tensordesc<...> in the
   signature, 'T' in arg_types) becomes kernel parameters, from the kernel's
   tensordesc_meta. tma 1: the kernel reads through the TMA unit; the
   launcher encodes a CUtensorMap (cuTensorMapEncodeTiled) from the
   caller's tb_tensor_desc and passes it (128 bytes), then the shape (i32
   each) and the strides (i64 each). tma 0 (Triton lowered the descriptor
   to plain loads): the base pointer, shape and strides as i64, the padding
   flag (1 byte), then shape as i32 and strides as i64 again, as Triton 3.6
   passes them. */
#define TB_MAX_TENSOR_RANK 5u
#define TB_MAX_TENSORDESCS 16u   /* per config */
typedef struct tb_tensordesc_meta {
    uint32_t tma;                /* 1: lowered to TMA (Triton's tensordesc_meta entry) */
    uint32_t rank;               /* 1..TB_MAX_TENSOR_RANK */
    uint32_t swizzle;            /* CU_TENSOR_MAP_SWIZZLE_*: 0 none .. 3 128B */
    uint32_t elem_size;          /* bytes: 1, 2, 4 or 8 */
    uint32_t elem_type;          /* Triton's device-side TMA dtype number */
    uint32_t fp4_padded;
    uint32_t block[TB_MAX_TENSOR_RANK]; /* the block shape, outermost first */
} tb_tensordesc_meta;

/* What a caller passes for a 'T' argument: tb_arg_p(&desc). The host-side
   counterpart of Triton's TensorDescriptor. */
typedef struct tb_tensor_desc {
    const void *base;            /* device pointer, 16-byte aligned */
    uint32_t rank;               /* as the kernel was compiled for */
    int64_t shape[TB_MAX_TENSOR_RANK];   /* elements, outermost first */
    int64_t strides[TB_MAX_TENSOR_RANK]; /* elements, outermost first; the last is 1 */
    int padding_nan;             /* 1: reads out of bounds give NaN (padding="nan"), 0: zero */
} tb_tensor_desc;


/* What a caller of a record should know beyond the configs (format 2.2,
   from the exporter): the launch arguments' names, and which ones the
   kernel writes (an autotuner restores them between trials), which it
   expects zeroed, and which the autotune choice is keyed on. Indexes are
   positions in arg_types. */
typedef struct tb_call_info {
    uint32_t arg_count;          /* 0, or one name per code of arg_types */
    const char *const *arg_names;
    uint32_t mutated_count;
    const uint32_t *mutated;
    uint32_t reset_count;
    const uint32_t *reset;
    uint32_t key_count;
    const uint32_t *key;
} tb_call_info;

/* One compiled config of a statically launchable kernel. arg_types holds
   one code per non-constexpr argument, PyTorch's codes plus '?' and 'T':
     O pointer  ? bool (i1, u1: 1 byte)  b i8  h i16  i i32  l i64
     B u8  H u16  I u32  K u64  f fp32  d fp64  e fp16  y bf16
     T tensor descriptor (a tb_tensor_desc *, see tb_tensordesc_meta)
   PyTorch writes i1 as 'i' and u1 as 'I'; loading with the parameter check
   sees the cubin's 1-byte parameter and passes a bool there.
   arg_divisibility, when not empty, is as long as arg_types: '1' where the
   cubin assumes the argument divisible by 16 (16-byte aligned pointer). */
struct tb_launch_config { /* (typedef: >>grid) */
    const char *kernel_hash;     /* ties the config to a tb_kernel */
    const char *function_name;   /* symbol in the cubin */
    const char *binary_name;     /* artifact name, e.g. "tb_add.cubin" */
    const char *arg_types;
    const char *arg_divisibility;
    uint32_t num_warps;
    uint32_t num_ctas;
    uint32_t shared_mem;         /* dynamic shared memory in bytes */
    uint32_t flags;              /* TB_CONFIG_COOPERATIVE | TB_CONFIG_PDL | TB_CONFIG_TYPES_FROM_IR */
    uint32_t cluster_dims[3];    /* 0,0,0: (num_ctas,1,1) when num_ctas > 1 */
    tb_scratch global_scratch;
    tb_scratch profile_scratch;
    uint32_t param_count;
    const tb_config_param *params;
    uint32_t tensordesc_count;   /* one per 'T' in arg_types, in order */
    const tb_tensordesc_meta *tensordescs;
    const tb_grid_rule *grid;    /* NULL: no rule; the caller gives the grid (2.2) */
};

/* PyTorch's StaticallyLaunchedAutotuner: a cache key, a kernel name and
   one or more compiled configs. */
typedef struct tb_launch_record {
    const char *cache_key;
    const char *kernel_name;
    uint32_t config_count;
    const tb_launch_config *configs;
    const tb_call_info *call;    /* NULL: none (2.2) */
} tb_launch_record;


typedef enum tb_ownership { TB_COPY = 0, TB_REFERENCE = 1 } tb_ownership;
typedef enum tb_storage {
    TB_STORAGE_OWNED = 0,   /* the bundle owns every byte it points to */
    TB_STORAGE_VIEW,        /* points into a caller's buffer that must outlive it */
    TB_STORAGE_MAPPED       /* points into a file mapping the bundle owns */
} tb_storage;

/* Names metadata, as PyTorch's TritonBundlerMetadata. One allocation;
   free with tb_names_free. */
typedef struct tb_names {
    uint32_t cached_count;
    const char *const *cached;               /* stems of .cubin/.hsaco/.spv */
    uint32_t static_count;
    const char *const *statically_launched;  /* kernel names of the records */
} tb_names;

TBDEF tb_result tb_bundle_create(const tb_options *options, tb_bundle **out, tb_error *err);
TBDEF void tb_bundle_free(tb_bundle *bundle);
TBDEF tb_result tb_bundle_add_kernel(tb_bundle *bundle, const char *hash, int32_t device,
                                     uint32_t *out_index, tb_error *err);
TBDEF tb_result tb_bundle_add_artifact(tb_bundle *bundle, uint32_t kernel_index, const char *name,
                                       const void *data, uint64_t size, tb_ownership ownership,
                                       tb_error *err);
/* Deep-copies and validates the record. */
TBDEF tb_result tb_bundle_add_launch_record(tb_bundle *bundle, const tb_launch_record *record,
                                            tb_error *err);

TBDEF uint32_t tb_bundle_kernel_count(const tb_bundle *bundle);
TBDEF const tb_kernel *tb_bundle_kernel(const tb_bundle *bundle, uint32_t index);
TBDEF uint32_t tb_bundle_launch_record_count(const tb_bundle *bundle);
TBDEF const tb_launch_record *tb_bundle_launch_record(const tb_bundle *bundle, uint32_t index);
TBDEF tb_storage tb_bundle_storage(const tb_bundle *bundle);
TBDEF const tb_kernel *tb_bundle_find_kernel(const tb_bundle *bundle, const char *hash);
TBDEF const tb_artifact *tb_kernel_find_artifact(const tb_kernel *kernel, const char *name);
/* The kernel's function name, as Triton names its files: NAME of the first
   NAME.cubin, else of __grp__NAME.json. Written to out (cap bytes, always
   NUL-terminated when cap > 0, cut short if it does not fit); returns its
   full length, as snprintf does, and 0 when the kernel has neither file. */
TBDEF size_t tb_kernel_name(const tb_kernel *kernel, char *out, size_t cap);
TBDEF tb_result tb_bundle_names(const tb_bundle *bundle, tb_names **out, tb_error *err);
TBDEF void tb_names_free(tb_names *names);

/* Properties (2.4): key/value strings a bundle of programs carries for
   its callers, such as "generate.max_seq" (the positions a KV cache
   holds). Keys are 1 to 255 bytes and unique, values up to
   TB_MAX_STRING_LENGTH bytes; a bundle with properties is written as
   section 6. */
#ifndef TB_MAX_PROPERTIES
#define TB_MAX_PROPERTIES 4096u
#endif
TBDEF uint32_t tb_bundle_property_count(const tb_bundle *bundle);
/* The value of key, or NULL; tb_bundle_property_at gives the key too. */
TBDEF const char *tb_bundle_property(const tb_bundle *bundle, const char *key);
TBDEF const char *tb_bundle_property_at(const tb_bundle *bundle, uint32_t index, const char **key);
/* Sets key to value (a copy of each; value NULL removes the key). */
TBDEF tb_result tb_bundle_set_property(tb_bundle *bundle, const char *key, const char *value, tb_error *err);


/* Gives config `config` of record `record` (TB_ALL_CONFIGS: every config)
   the grid rule, checked against each config and copied into the bundle
   (NULL removes it). */
#define TB_ALL_CONFIGS 0xFFFFFFFFu
TBDEF tb_result tb_bundle_set_grid_rule(tb_bundle *bundle, uint32_t record, uint32_t config, const tb_grid_rule *rule,
                                        tb_error *err);
/* spec "KERNEL=EXPR[,EXPR[,EXPR]]" (y and z default to 1): the rule for
   every record whose kernel name is KERNEL, or the one whose cache key is
   (to pick one specialization). Names are the record's call info
   arguments, else those its kernel's IR records (loc("n")).
   tbundle pack --grid uses it. tb_err_not_found if no record matches. */
TBDEF tb_result tb_bundle_add_grid_rule(tb_bundle *bundle, const char *spec, uint32_t *records_changed, tb_error *err);

/* ======================================================================
   >>format  Format: the checksum, the writer and the reader
   ====================================================================== */
#define TB_READ_COPY 1u          /* copy the input; default: views into it */
#define TB_READ_NO_CHECKSUM 2u   /* trusted input: skip the checksum (structure still checked) */

typedef int (*tb_write_fn)(void *user, const void *data, size_t size); /* 0 = ok */

/* Count-then-fill: with buffer NULL, *out_size receives the size needed. */
TBDEF tb_result tb_bundle_write_memory(const tb_bundle *bundle, void *buffer, size_t capacity,
                                       size_t *out_size, tb_error *err);
TBDEF tb_result tb_bundle_write_callback(const tb_bundle *bundle, tb_write_fn write, void *user,
                                         tb_error *err);
#define TB_WRITE_FSYNC 1u  /* flush the file to disk before the rename */

/* Writes PATH.tmp.<pid>.<n> and renames it onto path, so readers see the
   old file or the new one, never a torn one. Without TB_WRITE_FSYNC a power
   loss can still leave a damaged file, which the checksum then refuses. */
TBDEF tb_result tb_bundle_write_file(const tb_bundle *bundle, const char *path, unsigned flags, tb_error *err);
/* Reads a bundle from data. Without TB_READ_COPY the bundle is a view
   (zero-copy): its artifacts' data point into data, so the caller keeps
   data alive and unchanged until tb_bundle_free. Everything that decides a
   path, a size or a count (hashes, file names, records, lengths) is copied
   and checked while reading, so bytes changed afterwards can change only
   the payload bytes a caller or emit sees, never where emit writes or how
   much it reads. The checksum vouches for the bytes as they were read. */
TBDEF tb_result tb_bundle_read_memory(const void *data, size_t size, const tb_options *options,
                                      unsigned flags, tb_bundle **out, tb_error *err);
/* Maps the file (TB_READ_COPY reads it into memory instead) and keeps it
   open until tb_bundle_free; artifacts' data point into the mapping
   (zero-copy). The library itself never reads through the mapping: the
   checksum and the structure are read with pread (names and structure
   copied and checked, as with read_memory), and its own uses of the
   payloads (emit, deriving records, loading a cubin) copy them from the
   file by offset (pread, sendfile). So a file another process truncates
   or rewrites during the read or afterwards gives tb_err_io (or, for
   rewritten payload bytes, those bytes), never SIGBUS, and nothing the size
   of the file is allocated. A caller that reads artifact data itself can
   still fault as with any mapping: pass TB_READ_COPY where others may
   truncate the file (tbundle list --json does). Writing a mapped bundle
   copies from the mapping (refused at once if the file is already
   shorter). Each mapped bundle holds one file descriptor until freed. */
TBDEF tb_result tb_bundle_read_file(const char *path, const tb_options *options, unsigned flags,
                                    tb_bundle **out, tb_error *err);
/* The format's checksum of size bytes, what the trailer of a format 2
   bundle holds for the bytes before it: XXH3-64 of the little-endian XXH3-64
   values of each 1 MiB block (the last may be shorter). Large inputs are
   hashed on several threads. */
TBDEF uint64_t tb_bundle_checksum(const void *data, size_t size);
/* XXH3-64 (XXH3_64bits: seed 0, default secret), `xxhsum -H3`'s hash; the
   checksum of the blocks above, and of a whole format 1.0 file. */
TBDEF uint64_t tb_xxh3_64(const void *data, size_t size);
/* The format version of the bytes a bundle was read from, as major * 65536
   + minor (0x20000 for 2.0); 0 for a bundle built in memory. */
TBDEF uint32_t tb_bundle_format_version(const tb_bundle *bundle);

/* ======================================================================
   >>fs  Filesystem: bundle files, collect, pack and emit
   ====================================================================== */
#define TB_REPLACE_SENTINEL "[REPLACE]"

/* explicit_dir, then TRITON_CACHE_DIR, then $TRITON_HOME/.triton/cache,
   then $HOME/.triton/cache. */
TBDEF tb_result tb_cache_dir_resolve(const char *explicit_dir, char *out, size_t capacity,
                                     tb_error *err);

/* In tb_collect_options.flags and tb_emit_options.flags alike: stop at the
   first failing kernel instead of going on with the others (which is the
   default: a kernel that fails is reported and skipped). */
#define TB_STOP_ON_ERROR 2u

typedef struct tb_collect_options {
    /* The cache path that the .json files name (where Triton wrote the
       cache). NULL: the cache directory's absolute path as given. */
    const char *recorded_cache_dir;
    unsigned flags;              /* TB_STOP_ON_ERROR */
    /* collect_cache: called after each directory looked at (done of total),
       pack_cache after each batch of 16 written; from the calling thread */
    void (*progress)(void *user, uint32_t done, uint32_t total);
    void *user;
    /* collect_cache and pack_cache: reader threads; 0: one per online CPU
       (at most 8), 1: none. The result is the same whatever the count. */
    unsigned threads;
} tb_collect_options;

typedef struct tb_collect_report {
    uint32_t collected;          /* kernels added */
    uint32_t missing;            /* kernel directories that did not exist (skipped) */
    uint32_t failed;             /* kernels refused (sentinel, unreadable, limits) */
    uint32_t skipped;            /* entries that are not kernel directories */
} tb_collect_report;

/* Reads every regular file of <cache_dir>/<hash>/ into a new kernel; no
   symlinks followed, no subdirectories. A missing directory returns
   tb_err_not_found and adds nothing. */
TBDEF tb_result tb_collect_kernel(tb_bundle *bundle, const char *cache_dir, const char *hash,
                                  int32_t device, const tb_collect_options *options,
                                  tb_error *err);
/* Every kernel directory (one holding __grp__*.json) of a cache, in name
   order. Two kinds of failure:
   - per kernel: a kernel directory that cannot be opened or read, a file
     or a kernel over a TB_MAX_* limit, a name that is not safe, a .json
     that already holds TB_REPLACE_SENTINEL or that would hold more than
     TB_MAX_SENTINELS, a hash already in the bundle, memory for that
     kernel. The kernel is left out whole, logged at TB_LOG_WARN and
     counted in report->failed; collect goes on with the others (unless
     TB_STOP_ON_ERROR) and returns the first such failure in the end, with
     the kernels it could read added. Entries that are not kernel
     directories only count in report->skipped.
   - fatal: a NULL argument or a cache directory that cannot be opened or
     listed (nothing is added), or memory for the workers or for merging
     their kernels; it returns at once. */
TBDEF tb_result tb_collect_cache(tb_bundle *bundle, const char *cache_dir,
                                 const tb_collect_options *options, tb_collect_report *report,
                                 tb_error *err);

/* tb_collect_cache, tb_bundle_derive_launch_records and tb_bundle_write_file
   in one pass, with the same bytes as a result, streaming: reader threads
   collect batches of kernels while the calling thread writes finished
   batches in order, so reading and writing overlap and memory holds only
   the batches in flight, never the whole bundle. */
typedef struct tb_pack_options {
    tb_collect_options collect;  /* recorded_cache_dir, threads, progress, flags */
    int no_launch_records;       /* 1: derive no launch records (an empty section 2) */
    unsigned write_flags;        /* TB_WRITE_FSYNC */
    /* grid rules for the derived records, each "KERNEL=EXPR[,EXPR[,EXPR]]"
       (tb_bundle_add_grid_rule); one that matches no record fails the pack */
    const char *const *grid_rules;
    uint32_t grid_rule_count;
} tb_pack_options;

typedef struct tb_pack_report {
    tb_collect_report collect;
    uint32_t records;            /* launch records written */
    uint64_t bytes;              /* the file's size */
    tb_error first_failure;      /* the first kernel refused, when collect.failed > 0 */
} tb_pack_report;

/* tb_ok: the file is in place, holding every kernel that could be read;
   refused kernels are left out, logged and counted (report->collect.failed)
   unless TB_STOP_ON_ERROR is in collect.flags, which fails the pack at the first. On
   failure nothing is left at path or beside it. options: the allocator and
   logger (NULL: defaults). */
TBDEF tb_result tb_pack_cache(const char *cache_dir, const char *path, const tb_pack_options *pack_options,
                              const tb_options *options, tb_pack_report *report, tb_error *err);

/* DIFFERS: present with other files than the bundle's (TB_EMIT_VERIFY),
   and left as it is; REPLACED: such a one replaced (TB_EMIT_REPLACE). */
typedef enum tb_emit_status {
    TB_EMIT_WRITTEN = 0, TB_EMIT_PRESENT, TB_EMIT_FAILED, TB_EMIT_DIFFERS, TB_EMIT_REPLACED
} tb_emit_status;

#define TB_EMIT_FSYNC 1u          /* fsync files and directories before and after the rename */
/* A kernel directory already in the cache is compared with the bundle's
   kernel: each of its files there with the same bytes (a .json with the
   sentinel replaced by this cache's path, as emit writes it). Files the
   bundle does not have are not looked at. One that differs is DIFFERS
   (counted, reported through on_kernel with an error that names the file,
   and tb_emit returns tb_err_io); with TB_EMIT_REPLACE it is replaced: the
   new directory is written beside it, the old one renamed aside (a tmp.*
   directory, which a crash may leave for tb_remove_stale_temporaries), the
   new one renamed in and the old one removed, so that a reader sees the
   old kernel, the new one, or for a moment none, never a mix. */
#define TB_EMIT_VERIFY 8u         /* (2.6.0; 2u from 2.3.0 to 2.5.0, which was TB_STOP_ON_ERROR) */
#define TB_EMIT_REPLACE 4u        /* implies TB_EMIT_VERIFY */
/* TB_STOP_ON_ERROR under emit's own name; the same bit, 2u */
#define TB_EMIT_STOP_ON_ERROR TB_STOP_ON_ERROR

typedef struct tb_emit_options {
    unsigned flags;
    /* Called once per kernel, in kernel order, from the calling thread. */
    void (*on_kernel)(void *user, uint32_t index, const tb_kernel *kernel, tb_emit_status status,
                      const tb_error *error);
    void *user;
    /* writer threads; 0: one per online CPU, at most 4 (writers share one
       parent directory, so more contend on a disk's), at most 8 on tmpfs
       (memory only: 2,000 kernels in 37 ms with 8 against 63 ms with 4 on
       a 16-core host), none for small bundles; 1: the calling thread
       alone. TB_STOP_ON_ERROR always writes alone. */
    unsigned threads;
} tb_emit_options;

typedef struct tb_emit_report {
    uint32_t written;
    uint32_t present;   /* already there, or another writer won the rename */
    uint32_t failed;
    uint32_t differs;   /* TB_EMIT_VERIFY: present with other bytes, left as they are */
    uint32_t replaced;  /* TB_EMIT_REPLACE: present with other bytes, replaced */
    uint32_t threads;   /* writers that ran, the calling thread included */
} tb_emit_report;

/* Writes each kernel to <cache_dir>/<hash> through <cache_dir>/tmp.<unique>
   and one rename. names (optional) receives the names metadata of the
   kernels now in the cache (written or present). */
TBDEF tb_result tb_emit(const tb_bundle *bundle, const char *cache_dir,
                        const tb_emit_options *options, tb_emit_report *report, tb_names **names,
                        tb_error *err);
/* Removes <cache_dir>/tmp.* directories older than min_age_seconds
   (crashed writers). */
TBDEF tb_result tb_remove_stale_temporaries(const char *cache_dir, double min_age_seconds,
                                            uint32_t *removed, tb_error *err);

/* PyTorch's TritonBundler lifecycle as an explicit context. */
typedef struct tb_bundler tb_bundler;
TBDEF tb_result tb_bundler_begin(const tb_options *options, const char *cache_dir,
                                 tb_bundler **out, tb_error *err);
TBDEF tb_result tb_bundler_put(tb_bundler *bundler, const char *hash, int32_t device,
                               tb_error *err);
TBDEF tb_result tb_bundler_put_launch_record(tb_bundler *bundler, const tb_launch_record *record,
                                             tb_error *err);
/* Collects what was put (missing directories are skipped and counted) and
   resets the bundler. */
TBDEF tb_result tb_bundler_collect(tb_bundler *bundler, const tb_collect_options *options,
                                   tb_bundle **out, tb_names **names, tb_collect_report *report,
                                   tb_error *err);
TBDEF void tb_bundler_end(tb_bundler *bundler);

/* ======================================================================
   >>parsers  Parsers: metadata JSON, the tt.func line, autotune choices
   ====================================================================== */
typedef struct tb_kernel_metadata {
    char name[TB_MAX_NAME_LENGTH + 1];
    uint32_t num_warps;
    uint32_t num_ctas;
    uint32_t shared;
    uint32_t flags;              /* TB_CONFIG_COOPERATIVE | TB_CONFIG_PDL */
    uint32_t cluster_dims[3];
    tb_scratch global_scratch;
    tb_scratch profile_scratch;
    uint32_t tensordesc_count;   /* entries of "tensordesc_meta" */
    tb_tensordesc_meta tensordescs[TB_MAX_TENSORDESCS];
} tb_kernel_metadata;

TBDEF tb_result tb_parse_metadata_json(const char *json, size_t size, tb_kernel_metadata *out,
                                       tb_error *err);
/* Finds "tt.func public @function_name(" (any public function when
   function_name is NULL) in MLIR text and writes its argument codes and
   divisibility string (both NUL-terminated, capacity TB_MAX_ARGS + 1).
   Signedness is not in the IR: u8 reads as b, and so on. */
TBDEF tb_result tb_parse_ttfunc(const char *text, size_t size, const char *function_name,
                                char *arg_types, char *arg_divisibility, size_t capacity,
                                tb_error *err);

/* ======================================================================
   >>derive  Derive: launch records from a kernel's own files
   ====================================================================== */
/* Adds one record per kernel that has NAME.cubin, NAME.json and a tt.func
   line in NAME.source or NAME.ttir: cache key = hash, kernel name = NAME.
   Kernels that already have a record (by hash) are left alone. */
TBDEF tb_result tb_bundle_derive_launch_records(tb_bundle *bundle, tb_error *err);

/* ======================================================================
   >>program  Program: a whole compiled model (format 2.3)
   ====================================================================== */
/* A program is what a torch.compile'd forward does, as data: its inputs
   and outputs (tb_tensor_spec), its constants (weights and buffers, their
   bytes stored once), a workspace plan (one size, every intermediate an
   offset in it with the steps it lives between), and the steps (launch a
   record's config, memset, copy) whose operands are literals or places:
   (space, index, byte offset). The Python companion's export_model makes
   it; the >>runner section runs it. docs/FORMAT.md, section 5, is its
   byte layout and its rules; a reader checks every one of them, so a
   program that loads never makes a runner's own copies, memsets or pointer
   arguments reach outside what it allocated or was given (what a kernel
   does with a pointer is the kernel's, as with any launch). */
#ifndef TB_MAX_PROGRAM_TENSORS
#define TB_MAX_PROGRAM_TENSORS 65536u     /* inputs; outputs */
#endif
#ifndef TB_MAX_PROGRAM_CONSTANTS
#define TB_MAX_PROGRAM_CONSTANTS 1000000u
#endif
#ifndef TB_MAX_PROGRAM_BUFFERS
#define TB_MAX_PROGRAM_BUFFERS 1000000u
#endif
#ifndef TB_MAX_PROGRAM_STEPS
#define TB_MAX_PROGRAM_STEPS 1000000u
#endif
#ifndef TB_MAX_PROGRAM_EXPRS
#define TB_MAX_PROGRAM_EXPRS 4000000u /* (2.6) per program */
#endif
#define TB_MAX_TENSOR_DIMS 8u

/* dtypes: PyTorch's names, one number each (FORMAT.md's table) */
#define TB_DTYPE_FLOAT32 1u
#define TB_DTYPE_FLOAT16 2u
#define TB_DTYPE_BFLOAT16 3u
#define TB_DTYPE_FLOAT64 4u
#define TB_DTYPE_INT8 5u
#define TB_DTYPE_INT16 6u
#define TB_DTYPE_INT32 7u
#define TB_DTYPE_INT64 8u
#define TB_DTYPE_UINT8 9u
#define TB_DTYPE_BOOL 10u
#define TB_DTYPE_FLOAT8_E4M3FN 11u
#define TB_DTYPE_FLOAT8_E5M2 12u
#define TB_DTYPE_UINT16 13u
#define TB_DTYPE_UINT32 14u
#define TB_DTYPE_UINT64 15u
#define TB_DTYPE_FLOAT8_E4M3FNUZ 16u
#define TB_DTYPE_FLOAT8_E5M2FNUZ 17u
/* "float32"...; NULL for a number outside the table */
TBDEF const char *tb_dtype_name(uint32_t dtype);
/* bytes of one element; 0 outside the table */
TBDEF uint32_t tb_dtype_size(uint32_t dtype);
/* the number of a name ("float32", also "torch.float32"); 0 if none */
TBDEF uint32_t tb_dtype_from_name(const char *name);
/* The .npy descr of a dtype, for tools: "<f4"...; bf16 and fp8 have no
   numpy type and are written as their bit patterns ("<u2", "|u1"). */
TBDEF const char *tb_dtype_npy(uint32_t dtype);

/* An input or output as the program states it. strides in elements. */
typedef struct tb_tensor_spec {
    const char *name;
    uint32_t dtype;              /* TB_DTYPE_* */
    uint32_t rank;               /* 0..TB_MAX_TENSOR_DIMS */
    uint32_t align;              /* the data pointer is a multiple of it (a power of two) */
    int64_t shape[TB_MAX_TENSOR_DIMS];
    int64_t strides[TB_MAX_TENSOR_DIMS];
} tb_tensor_spec;
/* Bytes from the first element to the end of the last (0 when a size is
   0); UINT64_MAX when a size or stride is negative or that overflows. */
TBDEF uint64_t tb_tensor_spec_extent(const tb_tensor_spec *spec);

/* A caller's tensor: a device pointer and what it holds. */
typedef struct tb_tensor {
    void *data;
    uint32_t dtype;              /* TB_DTYPE_* */
    uint32_t rank;
    int64_t shape[TB_MAX_TENSOR_DIMS];
    int64_t strides[TB_MAX_TENSOR_DIMS]; /* elements */
} tb_tensor;

#define TB_CONSTANT_STATE 1u     /* updated in place by runs; kept across them (a reset reloads it) */
#define TB_CONSTANT_SHARED 2u    /* (with STATE) shared by the programs that use it: a KV cache (2.4) */
#define TB_CONSTANT_EXTERNAL 4u  /* (2.5) its bytes are a tensor of a weights file (safetensors), not the bundle's */
typedef struct tb_program_constant {
    const char *name;            /* "fc1.weight" */
    uint32_t dtype;
    uint32_t flags;              /* TB_CONSTANT_STATE, _SHARED, _EXTERNAL */
    uint64_t size;               /* bytes (one constant may pass 4 GiB) */
    /* its bytes: in the bundle's input (a mapped file's mapping: read them
       with tb_program_read_constant, which never faults); NULL when EXTERNAL */
    const void *data;
    /* EXTERNAL (never with STATE): the tensor of the weights file that
       holds its bytes, by name, with the dtype above and this shape (whose
       elements times the dtype's size are `size`), and the CRC-32 (zlib's)
       of the bytes it held at export (checked on request: a fine-tuned
       checkpoint of the same names and shapes loads as well) */
    const char *tensor;
    uint32_t rank;
    uint32_t crc32;
    int64_t shape[TB_MAX_TENSOR_DIMS];
} tb_program_constant;

typedef struct tb_program_buffer {
    uint64_t offset, size;       /* bytes within the workspace */
    uint32_t first_step, last_step; /* its lifetime, inclusive */
} tb_program_buffer;

#define TB_SPACE_LITERAL 0u      /* value: the tb_arg bits of a scalar */
#define TB_SPACE_INPUT 1u        /* index: the input; value: a byte offset */
#define TB_SPACE_OUTPUT 2u
#define TB_SPACE_CONSTANT 3u
#define TB_SPACE_BUFFER 4u       /* index: the workspace buffer */
typedef struct tb_operand {
    uint32_t space, index;
    uint64_t value;
} tb_operand;

#define TB_STEP_LAUNCH 1u        /* record's config, grid, one operand per argument code */
#define TB_STEP_MEMSET 2u        /* count elements of width bytes = value; operand: destination */
#define TB_STEP_COPY 3u          /* count bytes; operands: destination, source */
/* The step kinds: one row each, numbered 1.. in row order (the code, its
   name as messages and the Python companion's STEP_NAMES spell it, its
   operand count (-1: one per argument code of the record's config), what
   it writes). Every switch or test over kinds in the implementation sits
   beside a TB__STEP_KINDS_HANDLED(n) check of TB__STEP_KIND_COUNT: a new
   row fails the build at each place that must learn the new kind. */
#define TB__STEP_KINDS(X)                                             \
    X(TB_STEP_LAUNCH, "launch", -1, "the kernel's pointer arguments") \
    X(TB_STEP_MEMSET, "memset", 1, "operand 0")                       \
    X(TB_STEP_COPY, "copy", 2, "operand 0")
#define TB__STEP_KIND_ONE(code, name, operands, writes) + 1u
#define TB__STEP_KIND_COUNT (0u TB__STEP_KINDS(TB__STEP_KIND_ONE))
typedef struct tb_program_step {
    uint32_t kind;
    uint32_t record, config;     /* launch: tb_bundle_launch_record index and its config */
    uint32_t grid[3];            /* launch */
    uint32_t width, value;       /* memset */
    uint64_t count;              /* memset: elements; copy: bytes */
    uint32_t operand_count;
    const tb_operand *operands;
} tb_program_step;

/* (2.6) Shapes that vary. A program may declare symbols (a batch size,
   a sequence length), each with a range and a divisor, and expressions in
   the grid language over them (CONST, SYM and the operators) for any
   field that depends on them: an input's or output's size or stride, a
   buffer's size, a launch's grid, a memset's or copy's count, an
   operand's value (a scalar argument or a pointer's byte offset). The
   stored fields are the program at every symbol's maximum, where the
   workspace is planned; tb_program_specialize makes the program at other
   values, and a run binds the values from its inputs' sizes. */
#ifndef TB_MAX_PROGRAM_SYMBOLS
#define TB_MAX_PROGRAM_SYMBOLS 16u
#endif
#ifndef TB_MAX_EXPR_OPS
#define TB_MAX_EXPR_OPS 256u     /* per expression: a grid rule with its arguments' expressions inlined */
#endif
typedef struct tb_program_symbol {
    const char *name;            /* "batch", "seq": 1 to 255 bytes, unique in the program */
    int64_t min, max;            /* the range, inclusive: 0 <= min <= max < 2^31 */
    int64_t divisor;             /* >= 1: every value is a multiple of it (min and max too) */
} tb_program_symbol;
#define TB_FIELD_INPUT_SIZE 1u   /* index: the input, sub: the dimension */
#define TB_FIELD_INPUT_STRIDE 2u
#define TB_FIELD_OUTPUT_SIZE 3u
#define TB_FIELD_OUTPUT_STRIDE 4u
#define TB_FIELD_BUFFER_SIZE 5u  /* index: the buffer, sub 0; at most its planned size */
#define TB_FIELD_GRID 6u         /* index: the step (a launch), sub: 0 x, 1 y, 2 z */
#define TB_FIELD_COUNT 7u        /* index: the step (a memset or copy), sub 0 */
#define TB_FIELD_OPERAND 8u      /* index: the step, sub: the operand (an integer literal, or a pointer's offset) */
typedef struct tb_program_expr {
    uint32_t field, index, sub;  /* what it gives: TB_FIELD_*; sorted by (field, index, sub), each once */
    uint32_t op_count;           /* 1..TB_MAX_EXPR_OPS */
    const tb_grid_op *ops;       /* TB_GRID_CONST, TB_GRID_SYM, operators */
} tb_program_expr;

typedef struct tb_program {
    uint32_t input_count, output_count;
    const tb_tensor_spec *inputs, *outputs;
    uint32_t constant_count;
    const tb_program_constant *constants; /* in a bundle: its one table, which all its programs share */
    uint32_t buffer_count;
    const tb_program_buffer *buffers;
    uint64_t workspace_size;
    uint32_t step_count;
    const tb_program_step *steps;
    /* (2.4) unique within a bundle: "forward", "prefill_64", "decode";
       NULL when adding one means "forward" */
    const char *name;
    /* (2.6) symbols and the expressions over them (0 and NULL: every
       size fixed). A launch grid dimension of a program with symbols may
       be 0: that launch is skipped. */
    uint32_t symbol_count;
    const tb_program_symbol *symbols;
    uint32_t expr_count;
    const tb_program_expr *exprs;
    /* a program tb_program_specialize made: the symbols' values (expr_count
       0, every field evaluated); NULL otherwise */
    const int64_t *values;
} tb_program;

/* A bundle holds programs (2.4: several, by name), which share one table
   of constants: a weight that three programs use is one constant, stored
   and uploaded once. A state constant that two programs use is one buffer
   that both update (a KV cache), and must say so with TB_CONSTANT_SHARED;
   constants are matched by name when a program is added. */
#ifndef TB_MAX_PROGRAMS
#define TB_MAX_PROGRAMS 1024u
#endif
/* The bundle's first program; NULL when it has none. */
TBDEF const tb_program *tb_bundle_program(const tb_bundle *bundle);
TBDEF uint32_t tb_bundle_program_count(const tb_bundle *bundle);
/* Program `index` (0..count-1), or the one named `name`; NULL if none. */
TBDEF const tb_program *tb_bundle_program_at(const tb_bundle *bundle, uint32_t index);
TBDEF const tb_program *tb_bundle_find_program(const tb_bundle *bundle, const char *name);
/* Removes every program, then adds `program` (NULL: removes them all). */
TBDEF tb_result tb_bundle_set_program(tb_bundle *bundle, const tb_program *program, tb_error *err);
/* Copies program into the bundle (its constants' bytes too), after
   checking it against the bundle's records as a reader would. Its
   constants join the bundle's table by name: a name already there must
   have the same dtype, size, flags and bytes, and a state constant may be
   in two programs only when both mark it TB_CONSTANT_SHARED; a name new to
   the table adds a constant. Its CONSTANT operands are renumbered to the
   table, so the stored program's constant indexes may differ from those
   given. Refused: a name another program has, TB_MAX_PROGRAMS programs. */
TBDEF tb_result tb_bundle_add_program(tb_bundle *bundle, const tb_program *program, tb_error *err);
/* size bytes of constant `index` of the bundle's table from byte `offset`
   into dst: through the checked read path (pread for a mapped file, which
   a truncation turns into tb_err_io, never SIGBUS). */
TBDEF tb_result tb_program_read_constant(const tb_bundle *bundle, uint32_t index, uint64_t offset, void *dst,
                                         size_t size, tb_error *err);

/* ======================================================================
   >>symbols  Symbols: shapes that vary, expressions, bind and specialize
   ====================================================================== */
/* (2.6) One expression's value for the symbols' values: CONST, SYM (index
   < value_count) and the operators, exact (tb_err_arg_range on an
   overflow or a division by zero; tb_err_malformed on a program that is
   not an expression). */
TBDEF tb_result tb_expr_eval(const tb_grid_op *ops, uint32_t op_count, const int64_t *values, uint32_t value_count,
                             int64_t *out, tb_error *err);
/* The symbols' values (values[symbol_count]) for a run's inputs: each from
   the first input dimension whose size is that symbol alone, then checked
   against its range and divisor, and every input size against its
   expression (strides: the run checks them against the program's specs at
   those values). tb_err_shape names the input, the dimension, the range
   and the value; tb_err_arg_mismatch a count or rank that differs. A
   program no reader checked has its symbols checked first, as a reader
   checks them (tb_err_malformed: a divisor below 1, a range outside
   0 .. 2^31 - 1). */
TBDEF tb_result tb_program_bind(const tb_program *program, const tb_tensor *inputs, uint32_t input_count,
                                int64_t *values, tb_error *err);
/* The program at these values: every expression evaluated into its field,
   checked as tb_bundle_add_program checks a program (each buffer within
   its planned size, each pointer within its object). Free with
   tb_program_free. */
TBDEF tb_result tb_program_specialize(const tb_bundle *bundle, const tb_program *program, const int64_t *values,
                                      tb_program **out, tb_error *err);
TBDEF void tb_program_free(tb_program *program);

/* ======================================================================
   >>weights  Weights: tensors of a safetensors file, by name
   ====================================================================== */
/* A safetensors file (an 8-byte little-endian header length, a JSON
   header naming each tensor's dtype, shape and data offsets, the bytes),
   its header read and checked once; the bytes are read with pread when
   asked for (never through a mapping, which a truncation would turn into
   SIGBUS). A bundle's EXTERNAL constants are tensors of such a file:
   exported models keep their weights there, or in the checkpoint they
   were loaded from, and tb_model_desc.weights names the file to load. */
typedef struct tb_weights tb_weights;
typedef struct tb_weights_tensor {
    const char *name;
    uint32_t dtype;              /* TB_DTYPE_*: safetensors' F32 F16 BF16 F64 I8 I16 I32 I64 U8 U16 U32 U64 BOOL F8_E4M3
                                    F8_E5M2 */
    uint32_t rank;
    int64_t shape[TB_MAX_TENSOR_DIMS];
    uint64_t offset, size;       /* its bytes: from the file's start */
} tb_weights_tensor;
#ifndef TB_MAX_WEIGHTS_HEADER
#define TB_MAX_WEIGHTS_HEADER 100000000u /* bytes of JSON header, safetensors' own limit */
#endif
#ifndef TB_MAX_WEIGHTS_TENSORS
#define TB_MAX_WEIGHTS_TENSORS (1u << 20)
#endif
#define TB_WEIGHTS_CHECK_CRC 1u  /* tb_weights_check: also each constant's CRC-32 (reads every byte) */
/* Opens path and reads its header: anything malformed (a header length
   past the file, JSON that is not an object of tensors, an unknown dtype,
   a shape whose bytes are not the tensor's, tensors that overlap, leave a
   hole or end before the file does, a name twice) is refused with
   tb_err_malformed, tb_err_parse or tb_err_limit and the byte offset. */
TBDEF tb_result tb_weights_open(const char *path, const tb_options *options, tb_weights **out, tb_error *err);
/* The same over size bytes at data (not copied: they must outlive it). */
TBDEF tb_result tb_weights_open_memory(const void *data, size_t size, const tb_options *options, tb_weights **out,
                                       tb_error *err);
TBDEF uint32_t tb_weights_count(const tb_weights *weights);
/* Tensor `index`, in the file's order of bytes; NULL past the end. */
TBDEF const tb_weights_tensor *tb_weights_at(const tb_weights *weights, uint32_t index);
/* The tensor named name; NULL if none (a binary search). */
TBDEF const tb_weights_tensor *tb_weights_find(const tb_weights *weights, const char *name);
/* size bytes of tensor from its byte `offset` into dst (pread: a file
   cut short since it was opened gives tb_err_io). */
TBDEF tb_result tb_weights_read(const tb_weights *weights, const tb_weights_tensor *tensor, uint64_t offset, void *dst,
                                size_t size, tb_error *err);
/* The CRC-32 (zlib's crc32, as Python's zlib.crc32) of a tensor's bytes. */
TBDEF tb_result tb_weights_crc32(const tb_weights *weights, const tb_weights_tensor *tensor, uint32_t *crc,
                                 tb_error *err);
/* Whether the file holds every EXTERNAL constant of bundle: a tensor of
   its name with its dtype and shape (with TB_WEIGHTS_CHECK_CRC, also the
   bytes it was exported with). A missing tensor is tb_err_not_found, a
   dtype or shape that differs tb_err_arg_mismatch, other bytes
   tb_err_checksum, each naming the constant and the tensor. */
TBDEF tb_result tb_weights_check(const tb_weights *weights, const tb_bundle *bundle, unsigned flags, tb_error *err);
/* (2.6) The path of the weights file the bundle names (its property
   weights.file, which the exporter writes) in the directory of the bundle
   at bundle_path: where tbundle and the examples look when no path is
   given. tb_err_not_found where the bundle names none, or a name that is
   not a plain file name; tb_err_limit where the path does not fit
   capacity bytes (never a truncated path). */
TBDEF tb_result tb_weights_path_beside(const tb_bundle *bundle, const char *bundle_path, char *out, size_t capacity,
                                       tb_error *err);
TBDEF void tb_weights_free(tb_weights *weights);
/* zlib's CRC-32 of size bytes, continuing from crc (0 to start). */
TBDEF uint32_t tb_crc32(uint32_t crc, const void *data, size_t size);

#ifndef TB_NO_LAUNCHER
/* TB_NO_LAUNCHER (defined the same in every file that includes this
   header) leaves the launcher out: its declarations too, so that a call
   fails at compile time, not at link time. */
/* ======================================================================
   >>driver  Driver: libcuda through dlopen
   ====================================================================== */
/* Opens libcuda.so.1 once (thread-safe) and calls cuInit. */
TBDEF tb_result tb_driver_load(tb_error *err);
/* Any driver entry point, for callers that need more of the driver (memory,
   streams) without linking it. NULL if absent or the driver is not loaded. */
TBDEF void *tb_driver_symbol(const char *name);
TBDEF tb_result tb_driver_device_count(int *count, tb_error *err);

/* ======================================================================
   >>load  Load: a cubin to a loaded kernel
   ====================================================================== */
typedef struct tb_loaded_kernel tb_loaded_kernel;

#define TB_LOAD_NO_PARAM_CHECK 1u   /* skip the cuFuncGetParamInfo check (not advised) */
#define TB_LOAD_PRIMARY_CONTEXT 2u  /* use device's primary context even if another is current */

typedef struct tb_load_options {
    int device;  /* primary context of this device when no context is current (default 0) */
    unsigned flags;
} tb_load_options;

typedef struct tb_kernel_info {
    int device;
    int registers;
    int spills;                  /* local memory bytes / 4, as Triton reports n_spills */
    int static_shared;
    int max_threads_per_block;
    uint32_t arg_count;          /* user arguments */
    uint32_t param_count;        /* user arguments + scratch pointers */
    int param_check;             /* 1: checked against the cubin with cuFuncGetParamInfo */
} tb_kernel_info;

TBDEF tb_result tb_load_cubin(const void *cubin, size_t size, const tb_launch_config *config,
                              const tb_options *options, const tb_load_options *load,
                              tb_loaded_kernel **out, tb_error *err);
/* The config's binary must be in the bundle; loaded zero-copy. */
TBDEF tb_result tb_load_config(const tb_bundle *bundle, const tb_launch_config *config,
                               const tb_options *options, const tb_load_options *load,
                               tb_loaded_kernel **out, tb_error *err);
/* Straight from <cache_dir>/<hash>/: NAME.json, NAME.cubin, and the tt.func
   line of NAME.source or NAME.ttir. name NULL: the directory's only cubin.
   arg_types NULL: read from the IR (signedness lost: pass the real codes
   for unsigned arguments). */
TBDEF tb_result tb_load_from_cache(const char *cache_dir, const char *hash, const char *name,
                                   const char *arg_types, const tb_options *options,
                                   const tb_load_options *load, tb_loaded_kernel **out,
                                   tb_error *err);
TBDEF void tb_unload(tb_loaded_kernel *kernel);
TBDEF void tb_loaded_kernel_info(const tb_loaded_kernel *kernel, tb_kernel_info *info);

/* ======================================================================
   >>launch  Launch: a loaded kernel with its arguments
   ====================================================================== */
#define TB_LAUNCH_CHECKED 1u  /* range-check narrowing, check tt.divisibility assumptions */
/* grid from the config's grid rule and the arguments (tb_grid_compute);
   .grid is ignored. A config without a rule is refused (tb_err_not_found). */
#define TB_LAUNCH_GRID_AUTO 2u

/* grid: all three dimensions (a 0 launches nothing and succeeds). Scratch
   pointers are device pointers, required when the config's size is > 0. */
typedef struct tb_launch_params {
    uint32_t grid[3];
    void *stream;
    const tb_arg *args;
    uint32_t arg_count;
    unsigned flags;              /* TB_LAUNCH_CHECKED | TB_LAUNCH_GRID_AUTO */
    void *global_scratch;
    void *profile_scratch;
    const int64_t *grid_args;    /* TB_LAUNCH_GRID_AUTO: values a rule's EXTRA operands read */
    uint32_t grid_arg_count;
    /* TB_CONFIG_AUTOTUNE: the bytes of each pointer argument (NULL, or 0
       for one: unknown), for the arguments the trials must not touch:
       those the record marks mutated or reset-to-zero (all pointers when
       the record has no call info) run on copies */
    const size_t *arg_bytes;
} tb_launch_params;

/* The launch runs in the kernel's context whatever is current: a stream
   must belong to it (the driver refuses another context's stream), and
   for the NULL stream the library makes it current for the call. */
TBDEF tb_result tb_launch(const tb_loaded_kernel *kernel, const tb_launch_params *params,
                          tb_error *err);
/* params: every parameter, scratch pointers included, as cuLaunchKernel
   takes them (tb_kernel_info.param_count entries). */
TBDEF tb_result tb_launch_raw(const tb_loaded_kernel *kernel, uint32_t grid_x, uint32_t grid_y,
                              uint32_t grid_z, void *stream, void **params, tb_error *err);

/* ======================================================================
   >>table  Kernel table: launch by name or cache key
   ====================================================================== */
/* Every static launch record of a bundle, for runtimes. The bundle must
   outlive the table (lazy loads read from it). */
#define TB_TABLE_LAZY 1u   /* load each config on first get */
typedef struct tb_kernel_table tb_kernel_table;
TBDEF tb_result tb_kernel_table_create(const tb_bundle *bundle, const tb_options *options,
                                       const tb_load_options *load, unsigned flags,
                                       tb_kernel_table **out, tb_error *err);
/* By cache key first (one record), then by kernel name; config picks the
   record's config. A name may have several records: the specializations
   Triton compiled for it (tt.divisibility 16 on pointers and integers).
   get, which sees no arguments, takes the one with the fewest assumptions,
   safe for any arguments; select and launch take, from the arguments, the
   most specialized one whose assumptions hold, and name the argument that
   breaks them when none does. Constant time; thread-safe. */
TBDEF tb_result tb_kernel_table_get(tb_kernel_table *table, const char *key_or_name,
                                    uint32_t config, const tb_loaded_kernel **out,
                                    tb_error *err);
TBDEF tb_result tb_kernel_table_select(tb_kernel_table *table, const char *key_or_name, uint32_t config,
                                       const tb_arg *args, uint32_t arg_count, const tb_loaded_kernel **out,
                                       tb_error *err);
/* (config TB_CONFIG_AUTOTUNE: select gives the kernel already chosen for
   these sizes, and never benchmarks; a hot loop selects once and calls
   tb_launch, with TB_LAUNCH_GRID_AUTO, at tb_launch's cost.) */
/* select, then tb_launch: the launch by name. */
TBDEF tb_result tb_kernel_table_launch(tb_kernel_table *table, const char *key_or_name, uint32_t config,
                                       const tb_launch_params *params, tb_error *err);
/* The record select would use (args NULL: the one get would use), without
   loading anything: *record indexes tb_bundle_launch_record. */
TBDEF tb_result tb_kernel_table_find(const tb_kernel_table *table, const char *key_or_name, uint32_t config,
                                     const tb_arg *args, uint32_t arg_count, uint32_t *record, tb_error *err);
TBDEF void tb_kernel_table_free(tb_kernel_table *table);

/* ======================================================================
   >>autotune  Autotune: choices per record and size key
   ====================================================================== */
/* As config, TB_CONFIG_AUTOTUNE asks the table for the fastest config of
   the record the arguments select. The first launch of each record and
   size key (the values of the arguments the record's call info keys on;
   every integer argument when it names none) benchmarks every config on
   the caller's arguments and stream, as Triton's do_bench does: one run,
   an estimate over 5, warm-up for warmup_ms, then rep_ms of repetitions
   (at most max_reps), each after an L2 flush (a memset of flush_bytes),
   timed with events; the median decides. The arguments the record marks
   mutated or reset-to-zero run on copies (params.arg_bytes gives their
   sizes), the reset ones zeroed before each run, so the caller's data
   sees exactly one launch. The choice is kept per record and key, logged
   with every config's time (TB_LOG_INFO), and can be saved to a file and
   read back (docs/FORMAT.md, "Autotune choices"): a process that reads
   it launches at once. Two threads that reach one untuned kernel
   benchmark it once; the other waits. Autotuning needs the configs' grid
   rules (TB_LAUNCH_GRID_AUTO) and refuses to benchmark on a stream being
   captured into a graph (tune first, or load the choices), or a kernel
   that writes a tensor descriptor's memory (it cannot be copied). */
#define TB_CONFIG_AUTOTUNE 0xFFFFFFFFu
typedef struct tb_autotune_options {
    double warmup_ms;            /* 0: 25, as do_bench */
    double rep_ms;               /* 0: 100, as do_bench */
    uint32_t max_reps;           /* 0: 1000: bounds a first call of a kernel of microseconds */
    size_t flush_bytes;          /* 0: 256 MiB, do_bench's L2 flush; SIZE_MAX: no flush */
} tb_autotune_options;
/* set_autotune clamps: times to TB_AUTOTUNE_MAX_MS, max_reps to this */
#define TB_AUTOTUNE_MAX_REPS 100000u
#define TB_AUTOTUNE_MAX_MS 60000.0
TBDEF tb_result tb_kernel_table_set_autotune(tb_kernel_table *table, const tb_autotune_options *options,
                                             tb_error *err);
/* The choice for these arguments: *config and its median time in ms;
   tb_err_not_found when the key was not tuned. */
TBDEF tb_result tb_kernel_table_choice(tb_kernel_table *table, const char *key_or_name, const tb_arg *args,
                                       uint32_t arg_count, uint32_t *config, double *ms, tb_error *err);
/* Every choice made or read, to a file (written beside it and renamed),
   and back: a file that does not parse is refused whole; entries of
   records the bundle lacks, or whose config changed, are skipped and
   logged. */
TBDEF tb_result tb_kernel_table_save_choices(tb_kernel_table *table, const char *path, tb_error *err);
TBDEF tb_result tb_kernel_table_load_choices(tb_kernel_table *table, const char *path, tb_error *err);
/* The same text in memory. Save is count-then-fill: with buffer NULL,
   *out_size receives the size needed (choices tuned in between may need
   more: a buffer too small is refused, with *out_size the new need). */
TBDEF tb_result tb_kernel_table_save_choices_memory(tb_kernel_table *table, void *buffer, size_t capacity,
                                                    size_t *out_size, tb_error *err);
TBDEF tb_result tb_kernel_table_load_choices_memory(tb_kernel_table *table, const void *data, size_t size,
                                                    tb_error *err);

/* ======================================================================
   >>graphs  Graphs: capture, replay and update
   ====================================================================== */
/* tb_graph_begin starts capturing a stream (not the legacy NULL stream,
   with its context current); every launch the library makes on it
   (tb_launch, by name, with auto grids, autotuned) is recorded, in order,
   until tb_graph_end, which instantiates the graph. tb_graph_launch
   replays it; tb_graph_update gives launch i new arguments (and grid) for
   later replays without capturing again (cuGraphExecKernelNodeSetParams):
   the same kernel, new pointers and scalars. Launches are numbered in the
   order they reached the driver (a launch of an empty grid launches
   nothing and takes no number). Kernels that take tensor descriptors or
   launch with launch attributes (clusters, cooperative, programmatic
   dependent launch: TB_CONFIG_PDL) replay as captured but cannot be
   updated.
   Lifetime: a graph keeps every kernel it captured loaded until
   tb_graph_free, so tb_unload and tb_kernel_table_free may come first and
   the graph still replays and updates; the kernels' modules are unloaded
   by the last of those frees. */
typedef struct tb_graph tb_graph;
TBDEF tb_result tb_graph_begin(void *stream, const tb_options *options, tb_graph **out, tb_error *err);
TBDEF tb_result tb_graph_end(tb_graph *graph, tb_error *err);
TBDEF tb_result tb_graph_launch(const tb_graph *graph, void *stream, tb_error *err);
TBDEF uint32_t tb_graph_launch_count(const tb_graph *graph);
TBDEF tb_result tb_graph_update(tb_graph *graph, uint32_t launch, const tb_launch_params *params, tb_error *err);
TBDEF void tb_graph_free(tb_graph *graph);

/* ======================================================================
   >>runner  Runner: a program on the GPU
   ====================================================================== */
/* tb_model_load uploads a bundle's constants once (a mapped file's read
   in bounded pieces, never the file whole; EXTERNAL ones from the weights
   file desc.weights names, its header checked whole first), allocates the workspace once and loads every
   kernel the steps launch; tb_model_run checks the caller's tensors and
   runs the steps on a stream, allocating no device memory (a graph's first
   run captures it, which allocates on the host). With TB_MODEL_GRAPH the
   steps are captured once into a CUDA graph and each run replays it (the
   kernels whose input or output pointers changed are updated in place;
   a program whose memset or copy steps, or launches with launch
   attributes (tensor descriptors, clusters, cooperative or programmatic
   dependent launch), touch inputs or outputs replays on static buffers it
   copies through instead).
   Threads: one model runs on one thread at a time with its own workspace
   (and graph). Several threads may run one model at once when each passes
   its own workspace of tb_model_workspace_size bytes to
   tb_model_run_workspace (no graph there) and the program has no state
   (tb_model_state_count 0): state is the model's, shared by every run.
   The model owns its kernel table unless desc.table gives one, which must
   then outlive it. */
typedef struct tb_model tb_model;

/* tb_tensor, a caller's tensor: with the programs (>>program) */

#define TB_MODEL_GRAPH 1u        /* replay the program as one CUDA graph */
#define TB_MODEL_STATIC_IO 2u    /* with GRAPH: always copy through static buffers (no node updates) */
/* TB_MODEL_VERIFY_WEIGHTS: each EXTERNAL constant's CRC-32 is computed over
   the very bytes read for its upload (by the reader threads, piece by
   piece, combined in order) and compared with the one the bundle records:
   tb_ok means the bytes on the device have the recorded CRC-32s, even if
   the file is rewritten during the load; another is tb_err_checksum (the
   model freed, nothing returned). */
#define TB_MODEL_VERIFY_WEIGHTS 4u /* check each EXTERNAL constant's CRC-32 over the bytes uploaded */
/* (2.8) tb_model_load loads the kernels' modules on a thread of its own
   while the calling thread uploads the constants (the two phases of a
   load that take longest, overlapped; the allocator and the logger may be
   called from both). TB_MODEL_SERIAL_LOAD loads them on the calling
   thread first, then uploads, as 2.7 did. */
#define TB_MODEL_SERIAL_LOAD 8u
#ifndef TB_MAX_INSTANCE_CACHE
#define TB_MAX_INSTANCE_CACHE 4096u /* tb_model_desc.instance_cache at most */
#endif
typedef char tb__TB_MAX_INSTANCE_CACHE_is_at_most_65536[(TB_MAX_INSTANCE_CACHE) <= 65536u ? 1 : -1];
typedef struct tb_model_desc {
    const tb_bundle *bundle;     /* holds a program; must outlive the model */
    tb_kernel_table *table;      /* NULL: the model makes its own from the bundle */
    int device;                  /* with no current context: this device's primary context (default 0) */
    unsigned flags;              /* TB_MODEL_GRAPH, _STATIC_IO, _VERIFY_WEIGHTS, _SERIAL_LOAD (or'd) */
    const tb_options *options;   /* allocator, logger; NULL: defaults */
    size_t upload_chunk;         /* a mapped file's constants are read in pieces of this many bytes; 0: 1 MiB */
    /* (2.5) the safetensors file of the bundle's EXTERNAL constants (the
       bundle's property "weights.file" names the one it was exported
       with); checked whole (names, dtypes, shapes) before any upload; the
       CRC-32s (TB_MODEL_VERIFY_WEIGHTS) over the bytes as uploaded */
    const char *weights;
    /* an upload from files of at least this many bytes goes through
       pinned staging slots that upload_threads threads fill with pread
       while the copies run (0: 64 MiB; UINT64_MAX: never); a smaller one
       through two pageable buffers, which cost less to set up */
    uint64_t pinned_upload_min;
    uint32_t upload_threads;     /* 0: one per core but one, 2 to 12; at most 64 (and one per slot) */
    /* (2.6) a program with symbols keeps its steps resolved (and with
       TB_MODEL_GRAPH its graph) for this many tuples of symbol values, the
       least recently used replaced (0: 8; more than TB_MAX_INSTANCE_CACHE,
       4096, is refused by tb_model_load with tb_err_limit) */
    uint32_t instance_cache;
    /* (2.7) the most host memory a pinned upload uses (0: 64 MiB): slots
       of 2 MiB (under 4 MiB: of half this, in whole pages; under two
       pages: nothing pinned, the pageable way), no more slots than the
       upload has pieces, of which it pins at most a 32nd of its bytes
       (two slots at least: pinning costs about 0.5 ms a MiB). The slots
       lie in one staging area a process, pinned by the first pinned
       upload, reused (as far as this bound goes) by the next ones, pinned
       again larger when one needs more, and freed with the last model
       whose upload used it (its context frees it otherwise): loads that
       follow while a model stays loaded pin nothing, or only more. Two loads at once in one context take turns with it;
       a load in another context while the area is held there pins slots
       of its own for its upload, within its own bound. So the pinned
       uploads hold at most the largest bound given, plus one for each
       other context uploading at the time. tb_model_load_times says how
       an upload went; when pinning fails, it uses the area already pinned
       in its context (two slots or more), else goes the pageable way. */
    uint64_t pinned_staging_bytes;
} tb_model_desc;

TBDEF tb_result tb_model_load(const tb_model_desc *desc, tb_model **out, tb_error *err);
/* The program's inputs and outputs, for allocating them (NULL past the end). */
TBDEF uint32_t tb_model_input_count(const tb_model *model);
TBDEF uint32_t tb_model_output_count(const tb_model *model);
TBDEF const tb_tensor_spec *tb_model_input(const tb_model *model, uint32_t index);
TBDEF const tb_tensor_spec *tb_model_output(const tb_model *model, uint32_t index);
/* A tensor for spec at data: dtype, sizes and strides copied. */
TBDEF tb_tensor tb_tensor_for(const tb_tensor_spec *spec, void *data);
/* Bytes a caller's workspace needs (intermediates, then kernel scratch). */
TBDEF uint64_t tb_model_workspace_size(const tb_model *model);
/* Device bytes of the model's constants and state (its own workspace is
   tb_model_workspace_size more). */
TBDEF uint64_t tb_model_constant_bytes(const tb_model *model);
/* Milliseconds the load spent uploading the constants (reads, pinning and
   any wait for another load's upload in the same context included). */
TBDEF double tb_model_upload_ms(const tb_model *model);
/* (2.7) Where a load's time went, phase by phase, and how its upload went:
   the parts of a first token's wait (tbundle run -v prints them). */
typedef struct tb_model_times {
    double total_ms;             /* tb_model_load, from its call to its return (beside: the longer of kernels_ms
                                    and upload_ms counts) */
    double driver_ms;            /* libcuda opened and initialized (the process's first load; then about 0) */
    double weights_ms;           /* the weights file opened and its header checked (0: none) */
    double context_ms;           /* the current context found, or desc.device's primary context retained (made, when
                                    none is) */
    double kernels_ms;           /* the kernel table made, the steps resolved: every kernel's module loaded
                                    (beside: on a thread of the load's own, during upload_ms) */
    double memory_ms;            /* device memory allocated */
    double upload_ms;            /* the constants read and copied (tb_model_upload_ms); pin_ms and wait_ms in it */
    double pin_ms;               /* pinning staging memory (0: pinned by an earlier load, pinning failed, or the
                                    pageable way) */
    double wait_ms;              /* waiting for another load's upload to be done with the staging area */
    uint64_t upload_bytes;       /* bytes read from files (the bundle's mapped file, the weights file) */
    uint64_t staging_bytes;      /* pinned staging the upload used (0: the pageable way) */
    uint32_t threads;            /* reader threads that ran */
    uint32_t pinned;             /* 1: the pinned way; 0: the pageable way, or nothing read from files */
    uint32_t reused;             /* 1: the staging area was pinned already (by an earlier load; pin_ms 0) */
    uint32_t beside;             /* (2.8) 1: the kernels loaded beside the upload; 0: before it
                                    (TB_MODEL_SERIAL_LOAD), or after it when no thread could be made */
} tb_model_times;
/* The load's times and upload (all zero for a NULL model). */
TBDEF void tb_model_load_times(const tb_model *model, tb_model_times *out);
/* (2.8) Host memory the process's uploads hold pinned now: the staging
   area (while a model that used it lives), plus the rings of uploads in
   other contexts under way. 0 once every model is freed. */
TBDEF uint64_t tb_model_pinned_bytes(void);
TBDEF uint32_t tb_model_state_count(const tb_model *model);
/* Runs the program once on stream (asynchronous, as a kernel launch is).
   inputs and outputs: one tensor each, in order, with exactly the dtype,
   sizes and strides the program states, on the model's device, their
   data a multiple of the spec's align, inside one allocation of the
   driver's (or pieces mapped back to back); a mismatch is refused with
   the tensor's name and what was expected (tb_err_arg_mismatch,
   tb_err_misaligned, tb_err_invalid_argument), before anything runs.
   ALIASING: no output, and no input that a step may write (an in-place
   update), shares a byte with another tensor or the workspace; inputs
   the program only reads may share bytes. A run checks a pointer's
   device and allocation once, while it stays the same: free and
   reallocate under it only with another pointer. */
TBDEF tb_result tb_model_run(tb_model *model, const tb_tensor *inputs, uint32_t input_count, const tb_tensor *outputs,
                             uint32_t output_count, void *stream, tb_error *err);
/* The same with the caller's workspace (device memory of this device,
   holding tb_model_workspace_size bytes, 256-byte aligned, checked on
   each call), never the graph. */
TBDEF tb_result tb_model_run_workspace(tb_model *model, const tb_tensor *inputs, uint32_t input_count,
                                       const tb_tensor *outputs, uint32_t output_count, void *workspace,
                                       void *stream, tb_error *err);
/* Several programs (2.4): a model holds each program of its bundle, in
   the bundle's order (program 0 is the one tb_model_input and tb_model_run
   use). They share the constants, so state one program writes (a KV cache
   that a prefill fills) is what the next one reads, and one workspace,
   sized for the largest. With TB_MODEL_GRAPH each program has a graph of
   its own, captured on its first run. Programs of one model run one at a
   time, in the order their runs are queued: one thread, or threads that
   take turns under a lock of the caller's, on one stream or on streams the
   caller orders (a run reads state the run before wrote). */
TBDEF uint32_t tb_model_program_count(const tb_model *model);
/* Program `program`: its name, inputs and outputs (NULL past the end). */
TBDEF const tb_program *tb_model_program(const tb_model *model, uint32_t program);
/* The index of the program named `name`; tb_err_not_found, naming the
   programs the model has, if none. */
TBDEF tb_result tb_model_find_program(const tb_model *model, const char *name, uint32_t *program, tb_error *err);
TBDEF tb_result tb_model_run_program(tb_model *model, uint32_t program, const tb_tensor *inputs, uint32_t input_count,
                                     const tb_tensor *outputs, uint32_t output_count, void *stream, tb_error *err);
TBDEF tb_result tb_model_run_program_workspace(tb_model *model, uint32_t program, const tb_tensor *inputs,
                                               uint32_t input_count, const tb_tensor *outputs, uint32_t output_count,
                                               void *workspace, void *stream, tb_error *err);
/* (2.7) One run, described: the entry point the four calls above wrap.
   Zero is the default for every field: program 0, no tensors, the model's
   own workspace (and, with TB_MODEL_GRAPH, its graph), the legacy NULL
   stream, no flags. A workspace (the caller's, as tb_model_run_workspace
   takes it) never runs the graph; neither does TB_RUN_NO_GRAPH, which runs
   the steps one by one in the model's own workspace (a warm-up, or a check
   of the graph against them). A flag this version does not know is
   refused (tb_err_invalid_argument). */
#define TB_RUN_NO_GRAPH 1u       /* run the steps, not the graph, in the model's workspace */
typedef struct tb_run_desc {
    uint32_t program;            /* tb_model_find_program's index; 0: the first */
    const tb_tensor *inputs;     /* one per input, in order (tb_model_run's rules) */
    uint32_t input_count;
    const tb_tensor *outputs;    /* one per output, in order */
    uint32_t output_count;
    void *workspace;             /* NULL: the model's own; else tb_model_workspace_size bytes of the caller's */
    void *stream;                /* the model's context's; NULL: the legacy stream (never with the graph) */
    unsigned flags;              /* TB_RUN_NO_GRAPH */
} tb_run_desc;
TBDEF tb_result tb_model_execute(tb_model *model, const tb_run_desc *desc, tb_error *err);
/* Loads the state constants' bytes from the bundle again: waits for the
   work queued on stream (which may use the state), then copies, and
   returns once the bytes are on the device. */
TBDEF tb_result tb_model_reset_state(tb_model *model, void *stream, tb_error *err);
/* (2.6) The output specs of a run of `program` on these inputs: the
   program's own, or for a program with symbols their sizes and strides at
   the values the inputs bind, refused as a run refuses those sizes
   (tb_err_shape for a size outside its symbol's range; where the program
   cannot run at those values, a run's code, its message saying them).
   Only the sizes: an input's dtype, strides and alignment are the run's
   to check (tb_err_arg_mismatch...). */
TBDEF tb_result tb_model_output_specs(tb_model *model, uint32_t program, const tb_tensor *inputs, uint32_t input_count,
                                      tb_tensor_spec *outputs, uint32_t output_count, tb_error *err);
TBDEF void tb_model_free(tb_model *model);

/* ======================================================================
   >>device  Device: memory, copies and streams in a model's context
   ====================================================================== */
/* Device memory and streams in the model's context, so that a program
   runs a model with this header alone (no cuda.h, no driver prototypes of
   its own). THE CONTEXT RULE: every tb_model_* call runs in the model's
   context (the one current when tb_model_load ran, else the primary
   context of desc.device, which the model retains), makes it current for
   its own duration and restores whatever was current before it returns.
   So no call leaves a context current, and a caller needs none: it
   allocates, copies and makes streams through these calls. A caller that
   calls the driver itself makes the model's context current first
   (tb_model_context gives it). A stream belongs to the context it was made
   in: run a model on a stream of its own context.
   Copies with stream NULL are synchronous (they return once the bytes
   have landed); with a stream they are queued on it, after the runs
   queued there (a host buffer must then stay valid until the stream is
   synchronized). Device pointers are the driver's CUdeviceptr as void *. */
/* bytes of device memory (256-byte aligned; 0 bytes: *out NULL) */
TBDEF tb_result tb_model_device_alloc(tb_model *model, size_t bytes, void **out, tb_error *err);
TBDEF void tb_model_device_free(tb_model *model, void *device_ptr);
TBDEF tb_result tb_model_copy_to_device(tb_model *model, void *device_dst, const void *host_src, size_t bytes,
                                        void *stream, tb_error *err);
TBDEF tb_result tb_model_copy_to_host(tb_model *model, void *host_dst, const void *device_src, size_t bytes,
                                      void *stream, tb_error *err);
TBDEF tb_result tb_model_copy_on_device(tb_model *model, void *device_dst, const void *device_src, size_t bytes,
                                        void *stream, tb_error *err);
/* A stream of the model's context (cuStreamCreate, default flags). */
TBDEF tb_result tb_model_stream_create(tb_model *model, void **stream, tb_error *err);
TBDEF void tb_model_stream_free(tb_model *model, void *stream);
/* Waits for the work queued on stream; NULL: for all of the context's. */
TBDEF tb_result tb_model_synchronize(tb_model *model, void *stream, tb_error *err);
/* The model's CUcontext and CUDA device ordinal, for callers that call the
   driver themselves. */
TBDEF void *tb_model_context(const tb_model *model);
TBDEF int tb_model_device(const tb_model *model);

#endif /* TB_NO_LAUNCHER */

#endif /* TRITON_BUNDLE_H */

/* ====================================================================== */
/*                           IMPLEMENTATION                               */
/* ====================================================================== */
#ifdef TRITON_BUNDLE_IMPLEMENTATION
#ifndef TRITON_BUNDLE_IMPLEMENTATION_INCLUDED
#define TRITON_BUNDLE_IMPLEMENTATION_INCLUDED


#include <errno.h>
#include <limits.h>
#include <pthread.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <math.h>

/* Checked first, before any code that needs POSIX 2008 would fail on an
   implicit declaration: a system header included before this one fixed the
   feature macros without it. */
#if defined(__GLIBC__) && !defined(__USE_XOPEN2K8)
#error "triton_bundle.h needs POSIX 2008 (openat, pread, fdopendir): in the implementation file include it before \
any system header, or compile that file with -D_POSIX_C_SOURCE=200809L"
#endif

#ifndef TB_ASSERT
#include <assert.h>
#define TB_ASSERT(x) assert(x)
#endif

#if defined(TB_MALLOC) && defined(TB_FREE) && defined(TB_REALLOC)
/* all three given */
#elif !defined(TB_MALLOC) && !defined(TB_FREE) && !defined(TB_REALLOC)
#define TB_MALLOC(u, sz) ((void)(u), malloc(sz))
#define TB_REALLOC(u, p, sz) ((void)(u), realloc(p, sz))
#define TB_FREE(u, p) ((void)(u), free(p))
#else
#error "triton_bundle.h: define all of TB_MALLOC, TB_REALLOC and TB_FREE, or none"
#endif

#if defined(__GNUC__) || defined(__clang__)
/* more reads in flight than the hardware prefetcher keeps on some server
   cores, where one core's read bandwidth limits the checksum */
#define TB__PREFETCH(p) __builtin_prefetch((const void *)(p))
#define TB__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TB__PRINTF(a, b) __attribute__((format(printf, a, b)))
/* the launch path's functions together (.text.hot), its errors apart: a
   driver launch in between evicts much of the last one's code */
#define TB__HOT __attribute__((hot))
#define TB__COLD __attribute__((cold))
#else
#define TB__PREFETCH(p) ((void)0)
#define TB__UNLIKELY(x) (x)
#define TB__PRINTF(a, b)
#define TB__HOT
#define TB__COLD
#endif

/* Flag families. Each options field that holds flags holds one family,
   and every bit of a family means one thing: a family's flags are single
   bits that no two share. 2.3.0 gave TB_EMIT_VERIFY the bit of
   TB_STOP_ON_ERROR, so every verifying emit wrote alone (issue of 2.6.0).
   A new flag that collides fails the build here. */
#define TB__BIT(f) ((f) != 0 && ((f) & ((f) - 1)) == 0)
#define TB__FLAGS2(a, b) (TB__BIT(a) && TB__BIT(b) && ((a) & (b)) == 0)
#define TB__FLAGS3(a, b, c) (TB__FLAGS2(a, b) && TB__BIT(c) && (((a) | (b)) & (c)) == 0)
#define TB__FLAGS4(a, b, c, d) (TB__FLAGS3(a, b, c) && TB__BIT(d) && (((a) | (b) | (c)) & (d)) == 0)
typedef char tb__flags_read[TB__FLAGS2(TB_READ_COPY, TB_READ_NO_CHECKSUM) ? 1 : -1];
typedef char tb__flags_collect[TB__BIT(TB_STOP_ON_ERROR) ? 1 : -1];
typedef char tb__flags_emit[TB__FLAGS4(TB_EMIT_FSYNC, TB_EMIT_STOP_ON_ERROR, TB_EMIT_VERIFY, TB_EMIT_REPLACE) ? 1 : -1];
typedef char tb__flags_config[TB__FLAGS3(TB_CONFIG_COOPERATIVE, TB_CONFIG_PDL, TB_CONFIG_TYPES_FROM_IR) ? 1 : -1];
typedef char tb__flags_constant[TB__FLAGS3(TB_CONSTANT_STATE, TB_CONSTANT_SHARED, TB_CONSTANT_EXTERNAL) ? 1 : -1];
#ifndef TB_NO_LAUNCHER
typedef char tb__flags_load[TB__FLAGS2(TB_LOAD_NO_PARAM_CHECK, TB_LOAD_PRIMARY_CONTEXT) ? 1 : -1];
typedef char tb__flags_launch[TB__FLAGS2(TB_LAUNCH_CHECKED, TB_LAUNCH_GRID_AUTO) ? 1 : -1];
typedef char
    tb__flags_model[TB__FLAGS4(TB_MODEL_GRAPH, TB_MODEL_STATIC_IO, TB_MODEL_VERIFY_WEIGHTS, TB_MODEL_SERIAL_LOAD) ? 1
                                                                                                                 : -1];
#endif

#if defined(__SSE2__)
#include <emmintrin.h> /* the checksum's vector path; every x86-64 has SSE2 */
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define TB__BIG_ENDIAN 1
#else
#define TB__BIG_ENDIAN 0
#endif

/* The argument codes: the one table of the alphabet (the >>args section's,
   defined here because the data model checks codes too). A row: the code,
   the bytes it occupies as a parameter, its kind, Triton's signature name
   (and another it also writes), and the MLIR type of the tt.func line
   ("" where the IR cannot say: it has no unsigned types). Every switch
   over codes is generated from it, so none can miss one, and the Python
   companion's table is checked against it (tests/test_codes.py).
   'O' and 'T' are matched by prefix ("*fp32", "!tt.ptr<...>",
   "tensordesc<...>", "!tt.tensordesc<...>"). */
#define TB__KIND_PTR 1
#define TB__KIND_BOOL 2
#define TB__KIND_SINT 3
#define TB__KIND_UINT 4
#define TB__KIND_FLOAT 5
#define TB__KIND_DESC 6
#define TB__ARG_CODES(X)                                        \
    X('O', 8, TB__KIND_PTR, "*", "", "!tt.ptr<")                \
    X('?', 1, TB__KIND_BOOL, "i1", "u1", "i1")                  \
    X('b', 1, TB__KIND_SINT, "i8", "", "i8")                    \
    X('h', 2, TB__KIND_SINT, "i16", "", "i16")                  \
    X('i', 4, TB__KIND_SINT, "i32", "", "i32")                  \
    X('l', 8, TB__KIND_SINT, "i64", "", "i64")                  \
    X('B', 1, TB__KIND_UINT, "u8", "", "")                      \
    X('H', 2, TB__KIND_UINT, "u16", "", "")                     \
    X('I', 4, TB__KIND_UINT, "u32", "", "")                     \
    X('K', 8, TB__KIND_UINT, "u64", "", "")                     \
    X('e', 2, TB__KIND_FLOAT, "fp16", "", "f16")                \
    X('y', 2, TB__KIND_FLOAT, "bf16", "", "bf16")               \
    X('f', 4, TB__KIND_FLOAT, "fp32", "f32", "f32")             \
    X('d', 8, TB__KIND_FLOAT, "fp64", "", "f64")                \
    X('T', 8, TB__KIND_DESC, "tensordesc<", "", "!tt.tensordesc<")

/* kind of a code, 0 if none: the table as a switch */
static int tb__code_kind(char c) {
    switch (c) {
#define TB__X(code, bytes, kind, triton, triton2, mlir) case code: return kind;
        TB__ARG_CODES(TB__X)
#undef TB__X
    default: return 0;
    }
}

/* ---------------------------------------------------------------------- */
/* >>core  Core: results, errors, options */
/* Allocation, errors and logging, strings, sorting, threads and */
/* atomics. The context every object carries: its allocator and logger, */
/* copied from the caller's tb_options so that frees use what allocated. */
/* ---------------------------------------------------------------------- */
typedef struct tb__ctx {
    tb_allocator a;
    void (*log)(void *user, tb_log_level level, const char *message);
    void *log_user;
} tb__ctx;

static tb__ctx tb__ctx_from(const tb_options *o) {
    tb__ctx c;
    memset(&c, 0, sizeof c);
    if (o) {
        if (o->allocator.alloc && o->allocator.realloc && o->allocator.free) c.a = o->allocator;
        else c.a.user = o->allocator.user;
        c.log = o->log;
        c.log_user = o->log_user;
    }
    return c;
}

static void *tb__alloc(const tb__ctx *c, size_t n) {
    if (n == 0) n = 1;
    return c->a.alloc ? c->a.alloc(c->a.user, n) : TB_MALLOC(c->a.user, n);
}
static void *tb__realloc(const tb__ctx *c, void *p, size_t n) {
    if (n == 0) n = 1;
    return c->a.realloc ? c->a.realloc(c->a.user, p, n) : TB_REALLOC(c->a.user, p, n);
}
static void tb__free(const tb__ctx *c, void *p) {
    if (!p) return;
    if (c->a.free) c->a.free(c->a.user, p);
    else TB_FREE(c->a.user, p);
}

/* Copies src into dst (cap bytes, NUL-terminated), each control byte and
   the backslash written as \xNN (so that no name can look escaped): names come from files and bundles, and a hash
   holding "\n" or an ESC sequence must not forge lines or reach a terminal. */
static void tb__escape_into(char *dst, size_t cap, const char *src) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (; *src && o + 1 < cap; src++) {
        unsigned char ch = (unsigned char)*src;
        if (ch >= 0x20 && ch != 0x7f && ch != '\\') {
            dst[o++] = (char)ch;
        } else {
            if (o + 5 >= cap) break;
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[ch >> 4];
            dst[o++] = hex[ch & 15];
        }
    }
    dst[o] = 0;
}

TB__PRINTF(3, 4)
static void tb__log(const tb__ctx *c, tb_log_level level, const char *fmt, ...) {
    char buf[768], safe[768];
    va_list ap;
    if (!c || !c->log) return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tb__escape_into(safe, sizeof safe, buf);
    c->log(c->log_user, level, safe);
}

static const char *const tb__result_strings[] = {
    "ok",
    "invalid argument",
    "out of memory",
    "I/O error",
    "input truncated",
    "not a triton bundle (bad magic)",
    "unsupported format version",
    "checksum mismatch",
    "malformed input",
    "sanity limit exceeded",
    "invalid name",
    "not found",
    "sentinel already present",
    "unsupported argument type",
    "parse error",
    "CUDA driver not available",
    "no CUDA device",
    "CUDA driver call failed",
    "mismatch (arguments or tensors that do not fit what they are given to)",
    "argument out of range",
    "argument violates kernel assumption",
    "shared memory request too large",
    "scratch buffer required",
    "input size outside the program's range"
};

TBDEF const char *tb_result_string(tb_result r) {
    if ((int)r < 0 || (int)r >= (int)tb_result_count_) return "unknown result";
    return tb__result_strings[r];
}

TBDEF const char *tb_version(void) { return TB_VERSION_STRING; }

static void tb__copy_field(char *dst, size_t cap, const char *src) {
    size_t n;
    if (!src) { dst[0] = 0; return; }
    n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* Fills err (if any) and returns code. The message is "<what>: <details>",
   with the kernel, file and offset appended when known. */
TB__PRINTF(7, 8)
static TB__COLD tb_result tb__fail(tb_error *err, tb_result code, const char *kernel, const char *file,
                          long long offset, int sys_errno, const char *fmt, ...) {
    va_list ap;
    char detail[400], raw[sizeof err->message];
    size_t n;
    if (!err) return code;
    err->code = code;
    err->sys_errno = sys_errno;
    err->cuda_result = 0;
    err->offset = offset;
    tb__copy_field(err->kernel, sizeof err->kernel, kernel);
    tb__copy_field(err->file, sizeof err->file, file);
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    n = (size_t)snprintf(raw, sizeof raw, "%s: %s", tb_result_string(code), detail);
    if (n < sizeof raw && kernel && *kernel) n += (size_t)snprintf(raw + n, sizeof raw - n, " [kernel %s]", kernel);
    if (n < sizeof raw && file && *file) n += (size_t)snprintf(raw + n, sizeof raw - n, " [file %s]", file);
    if (n < sizeof raw && offset >= 0) n += (size_t)snprintf(raw + n, sizeof raw - n, " [offset %lld]", offset);
    if (n < sizeof raw && sys_errno) snprintf(raw + n, sizeof raw - n, " (%s)", strerror(sys_errno));
    /* the message is for people: no raw control bytes from names in it;
       err->kernel and err->file keep the bytes as they are */
    tb__escape_into(err->message, sizeof err->message, raw);
    return code;
}

#define TB__OOM(err) tb__fail(err, tb_err_out_of_memory, NULL, NULL, -1, 0, "allocation failed")

/* The hash of the library's string sets (duplicate checks, the kernel
   table's indexes), never stored: eight bytes a multiply. A launch by name
   or cache key hashes its string once; the byte-at-a-time FNV-1a it
   replaced cost a multiply a character there (60 ns for a 52-character
   cache key). */
static TB__HOT uint32_t tb__str_hash(const char *s) {
    size_t n = strlen(s);
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n, w;
    for (; n >= 8; n -= 8, s += 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    for (w = 0; n; n--) w = (w << 8) | (unsigned char)s[n - 1]; /* no stack round trip */
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 29;
    return (uint32_t)(h ^ (h >> 32));
}

/* Overflow-checked size arithmetic: returns 0 on overflow. */
static int tb__add(size_t a, size_t b, size_t *out) {
    if (a > SIZE_MAX - b) return 0;
    *out = a + b;
    return 1;
}
static int tb__mul(size_t a, size_t b, size_t *out) {
    if (a && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

/* Grows *array (element size elem) to hold at least need elements. */
static int tb__grow(const tb__ctx *c, void **array, uint32_t *cap, uint32_t need, size_t elem) {
    uint32_t ncap;
    size_t bytes;
    void *p;
    if (need <= *cap) return 1;
    ncap = *cap ? *cap : 8;
    while (ncap < need) ncap = ncap > 0x7fffffffu ? need : ncap * 2;
    if (!tb__mul(ncap, elem, &bytes)) return 0;
    p = tb__realloc(c, *array, bytes);
    if (!p) return 0;
    *array = p;
    *cap = ncap;
    return 1;
}

/* ---- strings ----
   Byte-string helpers that the filesystem, the parsers and the launcher
   share. */
static const void *tb__memmem(const void *hay, size_t n, const char *needle) {
    const char *p = (const char *)hay, *end = p + n;
    size_t m = strlen(needle);
    while ((size_t)(end - p) >= m && (p = (const char *)memchr(p, needle[0], (size_t)(end - p))) != NULL) {
        if ((size_t)(end - p) >= m && memcmp(p, needle, m) == 0) return p;
        p++;
    }
    return NULL;
}

static int tb__has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && memcmp(s + n - m, suf, m) == 0;
}

/* ---- sorting ----
   One sort for the library's arrays, with the context pointer qsort lacks
   (the memory plan's and the weights file's orders once passed theirs
   through a global under a process-wide lock): a bottom-up merge sort,
   O(n log n) comparisons on any input and no recursion, since a bundle
   or a weights file can hand it millions of hostile entries. A merge
   sort rather than an in-place heapsort because it is stable: entries
   the comparator calls equal keep their order, which is the order the
   callers had from glibc's qsort (a merge sort in most of its versions;
   a weights file's zero-byte tensors at one offset stay in header
   order), now on every libc. Runs of TB__SORT_RUN are insertion-sorted,
   then merged a block of TB__SORT_BLOCK at a time before the blocks are:
   the strings a block's comparisons read stay in cache through its
   merges. Scratch: n * size bytes, on the stack up to TB__SORT_STACK,
   else from the caller's allocator; when that fails the array is left as
   it was and the result is tb_err_out_of_memory. */
typedef int (*tb__cmp_fn)(const void *a, const void *b, void *ctx);
#define TB__SORT_RUN 16u       /* elements insertion-sorted in place before the merges */
#define TB__SORT_BLOCK 1024u   /* elements merged into one run before any larger merge */
#define TB__SORT_STACK 1024u   /* scratch bytes that need no allocation */

/* a[0..n) by insertion, stable: an element goes after those equal to it
   (one comparison when it is in order already, else a binary search) */
static void tb__sort_insert(unsigned char *a, size_t n, size_t size, tb__cmp_fn cmp, void *ctx) {
    unsigned char t[128];
    size_t i, lo, hi, k, m;
    for (i = 1; i < n; i++) {
        if (cmp(a + (i - 1) * size, a + i * size, ctx) <= 0) continue;
        for (lo = 0, hi = i - 1; lo < hi;) { /* the first of a[0..i-1) that is greater */
            size_t mid = lo + (hi - lo) / 2;
            if (cmp(a + mid * size, a + i * size, ctx) <= 0) lo = mid + 1;
            else hi = mid;
        }
        if (size <= sizeof t) {
            memcpy(t, a + i * size, size);
            memmove(a + (lo + 1) * size, a + lo * size, (i - lo) * size);
            memcpy(a + lo * size, t, size);
        } else { /* a large element: swapped down a piece at a time */
            for (k = i; k > lo; k--)
                for (m = 0; m < size; m += sizeof t) {
                    size_t piece = size - m < sizeof t ? size - m : sizeof t;
                    unsigned char *x = a + (k - 1) * size + m, *y = a + k * size + m;
                    memcpy(t, x, piece), memcpy(x, y, piece), memcpy(y, t, piece);
                }
        }
    }
}

/* one merge step's loop, for an element size sz (a constant where it can be) */
#define TB__MERGE(sz)                                                                                  \
    while (l < le && r < re) {                                                                         \
        if (cmp(l, r, ctx) <= 0) memcpy(o, l, sz), l += sz;                                            \
        else memcpy(o, r, sz), r += sz;                                                                \
        o += sz;                                                                                       \
    }

/* The sorted runs of w in a[0..n) merged pairwise until one is left,
   through s (n elements) and back: a ends sorted. Stable: of two equal
   elements the left run's goes first. */
static void tb__sort_merges(unsigned char *a, unsigned char *s, size_t n, size_t w, size_t size, tb__cmp_fn cmp,
                            void *ctx) {
    unsigned char *src = a, *dst = s, *t;
    for (; w < n; w = w <= n / 2 ? 2 * w : n) {
        size_t lo;
        for (lo = 0; lo < n;) {
            size_t mid = w < n - lo ? lo + w : n, hi = mid < n && w < n - mid ? mid + w : n;
            const unsigned char *l = src + lo * size, *le = src + mid * size, *r = le, *re = src + hi * size;
            unsigned char *o = dst + lo * size;
            if (r < re && cmp(le - size, r, ctx) > 0) { /* (else the two are in order already) */
                /* a pointer's or an index's size: copies the compiler inlines */
                if (size == 8) TB__MERGE(8)
                else if (size == 4) TB__MERGE(4)
                else TB__MERGE(size)
            }
            memcpy(o, l, (size_t)(le - l));
            memcpy(o + (le - l), r, (size_t)(re - r));
            lo = hi;
        }
        t = src, src = dst, dst = t;
    }
    if (src != a) memcpy(a, src, n * size);
}
#undef TB__MERGE

static tb_result tb__sort(const tb__ctx *c, void *base, size_t n, size_t size, tb__cmp_fn cmp, void *ctx) {
    union { void *p; uint64_t u; double d; long double ld; unsigned char b[TB__SORT_STACK]; } stack; /* aligned */
    unsigned char *a = (unsigned char *)base, *s;
    size_t bytes, i, j, m;
    if (!size) return tb_ok;
    if (n <= TB__SORT_RUN) {
        tb__sort_insert(a, n, size, cmp, ctx);
        return tb_ok;
    }
    if (!tb__mul(n, size, &bytes)) return tb_err_out_of_memory;
    if (!(s = bytes <= sizeof stack ? stack.b : (unsigned char *)tb__alloc(c, bytes))) return tb_err_out_of_memory;
    for (i = 0; i < n; i += m) {
        m = n - i < TB__SORT_BLOCK ? n - i : TB__SORT_BLOCK;
        for (j = 0; j < m; j += TB__SORT_RUN)
            tb__sort_insert(a + (i + j) * size, m - j < TB__SORT_RUN ? m - j : TB__SORT_RUN, size, cmp, ctx);
        tb__sort_merges(a + i * size, s + i * size, m, TB__SORT_RUN, size, cmp, ctx);
    }
    tb__sort_merges(a, s, n, TB__SORT_BLOCK, size, cmp, ctx);
    if (s != stack.b) tb__free(c, s);
    return tb_ok;
}

/* The element of base[0..n) (sorted by cmp) that cmp calls equal to
   *key, or NULL: bsearch with the context. */
static const void *tb__search(const void *key, const void *base, size_t n, size_t size, tb__cmp_fn cmp, void *ctx) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const void *e = (const unsigned char *)base + mid * size;
        int d = cmp(key, e, ctx);
        if (!d) return e;
        if (d < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

/* The order of an array of strings (const char *): the one comparator
   for them, the listing's names, hashes, a program's tensor names. */
static int tb__cmp_str(const void *a, const void *b, void *ctx) {
    (void)ctx;
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ---- threads ----
   How many workers a job gets, and a team of them started and joined:
   writing or verifying a large bundle hashes its blocks on several cores,
   and collect, pack and emit size their workers here (they keep their own
   queues under a mutex). */
#define TB__MAX_THREADS 8

/* asked 0: one thread per online CPU up to auto_cap, fewer for small jobs
   (per_thread items each at least); never more threads than items or
   TB__MAX_THREADS. */
static unsigned tb__thread_count(unsigned asked, size_t items, size_t per_thread, size_t auto_cap) {
    long cpus;
    size_t n;
    if (!asked && items / per_thread <= 1) return 1; /* small: not even the CPU count is worth asking */
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
    n = asked ? asked : (cpus > 0 ? (size_t)cpus : 1);
    if (!asked && n > auto_cap) n = auto_cap;
    if (!asked && n > items / per_thread) n = items / per_thread;
    if (n > items) n = items;
    if (n > TB__MAX_THREADS) n = TB__MAX_THREADS;
    return n ? (unsigned)n : 1u;
}

/* Starts fn on jobs first..n-1 (each stride bytes apart) in threads; a job
   whose thread cannot be had runs here and then. tb__join waits for them. */
typedef struct tb__team {
    pthread_t tids[TB__MAX_THREADS];
    unsigned char started[TB__MAX_THREADS];
    unsigned n;
} tb__team;

static void tb__spawn(tb__team *t, unsigned first, unsigned n, void *(*fn)(void *), void *jobs, size_t stride) {
    unsigned i;
    t->n = n;
    for (i = 0; i < n; i++) t->started[i] = 0;
    for (i = first; i < n; i++) {
        void *job = (char *)jobs + (size_t)i * stride;
        if (pthread_create(&t->tids[i], NULL, fn, job) == 0) t->started[i] = 1;
        else fn(job);
    }
}
static void tb__join(tb__team *t) {
    unsigned i;
    for (i = 0; i < t->n; i++)
        if (t->started[i]) pthread_join(t->tids[i], NULL);
}

/* ---- atomics ----
   The one set of atomic accesses the lock-free readers use (the kernel
   table's loaded slots, the autotune choices, the launch memo's epoch,
   the count of running captures): GCC's and Clang's __atomic builtins.
   Without them TB__ATOMICS is 0, the accesses are plain ones, and each
   reader takes its lock instead of reading without it. */
#if defined(__GNUC__) || defined(__clang__)
#define TB__ATOMICS 1
#define TB__LOAD_ACQ(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#define TB__STORE_REL(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)
#define TB__LOAD_RELAXED(p) __atomic_load_n(&(p), __ATOMIC_RELAXED)
#define TB__ADD_RELAXED(p, v) ((void)__atomic_add_fetch(&(p), (v), __ATOMIC_RELAXED))
#define TB__SUB_RELAXED(p, v) ((void)__atomic_sub_fetch(&(p), (v), __ATOMIC_RELAXED))
#else
#define TB__ATOMICS 0
#define TB__LOAD_ACQ(p) (p)
#define TB__STORE_REL(p, v) ((p) = (v))
#define TB__LOAD_RELAXED(p) (p)
#define TB__ADD_RELAXED(p, v) ((void)((p) += (v)))
#define TB__SUB_RELAXED(p, v) ((void)((p) -= (v)))
#endif

/* ---------------------------------------------------------------------- */
/* >>arena  Arena (implementation only) */
/* A bundle's strings and copied bytes, freed all at once. */
/* ---------------------------------------------------------------------- */
typedef struct tb__block {
    struct tb__block *next;
    size_t used, cap;
    /* data follows, 16-byte aligned */
} tb__block;

#define TB__BLOCK_HEADER ((sizeof(tb__block) + 15u) & ~(size_t)15u)
#define TB__BLOCK_SIZE ((size_t)64 * 1024)

typedef struct tb__arena {
    tb__block *head;
    size_t next_size;   /* shared blocks double from TB__BLOCK_SIZE to TB__BLOCK_MAX */
} tb__arena;

#define TB__BLOCK_MAX ((size_t)4 << 20)

/* Faults a fresh block's pages in with one call instead of one fault per
   page: a large bundle's arena is most of what collecting costs. Linux
   5.14+; elsewhere, or on error, the pages fault in as they are touched. */
static void tb__prefault(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    uintptr_t a = ((uintptr_t)p + 4095u) & ~(uintptr_t)4095u, e = ((uintptr_t)p + n) & ~(uintptr_t)4095u;
    if (e > a) (void)madvise((void *)a, (size_t)(e - a), MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)n;
#endif
}

/* The offset in block b of its next free address that is a multiple of
   align (a power of two). */
static size_t tb__arena_fit(const tb__block *b, size_t align) {
    uintptr_t base = (uintptr_t)b + TB__BLOCK_HEADER;
    return (size_t)(((base + b->used + align - 1) & ~(uintptr_t)(align - 1)) - base);
}

/* align: 16 for bytes (a cubin goes to the driver from there), 64 for a
   program's constants (the runner's layout), 1 for
   strings, which a bundle read from a view or a mapping copies by the ten
   thousand: packed, they fault in fewer fresh pages. */
static void *tb__arena_alloc_aligned(const tb__ctx *c, tb__arena *ar, size_t n, size_t align) {
    tb__block *b = ar->head;
    size_t at, cap, total;
    int shared;
    size_t need, extra = align > 1 ? align - 1 : 0; /* (the allocator's alignment is not assumed) */
    if (n == 0) n = 1;
    /* aligned as an address, not as an offset in the block */
    if (b && (at = tb__arena_fit(b, align)) <= b->cap && b->cap - at >= n) {
        b->used = at + n;
        return (char *)b + TB__BLOCK_HEADER + at;
    }
    if (!tb__add(n, extra, &need)) return NULL;
    need = (need + 15u) & ~(size_t)15u;
    if (need < n) return NULL;
    if (ar->next_size < TB__BLOCK_SIZE) ar->next_size = TB__BLOCK_SIZE;
    shared = need <= ar->next_size / 4;
    cap = shared ? ar->next_size : need;
    if (!tb__add(cap, TB__BLOCK_HEADER, &total)) return NULL;
    b = (tb__block *)tb__alloc(c, total);
    if (!b) return NULL;
    if (total >= ((size_t)1 << 20)) tb__prefault(b, total);
    b->cap = cap;
    b->used = 0;
    at = tb__arena_fit(b, align);
    b->used = at + n;
    if (shared || !ar->head) {
        b->next = ar->head;
        ar->head = b;
        if (shared && ar->next_size < TB__BLOCK_MAX) ar->next_size *= 2;
    } else {
        /* a large private block goes behind the current one so that the
           current block's free space stays usable */
        b->next = ar->head->next;
        ar->head->next = b;
    }
    return (char *)b + TB__BLOCK_HEADER + at;
}

static void *tb__arena_alloc(const tb__ctx *c, tb__arena *ar, size_t n) {
    return tb__arena_alloc_aligned(c, ar, n, 16);
}

static char *tb__arena_strdup(const tb__ctx *c, tb__arena *ar, const char *s, size_t n) {
    char *p = (char *)tb__arena_alloc_aligned(c, ar, n + 1, 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

static void tb__arena_free(const tb__ctx *c, tb__arena *ar) {
    tb__block *b = ar->head;
    while (b) {
        tb__block *n = b->next;
        tb__free(c, b);
        b = n;
    }
    ar->head = NULL;
}

/* ---------------------------------------------------------------------- */
/* >>args  Arguments: codes and conversions */
/* What each argument code passes to the kernel.                         */
/* ---------------------------------------------------------------------- */
TBDEF uint16_t tb_fp16_from_double(double d) {
    uint64_t bits, m, q, rem, half;
    uint16_t sign;
    int exp, e, shift;
    memcpy(&bits, &d, 8);
    sign = (uint16_t)((bits >> 48) & 0x8000u);
    exp = (int)((bits >> 52) & 0x7ff);
    m = bits & 0xFFFFFFFFFFFFFULL;
    if (exp == 0x7ff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0u));
    if (exp == 0) return sign; /* double subnormals are far below fp16's range */
    m |= (uint64_t)1 << 52;
    e = exp - 1023 + 15;
    shift = e >= 1 ? 42 : 42 + (1 - e);
    if (shift > 63) return sign;
    q = m >> shift;
    rem = m & (((uint64_t)1 << shift) - 1);
    half = (uint64_t)1 << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    if (e < 1) return (uint16_t)(sign | q); /* subnormal, or rounded up to the smallest normal */
    if (q == 0x800) {
        q >>= 1;
        e++;
    }
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | ((unsigned)e << 10) | (q & 0x3ffu));
}

TBDEF uint16_t tb_bf16_from_double(double d) {
    float f = (float)d;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

TBDEF double tb_fp16_to_double(uint16_t h) {
    int e = (h >> 10) & 31, s;
    double m = h & 0x3ff, v, scale = 1.0;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = m / 16777216.0;
    else {
        for (s = e - 25; s > 0; s--) scale *= 2.0;
        for (s = e - 25; s < 0; s++) scale *= 0.5;
        v = (m + 1024.0) * scale;
    }
    return (h & 0x8000) ? -v : v;
}

TBDEF double tb_bf16_to_double(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Converts without range checks; writes the parameter's bytes at the
   start of the slot, in host order. */
/* The low `bytes` bytes of u as that width's integer, in host order. */
static void tb__store(tb_arg *slot, uint64_t u, uint32_t bytes) {
    switch (bytes) {
    case 1: { uint8_t x = (uint8_t)u; memcpy(slot, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)u; memcpy(slot, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)u; memcpy(slot, &x, 4); break; }
    default: slot->u = u; break;
    }
}
static TB__HOT void tb__convert_float(char code, tb_arg v, tb_arg *slot) {
    switch (code) {
    case 'f': { float x = (float)v.f; memcpy(slot, &x, 4); break; }
    case 'e': tb__store(slot, tb_fp16_from_double(v.f), 2); break;
    case 'y': tb__store(slot, tb_bf16_from_double(v.f), 2); break;
    default: *slot = v; break; /* d: the double's 8 bytes */
    }
}
static TB__HOT void tb__convert(char code, tb_arg v, tb_arg *slot) {
    slot->u = 0;
    switch (code) { /* the code table as a switch: each case's kind and width are constants */
#define TB__X(c, bytes, kind, triton, triton2, mlir)                                                                   \
    case c:                                                                                                            \
        if (kind == TB__KIND_FLOAT)                                                                                    \
            tb__convert_float(c, v, slot);                                                                             \
        else                                                                                                           \
            tb__store(slot, kind == TB__KIND_BOOL ? (uint64_t)(v.u != 0) : v.u,                                        \
                      bytes); /* bools: what the grid reads */                                                         \
        break;
        TB__ARG_CODES(TB__X)
#undef TB__X
    default: *slot = v; break;
    }
}

static double tb__fabs(double x) { return x < 0 ? -x : x; }

/* Checked mode's ranges. Never narrower than Triton 3.6's launcher (which
   parses i8 with Python's "b", 0..255; u8/u16/u32/u64 with "B"/"H"/"I"/"K",
   any integer, masked), never wider than the parameter's bits can hold: an
   N-bit integer takes its signed or its unsigned reading, except i16, i32
   and i64, whose signed range Triton enforces too. A bool is 0 or 1.
   sign_unknown (codes read from the IR, where u8 reads as i8): the signed
   or the unsigned range of the width. */
static int tb__in_range(char code, tb_arg v, int sign_unknown) {
    switch (code) {
    case '?': return v.u <= 1u;
    case 'b': case 'B': return v.i >= -128 && v.i <= 255;
    case 'h': return v.i >= -32768 && v.i <= (sign_unknown ? 65535 : 32767);
    case 'H': return v.i >= -32768 && v.i <= 65535;
    case 'i': return v.i >= INT32_MIN && v.i <= (sign_unknown ? (int64_t)UINT32_MAX : (int64_t)INT32_MAX);
    case 'I': return v.i >= INT32_MIN && v.i <= (int64_t)UINT32_MAX;
    case 'f': return v.f != v.f || tb__fabs(v.f) <= 3.4028234663852886e38 || isinf(v.f);
    case 'e': return v.f != v.f || tb__fabs(v.f) < 65520.0 || isinf(v.f);
    case 'y': return v.f != v.f || tb__fabs(v.f) <= 3.3895313892515355e38 || isinf(v.f);
    default: return 1;
    }
}

TBDEF tb_result tb_arg_convert(char code, tb_arg v, int checked, tb_arg *slot, tb_error *err) {
    if (!slot) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "slot is NULL");
    if (!tb_arg_code_size(code))
        return tb__fail(err, tb_err_unsupported_type, NULL, NULL, -1, 0, "unknown type code 0x%02x",
                        (unsigned char)code);
    if (code == 'T')
        return tb__fail(err, tb_err_unsupported_type, NULL, NULL, -1, 0,
                        "a tensor descriptor becomes several parameters; tb_launch builds them");
    if (checked && !tb__in_range(code, v, 0))
        return tb__fail(err, tb_err_arg_range, NULL, NULL, -1, 0, "value %lld (%g) does not fit type '%c'",
                        (long long)v.i, v.f, code);
    tb__convert(code, v, slot);
    return tb_ok;
}

/* ---------------------------------------------------------------------- */
/* >>grid  Grid rules: the language, evaluation and expressions */
/* The language's table of operations and its one checker; a config's   */
/* grid from a launch's arguments (format 2.2); expressions parsed from  */
/* Python's syntax and written back (tb_grid_text).                      */
/* ---------------------------------------------------------------------- */
/* The grid language's operations, one row each: the one list of them
   (docs/FORMAT.md, section 4). A row: the code (TB_GRID_*), its name as
   the Python companion's OP_NAMES spells it, its spelling in a grid
   expression (what tb_grid_parse reads and tb_grid_text writes; "" for an
   operand), and its arity, the values it pops (an operand pops none; every
   operation pushes one). The checker takes each operation's arity from
   here, so a new operator is a row here (numbered past the last, the
   evaluator telling operands by code <= TB_GRID_SYM), its case in the
   evaluator (tb__grid_binop), and its syntax in the parser. */
#define TB__GRID_OPS(X)                          \
    X(TB_GRID_CONST, "CONST", "", 0)             \
    X(TB_GRID_ARG, "ARG", "", 0)                 \
    X(TB_GRID_PARAM, "PARAM", "", 0)             \
    X(TB_GRID_EXTRA, "EXTRA", "", 0)             \
    X(TB_GRID_SYM, "SYM", "", 0)                 \
    X(TB_GRID_ADD, "ADD", "+", 2)                \
    X(TB_GRID_SUB, "SUB", "-", 2)                \
    X(TB_GRID_MUL, "MUL", "*", 2)                \
    X(TB_GRID_FLOORDIV, "FLOORDIV", "//", 2)     \
    X(TB_GRID_CEILDIV, "CEILDIV", "cdiv", 2)     \
    X(TB_GRID_MOD, "MOD", "%", 2)                \
    X(TB_GRID_MIN, "MIN", "min", 2)              \
    X(TB_GRID_MAX, "MAX", "max", 2)              \
    X(TB_GRID_NEG, "NEG", "-", 1)

/* What the code reading the table assumes, checked when it builds: the
   evaluators tell an operand from an operator by code <= TB_GRID_SYM, and
   tb_grid_text writes operators of one or two operands. */
#define TB__GRID_OP_OK(code, name, text, arity) && (((arity) == 0) == ((code) <= TB_GRID_SYM)) && (arity) <= 2
typedef char tb__grid_ops_ok[(1 TB__GRID_OPS(TB__GRID_OP_OK)) ? 1 : -1];
#undef TB__GRID_OP_OK

/* An operation's arity, -1 for one this version does not know: the table
   as a switch. */
static int tb__grid_arity(uint32_t op) {
    switch (op) {
#define TB__X(code, name, text, arity) case code: return arity;
        TB__GRID_OPS(TB__X)
#undef TB__X
    default: return -1;
    }
}
/* An operator's spelling in a grid expression ("" for an operand). */
static const char *tb__grid_op_text(uint32_t op) {
    switch (op) {
#define TB__X(code, name, text, arity) case code: return text;
        TB__GRID_OPS(TB__X)
#undef TB__X
    default: return "";
    }
}

/* How a program fails the language (tb__grid_walk's result; 0: it runs). */
#define TB__WALK_UNKNOWN 1       /* an op this version does not know: a newer one's */
#define TB__WALK_FOREIGN 2       /* an operand the caller never takes: SYM in a rule; ARG, PARAM, EXTRA in an
                                    expression */
#define TB__WALK_FIELD 3         /* an index or value out of the caller's range, or an unused field not zero */
#define TB__WALK_SHORT 4         /* too few values on the stack for an operator */
#define TB__WALK_DEEP 5          /* the stack past TB_GRID_STACK */
#define TB__WALK_LEFT 6          /* other than one value left at the end */
/* A caller's operands: 0 where it takes o, else TB__WALK_FOREIGN or
   TB__WALK_FIELD. */
typedef int (*tb__grid_operand_fn)(const tb_grid_op *o, const void *user);

/* The grid language's one checker, for grid rules (tb__check_grid),
   program expressions (tb__check_expr_ops) and tb_grid_text: each op one
   the table knows, each operand one the caller takes (operand; NULL takes
   every operand as it is), each operator's unused index and value zero,
   the stack, at each operator's arity from the table, never short nor past
   TB_GRID_STACK, and one value left. Returns 0 or the first fault in the
   program's order, *at the operation (n for the end) and *depth the values
   on the stack before it; the caller words the error. */
static inline int tb__grid_walk(const tb_grid_op *ops, uint32_t n, tb__grid_operand_fn operand, const void *user,
                                uint32_t *at, uint32_t *depth) {
    uint32_t i, d = 0;
    int a, f = 0;
    for (i = 0; i < n; i++) {
        const tb_grid_op *o = &ops[i];
        if ((a = tb__grid_arity(o->op)) < 0) f = TB__WALK_UNKNOWN;
        else if (a == 0 && operand) f = operand(o, user);
        else if (a > 0 && (o->index || o->value)) f = TB__WALK_FIELD;
        if (!f && d < (uint32_t)a) f = TB__WALK_SHORT;
        if (f) break;
        if ((d = d - (uint32_t)a + 1) > TB_GRID_STACK) {
            f = TB__WALK_DEEP;
            break;
        }
    }
    *at = i, *depth = d;
    return f ? f : d == 1 ? 0 : TB__WALK_LEFT;
}

/* A grid rule must run: the language's checker over each dimension of
   1..TB_MAX_GRID_OPS operations, with the rule's operands: CONST (index
   zero), an integer or bool argument of the config, one of its params, a
   grid_arg under TB_MAX_GRID_EXTRA (value zero), never SYM (a program's).
   An operation this version does not know was written by a newer one. */
static int tb__grid_int_code(char c) {
    int k = tb__code_kind(c);
    return k == TB__KIND_BOOL || k == TB__KIND_SINT || k == TB__KIND_UINT;
}
typedef struct tb__rule_operands {
    const tb_launch_config *cf;
    size_t nargs;
} tb__rule_operands;
static inline int tb__rule_operand(const tb_grid_op *o, const void *user) {
    const tb__rule_operands *ro = (const tb__rule_operands *)user;
    if (o->op == TB_GRID_SYM) return TB__WALK_FOREIGN;
    if ((o->op != TB_GRID_CONST && o->value) || (o->op == TB_GRID_CONST && o->index) ||
        (o->op == TB_GRID_ARG && (o->index >= ro->nargs || !tb__grid_int_code(ro->cf->arg_types[o->index]))) ||
        (o->op == TB_GRID_PARAM && o->index >= ro->cf->param_count) ||
        (o->op == TB_GRID_EXTRA && o->index >= TB_MAX_GRID_EXTRA))
        return TB__WALK_FIELD;
    return 0;
}
static tb_result tb__check_grid(const tb_grid_rule *g, const tb_launch_config *cf, const char *key, long long offset,
                                tb_error *err) {
    tb__rule_operands ro;
    uint32_t d, i, depth;
    ro.cf = cf, ro.nargs = strlen(cf->arg_types);
    for (d = 0; d < 3; d++) {
        if (g->op_count[d] == 0 || g->op_count[d] > TB_MAX_GRID_OPS || !g->ops[d])
            return tb__fail(err, g->op_count[d] > TB_MAX_GRID_OPS ? tb_err_limit : tb_err_malformed, key, NULL, offset,
                            0, "grid rule dimension %u has %u operations (1..TB_MAX_GRID_OPS)", d, g->op_count[d]);
        switch (tb__grid_walk(g->ops[d], g->op_count[d], tb__rule_operand, &ro, &i, &depth)) {
        case 0: break;
        case TB__WALK_UNKNOWN:
            return tb__fail(err, tb_err_unsupported_version, key, NULL, offset, 0,
                            "grid rule operation %u is unknown (written by a newer version?)", g->ops[d][i].op);
        case TB__WALK_FOREIGN:
            return tb__fail(err, tb_err_malformed, key, NULL, offset, 0,
                            "grid rule dimension %u, operation %u: SYM (a program's symbol) in a grid rule", d, i);
        case TB__WALK_FIELD:
            return tb__fail(err, tb_err_malformed, key, NULL, offset, 0,
                            "grid rule dimension %u, operation %u: operand %u is not an integer argument, a "
                            "param or a grid_arg of this config, or an unused field is not zero",
                            d, i, g->ops[d][i].index);
        case TB__WALK_SHORT:
            return tb__fail(err, tb_err_malformed, key, NULL, offset, 0,
                            "grid rule dimension %u, operation %u: too few values on the stack", d, i);
        case TB__WALK_DEEP:
            return tb__fail(err, tb_err_limit, key, NULL, offset, 0,
                            "grid rule dimension %u needs more than %u stack entries", d, TB_GRID_STACK);
        default:
            return tb__fail(err, tb_err_malformed, key, NULL, offset, 0,
                            "grid rule dimension %u leaves %u values, not one", d, depth);
        }
    }
    return tb_ok;
}

/* The value launch argument i gives a rule: what the kernel reads, as a
   signed 64-bit integer. 0, or 1 when it does not fit (a u64 past 2^63). */
static int64_t tb__sext(uint64_t u, uint32_t bytes) { /* the low bytes, sign-extended */
    switch (bytes) {
    case 1: return (int8_t)(uint8_t)u;
    case 2: return (int16_t)(uint16_t)u;
    case 4: return (int32_t)(uint32_t)u;
    default: return (int64_t)u;
    }
}
static uint64_t tb__zext(uint64_t u, uint32_t bytes) { /* the low bytes */
    return bytes == 1 ? (uint8_t)u : bytes == 2 ? (uint16_t)u : bytes == 4 ? (uint32_t)u : u;
}
static TB__HOT int tb__grid_arg(char code, tb_arg a, int64_t *v) {
    uint64_t u;
    switch (code) { /* the code table as a switch (rules only read integer and bool codes) */
#define TB__X(c, bytes, kind, triton, triton2, mlir)                                    \
    case c:                                                                             \
        if (kind == TB__KIND_BOOL) *v = a.u != 0;                                       \
        else if (kind == TB__KIND_SINT) *v = tb__sext(a.u, bytes);                      \
        else if ((u = tb__zext(a.u, bytes)) > (uint64_t)INT64_MAX) return 1;            \
        else *v = (int64_t)u;                                                           \
        return 0;
        TB__ARG_CODES(TB__X)
#undef TB__X
    default:
        if (a.u > (uint64_t)INT64_MAX) return 1;
        *v = (int64_t)a.u;
        return 0;
    }
}

/* Python's floor division and modulo on int64; 1 on a zero divisor or
   INT64_MIN / -1. */
static int tb__floordiv(int64_t a, int64_t b, int64_t *q, int64_t *m) {
    if (b == 0 || (a == INT64_MIN && b == -1)) return 1;
    *q = a / b, *m = a % b;
    if (*m != 0 && ((*m < 0) != (b < 0))) *q -= 1, *m += b;
    return 0;
}

/* ceil(a / b), exact wherever the result fits: C's truncating quotient
   and remainder are defined for every pair but b == 0 and INT64_MIN / -1
   (2^63, the only result that does not fit), and the quotient moves up by
   one when the division was inexact and the true quotient positive; it
   cannot overflow then, since |b| > 1. 1 on those two. Shared by the
   interpreter and the launch's fast path, so they cannot disagree. */
static TB__HOT int tb__ceildiv(int64_t a, int64_t b, int64_t *q) {
    int64_t t, m;
    if (b == 0 || (a == INT64_MIN && b == -1)) return 1;
    t = a / b, m = a % b;
    *q = t + (m != 0 && ((m < 0) == (b < 0)));
    return 0;
}

/* What a program reads besides its own operations: the arguments' codes
   and values, the config's params, the caller's grid values, and the
   kernel's name for messages. tb_grid_compute fills it from a config, a
   loaded kernel from its plan. */
typedef struct tb__grid_env {
    const char *codes;
    const tb_config_param *params; /* NULL: PARAM operands were resolved (a plan) */
    const tb_arg *args;
    const int64_t *extra;
    uint32_t n_extra;
    const char *name;
    const int64_t *syms;         /* (2.6) a program expression's symbol values */
    uint32_t n_syms;
    int expr;                    /* (2.6) 1: an expression's operations, not a grid rule's (for messages) */
} tb__grid_env;

/* A binary operation, exact: 1 where the result does not fit or a divisor
   is zero. The interpreter's, and the expression parser's folding. */
static int tb__grid_binop(uint32_t op, int64_t a, int64_t b, int64_t *v) {
    int64_t q, m;
    *v = 0;
    switch (op) {
    case TB_GRID_ADD:
        if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return 1;
        *v = a + b;
        return 0;
    case TB_GRID_SUB:
        if ((b < 0 && a > INT64_MAX + b) || (b > 0 && a < INT64_MIN + b)) return 1;
        *v = a - b;
        return 0;
    case TB_GRID_MUL:
        if (a == 0 || b == 0) return 0;
        if ((a == -1 && b == INT64_MIN) || (b == -1 && a == INT64_MIN)) return 1;
        if (a == -1 || b == -1) return *v = -(a == -1 ? b : a), 0;
        *v = (int64_t)((uint64_t)a * (uint64_t)b);
        return *v / b != a;
    case TB_GRID_FLOORDIV: return tb__floordiv(a, b, v, &m);
    case TB_GRID_MOD: return tb__floordiv(a, b, &q, v);
    case TB_GRID_CEILDIV: return tb__ceildiv(a, b, v);
    case TB_GRID_MIN: return *v = a < b ? a : b, 0;
    default: return *v = a > b ? a : b, 0; /* MAX */
    }
}

/* One dimension: the program's value, or an error naming what went wrong. */
static tb_result tb__grid_run(const tb_grid_op *ops, uint32_t n, const tb__grid_env *env, uint32_t dim, int64_t *out,
                              tb_error *err) {
    const tb_arg *args = env->args;
    const int64_t *extra = env->extra;
    uint32_t n_extra = env->n_extra;
    int64_t st[TB_GRID_STACK], a, b, v;
    uint32_t sp = 0, i;
    static const char *const dims = "xyz";
    for (i = 0; i < n; i++) {
        const tb_grid_op *o = &ops[i];
        int bad = 0;
        if (o->op <= TB_GRID_SYM) {
            switch (o->op) {
            case TB_GRID_CONST: v = o->value; break;
            case TB_GRID_ARG:
                if (tb__grid_arg(env->codes[o->index], args[o->index], &v))
                    return tb__fail(err, tb_err_arg_range, env->name, NULL, -1, 0,
                                    "grid %c: argument %u is over 2^63, out of the grid rule's range", dims[dim],
                                    o->index);
                if (TB__UNLIKELY(o->value) && args[o->index].u > 1) /* tb__grid_plan_bool's mark */
                    return tb__fail(err, tb_err_arg_range, env->name, NULL, -1, 0,
                                    "grid %c: argument %u is a 1-byte bool in the cubin where the config says integer, "
                                    "and the grid rule reads it: pass 0 or 1, not %llu", dims[dim], o->index,
                                    (unsigned long long)args[o->index].u);
                break;
            case TB_GRID_PARAM: v = env->params[o->index].value; break;
            case TB_GRID_SYM:
                if (o->index >= env->n_syms)
                    return tb__fail(err, tb_err_malformed, env->name, NULL, -1, 0, "expression: symbol %u of %u",
                                    o->index, env->n_syms);
                v = env->syms[o->index];
                break;
            default:
                if (o->index >= n_extra || !extra)
                    return tb__fail(err, tb_err_arg_range, env->name, NULL, -1, 0,
                                    "grid %c: the rule reads grid_args[%u], and %u were given", dims[dim], o->index,
                                    n_extra);
                v = extra[o->index];
            }
            st[sp++] = v;
            continue;
        }
        b = st[--sp];
        if (o->op == TB_GRID_NEG) {
            bad = b == INT64_MIN;
            v = bad ? 0 : -b;
        } else {
            a = st[--sp];
            bad = tb__grid_binop(o->op, a, b, &v);
        }
        if (bad && env->expr)
            return tb__fail(err, tb_err_arg_range, env->name, NULL, -1, 0,
                            "operation %u of the expression overflows or divides by zero", i);
        if (bad)
            return tb__fail(err, tb_err_arg_range, env->name, NULL, -1, 0,
                            "grid %c: operation %u of the rule overflows or divides by zero", dims[dim], i);
        st[sp++] = v;
    }
    *out = st[0];
    return tb_ok;
}

/* The evaluated dimension d into grid[d], or the error of a value CUDA's
   launch cannot take; and the error of a config without a rule: shared by
   tb_grid_compute and the launch (tb__rule_grid). */
static TB__HOT tb_result tb__grid_store(const char *name, uint32_t d, int64_t v, uint32_t *grid, tb_error *err) {
    static const int64_t most[3] = {2147483647, 65535, 65535};
    if (TB__UNLIKELY(v < 0 || v > most[d]))
        return tb__fail(err, tb_err_arg_range, name, NULL, -1, 0, "grid %c is %lld, outside 0..%lld", "xyz"[d],
                        (long long)v, (long long)most[d]);
    grid[d] = (uint32_t)v;
    return tb_ok;
}
static tb_result tb__no_grid_rule(const char *name, tb_error *err) {
    return tb__fail(err, tb_err_not_found, name, NULL, -1, 0,
                    "the config has no grid rule (records from a Triton cache carry none; the Python exporter "
                    "writes them): give the grid");
}

/* A caller's config may hold a rule no builder checked: checked here
   (at most 3 x TB_MAX_GRID_OPS operations) before it runs. */
TBDEF tb_result tb_grid_compute(const tb_launch_config *cf, const tb_arg *args, uint32_t arg_count,
                                const int64_t *extra, uint32_t n_extra, uint32_t grid[3], tb_error *err) {
    tb__grid_env env;
    uint32_t d;
    tb_result r;
    if (!cf || !grid || !cf->arg_types)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "config or grid is NULL");
    if (cf->param_count && !cf->params)
        return tb__fail(err, tb_err_invalid_argument, cf->function_name, NULL, -1, 0,
                        "the config has %u params and params is NULL", cf->param_count);
    if (!cf->grid) return tb__no_grid_rule(cf->function_name, err);
    if ((r = tb__check_grid(cf->grid, cf, cf->function_name, -1, err)) != tb_ok) return r;
    if (arg_count != strlen(cf->arg_types) || (arg_count && !args))
        return tb__fail(err, tb_err_arg_mismatch, cf->function_name, NULL, -1, 0,
                        "%u arguments given, the kernel takes %u", arg_count, (unsigned)strlen(cf->arg_types));
    env.codes = cf->arg_types, env.params = cf->params, env.args = args, env.extra = extra, env.n_extra = n_extra;
    env.name = cf->function_name, env.syms = NULL, env.n_syms = 0, env.expr = 0;
    for (d = 0; d < 3; d++) {
        int64_t v = 0;
        if ((r = tb__grid_run(cf->grid->ops[d], cf->grid->op_count[d], &env, d, &v, err)) != tb_ok ||
            (r = tb__grid_store(cf->function_name, d, v, grid, err)) != tb_ok)
            return r;
    }
    return tb_ok;
}

#ifndef TB_NO_LAUNCHER
/* The lowest set bit of m (not 0): a power of two's shift here, the
   kernel table's divisibility masks later. */
static uint32_t tb__ctz64(uint64_t m) {
#if defined(__GNUC__) || defined(__clang__)
    return (uint32_t)__builtin_ctzll(m);
#else
    uint32_t i = 0;
    while (!((m >> i) & 1u)) i++;
    return i;
#endif
}

/* ---- the rule as a loaded kernel keeps it ----
   Params resolved to constants, and each dimension's usual shape marked so
   that the launch evaluates it without the interpreter: form 1 a constant,
   form 2 CEILDIV(ARG a, c > 0) (Inductor's Grid1D and Triton's cdiv), form
   3 the same with c a power of two (a shift: no division, whose latency is
   a measurable part of a launch on some hosts). The fields a launch reads
   take 64 bytes; the operations live in the owner's storage. */
typedef struct tb__grid_plan {
    uint32_t count[3];          /* 0, 0, 0: the config has no rule */
    uint8_t form[3];            /* 0: the interpreter */
    uint8_t shift[3];           /* form 3: c == 2^shift */
    char code[3];               /* forms 2 and 3: argument arg's code */
    uint16_t arg[3];
    int64_t c[3];
    tb_grid_op (*ops)[TB_MAX_GRID_OPS]; /* [3]: the operations, PARAMs resolved */
} tb__grid_plan;

static void tb__grid_plan_make(tb__grid_plan *g, tb_grid_op (*ops)[TB_MAX_GRID_OPS], const char *codes,
                               const tb_launch_config *cfg) {
    uint32_t d, q;
    memset(g->count, 0, sizeof g->count);
    memset(g->form, 0, sizeof g->form);
    g->ops = ops;
    if (!cfg->grid) return;
    for (d = 0; d < 3; d++) {
        g->count[d] = cfg->grid->op_count[d];
        for (q = 0; q < g->count[d]; q++) {
            tb_grid_op o = cfg->grid->ops[d][q];
            if (o.op == TB_GRID_PARAM) o.op = TB_GRID_CONST, o.value = cfg->params[o.index].value, o.index = 0;
            ops[d][q] = o;
        }
        if (g->count[d] == 1 && ops[d][0].op == TB_GRID_CONST) {
            g->form[d] = 1, g->c[d] = ops[d][0].value;
        } else if (g->count[d] == 3 && ops[d][0].op == TB_GRID_ARG && ops[d][1].op == TB_GRID_CONST &&
                   ops[d][1].value > 0 && ops[d][2].op == TB_GRID_CEILDIV) {
            int64_t c = ops[d][1].value; /* the index is an argument's: under TB_MAX_ARGS, so 16 bits */
            g->form[d] = (c & (c - 1)) ? 2 : 3, g->shift[d] = (uint8_t)tb__ctz64((uint64_t)c);
            g->arg[d] = (uint16_t)ops[d][0].index, g->code[d] = codes[ops[d][0].index], g->c[d] = c;
        }
    }
}

/* Argument a is a 1-byte bool in the cubin where the config says 'i' or
   'I': the operations that read it are marked (value 1 in the plan's ARG,
   a field the format leaves zero), so that the launch refuses anything but
   0 and 1 there (tb_grid_compute, which reads the config's 'i', would
   report another grid), and no fast path skips that check. */
static void tb__grid_plan_bool(tb__grid_plan *g, uint32_t a) {
    uint32_t d, q;
    for (d = 0; d < 3; d++)
        for (q = 0; q < g->count[d]; q++)
            if (g->ops[d][q].op == TB_GRID_ARG && g->ops[d][q].index == a) {
                g->ops[d][q].value = 1;
                if (g->form[d] >= 2) g->form[d] = 0;
            }
}

/* The launch's grid: the plan over the arguments (codes: the loaded
   kernel's, bools included), into grid. */
static TB__HOT tb_result tb__grid_plan_eval(const tb__grid_plan *g, const char *codes, const char *name,
                                            const tb_arg *args, const int64_t *extra, uint32_t n_extra, uint32_t *grid,
                                            tb_error *err) {
    tb__grid_env env;
    uint32_t d;
    tb_result r;
    if (TB__UNLIKELY(!g->count[0])) return tb__no_grid_rule(name, err);
    env.codes = codes, env.params = NULL, env.args = args, env.extra = extra, env.n_extra = n_extra, env.name = name;
    env.syms = NULL, env.n_syms = 0, env.expr = 0;
    for (d = 0; d < 3; d++) {
        int64_t v = 0, a;
        if (g->form[d] == 1) {
            v = g->c[d];
        } else if (g->form[d] >= 2 && !tb__grid_arg(g->code[d], args[g->arg[d]], &a)) {
            if (g->form[d] == 3 && a >= 0)
                v = (a >> g->shift[d]) + ((a & (g->c[d] - 1)) != 0); /* ceil(a / 2^shift), exact */
            else
                (void)tb__ceildiv(a, g->c[d], &v); /* c > 0: it cannot fail; the interpreter's own helper */
        } else if ((r = tb__grid_run(g->ops[d], g->count[d], &env, d, &v, err)) != tb_ok) {
            return r;
        }
        if ((r = tb__grid_store(name, d, v, grid, err)) != tb_ok) return r;
    }
    return tb_ok;
}
#endif

/* ---- grid expressions: Python's syntax, compiled to a rule's program ----
   The C twin of the Python companion's GridCompiler, for callers without
   Python (tbundle pack --grid): the same grammar, the same postfix order
   and the same constant folding, so both give one program for one string.
       expr  = term { ("+" | "-") term }
       term  = unary { ("*" | "//" | "%") unary }
       unary = ("-" | "+") unary | atom
       atom  = integer | name | name "[" 'NAME' "]" | name "(" args ")" | "(" expr ")"
   where a name may be dotted (triton.cdiv), calls are cdiv / ceildiv (two
   arguments), min / max (one or more) and int (one), and name["X"] reads X
   (Triton's meta['BLOCK']). */
typedef struct tb__gx {
    const char *s, *p;
    const char *const *names;
    uint32_t name_count;
    const tb_config_param *params;
    uint32_t param_count;
    tb_grid_op ops[TB_MAX_GRID_OPS + 1]; /* one over: an operation is appended, then folded, then counted */
    uint32_t n, depth;
    uint32_t big;               /* 1 + the index of a CONST that holds the literal 2^63, which only NEG may follow */
    const char *big_at;
    tb_error *err;
} tb__gx;

static tb_result tb__gx_fail(tb__gx *g, const char *at, const char *what) {
    return tb__fail(g->err, tb_err_parse, NULL, NULL, (long long)(at - g->s), 0, "grid expression, column %u: %s",
                    (unsigned)(at - g->s) + 1, what);
}
static void tb__gx_ws(tb__gx *g) {
    while (*g->p == ' ' || *g->p == '\t') g->p++;
}
static int tb__gx_ident(char c, int first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

/* Appends op and folds as the Python companion's _fold_ops does: a NEG of
   a constant (not -2^63), and ADD SUB MUL MIN MAX of two constants where
   the result fits. */
static tb_result tb__gx_emit(tb__gx *g, uint32_t op, uint32_t index, int64_t value, const char *at) {
    tb_grid_op *o;
    if (g->big) { /* 2^63 is a literal only as -9223372036854775808, as Python folds it */
        if (op != TB_GRID_NEG || g->big != g->n) return tb__gx_fail(g, g->big_at, "an integer past 2^63 - 1");
        g->big = 0; /* its CONST already holds -2^63 */
        return tb_ok;
    }
    if (g->n > TB_MAX_GRID_OPS) return tb__gx_fail(g, at, "more than TB_MAX_GRID_OPS operations");
    o = &g->ops[g->n++];
    o->op = op, o->index = index, o->value = value;
    if (op == TB_GRID_NEG && g->n >= 2 && o[-1].op == TB_GRID_CONST && o[-1].value != INT64_MIN) {
        o[-1].value = -o[-1].value;
        g->n--;
    } else if ((op == TB_GRID_ADD || op == TB_GRID_SUB || op == TB_GRID_MUL || op == TB_GRID_MIN ||
                op == TB_GRID_MAX) &&
               g->n >= 3 && o[-1].op == TB_GRID_CONST && o[-2].op == TB_GRID_CONST) {
        int64_t v;
        if (!tb__grid_binop(op, o[-2].value, o[-1].value, &v)) { /* the interpreter's test of "fits" */
            o[-2].value = v;
            g->n -= 2;
        }
    }
    return tb_ok;
}

static tb_result tb__gx_expr(tb__gx *g);

/* A name read as an operand: an argument, else a param, else an error. */
static tb_result tb__gx_name(tb__gx *g, const char *at, size_t len) {
    uint32_t i;
    for (i = 0; i < g->name_count; i++)
        if (g->names[i] && strlen(g->names[i]) == len && memcmp(g->names[i], at, len) == 0)
            return tb__gx_emit(g, TB_GRID_ARG, i, 0, at);
    for (i = 0; i < g->param_count; i++)
        if (g->params[i].name && strlen(g->params[i].name) == len && memcmp(g->params[i].name, at, len) == 0)
            return tb__gx_emit(g, TB_GRID_PARAM, i, 0, at);
    {
        char what[340], names[200];
        size_t a = 0;
        names[0] = 0;
        for (i = 0; i < g->name_count && a + 4 < sizeof names; i++)
            a += (size_t)snprintf(names + a, sizeof names - a, "%s%s", i ? ", " : "", g->names[i] ? g->names[i] : "?");
        for (i = 0; i < g->param_count && a + 4 < sizeof names; i++)
            a += (size_t)snprintf(names + a, sizeof names - a, "%s%s", a ? ", " : "", g->params[i].name);
        snprintf(what, sizeof what, "\"%.*s\" is no argument of the kernel and no param of the config; it has %s "
                 "(write a constexpr's value as a literal)", (int)(len > 60 ? 60 : len), at, a ? names : "none");
        return tb__gx_fail(g, at, what);
    }
}

static tb_result tb__gx_atom(tb__gx *g) {
    const char *at;
    tb_result r;
    tb__gx_ws(g);
    at = g->p;
    if (*g->p >= '0' && *g->p <= '9') { /* decimal, or 0x / 0o / 0b; '_' between digits */
        unsigned base = 10, d;
        uint64_t v = 0;
        int digits = 0;
        if (g->p[0] == '0' && (g->p[1] == 'x' || g->p[1] == 'X' || g->p[1] == 'o' || g->p[1] == 'O' || g->p[1] == 'b' ||
                               g->p[1] == 'B'))
            base = (g->p[1] | 32) == 'x' ? 16 : (g->p[1] | 32) == 'o' ? 8 : 2, g->p += 2;
        for (;; g->p++) {
            char c = *g->p;
            if (c == '_' && digits && tb__gx_ident(g->p[1], 0) && g->p[1] != '_') continue;
            d = c >= '0' && c <= '9'                 ? (unsigned)(c - '0')
                : (c | 32) >= 'a' && (c | 32) <= 'f' ? (unsigned)((c | 32) - 'a' + 10)
                                                     : 99;
            if (d >= base) break;
            if (v > (UINT64_MAX - d) / base) return tb__gx_fail(g, at, "an integer past 2^63 - 1");
            v = v * base + d, digits++;
        }
        if (!digits || v > (uint64_t)INT64_MAX + 1u)
            return tb__gx_fail(g, at, digits ? "an integer past 2^63 - 1" : "a bad integer");
        if (base == 10 && at[0] == '0' && digits > 1 && v) return tb__gx_fail(g, at, "a decimal with a leading zero");
        if (tb__gx_ident(*g->p, 0)) return tb__gx_fail(g, g->p, "a bad integer");
        if (v > (uint64_t)INT64_MAX) { /* 2^63: the next operation must negate it (tb__gx_emit) */
            if ((r = tb__gx_emit(g, TB_GRID_CONST, 0, INT64_MIN, at)) != tb_ok) return r;
            g->big = g->n, g->big_at = at;
            return tb_ok;
        }
        return tb__gx_emit(g, TB_GRID_CONST, 0, (int64_t)v, at);
    }
    if (*g->p == '(') {
        g->p++;
        if ((r = tb__gx_expr(g)) != tb_ok) return r;
        tb__gx_ws(g);
        if (*g->p != ')') return tb__gx_fail(g, g->p, "')' expected");
        g->p++;
        return tb_ok;
    }
    if (tb__gx_ident(*g->p, 1)) {
        const char *name = g->p, *last = g->p;
        size_t len;
        while (tb__gx_ident(*g->p, 0) || (*g->p == '.' && tb__gx_ident(g->p[1], 1))) {
            if (*g->p == '.') last = g->p + 1;
            g->p++;
        }
        len = (size_t)(g->p - last);
        tb__gx_ws(g);
        if (*g->p == '(') { /* a call: the last component names it (triton.cdiv) */
            int is_cdiv = (len == 4 && !memcmp(last, "cdiv", 4)) || (len == 7 && !memcmp(last, "ceildiv", 7));
            int is_min = len == 3 && !memcmp(last, "min", 3), is_max = len == 3 && !memcmp(last, "max", 3);
            int is_int = len == 3 && !memcmp(last, "int", 3);
            uint32_t nargs = 0;
            if (!is_cdiv && !is_min && !is_max && !is_int)
                return tb__gx_fail(g, name, "unknown function (cdiv, ceildiv, min, max and int are known)");
            if (++g->depth > 64) return tb__gx_fail(g, name, "nested too deeply"); /* int(int(...)) emits nothing */
            g->p++;
            tb__gx_ws(g);
            while (*g->p != ')') {
                if (nargs && *g->p++ != ',') return tb__gx_fail(g, g->p - 1, "',' or ')' expected");
                if ((r = tb__gx_expr(g)) != tb_ok) return r;
                nargs++;
                if (nargs >= 2 && (is_min || is_max) &&
                    (r = tb__gx_emit(g, is_min ? TB_GRID_MIN : TB_GRID_MAX, 0, 0, name)) != tb_ok)
                    return r;
                tb__gx_ws(g);
                if (!*g->p) return tb__gx_fail(g, g->p, "')' expected");
            }
            g->p++;
            g->depth--;
            if ((is_cdiv && nargs != 2) || (is_int && nargs != 1) || ((is_min || is_max) && nargs < 1))
                return tb__gx_fail(g, name,
                                   is_cdiv  ? "cdiv takes two arguments"
                                   : is_int ? "int takes one argument"
                                            : "min and max take at least one");
            return is_cdiv ? tb__gx_emit(g, TB_GRID_CEILDIV, 0, 0, name) : tb_ok;
        }
        if (*g->p == '[') { /* meta['BLOCK'] */
            const char *q;
            char quote;
            g->p++;
            tb__gx_ws(g);
            quote = *g->p;
            if (quote != '\'' && quote != '"') return tb__gx_fail(g, g->p, "a quoted name expected in [ ]");
            q = strchr(g->p + 1, quote);
            if (!q) return tb__gx_fail(g, g->p, "unterminated string");
            at = g->p + 1;
            g->p = q + 1;
            tb__gx_ws(g);
            if (*g->p != ']') return tb__gx_fail(g, g->p, "']' expected");
            g->p++;
            return tb__gx_name(g, at, (size_t)(q - at));
        }
        if (last != name) return tb__gx_fail(g, name, "a dotted name is only known as a function (triton.cdiv)");
        return tb__gx_name(g, name, len);
    }
    return tb__gx_fail(g, at, *at ? "an integer, a name or '(' expected" : "the expression ends too soon");
}

static tb_result tb__gx_unary(tb__gx *g) {
    tb_result r;
    const char *at;
    tb__gx_ws(g);
    at = g->p;
    if (*g->p == '-' || *g->p == '+') {
        if (++g->depth > 64) return tb__gx_fail(g, at, "nested too deeply");
        g->p++;
        if ((r = tb__gx_unary(g)) != tb_ok) return r;
        g->depth--;
        return *at == '-' ? tb__gx_emit(g, TB_GRID_NEG, 0, 0, at) : tb_ok;
    }
    if (*g->p == '(' && ++g->depth > 64) return tb__gx_fail(g, at, "nested too deeply");
    r = tb__gx_atom(g);
    if (*at == '(') g->depth--;
    return r;
}

static tb_result tb__gx_term(tb__gx *g) {
    tb_result r;
    if ((r = tb__gx_unary(g)) != tb_ok) return r;
    for (;;) {
        const char *at;
        uint32_t op;
        tb__gx_ws(g);
        at = g->p;
        if (g->p[0] == '/' && g->p[1] == '/') op = TB_GRID_FLOORDIV, g->p += 2;
        else if (g->p[0] == '*' && g->p[1] != '*') op = TB_GRID_MUL, g->p++;
        else if (g->p[0] == '%') op = TB_GRID_MOD, g->p++;
        else if (g->p[0] == '/' || g->p[0] == '*')
            return tb__gx_fail(g, at, "'/' and '**' are not grid operators (use //)");
        else return tb_ok;
        if ((r = tb__gx_unary(g)) != tb_ok || (r = tb__gx_emit(g, op, 0, 0, at)) != tb_ok) return r;
    }
}

static tb_result tb__gx_expr(tb__gx *g) {
    tb_result r;
    if ((r = tb__gx_term(g)) != tb_ok) return r;
    for (;;) {
        const char *at;
        uint32_t op;
        tb__gx_ws(g);
        at = g->p;
        if (*g->p == '+') op = TB_GRID_ADD;
        else if (*g->p == '-') op = TB_GRID_SUB;
        else return tb_ok;
        g->p++;
        if ((r = tb__gx_term(g)) != tb_ok || (r = tb__gx_emit(g, op, 0, 0, at)) != tb_ok) return r;
    }
}

TBDEF tb_result tb_grid_parse(const char *expr, const char *const *arg_names, uint32_t arg_count,
                              const tb_config_param *params, uint32_t param_count, tb_grid_op *ops, uint32_t *op_count,
                              tb_error *err) {
    tb__gx g; /* a few KiB on the stack: the parser allocates nothing */
    tb_result r;
    if (!expr || !ops || !op_count || (arg_count && !arg_names) || (param_count && !params))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "expr, ops, op_count, names or params is NULL");
    *op_count = 0;
    memset(&g, 0, sizeof g);
    g.s = g.p = expr;
    g.names = arg_names, g.name_count = arg_count, g.params = params, g.param_count = param_count;
    g.err = err;
    if ((r = tb__gx_expr(&g)) != tb_ok) return r;
    tb__gx_ws(&g);
    if (*g.p) return tb__gx_fail(&g, g.p, *g.p == ',' ? "one expression per dimension here" : "an operator expected");
    if (g.big) return tb__gx_fail(&g, g.big_at, "an integer past 2^63 - 1");
    if (g.n > TB_MAX_GRID_OPS) return tb__gx_fail(&g, g.p, "more than TB_MAX_GRID_OPS operations");
    memcpy(ops, g.ops, g.n * sizeof *ops);
    *op_count = g.n;
    return tb_ok;
}

/* ---- grid text: a program back to an expression (tb_grid_parse's inverse) ----
   A program that runs is a tree whose root is its last operation, and the
   text is that tree written out: an operator opens ("(", "cdiv(", "-("),
   writes its left operand, its spelling or ", ", its right operand, and
   closes. The walk allocates nothing: it goes down each left spine in a
   loop (an operator's left operand begins where its right one, found by
   counting back, begins, less one), writes the operand at its foot, and
   climbs back up, recursing only into right operands, each of which holds
   a value on the stack: at most TB_GRID_STACK levels, however long the
   program. */
typedef struct tb__gt {
    char *buf;
    size_t room, len;            /* room: the bytes of text buf takes (cap - 1) */
    const tb_grid_op *ops;
    const char *const *arg_names;
    uint32_t arg_count;
    const tb_config_param *params;
    uint32_t param_count;
} tb__gt;
static void tb__gt_put(tb__gt *t, const char *s, size_t n) {
    if (t->len < t->room) memcpy(t->buf + t->len, s, n < t->room - t->len ? n : t->room - t->len);
    t->len += n;
}
static void tb__gt_puts(tb__gt *t, const char *s) { tb__gt_put(t, s, strlen(s)); }
static void tb__gt_operand(tb__gt *t, const tb_grid_op *o) {
    char num[40];
    const char *name = NULL;
    if (o->op == TB_GRID_ARG && t->arg_names && o->index < t->arg_count) name = t->arg_names[o->index];
    else if (o->op == TB_GRID_PARAM && t->params && o->index < t->param_count) name = t->params[o->index].name;
    if (name) {
        tb__gt_puts(t, name);
        return;
    }
    switch (o->op) {
    case TB_GRID_CONST: snprintf(num, sizeof num, "%lld", (long long)o->value); break;
    case TB_GRID_ARG: snprintf(num, sizeof num, "arg%u", o->index); break;
    case TB_GRID_PARAM: snprintf(num, sizeof num, "param%u", o->index); break;
    case TB_GRID_EXTRA: snprintf(num, sizeof num, "grid_args[%u]", o->index); break;
    default: snprintf(num, sizeof num, "sym%u", o->index); break; /* SYM */
    }
    tb__gt_puts(t, num);
}
/* an operator spelled with letters is called: cdiv(a, b); else infix: (a + b), -(a) */
static int tb__gt_called(const char *text) { return (*text >= 'a' && *text <= 'z') || (*text >= 'A' && *text <= 'Z'); }
/* The first operation of the value ops[i] pushes (its subtree's). */
static uint32_t tb__gt_first(const tb_grid_op *ops, uint32_t i) {
    uint32_t need = 1;
    for (;; i--) {
        need += (uint32_t)tb__grid_arity(ops[i].op);
        if (--need == 0) return i;
    }
}
/* The value ops[i] pushes, as text. */
static void tb__gt_value(tb__gt *t, uint32_t i) {
    const tb_grid_op *ops = t->ops;
    uint32_t p = i, q, h;
    int a;
    while ((a = tb__grid_arity(ops[p].op)) > 0) { /* down the left spine: the openings, outermost first */
        const char *text = tb__grid_op_text(ops[p].op);
        if (a == 1 || tb__gt_called(text)) tb__gt_puts(t, text);
        tb__gt_put(t, "(", 1);
        p = a == 1 ? p - 1 : tb__gt_first(ops, p - 1) - 1;
    }
    tb__gt_operand(t, &ops[p]);
    while (p < i) { /* up again: the operator that takes p's value as its left operand, innermost first */
        for (q = p + 1, h = 0; (uint32_t)(a = tb__grid_arity(ops[q].op)) <= h; q++) h = h + 1 - (uint32_t)a;
        if (a == 2) {
            const char *text = tb__grid_op_text(ops[q].op);
            if (tb__gt_called(text)) tb__gt_put(t, ", ", 2);
            else tb__gt_put(t, " ", 1), tb__gt_puts(t, text), tb__gt_put(t, " ", 1);
            tb__gt_value(t, q - 1);
        }
        tb__gt_put(t, ")", 1);
        p = q;
    }
}
TBDEF size_t tb_grid_text(const tb_grid_op *ops, uint32_t n, const char *const *arg_names, uint32_t arg_count,
                          const tb_config_param *params, uint32_t param_count, char *buf, size_t cap) {
    tb__gt t;
    uint32_t at, depth;
    t.buf = buf, t.room = buf && cap ? cap - 1 : 0, t.len = 0, t.ops = ops;
    t.arg_names = arg_names, t.arg_count = arg_count, t.params = params, t.param_count = param_count;
    if (!ops || tb__grid_walk(ops, n, NULL, NULL, &at, &depth) != 0) tb__gt_put(&t, "?", 1);
    else tb__gt_value(&t, n - 1);
    if (buf && cap) buf[t.len < t.room ? t.len : t.room] = 0;
    return t.len;
}

/* ---------------------------------------------------------------------- */
/* >>model  Data model: bundles, kernels, records, names */
/* A bundle owns an arena (strings, copied bytes) and growable arrays of  */
/* the public structs. A bundle read from a buffer points into it; its    */
/* artifact and config arrays are single blocks sliced per kernel/record, */
/* copied out on the first append to that kernel or record.              */
/* ---------------------------------------------------------------------- */
typedef struct tb__kernel_slot {
    uint32_t artifact_cap;   /* 0: artifacts are a slice of a shared block */
} tb__kernel_slot;

struct tb_bundle {
    tb__ctx ctx;
    tb__arena arena;
    tb_kernel *kernels;
    tb__kernel_slot *slots;
    uint32_t kernel_count, kernel_cap, slot_cap;
    tb_launch_record *records;
    uint32_t record_count, record_cap;
    tb_storage storage;
    /* blocks owned when read from a buffer */
    tb_artifact *artifact_block;
    tb_launch_config *config_block;
    tb_config_param *param_block;
    tb_tensordesc_meta *desc_block;
    void *buffer_copy;          /* TB_READ_COPY: the copy the views point into */
    void *map_base;             /* TB_STORAGE_MAPPED */
    size_t map_size;
    /* TB_STORAGE_MAPPED, set by the filesystem section, which owns files:
       release unmaps and closes; read_at copies bytes of the file with
       pread, which fails cleanly where the mapping would raise SIGBUS
       (another process truncated the file). */
    void (*release)(tb_bundle *bundle);
    int (*read_at)(const tb_bundle *bundle, size_t offset, void *dst, size_t size);
    int map_fd;
    uint16_t format_major, format_minor; /* of the bytes read; 0 for a bundle built in memory */
    /* the programs (sections 5 and 6): each in the arena; the array and,
       once a program is added, the constants' table on the heap */
    tb_program **programs;
    uint32_t program_count, program_cap;
    const char **properties;    /* key, value, key, value... (2.4): the strings in the arena, the array on the heap */
    uint32_t property_count, property_cap;
    uint32_t *key_index;        /* record indexes by cache key (tb__record_key_new) */
    uint32_t key_index_cap, key_index_count;
    tb_program_constant *constants; /* the table every program points at */
    uint32_t constant_count, constant_cap; /* cap 0: the table is in the arena */
};

/* A name that may become a path component: non-empty, bounded, no NUL, no
   separator, not "." or "..". */
static int tb__valid_name(const char *s, size_t n) {
    size_t i;
    if (n == 0 || n > TB_MAX_NAME_LENGTH) return 0;
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return 0;
    for (i = 0; i < n; i++)
        if (s[i] == 0 || s[i] == '/' || s[i] == '\\') return 0;
    return 1;
}

static tb_result tb__check_name(const char *s, const char *what, const char *kernel, long long offset,
                                tb_error *err) {
    if (!s) return tb__fail(err, tb_err_invalid_argument, kernel, NULL, offset, 0, "%s is NULL", what);
    if (strlen(s) > TB_MAX_NAME_LENGTH) /* a length over its limit, as the reader says (FORMAT.md [R-strings]) */
        return tb__fail(err, tb_err_limit, kernel, NULL, offset, 0, "%s is %zu bytes long, limit %u", what, strlen(s),
                        (unsigned)TB_MAX_NAME_LENGTH);
    if (!tb__valid_name(s, strlen(s)))
        return tb__fail(err, tb_err_bad_name, kernel, NULL, offset, 0,
                        "%s \"%.80s\" is not a safe file name (empty, too long, '.', '..', or holds '/' or '\\')",
                        what, s);
    return tb_ok;
}

TBDEF uint32_t tb_arg_code_size(char code) { /* T: the slot holds a tb_tensor_desc * */
    switch (code) {
#define TB__X(code, bytes, kind, triton, triton2, mlir) case code: return bytes;
        TB__ARG_CODES(TB__X)
#undef TB__X
    default: return 0;
    }
}

static tb_result tb__check_arg_types(const char *types, const char *div, const char *kernel,
                                     long long offset, tb_error *err) {
    size_t i, n;
    if (!types) return tb__fail(err, tb_err_invalid_argument, kernel, NULL, offset, 0, "arg_types is NULL");
    n = strlen(types);
    if (n > TB_MAX_ARGS)
        return tb__fail(err, tb_err_limit, kernel, NULL, offset, 0, "%u arguments, over TB_MAX_ARGS (%u)",
                        (unsigned)n, (unsigned)TB_MAX_ARGS);
    for (i = 0; i < n; i++)
        if (!tb_arg_code_size(types[i]))
            return tb__fail(err, tb_err_unsupported_type, kernel, NULL, offset, 0,
                            "argument %u has unknown type code '%c' (0x%02x)", (unsigned)i,
                            (types[i] >= 32 && types[i] < 127) ? types[i] : '?', (unsigned char)types[i]);
    if (div && *div) {
        if (strlen(div) != n)
            return tb__fail(err, tb_err_malformed, kernel, NULL, offset, 0,
                            "arg_divisibility has %u entries for %u arguments", (unsigned)strlen(div), (unsigned)n);
        for (i = 0; i < n; i++)
            if (div[i] != '0' && div[i] != '1')
                return tb__fail(err, tb_err_malformed, kernel, NULL, offset, 0,
                                "arg_divisibility entry %u is not '0' or '1'", (unsigned)i);
    }
    return tb_ok;
}

TBDEF tb_result tb_bundle_create(const tb_options *options, tb_bundle **out, tb_error *err) {
    tb__ctx c = tb__ctx_from(options);
    tb_bundle *b;
    if (!out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "out is NULL");
    *out = NULL;
    b = (tb_bundle *)tb__alloc(&c, sizeof *b);
    if (!b) return TB__OOM(err);
    memset(b, 0, sizeof *b);
    b->ctx = c;
    b->storage = TB_STORAGE_OWNED;
    b->map_fd = -1;
    *out = b;
    return tb_ok;
}

TBDEF void tb_bundle_free(tb_bundle *b) {
    uint32_t i;
    tb__ctx c;
    if (!b) return;
    c = b->ctx;
    for (i = 0; i < b->kernel_count; i++)
        if (b->slots[i].artifact_cap) tb__free(&c, (void *)b->kernels[i].artifacts);
    tb__free(&c, b->kernels);
    tb__free(&c, b->slots);
    tb__free(&c, b->records);
    tb__free(&c, b->artifact_block);
    tb__free(&c, b->config_block);
    tb__free(&c, b->param_block);
    tb__free(&c, b->desc_block);
    tb__free(&c, b->buffer_copy);
    tb__free(&c, b->programs);
    tb__free(&c, b->properties);
    tb__free(&c, b->key_index);
    if (b->constant_cap) tb__free(&c, b->constants);
    if (b->release) b->release(b);
    tb__arena_free(&c, &b->arena);
    tb__free(&c, b);
}

TBDEF uint32_t tb_bundle_kernel_count(const tb_bundle *b) { return b ? b->kernel_count : 0; }
TBDEF uint32_t tb_bundle_format_version(const tb_bundle *b) {
    return b ? (uint32_t)b->format_major << 16 | b->format_minor : 0;
}
TBDEF const tb_kernel *tb_bundle_kernel(const tb_bundle *b, uint32_t i) {
    return (b && i < b->kernel_count) ? &b->kernels[i] : NULL;
}
TBDEF uint32_t tb_bundle_launch_record_count(const tb_bundle *b) { return b ? b->record_count : 0; }
TBDEF const tb_launch_record *tb_bundle_launch_record(const tb_bundle *b, uint32_t i) {
    return (b && i < b->record_count) ? &b->records[i] : NULL;
}
TBDEF tb_storage tb_bundle_storage(const tb_bundle *b) { return b ? b->storage : TB_STORAGE_OWNED; }

TBDEF const tb_kernel *tb_bundle_find_kernel(const tb_bundle *b, const char *hash) {
    uint32_t i;
    if (!b || !hash) return NULL;
    for (i = 0; i < b->kernel_count; i++)
        if (strcmp(b->kernels[i].hash, hash) == 0) return &b->kernels[i];
    return NULL;
}

TBDEF const tb_artifact *tb_kernel_find_artifact(const tb_kernel *k, const char *name) {
    uint32_t i;
    if (!k || !name) return NULL;
    for (i = 0; i < k->artifact_count; i++)
        if (strcmp(k->artifacts[i].name, name) == 0) return &k->artifacts[i];
    return NULL;
}

TBDEF size_t tb_kernel_name(const tb_kernel *k, char *out, size_t cap) {
    static const char *const pre[] = {"", "__grp__"}, *const suf[] = {".cubin", ".json"};
    uint32_t i;
    int p;
    if (out && cap) out[0] = 0;
    if (!k) return 0;
    for (p = 0; p < 2; p++)
        for (i = 0; i < k->artifact_count; i++) {
            const char *n = k->artifacts[i].name;
            size_t len = strlen(n), pl = strlen(pre[p]), sl = strlen(suf[p]);
            if (len <= pl + sl || strncmp(n, pre[p], pl) != 0 || strcmp(n + len - sl, suf[p]) != 0) continue;
            len -= pl + sl;
            if (out && cap) {
                size_t c = len < cap - 1 ? len : cap - 1;
                memcpy(out, n + pl, c);
                out[c] = 0;
            }
            return len;
        }
    return 0;
}

/* A payload's bytes for the library's own reading (an artifact's, for
   parsing JSON or loading a cubin; any bytes a section carries): the
   bytes, or a copy that the caller frees with
   tb__free(&b->ctx, *copy). A mapped bundle's payloads are copied from
   the file with pread, so that a file truncated under the mapping gives
   tb_err_io here rather than SIGBUS (artifacts added after the read are
   not in the file, and are used as they are). stable: also copy a view's
   bytes, for a reader that reads them twice (the sentinel's count, then
   its replacement) and must see the same bytes both times. */
static tb_result tb__payload_bytes(const tb_bundle *b, const void *payload, uint64_t size, int stable,
                                   const char *kernel, const char *name, const void **data, void **copy,
                                   tb_error *err) {
    uintptr_t at = (uintptr_t)payload, base = (uintptr_t)b->map_base;
    int mapped = b->read_at && at >= base && at - base <= b->map_size && size <= b->map_size - (at - base);
    *copy = NULL;
    *data = payload;
    if (!size || !(mapped || (stable && b->storage == TB_STORAGE_VIEW))) return tb_ok;
    if (size > (uint64_t)SIZE_MAX || !(*copy = tb__alloc(&b->ctx, (size_t)size))) return TB__OOM(err);
    if (!mapped) {
        memcpy(*copy, payload, (size_t)size);
    } else if (b->read_at(b, (size_t)(at - base), *copy, (size_t)size) != 0) {
        int e = errno;
        tb__free(&b->ctx, *copy);
        *copy = NULL;
        return tb__fail(err, tb_err_io, kernel, name, -1, e,
                        "the bundle file no longer holds these bytes (truncated or replaced since it was read?)");
    }
    *data = *copy;
    return tb_ok;
}
static tb_result tb__artifact_bytes(const tb_bundle *b, const tb_kernel *k, const tb_artifact *a, int stable,
                                    const void **data, void **copy, tb_error *err) {
    return tb__payload_bytes(b, a->data, a->size, stable, k ? k->hash : NULL, a->name, data, copy, err);
}

/* Writing a mapped bundle copies its payloads from the mapping in this
   process: refuse at once when the file no longer covers the mapping
   (truncated since it was read) instead of faulting on the way. A file
   truncated while the write runs can still fault: read files that others
   may truncate with TB_READ_COPY. */
static tb_result tb__check_source(const tb_bundle *b, tb_error *err) {
    unsigned char last;
    if (!b->read_at || !b->map_size || b->read_at(b, b->map_size - 1, &last, 1) == 0) return tb_ok;
    return tb__fail(err, tb_err_io, NULL, NULL, -1, errno,
                    "the mapped bundle file was truncated since it was read; its files cannot be copied from it");
}

static tb_result tb__add_kernel(tb_bundle *b, const char *hash, size_t hash_len, int32_t device,
                                uint32_t *out_index, tb_error *err) {
    char *h;
    if (b->kernel_count >= TB_MAX_KERNELS)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "more than TB_MAX_KERNELS (%u) kernels",
                        (unsigned)TB_MAX_KERNELS);
    if (!tb__grow(&b->ctx, (void **)&b->kernels, &b->kernel_cap, b->kernel_count + 1, sizeof(tb_kernel)))
        return TB__OOM(err);
    if (!tb__grow(&b->ctx, (void **)&b->slots, &b->slot_cap, b->kernel_count + 1, sizeof(tb__kernel_slot)))
        return TB__OOM(err);
    h = tb__arena_strdup(&b->ctx, &b->arena, hash, hash_len);
    if (!h) return TB__OOM(err);
    b->kernels[b->kernel_count].hash = h;
    b->kernels[b->kernel_count].device = device;
    b->kernels[b->kernel_count].artifact_count = 0;
    b->kernels[b->kernel_count].artifacts = NULL;
    b->slots[b->kernel_count].artifact_cap = 0;
    if (out_index) *out_index = b->kernel_count;
    b->kernel_count++;
    return tb_ok;
}

/* Drops the last kernel added (a collect that failed half way). */
static void tb__pop_kernel(tb_bundle *b) {
    uint32_t i = b->kernel_count - 1;
    if (b->slots[i].artifact_cap) tb__free(&b->ctx, (void *)b->kernels[i].artifacts);
    b->kernel_count = i;
}

/* Moves every kernel of part (and the arena holding its bytes) to the end
   of b; part is left empty. Both use the same allocator. */
static tb_result tb__absorb(tb_bundle *b, tb_bundle *part, tb_error *err) {
    uint32_t n = part->kernel_count, need = b->kernel_count + n;
    tb__block *tail;
    if (!n) return tb_ok;
    if (!tb__grow(&b->ctx, (void **)&b->kernels, &b->kernel_cap, need, sizeof(tb_kernel)) ||
        !tb__grow(&b->ctx, (void **)&b->slots, &b->slot_cap, need, sizeof(tb__kernel_slot)))
        return TB__OOM(err);
    memcpy(b->kernels + b->kernel_count, part->kernels, (size_t)n * sizeof(tb_kernel));
    memcpy(b->slots + b->kernel_count, part->slots, (size_t)n * sizeof(tb__kernel_slot));
    b->kernel_count = need;
    part->kernel_count = 0;
    if (part->arena.head) {
        for (tail = part->arena.head; tail->next; tail = tail->next) {
        }
        if (b->arena.head) {
            tail->next = b->arena.head->next; /* b's current block stays first */
            b->arena.head->next = part->arena.head;
        } else {
            b->arena.head = part->arena.head;
        }
        part->arena.head = NULL;
    }
    return tb_ok;
}

TBDEF tb_result tb_bundle_add_kernel(tb_bundle *b, const char *hash, int32_t device, uint32_t *out_index,
                                     tb_error *err) {
    tb_result r;
    if (!b) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle is NULL");
    if ((r = tb__check_name(hash, "kernel hash", hash, -1, err)) != tb_ok) return r;
    return tb__add_kernel(b, hash, strlen(hash), device, out_index, err);
}

TBDEF tb_result tb_bundle_add_artifact(tb_bundle *b, uint32_t ki, const char *name, const void *data,
                                       uint64_t size, tb_ownership own, tb_error *err) {
    tb_kernel *k;
    tb__kernel_slot *s;
    tb_artifact *a;
    tb_result r;
    const char *kh;
    if (!b || ki >= b->kernel_count)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "no kernel %u in the bundle", ki);
    k = &b->kernels[ki];
    s = &b->slots[ki];
    kh = k->hash;
    if ((r = tb__check_name(name, "artifact name", kh, -1, err)) != tb_ok) return r;
    if (!data && size) return tb__fail(err, tb_err_invalid_argument, kh, name, -1, 0, "data is NULL");
    if (size > TB_MAX_ARTIFACT_SIZE || size > (uint64_t)SIZE_MAX / 2)
        return tb__fail(err, tb_err_limit, kh, name, -1, 0, "%llu bytes, over TB_MAX_ARTIFACT_SIZE",
                        (unsigned long long)size);
    if (k->artifact_count >= TB_MAX_ARTIFACTS_PER_KERNEL)
        return tb__fail(err, tb_err_limit, kh, name, -1, 0, "more than TB_MAX_ARTIFACTS_PER_KERNEL (%u) files",
                        (unsigned)TB_MAX_ARTIFACTS_PER_KERNEL);
    if (tb_kernel_find_artifact(k, name))
        return tb__fail(err, tb_err_invalid_argument, kh, name, -1, 0, "the kernel already has a file of this name");
    if (s->artifact_cap == 0 && k->artifacts) {
        /* a slice of a read bundle's shared block, even an empty one (it
           points at the next kernel's files): copy it out, never realloc it */
        uint32_t cap = k->artifact_count + 8;
        tb_artifact *na = (tb_artifact *)tb__alloc(&b->ctx, (size_t)cap * sizeof *na);
        if (!na) return TB__OOM(err);
        if (k->artifact_count) memcpy(na, k->artifacts, (size_t)k->artifact_count * sizeof *na);
        k->artifacts = na;
        s->artifact_cap = cap;
    } else {
        void *arr = (void *)k->artifacts;
        if (!tb__grow(&b->ctx, &arr, &s->artifact_cap, k->artifact_count + 1, sizeof(tb_artifact)))
            return TB__OOM(err);
        k->artifacts = (const tb_artifact *)arr;
    }
    a = (tb_artifact *)&k->artifacts[k->artifact_count];
    a->name = tb__arena_strdup(&b->ctx, &b->arena, name, strlen(name));
    if (!a->name) return TB__OOM(err);
    if (own == TB_COPY && size) {
        void *p = tb__arena_alloc(&b->ctx, &b->arena, (size_t)size);
        if (!p) return TB__OOM(err);
        memcpy(p, data, (size_t)size);
        a->data = p;
    } else {
        a->data = size ? data : (const void *)"";
    }
    a->size = size;
    k->artifact_count++;
    return tb_ok;
}

static const char *tb__dup_opt(tb_bundle *b, const char *s) {
    return tb__arena_strdup(&b->ctx, &b->arena, s ? s : "", s ? strlen(s) : 0);
}

static tb_result tb__check_tensordesc(const tb_tensordesc_meta *m, uint32_t i, const char *key, long long offset,
                                      tb_error *err) {
    uint32_t d;
    if (m->tma > 1 || m->rank < 1 || m->rank > TB_MAX_TENSOR_RANK || m->fp4_padded > 1)
        return tb__fail(err, tb_err_malformed, key, NULL, offset, 0,
                        "tensor descriptor %u: rank %u (1..%u) or a flag other than 0/1", i, m->rank,
                        (unsigned)TB_MAX_TENSOR_RANK);
    if (!m->tma) return tb_ok;
    if ((m->elem_size != 1 && m->elem_size != 2 && m->elem_size != 4 && m->elem_size != 8) || m->swizzle > 3 ||
        m->elem_type > 15)
        return tb__fail(err, tb_err_malformed, key, NULL, offset, 0,
                        "tensor descriptor %u: element size %u, swizzle %u or element type %u is not one TMA takes", i,
                        m->elem_size, m->swizzle, m->elem_type);
    for (d = 0; d < m->rank; d++)
        if (m->block[d] < 1 || m->block[d] > 256) /* the TMA box holds at most 256 elements a dimension */
            return tb__fail(err, tb_err_malformed, key, NULL, offset, 0,
                            "tensor descriptor %u: block dimension %u is %u, not in 1..256", i, d, m->block[d]);
    return tb_ok;
}

/* descs 0: the tensor descriptors are checked later (a reader sees them in
   a section after the records). */
static tb_result tb__check_config_descs(const tb_launch_config *cf, const char *key, long long offset, tb_error *err) {
    uint32_t n = 0, i;
    tb_result r;
    for (i = 0; cf->arg_types[i]; i++) n += cf->arg_types[i] == 'T';
    if (n != cf->tensordesc_count || (n && !cf->tensordescs))
        return tb__fail(err, tb_err_malformed, key, NULL, offset, 0,
                        "%u tensor descriptor arguments ('T') and %u descriptions of them", n, cf->tensordesc_count);
    for (i = 0; i < n; i++)
        if ((r = tb__check_tensordesc(&cf->tensordescs[i], i, key, offset, err)) != tb_ok) return r;
    return tb_ok;
}

/* A string field that is not a name (FORMAT.md's table): empty is a bad
   name, longer than max a limit. */
static tb_result tb__check_string(const char *s, size_t max, const char *what, const char *key, long long offset,
                                  tb_error *err) {
    if (!s || !*s) return tb__fail(err, tb_err_bad_name, key, NULL, offset, 0, "%s is empty", what);
    if (strlen(s) > max)
        return tb__fail(err, tb_err_limit, key, NULL, offset, 0, "%s is %zu bytes long, limit %zu", what, strlen(s),
                        max);
    return tb_ok;
}

static tb_result tb__check_config(const tb_launch_config *cf, const char *key, long long offset, tb_error *err) {
    tb_result r;
    uint32_t j;
    if ((r = tb__check_name(cf->kernel_hash, "config kernel_hash", key, offset, err)) != tb_ok) return r;
    if ((r = tb__check_name(cf->binary_name, "config binary_name", key, offset, err)) != tb_ok) return r;
    if ((r = tb__check_string(cf->function_name, TB_MAX_STRING_LENGTH, "config function_name", key, offset, err)) !=
        tb_ok)
        return r;
    if ((r = tb__check_arg_types(cf->arg_types, cf->arg_divisibility, key, offset, err)) != tb_ok) return r;
    if (cf->num_warps == 0 || cf->num_warps > 32)
        return tb__fail(err, tb_err_malformed, key, NULL, offset, 0, "num_warps %u is not in 1..32", cf->num_warps);
    if (cf->num_ctas == 0 || cf->num_ctas > 16)
        return tb__fail(err, tb_err_malformed, key, NULL, offset, 0, "num_ctas %u is not in 1..16", cf->num_ctas);
    if (cf->param_count > TB_MAX_PARAMS_PER_CONFIG)
        return tb__fail(err, tb_err_limit, key, NULL, offset, 0, "%u config params, over TB_MAX_PARAMS_PER_CONFIG",
                        cf->param_count);
    if (cf->param_count && !cf->params)
        return tb__fail(err, tb_err_invalid_argument, key, NULL, offset, 0, "params is NULL");
    for (j = 0; j < cf->param_count; j++)
        if ((r = tb__check_string(cf->params[j].name, TB_MAX_NAME_LENGTH, "a config param's name", key, offset, err)) !=
            tb_ok)
            return r;
    if (cf->tensordesc_count > TB_MAX_TENSORDESCS)
        return tb__fail(err, tb_err_limit, key, NULL, offset, 0, "%u tensor descriptors, over TB_MAX_TENSORDESCS",
                        cf->tensordesc_count);
    if (cf->global_scratch.present > 1 || cf->profile_scratch.present > 1)
        return tb__fail(err, tb_err_malformed, key, NULL, offset, 0, "a scratch_present value other than 0 or 1");
    if (cf->flags & ~(uint32_t)(TB_CONFIG_COOPERATIVE | TB_CONFIG_PDL | TB_CONFIG_TYPES_FROM_IR))
        /* a launch that ignored a flag it does not know could go wrong */
        return tb__fail(err, tb_err_unsupported_version, key, NULL, offset, 0,
                        "config flags 0x%x hold a bit this version does not know (written by a newer version?)",
                        cf->flags);
    return tb_ok;
}

/* Call info: names for all of the record's arguments or none, indexes of
   arguments; every config of such a record takes the same arguments. */
static tb_result tb__check_call(const tb_call_info *ci, const tb_launch_record *rec, long long offset, tb_error *err) {
    size_t nargs = strlen(rec->configs[0].arg_types);
    const uint32_t *lists[3];
    uint32_t counts[3], i, j;
    tb_result r;
    for (i = 1; i < rec->config_count; i++)
        if (strlen(rec->configs[i].arg_types) != nargs)
            return tb__fail(err, tb_err_malformed, rec->cache_key, NULL, offset, 0,
                            "a record with call info has configs of different argument counts");
    if (ci->arg_count && ci->arg_count != nargs)
        return tb__fail(err, tb_err_malformed, rec->cache_key, NULL, offset, 0, "%u argument names for %u arguments",
                        ci->arg_count, (unsigned)nargs);
    if (ci->arg_count && !ci->arg_names)
        return tb__fail(err, tb_err_invalid_argument, rec->cache_key, NULL, offset, 0, "arg_names is NULL");
    for (i = 0; i < ci->arg_count; i++)
        if ((r = tb__check_string(ci->arg_names[i], TB_MAX_NAME_LENGTH, "an argument name", rec->cache_key, offset,
                                  err)) != tb_ok)
            return r;
    lists[0] = ci->mutated, lists[1] = ci->reset, lists[2] = ci->key;
    counts[0] = ci->mutated_count, counts[1] = ci->reset_count, counts[2] = ci->key_count;
    for (j = 0; j < 3; j++) {
        if (counts[j] > TB_MAX_ARGS || (counts[j] && !lists[j]))
            return tb__fail(err, counts[j] > TB_MAX_ARGS ? tb_err_limit : tb_err_invalid_argument, rec->cache_key, NULL,
                            offset, 0, "an argument index list is too long or NULL");
        for (i = 0; i < counts[j]; i++)
            if (lists[j][i] >= nargs)
                return tb__fail(err, tb_err_malformed, rec->cache_key, NULL, offset, 0,
                                "argument index %u of %u arguments", lists[j][i], (unsigned)nargs);
    }
    return tb_ok;
}

static void *tb__arena_dup(tb_bundle *b, const void *src, size_t n) {
    void *d = n ? tb__arena_alloc(&b->ctx, &b->arena, n) : NULL;
    if (d) memcpy(d, src, n);
    return d;
}
static const tb_grid_rule *tb__dup_grid(tb_bundle *b, const tb_grid_rule *g) {
    tb_grid_rule *d = (tb_grid_rule *)tb__arena_dup(b, g, sizeof *g);
    uint32_t k;
    if (!d) return NULL;
    for (k = 0; k < 3; k++)
        if (!(d->ops[k] = (const tb_grid_op *)tb__arena_dup(b, g->ops[k], g->op_count[k] * sizeof(tb_grid_op))))
            return NULL;
    return d;
}
static const tb_call_info *tb__dup_call(tb_bundle *b, const tb_call_info *ci) {
    tb_call_info *d = (tb_call_info *)tb__arena_dup(b, ci, sizeof *ci);
    const char **names;
    uint32_t i;
    if (!d) return NULL;
    d->arg_names = NULL, d->mutated = d->reset = d->key = NULL; /* none of the caller's pointers */
    if (ci->arg_count) {
        if (!(names = (const char **)tb__arena_alloc(&b->ctx, &b->arena, ci->arg_count * sizeof *names))) return NULL;
        for (i = 0; i < ci->arg_count; i++)
            if (!(names[i] = tb__dup_opt(b, ci->arg_names[i]))) return NULL;
        d->arg_names = names;
    }
    if ((ci->mutated_count &&
         !(d->mutated = (const uint32_t *)tb__arena_dup(b, ci->mutated, ci->mutated_count * 4u))) ||
        (ci->reset_count && !(d->reset = (const uint32_t *)tb__arena_dup(b, ci->reset, ci->reset_count * 4u))) ||
        (ci->key_count && !(d->key = (const uint32_t *)tb__arena_dup(b, ci->key, ci->key_count * 4u))))
        return NULL;
    return d;
}

/* A cache key no record of b has: lookups find one record per key, and a
   program's step names the record the checker matched it against. An
   index of the keys (open addressing on tb__str_hash), grown with the
   records and rebuilt when a reader's records came in another way. */
static tb_result tb__record_key_new(tb_bundle *b, const char *key, tb_error *err) {
    uint32_t h = tb__str_hash(key), at, i;
    if (b->key_index_count != b->record_count || 2u * (b->record_count + 1) > b->key_index_cap) {
        uint32_t cap = 64;
        while (cap < 4u * (b->record_count + 1)) cap *= 2;
        tb__free(&b->ctx, b->key_index);
        if (!(b->key_index = (uint32_t *)tb__alloc(&b->ctx, (size_t)cap * sizeof *b->key_index))) {
            b->key_index_cap = b->key_index_count = 0;
            return TB__OOM(err);
        }
        memset(b->key_index, 0xff, (size_t)cap * sizeof *b->key_index);
        b->key_index_cap = cap, b->key_index_count = 0;
        for (i = 0; i < b->record_count; i++) {
            for (at = tb__str_hash(b->records[i].cache_key) & (cap - 1); b->key_index[at] != 0xffffffffu;
                 at = (at + 1) & (cap - 1)) {}
            b->key_index[at] = i;
            b->key_index_count++;
        }
    }
    for (at = h & (b->key_index_cap - 1); b->key_index[at] != 0xffffffffu; at = (at + 1) & (b->key_index_cap - 1))
        if (!strcmp(b->records[b->key_index[at]].cache_key, key))
            return tb__fail(
                err, tb_err_invalid_argument, key, NULL, -1, 0,
                "the bundle has a launch record with cache key \"%.80s\" already (record %u): a key names one record",
                key, b->key_index[at]);
    return tb_ok; /* (tb__record_key_insert adds it once the record is in) */
}
static void tb__record_key_insert(tb_bundle *b, uint32_t i) {
    uint32_t at;
    if (b->key_index_count + 1 != b->record_count) return; /* stale: the next check rebuilds it */
    for (at = tb__str_hash(b->records[i].cache_key) & (b->key_index_cap - 1); b->key_index[at] != 0xffffffffu;
         at = (at + 1) & (b->key_index_cap - 1)) {}
    b->key_index[at] = i;
    b->key_index_count++;
}

TBDEF tb_result tb_bundle_add_launch_record(tb_bundle *b, const tb_launch_record *rec, tb_error *err) {
    tb_launch_record *nr, in;
    tb_launch_config *cfs;
    uint32_t i, j;
    tb_result r;
    if (!b || !rec) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle or record is NULL");
    /* rec may be one of b's own records, which growing b->records moves:
       keep a copy of it (its strings and configs live in the arena or the
       read blocks, which never move) */
    in = *rec;
    rec = &in;
    if ((r = tb__check_string(rec->cache_key, TB_MAX_STRING_LENGTH, "record cache_key", NULL, -1, err)) != tb_ok)
        return r;
    if ((r = tb__check_string(rec->kernel_name, TB_MAX_STRING_LENGTH, "record kernel_name", rec->cache_key, -1, err)) !=
        tb_ok)
        return r;
    if (rec->config_count == 0 || !rec->configs)
        return tb__fail(err, tb_err_invalid_argument, rec->cache_key, NULL, -1, 0, "record has no configs");
    if (rec->config_count > TB_MAX_CONFIGS_PER_RECORD)
        return tb__fail(err, tb_err_limit, rec->cache_key, NULL, -1, 0, "%u configs, over TB_MAX_CONFIGS_PER_RECORD",
                        rec->config_count);
    if (b->record_count >= TB_MAX_RECORDS)
        return tb__fail(err, tb_err_limit, rec->cache_key, NULL, -1, 0, "more than TB_MAX_RECORDS records");
    for (i = 0; i < rec->config_count; i++)
        if ((r = tb__check_config(&rec->configs[i], rec->cache_key, -1, err)) != tb_ok ||
            (r = tb__check_config_descs(&rec->configs[i], rec->cache_key, -1, err)) != tb_ok ||
            (rec->configs[i].grid &&
             (r = tb__check_grid(rec->configs[i].grid, &rec->configs[i], rec->cache_key, -1, err)) != tb_ok))
            return r;
    if (rec->call && (r = tb__check_call(rec->call, rec, -1, err)) != tb_ok) return r;
    if ((r = tb__record_key_new(b, rec->cache_key, err)) != tb_ok) return r;
    if (!tb__grow(&b->ctx, (void **)&b->records, &b->record_cap, b->record_count + 1, sizeof(tb_launch_record)))
        return TB__OOM(err);
    cfs = (tb_launch_config *)tb__arena_alloc(&b->ctx, &b->arena, (size_t)rec->config_count * sizeof *cfs);
    if (!cfs) return TB__OOM(err);
    for (i = 0; i < rec->config_count; i++) {
        const tb_launch_config *src = &rec->configs[i];
        tb_launch_config *d = &cfs[i];
        tb_config_param *ps = NULL;
        *d = *src;
        d->kernel_hash = tb__dup_opt(b, src->kernel_hash);
        d->function_name = tb__dup_opt(b, src->function_name);
        d->binary_name = tb__dup_opt(b, src->binary_name);
        d->arg_types = tb__dup_opt(b, src->arg_types);
        d->arg_divisibility = tb__dup_opt(b, src->arg_divisibility);
        if (!d->kernel_hash || !d->function_name || !d->binary_name || !d->arg_types || !d->arg_divisibility)
            return TB__OOM(err);
        if (src->param_count) {
            ps = (tb_config_param *)tb__arena_alloc(&b->ctx, &b->arena, (size_t)src->param_count * sizeof *ps);
            if (!ps) return TB__OOM(err);
            for (j = 0; j < src->param_count; j++) {
                ps[j].value = src->params[j].value;
                ps[j].name = tb__dup_opt(b, src->params[j].name);
                if (!ps[j].name) return TB__OOM(err);
            }
        }
        d->params = ps;
        d->tensordescs = NULL;
        if (src->tensordesc_count) {
            tb_tensordesc_meta *m = (tb_tensordesc_meta *)tb__arena_alloc(&b->ctx, &b->arena,
                                                                          (size_t)src->tensordesc_count * sizeof *m);
            if (!m) return TB__OOM(err);
            memcpy(m, src->tensordescs, (size_t)src->tensordesc_count * sizeof *m);
            d->tensordescs = m;
        }
        if (src->grid && !(d->grid = tb__dup_grid(b, src->grid))) return TB__OOM(err);
    }
    nr = &b->records[b->record_count];
    nr->call = NULL;
    if (rec->call && !(nr->call = tb__dup_call(b, rec->call))) return TB__OOM(err);
    nr->cache_key = tb__dup_opt(b, rec->cache_key);
    nr->kernel_name = tb__dup_opt(b, rec->kernel_name);
    if (!nr->cache_key || !nr->kernel_name) return TB__OOM(err);
    nr->config_count = rec->config_count;
    nr->configs = cfs;
    b->record_count++;
    tb__record_key_insert(b, b->record_count - 1);
    return tb_ok;
}

/* Which of n strings (get(b, i), in order) repeat an earlier one, in O(n):
   open addressing on tb__str_hash, strcmp only where hashes meet (sorting
   would compare the long common prefixes of replicated hashes n log n
   times). Returns how many repeat, or -1 out of memory; *first gets the
   index of the first that does; repeats (n bytes, may be NULL) a 1 for
   each. With repeats NULL it stops at the first. */
static long tb__repeats(const tb__ctx *c, const char *(*get)(const tb_bundle *, uint32_t), const tb_bundle *b,
                        uint32_t n, unsigned char *repeats, uint32_t *first) {
    uint32_t cap = 16, i, *slots, *hashes;
    long count = 0;
    while (cap < 2u * n) cap *= 2;
    if (!(slots = (uint32_t *)tb__alloc(c, (size_t)cap * 2 * sizeof *slots))) return -1;
    hashes = slots + cap;
    memset(slots, 0xff, (size_t)cap * sizeof *slots);
    for (i = 0; i < n; i++) {
        const char *s = get(b, i);
        uint32_t h = tb__str_hash(s), at;
        int again = 0;
        for (at = h & (cap - 1); slots[at] != 0xffffffffu; at = (at + 1) & (cap - 1))
            if (hashes[at] == h && strcmp(get(b, slots[at]), s) == 0) {
                again = 1;
                break;
            }
        if (repeats) repeats[i] = (unsigned char)again;
        if (!again) {
            slots[at] = i, hashes[at] = h;
            continue;
        }
        if (!count++) *first = i;
        if (!repeats) break;
    }
    tb__free(c, slots);
    return count;
}
static const char *tb__kernel_hash_at(const tb_bundle *b, uint32_t i) { return b->kernels[i].hash; }
static const char *tb__record_key_at(const tb_bundle *b, uint32_t i) { return b->records[i].cache_key; }

/* Refuses two kernels of one hash or two records of one cache key: which
   copy emit would write, or a lookup would find, would otherwise depend on
   thread counts and order. */
static tb_result tb__check_unique(const tb_bundle *b, int kernels, int records, tb_error *err) {
    uint32_t dup = 0;
    const char *s;
    long found = 0;
    if (kernels && b->kernel_count > 1 &&
        (found = tb__repeats(&b->ctx, tb__kernel_hash_at, b, b->kernel_count, NULL, &dup)) > 0) {
        s = b->kernels[dup].hash;
        return tb__fail(err, tb_err_malformed, s, NULL, -1, 0, "two kernels have the hash \"%.80s\"", s);
    }
    if (found == 0 && records && b->record_count > 1 &&
        (found = tb__repeats(&b->ctx, tb__record_key_at, b, b->record_count, NULL, &dup)) > 0) {
        s = b->records[dup].cache_key;
        return tb__fail(err, tb_err_malformed, s, NULL, -1, 0, "two launch records have the cache key \"%.80s\"", s);
    }
    return found < 0 ? TB__OOM(err) : tb_ok;
}

/* Files of format 2.0 and 1.0 may hold two records of one key: their
   writers keyed every cubin of a kernel directory by its hash. Such a file
   still reads; the first record of a key is kept, the others dropped and
   logged, so that lookups and a rewrite see unique keys. */
static tb_result tb__drop_duplicate_records(tb_bundle *b, tb_error *err) {
    uint32_t n = b->record_count, i, kept = 0, first = 0;
    unsigned char *repeats;
    long dropped;
    if (n < 2) return tb_ok;
    if (!(repeats = (unsigned char *)tb__alloc(&b->ctx, n))) return TB__OOM(err);
    if ((dropped = tb__repeats(&b->ctx, tb__record_key_at, b, n, repeats, &first)) < 0) {
        tb__free(&b->ctx, repeats);
        return TB__OOM(err);
    }
    if (dropped)
        tb__log(&b->ctx, TB_LOG_WARN,
                "bundle format %u.%u: %ld launch records repeat a cache key (the first: \"%.80s\") and are dropped",
                b->format_major, b->format_minor, dropped, b->records[first].cache_key);
    for (i = 0; i < n; i++)
        if (!repeats[i]) b->records[kept++] = b->records[i];
    b->record_count = kept;
    tb__free(&b->ctx, repeats);
    return tb_ok;
}

/* Names metadata: one block holding the two pointer arrays and strings. */
typedef struct tb__names_block {
    tb_names pub;
    tb__ctx ctx;
} tb__names_block;

static int tb__binary_stem(const char *name, size_t *stem_len) {
    static const char *const exts[] = {".cubin", ".hsaco", ".spv"};
    size_t n = strlen(name), i;
    for (i = 0; i < 3; i++) {
        size_t e = strlen(exts[i]);
        if (n > e && strcmp(name + n - e, exts[i]) == 0) {
            *stem_len = n - e;
            return 1;
        }
    }
    return 0;
}

/* include: per-kernel mask (NULL: all kernels). */
static tb_result tb__make_names(const tb_bundle *b, const unsigned char *include, tb_names **out, tb_error *err) {
    size_t ncached = 0, nstatic = b->record_count, bytes = sizeof(tb__names_block), strbytes = 0;
    uint32_t i, j;
    tb__names_block *nb;
    const char **cached, **stat;
    char *sp;
    size_t stem;
    for (i = 0; i < b->kernel_count; i++) {
        if (include && !include[i]) continue;
        for (j = 0; j < b->kernels[i].artifact_count; j++)
            if (tb__binary_stem(b->kernels[i].artifacts[j].name, &stem)) {
                ncached++;
                strbytes += stem + 1;
            }
    }
    for (i = 0; i < b->record_count; i++) strbytes += strlen(b->records[i].kernel_name) + 1;
    bytes += (ncached + nstatic) * sizeof(char *) + strbytes;
    nb = (tb__names_block *)tb__alloc(&b->ctx, bytes);
    if (!nb) return TB__OOM(err);
    nb->ctx = b->ctx;
    cached = (const char **)(void *)(nb + 1);
    stat = cached + ncached;
    sp = (char *)(stat + nstatic);
    ncached = 0;
    for (i = 0; i < b->kernel_count; i++) {
        if (include && !include[i]) continue;
        for (j = 0; j < b->kernels[i].artifact_count; j++)
            if (tb__binary_stem(b->kernels[i].artifacts[j].name, &stem)) {
                memcpy(sp, b->kernels[i].artifacts[j].name, stem);
                sp[stem] = 0;
                cached[ncached++] = sp;
                sp += stem + 1;
            }
    }
    for (i = 0; i < b->record_count; i++) {
        size_t n = strlen(b->records[i].kernel_name);
        memcpy(sp, b->records[i].kernel_name, n + 1);
        stat[i] = sp;
        sp += n + 1;
    }
    nb->pub.cached_count = (uint32_t)ncached;
    nb->pub.cached = cached;
    nb->pub.static_count = (uint32_t)nstatic;
    nb->pub.statically_launched = stat;
    *out = &nb->pub;
    return tb_ok;
}

TBDEF tb_result tb_bundle_names(const tb_bundle *b, tb_names **out, tb_error *err) {
    if (!b || !out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle or out is NULL");
    *out = NULL;
    return tb__make_names(b, NULL, out, err);
}

TBDEF void tb_names_free(tb_names *names) {
    tb__names_block *nb = (tb__names_block *)(void *)names;
    tb__ctx c;
    if (!names) return;
    c = nb->ctx;
    tb__free(&c, nb);
}

/* Triton signature types to PyTorch codes. */
TBDEF tb_result tb_arg_code_from_triton_type(const char *ty, char *code, tb_error *err) {
    static const struct { const char *name, *name2; char code; int kind; } map[] = {
#define TB__X(code, bytes, kind, triton, triton2, mlir) {triton, triton2, code, kind},
        TB__ARG_CODES(TB__X)
#undef TB__X
    };
    size_t i;
    if (!ty || !code) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "type or code is NULL");
    if (ty[0] == '*' && ty[1]) { *code = 'O'; return tb_ok; }
    if (strcmp(ty, "constexpr") == 0) { *code = 0; return tb_ok; } /* no parameter */
    for (i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].kind != TB__KIND_PTR && map[i].kind != TB__KIND_DESC &&
            (strcmp(ty, map[i].name) == 0 || (map[i].name2[0] && strcmp(ty, map[i].name2) == 0))) {
            *code = map[i].code;
            return tb_ok;
        }
    if (strncmp(ty, "tensordesc<", 11) == 0) { /* passed as a tb_tensor_desc; its meta comes from the kernel */
        *code = 'T';
        return tb_ok;
    }
    if (strcmp(ty, "nvTmaDesc") == 0)
        return tb__fail(err, tb_err_unsupported_type, NULL, NULL, -1, 0,
                        "\"%.60s\": a host-built TMA descriptor (Triton's deprecated experimental API); pass a "
                        "tensordesc argument instead", ty);
    if (strncmp(ty, "fp8", 3) == 0)
        return tb__fail(err, tb_err_unsupported_type, NULL, NULL, -1, 0,
                        "\"%.60s\": an fp8 scalar argument, which Triton 3.6's own launcher cannot pass either", ty);
    return tb__fail(err, tb_err_unsupported_type, NULL, NULL, -1, 0, "unknown Triton type \"%.60s\"", ty);
}

TBDEF tb_result tb_arg_types_from_signature(const char *const *types, size_t count, char *out, size_t cap,
                                            tb_error *err) {
    size_t i, n = 0;
    tb_result r;
    if (!out || cap == 0 || (count && !types))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "NULL or empty buffer");
    out[0] = 0;
    for (i = 0; i < count; i++) {
        char c;
        if ((r = tb_arg_code_from_triton_type(types[i], &c, err)) != tb_ok) return r;
        if (!c) continue;
        if (n + 1 >= cap || n >= TB_MAX_ARGS)
            return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0,
                            "more arguments than the buffer or TB_MAX_ARGS holds");
        out[n++] = c;
    }
    out[n] = 0;
    return tb_ok;
}

/* Properties (2.4): a bundle's key/value strings (section 6 carries them). */
TBDEF uint32_t tb_bundle_property_count(const tb_bundle *b) { return b ? b->property_count : 0; }
TBDEF const char *tb_bundle_property_at(const tb_bundle *b, uint32_t i, const char **key) {
    if (key) *key = b && i < b->property_count ? b->properties[2 * i] : NULL;
    return b && i < b->property_count ? b->properties[2 * i + 1] : NULL;
}
TBDEF const char *tb_bundle_property(const tb_bundle *b, const char *key) {
    uint32_t i;
    for (i = 0; b && key && i < b->property_count; i++)
        if (!strcmp(b->properties[2 * i], key)) return b->properties[2 * i + 1];
    return NULL;
}
TBDEF tb_result tb_bundle_set_property(tb_bundle *b, const char *key, const char *value, tb_error *err) {
    uint32_t i;
    size_t kn = key ? strlen(key) : 0, vn = value ? strlen(value) : 0;
    const char *k2, *v2;
    if (!b || !key) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle or key is NULL");
    if (!kn || kn > TB_MAX_NAME_LENGTH || vn > TB_MAX_STRING_LENGTH)
        return tb__fail(err, kn ? tb_err_limit : tb_err_bad_name, NULL, NULL, -1, 0,
                        "a property key of %zu bytes (1 to %u) or value of %zu (at most %u)", kn,
                        (unsigned)TB_MAX_NAME_LENGTH, vn, (unsigned)TB_MAX_STRING_LENGTH);
    for (i = 0; i < b->property_count && strcmp(b->properties[2 * i], key); i++) {}
    if (!value) { /* removed: the last one in its place */
        if (i < b->property_count) {
            b->property_count--;
            b->properties[2 * i] = b->properties[2 * b->property_count];
            b->properties[2 * i + 1] = b->properties[2 * b->property_count + 1];
        }
        return tb_ok;
    }
    if (i == b->property_count && b->property_count >= TB_MAX_PROPERTIES)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "over TB_MAX_PROPERTIES (%u) properties",
                        (unsigned)TB_MAX_PROPERTIES);
    if (!(k2 = tb__arena_strdup(&b->ctx, &b->arena, key, kn)) ||
        !(v2 = tb__arena_strdup(&b->ctx, &b->arena, value, vn)))
        return TB__OOM(err);
    if (i == b->property_count) {
        if (b->property_count == b->property_cap) {
            uint32_t cap = b->property_cap ? 2 * b->property_cap : 8;
            const char **a = (const char **)tb__alloc(&b->ctx, (size_t)cap * 2 * sizeof *a);
            if (!a) return TB__OOM(err);
            if (b->property_count) memcpy(a, b->properties, (size_t)b->property_count * 2 * sizeof *a);
            tb__free(&b->ctx, b->properties);
            b->properties = a, b->property_cap = cap;
        }
        b->property_count++;
    }
    b->properties[2 * i] = k2, b->properties[2 * i + 1] = v2;
    return tb_ok;
}

/* ---- grid rules in a bundle: a record's rules set and parsed (the language
   and its checker are >>grid's) ---- */
/* (>>parsers, below) */
static tb_result tb__parse_ttfunc_ex(const char *text, size_t size, const char *fn, char *types, char *div, size_t cap,
                                     uint8_t *ranks, const char **names, uint32_t *name_lens, tb_error *err);
/* The names a record's grid rules read: its call info's, else those the
   kernel's IR gives its arguments (tt.func's loc("NAME")), written into
   buf as NUL-terminated strings with names[i] pointing at each. */
static tb_result tb__record_arg_names(const tb_bundle *b, const tb_launch_record *rec, const char **names, char *buf,
                                      size_t cap, tb_error *err) {
    const tb_launch_config *cf = &rec->configs[0];
    size_t n = strlen(cf->arg_types), used = 0, i;
    const tb_kernel *k;
    const tb_artifact *ir = NULL;
    char fname[TB_MAX_NAME_LENGTH + 16], types[TB_MAX_ARGS + 1], div[TB_MAX_ARGS + 1];
    const char *at[TB_MAX_ARGS + 1];
    uint32_t len[TB_MAX_ARGS + 1];
    const void *bytes;
    void *copy;
    tb_result r;
    if (rec->call && rec->call->arg_count == n) {
        for (i = 0; i < n; i++) names[i] = rec->call->arg_names[i];
        return tb_ok;
    }
    k = tb_bundle_find_kernel(b, cf->kernel_hash);
    if (k) {
        size_t stem = strlen(cf->binary_name);
        stem = stem > 6 && !strcmp(cf->binary_name + stem - 6, ".cubin") ? stem - 6 : stem;
        snprintf(fname, sizeof fname, "%.*s.source", (int)stem, cf->binary_name);
        if (!(ir = tb_kernel_find_artifact(k, fname))) {
            snprintf(fname, sizeof fname, "%.*s.ttir", (int)stem, cf->binary_name);
            ir = tb_kernel_find_artifact(k, fname);
        }
    }
    if (!ir)
        return tb__fail(err, tb_err_not_found, rec->cache_key, NULL, -1, 0,
                        "the record has no argument names (no call info, and no IR of its kernel in the bundle)");
    if ((r = tb__artifact_bytes(b, k, ir, 0, &bytes, &copy, err)) != tb_ok) return r;
    r = tb__parse_ttfunc_ex((const char *)bytes, (size_t)ir->size, cf->function_name, types, div, sizeof types, NULL,
                            at, len, err);
    if (r == tb_ok && strlen(types) != n)
        r = tb__fail(err, tb_err_arg_mismatch, rec->cache_key, fname, -1, 0,
                     "the IR has %zu arguments, the record %zu", strlen(types), n);
    for (i = 0; r == tb_ok && i < n; i++) {
        if (used + len[i] + 1 > cap) {
            r = tb__fail(err, tb_err_limit, rec->cache_key, fname, -1, 0, "the argument names are too long");
            break;
        }
        memcpy(buf + used, at[i], len[i]);
        buf[used + len[i]] = 0;
        names[i] = buf + used;
        used += len[i] + 1;
    }
    tb__free(&b->ctx, copy);
    return r;
}

TBDEF tb_result tb_bundle_set_grid_rule(tb_bundle *b, uint32_t record, uint32_t config, const tb_grid_rule *rule,
                                        tb_error *err) {
    tb_launch_record *rec;
    const tb_grid_rule *g = NULL;
    uint32_t j;
    tb_result r;
    if (!b || record >= b->record_count)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle is NULL or record %u out of range",
                        record);
    rec = &b->records[record];
    if (config != TB_ALL_CONFIGS && config >= rec->config_count)
        return tb__fail(err, tb_err_invalid_argument, rec->cache_key, NULL, -1, 0, "config %u of %u", config,
                        rec->config_count);
    for (j = 0; j < rec->config_count; j++) /* every config checked before any changes */
        if ((config == TB_ALL_CONFIGS || j == config) && rule &&
            (r = tb__check_grid(rule, &rec->configs[j], rec->cache_key, -1, err)) != tb_ok)
            return r;
    if (rule && !(g = tb__dup_grid(b, rule))) return TB__OOM(err);
    for (j = 0; j < rec->config_count; j++)
        if (config == TB_ALL_CONFIGS || j == config) ((tb_launch_config *)(uintptr_t)&rec->configs[j])->grid = g;
    return tb_ok;
}

/* "KERNEL=EXPR[,EXPR[,EXPR]]" split: the key, and up to three expressions
   at commas outside brackets, each copied NUL-terminated into exprs[]. */
static tb_result tb__split_grid_spec(const char *spec, char *key, size_t key_cap, char exprs[3][1024], uint32_t *count,
                                     tb_error *err) {
    const char *eq = strchr(spec, '='), *p, *start;
    int depth = 0;
    *count = 0;
    if (!eq || eq == spec || (size_t)(eq - spec) >= key_cap)
        return tb__fail(err, tb_err_parse, NULL, NULL, 0, 0, "a grid rule is KERNEL=EXPR[,EXPR[,EXPR]]: \"%.80s\"",
                        spec);
    memcpy(key, spec, (size_t)(eq - spec));
    key[eq - spec] = 0;
    for (p = start = eq + 1;; p++) {
        if (*p == '(' || *p == '[') depth++;
        else if ((*p == ')' || *p == ']') && depth) depth--;
        else if ((*p == ',' && !depth) || !*p) {
            if (*count == 3)
                return tb__fail(err, tb_err_parse, key, NULL, (long long)(p - spec), 0,
                                "more than three grid dimensions");
            if ((size_t)(p - start) >= sizeof exprs[0])
                return tb__fail(err, tb_err_limit, key, NULL, (long long)(start - spec), 0,
                                "a grid expression over 1023 bytes");
            memcpy(exprs[*count], start, (size_t)(p - start));
            exprs[(*count)++][p - start] = 0;
            if (!*p) break;
            start = p + 1;
        }
    }
    return tb_ok;
}

/* One record's rule for every config, into rules[config] (ops from pool):
   names count as the record's arguments, and every config must take that
   many (a record whose configs differ is refused, never read past). */
static tb_result tb__grid_rule_for(tb_bundle *b, uint32_t rec, const char *key, char exprs[3][1024], uint32_t count,
                                   const char **names, char *namebuf, size_t namecap, tb_grid_rule *rules,
                                   tb_grid_op *pool, tb_error *err) {
    const tb_launch_record *r = &b->records[rec];
    uint32_t j, d, n0 = (uint32_t)strlen(r->configs[0].arg_types);
    tb_result res;
    if ((res = tb__record_arg_names(b, r, names, namebuf, namecap, err)) != tb_ok) return res;
    for (j = 0; j < r->config_count; j++) {
        const tb_launch_config *cf = &r->configs[j];
        if ((uint32_t)strlen(cf->arg_types) != n0)
            return tb__fail(err, tb_err_arg_mismatch, r->cache_key, NULL, -1, 0,
                            "config %u takes %u arguments, config 0 %u: one grid rule cannot name them", j,
                            (unsigned)strlen(cf->arg_types), n0);
        for (d = 0; d < 3; d++) {
            tb_grid_op *ops = pool + ((size_t)j * 3 + d) * TB_MAX_GRID_OPS;
            rules[j].ops[d] = ops;
            if (d >= count) {
                ops[0].op = TB_GRID_CONST, ops[0].index = 0, ops[0].value = 1, rules[j].op_count[d] = 1;
            } else if ((res = tb_grid_parse(exprs[d], names, n0, cf->params, cf->param_count, ops,
                                            &rules[j].op_count[d], err)) != tb_ok) {
                if (err) {
                    char dim[64];
                    snprintf(dim, sizeof dim, " (dimension %c of the rule for %.20s)", "xyz"[d], key);
                    if (strlen(err->message) + strlen(dim) < sizeof err->message) strcat(err->message, dim);
                }
                return res;
            }
        }
        if ((res = tb__check_grid(&rules[j], cf, r->cache_key, -1, err)) != tb_ok) return res;
    }
    return tb_ok;
}

/* allow_none: no record of the name is no error (pack: another batch's).
   Every matching record's rules are made and checked before any record
   changes, so a rule refused for one record changes none. */
static tb_result tb__add_grid_rule(tb_bundle *b, const char *spec, int allow_none, uint32_t *records_changed,
                                   tb_error *err) {
    char *key = NULL, exprs[3][1024], *namebuf = NULL;
    const char **names = NULL;
    tb_grid_rule *rules = NULL;
    tb_grid_op *pool = NULL;
    uint32_t count, i, j, pass, changed = 0, most = 0;
    size_t keycap = (size_t)TB_MAX_STRING_LENGTH + 1, namecap = (size_t)64 << 10;
    tb_result r = tb_ok;
    if (records_changed) *records_changed = 0;
    if (!b || !spec) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle or spec is NULL");
    if (!(key = (char *)tb__alloc(&b->ctx, keycap))) return TB__OOM(err);
    if ((r = tb__split_grid_spec(spec, key, keycap, exprs, &count, err)) != tb_ok) goto done;
    for (i = 0; i < b->record_count; i++) /* the most configs a matching record has: what the rules need */
        if ((!strcmp(b->records[i].kernel_name, key) || !strcmp(b->records[i].cache_key, key)) &&
            b->records[i].config_count > most)
            most = b->records[i].config_count;
    if (!(names = (const char **)tb__alloc(&b->ctx, (TB_MAX_ARGS + 1) * sizeof *names)) ||
        !(namebuf = (char *)tb__alloc(&b->ctx, namecap)) ||
        !(rules = (tb_grid_rule *)tb__alloc(&b->ctx, (size_t)(most ? most : 1) * sizeof *rules)) ||
        !(pool = (tb_grid_op *)tb__alloc(&b->ctx, (size_t)(most ? most : 1) * 3 * TB_MAX_GRID_OPS * sizeof *pool))) {
        r = TB__OOM(err);
        goto done;
    }
    for (pass = 0; pass < 2 && r == tb_ok; pass++) /* 0: make and check every rule; 1: set them */
        for (i = 0; i < b->record_count && r == tb_ok; i++) {
            tb_launch_record *rec = &b->records[i];
            if (strcmp(rec->kernel_name, key) != 0 && strcmp(rec->cache_key, key) != 0) continue;
            if ((r = tb__grid_rule_for(b, i, key, exprs, count, names, namebuf, namecap, rules, pool, err)) != tb_ok)
                break;
            if (pass == 0) continue;
            for (j = 0; j < rec->config_count && r == tb_ok; j++) r = tb_bundle_set_grid_rule(b, i, j, &rules[j], err);
            if (r == tb_ok && !rec->call) { /* the names the rule was written with, so that it reads back so */
                tb_call_info ci;
                uint32_t n0 = (uint32_t)strlen(rec->configs[0].arg_types);
                int named = 1;
                for (j = 0; j < n0 && named; j++)
                    named = names[j] && *names[j] && strlen(names[j]) <= TB_MAX_NAME_LENGTH;
                memset(&ci, 0, sizeof ci);
                ci.arg_count = n0, ci.arg_names = names;
                if (named && n0 && !(rec->call = tb__dup_call(b, &ci))) r = TB__OOM(err);
            }
            if (r == tb_ok) changed++;
        }
    if (r == tb_ok && !changed && !allow_none)
        r = tb__fail(err, tb_err_not_found, key, NULL, -1, 0,
                     "the grid rule \"%.100s\" names no kernel (or cache key) of the bundle", spec);
done:
    tb__free(&b->ctx, key);
    tb__free(&b->ctx, names);
    tb__free(&b->ctx, namebuf);
    tb__free(&b->ctx, rules);
    tb__free(&b->ctx, pool);
    if (records_changed) *records_changed = changed;
    return r;
}

TBDEF tb_result tb_bundle_add_grid_rule(tb_bundle *b, const char *spec, uint32_t *records_changed, tb_error *err) {
    return tb__add_grid_rule(b, spec, 0, records_changed, err);
}

/* ---------------------------------------------------------------------- */
/* >>format  Format: the checksum, the writer and the reader */
/* (docs/FORMAT.md).                                                      */
/* XXH3-64 because it is public, specified, 64 bits wide and fast (about  */
/* 22 GB/s a core with SSE2, where XXH64 gives 8 and a table CRC32 2);    */
/* over 1 MiB blocks, then over the blocks' values, because one server    */
/* core may read memory at only 7 GB/s and blocks let every core help, so */
/* checking a file costs less than copying it. The reader checks every    */
/* length against the bytes that remain, every count against the         */
/* smallest size its items could take, and every name, before it         */
/* allocates or trusts.                                                   */
/* ---------------------------------------------------------------------- */
#define TB__P1 11400714785074694791ULL
#define TB__P2 14029467366897019727ULL
#define TB__P3 1609587929392839161ULL
#define TB__P4 9650029242287828579ULL
#define TB__P5 2870177450012600261ULL

static inline uint64_t tb__rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
/* unaligned little-endian loads; one instruction on little-endian hosts */
static inline uint64_t tb__le64(const unsigned char *p) {
#if !TB__BIG_ENDIAN
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#else
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) | ((uint64_t)p[3] << 24) |
           ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) | ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
#endif
}
static inline uint32_t tb__le32(const unsigned char *p) {
#if !TB__BIG_ENDIAN
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#else
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
#endif
}
static uint16_t tb__le16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static void tb__put64(unsigned char *p, uint64_t v) {
    int i;
    for (i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void tb__put32(unsigned char *p, uint32_t v) {
    int i;
    for (i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
/* XXH3-64 (seed 0, default secret), one-shot and streaming: the format's
   checksum. Specified by the xxHash project (XXH3_64bits); the SSE2 path
   computes the same numbers as the scalar one, four lanes at a time. */
static const unsigned char tb__xxh3_secret[192] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e};

#define TB__PRIME32_1 0x9E3779B1U
#define TB__PRIME32_2 0x85EBCA77U
#define TB__PRIME32_3 0xC2B2AE3DU
#define TB__PRIME_MX1 0x165667919E3779F9ULL
#define TB__PRIME_MX2 0x9FB21C651E98DF25ULL
#define TB__STRIPE 64u
#define TB__STRIPES_PER_BLOCK 16u /* (192 - 64) / 8 */
#define TB__SECRET_LAST (192u - TB__STRIPE)

static inline uint64_t tb__mul128_fold64(uint64_t a, uint64_t b) {
#if defined(__SIZEOF_INT128__)
    __extension__ typedef unsigned __int128 tb__u128;
    tb__u128 p = (tb__u128)a * b;
    return (uint64_t)p ^ (uint64_t)(p >> 64);
#else
    uint64_t lo_lo = (a & 0xFFFFFFFFu) * (b & 0xFFFFFFFFu), hi_lo = (a >> 32) * (b & 0xFFFFFFFFu);
    uint64_t lo_hi = (a & 0xFFFFFFFFu) * (b >> 32), hi_hi = (a >> 32) * (b >> 32);
    uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFu) + lo_hi;
    uint64_t upper = (hi_lo >> 32) + (cross >> 32) + hi_hi, lower = (cross << 32) | (lo_lo & 0xFFFFFFFFu);
    return lower ^ upper;
#endif
}
static uint64_t tb__xxh64_avalanche(uint64_t h) {
    h ^= h >> 33;
    h *= TB__P2;
    h ^= h >> 29;
    h *= TB__P3;
    return h ^ (h >> 32);
}
static uint64_t tb__xxh3_avalanche(uint64_t h) {
    h ^= h >> 37;
    h *= TB__PRIME_MX1;
    return h ^ (h >> 32);
}
static uint64_t tb__swap64(uint64_t x) {
    return ((x << 56) & 0xff00000000000000ULL) | ((x << 40) & 0x00ff000000000000ULL) |
           ((x << 24) & 0x0000ff0000000000ULL) | ((x << 8) & 0x000000ff00000000ULL) |
           ((x >> 8) & 0x00000000ff000000ULL) | ((x >> 24) & 0x0000000000ff0000ULL) |
           ((x >> 40) & 0x000000000000ff00ULL) | ((x >> 56) & 0x00000000000000ffULL);
}
static uint64_t tb__mix16(const unsigned char *in, const unsigned char *sec) {
    return tb__mul128_fold64(tb__le64(in) ^ tb__le64(sec), tb__le64(in + 8) ^ tb__le64(sec + 8));
}

/* inputs of at most 240 bytes */
static uint64_t tb__xxh3_short(const unsigned char *p, size_t len) {
    const unsigned char *s = tb__xxh3_secret;
    uint64_t acc;
    size_t i;
    if (len == 0) return tb__xxh64_avalanche(tb__le64(s + 56) ^ tb__le64(s + 64));
    if (len <= 3) {
        uint32_t combined =
            ((uint32_t)p[0] << 16) | ((uint32_t)p[len >> 1] << 24) | (uint32_t)p[len - 1] | ((uint32_t)len << 8);
        return tb__xxh64_avalanche((uint64_t)combined ^ (uint64_t)(tb__le32(s) ^ tb__le32(s + 4)));
    }
    if (len <= 8) {
        uint64_t in64 = (uint64_t)tb__le32(p + len - 4) + ((uint64_t)tb__le32(p) << 32);
        uint64_t h = in64 ^ (tb__le64(s + 8) ^ tb__le64(s + 16));
        h ^= tb__rotl(h, 49) ^ tb__rotl(h, 24);
        h *= TB__PRIME_MX2;
        h ^= (h >> 35) + len;
        h *= TB__PRIME_MX2;
        return h ^ (h >> 28);
    }
    if (len <= 16) {
        uint64_t lo = tb__le64(p) ^ (tb__le64(s + 24) ^ tb__le64(s + 32));
        uint64_t hi = tb__le64(p + len - 8) ^ (tb__le64(s + 40) ^ tb__le64(s + 48));
        return tb__xxh3_avalanche(len + tb__swap64(lo) + hi + tb__mul128_fold64(lo, hi));
    }
    acc = len * TB__P1;
    if (len <= 128) {
        if (len > 32) {
            if (len > 64) {
                if (len > 96) {
                    acc += tb__mix16(p + 48, s + 96);
                    acc += tb__mix16(p + len - 64, s + 112);
                }
                acc += tb__mix16(p + 32, s + 64);
                acc += tb__mix16(p + len - 48, s + 80);
            }
            acc += tb__mix16(p + 16, s + 32);
            acc += tb__mix16(p + len - 32, s + 48);
        }
        acc += tb__mix16(p, s);
        acc += tb__mix16(p + len - 16, s + 16);
        return tb__xxh3_avalanche(acc);
    }
    for (i = 0; i < 8; i++) acc += tb__mix16(p + 16 * i, s + 16 * i);
    acc = tb__xxh3_avalanche(acc);
    for (i = 8; i < len / 16; i++) acc += tb__mix16(p + 16 * i, s + 16 * (i - 8) + 3);
    acc += tb__mix16(p + len - 16, s + 136 - 17);
    return tb__xxh3_avalanche(acc);
}

/* nb stripes of 64 bytes into the 8 accumulators, secret advancing 8 bytes
   a stripe; with dst, each stripe is also stored there (copy and checksum
   in one pass over the input). */
static void tb__xxh3_accumulate(uint64_t *acc, unsigned char *dst, const unsigned char *in, const unsigned char *sec,
                                size_t nb) {
#if defined(__SSE2__)
    __m128i a0 = _mm_loadu_si128((const __m128i *)(void *)acc),
            a1 = _mm_loadu_si128((const __m128i *)(void *)(acc + 2));
    __m128i a2 = _mm_loadu_si128((const __m128i *)(void *)(acc + 4)),
            a3 = _mm_loadu_si128((const __m128i *)(void *)(acc + 6));
    size_t n;
#define TB__ACC_LANE(a, off)                                                                          \
    do {                                                                                              \
        __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(in + (off)));                     \
        __m128i dk = _mm_xor_si128(d, _mm_loadu_si128((const __m128i *)(const void *)(sec + (off))));  \
        __m128i prod = _mm_mul_epu32(dk, _mm_shuffle_epi32(dk, _MM_SHUFFLE(0, 3, 0, 1)));            \
        a = _mm_add_epi64(a, _mm_add_epi64(prod, _mm_shuffle_epi32(d, _MM_SHUFFLE(1, 0, 3, 2))));      \
        if (dst) _mm_storeu_si128((__m128i *)(void *)(dst + (off)), d);                               \
    } while (0)
    for (n = 0; n < nb; n++, in += TB__STRIPE, sec += 8, dst = dst ? dst + TB__STRIPE : dst) {
        TB__PREFETCH(in + 384);
        TB__ACC_LANE(a0, 0);
        TB__ACC_LANE(a1, 16);
        TB__ACC_LANE(a2, 32);
        TB__ACC_LANE(a3, 48);
    }
#undef TB__ACC_LANE
    _mm_storeu_si128((__m128i *)(void *)acc, a0);
    _mm_storeu_si128((__m128i *)(void *)(acc + 2), a1);
    _mm_storeu_si128((__m128i *)(void *)(acc + 4), a2);
    _mm_storeu_si128((__m128i *)(void *)(acc + 6), a3);
#else
    size_t n, i;
    for (n = 0; n < nb; n++, in += TB__STRIPE, sec += 8) {
        TB__PREFETCH(in + 384);
        for (i = 0; i < 8; i++) {
            uint64_t d = tb__le64(in + 8 * i), dk = d ^ tb__le64(sec + 8 * i);
            acc[i ^ 1] += d;
            acc[i] += (uint64_t)(uint32_t)dk * (dk >> 32);
        }
        if (dst) {
            memcpy(dst, in, TB__STRIPE);
            dst += TB__STRIPE;
        }
    }
#endif
}

static void tb__xxh3_scramble(uint64_t *acc) {
    const unsigned char *sec = tb__xxh3_secret + TB__SECRET_LAST;
    size_t i;
    for (i = 0; i < 8; i++) {
        uint64_t a = acc[i];
        a ^= a >> 47;
        a ^= tb__le64(sec + 8 * i);
        acc[i] = a * TB__PRIME32_1;
    }
}

/* Stripes into the accumulators, scrambling at each block's end. */
static void tb__xxh3_consume(uint64_t *acc, size_t *stripes_so_far, unsigned char *dst, const unsigned char *in,
                             size_t nb) {
    while (nb) {
        size_t room = TB__STRIPES_PER_BLOCK - *stripes_so_far, take = nb < room ? nb : room;
        tb__xxh3_accumulate(acc, dst, in, tb__xxh3_secret + *stripes_so_far * 8, take);
        in += take * TB__STRIPE;
        if (dst) dst += take * TB__STRIPE;
        nb -= take;
        *stripes_so_far += take;
        if (*stripes_so_far == TB__STRIPES_PER_BLOCK) {
            tb__xxh3_scramble(acc);
            *stripes_so_far = 0;
        }
    }
}

static uint64_t tb__xxh3_merge(const uint64_t *acc, uint64_t total) {
    const unsigned char *s = tb__xxh3_secret + 11;
    uint64_t r = total * TB__P1;
    size_t i;
    for (i = 0; i < 4; i++)
        r += tb__mul128_fold64(acc[2 * i] ^ tb__le64(s + 16 * i), acc[2 * i + 1] ^ tb__le64(s + 16 * i + 8));
    return tb__xxh3_avalanche(r);
}

typedef struct tb__xxh {
    uint64_t acc[8];
    unsigned char buf[256];     /* unprocessed bytes; its last stripe keeps the last one consumed */
    size_t buflen;
    size_t stripes;             /* stripes so far in the current block */
    uint64_t total;
} tb__xxh;

static void tb__xxh_init(tb__xxh *h) {
    static const uint64_t init[8] = { TB__PRIME32_3, TB__P1,        TB__P2, TB__P3,
                                      TB__P4,        TB__PRIME32_2, TB__P5, TB__PRIME32_1 };
    memcpy(h->acc, init, sizeof init);
    h->buflen = 0;
    h->stripes = 0;
    h->total = 0;
}

/* Adds n bytes to the checksum; with dst, also copies them there, reading
   each input byte once. */
static void tb__xxh_update_to(tb__xxh *h, unsigned char *dst, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data, *end = p + n;
    h->total += n;
    if (h->buflen + n <= sizeof h->buf) { /* keep at least one byte back for the digest */
        if (n) {
            memcpy(h->buf + h->buflen, p, n);
            if (dst) memcpy(dst, p, n);
        }
        h->buflen += n;
        return;
    }
    if (h->buflen) {
        size_t fill = sizeof h->buf - h->buflen;
        memcpy(h->buf + h->buflen, p, fill);
        if (dst) memcpy(dst, p, fill), dst += fill;
        p += fill;
        tb__xxh3_consume(h->acc, &h->stripes, NULL, h->buf, sizeof h->buf / TB__STRIPE);
        h->buflen = 0;
    }
    if ((size_t)(end - p) > sizeof h->buf) {
        size_t nb = (size_t)(end - p - 1) / TB__STRIPE; /* leave at least one byte */
        tb__xxh3_consume(h->acc, &h->stripes, dst, p, nb);
        p += nb * TB__STRIPE;
        if (dst) dst += nb * TB__STRIPE;
        memcpy(h->buf + sizeof h->buf - TB__STRIPE, p - TB__STRIPE, TB__STRIPE);
    }
    memcpy(h->buf, p, (size_t)(end - p));
    if (dst) memcpy(dst, p, (size_t)(end - p));
    h->buflen = (size_t)(end - p);
}

static void tb__xxh_update(tb__xxh *h, const void *data, size_t n) { tb__xxh_update_to(h, NULL, data, n); }

static uint64_t tb__xxh_digest(const tb__xxh *h) {
    uint64_t acc[8];
    size_t stripes = h->stripes;
    unsigned char last[TB__STRIPE];
    const unsigned char *lp;
    if (h->total <= 240) return tb__xxh3_short(h->buf, (size_t)h->total);
    memcpy(acc, h->acc, sizeof acc);
    if (h->buflen >= TB__STRIPE) {
        size_t nb = (h->buflen - 1) / TB__STRIPE;
        tb__xxh3_consume(acc, &stripes, NULL, h->buf, nb);
        lp = h->buf + h->buflen - TB__STRIPE;
    } else {
        size_t catchup = TB__STRIPE - h->buflen;
        memcpy(last, h->buf + sizeof h->buf - catchup, catchup);
        memcpy(last + catchup, h->buf, h->buflen);
        lp = last;
    }
    tb__xxh3_accumulate(acc, NULL, lp, tb__xxh3_secret + TB__SECRET_LAST - 7, 1);
    return tb__xxh3_merge(acc, h->total);
}

TBDEF uint64_t tb_xxh3_64(const void *data, size_t size) {
    tb__xxh h;
    if (size <= 240) return tb__xxh3_short((const unsigned char *)data, size);
    tb__xxh_init(&h);
    tb__xxh_update(&h, data, size);
    return tb__xxh_digest(&h);
}

/* ---- the block checksum (format 2) ---- */
/* XXH3-64 of the little-endian XXH3-64 values of each TB__CHUNK bytes (the
   last block may be shorter). Blocks hash independently, so writing and
   verifying use as many cores as there are; a single XXH3 over the file,
   format 1's checksum, is limited to one core's read bandwidth. */
#define TB__CHUNK ((size_t)1 << 20)
#define TB__CHUNKS_PER_THREAD 8 /* fewer blocks than 8 per thread: not worth a thread */
#define TB__READ_PIECE ((size_t)64 << 10) /* a block read from a file, a piece at a time */

static size_t tb__chunk_count(size_t n) { return n ? (n - 1) / TB__CHUNK + 1 : 1; }

static uint64_t tb__chunk_root(const uint64_t *digests, size_t count) {
    tb__xxh h;
    size_t i;
    unsigned char b[8];
    tb__xxh_init(&h);
    for (i = 0; i < count; i++) {
        tb__put64(b, digests[i]);
        tb__xxh_update(&h, b, 8);
    }
    return tb__xxh_digest(&h);
}

/* Reads n bytes at offset `at` of an output into buf: 0, or an errno. The
   filesystem section supplies one for files (pread). */
typedef int (*tb__read_fn)(void *user, size_t at, void *buf, size_t n);

typedef struct tb__chunk_job {
    const unsigned char *data;  /* the bytes, or NULL: read them with read into buf */
    tb__read_fn read;
    void *user;
    int err;                    /* errno of a failed read */
    unsigned char *buf;         /* TB__READ_PIECE bytes */
    size_t size, first, end;    /* blocks [first, end) */
    uint64_t *digests;          /* digests[0] is block `base` */
    size_t base;
} tb__chunk_job;

static void *tb__chunk_hash(void *arg) {
    tb__chunk_job *j = (tb__chunk_job *)arg;
    size_t i;
    for (i = j->first; i < j->end && !j->err; i++) {
        size_t at = i * TB__CHUNK, n = j->size - at < TB__CHUNK ? j->size - at : TB__CHUNK, k, piece;
        tb__xxh h;
        if (j->data) {
            j->digests[i - j->base] = n ? tb_xxh3_64(j->data + at, n) : tb_xxh3_64("", 0);
            continue;
        }
        /* read in pieces that stay in the core's cache while they are hashed
           (a whole block read first is evicted by its own end); the
           streaming hash equals the one-shot one at every length */
        tb__xxh_init(&h);
        for (k = 0; k < n && !j->err; k += piece) {
            piece = n - k < TB__READ_PIECE ? n - k : TB__READ_PIECE;
            if ((j->err = j->read(j->user, at + k, j->buf, piece)) == 0) tb__xxh_update(&h, j->buf, piece);
        }
        j->digests[i - j->base] = tb__xxh_digest(&h);
    }
    return NULL;
}

/* The block checksum of data[0, size), or (data NULL) of the first size
   bytes that read gives, through bufs[t], one TB__READ_PIECE buffer per thread, at most
   max_threads. Rounds of up to 256 blocks, each round's blocks split among
   threads, so no allocation whatever the size. 0, or a read's errno. */
static int tb__checksum_blocks(const unsigned char *data, tb__read_fn read, void *user, unsigned char *const *bufs,
                               unsigned max_threads, size_t size, uint64_t *out) {
    uint64_t digests[256];
    tb__chunk_job jobs[TB__MAX_THREADS];
    tb__team team;
    tb__xxh root;
    size_t count = tb__chunk_count(size), done = 0, i;
    unsigned char b[8];
    tb__xxh_init(&root);
    while (done < count) {
        size_t batch = count - done < 256 ? count - done : 256;
        unsigned t, nt = tb__thread_count(0, batch, TB__CHUNKS_PER_THREAD, max_threads);
        for (t = 0; t < nt; t++) {
            jobs[t].data = data;
            jobs[t].read = read;
            jobs[t].user = user;
            jobs[t].err = 0;
            jobs[t].buf = bufs ? bufs[t] : NULL;
            jobs[t].size = size;
            jobs[t].first = done + batch * t / nt;
            jobs[t].end = done + batch * (t + 1) / nt;
            jobs[t].digests = digests;
            jobs[t].base = done;
        }
        tb__spawn(&team, 1, nt, tb__chunk_hash, jobs, sizeof jobs[0]);
        tb__chunk_hash(&jobs[0]);
        tb__join(&team);
        for (t = 0; t < nt; t++)
            if (jobs[t].err) return jobs[t].err;
        for (i = 0; i < batch; i++) {
            tb__put64(b, digests[i]);
            tb__xxh_update(&root, b, 8);
        }
        done += batch;
    }
    *out = tb__xxh_digest(&root);
    return 0;
}

TBDEF uint64_t tb_bundle_checksum(const void *data, size_t size) {
    uint64_t sum = 0;
    tb__checksum_blocks((const unsigned char *)data, NULL, NULL, NULL, TB__MAX_THREADS, size, &sum);
    return sum;
}

static const unsigned char tb__magic[8] = {0x89, 'T', 'B', 'U', 'N', 'D', '\r', '\n'};
#define TB__FORMAT_OLDEST_MAJOR 1 /* format 1.x: one XXH3-64 over the file */
#define TB__HEADER_SIZE 32u
#define TB__TRAILER_SIZE 8u
#define TB__SECTION_HEADER 16u
#define TB__SEC_KERNELS 1u
#define TB__SEC_RECORDS 2u
#define TB__SEC_REQUIRED 1u

static size_t tb__pad8(size_t n) { return (n + 7u) & ~(size_t)7u; }
static size_t tb__str_size(const char *s) { return tb__pad8(4 + strlen(s) + 1); }

/* ---- writer ---- */
/* The bytes of a bundle come from one walk of its structure
   (tb__write_body) into a sink. A sink keeps only the bytes inside its
   window [lo, hi) and skips the rest, so several sinks can walk the same
   bundle at once, each copying and hashing its own whole blocks of the
   output: that is how a large bundle is written and checksummed on several
   cores. A sink either copies into memory and hashes (mem), only hashes
   (neither mem nor fn), or hands bytes in order to a callback through a
   staging buffer without hashing (fn). */
typedef struct tb__sink {
    size_t pos, lo, hi;
    unsigned char *mem;
    tb_write_fn fn;
    void *user;
    unsigned char *stage;       /* fn: TB__STAGE bytes */
    size_t staged;
    uint64_t *digests;          /* one per block of the output, indexed from 0 */
    tb__xxh h;                  /* the current block */
    int failed;
} tb__sink;

#define TB__STAGE ((size_t)256 << 10)

static void tb__sink_flush(tb__sink *k) {
    if (k->staged && !k->failed && k->fn(k->user, k->stage, k->staged) != 0) k->failed = 1;
    k->staged = 0;
}

static void tb__sink_put(tb__sink *k, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    size_t at = k->pos;
    k->pos += n;
    if (k->pos <= k->lo || at >= k->hi || k->failed) return;
    if (at < k->lo) p += k->lo - at, n -= k->lo - at, at = k->lo;
    if (n > k->hi - at) n = k->hi - at;
    if (k->fn) {
        if (k->staged + n > TB__STAGE) tb__sink_flush(k);
        if (n < TB__STAGE) {
            memcpy(k->stage + k->staged, p, n);
            k->staged += n;
        } else if (!k->failed && k->fn(k->user, p, n) != 0) { /* a large blob goes out from the caller's memory */
            k->failed = 1;
        }
        return;
    }
    while (n) {
        size_t room = TB__CHUNK - at % TB__CHUNK, c = n < room ? n : room;
        tb__xxh_update_to(&k->h, k->mem ? k->mem + at : NULL, p, c);
        at += c, p += c, n -= c;
        if (at % TB__CHUNK == 0 || at == k->hi) {
            k->digests[(at - 1) / TB__CHUNK] = tb__xxh_digest(&k->h);
            tb__xxh_init(&k->h);
        }
    }
}

static void tb__sink_zeros(tb__sink *k, size_t n) {
    static const unsigned char z[16] = {0};
    while (n) {
        size_t c = n < 16 ? n : 16;
        tb__sink_put(k, z, c);
        n -= c;
    }
}
static void tb__sink_align(tb__sink *k, size_t a) { tb__sink_zeros(k, (a - (k->pos % a)) % a); }
static void tb__sink_u32(tb__sink *k, uint32_t v) {
    unsigned char b[4];
    tb__put32(b, v);
    tb__sink_put(k, b, 4);
}
static void tb__sink_u64(tb__sink *k, uint64_t v) {
    unsigned char b[8];
    tb__put64(b, v);
    tb__sink_put(k, b, 8);
}
static void tb__sink_str(tb__sink *k, const char *s) {
    size_t n = strlen(s);
    tb__sink_u32(k, (uint32_t)n);
    tb__sink_put(k, s, n + 1);
    tb__sink_align(k, 8);
}

static size_t tb__blob_size(size_t pos, uint64_t n) {
    /* u64 length, zeros to a 16-byte boundary, bytes, zeros to 8 */
    size_t at = pos + 8;
    at = (at + 15u) & ~(size_t)15u;
    return tb__pad8(at + (size_t)n) - pos;
}

/* Section 3: the tensor descriptors of configs that take them, 64 bytes
   each; written only when there is one. */
#define TB__SEC_TENSORDESCS 3u
#define TB__DESC_ENTRY 64u
static uint32_t tb__count_descs(const tb_bundle *b) {
    uint32_t i, j, n = 0;
    for (i = 0; i < b->record_count; i++)
        for (j = 0; j < b->records[i].config_count; j++) n += b->records[i].configs[j].tensordesc_count;
    return n;
}
static size_t tb__descs_size(const tb_bundle *b, size_t at) { /* the payload; 0: not written */
    (void)at;
    uint32_t n = tb__count_descs(b);
    return n ? 8 + (size_t)n * TB__DESC_ENTRY : 0;
}


/* Section 4 (2.2, optional): call info and grid rules, one entry per
   record that has either, in record order. */
#define TB__SEC_CALLS 4u
#define TB__CALL_ENTRY 32u
#define TB__GRID_HEAD 16u
#define TB__GRID_OP 16u
static int tb__has_calls(const tb_launch_record *r) {
    uint32_t j;
    if (r->call) return 1;
    for (j = 0; j < r->config_count; j++)
        if (r->configs[j].grid) return 1;
    return 0;
}
static int tb__rec_has_grids(const tb_launch_record *r) {
    uint32_t j;
    for (j = 0; j < r->config_count; j++)
        if (r->configs[j].grid) return 1;
    return 0;
}
/* The section's payload length, 0 when no record has call info or rules. */
static size_t tb__calls_count_size(const tb_bundle *b, uint32_t *entries) {
    size_t pos = 8;
    uint32_t i, j, k;
    *entries = 0;
    for (i = 0; i < b->record_count; i++) {
        const tb_launch_record *r = &b->records[i];
        if (!tb__has_calls(r)) continue;
        ++*entries;
        pos += TB__CALL_ENTRY;
        if (r->call) {
            for (j = 0; j < r->call->arg_count; j++) pos += tb__str_size(r->call->arg_names[j]);
            pos += tb__pad8(4 * ((size_t)r->call->mutated_count + r->call->reset_count + r->call->key_count));
        }
        if (tb__rec_has_grids(r))
            for (j = 0; j < r->config_count; j++) {
                pos += TB__GRID_HEAD;
                if (r->configs[j].grid)
                    for (k = 0; k < 3; k++) pos += (size_t)r->configs[j].grid->op_count[k] * TB__GRID_OP;
            }
    }
    return *entries ? pos : 0;
}
static void tb__sink_u32s(tb__sink *k, const uint32_t *v, uint32_t n) {
    uint32_t i;
    for (i = 0; i < n; i++) tb__sink_u32(k, v[i]);
}
static size_t tb__calls_size(const tb_bundle *b, size_t at) {
    (void)at;
    uint32_t n;
    return tb__calls_count_size(b, &n);
}
static void tb__write_calls(const tb_bundle *b, tb__sink *k) {
    uint32_t n, i, j, d, q;
    tb__calls_count_size(b, &n);
    tb__sink_u32(k, n);
    tb__sink_u32(k, 0);
    for (i = 0; i < b->record_count; i++) {
        const tb_launch_record *r = &b->records[i];
        const tb_call_info *ci = r->call;
        int grids = tb__rec_has_grids(r);
        if (!tb__has_calls(r)) continue;
        tb__sink_u32(k, i);
        tb__sink_u32(k, ci ? ci->arg_count : 0);
        tb__sink_u32(k, ci ? ci->mutated_count : 0);
        tb__sink_u32(k, ci ? ci->reset_count : 0);
        tb__sink_u32(k, ci ? ci->key_count : 0);
        tb__sink_u32(k, ci ? 1 : 0);
        tb__sink_u32(k, grids ? 1 : 0);
        tb__sink_u32(k, 0);
        if (ci) {
            for (j = 0; j < ci->arg_count; j++) tb__sink_str(k, ci->arg_names[j]);
            tb__sink_u32s(k, ci->mutated, ci->mutated_count);
            tb__sink_u32s(k, ci->reset, ci->reset_count);
            tb__sink_u32s(k, ci->key, ci->key_count);
            tb__sink_align(k, 8);
        }
        if (grids)
            for (j = 0; j < r->config_count; j++) {
                const tb_grid_rule *g = r->configs[j].grid;
                for (d = 0; d < 3; d++) tb__sink_u32(k, g ? g->op_count[d] : 0);
                tb__sink_u32(k, g ? 1 : 0);
                if (g)
                    for (d = 0; d < 3; d++)
                        for (q = 0; q < g->op_count[d]; q++) {
                            tb__sink_u32(k, g->ops[d][q].op);
                            tb__sink_u32(k, g->ops[d][q].index);
                            tb__sink_u64(k, (uint64_t)g->ops[d][q].value);
                        }
            }
    }
}
/* Section 2's payload length: a walk of the records. */
static size_t tb__records_size(const tb_bundle *b, size_t at) {
    size_t pos = 16;
    (void)at;
    uint32_t i, j, q;
    for (i = 0; i < b->record_count; i++) {
        const tb_launch_record *r = &b->records[i];
        pos += tb__str_size(r->cache_key) + tb__str_size(r->kernel_name) + 8;
        for (j = 0; j < r->config_count; j++) {
            const tb_launch_config *c = &r->configs[j];
            pos += tb__str_size(c->kernel_hash) + tb__str_size(c->function_name) + tb__str_size(c->binary_name) +
                   tb__str_size(c->arg_types) + tb__str_size(c->arg_divisibility) + 32 + 32;
            for (q = 0; q < c->param_count; q++) pos += tb__str_size(c->params[q].name) + 8;
        }
    }
    return pos;
}
typedef struct tb__cur tb__cur; /* the reader's cursor (below) */
static void tb__write_records(const tb_bundle *b, tb__sink *k);
static void tb__write_descs(const tb_bundle *b, tb__sink *k);
static tb_result tb__rd_kernels(tb_bundle *b, tb__cur *c);
static tb_result tb__rd_records(tb_bundle *b, tb__cur *c);
static tb_result tb__rd_descs(tb_bundle *b, tb__cur *c);
static tb_result tb__rd_calls(tb_bundle *b, tb__cur *c);
static size_t tb__program_size(const tb_bundle *b, size_t at);
static void tb__write_program(const tb_bundle *b, tb__sink *k);
static tb_result tb__rd_program(tb_bundle *b, tb__cur *c);
static size_t tb__programs_size(const tb_bundle *b, size_t at);
static void tb__write_programs(const tb_bundle *b, tb__sink *k);
static tb_result tb__rd_programs(tb_bundle *b, tb__cur *c);

/* The sections, one row each, in the order writers write them: adding a
   section is a row and its three functions. Section 1 is the exception
   the streaming writer needs: its kernels go out one by one (no size or
   write here) and its header is patched at the end. A row's size is its
   payload's length (0: the section is not written, unless `always`); the
   writer frames it (type, flags, length) and pads it to 8. A reader
   dispatches on the type, refuses a section before those in `after` (bits
   by type), and skips a type no row has unless it is required. */
typedef struct tb__section {
    uint32_t type, flags;       /* flags: TB__SEC_REQUIRED, or 0 for a section older readers skip */
    uint32_t after;             /* 1 << type of the sections that must come before it */
    int always;                 /* written even when empty (an empty section holds zero counts) */
    size_t (*size)(const tb_bundle *b, size_t at); /* at: the payload's absolute offset */
    void (*write)(const tb_bundle *b, tb__sink *k);
    tb_result (*read)(tb_bundle *b, tb__cur *c);
} tb__section;
static const tb__section tb__sections[] = {
    {TB__SEC_KERNELS, TB__SEC_REQUIRED, 0, 1, NULL, NULL, tb__rd_kernels},
    {TB__SEC_RECORDS, TB__SEC_REQUIRED, 0, 1, tb__records_size, tb__write_records, tb__rd_records},
    /* 2.1: only files with a tensor descriptor hold it, and older readers refuse those by name */
    {TB__SEC_TENSORDESCS, TB__SEC_REQUIRED, 1u << TB__SEC_RECORDS, 0, tb__descs_size, tb__write_descs, tb__rd_descs},
    /* 2.2: optional; readers before it skip it and launch with the grids they are given */
    {TB__SEC_CALLS, 0, 1u << TB__SEC_RECORDS, 0, tb__calls_size, tb__write_calls, tb__rd_calls},
    /* 2.3: optional; readers before it skip it and still launch every kernel */
    {5u /* TB__SEC_PROGRAM */, 0, 1u << TB__SEC_RECORDS, 0, tb__program_size, tb__write_program, tb__rd_program},
    /* 2.4: several programs sharing one table of constants; optional as 5 is
       (a reader without it sees no program, and says so) */
    {6u /* TB__SEC_PROGRAMS */, 0, 1u << TB__SEC_RECORDS, 0, tb__programs_size, tb__write_programs, tb__rd_programs},
};
#define TB__SECTION_ROWS (sizeof tb__sections / sizeof tb__sections[0])

static const tb__section *tb__section_row(uint32_t type) {
    size_t i;
    for (i = 0; i < TB__SECTION_ROWS; i++)
        if (tb__sections[i].type == type) return &tb__sections[i];
    return NULL;
}
static uint32_t tb__section_count(const tb_bundle *b) {
    uint32_t n = 1; /* section 1 */
    size_t i;
    for (i = 1; i < TB__SECTION_ROWS; i++) n += tb__sections[i].always || tb__sections[i].size(b, 0) != 0;
    return n;
}
/* Every section after section 1, each framed, in row order. */
static void tb__write_sections(const tb_bundle *b, tb__sink *k) {
    size_t i;
    for (i = 1; i < TB__SECTION_ROWS; i++) {
        const tb__section *row = &tb__sections[i];
        size_t len = row->size(b, k->pos + TB__SECTION_HEADER);
        if (!len && !row->always) continue;
        tb__sink_u32(k, row->type);
        tb__sink_u32(k, row->flags);
        tb__sink_u64(k, len);
        row->write(b, k);
        tb__sink_align(k, 8);
    }
}

/* Walks the bundle once to size it; fails on sizes that overflow. */
static int tb__sizes(const tb_bundle *b, size_t *kernels_len, size_t *records_len, size_t *total) {
    size_t pos = TB__HEADER_SIZE + TB__SECTION_HEADER + 8, start = pos, s;
    uint32_t i, j;
    for (i = 0; i < b->kernel_count; i++) {
        const tb_kernel *k = &b->kernels[i];
        pos += tb__str_size(k->hash) + 8;
        for (j = 0; j < k->artifact_count; j++) {
            pos += tb__str_size(k->artifacts[j].name);
            if (k->artifacts[j].size > (uint64_t)(SIZE_MAX / 4)) return 0;
            if (!tb__add(pos, tb__blob_size(pos, k->artifacts[j].size), &pos)) return 0;
        }
    }
    *kernels_len = pos - start + 8;
    *records_len = tb__records_size(b, 0);
    for (i = 1; i < TB__SECTION_ROWS; i++) { /* the rows after section 1, framed and padded */
        size_t len = tb__sections[i].size(b, pos + TB__SECTION_HEADER);
        if (len || tb__sections[i].always) pos += TB__SECTION_HEADER + tb__pad8(len);
    }
    if (!tb__add(pos, TB__TRAILER_SIZE, &s)) return 0;
    *total = s;
    return 1;
}

static uint32_t tb__count_configs(const tb_bundle *b, uint32_t *params) {
    uint32_t i, j, n = 0;
    *params = 0;
    for (i = 0; i < b->record_count; i++) {
        n += b->records[i].config_count;
        for (j = 0; j < b->records[i].config_count; j++) *params += b->records[i].configs[j].param_count;
    }
    return n;
}

/* The header and section 1's header and counts: the first bytes of a
   bundle, which a streaming writer patches once the counts are known. */
#define TB__HEAD_SIZE (TB__HEADER_SIZE + TB__SECTION_HEADER + 8)
static void tb__head_bytes(unsigned char *h, size_t total, size_t klen, uint32_t kernels, uint32_t artifacts,
                           uint32_t sections) {
    memset(h, 0, TB__HEAD_SIZE);
    memcpy(h, tb__magic, 8);
    h[8] = TB_FORMAT_VERSION_MAJOR;
    h[10] = TB_FORMAT_VERSION_MINOR;
    tb__put64(h + 16, total);
    tb__put32(h + 24, sections);
    tb__put32(h + 32, TB__SEC_KERNELS);
    tb__put32(h + 36, TB__SEC_REQUIRED);
    tb__put64(h + 40, klen);
    tb__put32(h + 48, kernels);
    tb__put32(h + 52, artifacts);
}

static void tb__write_kernel(tb__sink *k, const tb_kernel *kn) {
    uint32_t j;
    tb__sink_str(k, kn->hash);
    tb__sink_u32(k, (uint32_t)kn->device);
    tb__sink_u32(k, kn->artifact_count);
    for (j = 0; j < kn->artifact_count; j++) {
        tb__sink_str(k, kn->artifacts[j].name);
        tb__sink_u64(k, kn->artifacts[j].size);
        tb__sink_align(k, 16);
        tb__sink_put(k, kn->artifacts[j].data, (size_t)kn->artifacts[j].size);
        tb__sink_align(k, 8);
    }
}

/* Section 3, when a config takes a tensor descriptor. */
static void tb__write_descs(const tb_bundle *b, tb__sink *k) {
    uint32_t i, j;
    uint32_t n = tb__count_descs(b), g = 0, d;
    tb__sink_u32(k, n);
    tb__sink_u32(k, 0);
    for (i = 0; i < b->record_count; i++)
        for (j = 0; j < b->records[i].config_count; j++, g++) {
            const tb_launch_config *c = &b->records[i].configs[j];
            uint32_t at = 0, q;
            for (d = 0; d < c->tensordesc_count; d++, at++) {
                const tb_tensordesc_meta *m = &c->tensordescs[d];
                while (c->arg_types[at] != 'T') at++;
                tb__sink_u32(k, g);
                tb__sink_u32(k, at);
                tb__sink_u32(k, m->tma);
                tb__sink_u32(k, m->rank);
                tb__sink_u32(k, m->swizzle);
                tb__sink_u32(k, m->elem_size);
                tb__sink_u32(k, m->elem_type);
                tb__sink_u32(k, m->fp4_padded);
                for (q = 0; q < TB_MAX_TENSOR_RANK; q++) tb__sink_u32(k, q < m->rank ? m->block[q] : 0);
                tb__sink_zeros(k, 12);
            }
        }
}

/* Section 2's payload. */
static void tb__write_records(const tb_bundle *b, tb__sink *k) {
    uint32_t i, j, params, configs = tb__count_configs(b, &params);
    tb__sink_u32(k, b->record_count);
    tb__sink_u32(k, configs);
    tb__sink_u32(k, params);
    tb__sink_u32(k, 0);
    for (i = 0; i < b->record_count; i++) {
        const tb_launch_record *r = &b->records[i];
        tb__sink_str(k, r->cache_key);
        tb__sink_str(k, r->kernel_name);
        tb__sink_u32(k, r->config_count);
        tb__sink_u32(k, 0);
        for (j = 0; j < r->config_count; j++) {
            const tb_launch_config *c = &r->configs[j];
            uint32_t q;
            tb__sink_str(k, c->kernel_hash);
            tb__sink_str(k, c->function_name);
            tb__sink_str(k, c->binary_name);
            tb__sink_str(k, c->arg_types);
            tb__sink_str(k, c->arg_divisibility);
            tb__sink_u32(k, c->num_warps);
            tb__sink_u32(k, c->num_ctas);
            tb__sink_u32(k, c->shared_mem);
            tb__sink_u32(k, c->flags);
            tb__sink_u32(k, c->cluster_dims[0]);
            tb__sink_u32(k, c->cluster_dims[1]);
            tb__sink_u32(k, c->cluster_dims[2]);
            tb__sink_u32(k, c->param_count);
            tb__sink_u64(k, c->global_scratch.size);
            tb__sink_u32(k, c->global_scratch.align);
            tb__sink_u32(k, c->global_scratch.present);
            tb__sink_u64(k, c->profile_scratch.size);
            tb__sink_u32(k, c->profile_scratch.align);
            tb__sink_u32(k, c->profile_scratch.present);
            for (q = 0; q < c->param_count; q++) {
                tb__sink_str(k, c->params[q].name);
                tb__sink_u64(k, (uint64_t)c->params[q].value);
            }
        }
    }
}

/* Everything before the trailer, in one walk: the helper threads' walk. */
static void tb__write_body(const tb_bundle *b, tb__sink *k, size_t klen, size_t total) {
    unsigned char head[TB__HEAD_SIZE];
    uint32_t i, artifacts = 0;
    for (i = 0; i < b->kernel_count; i++) artifacts += b->kernels[i].artifact_count;
    tb__head_bytes(head, total, klen, b->kernel_count, artifacts, tb__section_count(b));
    tb__sink_put(k, head, sizeof head);
    for (i = 0; i < b->kernel_count; i++) tb__write_kernel(k, &b->kernels[i]);
    tb__write_sections(b, k);
    TB_ASSERT(k->failed || k->pos == total - TB__TRAILER_SIZE);
}

static void tb__sink_init(tb__sink *k, size_t lo, size_t hi) {
    memset(k, 0, sizeof *k);
    k->lo = lo;
    k->hi = hi;
    tb__xxh_init(&k->h);
}

typedef struct tb__block_job {
    const tb_bundle *b;
    size_t klen, rlen, total;
    tb__sink k;
} tb__block_job;

static void *tb__block_writer(void *arg) {
    tb__block_job *j = (tb__block_job *)arg;
    tb__write_body(j->b, &j->k, j->klen, j->total);
    return NULL;
}

/* The bytes before the trailer, split into windows of whole blocks, one
   sink each, windows [first, threads) on threads of their own. */
typedef struct tb__blocks {
    tb__block_job jobs[TB__MAX_THREADS];
    tb__team team;
    uint64_t *digests;
    size_t count;
    unsigned threads, first;
} tb__blocks;

static tb_result tb__blocks_start(tb__blocks *w, const tb__ctx *c, const tb_bundle *b, unsigned char *mem,
                                  size_t klen, size_t rlen, size_t total, unsigned first, tb_error *err) {
    size_t body = total - TB__TRAILER_SIZE;
    unsigned t;
    w->count = tb__chunk_count(body);
    w->threads = tb__thread_count(0, w->count, TB__CHUNKS_PER_THREAD, TB__MAX_THREADS);
    w->digests = (uint64_t *)tb__alloc(c, w->count * sizeof(uint64_t));
    if (!w->digests) return TB__OOM(err);
    for (t = 0; t < w->threads; t++) {
        tb__block_job *j = &w->jobs[t];
        size_t lo = w->count * t / w->threads * TB__CHUNK, hi = w->count * (t + 1) / w->threads * TB__CHUNK;
        if (hi > body) hi = body;
        j->b = b, j->klen = klen, j->rlen = rlen, j->total = total;
        tb__sink_init(&j->k, lo, hi);
        j->k.mem = mem;
        j->k.digests = w->digests;
    }
    w->first = w->threads == 1 ? 1 : first; /* one window is not worth a thread */
    tb__spawn(&w->team, w->first, w->threads, tb__block_writer, w->jobs, sizeof w->jobs[0]);
    return tb_ok;
}

/* ---- the writer: the one owner of a bundle's bytes ---- */
/* Every writer of a bundle (write_memory, write_callback, write_file and
   tb_pack_cache) goes through begin, one kernel call per kernel in order,
   and finish, which writes the records, the tensor descriptors and the
   trailer with its checksum. Two ways to the checksum:
   - a whole bundle (tb__writer_begin's `whole`): sizes and counts are known
     before the first byte, so the header is final at once, and other
     threads walk the same bundle, each hashing (and for memory, copying)
     its own window of blocks while this thread writes;
   - a stream (whole NULL, tb_pack_cache): kernels arrive in batches and
     counts are known only at the end, so the header goes out as zeros and
     finish patches it, then hashes the output read back (from the page
     cache) on several threads and patches the trailer. The output must
     then be able to patch and read back (a file). */
typedef struct tb__out {
    unsigned char *mem;         /* the whole bundle's memory (whole only), or: */
    tb_write_fn write;          /* the bytes, in order */
    void *user;
    /* a stream's: overwrite n bytes at `at`; 0 or an errno */
    int (*patch)(void *user, size_t at, const void *data, size_t n);
    tb__read_fn read;           /* a stream's: read back */
    const char *name;           /* for errors: the file, or NULL */
    const int *write_errno;     /* where write leaves its errno, or NULL */
} tb__out;

typedef struct tb__writer {
    const tb__ctx *c;
    const tb__out *out;
    const tb_bundle *whole;
    tb__sink k;                 /* this thread's walk */
    tb__blocks blocks;          /* whole: the windows hashed elsewhere */
    size_t klen, rlen, total;   /* whole: known at begin */
    uint32_t kernels;
    uint64_t artifacts;
    int io;                     /* errno of a failed patch or read back */
    unsigned threads;           /* a stream's read-back: 0 auto, else at most this many */
} tb__writer;

/* Ends a writer that will not finish (its output is thrown away). */
static void tb__writer_end(tb__writer *w) {
    if (w->whole) {
        tb__join(&w->blocks.team);
        tb__free(w->c, w->blocks.digests);
    }
    tb__free(w->c, w->k.stage);
}

/* whole: the bundle the kernel calls will come from, checked unique and
   complete by the caller; NULL: a stream. On failure nothing is left to
   end. */
static tb_result tb__writer_begin(tb__writer *w, const tb__ctx *c, const tb__out *out, const tb_bundle *whole,
                                  tb_error *err) {
    unsigned char head[TB__HEAD_SIZE];
    tb_result r;
    memset(w, 0, sizeof *w);
    w->c = c, w->out = out, w->whole = whole;
    if (whole && !tb__sizes(whole, &w->klen, &w->rlen, &w->total))
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "the bundle's size overflows size_t");
    tb__sink_init(&w->k, 0, whole ? w->total : (size_t)-1);
    if (!out->mem) {
        w->k.fn = out->write, w->k.user = out->user;
        if (!(w->k.stage = (unsigned char *)tb__alloc(c, TB__STAGE))) return TB__OOM(err);
    }
    if (whole) {
        /* memory: this thread copies and hashes window 0, threads the rest;
           a callback: this thread writes everything, threads hash */
        r = tb__blocks_start(&w->blocks, c, whole, out->mem, w->klen, w->rlen, w->total, out->mem ? 1 : 0, err);
        if (r != tb_ok) {
            tb__free(c, w->k.stage);
            return r;
        }
        if (out->mem) w->k = w->blocks.jobs[0].k, w->blocks.first = 0; /* window 0 is this walk */
    }
    {
        uint32_t i, artifacts = 0;
        if (whole) for (i = 0; i < whole->kernel_count; i++) artifacts += whole->kernels[i].artifact_count;
        if (whole) tb__head_bytes(head, w->total, w->klen, whole->kernel_count, artifacts, tb__section_count(whole));
        else memset(head, 0, sizeof head); /* placeholders until the counts are known */
    }
    tb__sink_put(&w->k, head, sizeof head);
    return tb_ok;
}

static void tb__writer_kernel(tb__writer *w, const tb_kernel *k) {
    tb__write_kernel(&w->k, k);
    w->kernels++;
    w->artifacts += k->artifact_count;
}

/* A stream's checksum: the body read back on up to TB__MAX_THREADS threads. */
static int tb__writer_readback(tb__writer *w, size_t size, uint64_t *sum) {
    unsigned char *bufs[TB__MAX_THREADS];
    unsigned t, n = tb__thread_count(0, tb__chunk_count(size), TB__CHUNKS_PER_THREAD,
                                     w->threads ? w->threads : TB__MAX_THREADS);
    int e;
    for (t = 0; t < n; t++)
        if (!(bufs[t] = (unsigned char *)tb__alloc(w->c, TB__READ_PIECE))) break;
    e = t ? tb__checksum_blocks(NULL, w->out->read, w->out->user, bufs, t, size, sum) : ENOMEM;
    while (t) tb__free(w->c, bufs[--t]);
    return e;
}

/* Writes recs' records (a stream's, or the whole bundle itself), the
   tensor descriptors and the trailer, and ends the writer whatever
   happens. *total: the bundle's size. tb_err_io with w->io (or 0: the
   write callback failed) when the output failed. */
static tb_result tb__writer_finish(tb__writer *w, const tb_bundle *recs, size_t *total, tb_error *err) {
    unsigned char b[TB__HEAD_SIZE];
    uint64_t sum = 0;
    size_t klen = 0, rlen = w->rlen, dummy;
    tb_result r = tb_ok;
    if (!w->whole) {
        if (w->kernels > TB_MAX_KERNELS || w->artifacts > 0xffffffffu)
            r = tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "%u kernels or %llu files: over the format's limits",
                         w->kernels, (unsigned long long)w->artifacts);
        else if ((r = tb__check_unique(recs, 0, 1, err)) != tb_ok) {
        } else if (!tb__sizes(recs, &dummy, &rlen, &dummy))
            r = tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "the launch records' size overflows size_t");
        klen = w->k.pos - TB__HEADER_SIZE - TB__SECTION_HEADER;
    }
    if (r == tb_ok) tb__write_sections(recs, &w->k);
    *total = w->k.pos + TB__TRAILER_SIZE;
    if (r == tb_ok && w->whole) {
        TB_ASSERT(w->k.failed || *total == w->total);
        tb__join(&w->blocks.team);
        if (w->blocks.first) tb__block_writer(&w->blocks.jobs[0]); /* a callback's single window */
        w->blocks.team.n = 0;   /* joined */
        sum = tb__chunk_root(w->blocks.digests, w->blocks.count);
        tb__put64(b, sum);
        if (w->out->mem) memcpy(w->out->mem + *total - TB__TRAILER_SIZE, b, TB__TRAILER_SIZE);
        else tb__sink_put(&w->k, b, TB__TRAILER_SIZE);
    } else if (r == tb_ok) {
        memset(b, 0, TB__TRAILER_SIZE);
        tb__sink_put(&w->k, b, TB__TRAILER_SIZE);
    }
    if (w->k.stage) tb__sink_flush(&w->k);
    if (r == tb_ok && w->k.failed)
        r = tb__fail(err, tb_err_io, NULL, w->out->name, -1, w->out->write_errno ? *w->out->write_errno : 0,
                     "writing the bundle failed");
    if (r == tb_ok && !w->whole) {
        tb__head_bytes(b, *total, klen, w->kernels, (uint32_t)w->artifacts, tb__section_count(recs));
        if ((w->io = w->out->patch(w->out->user, 0, b, TB__HEAD_SIZE)) != 0)
            r = tb__fail(err, tb_err_io, NULL, w->out->name, -1, w->io, "writing the header failed");
        else if ((w->io = tb__writer_readback(w, *total - TB__TRAILER_SIZE, &sum)) != 0)
            r = tb__fail(err, tb_err_io, NULL, w->out->name, -1, w->io,
                         "reading the bundle back for its checksum failed");
        else {
            tb__put64(b, sum);
            if ((w->io = w->out->patch(w->out->user, *total - TB__TRAILER_SIZE, b, TB__TRAILER_SIZE)) != 0)
                r = tb__fail(err, tb_err_io, NULL, w->out->name, -1, w->io, "writing the checksum failed");
        }
    }
    tb__writer_end(w);
    return r;
}

/* The whole bundle b through out. */
static tb_result tb__write_whole(const tb_bundle *b, const tb__out *out, tb_error *err) {
    tb__writer w;
    size_t total;
    uint32_t i;
    tb_result r;
    if ((r = tb__writer_begin(&w, &b->ctx, out, b, err)) != tb_ok) return r;
    for (i = 0; i < b->kernel_count; i++) tb__writer_kernel(&w, &b->kernels[i]);
    return tb__writer_finish(&w, b, &total, err);
}

TBDEF tb_result tb_bundle_write_memory(const tb_bundle *b, void *buffer, size_t cap, size_t *out_size,
                                       tb_error *err) {
    size_t klen, rlen, total;
    tb__out out;
    tb_result r;
    if (!b) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle is NULL");
    if ((r = tb__check_unique(b, 1, 1, err)) != tb_ok) return r;
    if (!tb__sizes(b, &klen, &rlen, &total))
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "the bundle's size overflows size_t");
    if (out_size) *out_size = total;
    if (buffer && (r = tb__check_source(b, err)) != tb_ok) return r;
    if (!buffer) return tb_ok;
    if (cap < total)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "buffer of %zu bytes, %zu needed", cap, total);
    memset(&out, 0, sizeof out);
    out.mem = (unsigned char *)buffer;
    return tb__write_whole(b, &out, err);
}

/* The callback gets the bytes in order on the calling thread while other
   threads hash the blocks, so writing costs max(write, hash), not their
   sum (a bundle of one thread's worth of blocks, under 16 MiB, is hashed
   after the write, on this thread). */
TBDEF tb_result tb_bundle_write_callback(const tb_bundle *b, tb_write_fn fn, void *user, tb_error *err) {
    tb__out out;
    tb_result r;
    if (!b || !fn) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle or callback is NULL");
    if ((r = tb__check_unique(b, 1, 1, err)) != tb_ok) return r;
    if ((r = tb__check_source(b, err)) != tb_ok) return r;
    memset(&out, 0, sizeof out);
    out.write = fn;
    out.user = user;
    r = tb__write_whole(b, &out, err);
    if (r == tb_err_io) return tb__fail(err, tb_err_io, NULL, NULL, -1, 0, "the write callback reported a failure");
    return r;
}

/* ---- reader ---- */
struct tb__cur {
    const unsigned char *base;
    size_t pos, end;        /* end: the current section's end */
    tb_error *err;
    const char *kernel;     /* for error context */
    /* Strings are copied here before they are checked when the bytes are
       not the bundle's own (a caller's view, a mapped file): another
       process may rewrite them after the check, and a name that became
       "../x" then would decide a path. NULL: point into base. */
    tb_bundle *own;
    /* A mapped file is read through its descriptor, never through base
       (a file truncated under the mapping would fault): fd >= 0, and
       every byte read comes from win, a window of the file refilled with
       pread; base then only positions the views of payloads. */
    int fd;
    unsigned char *win;
    size_t win_at, win_len;
};
/* the window holds the longest string a field may be (its limit + 1),
   whatever limits a build sets */
#define TB__WMAX(a, b) ((size_t)(a) > (size_t)(b) ? (size_t)(a) : (size_t)(b))
#define TB__WINDOW TB__WMAX(TB__WMAX((size_t)256 << 10, (size_t)TB_MAX_STRING_LENGTH + 1), \
                            TB__WMAX((size_t)TB_MAX_ARGS + 1, (size_t)TB_MAX_NAME_LENGTH + 1))
#define TB__REFILL ((size_t)4096)

/* n bytes at c->pos (n <= TB__WINDOW, within the input), or NULL with an
   error: a file that no longer holds them changed since it was opened. */
static const unsigned char *tb__at(tb__cur *c, size_t n) {
    size_t got = 0, want;
    int e = 0;
    if (c->fd < 0) return c->base + c->pos;
    if (n > TB__WINDOW) { /* no field is longer; a guard, not a path */
        tb__fail(c->err, tb_err_limit, c->kernel, NULL, (long long)c->pos, 0, "a field of %zu bytes", n);
        return NULL;
    }
    if (c->pos >= c->win_at && n <= c->win_len && c->pos - c->win_at <= c->win_len - n)
        return c->win + (c->pos - c->win_at);
    /* a few KiB: the structure's fields sit between payloads, which are
       only skipped, so a large refill would read the payloads a second
       time (the checksum read them once) */
    want = n > TB__REFILL ? n : TB__REFILL; /* <= TB__WINDOW */
    c->win_at = c->pos, c->win_len = 0;
    while (got < want) {
        ssize_t r = pread(c->fd, c->win + got, want - got, (off_t)(c->pos + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) e = errno;
        if (r <= 0) break; /* the file's end: the checks above bound what is asked */
        got += (size_t)r;
    }
    c->win_len = got;
    if (got < n) {
        tb__fail(c->err, tb_err_io, c->kernel, NULL, (long long)c->pos, e,
                 "the bundle file no longer holds its bytes (truncated or replaced while it was read?)");
        return NULL;
    }
    return c->win;
}

static tb_result tb__need(tb__cur *c, size_t n, const char *what) {
    if (n > c->end - c->pos)
        return tb__fail(c->err, tb_err_truncated, c->kernel, NULL, (long long)c->pos, 0,
                        "%s needs %zu bytes, %zu remain in the section", what, n, c->end - c->pos);
    return tb_ok;
}
static tb_result tb__rd_u32(tb__cur *c, uint32_t *v, const char *what) {
    const unsigned char *q;
    if (tb__need(c, 4, what)) return tb_err_truncated;
    if (!(q = tb__at(c, 4))) return tb_err_io;
    *v = tb__le32(q);
    c->pos += 4;
    return tb_ok;
}
static tb_result tb__rd_u64(tb__cur *c, uint64_t *v, const char *what) {
    const unsigned char *q;
    if (tb__need(c, 8, what)) return tb_err_truncated;
    if (!(q = tb__at(c, 8))) return tb_err_io;
    *v = tb__le64(q);
    c->pos += 8;
    return tb_ok;
}
static tb_result tb__rd_zeros(tb__cur *c, size_t align, const char *what) {
    size_t n = (align - (c->pos % align)) % align, i;
    const unsigned char *q;
    if (tb__need(c, n, what)) return tb_err_truncated;
    if (!n) return tb_ok;
    if (!(q = tb__at(c, n))) return tb_err_io;
    for (i = 0; i < n; i++)
        if (q[i])
            return tb__fail(c->err, tb_err_malformed, c->kernel, NULL, (long long)(c->pos + i), 0,
                            "padding after %s is not zero", what);
    c->pos += n;
    return tb_ok;
}
/* A blob (FORMAT.md's conventions): a u64 length, zeros to 16, the bytes,
   zeros to 8. The bytes stay where they are (a view into the input, never
   read here, so a payload of a mapped file is not touched), 16-byte
   aligned for the driver: the payload path of artifacts, and of any
   section that carries bytes. */
static tb_result tb__rd_blob(tb__cur *c, uint64_t max, const char *max_name, const char *kernel, const char *name,
                             const void **data, uint64_t *size) {
    size_t at = c->pos;
    tb_result r;
    if ((r = tb__rd_u64(c, size, "blob size")) != tb_ok) return r;
    if (*size > max)
        return tb__fail(c->err, tb_err_limit, kernel, name, (long long)at, 0, "a blob of %llu bytes, over %s",
                        (unsigned long long)*size, max_name);
    if ((r = tb__rd_zeros(c, 16, "blob size")) != tb_ok) return r;
    if (*size > (uint64_t)(c->end - c->pos))
        return tb__fail(c->err, tb_err_truncated, kernel, name, (long long)at, 0, "a blob of %llu bytes, %zu remain",
                        (unsigned long long)*size, c->end - c->pos);
    *data = c->base + c->pos;
    c->pos += (size_t)*size;
    return tb__rd_zeros(c, 8, "blob data");
}

/* A length-prefixed, NUL-terminated string; max bounds the length. */
static tb_result tb__rd_str(tb__cur *c, const char **out, size_t max, const char *what) {
    uint32_t n;
    size_t at = c->pos;
    tb_result r;
    if ((r = tb__rd_u32(c, &n, what)) != tb_ok) return r;
    if (n > max)
        return tb__fail(c->err, tb_err_limit, c->kernel, NULL, (long long)at, 0, "%s is %u bytes long, limit %zu",
                        what, n, max);
    if (tb__need(c, (size_t)n + 1, what)) return tb_err_truncated;
    if (c->own || c->fd >= 0) {
        /* copy first, then check the copy: the source may change meanwhile */
        const unsigned char *q = tb__at(c, (size_t)n + 1);
        char *s;
        if (!q) return tb_err_io;
        if (!(s = (char *)tb__arena_alloc_aligned(&c->own->ctx, &c->own->arena, (size_t)n + 1, 1)))
            return TB__OOM(c->err);
        memcpy(s, q, (size_t)n + 1);
        *out = s;
    } else {
        *out = (const char *)(c->base + c->pos);
    }
    if ((*out)[n] != 0 || memchr(*out, 0, n))
        return tb__fail(c->err, tb_err_malformed, c->kernel, NULL, (long long)c->pos, 0,
                        "%s is not NUL-terminated or holds a NUL", what);
    c->pos += (size_t)n + 1;
    return tb__rd_zeros(c, 8, what);
}
static tb_result tb__rd_name(tb__cur *c, const char **out, const char *what) {
    size_t at = c->pos;
    tb_result r = tb__rd_str(c, out, TB_MAX_NAME_LENGTH, what);
    if (r) return r;
    if (!tb__valid_name(*out, strlen(*out)))
        return tb__fail(c->err, tb_err_bad_name, c->kernel, NULL, (long long)at, 0,
                        "%s \"%.80s\" is not a safe file name", what, *out);
    return tb_ok;
}
static tb_result tb__rd_count(tb__cur *c, uint32_t *v, uint32_t limit, size_t min_item, const char *what) {
    size_t at = c->pos, need;
    tb_result r;
    if ((r = tb__rd_u32(c, v, what)) != tb_ok) return r;
    if (*v > limit)
        return tb__fail(c->err, tb_err_limit, c->kernel, NULL, (long long)at, 0, "%s %u is over the limit %u", what,
                        *v, limit);
    if (!tb__mul(*v, min_item, &need) || need > c->end - c->pos)
        return tb__fail(c->err, tb_err_truncated, c->kernel, NULL, (long long)at, 0,
                        "%s %u cannot fit in the %zu bytes that remain", what, *v, c->end - c->pos);
    return tb_ok;
}

static tb_result tb__rd_kernels(tb_bundle *b, tb__cur *c) {
    uint32_t nk, na, i, j, used = 0;
    tb_result r;
    if ((r = tb__rd_count(c, &nk, TB_MAX_KERNELS, 16, "kernel count")) != tb_ok) return r;
    if ((r = tb__rd_count(c, &na, 0xffffffffu, 16, "artifact total")) != tb_ok) return r;
    if (nk) {
        b->kernels = (tb_kernel *)tb__alloc(&b->ctx, (size_t)nk * sizeof(tb_kernel));
        b->slots = (tb__kernel_slot *)tb__alloc(&b->ctx, (size_t)nk * sizeof(tb__kernel_slot));
        if (!b->kernels || !b->slots) return TB__OOM(c->err);
        memset(b->slots, 0, (size_t)nk * sizeof(tb__kernel_slot));
        b->kernel_cap = b->slot_cap = nk;
    }
    if (na) {
        b->artifact_block = (tb_artifact *)tb__alloc(&b->ctx, (size_t)na * sizeof(tb_artifact));
        if (!b->artifact_block) return TB__OOM(c->err);
    }
    for (i = 0; i < nk; i++) {
        tb_kernel *k = &b->kernels[i];
        uint32_t dev, cnt;
        c->kernel = NULL;
        if ((r = tb__rd_name(c, &k->hash, "kernel hash")) != tb_ok) return r;
        c->kernel = k->hash;
        if ((r = tb__rd_u32(c, &dev, "kernel device")) != tb_ok) return r;
        if ((r = tb__rd_count(c, &cnt, TB_MAX_ARTIFACTS_PER_KERNEL, 16, "artifact count")) != tb_ok) return r;
        if (cnt > na - used)
            return tb__fail(c->err, tb_err_malformed, k->hash, NULL, (long long)(c->pos - 4), 0,
                            "kernels hold more artifacts than the section's total %u", na);
        k->device = (int32_t)dev;
        k->artifact_count = 0;
        k->artifacts = b->artifact_block ? b->artifact_block + used : NULL; /* no NULL + 0: UB */
        b->kernel_count = i + 1;
        for (j = 0; j < cnt; j++) {
            tb_artifact *a = &b->artifact_block[used + j];
            uint64_t size;
            uint32_t q;
            if ((r = tb__rd_name(c, &a->name, "artifact name")) != tb_ok) return r;
            for (q = 0; q < j; q++)
                if (strcmp(b->artifact_block[used + q].name, a->name) == 0)
                    return tb__fail(c->err, tb_err_malformed, k->hash, a->name, (long long)c->pos, 0,
                                    "the kernel holds two files of this name");
            if ((r = tb__rd_blob(c, TB_MAX_ARTIFACT_SIZE, "TB_MAX_ARTIFACT_SIZE", k->hash, a->name, &a->data, &size)) !=
                tb_ok)
                return r;
            a->size = size;
            k->artifact_count = j + 1;
        }
        used += cnt;
    }
    if (used != na)
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, -1, 0, "artifact total %u, but kernels hold %u", na,
                        used);
    c->kernel = NULL;
    return tb_ok;
}

static tb_result tb__rd_scratch(tb__cur *c, tb_scratch *s) {
    tb_result r;
    if ((r = tb__rd_u64(c, &s->size, "scratch size")) != tb_ok) return r;
    if ((r = tb__rd_u32(c, &s->align, "scratch align")) != tb_ok) return r;
    return tb__rd_u32(c, &s->present, "scratch present");
}

static tb_result tb__rd_records(tb_bundle *b, tb__cur *c) {
    uint32_t nr, nc, np, pad, i, j, q, cu = 0, pu = 0;
    tb_result r;
    if ((r = tb__rd_count(c, &nr, TB_MAX_RECORDS, 24, "record count")) != tb_ok) return r;
    if ((r = tb__rd_count(c, &nc, 0xffffffffu, 104, "config total")) != tb_ok) return r;
    if ((r = tb__rd_count(c, &np, 0xffffffffu, 16, "param total")) != tb_ok) return r;
    if ((r = tb__rd_u32(c, &pad, "reserved")) != tb_ok) return r;
    if (pad)
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)c->pos - 4, 0, "a reserved field is not zero");
    if (nr) {
        b->records = (tb_launch_record *)tb__alloc(&b->ctx, (size_t)nr * sizeof(tb_launch_record));
        if (!b->records) return TB__OOM(c->err);
        b->record_cap = nr;
    }
    if (nc) {
        b->config_block = (tb_launch_config *)tb__alloc(&b->ctx, (size_t)nc * sizeof(tb_launch_config));
        if (!b->config_block) return TB__OOM(c->err);
    }
    if (np) {
        b->param_block = (tb_config_param *)tb__alloc(&b->ctx, (size_t)np * sizeof(tb_config_param));
        if (!b->param_block) return TB__OOM(c->err);
    }
    for (i = 0; i < nr; i++) {
        tb_launch_record *rec = &b->records[i];
        uint32_t ncf;
        size_t at;
        c->kernel = NULL;
        if ((r = tb__rd_str(c, &rec->cache_key, TB_MAX_STRING_LENGTH, "record cache key")) != tb_ok) return r;
        c->kernel = rec->cache_key;
        if ((r = tb__rd_str(c, &rec->kernel_name, TB_MAX_STRING_LENGTH, "record kernel name")) != tb_ok) return r;
        at = c->pos;
        if ((r = tb__rd_count(c, &ncf, TB_MAX_CONFIGS_PER_RECORD, 104, "config count")) != tb_ok) return r;
        if ((r = tb__rd_u32(c, &pad, "reserved")) != tb_ok) return r;
        if (pad)
            return tb__fail(c->err, tb_err_malformed, rec->cache_key, NULL, (long long)c->pos - 4, 0,
                            "a reserved field is not zero");
        if (!*rec->cache_key || !*rec->kernel_name) /* as a builder refuses them (FORMAT.md [R-strings]) */
            return tb__fail(c->err, tb_err_bad_name, rec->cache_key, NULL, (long long)at, 0,
                            "record has an empty key or name");
        if (ncf == 0 || ncf > nc - cu)
            return tb__fail(c->err, tb_err_malformed, rec->cache_key, NULL, (long long)at, 0,
                            "record has no configs, or more configs than the total");
        rec->configs = b->config_block + cu;
        rec->call = NULL;
        rec->config_count = ncf;
        for (j = 0; j < ncf; j++) {
            tb_launch_config *cf = &b->config_block[cu + j];
            at = c->pos;
            if ((r = tb__rd_str(c, &cf->kernel_hash, TB_MAX_NAME_LENGTH, "config kernel hash")) ||
                (r = tb__rd_str(c, &cf->function_name, TB_MAX_STRING_LENGTH, "config function name")) ||
                (r = tb__rd_str(c, &cf->binary_name, TB_MAX_NAME_LENGTH, "config binary name")) ||
                (r = tb__rd_str(c, &cf->arg_types, TB_MAX_ARGS, "config arg types")) ||
                (r = tb__rd_str(c, &cf->arg_divisibility, TB_MAX_ARGS, "config arg divisibility")) ||
                (r = tb__rd_u32(c, &cf->num_warps, "num_warps")) || (r = tb__rd_u32(c, &cf->num_ctas, "num_ctas")) ||
                (r = tb__rd_u32(c, &cf->shared_mem, "shared")) || (r = tb__rd_u32(c, &cf->flags, "flags")) ||
                (r = tb__rd_u32(c, &cf->cluster_dims[0], "cluster")) ||
                (r = tb__rd_u32(c, &cf->cluster_dims[1], "cluster")) ||
                (r = tb__rd_u32(c, &cf->cluster_dims[2], "cluster")) ||
                (r = tb__rd_count(c, &cf->param_count, TB_MAX_PARAMS_PER_CONFIG, 16, "param count")) ||
                (r = tb__rd_scratch(c, &cf->global_scratch)) || (r = tb__rd_scratch(c, &cf->profile_scratch)))
                return r;
            cf->tensordesc_count = 0; /* section 3, if any, fills these in */
            cf->tensordescs = NULL;
            cf->grid = NULL; /* section 4, if any */
            if (cf->param_count > np - pu)
                return tb__fail(c->err, tb_err_malformed, rec->cache_key, NULL, (long long)at, 0,
                                "configs hold more params than the total %u", np);
            cf->params = cf->param_count ? b->param_block + pu : NULL;
            for (q = 0; q < cf->param_count; q++) {
                tb_config_param *p = &b->param_block[pu + q];
                uint64_t v;
                if ((r = tb__rd_str(c, &p->name, TB_MAX_NAME_LENGTH, "param name")) != tb_ok) return r;
                if ((r = tb__rd_u64(c, &v, "param value")) != tb_ok) return r;
                p->value = (int64_t)v;
            }
            pu += cf->param_count;
            if ((r = tb__check_config(cf, rec->cache_key, (long long)at, c->err)) != tb_ok) return r;
        }
        cu += ncf;
        b->record_count = i + 1;
    }
    if (cu != nc || pu != np)
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, -1, 0, "config or param totals do not match the records");
    c->kernel = NULL;
    return tb_ok;
}

/* Section 3: one entry per 'T' argument of every config, in config order
   and then argument order, so that each config's descriptors are one
   slice of the block. */
static tb_result tb__rd_descs(tb_bundle *b, tb__cur *c) {
    uint32_t n, pad, i, q, v, r = 0, j = 0, arg = 0, gbase = 0;
    tb_result res = tb_ok;
    if ((res = tb__rd_count(c, &n, 0xffffffffu, TB__DESC_ENTRY, "tensor descriptor count")) != tb_ok) return res;
    if ((res = tb__rd_u32(c, &pad, "reserved")) != tb_ok) return res;
    if (pad)
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)c->pos - 4, 0, "a reserved field is not zero");
    if (n && !(b->desc_block = (tb_tensordesc_meta *)tb__alloc(&b->ctx, (size_t)n * sizeof *b->desc_block)))
        return TB__OOM(c->err);
    for (i = 0; i < n; i++) {
        tb_tensordesc_meta *m = &b->desc_block[i];
        uint32_t cfg, at_arg;
        size_t at = c->pos;
        tb_launch_config *cf = NULL;
        if ((res = tb__rd_u32(c, &cfg, "config index")) || (res = tb__rd_u32(c, &at_arg, "argument index")) ||
            (res = tb__rd_u32(c, &m->tma, "tma")) || (res = tb__rd_u32(c, &m->rank, "rank")) ||
            (res = tb__rd_u32(c, &m->swizzle, "swizzle")) || (res = tb__rd_u32(c, &m->elem_size, "element size")) ||
            (res = tb__rd_u32(c, &m->elem_type, "element type")) || (res = tb__rd_u32(c, &m->fp4_padded, "fp4")))
            return res;
        for (q = 0; q < TB_MAX_TENSOR_RANK; q++)
            if ((res = tb__rd_u32(c, &m->block[q], "block")) != tb_ok) return res;
        for (q = m->rank; q < TB_MAX_TENSOR_RANK; q++)
            if (m->block[q])
                return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)at, 0,
                                "tensor descriptor entry %u: block entries past its rank are not zero", i);
        for (q = 0; q < 3; q++) {
            if ((res = tb__rd_u32(c, &v, "reserved")) != tb_ok) return res;
            if (v)
                return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)c->pos - 4, 0,
                                "a reserved field is not zero");
        }
        /* the next 'T' of the configs, from where the last entry stopped */
        for (; r < b->record_count; gbase += b->records[r].config_count, r++, j = 0, arg = 0) {
            for (; j < b->records[r].config_count; j++, arg = 0) {
                cf = (tb_launch_config *)&b->records[r].configs[j];
                while (cf->arg_types[arg] && cf->arg_types[arg] != 'T') arg++;
                if (cf->arg_types[arg]) break;
            }
            if (j < b->records[r].config_count) break;
        }
        if (r >= b->record_count || cfg != gbase + j || at_arg != arg)
            return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)at, 0,
                            "tensor descriptor entry %u names config %u, argument %u, where the next 'T' argument is "
                            "elsewhere (entries go in config and argument order, one per 'T')", i, cfg, at_arg);
        if (!cf->tensordesc_count) cf->tensordescs = m;
        if (cf->tensordesc_count >= TB_MAX_TENSORDESCS)
            return tb__fail(c->err, tb_err_limit, NULL, NULL, (long long)at, 0,
                            "more than TB_MAX_TENSORDESCS descriptors");
        cf->tensordesc_count++;
        arg++;
    }
    return tb_ok;
}

/* Section 4 (2.2): call info and grid rules, attached to the records of
   section 2, which must come first. Everything it holds is checked as a
   builder's would be (tb__check_call, tb__check_grid). */
static tb_result tb__rd_u32_list(tb__cur *c, tb_bundle *b, uint32_t n, const uint32_t **out, const char *what) {
    uint32_t *v, i;
    tb_result r;
    *out = NULL;
    if (!n) return tb_ok;
    if (!(v = (uint32_t *)tb__arena_alloc(&b->ctx, &b->arena, (size_t)n * 4))) return TB__OOM(c->err);
    for (i = 0; i < n; i++)
        if ((r = tb__rd_u32(c, &v[i], what)) != tb_ok) return r;
    *out = v;
    return tb_ok;
}
static tb_result tb__rd_calls(tb_bundle *b, tb__cur *c) {
    uint32_t n, pad, e, prev = 0, i, j, d, q, v[8];
    tb_result r;
    if ((r = tb__rd_count(c, &n, TB_MAX_RECORDS, TB__CALL_ENTRY, "call info count")) != tb_ok) return r;
    if ((r = tb__rd_u32(c, &pad, "reserved")) != tb_ok) return r;
    if (pad)
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)c->pos - 4, 0, "a reserved field is not zero");
    for (e = 0; e < n; e++) {
        size_t at = c->pos;
        tb_launch_record *rec;
        for (i = 0; i < 8; i++)
            if ((r = tb__rd_u32(c, &v[i], "call info entry")) != tb_ok) return r;
        /* v: record, arg names, mutated, reset, key, has call, has grids, reserved */
        if (v[0] >= b->record_count || (e && v[0] <= prev) || v[5] > 1 || v[6] > 1 || v[7] || (!v[5] && !v[6]) ||
            (!v[5] && (v[1] || v[2] || v[3] || v[4])))
            return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)at, 0,
                            "call info entry %u: record %u out of order or range, or flags or reserved fields wrong", e,
                            v[0]);
        if (v[1] > TB_MAX_ARGS || v[2] > TB_MAX_ARGS || v[3] > TB_MAX_ARGS || v[4] > TB_MAX_ARGS)
            return tb__fail(c->err, tb_err_limit, NULL, NULL, (long long)at, 0,
                            "call info entry %u: a count over TB_MAX_ARGS", e);
        prev = v[0];
        rec = &b->records[v[0]];
        c->kernel = rec->cache_key;
        if (v[5]) {
            tb_call_info *ci = (tb_call_info *)tb__arena_alloc(&b->ctx, &b->arena, sizeof *ci);
            const char **names = NULL;
            size_t need;
            if (!ci) return TB__OOM(c->err);
            memset(ci, 0, sizeof *ci);
            if (!tb__mul((size_t)v[1], 8, &need) || need > c->end - c->pos)
                return tb__fail(c->err, tb_err_truncated, rec->cache_key, NULL, (long long)at, 0,
                                "%u argument names cannot fit in the bytes that remain", v[1]);
            if (v[1] && !(names = (const char **)tb__arena_alloc(&b->ctx, &b->arena, (size_t)v[1] * sizeof *names)))
                return TB__OOM(c->err);
            for (i = 0; i < v[1]; i++)
                if ((r = tb__rd_str(c, &names[i], TB_MAX_NAME_LENGTH, "argument name")) != tb_ok) return r;
            ci->arg_count = v[1], ci->arg_names = names;
            ci->mutated_count = v[2], ci->reset_count = v[3], ci->key_count = v[4];
            if ((r = tb__rd_u32_list(c, b, v[2], &ci->mutated, "mutated index")) ||
                (r = tb__rd_u32_list(c, b, v[3], &ci->reset, "reset index")) ||
                (r = tb__rd_u32_list(c, b, v[4], &ci->key, "key index")) || (r = tb__rd_zeros(c, 8, "index lists")))
                return r;
            if ((r = tb__check_call(ci, rec, (long long)at, c->err)) != tb_ok) return r;
            rec->call = ci;
        }
        if (v[6])
            for (j = 0; j < rec->config_count; j++) {
                tb_launch_config *cf = (tb_launch_config *)&rec->configs[j];
                uint32_t h[4];
                tb_grid_rule *g;
                size_t gat = c->pos, total = 0;
                for (i = 0; i < 4; i++)
                    if ((r = tb__rd_u32(c, &h[i], "grid rule head")) != tb_ok) return r;
                if (h[3] > 1 || (!h[3] && (h[0] || h[1] || h[2])))
                    return tb__fail(c->err, tb_err_malformed, rec->cache_key, NULL, (long long)gat, 0,
                                    "config %u: a grid rule head that is neither absent nor present", j);
                if (!h[3]) continue;
                for (d = 0; d < 3; d++) {
                    if (h[d] == 0 || h[d] > TB_MAX_GRID_OPS)
                        return tb__fail(c->err, h[d] ? tb_err_limit : tb_err_malformed, rec->cache_key, NULL,
                                        (long long)gat, 0, "config %u: grid rule dimension %u has %u operations", j, d,
                                        h[d]);
                    total += h[d];
                }
                if (total * TB__GRID_OP > c->end - c->pos)
                    return tb__fail(c->err, tb_err_truncated, rec->cache_key, NULL, (long long)gat, 0,
                                    "config %u: %zu grid operations cannot fit in the bytes that remain", j, total);
                if (!(g = (tb_grid_rule *)tb__arena_alloc(&b->ctx, &b->arena, sizeof *g + total * sizeof(tb_grid_op))))
                    return TB__OOM(c->err);
                for (d = 0; d < 3; d++) {
                    tb_grid_op *ops =
                        (tb_grid_op *)(void *)(g + 1) + (d ? g->op_count[0] : 0) + (d > 1 ? g->op_count[1] : 0);
                    g->op_count[d] = h[d];
                    g->ops[d] = ops;
                    for (q = 0; q < h[d]; q++) {
                        uint64_t val;
                        if ((r = tb__rd_u32(c, &ops[q].op, "grid op")) ||
                            (r = tb__rd_u32(c, &ops[q].index, "grid op")) || (r = tb__rd_u64(c, &val, "grid op")))
                            return r;
                        ops[q].value = (int64_t)val;
                    }
                }
                if ((r = tb__check_grid(g, cf, rec->cache_key, (long long)gat, c->err)) != tb_ok) return r;
                cf->grid = g;
            }
    }
    c->kernel = NULL;
    return tb_ok;
}

/* pread of exactly n bytes at `at`: 0, or an errno (EIO: the file ends
   first). The checksum's reader for a file. */
static int tb__fd_read(void *user, size_t at, void *buf, size_t n) {
    int fd = *(const int *)user;
    char *q = (char *)buf;
    while (n) {
        ssize_t got = pread(fd, q, n, (off_t)at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return got ? errno : EIO;
        q += got, at += (size_t)got, n -= (size_t)got;
    }
    return 0;
}

/* The checksum of the first n bytes of a file, as format `maj` takes it,
   read with pread through piece buffers (one per thread): no mapping is
   touched and nothing the size of the file is allocated. The buffers are
   allocated by the caller's thread (tb__sum_begin) and freed by it
   (tb__sum_end): the allocator may not be thread-safe. */
typedef struct tb__sum {
    int fd;
    unsigned maj, nt;
    size_t n;
    unsigned char *bufs[TB__MAX_THREADS];
    int e;                      /* a read's errno */
    uint64_t sum;
    pthread_t tid;              /* tb__sum_begin's helper, when started */
    int started;
} tb__sum;

static void *tb__sum_run(void *arg) {
    tb__sum *s = (tb__sum *)arg;
    int fd = s->fd;
    if (s->maj == 1) { /* one XXH3 over the file */
        tb__xxh h;
        size_t at = 0;
        tb__xxh_init(&h);
        for (; at < s->n && !s->e; at += TB__READ_PIECE) {
            size_t k = s->n - at < TB__READ_PIECE ? s->n - at : TB__READ_PIECE;
            if ((s->e = tb__fd_read(&fd, at, s->bufs[0], k)) == 0) tb__xxh_update(&h, s->bufs[0], k);
        }
        s->sum = tb__xxh_digest(&h);
    } else {
        s->e = tb__checksum_blocks(NULL, tb__fd_read, &fd, s->bufs, s->nt, s->n, &s->sum);
    }
    return NULL;
}

/* Allocates the buffers; with background, runs the checksum on a helper
   thread (if one can be had) while the caller goes on. */
static tb_result tb__sum_begin(tb__sum *s, const tb__ctx *c, int fd, size_t n, unsigned maj, int background,
                               tb_error *err) {
    size_t blocks = tb__chunk_count(n);
    /* a buffer for each thread tb__checksum_blocks will run, no more: fresh
       memory costs a page fault a page */
    unsigned want = tb__thread_count(0, blocks < 256 ? blocks : 256, TB__CHUNKS_PER_THREAD, TB__MAX_THREADS);
    memset(s, 0, sizeof *s);
    s->fd = fd, s->n = n, s->maj = maj;
    for (; s->nt < want; s->nt++)
        if (!(s->bufs[s->nt] = (unsigned char *)tb__alloc(c, TB__READ_PIECE))) break;
    if (!s->nt) return TB__OOM(err);
    if (background) s->started = pthread_create(&s->tid, NULL, tb__sum_run, s) == 0;
    return tb_ok;
}

/* Waits for (or runs) the checksum, frees the buffers: tb_ok and *sum, or
   the read's error. */
static tb_result tb__sum_end(tb__sum *s, const tb__ctx *c, uint64_t *sum, tb_error *err) {
    unsigned t;
    if (s->started) pthread_join(s->tid, NULL);
    else tb__sum_run(s);
    for (t = 0; t < s->nt; t++) tb__free(c, s->bufs[t]);
    if (s->e)
        return tb__fail(err, tb_err_io, NULL, NULL, -1, s->e,
                        "reading the bundle file failed (truncated or replaced while it was read?)");
    *sum = s->sum;
    return tb_ok;
}

/* Parses a bundle: from memory (p, fd < 0), or from a file (fd, through
   the window win of TB__WINDOW bytes; p is then a mapping that is only
   used to position the payloads' views, never read). */
static tb_result tb__parse_sections(tb_bundle *b, const unsigned char *whole, size_t size, int fd, unsigned char *win,
                                    uint32_t maj, const unsigned char *p, tb_error *err);
#define TB__SUM_BESIDE ((size_t)16 << 20) /* from 16 MiB, the checksum runs beside the parse */
static tb_result tb__checksum_mismatch(tb_error *err, size_t size, uint64_t want, uint64_t got, uint32_t maj) {
    return tb__fail(err, tb_err_checksum, NULL, NULL, (long long)(size - 8), 0,
                    "stored checksum %016llx, computed %016llx (format %u): the file was damaged after it was written; "
                    "copy it again, or make it again (pack its cache, or export its model)",
                    (unsigned long long)want, (unsigned long long)got, maj);
}

static tb_result tb__parse(tb_bundle *b, const unsigned char *p, size_t size, int fd, unsigned char *win,
                           unsigned flags, tb_error *err) {
    uint64_t file_size;
    uint32_t maj;
    tb_result r, r2;
    unsigned char head[TB__HEADER_SIZE], tail[TB__TRAILER_SIZE];
    const unsigned char *whole = p;
    if (fd >= 0) { /* the header and the trailer, by pread */
        size_t hn = size < TB__HEADER_SIZE ? size : TB__HEADER_SIZE;
        int e = tb__fd_read(&fd, 0, head, hn);
        if (!e && size >= TB__HEADER_SIZE + TB__TRAILER_SIZE) e = tb__fd_read(&fd, size - 8, tail, 8);
        if (e)
            return tb__fail(err, tb_err_io, NULL, NULL, 0, e,
                            "reading the bundle file failed (truncated or replaced while it was read?)");
        p = head;
    }
    if (size < 8 ? memcmp(p, tb__magic, size) != 0 : memcmp(p, tb__magic, 8) != 0)
        return tb__fail(err, tb_err_bad_magic, NULL, NULL, 0, 0, "the input does not start with the bundle magic");
    if (size < TB__HEADER_SIZE + TB__TRAILER_SIZE)
        return tb__fail(err, tb_err_truncated, NULL, NULL, (long long)size, 0,
                        "%zu bytes, smaller than a header and trailer", size);
    maj = tb__le16(p + 8);
    if (maj < TB__FORMAT_OLDEST_MAJOR || maj > TB_FORMAT_VERSION_MAJOR)
        return tb__fail(err, tb_err_unsupported_version, NULL, NULL, 8, 0,
                        "format version %u.%u, this reader reads %u.x to %u.x", maj, (unsigned)tb__le16(p + 10),
                        (unsigned)TB__FORMAT_OLDEST_MAJOR, (unsigned)TB_FORMAT_VERSION_MAJOR);
    b->format_major = (uint16_t)maj;
    b->format_minor = tb__le16(p + 10);
    file_size = tb__le64(p + 16);
    if (file_size > size)
        return tb__fail(err, tb_err_truncated, NULL, NULL, (long long)size, 0,
                        "the header says %llu bytes and the input has %zu: the file is corrupt (its header damaged) or "
                        "was cut short (an interrupted copy); copy it again, or make it again (pack its cache, or "
                        "export its model)",
                        (unsigned long long)file_size, size);
    if (file_size < size)
        return tb__fail(err, tb_err_malformed, NULL, NULL, 16, 0,
                        "the header says %llu bytes, the input has %zu (trailing bytes)", (unsigned long long)file_size,
                        size);
    if (!(flags & TB_READ_NO_CHECKSUM)) {
        /* format 1: XXH3-64 of the bytes; 2: of their 1 MiB blocks' XXH3-64 values */
        uint64_t want = fd >= 0 ? tb__le64(tail) : tb__le64(p + size - 8), got = 0;
        if (fd >= 0) {
            /* a large file's checksum runs beside the parse, which reads
               only the structure: the parser takes hostile input anyway,
               and its result counts only if the checksum holds, whose
               error comes first, as when the two ran in turn */
            tb__sum sum;
            tb_error perr;
            int beside = size - 8 >= TB__SUM_BESIDE;
            if ((r = tb__sum_begin(&sum, &b->ctx, fd, size - 8, maj, beside, err)) != tb_ok) return r;
            perr.message[0] = 0;
            r = beside ? tb__parse_sections(b, whole, size, fd, win, maj, p, &perr) : tb_ok;
            if ((r2 = tb__sum_end(&sum, &b->ctx, &got, err)) != tb_ok) return r2;
            if (want != got) return tb__checksum_mismatch(err, size, want, got, maj);
            if (beside) {
                if (r != tb_ok && err) *err = perr;
                return r;
            }
        } else {
            got = maj == 1 ? tb_xxh3_64(p, size - 8) : tb_bundle_checksum(p, size - 8);
            if (want != got) return tb__checksum_mismatch(err, size, want, got, maj);
        }
    }
    return tb__parse_sections(b, whole, size, fd, win, maj, p, err);
}

/* The sections of a bundle whose header tb__parse checked (p: the header's
   bytes), then the checks across them. */
static tb_result tb__parse_sections(tb_bundle *b, const unsigned char *whole, size_t size, int fd, unsigned char *win,
                                    uint32_t maj, const unsigned char *p, tb_error *err) {
    tb__cur c;
    uint32_t nsec, i, seen = 0;
    tb_result r;
    const tb__section *row;
    nsec = tb__le32(p + 24);
    if (nsec > TB_MAX_SECTIONS)
        return tb__fail(err, tb_err_limit, NULL, NULL, 24, 0, "%u sections, over TB_MAX_SECTIONS", nsec);
    c.base = whole;
    c.pos = TB__HEADER_SIZE;
    c.err = err;
    c.kernel = NULL;
    c.own = b->storage == TB_STORAGE_OWNED ? NULL : b;
    c.fd = fd, c.win = win, c.win_at = 0, c.win_len = 0;
    for (i = 0; i < nsec; i++) {
        uint32_t type, sflags;
        uint64_t len;
        size_t at = c.pos, body_end;
        c.end = size - TB__TRAILER_SIZE;
        if ((r = tb__rd_u32(&c, &type, "section type")) || (r = tb__rd_u32(&c, &sflags, "section flags")) ||
            (r = tb__rd_u64(&c, &len, "section length")))
            return r;
        if (len > (uint64_t)(c.end - c.pos))
            return tb__fail(err, tb_err_truncated, NULL, NULL, (long long)at, 0,
                            "section %u of %llu bytes, %zu remain", i, (unsigned long long)len, c.end - c.pos);
        body_end = c.pos + (size_t)len;
        c.end = body_end;
        if ((row = tb__section_row(type)) != NULL) {
            if (seen & (1u << type))
                return tb__fail(err, tb_err_malformed, NULL, NULL, (long long)at, 0, "section type %u appears twice",
                                type);
            if ((row->after & seen) != row->after)
                return tb__fail(err, tb_err_malformed, NULL, NULL, (long long)at, 0,
                                "section %u comes before section 2 (launch records)", type);
            seen |= 1u << type;
            if ((r = row->read(b, &c)) != tb_ok) return r;
            if (c.pos != body_end)
                return tb__fail(err, tb_err_malformed, NULL, NULL, (long long)c.pos, 0,
                                "section %u ends %zu bytes before its stated length", type, body_end - c.pos);
        } else if (sflags & TB__SEC_REQUIRED) {
            return tb__fail(err, tb_err_unsupported_version, NULL, NULL, (long long)at, 0,
                            "required section type %u is unknown to this reader (written by a newer version?)", type);
        } else {
            c.pos = body_end;   /* optional section from a newer minor version */
        }
        c.end = size - TB__TRAILER_SIZE;
        if ((r = tb__rd_zeros(&c, 8, "section")) != tb_ok) return r;
    }
    if (c.pos != size - TB__TRAILER_SIZE)
        return tb__fail(err, tb_err_malformed, NULL, NULL, (long long)c.pos, 0,
                        "%zu unexplained bytes after the last section", size - TB__TRAILER_SIZE - c.pos);
    for (i = 0; i < b->record_count; i++) {
        uint32_t j;
        for (j = 0; j < b->records[i].config_count; j++)
            if ((r = tb__check_config_descs(&b->records[i].configs[j], b->records[i].cache_key, -1, err)) != tb_ok)
                return r;
    }
    if ((r = tb__check_unique(b, 1, 0, err)) != tb_ok) return r;
    if (maj > 2 || (maj == 2 && b->format_minor >= 1)) return tb__check_unique(b, 0, 1, err);
    return tb__drop_duplicate_records(b, err);
}

/* fd >= 0: data maps that file, and the bytes are read from the file
   (tb__parse's window), never through the mapping. */
static tb_result tb__read_view_fd(const void *data, size_t size, int fd, const tb_options *options, unsigned flags,
                                  tb_storage storage, tb_bundle **out, tb_error *err) {
    tb_bundle *b;
    tb_result r;
    unsigned char *win = NULL;
    const unsigned char *p = (const unsigned char *)data;
    if (!out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "out is NULL");
    *out = NULL;
    if (!data && size) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "data is NULL");
    if ((r = tb_bundle_create(options, &b, err)) != tb_ok) return r;
    if (flags & TB_READ_COPY) {
        /* one aligned copy; the views then point into it */
        void *raw = tb__alloc(&b->ctx, size + 16);
        if (!raw) {
            tb_bundle_free(b);
            return TB__OOM(err);
        }
        b->buffer_copy = raw;
        p = (const unsigned char *)raw + ((16 - ((uintptr_t)raw & 15u)) & 15u);
        if (size) memcpy((void *)p, data, size);
        storage = TB_STORAGE_OWNED;
    }
    b->storage = storage;
    if (fd >= 0 && !(win = (unsigned char *)tb__alloc(&b->ctx, TB__WINDOW))) {
        tb_bundle_free(b);
        return TB__OOM(err);
    }
    r = tb__parse(b, size ? p : (const unsigned char *)"", size, fd, win, flags, err);
    tb__free(&b->ctx, win);
    if (r != tb_ok) {
        tb_bundle_free(b);
        return r;
    }
    *out = b;
    return tb_ok;
}

static tb_result tb__read_view(const void *data, size_t size, const tb_options *options, unsigned flags,
                               tb_storage storage, tb_bundle **out, tb_error *err) {
    return tb__read_view_fd(data, size, -1, options, flags, storage, out, err);
}

TBDEF tb_result tb_bundle_read_memory(const void *data, size_t size, const tb_options *options, unsigned flags,
                                      tb_bundle **out, tb_error *err) {
    return tb__read_view(data, size, options, flags, TB_STORAGE_VIEW, out, err);
}

/* ---------------------------------------------------------------------- */
/* >>fs  Filesystem: bundle files, collect, pack and emit */
/* Everything goes through directory descriptors (openat family) with    */
/* O_NOFOLLOW, so a symlink planted in a cache never redirects a read or  */
/* a write. A kernel appears under its final name only by one rename of a */
/* complete temporary directory: readers see all of one writer's files or */
/* nothing, whatever other writers or a SIGKILL do meanwhile.            */
/* ---------------------------------------------------------------------- */
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h> /* flock: the writers' liveness lock on their temporary directories */
#include <sys/mman.h>
#if defined(__linux__)
#include <sys/sendfile.h> /* emit copies a mapped bundle's payloads file to file, in the kernel */
#include <sys/vfs.h>      /* fstatfs: emit's writer count on tmpfs */
#endif
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/* The live mapped bundles, so that the library's own copy of bytes that
   may lie in any of them (a program another bundle holds, added to this
   one) goes through the file, as tb__payload_bytes does for a bundle's
   own: a file truncated under its mapping gives an error, never SIGBUS.
   A short list: a process maps a few bundles. */
typedef struct tb__mapping {
    const tb_bundle *b;
    struct tb__mapping *next;
} tb__mapping;
static tb__mapping *tb__mappings;
static pthread_mutex_t tb__mappings_mu = PTHREAD_MUTEX_INITIALIZER;
static int tb__mapping_add(const tb_bundle *b) {
    tb__mapping *m = (tb__mapping *)tb__alloc(&b->ctx, sizeof *m);
    if (!m) return 0;
    m->b = b;
    pthread_mutex_lock(&tb__mappings_mu);
    m->next = tb__mappings, tb__mappings = m;
    pthread_mutex_unlock(&tb__mappings_mu);
    return 1;
}
static void tb__mapping_remove(const tb_bundle *b) {
    tb__mapping **at, *m = NULL;
    pthread_mutex_lock(&tb__mappings_mu);
    for (at = &tb__mappings; *at; at = &(*at)->next)
        if ((*at)->b == b) {
            m = *at, *at = m->next;
            break;
        }
    pthread_mutex_unlock(&tb__mappings_mu);
    if (m) tb__free(&b->ctx, m);
}
static int tb__mapped_copy(void *dst, const void *src, size_t n) {
    const tb__mapping *m;
    uintptr_t at = (uintptr_t)src;
    int r = 0, found = 0;
    if (!n) return 0;
    pthread_mutex_lock(&tb__mappings_mu); /* held through the read: the bundle cannot go meanwhile */
    for (m = tb__mappings; m && !found; m = m->next) {
        uintptr_t base = (uintptr_t)m->b->map_base;
        if (at >= base && at - base <= m->b->map_size && n <= m->b->map_size - (at - base)) {
            found = 1;
            r = m->b->read_at(m->b, (size_t)(at - base), dst, n);
        }
    }
    pthread_mutex_unlock(&tb__mappings_mu);
    if (!found) memcpy(dst, src, n);
    return r;
}

/* A mapped bundle's file: the mapping and the descriptor its payloads are
   copied through (tb__artifact_bytes), kept until the bundle is freed. */
static void tb__mapped_release(tb_bundle *b) {
    tb__mapping_remove(b);
    munmap(b->map_base, b->map_size);
    close(b->map_fd);
}
static int tb__mapped_read_at(const tb_bundle *b, size_t off, void *dst, size_t n) {
    char *p = (char *)dst;
    while (n) {
        ssize_t got = pread(b->map_fd, p, n, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (got == 0) errno = EIO; /* the file ends early: truncated since it was read */
            return -1;
        }
        p += got;
        off += (size_t)got;
        n -= (size_t)got;
    }
    return 0;
}

static int tb__close_keep_errno(int fd) {
    int e = errno, r = close(fd);
    errno = e;
    return r;
}

static uint64_t tb__unique_seq(void) {
    static unsigned long counter;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    unsigned long v;
    pthread_mutex_lock(&mu);
    v = ++counter;
    pthread_mutex_unlock(&mu);
    return v;
}

/* "tmp.<pid>.<seq>.<nanoseconds>": unique across processes and threads. */
static void tb__temp_name(char *out, size_t cap, const char *prefix) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, cap, "%s%ld.%llu.%lx%lx", prefix, (long)getpid(), (unsigned long long)tb__unique_seq(),
             (unsigned long)ts.tv_sec, (unsigned long)ts.tv_nsec);
}

/* Copies n bytes at offset `at` of file in to the end of out: 0, or -1
   with errno (EIO: the file ends first). sendfile where Linux has it (one
   copy, in the kernel, with an explicit offset, so threads share `in`),
   else pread and write through a buffer. The file is never mapped here: a
   file truncated meanwhile gives an error, not a fault. */
static int tb__write_full(int fd, const void *data, size_t n);
static int tb__copy_range(int in, size_t at, int out, size_t n) {
    char buf[16384];
#if defined(__linux__)
    off_t off = (off_t)at;
    while (n) {
        ssize_t w = sendfile(out, in, &off, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EINVAL || errno == ENOSYS) && off == (off_t)at) break; /* not here: the buffer */
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return -1;
        }
        n -= (size_t)w;
    }
    at = (size_t)off;
#endif
    while (n) {
        size_t k = n < sizeof buf ? n : sizeof buf;
        ssize_t got = pread(in, buf, k, (off_t)at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (got == 0) errno = EIO;
            return -1;
        }
        if (tb__write_full(out, buf, (size_t)got) != 0) return -1;
        at += (size_t)got, n -= (size_t)got;
    }
    return 0;
}

static int tb__write_full(int fd, const void *data, size_t n) {
    const char *p = (const char *)data;
    while (n) {
        ssize_t w = write(fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- bundle files ---- */
typedef struct tb__fd_writer { int fd; int err; } tb__fd_writer;
static int tb__fd_write_cb(void *user, const void *data, size_t size) {
    tb__fd_writer *w = (tb__fd_writer *)user;
    if (tb__write_full(w->fd, data, size) != 0) {
        w->err = errno;
        return -1;
    }
    return 0;
}

static int tb__fd_patch_cb(void *user, size_t at, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    int fd = ((tb__fd_writer *)user)->fd;
    while (n) {
        ssize_t put = pwrite(fd, p, n, (off_t)at);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return put < 0 ? errno : EIO;
        p += put, at += (size_t)put, n -= (size_t)put;
    }
    return 0;
}
static int tb__fd_read_cb(void *user, size_t at, void *buf, size_t n) {
    unsigned char *p = (unsigned char *)buf;
    int fd = ((tb__fd_writer *)user)->fd;
    while (n) {
        ssize_t got = pread(fd, p, n, (off_t)at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return got < 0 ? errno : EIO; /* EIO: the file is shorter than it was */
        p += got, at += (size_t)got, n -= (size_t)got;
    }
    return 0;
}

/* Linux's unnamed temporary files (3.11+), which _POSIX_C_SOURCE hides:
   the value is the generic one, on the architectures that use it. */
#if defined(__linux__) && !defined(O_TMPFILE) && \
    (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || defined(__arm__) || defined(__riscv))
#define O_TMPFILE (020000000 | O_DIRECTORY)
#endif

/* A bundle file is written beside its path and renamed onto it once
   complete, so readers see the old file or the new one, never a torn one.
   Where Linux has O_TMPFILE, the file has no name while it is written, so
   a writer killed meanwhile leaves nothing behind; it is linked as
   PATH.tmp.<unique> only for the rename. Elsewhere it is written under that
   name. *tmp is "" while the file is unnamed. */
static tb_result tb__temp_open(const char *path, char *tmp, size_t cap, int *fd, tb_error *err) {
    size_t n = strlen(path);
    *fd = -1;
    tmp[0] = 0;
    if (n == 0 || n > 4096)
        return tb__fail(err, tb_err_invalid_argument, NULL, path, -1, 0, "path is empty or too long");
#ifdef O_TMPFILE
    {
        char dir[4097];
        const char *slash = strrchr(path, '/');
        if (!slash) memcpy(dir, ".", 2);
        else if (slash == path) memcpy(dir, "/", 2);
        else memcpy(dir, path, (size_t)(slash - path)), dir[slash - path] = 0;
        *fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
        if (*fd >= 0) {
            /* naming it at the end goes through /proc/self/fd, which a
               chroot or a small container may lack: then a named file */
            char proc[64];
            snprintf(proc, sizeof proc, "/proc/self/fd/%d", *fd);
            if (access(proc, F_OK) == 0) return tb_ok;
            close(*fd);
            *fd = -1;
        }
        /* the kernel or filesystem has no unnamed files: a named one */
    }
#endif
    memcpy(tmp, path, n);
    tb__temp_name(tmp + n, cap - n, ".tmp.");
    *fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (*fd < 0) {
        int e = errno;
        const char *slash = strrchr(path, '/');
        tmp[0] = 0;
        if (e == ENOENT || e == ENOTDIR)
            return tb__fail(err, tb_err_io, NULL, path, -1, e, "the directory %.*s does not exist (or is no directory)",
                            slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
        return tb__fail(err, tb_err_io, NULL, path, -1, e, "cannot create a temporary file beside it");
    }
    return tb_ok;
}

/* With r tb_ok: fsync (TB_WRITE_FSYNC), name an unnamed file, close and
   rename onto path; with any failure, before or here, the temporary file
   is removed (an unnamed one goes with its descriptor). */
static tb_result tb__temp_finish(int fd, char *tmp, size_t cap, const char *path, unsigned flags, tb_result r,
                                 tb_error *err) {
    if (r == tb_ok && (flags & TB_WRITE_FSYNC) && fsync(fd) != 0)
        r = tb__fail(err, tb_err_io, NULL, path, -1, errno, "fsync failed");
    if (r == tb_ok && !tmp[0]) {
        char proc[64];
        size_t n = strlen(path);
        memcpy(tmp, path, n);
        tb__temp_name(tmp + n, cap - n, ".tmp.");
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) != 0) {
            r = tb__fail(err, tb_err_io, NULL, path, -1, errno, "cannot give the finished temporary file a name");
            tmp[0] = 0;
        }
    }
    if (close(fd) != 0 && r == tb_ok) r = tb__fail(err, tb_err_io, NULL, path, -1, errno, "close failed");
    if (r == tb_ok && rename(tmp, path) != 0) r = tb__fail(err, tb_err_io, NULL, path, -1, errno, "rename failed");
    if (r != tb_ok && tmp[0]) unlink(tmp);
    return r;
}

/* The library's one read-whole-file loop. Reads the regular file
   <dfd>/<name> (dfd AT_FDCWD: a path) into size + 1 bytes from alloc,
   NUL-terminated: 1 read; 0 not a regular file, nothing read (with
   nofollow, a symlink or a socket too: O_NOFOLLOW refuses links, and
   O_NONBLOCK keeps a FIFO from blocking the open); -1 an error in err.
   A file over max bytes is tb_err_limit; one that shrinks while it is
   read gives the bytes it still had. *data is NULL, or (also after an
   error) memory of alloc's for the caller to free. */
typedef void *(*tb__alloc_fn)(void *user, size_t n);
static int tb__read_whole(int dfd, const char *name, int nofollow, uint64_t max, tb__alloc_fn alloc, void *user,
                          const char *kernel, char **data, size_t *size, tb_error *err) {
    struct stat st;
    size_t got = 0;
    char *buf;
    int fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    *data = NULL;
    if (fd < 0) {
        int e = errno;
        if (nofollow && (e == ELOOP || e == ENXIO)) return 0; /* a symlink, a socket */
        tb__fail(err, e == ENOENT ? tb_err_not_found : tb_err_io, kernel, name, -1, e, "cannot open");
        return -1;
    }
    if (fstat(fd, &st) != 0) { /* st is not read after a failed fstat */
        int e = errno;
        close(fd);
        tb__fail(err, tb_err_io, kernel, name, -1, e, "fstat failed");
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    if ((uint64_t)st.st_size > max || (uint64_t)st.st_size >= (uint64_t)SIZE_MAX) {
        close(fd);
        tb__fail(err, tb_err_limit, kernel, name, -1, 0, "%lld bytes, over the limit of %llu", (long long)st.st_size,
                 (unsigned long long)max);
        return -1;
    }
    if (!(buf = (char *)alloc(user, (size_t)st.st_size + 1))) {
        close(fd);
        TB__OOM(err);
        return -1;
    }
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            tb__fail(err, tb_err_io, kernel, name, -1, e, "read failed");
            *data = buf; /* the caller frees it, as it frees what alloc gives */
            return -1;
        }
        if (n == 0) break; /* shrank meanwhile: keep what is there */
        got += (size_t)n;
    }
    close(fd);
    buf[got] = 0;
    *data = buf;
    *size = got;
    return 1;
}

#ifndef TB_NO_LAUNCHER
/* Small files of other sections (the autotune choices): written whole
   beside path and renamed onto it; read whole (tb__read_whole), at most
   max bytes, a regular file only. *data (NUL-terminated) is freed with
   tb__free(c). */
static tb_result tb__write_small_file(const char *path, const void *data, size_t size, tb_error *err) {
    char tmp[4096 + 64];
    int fd;
    tb_result r;
    if ((r = tb__temp_open(path, tmp, sizeof tmp, &fd, err)) != tb_ok) return r;
    if (tb__write_full(fd, data, size) != 0) r = tb__fail(err, tb_err_io, NULL, path, -1, errno, "write failed");
    return tb__temp_finish(fd, tmp, sizeof tmp, path, 0, r, err);
}
static void *tb__ctx_alloc_fn(void *c, size_t n) { return tb__alloc((const tb__ctx *)c, n); }
static tb_result tb__read_file(const tb__ctx *c, const char *path, size_t max, char **data, size_t *size,
                               tb_error *err) {
    tb_error e;
    int got = tb__read_whole(AT_FDCWD, path, 0, max, tb__ctx_alloc_fn, (void *)(uintptr_t)c, NULL, data, size, &e);
    if (got == 1) return tb_ok;
    tb__free(c, *data);
    *data = NULL;
    if (got == 0) return tb__fail(err, tb_err_io, NULL, path, -1, 0, "not a regular file");
    if (err) *err = e;
    return e.code;
}
#endif

TBDEF tb_result tb_bundle_write_file(const tb_bundle *b, const char *path, unsigned flags, tb_error *err) {
    char tmp[4096 + 64];
    tb__fd_writer w;
    tb_result r;
    tb__out out;
    if (!b || !path) return tb__fail(err, tb_err_invalid_argument, NULL, path, -1, 0, "bundle or path is NULL");
    if ((r = tb__check_unique(b, 1, 1, err)) != tb_ok) return r;
    if ((r = tb__check_source(b, err)) != tb_ok) return r;
    if ((r = tb__temp_open(path, tmp, sizeof tmp, &w.fd, err)) != tb_ok) return r;
    w.err = 0;
    memset(&out, 0, sizeof out);
    out.write = tb__fd_write_cb;
    out.user = &w;
    out.name = path;
    out.write_errno = &w.err;
    r = tb__write_whole(b, &out, err);
    return tb__temp_finish(w.fd, tmp, sizeof tmp, path, flags, r, err);
}

TBDEF tb_result tb_bundle_read_file(const char *path, const tb_options *options, unsigned flags, tb_bundle **out,
                                    tb_error *err) {
    struct stat st;
    int fd;
    tb_result r;
    size_t size;
    void *base;
    if (!out) return tb__fail(err, tb_err_invalid_argument, NULL, path, -1, 0, "out is NULL");
    *out = NULL;
    if (!path) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "path is NULL");
    /* O_NONBLOCK: the open of a FIFO must not wait for a writer (it is then
       refused as not a regular file); reads of a regular file ignore it */
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return tb__fail(err, errno == ENOENT ? tb_err_not_found : tb_err_io, NULL, path, -1, errno, "cannot open");
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tb__fail(err, tb_err_io, NULL, path, -1, e, "fstat failed");
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tb__fail(err, tb_err_io, NULL, path, -1, 0, "not a regular file");
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return tb__fail(err, tb_err_limit, NULL, path, -1, 0, "file too large for this address space");
    }
    size = (size_t)st.st_size;
    if (size == 0) {
        close(fd);
        r = tb__read_view("", 0, options, flags, TB_STORAGE_VIEW, out, err);
    } else if (flags & TB_READ_COPY) {
        /* read straight into the aligned buffer the bundle will own */
        tb__ctx c = tb__ctx_from(options);
        char *raw = (char *)tb__alloc(&c, size + 16), *buf;
        size_t got = 0;
        ssize_t n = 0;
        if (!raw) {
            close(fd);
            return TB__OOM(err);
        }
        buf = raw + ((16 - ((uintptr_t)raw & 15u)) & 15u);
        while (got < size) {
            n = read(fd, buf + got, size - got);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            got += (size_t)n;
        }
        close(fd);
        if (got != size) r = tb__fail(err, tb_err_io, NULL, path, -1, n < 0 ? errno : 0, "short read");
        else r = tb__read_view(buf, size, options, flags & ~TB_READ_COPY, TB_STORAGE_OWNED, out, err);
        if (r == tb_ok) (*out)->buffer_copy = raw;
        else tb__free(&c, raw);
    } else {
        base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (base == MAP_FAILED) {
            int e = errno;
            close(fd);
            return tb__fail(err, tb_err_io, NULL, path, -1, e, "mmap failed");
        }
        r = tb__read_view_fd(base, size, fd, options, flags, TB_STORAGE_MAPPED, out, err);
        if (r == tb_ok) {
            (*out)->map_base = base;
            (*out)->map_size = size;
            (*out)->map_fd = fd;
            (*out)->release = tb__mapped_release;
            (*out)->read_at = tb__mapped_read_at;
            if (!tb__mapping_add(*out)) {
                tb_bundle_free(*out);
                *out = NULL;
                return TB__OOM(err);
            }
        } else {
            munmap(base, size);
            close(fd);
        }
    }
    if (r && err && !err->file[0]) {
        /* name the file in the message too */
        size_t n = strlen(err->message);
        tb__copy_field(err->file, sizeof err->file, path);
        if (n + 8 < sizeof err->message) {
            memcpy(err->message + n, " [file ", 7);
            tb__escape_into(err->message + n + 7, sizeof err->message - n - 8, path);
            strcat(err->message, "]");
        }
    }
    return r;
}

/* ---- paths ---- */
TBDEF tb_result tb_cache_dir_resolve(const char *explicit_dir, char *out, size_t cap, tb_error *err) {
    const char *v;
    int n;
    if (!out || cap == 0) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "no output buffer");
    if (explicit_dir && *explicit_dir) n = snprintf(out, cap, "%s", explicit_dir);
    else if ((v = getenv("TRITON_CACHE_DIR")) && *v) n = snprintf(out, cap, "%s", v);
    else if ((v = getenv("TRITON_HOME")) && *v) n = snprintf(out, cap, "%s/.triton/cache", v);
    else if ((v = getenv("HOME")) && *v) n = snprintf(out, cap, "%s/.triton/cache", v);
    else return tb__fail(err, tb_err_not_found, NULL, NULL, -1, 0,
                         "no cache directory: none given and TRITON_CACHE_DIR, TRITON_HOME and HOME are unset");
    if (n < 0 || (size_t)n >= cap) return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "cache path too long");
    return tb_ok;
}

/* Absolute form of dir (cwd-prefixed, trailing slashes dropped; symlinks
   are not resolved, as Triton writes the path it was given). */
static tb_result tb__absolute(const char *dir, char *out, size_t cap, tb_error *err) {
    size_t n;
    if (dir[0] == '/') {
        n = strlen(dir);
        if (n >= cap) return tb__fail(err, tb_err_limit, NULL, dir, -1, 0, "path too long");
        memcpy(out, dir, n + 1);
    } else {
        if (!getcwd(out, cap)) return tb__fail(err, tb_err_io, NULL, dir, -1, errno, "getcwd failed");
        n = strlen(out);
        if (!(dir[0] == '.' && dir[1] == 0)) {
            const char *d = (dir[0] == '.' && dir[1] == '/') ? dir + 2 : dir;
            if (n + 1 + strlen(d) >= cap) return tb__fail(err, tb_err_limit, NULL, dir, -1, 0, "path too long");
            if (n > 1) out[n++] = '/';
            memcpy(out + n, d, strlen(d) + 1);
        }
        n = strlen(out);
    }
    while (n > 1 && out[n - 1] == '/') out[--n] = 0;
    return tb_ok;
}

/* Replacing every occurrence of from by to, in two steps: the size of the
   result (returns 1 if there was any occurrence, 0 if none, -1 on size
   overflow, -2 over TB_MAX_SENTINELS occurrences), then the copy into a
   buffer of that size. The bound keeps a small hostile .json (32 MB of
   sentinels) from becoming a file of gigabytes on emit. */
static int tb__replace_size(const unsigned char *src, size_t n, const char *from, const char *to, size_t *out_n) {
    const unsigned char *p = src, *end = src + n;
    size_t fl = strlen(from), tl = strlen(to), count = 0, grow;
    while ((p = (const unsigned char *)tb__memmem(p, (size_t)(end - p), from)) != NULL) {
        if (++count > TB_MAX_SENTINELS) return -2;
        p += fl;
    }
    if (tl >= fl) {
        if (!tb__mul(count, tl - fl, &grow) || !tb__add(grow, n, out_n)) return -1;
    } else {
        *out_n = n - count * (fl - tl);
    }
    return count > 0;
}
static void tb__replace_into(unsigned char *dst, const unsigned char *src, size_t n, const char *from, const char *to) {
    const unsigned char *p = src, *end = src + n, *q;
    size_t fl = strlen(from), tl = strlen(to);
    while ((q = (const unsigned char *)tb__memmem(p, (size_t)(end - p), from)) != NULL) {
        memcpy(dst, p, (size_t)(q - p));
        dst += q - p;
        memcpy(dst, to, tl);
        dst += tl;
        p = q + fl;
    }
    memcpy(dst, p, (size_t)(end - p));
}


/* A directory opened for listing: its entries' names, sorted, and the open
   DIR whose descriptor then serves the openat calls on those entries. */
typedef struct tb__listing {
    DIR *dir;
    char **names;
    size_t count;
    char *pool;
} tb__listing;

static void tb__list_close(const tb__ctx *c, tb__listing *l) {
    if (l->dir) closedir(l->dir);
    tb__free(c, l->names);
    tb__free(c, l->pool);
    memset(l, 0, sizeof *l);
}

/* Opens <parent>/<name> and lists it; nofollow O_NOFOLLOW or 0. A missing
   directory, a file or (with O_NOFOLLOW) a link gives tb_err_not_found. */
static tb_result tb__list_open_flags(const tb__ctx *c, int parent, const char *name, const char *kernel, int nofollow,
                                     tb__listing *l, tb_error *err);
/* Opens <parent>/<name> (never through a symlink) and lists it. */
static tb_result tb__list_open(const tb__ctx *c, int parent, const char *name, const char *kernel, tb__listing *l,
                               tb_error *err) {
    return tb__list_open_flags(c, parent, name, kernel, O_NOFOLLOW, l, err);
}
/* The directory a user names (a cache given as a path): a symlink there is
   followed, as users expect of ~/.triton/cache linked to another disk;
   nothing inside it ever is. An empty path is refused, not read as ".". */
static tb_result tb__list_open_top(const tb__ctx *c, const char *path, tb__listing *l, tb_error *err) {
    if (!*path) {
        memset(l, 0, sizeof *l);
        return tb__fail(err, tb_err_invalid_argument, NULL, path, -1, 0, "the cache directory path is empty");
    }
    return tb__list_open_flags(c, AT_FDCWD, path, NULL, 0, l, err);
}
static tb_result tb__list_open_flags(const tb__ctx *c, int parent, const char *name, const char *kernel, int nofollow,
                                     tb__listing *l, tb_error *err) {
    struct dirent *e;
    size_t used = 0, cap = 0, ncap = 0, i;
    size_t *offs = NULL;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | nofollow | O_CLOEXEC);
    memset(l, 0, sizeof *l);
    if (fd < 0) {
        int en = errno;
        if (en == ENOENT || en == ENOTDIR || en == ELOOP)
            return tb__fail(err, tb_err_not_found, kernel, name, -1, en,
                            en == ENOENT ? "no such directory" : "not a directory (symlinks are never followed)");
        return tb__fail(err, tb_err_io, kernel, name, -1, en, "cannot open the directory");
    }
    l->dir = fdopendir(fd);
    if (!l->dir) {
        close(fd);
        return tb__fail(err, tb_err_io, kernel, name, -1, errno, "cannot list the directory");
    }
    while ((e = readdir(l->dir)) != NULL) {
        size_t n = strlen(e->d_name) + 2; /* the entry's type byte, then its name */
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (used + n > cap) {
            size_t nc = cap ? cap * 2 : 1024;
            char *np;
            while (nc < used + n) nc *= 2;
            if (!(np = (char *)tb__realloc(c, l->pool, nc))) goto oom;
            l->pool = np;
            cap = nc;
        }
        if (l->count == ncap) {
            size_t nc = ncap ? ncap * 2 : 32, *no = (size_t *)tb__realloc(c, offs, nc * sizeof *offs);
            if (!no) goto oom;
            offs = no;
            ncap = nc;
        }
#if defined(_DIRENT_HAVE_D_TYPE)
        l->pool[used] = (char)e->d_type;
#else
        l->pool[used] = 0;
#endif
        memcpy(l->pool + used + 1, e->d_name, n - 1);
        offs[l->count++] = used;
        used += n;
    }
    l->names = (char **)tb__alloc(c, (l->count ? l->count : 1) * sizeof(char *));
    if (!l->names) goto oom;
    for (i = 0; i < l->count; i++) l->names[i] = l->pool + offs[i] + 1;
    if (tb__sort(c, l->names, l->count, sizeof(char *), tb__cmp_str, NULL) != tb_ok) goto oom;
    tb__free(c, offs);
    return tb_ok;
oom:
    tb__free(c, offs);
    tb__list_close(c, l);
    return TB__OOM(err);
}

/* 1 if the listing's entry (a name of it) is known not to be a regular
   file from readdir's d_type, so that it need not be opened: opening a
   device node can act on the device, and a FIFO's open can block. */
static int tb__list_not_regular(int dfd, const char *listed_name) {
    struct stat st;
#if defined(_DIRENT_HAVE_D_TYPE)
    unsigned char t = (unsigned char)listed_name[-1];
    if (t != 0 /* DT_UNKNOWN */) return t != 8 /* DT_REG */;
#endif
    /* the filesystem did not say: one lstat, still no open */
    return fstatat(dfd, listed_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode);
}

static void *tb__arena_alloc_fn(void *b, size_t n) {
    return tb__arena_alloc(&((tb_bundle *)b)->ctx, &((tb_bundle *)b)->arena, n);
}

/* Reads <dfd>/<name> (a name of a listing) into arena memory if it is a
   regular file: 1 read, 0 not a regular file (a symlink, directory,
   FIFO...: left out), -1 error. Where readdir told the type, nothing else
   is opened. */
static int tb__read_regular(tb_bundle *b, int dfd, const char *name, const char *kernel, void **data, size_t *size,
                            tb_error *err) {
    char *buf;
    int got;
    if (tb__list_not_regular(dfd, name)) return 0;
    got = tb__read_whole(dfd, name, 1, TB_MAX_ARTIFACT_SIZE, tb__arena_alloc_fn, b, kernel, &buf, size, err);
    if (got == 1) *data = buf;
    return got;
}

/* Collects <cachefd>/<hash>. require_grp: return tb_err_not_found
   (without error text) when the directory holds no __grp__*.json. */
static tb_result tb__collect_dir(tb_bundle *b, int cachefd, const char *hash, int32_t device,
                                 const char *recorded_dir, int require_grp, tb_error *err) {
    tb__listing l;
    size_t i;
    tb_result r;
    uint32_t ki;
    int dfd;
    if ((r = tb__list_open(&b->ctx, cachefd, hash, hash, &l, err)) != tb_ok) return r;
    dfd = dirfd(l.dir);
    if (require_grp) {
        /* a __grp__*.json that is a link (or anything but a regular
           file) would be left out below, and the unpacked copy would be
           no kernel: such a directory is skipped whole, with a warning */
        int named = 0, found = 0;
        for (i = 0; i < l.count && !found; i++)
            if (strncmp(l.names[i], "__grp__", 7) == 0 && tb__has_suffix(l.names[i], ".json"))
                named = 1, found = !tb__list_not_regular(dfd, l.names[i]);
        if (!found) {
            if (named)
                tb__log(&b->ctx, TB_LOG_WARN,
                        "collect: %s: its __grp__*.json is not a regular file (a symlink?); the directory is skipped",
                        hash);
            tb__list_close(&b->ctx, &l);
            return tb_err_not_found;
        }
    }
    if ((r = tb__add_kernel(b, hash, strlen(hash), device, &ki, err)) != tb_ok) goto done;
    for (i = 0; i < l.count; i++) {
        const char *name = l.names[i];
        void *data = NULL;
        size_t size = 0, nn;
        int got;
        if (!tb__valid_name(name, strlen(name))) {
            tb__log(&b->ctx, TB_LOG_WARN, "collect: %s/%s: name too long; left out", hash, name);
            continue;
        }
        got = tb__read_regular(b, dfd, name, hash, &data, &size, err);
        if (got < 0) {
            r = err ? err->code : tb_err_io;
            break;
        }
        if (got == 0) {
            tb__log(&b->ctx, TB_LOG_DEBUG, "collect: %s/%s is not a regular file; left out", hash, name);
            continue;
        }
        if (tb__has_suffix(name, ".json")) {
            if (tb__memmem(data, size, TB_REPLACE_SENTINEL)) {
                r = tb__fail(err, tb_err_sentinel, hash, name, -1, 0,
                             "the file already holds the sentinel " TB_REPLACE_SENTINEL
                             ", so its paths could not be restored on emit");
                break;
            }
            got = tb__replace_size((const unsigned char *)data, size, recorded_dir, TB_REPLACE_SENTINEL, &nn);
            if (got == -2) {
                r = tb__fail(err, tb_err_limit, hash, name, -1, 0,
                             "the file names the cache more than TB_MAX_SENTINELS (%u) times",
                             (unsigned)TB_MAX_SENTINELS);
                break;
            }
            if (got > 0) {
                unsigned char *out = (unsigned char *)tb__arena_alloc(&b->ctx, &b->arena, nn);
                if (!out) {
                    r = TB__OOM(err);
                    break;
                }
                tb__replace_into(out, (const unsigned char *)data, size, recorded_dir, TB_REPLACE_SENTINEL);
                data = out;
                size = nn;
            }
        }
        if ((r = tb_bundle_add_artifact(b, ki, name, data, size, TB_REFERENCE, err)) != tb_ok) break;
    }
    if (r != tb_ok) tb__pop_kernel(b);
done:
    tb__list_close(&b->ctx, &l);
    return r;
}

static tb_result tb__recorded_path(const char *cache_dir, const tb_collect_options *o, const char *hash, char *out,
                                   size_t cap, tb_error *err) {
    char abs[4096];
    tb_result r;
    const char *base = (o && o->recorded_cache_dir) ? o->recorded_cache_dir : cache_dir;
    if ((r = tb__absolute(base, abs, sizeof abs, err)) != tb_ok) return r;
    if ((size_t)snprintf(out, cap, "%s/%s", abs, hash) >= cap)
        return tb__fail(err, tb_err_limit, hash, cache_dir, -1, 0, "path too long");
    return tb_ok;
}

TBDEF tb_result tb_collect_kernel(tb_bundle *b, const char *cache_dir, const char *hash, int32_t device,
                                  const tb_collect_options *o, tb_error *err) {
    char rec[4352];
    int cfd;
    tb_result r;
    if (!b || !cache_dir || !*cache_dir)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle or cache_dir is NULL or empty");
    if ((r = tb__check_name(hash, "kernel hash", hash, -1, err)) != tb_ok) return r;
    if ((r = tb__recorded_path(cache_dir, o, hash, rec, sizeof rec, err)) != tb_ok) return r;
    cfd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cfd < 0)
        return tb__fail(err, errno == ENOENT ? tb_err_not_found : tb_err_io, hash, cache_dir, -1, errno,
                        "cannot open the cache directory");
    r = tb__collect_dir(b, cfd, hash, device, rec, 0, err);
    close(cfd);
    return r;
}

/* Listing entry i into b: tb_err_not_found when it is no kernel directory
   (tmp.*, a file, a link, or no __grp__ file: Triton's launcher builds). */
static tb_result tb__collect_entry(tb_bundle *b, const tb__listing *l, size_t i, const char *cache_dir,
                                   const tb_collect_options *o, tb_error *e) {
    char rec[4352];
    const char *name = l->names[i];
    tb_result r;
    if (strncmp(name, "tmp.", 4) == 0 || !tb__valid_name(name, strlen(name))) return tb_err_not_found;
    if ((r = tb__recorded_path(cache_dir, o, name, rec, sizeof rec, e)) != tb_ok) return r;
    return tb__collect_dir(b, dirfd(l->dir), name, 0, rec, 1, e);
}

/* Counts an entry's result; a refused kernel is logged and, if it is the
   first, kept. 1 for a refused kernel. */
static int tb__tally(tb_collect_report *rep, tb_result r, const tb_error *e, const tb__ctx *ctx, tb_result *first,
                     tb_error *first_error) {
    if (r == tb_ok) {
        rep->collected++;
        return 0;
    }
    if (r == tb_err_not_found) {
        rep->skipped++;
        return 0;
    }
    rep->failed++;
    tb__log(ctx, TB_LOG_WARN, "collect: %s", e->message);
    if (*first == tb_ok) *first = r, *first_error = *e;
    return 1;
}

/* One reader's share of collect_cache: listing entries [begin, end) into
   its own bundle, with its own counts and first error. */
typedef struct tb__collect_part {
    tb_bundle *bundle;
    const tb__listing *listing;
    const char *cache_dir;
    const tb_collect_options *options;
    size_t begin, end;
    tb_collect_report report;
    tb_result first;
    tb_error error;
    unsigned *done;            /* directories looked at, all readers (under done_mu) */
    pthread_mutex_t *done_mu;
    int report_progress;       /* the calling thread's part reports */
} tb__collect_part;

static void *tb__collect_range(void *arg) {
    tb__collect_part *pt = (tb__collect_part *)arg;
    const tb_collect_options *o = pt->options;
    const tb__listing *l = pt->listing;
    size_t i;
    for (i = pt->begin; i < pt->end; i++) {
        tb_error e;
        tb_result r = tb__collect_entry(pt->bundle, l, i, pt->cache_dir, o, &e);
        unsigned done;
        pthread_mutex_lock(pt->done_mu);
        done = ++*pt->done;
        pthread_mutex_unlock(pt->done_mu);
        if (pt->report_progress && o && o->progress) o->progress(o->user, done, (uint32_t)l->count);
        if (tb__tally(&pt->report, r, &e, &pt->bundle->ctx, &pt->first, &pt->error) && o &&
            (o->flags & TB_STOP_ON_ERROR))
            break;
    }
    return NULL;
}

TBDEF tb_result tb_collect_cache(tb_bundle *b, const char *cache_dir, const tb_collect_options *o,
                                 tb_collect_report *report, tb_error *err) {
    tb__collect_part parts[TB__MAX_THREADS];
    pthread_t tids[TB__MAX_THREADS];
    pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
    unsigned done = 0;
    tb__listing l;
    unsigned t, nt, started = 1;
    tb_result r = tb_ok, first = tb_ok;
    tb_options po;
    memset(parts, 0, sizeof parts);
    if (report) memset(report, 0, sizeof *report);
    if (!b || !cache_dir)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle or cache_dir is NULL");
    if ((r = tb__list_open_top(&b->ctx, cache_dir, &l, err)) != tb_ok) return r;
    /* readers split the listing into contiguous ranges and merge in order,
       so the bundle does not depend on the thread count */
    nt = (o && (o->flags & TB_STOP_ON_ERROR)) ? 1u : tb__thread_count(o ? o->threads : 0, l.count, 64, TB__MAX_THREADS);
    memset(&po, 0, sizeof po);
    po.allocator = b->ctx.a;
    po.log = b->ctx.log;
    po.log_user = b->ctx.log_user;
    for (t = 0; t < nt; t++) {
        parts[t].listing = &l;
        parts[t].cache_dir = cache_dir;
        parts[t].options = o;
        parts[t].begin = l.count * t / nt;
        parts[t].end = l.count * (t + 1) / nt;
        parts[t].done = &done;
        parts[t].done_mu = &done_mu;
        parts[t].report_progress = t == 0;
        if (t == 0) parts[t].bundle = b;
        else if ((r = tb_bundle_create(&po, &parts[t].bundle, err)) != tb_ok) break;
    }
    for (t = 1; r == tb_ok && t < nt; t++, started++)
        if (pthread_create(&tids[t], NULL, tb__collect_range, &parts[t]) != 0) {
            tb__collect_range(&parts[t]); /* no thread to be had: do it here */
            tids[t] = pthread_self();
        }
    if (r == tb_ok) tb__collect_range(&parts[0]);
    for (t = 1; t < started; t++)
        if (!pthread_equal(tids[t], pthread_self())) pthread_join(tids[t], NULL);
    for (t = 0; t < nt; t++) {
        if (t > 0 && parts[t].bundle && r == tb_ok) r = tb__absorb(b, parts[t].bundle, err);
        if (t > 0) tb_bundle_free(parts[t].bundle);
        if (report) {
            report->collected += parts[t].report.collected;
            report->skipped += parts[t].report.skipped;
            report->failed += parts[t].report.failed;
        }
        if (first == tb_ok && parts[t].first != tb_ok) {
            first = parts[t].first;
            if (err) *err = parts[t].error;
        }
    }
    if (o && o->progress && nt > 1) o->progress(o->user, (uint32_t)l.count, (uint32_t)l.count);
    tb__list_close(&b->ctx, &l);
    return r != tb_ok ? r : first;
}

/* ---- pack: collect, derive and write in one pass ---- */
/* the Grid section's: a "KERNEL=EXPR,..." rule's parts (tb_bundle_add_grid_rule) */
static tb_result tb__split_grid_spec(const char *spec, char *key, size_t key_cap, char exprs[3][1024], uint32_t *count,
                                     tb_error *err);
static tb_result tb__add_grid_rule(tb_bundle *b, const char *spec, int allow_none, uint32_t *records_changed,
                                   tb_error *err);
/* Reader threads collect batches of TB__PACK_BATCH listing entries, each
   into a bundle of its own, and derive its launch records; the calling
   thread writes the finished batches in listing order, frees them, and
   reads batches itself while the next one is not ready. Reading and
   writing overlap, and memory holds at most `window` batches, and of those
   read ahead at most about TB__PACK_HELD_MAX bytes, instead of the whole
   bundle. Section 1's header and counts go in last, over
   placeholders, so the blocks are hashed afterwards from the written file
   (still in the page cache) on several threads. */
#define TB__PACK_BATCH 16
#ifndef TB__PACK_HELD_MAX
#define TB__PACK_HELD_MAX ((uint64_t)256 << 20)
#endif

typedef struct tb__pack_batch {
    tb_bundle *bundle;
    tb_collect_report report;
    tb_result first;            /* the first kernel refused */
    tb_result fatal;            /* the batch itself failed (memory) */
    tb_error error;             /* of fatal, else of first */
    uint64_t bytes;             /* the files it holds */
    int ready;                  /* under tb__pack.mu */
} tb__pack_batch;

typedef struct tb__pack {
    const tb__listing *l;
    const char *cache_dir;
    const tb_collect_options *co;
    tb_options po;
    int derive;
    const char *const *grid_rules;
    uint32_t grid_rule_count;
    uint32_t *grid_matched;     /* records each rule changed, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t batches, claimed, written, window;   /* claimed, written: under mu */
    uint64_t held;              /* bytes of the batches read and not written, under mu */
    tb__pack_batch *slots;      /* batch i in slots[i % window] */
    int stop;
} tb__pack;

static void tb__pack_read(tb__pack *p, size_t i) {
    tb__pack_batch *bt = &p->slots[i % p->window];
    size_t at = i * TB__PACK_BATCH, end = at + TB__PACK_BATCH < p->l->count ? at + TB__PACK_BATCH : p->l->count;
    tb_error e;
    tb_result r;
    bt->bundle = NULL;
    memset(&bt->report, 0, sizeof bt->report);
    bt->first = tb_ok;
    bt->fatal = tb_bundle_create(&p->po, &bt->bundle, &bt->error);
    for (; bt->fatal == tb_ok && at < end; at++) {
        r = tb__collect_entry(bt->bundle, p->l, at, p->cache_dir, p->co, &e);
        if (tb__tally(&bt->report, r, &e, &bt->bundle->ctx, &bt->first, &bt->error) &&
            (p->co->flags & TB_STOP_ON_ERROR))
            break;
    }
    if (bt->fatal == tb_ok && p->derive && (r = tb_bundle_derive_launch_records(bt->bundle, &e)) != tb_ok)
        bt->fatal = r, bt->error = e;
    for (at = 0; bt->fatal == tb_ok && at < p->grid_rule_count; at++) { /* names come from this batch's IR */
        uint32_t n = 0;
        r = tb__add_grid_rule(bt->bundle, p->grid_rules[at], 1, &n, &e); /* none here: another batch's */
        if (r != tb_ok) {
            bt->fatal = r, bt->error = e;
            break;
        }
        pthread_mutex_lock(&p->mu);
        p->grid_matched[at] += n;
        pthread_mutex_unlock(&p->mu);
    }
    bt->bytes = 0;
    for (at = 0; bt->bundle && at < bt->bundle->kernel_count; at++) {
        uint32_t j;
        for (j = 0; j < bt->bundle->kernels[at].artifact_count; j++)
            bt->bytes += bt->bundle->kernels[at].artifacts[j].size;
    }
    pthread_mutex_lock(&p->mu);
    p->held += bt->bytes;
    bt->ready = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Under mu: claims the next batch if the window and the byte budget have
   room (the batch the writer needs next is always claimed); SIZE_MAX if
   not. */
/* The options' grid rules: their form checked before any work, and a
   count per rule of the records it changed (a rule that changes none
   fails the pack at the end). */
static tb_result tb__pack_grid_rules(tb__pack *p, const tb__ctx *c, const tb_pack_options *o, tb_error *err) {
    char key[TB_MAX_STRING_LENGTH + 1], ex[3][1024];
    uint32_t i, nd;
    tb_result r;
    p->grid_rules = o->grid_rules, p->grid_rule_count = o->grid_rules ? o->grid_rule_count : 0;
    if (!p->grid_rule_count) return tb_ok;
    if (!(p->grid_matched = (uint32_t *)tb__alloc(c, p->grid_rule_count * sizeof *p->grid_matched)))
        return TB__OOM(err);
    memset(p->grid_matched, 0, p->grid_rule_count * sizeof *p->grid_matched);
    for (i = 0; i < p->grid_rule_count; i++) {
        if (!p->grid_rules[i])
            return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "grid rule %u is NULL", i);
        if ((r = tb__split_grid_spec(p->grid_rules[i], key, sizeof key, ex, &nd, err)) != tb_ok) return r;
    }
    return tb_ok;
}

static size_t tb__pack_claim(tb__pack *p) {
    if (p->stop || p->claimed >= p->batches || p->claimed >= p->written + p->window) return (size_t)-1;
    if (p->claimed > p->written && p->held >= TB__PACK_HELD_MAX) return (size_t)-1;
    return p->claimed++;
}

static void *tb__pack_reader(void *arg) {
    tb__pack *p = (tb__pack *)arg;
    for (;;) {
        size_t i;
        pthread_mutex_lock(&p->mu);
        while ((i = tb__pack_claim(p)) == (size_t)-1 && !p->stop && p->claimed < p->batches)
            pthread_cond_wait(&p->cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
        if (i == (size_t)-1) return NULL;
        tb__pack_read(p, i);
    }
}

/* Writes batch bt's kernels and copies its records into recs. */
static tb_result tb__pack_write(tb__pack_batch *bt, tb__writer *w, tb_bundle *recs, tb_error *err) {
    uint32_t i;
    tb_result r;
    for (i = 0; i < bt->bundle->kernel_count; i++) tb__writer_kernel(w, &bt->bundle->kernels[i]);
    for (i = 0; i < bt->bundle->record_count; i++)
        if ((r = tb_bundle_add_launch_record(recs, &bt->bundle->records[i], err)) != tb_ok) return r;
    return tb_ok;
}

TBDEF tb_result tb_pack_cache(const char *cache_dir, const char *path, const tb_pack_options *o,
                              const tb_options *options, tb_pack_report *report, tb_error *err) {
    tb_pack_options defaults;
    tb__ctx c = tb__ctx_from(options);
    tb_pack_report local;
    tb__listing l;
    tb__pack p;
    tb__writer wr;
    tb__out out;
    tb__fd_writer w;
    tb_bundle *recs = NULL;
    pthread_t tids[TB__MAX_THREADS];
    unsigned t, nt, started = 0;
    char tmp[4096 + 64];
    size_t i, total = 0;
    int begun = 0;
    tb_result r;
    if (!report) report = &local;
    memset(report, 0, sizeof *report);
    if (!o) {
        memset(&defaults, 0, sizeof defaults);
        o = &defaults;
    }
    if (!cache_dir || !path)
        return tb__fail(err, tb_err_invalid_argument, NULL, path, -1, 0, "cache_dir or path is NULL");
    if (!*path || strlen(path) > 4096)
        return tb__fail(err, tb_err_invalid_argument, NULL, path, -1, 0, "path is empty or too long");
    if ((r = tb__list_open_top(&c, cache_dir, &l, err)) != tb_ok) return r;
    memset(&p, 0, sizeof p);
    p.l = &l;
    p.cache_dir = cache_dir;
    p.co = &o->collect;
    p.po.allocator = c.a;
    p.po.log = c.log;
    p.po.log_user = c.log_user;
    p.derive = !o->no_launch_records;
    p.batches = (l.count + TB__PACK_BATCH - 1) / TB__PACK_BATCH;
    /* readers besides the calling thread, which writes and reads too */
    nt = tb__thread_count(o->collect.threads, p.batches, 4, TB__MAX_THREADS) - 1;
    p.window = 4 * (size_t)(nt + 1);
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    w.fd = -1;
    w.err = 0;
    if ((r = tb__pack_grid_rules(&p, &c, o, err)) != tb_ok) goto done;
    p.slots = (tb__pack_batch *)tb__alloc(&c, p.window * sizeof *p.slots);
    if (p.slots) memset(p.slots, 0, p.window * sizeof *p.slots);
    if (!p.slots) {
        r = TB__OOM(err);
        goto done;
    }
    if ((r = tb_bundle_create(options, &recs, err)) != tb_ok) goto done;
    if ((r = tb__temp_open(path, tmp, sizeof tmp, &w.fd, err)) != tb_ok) goto done;
    memset(&out, 0, sizeof out);
    out.write = tb__fd_write_cb;
    out.patch = tb__fd_patch_cb;
    out.read = tb__fd_read_cb;
    out.user = &w;
    out.name = path;
    out.write_errno = &w.err;
    if ((r = tb__writer_begin(&wr, &c, &out, NULL, err)) != tb_ok) goto done;
    wr.threads = o->collect.threads; /* 1: no threads, as the option says */
    begun = 1;
    for (t = 0; t < nt; t++)
        if (pthread_create(&tids[started], NULL, tb__pack_reader, &p) == 0) started++;
    for (i = 0; i < p.batches && r == tb_ok; i++) {
        tb__pack_batch *bt = &p.slots[i % p.window];
        size_t j;
        pthread_mutex_lock(&p.mu);
        while (!bt->ready) {
            if ((j = tb__pack_claim(&p)) != (size_t)-1) { /* help rather than wait */
                pthread_mutex_unlock(&p.mu);
                tb__pack_read(&p, j);
                pthread_mutex_lock(&p.mu);
            } else {
                pthread_cond_wait(&p.cv, &p.mu);
            }
        }
        pthread_mutex_unlock(&p.mu);
        report->collect.collected += bt->report.collected;
        report->collect.skipped += bt->report.skipped;
        report->collect.failed += bt->report.failed;
        if (bt->fatal != tb_ok) {
            r = bt->fatal;
            if (err) *err = bt->error;
        } else if (bt->first != tb_ok && (o->collect.flags & TB_STOP_ON_ERROR)) {
            r = bt->first;
            if (err) *err = bt->error;
        } else {
            if (bt->first != tb_ok && report->first_failure.code == tb_ok) report->first_failure = bt->error;
            r = tb__pack_write(bt, &wr, recs, err);
            if (r == tb_ok && wr.k.failed) /* stop early; the output failed */
                r = tb__fail(err, tb_err_io, NULL, path, -1, w.err, "writing the bundle failed");
        }
        tb_bundle_free(bt->bundle);
        bt->bundle = NULL;
        pthread_mutex_lock(&p.mu);
        bt->ready = 0;
        p.held -= bt->bytes;
        p.written++;
        if (r != tb_ok) p.stop = 1;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
        if (o->collect.progress)
            o->collect.progress(o->collect.user,
                                (uint32_t)((i + 1) * TB__PACK_BATCH < l.count ? (i + 1) * TB__PACK_BATCH : l.count),
                                (uint32_t)l.count);
    }
    for (i = 0; r == tb_ok && i < p.grid_rule_count; i++)
        if (!p.grid_matched[i])
            r = tb__fail(err, tb_err_not_found, NULL, NULL, -1, 0,
                         "the grid rule \"%.100s\" names no kernel (or cache key) of the bundle", p.grid_rules[i]);
    if (begun && r == tb_ok) r = tb__writer_finish(&wr, recs, &total, err);
    else if (begun) tb__writer_end(&wr);
done:
    pthread_mutex_lock(&p.mu);
    p.stop = 1;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    for (t = 0; t < started; t++) pthread_join(tids[t], NULL);
    for (i = 0; p.slots && i < p.window; i++) tb_bundle_free(p.slots[i].bundle);
    if (w.fd >= 0) r = tb__temp_finish(w.fd, tmp, sizeof tmp, path, o->write_flags, r, err);
    if (r == tb_ok) {
        report->records = recs->record_count;
        report->bytes = total;
    }
    tb_bundle_free(recs);
    tb__free(&c, p.slots);
    tb__free(&c, p.grid_matched);
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    tb__list_close(&c, &l);
    return r;
}


/* Removes dir <dfd>/<name> and what it holds, never following a link;
   depth bounds the recursion. */
static int tb__remove_tree_at(const tb__ctx *c, int dfd, const char *name, int depth) {
    tb__listing l;
    size_t i;
    if (unlinkat(dfd, name, AT_REMOVEDIR) == 0) return 0;
    if (errno != ENOTEMPTY && errno != EEXIST) return -1;
    if (depth <= 0 || tb__list_open(c, dfd, name, NULL, &l, NULL) != tb_ok) return -1;
    for (i = 0; i < l.count; i++)
        if (unlinkat(dirfd(l.dir), l.names[i], 0) != 0 && errno == EISDIR)
            tb__remove_tree_at(c, dirfd(l.dir), l.names[i], depth - 1);
    tb__list_close(c, &l);
    return unlinkat(dfd, name, AT_REMOVEDIR);
}

/* 1 if <dfd>/<name> is a directory with at least one entry. */
static int tb__dir_nonempty(int dfd, const char *name) {
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d;
    struct dirent *e;
    int any = 0;
    if (fd < 0) return 0;
    d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 0;
    }
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            any = 1;
            break;
        }
    closedir(d);
    return any;
}

/* mkdir -p for the cache directory itself. */
static int tb__mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path), i;
    if (n == 0 || n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char save = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
            buf[i] = save;
        }
    }
    return 0;
}

/* Creates <cfd>/tmp.<unique> and returns a descriptor of it that holds an
   exclusive flock, or -1 with errno. The lock is how a cleaner tells a live
   writer's directory from a crashed one's, whatever its age: a writer holds
   it from before its first file until after its rename, and the kernel
   drops it when the writer dies. A cleaner may lock a directory between
   its mkdir and the writer's flock and remove it; the writer then finds its
   lock refused or its name gone, and starts again under a new name. */
static int tb__temp_dir_create(int cfd, char *tmp, size_t cap) {
    int tries, fd = -1;
    for (tries = 0; tries < 64; tries++) {
        struct stat a, b;
        int e;
        if (tries >= 4) {
            /* a cleaner at age 0 keeps taking our directories before we lock
               them (a tight loop can, on a busy machine): step out of its
               rhythm, a little longer each time */
            struct timespec ts;
            ts.tv_sec = 0;
            ts.tv_nsec = (long)(tb__unique_seq() % 97u + 1u) * 1000L * tries;
            nanosleep(&ts, NULL);
        }
        tb__temp_name(tmp, cap, "tmp.");
        if (mkdirat(cfd, tmp, 0755) != 0) return -1;
        fd = openat(cfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            if (errno == ENOENT) continue; /* a cleaner took it already */
            e = errno;
            unlinkat(cfd, tmp, AT_REMOVEDIR);
            errno = e;
            return -1;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            e = errno;
            close(fd);
            if (e == EWOULDBLOCK || e == EAGAIN) continue; /* a cleaner holds it: it removes it */
            /* no flock here (some network filesystems): write unlocked, as
               writers before 1.2 did; the cleaner judges such directories by
               age alone */
            fd = openat(cfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0) return fd;
            if (errno == ENOENT) continue;
            e = errno;
            unlinkat(cfd, tmp, AT_REMOVEDIR);
            errno = e;
            return -1;
        }
        if (fstat(fd, &a) == 0 && fstatat(cfd, tmp, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev)
            return fd;
        close(fd); /* a cleaner removed it between our open and our lock */
    }
    errno = EAGAIN;
    return -1;
}

/* Writes one kernel into a fresh temporary directory and renames it. */
/* A file of a present kernel directory against the bytes emit would write
   there: 0 the same, 1 other (or missing), -1 an error in err. */
static int tb__file_differs(const tb_bundle *b, int dfd, const tb_kernel *k, const char *name,
                            const unsigned char *want, size_t n, tb_error *err) {
    unsigned char buf[65536];
    size_t at = 0;
    struct stat st;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), r = 0;
    (void)b;
    if (fd < 0)
        return errno == ENOENT || errno == ELOOP
                   ? 1
                   : (tb__fail(err, tb_err_io, k->hash, name, -1, errno, "cannot open the file"), -1);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != n) r = 1;
    while (!r && at < n) {
        size_t want_n = n - at < sizeof buf ? n - at : sizeof buf;
        ssize_t got = read(fd, buf, want_n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            r = got < 0 ? (tb__fail(err, tb_err_io, k->hash, name, -1, errno, "reading the file failed"), -1) : 1;
        else if (memcmp(buf, want + at, (size_t)got)) r = 1;
        else at += (size_t)got;
    }
    close(fd);
    return r;
}
/* The bytes emit writes for artifact a into the cache at target (a .json
   with the sentinel replaced), in *out (freed by the caller with
   tb__free(&b->ctx, *out)) or, where that is the artifact's own memory,
   *data with *out NULL. */
static tb_result tb__emit_bytes(const tb_bundle *b, const tb_kernel *k, const tb_artifact *a, const char *target,
                                const void **data, size_t *size, unsigned char **out, tb_error *err);
static tb_result tb__emit_bytes(const tb_bundle *b, const tb_kernel *k, const tb_artifact *a, const char *target,
                                const void **data, size_t *size, unsigned char **out, tb_error *err) {
    void *copy = NULL;
    int found;
    *data = a->data, *size = (size_t)a->size, *out = NULL;
    if (!tb__has_suffix(a->name, ".json")) { /* a mapped bundle's: read through the file, never the mapping */
        if (tb__artifact_bytes(b, k, a, 0, data, &copy, err) != tb_ok) return err ? err->code : tb_err_io;
        *out = (unsigned char *)copy;
        return tb_ok;
    }
    /* read in this process: a mapped bundle's bytes come through its
       descriptor, so a truncated file is an error, not SIGBUS */
    if (tb__artifact_bytes(b, k, a, 1, data, &copy, err) != tb_ok) return err ? err->code : tb_err_io;
    found = tb__replace_size((const unsigned char *)*data, *size, TB_REPLACE_SENTINEL, target, size);
    if (found > 0 && (*out = (unsigned char *)tb__alloc(&b->ctx, *size)) != NULL)
        tb__replace_into(*out, (const unsigned char *)*data, (size_t)a->size, TB_REPLACE_SENTINEL, target);
    if (found == 0 && copy) { /* no sentinel: the copy's bytes as they are */
        *out = (unsigned char *)copy, *data = copy;
        return tb_ok;
    }
    tb__free(&b->ctx, copy);
    if (found == -2)
        return tb__fail(err, tb_err_limit, k->hash, a->name, -1, 0,
                        "the file holds more than TB_MAX_SENTINELS (%u) sentinels " TB_REPLACE_SENTINEL,
                        (unsigned)TB_MAX_SENTINELS);
    if (found < 0 || (found > 0 && !*out)) return TB__OOM(err);
    *data = *out ? (const void *)*out : a->data; /* no sentinel, no copy: write(2) reads the original */
    return tb_ok;
}

/* A present kernel directory against the bundle's kernel: 0 the same, 1
   other (err names the file), -1 an error in err. */
static int tb__kernel_differs(const tb_bundle *b, int cfd, const tb_kernel *k, const char *target, tb_error *err) {
    int dfd = openat(cfd, k->hash, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r = 0;
    uint32_t j;
    if (dfd < 0) return tb__fail(err, tb_err_io, k->hash, k->hash, -1, errno, "cannot open the kernel's directory"), -1;
    for (j = 0; j < k->artifact_count && !r; j++) {
        const void *data;
        size_t size;
        unsigned char *own = NULL;
        if (tb__emit_bytes(b, k, &k->artifacts[j], target, &data, &size, &own, err) != tb_ok) {
            r = -1;
            break;
        }
        r = tb__file_differs(b, dfd, k, k->artifacts[j].name, (const unsigned char *)data, size, err);
        tb__free(&b->ctx, own);
        if (r == 1)
            tb__fail(err, tb_err_io, k->hash, k->artifacts[j].name, -1, 0,
                     "the cache holds kernel %.60s with another %.80s (missing, or other bytes) than the bundle's",
                     k->hash, k->artifacts[j].name);
    }
    close(dfd);
    return r;
}

static tb_emit_status tb__emit_kernel(const tb_bundle *b, int cfd, const char *cache_abs, const tb_kernel *k,
                                      unsigned flags, tb_error *err) {
    char tmp[96], target[4352];
    struct stat st;
    int tfd = -1, replacing = 0;
    uint32_t j;
    if ((size_t)snprintf(target, sizeof target, "%s/%s", cache_abs, k->hash) >= sizeof target) {
        tb__fail(err, tb_err_limit, k->hash, cache_abs, -1, 0, "target path too long");
        return TB_EMIT_FAILED;
    }
    if (fstatat(cfd, k->hash, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        int d;
        if (!S_ISDIR(st.st_mode)) {
            tb__fail(err, tb_err_io, k->hash, k->hash, -1, EEXIST, "the target exists and is not a directory");
            return TB_EMIT_FAILED;
        }
        if (tb__dir_nonempty(cfd, k->hash)) {
            if (!(flags & (TB_EMIT_VERIFY | TB_EMIT_REPLACE))) return TB_EMIT_PRESENT;
            if ((d = tb__kernel_differs(b, cfd, k, target, err)) < 0) return TB_EMIT_FAILED;
            if (!d) return TB_EMIT_PRESENT;
            if (!(flags & TB_EMIT_REPLACE)) return TB_EMIT_DIFFERS;
            replacing = 1;
        }
    }
    if ((tfd = tb__temp_dir_create(cfd, tmp, sizeof tmp)) < 0) {
        tb__fail(err, tb_err_io, k->hash, tmp, -1, errno, "cannot create and lock a temporary directory in %s",
                 cache_abs);
        return TB_EMIT_FAILED;
    }
    for (j = 0; j < k->artifact_count; j++) {
        const tb_artifact *a = &k->artifacts[j];
        const void *data = a->data;
        size_t size = (size_t)a->size;
        unsigned char *rep = NULL;
        int fd, ok;
        if (tb__has_suffix(a->name, ".json") && tb__emit_bytes(b, k, a, target, &data, &size, &rep, err) != tb_ok)
            goto fail;
        fd = openat(tfd, a->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) {
            tb__free(&b->ctx, rep);
            tb__fail(err, tb_err_io, k->hash, a->name, -1, errno, "cannot create the file");
            goto fail;
        }
        /* a mapped bundle's payload is copied from its file by offset, never
           read through the mapping: a file truncated meanwhile is an error */
        if (data == a->data && b->read_at && size && (uintptr_t)a->data >= (uintptr_t)b->map_base &&
            (uintptr_t)a->data - (uintptr_t)b->map_base <= b->map_size &&
            size <= b->map_size - ((uintptr_t)a->data - (uintptr_t)b->map_base))
            ok = tb__copy_range(b->map_fd, (size_t)((uintptr_t)a->data - (uintptr_t)b->map_base), fd, size) == 0;
        else
            ok = tb__write_full(fd, data, size) == 0;
        ok = ok && (!(flags & TB_EMIT_FSYNC) || fsync(fd) == 0);
        tb__free(&b->ctx, rep);
        if (!ok) {
            tb__fail(err, tb_err_io, k->hash, a->name, -1, errno, "writing %zu bytes failed", size);
            tb__close_keep_errno(fd);
            goto fail;
        }
        if (close(fd) != 0) {
            tb__fail(err, tb_err_io, k->hash, a->name, -1, errno, "close failed");
            goto fail;
        }
    }
    if ((flags & TB_EMIT_FSYNC) && fsync(tfd) != 0) {
        tb__fail(err, tb_err_io, k->hash, tmp, -1, errno, "fsync of the temporary directory failed");
        goto fail;
    }
    if (replacing) { /* the old directory aside, then the new one in its place, then the old one gone */
        char old[96];
        tb__temp_name(old, sizeof old, "tmp.");
        if (renameat(cfd, k->hash, cfd, old) != 0) {
            tb__fail(err, tb_err_io, k->hash, k->hash, -1, errno, "renaming the kernel's old directory aside failed");
            goto fail;
        }
        if (renameat(cfd, tmp, cfd, k->hash) != 0) {
            int e = errno;
            if (renameat(cfd, old, cfd, k->hash) != 0)
                tb__remove_tree_at(&b->ctx, cfd, old, 1); /* (another writer's is there) */
            tb__fail(err, tb_err_io, k->hash, tmp, -1, e, "renaming the temporary directory onto %s failed", k->hash);
            goto fail;
        }
        close(tfd);
        tb__remove_tree_at(&b->ctx, cfd, old, 1);
        if ((flags & TB_EMIT_FSYNC) && fsync(cfd) != 0) {
            tb__fail(err, tb_err_io, k->hash, cache_abs, -1, errno, "fsync of the cache directory failed");
            return TB_EMIT_FAILED;
        }
        return TB_EMIT_REPLACED;
    }
    /* renamed with the lock still held: a cleaner that locks it later finds
       the name gone and leaves the finished kernel alone */
    if (renameat(cfd, tmp, cfd, k->hash) != 0) {
        int e = errno;
        if (e == ENOTEMPTY || e == EEXIST) {
            /* another writer renamed first: its copy is complete, ours goes */
            tb__remove_tree_at(&b->ctx, cfd, tmp, 1);
            close(tfd);
            return TB_EMIT_PRESENT;
        }
        tb__fail(err, tb_err_io, k->hash, tmp, -1, e, "renaming the temporary directory onto %s failed", k->hash);
        goto fail;
    }
    close(tfd);
    tfd = -1;
    if ((flags & TB_EMIT_FSYNC) && fsync(cfd) != 0) {
        tb__fail(err, tb_err_io, k->hash, cache_abs, -1, errno, "fsync of the cache directory failed");
        return TB_EMIT_FAILED;
    }
    return TB_EMIT_WRITTEN;
fail:
    tb__remove_tree_at(&b->ctx, cfd, tmp, 1);
    if (tfd >= 0) close(tfd); /* the lock goes last */
    return TB_EMIT_FAILED;
}

/* Emit's default writer count: on tmpfs, whose directory operations are
   memory only, more writers keep paying (see tb_emit_options.threads). */
static size_t tb__emit_writers(int cfd) {
#if defined(__linux__)
    struct statfs sf;
    if (fstatfs(cfd, &sf) == 0 && (unsigned long)sf.f_type == 0x01021994UL) return TB__MAX_THREADS; /* TMPFS_MAGIC */
#else
    (void)cfd;
#endif
    return 4;
}

/* Emit's shared state: kernels are claimed one at a time by the calling
   thread and any workers; results are delivered (counted, reported through
   on_kernel) by the calling thread, in kernel order. */
typedef struct tb__emit_job {
    const tb_bundle *b;
    const tb_emit_options *o;
    int cfd;
    const char *cache_abs;
    unsigned flags;
    pthread_mutex_t mu;
    uint32_t next;              /* next kernel to claim */
    unsigned char *status;      /* per kernel: 0 pending, else 1 + tb_emit_status */
    tb_error **errors;          /* per kernel: what a failed one said */
    uint32_t delivered;
    unsigned char *ok_mask;     /* per kernel, for the names metadata */
    tb_emit_report rep;
    tb_result first;
    tb_error first_error;
} tb__emit_job;

static int tb__emit_claim(tb__emit_job *j, uint32_t *i) {
    int got;
    pthread_mutex_lock(&j->mu);
    got = j->next < j->b->kernel_count;
    if (got) *i = j->next++;
    pthread_mutex_unlock(&j->mu);
    return got;
}

static void tb__emit_one(tb__emit_job *j, uint32_t i) {
    tb_error e;
    tb_emit_status s;
    tb_error *keep = NULL;
    e.message[0] = 0;
    s = tb__emit_kernel(j->b, j->cfd, j->cache_abs, &j->b->kernels[i], j->flags, &e);
    if ((s == TB_EMIT_FAILED || s == TB_EMIT_DIFFERS) &&
        (keep = (tb_error *)tb__alloc(&j->b->ctx, sizeof *keep)) != NULL)
        *keep = e;
    pthread_mutex_lock(&j->mu);
    j->errors[i] = keep;
    j->status[i] = (unsigned char)(1 + s);
    pthread_mutex_unlock(&j->mu);
}

static void *tb__emit_worker(void *arg) {
    tb__emit_job *j = (tb__emit_job *)arg;
    uint32_t i;
    while (tb__emit_claim(j, &i)) tb__emit_one(j, i);
    return NULL;
}

/* Counts and reports the finished kernels that follow those delivered. */
static void tb__emit_deliver(tb__emit_job *j) {
    static const tb_error oom = {
        tb_err_out_of_memory, 0, 0, -1, "", "", "out of memory: the error of a failed kernel was lost"
    };
    for (;;) {
        uint32_t i = j->delivered;
        tb_emit_status s;
        const tb_error *e;
        unsigned char st;
        if (i >= j->b->kernel_count) return;
        pthread_mutex_lock(&j->mu);
        st = j->status[i];
        pthread_mutex_unlock(&j->mu);
        if (!st) return;
        s = (tb_emit_status)(st - 1);
        e = j->errors[i] ? j->errors[i] : &oom;
        if (s == TB_EMIT_WRITTEN) j->rep.written++;
        else if (s == TB_EMIT_PRESENT) j->rep.present++;
        else if (s == TB_EMIT_DIFFERS) j->rep.differs++;
        else if (s == TB_EMIT_REPLACED) j->rep.replaced++;
        else j->rep.failed++;
        j->ok_mask[i] = s != TB_EMIT_FAILED && s != TB_EMIT_DIFFERS;
        if (j->o && j->o->on_kernel)
            j->o->on_kernel(j->o->user, i, &j->b->kernels[i], s,
                            s == TB_EMIT_FAILED || s == TB_EMIT_DIFFERS ? e : NULL);
        if (s == TB_EMIT_DIFFERS && j->first == tb_ok) { /* a result, not a failure: it does not stop the others */
            j->first = e->code;
            j->first_error = *e;
        }
        if (s == TB_EMIT_FAILED) {
            tb__log(&j->b->ctx, TB_LOG_WARN, "emit: %s", e->message);
            if (j->first == tb_ok) {
                j->first = e->code;
                j->first_error = *e;
            }
            if (j->flags & TB_EMIT_STOP_ON_ERROR) {
                pthread_mutex_lock(&j->mu);
                j->next = j->b->kernel_count; /* claim nothing more */
                pthread_mutex_unlock(&j->mu);
            }
        }
        j->delivered++;
    }
}

TBDEF tb_result tb_emit(const tb_bundle *b, const char *cache_dir, const tb_emit_options *o, tb_emit_report *report,
                        tb_names **names, tb_error *err) {
    tb__emit_job j;
    char cache_abs[4096];
    pthread_t tids[TB__MAX_THREADS];
    unsigned t, nt, started = 1;
    uint32_t i, n;
    void *block;
    tb_result r;
    if (report) memset(report, 0, sizeof *report);
    if (names) *names = NULL;
    if (!b || !cache_dir)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle or cache_dir is NULL");
    if (!*cache_dir) /* as collect and pack refuse it, rather than write into "." */
        return tb__fail(err, tb_err_invalid_argument, NULL, cache_dir, -1, 0, "the cache directory path is empty");
    if (o && (o->flags & ~(unsigned)(TB_EMIT_FSYNC | TB_EMIT_STOP_ON_ERROR | TB_EMIT_VERIFY | TB_EMIT_REPLACE)))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "unknown emit flags 0x%x", o->flags);
    /* a built bundle may hold one hash twice (the check is O(n) here, not
       O(n) per add): which copy landed would depend on the writers */
    if ((r = tb__check_unique(b, 1, 0, err)) != tb_ok) return r;
    if ((r = tb__absolute(cache_dir, cache_abs, sizeof cache_abs, err)) != tb_ok) return r;
    if (tb__mkdirs(cache_abs) != 0)
        return tb__fail(err, tb_err_io, NULL, cache_dir, -1, errno, "cannot create the cache directory");
    memset(&j, 0, sizeof j);
    j.b = b;
    j.o = o;
    j.flags = o ? o->flags : 0;
    j.cache_abs = cache_abs;
    n = b->kernel_count;
    /* per kernel: an error pointer, a status byte and a names flag */
    block = tb__alloc(&b->ctx, (size_t)n * (sizeof(tb_error *) + 2));
    if (!block) return TB__OOM(err);
    memset(block, 0, (size_t)n * (sizeof(tb_error *) + 2));
    j.errors = (tb_error **)block;
    j.status = (unsigned char *)(j.errors + n);
    j.ok_mask = j.status + n;
    j.cfd = open(cache_abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (j.cfd < 0) {
        tb__free(&b->ctx, block);
        return tb__fail(err, tb_err_io, NULL, cache_dir, -1, errno, "cannot open the cache directory");
    }
    pthread_mutex_init(&j.mu, NULL);
    /* stop-on-error needs the exact order of one writer; verify and
       replace do not (each writer compares the kernels it claims) */
    nt = (j.flags & TB_EMIT_STOP_ON_ERROR) ? 1u : tb__thread_count(o ? o->threads : 0, n, 16, tb__emit_writers(j.cfd));
    for (t = 1; t < nt; t++, started++)
        if (pthread_create(&tids[t], NULL, tb__emit_worker, &j) != 0) break;
    for (;;) {
        int more = tb__emit_claim(&j, &i);
        if (more) tb__emit_one(&j, i);
        tb__emit_deliver(&j);
        if (!more) break;
    }
    for (t = 1; t < started; t++) pthread_join(tids[t], NULL);
    tb__emit_deliver(&j);
    close(j.cfd);
    pthread_mutex_destroy(&j.mu);
    for (i = 0; i < n; i++) tb__free(&b->ctx, j.errors[i]);
    if (j.first != tb_ok && err) *err = j.first_error;
    j.rep.threads = started;
    if (report) *report = j.rep;
    if (names) {
        tb_error ne;
        if (tb__make_names(b, j.ok_mask, names, &ne) != tb_ok && j.first == tb_ok) {
            j.first = ne.code;
            if (err) *err = ne;
        }
    }
    tb__free(&b->ctx, block);
    return j.first;
}

TBDEF tb_result tb_remove_stale_temporaries(const char *cache_dir, double min_age, uint32_t *removed, tb_error *err) {
    tb__ctx c = tb__ctx_from(NULL);
    tb__listing l;
    size_t i;
    uint32_t n = 0;
    time_t now = time(NULL);
    tb_result r;
    if (removed) *removed = 0;
    if (!cache_dir) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "cache_dir is NULL");
    if ((r = tb__list_open_top(&c, cache_dir, &l, err)) != tb_ok) return r;
    for (i = 0; i < l.count; i++) {
        struct stat st, held;
        int fd, locked;
        if (strncmp(l.names[i], "tmp.", 4) != 0) continue;
        if (fstatat(dirfd(l.dir), l.names[i], &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
        if (difftime(now, st.st_mtime) < min_age) continue;
        /* a live writer holds the directory's lock (tb__temp_dir_create):
           never remove what it is writing, at any age */
        fd = openat(dirfd(l.dir), l.names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        locked = flock(fd, LOCK_EX | LOCK_NB) == 0;
        if (!locked && errno != EWOULDBLOCK && errno != EAGAIN) {
            /* no flock on this filesystem: age alone decides, as before 1.2 */
            close(fd);
            if (tb__remove_tree_at(&c, dirfd(l.dir), l.names[i], 2) == 0) n++;
            continue;
        }
        if (!locked || fstat(fd, &held) != 0 ||
            fstatat(dirfd(l.dir), l.names[i], &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_ino != held.st_ino ||
            st.st_dev != held.st_dev) {
            close(fd); /* locked by a writer, or renamed into place meanwhile */
            continue;
        }
        if (tb__remove_tree_at(&c, dirfd(l.dir), l.names[i], 2) == 0) n++;
        close(fd);
    }
    tb__list_close(&c, &l);
    if (removed) *removed = n;
    return tb_ok;
}

/* ---- the bundler context ---- */
typedef struct tb__put {
    char *hash;
    int32_t device;
} tb__put;

struct tb_bundler {
    tb__ctx ctx;
    pthread_mutex_t mu;
    char cache_dir[4096];
    tb__put *puts;
    uint32_t put_count, put_cap;
    tb_bundle *records;   /* holds put launch records until collect */
};

TBDEF tb_result tb_bundler_begin(const tb_options *options, const char *cache_dir, tb_bundler **out, tb_error *err) {
    tb__ctx c = tb__ctx_from(options);
    tb_bundler *z;
    tb_result r;
    if (!out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "out is NULL");
    *out = NULL;
    z = (tb_bundler *)tb__alloc(&c, sizeof *z);
    if (!z) return TB__OOM(err);
    memset(z, 0, sizeof *z);
    z->ctx = c;
    if ((r = tb_cache_dir_resolve(cache_dir, z->cache_dir, sizeof z->cache_dir, err)) != tb_ok ||
        (r = tb_bundle_create(options, &z->records, err)) != tb_ok) {
        tb__free(&c, z);
        return r;
    }
    pthread_mutex_init(&z->mu, NULL);
    *out = z;
    return tb_ok;
}

TBDEF tb_result tb_bundler_put(tb_bundler *z, const char *hash, int32_t device, tb_error *err) {
    tb_result r;
    size_t n;
    char *h;
    if (!z) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundler is NULL");
    if ((r = tb__check_name(hash, "kernel hash", hash, -1, err)) != tb_ok) return r;
    n = strlen(hash);
    h = (char *)tb__alloc(&z->ctx, n + 1);
    if (!h) return TB__OOM(err);
    memcpy(h, hash, n + 1);
    pthread_mutex_lock(&z->mu);
    if (z->put_count >= TB_MAX_KERNELS ||
        !tb__grow(&z->ctx, (void **)&z->puts, &z->put_cap, z->put_count + 1, sizeof(tb__put))) {
        pthread_mutex_unlock(&z->mu);
        tb__free(&z->ctx, h);
        return TB__OOM(err);
    }
    z->puts[z->put_count].hash = h;
    z->puts[z->put_count].device = device;
    z->put_count++;
    pthread_mutex_unlock(&z->mu);
    return tb_ok;
}

TBDEF tb_result tb_bundler_put_launch_record(tb_bundler *z, const tb_launch_record *rec, tb_error *err) {
    tb_result r;
    if (!z) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundler is NULL");
    pthread_mutex_lock(&z->mu);
    r = tb_bundle_add_launch_record(z->records, rec, err);
    pthread_mutex_unlock(&z->mu);
    return r;
}

static void tb__bundler_reset(tb_bundler *z) {
    uint32_t i;
    for (i = 0; i < z->put_count; i++) tb__free(&z->ctx, z->puts[i].hash);
    z->put_count = 0;
}

TBDEF tb_result tb_bundler_collect(tb_bundler *z, const tb_collect_options *o, tb_bundle **out, tb_names **names,
                                   tb_collect_report *report, tb_error *err) {
    tb_collect_report rep;
    tb_bundle *b = NULL;
    tb_result r = tb_ok;
    uint32_t i, j;
    tb_options opt;
    memset(&rep, 0, sizeof rep);
    if (report) *report = rep;
    if (names) *names = NULL;
    if (!z || !out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundler or out is NULL");
    *out = NULL;
    memset(&opt, 0, sizeof opt);
    opt.allocator = z->ctx.a;
    opt.log = z->ctx.log;
    opt.log_user = z->ctx.log_user;
    pthread_mutex_lock(&z->mu);
    if ((r = tb_bundle_create(&opt, &b, err)) != tb_ok) goto done;
    for (i = 0; i < z->put_count; i++) {
        tb_error e;
        int dup = 0;
        for (j = 0; j < i && !dup; j++)
            dup = strcmp(z->puts[j].hash, z->puts[i].hash) == 0; /* one directory per hash: the first put wins */
        if (dup) continue;
        r = tb_collect_kernel(b, z->cache_dir, z->puts[i].hash, z->puts[i].device, o, &e);
        if (r == tb_ok) {
            rep.collected++;
        } else if (r == tb_err_not_found) {
            rep.missing++;
            tb__log(&z->ctx, TB_LOG_INFO, "bundler: %s", e.message);
        } else {
            rep.failed++;
            tb__log(&z->ctx, TB_LOG_WARN, "bundler: %s", e.message);
            if (o && (o->flags & TB_STOP_ON_ERROR)) {
                if (err) *err = e;
                goto done;
            }
        }
    }
    r = tb_ok;
    for (i = 0; i < z->records->record_count; i++)
        if ((r = tb_bundle_add_launch_record(b, &z->records->records[i], err)) != tb_ok) goto done;
    if (names && (r = tb_bundle_names(b, names, err)) != tb_ok) goto done;
done:
    if (r != tb_ok) {
        tb_bundle_free(b);
        b = NULL;
    } else {
        /* a collected bundle starts the next round empty, as PyTorch's */
        tb_bundle *fresh;
        tb__bundler_reset(z);
        if (tb_bundle_create(&opt, &fresh, NULL) == tb_ok) {
            tb_bundle_free(z->records);
            z->records = fresh;
        }
    }
    pthread_mutex_unlock(&z->mu);
    *out = b;
    if (report) *report = rep;
    return r;
}

TBDEF void tb_bundler_end(tb_bundler *z) {
    tb__ctx c;
    if (!z) return;
    c = z->ctx;
    tb__bundler_reset(z);
    tb__free(&c, z->puts);
    tb_bundle_free(z->records);
    pthread_mutex_destroy(&z->mu);
    tb__free(&c, z);
}

/* ---------------------------------------------------------------------- */
/* >>parsers  Parsers: metadata JSON, the tt.func line, autotune choices */
/* Both read untrusted bytes with an explicit end (no NUL needed), bound  */
/* their nesting, and say where parsing stopped. The JSON reader reads    */
/* the top-level keys the launcher needs and skips the rest.             */
/* ---------------------------------------------------------------------- */
typedef struct tb__json {
    const char *p, *start, *end;
    tb_error *err;
    const char *doc;             /* what the text is, for messages; NULL: "metadata JSON" */
    long long base;              /* the text's offset in its file */
} tb__json;

static tb_result tb__jfail(tb__json *j, const char *what) {
    return tb__fail(j->err, tb_err_parse, NULL, NULL, j->base + (long long)(j->p - j->start), 0, "%s: %s",
                    j->doc ? j->doc : "metadata JSON", what);
}
static void tb__jws(tb__json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}
static int tb__hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
/* A string; decoded into out (cap bytes, NUL-terminated) when out != NULL.
   With len, one that does not fit is read to its end all the same (out
   then ""), *len its decoded bytes; without, it is refused. */
static tb_result tb__jstring_len(tb__json *j, char *out, size_t cap, size_t *len) {
    size_t n = 0;
    if (j->p >= j->end || *j->p != '"') return tb__jfail(j, "expected a string");
    j->p++;
    while (j->p < j->end && *j->p != '"') {
        unsigned cp;
        char ch = *j->p++;
        if ((unsigned char)ch < 0x20) return tb__jfail(j, "control character in a string");
        if (ch == '\\') {
            if (j->p >= j->end) break;
            ch = *j->p++;
            switch (ch) {
            case '"': case '\\': case '/': cp = (unsigned char)ch; break;
            case 'b': cp = 8; break;
            case 'f': cp = 12; break;
            case 'n': cp = 10; break;
            case 'r': cp = 13; break;
            case 't': cp = 9; break;
            case 'u': {
                int k, v;
                if (j->end - j->p < 4) return tb__jfail(j, "short \\u escape");
                for (cp = 0, k = 0; k < 4; k++) {
                    if ((v = tb__hexval(j->p[k])) < 0) return tb__jfail(j, "bad \\u escape");
                    cp = cp * 16 + (unsigned)v;
                }
                j->p += 4;
                if (cp == 0) return tb__jfail(j, "\\u0000 in a string");
                if (cp >= 0xdc00 && cp < 0xe000) return tb__jfail(j, "a lone \\u surrogate");
                if (cp >= 0xd800 && cp < 0xdc00) { /* a pair: one code point past U+FFFF */
                    unsigned lo = 0;
                    if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u')
                        return tb__jfail(j, "a lone \\u surrogate");
                    for (k = 2; k < 6; k++) {
                        if ((v = tb__hexval(j->p[k])) < 0) return tb__jfail(j, "bad \\u escape");
                        lo = lo * 16 + (unsigned)v;
                    }
                    if (lo < 0xdc00 || lo >= 0xe000) return tb__jfail(j, "a lone \\u surrogate");
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    j->p += 6;
                }
                break;
            }
            default: return tb__jfail(j, "unknown escape");
            }
            if (out) {
                /* UTF-8 encode */
                unsigned char buf[4];
                size_t m = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4, q;
                if (m == 1) buf[0] = (unsigned char)cp;
                else if (m == 2) buf[0] = (unsigned char)(0xc0 | (cp >> 6)), buf[1] = (unsigned char)(0x80 | (cp & 63));
                else if (m == 3)
                    buf[0] = (unsigned char)(0xe0 | (cp >> 12)), buf[1] = (unsigned char)(0x80 | ((cp >> 6) & 63)),
                    buf[2] = (unsigned char)(0x80 | (cp & 63));
                else
                    buf[0] = (unsigned char)(0xf0 | (cp >> 18)), buf[1] = (unsigned char)(0x80 | ((cp >> 12) & 63)),
                    buf[2] = (unsigned char)(0x80 | ((cp >> 6) & 63)), buf[3] = (unsigned char)(0x80 | (cp & 63));
                if (n + m >= cap && !len) return tb__jfail(j, "string too long");
                for (q = 0; q < m; q++, n++)
                    if (n < cap) out[n] = (char)buf[q];
            }
        } else if (out) {
            if (n + 1 >= cap && !len) return tb__jfail(j, "string too long");
            if (n < cap) out[n] = ch;
            n++;
        }
    }
    if (j->p >= j->end) return tb__jfail(j, "unterminated string");
    j->p++;
    if (out) out[n < cap ? n : 0] = 0;
    if (len) *len = n;
    return tb_ok;
}
static tb_result tb__jstring(tb__json *j, char *out, size_t cap) { return tb__jstring_len(j, out, cap, NULL); }
/* A number; *is_int says whether it was an integer that fits int64. */
static tb_result tb__jnumber(tb__json *j, int64_t *v, int *is_int) {
    const char *s = j->p;
    int neg = 0, digits = 0, overflow = 0;
    uint64_t acc = 0;
    *is_int = 1;
    if (j->p < j->end && *j->p == '-') neg = 1, j->p++;
    if (j->end - j->p > 1 && j->p[0] == '0' && j->p[1] >= '0' && j->p[1] <= '9')
        return tb__jfail(j, "a number with a leading zero");
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        unsigned d = (unsigned)(*j->p - '0');
        if (acc > (UINT64_MAX - d) / 10) overflow = 1;
        else acc = acc * 10 + d;
        j->p++;
        digits++;
    }
    if (!digits) {
        j->p = s;
        return tb__jfail(j, "expected a value");
    }
    /* JSON's grammar: a fraction and an exponent each with a digit at least */
    if (j->p < j->end && *j->p == '.') {
        *is_int = 0;
        if (++j->p >= j->end || *j->p < '0' || *j->p > '9') return tb__jfail(j, "a number with no digit after its '.'");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        *is_int = 0;
        if (++j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9') return tb__jfail(j, "a number with no digit in its exponent");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    }
    if (overflow || acc > (uint64_t)INT64_MAX + (uint64_t)neg) *is_int = 0;
    else *v = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return tb_ok;
}
static int tb__jlit(tb__json *j, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(j->end - j->p) >= n && memcmp(j->p, lit, n) == 0) {
        j->p += n;
        return 1;
    }
    return 0;
}
static tb_result tb__jskip(tb__json *j, int depth) {
    int64_t v;
    int is_int;
    tb_result r;
    if (depth > TB_MAX_JSON_DEPTH) return tb__jfail(j, "nested too deeply");
    tb__jws(j);
    if (j->p >= j->end) return tb__jfail(j, "unexpected end");
    if (*j->p == '"') return tb__jstring(j, NULL, 0);
    if (*j->p == '{' || *j->p == '[') {
        char close = *j->p == '{' ? '}' : ']';
        int obj = *j->p == '{';
        j->p++;
        tb__jws(j);
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return tb_ok;
        }
        for (;;) {
            if (obj) {
                tb__jws(j);
                if ((r = tb__jstring(j, NULL, 0)) != tb_ok) return r;
                tb__jws(j);
                if (j->p >= j->end || *j->p != ':') return tb__jfail(j, "expected ':'");
                j->p++;
            }
            if ((r = tb__jskip(j, depth + 1)) != tb_ok) return r;
            tb__jws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == close) {
                j->p++;
                return tb_ok;
            }
            return tb__jfail(j, "expected ',' or a closing bracket");
        }
    }
    if (tb__jlit(j, "true") || tb__jlit(j, "false") || tb__jlit(j, "null")) return tb_ok;
    return tb__jnumber(j, &v, &is_int);
}
/* After a member of an object or array: 1 when a ',' follows (another
   member), 0 when `close` does (the end), -1 with *r set otherwise. */
static int tb__jmore(tb__json *j, char close, tb_result *r) {
    tb__jws(j);
    if (j->p < j->end && *j->p == ',') return j->p++, 1;
    if (j->p < j->end && *j->p == close) return j->p++, 0;
    *r = tb__jfail(j, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    return -1;
}
static tb_result tb__juint(tb__json *j, const char *key, uint64_t max, uint64_t *out) {
    int64_t v = 0;
    int is_int;
    tb_result r;
    if ((r = tb__jnumber(j, &v, &is_int)) != tb_ok) return r;
    if (!is_int || v < 0 || (uint64_t)v > max)
        return tb__fail(j->err, tb_err_parse, NULL, NULL, j->base + (long long)(j->p - j->start), 0,
                        "%s: \"%s\" is not an integer in 0..%llu", j->doc ? j->doc : "metadata JSON", key,
                        (unsigned long long)max);
    *out = (uint64_t)v;
    return tb_ok;
}

/* "tensordesc_meta": [{"swizzle": 3, "elem_size": 4, "elem_type": 7,
   "block_size": [32, 32], "fp4_padded": false}, ...]: one entry per
   tensor descriptor argument that Triton lowered to TMA. */
static tb_result tb__jtensordescs(tb__json *j, tb_kernel_metadata *md) {
    tb_result r;
    if (j->p >= j->end || *j->p != '[') return tb__jfail(j, "tensordesc_meta is not an array");
    j->p++;
    tb__jws(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        return tb_ok;
    }
    for (;;) {
        tb_tensordesc_meta *m;
        tb__jws(j);
        if (md->tensordesc_count >= TB_MAX_TENSORDESCS)
            return tb__jfail(j, "more than TB_MAX_TENSORDESCS tensordesc_meta entries");
        m = &md->tensordescs[md->tensordesc_count++];
        memset(m, 0, sizeof *m);
        m->tma = 1;
        if (j->p >= j->end || *j->p != '{') return tb__jfail(j, "a tensordesc_meta entry is not an object");
        j->p++;
        for (;;) {
            char key[32];
            uint64_t v;
            tb__jws(j);
            if (j->p < j->end && *j->p == '"' && (size_t)(j->end - j->p) > 32 && memchr(j->p + 1, '"', 31) == NULL) {
                if ((r = tb__jstring(j, NULL, 0)) != tb_ok) return r; /* a long key: not ours */
                key[0] = 0;
            } else if ((r = tb__jstring(j, key, sizeof key)) != tb_ok) {
                return r;
            }
            tb__jws(j);
            if (j->p >= j->end || *j->p != ':') return tb__jfail(j, "expected ':'");
            j->p++;
            tb__jws(j);
            if (strcmp(key, "block_size") == 0) {
                if (j->p >= j->end || *j->p != '[') return tb__jfail(j, "block_size is not an array");
                j->p++;
                for (;;) {
                    tb__jws(j);
                    if (m->rank >= TB_MAX_TENSOR_RANK) return tb__jfail(j, "block_size has more than 5 entries");
                    if ((r = tb__juint(j, key, 256, &v)) != tb_ok) return r;
                    m->block[m->rank++] = (uint32_t)v;
                    tb__jws(j);
                    if (j->p < j->end && *j->p == ',') { j->p++; continue; }
                    if (j->p < j->end && *j->p == ']') { j->p++; break; }
                    return tb__jfail(j, "block_size: expected ',' or ']'");
                }
            } else if (strcmp(key, "fp4_padded") == 0) {
                if (tb__jlit(j, "true")) m->fp4_padded = 1;
                else if (!tb__jlit(j, "false")) return tb__jfail(j, "fp4_padded is not a boolean");
            } else if (strcmp(key, "swizzle") == 0 || strcmp(key, "elem_size") == 0 || strcmp(key, "elem_type") == 0) {
                if ((r = tb__juint(j, key, 255, &v)) != tb_ok) return r;
                if (key[0] == 's') m->swizzle = (uint32_t)v;
                else if (key[5] == 's') m->elem_size = (uint32_t)v;
                else m->elem_type = (uint32_t)v;
            } else if ((r = tb__jskip(j, 2)) != tb_ok) {
                return r;
            }
            tb__jws(j);
            if (j->p < j->end && *j->p == ',') { j->p++; continue; }
            if (j->p < j->end && *j->p == '}') { j->p++; break; }
            return tb__jfail(j, "tensordesc_meta entry: expected ',' or '}'");
        }
        tb__jws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == ']') { j->p++; return tb_ok; }
        return tb__jfail(j, "tensordesc_meta: expected ',' or ']'");
    }
}

TBDEF tb_result tb_parse_metadata_json(const char *json, size_t size, tb_kernel_metadata *md, tb_error *err) {
    tb__json j;
    tb_result r;
    int have_name = 0, have_warps = 0;
    if (!json || !md) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "json or out is NULL");
    memset(md, 0, sizeof *md);
    md->num_ctas = 1;
    j.p = j.start = json;
    j.end = json + size;
    j.err = err, j.doc = NULL, j.base = 0;
    tb__jws(&j);
    if (j.p >= j.end || *j.p != '{') return tb__jfail(&j, "expected an object");
    j.p++;
    tb__jws(&j);
    if (j.p < j.end && *j.p == '}') j.p++;
    else
        for (;;) {
            char key[64];
            uint64_t v;
            tb__jws(&j);
            if (j.p < j.end && *j.p == '"' && (size_t)(j.end - j.p) > 64 &&
                memchr(j.p + 1, '"', 63) == NULL) {
                if ((r = tb__jstring(&j, NULL, 0)) != tb_ok) return r;  /* long key: not ours */
                key[0] = 0;
            } else if ((r = tb__jstring(&j, key, sizeof key)) != tb_ok) {
                return r;
            }
            tb__jws(&j);
            if (j.p >= j.end || *j.p != ':') return tb__jfail(&j, "expected ':'");
            j.p++;
            tb__jws(&j);
            if (j.p < j.end && tb__jlit(&j, "null")) {
                /* null leaves the default */
            } else if (strcmp(key, "name") == 0) {
                if ((r = tb__jstring(&j, md->name, sizeof md->name)) != tb_ok) return r;
                have_name = 1;
            } else if (strcmp(key, "num_warps") == 0) {
                if ((r = tb__juint(&j, key, 32, &v)) != tb_ok) return r;
                md->num_warps = (uint32_t)v;
                have_warps = 1;
            } else if (strcmp(key, "num_ctas") == 0) {
                if ((r = tb__juint(&j, key, 16, &v)) != tb_ok) return r;
                md->num_ctas = (uint32_t)v;
            } else if (strcmp(key, "shared") == 0) {
                if ((r = tb__juint(&j, key, 0xffffffffu, &v)) != tb_ok) return r;
                md->shared = (uint32_t)v;
            } else if (strcmp(key, "global_scratch_size") == 0 || strcmp(key, "profile_scratch_size") == 0) {
                tb_scratch *s = key[0] == 'g' ? &md->global_scratch : &md->profile_scratch;
                if ((r = tb__juint(&j, key, (uint64_t)1 << 48, &v)) != tb_ok) return r;
                s->size = v;
                s->present = 1;
            } else if (strcmp(key, "global_scratch_align") == 0 || strcmp(key, "profile_scratch_align") == 0) {
                tb_scratch *s = key[0] == 'g' ? &md->global_scratch : &md->profile_scratch;
                if ((r = tb__juint(&j, key, 1u << 20, &v)) != tb_ok) return r;
                s->align = (uint32_t)v;
            } else if (strcmp(key, "launch_cooperative_grid") == 0 || strcmp(key, "launch_pdl") == 0) {
                uint32_t bit = key[7] == 'c' ? TB_CONFIG_COOPERATIVE : TB_CONFIG_PDL;
                if (tb__jlit(&j, "true")) md->flags |= bit;
                else if (!tb__jlit(&j, "false")) return tb__jfail(&j, "launch flag is not a boolean");
            } else if (strcmp(key, "tensordesc_meta") == 0) {
                if ((r = tb__jtensordescs(&j, md)) != tb_ok) return r;
            } else if (strcmp(key, "cluster_dims") == 0) {
                int k;
                if (j.p >= j.end || *j.p != '[') return tb__jfail(&j, "cluster_dims is not an array");
                j.p++;
                for (k = 0; k < 3; k++) {
                    tb__jws(&j);
                    if ((r = tb__juint(&j, key, 16, &v)) != tb_ok) return r;
                    md->cluster_dims[k] = (uint32_t)v;
                    tb__jws(&j);
                    if (k < 2) {
                        if (j.p >= j.end || *j.p != ',') return tb__jfail(&j, "cluster_dims needs 3 entries");
                        j.p++;
                    }
                }
                if (j.p >= j.end || *j.p != ']') return tb__jfail(&j, "cluster_dims needs 3 entries");
                j.p++;
            } else if ((r = tb__jskip(&j, 1)) != tb_ok) {
                return r;
            }
            tb__jws(&j);
            if (j.p < j.end && *j.p == ',') {
                j.p++;
                continue;
            }
            if (j.p < j.end && *j.p == '}') {
                j.p++;
                break;
            }
            return tb__jfail(&j, "expected ',' or '}'");
        }
    tb__jws(&j);
    if (j.p != j.end) return tb__jfail(&j, "bytes after the object");
    if (!have_name || !md->name[0]) return tb__jfail(&j, "no \"name\"");
    if (!have_warps || md->num_warps == 0) return tb__jfail(&j, "no usable \"num_warps\"");
    if (md->num_ctas == 0) return tb__jfail(&j, "\"num_ctas\" is 0");
    /* an alignment Triton did not write (or wrote as 0) is 1, as Triton's
       launcher and the Python exporter take it (FORMAT.md, Scratch) */
    if (!md->global_scratch.align) md->global_scratch.align = 1;
    if (!md->profile_scratch.align) md->profile_scratch.align = 1;
    return tb_ok;
}

/* MLIR type of a tt.func argument to a code (0: unsupported). */
static char tb__mlir_code(const char *t, size_t n) {
    static const struct { const char *name; char code; int kind; } map[] = {
#define TB__X(code, bytes, kind, triton, triton2, mlir) {mlir, code, kind},
        TB__ARG_CODES(TB__X)
#undef TB__X
    };
    size_t i;
    for (i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t len = strlen(map[i].name);
        int prefix = map[i].kind == TB__KIND_PTR || map[i].kind == TB__KIND_DESC;
        if (len && (prefix ? n >= len : n == len) && memcmp(t, map[i].name, len) == 0) return map[i].code;
    }
    return 0;
}

/* The rank of "!tt.tensordesc<tensor<32x64xf16, ...>>": how many sizes
   stand before the element type; 0 if the text is not that. */
static uint32_t tb__tensordesc_rank(const char *t, size_t n) {
    const char *p = (const char *)tb__memmem(t, n, "tensor<"), *end = t + n;
    uint32_t rank = 0;
    if (!p) return 0;
    for (p += 7; p < end && *p >= '0' && *p <= '9';) {
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p >= end || *p != 'x') return 0;
        rank++;
        p++;
    }
    return rank <= TB_MAX_TENSOR_RANK ? rank : 0;
}

static tb_result tb__parse_ttfunc_ex(const char *text, size_t size, const char *fn, char *types, char *div, size_t cap,
                                     uint8_t *ranks, const char **names, uint32_t *name_lens, tb_error *err);

TBDEF tb_result tb_parse_ttfunc(const char *text, size_t size, const char *fn, char *types, char *div, size_t cap,
                                tb_error *err) {
    return tb__parse_ttfunc_ex(text, size, fn, types, div, cap, NULL, NULL, NULL, err);
}

/* ranks (TB_MAX_ARGS entries, may be NULL): each 'T' argument's rank.
   names, name_lens (TB_MAX_ARGS entries, may be NULL): each argument's
   name as the IR records it, pointing into text: the loc("NAME") of the
   argument, else its SSA name (%NAME). */
static tb_result tb__parse_ttfunc_ex(const char *text, size_t size, const char *fn, char *types, char *div, size_t cap,
                                     uint8_t *ranks, const char **names, uint32_t *name_lens, tb_error *err) {
    const char *p, *end, *found = NULL;
    size_t nargs = 0, fl = fn ? strlen(fn) : 0;
    uint32_t skip = 0, skip_i64 = 0;
    static const char pat[] = "tt.func public @";
    if (!text || !types || !div || cap == 0)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "text or buffers are NULL");
    end = text + size; /* after the NULL check: NULL + 0 is undefined */
    for (p = text; (p = (const char *)tb__memmem(p, (size_t)(end - p), pat)) != NULL; p++) {
        const char *name = p + sizeof pat - 1;
        int quoted = name < end && *name == '"';
        if (quoted) name++;
        if (!fn) {
            found = p;
            break;
        }
        if ((size_t)(end - name) > fl && memcmp(name, fn, fl) == 0 &&
            name[fl] == (quoted ? '"' : '(')) {
            found = p;
            break;
        }
    }
    if (!found)
        return tb__fail(err, tb_err_not_found, fn, NULL, -1, 0, "no \"tt.func public @%.100s(\" in the IR",
                        fn ? fn : "");
    p = (const char *)memchr(found, '(', (size_t)(end - found));
    if (!p) return tb__fail(err, tb_err_parse, fn, NULL, (long long)(found - text), 0, "tt.func line has no '('");
    p++;
    for (;;) {
        const char *arg, *colon, *t, *te;
        int depth = 0;
        while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) p++;
        if (p < end && *p == ')') break;
        if (p >= end || *p != '%')
            return tb__fail(err, tb_err_parse, fn, NULL, (long long)(p - text), 0,
                            "expected '%%' or ')' in tt.func arguments");
        arg = p;
        /* the argument runs to the ',' or ')' at depth 0 */
        for (; p < end; p++) {
            char ch = *p;
            if (ch == '"') {
                for (p++; p < end && *p != '"'; p++)
                    if (*p == '\\') p++;
                if (p >= end) break;
                continue;
            }
            if (ch == '(' || ch == '{' || ch == '[' || ch == '<') depth++;
            else if (ch == ')' || ch == '}' || ch == ']' || (ch == '>' && p[-1] != '-')) {
                if (depth == 0) break;
                depth--;
            } else if (ch == ',' && depth == 0) {
                break;
            }
            if (depth > TB_MAX_JSON_DEPTH)
                return tb__fail(err, tb_err_parse, fn, NULL, (long long)(p - text), 0,
                                "tt.func argument nested too deeply");
        }
        if (p >= end || (*p != ',' && *p != ')'))
            return tb__fail(err, tb_err_parse, fn, NULL, (long long)(arg - text), 0, "unterminated tt.func argument");
        colon = (const char *)memchr(arg, ':', (size_t)(p - arg));
        if (!colon)
            return tb__fail(err, tb_err_parse, fn, NULL, (long long)(arg - text), 0, "tt.func argument without a type");
        t = colon + 1;
        while (t < p && *t == ' ') t++;
        te = t;
        depth = 0;
        while (te < p && (depth > 0 || (*te != ' ' && *te != '{'))) {
            if (*te == '<') depth++;
            else if (*te == '>') depth--;
            te++;
        }
        if (nargs + 1 >= cap || nargs >= TB_MAX_ARGS)
            return tb__fail(err, tb_err_limit, fn, NULL, (long long)(arg - text), 0, "more than %u arguments",
                            (unsigned)(cap - 1 < TB_MAX_ARGS ? cap - 1 : TB_MAX_ARGS));
        if (skip) {
            /* the shape (i32) and strides (i64) that Triton's IR lists after
               a tensor descriptor: the launcher passes them from the
               descriptor, so they are no arguments of their own */
            char c = tb__mlir_code(t, (size_t)(te - t));
            if (c != (skip > skip_i64 ? 'i' : 'l'))
                return tb__fail(err, tb_err_parse, fn, NULL, (long long)(t - text), 0,
                                "a tensor descriptor's shape and strides (i32, then i64) expected in the IR");
            skip--;
            if (*p == ')') break;
            p++;
            continue;
        }
        types[nargs] = tb__mlir_code(t, (size_t)(te - t));
        if (types[nargs] == 'T') {
            uint32_t rank = tb__tensordesc_rank(t, (size_t)(te - t));
            if (!rank) types[nargs] = 0;
            else if (ranks) ranks[nargs] = (uint8_t)rank;
            skip = 2 * rank;
            skip_i64 = rank;
        }
        if (!types[nargs])
            return tb__fail(err, tb_err_unsupported_type, fn, NULL, (long long)(t - text), 0,
                            "argument %u has type %.*s, which a static launch cannot pass", (unsigned)nargs,
                            (int)((te - t) > 80 ? 80 : (te - t)), t);
        div[nargs] = tb__memmem(te, (size_t)(p - te), "tt.divisibility = 16 ") ? '1' : '0';
        if (names) {
            const char *loc = (const char *)tb__memmem(te, (size_t)(p - te), "loc(\""), *q;
            if (loc && (q = (const char *)memchr(loc + 5, '"', (size_t)(p - loc - 5))) != NULL)
                names[nargs] = loc + 5, name_lens[nargs] = (uint32_t)(q - loc - 5);
            else
                names[nargs] = arg + 1, name_lens[nargs] = (uint32_t)(colon - arg - 1);
        }
        nargs++;
        if (*p == ')') break;
        p++;
    }
    if (skip)
        return tb__fail(err, tb_err_parse, fn, NULL, (long long)(p - text), 0,
                        "the IR ends before a tensor descriptor's shape and strides");
    types[nargs] = 0;
    div[nargs] = 0;
    return tb_ok;
}


#ifndef TB_NO_LAUNCHER
/* ---- the autotune choices text (docs/FORMAT.md, "Autotune choices") ----
   The format's one owner: the writer's escapes and numbers, and a parser
   over memory that hands each line, decoded, to a sink (the Autotune
   section resolves it against a table). Tokens are exactly what the
   writer writes, so that a file has one spelling: an escape is '%' and
   two uppercase hex digits, of a byte the writer escapes; a decimal has no
   leading zero, sign on zero or '+'. Errors name the line and column. */
#define TB__CHOICES_MAGIC "triton_bundle autotune 1\n"
#define TB__CHOICES_MAX_FILE ((size_t)64 << 20)
#define TB__CHOICES_MAX_KEY TB_MAX_ARGS

static int tb__pct_needed(unsigned char ch) { return ch <= 0x20 || ch >= 0x7f || ch == '%'; }

/* %-escapes the bytes of s a line could not hold as they are */
static size_t tb__pct(char *out, size_t cap, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (tb__pct_needed(ch)) {
            if (n + 3 < cap) out[n] = '%', out[n + 1] = hex[ch >> 4], out[n + 2] = hex[ch & 15];
            n += 3;
        } else {
            if (n + 1 < cap) out[n] = (char)ch;
            n++;
        }
    }
    if (cap) out[n < cap ? n : cap - 1] = 0;
    return n;
}

/* a time: integer arithmetic, so no locale changes the point */
static int tb__fmt_ms(char *out, size_t cap, double ms) {
    unsigned long long ns = ms > 0 && ms < 1e12 ? (unsigned long long)(ms * 1e6 + 0.5) : 0;
    return snprintf(out, cap, "%llu.%06llu", ns / 1000000ull, ns % 1000000ull);
}

static int tb__uphex(char h) { return h >= '0' && h <= '9' ? h - '0' : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1; }

/* One escaped field s[0, n) into out (cap bytes, NUL-terminated): 0, or
   the 1-based column within the field of the first bad byte (*why says
   what was wrong). */
static size_t tb__unpct(const char *s, size_t n, char *out, size_t cap, const char **why) {
    size_t i, o = 0;
    if (!n) return *why = "an empty field", 1;
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '%') {
            int hi = i + 1 < n ? tb__uphex(s[i + 1]) : -1, lo = i + 2 < n ? tb__uphex(s[i + 2]) : -1;
            if (hi < 0 || lo < 0) return *why = "'%' must be followed by two uppercase hex digits", i + 1;
            ch = (unsigned char)(hi * 16 + lo);
            if (!ch || !tb__pct_needed(ch))
                return *why = "an escape of a byte that is written as itself (or %00)", i + 1;
            i += 2;
        } else if (tb__pct_needed(ch)) {
            return *why = "a byte that must be escaped", i + 1;
        }
        if (o + 1 >= cap) return *why = "too long", i + 1;
        out[o++] = (char)ch;
    }
    out[o] = 0;
    return 0;
}

/* A decimal integer in [lo, hi]: '-'? then 0 or [1-9][0-9]* (no "-0"). */
static int tb__dec(const char *s, size_t n, long long lo, long long hi, long long *v) {
    size_t i = 0;
    int neg = 0;
    unsigned long long u = 0;
    if (n && s[0] == '-') neg = 1, i = 1;
    if (i == n || n - i > 19 || (s[i] == '0' && (n - i > 1 || neg))) return 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        u = u * 10 + (unsigned)(s[i] - '0');
    }
    if (u > (unsigned long long)LLONG_MAX + (neg ? 1u : 0u)) return 0;
    *v = neg ? (long long)(0 - u) : (long long)u;
    return *v >= lo && *v <= hi;
}

/* A time: 0 or [1-9][0-9]* (at most 12 digits), then optionally '.' and
   1 to 9 digits; no sign, exponent or locale; under 10^12. */
static int tb__parse_ms(const char *s, size_t n, double *ms) {
    size_t i = 0, frac = 0;
    double v = 0, scale = 1;
    if (!n || s[0] < '0' || s[0] > '9' || (s[0] == '0' && n > 1 && s[1] != '.')) return 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (i >= 12) return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (i < n) {
        if (s[i++] != '.' || i == n) return 0;
        for (; i < n; i++, frac++) {
            if (s[i] < '0' || s[i] > '9' || frac == 9) return 0;
            scale /= 10, v += (s[i] - '0') * scale;
        }
    }
    *ms = v;
    return v < 1e12;
}

/* One line of a choices text, decoded; valid during the sink's call. */
typedef struct tb__choice_line {
    const char *cache_key, *kernel_hash;
    uint32_t config, nkey;
    const int64_t *key;
    double ms;
    size_t line;
} tb__choice_line;
typedef tb_result (*tb__choice_sink)(void *user, const tb__choice_line *l, tb_error *err);

static tb_result tb__choices_fail(tb_error *err, const char *name, const char *data, const char *at, size_t line,
                                  const char *ln, const char *what) {
    return tb__fail(err, tb_err_parse, NULL, name, (long long)(at - data), 0,
                    "autotune choices, line %zu, column %zu: %s", line, (size_t)(at - ln) + 1, what);
}

/* Parses data[0, size) (name: for messages), calling sink once per line
   in order; stops at the first error, the sink's included. Reads nothing
   past size; needs no NUL. */
static tb_result tb__choices_parse(const tb__ctx *c, const char *data, size_t size, const char *name,
                                   tb__choice_sink sink, void *user, tb_error *err) {
    size_t pos, line = 1;
    char *keybuf, hashbuf[TB_MAX_NAME_LENGTH + 1];
    int64_t *key;
    tb_result r = tb_ok;
    if (size > TB__CHOICES_MAX_FILE)
        return tb__fail(err, tb_err_limit, NULL, name, -1, 0, "autotune choices: %zu bytes, over 64 MiB", size);
    if (size < sizeof TB__CHOICES_MAGIC - 1 || memcmp(data, TB__CHOICES_MAGIC, sizeof TB__CHOICES_MAGIC - 1) != 0)
        return tb__fail(err, tb_err_bad_magic, NULL, name, 0, 0, "not an autotune choices file (\"%.24s\" expected)",
                        TB__CHOICES_MAGIC);
    keybuf = (char *)tb__alloc(c, TB_MAX_STRING_LENGTH + 1);
    key = (int64_t *)tb__alloc(c, TB__CHOICES_MAX_KEY * sizeof *key);
    if (!keybuf || !key) {
        r = TB__OOM(err);
        goto done;
    }
    for (pos = sizeof TB__CHOICES_MAGIC - 1; pos < size && r == tb_ok;) {
        const char *ln = data + pos, *end = (const char *)memchr(ln, '\n', size - pos), *f[5], *why = NULL;
        size_t fl[5], nf = 0, q, bad;
        tb__choice_line l;
        long long v;
        line++;
        if (!end) {
            r = tb__choices_fail(err, name, data, data + size, line, ln, "the line does not end with a newline");
            break;
        }
        for (f[0] = ln, q = 0; ln + q <= end; q++)
            if (ln + q == end || ln[q] == '\t') {
                if (nf == 5) break;
                fl[nf] = (size_t)(ln + q - f[nf]);
                if (++nf < 5) f[nf] = ln + q + 1;
            }
        pos = (size_t)(end - data) + 1;
        if (nf != 5 || f[4] + fl[4] != end) {
            r = tb__choices_fail(err, name, data, nf == 5 ? f[4] + fl[4] : end, line, ln,
                                 "not five tab-separated fields");
            break;
        }
        memset(&l, 0, sizeof l);
        l.line = line, l.cache_key = keybuf, l.kernel_hash = hashbuf, l.key = key;
        {
            const char *at = NULL, *which = NULL;
            if ((bad = tb__unpct(f[0], fl[0], keybuf, TB_MAX_STRING_LENGTH + 1, &why)) != 0)
                at = f[0], which = "the cache key";
            else if ((bad = tb__unpct(f[1], fl[1], hashbuf, sizeof hashbuf, &why)) != 0)
                at = f[1], which = "the kernel hash";
            if (bad) {
                char what[160];
                snprintf(what, sizeof what, "%s: %s", which, why);
                r = tb__choices_fail(err, name, data, at + bad - 1, line, ln, what);
                break;
            }
        }
        if (!tb__dec(f[2], fl[2], 0, LLONG_MAX, &v)) {
            r = tb__choices_fail(err, name, data, f[2], line, ln,
                                 "the config index is not a decimal (0 or [1-9][0-9]*)");
            break;
        }
        if (v >= (long long)TB_MAX_CONFIGS_PER_RECORD) {
            r = tb__choices_fail(err, name, data, f[2], line, ln,
                                 "the config index is over TB_MAX_CONFIGS_PER_RECORD - 1");
            break;
        }
        l.config = (uint32_t)v;
        if (!(fl[3] == 1 && f[3][0] == '-')) {
            const char *s = f[3], *fe = f[3] + fl[3];
            while (s <= fe) {
                const char *comma = (const char *)memchr(s, ',', (size_t)(fe - s));
                const char *ve = comma ? comma : fe;
                if (l.nkey == TB__CHOICES_MAX_KEY) {
                    r = tb__choices_fail(err, name, data, s, line, ln, "more size key values than TB_MAX_ARGS");
                    break;
                }
                if (!tb__dec(s, (size_t)(ve - s), LLONG_MIN, LLONG_MAX, &v)) {
                    r = tb__choices_fail(
                        err, name, data, s, line, ln,
                        "a size key value is not a signed 64-bit decimal (-? 0 or [1-9][0-9]*), or '-' alone");
                    break;
                }
                key[l.nkey++] = (int64_t)v;
                s = ve + 1;
            }
            if (r != tb_ok) break;
        }
        if (!tb__parse_ms(f[4], fl[4], &l.ms)) {
            r = tb__choices_fail(err, name, data, f[4], line, ln,
                                 "the time is not a decimal under 10^12 (digits, '.', 1 to 9 digits)");
            break;
        }
        r = sink(user, &l, err);
    }
done:
    tb__free(c, keybuf);
    tb__free(c, key);
    return r;
}
#endif /* TB_NO_LAUNCHER */

/* ---------------------------------------------------------------------- */
/* >>derive  Derive: launch records from a kernel's own files */
/* ---------------------------------------------------------------------- */
typedef struct tb__derived {
    tb_launch_config cfg;
    tb_kernel_metadata md;
    char binary[TB_MAX_NAME_LENGTH + 1];
    char types[TB_MAX_ARGS + 1];
    char div[TB_MAX_ARGS + 1];
    uint8_t ranks[TB_MAX_ARGS + 1];
    tb_tensordesc_meta descs[TB_MAX_TENSORDESCS];
} tb__derived;

/* stem: NAME (NAME.cubin, NAME.json, NAME.source|NAME.ttir). */
static tb_result tb__derive(const tb_bundle *b, const tb_kernel *k, const char *stem, size_t stem_len, tb__derived *d,
                            tb_error *err) {
    char fname[TB_MAX_NAME_LENGTH + 16];
    const tb_artifact *json, *ir;
    const void *bytes;
    void *copy;
    tb_result r;
    static const char *const ir_ext[] = {".source", ".ttir"};
    int i;
    memset(d, 0, sizeof *d);
    /* NAME.cubin must be a name (a lowered limit may be under 6) */
    if (stem_len > TB_MAX_NAME_LENGTH || TB_MAX_NAME_LENGTH - stem_len < 6)
        return tb__fail(err, tb_err_bad_name, k->hash, NULL, -1, 0, "kernel name too long");
    snprintf(fname, sizeof fname, "%.*s.json", (int)stem_len, stem);
    json = tb_kernel_find_artifact(k, fname);
    if (!json) return tb__fail(err, tb_err_not_found, k->hash, fname, -1, 0, "the kernel has no metadata file");
    if ((r = tb__artifact_bytes(b, k, json, 0, &bytes, &copy, err)) != tb_ok) return r;
    r = tb_parse_metadata_json((const char *)bytes, (size_t)json->size, &d->md, err);
    tb__free(&b->ctx, copy);
    if (r != tb_ok) {
        if (err)
            tb__copy_field(err->file, sizeof err->file, fname),
                tb__copy_field(err->kernel, sizeof err->kernel, k->hash);
        return r;
    }
    for (i = 0, ir = NULL; i < 2 && !ir; i++) {
        snprintf(fname, sizeof fname, "%.*s%s", (int)stem_len, stem, ir_ext[i]);
        ir = tb_kernel_find_artifact(k, fname);
    }
    if (!ir) return tb__fail(err, tb_err_not_found, k->hash, NULL, -1, 0, "the kernel has no .source or .ttir file");
    if ((r = tb__artifact_bytes(b, k, ir, 0, &bytes, &copy, err)) != tb_ok) return r;
    r = tb__parse_ttfunc_ex((const char *)bytes, (size_t)ir->size, d->md.name, d->types, d->div, sizeof d->types,
                            d->ranks, NULL, NULL, err);
    tb__free(&b->ctx, copy);
    if (r != tb_ok) {
        if (err)
            tb__copy_field(err->file, sizeof err->file, fname),
                tb__copy_field(err->kernel, sizeof err->kernel, k->hash);
        return r;
    }
    memcpy(d->binary, stem, stem_len); /* fits: checked above */
    memcpy(d->binary + stem_len, ".cubin", 7);
    d->cfg.kernel_hash = k->hash;
    d->cfg.function_name = d->md.name;
    d->cfg.binary_name = d->binary;
    d->cfg.arg_types = d->types;
    d->cfg.arg_divisibility = d->div;
    d->cfg.num_warps = d->md.num_warps;
    d->cfg.num_ctas = d->md.num_ctas;
    d->cfg.shared_mem = d->md.shared;
    d->cfg.flags = d->md.flags | TB_CONFIG_TYPES_FROM_IR;
    memcpy(d->cfg.cluster_dims, d->md.cluster_dims, sizeof d->cfg.cluster_dims);
    d->cfg.global_scratch = d->md.global_scratch;
    d->cfg.profile_scratch = d->md.profile_scratch;
    /* tensor descriptors: the IR gives each one's rank; the metadata's
       tensordesc_meta, when it has entries, says they go through TMA */
    for (i = 0; d->types[i]; i++) {
        tb_tensordesc_meta *m;
        if (d->types[i] != 'T') continue;
        if (d->cfg.tensordesc_count >= TB_MAX_TENSORDESCS)
            return tb__fail(err, tb_err_limit, k->hash, NULL, -1, 0, "more than TB_MAX_TENSORDESCS tensor descriptors");
        m = &d->descs[d->cfg.tensordesc_count];
        if (d->md.tensordesc_count) {
            if (d->cfg.tensordesc_count >= d->md.tensordesc_count ||
                d->md.tensordescs[d->cfg.tensordesc_count].rank != d->ranks[i])
                return tb__fail(err, tb_err_parse, k->hash, NULL, -1, 0,
                                "tensordesc_meta of NAME.json does not match the tensor descriptors of the IR");
            *m = d->md.tensordescs[d->cfg.tensordesc_count];
        } else {
            memset(m, 0, sizeof *m);
            m->rank = d->ranks[i];
        }
        d->cfg.tensordesc_count++;
    }
    if (d->md.tensordesc_count && d->md.tensordesc_count != d->cfg.tensordesc_count)
        return tb__fail(err, tb_err_parse, k->hash, NULL, -1, 0,
                        "NAME.json describes %u tensor descriptors, the IR has %u", d->md.tensordesc_count,
                        d->cfg.tensordesc_count);
    d->cfg.tensordescs = d->cfg.tensordesc_count ? d->descs : NULL;
    return tb_ok;
}

TBDEF tb_result tb_bundle_derive_launch_records(tb_bundle *b, tb_error *err) {
    uint32_t i, j, q, n = 0;
    size_t configs = 1;
    tb__derived *d;
    const char **have;
    tb_result r = tb_ok;
    if (!b) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle is NULL");
    /* the hashes that already have a record, sorted for lookups */
    for (q = 0; q < b->record_count; q++) configs += b->records[q].config_count;
    have = (const char **)tb__alloc(&b->ctx, configs * sizeof *have);
    d = (tb__derived *)tb__alloc(&b->ctx, sizeof *d);
    if (!have || !d) {
        tb__free(&b->ctx, have);
        tb__free(&b->ctx, d);
        return TB__OOM(err);
    }
    for (q = 0; q < b->record_count; q++)
        for (j = 0; j < b->records[q].config_count; j++) have[n++] = b->records[q].configs[j].kernel_hash;
    if (tb__sort(&b->ctx, have, n, sizeof *have, tb__cmp_str, NULL) != tb_ok) {
        tb__free(&b->ctx, have);
        tb__free(&b->ctx, d);
        return TB__OOM(err);
    }
    for (i = 0; i < b->kernel_count && r == tb_ok; i++) {
        const tb_kernel *k = &b->kernels[i];
        if (tb__search(&k->hash, have, n, sizeof *have, tb__cmp_str, NULL)) continue;
        int first = 1;
        for (j = 0; j < k->artifact_count && r == tb_ok; j++) {
            const char *name = k->artifacts[j].name;
            size_t len = strlen(name);
            tb_error e;
            tb_launch_record rec;
            memset(&rec, 0, sizeof rec);
            char key[2 * TB_MAX_NAME_LENGTH + 2];
            if (!tb__has_suffix(name, ".cubin") || len == 6) continue;
            if (tb__derive(b, k, name, len - 6, d, &e) != tb_ok) {
                /* a cubin without its .json or IR is no kernel of Triton's
                   (INFO); one whose files disagree (tensordesc_meta shorter
                   than the IR's descriptors, unparsable JSON) is derived
                   nowhere, and says so (WARN): passing the rest as plain
                   descriptors would hand a TMA kernel the wrong parameters */
                tb__log(&b->ctx, e.code == tb_err_not_found ? TB_LOG_INFO : TB_LOG_WARN,
                        "no launch record for %s/%s: %s", k->hash, name, e.message);
                continue;
            }
            /* cache keys are unique: a second cubin in one directory (Triton
               writes one) is keyed HASH/NAME */
            snprintf(key, sizeof key, "%s/%.*s", k->hash, (int)(len - 6), name);
            rec.cache_key = first ? k->hash : key;
            first = 0;
            rec.kernel_name = d->md.name;
            rec.config_count = 1;
            rec.configs = &d->cfg;
            r = tb_bundle_add_launch_record(b, &rec, err);
        }
    }
    tb__free(&b->ctx, have);
    tb__free(&b->ctx, d);
    return r;
}

/* ---------------------------------------------------------------------- */
/* >>program  Program: a whole compiled model (format 2.3) */
/* The dtypes' table, the program's one checker (the reader and          */
/* tb_bundle_set_program both call it: a rule is written once), the      */
/* section's writer and reader, and the checked read of a constant.      */
/* ---------------------------------------------------------------------- */
/* The dtypes: one row each (number, name, bytes, .npy descr, safetensors'
   name: "" for none); the Python
   companion's DTYPES is checked against it (tests/test_codes.py). */
#define TB__DTYPES(X)                                   \
    X(1, "float32", 4, "<f4", "F32")             \
    X(2, "float16", 2, "<f2", "F16")             \
    X(3, "bfloat16", 2, "<u2", "BF16")           \
    X(4, "float64", 8, "<f8", "F64")             \
    X(5, "int8", 1, "|i1", "I8")                 \
    X(6, "int16", 2, "<i2", "I16")               \
    X(7, "int32", 4, "<i4", "I32")               \
    X(8, "int64", 8, "<i8", "I64")               \
    X(9, "uint8", 1, "|u1", "U8")                \
    X(10, "bool", 1, "|b1", "BOOL")              \
    X(11, "float8_e4m3fn", 1, "|u1", "F8_E4M3")  \
    X(12, "float8_e5m2", 1, "|u1", "F8_E5M2")    \
    X(13, "uint16", 2, "<u2", "U16")             \
    X(14, "uint32", 4, "<u4", "U32")             \
    X(15, "uint64", 8, "<u8", "U64")             \
    X(16, "float8_e4m3fnuz", 1, "|u1", "")       \
    X(17, "float8_e5m2fnuz", 1, "|u1", "")

typedef struct tb__dtype_row {
    uint32_t number, bytes;
    const char *name, *npy, *st;
} tb__dtype_row;
#define TB__DTYPE_ROW(n, name, bytes, npy, st) {n, bytes, name, npy, st},
static const tb__dtype_row tb__dtypes[] = {TB__DTYPES(TB__DTYPE_ROW)};
#undef TB__DTYPE_ROW
#define TB__DTYPE_COUNT (sizeof tb__dtypes / sizeof tb__dtypes[0])
static const tb__dtype_row *tb__dtype(uint32_t d) {
    return d >= 1 && d <= TB__DTYPE_COUNT ? &tb__dtypes[d - 1] : NULL; /* numbered 1.. in order */
}
TBDEF const char *tb_dtype_name(uint32_t d) { return tb__dtype(d) ? tb__dtype(d)->name : NULL; }
TBDEF uint32_t tb_dtype_size(uint32_t d) { return tb__dtype(d) ? tb__dtype(d)->bytes : 0; }
TBDEF const char *tb_dtype_npy(uint32_t d) { return tb__dtype(d) ? tb__dtype(d)->npy : NULL; }
TBDEF uint32_t tb_dtype_from_name(const char *name) {
    size_t i;
    if (!name) return 0;
    if (!strncmp(name, "torch.", 6)) name += 6;
    for (i = 0; i < TB__DTYPE_COUNT; i++)
        if (!strcmp(tb__dtypes[i].name, name)) return tb__dtypes[i].number;
    return 0;
}

/* The bytes of a tensor of `rank` sizes of `elem` bytes each, exactly:
   *bad set when any size is negative (past 2^63 - 1 as a u64), even
   beside a size 0 (issue 38 #5), or the product passes 2^64 - 1; else 0
   when a size is 0. */
static uint64_t tb__shape_bytes(uint64_t elem, uint32_t rank, const int64_t *shape, int *bad) {
    uint64_t n = elem;
    uint32_t d;
    int over = 0;
    *bad = 0;
    for (d = 0; d < rank; d++)
        if (shape[d] < 0) return *bad = 1, UINT64_MAX;
    for (d = 0; d < rank; d++)
        if (!shape[d]) return 0;
    for (d = 0; d < rank && !*bad; d++)
        if (n > UINT64_MAX / (uint64_t)shape[d]) over = 1;
        else n *= (uint64_t)shape[d];
    if (over) *bad = 1;
    return *bad ? UINT64_MAX : n;
}

TBDEF uint64_t tb_tensor_spec_extent(const tb_tensor_spec *t) {
    uint64_t last = 0, bytes;
    uint32_t i;
    if (!t || !tb__dtype(t->dtype) || t->rank > TB_MAX_TENSOR_DIMS) return UINT64_MAX;
    for (i = 0; i < t->rank; i++) /* every size and stride in range, then 0 if any size is 0 (issue 38 #6) */
        if (t->shape[i] < 0 || t->strides[i] < 0) return UINT64_MAX;
    for (i = 0; i < t->rank; i++)
        if (t->shape[i] == 0) return 0;
    for (i = 0; i < t->rank; i++) {
        uint64_t step;
        if ((uint64_t)(t->shape[i] - 1) && (uint64_t)t->strides[i] > UINT64_MAX / (uint64_t)(t->shape[i] - 1))
            return UINT64_MAX;
        step = (uint64_t)(t->shape[i] - 1) * (uint64_t)t->strides[i];
        if (last > UINT64_MAX - step) return UINT64_MAX;
        last += step;
    }
    bytes = tb__dtype(t->dtype)->bytes;
    if (last >= UINT64_MAX / bytes) return UINT64_MAX;
    return (last + 1) * bytes;
}

TBDEF const tb_program *tb_bundle_program(const tb_bundle *b) { return b && b->program_count ? b->programs[0] : NULL; }
TBDEF uint32_t tb_bundle_program_count(const tb_bundle *b) { return b ? b->program_count : 0; }
TBDEF const tb_program *tb_bundle_program_at(const tb_bundle *b, uint32_t i) {
    return b && i < b->program_count ? b->programs[i] : NULL;
}
TBDEF const tb_program *tb_bundle_find_program(const tb_bundle *b, const char *name) {
    uint32_t i;
    for (i = 0; b && name && i < b->program_count; i++)
        if (!strcmp(b->programs[i]->name, name)) return b->programs[i];
    return NULL;
}

/* Does record rec's kernel write its argument j? marks: the record says
   so (its call info lists j as mutated, or names it out_ptr... or
   in_out_ptr..., Inductor's names for what a kernel stores to). may: it
   may, as far as anyone knows: it says so, or it says nothing of what it
   writes (no call info, or none of its arguments marked): a user's kernel
   may write any pointer. */
static int tb__arg_marks_written(const tb_launch_record *rec, uint32_t j) {
    const tb_call_info *ci = rec->call;
    uint32_t i;
    if (!ci) return 0;
    for (i = 0; i < ci->mutated_count; i++)
        if (ci->mutated[i] == j) return 1;
    return j < ci->arg_count &&
           (!strncmp(ci->arg_names[j], "out_ptr", 7) || !strncmp(ci->arg_names[j], "in_out_ptr", 10));
}
#ifndef TB_NO_LAUNCHER /* (the runner's) */
static int tb__arg_may_write(const tb_launch_record *rec, uint32_t j) {
    uint32_t i, n = (uint32_t)strlen(rec->configs[0].arg_types);
    if (!rec->call || tb__arg_marks_written(rec, j)) return 1;
    for (i = 0; i < n; i++)
        if (tb__arg_marks_written(rec, i)) return 0;
    return 1;
}
#endif

/* The size of the object a pointer operand points into; 0 with *ok 0 when
   the operand names none. */
static uint64_t tb__operand_size(const tb_program *p, const tb_operand *o, int *ok) {
    *ok = 1;
    switch (o->space) {
    case TB_SPACE_INPUT: if (o->index < p->input_count) return tb_tensor_spec_extent(&p->inputs[o->index]); break;
    case TB_SPACE_OUTPUT: if (o->index < p->output_count) return tb_tensor_spec_extent(&p->outputs[o->index]); break;
    case TB_SPACE_CONSTANT: if (o->index < p->constant_count) return p->constants[o->index].size; break;
    case TB_SPACE_BUFFER: if (o->index < p->buffer_count) return p->buffers[o->index].size; break;
    default: break;
    }
    *ok = 0;
    return 0;
}

static const char *const tb__space_names[] = {"literal", "input", "output", "constant", "buffer"};

/* A pointer operand of step s: names an object, `touch` bytes from its
   offset lie within it, and a buffer is live at s. */
static tb_result tb__check_pointer(const tb_program *p, uint32_t s, uint32_t i, const tb_operand *o, uint64_t touch,
                                   tb_error *err) {
    int ok;
    uint64_t size;
    if (o->space == TB_SPACE_LITERAL || o->space > TB_SPACE_BUFFER)
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                        "program step %u operand %u: space %u is not a pointer", s, i, o->space);
    size = tb__operand_size(p, o, &ok);
    if (!ok)
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "program step %u operand %u: %s %u does not exist", s,
                        i, tb__space_names[o->space], o->index);
    if (o->value > size || touch > size - o->value)
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                        "program step %u operand %u: bytes %llu..+%llu lie outside %s %u (%llu bytes)", s, i,
                        (unsigned long long)o->value, (unsigned long long)touch, tb__space_names[o->space], o->index,
                        (unsigned long long)size);
    if (o->space == TB_SPACE_BUFFER && (s < p->buffers[o->index].first_step || s > p->buffers[o->index].last_step))
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                        "program step %u operand %u: buffer %u lives from step %u to %u only", s, i, o->index,
                        p->buffers[o->index].first_step, p->buffers[o->index].last_step);
    return tb_ok;
}

/* Is a pointer operand's address surely a multiple of a (a power of two
   up to 16)? Inputs and outputs are aligned to their align, constants to
   64 and the workspace to 256, so a buffer's offset counts too. */
static int tb__operand_aligned(const tb_program *p, const tb_operand *o, uint32_t a) {
    uint64_t base = 0;
    if (o->space == TB_SPACE_INPUT && p->inputs[o->index].align < a) return 0;
    if (o->space == TB_SPACE_OUTPUT && p->outputs[o->index].align < a) return 0;
    if (o->space == TB_SPACE_BUFFER) base = p->buffers[o->index].offset;
    return ((base + o->value) & (a - 1)) == 0;
}

/* A launch's operands, in order: each names what it points into, then
   fits its argument's code and the cubin's divisibility assumptions. */
static tb_result tb__check_launch_operands(const tb_bundle *b, const tb_program *p, uint32_t s, tb_error *err) {
    const tb_program_step *st = &p->steps[s];
    const tb_launch_config *cf = &b->records[st->record].configs[st->config];
    const char *key = b->records[st->record].cache_key;
    uint32_t i;
    tb_result r;
    for (i = 0; i < st->operand_count; i++) {
        const tb_operand *o = &st->operands[i];
        char code = cf->arg_types[i];
        int div = cf->arg_divisibility[0] && cf->arg_divisibility[i] == '1';
        if (o->space == TB_SPACE_LITERAL) {
            if (o->index)
                return tb__fail(err, tb_err_malformed, key, NULL, -1, 0,
                                "program step %u operand %u: a literal's index is not 0", s, i);
        } else if ((r = tb__check_pointer(p, s, i, o, 0, err)) != tb_ok) {
            return r;
        }
        if (code == 'T')
            return tb__fail(err, tb_err_unsupported_type, key, NULL, -1, 0,
                            "program step %u: argument %u is a tensor descriptor, which a program cannot pass", s, i);
        if (code == 'O') {
            if (o->space == TB_SPACE_LITERAL)
                return tb__fail(
                    err, tb_err_malformed, key, NULL, -1, 0,
                    "program step %u operand %u: a pointer argument needs an input, output, constant or buffer", s, i);
            if (div && !tb__operand_aligned(p, o, 16))
                return tb__fail(err, tb_err_malformed, key, NULL, -1, 0,
                                "program step %u: argument %u must be 16-byte aligned (the cubin assumes it)", s, i);
            if (o->space == TB_SPACE_CONSTANT && !(p->constants[o->index].flags & TB_CONSTANT_STATE) &&
                tb__arg_marks_written(&b->records[st->record], i))
                return tb__fail(err, tb_err_malformed, key, NULL, -1, 0,
                                "program step %u: argument %u, which the kernel writes, is constant %u, which is not "
                                "state (read only)", s, i, o->index);
            continue;
        }
        if (o->space != TB_SPACE_LITERAL)
            return tb__fail(err, tb_err_malformed, key, NULL, -1, 0,
                            "program step %u operand %u: a scalar argument ('%c') needs a literal", s, i, code);
        {
            tb_arg v;
            v.u = o->value;
            if (tb__code_kind(code) != TB__KIND_FLOAT &&
                (!tb__in_range(code, v, (cf->flags & TB_CONFIG_TYPES_FROM_IR) != 0) ||
                 (tb__code_kind(code) == TB__KIND_BOOL && v.u > 1)))
                return tb__fail(err, tb_err_malformed, key, NULL, -1, 0,
                                "program step %u operand %u: literal %lld does not fit its type '%c'", s, i,
                                (long long)v.i, code);
            if (div && tb__code_kind(code) != TB__KIND_FLOAT && (v.u & 15u))
                return tb__fail(err, tb_err_malformed, key, NULL, -1, 0,
                                "program step %u operand %u: %lld is not divisible by 16, which the cubin assumes", s,
                                i, (long long)v.i);
        }
    }
    return tb_ok;
}

/* A launch step's grid: in blocks, its clusters counted (what the
   launcher multiplies it by), within CUDA's launch; and what its config's
   grid rule gives for the step's operands, where the rule reads nothing
   but them and constants (no EXTRA value). */
static tb_result tb__check_launch_grid(const tb_bundle *b, const tb_program *p, uint32_t s, tb_error *err) {
    static const uint32_t most[3] = {0x7fffffffu, 65535u, 65535u};
    const tb_program_step *st = &p->steps[s];
    const tb_launch_config *cf = &b->records[st->record].configs[st->config];
    const char *key = b->records[st->record].cache_key;
    uint32_t cl[3] = {1, 1, 1}, g[3], d, i;
    int extra = 0;
    if (cf->num_ctas > 1) {
        if (cf->cluster_dims[0] && cf->cluster_dims[1] && cf->cluster_dims[2]) memcpy(cl, cf->cluster_dims, sizeof cl);
        else cl[0] = cf->num_ctas;
    }
    for (d = 0; d < 3; d++)
        if ((uint64_t)st->grid[d] * cl[d] > most[d])
            return tb__fail(
                err, tb_err_malformed, key, NULL, -1, 0,
                "program step %u: grid %u x %u x %u in clusters of %u x %u x %u blocks is more blocks than a "
                "CUDA launch takes (x < 2^31, y and z < 65536)",
                s, st->grid[0], st->grid[1], st->grid[2], cl[0], cl[1], cl[2]);
    if (!cf->grid) return tb_ok;
    for (d = 0; d < 3; d++)
        for (i = 0; i < cf->grid->op_count[d]; i++) extra |= cf->grid->ops[d][i].op == TB_GRID_EXTRA;
    if (!extra) {
        tb_arg args[TB_MAX_ARGS];
        tb_error e2;
        for (i = 0; i < st->operand_count; i++)
            args[i].u = st->operands[i].space == TB_SPACE_LITERAL ? st->operands[i].value : 0;
        if (tb_grid_compute(cf, args, st->operand_count, NULL, 0, g, &e2) != tb_ok)
            return tb__fail(err, tb_err_malformed, key, NULL, -1, 0,
                            "program step %u: its config's grid rule gives no grid for the step's operands (%s)", s,
                            e2.message);
        if (g[0] != st->grid[0] || g[1] != st->grid[1] || g[2] != st->grid[2])
            return tb__fail(
                err, tb_err_malformed, key, NULL, -1, 0,
                "program step %u: grid %u x %u x %u, where its config's grid rule gives %u x %u x %u for the "
                "step's operands",
                s, st->grid[0], st->grid[1], st->grid[2], g[0], g[1], g[2]);
    }
    return tb_ok;
}

static int tb__writes_constant(const tb_program *p, const tb_operand *dst) {
    return dst->space == TB_SPACE_CONSTANT && dst->index < p->constant_count &&
           !(p->constants[dst->index].flags & TB_CONSTANT_STATE);
}

/* The step kinds' table (TB__STEP_KINDS, beside TB_STEP_*) as rows, and
   its lookup: the name and operand count of a kind, NULL for a number
   that is no kind. */
typedef struct tb__step_kind_row {
    uint32_t kind;
    int operands;                /* -1: one per argument code of the record's config */
    const char *name, *writes;
} tb__step_kind_row;
#define TB__STEP_KIND_ROW(code, name, operands, writes) {code, operands, name, writes},
static const tb__step_kind_row tb__step_kinds[] = {TB__STEP_KINDS(TB__STEP_KIND_ROW)};
#undef TB__STEP_KIND_ROW
/* the lookup indexes: the rows are numbered 1.. in order, or the build fails */
#define TB__STEP_KIND_AT(code, name, operands, writes) tb__step_row_##code,
enum { TB__STEP_KINDS(TB__STEP_KIND_AT) tb__step_row_end };
#undef TB__STEP_KIND_AT
#define TB__STEP_KIND_NUMBERED(code, name, operands, writes) && (code) == tb__step_row_##code + 1u
typedef char tb__step_kinds_numbered_in_order[(1 TB__STEP_KINDS(TB__STEP_KIND_NUMBERED)) ? 1 : -1];
#undef TB__STEP_KIND_NUMBERED
static const tb__step_kind_row *tb__step_kind(uint32_t kind) {
    return kind >= 1 && kind <= TB__STEP_KIND_COUNT ? &tb__step_kinds[kind - 1] : NULL;
}
/* A place that switches or tests over step kinds says how many it
   handles (n), at file scope beside it: when a row is added to
   TB__STEP_KINDS, the build fails there (an array of size -1 named
   tb__step_kinds_handled_<where>) until that place learns the new kind
   and says so. */
#define TB__STEP_KINDS_HANDLED(n, where)                                                                               \
    typedef char tb__step_kinds_handled_##where[TB__STEP_KIND_COUNT == (n) ? 1 : -1]

/* Step s: its fields in file order, then its operands (FORMAT.md's
   section 5; the reader checks each step as it reads it). */
TB__STEP_KINDS_HANDLED(3, check_step);
static tb_result tb__check_step(const tb_bundle *b, const tb_program *p, uint32_t s, tb_error *err) {
    const tb_program_step *st = &p->steps[s];
    const tb__step_kind_row *sk = tb__step_kind(st->kind);
    uint32_t want;
    uint64_t touch;
    tb_result r;
    if (!sk)
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "program step %u: kind %u is not a step", s,
                        st->kind);
    if (st->operand_count > TB_MAX_ARGS)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "program step %u: %u operands, over TB_MAX_ARGS", s,
                        st->operand_count);
    if (st->operand_count && !st->operands)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "program step %u: operands is NULL", s);
    if (st->kind != TB_STEP_LAUNCH && (st->record || st->config || st->grid[0] || st->grid[1] || st->grid[2]))
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                        "program step %u: a %s's record, config or grid is not 0", s, sk->name);
    switch (st->kind) {
    case TB_STEP_LAUNCH:
        if (st->record >= b->record_count || st->config >= b->records[st->record].config_count)
            return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                            "program step %u: record %u config %u does not exist", s, st->record, st->config);
        if ((!p->symbol_count && (!st->grid[0] || !st->grid[1] || !st->grid[2])) || st->grid[0] > 0x7fffffffu ||
            st->grid[1] > 65535u || st->grid[2] > 65535u)
            return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                            "program step %u: grid %u x %u x %u is outside CUDA's range", s, st->grid[0], st->grid[1],
                            st->grid[2]);
        if (st->width || st->value)
            return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                            "program step %u: a launch's width or value is not 0", s);
        if (st->count)
            return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "program step %u: a launch's count is not 0", s);
        break;
    case TB_STEP_MEMSET:
        if ((st->width != 1 && st->width != 2 && st->width != 4) || (st->width < 4 && st->value >> (8 * st->width)))
            return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                            "program step %u: a memset of width %u (1, 2 or 4) and value %u (which must fit it)", s,
                            st->width, st->value);
        break;
    case TB_STEP_COPY:
        if (st->width || st->value)
            return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                            "program step %u: a copy's width or value is not 0", s);
        break;
    }
    /* the table's count; -1 (a launch): one per argument code of its record's config, which exists (above) */
    want = sk->operands >= 0 ? (uint32_t)sk->operands
                             : (uint32_t)strlen(b->records[st->record].configs[st->config].arg_types);
    if (st->operand_count != want)
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "program step %u: %u operands, it takes %u", s,
                        st->operand_count, want);
    if (st->kind == TB_STEP_LAUNCH)
        return (r = tb__check_launch_operands(b, p, s, err)) != tb_ok ? r : tb__check_launch_grid(b, p, s, err);
    if (st->kind == TB_STEP_MEMSET && st->count > UINT64_MAX / st->width)
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "program step %u: memset count overflows", s);
    touch = st->kind == TB_STEP_MEMSET ? st->count * st->width : st->count;
    if ((r = tb__check_pointer(p, s, 0, &st->operands[0], touch, err)) != tb_ok ||
        (st->kind == TB_STEP_COPY && (r = tb__check_pointer(p, s, 1, &st->operands[1], touch, err)) != tb_ok))
        return r;
    if (st->kind == TB_STEP_MEMSET && !tb__operand_aligned(p, &st->operands[0], st->width))
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                        "program step %u: a memset of width %u needs a destination aligned to it", s, st->width);
    if (tb__writes_constant(p, &st->operands[0]))
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                        "program step %u writes constant %u, which is not state (read only)", s, st->operands[0].index);
    if (st->kind == TB_STEP_COPY && st->operands[0].space == st->operands[1].space &&
        st->operands[0].index == st->operands[1].index && st->count &&
        st->operands[0].value < st->operands[1].value + st->count &&
        st->operands[1].value < st->operands[0].value + st->count)
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "program step %u: a copy between overlapping bytes",
                        s);
    return tb_ok;
}

static tb_result tb__check_tensor(const tb_tensor_spec *t, const char *what, uint32_t i, tb_error *err) {
    uint32_t d;
    size_t n = t->name ? strlen(t->name) : 0;
    if (n == 0 || n > TB_MAX_NAME_LENGTH)
        return tb__fail(err, n ? tb_err_limit : tb_err_bad_name, NULL, NULL, -1, 0,
                        "program %s %u: a name of %zu bytes", what, i, n);
    if (!tb__dtype(t->dtype))
        return tb__fail(err, tb_err_unsupported_type, NULL, NULL, -1, 0, "program %s %u (%.80s): dtype %u is unknown",
                        what, i, t->name, t->dtype);
    if (t->rank > TB_MAX_TENSOR_DIMS)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "program %s %u (%.80s): rank %u, over %u", what, i,
                        t->name, t->rank, (unsigned)TB_MAX_TENSOR_DIMS);
    if (!t->align || t->align > 4096u || (t->align & (t->align - 1)))
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                        "program %s %u (%.80s): align %u is not a power of two up to 4096", what, i, t->name, t->align);
    for (d = 0; d < t->rank; d++)
        if (t->shape[d] < 0 || t->strides[d] < 0)
            return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                            "program %s %u (%.80s): a negative size or stride", what, i, t->name);
    if (tb_tensor_spec_extent(t) == UINT64_MAX)
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "program %s %u (%.80s): its extent overflows", what,
                        i, t->name);
    return tb_ok;
}

/* Names unique within one list (sorted copies of the pointers). */
static tb_result tb__check_unique_names(const tb__ctx *c, const tb_tensor_spec *t, uint32_t n, const char *what,
                                        tb_error *err) {
    const char **v;
    uint32_t i;
    tb_result r = tb_ok;
    if (n < 2) return tb_ok;
    if (!(v = (const char **)tb__alloc(c, (size_t)n * sizeof *v))) return TB__OOM(err);
    for (i = 0; i < n; i++) v[i] = t[i].name;
    if (tb__sort(c, v, n, sizeof *v, tb__cmp_str, NULL) != tb_ok) {
        tb__free(c, v);
        return TB__OOM(err);
    }
    for (i = 1; i < n && r == tb_ok; i++)
        if (!strcmp(v[i - 1], v[i]))
            r = tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "program: two %ss named \"%.80s\"", what, v[i]);
    tb__free(c, v);
    return r;
}

/* The plan: buffers inside the workspace, lifetimes within the steps, and
   no two whose lifetimes overlap sharing a byte. A sweep over the steps
   keeps the live buffers ordered by offset (their ranks in a Fenwick tree
   of the buffers sorted by offset); live buffers are disjoint, so a
   buffer that comes alive overlaps one of them exactly when it overlaps
   its neighbour below or above: O(n log n) whatever the input. */
/* (the orders of buffer indexes; ctx: the buffers) */
static int tb__cmp_by_offset(const void *a, const void *b, void *ctx) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    const tb_program_buffer *p = (const tb_program_buffer *)ctx;
    if (p[x].offset != p[y].offset) return p[x].offset < p[y].offset ? -1 : 1;
    return x < y ? -1 : x > y;
}
static int tb__cmp_by_first(const void *a, const void *b, void *ctx) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    const tb_program_buffer *p = (const tb_program_buffer *)ctx;
    if (p[x].first_step != p[y].first_step) return p[x].first_step < p[y].first_step ? -1 : 1;
    return x < y ? -1 : x > y;
}
static int tb__cmp_by_last(const void *a, const void *b, void *ctx) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    const tb_program_buffer *p = (const tb_program_buffer *)ctx;
    if (p[x].last_step != p[y].last_step) return p[x].last_step < p[y].last_step ? -1 : 1;
    return x < y ? -1 : x > y;
}
static void tb__fen_add(uint32_t *f, uint32_t n, uint32_t i, int d) { /* i: 1-based */
    for (; i <= n; i += i & (0u - i)) f[i] = (uint32_t)((int)f[i] + d);
}
static uint32_t tb__fen_sum(const uint32_t *f, uint32_t i) { /* ranks 1..i */
    uint32_t s = 0;
    for (; i; i -= i & (0u - i)) s += f[i];
    return s;
}
static uint32_t tb__fen_kth(const uint32_t *f, uint32_t n, uint32_t k) { /* the rank of the k-th live one, 1-based */
    uint32_t pos = 0, step = 1;
    while (step <= n / 2) step <<= 1;
    for (; step; step >>= 1)
        if (pos + step <= n && f[pos + step] < k) pos += step, k -= f[pos];
    return pos + 1;
}
/* One buffer: within the workspace, its lifetime within the steps (the
   reader checks each as it is read, at; the plan checks them all). */
static tb_result tb__check_buffer(const tb_program *p, uint32_t i, long long at, tb_error *err) {
    const tb_program_buffer *q = &p->buffers[i];
    if (q->offset > p->workspace_size || q->size > p->workspace_size - q->offset)
        return tb__fail(err, tb_err_malformed, NULL, NULL, at, 0, "program buffer %u lies outside the workspace", i);
    if (q->first_step > q->last_step || q->last_step >= p->step_count)
        return tb__fail(err, tb_err_malformed, NULL, NULL, at, 0, "program buffer %u: lifetime %u..%u of %u steps", i,
                        q->first_step, q->last_step, p->step_count);
    return tb_ok;
}
static tb_result tb__check_plan(const tb__ctx *c, const tb_program *p, tb_error *err) {
    uint32_t i, n = p->buffer_count, *by_off, *by_first, *by_last, *rank, *fen, a = 0, d = 0, live = 0, t;
    tb_result r = tb_ok;
    for (i = 0; i < n; i++)
        if ((r = tb__check_buffer(p, i, -1, err)) != tb_ok) return r;
    if (n < 2) return tb_ok;
    by_off = (uint32_t *)tb__alloc(c, (size_t)n * 4 * 5 + 4);
    if (!by_off) return TB__OOM(err);
    by_first = by_off + n, by_last = by_first + n, rank = by_last + n, fen = rank + n; /* fen: n + 1 */
    for (i = 0; i < n; i++) by_off[i] = by_first[i] = by_last[i] = i;
    if (tb__sort(c, by_off, n, 4, tb__cmp_by_offset, (void *)p->buffers) != tb_ok ||
        tb__sort(c, by_first, n, 4, tb__cmp_by_first, (void *)p->buffers) != tb_ok ||
        tb__sort(c, by_last, n, 4, tb__cmp_by_last, (void *)p->buffers) != tb_ok) {
        tb__free(c, by_off);
        return TB__OOM(err);
    }
    for (i = 0; i < n; i++) rank[by_off[i]] = i + 1;
    memset(fen, 0, ((size_t)n + 1) * 4);
    for (t = 0; t < p->step_count && a < n && r == tb_ok; t++) {
        while (d < n && p->buffers[by_last[d]].last_step < t) { /* dead before step t */
            const tb_program_buffer *q = &p->buffers[by_last[d]];
            if (q->size && q->first_step < t) tb__fen_add(fen, n, rank[by_last[d]], -1), live--;
            d++;
        }
        for (; a < n && p->buffers[by_first[a]].first_step == t && r == tb_ok; a++) {
            uint32_t b = by_first[a], below, k;
            const tb_program_buffer *q = &p->buffers[b], *o = NULL;
            if (!q->size) continue; /* shares no byte */
            below = tb__fen_sum(fen, rank[b] - 1);
            if (below) { /* the live buffer just below: it must end by q's start */
                o = &p->buffers[by_off[tb__fen_kth(fen, n, below) - 1]];
                if (o->offset + o->size <= q->offset) o = NULL;
            }
            k = tb__fen_sum(fen, rank[b]);
            if (!o && k < live) { /* the one just above: it must start at q's end or later */
                o = &p->buffers[by_off[tb__fen_kth(fen, n, k + 1) - 1]];
                if (o->offset >= q->offset + q->size) o = NULL;
            }
            if (o)
                r = tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                             "program buffers %u and %u share bytes while both are live (steps %u..%u and %u..%u)",
                             (uint32_t)(o - p->buffers), b, o->first_step, o->last_step, q->first_step, q->last_step);
            else
                tb__fen_add(fen, n, rank[b], 1), live++;
        }
    }
    tb__free(c, by_off);
    return r;
}

/* The symbols' checks and evaluation (>>symbols, after this section). */
static tb_result tb__check_dynamic(const tb_bundle *b, const tb_program *p, tb_error *err);
static tb_result tb__check_symbol(const tb_program_symbol *ys, uint32_t i, long long at, tb_error *err);

/* Every rule of FORMAT.md's section 5 that is not about bytes: the one
   checker of a program, for the reader and tb_bundle_set_program. */
static tb_result tb__check_program_body(const tb_bundle *b, const tb_program *p, tb_error *err) {
    uint32_t i;
    tb_result r;
    if (p->input_count > TB_MAX_PROGRAM_TENSORS || p->output_count > TB_MAX_PROGRAM_TENSORS ||
        p->constant_count > TB_MAX_PROGRAM_CONSTANTS || p->buffer_count > TB_MAX_PROGRAM_BUFFERS ||
        p->step_count > TB_MAX_PROGRAM_STEPS)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "a program count is over its TB_MAX_PROGRAM_* limit");
    if ((p->input_count && !p->inputs) || (p->output_count && !p->outputs) || (p->constant_count && !p->constants) ||
        (p->buffer_count && !p->buffers) || (p->step_count && !p->steps))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "a program array is NULL");
    if (p->name && (!*p->name || strlen(p->name) > TB_MAX_NAME_LENGTH))
        return tb__fail(err, *p->name ? tb_err_limit : tb_err_bad_name, NULL, NULL, -1, 0,
                        "a program name of %zu bytes (1 to %u)", strlen(p->name), (unsigned)TB_MAX_NAME_LENGTH);
    for (i = 0; i < p->input_count; i++)
        if ((r = tb__check_tensor(&p->inputs[i], "input", i, err)) != tb_ok) return r;
    for (i = 0; i < p->output_count; i++)
        if ((r = tb__check_tensor(&p->outputs[i], "output", i, err)) != tb_ok) return r;
    if ((r = tb__check_unique_names(&b->ctx, p->inputs, p->input_count, "input", err)) != tb_ok ||
        (r = tb__check_unique_names(&b->ctx, p->outputs, p->output_count, "output", err)) != tb_ok)
        return r;
    for (i = 0; i < p->constant_count; i++) {
        const tb_program_constant *k = &p->constants[i];
        size_t n = k->name ? strlen(k->name) : 0;
        if (n == 0 || n > TB_MAX_STRING_LENGTH)
            return tb__fail(err, n ? tb_err_limit : tb_err_bad_name, NULL, NULL, -1, 0,
                            "program constant %u: a name of %zu bytes", i, n);
        if (!tb__dtype(k->dtype))
            return tb__fail(err, tb_err_unsupported_type, NULL, NULL, -1, 0,
                            "program constant %u (%.80s): dtype %u is unknown", i, k->name, k->dtype);
        if ((k->flags & ~(TB_CONSTANT_STATE | TB_CONSTANT_SHARED | TB_CONSTANT_EXTERNAL)) ||
            ((k->flags & TB_CONSTANT_SHARED) && !(k->flags & TB_CONSTANT_STATE)) ||
            ((k->flags & TB_CONSTANT_EXTERNAL) && (k->flags & TB_CONSTANT_STATE)))
            return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                            "program constant %u (%.80s): flags %u (bit 1, shared, "
                            "goes with bit 0, state; bit 2, external, never does)",
                            i, k->name, k->flags);
        if (k->flags & TB_CONSTANT_EXTERNAL) {
            uint64_t bytes;
            int bad;
            size_t tn = k->tensor ? strlen(k->tensor) : 0;
            if (!tn || tn > TB_MAX_STRING_LENGTH || k->rank > TB_MAX_TENSOR_DIMS)
                return tb__fail(
                    err, tn > TB_MAX_STRING_LENGTH || k->rank > TB_MAX_TENSOR_DIMS ? tb_err_limit : tb_err_bad_name,
                    NULL, NULL, -1, 0,
                    "program constant %u (%.80s): external, with a tensor name of %zu bytes or rank %u", i, k->name, tn,
                    k->rank);
            bytes = tb__shape_bytes(tb__dtype(k->dtype)->bytes, k->rank, k->shape, &bad);
            if (bad || bytes != k->size)
                return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                                "program constant %u (%.80s): external, %llu bytes, but its shape holds %llu", i,
                                k->name, (unsigned long long)k->size, (unsigned long long)bytes);
            continue;
        }
        if (k->size && !k->data)
            return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                            "program constant %u (%.80s): data is NULL", i, k->name);
    }
    if ((r = tb__check_plan(&b->ctx, p, err)) != tb_ok) return r;
    if (p->symbol_count > TB_MAX_PROGRAM_SYMBOLS)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "program: %u symbols", p->symbol_count);
    for (i = 0; i < p->step_count; i++)
        if ((r = tb__check_step(b, p, i, err)) != tb_ok) return r;
    return p->symbol_count || p->expr_count ? tb__check_dynamic(b, p, err) : tb_ok;
}

/* A check's message names the program when the bundle may hold several:
   " [program "NAME"]" at its end, as a run-time failure names its step. */
static tb_result tb__check_program(const tb_bundle *b, const tb_program *p, tb_error *err) {
    tb_result r = tb__check_program_body(b, p, err);
    if (r != tb_ok && err && p->name && !strstr(err->message, "program \"")) {
        size_t n = strlen(err->message);
        if (n < sizeof err->message)
            snprintf(err->message + n, sizeof err->message - n, " [program \"%.60s\"]", p->name);
    }
    return r;
}

/* ---- sections 5 and 6: sizes and the writer ---- */
/* Section 5 (2.3) holds one program with its constants; section 6 (2.4)
   a table of constants and the programs that share it. A writer writes a
   bundle whose one program is named "forward" and shares nothing as
   section 5, which 2.3 readers run, and any other as section 6. */
#define TB__SEC_PROGRAM 5u
#define TB__SEC_PROGRAMS 6u
#define TB__PROGRAM_HEAD 40u
#define TB__PROGRAMS_HEAD 16u
#define TB__PROGRAM6_HEAD 32u    /* a section 6 program's counts and workspace, after its name */
#define TB__PROGRAM_STEP 48u
#define TB__PROGRAM_OPERAND 16u
#define TB__CONSTANT_ALIGN 64u
#define TB__DEFAULT_PROGRAM "forward"
static uint64_t tb__align_up64(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static int tb__in_section5(const tb_bundle *b) {
    uint32_t i;
    if (b->program_count != 1 || strcmp(b->programs[0]->name, TB__DEFAULT_PROGRAM) || b->property_count) return 0;
    for (i = 0; i < b->constant_count; i++)
        if (b->constants[i].flags & (TB_CONSTANT_SHARED | TB_CONSTANT_EXTERNAL)) return 0;
    return !b->programs[0]->symbol_count; /* (2.6) symbols: section 6's */
}
/* A program's tensors, buffers and steps: their length in the file. */
static size_t tb__program_body(const tb_program *p) {
    size_t pos = 0;
    uint32_t i;
    for (i = 0; i < p->input_count + p->output_count; i++) {
        const tb_tensor_spec *t = i < p->input_count ? &p->inputs[i] : &p->outputs[i - p->input_count];
        pos += tb__str_size(t->name) + 16 + 16 * (size_t)t->rank;
    }
    pos += (size_t)p->buffer_count * 24;
    for (i = 0; i < p->step_count; i++)
        pos += TB__PROGRAM_STEP + (size_t)p->steps[i].operand_count * TB__PROGRAM_OPERAND;
    if (p->symbol_count) pos += 8; /* (2.6) the two counts, the symbols, the expressions */
    for (i = 0; i < p->symbol_count; i++) pos += tb__str_size(p->symbols[i].name) + 24;
    for (i = 0; i < p->expr_count; i++) pos += 16 + 16 * (size_t)p->exprs[i].op_count;
    return pos;
}
/* The constants' table entries. */
static size_t tb__constant_table(const tb_bundle *b) {
    size_t pos = 0;
    uint32_t i;
    for (i = 0; i < b->constant_count; i++) {
        const tb_program_constant *k = &b->constants[i];
        pos += tb__str_size(k->name) + 24;
        if (k->flags & TB_CONSTANT_EXTERNAL) pos += tb__str_size(k->tensor) + 8 + 8 * (size_t)k->rank; /* 2.5 */
    }
    return pos;
}
/* Everything before the constants' bytes, in either section. */
static size_t tb__program_tables(const tb_bundle *b, int section5) {
    size_t pos = tb__constant_table(b);
    uint32_t i;
    if (section5) return pos + TB__PROGRAM_HEAD + tb__program_body(b->programs[0]);
    pos += TB__PROGRAMS_HEAD;
    for (i = 0; i < 2 * b->property_count; i++) pos += tb__str_size(b->properties[i]);
    for (i = 0; i < b->program_count; i++)
        pos += tb__str_size(b->programs[i]->name) + TB__PROGRAM6_HEAD + tb__program_body(b->programs[i]);
    return pos;
}
/* The payload's length when it starts at absolute offset `at` (0: not
   this section): the tables, then each constant at the next multiple of 64. */
static size_t tb__programs_payload(const tb_bundle *b, size_t at, int section5) {
    uint64_t pos;
    uint32_t i;
    if ((!b->program_count && (section5 || !b->property_count)) || tb__in_section5(b) != section5) return 0;
    pos = at + tb__program_tables(b, section5);
    for (i = 0; i < b->constant_count; i++)
        if (!(b->constants[i].flags & TB_CONSTANT_EXTERNAL))
            pos = tb__align_up64(pos, TB__CONSTANT_ALIGN) + b->constants[i].size;
    return (size_t)(pos - at);
}
static size_t tb__program_size(const tb_bundle *b, size_t at) { return tb__programs_payload(b, at, 1); }
static size_t tb__programs_size(const tb_bundle *b, size_t at) { return tb__programs_payload(b, at, 0); }
static void tb__write_tensor(tb__sink *k, const tb_tensor_spec *t) {
    uint32_t d;
    tb__sink_str(k, t->name);
    tb__sink_u32(k, t->dtype);
    tb__sink_u32(k, t->rank);
    tb__sink_u32(k, t->align);
    tb__sink_u32(k, 0);
    for (d = 0; d < t->rank; d++) tb__sink_u64(k, (uint64_t)t->shape[d]);
    for (d = 0; d < t->rank; d++) tb__sink_u64(k, (uint64_t)t->strides[d]);
}
static uint32_t tb__operand_total(const tb_program *p) {
    uint32_t i, n = 0;
    for (i = 0; i < p->step_count; i++) n += p->steps[i].operand_count; /* the checker bounded it */
    return n;
}
static void tb__write_constant_table(const tb_bundle *b, tb__sink *k, uint64_t data) {
    uint32_t i;
    for (i = 0; i < b->constant_count; i++) {
        const tb_program_constant *c = &b->constants[i];
        uint32_t d;
        tb__sink_str(k, c->name);
        tb__sink_u32(k, c->dtype);
        tb__sink_u32(k, c->flags);
        tb__sink_u64(k, c->size);
        if (c->flags & TB_CONSTANT_EXTERNAL) { /* no bytes here: offset 0, then the tensor it is */
            tb__sink_u64(k, 0);
            tb__sink_str(k, c->tensor);
            tb__sink_u32(k, c->rank);
            tb__sink_u32(k, c->crc32);
            for (d = 0; d < c->rank; d++) tb__sink_u64(k, (uint64_t)c->shape[d]);
            continue;
        }
        tb__sink_u64(k, data); /* each at the next multiple of 64, in one pass */
        data = tb__align_up64(data + c->size, TB__CONSTANT_ALIGN);
    }
}
static void tb__write_program_rest(const tb_program *p, tb__sink *k) { /* buffers, steps */
    uint32_t i, j;
    for (i = 0; i < p->buffer_count; i++) {
        tb__sink_u64(k, p->buffers[i].offset);
        tb__sink_u64(k, p->buffers[i].size);
        tb__sink_u32(k, p->buffers[i].first_step);
        tb__sink_u32(k, p->buffers[i].last_step);
    }
    for (i = 0; i < p->step_count; i++) {
        const tb_program_step *s = &p->steps[i];
        tb__sink_u32(k, s->kind);
        tb__sink_u32(k, s->operand_count);
        tb__sink_u32(k, s->record);
        tb__sink_u32(k, s->config);
        for (j = 0; j < 3; j++) tb__sink_u32(k, s->grid[j]);
        tb__sink_u32(k, s->width);
        tb__sink_u32(k, s->value);
        tb__sink_u32(k, 0);
        tb__sink_u64(k, s->count);
        for (j = 0; j < s->operand_count; j++) {
            tb__sink_u32(k, s->operands[j].space);
            tb__sink_u32(k, s->operands[j].index);
            tb__sink_u64(k, s->operands[j].value);
        }
    }
}
static void tb__write_constant_bytes(const tb_bundle *b, tb__sink *k) {
    uint32_t i;
    for (i = 0; i < b->constant_count; i++) {
        if (b->constants[i].flags & TB_CONSTANT_EXTERNAL) continue;
        tb__sink_align(k, TB__CONSTANT_ALIGN);
        tb__sink_put(k, b->constants[i].data, (size_t)b->constants[i].size);
    }
}
static void tb__write_program(const tb_bundle *b, tb__sink *k) {
    const tb_program *p = b->programs[0];
    uint64_t data = tb__align_up64(k->pos + tb__program_tables(b, 1), TB__CONSTANT_ALIGN); /* constant 0's offset */
    uint32_t i;
    tb__sink_u32(k, p->input_count);
    tb__sink_u32(k, p->output_count);
    tb__sink_u32(k, b->constant_count);
    tb__sink_u32(k, p->buffer_count);
    tb__sink_u32(k, p->step_count);
    tb__sink_u32(k, tb__operand_total(p));
    tb__sink_u32(k, 0);
    tb__sink_u32(k, 0);
    tb__sink_u64(k, p->workspace_size);
    for (i = 0; i < p->input_count; i++) tb__write_tensor(k, &p->inputs[i]);
    for (i = 0; i < p->output_count; i++) tb__write_tensor(k, &p->outputs[i]);
    tb__write_constant_table(b, k, data);
    tb__write_program_rest(p, k);
    tb__write_constant_bytes(b, k);
}
static void tb__write_programs(const tb_bundle *b, tb__sink *k) {
    uint64_t data = tb__align_up64(k->pos + tb__program_tables(b, 0), TB__CONSTANT_ALIGN);
    uint32_t i, j;
    tb__sink_u32(k, b->program_count);
    tb__sink_u32(k, b->constant_count);
    tb__sink_u32(k, b->property_count);
    tb__sink_u32(k, 0);
    for (i = 0; i < 2 * b->property_count; i++) tb__sink_str(k, b->properties[i]);
    tb__write_constant_table(b, k, data);
    for (j = 0; j < b->program_count; j++) {
        const tb_program *p = b->programs[j];
        tb__sink_str(k, p->name);
        tb__sink_u32(k, p->input_count);
        tb__sink_u32(k, p->output_count);
        tb__sink_u32(k, p->buffer_count);
        tb__sink_u32(k, p->step_count);
        tb__sink_u32(k, tb__operand_total(p));
        tb__sink_u32(k, p->symbol_count ? 1u : 0u); /* flags: bit 0, symbols (2.6) */
        tb__sink_u64(k, p->workspace_size);
        if (p->symbol_count) {
            tb__sink_u32(k, p->symbol_count);
            tb__sink_u32(k, p->expr_count);
            for (i = 0; i < p->symbol_count; i++) {
                tb__sink_str(k, p->symbols[i].name);
                tb__sink_u64(k, (uint64_t)p->symbols[i].min);
                tb__sink_u64(k, (uint64_t)p->symbols[i].max);
                tb__sink_u64(k, (uint64_t)p->symbols[i].divisor);
            }
        }
        for (i = 0; i < p->input_count; i++) tb__write_tensor(k, &p->inputs[i]);
        for (i = 0; i < p->output_count; i++) tb__write_tensor(k, &p->outputs[i]);
        tb__write_program_rest(p, k);
        for (i = 0; i < p->expr_count; i++) {
            const tb_program_expr *x = &p->exprs[i];
            uint32_t o;
            tb__sink_u32(k, x->field);
            tb__sink_u32(k, x->index);
            tb__sink_u32(k, x->sub);
            tb__sink_u32(k, x->op_count);
            for (o = 0; o < x->op_count; o++) {
                tb__sink_u32(k, x->ops[o].op);
                tb__sink_u32(k, x->ops[o].index);
                tb__sink_u64(k, (uint64_t)x->ops[o].value);
            }
        }
    }
    tb__write_constant_bytes(b, k);
}

/* ---- sections 5 and 6: the reader ---- */
/* n bytes from c->pos that must be zero, read in window-sized pieces. */
static tb_result tb__rd_zero_run(tb__cur *c, uint64_t n, const char *what) {
    while (n) {
        size_t piece = n > (uint64_t)TB__REFILL ? TB__REFILL : (size_t)n, i;
        const unsigned char *q;
        if (tb__need(c, piece, what)) return tb_err_truncated;
        if (!(q = tb__at(c, piece))) return tb_err_io;
        for (i = 0; i < piece; i++)
            if (q[i])
                return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)(c->pos + i), 0, "%s is not zero",
                                what);
        c->pos += piece;
        n -= piece;
    }
    return tb_ok;
}
static tb_result tb__rd_tensor(tb_bundle *b, tb__cur *c, tb_tensor_spec *t, const char *what, uint32_t index) {
    uint32_t v[4], d;
    size_t at = c->pos;
    tb_result r;
    if ((r = tb__rd_str(c, &t->name, TB_MAX_NAME_LENGTH, "tensor name")) != tb_ok) return r;
    for (d = 0; d < 4; d++)
        if ((r = tb__rd_u32(c, &v[d], "tensor")) != tb_ok) return r;
    t->dtype = v[0], t->rank = v[1], t->align = v[2];
    /* its fixed fields in file order (FORMAT.md's order of the checks),
       then its sizes and strides */
    if (!*t->name)
        return tb__fail(c->err, tb_err_bad_name, NULL, NULL, (long long)at, 0, "program %s %u has an empty name", what,
                        index);
    if (!tb__dtype(t->dtype))
        return tb__fail(c->err, tb_err_unsupported_type, NULL, NULL, (long long)at, 0,
                        "program %s %u: dtype %u is unknown (a newer version's?)", what, index, t->dtype);
    if (t->rank > TB_MAX_TENSOR_DIMS)
        return tb__fail(c->err, tb_err_limit, NULL, NULL, (long long)at, 0, "program %s %u: rank %u, over %u", what,
                        index, t->rank, (unsigned)TB_MAX_TENSOR_DIMS);
    if (!t->align || t->align > 4096u || (t->align & (t->align - 1)))
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)at, 0,
                        "program %s %u: align %u is not a power of two up to 4096", what, index, t->align);
    if (v[3])
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)at, 0,
                        "program %s %u: reserved field not zero", what, index);
    for (d = 0; d < 2 * t->rank; d++) {
        uint64_t x;
        if ((r = tb__rd_u64(c, &x, "tensor sizes")) != tb_ok) return r;
        if (d < t->rank) t->shape[d] = (int64_t)x;
        else t->strides[d - t->rank] = (int64_t)x;
    }
    (void)b;
    return tb__check_tensor(t, what, index, c->err);
}

/* An EXTERNAL constant's entry (2.5) after its fixed fields: offset 0,
   the tensor's name, rank, CRC-32 and shape, whose bytes are its size. */
static tb_result tb__rd_external(tb_bundle *b, tb__cur *c, tb_program_constant *k, uint32_t i, uint64_t offset,
                                 size_t kat) {
    uint32_t d;
    uint64_t bytes;
    int bad;
    tb_result r;
    if (b->format_major == 2 && b->format_minor < 5)
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)kat, 0,
                        "program constant %u: an external constant in a file of format 2.%u (they came with 2.5)", i,
                        b->format_minor);
    if ((r = tb__rd_str(c, &k->tensor, TB_MAX_STRING_LENGTH, "constant's tensor name")) != tb_ok ||
        (r = tb__rd_u32(c, &k->rank, "constant")) != tb_ok || (r = tb__rd_u32(c, &k->crc32, "constant")) != tb_ok)
        return r;
    if (offset || (k->flags & TB_CONSTANT_STATE) || !*k->tensor || k->rank > TB_MAX_TENSOR_DIMS)
        return tb__fail(
            c->err, tb_err_malformed, NULL, NULL, (long long)kat, 0,
            "program constant %u: an external one with offset %llu (not 0), the state flag, an empty tensor name "
            "or rank %u (over %u)",
            i, (unsigned long long)offset, k->rank, (unsigned)TB_MAX_TENSOR_DIMS);
    for (d = 0; d < k->rank; d++) {
        uint64_t x;
        if ((r = tb__rd_u64(c, &x, "constant's shape")) != tb_ok) return r;
        k->shape[d] = (int64_t)x; /* past 2^63 - 1: negative, refused below */
    }
    bytes = tb__shape_bytes(tb__dtype(k->dtype)->bytes, k->rank, k->shape, &bad);
    if (bad || bytes != k->size)
        return tb__fail(
            c->err, tb_err_malformed, NULL, NULL, (long long)kat, 0,
            "program constant %u: an external one of %llu bytes whose shape (each size at most 2^63 - 1) holds "
            "%s%llu",
            i, (unsigned long long)k->size, bad ? "more than " : "", (unsigned long long)bytes);
    return tb_ok;
}

/* The constants' table: each entry as it is read, its offset within the
   section and after the one before; offsets[] for the bytes. */
static tb_result tb__rd_constant_table(tb_bundle *b, tb__cur *c, uint32_t n, uint64_t *offsets, unsigned flags_ok) {
    uint64_t prev_end = 0;
    uint32_t i;
    tb_result r;
    for (i = 0; i < n; i++) {
        tb_program_constant *k = &b->constants[i];
        size_t kat = c->pos;
        if ((r = tb__rd_str(c, &k->name, TB_MAX_STRING_LENGTH, "constant name")) ||
            (r = tb__rd_u32(c, &k->dtype, "constant")) || (r = tb__rd_u32(c, &k->flags, "constant")) ||
            (r = tb__rd_u64(c, &k->size, "constant")) || (r = tb__rd_u64(c, &offsets[i], "constant")))
            return r;
        if (!*k->name)
            return tb__fail(c->err, tb_err_bad_name, NULL, NULL, (long long)kat, 0,
                            "program constant %u has an empty name", i);
        if (!tb__dtype(k->dtype))
            return tb__fail(c->err, tb_err_unsupported_type, NULL, NULL, (long long)kat, 0,
                            "program constant %u: dtype %u is unknown", i, k->dtype);
        if ((k->flags & ~flags_ok) || ((k->flags & TB_CONSTANT_SHARED) && !(k->flags & TB_CONSTANT_STATE)))
            return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)kat, 0, "program constant %u: flags %u", i,
                            k->flags);
        if (k->flags & TB_CONSTANT_EXTERNAL) { /* no bytes here: the constants around it keep their order */
            if ((r = tb__rd_external(b, c, k, i, offsets[i], kat)) != tb_ok) return r;
            continue;
        }
        if (offsets[i] % TB__CONSTANT_ALIGN || offsets[i] < prev_end)
            return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)kat, 0,
                            "program constant %u: offset %llu not a multiple of 64 or before the end of the constant "
                            "before it", i, (unsigned long long)offsets[i]);
        if (offsets[i] > c->end || k->size > (uint64_t)(c->end - offsets[i]))
            return tb__fail(c->err, tb_err_truncated, NULL, NULL, (long long)kat, 0,
                            "program constant %u (%llu bytes at %llu) runs past its section", i,
                            (unsigned long long)k->size, (unsigned long long)offsets[i]);
        prev_end = offsets[i] + k->size;
    }
    return tb_ok;
}

/* A program's counts as read: inputs, outputs, buffers, steps, the
   operand total. */
typedef struct tb__program_counts {
    uint32_t inputs, outputs, buffers, steps, operands;
} tb__program_counts;
static const uint32_t tb__count_limits[4] = {TB_MAX_PROGRAM_TENSORS, TB_MAX_PROGRAM_TENSORS, TB_MAX_PROGRAM_BUFFERS,
                                             TB_MAX_PROGRAM_STEPS};
static const size_t tb__count_smallest[4] = {24, 24, 24, 48};
static const char *const tb__count_names[4] = {"input count", "output count", "buffer count", "step count"};

/* A program's tensors, to be followed by its buffers and steps
   (tb__rd_program_rest): the arrays made for its counts, the tensors
   read, their names unique. */
static tb_result tb__rd_program_tensors(tb_bundle *b, tb__cur *c, tb_program *p, const tb__program_counts *n) {
    tb_tensor_spec *tensors = NULL;
    uint32_t i;
    tb_result r;
    if ((n->inputs + n->outputs && !(tensors = (tb_tensor_spec *)tb__arena_alloc(
                                         &b->ctx, &b->arena, ((size_t)n->inputs + n->outputs) * sizeof *tensors))) ||
        (n->buffers && !(p->buffers = (tb_program_buffer *)tb__arena_alloc(&b->ctx, &b->arena,
                                                                           (size_t)n->buffers * sizeof *p->buffers))) ||
        (n->steps &&
         !(p->steps = (tb_program_step *)tb__arena_alloc(&b->ctx, &b->arena, (size_t)n->steps * sizeof *p->steps))))
        return TB__OOM(c->err);
    if (tensors) memset(tensors, 0, ((size_t)n->inputs + n->outputs) * sizeof *tensors);
    p->input_count = n->inputs, p->output_count = n->outputs, p->buffer_count = n->buffers, p->step_count = n->steps;
    p->inputs = tensors, p->outputs = tensors ? tensors + n->inputs : NULL;
    for (i = 0; i < n->inputs + n->outputs; i++)
        if ((r = tb__rd_tensor(b, c, &tensors[i], i < n->inputs ? "input" : "output",
                               i < n->inputs ? i : i - n->inputs)) != tb_ok)
            return r;
    if ((r = tb__check_unique_names(&b->ctx, p->inputs, p->input_count, "input", c->err)) != tb_ok ||
        (r = tb__check_unique_names(&b->ctx, p->outputs, p->output_count, "output", c->err)) != tb_ok)
        return r;
    return tb_ok;
}
/* Its buffers and plan, its steps (each checked as it is read) and its
   operand total. */
static tb_result tb__rd_program_rest(tb_bundle *b, tb__cur *c, tb_program *p, uint32_t operand_total, size_t at) {
    tb_program_buffer *bufs = (tb_program_buffer *)p->buffers;
    tb_program_step *steps = (tb_program_step *)p->steps;
    uint64_t operands = 0;
    uint32_t i, j;
    tb_result r;
    for (i = 0; i < p->buffer_count; i++) { /* each checked as it is read (FORMAT.md), before the next one's bytes */
        size_t bat = c->pos;
        if ((r = tb__rd_u64(c, &bufs[i].offset, "buffer")) || (r = tb__rd_u64(c, &bufs[i].size, "buffer")) ||
            (r = tb__rd_u32(c, &bufs[i].first_step, "buffer")) || (r = tb__rd_u32(c, &bufs[i].last_step, "buffer")) ||
            (r = tb__check_buffer(p, i, (long long)bat, c->err)))
            return r;
    }
    if ((r = tb__check_plan(&b->ctx, p, c->err)) != tb_ok) return r;
    for (i = 0; i < p->step_count; i++) {
        tb_program_step *s = &steps[i];
        uint32_t f[10];
        size_t sat = c->pos, need;
        tb_operand *ops = NULL;
        /* kind, then the operand count (its limit, and the bytes that
           remain after it), then the other fields */
        if ((r = tb__rd_u32(c, &f[0], "step kind")) ||
            (r = tb__rd_count(c, &f[1], TB_MAX_ARGS, TB__PROGRAM_OPERAND, "operand count")))
            return r;
        for (j = 2; j < 10; j++)
            if ((r = tb__rd_u32(c, &f[j], "step")) != tb_ok) return r;
        if ((r = tb__rd_u64(c, &s->count, "step")) != tb_ok) return r;
        s->kind = f[0], s->operand_count = f[1], s->record = f[2], s->config = f[3];
        s->grid[0] = f[4], s->grid[1] = f[5], s->grid[2] = f[6], s->width = f[7], s->value = f[8];
        /* the running total, then the operands' bytes */
        operands += s->operand_count;
        if (operands > operand_total)
            return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)sat, 0,
                            "program step %u: more operands than the total %u", i, operand_total);
        need = (size_t)s->operand_count * TB__PROGRAM_OPERAND;
        if (need > c->end - c->pos)
            return tb__fail(c->err, tb_err_truncated, NULL, NULL, (long long)sat, 0,
                            "program step %u: %u operands cannot fit", i, s->operand_count);
        if (s->operand_count && !(ops = (tb_operand *)tb__arena_alloc(&b->ctx, &b->arena, need)))
            return TB__OOM(c->err);
        for (j = 0; j < s->operand_count; j++)
            if ((r = tb__rd_u32(c, &ops[j].space, "operand")) || (r = tb__rd_u32(c, &ops[j].index, "operand")) ||
                (r = tb__rd_u64(c, &ops[j].value, "operand")))
                return r;
        s->operands = ops;
        if ((r = tb__check_step(b, p, i, c->err)) != tb_ok) return r;
        if (f[9])
            return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)sat, 0,
                            "program step %u: reserved field not zero", i);
    }
    if (operands != operand_total)
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)at, 0,
                        "program operand total %u, the steps hold %llu", operand_total, (unsigned long long)operands);
    return tb_ok;
}
/* The constants' bytes: in order, after the tables, zeros between and
   after them. */
static tb_result tb__rd_constant_bytes(tb_bundle *b, tb__cur *c, const uint64_t *offsets) {
    uint32_t i;
    tb_result r;
    for (i = 0; i < b->constant_count; i++) {
        uint64_t off = offsets[i];
        if (b->constants[i].flags & TB_CONSTANT_EXTERNAL) continue; /* in a weights file (data NULL) */
        if (off < c->pos) /* (order and the section's end were checked with the table) */
            return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)off, 0,
                            "program constant %u at %llu overlaps the tables", i, (unsigned long long)off);
        if ((r = tb__rd_zero_run(c, off - c->pos, "padding before a constant")) != tb_ok) return r;
        b->constants[i].data = c->base + c->pos;
        c->pos += (size_t)b->constants[i].size;
    }
    return tb__rd_zero_run(c, c->end - c->pos, "the bytes after the constants");
}
/* The table and the programs' array, made for the counts read. */
static tb_result tb__rd_program_arrays(tb_bundle *b, tb__cur *c, uint32_t programs, uint32_t constants,
                                       uint64_t **offsets) {
    uint32_t i;
    if ((constants &&
         (!(b->constants =
                (tb_program_constant *)tb__arena_alloc(&b->ctx, &b->arena, (size_t)constants * sizeof *b->constants)) ||
          !(*offsets = (uint64_t *)tb__arena_alloc(&b->ctx, &b->arena, (size_t)constants * sizeof **offsets)))) ||
        !(b->programs = (tb_program **)tb__alloc(&b->ctx, (size_t)programs * sizeof *b->programs)))
        return TB__OOM(c->err);
    if (constants) memset(b->constants, 0, (size_t)constants * sizeof *b->constants);
    b->constant_count = constants, b->constant_cap = 0, b->program_cap = programs;
    for (i = 0; i < programs; i++) {
        if (!(b->programs[i] = (tb_program *)tb__arena_alloc(&b->ctx, &b->arena, sizeof(tb_program))))
            return TB__OOM(c->err);
        memset(b->programs[i], 0, sizeof(tb_program));
        b->programs[i]->constants = b->constants, b->programs[i]->constant_count = constants;
    }
    return tb_ok;
}
/* no writer before 2.3 wrote a program (2.4: several); and a 2.0 file's
   duplicate records are dropped after the sections, which would move the
   records the steps name */
static tb_result tb__rd_programs_since(tb_bundle *b, tb__cur *c, uint32_t minor, const char *what) {
    if (b->program_count || b->programs)
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)c->pos, 0,
                        "a file with both sections 5 and 6");
    if (b->format_major < 2 || (b->format_major == 2 && b->format_minor < minor))
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)c->pos, 0,
                        "%s in a file of format %u.%u: they came with 2.%u", what, b->format_major, b->format_minor,
                        minor);
    return tb_ok;
}

static tb_result tb__rd_program(tb_bundle *b, tb__cur *c) {
    tb_program *p;
    tb__program_counts n;
    uint32_t h[8], i, nconst;
    uint64_t ws, *offsets = NULL;
    size_t at = c->pos;
    tb_result r;
    uint32_t *dst[4];
    if ((r = tb__rd_programs_since(b, c, 3, "a program (section 5)")) != tb_ok) return r;
    dst[0] = &n.inputs, dst[1] = &n.outputs, dst[2] = &n.buffers, dst[3] = &n.steps;
    for (i = 0; i < 5; i++) { /* inputs, outputs, constants, buffers, steps */
        if (i == 2) {
            if ((r = tb__rd_count(c, &nconst, TB_MAX_PROGRAM_CONSTANTS, 32, "constant count")) != tb_ok) return r;
            continue;
        }
        if ((r = tb__rd_count(c, dst[i - (i > 2)], tb__count_limits[i - (i > 2)], tb__count_smallest[i - (i > 2)],
                              tb__count_names[i - (i > 2)])) != tb_ok)
            return r;
    }
    /* the operand total: no limit of its own but the bytes (16 each) */
    if ((r = tb__rd_count(c, &n.operands, 0xffffffffu, TB__PROGRAM_OPERAND, "operand total")) != tb_ok) return r;
    for (i = 6; i < 8; i++)
        if ((r = tb__rd_u32(c, &h[i], "program head")) != tb_ok) return r;
    if (h[6] || h[7])
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)at, 0,
                        "program flags or reserved field not zero");
    if ((r = tb__rd_u64(c, &ws, "workspace size")) != tb_ok) return r;
    if ((r = tb__rd_program_arrays(b, c, 1, nconst, &offsets)) != tb_ok) return r;
    p = b->programs[0];
    p->name = TB__DEFAULT_PROGRAM, p->workspace_size = ws;
    if ((r = tb__rd_program_tensors(b, c, p, &n)) != tb_ok) return r;
    if ((r = tb__rd_constant_table(b, c, nconst, offsets, TB_CONSTANT_STATE)) != tb_ok) return r;
    if ((r = tb__rd_program_rest(b, c, p, n.operands, at)) != tb_ok) return r;
    if ((r = tb__rd_constant_bytes(b, c, offsets)) != tb_ok) return r;
    b->program_count = 1;
    return tb_ok;
}

/* (2.6) a program's symbols, before its tensors: the counts, then each
   symbol as it is read; the expression count is kept for tb__rd_exprs. */
static tb_result tb__rd_symbols(tb_bundle *b, tb__cur *c, tb_program *p, size_t pat) {
    tb_program_symbol *y;
    uint32_t n, ne, i, j;
    tb_result r;
    if ((r = tb__rd_count(c, &n, TB_MAX_PROGRAM_SYMBOLS, 32, "symbol count")) != tb_ok ||
        (r = tb__rd_count(c, &ne, TB_MAX_PROGRAM_EXPRS, 32, "expression count")) != tb_ok)
        return r;
    if (!n)
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)pat, 0,
                        "program \"%.80s\": flag bit 0 and no symbol", p->name);
    if (!(y = (tb_program_symbol *)tb__arena_alloc(&b->ctx, &b->arena, n * sizeof *y))) return TB__OOM(c->err);
    for (i = 0; i < n; i++) {
        size_t at = c->pos;
        uint64_t v[3];
        if ((r = tb__rd_str(c, &y[i].name, TB_MAX_NAME_LENGTH, "symbol name")) != tb_ok) return r;
        for (j = 0; j < 3; j++)
            if ((r = tb__rd_u64(c, &v[j], "symbol")) != tb_ok) return r;
        y[i].min = (int64_t)v[0], y[i].max = (int64_t)v[1], y[i].divisor = (int64_t)v[2];
        if ((r = tb__check_symbol(y, i, (long long)at, c->err)) != tb_ok) return r;
    }
    p->symbols = y, p->symbol_count = n, p->expr_count = ne;
    return tb_ok;
}
/* (2.6) a program's expressions, after its steps: each as it is read (its
   fields, its operations' bytes), then the whole by tb__check_dynamic. */
static tb_result tb__rd_exprs(tb_bundle *b, tb__cur *c, tb_program *p) {
    tb_program_expr *x = NULL;
    uint32_t i, o, n = p->expr_count;
    tb_result r;
    if (n && !(x = (tb_program_expr *)tb__arena_alloc(&b->ctx, &b->arena, n * sizeof *x))) return TB__OOM(c->err);
    p->exprs = x, p->expr_count = 0;
    for (i = 0; i < n; i++) {
        uint32_t h[4];
        tb_grid_op *ops;
        for (o = 0; o < 4; o++)
            if ((r = tb__rd_u32(c, &h[o], "expression")) != tb_ok) return r;
        if (!h[3] || h[3] > TB_MAX_EXPR_OPS)
            return tb__fail(c->err, h[3] ? tb_err_limit : tb_err_malformed, NULL, NULL, (long long)c->pos, 0,
                            "program expression %u has %u operations (1..TB_MAX_EXPR_OPS, %u)", i, h[3],
                            (unsigned)TB_MAX_EXPR_OPS);
        if (tb__need(c, (size_t)h[3] * 16, "expression operations")) return tb_err_truncated;
        if (!(ops = (tb_grid_op *)tb__arena_alloc(&b->ctx, &b->arena, h[3] * sizeof *ops))) return TB__OOM(c->err);
        for (o = 0; o < h[3]; o++) {
            uint64_t v;
            if ((r = tb__rd_u32(c, &ops[o].op, "expression")) != tb_ok ||
                (r = tb__rd_u32(c, &ops[o].index, "expression")) != tb_ok ||
                (r = tb__rd_u64(c, &v, "expression")) != tb_ok)
                return r;
            ops[o].value = (int64_t)v;
        }
        x[i].field = h[0], x[i].index = h[1], x[i].sub = h[2], x[i].op_count = h[3], x[i].ops = ops;
    }
    p->expr_count = n;
    return tb__check_dynamic(b, p, c->err);
}

/* Section 6: the programs' names unique, the table's names unique, and a
   state constant that two programs use marked shared. */
static tb_result tb__check_sharing(const tb_bundle *b, tb_error *err);
static tb_result tb__rd_programs(tb_bundle *b, tb__cur *c) {
    uint32_t np, nconst, f[2], i, j, d;
    uint64_t *offsets = NULL;
    size_t at = c->pos;
    tb_result r;
    if ((r = tb__rd_programs_since(b, c, 4, "programs (section 6)")) != tb_ok) return r;
    if ((r = tb__rd_count(c, &np, TB_MAX_PROGRAMS, 8 + TB__PROGRAM6_HEAD, "program count")) != tb_ok ||
        (r = tb__rd_count(c, &nconst, TB_MAX_PROGRAM_CONSTANTS, 32, "constant count")) != tb_ok ||
        (r = tb__rd_count(c, &f[0], TB_MAX_PROPERTIES, 16, "property count")) != tb_ok ||
        (r = tb__rd_u32(c, &f[1], "programs head")) != tb_ok)
        return r;
    if (f[1])
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)at, 0,
                        "section 6's reserved field is not zero");
    if (f[0] && !(b->properties = (const char **)tb__alloc(&b->ctx, (size_t)f[0] * 2 * sizeof *b->properties)))
        return TB__OOM(c->err);
    b->property_cap = f[0];
    for (i = 0; i < f[0]; i++) { /* key, value: a key 1 to 255 bytes, unique */
        size_t kat = c->pos;
        const char **kv = &b->properties[2 * i];
        if ((r = tb__rd_str(c, &kv[0], TB_MAX_NAME_LENGTH, "property key")) != tb_ok ||
            (r = tb__rd_str(c, &kv[1], TB_MAX_STRING_LENGTH, "property value")) != tb_ok)
            return r;
        if (!*kv[0])
            return tb__fail(c->err, tb_err_bad_name, NULL, NULL, (long long)kat, 0, "property %u has an empty key", i);
        for (d = 0; d < i; d++)
            if (!strcmp(b->properties[2 * d], kv[0]))
                return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)kat, 0,
                                "two properties named \"%.80s\"", kv[0]);
        b->property_count = i + 1;
    }
    if (!np && !nconst) { /* properties alone */
        if (!(b->programs = (tb_program **)tb__alloc(&b->ctx, sizeof *b->programs))) return TB__OOM(c->err);
        return tb__rd_zero_run(c, c->end - c->pos, "the bytes after the properties");
    }
    if (!np)
        return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)at, 0,
                        "section 6 with constants and no program");
    if ((r = tb__rd_program_arrays(b, c, np, nconst, &offsets)) != tb_ok) return r;
    if ((r = tb__rd_constant_table(b, c, nconst, offsets,
                                   TB_CONSTANT_STATE | TB_CONSTANT_SHARED | TB_CONSTANT_EXTERNAL)) != tb_ok)
        return r;
    for (j = 0; j < np; j++) {
        tb_program *p = b->programs[j];
        tb__program_counts n;
        uint32_t *dst[4], h[2];
        size_t pat = c->pos;
        dst[0] = &n.inputs, dst[1] = &n.outputs, dst[2] = &n.buffers, dst[3] = &n.steps;
        if ((r = tb__rd_str(c, &p->name, TB_MAX_NAME_LENGTH, "program name")) != tb_ok) return r;
        if (!*p->name)
            return tb__fail(c->err, tb_err_bad_name, NULL, NULL, (long long)pat, 0, "program %u has an empty name", j);
        for (i = 0; i < j; i++)
            if (!strcmp(b->programs[i]->name, p->name))
                return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)pat, 0, "two programs named \"%.80s\"",
                                p->name);
        for (d = 0; d < 4; d++)
            if ((r = tb__rd_count(c, dst[d], tb__count_limits[d], tb__count_smallest[d], tb__count_names[d])) != tb_ok)
                return r;
        if ((r = tb__rd_count(c, &n.operands, 0xffffffffu, TB__PROGRAM_OPERAND, "operand total")) != tb_ok ||
            (r = tb__rd_u32(c, &h[0], "program head")) != tb_ok ||
            (r = tb__rd_u64(c, &p->workspace_size, "workspace size")) != tb_ok)
            return r;
        if (h[0] & ~1u || (h[0] && b->format_major == 2 && b->format_minor < 6))
            return tb__fail(c->err, tb_err_malformed, NULL, NULL, (long long)pat, 0,
                            "program \"%.80s\": flags %u (bit 0, symbols, came with 2.6; no other)", p->name, h[0]);
        if (h[0] && (r = tb__rd_symbols(b, c, p, pat)) != tb_ok) return r;
        if ((r = tb__rd_program_tensors(b, c, p, &n)) != tb_ok ||
            (r = tb__rd_program_rest(b, c, p, n.operands, pat)) != tb_ok)
            return r;
        if (h[0] && (r = tb__rd_exprs(b, c, p)) != tb_ok) return r;
    }
    b->program_count = np;
    if ((r = tb__check_sharing(b, c->err)) != tb_ok) return r;
    return tb__rd_constant_bytes(b, c, offsets);
}

/* ---- building and reading ---- */
/* Constants' names unique in the table (a 2.3 program's may repeat: it
   is then the one program), and every state constant that two programs
   use marked shared, every shared one state. */
static tb_result tb__constant_names_unique(const tb_bundle *b, tb_error *err) {
    tb_tensor_spec *v;
    uint32_t i;
    tb_result r;
    if (b->constant_count < 2) return tb_ok;
    if (!(v = (tb_tensor_spec *)tb__alloc(&b->ctx, (size_t)b->constant_count * sizeof *v))) return TB__OOM(err);
    for (i = 0; i < b->constant_count; i++) v[i].name = b->constants[i].name; /* through the tensors' name check */
    r = tb__check_unique_names(&b->ctx, v, b->constant_count, "constant", err);
    tb__free(&b->ctx, v);
    return r;
}
static tb_result tb__check_sharing(const tb_bundle *b, tb_error *err) {
    uint32_t i, s, o, j, *user = NULL;
    const tb_program_constant *k = b->constants;
    tb_result r = tb_ok;
    if (b->program_count && !tb__in_section5(b) && (r = tb__constant_names_unique(b, err)) != tb_ok) return r;
    for (i = 0; i < b->constant_count; i++)
        if ((k[i].flags & TB_CONSTANT_SHARED) && !(k[i].flags & TB_CONSTANT_STATE))
            return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "constant %u (%.80s) is shared but not state", i,
                            k[i].name);
    if (b->program_count < 2 || !b->constant_count) return tb_ok;
    if (!(user = (uint32_t *)tb__alloc(&b->ctx, (size_t)b->constant_count * sizeof *user))) return TB__OOM(err);
    memset(user, 0xff, (size_t)b->constant_count * sizeof *user);
    for (j = 0; j < b->program_count && r == tb_ok; j++) {
        const tb_program *p = b->programs[j];
        for (s = 0; s < p->step_count && r == tb_ok; s++)
            for (o = 0; o < p->steps[s].operand_count && r == tb_ok; o++) {
                const tb_operand *op = &p->steps[s].operands[o];
                uint32_t x = op->index;
                if (op->space != TB_SPACE_CONSTANT || !(k[x].flags & TB_CONSTANT_STATE)) continue;
                if (user[x] == 0xffffffffu) user[x] = j;
                else if (user[x] != j && !(k[x].flags & TB_CONSTANT_SHARED))
                    r = tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                                 "state constant %u (%.80s) is used by programs \"%.60s\" and \"%.60s\" but not marked "
                                 "shared (TB_CONSTANT_SHARED)", x, k[x].name, b->programs[user[x]]->name, p->name);
            }
    }
    tb__free(&b->ctx, user);
    return r;
}

/* The library's own copy of n bytes at src: through the checked path when
   src lies in a bundle's mapped file (tb__mapped_copy, >>fs), so that a
   file truncated under the mapping gives tb_err_io, never SIGBUS. */
static int tb__mapped_copy(void *dst, const void *src, size_t n);

/* Removes every program and the constants' table (their bytes stay in the
   arena until the bundle is freed). */
static void tb__drop_programs(tb_bundle *b) {
    b->program_count = 0;
    if (b->constant_cap) tb__free(&b->ctx, b->constants);
    b->constants = NULL, b->constant_count = b->constant_cap = 0;
}

/* A constant whose name the table has: the same dtype, size, flags and
   bytes, compared in pieces through the checked path. */
static tb_result tb__same_constant(tb_bundle *b, uint32_t t, const tb_program_constant *k, uint32_t i, tb_error *err) {
    const tb_program_constant *x = &b->constants[t];
    unsigned char buf[2][4096];
    uint64_t off;
    if ((x->flags | k->flags) & TB_CONSTANT_EXTERNAL) {
        if (x->flags == k->flags && x->dtype == k->dtype && x->size == k->size && !strcmp(x->tensor, k->tensor) &&
            x->rank == k->rank && x->crc32 == k->crc32 && !memcmp(x->shape, k->shape, k->rank * sizeof *k->shape))
            return tb_ok;
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "constant %u \"%.80s\": the bundle's constant of that name is %s, this one %s", i, k->name,
                        (x->flags & TB_CONSTANT_EXTERNAL) ? "a tensor of the weights file" : "in the bundle",
                        (k->flags & TB_CONSTANT_EXTERNAL) ? "a tensor of the weights file (another, or another shape)" :
                                                            "in the bundle");
    }
    if (x->dtype != k->dtype || x->size != k->size || (x->flags & TB_CONSTANT_STATE) != (k->flags & TB_CONSTANT_STATE))
        return tb__fail(
            err, tb_err_invalid_argument, NULL, NULL, -1, 0,
            "constant %u \"%.80s\": the bundle's constant of that name is %s, %llu bytes, flags %u; this one "
            "%s, %llu bytes, flags %u",
            i, k->name, tb_dtype_name(x->dtype), (unsigned long long)x->size, x->flags,
            tb_dtype_name(k->dtype) ? tb_dtype_name(k->dtype) : "?", (unsigned long long)k->size, k->flags);
    if (x->flags != k->flags || ((k->flags & TB_CONSTANT_STATE) && !(k->flags & TB_CONSTANT_SHARED)))
        return tb__fail(
            err, tb_err_invalid_argument, NULL, NULL, -1, 0,
            "state constant %u \"%.80s\" is in another program already: mark it TB_CONSTANT_SHARED in both to "
            "share it, or name them apart",
            i, k->name);
    if (x->data == k->data) return tb_ok;
    for (off = 0; off < k->size; off += sizeof buf[0]) {
        size_t n = k->size - off < sizeof buf[0] ? (size_t)(k->size - off) : sizeof buf[0];
        tb_result r;
        if ((r = tb_program_read_constant(b, t, off, buf[0], n, err)) != tb_ok) return r;
        if (tb__mapped_copy(buf[1], (const char *)k->data + off, n) != 0)
            return tb__fail(err, tb_err_io, NULL, NULL, -1, errno,
                            "constant %u \"%.80s\": its bundle file lost its bytes", i, k->name);
        if (memcmp(buf[0], buf[1], n))
            return tb__fail(
                err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                "constant %u \"%.80s\": the bundle's constant of that name holds other bytes (from byte %llu)", i,
                k->name, (unsigned long long)off);
    }
    return tb_ok;
}

/* (2.6) a program's symbols and expressions into the bundle's arena */
static tb_result tb__copy_dynamic(tb_bundle *b, const tb_program *src, tb_program *p, tb_error *err) {
    tb_program_symbol *y = NULL;
    tb_program_expr *x = NULL;
    uint32_t i;
    if (src->symbol_count &&
        !(y = (tb_program_symbol *)tb__arena_alloc(&b->ctx, &b->arena, src->symbol_count * sizeof *y)))
        return TB__OOM(err);
    for (i = 0; i < src->symbol_count; i++) {
        y[i] = src->symbols[i];
        if (!(y[i].name = tb__arena_strdup(&b->ctx, &b->arena, y[i].name, strlen(y[i].name)))) return TB__OOM(err);
    }
    if (src->expr_count && !(x = (tb_program_expr *)tb__arena_alloc(&b->ctx, &b->arena, src->expr_count * sizeof *x)))
        return TB__OOM(err);
    for (i = 0; i < src->expr_count; i++) {
        tb_grid_op *ops;
        x[i] = src->exprs[i];
        if (!(ops = (tb_grid_op *)tb__arena_alloc(&b->ctx, &b->arena, x[i].op_count * sizeof *ops)))
            return TB__OOM(err);
        memcpy(ops, src->exprs[i].ops, x[i].op_count * sizeof *ops);
        x[i].ops = ops;
    }
    p->symbols = y, p->exprs = x, p->values = NULL;
    return tb_ok;
}

/* A copy of program src (named name) in the bundle's arena, its CONSTANT
   operands renumbered by remap (src's constant -> the table's). */
static tb_result tb__copy_program(tb_bundle *b, const tb_program *src, const char *name, const uint32_t *remap,
                                  tb_program **out, tb_error *err) {
    tb_program *p;
    tb_tensor_spec *tensors = NULL;
    tb_program_buffer *bufs = NULL;
    tb_program_step *steps = NULL;
    uint32_t i, j;
    if (!(p = (tb_program *)tb__arena_alloc(&b->ctx, &b->arena, sizeof *p))) return TB__OOM(err);
    *p = *src;
    if (!(p->name = tb__arena_strdup(&b->ctx, &b->arena, name, strlen(name)))) return TB__OOM(err);
    if (src->input_count + src->output_count) {
        size_t n = (size_t)src->input_count + src->output_count;
        if (!(tensors = (tb_tensor_spec *)tb__arena_alloc(&b->ctx, &b->arena, n * sizeof *tensors)))
            return TB__OOM(err);
        if (src->input_count) memcpy(tensors, src->inputs, src->input_count * sizeof *tensors);
        if (src->output_count) memcpy(tensors + src->input_count, src->outputs, src->output_count * sizeof *tensors);
        for (i = 0; i < n; i++)
            if (!(tensors[i].name = tb__arena_strdup(&b->ctx, &b->arena, tensors[i].name, strlen(tensors[i].name))))
                return TB__OOM(err);
    }
    p->inputs = tensors, p->outputs = tensors ? tensors + src->input_count : NULL;
    if (src->buffer_count) {
        if (!(bufs = (tb_program_buffer *)tb__arena_alloc(&b->ctx, &b->arena, src->buffer_count * sizeof *bufs)))
            return TB__OOM(err);
        memcpy(bufs, src->buffers, src->buffer_count * sizeof *bufs);
    }
    p->buffers = bufs;
    if (src->step_count) {
        if (!(steps = (tb_program_step *)tb__arena_alloc(&b->ctx, &b->arena, src->step_count * sizeof *steps)))
            return TB__OOM(err);
        memcpy(steps, src->steps, src->step_count * sizeof *steps);
        for (i = 0; i < src->step_count; i++) {
            tb_operand *ops = NULL;
            if (steps[i].operand_count) {
                if (!(ops = (tb_operand *)tb__arena_alloc(&b->ctx, &b->arena, steps[i].operand_count * sizeof *ops)))
                    return TB__OOM(err);
                memcpy(ops, src->steps[i].operands, steps[i].operand_count * sizeof *ops);
                for (j = 0; j < steps[i].operand_count; j++)
                    if (ops[j].space == TB_SPACE_CONSTANT) ops[j].index = remap[ops[j].index];
            }
            steps[i].operands = ops;
        }
    }
    p->steps = steps;
    *out = p;
    return tb__copy_dynamic(b, src, p, err);
}

TBDEF tb_result tb_bundle_add_program(tb_bundle *b, const tb_program *src, tb_error *err) {
    tb_program *p = NULL, chk;
    uint32_t *remap = NULL, i, j, old_count, t;
    const char *name;
    tb_result r = tb_ok;
    if (!b || !src) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle or program is NULL");
    name = src->name ? src->name : TB__DEFAULT_PROGRAM;
    if (src->values)
        return tb__fail(
            err, tb_err_invalid_argument, NULL, NULL, -1, 0,
            "program \"%.80s\" was made by tb_program_specialize: add the program with symbols it came from", name);
    chk = *src, chk.name = name;
    if ((r = tb__check_program(b, &chk, err)) != tb_ok) return r;
    if (b->program_count >= TB_MAX_PROGRAMS)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "the bundle holds TB_MAX_PROGRAMS (%u) programs",
                        (unsigned)TB_MAX_PROGRAMS);
    if (tb_bundle_find_program(b, name))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "the bundle has a program named \"%.80s\" already", name);
    if (b->program_count && (r = tb__constant_names_unique(b, err)) != tb_ok) /* a 2.3 program's may repeat */
        return tb__fail(
            err, tb_err_invalid_argument, NULL, NULL, -1, 0,
            "the bundle's program repeats a constant's name, so no other program can be matched to it by name");
    for (i = 0; i < src->constant_count; i++)
        if (src->constants[i].size > (uint64_t)(SIZE_MAX / 2))
            return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "program constant %u is too large for this host", i);
    if (b->program_count && src->constant_count > 1) { /* matched by name: each once */
        tb_tensor_spec *v = (tb_tensor_spec *)tb__alloc(&b->ctx, (size_t)src->constant_count * sizeof *v);
        if (!v) return TB__OOM(err);
        for (i = 0; i < src->constant_count; i++) v[i].name = src->constants[i].name;
        {
            tb_error e2;
            r = tb__check_unique_names(&b->ctx, v, src->constant_count, "constant", &e2);
            tb__free(&b->ctx, v);
            if (r == tb_err_out_of_memory) return TB__OOM(err);
            if (r != tb_ok) /* e2: 'program: two constants named "NAME"' */
                return tb__fail(
                    err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                    "%s, both named so in one program: a bundle of several programs matches constants by name",
                    e2.message);
        }
    }
    /* the constants, by name: the table's own, or new ones at its end */
    old_count = b->constant_count;
    if (src->constant_count && !(remap = (uint32_t *)tb__alloc(&b->ctx, (size_t)src->constant_count * sizeof *remap)))
        return TB__OOM(err);
    for (i = 0; i < src->constant_count && r == tb_ok; i++) {
        const tb_program_constant *k = &src->constants[i];
        /* the first program's constants join as they are (a 2.3 program's
           names may repeat); later ones are matched by name */
        t = b->constant_count;
        if (b->program_count)
            for (t = 0; t < b->constant_count && strcmp(b->constants[t].name, k->name); t++) {}
        if (t < old_count) {
            r = tb__same_constant(b, t, k, i, err);
            remap[i] = t;
            continue;
        }
        if (t < b->constant_count) { /* twice in this program */
            for (j = 0; remap[j] != t; j++) {}
            r = tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                         "program constants %u and %u are both named \"%.80s\"", j, i, k->name);
            break;
        }
        if (b->constant_count == b->constant_cap) { /* grow onto the heap (a read table is in the arena) */
            uint32_t cap = b->constant_cap ? 2 * b->constant_cap : b->constant_count + 16;
            tb_program_constant *nt = (tb_program_constant *)tb__alloc(&b->ctx, (size_t)cap * sizeof *nt);
            if (!nt) {
                r = TB__OOM(err);
                break;
            }
            if (b->constant_count) memcpy(nt, b->constants, (size_t)b->constant_count * sizeof *nt);
            if (b->constant_cap) tb__free(&b->ctx, b->constants);
            b->constants = nt, b->constant_cap = cap;
        }
        {
            tb_program_constant *d = &b->constants[b->constant_count];
            void *bytes = NULL;
            int ext = (k->flags & TB_CONSTANT_EXTERNAL) != 0; /* its bytes stay in the weights file */
            *d = *k;
            if (!ext) d->tensor = NULL, d->rank = 0, d->crc32 = 0, memset(d->shape, 0, sizeof d->shape);
            if (!(d->name = tb__arena_strdup(&b->ctx, &b->arena, k->name, strlen(k->name))) ||
                (ext && !(d->tensor = tb__arena_strdup(&b->ctx, &b->arena, k->tensor, strlen(k->tensor)))) ||
                (k->size && !ext &&
                 !(bytes = tb__arena_alloc_aligned(&b->ctx, &b->arena, (size_t)k->size, TB__CONSTANT_ALIGN)))) {
                r = TB__OOM(err);
                break;
            }
            if (bytes && tb__mapped_copy(bytes, k->data, (size_t)k->size) != 0) {
                r = tb__fail(err, tb_err_io, NULL, NULL, -1, errno,
                             "program constant %u \"%.80s\": its bundle file no longer holds its bytes (truncated or "
                             "replaced since it was read?)", i, k->name);
                break;
            }
            d->data = bytes;
            remap[i] = b->constant_count++;
        }
    }
    /* the program, in the arena, its constant operands renumbered */
    if (r == tb_ok) r = tb__copy_program(b, src, name, remap, &p, err);
    if (r == tb_ok && b->program_count == b->program_cap &&
        !tb__grow(&b->ctx, (void **)&b->programs, &b->program_cap, b->program_count + 1, sizeof *b->programs))
        r = TB__OOM(err);
    if (r == tb_ok) {
        b->programs[b->program_count++] = p;
        for (i = 0; i < b->program_count; i++)
            b->programs[i]->constants = b->constants, b->programs[i]->constant_count = b->constant_count;
        if ((r = tb__check_sharing(b, err)) != tb_ok) b->program_count--;
    }
    if (r != tb_ok) { /* the table as it was (new entries' bytes stay in the arena) */
        b->constant_count = old_count;
        for (i = 0; i < b->program_count; i++) b->programs[i]->constant_count = old_count;
    }
    tb__free(&b->ctx, remap);
    return r;
}

TBDEF tb_result tb_bundle_set_program(tb_bundle *b, const tb_program *src, tb_error *err) {
    tb_program chk;
    tb_result r;
    if (!b) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle is NULL");
    if (!src) {
        tb__drop_programs(b);
        return tb_ok;
    }
    chk = *src;
    {
        /* the old programs and table stay until the new one is in: src
           may be one of them, and a failure leaves the bundle as it was */
        tb_program **progs = b->programs;
        tb_program_constant *consts = b->constants;
        uint32_t np = b->program_count, pcap = b->program_cap, nc = b->constant_count, ccap = b->constant_cap;
        (void)chk;
        b->programs = NULL, b->program_count = b->program_cap = 0;
        b->constants = NULL, b->constant_count = b->constant_cap = 0;
        if ((r = tb_bundle_add_program(b, src, err)) != tb_ok) {
            tb__drop_programs(b);
            tb__free(&b->ctx, b->programs);
            b->programs = progs, b->program_count = np, b->program_cap = pcap;
            b->constants = consts, b->constant_count = nc, b->constant_cap = ccap;
            return r;
        }
        tb__free(&b->ctx, progs);
        if (ccap) tb__free(&b->ctx, consts);
    }
    return tb_ok;
}

TBDEF tb_result tb_program_read_constant(const tb_bundle *b, uint32_t index, uint64_t offset, void *dst, size_t size,
                                         tb_error *err) {
    const tb_program_constant *k;
    uintptr_t at, base;
    if (!b || index >= b->constant_count || (size && !dst))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "no such constant, or dst is NULL");
    k = &b->constants[index];
    if (k->flags & TB_CONSTANT_EXTERNAL)
        return tb__fail(err, tb_err_not_found, NULL, NULL, -1, 0,
                        "constant %u (%.80s) is tensor \"%.80s\" of the weights file, not in the bundle: read it with "
                        "tb_weights_read",
                        index, k->name, k->tensor);
    if (offset > k->size || size > k->size - offset)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bytes %llu..+%zu of constant %u (%llu bytes)",
                        (unsigned long long)offset, size, index, (unsigned long long)k->size);
    if (!size) return tb_ok;
    at = (uintptr_t)k->data + (uintptr_t)offset, base = (uintptr_t)b->map_base;
    if (b->read_at && at >= base && at - base <= b->map_size && size <= b->map_size - (at - base)) {
        if (b->read_at(b, (size_t)(at - base), dst, size) != 0)
            return tb__fail(
                err, tb_err_io, NULL, k->name, -1, errno,
                "the bundle file no longer holds constant %u's bytes (truncated or replaced since it was read?)",
                index);
        return tb_ok;
    }
    memcpy(dst, (const char *)k->data + offset, size);
    return tb_ok;
}

/* ---------------------------------------------------------------------- */
/* >>symbols  Symbols: shapes that vary, expressions, bind and specialize */
/* A program's symbols (a batch size, a sequence length) and the
   expressions over them: each expression checked by the grid language's
   checker (>>grid) and evaluated by its interpreter; a run's inputs bound
   to the symbols' values (tb_program_bind); the program at those values
   (tb_program_specialize). The program section checks a program with them
   (tb__check_dynamic), the runner binds and specializes with them. */
/* An expression must run: the grid language's checker (tb__grid_walk)
   over 1..TB_MAX_EXPR_OPS operations, whose operands are CONST (index
   zero) and SYM of a symbol the program has (value zero); an operation
   this version does not know was written by a newer one. */
static inline int tb__expr_operand(const tb_grid_op *o, const void *user) {
    uint32_t nsyms = *(const uint32_t *)user;
    if (o->op != TB_GRID_CONST && o->op != TB_GRID_SYM) return TB__WALK_FOREIGN;
    if ((o->op != TB_GRID_CONST && o->value) || (o->op != TB_GRID_SYM && o->index) ||
        (o->op == TB_GRID_SYM && o->index >= nsyms))
        return TB__WALK_FIELD;
    return 0;
}
static tb_result tb__check_expr_ops(const tb_grid_op *ops, uint32_t n, uint32_t nsyms, uint32_t e, tb_error *err) {
    uint32_t i, depth;
    int fault;
    if (!n || n > TB_MAX_EXPR_OPS || !ops)
        return tb__fail(err, n > TB_MAX_EXPR_OPS ? tb_err_limit : tb_err_malformed, NULL, NULL, -1, 0,
                        "program expression %u has %u operations (1..TB_MAX_EXPR_OPS, %u)", e, n,
                        (unsigned)TB_MAX_EXPR_OPS);
    switch ((fault = tb__grid_walk(ops, n, tb__expr_operand, &nsyms, &i, &depth))) {
    case 0: return tb_ok;
    case TB__WALK_UNKNOWN:
    case TB__WALK_FOREIGN:
        return tb__fail(err, fault == TB__WALK_FOREIGN ? tb_err_malformed : tb_err_unsupported_version, NULL, NULL, -1,
                        0, "program expression %u, operation %u: op %u is %s", e, i, ops[i].op,
                        fault == TB__WALK_FOREIGN ? "a grid rule's operand (an expression reads constants and symbols)"
                                                  : "unknown (written by a newer version?)");
    case TB__WALK_FIELD:
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                        "program expression %u, operation %u: symbol %u of %u, or an unused field that is not zero", e,
                        i, ops[i].index, nsyms);
    case TB__WALK_SHORT:
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                        "program expression %u, operation %u: too few values on the stack", e, i);
    case TB__WALK_DEEP:
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "program expression %u needs more than %u stack entries",
                        e, TB_GRID_STACK);
    default:
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "program expression %u leaves %u values, not one", e,
                        depth);
    }
}
static tb_result tb__expr_run(const tb_grid_op *ops, uint32_t n, const int64_t *values, uint32_t nv, int64_t *out,
                              tb_error *err) {
    tb__grid_env env;
    memset(&env, 0, sizeof env);
    env.syms = values, env.n_syms = nv, env.expr = 1;
    return tb__grid_run(ops, n, &env, 0, out, err);
}
TBDEF tb_result tb_expr_eval(const tb_grid_op *ops, uint32_t n, const int64_t *values, uint32_t nv, int64_t *out,
                             tb_error *err) {
    tb_result r;
    if (!out || (nv && !values))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "out or values is NULL");
    if ((r = tb__check_expr_ops(ops, n, nv, 0, err)) != tb_ok) return r;
    return tb__expr_run(ops, n, values, nv, out, err);
}

static const char *const tb__field_names[] = {"", "input size", "input stride", "output size", "output stride",
                                              "buffer size", "grid", "count", "operand"};
/* The field an expression gives: *slot its stored value (the program at
   every maximum); 0 where (field, index, sub) names nothing that may vary. */
TB__STEP_KINDS_HANDLED(3, expr_slot); /* a launch has a grid and integer literals; a memset or copy a count */
static int tb__expr_slot(const tb_bundle *b, const tb_program *p, const tb_program_expr *x, int64_t *now) {
    const tb_tensor_spec *t = NULL;
    const tb_program_step *st;
    switch (x->field) {
    case TB_FIELD_INPUT_SIZE: case TB_FIELD_INPUT_STRIDE:
        if (x->index >= p->input_count) return 0;
        t = &p->inputs[x->index];
        break;
    case TB_FIELD_OUTPUT_SIZE: case TB_FIELD_OUTPUT_STRIDE:
        if (x->index >= p->output_count) return 0;
        t = &p->outputs[x->index];
        break;
    case TB_FIELD_BUFFER_SIZE:
        if (x->index >= p->buffer_count || x->sub || p->buffers[x->index].size > (uint64_t)INT64_MAX) return 0;
        *now = (int64_t)p->buffers[x->index].size;
        return 1;
    case TB_FIELD_GRID: case TB_FIELD_COUNT: case TB_FIELD_OPERAND:
        if (x->index >= p->step_count) return 0;
        st = &p->steps[x->index];
        if (x->field == TB_FIELD_GRID) {
            if (st->kind != TB_STEP_LAUNCH || x->sub > 2) return 0;
            *now = st->grid[x->sub];
        } else if (x->field == TB_FIELD_COUNT) {
            if (st->kind == TB_STEP_LAUNCH || x->sub || st->count > (uint64_t)INT64_MAX) return 0;
            *now = (int64_t)st->count;
        } else {
            if (x->sub >= st->operand_count) return 0;
            if (st->operands[x->sub].space == TB_SPACE_LITERAL) { /* an integer argument, never a float or a bool */
                int k;
                if (st->kind != TB_STEP_LAUNCH || st->record >= b->record_count ||
                    st->config >= b->records[st->record].config_count)
                    return 0;
                k = tb__code_kind(b->records[st->record].configs[st->config].arg_types[x->sub]);
                if (k != TB__KIND_SINT && k != TB__KIND_UINT) return 0;
            }
            *now = (int64_t)st->operands[x->sub].value;
        }
        return 1;
    default: return 0;
    }
    if (x->sub >= t->rank) return 0;
    *now = x->field == TB_FIELD_INPUT_SIZE || x->field == TB_FIELD_OUTPUT_SIZE ? t->shape[x->sub] : t->strides[x->sub];
    return 1;
}
static int tb__expr_before(const tb_program_expr *a, const tb_program_expr *x) {
    if (a->field != x->field) return a->field < x->field;
    if (a->index != x->index) return a->index < x->index;
    return a->sub < x->sub;
}
/* A plain symbol: the expression SYM k alone (what binds k from an input). */
static int tb__expr_symbol(const tb_program_expr *x) {
    return x->op_count == 1 && x->ops[0].op == TB_GRID_SYM ? (int)x->ops[0].index : -1;
}

/* Symbol i of ys (2.6): a name of 1 to TB_MAX_NAME_LENGTH bytes, unique
   among those before it, a range within 0 .. 2^31 - 1 whose ends its
   divisor divides. at: its offset in the bundle, or -1. The reader, the
   checker and tb_program_bind of a caller's program (before it divides by
   the divisor) check each symbol so. */
static tb_result tb__check_symbol(const tb_program_symbol *ys, uint32_t i, long long at, tb_error *err) {
    const tb_program_symbol *y = &ys[i];
    uint32_t j;
    size_t n = y->name ? strlen(y->name) : 0;
    if (!n) return tb__fail(err, tb_err_bad_name, NULL, NULL, at, 0, "program symbol %u has an empty name", i);
    if (n > TB_MAX_NAME_LENGTH)
        return tb__fail(err, tb_err_limit, NULL, NULL, at, 0, "program symbol %u: a name of %zu bytes (1 to %u)", i, n,
                        (unsigned)TB_MAX_NAME_LENGTH);
    for (j = 0; j < i; j++)
        if (!strcmp(ys[j].name, y->name))
            return tb__fail(err, tb_err_malformed, NULL, NULL, at, 0, "two program symbols named \"%.80s\"", y->name);
    if (y->min < 0 || y->min > y->max || y->max > 0x7fffffff || y->divisor < 1 || y->min % y->divisor ||
        y->max % y->divisor)
        return tb__fail(
            err, tb_err_malformed, NULL, NULL, at, 0,
            "program symbol %u (%.80s): range %lld..%lld, divisor %lld (0 <= min <= max < 2^31, a divisor of "
            "both, at least 1)",
            i, y->name, (long long)y->min, (long long)y->max, (long long)y->divisor);
    return tb_ok;
}

/* The symbols and expressions of a program (2.6): the symbols in their
   ranges, each bound by an input size; the expressions sorted, each naming
   a field that may vary and giving, at every maximum, the stored value. */
static tb_result tb__check_dynamic(const tb_bundle *b, const tb_program *p, tb_error *err) {
    int64_t at_max[TB_MAX_PROGRAM_SYMBOLS];
    unsigned char bound[TB_MAX_PROGRAM_SYMBOLS];
    uint32_t i;
    tb_result r;
    if (p->symbol_count > TB_MAX_PROGRAM_SYMBOLS || (p->symbol_count && !p->symbols) || (p->expr_count && !p->exprs))
        return tb__fail(err, p->symbol_count > TB_MAX_PROGRAM_SYMBOLS ? tb_err_limit : tb_err_invalid_argument, NULL,
                        NULL, -1, 0, "program: %u symbols (at most TB_MAX_PROGRAM_SYMBOLS, %u), or a NULL array",
                        p->symbol_count, (unsigned)TB_MAX_PROGRAM_SYMBOLS);
    if (p->values) { /* a specialized program: its expressions were evaluated into its fields */
        if (p->expr_count)
            return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "a specialized program with expressions");
        return tb_ok;
    }
    if (p->expr_count && !p->symbol_count)
        return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "program: %u expressions and no symbol",
                        p->expr_count);
    for (i = 0; i < p->symbol_count; i++) {
        if ((r = tb__check_symbol(p->symbols, i, -1, err)) != tb_ok) return r;
        at_max[i] = p->symbols[i].max;
        bound[i] = 0;
    }
    if (p->expr_count > TB_MAX_PROGRAM_EXPRS)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "program: %u expressions, over TB_MAX_PROGRAM_EXPRS",
                        p->expr_count);
    for (i = 0; i < p->expr_count; i++) {
        const tb_program_expr *x = &p->exprs[i];
        int64_t now = 0, v = 0;
        tb_error e2;
        if (i && !tb__expr_before(&p->exprs[i - 1], x))
            return tb__fail(
                err, tb_err_malformed, NULL, NULL, -1, 0,
                "program expression %u (field %u, %u, %u) is not after the one before it (sorted by field, index, "
                "sub; each once)",
                i, x->field, x->index, x->sub);
        if (!tb__expr_slot(b, p, x, &now))
            return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                            "program expression %u: field %u (%s) index %u sub %u names nothing an expression may give",
                            i, x->field, x->field <= TB_FIELD_OPERAND ? tb__field_names[x->field] : "unknown", x->index,
                            x->sub);
        if ((r = tb__check_expr_ops(x->ops, x->op_count, p->symbol_count, i, err)) != tb_ok) return r;
        if (tb__expr_run(x->ops, x->op_count, at_max, p->symbol_count, &v, &e2) != tb_ok || v != now)
            return tb__fail(
                err, tb_err_malformed, NULL, NULL, -1, 0,
                "program expression %u (%s %u/%u) gives %lld at every symbol's maximum, where the program holds %lld",
                i, tb__field_names[x->field], x->index, x->sub, (long long)v, (long long)now);
        if (x->field == TB_FIELD_INPUT_SIZE && tb__expr_symbol(x) >= 0) bound[tb__expr_symbol(x)] = 1;
    }
    for (i = 0; i < p->symbol_count; i++)
        if (!bound[i])
            return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                            "program symbol %u (%.80s) is no input's size: a run could not bind it", i,
                            p->symbols[i].name);
    return tb_ok;
}

/* A refusal at the symbols' values says them (issue 38 #15): " [at
   n=4, m=2]" at the message's end, with the program's name where the
   message does not give it. */
static tb_result tb__at_values(tb_error *err, tb_result r, const tb_program *p, const int64_t *values) {
    if (err) {
        size_t n = strlen(err->message);
        char at[160] = "";
        uint32_t i;
        int k = 0;
        for (i = 0; i < p->symbol_count && k < (int)sizeof at - 40; i++)
            k += snprintf(at + k, sizeof at - (size_t)k, "%s%.30s=%lld", i ? ", " : "", p->symbols[i].name,
                          (long long)values[i]);
        if (n < sizeof err->message && strstr(err->message, "program \""))
            snprintf(err->message + n, sizeof err->message - n, " [at %s]", at);
        else if (n < sizeof err->message)
            snprintf(err->message + n, sizeof err->message - n, " [program \"%.60s\" at %s]",
                     p->name ? p->name : "forward", at);
    }
    return r;
}
/* An error's message without its "<code>: ", to quote in another. */
static const char *tb__detail(const tb_error *e) {
    size_t n = strlen(tb_result_string(e->code));
    return !strncmp(e->message, tb_result_string(e->code), n) && e->message[n] == ':' ? e->message + n + 2 : e->message;
}
/* The field expression x of a checked program gives, for a message:
   "the count of step 2". */
static void tb__expr_what(char *out, size_t cap, const tb_program *p, const tb_program_expr *x) {
    int in = x->field == TB_FIELD_INPUT_SIZE || x->field == TB_FIELD_INPUT_STRIDE;
    switch (x->field) {
    case TB_FIELD_INPUT_SIZE: case TB_FIELD_INPUT_STRIDE: case TB_FIELD_OUTPUT_SIZE: case TB_FIELD_OUTPUT_STRIDE:
        snprintf(out, cap, "the %s of %s \"%.60s\" dimension %u",
                 x->field == TB_FIELD_INPUT_SIZE || x->field == TB_FIELD_OUTPUT_SIZE ? "size" : "stride",
                 in ? "input" : "output", (in ? p->inputs : p->outputs)[x->index].name, x->sub);
        break;
    case TB_FIELD_BUFFER_SIZE: snprintf(out, cap, "the size of buffer %u", x->index); break;
    case TB_FIELD_GRID: snprintf(out, cap, "grid %c of step %u", "xyz"[x->sub], x->index); break;
    case TB_FIELD_COUNT: snprintf(out, cap, "the count of step %u", x->index); break;
    default: snprintf(out, cap, "operand %u of step %u", x->sub, x->index); break;
    }
}

static tb_result tb__shape_fail(tb_error *err, const tb_program *p, uint32_t i, uint32_t d, int64_t v, uint32_t k) {
    const tb_program_symbol *y = &p->symbols[k];
    char div[48] = "";
    if (y->divisor > 1) snprintf(div, sizeof div, ", a multiple of %lld", (long long)y->divisor);
    return tb__fail(err, tb_err_shape, NULL, NULL, -1, 0,
                    "input \"%.80s\" dimension %u is %lld: symbol \"%.60s\" takes %lld..%lld%s", p->inputs[i].name, d,
                    (long long)v, y->name, (long long)y->min, (long long)y->max, div);
}
static tb_result tb__check_values(const tb_program *p, const int64_t *values, tb_error *err) {
    uint32_t k;
    for (k = 0; k < p->symbol_count; k++) {
        const tb_program_symbol *y = &p->symbols[k];
        if (values[k] < y->min || values[k] > y->max || values[k] % y->divisor)
            return tb__fail(err, tb_err_shape, NULL, NULL, -1, 0,
                            "symbol \"%.60s\" is %lld: it takes %lld..%lld (multiples of %lld)", y->name,
                            (long long)values[k], (long long)y->min, (long long)y->max, (long long)y->divisor);
    }
    return tb_ok;
}

/* tb_program_bind; checked: p is a program a reader or tb_bundle_add_program
   checked (a model's), whose expressions need no check before each run */
static tb_result tb__program_bind(const tb_program *p, const tb_tensor *in, uint32_t nin, int64_t *values, int checked,
                                  tb_error *err) {
    unsigned char bound[TB_MAX_PROGRAM_SYMBOLS];
    uint32_t i, from[TB_MAX_PROGRAM_SYMBOLS][2];
    int pass;
    tb_result r;
    if (!p || (nin && !in) || (p->symbol_count && !values))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "program, inputs or values is NULL");
    if (nin != p->input_count)
        return tb__fail(err, tb_err_arg_mismatch, NULL, NULL, -1, 0, "%u inputs given; program \"%.80s\" takes %u", nin,
                        p->name ? p->name : "forward", p->input_count);
    if (p->symbol_count > TB_MAX_PROGRAM_SYMBOLS || (p->symbol_count && !p->symbols) || (p->expr_count && !p->exprs) ||
        (p->input_count && !p->inputs))
        return tb__fail(err, p->symbol_count > TB_MAX_PROGRAM_SYMBOLS ? tb_err_limit : tb_err_invalid_argument, NULL,
                        NULL, -1, 0, "program: %u symbols, or a NULL array", p->symbol_count);
    for (i = 0; !checked && i < p->symbol_count; i++) /* before a range or divisor is used (issue 38 #3) */
        if ((r = tb__check_symbol(p->symbols, i, -1, err)) != tb_ok) return r;
    memset(bound, 0, sizeof bound);
    /* pass 0: each symbol from the first input size that is that symbol
       alone; then every symbol bound; pass 1: every input size that has an
       expression. A caller's program no checker saw has its expressions
       checked here before they run. */
    for (pass = 0; pass < 2; pass++) {
        for (i = 0; pass == 1 && i < p->symbol_count; i++)
            if (!bound[i]) /* the checker saw to it that an input binds each */
                return tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0, "symbol \"%.60s\" is no input's size",
                                p->symbols[i].name ? p->symbols[i].name : "?");
        for (i = 0; i < p->expr_count; i++) {
            const tb_program_expr *x = &p->exprs[i];
            int k;
            int64_t have, want;
            tb_error e2;
            if (x->field != TB_FIELD_INPUT_SIZE) {
                if (checked) break; /* sorted: the input sizes come first */
                continue;
            }
            if (!checked && (x->index >= p->input_count || x->sub >= p->inputs[x->index].rank ||
                             p->inputs[x->index].rank > TB_MAX_TENSOR_DIMS))
                return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                                "program expression %u names input %u dimension %u, which the program does not have", i,
                                x->index, x->sub);
            if (!checked && pass == 0 &&
                (r = tb__check_expr_ops(x->ops, x->op_count, p->symbol_count, i, err)) != tb_ok)
                return r;
            k = tb__expr_symbol(x);
            if (in[x->index].rank != p->inputs[x->index].rank)
                return tb__fail(err, tb_err_arg_mismatch, NULL, NULL, -1, 0,
                                "input \"%.80s\": rank %u, the program's is %u", p->inputs[x->index].name,
                                in[x->index].rank, p->inputs[x->index].rank);
            have = in[x->index].shape[x->sub];
            if (pass == 0) {
                if (k < 0 || bound[k]) continue;
                if (have < p->symbols[k].min || have > p->symbols[k].max || have % p->symbols[k].divisor)
                    return tb__shape_fail(err, p, x->index, x->sub, have, (uint32_t)k);
                values[k] = have, bound[k] = 1, from[k][0] = x->index, from[k][1] = x->sub;
                continue;
            }
            if (tb__expr_run(x->ops, x->op_count, values, p->symbol_count, &want, &e2) != tb_ok)
                return tb__fail(err, tb_err_shape, NULL, NULL, -1, 0,
                                "input \"%.80s\" dimension %u: its size's expression "
                                "cannot be evaluated (%s)",
                                p->inputs[x->index].name, x->sub, tb__detail(&e2));
            if (have != want) {
                if (k >= 0)
                    return tb__fail(
                        err, tb_err_shape, NULL, NULL, -1, 0,
                        "input \"%.80s\" dimension %u is %lld, where input \"%.80s\" dimension %u made symbol "
                        "\"%.60s\" %lld",
                        p->inputs[x->index].name, x->sub, (long long)have, p->inputs[from[k][0]].name, from[k][1],
                        p->symbols[k].name, (long long)values[k]);
                return tb__fail(err, tb_err_shape, NULL, NULL, -1, 0,
                                "input \"%.80s\" dimension %u is %lld; the program's symbols make it %lld",
                                p->inputs[x->index].name, x->sub, (long long)have, (long long)want);
            }
        }
    }
    return tb_ok;
}
TBDEF tb_result tb_program_bind(const tb_program *p, const tb_tensor *in, uint32_t nin, int64_t *values,
                                tb_error *err) {
    return tb__program_bind(p, in, nin, values, 0, err);
}

/* A specialized program and the allocator it came from, in one block. */
typedef struct tb__prog_block {
    tb__ctx ctx;
    tb_program p;
} tb__prog_block;
static tb_result tb__check_program_body(const tb_bundle *b, const tb_program *p, tb_error *err);
TBDEF tb_result tb_program_specialize(const tb_bundle *b, const tb_program *p, const int64_t *values, tb_program **out,
                                      tb_error *err) {
    tb__prog_block *blk;
    tb_program *q;
    tb_tensor_spec *t;
    tb_program_buffer *bufs;
    tb_program_step *steps;
    tb_operand *ops;
    int64_t *vals;
    uint64_t nops = 0, bytes;
    uint32_t i, s;
    tb_result r;
    if (out) *out = NULL;
    if (!b || !p || !out || (p->symbol_count && !values))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle, program, values or out is NULL");
    if (p->values)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "the program is specialized already");
    /* every rule, not only the expressions': a caller's program no reader
       checked names its fields through them */
    if ((r = tb__check_program_body(b, p, err)) != tb_ok) return r;
    if ((r = tb__check_values(p, values, err)) != tb_ok) return r;
    for (s = 0; s < p->step_count; s++) nops += p->steps[s].operand_count;
    bytes = sizeof *blk + ((uint64_t)p->input_count + p->output_count) * sizeof *t +
            (uint64_t)p->buffer_count * sizeof *bufs + (uint64_t)p->step_count * sizeof *steps + nops * sizeof *ops +
            (uint64_t)(p->symbol_count + 1) * sizeof *vals;
    if (bytes > (uint64_t)SIZE_MAX / 2)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "the program is too large for this host");
    if (!(blk = (tb__prog_block *)tb__alloc(&b->ctx, (size_t)bytes))) return TB__OOM(err);
    blk->ctx = b->ctx;
    q = &blk->p;
    *q = *p;
    t = (tb_tensor_spec *)(void *)(blk + 1);
    bufs = (tb_program_buffer *)(void *)(t + p->input_count + p->output_count);
    steps = (tb_program_step *)(void *)(bufs + p->buffer_count);
    ops = (tb_operand *)(void *)(steps + p->step_count);
    vals = (int64_t *)(void *)(ops + nops);
    if (p->input_count) memcpy(t, p->inputs, p->input_count * sizeof *t);
    if (p->output_count) memcpy(t + p->input_count, p->outputs, p->output_count * sizeof *t);
    if (p->buffer_count) memcpy(bufs, p->buffers, p->buffer_count * sizeof *bufs);
    if (p->step_count) memcpy(steps, p->steps, p->step_count * sizeof *steps);
    for (s = 0, nops = 0; s < p->step_count; s++) {
        if (steps[s].operand_count) memcpy(ops + nops, p->steps[s].operands, steps[s].operand_count * sizeof *ops);
        steps[s].operands = ops + nops;
        nops += steps[s].operand_count;
    }
    if (p->symbol_count) memcpy(vals, values, p->symbol_count * sizeof *vals);
    q->inputs = t, q->outputs = t + p->input_count, q->buffers = bufs, q->steps = steps;
    q->values = vals, q->expr_count = 0, q->exprs = NULL;
    for (i = 0; i < p->expr_count; i++) {
        const tb_program_expr *x = &p->exprs[i];
        int64_t v;
        tb_error e2;
        char what[128];
        if (tb__expr_run(x->ops, x->op_count, values, p->symbol_count, &v, &e2) != tb_ok) {
            tb__free(&b->ctx, blk);
            tb__expr_what(what, sizeof what, p, x);
            r = tb__fail(err, tb_err_arg_range, NULL, NULL, -1, 0, "program \"%.80s\": %s (expression %u): %s",
                         p->name ? p->name : "forward", what, i, tb__detail(&e2));
            return tb__at_values(err, r, p, values);
        }
        r = tb_ok;
        switch (x->field) {
        case TB_FIELD_INPUT_SIZE: t[x->index].shape[x->sub] = v; break;
        case TB_FIELD_INPUT_STRIDE: t[x->index].strides[x->sub] = v; break;
        case TB_FIELD_OUTPUT_SIZE: t[p->input_count + x->index].shape[x->sub] = v; break;
        case TB_FIELD_OUTPUT_STRIDE: t[p->input_count + x->index].strides[x->sub] = v; break;
        case TB_FIELD_BUFFER_SIZE: /* within the plan, made at every maximum */
            if (v < 0 || (uint64_t)v > p->buffers[x->index].size)
                r = tb__fail(
                    err, tb_err_malformed, NULL, NULL, -1, 0,
                    "program \"%.80s\": buffer %u needs %lld bytes at these sizes, and the plan holds %llu (a size "
                    "that does not grow with its symbols)",
                    p->name ? p->name : "forward", x->index, (long long)v,
                    (unsigned long long)p->buffers[x->index].size);
            else bufs[x->index].size = (uint64_t)v;
            break;
        case TB_FIELD_GRID:
            if (v < 0 || v > 0x7fffffff)
                r = tb__fail(err, tb_err_arg_range, NULL, NULL, -1, 0,
                             "program \"%.80s\" step %u: grid %c of %lld (0 to 2^31 - 1)",
                             p->name ? p->name : "forward", x->index, "xyz"[x->sub], (long long)v);
            else steps[x->index].grid[x->sub] = (uint32_t)v;
            break;
        case TB_FIELD_COUNT:
            if (v < 0)
                r = tb__fail(err, tb_err_arg_range, NULL, NULL, -1, 0,
                             "program \"%.80s\" step %u: a negative count, %lld", p->name ? p->name : "forward",
                             x->index, (long long)v);
            else steps[x->index].count = (uint64_t)v;
            break;
        default: ops[steps[x->index].operands - ops + x->sub].value = (uint64_t)v; break;
        }
        if (r != tb_ok) {
            tb__free(&b->ctx, blk);
            return tb__at_values(err, r, p, values);
        }
    }
    if ((r = tb__check_program_body(b, q, err)) != tb_ok) {
        tb__free(&b->ctx, blk);
        return tb__at_values(err, r, p, values);
    }
    *out = q;
    return tb_ok;
}
TBDEF void tb_program_free(tb_program *p) {
    tb__prog_block *blk;
    tb__ctx c;
    if (!p || !p->values) return; /* only what tb_program_specialize made */
    blk = (tb__prog_block *)(void *)((char *)p - offsetof(tb__prog_block, p));
    c = blk->ctx;
    tb__free(&c, blk);
}

/* ---------------------------------------------------------------------- */
/* >>weights  Weights: tensors of a safetensors file, by name */
/* The header is read once with the metadata JSON reader (>>parsers) and  */
/* checked as safetensors' own reader checks it: the tensors cover the    */
/* bytes after the header exactly, in some order, with no overlap, hole   */
/* or tail. The bytes are read with pread on request.                     */
/* ---------------------------------------------------------------------- */
struct tb_weights {
    tb__ctx ctx;
    int fd;                      /* -1: in memory */
    const unsigned char *mem;
    uint64_t file_size, data_start;
    char *path;
    tb_weights_tensor *tensors;  /* in the order of their bytes */
    uint32_t count;
    uint32_t *by_name;           /* indexes sorted by name */
    char *names;                 /* the names' bytes */
};

/* slicing by 8: eight tables, made once (pthread_once orders the tables'
   writes before any reader's loads) */
static uint32_t tb__crc_t[8][256];
static pthread_once_t tb__crc_once = PTHREAD_ONCE_INIT;
static void tb__crc_tables(void) {
    uint32_t i, k;
    for (i = 0; i < 256; i++) {
        uint32_t v = i;
        for (k = 0; k < 8; k++) v = v & 1 ? 0xEDB88320u ^ (v >> 1) : v >> 1;
        tb__crc_t[0][i] = v;
    }
    for (i = 0; i < 256; i++)
        for (k = 1; k < 8; k++) tb__crc_t[k][i] = (tb__crc_t[k - 1][i] >> 8) ^ tb__crc_t[0][tb__crc_t[k - 1][i] & 0xff];
}
TBDEF uint32_t tb_crc32(uint32_t crc, const void *data, size_t size) {
    uint32_t(*t)[256] = tb__crc_t;
    const unsigned char *p = (const unsigned char *)data;
    uint32_t c = ~crc;
    pthread_once(&tb__crc_once, tb__crc_tables);
    while (size >= 8) {
        uint32_t a = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        c = t[7][a & 0xff] ^ t[6][(a >> 8) & 0xff] ^ t[5][(a >> 16) & 0xff] ^ t[4][a >> 24] ^ t[3][p[4]] ^ t[2][p[5]] ^
            t[1][p[6]] ^ t[0][p[7]];
        p += 8, size -= 8;
    }
    while (size--) c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

static const tb__dtype_row *tb__dtype_by_st(const char *s) {
    size_t i;
    for (i = 0; i < TB__DTYPE_COUNT; i++)
        if (*tb__dtypes[i].st && !strcmp(tb__dtypes[i].st, s)) return &tb__dtypes[i];
    return NULL;
}

static int tb__weights_read_raw(const tb_weights *w, uint64_t at, void *dst, size_t n) {
    char *p = (char *)dst;
    if (w->fd < 0) {
        if (at > w->file_size || n > w->file_size - at) return errno = EIO, -1;
        memcpy(dst, w->mem + at, n);
        return 0;
    }
    while (n) {
        ssize_t got = pread(w->fd, p, n, (off_t)at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (got == 0) errno = EIO; /* the file ends early: cut short since it was opened */
            return -1;
        }
        p += got, at += (uint64_t)got, n -= (size_t)got;
    }
    return 0;
}

static tb_result tb__wfail(tb__json *j, const tb_weights *w, tb_result code, const char *what, const char *name) {
    return tb__fail(j->err, code, NULL, w->path, j->base + (long long)(j->p - j->start), 0,
                    "safetensors header: %s%s%.120s%s", what, name ? " (tensor \"" : "", name ? name : "",
                    name ? "\")" : "");
}

/* {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}: other keys skipped. */
static tb_result tb__weights_entry(tb__json *j, tb_weights *w, tb_weights_tensor *t, const char *name) {
    char key[32], dt[32];
    int seen = 0, more;
    uint64_t off[2] = {0, 0}, bytes;
    const tb__dtype_row *row = NULL;
    tb_result r;
    tb__jws(j);
    if (j->p >= j->end || *j->p != '{') return tb__wfail(j, w, tb_err_malformed, "a tensor is not an object", name);
    j->p++;
    for (;;) {
        tb__jws(j);
        if (j->p < j->end && *j->p == '}' && !seen)
            return tb__wfail(j, w, tb_err_malformed, "an empty tensor entry", name);
        {
            size_t kn; /* its escapes decoded, whatever its length, as safetensors' reader decodes it */
            if ((r = tb__jstring_len(j, key, sizeof key, &kn)) != tb_ok) return r;
            if (kn >= sizeof key) key[0] = 0; /* a longer one is none of ours */
        }
        tb__jws(j);
        if (j->p >= j->end || *j->p != ':') return tb__jfail(j, "expected ':'");
        j->p++;
        tb__jws(j);
        if ((!strcmp(key, "dtype") && (seen & 1)) || (!strcmp(key, "shape") && (seen & 2)) ||
            (!strcmp(key, "data_offsets") && (seen & 4)))
            return tb__wfail(j, w, tb_err_malformed, "a key twice in a tensor's entry", name);
        if (!strcmp(key, "dtype")) {
            if (tb__jstring(j, dt, sizeof dt) != tb_ok || !(row = tb__dtype_by_st(dt)))
                return tb__wfail(j, w, tb_err_unsupported_type,
                                 "a dtype that is not one of F32 F16 BF16 F64 I8 I16 I32 I64 U8 U16 "
                                 "U32 U64 BOOL F8_E4M3 F8_E5M2",
                                 name);
            seen |= 1;
        } else if (!strcmp(key, "shape") || !strcmp(key, "data_offsets")) {
            int sh = key[0] == 's';
            uint32_t n = 0;
            if (j->p >= j->end || *j->p != '[')
                return tb__wfail(j, w, tb_err_malformed, "shape or data_offsets is not an array", name);
            j->p++;
            tb__jws(j);
            while (j->p < j->end && *j->p != ']') {
                uint64_t v;
                if ((r = tb__juint(j, key, (uint64_t)INT64_MAX, &v)) != tb_ok) return r;
                if (sh) {
                    if (n >= TB_MAX_TENSOR_DIMS)
                        return tb__wfail(j, w, tb_err_limit, "a shape of over 8 dimensions", name);
                    t->shape[n] = (int64_t)v;
                } else {
                    if (n >= 2) return tb__wfail(j, w, tb_err_malformed, "data_offsets of more than two numbers", name);
                    off[n] = v;
                }
                n++;
                tb__jws(j);
                if (j->p < j->end && *j->p == ',') {
                    j->p++;
                    tb__jws(j);
                    if (j->p < j->end && *j->p == ']') return tb__jfail(j, "a trailing ','");
                } else if (j->p < j->end && *j->p != ']') return tb__jfail(j, "expected ',' or ']'");
            }
            if (j->p >= j->end) return tb__jfail(j, "unexpected end");
            j->p++;
            if (sh) t->rank = n, seen |= 2;
            else if (n != 2) return tb__wfail(j, w, tb_err_malformed, "data_offsets of fewer than two numbers", name);
            else seen |= 4;
        } else if ((r = tb__jskip(j, 2)) != tb_ok) return r;
        if ((more = tb__jmore(j, '}', &r)) < 0) return r;
        if (!more) break;
    }
    if (seen != 7) return tb__wfail(j, w, tb_err_malformed, "a tensor without its dtype, shape or data_offsets", name);
    t->dtype = row->number;
    {
        int bad;
        bytes = tb__shape_bytes(row->bytes, t->rank, t->shape, &bad);
        if (bad) return tb__wfail(j, w, tb_err_malformed, "a shape whose bytes pass 2^64 - 1", name);
    }
    if (off[1] < off[0] || off[1] - off[0] != bytes)
        return tb__wfail(j, w, tb_err_malformed, "data_offsets that do not span the shape's bytes", name);
    if (off[1] > w->file_size - w->data_start)
        return tb__wfail(j, w, tb_err_truncated, "data_offsets past the end of the file", name);
    t->offset = w->data_start + off[0], t->size = bytes;
    return tb_ok;
}

static int tb__wcmp_offset(const void *a, const void *b, void *ctx) {
    const tb_weights_tensor *x = (const tb_weights_tensor *)a, *y = (const tb_weights_tensor *)b;
    (void)ctx;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : (x->size > y->size) - (x->size < y->size);
}
static int tb__wcmp_name(const void *a, const void *b, void *ctx) { /* tensor indexes; ctx: the weights */
    const tb_weights *w = (const tb_weights *)ctx;
    return strcmp(w->tensors[*(const uint32_t *)a].name, w->tensors[*(const uint32_t *)b].name);
}

/* The length of the longest prefix of p that is UTF-8 (n when all is):
   no overlong form, surrogate or code point past U+10FFFF. */
static size_t tb__utf8_end(const unsigned char *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i], need, cp, k;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) need = 1, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) need = 2, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) need = 3, cp = c & 0x07;
        else return i;
        if (n - i <= need) return i;
        for (k = 1; k <= need; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return i;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        if ((need == 2 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) ||
            (need == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return i;
        i += need + 1;
    }
    return n;
}

/* The header's JSON: an object of tensors, and "__metadata__" (skipped). */
static tb_result tb__weights_parse(tb_weights *w, const char *text, size_t n, tb_error *err) {
    tb__json j;
    uint32_t cap = 0, i;
    int more, metadata = 0;
    size_t names_cap = 0, names_len = 0;
    tb_result r;
    char *name = NULL;
    uint64_t at;
    j.p = j.start = text, j.end = text + n, j.err = err, j.doc = "safetensors header", j.base = 8;
    if ((at = tb__utf8_end((const unsigned char *)text, n)) < n) {
        j.p = text + at;
        return tb__jfail(&j, "bytes that are not UTF-8");
    }
    if (!(name = (char *)tb__alloc(&w->ctx, TB_MAX_STRING_LENGTH + 1))) return TB__OOM(err);
    tb__jws(&j);
    if (j.p >= j.end) {
        r = tb__jfail(&j, "an empty header");
        goto done;
    }
    if (*j.p != '{') {
        r = tb__wfail(&j, w, tb_err_malformed, "the header is not a JSON object", NULL);
        goto done;
    }
    j.p++;
    tb__jws(&j);
    if (j.p < j.end && *j.p == '}') j.p++;
    else
        for (;;) {
            size_t len;
            tb__jws(&j);
            if ((r = tb__jstring_len(&j, name, TB_MAX_STRING_LENGTH + 1, &len)) != tb_ok) goto done;
            if (len > TB_MAX_STRING_LENGTH) {
                r = tb__wfail(&j, w, tb_err_limit, "a tensor name of over TB_MAX_STRING_LENGTH (65536) bytes", NULL);
                goto done;
            }
            tb__jws(&j);
            if (j.p >= j.end || *j.p != ':') {
                r = tb__jfail(&j, "expected ':'");
                goto done;
            }
            j.p++;
            if (!strcmp(name, "__metadata__")) {
                if (metadata++) {
                    r = tb__wfail(&j, w, tb_err_malformed, "__metadata__ twice", NULL);
                    goto done;
                }
                if ((r = tb__jskip(&j, 1)) != tb_ok) goto done;
            } else {
                tb_weights_tensor *t;
                if (!*name) {
                    r = tb__wfail(&j, w, tb_err_bad_name, "a tensor with an empty name", NULL);
                    goto done;
                }
                if (w->count >= TB_MAX_WEIGHTS_TENSORS) {
                    r = tb__wfail(&j, w, tb_err_limit, "over TB_MAX_WEIGHTS_TENSORS tensors", NULL);
                    goto done;
                }
                if (w->count == cap &&
                    !tb__grow(&w->ctx, (void **)&w->tensors, &cap, w->count + 1, sizeof *w->tensors)) {
                    r = TB__OOM(err);
                    goto done;
                }
                t = &w->tensors[w->count];
                memset(t, 0, sizeof *t);
                if ((r = tb__weights_entry(&j, w, t, name)) != tb_ok) goto done;
                len = strlen(name) + 1;
                if (names_len + len > names_cap) {
                    size_t nc = names_cap ? names_cap * 2 : 4096;
                    char *nn;
                    while (nc < names_len + len) nc *= 2;
                    if (!(nn = (char *)tb__alloc(&w->ctx, nc))) {
                        r = TB__OOM(err);
                        goto done;
                    }
                    if (names_len) memcpy(nn, w->names, names_len);
                    tb__free(&w->ctx, w->names);
                    w->names = nn, names_cap = nc;
                }
                memcpy(w->names + names_len, name, len);
                t->name = (const char *)(uintptr_t)names_len; /* an offset until the names stop moving */
                names_len += len;
                w->count++;
            }
            if ((more = tb__jmore(&j, '}', &r)) < 0) goto done;
            if (!more) break;
        }
    tb__jws(&j);
    if (j.p != j.end) {
        r = tb__wfail(&j, w, tb_err_malformed, "bytes after the header's object", NULL);
        goto done;
    }
    for (i = 0; i < w->count; i++) w->tensors[i].name = w->names + (uintptr_t)w->tensors[i].name;
    /* the bytes: covered exactly, in offset order */
    if (tb__sort(&w->ctx, w->tensors, w->count, sizeof *w->tensors, tb__wcmp_offset, NULL) != tb_ok) {
        r = TB__OOM(err);
        goto done;
    }
    for (at = w->data_start, i = 0; i < w->count; i++) {
        if (w->tensors[i].offset != at) {
            r = tb__fail(
                err, tb_err_malformed, NULL, w->path, (long long)w->tensors[i].offset, 0,
                "safetensors: tensor \"%.120s\" starts at data byte %llu where the one before ends at %llu (%s)",
                w->tensors[i].name, (unsigned long long)(w->tensors[i].offset - w->data_start),
                (unsigned long long)(at - w->data_start), w->tensors[i].offset < at ? "they overlap" : "a hole");
            goto done;
        }
        at += w->tensors[i].size;
    }
    if (at != w->file_size) {
        r = tb__fail(err, tb_err_malformed, NULL, w->path, (long long)at, 0,
                     "safetensors: the tensors end at byte %llu of a %llu-byte file", (unsigned long long)at,
                     (unsigned long long)w->file_size);
        goto done;
    }
    if (!(w->by_name = (uint32_t *)tb__alloc(&w->ctx, (w->count ? w->count : 1) * sizeof *w->by_name))) {
        r = TB__OOM(err);
        goto done;
    }
    for (i = 0; i < w->count; i++) w->by_name[i] = i;
    if (tb__sort(&w->ctx, w->by_name, w->count, sizeof *w->by_name, tb__wcmp_name, w) != tb_ok) {
        r = TB__OOM(err);
        goto done;
    }
    for (i = 1; i < w->count; i++)
        if (!strcmp(w->tensors[w->by_name[i]].name, w->tensors[w->by_name[i - 1]].name)) {
            r = tb__fail(err, tb_err_malformed, NULL, w->path, -1, 0, "safetensors: two tensors named \"%.120s\"",
                         w->tensors[w->by_name[i]].name);
            goto done;
        }
    r = tb_ok;
done:
    tb__free(&w->ctx, name);
    return r;
}

static tb_result tb__weights_open(tb_weights *w, tb_error *err) {
    unsigned char h[8];
    uint64_t n;
    char *text;
    tb_result r;
    if (w->file_size < 8 || tb__weights_read_raw(w, 0, h, 8) != 0)
        return tb__fail(err, w->file_size < 8 ? tb_err_truncated : tb_err_io, NULL, w->path, 0, errno,
                        "safetensors: %llu bytes, fewer than the header's length", (unsigned long long)w->file_size);
    n = tb__le64(h);
    /* random bytes, a .npy, a bundle given as weights: their first 8 bytes
       read as a length are past any header; say what the file is not */
    if (n > TB_MAX_WEIGHTS_HEADER)
        return tb__fail(
            err, tb_err_limit, NULL, w->path, 0, 0,
            "not a safetensors file: its first 8 bytes give a header of %llu bytes, over TB_MAX_WEIGHTS_HEADER",
            (unsigned long long)n);
    if (n > w->file_size - 8)
        return tb__fail(err, tb_err_truncated, NULL, w->path, 0, 0,
                        "not a safetensors file, or one cut short: its first 8 bytes give a header of %llu bytes in a "
                        "%llu-byte file", (unsigned long long)n, (unsigned long long)w->file_size);
    w->data_start = 8 + n;
    if (!(text = (char *)tb__alloc(&w->ctx, n ? (size_t)n : 1))) return TB__OOM(err);
    if (tb__weights_read_raw(w, 8, text, (size_t)n) != 0)
        r = tb__fail(err, tb_err_io, NULL, w->path, 8, errno, "safetensors: reading the header");
    else r = tb__weights_parse(w, text, (size_t)n, err);
    tb__free(&w->ctx, text);
    return r;
}

static tb_weights *tb__weights_new(const tb_options *options, const char *path) {
    tb__ctx c = tb__ctx_from(options);
    tb_weights *w = (tb_weights *)tb__alloc(&c, sizeof *w);
    if (!w) return NULL;
    memset(w, 0, sizeof *w);
    w->ctx = c, w->fd = -1;
    if (path && !(w->path = (char *)tb__alloc(&c, strlen(path) + 1))) {
        tb__free(&c, w);
        return NULL;
    }
    if (path) memcpy(w->path, path, strlen(path) + 1);
    return w;
}

TBDEF tb_result tb_weights_open(const char *path, const tb_options *options, tb_weights **out, tb_error *err) {
    tb_weights *w;
    struct stat st;
    tb_result r;
    if (!out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "out is NULL");
    *out = NULL;
    if (!path) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "path is NULL");
    if (!(w = tb__weights_new(options, path))) return TB__OOM(err);
    if ((w->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        r = tb__fail(err, errno == ENOENT ? tb_err_not_found : tb_err_io, NULL, path, -1, errno,
                     "cannot open the weights file");
        tb_weights_free(w);
        return r;
    }
    if (fstat(w->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        r = tb__fail(err, tb_err_io, NULL, path, -1, errno, "the weights file is not a regular file");
        tb_weights_free(w);
        return r;
    }
    w->file_size = (uint64_t)st.st_size;
    if ((r = tb__weights_open(w, err)) != tb_ok) {
        tb_weights_free(w);
        return r;
    }
    *out = w;
    return tb_ok;
}

TBDEF tb_result tb_weights_open_memory(const void *data, size_t size, const tb_options *options, tb_weights **out,
                                       tb_error *err) {
    tb_weights *w;
    tb_result r;
    if (!out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "out is NULL");
    *out = NULL;
    if (!data && size) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "data is NULL");
    if (!(w = tb__weights_new(options, NULL))) return TB__OOM(err);
    w->mem = (const unsigned char *)data, w->file_size = size;
    if ((r = tb__weights_open(w, err)) != tb_ok) {
        tb_weights_free(w);
        return r;
    }
    *out = w;
    return tb_ok;
}

TBDEF uint32_t tb_weights_count(const tb_weights *w) { return w ? w->count : 0; }
TBDEF const tb_weights_tensor *tb_weights_at(const tb_weights *w, uint32_t i) {
    return w && i < w->count ? &w->tensors[i] : NULL;
}
TBDEF const tb_weights_tensor *tb_weights_find(const tb_weights *w, const char *name) {
    uint32_t lo = 0, hi;
    if (!w || !name) return NULL;
    hi = w->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(w->tensors[w->by_name[mid]].name, name);
        if (!c) return &w->tensors[w->by_name[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}
TBDEF tb_result tb_weights_read(const tb_weights *w, const tb_weights_tensor *t, uint64_t offset, void *dst,
                                size_t size, tb_error *err) {
    if (!w || !t || (size && !dst) || t < w->tensors || t >= w->tensors + w->count)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "tb_weights_read: no such tensor, or dst is NULL");
    if (offset > t->size || size > t->size - offset)
        return tb__fail(err, tb_err_invalid_argument, NULL, w->path, -1, 0,
                        "bytes %llu..+%zu of tensor \"%.120s\" (%llu bytes)", (unsigned long long)offset, size, t->name,
                        (unsigned long long)t->size);
    if (size && tb__weights_read_raw(w, t->offset + offset, dst, size) != 0)
        return tb__fail(err, tb_err_io, NULL, w->path, (long long)(t->offset + offset), errno,
                        "the weights file no longer holds tensor \"%.120s\" (cut short since it was opened?)", t->name);
    return tb_ok;
}
TBDEF tb_result tb_weights_crc32(const tb_weights *w, const tb_weights_tensor *t, uint32_t *crc, tb_error *err) {
    unsigned char *buf;
    uint64_t off;
    uint32_t c = 0;
    tb_result r = tb_ok;
    size_t piece = (size_t)1 << 20;
    if (!crc) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "crc is NULL");
    if (!w || !t) return tb_weights_read(w, t, 0, NULL, 0, err);
    if (!(buf = (unsigned char *)tb__alloc(&((tb_weights *)w)->ctx, piece))) return TB__OOM(err);
    for (off = 0; off < t->size && r == tb_ok; off += piece) {
        size_t n = t->size - off < piece ? (size_t)(t->size - off) : piece;
        if ((r = tb_weights_read(w, t, off, buf, n, err)) == tb_ok) c = tb_crc32(c, buf, n);
    }
    tb__free(&((tb_weights *)w)->ctx, buf);
    if (r == tb_ok) *crc = c;
    return r;
}

/* The shape as "[2, 3]". */
static void tb__shape_text(char *out, size_t cap, uint32_t rank, const int64_t *shape) {
    size_t a = 0;
    uint32_t d;
    a += (size_t)snprintf(out, cap, "[");
    for (d = 0; d < rank && d < TB_MAX_TENSOR_DIMS && a < cap; d++)
        a += (size_t)snprintf(out + a, cap - a, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (a < cap) snprintf(out + a, cap - a, "]");
}

TBDEF tb_result tb_weights_check(const tb_weights *w, const tb_bundle *b, unsigned flags, tb_error *err) {
    uint32_t i;
    if (!w || !b)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "tb_weights_check: weights or bundle is NULL");
    if (flags & ~TB_WEIGHTS_CHECK_CRC)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "unknown flags 0x%x", flags);
    for (i = 0; i < b->constant_count; i++) {
        const tb_program_constant *k = &b->constants[i];
        const tb_weights_tensor *t;
        char want[160], got[160];
        uint32_t crc;
        tb_result r;
        if (!(k->flags & TB_CONSTANT_EXTERNAL)) continue;
        if (!(t = tb_weights_find(w, k->tensor)))
            return tb__fail(err, tb_err_not_found, NULL, w->path, -1, 0,
                            "constant %u \"%.100s\": the weights file has no tensor \"%.100s\"", i, k->name, k->tensor);
        tb__shape_text(want, sizeof want, k->rank, k->shape);
        tb__shape_text(got, sizeof got, t->rank, t->shape);
        if (t->dtype != k->dtype || t->rank != k->rank || memcmp(t->shape, k->shape, k->rank * sizeof *k->shape))
            return tb__fail(
                err, tb_err_arg_mismatch, NULL, w->path, (long long)t->offset, 0,
                "constant %u \"%.100s\": tensor \"%.100s\" is %s %s in the weights file, the bundle wants %s %s", i,
                k->name, k->tensor, tb_dtype_name(t->dtype), got, tb_dtype_name(k->dtype), want);
        if (!(flags & TB_WEIGHTS_CHECK_CRC)) continue;
        if ((r = tb_weights_crc32(w, t, &crc, err)) != tb_ok) return r;
        if (crc != k->crc32)
            return tb__fail(
                err, tb_err_checksum, NULL, w->path, (long long)t->offset, 0,
                "constant %u \"%.100s\": tensor \"%.100s\" holds other bytes than at export (CRC-32 %08x, exported "
                "%08x): another checkpoint",
                i, k->name, k->tensor, crc, k->crc32);
    }
    return tb_ok;
}

TBDEF tb_result tb_weights_path_beside(const tb_bundle *b, const char *bundle_path, char *out, size_t capacity,
                                       tb_error *err) {
    const char *f, *slash;
    size_t dir, n;
    if (!b || !bundle_path || !out || !capacity)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "bundle, bundle_path or out is NULL, or capacity 0");
    *out = 0;
    f = tb_bundle_property(b, "weights.file");
    if (!f || !*f) return tb__fail(err, tb_err_not_found, NULL, bundle_path, -1, 0, "the bundle names no weights file");
    if (strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, ".."))
        return tb__fail(err, tb_err_not_found, NULL, bundle_path, -1, 0,
                        "the bundle's weights.file \"%.100s\" is not a plain file name", f);
    slash = strrchr(bundle_path, '/');
    dir = slash ? (size_t)(slash - bundle_path + 1) : 0, n = strlen(f);
    if (dir + n >= capacity)
        return tb__fail(err, tb_err_limit, NULL, bundle_path, -1, 0,
                        "the weights file's path takes %zu bytes, over %zu", dir + n + 1, capacity);
    memcpy(out, bundle_path, dir);
    memcpy(out + dir, f, n + 1);
    return tb_ok;
}

TBDEF void tb_weights_free(tb_weights *w) {
    tb__ctx c;
    if (!w) return;
    c = w->ctx;
    if (w->fd >= 0) close(w->fd);
    tb__free(&c, w->tensors);
    tb__free(&c, w->by_name);
    tb__free(&c, w->names);
    tb__free(&c, w->path);
    tb__free(&c, w);
}

#ifndef TB_NO_LAUNCHER
/* ---------------------------------------------------------------------- */
/* >>driver  Driver: libcuda through dlopen */
/* libcuda.so.1 opened once with dlopen, entry points                     */
/* resolved by name. No CUDA header: the few types and constants used are */
/* mirrored here from the driver API's documented ABI.                   */
/* ---------------------------------------------------------------------- */
#include <dlfcn.h>

#ifndef TB_LIBCUDA_NAME
#define TB_LIBCUDA_NAME "libcuda.so.1"
#endif

typedef int tb__CUresult;
typedef int tb__CUdevice;
typedef void *tb__CUctx;

/* CUlaunchAttribute and CUlaunchConfig, as cuda.h lays them out. */
typedef struct tb__cu_attr {
    unsigned id;
    char pad[4];
    union {
        char raw[64];
        int cooperative;
        struct { unsigned x, y, z; } cluster;
        int programmatic;
        int scheduling;
    } value;
} tb__cu_attr;

typedef struct tb__cu_config {
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared;
    void *stream;
    tb__cu_attr *attrs;
    unsigned num_attrs;
} tb__cu_config;

#define TB__CU_LAUNCH_ATTRIBUTE_COOPERATIVE 2u
#define TB__CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 4u
#define TB__CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE 5u
#define TB__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6u
#define TB__CU_CLUSTER_SCHEDULING_POLICY_SPREAD 1
#define TB__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK 0
#define TB__CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES 1
#define TB__CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES 3
#define TB__CU_FUNC_ATTRIBUTE_NUM_REGS 4
#define TB__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define TB__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97
#define TB__CUDA_ERROR_INVALID_VALUE 1
#define TB__CUDA_ERROR_NO_DEVICE 100
#define TB__CUDA_ERROR_INVALID_CONTEXT 201
#define TB__CUDA_ERROR_INVALID_HANDLE 400
#define TB__STATIC_SHARED_LIMIT 49152u
#define TB__MAX_CLUSTER_BLOCKS 16u

/* The driver's entry points, written once: the struct's fields and their
   resolution in tb__driver_init both expand this table. A row: the field;
   the symbol dlsym resolves, with the _v2 suffix where the field's
   parameters are the _v2 ones; 1 when required (without it the driver
   does not load, and the error names it) or 0 when optional (the feature
   that calls it says so when it is missing); the parameter types (each
   returns CUresult). */
#define TB__DRIVER_FUNCS(X)                                                                                            \
    X(cuInit, "cuInit", 1, (unsigned))                                                                                 \
    X(cuDeviceGetCount, "cuDeviceGetCount", 1, (int *))                                                                \
    X(cuDeviceGet, "cuDeviceGet", 1, (tb__CUdevice *, int))                                                            \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", 1, (int *, int, tb__CUdevice))                                     \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", 1, (tb__CUctx *))                                                            \
    X(cuCtxGetDevice, "cuCtxGetDevice", 1, (tb__CUdevice *))                                                           \
    X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", 1, (tb__CUctx))                                                         \
    X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", 1, (tb__CUctx *))                                                         \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 1, (tb__CUctx *, tb__CUdevice))                            \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", 1, (tb__CUdevice))                                    \
    X(cuModuleLoadData, "cuModuleLoadData", 1, (void **, const void *))                                                \
    X(cuModuleUnload, "cuModuleUnload", 1, (void *))                                                                   \
    X(cuModuleGetFunction, "cuModuleGetFunction", 1, (void **, void *, const char *))                                  \
    X(cuFuncGetAttribute, "cuFuncGetAttribute", 1, (int *, int, void *))                                               \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", 1, (void *, int, int))                                                 \
    X(cuLaunchKernel, "cuLaunchKernel", 1, (void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,        \
      unsigned, void *, void **, void **))                                                                             \
    X(cuLaunchKernelEx, "cuLaunchKernelEx", 0, (const tb__cu_config *, void *, void **, void **))                      \
    X(cuFuncGetParamInfo, "cuFuncGetParamInfo", 0, (void *, size_t, size_t *, size_t *))                               \
    /* (map, dtype, rank, base, dims, strides, box, element strides,                                                   \
       interleave, swizzle, L2 promotion, out-of-bounds fill) */                                                       \
    X(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled", 0, (void *, int, uint32_t, void *, const uint64_t *,           \
      const uint64_t *, const uint32_t *, const uint32_t *, int, int, int, int))                                       \
    X(cuGetErrorName, "cuGetErrorName", 1, (tb__CUresult, const char **))                                              \
    X(cuGetErrorString, "cuGetErrorString", 1, (tb__CUresult, const char **))                                          \
    /* autotune and graphs (optional: those features say so when missing) */                                          \
    X(cuEventCreate, "cuEventCreate", 0, (void **, unsigned))                                                          \
    X(cuEventRecord, "cuEventRecord", 0, (void *, void *))                                                             \
    X(cuEventSynchronize, "cuEventSynchronize", 0, (void *))                                                           \
    X(cuEventElapsedTime, "cuEventElapsedTime", 0, (float *, void *, void *))                                          \
    X(cuEventDestroy, "cuEventDestroy_v2", 0, (void *))                                                                \
    X(cuMemAlloc, "cuMemAlloc_v2", 0, (uint64_t *, size_t))                                                            \
    X(cuMemFree, "cuMemFree_v2", 0, (uint64_t))                                                                        \
    X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", 0, (uint64_t, uint64_t, size_t, void *))                              \
    X(cuMemsetD8Async, "cuMemsetD8Async", 0, (uint64_t, unsigned char, size_t, void *))                                \
    X(cuMemsetD32Async, "cuMemsetD32Async", 0, (uint64_t, unsigned, size_t, void *))                                   \
    /* the runner: constants' upload, memset steps, input checks */                                                    \
    X(cuMemsetD16Async, "cuMemsetD16Async", 0, (uint64_t, unsigned short, size_t, void *))                             \
    X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", 0, (uint64_t, const void *, size_t))                                            \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 0, (uint64_t, const void *, size_t, void *))                          \
    X(cuMemAllocHost, "cuMemAllocHost_v2", 0, (void **, size_t))                                                       \
    X(cuMemFreeHost, "cuMemFreeHost", 0, (void *))                                                                     \
    X(cuStreamCreate, "cuStreamCreate", 0, (void **, unsigned))                                                        \
    X(cuStreamDestroy, "cuStreamDestroy_v2", 0, (void *))                                                              \
    X(cuPointerGetAttribute, "cuPointerGetAttribute", 0, (void *, int, uint64_t))                                      \
    X(cuMemGetAddressRange, "cuMemGetAddressRange_v2", 0, (uint64_t *, size_t *, uint64_t))                            \
    /* the model's device memory calls (tb_model_device_alloc...) */                                                   \
    X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", 0, (void *, uint64_t, size_t))                                                  \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", 0, (void *, uint64_t, size_t, void *))                                \
    X(cuCtxSynchronize, "cuCtxSynchronize", 0, (void))                                                                 \
    X(cuStreamSynchronize, "cuStreamSynchronize", 0, (void *))                                                         \
    X(cuStreamIsCapturing, "cuStreamIsCapturing", 0, (void *, int *))                                                  \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", 0, (void *, int))                                               \
    X(cuStreamEndCapture, "cuStreamEndCapture", 0, (void *, void **))                                                  \
    X(cuStreamGetCaptureInfo, "cuStreamGetCaptureInfo_v2", 0, (void *, int *, unsigned long long *, void **,           \
      void *const **, size_t *))                                                                                       \
    X(cuGraphInstantiate, "cuGraphInstantiateWithFlags", 0, (void **, void *, unsigned long long))                     \
    X(cuGraphLaunch, "cuGraphLaunch", 0, (void *, void *))                                                             \
    /* the _v2 node parameters extend the first version's, and NULL kern                                               \
       and ctx in them mean "use func" (the first version where it is absent) */                                       \
    X(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2", 0, (void *, void *, const void *))          \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", 0, (void *))                                                           \
    X(cuGraphDestroy, "cuGraphDestroy", 0, (void *))

typedef struct tb__driver {
    void *lib;
    tb_result status;
    int cuda_result;
    char message[320];
#define TB__X(field, symbol, required, params) tb__CUresult (*field) params;
    TB__DRIVER_FUNCS(TB__X)
#undef TB__X
} tb__driver;

static tb__driver tb__drv;
static pthread_once_t tb__drv_once = PTHREAD_ONCE_INIT;

/* dlsym returns an object pointer; memcpy turns it into a function pointer
   without the cast ISO C forbids. */
#define TB__SYM(field, name, required)                                        \
    do {                                                                      \
        void *s_ = dlsym(tb__drv.lib, name);                                  \
        if (!s_ && (required)) {                                              \
            missing = name;                                                   \
            goto fail;                                                        \
        }                                                                     \
        memcpy(&tb__drv.field, &s_, sizeof s_);                               \
    } while (0)

static void tb__driver_init(void) {
    const char *missing = NULL;
    tb__CUresult cr;
    tb__drv.lib = dlopen(TB_LIBCUDA_NAME, RTLD_NOW | RTLD_LOCAL);
    if (!tb__drv.lib) {
        const char *e = dlerror();
        tb__drv.status = tb_err_no_driver;
        snprintf(tb__drv.message, sizeof tb__drv.message, "cannot open %s (%s); is the NVIDIA driver installed?",
                 TB_LIBCUDA_NAME, e ? e : "no reason given");
        return;
    }
#define TB__X(field, symbol, required, params) TB__SYM(field, symbol, required);
    TB__DRIVER_FUNCS(TB__X)
#undef TB__X
    if (!tb__drv.cuGraphExecKernelNodeSetParams) /* without _v2, the first version (its row says why) */
        TB__SYM(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams", 0);
    cr = tb__drv.cuInit(0);
    if (cr != 0) {
        const char *nm = "?";
        tb__drv.cuGetErrorName(cr, &nm);
        tb__drv.status = cr == TB__CUDA_ERROR_NO_DEVICE ? tb_err_no_device : tb_err_no_driver;
        tb__drv.cuda_result = cr;
        snprintf(tb__drv.message, sizeof tb__drv.message, "cuInit in %s returned %s (%d)", TB_LIBCUDA_NAME, nm, cr);
        return;
    }
    tb__drv.status = tb_ok;
    return;
fail:
    tb__drv.status = tb_err_no_driver;
    snprintf(tb__drv.message, sizeof tb__drv.message, "%s has no entry point %s (driver too old?)", TB_LIBCUDA_NAME,
             missing);
}

TBDEF tb_result tb_driver_load(tb_error *err) {
    pthread_once(&tb__drv_once, tb__driver_init);
    if (tb__drv.status != tb_ok) {
        tb__fail(err, tb__drv.status, NULL, TB_LIBCUDA_NAME, -1, 0, "%s", tb__drv.message);
        if (err) err->cuda_result = tb__drv.cuda_result;
    }
    return tb__drv.status;
}

TBDEF void *tb_driver_symbol(const char *name) {
    if (tb_driver_load(NULL) != tb_ok || !name) return NULL;
    return dlsym(tb__drv.lib, name);
}

TBDEF tb_result tb_driver_device_count(int *count, tb_error *err);

/* Fills err for a failed driver call. */
static tb_result tb__cufail(tb_error *err, tb__CUresult cr, tb_result code, const char *kernel, const char *call,
                            const char *fmt, ...) TB__PRINTF(6, 7);
static TB__COLD tb_result tb__cufail(tb_error *err, tb__CUresult cr, tb_result code, const char *kernel,
                                     const char *call, const char *fmt, ...) {
    const char *nm = "?", *desc = "";
    char detail[256];
    va_list ap;
    if (!err) return code;
    if (tb__drv.cuGetErrorName) tb__drv.cuGetErrorName(cr, &nm);
    if (tb__drv.cuGetErrorString) tb__drv.cuGetErrorString(cr, &desc);
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    tb__fail(err, code, kernel, NULL, -1, 0, "%s%s%s returned %s (%d: %s)", detail, *detail ? ": " : "", call,
             nm ? nm : "?", cr, desc ? desc : "");
    err->cuda_result = cr;
    return code;
}

TBDEF tb_result tb_driver_device_count(int *count, tb_error *err) {
    tb_result r;
    tb__CUresult cr;
    if (!count) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "count is NULL");
    *count = 0;
    if ((r = tb_driver_load(err)) != tb_ok) return r;
    cr = tb__drv.cuDeviceGetCount(count);
    if (cr) return tb__cufail(err, cr, tb_err_cuda, NULL, "cuDeviceGetCount", "%s", "");
    return tb_ok;
}

/* ---------------------------------------------------------------------- */
/* >>load  Load: a cubin to a loaded kernel */
/* A loaded kernel keeps everything a launch needs, decided at            */
/* load time (block size, shared memory, which arguments need converting, */
/* launch attributes), so that a launch is a few stores and one driver    */
/* call: no allocation, no parsing, no driver query (but the current      */
/* context, per-thread state, where the stream is NULL: tb__launch_now).  */
/* ---------------------------------------------------------------------- */
struct tb_loaded_kernel {
    /* first and together, what a launch reads: the driver's launch between
       two of ours evicts much of what the last one read */
    void *function;
    tb__CUctx cu_ctx;
    unsigned block_x;
    unsigned shared;
    int use_ex;
    int global_present, profile_present;
    uint32_t desc_count;        /* tensor descriptor ('T') arguments: their own launch path */
    uint32_t conv_count;
    uint32_t arg_count;         /* info.arg_count */
    uint64_t global_size, profile_size;
    /* a launch with a grid rule reads the next 64 bytes too, and one with
       arguments to convert the start of conv: 128 bytes and a few, three
       cache lines at most from a malloc'd address */
    tb__grid_plan grid;         /* the config's grid rule (the Grid section's) */
    uint32_t conv[TB_MAX_ARGS]; /* the arguments converted at launch: index | code << 16 */
    /* the rest */
    tb_kernel_info info;
    char codes[TB_MAX_ARGS + 1];
    tb__ctx ctx;
    uint32_t refs;              /* 1 + the graph launches that captured it (tb__kernel_retain), under tb__refs_mu */
    tb__CUdevice device;
    int retained;               /* primary context retained by us */
    void *module;
    unsigned cluster[3];        /* grid multiplier; 1,1,1 without clusters */
    unsigned num_attrs;
    tb__cu_attr attrs[4];
    int sign_unknown;           /* TB_CONFIG_TYPES_FROM_IR: checked mode takes either reading */
    uint32_t expanded;          /* parameters the arguments become ('T' takes several) */
    tb_tensordesc_meta descs[TB_MAX_TENSORDESCS];
    char div[TB_MAX_ARGS + 1];
    tb_grid_op grid_ops[3][TB_MAX_GRID_OPS]; /* the plan's operations */
    char name[128];
};

/* Makes k's context current if it is not; *pushed says to pop it. */
static TB__HOT tb__CUresult tb__enter(const tb_loaded_kernel *k, int *pushed) {
    tb__CUctx cur = NULL;
    tb__CUresult cr = tb__drv.cuCtxGetCurrent(&cur);
    *pushed = 0;
    if (cr) return cr;
    if (cur == k->cu_ctx) return 0;
    cr = tb__drv.cuCtxPushCurrent(k->cu_ctx);
    if (cr == 0) *pushed = 1;
    return cr;
}
static TB__HOT void tb__leave(int pushed) {
    tb__CUctx c;
    if (pushed) tb__drv.cuCtxPopCurrent(&c);
}

static void tb__free_loaded(tb_loaded_kernel *k) {
    tb__ctx c = k->ctx;
    tb__free(&c, k);
}

/* A graph holds a reference on each kernel it captured, so that its
   updates and replays outlive tb_unload and tb_kernel_table_free: the last
   release unloads. Not on any launch path, so a mutex is cheap enough. */
static pthread_mutex_t tb__refs_mu = PTHREAD_MUTEX_INITIALIZER;
static void tb__kernel_retain(const tb_loaded_kernel *k) {
    pthread_mutex_lock(&tb__refs_mu);
    ((tb_loaded_kernel *)(uintptr_t)k)->refs++;
    pthread_mutex_unlock(&tb__refs_mu);
}

TBDEF void tb_unload(tb_loaded_kernel *k) {
    int pushed;
    uint32_t left;
    if (!k) return;
    pthread_mutex_lock(&tb__refs_mu);
    left = --k->refs;
    pthread_mutex_unlock(&tb__refs_mu);
    if (left) return; /* a graph still holds it */
    if (k->module && tb__enter(k, &pushed) == 0) {
        tb__drv.cuModuleUnload(k->module);
        tb__leave(pushed);
    }
    if (k->retained) tb__drv.cuDevicePrimaryCtxRelease(k->device);
    tb__free_loaded(k);
}

TBDEF void tb_loaded_kernel_info(const tb_loaded_kernel *k, tb_kernel_info *info) {
    if (!info) return;
    if (!k) {
        memset(info, 0, sizeof *info);
        return;
    }
    *info = k->info;
}

/* Argument a, an 'i' or 'I' in the config, is a 1-byte bool in the cubin
   (PyTorch's code for i1 and u1): the kernel gets v != 0, converted on
   every host, and the grid plan marks the operations that read it
   (tb__grid_plan_bool), so that the grid and the kernel see one value. */
static void tb__make_bool(tb_loaded_kernel *k, uint32_t a) {
    uint32_t i;
    k->codes[a] = '?';
    for (i = 0; i < k->conv_count && (k->conv[i] & 0xFFFFu) != a; i++) {}
    if (i == k->conv_count) k->conv_count++;
    k->conv[i] = a | (uint32_t)(unsigned char)'?' << 16;
    tb__grid_plan_bool(&k->grid, a);
}

/* The cubin's parameter list must be ours: count first, then every size. */
/* The sizes of the parameters the arguments become, and which argument
   each belongs to: one per argument, except a tensor descriptor ('T'):
   TMA: the CUtensorMap (128 bytes), shape i32 x rank, strides i64 x rank;
   not TMA: base pointer, shape and strides i64, padding (1 byte), shape i32,
   strides i64 (Triton 3.6's make_launcher). */
static uint32_t tb__param_layout(const tb_loaded_kernel *k, uint16_t *size, uint16_t *owner) {
    uint32_t i, j = 0, d = 0, q;
    for (i = 0; i < k->info.arg_count; i++) {
        if (k->codes[i] != 'T') {
            size[j] = (uint16_t)tb_arg_code_size(k->codes[i]), owner[j++] = (uint16_t)i;
            continue;
        }
        {
            /* groups after the first parameter: each is rank parameters of
               that size, but the padding flag (1 byte), which is one */
            static const uint16_t tma[] = {4, 8}, plain[] = {8, 8, 1, 4, 8};
            const tb_tensordesc_meta *m = &k->descs[d++];
            const uint16_t *groups = m->tma ? tma : plain;
            uint32_t ngroups = m->tma ? 2 : 5, gi;
            size[j] = m->tma ? 128 : 8, owner[j++] = (uint16_t)i; /* the CUtensorMap, or the base pointer */
            for (gi = 0; gi < ngroups; gi++) {
                uint32_t reps = groups[gi] == 1 ? 1 : m->rank;
                for (q = 0; q < reps; q++) size[j] = groups[gi], owner[j++] = (uint16_t)i;
            }
        }
    }
    return j;
}

static tb_result tb__check_params(tb_loaded_kernel *k, tb_error *err) {
    uint32_t total = k->info.param_count, i, count = 0;
    size_t off, size, got[TB_MAX_ARGS + 3];
    tb__CUresult cr;
    uint16_t want_size[TB_MAX_ARGS + 2], owner[TB_MAX_ARGS + 2];
    if (!tb__drv.cuFuncGetParamInfo) return tb_ok;
    if (tb__param_layout(k, want_size, owner) != k->expanded)
        return tb__fail(err, tb_err_malformed, k->name, NULL, -1, 0,
                        "internal: the parameter layout and its count disagree");
    /* one pass: each parameter's size, until the driver says the list ends
       (a load is compared with a bare cuModuleLoadData, so no call twice) */
    while (count <= TB_MAX_ARGS + 2 && (cr = tb__drv.cuFuncGetParamInfo(k->function, count, &off, &size)) == 0)
        got[count++] = size;
    if (cr != TB__CUDA_ERROR_INVALID_VALUE && cr != 0)
        return tb__cufail(err, cr, tb_err_cuda, k->name, "cuFuncGetParamInfo", "%s", "");
    if (count != total)
        return tb__fail(err, tb_err_arg_mismatch, k->name, NULL, -1, 0,
                        "the cubin takes %u parameters; the config gives %u arguments (%u parameters) + %u scratch "
                        "pointers", count, k->info.arg_count, k->expanded, total - k->expanded);
    for (i = 0; i < total; i++) {
        uint32_t want = i < k->expanded ? want_size[i] : 8;
        size = got[i];
        if (size == want) continue;
        /* PyTorch's codes say 'i' for i1 and 'I' for u1, which Triton 3.6
           compiles to a 1-byte parameter: pass it as the bool it is */
        if (size == 1 && i < k->expanded && (k->codes[owner[i]] == 'i' || k->codes[owner[i]] == 'I')) {
            tb__make_bool(k, owner[i]);
            continue;
        }
        if (i < k->expanded)
            return tb__fail(err, tb_err_arg_mismatch, k->name, NULL, -1, 0,
                            "the cubin's parameter %u is %zu bytes; argument %u ('%c') gives %u", i, size,
                            (unsigned)owner[i], k->codes[owner[i]], want);
        return tb__fail(err, tb_err_arg_mismatch, k->name, NULL, -1, 0,
                        "the cubin's parameter %u is %zu bytes where a scratch pointer (8) was expected", i, size);
    }
    k->info.param_check = 1;
    return tb_ok;
}

static tb_result tb__load_cubin(const void *cubin, size_t size, const tb_launch_config *cfg, const tb_options *options,
                                const tb_load_options *load, int checked, tb_loaded_kernel **out, tb_error *err);
TBDEF tb_result tb_load_cubin(const void *cubin, size_t size, const tb_launch_config *cfg, const tb_options *options,
                              const tb_load_options *load, tb_loaded_kernel **out, tb_error *err) {
    return tb__load_cubin(cubin, size, cfg, options, load, 0, out, err);
}

/* ---- the plan: everything a launch needs that the config decides ----
   Driver-free, so that a whole program can be checked on a CPU before
   anything touches a GPU: the argument codes and which ones need
   converting, the grid plan, scratch, block and shared memory, the
   parameters tensor descriptors become, and the launch attributes. */
static tb_result tb__load_plan(tb_loaded_kernel *k, const tb_launch_config *cfg, tb_error *err) {
    uint32_t i, n = (uint32_t)strlen(cfg->arg_types);
    tb__copy_field(k->name, sizeof k->name, cfg->function_name);
    memcpy(k->codes, cfg->arg_types, n + 1);
    if (cfg->arg_divisibility && *cfg->arg_divisibility) memcpy(k->div, cfg->arg_divisibility, n + 1);
    else k->div[0] = 0;
    k->conv_count = 0;
    for (i = 0; i < n; i++) {
        char code = k->codes[i];
        /* on little-endian hosts the low bytes of an integer slot are the
           narrowed value already: only floats and bools (v != 0, as the
           grid reads them) need converting */
        int kind = tb__code_kind(code);
        int conv = (kind == TB__KIND_FLOAT && code != 'd') || kind == TB__KIND_BOOL ||
                   (TB__BIG_ENDIAN && tb_arg_code_size(code) < 8);
        if (conv) k->conv[k->conv_count++] = i | (uint32_t)(unsigned char)code << 16;
    }
    k->sign_unknown = (cfg->flags & TB_CONFIG_TYPES_FROM_IR) != 0;
    tb__grid_plan_make(&k->grid, k->grid_ops, k->codes, cfg);
    k->global_present = cfg->global_scratch.present != 0;
    k->profile_present = cfg->profile_scratch.present != 0;
    k->global_size = cfg->global_scratch.size;
    k->profile_size = cfg->profile_scratch.size;
    k->block_x = 32u * cfg->num_warps;
    k->shared = cfg->shared_mem;
    k->info.arg_count = k->arg_count = n;
    k->expanded = n;
    for (i = 0; i < n; i++)
        if (k->codes[i] == 'T') {
            const tb_tensordesc_meta *m = &cfg->tensordescs[k->desc_count];
            k->descs[k->desc_count++] = *m;
            k->expanded += m->tma ? 2 * m->rank : 1 + 4 * m->rank;
        }
    if (k->expanded > TB_MAX_ARGS)
        return tb__fail(err, tb_err_limit, k->name, NULL, -1, 0,
                        "the arguments make %u parameters, over TB_MAX_ARGS (%u)", k->expanded, (unsigned)TB_MAX_ARGS);
    k->info.param_count = k->expanded + (uint32_t)k->global_present + (uint32_t)k->profile_present;
    /* launch attributes, as Triton's own launcher sets them */
    k->cluster[0] = k->cluster[1] = k->cluster[2] = 1;
    if (cfg->flags & TB_CONFIG_PDL) {
        k->attrs[k->num_attrs].id = TB__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        k->attrs[k->num_attrs++].value.programmatic = 1;
    }
    if (cfg->flags & TB_CONFIG_COOPERATIVE) {
        k->attrs[k->num_attrs].id = TB__CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        k->attrs[k->num_attrs++].value.cooperative = 1;
    }
    if (cfg->num_ctas > 1) {
        if (cfg->cluster_dims[0] && cfg->cluster_dims[1] && cfg->cluster_dims[2])
            memcpy(k->cluster, cfg->cluster_dims, sizeof k->cluster);
        else
            k->cluster[0] = cfg->num_ctas;
        /* CUDA clusters hold at most 16 blocks (8 portably); a product past
           that, or one that overflows, is no cluster the driver could run */
        if (k->cluster[0] > TB__MAX_CLUSTER_BLOCKS || k->cluster[1] > TB__MAX_CLUSTER_BLOCKS ||
            k->cluster[2] > TB__MAX_CLUSTER_BLOCKS ||
            k->cluster[0] * k->cluster[1] * k->cluster[2] > TB__MAX_CLUSTER_BLOCKS)
            return tb__fail(err, tb_err_malformed, k->name, NULL, -1, 0,
                            "cluster %u x %u x %u holds more than %u blocks", k->cluster[0], k->cluster[1],
                            k->cluster[2], (unsigned)TB__MAX_CLUSTER_BLOCKS);
        k->attrs[k->num_attrs].id = TB__CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        k->attrs[k->num_attrs].value.cluster.x = k->cluster[0];
        k->attrs[k->num_attrs].value.cluster.y = k->cluster[1];
        k->attrs[k->num_attrs++].value.cluster.z = k->cluster[2];
        k->attrs[k->num_attrs].id = TB__CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
        k->attrs[k->num_attrs++].value.scheduling = TB__CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
    }
    k->use_ex = k->num_attrs > 0;
    return tb_ok;
}

/* ---- the driver steps ---- */
/* The driver has what the plan needs (TMA encoding, launch attributes). */
static tb_result tb__load_features(const tb_loaded_kernel *k, tb_error *err) {
    uint32_t i;
    for (i = 0; i < k->desc_count; i++)
        if (k->descs[i].tma && !tb__drv.cuTensorMapEncodeTiled)
            return tb__fail(err, tb_err_no_driver, k->name, TB_LIBCUDA_NAME, -1, 0,
                            "the kernel takes a TMA tensor descriptor and the driver has no cuTensorMapEncodeTiled");
    if (k->use_ex && !tb__drv.cuLaunchKernelEx)
        return tb__fail(err, tb_err_no_driver, k->name, TB_LIBCUDA_NAME, -1, 0,
                        "the kernel needs launch attributes and the driver has no cuLaunchKernelEx");
    return tb_ok;
}

/* The context: the current one, else the device's primary context
   (retained: released by tb_unload). */
static tb_result tb__load_context(tb_loaded_kernel *k, const tb_load_options *load, tb_error *err) {
    tb__CUctx cur = NULL;
    tb__CUresult cr;
    int ndev = 0, dev_req = load ? load->device : 0;
    if ((cr = tb__drv.cuCtxGetCurrent(&cur)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, k->name, "cuCtxGetCurrent", "%s", "");
    if (cur && !(load && (load->flags & TB_LOAD_PRIMARY_CONTEXT))) {
        k->cu_ctx = cur;
        if ((cr = tb__drv.cuCtxGetDevice(&k->device)) != 0)
            return tb__cufail(err, cr, tb_err_cuda, k->name, "cuCtxGetDevice", "%s", "");
    } else {
        if ((cr = tb__drv.cuDeviceGetCount(&ndev)) != 0 || dev_req < 0 || dev_req >= ndev)
            return tb__fail(err, tb_err_no_device, k->name, NULL, -1, 0, "CUDA device %d requested, %d present",
                            dev_req, ndev);
        if ((cr = tb__drv.cuDeviceGet(&k->device, dev_req)) != 0 ||
            (cr = tb__drv.cuDevicePrimaryCtxRetain(&k->cu_ctx, k->device)) != 0)
            return tb__cufail(err, cr, tb_err_cuda, k->name, "cuDevicePrimaryCtxRetain", "device %d", dev_req);
        k->retained = 1;
    }
    k->info.device = k->device;
    return tb_ok;
}

/* The module and its function, in the kernel's context (entered): the
   function's attributes, the block size and shared memory it allows. */
static tb_result tb__load_module(tb_loaded_kernel *k, const void *cubin, size_t size, const char *function,
                                 uint32_t num_warps, tb_error *err) {
    void *aligned = NULL;
    int optin = 0;
    tb__CUresult cr;
    if ((uintptr_t)cubin & 15u) {
        /* the driver reads the ELF image in place: give it an aligned copy */
        if (!(aligned = tb__alloc(&k->ctx, size + 16))) return TB__OOM(err);
        memcpy((char *)aligned + ((16 - ((uintptr_t)aligned & 15u)) & 15u), cubin, size);
        cubin = (char *)aligned + ((16 - ((uintptr_t)aligned & 15u)) & 15u);
    }
    cr = tb__drv.cuModuleLoadData(&k->module, cubin);
    tb__free(&k->ctx, aligned);
    if (cr) {
        k->module = NULL;
        return tb__cufail(err, cr, tb_err_cuda, k->name, "cuModuleLoadData", "device %d", k->device);
    }
    if ((cr = tb__drv.cuModuleGetFunction(&k->function, k->module, function)) != 0)
        return tb__cufail(err, cr, tb_err_not_found, k->name, "cuModuleGetFunction", "function \"%.100s\"", function);
    tb__drv.cuFuncGetAttribute(&k->info.registers, TB__CU_FUNC_ATTRIBUTE_NUM_REGS, k->function);
    tb__drv.cuFuncGetAttribute(&k->info.spills, TB__CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k->function);
    k->info.spills /= 4;
    tb__drv.cuFuncGetAttribute(&k->info.static_shared, TB__CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->function);
    tb__drv.cuFuncGetAttribute(&k->info.max_threads_per_block, TB__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                               k->function);
    if (k->block_x > (unsigned)k->info.max_threads_per_block)
        return tb__fail(err, tb_err_arg_mismatch, k->name, NULL, -1, 0,
                        "num_warps %u needs %u threads a block; the function allows %d", num_warps, k->block_x,
                        k->info.max_threads_per_block);
    /* in 64 bits: a shared_mem near 2^32 must not wrap past the check */
    if ((uint64_t)k->shared + (uint64_t)(unsigned)k->info.static_shared > TB__STATIC_SHARED_LIMIT) {
        tb__drv.cuDeviceGetAttribute(&optin, TB__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, k->device);
        if ((uint64_t)k->shared + (uint64_t)k->info.static_shared > (uint64_t)optin)
            return tb__fail(
                err, tb_err_shared_memory, k->name, NULL, -1, 0,
                "the kernel needs %u bytes of dynamic + %d of static shared memory; device %d allows %d a block",
                k->shared, k->info.static_shared, k->device, optin);
        if ((cr = tb__drv.cuFuncSetAttribute(k->function, TB__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                             (int)k->shared)) != 0)
            return tb__cufail(err, cr, tb_err_shared_memory, k->name, "cuFuncSetAttribute",
                              "opting in to %u bytes of shared memory", k->shared);
    }
    return tb_ok;
}

/* checked: cfg is a config of a bundle, which checked it when it was added
   or read (the kernel table's loads): not checked again. The plan, then
   the driver steps. */
static tb_result tb__load_cubin(const void *cubin, size_t size, const tb_launch_config *cfg, const tb_options *options,
                                const tb_load_options *load, int checked, tb_loaded_kernel **out, tb_error *err) {
    tb__ctx c = tb__ctx_from(options);
    tb_loaded_kernel *k;
    tb_result r;
    tb__CUresult cr;
    int pushed = 0;
    const char *key;
    if (!out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "out is NULL");
    *out = NULL;
    if (!cubin || size == 0 || !cfg)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "cubin or config is missing");
    key = cfg->function_name ? cfg->function_name : "?";
    if (!checked && ((r = tb__check_config(cfg, key, -1, err)) != tb_ok ||
                     (r = tb__check_config_descs(cfg, key, -1, err)) != tb_ok ||
                     (cfg->grid && (r = tb__check_grid(cfg->grid, cfg, key, -1, err)) != tb_ok)))
        return r;
    if ((r = tb_driver_load(err)) != tb_ok) return r;
    if (!(k = (tb_loaded_kernel *)tb__alloc(&c, sizeof *k))) return TB__OOM(err);
    /* all but the arrays the plan fills (grid, conv, codes, div, grid_ops, name) */
    memset(k, 0, offsetof(tb_loaded_kernel, grid));
    memset(&k->info, 0, sizeof k->info);
    memset(&k->ctx, 0, offsetof(tb_loaded_kernel, div) - offsetof(tb_loaded_kernel, ctx));
    k->ctx = c;
    k->refs = 1;
    if ((r = tb__load_plan(k, cfg, err)) != tb_ok || (r = tb__load_features(k, err)) != tb_ok ||
        (r = tb__load_context(k, load, err)) != tb_ok)
        goto fail;
    if ((cr = tb__enter(k, &pushed)) != 0) {
        r = tb__cufail(err, cr, tb_err_cuda, k->name, "cuCtxPushCurrent", "%s", "");
        goto fail;
    }
    if ((r = tb__load_module(k, cubin, size, cfg->function_name, cfg->num_warps, err)) != tb_ok) goto fail;
    if (!(load && (load->flags & TB_LOAD_NO_PARAM_CHECK)) && (r = tb__check_params(k, err)) != tb_ok) goto fail;
    tb__leave(pushed);
    *out = k;
    return tb_ok;
fail:
    if (k->module) tb__drv.cuModuleUnload(k->module);
    tb__leave(pushed);
    if (k->retained) tb__drv.cuDevicePrimaryCtxRelease(k->device);
    tb__free_loaded(k);
    return r;
}

static tb_result tb__load_config(const tb_bundle *b, const tb_launch_config *cfg, const tb_options *options,
                                 const tb_load_options *load, int checked, tb_loaded_kernel **out, tb_error *err);
TBDEF tb_result tb_load_config(const tb_bundle *b, const tb_launch_config *cfg, const tb_options *options,
                               const tb_load_options *load, tb_loaded_kernel **out, tb_error *err) {
    return tb__load_config(b, cfg, options, load, 0, out, err);
}
static tb_result tb__load_config(const tb_bundle *b, const tb_launch_config *cfg, const tb_options *options,
                                 const tb_load_options *load, int checked, tb_loaded_kernel **out, tb_error *err) {
    const tb_kernel *k;
    const tb_artifact *a;
    const void *bytes;
    void *copy;
    tb_result r;
    if (out) *out = NULL;
    if (!b || !cfg) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle or config is NULL");
    k = tb_bundle_find_kernel(b, cfg->kernel_hash);
    if (!k) return tb__fail(err, tb_err_not_found, cfg->kernel_hash, NULL, -1, 0, "the bundle has no such kernel");
    a = tb_kernel_find_artifact(k, cfg->binary_name);
    if (!a)
        return tb__fail(err, tb_err_not_found, cfg->kernel_hash, cfg->binary_name, -1, 0,
                        "the kernel has no such binary");
    /* a mapped bundle's cubin is copied through the descriptor: the driver
       reads it in this process, where a truncated file would fault */
    if ((r = tb__artifact_bytes(b, k, a, 0, &bytes, &copy, err)) != tb_ok) return r;
    r = tb__load_cubin(bytes, (size_t)a->size, cfg, options, load, checked, out, err);
    tb__free(&b->ctx, copy);
    return r;
}

TBDEF tb_result tb_load_from_cache(const char *cache_dir, const char *hash, const char *name, const char *arg_types,
                                   const tb_options *options, const tb_load_options *load, tb_loaded_kernel **out,
                                   tb_error *err) {
    tb_bundle *b = NULL;
    tb_result r;
    tb__derived *d = NULL;
    const tb_kernel *k;
    const char *stem = name;
    size_t stem_len = name ? strlen(name) : 0;
    uint32_t i;
    if (out) *out = NULL;
    if (!out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "out is NULL");
    if ((r = tb_bundle_create(options, &b, err)) != tb_ok) return r;
    if ((r = tb_collect_kernel(b, cache_dir, hash, 0, NULL, err)) != tb_ok) goto done;
    k = &b->kernels[0];
    if (!name) {
        for (i = 0; i < k->artifact_count; i++)
            if (tb__has_suffix(k->artifacts[i].name, ".cubin")) {
                if (stem) {
                    r = tb__fail(err, tb_err_invalid_argument, hash, NULL, -1, 0,
                                 "the directory holds several cubins; name one");
                    goto done;
                }
                stem = k->artifacts[i].name;
                stem_len = strlen(stem) - 6;
            }
        if (!stem) {
            r = tb__fail(err, tb_err_not_found, hash, cache_dir, -1, 0, "the kernel directory holds no .cubin");
            goto done;
        }
    }
    d = (tb__derived *)tb__alloc(&b->ctx, sizeof *d);
    if (!d) {
        r = TB__OOM(err);
        goto done;
    }
    if ((r = tb__derive(b, k, stem, stem_len, d, err)) != tb_ok) goto done;
    if (arg_types) {
        if (strlen(arg_types) != strlen(d->types)) {
            r = tb__fail(err, tb_err_arg_mismatch, hash, NULL, -1, 0, "arg_types has %u codes; the IR has %u arguments",
                         (unsigned)strlen(arg_types), (unsigned)strlen(d->types));
            goto done;
        }
        d->cfg.arg_types = arg_types;
        d->cfg.flags &= ~TB_CONFIG_TYPES_FROM_IR; /* the caller's codes carry signedness */
    }
    r = tb_load_config(b, &d->cfg, options, load, out, err);
done:
    if (b) tb__free(&b->ctx, d);
    tb_bundle_free(b);
    return r;
}

/* ---------------------------------------------------------------------- */
/* >>launch  Launch: a loaded kernel with its arguments */
/* The launch path: arguments converted into fixed arrays, the grid from */
/* the plan, one driver call; a capture in progress is noted through one */
/* hook (tb__capturing, tb__graph_note: >>graphs). */
/* ---------------------------------------------------------------------- */
static int tb__capturing(void);
static void tb__graph_note(const tb_loaded_kernel *k, uint32_t gx, uint32_t gy, uint32_t gz, void *stream);

/* Range and tt.divisibility checks of TB_LAUNCH_CHECKED. */
static tb_result tb__check_args(const tb_loaded_kernel *k, const tb_launch_params *p, tb_error *err) {
    uint32_t i;
    for (i = 0; i < k->info.arg_count; i++) {
        char code = k->codes[i];
        tb_arg v = p->args[i];
        if (!tb__in_range(code, v, k->sign_unknown))
            return tb__fail(err, tb_err_arg_range, k->name, NULL, -1, 0,
                            "argument %u (%lld, %g) does not fit its type '%c'", i, (long long)v.i, v.f, code);
        if (k->div[0] == 0 || k->div[i] != '1' || code == 'T') continue;
        if (code == 'O' && (v.u & 15u))
            return tb__fail(err, tb_err_misaligned, k->name, NULL, -1, 0,
                            "argument %u: pointer 0x%llx is not 16-byte aligned, which the cubin assumes", i,
                            (unsigned long long)v.u);
        if (code != 'O' && code != 'f' && code != 'd' && code != 'e' && code != 'y' && (v.u & 15u))
            return tb__fail(err, tb_err_misaligned, k->name, NULL, -1, 0,
                            "argument %u: %lld is not divisible by 16, which the cubin assumes", i, (long long)v.i);
    }
    if (k->global_size && !p->global_scratch)
        return tb__fail(err, tb_err_scratch, k->name, NULL, -1, 0,
                        "the kernel needs %llu bytes of global scratch: pass global_scratch",
                        (unsigned long long)k->global_size);
    if (k->profile_size && !p->profile_scratch)
        return tb__fail(err, tb_err_scratch, k->name, NULL, -1, 0,
                        "the kernel needs %llu bytes of profile scratch: pass profile_scratch",
                        (unsigned long long)k->profile_size);
    return tb_ok;
}

static TB__HOT tb__CUresult tb__launch_call(const tb_loaded_kernel *k, uint32_t gx, uint32_t gy, uint32_t gz,
                                            void *stream, void **params) {
    tb__cu_config lc;
    if (!k->use_ex)
        return tb__drv.cuLaunchKernel(k->function, gx, gy, gz, k->block_x, 1, 1, k->shared, stream, params, NULL);
    lc.grid_x = gx * k->cluster[0];
    lc.grid_y = gy * k->cluster[1];
    lc.grid_z = gz * k->cluster[2];
    lc.block_x = k->block_x;
    lc.block_y = lc.block_z = 1;
    lc.shared = k->shared;
    lc.stream = stream;
    lc.attrs = (tb__cu_attr *)(uintptr_t)k->attrs; /* the driver only reads them */
    lc.num_attrs = k->num_attrs;
    return tb__drv.cuLaunchKernelEx(&lc, k->function, params, NULL);
}

/* The launch in k's context. A stream carries its context, and the driver
   launches there whatever is current, so a stream's launch asks nothing
   first (cuCtxGetCurrent is a measurable part of a launch). The NULL,
   legacy and per-thread handles (0, 1, 2) mean the current context's
   stream: those make k's context current first, as does a retry where a
   driver refuses a stream's launch for the context (201, 400) while
   another is current; where k's was current the refusal stands. */
static TB__HOT tb__CUresult tb__launch_now(const tb_loaded_kernel *k, uint32_t gx, uint32_t gy, uint32_t gz,
                                           void *stream, void **params) {
    tb__CUresult cr;
    int pushed = 0, current = (uintptr_t)stream <= 2u; /* a handle of the current context's stream */
    if (current && (cr = tb__enter(k, &pushed)) != 0) return cr;
    cr = tb__launch_call(k, gx, gy, gz, stream, params);
    if (TB__UNLIKELY(cr == TB__CUDA_ERROR_INVALID_CONTEXT || cr == TB__CUDA_ERROR_INVALID_HANDLE) && !current &&
        tb__enter(k, &pushed) == 0 && pushed)
        cr = tb__launch_call(k, gx, gy, gz, stream, params);
    if (TB__UNLIKELY(tb__capturing()) && cr == 0 && tb__drv.cuStreamGetCaptureInfo)
        tb__graph_note(k, gx, gy, gz, stream);
    tb__leave(pushed);
    return cr;
}

/* A cluster launch multiplies the grid by the cluster's dimensions: refuse
   a product past CUDA's grid limits here, with the numbers, rather than
   leave the driver to fail the launch with CUDA_ERROR_INVALID_VALUE. */
static tb_result tb__check_cluster_grid(const tb_loaded_kernel *k, uint32_t gx, uint32_t gy, uint32_t gz,
                                        tb_error *err) {
    if ((uint64_t)gx * k->cluster[0] > 0x7fffffffu || (uint64_t)gy * k->cluster[1] > 65535u ||
        (uint64_t)gz * k->cluster[2] > 65535u)
        return tb__fail(err, tb_err_invalid_argument, k->name, NULL, -1, 0,
                        "grid %u x %u x %u of clusters %u x %u x %u is more blocks than a CUDA launch takes (x < 2^31, "
                        "y and z < 65536)", gx, gy, gz, k->cluster[0], k->cluster[1], k->cluster[2]);
    return tb_ok;
}

/* Triton's device-side TMA data type numbers to the driver's
   CUtensorMapDataType: the same but for 8, 9 and 10 (its
   TMA_DTYPE_DEVICE_TO_HOST). */
static int tb__tma_dtype(uint32_t t) { return t == 8 ? 10 : t == 9 ? 8 : t == 10 ? 9 : (int)t; }

/* A launch with tensor descriptors: each 'T' argument (a tb_tensor_desc *)
   becomes the parameters tb__param_layout lists, a CUtensorMap encoded here
   for a TMA one, as Triton's launcher does per launch. Still no heap: the
   maps, slots and parameter list live on the stack (about 10 KiB here,
   18 KiB with tb_launch's arrays). */
static tb_result tb__launch_descs(const tb_loaded_kernel *k, const tb_launch_params *p, const uint32_t *grid,
                                  uint64_t gs, uint64_t ps,
                                  tb_error *err) {
    void *params[TB_MAX_ARGS + 2];
    uint64_t slots[TB_MAX_ARGS];
    unsigned char maps_raw[TB_MAX_TENSORDESCS * 128 + 64];
    /* the driver wants 64-byte alignment */
    unsigned char *maps = maps_raw + ((64 - ((uintptr_t)maps_raw & 63u)) & 63u);
    uint32_t i, j = 0, d = 0, q;
    tb__CUresult cr;
    for (i = 0; i < k->info.arg_count; i++) {
        const tb_tensor_desc *t;
        const tb_tensordesc_meta *m;
        uint32_t r;
        if (k->codes[i] != 'T') {
            tb__convert(k->codes[i], p->args[i], (tb_arg *)&slots[j]);
            params[j] = &slots[j];
            j++;
            continue;
        }
        t = (const tb_tensor_desc *)p->args[i].p;
        m = &k->descs[d];
        r = m->rank;
        if (TB__UNLIKELY(!t || t->rank != r || t->strides[r - 1] != 1 || !t->base))
            return tb__fail(err, tb_err_invalid_argument, k->name, NULL, -1, 0,
                            "argument %u: a tensor descriptor of rank %u with a base and a last stride of 1 is needed"
                            " (got %s)", i, r, !t ? "NULL" : t->rank != r ? "another rank" : !t->base ? "no base" :
                            "a last stride other than 1");
        for (q = 0; q < r; q++)
            if (TB__UNLIKELY(t->shape[q] <= 0 || t->shape[q] > INT32_MAX || t->strides[q] <= 0))
                return tb__fail(err, tb_err_arg_range, k->name, NULL, -1, 0,
                                "argument %u: dimension %u has shape %lld and stride %lld", i, q,
                                (long long)t->shape[q], (long long)t->strides[q]);
        if (m->tma) {
            uint64_t dims[TB_MAX_TENSOR_RANK], strides[TB_MAX_TENSOR_RANK];
            uint32_t box[TB_MAX_TENSOR_RANK], estr[TB_MAX_TENSOR_RANK];
            int64_t shape_last = t->shape[r - 1] * (m->fp4_padded ? 2 : 1);
            void *map = maps + 128u * d;
            /* the driver counts dimensions innermost first, strides in bytes */
            for (q = 0; q < r; q++) {
                dims[r - 1 - q] = (uint64_t)(q == r - 1 ? shape_last : t->shape[q]);
                box[r - 1 - q] = m->block[q];
                estr[q] = 1;
            }
            for (q = 0; q + 1 < r; q++) strides[r - 2 - q] = (uint64_t)t->strides[q] * m->elem_size;
            strides[r - 1] = dims[r - 1] * (r == 1 ? m->elem_size : strides[r - 2]);
            cr = tb__drv.cuTensorMapEncodeTiled(map, tb__tma_dtype(m->elem_type), r, (void *)(uintptr_t)t->base, dims,
                                                strides, box, estr, 0 /* no interleave */, (int)m->swizzle,
                                                2 /* L2 promotion 128B */, t->padding_nan ? 1 : 0);
            if (TB__UNLIKELY(cr != 0))
                return tb__cufail(err, cr, tb_err_cuda, k->name, "cuTensorMapEncodeTiled",
                                  "argument %u: rank %u, element size %u (base, shape and strides must suit TMA: "
                                  "16-byte aligned, strides multiples of 16 bytes)", i, r, m->elem_size);
            params[j++] = map;
            for (q = 0; q < r; q++) {
                int32_t v = (int32_t)(q == r - 1 ? shape_last : t->shape[q]);
                memcpy(&slots[j], &v, 4);
                params[j] = &slots[j], j++;
            }
            for (q = 0; q < r; q++) slots[j] = (uint64_t)t->strides[q], params[j] = &slots[j], j++;
        } else {
            /* the base, shape and strides as i64, padding, shape as i32,
               strides as i64 */
            slots[j] = (uint64_t)(uintptr_t)t->base, params[j] = &slots[j], j++;
            for (q = 0; q < r; q++) slots[j] = (uint64_t)t->shape[q], params[j] = &slots[j], j++;
            for (q = 0; q < r; q++) slots[j] = (uint64_t)t->strides[q], params[j] = &slots[j], j++;
            slots[j] = t->padding_nan ? 1u : 0u, params[j] = &slots[j], j++;
            for (q = 0; q < r; q++) {
                int32_t v = (int32_t)t->shape[q];
                memcpy(&slots[j], &v, 4);
                params[j] = &slots[j], j++;
            }
            for (q = 0; q < r; q++) slots[j] = (uint64_t)t->strides[q], params[j] = &slots[j], j++;
        }
        d++;
    }
    if (k->global_present) params[j++] = &gs;
    if (k->profile_present) params[j++] = &ps;
    cr = tb__launch_now(k, grid[0], grid[1], grid[2], p->stream, params);
    if (TB__UNLIKELY(cr != 0))
        return tb__cufail(err, cr, tb_err_cuda, k->name, k->use_ex ? "cuLaunchKernelEx" : "cuLaunchKernel", "%s", "");
    return tb_ok;
}

/* TB_LAUNCH_GRID_AUTO in a launch: the loaded config's plan over the
   arguments, into grid. */
static TB__HOT tb_result tb__rule_grid(const tb_loaded_kernel *k, const tb_launch_params *p, uint32_t *grid,
                                       tb_error *err) {
    return tb__grid_plan_eval(&k->grid, k->codes, k->name, p->args, p->grid_args, p->grid_arg_count, grid, err);
}

/* TB_LAUNCH_GRID_AUTO: the loaded config's rule over the arguments. */
static tb_result tb__auto_grid(const tb_loaded_kernel *k, const tb_launch_params *p, tb_launch_params *q,
                               tb_error *err) {
    *q = *p;
    q->flags &= ~TB_LAUNCH_GRID_AUTO;
    return tb__rule_grid(k, p, q->grid, err);
}

/* The parameter list of a kernel without tensor descriptors: pointers to
   the argument slots, converted where the width or type needs it, then the
   scratch pointers; *gs and *ps hold those. */
static TB__HOT void tb__plain_params(const tb_loaded_kernel *k, const tb_launch_params *p, void **params, tb_arg *conv,
                             uint64_t *gs, uint64_t *ps) {
    uint32_t i, n = k->arg_count;
    for (i = 0; i < n; i++) params[i] = (void *)(uintptr_t)&p->args[i];
    for (i = 0; i < k->conv_count; i++) {
        uint32_t at = k->conv[i] & 0xFFFFu;
        tb__convert((char)(k->conv[i] >> 16), p->args[at], &conv[i]);
        params[at] = &conv[i];
    }
    if (k->global_present) params[n++] = gs;
    if (k->profile_present) params[n++] = ps;
}

TBDEF TB__HOT tb_result tb_launch(const tb_loaded_kernel *k, const tb_launch_params *p, tb_error *err) {
    void *params[TB_MAX_ARGS + 2];
    tb_arg conv[TB_MAX_ARGS];
    uint64_t gs, ps;
    uint32_t n, auto_grid[3];
    const uint32_t *grid;
    tb__CUresult cr;
    tb_result r;
    if (TB__UNLIKELY(!k || !p))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "kernel or params is NULL");
    n = k->arg_count;
    if (TB__UNLIKELY(p->arg_count != n || (n && !p->args)))
        return tb__fail(err, tb_err_arg_mismatch, k->name, NULL, -1, 0, "%u arguments given, the kernel takes %u (%s)",
                        p->arg_count, n, k->codes);
    grid = p->grid;
    if (p->flags & TB_LAUNCH_GRID_AUTO) {
        if ((r = tb__rule_grid(k, p, auto_grid, err)) != tb_ok) return r;
        grid = auto_grid;
    }
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return tb_ok;
    if (TB__UNLIKELY(p->flags & TB_LAUNCH_CHECKED) && (r = tb__check_args(k, p, err)) != tb_ok) return r;
    if (k->use_ex && (r = tb__check_cluster_grid(k, grid[0], grid[1], grid[2], err)) != tb_ok) return r;
    gs = (uint64_t)(uintptr_t)p->global_scratch;
    ps = (uint64_t)(uintptr_t)p->profile_scratch;
    if (TB__UNLIKELY((k->global_size && !gs) || (k->profile_size && !ps)))
        return tb__fail(err, tb_err_scratch, k->name, NULL, -1, 0,
                        "the kernel needs scratch memory (global %llu, profile %llu bytes): pass device buffers",
                        (unsigned long long)k->global_size, (unsigned long long)k->profile_size);
    if (TB__UNLIKELY(k->desc_count)) return tb__launch_descs(k, p, grid, gs, ps, err); /* builds its own list */
    tb__plain_params(k, p, params, conv, &gs, &ps);
    cr = tb__launch_now(k, grid[0], grid[1], grid[2], p->stream, params);
    if (TB__UNLIKELY(cr != 0))
        return tb__cufail(err, cr, tb_err_cuda, k->name, k->use_ex ? "cuLaunchKernelEx" : "cuLaunchKernel", "%s", "");
    return tb_ok;
}

TBDEF tb_result tb_launch_raw(const tb_loaded_kernel *k, uint32_t gx, uint32_t gy, uint32_t gz, void *stream,
                              void **params, tb_error *err) {
    tb__CUresult cr;
    if (TB__UNLIKELY(!k || (!params && k->info.param_count)))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "kernel or params is NULL");
    if (gx == 0 || gy == 0 || gz == 0) return tb_ok;
    if (k->use_ex) {
        tb_result r = tb__check_cluster_grid(k, gx, gy, gz, err);
        if (r != tb_ok) return r;
    }
    cr = tb__launch_now(k, gx, gy, gz, stream, params);
    if (TB__UNLIKELY(cr != 0))
        return tb__cufail(err, cr, tb_err_cuda, k->name, k->use_ex ? "cuLaunchKernelEx" : "cuLaunchKernel", "%s", "");
    return tb_ok;
}

/* ---------------------------------------------------------------------- */
/* >>table  Kernel table: launch by name or cache key */
/* Every record indexed once at creation; loaded kernels filled in lazily. */
/* ---------------------------------------------------------------------- */

/* The Autotune section's state, which the table holds and frees (its
   struct, create and free are in >>autotune). */
typedef struct tb__autotune tb__autotune;
static tb__autotune *tb__autotune_create(const tb__ctx *c, const tb_bundle *b);
static void tb__autotune_free(tb__autotune *a, const tb__ctx *c);
static void tb__table_choices_replaced(tb_kernel_table *t);
/* Every record of a bundle, indexed once at creation so that a lookup by
   cache key or by name costs one hash and one string compare, whatever the
   bundle's size. Records that share a kernel name are the specializations
   Triton compiled for one kernel (a pointer 16-byte aligned or not, an
   integer divisible by 16 or not); they are chained most specialized
   first, so that choosing for given arguments takes the first whose
   assumptions hold. Loaded kernels fill in lazily under a mutex and are
   read without it (acquire/release), so lookups and launches are
   thread-safe and lock-free once loaded.
   A launch by name touches few cache lines, since the driver's own launch
   evicts much of what the last one read: an index slot holds the string
   and its hash (no record read to compare), and a record's spec holds all
   that choosing a specialization and its slot needs. */
typedef struct tb__spec {
    uint32_t next;              /* the next record of this name, less specialized; UINT32_MAX: none */
    uint32_t arg_count;         /* of config 0 */
    uint32_t rank;              /* chain order: 1 + the assumptions, or 0 when arg_divisibility is "" (unknown) */
    uint32_t config_count;      /* the record's */
    uint32_t first;             /* its configs' kernels: slots[first .. first + config_count) */
    uint64_t div_mask;          /* the arguments under 64 assumed divisible by 16 (tt.divisibility), a bit each */
    uint32_t div_at;            /* those from 64 up: div_args[div_at .. div_at + div_big), ascending */
    uint32_t div_big;
} tb__spec;

typedef struct tb__slot {
    const char *str;            /* the record's cache key or kernel name */
    uint32_t rec;               /* UINT32_MAX: empty */
    uint32_t hash;              /* tb__str_hash(str) */
} tb__slot;

struct tb_kernel_table {
    /* what a launch reads first, together */
    uint32_t index_mask;        /* the two indexes hold index_mask + 1 slots */
    uint32_t slot_count;
    uint64_t serial;            /* unique to this table in the process: the launch memo's check */
    uint32_t memo_epoch;        /* bumped (release) when kept choices are replaced: memos made before miss */
    tb__slot *by_key;           /* record, by cache key */
    tb__slot *by_name;          /* the most specialized record of a name */
    tb__spec *spec;             /* per record */
    tb_loaded_kernel **slots;   /* per config */
    tb__autotune *at;           /* the choices and the benchmark's resources: the Autotune section's (>>autotune) */
    uint16_t *div_args;         /* the assumed arguments from 64 up, of every record */
    const tb_bundle *bundle;
    tb__ctx ctx;
    tb_options options;
    tb_load_options load;
    pthread_mutex_t mu;
};

TBDEF void tb_kernel_table_free(tb_kernel_table *t) {
    uint32_t i;
    tb__ctx c;
    if (!t) return;
    c = t->ctx;
    tb__autotune_free(t->at, &c); /* first: its buffers live in the context a kernel may hold */
    for (i = 0; t->slots && i < t->slot_count; i++) tb_unload(t->slots[i]);
    tb__free(&c, t->slots);
    tb__free(&c, t->spec);
    tb__free(&c, t->div_args);
    tb__free(&c, t->by_key);
    pthread_mutex_destroy(&t->mu);
    tb__free(&c, t);
}

static tb_result tb__table_load(tb_kernel_table *t, uint32_t rec, uint32_t cfg, tb_error *err) {
    const tb_launch_record *r = &t->bundle->records[rec];
    uint32_t s = t->spec[rec].first + cfg;
    tb_loaded_kernel *k = NULL;
    tb_result res = tb_ok;
    pthread_mutex_lock(&t->mu);
    if (!t->slots[s]) {
        res =
            tb__load_config(t->bundle, &r->configs[cfg], &t->options, &t->load, 1, &k, err); /* the bundle's: checked */
        if (res == tb_ok) TB__STORE_REL(t->slots[s], k);
    }
    pthread_mutex_unlock(&t->mu);
    return res;
}

/* The slot of the cache-key index (by_name 0) or the name index where
   str, of hash h, is, or the empty slot where it would go. */
static TB__HOT uint32_t tb__index_find(const tb_kernel_table *t, int by_name, const char *str, uint32_t h) {
    const tb__slot *ix = by_name ? t->by_name : t->by_key;
    uint32_t at = h & t->index_mask;
    while (ix[at].rec != UINT32_MAX && (ix[at].hash != h || strcmp(ix[at].str, str) != 0))
        at = (at + 1) & t->index_mask;
    return at;
}

static tb_result tb__table_index(tb_kernel_table *t, tb_error *err) {
    const tb_bundle *b = t->bundle;
    uint32_t n = b->record_count, cap = 16, i, j, ndiv = 0, slot = 0;
    for (i = 0; i < n; i++) { /* the list holds arguments from 64 up */
        size_t len = strlen(b->records[i].configs[0].arg_divisibility);
        ndiv += len > 64 ? (uint32_t)(len - 64) : 0;
    }
    while (cap < 2u * n) cap *= 2;
    t->index_mask = cap - 1;
    t->spec = (tb__spec *)tb__alloc(&t->ctx, (size_t)(n ? n : 1) * sizeof *t->spec);
    t->div_args = (uint16_t *)tb__alloc(&t->ctx, (size_t)(ndiv ? ndiv : 1) * sizeof *t->div_args);
    t->by_key = (tb__slot *)tb__alloc(&t->ctx, (size_t)cap * 2 * sizeof *t->by_key);
    if (!t->spec || !t->div_args || !t->by_key) return TB__OOM(err);
    t->by_name = t->by_key + cap;
    for (i = 0; i < 2 * cap; i++) t->by_key[i].str = NULL, t->by_key[i].rec = UINT32_MAX, t->by_key[i].hash = 0;
    for (i = 0, ndiv = 0; i < n; i++) {
        const tb_launch_config *c = &b->records[i].configs[0];
        tb__spec *sp = &t->spec[i];
        uint32_t at, h, *head, prev = UINT32_MAX, cur, assumed;
        sp->arg_count = (uint32_t)strlen(c->arg_types);
        sp->config_count = b->records[i].config_count;
        sp->first = slot;
        slot += sp->config_count;
        sp->div_at = ndiv;
        sp->div_big = 0;
        sp->div_mask = 0;
        for (j = 0, assumed = 0; c->arg_divisibility[j]; j++)
            if (c->arg_divisibility[j] == '1' && c->arg_types[j] != 'T') {
                assumed++;
                if (j < 64) sp->div_mask |= (uint64_t)1 << j;
                else t->div_args[ndiv + sp->div_big++] = (uint16_t)j;
            }
        ndiv += sp->div_big;
        sp->rank = c->arg_divisibility[0] ? assumed + 1 : 0;
        h = tb__str_hash(b->records[i].cache_key);
        at = tb__index_find(t, 0, b->records[i].cache_key, h);
        if (t->by_key[at].rec == UINT32_MAX) /* keys are unique in a bundle read or written */
            t->by_key[at].str = b->records[i].cache_key, t->by_key[at].rec = i, t->by_key[at].hash = h;
        /* into its name's chain, most assumptions first (stable: ties keep bundle order) */
        h = tb__str_hash(b->records[i].kernel_name);
        at = tb__index_find(t, 1, b->records[i].kernel_name, h);
        t->by_name[at].str = b->records[i].kernel_name, t->by_name[at].hash = h;
        head = &t->by_name[at].rec;
        for (cur = *head; cur != UINT32_MAX && t->spec[cur].rank >= sp->rank; cur = t->spec[cur].next) prev = cur;
        sp->next = cur;
        if (prev == UINT32_MAX) *head = i;
        else t->spec[prev].next = i;
    }
    return tb_ok;
}

TBDEF tb_result tb_kernel_table_create(const tb_bundle *b, const tb_options *options, const tb_load_options *load,
                                       unsigned flags, tb_kernel_table **out, tb_error *err) {
    tb__ctx c = tb__ctx_from(options);
    tb_kernel_table *t;
    uint32_t i, j, n = 0;
    tb_result r;
    if (!out || !b) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "bundle or out is NULL");
    *out = NULL;
    for (i = 0; i < b->record_count; i++) n += b->records[i].config_count;
    t = (tb_kernel_table *)tb__alloc(&c, sizeof *t);
    if (!t) return TB__OOM(err);
    memset(t, 0, sizeof *t);
    t->ctx = c;
    {
        /* a lock, not a 64-bit atomic: some 32-bit targets need libatomic for that */
        static uint64_t serials;
        static pthread_mutex_t serials_mu = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&serials_mu);
        t->serial = ++serials;
        pthread_mutex_unlock(&serials_mu);
    }
    if (options) t->options = *options;
    if (load) t->load = *load;
    t->bundle = b;
    pthread_mutex_init(&t->mu, NULL);
    t->at = tb__autotune_create(&c, b);
    t->slots = (tb_loaded_kernel **)tb__alloc(&c, (size_t)(n ? n : 1) * sizeof(tb_loaded_kernel *));
    if (t->slots) memset(t->slots, 0, (size_t)(n ? n : 1) * sizeof(tb_loaded_kernel *));
    t->slot_count = n;
    if (!t->slots || !t->at) {
        tb_kernel_table_free(t);
        return TB__OOM(err);
    }
    if ((r = tb__table_index(t, err)) != tb_ok) {
        tb_kernel_table_free(t);
        return r;
    }
    if (!(flags & TB_TABLE_LAZY))
        for (i = 0; i < b->record_count; i++)
            for (j = 0; j < b->records[i].config_count; j++)
                if ((r = tb__table_load(t, i, j, err)) != tb_ok) {
                    tb_kernel_table_free(t);
                    return r;
                }
    *out = t;
    return tb_ok;
}

/* The first argument below 64 that a divisibility mask assumes and args
   break, or -1. */
static int tb__mask_breaks(uint64_t mask, const tb_arg *args) {
    for (; mask; mask &= mask - 1) /* ascending, as the list */
        if (args[tb__ctz64(mask)].u & 15u) return (int)tb__ctz64(mask);
    return -1;
}

/* The first argument of record rec whose assumption args break, or -1. */
static TB__HOT int tb__spec_breaks(const tb_kernel_table *t, uint32_t rec, const tb_arg *args) {
    const tb__spec *sp = &t->spec[rec];
    uint32_t i;
    int bad = tb__mask_breaks(sp->div_mask, args);
    if (bad >= 0) return bad;
    for (i = 0; i < sp->div_big; i++)
        if (args[t->div_args[sp->div_at + i]].u & 15u) return t->div_args[sp->div_at + i];
    return -1;
}

/* tb_kernel_table_find; *unique says that the table's contents alone chose
   the record (a cache key, or a name of one record), which the launch
   memo needs. */
static TB__HOT tb_result tb__table_find(const tb_kernel_table *t, const char *key, uint32_t cfg, const tb_arg *args,
                                        uint32_t arg_count, uint32_t *record, int *unique, tb_error *err) {
    uint32_t rec, first, best = UINT32_MAX, tie = UINT32_MAX, general = UINT32_MAX, counted = 0, h;
    int bad;
    *unique = 0;
    if (!t || !key || !record)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "table, key or record is NULL");
    if (args == NULL && arg_count) return tb__fail(err, tb_err_invalid_argument, key, NULL, -1, 0, "args is NULL");
    h = tb__str_hash(key); /* one hash for both indexes */
    rec = t->by_key[tb__index_find(t, 0, key, h)].rec;
    if (rec != UINT32_MAX) {
        *unique = 1;
        /* a cache key is one record: the arguments must fit it */
        if (args && t->spec[rec].arg_count != arg_count)
            return tb__fail(err, tb_err_arg_mismatch, key, NULL, -1, 0, "%u arguments given, the record takes %u",
                            arg_count, t->spec[rec].arg_count);
        if (args && (bad = tb__spec_breaks(t, rec, args)) >= 0)
            return tb__fail(err, tb_err_misaligned, key, NULL, -1, 0,
                            "argument %d (0x%llx) is not divisible by 16 (or 16-byte aligned), which this record's "
                            "cubin assumes", bad, (unsigned long long)args[bad].u);
    } else {
        /* by name: the specializations, most assumptions first, unknown
           ones ("" divisibility) last. The first that fits is the most
           specialized; another of the same assumptions that fits too is a
           different compilation (another dtype, block size, num_warps) that
           arguments cannot tell apart: ambiguous, not a guess. */
        rec = t->by_name[tb__index_find(t, 1, key, h)].rec;
        if (rec == UINT32_MAX)
            return tb__fail(err, tb_err_not_found, key, NULL, -1, 0,
                            "no launch record with this cache key or kernel name");
        if (t->spec[rec].next == UINT32_MAX && cfg < t->spec[rec].config_count &&
            (!args || (t->spec[rec].arg_count == arg_count && tb__spec_breaks(t, rec, args) < 0))) {
            *record = rec; /* the name's only record, and it fits: what the search below would choose */
            *unique = 1;
            return tb_ok;
        }
        for (first = rec; rec != UINT32_MAX; rec = t->spec[rec].next) /* how many could serve */
            counted += cfg < t->spec[rec].config_count && (!args || t->spec[rec].arg_count == arg_count);
        for (rec = first; rec != UINT32_MAX; rec = t->spec[rec].next) {
            const tb__spec *sp = &t->spec[rec];
            if (cfg >= sp->config_count || (args && sp->arg_count != arg_count)) continue;
            if (!sp->rank && counted > 1) continue; /* unknown assumptions: only a record that stands alone */
            if (!args) {
                /* tb_kernel_table_get: the fewest assumptions, the chain's last */
                tie = general != UINT32_MAX && t->spec[general].rank == sp->rank ? rec : UINT32_MAX;
                general = rec;
                continue;
            }
            general = rec;
            if (tb__spec_breaks(t, rec, args) >= 0) continue;
            if (best == UINT32_MAX) best = rec;
            else if (tie == UINT32_MAX && sp->rank == t->spec[best].rank) tie = rec;
        }
        if (!args) best = general;
        if (best != UINT32_MAX && tie != UINT32_MAX)
            return tb__fail(err, tb_err_invalid_argument, key, NULL, -1, 0,
                            "records \"%.60s\" and \"%.60s\" both fit, with the same assumptions: different "
                            "compilations of this name; launch one by its cache key",
                            t->bundle->records[best].cache_key, t->bundle->records[tie].cache_key);
        if (best == UINT32_MAX) {
            if (!args && counted)
                return tb__fail(err, tb_err_invalid_argument, key, NULL, -1, 0,
                                "%u records of this name have unknown assumptions (no arg_divisibility): get one by "
                                "its cache key", counted);
            if (!args)
                return tb__fail(err, tb_err_invalid_argument, key, NULL, -1, 0,
                                "no record of this name has a config %u", cfg);
            if (!counted)
                return tb__fail(err, tb_err_arg_mismatch, key, NULL, -1, 0,
                                "no specialization of this name takes %u arguments (with a config %u)", arg_count, cfg);
            /* even the least specialized assumes something these arguments break: name it */
            if (general != UINT32_MAX && (bad = tb__spec_breaks(t, general, args)) >= 0)
                return tb__fail(err, tb_err_misaligned, key, NULL, -1, 0,
                                "no specialization fits: argument %d (0x%llx) is not divisible by 16 (or 16-byte "
                                "aligned), which each of the %u compiled for this name assumes",
                                bad, (unsigned long long)args[bad].u, counted);
            return tb__fail(err, tb_err_invalid_argument, key, NULL, -1, 0,
                            "%u records of this name take %u arguments and their assumptions are unknown (no "
                            "arg_divisibility): launch one by its cache key", counted, arg_count);
        }
        rec = best;
    }
    if (cfg >= t->spec[rec].config_count)
        return tb__fail(err, tb_err_invalid_argument, key, NULL, -1, 0, "config %u asked, the record has %u", cfg,
                        t->spec[rec].config_count);
    *record = rec;
    return tb_ok;
}

TBDEF tb_result tb_kernel_table_find(const tb_kernel_table *t, const char *key, uint32_t cfg, const tb_arg *args,
                                     uint32_t arg_count, uint32_t *record, tb_error *err) {
    int unique;
    return tb__table_find(t, key, cfg, args, arg_count, record, &unique, err);
}

static TB__HOT tb_result tb__table_kernel(tb_kernel_table *t, uint32_t rec, uint32_t cfg, const tb_loaded_kernel **out,
                                  tb_error *err) {
    /* (without atomics no read outside the lock: the load takes it) */
    tb_loaded_kernel *k = TB__ATOMICS ? TB__LOAD_ACQ(t->slots[t->spec[rec].first + cfg]) : NULL;
    tb_result r;
    if (TB__UNLIKELY(!k)) {
        if ((r = tb__table_load(t, rec, cfg, err)) != tb_ok) return r;
        k = TB__LOAD_ACQ(t->slots[t->spec[rec].first + cfg]);
    }
    *out = k;
    return tb_ok;
}

TBDEF tb_result tb_kernel_table_get(tb_kernel_table *t, const char *key, uint32_t cfg, const tb_loaded_kernel **out,
                                    tb_error *err) {
    uint32_t rec;
    tb_result r;
    if (!t || !key || !out)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "table, key or out is NULL");
    *out = NULL;
    if ((r = tb_kernel_table_find(t, key, cfg, NULL, 0, &rec, err)) != tb_ok) return r;
    return tb__table_kernel(t, rec, cfg, out, err);
}

static tb_result tb__tuned_config(tb_kernel_table *t, uint32_t rec, const tb_arg *args, uint32_t *cfg, double *ms,
                                  const char *what, tb_error *err);

TBDEF TB__HOT tb_result tb_kernel_table_select(tb_kernel_table *t, const char *key, uint32_t cfg, const tb_arg *args,
                                       uint32_t arg_count, const tb_loaded_kernel **out, tb_error *err) {
    uint32_t rec;
    int unique;
    tb_result r;
    if (!t || !key || !out)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "table, key or out is NULL");
    *out = NULL;
    if (cfg == TB_CONFIG_AUTOTUNE) { /* the choice made already: select does not benchmark */
        if ((r = tb_kernel_table_find(t, key, 0, args, arg_count, &rec, err)) != tb_ok ||
            (r = tb__tuned_config(t, rec, args, &cfg, NULL, key, err)) != tb_ok)
            return r;
        return tb__table_kernel(t, rec, cfg, out, err);
    }
    if ((r = tb__table_find(t, key, cfg, args, arg_count, &rec, &unique, err)) != tb_ok) return r;
    return tb__table_kernel(t, rec, cfg, out, err);
}

static tb_result tb__autotune_config(tb_kernel_table *t, uint32_t rec, const tb_launch_params *p, uint32_t *cfg,
                                     tb_error *err);

/* The launch memo: per thread, the last launches with TB_CONFIG_AUTOTUNE
   by name or key, so that a steady state that launches the same kernels
   by the same strings reads an entry and the first lines of the table and
   its choices, not the indexes, the record, the key plan and the choice
   map (a driver launch between two of ours evicts those). An entry stands
   for a resolution the table's contents alone decide (a cache key, or a
   name of one record), for arguments that keep the record's assumptions
   and the same size key; it holds while its table is the same one (the
   serial: a table made anew at a freed one's address misses) and no
   choice was replaced since (the autotune epoch). The caller's string is
   compared by pointer and bytes. GCC and Clang (__thread) only. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(TB_NO_LAUNCH_MEMO)
#define TB__MEMO 1
static uint32_t tb__memo_epoch(const tb_kernel_table *t) { return TB__LOAD_ACQ(t->memo_epoch); }
/* Autotune tells the table (under its lock) when it replaced kept choices. */
static void tb__table_choices_replaced(tb_kernel_table *t) {
    TB__STORE_REL(t->memo_epoch, t->memo_epoch + 1);
}
#define TB__MEMO_WAYS 8u
#define TB__MEMO_KEY 4u
#define TB__MEMO_NAME 64u /* strings up to 63 bytes */
typedef struct __attribute__((aligned(64))) tb__memo {
    /* a cache line of what every hit compares, then the size key and the
       string (a string under 32 bytes: two lines a hit) */
    const tb_kernel_table *t;
    const char *key;
    uint64_t serial;
    const tb_loaded_kernel *k;
    uint64_t div_mask;          /* the record's assumptions (none past argument 63) */
    uint32_t epoch;
    uint16_t arg_count, nkey;   /* arg_count: under TB_MAX_ARGS */
    uint16_t karg[TB__MEMO_KEY];
    char kcode[TB__MEMO_KEY];
    int64_t kval[TB__MEMO_KEY];
    char name[TB__MEMO_NAME];
} tb__memo;
static __thread tb__memo tb__memos[TB__MEMO_WAYS];

static int tb__autotune_memo_key(const tb__autotune *a, uint32_t rec, const tb_arg *args, uint32_t max, uint32_t *n,
                                 uint16_t *arg, char *code, int64_t *val);
static int64_t tb__key_value(char code, tb_arg a);
static tb__memo *tb__memo_way(const char *key) { return &tb__memos[((uintptr_t)key >> 3) & (TB__MEMO_WAYS - 1)]; }

static TB__HOT const tb_loaded_kernel *tb__memo_find(const tb_kernel_table *t, const char *key,
                                                     const tb_launch_params *p) {
    const tb__memo *m = tb__memo_way(key);
    uint32_t i;
    if (m->t != t || m->key != key || m->serial != t->serial || m->arg_count != p->arg_count || !p->args ||
        m->epoch != tb__memo_epoch(t) || strcmp(key, m->name) != 0 || tb__mask_breaks(m->div_mask, p->args) >= 0)
        return NULL;
    for (i = 0; i < m->nkey; i++)
        if (tb__key_value(m->kcode[i], p->args[m->karg[i]]) != m->kval[i]) return NULL;
    return m->k;
}

/* After a launch resolved the long way: keep it, where it may be kept. */
static void tb__memo_keep(const tb_kernel_table *t, const char *key, const tb_launch_params *p, uint32_t rec,
                          const tb_loaded_kernel *k, uint32_t epoch) {
    tb__memo *m = tb__memo_way(key);
    size_t len = strlen(key);
    uint32_t nkey;
    m->t = NULL;
    if (!p->args || len >= TB__MEMO_NAME || t->spec[rec].div_big || p->arg_count > TB_MAX_ARGS ||
        !tb__autotune_memo_key(t->at, rec, p->args, TB__MEMO_KEY, &nkey, m->karg, m->kcode, m->kval))
        return;
    memcpy(m->name, key, len + 1);
    m->key = key, m->serial = t->serial, m->k = k, m->div_mask = t->spec[rec].div_mask;
    m->epoch = epoch, m->arg_count = (uint16_t)p->arg_count, m->nkey = (uint16_t)nkey;
    m->t = t;
}
#else
#define TB__MEMO 0
static void tb__table_choices_replaced(tb_kernel_table *t) { (void)t; }
#endif

TBDEF TB__HOT tb_result tb_kernel_table_launch(tb_kernel_table *t, const char *key, uint32_t cfg,
                                               const tb_launch_params *p, tb_error *err) {
    const tb_loaded_kernel *k;
    tb_result r;
    if (TB__UNLIKELY(!p)) return tb__fail(err, tb_err_invalid_argument, key, NULL, -1, 0, "params is NULL");
    if (cfg == TB_CONFIG_AUTOTUNE) {
        uint32_t rec, epoch = 0;
        int unique;
        if (!t || !key) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "table or key is NULL");
#if TB__MEMO
        if ((k = tb__memo_find(t, key, p)) != NULL) return tb_launch(k, p, err);
        epoch = tb__memo_epoch(t); /* before the choice is read: a later replacement misses */
#endif
        if ((r = tb__table_find(t, key, 0, p->args, p->arg_count, &rec, &unique, err)) != tb_ok ||
            (r = tb__autotune_config(t, rec, p, &cfg, err)) != tb_ok ||
            (r = tb__table_kernel(t, rec, cfg, &k, err)) != tb_ok)
            return r;
#if TB__MEMO
        if (unique) tb__memo_keep(t, key, p, rec, k, epoch);
#else
        (void)unique, (void)epoch;
#endif
        return tb_launch(k, p, err);
    }
    if ((r = tb_kernel_table_select(t, key, cfg, p->args, p->arg_count, &k, err)) != tb_ok) return r;
    return tb_launch(k, p, err);
}

/* ---------------------------------------------------------------------- */
/* >>autotune  Autotune: choices per record and size key */
/* The choices, the benchmark, and the choices file (its text: >>parsers). */
/* ---------------------------------------------------------------------- */
/* One choice per (record, size key), in an open-addressing map that
   writers change under at->mu and publish whole: a launch of a tuned key
   costs one hash and no lock. A key being tuned is marked so, and other
   threads wait on at->cv instead of benchmarking it again; benchmarks of
   different keys run one at a time (bench_mu), since they share the GPU,
   the events and the flush buffer. The benchmark follows Triton's do_bench; the
   arguments the kernel writes run on copies, so the caller's data sees
   only the launch that follows. */
#define TB__CHOICE_EMPTY 0u
#define TB__CHOICE_TUNING 1u
#define TB__CHOICE_DONE 2u
#define TB__MAX_KEY TB_MAX_ARGS

typedef struct tb__choice {
    uint32_t rec, nkey, cfg, state;
    int64_t *key;
    double ms;
} tb__choice;
typedef struct tb__cmap {
    uint32_t cap;
    tb__choice *slots;
    struct tb__cmap *older;     /* a reader may still probe it */
} tb__cmap;

/* What a launch of record rec reads to find its choice, computed once from
   the record (its call info's key, else every integer argument) so that
   the lookup reads a small entry and its arguments, not the record, its
   config, codes and call info. */
typedef struct tb__keyplan {
    uint32_t configs;           /* the record's config count (1: nothing to choose) */
    uint32_t n;                 /* the size key's length */
    uint32_t at;                /* its arguments and codes: keyargs[at .. at + n), keycodes[at .. at + n) */
} tb__keyplan;

/* A table's autotune state: the choices, under mu, and the benchmark's
   resources, under bench_mu. */
struct tb__autotune {
    tb__keyplan *plans;         /* per record */
    tb__cmap *cmap;             /* published whole (release); older ones kept until free */
    uint16_t *keyargs;          /* the plans' arguments */
    char *keycodes;             /* and their codes: integer ones, or 0 where the key takes the bits */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t bench_mu;   /* one benchmark at a time: they share the GPU, the events and the flush buffer */
    uint32_t choice_count;
    tb_autotune_options options; /* resolved by tb__autotune_defaults */
    uint64_t flush;             /* the L2 flush buffer, flush_bytes */
    size_t flush_bytes;
    tb__CUctx bench_ctx;        /* the context the flush buffer and the events were made in */
    void **events;
    uint32_t event_count;
};

static tb_autotune_options tb__autotune_defaults(const tb_autotune_options *o);

/* Record r's key arguments and their codes (0 where the key takes the
   bits) into arg and code, when not NULL: how many. */
static uint32_t tb__key_args(const tb_launch_record *r, uint16_t *arg, char *code) {
    const char *codes = r->configs[0].arg_types;
    uint32_t n = 0, i;
    if (r->call && r->call->key_count) {
        for (; n < r->call->key_count; n++) {
            uint32_t a = r->call->key[n];
            if (arg) arg[n] = (uint16_t)a, code[n] = tb__grid_int_code(codes[a]) ? codes[a] : 0;
        }
        return n;
    }
    for (i = 0; codes[i]; i++)
        if (tb__grid_int_code(codes[i])) {
            if (arg) arg[n] = (uint16_t)i, code[n] = codes[i];
            n++;
        }
    return n;
}

static void tb__autotune_free(tb__autotune *a, const tb__ctx *c);
static tb__autotune *tb__autotune_create(const tb__ctx *c, const tb_bundle *b) {
    tb__autotune *a = (tb__autotune *)tb__alloc(c, sizeof *a);
    size_t more = 0;
    uint32_t i;
    if (!a) return NULL;
    memset(a, 0, sizeof *a);
    a->options = tb__autotune_defaults(NULL);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    pthread_mutex_init(&a->bench_mu, NULL);
    for (i = 0; i < b->record_count; i++) more += tb__key_args(&b->records[i], NULL, NULL);
    a->plans = (tb__keyplan *)tb__alloc(c, (size_t)(b->record_count ? b->record_count : 1) * sizeof *a->plans);
    a->keyargs = (uint16_t *)tb__alloc(c, (more ? more : 1) * sizeof *a->keyargs);
    a->keycodes = (char *)tb__alloc(c, more ? more : 1);
    if (!a->plans || !a->keyargs || !a->keycodes) {
        tb__autotune_free(a, c);
        return NULL;
    }
    for (i = 0, more = 0; i < b->record_count; i++) { /* counts under TB_MAX_ARGS each (the bundle's check) */
        tb__keyplan *pl = &a->plans[i];
        pl->configs = b->records[i].config_count;
        pl->at = (uint32_t)more;
        pl->n = tb__key_args(&b->records[i], a->keyargs + more, a->keycodes + more);
        more += pl->n;
    }
    return a;
}

/* The benchmark's flush buffer and events, freed in the context they were
   made in (pushed for the calls). The event array stays allocated. */
static void tb__release_bench(tb__autotune *a) {
    uint32_t i;
    if (a->flush || a->events) {
        tb__CUctx old;
        int pushed = a->bench_ctx && tb__drv.cuCtxPushCurrent(a->bench_ctx) == 0;
        for (i = 0; a->events && i < a->event_count; i++)
            if (a->events[i]) tb__drv.cuEventDestroy(a->events[i]), a->events[i] = NULL;
        if (a->flush) tb__drv.cuMemFree(a->flush);
        if (pushed) tb__drv.cuCtxPopCurrent(&old);
    }
    a->flush = 0, a->flush_bytes = 0, a->event_count = 0;
}

static void tb__autotune_free(tb__autotune *a, const tb__ctx *c) {
    uint32_t i;
    if (!a) return;
    tb__release_bench(a); /* before the table's kernels (and a retained primary context) go */
    if (a->cmap) {
        tb__cmap *m = a->cmap, *o;
        for (i = 0; i < m->cap; i++) /* keys are shared with the older maps: freed once */
            if (m->slots[i].state != 0) tb__free(c, m->slots[i].key);
        for (; m; m = o) {
            o = m->older;
            tb__free(c, m->slots);
            tb__free(c, m);
        }
    }
    tb__free(c, a->events);
    tb__free(c, a->plans);
    tb__free(c, a->keyargs);
    tb__free(c, a->keycodes);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->bench_mu);
    tb__free(c, a);
}

typedef struct tb__choice_trial {
    uint32_t reset_count;
    uint64_t reset_ptr[TB_MAX_ARGS];
    size_t reset_bytes[TB_MAX_ARGS];
} tb__choice_trial;

static TB__HOT uint64_t tb__choice_hash(uint32_t rec, const int64_t *key, uint32_t n) {
    uint64_t h = 1469598103934665603ULL ^ rec;
    uint32_t i;
    for (i = 0; i < n; i++) h = (h ^ (uint64_t)key[i]) * 1099511628211ULL, h ^= h >> 29;
    return h;
}

/* One value of a size key: an integer argument as the kernel reads it,
   else (a float, a pointer, a u64 past 2^63; code 0) its bits. */
static TB__HOT int64_t tb__key_value(char code, tb_arg a) {
    int64_t v;
    if (!code || tb__grid_arg(code, a, &v)) v = (int64_t)a.u;
    return v;
}

/* The size key of record rec for these arguments: the values of the
   arguments its call info keys on, or of every integer argument. */

static TB__HOT uint32_t tb__size_key(const tb__autotune *at, uint32_t rec, const tb_arg *args, int64_t *key) {
    const tb__keyplan *pl = &at->plans[rec];
    uint32_t i;
    for (i = 0; i < pl->n; i++) key[i] = tb__key_value(at->keycodes[pl->at + i], args[at->keyargs[pl->at + i]]);
    return pl->n;
}

#define TB__CHOICE_FAILED 3u     /* the tune failed: the next launch tries again */

#if TB__MEMO
/* For the launch memo: record rec's size key for args, its arguments and
   codes, when it has at most max values (0: a longer one). */
static int tb__autotune_memo_key(const tb__autotune *a, uint32_t rec, const tb_arg *args, uint32_t max, uint32_t *n,
                                 uint16_t *arg, char *code, int64_t *val) {
    const tb__keyplan *pl = &a->plans[rec];
    uint32_t i;
    *n = pl->configs == 1 ? 0 : pl->n; /* one config: nothing to choose, no key */
    if (*n > max) return 0;
    for (i = 0; i < *n; i++) {
        arg[i] = a->keyargs[pl->at + i], code[i] = a->keycodes[pl->at + i];
        val[i] = tb__key_value(code[i], args[arg[i]]);
    }
    return 1;
}
#endif

/* The entry of (rec, key) in map m, or NULL; with slot, the empty entry
   where it would go. Safe without at->mu: an entry's fields are written
   before its state is published, and entries never move. */
static TB__HOT tb__choice *tb__cmap_find(tb__cmap *m, uint32_t rec, const int64_t *key, uint32_t n, tb__choice **slot) {
    uint32_t at;
    if (slot) *slot = NULL;
    if (!m) return NULL;
    at = (uint32_t)tb__choice_hash(rec, key, n) & (m->cap - 1);
    for (;; at = (at + 1) & (m->cap - 1)) {
        tb__choice *c = &m->slots[at];
        if (TB__LOAD_ACQ(c->state) == TB__CHOICE_EMPTY) {
            if (slot) *slot = c;
            return NULL;
        }
        if (c->rec == rec && c->nkey == n) {
            uint32_t i = 0;
            while (i < n && c->key[i] == key[i]) i++; /* keys are a few integers: no memcmp call */
            if (i == n) return c;
        }
    }
}

/* Under at->mu: the entry of (rec, key); a new or failed one is made
   TUNING and *fresh set: the caller tunes it. */
static tb__choice *tb__choice_get(tb_kernel_table *t, uint32_t rec, const int64_t *key, uint32_t n, int *fresh) {
    tb__cmap *m = t->at->cmap;
    tb__choice *slot, *c = tb__cmap_find(m, rec, key, n, &slot);
    *fresh = 0;
    if (c) {
        if (c->state == TB__CHOICE_FAILED) TB__STORE_REL(c->state, TB__CHOICE_TUNING), *fresh = 1;
        return c;
    }
    if (!m || 2 * (t->at->choice_count + 1) > m->cap) { /* grow: a copy, published whole */
        tb__cmap *nm = (tb__cmap *)tb__alloc(&t->ctx, sizeof *nm);
        uint32_t i;
        if (!nm) return NULL;
        nm->cap = m ? 2 * m->cap : 64;
        nm->older = m;
        if (!(nm->slots = (tb__choice *)tb__alloc(&t->ctx, (size_t)nm->cap * sizeof *nm->slots))) {
            tb__free(&t->ctx, nm);
            return NULL;
        }
        memset(nm->slots, 0, (size_t)nm->cap * sizeof *nm->slots);
        for (i = 0; m && i < m->cap; i++)
            if (m->slots[i].state != TB__CHOICE_EMPTY) {
                tb__choice *s2;
                tb__cmap_find(nm, m->slots[i].rec, m->slots[i].key, m->slots[i].nkey, &s2);
                *s2 = m->slots[i];
            }
        TB__STORE_REL(t->at->cmap, nm);
        m = nm;
        tb__cmap_find(m, rec, key, n, &slot);
    }
    slot->key = NULL;
    if (n && !(slot->key = (int64_t *)tb__alloc(&t->ctx, (size_t)n * sizeof *key))) return NULL;
    if (n) memcpy(slot->key, key, (size_t)n * sizeof *key);
    slot->rec = rec, slot->nkey = n, slot->cfg = 0, slot->ms = 0;
    TB__STORE_REL(slot->state, TB__CHOICE_TUNING);
    t->at->choice_count++;
    *fresh = 1;
    return slot;
}

/* The one place tb_autotune_options' zeros become defaults, and the
   values are clamped: a repetition count sizes the event array (two a
   repetition), and a time past a minute per config would stall the first
   launch for no better choice. */
static tb_autotune_options tb__autotune_defaults(const tb_autotune_options *o) {
    tb_autotune_options d;
    if (o) d = *o;
    else memset(&d, 0, sizeof d);
    if (!(d.warmup_ms > 0)) d.warmup_ms = 25; /* NaN too */
    if (!(d.rep_ms > 0)) d.rep_ms = 100;
    if (d.warmup_ms > TB_AUTOTUNE_MAX_MS) d.warmup_ms = TB_AUTOTUNE_MAX_MS;
    if (d.rep_ms > TB_AUTOTUNE_MAX_MS) d.rep_ms = TB_AUTOTUNE_MAX_MS;
    if (!d.max_reps) d.max_reps = 1000;
    if (d.max_reps > TB_AUTOTUNE_MAX_REPS) d.max_reps = TB_AUTOTUNE_MAX_REPS;
    if (!d.flush_bytes) d.flush_bytes = (size_t)256 << 20;
    else if (d.flush_bytes == (size_t)-1) d.flush_bytes = 0;
    return d;
}

TBDEF tb_result tb_kernel_table_set_autotune(tb_kernel_table *t, const tb_autotune_options *o, tb_error *err) {
    if (!t) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "table is NULL");
    pthread_mutex_lock(&t->at->mu);
    t->at->options = tb__autotune_defaults(o);
    pthread_mutex_unlock(&t->at->mu);
    return tb_ok;
}

static int tb__cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* The driver calls of one benchmark, failing with the call's name. */
#define TB__CU(call, what)                                                                   \
    do {                                                                                      \
        tb__CUresult cr_ = (call);                                                            \
        if (cr_ != 0) {                                                                       \
            r = tb__cufail(err, cr_, tb_err_cuda, name, what, "%s", " (while autotuning)");   \
            goto done;                                                                        \
        }                                                                                     \
    } while (0)

/* do_bench for config cfg: *ms, the median; the launch p runs on the
   trial arguments. Returns tb_ok, or the error of a config that cannot
   run (its time is then infinite) or of the driver. */
static tb_result tb__bench(tb_kernel_table *t, const tb_autotune_options *o, const tb_loaded_kernel *k,
                           const tb_launch_params *p, const tb__choice_trial *tr, double *ms, tb_error *err) {
    const char *name = k->name;
    double warm = o->warmup_ms, rep = o->rep_ms; /* resolved by tb__autotune_defaults */
    uint32_t maxr = o->max_reps, nw, nr, i, j;
    float est = 0, *times = NULL;
    tb_result r = tb_ok;
    void *st = p->stream;
#define TB__RUN()                                                                                      \
    do {                                                                                               \
        for (j = 0; j < tr->reset_count; j++)                                                          \
            TB__CU(tb__drv.cuMemsetD8Async(tr->reset_ptr[j], 0, tr->reset_bytes[j], st), "cuMemsetD8Async"); \
        if ((r = tb_launch(k, p, err)) != tb_ok) goto done;                                            \
    } while (0)
#define TB__FLUSH()                                                                                    \
    do {                                                                                               \
        if (t->at->flush_bytes)                                                                            \
            TB__CU(tb__drv.cuMemsetD32Async(t->at->flush, 0, t->at->flush_bytes / 4, st), "cuMemsetD32Async"); \
    } while (0)
    TB__RUN();
    TB__CU(tb__drv.cuStreamSynchronize(st), "cuStreamSynchronize");
    TB__CU(tb__drv.cuEventRecord(t->at->events[0], st), "cuEventRecord");
    for (i = 0; i < 5; i++) {
        TB__FLUSH();
        TB__RUN();
    }
    TB__CU(tb__drv.cuEventRecord(t->at->events[1], st), "cuEventRecord");
    TB__CU(tb__drv.cuEventSynchronize(t->at->events[1]), "cuEventSynchronize");
    TB__CU(tb__drv.cuEventElapsedTime(&est, t->at->events[0], t->at->events[1]), "cuEventElapsedTime");
    est /= 5;
    nw = est > 0 && warm / est < maxr ? (uint32_t)(warm / est) : maxr;
    nr = est > 0 && rep / est < maxr ? (uint32_t)(rep / est) : maxr;
    if (nw < 1) nw = 1;
    if (nr < 1) nr = 1;
    for (i = 0; i < nw; i++) TB__RUN();
    for (i = 0; i < nr; i++) {
        TB__FLUSH();
        TB__CU(tb__drv.cuEventRecord(t->at->events[2 * i], st), "cuEventRecord");
        TB__RUN();
        TB__CU(tb__drv.cuEventRecord(t->at->events[2 * i + 1], st), "cuEventRecord");
    }
    TB__CU(tb__drv.cuEventSynchronize(t->at->events[2 * nr - 1]), "cuEventSynchronize");
    if (!(times = (float *)tb__alloc(&t->ctx, nr * sizeof *times))) {
        r = TB__OOM(err);
        goto done;
    }
    for (i = 0; i < nr; i++)
        TB__CU(tb__drv.cuEventElapsedTime(&times[i], t->at->events[2 * i], t->at->events[2 * i + 1]),
               "cuEventElapsedTime");
    qsort(times, nr, sizeof *times, tb__cmp_float);
    *ms = nr % 2 ? times[nr / 2] : 0.5 * ((double)times[nr / 2 - 1] + times[nr / 2]);
done:
    tb__free(&t->ctx, times);
#undef TB__RUN
#undef TB__FLUSH
    return r;
}

/* Tunes record rec for p: copies of the written arguments, every config
   timed, the fastest kept in *c. Called without at->mu. */
static tb_result tb__tune(tb_kernel_table *t, uint32_t rec, const tb_launch_params *p, tb__choice *c,
                          tb_error *err) {
    const tb_launch_record *rr = &t->bundle->records[rec];
    const char *name = rr->kernel_name, *codes = rr->configs[0].arg_types;
    uint32_t n = p->arg_count, i, j, best = UINT32_MAX;
    unsigned char written[TB_MAX_ARGS], zeroed[TB_MAX_ARGS];
    uint64_t copies[TB_MAX_ARGS];
    tb_arg *args = NULL;
    tb__choice_trial tr;
    tb_launch_params q;
    double bestms = 0, *times = NULL;
    char line[600];
    size_t at;
    tb_result r = tb_ok;
    int pushed = 0, capturing = 0, started = 0, benching = 0;
    const tb_loaded_kernel *k0;
    tb_autotune_options opt;
    memset(written, 0, sizeof written);
    memset(zeroed, 0, sizeof zeroed);
    memset(copies, 0, sizeof copies);
    memset(&tr, 0, sizeof tr);
    if (!tb__drv.cuEventCreate || !tb__drv.cuMemAlloc || !tb__drv.cuMemsetD32Async || !tb__drv.cuStreamIsCapturing)
        return tb__fail(err, tb_err_no_driver, name, NULL, -1, 0,
                        "the driver lacks the event and memory calls autotuning needs");
    if (!(p->flags & TB_LAUNCH_GRID_AUTO))
        return tb__fail(err, tb_err_invalid_argument, name, NULL, -1, 0,
                        "autotuning needs each config's grid: TB_LAUNCH_GRID_AUTO (and a record with grid rules)");
    if ((r = tb__table_kernel(t, rec, 0, &k0, err)) != tb_ok) return r;
    if (tb__enter(k0, &pushed) != 0)
        return tb__fail(err, tb_err_cuda, name, NULL, -1, 0, "cannot make the kernel's context current");
    if (tb__drv.cuStreamIsCapturing(p->stream, &capturing) == 0 && capturing) {
        r = tb__fail(err, tb_err_invalid_argument, name, NULL, -1, 0,
                     "not tuned for these sizes, and the stream is being captured into a graph, where it cannot "
                     "benchmark: launch it once before capturing, or load the choices");
        goto done;
    }
    started = 1; /* from here on, work may be queued on the stream */
    pthread_mutex_lock(&t->at->mu);
    opt = t->at->options; /* resolved by tb__autotune_defaults */
    pthread_mutex_unlock(&t->at->mu);
    pthread_mutex_lock(&t->at->bench_mu);
    benching = 1;
    /* which arguments run on copies: mutated and reset (all pointers without call info) */
    if (rr->call) {
        for (i = 0; i < rr->call->mutated_count; i++) written[rr->call->mutated[i]] = 1;
        for (i = 0; i < rr->call->reset_count; i++) written[rr->call->reset[i]] = zeroed[rr->call->reset[i]] = 1;
    } else {
        for (i = 0; i < n; i++) written[i] = codes[i] == 'O';
    }
    if (!(args = (tb_arg *)tb__alloc(&t->ctx, (n ? n : 1) * sizeof *args)) ||
        !(times = (double *)tb__alloc(&t->ctx, rr->config_count * sizeof *times))) {
        r = TB__OOM(err);
        goto done;
    }
    memcpy(args, p->args, n * sizeof *args);
    for (i = 0; i < n; i++) {
        size_t bytes = p->arg_bytes ? p->arg_bytes[i] : 0;
        if (written[i] && codes[i] == 'T') {
            r = tb__fail(err, tb_err_invalid_argument, name, NULL, -1, 0,
                         "argument %u is a tensor descriptor the kernel writes: autotuning cannot run it on a copy; "
                         "choose a config by its index", i);
            goto done;
        }
        if (!written[i] || codes[i] != 'O' || !args[i].u) continue;
        if (!bytes) {
            r = tb__fail(err, tb_err_invalid_argument, name, NULL, -1, 0,
                         "argument %u (%s) is written by the kernel and autotuning runs it on a copy: give its size "
                         "in params.arg_bytes",
                         i, rr->call && rr->call->arg_count ? rr->call->arg_names[i] : "a pointer");
            goto done;
        }
        TB__CU(tb__drv.cuMemAlloc(&copies[i], bytes), "cuMemAlloc");
        TB__CU(tb__drv.cuMemcpyDtoDAsync(copies[i], args[i].u, bytes, p->stream), "cuMemcpyDtoDAsync");
        args[i].u = copies[i];
        if (zeroed[i]) tr.reset_ptr[tr.reset_count] = copies[i], tr.reset_bytes[tr.reset_count++] = bytes;
    }
    /* the flush buffer and the events, kept by the table for the options of now */
    {
        size_t want = opt.flush_bytes;
        uint32_t ne = 2 * opt.max_reps; /* at most 2 * TB_AUTOTUNE_MAX_REPS */
        if (t->at->bench_ctx != k0->cu_ctx) { /* made in another context: freed there, made again in this one */
            tb__release_bench(t->at);
            t->at->bench_ctx = k0->cu_ctx; /* entered above */
        }
        if (t->at->flush_bytes != want) {
            if (t->at->flush) tb__drv.cuMemFree(t->at->flush);
            t->at->flush = 0, t->at->flush_bytes = 0;
            if (want) TB__CU(tb__drv.cuMemAlloc(&t->at->flush, want), "cuMemAlloc");
            t->at->flush_bytes = want;
        }
        if (t->at->event_count < ne) {
            for (i = 0; t->at->events && i < t->at->event_count; i++)
                if (t->at->events[i]) tb__drv.cuEventDestroy(t->at->events[i]);
            tb__free(&t->ctx, t->at->events);
            t->at->event_count = 0;
            if (!(t->at->events = (void **)tb__alloc(&t->ctx, ne * sizeof(void *)))) {
                r = TB__OOM(err);
                goto done;
            }
            memset(t->at->events, 0, ne * sizeof(void *));
            t->at->event_count = ne;
            for (i = 0; i < ne; i++) TB__CU(tb__drv.cuEventCreate(&t->at->events[i], 0), "cuEventCreate");
        }
    }
    q = *p;
    q.args = args;
    for (j = 0; j < rr->config_count; j++) {
        const tb_loaded_kernel *k;
        tb_error e;
        times[j] = -1;
        if ((r = tb__table_kernel(t, rec, j, &k, &e)) == tb_ok) r = tb__bench(t, &opt, k, &q, &tr, &times[j], &e);
        if (r == tb_err_cuda && e.cuda_result != 0 && tb__drv.cuStreamSynchronize(p->stream) != 0) {
            /* the context is gone (a kernel faulted): nothing more can run */
            if (err) *err = e;
            goto done;
        }
        if (r != tb_ok) { /* a config that cannot run here (too much shared memory...): skipped, as Inductor does */
            tb__log(&t->ctx, TB_LOG_WARN, "autotune %s: config %u cannot run: %s", name, j, e.message);
            times[j] = -1;
            r = tb_ok;
            continue;
        }
        if (best == UINT32_MAX || times[j] < bestms) best = j, bestms = times[j];
    }
    if (best == UINT32_MAX) {
        r = tb__fail(err, tb_err_cuda, name, NULL, -1, 0, "autotune: no config of the record could run");
        goto done;
    }
    c->cfg = best, c->ms = bestms;
    at = (size_t)snprintf(line, sizeof line, "autotune %.80s:", name);
    for (j = 0; j < rr->config_count && at < sizeof line; j++)
        at += (size_t)snprintf(line + at, sizeof line - at, " %u %s%.4f ms%s", j, times[j] < 0 ? "(failed) " : "",
                               times[j] < 0 ? 0 : times[j], j == best ? " (chosen)" : ",");
    tb__log(&t->ctx, TB_LOG_INFO, "%s", line);
done:
    /* never on a stream being captured: a synchronize would invalidate the capture */
    if (started && tb__drv.cuStreamSynchronize) tb__drv.cuStreamSynchronize(p->stream);
    if (benching) pthread_mutex_unlock(&t->at->bench_mu);
    for (i = 0; i < n && i < TB_MAX_ARGS; i++)
        if (copies[i]) tb__drv.cuMemFree(copies[i]);
    tb__free(&t->ctx, args);
    tb__free(&t->ctx, times);
    tb__leave(pushed);
    return r;
}

/* A choice not kept yet (or a build without lock-free reads): under the
   lock, benchmarked here or by the thread already at it. */
static TB__COLD tb_result tb__autotune_wait_or_tune(tb_kernel_table *t, uint32_t rec, const tb_launch_params *p,
                                                    const int64_t *key, uint32_t n, uint32_t *cfg, tb_error *err) {
    int fresh;
    tb__choice *c, result;
    tb_result r;
    pthread_mutex_lock(&t->at->mu);
    for (;;) {
        if (!(c = tb__choice_get(t, rec, key, n, &fresh))) {
            pthread_mutex_unlock(&t->at->mu);
            return TB__OOM(err);
        }
        if (fresh || c->state == TB__CHOICE_DONE) break;
        pthread_cond_wait(&t->at->cv, &t->at->mu); /* another thread tunes it */
    }
    if (!fresh) {
        *cfg = c->cfg;
        pthread_mutex_unlock(&t->at->mu);
        return tb_ok;
    }
    pthread_mutex_unlock(&t->at->mu);
    result = *c;
    r = tb__tune(t, rec, p, &result, err);
    pthread_mutex_lock(&t->at->mu);
    c = tb__cmap_find(t->at->cmap, rec, key, n, NULL); /* the map may have grown meanwhile */
    if (r == tb_ok) {
        c->cfg = result.cfg, c->ms = result.ms;
        TB__STORE_REL(c->state, TB__CHOICE_DONE);
        *cfg = result.cfg;
    } else {
        TB__STORE_REL(c->state, TB__CHOICE_FAILED);
    }
    pthread_cond_broadcast(&t->at->cv);
    pthread_mutex_unlock(&t->at->mu);
    return r;
}

/* The config TB_CONFIG_AUTOTUNE means for record rec and p: the kept
   choice (found without a lock once made), or a new one. */
static TB__HOT tb_result tb__autotune_config(tb_kernel_table *t, uint32_t rec, const tb_launch_params *p,
                                             uint32_t *cfg, tb_error *err) {
    int64_t key[TB__MAX_KEY];
    uint32_t n;
    if (t->at->plans[rec].configs == 1) {
        *cfg = 0;
        return tb_ok;
    }
    n = tb__size_key(t->at, rec, p->args, key);
    if (TB__ATOMICS) { /* (without atomics every lookup takes at->mu) */
        const tb__choice *c = tb__cmap_find((tb__cmap *)TB__LOAD_ACQ(t->at->cmap), rec, key, n, NULL);
        if (c && TB__LOAD_ACQ(c->state) == TB__CHOICE_DONE) {
            *cfg = TB__LOAD_ACQ(c->cfg); /* load_choices may replace it */
            return tb_ok;
        }
    }
    return tb__autotune_wait_or_tune(t, rec, p, key, n, cfg, err);
}

/* The choice kept for record rec and these arguments, without tuning. */
static tb_result tb__tuned_config(tb_kernel_table *t, uint32_t rec, const tb_arg *args, uint32_t *config, double *ms,
                                  const char *what, tb_error *err) {
    int64_t key[TB__MAX_KEY];
    uint32_t n;
    tb__choice *c;
    tb_result r;
    if (t->at->plans[rec].configs == 1) {
        *config = 0;
        if (ms) *ms = 0;
        return tb_ok;
    }
    n = tb__size_key(t->at, rec, args, key);
    pthread_mutex_lock(&t->at->mu);
    c = tb__cmap_find(t->at->cmap, rec, key, n, NULL);
    if (c && c->state == TB__CHOICE_DONE) {
        *config = c->cfg;
        if (ms) *ms = c->ms;
        r = tb_ok;
    } else {
        r = tb__fail(err, tb_err_not_found, what, NULL, -1, 0,
                     "not tuned for these sizes yet: a launch with TB_CONFIG_AUTOTUNE tunes it (or load the choices)");
    }
    pthread_mutex_unlock(&t->at->mu);
    return r;
}

TBDEF tb_result tb_kernel_table_choice(tb_kernel_table *t, const char *key_or_name, const tb_arg *args,
                                       uint32_t arg_count, uint32_t *config, double *ms, tb_error *err) {
    uint32_t rec;
    tb_result r;
    if (!t || !config) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "table or config is NULL");
    if ((r = tb_kernel_table_find(t, key_or_name, 0, args, arg_count, &rec, err)) != tb_ok) return r;
    return tb__tuned_config(t, rec, args, config, ms, key_or_name, err);
}

/* ---- the choices file: the table's choices to and from the text (Parsers owns the format) ---- */
/* Every choice made, as the text, into a buffer of the table's allocator. */
static tb_result tb__choices_text(tb_kernel_table *t, char **out, size_t *out_len, tb_error *err) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    uint32_t i, j;
    tb_result r = tb_ok;
    pthread_mutex_lock(&t->at->mu);
    for (i = 0; i <= (t->at->cmap ? t->at->cmap->cap : 0) && r == tb_ok; i++) {
        const tb__choice *c = t->at->cmap && i < t->at->cmap->cap ? &t->at->cmap->slots[i] : NULL;
        size_t need;
        if (c && c->state != TB__CHOICE_DONE) continue;
        need = c ? 3 * (strlen(t->bundle->records[c->rec].cache_key) + TB_MAX_NAME_LENGTH) + 24 * (c->nkey + 4) : 64;
        if (len + need > cap) {
            size_t nc = (len + need) * 2;
            char *nb = (char *)tb__realloc(&t->ctx, buf, nc);
            if (!nb) {
                r = TB__OOM(err);
                break;
            }
            buf = nb, cap = nc;
        }
        if (!c) break;
        if (!len) len = (size_t)snprintf(buf, cap, "%s", TB__CHOICES_MAGIC);
        {
            const tb_launch_record *rr = &t->bundle->records[c->rec];
            len += tb__pct(buf + len, cap - len, rr->cache_key);
            buf[len++] = '\t';
            len += tb__pct(buf + len, cap - len, rr->configs[c->cfg].kernel_hash);
            len += (size_t)snprintf(buf + len, cap - len, "\t%u\t", c->cfg);
            if (!c->nkey) buf[len++] = '-';
            for (j = 0; j < c->nkey; j++)
                len += (size_t)snprintf(buf + len, cap - len, "%s%lld", j ? "," : "", (long long)c->key[j]);
            buf[len++] = '\t';
            len += (size_t)tb__fmt_ms(buf + len, cap - len, c->ms);
            buf[len++] = '\n';
        }
    }
    pthread_mutex_unlock(&t->at->mu);
    if (r == tb_ok && !len) len = (size_t)snprintf(buf, cap, "%s", TB__CHOICES_MAGIC);
    if (r != tb_ok) {
        tb__free(&t->ctx, buf);
        return r;
    }
    *out = buf, *out_len = len;
    return tb_ok;
}

TBDEF tb_result tb_kernel_table_save_choices(tb_kernel_table *t, const char *path, tb_error *err) {
    char *buf;
    size_t len;
    tb_result r;
    if (!t || !path) return tb__fail(err, tb_err_invalid_argument, NULL, path, -1, 0, "table or path is NULL");
    if ((r = tb__choices_text(t, &buf, &len, err)) != tb_ok) return r;
    r = tb__write_small_file(path, buf, len, err);
    tb__free(&t->ctx, buf);
    return r;
}

TBDEF tb_result tb_kernel_table_save_choices_memory(tb_kernel_table *t, void *buffer, size_t capacity, size_t *out_size,
                                                    tb_error *err) {
    char *buf;
    size_t len;
    tb_result r;
    if (!t || !out_size) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "table or out_size is NULL");
    if ((r = tb__choices_text(t, &buf, &len, err)) != tb_ok) return r;
    *out_size = len;
    if (buffer && capacity < len)
        r = tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                     "the buffer holds %zu bytes and the choices need %zu (more were tuned since it was sized?)",
                     capacity, len);
    else if (buffer)
        memcpy(buffer, buf, len);
    tb__free(&t->ctx, buf);
    return r;
}

typedef struct tb__parsed_choice {
    uint32_t rec, cfg, nkey;
    size_t koff;                /* its key values: keys[koff, koff + nkey) */
    double ms;
} tb__parsed_choice;
typedef struct tb__choices_load {
    tb_kernel_table *t;
    const char *name;
    tb__parsed_choice *pc;
    uint32_t count, cap, skipped;
    int64_t *keys;              /* one pool for every line's values: memory follows the text's size */
    size_t kcount, kcap;
} tb__choices_load;

/* the parser's sink: a line resolved against the table, kept to apply */
static tb_result tb__choices_keep(void *user, const tb__choice_line *l, tb_error *err) {
    tb__choices_load *s = (tb__choices_load *)user;
    tb_kernel_table *t = s->t;
    tb__parsed_choice *e;
    uint32_t rec = t->by_key[tb__index_find(t, 0, l->cache_key, tb__str_hash(l->cache_key))].rec;
    /* the record, the config and its cubin must be those of this bundle */
    if (rec == UINT32_MAX || l->config >= t->bundle->records[rec].config_count ||
        strcmp(t->bundle->records[rec].configs[l->config].kernel_hash, l->kernel_hash) != 0 ||
        t->bundle->records[rec].config_count == 1) {
        tb__log(&t->ctx, TB_LOG_INFO,
                "autotune choices %s, line %zu: no such record or config in this bundle (skipped)", s->name, l->line);
        s->skipped++;
        return tb_ok;
    }
    if (s->count == s->cap) {
        uint32_t nc = s->cap ? 2 * s->cap : 16;
        tb__parsed_choice *np = (tb__parsed_choice *)tb__realloc(&t->ctx, s->pc, (size_t)nc * sizeof *np);
        if (!np) return TB__OOM(err);
        s->pc = np, s->cap = nc;
    }
    if (s->kcount + l->nkey > s->kcap) {
        size_t nc = 2 * (s->kcount + l->nkey) + 64;
        int64_t *nk = (int64_t *)tb__realloc(&t->ctx, s->keys, nc * sizeof *nk);
        if (!nk) return TB__OOM(err);
        s->keys = nk, s->kcap = nc;
    }
    e = &s->pc[s->count++];
    e->rec = rec, e->cfg = l->config, e->nkey = l->nkey, e->koff = s->kcount, e->ms = l->ms;
    if (l->nkey) memcpy(s->keys + s->kcount, l->key, l->nkey * sizeof *l->key);
    s->kcount += l->nkey;
    return tb_ok;
}

/* Parses all of data, then applies every line at once: a text that does
   not parse changes nothing. */
static tb_result tb__choices_load_text(tb_kernel_table *t, const char *data, size_t size, const char *name,
                                       tb_error *err) {
    tb__choices_load s;
    uint32_t i;
    tb_result r;
    memset(&s, 0, sizeof s);
    s.t = t, s.name = name;
    if ((r = tb__choices_parse(&t->ctx, data, size, name, tb__choices_keep, &s, err)) == tb_ok) {
        pthread_mutex_lock(&t->at->mu);
        for (i = 0; i < s.count; i++) {
            int fresh;
            /* a text whose lines have no key values has no pool: no NULL + 0 */
            tb__choice *c = tb__choice_get(t, s.pc[i].rec, s.keys ? s.keys + s.pc[i].koff : NULL, s.pc[i].nkey, &fresh);
            if (!c) {
                r = TB__OOM(err);
                break;
            }
            if (c->state == TB__CHOICE_TUNING && !fresh) continue; /* being tuned now: that result wins */
            TB__STORE_REL(c->cfg, s.pc[i].cfg); /* a lock-free reader may read it now */
            c->ms = s.pc[i].ms;
            TB__STORE_REL(c->state, TB__CHOICE_DONE);
        }
        tb__table_choices_replaced(t); /* launch memos of the replaced choices miss */
        pthread_cond_broadcast(&t->at->cv);
        pthread_mutex_unlock(&t->at->mu);
        if (s.skipped)
            tb__log(&t->ctx, TB_LOG_WARN, "autotune choices %s: %u entries for records or configs this bundle lacks",
                    name, s.skipped);
    }
    tb__free(&t->ctx, s.keys);
    tb__free(&t->ctx, s.pc);
    return r;
}

TBDEF tb_result tb_kernel_table_load_choices_memory(tb_kernel_table *t, const void *data, size_t size, tb_error *err) {
    if (!t || (!data && size))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "table or data is NULL");
    return tb__choices_load_text(t, data ? (const char *)data : "", size, "(memory)", err);
}

TBDEF tb_result tb_kernel_table_load_choices(tb_kernel_table *t, const char *path, tb_error *err) {
    char *data = NULL;
    size_t size = 0;
    tb_result r;
    if (!t || !path) return tb__fail(err, tb_err_invalid_argument, NULL, path, -1, 0, "table or path is NULL");
    if ((r = tb__read_file(&t->ctx, path, TB__CHOICES_MAX_FILE, &data, &size, err)) != tb_ok) return r;
    r = tb__choices_load_text(t, data, size, path, err);
    tb__free(&t->ctx, data);
    return r;
}

/* ---------------------------------------------------------------------- */
/* >>graphs  Graphs: capture, replay and update */
/* The registry of captures (the launch path's hook) and the graph API. */
/* ---------------------------------------------------------------------- */
/* ---- graph capture: which launches a capture holds ----
   tb_graph_begin registers its stream here; a launch on a registered
   stream notes its kernel and the graph node the driver made for it (the
   capture's dependency set right after the launch), so that
   tb_graph_update can find the node again. Launches outside a capture pay
   one relaxed load. */
typedef struct tb__graph_launch {
    const tb_loaded_kernel *k;
    void *node;
    uint32_t grid[3];
} tb__graph_launch;

struct tb_graph {
    tb__ctx ctx;
    void *stream;
    void *graph, *exec;
    int capturing;
    uint32_t count, cap;
    tb__graph_launch *launches;
    tb_result failed;           /* a note that went wrong during capture */
    char why[200];
};

#define TB__MAX_CAPTURES 64
static tb_graph *tb__captures[TB__MAX_CAPTURES];
static int tb__capture_count;
static pthread_mutex_t tb__captures_mu = PTHREAD_MUTEX_INITIALIZER;
/* The launch path's hook: is any capture running? One relaxed load. */
static int tb__capturing(void) {
    return TB__ATOMICS ? TB__LOAD_RELAXED(tb__capture_count) : 1; /* (without atomics: always look) */
}

static void tb__graph_note(const tb_loaded_kernel *k, uint32_t gx, uint32_t gy, uint32_t gz, void *stream) {
    int i, status = 0;
    unsigned long long id = 0;
    void *graph = NULL;
    void *const *deps = NULL;
    size_t nd = 0;
    pthread_mutex_lock(&tb__captures_mu);
    for (i = 0; i < TB__MAX_CAPTURES; i++) {
        tb_graph *g = tb__captures[i];
        if (!g || g->stream != stream || !g->capturing || g->failed) continue;
        if (g->count == g->cap &&
            !tb__grow(&g->ctx, (void **)&g->launches, &g->cap, g->count + 1, sizeof *g->launches)) {
            g->failed = tb_err_out_of_memory;
            snprintf(g->why, sizeof g->why, "out of memory noting launch %u", g->count);
        } else if (tb__drv.cuStreamGetCaptureInfo(stream, &status, &id, &graph, &deps, &nd) != 0 || nd != 1 || !deps) {
            g->failed = tb_err_cuda;
            snprintf(g->why, sizeof g->why, "the driver did not tell the graph node of launch %u (%zu dependencies)",
                     g->count, nd);
        } else {
            tb__graph_launch *l = &g->launches[g->count++];
            tb__kernel_retain(k); /* released by tb_graph_free */
            l->k = k, l->node = deps[0];
            l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz;
        }
        break;
    }
    pthread_mutex_unlock(&tb__captures_mu);
}

static int tb__capture_register(tb_graph *g) {
    int i, ok = 0;
    pthread_mutex_lock(&tb__captures_mu);
    for (i = 0; i < TB__MAX_CAPTURES; i++)
        if (tb__captures[i] && tb__captures[i]->stream == g->stream && tb__captures[i]->capturing) break;
    if (i == TB__MAX_CAPTURES)
        for (i = 0; i < TB__MAX_CAPTURES; i++)
            if (!tb__captures[i]) {
                tb__captures[i] = g;
                TB__ADD_RELAXED(tb__capture_count, 1);
                ok = 1;
                break;
            }
    pthread_mutex_unlock(&tb__captures_mu);
    return ok;
}
static void tb__capture_unregister(tb_graph *g) {
    int i;
    pthread_mutex_lock(&tb__captures_mu);
    for (i = 0; i < TB__MAX_CAPTURES; i++)
        if (tb__captures[i] == g) {
            tb__captures[i] = NULL;
            TB__SUB_RELAXED(tb__capture_count, 1);
        }
    g->capturing = 0;
    pthread_mutex_unlock(&tb__captures_mu);
}

TBDEF tb_result tb_graph_begin(void *stream, const tb_options *options, tb_graph **out, tb_error *err) {
    tb__ctx c = tb__ctx_from(options);
    tb_graph *g;
    tb__CUresult cr;
    tb_result r;
    if (!out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "out is NULL");
    *out = NULL;
    if (!stream)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "the NULL (legacy) stream cannot be captured: give a stream");
    if ((r = tb_driver_load(err)) != tb_ok) return r;
    if (!tb__drv.cuStreamBeginCapture || !tb__drv.cuStreamEndCapture || !tb__drv.cuStreamGetCaptureInfo ||
        !tb__drv.cuGraphInstantiate || !tb__drv.cuGraphLaunch)
        return tb__fail(err, tb_err_no_driver, NULL, NULL, -1, 0,
                        "the driver lacks the graph calls (CUDA 11.3 or later)");
    if (!(g = (tb_graph *)tb__alloc(&c, sizeof *g))) return TB__OOM(err);
    memset(g, 0, sizeof *g);
    g->ctx = c, g->stream = stream, g->capturing = 1;
    if (!tb__capture_register(g)) {
        tb__free(&c, g);
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "the stream is being captured already, or %d captures run at once", TB__MAX_CAPTURES);
    }
    if ((cr = tb__drv.cuStreamBeginCapture(stream, 1 /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */)) != 0) {
        tb__capture_unregister(g);
        tb__free(&c, g);
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuStreamBeginCapture", "%s",
                          " (is the stream's context current?)");
    }
    *out = g;
    return tb_ok;
}

TBDEF tb_result tb_graph_end(tb_graph *g, tb_error *err) {
    tb__CUresult cr;
    if (!g || !g->capturing) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "no capture to end");
    tb__capture_unregister(g);
    cr = tb__drv.cuStreamEndCapture(g->stream, &g->graph);
    if (cr != 0)
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuStreamEndCapture", "%s",
                          " (a call the capture does not allow?)");
    if (g->failed) return tb__fail(err, g->failed, NULL, NULL, -1, 0, "capture: %s", g->why);
    if ((cr = tb__drv.cuGraphInstantiate(&g->exec, g->graph, 0)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuGraphInstantiateWithFlags", "%s", "");
    return tb_ok;
}

TBDEF tb_result tb_graph_launch(const tb_graph *g, void *stream, tb_error *err) {
    tb__CUresult cr;
    if (TB__UNLIKELY(!g || !g->exec))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "no instantiated graph");
    cr = tb__drv.cuGraphLaunch(g->exec, stream);
    if (TB__UNLIKELY(cr != 0)) return tb__cufail(err, cr, tb_err_cuda, NULL, "cuGraphLaunch", "%s", "");
    return tb_ok;
}

TBDEF uint32_t tb_graph_launch_count(const tb_graph *g) { return g ? g->count : 0; }

/* CUDA_KERNEL_NODE_PARAMS_v2 (its first fields are the first version's) */
typedef struct tb__node_params {
    void *func;
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared;
    void **params;
    void **extra;
    void *kern;
    void *ctx;
} tb__node_params;

TBDEF tb_result tb_graph_update(tb_graph *g, uint32_t i, const tb_launch_params *p, tb_error *err) {
    void *params[TB_MAX_ARGS + 2];
    tb_arg conv[TB_MAX_ARGS];
    uint64_t gs, ps;
    tb_launch_params q;
    tb__node_params np;
    const tb__graph_launch *l;
    tb__CUresult cr;
    tb_result r;
    int pushed;
    if (!g || !g->exec || !p)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "no instantiated graph or params");
    if (i >= g->count) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "launch %u of %u", i, g->count);
    if (!tb__drv.cuGraphExecKernelNodeSetParams)
        return tb__fail(err, tb_err_no_driver, NULL, NULL, -1, 0, "the driver lacks cuGraphExecKernelNodeSetParams");
    l = &g->launches[i];
    if (l->k->desc_count || l->k->use_ex)
        return tb__fail(err, tb_err_invalid_argument, l->k->name, NULL, -1, 0,
                        "launch %u takes tensor descriptors or launch attributes (clusters, cooperative, "
                        "programmatic dependent launch): it replays as captured, and cannot be updated", i);
    if (p->arg_count != l->k->info.arg_count || (p->arg_count && !p->args))
        return tb__fail(err, tb_err_arg_mismatch, l->k->name, NULL, -1, 0, "%u arguments given, the kernel takes %u",
                        p->arg_count, l->k->info.arg_count);
    q = *p;
    if (p->flags & TB_LAUNCH_GRID_AUTO) {
        if ((r = tb__auto_grid(l->k, p, &q, err)) != tb_ok) return r;
    } else if (!q.grid[0] && !q.grid[1] && !q.grid[2]) {
        memcpy(q.grid, l->grid, sizeof q.grid); /* the captured grid */
    }
    if (!q.grid[0] || !q.grid[1] || !q.grid[2])
        return tb__fail(err, tb_err_invalid_argument, l->k->name, NULL, -1, 0,
                        "a graph node cannot launch an empty grid");
    if ((q.flags & TB_LAUNCH_CHECKED) && (r = tb__check_args(l->k, &q, err)) != tb_ok) return r;
    gs = (uint64_t)(uintptr_t)q.global_scratch;
    ps = (uint64_t)(uintptr_t)q.profile_scratch;
    if ((l->k->global_size && !gs) || (l->k->profile_size && !ps))
        return tb__fail(err, tb_err_scratch, l->k->name, NULL, -1, 0,
                        "the kernel needs scratch memory: pass device buffers");
    tb__plain_params(l->k, &q, params, conv, &gs, &ps);
    memset(&np, 0, sizeof np);
    np.func = l->k->function;
    np.grid_x = q.grid[0], np.grid_y = q.grid[1], np.grid_z = q.grid[2];
    np.block_x = l->k->block_x, np.block_y = np.block_z = 1;
    np.shared = l->k->shared;
    np.params = params;
    if ((cr = tb__enter(l->k, &pushed)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, l->k->name, "cuCtxPushCurrent", "%s", "");
    cr = tb__drv.cuGraphExecKernelNodeSetParams(g->exec, l->node, &np);
    tb__leave(pushed);
    if (cr != 0) return tb__cufail(err, cr, tb_err_cuda, l->k->name, "cuGraphExecKernelNodeSetParams", "%s", "");
    return tb_ok;
}

TBDEF void tb_graph_free(tb_graph *g) {
    tb__ctx c;
    uint32_t i;
    if (!g) return;
    c = g->ctx;
    if (g->capturing) { /* abandoned: end the capture and drop what it made */
        void *graph = NULL;
        tb__capture_unregister(g);
        if (tb__drv.cuStreamEndCapture(g->stream, &graph) == 0 && graph) tb__drv.cuGraphDestroy(graph);
    }
    if (g->exec && tb__drv.cuGraphExecDestroy) tb__drv.cuGraphExecDestroy(g->exec);
    if (g->graph && tb__drv.cuGraphDestroy) tb__drv.cuGraphDestroy(g->graph);
    for (i = 0; i < g->count; i++) tb_unload((tb_loaded_kernel *)(uintptr_t)g->launches[i].k); /* the references */
    tb__free(&c, g->launches);
    tb__free(&c, g);
}

/* ---------------------------------------------------------------------- */
/* >>runner  Runner: a program on the GPU */
/* A loaded model resolves every step of each of its programs once (the  */
/* kernel, its argument slots, which of them are pointers and into       */
/* what), so that a run is a check of the caller's tensors, then per     */
/* step a copy of its slots with the pointers filled in and one driver   */
/* call; or one graph launch. The programs share the constants (one      */
/* upload) and one workspace, sized for the largest.                     */
/* ---------------------------------------------------------------------- */
#define TB__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
/* seconds, for the load's log line */
static double tb__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
#define TB__MODEL_ALIGN 256u

typedef struct tb__model_step {
    const tb_program_step *st;
    const tb_loaded_kernel *k;   /* launch */
    tb_arg *args;                /* launch: literals filled, pointer slots filled per run */
    uint32_t ptr_begin, ptr_end; /* launch: its pointer slots in the program's ptrs */
    uint32_t launch;             /* launch: its number in the graph */
    int skip;                    /* launch: a grid of 0 blocks (2.6), which launches nothing */
    uint64_t global_bytes, profile_bytes; /* scratch this launch needs */
} tb__model_step;

typedef struct tb__model_ptr {
    uint32_t slot;               /* argument index */
    tb_operand op;
} tb__model_ptr;

/* One program of a model: its steps resolved, what its caller's tensors
   were at the last check, its graph. */
typedef struct tb__model_prog {
    const tb_program *p;
    tb__model_step *steps;
    tb__model_ptr *ptrs;
    tb_arg *arg_block;
    uint64_t *checked;           /* per input, then output: the last pointer found on the device, its extent in it */
    int io_ok;                   /* the tensors at checked passed the overlap check */
    unsigned char *written;      /* per input, then output: a step may write it (an output always) */
    uint64_t ws_bytes;           /* its plan's bytes (aligned), then its scratch */
    uint64_t global_off, profile_off; /* scratch within the workspace */
    /* graph replay */
    tb_graph *graph;
    int static_io;
    uint64_t *io_dev;            /* static buffers (static_io), inputs then outputs */
    uint64_t *io_graph;          /* the pointers the graph holds, inputs then outputs */
    /* (2.6) a program with symbols: its instances, one per tuple of symbol
       values seen (at most the model's inst_cap, the least recently used
       replaced), each a specialized program with its steps and graph */
    struct tb__model_prog *inst;
    uint32_t inst_count;
    uint64_t used;               /* an instance: the model's run counter at its last run */
    tb_program *own;             /* an instance: its specialized program */
    int64_t key[TB_MAX_PROGRAM_SYMBOLS];
} tb__model_prog;

struct tb_model {
    tb__ctx ctx;
    const tb_bundle *bundle;
    tb_kernel_table *table;
    int own_table;
    tb__CUctx cu_ctx;
    tb__CUdevice device;
    int retained;
    unsigned flags;
    const tb_program_constant *constants; /* the bundle's one table, which its programs share */
    uint32_t constant_count;
    uint64_t consts;             /* device: every constant, each at a multiple of 64 */
    uint64_t *const_addr;
    uint64_t const_bytes;
    uint32_t state_count;
    uint64_t ws;                 /* device: the model's own workspace */
    uint64_t ws_bytes;           /* the largest program's */
    uint32_t prog_count;
    tb__model_prog *progs;
    size_t upload_chunk;
    uint64_t pinned_min;         /* file bytes from which the upload goes the pinned way */
    uint64_t staging_bound;      /* pinned bytes an upload uses at most */
    uint32_t upload_threads;
    int staged;                  /* holds the staging area (tb__staging_drop lets go) */
    tb_model_times times;        /* the load's phases */
    tb_options options;          /* the caller's, for the graph */
    uint32_t inst_cap;           /* (2.6) instances kept per program with symbols */
    uint64_t runs;
};

TBDEF uint32_t tb_model_input_count(const tb_model *m) { return m ? m->progs[0].p->input_count : 0; }
TBDEF uint32_t tb_model_output_count(const tb_model *m) { return m ? m->progs[0].p->output_count : 0; }
TBDEF const tb_tensor_spec *tb_model_input(const tb_model *m, uint32_t i) {
    return m && i < m->progs[0].p->input_count ? &m->progs[0].p->inputs[i] : NULL;
}
TBDEF const tb_tensor_spec *tb_model_output(const tb_model *m, uint32_t i) {
    return m && i < m->progs[0].p->output_count ? &m->progs[0].p->outputs[i] : NULL;
}
TBDEF uint64_t tb_model_workspace_size(const tb_model *m) { return m ? m->ws_bytes : 0; }
TBDEF uint64_t tb_model_constant_bytes(const tb_model *m) { return m ? m->const_bytes : 0; }
TBDEF double tb_model_upload_ms(const tb_model *m) { return m ? m->times.upload_ms : 0; }
TBDEF void tb_model_load_times(const tb_model *m, tb_model_times *out) {
    if (!out) return;
    if (m) *out = m->times;
    else memset(out, 0, sizeof *out);
}
TBDEF uint32_t tb_model_state_count(const tb_model *m) { return m ? m->state_count : 0; }
TBDEF uint32_t tb_model_program_count(const tb_model *m) { return m ? m->prog_count : 0; }
TBDEF const tb_program *tb_model_program(const tb_model *m, uint32_t program) {
    return m && program < m->prog_count ? m->progs[program].p : NULL;
}
TBDEF tb_result tb_model_find_program(const tb_model *m, const char *name, uint32_t *program, tb_error *err) {
    uint32_t i;
    char names[256];
    size_t a = 0;
    if (program) *program = UINT32_MAX;
    if (!m || !name || !program)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "tb_model_find_program: model, name or program is NULL");
    for (i = 0; i < m->prog_count; i++)
        if (!strcmp(m->progs[i].p->name, name)) {
            *program = i;
            return tb_ok;
        }
    names[0] = 0;
    for (i = 0; i < m->prog_count && a + 4 < sizeof names; i++)
        a += (size_t)snprintf(names + a, sizeof names - a, "%s\"%.60s\"", i ? ", " : "", m->progs[i].p->name);
    return tb__fail(err, tb_err_not_found, NULL, NULL, -1, 0, "the model has no program \"%.80s\"; it has %u: %s", name,
                    m->prog_count, names);
}
TBDEF tb_tensor tb_tensor_for(const tb_tensor_spec *spec, void *data) {
    tb_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    if (spec) {
        t.dtype = spec->dtype, t.rank = spec->rank;
        memcpy(t.shape, spec->shape, sizeof t.shape);
        memcpy(t.strides, spec->strides, sizeof t.strides);
    }
    return t;
}

/* Makes the model's context current if it is not; *pushed says to pop it. */
static tb__CUresult tb__model_enter(const tb_model *m, int *pushed) {
    tb__CUctx cur = NULL;
    tb__CUresult cr = tb__drv.cuCtxGetCurrent(&cur);
    *pushed = 0;
    if (cr || cur == m->cu_ctx) return cr;
    if ((cr = tb__drv.cuCtxPushCurrent(m->cu_ctx)) == 0) *pushed = 1;
    return cr;
}

/* ---- the upload's numbers (>>upload's; here, where the load resolves a desc's defaults) ----
   In one place, each to be chosen by measurement (bench/bench_upload.c,
   whose --sweep times rings and readers against one pinned cuMemcpyHtoD
   of the same bytes), and each may be defined before the implementation.
   The pinned way's ring is slots of TB_UPLOAD_PIECE bytes, as many as the
   model's bound on pinned bytes holds (desc.pinned_staging_bytes, 0:
   TB_UPLOAD_STAGING) and the upload fills. */
#ifndef TB_UPLOAD_PIECE
#define TB_UPLOAD_PIECE ((size_t)2 << 20)      /* a slot's bytes: one pread, one copy */
#endif
#ifndef TB_UPLOAD_STAGING
#define TB_UPLOAD_STAGING ((uint64_t)64 << 20) /* the bound's default: 32 slots, two or more a reader */
#endif
#ifndef TB_UPLOAD_THREADS
#define TB_UPLOAD_THREADS 12u                  /* readers by default: one per core but one, 2 to this many */
#endif
#ifndef TB_UPLOAD_PINNED_MIN
#define TB_UPLOAD_PINNED_MIN ((uint64_t)64 << 20) /* desc.pinned_upload_min 0: from here on, the pinned way */
#endif
/* An upload pins at most 1/TB_UPLOAD_PIN_SHARE of its bytes (two slots
   at least): pinning runs at about 2 GB/s, so a 32nd of the bytes takes
   about four fifths of their copies' time at 50 GB/s. A first load's ring
   fits its upload (64 MiB: two slots, 1 GiB: 16), the area grows with the
   uploads that need more, and an area pinned already is used as far as
   the bound goes. */
#ifndef TB_UPLOAD_PIN_SHARE
#define TB_UPLOAD_PIN_SHARE 32u
#endif
#define TB__UPLOAD_CHUNK ((size_t)1 << 20)     /* desc.upload_chunk 0: the pageable way's pieces */
#define TB__UPLOAD_THREADS_MOST 64u            /* desc.upload_threads over this: this many */
#define TB__RING_MOST 65536u                   /* slots at most, whatever the bound */
/* a small bound's slots: multiples of a page (of TB_UPLOAD_PIECE where it is smaller) */
#define TB__PIECE_ALIGN (TB_UPLOAD_PIECE < 4096 ? TB_UPLOAD_PIECE : (size_t)4096)
typedef char tb__TB_UPLOAD_PIECE_is_positive[(TB_UPLOAD_PIECE) > 0 ? 1 : -1];
typedef char tb__TB_UPLOAD_THREADS_is_1_to_64[(TB_UPLOAD_THREADS) >= 1 && (TB_UPLOAD_THREADS) <= TB__UPLOAD_THREADS_MOST
                                                  ? 1
                                                  : -1];
typedef char tb__TB_UPLOAD_PIN_SHARE_is_positive[(TB_UPLOAD_PIN_SHARE) > 0 ? 1 : -1];

/* The upload (>>upload) and the device calls (>>device), defined after the runner. */
static tb_result tb__model_upload(tb_model *m, const tb_weights *w, int state_only, tb_model_times *tm, tb_error *err);
static void tb__staging_drop(tb_model *m, int unpin);
static uint32_t tb__upload_threads(uint32_t asked);

/* Appends " [program "NAME" step S]" to err's message: a run-time
   failure names the step it stopped at. */
static TB__COLD tb_result tb__at_step(tb_error *err, tb_result r, const tb_program *p, uint32_t s) {
    if (err) {
        size_t n = strlen(err->message);
        if (n < sizeof err->message)
            snprintf(err->message + n, sizeof err->message - n, " [program \"%.60s\" step %u]", p->name, s);
    }
    return r;
}

/* Resolves one program's steps: each launch's kernel (from the table,
   the record the step names, which the checker matched its operands
   against), argument slots (literals now, pointers listed), scratch and
   graph number; and checks what a launch would check of each grid, so
   that a program that loads never stops partway through a run. */
TB__STEP_KINDS_HANDLED(3, model_steps); /* a launch resolves; a memset or copy runs from its step's fields */
static tb_result tb__model_steps(tb_model *m, tb__model_prog *mp, tb_error *err) {
    const tb_program *p = mp->p;
    uint32_t s, i, launches = 0;
    uint64_t nptr = 0, nargs = 0, a = 0;
    uint64_t gmax = 0, pmax = 0, scratch_at;
    tb_result r;
    for (s = 0; s < p->step_count; s++)
        if (p->steps[s].kind == TB_STEP_LAUNCH) {
            nargs += p->steps[s].operand_count;
            for (i = 0; i < p->steps[s].operand_count; i++) nptr += p->steps[s].operands[i].space != TB_SPACE_LITERAL;
        }
    if (nargs > (uint64_t)SIZE_MAX / sizeof(tb_arg) || nptr > 0xffffffffu)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0,
                        "program \"%.80s\": %llu operands are too many for this host", p->name,
                        (unsigned long long)nargs);
    if (!(mp->steps = (tb__model_step *)tb__alloc(&m->ctx, (p->step_count ? p->step_count : 1) * sizeof *mp->steps)) ||
        !(mp->ptrs = (tb__model_ptr *)tb__alloc(&m->ctx, (size_t)(nptr ? nptr : 1) * sizeof *mp->ptrs)) ||
        !(mp->arg_block = (tb_arg *)tb__alloc(&m->ctx, (size_t)(nargs ? nargs : 1) * sizeof *mp->arg_block)))
        return TB__OOM(err);
    memset(mp->steps, 0, (p->step_count ? p->step_count : 1) * sizeof *mp->steps);
    nptr = 0;
    for (s = 0; s < p->step_count; s++) {
        tb__model_step *ms = &mp->steps[s];
        const tb_program_step *st = &p->steps[s];
        const tb_launch_record *rec;
        uint32_t found = UINT32_MAX, ctas;
        uint64_t blocks;
        ms->st = st;
        if (st->kind != TB_STEP_LAUNCH) continue;
        rec = &m->bundle->records[st->record];
        if ((r = tb_kernel_table_find(m->table, rec->cache_key, st->config, NULL, 0, &found, err)) != tb_ok ||
            (r = tb_kernel_table_get(m->table, rec->cache_key, st->config, &ms->k, err)) != tb_ok)
            return tb__at_step(err, r, p, s);
        if (found != st->record) /* a bundle's cache keys are unique: a guard, not a path */
            return tb__fail(err, tb_err_malformed, rec->cache_key, NULL, -1, 0,
                            "program \"%.80s\" step %u names record %u, but its cache key finds record %u", p->name, s,
                            st->record, found);
        if (ms->k->info.arg_count != st->operand_count) /* the checker matched them: a guard, not a path */
            return tb__fail(err, tb_err_arg_mismatch, ms->k->name, NULL, -1, 0,
                            "program \"%.80s\" step %u: %u operands, the kernel takes %u", p->name, s,
                            st->operand_count, ms->k->info.arg_count);
        ms->skip = !st->grid[0] || !st->grid[1] || !st->grid[2];
        if (!ms->skip && (r = tb__check_cluster_grid(ms->k, st->grid[0], st->grid[1], st->grid[2], err)) != tb_ok)
            return tb__at_step(err, r, p, s);
        ms->args = mp->arg_block + a;
        a += st->operand_count;
        ms->ptr_begin = (uint32_t)nptr;
        for (i = 0; i < st->operand_count; i++) {
            if (st->operands[i].space == TB_SPACE_LITERAL) {
                ms->args[i].u = st->operands[i].value;
            } else {
                ms->args[i].u = 0;
                mp->ptrs[nptr].slot = i;
                mp->ptrs[nptr++].op = st->operands[i];
            }
        }
        ms->ptr_end = (uint32_t)nptr;
        ms->launch = ms->skip ? UINT32_MAX : launches++;
        /* Triton's scratch: size per program, times the grid and num_ctas */
        ctas = rec->configs[st->config].num_ctas ? rec->configs[st->config].num_ctas : 1;
        blocks = (uint64_t)st->grid[0] * st->grid[1] * st->grid[2]; /* < 2^63 */
        blocks = blocks > UINT64_MAX / ctas ? UINT64_MAX : blocks * ctas;
        if ((ms->k->global_size && (blocks == UINT64_MAX || blocks > UINT64_MAX / ms->k->global_size)) ||
            (ms->k->profile_size && (blocks == UINT64_MAX || blocks > UINT64_MAX / ms->k->profile_size)))
            return tb__fail(err, tb_err_limit, ms->k->name, NULL, -1, 0,
                            "program \"%.80s\" step %u: its scratch size overflows", p->name, s);
        ms->global_bytes = ms->k->global_size * blocks;
        ms->profile_bytes = ms->k->profile_size * blocks;
        if (ms->global_bytes > gmax) gmax = ms->global_bytes;
        if (ms->profile_bytes > pmax) pmax = ms->profile_bytes;
    }
    /* the workspace: the plan's bytes, then the two scratch areas */
    scratch_at = tb__align_up64(p->workspace_size, TB__MODEL_ALIGN);
    mp->global_off = scratch_at;
    mp->profile_off = tb__align_up64(scratch_at + gmax, TB__MODEL_ALIGN);
    mp->ws_bytes = tb__align_up64(mp->profile_off + pmax, TB__MODEL_ALIGN);
    if (scratch_at < p->workspace_size || mp->profile_off < scratch_at || mp->ws_bytes < mp->profile_off ||
        scratch_at + gmax < scratch_at || mp->profile_off + pmax < mp->profile_off)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "program \"%.80s\": the workspace's size overflows",
                        p->name);
    return tb_ok;
}

/* The device address of a pointer operand for one run. */
static uint64_t tb__model_addr(const tb_model *m, const tb__model_prog *mp, const tb_operand *o, const tb_tensor *in,
                               const tb_tensor *out, uint64_t ws) {
    switch (o->space) {
    case TB_SPACE_INPUT: return (uint64_t)(uintptr_t)in[o->index].data + o->value;
    case TB_SPACE_OUTPUT: return (uint64_t)(uintptr_t)out[o->index].data + o->value;
    case TB_SPACE_CONSTANT: return m->const_addr[o->index] + o->value;
    default: return ws + mp->p->buffers[o->index].offset + o->value;
    }
}

/* The inputs a step may write (a memset's or copy's destination, or a
   launch's pointer tb__arg_may_write says the kernel may write), and
   every output: what no other tensor may share a byte with, and what a
   static-io replay copies back. */
TB__STEP_KINDS_HANDLED(3, model_written); /* the table's writes: a launch's pointers, a memset's or copy's operand 0 */
static tb_result tb__model_written(tb_model *m, tb__model_prog *mp, tb_error *err) {
    const tb_program *p = mp->p;
    uint32_t s, i, n = p->input_count + p->output_count;
    if (!(mp->written = (unsigned char *)tb__alloc(&m->ctx, (size_t)n + 1))) return TB__OOM(err);
    memset(mp->written, 0, (size_t)n + 1);
    for (i = p->input_count; i < n; i++) mp->written[i] = 1;
    for (s = 0; s < p->step_count; s++) {
        const tb_program_step *st = &p->steps[s];
        const tb_launch_record *rec = st->kind == TB_STEP_LAUNCH ? &m->bundle->records[st->record] : NULL;
        for (i = 0; i < st->operand_count; i++) {
            if (st->operands[i].space != TB_SPACE_INPUT) continue;
            if (rec ? tb__arg_may_write(rec, i) : i == 0) mp->written[st->operands[i].index] = 1;
        }
    }
    return tb_ok;
}

/* Does any step other than an updatable launch touch an input or output? */
TB__STEP_KINDS_HANDLED(3, model_needs_static_io); /* a launch's node may be updatable; a memset's or copy's is not */
static int tb__model_needs_static_io(const tb__model_prog *mp) {
    uint32_t s, i;
    for (s = 0; s < mp->p->step_count; s++) {
        const tb__model_step *ms = &mp->steps[s];
        int updatable = ms->st->kind == TB_STEP_LAUNCH && !ms->k->desc_count && !ms->k->use_ex;
        for (i = 0; i < ms->st->operand_count; i++) {
            uint32_t sp = ms->st->operands[i].space;
            if ((sp == TB_SPACE_INPUT || sp == TB_SPACE_OUTPUT) && !updatable) return 1;
        }
    }
    return 0;
}

/* What a program (or an instance) resolved; not its static buffers,
   which an instance shares with its program. */
static void tb__model_prog_free(tb_model *m, tb__model_prog *mp) {
    tb_graph_free(mp->graph);
    tb__free(&m->ctx, mp->steps);
    tb__free(&m->ctx, mp->ptrs);
    tb__free(&m->ctx, mp->arg_block);
    tb__free(&m->ctx, mp->checked);
    tb__free(&m->ctx, mp->written);
    tb__free(&m->ctx, mp->io_graph);
    tb_program_free(mp->own);
    mp->graph = NULL, mp->steps = NULL, mp->ptrs = NULL, mp->arg_block = NULL, mp->checked = NULL, mp->written = NULL;
    mp->io_graph = NULL, mp->own = NULL;
}

static void tb__model_release(tb_model *m) {
    int pushed = 0;
    uint32_t i, j;
    tb__ctx c = m->ctx;
    if (m->cu_ctx && tb__model_enter(m, &pushed) == 0) {
        if (m->consts) tb__drv.cuMemFree(m->consts);
        if (m->ws) tb__drv.cuMemFree(m->ws);
        for (j = 0; j < m->prog_count; j++)
            if (m->progs[j].io_dev)
                for (i = 0; i < m->progs[j].p->input_count + m->progs[j].p->output_count; i++)
                    if (m->progs[j].io_dev[i]) tb__drv.cuMemFree(m->progs[j].io_dev[i]);
        tb__staging_drop(m, 1); /* its context current, and before a retained one is released below */
        tb__leave(pushed);
    }
    tb__staging_drop(m, 0); /* (the context could not be entered: the count, at least) */
    for (j = 0; j < m->prog_count; j++) {
        tb__model_prog *mp = &m->progs[j];
        for (i = 0; i < mp->inst_count; i++) tb__model_prog_free(m, &mp->inst[i]);
        tb__free(&c, mp->inst);
        tb__model_prog_free(m, mp);
        tb__free(&c, mp->io_dev);
    }
    if (m->own_table) tb_kernel_table_free(m->table);
    if (m->retained) tb__drv.cuDevicePrimaryCtxRelease(m->device);
    tb__free(&c, m->const_addr);
    tb__free(&c, m->progs);
    tb__free(&c, m);
}
TBDEF void tb_model_free(tb_model *m) {
    if (m) tb__model_release(m);
}

/* The context, as a load's: the current one, else the device's primary
   context (retained, and made current for the load). */
static tb_result tb__model_context(tb_model *m, int device, int *pushed, tb_error *err) {
    tb__CUctx cur = NULL;
    tb__CUresult cr;
    int ndev = 0;
    *pushed = 0;
    if ((cr = tb__drv.cuCtxGetCurrent(&cur)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuCtxGetCurrent", "%s", "");
    if (cur) {
        m->cu_ctx = cur;
        if ((cr = tb__drv.cuCtxGetDevice(&m->device)) != 0)
            return tb__cufail(err, cr, tb_err_cuda, NULL, "cuCtxGetDevice", "%s", "");
        return tb_ok;
    }
    if ((cr = tb__drv.cuDeviceGetCount(&ndev)) != 0 || device < 0 || device >= ndev)
        return tb__fail(err, tb_err_no_device, NULL, NULL, -1, 0, "CUDA device %d requested, %d present", device, ndev);
    if ((cr = tb__drv.cuDeviceGet(&m->device, device)) != 0 ||
        (cr = tb__drv.cuDevicePrimaryCtxRetain(&m->cu_ctx, m->device)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuDevicePrimaryCtxRetain", "device %d", device);
    m->retained = 1;
    if ((cr = tb__drv.cuCtxPushCurrent(m->cu_ctx)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuCtxPushCurrent", "%s", "");
    *pushed = 1;
    return tb_ok;
}

/* The device memory: constants (each at a multiple of 64, as the file
   lays them out) first, for the upload; then one workspace for every
   program (the largest's size), and static input and output buffers for
   each static-io graph. */
static tb_result tb__model_const_memory(tb_model *m, tb_error *err) {
    uint64_t at = 0;
    uint32_t i;
    tb__CUresult cr;
    if (!(m->const_addr =
              (uint64_t *)tb__alloc(&m->ctx, (m->constant_count ? m->constant_count : 1) * sizeof(uint64_t))))
        return TB__OOM(err);
    for (i = 0; i < m->constant_count; i++) {
        m->const_addr[i] = at;
        if (m->constants[i].flags & TB_CONSTANT_STATE) m->state_count++;
        if (m->constants[i].size > UINT64_MAX - at - TB__CONSTANT_ALIGN)
            return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "the constants' size overflows");
        at = tb__align_up64(at + m->constants[i].size, TB__CONSTANT_ALIGN); /* the file's layout: one piece to upload */
    }
    m->const_bytes = at;
    if (at > (uint64_t)SIZE_MAX)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "the model's constants are too large for this host");
    if (at && (cr = tb__drv.cuMemAlloc(&m->consts, (size_t)at)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuMemAlloc", "%llu bytes of constants", (unsigned long long)at);
    for (i = 0; i < m->constant_count; i++) m->const_addr[i] += m->consts;
    return tb_ok;
}

/* The rest, once every program's steps are resolved: the workspace and the
   static buffers. */
static tb_result tb__model_memory(tb_model *m, tb_error *err) {
    uint32_t i, j;
    tb__CUresult cr;
    if (m->ws_bytes > (uint64_t)SIZE_MAX)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "the model's workspace is too large for this host");
    if (m->ws_bytes && (cr = tb__drv.cuMemAlloc(&m->ws, (size_t)m->ws_bytes)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuMemAlloc", "%llu bytes of workspace",
                          (unsigned long long)m->ws_bytes);
    for (j = 0; j < m->prog_count; j++) {
        tb__model_prog *mp = &m->progs[j];
        const tb_program *p = mp->p;
        uint32_t n = p->input_count + p->output_count;
        if (!(mp->checked = (uint64_t *)tb__alloc(&m->ctx, (n ? n : 1) * sizeof(uint64_t))) ||
            !(mp->io_graph = (uint64_t *)tb__alloc(&m->ctx, (n ? n : 1) * sizeof(uint64_t))))
            return TB__OOM(err);
        memset(mp->checked, 0, (n ? n : 1) * sizeof(uint64_t));
        if (!mp->static_io) continue;
        if (!(mp->io_dev = (uint64_t *)tb__alloc(&m->ctx, (n ? n : 1) * sizeof(uint64_t)))) return TB__OOM(err);
        memset(mp->io_dev, 0, (n ? n : 1) * sizeof(uint64_t));
        for (i = 0; i < n; i++) {
            uint64_t e = tb_tensor_spec_extent(i < p->input_count ? &p->inputs[i] : &p->outputs[i - p->input_count]);
            if (e > (uint64_t)SIZE_MAX)
                return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0, "a tensor too large for this host");
            if ((cr = tb__drv.cuMemAlloc(&mp->io_dev[i], e ? (size_t)e : 1)) != 0)
                return tb__cufail(err, cr, tb_err_cuda, NULL, "cuMemAlloc", "a static buffer of %llu bytes",
                                  (unsigned long long)e);
        }
    }
    return tb_ok;
}

/* The weights file of a bundle with EXTERNAL constants, opened and
   checked whole (every tensor there, its dtype and shape) before anything
   is allocated or uploaded. Its bytes (TB_MODEL_VERIFY_WEIGHTS) are checked
   as they are read for the upload (tb__model_verify_upload), not here: a
   check of another read would not hold for the bytes uploaded. */
static tb_result tb__model_weights(const tb_model_desc *desc, tb_weights **w, tb_error *err) {
    const tb_bundle *b = desc->bundle;
    uint32_t i, n = 0, first = 0;
    tb_result r;
    *w = NULL;
    for (i = 0; i < b->constant_count; i++)
        if ((b->constants[i].flags & TB_CONSTANT_EXTERNAL) && !n++) first = i;
    if (!n) return tb_ok;
    if (!desc->weights) {
        const char *f = tb_bundle_property(b, "weights.file");
        return tb__fail(
            err, tb_err_invalid_argument, NULL, NULL, -1, 0,
            "%u of the bundle's constants (\"%.80s\" first) are tensors of a weights file (exported as \"%.80s\"): "
            "give its path in desc.weights",
            n, b->constants[first].name, f ? f : "?");
    }
    if ((r = tb_weights_open(desc->weights, desc->options, w, err)) != tb_ok) {
        const char *f = tb_bundle_property(b, "weights.file");
        size_t used = strlen(err ? err->message : "");
        if (err && r == tb_err_not_found && used + 200 < sizeof err->message) /* which file the bundle wants */
            snprintf(err->message + used, sizeof err->message - used,
                     " (desc.weights; the bundle was exported with the weights file \"%.80s\")", f ? f : "?");
        return r;
    }
    if ((r = tb_weights_check(*w, b, 0, err)) != tb_ok) { /* VERIFY: the uploaded bytes' CRC-32s, after the upload */
        tb_weights_free(*w);
        *w = NULL;
    }
    return r;
}

/* Every program's steps resolved, each kernel's module loaded (the
   table's lazy loads): on a thread of its own while the caller's thread
   uploads the constants (tb_model_load), or on the caller's thread
   (TB_MODEL_SERIAL_LOAD first; with no thread to be had, after the
   upload). Beside, the two share no field: this writes the programs' steps
   and its job's result (read after the join), the upload reads the
   constants. A failure on either side is reported once both are done. */
typedef struct tb__model_kernels {
    tb_model *m;
    tb_result r;
    double ms;
    tb_error err; /* its own: the caller's err is the upload's meanwhile */
} tb__model_kernels;

static void *tb__model_kernels_run(void *arg) {
    tb__model_kernels *k = (tb__model_kernels *)arg;
    tb_model *m = k->m;
    double t0 = tb__now();
    int pushed = 0;
    uint32_t j;
    tb__CUresult cr = tb__model_enter(m, &pushed); /* a module loads into the current context */
    k->r = cr ? tb__cufail(&k->err, cr, tb_err_cuda, NULL, "cuCtxPushCurrent", "loading the kernels") : tb_ok;
    for (j = 0; j < m->prog_count && k->r == tb_ok; j++)
        if ((k->r = tb__model_steps(m, &m->progs[j], &k->err)) == tb_ok)
            k->r = tb__model_written(m, &m->progs[j], &k->err);
    if (pushed) tb__leave(pushed);
    k->ms = (tb__now() - t0) * 1e3;
    return NULL;
}

/* A load's times (t: tb_model_load's clock at its phases' bounds; the
   kernels' own time) in m->times, and its INFO line. */
static void tb__model_load_report(tb_model *m, const double *t, double kernels_ms, int beside, unsigned flags,
                                  const char *weights) {
    tb_model_times *tm = &m->times;
    char way[160];
    double done = tb__now();
    /* the table made (t[4] to t[5]), then the modules loaded */
    tm->context_ms = (t[4] - t[3]) * 1e3, tm->kernels_ms = (t[5] - t[4]) * 1e3 + kernels_ms;
    tm->beside = (uint32_t)beside;
    tm->memory_ms = (t[6] - t[5] + done - t[7]) * 1e3, tm->total_ms = (done - t[0]) * 1e3;
    if (!tm->upload_bytes) snprintf(way, sizeof way, "copied from the bundle's memory");
    else if (!tm->pinned) snprintf(way, sizeof way, "read by one thread into two pageable buffers");
    else
        snprintf(way, sizeof way, "read by %u threads into %llu pinned bytes of staging, %s", tm->threads,
                 (unsigned long long)tm->staging_bytes,
                 tm->reused ? "pinned by an earlier load" : m->staged ? "pinned now (kept while a model holds it)" :
                 "pinned for this upload (another context holds the staging area)");
    tb__log(&m->ctx, TB_LOG_INFO,
            "model: loaded in %.3f ms: driver %.3f, weights file checked %.3f, context %.3f, the steps of %u "
            "program%s resolved (kernels loaded%s) %.3f, %llu bytes of device memory allocated %.3f, %u "
            "constants (%llu bytes) uploaded %.3f (%s; pinning %.3f, waiting %.3f)%s%s",
            tm->total_ms, tm->driver_ms, tm->weights_ms, tm->context_ms, m->prog_count, m->prog_count == 1 ? "" : "s",
            beside                           ? " beside the upload"
            : (flags & TB_MODEL_SERIAL_LOAD) ? ", then the upload"
                                             : " after the upload: no thread to be had",
            tm->kernels_ms, (unsigned long long)(m->const_bytes + m->ws_bytes), tm->memory_ms, m->constant_count,
            (unsigned long long)m->const_bytes, tm->upload_ms, way, tm->pin_ms, tm->wait_ms,
            weights ? "; weights from " : "", weights ? weights : "");
}

TBDEF tb_result tb_model_load(const tb_model_desc *desc, tb_model **out, tb_error *err) {
    tb_model *m;
    tb__ctx c;
    double t[8];
    tb_result r;
    uint32_t j;
    int pushed = 0, beside = 0;
    pthread_t kt;
    tb__model_kernels kj;
    tb_weights *w = NULL;
    if (!out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "out is NULL");
    *out = NULL;
    if (!desc) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "desc is NULL");
    if (!desc->bundle) /* the usual cause: a tb_bundle_read_file whose result was not checked */
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "desc.bundle is NULL: no bundle to load (did reading it fail?)");
    if (!desc->bundle->program_count)
        return tb__fail(err, tb_err_not_found, NULL, NULL, -1, 0,
                        "the bundle holds no program (export a model with the Python companion's export_model)");
    if (desc->flags & ~(TB_MODEL_GRAPH | TB_MODEL_STATIC_IO | TB_MODEL_VERIFY_WEIGHTS | TB_MODEL_SERIAL_LOAD))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "unknown model flags 0x%x", desc->flags);
    if ((desc->flags & TB_MODEL_STATIC_IO) && !(desc->flags & TB_MODEL_GRAPH))
        return tb__fail(
            err, tb_err_invalid_argument, NULL, NULL, -1, 0,
            "TB_MODEL_STATIC_IO chooses how a graph replay reaches the caller's tensors: give it with TB_MODEL_GRAPH");
    if (desc->instance_cache > TB_MAX_INSTANCE_CACHE)
        return tb__fail(err, tb_err_limit, NULL, NULL, -1, 0,
                        "desc.instance_cache is %u, over TB_MAX_INSTANCE_CACHE (%u)", desc->instance_cache,
                        (unsigned)TB_MAX_INSTANCE_CACHE);
    t[0] = tb__now();
    if ((r = tb__model_weights(desc, &w, err)) != tb_ok) return r;
    t[1] = tb__now();
    if ((r = tb_driver_load(err)) != tb_ok) {
        tb_weights_free(w);
        return r;
    }
    t[2] = tb__now();
    if (!tb__drv.cuMemAlloc || !tb__drv.cuMemFree || !tb__drv.cuMemcpyHtoD || !tb__drv.cuMemcpyDtoDAsync ||
        !tb__drv.cuMemsetD8Async || !tb__drv.cuMemsetD16Async || !tb__drv.cuMemsetD32Async ||
        !tb__drv.cuPointerGetAttribute || !tb__drv.cuMemGetAddressRange || !tb__drv.cuStreamSynchronize ||
        !tb__drv.cuMemAllocHost || !tb__drv.cuMemFreeHost || !tb__drv.cuMemcpyHtoDAsync || !tb__drv.cuEventCreate ||
        !tb__drv.cuEventRecord || !tb__drv.cuEventSynchronize || !tb__drv.cuEventDestroy || !tb__drv.cuStreamCreate ||
        !tb__drv.cuStreamDestroy) {
        tb_weights_free(w);
        return tb__fail(err, tb_err_no_driver, NULL, NULL, -1, 0, "the driver lacks the memory calls a model needs");
    }
    c = tb__ctx_from(desc->options);
    if (!(m = (tb_model *)tb__alloc(&c, sizeof *m))) {
        tb_weights_free(w);
        return TB__OOM(err);
    }
    memset(m, 0, sizeof *m);
    m->ctx = c, m->bundle = desc->bundle, m->flags = desc->flags;
    m->constants = desc->bundle->programs[0]->constants, m->constant_count = desc->bundle->programs[0]->constant_count;
    m->upload_chunk = desc->upload_chunk ? desc->upload_chunk : TB__UPLOAD_CHUNK;
    m->pinned_min = desc->pinned_upload_min ? desc->pinned_upload_min : TB_UPLOAD_PINNED_MIN;
    m->staging_bound = desc->pinned_staging_bytes ? desc->pinned_staging_bytes : TB_UPLOAD_STAGING;
    m->upload_threads = tb__upload_threads(desc->upload_threads);
    m->times.weights_ms = w ? (t[1] - t[0]) * 1e3 : 0, m->times.driver_ms = (t[2] - t[1]) * 1e3;
    m->inst_cap = desc->instance_cache ? desc->instance_cache : 8;
    if (desc->options) m->options = *desc->options;
    if (!(m->progs = (tb__model_prog *)tb__alloc(&c, desc->bundle->program_count * sizeof *m->progs))) {
        tb__free(&c, m);
        tb_weights_free(w);
        return TB__OOM(err);
    }
    memset(m->progs, 0, desc->bundle->program_count * sizeof *m->progs);
    m->prog_count = desc->bundle->program_count;
    for (j = 0; j < m->prog_count; j++) m->progs[j].p = desc->bundle->programs[j];
    t[3] = tb__now();
    if ((r = tb__model_context(m, desc->device, &pushed, err)) != tb_ok) goto fail;
    t[4] = tb__now();
    if (desc->table) {
        if (desc->table->bundle != desc->bundle) {
            r = tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "desc->table was made from another bundle");
            goto fail;
        }
        m->table = desc->table;
    } else {
        tb_load_options lo;
        memset(&lo, 0, sizeof lo);
        lo.device = desc->device;
        if ((r = tb_kernel_table_create(desc->bundle, desc->options, &lo, TB_TABLE_LAZY, &m->table, err)) != tb_ok)
            goto fail;
        m->own_table = 1;
    }
    /* the constants' memory, then their upload on this thread while the
       kernels load on another: a model's modules take tens of
       milliseconds to load, its weights' upload as long or longer */
    t[5] = tb__now();
    if ((r = tb__model_const_memory(m, err)) != tb_ok) goto fail;
    t[6] = tb__now();
    memset(&kj, 0, sizeof kj);
    kj.m = m;
    if (!(desc->flags & TB_MODEL_SERIAL_LOAD)) beside = pthread_create(&kt, NULL, tb__model_kernels_run, &kj) == 0;
    else tb__model_kernels_run(&kj); /* in order: the kernels, then the upload */
    t[7] = tb__now();
    /* (beside, kj is the thread's until the join: the upload runs whatever
       the kernels give) */
    r = beside || kj.r == tb_ok ? tb__model_upload(m, w, 0, &m->times, err) : tb_ok;
    m->times.upload_ms = (tb__now() - t[7]) * 1e3;
    if (beside) pthread_join(kt, NULL);
    else if (!(desc->flags & TB_MODEL_SERIAL_LOAD) && r == tb_ok)
        tb__model_kernels_run(&kj); /* no thread to be had: after the upload */
    if (kj.r != tb_ok) { /* the kernels' failure first, as a serial load meets it */
        if (err) *err = kj.err;
        r = kj.r;
    }
    if (r != tb_ok) goto fail;
    for (j = 0; j < m->prog_count; j++) {
        tb__model_prog *mp = &m->progs[j];
        if (mp->ws_bytes > m->ws_bytes) m->ws_bytes = mp->ws_bytes;
        mp->static_io =
            (m->flags & TB_MODEL_GRAPH) && ((m->flags & TB_MODEL_STATIC_IO) || tb__model_needs_static_io(mp));
    }
    t[7] = tb__now();
    if ((r = tb__model_memory(m, err)) != tb_ok) goto fail;
    tb__model_load_report(m, t, kj.ms, beside, desc->flags, w ? desc->weights : NULL);
    tb_weights_free(w);
    if (pushed) tb__leave(pushed);
    *out = m;
    return tb_ok;
fail:
    tb_weights_free(w);
    if (pushed) tb__leave(pushed);
    tb__model_release(m);
    return r;
}

/* A tensor's dtype, rank, sizes and strides as a message shows them. */
static void tb__tensor_text(char *out, size_t cap, uint32_t dtype, uint32_t rank, const int64_t *shape,
                            const int64_t *strides) {
    size_t a = 0;
    uint32_t d, shown = rank < TB_MAX_TENSOR_DIMS ? rank : TB_MAX_TENSOR_DIMS;
    const char *dn = tb_dtype_name(dtype);
    if (dn) a += (size_t)snprintf(out + a, cap - a, "%s", dn);
    else a += (size_t)snprintf(out + a, cap - a, "dtype %u", dtype);
    if (a < cap && rank > TB_MAX_TENSOR_DIMS) {
        snprintf(out + a, cap - a, " of rank %u (over %u)", rank, (unsigned)TB_MAX_TENSOR_DIMS);
        return;
    }
    if (a < cap) a += (size_t)snprintf(out + a, cap - a, " rank %u [", rank);
    for (d = 0; d < shown && a < cap; d++)
        a += (size_t)snprintf(out + a, cap - a, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (a < cap) a += (size_t)snprintf(out + a, cap - a, "] strides [");
    for (d = 0; d < shown && a < cap; d++)
        a += (size_t)snprintf(out + a, cap - a, "%s%lld", d ? ", " : "", (long long)strides[d]);
    if (a < cap) snprintf(out + a, cap - a, "]");
}

/* Do the driver's allocations hold bytes [p, p + n)? The allocation that
   holds p, then (for memory mapped in pieces, cuMemMap) the one right
   after it, until n bytes are covered. *have: the bytes found. */
static int tb__device_range_holds(uint64_t p, uint64_t n, uint64_t *have) {
    uint64_t at = p, end = p + n;
    int k;
    *have = 0;
    for (k = 0; k < 64 && at < end; k++) {
        uint64_t base = 0;
        size_t size = 0;
        if (tb__drv.cuMemGetAddressRange(&base, &size, at) != 0 || at < base || at - base >= size) return 0;
        at = base + size < base ? UINT64_MAX : base + size;
        *have = (at < end ? at : end) - p;
    }
    return at >= end;
}

/* One caller tensor against its spec; then, once per pointer, its device
   and that its allocation holds its extent. *moved: the pointer is not the
   one checked last time (the overlap check must run again). */
static tb_result tb__model_check(tb_model *m, const tb_tensor *t, const tb_tensor_spec *s, const char *what,
                                 uint64_t *checked, int *moved, tb_error *err) {
    uint32_t d;
    int match = t->dtype == s->dtype && t->rank == s->rank, ordinal = -1;
    uint64_t extent, have;
    tb__CUresult cr;
    for (d = 0; match && d < s->rank; d++) match = t->shape[d] == s->shape[d] && t->strides[d] == s->strides[d];
    if (!match) {
        char want[200], got[200];
        tb__tensor_text(want, sizeof want, s->dtype, s->rank, s->shape, s->strides);
        tb__tensor_text(got, sizeof got, t->dtype, t->rank, t->shape, t->strides);
        return tb__fail(err, tb_err_arg_mismatch, NULL, NULL, -1, 0, "%s \"%.80s\": expected %s, got %s", what, s->name,
                        want, got);
    }
    if ((uintptr_t)t->data % s->align)
        return tb__fail(err, tb_err_misaligned, NULL, NULL, -1, 0,
                        "%s \"%.80s\": data %p is not a multiple of %u bytes", what, s->name, t->data, s->align);
    extent = tb_tensor_spec_extent(s);
    if (!t->data && extent)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "%s \"%.80s\": data is NULL", what, s->name);
    if (checked && *checked == (uint64_t)(uintptr_t)t->data) return tb_ok;
    if (moved) *moved = 1;
    if (!t->data) {
        if (checked) *checked = 0;
        return tb_ok;
    }
    cr = tb__drv.cuPointerGetAttribute(&ordinal, TB__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (uint64_t)(uintptr_t)t->data);
    if (cr != 0 || ordinal != m->device)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "%s \"%.80s\": data %p is not memory of CUDA device %d (%s %d)", what, s->name, t->data,
                        m->device, cr ? "not device memory: driver error" : "it is on device", cr ? cr : ordinal);
    if (!tb__device_range_holds((uint64_t)(uintptr_t)t->data, extent, &have))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "%s \"%.80s\": it needs %llu bytes from %p, and the allocation there holds %llu of them", what,
                        s->name, (unsigned long long)extent, t->data, (unsigned long long)have);
    if (checked) *checked = (uint64_t)(uintptr_t)t->data;
    return tb_ok;
}

/* No tensor the program writes (an output, an input a step may write)
   shares a byte with another tensor or with the caller's workspace, and
   the workspace shares none with any: CUDA leaves overlapping copies
   undefined, and a kernel would read what another step wrote. Inputs the
   program only reads may share bytes with each other. The extents in
   start order, each against those before it that still reach it. */
typedef struct tb__span {
    uint64_t start, end;
    uint32_t index;              /* inputs, then outputs, then the workspace */
    int written;
} tb__span;
static int tb__cmp_span(const void *a, const void *b) {
    const tb__span *x = (const tb__span *)a, *y = (const tb__span *)b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}
static const char *tb__span_name(const tb_program *p, uint32_t i, const char **what) {
    if (i < p->input_count) return *what = "input", p->inputs[i].name;
    if (i < p->input_count + p->output_count) return *what = "output", p->outputs[i - p->input_count].name;
    return *what = "the", "workspace";
}
static tb_result tb__model_check_overlap(tb_model *m, const tb__model_prog *mp, const tb_tensor *in,
                                         const tb_tensor *out, uint64_t ws, uint64_t ws_bytes, tb_error *err) {
    const tb_program *p = mp->p;
    uint32_t nin = p->input_count, n = nin + p->output_count, count = 0, i, j, live = 0;
    tb__span small[16], *sp = small;
    uint32_t small_live[16], *act = small_live;
    tb_result r = tb_ok;
    if ((size_t)n + 1 > 16) {
        sp = (tb__span *)tb__alloc(&m->ctx, ((size_t)n + 1) * (sizeof *sp + sizeof *act));
        if (!sp) return TB__OOM(err);
        act = (uint32_t *)(sp + n + 1);
    }
    for (i = 0; i <= n; i++) {
        uint64_t a = i == n ? ws : (uint64_t)(uintptr_t)(i < nin ? in[i].data : out[i - nin].data);
        uint64_t e = i == n ? ws_bytes : tb_tensor_spec_extent(i < nin ? &p->inputs[i] : &p->outputs[i - nin]);
        if (!a || !e) continue;
        sp[count].start = a, sp[count].end = a + e < a ? UINT64_MAX : a + e;
        sp[count].index = i, sp[count++].written = i == n || mp->written[i];
    }
    qsort(sp, count, sizeof *sp, tb__cmp_span);
    for (i = 0; i < count && r == tb_ok; i++) {
        uint32_t keep = 0;
        for (j = 0; j < live; j++) /* those before it that still reach it overlap it */
            if (sp[act[j]].end > sp[i].start) act[keep++] = act[j];
        live = keep;
        for (j = 0; j < live && r == tb_ok; j++) {
            const tb__span *o = &sp[act[j]];
            const char *w1, *w2, *n1, *n2;
            if (!o->written && !sp[i].written) continue;
            n1 = tb__span_name(p, o->index, &w1), n2 = tb__span_name(p, sp[i].index, &w2);
            r = tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                         "%s \"%.60s\" (%p, %llu bytes) and %s \"%.60s\" (%p, %llu bytes) share bytes: a tensor the "
                         "program writes shares none with another tensor or the workspace (only inputs it reads may "
                         "share bytes)",
                         w1, n1, (void *)(uintptr_t)o->start, (unsigned long long)(o->end - o->start), w2, n2,
                         (void *)(uintptr_t)sp[i].start, (unsigned long long)(sp[i].end - sp[i].start));
        }
        act[live++] = i;
    }
    if (sp != small) tb__free(&m->ctx, sp);
    return r;
}

/* shared: the run of a caller's workspace (other threads), which
   remembers nothing of the tensors it checked */
static tb_result tb__model_check_io(tb_model *m, tb__model_prog *mp, const tb_tensor *in, uint32_t nin,
                                    const tb_tensor *out, uint32_t nout, int shared, uint64_t ws, tb_error *err) {
    const tb_program *p = mp->p;
    uint32_t i;
    int moved = 0;
    tb_result r;
    if (nin != p->input_count || nout != p->output_count)
        return tb__fail(err, tb_err_arg_mismatch, NULL, NULL, -1, 0,
                        "%u input%s and %u output%s given; program \"%.80s\" takes %u and %u", nin, nin == 1 ? "" : "s",
                        nout, nout == 1 ? "" : "s", p->name, p->input_count, p->output_count);
    if ((nin && !in) || (nout && !out))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "the %s array is NULL; program \"%.80s\" takes %u %s (an array of tb_tensor)",
                        nin && !in ? "inputs" : "outputs", p->name, nin && !in ? nin : nout,
                        nin && !in ? "inputs" : "outputs");
    for (i = 0; i < nin; i++)
        if ((r = tb__model_check(m, &in[i], &p->inputs[i], "input", shared ? NULL : &mp->checked[i], &moved, err)) !=
            tb_ok)
            /* a shared run writes nothing of the model's: other threads run it */
            return shared ? r : (mp->io_ok = 0, r);
    for (i = 0; i < nout; i++)
        if ((r = tb__model_check(m, &out[i], &p->outputs[i], "output", shared ? NULL : &mp->checked[nin + i], &moved,
                                 err)) != tb_ok)
            return shared ? r : (mp->io_ok = 0, r);
    if (!shared && !moved && mp->io_ok) return tb_ok; /* the same pointers as last time: checked then */
    r = tb__model_check_overlap(m, mp, in, out, shared ? ws : 0, shared ? m->ws_bytes : 0, err);
    if (!shared) mp->io_ok = r == tb_ok;
    return r;
}

/* The launch parameters of step s for these tensors and workspace. */
static void tb__model_params(const tb_model *m, const tb__model_prog *mp, const tb__model_step *ms, const tb_tensor *in,
                             const tb_tensor *out, uint64_t ws, void *stream, tb_arg *args, tb_launch_params *lp) {
    uint32_t q;
    memcpy(args, ms->args, ms->st->operand_count * sizeof *args);
    for (q = ms->ptr_begin; q < ms->ptr_end; q++)
        args[mp->ptrs[q].slot].u = tb__model_addr(m, mp, &mp->ptrs[q].op, in, out, ws);
    memset(lp, 0, sizeof *lp);
    memcpy(lp->grid, ms->st->grid, sizeof lp->grid);
    lp->stream = stream;
    lp->args = args;
    lp->arg_count = ms->st->operand_count;
    if (ms->global_bytes) lp->global_scratch = (void *)(uintptr_t)(ws + mp->global_off);
    if (ms->profile_bytes) lp->profile_scratch = (void *)(uintptr_t)(ws + mp->profile_off);
}

/* Every step, in order, on stream. */
TB__STEP_KINDS_HANDLED(3, model_steps_run);
static tb_result tb__model_steps_run(const tb_model *m, const tb__model_prog *mp, const tb_tensor *in,
                                     const tb_tensor *out, uint64_t ws, void *stream, tb_error *err) {
    tb_arg args[TB_MAX_ARGS];
    tb_launch_params lp;
    uint32_t s;
    tb_result r;
    tb__CUresult cr = 0;
    for (s = 0; s < mp->p->step_count; s++) {
        const tb__model_step *ms = &mp->steps[s];
        const tb_program_step *st = ms->st;
        uint64_t dst;
        if (st->kind == TB_STEP_LAUNCH) {
            if (ms->skip) continue;
            tb__model_params(m, mp, ms, in, out, ws, stream, args, &lp);
            if ((r = tb_launch(ms->k, &lp, err)) != tb_ok) return tb__at_step(err, r, mp->p, s);
            continue;
        }
        if (!st->count) /* a copy or memset of nothing (a size 0, common with symbols): no driver call, whose
                           destination may be address 0; the same in a graph's capture */
            continue;
        dst = tb__model_addr(m, mp, &st->operands[0], in, out, ws);
        switch (st->kind) {
        case TB_STEP_COPY:
            cr = tb__drv.cuMemcpyDtoDAsync(dst, tb__model_addr(m, mp, &st->operands[1], in, out, ws), (size_t)st->count,
                                           stream);
            break;
        case TB_STEP_MEMSET:
            if (st->width == 1)
                cr = tb__drv.cuMemsetD8Async(dst, (unsigned char)st->value, (size_t)st->count, stream);
            else if (st->width == 2)
                cr = tb__drv.cuMemsetD16Async(dst, (unsigned short)st->value, (size_t)st->count, stream);
            else
                cr = tb__drv.cuMemsetD32Async(dst, st->value, (size_t)st->count, stream);
            break;
        }
        if (cr)
            return tb__at_step(err,
                               tb__cufail(err, cr, tb_err_cuda, NULL,
                                          st->kind == TB_STEP_COPY ? "cuMemcpyDtoDAsync" : "cuMemsetAsync", "%s", ""),
                               mp->p, s);
    }
    return tb_ok;
}

/* Static-io graph runs read and write these in place of the caller's. */
static void tb__model_static_tensors(const tb__model_prog *mp, tb_tensor *in, tb_tensor *out) {
    uint32_t i;
    for (i = 0; i < mp->p->input_count; i++) in[i].data = (void *)(uintptr_t)mp->io_dev[i];
    for (i = 0; i < mp->p->output_count; i++) out[i].data = (void *)(uintptr_t)mp->io_dev[mp->p->input_count + i];
}

/* Captures the program's steps into its graph (its first graph run). */
static tb_result tb__model_capture(tb_model *m, tb__model_prog *mp, const tb_tensor *in, const tb_tensor *out,
                                   void *stream, tb_error *err) {
    tb_result r;
    uint32_t i;
    if ((r = tb_graph_begin(stream, &m->options, &mp->graph, err)) != tb_ok) return r;
    r = tb__model_steps_run(m, mp, in, out, m->ws, stream, err);
    if (r == tb_ok) r = tb_graph_end(mp->graph, err);
    if (r != tb_ok) {
        tb_graph_free(mp->graph);
        mp->graph = NULL;
        return r;
    }
    for (i = 0; i < mp->p->input_count; i++) mp->io_graph[i] = (uint64_t)(uintptr_t)in[i].data;
    for (i = 0; i < mp->p->output_count; i++) mp->io_graph[mp->p->input_count + i] = (uint64_t)(uintptr_t)out[i].data;
    return tb_ok;
}

/* Points the graph's launches at new inputs and outputs: only those
   launches that read a tensor whose pointer changed. */
/* launches only: a memset or copy that touches io makes its program static-io */
TB__STEP_KINDS_HANDLED(3, model_update);
static tb_result tb__model_update(tb_model *m, tb__model_prog *mp, const tb_tensor *in, const tb_tensor *out,
                                  void *stream, tb_error *err) {
    tb_arg args[TB_MAX_ARGS];
    tb_launch_params lp;
    uint32_t s, q, nin = mp->p->input_count, n = nin + mp->p->output_count;
    int any = 0;
    tb_result r;
    for (q = 0; q < n && !any; q++)
        any = mp->io_graph[q] != (uint64_t)(uintptr_t)(q < nin ? in[q].data : out[q - nin].data);
    if (!any) return tb_ok;
    for (s = 0; s < mp->p->step_count; s++) {
        const tb__model_step *ms = &mp->steps[s];
        int touched = 0;
        if (ms->st->kind != TB_STEP_LAUNCH || ms->skip) continue;
        for (q = ms->ptr_begin; q < ms->ptr_end && !touched; q++) {
            const tb_operand *o = &mp->ptrs[q].op;
            if (o->space == TB_SPACE_INPUT) touched = mp->io_graph[o->index] != (uint64_t)(uintptr_t)in[o->index].data;
            if (o->space == TB_SPACE_OUTPUT)
                touched = mp->io_graph[nin + o->index] != (uint64_t)(uintptr_t)out[o->index].data;
        }
        if (!touched) continue;
        tb__model_params(m, mp, ms, in, out, m->ws, stream, args, &lp);
        if ((r = tb_graph_update(mp->graph, ms->launch, &lp, err)) != tb_ok) {
            tb_graph_free(mp->graph); /* some nodes moved, some not: the next run captures again */
            mp->graph = NULL;
            return tb__at_step(err, r, mp->p, s);
        }
    }
    for (q = 0; q < n; q++) mp->io_graph[q] = (uint64_t)(uintptr_t)(q < nin ? in[q].data : out[q - nin].data);
    return tb_ok;
}

/* outputs 0: the inputs into the static buffers; 1: the outputs, and the
   inputs a step may write, back out of them */
static tb_result tb__model_copy_io(const tb__model_prog *mp, const tb_tensor *in, const tb_tensor *out, int outputs,
                                   void *stream, tb_error *err) {
    const tb_program *p = mp->p;
    uint32_t i, nin = p->input_count, n = outputs ? p->output_count : nin;
    tb__CUresult cr;
    for (i = 0; outputs && i < nin; i++) {
        uint64_t e = tb_tensor_spec_extent(&p->inputs[i]);
        if (!mp->written[i] || !e) continue;
        if ((cr = tb__drv.cuMemcpyDtoDAsync((uint64_t)(uintptr_t)in[i].data, mp->io_dev[i], (size_t)e, stream)) != 0)
            return tb__cufail(err, cr, tb_err_cuda, NULL, "cuMemcpyDtoDAsync", "input \"%.80s\"", p->inputs[i].name);
    }
    for (i = 0; i < n; i++) {
        const tb_tensor_spec *s = outputs ? &p->outputs[i] : &p->inputs[i];
        uint64_t e = tb_tensor_spec_extent(s), dev = mp->io_dev[outputs ? nin + i : i];
        uint64_t user = (uint64_t)(uintptr_t)(outputs ? out[i].data : in[i].data);
        if (!e) continue;
        cr = outputs ? tb__drv.cuMemcpyDtoDAsync(user, dev, (size_t)e, stream)
                     : tb__drv.cuMemcpyDtoDAsync(dev, user, (size_t)e, stream);
        if (cr)
            return tb__cufail(err, cr, tb_err_cuda, NULL, "cuMemcpyDtoDAsync", "%s \"%.80s\"",
                              outputs ? "output" : "input", s->name);
    }
    return tb_ok;
}

/* The caller's workspace: device memory of this device that holds
   ws_bytes, 256-byte aligned (checked on every call: such runs remember
   nothing between calls). */
static tb_result tb__model_check_workspace(tb_model *m, void *workspace, tb_error *err) {
    int ordinal = -1;
    uint64_t have;
    tb__CUresult cr;
    if (!m || !m->ws_bytes) return tb_ok;
    if (!workspace || ((uintptr_t)workspace % TB__MODEL_ALIGN))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "the workspace must be device memory of %llu bytes, 256-byte aligned (got %p)",
                        (unsigned long long)m->ws_bytes, workspace);
    cr = tb__drv.cuPointerGetAttribute(&ordinal, TB__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                       (uint64_t)(uintptr_t)workspace);
    if (cr != 0 || ordinal != m->device)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "the workspace %p is not memory of CUDA device %d (%s %d)", workspace, m->device,
                        cr ? "not device memory: driver error" : "it is on device", cr ? cr : ordinal);
    if (!tb__device_range_holds((uint64_t)(uintptr_t)workspace, m->ws_bytes, &have))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "the workspace needs %llu bytes from %p, and the allocation there holds %llu of them",
                        (unsigned long long)m->ws_bytes, workspace, (unsigned long long)have);
    return tb_ok;
}
/* (2.6) The instance of program mp at the symbols' values v, made into
   *ip (zeroed): the program specialized (checked as a reader checks one),
   its steps resolved; its tensors and workspace within the model's, which
   were sized at every maximum. On failure *ip holds nothing. */
static tb_result tb__model_instance_make(tb_model *m, tb__model_prog *mp, const int64_t *v, tb__model_prog *ip,
                                         tb_error *err) {
    uint32_t i, n;
    tb_result r;
    memset(ip, 0, sizeof *ip);
    memcpy(ip->key, v, mp->p->symbol_count * sizeof *v);
    if ((r = tb_program_specialize(m->bundle, mp->p, v, &ip->own, err)) != tb_ok) return r; /* its message says v */
    n = ip->own->input_count + ip->own->output_count;
    ip->p = ip->own;
    ip->static_io = mp->static_io;
    ip->io_dev = mp->io_dev; /* sized at every maximum: an instance's tensors fit (checked below) */
    if ((r = tb__model_steps(m, ip, err)) == tb_ok && (r = tb__model_written(m, ip, err)) == tb_ok) {
        if (ip->ws_bytes > m->ws_bytes)
            r = tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                         "program \"%.80s\" needs %llu bytes of workspace at these sizes, more than at every maximum "
                         "(%llu)", mp->p->name, (unsigned long long)ip->ws_bytes, (unsigned long long)m->ws_bytes);
        for (i = 0; r == tb_ok && i < n; i++) {
            const tb_tensor_spec *a =
                i < ip->p->input_count ? &ip->p->inputs[i] : &ip->p->outputs[i - ip->p->input_count];
            const tb_tensor_spec *z =
                i < mp->p->input_count ? &mp->p->inputs[i] : &mp->p->outputs[i - mp->p->input_count];
            if (tb_tensor_spec_extent(a) > tb_tensor_spec_extent(z))
                r = tb__fail(err, tb_err_malformed, NULL, NULL, -1, 0,
                             "program \"%.80s\": %s \"%.80s\" holds more bytes at these sizes than at every maximum",
                             mp->p->name, i < ip->p->input_count ? "input" : "output", a->name);
        }
        if (r != tb_ok) tb__at_values(err, r, mp->p, v);
    }
    if (r == tb_ok && (!(ip->checked = (uint64_t *)tb__alloc(&m->ctx, (n ? n : 1) * sizeof(uint64_t))) ||
                       !(ip->io_graph = (uint64_t *)tb__alloc(&m->ctx, (n ? n : 1) * sizeof(uint64_t)))))
        r = TB__OOM(err);
    if (r == tb_ok) memset(ip->checked, 0, (n ? n : 1) * sizeof(uint64_t));
    if (r != tb_ok) tb__model_prog_free(m, ip);
    return r;
}

/* (2.6) The instance of a program with symbols for these inputs: the
   symbols bound from their sizes, then the model's instance of those
   values, made when it is new (and only then put in place of the least
   recently used one when the cache is full: a size refused evicts
   nothing). One thread at a time, as every run but the caller's-workspace
   ones (tb__model_run makes those an instance of their own). */
static tb_result tb__model_instance(tb_model *m, tb__model_prog *mp, const tb_tensor *in, uint32_t nin,
                                    tb__model_prog **out, tb_error *err) {
    int64_t v[TB_MAX_PROGRAM_SYMBOLS];
    uint32_t i, k = mp->p->symbol_count, at = 0;
    tb__model_prog fresh;
    tb_result r;
    if ((r = tb__program_bind(mp->p, in, nin, v, 1, err)) != tb_ok) return r;
    m->runs++;
    for (i = 0; i < mp->inst_count; i++)
        if (!memcmp(mp->inst[i].key, v, k * sizeof *v)) {
            mp->inst[i].used = m->runs;
            *out = &mp->inst[i];
            return tb_ok;
        }
    if (!mp->inst && !(mp->inst = (tb__model_prog *)tb__alloc(&m->ctx, m->inst_cap * sizeof *mp->inst)))
        return TB__OOM(err);
    if ((r = tb__model_instance_make(m, mp, v, &fresh, err)) != tb_ok) return r;
    if (mp->inst_count < m->inst_cap) {
        at = mp->inst_count++;
    } else {
        for (i = 1; i < mp->inst_count; i++)
            if (mp->inst[i].used < mp->inst[at].used) at = i;
        tb__model_prog_free(m, &mp->inst[at]);
    }
    mp->inst[at] = fresh;
    mp->inst[at].used = m->runs;
    tb__log(&m->ctx, TB_LOG_DEBUG, "model: program \"%.80s\" at new sizes: instance %u of %u", mp->p->name, at,
            m->inst_cap);
    *out = &mp->inst[at];
    return tb_ok;
}

TBDEF tb_result tb_model_output_specs(tb_model *m, uint32_t program, const tb_tensor *in, uint32_t nin,
                                      tb_tensor_spec *outputs, uint32_t nout, tb_error *err) {
    int64_t v[TB_MAX_PROGRAM_SYMBOLS];
    const tb_program *p;
    tb__model_prog local;
    uint32_t i;
    int pushed = 0;
    tb__CUresult cr;
    tb_result r;
    if (!m || program >= m->prog_count || (nout && !outputs))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "model is NULL, program %u does not exist or outputs is NULL", program);
    p = m->progs[program].p;
    if (nout != p->output_count)
        return tb__fail(err, tb_err_arg_mismatch, NULL, NULL, -1, 0,
                        "%u output specs asked; program \"%.80s\" has %u outputs", nout, p->name, p->output_count);
    for (i = 0; i < nout; i++) outputs[i] = p->outputs[i];
    if (!p->symbol_count) return tb_ok;
    if ((r = tb__program_bind(p, in, nin, v, 1, err)) != tb_ok) return r;
    /* the instance a run would make at these values, with every check of
       it (issue 38 #7: never sizes a run refuses), made and freed here as
       a run with the caller's workspace does */
    if ((cr = tb__model_enter(m, &pushed)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuCtxPushCurrent", "%s", "");
    if ((r = tb__model_instance_make(m, &m->progs[program], v, &local, err)) == tb_ok) {
        for (i = 0; i < nout; i++) outputs[i] = local.p->outputs[i];
        tb__model_prog_free(m, &local);
    }
    tb__leave(pushed);
    return r;
}

static tb_result tb__model_run(tb_model *m, uint32_t program, const tb_tensor *in, uint32_t nin, const tb_tensor *out,
                               uint32_t nout, uint64_t ws, void *stream, int graph, int shared, tb_error *err) {
    tb__model_prog *mp, local, *own = NULL;
    tb_result r;
    int pushed = 0;
    tb__CUresult cr;
    if (!m) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "model is NULL");
    if (program >= m->prog_count)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "program %u does not exist: the model has %u (0 to %u)", program, m->prog_count,
                        m->prog_count - 1);
    mp = &m->progs[program];
    if (graph && !stream)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "graph replay (TB_MODEL_GRAPH) needs a stream: the legacy NULL stream cannot be captured");
    /* the checks of the caller's memory ask the driver about allocations,
       which it answers only in a current context: enter first */
    if ((cr = tb__model_enter(m, &pushed)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuCtxPushCurrent", "%s", "");
    r = shared ? tb__model_check_workspace(m, (void *)(uintptr_t)ws, err) : tb_ok;
    if (r == tb_ok && mp->p->symbol_count && !shared) {
        r = tb__model_instance(m, mp, in, nin, &mp, err);
    } else if (r == tb_ok && mp->p->symbol_count) {
        /* with the caller's workspace, from several threads: an instance of
           this call's own, made and freed here (the model's are not
           shared across threads) */
        int64_t v[TB_MAX_PROGRAM_SYMBOLS];
        if ((r = tb__program_bind(mp->p, in, nin, v, 1, err)) == tb_ok &&
            (r = tb__model_instance_make(m, mp, v, &local, err)) == tb_ok)
            mp = own = &local;
    }
    if (r == tb_ok) r = tb__model_check_io(m, mp, in, nin, out, nout, shared, ws, err);
    if (r != tb_ok) {
        /* refused: nothing ran */
    } else if (!graph) {
        r = tb__model_steps_run(m, mp, in, out, ws, stream, err);
    } else if (mp->static_io) {
        tb_tensor sin[1], sout[1], *si = NULL, *so = NULL;
        r = tb_ok;
        if (!mp->graph) { /* the graph reads and writes the static buffers */
            size_t a = (size_t)nin * sizeof(tb_tensor), b = (size_t)nout * sizeof(tb_tensor);
            si = nin ? (tb_tensor *)tb__alloc(&m->ctx, a) : sin;
            so = nout ? (tb_tensor *)tb__alloc(&m->ctx, b) : sout;
            if (!si || !so) r = TB__OOM(err);
            if (r == tb_ok) {
                if (nin) memcpy(si, in, a);
                if (nout) memcpy(so, out, b);
                tb__model_static_tensors(mp, si, so);
                r = tb__model_capture(m, mp, si, so, stream, err);
            }
            if (si && si != sin) tb__free(&m->ctx, si);
            if (so && so != sout) tb__free(&m->ctx, so);
        }
        if (r == tb_ok) r = tb__model_copy_io(mp, in, out, 0, stream, err);
        if (r == tb_ok) r = tb_graph_launch(mp->graph, stream, err);
        if (r == tb_ok) r = tb__model_copy_io(mp, in, out, 1, stream, err);
    } else {
        r = mp->graph ? tb__model_update(m, mp, in, out, stream, err) : tb__model_capture(m, mp, in, out, stream, err);
        if (r == tb_ok) r = tb_graph_launch(mp->graph, stream, err);
    }
    if (own) tb__model_prog_free(m, own); /* the launches copied their arguments: nothing queued reads it */
    tb__leave(pushed);
    return r;
}

TBDEF tb_result tb_model_execute(tb_model *m, const tb_run_desc *d, tb_error *err) {
    int shared;
    if (!d) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "desc is NULL");
    if (d->flags & ~TB_RUN_NO_GRAPH)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0,
                        "run flags 0x%x: unknown bits 0x%x (TB_RUN_NO_GRAPH is 0x%x)", d->flags,
                        d->flags & ~TB_RUN_NO_GRAPH, TB_RUN_NO_GRAPH);
    shared = d->workspace != NULL;
    return tb__model_run(m, d->program, d->inputs, d->input_count, d->outputs, d->output_count,
                         shared ? (uint64_t)(uintptr_t)d->workspace : m ? m->ws : 0, d->stream,
                         !shared && !(d->flags & TB_RUN_NO_GRAPH) && m && (m->flags & TB_MODEL_GRAPH), shared, err);
}
/* the calls of 2.3 to 2.6, one line each (a NULL workspace, which the
   tb_run_desc means as the model's own, is refused here as it always was) */
TBDEF tb_result tb_model_run(tb_model *m, const tb_tensor *in, uint32_t nin, const tb_tensor *out, uint32_t nout,
                             void *stream, tb_error *err) {
    return tb_model_run_program(m, 0, in, nin, out, nout, stream, err);
}
TBDEF tb_result tb_model_run_program(tb_model *m, uint32_t program, const tb_tensor *in, uint32_t nin,
                                     const tb_tensor *out, uint32_t nout, void *stream, tb_error *err) {
    tb_run_desc d = {program, in, nin, out, nout, NULL, stream, 0};
    return tb_model_execute(m, &d, err);
}
TBDEF tb_result tb_model_run_program_workspace(tb_model *m, uint32_t program, const tb_tensor *in, uint32_t nin,
                                               const tb_tensor *out, uint32_t nout, void *workspace, void *stream,
                                               tb_error *err) {
    tb_run_desc d = {program, in, nin, out, nout, workspace, stream, 0};
    return workspace ? tb_model_execute(m, &d, err)
                     : tb__model_run(m, program, in, nin, out, nout, 0, stream, 0, 1, err);
}
TBDEF tb_result tb_model_run_workspace(tb_model *m, const tb_tensor *in, uint32_t nin, const tb_tensor *out,
                                       uint32_t nout, void *workspace, void *stream, tb_error *err) {
    return tb_model_run_program_workspace(m, 0, in, nin, out, nout, workspace, stream, err);
}

TBDEF tb_result tb_model_reset_state(tb_model *m, void *stream, tb_error *err) {
    tb_result r;
    int pushed = 0;
    tb__CUresult cr;
    if (!m) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "model is NULL");
    if (!m->state_count) return tb_ok;
    if ((cr = tb__model_enter(m, &pushed)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuCtxPushCurrent", "%s", "");
    /* runs queued on stream may still read the state: let them finish */
    if ((cr = tb__drv.cuStreamSynchronize(stream)) != 0) {
        tb__leave(pushed);
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuStreamSynchronize", "%s", "");
    }
    r = tb__model_upload(m, NULL, 1, NULL, err); /* state is never external */
    tb__leave(pushed);
    return r;
}

/* ---------------------------------------------------------------------- */
/* >>upload  Upload (implementation only): file bytes to the device */
/* Constants read from files (a mapped bundle's, through its checked
   read path; a weights file's) go to the device in pieces: a file offset,
   a device address, a length, the file. Two ways, chosen by the bytes:
   - pageable (tb__pipe_run): one reader thread reads with pread into two
     heap buffers in turn while this thread copies the other one
     (cuMemcpyHtoD, which returns once the bytes are staged), so reads and
     copies overlap; nothing to set up, the best way for small models.
   - pinned (tb__pinned_run): a ring of page-locked slots (the staging
     area, below), which several reader threads fill with pread
     (page-cache reads run at a few GB/s per core, so one thread cannot
     keep up with the bus) while this thread queues an asynchronous copy
     of each filled one, in order, on a stream of its own and records an
     event; a slot is read into again once its copy's event has passed.
     The copy engine reads pinned memory at the bus's speed, pageable
     memory at a fraction of it; pinning costs about 1 ms a call and
     0.5 ms a MiB (an H100 host), which the staging area pays once for
     the loads that follow while a model holds it. */
typedef struct tb__piece {
    uint64_t at, dev;
    size_t n;
    int weights;                 /* from the weights file, else from the bundle */
    uint32_t konst;              /* the constant (of a group: its first), for TB_MODEL_VERIFY_WEIGHTS */
} tb__piece;
typedef struct tb__pipe {
    const tb_model *m;
    const tb_weights *w;
    const tb__piece *pieces;
    uint32_t count, slots;
    unsigned char **buf;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t filled;             /* pageable: pieces read so far */
    uint32_t *ready;             /* pinned: per slot, 1 + the piece read into it */
    uint32_t next;               /* pinned: the next piece a reader takes */
    uint32_t copied;             /* pieces whose copy is done with their buffer */
    int stop, io;                /* the copier gave up; a read failed (errno) */
    uint32_t *crc;               /* TB_MODEL_VERIFY_WEIGHTS: per piece, the CRC-32 of the bytes read for its copy */
} tb__pipe;
/* Reads a piece into dst; with q->crc, a weights piece's CRC-32 over the
   bytes read there, which are the bytes its copy takes (each entry written
   by the one thread that read the piece, read once every reader is joined). */
static int tb__piece_read(const tb__pipe *q, const tb__piece *pc, void *dst) {
    if (!pc->weights) return q->m->bundle->read_at(q->m->bundle, (size_t)pc->at, dst, pc->n);
    if (tb__weights_read_raw(q->w, pc->at, dst, pc->n) != 0) return -1;
    if (q->crc) q->crc[pc - q->pieces] = tb_crc32(0, dst, pc->n);
    return 0;
}
static void *tb__pipe_reader(void *arg) {
    tb__pipe *q = (tb__pipe *)arg;
    uint32_t k;
    for (k = 0; k < q->count; k++) {
        int e = 0;
        pthread_mutex_lock(&q->mu);
        while (!q->stop && k >= q->copied + 2) pthread_cond_wait(&q->cv, &q->mu); /* its buffer still being copied */
        if (q->stop) {
            pthread_mutex_unlock(&q->mu);
            break;
        }
        pthread_mutex_unlock(&q->mu);
        if (tb__piece_read(q, &q->pieces[k], q->buf[k & 1]) != 0) e = errno ? errno : EIO;
        pthread_mutex_lock(&q->mu);
        if (e) q->io = e, q->stop = 1;
        else q->filled = k + 1;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        if (e) break;
    }
    return NULL;
}
static TB__COLD tb_result tb__pipe_io(const tb__pipe *q, tb_error *err) {
    return tb__fail(err, tb_err_io, NULL, NULL, -1, q->io,
                    "the %s no longer holds its constants' bytes (truncated or replaced since it was read?)",
                    q->w ? "bundle file or the weights file" : "bundle file");
}
/* Reads and copies the pieces; tb_ok, tb_err_io (the file lost its bytes)
   or the failed driver call's result in *cr. */
static tb_result tb__pipe_run(tb__pipe *q, tb__CUresult *cr, tb_error *err) {
    pthread_t tid;
    uint32_t k, count = q->count;
    int threaded, io = 0;
    size_t piece = 0;
    unsigned char *buf[2] = {NULL, NULL};
    tb_result r = tb_ok;
    tb__ctx c = q->m->ctx;
    for (k = 0; k < count; k++)
        if (q->pieces[k].n > piece) piece = q->pieces[k].n;
    if (!(buf[0] = (unsigned char *)tb__alloc(&c, piece)) ||
        (count > 1 && !(buf[1] = (unsigned char *)tb__alloc(&c, piece)))) {
        tb__free(&c, buf[0]);
        return TB__OOM(err);
    }
    q->buf = buf;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    threaded = count > 1 && pthread_create(&tid, NULL, tb__pipe_reader, q) == 0;
    for (k = 0; k < count && !*cr; k++) {
        const tb__piece *pc = &q->pieces[k];
        if (!threaded) { /* one piece, or no thread to be had: in turn */
            if (tb__piece_read(q, pc, buf[0]) != 0) {
                q->io = errno ? errno : EIO;
                break;
            }
            *cr = tb__drv.cuMemcpyHtoD(pc->dev, buf[0], pc->n);
            continue;
        }
        pthread_mutex_lock(&q->mu);
        while (!q->stop && q->filled <= k) pthread_cond_wait(&q->cv, &q->mu);
        io = q->io;
        pthread_mutex_unlock(&q->mu);
        if (io) break;
        *cr = tb__drv.cuMemcpyHtoD(pc->dev, buf[k & 1], pc->n); /* pageable: done with the buffer on return */
        pthread_mutex_lock(&q->mu);
        q->copied = k + 1;
        if (*cr) q->stop = 1;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
    if (threaded) {
        pthread_mutex_lock(&q->mu);
        q->stop = 1;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        pthread_join(tid, NULL);
    }
    if (q->io) r = tb__pipe_io(q, err);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    tb__free(&c, buf[0]);
    tb__free(&c, buf[1]);
    return r;
}

/* The ring for an upload of `bytes` from files under `bound` pinned
   bytes: the most slots it uses, each slot *piece bytes, and *pin, the
   most it pins. TB_UPLOAD_PIECE, or for a bound under two of them half the
   bound (a multiple of TB__PIECE_ALIGN); as many slots as the bound holds,
   no more than the upload has pieces; pinned, 1/TB_UPLOAD_PIN_SHARE of
   the bytes (two slots at least). 0: the bound holds no two slots (the
   pageable way, which pins nothing). */
static uint32_t tb__ring_shape(uint64_t bound, uint64_t bytes, size_t *piece, uint32_t *pin) {
    uint64_t p = TB_UPLOAD_PIECE, n, share;
    if (bound > SIZE_MAX) bound = SIZE_MAX; /* slots x piece is a size_t */
    if (bound / 2 < p) p = bound / 2 / TB__PIECE_ALIGN * TB__PIECE_ALIGN;
    *piece = 0, *pin = 0;
    if (!p || !bytes) return 0;
    n = bound / p;
    if (n > bytes / p + (bytes % p != 0)) n = bytes / p + (bytes % p != 0);
    if (n > TB__RING_MOST) n = TB__RING_MOST;
    share = bytes / TB_UPLOAD_PIN_SHARE / p + (bytes / TB_UPLOAD_PIN_SHARE % p != 0);
    *piece = (size_t)p, *pin = (uint32_t)(share < 2 ? 2 : share < n ? share : n);
    if (*pin > n) *pin = (uint32_t)n;
    return (uint32_t)n;
}

/* ---- the staging area ----
   The pinned way's host memory: one area a process, pinned by the first
   pinned upload and reused by the ones after it, so that pinning is paid
   once while models stay loaded, not at every load. Its rules:
   - Bounded: an upload uses at most its model's desc.pinned_staging_bytes
     of it, and pins at most 1/TB_UPLOAD_PIN_SHARE of its bytes. The area
     is the largest ring an upload has pinned since it was pinned (pinned
     again, larger, when one needs more, the old one unpinned once the new
     one is there; never smaller: if that pinning fails the upload uses the
     area as it is, given two slots).
   - Held by the models whose uploads used it (tb_model.staged), all of
     the context it was pinned in, and freed with the last of them
     (tb_model_free, or the load that fails), its context still current.
     Not kept until the process exits: the driver frees pinned memory with
     its context, which a model's release may end (a primary context that
     the model retained is reset when its last user releases it), so an
     area kept past its models could be freed under the next upload.
     A process that loads and frees one model at a time pins at each load.
   - One upload at a time: another upload in the same context waits for it
     (both would share one bus: waiting costs no bandwidth and pins nothing
     more); an upload in another context while the area is held there pins
     a ring of its own, within its own bound, and frees it when done.
   So pinned uploads hold at most the largest bound that a load gave (and,
   while an upload pins the area again, larger, the old one beside the new
   one until the new one is there), and one bound more for each other
   context uploading at that moment. */
typedef struct tb__staging {
    tb__CUctx ctx;               /* the context it was pinned in (while it has users) */
    unsigned char *block;        /* NULL: nothing pinned */
    size_t bytes;
    uint32_t users;              /* models holding it (a load's included) */
    int busy;                    /* an upload is using it */
    uint64_t own;                /* bytes of rings pinned for one upload alone (other contexts'), pinned now */
} tb__staging;
static pthread_mutex_t tb__staging_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tb__staging_cv = PTHREAD_COND_INITIALIZER;
static tb__staging tb__stage;    /* under tb__staging_mu */

/* An upload's ring: slots x piece bytes of the staging area, or of a
   block pinned for this upload alone. */
typedef struct tb__ring {
    unsigned char *block;        /* NULL: pinning failed (the pageable way then) */
    size_t piece;
    uint32_t slots;              /* asked: the most it uses; taken: the slots it has */
    uint32_t pin;                /* asked: the most it pins */
    int area;                    /* the staging area's: given back after the upload */
    int reused;                  /* the area held enough already: nothing pinned */
    double pin_ms, wait_ms;      /* pinning; waiting for another upload to be done with the area */
} tb__ring;

/* Takes pinned slots of ring->piece bytes for m's upload: of the staging
   area, once no other upload of m's context uses it, up to ring->slots of
   them, the area pinned again if it holds fewer than ring->pin; while
   another context holds it, ring->pin slots of m's own. Returns
   cuMemAllocHost's failure (ring->block NULL then). */
static tb__CUresult tb__ring_take(tb_model *m, tb__ring *ring) {
    size_t want = (size_t)ring->pin * ring->piece, have = 0;
    unsigned char *old = NULL, *block = NULL, *unpin = NULL;
    int added = 0;
    tb__CUresult cr;
    double t0 = tb__now(), t1;
    pthread_mutex_lock(&tb__staging_mu);
    while (tb__stage.busy && !(tb__stage.users && tb__stage.ctx != m->cu_ctx))
        pthread_cond_wait(&tb__staging_cv, &tb__staging_mu);
    if (!tb__stage.users || tb__stage.ctx == m->cu_ctx) {
        tb__stage.busy = 1, tb__stage.ctx = m->cu_ctx;
        if (!m->staged) tb__stage.users++, m->staged = 1, added = 1;
        ring->area = 1;
        old = tb__stage.block, have = tb__stage.bytes;
    }
    pthread_mutex_unlock(&tb__staging_mu);
    t1 = tb__now();
    ring->wait_ms = (t1 - t0) * 1e3;
    if (ring->area && have >= want) { /* as far as the bound goes */
        ring->block = old, ring->reused = 1;
        if (have / ring->piece < ring->slots) ring->slots = (uint32_t)(have / ring->piece);
        return 0;
    }
    /* too small, or none: pinned again, the old area kept until the new
       one is there (the area is this upload's while busy: no other thread
       reads it meanwhile) */
    if ((cr = tb__drv.cuMemAllocHost((void **)&block, want)) != 0) block = NULL;
    ring->pin_ms = block ? (tb__now() - t1) * 1e3 : 0;
    ring->block = block, ring->slots = ring->pin;
    if (!ring->area) {
        if (block) {
            pthread_mutex_lock(&tb__staging_mu);
            tb__stage.own += want;
            pthread_mutex_unlock(&tb__staging_mu);
        }
        return cr;
    }
    if (block) {
        unpin = old;
        old = block, have = want;
    } else if (old && have / ring->piece >= 2) { /* the area as it is: fewer slots, still pinned */
        ring->block = old, ring->reused = 1, ring->slots = (uint32_t)(have / ring->piece);
        if (ring->slots > ring->pin) ring->slots = ring->pin;
        cr = 0;
    }
    pthread_mutex_lock(&tb__staging_mu);
    tb__stage.block = old, tb__stage.bytes = old ? have : 0;
    if (!ring->block && added) { /* a model whose pinning failed holds no area */
        tb__stage.users--, m->staged = 0;
        if (!tb__stage.users) unpin = tb__stage.block, tb__stage.block = NULL, tb__stage.bytes = 0;
    }
    pthread_mutex_unlock(&tb__staging_mu);
    if (unpin) tb__drv.cuMemFreeHost(unpin); /* m's context, the area's, current */
    return cr;
}
/* After the upload (its copies done): the area to the next upload, or
   the block of m's own unpinned. */
static void tb__ring_give(tb__ring *ring) {
    if (!ring->area) {
        if (ring->block) {
            tb__drv.cuMemFreeHost(ring->block);
            pthread_mutex_lock(&tb__staging_mu);
            tb__stage.own -= (uint64_t)ring->pin * ring->piece;
            pthread_mutex_unlock(&tb__staging_mu);
        }
    } else {
        pthread_mutex_lock(&tb__staging_mu);
        tb__stage.busy = 0;
        pthread_cond_broadcast(&tb__staging_cv);
        pthread_mutex_unlock(&tb__staging_mu);
    }
    ring->block = NULL, ring->area = 0;
}
TBDEF uint64_t tb_model_pinned_bytes(void) {
    uint64_t n;
    pthread_mutex_lock(&tb__staging_mu);
    n = (uint64_t)tb__stage.bytes + tb__stage.own;
    pthread_mutex_unlock(&tb__staging_mu);
    return n;
}
/* m lets go of the staging area; the last user unpins it, with m's
   context (the area's) current, after the lock (other contexts' uploads
   do not wait for it). unpin 0 (the context could not be entered): the
   count only; the driver frees the block with its context. */
static void tb__staging_drop(tb_model *m, int unpin) {
    unsigned char *block = NULL;
    if (!m->staged) return;
    m->staged = 0;
    pthread_mutex_lock(&tb__staging_mu);
    if (!--tb__stage.users) {
        block = tb__stage.block;
        tb__stage.block = NULL, tb__stage.bytes = 0, tb__stage.ctx = NULL;
    }
    pthread_mutex_unlock(&tb__staging_mu);
    if (block && unpin) tb__drv.cuMemFreeHost(block);
}

/* A pinned-path reader: takes the next piece, waits for its slot's last
   copy to be done, reads into it. */
static void *tb__pinned_reader(void *arg) {
    tb__pipe *q = (tb__pipe *)arg;
    for (;;) {
        uint32_t k;
        int e = 0;
        pthread_mutex_lock(&q->mu);
        for (;;) { /* the next piece, taken again after each wait: another reader may have taken it */
            k = q->next;
            if (q->stop || k >= q->count || k < q->copied + q->slots) break;
            pthread_cond_wait(&q->cv, &q->mu);
        }
        if (q->stop || k >= q->count) {
            pthread_mutex_unlock(&q->mu);
            break;
        }
        q->next = k + 1;
        pthread_mutex_unlock(&q->mu);
        if (tb__piece_read(q, &q->pieces[k], q->buf[k % q->slots]) != 0) e = errno ? errno : EIO;
        pthread_mutex_lock(&q->mu);
        if (e) q->io = e, q->stop = 1;
        else q->ready[k % q->slots] = k + 1;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        if (e) break;
    }
    return NULL;
}
/* Hands the oldest copy's slot back to the readers once the copy is done. */
static tb__CUresult tb__pinned_retire(tb__pipe *q, void *const *ev, uint32_t *done) {
    tb__CUresult cr = tb__drv.cuEventSynchronize(ev[*done % q->slots]);
    if (cr) return cr;
    ++*done;
    pthread_mutex_lock(&q->mu);
    q->copied = *done;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return 0;
}
/* The pinned way through ring (pinned already), with up to `threads`
   readers (*started: how many ran); tb_err_* for what failed before a
   copy (*cr for a copy). The copier queues each piece's copy as soon as
   it is read, in order; while it waits for a piece it retires the oldest
   copy, so that a slot goes back to the readers as soon as its bytes
   have left it. */
static tb_result tb__pinned_run(tb__pipe *q, const tb__ring *ring, uint32_t threads, uint32_t *started_out,
                                tb__CUresult *cr, tb_error *err) {
    void *stream = NULL, **ev;
    unsigned char **buf;
    uint32_t *ready;
    pthread_t *tid;
    uint32_t k, started = 0, done = 0, i, slots = ring->slots;
    const char *call = NULL;
    tb_result r = tb_ok;
    tb__ctx c = q->m->ctx;
    *started_out = 0;
    if (threads > slots) threads = slots; /* a reader needs a slot */
    ev = (void **)tb__alloc(&c, slots * sizeof *ev);
    buf = (unsigned char **)tb__alloc(&c, slots * sizeof *buf);
    ready = (uint32_t *)tb__alloc(&c, slots * sizeof *ready);
    tid = (pthread_t *)tb__alloc(&c, (threads ? threads : 1) * sizeof *tid);
    if (!ev || !buf || !ready || !tid) {
        tb__free(&c, ev), tb__free(&c, buf), tb__free(&c, ready), tb__free(&c, tid);
        return TB__OOM(err);
    }
    memset(ev, 0, slots * sizeof *ev), memset(buf, 0, slots * sizeof *buf), memset(ready, 0, slots * sizeof *ready);
    q->slots = slots, q->buf = buf, q->ready = ready;
    if ((*cr = tb__drv.cuStreamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */)) != 0) call = "cuStreamCreate";
    for (i = 0; i < slots && !call; i++)
        if ((*cr = tb__drv.cuEventCreate(&ev[i], 2 /* CU_EVENT_DISABLE_TIMING */)) != 0) call = "cuEventCreate";
        else buf[i] = ring->block + (size_t)i * ring->piece;
    if (call) goto out;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    for (i = 0; i < threads; i++)
        if (pthread_create(&tid[started], NULL, tb__pinned_reader, q) == 0) started++;
    *started_out = started;
    for (k = 0; k < q->count && !*cr; k++) {
        uint32_t s = k % slots;
        int io = 0, have;
        if (!started) { /* no thread to be had: read here */
            if (k >= slots && (*cr = tb__pinned_retire(q, ev, &done)) != 0) break;
            if (tb__piece_read(q, &q->pieces[k], buf[s]) != 0) {
                q->io = errno ? errno : EIO;
                break;
            }
        } else
            for (;;) {
                pthread_mutex_lock(&q->mu);
                have = ready[s] == k + 1;
                io = q->io;
                if (!have && !io && done == k) pthread_cond_wait(&q->cv, &q->mu); /* nothing in flight to retire */
                have = ready[s] == k + 1, io = q->io;
                pthread_mutex_unlock(&q->mu);
                if (have || io) break;
                if (done < k && (*cr = tb__pinned_retire(q, ev, &done)) != 0) break;
            }
        if (io || *cr) break;
        if ((*cr = tb__drv.cuMemcpyHtoDAsync(q->pieces[k].dev, buf[s], q->pieces[k].n, stream)) != 0 ||
            (*cr = tb__drv.cuEventRecord(ev[s], stream)) != 0)
            break;
        if (!started) continue;
        /* a reader waiting on this slot's ring: retire what is done already */
        while (done + slots <= k + 1 && !*cr) *cr = tb__pinned_retire(q, ev, &done);
    }
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (i = 0; i < started; i++) pthread_join(tid[i], NULL);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    if (!*cr) *cr = tb__drv.cuStreamSynchronize(stream);
    else tb__drv.cuStreamSynchronize(stream); /* the ring goes back after this: no copy may still read it */
    if (q->io) r = tb__pipe_io(q, err);
out:
    for (i = 0; i < slots; i++)
        if (ev[i]) tb__drv.cuEventDestroy(ev[i]);
    if (stream) tb__drv.cuStreamDestroy(stream);
    if (call && r == tb_ok)
        r = tb__cufail(err, *cr, tb_err_cuda, NULL, call, "setting up the pinned upload of %u pieces", q->count);
    tb__free(&c, ev), tb__free(&c, buf), tb__free(&c, ready), tb__free(&c, tid);
    return r;
}

/* zlib's crc32_combine: the CRC-32 of bytes A then B from A's, B's and B's
   length (A's multiplied by x^(8 len_b) modulo the polynomial, bits
   reflected: x^0 is bit 31). */
static uint32_t tb__crc_mulmod(uint32_t a, uint32_t b) {
    uint32_t m, p = 0;
    for (m = (uint32_t)1 << 31; m; m >>= 1) {
        if (a & m) p ^= b;
        b = b & 1 ? (b >> 1) ^ 0xEDB88320u : b >> 1;
    }
    return p;
}
static uint32_t tb__crc32_combine(uint32_t a, uint32_t b, uint64_t len_b) {
    uint32_t op = (uint32_t)1 << 31, sq = (uint32_t)1 << 23; /* x^0; x^8, a byte */
    for (; len_b; len_b >>= 1, sq = tb__crc_mulmod(sq, sq))
        if (len_b & 1) op = tb__crc_mulmod(sq, op);
    return tb__crc_mulmod(op, a) ^ b;
}

/* TB_MODEL_VERIFY_WEIGHTS: each EXTERNAL constant's CRC-32, its pieces'
   combined in order (none: 0, the CRC of no bytes), against the bundle's. */
static tb_result tb__model_verify_upload(const tb_model *m, const tb_weights *w, const tb__piece *pc,
                                         const uint32_t *crc, uint32_t count, tb_error *err) {
    uint32_t i, at = 0;
    for (i = 0; i < m->constant_count; i++) {
        const tb_program_constant *k = &m->constants[i];
        uint32_t c = 0;
        while (at < count && pc[at].konst < i) at++; /* the pieces are in the constants' order */
        for (; at < count && pc[at].konst == i; at++)
            if (pc[at].weights) c = tb__crc32_combine(c, crc[at], pc[at].n);
        if ((k->flags & TB_CONSTANT_EXTERNAL) && c != k->crc32)
            return tb__fail(
                err, tb_err_checksum, NULL, w->path, -1, 0,
                "constant %u \"%.100s\": the bytes of tensor \"%.100s\" read for its upload are other than at "
                "export (CRC-32 %08x, exported %08x): another checkpoint, or the file changed during the load",
                i, k->name, k->tensor, c, k->crc32);
    }
    return tb_ok;
}

/* The constants (state_only: the state ones) from the bundle and the
   weights file to the device. Constants whose bytes lie in the bundle's
   input as they lie on the device (the writer's layout: each at the next
   multiple of 64) go as one group, padding and all. A group in memory (a
   bundle read from a buffer, or copied) is copied from its bytes as they
   are; a group in a mapped file, and each EXTERNAL constant, is read in
   pieces through the checked path (pread, which a truncated file turns
   into an error where a mapping would raise SIGBUS), the pinned way from
   pinned_min bytes on (the model's bound allowing two slots), else the
   pageable way; when pinning fails (the host's locked-memory limit), the
   area as it is (tb__ring_take), else the pageable way. tm (NULL: none)
   receives how it went. */
static tb_result tb__model_upload(tb_model *m, const tb_weights *w, int state_only, tb_model_times *tm, tb_error *err) {
    const tb_program_constant *k = m->constants;
    const tb_bundle *b = m->bundle;
    tb__piece *pieces = NULL;
    uint32_t count = 0, cap = 0, slots = 0, pin = 0;
    uintptr_t base = (uintptr_t)b->map_base;
    uint32_t i = 0, j;
    uint64_t total = 0;
    size_t chunk, piece = 0;
    int pinned, pin_failed = 0;
    tb__CUresult cr = 0;
    tb_result r = tb_ok;
    tb__pipe q;
    tb__ring ring;
    /* the bytes from files first, to choose the way (and its piece size) */
    for (j = 0; j < m->constant_count; j++) {
        uintptr_t src = (uintptr_t)k[j].data;
        if (state_only && !(k[j].flags & TB_CONSTANT_STATE)) continue;
        if ((k[j].flags & TB_CONSTANT_EXTERNAL) ||
            (b->read_at && src >= base && src - base <= b->map_size && k[j].size <= b->map_size - (src - base)))
            total += k[j].size;
    }
    if (total >= m->pinned_min) slots = tb__ring_shape(m->staging_bound, total, &piece, &pin);
    pinned = slots != 0;
    chunk = pinned ? piece : m->upload_chunk;
    while (i < m->constant_count && r == tb_ok && !cr) {
        uintptr_t src = (uintptr_t)k[i].data;
        uint64_t dev = m->const_addr[i], len, off, at;
        uint32_t i_first = i;
        int ext = (k[i].flags & TB_CONSTANT_EXTERNAL) != 0;
        if (state_only && !(k[i].flags & TB_CONSTANT_STATE)) {
            i++;
            continue;
        }
        if (ext) {
            const tb_weights_tensor *t = tb_weights_find(w, k[i].tensor); /* checked at load */
            at = t->offset, len = k[i].size, j = i + 1;
        } else {
            for (j = i + 1; !state_only && j < m->constant_count; j++)
                if ((k[j].flags & TB_CONSTANT_EXTERNAL) || (uintptr_t)k[j].data - src != m->const_addr[j] - dev) break;
            len = m->const_addr[j - 1] - dev + k[j - 1].size;
            at = src - base;
        }
        i = j;
        if (!len) continue;
        if (!ext && (!b->read_at || src < base || src - base > b->map_size || len > b->map_size - (src - base))) {
            cr = tb__drv.cuMemcpyHtoD(dev, (const void *)src, (size_t)len);
            continue;
        }
        for (off = 0; off < len; off += chunk) {
            if (count == cap && !tb__grow(&m->ctx, (void **)&pieces, &cap, count + 1, sizeof *pieces)) {
                r = TB__OOM(err);
                break;
            }
            pieces[count].at = at + off;
            pieces[count].dev = dev + off;
            pieces[count].weights = ext;
            pieces[count].konst = i_first;
            pieces[count++].n = len - off < chunk ? (size_t)(len - off) : chunk;
        }
    }
    memset(&q, 0, sizeof q);
    q.m = m, q.w = w, q.pieces = pieces, q.count = count;
    if (r == tb_ok && w && (m->flags & TB_MODEL_VERIFY_WEIGHTS) &&
        !(q.crc = (uint32_t *)tb__alloc(&m->ctx, (size_t)(count ? count : 1) * sizeof *q.crc)))
        r = TB__OOM(err);
    memset(&ring, 0, sizeof ring);
    ring.slots = slots, ring.pin = pin, ring.piece = piece;
    if (tm) tm->upload_bytes = total;
    if (r == tb_ok && !cr && count && pinned && (pin_failed = tb__ring_take(m, &ring) != 0) != 0)
        tb__ring_give(&ring); /* the area to the next upload at once: this one goes the pageable way */
    if (r == tb_ok && !cr && count) {
        uint32_t started = 1;
        if (ring.block) r = tb__pinned_run(&q, &ring, m->upload_threads, &started, &cr, err);
        else r = tb__pipe_run(&q, &cr, err);
        if (tm) {
            tm->threads = started, tm->pin_ms = ring.pin_ms, tm->wait_ms = ring.wait_ms;
            tm->pinned = ring.block != NULL, tm->reused = ring.reused;
            tm->staging_bytes = ring.block ? (uint64_t)ring.slots * ring.piece : 0;
        }
    }
    tb__ring_give(&ring);
    if (pin_failed) /* (the logger is the caller's: called once the area is given back) */
        tb__log(&m->ctx, TB_LOG_WARN, "model: pinning %llu bytes of staging failed; the upload went the pageable way",
                (unsigned long long)pin * piece);
    if (r == tb_ok && !cr && q.crc) r = tb__model_verify_upload(m, w, pieces, q.crc, count, err);
    tb__free(&m->ctx, q.crc);
    tb__free(&m->ctx, pieces);
    /* a pageable copy returns once its bytes are staged: wait for them to
       land, so that a run on any stream sees them */
    if (!cr && r == tb_ok) cr = tb__drv.cuStreamSynchronize(NULL);
    if (r == tb_ok && cr) r = tb__cufail(err, cr, tb_err_cuda, NULL, "cuMemcpyHtoD", "uploading the constants");
    return r;
}

/* Reader threads for a pinned upload: one per core but one (a pread from
   the page cache runs at about 7 GB/s on one core of an H100 host, 12
   threads at 50: the bus's speed), 2 to TB_UPLOAD_THREADS; asked: at most
   TB__UPLOAD_THREADS_MOST. An upload runs no more than its ring's slots. */
static uint32_t tb__upload_threads(uint32_t asked) {
    long n = sysconf(_SC_NPROCESSORS_ONLN) - 1;
    if (asked) return asked < TB__UPLOAD_THREADS_MOST ? asked : TB__UPLOAD_THREADS_MOST;
    return n < 2 ? 2u : n > (long)TB_UPLOAD_THREADS ? (uint32_t)TB_UPLOAD_THREADS : (uint32_t)n;
}

/* ---------------------------------------------------------------------- */
/* >>device  Device: memory, copies and streams in a model's context */
/* The calls a program makes instead of the driver's (>>device in the
   declarations states the context rule they follow). */
/* Enters the model's context for one call: tb_ok, or the failure in err. */
static tb_result tb__model_call_enter(const tb_model *m, int *pushed, const char *what, tb_error *err) {
    tb__CUresult cr;
    *pushed = 0;
    if (!m) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "%s: model is NULL", what);
    if ((cr = tb__model_enter(m, pushed)) != 0)
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuCtxPushCurrent", "%s", what);
    return tb_ok;
}

TBDEF void *tb_model_context(const tb_model *m) { return m ? (void *)m->cu_ctx : NULL; }
TBDEF int tb_model_device(const tb_model *m) { return m ? (int)m->device : -1; }

TBDEF tb_result tb_model_device_alloc(tb_model *m, size_t bytes, void **out, tb_error *err) {
    uint64_t p = 0;
    int pushed;
    tb__CUresult cr;
    tb_result r;
    if (!out) return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "tb_model_device_alloc: out is NULL");
    *out = NULL;
    if (!bytes)
        return m ? tb_ok
                 : tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "tb_model_device_alloc: model is NULL");
    if ((r = tb__model_call_enter(m, &pushed, "tb_model_device_alloc", err)) != tb_ok) return r;
    cr = tb__drv.cuMemAlloc(&p, bytes);
    tb__leave(pushed);
    if (cr) return tb__cufail(err, cr, tb_err_cuda, NULL, "cuMemAlloc", "%zu bytes of device memory", bytes);
    *out = (void *)(uintptr_t)p;
    return tb_ok;
}

TBDEF void tb_model_device_free(tb_model *m, void *ptr) {
    int pushed;
    if (!ptr || tb__model_call_enter(m, &pushed, "tb_model_device_free", NULL) != tb_ok) return;
    tb__drv.cuMemFree((uint64_t)(uintptr_t)ptr);
    tb__leave(pushed);
}

/* One copy: kind 0 host to device, 1 device to host, 2 device to device. */
static tb_result tb__model_copy(tb_model *m, int kind, void *dst, const void *src, size_t n, void *stream,
                                tb_error *err) {
    static const char *const calls[3][2] = { { "cuMemcpyHtoD", "cuMemcpyHtoDAsync" },
                                             { "cuMemcpyDtoH", "cuMemcpyDtoHAsync" },
                                             { "cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync" } };
    uint64_t d = (uint64_t)(uintptr_t)dst, s = (uint64_t)(uintptr_t)src;
    int pushed;
    tb__CUresult cr = 0;
    tb_result r;
    if (n && (!dst || !src))
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "a copy of %zu bytes %s NULL", n,
                        dst ? "from" : "to");
    if ((r = tb__model_call_enter(m, &pushed, "a copy", err)) != tb_ok) return r;
    if (n && kind == 0)
        cr = stream ? (tb__drv.cuMemcpyHtoDAsync ? tb__drv.cuMemcpyHtoDAsync(d, src, n, stream) : -1)
                    : tb__drv.cuMemcpyHtoD(d, src, n);
    else if (n && kind == 1)
        cr = stream ? (tb__drv.cuMemcpyDtoHAsync ? tb__drv.cuMemcpyDtoHAsync(dst, s, n, stream) : -1)
                    : (tb__drv.cuMemcpyDtoH ? tb__drv.cuMemcpyDtoH(dst, s, n) : -1);
    else if (n) { /* the NULL stream, then waited for: synchronous as the others */
        cr = tb__drv.cuMemcpyDtoDAsync(d, s, n, stream);
        if (!cr && !stream) cr = tb__drv.cuStreamSynchronize(NULL);
    }
    tb__leave(pushed);
    if (cr == -1)
        return tb__fail(err, tb_err_no_driver, NULL, NULL, -1, 0, "the driver lacks %s", calls[kind][stream != NULL]);
    if (cr) return tb__cufail(err, cr, tb_err_cuda, NULL, calls[kind][stream != NULL], "a copy of %zu bytes", n);
    return tb_ok;
}
TBDEF tb_result tb_model_copy_to_device(tb_model *m, void *dst, const void *src, size_t n, void *stream,
                                        tb_error *err) {
    return tb__model_copy(m, 0, dst, src, n, stream, err);
}
TBDEF tb_result tb_model_copy_to_host(tb_model *m, void *dst, const void *src, size_t n, void *stream, tb_error *err) {
    return tb__model_copy(m, 1, dst, src, n, stream, err);
}
TBDEF tb_result tb_model_copy_on_device(tb_model *m, void *dst, const void *src, size_t n, void *stream,
                                        tb_error *err) {
    return tb__model_copy(m, 2, dst, src, n, stream, err);
}

TBDEF tb_result tb_model_stream_create(tb_model *m, void **stream, tb_error *err) {
    int pushed;
    tb__CUresult cr;
    tb_result r;
    if (!stream)
        return tb__fail(err, tb_err_invalid_argument, NULL, NULL, -1, 0, "tb_model_stream_create: stream is NULL");
    *stream = NULL;
    if ((r = tb__model_call_enter(m, &pushed, "tb_model_stream_create", err)) != tb_ok) return r;
    cr = tb__drv.cuStreamCreate ? tb__drv.cuStreamCreate(stream, 0) : -1;
    tb__leave(pushed);
    if (cr == -1) return tb__fail(err, tb_err_no_driver, NULL, NULL, -1, 0, "the driver lacks cuStreamCreate");
    if (cr) {
        *stream = NULL;
        return tb__cufail(err, cr, tb_err_cuda, NULL, "cuStreamCreate", "%s", "");
    }
    return tb_ok;
}

TBDEF void tb_model_stream_free(tb_model *m, void *stream) {
    int pushed;
    if (!stream || !tb__drv.cuStreamDestroy || tb__model_call_enter(m, &pushed, "tb_model_stream_free", NULL) != tb_ok)
        return;
    tb__drv.cuStreamDestroy(stream);
    tb__leave(pushed);
}

TBDEF tb_result tb_model_synchronize(tb_model *m, void *stream, tb_error *err) {
    int pushed;
    tb__CUresult cr;
    tb_result r;
    if ((r = tb__model_call_enter(m, &pushed, "tb_model_synchronize", err)) != tb_ok) return r;
    cr = stream ? tb__drv.cuStreamSynchronize(stream) : tb__drv.cuCtxSynchronize ? tb__drv.cuCtxSynchronize() : -1;
    tb__leave(pushed);
    if (cr == -1) return tb__fail(err, tb_err_no_driver, NULL, NULL, -1, 0, "the driver lacks cuCtxSynchronize");
    if (cr)
        return tb__cufail(err, cr, tb_err_cuda, NULL, stream ? "cuStreamSynchronize" : "cuCtxSynchronize", "%s", "");
    return tb_ok;
}

#endif /* TB_NO_LAUNCHER */

#endif /* TRITON_BUNDLE_IMPLEMENTATION_INCLUDED */
#endif /* TRITON_BUNDLE_IMPLEMENTATION */

/*
   LICENSE: MIT No Attribution (MIT-0); SPDX-License-Identifier: MIT-0
   Copyright 2026 the triton_bundle.h authors.

   Permission is hereby granted, free of charge, to any person obtaining a copy
   of this software and associated documentation files (the "Software"), to deal
   in the Software without restriction, including without limitation the rights
   to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
   copies of the Software, and to permit persons to whom the Software is
   furnished to do so.

   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
   IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
   FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
   AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
   LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
   OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
   SOFTWARE.
*/
