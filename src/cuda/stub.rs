//! The CUDA side of a build without the `cuda` feature: the same types as the
//! real module, uninhabited, so that no value of them can exist. Every way in
//! (`init`, `devices`, and the constructors, which need a device) fails with
//! [`Error::CudaUnavailable`] saying how to rebuild, and the CPU backend is the
//! only one; the code that would use CUDA compiles unchanged and is unreachable.

use std::sync::Arc;

use crate::cuda::params::SurfaceFormat;
use crate::error::{Error, Result};
use crate::handle::ExternalHandle;

/// Why nothing here works.
fn unavailable() -> Error {
    Error::CudaUnavailable {
        reason: "neural-frame was built without its `cuda` feature (no CUDA code in this build): rebuild with the \
                 default features to use the CUDA backend"
            .into(),
    }
}

/// Always fails: this build has no CUDA.
pub(crate) fn init() -> Result<()> {
    Err(unavailable())
}

/// A CUDA device as the driver lists it (none, in this build).
#[derive(Debug, Clone)]
pub struct CudaDeviceInfo {
    /// The CUDA ordinal.
    pub ordinal: i32,
    /// The device's name.
    pub name: String,
    /// Its UUID.
    pub uuid: [u8; 16],
}

/// Always fails: this build has no CUDA.
pub(crate) fn devices() -> Result<Vec<CudaDeviceInfo>> {
    Err(unavailable())
}

/// Raw driver types as the real module names them.
pub(crate) mod sys {
    pub type CUdeviceptr = u64;
    /// A stream no build of this kind can make.
    pub enum CUstreamSt {}
    pub type CUstream = *mut CUstreamSt;
}

/// No CUDA device exists in this build.
pub(crate) enum CudaDevice {}

impl CudaDevice {
    pub fn by_uuid(_uuid: &[u8; 16]) -> Result<Arc<Self>> {
        Err(unavailable())
    }
    pub fn info(&self) -> &CudaDeviceInfo {
        match *self {}
    }
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        match *self {}
    }
    pub fn synchronize(&self) -> Result<()> {
        match *self {}
    }
}

pub(crate) enum Stream {}

impl Stream {
    pub fn new(device: &Arc<CudaDevice>) -> Result<Self> {
        match **device {}
    }
    pub fn with_priority(device: &Arc<CudaDevice>, _high: bool) -> Result<Self> {
        match **device {}
    }
    pub fn raw(&self) -> sys::CUstream {
        match *self {}
    }
    pub fn synchronize(&self) -> Result<()> {
        match *self {}
    }
    pub fn device(&self) -> &Arc<CudaDevice> {
        match *self {}
    }
    pub fn wait_event(&self, _event: &Event) -> Result<()> {
        match *self {}
    }
}

pub(crate) enum Event {}

impl Event {
    pub fn new(device: &Arc<CudaDevice>) -> Result<Self> {
        match **device {}
    }
    pub fn record(&self, _stream: &Stream) -> Result<()> {
        match *self {}
    }
    pub fn synchronize(&self) -> Result<()> {
        match *self {}
    }
    pub fn wait_timeout(&self, _timeout: std::time::Duration) -> Result<bool> {
        match *self {}
    }
    pub fn query(&self) -> Result<bool> {
        match *self {}
    }
    pub fn wait_sleeping(&self, _timeout: std::time::Duration) -> Result<bool> {
        match *self {}
    }
    pub fn elapsed_since(&self, _start: &Event) -> Result<f32> {
        match *self {}
    }
}

pub(crate) enum Graph {}

impl Graph {
    pub fn capture(stream: &Stream, _enqueue: impl FnOnce() -> Result<()>) -> Result<Self> {
        match *stream {}
    }
    pub fn launch(&self, _stream: &Stream) -> Result<()> {
        match *self {}
    }
    pub fn nodes(&self) -> usize {
        match *self {}
    }
}

pub(crate) enum ExternalMemory {}

impl ExternalMemory {
    pub fn import(device: &Arc<CudaDevice>, _handle: ExternalHandle, _size: u64, _dedicated: bool) -> Result<Self> {
        match **device {}
    }
    pub fn map_buffer(self, _offset: u64, _len: u64) -> Result<MappedBuffer> {
        match self {}
    }
    pub fn map_rgba8_array(self, _width: u32, _height: u32) -> Result<MappedArray> {
        match self {}
    }
    pub fn map_surface_array(self, _width: u32, _height: u32, _format: SurfaceFormat) -> Result<MappedArray> {
        match self {}
    }
}

pub(crate) enum MappedBuffer {}

impl MappedBuffer {
    pub fn ptr(&self) -> sys::CUdeviceptr {
        match *self {}
    }
    pub fn device(&self) -> &Arc<CudaDevice> {
        match *self {}
    }
    pub fn write_from_host(&self, _data: &[u8]) -> Result<()> {
        match *self {}
    }
}

pub(crate) enum MappedArray {}

pub(crate) enum DeviceBuffer {}

impl DeviceBuffer {
    pub fn new(device: &Arc<CudaDevice>, _len: usize) -> Result<Self> {
        match **device {}
    }
    pub fn ptr(&self) -> sys::CUdeviceptr {
        match *self {}
    }
    pub fn len(&self) -> usize {
        match *self {}
    }
    pub fn fill(&self, _value: u8, _stream: &Stream) -> Result<()> {
        match *self {}
    }
    pub fn to_host(&self) -> Result<Vec<u8>> {
        match *self {}
    }
    pub fn copy_from_array(&self, _array: &MappedArray, _stream: &Stream) -> Result<()> {
        match *self {}
    }
    pub fn copy_from_mapped(&self, _src: &MappedBuffer, _len: usize, _stream: &Stream) -> Result<()> {
        match *self {}
    }
}

pub(crate) enum ExternalSemaphore {}

impl ExternalSemaphore {
    pub fn import_timeline(device: &Arc<CudaDevice>, _handle: ExternalHandle) -> Result<Self> {
        match **device {}
    }
    pub fn signal(&self, _stream: &Stream, _value: u64) -> Result<()> {
        match *self {}
    }
    pub fn wait(&self, _stream: &Stream, _value: u64) -> Result<()> {
        match *self {}
    }
}

pub(crate) enum PassKernels {}

impl PassKernels {
    pub fn load(device: &Arc<CudaDevice>) -> Result<Self> {
        match **device {}
    }
    pub fn pre(&self, _stream: &Stream, _params: &crate::cuda::PreParams) -> Result<()> {
        match *self {}
    }
    pub fn post(&self, _stream: &Stream, _params: &crate::cuda::PostParams) -> Result<()> {
        match *self {}
    }
}

pub(crate) enum Surface {}

impl Surface {
    pub fn new(array: MappedArray) -> Result<Self> {
        match array {}
    }
    pub fn raw(&self) -> u64 {
        match *self {}
    }
}

/// Like the real types, each "releases" its object when dropped (none exists).
macro_rules! released {
    ($($t:ty),*) => {$(
        impl Drop for $t {
            fn drop(&mut self) {
                match *self {}
            }
        }
    )*};
}

released!(
    CudaDevice,
    Stream,
    Event,
    Graph,
    ExternalMemory,
    MappedBuffer,
    MappedArray,
    DeviceBuffer,
    ExternalSemaphore,
    PassKernels,
    Surface
);
