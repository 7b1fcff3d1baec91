//! Checking a frame before anything is recorded: its registrations and their
//! sizes, its sync points, and its extra inputs and outputs by name.

use ash::vk;

use crate::context::NeuralFrameContext;
use crate::context::plan::{Route, Side};
use crate::context::record::size_mismatch;
use crate::context::registry::{Registration, TimelineId};
use crate::context::sync::{CallerSignal, Frame, Submission, SyncMode};
use crate::error::{Error, Result};

/// One role's side of a frame's named tensors: what the model calls them, and
/// how the frame's handles are looked up.
struct Named<'a> {
    /// "input" or "output".
    role: &'a str,
    /// What the frame does with a tensor of this role ("gives", "asks for").
    verb: &'a str,
    /// The model's tensor of this role that the frame itself takes.
    frame_tensor: &'a str,
    /// The model's tensors of this role, described, for messages.
    described: String,
    /// The size its registrations must have.
    size: (u32, u32),
}

impl Named<'_> {
    /// `(index in the contract's extras, handle)` for each of `given`, checked: a name
    /// the model has (and not the frame's own), given once, of a registration of `size`.
    fn resolve<'r, Id: Copy>(
        &self,
        given: &[(String, Id)],
        index: impl Fn(&str) -> Option<usize>,
        registration: impl Fn(Id) -> Result<&'r Registration>,
    ) -> Result<Vec<(usize, Id)>> {
        let role = self.role;
        let mut out = Vec::with_capacity(given.len());
        for (name, id) in given {
            let k = index(name).ok_or_else(|| {
                Error::InvalidArgument(if *name == self.frame_tensor {
                    format!("`{name}` is the model's frame {role}: give it to Frame::new")
                } else {
                    format!("the model has no {role} `{name}`; its {role}s are {}", self.described)
                })
            })?;
            if out.iter().any(|(j, _)| *j == k) {
                return Err(Error::InvalidArgument(format!("the frame {} the {role} `{name}` twice", self.verb)));
            }
            let reg = registration(*id)?;
            if (reg.width, reg.height) != self.size {
                return Err(size_mismatch(&format!("{role} `{name}`"), (reg.width, reg.height), self.size));
            }
            out.push((k, *id));
        }
        Ok(out)
    }
}

impl NeuralFrameContext {
    /// Checks a frame's handles and resolves its sync points to semaphores and its
    /// extra inputs and outputs to the model's tensors.
    pub(crate) fn resolve(&self, frame: &Frame) -> Result<Submission> {
        let r = &self.res.registry;
        let (input, output) = (r.input(frame.input)?, r.output(frame.output)?);
        let size = self.frame.as_ref().ok_or_else(|| Error::internal("a context without a frame size"))?;
        if (input.width, input.height) != (size.width, size.height) {
            return Err(size_mismatch("input", (input.width, input.height), (size.width, size.height)));
        }
        if (output.width, output.height) != (size.out_width, size.out_height) {
            return Err(size_mismatch("output", (output.width, output.height), (size.out_width, size.out_height)));
        }
        let points = |ps: &[crate::SyncPoint]| -> Result<Vec<(vk::Semaphore, u64)>> {
            ps.iter().map(|p| r.timeline(p.timeline).map(|t| (t.raw(), p.value))).collect()
        };
        let signals = |ps: &[crate::SyncPoint]| -> Result<Vec<CallerSignal>> {
            ps.iter().map(|p| r.timeline(p.timeline).map(|t| (p.timeline, t.raw(), p.value))).collect()
        };
        if self.sync_mode == SyncMode::Host && !(frame.waits.is_empty() && frame.output_free.is_empty()) {
            return Err(Error::InvalidArgument(
                "the frame waits for a timeline, but the context runs in host-signalled mode (SyncMode::Host): \
                 submit once the input is written and the output free"
                    .into(),
            ));
        }
        if self.sync_mode == SyncMode::Host
            && !(frame.signal_input_consumed.is_empty() && frame.signal_output_ready.is_empty())
        {
            return Err(Error::InvalidArgument(
                "the frame signals a timeline of the caller's, but the context runs in host-signalled mode \
                 (SyncMode::Host): wait for the ticket on the host (wait, wait_input_consumed) instead"
                    .into(),
            ));
        }
        let c = &self.contract;
        let inputs = Named {
            role: "input",
            verb: "gives",
            frame_tensor: &c.input_name,
            described: c.describe_inputs(),
            size: (size.width, size.height),
        };
        let extra_inputs = inputs.resolve(&frame.extra_inputs, |n| c.extra_input(n), |id| r.input(id))?;
        for &(k, id) in &extra_inputs {
            if r.input(id)?.direct.is_some() {
                return Err(Error::InvalidArgument(format!(
                    "the input given for `{}` was registered for the model to read as it is (a frame input): \
                     register the extra input's memory again, as an image or a buffer of another layout",
                    c.extra_inputs[k].name
                )));
            }
        }
        if let Some(missing) =
            c.extra_inputs.iter().enumerate().find(|(k, _)| !extra_inputs.iter().any(|(j, _)| j == k))
        {
            return Err(Error::InvalidArgument(format!(
                "the frame does not give the model's input `{}` ({}): add Frame::with_input({:?}, ..); the model's \
                 inputs are {}",
                missing.1.name,
                missing.1.kind.describe(),
                missing.1.name,
                inputs.described
            )));
        }
        let outputs = Named {
            role: "output",
            verb: "asks for",
            frame_tensor: &c.output_name,
            described: c.describe_outputs(),
            size: (size.out_width, size.out_height),
        };
        let extra_outputs = outputs.resolve(&frame.extra_outputs, |n| c.extra_output(n), |id| r.output(id))?;
        if !extra_outputs.is_empty() && output.direct.is_some() {
            return Err(Error::InvalidArgument(
                "a frame with extra outputs needs its frame output converted by a post pass, but the model writes \
                 this registered output itself (a tightly packed RGBA8 buffer of a uint8 RGBA model): register \
                 another kind of output"
                    .into(),
            ));
        }
        // The points, where CUDA has every one of their timelines too (imported by descriptor
        // on the CUDA backend); else none.
        let on_cuda = |ps: &[crate::SyncPoint]| -> Result<Option<Vec<(TimelineId, u64)>>> {
            let mut all = Vec::with_capacity(ps.len());
            for p in ps {
                if r.timeline(p.timeline)?.cuda_if_any().is_none() {
                    return Ok(None);
                }
                all.push((p.timeline, p.value));
            }
            Ok(Some(all))
        };
        let (wait_cuda, free_cuda) = (on_cuda(&frame.waits)?, on_cuda(&frame.output_free)?);
        let cuda_waits = wait_cuda.is_some() && free_cuda.is_some();
        Ok(Submission {
            wait: points(&frame.waits)?,
            output_free: points(&frame.output_free)?,
            cuda_points: (wait_cuda.unwrap_or_default(), free_cuda.unwrap_or_default()),
            signals: (signals(&frame.signal_input_consumed)?, signals(&frame.signal_output_ready)?),
            cuda_waits,
            extra_inputs,
            extra_outputs,
        })
    }
}

impl NeuralFrameContext {
    /// The route each side of `frame` takes. On the CUDA backend with CUDA passes
    /// (the default) both sides run as CUDA kernels wherever CUDA sees every
    /// registration of the frame (each says so once when it does not, at
    /// registration); otherwise both take the Vulkan passes, so that the frame's
    /// alpha goes from the pre pass to the post pass within one API. A buffer
    /// the model reads or writes as it is takes no pass.
    pub(crate) fn sides(&self, frame: &Frame, sub: &Submission) -> Result<(Side, Side)> {
        let r = &self.res.registry;
        let (input, output) = (r.input(frame.input)?, r.output(frame.output)?);
        let cuda = self.res.engine.cuda_passes();
        let mut in_cuda = cuda && sub.extra_inputs.iter().all(|(_, id)| r.input(*id).is_ok_and(|x| x.cuda.is_some()));
        let mut out_cuda =
            cuda && sub.extra_outputs.iter().all(|(_, id)| r.output(*id).is_ok_and(|x| x.cuda.is_some()));
        let (in_direct, out_direct) = (input.direct.is_some(), output.direct.is_some());
        in_cuda &= in_direct || input.cuda.is_some();
        out_cuda &= out_direct || output.cuda.is_some();
        let on_cuda = in_cuda && out_cuda;
        let route = |direct: bool| match (direct, on_cuda) {
            (true, _) => Route::Direct,
            (false, true) => Route::Cuda,
            (false, false) => Route::Vulkan,
        };
        let extras = |any: bool| any.then_some(if on_cuda { Route::Cuda } else { Route::Vulkan });
        Ok((
            Side { route: route(in_direct), extras: extras(!sub.extra_inputs.is_empty()) },
            Side { route: route(out_direct), extras: extras(!sub.extra_outputs.is_empty()) },
        ))
    }
}
