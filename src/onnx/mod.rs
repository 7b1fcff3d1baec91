//! The ONNX Runtime side: finding the runtime, the model contract, sessions
//! with the chosen execution provider, and binding external memory. Sealed:
//! the crate's face re-exports the contract types and the runtime's report.

pub(crate) mod binding;
pub(crate) mod convact;
pub(crate) mod convact_op;
pub(crate) mod declare;
pub(crate) mod fp16;
pub(crate) mod layout;
pub(crate) mod model;
pub(crate) mod precision;
pub(crate) mod preload;
#[cfg(feature = "cuda")]
pub(crate) mod probe;
pub(crate) mod proto;
pub(crate) mod runtime;
pub(crate) mod session;
pub(crate) mod share;
pub(crate) mod shuffle;
pub(crate) mod shuffle_op;
pub(crate) mod tensor;

pub(crate) use binding::{Binding, Placement, TensorValue};
pub use declare::TensorDeclaration;
pub use model::{ModelContract, NamedTensor, PROBE_SIZE, Scale, ScaleSource};
pub use precision::{Precision, PrecisionCheck, PrecisionReport};
pub use runtime::RuntimeInfo;
pub use session::ConvSearch;
pub use tensor::{ColorOrder, Element, Layout, Normalization, TensorKind};
