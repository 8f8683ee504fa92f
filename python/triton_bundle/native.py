"""The C library (libtriton_bundle.so) through ctypes: CLibrary."""

import os

from .spec import (CONFIG_AUTOTUNE, DTYPE_BY_NAME, LAUNCH_CHECKED, LAUNCH_GRID_AUTO, MODEL_GRAPH,  # noqa: F401
                   MODEL_STATIC_IO, RESULTS, U64_MAX, BundleError)


_STRUCTS = None


def c_structs():
    """The ctypes mirrors of the header's structs that CLibrary passes, by
    their C names: tb_error, tb_arg (a union), tb_scratch, tb_launch_config,
    tb_launch_record and tb_launch_params. Built on the first call (ctypes
    is imported only then). tests/test_layout.py checks each one's size and
    its fields' offsets and sizes against the C compiler's (tests/layout.c)."""
    global _STRUCTS
    if _STRUCTS is not None:
        return _STRUCTS
    import ctypes as ct

    class Error(ct.Structure):
        _fields_ = [("code", ct.c_int), ("sys_errno", ct.c_int), ("cuda_result", ct.c_int),
                    ("offset", ct.c_longlong), ("kernel", ct.c_char * 128), ("file", ct.c_char * 256),
                    ("message", ct.c_char * 640)]

    class Arg(ct.Union):
        _fields_ = [("i", ct.c_int64), ("u", ct.c_uint64), ("f", ct.c_double), ("p", ct.c_void_p)]

    class Scratch(ct.Structure):
        _fields_ = [("size", ct.c_uint64), ("align", ct.c_uint32), ("present", ct.c_uint32)]

    class Config(ct.Structure):
        _fields_ = [("kernel_hash", ct.c_char_p), ("function_name", ct.c_char_p), ("binary_name", ct.c_char_p),
                    ("arg_types", ct.c_char_p), ("arg_divisibility", ct.c_char_p), ("num_warps", ct.c_uint32),
                    ("num_ctas", ct.c_uint32), ("shared_mem", ct.c_uint32), ("flags", ct.c_uint32),
                    ("cluster_dims", ct.c_uint32 * 3), ("global_scratch", Scratch), ("profile_scratch", Scratch),
                    ("param_count", ct.c_uint32), ("params", ct.c_void_p), ("tensordesc_count", ct.c_uint32),
                    ("tensordescs", ct.c_void_p), ("grid", ct.c_void_p)]

    class Record(ct.Structure):
        _fields_ = [("cache_key", ct.c_char_p), ("kernel_name", ct.c_char_p), ("config_count", ct.c_uint32),
                    ("configs", ct.POINTER(Config)), ("call", ct.c_void_p)]

    class Params(ct.Structure):
        _fields_ = [("grid", ct.c_uint32 * 3), ("stream", ct.c_void_p), ("args", ct.POINTER(Arg)),
                    ("arg_count", ct.c_uint32), ("flags", ct.c_uint), ("global_scratch", ct.c_void_p),
                    ("profile_scratch", ct.c_void_p), ("grid_args", ct.POINTER(ct.c_int64)),
                    ("grid_arg_count", ct.c_uint32), ("arg_bytes", ct.POINTER(ct.c_size_t))]

    class Tensor(ct.Structure):
        _fields_ = [("data", ct.c_void_p), ("dtype", ct.c_uint32), ("rank", ct.c_uint32),
                    ("shape", ct.c_int64 * 8), ("strides", ct.c_int64 * 8)]

    class TensorSpec(ct.Structure):
        _fields_ = [("name", ct.c_char_p), ("dtype", ct.c_uint32), ("rank", ct.c_uint32), ("align", ct.c_uint32),
                    ("shape", ct.c_int64 * 8), ("strides", ct.c_int64 * 8)]

    class Program(ct.Structure):
        _fields_ = [("input_count", ct.c_uint32), ("output_count", ct.c_uint32), ("inputs", ct.POINTER(TensorSpec)),
                    ("outputs", ct.POINTER(TensorSpec)), ("constant_count", ct.c_uint32), ("constants", ct.c_void_p),
                    ("buffer_count", ct.c_uint32), ("buffers", ct.c_void_p), ("workspace_size", ct.c_uint64),
                    ("step_count", ct.c_uint32), ("steps", ct.c_void_p), ("name", ct.c_char_p),
                    ("symbol_count", ct.c_uint32), ("symbols", ct.c_void_p), ("expr_count", ct.c_uint32),
                    ("exprs", ct.c_void_p), ("values", ct.POINTER(ct.c_int64))]

    class ModelDesc(ct.Structure):
        _fields_ = [("bundle", ct.c_void_p), ("table", ct.c_void_p), ("device", ct.c_int), ("flags", ct.c_uint),
                    ("options", ct.c_void_p), ("upload_chunk", ct.c_size_t), ("weights", ct.c_char_p),
                    ("pinned_upload_min", ct.c_uint64), ("upload_threads", ct.c_uint32),
                    ("instance_cache", ct.c_uint32), ("pinned_staging_bytes", ct.c_uint64)]

    _STRUCTS = {"tb_error": Error, "tb_arg": Arg, "tb_scratch": Scratch, "tb_launch_config": Config,
                "tb_launch_record": Record, "tb_launch_params": Params, "tb_tensor": Tensor,
                "tb_tensor_spec": TensorSpec, "tb_program": Program, "tb_model_desc": ModelDesc}
    return _STRUCTS


class CLibrary:
    """triton_bundle.h built as a shared object (`make lib` builds
    build/libtriton_bundle.so, `make install` puts it in PREFIX/lib), through
    ctypes: read and write bundles, compute grids, and launch kernels by
    name from Python, with no torch or triton at run time.

    CLibrary(path=None) finds the shared object in this order:
      1. path, when given (a file name; used as it is, never searched);
      2. the environment variable TRITON_BUNDLE_LIB, when set and not empty
         (likewise a file name);
      3. the system loader: dlopen("libtriton_bundle.so"), which searches
         LD_LIBRARY_PATH, the ld.so cache and the default directories
         (after `make install` into /usr/local, run ldconfig once; for
         another prefix, set LD_LIBRARY_PATH or TRITON_BUNDLE_LIB).
    The first of these that is given is the only one tried: a path or
    TRITON_BUNDLE_LIB that does not load raises OSError rather than falling
    back to another library."""

    LIB_NAME = "libtriton_bundle.so"
    LIB_ENV = "TRITON_BUNDLE_LIB"

    @classmethod
    def locate(cls, path=None):
        """(what to dlopen, where it came from: "path", "TRITON_BUNDLE_LIB"
        or "system loader") by the order above."""
        if path:
            return os.fspath(path), "path"
        env = os.environ.get(cls.LIB_ENV)
        if env:
            return env, cls.LIB_ENV
        return cls.LIB_NAME, "system loader"

    def __init__(self, path=None):
        import ctypes as ct
        self.ct = ct
        self.path, self.found_by = self.locate(path)
        st = c_structs()
        Error, Arg, Config, Record, Params = (st[n] for n in ("tb_error", "tb_arg", "tb_launch_config",
                                                              "tb_launch_record", "tb_launch_params"))
        self.Error, self.Arg, self.Config, self.Record, self.Params = Error, Arg, Config, Record, Params
        try:
            L = self.L = ct.CDLL(self.path)
        except OSError as e:
            hint = {"path": "",
                    self.LIB_ENV: " (from %s)" % self.LIB_ENV,
                    "system loader": " (neither a path nor %s was given; build it with `make lib` or install it "
                                     "with `make install`, and run ldconfig or set LD_LIBRARY_PATH or %s)"
                                     % (self.LIB_ENV, self.LIB_ENV)}[self.found_by]
            raise OSError("cannot load %s%s: %s" % (self.path, hint, e)) from e
        vp, sz, u32 = ct.c_void_p, ct.c_size_t, ct.c_uint32
        L.tb_bundle_read_memory.argtypes = [ct.c_char_p, sz, vp, ct.c_uint, ct.POINTER(vp), ct.POINTER(Error)]
        L.tb_bundle_read_file.argtypes = [ct.c_char_p, vp, ct.c_uint, ct.POINTER(vp), ct.POINTER(Error)]
        L.tb_bundle_write_memory.argtypes = [vp, vp, sz, ct.POINTER(sz), ct.POINTER(Error)]
        L.tb_bundle_free.argtypes = [vp]
        L.tb_bundle_launch_record.argtypes = [vp, u32]
        L.tb_bundle_launch_record.restype = ct.POINTER(Record)
        L.tb_grid_compute.argtypes = [ct.POINTER(Config), ct.POINTER(Arg), u32, ct.POINTER(ct.c_int64), u32,
                                      u32 * 3, ct.POINTER(Error)]
        L.tb_xxh3_64.argtypes = [ct.c_char_p, sz]
        L.tb_xxh3_64.restype = ct.c_uint64
        if hasattr(L, "tb_kernel_table_choice"):
            L.tb_kernel_table_choice.argtypes = [vp, ct.c_char_p, ct.POINTER(Arg), u32, ct.POINTER(u32),
                                                 ct.POINTER(ct.c_double), ct.POINTER(Error)]
        if hasattr(L, "tb_kernel_table_create"):
            L.tb_kernel_table_create.argtypes = [vp, vp, vp, ct.c_uint, ct.POINTER(vp), ct.POINTER(Error)]
            L.tb_kernel_table_launch.argtypes = [vp, ct.c_char_p, u32, ct.POINTER(Params), ct.POINTER(Error)]
            L.tb_kernel_table_find.argtypes = [vp, ct.c_char_p, u32, ct.POINTER(Arg), u32, ct.POINTER(u32),
                                               ct.POINTER(Error)]
            L.tb_kernel_table_free.argtypes = [vp]

    def _fail(self, r, e):
        raise BundleError(RESULTS[r], e.message.decode(errors="replace"))

    def read(self, data, copy=True):
        """A bundle handle (free it with .free), or BundleError."""
        b, e = self.ct.c_void_p(), self.Error()
        r = self.L.tb_bundle_read_memory(data, len(data), None, 1 if copy else 0, self.ct.byref(b), self.ct.byref(e))
        if r:
            self._fail(r, e)
        return b

    def read_file(self, path):
        b, e = self.ct.c_void_p(), self.Error()
        r = self.L.tb_bundle_read_file(os.fsencode(path), None, 0, self.ct.byref(b), self.ct.byref(e))
        if r:
            self._fail(r, e)
        return b

    def write(self, b):
        n, e = self.ct.c_size_t(), self.Error()
        r = self.L.tb_bundle_write_memory(b, None, 0, self.ct.byref(n), self.ct.byref(e))
        buf = self.ct.create_string_buffer(max(1, n.value))
        r = r or self.L.tb_bundle_write_memory(b, buf, n.value, None, self.ct.byref(e))
        if r:
            self._fail(r, e)
        return buf.raw[:n.value]

    def free(self, b):
        self.L.tb_bundle_free(b)

    def _args(self, args):
        a = (self.Arg * max(1, len(args)))()
        for i, v in enumerate(args):
            if isinstance(v, float):
                a[i].f = v
            else:
                a[i].u = int(v) & U64_MAX
        return a

    def grid(self, b, record, config, args, grid_args=()):
        """tb_grid_compute on record's config: (x, y, z), or BundleError."""
        rec = self.L.tb_bundle_launch_record(b, record)
        x = (self.ct.c_int64 * max(1, len(grid_args)))(*[int(v) for v in grid_args])
        g, e = (self.ct.c_uint32 * 3)(), self.Error()
        r = self.L.tb_grid_compute(self.ct.byref(rec.contents.configs[config]), self._args(args), len(args), x,
                                   len(grid_args), g, self.ct.byref(e))
        if r:
            self._fail(r, e)
        return tuple(g)

    def table(self, b, lazy=True):
        t, e = self.ct.c_void_p(), self.Error()
        r = self.L.tb_kernel_table_create(b, None, None, 1 if lazy else 0, self.ct.byref(t), self.ct.byref(e))
        if r:
            self._fail(r, e)
        return t

    def find(self, t, key_or_name, config, args):
        rec, e = self.ct.c_uint32(), self.Error()
        r = self.L.tb_kernel_table_find(t, key_or_name.encode(), config, self._args(args), len(args), self.ct.byref(rec),
                                        self.ct.byref(e))
        if r:
            self._fail(r, e)
        return rec.value

    def launch(self, t, key_or_name, config, args, grid=None, grid_args=(), stream=0, scratch=(None, None), flags=0,
               arg_bytes=None):
        """tb_kernel_table_launch; grid None: TB_LAUNCH_GRID_AUTO; config
        CONFIG_AUTOTUNE: the tuned choice (arg_bytes: the sizes of the
        pointer arguments the trials copy). args: ints (pointers as ints)
        and floats, one per code."""
        p, e = self.Params(), self.Error()
        a = self._args(args)
        x = (self.ct.c_int64 * max(1, len(grid_args)))(*[int(v) for v in grid_args])
        if grid is None:
            flags |= LAUNCH_GRID_AUTO
        else:
            p.grid[0], p.grid[1], p.grid[2] = grid
        p.stream, p.args, p.arg_count, p.flags = stream, a, len(args), flags
        p.global_scratch, p.profile_scratch = scratch
        p.grid_args, p.grid_arg_count = x, len(grid_args)
        if arg_bytes is not None:
            nb = (self.ct.c_size_t * max(1, len(arg_bytes)))(*[int(v) for v in arg_bytes])
            p.arg_bytes = self.ct.cast(nb, self.ct.POINTER(self.ct.c_size_t))
        r = self.L.tb_kernel_table_launch(t, key_or_name.encode(), config, self.ct.byref(p), self.ct.byref(e))
        if r:
            self._fail(r, e)

    def choice(self, t, key_or_name, args):
        """(config, median ms) of the autotune choice for these arguments."""
        cfg, ms, e = self.ct.c_uint32(), self.ct.c_double(), self.Error()
        r = self.L.tb_kernel_table_choice(t, key_or_name.encode(), self._args(args), len(args), self.ct.byref(cfg),
                                          self.ct.byref(ms), self.ct.byref(e))
        if r:
            self._fail(r, e)
        return cfg.value, ms.value

    def free_table(self, t):
        self.L.tb_kernel_table_free(t)

    def model(self, b, graph=False, static_io=False, device=0, weights=None, instance_cache=0):
        """tb_model_load on bundle handle b (which must outlive the model),
        its external constants from the safetensors file weights; (2.6) a
        program with symbols keeps instance_cache instances (0: 8): a Model,
        or BundleError."""
        return Model(self, b, graph, static_io, device, weights, instance_cache)


class Model:
    """A bundle's programs loaded by the C runner (tb_model_*), run on
    torch tensors (or anything with data_ptr(), dtype, shape and stride())
    from Python: the same calls a C program makes. inputs and outputs are
    program 0's; programs maps each program's name to its index, inputs
    and outputs. free() it before the bundle."""

    def __init__(self, lib, b, graph=False, static_io=False, device=0, weights=None, instance_cache=0):
        ct, L = lib.ct, lib.L
        st = c_structs()
        self.lib, self.ct, self.L = lib, ct, L
        self.Tensor, Spec, Desc = st["tb_tensor"], st["tb_tensor_spec"], st["tb_model_desc"]
        vp, u32, E = ct.c_void_p, ct.c_uint32, ct.POINTER(lib.Error)
        L.tb_model_load.argtypes = [ct.POINTER(Desc), ct.POINTER(vp), E]
        L.tb_model_free.argtypes = [vp]
        for f in ("tb_model_input_count", "tb_model_output_count", "tb_model_state_count"):
            getattr(L, f).argtypes, getattr(L, f).restype = [vp], u32
        for f in ("tb_model_input", "tb_model_output"):
            getattr(L, f).argtypes, getattr(L, f).restype = [vp, u32], ct.POINTER(Spec)
        for f in ("tb_model_workspace_size", "tb_model_constant_bytes"):
            getattr(L, f).argtypes, getattr(L, f).restype = [vp], ct.c_uint64
        T = ct.POINTER(self.Tensor)
        L.tb_model_run.argtypes = [vp, T, u32, T, u32, vp, E]
        L.tb_model_run_workspace.argtypes = [vp, T, u32, T, u32, vp, vp, E]
        L.tb_model_run_program.argtypes = [vp, u32, T, u32, T, u32, vp, E]
        L.tb_model_run_program_workspace.argtypes = [vp, u32, T, u32, T, u32, vp, vp, E]
        L.tb_model_program_count.argtypes, L.tb_model_program_count.restype = [vp], u32
        L.tb_model_program.argtypes, L.tb_model_program.restype = [vp, u32], ct.POINTER(st["tb_program"])
        L.tb_model_reset_state.argtypes = [vp, vp, E]
        L.tb_model_output_specs.argtypes = [vp, u32, T, u32, ct.POINTER(Spec), u32, E]
        self.Spec = Spec
        d, m, e = Desc(), vp(), lib.Error()
        d.instance_cache = instance_cache
        d.bundle, d.device = b, device
        d.flags = (MODEL_GRAPH if graph else 0) | (MODEL_STATIC_IO if static_io else 0)
        d.weights = os.fsencode(weights) if weights is not None else None
        r = L.tb_model_load(ct.byref(d), ct.byref(m), ct.byref(e))
        if r:
            lib._fail(r, e)
        self.m = m

        def specs(array, count):
            return [{"name": s.name.decode(errors="replace"), "dtype": s.dtype, "align": s.align,
                     "shape": list(s.shape[:s.rank]), "strides": list(s.strides[:s.rank])}
                    for s in (array[i] for i in range(count))]
        self.programs = {}
        for j in range(L.tb_model_program_count(m)):
            p = L.tb_model_program(m, j).contents
            self.programs[p.name.decode(errors="replace")] = {
                "index": j, "inputs": specs(p.inputs, p.input_count), "outputs": specs(p.outputs, p.output_count)}
        first = next(v for v in self.programs.values() if v["index"] == 0)
        self.inputs, self.outputs = first["inputs"], first["outputs"]
        self.workspace_size = L.tb_model_workspace_size(m)
        self.constant_bytes = L.tb_model_constant_bytes(m)
        self.state_count = L.tb_model_state_count(m)

    def _tensors(self, ts):
        arr = (self.Tensor * max(1, len(ts)))()
        for i, t in enumerate(ts):
            arr[i].data = t.data_ptr()
            name = str(t.dtype).replace("torch.", "")
            arr[i].dtype = DTYPE_BY_NAME[name].number if name in DTYPE_BY_NAME else 0
            arr[i].rank = len(t.shape)
            for d, (n, s) in enumerate(zip(t.shape, t.stride())):
                arr[i].shape[d], arr[i].strides[d] = n, s
        return arr

    def run(self, inputs, outputs, stream=0, workspace=None, program=0):
        """tb_model_run_program (or _workspace with a device pointer) on
        stream (a CUstream as an int; torch.cuda.current_stream().cuda_stream);
        program: an index, or a name of programs."""
        if isinstance(program, str):
            if program not in self.programs:
                raise BundleError("not_found", "no program %r; the model has %s" % (program, sorted(self.programs)))
            program = self.programs[program]["index"]
        i, o, e = self._tensors(inputs), self._tensors(outputs), self.lib.Error()
        if workspace is None:
            r = self.L.tb_model_run_program(self.m, program, i, len(inputs), o, len(outputs), stream,
                                            self.ct.byref(e))
        else:
            r = self.L.tb_model_run_program_workspace(self.m, program, i, len(inputs), o, len(outputs), workspace,
                                                      stream, self.ct.byref(e))
        if r:
            self.lib._fail(r, e)

    def output_specs(self, inputs, program=0):
        """(2.6) tb_model_output_specs: the outputs' shapes and strides for a
        run of program on these inputs (a program with symbols: at the
        values they bind)."""
        if isinstance(program, str):
            program = self.programs[program]["index"]
        n = len(next(v for v in self.programs.values() if v["index"] == program)["outputs"])
        i, o, e = self._tensors(inputs), (self.Spec * max(1, n))(), self.lib.Error()
        r = self.L.tb_model_output_specs(self.m, program, i, len(inputs), o, n, self.ct.byref(e))
        if r:
            self.lib._fail(r, e)
        return [{"name": s.name.decode(errors="replace"), "dtype": s.dtype, "shape": list(s.shape[:s.rank]),
                 "strides": list(s.strides[:s.rank])} for s in (o[k] for k in range(n))]

    def reset_state(self, stream=0):
        e = self.lib.Error()
        r = self.L.tb_model_reset_state(self.m, stream, self.ct.byref(e))
        if r:
            self.lib._fail(r, e)

    def free(self):
        if self.m:
            self.L.tb_model_free(self.m)
            self.m = None
