//! A client's hand-over, up to its Ready: its Hello checked, a context built
//! on its GPU, the Welcome, its slots checked (memory.rs) and imported.

use std::os::fd::{AsRawFd, OwnedFd};

use neural_frame::ash::vk;
use neural_frame::{
    BufferImport, DeviceIdentity, DeviceSelector, MemoryImport, PixelLayout, SemaphoreImport, SyncMode,
};
use neural_frame_client::protocol::{self, ErrorCode, Geometry, Message, SlotMemory};

use super::Shared;
use super::memory;
use super::session::{Conn, End, Session, format_of};
use super::watch::Step;

impl Session {
    /// The hand-over, up to the Ready. The session goes into `held` as soon as
    /// its context is built, so that the caller releases it, whatever the outcome.
    pub(super) fn start<'a>(
        conn: &Conn<'_>,
        shared: &Shared,
        held: &'a mut Option<Session>,
    ) -> Result<&'a mut Session, End> {
        let options = &shared.options;
        let watch = conn.watch;
        let (hello, _) = conn.expect("Hello")?;
        let Message::Hello { version, device_uuid, driver_uuid, input, input_slots, output_slots, sync_modes, model } =
            hello
        else {
            return Err(End::fault(
                ErrorCode::State,
                format!("a {} message before the Hello", protocol::kind_name(hello.kind())),
            ));
        };
        if version != protocol::VERSION {
            return Err(End::fault(
                ErrorCode::Version,
                format!("protocol version {version}: this worker speaks version {}", protocol::VERSION),
            ));
        }
        for (n, what) in [(input_slots, "input"), (output_slots, "output")] {
            if !(1..=protocol::MAX_SLOTS).contains(&n) {
                return Err(End::fault(
                    ErrorCode::Malformed,
                    format!("{n} {what} slots: 1 to {}", protocol::MAX_SLOTS),
                ));
            }
        }
        let wanted = &options.model.model;
        let names = [
            wanted.to_string_lossy().into_owned(),
            wanted.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            wanted.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        ];
        if !model.is_empty() && !names.contains(&model) {
            return Err(End::fault(
                ErrorCode::Model,
                format!("the client asks for the model `{model}`; this worker serves {} only", wanted.display()),
            ));
        }
        let format = format_of(input.format);
        let bpp = neural_frame_client::bytes_per_pixel(format).ok_or_else(|| {
            End::fault(
                ErrorCode::Format,
                format!(
                    "the input format {format:?} ({}): the worker takes R8G8B8A8_UNORM/_SRGB, B8G8R8A8_UNORM/_SRGB \
                     and R16G16B16A16_SFLOAT",
                    input.format
                ),
            )
        })?;
        let packed = (input.width as u64).checked_mul(bpp);
        if input.width == 0
            || input.height == 0
            || packed.is_none_or(|p| input.row_pitch < p)
            || input.row_pitch % 4 != 0
            || input.bytes().is_none()
        {
            return Err(End::fault(
                ErrorCode::Format,
                format!(
                    "an input of {}×{} with a row pitch of {} bytes: the sides must be positive and the pitch a \
                     multiple of 4 of at least width × {bpp}",
                    input.width, input.height, input.row_pitch
                ),
            ));
        }
        // The worker's context goes on the client's GPU, found by its UUID (unless --device names one).
        let mut builder =
            options.model.builder(input.width, input.height).slots(options.slots).frame_timeout(options.frame_timeout);
        if options.model.device == DeviceSelector::Auto {
            builder = builder.device(DeviceSelector::Uuid(device_uuid));
        }
        watch.set(Step::Building);
        if let Some(hook) = &shared.stall {
            hook.at("building", watch.client);
        }
        let ctx = builder.build().map_err(|e| match e.kind() {
            neural_frame::ErrorKind::NoDevice => End::fault(
                ErrorCode::WrongDevice,
                format!(
                    "no GPU of the worker's has the client's deviceUUID {}: {e}",
                    neural_frame::format_uuid(&device_uuid)
                ),
            ),
            neural_frame::ErrorKind::InvalidArgument
            | neural_frame::ErrorKind::Unsupported
            | neural_frame::ErrorKind::ModelContract => {
                End::fault(ErrorCode::Format, format!("the model cannot take this frame: {e}"))
            }
            _ => End::fault(ErrorCode::Inference, format!("setting up the model failed: {e}")),
        })?;
        watch.set(Step::Handshake);
        let session = held.insert(Session::new(ctx));
        let ctx = &session.ctx;
        let origin = DeviceIdentity { device_uuid, driver_uuid };
        if ctx.device_identity() != origin {
            return Err(End::fault(
                ErrorCode::WrongDevice,
                format!(
                    "the client's GPU (deviceUUID {}, driverUUID {}) is not the worker's ({}, {})",
                    neural_frame::format_uuid(&device_uuid),
                    neural_frame::format_uuid(&driver_uuid),
                    neural_frame::format_uuid(&ctx.device_identity().device_uuid),
                    neural_frame::format_uuid(&ctx.device_identity().driver_uuid)
                ),
            ));
        }
        let mode = if sync_modes & protocol::SYNC_GPU != 0 && ctx.sync_mode() == SyncMode::Gpu {
            protocol::SyncMode::Gpu
        } else if sync_modes & protocol::SYNC_HOST != 0 {
            protocol::SyncMode::Host
        } else {
            return Err(End::fault(
                ErrorCode::SyncMode,
                format!(
                    "the client offers sync modes {sync_modes:#x}; this worker can do {}",
                    if ctx.sync_mode() == SyncMode::Gpu { "GPU (2) and host (1)" } else { "host (1) only" }
                ),
            ));
        };
        let out_format =
            if neural_frame::OUTPUT_BUFFER_FORMATS.contains(&format) { format } else { vk::Format::R8G8B8A8_UNORM };
        let (ow, oh) = ctx.output_size();
        let out_bpp = neural_frame_client::bytes_per_pixel(out_format).unwrap_or(4);
        let output =
            Geometry { width: ow, height: oh, format: out_format.as_raw() as u32, row_pitch: ow as u64 * out_bpp };
        conn.send(
            &Message::Welcome {
                version: protocol::VERSION,
                sync_mode: mode,
                model: names[1].clone(),
                output,
                max_in_flight: ctx.slot_count() as u32,
            },
            &[],
        )?;
        session.mode = mode;
        let (slots, fds) = conn.expect("Slots")?;
        watch.set(Step::Importing);
        if let Some(hook) = &shared.stall {
            hook.at("importing", watch.client);
        }
        let driver = memory::Driver::of(&session.ctx.report().vulkan_device.driver_name);
        let Message::Slots { inputs, outputs, timeline } = slots else {
            return Err(End::fault(
                ErrorCode::State,
                format!("a {} message where the Slots belong", protocol::kind_name(slots.kind())),
            ));
        };
        if inputs.len() != input_slots as usize || outputs.len() != output_slots as usize {
            return Err(End::fault(
                ErrorCode::Malformed,
                format!(
                    "the Slots list {} input and {} output slots; the Hello said {input_slots} and {output_slots}",
                    inputs.len(),
                    outputs.len()
                ),
            ));
        }
        if timeline != (mode == protocol::SyncMode::Gpu) {
            return Err(End::fault(
                ErrorCode::State,
                format!("the Slots {} a timeline in {mode:?} mode", if timeline { "carry" } else { "lack" }),
            ));
        }
        let mut fds = fds.into_iter();
        for (i, m) in inputs.iter().enumerate() {
            let fd = fds.next().ok_or_else(|| End::fault(ErrorCode::FdCount, "fewer fds than slots"))?;
            let what = format!("input slot {i}");
            let import = describe(fd, m, input, origin, driver, &what)?;
            let id = session.ctx.import_input_buffer(import).map_err(|e| bad_handle(&what, e))?;
            session.inputs.push(id);
        }
        for (j, m) in outputs.iter().enumerate() {
            let fd = fds.next().ok_or_else(|| End::fault(ErrorCode::FdCount, "fewer fds than slots"))?;
            let what = format!("output slot {j}");
            let import = describe(fd, m, output, origin, driver, &what)?;
            let id = session.ctx.import_output_buffer(import).map_err(|e| bad_handle(&what, e))?;
            session.outputs.push(id);
        }
        let mut ready_fds = Vec::new();
        if let Some(fd) = fds.next() {
            let t = session
                .ctx
                .import_timeline(SemaphoreImport { fd, semaphore_type: vk::SemaphoreType::TIMELINE, origin })
                .map_err(|e| End::fault(ErrorCode::BadHandle, format!("the client's timeline: {e}")))?;
            session.rendered = Some(t);
            let exported = session
                .ctx
                .export_timelines()
                .map_err(|e| End::fault(ErrorCode::Inference, format!("exporting the worker's timelines: {e}")))?;
            ready_fds.push(exported.input_consumed);
            ready_fds.push(exported.output_ready);
        }
        let raw: Vec<_> = ready_fds.iter().map(AsRawFd::as_raw_fd).collect();
        conn.send(&Message::Ready { timelines: raw.len() as u8 }, &raw)?;
        Ok(session)
    }
}

/// One slot's memory, checked against the frame it holds and against what the
/// worker's driver maps of it (memory.rs), then described for the import.
fn describe(
    fd: OwnedFd,
    m: &SlotMemory,
    geometry: Geometry,
    origin: DeviceIdentity,
    driver: memory::Driver,
    what: &str,
) -> Result<BufferImport, End> {
    let needed = geometry.bytes().unwrap_or(u64::MAX);
    if m.buffer_size < needed || m.allocation_size < m.buffer_size {
        return Err(End::fault(
            ErrorCode::TooSmall,
            format!(
                "{what}: a buffer of {} bytes in an allocation of {} bytes; a {}×{} frame with a row pitch of {} \
                     needs {needed}",
                m.buffer_size, m.allocation_size, geometry.width, geometry.height, geometry.row_pitch
            ),
        ));
    }
    memory::check(&fd, m.allocation_size, driver).map_err(|(code, why)| End::fault(code, format!("{what}: {why}")))?;
    Ok(BufferImport {
        memory: MemoryImport {
            fd,
            allocation_size: m.allocation_size,
            memory_type_index: m.memory_type_index,
            dedicated: m.dedicated,
            origin,
        },
        size: m.buffer_size,
        usage: vk::BufferUsageFlags::from_raw(m.usage),
        layout: PixelLayout {
            width: geometry.width,
            height: geometry.height,
            row_pitch: geometry.row_pitch,
            format: format_of(geometry.format),
        },
    })
}

fn bad_handle(what: &str, e: neural_frame::ImportError) -> End {
    End::fault(ErrorCode::BadHandle, format!("{what}: {e}"))
}
