//! Checking a frame before anything is recorded: its registrations and their
//! sizes, its sync points, and its extra inputs and outputs by name.

use ash::vk;

use crate::context::NeuralFrameContext;
use crate::context::backend::PassRun;
use crate::context::record::size_mismatch;
use crate::context::registry::Registration;
use crate::context::sync::{Frame, Submission, SyncMode};
use crate::cuda::{PostParams, PreParams, TensorParams};
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
        let point = |p: Option<crate::SyncPoint>| -> Result<Option<(vk::Semaphore, u64)>> {
            p.map(|p| r.timeline(p.timeline).map(|t| (t.raw(), p.value))).transpose()
        };
        if self.sync_mode == SyncMode::Host && (frame.wait.is_some() || frame.output_free.is_some()) {
            return Err(Error::InvalidArgument(
                "the frame waits for a timeline, but the context runs in host-signalled mode (SyncMode::Host): \
                 submit once the input is written and the output free"
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
        Ok(Submission { wait: point(frame.wait)?, output_free: point(frame.output_free)?, extra_inputs, extra_outputs })
    }
}

impl NeuralFrameContext {
    /// With CUDA passes in effect: refuses a frame they cannot run, saying why.
    pub(crate) fn check_cuda_passes(&self, frame: &Frame, tiles: usize) -> Result<()> {
        let refuse = |why: String| {
            Err(Error::InvalidArgument(format!(
                "the context runs its passes as CUDA kernels (ContextBuilder::cuda_passes, --passes cuda), which \
                 {why}; build the context without them for this frame"
            )))
        };
        if tiles > 1 {
            return refuse(format!("do not run tiles (the frame runs as {tiles})"));
        }
        let (ins, outs) = (&self.contract.extra_inputs, &self.contract.extra_outputs);
        if !ins.is_empty() || !outs.is_empty() {
            let names: Vec<&str> = ins.iter().chain(outs.iter()).map(|t| t.name.as_str()).collect();
            return refuse(format!("convert the frame's own tensors only (the model also has {})", names.join(", ")));
        }
        let r = &self.res.registry;
        for (role, reg) in [("input", r.input(frame.input)?), ("output", r.output(frame.output)?)] {
            if reg.cuda.is_none() {
                return refuse(format!(
                    "read and write images the context created (create_input_image, create_output_image; RGBA8, \
                     BGRA8 or RGBA16F inputs, RGBA8 or RGBA16F outputs), and the frame's {role} is not one"
                ));
            }
        }
        Ok(())
    }

    /// The CUDA passes' parameters for a frame through slot `i` (checked by
    /// [`check_cuda_passes`](Self::check_cuda_passes)); `wait`: a Vulkan batch
    /// signals `to_model` first.
    pub(crate) fn pass_run(&self, i: usize, frame: &Frame, wait: bool) -> Result<PassRun> {
        let r = &self.res.registry;
        let (input, output) = (r.input(frame.input)?, r.output(frame.output)?);
        let surface = |reg: &Registration| {
            reg.cuda
                .as_ref()
                .map(|c| (c.surface.raw(), c.format as u32))
                .ok_or_else(|| Error::internal("a frame for the CUDA passes with an image that is not in CUDA"))
        };
        let tensors = self.res.slots[i].tensors.as_ref().ok_or_else(|| Error::internal("a slot without buffers"))?;
        let ptr = |m: (crate::onnx::Placement, *mut std::ffi::c_void)| m.1 as u64;
        let (in_surface, in_format) = surface(input)?;
        let (out_surface, out_format) = surface(output)?;
        let s = tensors.size;
        Ok(PassRun {
            pre: PreParams {
                surface: in_surface,
                alpha: 0,
                width: s.width,
                height: s.height,
                format: in_format,
                pad: 0,
                tensor: TensorParams::new(self.contract.input, ptr(tensors.input.tensor_memory()?)),
            },
            post: PostParams {
                surface: out_surface,
                alpha: 0,
                width: s.width,
                height: s.height,
                out_width: s.out_width,
                out_height: s.out_height,
                format: out_format,
                pad: 0,
                tensor: TensorParams::new(self.contract.output, ptr(tensors.output.tensor_memory()?)),
            },
            wait,
        })
    }
}
