// Pre pass source: a linear buffer of pixels, rows `pitch` words apart.
// RGBA8 and BGRA8 (unorm or sRGB: the stored codes are read as they are, as
// the image source recovers them) take one word a pixel, RGBA16F two.

@group(0) @binding(0) var<storage, read> src: array<u32>;

fn load(i: u32) -> vec4<f32> {
    let x = p.origin_x + i % p.width;
    let y = p.origin_y + i / p.width;
    if p.format == 2u {
        let w = y * p.pitch + 2u * x;
        return vec4<f32>(unpack2x16float(src[w]), unpack2x16float(src[w + 1u]));
    }
    let c = unpack4x8unorm(src[y * p.pitch + x]);
    if p.format == 1u {
        return c.zyxw;
    }
    return c;
}
