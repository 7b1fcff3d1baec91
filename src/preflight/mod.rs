//! The staged pre-flight checks: each proves one link of the zero-copy chain
//! on this machine and reports passed, failed (with the reason) or skipped
//! (with the reason). Never a silent pass.
//!
//! 1. Vulkan → Vulkan: an RGBA8 pattern image exported from one VkDevice as
//!    `OPAQUE_FD`, imported into a second VkDevice on the same physical
//!    device, read back and compared byte for byte.
//! 2. Vulkan → CUDA: the same image and a linear buffer imported into CUDA on
//!    the device with the Vulkan device's UUID, copied and verified; a timeline
//!    semaphore handed Vulkan → CUDA → Vulkan.
//! 3. ONNX Runtime's CUDA provider: registered on the CUDA device with the
//!    Vulkan device's UUID and run on a tiny built-in model, its output compared
//!    with the CPU provider's. A provider that cannot load names each missing
//!    CUDA library and the PyPI package that ships it.

mod render;
mod stage3;

pub use render::render;
pub use stage3::{Stage3, stage3};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ash::vk;
use serde::Serialize;

use crate::cuda;
use crate::error::{Error, Result, format_uuid};
use crate::vulkan::{
    self, AdapterInfo, Buffer, BufferMemory, Device, DeviceSelector, Image, ImageDesc, Instance, InstanceOptions,
    TimelineSemaphore, device::Batch, pattern, transfer,
};

/// Options shared by the stages.
///
/// ```
/// use neural_frame::{DeviceSelector, preflight};
///
/// // A small image, one trial, the second Vulkan device, under the validation layer.
/// let options = preflight::Options {
///     device: DeviceSelector::Index(1),
///     width: 256,
///     height: 256,
///     trials: 1,
///     validation: true,
///     ..Default::default()
/// };
/// assert_eq!(options.ort_library, None); // stage 3 searches as contexts do
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// Which Vulkan device.
    pub device: DeviceSelector,
    /// Image width (1920 by default).
    pub width: u32,
    /// Image height (1080 by default).
    pub height: u32,
    /// Trials of the GPU→CPU→GPU reference round trip.
    pub trials: usize,
    /// Run under the Khronos validation layer and count its errors.
    pub validation: bool,
    /// Change one byte after the import (proves that a difference is detected).
    pub inject_fault: bool,
    /// The ONNX Runtime library for stage 3 (else the standard search, as contexts do).
    pub ort_library: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            device: DeviceSelector::Auto,
            width: 1920,
            height: 1080,
            trials: 5,
            validation: false,
            inject_fault: false,
            ort_library: None,
        }
    }
}

/// Outcome of a stage.
///
/// ```no_run
/// use neural_frame::preflight::{self, Status};
///
/// let report = preflight::run(&[1], &preflight::Options::default());
/// match report.stages[0].status {
///     Status::Passed => println!("Vulkan memory export works here"),
///     Status::Skipped => println!("not checked: {}", report.stages[0].reason.as_deref().unwrap_or("")),
///     _ => eprintln!("{}", preflight::render(&report)),
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Everything checked out.
    Passed,
    /// The data differed.
    Different,
    /// Something failed before the data could be compared.
    Error,
    /// The stage could not run here (the reason says why).
    Skipped,
}

/// Minimum and median of repeated timings, in milliseconds.
///
/// ```
/// let t = neural_frame::preflight::Timing::of(vec![3.0, 1.0, 2.0]);
/// assert_eq!((t.min_ms, t.median_ms, t.trials), (1.0, 2.0, 3));
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    /// Fastest trial.
    pub min_ms: f64,
    /// Median trial.
    pub median_ms: f64,
    /// Number of trials.
    pub trials: usize,
}

impl Timing {
    /// Summarises trial times in milliseconds.
    ///
    /// ```
    /// let t = neural_frame::preflight::Timing::of(vec![0.5, 0.25]);
    /// assert_eq!(t.min_ms, 0.25);
    /// ```
    pub fn of(mut samples: Vec<f64>) -> Self {
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            samples[n / 2]
        } else {
            (samples[n / 2 - 1] + samples[n / 2]) / 2.0
        };
        Self { min_ms: samples.first().copied().unwrap_or(f64::NAN), median_ms: median, trials: n }
    }
}

/// Where two buffers first differ.
///
/// Read from a [`Report`]; see [`Details`] for an example.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    /// Pixel column.
    pub x: u32,
    /// Pixel row.
    pub y: u32,
    /// Channel (0 = R … 3 = A).
    pub channel: usize,
    /// The pattern's byte.
    pub expected: u8,
    /// The byte read back.
    pub got: u8,
    /// How many bytes differ in all.
    pub bytes_different: usize,
}

fn compare(expected: &[u8], got: &[u8], width: u32) -> Option<Difference> {
    pattern::first_difference(expected, got, width).map(|(x, y, channel, e, g)| Difference {
        x,
        y,
        channel,
        expected: e,
        got: g,
        bytes_different: expected.iter().zip(got).filter(|(a, b)| a != b).count() + expected.len().abs_diff(got.len()),
    })
}

/// Stage 1's measurements.
///
/// Read from a [`Report`]; see [`Details`] for an example.
#[derive(Debug, Clone, Serialize)]
pub struct Stage1 {
    /// The physical device both VkDevices were made on.
    pub device: AdapterInfo,
    /// Image size.
    pub width: u32,
    /// Image size.
    pub height: u32,
    /// Bytes compared.
    pub bytes_compared: usize,
    /// Whether every byte matched.
    pub identical: bool,
    /// The first difference, if any.
    pub difference: Option<Difference>,
    /// Whether the allocation was dedicated.
    pub dedicated: bool,
    /// vkGetMemoryFdKHR.
    pub export_ms: f64,
    /// vkCreateImage + vkAllocateMemory(import) + vkBindImageMemory on the second device.
    pub import_ms: f64,
    /// Reference cost: read the image back to the host and upload it to another image.
    pub round_trip: Timing,
    /// Validation errors seen (only when run with validation).
    pub validation_errors: Option<usize>,
}

/// One CUDA copy, measured and verified.
///
/// Read from a [`Report`]; see [`Details`] for an example.
#[derive(Debug, Clone, Serialize)]
pub struct CudaCopy {
    /// cuImportExternalMemory.
    pub import_ms: f64,
    /// cuExternalMemoryGetMappedMipmappedArray / GetMappedBuffer.
    pub map_ms: f64,
    /// The copy timed by CUDA events.
    pub copy_gpu_ms: f64,
    /// The copy timed by the host clock around enqueue and synchronise.
    pub copy_host_ms: f64,
    /// Bytes read per second by the copy (GPU time), GB/s.
    pub throughput_gb_s: f64,
    /// Whether the copy matched the pattern byte for byte.
    pub identical: bool,
    /// First difference, if any.
    pub difference: Option<Difference>,
}

/// The timeline-semaphore hand-off Vulkan → CUDA → Vulkan, host-observed.
///
/// Read from a [`Report`]; see [`Details`] for an example.
#[derive(Debug, Clone, Serialize)]
pub struct SemaphoreHandoff {
    /// From Vulkan's queue signal to CUDA's stream passing its wait.
    pub vulkan_to_cuda: Timing,
    /// From there to Vulkan's queue passing its wait on CUDA's signal.
    pub cuda_to_vulkan: Timing,
    /// The whole hand-off.
    pub round_trip: Timing,
    /// Whether every value arrived in order.
    pub ok: bool,
}

/// Stage 2's measurements.
///
/// Read from a [`Report`]; see [`Details`] for an example.
#[derive(Debug, Clone, Serialize)]
pub struct Stage2 {
    /// The Vulkan device.
    pub vulkan_device: AdapterInfo,
    /// The CUDA device it was paired with (by UUID).
    pub cuda_device: String,
    /// The CUDA device's ordinal.
    pub cuda_ordinal: i32,
    /// The CUDA device's UUID.
    pub cuda_uuid: String,
    /// Image size.
    pub width: u32,
    /// Image size.
    pub height: u32,
    /// Whether the image's allocation was dedicated (imported with the dedicated flag).
    pub image_dedicated: bool,
    /// Optimal-tiling image → mipmapped array → device buffer.
    pub image: CudaCopy,
    /// Linear buffer → device pointer → device buffer.
    pub buffer: CudaCopy,
    /// CUDA writing through the mapped pointer, read back by Vulkan.
    pub buffer_written_by_cuda: bool,
    /// The semaphore hand-off.
    pub semaphore: SemaphoreHandoff,
    /// Reference cost: GPU→CPU→GPU round trip of the same image.
    pub round_trip: Timing,
}

/// The details of a stage that ran.
///
/// ```no_run
/// use neural_frame::preflight::{self, Details};
///
/// let report = preflight::run(&[], &preflight::Options::default());
/// for stage in &report.stages {
///     match &stage.details {
///         Some(Details::Stage1(s)) => println!("Vulkan → Vulkan: import {:.3} ms, identical: {}", s.import_ms, s.identical),
///         Some(Details::Stage2(s)) => println!("Vulkan → CUDA on {}: image copy {:.1} GB/s", s.cuda_device, s.image.throughput_gb_s),
///         Some(Details::Stage3(s)) => println!("CUDA provider: max |CUDA − CPU| {:.1e}", s.max_abs_difference),
///         None => println!("stage {}: {:?} ({})", stage.stage, stage.status, stage.reason.as_deref().unwrap_or("")),
///     }
/// }
/// ```
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Details {
    /// Stage 1.
    Stage1(Box<Stage1>),
    /// Stage 2.
    Stage2(Box<Stage2>),
    /// Stage 3.
    Stage3(Box<Stage3>),
}

/// One stage's outcome.
///
/// Read from a [`Report`]; see [`Details`] for an example.
#[derive(Debug, Clone, Serialize)]
pub struct StageReport {
    /// 1, 2 or 3.
    pub stage: u8,
    /// What it checks.
    pub name: &'static str,
    /// Outcome.
    pub status: Status,
    /// Why it failed or was skipped.
    pub reason: Option<String>,
    /// Measurements, when it ran.
    pub details: Option<Details>,
}

/// The stages that ran.
///
/// ```no_run
/// use neural_frame::preflight;
///
/// let report = preflight::run(&[], &preflight::Options::default());
/// print!("{}", preflight::render(&report)); // or serde_json::to_string(&report): it is Serialize
/// std::process::exit(report.exit_code());
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Each stage's outcome, in order.
    pub stages: Vec<StageReport>,
}

impl Report {
    /// 0 when nothing failed, 2 when data differed, 1 on any error.
    ///
    /// ```no_run
    /// let report = neural_frame::preflight::run(&[], &Default::default());
    /// if report.exit_code() != 0 {
    ///     eprint!("{}", neural_frame::preflight::render(&report));
    /// }
    /// ```
    pub fn exit_code(&self) -> i32 {
        if self.stages.iter().any(|s| s.status == Status::Error) {
            1
        } else if self.stages.iter().any(|s| s.status == Status::Different) {
            2
        } else {
            0
        }
    }
}

/// Stage names.
///
/// ```
/// for (n, name) in neural_frame::preflight::STAGES {
///     println!("stage {n}: {name}");
/// }
/// assert_eq!(neural_frame::preflight::STAGES.len(), 3);
/// ```
pub const STAGES: [(u8, &str); 3] = [
    (1, "Vulkan → Vulkan (OPAQUE_FD image between two VkDevices)"),
    (2, "Vulkan → CUDA (image, buffer, timeline semaphore)"),
    (3, "ONNX Runtime's CUDA provider (registers, runs, equals the CPU provider)"),
];

/// Runs the given stages (all when empty) in order.
///
/// ```no_run
/// use neural_frame::preflight;
///
/// // Stages 1 and 3: Vulkan export/import, and ONNX Runtime's CUDA provider.
/// let report = preflight::run(&[1, 3], &preflight::Options::default());
/// print!("{}", preflight::render(&report));
/// ```
pub fn run(stages: &[u8], options: &Options) -> Report {
    let wanted: Vec<u8> = if stages.is_empty() { STAGES.iter().map(|s| s.0).collect() } else { stages.to_vec() };
    let mut out = Vec::new();
    for (n, name) in STAGES.iter().copied().filter(|(n, _)| wanted.contains(n)) {
        let report = match n {
            1 => match stage1(options) {
                Ok(s) => {
                    let status = if !s.identical {
                        Status::Different
                    } else if s.validation_errors.unwrap_or(0) > 0 {
                        Status::Error
                    } else {
                        Status::Passed
                    };
                    let reason = match status {
                        Status::Different => s.difference.as_ref().map(|d| {
                            format!(
                                "{} bytes differ; first at pixel ({}, {}) channel {}: expected {}, got {}",
                                d.bytes_different, d.x, d.y, d.channel, d.expected, d.got
                            )
                        }),
                        Status::Error => Some(format!("{} validation errors", s.validation_errors.unwrap_or(0))),
                        _ => None,
                    };
                    StageReport { stage: n, name, status, reason, details: Some(Details::Stage1(Box::new(s))) }
                }
                Err(e) => {
                    StageReport { stage: n, name, status: Status::Error, reason: Some(e.to_string()), details: None }
                }
            },
            3 => match stage3(options) {
                Ok(s) => {
                    let (status, reason) = if s.max_abs_difference <= s.tolerance {
                        (Status::Passed, None)
                    } else {
                        let r = format!(
                            "the CUDA provider's output differs from the CPU provider's by up to {} (allowed {})",
                            s.max_abs_difference, s.tolerance
                        );
                        (Status::Different, Some(r))
                    };
                    StageReport { stage: n, name, status, reason, details: Some(Details::Stage3(Box::new(s))) }
                }
                Err(Error::CudaUnavailable { reason }) => {
                    StageReport { stage: n, name, status: Status::Skipped, reason: Some(reason), details: None }
                }
                Err(e) => {
                    StageReport { stage: n, name, status: Status::Error, reason: Some(e.to_string()), details: None }
                }
            },
            _ => match stage2(options) {
                Ok(s) => {
                    let mut problems = Vec::new();
                    if !s.image.identical {
                        problems.push("image copy differs from the pattern".to_string());
                    }
                    if !s.buffer.identical {
                        problems.push("buffer copy differs from the pattern".to_string());
                    }
                    if !s.buffer_written_by_cuda {
                        problems.push("bytes written by CUDA were not seen by Vulkan".to_string());
                    }
                    if !s.semaphore.ok {
                        problems.push("the semaphore hand-off did not complete in order".to_string());
                    }
                    let status = if problems.is_empty() { Status::Passed } else { Status::Different };
                    let reason = (!problems.is_empty()).then(|| problems.join("; "));
                    StageReport { stage: n, name, status, reason, details: Some(Details::Stage2(Box::new(s))) }
                }
                Err(Error::CudaUnavailable { reason }) => {
                    StageReport { stage: n, name, status: Status::Skipped, reason: Some(reason), details: None }
                }
                Err(e) => {
                    StageReport { stage: n, name, status: Status::Error, reason: Some(e.to_string()), details: None }
                }
            },
        };
        out.push(report);
    }
    Report { stages: out }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// GPU→CPU→GPU: read `image` back to the host and upload it to a second image.
fn host_round_trip(image: &Image, trials: usize) -> Result<Timing> {
    let copy = Image::new(image.device(), *image.desc())?;
    let mut samples = Vec::with_capacity(trials);
    for _ in 0..trials {
        let t = Instant::now();
        let bytes = transfer::readback_image(image)?;
        transfer::upload_image(&copy, &bytes)?;
        samples.push(ms_since(t));
    }
    Ok(Timing::of(samples))
}

fn pick_physical(instance: &Arc<Instance>, selector: DeviceSelector) -> Result<(vk::PhysicalDevice, AdapterInfo)> {
    let list = vulkan::adapter::enumerate(instance)?;
    let infos: Vec<_> = list.iter().map(|(_, i)| i.clone()).collect();
    let index = vulkan::adapter::select(&infos, selector)?;
    Ok(list[index].clone())
}

/// Refuses an image size the device cannot create, before the pattern
/// (`width × height × 4` bytes on the host) is made.
fn check_size(device: &Device, options: &Options) -> Result<()> {
    let max = device.limits().max_image_dimension2_d;
    let (w, h) = (options.width, options.height);
    if w == 0 || h == 0 || w > max || h > max {
        return Err(Error::InvalidArgument(format!(
            "a {w}×{h} image is beyond what \"{}\" allows (maxImageDimension2D = {max}); use a size from 1×1 to {max}×{max}",
            device.info().name
        )));
    }
    Ok(())
}

/// Stage 1: export from one VkDevice, import into another, compare.
///
/// ```no_run
/// let s1 = neural_frame::preflight::stage1(&Default::default())?;
/// assert!(s1.identical, "the imported image differs");
/// # Ok::<(), neural_frame::Error>(())
/// ```
pub fn stage1(options: &Options) -> Result<Stage1> {
    let instance = Instance::new(&InstanceOptions { validation: options.validation })?;
    let (physical, info) = pick_physical(&instance, options.device)?;
    let exporter = Device::on(&instance, physical, info.clone())?;
    let importer = Device::on(&instance, physical, info.clone())?;
    check_size(&exporter, options)?;
    let desc = ImageDesc::rgba8(options.width, options.height);
    let expected = pattern::rgba8(desc.width, desc.height);

    let source = Image::exportable(&exporter, desc)?;
    transfer::upload_image(&source, &expected)?;
    transfer::release_to_external(&source)?;

    let t = Instant::now();
    let exported = source.export()?;
    let export_ms = ms_since(t);
    let dedicated = exported.info.dedicated;

    let t = Instant::now();
    let imported = Image::import(&importer, desc, exported)?;
    let import_ms = ms_since(t);

    if options.inject_fault {
        let (x, y) = (desc.width / 2, desc.height / 2);
        let i = ((y * desc.width + x) * 4) as usize;
        let mut px = [expected[i], expected[i + 1], expected[i + 2], expected[i + 3]];
        px[1] ^= 0x5a;
        transfer::write_pixel(&source, x, y, &px)?;
    }

    transfer::acquire_from_external(&imported)?;
    let got = transfer::readback_image(&imported)?;
    let difference = compare(&expected, &got, desc.width);
    drop(imported);

    let round_trip = host_round_trip(&source, options.trials.max(1))?;
    drop(source);
    importer.wait_idle()?;
    exporter.wait_idle()?;
    drop((importer, exporter));
    let validation_errors = instance.validation_enabled().then(|| instance.validation_errors());
    Ok(Stage1 {
        device: info,
        width: desc.width,
        height: desc.height,
        bytes_compared: expected.len(),
        identical: difference.is_none(),
        difference,
        dedicated,
        export_ms,
        import_ms,
        round_trip,
        validation_errors,
    })
}

/// Stage 2: the pattern image and a linear buffer seen by CUDA; a timeline
/// semaphore handed Vulkan → CUDA → Vulkan.
///
/// ```no_run
/// let s2 = neural_frame::preflight::stage2(&Default::default())?;
/// println!("Vulkan → CUDA → Vulkan semaphore round trip: {:.3} ms", s2.semaphore.round_trip.median_ms);
/// # Ok::<(), neural_frame::Error>(())
/// ```
pub fn stage2(options: &Options) -> Result<Stage2> {
    cuda::init()?;
    log::debug!("stage 2: CUDA driver loaded");
    let instance = Instance::new(&InstanceOptions { validation: options.validation })?;
    let device = Device::new(&instance, options.device)?;
    log::debug!("stage 2: Vulkan device {}", device.info());
    let cuda_device = cuda::CudaDevice::by_uuid(&device.info().uuid_bytes)?;
    let stream = cuda::Stream::new(&cuda_device)?;
    check_size(&device, options)?;
    let desc = ImageDesc::rgba8(options.width, options.height);
    let expected = pattern::rgba8(desc.width, desc.height);
    let len = expected.len();

    // Image: optimal tiling → mipmapped array → packed device buffer.
    let image = Image::exportable(&device, desc)?;
    transfer::upload_image(&image, &expected)?;
    transfer::release_to_external(&image)?;
    let exported = image.export()?;
    let image_dedicated = exported.info.dedicated;
    log::debug!("stage 2: image exported ({:?})", exported.info);
    let dst = cuda::DeviceBuffer::new(&cuda_device, len)?;
    let image_copy = {
        let t = Instant::now();
        let memory = crate::interop::memory_into_cuda(&cuda_device, exported)?;
        let import_ms = ms_since(t);
        let t = Instant::now();
        let array = memory.map_rgba8_array(desc.width, desc.height)?;
        log::debug!("stage 2: image imported and mapped as a mipmapped array");
        let map_ms = ms_since(t);
        dst.fill(0xcd, &stream)?;
        stream.synchronize()?;
        let (copy_gpu_ms, copy_host_ms) = timed_copy(&stream, || dst.copy_from_array(&array, &stream))?;
        let got = dst.to_host()?;
        let difference = compare(&expected, &got, desc.width);
        drop(array); // CUDA's view goes before Vulkan touches the image again
        CudaCopy {
            import_ms,
            map_ms,
            copy_gpu_ms,
            copy_host_ms,
            throughput_gb_s: len as f64 / (copy_gpu_ms * 1e-3) / 1e9,
            identical: difference.is_none(),
            difference,
        }
    };
    transfer::acquire_from_external(&image)?;
    let round_trip = host_round_trip(&image, options.trials.max(1))?;

    // Linear buffer: device pointer → device buffer, and CUDA writing into it.
    let usage =
        vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST | vk::BufferUsageFlags::STORAGE_BUFFER;
    let buffer = Buffer::exportable(&device, len as u64, usage, BufferMemory::DeviceLocal)?;
    transfer::upload_buffer(&buffer, &expected)?;
    let exported = buffer.export()?;
    let (buffer_copy, buffer_written_by_cuda) = {
        let t = Instant::now();
        let memory = crate::interop::memory_into_cuda(&cuda_device, exported)?;
        let import_ms = ms_since(t);
        let t = Instant::now();
        let mapped = memory.map_buffer(0, len as u64)?;
        log::debug!("stage 2: buffer imported and mapped");
        let map_ms = ms_since(t);
        dst.fill(0xcd, &stream)?;
        stream.synchronize()?;
        let (copy_gpu_ms, copy_host_ms) = timed_copy(&stream, || dst.copy_from_mapped(&mapped, len, &stream))?;
        let got = dst.to_host()?;
        let difference = compare(&expected, &got, desc.width);
        // Write a different pattern through the mapping; Vulkan must see it.
        let inverted: Vec<u8> = expected.iter().map(|b| !b).collect();
        mapped.write_from_host(&inverted)?;
        cuda_device.synchronize()?;
        drop(mapped);
        let seen = transfer::readback_buffer(&buffer, len)?;
        (
            CudaCopy {
                import_ms,
                map_ms,
                copy_gpu_ms,
                copy_host_ms,
                throughput_gb_s: len as f64 / (copy_gpu_ms * 1e-3) / 1e9,
                identical: difference.is_none(),
                difference,
            },
            seen == inverted,
        )
    };

    log::debug!("stage 2: image and buffer checked; semaphore hand-off");
    let semaphore = semaphore_handoff(&device, &cuda_device, 20)?;
    log::debug!("stage 2: semaphore hand-off done (ok={})", semaphore.ok);
    drop(stream);
    drop(dst);
    drop(buffer);
    drop(image);
    let info = cuda_device.info().clone();
    Ok(Stage2 {
        vulkan_device: device.info().clone(),
        cuda_device: info.name,
        cuda_ordinal: info.ordinal,
        cuda_uuid: format_uuid(&info.uuid),
        width: desc.width,
        height: desc.height,
        image_dedicated,
        image: image_copy,
        buffer: buffer_copy,
        buffer_written_by_cuda,
        semaphore,
        round_trip,
    })
}

/// Times `enqueue` with CUDA events and with the host clock around enqueue + synchronise.
fn timed_copy(stream: &cuda::Stream, enqueue: impl Fn() -> Result<()>) -> Result<(f64, f64)> {
    let device = stream.device();
    let (start, end) = (cuda::Event::new(device)?, cuda::Event::new(device)?);
    // one warm-up copy
    enqueue()?;
    stream.synchronize()?;
    let t = Instant::now();
    start.record(stream)?;
    enqueue()?;
    end.record(stream)?;
    end.synchronize()?;
    let host = ms_since(t);
    Ok((end.elapsed_since(&start)? as f64, host))
}

/// Vulkan signals n from a queue submission, CUDA waits for it on a stream and
/// signals n on a second semaphore, a Vulkan submission waits for that and
/// signals a third, which the host waits for. Every wait is bounded: a signal
/// that never arrives is an error, not a hang.
pub(crate) fn semaphore_handoff(
    device: &Arc<Device>,
    cuda_device: &Arc<cuda::CudaDevice>,
    rounds: u64,
) -> Result<SemaphoreHandoff> {
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(5);
    let to_cuda = TimelineSemaphore::new(device, 0, true)?;
    let to_vulkan = TimelineSemaphore::new(device, 0, true)?;
    let done = TimelineSemaphore::new(device, 0, false)?;
    let cu_to_cuda = cuda::ExternalSemaphore::import_timeline(cuda_device, to_cuda.export()?)?;
    let cu_to_vulkan = cuda::ExternalSemaphore::import_timeline(cuda_device, to_vulkan.export()?)?;
    let stream = cuda::Stream::new(cuda_device)?;
    let passed = cuda::Event::new(cuda_device)?;
    let (mut a, mut b, mut total) = (Vec::new(), Vec::new(), Vec::new());
    let mut failure = None;
    for n in 1..=rounds {
        cu_to_cuda.wait(&stream, n)?;
        passed.record(&stream)?;
        cu_to_vulkan.signal(&stream, n)?;
        // The signal goes first: a semaphore signal waits for every earlier
        // submission on the queue, so submitting the waiting batch first deadlocks.
        let t = Instant::now();
        // SAFETY: the three semaphores are live timelines of this device.
        unsafe {
            device.submit_batch(0, Batch { signal: &[(to_cuda.raw(), n)], ..Batch::default() }, vk::Fence::null())
        }?;
        // SAFETY: as above.
        unsafe {
            let wait = [(to_vulkan.raw(), n, vk::PipelineStageFlags::ALL_COMMANDS)];
            device.submit_batch(
                0,
                Batch { wait: &wait, signal: &[(done.raw(), n)], ..Batch::default() },
                vk::Fence::null(),
            )
        }?;
        if !passed.wait_timeout(LIMIT)? {
            failure = Some(format!("round {n}: CUDA did not see Vulkan's signal within {LIMIT:?}"));
            break;
        }
        let t_cuda = ms_since(t);
        if !done.wait(n, LIMIT)? {
            failure = Some(format!("round {n}: Vulkan did not see CUDA's signal within {LIMIT:?}"));
            break;
        }
        let t_all = ms_since(t);
        if to_vulkan.value()? != n || to_cuda.value()? != n {
            failure = Some(format!("round {n}: counters out of order"));
            break;
        }
        a.push(t_cuda);
        b.push(t_all - t_cuda);
        total.push(t_all);
    }
    if let Some(why) = &failure {
        // Release whatever still waits, so that teardown cannot hang.
        let _ = to_cuda.signal_from_host(rounds + 1);
        let _ = to_vulkan.signal_from_host(rounds + 1);
        log::error!("semaphore hand-off failed: {why}");
    }
    if !stream_idle(&stream, LIMIT)? {
        return Err(Error::InvalidArgument("the CUDA stream did not drain after the semaphore hand-off".into()));
    }
    device.wait_idle()?;
    drop((cu_to_cuda, cu_to_vulkan));
    Ok(SemaphoreHandoff {
        vulkan_to_cuda: Timing::of(a),
        cuda_to_vulkan: Timing::of(b),
        round_trip: Timing::of(total),
        ok: failure.is_none(),
    })
}

fn stream_idle(stream: &cuda::Stream, limit: std::time::Duration) -> Result<bool> {
    let end = cuda::Event::new(stream.device())?;
    end.record(stream)?;
    end.wait_timeout(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_median() {
        let t = Timing::of(vec![5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!((t.min_ms, t.median_ms, t.trials), (1.0, 3.0, 5));
        assert_eq!(Timing::of(vec![1.0, 2.0]).median_ms, 1.5);
    }

    #[test]
    fn exit_codes() {
        let st = |status| StageReport { stage: 1, name: "x", status, reason: None, details: None };
        assert_eq!(Report { stages: vec![st(Status::Passed), st(Status::Skipped)] }.exit_code(), 0);
        assert_eq!(Report { stages: vec![st(Status::Different), st(Status::Skipped)] }.exit_code(), 2);
        assert_eq!(Report { stages: vec![st(Status::Different), st(Status::Error)] }.exit_code(), 1);
    }
}
