// RGBA frame → host frame: one work item a 32-bit word of the host frame
// (four 8-bit samples or two 16-bit ones), numbered linearly over a 2D grid.

@group(0) @binding(0) var<storage, read> rgba: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

fn pixel(x: u32, y: u32) -> vec4<f32> {
    let i = y * p.width + x;
    var c: vec4<f32>;
    if p.f16 != 0u {
        c = vec4<f32>(unpack2x16float(rgba[2u * i]), unpack2x16float(rgba[2u * i + 1u]));
    } else {
        c = unpack4x8unorm(rgba[i]);
    }
    return clamp(c, vec4<f32>(0.0), vec4<f32>(1.0));
}

fn quantize(v: f32) -> u32 {
    return u32(clamp(floor(v + 0.5), 0.0, f32(p.maxval)));
}

fn luma_of(c: vec3<f32>) -> f32 {
    return kr() * c.x + (1.0 - kr() - kb()) * c.y + kb() * c.z;
}

fn code_luma(v: f32) -> u32 {
    if p.full != 0u {
        return quantize(f32(p.maxval) * v);
    }
    let s = range_scale();
    return quantize(16.0 * s + 219.0 * s * v);
}

fn code_chroma(v: f32) -> u32 {
    if p.full != 0u {
        return quantize(f32(p.half) + f32(p.maxval) * v);
    }
    let s = range_scale();
    return quantize(128.0 * s + 224.0 * s * v);
}

// Chroma sample (cx, cy): the mean colour of the pixels it covers. `which` 0: Cb, 1: Cr.
fn chroma_sample(cx: u32, cy: u32, which: u32) -> u32 {
    let x0 = cx << p.sub_x;
    let y0 = cy << p.sub_y;
    let x1 = min(x0 + (1u << p.sub_x), p.width);
    let y1 = min(y0 + (1u << p.sub_y), p.height);
    var sum = vec3<f32>(0.0);
    for (var y = y0; y < y1; y++) {
        for (var x = x0; x < x1; x++) {
            sum += pixel(x, y).xyz;
        }
    }
    let mean = sum / f32((x1 - x0) * (y1 - y0));
    let l = luma_of(mean);
    if which == 0u {
        return code_chroma((mean.z - l) / (2.0 * (1.0 - kb())));
    }
    return code_chroma((mean.x - l) / (2.0 * (1.0 - kr())));
}

// The sample at byte offset `o` of the host frame (its first byte for 16-bit samples).
fn sample_at(o: u32) -> u32 {
    if o >= p.bytes {
        return 0u;
    }
    if p.yuv == 0u {
        let px = o / 3u;
        let c = pixel(px % p.width, px / p.width);
        return quantize(255.0 * c[o % 3u]);
    }
    let size = 1u + p.wide;
    let luma_bytes = p.width * p.height * size;
    if o < luma_bytes {
        let i = o / size;
        return code_luma(luma_of(pixel(i % p.width, i / p.width).xyz));
    }
    if p.alpha != 0u && o >= p.a_off {
        let i = (o - p.a_off) / size;
        return quantize(f32(p.maxval) * pixel(i % p.width, i / p.width).w);
    }
    var which = 0u;
    var i = (o - p.u_off) / size;
    if o >= p.v_off {
        which = 1u;
        i = (o - p.v_off) / size;
    }
    return chroma_sample(i % p.chroma_w, i / p.chroma_w, which);
}

@compute @workgroup_size(64)
fn convert_out(@builtin(global_invocation_id) id: vec3<u32>) {
    let w = id.y * p.row + id.x;
    let o = 4u * w;
    if o >= p.bytes {
        return;
    }
    var word: u32;
    if p.wide != 0u {
        word = sample_at(o) | (sample_at(o + 2u) << 16u);
    } else {
        word = sample_at(o) | (sample_at(o + 1u) << 8u) | (sample_at(o + 2u) << 16u) | (sample_at(o + 3u) << 24u);
    }
    dst[w] = word;
}
