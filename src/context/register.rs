//! Registering inputs, outputs and timelines: the context's own images, the
//! caller's by handle, or the caller's exported memory and semaphores by file
//! descriptor. Everything is checked here, once, with errors that name what
//! is wrong; frames then only name handles.

use std::os::fd::AsFd;

use ash::vk;

use crate::context::NeuralFrameContext;
use crate::context::backend::Engine;
use crate::context::foreign::{
    BufferImport, CallerBuffer, CallerImage, DeviceIdentity, ImageImport, ImportError, MemoryImport, PixelLayout,
    SemaphoreImport,
};
use crate::context::record::size_mismatch;
use crate::context::registry::{Direct, Entry, InputId, Origin, OutputId, Registration, Resource, TimelineId};
use crate::context::sync::{ExportedTimelines, SyncMode};
use crate::error::{Error, Result, format_uuid};
use crate::interop;
use crate::onnx::{TensorKind, TensorValue};
use crate::vulkan::caps;
use crate::vulkan::compute::ImageView;
use crate::vulkan::memory::AllocationInfo;
use crate::vulkan::{Buffer, ExportedMemory, Image, ImageDesc, TimelineSemaphore, transfer};

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
enum Role {
    Input,
    Output,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Output => "output",
        }
    }
}

fn check_format(role: Role, format: vk::Format, image: bool) -> Result<()> {
    let allowed: &[vk::Format] = match (role, image) {
        (Role::Input, _) => &INPUT_FORMATS,
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
        let s = self.size.ok_or_else(|| Error::internal("a context without a frame size"))?;
        Ok(if role == Role::Input { (s.width, s.height) } else { (s.out_width, s.out_height) })
    }

    fn check_image(
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

    fn check_buffer(&self, role: Role, layout: &PixelLayout, size: u64, usage: vk::BufferUsageFlags) -> Result<()> {
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
    fn takes_as_is(&self, role: Role, layout: &PixelLayout) -> bool {
        let kind = if role == Role::Input { self.contract.input } else { self.contract.output };
        kind == TensorKind::NhwcU8
            && matches!(layout.format, vk::Format::R8G8B8A8_UNORM | vk::Format::R8G8B8A8_SRGB)
            && layout.row_pitch == layout.width as u64 * 4
    }

    fn insert(&mut self, role: Role, reg: Registration) -> crate::context::registry::Key {
        let entry = if role == Role::Input { Entry::Input(reg) } else { Entry::Output(reg) };
        self.res.registry.insert(entry)
    }

    fn image_registration(
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
        let image = Image::new(&self.res.device, ImageDesc::new(w, h, format, usage))?;
        transfer::to_general(&image)?;
        let raw = image.raw();
        let reg = self.image_registration(raw, format, vk::ImageLayout::GENERAL, Some(image), Origin::Owned, (w, h))?;
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

    fn caller_image(&mut self, role: Role, image: CallerImage) -> Result<crate::context::registry::Key> {
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

    fn caller_buffer(&mut self, role: Role, buffer: CallerBuffer) -> Result<crate::context::registry::Key> {
        self.need_caller_device()?;
        self.check_buffer(role, &buffer.layout, buffer.size, buffer.usage)?;
        let l = buffer.layout;
        let reg = Registration {
            recorded: Vec::new(),
            direct: None,
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

    fn check_origin(&self, origin: &DeviceIdentity) -> Result<()> {
        let info = self.res.device.info();
        if origin.device_uuid != info.uuid_bytes || origin.driver_uuid != info.driver_uuid_bytes {
            return Err(Error::InvalidArgument(format!(
                "the resource comes from device {} (driver {}), but the context runs on {} (device {}, driver {}): \
                 memory and semaphores can only be shared on the same physical device and driver; build the context \
                 with ContextBuilder::device(DeviceSelector::Uuid(..)) of the exporting device",
                format_uuid(&origin.device_uuid),
                format_uuid(&origin.driver_uuid),
                info,
                info.uuid,
                info.driver_uuid
            )));
        }
        Ok(())
    }

    /// Runs `import` on duplicates of the caller's descriptor: on success the
    /// original is closed (the context owns the memory now), on failure it goes
    /// back to the caller inside the error.
    fn with_memory<T>(
        &mut self,
        memory: MemoryImport,
        import: impl FnOnce(&mut Self, &dyn Fn() -> Result<ExportedMemory>) -> Result<T>,
    ) -> Result<T, ImportError> {
        let checked = self
            .check_origin(&memory.origin)
            .and_then(|()| caps::check_memory_fd(memory.fd.as_fd(), memory.allocation_size));
        if let Err(e) = checked {
            return Err(ImportError::new(e, memory.fd));
        }
        let info = AllocationInfo {
            size: memory.allocation_size,
            memory_type_index: memory.memory_type_index,
            dedicated: memory.dedicated,
        };
        let fd = &memory.fd;
        let dup = || -> Result<ExportedMemory> {
            let fd = fd
                .try_clone()
                .map_err(|e| Error::Io { what: "duplicating the memory's file descriptor".into(), source: e })?;
            Ok(ExportedMemory { fd, info })
        };
        match import(self, &dup) {
            Ok(v) => Ok(v), // the original descriptor is dropped (closed) with `memory`
            Err(e) => Err(ImportError::new(e, memory.fd)),
        }
    }

    fn imported_image(
        &mut self,
        role: Role,
        import: ImageImport,
    ) -> Result<crate::context::registry::Key, ImportError> {
        let ImageImport { memory, format, width, height, usage, tiling } = import;
        if let Err(e) = self.check_image(role, format, (width, height), usage, tiling) {
            return Err(ImportError::new(e, memory.fd));
        }
        self.with_memory(memory, |ctx, dup| {
            let desc = ImageDesc { width, height, format, usage, tiling };
            let image = Image::import(&ctx.res.device, desc, dup()?)?;
            let raw = image.raw();
            let reg = ctx.image_registration(
                raw,
                format,
                vk::ImageLayout::GENERAL,
                Some(image),
                Origin::Imported,
                (width, height),
            )?;
            Ok(ctx.insert(role, reg))
        })
    }

    /// Imports an image the caller exported as an input. See [`ImageImport`] for
    /// the ownership transfers around each frame.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{ImageImport, MemoryImport, NeuralFrameContext};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, memory: MemoryImport) -> neural_frame::Result<()> {
    /// let (width, height) = ctx.frame_size();
    /// let import = ImageImport {
    ///     memory, // the renderer's exported memory: see MemoryImport
    ///     format: vk::Format::R8G8B8A8_UNORM,
    ///     width,
    ///     height,
    ///     usage: vk::ImageUsageFlags::SAMPLED | vk::ImageUsageFlags::TRANSFER_DST,
    ///     tiling: vk::ImageTiling::OPTIMAL,
    /// };
    /// let input = match ctx.import_input_image(import) {
    ///     Ok(input) => input,
    ///     Err(failed) => {
    ///         eprintln!("refused: {}", failed.error());
    ///         return Ok(()); // `failed` drops here, and with it the descriptor
    ///     }
    /// };
    /// # let _ = input;
    /// # Ok(()) }
    /// ```
    pub fn import_input_image(&mut self, import: ImageImport) -> Result<InputId, ImportError> {
        self.imported_image(Role::Input, import).map(InputId)
    }

    /// Imports an image the caller exported as an output (written in `GENERAL`
    /// layout; see [`ImageImport`] for the ownership transfers).
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{ImageImport, MemoryImport, NeuralFrameContext};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, memory: MemoryImport) -> neural_frame::Result<()> {
    /// let (width, height) = ctx.output_size();
    /// let import = ImageImport {
    ///     memory,
    ///     format: vk::Format::R8G8B8A8_UNORM,
    ///     width,
    ///     height,
    ///     usage: vk::ImageUsageFlags::STORAGE | vk::ImageUsageFlags::SAMPLED,
    ///     tiling: vk::ImageTiling::OPTIMAL,
    /// };
    /// let output = ctx.import_output_image(import)?;
    /// # let _ = output;
    /// # Ok(()) }
    /// ```
    pub fn import_output_image(&mut self, import: ImageImport) -> Result<OutputId, ImportError> {
        self.imported_image(Role::Output, import).map(OutputId)
    }

    fn imported_buffer(
        &mut self,
        role: Role,
        import: BufferImport,
    ) -> Result<crate::context::registry::Key, ImportError> {
        let BufferImport { memory, size, usage, layout } = import;
        if let Err(e) = self.check_buffer(role, &layout, size, usage) {
            return Err(ImportError::new(e, memory.fd));
        }
        let as_is = self.takes_as_is(role, &layout);
        self.with_memory(memory, |ctx, dup| {
            let kind = if role == Role::Input { ctx.contract.input } else { ctx.contract.output };
            let (w, h) = (layout.width, layout.height);
            let bytes = layout.bytes();
            let (owned, direct) = match (&ctx.res.engine, as_is) {
                (Engine::Cuda(e), true) => {
                    // The model reads (or writes) the caller's memory through CUDA: no Vulkan import.
                    let mapped = interop::import_into_cuda(&e.device, dup()?, bytes)?;
                    let (placement, ptr) = interop::tensor_memory(Some(&mapped), None)?;
                    // SAFETY: the mapping covers `bytes` and lives in the Direct after the value.
                    let value = unsafe { TensorValue::new(placement, kind, w, h, ptr, bytes) }?;
                    (None, Some(Direct { value, _cuda: Some(mapped) }))
                }
                _ => {
                    let buffer = Buffer::import(&ctx.res.device, size, usage, dup()?)?;
                    let direct = match (as_is, interop::tensor_memory(None, Some(&buffer))) {
                        (true, Ok((placement, ptr))) => {
                            // SAFETY: the host mapping covers `size >= bytes` and the buffer is kept in
                            // the registration, which drops the Direct first.
                            let value = unsafe { TensorValue::new(placement, kind, w, h, ptr, bytes) }?;
                            Some(Direct { value, _cuda: None })
                        }
                        (true, Err(_)) => {
                            log::info!(
                                "the {} buffer's memory is not host-visible here: the CPU backend converts it with \
                                 a pass instead of binding it as it is",
                                role.name()
                            );
                            None
                        }
                        _ => None,
                    };
                    (Some(buffer), direct)
                }
            };
            let raw = owned.as_ref().map_or(vk::Buffer::null(), Buffer::raw);
            let reg = Registration {
                recorded: Vec::new(),
                direct,
                resource: Resource::Buffer {
                    raw,
                    format: layout.format,
                    pitch: layout.row_pitch,
                    bytes,
                    _owned: owned,
                },
                origin: Origin::Imported,
                width: w,
                height: h,
            };
            Ok(ctx.insert(role, reg))
        })
    }

    /// Imports a linear buffer the caller exported as an input. Where the model
    /// takes it as it is, the buffer itself is the model's input (no pre pass).
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{BufferImport, MemoryImport, NeuralFrameContext, PixelLayout};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, memory: MemoryImport) -> neural_frame::Result<()> {
    /// let (width, height) = ctx.frame_size();
    /// let layout = PixelLayout::packed(width, height, vk::Format::R8G8B8A8_UNORM);
    /// let import = BufferImport { memory, size: layout.bytes(), usage: vk::BufferUsageFlags::STORAGE_BUFFER, layout };
    /// let input = ctx.import_input_buffer(import)?;
    /// # let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
    /// let stats = ctx.infer(input, output)?;
    /// println!("pre pass: {}", if stats.pre_pass { "ran" } else { "none, the model read the buffer itself" });
    /// # Ok(()) }
    /// ```
    pub fn import_input_buffer(&mut self, import: BufferImport) -> Result<InputId, ImportError> {
        self.imported_buffer(Role::Input, import).map(InputId)
    }

    /// Imports a linear buffer the caller exported as an output. Where the model
    /// gives it as it is, the model writes the buffer itself (no post pass).
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{BufferImport, MemoryImport, NeuralFrameContext, PixelLayout};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, memory: MemoryImport) -> neural_frame::Result<()> {
    /// let (width, height) = ctx.output_size();
    /// let layout = PixelLayout::packed(width, height, vk::Format::R8G8B8A8_UNORM);
    /// let import = BufferImport { memory, size: layout.bytes(), usage: vk::BufferUsageFlags::STORAGE_BUFFER, layout };
    /// let output = ctx.import_output_buffer(import)?;
    /// # let _ = output;
    /// # Ok(()) }
    /// ```
    pub fn import_output_buffer(&mut self, import: BufferImport) -> Result<OutputId, ImportError> {
        self.imported_buffer(Role::Output, import).map(OutputId)
    }

    /// Imports a timeline semaphore the caller exported, to wait on with
    /// [`Frame::wait_for`](crate::Frame::wait_for). Needs
    /// [`SyncMode::Gpu`]: in host-signalled mode there is nothing to import.
    /// It must be a *timeline* semaphore, as
    /// [`SemaphoreImport::semaphore_type`] states: a binary one is refused
    /// (its descriptor cannot be told apart by the importer: Vulkan gives no
    /// way, and NVIDIA's driver accepts it).
    ///
    /// ```no_run
    /// use std::os::fd::OwnedFd;
    /// use ash::vk;
    /// use neural_frame::{DeviceIdentity, Frame, InputId, NeuralFrameContext, OutputId, SemaphoreImport};
    ///
    /// # fn f(ctx: &mut NeuralFrameContext, fd: OwnedFd, renderer: DeviceIdentity, input: InputId, output: OutputId)
    /// # -> neural_frame::Result<()> {
    /// // `fd` from vkGetSemaphoreFdKHR (OPAQUE_FD) on the renderer's "rendered" timeline.
    /// let import = SemaphoreImport { fd, semaphore_type: vk::SemaphoreType::TIMELINE, origin: renderer };
    /// let rendered = ctx.import_timeline(import)?;
    /// ctx.submit(Frame::new(input, output).wait_for(rendered, 1))?;
    /// # Ok(()) }
    /// ```
    pub fn import_timeline(&mut self, import: SemaphoreImport) -> Result<TimelineId, ImportError> {
        let SemaphoreImport { fd, semaphore_type, origin } = import;
        let checks = check_semaphore_type(semaphore_type)
            .and_then(|()| self.check_origin(&origin))
            .and_then(|()| self.need_gpu_sync());
        if let Err(e) = checks {
            return Err(ImportError::new(e, fd));
        }
        let dup = || {
            fd.try_clone()
                .map_err(|e| Error::Io { what: "duplicating the semaphore's file descriptor".into(), source: e })
        };
        let imported = dup().and_then(|d| TimelineSemaphore::import(&self.res.device, d)).and_then(|t| {
            // Its counter must read. (Vulkan cannot tell a binary semaphore's payload from a
            // timeline's at import, and NVIDIA's driver 580 takes either: a binary semaphore
            // is the caller's mistake to avoid, not one the context can catch.)
            t.value().map_err(|e| {
                Error::InvalidArgument(format!(
                    "the imported semaphore has no timeline counter ({e}): it is not a timeline semaphore"
                ))
            })?;
            Ok(t)
        });
        match imported {
            Ok(t) => Ok(TimelineId(self.res.registry.insert(Entry::Timeline(t)))),
            Err(e) => Err(ImportError::new(e, fd)),
        }
    }

    fn need_gpu_sync(&self) -> Result<()> {
        if self.sync_mode == SyncMode::Gpu {
            return Ok(());
        }
        Err(Error::Unsupported {
            device: self.res.device.info().name.clone(),
            what: "sharing timeline semaphores (VK_KHR_external_semaphore_fd)".into(),
            remedy: "this context runs in host-signalled mode (SyncMode::Host): submit once the input is written, \
                     and learn of completion from wait, try_wait or wait_input_consumed"
                .into(),
        })
    }

    /// The context's "input consumed" and "output ready" timelines as file
    /// descriptors, for a caller on another device to import once and wait on
    /// with each ticket's value ([`SyncMode::Gpu`] only).
    ///
    /// ```no_run
    /// use neural_frame::{ExportedTimelines, NeuralFrameContext, SyncMode};
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// if ctx.sync_mode() == SyncMode::Gpu {
    ///     let ExportedTimelines { input_consumed, output_ready } = ctx.export_timelines()?;
    ///     // Send both descriptors to the renderer (SCM_RIGHTS), which imports each once
    ///     // with vkImportSemaphoreFdKHR into a timeline semaphore of its own.
    ///     # drop((input_consumed, output_ready));
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn export_timelines(&self) -> Result<ExportedTimelines> {
        self.need_gpu_sync()?;
        let t = &self.res.timelines;
        if !t.input_consumed.vulkan().is_exportable() {
            return Err(Error::Unsupported {
                device: self.res.device.info().name.clone(),
                what: "exporting semaphores (VK_KHR_external_semaphore_fd is not enabled on the device)".into(),
                remedy: "enable VK_KHR_external_semaphore_fd on your device, or use the tickets' semaphores directly"
                    .into(),
            });
        }
        Ok(ExportedTimelines { input_consumed: t.input_consumed.export()?, output_ready: t.output_ready.export()? })
    }

    /// The physical device and driver the context runs on, as an exporter
    /// must match them.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, format_uuid};
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let here = ctx.device_identity();
    /// let (device, driver) = (format_uuid(&here.device_uuid), format_uuid(&here.driver_uuid));
    /// println!("exporters must be on device {device}, driver {driver}");
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn device_identity(&self) -> DeviceIdentity {
        let info = self.res.device.info();
        DeviceIdentity { device_uuid: info.uuid_bytes, driver_uuid: info.driver_uuid_bytes }
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

/// Frames are numbered on timelines: a binary semaphore (or an unknown type) cannot carry them.
fn check_semaphore_type(semaphore_type: vk::SemaphoreType) -> Result<()> {
    match semaphore_type {
        vk::SemaphoreType::TIMELINE => Ok(()),
        vk::SemaphoreType::BINARY => Err(Error::InvalidArgument(
            "the semaphore is a binary semaphore, and frames are numbered on timeline semaphores: create it with \
             VkSemaphoreTypeCreateInfo { semaphoreType: TIMELINE } (Vulkan 1.2) and export that one"
                .into(),
        )),
        other => Err(Error::InvalidArgument(format!(
            "the semaphore type {other:?} is not one Vulkan defines: a timeline semaphore (TIMELINE) is needed"
        ))),
    }
}
