//! The CUDA backend: the model runs on the context's CUDA stream, behind a
//! wait for the Vulkan-signalled `to_model` timeline, and signals back. Nothing
//! here waits on the host.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ort::session::{RunOptions, Session};

use crate::context::backend::{Run, Timelines};
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
    /// `Tuning::side_stream_wait`: the wait for `to_model` goes on this stream, and the
    /// model's stream waits for `joined`, recorded after it.
    side: Option<(cuda::Stream, cuda::Event)>,
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
                })
            })
            .collect::<Result<_>>()?;
        let side =
            if side_stream_wait { Some((cuda::Stream::new(&device)?, cuda::Event::new(&device)?)) } else { None };
        Ok(Self { session, slots, reference, last_end: None, graphs, side, stream, device })
    }

    /// Enqueues: wait for `to_model = n`, the model (replayed as a graph where
    /// one is captured), and the signals of what the model served.
    pub(crate) fn run(&mut self, run: Run<'_>, timelines: &Timelines) -> Result<()> {
        let n = run.value;
        let slot = &mut self.slots[run.slot];
        match &self.side {
            // The external wait on an idle stream of its own; the model's stream joins it by an event.
            Some((side, joined)) => {
                timelines.to_model.cuda()?.wait(side, n)?;
                joined.record(side)?;
                self.stream.wait_event(joined)?;
            }
            None => timelines.to_model.cuda()?.wait(&self.stream, n)?,
        }
        slot.events.0.record(&self.stream)?;
        let use_graph = self.graphs && run.slot_tensors;
        if use_graph && slot.graph.is_none() && slot.runs >= 1 {
            // ONNX Runtime has run once on these buffers (its memory and algorithm
            // choices are settled): capture its next run, then replay that.
            let t = Instant::now();
            let (session, options, binding) = (&self.session, &slot.run_options, &mut *run.binding);
            // SAFETY: the binding holds the slot's own buffers, alive while the graph is.
            let graph =
                cuda::Graph::capture(&self.stream, || unsafe { binding.run(session, Some(options)) }).map_err(|e| {
                    Error::Cuda {
                        call: "cuStreamBeginCapture",
                        code: 0,
                        name: "capture failed".into(),
                        context: format!(": capturing the model as a CUDA graph: {e}; run without CUDA graphs"),
                    }
                })?;
            log::debug!(
                "slot {}: model captured as a CUDA graph of {} nodes in {:.3} ms",
                run.slot,
                graph.nodes(),
                t.elapsed().as_secs_f64() * 1e3
            );
            slot.graph = Some(graph);
        }
        match (&slot.graph, use_graph) {
            (Some(graph), true) => graph.launch(&self.stream)?,
            // SAFETY: the bound memory (slot buffers or the caller's imported buffer) stays mapped
            // while the frame is in flight; to_model = n orders the run after the input's writes.
            _ => unsafe { run.binding.run(&self.session, Some(&slot.run_options)) }?,
        }
        if run.slot_tensors {
            slot.runs = slot.runs.saturating_add(1);
        }
        slot.events.1.record(&self.stream)?;
        if run.direct_input {
            timelines.input_consumed.cuda()?.signal(&self.stream, n)?;
        }
        if run.direct_output {
            timelines.output_ready.cuda()?.signal(&self.stream, n)?;
        } else {
            timelines.model_done.cuda()?.signal(&self.stream, n)?;
        }
        Ok(())
    }

    /// The model's GPU time for the retired frame `value` of `slot`, and the
    /// stream's idle time since the previous frame's model ended (NaN when the
    /// previous frame is not `value - 1`).
    pub(crate) fn model_times(&mut self, slot: usize, value: u64) -> Result<(f64, f64)> {
        let (start, end) = &self.slots[slot].events;
        let start_ms = start.elapsed_since(&self.reference)? as f64;
        let end_ms = end.elapsed_since(&self.reference)? as f64;
        let gap = match self.last_end {
            Some((v, last)) if v + 1 == value => start_ms - last,
            _ => f64::NAN,
        };
        self.last_end = Some((value, end_ms));
        Ok((end_ms - start_ms, gap))
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
        end.wait_timeout(timeout)
    }
}
