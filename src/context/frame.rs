//! Submitting a frame and retiring it: the Vulkan batches around the engine's
//! run, back-pressure, and the bounded host waits for frames.

use std::time::{Duration, Instant};

use ash::vk;

use crate::context::backend::{CallerWaits, Engine, Run};
use crate::context::plan::{self, Finish, PostBatch, Route, Side, Situation};
use crate::context::record::{Direction, Place, Recorder, Tensor};
use crate::context::registry::{InputId, OutputId};
use crate::context::ring::{InFlight, Status};
use crate::context::sync::{CallerSignal, Frame, FrameStats, Submission, Submitted, Ticket};
use crate::context::{BackPressure, NeuralFrameContext};
use crate::error::{Error, Result};
use crate::vulkan::TimelineSemaphore;

pub(crate) fn ms(d: Duration) -> f64 {
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
            // The caller's signals go with the frame's last tile: its "input consumed" and
            // "output ready" are the frame's.
            let mut tile_sub = sub.clone();
            if k + 1 < count {
                tile_sub.signals = (Vec::new(), Vec::new());
            }
            match self.submit_tile(&frame, tile_sub, (place, count, submitted), sides, policy)? {
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
            post_wait: self.tuning.cuda.map_or(crate::context::PostWait::Gpu, |c| c.handover.post_wait),
            caller_wait: !sub.wait.is_empty(),
            output_free: !sub.output_free.is_empty(),
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
        let host_waits = sub
            .wait
            .iter()
            .filter(|_| plan.host_waits.caller)
            .chain(sub.output_free.iter().filter(|_| plan.host_waits.output_free))
            .copied();
        for (sem, value) in host_waits {
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
            first.wait.extend(sub.wait.iter().filter(|_| f.waits.caller));
            first.wait.extend(sub.output_free.iter().filter(|_| f.waits.output_free));
            first.signal.push((t.to_model.raw(), n));
            if f.signal_input_consumed {
                first.signal.push((t.input_consumed.raw(), n));
                first.signal.extend(sub.signals.0.iter().map(|&(_, sem, v)| (sem, v)));
            }
            self.queue_submit(0, &first, self.res.slots[i].fences[0].raw())?;
        }

        // 2. The engine runs the model (and, on the CUDA route, the passes' kernels).
        let t_enqueue = Instant::now();
        let ran = {
            let res = &mut *self.res;
            // The caller's semaphores the engine waits for itself (CUDA has them).
            let cuda_point = |ps: &[(crate::TimelineId, u64)], wanted: bool| -> Result<Vec<_>> {
                if !wanted {
                    return Ok(Vec::new());
                }
                ps.iter()
                    .map(|&(id, value)| {
                        let t = res.registry.timeline(id)?;
                        let c =
                            t.cuda_if_any().ok_or_else(|| Error::internal("a CUDA wait on a Vulkan-only timeline"))?;
                        Ok((c, value))
                    })
                    .collect()
            };
            let caller = CallerWaits {
                input: cuda_point(&sub.cuda_points.0, steps.wait_caller)?,
                output_free: cuda_point(&sub.cuda_points.1, steps.wait_output_free.is_some())?,
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
        // The caller's signals that go with what the engine signalled itself.
        let consumed = if steps.input_consumed.is_some() { sub.signals.0.as_slice() } else { &[] };
        let ready = if matches!(steps.done, Finish::OutputReady | Finish::OutputReadyAfterPost) {
            sub.signals.1.as_slice()
        } else {
            &[]
        };
        self.signal_after_engine(n, consumed, ready)?;

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
                output_free: sub.output_free.clone(),
                ready_signals: if plan.post.is_some() {
                    sub.signals.1.iter().map(|&(_, sem, v)| (sem, v)).collect()
                } else {
                    Vec::new()
                },
                post_fenced: false,
                first_fenced: plan.first.is_some(),
            },
            plan.signallers,
        );
        if let Some(batch) = plan.post.filter(|p| !p.deferred)
            && let Err(e) = self.submit_post(i, posts, n, batch)
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
        // The passes in their order in the frame's batches: (direction, registration, tensor, kind).
        let mut jobs = Vec::with_capacity(2 + sub.extra_inputs.len() + sub.extra_outputs.len());
        if pre.extras {
            let extra =
                |&(k, id): &(usize, InputId)| (Direction::Pre, id.0, Tensor::Extra(k), contract.extra_inputs[k].kind);
            jobs.extend(sub.extra_inputs.iter().map(extra));
        }
        if pre.frame {
            jobs.push((Direction::Pre, frame.input.0, Tensor::Frame, kind));
        }
        if post.frame {
            jobs.push((Direction::Post, frame.output.0, Tensor::Frame, out_kind));
        }
        if post.extras {
            let extra = |&(k, id): &(usize, OutputId)| {
                (Direction::Post, id.0, Tensor::Extra(k), contract.extra_outputs[k].kind)
            };
            jobs.extend(sub.extra_outputs.iter().map(extra));
        }
        let (mut pres, mut posts) = (Vec::with_capacity(jobs.len()), Vec::with_capacity(jobs.len()));
        for (direction, id, which, kind) in jobs {
            let reg = res.registry.registration_mut(id)?;
            // SAFETY: slot i is free, so no submission of its command buffers is pending.
            let cmd = unsafe { recorder.record((direction, which, kind), i, reg, tensors, place, generation) }?;
            match direction {
                Direction::Pre => pres.push(cmd),
                Direction::Post => posts.push(cmd),
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
    fn submit_post(&mut self, i: usize, cmds: Vec<vk::CommandBuffer>, n: u64, plan: PostBatch) -> Result<()> {
        let t = &self.res.timelines;
        let mut batch = Batch { cmds, ..Batch::default() };
        if plan.wait_model_done {
            batch.wait.push((t.model_done.raw(), n));
        }
        if let Some(f) = self.ring.slot(i) {
            batch.wait.extend(f.output_free.iter().filter(|_| plan.wait_output_free));
            batch.signal.extend(f.ready_signals.iter().copied());
        }
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

    /// The caller's timelines signalled with what the engine signalled itself for frame
    /// `n`: `consumed` with "input consumed", `ready` with "output ready". The CPU engine
    /// signalled them from the host inside its run: so are these. CUDA signals them on
    /// its streams: a Vulkan batch on the post queue waits for the context's value there
    /// and signals the caller's (CUDA's signal never waits behind a Vulkan submission, so
    /// the batch cannot hold a later one back for ever).
    fn signal_after_engine(&mut self, n: u64, consumed: &[CallerSignal], ready: &[CallerSignal]) -> Result<()> {
        if consumed.is_empty() && ready.is_empty() {
            return Ok(());
        }
        let t = &self.res.timelines;
        if !matches!(self.res.engine, Engine::Cuda(_)) {
            for &(id, _, value) in consumed.iter().chain(ready) {
                self.res.registry.timeline(id)?.vulkan().signal_from_host(value)?;
            }
            return Ok(());
        }
        for (own, theirs) in [(t.input_consumed.raw(), consumed), (t.output_ready.raw(), ready)] {
            if theirs.is_empty() {
                continue;
            }
            let batch = Batch {
                cmds: Vec::new(),
                wait: vec![(own, n)],
                signal: theirs.iter().map(|&(_, sem, v)| (sem, v)).collect(),
            };
            self.queue_submit(1, &batch, vk::Fence::null())?;
        }
        Ok(())
    }

    /// Whether `ticket`'s frame has a post pass that waits for the host to submit it
    /// (`PostWait::Host`): its output-ready signal is not on its way yet.
    pub(crate) fn post_deferred(&self, ticket: &Ticket) -> bool {
        match self.ring.status(ticket.value) {
            Status::InFlight(i) => self.ring.slot(i).is_some_and(|f| f.post_pending),
            _ => false,
        }
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
            let (cmds, batch) = match self.ring.slot(i) {
                Some(InFlight { post_cmds, post_batch: Some(batch), .. }) if !post_cmds.is_empty() => {
                    (post_cmds.clone(), *batch)
                }
                _ => continue,
            };
            self.submit_post(i, cmds, value, batch)?;
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
}
