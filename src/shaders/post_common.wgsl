// Post pass, shared part: the model's output tensor (array of 32-bit words, as
// in pre_common.wgsl, described by the same push constants: layout, channels,
// order and x = (t − add) / mul) → the caller's output (an image or a linear
// buffer; the target part defines `store`). Models of 3 channels get the
// frame's alpha from the slot's alpha buffer (written by the pre pass),
// upscaled bilinearly; models of 4 give their own; 1 channel is grey.

struct Params {
    width: u32,      // input frame width
    height: u32,     // input frame height
    out_width: u32,  // output width (width × scale)
    out_height: u32, // output height
    format: u32,     // buffer target: 0 RGBA8, 1 BGRA8, 2 RGBA16F; planes: 3 f32, 4 f16, 5 u8
    pitch: u32,      // buffer target: row pitch in 32-bit words (planes: plane 0's)
    nhwc: u32,       // 1: [1, H, W, C]; 0: [1, C, H, W]
    channels: u32,   // C: 1, 3 or 4
    bgr: u32,        // 1: tensor channels 0 and 2 are B and R
    mul0: u32,       // f32 bits: t = x·mul + add, per tensor channel
    mul1: u32,
    mul2: u32,
    mul3: u32,
    add0: u32,
    add1: u32,
    add2: u32,
    add3: u32,
    origin_x: u32,   // the tile's place in the caller's output, in output pixels (0, 0 untiled)
    origin_y: u32,
    blend_left: u32, // output pixels this tile shares with the tile to its left (already written)
    blend_top: u32,  // ... and with the tiles above it
    blend_right: u32,  // ... with the tile to its right (written later)
    blend_bottom: u32, // ... and with the tiles below it
    margin_x: u32,     // output pixels at each end of a shared strip that blending ignores (the overlap)
    margin_y: u32,
    plane0: u32,       // planar target: where each plane starts in its buffer, in 32-bit words
    plane1: u32,
    plane2: u32,
    pitch1: u32,       // planar target: planes 1 and 2's row pitch in 32-bit words
    pitch2: u32,
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


// The later tile's weight at x in a strip of `strip` pixels shared by two tiles
// (x counted from the strip's start): 0 over its outer `margin` pixels (too little
// context there), 1 over the earlier tile's outer `margin`, a linear ramp between.
// 1 past the strip.
fn ramp(x: i32, strip: u32, margin: u32) -> f32 {
    if x >= i32(strip) {
        return 1.0;
    }
    if x < 0 {
        return 0.0;
    }
    return clamp((f32(x) + 0.5 - f32(margin)) / f32(strip - 2u * margin), 0.0, 1.0);
}

// Writes tile pixel (x, y) into the caller's output at the tile's place. A tile's
// weight is l·(1 − r) across x times t·(1 − b) across y, where l and t are its
// ramps over the strips it shares with the tiles to its left and above, r and b
// its right and lower neighbours' ramps: the weights of the tiles over a pixel
// sum to 1. Tiles come in raster order, so the tiles up to this one hold
// (1 − t) + t·(1 − b)·(1 − r) of a pixel's weight (every tile of the rows above,
// and this row's up to this one): this tile blends over what they wrote with
// its own weight over that, which leaves each tile its weight in the end.
fn blended(x: u32, y: u32, c: vec4<f32>) -> vec4<f32> {
    let l = ramp(i32(x), p.blend_left, p.margin_x);
    let t = ramp(i32(y), p.blend_top, p.margin_y);
    let r = ramp(i32(x) - i32(p.out_width - p.blend_right), p.blend_right, p.margin_x) * f32(p.blend_right > 0u);
    let b = ramp(i32(y) - i32(p.out_height - p.blend_bottom), p.blend_bottom, p.margin_y) * f32(p.blend_bottom > 0u);
    let own = l * (1.0 - r) * t * (1.0 - b);
    let so_far = (1.0 - t) + t * (1.0 - b) * (1.0 - r);
    var w = 1.0;
    if so_far > 1e-6 {
        w = own / so_far;
    }
    if w < 1.0 {
        return mix(load_prev(p.origin_x + x, p.origin_y + y), c, w);
    }
    return c;
}

// The tensor element index of output pixel i, channel ch.
fn index(i: u32, ch: u32) -> u32 {
    if p.nhwc != 0u {
        return i * p.channels + ch;
    }
    return ch * p.out_width * p.out_height + i;
}

// The output pixel from its channels' raw values t (in tensor order): colour
// values x = (t − add) / mul in frame order (RGBA).
fn pixel(t: vec4<f32>, x: u32, y: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    for (var ch = 0u; ch < 4u; ch++) {
        v[ch] = (t[ch] - add_of(ch)) / mul_of(ch);
    }
    if p.channels == 1u {
        v = vec4<f32>(v.x, v.x, v.x, 1.0);
    }
    if p.bgr != 0u {
        v = v.zyxw;
    }
    if p.channels < 4u {
        v.w = alpha_at(x, y);
    }
    return v;
}

fn half_at(e: u32) -> f32 {
    let pair = unpack2x16float(tensor[e / 2u]);
    return select(pair.x, pair.y, (e & 1u) == 1u);
}

// Tile pixel (x, y) as written: its channels read from a tensor of `element`s (0 f32,
// 1 f16, 2 u8), as colour values, blended over what earlier tiles wrote.
fn value(x: u32, y: u32, element: u32) -> vec4<f32> {
    let i = y * p.out_width + x;
    var t = vec4<f32>(0.0);
    for (var ch = 0u; ch < p.channels; ch++) {
        let e = index(i, ch);
        if element == 0u {
            t[ch] = bitcast<f32>(tensor[e]);
        } else if element == 1u {
            t[ch] = half_at(e);
        } else {
            t[ch] = f32((tensor[e / 4u] >> (8u * (e % 4u))) & 0xffu);
        }
    }
    return blended(x, y, pixel(t, x, y));
}

// Writes tile pixel (x, y) into the caller's output at the tile's place. Where pixels
// share a word of the output (`group` > 1: planes of halves, two to a word, or of bytes,
// four), the item of a word's first pixel in the tile writes the word's pixels of the tile;
// the pixels of the word outside the tile are kept.
fn emit(x: u32, y: u32, element: u32) {
    if x >= p.out_width || y >= p.out_height {
        return;
    }
    let gx = p.origin_x + x;
    let gy = p.origin_y + y;
    let g = group();
    if g == 1u {
        store(gx, gy, value(x, y, element));
        return;
    }
    if x != 0u && gx % g != 0u {
        return; // the word's first pixel in this tile writes it
    }
    let n = min(g - gx % g, p.out_width - x);
    var v: array<vec4<f32>, 4>;
    for (var i = 0u; i < n; i++) {
        v[i] = value(x + i, y, element);
    }
    store_word(gx, gy, v, n);
}

@compute @workgroup_size(8, 8)
fn post_f32(@builtin(global_invocation_id) id: vec3<u32>) {
    emit(id.x, id.y, 0u);
}

@compute @workgroup_size(8, 8)
fn post_f16(@builtin(global_invocation_id) id: vec3<u32>) {
    emit(id.x, id.y, 1u);
}

@compute @workgroup_size(8, 8)
fn post_u8(@builtin(global_invocation_id) id: vec3<u32>) {
    emit(id.x, id.y, 2u);
}
