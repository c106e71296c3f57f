# Inductor's FSDP bucketing (PyTorch 2.x) on the synthetic FSDP graphs that
# kiln-bench-bucketing --write-graphs DIR writes (DIR/fsdp_<n>.json): for the
# graph of PARAMS shards, the buckets Inductor plans, by collective name (kiln
# keeps the names, so its plan compares one for one); for each size, the time
# of Inductor's whole pass (plan, merge). One JSON line each, on stdout.
#   python3 bench/inductor/bucketing_inductor.py DIR PARAMS SIZES [CAP_MB]
# e.g. DIR 200 500,2000 10. With KEEP_SOURCE=OUT, copies Inductor's bucketing.py
# and fsdp.py into OUT, so the rules kiln follows can be read at this version.
import inspect, json, os, shutil, sys, time

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
import torch._inductor.fx_passes.bucketing as bucketing
import torch._inductor.fx_passes.fsdp as fsdp

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "int64": torch.int64}


def op(name):  # "aten.sum.dim_IntList" -> torch.ops.aten.sum.dim_IntList
    ns, fn, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, ns), fn), overload)


def read_graph(path, mode):
    nodes = json.load(open(path))["nodes"]
    g, env = torch.fx.Graph(), {}

    def arg(a):
        if isinstance(a, dict) and "node" in a: return env[a["node"]]
        if isinstance(a, dict) and "dtype" in a: return DTYPES[a["dtype"]]
        if isinstance(a, list): return [arg(x) for x in a]
        return a

    for n in nodes:
        if n["op"] == "output":
            g.output(arg(n["args"][0]))
            continue
        if n["op"] == "placeholder":
            node = g.placeholder(n["name"])
        else:
            node = g.create_node("call_function", op(n["target"]), tuple(arg(a) for a in n["args"]),
                                 {k: arg(v) for k, v in n["kwargs"].items()}, name=n["name"])
        val = n.get("meta", {}).get("val")
        if val:
            with mode:
                node.meta["val"] = torch.empty_strided(val["shape"], val["stride"], dtype=DTYPES[val["dtype"]])
        env[n["name"]] = node
    return torch.fx.GraphModule(torch.nn.Module(), g)


def call(fn, gm, cap, wait_filter=None):
    # The signatures moved between releases: pass what this one names.
    params = inspect.signature(fn).parameters
    kwargs = {}
    if wait_filter is not None:
        for name in ("filter_wait_node", "filter_wait", "node_filter"):
            if name in params: kwargs[name] = wait_filter
    return fn(gm, lambda bucket_id: cap, **kwargs)


def main():
    folder, params, sizes = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")]
    cap = float(sys.argv[4]) if len(sys.argv) > 4 else 10.0
    if os.environ.get("KEEP_SOURCE"):
        for m in (bucketing, fsdp): shutil.copy(m.__file__, os.environ["KEEP_SOURCE"])
    # The merge asks the group for this rank: a fake process group of the
    # graphs' 8 ranks, registered under the name "0" the graphs use.
    from torch.testing._internal.distributed.fake_pg import FakeStore
    torch.distributed.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    mode = FakeTensorMode()
    plans = {}
    for kind, planner, wait_filter in (("all_gather", bucketing.bucket_all_gather_by_mb, fsdp.is_fsdp_all_gather_wait),
                                       ("reduce_scatter", bucketing.bucket_reduce_scatter_by_mb, fsdp.is_fsdp_reduce_scatter_wait)):
        gm = read_graph(os.path.join(folder, "fsdp_%d.json" % params), mode)
        plans[kind + "_plan"] = [[n.name for n in b] for b in call(planner, gm, cap, wait_filter)]
    print(json.dumps(dict(torch=torch.__version__, params=params, cap_mb=cap, **plans)), flush=True)
    for n in sizes:
        row = {"collectives": n}
        for kind, pass_fn in (("all_gather", fsdp.bucket_fsdp_all_gather), ("reduce_scatter", fsdp.bucket_fsdp_reduce_scatter)):
            gm = read_graph(os.path.join(folder, "fsdp_%d.json" % n), mode)
            t0 = time.perf_counter()
            call(pass_fn, gm, cap)
            row[kind + "_ms"] = (time.perf_counter() - t0) * 1e3
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
