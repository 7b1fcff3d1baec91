// Post pass target: an RGBA8 unorm storage image. Values are clamped to
// [0, 1]; the unorm store scales by 255 and rounds to nearest.

@group(0) @binding(2) var dst: texture_storage_2d<rgba8unorm, read_write>;

fn store(x: u32, y: u32, c: vec4<f32>) {
    textureStore(dst, vec2<u32>(x, y), clamp(c, vec4<f32>(0.0), vec4<f32>(1.0)));
}

// What an earlier tile wrote at (x, y), for blending.
fn load_prev(x: u32, y: u32) -> vec4<f32> {
    return textureLoad(dst, vec2<u32>(x, y));
}
