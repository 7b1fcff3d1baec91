//! What `nf.Model` costs a frame with each way of handing frames over: a 1080p RGBS GPU clip
//! through a chain of `k` filters (a ×1 model), requested as vspipe does (several frames in
//! flight, `getFrameAsync`), timed per frame, for `sync="host"` and `sync="gpu"`. The
//! difference between k filters and none, over k, is one filter's cost.
//!
//! ```sh
//! cargo run --release -p neural-frame-vapoursynth --example chain -- PLUGIN [MODEL] [FRAMES] [K]
//! ```
//! Needs the environment of `vapoursynth/ci-env.sh` (or a Vulkan 1.4 system) and ONNX Runtime
//! (`eval "$(scripts/runtime-env.sh)"`); `sync="gpu"` needs a device that exports semaphores.

use std::ffi::{c_int, c_void};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use neural_frame_vapoursynth::ffi::*;
use neural_frame_vapoursynth::host::{Arg, Core, Host, Node};

/// Frames outstanding at once (vspipe asks for as many as the core has threads).
const WINDOW: usize = 8;

struct Done {
    state: Mutex<(usize, Option<String>)>,
    cv: Condvar,
}

unsafe extern "system" fn frame_done(
    user: *mut c_void,
    f: *const VSFrame,
    _n: c_int,
    _node: *mut VSNode,
    error: *const std::ffi::c_char,
) {
    // SAFETY: the Done this program passed, alive until every callback ran.
    let done = unsafe { &*(user as *const (Done, *const VSAPI)) };
    let mut s = done.0.state.lock().unwrap_or_else(|p| p.into_inner());
    s.0 += 1;
    if f.is_null() {
        // SAFETY: VapourSynth's NUL-terminated message.
        s.1 = Some(unsafe { std::ffi::CStr::from_ptr(error) }.to_string_lossy().into_owned());
    } else if let Some(api) = {
        // SAFETY: the core's API table, alive as long as the core.
        unsafe { done.1.as_ref() }
    } {
        // SAFETY: the frame the callback owns.
        unsafe { api.freeFrame.expect("freeFrame")(f) };
    }
    done.0.cv.notify_all();
}

/// Milliseconds a frame for frames `first..first + frames` of `node`, `WINDOW` at a time.
fn time(core: &Core<'_>, node: &Node<'_>, first: usize, frames: usize) -> Result<f64, String> {
    let api = core.host().api();
    let get = api.getFrameAsync.ok_or("no getFrameAsync")?;
    let done = Box::new((Done { state: Mutex::new((0, None)), cv: Condvar::new() }, api as *const VSAPI));
    let user = &*done as *const (Done, *const VSAPI) as *mut c_void;
    let start = Instant::now();
    let mut asked = 0;
    let mut state = done.0.state.lock().unwrap_or_else(|p| p.into_inner());
    while state.0 < frames {
        while asked < frames && asked - state.0 < WINDOW {
            drop(state);
            // SAFETY: our node; the callback's data outlives every call (waited for below).
            unsafe { get((first + asked) as c_int, node.as_ptr(), Some(frame_done), user) };
            asked += 1;
            state = done.0.state.lock().unwrap_or_else(|p| p.into_inner());
        }
        state = done.0.cv.wait(state).unwrap_or_else(|p| p.into_inner());
    }
    if let Some(e) = state.1.take() {
        return Err(e);
    }
    Ok(start.elapsed().as_secs_f64() * 1e3 / frames as f64)
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let plugin = args.get(1).ok_or("usage: chain PLUGIN [MODEL] [FRAMES] [K]")?;
    let model = args.get(2).cloned().unwrap_or_else(|| "models/test/tiny-x1-f32-same-dims.onnx".into());
    let frames: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(120);
    let k: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(4);
    let host = Host::from_env().ok_or("NF_VAPOURSYNTH_LIB is not set")??;
    let core = host.create_core(0)?;
    core.load_plugin(std::path::Path::new(plugin))?;
    let device = core.vulkan_info()?;
    println!("device: {}", neural_frame_vapoursynth::host::buffer_text(&device.deviceName));
    let total = (frames + 2 * WINDOW) as i64;
    let source = core.clip(
        "std",
        "BlankClip",
        &[
            ("format", Arg::Int(pfRGBS.into())),
            ("width", Arg::Int(1920)),
            ("height", Arg::Int(1080)),
            ("length", Arg::Int(total)),
            ("color", Arg::Floats(&[0.2, 0.4, 0.6])),
        ],
    )?;
    let gpu = core.clip("std", "GPUUpload", &[("clip", Arg::Nodes(&[&source]))])?;
    for sync in ["host", "gpu"] {
        let chain = |n: usize| -> Result<Node<'_>, String> {
            let mut c = core.clip("std", "Expr", &[("clips", Arg::Nodes(&[&gpu])), ("expr", Arg::Str("x"))])?;
            for _ in 0..n {
                c = core.clip(
                    "nf",
                    "Model",
                    &[("clip", Arg::Nodes(&[&c])), ("model", Arg::Str(&model)), ("sync", Arg::Str(sync))],
                )?;
            }
            core.clip("std", "GPUDownload", &[("clip", Arg::Nodes(&[&c]))])
        };
        let none = chain(0)?;
        let some = match chain(k) {
            Ok(c) => c,
            Err(e) => {
                println!("sync={sync}: {e}");
                continue;
            }
        };
        // Warm-up (the first frames build the contexts), then frames no run has asked for.
        time(&core, &none, 0, 2 * WINDOW)?;
        time(&core, &some, 0, 2 * WINDOW)?;
        let t0 = time(&core, &none, 2 * WINDOW, frames)?;
        let tk = time(&core, &some, 2 * WINDOW, frames)?;
        println!(
            "1080p RGBS, sync={sync}: {t0:.3} ms a frame with no filter, {tk:.3} with {k} chained: {:.3} ms a filter",
            (tk - t0) / k as f64
        );
    }
    Ok(())
}
