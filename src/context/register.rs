//! Registering inputs, outputs and timelines: the context's own images, or the
//! caller's (by handle: `caller.rs`; by file descriptor: `import.rs`); unregistering;
//! uploads and read-backs. Everything is checked here, once, with errors that
//! name what is wrong; frames then only name handles.

use ash::vk;

use crate::context::NeuralFrameContext;
use crate::context::foreign::PixelLayout;
use crate::context::record::size_mismatch;
use crate::context::registry::{Entry, InputId, Origin, OutputId, Registration, Resource, TimelineId};
use crate::error::{Error, Result};
use crate::interop;
use crate::interop::{CudaAccess, CudaView};
use crate::onnx::TensorKind;
use crate::vulkan::caps;
use crate::vulkan::compute::ImageView;
use crate::vulkan::{Image, ImageDesc, transfer};

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

    /// Reads an output image back as tightly packed texels, once the frames that
    /// write it are done: one made by [`create_output_image`](Self::create_output_image),
    /// or the caller's own registered by handle
    /// ([`register_output_image`](Self::register_output_image)), which needs
    /// `TRANSFER_SRC` usage and is left in the layout it was registered with. For tools
    /// and tests: it waits on the host and copies through a staging buffer. An output
    /// imported by fd is read back on the side that exported its memory.
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
        match (&reg.resource, reg.origin) {
            (Resource::Image { raw, format, layout, owned: None, .. }, Origin::Caller) => {
                let desc = ImageDesc::new(reg.width, reg.height, *format, vk::ImageUsageFlags::TRANSFER_SRC);
                // SAFETY: a registered image of the caller's is live on the context's device and in its
                // registered layout between frames (register_output_image's contract); its frames are done.
                unsafe { transfer::readback_raw(&self.res.device, *raw, &desc, *layout) }
            }
            _ => transfer::readback_image(owned_image(reg, "readback")?),
        }
    }

    fn retire_through(&mut self, value: Option<u64>) -> Result<()> {
        if let Some(v) = value {
            let ticket = self.ticket(v);
            self.wait(&ticket)?;
        }
        Ok(())
    }
}
