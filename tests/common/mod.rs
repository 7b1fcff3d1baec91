//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod pipeline;

use std::process::{Command, Output};

/// Runs the `neural-frame` binary with `args` and extra environment.
pub fn neural_frame(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_neural-frame"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the neural-frame binary runs")
}

/// stdout and stderr as text, for assertion messages.
pub fn text(out: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Parses the binary's stdout as JSON.
pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(out)))
}

/// Open file descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

/// The reason every GPU test carries in its `#[ignore]`.
pub const GPU: &str = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored";

/// A Vulkan device and the CUDA device with its UUID. When there is none, the
/// test fails with the pre-flight report (it never passes without running).
pub fn gpu() -> (std::sync::Arc<neural_frame::vulkan::Device>, std::sync::Arc<neural_frame::cuda::CudaDevice>) {
    use neural_frame::{cuda, preflight, vulkan};
    let attempt = || -> neural_frame::Result<_> {
        cuda::init()?;
        let instance = vulkan::Instance::new(&vulkan::InstanceOptions::default())?;
        let device = vulkan::Device::new(&instance, vulkan::DeviceSelector::Auto)?;
        let cuda_device = cuda::CudaDevice::by_uuid(&device.info().uuid_bytes)?;
        Ok((device, cuda_device))
    };
    attempt().unwrap_or_else(|e| {
        let options = preflight::Options { width: 64, height: 64, trials: 1, ..Default::default() };
        let report = preflight::run(&[], &options);
        panic!("no GPU for this test ({e}); pre-flight says:\n{}", preflight::render(&report))
    })
}
