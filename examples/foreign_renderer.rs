//! A renderer with its own Vulkan instance and device hands its frames to
//! neural-frame and takes the results back, without the pixels touching
//! system memory in between.
//!
//! ```sh
//! cargo run --release --example foreign_renderer -- --model models/upscale.onnx \
//!     --input models/coffee.png --output out.png [--frames N] [--share device|fd] [--graphics-queue] \
//!     [--input-format bgra|rgba] [--readback every|last] [--draw-order ahead|behind] \
//!     [--timelines exportable|plain]
//! ```
//!
//! The renderer keeps a ring of input and output images. The picture is put
//! once, before any frame, into device-local memory of the renderer's own. For
//! each frame it "renders" (copies the picture from there into the next input
//! image on its own queue and signals `rendered = n`), submits the frame to the
//! context with that wait, and queues a copy of the result into device-local
//! memory of its own (what a compositor would sample) that waits on the GPU for
//! the frame's "output ready". It renders frame n+1 while frame n is inferred
//! (queued, and handed to the context, before frame n's copy out: `--draw-order` below);
//! before drawing into an input image again it waits, on its GPU, for the
//! context's "input consumed" of the frame that last read it. The host waits
//! once, at the end. Nothing crosses PCIe per frame: frames/s times the frames
//! alone, and only after them is the last result read back to the host
//! (untimed) for the PNG and `--compare`.
//!
//! - `--share device` (default): the context is built on the renderer's device
//!   and queue (bring your own device) and uses its images and semaphores by handle.
//!   Its timelines are created exportable and registered with
//!   `register_exportable_timeline` where the device shares semaphores: on CUDA
//!   the model's stream then waits for "rendered" itself, and no batch of the
//!   context's goes on the renderer's queue. `--timelines plain` registers plain
//!   ones with `register_timeline` (the context then hands each frame to CUDA
//!   with a batch on the renderer's queue).
//! - `--share fd`: the context keeps its own device on the same GPU and imports
//!   the renderer's exported memory and timeline semaphores. Where the driver
//!   cannot share semaphores (Mesa's lavapipe), frames are handed over in
//!   host-signalled mode instead, announced: the renderer waits for its own work
//!   before each submit, and for each frame on the host.
//! - The renderer records and submits its per-frame copies and
//!   signals on a queue of a transfer-only family (TRANSFER without GRAPHICS and
//!   COMPUTE: NVIDIA's copy engines, beside CUDA's compute) where the device has
//!   one: on the H200 its hand-over on the graphics queue preempted the model at
//!   every submission (544 against 379 frames/s at 600×400; README, "Measured").
//!   Shared by fd, the images' acquires from and releases to
//!   `VK_QUEUE_FAMILY_EXTERNAL` name that family; on the renderer's device the
//!   images are shared by it and the main family (`VK_SHARING_MODE_CONCURRENT`),
//!   where a context without CUDA passes uses them, with no ownership transfers.
//!   The picture and the result buffers are handed between the families once,
//!   outside the timed frames. `--graphics-queue` keeps everything on the main
//!   queue (`--transfer-queue` insists on the transfer queue, and says so where it
//!   falls back). Without such a family (lavapipe) it runs on the main queue.
//!
//! Three settings change what the renderer does per frame, to take apart where
//! the frames' time goes against `neural-frame bench`'s caller frames (which
//! draw RGBA8 one frame ahead). The run prints which ran (its `settings:` line):
//!
//! - `--input-format bgra|rgba`: the input images' format, and the picture's
//!   channel order in the renderer's memory. `bgra` (default): B8G8R8A8_UNORM, as
//!   a swapchain-like format would be (the context swizzles it); `rgba`:
//!   R8G8B8A8_UNORM, the bench's format.
//! - `--readback every|last`: `every` (default) copies each frame's result out
//!   of the output image into the renderer's device-local memory; `last` only
//!   the final frame's (the one the PNG and `--compare` read): the other
//!   frames' "read back" submissions carry no commands, only their wait for
//!   "output ready" and their signal, so the hand-over stays as it was.
//! - `--draw-order ahead|behind`: `ahead` (default with a ring of 2 or more)
//!   queues frame n+1's drawing, and submits frame n+1 to the context, before
//!   frame n's read back is queued; `behind` (the default with a ring of 1,
//!   where the drawing would overwrite the input frame n has not read yet)
//!   queues each frame's drawing and hand-over after the previous frame's read
//!   back, on the same queue, behind that read back's wait for its result: on a
//!   queue that runs its submissions in order (NVIDIA's), frame n+1 then starts
//!   only once frame n and its copy out are done. With `--share device --timelines
//!   plain` the context hands each frame to CUDA with a batch of its own (it waits
//!   for "rendered" and starts the model) on the renderer's main queue; with
//!   `--graphics-queue` too, that is the queue of the renderer's copies, and the
//!   batch also goes before frame n's read back. On an H100, 600×400, against
//!   933.6 frames/s for the in-process ring (docs/performance.md): `--share fd` 928 ahead against 774 behind; `--share device` 927 (783
//!   with `--timelines plain`, 674 with `--graphics-queue`, 539 with both). No
//!   effect in host-signalled mode, where the renderer's work completes on the
//!   host before each submit.
//!
//! Reading and writing the PNGs happen outside the timed frames.

#[path = "support/renderer.rs"]
mod renderer;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use ash::vk;
use neural_frame::image_io::Rgba8;
use neural_frame::{
    Backend, CallerImage, CallerMemory, Frame, NeuralFrameContext, SemaphoreImport, Submitted, SyncMode, TimelineId,
};
use renderer::{Lane, RBuffer, RImage, Renderer};

/// Command-line arguments.
struct Args {
    model: PathBuf,
    input: PathBuf,
    output: PathBuf,
    frames: u64,
    share_fd: bool,
    ring: usize,
    backend: Backend,
    validation: bool,
    compare: bool,
    /// The renderer's queue for its per-frame work: `None` the transfer queue where it can,
    /// `Some(true)` asked for it (a fallback is announced), `Some(false)` the main queue.
    transfer_queue: Option<bool>,
    /// `--input-format`: the input images and the picture in B8G8R8A8 (true, the default) or R8G8B8A8.
    bgra: bool,
    /// `--readback`: each frame's result copied out (true, the default), or only the last frame's.
    readback_every: bool,
    /// `--draw-order`: frame n+1 drawn before frame n's read back is queued (GPU sync), or behind it.
    draw_ahead: bool,
    /// `--timelines`: on the renderer's device, its timelines created exportable and registered
    /// so (true, the default), or plain.
    exportable_timelines: bool,
}

/// A flag's value, one of two names, as what that name means.
fn either(flag: &str, value: &str, [(a, x), (b, y)]: [(&str, bool); 2]) -> Result<bool> {
    match value {
        v if v == a => Ok(x),
        v if v == b => Ok(y),
        other => bail!("{flag} takes `{a}` or `{b}`, not `{other}`"),
    }
}

fn args() -> Result<Args> {
    let mut a = Args {
        model: "models/upscale.onnx".into(),
        input: "models/coffee.png".into(),
        output: "foreign.png".into(),
        frames: 3,
        share_fd: false,
        ring: 3,
        backend: Backend::Auto,
        validation: false,
        compare: false,
        transfer_queue: None,
        bgra: true,
        readback_every: true,
        draw_ahead: false,
        exportable_timelines: true,
    };
    let mut draw_order = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--model" => a.model = value()?.into(),
            "--input" => a.input = value()?.into(),
            "--output" => a.output = value()?.into(),
            "--frames" => a.frames = value()?.parse().ok().filter(|n| *n >= 1).context("--frames takes a count ≥ 1")?,
            "--ring" => {
                a.ring = value()?.parse().ok().filter(|n| (1..=16).contains(n)).context("--ring takes 1 to 16")?
            }
            "--share" => a.share_fd = either(&flag, &value()?, [("device", false), ("fd", true)])?,
            "--backend" => {
                a.backend = match value()?.as_str() {
                    "auto" => Backend::Auto,
                    "cuda" => Backend::Cuda,
                    "cpu" => Backend::Cpu,
                    other => bail!("--backend takes auto, cuda or cpu, not `{other}`"),
                }
            }
            "--validation" => a.validation = true,
            "--compare" => a.compare = true,
            "--transfer-queue" => a.transfer_queue = Some(true),
            "--graphics-queue" => a.transfer_queue = Some(false),
            "--input-format" => a.bgra = either(&flag, &value()?, [("bgra", true), ("rgba", false)])?,
            "--readback" => a.readback_every = either(&flag, &value()?, [("every", true), ("last", false)])?,
            "--draw-order" => draw_order = Some(either(&flag, &value()?, [("ahead", true), ("behind", false)])?),
            "--timelines" => {
                a.exportable_timelines = either(&flag, &value()?, [("exportable", true), ("plain", false)])?
            }
            "--help" | "-h" => {
                println!(
                    "foreign_renderer --model PATH --input IN.png --output OUT.png [--frames N] [--share device|fd] \
                     [--ring K] [--backend auto|cuda|cpu] [--validation] [--compare] [--transfer-queue|--graphics-queue] \
                     [--input-format bgra|rgba] [--readback every|last] [--draw-order ahead|behind] \
                     [--timelines exportable|plain]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument `{other}` (see --help)"),
        }
    }
    if draw_order == Some(true) && a.ring < 2 {
        bail!(
            "--draw-order ahead needs --ring 2 or more: with one image, frame n+1's drawing would overwrite the \
             input frame n has not read yet"
        );
    }
    a.draw_ahead = draw_order.unwrap_or(a.ring >= 2);
    Ok(a)
}

/// The renderer's per-frame resources: the ring of images, the picture it
/// draws from and the results it keeps (device-local, its own), and the command
/// buffers that draw and copy the results out.
struct Ring {
    inputs: Vec<RImage>,
    outputs: Vec<RImage>,
    /// The picture (BGRA, or RGBA with `--input-format rgba`), device-local, put there once: every
    /// frame is drawn from it.
    scene: RBuffer,
    /// Per output image, where the renderer copies its results (device-local).
    shown: Vec<RBuffer>,
    render: Vec<vk::CommandBuffer>,
    read: Vec<vk::CommandBuffer>,
}

/// The library logs through `log`; a renderer would route that into its own
/// logger. Here: warnings and errors on stderr.
struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("neural-frame {}: {}", r.level(), r.args());
        }
    }
    fn flush(&self) {}
}

fn main() -> Result<()> {
    static LOGGER: Stderr = Stderr;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
    let a = args()?;
    let picture = Rgba8::load(&a.input)?;
    let (w, h) = (picture.width, picture.height);
    let r = Renderer::new(a.validation)?;
    let builder = NeuralFrameContext::builder(&a.model).backend(a.backend).frame_size(w, h).slots(a.ring);
    let mut ctx = if a.share_fd {
        builder.device(neural_frame::DeviceSelector::Uuid(r.identity.device_uuid)).validation(a.validation).build()?
    } else {
        // SAFETY: the renderer's handles are valid and outlive the context (dropped first, below);
        // the renderer submits to the shared queue only under its queue lock, passed along.
        unsafe { builder.build_on(r.caller_device()) }?
    };
    // Fast start lets frames run before the fused session is built; this example times frames and
    // compares them byte for byte, so it waits for the session the context was built for.
    if !ctx.wait_settled(std::time::Duration::from_secs(300))? {
        bail!("the context's fused session was not ready within 300 s");
    }
    let (ow, oh) = ctx.output_size();
    let gpu_sync = ctx.sync_mode() == SyncMode::Gpu;
    println!(
        "renderer: \"{}\"; context: {} backend, {}, {} sync",
        r.name,
        ctx.backend_name(),
        if a.share_fd { "its own device, memory imported by fd" } else { "on the renderer's device" },
        if gpu_sync { "GPU" } else { "host-signalled" }
    );
    if !gpu_sync {
        println!(
            "renderer: the driver cannot share semaphores (no VK_KHR_external_semaphore_fd): host-signalled mode — \
             the renderer waits for its own work before each submit and for each frame on the host"
        );
    }

    // The renderer's queue for its per-frame copies and signals.
    let lane = r.lane_for(a.transfer_queue != Some(false));
    if a.transfer_queue == Some(true) && lane == Lane::Main {
        println!(
            "renderer: the device has no transfer-only queue family: --transfer-queue falls back to its {} queue",
            r.lane_name(Lane::Main)
        );
    }
    println!(
        "renderer: per-frame copies and signals on its {} queue (family {})",
        r.lane_name(lane),
        r.family_of(lane)?
    );
    // On the renderer's device, its timelines exportable (where it shares semaphores): on CUDA the
    // model's stream waits for them itself, with no batch of the context's on the renderer's queue.
    let exportable_device = !a.share_fd && gpu_sync && a.exportable_timelines && r.has_semaphore_fd();
    // What ran, in the flags' words (one line, for the logs of runs that compare them).
    println!(
        "settings: --share {}, --ring {}, --input-format {}, --readback {}, --draw-order {}, --validation {}, \
         renderer queue {}, timelines {}",
        if a.share_fd { "fd" } else { "device" },
        a.ring,
        if a.bgra { "bgra" } else { "rgba" },
        if a.readback_every { "every" } else { "last" },
        match (a.draw_ahead, gpu_sync) {
            (false, _) => "behind",
            (true, true) => "ahead",
            (true, false) => "ahead (no effect: host-signalled mode completes each drawing before its submit)",
        },
        if a.validation { "on" } else { "off" },
        r.lane_name(lane),
        match (a.share_fd, exportable_device) {
            (true, _) => "exported by fd",
            (false, true) => "exportable, registered with register_exportable_timeline",
            (false, false) => "registered with register_timeline",
        },
    );

    // The ring: input images the renderer draws into (BGRA, as a swapchain-like
    // format would be; RGBA with --input-format rgba), output images it copies results out of.
    let k = a.ring;
    let (in_format, scene_pixels) = if a.bgra {
        let bgra: Vec<u8> = picture.pixels.chunks(4).flat_map(|p| [p[2], p[1], p[0], p[3]]).collect();
        (vk::Format::B8G8R8A8_UNORM, bgra)
    } else {
        (vk::Format::R8G8B8A8_UNORM, picture.pixels.clone())
    };
    let in_usage = vk::ImageUsageFlags::SAMPLED | vk::ImageUsageFlags::TRANSFER_DST;
    let out_usage = vk::ImageUsageFlags::STORAGE | vk::ImageUsageFlags::TRANSFER_SRC;
    let both = vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
    let scene = r.buffer(scene_pixels.len() as u64, both, false, false)?;
    r.upload(&scene, &scene_pixels)?;
    let mut ring = Ring { inputs: vec![], outputs: vec![], scene, shown: vec![], render: vec![], read: vec![] };
    let result_bytes = ow as usize * oh as usize * 4;
    // Exportable memory either way: shared by fd, or on the renderer's device handed over
    // with the image (register_*_image_with_memory), so that CUDA reaches the frames. On the
    // renderer's device with its copies on the transfer queue, the images are shared by that
    // family and the main one (concurrent), where a context without CUDA passes uses them.
    let concurrent =
        if !a.share_fd && lane == Lane::Transfer { vec![r.family_of(Lane::Main)?, r.family_of(lane)?] } else { vec![] };
    for _ in 0..k {
        ring.inputs.push(r.image_shared(w, h, in_format, in_usage, true, &concurrent)?);
        ring.outputs.push(r.image_shared(ow, oh, vk::Format::R8G8B8A8_UNORM, out_usage, true, &concurrent)?);
        ring.shown.push(r.buffer(result_bytes as u64, both, false, false)?);
    }
    // Register the ring once; frames then name handles.
    let mut ids = Vec::new();
    for (i, o) in ring.inputs.iter().zip(&ring.outputs) {
        let pair = if a.share_fd {
            let input = ctx.import_input_image(r.export_image(i)?)?;
            let output = ctx.import_output_image(r.export_image(o)?)?;
            (input, output)
        } else {
            let describe = |img: &RImage| CallerImage {
                image: img.image,
                format: img.format,
                width: img.width,
                height: img.height,
                usage: img.usage,
                tiling: vk::ImageTiling::OPTIMAL,
                layout: vk::ImageLayout::GENERAL,
            };
            let memory = |img: &RImage| CallerMemory {
                memory: img.alloc.memory,
                allocation_size: img.alloc.size,
                dedicated: img.alloc.dedicated,
            };
            // SAFETY: images of the renderer's device, each bound at offset 0 to an exportable
            // allocation of its own, alive until after the context is dropped.
            unsafe {
                (
                    ctx.register_input_image_with_memory(describe(i), memory(i))?,
                    ctx.register_output_image_with_memory(describe(o), memory(o))?,
                )
            }
        };
        ids.push(pair);
    }

    // Timelines: the renderer's "rendered" and "read back", and the context's two.
    let exportable = (a.share_fd && gpu_sync) || exportable_device;
    let rendered = r.semaphore(true, exportable)?;
    let read_done = r.semaphore(true, exportable)?;
    let register = |ctx: &mut NeuralFrameContext, s: vk::Semaphore| -> Result<TimelineId> {
        if a.share_fd {
            Ok(ctx.import_timeline(SemaphoreImport {
                fd: r.export_semaphore(s)?,
                semaphore_type: vk::SemaphoreType::TIMELINE,
                origin: r.identity,
            })?)
        } else if exportable_device {
            // SAFETY: an exportable timeline semaphore of the renderer's device, alive until after the context.
            Ok(unsafe { ctx.register_exportable_timeline(s) }?)
        } else {
            // SAFETY: a timeline semaphore of the renderer's device, alive until after the context.
            Ok(unsafe { ctx.register_timeline(s) }?)
        }
    };
    let timelines = if gpu_sync {
        let (rendered_id, read_id) = (register(&mut ctx, rendered)?, register(&mut ctx, read_done)?);
        let (consumed, ready) = if a.share_fd {
            let t = ctx.export_timelines()?;
            (r.import_semaphore(t.input_consumed)?, r.import_semaphore(t.output_ready)?)
        } else {
            (vk::Semaphore::null(), vk::Semaphore::null()) // the tickets carry the context's own handles
        };
        Some((rendered_id, read_id, consumed, ready))
    } else {
        None
    };

    // The picture (uploaded on the main family) and the result buffers, to the lane's family once.
    r.hand_over(&std::iter::once(&ring.scene).chain(&ring.shown).collect::<Vec<_>>(), Lane::Main, lane)?;
    // Commands, recorded once for the lane's family: images go to GENERAL (and, shared by fd,
    // are released by that family to the external one, where they live between uses).
    r.prepare_on(lane, &ring.inputs.iter().chain(&ring.outputs).collect::<Vec<_>>(), a.share_fd)?;
    for i in 0..k {
        ring.render.push(r.render_commands_on(lane, &ring.inputs[i], &ring.scene, a.share_fd)?);
        ring.read.push(r.read_commands_on(lane, &ring.outputs[i], &ring.shown[i], a.share_fd)?);
    }

    // The frames, timed: per frame only GPU work on device-local memory.
    let start = Instant::now();
    let mut values = vec![0u64; k]; // the context's value of the frame that last used ring entry i
    let mut own_consumed = vk::Semaphore::null(); // on the renderer's device: the tickets' own handle
    let mut blocked = 0;
    // GPU sync: draws frame n into its ring image once the context has read the frame that last
    // used that image (a GPU wait), then hands it over ("rendered" = n).
    let draw = |n: u64, values: &[u64], own_consumed: vk::Semaphore, consumed: vk::Semaphore| -> Result<()> {
        let i = ((n - 1) % k as u64) as usize;
        let earlier = values[i];
        let consumed_point = (earlier > 0).then_some((if a.share_fd { consumed } else { own_consumed }, earlier));
        r.submit_on(lane, &[ring.render[i]], consumed_point.as_slice(), &[(rendered, n)])
    };
    // Queues frame n's read back behind its "output ready" (GPU sync) and signals "read back" = n.
    // --readback last: the other frames' read-back submissions keep their waits and signals,
    // without the copy.
    let read_back = |n: u64, ready: &[(vk::Semaphore, u64)]| -> Result<()> {
        let i = ((n - 1) % k as u64) as usize;
        let read: &[vk::CommandBuffer] = if a.readback_every || n == a.frames { &ring.read[i..=i] } else { &[] };
        r.submit_on(lane, read, ready, &[(read_done, n)])
    };
    // Ahead: frame n's read back, queued once frame n+1 is handed over (see below).
    let mut deferred: Option<(u64, vk::Semaphore, u64)> = None;
    for n in 1..=a.frames {
        let i = ((n - 1) % k as u64) as usize;
        let (input, output) = ids[i];
        match timelines {
            Some((rendered_id, read_id, consumed, ready)) => {
                // Behind: frame n is drawn here, queued behind frame n-1's read back on the renderer's
                // queue. Ahead (the default): frame 1 here and frame n+1 next, before frame n's read
                // back is queued (the bench's order).
                if !a.draw_ahead || n == 1 {
                    draw(n, &values, own_consumed, consumed)?;
                }
                if a.draw_ahead && n < a.frames {
                    draw(n + 1, &values, own_consumed, consumed)?;
                }
                let mut frame = Frame::new(input, output).wait_for(rendered_id, n);
                if n > k as u64 {
                    frame = frame.output_free_after(read_id, n - k as u64);
                }
                if ctx.in_flight() == ctx.slot_count() {
                    blocked += 1; // the ring is full: submit waits for its oldest frame
                }
                let Submitted::Frame(ticket) = ctx.submit(frame)? else { bail!("a blocking ring skipped") };
                values[i] = ticket.value();
                own_consumed = ticket.input_consumed().semaphore;
                let ready_sem = if a.share_fd { ready } else { ticket.output_ready().semaphore };
                if a.draw_ahead {
                    // Frame n-1's read back goes behind frame n's drawing and hand-over: on a queue that
                    // runs in order, queued before them it would hold them until frame n-1 is done and
                    // read back (with --share device --timelines plain --graphics-queue the context's
                    // batch that hands frame n to CUDA is on that queue too).
                    if let Some((m, sem, value)) = deferred.replace((n, ready_sem, ticket.value())) {
                        read_back(m, &[(sem, value)])?;
                    }
                } else {
                    read_back(n, &[(ready_sem, ticket.value())])?;
                }
            }
            None => {
                // Host-signalled: the renderer's work is complete before submit; completion is a host wait.
                r.submit_on(lane, &[ring.render[i]], &[], &[(rendered, n)])?;
                r.wait(rendered, n)?;
                let Submitted::Frame(ticket) = ctx.submit(Frame::new(input, output))? else { bail!("skipped") };
                ctx.wait(&ticket)?;
                values[i] = ticket.value();
                read_back(n, &[])?;
            }
        }
    }
    if let Some((m, sem, value)) = deferred {
        read_back(m, &[(sem, value)])?;
    }
    r.wait(read_done, a.frames)?;
    let secs = start.elapsed().as_secs_f64();
    let last = ((a.frames - 1) % k as u64) as usize;
    // Untimed: the last result, from the renderer's device-local copy to the host (on the main
    // family: the copy is handed back to it first).
    r.hand_over(&[&ring.shown[last]], lane, Lane::Main)?;
    let pixels = r.download(&ring.shown[last], result_bytes)?;
    Rgba8 { width: ow, height: oh, pixels: pixels.clone() }.save_png(&a.output)?;
    println!(
        "{} frames {w}×{h} → {ow}×{oh} in {:.3} s ({:.1} frames/s) through a ring of {k} (timed: per frame a copy \
         in from the renderer's device-local picture, inference, {}; the PNG's read-back came after, untimed); \
         host waits between the renderer's submits: {}; context submits that waited for a free slot: {blocked}",
        a.frames,
        secs,
        a.frames as f64 / secs,
        if a.readback_every {
            "a copy out into its device-local memory"
        } else {
            "for the last frame alone a copy out into its device-local memory (--readback last)"
        },
        if gpu_sync { "0" } else { "2 per frame (host-signalled mode)" },
    );
    println!("wrote {}", a.output.display());

    let mut code = 0;
    if a.compare {
        // The same picture through the context's own images and `infer`, for a byte-for-byte comparison.
        let mut own = NeuralFrameContext::builder(&a.model).backend(a.backend).frame_size(w, h).build()?;
        if !own.wait_settled(std::time::Duration::from_secs(300))? {
            bail!("the comparison context's fused session was not ready within 300 s");
        }
        let i = own.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
        let o = own.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
        own.upload(i, &picture.pixels)?;
        own.infer(i, o)?;
        let want = own.readback(o)?;
        let differ = want.iter().zip(&pixels).filter(|(x, y)| x != y).count();
        println!(
            "equal to NeuralFrameContext::infer byte for byte: {} ({differ} bytes differ)",
            if differ == 0 { "yes" } else { "no" }
        );
        if differ != 0 {
            code = 2;
        }
    }
    let context_errors = ctx.validation_errors();
    r.idle()?;
    drop(ctx); // before the renderer's device and images
    for i in ring.inputs.into_iter().chain(ring.outputs) {
        r.destroy_image(i);
    }
    for b in std::iter::once(ring.scene).chain(ring.shown) {
        r.destroy_buffer(b);
    }
    r.destroy_semaphore(rendered);
    r.destroy_semaphore(read_done);
    if let Some((_, _, consumed, ready)) = timelines
        && a.share_fd
    {
        r.destroy_semaphore(consumed);
        r.destroy_semaphore(ready);
    }
    if a.validation {
        let errors = r.validation_errors() + context_errors;
        println!(
            "validation errors: {errors} (renderer's instance {}, context's {context_errors})",
            r.validation_errors()
        );
        if errors > 0 {
            code = 3;
        }
    }
    std::process::exit(code);
}
