//! The interference probe: the model's GPU time (CUDA events) back to back on
//! one slot's buffers while Vulkan is idle, waiting, or busy with the passes,
//! to find what the ring does to the model (CUDA backend).

use std::sync::Arc;

use ash::vk;
use serde::Serialize;

use crate::context::NeuralFrameContext;
use crate::context::backend::Engine;
use crate::context::passes::{PostParams, PreParams, post_grid, pre_grid};
use crate::context::registry::{InputId, OutputId};
use crate::cuda::{self, CudaDevice};
use crate::error::{Error, Result};
use crate::vulkan::TimelineSemaphore;
use crate::vulkan::command;
use crate::vulkan::compute::{DescriptorSet, Resource};
use crate::vulkan::device::Batch;

/// What runs beside the model in [`NeuralFrameContext::interference`].
///
/// ```
/// use neural_frame::diagnostics::Load;
/// assert_eq!(Load::ALL.first(), Some(&Load::Idle)); // the reference case comes first
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Load {
    /// Nothing: Vulkan idle.
    Idle,
    /// Nothing beside, but each run on the next slot's buffers (and graph), as the ring does.
    RotateSlots,
    /// One Vulkan submission with commands (a pre pass) that waits on the GPU, for
    /// the whole time, on a semaphore CUDA signals after the last run.
    WaitingCommands,
    /// A semaphore signal and wait by the CUDA stream between runs (as each frame has).
    CudaSemaphoreOps,
    /// Per run: a Vulkan submission with no commands that signals an exported semaphore.
    ExternalSignal,
    /// Per run: the pre pass's dispatch alone.
    PrePass,
    /// Per run: the post pass's dispatch alone.
    PostPass,
    /// Per run: the pre pass as the pipeline records it (timestamps, barriers, release to CUDA).
    PipelinePre,
    /// Per run: the post pass as the pipeline records it (timestamps, acquire from CUDA, barriers).
    PipelinePost,
    /// Nothing beside, but each run is enqueued while the run before it executes
    /// (the other loads enqueue every run before the first starts).
    EnqueueAhead,
    /// As `EnqueueAhead`, and each run waits for a Vulkan-signalled semaphore and
    /// signals another one, as a frame in the ring does.
    EnqueueAheadWithHandoff,
}

impl Load {
    /// Every load, in the order measured.
    ///
    /// ```
    /// use neural_frame::diagnostics::Load;
    /// for load in Load::ALL {
    ///     println!("{load:?}");
    /// }
    /// assert_eq!(Load::ALL.len(), 11);
    /// ```
    pub const ALL: [Load; 11] = [
        Load::Idle,
        Load::RotateSlots,
        Load::WaitingCommands,
        Load::CudaSemaphoreOps,
        Load::ExternalSignal,
        Load::PrePass,
        Load::PostPass,
        Load::PipelinePre,
        Load::PipelinePost,
        Load::EnqueueAhead,
        Load::EnqueueAheadWithHandoff,
    ];
    fn needs_two_slots(self) -> bool {
        !matches!(
            self,
            Load::Idle
                | Load::CudaSemaphoreOps
                | Load::ExternalSignal
                | Load::EnqueueAhead
                | Load::EnqueueAheadWithHandoff
        )
    }
}

/// The model's GPU time under one load (median ms).
///
/// ```no_run
/// use neural_frame::NeuralFrameContext;
///
/// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
/// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
/// let probe = ctx.interference(input, output, 50)?;
/// for case in &probe.cases {
///     println!("{:?}: {:.2} ms", case.load, case.model_ms);
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct InterferenceCase {
    /// What ran beside the model.
    pub load: Load,
    /// The model's GPU time (CUDA events, median over the runs).
    pub model_ms: f64,
}

/// The model's GPU time while Vulkan does different things (CUDA events, medians
/// over back-to-back runs on slot 0's buffers): [`NeuralFrameContext::interference`].
///
/// ```no_run
/// use neural_frame::NeuralFrameContext;
/// use neural_frame::diagnostics::Load;
///
/// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
/// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
/// let probe = ctx.interference(input, output, 50)?;
/// let idle = probe.cases.iter().find(|c| c.load == Load::Idle).map_or(f64::NAN, |c| c.model_ms);
/// for case in &probe.cases {
///     println!("{:?}: {:+.2} ms over idle ({} runs)", case.load, case.model_ms - idle, probe.runs);
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct Interference {
    /// Runs per case.
    pub runs: usize,
    /// One entry per load (loads that need a second slot are left out with one slot).
    pub cases: Vec<InterferenceCase>,
}

/// A probe's own semaphores and command buffer.
struct Probe {
    /// Exported: CUDA waits on and signals it.
    shared: TimelineSemaphore,
    cu_shared: cuda::ExternalSemaphore,
    /// Vulkan only: counts probe submissions.
    done: TimelineSemaphore,
    back: TimelineSemaphore,
    cu_back: cuda::ExternalSemaphore,
    cmd: vk::CommandBuffer,
    pre_set: DescriptorSet,
    post_set: DescriptorSet,
}

impl NeuralFrameContext {
    /// The model's GPU time (CUDA events), `runs` times back to back on slot 0's
    /// buffers, under each [`Load`] in turn: what Vulkan (or the CUDA stream's
    /// semaphore operations) do to the model while it runs. Per-run Vulkan work
    /// goes on the last slot's buffers and the given input and output.
    /// The CUDA backend only; `input` and `output` are images.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// let probe = ctx.interference(input, output, 100)?;
    /// println!("{probe:#?}"); // or serialise it: Interference is serde::Serialize
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn interference(&mut self, input: InputId, output: OutputId, runs: usize) -> Result<Interference> {
        let Some(cuda_device) = self.res.engine.cuda_device().cloned() else {
            return Err(Error::InvalidArgument("interference is measured on the CUDA backend".into()));
        };
        if self.res.engine.cuda_passes() {
            return Err(Error::InvalidArgument(
                "interference is measured beside the Vulkan passes, and this context runs its passes as CUDA kernels"
                    .into(),
            ));
        }
        let runs = runs.max(2);
        // Every slot has run (and captured its graph, if on) with this input and output.
        for _ in 0..2 * self.ring.len() {
            self.infer(input, output)?;
        }
        self.retire_all()?;
        let events: Vec<cuda::Event> = (0..=runs).map(|_| cuda::Event::new(&cuda_device)).collect::<Result<_>>()?;
        let mut cases = Vec::new();
        for load in Load::ALL {
            if load.needs_two_slots() && self.ring.len() < 2 {
                continue;
            }
            let probe = self.probe(&cuda_device, input, output)?;
            let model_ms = self.model_under(load, input, output, &events, &probe);
            self.res.device.wait_idle()?;
            // SAFETY: the device is idle; the buffer came from the context's pool.
            unsafe { self.res.pool.free(&[probe.cmd]) };
            cases.push(InterferenceCase { load, model_ms: model_ms? });
        }
        Ok(Interference { runs, cases })
    }

    fn probe(&self, cuda_device: &Arc<CudaDevice>, input: InputId, output: OutputId) -> Result<Probe> {
        let d = &self.res.device;
        let shared = TimelineSemaphore::new(d, 0, true)?;
        let cu_shared = cuda::ExternalSemaphore::import_timeline(cuda_device, shared.export()?)?;
        let back = TimelineSemaphore::new(d, 0, true)?;
        let cu_back = cuda::ExternalSemaphore::import_timeline(cuda_device, back.export()?)?;
        let last = self.ring.len() - 1;
        let t = self.res.slots[last].tensors.as_ref().ok_or_else(|| Error::internal("a slot without buffers"))?;
        let (i, o) = (self.res.registry.input(input)?, self.res.registry.output(output)?);
        let view = |r: &crate::context::registry::Registration| match &r.resource {
            crate::context::registry::Resource::Image { view, layout, .. } => Ok((view.raw(), *layout)),
            _ => Err(Error::InvalidArgument("the interference probe uses images".into())),
        };
        let (iv, il) = view(i)?;
        let (ov, _) = view(o)?;
        let s = t.size;
        // SAFETY: the views and slot buffers outlive the probe (no resize runs meanwhile).
        let pre_set = unsafe {
            self.res.passes.pre(crate::context::passes::Source::Image, self.contract.input.element)?.compute.bind(&[
                Resource::SampledImage(iv, il),
                Resource::StorageBuffer(t.input.buffer().raw(), s.input_bytes),
                Resource::StorageBuffer(t.alpha.raw(), s.alpha_bytes),
            ])
        }?;
        // SAFETY: as above.
        let post_set = unsafe {
            self.res.passes.post(o.target(), self.contract.output.element)?.compute.bind(&[
                Resource::StorageBuffer(t.output.buffer().raw(), s.output_bytes),
                Resource::StorageBuffer(t.alpha.raw(), s.alpha_bytes),
                Resource::StorageImage(ov),
            ])
        }?;
        Ok(Probe {
            shared,
            cu_shared,
            done: TimelineSemaphore::new(d, 0, false)?,
            back,
            cu_back,
            cmd: self.res.pool.allocate()?,
            pre_set,
            post_set,
        })
    }

    /// Records the pre or post pass's dispatch alone into the probe's command buffer.
    fn record_plain(&self, probe: &Probe, pre: bool, output: OutputId) -> Result<()> {
        let last = self.ring.len() - 1;
        let t = self.res.slots[last].tensors.as_ref().ok_or_else(|| Error::internal("a slot without buffers"))?;
        let s = t.size;
        let d = &self.res.device;
        // SAFETY: the probe's command buffer is not pending (its last submission was waited
        // for); the sets name live resources.
        unsafe {
            command::begin(d, probe.cmd)?;
            if pre {
                let pass = self.res.passes.pre(crate::context::passes::Source::Image, self.contract.input.element)?;
                let (grid, row) = pre_grid(d, pass.workgroup, self.contract.input, s.width, s.height)?;
                let p = PreParams::new(self.contract.input, s.width, s.height, row);
                pass.compute.record(probe.cmd, &probe.pre_set, &p.bytes(), grid);
            } else {
                let pass =
                    self.res.passes.post(self.res.registry.output(output)?.target(), self.contract.output.element)?;
                let grid = post_grid(d, pass.workgroup, s.out_width, s.out_height)?;
                let p = PostParams::new(self.contract.output, (s.width, s.height), (s.out_width, s.out_height));
                pass.compute.record(probe.cmd, &probe.post_set, &p.bytes(), grid);
            }
            command::end(d, probe.cmd)
        }
    }

    fn probe_submit(
        &self,
        probe: &Probe,
        cmds: &[vk::CommandBuffer],
        wait: Option<u64>,
        signal_shared: Option<u64>,
        k: u64,
    ) -> Result<()> {
        let mut signal = vec![(probe.done.raw(), k)];
        signal.extend(signal_shared.map(|v| (probe.shared.raw(), v)));
        let wait: Vec<_> =
            wait.map(|v| (probe.shared.raw(), v, vk::PipelineStageFlags::ALL_COMMANDS)).into_iter().collect();
        let queue = if wait.is_empty() { 0 } else { 1 };
        // SAFETY: the command buffers are executable and not pending (each probe submission is
        // waited for before the next); the semaphores are the probe's own.
        unsafe { self.res.device.submit_batch(queue, Batch { cmds, wait: &wait, signal: &signal }, vk::Fence::null()) }
    }

    /// Enqueues model run `k` of a probe under `load`.
    fn enqueue_run(&mut self, load: Load, probe: &Probe, events: &[cuda::Event], k: usize) -> Result<()> {
        let runs = events.len() - 1;
        let v = k as u64 + 1;
        if load == Load::EnqueueAheadWithHandoff {
            // As a frame: Vulkan signals "input ready", CUDA waits for it, runs, signals "output ready".
            self.probe_submit(probe, &[], None, Some(v), v)?;
        }
        let n = self.ring.len();
        let res = &mut *self.res;
        let Engine::Cuda(e) = &mut res.engine else {
            return Err(Error::internal("a probe off the CUDA backend"));
        };
        if load == Load::EnqueueAheadWithHandoff {
            probe.cu_shared.wait(&e.stream, v)?;
        }
        if load == Load::CudaSemaphoreOps {
            probe.cu_shared.signal(&e.stream, 2 * v - 1)?;
            probe.cu_shared.wait(&e.stream, 2 * v - 1)?;
        }
        events[k].record(&e.stream)?;
        let i = if load == Load::RotateSlots { k % n } else { 0 };
        let slot = &mut res.slots[i];
        let tensors = slot.tensors.as_ref().ok_or_else(|| Error::internal("a slot without buffers"))?;
        tensors.bind(&mut slot.binding, &tensors.input_value, &tensors.output_value)?;
        match &e.slots[i].graph {
            Some(graph) => graph.launch(&e.stream)?,
            // SAFETY: the binding holds the slot's own buffers; no frame is in flight.
            None => unsafe { slot.binding.run(&e.session, Some(&e.slots[i].run_options)) }?,
        }
        if load == Load::EnqueueAheadWithHandoff {
            probe.cu_back.signal(&e.stream, v)?;
        }
        if k + 1 == runs {
            events[runs].record(&e.stream)?;
        }
        Ok(())
    }

    fn model_under(
        &mut self,
        load: Load,
        input: InputId,
        output: OutputId,
        events: &[cuda::Event],
        probe: &Probe,
    ) -> Result<f64> {
        let runs = events.len() - 1;
        let timeout = self.frame_timeout;
        let last = self.ring.len() - 1;
        if load == Load::WaitingCommands {
            self.record_plain(probe, true, output)?;
            self.probe_submit(probe, &[probe.cmd], Some(1), None, 1)?;
        }
        let ahead = matches!(load, Load::EnqueueAhead | Load::EnqueueAheadWithHandoff);
        let mut enqueued = Ok(());
        for k in 0..if ahead { runs.min(2) } else { runs } {
            enqueued = self.enqueue_run(load, probe, events, k);
            if enqueued.is_err() {
                break;
            }
        }
        if load == Load::WaitingCommands
            && let Engine::Cuda(e) = &self.res.engine
        {
            probe.cu_shared.signal(&e.stream, 1)?;
        }
        enqueued?;
        if ahead {
            // Each run is handed to CUDA while the one before it executes, as the ring does.
            for k in 2..runs {
                if !events[k - 1].wait_timeout(timeout)? {
                    return Err(Error::Timeout { what: "a probed model run starting".into(), waited: timeout });
                }
                self.enqueue_run(load, probe, events, k)?;
            }
        }
        let per_run = matches!(
            load,
            Load::ExternalSignal | Load::PrePass | Load::PostPass | Load::PipelinePre | Load::PipelinePost
        );
        if per_run {
            let pre_cmd = self.recorded_cmd(true, input, output, last)?;
            let post_cmd = self.recorded_cmd(false, input, output, last)?;
            for (k, e) in events[..runs].iter().enumerate() {
                if !e.wait_timeout(timeout)? {
                    return Err(Error::Timeout { what: "a probed model run starting".into(), waited: timeout });
                }
                let k = k as u64 + 1;
                if !probe.done.wait(k - 1, timeout)? {
                    return Err(Error::Timeout { what: "a probe submission".into(), waited: timeout });
                }
                match load {
                    Load::PrePass => self.record_plain(probe, true, output)?,
                    Load::PostPass => self.record_plain(probe, false, output)?,
                    _ => {}
                }
                let cmds: Vec<vk::CommandBuffer> = match load {
                    Load::PipelinePre => vec![pre_cmd],
                    Load::PipelinePost => vec![post_cmd],
                    Load::ExternalSignal => vec![],
                    _ => vec![probe.cmd],
                };
                self.probe_submit(probe, &cmds, None, (load == Load::ExternalSignal).then_some(k), k)?;
            }
        }
        if !events[runs].wait_timeout(timeout)? {
            return Err(Error::Timeout { what: "the probed model runs".into(), waited: timeout });
        }
        let _ = probe.back.value();
        let mut t = Vec::with_capacity(runs);
        for w in events.windows(2) {
            t.push(w[1].elapsed_since(&w[0])? as f64);
        }
        t.sort_by(f64::total_cmp);
        Ok(t[t.len() / 2])
    }

    fn recorded_cmd(&self, pre: bool, input: InputId, output: OutputId, slot: usize) -> Result<vk::CommandBuffer> {
        let reg = if pre { self.res.registry.input(input)? } else { self.res.registry.output(output)? };
        reg.recorded
            .get(slot)
            .and_then(Option::as_ref)
            .map(|r| r.cmd)
            .ok_or_else(|| Error::internal("the probe's pass is not recorded"))
    }
}
