//! The client's errors.

use std::fmt;

use ash::vk;

use crate::protocol::ErrorCode;

/// What can go wrong on the renderer's side of a connection.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A Vulkan call failed.
    Vulkan {
        /// The call.
        call: &'static str,
        /// Its result.
        result: vk::Result,
    },
    /// The caller's device cannot do what serving needs; `what` is missing,
    /// `remedy` would satisfy it.
    Unsupported {
        /// What is missing.
        what: String,
        /// What would satisfy it.
        remedy: String,
    },
    /// An argument the client refuses before anything is sent.
    InvalidArgument(String),
    /// The socket failed.
    Io {
        /// What the client was doing.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The worker refused something (its `Error` message), or sent what the
    /// protocol does not allow (then `code` is the client's verdict).
    Protocol {
        /// The fault's code.
        code: ErrorCode,
        /// The worker's (or the client's) words.
        message: String,
    },
    /// The worker closed the connection or died; frames in flight are lost, and
    /// the client's GPU waits on them were released.
    WorkerGone(String),
    /// A wait ran out.
    Timeout(String),
}

impl Error {
    pub(crate) fn vk(call: &'static str) -> impl FnOnce(vk::Result) -> Error {
        move |result| Error::Vulkan { call, result }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Vulkan { call, result } => write!(f, "{call} failed: {result}"),
            Error::Unsupported { what, remedy } => write!(f, "unsupported: {what}; {remedy}"),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::Protocol { code, message } => write!(f, "{message} ({code:?})"),
            Error::WorkerGone(m) => write!(f, "the worker is gone: {m}"),
            Error::Timeout(m) => write!(f, "timed out: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The client's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
