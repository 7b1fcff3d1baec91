//! Timing a shape's fused plans on the provider's stream, to keep the fastest
//! ([`autotune`]): a child of `cudnn.rs`.

use std::ffi::c_void;

use cudarc::driver::sys;

use super::{ConvActPtrs, FusedPlan};
use crate::cuda::result::check;

/// A start and an end event, destroyed on drop.
struct Events(sys::CUevent, sys::CUevent);

impl Events {
    fn new() -> Result<Self, String> {
        let flags = sys::CUevent_flags::CU_EVENT_DEFAULT as u32;
        let mut start = std::ptr::null_mut();
        // SAFETY: start is a valid out pointer; the caller has the context current.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut start, flags) }).map_err(|e| e.to_string())?;
        let mut end = std::ptr::null_mut();
        // SAFETY: as above.
        let r = unsafe { sys::cuEventCreate(&mut end, flags) };
        if let Err(e) = check("cuEventCreate", r) {
            // SAFETY: start was created above and is destroyed once.
            unsafe { sys::cuEventDestroy_v2(start) };
            return Err(e.to_string());
        }
        Ok(Self(start, end))
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        for ev in [self.0, self.1] {
            // SAFETY: both events were created by Events::new and are destroyed once.
            let r = unsafe { sys::cuEventDestroy_v2(ev) };
            if r != sys::CUresult::CUDA_SUCCESS {
                log::warn!("cuEventDestroy failed: {r:?}");
            }
        }
    }
}

/// Times one run of `plan` with the events: None when the plan fails to execute.
///
/// # Safety
/// As for [`autotune`].
unsafe fn time_once(
    handle: *mut c_void,
    stream: sys::CUstream,
    ev: &Events,
    plan: &FusedPlan,
    ptrs: &ConvActPtrs,
    workspace: *mut c_void,
) -> Result<Result<f64, String>, String> {
    let err = |e: crate::error::Error| e.to_string();
    // SAFETY: a live event and stream of the current context.
    check("cuEventRecord", unsafe { sys::cuEventRecord(ev.0, stream) }).map_err(err)?;
    // SAFETY: the caller vouches for the handle, pointers and workspace.
    if let Err(e) = unsafe { plan.execute(handle, ptrs, workspace) } {
        return Ok(Err(e));
    }
    // SAFETY: as for the first record.
    check("cuEventRecord", unsafe { sys::cuEventRecord(ev.1, stream) }).map_err(err)?;
    // SAFETY: the event was recorded above.
    check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(ev.1) }).map_err(err)?;
    let mut ms = 0f32;
    // SAFETY: both events were recorded and the end one has completed; ms is a valid out pointer.
    check("cuEventElapsedTime", unsafe { sys::cuEventElapsedTime_v2(&mut ms, ev.0, ev.1) }).map_err(err)?;
    Ok(Ok(f64::from(ms)))
}

/// Times each plan on `stream` (the stream the handle is bound to) with CUDA events: one
/// warm-up run each, then the median of `runs` runs; a plan whose execute fails is skipped.
/// Returns the index of the fastest and each plan's median in ms (None for skipped ones).
/// Synchronises with the stream; refuses to run while the stream is capturing.
///
/// # Safety
/// As for [`FusedPlan::execute`], for every plan; `workspace` holds the largest workspace of
/// `plans`; `stream` is a live CUstream of the current context. `ptrs.y` is overwritten.
pub(crate) unsafe fn autotune(
    handle: *mut c_void,
    stream: *mut c_void,
    plans: &[FusedPlan],
    ptrs: &ConvActPtrs,
    workspace: *mut c_void,
    runs: usize,
) -> Result<(usize, Vec<Option<f64>>), String> {
    if plans.is_empty() {
        return Err("ConvAct autotune: no plans".into());
    }
    let stream: sys::CUstream = stream.cast();
    let mut capture = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: stream is live (caller); capture is a valid out pointer.
    check("cuStreamIsCapturing", unsafe { sys::cuStreamIsCapturing(stream, &mut capture) })
        .map_err(|e| e.to_string())?;
    if capture != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
        return Err("ConvAct autotune: the stream is being captured into a CUDA graph; tune before capture".into());
    }
    let events = Events::new()?;
    let mut medians = Vec::with_capacity(plans.len());
    'plans: for (i, plan) in plans.iter().enumerate() {
        let mut samples = Vec::with_capacity(runs.max(1) + 1);
        // The first run is the warm-up, not counted.
        for _ in 0..=runs.max(1) {
            // SAFETY: the caller vouches for the handle, pointers, workspace and stream.
            match unsafe { time_once(handle, stream, &events, plan, ptrs, workspace) }? {
                Ok(ms) => samples.push(ms),
                Err(e) => {
                    log::debug!("ConvAct autotune: plan {i} ({}) skipped: {e}", plan.describe());
                    medians.push(None);
                    continue 'plans;
                }
            }
        }
        let samples = &mut samples[1..];
        samples.sort_by(f64::total_cmp);
        let mid = samples.len() / 2;
        let median = if samples.len() % 2 == 0 { (samples[mid - 1] + samples[mid]) / 2.0 } else { samples[mid] };
        log::debug!("ConvAct autotune: plan {i} ({}): {median:.4} ms", plan.describe());
        medians.push(Some(median));
    }
    let best = medians
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.map(|m| (i, m)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
        .ok_or_else(|| "ConvAct autotune: no plan executed".to_string())?;
    Ok((best, medians))
}
