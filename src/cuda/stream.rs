//! Streams and timing events.

use std::sync::Arc;

use cudarc::driver::sys;

use crate::cuda::device::CudaDevice;
use crate::cuda::result::check;
use crate::error::Result;

/// A non-blocking CUDA stream.
pub struct Stream {
    raw: sys::CUstream,
    device: Arc<CudaDevice>,
}

// SAFETY: streams may be used from any thread with the context current.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    /// Creates a stream that does not synchronise with the legacy default stream.
    pub fn new(device: &Arc<CudaDevice>) -> Result<Self> {
        device.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: raw is a valid out pointer; the context is current.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(Self { raw, device: Arc::clone(device) })
    }
    /// A stream of the context's greatest (`high`) or least scheduling priority:
    /// where two streams have blocks waiting, the GPU runs the higher one's first.
    pub fn with_priority(device: &Arc<CudaDevice>, high: bool) -> Result<Self> {
        device.bind()?;
        let (mut least, mut greatest) = (0i32, 0i32);
        // SAFETY: both are valid out pointers; the context is current.
        check("cuCtxGetStreamPriorityRange", unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) })?;
        let mut raw = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        let priority = if high { greatest } else { least };
        // SAFETY: raw is a valid out pointer; the priority lies in the context's range.
        check("cuStreamCreateWithPriority", unsafe { sys::cuStreamCreateWithPriority(&mut raw, flags, priority) })?;
        Ok(Self { raw, device: Arc::clone(device) })
    }
    /// The raw stream.
    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }
    /// Blocks until the stream's work is done (set-up and tests; not the hot path).
    pub fn synchronize(&self) -> Result<()> {
        self.device.bind()?;
        // SAFETY: raw is a live stream.
        check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.raw) })
    }
    /// The device.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }
    /// Makes work enqueued on this stream after this call wait (on the GPU) for
    /// `event`'s last recording.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.device.bind()?;
        // SAFETY: both are live objects of this context; flags must be 0.
        check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(self.raw, event.raw, 0) })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.device.bind();
        // SAFETY: the stream is destroyed once; pending work completes first (driver semantics).
        let r = unsafe { sys::cuStreamDestroy_v2(self.raw) };
        if r != sys::CUresult::CUDA_SUCCESS {
            log::error!("cuStreamDestroy failed: {r:?}");
        }
    }
}

/// A CUDA event with timing enabled.
pub struct Event {
    raw: sys::CUevent,
    device: Arc<CudaDevice>,
}

impl Event {
    /// Creates a timing event.
    pub fn new(device: &Arc<CudaDevice>) -> Result<Self> {
        device.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: raw is a valid out pointer.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut raw, sys::CUevent_flags::CU_EVENT_DEFAULT as u32) })?;
        Ok(Self { raw, device: Arc::clone(device) })
    }
    /// Records the event on `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.device.bind()?;
        // SAFETY: both are live objects of this context.
        check("cuEventRecord", unsafe { sys::cuEventRecord(self.raw, stream.raw()) })
    }
    /// Waits for the event on the host.
    pub fn synchronize(&self) -> Result<()> {
        self.device.bind()?;
        // SAFETY: the event is live.
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(self.raw) })
    }
    /// Waits for the event on the host for at most `timeout`; false on time-out.
    /// Used wherever the event depends on another API (an external semaphore),
    /// so that a missing signal shows up as an error instead of a hang.
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> Result<bool> {
        self.device.bind()?;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            // SAFETY: the event is live.
            let r = unsafe { sys::cuEventQuery(self.raw) };
            if r != sys::CUresult::CUDA_ERROR_NOT_READY {
                check("cuEventQuery", r)?;
                return Ok(true);
            }
            if std::time::Instant::now() >= deadline {
                return Ok(false);
            }
            std::thread::yield_now();
        }
    }

    /// Like [`wait_timeout`](Self::wait_timeout), sleeping 50 µs between polls
    /// instead of yielding: no busy core, a wake-up within about 0.1 ms.
    pub fn wait_sleeping(&self, timeout: std::time::Duration) -> Result<bool> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if self.query()? {
                return Ok(true);
            }
            if std::time::Instant::now() >= deadline {
                return Ok(false);
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }

    /// Whether the event has completed (no waiting).
    pub fn query(&self) -> Result<bool> {
        self.device.bind()?;
        // SAFETY: the event is live.
        let r = unsafe { sys::cuEventQuery(self.raw) };
        if r == sys::CUresult::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        check("cuEventQuery", r)?;
        Ok(true)
    }

    /// Milliseconds from `start` to this event (both recorded and complete).
    pub fn elapsed_since(&self, start: &Event) -> Result<f32> {
        self.device.bind()?;
        let mut ms = 0f32;
        // SAFETY: both events are live and have completed (callers synchronise first).
        check("cuEventElapsedTime", unsafe { sys::cuEventElapsedTime_v2(&mut ms, start.raw, self.raw) })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = self.device.bind();
        // SAFETY: the event is destroyed once.
        let r = unsafe { sys::cuEventDestroy_v2(self.raw) };
        if r != sys::CUresult::CUDA_SUCCESS {
            log::error!("cuEventDestroy failed: {r:?}");
        }
    }
}
