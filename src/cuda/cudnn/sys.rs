//! cuDNN's backend API as `cudnn.rs` uses it: the library opened at run time, the numbers
//! of its enums, its status codes as errors, and an owned backend descriptor.

use std::ffi::{CStr, c_char, c_void};
use std::sync::OnceLock;

// The numbers below are cuDNN 9's, read from `cudnn_graph.h` of cuDNN 9.6.0
// (CUDNN_GRAPH_MAJOR 9, MINOR 6; the header as vendored at
// github.com/zspace/system.cuda-12.6 include/cudnn_graph.h) and checked against
// the bindgen output of cuDNN 9.1 / 9.2 headers in cudarc 0.19 (src/cudnn/sys/mod.rs).
// Those [`plan_for`] adds (ENGINE_DESCRIPTOR = 2, KNOB_CHOICE_DESCRIPTOR = 7 in
// cudnnBackendDescriptorType_t; CUDNN_ATTR_ENGINE_OPERATION_GRAPH = 1300,
// CUDNN_ATTR_ENGINE_GLOBAL_INDEX = 1301, CUDNN_ATTR_ENGINECFG_ENGINE = 300,
// CUDNN_ATTR_ENGINECFG_KNOB_CHOICES = 302, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE = 600,
// CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE = 601; CUDNN_TYPE_KNOB_TYPE = 9, CUDNN_TYPE_INT64 = 3)
// were read again from that same header (zspace/system.cuda-12.6 at b3d92c8, include/cudnn_graph.h).
// C enums are `int` in the ABI; they are passed as `i32`.

/// `i32` constants, several to a line (C enums are `int` in the ABI).
macro_rules! enum_values {
    ($($name:ident = $value:expr),* $(,)?) => { $(pub(super) const $name: i32 = $value;)* };
}
// cudnnBackendDescriptorType_t
enum_values! {
    POINTWISE_DESCRIPTOR = 0, CONVOLUTION_DESCRIPTOR = 1, ENGINE_DESCRIPTOR = 2, ENGINECFG_DESCRIPTOR = 3,
    ENGINEHEUR_DESCRIPTOR = 4, EXECUTION_PLAN_DESCRIPTOR = 5, KNOB_CHOICE_DESCRIPTOR = 7,
    OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR = 10, OPERATION_POINTWISE_DESCRIPTOR = 13,
    OPERATIONGRAPH_DESCRIPTOR = 15, VARIANT_PACK_DESCRIPTOR = 16, TENSOR_DESCRIPTOR = 17,
}
// cudnnBackendAttributeName_t (CUDNN_ATTR_*)
enum_values! {
    ATTR_POINTWISE_MODE = 0, ATTR_POINTWISE_MATH_PREC = 1, ATTR_POINTWISE_RELU_LOWER_CLIP = 3,
    ATTR_POINTWISE_RELU_UPPER_CLIP = 4, ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE = 5,
    ATTR_CONVOLUTION_COMP_TYPE = 100, ATTR_CONVOLUTION_CONV_MODE = 101, ATTR_CONVOLUTION_DILATIONS = 102,
    ATTR_CONVOLUTION_FILTER_STRIDES = 103, ATTR_CONVOLUTION_POST_PADDINGS = 104,
    ATTR_CONVOLUTION_PRE_PADDINGS = 105, ATTR_CONVOLUTION_SPATIAL_DIMS = 106,
    ATTR_ENGINEHEUR_MODE = 200, ATTR_ENGINEHEUR_OPERATION_GRAPH = 201, ATTR_ENGINEHEUR_RESULTS = 202,
    ATTR_ENGINECFG_ENGINE = 300, ATTR_ENGINECFG_KNOB_CHOICES = 302,
    ATTR_EXECUTION_PLAN_HANDLE = 400, ATTR_EXECUTION_PLAN_ENGINE_CONFIG = 401,
    ATTR_EXECUTION_PLAN_WORKSPACE_SIZE = 402,
    ATTR_KNOB_CHOICE_KNOB_TYPE = 600, ATTR_KNOB_CHOICE_KNOB_VALUE = 601,
    ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA = 700, ATTR_OPERATION_CONVOLUTION_FORWARD_BETA = 701,
    ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC = 702, ATTR_OPERATION_CONVOLUTION_FORWARD_W = 703,
    ATTR_OPERATION_CONVOLUTION_FORWARD_X = 704, ATTR_OPERATION_CONVOLUTION_FORWARD_Y = 705,
    ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR = 750, ATTR_OPERATION_POINTWISE_XDESC = 751,
    ATTR_OPERATION_POINTWISE_BDESC = 752, ATTR_OPERATION_POINTWISE_YDESC = 753,
    ATTR_OPERATIONGRAPH_HANDLE = 800, ATTR_OPERATIONGRAPH_OPS = 801,
    ATTR_TENSOR_BYTE_ALIGNMENT = 900, ATTR_TENSOR_DATA_TYPE = 901, ATTR_TENSOR_DIMENSIONS = 902,
    ATTR_TENSOR_STRIDES = 903, ATTR_TENSOR_UNIQUE_ID = 906, ATTR_TENSOR_IS_VIRTUAL = 907,
    ATTR_VARIANT_PACK_UNIQUE_IDS = 1000, ATTR_VARIANT_PACK_DATA_POINTERS = 1001,
    ATTR_VARIANT_PACK_WORKSPACE = 1003, ATTR_ENGINE_OPERATION_GRAPH = 1300, ATTR_ENGINE_GLOBAL_INDEX = 1301,
    ATTR_ENGINE_BEHAVIOR_NOTE = 1305,
}
// cudnnBackendAttributeType_t (CUDNN_TYPE_*)
enum_values! {
    TYPE_HANDLE = 0, TYPE_DATA_TYPE = 1, TYPE_BOOLEAN = 2, TYPE_INT64 = 3, TYPE_FLOAT = 4, TYPE_DOUBLE = 5,
    TYPE_VOID_PTR = 6, TYPE_CONVOLUTION_MODE = 7, TYPE_HEUR_MODE = 8, TYPE_KNOB_TYPE = 9,
    TYPE_POINTWISE_MODE = 14, TYPE_BACKEND_DESCRIPTOR = 15, TYPE_BEHAVIOR_NOTE = 19,
}
enum_values! {
    DATA_FLOAT = 0, DATA_HALF = 2, // cudnnDataType_t
    POINTWISE_ADD = 0, POINTWISE_MUL = 1, POINTWISE_SUB = 9, POINTWISE_RELU_FWD = 100, // cudnnPointwiseMode_t
    CROSS_CORRELATION = 1, // cudnnConvolutionMode_t
    HEUR_MODE_FALLBACK = 2, HEUR_MODE_A = 3, // cudnnBackendHeurMode_t
    BEHAVIOR_NOTE_RUNTIME_COMPILATION = 0, // cudnnBackendBehaviorNote_t
    // cudnnStatus_t: CUDNN_STATUS_SUCCESS, and the CUDNN_STATUS_NOT_SUPPORTED category (3000..=3999).
    STATUS_SUCCESS = 0, STATUS_NOT_SUPPORTED = 3000,
}

#[cfg(windows)]
pub(super) const LIBRARY: &str = "cudnn64_9.dll";
#[cfg(not(windows))]
pub(super) const LIBRARY: &str = "libcudnn.so.9";

pub(super) type CreateFn = unsafe extern "system" fn(i32, *mut *mut c_void) -> i32;
pub(super) type DescFn = unsafe extern "system" fn(*mut c_void) -> i32;
pub(super) type SetFn = unsafe extern "system" fn(*mut c_void, i32, i32, i64, *const c_void) -> i32;
pub(super) type GetFn = unsafe extern "system" fn(*mut c_void, i32, i32, i64, *mut i64, *mut c_void) -> i32;
pub(super) type ExecuteFn = unsafe extern "system" fn(*mut c_void, *mut c_void, *mut c_void) -> i32;
pub(super) type ErrorStringFn = unsafe extern "system" fn(i32) -> *const c_char;
pub(super) type LastErrorFn = unsafe extern "system" fn(*mut c_char, usize);
pub(super) type VersionFn = unsafe extern "system" fn() -> usize;

/// The cuDNN entry points this module uses.
pub(super) struct Api {
    pub(super) create: CreateFn,
    pub(super) destroy: DescFn,
    pub(super) finalize: DescFn,
    pub(super) set: SetFn,
    pub(super) get: GetFn,
    pub(super) execute: ExecuteFn,
    pub(super) error_string: ErrorStringFn,
    pub(super) last_error: Option<LastErrorFn>,
    /// cudnnGetVersion's number, e.g. 90600 for 9.6.0.
    pub(super) version: usize,
    /// Kept open for the process: the pointers above point into it.
    pub(super) _lib: libloading::Library,
}

/// Opens cuDNN once per process.
pub(super) fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

pub(super) fn load() -> Result<Api, String> {
    // SAFETY: cuDNN's own library, which ONNX Runtime's CUDA provider loads into this
    // process anyway; its initialisers are cuDNN's.
    let lib = unsafe { libloading::Library::new(LIBRARY) }.map_err(|e| {
        let why = std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
        format!("cannot load {LIBRARY} (cuDNN 9, needed by the fused ConvAct op): {why}")
    })?;
    pub(super) fn sym<T: Copy>(lib: &libloading::Library, name: &str) -> Result<T, String> {
        // SAFETY: every call below names T as the function's type in cudnn_graph.h (v9).
        unsafe { lib.get::<T>(name.as_bytes()) }.map(|s| *s).map_err(|e| format!("{LIBRARY} has no {name}: {e}"))
    }
    let version: VersionFn = sym(&lib, "cudnnGetVersion")?;
    // SAFETY: cudnnGetVersion takes nothing and only returns a number.
    let v = unsafe { version() };
    if !(90000..100000).contains(&v) {
        return Err(format!("{LIBRARY} reports cuDNN version {v}; the fused ConvAct op needs cuDNN 9"));
    }
    Ok(Api {
        create: sym(&lib, "cudnnBackendCreateDescriptor")?,
        destroy: sym(&lib, "cudnnBackendDestroyDescriptor")?,
        finalize: sym(&lib, "cudnnBackendFinalize")?,
        set: sym(&lib, "cudnnBackendSetAttribute")?,
        get: sym(&lib, "cudnnBackendGetAttribute")?,
        execute: sym(&lib, "cudnnBackendExecute")?,
        error_string: sym(&lib, "cudnnGetErrorString")?,
        last_error: sym(&lib, "cudnnGetLastErrorString").ok(),
        version: v,
        _lib: lib,
    })
}

/// The loaded cuDNN's version number (cudnnGetVersion, e.g. 90600), loading it if needed.
pub(crate) fn version() -> Result<usize, String> {
    api().map(|a| a.version)
}

/// A failed cuDNN call: its status (to tell "not supported" apart) and message.
#[derive(Debug)]
pub(super) struct Fail {
    pub(super) status: i32,
    pub(super) message: String,
}

impl Fail {
    pub(super) fn not_supported(&self) -> bool {
        self.status / 1000 * 1000 == STATUS_NOT_SUPPORTED
    }
}

impl From<Fail> for String {
    fn from(f: Fail) -> String {
        f.message
    }
}

impl From<String> for Fail {
    fn from(message: String) -> Fail {
        Fail { status: -1, message }
    }
}

/// `Ok` for CUDNN_STATUS_SUCCESS, else the status's text (and cuDNN's last error message) with `call`.
pub(super) fn status(api: &Api, call: &str, s: i32) -> Result<(), Fail> {
    if s == STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: cudnnGetErrorString returns a static NUL-terminated string (or null) for any value.
    let text = unsafe { (api.error_string)(s) };
    let mut message = if text.is_null() {
        format!("{call} failed with cuDNN status {s}")
    } else {
        // SAFETY: non-null, NUL-terminated and static, per cuDNN's documentation.
        format!("{call} failed: {} ({s})", unsafe { CStr::from_ptr(text) }.to_string_lossy())
    };
    if let Some(last) = api.last_error {
        let mut buf = [0 as c_char; 512];
        // SAFETY: the buffer holds buf.len() bytes; cuDNN writes a NUL-terminated message into it.
        unsafe { last(buf.as_mut_ptr(), buf.len()) };
        buf[buf.len() - 1] = 0;
        // SAFETY: NUL-terminated within the buffer (its last byte was set to 0 above).
        let detail = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
        if !detail.trim().is_empty() {
            message = format!("{message}: {}", detail.trim());
        }
    }
    Err(Fail { status: s, message })
}

/// An owned backend descriptor, destroyed on drop.
pub(super) struct Desc {
    pub(super) raw: *mut c_void,
    pub(super) api: &'static Api,
}

// SAFETY: a backend descriptor is a host object; after finalize this module never changes one
// (the variant packs, the only ones used per execution, are used under a mutex), and cuDNN's
// functions may be called from any thread.
unsafe impl Send for Desc {}
// SAFETY: as above: shared use is read-only (get attribute, execute).
unsafe impl Sync for Desc {}

impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: raw came from cudnnBackendCreateDescriptor and is destroyed once.
        let s = unsafe { (self.api.destroy)(self.raw) };
        if let Err(f) = status(self.api, "cudnnBackendDestroyDescriptor", s) {
            log::warn!("{}", f.message);
        }
    }
}

impl Desc {
    pub(super) fn new(api: &'static Api, kind: i32) -> Result<Self, Fail> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: raw is a valid out pointer; kind is a cudnnBackendDescriptorType_t value.
        let s = unsafe { (api.create)(kind, &mut raw) };
        status(api, &format!("cudnnBackendCreateDescriptor(type {kind})"), s)?;
        Ok(Self { raw, api })
    }
    /// Sets `name` to `values`, whose element type must be the C type that `ty` names.
    pub(super) fn set<T>(&self, name: i32, ty: i32, values: &[T]) -> Result<(), Fail> {
        // SAFETY: values points to values.len() readable elements; cuDNN copies them. Every
        // caller pairs T with ty (i64/INT64, i32/enum types, f32/FLOAT, f64/DOUBLE, bool/BOOLEAN,
        // pointers/HANDLE, VOID_PTR and BACKEND_DESCRIPTOR).
        let s = unsafe { (self.api.set)(self.raw, name, ty, values.len() as i64, values.as_ptr().cast()) };
        status(self.api, &format!("cudnnBackendSetAttribute(attribute {name})"), s)
    }
    pub(super) fn set_descs(&self, name: i32, descs: &[*mut c_void]) -> Result<(), Fail> {
        self.set(name, TYPE_BACKEND_DESCRIPTOR, descs)
    }
    pub(super) fn finalize(&self, what: &str) -> Result<(), Fail> {
        // SAFETY: raw is a live descriptor.
        let s = unsafe { (self.api.finalize)(self.raw) };
        status(self.api, &format!("cudnnBackendFinalize({what})"), s)
    }
    /// Reads up to `out.len()` elements of `name` (C type named by `ty`); returns how many there were.
    pub(super) fn get<T>(&self, name: i32, ty: i32, out: &mut [T]) -> Result<usize, Fail> {
        let mut count = 0i64;
        let ptr = if out.is_empty() { std::ptr::null_mut() } else { out.as_mut_ptr().cast() };
        // SAFETY: out has out.len() writable elements of the type ty names (or is null with a
        // requested count of 0, which asks only for the count); count is a valid out pointer.
        let s = unsafe { (self.api.get)(self.raw, name, ty, out.len() as i64, &mut count, ptr) };
        status(self.api, &format!("cudnnBackendGetAttribute(attribute {name})"), s)?;
        Ok(usize::try_from(count).unwrap_or(0))
    }
    pub(super) fn get_i64(&self, name: i32) -> Result<i64, Fail> {
        let mut v = [0i64];
        self.get(name, TYPE_INT64, &mut v)?;
        Ok(v[0])
    }
    /// Fills up to `max` new descriptors of `kind` from the descriptor-valued attribute `name`.
    pub(super) fn get_descs(&self, name: i32, kind: i32, max: usize) -> Result<Vec<Desc>, Fail> {
        let mut descs = (0..max).map(|_| Desc::new(self.api, kind)).collect::<Result<Vec<_>, _>>()?;
        let mut raws: Vec<*mut c_void> = descs.iter().map(|d| d.raw).collect();
        let got = self.get(name, TYPE_BACKEND_DESCRIPTOR, &mut raws)?;
        descs.truncate(got.min(max));
        Ok(descs)
    }
    /// The number of elements of the descriptor-valued attribute `name`.
    pub(super) fn count_descs(&self, name: i32) -> Result<usize, Fail> {
        self.get::<*mut c_void>(name, TYPE_BACKEND_DESCRIPTOR, &mut [])
    }
}
