"""Inductor 2.x on the int8 graphs of ``export_fx.py --quantize x86``.

Builds the same q/dq graph the exporter writes (tools/fx_quantize_x86.py),
with its quantize/dequantize calls turned into the registered
``quantized_decomposed`` ops, compiles it with ``torch.compile`` and
``freezing=True`` (Inductor's quantization passes run under freezing), and
prints one JSON line per model: Inductor's counters, every pattern the
matcher replaced (``--matches``), the largest difference from the q/dq graph
run eagerly (or, where the compiled model fails when it runs, ``run_error``
after the counters its passes left), and, with ``--threads``, the median time of the compiled int8
model and of the float model in eager mode, and with ``--ort`` of ONNX Runtime's QDQ int8 model
(static quantization of the float model's ONNX export: per-tensor uint8
activations calibrated on the same input, per-channel int8 weights, the same
recipe), where ONNX Runtime takes it.

    python3 bench/quantization/inductor_int8.py tests.python.quant_models:QuantMLP \\
        --input-shape 4,8,32 --matches
    python3 bench/quantization/inductor_int8.py tests.python.vision_models:ResNet18 \\
        --input-shape 16,3,224,224 --threads 2,16

Needs a PyTorch that registers ``quantized_decomposed`` (2.x); run from the
repository root.
"""

import argparse
import collections
import contextlib
import inspect
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import export_fx  # noqa: E402
import fx_quantize_x86  # noqa: E402


class MatchLog:
    """Records, for each pattern_matcher_count increment, which pattern matched
    and the targets of the nodes it replaced (read from the caller's frame)."""

    def __init__(self):
        self.matches = []

    def install(self, counters):
        log = self

        class Recording(collections.Counter):
            def __setitem__(self, key, value):
                if key == "pattern_matcher_count":
                    frame = inspect.currentframe().f_back
                    entry, match = frame.f_locals.get("entry"), frame.f_locals.get("m")
                    if entry is None:  # another PyTorch's names: say which there are
                        log.matches.append({"frame_locals": sorted(frame.f_locals)})
                        return super().__setitem__(key, value)
                    pattern = getattr(entry, "pattern", None)
                    log.matches.append({
                        "pattern": type(pattern).__name__ + ":" + str(getattr(pattern, "fns", ""))[:120],
                        "handler": getattr(getattr(entry, "handler", None), "__name__", str(entry)[:80]),
                        "nodes": [str(x.target) for x in getattr(match, "nodes", [])]})
                super().__setitem__(key, value)

        counters["inductor"] = Recording(counters["inductor"])


def median_ms(fn, inputs, rounds, warmup_ms):
    """Median of `rounds` timed runs, after untimed ones: at least 2, and on until
    warmup_ms has passed (kiln-run's --warmup-ms does the same for kiln)."""
    with torch.no_grad():
        start, runs = time.perf_counter(), 0
        while runs < 2 or (time.perf_counter() - start) * 1e3 < warmup_ms:
            fn(*inputs)
            runs += 1
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            fn(*inputs)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def ort_int8_model(model, x, workdir):
    """Writes ONNX Runtime's QDQ int8 model of `model`, calibrated on `x`; returns its path."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "executor"))
    import peers

    class OneInput(CalibrationDataReader):
        def __init__(self):
            self.left = [{"x": x.numpy()}]

        def get_next(self):
            return self.left.pop() if self.left else None

    fp32, int8 = os.path.join(workdir, "fp32.onnx"), os.path.join(workdir, "int8.onnx")
    peers.export_onnx(model, x, fp32)
    quantize_static(fp32, int8, OneInput(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return int8


def ort_session(path, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("factory")
    p.add_argument("--input-shape", required=True)
    p.add_argument("--threads", default="", help="comma list: time at each thread count")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--warmup-ms", type=float, default=0.0,
                   help="untimed runs before each timing go on until this long has passed (at least 2)")
    p.add_argument("--matches", action="store_true", help="list every pattern the matcher replaced")
    p.add_argument("--ort", action="store_true", help="also time ONNX Runtime's QDQ int8 model")
    p.add_argument("--autocast", action="store_true",
                   help="compile and run under torch.autocast(cpu, bfloat16): Inductor's int8-mixed-bf16 "
                        "patterns (counters only; export_fx.py --quantize x86 --autocast bfloat16 "
                        "writes the graph kiln's passes see)")
    args = p.parse_args()

    torch.manual_seed(0)
    model = export_fx.load_factory(args.factory)().eval()
    for prm in model.parameters():
        prm.requires_grad_(False)
    shape = [int(s) for s in args.input_shape.split(",")]
    x = torch.randn(*shape)
    gm = export_fx.trace_aten(fx_quantize_x86.fold_batch_norms(model), [x.clone()])
    quantized = fx_quantize_x86.quantize_x86(gm, [x.clone()])
    if args.autocast:  # the graph export_fx.py --autocast writes, its convolutions cast too
        gm = fx_quantize_x86.autocast_retrace(gm, [x.clone()])  # registers the q/dq ops itself
    else:
        gm = fx_quantize_x86.use_registered_ops(gm)
    mixed = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if args.autocast else contextlib.nullcontext
    with torch.no_grad(), mixed():
        reference = gm(x.clone())

    from torch._dynamo.utils import counters
    import torch._inductor.config as inductor_config
    inductor_config.freezing = True
    torch._dynamo.reset()
    counters.clear()
    log = MatchLog()
    log.install(counters)
    compiled = torch.compile(gm)
    ref_leaves = reference if isinstance(reference, (list, tuple)) else [reference]
    result = {"factory": args.factory, "input_shape": shape, "torch": torch.__version__,
              "quantized": quantized, "autocast": args.autocast}
    try:
        with torch.no_grad(), mixed():
            out = compiled(x.clone())
    except Exception as e:  # noqa: BLE001  (the compiled graph may fail where it runs, after its passes counted)
        result["run_error"] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[-1][:300])
    else:
        out_leaves = out if isinstance(out, (list, tuple)) else [out]
        result["max_abs_diff_vs_qdq"] = max(float((a.float() - b.float()).abs().max()) for a, b in zip(out_leaves, ref_leaves))
        result["output_max_abs"] = max(float(a.float().abs().max()) for a in ref_leaves)
    result["counters"] = dict(sorted(counters["inductor"].items()))
    if args.matches:
        result["matches"] = log.matches
    if "run_error" in result:
        print(json.dumps(result))
        return
    ort_model, ort_error = None, None
    if args.ort and args.threads:
        import tempfile
        work = tempfile.mkdtemp()
        try:
            ort_model = ort_int8_model(model, x, work)
        except Exception as e:  # noqa: BLE001  (ONNX Runtime may refuse the model)
            ort_error = "%s: %s" % (type(e).__name__, str(e)[:200])
    for t in [int(s) for s in args.threads.split(",") if s]:
        torch.set_num_threads(t)
        ms = result.setdefault("ms", {})[str(t)] = {
            "inductor_int8": median_ms(compiled, [x], args.rounds, args.warmup_ms),
            "eager_fp32": median_ms(model, [x], args.rounds, args.warmup_ms)}
        if ort_model:
            session, feed = ort_session(ort_model, t), {"x": x.numpy()}
            ms["ort_int8"] = median_ms(lambda _x: session.run(None, feed), [x], args.rounds, args.warmup_ms)
        elif ort_error:
            ms["ort_int8_error"] = ort_error
    print(json.dumps(result))


if __name__ == "__main__":
    main()
