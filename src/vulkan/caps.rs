//! What the device can do, decided in one place: external memory and semaphore
//! support, format features and size limits. Each check fails with an error
//! that names what is missing and what would satisfy it.

use ash::vk;

use crate::error::{Error, Result};
use crate::handle::ExternalHandle;
use crate::vulkan::conv;
use crate::vulkan::device::Device;
use crate::vulkan::external::{
    EXTERNAL_MEMORY_HANDLE_TYPE as MEMORY_HANDLE, EXTERNAL_SEMAPHORE_HANDLE_TYPE as SEMAPHORE_HANDLE, HANDLE_TYPE_NAME,
    MEMORY_EXTENSION_NAME, SEMAPHORE_EXTENSION_NAME,
};

/// What an image is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ImageDesc {
    /// Width in pixels.
    pub(crate) width: u32,
    /// Height in pixels.
    pub(crate) height: u32,
    /// Texel format.
    pub(crate) format: vk::Format,
    /// Usage flags.
    pub(crate) usage: vk::ImageUsageFlags,
    /// Optimal (the default) or linear.
    pub(crate) tiling: vk::ImageTiling,
}

impl ImageDesc {
    /// A 2D optimal-tiling image.
    pub(crate) fn new(width: u32, height: u32, format: vk::Format, usage: vk::ImageUsageFlags) -> Self {
        Self { width, height, format, usage, tiling: vk::ImageTiling::OPTIMAL }
    }

    /// A 2D RGBA8 image usable for transfers and as a storage image.
    pub(crate) fn rgba8(width: u32, height: u32) -> Self {
        Self::new(
            width,
            height,
            vk::Format::R8G8B8A8_UNORM,
            vk::ImageUsageFlags::TRANSFER_SRC | vk::ImageUsageFlags::TRANSFER_DST | vk::ImageUsageFlags::STORAGE,
        )
    }

    /// Bytes of a tightly packed copy of the image.
    pub(crate) fn packed_len(&self) -> usize {
        self.width as usize * self.height as usize * conv::bytes_per_pixel(self.format).unwrap_or(4) as usize
    }

    pub(crate) fn create_info(&self) -> vk::ImageCreateInfo<'static> {
        vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(self.format)
            .extent(vk::Extent3D { width: self.width, height: self.height, depth: 1 })
            .mip_levels(1)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(self.tiling)
            .usage(self.usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .initial_layout(vk::ImageLayout::UNDEFINED)
    }
}

/// What the driver says about sharing memory for a given image or buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExternalSupport {
    /// The external memory features.
    pub(crate) features: vk::ExternalMemoryFeatureFlags,
}

impl ExternalSupport {
    /// Whether the driver only exports and imports dedicated allocations.
    pub(crate) fn dedicated_only(&self) -> bool {
        self.features.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY)
    }
}

fn check_features(device: &Device, what: &str, features: vk::ExternalMemoryFeatureFlags) -> Result<ExternalSupport> {
    let need = vk::ExternalMemoryFeatureFlags::EXPORTABLE | vk::ExternalMemoryFeatureFlags::IMPORTABLE;
    if !features.contains(need) {
        return Err(Error::Unsupported {
            device: device.info().name.clone(),
            what: format!(
                "exporting and importing {what} as {HANDLE_TYPE_NAME} (driver reports: {})",
                conv::external_features(features)
            ),
            remedy: format!("use another format or usage, or a driver with {MEMORY_EXTENSION_NAME} for it"),
        });
    }
    Ok(ExternalSupport { features })
}

/// Host memory (a memory file the library maps: host_file.rs) must be importable for `what`.
#[cfg(target_os = "linux")]
fn check_host_import(device: &Device, what: &str, features: vk::ExternalMemoryFeatureFlags) -> Result<()> {
    if features.contains(vk::ExternalMemoryFeatureFlags::IMPORTABLE) {
        return Ok(());
    }
    Err(Error::Unsupported {
        device: device.info().name.clone(),
        what: format!(
            "importing {what} from a memory file as host memory (driver reports: {})",
            conv::external_features(features)
        ),
        remedy: "use another format or usage".into(),
    })
}

fn need_memory_fd(device: &Device) -> Result<()> {
    if device.can_share_memory() {
        return Ok(());
    }
    Err(Error::Unsupported {
        device: device.info().name.clone(),
        what: format!("the device extension {MEMORY_EXTENSION_NAME} (not enabled on this device)"),
        remedy: format!("enable {MEMORY_EXTENSION_NAME} when creating the device"),
    })
}

/// Checks that a `width × height` 2D image fits the device (`maxImageDimension2D`), before anything is allocated.
pub(crate) fn check_image_size(device: &Device, width: u32, height: u32) -> Result<()> {
    let max = device.limits().max_image_dimension2_d;
    if width == 0 || height == 0 || width > max || height > max {
        return Err(Error::InvalidArgument(format!(
            "a {width}×{height} image is outside what \"{}\" allows (1 to maxImageDimension2D = {max} per side)",
            device.info().name
        )));
    }
    Ok(())
}

/// Checks that an image with this description can be exported and imported as `OPAQUE_FD`
/// (`OPAQUE_WIN32` on Windows).
pub(crate) fn image_export_support(device: &Device, desc: &ImageDesc) -> Result<ExternalSupport> {
    need_memory_fd(device)?;
    let (what, features) = image_external_features(device, desc, MEMORY_HANDLE)?;
    check_features(device, &what, features)
}

/// Checks that images like `desc` can be bound to host memory (a memory file the library maps: host_file.rs).
#[cfg(target_os = "linux")]
pub(crate) fn image_host_import_support(device: &Device, desc: &ImageDesc) -> Result<()> {
    let (what, features) =
        image_external_features(device, desc, vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT)?;
    check_host_import(device, &what, features)
}

/// What the driver says about images like `desc` with external memory of `handle_type`:
/// the images named, and the features.
fn image_external_features(
    device: &Device,
    desc: &ImageDesc,
    handle_type: vk::ExternalMemoryHandleTypeFlags,
) -> Result<(String, vk::ExternalMemoryFeatureFlags)> {
    let mut external_info = vk::PhysicalDeviceExternalImageFormatInfo::default().handle_type(handle_type);
    let info = vk::PhysicalDeviceImageFormatInfo2::default()
        .format(desc.format)
        .ty(vk::ImageType::TYPE_2D)
        .tiling(desc.tiling)
        .usage(desc.usage)
        .push_next(&mut external_info);
    let mut external_props = vk::ExternalImageFormatProperties::default();
    let mut props = vk::ImageFormatProperties2::default().push_next(&mut external_props);
    // SAFETY: the physical device belongs to the instance; the chains live until the call returns.
    let r = unsafe {
        device.instance().raw().get_physical_device_image_format_properties2(device.physical(), &info, &mut props)
    };
    let what = format!("{:?} {:?}-tiled images with usage {:?}", desc.format, desc.tiling, desc.usage);
    match r {
        Ok(()) => {}
        Err(vk::Result::ERROR_FORMAT_NOT_SUPPORTED) => {
            return Err(Error::Unsupported {
                device: device.info().name.clone(),
                what: format!("external {what}"),
                remedy: "use another format, tiling or usage".into(),
            });
        }
        Err(result) => {
            return Err(Error::Vulkan { call: "vkGetPhysicalDeviceImageFormatProperties2", result });
        }
    }
    let max = props.image_format_properties.max_extent;
    if desc.width > max.width || desc.height > max.height || desc.width == 0 || desc.height == 0 {
        return Err(Error::InvalidArgument(format!(
            "a {}×{} image is outside what \"{}\" allows for {what} (1×1 to {}×{})",
            desc.width,
            desc.height,
            device.info().name,
            max.width,
            max.height
        )));
    }
    Ok((what, external_props.external_memory_properties.external_memory_features))
}

/// Checks that a buffer with this usage can be exported and imported as `OPAQUE_FD`
/// (`OPAQUE_WIN32` on Windows).
pub(crate) fn buffer_export_support(device: &Device, usage: vk::BufferUsageFlags) -> Result<ExternalSupport> {
    need_memory_fd(device)?;
    let features = buffer_external_features(device, usage, MEMORY_HANDLE);
    check_features(device, &format!("buffers with usage {usage:?}"), features)
}

/// Checks that buffers of `usage` can be bound to host memory (a memory file the library maps: host_file.rs).
#[cfg(target_os = "linux")]
pub(crate) fn buffer_host_import_support(device: &Device, usage: vk::BufferUsageFlags) -> Result<()> {
    let features = buffer_external_features(device, usage, vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT);
    check_host_import(device, &format!("buffers with usage {usage:?}"), features)
}

fn buffer_external_features(
    device: &Device,
    usage: vk::BufferUsageFlags,
    handle_type: vk::ExternalMemoryHandleTypeFlags,
) -> vk::ExternalMemoryFeatureFlags {
    let info = vk::PhysicalDeviceExternalBufferInfo::default().usage(usage).handle_type(handle_type);
    let mut props = vk::ExternalBufferProperties::default();
    // SAFETY: the physical device belongs to the instance.
    unsafe {
        device.instance().raw().get_physical_device_external_buffer_properties(device.physical(), &info, &mut props)
    };
    props.external_memory_properties.external_memory_features
}

/// Checks that timeline semaphores can be exported and imported as `OPAQUE_FD`
/// (`OPAQUE_WIN32` on Windows).
pub(crate) fn timeline_export_support(device: &Device) -> Result<()> {
    let unsupported = |what: String| Error::Unsupported {
        device: device.info().name.clone(),
        what,
        remedy: format!(
            "sharing semaphores (with CUDA or another device) needs {SEMAPHORE_EXTENSION_NAME} with timeline \
             semaphores (NVIDIA drivers have it; Mesa's lavapipe does not): without it, frames are handed over in \
             host-signalled mode"
        ),
    };
    if !device.can_share_semaphores() {
        return Err(unsupported(format!("the device extension {SEMAPHORE_EXTENSION_NAME}")));
    }
    let mut ty = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
    let info = vk::PhysicalDeviceExternalSemaphoreInfo::default().handle_type(SEMAPHORE_HANDLE).push_next(&mut ty);
    let mut props = vk::ExternalSemaphoreProperties::default();
    // SAFETY: the physical device belongs to the instance; the chain lives until the call returns.
    unsafe {
        device.instance().raw().get_physical_device_external_semaphore_properties(device.physical(), &info, &mut props)
    };
    let need = vk::ExternalSemaphoreFeatureFlags::EXPORTABLE | vk::ExternalSemaphoreFeatureFlags::IMPORTABLE;
    if !props.external_semaphore_features.contains(need) {
        return Err(unsupported(format!(
            "exporting timeline semaphores as {HANDLE_TYPE_NAME} (features: {:?})",
            props.external_semaphore_features
        )));
    }
    Ok(())
}

/// The format features of `format` with `tiling`.
pub(crate) fn format_features(device: &Device, format: vk::Format, tiling: vk::ImageTiling) -> vk::FormatFeatureFlags {
    // SAFETY: the physical device belongs to the instance.
    let props = unsafe { device.instance().raw().get_physical_device_format_properties(device.physical(), format) };
    match tiling {
        vk::ImageTiling::LINEAR => props.linear_tiling_features,
        _ => props.optimal_tiling_features,
    }
}

/// Checks that `format` with `tiling` has `needed` features (sampling for inputs,
/// storage for outputs), naming what is missing.
pub(crate) fn need_format_features(
    device: &Device,
    format: vk::Format,
    tiling: vk::ImageTiling,
    needed: vk::FormatFeatureFlags,
    role: &str,
) -> Result<()> {
    let have = format_features(device, format, tiling);
    if have.contains(needed) {
        return Ok(());
    }
    Err(Error::Unsupported {
        device: device.info().name.clone(),
        what: format!("{needed:?} for {tiling:?}-tiled {format:?} images ({role}; the driver offers {have:?})"),
        remedy: "use another format or tiling".into(),
    })
}

/// Checks what can be checked about a file descriptor said to be exported
/// memory of `size` bytes, before a driver sees it: that it is open, that it
/// is not a pipe, socket, directory, block device, character device other than
/// NVIDIA's (whose OPAQUE_FD exports are `/dev/nvidiactl` descriptors) or an
/// anon inode that is not memory (an eventfd: Mesa's import would block reading
/// it), and, where the kernel knows its size (memory files, as Mesa exports),
/// that it is at least `size` bytes (a shorter one faults when mapped).
#[cfg(unix)]
pub(crate) fn check_memory_handle(handle: &ExternalHandle, size: u64) -> Result<()> {
    check_memory_fd(std::os::fd::AsFd::as_fd(handle), size)
}

/// Checks what can be checked about a Windows handle said to be exported
/// memory: that it is open (it can be duplicated). The kernel object's kind
/// and size are for the driver to check.
#[cfg(windows)]
pub(crate) fn check_memory_handle(handle: &ExternalHandle, _size: u64) -> Result<()> {
    handle.try_clone().map(drop).map_err(|e| {
        Error::InvalidArgument(format!(
            "the memory handle cannot be duplicated ({e}): it is not an open handle of this process"
        ))
    })
}

#[cfg(unix)]
fn check_memory_fd(fd: std::os::fd::BorrowedFd<'_>, size: u64) -> Result<()> {
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    let meta = std::fs::File::from(fd.try_clone_to_owned().map_err(|e| {
        Error::InvalidArgument(format!("fd {raw} cannot be duplicated ({e}): it is not an open file descriptor"))
    })?)
    .metadata()
    .map_err(|e| Error::InvalidArgument(format!("fd {raw}: {e}")))?;
    use std::os::unix::fs::FileTypeExt;
    // What the kernel calls it: `anon_inode:[eventfd]`, `anon_inode:dmabuf`, `/memfd:…`, `/dev/nvidiactl`.
    let link = std::fs::read_link(format!("/proc/self/fd/{raw}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let anon = link.strip_prefix("anon_inode:");
    const NOT_MEMORY: [&str; 10] = [
        "[eventfd]",
        "[signalfd]",
        "[timerfd]",
        "inotify",
        "[fanotify]",
        "[eventpoll]",
        "[pidfd]",
        "[io_uring]",
        "[userfaultfd]",
        "[perf_event]",
    ];
    let t = meta.file_type();
    let kind = if t.is_fifo() {
        Some("a pipe".to_owned())
    } else if t.is_socket() {
        Some("a socket".to_owned())
    } else if t.is_dir() {
        Some("a directory".to_owned())
    } else if t.is_block_device() {
        Some(format!("a block device ({link})"))
    } else if t.is_char_device() && !link.is_empty() && !link.starts_with("/dev/nvidia") {
        Some(format!("a character device ({link})"))
    } else {
        anon.filter(|n| NOT_MEMORY.contains(n))
            .map(|name| format!("{} ({link})", if name == "[eventfd]" { "an eventfd" } else { "not memory" }))
    };
    if let Some(kind) = kind {
        return Err(Error::InvalidArgument(format!(
            "fd {raw} is {kind}, not memory exported with vkGetMemoryFdKHR (OPAQUE_FD)"
        )));
    }
    // An empty memory file is too small too; a size the kernel does not know reads 0.
    let known = meta.len() > 0 || (!link.is_empty() && anon.is_none());
    if t.is_file() && known && meta.len() < size {
        return Err(Error::InvalidArgument(format!(
            "the memory behind fd {raw} is {} bytes, but the description says {size}",
            meta.len()
        )));
    }
    Ok(())
}

/// Bytes of one texel, or an error naming the formats that are supported.
pub(crate) fn texel_bytes(format: vk::Format) -> Result<u32> {
    conv::bytes_per_pixel(format)
        .ok_or_else(|| Error::InvalidArgument(format!("image format {format:?} is not supported")))
}
