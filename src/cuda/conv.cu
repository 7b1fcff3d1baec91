// The fused rewrite's direct convolutions (`input_layout` "nchw" in src/onnx/convact.rs).
// Compiled by scripts/cuda_passes.py as one program with passes.cu, after it (this file uses
// its types and helpers: u32, ELEMENT_*, shuffle_load, float_to_half), into the one module
// src/cuda/passes.ptx.

// The fused rewrite's ConvAct whose input is NCHW with few channels (`input_layout` "nchw",
// src/onnx/convact.rs): the first convolution of an image model, which cuDNN's fused engines
// take only with its channels padded to 8 and the input transposed to NHWC. Direct: one
// thread CONV_PIXELS output pixels (a block's width apart, so that each load and store of a
// warp is one run of neighbouring pixels) and CONV_CHUNK output channels (blockIdx.y picks
// the chunk); the chunk's weights in shared memory as [tap][channel] (a tap: one r, s, c), so
// that one 16-byte broadcast load serves four channels of four pixels. Sums in f32 in tap
// order (r, then s, then c), bias first; then the activation and one rounding. Writes NHWC
// [n, oh, ow, k]; k is a multiple of 8 (the launcher checks), so that each group of 8 halves
// (or 4 floats) is one 16-byte store.
#define CONV_CHUNK 16u
#define CONV_PIXELS 4u
#define CONV_MAX_TAPS 64u
#define CONV_ACT_NONE 0u
#define CONV_ACT_RELU 1u
#define CONV_ACT_LEAKY 2u
#define CONV_ACT_PRELU 3u

struct ConvParams {
    u64 x;        // NCHW [n, c, h, w]
    u64 w;        // KRSC [k, r, s, c]
    u64 bias;     // [k], or 0
    u64 slope;    // [k] (CONV_ACT_PRELU), or 0
    u64 y;        // NHWC [n, oh, ow, k], 16-byte aligned
    u32 n;
    u32 c;
    u32 h;
    u32 width;       // the input's width
    u32 k;
    u32 r;
    u32 s;
    u32 oh;
    u32 ow;
    int pad_top;
    int pad_left;
    u32 stride_h;
    u32 stride_w;
    u32 dil_h;
    u32 dil_w;
    u32 act;      // CONV_ACT_*
    float alpha;  // CONV_ACT_LEAKY's slope
    u32 element;  // ELEMENT_F32 or ELEMENT_F16
};

__device__ __forceinline__ float conv_act(const ConvParams& p, float v, float slope) {
    if (p.act == CONV_ACT_RELU) {
        return fmaxf(v, 0.0f);
    }
    if (p.act != CONV_ACT_NONE) {
        return v < 0.0f ? v * slope : v;
    }
    return v;
}

#ifndef NF_SM80  // the passes_sm80.ptx program (conv_mma.cu) takes the helpers alone
extern "C" __global__ void nf_conv_nchw(ConvParams p) {
    __shared__ float4 wsh[CONV_MAX_TAPS * CONV_CHUNK / 4u];
    __shared__ float bsh[CONV_CHUNK];
    __shared__ float ssh[CONV_CHUNK];
    const u32 k0 = blockIdx.y * CONV_CHUNK;
    const u32 taps = p.r * p.s * p.c;
    float* wf = reinterpret_cast<float*>(wsh);
    // The chunk's KRSC rows, read in order (i: channel kk's tap), stored [tap][kk].
    for (u32 i = threadIdx.x; i < taps * CONV_CHUNK; i += blockDim.x) {
        const u32 kk = i / taps;
        const u32 tap = i - kk * taps;
        wf[tap * CONV_CHUNK + kk] = k0 + kk < p.k ? shuffle_load(p.w, p.element, (u64)k0 * taps + i) : 0.0f;
    }
    if (threadIdx.x < CONV_CHUNK) {
        const u32 k = k0 + threadIdx.x;
        const bool in = k < p.k;
        bsh[threadIdx.x] = in && p.bias != 0ull ? shuffle_load(p.bias, p.element, k) : 0.0f;
        ssh[threadIdx.x] = in && p.slope != 0ull ? shuffle_load(p.slope, p.element, k) : p.alpha;
    }
    __syncthreads();
    const u64 total = (u64)p.n * p.oh * p.ow;
    const u64 plane = (u64)p.h * p.width;
    const u64 span = (u64)blockDim.x * CONV_PIXELS;
    for (u64 first = (u64)blockIdx.x * span + threadIdx.x; first < total; first += (u64)gridDim.x * span) {
        u32 oy[CONV_PIXELS];
        u32 ox[CONV_PIXELS];
        u64 image[CONV_PIXELS];
        bool valid[CONV_PIXELS];
        float acc[CONV_PIXELS][CONV_CHUNK];
#pragma unroll
        for (u32 j = 0u; j < CONV_PIXELS; j++) {
            const u64 px = first + (u64)j * blockDim.x;
            valid[j] = px < total;
            const u64 at = valid[j] ? px : first;
            ox[j] = (u32)(at % p.ow);
            const u64 rest = at / p.ow;
            oy[j] = (u32)(rest % p.oh);
            image[j] = (rest / p.oh) * p.c * plane;
#pragma unroll
            for (u32 kk = 0u; kk < CONV_CHUNK; kk++) {
                acc[j][kk] = bsh[kk];
            }
        }
        u32 tap = 0u;
        for (u32 ri = 0u; ri < p.r; ri++) {
            for (u32 si = 0u; si < p.s; si++) {
                u64 src[CONV_PIXELS];
                bool inside[CONV_PIXELS];
#pragma unroll
                for (u32 j = 0u; j < CONV_PIXELS; j++) {
                    const int iy = (int)(oy[j] * p.stride_h) - p.pad_top + (int)(ri * p.dil_h);
                    const int ix = (int)(ox[j] * p.stride_w) - p.pad_left + (int)(si * p.dil_w);
                    inside[j] = iy >= 0 && iy < (int)p.h && ix >= 0 && ix < (int)p.width;
                    src[j] = image[j] + (inside[j] ? (u64)iy * p.width + (u64)ix : 0ull);
                }
                for (u32 ci = 0u; ci < p.c; ci++, tap++) {
                    float xv[CONV_PIXELS];
#pragma unroll
                    for (u32 j = 0u; j < CONV_PIXELS; j++) {
                        xv[j] = inside[j] ? shuffle_load(p.x, p.element, src[j] + ci * plane) : 0.0f;
                    }
                    const float4* wt = wsh + tap * (CONV_CHUNK / 4u);
#pragma unroll
                    for (u32 q = 0u; q < CONV_CHUNK / 4u; q++) {
                        const float4 w4 = wt[q];
#pragma unroll
                        for (u32 j = 0u; j < CONV_PIXELS; j++) {
                            acc[j][4u * q] = fmaf(xv[j], w4.x, acc[j][4u * q]);
                            acc[j][4u * q + 1u] = fmaf(xv[j], w4.y, acc[j][4u * q + 1u]);
                            acc[j][4u * q + 2u] = fmaf(xv[j], w4.z, acc[j][4u * q + 2u]);
                            acc[j][4u * q + 3u] = fmaf(xv[j], w4.w, acc[j][4u * q + 3u]);
                        }
                    }
                }
            }
        }
#pragma unroll
        for (u32 j = 0u; j < CONV_PIXELS; j++) {
            if (!valid[j]) {
                continue;
            }
            const u64 base = (first + (u64)j * blockDim.x) * p.k + k0;
            if (p.element == ELEMENT_F16) {
#pragma unroll
                for (u32 g = 0u; g < CONV_CHUNK / 8u; g++) {
                    if (k0 + 8u * g < p.k) {
                        u32 word[4];
#pragma unroll
                        for (u32 i = 0u; i < 4u; i++) {
                            const u32 kk = 8u * g + 2u * i;
                            word[i] = (u32)float_to_half(conv_act(p, acc[j][kk], ssh[kk])) |
                                      ((u32)float_to_half(conv_act(p, acc[j][kk + 1u], ssh[kk + 1u])) << 16);
                        }
                        *reinterpret_cast<uint4*>(reinterpret_cast<u16*>(p.y) + base + 8u * g) =
                            make_uint4(word[0], word[1], word[2], word[3]);
                    }
                }
            } else {
#pragma unroll
                for (u32 g = 0u; g < CONV_CHUNK / 4u; g++) {
                    if (k0 + 4u * g < p.k) {
                        const u32 kk = 4u * g;
                        *reinterpret_cast<float4*>(reinterpret_cast<float*>(p.y) + base + kk) =
                            make_float4(conv_act(p, acc[j][kk], ssh[kk]), conv_act(p, acc[j][kk + 1u], ssh[kk + 1u]),
                                        conv_act(p, acc[j][kk + 2u], ssh[kk + 2u]),
                                        conv_act(p, acc[j][kk + 3u], ssh[kk + 3u]));
                    }
                }
            }
        }
    }
}
#endif
