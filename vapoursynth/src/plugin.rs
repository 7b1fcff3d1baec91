//! The plugin: `VapourSynthPluginInit2` registers `nf.Model`, whose constructor checks the
//! core, the clip, the options and the model file, then builds the filter ([`start_inference`]).
//!
//! ```python
//! clip = core.nf.Model(clip, model="upscale.onnx", backend="auto", precision="auto", tile=[384, 256])
//! ```
//!
//! Arguments (mirroring `neural-frame run`):
//! - `clip` (`vnode:gpu`): RGBS, RGBH or RGB24, one format and size for the whole clip; a CPU
//!   clip is uploaded by the core.
//! - `model` (path, required): the ONNX model.
//! - `backend`: `auto` (default), `cuda` or `cpu`.
//! - `precision`: `auto` (default), `fp32` or `fp16`.
//! - `tile`: tiles of `[width, height]` input pixels (one number: square tiles);
//!   `tile_overlap`: the context on each side of a tile (default 24, only with `tile`).
//!
//! Errors go to `mapSetError`, each message starting `Model: `.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::PathBuf;

use crate::ffi::*;
use crate::filter;

/// The plugin's identifier.
pub const PLUGIN_ID: &str = "com.neural-frame.nf";
/// The plugin's namespace: `core.nf`.
pub const PLUGIN_NAMESPACE: &str = "nf";
const PLUGIN_ID_C: &CStr = c"com.neural-frame.nf";
const PLUGIN_NAMESPACE_C: &CStr = c"nf";

/// `nf.Model`'s arguments on a core with GPU frames (API 4.3).
const MODEL_ARGS: &CStr =
    c"clip:vnode:gpu;model:data;backend:data:opt;precision:data:opt;tile:int[]:opt;tile_overlap:int:opt;sync:data:opt;";
/// The same on an older core, which knows no `vnode:gpu`: there `nf.Model` loads, and says at
/// creation that it needs R81.
const MODEL_ARGS_OLD_CORE: &CStr =
    c"clip:vnode;model:data;backend:data:opt;precision:data:opt;tile:int[]:opt;tile_overlap:int:opt;sync:data:opt;";

/// `VapourSynthPluginInit2`: the entry point VapourSynth calls when it loads the library.
///
/// # Safety
///
/// Called by VapourSynth with its plugin handle and a valid `VSPLUGINAPI`.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn VapourSynthPluginInit2(plugin: *mut VSPlugin, vspapi: *const VSPLUGINAPI) {
    // SAFETY: VapourSynth passes a valid table that outlives this call.
    let Some(papi) = (unsafe { vspapi.as_ref() }) else { return };
    let (Some(api_version), Some(config), Some(register)) =
        (papi.getAPIVersion, papi.configPlugin, papi.registerFunction)
    else {
        return;
    };
    // SAFETY: a function of the table, no arguments.
    let core_api = unsafe { api_version() };
    let gpu = core_api >= VAPOURSYNTH_API_VERSION;
    // The API version the plugin asks for: 4.3 where the core has it, else 4.0 so that an older
    // core still loads the plugin and `nf.Model` can say what it needs.
    let (asked, args) = if gpu {
        (VAPOURSYNTH_API_VERSION, MODEL_ARGS)
    } else {
        (make_version(VAPOURSYNTH_API_MAJOR, 0), MODEL_ARGS_OLD_CORE)
    };
    // SAFETY: NUL-terminated strings that VapourSynth copies; `plugin` is the handle it passed.
    unsafe {
        config(
            PLUGIN_ID_C.as_ptr(),
            PLUGIN_NAMESPACE_C.as_ptr(),
            c"neural-frame: ONNX models on GPU frames".as_ptr(),
            make_version(0, 1),
            asked,
            0,
            plugin,
        );
        register(
            c"Model".as_ptr(),
            args.as_ptr(),
            if gpu { c"clip:vnode:gpu;" } else { c"clip:vnode;" }.as_ptr(),
            Some(model_create),
            std::ptr::null_mut(),
            plugin,
        );
    }
}

/// A node reference, freed when dropped (the constructor's error paths).
struct NodeRef<'a> {
    node: *mut VSNode,
    api: &'a VSAPI,
}

impl Drop for NodeRef<'_> {
    fn drop(&mut self) {
        // SAFETY: `node` is a reference this constructor took with `mapGetNode`, freed once.
        unsafe { vs!(self.api, freeNode)(self.node) };
    }
}

/// `nf.Model`'s constructor: every check, then [`start_inference`].
unsafe extern "system" fn model_create(
    in_: *const VSMap,
    out: *mut VSMap,
    _user_data: *mut c_void,
    core: *mut VSCore,
    vsapi: *const VSAPI,
) {
    // SAFETY: VapourSynth passes its table, valid for the call.
    let Some(api) = (unsafe { vsapi.as_ref() }) else { return };
    // SAFETY: `in_`, `core` are VapourSynth's for this call.
    let result = unsafe { create(api, in_, out, core) };
    if let Err(message) = result {
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: `out` is the constructor's output map; VapourSynth copies the message.
        unsafe { vs!(api, mapSetError)(out, message.as_ptr()) };
    }
}

/// The inference back end the options name (`--backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    Auto,
    Cuda,
    Cpu,
}

/// The precision the options name (`--precision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Precision {
    Auto,
    Fp32,
    Fp16,
}

/// The clip's sample format, one of the three the filter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SampleFormat {
    Rgbs,
    Rgbh,
    Rgb24,
}

/// Everything the constructor checked, for the inference to start from.
#[derive(Debug)]
struct Setup {
    video_info: VSVideoInfo,
    format: SampleFormat,
    model: PathBuf,
    backend: Backend,
    precision: Precision,
    /// Tile width and height, and the overlap.
    tile: Option<(u32, u32, u32)>,
    /// The core's Vulkan device (VSVULKANAPI::getVulkanCoreInfo).
    device: VSVulkanCoreInfo,
    /// How frames are handed over.
    sync: filter::Sync,
}

/// The checks, in order: the core, the clip, the options, the model file; then the inference.
///
/// # Safety
///
/// `api`, `in_` and `core` are what VapourSynth passed to the constructor.
unsafe fn create(api: &VSAPI, in_: *const VSMap, out: *mut VSMap, core: *mut VSCore) -> Result<(), String> {
    // The core: R81 (API 4.3, getVulkanAPI) with a working Vulkan device.
    // SAFETY: a function of the table, no arguments.
    let api_version = unsafe { vs!(api, getAPIVersion)() };
    if api_version < VAPOURSYNTH_API_VERSION {
        return Err(format!(
            "Model: needs VapourSynth R81 or newer (API 4.3, GPU frames); this core has API {}.{}",
            api_version >> 16,
            api_version & 0xffff
        ));
    }
    let mut info = std::mem::MaybeUninit::<VSCoreInfo2>::zeroed();
    // SAFETY: API 4.2's getCoreInfo2 fills the struct.
    let info = unsafe {
        vs!(api, getCoreInfo2)(core, info.as_mut_ptr());
        info.assume_init()
    };
    if info.coreVersion < VAPOURSYNTH_CORE_R81 {
        return Err(format!("Model: needs VapourSynth R81 or newer (GPU frames); this core is R{}", info.coreVersion));
    }
    // SAFETY: present from API 4.3 on, checked above.
    let vk = unsafe { api.getVulkanAPI.map(|f| f()) }.unwrap_or(std::ptr::null());
    // SAFETY: the core's static table, valid for the core's lifetime.
    let Some(vk) = (unsafe { vk.as_ref() }) else {
        return Err("Model: this VapourSynth core has no GPU API (getVulkanAPI)".into());
    };
    let Some(core_info) = vk.getVulkanCoreInfo else {
        return Err("Model: this VapourSynth core has no getVulkanCoreInfo".into());
    };
    let mut device = VSVulkanCoreInfo::default();
    let mut error = [0 as c_char; 1024];
    // SAFETY: the struct and the error buffer are ours, the buffer's size given.
    if unsafe { core_info(core, &mut device, error.as_mut_ptr(), error.len() as c_int) } != 0 {
        return Err(format!("Model: VapourSynth has no Vulkan device for GPU frames: {}", c_text(&error)));
    }

    // The clip.
    let mut err = 0;
    // SAFETY: the argument map VapourSynth checked against `clip:vnode:gpu`.
    let node = unsafe { vs!(api, mapGetNode)(in_, c"clip".as_ptr(), 0, &mut err) };
    if node.is_null() {
        return Err("Model: no clip".into());
    }
    let clip = NodeRef { node, api };
    // SAFETY: a node we hold; the info lives as long as the node.
    let video_info = unsafe { *vs!(api, getVideoInfo)(clip.node) };
    let format = check_format(api, core, &video_info)?;

    // The options.
    // SAFETY: the argument map, keys registered as `data`.
    let model = unsafe { map_string(api, in_, c"model") }?.ok_or("Model: no model given (model=\"path.onnx\")")?;
    // SAFETY: as above.
    let backend = match unsafe { map_string(api, in_, c"backend") }?.as_deref() {
        None | Some("auto") => Backend::Auto,
        Some("cuda") => Backend::Cuda,
        Some("cpu") => Backend::Cpu,
        Some(other) => return Err(format!("Model: backend is auto, cuda or cpu, not \"{other}\"")),
    };
    // SAFETY: as above.
    let precision = match unsafe { map_string(api, in_, c"precision") }?.as_deref() {
        None | Some("auto") => Precision::Auto,
        Some("fp32") => Precision::Fp32,
        Some("fp16") => Precision::Fp16,
        Some(other) => return Err(format!("Model: precision is auto, fp32 or fp16, not \"{other}\"")),
    };
    // SAFETY: the argument map, keys registered as `int[]` and `int`.
    let tile = unsafe { tile_option(api, in_) }?;
    // SAFETY: the argument map, a key registered as `data`.
    let sync = match unsafe { map_string(api, in_, c"sync") }?.as_deref() {
        None | Some("auto") => filter::Sync::Auto,
        Some("host") => filter::Sync::Host,
        Some("gpu") => filter::Sync::Gpu,
        Some(other) => return Err(format!("Model: sync is auto, host or gpu, not \"{other}\"")),
    };

    // The model file.
    let model = PathBuf::from(model);
    match std::fs::metadata(&model) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(format!("Model: the model {} is not a file", model.display())),
        Err(e) => return Err(format!("Model: cannot read the model file {}: {e}", model.display())),
    }

    let setup = Setup { video_info, format, model, backend, precision, tile, device, sync };
    // SAFETY: `vk` is the core's table, static for the process.
    let vk: &'static VSVULKANAPI = unsafe { &*(vk as *const VSVULKANAPI) };
    // SAFETY: the constructor's maps and core; the node reference moves to the filter.
    unsafe { start_inference(api, vk, &setup, clip, out, core) }
}

/// The model run on the clip's frames: the filter's instance (a neural-frame context on the
/// core's physical device) and `createVideoFilterEx` with `ffGPUOutput`; its `getFrame` is
/// [`filter::get_frame`].
///
/// # Safety
/// `api`, `out` and `core` are the constructor's; `clip` is the node reference it took.
unsafe fn start_inference(
    api: &VSAPI,
    vk: &'static VSVULKANAPI,
    setup: &Setup,
    clip: NodeRef<'_>,
    out: *mut VSMap,
    core: *mut VSCore,
) -> Result<(), String> {
    let plane_format = match setup.format {
        SampleFormat::Rgbs => ash::vk::Format::R32_SFLOAT,
        SampleFormat::Rgbh => ash::vk::Format::R16_SFLOAT,
        SampleFormat::Rgb24 => ash::vk::Format::R8_UNORM,
    };
    let backend = match setup.backend {
        Backend::Auto => neural_frame::Backend::Auto,
        Backend::Cuda => neural_frame::Backend::Cuda,
        Backend::Cpu => neural_frame::Backend::Cpu,
    };
    let precision = match setup.precision {
        Precision::Auto => None,
        Precision::Fp32 => Some(neural_frame::Precision::Fp32),
        Precision::Fp16 => Some(neural_frame::Precision::Fp16),
    };
    let options = filter::Options {
        model: &setup.model,
        backend,
        precision,
        tile: setup.tile,
        plane_format,
        width: setup.video_info.width as u32,
        height: setup.video_info.height as u32,
        device_uuid: setup.device.deviceUUID,
        semaphore_export: setup.device.semaphoreExportHandleType,
        sync: setup.sync,
    };
    let f = filter::Filter::new(&options, (api, core), clip.node, vk, &setup.video_info)?;
    let out_info = *f.out_info();
    let node = f.node();
    let mode = f.mode();
    std::mem::forget(clip); // the filter holds the reference now, freed in filter::free
    let dependency = VSFilterDependency { source: node, requestPattern: rpStrictSpatial };
    let instance = Box::into_raw(Box::new(f));
    // SAFETY: the constructor's map and core; the instance is freed by filter::free.
    unsafe {
        vs!(api, createVideoFilterEx)(
            out,
            c"Model".as_ptr(),
            &out_info,
            Some(filter::get_frame),
            Some(filter::free),
            mode,
            ffGPUOutput,
            &dependency,
            1,
            instance.cast(),
            core,
        );
    }
    Ok(())
}

/// The clip's format: one of RGBS, RGBH and RGB24 and the same size for every frame, or an
/// error naming the format and the conversion to add.
fn check_format(api: &VSAPI, core: *mut VSCore, vi: &VSVideoInfo) -> Result<SampleFormat, String> {
    if vi.format.colorFamily == cfUndefined {
        return Err("Model: the clip's format varies from frame to frame; give it one, \
                    e.g. core.resize.Bicubic(clip, format=vs.RGBS)"
            .into());
    }
    if vi.width == 0 || vi.height == 0 {
        return Err("Model: the clip's frame size varies from frame to frame; give it one, \
                    e.g. core.resize.Bicubic(clip, width=W, height=H)"
            .into());
    }
    let f = &vi.format;
    // SAFETY: plain values and the constructor's core.
    let id = unsafe {
        vs!(api, queryVideoFormatID)(f.colorFamily, f.sampleType, f.bitsPerSample, f.subSamplingW, f.subSamplingH, core)
    };
    for (preset, format) in [(pfRGBS, SampleFormat::Rgbs), (pfRGBH, SampleFormat::Rgbh), (pfRGB24, SampleFormat::Rgb24)]
    {
        if id == preset {
            return Ok(format);
        }
    }
    let mut name = [0 as c_char; 32];
    // SAFETY: the header's buffer size: up to 32 bytes with the NUL.
    let named = unsafe { vs!(api, getVideoFormatName)(f, name.as_mut_ptr()) } != 0;
    let name = if named { c_text(&name) } else { format!("format id {id:#x}") };
    let conversion = if f.colorFamily == cfYUV {
        "core.resize.Bicubic(clip, format=vs.RGBS, matrix_in_s=\"709\") (or the clip's own matrix)"
    } else if f.colorFamily == cfGray {
        "core.resize.Bicubic(core.std.ShufflePlanes(clip, planes=[0, 0, 0], colorfamily=vs.RGB), format=vs.RGBS)"
    } else {
        "core.resize.Bicubic(clip, format=vs.RGBS)"
    };
    Err(format!("Model: the clip is {name}; the model takes RGBS, RGBH or RGB24: add {conversion} before it"))
}

/// An optional `data` argument as UTF-8.
///
/// # Safety
///
/// `map` is a valid map.
unsafe fn map_string(api: &VSAPI, map: *const VSMap, key: &CStr) -> Result<Option<String>, String> {
    let mut err = 0;
    // SAFETY: a valid map and key; the data lives as long as the map.
    let data = unsafe { vs!(api, mapGetData)(map, key.as_ptr(), 0, &mut err) };
    if err != peSuccess || data.is_null() {
        return Ok(None);
    }
    // SAFETY: as above, same key and index.
    let size = unsafe { vs!(api, mapGetDataSize)(map, key.as_ptr(), 0, &mut err) };
    // SAFETY: `size` bytes at `data`, owned by the map.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size.max(0) as usize) };
    String::from_utf8(bytes.to_vec())
        .map(Some)
        .map_err(|_| format!("Model: {} is not UTF-8 text", key.to_string_lossy()))
}

/// `tile` (one or two numbers) and `tile_overlap`.
///
/// # Safety
///
/// `map` is a valid map.
unsafe fn tile_option(api: &VSAPI, map: *const VSMap) -> Result<Option<(u32, u32, u32)>, String> {
    // SAFETY: a valid map and key.
    let n = unsafe { vs!(api, mapNumElements)(map, c"tile".as_ptr()) };
    let mut err = 0;
    // SAFETY: as above.
    let overlap = unsafe { vs!(api, mapGetInt)(map, c"tile_overlap".as_ptr(), 0, &mut err) };
    let overlap = if err == peSuccess { Some(overlap) } else { None };
    if n <= 0 {
        return match overlap {
            Some(_) => Err("Model: tile_overlap without tile".into()),
            None => Ok(None),
        };
    }
    let get = |i| {
        let mut err = 0;
        // SAFETY: as above, index below the count.
        let v = unsafe { vs!(api, mapGetInt)(map, c"tile".as_ptr(), i, &mut err) };
        u32::try_from(v).ok().filter(|v| *v > 0).ok_or(format!("Model: a tile's size is a positive number, not {v}"))
    };
    let (w, h) = match n {
        1 => (get(0)?, get(0)?),
        2 => (get(0)?, get(1)?),
        _ => return Err("Model: tile is one number (square tiles) or [width, height]".into()),
    };
    let overlap = u32::try_from(overlap.unwrap_or(24))
        .map_err(|_| "Model: tile_overlap is a number of pixels, at least 0".to_string())?;
    if 2 * overlap >= w.min(h) {
        return Err(format!("Model: a {w}x{h} tile leaves nothing inside an overlap of {overlap} on each side"));
    }
    Ok(Some((w, h, overlap)))
}

/// A NUL-terminated message in a buffer, as text.
pub(crate) fn c_text(buffer: &[c_char]) -> String {
    let bytes: Vec<u8> = buffer.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_agree() {
        assert_eq!(PLUGIN_ID_C.to_str(), Ok(PLUGIN_ID));
        assert_eq!(PLUGIN_NAMESPACE_C.to_str(), Ok(PLUGIN_NAMESPACE));
    }

    #[test]
    fn c_text_stops_at_the_nul() {
        let mut b = [0 as c_char; 8];
        for (d, s) in b.iter_mut().zip(b"abc\0def") {
            *d = *s as c_char;
        }
        assert_eq!(c_text(&b), "abc");
    }
}
