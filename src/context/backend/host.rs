//! The CPU backend: the model runs on the host, on host-visible Vulkan
//! buffers mapped into the process, once the pre pass (or the caller's
//! buffer) is ready.

use std::time::{Duration, Instant};

use ort::session::Session;

use crate::context::backend::{Run, Timelines};
use crate::context::plan::{Consumed, Finish};
use crate::error::{Error, Result};

/// ONNX Runtime's CPU provider.
pub(crate) struct HostEngine {
    pub(crate) session: Session,
}

impl HostEngine {
    /// Waits for `to_model = n` on the host, runs the model, and signals the
    /// caller's timelines the model itself served.
    pub(crate) fn run(&mut self, run: Run<'_>, timelines: &Timelines, timeout: Duration) -> Result<f64> {
        let n = run.value;
        if run.steps.wait_to_model && !timelines.to_model.vulkan().wait(n, timeout)? {
            return Err(Error::Timeout {
                what: format!("the input of frame {n} (pre pass or the caller's signal)"),
                waited: timeout,
            });
        }
        let t = Instant::now();
        // SAFETY: the bound memory is the slot's mapped buffers or the caller's mapped
        // buffer, alive while the frame is in flight; to_model = n says the GPU is done writing
        // the input, and nothing touches the output until the post pass is submitted after this.
        unsafe { run.binding.run(&self.session, None) }?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if run.steps.input_consumed == Some(Consumed::AfterModel) {
            timelines.input_consumed.vulkan().signal_from_host(n)?;
        }
        if run.steps.done == Finish::OutputReady {
            timelines.output_ready.vulkan().signal_from_host(n)?;
        }
        Ok(ms)
    }
}
