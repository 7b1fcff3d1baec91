//! Interop on a real NVIDIA GPU, with the crate's own types.

use super::*;
use crate::vulkan::{DeviceSelector, Image, ImageDesc, Instance, InstanceOptions, pattern, transfer};

const GPU: &str = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored";

fn gpu() -> (Arc<Device>, Arc<CudaDevice>) {
    let attempt = || -> Result<_> {
        cuda::init()?;
        let instance = Instance::new(&InstanceOptions::default())?;
        let device = Device::new(&instance, DeviceSelector::Auto)?;
        let cuda_device = CudaDevice::by_uuid(&device.info().uuid_bytes)?;
        Ok((device, cuda_device))
    };
    attempt().unwrap_or_else(|e| {
        let options = crate::preflight::Options { width: 64, height: 64, trials: 1, ..Default::default() };
        let report = crate::preflight::run(&[], &options);
        panic!("no GPU for this test ({e}); {GPU}; pre-flight says:\n{}", crate::preflight::render(&report))
    })
}

/// What a GPU test measured, on stdout (quoted in the notes of GPU runs).
fn report(what: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout(), "{what}");
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn wrong_uuid_fails_listing_every_cuda_uuid() {
    let _ = gpu();
    let wrong = [0x73u8, 0xca, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x77];
    let err = CudaDevice::by_uuid(&wrong).err().expect("no CUDA device has this UUID");
    let msg = err.to_string();
    assert!(msg.contains("73ca0000-0000-0000-0000-000000000077"), "{msg}");
    for d in cuda::devices().expect("CUDA devices") {
        assert!(msg.contains(&crate::format_uuid(&d.uuid)), "{msg}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn timeline_semaphore_round_trip() {
    let (device, cuda_device) = gpu();
    let h = crate::preflight::semaphore_handoff(&device, &cuda_device, 100).expect("hand-off runs");
    assert!(h.ok, "{h:?}");
    assert_eq!(h.round_trip.trials, 100);
    report(format_args!(
        "semaphore Vulkan→CUDA→Vulkan: median {:.3} ms (Vulkan→CUDA {:.3}, CUDA→Vulkan {:.3}), min {:.3} ms",
        h.round_trip.median_ms, h.vulkan_to_cuda.median_ms, h.cuda_to_vulkan.median_ms, h.round_trip.min_ms
    ));
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn import_map_release_200_times_leaks_neither_fds_nor_memory() {
    let (device, cuda_device) = gpu();
    let desc = ImageDesc::rgba8(256, 256);
    let data = pattern::rgba8(256, 256);
    let usage =
        vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST | vk::BufferUsageFlags::STORAGE_BUFFER;
    let round = || {
        let image = Image::exportable(&device, desc).expect("image");
        transfer::upload_image(&image, &data).expect("upload");
        let array = memory_into_cuda(&cuda_device, image.export().expect("export"))
            .expect("import image")
            .map_rgba8_array(256, 256)
            .expect("map array");
        let shared = SharedBuffer::new(&device, Some(&cuda_device), 4 << 20, usage).expect("shared buffer");
        transfer::upload_buffer(shared.buffer(), &data).expect("upload");
        let got = shared.cuda.as_ref().expect("mapped").to_host(data.len()).expect("read");
        assert_eq!(got, data);
        drop((array, shared)); // CUDA first, then Vulkan
        drop(image);
    };
    round(); // warm-up: first-use allocations of the driver
    device.wait_idle().expect("idle");
    let fds = open_fds();
    let (free, _) = cuda_device.memory_info().expect("memory info");
    for _ in 0..200 {
        round();
    }
    device.wait_idle().expect("idle");
    let fds_after = open_fds();
    let (free_after, _) = cuda_device.memory_info().expect("memory info");
    report(format_args!("fds {fds} → {fds_after}; free device memory {free} → {free_after}"));
    assert_eq!(fds_after, fds, "file descriptors leaked");
    assert!(free_after + (2 << 20) >= free, "device memory leaked: {} bytes", free - free_after);
}
