// Pre pass, shared part: the caller's frame (an image or a linear buffer; the
// source part defines `load`) → the model's input tensor in a storage buffer,
// and the frame's alpha into the slot's alpha buffer (one f32 per pixel), so
// that the post pass never reads the caller's input again.
// The tensor buffer is an array of 32-bit words whatever the element type:
// f32 elements are bitcast, f16 elements packed two to a word, u8 RGBA four.
// Work items are numbered linearly over a 2D grid: i = id.y * row + id.x.

struct Params {
    width: u32,   // frame width (model input W)
    height: u32,  // frame height (model input H)
    srgb: u32,    // image source: 1 when the view decodes sRGB (re-encode to the stored codes)
    row: u32,     // work items per grid row (dispatch width × 64)
    format: u32,  // buffer source: 0 RGBA8, 1 BGRA8, 2 RGBA16F
    pitch: u32,   // buffer source: row pitch in 32-bit words
}

var<immediate> p: Params;

@group(0) @binding(1) var<storage, read_write> tensor: array<u32>;
@group(0) @binding(2) var<storage, read_write> alpha: array<f32>;

// NCHW, 3 planes of f32: one work item per pixel.
@compute @workgroup_size(64)
fn pre_nchw_f32(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.y * p.row + id.x;
    let plane = p.width * p.height;
    if i >= plane {
        return;
    }
    let c = load(i);
    tensor[i] = bitcast<u32>(c.r);
    tensor[plane + i] = bitcast<u32>(c.g);
    tensor[2u * plane + i] = bitcast<u32>(c.b);
    alpha[i] = c.a;
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
// (a pair may straddle a row or plane boundary when W is odd). The items whose
// elements lie in the first plane also write those pixels' alpha.
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
    tensor[k] = pack2x16float(vec2<f32>(element(e, plane), hi));
    if e < plane {
        alpha[e] = load(e).a;
    }
    if e + 1u < plane {
        alpha[e + 1u] = load(e + 1u).a;
    }
}

// NHWC RGBA u8: one work item per pixel, one word each; alpha travels in the tensor.
@compute @workgroup_size(64)
fn pre_nhwc_u8(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.y * p.row + id.x;
    if i >= p.width * p.height {
        return;
    }
    tensor[i] = pack4x8unorm(clamp(load(i), vec4<f32>(0.0), vec4<f32>(1.0)));
}
