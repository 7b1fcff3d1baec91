//! A logical device with one or two compute-capable queues (or the caller's
//! device and queue, borrowed), and one-shot command submission.

use std::ffi::CStr;
use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;

use crate::error::{Error, Result, VkResultExt};
use crate::vulkan::adapter::{self, AdapterInfo, DeviceSelector, OPTIONAL_EXTENSIONS, REQUIRED_EXTENSIONS};
use crate::vulkan::external::{MemoryLoader, SemaphoreLoader};
use crate::vulkan::instance::Instance;

/// Whether the physical device has a device extension.
fn has_extension(instance: &Instance, physical: vk::PhysicalDevice, name: &CStr) -> bool {
    // SAFETY: physical comes from this instance.
    unsafe { instance.raw().enumerate_device_extension_properties(physical) }
        .is_ok_and(|list| list.iter().any(|e| e.extension_name_as_c_str() == Ok(name)))
}

/// How long a blocking one-shot submission may take before it is an error.
const ONE_SHOT_TIMEOUT_NS: u64 = 30_000_000_000;

/// Command pool and fence for blocking one-shot submissions (set-up, transfers, tests).
struct OneShot {
    pool: vk::CommandPool,
    fence: vk::Fence,
}

/// A queue and the lock that serialises submissions to it (`vkQueueSubmit`
/// needs external synchronisation). A borrowed queue shares its lock with the caller.
pub(crate) struct Queue {
    raw: vk::Queue,
    lock: Arc<Mutex<()>>,
}

/// What the caller's device was created with, for [`Device::borrowed`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct BorrowedDevice {
    pub(crate) raw: vk::Device,
    pub(crate) physical: vk::PhysicalDevice,
    pub(crate) queue_family: u32,
    pub(crate) queue: vk::Queue,
    pub(crate) post_queue: Option<vk::Queue>,
    /// `VK_KHR_external_memory_fd` (`_win32` on Windows) is enabled.
    pub(crate) external_memory_fd: bool,
    /// `VK_KHR_external_semaphore_fd` (`_win32` on Windows) is enabled.
    pub(crate) external_semaphore_fd: bool,
}

/// A logical device. Children (buffers, images, semaphores) hold an `Arc<Device>`.
/// Fields are in teardown order; the raw device is destroyed in `Drop` (when
/// this value created it), before the `Arc<Instance>` is released.
pub struct Device {
    one_shot: Mutex<OneShot>,
    /// The external memory extension's functions (`_fd`, or `_win32` on Windows), where enabled.
    pub(crate) memory_ext: Option<MemoryLoader>,
    /// The external semaphore extension's functions, where enabled.
    pub(crate) semaphore_ext: Option<SemaphoreLoader>,
    /// `VK_EXT_external_memory_host`'s functions and `minImportedHostPointerAlignment`, where enabled
    /// (imports of memory files: `host_file.rs`, Linux only).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) host_memory_ext: Option<(ash::ext::external_memory_host::Device, u64)>,
    raw: ash::Device,
    queues: Vec<Queue>,
    queue_family: u32,
    physical: vk::PhysicalDevice,
    info: AdapterInfo,
    memory_properties: vk::PhysicalDeviceMemoryProperties,
    limits: vk::PhysicalDeviceLimits,
    max_allocation: u64,
    timestamps: bool,
    owned: bool,
    instance: Arc<Instance>,
}

/// One submission's command buffers and timeline waits and signals ([`Device::submit_batch`]).
#[derive(Default, Clone, Copy)]
pub(crate) struct Batch<'a> {
    pub(crate) cmds: &'a [vk::CommandBuffer],
    /// `(semaphore, value, stage that waits)`.
    pub(crate) wait: &'a [(vk::Semaphore, u64, vk::PipelineStageFlags)],
    /// `(semaphore, value)`.
    pub(crate) signal: &'a [(vk::Semaphore, u64)],
}

impl Device {
    /// Chooses a physical device and creates a logical device on it.
    pub(crate) fn new(instance: &Arc<Instance>, selector: DeviceSelector) -> Result<Arc<Self>> {
        let list = adapter::enumerate(instance)?;
        let infos: Vec<AdapterInfo> = list.iter().map(|(_, i)| i.clone()).collect();
        let chosen = adapter::select(&infos, selector)?;
        let (physical, info) = list.into_iter().nth(chosen).ok_or_else(|| Error::internal("device list changed"))?;
        Self::on(instance, physical, info)
    }

    /// Creates a logical device on a given physical device (a second device on
    /// the same physical device is how pre-flight stage 1 tests import).
    pub(crate) fn on(instance: &Arc<Instance>, physical: vk::PhysicalDevice, info: AdapterInfo) -> Result<Arc<Self>> {
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
        check_timeline_feature(instance, physical, &info)?;

        let mut extensions: Vec<&CStr> = REQUIRED_EXTENSIONS.to_vec();
        // Missing optional extensions are reported by AdapterInfo and by
        // caps::timeline_export_support when a caller needs them.
        if info.external_semaphore_fd {
            extensions.extend(OPTIONAL_EXTENSIONS);
        }
        // Memory files (Mesa's exports) are imported as host memory the library maps itself (host_file.rs).
        let host_memory =
            cfg!(target_os = "linux") && has_extension(instance, physical, ash::ext::external_memory_host::NAME);
        if host_memory {
            extensions.push(ash::ext::external_memory_host::NAME);
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
        // SAFETY: physical comes from this instance; extensions were checked by describe().
        let raw = unsafe { raw_instance.create_device(physical, &create, None) }.call("vkCreateDevice")?;
        let queues = (0..queue_count)
            // SAFETY: the family and these indices were requested in `create`.
            .map(|i| Queue { raw: unsafe { raw.get_device_queue(queue_family, i) }, lock: Arc::default() })
            .collect();
        let exts = (true, info.external_semaphore_fd, host_memory);
        Self::finish(instance, physical, info, raw, queue_family, queues, exts, true)
    }

    /// Wraps the caller's device and one of its queues without taking them over.
    ///
    /// # Safety
    /// `device.raw` must be a live device created from `instance` on
    /// `device.physical` with the timelineSemaphore feature enabled and the
    /// extensions the flags claim; `device.queue` must be a queue of
    /// `device.queue_family`, which supports compute. The device must outlive
    /// the returned value and every object made from it, and the queue may only
    /// be used by others while they hold `lock`.
    pub(crate) unsafe fn borrowed(
        instance: &Arc<Instance>,
        device: BorrowedDevice,
        lock: Option<Arc<Mutex<()>>>,
    ) -> Result<Arc<Self>> {
        let raw_instance = instance.raw();
        // SAFETY: the instance is live (caller's contract).
        let index = unsafe { raw_instance.enumerate_physical_devices() }
            .ok()
            .and_then(|list| list.iter().position(|p| *p == device.physical))
            .unwrap_or(0);
        let info = adapter::describe(instance, device.physical, index)?;
        // SAFETY: the physical device comes from this instance (caller's contract).
        let families = unsafe { raw_instance.get_physical_device_queue_family_properties(device.physical) };
        let family = families.get(device.queue_family as usize).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "queue family {} does not exist on \"{}\" ({} families)",
                device.queue_family,
                info.name,
                families.len()
            ))
        })?;
        if !family.queue_flags.contains(vk::QueueFlags::COMPUTE) {
            return Err(Error::InvalidArgument(format!(
                "queue family {} of \"{}\" has no compute support ({:?}); pass a compute-capable queue",
                device.queue_family, info.name, family.queue_flags
            )));
        }
        check_timeline_feature(instance, device.physical, &info)?;
        // SAFETY: the device handle is live and was created from this instance (caller's contract).
        let raw = unsafe { ash::Device::load(raw_instance.fp_v1_0(), device.raw) };
        let lock = lock.unwrap_or_default();
        let mut queues = vec![Queue { raw: device.queue, lock: Arc::clone(&lock) }];
        queues.extend(device.post_queue.map(|raw| Queue { raw, lock }));
        let exts = (device.external_memory_fd, device.external_semaphore_fd, false);
        Self::finish(instance, device.physical, info, raw, device.queue_family, queues, exts, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        instance: &Arc<Instance>,
        physical: vk::PhysicalDevice,
        mut info: AdapterInfo,
        raw: ash::Device,
        queue_family: u32,
        queues: Vec<Queue>,
        (external_memory_fd, external_semaphore_fd, host_memory): (bool, bool, bool),
        owned: bool,
    ) -> Result<Arc<Self>> {
        let raw_instance = instance.raw();
        let destroy = |raw: &ash::Device| {
            if owned {
                // SAFETY: nothing else was created from raw yet.
                unsafe { raw.destroy_device(None) };
            }
        };
        info.external_semaphore_fd = external_semaphore_fd;
        let memory_ext = external_memory_fd.then(|| MemoryLoader::new(raw_instance, &raw));
        let semaphore_ext = external_semaphore_fd.then(|| SemaphoreLoader::new(raw_instance, &raw));
        // SAFETY: physical comes from this instance.
        let memory_properties = unsafe { raw_instance.get_physical_device_memory_properties(physical) };
        let mut maintenance3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut host_props = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut maintenance3);
        if host_memory {
            props2 = props2.push_next(&mut host_props);
        }
        // SAFETY: physical comes from this instance; the chain lives until the call returns.
        unsafe { raw_instance.get_physical_device_properties2(physical, &mut props2) };
        let limits = props2.properties.limits;
        let max_allocation = maintenance3.max_memory_allocation_size;
        let host_memory_ext = host_memory.then(|| {
            let ext = ash::ext::external_memory_host::Device::new(raw_instance, &raw);
            (ext, host_props.min_imported_host_pointer_alignment)
        });
        // SAFETY: physical comes from this instance.
        let families = unsafe { raw_instance.get_physical_device_queue_family_properties(physical) };
        let timestamps = limits.timestamp_period > 0.0
            && families.get(queue_family as usize).is_some_and(|f| f.timestamp_valid_bits > 0);

        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(queue_family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER | vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: raw is a valid device.
        let pool = match unsafe { raw.create_command_pool(&pool_info, None) } {
            Ok(p) => p,
            Err(result) => {
                destroy(&raw);
                return Err(Error::Vulkan { call: "vkCreateCommandPool", result });
            }
        };
        // SAFETY: raw is a valid device.
        let fence = match unsafe { raw.create_fence(&vk::FenceCreateInfo::default(), None) } {
            Ok(f) => f,
            Err(result) => {
                // SAFETY: pool was created from raw and is unused.
                unsafe { raw.destroy_command_pool(pool, None) };
                destroy(&raw);
                return Err(Error::Vulkan { call: "vkCreateFence", result });
            }
        };
        Ok(Arc::new(Device {
            one_shot: Mutex::new(OneShot { pool, fence }),
            memory_ext,
            semaphore_ext,
            host_memory_ext,
            raw,
            queues,
            queue_family,
            physical,
            info,
            memory_properties,
            limits,
            max_allocation,
            timestamps,
            owned,
            instance: Arc::clone(instance),
        }))
    }

    /// The raw `ash` device.
    pub(crate) fn raw(&self) -> &ash::Device {
        &self.raw
    }
    /// The instance this device was created from.
    pub(crate) fn instance(&self) -> &Arc<Instance> {
        &self.instance
    }
    /// The physical device.
    pub(crate) fn physical(&self) -> vk::PhysicalDevice {
        self.physical
    }
    /// What the physical device is.
    pub(crate) fn info(&self) -> &AdapterInfo {
        &self.info
    }
    /// The queue family used for all work.
    pub(crate) fn queue_family(&self) -> u32 {
        self.queue_family
    }
    /// Device limits (image sizes, workgroup counts, buffer ranges, timestamp period).
    pub(crate) fn limits(&self) -> &vk::PhysicalDeviceLimits {
        &self.limits
    }
    /// The largest single allocation the device allows (`maxMemoryAllocationSize`).
    pub(crate) fn max_allocation(&self) -> u64 {
        self.max_allocation
    }
    /// Whether semaphores can be exported and imported (file descriptors, or Windows handles).
    pub(crate) fn can_share_semaphores(&self) -> bool {
        self.semaphore_ext.is_some()
    }
    /// Whether memory can be exported and imported (file descriptors, or Windows handles).
    pub(crate) fn can_share_memory(&self) -> bool {
        self.memory_ext.is_some()
    }
    /// Whether this value owns the device (false: the caller's, borrowed).
    pub(crate) fn is_owned(&self) -> bool {
        self.owned
    }

    /// Finds a memory type allowed by `type_bits` with all of `flags`, preferring the first.
    pub(crate) fn memory_type(&self, type_bits: u32, flags: vk::MemoryPropertyFlags) -> Option<u32> {
        let props = &self.memory_properties;
        (0..props.memory_type_count)
            .find(|&i| type_bits & (1 << i) != 0 && props.memory_types[i as usize].property_flags.contains(flags))
    }

    /// Property flags of a memory type (empty for an index the device does not have).
    pub(crate) fn memory_type_flags(&self, index: u32) -> vk::MemoryPropertyFlags {
        if index >= self.memory_properties.memory_type_count {
            return vk::MemoryPropertyFlags::empty();
        }
        self.memory_properties.memory_types[index as usize].property_flags
    }

    /// Memory types the device has.
    pub(crate) fn memory_type_count(&self) -> u32 {
        self.memory_properties.memory_type_count
    }

    /// The size of the heap a memory type draws from.
    pub(crate) fn heap_size(&self, type_index: u32) -> u64 {
        let heap = self.memory_properties.memory_types[type_index as usize].heap_index;
        self.memory_properties.memory_heaps[heap as usize].size
    }

    /// How many queues the context may submit to (1 or 2, all of one family).
    pub(crate) fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// Whether the queue family writes timestamps (`timestampValidBits` > 0).
    pub(crate) fn has_timestamps(&self) -> bool {
        self.timestamps
    }

    /// The device's timestamp period in nanoseconds per tick.
    pub(crate) fn timestamp_period_ns(&self) -> f32 {
        self.limits.timestamp_period
    }

    /// Submits batches to queue `index` (the last queue when there are fewer).
    ///
    /// # Safety
    /// Every batch must be valid for this device: its command buffers executable
    /// and not pending (unless recorded for simultaneous use), its semaphores
    /// and fence live, and everything the commands use alive until they complete.
    pub(crate) unsafe fn submit_to(
        &self,
        index: usize,
        submits: &[vk::SubmitInfo<'_>],
        fence: vk::Fence,
    ) -> Result<()> {
        let queue = &self.queues[index.min(self.queues.len() - 1)];
        let _guard = lock(&queue.lock)?;
        // SAFETY: the queue is externally synchronised by its lock; the batches are valid (caller's contract).
        unsafe { self.raw.queue_submit(queue.raw, submits, fence) }.call("vkQueueSubmit")
    }

    /// Records commands with `record`, submits them to queue 0 and waits for
    /// completion (bounded). For set-up, transfers and tests, not for the per-frame path.
    ///
    /// # Safety
    /// `record` must record only valid commands on resources of this device that
    /// stay alive until this call returns.
    pub(crate) unsafe fn one_shot(&self, record: impl FnOnce(vk::CommandBuffer)) -> Result<()> {
        let shot = self.one_shot.lock().map_err(|_| Error::internal("command pool lock poisoned"))?;
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
            // SAFETY: cmd is executable; its resources outlive this call (caller's contract).
            unsafe { self.submit_to(0, &[submit], shot.fence) }?;
            // SAFETY: the fence belongs to this device and was just submitted.
            // Bounded: a lost device must fail, not hang.
            match unsafe { self.raw.wait_for_fences(&[shot.fence], true, ONE_SHOT_TIMEOUT_NS) } {
                Ok(()) => {}
                Err(vk::Result::TIMEOUT) => {
                    return Err(Error::Timeout {
                        what: "a one-shot transfer".into(),
                        waited: std::time::Duration::from_nanos(ONE_SHOT_TIMEOUT_NS),
                    });
                }
                Err(result) => return Err(Error::Vulkan { call: "vkWaitForFences", result }),
            }
            // SAFETY: the fence is signalled and no longer in use.
            unsafe { self.raw.reset_fences(&[shot.fence]) }.call("vkResetFences")
        })();
        if result.is_ok() {
            // SAFETY: the command buffer has completed (or was never submitted).
            unsafe { self.raw.free_command_buffers(shot.pool, &[cmd]) };
        }
        // On a time-out the buffer may still be pending: it is left to the pool, which
        // is destroyed with the device.
        result
    }

    /// Submits one batch to queue `index`: its command buffers, after its timeline waits
    /// (each `(semaphore, value, stage)`), signalling its timeline values, with `fence`.
    /// At most four waits and four signals; nothing is allocated (the per-frame paths use it).
    ///
    /// # Safety
    /// As [`submit_to`](Self::submit_to); every semaphore is a live timeline semaphore of
    /// this device.
    pub(crate) unsafe fn submit_batch(&self, index: usize, batch: Batch<'_>, fence: vk::Fence) -> Result<()> {
        const MOST: usize = 4;
        let (nw, ns) = (batch.wait.len(), batch.signal.len());
        if nw > MOST || ns > MOST {
            return Err(Error::internal(format!("a batch of {nw} waits and {ns} signals (at most {MOST} each)")));
        }
        let (mut wait_sems, mut wait_vals) = ([vk::Semaphore::null(); MOST], [0u64; MOST]);
        let mut stages = [vk::PipelineStageFlags::empty(); MOST];
        for (k, &(sem, value, stage)) in batch.wait.iter().enumerate() {
            (wait_sems[k], wait_vals[k], stages[k]) = (sem, value, stage);
        }
        let (mut signal_sems, mut signal_vals) = ([vk::Semaphore::null(); MOST], [0u64; MOST]);
        for (k, &(sem, value)) in batch.signal.iter().enumerate() {
            (signal_sems[k], signal_vals[k]) = (sem, value);
        }
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_vals[..nw])
            .signal_semaphore_values(&signal_vals[..ns]);
        let submit = vk::SubmitInfo::default()
            .command_buffers(batch.cmds)
            .wait_semaphores(&wait_sems[..nw])
            .wait_dst_stage_mask(&stages[..nw])
            .signal_semaphores(&signal_sems[..ns])
            .push_next(&mut timeline);
        // SAFETY: the caller's contract.
        unsafe { self.submit_to(index, &[submit], fence) }
    }

    /// Waits until the device is idle (teardown of devices this value owns, tests),
    /// holding every queue's lock as `vkDeviceWaitIdle` requires. On a borrowed
    /// device this would wait for the caller's work too, so it is refused there.
    pub(crate) fn wait_idle(&self) -> Result<()> {
        if !self.owned {
            return Err(Error::internal("vkDeviceWaitIdle on the caller's device"));
        }
        let _guards = self.queues.iter().map(|q| lock(&q.lock)).collect::<Result<Vec<_>>>()?;
        // SAFETY: the device is valid; every queue is locked.
        unsafe { self.raw.device_wait_idle() }.call("vkDeviceWaitIdle")
    }
}

fn lock(m: &Mutex<()>) -> Result<MutexGuard<'_, ()>> {
    // A panic elsewhere while holding the lock leaves the queue itself intact.
    Ok(m.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

fn check_timeline_feature(instance: &Instance, physical: vk::PhysicalDevice, info: &AdapterInfo) -> Result<()> {
    let mut timeline = vk::PhysicalDeviceTimelineSemaphoreFeatures::default();
    let mut features2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut timeline);
    // SAFETY: physical comes from this instance; the chain lives until the call returns.
    unsafe { instance.raw().get_physical_device_features2(physical, &mut features2) };
    if timeline.timeline_semaphore == vk::FALSE {
        return Err(Error::Unsupported {
            device: info.name.clone(),
            what: "the timelineSemaphore feature".into(),
            remedy: "it is core in Vulkan 1.2; update the driver".into(),
        });
    }
    Ok(())
}

impl Drop for Device {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: every child holds an Arc<Device>, so none is alive; waiting
            // first makes sure no submitted work still uses the pool or fence.
            unsafe {
                let _ = self.raw.device_wait_idle();
            }
        }
        // On a borrowed device every one-shot submission was waited for (or timed out
        // and left to the pool, which the caller's device then still holds).
        if let Ok(shot) = self.one_shot.get_mut() {
            // SAFETY: one-shot work has completed; the fence and pool are not in use.
            unsafe { self.raw.destroy_fence(shot.fence, None) };
            // SAFETY: as above.
            unsafe { self.raw.destroy_command_pool(shot.pool, None) };
        }
        if self.owned {
            // SAFETY: all children are gone (they hold Arc<Device>).
            unsafe { self.raw.destroy_device(None) };
        }
    }
}
