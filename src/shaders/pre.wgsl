// Pre pass: the renderer's image (any float-readable colour format: RGBA8
// unorm/srgb, BGRA8, RGBA16F) → the model's input tensor in a storage buffer.
// The buffer is an array of 32-bit words whatever the element type:
// f32 elements are bitcast, f16 elements packed two to a word, u8 RGBA four.
// Work items are numbered linearly over a 2D grid: i = id.y * row + id.x.

struct Params {
    width: u32,   // frame width (model input W)
    height: u32,  // frame height (model input H)
    srgb: u32,    // 1: the image view decodes sRGB; re-encode to the stored values
    row: u32,     // work items per grid row (dispatch width × 64)
}

var<immediate> p: Params;

@group(0) @binding(0) var src: texture_2d<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

fn encode_srgb(c: vec3<f32>) -> vec3<f32> {
    let lo = c * 12.92;
    let hi = 1.055 * pow(max(c, vec3<f32>(0.0)), vec3<f32>(1.0 / 2.4)) - 0.055;
    return select(hi, lo, c <= vec3<f32>(0.0031308));
}

fn load(i: u32) -> vec4<f32> {
    let c = textureLoad(src, vec2<u32>(i % p.width, i / p.width), 0);
    if p.srgb != 0u {
        // 8-bit sRGB formats store 8-bit codes: re-encode what the view decoded
        // and round back to the code, which recovers it exactly.
        return vec4<f32>(round(encode_srgb(c.rgb) * 255.0) / 255.0, c.a);
    }
    return c;
}

// NCHW, 3 planes of f32: one work item per pixel.
@compute @workgroup_size(64)
fn pre_nchw_f32(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.y * p.row + id.x;
    let plane = p.width * p.height;
    if i >= plane {
        return;
    }
    let c = load(i);
    dst[i] = bitcast<u32>(c.r);
    dst[plane + i] = bitcast<u32>(c.g);
    dst[2u * plane + i] = bitcast<u32>(c.b);
}

fn element(e: u32, plane: u32) -> f32 {
    let c = load(e % plane);
    let channel = e / plane;
    if channel == 0u {
        return c.r;
    } else if channel == 1u {
        return c.g;
    }
    return c.b;
}

// NCHW, 3 planes of f16: one work item per pair of consecutive elements
// (a pair may straddle a row or plane boundary when W is odd).
@compute @workgroup_size(64)
fn pre_nchw_f16(@builtin(global_invocation_id) id: vec3<u32>) {
    let k = id.y * p.row + id.x;
    let plane = p.width * p.height;
    let n = 3u * plane;
    let e = 2u * k;
    if e >= n {
        return;
    }
    var hi = 0.0;
    if e + 1u < n {
        hi = element(e + 1u, plane);
    }
    dst[k] = pack2x16float(vec2<f32>(element(e, plane), hi));
}

// NHWC RGBA u8: one work item per pixel, one word each.
@compute @workgroup_size(64)
fn pre_nhwc_u8(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.y * p.row + id.x;
    if i >= p.width * p.height {
        return;
    }
    dst[i] = pack4x8unorm(clamp(load(i), vec4<f32>(0.0), vec4<f32>(1.0)));
}
