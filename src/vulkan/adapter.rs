//! Physical devices: what each one is, and choosing one.

use std::ffi::CStr;
use std::fmt;
use std::str::FromStr;

use ash::vk;
use serde::Serialize;

use crate::error::{Error, Result, VkResultExt, format_uuid, parse_uuid};
use crate::vulkan::external::{EXTERNAL_MEMORY_EXTENSION, EXTERNAL_SEMAPHORE_EXTENSION};
use crate::vulkan::instance::{Instance, version_string};

/// Device extensions the pipeline cannot work without (`VK_KHR_external_memory_fd`;
/// `_win32` on Windows).
pub(crate) const REQUIRED_EXTENSIONS: &[&CStr] = &[EXTERNAL_MEMORY_EXTENSION];
/// Device extensions used when present (semaphore sharing with CUDA:
/// `VK_KHR_external_semaphore_fd`; `_win32` on Windows).
pub(crate) const OPTIONAL_EXTENSIONS: &[&CStr] = &[EXTERNAL_SEMAPHORE_EXTENSION];

/// What a physical device is, as the user sees it: from [`suitable_devices`](crate::suitable_devices),
/// or [`BackendReport::vulkan_device`](crate::BackendReport::vulkan_device) of a context.
/// `Display` gives a one-line summary: `#0 "NVIDIA H200" (discrete gpu, UUID …)`.
///
/// ```no_run
/// use neural_frame::{Backend, NeuralFrameContext};
///
/// for d in neural_frame::suitable_devices(Backend::Cpu)? {
///     println!("{d}: {} {}, Vulkan {}, driver UUID {}", d.driver_name, d.driver_info, d.api_version, d.driver_uuid);
/// }
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// let d = &ctx.report().vulkan_device;
/// if !d.external_semaphore_fd {
///     println!("{} cannot share semaphores: {:?}", d.name, ctx.sync_mode());
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct AdapterInfo {
    /// Position in `vkEnumeratePhysicalDevices`.
    pub index: usize,
    /// `deviceName`.
    pub name: String,
    /// Discrete, integrated, CPU, …
    pub device_type: String,
    /// `driverName` (VkPhysicalDeviceDriverProperties).
    pub driver_name: String,
    /// `driverInfo`, the driver's own version text.
    pub driver_info: String,
    /// The API version the device supports, as text.
    pub api_version: String,
    /// `deviceUUID` as text; equals the CUDA device UUID on NVIDIA.
    pub uuid: String,
    /// `deviceUUID` as bytes.
    #[serde(skip)]
    pub uuid_bytes: [u8; 16],
    /// `driverUUID` as text: with the deviceUUID, what an importer checks before
    /// it accepts memory or semaphores from another device.
    pub driver_uuid: String,
    /// `driverUUID` as bytes.
    #[serde(skip)]
    pub driver_uuid_bytes: [u8; 16],
    /// The `vk::PhysicalDeviceType`, for selection.
    #[serde(skip)]
    pub kind: vk::PhysicalDeviceType,
    /// Why the device cannot be used, if it cannot.
    pub unsuitable: Option<String>,
    /// Whether `VK_KHR_external_semaphore_fd` is present (on Windows:
    /// `VK_KHR_external_semaphore_win32`, [`EXTERNAL_SEMAPHORE_EXTENSION`](crate::EXTERNAL_SEMAPHORE_EXTENSION)).
    pub external_semaphore_fd: bool,
}

impl fmt::Display for AdapterInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} \"{}\" ({}, UUID {})", self.index, self.name, self.device_type, self.uuid)
    }
}

/// Which Vulkan device to use ([`ContextBuilder::device`](crate::ContextBuilder::device)).
///
/// It parses from `auto`, a device index, or a `deviceUUID` (32 hex digits,
/// dashes and a `GPU-` prefix optional, as `nvidia-smi -L` prints it), and
/// displays as the error messages name it.
///
/// ```
/// use neural_frame::DeviceSelector;
///
/// assert_eq!("auto".parse(), Ok(DeviceSelector::Auto));
/// assert_eq!("1".parse(), Ok(DeviceSelector::Index(1)));
/// let by_uuid: DeviceSelector = "GPU-73ca0102-0304-0506-0708-090a0b0c0d77".parse()?;
/// assert_eq!(by_uuid, DeviceSelector::Uuid([0x73, 0xca, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0x77]));
/// assert_eq!(by_uuid.to_string(), "UUID 73ca0102-0304-0506-0708-090a0b0c0d77");
/// assert!("first".parse::<DeviceSelector>().is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSelector {
    /// The first suitable device, discrete GPUs first.
    #[default]
    Auto,
    /// By position in the enumeration.
    Index(usize),
    /// By `deviceUUID`.
    Uuid([u8; 16]),
}

impl FromStr for DeviceSelector {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        if let Ok(i) = s.parse::<usize>() {
            return Ok(Self::Index(i));
        }
        parse_uuid(s)
            .map(Self::Uuid)
            .ok_or_else(|| format!("`{s}` is neither `auto`, a device index nor a UUID (32 hex digits)"))
    }
}

impl fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => write!(f, "a suitable device"),
            Self::Index(i) => write!(f, "device index {i}"),
            Self::Uuid(u) => write!(f, "UUID {}", format_uuid(u)),
        }
    }
}

/// Picks a device from `candidates`. Pure, so it can be tested with any list.
pub(crate) fn select(candidates: &[AdapterInfo], selector: DeviceSelector) -> Result<usize> {
    let seen = || {
        if candidates.is_empty() {
            "none".to_string()
        } else {
            candidates.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
        }
    };
    let chosen = match selector {
        DeviceSelector::Index(i) => candidates.iter().position(|c| c.index == i),
        DeviceSelector::Uuid(u) => candidates.iter().position(|c| c.uuid_bytes == u),
        DeviceSelector::Auto => {
            let rank = |c: &AdapterInfo| match c.kind {
                vk::PhysicalDeviceType::DISCRETE_GPU => 0,
                vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
                vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
                vk::PhysicalDeviceType::CPU => 3,
                _ => 4,
            };
            let best = candidates
                .iter()
                .enumerate()
                .filter(|(_, c)| c.unsuitable.is_none())
                .min_by_key(|(i, c)| (rank(c), *i))
                .map(|(i, _)| i);
            if best.is_none() && !candidates.is_empty() {
                let why = candidates
                    .iter()
                    .map(|c| format!("{c}: {}", c.unsuitable.as_deref().unwrap_or("?")))
                    .collect::<Vec<_>>()
                    .join("; ");
                return Err(Error::NoSuchDevice { wanted: "a device suitable for neural-frame".into(), seen: why });
            }
            best
        }
    };
    let index = chosen.ok_or_else(|| Error::NoSuchDevice { wanted: selector.to_string(), seen: seen() })?;
    if let Some(why) = &candidates[index].unsuitable {
        return Err(Error::Unsupported {
            device: candidates[index].name.clone(),
            what: why.clone(),
            remedy: "choose another device (ContextBuilder::device), or update the driver".into(),
        });
    }
    Ok(index)
}

/// Lists the physical devices with their properties and suitability.
pub(crate) fn enumerate(instance: &Instance) -> Result<Vec<(vk::PhysicalDevice, AdapterInfo)>> {
    // SAFETY: the instance is valid for the duration of the call.
    let devices = match unsafe { instance.raw().enumerate_physical_devices() } {
        Ok(d) => d,
        Err(vk::Result::ERROR_INITIALIZATION_FAILED) => {
            return Err(Error::NoVulkanDriver {
                detail: " (vkEnumeratePhysicalDevices: ERROR_INITIALIZATION_FAILED)".into(),
            });
        }
        Err(result) => {
            return Err(Error::Vulkan { call: "vkEnumeratePhysicalDevices", result });
        }
    };
    if devices.is_empty() {
        return Err(Error::NoVulkanDriver { detail: String::new() });
    }
    devices.into_iter().enumerate().map(|(index, pd)| Ok((pd, describe(instance, pd, index)?))).collect()
}

pub(crate) fn describe(instance: &Instance, pd: vk::PhysicalDevice, index: usize) -> Result<AdapterInfo> {
    let mut id = vk::PhysicalDeviceIDProperties::default();
    let mut driver = vk::PhysicalDeviceDriverProperties::default();
    let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id).push_next(&mut driver);
    // SAFETY: pd comes from this instance; the chained structs live until the call returns.
    unsafe { instance.raw().get_physical_device_properties2(pd, &mut props) };
    let p = props.properties;
    let name = p.device_name_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let driver_name = driver.driver_name_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let driver_info = driver.driver_info_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    // SAFETY: pd comes from this instance.
    let exts = unsafe { instance.raw().enumerate_device_extension_properties(pd) }
        .call("vkEnumerateDeviceExtensionProperties")?;
    let has = |want: &CStr| exts.iter().any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == want));
    let mut unsuitable = None;
    if p.api_version < vk::API_VERSION_1_2 {
        unsuitable = Some(format!("Vulkan 1.2 (device supports {})", version_string(p.api_version)));
    } else if let Some(missing) = REQUIRED_EXTENSIONS.iter().find(|e| !has(e)) {
        unsuitable = Some(format!("the device extension {}", missing.to_string_lossy()));
    }
    Ok(AdapterInfo {
        index,
        name,
        device_type: format!("{:?}", p.device_type).to_lowercase().replace('_', " "),
        driver_name,
        driver_info,
        api_version: version_string(p.api_version),
        uuid: format_uuid(&id.device_uuid),
        uuid_bytes: id.device_uuid,
        driver_uuid: format_uuid(&id.driver_uuid),
        driver_uuid_bytes: id.driver_uuid,
        kind: p.device_type,
        unsuitable,
        external_semaphore_fd: has(EXTERNAL_SEMAPHORE_EXTENSION),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(index: usize, kind: vk::PhysicalDeviceType, uuid_byte: u8, unsuitable: Option<&str>) -> AdapterInfo {
        let uuid_bytes = [uuid_byte; 16];
        AdapterInfo {
            index,
            name: format!("gpu{index}"),
            device_type: format!("{kind:?}"),
            driver_name: "fake".into(),
            driver_info: String::new(),
            api_version: "1.3.0".into(),
            uuid: format_uuid(&uuid_bytes),
            uuid_bytes,
            driver_uuid: format_uuid(&[9; 16]),
            driver_uuid_bytes: [9; 16],
            kind,
            unsuitable: unsuitable.map(str::to_string),
            external_semaphore_fd: true,
        }
    }

    #[test]
    fn auto_prefers_discrete_and_skips_unsuitable() {
        let list = vec![
            fake(0, vk::PhysicalDeviceType::CPU, 1, None),
            fake(1, vk::PhysicalDeviceType::DISCRETE_GPU, 2, Some("no VK_KHR_external_memory_fd")),
            fake(2, vk::PhysicalDeviceType::INTEGRATED_GPU, 3, None),
            fake(3, vk::PhysicalDeviceType::DISCRETE_GPU, 4, None),
            fake(4, vk::PhysicalDeviceType::DISCRETE_GPU, 5, None),
        ];
        assert_eq!(select(&list, DeviceSelector::Auto).ok(), Some(3));
    }

    #[test]
    fn by_index_and_uuid_on_several_gpus() {
        let list = vec![
            fake(0, vk::PhysicalDeviceType::DISCRETE_GPU, 0xa0, None),
            fake(1, vk::PhysicalDeviceType::DISCRETE_GPU, 0xb1, None),
        ];
        assert_eq!(select(&list, DeviceSelector::Index(1)).ok(), Some(1));
        assert_eq!(select(&list, DeviceSelector::Uuid([0xa0; 16])).ok(), Some(0));
        let sel: DeviceSelector = list[1].uuid.parse().expect("uuid parses");
        assert_eq!(select(&list, sel).ok(), Some(1));
        let err = select(&list, DeviceSelector::Index(7)).expect_err("no device 7");
        let text = err.to_string();
        assert!(text.contains("device index 7") && text.contains(&list[1].uuid), "{text}");
    }

    #[test]
    fn unsuitable_explicit_choice_says_why() {
        let list = vec![fake(
            0,
            vk::PhysicalDeviceType::DISCRETE_GPU,
            1,
            Some("the device extension VK_KHR_external_memory_fd"),
        )];
        let err = select(&list, DeviceSelector::Index(0)).expect_err("unsuitable");
        assert!(err.to_string().contains("VK_KHR_external_memory_fd"), "{err}");
        let err = select(&list, DeviceSelector::Auto).expect_err("unsuitable");
        assert!(err.to_string().contains("VK_KHR_external_memory_fd"), "{err}");
    }

    #[test]
    fn selector_parsing() {
        assert_eq!("auto".parse::<DeviceSelector>(), Ok(DeviceSelector::Auto));
        assert_eq!("2".parse::<DeviceSelector>(), Ok(DeviceSelector::Index(2)));
        assert!("GPU-xyz".parse::<DeviceSelector>().is_err());
    }
}
