//! The Vulkan side: a headless instance, device selection, exportable memory,
//! transfers and synchronisation objects.

pub mod adapter;
pub mod compute;
pub mod conv;
pub mod device;
pub mod instance;
pub mod memory;
pub mod pattern;
pub mod query;
pub mod sync;
pub mod transfer;

pub use adapter::{AdapterInfo, DeviceSelector};
pub use device::Device;
pub use instance::{Instance, InstanceOptions};
pub use memory::{Buffer, BufferMemory, ExportedMemory, Image, ImageDesc};
pub use sync::TimelineSemaphore;
