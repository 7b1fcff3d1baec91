//! The CUDA passes' parameters (`src/cuda/passes.cu`), laid out as the kernels
//! take them. Plain data, in every build: the context fills them whether or not
//! CUDA is compiled in.

/// Image and buffer formats as the kernels read and write them (`FORMAT_*` in passes.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum SurfaceFormat {
    /// 8-bit codes in R, G, B, A order (unorm or sRGB).
    Rgba8 = 0,
    /// 8-bit codes in B, G, R, A order.
    Bgra8 = 1,
    /// Four halves.
    Rgba16F = 2,
    /// One half (extra inputs: depth).
    R16F = 3,
    /// One float.
    R32F = 4,
    /// Two halves (extra inputs: motion vectors).
    Rg16F = 5,
    /// Two floats.
    Rg32F = 6,
    /// Four floats.
    Rgba32F = 7,
    /// One unorm byte (planes).
    R8 = 8,
}

/// The element of a CUDA array that holds an image of a [`SurfaceFormat`].
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayElement {
    /// Unsigned bytes.
    U8,
    /// Halves.
    Half,
    /// Floats.
    Float,
}

impl SurfaceFormat {
    /// The CUDA array an image of this format maps as: its element and channels.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn array(self) -> (ArrayElement, u32) {
        match self {
            Self::Rgba8 | Self::Bgra8 => (ArrayElement::U8, 4),
            Self::Rgba16F => (ArrayElement::Half, 4),
            Self::R16F => (ArrayElement::Half, 1),
            Self::R32F => (ArrayElement::Float, 1),
            Self::Rg16F => (ArrayElement::Half, 2),
            Self::Rg32F => (ArrayElement::Float, 2),
            Self::Rgba32F => (ArrayElement::Float, 4),
            Self::R8 => (ArrayElement::U8, 1),
        }
    }
}

/// How a kernel reaches the caller's memory (`ACCESS_*` in passes.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Access {
    /// An image, through a surface object.
    Surface = 0,
    /// A linear buffer, through a device pointer.
    Buffer = 1,
    /// Planes of floats, halves or unorm bytes ([`SurfaceFormat::R32F`], [`SurfaceFormat::R16F`],
    /// [`SurfaceFormat::R8`]), one a colour channel, through a device pointer each.
    Planes = 2,
}

/// [`TensorParams::element`] (and [`ShuffleParams::element`]): `ELEMENT_*` in passes.cu.
pub const ELEMENT_F32: u32 = 0;
/// See [`ELEMENT_F32`].
pub const ELEMENT_F16: u32 = 1;
/// See [`ELEMENT_F32`].
pub const ELEMENT_U8: u32 = 2;

/// The tensor side of a pass (`struct Tensor` in passes.cu).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct TensorParams {
    /// Device pointer to the tensor.
    pub data: u64,
    /// 0 f32, 1 f16, 2 u8.
    pub element: u32,
    /// 1: [1, H, W, C].
    pub nhwc: u32,
    /// C, 1 to 4.
    pub channels: u32,
    /// 1: tensor channels 0 and 2 are B and R.
    pub bgr: u32,
    /// t = x·mul + add, per tensor channel.
    pub mul: [f32; 4],
    /// See `mul`.
    pub add: [f32; 4],
}

/// `struct PreParams` in passes.cu.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct PreParams {
    /// The input's surface object ([`Access::Surface`]) or device pointer ([`Access::Buffer`]).
    pub source: u64,
    /// One f32 per tensor pixel for the frame's alpha, or 0: not written.
    pub alpha: u64,
    /// Tensor (tile) width.
    pub width: u32,
    /// Tensor (tile) height.
    pub height: u32,
    /// [`SurfaceFormat`] as u32.
    pub format: u32,
    /// [`Access`] as u32.
    pub kind: u32,
    /// A buffer's row pitch in bytes.
    pub pitch: u32,
    /// The tile's place in the source (0, 0 untiled).
    pub origin_x: u32,
    /// See `origin_x`.
    pub origin_y: u32,
    /// The frame's tag (non-zero): where a pixel's alpha is not 1, the kernel writes it
    /// into the word after the alpha (`alpha[width × height]`), so that the post pass
    /// knows the frame opaque when that word is not the tag. 0: no alpha is written.
    pub tag: u32,
    /// The model's input tensor.
    pub tensor: TensorParams,
    /// [`Access::Planes`]: planes 1 and 2 (plane 0 is `source`), device pointers.
    pub plane1: u64,
    /// See `plane1`.
    pub plane2: u64,
    /// [`Access::Planes`]: planes 1 and 2's row pitch in bytes (plane 0's is `pitch`).
    pub pitch1: u32,
    /// See `pitch1`.
    pub pitch2: u32,
}

/// `struct PostParams` in passes.cu.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct PostParams {
    /// The output's surface object ([`Access::Surface`]) or device pointer ([`Access::Buffer`]).
    pub target: u64,
    /// The pre pass's alpha (width × height f32), or 0: alpha 1.
    pub alpha: u64,
    /// Tensor input (tile) width.
    pub width: u32,
    /// Tensor input (tile) height.
    pub height: u32,
    /// Tensor output (tile) width.
    pub out_width: u32,
    /// Tensor output (tile) height.
    pub out_height: u32,
    /// [`SurfaceFormat`] as u32 (RGBA8, BGRA8 in buffers, or RGBA16F).
    pub format: u32,
    /// [`Access`] as u32.
    pub kind: u32,
    /// A buffer's row pitch in bytes.
    pub pitch: u32,
    /// The tile's place in the output, in output pixels (0, 0 untiled).
    pub origin_x: u32,
    /// See `origin_x`.
    pub origin_y: u32,
    /// Output pixels the tile shares with the tile to its left (written before it).
    pub blend_left: u32,
    /// ... with the tiles above it.
    pub blend_top: u32,
    /// ... with the tile to its right (written after it).
    pub blend_right: u32,
    /// ... with the tiles below it.
    pub blend_bottom: u32,
    /// Output pixels at each end of a shared strip that blending ignores (the overlap).
    pub margin_x: u32,
    /// See `margin_x`.
    pub margin_y: u32,
    /// The frame's tag where the frame's own pre kernel ran on CUDA (see
    /// [`PreParams::tag`]): the frame is opaque unless the word after the alpha
    /// holds it. 0: the alpha is read as it is.
    pub tag: u32,
    /// The model's output tensor.
    pub tensor: TensorParams,
    /// [`Access::Planes`]: planes 1 and 2 (plane 0 is `target`), device pointers.
    pub plane1: u64,
    /// See `plane1`.
    pub plane2: u64,
    /// [`Access::Planes`]: planes 1 and 2's row pitch in bytes (plane 0's is `pitch`).
    pub pitch1: u32,
    /// See `pitch1`.
    pub pitch2: u32,
}

/// `struct ShuffleParams` in tail.cu: the fused-convolution rewrite's DepthToSpace
/// (`src/onnx/shuffle.rs`), NHWC `[n, h, w, stride]` (plus `y` and `bias`), of which the first
/// `c·b²` channels a pixel are read, to NCHW `[n, c, h·b, w·b]`.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct ShuffleParams {
    /// Device pointer to the NHWC input.
    pub x: u64,
    /// Device pointer to a second input of x's shape, added to it; 0 for none.
    pub y: u64,
    /// Device pointer to the NCHW output.
    pub out: u64,
    /// Device pointer to `c·block²` values added by input channel; 0 for none.
    pub bias: u64,
    /// Device pointer to NCHW `[n, c, h, w]`, each value added to its pixel's block (a nearest
    /// upsample); 0 for none.
    pub up: u64,
    /// Batch.
    pub n: u32,
    /// The input's height.
    pub h: u32,
    /// The input's width.
    pub w: u32,
    /// Output channels (the input has `c·block²`, or `stride`).
    pub c: u32,
    /// The block size b.
    pub block: u32,
    /// 1: ONNX's CRD order; 0: DCR.
    pub crd: u32,
    /// 0 f32, 1 f16 (as [`TensorParams::element`]).
    pub element: u32,
    /// `x`'s and `y`'s channels a pixel: `c·block²`, or more where a last convolution's filters
    /// were padded (the first `c·block²` are read); 0 reads as `c·block²`.
    pub stride: u32,
}

/// `struct ConvParams` in conv.cu: the fused rewrite's `ConvAct` reading an NCHW input
/// directly (`nf_conv_nchw`; `input_layout` "nchw" in `src/onnx/convact.rs`).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct ConvParams {
    /// Device pointer to the NCHW input `[n, c, h, w]`.
    pub x: u64,
    /// Device pointer to the KRSC weight `[k, r, s, c]`.
    pub w: u64,
    /// Device pointer to `k` bias values; 0 for none.
    pub bias: u64,
    /// Device pointer to `k` PReLU slopes; 0 for none.
    pub slope: u64,
    /// Device pointer to the NHWC output `[n, oh, ow, k]`, 16-byte aligned.
    pub y: u64,
    /// Batch.
    pub n: u32,
    /// Input channels.
    pub c: u32,
    /// The input's height.
    pub h: u32,
    /// The input's width.
    pub width: u32,
    /// Output channels, a multiple of 8.
    pub k: u32,
    /// The window's height.
    pub r: u32,
    /// The window's width.
    pub s: u32,
    /// The output's height.
    pub oh: u32,
    /// The output's width.
    pub ow: u32,
    /// Padding above.
    pub pad_top: i32,
    /// Padding to the left.
    pub pad_left: i32,
    /// Vertical stride.
    pub stride_h: u32,
    /// Horizontal stride.
    pub stride_w: u32,
    /// Vertical dilation.
    pub dil_h: u32,
    /// Horizontal dilation.
    pub dil_w: u32,
    /// `CONV_ACT_*` in conv.cu: 0 none, 1 ReLU, 2 LeakyReLU (`alpha`), 3 PReLU (`slope`).
    pub act: u32,
    /// LeakyReLU's slope.
    pub alpha: f32,
    /// 0 f32, 1 f16 (as [`TensorParams::element`]).
    pub element: u32,
}

/// [`ConvParams::act`]: no activation.
#[cfg(feature = "cuda")]
pub const CONV_ACT_NONE: u32 = 0;
/// See [`CONV_ACT_NONE`].
#[cfg(feature = "cuda")]
pub const CONV_ACT_RELU: u32 = 1;
/// See [`CONV_ACT_NONE`].
#[cfg(feature = "cuda")]
pub const CONV_ACT_LEAKY: u32 = 2;
/// See [`CONV_ACT_NONE`].
#[cfg(feature = "cuda")]
pub const CONV_ACT_PRELU: u32 = 3;
/// The most taps (r·s·c) `nf_conv_nchw` holds (`CONV_MAX_TAPS` in conv.cu).
#[cfg(feature = "cuda")]
pub const CONV_MAX_TAPS: u32 = 64;
/// Output channels a block of `nf_conv_nchw` computes (`CONV_CHUNK` in conv.cu).
#[cfg(feature = "cuda")]
pub const CONV_CHUNK: u32 = 16;
/// Output pixels a thread of `nf_conv_nchw` computes (`CONV_PIXELS` in conv.cu).
#[cfg(feature = "cuda")]
pub const CONV_PIXELS: u32 = 4;
/// `nf_conv3x3_mma` (conv_mma.cu: a 3×3 window of stride and dilation 1 over at most this many
/// input channels, f16, on tensor cores): its limit on channels, its tile of output pixels
/// (width, height), the output channels a block and its threads (`MMA_MAX_C`, `MMA_TILE_W`,
/// `MMA_TILE_H`, `MMA_GROUP`, `MMA_BLOCK` in conv_mma.cu).
#[cfg(feature = "cuda")]
pub const MMA_MAX_C: u32 = 4;
/// See [`MMA_MAX_C`].
#[cfg(feature = "cuda")]
pub const MMA_TILE: (u32, u32) = (32, 4);
/// See [`MMA_MAX_C`].
#[cfg(feature = "cuda")]
pub const MMA_GROUP: u32 = 64;
/// See [`MMA_MAX_C`].
#[cfg(feature = "cuda")]
pub const MMA_BLOCK: u32 = 128;

const _: () = assert!(std::mem::size_of::<TensorParams>() == 56);
const _: () = assert!(std::mem::size_of::<PreParams>() == 48 + 56 + 24);
const _: () = assert!(std::mem::size_of::<PostParams>() == 80 + 56 + 24);
const _: () = assert!(std::mem::size_of::<ShuffleParams>() == 40 + 32);
const _: () = assert!(std::mem::size_of::<ConvParams>() == 40 + 18 * 4);
