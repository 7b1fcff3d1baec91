// Post pass target: a planar frame, the colour's R, G and B into planes 0, 1
// and 2 (a buffer each; one plane: R, the grey of a one-channel model), as the
// model gave them (no clamp). Format 3: floats, a word each; 4: halves, two to
// a word (an even pixel in the low half), written a pair at a time. Plane k's
// row y starts at word plane_k + y · pitch_k of its buffer.

@group(0) @binding(2) var<storage, read_write> dst0: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst1: array<u32>;
@group(0) @binding(4) var<storage, read_write> dst2: array<u32>;

fn word(k: u32, w: u32) -> u32 {
    if k == 1u {
        return dst1[w];
    }
    if k == 2u {
        return dst2[w];
    }
    return dst0[w];
}

fn put_word(k: u32, w: u32, v: u32) {
    if k == 1u {
        dst1[w] = v;
    } else if k == 2u {
        dst2[w] = v;
    } else {
        dst0[w] = v;
    }
}

fn store(x: u32, y: u32, c: vec4<f32>) {
    for (var k = 0u; k < 3u; k++) {
        put_word(k, plane_row(k, y) + x, bitcast<u32>(c[k]));
    }
}

// Planes of halves hold two pixels a word.
fn pairs() -> bool {
    return p.format == 4u;
}

// Pixels x (even) and x + 1 of row y, into planes of halves.
fn store_pair(x: u32, y: u32, a: vec4<f32>, b: vec4<f32>) {
    for (var k = 0u; k < 3u; k++) {
        put_word(k, plane_row(k, y) + x / 2u, pack2x16float(vec2<f32>(a[k], b[k])));
    }
}

// Pixel x of row y alone, into planes of halves: the other half of its word is kept.
fn store_half(x: u32, y: u32, c: vec4<f32>) {
    for (var k = 0u; k < 3u; k++) {
        let w = plane_row(k, y) + x / 2u;
        var pair = unpack2x16float(word(k, w));
        pair[x & 1u] = c[k];
        put_word(k, w, pack2x16float(pair));
    }
}

// What an earlier tile wrote at (x, y), for blending.
fn load_prev(x: u32, y: u32) -> vec4<f32> {
    var c = vec4<f32>(0.0, 0.0, 0.0, 1.0);
    for (var k = 0u; k < 3u; k++) {
        let row = plane_row(k, y);
        if p.format == 3u {
            c[k] = bitcast<f32>(word(k, row + x));
        } else {
            c[k] = unpack2x16float(word(k, row + x / 2u))[x & 1u];
        }
    }
    return c;
}
