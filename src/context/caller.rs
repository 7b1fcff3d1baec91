//! Registering the caller's own images, buffers and timelines by handle, on the
//! caller's device (bring your own device; by file descriptor: `import.rs`), and
//! images with their exportable memory, which the CUDA passes reach. Checked here,
//! once, like every registration (`register.rs`).

use ash::vk;

use crate::context::NeuralFrameContext;
use crate::context::foreign::{CallerBuffer, CallerImage, CallerMemory};
use crate::context::register::Role;
use crate::context::registry::{Entry, InputId, Origin, OutputId, Registration, Resource, TimelineId};
use crate::error::{Error, Result};
use crate::interop;
use crate::interop::CudaAccess;
use crate::vulkan::TimelineSemaphore;
use crate::vulkan::memory::AllocationInfo;

impl NeuralFrameContext {
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
        Ok(TimelineId(self.res.registry.insert(Entry::Timeline(interop::SharedTimeline::vulkan_only(t)))))
    }

    /// As [`register_timeline`](Self::register_timeline), for a timeline semaphore the caller
    /// created exportable: on the CUDA backend the context exports it once and imports it into
    /// CUDA, whose stream then waits for its values itself, as for a timeline shared by
    /// descriptor ([`import_timeline`](Self::import_timeline)). No batch of the
    /// context's goes on your queue to hand a frame to CUDA: it would queue there behind your
    /// own work (on NVIDIA, in order), and a graphics queue's submissions are time-sliced with
    /// CUDA's kernels. On the CPU backend it is registered as `register_timeline` does.
    ///
    /// Create it with `VkExportSemaphoreCreateInfo` (`OPAQUE_FD` on Linux, `OPAQUE_WIN32` on
    /// Windows) chained to its `VkSemaphoreTypeCreateInfo`, on a device with the matching
    /// external semaphore extension enabled and named in the [`CallerDevice`](crate::CallerDevice)'s
    /// extensions (without it the context says so and registers nothing).
    ///
    /// # Safety
    /// As `register_timeline`, and `semaphore` was created with that export info.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{Error, NeuralFrameContext};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, device: &ash::Device) -> neural_frame::Result<()> {
    /// let mut export =
    ///     vk::ExportSemaphoreCreateInfo::default().handle_types(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
    /// let mut type_info = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
    /// let create = vk::SemaphoreCreateInfo::default().push_next(&mut type_info).push_next(&mut export);
    /// // SAFETY: `device` is the renderer's device, which the context is built on.
    /// let rendered = unsafe { device.create_semaphore(&create, None) }
    ///     .map_err(|result| Error::Vulkan { call: "vkCreateSemaphore", result })?;
    /// // SAFETY: an exportable timeline semaphore of the context's device, destroyed only after
    /// // it is unregistered and the frames that wait on it are done.
    /// let rendered = unsafe { ctx.register_exportable_timeline(rendered) }?;
    /// # let _ = rendered;
    /// # Ok(()) }
    /// ```
    pub unsafe fn register_exportable_timeline(&mut self, semaphore: vk::Semaphore) -> Result<TimelineId> {
        let Some(cuda) = self.res.engine.cuda_device() else {
            // SAFETY: the caller's contract, as register_timeline's.
            return unsafe { self.register_timeline(semaphore) };
        };
        self.need_caller_device()?;
        if semaphore == vk::Semaphore::null() {
            return Err(Error::InvalidArgument("a null semaphore cannot be registered".into()));
        }
        // SAFETY: an exportable timeline semaphore of this device that outlives its registration (contract).
        let t = unsafe { TimelineSemaphore::borrowed_exportable(&self.res.device, semaphore) }?;
        let shared = interop::SharedTimeline::caller_exportable(t, Some(cuda))?;
        Ok(TimelineId(self.res.registry.insert(Entry::Timeline(shared))))
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
}
