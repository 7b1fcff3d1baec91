//! The client's errors.
//!
//! [`Error`] and [`Result`] are also at the crate's root.
//!
//! ```
//! use neural_frame_client::error::{Error, Result};
//!
//! fn slot_count(n: u16) -> Result<u16> {
//!     match n {
//!         1..=16 => Ok(n),
//!         _ => Err(Error::InvalidArgument(format!("{n} slots: 1 to 16"))),
//!     }
//! }
//! assert_eq!(slot_count(3)?, 3);
//! assert!(matches!(slot_count(0), Err(neural_frame_client::Error::InvalidArgument(_))));
//! # Ok::<(), neural_frame_client::Error>(())
//! ```

use std::fmt;

use ash::vk;

use crate::protocol::ErrorCode;

/// What can go wrong on the renderer's side of a connection.
///
/// Match on the variant for control flow; the message (`Display`) says what
/// failed. The enum is `#[non_exhaustive]`: a `match` needs a `_` arm. Only
/// [`InvalidArgument`](Error::InvalidArgument) leaves a connected
/// [`Client`](crate::Client) usable; after [`Protocol`](Error::Protocol),
/// [`WorkerGone`](Error::WorkerGone) or [`Timeout`](Error::Timeout) the client
/// has given the worker up: the frames in flight are lost, and later
/// submissions fail with `WorkerGone`.
///
/// ```
/// use neural_frame_client::{Error, ErrorCode};
///
/// fn advice(e: &Error) -> &'static str {
///     match e {
///         Error::InvalidArgument(_) => "fix the call; the connection is still up",
///         Error::Protocol { code: ErrorCode::Busy, .. } => "the worker is full: try later",
///         Error::WorkerGone(_) | Error::Timeout(_) => "connect again (or to another worker)",
///         Error::Unsupported { .. } => "enable what the message names, or ask for host mode",
///         _ => "give up",
///     }
/// }
/// let busy = Error::Protocol { code: ErrorCode::Busy, message: "the worker serves 4 clients".into() };
/// assert_eq!(advice(&busy), "the worker is full: try later");
/// assert_eq!(busy.to_string(), "the worker serves 4 clients (Busy)");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A Vulkan call failed.
    ///
    /// ```
    /// use neural_frame_client::Error;
    /// use neural_frame_client::ash::vk;
    ///
    /// let e = Error::Vulkan { call: "vkAllocateMemory", result: vk::Result::ERROR_OUT_OF_DEVICE_MEMORY };
    /// assert_eq!(e.to_string(), "vkAllocateMemory failed: A device memory allocation has failed");
    /// assert!(matches!(e, Error::Vulkan { result: vk::Result::ERROR_OUT_OF_DEVICE_MEMORY, .. }));
    /// ```
    Vulkan {
        /// The call.
        call: &'static str,
        /// Its result.
        result: vk::Result,
    },
    /// The caller's device cannot do what serving needs; `what` is missing,
    /// `remedy` would satisfy it.
    ///
    /// [`Client::connect`](crate::Client::connect) returns it for a device that
    /// lacks what serving needs, and for a socket served by another user.
    ///
    /// ```
    /// use neural_frame_client::Error;
    ///
    /// let e = Error::Unsupported {
    ///     what: "VK_KHR_external_memory_fd on the caller's device".into(),
    ///     remedy: "enable VK_KHR_external_memory_fd in VkDeviceCreateInfo::ppEnabledExtensionNames".into(),
    /// };
    /// assert!(e.to_string().starts_with("unsupported: VK_KHR_external_memory_fd on the caller's device; enable"));
    /// ```
    Unsupported {
        /// What is missing.
        what: String,
        /// What would satisfy it.
        remedy: String,
    },
    /// An argument the client refuses before anything is sent; the connection
    /// is not affected.
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client) -> neural_frame_client::Result<()> {
    /// use neural_frame_client::Error;
    ///
    /// // Slot indices run below input_slots() and output_slots().
    /// let past = client.input_slots();
    /// assert!(matches!(client.submit(past, 0, 0, 0), Err(Error::InvalidArgument(_))));
    /// client.poll()?; // still connected
    /// # Ok(()) }
    /// ```
    InvalidArgument(String),
    /// The socket failed.
    ///
    /// ```
    /// use std::io;
    ///
    /// use neural_frame_client::Error;
    ///
    /// let e = Error::Io {
    ///     what: "connecting to the worker at /run/user/1000/neural-frame.sock".into(),
    ///     source: io::Error::from(io::ErrorKind::NotFound),
    /// };
    /// // The socket's own error is the source.
    /// let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<io::Error>());
    /// assert_eq!(source.map(io::Error::kind), Some(io::ErrorKind::NotFound));
    /// ```
    Io {
        /// What the client was doing.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The worker refused something (its `Error` message), or sent what the
    /// protocol does not allow (then `code` is the client's verdict). The
    /// connection is over.
    ///
    /// ```
    /// use neural_frame_client::{Error, ErrorCode};
    ///
    /// let e = Error::Protocol { code: ErrorCode::WrongDevice, message: "the worker runs on another GPU".into() };
    /// if let Error::Protocol { code: ErrorCode::WrongDevice, message } = &e {
    ///     assert_eq!(message, "the worker runs on another GPU");
    /// }
    /// assert_eq!(e.to_string(), "the worker runs on another GPU (WrongDevice)");
    /// ```
    Protocol {
        /// The fault's code.
        code: ErrorCode,
        /// The worker's (or the client's) words.
        message: String,
    },
    /// The worker closed the connection or died; frames in flight are lost, and
    /// the client's GPU waits on them were released.
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client) -> neural_frame_client::Result<()> {
    /// use neural_frame_client::Error;
    ///
    /// match client.poll() {
    ///     Ok(()) => {}
    ///     // The renderer's queue no longer waits on the worker: connect again.
    ///     Err(Error::WorkerGone(why)) => eprintln!("the worker left: {why}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    WorkerGone(String),
    /// A wait ran out. The client has given the worker up, as for
    /// [`WorkerGone`](Error::WorkerGone): the connection is over.
    ///
    /// ```no_run
    /// # use neural_frame_client::{Client, FrameId, Result};
    /// # fn example(client: &mut Client, frame: FrameId) -> Result<()> {
    /// use std::time::Duration;
    ///
    /// use neural_frame_client::Error;
    ///
    /// client.set_frame_timeout(Duration::from_secs(2));
    /// match client.wait_done(frame) {
    ///     Ok(ms) => println!("the model took {ms:.1} ms"),
    ///     Err(Error::Timeout(why)) => eprintln!("giving the worker up: {why}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
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
///
/// ```no_run
/// use neural_frame_client::{Client, FrameId, Result};
///
/// /// Waits for every frame, oldest first; the model's total time in ms.
/// fn drain(client: &mut Client, frames: &[FrameId]) -> Result<f64> {
///     let mut total = 0.0;
///     for &frame in frames {
///         total += client.wait_done(frame)?;
///     }
///     Ok(total)
/// }
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;
