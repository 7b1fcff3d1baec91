#!/usr/bin/env python3
"""Where the direct convolution's time goes: `nf_conv_nchw` from src/cuda/passes.ptx (and
`nf_conv3x3_nchw` where that module has it; `nf_conv3x3_mma`, f16 only, from
src/cuda/passes_sm80.ptx on compute capability 8.0 and later), launched by hand through CUDA's driver API (ctypes on
libcuda.so.1) on PyTorch's memory and stream, timed with CUDA events, while one thing at a time
changes (the median of --runs batches of ten launches each):

- the input's channels (1 and 3: the multiply-adds scale with them, the stores do not);
- the element type (fp16 and fp32: the stores' bytes double, the arithmetic does not);
- the activation (PReLU and none: the epilogue's work);
- the frame (960×540 and 1920×1080).

Beside them, two floors of the GPU's memory on the same output bytes: cuMemsetD32Async, and a
device-to-device copy (reads and writes).

Each case is checked against torch.nn.functional.conv2d (fp32 on the same inputs, then the
activation, NHWC) before it is timed: fp32 within 1e-4, fp16 within 2e-3 relative. The output is
poisoned (NaN) before that check. No ONNX Runtime, no neural-frame library: the kernels alone.
The launch geometry is the library's (src/cuda/kernels.rs, conv_nchw).

    python3 bench/conv_probe.py --json $OUT/conv-probe.json [--ptx src/cuda/passes.ptx] [--runs 50]
"""

import argparse
import ctypes
import json
import os
import struct
import sys

import torch

CHUNK, PIXELS, BLOCK = 16, 4, 128  # nf_conv_nchw (src/cuda/params.rs)
TILE_W, TILE_H, BLOCK3 = 32, 16, 128  # nf_conv3x3_nchw
ACT = {"none": 0, "prelu": 3}
ELEMENT = {"f32": 0, "f16": 1}  # ELEMENT_F32, ELEMENT_F16 (src/cuda/params.rs)

cuda = ctypes.CDLL("libcuda.so.1")


def check(r, what):
    if r != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(r, ctypes.byref(name))
        raise RuntimeError(f"{what}: {name.value.decode() if name.value else r}")


def params(x, w, b, slope, y, n, c, h, width, k, act, element):
    # ConvParams (src/cuda/conv.cu): 5 pointers, 9 u32 sizes, 2 i32 pads, 5 u32, f32 alpha, u32 element.
    oh, ow = h, width
    return struct.pack(
        "<5Q9I2i5IfI", x, w, b, slope, y, n, c, h, width, k, 3, 3, oh, ow, 1, 1, 1, 1, 1, 1, act, 0.0, element
    )


def launch(f, grid, block, blob, stream):
    buf = ctypes.create_string_buffer(blob, len(blob))
    args = (ctypes.c_void_p * 1)(ctypes.cast(buf, ctypes.c_void_p))
    check(cuda.cuLaunchKernel(f, grid[0], grid[1], 1, block, 1, 1, 0, ctypes.c_void_p(stream), args, None),
          "cuLaunchKernel")


def timed(fn, runs, batch=10):
    """The median over `runs` batches of `batch` back-to-back launches, per launch (ms): a batch
    keeps the GPU from waiting on the host's launches between the events."""
    for _ in range(batch):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(runs):
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptx", default="src/cuda/passes.ptx")
    ap.add_argument("--ptx-sm80", default="src/cuda/passes_sm80.ptx", help="loaded on compute capability 8.0 and later")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False  # the fp32 reference in fp32
    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    kernels = {}
    major = torch.cuda.get_device_capability()[0]
    for path in (args.ptx, args.ptx_sm80 if major >= 8 else None):
        if not path or not os.path.exists(path):
            continue
        module = ctypes.c_void_p()
        check(cuda.cuModuleLoadData(ctypes.byref(module), open(path, "rb").read() + b"\0"), f"cuModuleLoadData {path}")
        for name in ("nf_conv_nchw", "nf_conv3x3_nchw", "nf_conv3x3_mma"):
            f = ctypes.c_void_p()
            if cuda.cuModuleGetFunction(ctypes.byref(f), module, name.encode()) == 0:
                kernels[name] = f
    stream = torch.cuda.current_stream().cuda_stream
    gen = torch.Generator(device="cuda").manual_seed(7)
    rows = []
    print(f"{torch.cuda.get_device_name()}; kernels: {', '.join(kernels)}; median of {args.runs} runs", flush=True)
    for (width, h) in ((960, 540), (1920, 1080)):
        k = 64
        out_bytes = {}
        for el in ("f16", "f32"):
            dt = torch.float16 if el == "f16" else torch.float32
            out_bytes[el] = width * h * k * (2 if el == "f16" else 4)
            y = torch.empty(out_bytes[el], dtype=torch.uint8, device="cuda")
            src = torch.empty_like(y)
            ms = timed(lambda: check(cuda.cuMemsetD32Async(ctypes.c_void_p(y.data_ptr()), 0, y.numel() // 4,
                                                           ctypes.c_void_p(stream)), "memset"), args.runs)
            rows.append({"case": "memset", "size": [width, h], "element": el, "bytes": y.numel(), "ms": ms})
            ms = timed(lambda: y.copy_(src), args.runs)
            rows.append({"case": "copy", "size": [width, h], "element": el, "bytes": y.numel(), "ms": ms})
            for c in (1, 3):
                x = torch.rand((1, c, h, width), generator=gen, device="cuda").to(dt)
                wt = (torch.rand((k, c, 3, 3), generator=gen, device="cuda") - 0.5).to(dt)
                bias = (torch.rand((k,), generator=gen, device="cuda") - 0.5).to(dt)
                slope = (torch.rand((k,), generator=gen, device="cuda") * 0.3).to(dt)
                w_krsc = wt.permute(0, 2, 3, 1).contiguous()
                ref = torch.nn.functional.conv2d(x.float(), wt.float(), bias.float(), padding=1)
                for act in ("prelu", "none"):
                    want = torch.where(ref < 0, ref * slope.float().view(1, k, 1, 1), ref) if act == "prelu" else ref
                    want = want.permute(0, 2, 3, 1).contiguous()
                    for name, f in kernels.items():
                        if name == "nf_conv3x3_mma" and el != "f16":
                            continue  # f16 only
                        y = torch.empty((1, h, width, k), dtype=dt, device="cuda")
                        blob = params(x.data_ptr(), w_krsc.data_ptr(), bias.data_ptr(),
                                      slope.data_ptr() if act == "prelu" else 0, y.data_ptr(), 1, c, h, width, k,
                                      ACT[act], ELEMENT[el])
                        if name == "nf_conv_nchw":
                            grid = (min(-(-width * h // (BLOCK * PIXELS)), 1 << 20), -(-k // CHUNK))
                            block = BLOCK
                        elif name == "nf_conv3x3_nchw":
                            grid = (-(-k // CHUNK) * -(-width // TILE_W), -(-h // TILE_H))
                            block = BLOCK3
                        else:  # nf_conv3x3_mma: 64 channels by 32×4 pixels a block (src/cuda/params.rs)
                            grid = (-(-k // 64) * -(-width // 32), -(-h // 4))
                            block = 128
                        y.fill_(float("nan"))
                        launch(f, grid, block, blob, stream)
                        torch.cuda.synchronize()
                        got = y.float()
                        tol = 1e-4 if el == "f32" else 2e-3
                        err = ((got - want).abs() / (want.abs() + 1.0)).max().item()
                        ok = bool(err <= tol) and not bool(torch.isnan(got).any())
                        ms = timed(lambda: launch(f, grid, block, blob, stream), args.runs)
                        row = {"case": name, "size": [width, h], "element": el, "channels": c, "act": act,
                               "ms": ms, "max_rel_err": err, "ok": ok, "bytes": out_bytes[el]}
                        rows.append(row)
                        print(f"{name:16} {width}x{h} {el} c={c} {act:5}: {ms * 1000:7.1f} us "
                              f"({out_bytes[el] / ms / 1e6:6.0f} GB/s of output), max rel err {err:.2e} "
                              f"{'ok' if ok else 'WRONG'}", flush=True)
        for r in rows:
            if r["case"] in ("memset", "copy") and r["size"] == [width, h]:
                print(f"{r['case']:16} {width}x{h} {r['element']} {r['bytes'] / 1e6:.1f} MB: {r['ms'] * 1000:7.1f} us "
                      f"({r['bytes'] / r['ms'] / 1e6:6.0f} GB/s)", flush=True)
    if args.json:
        with open(args.json, "w") as fj:
            json.dump({"gpu": torch.cuda.get_device_name(), "ptx": args.ptx, "runs": args.runs, "rows": rows}, fj,
                      indent=1)
    if not all(r.get("ok", True) for r in rows):
        print("some kernel output was wrong", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
