// The pre and post passes as CUDA kernels (`Tuning::cuda_passes`): the same
// conversions as src/shaders/pre_common.wgsl and post_common.wgsl, for an
// untiled frame whose input and output images the context created exportable
// and imported into CUDA as arrays with surface access. They run on the
// model's stream, so no Vulkan work and no semaphore stands between them and
// the model.
//
// Compiled to PTX by scripts/cuda_passes.py (NVRTC 13.0 from PyPI, virtual
// architecture compute_75, no headers); the PTX is committed beside this file
// as passes.ptx and checked against it in CI. Edit this file, then run
// `python3 scripts/cuda_passes.py` to regenerate it.
//
// Surfaces are read and written as raw texels: RGBA8 and BGRA8 (unorm or sRGB:
// the 8-bit codes, as the Vulkan pre pass recovers them) and RGBA16F (four
// halves). Tensor element e of pixel px, channel ch: NCHW e = ch·W·H + px,
// NHWC e = px·C + ch; t = x·mul[ch] + add[ch] for a colour value x in [0, 1].

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long long u64;

// Image formats (both passes).
#define FORMAT_RGBA8 0u
#define FORMAT_BGRA8 1u
#define FORMAT_RGBA16F 2u
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
    u64 surface;  // CUsurfObject of the input image
    u64 alpha;    // device pointer: one f32 per pixel (the frame's alpha), or 0
    u32 width;
    u32 height;
    u32 format;   // FORMAT_*
    u32 pad;
    Tensor t;
};

struct PostParams {
    u64 surface;  // CUsurfObject of the output image
    u64 alpha;    // device pointer: the pre pass's alpha (width × height)
    u32 width;    // input frame width
    u32 height;
    u32 out_width;
    u32 out_height;
    u32 format;   // FORMAT_RGBA8 or FORMAT_RGBA16F
    u32 pad;
    Tensor t;
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

__device__ __forceinline__ float4 load_texel(u64 surface, u32 format, u32 x, u32 y) {
    if (format == FORMAT_RGBA16F) {
        u16 r, g, b, a;
        asm volatile("suld.b.2d.v4.b16.clamp {%0, %1, %2, %3}, [%4, {%5, %6}];"
                     : "=h"(r), "=h"(g), "=h"(b), "=h"(a)
                     : "l"(surface), "r"(x * 8u), "r"(y));
        return make_float4(half_to_float(r), half_to_float(g), half_to_float(b), half_to_float(a));
    }
    u32 r, g, b, a;
    asm volatile("suld.b.2d.v4.b8.clamp {%0, %1, %2, %3}, [%4, {%5, %6}];"
                 : "=r"(r), "=r"(g), "=r"(b), "=r"(a)
                 : "l"(surface), "r"(x * 4u), "r"(y));
    float4 c = make_float4((r & 0xffu) / 255.0f, (g & 0xffu) / 255.0f, (b & 0xffu) / 255.0f, (a & 0xffu) / 255.0f);
    if (format == FORMAT_BGRA8) {
        float s = c.x;
        c.x = c.z;
        c.z = s;
    }
    return c;
}

__device__ __forceinline__ u32 to_code(float v) {
    return __float2uint_rn(fminf(fmaxf(v, 0.0f), 1.0f) * 255.0f);
}

__device__ __forceinline__ void store_texel(u64 surface, u32 format, u32 x, u32 y, float4 c) {
    if (format == FORMAT_RGBA16F) {
        // As the Vulkan pass: no clamp (a half-float output may carry values above 1).
        asm volatile("sust.b.2d.v4.b16.clamp [%0, {%1, %2}], {%3, %4, %5, %6};"
                     :
                     : "l"(surface), "r"(x * 8u), "r"(y), "h"(float_to_half(c.x)), "h"(float_to_half(c.y)),
                       "h"(float_to_half(c.z)), "h"(float_to_half(c.w))
                     : "memory");
        return;
    }
    asm volatile("sust.b.2d.v4.b8.clamp [%0, {%1, %2}], {%3, %4, %5, %6};"
                 :
                 : "l"(surface), "r"(x * 4u), "r"(y), "r"(to_code(c.x)), "r"(to_code(c.y)), "r"(to_code(c.z)),
                   "r"(to_code(c.w))
                 : "memory");
}

__device__ __forceinline__ float component(float4 c, u32 k) {
    return k == 0u ? c.x : k == 1u ? c.y : k == 2u ? c.z : c.w;
}

__device__ __forceinline__ u32 element_index(const Tensor& t, u32 px, u32 ch, u32 plane) {
    return t.nhwc != 0u ? px * t.channels + ch : ch * plane + px;
}

extern "C" __global__ void nf_pre(PreParams p) {
    u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= p.width || y >= p.height) {
        return;
    }
    u32 px = y * p.width + x;
    u32 plane = p.width * p.height;
    float4 c = load_texel(p.surface, p.format, x, y);
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
    }
}

__device__ __forceinline__ float alpha_px(const PostParams& p, u32 x, u32 y) {
    return reinterpret_cast<const float*>(p.alpha)[y * p.width + x];
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

extern "C" __global__ void nf_post(PostParams p) {
    u32 x = blockIdx.x * blockDim.x + threadIdx.x;
    u32 y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= p.out_width || y >= p.out_height) {
        return;
    }
    u32 px = y * p.out_width + x;
    u32 plane = p.out_width * p.out_height;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (u32 ch = 0u; ch < 4u; ch++) {
        if (ch >= p.t.channels) {
            break;
        }
        u32 e = element_index(p.t, px, ch, plane);
        float t;
        if (p.t.element == ELEMENT_F32) {
            t = reinterpret_cast<const float*>(p.t.data)[e];
        } else if (p.t.element == ELEMENT_F16) {
            t = half_to_float(reinterpret_cast<const u16*>(p.t.data)[e]);
        } else {
            t = (float)reinterpret_cast<const u8*>(p.t.data)[e];
        }
        v[ch] = (t - p.t.add[ch]) / p.t.mul[ch];
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
        c.w = alpha_at(p, x, y);
    }
    store_texel(p.surface, p.format, x, y, c);
}
