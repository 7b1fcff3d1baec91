// The pre and post passes as CUDA kernels (`CudaOptions::cuda_passes`, the CUDA
// backend's default): the same conversions as src/shaders/pre_*.wgsl and
// post_*.wgsl, for whole frames and tiles, reading and writing either images
// imported into CUDA as arrays with surface access, or linear buffers (device
// pointers, rows `pitch` bytes apart). They run on the model's streams, so no
// Vulkan work and no semaphore stands between them and the model.
//
// Compiled to PTX by scripts/cuda_passes.py (NVRTC 13.0 from PyPI, virtual
// architecture compute_75, no headers); the PTX is committed beside this file
// as passes.ptx and checked against it in CI. Edit this file, then run
// `python3 scripts/cuda_passes.py` to regenerate it.
//
// Surfaces are read and written as raw texels: RGBA8 and BGRA8 (unorm or sRGB:
// the 8-bit codes, as the Vulkan pre pass recovers them), RGBA16F (four
// halves), and for extra inputs R16F, R32F, RG16F, RG32F and RGBA32F (a
// channel the format lacks reads as 0, alpha as 1, as a sampled image gives
// it). Buffers hold RGBA8, BGRA8 (one word a pixel) or RGBA16F (two). Tensor
// element e of pixel px, channel ch: NCHW e = ch·W·H + px, NHWC e = px·C + ch;
// t = x·mul[ch] + add[ch] for a colour value x in [0, 1].

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long long u64;

// Image and buffer formats (SurfaceFormat in params.rs).
#define FORMAT_RGBA8 0u
#define FORMAT_BGRA8 1u
#define FORMAT_RGBA16F 2u
#define FORMAT_R16F 3u
#define FORMAT_R32F 4u
#define FORMAT_RG16F 5u
#define FORMAT_RG32F 6u
#define FORMAT_RGBA32F 7u
#define FORMAT_R8 8u
// How a pass reaches the caller's memory (Access in params.rs).
#define ACCESS_SURFACE 0u
#define ACCESS_BUFFER 1u
#define ACCESS_PLANES 2u
// Tensor element types.
#define ELEMENT_F32 0u
#define ELEMENT_F16 1u
#define ELEMENT_U8 2u

struct Tensor {
    u64 data;     // device pointer to the tensor
    u32 element;  // ELEMENT_*
    u32 nhwc;     // 1: [1, H, W, C]; 0: [1, C, H, W]
    u32 channels; // C, 1 to 4
    u32 bgr;      // 1: tensor channels 0 and 2 are B and R
    float mul[4];
    float add[4];
};

struct PreParams {
    u64 source;   // CUsurfObject (ACCESS_SURFACE) or device pointer (ACCESS_BUFFER)
    u64 alpha;    // device pointer: one f32 per tensor pixel (the frame's alpha), or 0
    u32 width;    // tensor (tile) width
    u32 height;
    u32 format;   // FORMAT_*
    u32 kind;     // ACCESS_*
    u32 pitch;    // buffer: bytes from one row to the next
    u32 origin_x; // the tile's place in the source (0, 0 untiled)
    u32 origin_y;
    u32 tag;      // non-zero: a pixel whose alpha is not 1 writes it to alpha[width * height]
    Tensor t;
    u64 plane1;   // ACCESS_PLANES: planes 1 and 2 (plane 0 is `source`), device pointers
    u64 plane2;
    u32 pitch1;   // ACCESS_PLANES: planes 1 and 2's row pitch in bytes (plane 0's is `pitch`)
    u32 pitch2;
};

struct PostParams {
    u64 target;   // CUsurfObject (ACCESS_SURFACE) or device pointer (ACCESS_BUFFER)
    u64 alpha;    // device pointer: the pre pass's alpha (width × height), or 0 (alpha 1)
    u32 width;    // tensor input (tile) width
    u32 height;
    u32 out_width;  // tensor output (tile) width
    u32 out_height;
    u32 format;   // FORMAT_RGBA8, FORMAT_BGRA8 (buffers) or FORMAT_RGBA16F
    u32 kind;     // ACCESS_*
    u32 pitch;    // buffer: bytes from one row to the next
    u32 origin_x; // the tile's place in the output, output pixels (0, 0 untiled)
    u32 origin_y;
    u32 blend_left;   // output pixels this tile shares with the tile to its left (written before)
    u32 blend_top;    // ... and with the tiles above it
    u32 blend_right;  // ... with the tile to its right (written later)
    u32 blend_bottom; // ... and with the tiles below it
    u32 margin_x;     // output pixels at each end of a shared strip that blending ignores
    u32 margin_y;
    u32 tag;          // non-zero: the frame is opaque (alpha 1 everywhere) unless alpha[width * height] == tag
    Tensor t;
    u64 plane1;       // ACCESS_PLANES: planes 1 and 2 (plane 0 is `target`), device pointers
    u64 plane2;
    u32 pitch1;       // ACCESS_PLANES: planes 1 and 2's row pitch in bytes (plane 0's is `pitch`)
    u32 pitch2;
};

__device__ __forceinline__ float half_to_float(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ u16 float_to_half(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ float4 unpack_rgba8(u32 w, u32 format) {
    float4 c = make_float4((w & 0xffu) / 255.0f, ((w >> 8) & 0xffu) / 255.0f, ((w >> 16) & 0xffu) / 255.0f,
                           (w >> 24) / 255.0f);
    if (format == FORMAT_BGRA8) {
        float s = c.x;
        c.x = c.z;
        c.z = s;
    }
    return c;
}

__device__ __forceinline__ float bits_to_float(u32 b) {
    return __int_as_float((int)b);
}

__device__ __forceinline__ float4 load_surface(u64 surface, u32 format, u32 x, u32 y) {
    switch (format) {
    case FORMAT_RGBA16F: {
        u16 r, g, b, a;
        asm volatile("suld.b.2d.v4.b16.clamp {%0, %1, %2, %3}, [%4, {%5, %6}];"
                     : "=h"(r), "=h"(g), "=h"(b), "=h"(a)
                     : "l"(surface), "r"(x * 8u), "r"(y));
        return make_float4(half_to_float(r), half_to_float(g), half_to_float(b), half_to_float(a));
    }
    case FORMAT_R16F: {
        u16 r;
        asm volatile("suld.b.2d.b16.clamp %0, [%1, {%2, %3}];" : "=h"(r) : "l"(surface), "r"(x * 2u), "r"(y));
        return make_float4(half_to_float(r), 0.0f, 0.0f, 1.0f);
    }
    case FORMAT_R32F: {
        u32 r;
        asm volatile("suld.b.2d.b32.clamp %0, [%1, {%2, %3}];" : "=r"(r) : "l"(surface), "r"(x * 4u), "r"(y));
        return make_float4(bits_to_float(r), 0.0f, 0.0f, 1.0f);
    }
    case FORMAT_RG16F: {
        u16 r, g;
        asm volatile("suld.b.2d.v2.b16.clamp {%0, %1}, [%2, {%3, %4}];"
                     : "=h"(r), "=h"(g)
                     : "l"(surface), "r"(x * 4u), "r"(y));
        return make_float4(half_to_float(r), half_to_float(g), 0.0f, 1.0f);
    }
    case FORMAT_RG32F: {
        u32 r, g;
        asm volatile("suld.b.2d.v2.b32.clamp {%0, %1}, [%2, {%3, %4}];"
                     : "=r"(r), "=r"(g)
                     : "l"(surface), "r"(x * 8u), "r"(y));
        return make_float4(bits_to_float(r), bits_to_float(g), 0.0f, 1.0f);
    }
    case FORMAT_RGBA32F: {
        u32 r, g, b, a;
        asm volatile("suld.b.2d.v4.b32.clamp {%0, %1, %2, %3}, [%4, {%5, %6}];"
                     : "=r"(r), "=r"(g), "=r"(b), "=r"(a)
                     : "l"(surface), "r"(x * 16u), "r"(y));
        return make_float4(bits_to_float(r), bits_to_float(g), bits_to_float(b), bits_to_float(a));
    }
    default: {
        u32 r, g, b, a;
        asm volatile("suld.b.2d.v4.b8.clamp {%0, %1, %2, %3}, [%4, {%5, %6}];"
                     : "=r"(r), "=r"(g), "=r"(b), "=r"(a)
                     : "l"(surface), "r"(x * 4u), "r"(y));
        return unpack_rgba8((r & 0xffu) | ((g & 0xffu) << 8) | ((b & 0xffu) << 16) | ((a & 0xffu) << 24), format);
    }
    }
}

// A linear buffer's pixel (x, y): RGBA8/BGRA8 one word, RGBA16F two, as pre_buffer.wgsl reads them.
__device__ __forceinline__ float4 load_buffer(u64 data, u32 format, u32 pitch, u32 x, u32 y) {
    const u8* row = reinterpret_cast<const u8*>(data) + (u64)y * pitch;
    if (format == FORMAT_RGBA16F) {
        const u16* h = reinterpret_cast<const u16*>(row) + 4u * x;
        return make_float4(half_to_float(h[0]), half_to_float(h[1]), half_to_float(h[2]), half_to_float(h[3]));
    }
    return unpack_rgba8(reinterpret_cast<const u32*>(row)[x], format);
}

// Plane k's row y: planes 0, 1 and 2 hold R, G and B (one plane: its pointers given three times).
__device__ __forceinline__ u8* plane_row(u64 p0, u64 p1, u64 p2, u32 pitch0, u32 pitch1, u32 pitch2, u32 k, u32 y) {
    u64 base = k == 0u ? p0 : k == 1u ? p1 : p2;
    u32 pitch = k == 0u ? pitch0 : k == 1u ? pitch1 : pitch2;
    return reinterpret_cast<u8*>(base) + (u64)y * pitch;
}

// Pixel (x, y) of planes of floats (FORMAT_R32F), halves (FORMAT_R16F) or unorm bytes
// (FORMAT_R8), alpha 1, as pre_planes.wgsl reads them.
__device__ __forceinline__ float4 load_planes(u64 p0, u64 p1, u64 p2, u32 pitch0, u32 pitch1, u32 pitch2, u32 format,
                                              u32 x, u32 y) {
    float v[3];
#pragma unroll
    for (u32 k = 0; k < 3u; k++) {
        const u8* row = plane_row(p0, p1, p2, pitch0, pitch1, pitch2, k, y);
        v[k] = format == FORMAT_R16F ? half_to_float(reinterpret_cast<const u16*>(row)[x])
               : format == FORMAT_R8 ? (float)row[x] / 255.0f
                                     : reinterpret_cast<const float*>(row)[x];
    }
    return make_float4(v[0], v[1], v[2], 1.0f);
}

__device__ __forceinline__ float4 load_texel(u64 source, u32 kind, u32 format, u32 pitch, u32 x, u32 y) {
    if (kind == ACCESS_BUFFER) {
        return load_buffer(source, format, pitch, x, y);
    }
    return load_surface(source, format, x, y);
}

__device__ __forceinline__ u32 to_code(float v) {
    return __float2uint_rn(fminf(fmaxf(v, 0.0f), 1.0f) * 255.0f);
}

// As pack4x8unorm: floor(0.5 + 255 · clamp(v, 0, 1)).
__device__ __forceinline__ u32 pack_code(float v) {
    return (u32)floorf(0.5f + 255.0f * fminf(fmaxf(v, 0.0f), 1.0f));
}

__device__ __forceinline__ void store_surface(const PostParams& p, u32 x, u32 y, float4 c);

__device__ __forceinline__ void store_texel(const PostParams& p, u32 x, u32 y, float4 c) {
    if (p.kind == ACCESS_PLANES) {
        // As post_planes.wgsl: R, G and B into planes 0, 1 and 2, as the model gave them
        // (bytes: clamped, ×255, rounded).
        float v[3] = {c.x, c.y, c.z};
#pragma unroll
        for (u32 k = 0; k < 3u; k++) {
            u8* row = plane_row(p.target, p.plane1, p.plane2, p.pitch, p.pitch1, p.pitch2, k, y);
            if (p.format == FORMAT_R16F) {
                reinterpret_cast<u16*>(row)[x] = float_to_half(v[k]);
            } else if (p.format == FORMAT_R8) {
                row[x] = (u8)pack_code(v[k]);
            } else {
                reinterpret_cast<float*>(row)[x] = v[k];
            }
        }
        return;
    }
    if (p.kind == ACCESS_BUFFER) {
        u8* row = reinterpret_cast<u8*>(p.target) + (u64)y * p.pitch;
        if (p.format == FORMAT_RGBA16F) {
            // As post_buffer.wgsl: stored as the model gave them, no clamp.
            u16* h = reinterpret_cast<u16*>(row) + 4u * x;
            h[0] = float_to_half(c.x);
            h[1] = float_to_half(c.y);
            h[2] = float_to_half(c.z);
            h[3] = float_to_half(c.w);
            return;
        }
        if (p.format == FORMAT_BGRA8) {
            float s = c.x;
            c.x = c.z;
            c.z = s;
        }
        reinterpret_cast<u32*>(row)[x] =
            pack_code(c.x) | (pack_code(c.y) << 8) | (pack_code(c.z) << 16) | (pack_code(c.w) << 24);
        return;
    }
    store_surface(p, x, y, c);
}

// An image's texel, through its surface.
__device__ __forceinline__ void store_surface(const PostParams& p, u32 x, u32 y, float4 c) {
    if (p.format == FORMAT_RGBA16F) {
        // As the Vulkan pass: no clamp (a half-float output may carry values above 1).
        asm volatile("sust.b.2d.v4.b16.clamp [%0, {%1, %2}], {%3, %4, %5, %6};"
                     :
                     : "l"(p.target), "r"(x * 8u), "r"(y), "h"(float_to_half(c.x)), "h"(float_to_half(c.y)),
                       "h"(float_to_half(c.z)), "h"(float_to_half(c.w))
                     : "memory");
        return;
    }
    if (p.format == FORMAT_BGRA8) {
        // Not an output image format today (OUTPUT_IMAGE_FORMATS), but stored in its order if it comes.
        float s = c.x;
        c.x = c.z;
        c.z = s;
    }
    asm volatile("sust.b.2d.v4.b8.clamp [%0, {%1, %2}], {%3, %4, %5, %6};"
                 :
                 : "l"(p.target), "r"(x * 4u), "r"(y), "r"(to_code(c.x)), "r"(to_code(c.y)), "r"(to_code(c.z)),
                   "r"(to_code(c.w))
                 : "memory");
}

__device__ __forceinline__ float component(float4 c, u32 k) {
    return k == 0u ? c.x : k == 1u ? c.y : k == 2u ? c.z : c.w;
}

__device__ __forceinline__ u32 element_index(const Tensor& t, u32 px, u32 ch, u32 plane) {
    return t.nhwc != 0u ? px * t.channels + ch : ch * plane + px;
}

#ifndef NF_SM80  // the passes_sm80.ptx program (conv_mma.cu) takes the helpers alone
extern "C" __global__ void nf_pre(PreParams p) {
    u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= p.width || y >= p.height) {
        return;
    }
    u32 px = y * p.width + x;
    u32 plane = p.width * p.height;
    float4 c = p.kind == ACCESS_PLANES ? load_planes(p.source, p.plane1, p.plane2, p.pitch, p.pitch1, p.pitch2, p.format,
                                                     p.origin_x + x, p.origin_y + y)
                                       : load_texel(p.source, p.kind, p.format, p.pitch, p.origin_x + x, p.origin_y + y);
#pragma unroll
    for (u32 ch = 0u; ch < 4u; ch++) {
        if (ch >= p.t.channels) {
            break;
        }
        u32 k = ch;
        if (p.t.bgr != 0u && p.t.channels >= 3u && ch != 1u && ch < 3u) {
            k = 2u - ch;
        }
        float v = component(c, k) * p.t.mul[ch] + p.t.add[ch];
        u32 e = element_index(p.t, px, ch, plane);
        if (p.t.element == ELEMENT_F32) {
            reinterpret_cast<float*>(p.t.data)[e] = v;
        } else if (p.t.element == ELEMENT_F16) {
            reinterpret_cast<u16*>(p.t.data)[e] = float_to_half(v);
        } else {
            reinterpret_cast<u8*>(p.t.data)[e] = (u8)__float2uint_rn(fminf(fmaxf(rintf(v), 0.0f), 255.0f));
        }
    }
    if (p.alpha != 0ull) {
        reinterpret_cast<float*>(p.alpha)[px] = c.w;
        // Not opaque: said in the word after the alpha, with this frame's tag (every such pixel
        // writes the same value; nothing resets it: another frame's tag means opaque).
        if (c.w != 1.0f && p.tag != 0u) {
            reinterpret_cast<u32*>(p.alpha)[plane] = p.tag;
        }
    }
}
#endif

__device__ __forceinline__ float alpha_px(const PostParams& p, u32 x, u32 y) {
    if (p.alpha == 0ull) {
        return 1.0f;
    }
    return reinterpret_cast<const float*>(p.alpha)[y * p.width + x];
}

// Whether the frame is known opaque: its pre kernel ran with this tag and no pixel wrote it.
// The bilinear of alpha 1 everywhere is exactly 1: skipping it changes no output.
__device__ __forceinline__ bool opaque(const PostParams& p) {
    return p.alpha == 0ull ||
           (p.tag != 0u && reinterpret_cast<const u32*>(p.alpha)[p.width * p.height] != p.tag);
}

// Bilinear, sample centres aligned (align_corners = false), edges clamped: as alpha_at in post_common.wgsl.
__device__ float alpha_at(const PostParams& p, u32 x, u32 y) {
    float sx = ((float)x + 0.5f) * (float)p.width / (float)p.out_width - 0.5f;
    float sy = ((float)y + 0.5f) * (float)p.height / (float)p.out_height - 0.5f;
    float fx = fminf(fmaxf(sx, 0.0f), (float)(p.width - 1u));
    float fy = fminf(fmaxf(sy, 0.0f), (float)(p.height - 1u));
    u32 x0 = (u32)floorf(fx);
    u32 y0 = (u32)floorf(fy);
    u32 x1 = min(x0 + 1u, p.width - 1u);
    u32 y1 = min(y0 + 1u, p.height - 1u);
    float tx = fx - (float)x0;
    float ty = fy - (float)y0;
    float top = alpha_px(p, x0, y0) + (alpha_px(p, x1, y0) - alpha_px(p, x0, y0)) * tx;
    float bottom = alpha_px(p, x0, y1) + (alpha_px(p, x1, y1) - alpha_px(p, x0, y1)) * tx;
    return top + (bottom - top) * ty;
}

// The later tile's weight at x in a strip of `strip` pixels shared by two tiles
// (x counted from the strip's start): 0 over its outer `margin` pixels, 1 over
// the earlier tile's outer `margin`, a linear ramp between; 1 past the strip.
// As ramp() in post_common.wgsl.
__device__ __forceinline__ float ramp(int x, u32 strip, u32 margin) {
    if (x >= (int)strip) {
        return 1.0f;
    }
    if (x < 0) {
        return 0.0f;
    }
    return fminf(fmaxf(((float)x + 0.5f - (float)margin) / (float)(strip - 2u * margin), 0.0f), 1.0f);
}

// What an earlier tile wrote at (x, y) of the output, for blending.
__device__ __forceinline__ float4 load_prev(const PostParams& p, u32 x, u32 y) {
    if (p.kind == ACCESS_PLANES) {
        return load_planes(p.target, p.plane1, p.plane2, p.pitch, p.pitch1, p.pitch2, p.format, x, y);
    }
    if (p.kind == ACCESS_BUFFER) {
        return load_buffer(p.target, p.format, p.pitch, x, y);
    }
    return load_surface(p.target, p.format, x, y);
}

__device__ __forceinline__ float4 mix4(float4 a, float4 b, float w) {
    return make_float4(a.x * (1.0f - w) + b.x * w, a.y * (1.0f - w) + b.y * w, a.z * (1.0f - w) + b.z * w,
                       a.w * (1.0f - w) + b.w * w);
}

// Writes tile pixel (x, y) at the tile's place, blended over the tiles written
// before it as put() in post_common.wgsl does; untiled frames store directly.
__device__ __forceinline__ void put(const PostParams& p, u32 x, u32 y, float4 c) {
    u32 gx = p.origin_x + x;
    u32 gy = p.origin_y + y;
    if ((p.blend_left | p.blend_top | p.blend_right | p.blend_bottom) == 0u) {
        store_texel(p, gx, gy, c);
        return;
    }
    float l = ramp((int)x, p.blend_left, p.margin_x);
    float t = ramp((int)y, p.blend_top, p.margin_y);
    float r = p.blend_right > 0u ? ramp((int)x - (int)(p.out_width - p.blend_right), p.blend_right, p.margin_x) : 0.0f;
    float b =
        p.blend_bottom > 0u ? ramp((int)y - (int)(p.out_height - p.blend_bottom), p.blend_bottom, p.margin_y) : 0.0f;
    float own = l * (1.0f - r) * t * (1.0f - b);
    float so_far = (1.0f - t) + t * (1.0f - b) * (1.0f - r);
    float w = 1.0f;
    if (so_far > 1e-6f) {
        w = own / so_far;
    }
    if (w < 1.0f) {
        store_texel(p, gx, gy, mix4(load_prev(p, gx, gy), c, w));
    } else {
        store_texel(p, gx, gy, c);
    }
}

// The colour of one output pixel from its tensor values t[ch] (0 for a channel the tensor
// lacks), as pixel() in post_common.wgsl.
__device__ __forceinline__ float4 post_color(const PostParams& p, u32 x, u32 y, const float* t, bool known_opaque) {
    // A channel the tensor lacks has t = 0 and still maps through its (t − add) / mul (with 2
    // channels, blue is −add[2] / mul[2]).
    float v[4];
#pragma unroll
    for (u32 ch = 0u; ch < 4u; ch++) {
        v[ch] = (t[ch] - p.t.add[ch]) * __frcp_rn(p.t.mul[ch]);
    }
    float4 c = make_float4(v[0], v[1], v[2], v[3]);
    if (p.t.channels == 1u) {
        c = make_float4(v[0], v[0], v[0], 1.0f);
    }
    if (p.t.bgr != 0u) {
        float s = c.x;
        c.x = c.z;
        c.z = s;
    }
    if (p.t.channels < 4u) {
        c.w = known_opaque ? 1.0f : alpha_at(p, x, y);
    }
    return c;
}

// The post pass for one output pixel from its tensor values t[ch]. GENERAL: any target and
// tiles; otherwise an image through its surface, untiled (the common case, with fewer
// registers).
template <bool GENERAL>
__device__ __forceinline__ void post_values(const PostParams& p, u32 x, u32 y, const float* t, bool known_opaque) {
    float4 c = post_color(p, x, y, t, known_opaque);
    if (GENERAL) {
        put(p, x, y, c);
    } else {
        store_surface(p, x, y, c);
    }
}

// Texels x .. x + 3 of row y of an RGBA8 image (x a multiple of 4, x + 3 inside) in one 16-byte
// store (sust.b's x is a byte offset, and its size the operand's): each as store_surface
// writes it.
__device__ __forceinline__ void store_surface4_rgba8(const PostParams& p, u32 x, u32 y, const float4* c) {
    u32 w[4];
#pragma unroll
    for (u32 k = 0u; k < 4u; k++) {
        w[k] = to_code(c[k].x) | (to_code(c[k].y) << 8) | (to_code(c[k].z) << 16) | (to_code(c[k].w) << 24);
    }
    asm volatile("sust.b.2d.v4.b32.clamp [%0, {%1, %2}], {%3, %4, %5, %6};"
                 :
                 : "l"(p.target), "r"(x * 4u), "r"(y), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
}

// The post pass for one output pixel, its tensor values read one by one.
template <bool GENERAL>
__device__ __forceinline__ void post_pixel(const PostParams& p, u32 x, u32 y, bool known_opaque) {
    u32 px = y * p.out_width + x;
    u32 plane = p.out_width * p.out_height;
    float t[4];
#pragma unroll
    for (u32 ch = 0u; ch < 4u; ch++) {
        t[ch] = 0.0f;
        if (ch < p.t.channels) {
            u32 e = element_index(p.t, px, ch, plane);
            if (p.t.element == ELEMENT_F32) {
                t[ch] = reinterpret_cast<const float*>(p.t.data)[e];
            } else if (p.t.element == ELEMENT_F16) {
                t[ch] = half_to_float(reinterpret_cast<const u16*>(p.t.data)[e]);
            } else {
                t[ch] = (float)reinterpret_cast<const u8*>(p.t.data)[e];
            }
        }
    }
    post_values<GENERAL>(p, x, y, t, known_opaque);
}

// Every output pixel, whatever the grid (a grid-stride loop in both directions).
// The grid is a block for each 32 × 8 pixels: on the H200 fewer, longer-lived
// blocks beside the next frame's model cost it more (README, "Measured").
template <bool GENERAL>
__device__ __forceinline__ void post(const PostParams& p) {
    const bool known_opaque = opaque(p);
    for (u32 y = blockIdx.y * blockDim.y + threadIdx.y; y < p.out_height; y += gridDim.y * blockDim.y) {
        for (u32 x = blockIdx.x * blockDim.x + threadIdx.x; x < p.out_width; x += gridDim.x * blockDim.x) {
            post_pixel<GENERAL>(p, x, y, known_opaque);
        }
    }
}

#ifndef NF_SM80  // the passes_sm80.ptx program (conv_mma.cu) takes the helpers alone
extern "C" __global__ void nf_post(PostParams p) {
    post<true>(p);
}
#endif

__device__ __forceinline__ float element_value(u16 v) {
    return half_to_float(v);
}

__device__ __forceinline__ float element_value(float v) {
    return v;
}

__device__ __forceinline__ float element_value(u8 v) {
    return (float)v;
}

// Four pixels of row y, a block's width apart from x0, from a tensor of T: every load is
// issued before the first value is used (indices clamped into the tensor, so that no load
// waits on a branch; what a clamped load read is then dropped), then each pixel is written.
template <typename T>
__device__ __forceinline__ void post4(const PostParams& p, u32 x0, u32 y, u32 plane, bool known_opaque) {
    const T* data = reinterpret_cast<const T*>(p.t.data);
    T raw[4][4];
#pragma unroll
    for (u32 k = 0u; k < 4u; k++) {
        const u32 px = y * p.out_width + min(x0 + blockDim.x * k, p.out_width - 1u);
#pragma unroll
        for (u32 ch = 0u; ch < 4u; ch++) {
            raw[k][ch] = data[element_index(p.t, px, min(ch, p.t.channels - 1u), plane)];
        }
    }
#pragma unroll
    for (u32 k = 0u; k < 4u; k++) {
        const u32 x = x0 + blockDim.x * k;
        float t[4];
#pragma unroll
        for (u32 ch = 0u; ch < 4u; ch++) {
            t[ch] = ch < p.t.channels ? element_value(raw[k][ch]) : 0.0f;
        }
        if (x < p.out_width) {
            post_values<false>(p, x, y, t, known_opaque);
        }
    }
}

// Four neighbouring pixels x0 .. x0 + 3 of row y into an RGBA8 image, from a tensor of T: the
// loads first (indices clamped as post4's), then one 16-byte store where all four are inside
// (a texel a store at the row's end).
template <typename T>
__device__ __forceinline__ void post4_rgba8(const PostParams& p, u32 x0, u32 y, u32 plane, bool known_opaque) {
    const T* data = reinterpret_cast<const T*>(p.t.data);
    T raw[4][4];
#pragma unroll
    for (u32 k = 0u; k < 4u; k++) {
        const u32 px = y * p.out_width + min(x0 + k, p.out_width - 1u);
#pragma unroll
        for (u32 ch = 0u; ch < 4u; ch++) {
            raw[k][ch] = data[element_index(p.t, px, min(ch, p.t.channels - 1u), plane)];
        }
    }
    float4 c[4];
#pragma unroll
    for (u32 k = 0u; k < 4u; k++) {
        float t[4];
#pragma unroll
        for (u32 ch = 0u; ch < 4u; ch++) {
            t[ch] = ch < p.t.channels ? element_value(raw[k][ch]) : 0.0f;
        }
        c[k] = post_color(p, x0 + k, y, t, known_opaque);
    }
    if (x0 + 3u < p.out_width) {
        store_surface4_rgba8(p, x0, y, c);
        return;
    }
#pragma unroll
    for (u32 k = 0u; k < 4u; k++) {
        if (x0 + k < p.out_width) {
            store_surface(p, x0 + k, y, c[k]);
        }
    }
}

// The post pass into an image, untiled, four pixels a thread. Into an RGBA8 image the four are
// neighbours, stored in one 16-byte store (a warp's store covers 128 neighbouring texels): on
// the H100 this took the kernel from 0.050 ms (a pixel a thread) to 0.048 ms at 540p ×4
// (docs/performance.md). Otherwise they are a
// block's width apart along a row (with the launcher's 32-wide blocks a warp's 32 threads take
// 128 neighbouring pixels, a texel a thread a store). Each thread issues the loads of all four
// pixels before its first store, so that four times the frame's bytes are in flight at once
// (a pixel a thread waits for each load before the next). The values are nf_post's, so the
// texels are the same bits.
#ifndef NF_SM80  // the passes_sm80.ptx program (conv_mma.cu) takes the helpers alone
extern "C" __global__ void nf_post_image4(PostParams p) {
    const bool known_opaque = opaque(p);
    const u32 plane = p.out_width * p.out_height;
    if (p.format == FORMAT_RGBA8) {
        for (u32 y = blockIdx.y * blockDim.y + threadIdx.y; y < p.out_height; y += gridDim.y * blockDim.y) {
            for (u32 x0 = (blockIdx.x * blockDim.x + threadIdx.x) * 4u; x0 < p.out_width;
                 x0 += gridDim.x * blockDim.x * 4u) {
                if (p.t.element == ELEMENT_F16) {
                    post4_rgba8<u16>(p, x0, y, plane, known_opaque);
                } else if (p.t.element == ELEMENT_F32) {
                    post4_rgba8<float>(p, x0, y, plane, known_opaque);
                } else {
                    post4_rgba8<u8>(p, x0, y, plane, known_opaque);
                }
            }
        }
        return;
    }
    for (u32 y = blockIdx.y * blockDim.y + threadIdx.y; y < p.out_height; y += gridDim.y * blockDim.y) {
        for (u32 x0 = blockIdx.x * blockDim.x * 4u + threadIdx.x; x0 < p.out_width;
             x0 += gridDim.x * blockDim.x * 4u) {
            if (p.t.element == ELEMENT_F16) {
                post4<u16>(p, x0, y, plane, known_opaque);
            } else if (p.t.element == ELEMENT_F32) {
                post4<float>(p, x0, y, plane, known_opaque);
            } else {
                post4<u8>(p, x0, y, plane, known_opaque);
            }
        }
    }
}
#endif

__device__ __forceinline__ float shuffle_load(u64 data, u32 element, u64 e) {
    if (element == ELEMENT_F16) {
        return half_to_float(reinterpret_cast<const u16*>(data)[e]);
    }
    return reinterpret_cast<const float*>(data)[e];
}

// Eight halves from a 16-byte aligned address, as floats, into v[0..8].
__device__ __forceinline__ void load8_half(u64 data, u64 e, float* v) {
    uint4 q = *reinterpret_cast<const uint4*>(reinterpret_cast<const u16*>(data) + e);
    u32 w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (u32 k = 0u; k < 4u; k++) {
        v[2u * k] = half_to_float((u16)(w[k] & 0xffffu));
        v[2u * k + 1u] = half_to_float((u16)(w[k] >> 16));
    }
}
