//! Probes for the benchmark and hooks for tests (cargo feature `diagnostics`,
//! on by default): the model alone on a slot's buffers, a host-polled timeline
//! of one frame, the model's GPU time under Vulkan load, the host paths (the
//! competent one through pinned staging, and the naive round trip), and the
//! slots' tensors read and poisoned.

mod host;
mod pinned;

pub use crate::context::backend::interference::{Interference, InterferenceCase, Load};
pub use host::HostParts;
pub use pinned::HostPinned;

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::context::BackPressure;
use crate::context::NeuralFrameContext;
use crate::context::backend::Engine;
use crate::context::registry::{InputId, OutputId};
use crate::context::sync::{Frame, FrameStats, Submitted};
use crate::error::{Error, Result};
use crate::vulkan::transfer;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Where one synchronous frame's time goes: when the host saw each step,
/// in ms after `submit` began (spin-polled: microsecond resolution).
///
/// ```no_run
/// use neural_frame::NeuralFrameContext;
///
/// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
/// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
/// let (_, t) = ctx.trace_frame(input, output)?;
/// println!("to CUDA {:.3} ms, model {:.3} ms, back {:.3} ms",
///     t.model_start_ms - t.input_ready_ms, t.model_end_ms - t.model_start_ms, t.frame_done_ms - t.model_end_ms);
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct FrameTrace {
    /// `submit` returned.
    pub submitted_ms: f64,
    /// The pre pass signalled that the model may start.
    pub input_ready_ms: f64,
    /// The model started on the CUDA stream (its start event completed).
    pub model_start_ms: f64,
    /// The model ended (its end event completed).
    pub model_end_ms: f64,
    /// CUDA signalled that the model is done.
    pub output_ready_ms: f64,
    /// The post pass signalled "output ready" to the caller.
    pub frame_done_ms: f64,
}

impl NeuralFrameContext {
    /// Runs ONNX Runtime alone on slot 0's own buffers (no pre or post pass, no
    /// hand-off) and waits for it: the floor of the pipeline. With CUDA graphs on
    /// and slot 0's graph captured, the graph is what runs. Milliseconds, host clock.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// let floor = ctx.run_model_only()?;
    /// let frame = ctx.infer(input, output)?;
    /// println!("the pipeline adds {:.2} ms to the model's {floor:.2} ms", frame.latency_ms - floor);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn run_model_only(&mut self) -> Result<f64> {
        self.retire_all()?;
        let res = &mut *self.res;
        let slot = &mut res.slots[0];
        let tensors = slot.tensors.as_ref().ok_or_else(|| Error::internal("a slot without buffers"))?;
        tensors.bind(&mut slot.binding, &tensors.input_value, &tensors.output_value)?;
        let t = Instant::now();
        match &mut res.engine {
            Engine::Cuda(e) => {
                match &e.slots[0].graph {
                    Some(graph) => graph.launch(&e.stream)?,
                    // SAFETY: the binding holds slot 0's buffers; no frame is in flight.
                    None => unsafe { slot.binding.run(&e.session, Some(&e.slots[0].run_options)) }?,
                }
                e.stream.synchronize()?;
            }
            // SAFETY: as above.
            Engine::Host(h) => unsafe { slot.binding.run(&h.session, None) }?,
        }
        Ok(ms(t.elapsed()))
    }

    /// Runs one frame like [`infer`](Self::infer) and spin-polls the host for when
    /// each step of its hand-off happens (CUDA backend).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// let (stats, trace) = ctx.trace_frame(input, output)?;
    /// let (submit, done) = (trace.submitted_ms, trace.frame_done_ms);
    /// println!("frame {}: submit took {submit:.3} ms, done at {done:.3} ms", stats.ticket);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn trace_frame(&mut self, input: InputId, output: OutputId) -> Result<(FrameStats, FrameTrace)> {
        if !matches!(self.res.engine, Engine::Cuda(_)) {
            return Err(Error::InvalidArgument("frames are traced on the CUDA backend".into()));
        }
        let t0 = Instant::now();
        let Submitted::Frame(ticket) = self.submit_with(Frame::new(input, output), BackPressure::Block)? else {
            return Err(Error::internal("a blocking submission was skipped"));
        };
        let mut trace = FrameTrace { submitted_ms: ms(t0.elapsed()), ..FrameTrace::default() };
        let [mut a, mut b, mut c, mut d, mut e] = [f64::NAN; 5];
        let i = (self.ring.next_slot() + self.ring.len() - 1) % self.ring.len();
        let n = ticket.value;
        while t0.elapsed() < self.frame_timeout {
            let now = ms(t0.elapsed());
            let t = &self.res.timelines;
            let Engine::Cuda(engine) = &self.res.engine else { break };
            let (start, end) = &engine.slots[i].events;
            if a.is_nan() && t.to_model.vulkan().value()? >= n {
                a = now;
            }
            if b.is_nan() && start.query()? {
                b = now;
            }
            if c.is_nan() && end.query()? {
                c = now;
            }
            if d.is_nan() && t.model_done.vulkan().value()? >= n {
                d = now;
                self.submit_posts(None)?;
            }
            if self.res.timelines.output_ready.vulkan().value()? >= n {
                e = now;
                break;
            }
        }
        (trace.input_ready_ms, trace.model_start_ms, trace.model_end_ms) = (a, b, c);
        (trace.output_ready_ms, trace.frame_done_ms) = (d, e);
        Ok((self.wait(&ticket)?, trace))
    }

    fn last_slot_tensors(&self) -> Result<&crate::context::slots::SlotTensors> {
        let i = (self.ring.next_slot() + self.ring.len() - 1) % self.ring.len();
        self.res.slots[i].tensors.as_ref().ok_or_else(|| Error::internal("a slot without buffers"))
    }

    /// The model's input tensor as the last frame's slot holds it (tests, debugging).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.infer(input, output)?;
    /// let tensor = ctx.read_input_tensor()?; // bytes, in the contract's input layout
    /// let (w, h) = ctx.frame_size();
    /// assert_eq!(tensor.len() as u64, ctx.contract().input.bytes(w, h));
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn read_input_tensor(&mut self) -> Result<Vec<u8>> {
        self.retire_all()?;
        let t = self.last_slot_tensors()?;
        transfer::readback_buffer(t.input.buffer(), self.contract.input.bytes(t.size.width, t.size.height) as usize)
    }

    /// The model's output tensor as the last frame's slot holds it, read through Vulkan (tests, debugging).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.infer(input, output)?;
    /// let tensor = ctx.read_output_tensor()?;
    /// let (w, h) = ctx.output_size();
    /// assert_eq!(tensor.len() as u64, ctx.contract().output.bytes(w, h));
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn read_output_tensor(&mut self) -> Result<Vec<u8>> {
        self.retire_all()?;
        let t = self.last_slot_tensors()?;
        let bytes = self.contract.output.bytes(t.size.out_width, t.size.out_height) as usize;
        transfer::readback_buffer(t.output.buffer(), bytes)
    }

    /// Fills every slot's output tensor memory with a 32-bit pattern (poisoning, in tests).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.poison_output_tensor(0xDEAD_BEEF)?;
    /// ctx.infer(input, output)?;
    /// let tensor = ctx.read_output_tensor()?;
    /// assert!(!tensor.chunks_exact(4).any(|w| w == 0xDEAD_BEEFu32.to_ne_bytes()), "the model left words unwritten");
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn poison_output_tensor(&mut self, word: u32) -> Result<()> {
        self.retire_all()?;
        for slot in &self.res.slots {
            if let Some(t) = &slot.tensors {
                transfer::fill_buffer(t.output.buffer(), word)?;
            }
        }
        Ok(())
    }

    /// Fills every slot's input and output tensor memory with a 32-bit pattern,
    /// so that a test can show that a frame never touched them.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// ctx.poison_slot_tensors(0x5A5A_5A5A)?;
    /// // ... a frame whose model reads and writes the caller's buffers itself ...
    /// for (input, output) in ctx.slot_tensors()? {
    ///     assert!(input.iter().chain(&output).all(|&b| b == 0x5A), "a slot's tensor was touched");
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn poison_slot_tensors(&mut self, word: u32) -> Result<()> {
        self.retire_all()?;
        for slot in &self.res.slots {
            if let Some(t) = &slot.tensors {
                transfer::fill_buffer(t.input.buffer(), word)?;
                transfer::fill_buffer(t.output.buffer(), word)?;
            }
        }
        Ok(())
    }

    /// Every slot's input and output tensor bytes (tests), one pair per slot.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.infer(input, output)?;
    /// let tensors = ctx.slot_tensors()?;
    /// assert_eq!(tensors.len(), ctx.slot_count());
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn slot_tensors(&mut self) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.retire_all()?;
        let mut out = Vec::new();
        for slot in &self.res.slots {
            if let Some(t) = &slot.tensors {
                out.push((
                    transfer::readback_buffer(t.input.buffer(), t.input.buffer().len() as usize)?,
                    transfer::readback_buffer(t.output.buffer(), t.output.buffer().len() as usize)?,
                ));
            }
        }
        Ok(out)
    }
}
