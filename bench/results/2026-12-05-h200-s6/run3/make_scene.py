#!/usr/bin/env python3
"""Writes the 960×540 RGB test picture fd.sh reads (.exp/scene-960x540.png): sine/cosine
texture with noise in red, gradients in green and blue (random.seed(5)); standard library only."""
import math, random, struct, sys, zlib

w, h = 960, 540
random.seed(5)
rows = []
for y in range(h):
    r = bytearray([0])
    for x in range(w):
        v = int(127 + 60 * math.sin(x / 17.0) + 40 * math.cos(y / 11.0)) + random.randrange(-25, 26)
        r += bytes([max(0, min(255, v)), x * 255 // w, y * 255 // h])
    rows.append(bytes(r))


def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)


png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(b"".join(rows), 6)) + chunk(b"IEND", b""))
open(sys.argv[1] if len(sys.argv) > 1 else ".exp/scene-960x540.png", "wb").write(png)
