//! Registered inputs, outputs and timelines: each checked once when it is
//! registered, then submitted by handle. A registration keeps what the passes
//! need for it (view, descriptor sets and command buffers per ring slot,
//! recorded once), and is freed only when no frame in flight uses it.

use ash::vk;

use crate::context::passes::{Source, Target};
use crate::error::{Error, Result};
use crate::interop::{CudaView, MappedBuffer, SharedAllocation, SharedTimeline};
use crate::onnx::TensorValue;
use crate::vulkan::compute::{DescriptorSet, ImageView};
use crate::vulkan::{Buffer, Image};

/// A registration's place in its context's table. Copy handles name it with the
/// table's generation, so a handle outliving its registration is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) context: u64,
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

/// A registered input (image or buffer). Made only by the context's
/// `create_input_image`, `register_input_*` and `import_input_*`.
///
/// A `Copy` handle: frames name it. It belongs to its context, and is refused
/// once unregistered.
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::{ErrorKind, NeuralFrameContext};
///
/// let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// let input = ctx.create_input_image(vk::Format::B8G8R8A8_UNORM)?;
/// let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
/// ctx.infer(input, output)?;
/// ctx.unregister_input(input)?;
/// let stale = ctx.infer(input, output).expect_err("unregistered");
/// assert_eq!(stale.kind(), ErrorKind::InvalidArgument);
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InputId(pub(crate) Key);

/// A registered output (image or buffer). Made only by the context's
/// `create_output_image`, `register_output_*` and `import_output_*`.
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::NeuralFrameContext;
///
/// let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
/// // Two outputs for one input: full precision and 8-bit, one frame each.
/// let half = ctx.create_output_image(vk::Format::R16G16B16A16_SFLOAT)?;
/// let rgba8 = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
/// ctx.infer(input, half)?;
/// ctx.infer(input, rgba8)?;
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OutputId(pub(crate) Key);

/// A registered timeline semaphore of the caller's, to wait on in
/// [`Frame::wait_for`](crate::Frame::wait_for). Made only by the context's
/// `register_timeline` and `import_timeline`.
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::{Frame, InputId, NeuralFrameContext, OutputId};
///
/// # fn renderer(ctx: &mut NeuralFrameContext, rendered: vk::Semaphore, input: InputId, output: OutputId)
/// # -> neural_frame::Result<()> {
/// // SAFETY: `rendered` is a timeline semaphore of the renderer's device, which the
/// // context is built on, alive until unregistered and its frames are done.
/// let rendered = unsafe { ctx.register_timeline(rendered) }?;
/// ctx.submit(Frame::new(input, output).wait_for(rendered, 1))?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimelineId(pub(crate) Key);

/// An allocation the caller exported, imported once, into which frames' planes are
/// placed. Made only by the context's `import_memory`.
///
/// ```no_run
/// use neural_frame::{MemoryId, MemoryImport, NeuralFrameContext};
///
/// # fn host(ctx: &mut NeuralFrameContext, block: MemoryImport) -> neural_frame::Result<()> {
/// let memory: MemoryId = ctx.import_memory(block)?; // a host's pooled allocation, once
/// // ... place frames' planes in it with place_input_planes / place_output_planes ...
/// ctx.release_memory(memory)?; // freed once no placed plane uses it
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemoryId(pub(crate) Key);

/// Who the memory belongs to, which decides the barriers around its use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Allocated by the context (`create_*_image`): `GENERAL` layout, uploads and readbacks allowed.
    Owned,
    /// The caller's, on the context's device (bring your own device): used in its
    /// declared layout, no queue family transfer.
    Caller,
    /// The caller's exported memory imported into the context's device: moved
    /// to and from `VK_QUEUE_FAMILY_EXTERNAL` around every use, in `GENERAL` layout.
    Imported,
}

/// The resource itself.
pub(crate) enum Resource {
    /// An image, with the view the passes use.
    Image {
        view: ImageView,
        raw: vk::Image,
        format: vk::Format,
        /// The layout it is handed over in (inputs) or given back in (outputs).
        layout: vk::ImageLayout,
        /// The image, when the context created or imported it.
        owned: Option<Image>,
    },
    /// A linear buffer of pixels.
    Buffer {
        raw: vk::Buffer,
        format: vk::Format,
        /// Row pitch in bytes.
        pitch: u64,
        /// Bytes the pixels span.
        bytes: u64,
        /// The buffer, when the context imported it (None: the caller's handle,
        /// or memory only CUDA sees).
        _owned: Option<Buffer>,
    },
    /// A planar frame: a buffer a plane (R, G, B; or one), placed in imported memory.
    Planes {
        /// `R32_SFLOAT` or `R16_SFLOAT`.
        format: vk::Format,
        planes: Vec<PlacedPlane>,
    },
}

/// One plane of a planar frame: a buffer placed in imported memory at or below the
/// plane's offset (where the buffer's alignment allows), and where the plane starts in it.
pub(crate) struct PlacedPlane {
    pub(crate) buffer: Buffer,
    /// Where the plane's first row starts in the buffer, in 32-bit words.
    pub(crate) start: u32,
    /// Row pitch in bytes.
    pub(crate) pitch: u64,
}

/// The model reads or writes the caller's buffer itself: no pass runs (the
/// literal zero-copy case). Fields in teardown order: the value, then the
/// CUDA mapping it points into.
pub(crate) struct Direct {
    pub(crate) value: TensorValue,
    pub(crate) _cuda: Option<MappedBuffer>,
}

/// A pass recorded for one (slot, registration): resubmitted as it is.
pub(crate) struct Recorded {
    pub(crate) cmd: vk::CommandBuffer,
    pub(crate) _set: DescriptorSet,
    /// The slot buffers' generation the descriptors point at.
    pub(crate) generation: u64,
    /// Which of the slot's tensors the pass writes or reads ([`Tensor`](crate::context::record::Tensor)'s
    /// code), for which tile of the frame.
    pub(crate) tensor: (usize, usize),
}

/// One registered input or output. Fields in teardown order: recorded passes
/// (their command buffers are freed by the context's pool), the direct binding,
/// the resource.
pub(crate) struct Registration {
    pub(crate) recorded: Vec<Option<Recorded>>,
    pub(crate) direct: Option<Direct>,
    /// The memory as the CUDA passes see it (CUDA backend with CUDA passes, where
    /// CUDA can import it); `None`: the frame's passes run on Vulkan.
    pub(crate) cuda: Option<CudaView>,
    pub(crate) resource: Resource,
    pub(crate) origin: Origin,
    pub(crate) width: u32,
    pub(crate) height: u32,
}

impl Registration {
    /// What the pre pass reads it as.
    pub(crate) fn source(&self) -> Source {
        match self.resource {
            Resource::Image { .. } => Source::Image,
            Resource::Buffer { .. } => Source::Buffer,
            Resource::Planes { .. } => Source::Planes,
        }
    }

    /// What the post pass writes it as.
    pub(crate) fn target(&self) -> Target {
        match self.resource {
            Resource::Image { format: vk::Format::R16G16B16A16_SFLOAT, .. } => Target::Image16,
            Resource::Image { .. } => Target::Image8,
            Resource::Buffer { .. } => Target::Buffer,
            Resource::Planes { .. } => Target::Planes,
        }
    }

    /// The command buffers recorded for it, to free before it goes.
    pub(crate) fn command_buffers(&self) -> Vec<vk::CommandBuffer> {
        self.recorded.iter().flatten().map(|r| r.cmd).collect()
    }
}

/// What a table entry holds.
pub(crate) enum Entry {
    Input(Registration),
    Output(Registration),
    /// The caller's timeline (imported into CUDA too where it came by descriptor on
    /// the CUDA backend), or the context's own for the host.
    Timeline(SharedTimeline),
    /// Imported memory, for planes placed in it (which keep it alive themselves).
    Memory(std::sync::Arc<SharedAllocation>),
}

struct Cell {
    generation: u32,
    entry: Option<Entry>,
}

/// Registrations awaiting the end of frames that use them.
struct Zombie {
    until: u64,
    entry: Entry,
}

/// The context's registrations.
pub(crate) struct Registry {
    cells: Vec<Cell>,
    zombies: Vec<Zombie>,
    context: u64,
}

impl Registry {
    pub(crate) fn new(context: u64) -> Self {
        Self { cells: Vec::new(), zombies: Vec::new(), context }
    }

    /// Adds an entry and returns its key.
    pub(crate) fn insert(&mut self, entry: Entry) -> Key {
        let index = match self.cells.iter().position(|c| c.entry.is_none()) {
            Some(i) => i,
            None => {
                self.cells.push(Cell { generation: 0, entry: None });
                self.cells.len() - 1
            }
        };
        let cell = &mut self.cells[index];
        cell.generation = cell.generation.wrapping_add(1);
        cell.entry = Some(entry);
        Key { context: self.context, index: index as u32, generation: cell.generation }
    }

    fn cell(&self, key: Key) -> Result<&Entry> {
        if key.context != self.context {
            return Err(Error::InvalidArgument("the handle belongs to another NeuralFrameContext".into()));
        }
        self.cells
            .get(key.index as usize)
            .filter(|c| c.generation == key.generation)
            .and_then(|c| c.entry.as_ref())
            .ok_or_else(|| Error::InvalidArgument("the handle was unregistered".into()))
    }

    fn cell_mut(&mut self, key: Key) -> Result<&mut Entry> {
        if key.context != self.context {
            return Err(Error::InvalidArgument("the handle belongs to another NeuralFrameContext".into()));
        }
        self.cells
            .get_mut(key.index as usize)
            .filter(|c| c.generation == key.generation)
            .and_then(|c| c.entry.as_mut())
            .ok_or_else(|| Error::InvalidArgument("the handle was unregistered".into()))
    }

    /// An input's registration.
    pub(crate) fn input(&self, id: InputId) -> Result<&Registration> {
        match self.cell(id.0)? {
            Entry::Input(r) => Ok(r),
            _ => Err(Error::internal("an input handle naming something else")),
        }
    }

    /// An output's registration.
    pub(crate) fn output(&self, id: OutputId) -> Result<&Registration> {
        match self.cell(id.0)? {
            Entry::Output(r) => Ok(r),
            _ => Err(Error::internal("an output handle naming something else")),
        }
    }

    /// A registration by key (input or output), writable.
    pub(crate) fn registration_mut(&mut self, key: Key) -> Result<&mut Registration> {
        match self.cell_mut(key)? {
            Entry::Input(r) | Entry::Output(r) => Ok(r),
            Entry::Timeline(_) | Entry::Memory(_) => {
                Err(Error::internal("a timeline or memory where a registration was expected"))
            }
        }
    }

    /// A timeline.
    pub(crate) fn timeline(&self, id: TimelineId) -> Result<&SharedTimeline> {
        match self.cell(id.0)? {
            Entry::Timeline(t) => Ok(t),
            _ => Err(Error::internal("a timeline handle naming something else")),
        }
    }

    /// Imported memory.
    pub(crate) fn memory(&self, id: MemoryId) -> Result<&std::sync::Arc<SharedAllocation>> {
        match self.cell(id.0)? {
            Entry::Memory(m) => Ok(m),
            _ => Err(Error::internal("a memory handle naming something else")),
        }
    }

    /// Takes an entry out of the table; the handle is invalid from now on.
    pub(crate) fn remove(&mut self, key: Key) -> Result<Entry> {
        self.cell(key)?;
        self.cells[key.index as usize].entry.take().ok_or_else(|| Error::internal("entry vanished"))
    }

    /// Keeps an entry until the frame of value `until` has retired.
    pub(crate) fn bury(&mut self, entry: Entry, until: u64) {
        self.zombies.push(Zombie { until, entry });
    }

    /// The buried entries whose frames have all retired (`retired`: every frame
    /// up to this value is done), for the context to free.
    pub(crate) fn exhume(&mut self, retired: u64) -> Vec<Entry> {
        let (done, keep): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.zombies).into_iter().partition(|z| z.until <= retired);
        self.zombies = keep;
        done.into_iter().map(|z| z.entry).collect()
    }

    /// Every entry, live and buried, to free on drop.
    pub(crate) fn drain(&mut self) -> Vec<Entry> {
        let mut all: Vec<Entry> = self.cells.iter_mut().filter_map(|c| c.entry.take()).collect();
        all.extend(self.zombies.drain(..).map(|z| z.entry));
        all
    }
}
