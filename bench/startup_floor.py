#!/usr/bin/env python3
"""What any process on this machine pays before its first convolution on the GPU:
the floor under `neural-frame`'s time to first frame (issue 22 asks for <= 500 ms).

Each measurement runs in a fresh process (this script re-runs itself with
--child), several times, and reports every run and the median:

- `driver`: CUDA's driver alone, through ctypes on libcuda.so.1: cuInit, then
  the device's primary context retained and made current, then one 1 MiB
  cuMemAlloc (the context exists only then). No runtime, no cuDNN.
- `torch`: a competent PyTorch user's first frame: `import torch`, the CUDA
  context (torch.zeros(1, device="cuda")), the upscaler rebuilt from the ONNX
  file's own weights (bench/torch_side.py export writes the .npz) in fp16
  channels-last on the GPU, then the first forward at --size with
  cudnn.benchmark off (cuDNN's heuristics, as neural-frame's default
  ConvSearch::Heuristic) and synchronised, then a second forward. The first
  forward holds what only the first run in a process pays: cuDNN's handle,
  its kernels loaded (CUDA's lazy loading) and its plans.

The input is random, not zeros; the output is checked finite. Nothing here
compares with neural-frame's numbers by itself: put it beside `bench`'s
time_to_first_frame_ms and BackendReport::startup from the same session.

    python3 bench/startup_floor.py upscale-weights.npz --size 960x540 --runs 3 \
        --json $OUT/startup-floor.json
"""

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import time

T0 = time.perf_counter()


def ms(t):
    return (t - T0) * 1e3


def child_driver():
    cuda = ctypes.CDLL("libcuda.so.1")

    def check(rc, what):
        if rc != 0:
            raise SystemExit(f"{what} failed: CUresult {rc}")

    out = {"process_start_ms": 0.0}
    t = time.perf_counter()
    check(cuda.cuInit(0), "cuInit")
    out["cuInit_ms"] = (time.perf_counter() - t) * 1e3
    dev = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    t = time.perf_counter()
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    ptr = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20)), "cuMemAlloc")
    out["context_ms"] = (time.perf_counter() - t) * 1e3
    out["total_ms"] = ms(time.perf_counter())
    return out


def child_torch(npz, size):
    import numpy as np

    out = {}
    t = time.perf_counter()
    import torch
    import torch.nn.functional as F

    out["import_torch_ms"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    out["cuda_context_ms"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    d = np.load(npz, allow_pickle=False)
    layers = [str(k) for k in d["layers"]]
    scale = int(d["scale"])
    dev = torch.device("cuda")
    params = []
    for i, kind in enumerate(layers):
        if kind == "conv":
            params.append(
                (
                    "conv",
                    torch.from_numpy(d[f"layer{i}_weight"]).to(dev, torch.float16).contiguous(memory_format=torch.channels_last),
                    torch.from_numpy(d[f"layer{i}_bias"]).to(dev, torch.float16),
                )
            )
        else:
            params.append(("prelu", torch.from_numpy(d[f"layer{i}_slope"]).to(dev, torch.float16), None))

    def forward(x):
        y = x
        for kind, a, b in params:
            y = F.conv2d(y, a, b, padding=a.shape[2] // 2) if kind == "conv" else F.prelu(y, a)
        return F.pixel_shuffle(y, scale) + F.interpolate(x, scale_factor=scale, mode="nearest")

    w, h = size
    g = torch.Generator(device="cpu").manual_seed(7)
    x = torch.rand(1, 3, h, w, generator=g).to(dev, torch.float16).contiguous(memory_format=torch.channels_last)
    torch.cuda.synchronize()
    out["weights_and_input_ms"] = (time.perf_counter() - t) * 1e3
    torch.backends.cudnn.benchmark = False
    with torch.inference_mode():
        t = time.perf_counter()
        y = forward(x)
        torch.cuda.synchronize()
        out["first_forward_ms"] = (time.perf_counter() - t) * 1e3
        out["first_output_since_start_ms"] = ms(time.perf_counter())
        if not bool(torch.isfinite(y).all()):
            raise SystemExit("the first forward's output is not finite")
        t = time.perf_counter()
        y2 = forward(x)
        torch.cuda.synchronize()
        out["second_forward_ms"] = (time.perf_counter() - t) * 1e3
        out["outputs_equal"] = bool(torch.equal(y, y2))
    out["output_shape"] = list(y.shape)
    return out


def parse_size(s):
    w, h = s.lower().split("x")
    return int(w), int(h)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("npz", help="the weights (bench/torch_side.py export)")
    p.add_argument("--size", type=parse_size, default=(960, 540))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--json")
    p.add_argument("--child", choices=["driver", "torch"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        r = child_driver() if args.child == "driver" else child_torch(args.npz, args.size)
        print(json.dumps(r))
        return
    report = {"argv": sys.argv, "size": list(args.size), "modes": {}}
    failed = False
    for mode in ("driver", "torch"):
        runs = []
        for k in range(args.runs):
            cmd = [sys.executable, __file__, args.npz, "--size", f"{args.size[0]}x{args.size[1]}", "--child", mode]
            t = time.perf_counter()
            c = subprocess.run(cmd, capture_output=True, text=True)
            wall = (time.perf_counter() - t) * 1e3
            if c.returncode != 0:
                print(f"{mode} run {k + 1} failed (exit {c.returncode}):\n{c.stdout}{c.stderr}", file=sys.stderr)
                failed = True
                continue
            r = json.loads(c.stdout.strip().splitlines()[-1])
            r["process_wall_ms"] = wall
            runs.append(r)
            print(f"{mode} run {k + 1}: " + ", ".join(f"{k2} {v:.1f}" if isinstance(v, float) else f"{k2} {v}" for k2, v in r.items()))
        medians = {}
        for key in runs[0] if runs else []:
            vals = [r[key] for r in runs if isinstance(r.get(key), float)]
            if vals:
                medians[key] = statistics.median(vals)
        report["modes"][mode] = {"runs": runs, "median": medians}
        print(f"{mode} median: " + ", ".join(f"{k2} {v:.1f}" for k2, v in medians.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
