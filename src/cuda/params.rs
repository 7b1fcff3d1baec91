//! The CUDA passes' parameters (`src/cuda/passes.cu`), laid out as the kernels
//! take them. Plain data, in every build: the context fills them whether or not
//! CUDA is compiled in.

/// Image formats as the kernels read and write them (`FORMAT_*` in passes.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum SurfaceFormat {
    /// 8-bit codes in R, G, B, A order (unorm or sRGB).
    Rgba8 = 0,
    /// 8-bit codes in B, G, R, A order.
    Bgra8 = 1,
    /// Four halves.
    Rgba16F = 2,
}

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
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct PreParams {
    /// The input image's surface.
    pub surface: u64,
    /// One f32 per pixel for the frame's alpha, or 0.
    pub alpha: u64,
    /// Frame width.
    pub width: u32,
    /// Frame height.
    pub height: u32,
    /// [`SurfaceFormat`] as u32.
    pub format: u32,
    /// Padding (0).
    pub pad: u32,
    /// The model's input tensor.
    pub tensor: TensorParams,
}

/// `struct PostParams` in passes.cu.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct PostParams {
    /// The output image's surface.
    pub surface: u64,
    /// The pre pass's alpha (width × height f32).
    pub alpha: u64,
    /// Input frame width.
    pub width: u32,
    /// Input frame height.
    pub height: u32,
    /// Output width.
    pub out_width: u32,
    /// Output height.
    pub out_height: u32,
    /// [`SurfaceFormat`] as u32 (RGBA8 or RGBA16F).
    pub format: u32,
    /// Padding (0).
    pub pad: u32,
    /// The model's output tensor.
    pub tensor: TensorParams,
}

impl TensorParams {
    /// The kernels' description of a `kind` tensor at device address `data`.
    pub(crate) fn new(kind: crate::onnx::TensorKind, data: u64) -> Self {
        let w = kind.pass_words();
        let element = match kind.element {
            crate::onnx::Element::F32 => 0,
            crate::onnx::Element::F16 => 1,
            crate::onnx::Element::U8 => 2,
        };
        Self {
            data,
            element,
            nhwc: w[0],
            channels: w[1],
            bgr: w[2],
            mul: [w[3], w[4], w[5], w[6]].map(f32::from_bits),
            add: [w[7], w[8], w[9], w[10]].map(f32::from_bits),
        }
    }
}
