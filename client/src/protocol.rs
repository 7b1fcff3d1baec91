//! The messages of the serve protocol and their encoding (docs/protocol.md is
//! the reference; this module is its implementation, shared by the client and
//! the worker).
//!
//! Every message is one frame: a 8-byte header — `u32` length of what follows
//! the length field (kind, fd count and body), `u16` kind, `u16` number of file
//! descriptors carried with it — and then its body. All integers are
//! little-endian, strings are a `u16` byte length and UTF-8 bytes, and there is
//! no padding beyond what a body lists.
//!
//! ```
//! use neural_frame_client::protocol::{HEADER, Message};
//!
//! let submit = Message::Submit { frame: 1, input_slot: 0, output_slot: 2, rendered: 0, output_free: 0 };
//! let frame = submit.encode();
//! // The header: the length of what follows the length field, the kind, the fd count.
//! let length = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
//! let kind = u16::from_le_bytes([frame[4], frame[5]]);
//! let fds = u16::from_le_bytes([frame[6], frame[7]]);
//! assert_eq!((length, kind, fds), (frame.len() - 4, submit.kind(), 0));
//! // The body decodes back into the same message.
//! assert_eq!(Message::decode(kind, &frame[HEADER..])?, submit);
//! # Ok::<(), neural_frame_client::protocol::WireError>(())
//! ```

use std::fmt;

/// The protocol's magic, first in a hello.
///
/// ```
/// use neural_frame_client::protocol::{Geometry, HEADER, MAGIC, Message, SYNC_HOST, VERSION};
///
/// assert_eq!(&MAGIC, b"NFRM");
/// let hello = Message::Hello {
///     version: VERSION,
///     device_uuid: [0; 16],
///     driver_uuid: [0; 16],
///     input: Geometry { width: 4, height: 4, format: 37, row_pitch: 16 },
///     input_slots: 1,
///     output_slots: 1,
///     sync_modes: SYNC_HOST,
///     model: String::new(),
/// };
/// assert_eq!(hello.encode()[HEADER..HEADER + 4], MAGIC);
/// ```
pub const MAGIC: [u8; 4] = *b"NFRM";
/// The protocol version this crate speaks.
///
/// A hello of another version is refused with [`ErrorCode::Version`]:
///
/// ```
/// use neural_frame_client::protocol::{ErrorCode, Geometry, HEADER, Message, SYNC_HOST, VERSION, kind};
///
/// assert_eq!(VERSION, 1);
/// let hello = |version| Message::Hello {
///     version,
///     device_uuid: [0; 16],
///     driver_uuid: [0; 16],
///     input: Geometry { width: 4, height: 4, format: 37, row_pitch: 16 },
///     input_slots: 1,
///     output_slots: 1,
///     sync_modes: SYNC_HOST,
///     model: String::new(),
/// };
/// let newer = hello(VERSION + 1).encode();
/// let refused = Message::decode(kind::HELLO, &newer[HEADER..]).unwrap_err();
/// assert_eq!(refused.code, ErrorCode::Version);
/// ```
pub const VERSION: u16 = 1;
/// The largest frame (header included) either side accepts.
///
/// Strings are cut to [`MAX_STRING`] bytes, so even the longest message fits:
///
/// ```
/// use neural_frame_client::protocol::{ErrorCode, MAX_MESSAGE, Message};
///
/// assert_eq!(MAX_MESSAGE, 65536);
/// let error = Message::Error { code: ErrorCode::Inference, message: "x".repeat(MAX_MESSAGE) };
/// assert!(error.encode().len() <= MAX_MESSAGE);
/// ```
pub const MAX_MESSAGE: usize = 64 * 1024;
/// The most file descriptors one frame may carry.
///
/// The most a valid frame needs is a `Slots` message in GPU mode with
/// [`MAX_SLOTS`] slots on each side and the client's timeline:
///
/// ```
/// use neural_frame_client::protocol::{MAX_FDS, MAX_SLOTS, Message, SlotMemory};
///
/// let memory = SlotMemory {
///     allocation_size: 1 << 20,
///     buffer_size: 1 << 20,
///     memory_type_index: 0,
///     usage: 0x23,
///     dedicated: true,
/// };
/// let slots = Message::Slots {
///     inputs: vec![memory; MAX_SLOTS as usize],
///     outputs: vec![memory; MAX_SLOTS as usize],
///     timeline: true,
/// };
/// assert_eq!(slots.fd_count(), 33);
/// assert!(slots.fd_count() <= MAX_FDS);
/// ```
pub const MAX_FDS: usize = 64;
/// The longest string a message carries, in bytes (longer ones are cut at a character boundary).
///
/// ```
/// use neural_frame_client::protocol::{HEADER, MAX_STRING, Message};
///
/// let bye = Message::Bye { reason: "é".repeat(MAX_STRING) }; // 2 bytes a character
/// let Message::Bye { reason } = Message::decode(bye.kind(), &bye.encode()[HEADER..])? else { unreachable!() };
/// assert_eq!(reason.len(), MAX_STRING);
/// assert_eq!(reason.chars().count(), MAX_STRING / 2);
/// # Ok::<(), neural_frame_client::protocol::WireError>(())
/// ```
pub const MAX_STRING: usize = 8 * 1024;
/// The most slots on either side.
///
/// [`Options`](crate::Options) takes 1 to `MAX_SLOTS` input and output slots,
/// and a `Slots` message with more does not decode:
///
/// ```
/// use neural_frame_client::protocol::{ErrorCode, HEADER, MAX_SLOTS, Message, SlotMemory};
///
/// assert_eq!(MAX_SLOTS, 16);
/// let memory =
///     SlotMemory { allocation_size: 4096, buffer_size: 4096, memory_type_index: 0, usage: 0x20, dedicated: true };
/// let slots = Message::Slots { inputs: vec![memory; MAX_SLOTS as usize + 1], outputs: vec![memory], timeline: false };
/// let refused = Message::decode(slots.kind(), &slots.encode()[HEADER..]).unwrap_err();
/// assert_eq!(refused.code, ErrorCode::Malformed);
/// ```
pub const MAX_SLOTS: u16 = 16;
/// Bytes of the frame header.
///
/// The header is the `u32` length, the `u16` kind and the `u16` fd count; the
/// body follows it.
///
/// ```
/// use neural_frame_client::protocol::{HEADER, Message};
///
/// assert_eq!(HEADER, 8);
/// let consumed = Message::Consumed { frame: 7 };
/// let frame = consumed.encode();
/// assert_eq!(frame.len(), HEADER + 8); // a Consumed body is its u64 frame number
/// assert_eq!(frame[HEADER..], 7u64.to_le_bytes());
/// ```
pub const HEADER: usize = 8;

/// Sync mode bits in a hello.
///
/// ```
/// use neural_frame_client::protocol::{SYNC_GPU, SYNC_HOST, SyncMode};
///
/// assert_eq!(SYNC_HOST, SyncMode::Host.bits());
/// let offered = SYNC_HOST | SYNC_GPU; // what a client on a device that can share timelines offers
/// assert_eq!(offered, 3);
/// assert!(offered & SYNC_GPU != 0);
/// ```
pub const SYNC_HOST: u32 = 1;
/// See [`SYNC_HOST`].
///
/// ```
/// use neural_frame_client::protocol::{SYNC_GPU, SyncMode};
///
/// assert_eq!(SYNC_GPU, SyncMode::Gpu.bits());
/// let host_only = neural_frame_client::protocol::SYNC_HOST;
/// assert_eq!(host_only & SYNC_GPU, 0);
/// ```
pub const SYNC_GPU: u32 = 2;

/// How frames are handed over.
///
/// The worker chooses it ([`Client::sync_mode`](crate::Client::sync_mode) says
/// which); it travels in a `Welcome`:
///
/// ```
/// use neural_frame_client::protocol::{Geometry, HEADER, Message, VERSION};
/// use neural_frame_client::SyncMode;
///
/// let welcome = Message::Welcome {
///     version: VERSION,
///     sync_mode: SyncMode::Host,
///     model: "upscale.onnx".into(),
///     output: Geometry { width: 1920, height: 1080, format: 37, row_pitch: 1920 * 4 },
///     max_in_flight: 3,
/// };
/// let Message::Welcome { sync_mode, .. } = Message::decode(welcome.kind(), &welcome.encode()[HEADER..])? else {
///     unreachable!()
/// };
/// assert_eq!(sync_mode, SyncMode::Host);
/// # Ok::<(), neural_frame_client::protocol::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Completion travels as socket messages: the client submits once its writes are
    /// complete, and learns of "input consumed" and "output ready" from `Consumed`
    /// and `Done`.
    Host,
    /// Timeline semaphores shared on the GPU: the worker's GPU waits on the client's
    /// "rendered" timeline, the client's GPU on the worker's two timelines.
    Gpu,
}

impl SyncMode {
    /// The wire value (1 host, 2 GPU).
    ///
    /// ```
    /// use neural_frame_client::SyncMode;
    /// use neural_frame_client::protocol::{SYNC_GPU, SYNC_HOST};
    ///
    /// assert_eq!(SyncMode::Host.bits(), 1);
    /// assert_eq!(SyncMode::Gpu.bits(), 2);
    /// let offered = SYNC_HOST | SYNC_GPU;
    /// assert!([SyncMode::Host, SyncMode::Gpu].iter().all(|m| offered & m.bits() != 0));
    /// ```
    pub fn bits(self) -> u32 {
        match self {
            SyncMode::Host => SYNC_HOST,
            SyncMode::Gpu => SYNC_GPU,
        }
    }
    fn from_bits(bits: u32) -> Result<Self, WireError> {
        match bits {
            SYNC_HOST => Ok(SyncMode::Host),
            SYNC_GPU => Ok(SyncMode::Gpu),
            b => Err(WireError::malformed(format!("sync mode {b} (1 host or 2 GPU)"))),
        }
    }
}

/// Why a connection ends with an error (the `Error` message's code).
///
/// The enum is `#[non_exhaustive]`: a `match` needs a `_` arm.
///
/// ```
/// use neural_frame_client::ErrorCode;
///
/// fn advice(code: ErrorCode) -> &'static str {
///     match code {
///         ErrorCode::Busy => "the worker serves its maximum of clients: try later, or start another worker",
///         ErrorCode::WrongDevice => "render on the worker's GPU",
///         ErrorCode::Format => "render in a format and size the model takes",
///         _ => "a bug on one side: report it",
///     }
/// }
/// assert_eq!(advice(ErrorCode::from_code(11)), advice(ErrorCode::Busy));
/// assert_eq!(advice(ErrorCode::Other(99)), "a bug on one side: report it");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCode {
    /// A frame that does not parse: a bad length, kind, or body.
    Malformed,
    /// A protocol version or magic this side does not speak.
    Version,
    /// A message that does not belong in the connection's state.
    State,
    /// A frame carried another number of file descriptors than its body needs.
    FdCount,
    /// A descriptor that could not be imported as the memory or semaphore described.
    BadHandle,
    /// Memory smaller than the frame it is declared to hold.
    TooSmall,
    /// The client's GPU is not the worker's (deviceUUID or driverUUID differ).
    WrongDevice,
    /// A frame format or size the model cannot take.
    Format,
    /// A slot index past the slots handed over.
    SlotRange,
    /// A frame number or semaphore value that does not increase.
    Backwards,
    /// The worker serves its maximum of clients.
    Busy,
    /// The client asked for a model other than the worker's (workers serve one model).
    Model,
    /// A sync mode the other side cannot do.
    SyncMode,
    /// The peer's user is not allowed.
    Permission,
    /// A frame failed on the worker (its message says why).
    Inference,
    /// The other side gave up waiting.
    Timeout,
    /// A code this crate does not know (a newer peer).
    Other(u32),
}

impl ErrorCode {
    /// The wire value.
    ///
    /// ```
    /// use neural_frame_client::ErrorCode;
    ///
    /// assert_eq!(ErrorCode::Malformed.code(), 1);
    /// assert_eq!(ErrorCode::Timeout.code(), 16);
    /// assert_eq!(ErrorCode::Other(99).code(), 99); // a newer peer's code, kept as it came
    /// ```
    pub fn code(self) -> u32 {
        match self {
            ErrorCode::Malformed => 1,
            ErrorCode::Version => 2,
            ErrorCode::State => 3,
            ErrorCode::FdCount => 4,
            ErrorCode::BadHandle => 5,
            ErrorCode::TooSmall => 6,
            ErrorCode::WrongDevice => 7,
            ErrorCode::Format => 8,
            ErrorCode::SlotRange => 9,
            ErrorCode::Backwards => 10,
            ErrorCode::Busy => 11,
            ErrorCode::Model => 12,
            ErrorCode::SyncMode => 13,
            ErrorCode::Permission => 14,
            ErrorCode::Inference => 15,
            ErrorCode::Timeout => 16,
            ErrorCode::Other(c) => c,
        }
    }
    /// From the wire value; codes this crate does not know are kept as
    /// [`ErrorCode::Other`].
    ///
    /// ```
    /// use neural_frame_client::ErrorCode;
    ///
    /// assert_eq!(ErrorCode::from_code(9), ErrorCode::SlotRange);
    /// assert_eq!(ErrorCode::from_code(17), ErrorCode::Other(17));
    /// // Every wire value survives the round trip.
    /// for code in 0..64 {
    ///     assert_eq!(ErrorCode::from_code(code).code(), code);
    /// }
    /// ```
    pub fn from_code(code: u32) -> Self {
        match code {
            1 => ErrorCode::Malformed,
            2 => ErrorCode::Version,
            3 => ErrorCode::State,
            4 => ErrorCode::FdCount,
            5 => ErrorCode::BadHandle,
            6 => ErrorCode::TooSmall,
            7 => ErrorCode::WrongDevice,
            8 => ErrorCode::Format,
            9 => ErrorCode::SlotRange,
            10 => ErrorCode::Backwards,
            11 => ErrorCode::Busy,
            12 => ErrorCode::Model,
            13 => ErrorCode::SyncMode,
            14 => ErrorCode::Permission,
            15 => ErrorCode::Inference,
            16 => ErrorCode::Timeout,
            c => ErrorCode::Other(c),
        }
    }
}

/// A frame's pixels in a slot buffer: `height` rows of `width` pixels of
/// `format` (a `VkFormat` value), `row_pitch` bytes apart, from offset 0.
///
/// ```
/// use neural_frame_client::ash::vk;
/// use neural_frame_client::{Geometry, bytes_per_pixel};
///
/// let format = vk::Format::R8G8B8A8_UNORM;
/// let width = 960;
/// let row_pitch = width as u64 * bytes_per_pixel(format).ok_or("a format the worker does not take")?;
/// let frame = Geometry { width, height: 540, format: format.as_raw() as u32, row_pitch };
/// assert_eq!(frame.format, 37);
/// assert_eq!(frame.bytes(), Some(960 * 4 * 540));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// The `VkFormat` (`R8G8B8A8_UNORM` = 37, `B8G8R8A8_UNORM` = 44, `R16G16B16A16_SFLOAT` = 97, …).
    pub format: u32,
    /// Bytes from one row to the next.
    pub row_pitch: u64,
}

impl Geometry {
    /// Bytes the pixels span (`row_pitch × height`), `None` on overflow.
    ///
    /// ```
    /// use neural_frame_client::Geometry;
    ///
    /// let padded = Geometry { width: 1000, height: 10, format: 37, row_pitch: 4096 };
    /// assert_eq!(padded.bytes(), Some(40960)); // the row pitch counts, not the width
    /// let absurd = Geometry { width: 1, height: u32::MAX, format: 37, row_pitch: u64::MAX };
    /// assert_eq!(absurd.bytes(), None);
    /// ```
    pub fn bytes(&self) -> Option<u64> {
        self.row_pitch.checked_mul(self.height as u64)
    }
}

/// One slot's memory, as the client allocated it (its fd travels with `Slots`).
///
/// The client fills these in itself; a worker reads them to import the memory.
///
/// ```
/// use neural_frame_client::protocol::{HEADER, Message, SlotMemory};
///
/// let memory = SlotMemory {
///     allocation_size: 2 << 20,
///     buffer_size: 960 * 540 * 4,
///     memory_type_index: 1,
///     usage: 0x23, // STORAGE_BUFFER | TRANSFER_SRC | TRANSFER_DST
///     dedicated: true,
/// };
/// let slots = Message::Slots { inputs: vec![memory], outputs: vec![memory], timeline: false };
/// let Message::Slots { inputs, .. } = Message::decode(slots.kind(), &slots.encode()[HEADER..])? else {
///     unreachable!()
/// };
/// assert_eq!(inputs[0], memory);
/// assert!(inputs[0].allocation_size >= inputs[0].buffer_size);
/// # Ok::<(), neural_frame_client::protocol::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotMemory {
    /// `VkMemoryAllocateInfo::allocationSize`.
    pub allocation_size: u64,
    /// `VkBufferCreateInfo::size`.
    pub buffer_size: u64,
    /// `VkMemoryAllocateInfo::memoryTypeIndex`.
    pub memory_type_index: u32,
    /// `VkBufferCreateInfo::usage`.
    pub usage: u32,
    /// A dedicated allocation for the buffer.
    pub dedicated: bool,
}

/// Every message of the protocol.
///
/// Each encodes to one frame ([`encode`](Message::encode)) and decodes from
/// its kind and body ([`decode`](Message::decode)):
///
/// ```
/// use neural_frame_client::protocol::{ErrorCode, HEADER, Message};
///
/// fn round_trip(m: &Message) -> Result<Message, neural_frame_client::protocol::WireError> {
///     Message::decode(m.kind(), &m.encode()[HEADER..])
/// }
/// for m in [
///     Message::Submit { frame: 1, input_slot: 0, output_slot: 0, rendered: 0, output_free: 0 },
///     Message::Consumed { frame: 1 },
///     Message::Done { frame: 1, infer_ms: 4.25 },
///     Message::Bye { reason: "the client is done".into() },
///     Message::Error { code: ErrorCode::SlotRange, message: "slot 3 of 3".into() },
/// ] {
///     assert_eq!(round_trip(&m)?, m);
/// }
/// # Ok::<(), neural_frame_client::protocol::WireError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Client → worker, first: who the client is and what it will send.
    ///
    /// ```
    /// use neural_frame_client::protocol::{Geometry, HEADER, MAGIC, Message, SYNC_GPU, SYNC_HOST, VERSION};
    ///
    /// let hello = Message::Hello {
    ///     version: VERSION,
    ///     device_uuid: [0x73; 16],
    ///     driver_uuid: [0x01; 16],
    ///     input: Geometry { width: 960, height: 540, format: 37, row_pitch: 960 * 4 },
    ///     input_slots: 3,
    ///     output_slots: 3,
    ///     sync_modes: SYNC_HOST | SYNC_GPU,
    ///     model: String::new(), // the worker's own
    /// };
    /// let frame = hello.encode();
    /// assert_eq!(frame.len(), HEADER + 74); // 74 bytes and the model's name
    /// assert_eq!(frame[HEADER..HEADER + 4], MAGIC);
    /// assert_eq!(Message::decode(hello.kind(), &frame[HEADER..])?, hello);
    /// # Ok::<(), neural_frame_client::protocol::WireError>(())
    /// ```
    Hello {
        /// The protocol version the client speaks ([`VERSION`]).
        version: u16,
        /// `VkPhysicalDeviceIDProperties::deviceUUID` of the client's GPU.
        device_uuid: [u8; 16],
        /// `VkPhysicalDeviceIDProperties::driverUUID`.
        driver_uuid: [u8; 16],
        /// The input frames.
        input: Geometry,
        /// Input slots the client will hand over.
        input_slots: u16,
        /// Output slots the client will hand over.
        output_slots: u16,
        /// The sync modes the client can do ([`SYNC_HOST`] | [`SYNC_GPU`]).
        sync_modes: u32,
        /// The model the client asks for; empty for the worker's own.
        model: String,
    },
    /// Worker → client: the frame format accepted, and what the output slots must hold.
    ///
    /// ```
    /// use neural_frame_client::SyncMode;
    /// use neural_frame_client::protocol::{Geometry, HEADER, Message, VERSION};
    ///
    /// let output = Geometry { width: 1920, height: 1080, format: 37, row_pitch: 1920 * 4 };
    /// let welcome = Message::Welcome {
    ///     version: VERSION,
    ///     sync_mode: SyncMode::Gpu,
    ///     model: "x2".into(),
    ///     output,
    ///     max_in_flight: 2,
    /// };
    /// let frame = welcome.encode();
    /// assert_eq!(frame.len(), HEADER + 38 + 2); // 38 bytes and the model's name
    /// assert_eq!(Message::decode(welcome.kind(), &frame[HEADER..])?, welcome);
    /// // Each output slot holds at least this much:
    /// assert_eq!(output.bytes(), Some(1920 * 4 * 1080));
    /// # Ok::<(), neural_frame_client::protocol::WireError>(())
    /// ```
    Welcome {
        /// The protocol version the worker speaks.
        version: u16,
        /// The sync mode chosen.
        sync_mode: SyncMode,
        /// The model's name.
        model: String,
        /// The output frames (tightly packed rows).
        output: Geometry,
        /// Frames the worker holds in flight at most; more wait in the socket.
        max_in_flight: u32,
    },
    /// Client → worker: the slots' memory, inputs then outputs; fds in the same
    /// order, then (GPU mode) the client's "rendered" timeline semaphore.
    ///
    /// ```
    /// use neural_frame_client::protocol::{HEADER, Message, SlotMemory};
    ///
    /// let memory = SlotMemory {
    ///     allocation_size: 65536,
    ///     buffer_size: 61440,
    ///     memory_type_index: 2,
    ///     usage: 0x23,
    ///     dedicated: true,
    /// };
    /// let slots = Message::Slots { inputs: vec![memory; 3], outputs: vec![memory; 2], timeline: true };
    /// assert_eq!(slots.fd_count(), 3 + 2 + 1); // the memories' fds, then the timeline's
    /// let frame = slots.encode();
    /// assert_eq!(frame.len(), HEADER + 8 + 28 * 5);
    /// assert_eq!(Message::decode(slots.kind(), &frame[HEADER..])?, slots);
    /// # Ok::<(), neural_frame_client::protocol::WireError>(())
    /// ```
    Slots {
        /// The input slots.
        inputs: Vec<SlotMemory>,
        /// The output slots.
        outputs: Vec<SlotMemory>,
        /// Whether a timeline semaphore's fd follows the memories' fds.
        timeline: bool,
    },
    /// Worker → client: everything imported. In GPU mode two fds come with it:
    /// the worker's "input consumed" and "output ready" timelines.
    ///
    /// ```
    /// use neural_frame_client::protocol::{ErrorCode, HEADER, Message};
    ///
    /// assert_eq!(Message::Ready { timelines: 0 }.fd_count(), 0); // host mode
    /// assert_eq!(Message::Ready { timelines: 2 }.fd_count(), 2); // GPU mode
    /// // Any other count encodes, but does not decode.
    /// let odd = Message::Ready { timelines: 1 };
    /// assert_eq!(Message::decode(odd.kind(), &odd.encode()[HEADER..]).unwrap_err().code, ErrorCode::Malformed);
    /// ```
    Ready {
        /// The number of timeline fds carried (0 or 2).
        timelines: u8,
    },
    /// Client → worker: run one frame.
    ///
    /// [`Client::submit`](crate::Client::submit) sends it.
    ///
    /// ```
    /// use neural_frame_client::protocol::{HEADER, Message};
    ///
    /// // GPU mode, frame 5: read input slot 1 once "rendered" reaches 5, write output slot 1
    /// // once it reaches 2 (the renderer's read of the slot's previous result).
    /// let submit = Message::Submit { frame: 5, input_slot: 1, output_slot: 1, rendered: 5, output_free: 2 };
    /// let frame = submit.encode();
    /// assert_eq!(frame.len(), HEADER + 28);
    /// assert_eq!(Message::decode(submit.kind(), &frame[HEADER..])?, submit);
    /// # Ok::<(), neural_frame_client::protocol::WireError>(())
    /// ```
    Submit {
        /// The client's frame number, increasing from 1.
        frame: u64,
        /// The input slot.
        input_slot: u16,
        /// The output slot.
        output_slot: u16,
        /// GPU mode: the worker's GPU waits for the client's timeline to reach this
        /// ("rendered") before reading the input slot; strictly increasing from
        /// frame to frame. Host mode: 0.
        rendered: u64,
        /// GPU mode: 0 (the output slot is free now), or a value on the client's
        /// timeline the worker's GPU waits for before writing the output slot;
        /// non-zero values do not decrease. Host mode: 0.
        output_free: u64,
    },
    /// Worker → client: the frame is submitted, and its signals are enqueued on the
    /// worker's GPU: the client may now wait for these values (GPU mode).
    ///
    /// [`Client::enqueued`](crate::Client::enqueued) waits for it.
    ///
    /// ```
    /// use neural_frame_client::protocol::{HEADER, Message};
    ///
    /// let enqueued = Message::Enqueued { frame: 5, input_consumed: 5, output_ready: 5 };
    /// let frame = enqueued.encode();
    /// assert_eq!(frame.len(), HEADER + 24);
    /// assert_eq!(Message::decode(enqueued.kind(), &frame[HEADER..])?, enqueued);
    /// # Ok::<(), neural_frame_client::protocol::WireError>(())
    /// ```
    Enqueued {
        /// The client's frame number.
        frame: u64,
        /// The value the worker's "input consumed" timeline reaches.
        input_consumed: u64,
        /// The value the worker's "output ready" timeline reaches.
        output_ready: u64,
    },
    /// Worker → client: the frame's input has been read (the slot may be rewritten).
    ///
    /// [`Client::wait_consumed`](crate::Client::wait_consumed) waits for it.
    ///
    /// ```
    /// use neural_frame_client::protocol::{HEADER, Message};
    ///
    /// let consumed = Message::Consumed { frame: 5 };
    /// let frame = consumed.encode();
    /// assert_eq!(frame.len(), HEADER + 8);
    /// assert_eq!(Message::decode(consumed.kind(), &frame[HEADER..])?, consumed);
    /// # Ok::<(), neural_frame_client::protocol::WireError>(())
    /// ```
    Consumed {
        /// The client's frame number.
        frame: u64,
    },
    /// Worker → client: the frame's output is written.
    ///
    /// [`Client::wait_done`](crate::Client::wait_done) waits for it.
    ///
    /// ```
    /// use neural_frame_client::protocol::{HEADER, Message};
    ///
    /// let done = Message::Done { frame: 5, infer_ms: f64::NAN }; // a worker that did not time the model
    /// let frame = done.encode();
    /// assert_eq!(frame.len(), HEADER + 16);
    /// // NaN is not equal to itself, so compare the fields, not the messages.
    /// let Message::Done { frame: 5, infer_ms } = Message::decode(done.kind(), &frame[HEADER..])? else {
    ///     unreachable!()
    /// };
    /// assert!(infer_ms.is_nan());
    /// # Ok::<(), neural_frame_client::protocol::WireError>(())
    /// ```
    Done {
        /// The client's frame number.
        frame: u64,
        /// The model's time on the worker, in milliseconds (NaN where unknown).
        infer_ms: f64,
    },
    /// Either way: the sender is leaving, after finishing the frames in flight.
    ///
    /// [`Client::close`](crate::Client::close) sends it.
    ///
    /// ```
    /// use neural_frame_client::protocol::{HEADER, Message};
    ///
    /// let bye = Message::Bye { reason: "shutting down".into() };
    /// let frame = bye.encode();
    /// assert_eq!(frame.len(), HEADER + 2 + "shutting down".len());
    /// assert_eq!(Message::decode(bye.kind(), &frame[HEADER..])?, bye);
    /// # Ok::<(), neural_frame_client::protocol::WireError>(())
    /// ```
    Bye {
        /// Why.
        reason: String,
    },
    /// Either way: a fault; the sender closes the connection after it.
    ///
    /// The client turns one from the worker into
    /// [`Error::Protocol`](crate::Error::Protocol).
    ///
    /// ```
    /// use neural_frame_client::protocol::{ErrorCode, HEADER, Message};
    ///
    /// let error = Message::Error { code: ErrorCode::Busy, message: "the worker serves 4 clients".into() };
    /// let frame = error.encode();
    /// assert_eq!(frame.len(), HEADER + 6 + "the worker serves 4 clients".len());
    /// assert_eq!(Message::decode(error.kind(), &frame[HEADER..])?, error);
    /// // A code from a newer peer is kept as a number.
    /// let newer = Message::Error { code: ErrorCode::Other(40), message: String::new() };
    /// assert_eq!(Message::decode(newer.kind(), &newer.encode()[HEADER..])?, newer);
    /// # Ok::<(), neural_frame_client::protocol::WireError>(())
    /// ```
    Error {
        /// What kind of fault.
        code: ErrorCode,
        /// What went wrong and what to do.
        message: String,
    },
}

/// The kinds' wire values.
///
/// ```
/// use neural_frame_client::protocol::{Message, kind};
///
/// let frame = Message::Consumed { frame: 3 }.encode();
/// match u16::from_le_bytes([frame[4], frame[5]]) {
///     kind::ENQUEUED | kind::CONSUMED | kind::DONE => {} // the per-frame answers
///     kind::BYE | kind::ERROR => panic!("the worker is leaving"),
///     other => panic!("a kind {other} message while streaming"),
/// }
/// assert_eq!((kind::HELLO, kind::ERROR), (1, 10));
/// ```
pub mod kind {
    /// [`Message::Hello`](super::Message::Hello).
    ///
    /// ```
    /// use neural_frame_client::protocol::{kind, kind_name};
    ///
    /// assert_eq!((kind::HELLO, kind_name(kind::HELLO)), (1, "Hello"));
    /// ```
    pub const HELLO: u16 = 1;
    /// [`Message::Welcome`](super::Message::Welcome).
    ///
    /// ```
    /// use neural_frame_client::protocol::{kind, kind_name};
    ///
    /// assert_eq!((kind::WELCOME, kind_name(kind::WELCOME)), (2, "Welcome"));
    /// ```
    pub const WELCOME: u16 = 2;
    /// [`Message::Slots`](super::Message::Slots).
    ///
    /// ```
    /// use neural_frame_client::protocol::{kind, kind_name};
    ///
    /// assert_eq!((kind::SLOTS, kind_name(kind::SLOTS)), (3, "Slots"));
    /// ```
    pub const SLOTS: u16 = 3;
    /// [`Message::Ready`](super::Message::Ready).
    ///
    /// ```
    /// use neural_frame_client::protocol::{kind, kind_name};
    ///
    /// assert_eq!((kind::READY, kind_name(kind::READY)), (4, "Ready"));
    /// ```
    pub const READY: u16 = 4;
    /// [`Message::Submit`](super::Message::Submit).
    ///
    /// ```
    /// use neural_frame_client::protocol::{kind, kind_name};
    ///
    /// assert_eq!((kind::SUBMIT, kind_name(kind::SUBMIT)), (5, "Submit"));
    /// ```
    pub const SUBMIT: u16 = 5;
    /// [`Message::Enqueued`](super::Message::Enqueued).
    ///
    /// ```
    /// use neural_frame_client::protocol::{kind, kind_name};
    ///
    /// assert_eq!((kind::ENQUEUED, kind_name(kind::ENQUEUED)), (6, "Enqueued"));
    /// ```
    pub const ENQUEUED: u16 = 6;
    /// [`Message::Consumed`](super::Message::Consumed).
    ///
    /// ```
    /// use neural_frame_client::protocol::{kind, kind_name};
    ///
    /// assert_eq!((kind::CONSUMED, kind_name(kind::CONSUMED)), (7, "Consumed"));
    /// ```
    pub const CONSUMED: u16 = 7;
    /// [`Message::Done`](super::Message::Done).
    ///
    /// ```
    /// use neural_frame_client::protocol::{kind, kind_name};
    ///
    /// assert_eq!((kind::DONE, kind_name(kind::DONE)), (8, "Done"));
    /// ```
    pub const DONE: u16 = 8;
    /// [`Message::Bye`](super::Message::Bye).
    ///
    /// ```
    /// use neural_frame_client::protocol::{kind, kind_name};
    ///
    /// assert_eq!((kind::BYE, kind_name(kind::BYE)), (9, "Bye"));
    /// ```
    pub const BYE: u16 = 9;
    /// [`Message::Error`](super::Message::Error).
    ///
    /// ```
    /// use neural_frame_client::protocol::{kind, kind_name};
    ///
    /// assert_eq!((kind::ERROR, kind_name(kind::ERROR)), (10, "Error"));
    /// ```
    pub const ERROR: u16 = 10;
}

impl Message {
    /// The message's kind on the wire.
    ///
    /// ```
    /// use neural_frame_client::protocol::{Message, kind};
    ///
    /// assert_eq!(Message::Consumed { frame: 1 }.kind(), kind::CONSUMED);
    /// assert_eq!(Message::Ready { timelines: 0 }.kind(), 4);
    /// ```
    pub fn kind(&self) -> u16 {
        match self {
            Message::Hello { .. } => kind::HELLO,
            Message::Welcome { .. } => kind::WELCOME,
            Message::Slots { .. } => kind::SLOTS,
            Message::Ready { .. } => kind::READY,
            Message::Submit { .. } => kind::SUBMIT,
            Message::Enqueued { .. } => kind::ENQUEUED,
            Message::Consumed { .. } => kind::CONSUMED,
            Message::Done { .. } => kind::DONE,
            Message::Bye { .. } => kind::BYE,
            Message::Error { .. } => kind::ERROR,
        }
    }

    /// The number of file descriptors that must travel with this message.
    ///
    /// [`wire::send`](crate::wire::send) refuses another number.
    ///
    /// ```
    /// use neural_frame_client::protocol::{Message, SlotMemory};
    ///
    /// let memory =
    ///     SlotMemory { allocation_size: 4096, buffer_size: 4096, memory_type_index: 0, usage: 0x20, dedicated: true };
    /// let host = Message::Slots { inputs: vec![memory; 3], outputs: vec![memory; 3], timeline: false };
    /// assert_eq!(host.fd_count(), 6);
    /// assert_eq!(Message::Ready { timelines: 2 }.fd_count(), 2);
    /// assert_eq!(Message::Done { frame: 1, infer_ms: 1.0 }.fd_count(), 0);
    /// ```
    pub fn fd_count(&self) -> usize {
        match self {
            Message::Slots { inputs, outputs, timeline } => inputs.len() + outputs.len() + usize::from(*timeline),
            Message::Ready { timelines } => usize::from(*timelines),
            _ => 0,
        }
    }

    /// The whole frame: header and body.
    ///
    /// ```
    /// use neural_frame_client::protocol::{HEADER, Message};
    ///
    /// let frame = Message::Ready { timelines: 2 }.encode();
    /// assert_eq!(frame.len(), HEADER + 4);
    /// assert_eq!(frame[..4], 8u32.to_le_bytes()); // what follows the length field: kind, fd count, body
    /// assert_eq!(frame[4..6], 4u16.to_le_bytes()); // kind::READY
    /// assert_eq!(frame[6..8], 2u16.to_le_bytes()); // two descriptors travel with it
    /// assert_eq!(frame[8..], 2u32.to_le_bytes());
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(64));
        w.u32(0); // length, patched below
        w.u16(self.kind());
        w.u16(self.fd_count() as u16);
        match self {
            Message::Hello {
                version,
                device_uuid,
                driver_uuid,
                input,
                input_slots,
                output_slots,
                sync_modes,
                model,
            } => {
                w.bytes(&MAGIC);
                w.u16(*version);
                w.u16(0);
                w.bytes(device_uuid);
                w.bytes(driver_uuid);
                w.geometry(input);
                w.u16(*input_slots);
                w.u16(*output_slots);
                w.u32(*sync_modes);
                w.string(model);
            }
            Message::Welcome { version, sync_mode, model, output, max_in_flight } => {
                w.u16(*version);
                w.u16(0);
                w.u32(sync_mode.bits());
                w.geometry(output);
                w.u32(*max_in_flight);
                w.string(model);
            }
            Message::Slots { inputs, outputs, timeline } => {
                w.u16(inputs.len() as u16);
                w.u16(outputs.len() as u16);
                w.u32(u32::from(*timeline));
                for m in inputs.iter().chain(outputs) {
                    w.u64(m.allocation_size);
                    w.u64(m.buffer_size);
                    w.u32(m.memory_type_index);
                    w.u32(m.usage);
                    w.u32(u32::from(m.dedicated));
                }
            }
            Message::Ready { timelines } => w.u32(u32::from(*timelines)),
            Message::Submit { frame, input_slot, output_slot, rendered, output_free } => {
                w.u64(*frame);
                w.u16(*input_slot);
                w.u16(*output_slot);
                w.u64(*rendered);
                w.u64(*output_free);
            }
            Message::Enqueued { frame, input_consumed, output_ready } => {
                w.u64(*frame);
                w.u64(*input_consumed);
                w.u64(*output_ready);
            }
            Message::Consumed { frame } => w.u64(*frame),
            Message::Done { frame, infer_ms } => {
                w.u64(*frame);
                w.u64(infer_ms.to_bits());
            }
            Message::Bye { reason } => w.string(reason),
            Message::Error { code, message } => {
                w.u32(code.code());
                w.string(message);
            }
        }
        let len = (w.0.len() - 4) as u32;
        w.0[..4].copy_from_slice(&len.to_le_bytes());
        w.0
    }

    /// A message from its kind and body (the bytes after the header).
    ///
    /// The body must be exactly as long as its kind needs; the error carries the
    /// [`ErrorCode`] to answer with.
    ///
    /// ```
    /// use neural_frame_client::protocol::{ErrorCode, HEADER, Message, kind};
    ///
    /// let frame = Message::Consumed { frame: 3 }.encode();
    /// assert_eq!(Message::decode(kind::CONSUMED, &frame[HEADER..])?, Message::Consumed { frame: 3 });
    /// // Short, long, or of an unknown kind: Malformed.
    /// assert_eq!(Message::decode(kind::CONSUMED, &frame[HEADER..HEADER + 7]).unwrap_err().code, ErrorCode::Malformed);
    /// assert_eq!(Message::decode(kind::CONSUMED, &[0; 9]).unwrap_err().code, ErrorCode::Malformed);
    /// assert_eq!(Message::decode(99, &[]).unwrap_err().code, ErrorCode::Malformed);
    /// # Ok::<(), neural_frame_client::protocol::WireError>(())
    /// ```
    pub fn decode(kind: u16, body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader { buf: body, at: 0 };
        let m = match kind {
            kind::HELLO => {
                let magic = r.array::<4>()?;
                if magic != MAGIC {
                    return Err(WireError::new(
                        ErrorCode::Version,
                        format!(
                            "the hello starts with {magic:02x?}, not the magic \"NFRM\": not a neural-frame client"
                        ),
                    ));
                }
                let version = r.u16()?;
                if version != VERSION {
                    // Another version's body may differ: the version is all that can be read.
                    return Err(WireError::new(
                        ErrorCode::Version,
                        format!("protocol version {version}: this side speaks version {VERSION}"),
                    ));
                }
                r.u16()?;
                Message::Hello {
                    version,
                    device_uuid: r.array()?,
                    driver_uuid: r.array()?,
                    input: r.geometry()?,
                    input_slots: r.u16()?,
                    output_slots: r.u16()?,
                    sync_modes: r.u32()?,
                    model: r.string()?,
                }
            }
            kind::WELCOME => {
                let version = r.u16()?;
                r.u16()?;
                let sync_mode = SyncMode::from_bits(r.u32()?)?;
                let output = r.geometry()?;
                let max_in_flight = r.u32()?;
                Message::Welcome { version, sync_mode, output, max_in_flight, model: r.string()? }
            }
            kind::SLOTS => {
                let (n_in, n_out) = (r.u16()?, r.u16()?);
                if n_in > MAX_SLOTS || n_out > MAX_SLOTS {
                    return Err(WireError::malformed(format!(
                        "{n_in} input and {n_out} output slots: at most {MAX_SLOTS} each"
                    )));
                }
                let timeline = r.bool()?;
                let mut slots = Vec::with_capacity(usize::from(n_in + n_out));
                for _ in 0..n_in + n_out {
                    slots.push(SlotMemory {
                        allocation_size: r.u64()?,
                        buffer_size: r.u64()?,
                        memory_type_index: r.u32()?,
                        usage: r.u32()?,
                        dedicated: r.bool()?,
                    });
                }
                let outputs = slots.split_off(usize::from(n_in));
                Message::Slots { inputs: slots, outputs, timeline }
            }
            kind::READY => {
                let timelines = r.u32()?;
                if timelines != 0 && timelines != 2 {
                    return Err(WireError::malformed(format!("Ready carries {timelines} timelines (0 or 2)")));
                }
                Message::Ready { timelines: timelines as u8 }
            }
            kind::SUBMIT => Message::Submit {
                frame: r.u64()?,
                input_slot: r.u16()?,
                output_slot: r.u16()?,
                rendered: r.u64()?,
                output_free: r.u64()?,
            },
            kind::ENQUEUED => Message::Enqueued { frame: r.u64()?, input_consumed: r.u64()?, output_ready: r.u64()? },
            kind::CONSUMED => Message::Consumed { frame: r.u64()? },
            kind::DONE => Message::Done { frame: r.u64()?, infer_ms: f64::from_bits(r.u64()?) },
            kind::BYE => Message::Bye { reason: r.string()? },
            kind::ERROR => Message::Error { code: ErrorCode::from_code(r.u32()?), message: r.string()? },
            k => return Err(WireError::malformed(format!("unknown message kind {k}"))),
        };
        if r.at != body.len() {
            return Err(WireError::malformed(format!(
                "{} bytes after the end of a {} message",
                body.len() - r.at,
                kind_name(kind)
            )));
        }
        Ok(m)
    }
}

/// A kind's name, for messages.
///
/// ```
/// use neural_frame_client::protocol::{kind, kind_name};
///
/// assert_eq!(kind_name(kind::DONE), "Done");
/// assert_eq!(kind_name(99), "unknown");
/// ```
pub fn kind_name(kind: u16) -> &'static str {
    match kind {
        kind::HELLO => "Hello",
        kind::WELCOME => "Welcome",
        kind::SLOTS => "Slots",
        kind::READY => "Ready",
        kind::SUBMIT => "Submit",
        kind::ENQUEUED => "Enqueued",
        kind::CONSUMED => "Consumed",
        kind::DONE => "Done",
        kind::BYE => "Bye",
        kind::ERROR => "Error",
        _ => "unknown",
    }
}

/// A frame that does not follow the protocol, with the code to answer it with.
///
/// ```
/// use neural_frame_client::protocol::{ErrorCode, Message, kind};
///
/// // A Ready that claims one timeline.
/// let fault = Message::decode(kind::READY, &1u32.to_le_bytes()).unwrap_err();
/// assert_eq!(fault.code, ErrorCode::Malformed);
/// // The answer to the peer, before closing the connection:
/// let answer = Message::Error { code: fault.code, message: fault.message.clone() };
/// assert_eq!(answer.kind(), kind::ERROR);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// The code for the `Error` reply.
    pub code: ErrorCode,
    /// What is wrong.
    pub message: String,
}

impl WireError {
    /// A fault with its code.
    ///
    /// ```
    /// use neural_frame_client::protocol::{ErrorCode, WireError};
    ///
    /// let e = WireError::new(ErrorCode::Model, "the worker serves upscale.onnx, not x4.onnx");
    /// assert_eq!(e.to_string(), "the worker serves upscale.onnx, not x4.onnx (Model)");
    /// ```
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
    fn malformed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Malformed, message)
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?})", self.message, self.code)
    }
}

impl std::error::Error for WireError {}

struct Writer(Vec<u8>);

impl Writer {
    fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    fn u16(&mut self, v: u16) {
        self.bytes(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn string(&mut self, s: &str) {
        // Longer strings are cut at a character boundary, so that every frame stays below MAX_MESSAGE.
        let mut end = s.len().min(MAX_STRING);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u16(end as u16);
        self.bytes(&s.as_bytes()[..end]);
    }
    fn geometry(&mut self, g: &Geometry) {
        self.u32(g.width);
        self.u32(g.height);
        self.u32(g.format);
        self.u32(0);
        self.u64(g.row_pitch);
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], WireError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or_else(|| {
            WireError::malformed(format!("the body ends at byte {} where {} more were expected", self.buf.len(), n))
        })?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn bool(&mut self) -> Result<bool, WireError> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(WireError::malformed(format!("a flag of {v} (0 or 1)"))),
        }
    }
    fn string(&mut self) -> Result<String, WireError> {
        let n = self.u16()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| WireError::malformed("a string that is not UTF-8"))
    }
    fn geometry(&mut self) -> Result<Geometry, WireError> {
        let (width, height, format) = (self.u32()?, self.u32()?, self.u32()?);
        self.u32()?;
        Ok(Geometry { width, height, format, row_pitch: self.u64()? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Message> {
        let g = Geometry { width: 64, height: 48, format: 37, row_pitch: 256 };
        let m = SlotMemory {
            allocation_size: 65536,
            buffer_size: 12288,
            memory_type_index: 2,
            usage: 0x23,
            dedicated: true,
        };
        vec![
            Message::Hello {
                version: VERSION,
                device_uuid: [1; 16],
                driver_uuid: [2; 16],
                input: g,
                input_slots: 3,
                output_slots: 2,
                sync_modes: SYNC_HOST | SYNC_GPU,
                model: "x4".into(),
            },
            Message::Welcome {
                version: VERSION,
                sync_mode: SyncMode::Gpu,
                model: "m".into(),
                output: g,
                max_in_flight: 3,
            },
            Message::Slots { inputs: vec![m; 3], outputs: vec![m; 2], timeline: true },
            Message::Ready { timelines: 2 },
            Message::Submit { frame: 7, input_slot: 1, output_slot: 0, rendered: 9, output_free: 4 },
            Message::Enqueued { frame: 7, input_consumed: 5, output_ready: 5 },
            Message::Consumed { frame: 7 },
            Message::Done { frame: 7, infer_ms: 1.5 },
            Message::Bye { reason: "shutting down".into() },
            Message::Error { code: ErrorCode::SlotRange, message: "slot 9 of 3".into() },
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in all() {
            let bytes = m.encode();
            let len = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
            assert_eq!(len + 4, bytes.len(), "{m:?}");
            let kind = u16::from_le_bytes([bytes[4], bytes[5]]);
            let fds = u16::from_le_bytes([bytes[6], bytes[7]]);
            assert_eq!(fds as usize, m.fd_count());
            assert_eq!(Message::decode(kind, &bytes[HEADER..]).expect("decodes"), m);
        }
    }

    #[test]
    fn truncated_and_padded_bodies_are_malformed() {
        for m in all() {
            let bytes = m.encode();
            let kind = m.kind();
            let body = &bytes[HEADER..];
            for cut in 0..body.len() {
                let e = Message::decode(kind, &body[..cut]);
                assert!(e.is_err(), "{m:?} cut at {cut} decoded");
            }
            let mut long = body.to_vec();
            long.push(0);
            assert_eq!(Message::decode(kind, &long).expect_err("padded").code, ErrorCode::Malformed);
        }
        assert_eq!(Message::decode(99, &[]).expect_err("kind").code, ErrorCode::Malformed);
    }

    #[test]
    fn strings_are_cut_to_fit_a_frame() {
        let m = Message::Error { code: ErrorCode::Inference, message: "é".repeat(MAX_MESSAGE) };
        let bytes = m.encode();
        assert!(bytes.len() <= MAX_MESSAGE);
        let Message::Error { message, .. } = Message::decode(kind::ERROR, &bytes[HEADER..]).expect("decodes") else {
            panic!("not an Error")
        };
        assert!(message.len() <= MAX_STRING && message.chars().all(|c| c == 'é'));
    }

    #[test]
    fn another_version_is_a_version_error_whatever_its_body() {
        let mut bytes = all()[0].encode();
        bytes[HEADER + 4..HEADER + 6].copy_from_slice(&2u16.to_le_bytes());
        bytes.extend_from_slice(&[0; 16]); // a longer body, as a later version may have
        assert_eq!(Message::decode(kind::HELLO, &bytes[HEADER..]).expect_err("version 2").code, ErrorCode::Version);
    }

    #[test]
    fn a_hello_without_the_magic_is_a_version_error() {
        let mut bytes = all()[0].encode();
        bytes[HEADER] = b'X';
        assert_eq!(Message::decode(kind::HELLO, &bytes[HEADER..]).expect_err("magic").code, ErrorCode::Version);
    }
}
