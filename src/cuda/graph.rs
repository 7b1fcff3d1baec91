//! CUDA graphs captured from a stream: the kernels one ONNX Runtime run puts
//! on the context's stream, replayed with one launch per frame.

use std::sync::Arc;

use cudarc::driver::sys;

use crate::cuda::device::CudaDevice;
use crate::cuda::result::{check, check_ctx};
use crate::cuda::stream::Stream;
use crate::error::Result;

/// An instantiated graph, replayable on a stream. Its kernels keep the
/// addresses they were captured with: the buffers they read and write must
/// stay allocated, at the same addresses, for as long as the graph is launched.
pub struct Graph {
    exec: sys::CUgraphExec,
    nodes: usize,
    device: Arc<CudaDevice>,
}

impl Graph {
    /// Captures what `enqueue` puts on `stream` (nothing runs while capturing)
    /// and instantiates it. Capture is relaxed: calls outside the stream are not
    /// forbidden, but a synchronisation of the stream itself ends the capture with an error.
    pub fn capture(stream: &Stream, enqueue: impl FnOnce() -> Result<()>) -> Result<Self> {
        let device = Arc::clone(stream.device());
        device.bind()?;
        // SAFETY: the stream is live and not capturing.
        check("cuStreamBeginCapture", unsafe {
            sys::cuStreamBeginCapture_v2(stream.raw(), sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        })?;
        let enqueued = enqueue();
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: the stream is capturing; capture ends here whatever `enqueue` did.
        let ended = unsafe { sys::cuStreamEndCapture(stream.raw(), &mut graph) };
        let destroy = |g: sys::CUgraph| {
            if !g.is_null() {
                // SAFETY: g came from cuStreamEndCapture and is destroyed once.
                unsafe { sys::cuGraphDestroy(g) };
            }
        };
        if let Err(e) = enqueued {
            destroy(graph);
            return Err(e);
        }
        if let Err(e) = check_ctx("cuStreamEndCapture", ended, "the captured work synchronised or left the stream") {
            destroy(graph);
            return Err(e);
        }
        let mut nodes = 0usize;
        // SAFETY: graph is a live graph; a null node array asks for the count only.
        let counted = unsafe { sys::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut nodes) };
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: graph is live; exec is a valid out pointer.
        let instantiated = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) };
        destroy(graph);
        check("cuGraphGetNodes", counted)?;
        check("cuGraphInstantiate", instantiated)?;
        Ok(Self { exec, nodes, device })
    }

    /// Launches the graph on `stream` (asynchronous, like a kernel launch).
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        self.device.bind()?;
        // SAFETY: both are live objects of this context.
        check("cuGraphLaunch", unsafe { sys::cuGraphLaunch(self.exec, stream.raw()) })
    }

    /// Nodes (kernels, copies, …) in the graph.
    pub fn nodes(&self) -> usize {
        self.nodes
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        let _ = self.device.bind();
        // SAFETY: destroyed once; launches already made complete first (driver semantics).
        let r = unsafe { sys::cuGraphExecDestroy(self.exec) };
        if r != sys::CUresult::CUDA_SUCCESS {
            log::error!("cuGraphExecDestroy failed: {r:?}");
        }
    }
}
