// Pre pass, shared part: the caller's frame (an image or a linear buffer; the
// source part defines `load`) → the model's input tensor in a storage buffer,
// and the frame's alpha into the slot's alpha buffer (one f32 per pixel), so
// that the post pass never reads the caller's input again.
// The tensor is described by the push constants: NCHW or NHWC, 1 to 4
// channels, RGB or BGR order, and t = x·mul[c] + add[c] for a colour value x
// in [0, 1] on tensor channel c. Element e of the tensor is pixel px, channel
// ch: NCHW e = ch·W·H + px, NHWC e = px·C + ch.
// The tensor buffer is an array of 32-bit words whatever the element type:
// f32 elements are bitcast, f16 elements packed two to a word, u8 four.
// Work items are numbered linearly over a 2D grid: i = id.y * row + id.x.

struct Params {
    width: u32,    // frame width (model input W)
    height: u32,   // frame height (model input H)
    srgb: u32,     // image source: 1 when the view decodes sRGB (re-encode to the stored codes)
    row: u32,      // work items per grid row (dispatch width × 64)
    format: u32,   // buffer source: 0 RGBA8, 1 BGRA8, 2 RGBA16F; planes: 3 f32, 4 f16, 5 u8
    pitch: u32,    // buffer source: row pitch in 32-bit words (planes: plane 0's)
    nhwc: u32,     // 1: [1, H, W, C]; 0: [1, C, H, W]
    channels: u32, // C, 1 to 4
    bgr: u32,      // 1: tensor channels 0 and 2 are the frame's B and R
    mul0: u32,     // f32 bits: t = x·mul + add, per tensor channel
    mul1: u32,
    mul2: u32,
    mul3: u32,
    add0: u32,
    add1: u32,
    add2: u32,
    add3: u32,
    alpha: u32,    // 1: write the frame's alpha (the frame's input); 0: an extra input, leave it
    origin_x: u32, // the tile's place in the caller's frame (0, 0 untiled)
    origin_y: u32,
    plane0: u32,   // planar source: where each plane starts in its buffer, in 32-bit words
    plane1: u32,
    plane2: u32,
    pitch1: u32,   // planar source: planes 1 and 2's row pitch in 32-bit words
    pitch2: u32,
}

var<immediate> p: Params;

@group(0) @binding(1) var<storage, read_write> tensor: array<u32>;
@group(0) @binding(2) var<storage, read_write> alpha: array<f32>;


// The frame's value that tensor channel ch of a pixel holds, normalised.
fn channel_value(c: vec4<f32>, ch: u32) -> f32 {
    var k = ch;
    if p.bgr != 0u && p.channels >= 3u && ch != 1u && ch < 3u {
        k = 2u - ch;
    }
    return c[k] * mul_of(ch) + add_of(ch);
}

// Tensor element e's value; the item that owns a pixel's channel 0 writes its alpha.
fn element(e: u32) -> f32 {
    let plane = p.width * p.height;
    var px = e % plane;
    var ch = e / plane;
    if p.nhwc != 0u {
        px = e / p.channels;
        ch = e % p.channels;
    }
    let c = load(px);
    if ch == 0u && p.alpha != 0u {
        alpha[px] = c.a;
    }
    return channel_value(c, ch);
}

// 32-bit floats: one work item per pixel, writing its C elements.
@compute @workgroup_size(64)
fn pre_f32(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.y * p.row + id.x;
    let plane = p.width * p.height;
    if i >= plane {
        return;
    }
    let c = load(i);
    for (var ch = 0u; ch < p.channels; ch++) {
        var e = ch * plane + i;
        if p.nhwc != 0u {
            e = i * p.channels + ch;
        }
        tensor[e] = bitcast<u32>(channel_value(c, ch));
    }
    if p.alpha != 0u {
        alpha[i] = c.a;
    }
}

// 16-bit floats: one work item per word, two consecutive elements (a pair may
// straddle a pixel, row or plane boundary).
@compute @workgroup_size(64)
fn pre_f16(@builtin(global_invocation_id) id: vec3<u32>) {
    let k = id.y * p.row + id.x;
    let n = p.channels * p.width * p.height;
    let e = 2u * k;
    if e >= n {
        return;
    }
    var hi = 0.0;
    if e + 1u < n {
        hi = element(e + 1u);
    }
    tensor[k] = pack2x16float(vec2<f32>(element(e), hi));
}

// 8-bit codes: one work item per word, four consecutive elements, each
// rounded and clamped to 0–255.
@compute @workgroup_size(64)
fn pre_u8(@builtin(global_invocation_id) id: vec3<u32>) {
    let k = id.y * p.row + id.x;
    let n = p.channels * p.width * p.height;
    let e = 4u * k;
    if e >= n {
        return;
    }
    var word = 0u;
    for (var j = 0u; j < 4u; j++) {
        if e + j < n {
            let v = u32(clamp(round(element(e + j)), 0.0, 255.0));
            word |= v << (8u * j);
        }
    }
    tensor[k] = word;
}
