//! A small VapourSynth host, for the tests: loads `libvapoursynth.so.4` (no Python), makes a
//! core, loads plugins, invokes filters, gets frames and reads their planes.
//!
//! Every object frees what it holds when dropped, and borrows what it came from, so a frame
//! cannot outlive its core nor a core the library. Errors are VapourSynth's messages.
//!
//! The core loads `libvulkan.so.1` and its driver when a GPU filter first needs them: a process
//! that runs GPU filters must start with the right `LD_LIBRARY_PATH` and `VK_DRIVER_FILES`
//! (see `ci-env.sh`).

use std::ffi::{CStr, CString, c_char, c_int};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;

use crate::ffi::*;

/// The environment variable naming `libvapoursynth.so.4` (`ci-env.sh` sets it).
pub const LIB_VAR: &str = "NF_VAPOURSYNTH_LIB";

/// A table entry, or an error naming it.
macro_rules! entry {
    ($table:expr, $f:ident) => {
        $table.$f.ok_or(concat!("VapourSynth's function table has no ", stringify!($f)))?
    };
}

/// The VapourSynth library, loaded, and its API table.
pub struct Host {
    api: *const VSAPI,
    _library: libloading::Library,
}

impl Host {
    /// Loads the library at `path` and asks it for API 4.3 (R81).
    pub fn load(path: impl AsRef<Path>) -> Result<Host, String> {
        let path = path.as_ref();
        // SAFETY: loading VapourSynth runs its initialisers, which have no preconditions.
        let library = unsafe { libloading::Library::new(path) }.map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: the header's type of `getVapourSynthAPI`.
        let get: libloading::Symbol<unsafe extern "system" fn(c_int) -> *const VSAPI> =
            unsafe { library.get(b"getVapourSynthAPI\0") }.map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: the library's entry point; it returns null for an API it does not have.
        let api = unsafe { get(VAPOURSYNTH_API_VERSION) };
        if api.is_null() {
            return Err(format!(
                "{} has no VapourSynth API {}.{} (R81 or newer is needed)",
                path.display(),
                VAPOURSYNTH_API_MAJOR,
                VAPOURSYNTH_API_MINOR
            ));
        }
        Ok(Host { api, _library: library })
    }

    /// Loads the library `NF_VAPOURSYNTH_LIB` names; `None` when it is not set.
    pub fn from_env() -> Option<Result<Host, String>> {
        std::env::var_os(LIB_VAR).map(Host::load)
    }

    /// The API table.
    pub fn api(&self) -> &VSAPI {
        // SAFETY: the library's static table, valid while the library is loaded (self).
        unsafe { &*self.api }
    }

    /// The GPU API table (`getVulkanAPI`).
    pub fn vulkan_api(&self) -> Result<&VSVULKANAPI, String> {
        let get = entry!(self.api(), getVulkanAPI);
        // SAFETY: no arguments; the table is static in the library.
        unsafe { get().as_ref() }.ok_or_else(|| "getVulkanAPI returned null".to_string())
    }

    /// The library's API version (`make_version(4, 3)` for R81).
    pub fn api_version(&self) -> Result<c_int, String> {
        // SAFETY: no arguments.
        Ok(unsafe { entry!(self.api(), getAPIVersion)() })
    }

    /// A new core (`createCore`); `flags` are `VSCoreCreationFlags`.
    pub fn create_core(&self, flags: c_int) -> Result<Core<'_>, String> {
        // SAFETY: plain flags.
        let core = unsafe { entry!(self.api(), createCore)(flags) };
        if core.is_null() {
            return Err("createCore failed".into());
        }
        Ok(Core { host: self, core })
    }
}

/// The core's version, as `getCoreInfo2` gives it.
#[derive(Clone, Debug)]
pub struct CoreInfo {
    /// The version text.
    pub version_string: String,
    /// The release number (81 for R81).
    pub core_version: c_int,
    /// The API version.
    pub api_version: c_int,
}

/// A VapourSynth core, freed when dropped (after every node and frame borrowing it).
pub struct Core<'h> {
    host: &'h Host,
    core: *mut VSCore,
}

/// An argument of [`Core::invoke`].
pub enum Arg<'a> {
    /// One integer.
    Int(i64),
    /// Integers.
    Ints(&'a [i64]),
    /// One float.
    Float(f64),
    /// Floats.
    Floats(&'a [f64]),
    /// A string (`data`, UTF-8).
    Str(&'a str),
    /// Strings.
    Strs(&'a [&'a str]),
    /// Clips.
    Nodes(&'a [&'a Node<'a>]),
}

impl<'h> Core<'h> {
    /// The raw core.
    pub fn as_ptr(&self) -> *mut VSCore {
        self.core
    }

    /// The host it belongs to.
    pub fn host(&self) -> &'h Host {
        self.host
    }

    fn api(&self) -> &'h VSAPI {
        self.host.api()
    }

    /// The core's version.
    pub fn info(&self) -> Result<CoreInfo, String> {
        let mut info = std::mem::MaybeUninit::<VSCoreInfo2>::zeroed();
        // SAFETY: getCoreInfo2 fills the struct; the version text is static in the library.
        let info = unsafe {
            entry!(self.api(), getCoreInfo2)(self.core, info.as_mut_ptr());
            info.assume_init()
        };
        Ok(CoreInfo {
            // SAFETY: a NUL-terminated static string.
            version_string: unsafe { text(info.versionString) },
            core_version: info.coreVersion,
            api_version: info.apiVersion,
        })
    }

    /// The core's Vulkan device (`getVulkanCoreInfo`; brings the device up).
    pub fn vulkan_info(&self) -> Result<VSVulkanCoreInfo, String> {
        let vk = self.host.vulkan_api()?;
        let mut info = VSVulkanCoreInfo::default();
        let mut error = [0 as c_char; 1024];
        // SAFETY: our struct and buffer, its size given.
        let status = unsafe { entry!(vk, getVulkanCoreInfo)(self.core, &mut info, error.as_mut_ptr(), 1024) };
        if status != 0 {
            return Err(format!("getVulkanCoreInfo: {}", buffer_text(&error)));
        }
        Ok(info)
    }

    /// Invokes `namespace.name` with `args`; the returned map, or its error.
    pub fn invoke(&self, namespace: &str, name: &str, args: &[(&str, Arg<'_>)]) -> Result<Map<'_>, String> {
        let api = self.api();
        let ns = cstring(namespace)?;
        // SAFETY: a NUL-terminated namespace and our core.
        let plugin = unsafe { entry!(api, getPluginByNamespace)(ns.as_ptr(), self.core) };
        if plugin.is_null() {
            return Err(format!("no plugin with the namespace {namespace}"));
        }
        let input = Map::new(self)?;
        for (key, value) in args {
            input.set(key, value)?;
        }
        let function = cstring(name)?;
        // SAFETY: a plugin of this core, a NUL-terminated name and a map we own; the result is ours.
        let out = unsafe { entry!(api, invoke)(plugin, function.as_ptr(), input.map) };
        if out.is_null() {
            return Err(format!("{namespace}.{name}: invoke returned null"));
        }
        let out = Map { core: self, map: out };
        match out.error() {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Invokes a filter and returns its `clip`.
    pub fn clip(&self, namespace: &str, name: &str, args: &[(&str, Arg<'_>)]) -> Result<Node<'_>, String> {
        self.invoke(namespace, name, args)?.node("clip")
    }

    /// Loads the plugin library at `path` (`std.LoadPlugin`).
    pub fn load_plugin(&self, path: &Path) -> Result<(), String> {
        let path = path.to_str().ok_or_else(|| format!("{} is not UTF-8", path.display()))?;
        self.invoke("std", "LoadPlugin", &[("path", Arg::Str(path))]).map(drop)
    }

    /// A preset format's description (`getVideoFormatByID`).
    pub fn video_format(&self, id: u32) -> Result<VSVideoFormat, String> {
        let mut format = VSVideoFormat::default();
        // SAFETY: our struct and core.
        if unsafe { entry!(self.api(), getVideoFormatByID)(&mut format, id, self.core) } == 0 {
            return Err(format!("no video format {id:#x}"));
        }
        Ok(format)
    }

    /// A new GPU frame (`newGPUVideoFrame`), not written yet: only this host holds it, so its
    /// planes can be exported for a foreign API to write.
    pub fn new_gpu_frame(&self, format: u32, width: c_int, height: c_int) -> Result<Frame<'_>, String> {
        let format = self.video_format(format)?;
        let vk = self.host.vulkan_api()?;
        // SAFETY: a format from the core, a plain size, no property source.
        let frame = unsafe { entry!(vk, newGPUVideoFrame)(&format, width, height, std::ptr::null(), self.core) };
        if frame.is_null() {
            return Err("newGPUVideoFrame failed (no Vulkan device?)".into());
        }
        Ok(Frame { core: self, frame })
    }
}

impl Drop for Core<'_> {
    fn drop(&mut self) {
        if let Some(free) = self.api().freeCore {
            // SAFETY: every node, frame and map borrowing the core is gone (lifetimes).
            unsafe { free(self.core) };
        }
    }
}

/// A `VSMap`, freed when dropped.
pub struct Map<'c> {
    core: &'c Core<'c>,
    map: *mut VSMap,
}

impl<'c> Map<'c> {
    /// An empty map.
    pub fn new(core: &'c Core<'c>) -> Result<Map<'c>, String> {
        // SAFETY: no arguments.
        let map = unsafe { entry!(core.api(), createMap)() };
        if map.is_null() {
            return Err("createMap failed".into());
        }
        Ok(Map { core, map })
    }

    /// The map's error (`mapGetError`), if it has one.
    pub fn error(&self) -> Option<String> {
        let get = self.core.api().mapGetError?;
        // SAFETY: our map; the message lives as long as it.
        let e = unsafe { get(self.map) };
        // SAFETY: NUL-terminated when not null.
        (!e.is_null()).then(|| unsafe { text(e) })
    }

    /// Sets `key` to `value` (replacing it).
    pub fn set(&self, key: &str, value: &Arg<'_>) -> Result<(), String> {
        let api = self.core.api();
        let k = cstring(key)?;
        let k = k.as_ptr();
        // SAFETY: our map, a NUL-terminated key, values that VapourSynth copies (nodes: it takes
        // its own reference).
        let failed = unsafe {
            match value {
                Arg::Int(v) => entry!(api, mapSetInt)(self.map, k, *v, maReplace) != 0,
                Arg::Ints(v) => entry!(api, mapSetIntArray)(self.map, k, v.as_ptr(), len(v.len())?) != 0,
                Arg::Float(v) => entry!(api, mapSetFloat)(self.map, k, *v, maReplace) != 0,
                Arg::Floats(v) => entry!(api, mapSetFloatArray)(self.map, k, v.as_ptr(), len(v.len())?) != 0,
                Arg::Str(s) => {
                    entry!(api, mapSetData)(self.map, k, s.as_ptr().cast(), len(s.len())?, dtUtf8, maReplace) != 0
                }
                Arg::Strs(strs) => {
                    let mut failed = false;
                    for (i, s) in strs.iter().enumerate() {
                        let mode = if i == 0 { maReplace } else { maAppend };
                        failed |=
                            entry!(api, mapSetData)(self.map, k, s.as_ptr().cast(), len(s.len())?, dtUtf8, mode) != 0;
                    }
                    failed
                }
                Arg::Nodes(nodes) => {
                    let mut failed = nodes.is_empty() && entry!(api, mapSetEmpty)(self.map, k, ptVideoNode) != 0;
                    for (i, n) in nodes.iter().enumerate() {
                        let mode = if i == 0 { maReplace } else { maAppend };
                        failed |= entry!(api, mapSetNode)(self.map, k, n.node, mode) != 0;
                    }
                    failed
                }
            }
        };
        if failed {
            return Err(format!("could not set {key} in a map"));
        }
        Ok(())
    }

    /// The clip at `key` (a new reference).
    pub fn node(&self, key: &str) -> Result<Node<'c>, String> {
        let k = cstring(key)?;
        let mut err = 0;
        // SAFETY: our map and a NUL-terminated key; the node reference is ours.
        let node = unsafe { entry!(self.core.api(), mapGetNode)(self.map, k.as_ptr(), 0, &mut err) };
        if node.is_null() {
            return Err(format!("no clip at {key} (error {err})"));
        }
        Ok(Node { core: self.core, node })
    }
}

impl Drop for Map<'_> {
    fn drop(&mut self) {
        if let Some(free) = self.core.api().freeMap {
            // SAFETY: our map, freed once.
            unsafe { free(self.map) };
        }
    }
}

/// A clip (`VSNode` reference), freed when dropped.
pub struct Node<'c> {
    core: &'c Core<'c>,
    node: *mut VSNode,
}

impl<'c> Node<'c> {
    /// The raw node.
    pub fn as_ptr(&self) -> *mut VSNode {
        self.node
    }

    /// Format, size, rate and length.
    pub fn video_info(&self) -> Result<VSVideoInfo, String> {
        // SAFETY: our node; the info lives as long as it.
        let vi = unsafe { entry!(self.core.api(), getVideoInfo)(self.node) };
        // SAFETY: a valid pointer for a video node.
        unsafe { vi.as_ref() }.copied().ok_or_else(|| "not a video node".into())
    }

    /// `nrCPU` or `nrGPU`.
    pub fn residency(&self) -> Result<c_int, String> {
        // SAFETY: our node.
        Ok(unsafe { entry!(self.core.api(), getNodeResidency)(self.node) })
    }

    /// Frame `n` (`getFrame`), or the error that stopped it.
    pub fn frame(&self, n: c_int) -> Result<Frame<'c>, String> {
        let mut error = [0 as c_char; 1024];
        // SAFETY: our node and buffer, its size given.
        let frame = unsafe { entry!(self.core.api(), getFrame)(n, self.node, error.as_mut_ptr(), 1024) };
        if frame.is_null() {
            return Err(buffer_text(&error));
        }
        Ok(Frame { core: self.core, frame: frame.cast_mut() })
    }

    /// Frames `ns`, all requested at once (`getFrameAsync`, as vspipe does) so that the
    /// core's threads run them side by side; each frame, or the error that stopped it, in
    /// the order of `ns`.
    pub fn frames(&self, ns: &[c_int]) -> Result<Vec<Result<Frame<'c>, String>>, String> {
        let get = entry!(self.core.api(), getFrameAsync);
        let done = AsyncFrames { results: std::sync::Mutex::new(vec![None; ns.len()]), ready: Default::default() };
        for (i, &n) in ns.iter().enumerate() {
            let request = Box::into_raw(Box::new((&done as *const AsyncFrames, i)));
            // SAFETY: our node; `done` outlives every callback (waited for below).
            unsafe { get(n, self.node, Some(frame_done), request.cast()) };
        }
        let mut results = done.results.lock().unwrap_or_else(|p| p.into_inner());
        while results.iter().any(Option::is_none) {
            results = done.ready.wait(results).unwrap_or_else(|p| p.into_inner());
        }
        let core = self.core;
        Ok(results
            .drain(..)
            .map(|r| match r {
                Some(Ok(frame)) => Ok(Frame { core, frame: frame as *mut VSFrame }),
                Some(Err(e)) => Err(e),
                None => Err("no frame".into()),
            })
            .collect())
    }

    /// `getNodeFilterMode`: `fmParallel`, `fmParallelRequests`, …
    pub fn filter_mode(&self) -> Result<c_int, String> {
        // SAFETY: our node.
        Ok(unsafe { entry!(self.core.api(), getNodeFilterMode)(self.node) })
    }
}

/// [`Node::frames`]' requests' results: a frame's address, or an error.
struct AsyncFrames {
    results: std::sync::Mutex<Vec<Option<Result<usize, String>>>>,
    ready: std::sync::Condvar,
}

/// `getFrameAsync`'s callback: the frame (a reference the host now holds) or the error, into
/// its slot.
unsafe extern "system" fn frame_done(
    user_data: *mut std::ffi::c_void,
    f: *const VSFrame,
    _n: c_int,
    _node: *mut VSNode,
    error_msg: *const c_char,
) {
    // SAFETY: the box `frames` made for this request, taken once.
    let request = unsafe { Box::from_raw(user_data.cast::<(*const AsyncFrames, usize)>()) };
    // SAFETY: `frames` waits for every callback before `done` goes.
    let done = unsafe { &*request.0 };
    let result = if f.is_null() {
        Err(if error_msg.is_null() {
            "no frame".into()
        } else {
            // SAFETY: VapourSynth's message, valid for the call.
            unsafe { CStr::from_ptr(error_msg) }.to_string_lossy().into_owned()
        })
    } else {
        Ok(f as usize)
    };
    let mut results = done.results.lock().unwrap_or_else(|p| p.into_inner());
    results[request.1] = Some(result);
    done.ready.notify_all();
}

impl Drop for Node<'_> {
    fn drop(&mut self) {
        if let Some(free) = self.core.api().freeNode {
            // SAFETY: our reference, freed once.
            unsafe { free(self.node) };
        }
    }
}

/// A frame reference, freed when dropped.
pub struct Frame<'c> {
    core: &'c Core<'c>,
    frame: *mut VSFrame,
}

/// A GPU plane's memory exported by `exportGPUPlane`: the fd is closed when this is dropped.
#[derive(Debug)]
pub struct ExportedPlane {
    /// The export's description (its `handle` is `fd`'s number).
    pub memory: VSVulkanExportedMemory,
    /// The exported memory.
    pub fd: OwnedFd,
}

impl<'c> Frame<'c> {
    /// The raw frame.
    pub fn as_ptr(&self) -> *const VSFrame {
        self.frame
    }

    /// The frame's format.
    pub fn format(&self) -> Result<VSVideoFormat, String> {
        // SAFETY: our frame; the format lives as long as it.
        let f = unsafe { entry!(self.core.api(), getVideoFrameFormat)(self.frame) };
        // SAFETY: valid for a video frame.
        unsafe { f.as_ref() }.copied().ok_or_else(|| "not a video frame".into())
    }

    /// `nrCPU` or `nrGPU`.
    pub fn residency(&self) -> Result<c_int, String> {
        // SAFETY: our frame.
        Ok(unsafe { entry!(self.core.api(), getFrameResidency)(self.frame) })
    }

    /// A plane's width, height and stride in bytes.
    pub fn plane_size(&self, plane: c_int) -> Result<(usize, usize, usize), String> {
        let api = self.core.api();
        // SAFETY: our frame; out-of-range planes give 0.
        let (w, h, s) = unsafe {
            (
                entry!(api, getFrameWidth)(self.frame, plane),
                entry!(api, getFrameHeight)(self.frame, plane),
                entry!(api, getStride)(self.frame, plane),
            )
        };
        if w <= 0 || h <= 0 {
            return Err(format!("the frame has no plane {plane}"));
        }
        Ok((w as usize, h as usize, s.max(0) as usize))
    }

    /// A CPU plane's pixels, row after row without padding (bytes per sample as stored).
    pub fn plane_bytes(&self, plane: c_int) -> Result<Vec<u8>, String> {
        let (w, h, stride) = self.plane_size(plane)?;
        let row = w * self.format()?.bytesPerSample as usize;
        // SAFETY: our frame; null for GPU frames.
        let p = unsafe { entry!(self.core.api(), getReadPtr)(self.frame, plane) };
        if p.is_null() {
            return Err(format!("plane {plane} is not in CPU memory (a GPU frame?)"));
        }
        let mut out = Vec::with_capacity(row * h);
        for y in 0..h {
            // SAFETY: `h` rows of `stride` bytes, each with `row` bytes of pixels, owned by the frame.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(p.add(y * stride), row) });
        }
        Ok(out)
    }

    /// A CPU plane of 32-bit floats.
    pub fn plane_f32(&self, plane: c_int) -> Result<Vec<f32>, String> {
        let f = self.format()?;
        if f.sampleType != stFloat || f.bytesPerSample != 4 {
            return Err("not a 32-bit float frame".into());
        }
        let bytes = self.plane_bytes(plane)?;
        Ok(bytes.chunks_exact(4).map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect())
    }

    /// A GPU plane's buffer (`getGPUPlane`).
    pub fn gpu_plane(&self, plane: c_int) -> Result<VSVulkanPlaneInfo, String> {
        let vk = self.core.host.vulkan_api()?;
        let mut info = VSVulkanPlaneInfo::default();
        // SAFETY: our frame and struct.
        if unsafe { entry!(vk, getGPUPlane)(self.frame, plane, &mut info) } != 0 {
            return Err(format!("plane {plane} is not a GPU plane"));
        }
        Ok(info)
    }

    /// Exports a GPU plane's memory (`exportGPUPlane`).
    pub fn export_plane(&self, plane: c_int) -> Result<ExportedPlane, String> {
        let vk = self.core.host.vulkan_api()?;
        let mut memory = VSVulkanExportedMemory::default();
        let mut error = [0 as c_char; 1024];
        // SAFETY: our frame, struct and buffer, its size given.
        let status = unsafe { entry!(vk, exportGPUPlane)(self.frame, plane, &mut memory, error.as_mut_ptr(), 1024) };
        if status != 0 {
            return Err(format!("exportGPUPlane: {}", buffer_text(&error)));
        }
        let fd = c_int::try_from(memory.handle).map_err(|_| format!("exportGPUPlane gave handle {}", memory.handle))?;
        // SAFETY: a new fd that belongs to the caller (VSVulkanExportedMemory's rules).
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(ExportedPlane { memory, fd })
    }
}

impl Drop for Frame<'_> {
    fn drop(&mut self) {
        if let Some(free) = self.core.api().freeFrame {
            // SAFETY: our reference, freed once.
            unsafe { free(self.frame) };
        }
    }
}

/// A `usize` as the API's `int` size.
fn len(n: usize) -> Result<c_int, String> {
    c_int::try_from(n).map_err(|_| format!("{n} elements are too many for VapourSynth"))
}

fn cstring(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("{s:?} has a NUL"))
}

/// A NUL-terminated C string as text.
///
/// # Safety
///
/// `p` is null or NUL-terminated.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: NUL-terminated (caller).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A NUL-terminated message in a buffer, as text.
pub fn buffer_text(buffer: &[c_char]) -> String {
    let bytes: Vec<u8> = buffer.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
