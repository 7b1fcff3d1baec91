//! Registering the caller's exported memory and semaphores by file descriptor
//! (Windows: by handle; the other way in, which keeps the renderer's device to
//! itself), and exporting the context's own timelines. Checked here, once, like
//! every registration (`register.rs`).

use ash::vk;

use crate::context::NeuralFrameContext;
use crate::context::backend::Engine;
use crate::context::foreign::{BufferImport, DeviceIdentity, ImageImport, ImportError, MemoryImport, SemaphoreImport};
use crate::context::register::Role;
use crate::context::registry::{Direct, Entry, InputId, Origin, OutputId, Registration, Resource, TimelineId};
use crate::context::sync::{ExportedTimelines, SyncMode};
use crate::error::{Error, Result, format_uuid};
use crate::handle;
use crate::interop;
use crate::interop::{CudaAccess, CudaDevice, CudaView, SurfaceFormat};
use crate::onnx::TensorValue;
use crate::vulkan::caps;
use crate::vulkan::external::{HANDLE_TYPE_NAME, SEMAPHORE_EXTENSION_NAME};
use crate::vulkan::memory::AllocationInfo;
use crate::vulkan::{Buffer, ExportedMemory, Image, ImageDesc};

impl NeuralFrameContext {
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

    /// The CUDA passes' view of a registration's memory, made by `import` on the CUDA
    /// backend with CUDA passes for a format they convert; `None` otherwise. Where CUDA
    /// cannot reach it, the registration's frames take the Vulkan passes, and the
    /// log says so once, with why and what the caller can change.
    pub(super) fn cuda_view(
        &self,
        role: Role,
        what: &str,
        format: Option<SurfaceFormat>,
        import: impl FnOnce(&std::sync::Arc<CudaDevice>, SurfaceFormat) -> Result<CudaAccess>,
    ) -> Option<CudaView> {
        let device = self.res.engine.cuda_device().filter(|_| self.res.engine.cuda_passes())?;
        let Some(format) = format else {
            log::warn!(
                "the {} {what}'s format has no CUDA pass: its frames run through the Vulkan passes (a ~0.5 ms \
                 cross-API hand-off each); the CUDA passes read RGBA8, BGRA8 and RGBA16F",
                role.name()
            );
            return None;
        };
        match import(device, format) {
            Ok(access) => Some(CudaView { access, format }),
            Err(e) => {
                log::warn!(
                    "the CUDA passes cannot take the {} {what}'s memory ({e}): its frames run through the Vulkan \
                     passes (a ~0.5 ms cross-API hand-off each); device-local memory allocated with \
                     VkExportMemoryAllocateInfo ({HANDLE_TYPE_NAME}), dedicated for images, runs them as CUDA \
                     kernels",
                    role.name()
                );
                None
            }
        }
    }

    /// `Err` (the reason) where memory of type `index` is host-visible: the CUDA passes
    /// take only device-local memory, whose accesses the caller's semaphores order. The
    /// host's own writes and reads of mapped memory have no ordering with CUDA's kernels
    /// without a Vulkan submission (seen on the H200: one byte the host poisoned before a
    /// frame read back after it), and CUDA would reach it across PCIe.
    fn host_visible(&self, index: u32) -> Result<()> {
        if !self.res.device.memory_type_flags(index).contains(vk::MemoryPropertyFlags::HOST_VISIBLE) {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "its memory type {index} is HOST_VISIBLE, and the CUDA passes take device-local memory only"
        )))
    }

    /// Runs `import` on duplicates of the caller's descriptor: on success the
    /// original is closed (the context owns the memory now), on failure it goes
    /// back to the caller inside the error.
    pub(super) fn with_memory<T>(
        &mut self,
        memory: MemoryImport,
        import: impl FnOnce(&mut Self, &dyn Fn() -> Result<ExportedMemory>) -> Result<T>,
    ) -> Result<T, ImportError> {
        let checked = self
            .check_origin(&memory.origin)
            .and_then(|()| caps::check_memory_handle(&memory.fd, memory.allocation_size));
        if let Err(e) = checked {
            return Err(ImportError::new(e, memory.fd));
        }
        let info = AllocationInfo {
            size: memory.allocation_size,
            memory_type_index: memory.memory_type_index,
            dedicated: memory.dedicated,
        };
        let original = &memory.fd;
        let dup = || -> Result<ExportedMemory> {
            Ok(ExportedMemory { handle: handle::duplicate(original, "the memory")?, info })
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
        let host_visible = self.host_visible(memory.memory_type_index);
        if let Err(e) = self.check_image(role, format, (width, height), usage, tiling) {
            return Err(ImportError::new(e, memory.fd));
        }
        self.with_memory(memory, |ctx, dup| {
            let desc = ImageDesc { width, height, format, usage, tiling };
            let image = Image::import(&ctx.res.device, desc, dup()?)?;
            let raw = image.raw();
            let mut reg = ctx.image_registration(
                raw,
                format,
                vk::ImageLayout::GENERAL,
                Some(image),
                Origin::Imported,
                (width, height),
            )?;
            // CUDA imports its own duplicate of the descriptor, for the CUDA passes.
            reg.cuda =
                ctx.cuda_view(role, "image", interop::surface_format(format, role == Role::Output), |device, f| {
                    host_visible?;
                    if tiling != vk::ImageTiling::OPTIMAL {
                        return Err(Error::InvalidArgument(format!(
                            "CUDA maps an image's memory as an array of optimal tiling, and this one has {tiling:?}"
                        )));
                    }
                    let surface = interop::image_into_cuda(device, dup()?, (width, height), f)?;
                    Ok(CudaAccess::Surface(surface))
                });
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
        let host_visible = self.host_visible(memory.memory_type_index);
        if let Err(e) = self.check_buffer(role, &layout, size, usage) {
            return Err(ImportError::new(e, memory.fd));
        }
        let as_is = self.takes_as_is(role, &layout);
        self.with_memory(memory, |ctx, dup| {
            let kind = if role == Role::Input { ctx.contract.input } else { ctx.contract.output };
            let (w, h) = (layout.width, layout.height);
            let bytes = layout.bytes();
            let (owned, direct, cuda) = match (&ctx.res.engine, as_is) {
                (Engine::Cuda(e), true) => {
                    // The model reads (or writes) the caller's memory through CUDA: no Vulkan import.
                    let mapped = interop::import_into_cuda(&e.device, dup()?, bytes)?;
                    let (placement, ptr) = interop::tensor_memory(Some(&mapped), None)?;
                    // SAFETY: the mapping covers `bytes` and lives in the Direct after the value.
                    let value = unsafe { TensorValue::new(placement, kind, w, h, ptr, bytes) }?;
                    (None, Some(Direct { value, _cuda: Some(mapped) }), None)
                }
                (engine, _) => {
                    // CUDA imports its own duplicate of the descriptor, for the CUDA passes.
                    let cuda = match engine {
                        Engine::Cuda(_) => ctx.cuda_view(
                            role,
                            "buffer",
                            interop::surface_format(layout.format, role == Role::Output),
                            |device, _| {
                                host_visible?;
                                let pitch = u32::try_from(layout.row_pitch).map_err(|_| {
                                    Error::InvalidArgument(format!(
                                        "the row pitch {} is over what the CUDA passes address (4 GiB)",
                                        layout.row_pitch
                                    ))
                                })?;
                                let mapped = interop::import_into_cuda(device, dup()?, bytes)?;
                                Ok(CudaAccess::Buffer { mapped, pitch })
                            },
                        ),
                        Engine::Host(_) => None,
                    };
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
                    (Some(buffer), direct, cuda)
                }
            };
            let raw = owned.as_ref().map_or(vk::Buffer::null(), Buffer::raw);
            let reg = Registration {
                recorded: Vec::new(),
                direct,
                cuda,
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
        // On the CUDA backend CUDA imports it too: the engine's stream waits for the
        // caller's values itself, with no Vulkan batch of the context's in between.
        let cuda = self.res.engine.cuda_device();
        let imported = interop::SharedTimeline::import(&self.res.device, cuda, &fd).and_then(|t| {
            // Its counter must read. (Vulkan cannot tell a binary semaphore's payload from a
            // timeline's at import, and NVIDIA's driver 580 takes either: a binary semaphore
            // is the caller's mistake to avoid, not one the context can catch.)
            t.vulkan().value().map_err(|e| {
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
            what: format!("sharing timeline semaphores ({SEMAPHORE_EXTENSION_NAME})"),
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
                what: format!("exporting semaphores ({SEMAPHORE_EXTENSION_NAME} is not enabled on the device)"),
                remedy: format!(
                    "enable {SEMAPHORE_EXTENSION_NAME} on your device, or use the tickets' semaphores directly"
                ),
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
