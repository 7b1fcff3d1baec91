#!/usr/bin/env python3
"""Compiles src/cuda/passes.cu (the pre and post passes as CUDA kernels),
src/cuda/conv.cu (the fused rewrite's direct convolutions) and src/cuda/tail.cu
(its DepthToSpace, with the fused tail), as one program, to
src/cuda/passes.ptx with NVRTC, which the library embeds and the driver
compiles for the GPU at run time. No GPU is needed, only NVRTC's library,
from PyPI:

    python3 -m pip download --no-deps -d /tmp/nvrtc "nvidia-cuda-nvrtc==13.0.88"
    python3 scripts/cuda_passes.py            # regenerate src/cuda/passes.ptx
    python3 scripts/cuda_passes.py --check    # exit 1 when the committed PTX is stale

The wheel is found in /tmp/nvrtc (or --wheel-dir; NVRTC_LIB names a
libnvrtc.so.13 directly). The target is the virtual architecture compute_75,
the oldest CUDA 13 supports; the driver compiles the PTX for newer GPUs.
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
SOURCE = " + ".join(os.path.relpath(s, ROOT) for s in SOURCES)
PTX = os.path.join(ROOT, "src", "cuda", "passes.ptx")
NVRTC_VERSION = "13.0.88"
OPTIONS = [b"--gpu-architecture=compute_75", b"--std=c++17", b"-default-device", b"--fmad=false"]


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


def compile_ptx(nvrtc, source):
    prog = ctypes.c_void_p()

    def check(r, call):
        if r != 0:
            nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
            raise SystemExit(f"{call}: {nvrtc.nvrtcGetErrorString(r).decode()}")

    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source, b"passes.cu", 0, None, None), "nvrtcCreateProgram")
    opts = (ctypes.c_char_p * len(OPTIONS))(*OPTIONS)
    r = nvrtc.nvrtcCompileProgram(prog, len(OPTIONS), opts)
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
    source = b""
    for path in SOURCES:
        with open(path, "rb") as f:
            source += f.read() + b"\n"
    ptx = compile_ptx(load_nvrtc(args.wheel_dir), source)
    if args.check:
        with open(PTX) as f:
            if f.read() != ptx:
                sys.exit(f"{PTX} is not what {SOURCE} compiles to: run python3 scripts/cuda_passes.py")
        print(f"{PTX}: up to date")
        return
    with open(PTX, "w") as f:
        f.write(ptx)
    print(f"wrote {PTX} ({len(ptx)} bytes)")


if __name__ == "__main__":
    main()
