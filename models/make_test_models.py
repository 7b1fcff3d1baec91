#!/usr/bin/env python3
"""Writes the tiny models the tests use (models/test/*.onnx), with fixed seeds:

    python3 models/make_test_models.py           # writes the files
    python3 models/make_test_models.py --check   # writes them, then checks each
                                                 # one (needs onnxruntime)

Unless said otherwise a model is float32 NCHW RGB [1, 3, h, w], dynamic in H
and W, with input in [0, 1], and "the tiny_x2 net" is: conv3x3 3→8 + PReLU,
conv3x3 8→12, DepthToSpace ×2 (CRD), plus the nearest-upsampled input — the
shape of realesr-animevideov3 in miniature. Its random weights mix the three
channels unevenly, so a swapped channel order or a wrong normalisation changes
the output (--check shows both).

Metadata keys the library reads: `scale` (integer), `neural_frame.layout`
(NCHW|NHWC), `neural_frame.color` (RGB|BGR), `neural_frame.range`
(0,1|-1,1|0,255), `neural_frame.mean` / `neural_frame.std` (three floats each,
t = (x - mean) / std for x in [0, 1]).

Models that the pipeline runs:
- tiny-x2-f32.onnx: the tiny_x2 net, metadata scale=2. Outputs leave [0, 1]
  in places, so the post pass's clamping is exercised.
- tiny-x2-f16.onnx: the same with float16 input, output and weights.
- tiny-x1-rgba-u8.onnx: NHWC RGBA uint8, ×1 (a "denoiser"): RGB through a
  conv3x3 3→3, clipped and rounded; alpha passed through, inverted. scale=1.
- tiny-x2-f32-says-x3.onnx: tiny-x2-f32 with metadata scale=3, though it
  upscales ×2: its dynamic shapes cannot contradict the metadata, so the
  error shows only when a frame runs, and must name the metadata.
- tiny-x2-f32-fixed-32x24.onnx: the tiny_x2 net (seed 2034) with a static
  input shape [1, 3, 24, 32] (output [1, 3, 48, 64]): a fixed-size model, whose
  frames and tiles must be its size. Metadata scale=2.
- tiny-x2-f32-nhwc.onnx: input [1, h, w, 3], output [1, h2, w2, 3]: Transpose
  to NCHW, the tiny_x2 net (seed 2025), Transpose back. Metadata scale=2 only:
  the layout must be detected from the shape.
- tiny-x2-f32-bgr-signed.onnx: the tiny_x2 net (seed 2026) for BGR input in
  [-1, 1] (its residual, the upsampled input, is in [-1, 1] too). Metadata
  scale=2, neural_frame.color=BGR, neural_frame.range=-1,1.
- tiny-x2-f32-meanstd.onnx: the tiny_x2 net (seed 2028) for ImageNet-normalised
  input. Metadata scale=2, neural_frame.mean=0.485,0.456,0.406,
  neural_frame.std=0.229,0.224,0.225.
- tiny-x2-f32-no-meta.onnx: the tiny_x2 net (seed 2031), NO metadata; output
  dims h2, w2 are new symbols, so the scale is found only by a probe run.
- tiny-x1-f32-same-dims.onnx: ×1, conv3x3 3→3 + input, NO metadata; output
  dims use the input's symbols h, w, so the shapes say ×1 (a probe run
  confirms it).
- tiny-x2x1-f32-no-meta.onnx: ×2 in width, ×1 in height: nearest Resize by
  [1, 1, 1, 2], conv3x3 3→3 + the resized input. NO metadata, output dims
  ho, wo: the per-axis scale is found by a probe run.
- tiny-x2-f32-dims-say-x1.onnx: the tiny_x2 net (seed 2033), NO metadata, but
  its output dims are named h, w like the input's, as torch.onnx.export writes
  them with dynamic_axes {'input': {2: 'h', 3: 'w'}, 'output': {2: 'h', 3: 'w'}}:
  the symbols say x1, the model upscales x2. The probe run must win, with a
  warning.
- tiny-x1-f32-dims-say-x2.onnx: the x1 net of tiny-x1-f32-same-dims (seed 15),
  NO metadata, output dims named 2*h, 2*w (as symbolic shape inference writes
  an upscaler's): the symbols say x2, the model is x1. The probe run must win,
  with a warning.

Models that the pipeline must refuse, each with a clear error:
- bad-one-channel.onnx: input [1, 1, h, w]. scale=1.
- bad-rank5.onnx: input and output [1, 1, 3, h, w] (a sequence dim), a Mul by
  a constant. scale=1.
- bad-batch2.onnx: input and output [2, 3, h, w], a Mul by a constant. scale=1.
- bad-int64.onnx: input int64 [1, 3, h, w], Cast to float32 [1, 3, h, w]. scale=1.
- bad-string.onnx: string input [1], Identity to a string output; the simplest
  graph ONNX Runtime loads. scale=1.
- bad-x1.5-no-meta.onnx: linear Resize ×1.5 on H and W, NO metadata, output
  dims ho, wo: a probe at 64×48 gives 96×72, not an integer multiple.

Models with several inputs or outputs (tests/common/contract.rs; tiny-x2-f32-score-first.onnx has a
scalar output `score` before its image, which the pipeline leaves on the device):
- tiny-x1-f32-color-albedo.onnx: inputs color [1, 3, h, w] and albedo
  [1, 3, h, w], output [1, 3, h, w]: Concat on channels, conv3x3 6→3, + color.
  scale=1.
- tiny-x1-f32-color-depth.onnx: inputs color [1, 3, h, w] and depth
  [1, 1, h, w], output [1, 3, h, w]: Concat, conv3x3 4→3, + color. scale=1.
- tiny-x2-f32-two-outputs.onnx: input [1, 3, h, w]; outputs image
  [1, 3, h2, w2] (the tiny_x2 net, seed 2029) and edges [1, 1, h2, w2] (a fixed
  3x3 Laplacian of the image's luma). scale=2.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test")
OPSET = [helper.make_opsetid("", 17)]
F32 = TensorProto.FLOAT


def save(model, name, scale, meta=()):
    """Writes models/test/<name>: metadata `scale` first (none when scale is None), then the (key, value) pairs of meta."""
    if scale is not None:
        model.metadata_props.append(onnx.StringStringEntryProto(key="scale", value=str(scale)))
    for k, v in meta:
        model.metadata_props.append(onnx.StringStringEntryProto(key=k, value=v))
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(OUT, name))
    print("wrote", name)


def io(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def conv(x, w, b, y):
    return helper.make_node("Conv", [x, w, b], [y], kernel_shape=[3, 3], pads=[1, 1, 1, 1])


def tiny_x2_body(dtype, seed, src, dst):
    """The tiny_x2 net from tensor src (NCHW, 3 channels) to tensor dst: (nodes, initializers)."""
    np_t = np.float16 if dtype == TensorProto.FLOAT16 else np.float32
    rng = np.random.default_rng(seed)
    w0 = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np_t)
    b0 = (rng.standard_normal(8) * 0.1).astype(np_t)
    s0 = np.full((8, 1, 1), 0.2, np_t)
    w1 = (rng.standard_normal((12, 8, 3, 3)) * 0.2).astype(np_t)
    b1 = (rng.standard_normal(12) * 0.05).astype(np_t)
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w0, "w0"), (b0, "b0"), (s0, "s0"), (w1, "w1"), (b1, "b1"), (np.array([1, 1, 2, 2], np.float32), "scales")]]
    nodes = [
        helper.make_node("Conv", [src, "w0", "b0"], ["c0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("PRelu", ["c0", "s0"], ["p0"]),
        helper.make_node("Conv", ["p0", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("DepthToSpace", ["c1"], ["d"], blocksize=2, mode="CRD"),
        helper.make_node("Resize", [src, "", "scales"], ["up"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Add", ["d", "up"], [dst]),
    ]
    return nodes, inits


def tiny_x2(dtype, seed=2024, name="tiny-x2"):
    nodes, inits = tiny_x2_body(dtype, seed, "input", "output")
    g = helper.make_graph(nodes, name, [io("input", dtype, [1, 3, "h", "w"])],
                          [io("output", dtype, [1, 3, "h2", "w2"])], inits)
    return helper.make_model(g, opset_imports=OPSET)


def tiny_x2_fixed(seed=2034, w=32, h=24):
    """The tiny_x2 net with a static input shape [1, 3, h, w]: a fixed-size model."""
    nodes, inits = tiny_x2_body(F32, seed, "input", "output")
    g = helper.make_graph(nodes, "tiny-x2-fixed", [io("input", F32, [1, 3, h, w])],
                          [io("output", F32, [1, 3, 2 * h, 2 * w])], inits)
    return helper.make_model(g, opset_imports=OPSET)


def tiny_x2_nhwc(seed=2025):
    nodes, inits = tiny_x2_body(F32, seed, "nchw", "y")
    nodes = ([helper.make_node("Transpose", ["input"], ["nchw"], perm=[0, 3, 1, 2])] + nodes +
             [helper.make_node("Transpose", ["y"], ["output"], perm=[0, 2, 3, 1])])
    g = helper.make_graph(nodes, "tiny-x2-nhwc", [io("input", F32, [1, "h", "w", 3])],
                          [io("output", F32, [1, "h2", "w2", 3])], inits)
    return helper.make_model(g, opset_imports=OPSET)


def tiny_x2_two_outputs(seed=2029):
    nodes, inits = tiny_x2_body(F32, seed, "input", "image")
    lap = np.array([[0, -1, 0], [-1, 4, -1], [0, -1, 0]], np.float32)
    we = (np.array([0.299, 0.587, 0.114], np.float32)[:, None, None] * lap)[None]  # [1, 3, 3, 3]
    inits += [numpy_helper.from_array(we, "we"), numpy_helper.from_array(np.zeros(1, np.float32), "be")]
    nodes.append(conv("image", "we", "be", "edges"))
    g = helper.make_graph(nodes, "tiny-x2-two-outputs", [io("input", F32, [1, 3, "h", "w"])],
                          [io("image", F32, [1, 3, "h2", "w2"]), io("edges", F32, [1, 1, "h2", "w2"])], inits)
    return helper.make_model(g, opset_imports=OPSET)


def tiny_x2_score_first(seed=2032):
    """A non-image output first (`score`, the image's mean: a scalar), then the image."""
    nodes, inits = tiny_x2_body(F32, seed, "input", "image")
    nodes.append(helper.make_node("ReduceMean", ["image"], ["score"], keepdims=0))
    g = helper.make_graph(nodes, "tiny-x2-score-first", [io("input", F32, [1, 3, "h", "w"])],
                          [io("score", F32, []), io("image", F32, [1, 3, "h2", "w2"])], inits)
    return helper.make_model(g, opset_imports=OPSET)


def tiny_x1_same_dims(seed=11, name="tiny-x1-same-dims", out_dims=("h", "w")):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((3, 3, 3, 3)) * 0.15).astype(np.float32)
    b = (rng.standard_normal(3) * 0.05).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [conv("input", "w", "b", "c"), helper.make_node("Add", ["c", "input"], ["output"])]
    g = helper.make_graph(nodes, name, [io("input", F32, [1, 3, "h", "w"])],
                          [io("output", F32, [1, 3, *out_dims])], inits)
    return helper.make_model(g, opset_imports=OPSET)


def tiny_x2_dims_say_x1(seed=2033):
    """The tiny_x2 net whose output dims claim the input's symbols (x1): a lie."""
    nodes, inits = tiny_x2_body(F32, seed, "input", "output")
    g = helper.make_graph(nodes, "tiny-x2-dims-say-x1", [io("input", F32, [1, 3, "h", "w"])],
                          [io("output", F32, [1, 3, "h", "w"])], inits)
    return helper.make_model(g, opset_imports=OPSET)


def tiny_x2x1(seed=12):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((3, 3, 3, 3)) * 0.15).astype(np.float32)
    b = (rng.standard_normal(3) * 0.05).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
             numpy_helper.from_array(np.array([1, 1, 1, 2], np.float32), "scales")]
    nodes = [
        helper.make_node("Resize", ["input", "", "scales"], ["up"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        conv("up", "w", "b", "c"),
        helper.make_node("Add", ["c", "up"], ["output"]),
    ]
    g = helper.make_graph(nodes, "tiny-x2x1", [io("input", F32, [1, 3, "h", "w"])],
                          [io("output", F32, [1, 3, "ho", "wo"])], inits)
    return helper.make_model(g, opset_imports=OPSET)


def tiny_fused(aux, aux_channels, seed):
    """color [1, 3, h, w] and aux [1, aux_channels, h, w] → output: Concat, conv3x3 → 3, + color."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((3, 3 + aux_channels, 3, 3)) * 0.15).astype(np.float32)
    b = (rng.standard_normal(3) * 0.05).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [
        helper.make_node("Concat", ["color", aux], ["cat"], axis=1),
        conv("cat", "w", "b", "c"),
        helper.make_node("Add", ["c", "color"], ["output"]),
    ]
    g = helper.make_graph(nodes, "tiny-x1-color-" + aux,
                          [io("color", F32, [1, 3, "h", "w"]), io(aux, F32, [1, aux_channels, "h", "w"])],
                          [io("output", F32, [1, 3, "h", "w"])], inits)
    return helper.make_model(g, opset_imports=OPSET)


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


def bad_mul(name, shape):
    """Identity-like: output = input * 1 (a constant), same shape."""
    k = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    g = helper.make_graph([helper.make_node("Mul", ["input", "one"], ["output"])], name,
                          [io("input", F32, shape)], [io("output", F32, shape)], [k])
    return helper.make_model(g, opset_imports=OPSET)


def bad_int64():
    g = helper.make_graph([helper.make_node("Cast", ["input"], ["output"], to=F32)], "bad-int64",
                          [io("input", TensorProto.INT64, [1, 3, "h", "w"])], [io("output", F32, [1, 3, "h", "w"])])
    return helper.make_model(g, opset_imports=OPSET)


def bad_string():
    g = helper.make_graph([helper.make_node("Identity", ["input"], ["output"])], "bad-string",
                          [io("input", TensorProto.STRING, [1])], [io("output", TensorProto.STRING, [1])])
    return helper.make_model(g, opset_imports=OPSET)


def bad_x1_5():
    s = numpy_helper.from_array(np.array([1, 1, 1.5, 1.5], np.float32), "scales")
    g = helper.make_graph([helper.make_node("Resize", ["input", "", "scales"], ["output"], mode="linear")], "bad-x1.5",
                          [io("input", F32, [1, 3, "h", "w"])], [io("output", F32, [1, 3, "ho", "wo"])], [s])
    return helper.make_model(g, opset_imports=OPSET)


def write():
    os.makedirs(OUT, exist_ok=True)
    save(tiny_x2(TensorProto.FLOAT), "tiny-x2-f32.onnx", 2)
    save(tiny_x2(TensorProto.FLOAT16), "tiny-x2-f16.onnx", 2)
    save(tiny_rgba_u8(), "tiny-x1-rgba-u8.onnx", 1)
    save(bad_one_channel(), "bad-one-channel.onnx", 1)
    save(tiny_x2(TensorProto.FLOAT), "tiny-x2-f32-says-x3.onnx", 3)
    save(tiny_x2_nhwc(), "tiny-x2-f32-nhwc.onnx", 2)
    save(tiny_x2(F32, 2026, "tiny-x2-bgr-signed"), "tiny-x2-f32-bgr-signed.onnx", 2,
         [("neural_frame.color", "BGR"), ("neural_frame.range", "-1,1")])
    save(tiny_x2(F32, 2031, "tiny-x2-no-meta"), "tiny-x2-f32-no-meta.onnx", None)
    save(tiny_x1_same_dims(), "tiny-x1-f32-same-dims.onnx", None)
    save(tiny_x2(F32, 2028, "tiny-x2-meanstd"), "tiny-x2-f32-meanstd.onnx", 2,
         [("neural_frame.mean", "0.485,0.456,0.406"), ("neural_frame.std", "0.229,0.224,0.225")])
    save(tiny_x2x1(), "tiny-x2x1-f32-no-meta.onnx", None)
    save(bad_mul("bad-rank5", [1, 1, 3, "h", "w"]), "bad-rank5.onnx", 1)
    save(bad_mul("bad-batch2", [2, 3, "h", "w"]), "bad-batch2.onnx", 1)
    save(bad_int64(), "bad-int64.onnx", 1)
    save(bad_string(), "bad-string.onnx", 1)
    save(bad_x1_5(), "bad-x1.5-no-meta.onnx", None)
    save(tiny_fused("albedo", 3, 13), "tiny-x1-f32-color-albedo.onnx", 1)
    save(tiny_fused("depth", 1, 14), "tiny-x1-f32-color-depth.onnx", 1)
    save(tiny_x2_two_outputs(), "tiny-x2-f32-two-outputs.onnx", 2)
    save(tiny_x2_score_first(), "tiny-x2-f32-score-first.onnx", 2)
    save(tiny_x2_dims_say_x1(), "tiny-x2-f32-dims-say-x1.onnx", None)
    save(tiny_x1_same_dims(15, "tiny-x1-dims-say-x2", ("2*h", "2*w")), "tiny-x1-f32-dims-say-x2.onnx", None)
    save(tiny_x2_fixed(), "tiny-x2-f32-fixed-32x24.onnx", 2)


ORT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(uint8)": np.uint8,
             "tensor(int64)": np.int64}


def feed(sess, rng, h, w):
    """A random (never all-zero) input for each of sess's inputs, dims h and w set to h and w."""
    out = {}
    for i in sess.get_inputs():
        shape = [{"h": h, "w": w}[d] if isinstance(d, str) else d for d in i.shape]
        t = ORT_TYPES[i.type]
        out[i.name] = (rng.random(shape) if t in (np.float32, np.float16) else rng.integers(1, 256, shape)).astype(t)
    return out


def ratios(sess, x, y):
    """Output / input size on the axes where the first input has symbolic dims h, w ('-' where ranks differ)."""
    i = sess.get_inputs()[0]
    axes = [a for a, d in enumerate(i.shape) if d in ("h", "w")]
    if len(axes) != 2 or len(y.shape) != len(x.shape):
        return "-"
    return "H x%g, W x%g" % tuple(y.shape[a] / x.shape[a] for a in axes)


def check():
    """Checks each model in models/test: onnx.checker, then a CPU run of ONNX Runtime at W×H 37×53."""
    import onnxruntime as ort
    ok = True
    for name in sorted(os.listdir(OUT)):
        if not name.endswith(".onnx"):
            continue
        path = os.path.join(OUT, name)
        m = onnx.load(path)
        onnx.checker.check_model(m, full_check=True)
        meta = {p.key: p.value for p in m.metadata_props}
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        ins = ", ".join("%s %s %s" % (i.name, i.type[7:-1], i.shape) for i in sess.get_inputs())
        print("%s (%d B) meta=%s\n  in:  %s" % (name, os.path.getsize(path), meta or "none", ins))
        if sess.get_inputs()[0].type == "tensor(string)":
            print("  loaded; not an image model, not run")
            continue
        rng = np.random.default_rng(1)
        x = feed(sess, rng, 53, 37)
        ys = sess.run(None, x)
        x0 = next(iter(x.values()))
        img = next((k for k, y in enumerate(ys) if y.ndim == 4), 0)  # the first image output
        print("  out: " + ", ".join("%s %s" % (o.name, list(y.shape)) for o, y in zip(sess.get_outputs(), ys)),
              "| " + ratios(sess, x0, ys[img]))
        # A channel-asymmetric net: running on reversed channels is not the reversed output.
        i = sess.get_inputs()[0]
        if (not name.startswith("bad-") and len(sess.get_inputs()) == 1 and i.type == "tensor(float)"
                and len(i.shape) == 4 and 3 in i.shape):
            c = i.shape.index(3)
            y_rev = sess.run(None, {i.name: np.flip(x0, c).copy()})[img]
            d = float(np.abs(y_rev - np.flip(ys[img], c)).max())
            print("  channel order matters: max |f(rev x) - rev f(x)| = %.3g" % d)
            ok &= d > 1e-3
            # Declared normalisation versus none: the output must differ.
            if any(k.startswith("neural_frame.") for k in meta):
                f = lambda k: np.array([float(v) for v in meta[k].split(",")], np.float32).reshape(1, 3, 1, 1)
                mean, std = (f("neural_frame.mean"), f("neural_frame.std")) if "neural_frame.mean" in meta else (0, 1)
                lo, hi = {"0,1": (0, 1), "-1,1": (-1, 1), "0,255": (0, 255)}[meta.get("neural_frame.range", "0,1")]
                bgr = meta.get("neural_frame.color") == "BGR"
                t = (x0 - mean) / std * (hi - lo) + lo
                t = np.flip(t, 1) if bgr else t
                y = sess.run(None, {i.name: t.astype(np.float32)})[0]
                y = np.flip(y, 1) if bgr else y
                y = ((y - lo) / (hi - lo)) * std + mean
                d = float(np.abs(y - ys[0]).max())
                print("  normalisation matters: max |declared - none| = %.3g" % d)
                ok &= d > 1e-2
    # The ×1.5 model: a probe at W×H 64×48 gives a non-integer ratio.
    sess = ort.InferenceSession(os.path.join(OUT, "bad-x1.5-no-meta.onnx"), providers=["CPUExecutionProvider"])
    x = feed(sess, np.random.default_rng(2), 48, 64)["input"]
    y = sess.run(None, {"input": x})[0]
    rh, rw = y.shape[2] / x.shape[2], y.shape[3] / x.shape[3]
    print("bad-x1.5-no-meta.onnx at 64x48: output %dx%d, ratio W %g, H %g" % (y.shape[3], y.shape[2], rw, rh))
    ok &= rh != int(rh) and rw != int(rw)
    # The models whose output dims lie: their real scale at W×H 37×53 is not the one their symbols claim.
    for name, claimed, real in [("tiny-x2-f32-dims-say-x1.onnx", 1, 2), ("tiny-x1-f32-dims-say-x2.onnx", 2, 1)]:
        sess = ort.InferenceSession(os.path.join(OUT, name), providers=["CPUExecutionProvider"])
        x = feed(sess, np.random.default_rng(3), 53, 37)["input"]
        y = sess.run(None, {"input": x})[0]
        dims = sess.get_outputs()[0].shape[2:]
        print("%s: output dims %s claim x%d; at 37x53 it gives %dx%d, x%g" %
              (name, dims, claimed, y.shape[3], y.shape[2], y.shape[3] / x.shape[3]))
        ok &= y.shape[2:] == (53 * real, 37 * real)
    print("check: " + ("ok" if ok else "FAILED"))
    return ok


if __name__ == "__main__":
    write()
    if "--check" in sys.argv[1:] and not check():
        sys.exit(1)
