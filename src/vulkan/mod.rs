//! The Vulkan side: a headless instance (or the caller's), device selection,
//! capability checks, exportable and imported memory, transfers, timeline
//! semaphores, command recording, compute passes and timestamp queries.
//! Sealed: the crate's face re-exports what a user needs.

pub(crate) mod adapter;
pub(crate) mod caps;
pub(crate) mod command;
pub(crate) mod compute;
pub(crate) mod conv;
pub(crate) mod device;
pub(crate) mod external;
#[cfg(target_os = "linux")]
pub(crate) mod host_file;
pub(crate) mod instance;
pub(crate) mod memory;
pub(crate) mod pattern;
mod placed;
pub(crate) mod query;
pub(crate) mod sync;
pub(crate) mod transfer;

pub use adapter::{AdapterInfo, DeviceSelector};
pub(crate) use caps::ImageDesc;
pub(crate) use device::Device;
pub use external::{
    EXTERNAL_MEMORY_EXTENSION, EXTERNAL_MEMORY_HANDLE_TYPE, EXTERNAL_SEMAPHORE_EXTENSION,
    EXTERNAL_SEMAPHORE_HANDLE_TYPE,
};
pub(crate) use instance::{Instance, InstanceOptions};
pub(crate) use memory::{Buffer, BufferMemory, ExportedMemory, Image};
pub(crate) use placed::Allocation;
pub(crate) use sync::TimelineSemaphore;
