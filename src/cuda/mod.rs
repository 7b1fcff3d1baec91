//! The CUDA side: the device matching a Vulkan UUID, Vulkan memory and
//! semaphores imported into CUDA, streams, events and captured graphs. The
//! driver library is loaded at run time, so nothing here is needed to build or
//! to run the CPU tests. Sealed: only the crate's own modules use it.

pub(crate) mod device;
pub(crate) mod graph;
pub(crate) mod memory;
pub(crate) mod result;
pub(crate) mod semaphore;
pub(crate) mod stream;

pub(crate) use device::CudaDevice;
pub(crate) use graph::Graph;
pub(crate) use memory::{DeviceBuffer, ExternalMemory, MappedBuffer};
pub(crate) use result::{devices, init};
pub(crate) use semaphore::ExternalSemaphore;
pub(crate) use stream::{Event, Stream};
