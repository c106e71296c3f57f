"""The x86 int8 recipe of Inductor's X86InductorQuantizer, applied to an
aten-level torch.fx graph (``export_fx.py --quantize x86``).

Neither Debian's PyTorch 1.13 nor the device's 2.x has a PT2E quantizer to
call, so the recipe is written out here:

* activations: per-tensor affine uint8 (quant_min 0, quant_max 255), scale and
  zero point from PyTorch's MinMaxObserver over the example inputs' float run;
* weights of convolutions and linears: per-channel symmetric int8 along axis 0
  (quant_min -128, quant_max 127, PerChannelMinMaxObserver), stored as int8
  constants with float32 scales and int64 zero points, read through
  ``dequantize_per_channel``; biases stay float32;
* a conv or linear, with a following unary op (conv: relu, hardtanh,
  hardswish, silu; linear: relu, gelu) or else with an add of another tensor
  and an optional relu after it, is one quantized unit:
  its activation input and an add's other input get a quantize/dequantize
  pair, its output does not (the next quantized op quantizes it);
* an add of two tensors outside such a unit gets a pair on both inputs;
* max-pool, avg-pool, adaptive avg-pool, flatten and cat whose inputs are all
  outputs of quantized units (or of such ops) get pairs on their inputs and on
  their output, sharing one scale and zero point (cat's from the range of all
  its inputs).

make_fx's decomposed linears (``addmm``/``mm`` of ``t(w)``, between views for
inputs of rank > 2) become ``aten.linear(x, w, b)`` again, the form
torch.export gives and the qmlp fixture has, and in-place relu_, hardtanh_
and add_ become their functional ops so every value is written once.

The quantize/dequantize nodes call the Python functions below, whose
``kiln_target`` is the ``quantized_decomposed`` op's name written to the JSON.
They compute with PyTorch's own torch.quantize_per_tensor / per_channel and
.dequantize() (round half to even, clamped), so running the rewritten graph
gives the reference outputs on either PyTorch version.
"""

import importlib
import operator

import torch
import torch.fx

Q_TENSOR = "quantized_decomposed.quantize_per_tensor.default"
DQ_TENSOR = "quantized_decomposed.dequantize_per_tensor.default"
DQ_CHANNEL = "quantized_decomposed.dequantize_per_channel.default"

_QDTYPES = {torch.uint8: torch.quint8, torch.int8: torch.qint8}


def quantize_per_tensor(x, scale, zero_point, quant_min, quant_max, dtype):
    q = torch.quantize_per_tensor(x.float(), scale, zero_point, _QDTYPES[dtype])
    return q.int_repr().clamp(quant_min, quant_max)


def dequantize_per_tensor(q, scale, zero_point, quant_min, quant_max, dtype):
    return torch._make_per_tensor_quantized_tensor(q, scale, zero_point).dequantize()


def dequantize_per_channel(q, scales, zero_points, axis, quant_min, quant_max, dtype):
    return torch._make_per_channel_quantized_tensor(q, scales.double(), zero_points, axis).dequantize()


quantize_per_tensor.kiln_target = Q_TENSOR
dequantize_per_tensor.kiln_target = DQ_TENSOR
dequantize_per_channel.kiln_target = DQ_CHANNEL

# --------------------------------------------------------------------------
# graph shapes

_INPLACE = {"aten.relu_.default": "relu", "aten.hardtanh_.default": "hardtanh", "aten.add_.Tensor": "add"}
_CONV_UNARY = ("aten.relu.default", "aten.hardtanh.default", "aten.hardswish.default", "aten.silu.default")
_LINEAR_UNARY = ("aten.relu.default", "aten.gelu.default")


def _t(n):
    return str(n.target) if n.op == "call_function" else None


def _functionalize(graph):
    """relu_ / hardtanh_ / add_ -> relu / hardtanh / add; later readers of the
    mutated tensor read the new node."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    for n in list(graph.nodes):
        name = _INPLACE.get(_t(n))
        if name is None:
            continue
        overload = "Tensor" if name == "add" else "default"
        n.target = getattr(getattr(torch.ops.aten, name), overload)
        src = n.args[0]
        for u in list(src.users):
            if u is not n and order[u] > order[n]:
                u.replace_input_with(src, n)


def _only_user(n):
    return next(iter(n.users)) if len(n.users) == 1 else None


_VIEWS = ("aten.view.default", "aten._reshape_alias.default", "aten._unsafe_view.default", "aten.reshape.default")


def _decomposed_linear(n):
    """(x, weight get_attr, bias or None) of addmm(b, x, t(w)) / mm(x, t(w)), else None."""
    if _t(n) == "aten.addmm.default" and len(n.args) == 3 and not n.kwargs:
        b, x, t = n.args
    elif _t(n) == "aten.mm.default":
        b, (x, t) = None, n.args
    else:
        return None
    if not isinstance(t, torch.fx.Node) or _t(t) != "aten.t.default" or t.args[0].op != "get_attr":
        return None
    return x, t.args[0], b


def _shape(n):
    tm = n.meta.get("tensor_meta") if isinstance(n, torch.fx.Node) else None
    return list(tm.shape) if hasattr(tm, "shape") else None  # (None for a tuple)


def _relinearize(graph):
    """make_fx's decomposed linears (addmm/mm of t(w), between views for an input
    of rank > 2) become aten.linear(x, w, b) again, the form torch.export gives
    and the qmlp fixture has; needs ShapeProp's shapes."""
    for n in list(graph.nodes):
        lin = _decomposed_linear(n)
        if lin is None:
            continue
        x, w, b = lin
        out = n
        if _t(x) in _VIEWS and len(n.users) == 1:  # view(x, [M, K]) ... view(y, x[:-1] + [N])
            v = _only_user(n)
            xs, vs = _shape(x.args[0]), _shape(v)
            if _t(v) in _VIEWS and xs and vs and xs[:-1] == vs[:-1] and len(xs) > 2:
                x, out = x.args[0], v
        with graph.inserting_before(n):
            args = (x, w) if b is None else (x, w, b)
            linear = graph.call_function(torch.ops.aten.linear.default, args)
        linear.meta = dict(out.meta)
        out.replace_all_uses_with(linear)
    _erase_unused(graph, _VIEWS + ("aten.addmm.default", "aten.mm.default", "aten.t.default"))


def _erase_unused(graph, targets):
    for n in reversed(list(graph.nodes)):
        if not n.users and _t(n) in targets:
            graph.erase_node(n)


def _weight_of_linear(n):
    """(activation, weight get_attr) of aten.linear(x, w[, b]), else None."""
    if _t(n) != "aten.linear.default" or not isinstance(n.args[1], torch.fx.Node) or n.args[1].op != "get_attr":
        return None
    return n.args[0], n.args[1]


class _Plan:
    """Which edges (producer -> consumer) are quantized, by which observer group."""

    def __init__(self):
        self.edges = []          # (producer, consumer, group)
        self.shared_out = []     # (node whose output is quantized, group)
        self.out_group = {}      # node of shared_out -> its group
        self.parent = {}         # groups merged by a shared scale (union-find)
        self.quantized = set()   # outputs of quantized units (and of the pools, flatten and cat over them)
        self.convs = []          # conv nodes
        self.linears = []        # aten.linear nodes
        self.done = set()

    def edge(self, producer, consumer, group=None):
        # an output quantized by max-pool or cat is read quantized by every user already
        if isinstance(producer, torch.fx.Node) and producer not in self.out_group:
            self.edges.append((producer, consumer, producer if group is None else group))

    def share(self, out, group):
        """`out` is quantized with `group`'s scale and zero point."""
        self.shared_out.append((out, group))
        self.out_group[out] = group

    def group_of(self, node):
        return self.out_group.get(node, node)

    def root(self, g):
        while self.parent.get(g, g) is not g:
            g = self.parent[g]
        return g

    def merge(self, a, b):
        a, b = self.root(a), self.root(b)
        if a is not b:
            self.parent[b] = a


def _plan_unit(plan, n):
    """A conv or linear and the nodes fused with it; returns the unit's last node."""
    end = n
    u = _only_user(end)
    unary = _CONV_UNARY if n in plan.convs else _LINEAR_UNARY
    if u is not None and _t(u) in unary:
        end = u
    elif u is not None and _t(u) == "aten.add.Tensor" and u not in plan.done:
        others = [a for a in u.args[:2] if a is not n]
        if len(others) == 1 and isinstance(others[0], torch.fx.Node) and len(u.args) == 2:
            plan.edge(others[0], u)
            plan.done.add(u)
            end = u
            r = _only_user(u)
            if r is not None and _t(r) == "aten.relu.default":
                end = r
    plan.quantized.add(end)
    return end


_POOLS = ("aten.avg_pool2d.default", "aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default",
          "aten.flatten.using_ints")


def _is_pool_or_flatten(n):
    """The recipe's other int8-in int8-out ops: avg_pool2d, adaptive_avg_pool2d
    (make_fx's mean over H and W, keepdim, for an output size of 1) and flatten
    (make_fx's view merging the trailing dims)."""
    t = _t(n)
    if t is None or not n.args:
        return False
    if t in _POOLS:
        return True
    xs, ys = _shape(n.args[0]), _shape(n)
    if not xs or not ys or len(xs) != 4:
        return False
    if t == "aten.mean.dim":
        dims = sorted(d % 4 for d in n.args[1])
        return dims == [2, 3] and len(ys) == 4
    if t in _VIEWS and len(ys) < len(xs):
        k = len(ys) - 1
        rest = 1
        for d in xs[k:]:
            rest *= d
        return list(ys[:k]) == list(xs[:k]) and ys[k] == rest
    return False


def _plan(graph):
    plan = _Plan()
    for n in graph.nodes:
        t = _t(n)
        lin = _weight_of_linear(n)
        if t == "aten.convolution.default" and n.args[1].op == "get_attr":
            plan.convs.append(n)
            plan.edge(n.args[0], n)
            _plan_unit(plan, n)
        elif lin is not None:
            plan.linears.append(n)
            plan.edge(lin[0], n)
            _plan_unit(plan, n)
        elif t == "aten.add.Tensor" and n not in plan.done and len(n.args) == 2 and \
                all(isinstance(a, torch.fx.Node) for a in n.args):
            for a in n.args:
                plan.edge(a, n)
            r = _only_user(n)
            plan.quantized.add(r if r is not None and _t(r) == "aten.relu.default" else n)
        elif t in ("aten.max_pool2d_with_indices.default", "aten.max_pool2d.default") and \
                n.args[0] in plan.quantized:
            plan.edge(n.args[0], n)
            out = n
            if t == "aten.max_pool2d_with_indices.default":
                outs = [u for u in n.users if u.target is operator.getitem and u.args[1] == 0]
                out = outs[0] if outs else None
            if out is not None:
                plan.share(out, plan.group_of(n.args[0]))  # the input's scale and zero point
                plan.quantized.add(out)
        elif _is_pool_or_flatten(n) and n.args[0] in plan.quantized:
            plan.edge(n.args[0], n)
            plan.share(n, plan.group_of(n.args[0]))
            plan.quantized.add(n)
        elif t == "aten.cat.default" and n.args[0] and all(a in plan.quantized for a in n.args[0]):
            # one scale over every input and the output, as SharedQuantizationSpec
            # makes it: an input's own producer group (or max-pool's) joins the cat's
            first = plan.group_of(n.args[0][0])
            for a in n.args[0]:
                plan.merge(first, plan.group_of(a))
                plan.edge(a, n)
            plan.share(n, first)
            plan.quantized.add(n)
    return plan


# --------------------------------------------------------------------------
# observers

def _act_observer():
    from torch.ao.quantization.observer import MinMaxObserver
    return MinMaxObserver(dtype=torch.quint8, qscheme=torch.per_tensor_affine, quant_min=0, quant_max=255)


def _weight_qparams(w):
    from torch.ao.quantization.observer import PerChannelMinMaxObserver
    obs = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric,
                                   quant_min=-128, quant_max=127)
    obs(w.detach().float())
    scale, zp = obs.calculate_qparams()
    return scale.float(), zp.long()


def _observe(gm, plan, inputs):
    """Runs the float graph once; each group's observer sees the values of its edges' producers."""
    producers = {}
    for p, _, g in plan.edges:
        producers.setdefault(p, set()).add(plan.root(g))
    observers = {plan.root(g): _act_observer() for _, _, g in plan.edges}

    class _Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            value = super().run_node(node)
            for g in producers.get(node, ()):
                observers[g](value.detach().float())
            return value

    with torch.no_grad():
        _Recorder(gm).run(*inputs)
    params = {}
    for g, obs in observers.items():
        scale, zp = obs.calculate_qparams()
        params[g] = (float(scale), int(zp))
    groups = [g for _, _, g in plan.edges] + [g for _, g in plan.shared_out]
    return {g: params[plan.root(g)] for g in groups}


# --------------------------------------------------------------------------
# rewrite

def _qdq(graph, value, scale, zp):
    q = graph.call_function(quantize_per_tensor, (value, scale, zp, 0, 255, torch.uint8))
    return graph.call_function(dequantize_per_tensor, (q, scale, zp, 0, 255, torch.uint8))


def _quantize_weight(gm, graph, w_node, used):
    w = gm
    for part in w_node.target.split("."):
        w = getattr(w, part)
    scale, zp = _weight_qparams(w)
    wq = torch.quantize_per_channel(w.detach().float(), scale.double(), zp, 0, torch.qint8).int_repr()
    base = w_node.target.replace(".", "_")
    names = []
    for suffix, value in (("int8", wq), ("scale", scale), ("zero_point", zp)):
        name = "%s_%s" % (base, suffix)
        while name in used or hasattr(gm, name):
            name += "_"
        used.add(name)
        gm.register_buffer(name, value)
        names.append(name)
    with graph.inserting_before(w_node):
        attrs = [graph.get_attr(name) for name in names]
        return graph.call_function(dequantize_per_channel, (attrs[0], attrs[1], attrs[2], 0, -128, 127, torch.int8))


def _rewrite(gm, plan, params):
    graph = gm.graph
    order = {n: i for i, n in enumerate(graph.nodes)}
    # activations: one pair per (producer, group), before its first consumer
    pairs = {}
    for p, c, g in plan.edges:
        pairs.setdefault((p, plan.root(g)), []).append(c)
    for (p, g), consumers in pairs.items():
        scale, zp = params[g]
        with graph.inserting_before(min(consumers, key=lambda c: order[c])):
            dq = _qdq(graph, p, scale, zp)
        for c in consumers:
            c.replace_input_with(p, dq)
    for out, g in plan.shared_out:
        scale, zp = params[g]
        users = list(out.users)
        with graph.inserting_before(out.next):  # (inserting_after would reverse q and dq)
            dq = _qdq(graph, out, scale, zp)
        for u in users:
            u.replace_input_with(out, dq)
    # weights
    used = set()
    for conv in plan.convs:
        w = conv.args[1]
        conv.replace_input_with(w, _quantize_weight(gm, graph, w, used))
    for linear in plan.linears:
        w = linear.args[1]
        linear.replace_input_with(w, _quantize_weight(gm, graph, w, used))
    for n in reversed(list(graph.nodes)):
        if n.op == "get_attr" and not n.users:
            graph.erase_node(n)
    graph.lint()
    gm.recompile()


def quantize_x86(gm, inputs):
    """Rewrites the aten-level `gm` in place by the x86 recipe, observing on
    `inputs`; returns counts of what it quantized."""
    _functionalize(gm.graph)
    _erase_unused(gm.graph, ("aten.detach.default", "aten.clone.default"))  # make_fx's copies for autograd
    gm.recompile()
    from torch.fx.passes.shape_prop import ShapeProp
    with torch.no_grad():
        ShapeProp(gm).propagate(*[t.clone() for t in inputs])
    _relinearize(gm.graph)
    gm.recompile()
    plan = _plan(gm.graph)
    params = _observe(gm, plan, [t.clone() for t in inputs])
    _rewrite(gm, plan, params)
    return {"conv": len(plan.convs), "linear": len(plan.linears),
            "activation_pairs": len({(p, plan.root(g)) for p, _, g in plan.edges}) + len(plan.shared_out)}


def use_registered_ops(gm):
    """Points `gm`'s quantize/dequantize calls (the Python functions above) at
    the registered quantized_decomposed ops, which PyTorch 2.x has (1.13
    registers none); returns `gm`."""
    try:
        importlib.import_module("torch.ao.quantization.fx._decomposed")  # registers quantized_decomposed
        ops = torch.ops.quantized_decomposed
        swap = {quantize_per_tensor: ops.quantize_per_tensor.default,
                dequantize_per_tensor: ops.dequantize_per_tensor.default,
                dequantize_per_channel: ops.dequantize_per_channel.default}
    except (ImportError, AttributeError, RuntimeError) as e:
        raise RuntimeError("the quantized_decomposed ops are PyTorch 2.x's; torch %s "
                           "registers none (%s)" % (torch.__version__, e))
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in swap:
            n.target = swap[n.target]
    gm.recompile()
    return gm


def autocast_retrace(gm, inputs, dtype=torch.bfloat16):
    """The q/dq graph `gm` re-traced under torch.autocast("cpu", dtype): the
    int8-mixed-bf16 graph Inductor's quantization patterns are written for
    (a linear's or convolution's float inputs cast to `dtype`), each cast
    spelled prims.convert_element_type as Inductor's decompositions write it.
    `gm` itself is edited first, in place: its quantize/dequantize nodes
    become the registered ops (use_registered_ops: PyTorch 2.x) and its
    convolutions' inputs are cast; the re-traced graph is a new module."""
    use_registered_ops(gm)
    from torch.fx.experimental.proxy_tensor import make_fx
    aten, prims = torch.ops.aten, torch.ops.prims
    # Autocast casts conv2d's and _convolution's inputs, not those of the
    # aten.convolution an ATen-level graph holds: cast them here as it would have.
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target == aten.convolution.default:
            with gm.graph.inserting_before(n):
                n.args = tuple(gm.graph.call_function(prims.convert_element_type.default, (a, dtype))
                               if i < 3 and isinstance(a, torch.fx.Node) else a for i, a in enumerate(n.args))
    gm.recompile()

    def cast(x, dtype=None, **rest):
        if dtype is None or any(v not in (None, False, torch.strided, torch.preserve_format, x.device)
                                for v in rest.values()):
            raise RuntimeError("autocast_retrace: a _to_copy that is not a plain dtype cast: %r" % (rest,))
        return prims.convert_element_type.default(x, dtype)

    with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
        return make_fx(gm, decomposition_table={aten._to_copy.default: cast})(*[t.clone() for t in inputs])


def fold_batch_norms(model):
    """Conv + eval BatchNorm folded into the conv, as prepare_pt2e does before
    annotating; returns the model unchanged where torch.fx cannot trace it."""
    from torch.fx.experimental.optimization import fuse
    try:
        folded = fuse(model, inplace=False)
    except Exception:
        return model
    for p in folded.parameters():  # the folded weights are new parameters
        p.requires_grad_(False)
    return folded


__all__ = ["quantize_x86", "fold_batch_norms", "quantize_per_tensor", "dequantize_per_tensor",
           "dequantize_per_channel"]
