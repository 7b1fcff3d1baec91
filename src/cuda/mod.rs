//! The CUDA side: the device matching a Vulkan UUID, Vulkan memory and
//! semaphores imported into CUDA, streams, events and captured graphs. The driver library is
//! loaded at run time, so nothing here is needed to build or to run the CPU tests.

pub mod device;
pub mod graph;
pub mod memory;
pub mod result;
pub mod semaphore;
pub mod stream;

pub use device::CudaDevice;
pub use graph::Graph;
pub use memory::{DeviceBuffer, ExternalMemory, MappedArray, MappedBuffer};
pub use result::{CudaDeviceInfo, devices, init};
pub use semaphore::ExternalSemaphore;
pub use stream::{Event, Stream};
