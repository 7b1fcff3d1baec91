// Post pass: the model's output tensor (array of 32-bit words, as in pre.wgsl)
// → an RGBA8 storage image: clamp to [0, 1]; the unorm store scales by 255 and
// rounds to nearest. RGB models get the input image's alpha, upscaled bilinearly.

struct Params {
    width: u32,      // input frame width
    height: u32,     // input frame height
    out_width: u32,  // output width (width × scale)
    out_height: u32, // output height
}

var<immediate> p: Params;

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var input_image: texture_2d<f32>;
@group(0) @binding(2) var dst: texture_storage_2d<rgba8unorm, write>;

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
    let a00 = textureLoad(input_image, vec2<u32>(x0, y0), 0).a;
    let a10 = textureLoad(input_image, vec2<u32>(x1, y0), 0).a;
    let a01 = textureLoad(input_image, vec2<u32>(x0, y1), 0).a;
    let a11 = textureLoad(input_image, vec2<u32>(x1, y1), 0).a;
    return mix(mix(a00, a10, tx), mix(a01, a11, tx), ty);
}

fn store(x: u32, y: u32, rgb: vec3<f32>, a: f32) {
    textureStore(dst, vec2<u32>(x, y), clamp(vec4<f32>(rgb, a), vec4<f32>(0.0), vec4<f32>(1.0)));
}

@compute @workgroup_size(8, 8)
fn post_nchw_f32(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= p.out_width || id.y >= p.out_height {
        return;
    }
    let plane = p.out_width * p.out_height;
    let i = id.y * p.out_width + id.x;
    let rgb = vec3<f32>(bitcast<f32>(src[i]), bitcast<f32>(src[plane + i]), bitcast<f32>(src[2u * plane + i]));
    store(id.x, id.y, rgb, alpha_at(id.x, id.y));
}

fn half_at(e: u32) -> f32 {
    let pair = unpack2x16float(src[e / 2u]);
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
    store(id.x, id.y, rgb, alpha_at(id.x, id.y));
}

@compute @workgroup_size(8, 8)
fn post_nhwc_u8(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= p.out_width || id.y >= p.out_height {
        return;
    }
    let c = unpack4x8unorm(src[id.y * p.out_width + id.x]);
    store(id.x, id.y, c.rgb, c.a);
}
