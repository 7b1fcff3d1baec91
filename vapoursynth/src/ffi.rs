//! VapourSynth's C API 4 as of R81 (`VapourSynth4.h` with `VS_USE_LATEST_API`: API 4.3) and
//! its GPU side (`VSVulkan4.h`), declared by hand for a host and for a filter.
//!
//! The function tables ([`VSAPI`], [`VSVULKANAPI`], [`VSPLUGINAPI`]) list every entry of the
//! header in its order, so that the offsets match; the tests at the end check the offset of
//! every field and the size of every struct against the numbers `tools/abi.c` prints when
//! compiled against R81's headers (`tools/abi.txt`). Field names are the header's. A table
//! entry is an `Option` so that a null entry is an error rather than undefined behaviour.
//!
//! `VSVulkan4.h` has no version of its own and is rebuilt in lockstep with the core API: a
//! plugin built against another header still loads and calls the neighbouring function. So the
//! plugin refuses cores older than R81 (see `plugin.rs`), and a newer header means re-running
//! `tools/abi.c`.
//!
//! `VS_CC` is `__stdcall` on 32-bit Windows and the C convention elsewhere, which is what
//! `extern "system"` means. Vulkan handles and flags are [`ash::vk`]'s types (the same layout
//! as the C ones).
#![allow(non_snake_case, non_camel_case_types, non_upper_case_globals)]

use std::ffi::{c_char, c_int, c_void};

use ash::vk;

/// `VS_MAKE_VERSION`: a version number as VapourSynth packs it (`major << 16 | minor`).
pub const fn make_version(major: c_int, minor: c_int) -> c_int {
    (major << 16) | minor
}

/// `VAPOURSYNTH_API_MAJOR`.
pub const VAPOURSYNTH_API_MAJOR: c_int = 4;
/// `VAPOURSYNTH_API_MINOR` with `VS_USE_LATEST_API` in R81's header.
pub const VAPOURSYNTH_API_MINOR: c_int = 3;
/// `VAPOURSYNTH_API_VERSION`: 4.3, the API these declarations describe (`getVulkanAPI` and
/// `createVideoFilterEx` are 4.3's).
pub const VAPOURSYNTH_API_VERSION: c_int = make_version(VAPOURSYNTH_API_MAJOR, VAPOURSYNTH_API_MINOR);
/// The first core release with GPU frames (`VSVulkan4.h`): R81.
pub const VAPOURSYNTH_CORE_R81: c_int = 81;

macro_rules! opaque {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
            _not_send_sync: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
        }
    )*};
}

opaque! {
    /// A frame (`VSFrame`), video or audio, on the CPU or the GPU.
    VSFrame;
    /// A node (`VSNode`): a clip, the output of a filter.
    VSNode;
    /// A core (`VSCore`).
    VSCore;
    /// A loaded plugin (`VSPlugin`).
    VSPlugin;
    /// A function a plugin registered (`VSPluginFunction`).
    VSPluginFunction;
    /// A callable function object (`VSFunction`).
    VSFunction;
    /// A map of keys to arrays of values (`VSMap`): arguments, return values, frame properties.
    VSMap;
    /// A log handler's registration (`VSLogHandle`).
    VSLogHandle;
    /// A frame request in progress, inside a filter's `getFrame` (`VSFrameContext`).
    VSFrameContext;
    /// A counted timeline semaphore owned by the core (`VSGPUTimeline`).
    VSGPUTimeline;
    /// A scratch buffer from the core's VRAM pool (`VSGPUBuffer`).
    VSGPUBuffer;
    /// A bare region of the core's VRAM pool (`VSGPUMemory`).
    VSGPUMemory;
    /// A declaration of GPU memory allocated outside the core (`VSGPUMemoryReservation`).
    VSGPUMemoryReservation;
    /// An exec pool: a timeline, a command pool and its command buffers (`VSGPUExecPool`).
    VSGPUExecPool;
    /// One recording slot of an exec pool (`VSGPUExecContext`).
    VSGPUExecContext;
    /// A compiled compute shader's SPIR-V (`VSGPUShader`).
    VSGPUShader;
    /// The core's Vulkan dispatch table (`VSVulkanFunctions`, from `getVulkanFunctions`). Left
    /// opaque here: a Rust filter loads its own table through `ash` from
    /// [`VSVulkanCoreHandles::getInstanceProcAddr`], as the header allows.
    VSVulkanFunctions;
}

// VSColorFamily
/// `VSColorFamily::cfUndefined`.
pub const cfUndefined: c_int = 0;
/// `VSColorFamily::cfGray`.
pub const cfGray: c_int = 1;
/// `VSColorFamily::cfRGB`.
pub const cfRGB: c_int = 2;
/// `VSColorFamily::cfYUV`.
pub const cfYUV: c_int = 3;

// VSSampleType
/// `VSSampleType::stInteger`.
pub const stInteger: c_int = 0;
/// `VSSampleType::stFloat`.
pub const stFloat: c_int = 1;

/// `VS_MAKE_VIDEO_ID`: a preset format's id.
pub const fn make_video_id(color_family: c_int, sample_type: c_int, bits: c_int, ssw: c_int, ssh: c_int) -> u32 {
    ((color_family << 28) | (sample_type << 24) | (bits << 16) | (ssw << 8) | ssh) as u32
}

// VSPresetVideoFormat (the ones the plugin and its tests name; any other id is
// `make_video_id` of its parameters, or `queryVideoFormatID`).
/// `pfNone`.
pub const pfNone: u32 = 0;
/// `pfGray8`.
pub const pfGray8: u32 = make_video_id(cfGray, stInteger, 8, 0, 0);
/// `pfGrayS`.
pub const pfGrayS: u32 = make_video_id(cfGray, stFloat, 32, 0, 0);
/// `pfYUV420P8`.
pub const pfYUV420P8: u32 = make_video_id(cfYUV, stInteger, 8, 1, 1);
/// `pfYUV444P8`.
pub const pfYUV444P8: u32 = make_video_id(cfYUV, stInteger, 8, 0, 0);
/// `pfYUV444PS`.
pub const pfYUV444PS: u32 = make_video_id(cfYUV, stFloat, 32, 0, 0);
/// `pfRGB24`: 8-bit planar RGB.
pub const pfRGB24: u32 = make_video_id(cfRGB, stInteger, 8, 0, 0);
/// `pfRGB30`.
pub const pfRGB30: u32 = make_video_id(cfRGB, stInteger, 10, 0, 0);
/// `pfRGB48`.
pub const pfRGB48: u32 = make_video_id(cfRGB, stInteger, 16, 0, 0);
/// `pfRGBH`: half-float planar RGB.
pub const pfRGBH: u32 = make_video_id(cfRGB, stFloat, 16, 0, 0);
/// `pfRGBS`: float planar RGB.
pub const pfRGBS: u32 = make_video_id(cfRGB, stFloat, 32, 0, 0);

// VSFilterMode
/// `fmParallel`: completely parallel execution.
pub const fmParallel: c_int = 0;
/// `fmParallelRequests`: single-threaded `getFrame`, requests in parallel.
pub const fmParallelRequests: c_int = 1;
/// `fmUnordered`.
pub const fmUnordered: c_int = 2;
/// `fmFrameState`.
pub const fmFrameState: c_int = 3;

// VSFilterFlags
/// `ffGPUOutput`: the filter returns GPU resident frames (`createVideoFilterEx`).
pub const ffGPUOutput: c_int = 1;

// VSNodeResidency
/// `nrCPU`.
pub const nrCPU: c_int = 0;
/// `nrGPU`.
pub const nrGPU: c_int = 1;

// VSMediaType
/// `mtVideo`.
pub const mtVideo: c_int = 1;
/// `mtAudio`.
pub const mtAudio: c_int = 2;

// VSPropertyType
/// `ptUnset`.
pub const ptUnset: c_int = 0;
/// `ptInt`.
pub const ptInt: c_int = 1;
/// `ptFloat`.
pub const ptFloat: c_int = 2;
/// `ptData`.
pub const ptData: c_int = 3;
/// `ptFunction`.
pub const ptFunction: c_int = 4;
/// `ptVideoNode`.
pub const ptVideoNode: c_int = 5;
/// `ptAudioNode`.
pub const ptAudioNode: c_int = 6;
/// `ptVideoFrame`.
pub const ptVideoFrame: c_int = 7;
/// `ptAudioFrame`.
pub const ptAudioFrame: c_int = 8;

// VSMapPropertyError
/// `peSuccess`.
pub const peSuccess: c_int = 0;
/// `peUnset`: no such key.
pub const peUnset: c_int = 1;
/// `peType`: the key holds another type.
pub const peType: c_int = 2;
/// `peError`: the map has its error set.
pub const peError: c_int = 3;
/// `peIndex`: index out of bounds.
pub const peIndex: c_int = 4;

// VSMapAppendMode
/// `maReplace`.
pub const maReplace: c_int = 0;
/// `maAppend`.
pub const maAppend: c_int = 1;

// VSActivationReason
/// `arInitial`: request the frames the output frame needs.
pub const arInitial: c_int = 0;
/// `arAllFramesReady`: they are all there.
pub const arAllFramesReady: c_int = 1;
/// `arError`: a request failed.
pub const arError: c_int = -1;

// VSMessageType
/// `mtDebug`.
pub const mtDebug: c_int = 0;
/// `mtInformation`.
pub const mtInformation: c_int = 1;
/// `mtWarning`.
pub const mtWarning: c_int = 2;
/// `mtCritical`.
pub const mtCritical: c_int = 3;
/// `mtFatal`: also ends the process.
pub const mtFatal: c_int = 4;

// VSCoreCreationFlags
/// `ccfEnableGraphInspection`.
pub const ccfEnableGraphInspection: c_int = 1;
/// `ccfDisableAutoLoading`: load no plugins but the core's own.
pub const ccfDisableAutoLoading: c_int = 2;
/// `ccfDisableLibraryUnloading`.
pub const ccfDisableLibraryUnloading: c_int = 4;
/// `ccfEnableFrameRefDebug`.
pub const ccfEnableFrameRefDebug: c_int = 8;

// VSPluginConfigFlags
/// `pcModifiable`.
pub const pcModifiable: c_int = 1;

// VSDataTypeHint
/// `dtUnknown`.
pub const dtUnknown: c_int = -1;
/// `dtBinary`.
pub const dtBinary: c_int = 0;
/// `dtUtf8`.
pub const dtUtf8: c_int = 1;

// VSRequestPattern
/// `rpGeneral`.
pub const rpGeneral: c_int = 0;
/// `rpNoFrameReuse`.
pub const rpNoFrameReuse: c_int = 1;
/// `rpStrictSpatial`: frame n of the output needs frame n of the input only.
pub const rpStrictSpatial: c_int = 2;
/// `rpFrameReuseLastOnly` (API 4.1).
pub const rpFrameReuseLastOnly: c_int = 3;

// VSCacheMode
/// `cmAuto`.
pub const cmAuto: c_int = -1;
/// `cmForceDisable`.
pub const cmForceDisable: c_int = 0;
/// `cmForceEnable`.
pub const cmForceEnable: c_int = 1;

// VSVulkanQueueType
/// `vqCompute`: the compute queue (takes anything).
pub const vqCompute: c_int = 0;
/// `vqTransfer`: the transfer queue (copies only).
pub const vqTransfer: c_int = 1;

// VSGPUDrainResult
/// `gdDrained`: the wait established completion.
pub const gdDrained: c_int = 0;
/// `gdIncomplete`: submissions may still be running.
pub const gdIncomplete: c_int = 1;
/// `gdDeviceLost`: the device was reset or lost.
pub const gdDeviceLost: c_int = 2;

// VSGPUShaderLanguage
/// `slGLSL`: compute-stage GLSL `#version 460`.
pub const slGLSL: c_int = 0;

/// `VSVideoFormat`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VSVideoFormat {
    /// `VSColorFamily`.
    pub colorFamily: c_int,
    /// `VSSampleType`.
    pub sampleType: c_int,
    /// Significant bits.
    pub bitsPerSample: c_int,
    /// Storage bytes per sample (a power of 2).
    pub bytesPerSample: c_int,
    /// log2 horizontal subsampling of planes 1 and 2.
    pub subSamplingW: c_int,
    /// log2 vertical subsampling of planes 1 and 2.
    pub subSamplingH: c_int,
    /// Number of planes.
    pub numPlanes: c_int,
}

/// `VSAudioFormat`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VSAudioFormat {
    /// `VSSampleType`.
    pub sampleType: c_int,
    /// Significant bits.
    pub bitsPerSample: c_int,
    /// Storage bytes per sample.
    pub bytesPerSample: c_int,
    /// Channels (from the layout).
    pub numChannels: c_int,
    /// Bit set of `VSAudioChannels`.
    pub channelLayout: u64,
}

/// `VSCoreInfo`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct VSCoreInfo {
    /// The version text.
    pub versionString: *const c_char,
    /// The core's release number (81 for R81).
    pub core: c_int,
    /// The API version (`make_version`).
    pub api: c_int,
    /// Worker threads.
    pub numThreads: c_int,
    /// The frame cache's size limit.
    pub maxFramebufferSize: i64,
    /// The frame cache's use.
    pub usedFramebufferSize: i64,
}

/// `VSCoreInfo2` (API 4.2).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct VSCoreInfo2 {
    /// The version text.
    pub versionString: *const c_char,
    /// The core's release number (81 for R81).
    pub coreVersion: c_int,
    /// The API version (`make_version`).
    pub apiVersion: c_int,
    /// The `VSCoreCreationFlags` the core was made with.
    pub creationFlags: c_int,
    /// Worker threads.
    pub numThreads: c_int,
    /// The frame cache's size limit.
    pub maxFramebufferSize: i64,
    /// The frame cache's use.
    pub usedFramebufferSize: i64,
}

/// `VSVideoInfo`: a video clip's format, frame rate, size and length. A zero format id
/// (`colorFamily` `cfUndefined`) or a zero size means it varies from frame to frame.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VSVideoInfo {
    /// The format (`cfUndefined` when variable).
    pub format: VSVideoFormat,
    /// Frame rate numerator.
    pub fpsNum: i64,
    /// Frame rate denominator.
    pub fpsDen: i64,
    /// Width (0 when variable).
    pub width: c_int,
    /// Height (0 when variable).
    pub height: c_int,
    /// Number of frames.
    pub numFrames: c_int,
}

/// `VSAudioInfo`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VSAudioInfo {
    /// The format.
    pub format: VSAudioFormat,
    /// Samples per second.
    pub sampleRate: c_int,
    /// Total samples.
    pub numSamples: i64,
    /// Audio frames holding them.
    pub numFrames: c_int,
}

/// `VSFilterDependency`: a node a filter requests frames from, and how.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct VSFilterDependency {
    /// The node.
    pub source: *mut VSNode,
    /// `VSRequestPattern`.
    pub requestPattern: c_int,
}

/// `VSGetVapourSynthAPI`: `getVapourSynthAPI`, the library's entry point.
pub type VSGetVapourSynthAPI = Option<unsafe extern "system" fn(version: c_int) -> *const VSAPI>;
/// `VSPublicFunction`: a registered function's body (a filter's constructor).
pub type VSPublicFunction = Option<
    unsafe extern "system" fn(
        in_: *const VSMap,
        out: *mut VSMap,
        user_data: *mut c_void,
        core: *mut VSCore,
        vsapi: *const VSAPI,
    ),
>;
/// `VSInitPlugin`: `VapourSynthPluginInit2`.
pub type VSInitPlugin = Option<unsafe extern "system" fn(plugin: *mut VSPlugin, vspapi: *const VSPLUGINAPI)>;
/// `VSFreeFunctionData`.
pub type VSFreeFunctionData = Option<unsafe extern "system" fn(user_data: *mut c_void)>;
/// `VSFilterGetFrame`: a filter's frame function.
pub type VSFilterGetFrame = Option<
    unsafe extern "system" fn(
        n: c_int,
        activation_reason: c_int,
        instance_data: *mut c_void,
        frame_data: *mut *mut c_void,
        frame_ctx: *mut VSFrameContext,
        core: *mut VSCore,
        vsapi: *const VSAPI,
    ) -> *const VSFrame,
>;
/// `VSFilterFree`: a filter's destructor.
pub type VSFilterFree =
    Option<unsafe extern "system" fn(instance_data: *mut c_void, core: *mut VSCore, vsapi: *const VSAPI)>;
/// `VSFrameDoneCallback`.
pub type VSFrameDoneCallback = Option<
    unsafe extern "system" fn(
        user_data: *mut c_void,
        f: *const VSFrame,
        n: c_int,
        node: *mut VSNode,
        error_msg: *const c_char,
    ),
>;
/// `VSLogHandler`.
pub type VSLogHandler = Option<unsafe extern "system" fn(msg_type: c_int, msg: *const c_char, user_data: *mut c_void)>;
/// `VSLogHandlerFree`.
pub type VSLogHandlerFree = Option<unsafe extern "system" fn(user_data: *mut c_void)>;
/// `VSGPUReleaseFunc`: cleanup run once an exec submission completed.
pub type VSGPUReleaseFunc = Option<unsafe extern "system" fn(object: *mut c_void)>;

/// `VSPLUGINAPI`: what `VapourSynthPluginInit2` gets.
///
/// Each field is the header's function of the same name, documented there.
#[allow(missing_docs)]
#[repr(C)]
pub struct VSPLUGINAPI {
    pub getAPIVersion: Option<unsafe extern "system" fn() -> c_int>,
    pub configPlugin: Option<
        unsafe extern "system" fn(
            identifier: *const c_char,
            plugin_namespace: *const c_char,
            name: *const c_char,
            plugin_version: c_int,
            api_version: c_int,
            flags: c_int,
            plugin: *mut VSPlugin,
        ) -> c_int,
    >,
    pub registerFunction: Option<
        unsafe extern "system" fn(
            name: *const c_char,
            args: *const c_char,
            return_type: *const c_char,
            args_func: VSPublicFunction,
            function_data: *mut c_void,
            plugin: *mut VSPlugin,
        ) -> c_int,
    >,
}

/// `VSAPI`: the core's function table, every entry of API 4.3 in the header's order.
///
/// Each field is the header's function of the same name, documented there.
#[allow(missing_docs)]
#[repr(C)]
pub struct VSAPI {
    // Filters and nodes.
    pub createVideoFilter: Option<
        unsafe extern "system" fn(
            out: *mut VSMap,
            name: *const c_char,
            vi: *const VSVideoInfo,
            get_frame: VSFilterGetFrame,
            free: VSFilterFree,
            filter_mode: c_int,
            dependencies: *const VSFilterDependency,
            num_deps: c_int,
            instance_data: *mut c_void,
            core: *mut VSCore,
        ),
    >,
    pub createVideoFilter2: Option<
        unsafe extern "system" fn(
            name: *const c_char,
            vi: *const VSVideoInfo,
            get_frame: VSFilterGetFrame,
            free: VSFilterFree,
            filter_mode: c_int,
            dependencies: *const VSFilterDependency,
            num_deps: c_int,
            instance_data: *mut c_void,
            core: *mut VSCore,
        ) -> *mut VSNode,
    >,
    pub createAudioFilter: Option<
        unsafe extern "system" fn(
            out: *mut VSMap,
            name: *const c_char,
            ai: *const VSAudioInfo,
            get_frame: VSFilterGetFrame,
            free: VSFilterFree,
            filter_mode: c_int,
            dependencies: *const VSFilterDependency,
            num_deps: c_int,
            instance_data: *mut c_void,
            core: *mut VSCore,
        ),
    >,
    pub createAudioFilter2: Option<
        unsafe extern "system" fn(
            name: *const c_char,
            ai: *const VSAudioInfo,
            get_frame: VSFilterGetFrame,
            free: VSFilterFree,
            filter_mode: c_int,
            dependencies: *const VSFilterDependency,
            num_deps: c_int,
            instance_data: *mut c_void,
            core: *mut VSCore,
        ) -> *mut VSNode,
    >,
    pub setLinearFilter: Option<unsafe extern "system" fn(node: *mut VSNode) -> c_int>,
    pub setCacheMode: Option<unsafe extern "system" fn(node: *mut VSNode, mode: c_int)>,
    pub setCacheOptions: Option<
        unsafe extern "system" fn(node: *mut VSNode, fixed_size: c_int, max_size: c_int, max_history_size: c_int),
    >,
    pub freeNode: Option<unsafe extern "system" fn(node: *mut VSNode)>,
    pub addNodeRef: Option<unsafe extern "system" fn(node: *mut VSNode) -> *mut VSNode>,
    pub getNodeType: Option<unsafe extern "system" fn(node: *mut VSNode) -> c_int>,
    pub getVideoInfo: Option<unsafe extern "system" fn(node: *mut VSNode) -> *const VSVideoInfo>,
    pub getAudioInfo: Option<unsafe extern "system" fn(node: *mut VSNode) -> *const VSAudioInfo>,
    // Frames.
    pub newVideoFrame: Option<
        unsafe extern "system" fn(
            format: *const VSVideoFormat,
            width: c_int,
            height: c_int,
            prop_src: *const VSFrame,
            core: *mut VSCore,
        ) -> *mut VSFrame,
    >,
    pub newVideoFrame2: Option<
        unsafe extern "system" fn(
            format: *const VSVideoFormat,
            width: c_int,
            height: c_int,
            plane_src: *mut *const VSFrame,
            planes: *const c_int,
            prop_src: *const VSFrame,
            core: *mut VSCore,
        ) -> *mut VSFrame,
    >,
    pub newAudioFrame: Option<
        unsafe extern "system" fn(
            format: *const VSAudioFormat,
            num_samples: c_int,
            prop_src: *const VSFrame,
            core: *mut VSCore,
        ) -> *mut VSFrame,
    >,
    pub newAudioFrame2: Option<
        unsafe extern "system" fn(
            format: *const VSAudioFormat,
            num_samples: c_int,
            channel_src: *mut *const VSFrame,
            channels: *const c_int,
            prop_src: *const VSFrame,
            core: *mut VSCore,
        ) -> *mut VSFrame,
    >,
    pub freeFrame: Option<unsafe extern "system" fn(f: *const VSFrame)>,
    pub addFrameRef: Option<unsafe extern "system" fn(f: *const VSFrame) -> *const VSFrame>,
    pub copyFrame: Option<unsafe extern "system" fn(f: *const VSFrame, core: *mut VSCore) -> *mut VSFrame>,
    pub getFramePropertiesRO: Option<unsafe extern "system" fn(f: *const VSFrame) -> *const VSMap>,
    pub getFramePropertiesRW: Option<unsafe extern "system" fn(f: *mut VSFrame) -> *mut VSMap>,
    pub getStride: Option<unsafe extern "system" fn(f: *const VSFrame, plane: c_int) -> isize>,
    pub getReadPtr: Option<unsafe extern "system" fn(f: *const VSFrame, plane: c_int) -> *const u8>,
    pub getWritePtr: Option<unsafe extern "system" fn(f: *mut VSFrame, plane: c_int) -> *mut u8>,
    pub getVideoFrameFormat: Option<unsafe extern "system" fn(f: *const VSFrame) -> *const VSVideoFormat>,
    pub getAudioFrameFormat: Option<unsafe extern "system" fn(f: *const VSFrame) -> *const VSAudioFormat>,
    pub getFrameType: Option<unsafe extern "system" fn(f: *const VSFrame) -> c_int>,
    pub getFrameWidth: Option<unsafe extern "system" fn(f: *const VSFrame, plane: c_int) -> c_int>,
    pub getFrameHeight: Option<unsafe extern "system" fn(f: *const VSFrame, plane: c_int) -> c_int>,
    pub getFrameLength: Option<unsafe extern "system" fn(f: *const VSFrame) -> c_int>,
    // Formats.
    pub getVideoFormatName:
        Option<unsafe extern "system" fn(format: *const VSVideoFormat, buffer: *mut c_char) -> c_int>,
    pub getAudioFormatName:
        Option<unsafe extern "system" fn(format: *const VSAudioFormat, buffer: *mut c_char) -> c_int>,
    pub queryVideoFormat: Option<
        unsafe extern "system" fn(
            format: *mut VSVideoFormat,
            color_family: c_int,
            sample_type: c_int,
            bits_per_sample: c_int,
            sub_sampling_w: c_int,
            sub_sampling_h: c_int,
            core: *mut VSCore,
        ) -> c_int,
    >,
    pub queryAudioFormat: Option<
        unsafe extern "system" fn(
            format: *mut VSAudioFormat,
            sample_type: c_int,
            bits_per_sample: c_int,
            channel_layout: u64,
            core: *mut VSCore,
        ) -> c_int,
    >,
    pub queryVideoFormatID: Option<
        unsafe extern "system" fn(
            color_family: c_int,
            sample_type: c_int,
            bits_per_sample: c_int,
            sub_sampling_w: c_int,
            sub_sampling_h: c_int,
            core: *mut VSCore,
        ) -> u32,
    >,
    pub getVideoFormatByID:
        Option<unsafe extern "system" fn(format: *mut VSVideoFormat, id: u32, core: *mut VSCore) -> c_int>,
    // Frame requests; `getFrame` and `getFrameAsync` are for hosts only.
    pub getFrame: Option<
        unsafe extern "system" fn(
            n: c_int,
            node: *mut VSNode,
            error_msg: *mut c_char,
            buf_size: c_int,
        ) -> *const VSFrame,
    >,
    pub getFrameAsync: Option<
        unsafe extern "system" fn(n: c_int, node: *mut VSNode, callback: VSFrameDoneCallback, user_data: *mut c_void),
    >,
    pub getFrameFilter: Option<
        unsafe extern "system" fn(n: c_int, node: *mut VSNode, frame_ctx: *mut VSFrameContext) -> *const VSFrame,
    >,
    pub requestFrameFilter:
        Option<unsafe extern "system" fn(n: c_int, node: *mut VSNode, frame_ctx: *mut VSFrameContext)>,
    pub releaseFrameEarly:
        Option<unsafe extern "system" fn(node: *mut VSNode, n: c_int, frame_ctx: *mut VSFrameContext)>,
    pub cacheFrame: Option<unsafe extern "system" fn(frame: *const VSFrame, n: c_int, frame_ctx: *mut VSFrameContext)>,
    pub setFilterError: Option<unsafe extern "system" fn(error_message: *const c_char, frame_ctx: *mut VSFrameContext)>,
    // Functions.
    pub createFunction: Option<
        unsafe extern "system" fn(
            func: VSPublicFunction,
            user_data: *mut c_void,
            free: VSFreeFunctionData,
            core: *mut VSCore,
        ) -> *mut VSFunction,
    >,
    pub freeFunction: Option<unsafe extern "system" fn(f: *mut VSFunction)>,
    pub addFunctionRef: Option<unsafe extern "system" fn(f: *mut VSFunction) -> *mut VSFunction>,
    pub callFunction: Option<unsafe extern "system" fn(func: *mut VSFunction, in_: *const VSMap, out: *mut VSMap)>,
    // Maps (argument lists, return values and frame properties).
    pub createMap: Option<unsafe extern "system" fn() -> *mut VSMap>,
    pub freeMap: Option<unsafe extern "system" fn(map: *mut VSMap)>,
    pub clearMap: Option<unsafe extern "system" fn(map: *mut VSMap)>,
    pub copyMap: Option<unsafe extern "system" fn(src: *const VSMap, dst: *mut VSMap)>,
    pub mapSetError: Option<unsafe extern "system" fn(map: *mut VSMap, error_message: *const c_char)>,
    pub mapGetError: Option<unsafe extern "system" fn(map: *const VSMap) -> *const c_char>,
    pub mapNumKeys: Option<unsafe extern "system" fn(map: *const VSMap) -> c_int>,
    pub mapGetKey: Option<unsafe extern "system" fn(map: *const VSMap, index: c_int) -> *const c_char>,
    pub mapDeleteKey: Option<unsafe extern "system" fn(map: *mut VSMap, key: *const c_char) -> c_int>,
    pub mapNumElements: Option<unsafe extern "system" fn(map: *const VSMap, key: *const c_char) -> c_int>,
    pub mapGetType: Option<unsafe extern "system" fn(map: *const VSMap, key: *const c_char) -> c_int>,
    pub mapSetEmpty: Option<unsafe extern "system" fn(map: *mut VSMap, key: *const c_char, type_: c_int) -> c_int>,
    pub mapGetInt: Option<
        unsafe extern "system" fn(map: *const VSMap, key: *const c_char, index: c_int, error: *mut c_int) -> i64,
    >,
    pub mapGetIntSaturated: Option<
        unsafe extern "system" fn(map: *const VSMap, key: *const c_char, index: c_int, error: *mut c_int) -> c_int,
    >,
    pub mapGetIntArray:
        Option<unsafe extern "system" fn(map: *const VSMap, key: *const c_char, error: *mut c_int) -> *const i64>,
    pub mapSetInt:
        Option<unsafe extern "system" fn(map: *mut VSMap, key: *const c_char, i: i64, append: c_int) -> c_int>,
    pub mapSetIntArray:
        Option<unsafe extern "system" fn(map: *mut VSMap, key: *const c_char, i: *const i64, size: c_int) -> c_int>,
    pub mapGetFloat: Option<
        unsafe extern "system" fn(map: *const VSMap, key: *const c_char, index: c_int, error: *mut c_int) -> f64,
    >,
    pub mapGetFloatSaturated: Option<
        unsafe extern "system" fn(map: *const VSMap, key: *const c_char, index: c_int, error: *mut c_int) -> f32,
    >,
    pub mapGetFloatArray:
        Option<unsafe extern "system" fn(map: *const VSMap, key: *const c_char, error: *mut c_int) -> *const f64>,
    pub mapSetFloat:
        Option<unsafe extern "system" fn(map: *mut VSMap, key: *const c_char, d: f64, append: c_int) -> c_int>,
    pub mapSetFloatArray:
        Option<unsafe extern "system" fn(map: *mut VSMap, key: *const c_char, d: *const f64, size: c_int) -> c_int>,
    pub mapGetData: Option<
        unsafe extern "system" fn(
            map: *const VSMap,
            key: *const c_char,
            index: c_int,
            error: *mut c_int,
        ) -> *const c_char,
    >,
    pub mapGetDataSize: Option<
        unsafe extern "system" fn(map: *const VSMap, key: *const c_char, index: c_int, error: *mut c_int) -> c_int,
    >,
    pub mapGetDataTypeHint: Option<
        unsafe extern "system" fn(map: *const VSMap, key: *const c_char, index: c_int, error: *mut c_int) -> c_int,
    >,
    pub mapSetData: Option<
        unsafe extern "system" fn(
            map: *mut VSMap,
            key: *const c_char,
            data: *const c_char,
            size: c_int,
            type_: c_int,
            append: c_int,
        ) -> c_int,
    >,
    pub mapGetNode: Option<
        unsafe extern "system" fn(
            map: *const VSMap,
            key: *const c_char,
            index: c_int,
            error: *mut c_int,
        ) -> *mut VSNode,
    >,
    pub mapSetNode: Option<
        unsafe extern "system" fn(map: *mut VSMap, key: *const c_char, node: *mut VSNode, append: c_int) -> c_int,
    >,
    pub mapConsumeNode: Option<
        unsafe extern "system" fn(map: *mut VSMap, key: *const c_char, node: *mut VSNode, append: c_int) -> c_int,
    >,
    pub mapGetFrame: Option<
        unsafe extern "system" fn(
            map: *const VSMap,
            key: *const c_char,
            index: c_int,
            error: *mut c_int,
        ) -> *const VSFrame,
    >,
    pub mapSetFrame: Option<
        unsafe extern "system" fn(map: *mut VSMap, key: *const c_char, f: *const VSFrame, append: c_int) -> c_int,
    >,
    pub mapConsumeFrame: Option<
        unsafe extern "system" fn(map: *mut VSMap, key: *const c_char, f: *const VSFrame, append: c_int) -> c_int,
    >,
    pub mapGetFunction: Option<
        unsafe extern "system" fn(
            map: *const VSMap,
            key: *const c_char,
            index: c_int,
            error: *mut c_int,
        ) -> *mut VSFunction,
    >,
    pub mapSetFunction: Option<
        unsafe extern "system" fn(map: *mut VSMap, key: *const c_char, func: *mut VSFunction, append: c_int) -> c_int,
    >,
    pub mapConsumeFunction: Option<
        unsafe extern "system" fn(map: *mut VSMap, key: *const c_char, func: *mut VSFunction, append: c_int) -> c_int,
    >,
    // Plugins.
    pub registerFunction: Option<
        unsafe extern "system" fn(
            name: *const c_char,
            args: *const c_char,
            return_type: *const c_char,
            args_func: VSPublicFunction,
            function_data: *mut c_void,
            plugin: *mut VSPlugin,
        ) -> c_int,
    >,
    pub getPluginByID: Option<unsafe extern "system" fn(identifier: *const c_char, core: *mut VSCore) -> *mut VSPlugin>,
    pub getPluginByNamespace: Option<unsafe extern "system" fn(ns: *const c_char, core: *mut VSCore) -> *mut VSPlugin>,
    pub getNextPlugin: Option<unsafe extern "system" fn(plugin: *mut VSPlugin, core: *mut VSCore) -> *mut VSPlugin>,
    pub getPluginName: Option<unsafe extern "system" fn(plugin: *mut VSPlugin) -> *const c_char>,
    pub getPluginID: Option<unsafe extern "system" fn(plugin: *mut VSPlugin) -> *const c_char>,
    pub getPluginNamespace: Option<unsafe extern "system" fn(plugin: *mut VSPlugin) -> *const c_char>,
    pub getNextPluginFunction:
        Option<unsafe extern "system" fn(func: *mut VSPluginFunction, plugin: *mut VSPlugin) -> *mut VSPluginFunction>,
    pub getPluginFunctionByName:
        Option<unsafe extern "system" fn(name: *const c_char, plugin: *mut VSPlugin) -> *mut VSPluginFunction>,
    pub getPluginFunctionName: Option<unsafe extern "system" fn(func: *mut VSPluginFunction) -> *const c_char>,
    pub getPluginFunctionArguments: Option<unsafe extern "system" fn(func: *mut VSPluginFunction) -> *const c_char>,
    pub getPluginFunctionReturnType: Option<unsafe extern "system" fn(func: *mut VSPluginFunction) -> *const c_char>,
    pub getPluginPath: Option<unsafe extern "system" fn(plugin: *const VSPlugin) -> *const c_char>,
    pub getPluginVersion: Option<unsafe extern "system" fn(plugin: *const VSPlugin) -> c_int>,
    pub invoke:
        Option<unsafe extern "system" fn(plugin: *mut VSPlugin, name: *const c_char, args: *const VSMap) -> *mut VSMap>,
    // The core.
    pub createCore: Option<unsafe extern "system" fn(flags: c_int) -> *mut VSCore>,
    pub freeCore: Option<unsafe extern "system" fn(core: *mut VSCore)>,
    pub setMaxCacheSize: Option<unsafe extern "system" fn(bytes: i64, core: *mut VSCore) -> i64>,
    pub setThreadCount: Option<unsafe extern "system" fn(threads: c_int, core: *mut VSCore) -> c_int>,
    pub getCoreInfo: Option<unsafe extern "system" fn(core: *mut VSCore, info: *mut VSCoreInfo)>,
    pub getAPIVersion: Option<unsafe extern "system" fn() -> c_int>,
    // Messages.
    pub logMessage: Option<unsafe extern "system" fn(msg_type: c_int, msg: *const c_char, core: *mut VSCore)>,
    pub addLogHandler: Option<
        unsafe extern "system" fn(
            handler: VSLogHandler,
            free: VSLogHandlerFree,
            user_data: *mut c_void,
            core: *mut VSCore,
        ) -> *mut VSLogHandle,
    >,
    pub removeLogHandler: Option<unsafe extern "system" fn(handle: *mut VSLogHandle, core: *mut VSCore) -> c_int>,
    // API 4.1: caches and graph inspection (not for filters).
    pub clearNodeCache: Option<unsafe extern "system" fn(node: *mut VSNode)>,
    pub clearCoreCaches: Option<unsafe extern "system" fn(core: *mut VSCore)>,
    pub getNodeName: Option<unsafe extern "system" fn(node: *mut VSNode) -> *const c_char>,
    pub getNodeFilterMode: Option<unsafe extern "system" fn(node: *mut VSNode) -> c_int>,
    pub getNumNodeDependencies: Option<unsafe extern "system" fn(node: *mut VSNode) -> c_int>,
    pub getNodeDependency:
        Option<unsafe extern "system" fn(node: *mut VSNode, index: c_int) -> *const VSFilterDependency>,
    pub getCoreNodeTiming: Option<unsafe extern "system" fn(core: *mut VSCore) -> c_int>,
    pub setCoreNodeTiming: Option<unsafe extern "system" fn(core: *mut VSCore, enable: c_int)>,
    pub getNodeProcessingTime: Option<unsafe extern "system" fn(node: *mut VSNode, reset: c_int) -> i64>,
    pub getFreedNodeProcessingTime: Option<unsafe extern "system" fn(core: *mut VSCore, reset: c_int) -> i64>,
    // API 4.2.
    pub getCoreInfo2: Option<unsafe extern "system" fn(core: *mut VSCore, info: *mut VSCoreInfo2)>,
    // API 4.3 (R81): GPU resident frames.
    pub createVideoFilterEx: Option<
        unsafe extern "system" fn(
            out: *mut VSMap,
            name: *const c_char,
            vi: *const VSVideoInfo,
            get_frame: VSFilterGetFrame,
            free: VSFilterFree,
            filter_mode: c_int,
            flags: c_int,
            dependencies: *const VSFilterDependency,
            num_deps: c_int,
            instance_data: *mut c_void,
            core: *mut VSCore,
        ),
    >,
    pub createVideoFilterEx2: Option<
        unsafe extern "system" fn(
            name: *const c_char,
            vi: *const VSVideoInfo,
            get_frame: VSFilterGetFrame,
            free: VSFilterFree,
            filter_mode: c_int,
            flags: c_int,
            dependencies: *const VSFilterDependency,
            num_deps: c_int,
            instance_data: *mut c_void,
            core: *mut VSCore,
        ) -> *mut VSNode,
    >,
    pub getVulkanAPI: Option<unsafe extern "system" fn() -> *const VSVULKANAPI>,
    pub getNodeResidency: Option<unsafe extern "system" fn(node: *mut VSNode) -> c_int>,
    pub getFrameResidency: Option<unsafe extern "system" fn(frame: *const VSFrame) -> c_int>,
}

/// `VSVulkanCoreHandles`: the core's Vulkan instance, device and queues.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct VSVulkanCoreHandles {
    /// `VkInstance`.
    pub instance: vk::Instance,
    /// `VkPhysicalDevice`.
    pub physicalDevice: vk::PhysicalDevice,
    /// `VkDevice`.
    pub device: vk::Device,
    /// `vkGetInstanceProcAddr` of the loader the core uses.
    pub getInstanceProcAddr: Option<vk::PFN_vkGetInstanceProcAddr>,
    /// The compute queue's family.
    pub computeQueueFamily: u32,
    /// The compute queue's index in it.
    pub computeQueueIndex: u32,
    /// The transfer queue's family.
    pub transferQueueFamily: u32,
    /// The transfer queue's index in it.
    pub transferQueueIndex: u32,
}

/// `VSVulkanPlaneInfo`: one GPU plane, a linear pitched buffer laid out as the CPU plane
/// (`getStride`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct VSVulkanPlaneInfo {
    /// The plane's buffer.
    pub buffer: vk::Buffer,
    /// stride × height bytes.
    pub bufferSize: vk::DeviceSize,
    /// Wait (semaphore, value) before reading; null means ready now.
    pub readySemaphore: vk::Semaphore,
    /// The value to wait for.
    pub readyValue: u64,
}

/// `VSVulkanBufferInfo`: a scratch buffer from `createGPUBuffer`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct VSVulkanBufferInfo {
    /// The buffer.
    pub buffer: vk::Buffer,
    /// Its device address (with SHADER_DEVICE_ADDRESS usage).
    pub address: vk::DeviceAddress,
    /// Host mapping, when host visible.
    pub mapped: *mut c_void,
    /// The requested size.
    pub size: vk::DeviceSize,
    /// What the memory type provides.
    pub memoryFlags: vk::MemoryPropertyFlags,
}

/// `VSVulkanMemoryInfo`: a bare region from `allocateGPUMemory`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct VSVulkanMemoryInfo {
    /// The shared block (never free it).
    pub memory: vk::DeviceMemory,
    /// Where the region starts in it.
    pub offset: vk::DeviceSize,
    /// The region's size.
    pub size: vk::DeviceSize,
    /// Host mapping of the region, when host visible.
    pub mapped: *mut c_void,
    /// What the memory type provides.
    pub memoryFlags: vk::MemoryPropertyFlags,
}

/// `VSVulkanExportedMemory`: a plane's backing allocation exported by `exportGPUPlane`.
/// Import the whole allocation once per `memoryId` and address planes by `offset`; every
/// export is a new fd, which a successful import consumes and which is closed otherwise.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct VSVulkanExportedMemory {
    /// Stable for the allocation's lifetime, never reused: the key for cached imports.
    pub memoryId: u64,
    /// The whole allocation's size.
    pub memorySize: vk::DeviceSize,
    /// The allocation's memory type (a Vulkan import passes it unchanged).
    pub memoryTypeIndex: u32,
    /// The plane's offset in the allocation.
    pub offset: vk::DeviceSize,
    /// The plane's bytes, stride × height.
    pub size: vk::DeviceSize,
    /// `VkExternalMemoryHandleTypeFlagBits` of `handle`.
    pub handleType: c_int,
    /// A file descriptor (a `HANDLE` on Windows), owned by the caller.
    pub handle: isize,
}

/// `VSVulkanExportedSemaphore`: a timeline exported by `exportGPUSemaphore`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct VSVulkanExportedSemaphore {
    /// `VkExternalSemaphoreHandleTypeFlagBits` of `handle`.
    pub handleType: c_int,
    /// A file descriptor (a `HANDLE` on Windows), owned by the caller.
    pub handle: isize,
}

/// `VSVulkanCoreInfo`: the core's device and its VRAM budget.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct VSVulkanCoreInfo {
    /// The device's name, NUL-terminated.
    pub deviceName: [c_char; 256],
    /// Largest device-local heap.
    pub deviceMemory: i64,
    /// What the driver says this process may use now.
    pub budget: i64,
    /// VapourSynth's current use of device memory.
    pub allocated: i64,
    /// The eviction limit.
    pub limit: i64,
    /// The device's UUID (CUDA's device UUID on the same GPU).
    pub deviceUUID: [u8; vk::UUID_SIZE],
    /// The device's LUID (Windows).
    pub deviceLUID: [u8; vk::LUID_SIZE],
    /// The device's node mask.
    pub deviceNodeMask: u32,
    /// Whether `deviceLUID` is meaningful.
    pub deviceLUIDValid: c_int,
    /// `VkExternalMemoryHandleTypeFlagBits` `exportGPUPlane` hands out, 0 when unavailable.
    pub exportHandleType: c_int,
    /// `VkExternalSemaphoreHandleTypeFlagBits` `exportGPUSemaphore` hands out, 0 when unavailable.
    pub semaphoreExportHandleType: c_int,
    /// Nonzero when device memory is host memory (integrated and software devices).
    pub unifiedMemory: c_int,
}

impl Default for VSVulkanCoreInfo {
    fn default() -> Self {
        VSVulkanCoreInfo {
            deviceName: [0; 256],
            deviceMemory: 0,
            budget: 0,
            allocated: 0,
            limit: 0,
            deviceUUID: [0; vk::UUID_SIZE],
            deviceLUID: [0; vk::LUID_SIZE],
            deviceNodeMask: 0,
            deviceLUIDValid: 0,
            exportHandleType: 0,
            semaphoreExportHandleType: 0,
            unifiedMemory: 0,
        }
    }
}

/// `VSVulkanDeviceListEntry`: one physical device from `enumerateVulkanDevices`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct VSVulkanDeviceListEntry {
    /// The device's name, NUL-terminated.
    pub deviceName: [c_char; 256],
    /// Its Vulkan version.
    pub apiVersion: u32,
    /// `VkPhysicalDeviceType`.
    pub deviceType: c_int,
    /// Largest device-local heap.
    pub deviceMemory: i64,
    /// Whether it passes the Vulkan 1.4 feature gate.
    pub usable: c_int,
    /// Why not, when it does not, NUL-terminated.
    pub unusableReason: [c_char; 256],
    /// The device's UUID.
    pub deviceUUID: [u8; vk::UUID_SIZE],
    /// The device's LUID (Windows).
    pub deviceLUID: [u8; vk::LUID_SIZE],
    /// The device's node mask.
    pub deviceNodeMask: u32,
    /// Whether `deviceLUID` is meaningful.
    pub deviceLUIDValid: c_int,
}

/// `VSVULKANAPI`: the GPU side, from `VSAPI::getVulkanAPI` (API 4.3). Unless an entry says
/// otherwise a status is 0 on success, a handle null on failure, the reason in `errorMessage`.
///
/// Each field is the header's function of the same name, documented there.
#[allow(missing_docs)]
#[repr(C)]
pub struct VSVULKANAPI {
    // Device selection and information.
    pub enumerateVulkanDevices: Option<
        unsafe extern "system" fn(
            entries: *mut VSVulkanDeviceListEntry,
            max_entries: c_int,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> c_int,
    >,
    pub setVulkanDevice: Option<
        unsafe extern "system" fn(
            core: *mut VSCore,
            device_index: c_int,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> c_int,
    >,
    pub getVulkanCoreInfo: Option<
        unsafe extern "system" fn(
            core: *mut VSCore,
            info: *mut VSVulkanCoreInfo,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> c_int,
    >,
    pub setMaxVRAMUse: Option<unsafe extern "system" fn(bytes: i64, core: *mut VSCore) -> i64>,
    // Calling Vulkan on the core's device.
    pub getVulkanHandles: Option<
        unsafe extern "system" fn(
            core: *mut VSCore,
            handles: *mut VSVulkanCoreHandles,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> c_int,
    >,
    pub getVulkanFunctions: Option<
        unsafe extern "system" fn(
            core: *mut VSCore,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> *const VSVulkanFunctions,
    >,
    pub lockVulkanQueue: Option<unsafe extern "system" fn(core: *mut VSCore, queue: c_int)>,
    pub unlockVulkanQueue: Option<unsafe extern "system" fn(core: *mut VSCore, queue: c_int)>,
    // GPU resident frames.
    pub newGPUVideoFrame: Option<
        unsafe extern "system" fn(
            format: *const VSVideoFormat,
            width: c_int,
            height: c_int,
            prop_src: *const VSFrame,
            core: *mut VSCore,
        ) -> *mut VSFrame,
    >,
    pub getGPUPlane:
        Option<unsafe extern "system" fn(frame: *const VSFrame, plane: c_int, info: *mut VSVulkanPlaneInfo) -> c_int>,
    pub setGPUPlaneProducer: Option<
        unsafe extern "system" fn(frame: *const VSFrame, plane: c_int, timeline: *mut VSGPUTimeline, value: u64),
    >,
    // Timelines (the semaphores producer pairs are published on).
    pub createGPUTimeline: Option<
        unsafe extern "system" fn(
            core: *mut VSCore,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> *mut VSGPUTimeline,
    >,
    pub freeGPUTimeline: Option<unsafe extern "system" fn(timeline: *mut VSGPUTimeline)>,
    pub addGPUTimelineRef: Option<unsafe extern "system" fn(timeline: *mut VSGPUTimeline)>,
    pub getGPUTimelineSemaphore: Option<unsafe extern "system" fn(timeline: *mut VSGPUTimeline) -> vk::Semaphore>,
    pub gpuTimelineWaitValue: Option<
        unsafe extern "system" fn(
            timeline: *mut VSGPUTimeline,
            value: u64,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> c_int,
    >,
    // Memory from the core's pool.
    pub createGPUBuffer: Option<
        unsafe extern "system" fn(
            core: *mut VSCore,
            size: vk::DeviceSize,
            usage: vk::BufferUsageFlags,
            required_flags: vk::MemoryPropertyFlags,
            preferred_flags: vk::MemoryPropertyFlags,
            info: *mut VSVulkanBufferInfo,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> *mut VSGPUBuffer,
    >,
    pub destroyGPUBuffer: Option<unsafe extern "system" fn(buffer: *mut VSGPUBuffer)>,
    pub allocateGPUMemory: Option<
        unsafe extern "system" fn(
            core: *mut VSCore,
            requirements: *const vk::MemoryRequirements,
            required_flags: vk::MemoryPropertyFlags,
            preferred_flags: vk::MemoryPropertyFlags,
            info: *mut VSVulkanMemoryInfo,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> *mut VSGPUMemory,
    >,
    pub freeGPUMemory: Option<unsafe extern "system" fn(memory: *mut VSGPUMemory)>,
    pub reserveGPUMemory: Option<
        unsafe extern "system" fn(
            core: *mut VSCore,
            bytes: i64,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> *mut VSGPUMemoryReservation,
    >,
    pub updateGPUMemoryReservation:
        Option<unsafe extern "system" fn(reservation: *mut VSGPUMemoryReservation, bytes: i64)>,
    pub releaseGPUMemoryReservation: Option<unsafe extern "system" fn(reservation: *mut VSGPUMemoryReservation)>,
    // Shaders.
    pub compileGPUShader: Option<
        unsafe extern "system" fn(
            core: *mut VSCore,
            language: c_int,
            source: *const c_char,
            error_log: *mut c_char,
            error_log_size: c_int,
        ) -> *mut VSGPUShader,
    >,
    pub getGPUShaderCode:
        Option<unsafe extern "system" fn(shader: *const VSGPUShader, size_in_bytes: *mut usize) -> *const u32>,
    pub freeGPUShader: Option<unsafe extern "system" fn(shader: *mut VSGPUShader)>,
    // Exec pools.
    pub createGPUExecPool: Option<
        unsafe extern "system" fn(
            core: *mut VSCore,
            queue: c_int,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> *mut VSGPUExecPool,
    >,
    pub freeGPUExecPool: Option<unsafe extern "system" fn(pool: *mut VSGPUExecPool)>,
    pub gpuExecPoolWaitIdle: Option<
        unsafe extern "system" fn(
            pool: *mut VSGPUExecPool,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> c_int,
    >,
    pub gpuExecWaitValue: Option<
        unsafe extern "system" fn(
            pool: *mut VSGPUExecPool,
            value: u64,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> c_int,
    >,
    pub gpuExecPoolTimeline: Option<unsafe extern "system" fn(pool: *mut VSGPUExecPool) -> *mut VSGPUTimeline>,
    // Recording contexts.
    pub gpuExecAcquire: Option<
        unsafe extern "system" fn(
            pool: *mut VSGPUExecPool,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> *mut VSGPUExecContext,
    >,
    pub gpuExecCommandBuffer: Option<unsafe extern "system" fn(context: *mut VSGPUExecContext) -> vk::CommandBuffer>,
    pub gpuExecReadsFrame: Option<unsafe extern "system" fn(context: *mut VSGPUExecContext, frame: *const VSFrame)>,
    pub gpuExecWritesPlane:
        Option<unsafe extern "system" fn(context: *mut VSGPUExecContext, frame: *mut VSFrame, plane: c_int)>,
    pub gpuExecUsesBuffer: Option<unsafe extern "system" fn(context: *mut VSGPUExecContext, buffer: *mut VSGPUBuffer)>,
    pub gpuExecUsesMemory: Option<unsafe extern "system" fn(context: *mut VSGPUExecContext, memory: *mut VSGPUMemory)>,
    pub gpuExecRetain: Option<
        unsafe extern "system" fn(
            context: *mut VSGPUExecContext,
            release: VSGPUReleaseFunc,
            object: *mut c_void,
            bytes: vk::DeviceSize,
        ),
    >,
    pub gpuExecSubmit: Option<
        unsafe extern "system" fn(
            context: *mut VSGPUExecContext,
            signaled_value: *mut u64,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> c_int,
    >,
    pub gpuExecAbandon: Option<unsafe extern "system" fn(context: *mut VSGPUExecContext)>,
    // Sharing frames with other APIs (CUDA).
    pub exportGPUPlane: Option<
        unsafe extern "system" fn(
            frame: *const VSFrame,
            plane: c_int,
            out: *mut VSVulkanExportedMemory,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> c_int,
    >,
    pub exportGPUSemaphore: Option<
        unsafe extern "system" fn(
            core: *mut VSCore,
            semaphore: vk::Semaphore,
            out: *mut VSVulkanExportedSemaphore,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> c_int,
    >,
    pub waitGPUFrame: Option<
        unsafe extern "system" fn(
            frame: *const VSFrame,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> c_int,
    >,
    pub getExportableFrameFilter: Option<
        unsafe extern "system" fn(
            n: c_int,
            node: *mut VSNode,
            frame_ctx: *mut VSFrameContext,
            error_message: *mut c_char,
            error_message_size: c_int,
        ) -> *const VSFrame,
    >,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::mem::{offset_of, size_of};

    /// What `tools/abi.c` printed, compiled against R81's headers (x86-64 Linux).
    const C_LAYOUT: &str = include_str!("../tools/abi.txt");

    /// The same numbers from the Rust declarations.
    fn rust_layout() -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        macro_rules! layout {
            ($($s:ident { $($f:ident),* $(,)? })*) => {$(
                m.insert(stringify!($s).to_string(), size_of::<$s>());
                $(m.insert(concat!(stringify!($s), ".", stringify!($f)).to_string(), offset_of!($s, $f));)*
            )*};
        }
        layout! {
            VSAPI { createVideoFilter, createVideoFilter2, createAudioFilter, createAudioFilter2, setLinearFilter, setCacheMode, setCacheOptions, freeNode, addNodeRef, getNodeType, getVideoInfo, getAudioInfo, newVideoFrame, newVideoFrame2, newAudioFrame, newAudioFrame2, freeFrame, addFrameRef, copyFrame, getFramePropertiesRO, getFramePropertiesRW, getStride, getReadPtr, getWritePtr, getVideoFrameFormat, getAudioFrameFormat, getFrameType, getFrameWidth, getFrameHeight, getFrameLength, getVideoFormatName, getAudioFormatName, queryVideoFormat, queryAudioFormat, queryVideoFormatID, getVideoFormatByID, getFrame, getFrameAsync, getFrameFilter, requestFrameFilter, releaseFrameEarly, cacheFrame, setFilterError, createFunction, freeFunction, addFunctionRef, callFunction, createMap, freeMap, clearMap, copyMap, mapSetError, mapGetError, mapNumKeys, mapGetKey, mapDeleteKey, mapNumElements, mapGetType, mapSetEmpty, mapGetInt, mapGetIntSaturated, mapGetIntArray, mapSetInt, mapSetIntArray, mapGetFloat, mapGetFloatSaturated, mapGetFloatArray, mapSetFloat, mapSetFloatArray, mapGetData, mapGetDataSize, mapGetDataTypeHint, mapSetData, mapGetNode, mapSetNode, mapConsumeNode, mapGetFrame, mapSetFrame, mapConsumeFrame, mapGetFunction, mapSetFunction, mapConsumeFunction, registerFunction, getPluginByID, getPluginByNamespace, getNextPlugin, getPluginName, getPluginID, getPluginNamespace, getNextPluginFunction, getPluginFunctionByName, getPluginFunctionName, getPluginFunctionArguments, getPluginFunctionReturnType, getPluginPath, getPluginVersion, invoke, createCore, freeCore, setMaxCacheSize, setThreadCount, getCoreInfo, getAPIVersion, logMessage, addLogHandler, removeLogHandler, clearNodeCache, clearCoreCaches, getNodeName, getNodeFilterMode, getNumNodeDependencies, getNodeDependency, getCoreNodeTiming, setCoreNodeTiming, getNodeProcessingTime, getFreedNodeProcessingTime, getCoreInfo2, createVideoFilterEx, createVideoFilterEx2, getVulkanAPI, getNodeResidency, getFrameResidency }
            VSVULKANAPI { enumerateVulkanDevices, setVulkanDevice, getVulkanCoreInfo, setMaxVRAMUse, getVulkanHandles, getVulkanFunctions, lockVulkanQueue, unlockVulkanQueue, newGPUVideoFrame, getGPUPlane, setGPUPlaneProducer, createGPUTimeline, freeGPUTimeline, addGPUTimelineRef, getGPUTimelineSemaphore, gpuTimelineWaitValue, createGPUBuffer, destroyGPUBuffer, allocateGPUMemory, freeGPUMemory, reserveGPUMemory, updateGPUMemoryReservation, releaseGPUMemoryReservation, compileGPUShader, getGPUShaderCode, freeGPUShader, createGPUExecPool, freeGPUExecPool, gpuExecPoolWaitIdle, gpuExecWaitValue, gpuExecPoolTimeline, gpuExecAcquire, gpuExecCommandBuffer, gpuExecReadsFrame, gpuExecWritesPlane, gpuExecUsesBuffer, gpuExecUsesMemory, gpuExecRetain, gpuExecSubmit, gpuExecAbandon, exportGPUPlane, exportGPUSemaphore, waitGPUFrame, getExportableFrameFilter }
            VSPLUGINAPI { getAPIVersion, configPlugin, registerFunction }
            VSVideoFormat { colorFamily, sampleType, bitsPerSample, bytesPerSample, subSamplingW, subSamplingH, numPlanes }
            VSVideoInfo { format, fpsNum, fpsDen, width, height, numFrames }
            VSAudioFormat { sampleType, bitsPerSample, bytesPerSample, numChannels, channelLayout }
            VSAudioInfo { format, sampleRate, numSamples, numFrames }
            VSCoreInfo { versionString, core, api, numThreads, maxFramebufferSize, usedFramebufferSize }
            VSCoreInfo2 { versionString, coreVersion, apiVersion, creationFlags, numThreads, maxFramebufferSize, usedFramebufferSize }
            VSFilterDependency { source, requestPattern }
            VSVulkanCoreHandles { instance, physicalDevice, device, getInstanceProcAddr, computeQueueFamily, computeQueueIndex, transferQueueFamily, transferQueueIndex }
            VSVulkanPlaneInfo { buffer, bufferSize, readySemaphore, readyValue }
            VSVulkanBufferInfo { buffer, address, mapped, size, memoryFlags }
            VSVulkanMemoryInfo { memory, offset, size, mapped, memoryFlags }
            VSVulkanExportedMemory { memoryId, memorySize, memoryTypeIndex, offset, size, handleType, handle }
            VSVulkanExportedSemaphore { handleType, handle }
            VSVulkanCoreInfo { deviceName, deviceMemory, budget, allocated, limit, deviceUUID, deviceLUID, deviceNodeMask, deviceLUIDValid, exportHandleType, semaphoreExportHandleType, unifiedMemory }
            VSVulkanDeviceListEntry { deviceName, apiVersion, deviceType, deviceMemory, usable, unusableReason, deviceUUID, deviceLUID, deviceNodeMask, deviceLUIDValid }
        }
        m
    }

    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn layout_matches_the_c_headers() {
        let mut lines = C_LAYOUT.lines();
        assert_eq!(lines.next(), Some(format!("VAPOURSYNTH_API_VERSION {VAPOURSYNTH_API_VERSION:#x}").as_str()));
        let rust = rust_layout();
        let mut seen = 0;
        for line in lines {
            let (name, value) = line.split_once(' ').expect("a line of tools/abi.txt is \"name number\"");
            let c: usize = value.parse().expect("a number");
            assert_eq!(rust.get(name), Some(&c), "{name}: C says {c}");
            seen += 1;
        }
        // Every Rust field and struct is in the C output: none is missing from either side.
        assert_eq!(seen, rust.len());
        // The tables are the header's function pointers and nothing else.
        assert_eq!(size_of::<VSAPI>(), 122 * size_of::<usize>());
        assert_eq!(size_of::<VSVULKANAPI>(), 44 * size_of::<usize>());
    }

    #[test]
    fn preset_format_ids() {
        assert_eq!(pfRGBS, 0x2120_0000);
        assert_eq!(pfRGBH, 0x2110_0000);
        assert_eq!(pfRGB24, 0x2008_0000);
        assert_eq!(pfYUV420P8, 0x3008_0101);
    }
}
