//! Submitting a frame and retiring it: the Vulkan batches around the engine's
//! run, back-pressure, and the bounded host waits for frames.

use std::time::{Duration, Instant};

use ash::vk;

use crate::context::backend::{CallerWaits, Engine, Run};
use crate::context::plan::{self, PostBatch, Route, Side, Situation};
use crate::context::record::{Place, Recorder, Tensor};
use crate::context::registry::{InputId, OutputId, TimelineId};
use crate::context::ring::{InFlight, Status};
use crate::context::sync::{Frame, FrameStats, Submission, Submitted, Ticket};
use crate::context::{BackPressure, NeuralFrameContext};
use crate::error::{Error, Result};
use crate::vulkan::TimelineSemaphore;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A batch for `vkQueueSubmit`: command buffers, waits and signals on timelines.
#[derive(Default)]
struct Batch {
    cmds: Vec<vk::CommandBuffer>,
    wait: Vec<(vk::Semaphore, u64)>,
    signal: Vec<(vk::Semaphore, u64)>,
}

impl NeuralFrameContext {
    /// Runs the model on `input` into `output` and waits for it: [`submit`](Self::submit)
    /// (blocking when the ring is full, whatever the back-pressure policy) and
    /// [`wait`](Self::wait).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.upload(input, &vec![128; 960 * 540 * 4])?;
    /// let stats = ctx.infer(input, output)?;
    /// println!("{:.1} ms, of which the model {:.1} ms", stats.latency_ms, stats.infer_ms);
    /// let upscaled = ctx.readback(output)?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn infer(&mut self, input: InputId, output: OutputId) -> Result<FrameStats> {
        match self.submit_with(Frame::new(input, output), BackPressure::Block)? {
            Submitted::Frame(t) => self.wait(&t),
            Submitted::Skipped => Err(Error::internal("a blocking submission was skipped")),
        }
    }

    /// Starts a frame without waiting for it. When every slot is busy, the
    /// back-pressure policy decides: block on the oldest frame, or skip this one.
    /// On the CUDA backend nothing here waits on the host: Vulkan and CUDA hand
    /// the frame to each other through timeline semaphores, and the returned
    /// ticket's [`input_consumed`](Ticket::input_consumed) and
    /// [`output_ready`](Ticket::output_ready) are what the caller's GPU waits for.
    ///
    /// ```no_run
    /// use neural_frame::{Frame, InputId, NeuralFrameContext, OutputId, Submitted, TimelineId};
    ///
    /// # fn frame(ctx: &mut NeuralFrameContext, input: InputId, output: OutputId, rendered: TimelineId, n: u64)
    /// # -> neural_frame::Result<()> {
    /// // The renderer signalled `rendered = n` after drawing into `input`.
    /// match ctx.submit(Frame::new(input, output).wait_for(rendered, n))? {
    ///     Submitted::Frame(ticket) => {
    ///         let ready = ticket.output_ready(); // the renderer's next vkQueueSubmit waits for it
    ///         # let _ = ready;
    ///     }
    ///     Submitted::Skipped => {} // BackPressure::Skip and every slot busy: show the last result again
    /// }
    /// # Ok(()) }
    /// ```
    pub fn submit(&mut self, frame: Frame) -> Result<Submitted> {
        self.submit_with(frame, self.back_pressure)
    }

    pub(crate) fn submit_with(&mut self, frame: Frame, policy: BackPressure) -> Result<Submitted> {
        if let Some(why) = &self.poisoned {
            return Err(Error::InvalidArgument(format!(
                "the context cannot take frames any more: {why}; drop it and build a new one"
            )));
        }
        // Fast start: the fused session takes over between two frames once it is ready.
        if self.fused.is_some() {
            self.adopt_fused(None)?;
        }
        let sub = self.resolve(&frame)?;
        let (count, margin) = self
            .frame
            .as_ref()
            .map(|g| (g.layout.tiles.len(), g.tiling.map_or(0, |t| t.overlap)))
            .ok_or_else(|| Error::internal("a context without a frame size"))?;
        let sides = self.sides(&frame, &sub)?;
        if count > 1 && (sides.0.route == Route::Direct || sides.1.route == Route::Direct) {
            return Err(Error::InvalidArgument(
                "a buffer the model reads or writes as it is cannot be tiled: the context runs tiles (register \
                 the frame's input and output as images, or with another layout)"
                    .into(),
            ));
        }
        let submitted = Instant::now();
        let mut last = 0;
        for k in 0..count {
            let tile = self.frame.as_ref().and_then(|g| g.layout.tiles.get(k).copied());
            let tile = tile.ok_or_else(|| Error::internal("a tile the frame does not have"))?;
            let place = Place { index: k, tile, margin };
            // Only the first tile may be skipped: later ones block, as a frame is never cut short.
            let policy = if k == 0 { policy } else { BackPressure::Block };
            match self.submit_tile(&frame, sub.clone(), (place, count, submitted), sides, policy)? {
                Some(n) => last = n,
                None => return Ok(Submitted::Skipped),
            }
        }
        Ok(Submitted::Frame(self.ticket(last)))
    }

    /// Submits one tile of `frame` (the whole frame, untiled) through the next
    /// slot, as its plan says; its timeline value, or `None` when the
    /// back-pressure policy skips it.
    fn submit_tile(
        &mut self,
        frame: &Frame,
        sub: Submission,
        (place, tiles, frame_submitted): (Place, usize, Instant),
        (input, output): (Side, Side),
        policy: BackPressure,
    ) -> Result<Option<u64>> {
        let plan = plan::plan(Situation {
            input,
            output,
            engine: self.res.engine.kind(),
            post_wait: self.tuning.cuda.map_or(crate::context::PostWait::Gpu, |c| c.post_wait),
            caller_wait: sub.wait.is_some(),
            output_free: sub.output_free.is_some(),
            cuda_waits: sub.cuda_waits,
        })
        .map_err(|e| Error::internal(format!("no plan for the frame: {}", e.0)))?;
        if self.ring.must_drain(plan.signallers) {
            self.retire_all()?;
        }
        // Hand Vulkan the post passes whose models are done (post waits on the host).
        self.submit_posts(None)?;
        let i = self.ring.next_slot();
        if !self.retire(i, policy == BackPressure::Block)? {
            self.ring.skip();
            return Ok(None);
        }
        // The CPU backend runs the model inside this call: it waits for the caller's values
        // on the host, bounded, before anything is submitted, so that a value that never
        // arrives leaves nothing half-submitted behind.
        let host_waits =
            [sub.wait.filter(|_| plan.host_waits.caller), sub.output_free.filter(|_| plan.host_waits.output_free)];
        for (sem, value) in host_waits.into_iter().flatten() {
            if !self.wait_raw(sem, value, self.frame_timeout)? {
                return Err(Error::Timeout {
                    what: format!("the caller's timeline reaching {value}"),
                    waited: self.frame_timeout,
                });
            }
        }
        let no = plan::Passes::default();
        let vulkan_pre = plan.first.map_or(no, |f| f.pre);
        let vulkan_post = plan.post.map_or(no, |p| p.post);
        let (pres, posts) = self.record_passes(i, frame, &sub, place, (vulkan_pre, vulkan_post))?;
        // Bind what the model reads and writes this frame.
        {
            let res = &mut *self.res;
            let slot = &mut res.slots[i];
            let tensors = slot.tensors.as_ref().ok_or_else(|| Error::internal("a slot without buffers"))?;
            let input = match &res.registry.input(frame.input)?.direct {
                Some(d) => &d.value,
                None => &tensors.input_value,
            };
            let output = match &res.registry.output(frame.output)?.direct {
                Some(d) => &d.value,
                None => &tensors.output_value,
            };
            tensors.bind(&mut slot.binding, input, output)?;
        }
        let steps = plan.engine;
        let passes = if steps.pre.any() || steps.post.any() {
            Some(self.pass_run(i, frame, &sub, place, (steps.pre, steps.post))?)
        } else {
            None
        };

        let n = self.ring.take_value();
        let t = &self.res.timelines;
        // 1. Vulkan: the pre passes (or none) wait for the caller and signal the model's start.
        if let Some(f) = plan.first {
            let mut first = Batch { cmds: pres, ..Batch::default() };
            if f.host_visibility
                && let Some(cmd) = self.host_visibility
            {
                // The host reads the caller's buffer: make the device's writes visible to it.
                first.cmds.push(cmd);
            }
            first.wait.extend(sub.wait.filter(|_| f.waits.caller));
            first.wait.extend(sub.output_free.filter(|_| f.waits.output_free));
            first.signal.push((t.to_model.raw(), n));
            if f.signal_input_consumed {
                first.signal.push((t.input_consumed.raw(), n));
            }
            self.queue_submit(0, &first, self.res.slots[i].fences[0].raw())?;
        }

        // 2. The engine runs the model (and, on the CUDA route, the passes' kernels).
        let t_enqueue = Instant::now();
        let ran = {
            let res = &mut *self.res;
            // The caller's semaphores the engine waits for itself (CUDA has them).
            let cuda_point = |p: Option<(crate::TimelineId, u64)>, wanted: bool| -> Result<_> {
                match p.filter(|_| wanted) {
                    Some((id, value)) => {
                        let t = res.registry.timeline(id)?;
                        let c =
                            t.cuda_if_any().ok_or_else(|| Error::internal("a CUDA wait on a Vulkan-only timeline"))?;
                        Ok(Some((c, value)))
                    }
                    None => Ok(None),
                }
            };
            let caller = CallerWaits {
                input: cuda_point(sub.cuda_points.0, steps.wait_caller)?,
                output_free: cuda_point(sub.cuda_points.1, steps.wait_output_free.is_some())?,
            };
            let run = Run {
                caller,
                slot: i,
                value: n,
                binding: &mut res.slots[i].binding,
                slot_tensors: input.route != Route::Direct && output.route != Route::Direct,
                steps,
                passes,
            };
            res.engine.run(run, &res.timelines, self.frame_timeout)
        };
        let host_infer_ms = match ran {
            Ok(ms) => ms,
            Err(e) => {
                // Nothing signals this frame's output, and the values after it rise past it.
                // Once the first batch has run and the engine has drained, nothing of the slot
                // is pending: the slot stays free and the context usable. Otherwise work of
                // the slot may still be pending, and the context takes no more frames.
                let first_done = plan.first.is_none()
                    || self.wait_value(self.res.timelines.to_model.vulkan(), n, self.frame_timeout).unwrap_or(false);
                let idle = first_done && self.res.engine.drain(self.frame_timeout).unwrap_or(false);
                if !idle {
                    self.poisoned = Some(format!("frame {n} failed ({e}) with work still pending on the GPU"));
                }
                return Err(e);
            }
        };
        let enqueue_ms = ms(t_enqueue.elapsed());

        // 3. Vulkan: the post passes wait for the model (and for "output free") and
        // signal "output ready". The frame is in the ring before they are submitted, so
        // that a failing submission leaves it tracked (and retried at retirement).
        let post_pending = plan.post.is_some_and(|p| p.deferred);
        let extras =
            sub.extra_inputs.iter().map(|(_, id)| id.0.index).chain(sub.extra_outputs.iter().map(|(_, id)| id.0.index));
        let extras = extras.collect();
        self.ring.occupy(
            InFlight {
                value: n,
                frame_submitted,
                tile: (place.index, tiles),
                input: frame.input.0.index,
                output: frame.output.0.index,
                extras,
                host_infer_ms,
                enqueue_ms,
                post_pending,
                routes: (input.route, output.route),
                post_batch: plan.post,
                post_cmds: posts.clone(),
                output_free: sub.output_free,
                post_fenced: false,
                first_fenced: plan.first.is_some(),
            },
            plan.signallers,
        );
        if let Some(batch) = plan.post.filter(|p| !p.deferred)
            && let Err(e) = self.submit_post(i, posts, n, sub.output_free, batch)
        {
            if let Some(f) = self.ring.slot_mut(i) {
                f.post_pending = true;
            }
            return Err(e);
        }
        Ok(Some(n))
    }

    /// Records (where they are not recorded yet: the slot is free, so nothing of it is
    /// pending) the Vulkan passes of a frame's tile through slot `i` that `pre` and
    /// `post` name: the extra inputs' pre passes before the frame's, the extra
    /// outputs' post passes after the frame's, all in the frame's two batches.
    fn record_passes(
        &mut self,
        i: usize,
        frame: &Frame,
        sub: &Submission,
        place: Place,
        (pre, post): (plan::Passes, plan::Passes),
    ) -> Result<(Vec<vk::CommandBuffer>, Vec<vk::CommandBuffer>)> {
        let generation = self.generation;
        let on_cuda = matches!(self.res.engine, Engine::Cuda(_));
        let (kind, out_kind) = (self.contract.input, self.contract.output);
        let contract = &self.contract;
        let res = &mut *self.res;
        let tensors = res.slots[i].tensors.as_ref().ok_or_else(|| Error::internal("a slot without buffers"))?;
        let recorder = Recorder {
            device: &res.device,
            passes: &res.passes,
            queries: res.queries.as_ref(),
            pool: &res.pool,
            on_cuda,
        };
        let mut pres = Vec::with_capacity(1 + sub.extra_inputs.len());
        if pre.extras {
            for &(k, id) in &sub.extra_inputs {
                let reg = res.registry.registration_mut(id.0)?;
                // SAFETY: slot i is free, so no submission of its command buffers is pending.
                pres.push(unsafe {
                    recorder.pre(i, reg, tensors, (Tensor::Extra(k), contract.extra_inputs[k].kind), place, generation)
                }?);
            }
        }
        if pre.frame {
            let reg = res.registry.registration_mut(frame.input.0)?;
            // SAFETY: as above.
            pres.push(unsafe { recorder.pre(i, reg, tensors, (Tensor::Frame, kind), place, generation) }?);
        }
        let mut posts = Vec::with_capacity(1 + sub.extra_outputs.len());
        if post.frame {
            let reg = res.registry.registration_mut(frame.output.0)?;
            // SAFETY: as above.
            posts.push(unsafe { recorder.post(i, reg, tensors, (Tensor::Frame, out_kind), place, generation) }?);
        }
        if post.extras {
            for &(k, id) in &sub.extra_outputs {
                let reg = res.registry.registration_mut(id.0)?;
                // SAFETY: as above.
                posts.push(unsafe {
                    recorder.post(
                        i,
                        reg,
                        tensors,
                        (Tensor::Extra(k), contract.extra_outputs[k].kind),
                        place,
                        generation,
                    )
                }?);
            }
        }
        Ok((pres, posts))
    }

    pub(crate) fn ticket(&self, value: u64) -> Ticket {
        let t = &self.res.timelines;
        Ticket { context: self.id, value, input_consumed: t.input_consumed.raw(), output_ready: t.output_ready.raw() }
    }

    fn queue_submit(&self, queue: usize, batch: &Batch, fence: vk::Fence) -> Result<()> {
        let wait: Vec<_> = batch.wait.iter().map(|w| w.0).collect();
        let wait_values: Vec<_> = batch.wait.iter().map(|w| w.1).collect();
        let stages = vec![vk::PipelineStageFlags::ALL_COMMANDS; wait.len()];
        let signal: Vec<_> = batch.signal.iter().map(|s| s.0).collect();
        let signal_values: Vec<_> = batch.signal.iter().map(|s| s.1).collect();
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_values)
            .signal_semaphore_values(&signal_values);
        let info = vk::SubmitInfo::default()
            .command_buffers(&batch.cmds)
            .wait_semaphores(&wait)
            .wait_dst_stage_mask(&stages)
            .signal_semaphores(&signal)
            .push_next(&mut timeline);
        // SAFETY: the command buffers are executable and not pending (their slot was free);
        // every semaphore is a live timeline of this device (the context's, or a registered
        // one, which outlives the frames that wait on it); the resources they use live until
        // the frame retires.
        unsafe { self.res.device.submit_to(queue, &[info], fence) }
    }

    /// Submits a frame's recorded post passes for frame `n`, as its plan's post batch
    /// says: behind `model_done = n` (CUDA engine) and the caller's "output free",
    /// signalling `output_ready = n`.
    fn submit_post(
        &mut self,
        i: usize,
        cmds: Vec<vk::CommandBuffer>,
        n: u64,
        output_free: Option<(vk::Semaphore, u64)>,
        plan: PostBatch,
    ) -> Result<()> {
        let t = &self.res.timelines;
        let mut batch = Batch { cmds, ..Batch::default() };
        if plan.wait_model_done {
            batch.wait.push((t.model_done.raw(), n));
        }
        batch.wait.extend(output_free.filter(|_| plan.wait_output_free));
        batch.signal.push((t.output_ready.raw(), n));
        // On its own queue where there is one: a post pass waiting for CUDA then
        // does not hold back the next frame's pre pass (submission order). On the
        // CPU backend it follows the pre pass on queue 0, which orders the alpha.
        self.queue_submit(plan.queue, &batch, self.res.slots[i].fences[1].raw())?;
        if let Some(f) = self.ring.slot_mut(i) {
            f.post_fenced = true;
        }
        Ok(())
    }

    /// Post waits on the host: submits, in frame order, the pending post passes
    /// whose model is done. With `until = Some((v, deadline))`, waits for the
    /// models of frames up to `v` first, until the deadline.
    pub(crate) fn submit_posts(&mut self, until: Option<(u64, Instant)>) -> Result<()> {
        let pending: Vec<(u64, usize)> = self
            .ring
            .in_flight_ordered()
            .into_iter()
            .filter(|(_, i)| self.ring.slot(*i).is_some_and(|f| f.post_pending))
            .collect();
        for (value, i) in pending {
            let deadline = until.filter(|(v, _)| value <= *v).map(|(_, d)| d);
            if !self.model_done(i, value, deadline)? {
                return Ok(()); // later frames wait behind this one: timeline values rise in order
            }
            let (cmds, output_free, batch) = match self.ring.slot(i) {
                Some(InFlight { post_cmds, output_free, post_batch: Some(batch), .. }) if !post_cmds.is_empty() => {
                    (post_cmds.clone(), *output_free, *batch)
                }
                _ => continue,
            };
            self.submit_post(i, cmds, value, output_free, batch)?;
            if let Some(f) = self.ring.slot_mut(i) {
                f.post_pending = false;
            }
        }
        Ok(())
    }

    /// Whether the model of frame `value` (slot `i`) has signalled `model_done`;
    /// with a deadline, waits for it first until then.
    fn model_done(&self, i: usize, value: u64, deadline: Option<Instant>) -> Result<bool> {
        if !matches!(self.res.engine, Engine::Cuda(_)) {
            return Ok(true); // the host ran the model inside submit
        }
        let done = &self.res.timelines.model_done;
        if done.vulkan().value()? >= value {
            return Ok(true);
        }
        let Some(deadline) = deadline else {
            return Ok(false);
        };
        let left = || deadline.saturating_duration_since(Instant::now());
        // The model's end event completes just before the signal: wait for it on
        // the host (CUDA's completion check, a short spin), then for the signal.
        if let Engine::Cuda(e) = &self.res.engine
            && !e.model_finished(i, Some(left()))?
        {
            return Err(Error::Timeout { what: format!("the model of frame {value}"), waited: self.frame_timeout });
        }
        if !self.wait_value(done.vulkan(), value, left())? {
            return Err(Error::Timeout {
                what: format!("CUDA's signal that frame {value}'s model is done"),
                waited: self.frame_timeout,
            });
        }
        Ok(true)
    }

    /// Waits (bounded) on the host for one of the caller's timelines.
    fn wait_raw(&self, semaphore: vk::Semaphore, value: u64, timeout: Duration) -> Result<bool> {
        let semaphores = [semaphore];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        let ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: a registered timeline of the context's device, alive while registered.
        match unsafe { self.res.device.raw().wait_semaphores(&info, ns) } {
            Ok(()) => Ok(true),
            Err(vk::Result::TIMEOUT) => Ok(false),
            Err(result) => Err(Error::Vulkan { call: "vkWaitSemaphores", result }),
        }
    }

    /// Waits (bounded) until `semaphore` reaches `value`: polling with spin waits
    /// on, else in the driver. False on time-out.
    pub(crate) fn wait_value(&self, semaphore: &TimelineSemaphore, value: u64, timeout: Duration) -> Result<bool> {
        if self.tuning.spin_wait {
            let deadline = Instant::now() + timeout;
            while Instant::now() < deadline {
                if semaphore.value()? >= value {
                    return Ok(true);
                }
                std::thread::yield_now();
            }
            return Ok(semaphore.value()? >= value);
        }
        semaphore.wait(value, timeout)
    }

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
