//! The Vulkan loader and a headless instance (no window, no surface).

use std::ffi::{CStr, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use ash::vk;

use crate::error::{Error, Result, VkResultExt};

/// The Khronos validation layer's name.
pub(crate) const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Options for [`Instance::new`].
#[derive(Debug, Clone, Default)]
pub struct InstanceOptions {
    /// Enable `VK_LAYER_KHRONOS_validation` and count the errors it reports
    /// (see [`Instance::validation_errors`]). Fails if the layer is not installed.
    pub validation: bool,
}

/// Counts validation messages; lives in a `Box` whose address the callback gets.
struct Messages {
    errors: AtomicUsize,
}

/// A headless Vulkan instance, or the caller's (borrowed: see
/// [`Instance::borrowed`]). Fields are in teardown order: the debug messenger,
/// then the instance, then the loader (`ash::Entry`) last.
pub struct Instance {
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    raw: ash::Instance,
    messages: Box<Messages>,
    entry: ash::Entry,
    /// Whether this value created the instance and destroys it.
    owned: bool,
}

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        // SAFETY: `user` is the address of the `Messages` box owned by the
        // Instance, which outlives the messenger (it is destroyed first).
        let messages = unsafe { &*(user as *const Messages) };
        messages.errors.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: the loader passes a valid callback-data pointer for the duration of the call.
    let message = unsafe { data.as_ref() }
        .filter(|d| !d.p_message.is_null())
        // SAFETY: p_message is a NUL-terminated string per the Vulkan spec.
        .map(|d| unsafe { CStr::from_ptr(d.p_message) }.to_string_lossy().into_owned())
        .unwrap_or_default();
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        log::error!(target: "vulkan", "{message}");
    } else {
        log::warn!(target: "vulkan", "{message}");
    }
    vk::FALSE
}

impl Instance {
    /// Loads the Vulkan loader (`NEURAL_FRAME_VULKAN_LIBRARY` or the system's
    /// `libvulkan.so.1`; `vulkan-1.dll` on Windows) and creates a Vulkan 1.2+ instance with no surface.
    pub fn new(options: &InstanceOptions) -> Result<Arc<Self>> {
        keep_driver_loaded();
        let entry = load_entry()?;
        // SAFETY: entry is a valid loaded loader.
        let loader_version = match unsafe { entry.try_enumerate_instance_version() } {
            Ok(v) => v.unwrap_or(vk::API_VERSION_1_0),
            Err(result) => {
                return Err(Error::Vulkan { call: "vkEnumerateInstanceVersion", result });
            }
        };
        if loader_version < vk::API_VERSION_1_2 {
            return Err(Error::Unsupported {
                device: "Vulkan loader".into(),
                what: format!("Vulkan 1.2 (loader is {})", version_string(loader_version)),
                remedy: "timeline semaphores and external memory need Vulkan 1.2: update libvulkan1".into(),
            });
        }
        let api_version = loader_version.min(vk::API_VERSION_1_3);
        let app = vk::ApplicationInfo::default()
            .application_name(c"neural-frame")
            .engine_name(c"neural-frame")
            .api_version(api_version);

        let mut layers: Vec<*const i8> = Vec::new();
        let mut extensions: Vec<*const i8> = Vec::new();
        if options.validation {
            // SAFETY: entry is valid; the call has no other preconditions.
            let available =
                unsafe { entry.enumerate_instance_layer_properties() }.call("vkEnumerateInstanceLayerProperties")?;
            let found = available.iter().any(|l| l.layer_name_as_c_str().is_ok_and(|n| n == VALIDATION_LAYER));
            if !found {
                return Err(Error::Unsupported {
                    device: "Vulkan loader".into(),
                    what: "the layer VK_LAYER_KHRONOS_validation".into(),
                    remedy:
                        "install it (Debian/Ubuntu: `apt install vulkan-validationlayers`) or run without validation"
                            .into(),
                });
            }
            layers.push(VALIDATION_LAYER.as_ptr());
            extensions.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        let info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions);
        // SAFETY: info and everything it points to live until the call returns.
        let raw = unsafe { entry.create_instance(&info, None) }.map_err(|result| match result {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => {
                Error::NoVulkanDriver { detail: " (vkCreateInstance: ERROR_INCOMPATIBLE_DRIVER)".into() }
            }
            result => Error::Vulkan { call: "vkCreateInstance", result },
        })?;
        let messages = Box::new(Messages { errors: AtomicUsize::new(0) });
        let mut instance = Instance { messenger: None, raw, messages, entry, owned: true };
        if options.validation {
            let loader = ash::ext::debug_utils::Instance::new(&instance.entry, &instance.raw);
            let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(
                    vk::DebugUtilsMessageSeverityFlagsEXT::ERROR | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING,
                )
                .message_type(
                    vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION | vk::DebugUtilsMessageTypeFlagsEXT::GENERAL,
                )
                .pfn_user_callback(Some(on_message))
                .user_data(&*instance.messages as *const Messages as *mut c_void);
            // SAFETY: the callback's user data outlives the messenger (see Drop order).
            let messenger =
                unsafe { loader.create_debug_utils_messenger(&info, None) }.call("vkCreateDebugUtilsMessengerEXT")?;
            instance.messenger = Some((loader, messenger));
        }
        Ok(Arc::new(instance))
    }

    /// Wraps the caller's instance without taking it over: dropping the value
    /// leaves the instance alive.
    ///
    /// # Safety
    /// `raw` must be a live instance created from `entry` for at least
    /// `api_version` (1.2 or newer), and it must outlive the returned value and
    /// every object made from it.
    pub unsafe fn borrowed(entry: ash::Entry, raw: ash::Instance, api_version: u32) -> Result<Arc<Self>> {
        if api_version < vk::API_VERSION_1_2 {
            return Err(Error::Unsupported {
                device: "the caller's Vulkan instance".into(),
                what: format!("Vulkan 1.2 (the instance was created for {})", version_string(api_version)),
                remedy: "create the instance with apiVersion 1.2 or newer (timeline semaphores)".into(),
            });
        }
        let messages = Box::new(Messages { errors: AtomicUsize::new(0) });
        Ok(Arc::new(Instance { messenger: None, raw, messages, entry, owned: false }))
    }

    /// The raw `ash` instance.
    pub fn raw(&self) -> &ash::Instance {
        &self.raw
    }

    /// Validation errors reported so far (0 when validation is off).
    pub fn validation_errors(&self) -> usize {
        self.messages.errors.load(Ordering::Relaxed)
    }

    /// Whether the validation layer is enabled.
    pub fn validation_enabled(&self) -> bool {
        self.messenger.is_some()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some((loader, messenger)) = self.messenger.take() {
            // SAFETY: the messenger was created from this instance and is destroyed once.
            unsafe { loader.destroy_debug_utils_messenger(messenger, None) };
        }
        if self.owned {
            // SAFETY: every child object holds an Arc<Instance>, so none is alive here.
            unsafe { self.raw.destroy_instance(None) };
        }
    }
}

/// The Vulkan loader unloads the driver when the process's last instance is
/// destroyed, and NVIDIA's driver cannot be loaded again and again: its TLS
/// library takes static TLS at every load, and after about twenty loads
/// `dlopen` fails ("cannot allocate memory in static TLS block") and the loader
/// finds no driver. So one minimal instance, created at the first
/// [`Instance::new`] and never destroyed, keeps the driver loaded for the life
/// of the process: contexts can then be created and dropped any number of times.
fn keep_driver_loaded() {
    static KEEPER: OnceLock<Option<(ash::Entry, vk::Instance)>> = OnceLock::new();
    KEEPER.get_or_init(|| {
        let entry = load_entry().ok()?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
        let info = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: info lives until the call returns. The instance is deliberately never
        // destroyed; where creation fails, the real instance reports why.
        let instance = unsafe { entry.create_instance(&info, None) }.ok()?;
        Some((entry, instance.handle()))
    });
}

/// The Vulkan loader where `NEURAL_FRAME_VULKAN_LIBRARY` names none.
#[cfg(not(windows))]
const DEFAULT_LOADER: &str = "libvulkan.so.1";
/// The Vulkan loader where `NEURAL_FRAME_VULKAN_LIBRARY` names none.
#[cfg(windows)]
const DEFAULT_LOADER: &str = "vulkan-1.dll";

fn load_entry() -> Result<ash::Entry> {
    let library = std::env::var("NEURAL_FRAME_VULKAN_LIBRARY").unwrap_or_else(|_| DEFAULT_LOADER.into());
    // SAFETY: loading the Vulkan loader runs its initialisers; it is a well-known system library.
    unsafe { ash::Entry::load_from(&library) }.map_err(|e| Error::VulkanLoader { library, reason: e.to_string() })
}

/// Formats a packed Vulkan version.
pub(crate) fn version_string(v: u32) -> String {
    format!("{}.{}.{}", vk::api_version_major(v), vk::api_version_minor(v), vk::api_version_patch(v))
}
