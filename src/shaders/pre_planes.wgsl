// Pre pass source: a planar frame, R, G and B in planes 0, 1 and 2 (a buffer
// each; a single plane is bound three times: grey), alpha 1, in the formats of
// planes_common.wgsl.

@group(0) @binding(0) var<storage, read> src0: array<u32>;
@group(0) @binding(3) var<storage, read> src1: array<u32>;
@group(0) @binding(4) var<storage, read> src2: array<u32>;

fn word(k: u32, w: u32) -> u32 {
    if k == 1u {
        return src1[w];
    }
    if k == 2u {
        return src2[w];
    }
    return src0[w];
}

fn load(i: u32) -> vec4<f32> {
    return plane_pixel(p.origin_x + i % p.width, p.origin_y + i / p.width);
}
