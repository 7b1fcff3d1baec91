// Post pass target: a linear buffer of pixels, rows `pitch` words apart.
// RGBA8 and BGRA8 take one word a pixel (clamped to [0, 1], ×255, rounded),
// RGBA16F two (stored as the model gave them).

@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

fn store(x: u32, y: u32, c: vec4<f32>) {
    if p.format == 2u {
        let w = y * p.pitch + 2u * x;
        dst[w] = pack2x16float(c.xy);
        dst[w + 1u] = pack2x16float(c.zw);
        return;
    }
    var v = clamp(c, vec4<f32>(0.0), vec4<f32>(1.0));
    if p.format == 1u {
        v = v.zyxw;
    }
    dst[y * p.pitch + x] = pack4x8unorm(v);
}

// What an earlier tile wrote at (x, y), for blending.
fn load_prev(x: u32, y: u32) -> vec4<f32> {
    if p.format == 2u {
        let w = y * p.pitch + 2u * x;
        return vec4<f32>(unpack2x16float(dst[w]), unpack2x16float(dst[w + 1u]));
    }
    let c = unpack4x8unorm(dst[y * p.pitch + x]);
    if p.format == 1u {
        return c.zyxw;
    }
    return c;
}
