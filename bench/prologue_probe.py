#!/usr/bin/env python3
"""Probe (issue 37): a one-row product whose input is a pointwise
expression (the down product's SiLU(gate) times up) recomputes that
expression in every program of the product's reduction, Inductor's
default (it inlines a single-use pointwise node into its reader). Here
the same 1B-shaped decode step (fewer layers) is compiled with the
exporter's options, as it is and with a post-grad pass (realize_pass
below) that makes Inductor store such an input once
(prims.inductor_force_stride_order on it) where the product reduces over
more elements than it has outputs and the input is pointwise over other
products' outputs, alternated, twice each; each step timed in a CUDA
graph (best of two), with its costliest kernels by the profiler and the
sum of all of them. (PERFORMANCE.md section 22: the down products gain
what the gate and up products, which then compute the input, lose; the
exporter does not do it.)

    python3 bench/prologue_probe.py [--layers N]"""

import sys
import time

from probe_util import probe_setup  # noqa: E402 - also puts the repository's paths on sys.path


def realize_pass(torch):
    aten, prims = torch.ops.aten, torch.ops.prims
    force = prims.inductor_force_stride_order.default
    pointwise = {aten.mul.Tensor, aten.add.Tensor, aten.sigmoid.default, aten.silu.default, aten.view.default,
                 aten._unsafe_view.default, prims.convert_element_type.default}

    def product(node):  # (x, w) of Inductor's one-row product sum(x.unsqueeze(2) * w.unsqueeze(0), [1])
        if getattr(node, "target", None) is not aten.sum.dim_IntList or list(node.args[1]) != [1]:
            return None
        mul = node.args[0]
        if getattr(mul, "target", None) is not aten.mul.Tensor or len(mul.args) != 2:
            return None
        a, b = mul.args
        if getattr(a, "target", None) is not aten.unsqueeze.default or \
                getattr(b, "target", None) is not aten.unsqueeze.default:
            return None
        x = a.args[0]
        while getattr(x, "target", None) is prims.convert_element_type.default:
            x = x.args[0]
        return x, b.args[0]

    def over_products(x):  # pointwise over products' outputs and the graph's inputs only
        seen, todo = set(), [x]
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            if n.op in ("placeholder", "get_attr") or product(n) is not None:
                continue
            if n.op != "call_function" or n.target not in pointwise or len(seen) > 32:
                return False
            todo += [a for a in n.args if isinstance(a, type(x))]
        return True

    def run(graph):
        for node in list(graph.nodes):
            xw = product(node)
            if xw is None:
                continue
            x, w = xw
            vx, vw = x.meta.get("val"), w.meta.get("val")
            if vx is None or vw is None or vx.dim() != 2 or vx.shape[0] != 1 or not vx.shape[1] > vw.shape[-1] or \
                    x.op != "call_function" or not over_products(x):
                continue
            with graph.inserting_after(x):
                f = graph.call_function(force, (x, list(vx.stride())))
            f.meta["val"] = vx
            for user in list(x.users):
                if user is not f:
                    user.replace_input_with(x, f)
            print("   stored the input of a product of K %d, N %d" % (vx.shape[1], vw.shape[-1]))
    return run


def main(argv):
    p = probe_setup(argv, 4)
    if p is None:
        return 0
    torch, tb, gemv_probe, step_kernels, narrow_product_configs, layers, decode, reset, ids, pos = p
    for variant in ("as it is", "inputs stored once", "as it is", "inputs stored once"):
        t0 = time.time()
        options = dict(tb.TRITON_ONLY, coordinate_descent_tuning=True, autotune_local_cache=False)
        if variant != "as it is":
            options["post_grad_custom_post_pass"] = realize_pass(torch)
        backend = tb.exporter_backend(torch, options)
        torch._dynamo.reset()
        with narrow_product_configs(), torch.no_grad():
            fn = torch.compile(decode, backend=backend)
            for _ in range(2):
                reset()
                out = fn(ids, pos)
            torch.cuda.synchronize()
            reset()
            ref = [t.clone() for t in tb.output_tensors(fn(ids, pos))]
            reset()
            per = step_kernels(torch, lambda: fn(ids, pos))
            us = min(gemv_probe.time_graph(lambda: fn(ids, pos), 20, reset) for _ in range(2))
        del out
        print("%s: step %.1f us, kernels %.1f us (%d layers; compiled in %.0f s); token %s" % (
            variant, us, sum(t for t, _ in per.values()), layers, time.time() - t0, ref[-1].flatten().tolist()))
        for k, (t, n) in sorted(per.items(), key=lambda x: -x[1][0])[:8]:
            print("   %8.2f us %3.0f/step %s" % (t, n, k[:100]))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
