// The planar passes' shared part: where plane k's row y starts in its buffer, in
// 32-bit words (planes 0, 1 and 2 hold R, G and B; one plane is given three times), and
// how a word holds a plane's pixels (format 3: a float; 4: two halves, an even pixel in
// the low half; 5: four unorm bytes). `word(k, w)` is each pass's own (its buffers).

fn plane_row(k: u32, y: u32) -> u32 {
    if k == 1u {
        return p.plane1 + y * p.pitch1;
    }
    if k == 2u {
        return p.plane2 + y * p.pitch2;
    }
    return p.plane0 + y * p.pitch;
}

// Pixels a word: floats 1, halves 2, bytes 4.
fn group() -> u32 {
    if p.format == 4u {
        return 2u;
    }
    if p.format == 5u {
        return 4u;
    }
    return 1u;
}

// A word's pixels, in lanes 0 to group() - 1.
fn unpack_word(v: u32) -> vec4<f32> {
    if p.format == 4u {
        return vec4<f32>(unpack2x16float(v), 0.0, 0.0);
    }
    if p.format == 5u {
        return unpack4x8unorm(v);
    }
    return vec4<f32>(bitcast<f32>(v), 0.0, 0.0, 0.0);
}

// Lanes 0 to group() - 1 as a word: floats and halves as they are, bytes clamped to
// [0, 1], ×255, rounded.
fn pack_word(q: vec4<f32>) -> u32 {
    if p.format == 4u {
        return pack2x16float(q.xy);
    }
    if p.format == 5u {
        return pack4x8unorm(clamp(q, vec4<f32>(0.0), vec4<f32>(1.0)));
    }
    return bitcast<u32>(q.x);
}

// Pixel (x, y) of the planes, alpha 1.
fn plane_pixel(x: u32, y: u32) -> vec4<f32> {
    let g = group();
    var c = vec4<f32>(0.0, 0.0, 0.0, 1.0);
    for (var k = 0u; k < 3u; k++) {
        c[k] = unpack_word(word(k, plane_row(k, y) + x / g))[x % g];
    }
    return c;
}
