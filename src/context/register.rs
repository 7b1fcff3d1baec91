//! Registering inputs, outputs and timelines: the context's own images, or the
//! caller's by handle (by file descriptor: `import.rs`); unregistering;
//! uploads and read-backs. Everything is checked here, once, with errors that
//! name what is wrong; frames then only name handles.

use ash::vk;

use crate::context::NeuralFrameContext;
use crate::context::foreign::{CallerBuffer, CallerImage, CallerMemory, PixelLayout};
use crate::context::record::size_mismatch;
use crate::context::registry::{
    CudaAccess, CudaView, Entry, InputId, Origin, OutputId, Registration, Resource, TimelineId,
};
use crate::error::{Error, Result};
use crate::interop;
use crate::onnx::TensorKind;
use crate::vulkan::caps;
use crate::vulkan::compute::ImageView;
use crate::vulkan::memory::AllocationInfo;
use crate::vulkan::{Image, ImageDesc, TimelineSemaphore, transfer};

/// Formats the pre pass reads (images and buffers).
///
/// ```
/// use ash::vk;
/// use neural_frame::INPUT_FORMATS;
///
/// // A swapchain's usual formats go in as they are.
/// assert!(INPUT_FORMATS.contains(&vk::Format::B8G8R8A8_SRGB));
/// assert!(!INPUT_FORMATS.contains(&vk::Format::R8G8B8_UNORM)); // 3 channels: convert first
/// ```
pub const INPUT_FORMATS: [vk::Format; 5] = [
    vk::Format::R8G8B8A8_UNORM,
    vk::Format::R8G8B8A8_SRGB,
    vk::Format::B8G8R8A8_UNORM,
    vk::Format::B8G8R8A8_SRGB,
    vk::Format::R16G16B16A16_SFLOAT,
];
/// Formats the post pass writes into an image (a storage image).
///
/// ```
/// use ash::vk;
/// use neural_frame::{OUTPUT_BUFFER_FORMATS, OUTPUT_IMAGE_FORMATS};
///
/// // BGRA8 results come in buffers, not images.
/// assert!(!OUTPUT_IMAGE_FORMATS.contains(&vk::Format::B8G8R8A8_UNORM));
/// assert!(OUTPUT_BUFFER_FORMATS.contains(&vk::Format::B8G8R8A8_UNORM));
/// ```
pub const OUTPUT_IMAGE_FORMATS: [vk::Format; 2] = [vk::Format::R8G8B8A8_UNORM, vk::Format::R16G16B16A16_SFLOAT];
/// Formats the post pass writes into a linear buffer.
///
/// ```
/// use ash::vk;
/// use neural_frame::OUTPUT_BUFFER_FORMATS;
///
/// let wanted = vk::Format::R16G16B16A16_SFLOAT; // an HDR renderer's
/// assert!(OUTPUT_BUFFER_FORMATS.contains(&wanted));
/// ```
pub const OUTPUT_BUFFER_FORMATS: [vk::Format; 4] = [
    vk::Format::R8G8B8A8_UNORM,
    vk::Format::R8G8B8A8_SRGB,
    vk::Format::B8G8R8A8_UNORM,
    vk::Format::R16G16B16A16_SFLOAT,
];
/// Usage an input image needs.
///
/// ```
/// use ash::vk;
/// use neural_frame::INPUT_USAGE;
///
/// // The renderer's colour target, created so that the context can read it.
/// let usage = vk::ImageUsageFlags::COLOR_ATTACHMENT | INPUT_USAGE;
/// assert!(usage.contains(vk::ImageUsageFlags::SAMPLED));
/// ```
pub const INPUT_USAGE: vk::ImageUsageFlags = vk::ImageUsageFlags::SAMPLED;
/// Usage an output image needs.
///
/// ```
/// use ash::vk;
/// use neural_frame::OUTPUT_USAGE;
///
/// // The image the result lands in, then sampled by the renderer's composite pass.
/// let usage = OUTPUT_USAGE | vk::ImageUsageFlags::SAMPLED;
/// assert!(usage.contains(vk::ImageUsageFlags::STORAGE));
/// ```
pub const OUTPUT_USAGE: vk::ImageUsageFlags = vk::ImageUsageFlags::STORAGE;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Input,
    Output,
}

impl Role {
    pub(super) fn name(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Output => "output",
        }
    }
}

/// Formats an input image may have besides [`INPUT_FORMATS`]: one or two float
/// channels (depth, motion vectors) and four 32-bit floats, for a model's extra
/// inputs (a channel the format lacks reads as 0, alpha as 1).
///
/// ```
/// use ash::vk;
/// use neural_frame::AUX_INPUT_IMAGE_FORMATS;
///
/// assert!(AUX_INPUT_IMAGE_FORMATS.contains(&vk::Format::R32_SFLOAT)); // a depth buffer's copy
/// assert!(AUX_INPUT_IMAGE_FORMATS.contains(&vk::Format::R16G16_SFLOAT)); // motion vectors
/// ```
pub const AUX_INPUT_IMAGE_FORMATS: [vk::Format; 5] = [
    vk::Format::R16_SFLOAT,
    vk::Format::R32_SFLOAT,
    vk::Format::R16G16_SFLOAT,
    vk::Format::R32G32_SFLOAT,
    vk::Format::R32G32B32A32_SFLOAT,
];

fn check_format(role: Role, format: vk::Format, image: bool) -> Result<()> {
    let input_images: Vec<vk::Format> = INPUT_FORMATS.iter().chain(&AUX_INPUT_IMAGE_FORMATS).copied().collect();
    let allowed: &[vk::Format] = match (role, image) {
        (Role::Input, true) => &input_images,
        (Role::Input, false) => &INPUT_FORMATS,
        (Role::Output, true) => &OUTPUT_IMAGE_FORMATS,
        (Role::Output, false) => &OUTPUT_BUFFER_FORMATS,
    };
    if allowed.contains(&format) {
        return Ok(());
    }
    let what = if image { "image" } else { "buffer" };
    Err(Error::InvalidArgument(format!(
        "an {} {what} of format {format:?} cannot be used; the pipeline takes {allowed:?}",
        role.name()
    )))
}

fn check_image_usage(role: Role, usage: vk::ImageUsageFlags) -> Result<()> {
    let need = if role == Role::Input { INPUT_USAGE } else { OUTPUT_USAGE };
    if usage.contains(need) {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "the {} image lacks usage {need:?} (VK_IMAGE_USAGE_{}_BIT), which the {} pass needs; it has {usage:?}",
        role.name(),
        if role == Role::Input { "SAMPLED" } else { "STORAGE" },
        if role == Role::Input { "pre" } else { "post" },
    )))
}

fn owned_image<'a>(reg: &'a Registration, what: &str) -> Result<&'a Image> {
    match (&reg.resource, reg.origin) {
        (Resource::Image { owned: Some(image), .. }, Origin::Owned) => Ok(image),
        _ => Err(Error::InvalidArgument(format!(
            "{what} works on images the context created (create_input_image, create_output_image), not on the \
             caller's"
        ))),
    }
}

impl NeuralFrameContext {
    fn expected_size(&self, role: Role) -> Result<(u32, u32)> {
        let g = self.frame.as_ref().ok_or_else(|| Error::internal("a context without a frame size"))?;
        Ok(if role == Role::Input { (g.width, g.height) } else { (g.out_width, g.out_height) })
    }

    pub(super) fn check_image(
        &self,
        role: Role,
        format: vk::Format,
        size: (u32, u32),
        usage: vk::ImageUsageFlags,
        tiling: vk::ImageTiling,
    ) -> Result<()> {
        check_format(role, format, true)?;
        check_image_usage(role, usage)?;
        let want = self.expected_size(role)?;
        if size != want {
            return Err(size_mismatch(&format!("{} image", role.name()), size, want));
        }
        let feature = if role == Role::Input {
            vk::FormatFeatureFlags::SAMPLED_IMAGE
        } else {
            vk::FormatFeatureFlags::STORAGE_IMAGE
        };
        caps::need_format_features(&self.res.device, format, tiling, feature, role.name())
    }

    pub(super) fn check_buffer(
        &self,
        role: Role,
        layout: &PixelLayout,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> Result<()> {
        check_format(role, layout.format, false)?;
        let want = self.expected_size(role)?;
        if (layout.width, layout.height) != want {
            return Err(size_mismatch(&format!("{} buffer", role.name()), (layout.width, layout.height), want));
        }
        let bpp = caps::texel_bytes(layout.format)? as u64;
        let min_pitch = layout.width as u64 * bpp;
        if layout.row_pitch < min_pitch || !layout.row_pitch.is_multiple_of(4) {
            return Err(Error::InvalidArgument(format!(
                "the {} buffer's row pitch of {} bytes must be a multiple of 4 and at least {min_pitch} \
                 ({} pixels of {bpp} bytes)",
                role.name(),
                layout.row_pitch,
                layout.width
            )));
        }
        if layout.bytes() > size {
            return Err(Error::InvalidArgument(format!(
                "the {} buffer is {size} bytes, but {} rows of {} bytes need {}",
                role.name(),
                layout.height,
                layout.row_pitch,
                layout.bytes()
            )));
        }
        if !usage.contains(vk::BufferUsageFlags::STORAGE_BUFFER) {
            return Err(Error::InvalidArgument(format!(
                "the {} buffer lacks usage STORAGE_BUFFER (VK_BUFFER_USAGE_STORAGE_BUFFER_BIT), which the passes need; \
                 it has {usage:?}",
                role.name()
            )));
        }
        let range = self.res.device.limits().max_storage_buffer_range as u64;
        if layout.bytes() > range {
            return Err(Error::Unsupported {
                device: self.res.device.info().name.clone(),
                what: format!("a {} buffer of {} bytes (maxStorageBufferRange = {range})", role.name(), layout.bytes()),
                remedy: "use a smaller frame".into(),
            });
        }
        Ok(())
    }

    /// Whether the model takes (or gives) a buffer of this layout exactly as it
    /// lies: NHWC uint8 RGBA, tightly packed.
    pub(super) fn takes_as_is(&self, role: Role, layout: &PixelLayout) -> bool {
        let kind = if role == Role::Input { self.contract.input } else { self.contract.output };
        // A tiled frame is read and written by the passes, a tile at a time; a model that
        // reads the caller's buffer as it is must give its own alpha (no pre pass keeps it).
        self.tiling.is_none()
            && self.memory_budget.is_none()
            && kind == TensorKind::NHWC_U8_RGBA
            && (role == Role::Output || self.contract.output.channels == 4)
            && matches!(layout.format, vk::Format::R8G8B8A8_UNORM | vk::Format::R8G8B8A8_SRGB)
            && layout.row_pitch == layout.width as u64 * 4
    }

    pub(super) fn insert(&mut self, role: Role, reg: Registration) -> crate::context::registry::Key {
        let entry = if role == Role::Input { Entry::Input(reg) } else { Entry::Output(reg) };
        self.res.registry.insert(entry)
    }

    pub(super) fn image_registration(
        &self,
        raw: vk::Image,
        format: vk::Format,
        layout: vk::ImageLayout,
        owned: Option<Image>,
        origin: Origin,
        size: (u32, u32),
    ) -> Result<Registration> {
        // SAFETY: the image is live on the context's device: the context made or imported it, or
        // the caller keeps it alive while registered (register_*_image's contract).
        let view = unsafe { ImageView::new(&self.res.device, raw, format) }?;
        Ok(Registration {
            recorded: Vec::new(),
            direct: None,
            cuda: None,
            resource: Resource::Image { view, raw, format, layout, owned },
            origin,
            width: size.0,
            height: size.1,
        })
    }

    fn create_image(&mut self, role: Role, format: vk::Format) -> Result<crate::context::registry::Key> {
        let (w, h) = self.expected_size(role)?;
        let usage = vk::ImageUsageFlags::TRANSFER_DST
            | vk::ImageUsageFlags::TRANSFER_SRC
            | if role == Role::Input { INPUT_USAGE } else { OUTPUT_USAGE };
        self.check_image(role, format, (w, h), usage, vk::ImageTiling::OPTIMAL)?;
        let desc = ImageDesc::new(w, h, format, usage);
        // With CUDA passes, images of the formats they read and write are shared with CUDA.
        let surface_format = interop::surface_format(format, role == Role::Output);
        let cuda = self.res.engine.cuda_device().filter(|_| self.res.engine.cuda_passes());
        let (image, cuda) = match (cuda, surface_format) {
            (Some(device), Some(surface_format)) => {
                let image = Image::exportable(&self.res.device, desc)?;
                let surface = interop::image_into_cuda(device, image.export()?, (w, h), surface_format)?;
                (image, Some(CudaView { access: CudaAccess::Surface(surface), format: surface_format }))
            }
            _ => (Image::new(&self.res.device, desc)?, None),
        };
        transfer::to_general(&image)?;
        let raw = image.raw();
        let mut reg =
            self.image_registration(raw, format, vk::ImageLayout::GENERAL, Some(image), Origin::Owned, (w, h))?;
        reg.cuda = cuda;
        Ok(self.insert(role, reg))
    }

    /// Creates an input image of the frame size (`format` from [`INPUT_FORMATS`]),
    /// owned by the context, for [`upload`](Self::upload): what a renderer would
    /// hold, for tools and tests.
    ///
    /// ```no_run
    /// # let mut ctx = neural_frame::NeuralFrameContext::builder("models/upscale.onnx").frame_size(4, 4).build()?;
    /// let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.upload(input, &[128; 4 * 4 * 4])?;
    /// ctx.infer(input, output)?;
    /// let pixels = ctx.readback(output)?; // 16×16 RGBA8 for a ×4 model
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn create_input_image(&mut self, format: vk::Format) -> Result<InputId> {
        self.create_image(Role::Input, format).map(InputId)
    }

    /// Creates an output image of the output size (`R8G8B8A8_UNORM` or
    /// `R16G16B16A16_SFLOAT`), owned by the context, for [`readback`](Self::readback).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// let output = ctx.create_output_image(ash::vk::Format::R16G16B16A16_SFLOAT)?;
    /// ctx.infer(input, output)?;
    /// let (width, height) = ctx.output_size();
    /// let texels = ctx.readback(output)?; // 8 bytes a texel: four f16
    /// assert_eq!(texels.len(), (width * height * 8) as usize);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn create_output_image(&mut self, format: vk::Format) -> Result<OutputId> {
        self.create_image(Role::Output, format).map(OutputId)
    }

    /// Says once per registration that the caller's memory by handle takes the Vulkan
    /// passes where frames could otherwise run as CUDA kernels.
    fn by_handle_on_vulkan(&self, role: Role, what: &str) {
        if self.res.engine.cuda_passes() {
            log::warn!(
                "the {} {what} registered by handle runs through the Vulkan passes (a ~0.5 ms cross-API hand-off \
                 a frame): CUDA reaches only memory it imports by file descriptor; allocate it with \
                 VkExportMemoryAllocateInfo (OPAQUE_FD) and register it with register_{}_{what}_with_memory \
                 (images) or import_{}_{what} (on the same device too) to run its frames as CUDA kernels",
                role.name(),
                role.name(),
                role.name()
            );
        }
    }

    fn caller_image(&mut self, role: Role, image: CallerImage) -> Result<crate::context::registry::Key> {
        let key = self.caller_image_checked(role, image)?;
        self.by_handle_on_vulkan(role, "image");
        Ok(key)
    }

    fn caller_image_checked(&mut self, role: Role, image: CallerImage) -> Result<crate::context::registry::Key> {
        self.need_caller_device()?;
        self.check_image(role, image.format, (image.width, image.height), image.usage, image.tiling)?;
        let layout_ok = match role {
            Role::Input => matches!(image.layout, vk::ImageLayout::GENERAL | vk::ImageLayout::SHADER_READ_ONLY_OPTIMAL),
            Role::Output => !matches!(image.layout, vk::ImageLayout::UNDEFINED | vk::ImageLayout::PREINITIALIZED),
        };
        if !layout_ok {
            return Err(Error::InvalidArgument(format!(
                "an {} image cannot be handed over in layout {:?}{}",
                role.name(),
                image.layout,
                if role == Role::Input { " (use GENERAL or SHADER_READ_ONLY_OPTIMAL)" } else { "" }
            )));
        }
        let reg = self.image_registration(
            image.image,
            image.format,
            image.layout,
            None,
            Origin::Caller,
            (image.width, image.height),
        )?;
        Ok(self.insert(role, reg))
    }

    /// Registers one of the caller's images as an input (bring your own device):
    /// the pre pass samples it in `image.layout` and leaves it so.
    ///
    /// # Safety
    /// The context must be built on the caller's device
    /// ([`ContextBuilder::build_on`](crate::ContextBuilder::build_on)); `image.image`
    /// must be an image of that device that matches the description, and stay
    /// alive until it is unregistered and its frames are done (or the context is dropped).
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{CallerImage, INPUT_USAGE, NeuralFrameContext};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, image: vk::Image) -> neural_frame::Result<()> {
    /// let (width, height) = ctx.frame_size();
    /// let frame = CallerImage {
    ///     image,
    ///     format: vk::Format::R8G8B8A8_SRGB,
    ///     width,
    ///     height,
    ///     usage: vk::ImageUsageFlags::COLOR_ATTACHMENT | INPUT_USAGE,
    ///     tiling: vk::ImageTiling::OPTIMAL,
    ///     layout: vk::ImageLayout::GENERAL,
    /// };
    /// // SAFETY: the context is built on the renderer's device (build_on); `image` is that
    /// // device's, as described, alive until unregistered and its frames are done.
    /// let input = unsafe { ctx.register_input_image(frame) }?;
    /// # let _ = input;
    /// # Ok(()) }
    /// ```
    pub unsafe fn register_input_image(&mut self, image: CallerImage) -> Result<InputId> {
        self.caller_image(Role::Input, image).map(InputId)
    }

    /// Registers one of the caller's images as an output: the post pass writes
    /// it in `GENERAL` (discarding its contents) and leaves it in `image.layout`.
    ///
    /// # Safety
    /// As for [`register_input_image`](Self::register_input_image).
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{CallerImage, NeuralFrameContext, OUTPUT_USAGE};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, image: vk::Image) -> neural_frame::Result<()> {
    /// let (width, height) = ctx.output_size();
    /// let result = CallerImage {
    ///     image,
    ///     format: vk::Format::R8G8B8A8_UNORM,
    ///     width,
    ///     height,
    ///     usage: OUTPUT_USAGE | vk::ImageUsageFlags::SAMPLED,
    ///     tiling: vk::ImageTiling::OPTIMAL,
    ///     layout: vk::ImageLayout::SHADER_READ_ONLY_OPTIMAL, // ready for the renderer to sample
    /// };
    /// // SAFETY: the context is built on the renderer's device; `image` is that device's, as
    /// // described, alive until unregistered and its frames are done.
    /// let output = unsafe { ctx.register_output_image(result) }?;
    /// # let _ = output;
    /// # Ok(()) }
    /// ```
    pub unsafe fn register_output_image(&mut self, image: CallerImage) -> Result<OutputId> {
        self.caller_image(Role::Output, image).map(OutputId)
    }

    /// [`register_input_image`](Self::register_input_image) for an image whose
    /// memory the caller allocated exportable: on the CUDA backend the context
    /// exports it once and imports it into CUDA, and the frame's passes run as
    /// CUDA kernels. The image must be handed over in `GENERAL` layout for that
    /// (CUDA reads its memory as it lies); otherwise, or where CUDA cannot import
    /// it, its frames take the Vulkan passes, said once in the log.
    ///
    /// # Safety
    /// As for [`register_input_image`](Self::register_input_image); and
    /// `memory.memory` is the live allocation `image.image` is bound to at offset 0,
    /// made with `VkExportMemoryAllocateInfo` for `OPAQUE_FD`, of
    /// `memory.allocation_size` bytes, dedicated to the image exactly when
    /// `memory.dedicated` says so, alive as long as the image.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{CallerImage, CallerMemory, INPUT_USAGE, NeuralFrameContext};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, image: vk::Image, memory: CallerMemory) -> neural_frame::Result<()> {
    /// let (width, height) = ctx.frame_size();
    /// let frame = CallerImage {
    ///     image,
    ///     format: vk::Format::B8G8R8A8_UNORM,
    ///     width,
    ///     height,
    ///     usage: vk::ImageUsageFlags::COLOR_ATTACHMENT | INPUT_USAGE,
    ///     tiling: vk::ImageTiling::OPTIMAL,
    ///     layout: vk::ImageLayout::GENERAL,
    /// };
    /// // SAFETY: the context is built on the renderer's device; `image` is that device's, as
    /// // described, bound to `memory` (exportable, OPAQUE_FD), alive until unregistered.
    /// let input = unsafe { ctx.register_input_image_with_memory(frame, memory) }?;
    /// # let _ = input;
    /// # Ok(()) }
    /// ```
    pub unsafe fn register_input_image_with_memory(
        &mut self,
        image: CallerImage,
        memory: CallerMemory,
    ) -> Result<InputId> {
        // SAFETY: passed on from the caller.
        unsafe { self.caller_image_with_memory(Role::Input, image, memory) }.map(InputId)
    }

    /// [`register_output_image`](Self::register_output_image) for an image whose
    /// memory the caller allocated exportable: see
    /// [`register_input_image_with_memory`](Self::register_input_image_with_memory).
    /// CUDA writes the image in place, in `GENERAL` layout, which it stays in.
    ///
    /// # Safety
    /// As for [`register_input_image_with_memory`](Self::register_input_image_with_memory).
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{CallerImage, CallerMemory, NeuralFrameContext, OUTPUT_USAGE};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, image: vk::Image, memory: CallerMemory) -> neural_frame::Result<()> {
    /// let (width, height) = ctx.output_size();
    /// let result = CallerImage {
    ///     image,
    ///     format: vk::Format::R8G8B8A8_UNORM,
    ///     width,
    ///     height,
    ///     usage: OUTPUT_USAGE | vk::ImageUsageFlags::SAMPLED,
    ///     tiling: vk::ImageTiling::OPTIMAL,
    ///     layout: vk::ImageLayout::GENERAL,
    /// };
    /// // SAFETY: as for the input.
    /// let output = unsafe { ctx.register_output_image_with_memory(result, memory) }?;
    /// # let _ = output;
    /// # Ok(()) }
    /// ```
    pub unsafe fn register_output_image_with_memory(
        &mut self,
        image: CallerImage,
        memory: CallerMemory,
    ) -> Result<OutputId> {
        // SAFETY: passed on from the caller.
        unsafe { self.caller_image_with_memory(Role::Output, image, memory) }.map(OutputId)
    }

    /// # Safety
    /// As for [`register_input_image_with_memory`](Self::register_input_image_with_memory).
    unsafe fn caller_image_with_memory(
        &mut self,
        role: Role,
        image: CallerImage,
        memory: CallerMemory,
    ) -> Result<crate::context::registry::Key> {
        let key = self.caller_image_checked(role, image)?;
        let format = interop::surface_format(image.format, role == Role::Output);
        let device = std::sync::Arc::clone(&self.res.device);
        let (w, h) = (image.width, image.height);
        let view = self.cuda_view(role, "image", format, |cuda, f| {
            if image.layout != vk::ImageLayout::GENERAL || image.tiling != vk::ImageTiling::OPTIMAL {
                return Err(Error::InvalidArgument(format!(
                    "CUDA reads and writes the image's memory as it lies, which needs OPTIMAL tiling in GENERAL \
                     layout, and it is {:?} in {:?}",
                    image.tiling, image.layout
                )));
            }
            let info =
                AllocationInfo { size: memory.allocation_size, memory_type_index: 0, dedicated: memory.dedicated };
            // SAFETY: the caller's contract: an exportable allocation of this device bound to the image.
            let exported = unsafe { crate::vulkan::memory::export_caller_memory(&device, memory.memory, info) }?;
            Ok(CudaAccess::Surface(interop::image_into_cuda(cuda, exported, (w, h), f)?))
        });
        self.res.registry.registration_mut(key)?.cuda = view;
        Ok(key)
    }

    fn caller_buffer(&mut self, role: Role, buffer: CallerBuffer) -> Result<crate::context::registry::Key> {
        self.need_caller_device()?;
        self.check_buffer(role, &buffer.layout, buffer.size, buffer.usage)?;
        let l = buffer.layout;
        let reg = Registration {
            recorded: Vec::new(),
            direct: None,
            cuda: None,
            resource: Resource::Buffer {
                raw: buffer.buffer,
                format: l.format,
                pitch: l.row_pitch,
                bytes: l.bytes(),
                _owned: None,
            },
            origin: Origin::Caller,
            width: l.width,
            height: l.height,
        };
        self.by_handle_on_vulkan(role, "buffer");
        Ok(self.insert(role, reg))
    }

    /// Registers one of the caller's linear buffers as an input (bring your own device).
    ///
    /// # Safety
    /// As for [`register_input_image`](Self::register_input_image), for a buffer.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{CallerBuffer, NeuralFrameContext, PixelLayout};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, buffer: vk::Buffer) -> neural_frame::Result<()> {
    /// // The renderer copies its frame into a buffer with rows of 4096 bytes.
    /// let (width, height) = ctx.frame_size();
    /// let layout = PixelLayout { width, height, row_pitch: 4096, format: vk::Format::B8G8R8A8_UNORM };
    /// let frame = CallerBuffer { buffer, size: layout.bytes(), usage: vk::BufferUsageFlags::STORAGE_BUFFER, layout };
    /// // SAFETY: the context is built on the renderer's device; `buffer` is that device's, as
    /// // described, alive until unregistered and its frames are done.
    /// let input = unsafe { ctx.register_input_buffer(frame) }?;
    /// # let _ = input;
    /// # Ok(()) }
    /// ```
    pub unsafe fn register_input_buffer(&mut self, buffer: CallerBuffer) -> Result<InputId> {
        self.caller_buffer(Role::Input, buffer).map(InputId)
    }

    /// Registers one of the caller's linear buffers as an output (bring your own device).
    ///
    /// # Safety
    /// As for [`register_input_image`](Self::register_input_image), for a buffer.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{CallerBuffer, NeuralFrameContext, PixelLayout};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, buffer: vk::Buffer) -> neural_frame::Result<()> {
    /// let (width, height) = ctx.output_size();
    /// let layout = PixelLayout::packed(width, height, vk::Format::B8G8R8A8_UNORM);
    /// let result = CallerBuffer {
    ///     buffer,
    ///     size: layout.bytes(),
    ///     usage: vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC,
    ///     layout,
    /// };
    /// // SAFETY: the context is built on the renderer's device; `buffer` is that device's, as
    /// // described, alive until unregistered and its frames are done.
    /// let output = unsafe { ctx.register_output_buffer(result) }?;
    /// # let _ = output;
    /// # Ok(()) }
    /// ```
    pub unsafe fn register_output_buffer(&mut self, buffer: CallerBuffer) -> Result<OutputId> {
        self.caller_buffer(Role::Output, buffer).map(OutputId)
    }

    /// Registers one of the caller's timeline semaphores, to wait on with
    /// [`Frame::wait_for`](crate::Frame::wait_for) (bring your own device).
    ///
    /// # Safety
    /// The context must be built on the caller's device; `semaphore` must be a
    /// *timeline* semaphore of that device (binary semaphores cannot be told
    /// apart by Vulkan), alive until it is unregistered and the frames that wait
    /// on it are done.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{Error, NeuralFrameContext};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, device: &ash::Device) -> neural_frame::Result<()> {
    /// let mut type_info = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
    /// let create = vk::SemaphoreCreateInfo::default().push_next(&mut type_info);
    /// // SAFETY: `device` is the renderer's device, which the context is built on.
    /// let rendered = unsafe { device.create_semaphore(&create, None) }
    ///     .map_err(|result| Error::Vulkan { call: "vkCreateSemaphore", result })?;
    /// // SAFETY: a timeline semaphore of the context's device, destroyed only after it is
    /// // unregistered and the frames that wait on it are done.
    /// let rendered = unsafe { ctx.register_timeline(rendered) }?;
    /// # let _ = rendered;
    /// # Ok(()) }
    /// ```
    pub unsafe fn register_timeline(&mut self, semaphore: vk::Semaphore) -> Result<TimelineId> {
        self.need_caller_device()?;
        if semaphore == vk::Semaphore::null() {
            return Err(Error::InvalidArgument("a null semaphore cannot be registered".into()));
        }
        // SAFETY: a timeline semaphore of this device that outlives its registration (contract).
        let t = unsafe { TimelineSemaphore::borrowed(&self.res.device, semaphore) };
        Ok(TimelineId(self.res.registry.insert(Entry::Timeline(t))))
    }

    fn need_caller_device(&self) -> Result<()> {
        if self.res.device.is_owned() {
            return Err(Error::InvalidArgument(
                "raw handles need a context built on your device (ContextBuilder::build_on); this one has its own \
                 device: import exported memory and semaphores by file descriptor instead"
                    .into(),
            ));
        }
        Ok(())
    }

    fn unregister(&mut self, key: crate::context::registry::Key, timeline: bool) -> Result<()> {
        let entry = self.res.registry.remove(key)?;
        let until = if timeline {
            // Any frame in flight may wait on it.
            self.ring.in_flight_ordered().last().map(|(v, _)| *v)
        } else {
            self.ring.last_use(key.index)
        };
        match until {
            Some(v) => self.res.registry.bury(entry, v),
            None => self.free_entry(entry),
        }
        Ok(())
    }

    /// Unregisters an input. A frame in flight that uses it keeps it alive until
    /// it is done; the handle is refused from now on.
    ///
    /// ```no_run
    /// use neural_frame::{Frame, NeuralFrameContext};
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.submit(Frame::new(input, output))?;
    /// ctx.unregister_input(input)?; // at once: the frame in flight keeps it until it is done
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn unregister_input(&mut self, input: InputId) -> Result<()> {
        self.res.registry.input(input)?;
        self.unregister(input.0, false)
    }

    /// Unregisters an output (kept alive for its frames in flight, like an input).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.unregister_output(output)?;
    /// assert!(ctx.readback(output).is_err()); // the handle is refused from now on
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn unregister_output(&mut self, output: OutputId) -> Result<()> {
        self.res.registry.output(output)?;
        self.unregister(output.0, false)
    }

    /// Unregisters a timeline (kept until the frames in flight are done).
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, TimelineId};
    ///
    /// # fn f(ctx: &mut NeuralFrameContext, rendered: TimelineId) -> neural_frame::Result<()> {
    /// ctx.unregister_timeline(rendered)?;
    /// ctx.wait_all()?; // after this, the renderer may destroy the semaphore
    /// # Ok(()) }
    /// ```
    pub fn unregister_timeline(&mut self, timeline: TimelineId) -> Result<()> {
        self.res.registry.timeline(timeline)?;
        self.unregister(timeline.0, true)
    }

    /// Frees an entry no frame uses.
    pub(crate) fn free_entry(&mut self, entry: Entry) {
        if let Entry::Input(r) | Entry::Output(r) = &entry {
            // SAFETY: no frame in flight uses the registration, so its command buffers are not pending.
            unsafe { self.res.pool.free(&r.command_buffers()) };
        }
        drop(entry);
    }

    /// Frees the unregistered entries whose frames are all done.
    pub(crate) fn free_buried(&mut self) {
        let retired = match self.ring.in_flight_ordered().first() {
            Some((oldest, _)) => oldest - 1,
            None => self.ring.next_value() - 1,
        };
        for entry in self.res.registry.exhume(retired) {
            self.free_entry(entry);
        }
    }

    /// Uploads tightly packed texels into an input image made by
    /// [`create_input_image`](Self::create_input_image), once the frames that
    /// read it have consumed it.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let (width, height) = ctx.frame_size();
    /// let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// // RGBA8: 4 bytes a texel, rows of `width` texels without padding.
    /// let grey = vec![128u8; (width * height * 4) as usize];
    /// ctx.upload(input, &grey)?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn upload(&mut self, input: InputId, texels: &[u8]) -> Result<()> {
        if let Some(v) = self.ring.last_use(input.0.index) {
            let ticket = self.ticket(v);
            self.wait_input_consumed(&ticket, self.frame_timeout)?;
        }
        let reg = self.res.registry.input(input)?;
        transfer::upload_image(owned_image(reg, "upload")?, texels)
    }

    /// Fills an output image made by [`create_output_image`](Self::create_output_image)
    /// with tightly packed texels (poisoning it before a test, say), once the
    /// frames that write it are done.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// let (width, height) = ctx.output_size();
    /// // Poison it, so that texels the frame does not write show.
    /// ctx.upload_output(output, &[0xAB, 0xCD, 0xEF, 0x01].repeat((width * height) as usize))?;
    /// ctx.infer(input, output)?;
    /// let written = ctx.readback(output)?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn upload_output(&mut self, output: OutputId, texels: &[u8]) -> Result<()> {
        self.retire_through(self.ring.last_use(output.0.index))?;
        let reg = self.res.registry.output(output)?;
        transfer::upload_image(owned_image(reg, "upload_output")?, texels)
    }

    /// Reads an output image made by [`create_output_image`](Self::create_output_image)
    /// back as tightly packed texels, once the frames that write it are done.
    ///
    /// ```no_run
    /// use neural_frame::{Frame, NeuralFrameContext};
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.submit(Frame::new(input, output))?;
    /// let rgba = ctx.readback(output)?; // waits for the frame first
    /// let (width, height) = ctx.output_size();
    /// assert_eq!(rgba.len(), (width * height * 4) as usize);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn readback(&mut self, output: OutputId) -> Result<Vec<u8>> {
        self.retire_through(self.ring.last_use(output.0.index))?;
        let reg = self.res.registry.output(output)?;
        transfer::readback_image(owned_image(reg, "readback")?)
    }

    fn retire_through(&mut self, value: Option<u64>) -> Result<()> {
        if let Some(v) = value {
            let ticket = self.ticket(v);
            self.wait(&ticket)?;
        }
        Ok(())
    }
}
