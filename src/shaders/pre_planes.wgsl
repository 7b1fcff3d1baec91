// Pre pass source: a planar frame, R, G and B in planes 0, 1 and 2 (a buffer
// each; a single plane is bound three times: grey), alpha 1. Format 3: floats,
// a word each; 4: halves, two to a word (an even pixel in the low half); 5:
// bytes (unorm), four to a word. Plane
// k's row y starts at word plane_k + y · pitch_k of its buffer.

@group(0) @binding(0) var<storage, read> src0: array<u32>;
@group(0) @binding(3) var<storage, read> src1: array<u32>;
@group(0) @binding(4) var<storage, read> src2: array<u32>;

fn word(k: u32, w: u32) -> u32 {
    if k == 1u {
        return src1[w];
    }
    if k == 2u {
        return src2[w];
    }
    return src0[w];
}

fn load(i: u32) -> vec4<f32> {
    let x = p.origin_x + i % p.width;
    let y = p.origin_y + i / p.width;
    var c = vec4<f32>(0.0, 0.0, 0.0, 1.0);
    for (var k = 0u; k < 3u; k++) {
        let row = plane_row(k, y);
        if p.format == 3u {
            c[k] = bitcast<f32>(word(k, row + x));
        } else if p.format == 4u {
            c[k] = unpack2x16float(word(k, row + x / 2u))[x & 1u];
        } else {
            c[k] = unpack4x8unorm(word(k, row + x / 4u))[x & 3u];
        }
    }
    return c;
}
