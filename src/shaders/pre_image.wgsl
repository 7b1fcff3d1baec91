// Pre pass source: a sampled image of any float-readable colour format
// (RGBA8 unorm/srgb, BGRA8 unorm/srgb, RGBA16F), read with textureLoad.

@group(0) @binding(0) var src: texture_2d<f32>;

fn encode_srgb(c: vec3<f32>) -> vec3<f32> {
    let lo = c * 12.92;
    let hi = 1.055 * pow(max(c, vec3<f32>(0.0)), vec3<f32>(1.0 / 2.4)) - 0.055;
    return select(hi, lo, c <= vec3<f32>(0.0031308));
}

fn load(i: u32) -> vec4<f32> {
    let c = textureLoad(src, vec2<u32>(p.origin_x + i % p.width, p.origin_y + i / p.width), 0);
    if p.srgb != 0u {
        // 8-bit sRGB formats store 8-bit codes: re-encode what the view decoded
        // and round back to the code, which recovers it exactly.
        return vec4<f32>(round(encode_srgb(c.rgb) * 255.0) / 255.0, c.a);
    }
    return c;
}
