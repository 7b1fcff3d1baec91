#!/usr/bin/env python3
"""Compiles src/cuda/passes.cu (the pre and post passes as CUDA kernels),
src/cuda/conv.cu (the fused rewrite's direct convolutions) and src/cuda/tail.cu
(its DepthToSpace), as one program, to
src/cuda/passes.ptx with NVRTC, which the library embeds and the driver
compiles for the GPU at run time; and the same three with
src/cuda/conv_mma.cu (the direct convolution on tensor cores) and NF_SM80
defined (their kernels left out, their helpers kept), for compute_80, to
src/cuda/passes_sm80.ptx, which the library loads on GPUs of compute
capability 8.0 and later. No GPU is needed, only NVRTC's library, from PyPI:

    python3 -m pip download --no-deps -d /tmp/nvrtc "nvidia-cuda-nvrtc==13.0.88"
    python3 scripts/cuda_passes.py            # regenerate src/cuda/passes.ptx
    python3 scripts/cuda_passes.py --check    # exit 1 when the committed PTX is stale

The wheel is found in /tmp/nvrtc (or --wheel-dir; NVRTC_LIB names a
libnvrtc.so.13 directly). passes.ptx's target is the virtual architecture
compute_75, the oldest CUDA 13 supports; the driver compiles the PTX for newer
GPUs.
"""

import argparse
import ctypes
import glob
import os
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# One program: passes.cu, then conv.cu and tail.cu (which use passes.cu's helpers).
SOURCES = [os.path.join(ROOT, "src", "cuda", name) for name in ("passes.cu", "conv.cu", "tail.cu")]
NVRTC_VERSION = "13.0.88"
COMMON = [b"--std=c++17", b"-default-device", b"--fmad=false"]
# (the program's sources, the PTX file, NVRTC's options)
PROGRAMS = [
    (SOURCES, os.path.join(ROOT, "src", "cuda", "passes.ptx"), [b"--gpu-architecture=compute_75"] + COMMON),
    (
        SOURCES + [os.path.join(ROOT, "src", "cuda", "conv_mma.cu")],
        os.path.join(ROOT, "src", "cuda", "passes_sm80.ptx"),
        [b"--gpu-architecture=compute_80", b"-DNF_SM80"] + COMMON,
    ),
]


def load_nvrtc(wheel_dir):
    path = os.environ.get("NVRTC_LIB")
    if not path:
        wheels = sorted(glob.glob(os.path.join(wheel_dir, f"nvidia_cuda_nvrtc-{NVRTC_VERSION}-*.whl")))
        if not wheels:
            sys.exit(
                f"no nvidia_cuda_nvrtc-{NVRTC_VERSION} wheel in {wheel_dir}: run\n"
                f'  python3 -m pip download --no-deps -d {wheel_dir} "nvidia-cuda-nvrtc=={NVRTC_VERSION}"'
            )
        out = os.path.join(tempfile.gettempdir(), f"nvrtc-{NVRTC_VERSION}")
        with zipfile.ZipFile(wheels[-1]) as z:
            for name in z.namelist():
                if "/lib/libnvrtc" in name:
                    z.extract(name, out)
        libdir = glob.glob(os.path.join(out, "nvidia", "*", "lib"))[0]
        # The builtins library is loaded by NVRTC itself, from the same directory.
        ctypes.CDLL(os.path.join(libdir, "libnvrtc-builtins.so.13.0"), mode=ctypes.RTLD_GLOBAL)
        path = os.path.join(libdir, "libnvrtc.so.13")
    return ctypes.CDLL(path)


def compile_ptx(nvrtc, source, options):
    prog = ctypes.c_void_p()

    def check(r, call):
        if r != 0:
            nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
            raise SystemExit(f"{call}: {nvrtc.nvrtcGetErrorString(r).decode()}")

    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source, b"passes.cu", 0, None, None), "nvrtcCreateProgram")
    opts = (ctypes.c_char_p * len(options))(*options)
    r = nvrtc.nvrtcCompileProgram(prog, len(options), opts)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if log.value.strip():
        print(log.value.decode(), file=sys.stderr)
    check(r, "nvrtcCompileProgram")
    nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    check(nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return ptx.value.decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed PTX instead of writing it")
    ap.add_argument("--wheel-dir", default="/tmp/nvrtc", help="where the NVRTC wheel is (default /tmp/nvrtc)")
    args = ap.parse_args()
    nvrtc = load_nvrtc(args.wheel_dir)
    stale = []
    for sources, ptx_path, options in PROGRAMS:
        source = b""
        for path in sources:
            with open(path, "rb") as f:
                source += f.read() + b"\n"
        ptx = compile_ptx(nvrtc, source, options)
        what = " + ".join(os.path.relpath(s, ROOT) for s in sources)
        if args.check:
            with open(ptx_path) as f:
                if f.read() != ptx:
                    stale.append(f"{ptx_path} is not what {what} compiles to")
                else:
                    print(f"{ptx_path}: up to date")
            continue
        with open(ptx_path, "w") as f:
            f.write(ptx)
        print(f"wrote {ptx_path} ({len(ptx)} bytes)")
    if stale:
        sys.exit("\n".join(stale) + ": run python3 scripts/cuda_passes.py")


if __name__ == "__main__":
    main()
