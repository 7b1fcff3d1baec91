//! "host pinned": the competent host path the benchmark compares with. The
//! frame starts and ends in host memory, as it does for a renderer that reads
//! its frames back (or a Python user with PyTorch): persistent pinned staging
//! allocated once, one GPU copy each way, the conversion on the GPU by the
//! same pre and post passes, the same model run, and one host wait per frame.
//! It computes the same image as the zero-copy path (the benchmark checks).

use ash::vk;

use crate::context::NeuralFrameContext;
use crate::context::registry::{Entry, InputId, OutputId, Resource, TimelineId};
use crate::context::sync::{Frame, FrameStats, Submitted, SyncMode};
use crate::error::{Error, Result};
use crate::interop::SharedTimeline;
use crate::vulkan::sync::TimelineSemaphore;
use crate::vulkan::transfer::StagedImageCopies;

/// A host-pinned lane: an input and an output image of the context's, their
/// persistent staging, and the timeline its uploads signal. Made by
/// [`NeuralFrameContext::host_pinned`], closed by [`NeuralFrameContext::close_host_pinned`].
///
/// ```no_run
/// # let mut ctx = neural_frame::NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// let mut lane = ctx.host_pinned()?;
/// lane.input_mut()?.fill(128); // the host frame, written in place
/// let stats = ctx.host_pinned_frame(&mut lane)?;
/// let upscaled: &[u8] = lane.output()?; // 3840×2160 RGBA8, in host memory
/// # let _ = (stats, upscaled);
/// ctx.close_host_pinned(lane)?;
/// # Ok::<(), neural_frame::Error>(())
/// ```
pub struct HostPinned {
    copies: StagedImageCopies,
    uploaded: TimelineId,
    value: u64,
    input: InputId,
    output: OutputId,
}

impl HostPinned {
    /// The host frame (tightly packed RGBA8 at the frame size) that the next frame uploads.
    ///
    /// ```no_run
    /// # let mut ctx = neural_frame::NeuralFrameContext::builder("models/upscale.onnx").frame_size(8, 8).build()?;
    /// let mut lane = ctx.host_pinned()?;
    /// assert_eq!(lane.input_mut()?.len(), 8 * 8 * 4);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn input_mut(&mut self) -> Result<&mut [u8]> {
        self.copies.upload_mut()
    }

    /// The last frame's result (tightly packed RGBA8 at the output size), in host memory.
    ///
    /// ```no_run
    /// # let mut ctx = neural_frame::NeuralFrameContext::builder("models/upscale.onnx").frame_size(8, 8).build()?;
    /// # let mut lane = ctx.host_pinned()?;
    /// ctx.host_pinned_frame(&mut lane)?;
    /// assert_eq!(lane.output()?.len(), 32 * 32 * 4);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn output(&self) -> Result<&[u8]> {
        self.copies.download()
    }
}

fn image(resource: &Resource) -> Result<&crate::vulkan::memory::Image> {
    match resource {
        Resource::Image { owned: Some(image), .. } => Ok(image),
        _ => Err(Error::internal("a created image without its image")),
    }
}

impl NeuralFrameContext {
    /// Sets up a host-pinned lane: an RGBA8 input and output image of the context's,
    /// pinned staging for each, the copies recorded once.
    ///
    /// ```no_run
    /// # let mut ctx = neural_frame::NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let lane = ctx.host_pinned()?;
    /// ctx.close_host_pinned(lane)?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn host_pinned(&mut self) -> Result<HostPinned> {
        let input = self.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
        let output = self.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
        let timeline = TimelineSemaphore::new(&self.res.device, 0, false)?;
        let uploaded = TimelineId(self.res.registry.insert(Entry::Timeline(SharedTimeline::vulkan_only(timeline))));
        let input_image = image(&self.res.registry.input(input)?.resource)?;
        let output_image = image(&self.res.registry.output(output)?.resource)?;
        // SAFETY: both are the context's own images of its device, in GENERAL layout between
        // operations; they stay registered (alive) until close_host_pinned, which drops the copies first.
        let copies = unsafe { StagedImageCopies::new(&self.res.device, input_image, output_image) }?;
        Ok(HostPinned { copies, uploaded, value: 0, input, output })
    }

    /// One host frame: the staged input copied into the input image, the frame (pre
    /// pass, model, post pass) waiting on the GPU for that copy (on the host in
    /// [`SyncMode::Host`]), the output image
    /// copied into staging once the frame's "output ready" is reached (all three
    /// queued before the host waits), then the host waits for the frame and the
    /// copy. Frames in flight are retired first.
    ///
    /// ```no_run
    /// # let mut ctx = neural_frame::NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let mut lane = ctx.host_pinned()?;
    /// let t = std::time::Instant::now();
    /// let stats = ctx.host_pinned_frame(&mut lane)?;
    /// println!("host frame in {:?}, model {:.2} ms", t.elapsed(), stats.infer_ms);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn host_pinned_frame(&mut self, lane: &mut HostPinned) -> Result<FrameStats> {
        self.retire_all()?;
        lane.value += 1;
        let uploaded = self.res.registry.timeline(lane.uploaded)?.raw();
        // SAFETY: the lane's own timeline, below lane.value; the last frame's copies finished
        // (host_pinned_frame waits for them before returning, and frames were retired above).
        unsafe { lane.copies.submit_in(uploaded, lane.value) }?;
        let frame = Frame::new(lane.input, lane.output);
        let frame = if self.sync_mode == SyncMode::Host {
            // Host-signalled mode takes no GPU waits: the upload's completion comes through the host.
            if !self.res.registry.timeline(lane.uploaded)?.vulkan().wait(lane.value, self.frame_timeout)? {
                return Err(Error::Timeout { what: "a host-pinned frame's upload".into(), waited: self.frame_timeout });
            }
            frame
        } else {
            frame.wait_for(lane.uploaded, lane.value)
        };
        let ticket = match self.submit(frame)? {
            Submitted::Frame(ticket) => ticket,
            Submitted::Skipped => return Err(Error::internal("a host-pinned frame was skipped after retiring all")),
        };
        let ready = ticket.output_ready();
        // SAFETY: the context's output timeline, which reaches the ticket's value once the post pass wrote the output.
        unsafe { lane.copies.submit_out(ready.semaphore, ready.value) }?;
        // The copy-out is queued behind the frame on the GPU; `wait` retires the frame (and with
        // PostWait::Host is what submits its post pass, so it must come before the copy's fence).
        let stats = self.wait(&ticket)?;
        if !lane.copies.wait_out(self.frame_timeout)? {
            return Err(Error::Timeout { what: "a host-pinned frame's read-back".into(), waited: self.frame_timeout });
        }
        Ok(stats)
    }

    /// Releases a host-pinned lane: its copies, images and timeline.
    ///
    /// ```no_run
    /// # let mut ctx = neural_frame::NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let lane = ctx.host_pinned()?;
    /// ctx.close_host_pinned(lane)?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn close_host_pinned(&mut self, lane: HostPinned) -> Result<()> {
        self.retire_all()?;
        let HostPinned { copies, uploaded, input, output, .. } = lane;
        drop(copies);
        self.unregister_input(input)?;
        self.unregister_output(output)?;
        self.unregister_timeline(uploaded)
    }
}
