//! The hop buffer → ONNX Runtime → buffer, as a type with two
//! implementations: [`CudaEngine`] (imported device memory, the CUDA
//! provider, GPU-side hand-offs) and [`HostEngine`] (mapped host-visible
//! memory, the CPU provider, host waits). Everything else in the context is
//! the same for both.

pub(crate) mod cuda;
pub(crate) mod faststart;
pub(crate) mod host;
#[cfg(feature = "diagnostics")]
pub(crate) mod interference;
pub(crate) mod passes;

use std::sync::Arc;
use std::time::Duration;

use ort::session::Session;

use crate::context::plan::{EngineKind, EngineSteps};
use crate::cuda::{CudaDevice, ExternalSemaphore};
use crate::error::Result;
use crate::interop::SharedTimeline;
use crate::onnx::{Binding, Placement};

pub(crate) use cuda::CudaEngine;
pub(crate) use host::HostEngine;

/// The context's timelines. Vulkan signals `to_model = n` when frame n's input
/// tensor is ready; the engine signals `model_done = n` when the model is done
/// (CUDA only: the host engine submits the post pass itself afterwards);
/// `input_consumed` and `output_ready` are what the caller waits for, signalled
/// by the passes, or by the engine when the model reads or writes the caller's
/// buffer itself.
pub(crate) struct Timelines {
    pub(crate) to_model: SharedTimeline,
    pub(crate) model_done: SharedTimeline,
    pub(crate) input_consumed: SharedTimeline,
    pub(crate) output_ready: SharedTimeline,
}

/// The caller's semaphores that the engine waits for itself (the plan's
/// `EngineSteps::wait_caller` and `wait_output_free`), with their values.
pub(crate) struct CallerWaits<'a> {
    pub(crate) input: Vec<(&'a ExternalSemaphore, u64)>,
    pub(crate) output_free: Vec<(&'a ExternalSemaphore, u64)>,
}

/// One model run, as the submit path hands it to the engine.
pub(crate) struct Run<'a> {
    /// The caller's semaphores the engine waits for itself.
    pub(crate) caller: CallerWaits<'a>,
    /// The ring slot.
    pub(crate) slot: usize,
    /// The frame's timeline value.
    pub(crate) value: u64,
    /// The binding to run (already bound to the frame's input and output).
    pub(crate) binding: &'a mut Binding,
    /// The binding holds the slot's own tensors (so a captured graph may replay it).
    pub(crate) slot_tensors: bool,
    /// What the engine does, and signals, for this frame (the frame's [`Plan`](crate::context::plan::Plan)).
    pub(crate) steps: EngineSteps,
    /// The CUDA kernels' parameters, where the steps run kernels.
    pub(crate) passes: Option<PassRun>,
}

/// A frame's CUDA passes: the pre kernels in order (the extra inputs', then the
/// frame's) and the post kernels (the frame's, then the extra outputs'). The
/// flag marks the frame's own pre kernel, which writes the frame's alpha; the
/// engine fills every alpha pointer.
pub(crate) struct PassRun {
    pub(crate) pre: Vec<(crate::cuda::PreParams, bool)>,
    pub(crate) post: Vec<crate::cuda::PostParams>,
}

/// The engine of a context.
pub(crate) enum Engine {
    Cuda(CudaEngine),
    Host(HostEngine),
}

impl Engine {
    /// The session.
    pub(crate) fn session(&self) -> &Session {
        match self {
            Engine::Cuda(e) => &e.session,
            Engine::Host(e) => &e.session,
        }
    }

    /// The CUDA device, on the CUDA backend.
    pub(crate) fn cuda_device(&self) -> Option<&Arc<CudaDevice>> {
        match self {
            Engine::Cuda(e) => Some(&e.device),
            Engine::Host(_) => None,
        }
    }

    /// Where the model's tensors live.
    pub(crate) fn placement(&self) -> Placement {
        match self {
            Engine::Cuda(e) => Placement::Cuda(e.device.info().ordinal),
            Engine::Host(_) => Placement::Host,
        }
    }

    /// Hands a frame to the model: on CUDA enqueued behind `to_model = n` on the
    /// stream, on the host waited for and run. Returns the host's model time (NaN on CUDA).
    pub(crate) fn run(&mut self, run: Run<'_>, timelines: &Timelines, timeout: Duration) -> Result<f64> {
        match self {
            Engine::Cuda(e) => e.run(run, timelines).map(|()| f64::NAN),
            Engine::Host(e) => e.run(run, timelines, timeout),
        }
    }

    /// The model's GPU time of the frame `value` that ran in `slot`, and the
    /// stream's idle time before it (CUDA; `None` on the host).
    pub(crate) fn model_times(&mut self, slot: usize, value: u64) -> Result<Option<(f64, f64)>> {
        match self {
            Engine::Cuda(e) => e.model_times(slot, value).map(Some),
            Engine::Host(_) => Ok(None),
        }
    }

    /// The CUDA passes' GPU times of the frame that ran in `slot` (pre, post), each
    /// where it ran as CUDA kernels.
    pub(crate) fn pass_times(&self, slot: usize) -> Result<(Option<f64>, Option<f64>)> {
        match self {
            Engine::Cuda(e) => e.pass_times(slot),
            Engine::Host(_) => Ok((None, None)),
        }
    }

    /// Which engine it is, for a frame's plan.
    pub(crate) fn kind(&self) -> EngineKind {
        match self {
            Engine::Cuda(_) => EngineKind::Cuda,
            Engine::Host(_) => EngineKind::Host,
        }
    }

    /// Whether the engine runs the passes as CUDA kernels.
    pub(crate) fn cuda_passes(&self) -> bool {
        matches!(self, Engine::Cuda(e) if e.passes.is_some())
    }

    /// Forgets what a slot captured for its old buffers (a new frame size).
    pub(crate) fn reset_slot(&mut self, slot: usize) {
        if let Engine::Cuda(e) = self {
            e.reset_slot(slot);
        }
    }

    /// Waits (bounded) for everything the engine enqueued.
    pub(crate) fn drain(&self, timeout: Duration) -> Result<bool> {
        match self {
            Engine::Cuda(e) => e.drain(timeout),
            Engine::Host(_) => Ok(true),
        }
    }
}
