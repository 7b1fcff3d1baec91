//! The CUDA passes' parameters for a frame: what the pre and post kernels read and write,
//! from the frame's registrations and the slot's tensors.

use crate::context::NeuralFrameContext;
use crate::context::backend::PassRun;
use crate::context::plan::Passes;
use crate::context::record::Place;
use crate::context::registry::Registration;
use crate::context::sync::{Frame, Submission};
use crate::cuda::params::{ELEMENT_F16, ELEMENT_F32, ELEMENT_U8};
use crate::cuda::{PostParams, PreParams, TensorParams};
use crate::error::{Error, Result};
use crate::onnx::TensorKind;

impl NeuralFrameContext {
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
                .map(|c| (c.params(), c.planes()))
                .ok_or_else(|| Error::internal("a frame on the CUDA route with memory that is not in CUDA"))
        };
        let ptr = |m: (crate::onnx::Placement, *mut std::ffi::c_void)| m.1 as u64;
        let pre_params = |reg: &Registration, kind: TensorKind, data: u64| -> Result<PreParams> {
            let ((source, format, kind_code, pitch), (plane1, plane2, pitch1, pitch2)) = view(reg)?;
            Ok(PreParams {
                plane1,
                plane2,
                pitch1,
                pitch2,
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
            let ((target, format, kind_code, pitch), (plane1, plane2, pitch1, pitch2)) = view(reg)?;
            let [blend_left, blend_top, blend_right, blend_bottom] = at.blend;
            Ok(PostParams {
                plane1,
                plane2,
                pitch1,
                pitch2,
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
        crate::onnx::Element::F32 => ELEMENT_F32,
        crate::onnx::Element::F16 => ELEMENT_F16,
        crate::onnx::Element::U8 => ELEMENT_U8,
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
