// Host frame → RGBA frame: one work item a pixel.

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> rgba: array<u32>;

fn byte_at(o: u32) -> u32 {
    return (src[o >> 2u] >> ((o & 3u) * 8u)) & 0xffu;
}

// Sample `i` of the plane at byte offset `off`.
fn sample(off: u32, i: u32) -> f32 {
    if p.wide != 0u {
        let o = off + 2u * i;
        return f32((src[o >> 2u] >> ((o & 2u) * 8u)) & 0xffffu);
    }
    return f32(byte_at(off + i));
}

// Chroma plane at `off` read for luma pixel (x, y): bilinear between the samples around it.
fn chroma_at(off: u32, x: u32, y: u32) -> f32 {
    var fx = f32(x);
    var fy = f32(y);
    if p.sub_x != 0u {
        fx = (fx - bitcast<f32>(p.site_x)) * 0.5;
    }
    if p.sub_y != 0u {
        fy = (fy - bitcast<f32>(p.site_y)) * 0.5;
    }
    let bx = floor(fx);
    let by = floor(fy);
    let tx = fx - bx;
    let ty = fy - by;
    let last_x = i32(p.chroma_w) - 1;
    let last_y = i32(p.chroma_h) - 1;
    let x0 = u32(clamp(i32(bx), 0, last_x));
    let x1 = u32(clamp(i32(bx) + 1, 0, last_x));
    let y0 = u32(clamp(i32(by), 0, last_y));
    let y1 = u32(clamp(i32(by) + 1, 0, last_y));
    let top = mix(sample(off, y0 * p.chroma_w + x0), sample(off, y0 * p.chroma_w + x1), tx);
    let bottom = mix(sample(off, y1 * p.chroma_w + x0), sample(off, y1 * p.chroma_w + x1), tx);
    return mix(top, bottom, ty);
}

fn yuv_pixel(x: u32, y: u32) -> vec4<f32> {
    let i = y * p.width + x;
    let m = f32(p.maxval);
    let s = range_scale();
    var luma = sample(0u, i);
    var cb = f32(p.half);
    var cr = f32(p.half);
    if p.chroma != 0u {
        cb = chroma_at(p.u_off, x, y);
        cr = chroma_at(p.v_off, x, y);
    }
    var yn: f32;
    var cbn: f32;
    var crn: f32;
    if p.full != 0u {
        yn = luma / m;
        cbn = (cb - f32(p.half)) / m;
        crn = (cr - f32(p.half)) / m;
    } else {
        yn = (luma - 16.0 * s) / (219.0 * s);
        cbn = (cb - 128.0 * s) / (224.0 * s);
        crn = (cr - 128.0 * s) / (224.0 * s);
    }
    if p.chroma == 0u {
        cbn = 0.0;
        crn = 0.0;
    }
    let r = yn + 2.0 * (1.0 - kr()) * crn;
    let b = yn + 2.0 * (1.0 - kb()) * cbn;
    let g = (yn - kr() * r - kb() * b) / (1.0 - kr() - kb());
    var a = 1.0;
    if p.alpha != 0u {
        a = sample(p.a_off, i) / m;
    }
    return clamp(vec4<f32>(r, g, b, a), vec4<f32>(0.0), vec4<f32>(1.0));
}

fn rgb24_pixel(x: u32, y: u32) -> vec4<f32> {
    let o = 3u * (y * p.width + x);
    return vec4<f32>(f32(byte_at(o)), f32(byte_at(o + 1u)), f32(byte_at(o + 2u)), 255.0) / 255.0;
}

@compute @workgroup_size(8, 8)
fn convert_in(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= p.width || id.y >= p.height {
        return;
    }
    var c: vec4<f32>;
    if p.yuv != 0u {
        c = yuv_pixel(id.x, id.y);
    } else {
        c = rgb24_pixel(id.x, id.y);
    }
    let i = id.y * p.width + id.x;
    if p.f16 != 0u {
        rgba[2u * i] = pack2x16float(c.xy);
        rgba[2u * i + 1u] = pack2x16float(c.zw);
    } else {
        rgba[i] = pack4x8unorm(c);
    }
}
