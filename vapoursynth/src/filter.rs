//! `nf.Model`'s filter: a neural-frame context on the physical device of the core's
//! Vulkan device (matched by UUID), fed VapourSynth's GPU frames zero copy. Each plane of
//! a frame is a buffer in one of the core's pooled allocations: every allocation is imported
//! once (keyed by its `memoryId`; the cache is bounded, and every descriptor VapourSynth hands
//! out is either imported or closed), and each frame's planes are placed in them at their
//! offsets and pitches, the model's tensor gathered from them and its output scattered into a
//! new GPU frame's planes by the context's passes (CUDA kernels on the CUDA backend).
//!
//! Synchronization is on the host: the filter waits for the input frame's producers
//! (`waitGPUFrame`), runs the frame, and waits for it before handing the output over, so
//! the output needs no producer and the input's reads are done when its frame is freed.
//! That is the only path where the core's semaphores do not export (lavapipe); it is said
//! once in VapourSynth's log.

use std::collections::VecDeque;
use std::ffi::{CString, c_char, c_int, c_void};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Mutex;

use ash::vk;
use neural_frame::{
    DeviceIdentity, DeviceSelector, MemoryId, MemoryImport, NeuralFrameContext, PlanarFrame, Plane, Precision, Tiling,
};

use crate::ffi::*;
use crate::plugin::c_text;

/// Allocations kept imported at most: VapourSynth's pools are 128 MiB blocks, and a
/// block that is dropped from the cache while a frame still uses it stays alive until then.
const MEMORY_CACHE: usize = 32;

/// What the constructor hands the filter.
pub(crate) struct Options<'a> {
    pub(crate) model: &'a Path,
    pub(crate) backend: neural_frame::Backend,
    pub(crate) precision: Option<Precision>,
    pub(crate) tile: Option<(u32, u32, u32)>,
    /// The clip's plane format: `R32_SFLOAT` (RGBS) or `R16_SFLOAT` (RGBH).
    pub(crate) plane_format: vk::Format,
    pub(crate) width: u32,
    pub(crate) height: u32,
    /// The core's device.
    pub(crate) device_uuid: [u8; vk::UUID_SIZE],
}

/// The filter's state behind its lock (VapourSynth calls `getFrame` of an
/// `fmParallelRequests` filter from one thread at a time, but not always the same one).
struct State {
    ctx: NeuralFrameContext,
    /// Imported allocations by `memoryId`, oldest first.
    memories: VecDeque<(u64, MemoryId)>,
}

/// The filter instance.
pub(crate) struct Filter {
    node: *mut VSNode,
    vk: &'static VSVULKANAPI,
    /// The output's format and size.
    out_info: VSVideoInfo,
    plane_format: vk::Format,
    device_uuid: [u8; vk::UUID_SIZE],
    state: Mutex<State>,
}

impl Filter {
    /// The context for the clip, or a message for `mapSetError`.
    pub(crate) fn new(
        options: &Options<'_>,
        node: *mut VSNode,
        vk: &'static VSVULKANAPI,
        in_info: &VSVideoInfo,
    ) -> Result<Self, String> {
        let mut builder = NeuralFrameContext::builder(options.model)
            .backend(options.backend)
            .device(DeviceSelector::Uuid(options.device_uuid))
            .frame_size(options.width, options.height);
        if let Some(p) = options.precision {
            builder = builder.map_cuda_options(|c| c.with_precision(p));
        }
        if let Some((w, h, overlap)) = options.tile {
            let tiling = Tiling::new(w, h, overlap).map_err(|e| format!("Model: tile: {e}"))?;
            builder = builder.tiling(tiling);
        }
        let ctx = builder.build().map_err(|e| format!("Model: {e}"))?;
        let (ow, oh) = ctx.output_size();
        let mut out_info = *in_info;
        out_info.width = ow as c_int;
        out_info.height = oh as c_int;
        Ok(Self {
            node,
            vk,
            out_info,
            plane_format: options.plane_format,
            device_uuid: options.device_uuid,
            state: Mutex::new(State { ctx, memories: VecDeque::new() }),
        })
    }

    /// The output's video info.
    pub(crate) fn out_info(&self) -> &VSVideoInfo {
        &self.out_info
    }

    /// The node the filter reads.
    pub(crate) fn node(&self) -> *mut VSNode {
        self.node
    }

    /// Frame `n`: the input's planes through the model into a new GPU frame's.
    ///
    /// # Safety
    /// `api`, `frame_ctx` and `core` are what VapourSynth passed to `getFrame` for `arAllFramesReady`.
    unsafe fn frame(
        &self,
        api: &VSAPI,
        n: c_int,
        frame_ctx: *mut VSFrameContext,
        core: *mut VSCore,
    ) -> Result<*const VSFrame, String> {
        let vk = self.vk;
        let mut error = [0 as c_char; 1024];
        let get = vk.getExportableFrameFilter.ok_or("Model: the core has no getExportableFrameFilter")?;
        // SAFETY: the frame was requested in arInitial; the buffer's size is given.
        let src = unsafe { get(n, self.node, frame_ctx, error.as_mut_ptr(), error.len() as c_int) };
        if src.is_null() {
            return Err(format!("Model: frame {n} is not exportable: {}", c_text(&error)));
        }
        let src = FrameRef { frame: src, api };
        let wait = vk.waitGPUFrame.ok_or("Model: the core has no waitGPUFrame")?;
        // SAFETY: a frame we hold.
        if unsafe { wait(src.frame, error.as_mut_ptr(), error.len() as c_int) } != 0 {
            return Err(format!("Model: waiting for frame {n}: {}", c_text(&error)));
        }
        let new = vk.newGPUVideoFrame.ok_or("Model: the core has no newGPUVideoFrame")?;
        // SAFETY: the output's format and size; properties copied from the input.
        let dst = unsafe { new(&self.out_info.format, self.out_info.width, self.out_info.height, src.frame, core) };
        if dst.is_null() {
            return Err(format!(
                "Model: no GPU frame of {}×{} for frame {n}",
                self.out_info.width, self.out_info.height
            ));
        }
        let dst = FrameRef { frame: dst, api };
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: frames we hold, of three planes each.
        let input = unsafe { self.planes(&mut state, api, src.frame) }?;
        // SAFETY: as above.
        let output = unsafe { self.planes(&mut state, api, dst.frame) }?;
        let ctx = &mut state.ctx;
        let in_id = ctx.place_input_planes(&input).map_err(|e| format!("Model: frame {n}'s planes: {e}"))?;
        let out_id = match ctx.place_output_planes(&output) {
            Ok(id) => id,
            Err(err) => {
                let _ = ctx.unregister_input(in_id);
                return Err(format!("Model: the output planes of frame {n}: {err}"));
            }
        };
        let ran = ctx.infer(in_id, out_id);
        let unregistered = ctx.unregister_input(in_id).and(ctx.unregister_output(out_id));
        ran.map_err(|e| format!("Model: frame {n}: {e}"))?;
        unregistered.map_err(|e| format!("Model: frame {n}: {e}"))?;
        Ok(dst.release())
    }

    /// A frame's three planes, their allocations imported where they are new.
    ///
    /// # Safety
    /// `frame` is a live GPU frame of three planes.
    unsafe fn planes(&self, state: &mut State, api: &VSAPI, frame: *const VSFrame) -> Result<PlanarFrame, String> {
        let export = self.vk.exportGPUPlane.ok_or("Model: the core has no exportGPUPlane")?;
        let mut planes = Vec::with_capacity(3);
        for p in 0..3 {
            let mut m = VSVulkanExportedMemory::default();
            let mut error = [0 as c_char; 1024];
            // SAFETY: a live frame; the struct and buffer are ours.
            if unsafe { export(frame, p, &mut m, error.as_mut_ptr(), error.len() as c_int) } != 0 {
                return Err(format!("Model: exporting plane {p}: {}", c_text(&error)));
            }
            let Ok(raw) = i32::try_from(m.handle) else {
                return Err(format!("Model: plane {p} came with descriptor {}", m.handle));
            };
            // SAFETY: exportGPUPlane hands out a new descriptor, owned by the caller.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let memory = self.memory(state, &m, fd)?;
            // SAFETY: a live frame.
            let stride = unsafe { vs!(api, getStride)(frame, p) };
            planes.push(Plane { memory, offset: m.offset, row_pitch: stride as u64 });
        }
        // SAFETY: a live frame.
        let (w, h) = unsafe { (vs!(api, getFrameWidth)(frame, 0), vs!(api, getFrameHeight)(frame, 0)) };
        Ok(PlanarFrame { format: self.plane_format, width: w as u32, height: h as u32, planes })
    }

    /// The imported allocation of `m`: from the cache (the new descriptor closed), or imported now.
    fn memory(&self, state: &mut State, m: &VSVulkanExportedMemory, fd: OwnedFd) -> Result<MemoryId, String> {
        if let Some(&(_, id)) = state.memories.iter().find(|(key, _)| *key == m.memoryId) {
            return Ok(id); // `fd` closes here
        }
        if m.handleType != vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD.as_raw() as c_int {
            return Err(format!(
                "Model: the core exports memory as handle type {:#x}; the filter imports OPAQUE_FD",
                m.handleType
            ));
        }
        let ctx = &mut state.ctx;
        // The core's device and the context's are the same physical device and driver (the
        // context was built on the core's device UUID; the core gives no driver UUID).
        let origin = DeviceIdentity { device_uuid: self.device_uuid, driver_uuid: ctx.device_identity().driver_uuid };
        let import = MemoryImport {
            fd,
            allocation_size: m.memorySize,
            memory_type_index: m.memoryTypeIndex,
            dedicated: false,
            origin,
        };
        let id = ctx.import_memory(import).map_err(|e| format!("Model: importing the core's memory: {e}"))?;
        state.memories.push_back((m.memoryId, id));
        if state.memories.len() > MEMORY_CACHE
            && let Some((_, old)) = state.memories.pop_front()
        {
            // Placements of frames in flight keep it alive until they are done.
            let _ = ctx.release_memory(old);
        }
        Ok(id)
    }
}

/// `getFrame`.
///
/// # Safety
/// Called by VapourSynth with the instance data `filter_create` gave it.
pub(crate) unsafe extern "system" fn get_frame(
    n: c_int,
    activation_reason: c_int,
    instance_data: *mut c_void,
    _frame_data: *mut *mut c_void,
    frame_ctx: *mut VSFrameContext,
    core: *mut VSCore,
    vsapi: *const VSAPI,
) -> *const VSFrame {
    // SAFETY: VapourSynth's table and our instance, valid for the call.
    let (Some(api), Some(filter)) = (unsafe { vsapi.as_ref() }, unsafe { instance_data.cast::<Filter>().as_ref() })
    else {
        return std::ptr::null();
    };
    match activation_reason {
        r if r == arInitial => {
            // SAFETY: our node, in the filter's frame context.
            unsafe { vs!(api, requestFrameFilter)(n, filter.node, frame_ctx) };
            std::ptr::null()
        }
        // SAFETY: VapourSynth's arguments for this frame.
        r if r == arAllFramesReady => match unsafe { filter.frame(api, n, frame_ctx, core) } {
            Ok(frame) => frame,
            Err(message) => {
                let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
                // SAFETY: VapourSynth copies the message.
                unsafe { vs!(api, setFilterError)(message.as_ptr(), frame_ctx) };
                std::ptr::null()
            }
        },
        _ => std::ptr::null(),
    }
}

/// `free`: the context (and with it every import) and the node.
///
/// # Safety
/// Called by VapourSynth once, with the instance data `filter_create` gave it.
pub(crate) unsafe extern "system" fn free(instance_data: *mut c_void, _core: *mut VSCore, vsapi: *const VSAPI) {
    // SAFETY: the Box `filter_create` leaked, freed once.
    let filter = unsafe { Box::from_raw(instance_data.cast::<Filter>()) };
    let node = filter.node;
    drop(filter);
    // SAFETY: VapourSynth's table; the node reference the filter held.
    if let Some(api) = unsafe { vsapi.as_ref() } {
        // SAFETY: the node reference the filter held, freed once.
        unsafe { vs!(api, freeNode)(node) };
    }
}

/// A frame reference, freed when dropped unless released.
struct FrameRef<'a> {
    frame: *const VSFrame,
    api: &'a VSAPI,
}

impl FrameRef<'_> {
    fn release(self) -> *const VSFrame {
        let f = self.frame;
        std::mem::forget(self);
        f
    }
}

impl Drop for FrameRef<'_> {
    fn drop(&mut self) {
        // SAFETY: a reference we hold, freed once.
        unsafe { vs!(self.api, freeFrame)(self.frame) };
    }
}
