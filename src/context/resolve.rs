//! Checking a frame before anything is recorded: its registrations and their
//! sizes, its sync points, and its extra inputs and outputs by name.

use ash::vk;

use crate::context::NeuralFrameContext;
use crate::context::backend::PassRun;
use crate::context::plan::{Passes, Route, Side};
use crate::context::record::{Place, size_mismatch};
use crate::context::registry::{Registration, TimelineId};
use crate::context::sync::{Frame, Submission, SyncMode};
use crate::cuda::{PostParams, PreParams, TensorParams};
use crate::error::{Error, Result};
use crate::onnx::TensorKind;

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
        // The points whose timelines CUDA has too (imported by descriptor on the CUDA backend).
        let on_cuda = |p: Option<crate::SyncPoint>| -> Result<Option<(TimelineId, u64)>> {
            Ok(match p {
                Some(p) if r.timeline(p.timeline)?.cuda_if_any().is_some() => Some((p.timeline, p.value)),
                _ => None,
            })
        };
        let cuda_points = (on_cuda(frame.wait)?, on_cuda(frame.output_free)?);
        let cuda_waits =
            frame.wait.is_some() == cuda_points.0.is_some() && frame.output_free.is_some() == cuda_points.1.is_some();
        Ok(Submission {
            wait: point(frame.wait)?,
            output_free: point(frame.output_free)?,
            cuda_points,
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

    /// The CUDA kernels' parameters for a frame (one tile of it: `place`) through
    /// slot `i`: the pre kernels of the extra inputs and the frame's input where
    /// `pre` says so, the post kernels of the frame's output and the extra outputs
    /// where `post` does.
    pub(crate) fn pass_run(
        &self,
        i: usize,
        frame: &Frame,
        sub: &Submission,
        place: Place,
        (pre, post): (Passes, Passes),
    ) -> Result<PassRun> {
        let r = &self.res.registry;
        let tensors = self.res.slots[i].tensors.as_ref().ok_or_else(|| Error::internal("a slot without buffers"))?;
        let s = tensors.size;
        let view = |reg: &Registration| {
            reg.cuda
                .as_ref()
                .map(|c| c.params())
                .ok_or_else(|| Error::internal("a frame on the CUDA route with memory that is not in CUDA"))
        };
        let ptr = |m: (crate::onnx::Placement, *mut std::ffi::c_void)| m.1 as u64;
        let pre_params = |reg: &Registration, kind: TensorKind, data: u64| -> Result<PreParams> {
            let (source, format, kind_code, pitch) = view(reg)?;
            Ok(PreParams {
                source,
                width: s.width,
                height: s.height,
                format,
                kind: kind_code,
                pitch,
                origin_x: place.tile.x,
                origin_y: place.tile.y,
                tensor: tensor_params(kind, data),
                ..PreParams::default()
            })
        };
        // The tile's place and shared strips in output pixels, as the Vulkan post pass has them.
        let at = place.in_output(&s);
        let post_params = |reg: &Registration, kind: TensorKind, data: u64| -> Result<PostParams> {
            let (target, format, kind_code, pitch) = view(reg)?;
            let [blend_left, blend_top, blend_right, blend_bottom] = at.blend;
            Ok(PostParams {
                target,
                width: s.width,
                height: s.height,
                out_width: s.out_width,
                out_height: s.out_height,
                format,
                kind: kind_code,
                pitch,
                origin_x: at.origin.0,
                origin_y: at.origin.1,
                blend_left,
                blend_top,
                blend_right,
                blend_bottom,
                margin_x: at.margin.0,
                margin_y: at.margin.1,
                tensor: tensor_params(kind, data),
                ..PostParams::default()
            })
        };
        let c = &self.contract;
        let missing = |what: &str, k: usize| Error::internal(format!("a slot without the extra {what} tensor {k}"));
        let mut run = PassRun { pre: Vec::new(), post: Vec::new() };
        if pre.extras {
            for &(k, id) in &sub.extra_inputs {
                let t = tensors.extra_inputs.get(k).ok_or_else(|| missing("input", k))?;
                let kind = c.extra_inputs.get(k).ok_or_else(|| missing("input", k))?.kind;
                run.pre.push((pre_params(r.input(id)?, kind, ptr(t.buffer.tensor_memory()?))?, false));
            }
        }
        if pre.frame {
            let data = ptr(tensors.input.tensor_memory()?);
            run.pre.push((pre_params(r.input(frame.input)?, c.input, data)?, true));
        }
        if post.frame {
            let data = ptr(tensors.output.tensor_memory()?);
            run.post.push(post_params(r.output(frame.output)?, c.output, data)?);
        }
        if post.extras {
            for &(k, id) in &sub.extra_outputs {
                let t = tensors.extra_outputs.get(k).ok_or_else(|| missing("output", k))?;
                let kind = c.extra_outputs.get(k).ok_or_else(|| missing("output", k))?.kind;
                run.post.push(post_params(r.output(id)?, kind, ptr(t.buffer.tensor_memory()?))?);
            }
        }
        Ok(run)
    }
}

/// The kernels' description of a `kind` tensor at device address `data`.
fn tensor_params(kind: TensorKind, data: u64) -> TensorParams {
    let w = kind.pass_words();
    let element = match kind.element {
        crate::onnx::Element::F32 => crate::cuda::params::ELEMENT_F32,
        crate::onnx::Element::F16 => crate::cuda::params::ELEMENT_F16,
        crate::onnx::Element::U8 => crate::cuda::params::ELEMENT_U8,
    };
    TensorParams {
        data,
        element,
        nhwc: w[0],
        channels: w[1],
        bgr: w[2],
        mul: [w[3], w[4], w[5], w[6]].map(f32::from_bits),
        add: [w[7], w[8], w[9], w[10]].map(f32::from_bits),
    }
}
