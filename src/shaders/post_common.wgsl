// Post pass, shared part: the model's output tensor (array of 32-bit words, as
// in pre_common.wgsl) → the caller's output (an image or a linear buffer; the
// target part defines `store`). RGB models get the frame's alpha from the
// slot's alpha buffer (written by the pre pass), upscaled bilinearly.

struct Params {
    width: u32,      // input frame width
    height: u32,     // input frame height
    out_width: u32,  // output width (width × scale)
    out_height: u32, // output height
    format: u32,     // buffer target: 0 RGBA8, 1 BGRA8, 2 RGBA16F
    pitch: u32,      // buffer target: row pitch in 32-bit words
}

var<immediate> p: Params;

@group(0) @binding(0) var<storage, read> tensor: array<u32>;
@group(0) @binding(1) var<storage, read> alpha: array<f32>;

fn alpha_px(x: u32, y: u32) -> f32 {
    return alpha[y * p.width + x];
}

fn alpha_at(x: u32, y: u32) -> f32 {
    // Bilinear, sample centres aligned (as align_corners = false), edges clamped.
    let sx = (f32(x) + 0.5) * f32(p.width) / f32(p.out_width) - 0.5;
    let sy = (f32(y) + 0.5) * f32(p.height) / f32(p.out_height) - 0.5;
    let fx = clamp(sx, 0.0, f32(p.width - 1u));
    let fy = clamp(sy, 0.0, f32(p.height - 1u));
    let x0 = u32(floor(fx));
    let y0 = u32(floor(fy));
    let x1 = min(x0 + 1u, p.width - 1u);
    let y1 = min(y0 + 1u, p.height - 1u);
    let tx = fx - f32(x0);
    let ty = fy - f32(y0);
    return mix(mix(alpha_px(x0, y0), alpha_px(x1, y0), tx), mix(alpha_px(x0, y1), alpha_px(x1, y1), tx), ty);
}

@compute @workgroup_size(8, 8)
fn post_nchw_f32(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= p.out_width || id.y >= p.out_height {
        return;
    }
    let plane = p.out_width * p.out_height;
    let i = id.y * p.out_width + id.x;
    let rgb = vec3<f32>(bitcast<f32>(tensor[i]), bitcast<f32>(tensor[plane + i]), bitcast<f32>(tensor[2u * plane + i]));
    store(id.x, id.y, vec4<f32>(rgb, alpha_at(id.x, id.y)));
}

fn half_at(e: u32) -> f32 {
    let pair = unpack2x16float(tensor[e / 2u]);
    return select(pair.x, pair.y, (e & 1u) == 1u);
}

@compute @workgroup_size(8, 8)
fn post_nchw_f16(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= p.out_width || id.y >= p.out_height {
        return;
    }
    let plane = p.out_width * p.out_height;
    let i = id.y * p.out_width + id.x;
    let rgb = vec3<f32>(half_at(i), half_at(plane + i), half_at(2u * plane + i));
    store(id.x, id.y, vec4<f32>(rgb, alpha_at(id.x, id.y)));
}

@compute @workgroup_size(8, 8)
fn post_nhwc_u8(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= p.out_width || id.y >= p.out_height {
        return;
    }
    store(id.x, id.y, unpack4x8unorm(tensor[id.y * p.out_width + id.x]));
}
