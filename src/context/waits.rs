//! Waiting for frames and retiring them: the caller's waits on tickets
//! (`wait`, `try_wait`, `wait_input_consumed`, …) and the ring's retirement of
//! finished slots, which every submission and wait goes through.

use std::time::{Duration, Instant};

use crate::context::NeuralFrameContext;
use crate::context::backend::Engine;
use crate::context::frame::ms;
use crate::context::plan::Route;
use crate::context::registry::TimelineId;
use crate::context::ring::Status;
use crate::context::sync::{FrameStats, Ticket};
use crate::error::{Error, Result};

impl NeuralFrameContext {
    /// Waits until `ticket`'s frame is done (its output written) and returns its
    /// times; an [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) after the
    /// builder's frame timeout (the frame stays in flight: wait again later).
    /// Waiting for a frame that already retired returns at once (its times when
    /// it is among the last 64, NaN otherwise).
    ///
    /// ```no_run
    /// use neural_frame::{Frame, NeuralFrameContext, Submitted};
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// if let Submitted::Frame(ticket) = ctx.submit(Frame::new(input, output))? {
    ///     let stats = ctx.wait(&ticket)?; // bounded by ContextBuilder::frame_timeout
    ///     println!("frame {} took {:.2} ms", stats.ticket, stats.latency_ms);
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn wait(&mut self, ticket: &Ticket) -> Result<FrameStats> {
        self.wait_timeout(ticket, self.frame_timeout)
    }

    /// [`wait`](Self::wait) with its own bound.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use neural_frame::{ErrorKind, Frame, NeuralFrameContext, Submitted};
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let Submitted::Frame(ticket) = ctx.submit(Frame::new(input, output))? else { return Ok(()) };
    /// match ctx.wait_timeout(&ticket, Duration::from_millis(5)) {
    ///     Ok(stats) => println!("done: {:.2} ms", stats.latency_ms),
    ///     // Still in flight: do something else, and wait again later.
    ///     Err(e) if e.kind() == ErrorKind::Timeout => println!("not yet"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn wait_timeout(&mut self, ticket: &Ticket, timeout: Duration) -> Result<FrameStats> {
        match self.status(ticket)? {
            Status::InFlight(i) => {
                // Frames retire in order: the ones before this one first, all within one bound.
                let deadline = Instant::now() + timeout;
                for (v, j) in self.ring.in_flight_ordered() {
                    if v > ticket.value {
                        break;
                    }
                    self.retire_within(j, deadline, timeout)?;
                    if j == i {
                        break;
                    }
                }
                match self.ring.status(ticket.value) {
                    Status::Retired(s) => Ok(s.unwrap_or(FrameStats::forgotten(ticket.value))),
                    _ => Err(Error::internal("a waited frame did not retire")),
                }
            }
            Status::Retired(s) => Ok(s.unwrap_or(FrameStats::forgotten(ticket.value))),
            Status::Unknown => Err(Error::internal("a ticket of this context that it never issued")),
        }
    }

    /// Whether `ticket`'s frame is done, without waiting: its times once it is,
    /// `None` while it is in flight.
    ///
    /// ```no_run
    /// use neural_frame::{Frame, NeuralFrameContext, Submitted};
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let Submitted::Frame(ticket) = ctx.submit(Frame::new(input, output))? else { return Ok(()) };
    /// // A render loop polls once per frame instead of blocking.
    /// loop {
    ///     if let Some(stats) = ctx.try_wait(&ticket)? {
    ///         println!("frame {} done", stats.ticket);
    ///         break;
    ///     }
    ///     // ... draw the next frame ...
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn try_wait(&mut self, ticket: &Ticket) -> Result<Option<FrameStats>> {
        self.submit_posts(None)?;
        match self.status(ticket)? {
            Status::InFlight(_) => {
                for (v, j) in self.ring.in_flight_ordered() {
                    if v > ticket.value || !self.retire(j, false)? {
                        break;
                    }
                }
                Ok(match self.ring.status(ticket.value) {
                    Status::Retired(s) => Some(s.unwrap_or(FrameStats::forgotten(ticket.value))),
                    _ => None,
                })
            }
            Status::Retired(s) => Ok(Some(s.unwrap_or(FrameStats::forgotten(ticket.value)))),
            Status::Unknown => Err(Error::internal("a ticket of this context that it never issued")),
        }
    }

    /// Waits (bounded) until `ticket`'s input has been read: from then on the
    /// caller may overwrite it. For host-signalled mode, and for tests.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use neural_frame::{Frame, InputId, NeuralFrameContext, OutputId, Submitted};
    ///
    /// # fn frame(ctx: &mut NeuralFrameContext, input: InputId, output: OutputId) -> neural_frame::Result<()> {
    /// if let Submitted::Frame(ticket) = ctx.submit(Frame::new(input, output))? {
    ///     // SyncMode::Host: the renderer may draw into `input` again once this returns.
    ///     ctx.wait_input_consumed(&ticket, Duration::from_secs(1))?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn wait_input_consumed(&mut self, ticket: &Ticket, timeout: Duration) -> Result<()> {
        self.status(ticket)?;
        let sem = self.res.timelines.input_consumed.vulkan();
        if !self.wait_value(sem, ticket.value, timeout)? {
            return Err(Error::Timeout {
                what: format!("the input of frame {} being read", ticket.value),
                waited: timeout,
            });
        }
        Ok(())
    }

    /// Whether `ticket`'s input has been read, without waiting.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, Ticket};
    ///
    /// # fn frame(ctx: &mut NeuralFrameContext, ticket: Ticket) -> neural_frame::Result<()> {
    /// if ctx.try_input_consumed(&ticket)? {
    ///     // draw the next frame into the input
    /// } else {
    ///     // draw into another input of the ring
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_input_consumed(&mut self, ticket: &Ticket) -> Result<bool> {
        let status = self.status(ticket)?;
        if matches!(status, Status::Retired(_)) {
            return Ok(true);
        }
        Ok(self.res.timelines.input_consumed.vulkan().value()? >= ticket.value)
    }

    /// Signals one of the caller's timelines from the host up to `value` (nothing
    /// when it is there already), for a peer that is gone before it signalled:
    /// frames waiting on it can then run, and retire, and the context can let go
    /// of the peer's resources. What those frames read is whatever the memory held.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, TimelineId};
    ///
    /// # fn peer_gone(ctx: &mut NeuralFrameContext, rendered: TimelineId, last: u64) -> neural_frame::Result<()> {
    /// // The peer promised `rendered = last` to frames already submitted, then disconnected.
    /// ctx.release_timeline(rendered, last)?;
    /// ctx.wait_all()?;
    /// ctx.unregister_timeline(rendered)?;
    /// # Ok(()) }
    /// ```
    pub fn release_timeline(&mut self, timeline: TimelineId, value: u64) -> Result<()> {
        self.res.registry.timeline(timeline)?.vulkan().signal_from_host(value)
    }

    fn status(&self, ticket: &Ticket) -> Result<Status> {
        if ticket.context != self.id {
            return Err(Error::InvalidArgument("the ticket belongs to another NeuralFrameContext".into()));
        }
        Ok(self.ring.status(ticket.value))
    }

    /// Waits for every frame in flight (each bounded by the frame timeout).
    ///
    /// ```no_run
    /// use neural_frame::{Frame, NeuralFrameContext};
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// for _ in 0..ctx.slot_count() {
    ///     ctx.submit(Frame::new(input, output))?;
    /// }
    /// ctx.wait_all()?;
    /// assert_eq!(ctx.in_flight(), 0);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn wait_all(&mut self) -> Result<()> {
        self.retire_all()
    }

    pub(crate) fn retire_all(&mut self) -> Result<()> {
        for (_, i) in self.ring.in_flight_ordered() {
            self.retire(i, true)?;
        }
        Ok(())
    }

    /// Retires slot `i` if its frame is done (or, with `block`, once it is).
    /// Returns whether the slot is free.
    pub(crate) fn retire(&mut self, i: usize, block: bool) -> Result<bool> {
        if block {
            self.retire_within(i, Instant::now() + self.frame_timeout, self.frame_timeout)?;
            return Ok(true);
        }
        let Some(value) = self.ring.slot(i).map(|f| f.value) else {
            return Ok(true);
        };
        self.submit_posts(None)?;
        if self.ring.slot(i).is_some_and(|f| f.post_pending) {
            return Ok(false);
        }
        if self.res.timelines.output_ready.vulkan().value()? < value {
            return Ok(false);
        }
        self.finish(i)?;
        Ok(true)
    }

    /// Retires slot `i` once its frame is done, waiting until `deadline` at most
    /// (`timeout`: the bound it came from, for the error).
    fn retire_within(&mut self, i: usize, deadline: Instant, timeout: Duration) -> Result<()> {
        let Some(value) = self.ring.slot(i).map(|f| f.value) else {
            return Ok(());
        };
        self.submit_posts(Some((value, deadline)))?;
        let left = deadline.saturating_duration_since(Instant::now());
        let kernels_post = self.ring.slot(i).is_some_and(|f| f.routes.1 == Route::Cuda);
        if let Engine::Cuda(e) = &self.res.engine
            && kernels_post
            && !self.tuning.spin_wait
        {
            // The host's sleeping wait for a CUDA-signalled timeline wakes late: wait for
            // the post kernel's event (polled, sleeping) first; the signal follows it.
            e.wait_post(i, left)?;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if !self.wait_value(self.res.timelines.output_ready.vulkan(), value, left)? {
            return Err(Error::Timeout {
                what: format!(
                    "frame {value} (output ready = {}, input consumed = {})",
                    self.res.timelines.output_ready.vulkan().value()?,
                    self.res.timelines.input_consumed.vulkan().value()?
                ),
                waited: timeout,
            });
        }
        self.finish(i)
    }

    /// Frees slot `i`, whose frame is done, and records its times.
    fn finish(&mut self, i: usize) -> Result<()> {
        let Some(f) = self.ring.slot(i).cloned() else {
            return Ok(());
        };
        // "Output ready" implies that the frame's batches are done: the first batch signalled
        // before the model ran, the post pass signalled "output ready" itself. Their fences
        // say so to the host, and to the validation layer, which cannot follow the signals
        // that CUDA makes, before the slot's command buffers are submitted again or freed.
        let fences = &self.res.slots[i].fences;
        let fenced = [f.first_fenced, f.post_fenced];
        for fence in fences.iter().zip(fenced).filter_map(|(fence, fenced)| fenced.then_some(fence)) {
            if !fence.wait_and_reset(self.frame_timeout)? {
                return Err(Error::internal(format!("frame {} is done but a batch of it is not", f.value)));
            }
        }
        let period = self.res.device.timestamp_period_ns() as f64 * 1e-6;
        let pair = |first: u32, ran: bool| -> Result<f64> {
            let ticks = match (&self.res.queries, ran) {
                (Some(q), true) => q.read(first, 2)?,
                _ => None,
            };
            Ok(ticks.map_or(f64::NAN, |t| t[1].wrapping_sub(t[0]) as f64 * period))
        };
        let (cuda_pre, cuda_post) = self.res.engine.pass_times(i)?;
        let pre_ms = match cuda_pre {
            Some(ms) => ms,
            None => pair(4 * i as u32, f.routes.0 == Route::Vulkan)?,
        };
        let post_ms = match cuda_post {
            Some(ms) => ms,
            None => pair(4 * i as u32 + 2, f.routes.1 == Route::Vulkan)?,
        };
        let (infer_ms, gpu_gap_ms) = self.res.engine.model_times(i, f.value)?.unwrap_or((f.host_infer_ms, f64::NAN));
        let stats = FrameStats {
            ticket: f.value,
            pre_ms,
            infer_ms,
            post_ms,
            latency_ms: ms(f.frame_submitted.elapsed()),
            enqueue_ms: f.enqueue_ms,
            gpu_gap_ms,
            slot: i,
            pre_pass: f.routes.0 != Route::Direct,
            post_pass: f.routes.1 != Route::Direct,
            cuda_passes: f.routes.0 == Route::Cuda || f.routes.1 == Route::Cuda,
            tiles: f.tile.1 as u32,
        };
        self.ring.retire(i, stats);
        self.free_buried();
        Ok(())
    }
}
