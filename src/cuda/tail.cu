// The fused rewrite's DepthToSpace (src/graph/shuffle.rs, src/ops/shuffle_op.rs). Compiled by
// scripts/cuda_passes.py as one program with passes.cu and conv.cu, after them (this file uses
// passes.cu's helpers: shuffle_load, load8_half, float_to_half), into the one module
// src/cuda/passes.ptx.

// The DepthToSpace operator of the fused-convolution rewrite: x, plus y, a per-channel bias
// and the nearest-upsampled `up` where they are not 0, NHWC [n, h, w, c·b²] → out NCHW
// [n, c, h·b, w·b] in ONNX's order (CRD: channel c·b² + i·b + j of pixel (h, w) goes to
// (c, h·b + i, w·b + j); DCR: channel (i·b + j)·c + ch). Sums in f32, one rounding to the
// element type (ONNX Runtime's fp16 Add rounds the same sum once). x and y may hold more than
// c·b² channels a pixel (`stride`: a last convolution's filters padded with zeros to a multiple
// of 64, for cuDNN's Hopper kernels); the first c·b² are read.
struct ShuffleParams {
    u64 x;
    u64 y;        // device pointer of the same shape as x, or 0
    u64 out;
    u64 bias;     // device pointer to c·b² values added by input channel, or 0
    u64 up;       // device pointer to NCHW [n, c, h, w] added to each pixel's b × b block, or 0
    u32 n;
    u32 h;
    u32 w;
    u32 c;        // output channels
    u32 block;    // b
    u32 crd;      // 1: CRD, 0: DCR
    u32 element;  // ELEMENT_F32 or ELEMENT_F16
    u32 stride;   // x's and y's channels a pixel, at least c·b²; 0 reads as c·b²
};

// x's and y's channels a pixel.
__device__ __forceinline__ u64 x_stride(const ShuffleParams& p) {
    return p.stride != 0u ? (u64)p.stride : (u64)p.c * p.block * p.block;
}

// The common case, the tail of an ×4 upscaler: fp16, CRD, 4 × 4 blocks, every pointer
// 16-byte aligned. The thread's 16 values are contiguous (two 16-byte loads of x, and of y
// and the bias where given) and each row of its block is 4 contiguous halves (one 8-byte
// store); the sums are the general loop's, in its order, so the results are the same bits.
__device__ __forceinline__ void depth_to_space_f16_crd4(const ShuffleParams& p, u64 src, u64 dst, u64 ow, u32 ch,
                                                        bool has_u, float u) {
    float v[16];
    float t[16];
    load8_half(p.x, src + ch * 16u, v);
    load8_half(p.x, src + ch * 16u + 8u, v + 8);
    if (p.y != 0ull) {
        load8_half(p.y, src + ch * 16u, t);
        load8_half(p.y, src + ch * 16u + 8u, t + 8);
#pragma unroll
        for (u32 k = 0u; k < 16u; k++) {
            v[k] += t[k];
        }
    }
    if (p.bias != 0ull) {
        load8_half(p.bias, ch * 16u, t);
        load8_half(p.bias, ch * 16u + 8u, t + 8);
#pragma unroll
        for (u32 k = 0u; k < 16u; k++) {
            v[k] += t[k];
        }
    }
#pragma unroll
    for (u32 i = 0u; i < 4u; i++) {
        float r[4];
#pragma unroll
        for (u32 j = 0u; j < 4u; j++) {
            r[j] = has_u ? v[i * 4u + j] + u : v[i * 4u + j];
        }
        uint2 q;
        q.x = (u32)float_to_half(r[0]) | ((u32)float_to_half(r[1]) << 16);
        q.y = (u32)float_to_half(r[2]) | ((u32)float_to_half(r[3]) << 16);
        *reinterpret_cast<uint2*>(reinterpret_cast<u16*>(p.out) + dst + (u64)i * ow) = q;
    }
}

// One thread a source pixel and output channel (w fastest, so that a warp writes along
// rows): it reads that channel's b² values and writes its b × b block. The launcher keeps
// n·c·h·w below 2³² (the index arithmetic is 32-bit; offsets are 64-bit).
#ifndef NF_SM80  // the passes_sm80.ptx program (conv_mma.cu) takes the helpers alone
extern "C" __global__ void nf_depth_to_space(ShuffleParams p) {
    const u32 total = p.n * p.c * p.h * p.w;
    const u32 b = p.block;
    const u64 cin = x_stride(p);
    const u64 ow = (u64)p.w * b;
    const u64 oh = (u64)p.h * b;
    const bool fast = p.element == ELEMENT_F16 && p.crd != 0u && b == 4u &&
                      ((p.x | p.y | p.bias | p.out) & 15ull) == 0ull && (cin & 7ull) == 0ull;
    for (u32 t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
        u32 wi = t % p.w;
        u32 r = t / p.w;
        u32 hi = r % p.h;
        r /= p.h;
        u32 ch = r % p.c;
        u32 ni = r / p.c;
        u64 src = (((u64)ni * p.h + hi) * p.w + wi) * cin;
        u64 dst = (((u64)ni * p.c + ch) * oh + (u64)hi * b) * ow + (u64)wi * b;
        // The upsampled input (nearest): one value for the whole block.
        float u = 0.0f;
        bool has_u = p.up != 0ull;
        if (has_u) {
            u = shuffle_load(p.up, p.element, (((u64)ni * p.c + ch) * p.h + hi) * p.w + wi);
        }
        if (fast) {
            depth_to_space_f16_crd4(p, src, dst, ow, ch, has_u, u);
            continue;
        }
        for (u32 i = 0u; i < b; i++) {
            for (u32 j = 0u; j < b; j++) {
                u64 k = p.crd != 0u ? (u64)(ch * b * b + i * b + j) : (u64)((i * b + j) * p.c + ch);
                float v = shuffle_load(p.x, p.element, src + k);
                if (p.y != 0ull) {
                    v += shuffle_load(p.y, p.element, src + k);
                }
                if (p.bias != 0ull) {
                    v += shuffle_load(p.bias, p.element, k);
                }
                if (has_u) {
                    v += u;
                }
                u64 e = dst + (u64)i * ow + j;
                if (p.element == ELEMENT_F16) {
                    reinterpret_cast<u16*>(p.out)[e] = float_to_half(v);
                } else {
                    reinterpret_cast<float*>(p.out)[e] = v;
                }
            }
        }
    }
}
#endif
