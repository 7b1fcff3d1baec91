//! # neural-frame
//!
//! Zero-copy neural inference on rendered frames: a Vulkan image goes through
//! an ONNX model run by ONNX Runtime and comes back as a Vulkan image, and the
//! pixels never pass through system memory.
//!
//! ```text
//!  renderer VkImage (RGBA8 / BGRA8 / RGBA16F, optimal tiling)
//!    │ Vulkan compute "pre" pass: de-tile, NHWC→NCHW, u8→f32/f16
//!    ▼
//!  exported input VkBuffer ──(OPAQUE_FD, imported once)──► CUDA device pointer
//!    │ timeline semaphore "input ready = n"
//!    ▼
//!  ONNX Runtime, CUDA EP, bound by pointer
//!    ▼
//!  exported output VkBuffer ◄──(OPAQUE_FD, imported once)── CUDA device pointer
//!    │ timeline semaphore "output ready = n"
//!    ▼
//!  Vulkan compute "post" pass ─► output VkImage
//! ```
//!
//! ## Use
//!
//! ```no_run
//! use std::sync::Arc;
//! use ash::vk;
//! use neural_frame::pipeline::{Backend, NeuralFrameContext, Submitted};
//!
//! let mut ctx = NeuralFrameContext::builder("models/upscale.onnx")
//!     .backend(Backend::Auto) // CUDA where possible, else the CPU backend, announced
//!     .frame_size(960, 540)
//!     .slots(3)
//!     .build()?;
//! let input = Arc::new(ctx.create_input_image(vk::Format::B8G8R8A8_UNORM)?);
//! let output = Arc::new(ctx.create_output_image()?);
//! // One frame, waited for:
//! let stats = ctx.infer(&input, &output)?;
//! println!("model {:.2} ms on the {} backend", stats.infer_ms, ctx.backend_name());
//! // Several in flight: submit returns at once, wait retires.
//! if let Submitted::Frame(ticket) = ctx.submit(&input, &output)? {
//!     ctx.wait(ticket)?;
//! }
//! # Ok::<(), neural_frame::Error>(())
//! ```
//!
//! ## Ownership
//!
//! Every Vulkan or CUDA object has exactly one owning Rust value whose `Drop`
//! releases it. Children hold an `Arc` of their parent (an image holds its
//! [`vulkan::Device`], a device its [`vulkan::Instance`]), so a parent outlives
//! its children. CUDA mappings own their import ([`cuda::ExternalMemory`] is
//! moved into a mapping), so a mapping cannot outlive what it maps, and a
//! struct owning several objects declares its fields in teardown order:
//! ONNX Runtime values → CUDA mappings → CUDA imports → Vulkan objects →
//! device → instance → `ash::Entry`.

#![warn(missing_docs)]

/// Prints a step to stderr when `NEURAL_FRAME_TRACE` is set (diagnosing stalls on a GPU machine).
macro_rules! trace {
    ($($t:tt)*) => {
        if $crate::trace_enabled() {
            eprintln!("[neural-frame {:>9.3} ms] {}", $crate::trace_clock_ms(), format_args!($($t)*));
        }
    };
}

static TRACE_START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Whether `NEURAL_FRAME_TRACE` is set.
pub fn trace_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NEURAL_FRAME_TRACE").is_some_and(|v| !v.is_empty() && v != "0"))
}

#[doc(hidden)]
pub fn trace_clock_ms() -> f64 {
    TRACE_START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e3
}

pub mod bench;
pub mod cuda;
pub mod error;
pub mod image_io;
pub mod onnx;
pub mod pipeline;
pub mod preflight;
pub mod vulkan;

pub use error::{Error, Result};
pub use pipeline::{Backend, NeuralFrameContext};
