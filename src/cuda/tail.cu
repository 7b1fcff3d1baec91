// The fused rewrite's DepthToSpace (src/onnx/shuffle.rs, src/onnx/shuffle_op.rs), and the
// fused tail: where the context asks (src/cuda/tail.rs), the same kernel also does the
// frame's post pass, so that the model's last kernel writes the caller's output itself and
// no post kernel reads the output tensor again (the tensor is still written). Compiled by scripts/cuda_passes.py as one
// program with passes.cu and conv.cu, after them (this file uses passes.cu's types and
// helpers: PostParams, post_values, opaque, shuffle_load, load8_half), into the one module
// src/cuda/passes.ptx.

// The DepthToSpace operator of the fused-convolution rewrite: x, plus y, a per-channel bias
// and the nearest-upsampled `up` where they are not 0, NHWC [n, h, w, c·b²] → out NCHW
// [n, c, h·b, w·b] in ONNX's order (CRD: channel c·b² + i·b + j of pixel (h, w) goes to
// (c, h·b + i, w·b + j); DCR: channel (i·b + j)·c + ch). Sums in f32, one rounding to the
// element type (ONNX Runtime's fp16 Add rounds the same sum once).
struct ShuffleParams {
    u64 x;
    u64 y;        // device pointer of the same shape as x, or 0
    u64 out;
    u64 bias;     // device pointer to c·b² values added by input channel, or 0
    u64 up;       // device pointer to NCHW [n, c, h, w] added to each pixel's b × b block, or 0
    u64 post;     // device pointer to a TailPost (the fused tail), or 0
    u32 n;
    u32 h;
    u32 w;
    u32 c;        // output channels
    u32 block;    // b
    u32 crd;      // 1: CRD, 0: DCR
    u32 element;  // ELEMENT_F32 or ELEMENT_F16
};

// What the context writes before a run whose output the kernel converts itself (TailPost in
// params.rs). The context sets `active` on its stream before the model and clears it after,
// so that every other run of the same captured graph or session writes the tensor only.
struct TailPost {
    u32 active;  // 1: write the frame's output through `post` too
    u32 pad;
    PostParams post;
};

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

// One output pixel of the fused tail: the post pass's conversion and store of nf_post_image
// (images) or nf_post (buffers), untiled.
__device__ __forceinline__ void tail_pixel(const PostParams& q, u32 x, u32 y, const float* t, bool known_opaque) {
    if (q.kind == ACCESS_SURFACE) {
        post_values<false>(q, x, y, t, known_opaque);
    } else {
        post_values<true>(q, x, y, t, known_opaque);
    }
}

// Four halves from an 8-byte aligned address, as floats, into v[0..4].
__device__ __forceinline__ void load4_half(u64 data, u64 e, float* v) {
    uint2 w = *reinterpret_cast<const uint2*>(reinterpret_cast<const u16*>(data) + e);
    v[0] = half_to_float((u16)(w.x & 0xffffu));
    v[1] = half_to_float((u16)(w.x >> 16));
    v[2] = half_to_float((u16)(w.y & 0xffffu));
    v[3] = half_to_float((u16)(w.y >> 16));
}

// The fused tail's common case, the ×4 upscaler's into an image: fp16, CRD, 4 × 4 blocks,
// every pointer 8-byte aligned. One thread four neighbouring output pixels of one row (a source pixel's
// block row i), threads in the output's row order, so that a warp reads each channel's 4
// values with one 8-byte load a thread, writes each tensor row with one 8-byte store a thread
// (as the unfused kernel), and stores 128 neighbouring texels in four stores. The sums are
// the general loop's, in its order.
__device__ void depth_to_space_post_f16_crd4(const ShuffleParams& p, const PostParams& q, bool known_opaque) {
    const u32 c = min(p.c, 4u);
    const u64 cin = (u64)p.c * 16u;
    const u64 ow = (u64)p.w * 4u;
    const u64 oh = (u64)p.h * 4u;
    const u32 total = p.h * p.w * 4u;
    for (u32 t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
        const u32 wi = t % p.w;
        const u32 r = t / p.w;
        const u32 i = r % 4u;
        const u32 hi = r / 4u;
        const u64 src = ((u64)hi * p.w + wi) * cin;
        float v[4][4];
        float s[4];
#pragma unroll
        for (u32 ch = 0u; ch < 4u; ch++) {
            if (ch >= c) {
                v[ch][0] = v[ch][1] = v[ch][2] = v[ch][3] = 0.0f;
                continue;
            }
            const u64 k = ch * 16u + i * 4u;
            load4_half(p.x, src + k, v[ch]);
            if (p.y != 0ull) {
                load4_half(p.y, src + k, s);
#pragma unroll
                for (u32 j = 0u; j < 4u; j++) {
                    v[ch][j] += s[j];
                }
            }
            if (p.bias != 0ull) {
                load4_half(p.bias, k, s);
#pragma unroll
                for (u32 j = 0u; j < 4u; j++) {
                    v[ch][j] += s[j];
                }
            }
            if (p.up != 0ull) {
                const float u = half_to_float(reinterpret_cast<const u16*>(p.up)[((u64)ch * p.h + hi) * p.w + wi]);
#pragma unroll
                for (u32 j = 0u; j < 4u; j++) {
                    v[ch][j] += u;
                }
            }
            u16 h[4];
#pragma unroll
            for (u32 j = 0u; j < 4u; j++) {
                h[j] = float_to_half(v[ch][j]);
                v[ch][j] = half_to_float(h[j]);
            }
            uint2 w;
            w.x = (u32)h[0] | ((u32)h[1] << 16);
            w.y = (u32)h[2] | ((u32)h[3] << 16);
            *reinterpret_cast<uint2*>(reinterpret_cast<u16*>(p.out) + ((u64)ch * oh + (u64)hi * 4u + i) * ow +
                                      (u64)wi * 4u) = w;
        }
#pragma unroll
        for (u32 j = 0u; j < 4u; j++) {
            const float tv[4] = {v[0][j], v[1][j], v[2][j], v[3][j]};
            post_values<false>(q, wi * 4u + j, hi * 4u + i, tv, known_opaque);
        }
    }
}

// The fused tail: one thread a source pixel and output column j of its b × b block (n is 1:
// the context claims no batch), with every one of the pixel's c ≤ 4 channels, so that it
// holds whole output pixels; consecutive threads take consecutive output columns, so that a
// warp's store of a row is one run of neighbouring pixels, as the post kernel's. Each value is
// the unfused kernel's sum in its order (x, then y, then the bias, then the upsampled input),
// rounded once to the element type and written to the tensor as the unfused kernel writes it,
// then converted and stored by the post pass's own code.
// The launcher gives at least h·w·b threads; t stays below 2³¹ (the operator claims no more).
__device__ void depth_to_space_post(const ShuffleParams& p, const PostParams& q) {
    const bool known_opaque = opaque(q);
    const u32 b = p.block;
    const u32 c = min(p.c, 4u);
    const u64 cin = (u64)p.c * b * b;
    const u32 total = p.h * p.w * b;
    if (p.element == ELEMENT_F16 && p.crd != 0u && b == 4u && q.kind == ACCESS_SURFACE &&
        ((p.x | p.y | p.bias | p.out) & 7ull) == 0ull) {
        depth_to_space_post_f16_crd4(p, q, known_opaque);
        return;
    }
    for (u32 t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
        const u32 j = t % b;
        const u32 px = t / b;
        const u32 wi = px % p.w;
        const u32 hi = px / p.w;
        const u64 src = (u64)px * cin;
        float u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (u32 ch = 0u; ch < 4u; ch++) {
            if (p.up != 0ull && ch < c) {
                u[ch] = shuffle_load(p.up, p.element, ((u64)ch * p.h + hi) * p.w + wi);
            }
        }
        for (u32 i = 0u; i < b; i++) {
            float tv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (u32 ch = 0u; ch < 4u; ch++) {
                if (ch >= c) {
                    continue;
                }
                const u64 k = p.crd != 0u ? (u64)(ch * b * b + i * b + j) : (u64)((i * b + j) * p.c + ch);
                float v = shuffle_load(p.x, p.element, src + k);
                if (p.y != 0ull) {
                    v += shuffle_load(p.y, p.element, src + k);
                }
                if (p.bias != 0ull) {
                    v += shuffle_load(p.bias, p.element, k);
                }
                if (p.up != 0ull) {
                    v += u[ch];
                }
                // The tensor too (what reads it after the frame finds what the unfused kernel
                // writes), and the value as the post pass would read it back.
                const u64 e = ((u64)ch * p.h * b + (u64)hi * b + i) * p.w * b + (u64)wi * b + j;
                if (p.element == ELEMENT_F16) {
                    const u16 h = float_to_half(v);
                    reinterpret_cast<u16*>(p.out)[e] = h;
                    tv[ch] = half_to_float(h);
                } else {
                    reinterpret_cast<float*>(p.out)[e] = v;
                    tv[ch] = v;
                }
            }
            tail_pixel(q, wi * b + j, hi * b + i, tv, known_opaque);
        }
    }
}

// One thread a source pixel and output channel (w fastest, so that a warp writes along
// rows): it reads that channel's b² values and writes its b × b block. The launcher keeps
// n·c·h·w below 2³² (the index arithmetic is 32-bit; offsets are 64-bit).
extern "C" __global__ void nf_depth_to_space(ShuffleParams p) {
    if (p.post != 0ull) {
        // The fused tail, where this run's TailPost is active (the same for every thread).
        __shared__ PostParams q;
        __shared__ u32 active;
        if (threadIdx.x == 0u) {
            const TailPost* d = reinterpret_cast<const TailPost*>(p.post);
            active = d->active;
            if (active != 0u) {
                q = d->post;
            }
        }
        __syncthreads();
        if (active != 0u) {
            depth_to_space_post(p, q);
            return;
        }
    }
    const u32 total = p.n * p.c * p.h * p.w;
    const u32 b = p.block;
    const u64 cin = (u64)p.c * b * b;
    const u64 ow = (u64)p.w * b;
    const u64 oh = (u64)p.h * b;
    const bool fast = p.element == ELEMENT_F16 && p.crd != 0u && b == 4u &&
                      ((p.x | p.y | p.bias | p.out) & 15ull) == 0ull;
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
