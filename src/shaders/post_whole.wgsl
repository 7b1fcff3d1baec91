// Post pass targets whose pixels never share a word (images, buffers of RGBA
// pixels): post_common.wgsl's `emit` stores pixel by pixel.

fn group() -> u32 {
    return 1u;
}

fn store_word(x: u32, y: u32, v: array<vec4<f32>, 4>, n: u32) {
    for (var i = 0u; i < n; i++) {
        store(x + i, y, v[i]);
    }
}
