#!/usr/bin/env python3
"""Variants of a model for finding where its GPU time goes (not for use):

    python3 bench/model_variants.py models/upscale-fp16.onnx OUT_DIR

writes OUT_DIR/<stem>-noprelu.onnx (every PRelu replaced by Identity: the
convolutions alone) and OUT_DIR/<stem>-relu.onnx (every PRelu replaced by Relu,
which ONNX Runtime's CUDA provider fuses into the convolution). Timing them
with `neural-frame bench` next to the original gives the activations' share
and what a fused activation would save. Their outputs are not the model's.
"""
import os
import sys

import onnx
from onnx import helper


def variant(model, op):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    nodes = []
    for n in m.graph.node:
        if n.op_type == "PRelu":
            nodes.append(helper.make_node(op, [n.input[0]], list(n.output), name=n.name))
        else:
            nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    used = {i for n in m.graph.node for i in n.input}
    keep = [t for t in m.graph.initializer if t.name in used]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    onnx.checker.check_model(m)
    return m


def main():
    src, out = sys.argv[1], sys.argv[2]
    model = onnx.load(src)
    stem = os.path.splitext(os.path.basename(src))[0]
    os.makedirs(out, exist_ok=True)
    for op, suffix in (("Identity", "noprelu"), ("Relu", "relu")):
        path = os.path.join(out, f"{stem}-{suffix}.onnx")
        onnx.save(variant(model, op), path)
        print(path)


if __name__ == "__main__":
    main()
