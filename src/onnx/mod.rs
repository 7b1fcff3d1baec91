//! The ONNX Runtime side: finding the runtime, the model contract, sessions
//! with the chosen execution provider, the precision check's probe frame, and
//! binding external memory. Sealed: the crate's face re-exports the contract
//! types and the runtime's report. The model files it loads are prepared by
//! [`crate::graph`]; the custom operators they use live in [`crate::ops`].

pub(crate) mod binding;
pub(crate) mod declare;
pub(crate) mod model;
pub(crate) mod preload;
#[cfg(feature = "cuda")]
pub(crate) mod probe;
pub(crate) mod probe_frame;
pub(crate) mod runtime;
pub(crate) mod session;
pub(crate) mod tensor;

pub(crate) use binding::{Binding, Placement, TensorValue};
pub use declare::TensorDeclaration;
pub use model::{ModelContract, NamedTensor, PROBE_SIZE, Scale, ScaleSource};
pub use runtime::RuntimeInfo;
pub use session::ConvSearch;
pub use tensor::{ColorOrder, Element, Layout, Normalization, TensorKind};
