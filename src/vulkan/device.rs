//! A logical device with one compute-capable queue, and one-shot command submission.

use std::ffi::CStr;
use std::sync::{Arc, Mutex};

use ash::vk;

use crate::error::{Error, Result, VkResultExt};
use crate::vulkan::adapter::{self, AdapterInfo, DeviceSelector, OPTIONAL_EXTENSIONS, REQUIRED_EXTENSIONS};
use crate::vulkan::instance::Instance;

/// How long a blocking one-shot submission may take before it is an error.
const ONE_SHOT_TIMEOUT_NS: u64 = 30_000_000_000;

/// Command pool and fence for blocking one-shot submissions (set-up, transfers, tests).
struct OneShot {
    pool: vk::CommandPool,
    fence: vk::Fence,
}

/// A logical device. Children (buffers, images, semaphores) hold an `Arc<Device>`.
/// Fields are in teardown order; the raw device is destroyed in `Drop`, before
/// the `Arc<Instance>` is released.
pub struct Device {
    one_shot: Mutex<OneShot>,
    pub(crate) memory_fd: ash::khr::external_memory_fd::Device,
    pub(crate) semaphore_fd: Option<ash::khr::external_semaphore_fd::Device>,
    raw: ash::Device,
    queues: Vec<Mutex<vk::Queue>>,
    queue_family: u32,
    physical: vk::PhysicalDevice,
    info: AdapterInfo,
    memory_properties: vk::PhysicalDeviceMemoryProperties,
    limits: vk::PhysicalDeviceLimits,
    instance: Arc<Instance>,
}

impl Device {
    /// Chooses a physical device and creates a logical device on it.
    pub fn new(instance: &Arc<Instance>, selector: DeviceSelector) -> Result<Arc<Self>> {
        let list = adapter::enumerate(instance)?;
        let infos: Vec<AdapterInfo> = list.iter().map(|(_, i)| i.clone()).collect();
        let chosen = adapter::select(&infos, selector)?;
        let (physical, info) =
            list.into_iter().nth(chosen).ok_or_else(|| Error::InvalidArgument("device list changed".into()))?;
        Self::on(instance, physical, info)
    }

    /// Creates a logical device on a given physical device (a second device on
    /// the same physical device is how pre-flight stage 1 tests import).
    pub fn on(instance: &Arc<Instance>, physical: vk::PhysicalDevice, info: AdapterInfo) -> Result<Arc<Self>> {
        let raw_instance = instance.raw();
        // SAFETY: physical comes from this instance.
        let families = unsafe { raw_instance.get_physical_device_queue_family_properties(physical) };
        let queue_family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE) && f.timestamp_valid_bits > 0)
            .or_else(|| families.iter().position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE)))
            .ok_or_else(|| Error::Unsupported {
                device: info.name.clone(),
                what: "a compute queue".into(),
                remedy: "use another device".into(),
            })? as u32;

        let mut timeline = vk::PhysicalDeviceTimelineSemaphoreFeatures::default();
        let mut features2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut timeline);
        // SAFETY: physical comes from this instance; the chain lives until the call returns.
        unsafe { raw_instance.get_physical_device_features2(physical, &mut features2) };
        if timeline.timeline_semaphore == vk::FALSE {
            return Err(Error::Unsupported {
                device: info.name.clone(),
                what: "the timelineSemaphore feature".into(),
                remedy: "it is core in Vulkan 1.2; update the driver".into(),
            });
        }

        let mut extensions: Vec<&CStr> = REQUIRED_EXTENSIONS.to_vec();
        // Missing optional extensions are reported by AdapterInfo and by
        // sync::timeline_export_support when a caller needs them.
        if info.external_semaphore_fd {
            extensions.extend(OPTIONAL_EXTENSIONS);
        }
        let ext_ptrs: Vec<*const i8> = extensions.iter().map(|e| e.as_ptr()).collect();
        // Two queues where the family has them: the pipeline's post passes wait for
        // CUDA, and on a second queue they do not hold back the next frame's pre pass.
        let queue_count = families[queue_family as usize].queue_count.clamp(1, 2);
        let priorities = vec![1.0f32; queue_count as usize];
        let queues =
            [vk::DeviceQueueCreateInfo::default().queue_family_index(queue_family).queue_priorities(&priorities)];
        let mut enable_timeline = vk::PhysicalDeviceTimelineSemaphoreFeatures::default().timeline_semaphore(true);
        let create = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&ext_ptrs)
            .push_next(&mut enable_timeline);
        // SAFETY: physical comes from this instance; extensions were checked above.
        let raw = unsafe { raw_instance.create_device(physical, &create, None) }.call("vkCreateDevice")?;
        let queues = (0..queue_count)
            // SAFETY: the family and these indices were requested in `create`.
            .map(|i| Mutex::new(unsafe { raw.get_device_queue(queue_family, i) }))
            .collect();
        let memory_fd = ash::khr::external_memory_fd::Device::new(raw_instance, &raw);
        let semaphore_fd =
            info.external_semaphore_fd.then(|| ash::khr::external_semaphore_fd::Device::new(raw_instance, &raw));
        // SAFETY: physical comes from this instance.
        let memory_properties = unsafe { raw_instance.get_physical_device_memory_properties(physical) };
        // SAFETY: physical comes from this instance.
        let limits = unsafe { raw_instance.get_physical_device_properties(physical) }.limits;

        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(queue_family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER | vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: raw is a valid device.
        let pool = match unsafe { raw.create_command_pool(&pool_info, None) } {
            Ok(p) => p,
            Err(result) => {
                // SAFETY: nothing else was created from raw yet.
                unsafe { raw.destroy_device(None) };
                return Err(Error::Vulkan { call: "vkCreateCommandPool", result });
            }
        };
        // SAFETY: raw is a valid device.
        let fence = match unsafe { raw.create_fence(&vk::FenceCreateInfo::default(), None) } {
            Ok(f) => f,
            Err(result) => {
                // SAFETY: pool was created from raw and is unused.
                unsafe { raw.destroy_command_pool(pool, None) };
                // SAFETY: nothing else was created from raw.
                unsafe { raw.destroy_device(None) };
                return Err(Error::Vulkan { call: "vkCreateFence", result });
            }
        };
        Ok(Arc::new(Device {
            one_shot: Mutex::new(OneShot { pool, fence }),
            memory_fd,
            semaphore_fd,
            raw,
            queues,
            queue_family,
            physical,
            info,
            memory_properties,
            limits,
            instance: Arc::clone(instance),
        }))
    }

    /// The raw `ash` device.
    pub fn raw(&self) -> &ash::Device {
        &self.raw
    }
    /// The instance this device was created from.
    pub fn instance(&self) -> &Arc<Instance> {
        &self.instance
    }
    /// The physical device.
    pub fn physical(&self) -> vk::PhysicalDevice {
        self.physical
    }
    /// What the physical device is.
    pub fn info(&self) -> &AdapterInfo {
        &self.info
    }
    /// The queue family used for all work.
    pub fn queue_family(&self) -> u32 {
        self.queue_family
    }
    /// Device limits (image sizes, workgroup sizes, timestamp period).
    pub fn limits(&self) -> &vk::PhysicalDeviceLimits {
        &self.limits
    }
    /// Whether semaphores can be exported as file descriptors.
    pub fn can_export_semaphores(&self) -> bool {
        self.semaphore_fd.is_some()
    }

    /// Finds a memory type allowed by `type_bits` with all of `flags`, preferring the first.
    pub fn memory_type(&self, type_bits: u32, flags: vk::MemoryPropertyFlags) -> Option<u32> {
        let props = &self.memory_properties;
        (0..props.memory_type_count)
            .find(|&i| type_bits & (1 << i) != 0 && props.memory_types[i as usize].property_flags.contains(flags))
    }

    /// Property flags of a memory type.
    pub fn memory_type_flags(&self, index: u32) -> vk::MemoryPropertyFlags {
        self.memory_properties.memory_types[index as usize].property_flags
    }

    /// Submits command buffers to queue 0.
    pub fn submit(&self, submits: &[vk::SubmitInfo<'_>], fence: vk::Fence) -> Result<()> {
        self.submit_to(0, submits, fence)
    }

    /// How many queues the device has (1 or 2, all of one family).
    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// The device's timestamp period in nanoseconds per tick.
    pub fn timestamp_period_ns(&self) -> f32 {
        self.limits.timestamp_period
    }

    /// Submits command buffers to queue `index` (the last queue when there are fewer).
    pub fn submit_to(&self, index: usize, submits: &[vk::SubmitInfo<'_>], fence: vk::Fence) -> Result<()> {
        let queue = self.queues[index.min(self.queues.len() - 1)]
            .lock()
            .map_err(|_| Error::InvalidArgument("queue lock poisoned".into()))?;
        // SAFETY: the queue is externally synchronised by the mutex; submits are valid.
        unsafe { self.raw.queue_submit(*queue, submits, fence) }.call("vkQueueSubmit")
    }

    /// Records commands with `record`, submits them and waits for completion
    /// (bounded). For set-up and tests, not for the per-frame path.
    pub fn one_shot(&self, record: impl FnOnce(vk::CommandBuffer)) -> Result<()> {
        let shot = self.one_shot.lock().map_err(|_| Error::InvalidArgument("command pool lock poisoned".into()))?;
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(shot.pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: the pool is externally synchronised by the mutex.
        let cmd = unsafe { self.raw.allocate_command_buffers(&alloc) }.call("vkAllocateCommandBuffers")?[0];
        let result = (|| {
            let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            // SAFETY: cmd is a fresh primary command buffer.
            unsafe { self.raw.begin_command_buffer(cmd, &begin) }.call("vkBeginCommandBuffer")?;
            record(cmd);
            // SAFETY: cmd is recording.
            unsafe { self.raw.end_command_buffer(cmd) }.call("vkEndCommandBuffer")?;
            let cmds = [cmd];
            let submit = vk::SubmitInfo::default().command_buffers(&cmds);
            self.submit(&[submit], shot.fence)?;
            // SAFETY: the fence belongs to this device and was just submitted.
            // Bounded: a lost device must fail, not hang.
            unsafe { self.raw.wait_for_fences(&[shot.fence], true, ONE_SHOT_TIMEOUT_NS) }.call("vkWaitForFences")?;
            // SAFETY: the fence is signalled and no longer in use.
            unsafe { self.raw.reset_fences(&[shot.fence]) }.call("vkResetFences")
        })();
        // SAFETY: the command buffer has completed (or was never submitted).
        unsafe { self.raw.free_command_buffers(shot.pool, &[cmd]) };
        result
    }

    /// Submits a batch with no commands that waits for and signals timeline
    /// values on the queue (pre-flight's semaphore hand-off).
    pub fn submit_timeline(
        &self,
        wait: &[(vk::Semaphore, u64)],
        signal: &[(vk::Semaphore, u64)],
        fence: vk::Fence,
    ) -> Result<()> {
        let wait_sems: Vec<_> = wait.iter().map(|w| w.0).collect();
        let wait_vals: Vec<_> = wait.iter().map(|w| w.1).collect();
        let signal_sems: Vec<_> = signal.iter().map(|s| s.0).collect();
        let signal_vals: Vec<_> = signal.iter().map(|s| s.1).collect();
        let stages = vec![vk::PipelineStageFlags::ALL_COMMANDS; wait.len()];
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_vals)
            .signal_semaphore_values(&signal_vals);
        let submit = vk::SubmitInfo::default()
            .wait_semaphores(&wait_sems)
            .wait_dst_stage_mask(&stages)
            .signal_semaphores(&signal_sems)
            .push_next(&mut timeline);
        self.submit(&[submit], fence)
    }

    /// Waits until the device is idle (teardown, tests).
    pub fn wait_idle(&self) -> Result<()> {
        // SAFETY: the device is valid; callers hold no queue lock.
        unsafe { self.raw.device_wait_idle() }.call("vkDeviceWaitIdle")
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: every child holds an Arc<Device>, so none is alive; waiting
        // first makes sure no submitted work still uses the pool or fence.
        unsafe {
            let _ = self.raw.device_wait_idle();
        }
        if let Ok(shot) = self.one_shot.get_mut() {
            // SAFETY: the device is idle; the fence and pool are not in use.
            unsafe { self.raw.destroy_fence(shot.fence, None) };
            // SAFETY: as above.
            unsafe { self.raw.destroy_command_pool(shot.pool, None) };
        }
        // SAFETY: all children are gone (they hold Arc<Device>).
        unsafe { self.raw.destroy_device(None) };
    }
}
