// The direct convolution's common case on tensor cores, for GPUs of compute capability 8.0 and
// later (mma.sync): compiled by scripts/cuda_passes.py after passes.cu, conv.cu and tail.cu
// (their kernels left out by NF_SM80, their helpers and ConvParams used here) into
// src/cuda/passes_sm80.ptx, a module of its own, since passes.ptx targets compute_75.
//
// nf_conv3x3_mma: a 3×3 window of stride and dilation 1 over at most MMA_MAX_C input channels
// (an RGB or RGBA image's first convolution), any padding, f16 tensors (fp32 ones keep
// nf_conv_nchw). A block of MMA_BLOCK threads computes MMA_GROUP output channels over a tile of
// MMA_TILE_W × MMA_TILE_H output pixels: blockIdx.x is the channel group + groups · the tile's
// column, blockIdx.y the tile's row + rows · the image. The tile's input window (a one-pixel
// border, zero outside the image) and the group's weights, as [channel][tap] with the taps
// (r·3 + s)·c + ci padded to MMA_K_MAX with zeros, go to shared memory as f16. Each warp takes a
// row of the tile (two m16 tiles of pixels) by the group's channels (eight n8 tiles): the GEMM
// over the taps in steps of 16 with mma.sync.m16n8k16 (f16 inputs, f32 sums starting from the
// bias), the A fragments gathered from the window through a table of the taps' offsets. Then the
// activation and one rounding, the results into shared memory (a pixel's channels a row), and
// out as consecutive 16-byte stores: with 64 channels a warp writes 512 contiguous bytes. The
// sums' order is the tensor cores', not nf_conv_nchw's: within one half-float step of it.
#define MMA_TILE_W 32u
#define MMA_TILE_H 4u
#define MMA_GROUP 64u
#define MMA_BLOCK 128u
#define MMA_MAX_C 4u
#define MMA_IN_W (MMA_TILE_W + 2u)
#define MMA_IN_H (MMA_TILE_H + 2u)
#define MMA_PIXELS (MMA_TILE_W * MMA_TILE_H)
#define MMA_K_MAX 48u
#define MMA_WK (MMA_K_MAX + 8u)
#define MMA_YW (MMA_GROUP + 8u)
static_assert(MMA_BLOCK / 32u == MMA_TILE_H, "a warp a row of the tile");
static_assert(MMA_TILE_W == 32u, "a row of the tile is two m16 tiles");
static_assert(MMA_GROUP == 64u, "eight n8 tiles a warp");
static_assert(9u * MMA_MAX_C <= MMA_K_MAX && MMA_K_MAX % 16u == 0u, "the taps fit the steps of 16");

__device__ __forceinline__ void mma16816(float* d, const u32* a, const u32* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

extern "C" __global__ void __launch_bounds__(MMA_BLOCK) nf_conv3x3_mma(ConvParams p) {
    __shared__ u16 xh[MMA_MAX_C * MMA_IN_H * MMA_IN_W];
    __shared__ __align__(16) u16 wh[MMA_GROUP * MMA_WK];
    __shared__ int off[MMA_K_MAX];
    __shared__ float bsh[MMA_GROUP];
    __shared__ float ssh[MMA_GROUP];
    __shared__ __align__(16) u16 yh[MMA_PIXELS * MMA_YW];
    const u32 groups = (p.k + MMA_GROUP - 1u) / MMA_GROUP;
    const u32 column = blockIdx.x / groups;
    const u32 g0 = (blockIdx.x - column * groups) * MMA_GROUP;
    const u32 rows = (p.oh + MMA_TILE_H - 1u) / MMA_TILE_H;
    const u32 image = blockIdx.y / rows;
    const u32 oy0 = (blockIdx.y - image * rows) * MMA_TILE_H;
    const u32 ox0 = column * MMA_TILE_W;
    const u32 taps = 9u * p.c;
    const u32 ksteps = (taps + 15u) / 16u;
    const u16* w = reinterpret_cast<const u16*>(p.w);
    for (u32 i = threadIdx.x; i < MMA_GROUP * MMA_K_MAX; i += blockDim.x) {
        const u32 kk = i / MMA_K_MAX;
        const u32 t = i - kk * MMA_K_MAX;
        wh[kk * MMA_WK + t] = t < taps && g0 + kk < p.k ? w[(u64)(g0 + kk) * taps + t] : (u16)0;
    }
    for (u32 t = threadIdx.x; t < MMA_K_MAX; t += blockDim.x) {
        const u32 rs = t / p.c;
        const u32 ci = t - rs * p.c;
        off[t] = t < taps ? (int)(ci * (MMA_IN_H * MMA_IN_W) + (rs / 3u) * MMA_IN_W + rs % 3u) : 0;
    }
    if (threadIdx.x < MMA_GROUP) {
        const u32 k = g0 + threadIdx.x;
        const bool in = k < p.k;
        bsh[threadIdx.x] = in && p.bias != 0ull ? shuffle_load(p.bias, p.element, k) : 0.0f;
        ssh[threadIdx.x] = in && p.slope != 0ull ? shuffle_load(p.slope, p.element, k) : p.alpha;
    }
    const u64 plane = (u64)p.h * p.width;
    const u64 x0 = (u64)image * p.c * plane;
    const u16* x = reinterpret_cast<const u16*>(p.x);
    for (u32 i = threadIdx.x; i < p.c * MMA_IN_H * MMA_IN_W; i += blockDim.x) {
        const u32 ci = i / (MMA_IN_H * MMA_IN_W);
        const u32 rest = i - ci * (MMA_IN_H * MMA_IN_W);
        const u32 row = rest / MMA_IN_W;
        const u32 col = rest - row * MMA_IN_W;
        const int iy = (int)(oy0 + row) - p.pad_top;
        const int ix = (int)(ox0 + col) - p.pad_left;
        const bool inside = iy >= 0 && iy < (int)p.h && ix >= 0 && ix < (int)p.width;
        xh[i] = inside ? x[x0 + ci * plane + (u64)iy * p.width + (u64)ix] : (u16)0;
    }
    __syncthreads();
    const u32 warp = threadIdx.x / 32u;
    const u32 lane = threadIdx.x % 32u;
    const u32 gid = lane >> 2;
    const u32 tig = lane & 3u;
    // acc[m16 tile][n8 tile]: rows gid and gid + 8 (pixels), columns 2·tig and 2·tig + 1 (channels).
    float acc[2][8][4];
#pragma unroll
    for (u32 mt = 0u; mt < 2u; mt++) {
#pragma unroll
        for (u32 nt = 0u; nt < 8u; nt++) {
            const u32 ch = nt * 8u + tig * 2u;
            acc[mt][nt][0] = bsh[ch];
            acc[mt][nt][1] = bsh[ch + 1u];
            acc[mt][nt][2] = bsh[ch];
            acc[mt][nt][3] = bsh[ch + 1u];
        }
    }
#pragma unroll 1
    for (u32 ks = 0u; ks < ksteps; ks++) {
        // This thread's taps of the step: k0, k0 + 1, k0 + 8, k0 + 9; padding taps read as 0.
        const u32 k0 = ks * 16u + tig * 2u;
        int o[4];
        bool v[4];
#pragma unroll
        for (u32 q = 0u; q < 4u; q++) {
            const u32 k = k0 + (q & 1u) + 8u * (q >> 1);
            v[q] = k < taps;
            o[q] = off[k];
        }
        u32 a[2][4];
#pragma unroll
        for (u32 mt = 0u; mt < 2u; mt++) {
            const int b0 = (int)(warp * MMA_IN_W + mt * 16u + gid);
            const int b1 = b0 + 8;
            const u32 lo0 = v[0] ? xh[b0 + o[0]] : 0u, hi0 = v[1] ? xh[b0 + o[1]] : 0u;
            const u32 lo1 = v[0] ? xh[b1 + o[0]] : 0u, hi1 = v[1] ? xh[b1 + o[1]] : 0u;
            const u32 lo2 = v[2] ? xh[b0 + o[2]] : 0u, hi2 = v[3] ? xh[b0 + o[3]] : 0u;
            const u32 lo3 = v[2] ? xh[b1 + o[2]] : 0u, hi3 = v[3] ? xh[b1 + o[3]] : 0u;
            a[mt][0] = lo0 | (hi0 << 16);
            a[mt][1] = lo1 | (hi1 << 16);
            a[mt][2] = lo2 | (hi2 << 16);
            a[mt][3] = lo3 | (hi3 << 16);
        }
#pragma unroll
        for (u32 nt = 0u; nt < 8u; nt++) {
            const u16* wr = wh + (nt * 8u + gid) * MMA_WK + ks * 16u + tig * 2u;
            const u32 b[2] = {*reinterpret_cast<const u32*>(wr), *reinterpret_cast<const u32*>(wr + 8)};
#pragma unroll
            for (u32 mt = 0u; mt < 2u; mt++) {
                mma16816(acc[mt][nt], a[mt], b);
            }
        }
    }
#pragma unroll
    for (u32 mt = 0u; mt < 2u; mt++) {
#pragma unroll
        for (u32 half = 0u; half < 2u; half++) {
            const u32 px = warp * MMA_TILE_W + mt * 16u + gid + 8u * half;
#pragma unroll
            for (u32 nt = 0u; nt < 8u; nt++) {
                const u32 ch = nt * 8u + tig * 2u;
                const u32 lo = float_to_half(conv_act(p, acc[mt][nt][2u * half], ssh[ch]));
                const u32 hi = float_to_half(conv_act(p, acc[mt][nt][2u * half + 1u], ssh[ch + 1u]));
                *reinterpret_cast<u32*>(yh + px * MMA_YW + ch) = lo | (hi << 16);
            }
        }
    }
    __syncthreads();
    for (u32 i = threadIdx.x; i < MMA_PIXELS * 8u; i += blockDim.x) {
        const u32 px = i / 8u;
        const u32 s = i - px * 8u;
        const u32 oy = oy0 + px / MMA_TILE_W;
        const u32 ox = ox0 + px % MMA_TILE_W;
        const u32 ch = g0 + s * 8u;
        if (oy < p.oh && ox < p.ow && ch < p.k) {
            const u64 e = (((u64)image * p.oh + oy) * p.ow + ox) * p.k + ch;
            *reinterpret_cast<uint4*>(reinterpret_cast<u16*>(p.y) + e) =
                *reinterpret_cast<const uint4*>(yh + px * MMA_YW + s * 8u);
        }
    }
}
