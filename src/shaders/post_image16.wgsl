// Post pass target: an RGBA16F storage image. Values are stored as the model
// gave them (no clamp: a half-float output may carry values above 1).

@group(0) @binding(2) var dst: texture_storage_2d<rgba16float, read_write>;

fn store(x: u32, y: u32, c: vec4<f32>) {
    textureStore(dst, vec2<u32>(x, y), c);
}

// What an earlier tile wrote at (x, y), for blending.
fn load_prev(x: u32, y: u32) -> vec4<f32> {
    return textureLoad(dst, vec2<u32>(x, y));
}
