# Runs Inductor's pre-grad group/batch fusion (PyTorch 2.x) on Dynamo graphs
# of the towers model (the shape of ../shared/fixtures/inductor/towers_n8) at
# several sizes; writes counters, node-target counts and the pass's time.
# Made on the device machine (PyTorch 2.11); kiln's tests read the result.
#   python3 bench/inductor/towers_gbf.py 8,600,2000 OUT.json
import collections, json, os, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._dynamo.utils import counters
from torch._inductor import config
from torch._inductor.fx_passes import group_batch_fusion as gbf

# The model itself is the tests' (one definition of the towers shape).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tests.python.towers_model import Towers  # noqa: E402

def target_name(t):
    # As fx-graph-json names targets: torch.stack, torch.nn.functional.relu, operator.getitem.
    if isinstance(t, str): return t
    name = canonical(str(getattr(t, "__module__", None) or "") + "." + getattr(t, "__qualname__", getattr(t, "__name__", str(t))))
    return name

def canonical(name):
    for old, new in (("torch._VariableFunctionsClass.", "torch."), ("torch.functional.", "torch."),
                     ("torch._C._nn.", "torch.nn.functional."), ("_operator.", "operator.")):
        if name.startswith(old): return new + name[len(old):]
    return name

results = {}
for n in [int(a) for a in sys.argv[1].split(",")]:
    graphs = []
    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    torch._dynamo.reset()
    model = Towers(n).eval()
    x = torch.randn(16, n * 64)
    with torch.no_grad():
        torch.compile(model, backend=backend, dynamic=False)(x)
    gm = graphs[0]
    before = len(gm.graph.nodes)
    config.pre_grad_fusion_options = {k: {} for k in ["batch_linear", "batch_layernorm", "batch_tanh", "batch_relu", "batch_sigmoid"]}
    counters.clear()
    t0 = time.perf_counter()
    gbf.group_batch_fusion_passes(gm.graph, pre_grad=True)
    seconds = time.perf_counter() - t0
    c = {k: v for k, v in counters["inductor"].items() if k.startswith("batch_")}
    t = collections.Counter(target_name(nd.target) for nd in gm.graph.nodes if nd.op != "placeholder")
    results[n] = {"nodes_before": before, "nodes_after": len(gm.graph.nodes), "counters": c, "targets": dict(t), "pass_seconds": seconds}
    print(n, before, len(gm.graph.nodes), c, "%.3f s" % seconds, file=sys.stderr, flush=True)
json.dump(results, open(sys.argv[2], "w"), indent=1, sort_keys=True)
