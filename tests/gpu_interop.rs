//! Vulkan ↔ CUDA interop on a real NVIDIA GPU (issue "CUDA side", pre-flight stage 2).

mod common;

use ash::vk;
use common::{GPU, gpu, open_fds};
use neural_frame::cuda::{self, CudaDevice, ExternalMemory};
use neural_frame::preflight::{self, Details, Status};
use neural_frame::vulkan::{Buffer, BufferMemory, Image, ImageDesc, pattern, transfer};

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn stage2_passes_and_reports() {
    let _ = GPU;
    let _ = gpu();
    let report = preflight::run(&[2], &preflight::Options::default());
    println!("{}", preflight::render(&report));
    assert_eq!(report.stages[0].status, Status::Passed, "{}", preflight::render(&report));
    assert_eq!(report.exit_code(), 0);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_device_is_found_by_the_vulkan_uuid() {
    let (device, cuda_device) = gpu();
    assert_eq!(cuda_device.info().uuid, device.info().uuid_bytes);
    println!(
        "Vulkan #{} {} {} ↔ CUDA {} {}",
        device.info().index,
        device.info().name,
        device.info().uuid,
        cuda_device.info().ordinal,
        cuda_device.info().name
    );
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
        assert!(msg.contains(&neural_frame::error::format_uuid(&d.uuid)), "{msg}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn image_and_buffer_mappings_are_byte_exact_at_odd_sizes() {
    let _ = gpu();
    for (w, h) in [(1023, 517), (37, 53)] {
        let options = preflight::Options { width: w, height: h, trials: 1, ..Default::default() };
        let s = preflight::stage2(&options).expect("stage 2 runs");
        assert!(s.image.identical, "{w}×{h} image: {:?}", s.image.difference);
        assert!(s.buffer.identical, "{w}×{h} buffer: {:?}", s.buffer.difference);
        assert!(s.buffer_written_by_cuda, "{w}×{h}: CUDA's write through the mapping not seen by Vulkan");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn timeline_semaphore_round_trip() {
    let (device, cuda_device) = gpu();
    let h = preflight::semaphore_handoff(&device, &cuda_device, 100).expect("hand-off runs");
    assert!(h.ok, "{h:?}");
    assert_eq!(h.round_trip.trials, 100);
    println!(
        "semaphore Vulkan→CUDA→Vulkan: median {:.3} ms (Vulkan→CUDA {:.3}, CUDA→Vulkan {:.3}), min {:.3} ms",
        h.round_trip.median_ms, h.vulkan_to_cuda.median_ms, h.cuda_to_vulkan.median_ms, h.round_trip.min_ms
    );
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
        let array = ExternalMemory::import(&cuda_device, image.export().expect("export"))
            .expect("import image")
            .map_rgba8_array(256, 256)
            .expect("map array");
        let mut buffer = Buffer::exportable(&device, 4 << 20, usage, BufferMemory::DeviceLocal).expect("buffer");
        transfer::upload_buffer(&mut buffer, &data).expect("upload");
        let mapped = ExternalMemory::import(&cuda_device, buffer.export().expect("export"))
            .expect("import buffer")
            .map_buffer(0, 4 << 20)
            .expect("map buffer");
        let got = mapped.to_host(data.len()).expect("read");
        assert_eq!(got, data);
        drop((array, mapped)); // CUDA first, then Vulkan
        drop((image, buffer));
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
    println!("fds {fds} → {fds_after}; free device memory {free} → {free_after}");
    assert_eq!(fds_after, fds, "file descriptors leaked");
    assert!(free_after + (2 << 20) >= free, "device memory leaked: {} bytes", free - free_after);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn full_preflight_passes_every_stage() {
    let _ = gpu();
    let report = preflight::run(&[], &preflight::Options { trials: 3, ..Default::default() });
    let text = preflight::render(&report);
    println!("{text}");
    assert!(report.stages.iter().all(|s| s.status == Status::Passed), "{text}");
    assert!(matches!(report.stages[1].details, Some(Details::Stage2(_))));
}
