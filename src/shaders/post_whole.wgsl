// Post pass targets whose pixels never share a word (images, buffers of RGBA
// pixels): the pair stores of post_common.wgsl's `emit` are plain stores.

fn pairs() -> bool {
    return false;
}

fn store_pair(x: u32, y: u32, a: vec4<f32>, b: vec4<f32>) {
    store(x, y, a);
    store(x + 1u, y, b);
}

fn store_half(x: u32, y: u32, c: vec4<f32>) {
    store(x, y, c);
}
