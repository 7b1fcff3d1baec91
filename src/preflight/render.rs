//! The pre-flight report as readable text.

use super::{Details, Report, Status};

/// The report as readable text.
///
/// ```no_run
/// let report = neural_frame::preflight::run(&[], &Default::default());
/// print!("{}", neural_frame::preflight::render(&report));
/// ```
pub fn render(report: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for st in &report.stages {
        let status = match st.status {
            Status::Passed => "PASSED",
            Status::Different => "FAILED (different)",
            Status::Error => "FAILED",
            Status::Skipped => "SKIPPED",
        };
        let _ = writeln!(s, "stage {}: {} — {status}", st.stage, st.name);
        if let Some(r) = &st.reason {
            let _ = writeln!(s, "  reason: {r}");
        }
        match &st.details {
            Some(Details::Stage1(d)) => {
                let _ = writeln!(
                    s,
                    "  device: {} ({}), driver {} {}",
                    d.device.name, d.device.device_type, d.device.driver_name, d.device.driver_info
                );
                let _ = writeln!(s, "  UUID: {}", d.device.uuid);
                let _ = writeln!(
                    s,
                    "  {}×{} RGBA8, {} bytes compared: {}",
                    d.width,
                    d.height,
                    d.bytes_compared,
                    if d.identical { "identical" } else { "DIFFERENT" }
                );
                let _ = writeln!(s, "  allocation: {}", if d.dedicated { "dedicated" } else { "not dedicated" });
                let _ = writeln!(s, "  export (vkGetMemoryFdKHR): {:.3} ms", d.export_ms);
                let _ = writeln!(s, "  import (create + allocate + bind on 2nd VkDevice): {:.3} ms", d.import_ms);
                let _ = writeln!(
                    s,
                    "  GPU→CPU→GPU round trip: min {:.3} ms, median {:.3} ms ({} trials)",
                    d.round_trip.min_ms, d.round_trip.median_ms, d.round_trip.trials
                );
                if let Some(v) = d.validation_errors {
                    let _ = writeln!(s, "  validation errors: {v}");
                }
            }
            Some(Details::Stage2(d)) => {
                let _ = writeln!(
                    s,
                    "  paired: Vulkan #{} \"{}\" ↔ CUDA {} \"{}\" (UUID {})",
                    d.vulkan_device.index, d.vulkan_device.name, d.cuda_ordinal, d.cuda_device, d.cuda_uuid
                );
                for (what, c) in [("image → mipmapped array", &d.image), ("linear buffer → device pointer", &d.buffer)]
                {
                    let _ = writeln!(
                        s,
                        "  {what}: import {:.3} ms, map {:.3} ms, copy {:.3} ms GPU / {:.3} ms host ({:.1} GB/s), {}",
                        c.import_ms,
                        c.map_ms,
                        c.copy_gpu_ms,
                        c.copy_host_ms,
                        c.throughput_gb_s,
                        if c.identical { "identical" } else { "DIFFERENT" }
                    );
                }
                let _ = writeln!(
                    s,
                    "  image allocation: {}",
                    if d.image_dedicated { "dedicated" } else { "not dedicated" }
                );
                let _ = writeln!(s, "  CUDA write through mapped buffer seen by Vulkan: {}", d.buffer_written_by_cuda);
                let h = &d.semaphore;
                let _ = writeln!(
                    s,
                    "  timeline semaphore Vulkan→CUDA→Vulkan ({} rounds, medians): Vulkan→CUDA {:.3} ms, CUDA→Vulkan {:.3} ms, round trip {:.3} ms (min {:.3})",
                    h.round_trip.trials,
                    h.vulkan_to_cuda.median_ms,
                    h.cuda_to_vulkan.median_ms,
                    h.round_trip.median_ms,
                    h.round_trip.min_ms
                );
                let _ = writeln!(
                    s,
                    "  GPU→CPU→GPU round trip: min {:.3} ms, median {:.3} ms ({} trials)",
                    d.round_trip.min_ms, d.round_trip.median_ms, d.round_trip.trials
                );
            }
            Some(Details::Stage3(d)) => {
                let _ = writeln!(
                    s,
                    "  ONNX Runtime {} ({}), providers: {}",
                    d.runtime.version,
                    d.runtime.library.display(),
                    d.runtime.providers.join(", ")
                );
                let _ = writeln!(
                    s,
                    "  paired: Vulkan #{} \"{}\" ↔ CUDA {} \"{}\"",
                    d.vulkan_device.index, d.vulkan_device.name, d.cuda_ordinal, d.cuda_device
                );
                let _ = writeln!(
                    s,
                    "  session with the CUDA provider: {:.1} ms; first run {:.1} ms; {} values, max |CUDA − CPU| {:.2e} (allowed {:.0e})",
                    d.register_ms, d.first_run_ms, d.values, d.max_abs_difference, d.tolerance
                );
            }
            None => {}
        }
    }
    s
}
