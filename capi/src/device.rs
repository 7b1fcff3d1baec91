//! A context on the caller's Vulkan device ("bring your own device"): its raw handles,
//! the loader's `vkGetInstanceProcAddr`, the extensions it was created with, and the lock
//! around submissions to a queue both sides use.

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_void};
use std::sync::{Arc, Mutex, MutexGuard};

use neural_frame::CallerDevice;
use neural_frame::ash;
use neural_frame::ash::vk::{self, Handle};

use crate::builder::nf_builder;
use crate::context::nf_context;
use crate::{Fail, Versioned, guard, guard_free, nf_status, non_null, put, read_arg, read_versioned};

/// A function of the Vulkan API, as `vkGetInstanceProcAddr` returns it (`PFN_vkVoidFunction`).
pub type nf_vk_void_function = Option<unsafe extern "system" fn()>;

/// The loader's `vkGetInstanceProcAddr` (`PFN_vkGetInstanceProcAddr`, with `VkInstance` as
/// `void *`): pass `(nf_vk_get_instance_proc_addr)vkGetInstanceProcAddr`.
pub type nf_vk_get_instance_proc_addr =
    Option<unsafe extern "system" fn(instance: *mut c_void, name: *const c_char) -> nf_vk_void_function>;

/// The caller's Vulkan device, by its raw handles, for `nf_context_new_on_device`. Every
/// handle is borrowed: the context never destroys one, and they must outlive the context.
/// Dispatchable handles (`VkInstance`, `VkPhysicalDevice`, `VkDevice`, `VkQueue`) are
/// passed as `void *`.
///
/// The device must have been created with Vulkan 1.2's `timelineSemaphore` feature
/// enabled, on a queue family with compute support. The CUDA backend also needs
/// `VK_KHR_external_memory_fd` and `VK_KHR_external_semaphore_fd` enabled (listed in
/// `enabled_device_extensions`); without them `NF_BACKEND_AUTO` runs the CPU backend,
/// announced. The CPU backend needs neither.
///
/// A versioned struct: `nf_vulkan_device d = NF_VULKAN_DEVICE_INIT;` sets `struct_size` and
/// zeroes the rest.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_vulkan_device {
    /// `sizeof(nf_vulkan_device)` as the caller's header has it (`NF_VULKAN_DEVICE_INIT`).
    pub struct_size: u32,
    /// The loader's `vkGetInstanceProcAddr`, which the instance's functions are loaded through.
    pub get_instance_proc_addr: nf_vk_get_instance_proc_addr,
    /// The caller's `VkInstance`.
    pub instance: *mut c_void,
    /// The `apiVersion` the instance was created with (`VkApplicationInfo`), 1.2 or newer
    /// (`VK_API_VERSION_1_2`).
    pub api_version: u32,
    /// The `VkPhysicalDevice` the device was created on.
    pub physical_device: *mut c_void,
    /// The caller's `VkDevice`.
    pub device: *mut c_void,
    /// A queue family of the device with compute support.
    pub queue_family_index: u32,
    /// A `VkQueue` of that family the context submits its passes to. On a queue shared with
    /// the caller a semaphore signal waits for every earlier submission there, so the values
    /// a frame waits for must come from submissions made before `nf_context_submit`, or from
    /// the host.
    pub queue: *mut c_void,
    /// A second `VkQueue` of the same family for the post passes, or NULL (optional: on
    /// the CUDA backend a post pass then waits there for the model instead of holding back
    /// the caller's later submissions to `queue`).
    pub post_queue: *mut c_void,
    /// The instance extensions the instance was created with (`count` NUL-terminated names;
    /// NULL with a count of 0). Read during the call only; the library needs no instance
    /// extension beyond Vulkan 1.2's core today, so none is looked for.
    pub enabled_instance_extensions: *const *const c_char,
    /// The number of names in `enabled_instance_extensions`.
    pub enabled_instance_extension_count: u32,
    /// The device extensions the device was created with (NUL-terminated names; NULL with a
    /// count of 0). Read during the call only: `VK_KHR_external_memory_fd` and
    /// `VK_KHR_external_semaphore_fd` are looked for.
    pub enabled_device_extensions: *const *const c_char,
    /// The number of names in `enabled_device_extensions`.
    pub enabled_device_extension_count: u32,
    /// The lock the caller holds (`nf_queue_lock_acquire`) whenever it submits to `queue` or
    /// `post_queue` itself; the context holds it around each of its own submissions. NULL:
    /// the caller never submits to these queues while a call on the context runs (a
    /// single-threaded renderer). The context keeps its own reference: the handle may be
    /// freed after `nf_context_new_on_device`.
    pub queue_lock: *const nf_queue_lock,
}

// SAFETY: #[repr(C)], `struct_size` first; all-zero is valid (NULL pointers and function).
unsafe impl Versioned for nf_vulkan_device {
    const NAME: &'static str = "nf_vulkan_device";
    const INIT: &'static str = "NF_VULKAN_DEVICE_INIT";
    const FIRST_SIZE: usize = std::mem::size_of::<nf_vulkan_device>();
}

/// A lock around submissions to a queue that the caller and a context share (opaque).
/// Made by `nf_queue_lock_new`, freed by `nf_queue_lock_free`; contexts built with it
/// keep it alive as long as they need it.
pub struct nf_queue_lock {
    lock: Arc<Mutex<()>>,
}

/// The locks this thread holds, each with a reference that keeps its mutex alive.
struct Held {
    // Dropped before `lock`: the guard borrows the mutex that `lock` keeps alive.
    _guard: MutexGuard<'static, ()>,
    lock: Arc<Mutex<()>>,
}

thread_local! {
    static HELD: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
}

/// Makes a queue lock, unlocked. On success `*out` is a new lock the caller frees with
/// `nf_queue_lock_free`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `out` is NULL;
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_queue_lock_new(out: *mut *mut nf_queue_lock) -> nf_status {
    guard(|| {
        let lock = Box::new(nf_queue_lock { lock: Arc::default() });
        // SAFETY: the caller's contract.
        unsafe { put(out, Box::into_raw(lock), "out") }
    })
}

/// Frees the caller's reference to a queue lock (contexts keep theirs). NULL is ignored.
/// Freeing does not release it: a thread that holds it releases it first.
///
/// Status: none (it returns nothing). The last error message stays as it was.
///
/// # Safety
/// `lock` is NULL or a lock of `nf_queue_lock_new` not freed before and not in use.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_queue_lock_free(lock: *mut nf_queue_lock) {
    if lock.is_null() {
        return;
    }
    guard_free(|| {
        // SAFETY: made by Box::into_raw in nf_queue_lock_new, freed once (the caller's contract).
        drop(unsafe { Box::from_raw(lock) });
        Ok(())
    });
}

/// Takes the lock, waiting while another thread (or a context's submission) holds it.
/// Hold it only around the caller's own `vkQueueSubmit` to the shared queues, never
/// across an `nf_*` call on a context that uses it (that call would wait for it forever).
/// The same thread releases it. Taking it twice on one thread is refused.
///
/// Status: `NF_STATUS_OK` once held; `NF_STATUS_INVALID_ARGUMENT` where `lock` is NULL or
/// this thread holds it already; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_queue_lock_acquire(lock: *const nf_queue_lock) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let lock = Arc::clone(&unsafe { read_arg(lock, "the queue lock") }?.lock);
        let mine = HELD.with(|h| h.borrow().iter().any(|held| Arc::ptr_eq(&held.lock, &lock)));
        if mine {
            return Err(Fail::invalid("this thread holds the queue lock already"));
        }
        // SAFETY: the mutex lives as long as `lock`, which `Held` keeps and drops after the guard.
        let mutex: &'static Mutex<()> = unsafe { &*Arc::as_ptr(&lock) };
        // A panic while it was held cannot have left `()` inconsistent.
        let guard = mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        HELD.with(|h| h.borrow_mut().push(Held { _guard: guard, lock }));
        Ok(())
    })
}

/// Releases the lock this thread took with `nf_queue_lock_acquire`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `lock` is NULL or this thread
/// does not hold it; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `lock` is NULL or a live lock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_queue_lock_release(lock: *const nf_queue_lock) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let lock = &unsafe { read_arg(lock, "the queue lock") }?.lock;
        let held = HELD.with(|h| {
            let mut h = h.borrow_mut();
            let at = h.iter().position(|held| Arc::ptr_eq(&held.lock, lock))?;
            Some(h.swap_remove(at))
        });
        match held {
            Some(held) => {
                drop(held);
                Ok(())
            }
            None => Err(Fail::invalid("this thread does not hold the queue lock")),
        }
    })
}

/// The names of a C array of strings.
///
/// # Safety
/// `names` is NULL (with `count` 0) or points to `count` NUL-terminated strings.
unsafe fn names(names: *const *const c_char, count: u32, what: &str) -> Result<Vec<String>, Fail> {
    if count == 0 {
        return Ok(Vec::new());
    }
    non_null(names, what)?;
    (0..count as usize)
        .map(|i| {
            // SAFETY: `count` readable pointers (the caller's contract).
            let p = unsafe { *names.add(i) };
            non_null(p, what)?;
            // SAFETY: NUL-terminated (the caller's contract).
            Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        })
        .collect()
}

/// The library's description of the caller's device.
///
/// # Safety
/// `d` satisfies `nf_context_new_on_device`'s contract.
unsafe fn caller_device(d: &nf_vulkan_device) -> Result<CallerDevice, Fail> {
    let gipa = d.get_instance_proc_addr.ok_or_else(|| Fail::invalid("get_instance_proc_addr is NULL"))?;
    non_null(d.instance, "instance")?;
    non_null(d.physical_device, "physical_device")?;
    non_null(d.device, "device")?;
    non_null(d.queue, "queue")?;
    // SAFETY: the caller's contract.
    let _instance_extensions =
        unsafe { names(d.enabled_instance_extensions, d.enabled_instance_extension_count, "an instance extension") }?;
    // SAFETY: the caller's contract.
    let device_extensions =
        unsafe { names(d.enabled_device_extensions, d.enabled_device_extension_count, "a device extension") }?;
    let has = |name: &CStr| device_extensions.iter().any(|e| e.as_bytes() == name.to_bytes());
    // SAFETY: the same function with VkInstance as a pointer-sized handle (repr(transparent)
    // over a pointer in ash), under the same calling convention.
    let gipa: vk::PFN_vkGetInstanceProcAddr = unsafe { std::mem::transmute(gipa) };
    let static_fn = ash::StaticFn { get_instance_proc_addr: gipa };
    // SAFETY: the loader's vkGetInstanceProcAddr (the caller's contract).
    let entry = unsafe { ash::Entry::from_static_fn(static_fn.clone()) };
    let raw_instance = vk::Instance::from_raw(d.instance as u64);
    // SAFETY: a live instance of that loader (the caller's contract).
    let instance = unsafe { ash::Instance::load(&static_fn, raw_instance) };
    // SAFETY: a live device created from that instance (the caller's contract).
    let device = unsafe { ash::Device::load(instance.fp_v1_0(), vk::Device::from_raw(d.device as u64)) };
    let queue_lock = if d.queue_lock.is_null() {
        None
    } else {
        // SAFETY: a live lock (the caller's contract).
        Some(Arc::clone(&unsafe { &*d.queue_lock }.lock))
    };
    Ok(CallerDevice {
        entry,
        instance,
        api_version: d.api_version,
        physical_device: vk::PhysicalDevice::from_raw(d.physical_device as u64),
        device,
        queue_family_index: d.queue_family_index,
        queue: vk::Queue::from_raw(d.queue as u64),
        post_queue: (!d.post_queue.is_null()).then(|| vk::Queue::from_raw(d.post_queue as u64)),
        queue_lock,
        external_memory_fd: has(ash::khr::external_memory_fd::NAME),
        external_semaphore_fd: has(ash::khr::external_semaphore_fd::NAME),
    })
}

/// Builds a context on the caller's Vulkan device and queue (bring your own device), from
/// the builder's options (borrowed, as by `nf_context_new`; a device selector of the
/// builder does not apply). The context then takes the caller's images, buffers and
/// timeline semaphores by handle (`nf_context_register_*`), records and submits its passes
/// on `device->queue`, and its tickets carry its own timeline semaphores of that device,
/// for the caller's `vkQueueSubmit`. On success `*out` is a new context the caller frees
/// with `nf_context_free` before it destroys the device or the instance.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b`, `device`, `out` or a
/// handle `device` must give is NULL, or an option does not fit the device (the frame size
/// unset or too large, `NF_POST_WAIT_HOST` on a single queue); `NF_STATUS_STRUCT_SIZE` where
/// `device->struct_size` is not set; `NF_STATUS_UNSUPPORTED` where the device lacks what is
/// needed (Vulkan 1.2, timeline semaphores, a format or limit), or a newer header's field is
/// set; `NF_STATUS_MODEL_CONTRACT` where the model file is missing, unreadable or does not
/// fit the pipeline; `NF_STATUS_RUNTIME_MISSING` where ONNX Runtime cannot be loaded;
/// `NF_STATUS_PROVIDER_UNAVAILABLE` for `NF_BACKEND_CUDA` where CUDA or its provider cannot
/// be used (`NF_BACKEND_AUTO` then runs the CPU backend, logged); `NF_STATUS_VULKAN`,
/// `NF_STATUS_CUDA`, `NF_STATUS_ONNX_RUNTIME`: a call of theirs failed;
/// `NF_STATUS_DEVICE_LOST`: the device was lost; `NF_STATUS_IO`: the tune cache or a
/// converted model could not be read or written; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `b` is NULL or a live builder; `device` is NULL or points to a description (of
/// `device->struct_size` readable bytes) whose
/// handles are valid as it says (the device created from the instance on the physical
/// device with `timelineSemaphore` enabled and the extensions it lists, the queues of its
/// family), and outlive the context and every registration made on it; the caller
/// submits to the queues only while holding `queue_lock` (or, without one, never while a
/// call on the context runs); `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_new_on_device(
    b: *const nf_builder,
    device: *const nf_vulkan_device,
    out: *mut *mut nf_context,
) -> nf_status {
    guard(|| {
        non_null(b, "the builder")?;
        non_null(out, "out")?;
        // SAFETY: the caller's contract.
        let d = unsafe { read_versioned(device, "device") }?;
        // SAFETY: the caller's contract.
        let caller = unsafe { caller_device(&d) }?;
        // SAFETY: not null and live (the caller's contract).
        let options = unsafe { &*b }.inner.clone();
        // SAFETY: build_on's contract is this function's (above).
        let ctx = unsafe { options.build_on(caller) }?;
        // SAFETY: `out` is not null and writable.
        unsafe { put(out, Box::into_raw(Box::new(nf_context::new(ctx))), "out") }
    })
}
