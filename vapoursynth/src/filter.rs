//! `nf.Model`'s filter: a neural-frame context on the physical device of the core's
//! Vulkan device (matched by UUID), fed VapourSynth's GPU frames zero copy. Each plane of
//! a frame is a buffer in one of the core's pooled allocations: every allocation is imported
//! once (keyed by its `memoryId`; the cache is bounded, and every descriptor VapourSynth hands
//! out is either imported or closed), and each frame's planes are placed in them at their
//! offsets and pitches, the model's tensor gathered from them and its output scattered into a
//! new GPU frame's planes by the context's passes (CUDA kernels on the CUDA backend).
//!
//! Two ways to hand frames over ([`Sync`]):
//! - on the GPU, where the core's semaphores export and the context shares timelines with
//!   its device: each input plane's producer pair is waited for on the context's GPU (on the
//!   CUDA stream on the CUDA backend), and the context signals two timelines of the core's
//!   own (`createGPUTimeline`) with "input consumed" and "output ready", published as the
//!   input's and output's producer pairs (`setGPUPlaneProducer`): the filter returns the
//!   output frame at once, and the frames stay referenced until their frame is done;
//! - on the host: the filter waits for the input frame's producers (`waitGPUFrame`), runs
//!   the frame, and waits for it before it returns the output, which then needs no producer.
//!   The only way where the core's semaphores do not export (lavapipe). The filter is then
//!   `fmParallel`, and each thread waits for its frame without the filter's lock, so that
//!   the next frames go to the GPU while one is waited for.

use std::collections::VecDeque;
use std::ffi::{CString, c_char, c_int, c_void};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ash::vk;
use neural_frame::{
    DEFAULT_FRAME_TIMEOUT, DeviceIdentity, DeviceSelector, Frame, MemoryId, MemoryImport, NeuralFrameContext,
    PlanarFrame, Plane, Precision, SemaphoreImport, Submitted, SyncMode, Ticket, Tiling, TimelineId,
};

use crate::ffi::*;
use crate::plugin::c_text;

/// Allocations kept imported at most: VapourSynth's pools are 128 MiB blocks, and a
/// block that is dropped from the cache while a frame still uses it stays alive until then.
const MEMORY_CACHE: usize = 32;

/// Producer semaphores kept imported at most.
const SEMAPHORE_CACHE: usize = 64;

/// How often the host path looks whether its frame is done (a 540p → 4K frame of the
/// bundled model takes about 2 ms).
const POLL: Duration = Duration::from_micros(50);

/// How frames are handed between the core and the context (`sync` argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sync {
    /// The host: measured cheaper on an H100 (a 1080p RGBS clip through 4 chained filters of
    /// a ×1 model, 8 frames requested at a time: 0.544 ms a filter on the host against 0.772 ms
    /// on the GPU; docs/vapoursynth.md).
    Auto,
    /// `waitGPUFrame`, the frame run and waited for.
    Host,
    /// Producer pairs waited for and published on the GPU.
    Gpu,
}

/// What the constructor hands the filter.
pub(crate) struct Options<'a> {
    pub(crate) model: &'a Path,
    pub(crate) backend: neural_frame::Backend,
    pub(crate) precision: Option<Precision>,
    pub(crate) tile: Option<(u32, u32, u32)>,
    /// The clip's plane format: `R32_SFLOAT` (RGBS), `R16_SFLOAT` (RGBH) or `R8_UNORM` (RGB24).
    pub(crate) plane_format: vk::Format,
    pub(crate) width: u32,
    pub(crate) height: u32,
    /// The core's device.
    pub(crate) device_uuid: [u8; vk::UUID_SIZE],
    /// The core's semaphore export handle type (0: none).
    pub(crate) semaphore_export: c_int,
    pub(crate) sync: Sync,
}

/// The core's two timelines the context signals, imported into it.
struct Timelines {
    consumed: (*mut VSGPUTimeline, TimelineId),
    ready: (*mut VSGPUTimeline, TimelineId),
}

/// A frame in flight on the GPU path: its ticket and the core's frames it touches.
struct InFlight {
    ticket: Ticket,
    src: *const VSFrame,
    dst: *const VSFrame,
}

/// The filter's state behind its lock (`getFrame` of the host path's `fmParallel` filter
/// runs on several threads at once; the GPU path's `fmParallelRequests` on one at a time, but
/// not always the same one).
struct State {
    ctx: NeuralFrameContext,
    /// Imported allocations by `memoryId`, oldest first.
    memories: VecDeque<(u64, MemoryId)>,
    /// The GPU path: the core's producer semaphores imported, by their handle, oldest first.
    semaphores: VecDeque<(u64, TimelineId)>,
    /// The GPU path: the last value signalled on the two timelines.
    value: u64,
    /// The GPU path: frames in flight, oldest first.
    in_flight: VecDeque<InFlight>,
    /// Allocations and producer timelines imported so far.
    memories_imported: u64,
    producers_imported: u64,
}

// SAFETY: the raw frame pointers are references the filter holds, freed through the core's
// API, which any thread may call.
unsafe impl Send for State {}

/// Where the filter's time went, summed over its frames: logged when it is freed, so a
/// script's log says what a frame costs besides the model.
#[derive(Default)]
struct Stages {
    frames: u64,
    /// `getExportableFrameFilter`, and on the host path `waitGPUFrame`.
    input: Duration,
    /// `newGPUVideoFrame`.
    new_frame: Duration,
    /// Waiting for the filter's lock.
    lock: Duration,
    /// `exportGPUPlane` of the six planes, and imports of new allocations.
    export: Duration,
    /// Placing the planes, the frame's submission and (GPU path) its producers.
    submit: Duration,
    /// The host path's wait for the frame.
    wait: Duration,
}

impl Stages {
    /// The log line, with the filter's `memories` and `producers` imported in all.
    fn summary(&self, memories: u64, producers: u64) -> String {
        let per = |d: Duration| d.as_secs_f64() * 1e3 / self.frames.max(1) as f64;
        format!(
            "nf.Model: {} frames; mean ms a frame: input {:.3}, new frame {:.3}, lock {:.3}, export {:.3}, \
             submit {:.3}, wait {:.3}; {} allocations and {} producer timelines imported",
            self.frames,
            per(self.input),
            per(self.new_frame),
            per(self.lock),
            per(self.export),
            per(self.submit),
            per(self.wait),
            memories,
            producers
        )
    }
}

/// The filter instance.
pub(crate) struct Filter {
    node: *mut VSNode,
    vk: &'static VSVULKANAPI,
    /// The output's format and size.
    out_info: VSVideoInfo,
    plane_format: vk::Format,
    device_uuid: [u8; vk::UUID_SIZE],
    /// The GPU path's timelines; `None`: the host path.
    timelines: Option<Timelines>,
    state: Mutex<State>,
    stages: Mutex<Stages>,
}

// SAFETY: the node and timeline pointers are the core's, used through its thread-safe API;
// the mutable state is behind the lock.
unsafe impl Send for Filter {}
// SAFETY: as above.
unsafe impl std::marker::Sync for Filter {}

impl Filter {
    /// The context for the clip, or a message for `mapSetError`.
    pub(crate) fn new(
        options: &Options<'_>,
        (api, core): (&VSAPI, *mut VSCore),
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
        let mut ctx = builder.build().map_err(|e| format!("Model: {e}"))?;
        let (ow, oh) = ctx.output_size();
        let mut out_info = *in_info;
        out_info.width = ow as c_int;
        out_info.height = oh as c_int;
        let gpu_possible = options.semaphore_export != 0 && ctx.sync_mode() == SyncMode::Gpu;
        let gpu = match options.sync {
            Sync::Host | Sync::Auto => false,
            Sync::Gpu if gpu_possible => true,
            Sync::Gpu => {
                return Err(format!(
                    "Model: sync=\"gpu\" needs semaphores shared between the core and the context, and {}",
                    if options.semaphore_export == 0 {
                        "the core's device does not export them (sync=\"host\" works everywhere)".to_string()
                    } else {
                        format!("the context runs in {:?} sync mode", ctx.sync_mode())
                    }
                ));
            }
        };
        let origin =
            DeviceIdentity { device_uuid: options.device_uuid, driver_uuid: ctx.device_identity().driver_uuid };
        let timelines = if gpu {
            let consumed = own_timeline(vk, core, &mut ctx, origin)?;
            let ready = match own_timeline(vk, core, &mut ctx, origin) {
                Ok(t) => t,
                Err(e) => {
                    // SAFETY: the reference createGPUTimeline gave.
                    unsafe { vs!(vk, freeGPUTimeline)(consumed.0) };
                    return Err(e);
                }
            };
            Some(Timelines { consumed, ready })
        } else {
            None
        };
        let how = format!(
            "nf.Model: frames handed over on the {} ({})",
            if gpu { "GPU: producer pairs waited for and published on the device" } else { "host" },
            match (options.sync, gpu_possible) {
                (Sync::Host, _) => "sync=\"host\"",
                (Sync::Gpu, _) => "sync=\"gpu\"",
                (Sync::Auto, true) =>
                    "sync=\"auto\": measured cheaper than waits on the GPU; sync=\"gpu\" chooses those",
                (Sync::Auto, false) => "sync=\"auto\"; the device cannot share semaphores with the context",
            }
        );
        let how = CString::new(how).unwrap_or_default();
        // SAFETY: the constructor's core; VapourSynth copies the message.
        unsafe { vs!(api, logMessage)(mtInformation, how.as_ptr(), core) };
        Ok(Self {
            node,
            vk,
            out_info,
            plane_format: options.plane_format,
            device_uuid: options.device_uuid,
            timelines,
            state: Mutex::new(State {
                ctx,
                memories: VecDeque::new(),
                semaphores: VecDeque::new(),
                value: 0,
                in_flight: VecDeque::new(),
                memories_imported: 0,
                producers_imported: 0,
            }),
            stages: Mutex::new(Stages::default()),
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

    /// The filter mode: the host path's `getFrame` runs on several threads at once (each
    /// waits for its frame without the lock); the GPU path's waits for nothing, one at a time.
    pub(crate) fn mode(&self) -> c_int {
        if self.timelines.is_some() { fmParallelRequests } else { fmParallel }
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
        let mut t = Instant::now();
        let mut lap = || {
            let now = Instant::now();
            let d = now - t;
            t = now;
            d
        };
        let get = vk.getExportableFrameFilter.ok_or("Model: the core has no getExportableFrameFilter")?;
        // SAFETY: the frame was requested in arInitial; the buffer's size is given.
        let src = unsafe { get(n, self.node, frame_ctx, error.as_mut_ptr(), error.len() as c_int) };
        if src.is_null() {
            return Err(format!("Model: frame {n} is not exportable: {}", c_text(&error)));
        }
        let src = FrameRef { frame: src, api };
        if self.timelines.is_none() {
            let wait = vk.waitGPUFrame.ok_or("Model: the core has no waitGPUFrame")?;
            // SAFETY: a frame we hold.
            if unsafe { wait(src.frame, error.as_mut_ptr(), error.len() as c_int) } != 0 {
                return Err(format!("Model: waiting for frame {n}: {}", c_text(&error)));
            }
        }
        let input_time = lap();
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
        let new_time = lap();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let lock_time = lap();
        // SAFETY: frames we hold, of three planes each.
        let input = unsafe { self.planes(&mut state, api, src.frame) }?;
        // SAFETY: as above.
        let output = unsafe { self.planes(&mut state, api, dst.frame) }?;
        let export_time = lap();
        let account = |submit: Duration, wait: Duration| {
            let mut s = self.stages.lock().unwrap_or_else(|p| p.into_inner());
            s.frames += 1;
            s.input += input_time;
            s.new_frame += new_time;
            s.lock += lock_time;
            s.export += export_time;
            s.submit += submit;
            s.wait += wait;
        };
        if let Some(tl) = &self.timelines {
            // SAFETY: frames we hold, the core's.
            let out = unsafe { self.frame_on_gpu(api, n, core, &mut state, tl, (src, dst), (&input, &output)) }?;
            account(lap(), Duration::ZERO);
            return Ok(out);
        }
        let ctx = &mut state.ctx;
        let in_id = ctx.place_input_planes(&input).map_err(|e| format!("Model: frame {n}'s planes: {e}"))?;
        let out_id = match ctx.place_output_planes(&output) {
            Ok(id) => id,
            Err(err) => {
                let _ = ctx.unregister_input(in_id);
                return Err(format!("Model: the output planes of frame {n}: {err}"));
            }
        };
        let submitted = ctx.submit(Frame::new(in_id, out_id));
        let unregistered = ctx.unregister_input(in_id).and(ctx.unregister_output(out_id));
        let ticket = match submitted.map_err(|e| format!("Model: frame {n}: {e}"))? {
            Submitted::Frame(ticket) => ticket,
            Submitted::Skipped => return Err(format!("Model: frame {n} was skipped")),
        };
        unregistered.map_err(|e| format!("Model: frame {n}: {e}"))?;
        let submit_time = lap();
        drop(state);
        // Waited for without the lock, so that other threads' frames go in meanwhile (the
        // host path is `fmParallel`).
        self.wait_unlocked(n, &ticket)?;
        account(submit_time, lap());
        Ok(dst.release())
    }

    /// The host path's wait for frame `n`: the context polled, its lock taken only for each
    /// poll, until the frame is done or the context's frame timeout has passed.
    fn wait_unlocked(&self, n: c_int, ticket: &Ticket) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.ctx.try_wait(ticket).map_err(|e| format!("Model: frame {n}: {e}"))?.is_some() {
                return Ok(());
            }
            if start.elapsed() >= DEFAULT_FRAME_TIMEOUT {
                // The context's own error, which says what it waited for and how long.
                let last = state.ctx.wait_timeout(ticket, Duration::ZERO);
                return last.map(|_| ()).map_err(|e| format!("Model: frame {n}: {e}"));
            }
            drop(state);
            std::thread::sleep(POLL);
        }
    }

    /// The GPU path of frame `n`: the input planes' producer pairs waited for on the
    /// context's GPU, the core's two timelines signalled by the frame and published as the
    /// planes' producer pairs; the output returned at once, both frames held until done.
    ///
    /// # Safety
    /// `src` and `dst` are frames of the core this filter runs in.
    #[allow(clippy::too_many_arguments)]
    unsafe fn frame_on_gpu(
        &self,
        api: &VSAPI,
        n: c_int,
        core: *mut VSCore,
        state: &mut State,
        t: &Timelines,
        (src, dst): (FrameRef<'_>, FrameRef<'_>),
        (input, output): (&PlanarFrame, &PlanarFrame),
    ) -> Result<*const VSFrame, String> {
        // Frames done since the last call let go of the core's frames.
        // SAFETY: the in-flight frames' references are ours.
        unsafe { retire(api, state, false) }?;
        let get_plane = self.vk.getGPUPlane.ok_or("Model: the core has no getGPUPlane")?;
        let mut waits: Vec<(TimelineId, u64)> = Vec::new();
        for p in 0..3 {
            let mut info = VSVulkanPlaneInfo::default();
            // SAFETY: a live GPU frame of three planes.
            if unsafe { get_plane(src.frame, p, &mut info) } != 0 {
                return Err(format!("Model: frame {n}'s plane {p} is not on the GPU"));
            }
            if info.readySemaphore == vk::Semaphore::null() {
                continue; // ready now
            }
            let id = self.producer(state, core, info.readySemaphore)?;
            if !waits.contains(&(id, info.readyValue)) {
                waits.push((id, info.readyValue));
            }
        }
        let ctx = &mut state.ctx;
        let in_id = ctx.place_input_planes(input).map_err(|e| format!("Model: frame {n}'s planes: {e}"))?;
        let out_id = match ctx.place_output_planes(output) {
            Ok(id) => id,
            Err(err) => {
                let _ = ctx.unregister_input(in_id);
                return Err(format!("Model: the output planes of frame {n}: {err}"));
            }
        };
        let v = state.value + 1;
        let mut frame =
            Frame::new(in_id, out_id).signal_input_consumed(t.consumed.1, v).signal_output_ready(t.ready.1, v);
        for (id, value) in waits {
            frame = frame.wait_for(id, value);
        }
        let submitted = ctx.submit(frame);
        let unregistered = ctx.unregister_input(in_id).and(ctx.unregister_output(out_id));
        let ticket = match submitted.map_err(|e| format!("Model: frame {n}: {e}"))? {
            Submitted::Frame(ticket) => ticket,
            Submitted::Skipped => return Err(format!("Model: frame {n} was skipped")),
        };
        unregistered.map_err(|e| format!("Model: frame {n}: {e}"))?;
        state.value = v;
        // The signals are on their way (submitted): publish them.
        let publish = self.vk.setGPUPlaneProducer.ok_or("Model: the core has no setGPUPlaneProducer")?;
        for p in 0..3 {
            // SAFETY: frames we hold; timelines of the core's that we hold a reference to.
            unsafe {
                publish(dst.frame, p, t.ready.0, v);
                publish(src.frame, p, t.consumed.0, v);
            }
        }
        // Hold both frames until the frame is done; the output goes to the core with a
        // reference of its own.
        // SAFETY: a frame we hold.
        let out = unsafe { vs!(api, addFrameRef)(dst.frame) };
        state.in_flight.push_back(InFlight { ticket, src: src.release(), dst: dst.release() });
        Ok(out)
    }

    /// The context's import of the core's producer semaphore `semaphore`: cached by its
    /// handle, or exported and imported now.
    fn producer(&self, state: &mut State, core: *mut VSCore, semaphore: vk::Semaphore) -> Result<TimelineId, String> {
        let key = ash::vk::Handle::as_raw(semaphore);
        if let Some(&(_, id)) = state.semaphores.iter().find(|(k, _)| *k == key) {
            return Ok(id);
        }
        let origin =
            DeviceIdentity { device_uuid: self.device_uuid, driver_uuid: state.ctx.device_identity().driver_uuid };
        // SAFETY: the core and one of its timelines (a plane we hold names it).
        let fd = unsafe { export_semaphore(self.vk, core, semaphore) }?;
        let import = SemaphoreImport { fd, semaphore_type: vk::SemaphoreType::TIMELINE, origin };
        let id = state.ctx.import_timeline(import).map_err(|e| format!("Model: importing a producer timeline: {e}"))?;
        state.semaphores.push_back((key, id));
        state.producers_imported += 1;
        if state.semaphores.len() > SEMAPHORE_CACHE
            && let Some((_, old)) = state.semaphores.pop_front()
        {
            let _ = state.ctx.unregister_timeline(old); // kept for the frames in flight
        }
        Ok(id)
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
        state.memories_imported += 1;
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
pub(crate) unsafe extern "system" fn free(instance_data: *mut c_void, core: *mut VSCore, vsapi: *const VSAPI) {
    // SAFETY: the Box `filter_create` leaked, freed once.
    let filter = unsafe { Box::from_raw(instance_data.cast::<Filter>()) };
    let node = filter.node;
    // SAFETY: VapourSynth's table.
    if let Some(api) = unsafe { vsapi.as_ref() } {
        let mut state = filter.state.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the in-flight frames' references are ours; every frame is waited for.
        if let Err(e) = unsafe { retire(api, &mut state, true) } {
            let e = CString::new(e).unwrap_or_default();
            // SAFETY: VapourSynth copies the message; the core is the one freeing the filter.
            unsafe { vs!(api, logMessage)(mtWarning, e.as_ptr(), core) };
        }
        let stages = filter.stages.lock().unwrap_or_else(|p| p.into_inner());
        if stages.frames > 0 {
            let text = stages.summary(state.memories_imported, state.producers_imported);
            let text = CString::new(text).unwrap_or_default();
            // SAFETY: VapourSynth copies the message; the core is the one freeing the filter.
            unsafe { vs!(api, logMessage)(mtInformation, text.as_ptr(), core) };
        }
    }
    if let Some(t) = &filter.timelines {
        for tl in [t.consumed.0, t.ready.0] {
            // SAFETY: the references createGPUTimeline gave; planes we published them on hold their own.
            unsafe { vs!(filter.vk, freeGPUTimeline)(tl) };
        }
    }
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

/// Lets go of the core's frames of the GPU path's frames that are done (`all`: waits for
/// every one first).
///
/// # Safety
/// The in-flight frames' pointers are references the filter holds.
unsafe fn retire(api: &VSAPI, state: &mut State, all: bool) -> Result<(), String> {
    while let Some(f) = state.in_flight.front() {
        let done = if all {
            state.ctx.wait(&f.ticket).map(|_| true)
        } else {
            state.ctx.try_wait(&f.ticket).map(|s| s.is_some())
        };
        let done = done.map_err(|e| format!("Model: frame {} failed: {e}", f.ticket.value()))?;
        if !done {
            break;
        }
        if let Some(f) = state.in_flight.pop_front() {
            // SAFETY: our references, freed once.
            unsafe {
                vs!(api, freeFrame)(f.src);
                vs!(api, freeFrame)(f.dst);
            }
        }
    }
    Ok(())
}

/// One of the core's timelines, made for the filter and imported into the context: the
/// core's reference and the context's handle.
fn own_timeline(
    vk: &VSVULKANAPI,
    core: *mut VSCore,
    ctx: &mut NeuralFrameContext,
    origin: DeviceIdentity,
) -> Result<(*mut VSGPUTimeline, TimelineId), String> {
    let mut error = [0 as c_char; 1024];
    // SAFETY: the filter's core; the buffer's size given.
    let tl = unsafe { vs!(vk, createGPUTimeline)(core, error.as_mut_ptr(), error.len() as c_int) };
    if tl.is_null() {
        return Err(format!("Model: no GPU timeline: {}", c_text(&error)));
    }
    // SAFETY: a timeline we hold.
    let semaphore = unsafe { vs!(vk, getGPUTimelineSemaphore)(tl) };
    // SAFETY: the core and its timeline.
    let imported = unsafe { export_semaphore(vk, core, semaphore) }.and_then(|fd| {
        let import = SemaphoreImport { fd, semaphore_type: vk::SemaphoreType::TIMELINE, origin };
        ctx.import_timeline(import).map_err(|e| format!("Model: importing the filter's timeline: {e}"))
    });
    match imported {
        Ok(id) => Ok((tl, id)),
        Err(e) => {
            // SAFETY: the reference createGPUTimeline gave.
            unsafe { vs!(vk, freeGPUTimeline)(tl) };
            Err(e)
        }
    }
}

/// `semaphore` exported by the core as a new descriptor.
///
/// # Safety
/// `semaphore` is one of `core`'s timelines, alive for the call.
unsafe fn export_semaphore(vk: &VSVULKANAPI, core: *mut VSCore, semaphore: vk::Semaphore) -> Result<OwnedFd, String> {
    let mut out = VSVulkanExportedSemaphore::default();
    let mut error = [0 as c_char; 1024];
    let export = vk.exportGPUSemaphore.ok_or("Model: the core has no exportGPUSemaphore")?;
    // SAFETY: the caller's promise; the struct and buffer are ours.
    if unsafe { export(core, semaphore, &mut out, error.as_mut_ptr(), error.len() as c_int) } != 0 {
        return Err(format!("Model: exporting a timeline: {}", c_text(&error)));
    }
    let raw = i32::try_from(out.handle).map_err(|_| format!("Model: a timeline came as descriptor {}", out.handle))?;
    // SAFETY: exportGPUSemaphore hands out a new descriptor, the caller's.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_per_frame() {
        let stages = Stages {
            frames: 4,
            input: Duration::from_millis(2),
            lock: Duration::from_micros(400),
            wait: Duration::from_millis(8),
            ..Stages::default()
        };
        let text = stages.summary(3, 1);
        assert!(text.starts_with("nf.Model: 4 frames;"), "{text}");
        assert!(text.contains("input 0.500, new frame 0.000, lock 0.100"), "{text}");
        assert!(text.contains("wait 2.000; 3 allocations and 1 producer timelines imported"), "{text}");
    }
}
