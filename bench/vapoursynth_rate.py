#!/usr/bin/env python3
"""Frame rates of `nf.Model` in VapourSynth R81, and of vs-mlrt's ONNX Runtime plugin beside
it, on the same clip and model (issue 46; docs/vapoursynth.md).

Needs Python >= 3.12 with the `vapoursynth` wheel (R81) importable, a Vulkan 1.4 loader
for the core's GPU frames, and for `nf` cases ONNX Runtime where the plugin finds it
(ORT_DYLIB_PATH). Each case runs in a fresh process (this script re-runs itself with
--child CASE), warms up, then times --frames frames:

- `source`: the source clip alone (below), its frames requested and released: the most
  any case can reach.
- `gpu`: the RGBH clip through `nf.Model`; its GPU frames are requested and released, never
  downloaded (`vspipe script.vpy .`).
- `download`: the same, then `std.GPUDownload`: the 4K RGBH frames reach host memory.
- `y4m`: the same, then BT.709 YUV444P8 (`resize.Bicubic`) written as y4m to /dev/null by
  `VideoNode.output` (what `vspipe -c y4m` writes).
- `mlrt`: the RGBH CPU clip through vs-mlrt's `ort.Model` (`vapoursynth-mlrt-ort` and
  `-ort-cuda` from PyPI) with --mlrt-provider, fp16, cuDNN's benchmark, --mlrt-streams
  streams; frames requested (its output is in host memory, as `download`'s).
- `mlrt-y4m`: `mlrt`, then `y4m`'s conversion and output.

Frames are requested as vspipe does: in order, as many in flight as the core has threads.

The source (--source), an RGBH clip of ripples and ramps, not a flat field:
- `gpu` (the default for `nf` cases): four patterned frames made once, uploaded once
  (`std.GPUUpload`) and looped, so the core serves them from its cache: the filter's own
  rate, as `neural-frame bench` times frames already on the GPU;
- `cpu` (always for `mlrt` cases, which take host frames): the four frames looped in host
  memory; for `nf.Model` the core uploads each frame (part of the time);
- `python`: every frame filled by a Python `ModifyFrame` callback, which the GIL runs one at
  a time (about 430 frames/s on a 2-core machine): a source slower than the model.

    python3 bench/vapoursynth_rate.py --plugin target/release/libneural_frame_vapoursynth.so \\
        --model models/upscale.onnx --size 960x540 --frames 300 --json rates.json
"""

import argparse
import json
import os
import subprocess
import sys
import time

CASES = ["source", "gpu", "download", "y4m", "mlrt", "mlrt-y4m"]
SOURCES = ["gpu", "cpu", "python"]
PATTERNS = 4  # distinct frames of the looped sources


def parse_size(s):
    w, h = s.lower().split("x")
    return int(w), int(h)


def clip_for(core, vs, source, size, length):
    import numpy as np

    w, h = size
    # Not a flat field: a ramp and ripples in each channel (shifted with the frame number).
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)

    def planes(n):
        return [
            (0.5 + 0.3 * np.sin((x + 3 * n) / 17.0) * np.cos(y / 11.0)).astype(np.float16),
            (0.2 + 0.6 * x / w).astype(np.float16),
            (0.8 - 0.5 * y / h + 0.05 * np.sin((x + y + n) / 5.0)).astype(np.float16),
        ]

    made = [planes(n) for n in range(PATTERNS)]

    def fill(n, f):
        out = f.copy()
        for p, a in enumerate(made[n % PATTERNS]):
            np.copyto(np.asarray(out[p]), a)
        return out

    if source == "python":
        base = core.std.BlankClip(format=vs.RGBH, width=w, height=h, length=length, keep=True)
        return core.std.ModifyFrame(base, base, fill)
    base = core.std.BlankClip(format=vs.RGBH, width=w, height=h, length=PATTERNS, keep=True)
    few = core.std.ModifyFrame(base, base, fill)
    if source == "gpu":
        few = core.std.GPUUpload(few)
    return core.std.Loop(few, times=-(-length // PATTERNS))[:length]


def child(case, args):
    import vapoursynth as vs

    core = vs.core
    # nf.Model logs where a frame's time went when it is freed (below).
    core.add_log_handler(lambda level, msg: msg.startswith("nf.Model") and print(msg, file=sys.stderr, flush=True))
    total = args.warmup + args.frames
    source = "cpu" if case.startswith("mlrt") and args.source == "gpu" else args.source
    src = clip_for(core, vs, source, args.size, total)
    if case == "source":
        out = src
    elif case.startswith("mlrt"):
        if args.mlrt_plugin:
            core.std.LoadPlugin(args.mlrt_plugin)
        out = core.ort.Model(
            src,
            network_path=args.model,
            provider=args.mlrt_provider,
            fp16=1,
            num_streams=args.mlrt_streams,
            cudnn_benchmark=1,
            output_format=1,
        )
    else:
        core.std.LoadPlugin(args.plugin)
        out = core.nf.Model(src, model=args.model, sync=args.sync)
        if case not in ("gpu", "source"):
            out = core.std.GPUDownload(out)
    if case.endswith("y4m"):
        out = core.resize.Bicubic(out, format=vs.YUV444P8, matrix_s="709")

    def run(first, count):
        clip = out[first : first + count]
        t = time.perf_counter()
        if case.endswith("y4m"):
            with open(os.devnull, "wb") as f:
                clip.output(f, y4m=True)
        else:
            for frame in clip.frames(close=True):
                del frame
        return time.perf_counter() - t

    warm = run(0, args.warmup)
    took = run(args.warmup, args.frames)
    ow, oh = out.width, out.height
    name = out.format.name
    del out, src  # frees the filters: nf.Model logs its summary
    import gc

    gc.collect()
    print(
        json.dumps(
            {
                "case": case,
                "frames": args.frames,
                "frames_per_s": args.frames / took,
                "ms_per_frame": took * 1e3 / args.frames,
                "warmup_s": warm,
                "threads": core.num_threads,
                "source": source,
                "output": f"{ow}x{oh} {name}",
            }
        ),
        flush=True,
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--plugin", help="libneural_frame_vapoursynth.so (the nf cases)")
    p.add_argument("--model", default="models/upscale.onnx")
    p.add_argument("--size", type=parse_size, default=(960, 540))
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--warmup", type=int, default=24)
    p.add_argument("--sync", default="auto", help="nf.Model's sync (auto, host, gpu)")
    p.add_argument("--source", default="gpu", choices=SOURCES, help="the source clip (above)")
    p.add_argument("--mlrt-plugin", help="vs-mlrt's libvsort.so, where VapourSynth does not autoload it")
    p.add_argument("--mlrt-provider", default="CUDA")
    p.add_argument("--mlrt-streams", type=int, default=2)
    p.add_argument("--case", default="gpu,download,y4m", help=f"comma-separated, of {', '.join(CASES)}")
    p.add_argument("--json", help="write the results here too")
    p.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.model = os.path.abspath(args.model)
    for a in ("plugin", "mlrt_plugin"):
        if getattr(args, a):
            setattr(args, a, os.path.abspath(getattr(args, a)))
    if args.child:
        child(args.child, args)
        return 0
    results, failed = [], False
    for case in args.case.split(","):
        if case not in CASES:
            p.error(f"unknown case {case!r}")
        if case not in ("source",) and not case.startswith("mlrt") and not args.plugin:
            p.error(f"case {case} needs --plugin")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", case]
        cmd += strip_values(sys.argv[1:], ("--json", "--case"))
        r = subprocess.run(cmd, capture_output=True, text=True)
        line = next((l for l in reversed(r.stdout.splitlines()) if l.startswith("{")), None)
        if r.returncode != 0 or line is None:
            failed = True
            sys.stderr.write(f"{case}: failed (rc {r.returncode})\n{r.stdout[-3000:]}{r.stderr[-3000:]}\n")
            continue
        res = json.loads(line)
        text = r.stdout + r.stderr
        res["filter_log"] = [l for l in text.splitlines() if l.startswith("nf.Model:")]
        res["validation_errors"] = text.count("Validation Error")
        # With VK_LOADER_DEBUG=layer the loader names the layers it inserts.
        res["validation_layer_named"] = "VK_LAYER_KHRONOS_validation" in text
        results.append(res)
        print(
            f"{case:9} {res['frames_per_s']:8.1f} frames/s  {res['ms_per_frame']:7.3f} ms a frame  "
            f"({res['frames']} frames after {args.warmup}, warm-up {res['warmup_s']:.2f} s, "
            f"{res['threads']} threads, {res['source']} source, out {res['output']}, "
            f"validation errors {res['validation_errors']}"
            f"{', layer named by the loader' if res['validation_layer_named'] else ''})",
            flush=True,
        )
        for l in res["filter_log"]:
            print(f"          {l}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failed else 0


def strip_values(cmd, flags):
    out, skip = [], False
    for a in cmd:
        if skip:
            skip = False
            continue
        if a in flags:
            skip = True
            continue
        if any(a.startswith(f + "=") for f in flags):
            continue
        out.append(a)
    return out


if __name__ == "__main__":
    sys.exit(main())
