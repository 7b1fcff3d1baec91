#!/usr/bin/env python3
"""The PyTorch baseline for `neural-frame bench` (issue "Honest baselines"):
the same network, rebuilt in PyTorch from the ONNX file's own weights, timed
the way a PyTorch user would run it, as model alone and on host frames.

Two steps, so that the machine that times it needs torch but not `onnx`:

    # 1. anywhere (needs onnx, onnxruntime, numpy; does not import torch):
    python3 bench/torch_side.py export models/upscale.onnx upscale-weights.npz

    # 2. on the GPU machine (needs torch, numpy; PIL optional; does not import onnx):
    python3 bench/torch_side.py run upscale-weights.npz --size 960x540 --frames 200 \
        --json $OUT/torch-540p.json
    python3 bench/torch_side.py run upscale-weights.npz --size 1920x1080 --frames 200 \
        --json $OUT/torch-1080p.json

`export` walks the ONNX graph and refuses anything but SRVGGNetCompact as
models/convert_realesrgan.py writes it (a chain of 3×3 Conv + PRelu, one last
Conv, DepthToSpace mode CRD, plus the input through Resize nearest /
asymmetric / floor, added; no clamp). It stores every Conv weight and bias and
every PRelu slope in graph order, the scale, the ONNX file's sha256, and a
check case: a fixed-seed (numpy default_rng(7)) 1×3×24×40 input in [0, 1] and
ONNX Runtime's CPU output for it (float32).

`run` rebuilds the network as an nn.Module (Conv2d, PReLU, pixel_shuffle =
DepthToSpace CRD, F.interpolate nearest = the Resize) and first checks it:

- fp32 eager (TF32 off) on the check input against ONNX Runtime's output:
  max |diff| must be <= 1e-4, else it exits with status 1;
- fp16 channels-last eager on the same input: PSNR (peak 1) against ONNX
  Runtime's output must be >= 40 dB, else status 1;
- the host path's wiring: on the benchmark frame, the eager host path's u8
  RGB must be within 1 code of the model-alone output (built from an input
  made independently in numpy) clamped, ×255 and rounded, else status 1;
- the alpha upscale against a numpy transcription of the post pass's
  `alpha_at` (src/shaders/post_common.wgsl) on a random 5×7 alpha, else status 1;
- torch.compile's output against eager's on the benchmark frame (reported, not
  fatal; an identical output has PSNR null in the JSON and
  compile_vs_eager_identical true).

A failed rebuild or alpha check stops the run before any timing (the JSON
then has `failures` and no modes) unless --keep-going, which times anyway and
still exits 1; the wiring check needs the eager host run, so it fails the run
(status 1, `failures` in the JSON) after the timings.

Then the modes, all fp16 weights and activations, channels-last, under
torch.inference_mode(), cudnn.benchmark on (--no-cudnn-benchmark turns it off):

- `torch eager model`: input already on the GPU as a 1×3×H×W fp16
  channels-last tensor; per frame: forward, then torch.cuda.synchronize().
  median_ms/p99_ms are wall clock (time.perf_counter) around forward +
  synchronize, the same measure as `neural-frame bench`'s `ort-alone`;
  gpu_median_ms/gpu_p99_ms are CUDA events around the forward.
- `torch eager host`: the frame starts and ends on the host as u8 RGBA, like a
  renderer's read-back frame: one pinned H×W×4 input and one pinned 4H×4W×4
  output, allocated once. Per frame: H2D copy (non_blocking); on the GPU
  RGB → NCHW fp16 /255 channels-last, model, clamp to [0, 1], ×255, round to
  u8, alpha upscaled bilinearly as neural-frame's post pass does (sample
  centres aligned = align_corners False, edges clamped); D2H copy into the
  pinned output (non_blocking); torch.cuda.synchronize(). median_ms/p99_ms
  are wall clock around all of it, the latency a host-frame user sees;
  gpu_* are CUDA events from before the H2D copy to after the D2H copy.
- `torch.compile model`, `torch.compile host`: the same, with the model module
  compiled by torch.compile(model, mode=--compile-mode, dynamic=False) (the
  pre and post steps of the host path stay eager, as a user who compiles
  their model has them). compile_s is the first call (Dynamo + Inductor,
  cold cache on a fresh machine), before the warm-up. --no-compile leaves
  these modes out and the JSON says so.

median and p99 are taken over --frames timed frames after --warmup untimed
ones, with neural-frame bench's nearest-rank rule; fps is frames / the timed
loop's wall time. The input frame is models/coffee.png resized to --size
with PIL bicubic (alpha 255), or without PIL a deterministic colour pattern.
The JSON (--json) has the versions, GPU, model sha256, sizes, `checks` and
`modes[]`; a short table goes to stdout.
"""
import argparse
import hashlib
import json
import math
import os
import platform
import sys
import time

import numpy as np

TOOL = "torch_side.py"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK_SHAPE = (1, 3, 24, 40)
CHECK_SEED = 7
FP32_MAX_DIFF = 1e-4
FP16_MIN_PSNR = 40.0


# ---------------------------------------------------------------- export (onnx side)


def _attrs(node):
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def export(onnx_path, out_path):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, numpy_helper

    raw = open(onnx_path, "rb").read()
    sha = hashlib.sha256(raw).hexdigest()
    model = onnx.load_from_string(raw)
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    if len(inputs) != 1 or len(g.output) != 1:
        sys.exit(f"{onnx_path}: expected one input and one output")
    inp, outp = inputs[0].name, g.output[0].name
    if inputs[0].type.tensor_type.elem_type != TensorProto.FLOAT:
        sys.exit(f"{onnx_path}: the input is not float32 (export the float32 model, e.g. models/upscale.onnx)")

    def fail(node, why):
        sys.exit(f"{onnx_path}: node {node.name or node.op_type} ({node.op_type}): {why}; "
                 "this script rebuilds only SRVGGNetCompact as models/convert_realesrgan.py writes it")

    layers, arrays = [], {}
    x = inp  # the chain's current tensor
    shuffled = base = None
    scale = None
    for node in g.node:
        a = _attrs(node)
        op = node.op_type
        if op == "Conv":
            if node.input[0] != x or shuffled is not None:
                fail(node, "not on the main chain")
            w = inits[node.input[1]].astype(np.float32)
            b = inits[node.input[2]].astype(np.float32) if len(node.input) > 2 and node.input[2] else \
                np.zeros(w.shape[0], np.float32)
            k = w.shape[2]
            if w.shape[2] != w.shape[3] or k % 2 != 1:
                fail(node, f"kernel {w.shape[2:]}")
            if list(a.get("pads", [0] * 4)) != [k // 2] * 4 or list(a.get("strides", [1, 1])) != [1, 1] \
                    or list(a.get("dilations", [1, 1])) != [1, 1] or a.get("group", 1) != 1 \
                    or _s(a.get("auto_pad", "NOTSET")) != "NOTSET":
                fail(node, f"attributes {a}")
            i = len(layers)
            arrays[f"layer{i}_weight"], arrays[f"layer{i}_bias"] = w, b
            layers.append("conv")
            x = node.output[0]
        elif op == "PRelu":
            if node.input[0] != x or not layers or layers[-1] != "conv":
                fail(node, "not right after a Conv")
            s = inits[node.input[1]].astype(np.float32)
            c = arrays[f"layer{len(layers) - 1}_weight"].shape[0]
            if s.size != c:
                fail(node, f"slope of {s.size} values for {c} channels")
            arrays[f"layer{len(layers)}_slope"] = s.reshape(-1)
            layers.append("prelu")
            x = node.output[0]
        elif op == "DepthToSpace":
            if node.input[0] != x or _s(a.get("mode", "DCR")) != "CRD":
                fail(node, f"expected mode CRD on the chain, got {a}")
            scale = int(a["blocksize"])
            shuffled = node.output[0]
        elif op == "Resize":
            if node.input[0] != inp:
                fail(node, "does not resize the model's input")
            mode = (_s(a.get("mode", "nearest")), _s(a.get("coordinate_transformation_mode", "half_pixel")),
                    _s(a.get("nearest_mode", "round_prefer_floor")))
            if mode != ("nearest", "asymmetric", "floor"):
                fail(node, f"mode {mode}, expected nearest/asymmetric/floor")
            if len(node.input) < 3 or node.input[2] not in inits or (len(node.input) > 3 and node.input[3]):
                fail(node, "expected constant scales")
            sc = inits[node.input[2]].tolist()
            if sc[:2] != [1.0, 1.0] or sc[2] != sc[3] or sc[2] != int(sc[2]):
                fail(node, f"scales {sc}")
            base = (node.output[0], int(sc[2]))
        elif op == "Add":
            if shuffled is None or base is None or set(node.input) != {shuffled, base[0]} or node.output[0] != outp:
                fail(node, "expected output = DepthToSpace + Resize(input)")
        else:
            fail(node, "unexpected operator")
    if scale is None or base is None or base[1] != scale:
        sys.exit(f"{onnx_path}: missing DepthToSpace/Resize or their scales differ")
    last = arrays[f"layer{max(i for i, k in enumerate(layers) if k == 'conv')}_weight"]
    if layers[-1] != "conv" or last.shape[0] != 3 * scale * scale:
        sys.exit(f"{onnx_path}: the last Conv must give 3·scale² channels")

    rng = np.random.default_rng(CHECK_SEED)
    check_in = rng.random(CHECK_SHAPE, dtype=np.float32)
    sess = ort.InferenceSession(raw, providers=["CPUExecutionProvider"])
    check_out = sess.run(None, {inp: check_in})[0].astype(np.float32)

    meta = {p.key: p.value for p in model.metadata_props}
    n_params = sum(v.size for v in arrays.values())
    np.savez(out_path, layers=np.array(layers), scale=np.array(scale, np.int64),
             check_input=check_in, check_output=check_out,
             model_sha256=np.array(sha), model_file=np.array(os.path.basename(onnx_path)),
             metadata=np.array(json.dumps(meta)),
             onnxruntime_version=np.array(ort.__version__), onnx_version=np.array(onnx.__version__),
             **arrays)
    n_conv, n_prelu = layers.count("conv"), layers.count("prelu")
    print(f"{onnx_path} (sha256 {sha}): {n_conv} Conv, {n_prelu} PRelu, ×{scale}, {n_params} parameters")
    print(f"check case: input {CHECK_SHAPE} (default_rng({CHECK_SEED})), ONNX Runtime {ort.__version__} CPU output "
          f"{check_out.shape}, range [{check_out.min():.4f}, {check_out.max():.4f}]")
    print(f"wrote {out_path if out_path.endswith('.npz') else out_path + '.npz'}")


# ---------------------------------------------------------------- run (torch side)


def _finite(o):
    """JSON without Infinity/NaN (strict parsers refuse them): non-finite floats become null."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def write_json(path, report):
    if path:
        with open(path, "w") as f:
            json.dump(_finite(report), f, indent=2, allow_nan=False)
            f.write("\n")


def percentile(v, p):
    """neural-frame bench's rule: nearest rank, rank = round(p/100 · (n - 1))."""
    s = sorted(v)
    rank = int(math.floor(p / 100.0 * (len(s) - 1) + 0.5))
    return s[min(rank, len(s) - 1)]


def summary(wall_ms, total_s, gpu_ms=None):
    d = {"median_ms": percentile(wall_ms, 50), "p99_ms": percentile(wall_ms, 99),
         "mean_ms": sum(wall_ms) / len(wall_ms), "min_ms": min(wall_ms), "max_ms": max(wall_ms),
         "fps": len(wall_ms) / total_s, "frames": len(wall_ms)}
    if gpu_ms:
        d.update(gpu_median_ms=percentile(gpu_ms, 50), gpu_p99_ms=percentile(gpu_ms, 99),
                 gpu_mean_ms=sum(gpu_ms) / len(gpu_ms))
    return d


def load_picture(path, w, h):
    """H×W×4 u8 RGBA, alpha 255: the picture resized (PIL bicubic), or a pattern without PIL."""
    try:
        from PIL import Image

        img = Image.open(path).convert("RGB").resize((w, h), Image.BICUBIC)
        rgb = np.asarray(img, dtype=np.uint8)
        source = f"{os.path.relpath(path, REPO) if path.startswith(REPO) else path}, PIL bicubic to {w}x{h}"
    except (ImportError, OSError) as e:
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        r = 0.5 + 0.5 * np.sin(xx / 7.0 + yy / 23.0)
        gch = 0.5 + 0.5 * np.cos(xx / 31.0 - yy / 5.0)
        b = ((xx // 16 + yy // 16) % 2) * 0.6 + 0.2 * (xx / max(w - 1, 1))
        rgb = (np.stack([r, gch, b], -1) * 255).round().clip(0, 255).astype(np.uint8)
        source = f"deterministic pattern ({type(e).__name__}: {e})"
    rgba = np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], axis=-1)
    assert rgba[..., :3].any() and rgba[..., :3].std() > 0, "the input frame must not be constant"
    return np.ascontiguousarray(rgba), source


def shader_alpha(alpha, scale):
    """numpy transcription of alpha_at in src/shaders/post_common.wgsl (f32)."""
    h, w = alpha.shape
    oh, ow = h * scale, w * scale
    f32 = np.float32
    out = np.empty((oh, ow), f32)
    for y in range(oh):
        sy = (f32(y) + f32(0.5)) * f32(h) / f32(oh) - f32(0.5)
        fy = min(max(sy, f32(0)), f32(h - 1))
        y0 = int(math.floor(fy))
        y1 = min(y0 + 1, h - 1)
        ty = f32(fy - f32(y0))
        for x in range(ow):
            sx = (f32(x) + f32(0.5)) * f32(w) / f32(ow) - f32(0.5)
            fx = min(max(sx, f32(0)), f32(w - 1))
            x0 = int(math.floor(fx))
            x1 = min(x0 + 1, w - 1)
            tx = f32(fx - f32(x0))

            def mix(a, b, t):
                return f32(a * (f32(1) - t) + b * t)

            out[y, x] = mix(mix(alpha[y0, x0], alpha[y0, x1], tx), mix(alpha[y1, x0], alpha[y1, x1], tx), ty)
    return out


def run(args):
    import torch
    import torch.nn.functional as F
    from torch import nn

    d = np.load(args.npz, allow_pickle=False)
    layers = [str(k) for k in d["layers"]]
    scale = int(d["scale"])
    w, h = args.size
    ow, oh = w * scale, h * scale

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("--device cuda: torch sees no CUDA device (torch.cuda.is_available() is False)")
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    class SRVGGNetCompact(nn.Module):
        """Conv3×3 + PReLU chain, last Conv, pixel_shuffle (= DepthToSpace CRD) + nearest-upsampled input."""

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
            # ONNX Resize nearest/asymmetric/floor, ×s: src = floor(dst / s) = interpolate 'nearest'.
            base = F.interpolate(x, scale_factor=self.scale, mode="nearest")
            return F.pixel_shuffle(self.body(x), self.scale) + base

    def build(dtype, channels_last):
        m = SRVGGNetCompact().eval().requires_grad_(False).to(dev, dtype)
        return m.to(memory_format=torch.channels_last) if channels_last else m

    def psnr(a, b):
        mse = float(((a.double() - b.double()) ** 2).mean())
        return float("inf") if mse == 0 else 10 * math.log10(1.0 / mse)

    failures = []
    checks = {}
    ref = torch.from_numpy(d["check_output"]).to(dev)
    check_in = torch.from_numpy(d["check_input"]).to(dev)

    # 1. The rebuild: fp32 eager, TF32 off, against ONNX Runtime's CPU output.
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.benchmark)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    with torch.inference_mode():
        m32 = build(torch.float32, False)
        out32 = m32(check_in)
        diff32 = float((out32 - ref).abs().max())
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.benchmark = saved
    checks["fp32_vs_onnxruntime_max_abs_diff"] = diff32
    checks["fp32_limit"] = FP32_MAX_DIFF
    checks["check_input"] = f"{list(CHECK_SHAPE)} default_rng({CHECK_SEED}), ONNX Runtime " \
                            f"{d['onnxruntime_version']} CPU output stored by export"
    if not diff32 <= FP32_MAX_DIFF:
        failures.append(f"fp32 rebuild differs from ONNX Runtime: max |diff| {diff32:.3g} > {FP32_MAX_DIFF}")
    del m32

    torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
    with torch.inference_mode():
        m16 = build(torch.float16, True)
        out16 = m16(check_in.to(torch.float16, memory_format=torch.channels_last)).float()
        p16 = psnr(out16, ref)
    checks["fp16_channels_last_vs_onnxruntime_psnr_db"] = p16
    checks["fp16_channels_last_vs_onnxruntime_max_abs_diff"] = float((out16 - ref).abs().max())
    checks["fp16_min_psnr_db"] = FP16_MIN_PSNR
    if not p16 >= FP16_MIN_PSNR:
        failures.append(f"fp16 channels-last eager: PSNR {p16:.2f} dB < {FP16_MIN_PSNR} dB")

    # 2. The alpha upscale against the post pass's formula.
    rng = np.random.default_rng(11)
    a_small = rng.random((5, 7), dtype=np.float32)
    with torch.inference_mode():
        a_t = F.interpolate(torch.from_numpy(a_small).to(dev)[None, None], scale_factor=scale, mode="bilinear",
                            align_corners=False)[0, 0].cpu().numpy()
    a_diff = float(np.abs(a_t - shader_alpha(a_small, scale)).max())
    checks["alpha_bilinear_vs_post_pass_max_abs_diff"] = a_diff
    if not a_diff <= 1e-5:
        failures.append(f"alpha upscale differs from post_common.wgsl's alpha_at: {a_diff:.3g}")

    # The frame.
    rgba, source = load_picture(args.picture, w, h)

    def header():
        return {
            "tool": TOOL,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if cuda else None,
            "gpu": torch.cuda.get_device_name(dev) if cuda else f"cpu ({platform.processor() or platform.machine()})",
            "python": platform.python_version(),
            "numpy": np.__version__,
            "device": str(dev),
            "model_file": str(d["model_file"]),
            "model_sha256": str(d["model_sha256"]),
            "size": [w, h],
            "output_size": [ow, oh],
            "frames": args.frames,
            "warmup": args.warmup,
            "input_frame": source,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "alpha": "bilinear, align_corners=False, edges clamped (F.interpolate) = post_common.wgsl's alpha_at",
            "percentiles": "nearest rank, rank = round(p/100 * (n - 1)), as neural-frame bench",
        }

    if failures:
        for f in failures:
            print(f"{TOOL}: CHECK FAILED: {f}", file=sys.stderr)
        if not args.keep_going:
            write_json(args.json, {**header(), "checks": checks, "failures": failures, "modes": []})
            sys.exit(1)
        print(f"{TOOL}: --keep-going: timing anyway; the exit status will be 1", file=sys.stderr)

    def make_host_path(model):
        pin = cuda
        pin_in = torch.from_numpy(rgba.copy()).pin_memory() if pin else torch.from_numpy(rgba.copy())
        pin_out = torch.empty((oh, ow, 4), dtype=torch.uint8, pin_memory=pin)
        dev_in = torch.empty((h, w, 4), dtype=torch.uint8, device=dev)
        dev_out = torch.empty((oh, ow, 4), dtype=torch.uint8, device=dev)

        def gpu_part():
            x = dev_in[..., :3].permute(2, 0, 1).unsqueeze(0).to(torch.float16, memory_format=torch.channels_last)
            x.div_(255)
            y = model(x)
            dev_out[..., :3].copy_(y[0].float().clamp_(0, 1).mul_(255).round_().permute(1, 2, 0))
            a = dev_in[..., 3].float().div_(255)[None, None]
            a = F.interpolate(a, size=(oh, ow), mode="bilinear", align_corners=False)[0, 0]
            dev_out[..., 3].copy_(a.clamp_(0, 1).mul_(255).round_())

        def frame():
            dev_in.copy_(pin_in, non_blocking=True)
            gpu_part()
            pin_out.copy_(dev_out, non_blocking=True)

        return frame, pin_out

    mark_step = (lambda: torch.compiler.cudagraph_mark_step_begin()) \
        if "reduce-overhead" in args.compile_mode or "cudagraphs" in args.compile_mode else (lambda: None)

    def timed(fn, frames):
        """Per frame: wall clock around fn() + synchronize; CUDA events around fn() on CUDA."""
        wall, evs = [], []
        t_loop = time.perf_counter()
        for _ in range(frames):
            if cuda:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            if cuda:
                e0.record()
            fn()
            if cuda:
                e1.record()
            sync()
            wall.append((time.perf_counter() - t0) * 1e3)
            if cuda:
                evs.append((e0, e1))
        total = time.perf_counter() - t_loop
        gpu = [a.elapsed_time(b) for a, b in evs] if cuda else None
        return summary(wall, total, gpu)

    modes = []
    extra = {}
    with torch.inference_mode():
        # Model-alone input, built independently of the host path (numpy → fp16 channels-last).
        x_dev = torch.from_numpy((rgba[..., :3].astype(np.float32) / 255).transpose(2, 0, 1)[None].copy()) \
            .to(dev).to(torch.float16, memory_format=torch.channels_last)

        def run_mode(name, model, compile_s=None):
            out = {}
            fwd = lambda: (mark_step(), model(x_dev))  # noqa: E731
            for _ in range(args.warmup):
                fwd()
            sync()
            r = timed(fwd, args.frames)
            modes.append({"mode": f"{name} model", **r, "timing": "wall clock around forward + synchronize; "
                          "gpu_*: CUDA events around forward" if cuda else "wall clock around forward",
                          "precision": "fp16", "memory_format": "channels_last",
                          **({"compile_s": compile_s} if compile_s is not None else {})})
            mark_step()
            out["model_out"] = model(x_dev).clone()
            frame, pin_out = make_host_path(model)
            t0 = time.perf_counter()
            mark_step()
            frame()
            sync()
            first_host_s = time.perf_counter() - t0
            for _ in range(args.warmup):
                mark_step()
                frame()
            sync()
            r = timed(lambda: (mark_step(), frame()), args.frames)
            modes.append({"mode": f"{name} host", **r,
                          "timing": "wall clock from before the H2D copy to after synchronize; gpu_*: CUDA events "
                                    "from before the H2D copy to after the D2H copy" if cuda else "wall clock",
                          "precision": "fp16", "memory_format": "channels_last",
                          "first_frame_s": first_host_s,
                          **({"compile_s": compile_s} if compile_s is not None else {})})
            out["host_out"] = pin_out.clone()
            return out

        # Eager.
        eager = run_mode("torch eager", m16)
        ref_u8 = eager["model_out"][0].float().clamp(0, 1).mul(255).round().permute(1, 2, 0).to(torch.uint8).cpu()
        wiring = int((eager["host_out"][..., :3].int() - ref_u8.int()).abs().max())
        checks["host_eager_vs_model_max_code_diff"] = wiring
        if wiring > 1:
            failures.append(f"host path's u8 RGB differs from the model's output by {wiring} codes")
        alpha_out = eager["host_out"][..., 3]
        checks["host_alpha_range"] = [int(alpha_out.min()), int(alpha_out.max())]
        if args.save_output:
            from PIL import Image

            Image.fromarray(eager["host_out"].numpy(), "RGBA").save(args.save_output)
            extra["saved_output"] = args.save_output

        # torch.compile.
        if args.no_compile:
            extra["compile"] = "left out (--no-compile)"
        else:
            try:
                t0 = time.perf_counter()
                cm = torch.compile(m16, mode=args.compile_mode, dynamic=False)
                mark_step()
                cm(x_dev)
                sync()
                compile_s = time.perf_counter() - t0
                comp = run_mode("torch.compile", cm, compile_s)
                checks["compile_vs_eager_psnr_db"] = psnr(comp["model_out"].float(), eager["model_out"].float())
                checks["compile_vs_eager_identical"] = bool(torch.equal(comp["model_out"], eager["model_out"]))
                checks["compile_vs_eager_max_abs_diff"] = float(
                    (comp["model_out"].float() - eager["model_out"].float()).abs().max())
                checks["compile_host_vs_eager_host_max_code_diff"] = int(
                    (comp["host_out"].int() - eager["host_out"].int()).abs().max())
                if checks["compile_vs_eager_psnr_db"] < FP16_MIN_PSNR:
                    print(f"{TOOL}: warning: torch.compile's output is {checks['compile_vs_eager_psnr_db']:.1f} dB "
                          "from eager's", file=sys.stderr)
                extra["compile"] = {"mode": args.compile_mode, "dynamic": False}
            except Exception as e:  # noqa: BLE001 — report and keep the eager numbers
                msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                print(f"{TOOL}: torch.compile failed: {msg}", file=sys.stderr)
                extra["compile"] = {"mode": args.compile_mode, "error": msg}

    report = {
        **header(),
        "peak_memory_mib": torch.cuda.max_memory_allocated(dev) / 2**20 if cuda else None,
        **extra,
        "checks": checks,
        "modes": modes,
    }
    if failures:
        report["failures"] = failures
    write_json(args.json, report)

    print(f"{report['gpu']}, torch {report['torch']}, CUDA {report['cuda']}, cuDNN {report['cudnn']}; "
          f"{report['model_file']} {report['model_sha256'][:12]}…; {w}x{h} → {ow}x{oh}; "
          f"{args.frames} frames after {args.warmup}")
    print(f"checks: fp32 max |diff| {diff32:.3g} (≤ {FP32_MAX_DIFF}), fp16 PSNR {p16:.2f} dB (≥ {FP16_MIN_PSNR}), "
          f"alpha {a_diff:.2g}, host wiring {checks['host_eager_vs_model_max_code_diff']} codes"
          + (f", compile vs eager {checks['compile_vs_eager_psnr_db']:.1f} dB"
             if "compile_vs_eager_psnr_db" in checks else ""))
    print(f"{'mode':<22} {'median ms':>10} {'p99 ms':>9} {'mean ms':>9} {'frames/s':>9} {'gpu med ms':>11} "
          f"{'compile s':>10}")
    for m in modes:
        gm = f"{m['gpu_median_ms']:.3f}" if "gpu_median_ms" in m else "-"
        cs = f"{m['compile_s']:.1f}" if "compile_s" in m else "-"
        print(f"{m['mode']:<22} {m['median_ms']:>10.3f} {m['p99_ms']:>9.3f} {m['mean_ms']:>9.3f} {m['fps']:>9.1f} "
              f"{gm:>11} {cs:>10}")
    if isinstance(extra.get("compile"), str) or "error" in (extra.get("compile") or {}):
        print(f"torch.compile: {extra['compile']}")
    if args.json:
        print(f"wrote {args.json}")
    if failures:
        for f in failures:
            print(f"{TOOL}: CHECK FAILED: {f}", file=sys.stderr)
        sys.exit(1)


def parse_size(s):
    try:
        w, h = (int(v) for v in s.lower().split("x"))
        assert w > 0 and h > 0
        return w, h
    except (ValueError, AssertionError):
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, got {s!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="ONNX weights + check case → .npz (needs onnx, onnxruntime)")
    e.add_argument("onnx")
    e.add_argument("npz")
    r = sub.add_parser("run", help="rebuild in PyTorch, check, time (needs torch)")
    r.add_argument("npz")
    r.add_argument("--size", type=parse_size, default=(960, 540), help="input WIDTHxHEIGHT (default 960x540)")
    r.add_argument("--frames", type=int, default=200, help="timed frames per mode (default 200)")
    r.add_argument("--warmup", type=int, default=20, help="untimed frames first (default 20)")
    r.add_argument("--json", help="write the report here")
    r.add_argument("--device", default="cuda", help="torch device (default cuda)")
    r.add_argument("--compile-mode", default="default",
                   help="torch.compile mode: default, reduce-overhead, max-autotune, … (default: default)")
    r.add_argument("--no-compile", action="store_true", help="leave the torch.compile modes out")
    r.add_argument("--keep-going", action="store_true",
                   help="time the modes even when a check fails (the exit status is still 1)")
    r.add_argument("--no-cudnn-benchmark", action="store_true", help="timed modes without cudnn.benchmark")
    r.add_argument("--picture", default=os.path.join(REPO, "models", "coffee.png"),
                   help="input picture (default models/coffee.png; needs PIL, else a pattern)")
    r.add_argument("--save-output", help="write the eager host path's output frame as PNG (needs PIL)")
    args = ap.parse_args()
    if args.cmd == "export":
        export(args.onnx, args.npz)
    else:
        if args.frames < 1 or args.warmup < 0:
            sys.exit("--frames must be ≥ 1 and --warmup ≥ 0")
        run(args)


if __name__ == "__main__":
    main()
