//! The CUDA side: the device matching a Vulkan UUID, Vulkan memory and
//! semaphores imported into CUDA, streams, events and captured graphs. The
//! driver library is loaded at run time, so nothing here is needed to build or
//! to run the CPU tests. Sealed: only the crate's own modules use it.
//!
//! Without the `cuda` feature, [`stub`] stands in: the same names, uninhabited,
//! every way in failing with "built without CUDA" (the one `cfg` of the build).

#[cfg(feature = "cuda")]
pub(crate) mod cudnn;
#[cfg(feature = "cuda")]
pub(crate) mod cudnn_cache;
#[cfg(feature = "cuda")]
pub(crate) mod device;
#[cfg(feature = "cuda")]
pub(crate) mod graph;
#[cfg(feature = "cuda")]
pub(crate) mod kernels;
#[cfg(feature = "cuda")]
pub(crate) mod memory;
pub(crate) mod params;
#[cfg(feature = "cuda")]
pub(crate) mod result;
#[cfg(feature = "cuda")]
pub(crate) mod semaphore;
#[cfg(feature = "cuda")]
pub(crate) mod stream;

#[cfg(feature = "cuda")]
pub(crate) use device::CudaDevice;
#[cfg(feature = "cuda")]
pub(crate) use graph::Graph;
#[cfg(feature = "cuda")]
pub(crate) use kernels::{PassKernels, Surface};
#[cfg(feature = "cuda")]
pub(crate) use memory::{DeviceBuffer, ExternalMemory, MappedBuffer};
pub(crate) use params::{Access, PostParams, PreParams, SurfaceFormat, TensorParams};
#[cfg(feature = "cuda")]
pub(crate) use result::{devices, init};
#[cfg(feature = "cuda")]
pub(crate) use semaphore::ExternalSemaphore;
#[cfg(feature = "cuda")]
pub(crate) use stream::{Event, Stream};

#[cfg(not(feature = "cuda"))]
pub(crate) mod stub;
#[cfg(not(feature = "cuda"))]
pub(crate) use stub::{
    CudaDevice, DeviceBuffer, Event, ExternalMemory, ExternalSemaphore, Graph, MappedBuffer, PassKernels, Stream,
    Surface, devices, init,
};
