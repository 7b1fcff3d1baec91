//! A renderer that hands its frames to a `neural-frame serve` worker and reads
//! the results back: the example program of the client crate.
//!
//! ```sh
//! neural-frame serve --socket /tmp/nf.sock --model models/upscale.onnx &
//! cargo run --release -p neural-frame-client --example render -- \
//!     --socket /tmp/nf.sock --input models/coffee.png --output out.png [--frames N] [--warmup-ms MS] \
//!     [--sync auto|host] [--slots N] [--timeout SECONDS] [--queue transfer|main]
//! ```
//!
//! It creates its own Vulkan instance and device (as any renderer would), puts
//! the picture once into a device-local `VkImage` of its own, and then, for
//! every frame, copies that image into the next input slot on its queue and
//! hands the slot to the worker, and copies the frame's result out of its output
//! slot into a device-local buffer of its own (what a compositor would sample).
//! Nothing crosses PCIe per frame: the frames/s it prints times the frames
//! alone, after at least `--warmup-ms` (default 1000) of untimed ones. After
//! them (untimed), the last result is copied into a host-visible buffer and
//! written as a PNG.
//!
//! - **GPU mode** (the device shares timeline semaphores): the copy signals the
//!   client's "rendered" timeline, the worker's GPU waits for it, and the
//!   renderer's queue waits for the worker's "output ready" before copying the
//!   output slot; the host waits only before reusing an output slot (normally
//!   already finished) and at the end. The copy into frame n+1's input slot is
//!   queued before frame n's copy out (`--draw-order ahead`, the default with 2 or
//!   more slots): the copy out waits for frame n's result, and a queue that runs
//!   its submissions in order would otherwise hold frame n+1 back until frame n
//!   is done (`--draw-order behind`, the order before).
//! - **The renderer's queue**: all of its commands (the picture's upload, the
//!   copies in and out, the PNG's read-back) go on one queue. `--queue transfer`
//!   (the default) takes it from a transfer-only family (TRANSFER without GRAPHICS
//!   or COMPUTE: NVIDIA's copy engines) where the device has one, else from a
//!   graphics or compute family (`--queue main` always). A graphics queue's work
//!   is time-sliced with the worker's CUDA work: on an H100 at 600×400, 563
//!   frames/s there against 882–929 on the transfer-only family and 933–953 for
//!   the ring in-process (docs/performance.md).
//! - **Host mode** (`--sync host`, or a driver without semaphore fds such as
//!   Mesa's lavapipe): the renderer waits for its own copy, submits, and waits
//!   for the worker's `Done` on the host.
//!
//! `NEURAL_FRAME_VALIDATION=1` enables `VK_LAYER_KHRONOS_validation` where it is
//! installed; the program then counts the layer's errors and exits with 2 if
//! there were any. Other failures exit with 1.

use std::collections::VecDeque;
use std::ffi::{CStr, c_void};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ash::vk;
use neural_frame_client::{
    Client, ClientDevice, FrameId, Options, SlotBuffer, SyncMode, SyncPreference, WaitPoint, acquire_from_worker,
    release_to_worker,
};

type BoxError = Box<dyn std::error::Error>;
type Result<T, E = BoxError> = std::result::Result<T, E>;

const USAGE: &str = "\
usage: render --socket PATH --input IN.png --output OUT.png [--frames N] [--warmup-ms MS] [--sync auto|host]
              [--slots N] [--timeout SECONDS] [--draw-order ahead|behind] [--queue transfer|main]

  --socket PATH    the worker's socket (default: $XDG_RUNTIME_DIR/neural-frame.sock)
  --input IN.png   the picture to render (8-bit RGB or RGBA)
  --output OUT.png where the last frame's result goes
  --frames N       frames to run, timed (default 1)
  --warmup-ms MS   before them, untimed frames for at least MS milliseconds, in rounds of twice the
                   slots, drained after each: the worker's first frames run before its fastest session
                   takes over (fast start), as `neural-frame bench` warms up before it times
                   (default 1000; 0: none)
  --sync MODE      auto: GPU mode where the device can share timeline semaphores, else host mode;
                   host: host mode (default auto)
  --slots N        input and output slots, 1 to 16 (default 3)
  --timeout S      how long one frame may take on the worker before the client gives it up
                   (default 60: a CPU backend can take seconds a frame)
  --draw-order O   GPU mode: ahead: frame n+1 is drawn (queued) before frame n's copy out, which
                   waits on the GPU for frame n's result; behind: after it, so that on a queue that
                   runs its submissions in order frame n+1 reaches the worker only once frame n is
                   done and copied out (default ahead with 2 or more slots, else behind)
  --queue Q        transfer: the renderer's commands on a queue of a transfer-only family where the
                   device has one (its copy engines, beside the worker's CUDA work), else main;
                   main: on a graphics or compute family (default transfer)

NEURAL_FRAME_VALIDATION=1 enables the Khronos validation layer where it is installed.";

/// How long the host waits for work on its own queue that waits for nothing of the worker's.
const OWN_WORK_TIMEOUT: Duration = Duration::from_secs(30);

/// The command line.
struct Args {
    socket: PathBuf,
    input: PathBuf,
    output: PathBuf,
    frames: u64,
    /// `--warmup-ms`.
    warmup: Duration,
    sync: SyncPreference,
    slots: u16,
    timeout: Duration,
    /// `--draw-order`: `Some(true)` ahead, `Some(false)` behind, `None` the default.
    draw_ahead: Option<bool>,
    /// `--queue transfer` (the default): a transfer-only family where the device has one.
    transfer_queue: bool,
}

/// Why the command line was not taken.
enum ArgsError {
    /// `--help`.
    Help,
    /// What is wrong with it.
    Bad(String),
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, ArgsError> {
    let mut socket = None;
    let mut input = None;
    let mut output = None;
    let mut frames = 1u64;
    let mut warmup = Duration::from_millis(1000);
    let mut sync = SyncPreference::Auto;
    let mut slots = 3u16;
    let mut timeout = Duration::from_secs(60);
    let mut draw_ahead = None;
    let mut transfer_queue = true;
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(ArgsError::Help);
        }
        let known = [
            "--socket",
            "--input",
            "--output",
            "--frames",
            "--warmup-ms",
            "--sync",
            "--slots",
            "--timeout",
            "--draw-order",
            "--queue",
        ];
        if !known.contains(&flag.as_str()) {
            return Err(ArgsError::Bad(format!("unknown argument `{flag}`")));
        }
        let value = it.next().ok_or_else(|| ArgsError::Bad(format!("{flag} needs a value")))?;
        match flag.as_str() {
            "--socket" => socket = Some(PathBuf::from(value)),
            "--input" => input = Some(PathBuf::from(value)),
            "--output" => output = Some(PathBuf::from(value)),
            "--frames" => {
                frames = value
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| ArgsError::Bad(format!("--frames takes a count of at least 1, not `{value}`")))?
            }
            "--warmup-ms" => {
                warmup = value
                    .parse::<u64>()
                    .ok()
                    .filter(|&ms| ms <= 3_600_000)
                    .map(Duration::from_millis)
                    .ok_or_else(|| ArgsError::Bad(format!("--warmup-ms takes 0 to 3600000, not `{value}`")))?
            }
            "--slots" => {
                slots = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=16).contains(n))
                    .ok_or_else(|| ArgsError::Bad(format!("--slots takes 1 to 16, not `{value}`")))?
            }
            "--timeout" => {
                timeout = value
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| ArgsError::Bad(format!("--timeout takes seconds above 0, not `{value}`")))?
            }
            "--sync" => {
                sync = match value.as_str() {
                    "auto" => SyncPreference::Auto,
                    "host" => SyncPreference::Host,
                    _ => return Err(ArgsError::Bad(format!("--sync takes `auto` or `host`, not `{value}`"))),
                }
            }
            "--draw-order" => {
                draw_ahead = match value.as_str() {
                    "ahead" => Some(true),
                    "behind" => Some(false),
                    _ => {
                        return Err(ArgsError::Bad(format!("--draw-order takes `ahead` or `behind`, not `{value}`")));
                    }
                }
            }
            "--queue" => {
                transfer_queue = match value.as_str() {
                    "transfer" => true,
                    "main" => false,
                    _ => return Err(ArgsError::Bad(format!("--queue takes `transfer` or `main`, not `{value}`"))),
                }
            }
            _ => return Err(ArgsError::Bad(format!("unknown argument `{flag}`"))),
        }
    }
    if draw_ahead == Some(true) && slots < 2 {
        return Err(ArgsError::Bad(
            "--draw-order ahead needs --slots 2 or more (frame n+1's copy in must not wait for a slot that frame n \
             still uses)"
                .into(),
        ));
    }
    Ok(Args {
        socket: socket.unwrap_or_else(neural_frame_client::default_socket),
        input: input.ok_or_else(|| ArgsError::Bad("--input IN.png is required".into()))?,
        output: output.ok_or_else(|| ArgsError::Bad("--output OUT.png is required".into()))?,
        frames,
        warmup,
        sync,
        slots,
        timeout,
        draw_ahead,
        transfer_queue,
    })
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(ArgsError::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(ArgsError::Bad(why)) => {
            eprintln!("render: {why}\n\n{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    let validation = std::env::var_os("NEURAL_FRAME_VALIDATION").is_some_and(|v| v == "1");
    let messages = Arc::new(Messages { errors: AtomicUsize::new(0) });
    let result = Instance::new(validation, &messages).and_then(|instance| {
        let enabled = instance.messenger.is_some();
        let r = run(&instance, &args);
        drop(instance);
        r.map(|()| enabled)
    });
    let errors = messages.errors.load(Ordering::Relaxed);
    match result {
        Ok(validated) => {
            if validated {
                println!("render: {errors} validation error(s)");
            }
            if errors > 0 { ExitCode::from(2) } else { ExitCode::SUCCESS }
        }
        Err(e) => {
            eprintln!("render: error: {e}");
            if errors > 0 {
                eprintln!("render: {errors} validation error(s)");
            }
            ExitCode::FAILURE
        }
    }
}

/// A failed Vulkan call, named.
fn vk_err(call: &'static str) -> impl FnOnce(vk::Result) -> BoxError {
    move |r| format!("{call} failed: {r}").into()
}

// ---------------------------------------------------------------------------
// The instance, with the validation layer's messenger.

/// The validation layer's error count (the messenger's user data).
struct Messages {
    errors: AtomicUsize,
}

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        // SAFETY: `user` points to the `Messages` of an `Arc` that `main` holds until after the instance
        // (and so every messenger) is destroyed.
        let messages = unsafe { &*(user as *const Messages) };
        messages.errors.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the loader passes null or valid callback data for the duration of the call.
        let text = match unsafe { data.as_ref() } {
            // SAFETY: `p_message` is null or a NUL-terminated string valid during the call.
            Some(d) if !d.p_message.is_null() => unsafe { CStr::from_ptr(d.p_message) }.to_string_lossy().into_owned(),
            _ => String::from("(no message)"),
        };
        eprintln!("render: validation error: {text}");
    }
    vk::FALSE
}

/// The renderer's Vulkan instance; destroyed (messenger first) on drop.
struct Instance {
    entry: ash::Entry,
    instance: ash::Instance,
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
}

impl Instance {
    fn new(validation: bool, messages: &Arc<Messages>) -> Result<Instance> {
        // SAFETY: loads the system's Vulkan loader (libvulkan.so.1); nothing else is loading it concurrently.
        let entry =
            unsafe { ash::Entry::load() }.map_err(|e| format!("loading the Vulkan loader (libvulkan.so.1): {e}"))?;
        let layer = c"VK_LAYER_KHRONOS_validation";
        let validation = validation && {
            // SAFETY: plain enumeration through a loaded entry.
            let layers = unsafe { entry.enumerate_instance_layer_properties() }
                .map_err(vk_err("vkEnumerateInstanceLayerProperties"))?;
            let found = layers.iter().any(|l| l.layer_name_as_c_str().is_ok_and(|n| n == layer));
            if !found {
                eprintln!("render: NEURAL_FRAME_VALIDATION=1, but VK_LAYER_KHRONOS_validation is not installed");
            }
            found
        };
        let app = vk::ApplicationInfo::default()
            .application_name(c"neural-frame-client render")
            .api_version(vk::API_VERSION_1_2);
        let layers = [layer.as_ptr()];
        let extensions = [ash::ext::debug_utils::NAME.as_ptr()];
        let user = Arc::as_ptr(messages) as *mut c_void;
        let messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR)
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_message))
            .user_data(user);
        // Chained into the instance's creation too, for messages of vkCreateInstance and vkDestroyInstance.
        let mut chained = messenger_info;
        let mut info = vk::InstanceCreateInfo::default().application_info(&app);
        if validation {
            info = info.enabled_layer_names(&layers).enabled_extension_names(&extensions).push_next(&mut chained);
        }
        // SAFETY: `info` and everything it points to live for the call; the layer and extension were found.
        let instance = unsafe { entry.create_instance(&info, None) }.map_err(vk_err("vkCreateInstance"))?;
        let mut this = Instance { entry, instance, messenger: None };
        if validation {
            let loader = ash::ext::debug_utils::Instance::new(&this.entry, &this.instance);
            // SAFETY: the instance is live with VK_EXT_debug_utils enabled; the user data outlives the messenger
            // (`main` holds the Arc until the instance is gone).
            let m = unsafe { loader.create_debug_utils_messenger(&messenger_info, None) }
                .map_err(vk_err("vkCreateDebugUtilsMessengerEXT"))?;
            this.messenger = Some((loader, m));
            println!("render: validation layer enabled");
        }
        Ok(this)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some((loader, m)) = self.messenger.take() {
            // SAFETY: the messenger was made on this instance and is destroyed once.
            unsafe { loader.destroy_debug_utils_messenger(m, None) };
        }
        // SAFETY: every child of the instance (the device, in `run`) is destroyed before the instance drops.
        unsafe { self.instance.destroy_instance(None) };
    }
}

// ---------------------------------------------------------------------------
// The device and the objects the renderer makes on it.

/// Something made on the device, destroyed with it.
enum Object {
    Image(vk::Image),
    Buffer(vk::Buffer),
    Memory(vk::DeviceMemory),
    Fence(vk::Fence),
}

/// The renderer's device, its queue and command pool, and everything it made on
/// it; all destroyed on drop, after `vkDeviceWaitIdle`.
struct Device {
    instance: ash::Instance,
    physical: vk::PhysicalDevice,
    device: ash::Device,
    family: u32,
    /// Whether `family` is transfer-only (TRANSFER without GRAPHICS or COMPUTE).
    transfer_only: bool,
    queue: vk::Queue,
    external_semaphore_fd: bool,
    memory_properties: vk::PhysicalDeviceMemoryProperties,
    name: String,
    pool: vk::CommandPool,
    objects: Vec<Object>,
}

/// A host-visible buffer, mapped.
struct HostBuffer {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
    mapped: *mut u8,
    coherent: bool,
}

impl Device {
    /// A device on the first physical device with a queue family that can do
    /// graphics or compute (and so transfers), with VK_KHR_external_memory_fd,
    /// VK_KHR_external_semaphore_fd where offered, and timeline semaphores
    /// where supported. Its one queue: with `prefer_transfer`, of a
    /// transfer-only family where the device has one, else of that graphics or
    /// compute family.
    fn new(instance: &Instance, prefer_transfer: bool) -> Result<Device> {
        let vki = &instance.instance;
        // SAFETY: the instance is live.
        let physicals = unsafe { vki.enumerate_physical_devices() }.map_err(vk_err("vkEnumeratePhysicalDevices"))?;
        let (physical, family) = physicals
            .iter()
            .find_map(|&p| {
                // SAFETY: `p` is a physical device of this instance.
                let families = unsafe { vki.get_physical_device_queue_family_properties(p) };
                // Graphics and compute families always support transfers, whether or not they list TRANSFER.
                let wanted = vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE;
                families
                    .iter()
                    .position(|f| f.queue_flags.intersects(wanted) && f.queue_count > 0)
                    .map(|i| (p, i as u32))
            })
            .ok_or("no Vulkan device has a queue family for graphics or compute (is a Vulkan driver installed?)")?;
        // SAFETY: `physical` is a physical device of this instance.
        let families = unsafe { vki.get_physical_device_queue_family_properties(physical) };
        let transfer_family = families.iter().position(|f| {
            f.queue_flags.contains(vk::QueueFlags::TRANSFER)
                && !f.queue_flags.intersects(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE)
                && f.queue_count > 0
        });
        let (family, transfer_only) = match transfer_family {
            Some(t) if prefer_transfer => (t as u32, true),
            _ => (family, false),
        };
        // SAFETY: `physical` is a physical device of this instance.
        let properties = unsafe { vki.get_physical_device_properties(physical) };
        let name = properties.device_name_as_c_str().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let version = properties.api_version;
        if (vk::api_version_major(version), vk::api_version_minor(version)) < (1, 2) {
            return Err(format!(
                "the device {name} has Vulkan {}.{}: this renderer needs Vulkan 1.2",
                vk::api_version_major(version),
                vk::api_version_minor(version)
            )
            .into());
        }
        // SAFETY: as above.
        let available = unsafe { vki.enumerate_device_extension_properties(physical) }
            .map_err(vk_err("vkEnumerateDeviceExtensionProperties"))?;
        let has = |n: &CStr| available.iter().any(|e| e.extension_name_as_c_str().is_ok_and(|x| x == n));
        if !has(ash::khr::external_memory_fd::NAME) {
            return Err(format!(
                "the device {name} lacks VK_KHR_external_memory_fd, which sharing slots with the worker needs"
            )
            .into());
        }
        let external_semaphore_fd = has(ash::khr::external_semaphore_fd::NAME);
        let mut extensions = vec![ash::khr::external_memory_fd::NAME.as_ptr()];
        if external_semaphore_fd {
            extensions.push(ash::khr::external_semaphore_fd::NAME.as_ptr());
        }
        let mut supported12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut features2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut supported12);
        // SAFETY: `physical` is live; the chain is one output structure that lives for the call.
        unsafe { vki.get_physical_device_features2(physical, &mut features2) };
        let timelines = supported12.timeline_semaphore == vk::TRUE;
        let mut enabled12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(timelines);
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&extensions)
            .push_next(&mut enabled12);
        // SAFETY: `physical` is of this instance; the extensions are listed by it and the feature is supported;
        // `info` and its chain live for the call.
        let device = unsafe { vki.create_device(physical, &info, None) }.map_err(vk_err("vkCreateDevice"))?;
        // SAFETY: one queue of `family` was requested.
        let queue = unsafe { device.get_device_queue(family, 0) };
        // SAFETY: `physical` is of this instance.
        let memory_properties = unsafe { vki.get_physical_device_memory_properties(physical) };
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: the device is live; `pool_info` lives for the call.
        let pool = match unsafe { device.create_command_pool(&pool_info, None) } {
            Ok(p) => p,
            Err(r) => {
                // SAFETY: the device was just created and nothing uses it.
                unsafe { device.destroy_device(None) };
                return Err(vk_err("vkCreateCommandPool")(r));
            }
        };
        Ok(Device {
            instance: vki.clone(),
            physical,
            device,
            family,
            transfer_only,
            queue,
            external_semaphore_fd,
            memory_properties,
            name,
            pool,
            objects: Vec::new(),
        })
    }

    /// The device as the client crate borrows it.
    fn client_device(&self) -> ClientDevice {
        ClientDevice {
            instance: self.instance.clone(),
            physical_device: self.physical,
            device: self.device.clone(),
            queue_family_index: self.family,
            external_semaphore_fd: self.external_semaphore_fd,
        }
    }

    /// A memory type allowed by `bits` with `required`, preferring ones that also have `preferred`.
    fn memory_type(
        &self,
        bits: u32,
        required: vk::MemoryPropertyFlags,
        preferred: vk::MemoryPropertyFlags,
    ) -> Option<(u32, vk::MemoryPropertyFlags)> {
        let props = &self.memory_properties;
        let count = (props.memory_type_count as usize).min(props.memory_types.len());
        let candidates = || {
            props.memory_types[..count]
                .iter()
                .enumerate()
                .filter(move |&(i, t)| bits & (1 << i) != 0 && t.property_flags.contains(required))
                .map(|(i, t)| (i as u32, t.property_flags))
        };
        candidates().find(|&(_, f)| f.contains(preferred)).or_else(|| candidates().next())
    }

    /// Allocates memory for `requirements` and remembers it.
    fn allocate(
        &mut self,
        requirements: vk::MemoryRequirements,
        required: vk::MemoryPropertyFlags,
        preferred: vk::MemoryPropertyFlags,
    ) -> Result<(vk::DeviceMemory, vk::MemoryPropertyFlags)> {
        let (index, flags) = self
            .memory_type(requirements.memory_type_bits, required, preferred)
            .ok_or_else(|| format!("no memory type with {required:?} for {} bytes", requirements.size))?;
        let info = vk::MemoryAllocateInfo::default().allocation_size(requirements.size).memory_type_index(index);
        // SAFETY: the device is live; the type index is one of its types; `info` lives for the call.
        let memory = unsafe { self.device.allocate_memory(&info, None) }.map_err(vk_err("vkAllocateMemory"))?;
        self.objects.push(Object::Memory(memory));
        Ok((memory, flags))
    }

    /// A host-visible, mapped buffer of `size` bytes (coherent and, if `cached`, host-cached memory preferred).
    fn host_buffer(&mut self, size: u64, usage: vk::BufferUsageFlags, cached: bool) -> Result<HostBuffer> {
        let info = vk::BufferCreateInfo::default().size(size).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: the device is live; `info` lives for the call.
        let buffer = unsafe { self.device.create_buffer(&info, None) }.map_err(vk_err("vkCreateBuffer"))?;
        self.objects.push(Object::Buffer(buffer));
        // SAFETY: `buffer` is a live buffer of this device.
        let requirements = unsafe { self.device.get_buffer_memory_requirements(buffer) };
        let mut preferred = vk::MemoryPropertyFlags::HOST_COHERENT;
        if cached {
            preferred |= vk::MemoryPropertyFlags::HOST_CACHED;
        }
        let (memory, flags) = match self.allocate(requirements, vk::MemoryPropertyFlags::HOST_VISIBLE, preferred) {
            Ok(m) => m,
            // Cached and coherent together may not exist; coherent alone is the next best.
            Err(_) if cached => self.allocate(
                requirements,
                vk::MemoryPropertyFlags::HOST_VISIBLE,
                vk::MemoryPropertyFlags::HOST_COHERENT,
            )?,
            Err(e) => return Err(e),
        };
        // SAFETY: `memory` was allocated for `buffer`'s requirements; the buffer has no memory bound.
        unsafe { self.device.bind_buffer_memory(buffer, memory, 0) }.map_err(vk_err("vkBindBufferMemory"))?;
        // SAFETY: host-visible memory of this device, not mapped yet; the whole allocation is mapped.
        let mapped = unsafe { self.device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
            .map_err(vk_err("vkMapMemory"))?
            .cast::<u8>();
        Ok(HostBuffer {
            buffer,
            memory,
            size,
            mapped,
            coherent: flags.contains(vk::MemoryPropertyFlags::HOST_COHERENT),
        })
    }

    /// A device-local (where possible) buffer of `size` bytes.
    fn local_buffer(&mut self, size: u64, usage: vk::BufferUsageFlags) -> Result<vk::Buffer> {
        let info = vk::BufferCreateInfo::default().size(size).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: the device is live; `info` lives for the call.
        let buffer = unsafe { self.device.create_buffer(&info, None) }.map_err(vk_err("vkCreateBuffer"))?;
        self.objects.push(Object::Buffer(buffer));
        // SAFETY: `buffer` is a live buffer of this device.
        let requirements = unsafe { self.device.get_buffer_memory_requirements(buffer) };
        let (memory, _) =
            self.allocate(requirements, vk::MemoryPropertyFlags::empty(), vk::MemoryPropertyFlags::DEVICE_LOCAL)?;
        // SAFETY: `memory` was allocated for `buffer`'s requirements; the buffer has no memory bound.
        unsafe { self.device.bind_buffer_memory(buffer, memory, 0) }.map_err(vk_err("vkBindBufferMemory"))?;
        Ok(buffer)
    }

    /// A device-local (where possible) 2D image.
    fn image(&mut self, width: u32, height: u32, format: vk::Format, usage: vk::ImageUsageFlags) -> Result<vk::Image> {
        let info = vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(format)
            .extent(vk::Extent3D { width, height, depth: 1 })
            .mip_levels(1)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .initial_layout(vk::ImageLayout::UNDEFINED);
        // SAFETY: the device is live; `info` lives for the call.
        let image = unsafe { self.device.create_image(&info, None) }.map_err(vk_err("vkCreateImage"))?;
        self.objects.push(Object::Image(image));
        // SAFETY: `image` is a live image of this device.
        let requirements = unsafe { self.device.get_image_memory_requirements(image) };
        let (memory, _) =
            self.allocate(requirements, vk::MemoryPropertyFlags::empty(), vk::MemoryPropertyFlags::DEVICE_LOCAL)?;
        // SAFETY: `memory` was allocated for `image`'s requirements; the image has no memory bound.
        unsafe { self.device.bind_image_memory(image, memory, 0) }.map_err(vk_err("vkBindImageMemory"))?;
        Ok(image)
    }

    /// An unsignalled fence.
    fn fence(&mut self) -> Result<vk::Fence> {
        // SAFETY: the device is live.
        let fence = unsafe { self.device.create_fence(&vk::FenceCreateInfo::default(), None) }
            .map_err(vk_err("vkCreateFence"))?;
        self.objects.push(Object::Fence(fence));
        Ok(fence)
    }

    /// `count` primary command buffers from the pool (freed with it).
    fn command_buffers(&self, count: u32) -> Result<Vec<vk::CommandBuffer>> {
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(self.pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(count);
        // SAFETY: the pool is live and of this device; `info` lives for the call.
        unsafe { self.device.allocate_command_buffers(&info) }.map_err(vk_err("vkAllocateCommandBuffers"))
    }

    /// Starts recording `cmd` (which no pending submission uses).
    fn begin(&self, cmd: vk::CommandBuffer) -> Result<()> {
        let info = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: `cmd` is from this device's pool (created with RESET_COMMAND_BUFFER, so begin resets it) and
        // its last submission has completed (the callers wait for it first).
        unsafe { self.device.begin_command_buffer(cmd, &info) }.map_err(vk_err("vkBeginCommandBuffer"))
    }

    fn end(&self, cmd: vk::CommandBuffer) -> Result<()> {
        // SAFETY: `cmd` is recording (begun by `begin`).
        unsafe { self.device.end_command_buffer(cmd) }.map_err(vk_err("vkEndCommandBuffer"))
    }

    /// Submits `cmd` with timeline waits (each at the transfer stage) and signals, and an optional fence.
    fn submit(
        &self,
        cmd: vk::CommandBuffer,
        waits: &[WaitPoint],
        signals: &[(vk::Semaphore, u64)],
        fence: vk::Fence,
    ) -> Result<()> {
        let wait_semaphores: Vec<_> = waits.iter().map(|w| w.semaphore).collect();
        let wait_values: Vec<_> = waits.iter().map(|w| w.value).collect();
        let stages = vec![vk::PipelineStageFlags::TRANSFER; waits.len()];
        let signal_semaphores: Vec<_> = signals.iter().map(|s| s.0).collect();
        let signal_values: Vec<_> = signals.iter().map(|s| s.1).collect();
        let cmds = [cmd];
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_values)
            .signal_semaphore_values(&signal_values);
        let mut info = vk::SubmitInfo::default()
            .wait_semaphores(&wait_semaphores)
            .wait_dst_stage_mask(&stages)
            .command_buffers(&cmds)
            .signal_semaphores(&signal_semaphores);
        if !waits.is_empty() || !signals.is_empty() {
            info = info.push_next(&mut timeline);
        }
        // SAFETY: `cmd` is executable; every semaphore is a live timeline semaphore of this device (the client's,
        // alive while the client is), each wait is for a value whose signal is already submitted (the worker's
        // Enqueued came first), each signal value rises; `fence` is null or unsignalled and not in use; the
        // arrays live for the call; only this thread uses the queue.
        unsafe { self.device.queue_submit(self.queue, &[info], fence) }.map_err(vk_err("vkQueueSubmit"))
    }

    /// Waits for a fence guarding only the renderer's own work, then resets it.
    fn wait_own(&self, fence: vk::Fence) -> Result<()> {
        let nanos = OWN_WORK_TIMEOUT.as_nanos() as u64;
        // SAFETY: `fence` is a live fence of this device with a submission pending.
        match unsafe { self.device.wait_for_fences(&[fence], true, nanos) } {
            Ok(()) => {}
            Err(vk::Result::TIMEOUT) => {
                return Err(format!("the renderer's own queue did not finish within {OWN_WORK_TIMEOUT:?}").into());
            }
            Err(r) => return Err(vk_err("vkWaitForFences")(r)),
        }
        // SAFETY: the fence is signalled and no submission uses it any more.
        unsafe { self.device.reset_fences(&[fence]) }.map_err(vk_err("vkResetFences"))
    }

    fn wait_idle(&self) -> Result<()> {
        // SAFETY: the device is live; only this thread submits to its queue.
        unsafe { self.device.device_wait_idle() }.map_err(vk_err("vkDeviceWaitIdle"))
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the device is live; nothing else submits to it.
        if let Err(r) = unsafe { self.device.device_wait_idle() } {
            eprintln!("render: vkDeviceWaitIdle failed during teardown: {r}");
        }
        // Images and buffers first, then the memory they were bound to, then the fences.
        let rank = |o: &Object| match o {
            Object::Image(_) | Object::Buffer(_) => 0,
            Object::Memory(_) => 1,
            Object::Fence(_) => 2,
        };
        self.objects.sort_by_key(rank);
        for object in self.objects.drain(..) {
            // SAFETY: each object was made on this device and is destroyed once, and no GPU work uses it (the
            // device is idle); memory is freed after the images and buffers bound to it.
            unsafe {
                match object {
                    Object::Image(i) => self.device.destroy_image(i, None),
                    Object::Buffer(b) => self.device.destroy_buffer(b, None),
                    Object::Memory(m) => self.device.free_memory(m, None),
                    Object::Fence(f) => self.device.destroy_fence(f, None),
                }
            }
        }
        // SAFETY: the pool is of this device and its command buffers are idle; freeing it frees them.
        unsafe { self.device.destroy_command_pool(self.pool, None) };
        // SAFETY: every child of the device is destroyed (the client, which made the slots and semaphores on it,
        // is dropped before the device: `run` declares it later).
        unsafe { self.device.destroy_device(None) };
    }
}

// ---------------------------------------------------------------------------
// The picture.

/// An RGBA8 picture.
struct Picture {
    width: u32,
    height: u32,
    rgba: Vec<u8>,
}

fn load_png(path: &std::path::Path) -> Result<Picture> {
    let file = File::open(path).map_err(|e| format!("opening {}: {e}", path.display()))?;
    let mut reader =
        png::Decoder::new(BufReader::new(file)).read_info().map_err(|e| format!("reading {}: {e}", path.display()))?;
    let (color, depth) = (reader.info().color_type, reader.info().bit_depth);
    let channels = match (color, depth) {
        (png::ColorType::Rgba, png::BitDepth::Eight) => 4,
        (png::ColorType::Rgb, png::BitDepth::Eight) => 3,
        _ => {
            return Err(format!(
                "{}: a {color:?} PNG of {} bits per sample; this example takes 8-bit RGB or RGBA only",
                path.display(),
                depth as u8
            )
            .into());
        }
    };
    let size = reader.output_buffer_size().ok_or_else(|| format!("{}: too large", path.display()))?;
    let mut raw = vec![0u8; size];
    let frame = reader.next_frame(&mut raw).map_err(|e| format!("decoding {}: {e}", path.display()))?;
    let (width, height) = (frame.width, frame.height);
    let mut rgba = Vec::with_capacity(width as usize * height as usize * 4);
    for row in raw.chunks_exact(frame.line_size).take(height as usize) {
        for px in row[..width as usize * channels].chunks_exact(channels) {
            rgba.extend_from_slice(&px[..3]);
            rgba.push(if channels == 4 { px[3] } else { 255 });
        }
    }
    Ok(Picture { width, height, rgba })
}

fn save_png(path: &std::path::Path, width: u32, height: u32, rgba: &[u8]) -> Result<()> {
    let file = File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))?;
    let mut encoder = png::Encoder::new(BufWriter::new(file), width, height);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| format!("writing {}: {e}", path.display()))?;
    writer.write_image_data(rgba).map_err(|e| format!("writing {}: {e}", path.display()))?;
    writer.finish().map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(())
}

/// Puts the picture into a new `R8G8B8A8_UNORM` image through a staging buffer,
/// on the renderer's queue, leaving it in `TRANSFER_SRC_OPTIMAL`.
fn upload(dev: &mut Device, picture: &Picture) -> Result<vk::Image> {
    let bytes = picture.rgba.len() as u64;
    let image = dev.image(
        picture.width,
        picture.height,
        vk::Format::R8G8B8A8_UNORM,
        vk::ImageUsageFlags::TRANSFER_DST | vk::ImageUsageFlags::TRANSFER_SRC,
    )?;
    let staging = dev.host_buffer(bytes, vk::BufferUsageFlags::TRANSFER_SRC, false)?;
    // SAFETY: `mapped` maps the whole allocation, at least `bytes` long; the GPU does not use it yet.
    unsafe { std::ptr::copy_nonoverlapping(picture.rgba.as_ptr(), staging.mapped, picture.rgba.len()) };
    if !staging.coherent {
        let range = vk::MappedMemoryRange::default().memory(staging.memory).offset(0).size(vk::WHOLE_SIZE);
        // SAFETY: the memory is mapped from offset 0 to its end.
        unsafe { dev.device.flush_mapped_memory_ranges(&[range]) }.map_err(vk_err("vkFlushMappedMemoryRanges"))?;
    }
    let cmd = dev.command_buffers(1)?[0];
    let fence = dev.fence()?;
    dev.begin(cmd)?;
    let range =
        vk::ImageSubresourceRange::default().aspect_mask(vk::ImageAspectFlags::COLOR).level_count(1).layer_count(1);
    let to_dst = vk::ImageMemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::empty())
        .dst_access_mask(vk::AccessFlags::TRANSFER_WRITE)
        .old_layout(vk::ImageLayout::UNDEFINED)
        .new_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)
        .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .image(image)
        .subresource_range(range);
    let region = vk::BufferImageCopy::default()
        .image_subresource(
            vk::ImageSubresourceLayers::default().aspect_mask(vk::ImageAspectFlags::COLOR).layer_count(1),
        )
        .image_extent(vk::Extent3D { width: picture.width, height: picture.height, depth: 1 });
    let to_src = vk::ImageMemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
        .dst_access_mask(vk::AccessFlags::TRANSFER_READ)
        .old_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)
        .new_layout(vk::ImageLayout::TRANSFER_SRC_OPTIMAL)
        .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .image(image)
        .subresource_range(range);
    // SAFETY: `cmd` is recording outside a render pass; the image and staging buffer are live and of this
    // device, the copy stays within both, and the barriers take the image through the layouts the copy uses.
    unsafe {
        dev.device.cmd_pipeline_barrier(
            cmd,
            vk::PipelineStageFlags::TOP_OF_PIPE,
            vk::PipelineStageFlags::TRANSFER,
            vk::DependencyFlags::empty(),
            &[],
            &[],
            &[to_dst],
        );
        dev.device.cmd_copy_buffer_to_image(
            cmd,
            staging.buffer,
            image,
            vk::ImageLayout::TRANSFER_DST_OPTIMAL,
            &[region],
        );
        dev.device.cmd_pipeline_barrier(
            cmd,
            vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::TRANSFER,
            vk::DependencyFlags::empty(),
            &[],
            &[],
            &[to_src],
        );
    }
    dev.end(cmd)?;
    dev.submit(cmd, &[], &[], fence)?;
    dev.wait_own(fence)?;
    Ok(image)
}

// ---------------------------------------------------------------------------
// The frames.

/// Records, into `cmd`, the renderer's "drawing" of a frame into an input slot:
/// the image copied into the slot buffer (tightly packed rows), between the
/// acquire from the worker (where the slot was used before) and the release.
fn record_input(
    dev: &Device,
    cdev: &ClientDevice,
    cmd: vk::CommandBuffer,
    picture: (vk::Image, u32, u32),
    slot: &SlotBuffer,
    reacquire: bool,
) -> Result<()> {
    let (image, width, height) = picture;
    dev.begin(cmd)?;
    let region = vk::BufferImageCopy::default()
        .buffer_offset(0)
        .buffer_row_length(0)
        .buffer_image_height(0)
        .image_subresource(
            vk::ImageSubresourceLayers::default().aspect_mask(vk::ImageAspectFlags::COLOR).layer_count(1),
        )
        .image_extent(vk::Extent3D { width, height, depth: 1 });
    // SAFETY: `cmd` is recording outside a render pass, from a pool of `cdev.queue_family_index`; the slot lives
    // until the client is dropped, after the device is idle; the image is in TRANSFER_SRC_OPTIMAL (the upload
    // left it there) and the slot holds width × height × 4 bytes.
    unsafe {
        if reacquire {
            acquire_from_worker(cdev, cmd, slot);
        }
        dev.device.cmd_copy_image_to_buffer(
            cmd,
            image,
            vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
            slot.buffer(),
            &[region],
        );
        release_to_worker(cdev, cmd, slot);
    }
    dev.end(cmd)
}

/// Records, into `cmd`, the renderer's use of an output slot: acquire from the
/// worker, a copy of the result into `shown` (device-local, the renderer's own:
/// what a compositor would sample), and the release back to the worker.
fn record_output(
    dev: &Device,
    cdev: &ClientDevice,
    cmd: vk::CommandBuffer,
    slot: &SlotBuffer,
    (shown, bytes): (vk::Buffer, u64),
) -> Result<()> {
    dev.begin(cmd)?;
    // SAFETY: as in record_input; `shown` is live and, as the slot, at least `bytes` long. The copy's earlier
    // write into `shown` (this ring index's previous frame) finished before `cmd` was recorded again (its fence).
    unsafe {
        acquire_from_worker(cdev, cmd, slot);
        let copy = vk::BufferCopy { src_offset: 0, dst_offset: 0, size: bytes };
        dev.device.cmd_copy_buffer(cmd, slot.buffer(), shown, &[copy]);
        release_to_worker(cdev, cmd, slot);
    }
    dev.end(cmd)
}

/// After the frames (untimed): copies the result the renderer kept in `shown`
/// into the host-visible `readback`, with the barriers that make the frames'
/// copy visible to this one and this one's visible to the host, and waits.
fn read_back(
    dev: &Device,
    (cmd, fence): (vk::CommandBuffer, vk::Fence),
    shown: vk::Buffer,
    readback: &HostBuffer,
) -> Result<()> {
    let barrier = |buffer, dst| {
        vk::BufferMemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(dst)
            .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .buffer(buffer)
            .offset(0)
            .size(vk::WHOLE_SIZE)
    };
    dev.begin(cmd)?;
    // SAFETY: `cmd` is recording outside a render pass; both buffers are live and of this device, at least
    // `readback.size` long; the first barrier orders the copy after the frames' copies into `shown` (earlier
    // submissions on this queue).
    unsafe {
        dev.device.cmd_pipeline_barrier(
            cmd,
            vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::TRANSFER,
            vk::DependencyFlags::empty(),
            &[],
            &[barrier(shown, vk::AccessFlags::TRANSFER_READ)],
            &[],
        );
        let copy = vk::BufferCopy { src_offset: 0, dst_offset: 0, size: readback.size };
        dev.device.cmd_copy_buffer(cmd, shown, readback.buffer, &[copy]);
        dev.device.cmd_pipeline_barrier(
            cmd,
            vk::PipelineStageFlags::TRANSFER,
            vk::PipelineStageFlags::HOST,
            vk::DependencyFlags::empty(),
            &[],
            &[barrier(readback.buffer, vk::AccessFlags::HOST_READ)],
            &[],
        );
    }
    dev.end(cmd)?;
    dev.submit(cmd, &[], &[], fence)?;
    dev.wait_own(fence)
}

/// Per ring index k (input slot k and output slot k): the command buffers and
/// the fence of the output submission.
struct Ring {
    input_cmds: Vec<vk::CommandBuffer>,
    output_cmds: Vec<vk::CommandBuffer>,
    fences: Vec<vk::Fence>,
    /// Whether `fences[k]` guards a submission not waited for yet.
    pending: Vec<bool>,
    /// GPU mode: the "input consumed" point of the frame that last read input slot k.
    consumed: Vec<Option<WaitPoint>>,
    /// Host mode: whether input slot k was handed to the worker before.
    used: Vec<bool>,
    /// GPU mode: frame n+1 is drawn before frame n's copy out is queued (`--draw-order ahead`).
    draw_ahead: bool,
    /// The picture every frame is drawn from: the renderer's image, its width and height.
    picture: (vk::Image, u32, u32),
}

/// What the run measured.
struct Stats {
    frames: u64,
    wall: Duration,
    /// Untimed warm-up frames before them, and how long they took.
    warmed: (u64, Duration),
    infer_ms: Vec<f64>,
}

/// Collects the `Done` of finished frames, oldest first, without blocking.
fn collect_done(client: &mut Client, pending: &mut VecDeque<FrameId>, infer: &mut Vec<f64>) -> Result<()> {
    while let Some(&frame) = pending.front() {
        match client.try_done(frame)? {
            Some(ms) => {
                infer.push(ms);
                pending.pop_front();
            }
            None => break,
        }
    }
    Ok(())
}

/// Waits for an output submission's fence, which may wait (on the GPU) for the
/// worker: meanwhile it takes the worker's messages, so that a worker that dies
/// or hangs is noticed (the client then releases the GPU waits on its
/// timelines, and the fence comes). Then resets the fence.
fn wait_output_fence(
    dev: &Device,
    client: &mut Client,
    fence: vk::Fence,
    pending: &mut VecDeque<FrameId>,
    infer: &mut Vec<f64>,
) -> Result<()> {
    let start = Instant::now();
    loop {
        // SAFETY: `fence` is a live fence of this device with a submission pending.
        match unsafe { dev.device.wait_for_fences(&[fence], true, 5_000_000) } {
            Ok(()) => break,
            Err(vk::Result::TIMEOUT) => {}
            Err(r) => return Err(vk_err("vkWaitForFences")(r)),
        }
        match pending.pop_front() {
            // Blocks until the worker finishes the oldest frame, or the client gives it up (frame timeout,
            // connection lost) and releases its waits; either lets the fence come.
            Some(frame) => infer.push(client.wait_done(frame)?),
            None if start.elapsed() > OWN_WORK_TIMEOUT => {
                return Err(format!("the renderer's queue did not finish within {OWN_WORK_TIMEOUT:?}").into());
            }
            None => collect_done(client, pending, infer)?,
        }
    }
    // SAFETY: the fence is signalled and no submission uses it any more.
    unsafe { dev.device.reset_fences(&[fence]) }.map_err(vk_err("vkResetFences"))
}

/// GPU mode: draws frame `n` (copies the picture into input slot (n-1) mod slots and signals
/// "rendered" = n), once that slot's last copy out (and with it the slot's last input copy,
/// earlier on the same queue) has finished on the renderer's side: its output slot is then free
/// for frame n, and its command buffers can be recorded again. The copy waits on the GPU for
/// the worker's "input consumed" of the frame that last read the input slot.
fn draw(
    dev: &Device,
    cdev: &ClientDevice,
    client: &mut Client,
    ring: &mut Ring,
    n: u64,
    pending: &mut VecDeque<FrameId>,
    infer: &mut Vec<f64>,
) -> Result<()> {
    let k = ((n - 1) % ring.fences.len() as u64) as usize;
    if ring.pending[k] {
        wait_output_fence(dev, client, ring.fences[k], pending, infer)?;
        ring.pending[k] = false;
    }
    let rendered = client.rendered_timeline().ok_or("GPU mode without a rendered timeline")?;
    let waits: Vec<WaitPoint> = ring.consumed[k].into_iter().collect();
    record_input(dev, cdev, ring.input_cmds[k], ring.picture, client.input_slot(k), !waits.is_empty())?;
    dev.submit(ring.input_cmds[k], &waits, &[(rendered, n)], vk::Fence::null())
}

/// Runs frames `from + 1 ..= from + count` (their numbers are the "rendered" timeline's values),
/// timed, and waits for all of them; each frame's output ends up in `shown` (output slot k's in
/// `shown.0[k]`, `shown.1` bytes).
fn frames(
    dev: &Device,
    client: &mut Client,
    ring: &mut Ring,
    shown: (&[vk::Buffer], u64),
    (from, count): (u64, u64),
    pending: &mut VecDeque<FrameId>,
) -> Result<Stats> {
    let cdev = dev.client_device();
    let slots = ring.fences.len() as u64;
    let mut infer = Vec::new();
    let start = Instant::now();
    let end = from + count;
    for n in from + 1..=end {
        let k = ((n - 1) % slots) as usize;
        let shown = (shown.0[k], shown.1);
        match client.sync_mode() {
            SyncMode::Gpu => {
                // Behind: frame n is drawn here, queued behind frame n-1's copy out, which waits for
                // frame n-1's result. Ahead: frame 1 here, and frame n+1 once frame n is handed over
                // (drawing may wait on the host for a slot's last copy out: the worker has frame n
                // meanwhile), before frame n's copy out is queued.
                if !ring.draw_ahead || n == 1 {
                    draw(dev, &cdev, client, ring, n, pending, &mut infer)?;
                }
                let frame = client.submit(k, k, n, 0)?;
                pending.push_back(frame);
                let points = client.enqueued(frame)?;
                ring.consumed[k] = Some(points.input_consumed);
                if ring.draw_ahead && n < end {
                    draw(dev, &cdev, client, ring, n + 1, pending, &mut infer)?;
                }
                record_output(dev, &cdev, ring.output_cmds[k], client.output_slot(k), shown)?;
                dev.submit(ring.output_cmds[k], &[points.output_ready], &[], ring.fences[k])?;
                ring.pending[k] = true;
                collect_done(client, pending, &mut infer)?;
            }
            SyncMode::Host => {
                record_input(dev, &cdev, ring.input_cmds[k], ring.picture, client.input_slot(k), ring.used[k])?;
                dev.submit(ring.input_cmds[k], &[], &[], ring.fences[k])?;
                dev.wait_own(ring.fences[k])?;
                let frame = client.submit(k, k, 0, 0)?;
                ring.used[k] = true;
                pending.push_back(frame);
                infer.push(client.wait_done(frame)?);
                pending.pop_back();
                record_output(dev, &cdev, ring.output_cmds[k], client.output_slot(k), shown)?;
                dev.submit(ring.output_cmds[k], &[], &[], ring.fences[k])?;
                dev.wait_own(ring.fences[k])?;
            }
        }
    }
    // GPU mode: the last frame's copy, and every other output submission still pending (they come before it in
    // submission order, so they are finished by then).
    let last = ((end - 1) % slots) as usize;
    for k in std::iter::once(last).chain(0..slots as usize) {
        if ring.pending[k] {
            wait_output_fence(dev, client, ring.fences[k], pending, &mut infer)?;
            ring.pending[k] = false;
        }
    }
    while let Some(frame) = pending.pop_front() {
        infer.push(client.wait_done(frame)?);
    }
    Ok(Stats { frames: count, wall: start.elapsed(), warmed: (0, Duration::ZERO), infer_ms: infer })
}

fn run(instance: &Instance, args: &Args) -> Result<()> {
    let picture = load_png(&args.input)?;
    let mut dev = Device::new(instance, args.transfer_queue)?;
    let image = upload(&mut dev, &picture)?;

    let mut options = Options::new(&args.socket, picture.width, picture.height, vk::Format::R8G8B8A8_UNORM);
    options.input_slots = args.slots;
    options.output_slots = args.slots;
    options.sync = args.sync;
    options.frame_timeout = args.timeout;
    let cdev = dev.client_device();
    // SAFETY: the device was created from `instance` on `physical` with VK_KHR_external_memory_fd (and the
    // semaphore extension and timeline feature where `cdev` says so); it outlives the client, which is declared
    // after it and so dropped first.
    let mut client = unsafe { Client::connect(&cdev, options) }?;
    let out = client.output_geometry();
    println!(
        "render: {:?} sync, model {}, output {}×{} {:?} (row pitch {}), on {}",
        client.sync_mode(),
        client.model(),
        out.width,
        out.height,
        vk::Format::from_raw(out.format as i32),
        out.row_pitch,
        dev.name
    );
    println!(
        "render: its commands on a queue of family {} ({}{})",
        dev.family,
        if dev.transfer_only { "transfer-only" } else { "graphics or compute" },
        if args.transfer_queue && !dev.transfer_only { "; the device has no transfer-only family" } else { "" }
    );

    let slots = args.slots as u32;
    let draw_ahead = args.draw_ahead.unwrap_or(slots >= 2);
    if client.sync_mode() == SyncMode::Gpu {
        println!("render: draw order {}", if draw_ahead { "ahead" } else { "behind" });
    }
    let result = (|| -> Result<(Stats, HostBuffer, u64)> {
        let format = vk::Format::from_raw(out.format as i32);
        if !matches!(format, vk::Format::R8G8B8A8_UNORM | vk::Format::R8G8B8A8_SRGB) {
            return Err(format!("the worker's output format is {format:?}; this example writes RGBA8 only").into());
        }
        let packed = out.width as u64 * 4;
        if out.row_pitch < packed {
            return Err(format!("an output row pitch of {} for {} pixels", out.row_pitch, out.width).into());
        }
        let bytes = out.bytes().ok_or("the output frame's size overflows")?;
        let readback = dev.host_buffer(bytes, vk::BufferUsageFlags::TRANSFER_DST, true)?;
        let usage = vk::BufferUsageFlags::TRANSFER_DST | vk::BufferUsageFlags::TRANSFER_SRC;
        let shown = (0..slots).map(|_| dev.local_buffer(bytes, usage)).collect::<Result<Vec<_>>>()?;
        let mut fences = Vec::new();
        for _ in 0..slots {
            fences.push(dev.fence()?);
        }
        let read_fence = dev.fence()?;
        let cmds = dev.command_buffers(2 * slots + 1)?;
        let (input_cmds, output_cmds) = cmds[..2 * slots as usize].split_at(slots as usize);
        let mut ring = Ring {
            input_cmds: input_cmds.to_vec(),
            output_cmds: output_cmds.to_vec(),
            fences,
            pending: vec![false; slots as usize],
            consumed: vec![None; slots as usize],
            used: vec![false; slots as usize],
            draw_ahead,
            picture: (image, picture.width, picture.height),
        };
        let mut pending = VecDeque::new();
        // Untimed warm-up rounds of twice the slots until args.warmup has passed, then the timed frames.
        let warm = Instant::now();
        let mut warmed = 0u64;
        let outcome = (|| {
            while warm.elapsed() < args.warmup {
                let round = 2 * u64::from(slots);
                frames(&dev, &mut client, &mut ring, (&shown, bytes), (warmed, round), &mut pending)?;
                warmed += round;
            }
            let warm_time = warm.elapsed();
            frames(&dev, &mut client, &mut ring, (&shown, bytes), (warmed, args.frames), &mut pending)
                .map(|stats| Stats { warmed: (warmed, warm_time), ..stats })
        })();
        if outcome.is_err() {
            // Every worker value the queue waits for must become reachable before the device idles: the worker
            // finishes its frames, or the client gives it up (lost, timed out) and signals its copies of the
            // worker's timelines itself.
            while let Some(frame) = pending.pop_front() {
                if client.wait_done(frame).is_err() {
                    break;
                }
            }
        }
        // Also needed before the client goes: its slots and semaphores must be idle when it destroys them.
        dev.wait_idle()?;
        let stats = outcome?;
        // Untimed: the last frame's result, from the renderer's device-local copy to the host.
        let last = ((warmed + args.frames - 1) % u64::from(slots)) as usize;
        read_back(&dev, (cmds[2 * slots as usize], read_fence), shown[last], &readback)?;
        Ok((stats, readback, bytes))
    })();
    let (stats, readback, bytes) = match result {
        Ok(r) => r,
        Err(e) => {
            drop(client);
            return Err(e);
        }
    };

    if !readback.coherent {
        let range = vk::MappedMemoryRange::default().memory(readback.memory).offset(0).size(vk::WHOLE_SIZE);
        // SAFETY: the memory is mapped from offset 0 to its end; the GPU's writes to it are finished (read_back
        // waited) and were made available to the host (the barrier in read_back).
        unsafe { dev.device.invalidate_mapped_memory_ranges(&[range]) }
            .map_err(vk_err("vkInvalidateMappedMemoryRanges"))?;
    }
    let len = usize::try_from(bytes)?;
    // SAFETY: the mapping covers the whole allocation of at least `bytes` bytes; no GPU work writes it any more
    // (read_back waited); it stays mapped until the device is dropped, after this slice.
    let data = unsafe { std::slice::from_raw_parts(readback.mapped.cast_const(), len) };
    let (w, h, pitch) = (out.width as usize, out.height as usize, out.row_pitch as usize);
    let mut rgba = Vec::with_capacity(w * h * 4);
    for row in data.chunks_exact(pitch).take(h) {
        rgba.extend_from_slice(&row[..w * 4]);
    }
    save_png(&args.output, out.width, out.height, &rgba)?;

    println!(
        "render: timed per frame: a device-local copy into the input slot, the worker's frame, a copy out of the \
         output slot into device-local memory of the renderer's; before them {} warm-up frame(s) in {:.3} s \
         (--warmup-ms {}), the PNG's read-back after, untimed",
        stats.warmed.0,
        stats.warmed.1.as_secs_f64(),
        args.warmup.as_millis()
    );
    let seconds = stats.wall.as_secs_f64();
    let known: Vec<f64> = stats.infer_ms.iter().copied().filter(|m| m.is_finite()).collect();
    let model = if known.is_empty() {
        String::new()
    } else {
        format!("; the model took {:.1} ms a frame on average", known.iter().sum::<f64>() / known.len() as f64)
    };
    println!(
        "render: {} frame(s) in {:.3} s, {:.2} frames/s, {:?} sync{model}; wrote {} ({}×{})",
        stats.frames,
        seconds,
        stats.frames as f64 / seconds.max(1e-9),
        client.sync_mode(),
        args.output.display(),
        out.width,
        out.height
    );
    client.close()?;
    Ok(())
}
