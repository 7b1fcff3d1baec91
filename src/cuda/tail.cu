// The fused rewrite's DepthToSpace (src/onnx/shuffle.rs, src/onnx/shuffle_op.rs), and the
// fused tail: where the context asks (src/cuda/tail.rs), the same kernel also does the
// frame's post pass, so that the model's last kernel writes the caller's output itself and
// no post kernel reads the output tensor again (the tensor is still written). Compiled by
// scripts/cuda_passes.py as one program with passes.cu and conv.cu, after them (this file
// uses passes.cu's types and helpers: PostParams, post_values, opaque, shuffle_load,
// load8_half), into the one module src/cuda/passes.ptx.

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
    u64 post;     // device pointer to a TailPost (the fused tail), or 0
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

// The fused tail's common case, an ×4 upscaler's: fp16, CRD, 4 × 4 blocks, x, y and the bias
// 16-byte aligned, the tensor 8-byte aligned, 1 to 4 channels. A block takes a tile of a source
// row's pixels (blockDim.x / 4 of them: 64 with the launcher's 256 threads, 256 output columns)
// in steps that each give a warp neighbouring memory:
// 1. the tile's source (contiguous in NHWC) in 16-byte loads, summed as the general loop does
//    (x, then y, then the bias, then the upsampled input, in f32) and rounded once, into shared
//    memory;
// 2. the tensor's rows of the tile, a source pixel's block row (8 bytes) a store;
// 3. the texels through the post pass's own code: into an RGBA8 image a source pixel's block
//    row (4 neighbouring texels) a thread in one 16-byte store, otherwise a texel a thread.
// The first fused-tail kernel gave each thread a pixel's block row and channels instead: its
// loads were 8 bytes a pixel's stride (96 bytes) apart and its texel stores 4 pixels apart,
// and it ran 0.13 ms on the H100 against 0.053 + 0.059 for the unfused kernel and the post
// kernel. This one ran 0.108 ms without step 3's 16-byte stores (2026-12-06-h100-s13; its
// steps 1 and 2 alone 0.061) and 0.093 ms with them (2026-12-06-h100-s14), against 0.055 +
// 0.048 for the two kernels it replaces.
constexpr u32 TAIL_HALVES = 4096u;  // shared memory a tile: 64 pixels of 64 channels

__device__ __forceinline__ bool tiled_fits(const ShuffleParams& p) {
    return p.element == ELEMENT_F16 && p.crd != 0u && p.block == 4u && p.c >= 1u && p.c * 16u <= TAIL_HALVES &&
           ((p.x | p.y | p.bias) & 15ull) == 0ull && (p.out & 7ull) == 0ull && (x_stride(p) & 7ull) == 0ull;
}

__device__ void depth_to_space_post_tiled(const ShuffleParams& p, const PostParams& q, bool known_opaque) {
    __shared__ uint4 tile4[TAIL_HALVES / 8u];
    u16* tile = reinterpret_cast<u16*>(tile4);
    const u32 cin = p.c * 16u;
    const u64 ow = (u64)p.w * 4u;
    const u64 oh = (u64)p.h * 4u;
    const u32 per_tile = min(blockDim.x / 4u, TAIL_HALVES / cin);
    const u32 across = (p.w + per_tile - 1u) / per_tile;
    const u32 tiles = p.n * p.h * across;
    for (u32 k = blockIdx.x; k < tiles; k += gridDim.x) {
        const u32 row = k / across;  // ni · h + hi
        const u32 ni = row / p.h;
        const u32 hi = row % p.h;
        const u32 w0 = (k % across) * per_tile;
        const u32 np = min(per_tile, p.w - w0);
        const u64 base = ((u64)row * p.w + w0) * x_stride(p);
        // 1. Eight halves of one channel a load.
        for (u32 e = threadIdx.x; e < np * cin / 8u; e += blockDim.x) {
            const u32 px = e * 8u / cin;
            const u32 kk = e * 8u % cin;
            const u64 at = base + (u64)px * x_stride(p) + kk;
            float v[8];
            float t[8];
            load8_half(p.x, at, v);
            if (p.y != 0ull) {
                load8_half(p.y, at, t);
#pragma unroll
                for (u32 j = 0u; j < 8u; j++) {
                    v[j] += t[j];
                }
            }
            if (p.bias != 0ull) {
                load8_half(p.bias, kk, t);
#pragma unroll
                for (u32 j = 0u; j < 8u; j++) {
                    v[j] += t[j];
                }
            }
            if (p.up != 0ull) {
                const u64 ch = (u64)ni * p.c + kk / 16u;
                const float u = half_to_float(reinterpret_cast<const u16*>(p.up)[(ch * p.h + hi) * p.w + w0 + px]);
#pragma unroll
                for (u32 j = 0u; j < 8u; j++) {
                    v[j] += u;
                }
            }
            u32 h[4];
#pragma unroll
            for (u32 j = 0u; j < 4u; j++) {
                h[j] = (u32)float_to_half(v[2u * j]) | ((u32)float_to_half(v[2u * j + 1u]) << 16);
            }
            tile4[e] = make_uint4(h[0], h[1], h[2], h[3]);
        }
        __syncthreads();
        // 2. Row i of channel ch's blocks: a source pixel's 4 halves a store.
        for (u32 e = threadIdx.x; e < p.c * 4u * np; e += blockDim.x) {
            const u32 r = e / np;
            const u32 px = e % np;
            const u32 ch = r / 4u;
            const u32 i = r % 4u;
            const uint2 w = *reinterpret_cast<const uint2*>(tile + px * cin + ch * 16u + i * 4u);
            *reinterpret_cast<uint2*>(reinterpret_cast<u16*>(p.out) +
                                      (((u64)ni * p.c + ch) * oh + (u64)hi * 4u + i) * ow + (u64)(w0 + px) * 4u) = w;
        }
        // 3. The texels: into an RGBA8 image 4 neighbouring ones a thread (a source pixel's
        // block row i), in one store; otherwise one a thread along output row i.
        const u32 c = min(p.c, 4u);
        if (q.kind == ACCESS_SURFACE && q.format == FORMAT_RGBA8) {
            for (u32 e = threadIdx.x; e < 4u * np; e += blockDim.x) {
                const u32 i = e / np;
                const u32 px = e % np;
                float4 colors[4];
#pragma unroll
                for (u32 j = 0u; j < 4u; j++) {
                    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                    for (u32 ch = 0u; ch < 4u; ch++) {
                        if (ch < c) {
                            t[ch] = half_to_float(tile[px * cin + ch * 16u + i * 4u + j]);
                        }
                    }
                    colors[j] = post_color(q, (w0 + px) * 4u + j, hi * 4u + i, t, known_opaque);
                }
                store_surface4_rgba8(q, (w0 + px) * 4u, hi * 4u + i, colors);
            }
        } else {
            for (u32 e = threadIdx.x; e < 16u * np; e += blockDim.x) {
                const u32 i = e / (4u * np);
                const u32 x = e % (4u * np);
                const u32 px = x / 4u;
                const u32 j = x % 4u;
                float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (u32 ch = 0u; ch < 4u; ch++) {
                    if (ch < c) {
                        t[ch] = half_to_float(tile[px * cin + ch * 16u + i * 4u + j]);
                    }
                }
                tail_pixel(q, w0 * 4u + x, hi * 4u + i, t, known_opaque);
            }
        }
        __syncthreads();
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
    const u64 cin = x_stride(p);
    const u32 total = p.h * p.w * b;
    if (tiled_fits(p) && p.n == 1u && p.c <= 4u) {
        depth_to_space_post_tiled(p, q, known_opaque);
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
#ifndef NF_SM80  // the passes_sm80.ptx program (conv_mma.cu) takes the helpers alone
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
