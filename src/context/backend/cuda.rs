//! The CUDA backend: the model runs on the context's CUDA stream, behind a
//! wait for the Vulkan-signalled `to_model` timeline or for the caller's own
//! semaphores (imported into CUDA), and signals back. Nothing here waits on the host.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ort::session::{RunOptions, Session};

use crate::context::backend::{Run, Timelines};
use crate::context::plan::{Consumed, Finish, FreeWait};
use crate::cuda::{self, CudaDevice};
use crate::error::{Error, Result};

/// What each ring slot keeps on the CUDA side.
pub(crate) struct CudaSlot {
    /// The model run captured as a CUDA graph, for this slot's current buffers.
    pub(crate) graph: Option<cuda::Graph>,
    /// Recorded around the slot's model run.
    pub(crate) events: (cuda::Event, cuda::Event),
    /// Runs on this slot's own buffers since they were made.
    pub(crate) runs: u32,
    /// A capture failed for these buffers: the slot runs without a graph.
    pub(crate) graph_failed: bool,
    /// End-of-run device sync disabled.
    pub(crate) run_options: RunOptions,
    /// CUDA passes: recorded before the pre pass and after the post pass.
    pass_events: Option<(cuda::Event, cuda::Event)>,
    /// CUDA passes: the frame's alpha (one f32 a pixel), from the pre pass to the post pass.
    alpha: Option<cuda::DeviceBuffer>,
    /// Whether the last frame of the slot ran pre and post kernels.
    ran: (bool, bool),
}

/// ONNX Runtime's CUDA provider on the context's stream. Fields in teardown
/// order: the session (it runs on the stream) first, then the slots' graphs and
/// events, the reference event, the stream, the device.
pub(crate) struct CudaEngine {
    pub(crate) session: Session,
    pub(crate) slots: Vec<CudaSlot>,
    /// Recorded once at start: a fixed point on the stream's timeline.
    pub(crate) reference: cuda::Event,
    /// The last retired frame's value and model end (ms after `reference`).
    last_end: Option<(u64, f64)>,
    /// CUDA graphs are wanted (tuning).
    graphs: bool,
    /// `CudaOptions::side_stream_wait`: the wait for `to_model` goes on this stream, and the
    /// model's stream waits for `joined`, recorded after it.
    side: Option<(cuda::Stream, cuda::Event)>,
    /// `CudaOptions::cuda_passes`: the pre and post kernels, and the stream the post
    /// kernels run on (beside the next frame's model).
    pub(crate) passes: Option<(cuda::PassKernels, cuda::Stream)>,
    pub(crate) stream: cuda::Stream,
    pub(crate) device: Arc<CudaDevice>,
}

impl CudaEngine {
    /// Makes the per-slot state for a session that runs on `stream`.
    pub(crate) fn new(
        session: Session,
        stream: cuda::Stream,
        device: Arc<CudaDevice>,
        slots: usize,
        graphs: bool,
        side_stream_wait: bool,
        cuda_passes: bool,
    ) -> Result<Self> {
        let reference = cuda::Event::new(&device)?;
        reference.record(&stream)?;
        let slots = (0..slots)
            .map(|_| {
                let mut run_options = RunOptions::new().map_err(|e| Error::onnx("creating run options", e))?;
                run_options.disable_device_sync().map_err(|e| Error::onnx("disabling the end-of-run sync", e))?;
                Ok(CudaSlot {
                    graph: None,
                    graph_failed: false,
                    events: (cuda::Event::new(&device)?, cuda::Event::new(&device)?),
                    runs: 0,
                    run_options,
                    pass_events: if cuda_passes {
                        Some((cuda::Event::new(&device)?, cuda::Event::new(&device)?))
                    } else {
                        None
                    },
                    alpha: None,
                    ran: (false, false),
                })
            })
            .collect::<Result<_>>()?;
        let side =
            if side_stream_wait { Some((cuda::Stream::new(&device)?, cuda::Event::new(&device)?)) } else { None };
        let passes =
            // The post kernels run beside the next frame's model at the least priority: the
            // model's blocks go first, the post kernel's fill what it leaves.
            if cuda_passes {
                Some((cuda::PassKernels::load(&device)?, cuda::Stream::with_priority(&device, false)?))
            } else {
                None
            };
        Ok(Self { session, slots, reference, last_end: None, graphs, side, passes, stream, device })
    }

    /// Runs `session` on `stream` from now on (fast start's fused session). The ring is
    /// drained: nothing is pending on the old stream. The old session goes first, then
    /// its stream.
    pub(crate) fn replace_session(&mut self, session: Session, stream: cuda::Stream) -> Result<()> {
        self.session = session;
        self.stream = stream;
        self.reference = cuda::Event::new(&self.device)?;
        self.reference.record(&self.stream)?;
        self.last_end = None;
        Ok(())
    }

    /// Enqueues what the frame's plan gives the engine: the wait for `to_model = n`
    /// (where a Vulkan batch signals it), the pre kernels, the model (replayed as a
    /// graph where one is captured), the post kernels on the post stream, and the
    /// signals of what the engine serves.
    pub(crate) fn run(&mut self, mut run: Run<'_>, timelines: &Timelines) -> Result<()> {
        let n = run.value;
        let steps = run.steps;
        let slot = &mut self.slots[run.slot];
        slot.ran = (steps.pre.any(), steps.post.any());
        // What the model's stream waits for: the first batch's `to_model`, and the caller's
        // own semaphores where the engine waits for them itself.
        let to_model = if steps.wait_to_model { Some((timelines.to_model.cuda()?, n)) } else { None };
        let free_first = steps.wait_output_free == Some(FreeWait::BeforeModel);
        let waits: Vec<_> = to_model
            .into_iter()
            .chain(run.caller.input.iter().copied())
            .chain(run.caller.output_free.iter().copied().filter(|_| free_first))
            .collect();
        match &self.side {
            _ if waits.is_empty() => {}
            // The external waits on an idle stream of its own; the model's stream joins it by an event.
            Some((side, joined)) => {
                for (semaphore, value) in waits {
                    semaphore.wait(side, value)?;
                }
                joined.record(side)?;
                self.stream.wait_event(joined)?;
            }
            None => {
                for (semaphore, value) in waits {
                    semaphore.wait(&self.stream, value)?;
                }
            }
        }
        if let Some(p) = run.passes.as_mut() {
            let (kernels, _) =
                self.passes.as_ref().ok_or_else(|| Error::internal("CUDA passes without their kernels"))?;
            let events =
                slot.pass_events.as_ref().ok_or_else(|| Error::internal("CUDA passes without their events"))?;
            // The frame's alpha (one f32 a pixel of the tensor's input size), from the pre
            // kernel to the post kernels.
            let (width, height) = match (p.pre.first(), p.post.first()) {
                (Some((pre, _)), _) => (pre.width, pre.height),
                (None, Some(post)) => (post.width, post.height),
                (None, None) => (0, 0),
            };
            // One word more: the frame's tag where a pixel's alpha is not 1 (passes.cu), so that
            // the post kernels of an opaque frame skip the alpha's interpolation.
            let len = 4 * width as usize * height as usize + 4;
            if slot.alpha.as_ref().is_none_or(|a| a.len() != len) {
                slot.alpha = Some(cuda::DeviceBuffer::new(&self.device, len)?);
            }
            let alpha = slot.alpha.as_ref().map_or(0, |a| a.ptr());
            let tag = (n as u32).max(1);
            let mut frame_pre = false;
            for (pre, frame) in &mut p.pre {
                (pre.alpha, pre.tag) = if *frame { (alpha, tag) } else { (0, 0) };
                frame_pre |= *frame;
            }
            for post in &mut p.post {
                // Without this frame's own pre kernel the alpha is read as it is.
                (post.alpha, post.tag) = (alpha, if frame_pre { tag } else { 0 });
            }
            if steps.pre.any() {
                events.0.record(&self.stream)?;
                for (pre, _) in &p.pre {
                    kernels.pre(&self.stream, pre)?;
                }
            }
        }
        if steps.input_consumed == Some(Consumed::BeforeModel) {
            timelines.input_consumed.cuda()?.signal(&self.stream, n)?;
        }
        slot.events.0.record(&self.stream)?;
        let use_graph = self.graphs && run.slot_tensors && !slot.graph_failed;
        if use_graph && slot.graph.is_none() && slot.runs >= 1 {
            // ONNX Runtime has run once on these buffers (its memory and algorithm
            // choices are settled): capture its next run, then replay that.
            let t = Instant::now();
            let (session, options, binding) = (&self.session, &slot.run_options, &mut *run.binding);
            // SAFETY: the binding holds the slot's own buffers, alive while the graph is.
            match cuda::Graph::capture(&self.stream, || unsafe { binding.run(session, Some(options)) }) {
                Ok(graph) => {
                    log::debug!(
                        "slot {}: model captured as a CUDA graph of {} nodes in {:.3} ms",
                        run.slot,
                        graph.nodes(),
                        t.elapsed().as_secs_f64() * 1e3
                    );
                    slot.graph = Some(graph);
                }
                Err(e) => {
                    // Nothing of the captured run executed: the model runs as it is, this
                    // frame and after (the tuning's cuda_graph asks, the model refuses).
                    log::warn!(
                        "slot {}: the model cannot be captured as a CUDA graph ({e}); it runs without one \
                             (CudaOptions::with_cuda_graph(false), --cuda-graph false, says so up front)",
                        run.slot
                    );
                    slot.graph_failed = true;
                }
            }
        }
        match (&slot.graph, use_graph && !slot.graph_failed) {
            (Some(graph), true) => graph.launch(&self.stream)?,
            _ => {
                // SAFETY: the bound memory (slot buffers or the caller's imported buffer) stays mapped
                // while the frame is in flight; to_model = n orders the run after the input's writes.
                unsafe { run.binding.run(&self.session, Some(&slot.run_options)) }?;
            }
        }
        if run.slot_tensors {
            slot.runs = slot.runs.saturating_add(1);
        }
        slot.events.1.record(&self.stream)?;
        if steps.input_consumed == Some(Consumed::AfterModel) {
            timelines.input_consumed.cuda()?.signal(&self.stream, n)?;
        }
        match steps.done {
            Finish::ModelDone => timelines.model_done.cuda()?.signal(&self.stream, n)?,
            Finish::OutputReady => timelines.output_ready.cuda()?.signal(&self.stream, n)?,
            Finish::OutputReadyAfterPost => {
                // The post kernels and "output ready" go on a stream of their own, behind the
                // model's end: the next frame's pre kernel and model need not wait for them.
                // Values still rise in order (one stream), and the slot's output buffer is
                // not written again before this frame retires.
                let (kernels, post_stream) =
                    self.passes.as_ref().ok_or_else(|| Error::internal("CUDA passes without their kernels"))?;
                let p = run.passes.as_ref().ok_or_else(|| Error::internal("post kernels without parameters"))?;
                post_stream.wait_event(&slot.events.1)?;
                // The caller's "output free", where the engine waits for it itself: only the
                // post kernels write the caller's output, so only they wait.
                if steps.wait_output_free == Some(FreeWait::BeforePost) {
                    for &(semaphore, value) in &run.caller.output_free {
                        semaphore.wait(post_stream, value)?;
                    }
                }
                for post in &p.post {
                    kernels.post(post_stream, post)?;
                }
                if let Some((_, end)) = &slot.pass_events {
                    end.record(post_stream)?;
                }
                timelines.output_ready.cuda()?.signal(post_stream, n)?;
            }
        }
        Ok(())
    }

    /// The model's GPU time for the retired frame `value` of `slot`, and the
    /// stream's idle time since the previous frame's model ended (NaN when the
    /// previous frame is not `value - 1`).
    pub(crate) fn model_times(&mut self, slot: usize, value: u64) -> Result<(f64, f64)> {
        let (start, end) = &self.slots[slot].events;
        complete(end)?;
        let start_ms = start.elapsed_since(&self.reference)? as f64;
        let end_ms = end.elapsed_since(&self.reference)? as f64;
        let gap = match self.last_end {
            Some((v, last)) if v + 1 == value => start_ms - last,
            _ => f64::NAN,
        };
        self.last_end = Some((value, end_ms));
        Ok((end_ms - start_ms, gap))
    }

    /// The CUDA passes' GPU times (pre, post) of the frame that ran in `slot`, each
    /// where it ran as kernels.
    pub(crate) fn pass_times(&self, slot: usize) -> Result<(Option<f64>, Option<f64>)> {
        let s = &self.slots[slot];
        let Some((pre_start, post_end)) = &s.pass_events else {
            return Ok((None, None));
        };
        let (pre_ran, post_ran) = s.ran;
        let pre = if pre_ran {
            complete(&s.events.0)?;
            Some(s.events.0.elapsed_since(pre_start)? as f64)
        } else {
            None
        };
        let post = if post_ran {
            complete(post_end)?;
            Some(post_end.elapsed_since(&s.events.1)? as f64)
        } else {
            None
        };
        Ok((pre, post))
    }

    /// Whether the model of the frame in `slot` has finished (its end event).
    pub(crate) fn model_finished(&self, slot: usize, block: Option<Duration>) -> Result<bool> {
        let end = &self.slots[slot].events.1;
        match block {
            Some(timeout) => end.wait_timeout(timeout),
            None => end.query(),
        }
    }

    /// Forgets the graph and run count of a slot whose buffers are re-made.
    pub(crate) fn reset_slot(&mut self, slot: usize) {
        if let Some(s) = self.slots.get_mut(slot) {
            s.graph = None;
            s.graph_failed = false;
            s.runs = 0;
        }
    }

    /// Waits (bounded) until the stream has run everything enqueued.
    pub(crate) fn drain(&self, timeout: Duration) -> Result<bool> {
        let end = cuda::Event::new(&self.device)?;
        end.record(&self.stream)?;
        if !end.wait_timeout(timeout)? {
            return Ok(false);
        }
        if let Some((_, post_stream)) = &self.passes {
            end.record(post_stream)?;
            return end.wait_timeout(timeout);
        }
        Ok(true)
    }

    /// CUDA passes: waits (bounded, sleeping between polls) for the post kernel of the
    /// frame in `slot`, after which "output ready" follows at once. A blocking wait on a
    /// timeline that CUDA signals wakes about 1.5 ms late on the NVIDIA driver (measured:
    /// README); this one within about 0.1 ms. False on time-out.
    pub(crate) fn wait_post(&self, slot: usize, timeout: Duration) -> Result<bool> {
        match &self.slots[slot].pass_events {
            Some((_, end)) if self.slots[slot].ran.1 => end.wait_sleeping(timeout),
            _ => Ok(true),
        }
    }
}

/// Waits (bounded) until the driver reports `event` complete. The host may see a
/// timeline value that the stream signalled after the event before the driver
/// reports the event itself complete (cuEventElapsedTime then fails with
/// CUDA_ERROR_NOT_READY): the frame is done, only the driver's bookkeeping lags.
fn complete(event: &cuda::Event) -> Result<()> {
    const BOUND: Duration = Duration::from_secs(5);
    if event.wait_timeout(BOUND)? {
        return Ok(());
    }
    Err(Error::Timeout { what: "a CUDA event recorded before a signal the host saw".into(), waited: BOUND })
}
