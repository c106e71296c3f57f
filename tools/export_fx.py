#!/usr/bin/env python3
"""Export a PyTorch model to fx-graph-json (version 1) for kiln.

Usage (run from the repository root)::

    tools/export_fx.py MODULE:FACTORY --input-shape 1,3,224,224 \\
        [--input-shape ...] [--level torch|aten|export] [--seed N] \\
        [--dtype float32] [--leaf-modules torch.nn.Linear,...] --out DIR

MODULE:FACTORY names a callable that takes no arguments and returns an
``nn.Module``: ``torchvision.models:resnet50``,
``tests.python.small_model:SmallNet`` or ``path/to/file.py:Factory``.  The
model is put in eval() mode and its parameters stop requiring grad.

``--level torch`` (default) traces through every submodule with torch.fx, so
convolutions, norms and linears become ``torch.*`` / ``torch.nn.functional.*``
calls and parameters and buffers become ``get_attr`` nodes.  While tracing,
every proxy also carries its real value on the example inputs, so Python
conditions on shapes (BatchNorm's ``input.dim() != 4``) are decided as eager
execution decides them and leave no nodes; the graph is specialised to the
given input shapes (a note on stderr says how many conditions were decided).  ``--level aten``
traces with ``make_fx`` in real mode: targets are ATen overloads
(``aten.convolution.default``), parameters are ``get_attr`` nodes such as
``_param_constant0``, in-place ops are kept.  ``--level export`` gives the
graph ``torch.export`` gives (PyTorch 2.1 and later: ``torch.export.export``
then ``run_decompositions()``, ATen's core ops): every parameter, buffer and
constant tensor is *lifted*, a placeholder (``p_conv1_weight``) bound to a
weight of the same name in the ``weights`` table, before the model's own
inputs.  On PyTorch 1.13, which has no ``torch.export``, the same form is
traced with ``make_fx`` over ``functional_call`` (the ops are ``--level
aten``'s).  kiln reads a placeholder bound to a weight as that weight, a
constant: ``inputs/`` and the manifest hold only the model's inputs.  Every
level then runs ``ShapeProp`` so that every node carries its shape, dtype and
stride.

Where torch.fx cannot trace the model at torch level (``nn.GRU``, ``nn.LSTM``
and ``nn.RNN`` build their initial state from a traced size), a note on stderr
says so and the model is exported at aten level instead; the manifest's
``level`` says which.

``--leaf-modules torch.nn.Linear,torch.nn.Conv2d`` (``--level torch`` only)
keeps each call of a module of those classes as one ``call_module`` node, as
torch.fx's default tracer keeps ``torch.nn`` modules, so patterns can match a
module by class as Inductor's ``CallModule(nn.Linear, ...)`` does.  Whenever
the graph has ``call_module`` nodes, ``graph.json`` gets a ``modules`` table:
for each module path its class (``torch.nn.modules.linear.Linear``) and, as
``attrs``, the class's ``__constants__`` that are plain data (``in_features``,
``stride``, ...).  A leaf module's floating-point parameters and buffers
have no ``get_attr`` node; each is written as the weight ``PATH.NAME``
(``conv.weight``, ``bn.running_mean``), where kiln's passes and executor look
for them.  Without the option neither level has ``call_module`` nodes (both
trace into every module), and no table is written.

``--quantize x86`` (``--level aten`` and float32 only) writes the int8
graph Inductor's X86InductorQuantizer recipe gives (tools/fx_quantize_x86.py
says which ops it quantizes and how): eval batch-norms are first folded into
their convolutions, then every activation a convolution, linear, add,
max-pool or cat reads is quantized per tensor to uint8 and dequantized again
(``quantized_decomposed.quantize_per_tensor.default`` then
``dequantize_per_tensor.default``, scale and zero point from PyTorch's
MinMaxObserver on the example inputs), and each convolution's and linear's
weight becomes an int8 constant quantized per output channel (symmetric, with
float32 scale and int64 zero-point constants beside it) read through
``dequantize_per_channel.default``.  The outputs written are PyTorch's on
that graph, its quantize/dequantize computed by torch.quantize_per_tensor /
per_channel and .dequantize(), so they hold on PyTorch 1.13, which registers
no ``quantized_decomposed`` ops; the manifest's
``quantized_vs_float_max_abs_diff`` says how far they are from the float
model's.

Writes, under DIR:

* ``graph.json``          the graph (see ``docs/FX_GRAPH_JSON.md``), with a
                          ``weights`` table for every ``get_attr`` target
                          (and leaf module parameter) and a ``modules``
                          table for every ``call_module`` target;
* ``weights/<attr>.npy``  the value of each ``get_attr`` target (and leaf
                          module parameter); with ``--shards N``, instead
                          ``weights/<attr>.rank<r>.npy`` for each rank r and
                          the manifest ``weights/<attr>.shards.json`` the
                          table names;
* ``inputs/<name>.npy``   the random inputs, one per placeholder, in order;
* ``outputs/output_<i>.npy``  PyTorch's eager outputs, flattened in the order
                          of the output node's nested list;
* ``manifest.json``       input and output files in order, torch version,
                          level, seed, dtype.

Each ``--input-shape`` is the next parameter of ``forward()``, in order;
optional parameters (those with a default) past the shapes given keep their
defaults and are no inputs, so a stock ``nn.TransformerEncoder`` takes one
shape (its masks stay None) or two (the mask is the second input).
Inputs are ``torch.randn`` of each ``--input-shape``; torch, numpy and
``random`` are seeded with ``--seed`` before the model is built and again
before the inputs are made, so runs are reproducible.

Works with PyTorch 1.13 (Debian's ``python3-torch``) and 2.x.  Bad usage
prints one line and exits with status 2; a failure while tracing or running
the model exits with status 1.
"""

import argparse
import builtins
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import operator
import os
import random
import re
import sys
import tempfile
import traceback

FORMAT = "fx-graph-json"
VERSION = 1
PROG = "export_fx.py"

DTYPES = ("float32", "float64", "float16", "bfloat16")


class UsageError(Exception):
    """Bad command line: reported on one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2
        sys.stderr.write("%s: error: %s\n" % (PROG, message))
        sys.exit(2)


# --------------------------------------------------------------------------
# command line

def parse_shape(text):
    parts = [p.strip() for p in text.replace("x", ",").split(",")]
    if parts == [""]:
        return []  # a 0-d input: --input-shape ""
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise UsageError("bad --input-shape %r: expected comma-separated "
                         "non-negative integers such as 1,3,224,224" % text)
    if any(d < 0 for d in dims):
        raise UsageError("bad --input-shape %r: negative dimension" % text)
    return dims


def build_parser():
    p = _Parser(prog=PROG, description="Export a PyTorch model to fx-graph-json.")
    p.add_argument("factory", metavar="MODULE:FACTORY",
                   help="module (dotted name or .py file) and a no-argument "
                        "callable in it that returns the nn.Module")
    p.add_argument("--input-shape", action="append", default=[], required=True,
                   metavar="D0,D1,...", help="shape of one input, e.g. 1,3,224,224 "
                        "(repeat once per input, in forward()'s order)")
    p.add_argument("--level", choices=("torch", "aten", "export"), default="torch",
                   help="torch: torch.fx trace through all modules; "
                        "aten: make_fx (ATen overloads); export: torch.export's "
                        "graph, parameters lifted to placeholders bound to "
                        "weights. Default torch.")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--leaf-modules", default="", metavar="CLASS,...",
                   help="at --level torch, keep calls of modules of these classes "
                        "(dotted names such as torch.nn.Linear) as call_module nodes "
                        "instead of tracing through them; the graph's \"modules\" "
                        "table gives each one's class and constants")
    p.add_argument("--dtype", choices=DTYPES, default="float32",
                   help="dtype of the inputs and the model (default float32)")
    p.add_argument("--quantize", choices=("x86",), default=None,
                   help="x86: rewrite the --level aten graph into the int8 "
                        "quantize/dequantize graph of Inductor's x86 recipe "
                        "(uint8 per-tensor activations observed on the inputs, "
                        "int8 per-channel weights); the outputs written are "
                        "PyTorch's own on that graph")
    p.add_argument("--autocast", choices=("bfloat16",), default=None,
                   help="with --quantize x86: the q/dq graph re-traced under "
                        "torch.autocast(cpu, bfloat16), the int8-mixed-bf16 graph of "
                        "Inductor's quantization patterns, convolutions cast as autocast "
                        "casts conv2d (PyTorch 2.x: its registered quantized_decomposed "
                        "ops); the outputs written are PyTorch's on it")
    p.add_argument("--shards", type=int, default=1, metavar="N",
                   help="keep each weight as N files, one per rank (weights/<attr>.rank<r>.npy, "
                        "the elements shard_parameters gives rank r of N), named by a manifest "
                        "weights/<attr>.shards.json in the weights table: each machine of a "
                        "sharded run needs only its rank's files (default 1: one .npy per weight)")
    p.add_argument("--weights-cache", default=None, metavar="DIR",
                   help="keep each weight file's bytes once in DIR (named by their SHA-256) "
                        "and hard-link the export's weight files to them, so that exports of "
                        "one model (its levels, its batch sizes) hold its weights once on disk; "
                        "a file system that refuses the link gets a copy")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    return p


def load_factory(spec):
    """Resolve MODULE:FACTORY to a callable; raises UsageError."""
    if ":" not in spec:
        raise UsageError("bad MODULE:FACTORY %r: missing ':'" % spec)
    mod_name, attr = spec.rsplit(":", 1)
    if not mod_name or not attr:
        raise UsageError("bad MODULE:FACTORY %r: empty module or factory" % spec)
    is_file = mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name
    try:
        if is_file:
            path = os.path.abspath(mod_name)
            if not os.path.isfile(path):
                raise UsageError("bad MODULE:FACTORY %r: no file %s" % (spec, mod_name))
            name = "_export_fx_user_" + re.sub(r"\W", "_", os.path.splitext(
                os.path.basename(path))[0])
            mspec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(mspec)
            sys.modules[name] = module
            sys.path.insert(0, os.path.dirname(path))
            mspec.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except UsageError:
        raise
    except ImportError as e:
        raise UsageError("bad MODULE:FACTORY %r: cannot import %s: %s" % (spec, mod_name, e))
    except Exception as e:  # error while executing the module itself
        raise UsageError("bad MODULE:FACTORY %r: importing %s raised %s: %s"
                         % (spec, mod_name, type(e).__name__, e))
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError("bad MODULE:FACTORY %r: %s has no attribute %r"
                             % (spec, mod_name, attr))
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError("bad MODULE:FACTORY %r: %s is not callable" % (spec, attr))
    return obj


# --------------------------------------------------------------------------
# canonical target names

_MODULE_MAP = {
    "torch._C._nn": "torch.nn.functional",
    "torch._C._VariableFunctions": "torch",
    "torch._C._VariableFunctionsClass": "torch",
    "torch.functional": "torch",
    "torch._C._fft": "torch.fft",
    "torch._C._linalg": "torch.linalg",
    "torch._C._special": "torch.special",
    "torch._C._nested": "torch.nested",
    "_operator": "operator",
    "__builtin__": "builtins",
}


def _resolve(dotted):
    """Import the longest importable prefix of `dotted`, getattr the rest."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
            return obj
        except AttributeError:
            return None
    return None


def target_name(target):
    """The canonical name of a call_function target (see FX_GRAPH_JSON.md)."""
    import torch
    if isinstance(target, str):
        return target
    if isinstance(getattr(target, "kiln_target", None), str):
        return target.kiln_target  # --quantize's quantize/dequantize functions
    ops = getattr(torch, "_ops", None)
    op_types = tuple(t for t in (getattr(ops, "OpOverload", None),
                                 getattr(ops, "OpOverloadPacket", None))
                     if t is not None)
    if op_types and isinstance(target, op_types):
        return str(target)  # aten.mm.default
    hop = getattr(ops, "HigherOrderOperator", None)
    if hop is not None and isinstance(target, hop):
        return "torch.ops.higher_order." + target.__name__

    name = getattr(target, "__name__", None)
    module = getattr(target, "__module__", None)
    if name is None:
        return repr(target)
    candidates = []
    if module:
        candidates.append(_MODULE_MAP.get(module, module) + "." + name)
    if getattr(builtins, name, None) is target:
        candidates.append("builtins." + name)
    if getattr(operator, name, None) is target:
        candidates.append("operator." + name)
    import torch.nn.functional as F
    if getattr(torch, name, None) is target:
        candidates.append("torch." + name)
    if getattr(F, name, None) is target:
        candidates.append("torch.nn.functional." + name)
    if getattr(torch.Tensor, name, None) is target:  # torch.Tensor.add(x, y)
        candidates.append("torch.Tensor." + name)
    # the first candidate that resolves back to the target itself
    for c in candidates:
        if _resolve(c) is target:
            return c
    if candidates:
        return candidates[0]
    return name


# --------------------------------------------------------------------------
# ARG and META encoding

def dtype_name(dtype):
    s = str(dtype)
    return s[len("torch."):] if s.startswith("torch.") else s


def encode_scalar_sym(x):
    """SymInt/SymFloat/SymBool (PyTorch 2.x); None when x is not one."""
    tname = type(x).__name__
    if tname in ("SymInt", "SymFloat", "SymBool"):
        node = getattr(x, "node", None)
        if node is not None and hasattr(node, "maybe_as_int"):
            v = node.maybe_as_int()
            if v is not None:
                return int(v)
        return {"sym": str(x)}
    return None


def encode_arg(a):
    import torch
    import torch.fx
    if isinstance(a, torch.fx.Node):
        return {"node": a.name}
    if a is None or isinstance(a, (bool, str)):
        return a
    if isinstance(a, int):
        return int(a)
    if isinstance(a, float):
        if math.isnan(a):
            return {"float": "nan"}
        if math.isinf(a):
            return {"float": "inf" if a > 0 else "-inf"}
        return float(a)
    sym = encode_scalar_sym(a)
    if sym is not None:
        return sym
    if isinstance(a, (list, tuple)):  # also torch.Size, immutable_list
        return [encode_arg(x) for x in a]
    if isinstance(a, dict):
        return {"dict": {str(k): encode_arg(v) for k, v in a.items()}}
    if isinstance(a, torch.dtype):
        return {"dtype": dtype_name(a)}
    if isinstance(a, torch.device):
        return {"device": str(a)}
    enum_types = tuple(t for t in (getattr(torch, "memory_format", None),
                                   getattr(torch, "layout", None),
                                   getattr(torch, "qscheme", None))
                       if isinstance(t, type))
    if enum_types and isinstance(a, enum_types):
        return {"enum": str(a)}
    if a is Ellipsis:
        return {"enum": "Ellipsis"}
    if isinstance(a, slice):
        return {"slice": [encode_arg(a.start), encode_arg(a.stop), encode_arg(a.step)]}
    try:  # numpy scalars
        import numpy as np
        if isinstance(a, np.bool_):
            return bool(a)
        if isinstance(a, np.integer):
            return int(a)
        if isinstance(a, np.floating):
            return encode_arg(float(a))
    except ImportError:
        pass
    return {"repr": repr(a)}


def _dim(d):
    if isinstance(d, int):
        return int(d)
    sym = encode_scalar_sym(d)
    return sym if sym is not None else {"repr": repr(d)}


def tensor_meta_json(shape, dtype, stride):
    out = {"shape": [_dim(d) for d in shape], "dtype": dtype_name(dtype)}
    if stride is not None:
        out["stride"] = [_dim(s) for s in stride]
    return out


def _one_meta(m):
    """TensorMetadata / Tensor / FakeTensor -> TENSOR_META, else None."""
    import torch
    if isinstance(m, torch.Tensor):
        try:
            stride = m.stride()
        except Exception:  # sparse etc.
            stride = None
        return tensor_meta_json(m.shape, m.dtype, stride)
    if all(hasattr(m, f) for f in ("shape", "dtype", "stride")) and \
            not callable(getattr(m, "stride")):
        return tensor_meta_json(m.shape, m.dtype, m.stride)
    return None


def _meta_value(v):
    """TENSOR_META, list of them, or int; None when it does not fit the spec."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return int(v)
    if type(v).__name__ == "SymInt":
        return encode_scalar_sym(v)
    one = _one_meta(v)
    if one is not None:
        return one
    if isinstance(v, (list, tuple)) and len(v) > 0:
        items = [_one_meta(x) for x in v]
        if all(i is not None for i in items):
            return items
    return None


def node_meta(node, int_values):
    if node.op == "output":
        return {}
    val = None
    tm = node.meta.get("tensor_meta")
    if tm is not None:
        val = _meta_value(tm)
    if val is None and node.name in int_values:
        val = int_values[node.name]
    if val is None and "val" in node.meta:  # PyTorch 2.x make_fx / dynamo
        val = _meta_value(node.meta["val"])
    return {"val": val} if val is not None else {}


# --------------------------------------------------------------------------
# tracing

def _make_shape_prop(gm):
    from torch.fx.passes.shape_prop import ShapeProp

    class _ShapeProp(ShapeProp):
        """ShapeProp that also records integer results (e.g. x.size(1))."""

        def __init__(self, module):
            super().__init__(module)
            self.int_values = {}

        def run_node(self, n):
            result = super().run_node(n)
            if isinstance(result, int) and not isinstance(result, bool):
                self.int_values[n.name] = int(result)
            return result

    return _ShapeProp(gm)


_MUTATING_OPERATORS = {
    "setitem", "delitem", "iadd", "isub", "imul", "imatmul", "itruediv",
    "ifloordiv", "imod", "ipow", "ilshift", "irshift", "iand", "ior", "ixor",
    "iconcat",
}


def _is_mutating(node):
    """Whether a node may write to one of its inputs (kept by dead-code removal)."""
    if node.op == "call_method":
        t = str(node.target)
        return t.endswith("_") and not t.endswith("__")
    if node.op == "call_function":
        name = getattr(node.target, "__name__", "")
        if node.kwargs.get("inplace") is True:
            return True
        if name.endswith("_") and not name.endswith("__"):
            return True
        if name in _MUTATING_OPERATORS and getattr(operator, name, None) is node.target:
            return True
    return False


def _remove_dead(graph):
    """Drop pure nodes nobody uses (left by shape checks resolved while tracing)."""
    removed = True
    while removed:
        removed = False
        for node in reversed(list(graph.nodes)):
            if node.op in ("placeholder", "output") or node.users:
                continue
            if _is_mutating(node):
                continue
            is_impure = getattr(node, "is_impure", None)
            if is_impure is not None and node.op == "call_function" and is_impure():
                continue
            graph.erase_node(node)
            removed = True


def _raw_attr(root, target):
    """getattr by dotted path without nn.Module.__getattr__ (patched while tracing)."""
    obj = root
    for part in target.split("."):
        d = obj.__dict__
        found = False
        for table in ("_parameters", "_buffers", "_modules"):
            t = d.get(table)
            if t is not None and part in t:
                obj, found = t[part], True
                break
        if not found:
            obj = object.__getattribute__(obj, part)
    return obj


def _eager_module_call(mod, args, kwargs):
    """Runs a (leaf) module on concrete values while torch.fx traces: with
    nn.Module.__call__ and __getattr__ as they were before the tracer patched
    them, which would otherwise record the call again (and its parameters as
    get_attr nodes)."""
    import torch
    import torch.fx._symbolic_trace as st
    orig_call = getattr(st, "_orig_module_call", None)
    orig_getattr = getattr(st, "_orig_module_getattr", None)
    if orig_call is None or orig_getattr is None:
        raise RuntimeError("this PyTorch's torch.fx has no _orig_module_call; "
                           "--leaf-modules cannot compute the leaf modules' values")
    patched_call, patched_getattr = torch.nn.Module.__call__, torch.nn.Module.__getattr__
    torch.nn.Module.__call__, torch.nn.Module.__getattr__ = orig_call, orig_getattr
    try:
        return mod(*args, **kwargs)
    finally:
        torch.nn.Module.__call__, torch.nn.Module.__getattr__ = patched_call, patched_getattr


def trace_torch(model, inputs, name, leaf_classes=()):
    """torch.fx trace through every module, with concrete values on the side.

    Each proxy carries the real value it stands for (computed on the example
    inputs while tracing), so Python control flow on shapes and values, such
    as BatchNorm's ``if input.dim() != 4``, is resolved for these inputs the
    way eager execution resolves it; the checks leave no nodes behind.
    """
    import torch
    import torch.fx
    from torch.fx.proxy import Proxy

    class _ConcreteTracer(torch.fx.Tracer):
        def __init__(self):
            super().__init__()
            self.values = {}        # Node -> concrete value
            self.n_placeholders = 0
            self.n_resolved = 0     # bool() of a proxy answered concretely

        def create_args_for_root(self, root_fn, is_module, concrete_args=None):
            # Optional arguments past the given inputs are not inputs: forward
            # gets their defaults (TransformerEncoder's masks stay None).
            root_fn, fn_args = super().create_args_for_root(root_fn, is_module, concrete_args)
            fn_args = list(fn_args)
            first = 1 if is_module else 0  # args[0] is the module itself
            for k in range(first + len(inputs), len(fn_args)):
                a = fn_args[k]
                if isinstance(a, Proxy) and a.node.op == "placeholder" and len(a.node.args) == 1:
                    fn_args[k] = a.node.args[0]
                    del self.values[a.node]
                    self.graph.erase_node(a.node)
            return root_fn, fn_args

        def is_leaf_module(self, m, module_qualified_name):
            # trace through every module but those of the --leaf-modules classes
            return type(m) in leaf_classes

        def value_of(self, proxy):
            return self.values[proxy.node]

        def _concrete(self, a):
            if isinstance(a, Proxy):
                return self.value_of(a)
            if isinstance(a, tuple):
                vals = [self._concrete(x) for x in a]
                return type(a)(*vals) if hasattr(a, "_fields") else tuple(vals)
            if isinstance(a, list):
                return [self._concrete(x) for x in a]
            if isinstance(a, dict):
                return {k: self._concrete(v) for k, v in a.items()}
            if isinstance(a, slice):
                return slice(self._concrete(a.start), self._concrete(a.stop),
                             self._concrete(a.step))
            return a

        def create_proxy(self, kind, target, args, kwargs, name=None,
                         type_expr=None, proxy_factory_fn=None):
            proxy = super().create_proxy(kind, target, args, kwargs, name=name,
                                         type_expr=type_expr,
                                         proxy_factory_fn=proxy_factory_fn)
            if kind == "placeholder":
                i = self.n_placeholders
                self.n_placeholders += 1
                if i < len(inputs):
                    value = inputs[i]
                elif len(args) == 1:  # an optional argument: its default
                    value = args[0]
                else:
                    raise UsageError("the model takes more inputs than the %d "
                                     "--input-shape given" % len(inputs))
            elif kind == "get_attr":
                value = _raw_attr(self.root, target)
            else:
                cargs = self._concrete(tuple(args))
                ckwargs = self._concrete(dict(kwargs))
                with torch.no_grad():
                    if kind == "call_function":
                        value = target(*cargs, **ckwargs)
                    elif kind == "call_method":
                        value = getattr(cargs[0], target)(*cargs[1:], **ckwargs)
                    elif kind == "call_module":
                        value = _eager_module_call(self.root.get_submodule(target), cargs, ckwargs)
                    else:
                        raise RuntimeError("unexpected proxy kind %r" % kind)
            self.values[proxy.node] = value
            return proxy

        # Python control flow on proxies: answer from the concrete value
        def to_bool(self, obj):
            self.n_resolved += 1
            return bool(self.value_of(obj))

        def iter(self, obj):
            return iter([obj[i] for i in range(len(self.value_of(obj)))])

        def keys(self, obj):
            return list(self.value_of(obj).keys())

    tracer = _ConcreteTracer()
    # len() and iteration of a proxy also answer from the concrete value.
    # (Proxy.__iter__ of torch 1.13 reads the caller's bytecode, which fails
    # on Python 3.11; iterating the concrete length needs no bytecode.)
    orig_len, orig_iter = Proxy.__len__, Proxy.__iter__

    def _len(self):
        if isinstance(self.tracer, _ConcreteTracer):
            return len(self.tracer.value_of(self))
        return orig_len(self)

    def _iter(self):
        if isinstance(self.tracer, _ConcreteTracer):
            return self.tracer.iter(self)
        return orig_iter(self)

    Proxy.__len__, Proxy.__iter__ = _len, _iter
    try:
        graph = tracer.trace(model)
    finally:
        Proxy.__len__, Proxy.__iter__ = orig_len, orig_iter
    _remove_dead(graph)
    graph.lint()
    if tracer.n_resolved:
        sys.stderr.write("%s: note: %d Python condition(s) on traced values were "
                         "decided on the example inputs; the graph is specialised "
                         "to them\n" % (PROG, tracer.n_resolved))
    return torch.fx.GraphModule(tracer.root, graph, name)


def class_name(cls):
    """The fully qualified name of a class: torch.nn.modules.linear.Linear."""
    return "%s.%s" % (cls.__module__, cls.__qualname__)


_NOT_JSON = object()


def _json_constant(v):
    """A module constant as JSON data, or _NOT_JSON (dtypes, tensors, ...)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else _NOT_JSON
    if isinstance(v, (tuple, list)):
        items = [_json_constant(x) for x in v]
        return _NOT_JSON if any(x is _NOT_JSON for x in items) else items
    return _NOT_JSON


def module_table(gm):
    """fx-graph-json's "modules": for each call_module target, the module's
    class and its __constants__ (in_features, stride, ...) as "attrs"."""
    table = {}
    for n in gm.graph.nodes:
        if n.op != "call_module" or n.target in table:
            continue
        mod = gm.get_submodule(n.target)
        attrs = {}
        for c in getattr(type(mod), "__constants__", []):
            v = _json_constant(getattr(mod, c, _NOT_JSON))
            if v is not _NOT_JSON:
                attrs[c] = v
        entry = {"class": class_name(type(mod))}
        if attrs:
            entry["attrs"] = attrs
        table[str(n.target)] = entry
    return table


def resolve_leaf_classes(text):
    """--leaf-modules: dotted class names to classes."""
    import torch
    classes = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        cls = _resolve(item)
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            raise UsageError("--leaf-modules: %r is not an nn.Module class" % item)
        classes.append(cls)
    return tuple(classes)


def trace_aten(model, inputs):
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(model)(*inputs)  # real mode in 1.13 and 2.x


def _lifted_name(prefix, qualified, used):
    name = prefix + re.sub(r"\W", "_", qualified)
    base, i = name, 1
    while name in used:
        name = "%s_%d" % (base, i)
        i += 1
    used.add(name)
    return name


def trace_export(model, inputs):
    """The torch.export form: (graph module, {placeholder target: value}) with
    the parameters, buffers and constant tensors as leading placeholders."""
    import torch
    if hasattr(torch, "export") and hasattr(torch.export, "export"):
        from torch.export.graph_signature import InputKind
        ep = torch.export.export(model, tuple(inputs)).run_decompositions()
        bound = {}
        for spec in ep.graph_signature.input_specs:
            if spec.kind == InputKind.USER_INPUT:
                continue
            if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER) and spec.target in ep.state_dict:
                value = ep.state_dict[spec.target]
            elif spec.target in ep.constants:
                value = ep.constants[spec.target]
            else:
                raise RuntimeError("torch.export input %s (%s) has no value"
                                   % (spec.arg.name, spec.kind))
            bound[spec.arg.name] = value
        gm = ep.graph_module
        for n in gm.graph.nodes:
            if n.op == "placeholder" and n.name in bound:
                n.target = n.name  # the weight's key, as kiln looks it up
        gm.recompile()
        return gm, bound
    # PyTorch 1.13: make_fx over functional_call, the state passed as arguments.
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.utils import stateless
    state = [("p_", k, v) for k, v in model.named_parameters()]
    state += [("b_", k, v) for k, v in model.named_buffers()]
    names = [k for _, k, _ in state]

    def forward(*args):
        return stateless.functional_call(model, dict(zip(names, args[:len(state)])),
                                         tuple(args[len(state):]))

    gm = make_fx(forward)(*[v for _, _, v in state], *inputs)
    used, bound = set(), {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n, (prefix, k, v) in zip(placeholders, state):
        n.name = n.target = _lifted_name(prefix, k, used)
        bound[n.name] = v
    try:  # the model's own inputs keep forward()'s names, as torch.export's do
        params = list(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        params = []
    for i, n in enumerate(placeholders[len(state):]):
        n.name = n.target = _lifted_name("", params[i] if i < len(params) else "input_%d" % i, used)
    gm.recompile()
    return gm, bound


def get_attr_value(gm, target):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


# --------------------------------------------------------------------------
# outputs

def output_structure(arg):
    """The output node's value as a (nested) list; dicts become value lists."""
    if isinstance(arg, dict):
        return [output_structure(v) for v in arg.values()]
    if isinstance(arg, (list, tuple)):
        return [output_structure(v) for v in arg]
    return arg


def flatten_leaves(x, out):
    if isinstance(x, dict):
        for v in x.values():
            flatten_leaves(v, out)
    elif isinstance(x, (list, tuple)):
        for v in x:
            flatten_leaves(v, out)
    else:
        out.append(x)
    return out


# --------------------------------------------------------------------------
# files

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_file_stem(attr, used):
    stem = _SAFE.sub("_", attr).lstrip(".") or "attr"
    base, i = stem, 1
    while stem.lower() in used:  # case-insensitive file systems
        stem = "%s_%d" % (base, i)
        i += 1
    used.add(stem.lower())
    return stem


def to_numpy(t):
    import torch
    t = t.detach().cpu()
    if t.is_quantized:
        raise ValueError("quantized tensors are not supported")
    if t.dtype == torch.bfloat16:
        sys.stderr.write("%s: warning: bfloat16 saved as float32\n" % PROG)
        t = t.float()
    return t.contiguous().numpy()


def save_npy(path, value, cache=None):
    """Writes value as .npy at path. A file already there is unlinked first: it may be
    a hard link into a weights cache, which writing through it would change. With a
    cache folder the bytes go to cache/<sha256>.npy once and path becomes a hard link
    to that file (a copy where the file system refuses the link)."""
    import io
    import numpy as np
    if os.path.lexists(path):
        os.unlink(path)
    if not cache:
        np.save(path, value, allow_pickle=False)
        return
    buf = io.BytesIO()
    np.save(buf, value, allow_pickle=False)
    data = buf.getvalue()
    os.makedirs(cache, exist_ok=True)
    kept = os.path.join(cache, hashlib.sha256(data).hexdigest() + ".npy")
    if not os.path.exists(kept):
        # Written aside and renamed: exports running at once may both write it.
        fd, tmp = tempfile.mkstemp(dir=cache, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a file np.save makes, not mkstemp's 0600
        os.replace(tmp, kept)
    try:
        os.link(kept, path)
    except OSError:
        with open(path, "wb") as f:
            f.write(data)


def save_weight(out_dir, rel_npy, value, shards, cache=None):
    """Writes a weight as rel_npy, or (shards > 1) as one file per rank and their
    manifest (kiln/io/weight_shards.hpp); returns the path the weights table names.
    cache: the --weights-cache folder, or None."""
    if shards <= 1:
        save_npy(os.path.join(out_dir, rel_npy), value, cache)
        return rel_npy
    import numpy as np
    flat = np.ascontiguousarray(value).reshape(-1)
    per = (flat.size + shards - 1) // shards
    stem = os.path.basename(rel_npy)[:-len(".npy")]
    files = []
    for r in range(shards):
        name = "%s.rank%d.npy" % (stem, r)
        save_npy(os.path.join(out_dir, os.path.dirname(rel_npy), name), flat[min(flat.size, r * per):min(flat.size, (r + 1) * per)],
                 cache)
        files.append(name)
    rel = rel_npy[:-len(".npy")] + ".shards.json"
    write_json(os.path.join(out_dir, rel), {
        "format": "kiln-weight-shards", "version": 1, "dtype": np_dtype_name(value.dtype),
        "shape": list(value.shape), "world_size": shards, "files": files})
    return rel


def np_dtype_name(dtype):
    """fx-graph-json's name of a numpy dtype (to_numpy writes bfloat16 as float32)."""
    names = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")
    if str(dtype) not in names:
        raise UsageError("--shards: a weight of numpy dtype %s cannot be sharded" % dtype)
    return str(dtype)


def write_json(path, obj):
    with open(path, "w") as f:
        f.write(json.dumps(obj, separators=(",", ":"), allow_nan=False))
        f.write("\n")


# --------------------------------------------------------------------------
# main

def seed_all(seed):
    import numpy as np
    import torch
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


def _max_abs_diff(a, b):
    import torch
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape:
            return float("inf")
        if a.numel() == 0:
            return 0.0
        if a.dtype.is_floating_point or a.dtype.is_complex:
            return float((a.double() - b.double()).abs().max())
        return 0.0 if torch.equal(a, b) else float("inf")
    return 0.0 if a == b else float("inf")


def _load_quantizer(args):
    """The x86 recipe (tools/fx_quantize_x86.py), after checking --quantize's options."""
    if args.level != "aten":
        raise UsageError("--quantize %s needs --level aten (the recipe rewrites ATen "
                         "convolution/addmm/mm graphs)" % args.quantize)
    if args.dtype != "float32":
        raise UsageError("--quantize %s needs --dtype float32" % args.quantize)
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import fx_quantize_x86
    return fx_quantize_x86


def export(args):
    if args.shards < 1:
        raise UsageError("--shards must be at least 1, got %d" % args.shards)
    try:
        import numpy as np
        import torch
        import torch.fx
    except ImportError as e:
        raise UsageError("%s cannot import torch/numpy (%s); run the script with a "
                         "Python that has them, e.g. /usr/bin/python3" % (sys.executable, e))

    shapes = [parse_shape(s) for s in args.input_shape]
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    factory = load_factory(args.factory)
    fac_name = args.factory.rsplit(":", 1)[1].split(".")[-1]
    graph_name = "%s_%s" % (re.sub(r"\W", "_", fac_name.lower()), args.level)
    dtype = getattr(torch, args.dtype)

    if torch.get_num_threads() < (os.cpu_count() or 1):
        torch.set_num_threads(os.cpu_count() or 1)

    # model
    seed_all(args.seed)
    try:
        model = factory()
    except Exception as e:
        raise RuntimeError("calling %s() failed: %s: %s"
                           % (args.factory, type(e).__name__, e)) from e
    if not isinstance(model, torch.nn.Module):
        raise UsageError("bad MODULE:FACTORY %r: factory returned %s, not an nn.Module"
                         % (args.factory, type(model).__name__))
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    if dtype != torch.float32:
        model.to(dtype)
    quant = _load_quantizer(args) if args.quantize else None
    if args.autocast and quant is None:
        raise UsageError("--autocast %s needs --quantize x86" % args.autocast)

    # inputs
    seed_all(args.seed)
    inputs = [torch.randn(*s, dtype=dtype) if s else torch.randn((), dtype=dtype)
              for s in shapes]

    try:
        inspect.signature(model.forward).bind(*inputs)
    except TypeError as e:
        raise UsageError("%d --input-shape given, but %s.forward%s does not take "
                         "them: %s" % (len(inputs), type(model).__name__,
                                       inspect.signature(model.forward), e))
    except ValueError:
        pass  # no signature available

    def fresh():
        return [t.clone() for t in inputs]

    with torch.no_grad():
        eager = model(*fresh())

    # trace
    leaf_classes = resolve_leaf_classes(args.leaf_modules)
    if leaf_classes and args.level != "torch":
        raise UsageError("--leaf-modules needs --level torch (make_fx traces into every module)")
    bound = {}  # --level export: lifted placeholder -> its value
    if args.level == "torch":
        try:
            gm = trace_torch(model, fresh(), graph_name, leaf_classes)
        except UsageError:
            raise
        except Exception as e:  # torch.fx cannot follow the model's Python
            if leaf_classes:
                raise
            msg = str(e).strip().splitlines()
            sys.stderr.write("%s: note: torch.fx cannot trace %s at torch level (%s: %s); "
                             "exported at aten level instead\n"
                             % (PROG, type(model).__name__, type(e).__name__, msg[0] if msg else ""))
            args.level = "aten"
            graph_name = "%s_aten" % graph_name[:-len("_torch")]
            gm = trace_aten(model, fresh())
    elif args.level == "aten" and quant is not None:
        gm = trace_aten(quant.fold_batch_norms(model), fresh())
        quantized = quant.quantize_x86(gm, fresh())
        if args.autocast:
            gm = quant.autocast_retrace(gm, fresh(), getattr(torch, args.autocast))
    elif args.level == "aten":
        gm = trace_aten(model, fresh())  # parameters do not require grad
    else:
        gm, bound = trace_export(model, fresh())
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder" and n.name not in bound]
    lifted = [bound[n.name] for n in graph.nodes if n.op == "placeholder" and n.name in bound]
    if len(placeholders) != len(inputs):
        raise UsageError("the traced graph has %d inputs (%s) but %d --input-shape given"
                         % (len(placeholders), ", ".join(n.name for n in placeholders),
                            len(inputs)))

    sp = _make_shape_prop(gm)
    with torch.no_grad():
        sp.propagate(*lifted, *fresh())
        replay = gm(*lifted, *fresh())

    # check the graph against eager
    eager_leaves = flatten_leaves(eager, [])
    replay_leaves = flatten_leaves(replay, [])
    if len(eager_leaves) != len(replay_leaves):
        raise RuntimeError("graph returns %d values, eager model %d"
                           % (len(replay_leaves), len(eager_leaves)))
    worst = max([_max_abs_diff(a, b) for a, b in zip(eager_leaves, replay_leaves)] + [0.0])
    if quant is not None:  # the reference is the q/dq graph, run by PyTorch
        eager_leaves = replay_leaves

    # nodes
    out_dir = args.out
    for sub in ("", "weights", "inputs", "outputs"):
        os.makedirs(os.path.join(out_dir, sub), exist_ok=True)

    nodes = []
    weights = {}
    used_stems = set()
    n_output = 0
    for n in graph.nodes:
        if n.op == "call_function":
            target = target_name(n.target)
        elif n.op == "output":
            target = "output"
            n_output += 1
        else:
            target = str(n.target)
        if n.op == "output":
            ret = n.args[0] if len(n.args) == 1 else list(n.args)
            ret = output_structure(ret)
            if not isinstance(ret, list):
                ret = [ret]
            node_args = [encode_arg(ret)]
            node_kwargs = {}
        else:
            node_args = encode_arg(list(n.args))
            node_kwargs = {str(k): encode_arg(v) for k, v in n.kwargs.items()}
        if n.op == "get_attr" and n.target not in weights:
            value = get_attr_value(gm, n.target)
            if isinstance(value, torch.Tensor):
                stem = safe_file_stem(n.target, used_stems)
                rel = save_weight(out_dir, "weights/%s.npy" % stem, to_numpy(value), args.shards, args.weights_cache)
                weights[n.target] = {"file": rel}
            else:
                sys.stderr.write("%s: warning: get_attr %s is a %s, not a tensor; "
                                 "no weight file\n" % (PROG, n.target, type(value).__name__))
        if n.op == "placeholder" and n.name in bound:
            stem = safe_file_stem(n.target, used_stems)
            rel = save_weight(out_dir, "weights/%s.npy" % stem, to_numpy(bound[n.name]), args.shards, args.weights_cache)
            weights[n.target] = {"file": rel}
        if n.op == "call_module":
            mod = gm.get_submodule(n.target)
            for name, value in list(mod.named_parameters(recurse=False)) + list(mod.named_buffers(recurse=False)):
                full = "%s.%s" % (n.target, name)
                if full in weights or value is None or not value.is_floating_point():
                    continue  # (num_batches_tracked counts training steps)
                stem = safe_file_stem(full, used_stems)
                rel = save_weight(out_dir, "weights/%s.npy" % stem, to_numpy(value.detach()), args.shards, args.weights_cache)
                weights[full] = {"file": rel}
        nodes.append({
            "name": n.name,
            "op": n.op,
            "target": target,
            "args": node_args,
            "kwargs": node_kwargs,
            "meta": node_meta(n, sp.int_values),
        })
    if n_output != 1 or nodes[-1]["op"] != "output":
        raise RuntimeError("the traced graph does not end in one output node")

    doc = {"format": FORMAT, "version": VERSION, "name": graph_name,
           "nodes": nodes, "weights": weights}
    # Written whenever the graph calls modules (only --leaf-modules makes it
    # do so: both levels otherwise trace into every module).
    modules = module_table(gm)
    if modules:
        doc["modules"] = modules
    write_json(os.path.join(out_dir, "graph.json"), doc)

    # inputs and outputs
    input_files = []
    for ph, t in zip(placeholders, inputs):
        rel = "inputs/%s.npy" % safe_file_stem(ph.name, set())
        save_npy(os.path.join(out_dir, rel), to_numpy(t))
        input_files.append(rel)
    output_files = []
    for i, v in enumerate(eager_leaves):
        rel = "outputs/output_%d.npy" % i
        if isinstance(v, torch.Tensor):
            save_npy(os.path.join(out_dir, rel), to_numpy(v))
        elif isinstance(v, (bool, int, float)):
            save_npy(os.path.join(out_dir, rel), np.asarray(v))
        else:
            rel = None  # None or another non-tensor leaf: no file
        output_files.append(rel)

    manifest = {
        "graph": "graph.json",
        "name": graph_name,
        "factory": args.factory,
        "level": args.level,
        "seed": args.seed,
        "dtype": args.dtype,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "input_names": [n.name for n in placeholders],
        "input_shapes": shapes,
        "inputs": input_files,
        "outputs": output_files,
        "output_shapes": [list(v.shape) if isinstance(v, torch.Tensor) else None
                          for v in eager_leaves],
        "graph_vs_eager_max_abs_diff": worst if math.isfinite(worst) else str(worst),
        "node_count": len(nodes),
    }
    if args.shards > 1:
        manifest["shards"] = args.shards
    if quant is not None:
        manifest["quantize"] = args.quantize
        if args.autocast:
            manifest["autocast"] = args.autocast
        manifest["quantized"] = quantized
        manifest["quantized_vs_float_max_abs_diff"] = manifest.pop("graph_vs_eager_max_abs_diff")
    write_json(os.path.join(out_dir, "manifest.json"), manifest)

    print("%s: wrote %s (%d nodes, %d weights, %d inputs, %d outputs; "
          "%s max abs diff %.3g)"
          % (PROG, os.path.join(out_dir, "graph.json"), len(nodes), len(weights),
             len(input_files), len(output_files),
             "quantized vs float eager" if quant is not None else "graph vs eager", worst))
    if quant is None and not (worst <= 1e-3):
        sys.stderr.write("%s: warning: the traced graph does not reproduce the eager "
                         "outputs (max abs diff %g)\n" % (PROG, worst))
    return 0


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        # validate shapes before importing torch: cheap, clear errors
        for s in args.input_shape:
            parse_shape(s)
        return export(args)
    except UsageError as e:
        sys.stderr.write("%s: error: %s\n" % (PROG, e))
        return 2
    except Exception as e:
        traceback.print_exc()
        msg = str(e).strip().splitlines()
        sys.stderr.write("%s: error: %s: %s\n"
                         % (PROG, type(e).__name__, msg[0] if msg else ""))
        return 1


if __name__ == "__main__":
    sys.exit(main())
