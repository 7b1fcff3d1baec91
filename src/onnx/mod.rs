//! The ONNX Runtime side: finding the runtime, the model contract, sessions
//! with the chosen execution provider, and binding external memory.

pub mod binding;
pub mod model;
pub mod runtime;
pub mod session;

pub use binding::{BoundTensors, Placement};
pub use model::{ModelContract, TensorKind};
pub use runtime::RuntimeInfo;
