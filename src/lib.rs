//! # neural-frame
//!
//! Zero-copy neural inference on rendered frames: a Vulkan image goes through
//! an ONNX model run by ONNX Runtime and comes back as a Vulkan image, and the
//! pixels never pass through system memory.
//!
//! ```text
//!  renderer VkImage or buffer (RGBA8 / BGRA8 / RGBA16F)
//!    │ Vulkan compute "pre" pass: de-tile, NHWC→NCHW, u8→f32/f16, alpha kept aside
//!    ▼
//!  exported input VkBuffer ──(OPAQUE_FD, imported once)──► CUDA device pointer
//!    │ timeline semaphore: the model may start
//!    ▼
//!  ONNX Runtime, CUDA EP, bound by pointer
//!    ▼
//!  exported output VkBuffer ◄──(OPAQUE_FD, imported once)── CUDA device pointer
//!    │ timeline semaphore: the model is done
//!    ▼
//!  Vulkan compute "post" pass ─► output VkImage or buffer
//! ```
//!
//! ## A renderer's own frames
//!
//! A renderer registers the images (or buffers) it rotates through once, then
//! submits each frame with the semaphore value it signalled after drawing, and
//! gets back two semaphore values to put in its own `vkQueueSubmit`: "input
//! consumed" (it may draw the next frame into that image) and "output ready"
//! (it may read the result). Nothing on that path waits on the host.
//!
//! ```no_run
//! use ash::vk;
//! use neural_frame::{CallerDevice, CallerImage, Frame, NeuralFrameContext, Submitted};
//!
//! # fn renderer(device: CallerDevice, images: &[vk::Image], outputs: &[vk::Image], rendered: vk::Semaphore)
//! # -> neural_frame::Result<()> {
//! // Bring your own device: the context records and submits on the renderer's device and queue.
//! // SAFETY: the handles are valid and outlive the context; the queue is shared by the stated rule.
//! let mut ctx = unsafe { NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build_on(device) }?;
//! let (ow, oh) = ctx.output_size();
//! let describe = |image, format, width, height, usage| CallerImage {
//!     image, format, width, height, usage, tiling: vk::ImageTiling::OPTIMAL, layout: vk::ImageLayout::GENERAL,
//! };
//! let mut ring = Vec::new();
//! for (&input, &output) in images.iter().zip(outputs) {
//!     // SAFETY: images of the renderer's device, alive while registered.
//!     let i = unsafe { ctx.register_input_image(describe(input, vk::Format::B8G8R8A8_UNORM, 960, 540, vk::ImageUsageFlags::SAMPLED)) }?;
//!     let o = unsafe { ctx.register_output_image(describe(output, vk::Format::R8G8B8A8_UNORM, ow, oh, vk::ImageUsageFlags::STORAGE)) }?;
//!     ring.push((i, o));
//! }
//! // SAFETY: a timeline semaphore of the renderer's device.
//! let rendered = unsafe { ctx.register_timeline(rendered) }?;
//! for n in 1..=100u64 {
//!     let (input, output) = ring[n as usize % ring.len()];
//!     // ... the renderer draws into `input` and signals `rendered = n` ...
//!     if let Submitted::Frame(ticket) = ctx.submit(Frame::new(input, output).wait_for(rendered, n))? {
//!         let _ready = ticket.output_ready(); // wait for this in the renderer's next vkQueueSubmit
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! The other way in, import by file descriptor, keeps the renderer's device to
//! itself: see [`ImageImport`], [`BufferImport`] and [`SemaphoreImport`], and
//! `examples/foreign_renderer.rs` for both ways end to end. On Windows the same
//! calls take NT handles (`OPAQUE_WIN32`): see [`ExternalHandle`].
//!
//! ## One frame from a tool
//!
//! ```no_run
//! use ash::vk;
//! use neural_frame::{Backend, NeuralFrameContext};
//!
//! let mut ctx = NeuralFrameContext::builder("models/upscale.onnx")
//!     .backend(Backend::Auto) // CUDA where possible, else the CPU backend, announced
//!     .frame_size(960, 540)
//!     .build()?;
//! let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
//! let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
//! ctx.upload(input, &vec![128; 960 * 540 * 4])?;
//! let stats = ctx.infer(input, output)?;
//! let upscaled = ctx.readback(output)?; // 3840×2160 RGBA8
//! # Ok::<(), neural_frame::Error>(())
//! ```
//!
//! ## Errors and logging
//!
//! Every failure is an [`Error`]; [`Error::kind`] classifies it for control
//! flow. The library never prints: it logs through the [`log`] facade (target
//! `neural_frame`, and `vulkan` for validation messages), so a renderer's
//! logger — `log`'s or `tracing`'s through `tracing-log` — shows what it does.
//!
//! ## Depending on it
//!
//! `neural-frame = { version = "0.1", default-features = false, features = ["cuda"] }`
//! is the library alone: features `cuda` (the CUDA backend), `image`
//! (`image_io`, PNG/JPEG files), `diagnostics` (the benchmark's probes) and `tune`
//! (the tune cache: `serde_json`, `sha2`) are on by default. The command line is the separate `neural-frame-cli` package. The
//! types a caller names come from here: [`ash`] and [`ort`] are this crate's own.
//!
//! ## Process-wide state
//!
//! Two things outlive a context, by design: ONNX Runtime and its environment are
//! loaded once per process (the first library found, or the first
//! [`ContextBuilder::ort_library`], wins: see [`load_onnx_runtime`]), and the
//! first Vulkan instance keeps one minimal instance alive until the process
//! exits (NVIDIA's driver cannot be loaded and unloaded more than about twenty
//! times in one process). Nothing else is global; the library spawns no
//! processes and reads only the environment variables `ORT_DYLIB_PATH`,
//! `NEURAL_FRAME_VULKAN_LIBRARY`, and `XDG_DATA_HOME`, `HOME` and `VIRTUAL_ENV`
//! where it looks for ONNX Runtime (see [`load_onnx_runtime`]), and (feature `tune`, on by default) the tune
//! cache's file, found by `NEURAL_FRAME_TUNE_CACHE`, `XDG_CACHE_HOME` or `HOME`
//! (see [`tune`]), which a context reads when its builder was given no tuning option.
//!
//! ## Ownership
//!
//! Every Vulkan or CUDA object has exactly one owning Rust value whose `Drop`
//! releases it; children hold an `Arc` of their parent; structs declare their
//! fields in teardown order: ONNX Runtime values → CUDA mappings → CUDA imports
//! → Vulkan objects → device → instance → `ash::Entry`. Objects of the caller
//! (bring your own device) are borrowed, never destroyed.

#![warn(missing_docs)]

mod context;
mod cuda;
mod error;
mod files;
mod graph;
mod handle;
#[cfg(feature = "image")]
pub mod image_io;
mod interop;
mod onnx;
mod ops;
pub mod preflight;
#[cfg(feature = "tune")]
pub mod tune;
mod vulkan;

/// The `ash` this crate is built with: name `neural_frame::ash::vk` and a crate
/// that does not pin its own ash still compiles against this API.
pub use ash;
pub use context::builder::DEFAULT_FRAME_TIMEOUT;
pub use context::foreign::{
    BufferImport, CallerBuffer, CallerDevice, CallerImage, CallerMemory, DeviceIdentity, ImageImport, ImportError,
    MemoryImport, PixelLayout, SemaphoreImport,
};
pub use context::planes::{PLANE_FORMATS, PlanarFrame, Plane};
pub use context::register::{
    AUX_INPUT_IMAGE_FORMATS, INPUT_FORMATS, INPUT_USAGE, OUTPUT_BUFFER_FORMATS, OUTPUT_IMAGE_FORMATS, OUTPUT_USAGE,
};
pub use context::registry::{InputId, MemoryId, OutputId, TimelineId};
pub use context::setup::{BackendReport, StartupTimes, suitable_devices};
pub use context::stream::{ChromaSiting, HostLayout, HostStream, Subsampling, YuvLayout, YuvMatrix, YuvRange};
pub use context::sync::{ExportedTimelines, Frame, FrameStats, SignalPoint, Submitted, SyncMode, SyncPoint, Ticket};
pub use context::tiles::{DEFAULT_TILE_OVERLAP, Tiling};
pub use context::{
    BackPressure, Backend, ContextBuilder, CudaOptions, HandoverOptions, ModelOptions, NeuralFrameContext, PostWait,
    ProviderOptions, Tuning, TuningInEffect,
};
pub use error::{Error, ErrorKind, Result, format_uuid, parse_uuid};
pub use graph::precision::{Precision, PrecisionCheck, PrecisionReport};
pub use handle::ExternalHandle;
pub use onnx::session::check_model_file;
pub use onnx::{
    ColorOrder, ConvSearch, Element, Layout, ModelContract, NamedTensor, Normalization, PROBE_SIZE, RuntimeInfo, Scale,
    ScaleSource, TensorDeclaration, TensorKind,
};
/// The `ort` this crate is built with (an exact pre-release pin), for
/// [`ort_environment`]'s sessions.
pub use ort;
pub use vulkan::{
    AdapterInfo, DeviceSelector, EXTERNAL_MEMORY_EXTENSION, EXTERNAL_MEMORY_HANDLE_TYPE, EXTERNAL_SEMAPHORE_EXTENSION,
    EXTERNAL_SEMAPHORE_HANDLE_TYPE,
};

/// The benchmark's probes and the tests' hooks (cargo feature `diagnostics`, on by default).
#[cfg(feature = "diagnostics")]
pub mod diagnostics {
    pub use crate::context::diagnostics::{FrameTrace, HostParts, HostPinned, Interference, InterferenceCase, Load};

    /// Where [`fail_fused_convolutions`] makes the fused convolutions' CUDA kernels fail.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum FusedFailure {
        /// When ONNX Runtime creates them (the session's creation fails).
        Create,
        /// When they run (the session's first run fails).
        Run,
    }

    /// Makes the CUDA kernels of the fused convolutions (`ai.neural_frame::ConvAct`) fail, in
    /// the whole process, from the next session (`Create`) or run (`Run`) on, or no more
    /// (`None`): for the GPU tests of the fallbacks, as a GPU whose cuDNN cannot fuse would.
    /// Not for applications.
    #[doc(hidden)]
    pub fn fail_fused_convolutions(at: Option<FusedFailure>) {
        let v = match at {
            None => 0,
            Some(FusedFailure::Create) => 1,
            Some(FusedFailure::Run) => 2,
        };
        // Without the `cuda` feature there is no CUDA kernel to fail.
        #[cfg(feature = "cuda")]
        crate::ops::conv_act::FAIL.store(v, std::sync::atomic::Ordering::Relaxed);
        #[cfg(not(feature = "cuda"))]
        let _ = v;
    }
}

/// Loads ONNX Runtime (once per process) the way contexts do: `explicit`, then
/// `ORT_DYLIB_PATH`, then `.runtime/ort-gpu` or `.runtime/ort-cpu` under the
/// working directory or the executable's parent directories. What was loaded.
///
/// ONNX Runtime and its environment are process-wide: the first successful (or
/// failed) load decides for the whole process, every context shares it, and a
/// later call that names another library is an [`ErrorKind::InvalidArgument`].
/// The library spawns no process to look for it; the CLI asks `python3` for an
/// installed `onnxruntime` package and passes that path here.
///
/// ```no_run
/// let rt = neural_frame::load_onnx_runtime(None)?;
/// println!("ONNX Runtime {} with {}", rt.version, rt.providers.join(", "));
/// # Ok::<(), neural_frame::Error>(())
/// ```
pub fn load_onnx_runtime(explicit: Option<&std::path::Path>) -> Result<RuntimeInfo> {
    onnx::runtime::load(explicit).cloned()
}

/// Where [`load_onnx_runtime`] would load ONNX Runtime from, without loading it:
/// the same search, for a caller that wants to offer its own fallback when
/// nothing is found.
///
/// ```no_run
/// use std::path::PathBuf;
///
/// // Fall back to a library of the application's own when the standard places have none.
/// let library = match neural_frame::locate_onnx_runtime(None) {
///     Ok(found) => found,
///     Err(_) => PathBuf::from("/opt/myapp/lib/libonnxruntime.so.1.31.1"),
/// };
/// let rt = neural_frame::load_onnx_runtime(Some(&library))?;
/// # Ok::<(), neural_frame::Error>(())
/// ```
pub fn locate_onnx_runtime(explicit: Option<&std::path::Path>) -> Result<std::path::PathBuf> {
    onnx::runtime::find(explicit).map(|(library, _)| library)
}

/// The environment of the ONNX Runtime that neural-frame loaded (loading it first
/// if needed), for sessions of the caller's own beside the context's: a CPU
/// reference run, say. It is process-wide and lives until the process exits.
///
/// ```no_run
/// use neural_frame::ort::session::Session;
///
/// let env = neural_frame::ort_environment()?;
/// let reference = Session::builder(env)?.commit_from_file("models/upscale.onnx")?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn ort_environment() -> Result<&'static ort::environment::Environment> {
    onnx::runtime::environment()
}

/// The README's examples, compiled as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
struct ReadmeDoctests;

/// The library guide's examples (docs/library.md), compiled as doctests.
#[doc = include_str!("../docs/library.md")]
#[cfg(doctest)]
struct LibraryGuideDoctests;
