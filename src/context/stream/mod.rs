//! Host streams: a sequence of host frames (video: planar YUV, RGB24 or RGBA8)
//! through the model with several frames in flight. Each lane has persistent
//! pinned staging and its own images; the colour conversion runs on the GPU
//! beside the copies (docs/stream.md). While one frame runs the model, the next
//! is uploaded and converted and the one before converted and read back (the
//! read-back is submitted with its frame, on the second queue, to wait for it on the
//! GPU); the host waits only for the oldest frame's read-back, when it takes it.

mod lane;
mod layout;

use std::collections::VecDeque;

use ash::vk;

pub use layout::{ChromaSiting, HostLayout, Subsampling, YuvLayout, YuvMatrix, YuvRange};

use crate::context::NeuralFrameContext;
use crate::context::registry::{Entry, InputId, OutputId, Resource, TimelineId};
use crate::context::sync::{Frame, FrameStats, Submitted, SyncMode, Ticket};
use crate::error::{Error, Result};
use crate::interop::SharedTimeline;
use crate::vulkan::sync::TimelineSemaphore;
use lane::{ConvertPasses, Lane};

/// The queue of the read-backs submitted with their frames: the second, where the post
/// passes that wait for CUDA go (idle with the CUDA passes).
const READ_BACK_QUEUE: usize = 1;

/// A host stream of a context: `depth` lanes, the frames in flight oldest first.
/// Made by [`NeuralFrameContext::host_stream`], fed by
/// [`stream_push`](NeuralFrameContext::stream_push), drained by
/// [`stream_pop`](NeuralFrameContext::stream_pop) and released by
/// [`close_stream`](NeuralFrameContext::close_stream).
pub struct HostStream {
    lanes: Vec<StreamLane>,
    free: Vec<usize>,
    queue: VecDeque<(usize, Ticket)>,
    uploaded: TimelineId,
    value: u64,
    input: HostLayout,
    output: HostLayout,
    input_len: usize,
    output_len: usize,
    /// The last popped frame's read-back (conversion and copy into host memory) on the GPU.
    read_back_ms: f64,
    /// After the lanes: their command buffers use these pipelines.
    _passes: ConvertPasses,
}

struct StreamLane {
    copies: Lane,
    input: InputId,
    output: OutputId,
}

impl HostStream {
    /// Frames pushed and not yet popped.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// Lanes: how many frames may be in flight.
    pub fn depth(&self) -> usize {
        self.lanes.len()
    }

    /// Whether a frame can be pushed now (a lane is free).
    pub fn has_room(&self) -> bool {
        !self.free.is_empty()
    }

    /// Bytes of an incoming host frame.
    pub fn input_len(&self) -> usize {
        self.input_len
    }

    /// Bytes of an outgoing host frame (at the model's output size).
    pub fn output_len(&self) -> usize {
        self.output_len
    }

    /// The layouts of incoming and outgoing frames.
    pub fn layouts(&self) -> (HostLayout, HostLayout) {
        (self.input, self.output)
    }

    /// The GPU time in ms of the last popped frame's read-back: the conversion and the
    /// copy into host memory (NaN where the queue writes no timestamps).
    pub fn last_read_back_ms(&self) -> f64 {
        self.read_back_ms
    }
}

fn owned_image(resource: &Resource) -> Result<&crate::vulkan::memory::Image> {
    match resource {
        Resource::Image { owned: Some(image), .. } => Ok(image),
        _ => Err(Error::internal("a created image without its image")),
    }
}

fn rgba_format(layout: HostLayout) -> vk::Format {
    if layout.deep() { vk::Format::R16G16B16A16_SFLOAT } else { vk::Format::R8G8B8A8_UNORM }
}

impl NeuralFrameContext {
    /// Sets up a host stream of `depth` lanes (1 to 16): frames of `input` layout at the
    /// frame size go in, frames of `output` layout at the output size come out.
    ///
    /// ```no_run
    /// use neural_frame::{HostLayout, NeuralFrameContext};
    ///
    /// let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let mut stream = ctx.host_stream(HostLayout::Rgb8, HostLayout::Rgb8, 4)?;
    /// let frames: Vec<Vec<u8>> = vec![vec![128; 960 * 540 * 3]; 10];
    /// let mut results = Vec::new();
    /// for frame in &frames {
    ///     if !stream.has_room() {
    ///         results.extend(ctx.stream_pop(&mut stream, |out| out.to_vec())?.map(|(out, _)| out));
    ///     }
    ///     ctx.stream_push(&mut stream, |staging| staging.copy_from_slice(frame))?;
    /// }
    /// while let Some((out, _stats)) = ctx.stream_pop(&mut stream, |out| out.to_vec())? {
    ///     results.push(out); // 3840×2160 RGB, in order
    /// }
    /// ctx.close_stream(stream)?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn host_stream(&mut self, input: HostLayout, output: HostLayout, depth: usize) -> Result<HostStream> {
        if !(1..=16).contains(&depth) {
            return Err(Error::InvalidArgument(format!("a host stream of {depth} lanes: give 1 to 16")));
        }
        input.check()?;
        output.check()?;
        let device = std::sync::Arc::clone(&self.res.device);
        let passes = ConvertPasses::new(&device, input, output)?;
        let timeline = TimelineSemaphore::new(&device, 0, false)?;
        let uploaded = TimelineId(self.res.registry.insert(Entry::Timeline(SharedTimeline::vulkan_only(timeline))));
        let (w, h) = self.frame_size();
        let (ow, oh) = self.output_size();
        let mut stream = HostStream {
            lanes: Vec::new(),
            free: Vec::new(),
            queue: VecDeque::new(),
            uploaded,
            value: 0,
            input,
            output,
            input_len: input.frame_len(w, h),
            output_len: output.frame_len(ow, oh),
            read_back_ms: f64::NAN,
            _passes: passes,
        };
        for _ in 0..depth {
            match self.stream_lane(&stream) {
                Ok(lane) => stream.lanes.push(lane),
                Err(e) => {
                    let _ = self.close_stream(stream);
                    return Err(e);
                }
            }
        }
        stream.free = (0..depth).rev().collect();
        Ok(stream)
    }

    fn stream_lane(&mut self, stream: &HostStream) -> Result<StreamLane> {
        let input = self.create_input_image(rgba_format(stream.input))?;
        let output = match self.create_output_image(rgba_format(stream.output)) {
            Ok(o) => o,
            Err(e) => {
                let _ = self.unregister_input(input);
                return Err(e);
            }
        };
        let made = (|| {
            let input_image = owned_image(&self.res.registry.input(input)?.resource)?;
            let output_image = owned_image(&self.res.registry.output(output)?.resource)?;
            // SAFETY: both are the context's own images of its device, in GENERAL layout between
            // operations; they stay registered until close_stream, which drops the lanes first;
            // the passes live in the stream beside the lanes and are dropped after them.
            unsafe {
                Lane::new(&self.res.device, &stream._passes, (stream.input, input_image), (stream.output, output_image))
            }
        })();
        match made {
            Ok(copies) => Ok(StreamLane { copies, input, output }),
            Err(e) => {
                let _ = self.unregister_input(input);
                let _ = self.unregister_output(output);
                Err(e)
            }
        }
    }

    /// Queues one host frame: `fill` writes it into a free lane's staging
    /// ([`HostStream::input_len`] bytes), then the upload, the conversion and the
    /// frame are submitted without waiting. Refused when every lane holds a frame:
    /// take the oldest with [`stream_pop`](Self::stream_pop) first.
    ///
    /// ```no_run
    /// # use neural_frame::{HostLayout, NeuralFrameContext};
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let mut stream = ctx.host_stream(HostLayout::Rgba8, HostLayout::Rgba8, 2)?;
    /// ctx.stream_push(&mut stream, |staging| staging.fill(200))?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn stream_push<R>(&mut self, stream: &mut HostStream, fill: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        let Some(&k) = stream.free.last() else {
            return Err(Error::InvalidArgument(format!(
                "every lane of the host stream holds a frame ({}): take the oldest with stream_pop first",
                stream.lanes.len()
            )));
        };
        let len = stream.input_len;
        let timeout = self.frame_timeout;
        let lane = &mut stream.lanes[k];
        let result = fill(lane.copies.upload_mut(len, timeout)?);
        let value = stream.value + 1;
        let uploaded = self.res.registry.timeline(stream.uploaded)?.raw();
        // SAFETY: the stream's own timeline, below `value` (values only grow).
        unsafe { lane.copies.submit_in(uploaded, value) }?;
        stream.value = value;
        let frame = Frame::new(lane.input, lane.output);
        let frame = if self.sync_mode == SyncMode::Host {
            // Host-signalled mode takes no GPU waits: the upload's completion comes through the host.
            if !self.res.registry.timeline(stream.uploaded)?.vulkan().wait(value, timeout)? {
                return Err(Error::Timeout { what: "a stream frame's upload".into(), waited: timeout });
            }
            frame
        } else {
            frame.wait_for(stream.uploaded, value)
        };
        let ticket = match self.submit(frame)? {
            Submitted::Frame(ticket) => ticket,
            Submitted::Skipped => {
                return Err(Error::InvalidArgument(
                    "a host stream's frame was skipped (BackPressure::Skip): streams need BackPressure::Block".into(),
                ));
            }
        };
        stream.free.pop();
        // The read-back goes to the GPU now, behind the frame, where the GPU can wait for the
        // frame's output (not in host-signalled mode, nor while its post pass waits for the
        // host) on a queue of its own, so that it overlaps the next frames' models and the
        // next uploads on queue 0 do not wait behind it; otherwise stream_pop submits it.
        if self.sync_mode == SyncMode::Gpu && self.res.device.queue_count() > 1 && !self.post_deferred(&ticket) {
            let ready = ticket.output_ready();
            // SAFETY: the context's output timeline, which reaches the ticket's value once the
            // frame's output is written (its post pass is submitted: not deferred).
            unsafe { stream.lanes[k].copies.submit_out(READ_BACK_QUEUE, ready.semaphore, ready.value) }?;
        }
        stream.queue.push_back((k, ticket));
        Ok(result)
    }

    /// Takes the oldest frame in flight: waits for it, converts and reads it back,
    /// and hands its bytes ([`HostStream::output_len`], the output layout at the
    /// output size) to `take`. `None` when no frame is in flight.
    ///
    /// ```no_run
    /// # use neural_frame::{HostLayout, NeuralFrameContext};
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let mut stream = ctx.host_stream(HostLayout::Rgba8, HostLayout::Rgba8, 2)?;
    /// # ctx.stream_push(&mut stream, |staging| staging.fill(200))?;
    /// let (sum, stats) = ctx.stream_pop(&mut stream, |out| out.iter().map(|&b| b as u64).sum::<u64>())?.unwrap();
    /// println!("{sum} in {:.2} ms of model", stats.infer_ms);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn stream_pop<R>(
        &mut self,
        stream: &mut HostStream,
        take: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<(R, FrameStats)>> {
        let Some((k, ticket)) = stream.queue.pop_front() else { return Ok(None) };
        let timeout = self.frame_timeout;
        // The frame first: with PostWait::Host its wait is what submits its post pass.
        let stats = self.wait(&ticket);
        let lane = &mut stream.lanes[k];
        let out = stats.and_then(|stats| {
            if !lane.copies.out_submitted() {
                let ready = ticket.output_ready();
                // SAFETY: the context's output timeline, which reached the ticket's value (waited above).
                unsafe { lane.copies.submit_out(0, ready.semaphore, ready.value) }?;
            }
            lane.copies.wait_out(timeout)?;
            stream.read_back_ms = lane.copies.read_back_ms();
            Ok((take(lane.copies.download(stream.output_len)?), stats))
        });
        // The lane is free again whatever happened: its copies are done or were abandoned with an error.
        stream.free.push(k);
        out.map(Some)
    }

    /// Releases a host stream: waits for its frames, then frees its lanes, images and timeline.
    ///
    /// ```no_run
    /// # use neural_frame::{HostLayout, NeuralFrameContext};
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let stream = ctx.host_stream(HostLayout::Rgb8, HostLayout::Rgb8, 3)?;
    /// ctx.close_stream(stream)?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn close_stream(&mut self, stream: HostStream) -> Result<()> {
        let retired = self.retire_all();
        let HostStream { lanes, uploaded, _passes, .. } = stream;
        let mut ids = Vec::new();
        for lane in lanes {
            ids.push((lane.input, lane.output));
            drop(lane.copies);
        }
        drop(_passes);
        let mut result = retired;
        for (input, output) in ids {
            result = result.and(self.unregister_input(input)).and(self.unregister_output(output));
        }
        result.and(self.unregister_timeline(uploaded))
    }
}
