#!/usr/bin/env python3
"""Per-kernel GPU profiles of the upscaler under ONNX Runtime's CUDA provider and
under PyTorch (eager or torch.compile), on the same weights, and a sweep of the
CUDA provider's options: where the GPU time of one frame goes, kernel by kernel.

Runs on a GPU machine with torch, numpy and onnxruntime-gpu (`pip install
onnxruntime-gpu`; no `onnx` package needed), from the repository root:

    python3 bench/kernel_profile.py ort-profile models/upscale-fp16.onnx --size 960x540 --fp16-io \
        --opt prefer_nhwc=1 --json $OUT/ort-fp16-nhwc.json
    python3 bench/kernel_profile.py torch-profile upscale-weights.npz --size 960x540 --compile \
        --json $OUT/torch-compile.json
    python3 bench/kernel_profile.py sweep models/upscale-fp16.onnx --size 960x540 --json $OUT/sweep-fp16.json
    python3 bench/kernel_profile.py compare $OUT/ort-fp16-nhwc.json $OUT/torch-compile.json

(the .npz is what `python3 bench/torch_side.py export models/upscale.onnx
upscale-weights.npz` writes.)

Subcommands:

- `ort-profile MODEL.onnx`: one ONNX Runtime session, CUDAExecutionProvider
  with the options of --opt KEY=VALUE (passed as strings, as the provider
  options dict of the Python API; e.g. prefer_nhwc=1,
  cudnn_conv_algo_search=EXHAUSTIVE, cudnn_conv_use_max_workspace=1,
  fuse_conv_bias=1, enable_cuda_graph=1, use_tf32=0) and the session's graph
  optimisation level --graph-opt (default `layout` = ORT_ENABLE_LAYOUT, which
  is what neural-frame's GraphOptimizationLevel::Level3 is in the ort crate;
  the Python API's own default is `all`). A session that does not run on the
  CUDA provider (ONNX Runtime falls back to the CPU silently) is an error.
  The input is fixed: numpy default_rng(7).random((1, 3, H, W)) in [0, 1], cast
  to the model's input dtype (from session.get_inputs(); --fp16-io only
  insists that it, and the output's, is float16), a torch CUDA tensor bound
  with IOBinding by its data_ptr, as is the output (a torch CUDA tensor of the
  shape the first run gave), so nothing is copied through the host. By
  default ONNX Runtime runs on a torch CUDA stream of its own given as
  user_compute_stream (as neural-frame gives it a stream; --ort-stream own
  lets it make its own), so CUDA events on that stream bracket its work.
  The first run (its time is first_run_s, cuDNN's algorithm search included;
  create_s is the session's creation) binds an output that ONNX Runtime allocates, to learn the output's shape and
  keep a host copy as reference; the later runs write into the torch output.
  With enable_cuda_graph=1 that first run is one of the regular runs ONNX
  Runtime makes before it captures (two in 1.31; at least 3 warm-up runs are
  then made, so capture and first replay precede the timing and the
  profile), so the capture sees the final addresses;
  after the timing the torch output is checked against the reference
  (output_vs_first_run_max_abs_diff: 0 or near it, else the replay wrote
  elsewhere).
- `torch-profile WEIGHTS.npz`: the same network rebuilt in PyTorch as
  bench/torch_side.py rebuilds it (Conv2d + PReLU chain, pixel_shuffle, nearest
  interpolate of the input, added), fp16 weights and activations,
  channels-last, under torch.inference_mode() with cudnn.benchmark on
  (--no-cudnn-benchmark); eager, or --compile: torch.compile(mode=
  --compile-mode, dynamic=False), compile_s being the first call. Same input
  values as ort-profile. As a guard against profiling a different network, the
  npz's check case (ONNX Runtime's CPU output) is run through the fp16 module:
  check_psnr_db, a warning under 40 dB.
- `sweep MODEL.onnx`: one session per combination of prefer_nhwc {0,1} ×
  cudnn_conv_algo_search {HEURISTIC, EXHAUSTIVE} × cudnn_conv_use_max_workspace
  {0,1} × fuse_conv_bias {0,1} × graph optimisation level (--graph-opts,
  default extended,layout,all), and use_tf32 {0,1} for a float32 model, after
  a first row with no provider option at all (the defaults). --also
  KEY=V1,V2 adds an axis or replaces one (e.g. --also enable_cuda_graph=0,1;
  --also cudnn_conv_algo_search=HEURISTIC,EXHAUSTIVE,DEFAULT), --base KEY=V an
  option for every row but the first. The keys are first tried in sessions
  that do not run (all at once, then one by one if that fails): a key the
  provider refuses is dropped from the grid (its error is in
  `unknown_options`, as is a key it accepts but does not list in
  get_provider_options()); a row whose session fails records the error and
  the sweep goes on. The defaults row runs at graph level `layout`. Each row:
  create_s, first_run_s, --warmup (default 10) untimed runs, --frames
  (default 50) timed ones, the effective options the provider reports, and
  max_abs_diff_vs_first_row of the output. It stops starting rows after
  --max-seconds (default 420); the rest are listed as skipped. The JSON is
  rewritten after every row, so a crash leaves what was done.
- `nf-profile MODEL.onnx --lib target/release/libneural_frame_c.so`: the model as
  neural-frame runs it, through its C API (ctypes) in this process: a context
  on the CUDA backend with the defaults (the precision conversion, the graph
  rewrites and the fused `ai.neural_frame::ConvAct` convolutions, which
  ONNX Runtime's Python package cannot load), except CUDA graphs, off so that
  every kernel is launched where the profiler sees it (`--fuse-conv-act
  true|false` forces that option). Settled first (the fused session taken
  over), then each run is one `nf_context_infer_rgba8` of a fixed picture: the
  upload and readback are Vulkan copies, which the profiler does not see; the
  CUDA kernels are the pre pass, the model's and the post pass. `median_ms` is
  that whole call (host copies included), so read the kernels, not the wall.
- `compare A.json B.json ...`: the category tables of profile JSONs side by
  side (no GPU needed).

What the numbers are (all in ms per run = per frame):

- `median_ms` / `p99_ms`: wall clock (time.perf_counter) around one run plus
  torch.cuda.synchronize(), as torch_side.py's model-alone modes and
  neural-frame bench's ort-alone: the latency of one synchronous frame.
  Percentiles are nearest rank, rank = round(p/100 · (n - 1)).
- `gpu_median_ms` / `gpu_p99_ms`: CUDA events around the run on the stream it
  runs on: from the moment the GPU reaches the start event (at once, the
  stream being idle) to the end of its last kernel; launch gaps included.
- the profile (torch.profiler, CUDA and CPU activity, CUPTI) of
  --profile-frames runs (default 10) after one untimed profiled run. Each run
  is a record_function range; a kernel belongs to the run whose range holds
  the launch (the CUDA runtime or driver call with the kernel's correlation
  id) or else its start. Per run: `kernel_ms` the sum of kernel, memcpy and
  memset durations; `busy_ms` the union of those intervals (kernels may
  overlap); `span_ms` from the first start to the last end; `idle_ms` = span
  − busy, the GPU's idle time between the first and the last kernel (launch
  gaps, host work); `launches`. `wall_minus_busy_ms` = median_ms − busy_ms:
  time not spent in kernels at all (launch, synchronisation, idle).
  Kernels are aggregated by name (ms per run, calls per run, µs per call)
  and sorted into categories by name (first match wins, names lower-cased):
  memcpy/memset (by CUPTI category); `fused (triton)` (Inductor's kernels,
  whatever they fuse); transpose/layout (transpose, permute, nchwToNhwc,
  nhwcToNchw, …); cuDNN's own elementwise kernels (op_tensor, add_tensor) as
  bias add/elementwise; convolution (conv, implicit_gemm, xmma, sm80_/sm90_,
  cudnn, fprop, cutlass, gemm, winograd); prelu; depth-to-space/pixel shuffle;
  resize/upsample (resize, upsample, nearest, interpolate); bias
  add/elementwise (add, elementwise, binary, unary, bias, cast, copy, fill,
  mul); other. ONNX Runtime runs DepthToSpace as a Transpose kernel, so on
  its side depth-to-space is counted under transpose/layout, with the
  layout transposes prefer_nhwc adds. The full names are in the JSON (rows),
  to sort them otherwise.

The JSON (--json) is one object: the versions (onnxruntime, torch, CUDA,
cuDNN as torch reports it, GPU, the CUDA libraries mapped into the process:
the CUDA provider uses the cuBLAS/cuDNN that torch loaded first), `modes`
(per mode: timings, per-run profile summary, categories, top kernels) and
`rows` (profile: every kernel; sweep: every configuration). Tables go to
stdout; progress lines are flushed as they come.

Debugging without a GPU: --provider cpu (ort-profile, sweep) runs on ONNX
Runtime's CPU provider with numpy inputs (the CUDA options are recorded but
not passed; the torch profiler, when torch is there, sees no kernels), and
torch-profile --device cpu --dtype fp32; both at a small --size.
"""
import argparse
import bisect
import gc
import itertools
import json
import math
import os
import platform
import re
import sys
import tempfile
import time
import warnings

import numpy as np

TOOL = "kernel_profile.py"
SEED = 7
CHECK_MIN_PSNR = 40.0
GRAPH_OPTS = ("disable", "basic", "extended", "layout", "all")
RUN_PREFIX = "kp_run_"


# ---------------------------------------------------------------- small helpers


def log(msg):
    print(msg, flush=True)


def warn(msg):
    print(f"{TOOL}: {msg}", file=sys.stderr, flush=True)


def percentile(v, p):
    """neural-frame bench's rule: nearest rank, rank = round(p/100 · (n - 1))."""
    s = sorted(v)
    rank = int(math.floor(p / 100.0 * (len(s) - 1) + 0.5))
    return s[min(rank, len(s) - 1)]


def _finite(o):
    """JSON without Infinity/NaN (strict parsers refuse them): non-finite floats become null."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    if isinstance(o, (np.floating, np.integer)):
        return _finite(o.item())
    return o


def write_json(path, report):
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(_finite(report), f, indent=2, allow_nan=False)
            f.write("\n")
        os.replace(tmp, path)


def parse_size(s):
    try:
        w, h = (int(v) for v in s.lower().split("x"))
        assert w > 0 and h > 0
        return w, h
    except (ValueError, AssertionError):
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, got {s!r}")


def parse_kv(s):
    if "=" not in s:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {s!r}")
    k, v = s.split("=", 1)
    return k.strip(), v.strip()


def err_text(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:600]


def timing_summary(wall_ms, gpu_ms=None):
    d = {"median_ms": percentile(wall_ms, 50), "p99_ms": percentile(wall_ms, 99),
         "mean_ms": sum(wall_ms) / len(wall_ms), "min_ms": min(wall_ms), "max_ms": max(wall_ms),
         "frames": len(wall_ms)}
    if gpu_ms:
        d.update(gpu_median_ms=percentile(gpu_ms, 50), gpu_p99_ms=percentile(gpu_ms, 99),
                 gpu_mean_ms=sum(gpu_ms) / len(gpu_ms))
    return d


def fixed_input(w, h):
    """The benchmark input: numpy default_rng(7), 1×3×H×W float32 in [0, 1)."""
    return np.random.default_rng(SEED).random((1, 3, h, w), dtype=np.float32)


def import_torch(required):
    try:
        import torch

        return torch
    except ImportError as e:
        if required:
            sys.exit(f"{TOOL}: this needs torch ({e})")
        return None


def import_ort():
    """onnxruntime, after torch (so the CUDA provider reuses the cuBLAS/cuDNN that torch loaded)."""
    try:
        import onnxruntime as ort
    except ImportError as e:
        sys.exit(f"{TOOL}: no onnxruntime ({e}); pip install onnxruntime-gpu")
    return ort


def mapped_cuda_libs():
    """The CUDA libraries mapped into this process (which cuDNN/cuBLAS the provider really uses)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f
                    if re.search(r"lib(cudnn|cublas|cudart|nvrtc|onnxruntime|cupti)[^/]*\.so", line)}
        return sorted(libs)
    except OSError:
        return []


def versions(torch, ort=None, dev=None):
    v = {"tool": TOOL, "python": platform.python_version(), "numpy": np.__version__,
         "host": platform.node()}
    if ort is not None:
        v["onnxruntime"] = ort.__version__
        v["onnxruntime_file"] = os.path.dirname(ort.__file__)
    if torch is not None:
        v["torch"] = torch.__version__
        v["cuda"] = torch.version.cuda
        cuda = dev is not None and dev.type == "cuda"
        v["cudnn"] = torch.backends.cudnn.version() if cuda else None
        v["gpu"] = torch.cuda.get_device_name(dev) if cuda else f"cpu ({platform.machine()})"
    return v


# ---------------------------------------------------------------- kernel classification

_CATEGORY_RULES = [
    ("fused (triton)", re.compile(r"^triton")),
    ("transpose / layout", re.compile(r"transpose|permute|nchwtonhwc|nhwctonchw|nchw2nhwc|nhwc2nchw|"
                                      r"convertlayout|layout_?conv|reorder")),
    ("bias add / elementwise", re.compile(r"op_tensor|op_generic_tensor|add_tensor|addtensor")),
    ("convolution", re.compile(r"conv(?!ert)|implicit_gemm|xmma|sm[0-9]{2,3}_|cudnn|fprop|cutlass|gemm|winograd")),
    ("prelu", re.compile(r"prelu")),
    ("depth-to-space / pixel shuffle", re.compile(r"depthtospace|depth_to_space|pixel_?shuffle|spacetodepth")),
    ("resize / upsample", re.compile(r"resize|upsample|interpolate|nearest")),
    ("bias add / elementwise", re.compile(r"add|elementwise|binary|unary|bias|cast|copy|fill|mul")),
]
CATEGORY_ORDER = ["convolution", "prelu", "bias add / elementwise", "transpose / layout",
                  "depth-to-space / pixel shuffle", "resize / upsample", "fused (triton)", "memcpy/memset", "other"]


def classify(name, cat="kernel"):
    if cat in ("gpu_memcpy", "gpu_memset") or name.lower().startswith(("memcpy", "memset")):
        return "memcpy/memset"
    n = name.lower()
    for label, rx in _CATEGORY_RULES:
        if rx.search(n):
            return label
    return "other"


def short_name(name, width=90):
    n = name[5:] if name.startswith("void ") else name
    return n if len(n) <= width else n[:width - 1] + "…"


# ---------------------------------------------------------------- trace analysis


def _union_ms(intervals):
    total, end = 0.0, -math.inf
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total / 1e3


def analyse_trace(trace, n_runs):
    """Per run and per kernel from a torch.profiler Chrome trace (dict with traceEvents)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    windows = {}
    for e in events:
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(RUN_PREFIX):
            try:
                i = int(e["name"][len(RUN_PREFIX):])
            except ValueError:
                continue
            windows[i] = (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
    order = sorted(windows)
    starts = [windows[i][0] for i in order]

    def window_of(ts):
        k = bisect.bisect_right(starts, ts) - 1
        if k >= 0 and ts <= windows[order[k]][1]:
            return order[k]
        return None

    corr_run = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            c = (e.get("args") or {}).get("correlation")
            i = window_of(float(e["ts"]))
            if c is not None and i is not None:
                corr_run[c] = i
    per_run = {i: [] for i in order}
    unassigned = 0
    for e in events:
        cat = e.get("cat")
        if cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        c = (e.get("args") or {}).get("correlation")
        i = corr_run.get(c) if c is not None else None
        if i is None:
            i = window_of(float(e["ts"]))
        if i is None:
            unassigned += 1
            continue
        per_run[i].append((str(e.get("name", "?")), cat, float(e["ts"]), float(e.get("dur", 0.0))))

    runs = []
    kernels = {}
    for i in order:
        ks = per_run[i]
        iv = [(ts, ts + dur) for _, _, ts, dur in ks]
        kernel_ms = sum(dur for *_, dur in ks) / 1e3
        busy = _union_ms(iv) if iv else 0.0
        span = (max(e for _, e in iv) - min(s for s, _ in iv)) / 1e3 if iv else 0.0
        runs.append({"run": i, "launches": len(ks), "kernel_ms": kernel_ms, "busy_ms": busy, "span_ms": span,
                     "idle_ms": max(span - busy, 0.0)})
        for name, cat, _, dur in ks:
            k = kernels.setdefault(name, {"name": name, "category": classify(name, cat), "calls": 0, "total_us": 0.0,
                                          "min_us": math.inf, "max_us": 0.0})
            k["calls"] += 1
            k["total_us"] += dur
            k["min_us"] = min(k["min_us"], dur)
            k["max_us"] = max(k["max_us"], dur)
    n = max(len(runs), 1)
    total_kernel_ms = sum(r["kernel_ms"] for r in runs)
    rows = []
    for k in kernels.values():
        rows.append({**k, "ms_per_run": k["total_us"] / 1e3 / n, "calls_per_run": k["calls"] / n,
                     "us_per_call": k["total_us"] / k["calls"],
                     "percent": 100.0 * k["total_us"] / 1e3 / total_kernel_ms if total_kernel_ms else 0.0})
    rows.sort(key=lambda r: -r["total_us"])
    cats = {}
    for r in rows:
        c = cats.setdefault(r["category"], {"category": r["category"], "ms_per_run": 0.0, "launches_per_run": 0.0,
                                            "kernels": 0})
        c["ms_per_run"] += r["ms_per_run"]
        c["launches_per_run"] += r["calls_per_run"]
        c["kernels"] += 1
    for c in cats.values():
        c["percent"] = 100.0 * c["ms_per_run"] * n / total_kernel_ms if total_kernel_ms else 0.0
    categories = sorted(cats.values(), key=lambda c: -c["ms_per_run"])

    def med(key):
        return percentile([r[key] for r in runs], 50) if runs else None

    summary = {"runs_profiled": len(runs), "runs_expected": n_runs, "unassigned_gpu_events": unassigned,
               "kernel_ms_per_run": total_kernel_ms / n if runs else None,
               "kernel_ms_median": med("kernel_ms"), "busy_ms_median": med("busy_ms"),
               "span_ms_median": med("span_ms"), "idle_ms_median": med("idle_ms"),
               "launches_per_run": (sum(r["launches"] for r in runs) / n) if runs else None}
    return {"summary": summary, "runs": runs, "categories": categories, "kernels": rows}


def profile_runs(torch, fn, n, cuda, trace_path=None):
    """torch.profiler over 1 + n calls of fn (the first one untimed by the schedule's warm-up)."""
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    fd, path = tempfile.mkstemp(suffix=".json", prefix="kp-trace-")
    os.close(fd)
    done = []

    def ready(p):
        p.export_chrome_trace(path)
        done.append(True)

    warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
    with profile(activities=acts, schedule=schedule(wait=0, warmup=1, active=n, repeat=1),
                 on_trace_ready=ready) as prof:
        for i in range(-1, n):
            with record_function(f"{RUN_PREFIX}{i}"):
                fn()
                if cuda:
                    torch.cuda.synchronize()
            prof.step()
    if not done:
        prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    if trace_path:
        os.replace(path, trace_path)
    else:
        os.unlink(path)
    # the warm-up step's annotation is not recorded; keep 0..n-1 only
    trace["traceEvents"] = [e for e in trace.get("traceEvents", [])
                            if not (e.get("cat") == "user_annotation" and e.get("name") == f"{RUN_PREFIX}-1")]
    return analyse_trace(trace, n)


def try_profile(torch, fn, args, cuda, mode):
    """profile_runs of fn over args.profile_frames runs, or None, the error in mode (a warning)."""
    try:
        return profile_runs(torch, fn, args.profile_frames, cuda, args.trace)
    except Exception as e:  # noqa: BLE001
        mode["profile_error"] = err_text(e)
        warn(f"profile failed: {mode['profile_error']}")
        return None


def time_runs(torch, fn, frames, cuda, stream=None):
    """Per run: wall clock around fn() + synchronize; CUDA events on `stream` around fn()."""
    wall, evs = [], []
    for _ in range(frames):
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        if cuda:
            e0.record(stream)
        fn()
        if cuda:
            e1.record(stream)
            torch.cuda.synchronize()
        wall.append((time.perf_counter() - t0) * 1e3)
        if cuda:
            evs.append((e0, e1))
    gpu = [a.elapsed_time(b) for a, b in evs] if cuda else None
    return timing_summary(wall, gpu)


# ---------------------------------------------------------------- ONNX Runtime side

_NP_OF_ORT = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
              "tensor(uint8)": np.uint8}


def model_io(ort, model):
    s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    ins, outs = s.get_inputs(), s.get_outputs()
    if len(ins) != 1 or len(outs) != 1:
        sys.exit(f"{model}: expected one input and one output, got {len(ins)} and {len(outs)}")
    return ({"name": ins[0].name, "type": ins[0].type, "shape": list(ins[0].shape)},
            {"name": outs[0].name, "type": outs[0].type, "shape": list(outs[0].shape)})


class OrtCase:
    """One session plus its bound input and output, ready to run()."""

    def __init__(self, ort, torch, model, provider, opts, graph_opt, size, ort_stream, log_level, base_x,
                 session_only=False):
        self.ort, self.torch = ort, torch
        self.cuda = provider == "cuda"
        w, h = size
        so = ort.SessionOptions()
        so.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "layout": getattr(ort.GraphOptimizationLevel, "ORT_ENABLE_LAYOUT",
                              ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[graph_opt]
        so.log_severity_level = log_level
        self.stream = None
        if self.cuda:
            dev = torch.device("cuda")
            po = {"device_id": str(torch.cuda.current_device()), **{k: str(v) for k, v in opts.items()}}
            if ort_stream == "torch":
                self.stream = torch.cuda.Stream()
                po["has_user_compute_stream"] = "1"
                po["user_compute_stream"] = str(self.stream.cuda_stream)
            providers = [("CUDAExecutionProvider", po), "CPUExecutionProvider"]
        else:
            providers = ["CPUExecutionProvider"]
        self.requested = dict(opts)
        t0 = time.perf_counter()
        self.sess = ort.InferenceSession(model, so, providers=providers)
        self.create_s = time.perf_counter() - t0
        got = self.sess.get_providers()
        want = "CUDAExecutionProvider" if self.cuda else "CPUExecutionProvider"
        if not got or got[0] != want:
            raise RuntimeError(f"the session runs on {got}, not {want} (ONNX Runtime fell back; see its log above)")
        self.providers = got
        self.effective = self.sess.get_provider_options().get(want, {})
        if session_only:
            return
        i, o = self.sess.get_inputs()[0], self.sess.get_outputs()[0]
        self.in_name, self.out_name, self.in_type, self.out_type = i.name, o.name, i.type, o.type
        if i.type not in _NP_OF_ORT:
            raise RuntimeError(f"input type {i.type} not handled")
        self.np_in = _NP_OF_ORT[i.type]
        x = base_x.astype(self.np_in)
        self.binding = self.sess.io_binding()
        if self.cuda:
            with torch.cuda.stream(self.stream) if self.stream is not None else _null():
                self.x = torch.from_numpy(x).to(dev).contiguous()
            torch.cuda.synchronize()
            self.binding.bind_input(self.in_name, "cuda", torch.cuda.current_device(), self.np_in, list(x.shape),
                                    self.x.data_ptr())
            self.binding.bind_output(self.out_name, "cuda", torch.cuda.current_device())
        else:
            self.x = x
            self.binding.bind_cpu_input(self.in_name, x)
            self.binding.bind_output(self.out_name, "cpu")
        # First run: ONNX Runtime allocates the output; its shape and a host copy are kept.
        t0 = time.perf_counter()
        self.sess.run_with_iobinding(self.binding)
        if self.cuda:
            torch.cuda.synchronize()
        self.first_run_s = time.perf_counter() - t0
        ov = self.binding.get_outputs()[0]
        self.out_shape = list(ov.shape())
        self.reference = self.binding.copy_outputs_to_cpu()[0]
        if self.cuda:
            out_dt = {np.float16: torch.float16, np.float32: torch.float32}.get(self.reference.dtype.type)
            if out_dt is None:
                raise RuntimeError(f"output dtype {self.reference.dtype} not handled")
            self.y = torch.empty(self.out_shape, dtype=out_dt, device=dev)
            torch.cuda.synchronize()
            self.binding.clear_binding_outputs()
            self.binding.bind_output(self.out_name, "cuda", torch.cuda.current_device(), self.reference.dtype.type,
                                     self.out_shape, self.y.data_ptr())
        self.size = (w, h)

    def run(self):
        self.sess.run_with_iobinding(self.binding)

    def output_host(self):
        if self.cuda:
            self.torch.cuda.synchronize()
            return self.y.cpu().numpy()
        return self.binding.copy_outputs_to_cpu()[0]

    def close(self):
        for a in ("binding", "sess", "x", "y"):
            if hasattr(self, a):
                delattr(self, a)
        gc.collect()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def warmup_for(opts, warmup):
    """With CUDA graphs, ONNX Runtime captures after its regular runs (2 in 1.31; the first run is one of
    them): the capture and a replay are done before the timing, whatever --warmup says."""
    return max(warmup, 3) if str(opts.get("enable_cuda_graph", "0")) == "1" else warmup


def _cuda_ready(torch, provider):
    if provider != "cuda":
        return False
    if torch is None:
        sys.exit(f"{TOOL}: --provider cuda needs torch (inputs and outputs are torch CUDA tensors)")
    if not torch.cuda.is_available():
        sys.exit(f"{TOOL}: torch sees no CUDA device (torch.cuda.is_available() is False); --provider cpu to debug")
    return True


def ort_profile(args):
    torch = import_torch(required=args.provider == "cuda")
    cuda = _cuda_ready(torch, args.provider)
    ort = import_ort()
    ort.set_default_logger_severity(args.ort_log_level)
    w, h = args.size
    opts = dict(args.opt or [])
    dev = torch.device("cuda") if cuda else None
    report = {**versions(torch, ort, dev), "command": "ort-profile", "model": args.model,
              "model_size_bytes": os.path.getsize(args.model), "size": [w, h], "provider": args.provider,
              "requested_options": opts, "graph_opt": args.graph_opt,
              "ort_stream": args.ort_stream if cuda else None, "frames": args.frames, "warmup": args.warmup,
              "profile_frames": args.profile_frames, "input": f"numpy default_rng({SEED}).random, [0, 1)",
              "modes": [], "rows": []}
    try:
        case = OrtCase(ort, torch, args.model, args.provider, opts, args.graph_opt, (w, h), args.ort_stream,
                       args.ort_log_level, fixed_input(w, h))
    except Exception as e:  # noqa: BLE001
        report["error"] = err_text(e)
        report["cuda_libraries"] = mapped_cuda_libs()
        write_json(args.json, report)
        sys.exit(f"{TOOL}: session failed: {report['error']}")
    if args.fp16_io and (case.in_type != "tensor(float16)" or case.out_type != "tensor(float16)"):
        sys.exit(f"{TOOL}: --fp16-io: the model's input is {case.in_type} and its output {case.out_type}")
    report.update(providers=case.providers, effective_options=case.effective, input_type=case.in_type,
                  output_type=case.out_type, output_shape=case.out_shape, cuda_libraries=mapped_cuda_libs())
    label = (f"onnxruntime {ort.__version__} {args.provider} {case.in_type[7:-1]} graph={args.graph_opt}"
             + "".join(f" {k}={v}" for k, v in sorted(opts.items())))
    mode = {"mode": label, "create_s": case.create_s, "first_run_s": case.first_run_s}
    mode["warmup"] = warmup_for(opts, args.warmup)
    for _ in range(mode["warmup"]):
        case.run()
    if cuda:
        torch.cuda.synchronize()
    mode.update(time_runs(torch, case.run, args.frames, cuda, case.stream))
    mode["timing"] = ("wall clock around run_with_iobinding + synchronize; gpu_*: CUDA events around it on "
                      + ("the stream given to ONNX Runtime" if case.stream is not None else
                         "torch's current stream (ONNX Runtime runs on a stream of its own: the events "
                         "bracket the host's call, not its kernels)")) if cuda else "wall clock"
    diff = float(np.abs(case.output_host().astype(np.float32) - case.reference.astype(np.float32)).max())
    mode["output_vs_first_run_max_abs_diff"] = diff
    if diff > 1e-2:
        warn(f"the timed runs' output differs from the first run's by {diff:.3g}")
    out_f = case.reference.astype(np.float32)
    mode["output_range"] = [float(out_f.min()), float(out_f.max())]
    profile = None
    if args.profile_frames > 0 and torch is not None:
        profile = try_profile(torch, case.run, args, cuda, mode)
    elif torch is None:
        mode["profile_error"] = "no torch: wall clock only"
    _finish_mode(mode, profile, report)
    case.close()
    write_json(args.json, report)
    print_profile(report)


def nf_profile(args):
    """The model as neural-frame runs it (its C API through ctypes), profiled like ort-profile."""
    import ctypes

    torch = import_torch(required=True)
    cuda = _cuda_ready(torch, "cuda")
    lib = ctypes.CDLL(os.path.abspath(args.lib))
    lib.nf_last_error_message.restype = ctypes.c_char_p
    lib.nf_version.restype = ctypes.c_char_p

    def check(status, what):
        if status != 0:
            sys.exit(f"{TOOL}: {what}: status {status}: {lib.nf_last_error_message().decode(errors='replace')}")

    w, h = args.size
    b = ctypes.c_void_p()
    check(lib.nf_builder_new(args.model.encode(), ctypes.byref(b)), "nf_builder_new")
    check(lib.nf_builder_set_backend(b, ctypes.c_uint32(1)), "nf_builder_set_backend(CUDA)")
    check(lib.nf_builder_set_frame_size(b, ctypes.c_uint32(w), ctypes.c_uint32(h)), "nf_builder_set_frame_size")
    check(lib.nf_builder_set_cuda_graph(b, ctypes.c_bool(False)), "nf_builder_set_cuda_graph(false)")
    if args.fuse_conv_act != "default":
        check(lib.nf_builder_set_fuse_conv_act(b, ctypes.c_bool(args.fuse_conv_act == "true")),
              "nf_builder_set_fuse_conv_act")
    ctx = ctypes.c_void_p()
    t0 = time.perf_counter()
    check(lib.nf_context_new(b, ctypes.byref(ctx)), "nf_context_new")
    create_s = time.perf_counter() - t0
    lib.nf_builder_free(b)
    settled = ctypes.c_bool(False)
    check(lib.nf_context_wait_settled(ctx, ctypes.c_uint64(300_000), ctypes.byref(settled)), "wait_settled")
    settle_s = time.perf_counter() - t0 - create_s
    sx, sy = ctypes.c_uint32(), ctypes.c_uint32()
    check(lib.nf_context_scale(ctx, ctypes.byref(sx), ctypes.byref(sy)), "nf_context_scale")
    buf = ctypes.create_string_buffer(1 << 16)

    def text(call, what):
        n = ctypes.c_size_t(len(buf))
        check(call(ctx, buf, ctypes.byref(n)), what)
        return buf.value.decode(errors="replace")

    report_text = text(lib.nf_context_report, "nf_context_report")
    rgb = (fixed_input(w, h)[0].transpose(1, 2, 0) * 255).astype(np.uint8)
    rgba = np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], axis=2).tobytes()
    inp = ctypes.create_string_buffer(rgba, len(rgba))
    out_len = w * sx.value * h * sy.value * 4
    out = ctypes.create_string_buffer(out_len)

    def run():
        check(lib.nf_context_infer_rgba8(ctx, inp, ctypes.c_uint32(w), ctypes.c_uint32(h), out,
                                         ctypes.c_size_t(out_len)), "nf_context_infer_rgba8")

    report = {**versions(torch, None, torch.device("cuda")), "command": "nf-profile", "model": args.model,
              "neural_frame": lib.nf_version().decode(), "size": [w, h], "fuse_conv_act": args.fuse_conv_act,
              "cuda_graph": False, "settled": settled.value, "context_report": report_text,
              "frames": args.frames, "warmup": args.warmup, "profile_frames": args.profile_frames,
              "input": f"numpy default_rng({SEED}).random, [0, 1), as RGBA8", "modes": [], "rows": []}
    label = f"neural-frame {report['neural_frame']} CUDA backend, fuse_conv_act={args.fuse_conv_act}, no CUDA graphs"
    mode = {"mode": label, "create_s": create_s, "settle_s": settle_s, "warmup": args.warmup}
    for _ in range(args.warmup):
        run()
    mode.update(time_runs(torch, run, args.frames, cuda))
    mode["timing"] = "wall clock around nf_context_infer_rgba8 (Vulkan upload and readback included)"
    out_px = np.frombuffer(out.raw, np.uint8)
    mode["output_range"] = [int(out_px.min()), int(out_px.max())]
    report["cuda_libraries"] = mapped_cuda_libs()
    profile = try_profile(torch, run, args, cuda, mode)
    _finish_mode(mode, profile, report)
    lib.nf_context_free(ctx)
    write_json(args.json, report)
    log(f"context: created in {create_s:.2f} s, settled {settled.value} {settle_s:.2f} s later")
    log(report_text)
    print_profile(report)


def _finish_mode(mode, profile, report):
    if profile is not None:
        mode["profile"] = profile["summary"]
        mode["profile_runs"] = profile["runs"]
        mode["categories"] = profile["categories"]
        mode["top_kernels"] = [{k: r[k] for k in ("name", "category", "ms_per_run", "calls_per_run", "us_per_call",
                                                   "percent")} for r in profile["kernels"][:15]]
        busy = profile["summary"].get("busy_ms_median")
        if busy is not None:
            mode["wall_minus_busy_ms"] = mode["median_ms"] - busy
        report["rows"].extend({"mode": mode["mode"], **r} for r in profile["kernels"])
    report["modes"].append(mode)


def print_profile(report):
    head = [report.get("gpu"), f"onnxruntime {report['onnxruntime']}" if "onnxruntime" in report else None,
            f"torch {report['torch']}" if "torch" in report else None,
            f"CUDA {report.get('cuda')}, cuDNN {report.get('cudnn')}" if report.get("cuda") else None]
    log(", ".join(x for x in head if x))
    for m in report["modes"]:
        log(f"\n== {m['mode']}")
        extra = "".join(f", {k} {m[k]:.2f} s" for k in ("create_s", "first_run_s", "compile_s") if k in m)
        g = f"; CUDA events median {m['gpu_median_ms']:.3f} ms" if "gpu_median_ms" in m else ""
        log(f"wall median {m['median_ms']:.3f} ms, p99 {m['p99_ms']:.3f} ms over {m['frames']} runs{g}{extra}")
        p = m.get("profile")
        if not p:
            log(f"no profile ({m.get('profile_error', 'not asked')})")
            continue
        if not p["runs_profiled"] or not p["launches_per_run"]:
            log(f"profile: no GPU kernels recorded in {p['runs_profiled']} runs")
            continue
        log(f"profile of {p['runs_profiled']} runs (medians per run): kernels {p['kernel_ms_median']:.3f} ms in "
            f"{p['launches_per_run']:.1f} launches, busy {p['busy_ms_median']:.3f} ms, span "
            f"{p['span_ms_median']:.3f} ms, idle in span {p['idle_ms_median']:.3f} ms; "
            f"wall − busy {m.get('wall_minus_busy_ms', float('nan')):.3f} ms"
            + (f"; {p['unassigned_gpu_events']} GPU events outside the runs" if p["unassigned_gpu_events"] else ""))
        log(f"  {'category':<32} {'ms/run':>8} {'%':>6} {'launches/run':>13} {'kernels':>8}")
        for c in m["categories"]:
            log(f"  {c['category']:<32} {c['ms_per_run']:>8.3f} {c['percent']:>6.1f} {c['launches_per_run']:>13.1f} "
                f"{c['kernels']:>8}")
        log(f"  {'top kernels':<92} {'ms/run':>8} {'calls':>6} {'us/call':>8} category")
        for k in m["top_kernels"]:
            log(f"  {short_name(k['name']):<92} {k['ms_per_run']:>8.3f} {k['calls_per_run']:>6.1f} "
                f"{k['us_per_call']:>8.1f} {k['category']}")


# ---------------------------------------------------------------- sweep


def sweep(args):
    torch = import_torch(required=args.provider == "cuda")
    cuda = _cuda_ready(torch, args.provider)
    ort = import_ort()
    ort.set_default_logger_severity(args.ort_log_level)
    w, h = args.size
    dev = torch.device("cuda") if cuda else None
    t_start = time.perf_counter()
    inp, outp = model_io(ort, args.model)
    fp32 = inp["type"] == "tensor(float)"
    axes = {"prefer_nhwc": ["0", "1"], "cudnn_conv_algo_search": ["HEURISTIC", "EXHAUSTIVE"],
            "cudnn_conv_use_max_workspace": ["0", "1"], "fuse_conv_bias": ["0", "1"]}
    if fp32:
        axes["use_tf32"] = ["0", "1"]
    for k, vs in args.also or []:
        axes[k] = [v.strip() for v in vs.split(",") if v.strip()]
    base = dict(args.base or [])
    graph_opts = [g.strip() for g in args.graph_opts.split(",") if g.strip()]
    for g in graph_opts:
        if g not in GRAPH_OPTS:
            sys.exit(f"--graph-opts: {g!r} is not one of {', '.join(GRAPH_OPTS)}")
    x = fixed_input(w, h)
    report = {**versions(torch, ort, dev), "command": "sweep", "model": args.model, "size": [w, h],
              "provider": args.provider, "input_type": inp["type"], "output_type": outp["type"],
              "frames": args.frames, "warmup": args.warmup, "ort_stream": args.ort_stream if cuda else None,
              "axes": axes, "graph_opts": graph_opts, "base_options": base, "unknown_options": {},
              "timing": "median_ms/p99_ms: wall clock around run_with_iobinding + synchronize; gpu_*: CUDA events "
                        "around it on the stream given to ONNX Runtime",
              "modes": [], "rows": []}
    if not cuda:
        report["note"] = "--provider cpu: the CUDA options are recorded, not passed"

    def make(opts, g):
        return OrtCase(ort, torch, args.model, args.provider, opts if cuda else {}, g, (w, h), args.ort_stream,
                       args.ort_log_level, x)

    # Probe the keys (sessions without a run): all at once, then one by one if that fails; a key
    # the provider refuses is dropped from the grid.
    if cuda:
        def probe(opts):
            c = OrtCase(ort, torch, args.model, args.provider, opts, "basic", (w, h), args.ort_stream,
                        args.ort_log_level, x, session_only=True)
            eff = c.effective
            c.close()
            return eff

        every = {**{k: vs[0] for k, vs in axes.items()}, **base}
        try:
            eff = probe(every)
            bad = {}
        except Exception as e:  # noqa: BLE001
            log(f"probe with every option failed ({err_text(e)}); probing one by one")
            eff, bad = {}, {}
            for k, v in every.items():
                try:
                    eff.update(probe({k: v}))
                except Exception as e1:  # noqa: BLE001
                    bad[k] = err_text(e1)
        for k, why in bad.items():
            report["unknown_options"][k] = why
            axes.pop(k, None)
            base.pop(k, None)
            log(f"option {k}: dropped from the grid: {why}")
        for k in every:
            if k not in bad and k not in eff:
                report["unknown_options"][k] = "accepted, but get_provider_options() does not list it"
        try:
            report["default_options"] = probe({})
        except Exception as e:  # noqa: BLE001
            report["default_options"] = {"error": err_text(e)}
    default_g = "layout" if "layout" in graph_opts else graph_opts[-1]
    configs = [({}, default_g, "defaults: no provider option")]
    keys = list(axes)
    for combo in itertools.product(*(axes[k] for k in keys)):
        for g in graph_opts:
            configs.append(({**base, **dict(zip(keys, combo))}, g, None))
    if args.max_configs:
        configs = configs[:args.max_configs]
    log(f"sweep: {len(configs)} configurations of {args.model} at {w}x{h} ({inp['type']}), {args.warmup} + "
        f"{args.frames} runs each, budget {args.max_seconds:.0f} s")
    ref = None
    for n, (opts, g, note) in enumerate(configs, 1):
        row = {"options": opts, "graph_opt": g}
        if note:
            row["note"] = note
        desc = " ".join(f"{k}={v}" for k, v in opts.items()) or "defaults"
        if time.perf_counter() - t_start > args.max_seconds:
            row["skipped"] = f"time budget of {args.max_seconds:.0f} s spent"
            report["rows"].append(row)
            continue
        case = None
        try:
            case = make(opts, g)
            row.update(create_s=case.create_s, first_run_s=case.first_run_s, effective_options=case.effective)
            for _ in range(warmup_for(opts, args.warmup)):
                case.run()
            if cuda:
                torch.cuda.synchronize()
            row.update(time_runs(torch, case.run, args.frames, cuda, case.stream))
            out = case.output_host().astype(np.float32)
            row["output_vs_first_run_max_abs_diff"] = float(np.abs(out - case.reference.astype(np.float32)).max())
            if ref is None:
                ref = out
                row["max_abs_diff_vs_first_row"] = 0.0
            else:
                row["max_abs_diff_vs_first_row"] = float(np.abs(out - ref).max())
            gm = f", events {row['gpu_median_ms']:.3f} ms" if "gpu_median_ms" in row else ""
            log(f"[{n}/{len(configs)}] graph={g} {desc}: wall {row['median_ms']:.3f} ms (p99 {row['p99_ms']:.3f})"
                f"{gm}; create {case.create_s:.2f} s, first run {case.first_run_s:.2f} s")
        except Exception as e:  # noqa: BLE001
            row["error"] = err_text(e)
            log(f"[{n}/{len(configs)}] graph={g} {desc}: ERROR {row['error']}")
        finally:
            if case is not None:
                case.close()
        report["rows"].append(row)
        report["elapsed_s"] = time.perf_counter() - t_start
        write_json(args.json, report)
    done = [r for r in report["rows"] if "median_ms" in r]
    if done:
        best = min(done, key=lambda r: r["median_ms"])
        report["modes"] = [{"mode": "defaults: no provider option", **r} for r in done if "note" in r]
        report["modes"].append({"mode": "best (lowest wall median)", **best})
    report["elapsed_s"] = time.perf_counter() - t_start
    write_json(args.json, report)
    print_sweep(report)


def print_sweep(report):
    log(f"\n{report.get('gpu')}, onnxruntime {report['onnxruntime']}; {report['model']} {report['size'][0]}x"
        f"{report['size'][1]} ({report['input_type']}); {report['frames']} timed runs after {report['warmup']}; "
        f"sorted by wall median")
    keys = []
    for r in report["rows"]:
        for k in r.get("options", {}):
            if k not in keys:
                keys.append(k)
    abbrev = {"prefer_nhwc": "nhwc", "cudnn_conv_algo_search": "algo", "cudnn_conv_use_max_workspace": "maxws",
              "fuse_conv_bias": "fusebias", "use_tf32": "tf32", "enable_cuda_graph": "cudagraph"}
    cols = [abbrev.get(k, k[:10]) for k in keys]
    log(f"{'wall ms':>8} {'p99 ms':>8} {'events ms':>9} {'graph opt':>9} " + " ".join(f"{c:>10}" for c in cols)
        + f" {'first s':>7} {'diff':>8}")
    ok = sorted((r for r in report["rows"] if "median_ms" in r), key=lambda r: r["median_ms"])
    for r in ok:
        ev = f"{r['gpu_median_ms']:.3f}" if "gpu_median_ms" in r else "-"
        vals = [str(r["options"].get(k, "-"))[:10] for k in keys]
        log(f"{r['median_ms']:>8.3f} {r['p99_ms']:>8.3f} {ev:>9} {r['graph_opt']:>9} "
            + " ".join(f"{v:>10}" for v in vals)
            + f" {r['first_run_s']:>7.2f} {r['max_abs_diff_vs_first_row']:>8.2g}"
            + (f"  ({r['note']})" if "note" in r else ""))
    for r in report["rows"]:
        if "error" in r or "skipped" in r:
            desc = " ".join(f"{k}={v}" for k, v in r["options"].items()) or "defaults"
            log(f"  graph={r['graph_opt']} {desc}: {r.get('error') or 'skipped: ' + r['skipped']}")
    for k, why in report.get("unknown_options", {}).items():
        log(f"  option {k}: {why}")


# ---------------------------------------------------------------- torch side


def torch_profile(args):
    torch = import_torch(required=True)
    import torch.nn.functional as F
    from torch import nn

    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit(f"{TOOL}: torch sees no CUDA device; --device cpu --dtype fp32 to debug")
    dtype = {"fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    d = np.load(args.npz, allow_pickle=False)
    layers = [str(k) for k in d["layers"]]
    scale = int(d["scale"])
    w, h = args.size

    class SRVGGNetCompact(nn.Module):
        """bench/torch_side.py's rebuild: Conv3×3 + PReLU chain, last Conv, pixel_shuffle + nearest-upsampled input."""

        def __init__(self):
            super().__init__()
            body = []
            for i, kind in enumerate(layers):
                if kind == "conv":
                    wt = torch.from_numpy(d[f"layer{i}_weight"])
                    conv = nn.Conv2d(wt.shape[1], wt.shape[0], wt.shape[2], padding=wt.shape[2] // 2)
                    conv.weight.data.copy_(wt)
                    conv.bias.data.copy_(torch.from_numpy(d[f"layer{i}_bias"]))
                    body.append(conv)
                else:
                    sl = torch.from_numpy(d[f"layer{i}_slope"])
                    act = nn.PReLU(num_parameters=sl.numel())
                    act.weight.data.copy_(sl)
                    body.append(act)
            self.body = nn.Sequential(*body)
            self.scale = scale

        def forward(self, x):
            base = F.interpolate(x, scale_factor=self.scale, mode="nearest")
            return F.pixel_shuffle(self.body(x), self.scale) + base

    torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
    report = {**versions(torch, None, dev), "command": "torch-profile", "npz": args.npz,
              "model_file": str(d["model_file"]), "model_sha256": str(d["model_sha256"]), "size": [w, h],
              "output_size": [w * scale, h * scale], "dtype": args.dtype, "memory_format": "channels_last",
              "cudnn_benchmark": torch.backends.cudnn.benchmark, "frames": args.frames, "warmup": args.warmup,
              "profile_frames": args.profile_frames, "input": f"numpy default_rng({SEED}).random, [0, 1)",
              "modes": [], "rows": []}

    def sync():
        if cuda:
            torch.cuda.synchronize()

    with torch.inference_mode():
        model = SRVGGNetCompact().eval().requires_grad_(False).to(dev, dtype).to(memory_format=torch.channels_last)
        # Guard: the npz's check case (ONNX Runtime CPU output) through this module.
        ci = torch.from_numpy(d["check_input"]).to(dev).to(dtype, memory_format=torch.channels_last)
        co = model(ci).float().cpu().numpy()
        mse = float(((co.astype(np.float64) - d["check_output"].astype(np.float64)) ** 2).mean())
        report["check_psnr_db"] = float("inf") if mse == 0 else 10 * math.log10(1.0 / mse)
        if not report["check_psnr_db"] >= CHECK_MIN_PSNR:
            warn(f"the rebuild is {report['check_psnr_db']:.1f} dB from ONNX Runtime's output on the check case")
        x = torch.from_numpy(fixed_input(w, h)).to(dev).to(dtype, memory_format=torch.channels_last)
        fwd = model
        label = f"torch eager {args.dtype} channels_last"
        mode = {}
        if args.compile:
            label = f"torch.compile({args.compile_mode}) {args.dtype} channels_last"
            t0 = time.perf_counter()
            fwd = torch.compile(model, mode=args.compile_mode, dynamic=False)
            fwd(x)
            sync()
            mode["compile_s"] = time.perf_counter() - t0
            report["compile"] = {"mode": args.compile_mode, "dynamic": False}
        mark = (lambda: torch.compiler.cudagraph_mark_step_begin()) if args.compile and (
            "reduce-overhead" in args.compile_mode or "cudagraphs" in args.compile_mode) else (lambda: None)
        out = {}

        def step():
            mark()
            out["y"] = fwd(x)

        mode["mode"] = label
        for _ in range(args.warmup):
            step()
        sync()
        mode.update(time_runs(torch, step, args.frames, cuda))
        mode["timing"] = ("wall clock around forward + synchronize; gpu_*: CUDA events around forward on torch's "
                          "current stream") if cuda else "wall clock around forward"
        y = out["y"].float()
        mode["output_range"] = [float(y.min()), float(y.max())]
        profile = try_profile(torch, step, args, cuda, mode) if args.profile_frames > 0 else None
    _finish_mode(mode, profile, report)
    if cuda:
        report["peak_memory_mib"] = torch.cuda.max_memory_allocated(dev) / 2**20
        report["cuda_libraries"] = mapped_cuda_libs()
    write_json(args.json, report)
    print_profile(report)
    log(f"check case vs ONNX Runtime: {report['check_psnr_db']:.1f} dB")


# ---------------------------------------------------------------- compare


def compare(args):
    reps = []
    for p in args.json_files:
        with open(p) as f:
            r = json.load(f)
        for m in r.get("modes", []):
            if "categories" in m:
                reps.append((os.path.basename(p), m))
    if not reps:
        sys.exit(f"{TOOL}: no profiled modes in {', '.join(args.json_files)}")
    cats = [c for c in CATEGORY_ORDER if any(any(x["category"] == c for x in m["categories"]) for _, m in reps)]
    width = 14
    log(f"{'':<32}" + "".join(f"{f[:width]:>{width + 1}}" for f, _ in reps))
    for i, (_, m) in enumerate(reps):
        log(f"  [{i + 1}] {m['mode']}")

    def line(label, vals):
        log(f"{label:<32}" + "".join(f"{v:>{width + 1}}" for v in vals))

    line("wall median ms", [f"{m['median_ms']:.3f}" for _, m in reps])
    line("CUDA events median ms", [f"{m['gpu_median_ms']:.3f}" if "gpu_median_ms" in m else "-" for _, m in reps])
    line("kernel ms/run (median)", [f"{m['profile']['kernel_ms_median']:.3f}" for _, m in reps])
    line("busy ms/run (median)", [f"{m['profile']['busy_ms_median']:.3f}" for _, m in reps])
    line("idle in span ms (median)", [f"{m['profile']['idle_ms_median']:.3f}" for _, m in reps])
    line("wall − busy ms", [f"{m['wall_minus_busy_ms']:.3f}" if "wall_minus_busy_ms" in m else "-"
                            for _, m in reps])
    line("launches/run", [f"{m['profile']['launches_per_run']:.1f}" for _, m in reps])
    for c in cats:
        vals = []
        for _, m in reps:
            x = next((x for x in m["categories"] if x["category"] == c), None)
            vals.append(f"{x['ms_per_run']:.3f} ({x['launches_per_run']:.0f})" if x else "-")
        line(f"{c} ms (launches)", vals)


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p, frames):
        p.add_argument("--size", type=parse_size, default=(960, 540), help="input WIDTHxHEIGHT (default 960x540)")
        p.add_argument("--frames", type=int, default=frames, help=f"timed runs (default {frames})")
        p.add_argument("--warmup", type=int, default=10, help="untimed runs first (default 10)")
        p.add_argument("--json", help="write the report here")

    def ort_common(p):
        p.add_argument("model", help="the .onnx file")
        p.add_argument("--provider", choices=("cuda", "cpu"), default="cuda",
                       help="cuda (default), or cpu to debug without a GPU")
        p.add_argument("--ort-stream", choices=("torch", "own"), default="torch",
                       help="torch (default): a torch CUDA stream as user_compute_stream; own: ONNX Runtime's")
        p.add_argument("--ort-log-level", type=int, default=3, help="ONNX Runtime log severity (default 3 = error)")

    o = sub.add_parser("ort-profile", help="time and profile one ONNX Runtime session")
    ort_common(o)
    common(o, 100)
    o.add_argument("--opt", type=parse_kv, action="append", metavar="KEY=VALUE",
                   help="a CUDA provider option (repeat)")
    o.add_argument("--graph-opt", choices=GRAPH_OPTS, default="layout",
                   help="session graph optimisation level (default layout, as neural-frame)")
    o.add_argument("--fp16-io", action="store_true", help="insist the model's input and output are float16")
    o.add_argument("--profile-frames", type=int, default=10, help="profiled runs (default 10; 0: none)")
    o.add_argument("--trace", help="keep the Chrome trace here (chrome://tracing, ui.perfetto.dev)")

    t = sub.add_parser("torch-profile", help="time and profile the PyTorch rebuild")
    t.add_argument("npz", help="weights from `torch_side.py export`")
    common(t, 100)
    t.add_argument("--compile", action="store_true", help="torch.compile the module")
    t.add_argument("--compile-mode", default="default", help="torch.compile mode (default: default)")
    t.add_argument("--device", default="cuda", help="torch device (default cuda; cpu to debug)")
    t.add_argument("--dtype", choices=("fp16", "fp32"), default="fp16", help="weights and activations (default fp16)")
    t.add_argument("--no-cudnn-benchmark", action="store_true")
    t.add_argument("--profile-frames", type=int, default=10, help="profiled runs (default 10; 0: none)")
    t.add_argument("--trace", help="keep the Chrome trace here")

    s = sub.add_parser("sweep", help="time a grid of CUDA provider options")
    ort_common(s)
    common(s, 50)
    s.add_argument("--graph-opts", default="extended,layout,all",
                   help="graph optimisation levels to cross with the grid (default extended,layout,all)")
    s.add_argument("--also", type=parse_kv, action="append", metavar="KEY=V1,V2",
                   help="another option axis (repeat)")
    s.add_argument("--base", type=parse_kv, action="append", metavar="KEY=VALUE",
                   help="an option for every row but the defaults row (repeat)")
    s.add_argument("--max-seconds", type=float, default=420, help="start no row after this (default 420)")
    s.add_argument("--max-configs", type=int, default=0, help="only the first N rows (0: all)")

    n = sub.add_parser("nf-profile", help="time and profile the model as neural-frame runs it (its C API)")
    n.add_argument("model", help="the .onnx file")
    n.add_argument("--lib", default="target/release/libneural_frame_c.so",
                   help="neural-frame's C library (cargo build --release -p neural-frame-c)")
    common(n, 50)
    n.add_argument("--fuse-conv-act", choices=("default", "true", "false"), default="default",
                   help="the context's fused convolutions (default: the library's default)")
    n.add_argument("--profile-frames", type=int, default=10, help="profiled runs (default 10)")
    n.add_argument("--trace", help="keep the Chrome trace here")

    c = sub.add_parser("compare", help="category tables of profile JSONs side by side")
    c.add_argument("json_files", nargs="+")

    args = ap.parse_args()
    if args.cmd != "compare" and (args.frames < 1 or args.warmup < 0):
        sys.exit("--frames must be ≥ 1 and --warmup ≥ 0")
    {"ort-profile": ort_profile, "torch-profile": torch_profile, "sweep": sweep, "compare": compare,
     "nf-profile": nf_profile}[args.cmd](args)


if __name__ == "__main__":
    main()
