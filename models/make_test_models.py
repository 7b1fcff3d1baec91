#!/usr/bin/env python3
"""Writes the tiny models the tests use (models/test/*.onnx), with fixed seeds:

    python3 models/make_test_models.py

- tiny-x2-f32.onnx: NCHW RGB float32, ×2: conv3x3 3→8 + PReLU, conv3x3 8→12,
  DepthToSpace ×2 (CRD), plus the nearest-upsampled input — the shape of
  realesr-animevideov3 in miniature. Outputs leave [0, 1] in places, so the
  post pass's clamping is exercised.
- tiny-x2-f16.onnx: the same with float16 input, output and weights.
- tiny-x1-rgba-u8.onnx: NHWC RGBA uint8, ×1 (a "denoiser"): RGB through a
  conv3x3 3→3, clipped and rounded; alpha passed through, inverted.
- bad-one-channel.onnx: input [1, 1, H, W]; the pipeline must refuse it.
- tiny-x2-f32-says-x3.onnx: tiny-x2-f32 with metadata scale=3, though it
  upscales ×2: its dynamic shapes cannot contradict the metadata, so the
  error shows only when a frame runs, and must name the metadata.
All dynamic in H and W, with metadata scale.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test")


def save(model, name, scale):
    model.metadata_props.append(onnx.StringStringEntryProto(key="scale", value=str(scale)))
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, name))
    print("wrote", name)


def tiny_x2(dtype):
    np_t = np.float16 if dtype == TensorProto.FLOAT16 else np.float32
    rng = np.random.default_rng(2024)
    w0 = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np_t)
    b0 = (rng.standard_normal(8) * 0.1).astype(np_t)
    s0 = np.full((8, 1, 1), 0.2, np_t)
    w1 = (rng.standard_normal((12, 8, 3, 3)) * 0.2).astype(np_t)
    b1 = (rng.standard_normal(12) * 0.05).astype(np_t)
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w0, "w0"), (b0, "b0"), (s0, "s0"), (w1, "w1"), (b1, "b1"), (np.array([1, 1, 2, 2], np.float32), "scales")]]
    nodes = [
        helper.make_node("Conv", ["input", "w0", "b0"], ["c0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("PRelu", ["c0", "s0"], ["p0"]),
        helper.make_node("Conv", ["p0", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("DepthToSpace", ["c1"], ["d"], blocksize=2, mode="CRD"),
        helper.make_node("Resize", ["input", "", "scales"], ["up"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Add", ["d", "up"], ["output"]),
    ]
    g = helper.make_graph(nodes, "tiny-x2", [helper.make_tensor_value_info("input", dtype, [1, 3, "h", "w"])],
                          [helper.make_tensor_value_info("output", dtype, [1, 3, "h2", "w2"])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def tiny_rgba_u8():
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((3, 3, 3, 3)) * 0.15).astype(np.float32)
    w[[0, 1, 2], [0, 1, 2], 1, 1] += 0.7
    b = np.array([0.02, -0.01, 0.03], np.float32)
    c = lambda n, v: numpy_helper.from_array(np.array(v, np.float32), n)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"), c("k255", 255.0), c("zero", 0.0),
             c("one", 1.0), numpy_helper.from_array(np.array([0], np.int64), "i0"),
             numpy_helper.from_array(np.array([3], np.int64), "i3"),
             numpy_helper.from_array(np.array([4], np.int64), "i4"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    nodes = [
        helper.make_node("Cast", ["input"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["f", "k255"], ["n"]),
        helper.make_node("Transpose", ["n"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Slice", ["nchw", "i0", "i3", "axis1"], ["rgb"]),
        helper.make_node("Slice", ["nchw", "i3", "i4", "axis1"], ["a"]),
        helper.make_node("Conv", ["rgb", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["y", "zero", "one"], ["yc"]),
        helper.make_node("Sub", ["one", "a"], ["ainv"]),
        helper.make_node("Concat", ["yc", "ainv"], ["rgba"], axis=1),
        helper.make_node("Transpose", ["rgba"], ["nhwc"], perm=[0, 2, 3, 1]),
        helper.make_node("Mul", ["nhwc", "k255"], ["s"]),
        helper.make_node("Round", ["s"], ["r"]),
        helper.make_node("Cast", ["r"], ["output"], to=TensorProto.UINT8),
    ]
    g = helper.make_graph(nodes, "tiny-rgba", [helper.make_tensor_value_info("input", TensorProto.UINT8, [1, "h", "w", 4])],
                          [helper.make_tensor_value_info("output", TensorProto.UINT8, [1, "h", "w", 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def bad_one_channel():
    w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["gray", "w"], ["out"])], "bad",
                          [helper.make_tensor_value_info("gray", TensorProto.FLOAT, [1, 1, "h", "w"])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1, "h", "w"])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    save(tiny_x2(TensorProto.FLOAT), "tiny-x2-f32.onnx", 2)
    save(tiny_x2(TensorProto.FLOAT16), "tiny-x2-f16.onnx", 2)
    save(tiny_rgba_u8(), "tiny-x1-rgba-u8.onnx", 1)
    save(bad_one_channel(), "bad-one-channel.onnx", 1)
    save(tiny_x2(TensorProto.FLOAT), "tiny-x2-f32-says-x3.onnx", 3)
