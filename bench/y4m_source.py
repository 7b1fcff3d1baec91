#!/usr/bin/env python3
"""A YUV4MPEG2 source for timing `neural-frame stream`: writes --frames frames of
varied 8-bit 4:2:0 or 4:4:4 content (--chroma; 16 distinct frames made once with numpy,
cycled) to standard output as fast as the pipe takes them, so the stream, not the source,
sets the pace.

    python3 bench/y4m_source.py --size 960x540 --frames 600 | neural-frame stream | cat >/dev/null
    python3 bench/y4m_source.py --chroma 444 | neural-frame stream --output /dev/null
"""
import argparse
import sys

import numpy as np


def frames(w, h, count, chroma):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    out = []
    for k in range(count):
        t = k / count * 2 * np.pi
        luma = 128 + 60 * np.sin(x / 37 + t) * np.cos(y / 23 - t) + 30 * np.sin((x + y) / 11 + 3 * t)
        luma += np.random.default_rng(k).normal(0, 6, (h, w))
        cw, ch = ((w + 1) // 2, (h + 1) // 2) if chroma == "420" else (w, h)
        cy, cx = np.mgrid[0:ch, 0:cw].astype(np.float32)
        u = 128 + 50 * np.sin(cx / 19 + t)
        v = 128 + 50 * np.cos(cy / 13 - t)
        planes = [np.clip(p, 16, 240).round().astype(np.uint8).tobytes() for p in (luma, u, v)]
        out.append(b"FRAME\n" + b"".join(planes))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="960x540")
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--chroma", choices=("420", "444"), default="420", help="chroma subsampling (default 420)")
    a = ap.parse_args()
    w, h = (int(v) for v in a.size.split("x"))
    made = frames(w, h, 16, a.chroma)
    tag = b"420jpeg" if a.chroma == "420" else b"444"
    out = sys.stdout.buffer
    out.write(b"YUV4MPEG2 W%d H%d F30000:1001 Ip A1:1 C%s XCOLORRANGE=LIMITED\n" % (w, h, tag))
    try:
        for i in range(a.frames):
            out.write(made[i % len(made)])
        out.flush()
    except BrokenPipeError:
        sys.exit(1)


if __name__ == "__main__":
    main()
