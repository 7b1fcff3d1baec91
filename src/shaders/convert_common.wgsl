// Host frame conversion, shared part (docs/stream.md, "Colour conversion"): a
// stream's host frame (planar YUV at 8 to 16 bits, or RGB24) ↔ the RGBA frame
// the model's pre pass reads and its post pass writes (RGBA8, or RGBA16F for
// deeper streams). The host frame is an array of 32-bit words holding its
// bytes; 16-bit samples are little-endian and start at even byte offsets.

struct Params {
    width: u32,    // frame width of this side (the input frame, or the output frame)
    height: u32,   // frame height
    yuv: u32,      // 1: planar YUV; 0: RGB24
    wide: u32,     // 1: 16-bit samples (bits > 8)
    maxval: u32,   // 2^bits - 1
    half: u32,     // 2^(bits - 1)
    sub_x: u32,    // chroma subsampling shift across (0 or 1)
    sub_y: u32,    // chroma subsampling shift down (0 or 1)
    chroma: u32,   // 1: U and V planes (0: mono)
    alpha: u32,    // 1: an alpha plane after V
    chroma_w: u32, // chroma plane width and height in samples
    chroma_h: u32,
    u_off: u32,    // byte offsets of the U, V and A planes
    v_off: u32,
    a_off: u32,
    full: u32,     // 1: full range; 0: limited
    kr: u32,       // f32 bits: the matrix's Kr and Kb
    kb: u32,
    site_x: u32,   // f32 bits: where a chroma sample sits, in luma pixels (0.5 centred, 0 co-sited)
    site_y: u32,
    f16: u32,      // 1: the RGBA frame is RGBA16F (two words a pixel); 0: RGBA8 (one word)
    row: u32,      // work items per grid row (convert_out's linear numbering)
    bytes: u32,    // bytes of the host frame
}

var<immediate> p: Params;

fn kr() -> f32 {
    return bitcast<f32>(p.kr);
}

fn kb() -> f32 {
    return bitcast<f32>(p.kb);
}

// The scale of limited-range codes: 2^(bits - 8).
fn range_scale() -> f32 {
    return f32(p.half) / 128.0;
}
