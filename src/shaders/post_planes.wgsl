// Post pass target: a planar frame, the colour's R, G and B into planes 0, 1
// and 2 (a buffer each; one plane: R, the grey of a one-channel model). Format 3:
// floats, a word each; 4: halves, two to a word (an even pixel in the low half);
// both as the model gave them (no clamp). 5: bytes, four to a word, clamped to
// [0, 1], ×255, rounded (as an RGBA8 target). Plane k's
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

// Pixels x .. x + n - 1 of row y (one word's, x its first or the tile's first) into planes
// of halves or bytes; the word's other pixels are kept.
fn store_word(x: u32, y: u32, v: array<vec4<f32>, 4>, n: u32) {
    let g = group();
    let lane = x % g;
    for (var k = 0u; k < 3u; k++) {
        let w = plane_row(k, y) + x / g;
        var q = vec4<f32>(0.0);
        if n < g {
            q = unpack_word(word(k, w));
        }
        for (var i = 0u; i < n; i++) {
            q[lane + i] = v[i][k];
        }
        put_word(k, w, pack_word(q));
    }
}

// What an earlier tile wrote at (x, y), for blending.
fn load_prev(x: u32, y: u32) -> vec4<f32> {
    return plane_pixel(x, y);
}
