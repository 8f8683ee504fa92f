/* The runner without a GPU (>>runner, >>device): a model loaded and run
   through the stand-in driver (tests/fake_cuda.c), whose "device" memory
   is host memory: constants uploaded, memset and copy steps done, launches
   given the right pointers, the caller's tensors checked, the graph
   replayed and updated, state kept across runs and reset, several
   programs, the caller's workspace from several threads, the device calls.
   Run from the repository root after `make build/libfakecuda.so`:
   build/test_runner [name-filter] */
#include "program_util.h"




/* The model runs: the launches get the caller's and the workspace's
   pointers, the memset and the copies write the outputs, the state
   persists across runs until reset. */
TEST(test_model_run) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    float *x = (float *)dev(16), *y = (float *)dev(16), *z = (float *)dev(16);
    int32_t *s = (int32_t *)dev(4);
    tb_tensor in[1], out[3];
    int before;
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    CHECK(tb_model_input_count(m) == 1 && tb_model_output_count(m) == 3);
    CHECK(!strcmp(tb_model_output(m, 1)->name, "z") && tb_model_output(m, 3) == NULL);
    CHECK(tb_model_workspace_size(m) >= 512 && tb_model_workspace_size(m) % 256 == 0);
    CHECK(tb_model_constant_bytes(m) == 128 && tb_model_state_count(m) == 1); /* at multiples of 64 */
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    before = fake.launches();
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(fake.launches() == before + 2);
    CHECK((uintptr_t)param_i64(1) == (uintptr_t)y && param_i32(2) == 4); /* the last launch: (b0, y, 4) */
    CHECK(z[0] == 1.0f && z[1] == 1.0f && z[2] == 1.5f && z[3] == 2.5f);
    CHECK(s[0] == 5);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(s[0] == 7); /* the first run set the state */
    CHECK_OK(tb_model_reset_state(m, STREAM, &e), &e);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(s[0] == 5);
    /* the caller's workspace */
    {
        void *ws = dev((size_t)tb_model_workspace_size(m));
        CHECK(tb_model_run_workspace(m, in, 1, out, 3, NULL, STREAM, &e) == tb_err_invalid_argument);
        CHECK_OK(tb_model_run_workspace(m, in, 1, out, 3, ws, STREAM, &e), &e);
        CHECK((uintptr_t)param_i64(0) == (uintptr_t)ws); /* b0 at offset 0 of it */
        free(ws);
    }
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(z), free(s);
}

/* The caller's tensors are checked before anything runs, and a refusal
   names the tensor and what was expected. */
TEST(test_model_refusals) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    tb_model_desc d;
    float *x = (float *)dev(32), *y = (float *)dev(16), *z = (float *)dev(16);
    int32_t *s = (int32_t *)dev(4);
    tb_tensor in[1], out[3], t;
    int before;
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    memset(&d, 0, sizeof d);
    d.bundle = b;
    CHECK(tb_model_load(&d, &m, &e) == tb_err_not_found && !m); /* no program yet */
    CHECK(strstr(e.message, "no program") != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    d.flags = 0x80;
    CHECK(tb_model_load(&d, &m, &e) == tb_err_invalid_argument);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    before = fake.launches();
    CHECK(tb_model_run(m, in, 0, out, 3, STREAM, &e) == tb_err_arg_mismatch);
    t = in[0];
    in[0].dtype = TB_DTYPE_FLOAT16;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_arg_mismatch);
    CHECK(strstr(e.message, "input \"x\"") && strstr(e.message, "expected float32 rank 1 [4]") &&
          strstr(e.message, "got float16"));
    in[0] = t, in[0].shape[0] = 8;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_arg_mismatch);
    in[0] = t, in[0].strides[0] = 2;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_arg_mismatch && strstr(e.message, "strides"));
    in[0] = t, in[0].data = (char *)x + 4;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_misaligned && strstr(e.message, "\"x\""));
    in[0] = t, in[0].data = (void *)(uintptr_t)0xBAD000;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument && strstr(e.message, "device"));
    in[0] = t;
    out[2].data = NULL;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument && strstr(e.message, "\"s\""));
    CHECK(fake.launches() == before); /* nothing ran */
    tb_model_free(m);
    REQUIRE((m = load_model(b, TB_MODEL_GRAPH, &e)) != NULL);
    out[2].data = s;
    CHECK(tb_model_run(m, in, 1, out, 3, NULL, &e) == tb_err_invalid_argument); /* the graph needs a stream */
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(z), free(s);
}

/* With the graph: captured on the first run, replayed after; a program
   whose only input and output users are launches updates those nodes
   when the pointers change; one whose memsets and copies write outputs
   copies through static buffers. */
TEST(test_model_graph) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    float *x = (float *)dev(16), *y = (float *)dev(16), *y2 = (float *)dev(16), *z = (float *)dev(16);
    int32_t *s = (int32_t *)dev(4);
    tb_tensor in[1], out[3];
    int before;
    NEED_FAKE();
    make(&q);
    /* launches only: x -> b0 -> y */
    q.p.output_count = 1, q.p.step_count = 2, q.p.constant_count = 0, q.buf[1].last_step = 1, q.buf[1].first_step = 1;
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, TB_MODEL_GRAPH, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    {   /* tb_model_execute (2.7): TB_RUN_NO_GRAPH runs the steps, even on the
           legacy stream, and captures nothing; an unknown flag is refused */
        tb_run_desc d;
        int graphs = fake.graphs_live();
        memset(&d, 0, sizeof d);
        d.inputs = in, d.input_count = 1, d.outputs = out, d.output_count = 1, d.flags = TB_RUN_NO_GRAPH;
        before = fake.launches();
        CHECK_OK(tb_model_execute(m, &d, &e), &e);
        CHECK(fake.launches() == before + 2 && fake.graphs_live() == graphs);
        d.flags = 6u;
        CHECK(tb_model_execute(m, &d, &e) == tb_err_invalid_argument && strstr(e.message, "unknown bits 0x6"));
        CHECK(tb_model_execute(m, NULL, &e) == tb_err_invalid_argument && strstr(e.message, "desc is NULL"));
        d.flags = 0; /* the graph: it needs a stream */
        CHECK(tb_model_execute(m, &d, &e) == tb_err_invalid_argument && strstr(e.message, "needs a stream"));
        d.program = 1;
        CHECK(tb_model_execute(m, &d, &e) == tb_err_invalid_argument && strstr(e.message, "program 1 does not exist"));
        CHECK(fake.launches() == before + 2 && fake.graphs_live() == graphs); /* nothing more ran */
    }
    before = fake.launches();
    CHECK_OK(tb_model_run(m, in, 1, out, 1, STREAM, &e), &e); /* captured, then replayed */
    CHECK(fake.launches() == before + 2);
    CHECK((uintptr_t)param_i64(1) == (uintptr_t)y);
    out[0].data = y2;
    CHECK_OK(tb_model_run(m, in, 1, out, 1, STREAM, &e), &e); /* the node updated */
    CHECK(fake.launches() == before + 4);
    CHECK((uintptr_t)param_i64(1) == (uintptr_t)y2);
    tb_model_free(m);
    /* the full program: its memset and copies touch outputs, so static buffers */
    make(&q);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, TB_MODEL_GRAPH, &e)) != NULL);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    before = fake.launches();
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(fake.launches() == before + 2);
    CHECK((uintptr_t)param_i64(1) != (uintptr_t)y); /* the static output buffer */
    CHECK(z[0] == 1.0f && z[3] == 2.5f); /* copied out of it */
    tb_model_free(m);
    /* a memset that writes the input: copied back out of its static buffer */
    make(&q);
    q.ops[2][0] = op(TB_SPACE_INPUT, 0, 0);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, TB_MODEL_GRAPH, &e)) != NULL);
    x[0] = x[3] = 9.0f;
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(x[0] == 1.0f && x[3] == 1.0f);
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(y2), free(z), free(s);
}

/* From a mapped file: the constants read with pread in pieces (4 bytes
   here) and uploaded; a file truncated before the load is an I/O error,
   never SIGBUS. */
TEST(test_model_from_file) {
    prog q;
    tb_bundle *b, *f = NULL;
    tb_model *m;
    tb_error e;
    char path[256];
    float *x = (float *)dev(16), *y = (float *)dev(16), *z = (float *)dev(16);
    int32_t *s = (int32_t *)dev(4);
    tb_tensor in[1], out[3];
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    snprintf(path, sizeof path, "build/test_program_file.%d.tbundle", (int)getpid());
    CHECK_OK(tb_bundle_write_file(b, path, 0, &e), &e);
    CHECK_OK(tb_bundle_read_file(path, NULL, 0, &f, &e), &e);
    REQUIRE(f);
    REQUIRE((m = load_model(f, 0, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(z[0] == 1.0f && z[1] == 1.0f && z[2] == 1.5f && z[3] == 2.5f && s[0] == 5);
    tb_model_free(m);
    CHECK(truncate(path, 200) == 0);
    CHECK(load_model(f, 0, &e) == NULL && e.code == tb_err_io);
    tb_bundle_free(f);
    tb_bundle_free(b);
    unlink(path);
    free(x), free(y), free(z), free(s);
}

/* The caller's memory: each tensor inside its allocation, no tensor the
   program writes sharing bytes with another or with the workspace, the
   workspace device memory of the size the model needs. */
TEST(test_model_caller_memory) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    tb_tensor_spec in2[2];
    char *x = (char *)dev(64), *y = (char *)dev(16), *z = (char *)dev(16), *s = (char *)dev(4), *small = (char *)dev(8);
    char *ws;
    tb_tensor in[2], out[3];
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_call(0, 1, &e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    in[0].data = small; /* 8 bytes for 16 */
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument &&
          strstr(e.message, "input \"x\": it needs 16 bytes") && strstr(e.message, "holds 8 of them"));
    in[0].data = x + 48; /* the last 16 of 64: fits, from a thread where no
                            context is current: the checks ask the driver in
                            the model's context, which the run enters first */
    fake.set_current(NULL);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    CHECK(fake.ctx_depth() == 0); /* what it pushed, popped */
    fake.set_current((void *)0x1000);
    out[0].data = x + 48; /* an output on the input */
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument &&
          strstr(e.message, "share bytes") && strstr(e.message, "input \"x\"") && strstr(e.message, "output \"y\""));
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument); /* still, with the same pointers */
    out[0].data = x + 32; /* beside it */
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    out[2].data = z; /* an output inside another */
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_invalid_argument && strstr(e.message, "output \"s\""));
    out[2].data = s;
    /* the caller's workspace */
    ws = (char *)dev((size_t)tb_model_workspace_size(m));
    CHECK_OK(tb_model_run_workspace(m, in, 1, out, 3, ws, STREAM, &e), &e);
    {   /* the same through tb_model_execute's workspace field */
        tb_run_desc d;
        memset(&d, 0, sizeof d);
        d.inputs = in, d.input_count = 1, d.outputs = out, d.output_count = 3, d.workspace = ws, d.stream = STREAM;
        CHECK_OK(tb_model_execute(m, &d, &e), &e);
        d.workspace = (void *)(uintptr_t)0xBAD000;
        CHECK(tb_model_execute(m, &d, &e) == tb_err_invalid_argument && strstr(e.message, "not memory of CUDA device"));
    }
    fake.set_current(NULL);
    CHECK_OK(tb_model_run_workspace(m, in, 1, out, 3, ws, STREAM, &e), &e);
    CHECK(tb_model_run_workspace(m, in, 1, out, 3, (void *)(uintptr_t)0xBAD000, STREAM, &e) == tb_err_invalid_argument);
    CHECK(fake.ctx_depth() == 0); /* a refused run leaves the context too */
    fake.set_current((void *)0x1000);
    CHECK(tb_model_run_workspace(m, in, 1, out, 3, (void *)(uintptr_t)0xBAD000, STREAM, &e) ==
              tb_err_invalid_argument &&
          strstr(e.message, "not memory of CUDA device"));
    fake.track(ws, 256); /* as if the allocation were smaller */
    CHECK(tb_model_run_workspace(m, in, 1, out, 3, ws, STREAM, &e) == tb_err_invalid_argument &&
          strstr(e.message, "holds 256 of them"));
    fake.track(ws, (size_t)tb_model_workspace_size(m));
    out[1].data = ws + 256; /* an output in the workspace */
    CHECK(tb_model_run_workspace(m, in, 1, out, 3, ws, STREAM, &e) == tb_err_invalid_argument &&
          strstr(e.message, "the \"workspace\""));
    tb_model_free(m);
    /* two inputs the program only reads may share bytes; not one it writes */
    make(&q);
    in2[0] = q.in[0], in2[1] = q.in[0];
    in2[1].name = "x2";
    q.p.inputs = in2, q.p.input_count = 2;
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    in[1] = tb_tensor_for(&in2[1], x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    CHECK_OK(tb_model_run(m, in, 2, out, 3, STREAM, &e), &e);
    tb_model_free(m);
    q.ops[2][0] = op(TB_SPACE_INPUT, 1, 0); /* the memset now writes input x2 */
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    CHECK(tb_model_run(m, in, 2, out, 3, STREAM, &e) == tb_err_invalid_argument && strstr(e.message, "input \"x2\""));
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(z), free(s), free(small), free(ws);
}

/* Messages that say what is wrong: a NULL array with the right count, a
   tensor of rank 9, a flag that needs another, a run that fails partway
   names its step. */
TEST(test_model_messages) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    tb_model_desc d;
    char *x = (char *)dev(16), *y = (char *)dev(16), *z = (char *)dev(16), *s = (char *)dev(4);
    tb_tensor in[1], out[3];
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    memset(&d, 0, sizeof d);
    d.bundle = b, d.flags = TB_MODEL_STATIC_IO;
    CHECK(tb_model_load(&d, &m, &e) == tb_err_invalid_argument && !m && strstr(e.message, "with TB_MODEL_GRAPH"));
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    out[1] = tb_tensor_for(tb_model_output(m, 1), z);
    out[2] = tb_tensor_for(tb_model_output(m, 2), s);
    CHECK(tb_model_run(m, NULL, 1, out, 3, STREAM, &e) == tb_err_invalid_argument &&
          strstr(e.message, "the inputs array is NULL") && strstr(e.message, "takes 1 inputs"));
    CHECK(tb_model_run(m, in, 1, out, 2, STREAM, &e) == tb_err_arg_mismatch &&
          strstr(e.message, "1 input and 2 outputs given; program \"forward\" takes 1 and 3"));
    in[0].rank = 9;
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_arg_mismatch &&
          strstr(e.message, "got float32 of rank 9 (over 8)"));
    in[0].rank = 1;
    fake.fail_launches(2, 700); /* step 1 of the program, then none */
    CHECK(tb_model_run(m, in, 1, out, 3, STREAM, &e) == tb_err_cuda &&
          strstr(e.message, "[program \"forward\" step 0]"));
    fake.fail_launches(0, 0);
    CHECK_OK(tb_model_run(m, in, 1, out, 3, STREAM, &e), &e);
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y), free(z), free(s);
}

/* Device memory, copies and streams through the model, in its context:
   what a program with no cuda.h runs a model with. */
TEST(test_model_device_calls) {
    prog q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    void *p = NULL, *p2 = NULL, *stream = NULL;
    char host[33] = "the bytes that go there and back", back[32];
    NEED_FAKE();
    make(&q);
    REQUIRE((b = bundle_with_record(&e)) != NULL);
    CHECK_OK(tb_bundle_set_program(b, &q.p, &e), &e);
    REQUIRE((m = load_model(b, 0, &e)) != NULL);
    CHECK(tb_model_context(m) != NULL && tb_model_device(m) == 0);
    CHECK_OK(tb_model_device_alloc(m, 32, &p, &e), &e);
    CHECK_OK(tb_model_device_alloc(m, 32, &p2, &e), &e);
    REQUIRE(p && p2);
    CHECK_OK(tb_model_stream_create(m, &stream, &e), &e);
    CHECK(stream != NULL);
    CHECK_OK(tb_model_copy_to_device(m, p, host, 32, NULL, &e), &e);
    CHECK_OK(tb_model_copy_on_device(m, p2, p, 32, stream, &e), &e);
    memset(back, 0, sizeof back);
    CHECK_OK(tb_model_copy_to_host(m, back, p2, 32, stream, &e), &e);
    CHECK_OK(tb_model_synchronize(m, stream, &e), &e);
    CHECK_OK(tb_model_synchronize(m, NULL, &e), &e);
    CHECK(!memcmp(back, host, 32));
    CHECK(tb_model_copy_to_host(m, NULL, p2, 4, NULL, &e) == tb_err_invalid_argument);
    CHECK_OK(tb_model_copy_to_host(m, NULL, p2, 0, NULL, &e), &e); /* nothing to copy */
    CHECK(tb_model_device_alloc(NULL, 8, &p, &e) == tb_err_invalid_argument && p == NULL);
    CHECK_OK(tb_model_device_alloc(m, 0, &p, &e), &e);
    CHECK(p == NULL);
    /* from a thread where no context is current: each call enters the
       model's and leaves it, the stack as it was */
    fake.set_current(NULL);
    CHECK_OK(tb_model_device_alloc(m, 16, &p, &e), &e);
    CHECK_OK(tb_model_copy_to_device(m, p, host, 16, stream, &e), &e);
    CHECK_OK(tb_model_synchronize(m, stream, &e), &e);
    tb_model_device_free(m, p);
    CHECK(fake.ctx_depth() == 0);
    fake.set_current((void *)0x1000);
    tb_model_stream_free(m, stream);
    tb_model_device_free(m, p2);
    tb_model_device_free(m, NULL);
    tb_model_free(m);
    CHECK(fake.ctx_depth() == 0);
    tb_bundle_free(b);
}

/* A model of several programs: one upload of the constants, one
   workspace for the largest, state that one program writes and the other
   reads, a program by name or index, each with its own graph, and the
   shared state reset. */
TEST(test_model_programs) {
    progs2 q;
    tb_bundle *b;
    tb_model *m;
    tb_error e;
    uint32_t fill = 9, step = 9;
    int32_t *x = (int32_t *)dev(16), *o = (int32_t *)dev(16), *t = (int32_t *)dev(4);
    float *y = (float *)dev(16);
    tb_tensor ain, aout, bin, bout;
    int round;
    NEED_FAKE();
    REQUIRE((b = bundle_with_programs(&q, &e)) != NULL);
    for (round = 0; round < 2; round++) {
        REQUIRE((m = load_model(b, round ? TB_MODEL_GRAPH : 0, &e)) != NULL);
        CHECK(tb_model_program_count(m) == 2 && tb_model_program(m, 2) == NULL);
        CHECK_OK(tb_model_find_program(m, "fill", &fill, &e), &e);
        CHECK_OK(tb_model_find_program(m, "step", &step, &e), &e);
        CHECK(fill == 0 && step == 1);
        CHECK(tb_model_find_program(m, "decode", &step, &e) == tb_err_not_found && step == UINT32_MAX &&
              strstr(e.message, "it has 2: \"fill\", \"step\""));
        step = 1;
        CHECK(tb_model_constant_bytes(m) == 128 && tb_model_state_count(m) == 1); /* w and kv, once */
        CHECK(tb_model_workspace_size(m) >= 4096);
        ain = tb_tensor_for(tb_model_program(m, fill)->inputs, x);
        aout = tb_tensor_for(tb_model_program(m, fill)->outputs, y);
        bin = tb_tensor_for(tb_model_program(m, step)->inputs, t);
        bout = tb_tensor_for(tb_model_program(m, step)->outputs, o);
        x[0] = 1, x[1] = 2, x[2] = 3, x[3] = 4, t[0] = 40;
        CHECK_OK(tb_model_run_program(m, step, &bin, 1, &bout, 1, STREAM, &e), &e);
        CHECK(o[0] == 7 && o[3] == 7); /* the state as the bundle has it */
        CHECK_OK(tb_model_run_program(m, fill, &ain, 1, &aout, 1, STREAM, &e), &e);
        CHECK(y[0] == 0.5f && y[3] == 3.5f);
        CHECK_OK(tb_model_run_program(m, step, &bin, 1, &bout, 1, STREAM, &e), &e);
        CHECK(o[0] == 1 && o[1] == 2 && o[3] == 4); /* what fill wrote */
        CHECK_OK(tb_model_run_program(m, step, &bin, 1, &bout, 1, STREAM, &e), &e);
        CHECK(o[0] == 40 && o[1] == 2); /* what step wrote */
        CHECK(tb_model_run_program(m, 2, &bin, 1, &bout, 1, STREAM, &e) == tb_err_invalid_argument &&
              strstr(e.message, "program 2 does not exist"));
        CHECK(tb_model_run_program(m, fill, &bin, 1, &bout, 1, STREAM, &e) == tb_err_arg_mismatch); /* step's tensors */
        CHECK(tb_model_run(m, &ain, 1, &aout, 1, STREAM, &e) == tb_ok); /* program 0 */
        CHECK_OK(tb_model_reset_state(m, STREAM, &e), &e);
        CHECK_OK(tb_model_run_program(m, step, &bin, 1, &bout, 1, STREAM, &e), &e);
        CHECK(o[0] == 7 && o[1] == 7);
        if (!round) {
            void *ws = dev((size_t)tb_model_workspace_size(m));
            CHECK_OK(tb_model_run_program_workspace(m, step, &bin, 1, &bout, 1, ws, STREAM, &e), &e);
            CHECK(o[0] == 40);
            free(ws);
        }
        tb_model_free(m);
    }
    tb_bundle_free(b);
    free(x), free(o), free(t), free(y);
}

/* Runs with the caller's workspace write nothing of the model's, which
   other threads run at once: a refused one cleared the model's "the
   tensors checked last passed" (io_ok), a write that raced with every
   other thread's (ThreadSanitizer, issue 38 #10). Deterministic: the
   model's record as it was after a refused run; under make tsan: four
   threads running accepted and refused ones at once. The program copies
   x to y and sets y[2..3] = 2: no launch, no state. */
typedef struct wsrun {
    tb_model *m;
    const float *x;
    float *y;
    void *ws;
    int ok, refused, right;
} wsrun;
static void *ws_thread(void *arg) {
    wsrun *t = (wsrun *)arg;
    tb_tensor in[1], out[1];
    tb_error e;
    int i;
    for (i = 0; i < 200; i++) {
        in[0] = tb_tensor_for(tb_model_input(t->m, 0), (void *)(uintptr_t)t->x);
        out[0] = tb_tensor_for(tb_model_output(t->m, 0), t->y);
        t->y[0] = t->y[1] = t->y[2] = t->y[3] = 0;
        t->ok += tb_model_run_workspace(t->m, in, 1, out, 1, t->ws, STREAM, &e) == tb_ok;
        t->right += t->y[0] == t->x[0] && t->y[1] == t->x[1] && t->y[2] == 2.0f && t->y[3] == 2.0f;
        in[0].shape[0] = 8; /* refused */
        t->refused += tb_model_run_workspace(t->m, in, 1, out, 1, t->ws, STREAM, &e) == tb_err_arg_mismatch;
    }
    return NULL;
}
TEST(test_model_workspace_threads) {
    tb_tensor_spec ins[1], outs[1];
    tb_operand ops[2][2];
    tb_program_step steps[2];
    tb_program p;
    tb_bundle *b = NULL;
    tb_model *m = NULL;
    tb_model_desc d;
    tb_tensor in[1], out[1];
    tb_error e;
    wsrun t[4];
    pthread_t tid[4];
    float *x = (float *)dev(16), *y = (float *)dev(16);
    int i, started = 0;
    NEED_FAKE();
    memset(&p, 0, sizeof p), memset(steps, 0, sizeof steps);
    spec(&ins[0], "x", TB_DTYPE_FLOAT32, 4);
    spec(&outs[0], "y", TB_DTYPE_FLOAT32, 4);
    ops[0][0] = op(TB_SPACE_OUTPUT, 0, 0), ops[0][1] = op(TB_SPACE_INPUT, 0, 0);
    ops[1][0] = op(TB_SPACE_OUTPUT, 0, 8);
    steps[0].kind = TB_STEP_COPY, steps[0].operand_count = 2, steps[0].count = 16, steps[0].operands = ops[0];
    steps[1].kind = TB_STEP_MEMSET, steps[1].operand_count = 1, steps[1].width = 4, steps[1].value = 0x40000000u;
    steps[1].count = 2, steps[1].operands = ops[1];
    p.input_count = 1, p.inputs = ins, p.output_count = 1, p.outputs = outs;
    p.workspace_size = 256, p.step_count = 2, p.steps = steps;
    REQUIRE(tb_bundle_create(NULL, &b, &e) == tb_ok);
    CHECK_OK(tb_bundle_set_program(b, &p, &e), &e);
    memset(&d, 0, sizeof d);
    d.bundle = b;
    CHECK_OK(tb_model_load(&d, &m, &e), &e);
    REQUIRE(m && tb_model_workspace_size(m) > 0);
    for (i = 0; i < 4; i++) x[i] = (float)(i + 1);
    in[0] = tb_tensor_for(tb_model_input(m, 0), x);
    out[0] = tb_tensor_for(tb_model_output(m, 0), y);
    CHECK_OK(tb_model_run(m, in, 1, out, 1, STREAM, &e), &e);
    CHECK(m->progs[0].io_ok == 1 && y[1] == 2.0f && y[3] == 2.0f);
    memset(t, 0, sizeof t);
    t[0].ws = dev((size_t)tb_model_workspace_size(m));
    REQUIRE(t[0].ws != NULL);
    in[0].shape[0] = 8;
    CHECK(tb_model_run_workspace(m, in, 1, out, 1, t[0].ws, STREAM, &e) == tb_err_arg_mismatch);
    CHECK(m->progs[0].io_ok == 1); /* the refused run wrote nothing of the model's */
    for (i = 0; i < 4; i++) {
        t[i].m = m, t[i].x = x, t[i].y = (float *)dev(16);
        if (i) t[i].ws = dev((size_t)tb_model_workspace_size(m));
    }
    for (i = 0; i < 4; i++)
        if (t[i].y && t[i].ws && pthread_create(&tid[i], NULL, ws_thread, &t[i]) == 0) started++;
        else break;
    for (i = 0; i < started; i++) pthread_join(tid[i], NULL);
    CHECK(started == 4);
    for (i = 0; i < started; i++) CHECK(t[i].ok == 200 && t[i].right == 200 && t[i].refused == 200);
    CHECK(m->progs[0].io_ok == 1);
    for (i = 0; i < 4; i++) free(t[i].y), free(t[i].ws);
    tb_model_free(m);
    tb_bundle_free(b);
    free(x), free(y);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
