"""Checks a picture the C++ example wrote against ONNX Runtime's own CPU run of the model.

    python3 capi/tests/reference_psnr.py MODEL INPUT.png OUTPUT.png [--min-db 48]

The reference is independent of neural-frame: the input PNG is read with Pillow, its
colours put into the model's first input as float32 in [0, 1] (NCHW or NHWC, RGB, or RGBA
where the input has 4 channels), the model run by onnxruntime's CPUExecutionProvider, and
its first output clamped to [0, 1] and rounded to 8 bits. OUTPUT.png must have that size;
its RGB channels are compared (PSNR over every channel value) and, for an opaque input,
its alpha must be opaque too. Prints the PSNR and the largest difference; exits 1 (with
the reason) on any mismatch of size or alpha, or a PSNR below --min-db. Only models that
take and give [0, 1] RGB(A) float tensors are supported: others are refused, loudly.

Needs numpy, Pillow and onnxruntime (capi/ci.sh puts them on PYTHONPATH).
"""

import argparse
import math
import sys

import numpy as np
import onnxruntime as ort
from PIL import Image


def fail(message: str) -> None:
    print(f"reference_psnr: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def channels_axis(shape, what: str) -> int:
    """1 for NCHW, 3 for NHWC: the axis whose size is 3 or 4."""
    if len(shape) != 4:
        fail(f"the model's {what} has rank {len(shape)}, not 4")
    nchw = shape[1] in (3, 4)
    nhwc = shape[3] in (3, 4)
    if nchw == nhwc:
        fail(f"cannot tell the layout of the model's {what} {shape}")
    return 1 if nchw else 3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("--min-db", type=float, default=48.0)
    a = p.parse_args()

    session = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
    inp, out = session.get_inputs()[0], session.get_outputs()[0]
    if inp.type != "tensor(float)" or out.type != "tensor(float)":
        fail(f"the model's first input and output are {inp.type} and {out.type}, not float32 tensors")
    axis = channels_axis(inp.shape, f"input `{inp.name}`")
    c = inp.shape[axis]

    picture = Image.open(a.input)
    opaque = picture.mode not in ("RGBA", "LA", "PA") and "transparency" not in picture.info
    rgba = np.asarray(picture.convert("RGBA"), dtype=np.float32) / 255.0  # H, W, 4
    x = rgba[:, :, :c]
    x = x[np.newaxis] if axis == 3 else x.transpose(2, 0, 1)[np.newaxis]
    y = session.run([out.name], {inp.name: np.ascontiguousarray(x)})[0]
    out_axis = channels_axis(y.shape, f"output `{out.name}`")
    y = y[0] if out_axis == 3 else y[0].transpose(1, 2, 0)  # H', W', C'
    if y.shape[2] not in (3, 4):
        fail(f"the model's output has {y.shape[2]} channels")
    want = np.floor(np.clip(y[:, :, :3], 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)

    got_picture = Image.open(a.output)
    got = np.asarray(got_picture.convert("RGBA"))
    if got.shape[:2] != want.shape[:2]:
        fail(f"{a.output} is {got.shape[1]}x{got.shape[0]}, ONNX Runtime's output {want.shape[1]}x{want.shape[0]}")
    if opaque and y.shape[2] == 3 and not (got[:, :, 3] == 255).all():
        fail(f"{a.output} has non-opaque texels where the input is opaque")

    diff = got[:, :, :3].astype(np.float64) - want.astype(np.float64)
    mse = float(np.mean(diff * diff))
    psnr = math.inf if mse == 0 else 10.0 * math.log10(255.0 * 255.0 / mse)
    worst = int(np.abs(diff).max())
    differ = int(np.count_nonzero(diff))
    print(
        f"reference_psnr: {a.output} against ONNX Runtime {ort.__version__} (CPU) on {a.input}: "
        f"{want.shape[1]}x{want.shape[0]}, PSNR {psnr:.2f} dB, largest difference {worst}/255, "
        f"{differ} of {diff.size} channel values differ"
    )
    if not psnr >= a.min_db:
        fail(f"PSNR {psnr:.2f} dB is below {a.min_db} dB")


if __name__ == "__main__":
    main()
