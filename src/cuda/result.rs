//! Checked wrappers around the CUDA driver: one place that turns a `CUresult`
//! into an [`Error`] naming the call, and the driver's loading and start-up.

use std::ffi::CStr;
use std::sync::OnceLock;

use cudarc::driver::sys;

use crate::error::{Error, Result};

/// Turns a `CUresult` into `Ok` or an [`Error::Cuda`] naming `call`.
pub(crate) fn check(call: &'static str, r: sys::CUresult) -> Result<()> {
    check_ctx(call, r, "")
}

/// Like [`check`], with a note on what was being done.
pub(crate) fn check_ctx(call: &'static str, r: sys::CUresult, context: &str) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut name: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static string or returns an error.
    let ok = unsafe { sys::cuGetErrorName(r, &mut name) } == sys::CUresult::CUDA_SUCCESS;
    let name = if ok && !name.is_null() {
        // SAFETY: the driver returned a NUL-terminated static string.
        unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
    } else {
        format!("{r:?}")
    };
    Err(Error::Cuda {
        call,
        code: r as u32,
        name,
        context: if context.is_empty() { String::new() } else { format!(": {context}") },
    })
}

/// Loads `libcuda` and calls `cuInit` once. Errors say why CUDA cannot be used.
pub fn init() -> Result<()> {
    static INIT: OnceLock<Result<(), String>> = OnceLock::new();
    INIT.get_or_init(|| {
        // SAFETY: only tries to open the library; no symbol is called.
        if !unsafe { sys::is_culib_present() } {
            let library = if cfg!(windows) { "nvcuda.dll" } else { "libcuda.so.1" };
            return Err(format!("no NVIDIA driver: {library} could not be loaded"));
        }
        // SAFETY: cuInit has no preconditions; flags must be 0.
        let r = unsafe { sys::cuInit(0) };
        check("cuInit", r).map_err(|e| match r {
            sys::CUresult::CUDA_ERROR_NO_DEVICE => "the NVIDIA driver reports no CUDA device".to_string(),
            _ => e.to_string(),
        })
    })
    .clone()
    .map_err(|reason| Error::CudaUnavailable { reason })
}

/// A CUDA device as listed by the driver.
#[derive(Debug, Clone)]
pub struct CudaDeviceInfo {
    /// The CUDA ordinal.
    pub ordinal: i32,
    /// `cuDeviceGetName`.
    pub name: String,
    /// `cuDeviceGetUuid_v2`.
    pub uuid: [u8; 16],
}

/// Lists the CUDA devices with their UUIDs.
pub fn devices() -> Result<Vec<CudaDeviceInfo>> {
    init()?;
    let mut count = 0;
    // SAFETY: count is a valid out pointer; the driver is initialised.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut count) })?;
    (0..count)
        .map(|ordinal| {
            let mut dev: sys::CUdevice = 0;
            // SAFETY: ordinal < count; dev is a valid out pointer.
            check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut dev, ordinal) })?;
            let mut name = [0 as std::ffi::c_char; 256];
            // SAFETY: the buffer holds 256 chars; the driver NUL-terminates.
            check("cuDeviceGetName", unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), 256, dev) })?;
            // SAFETY: NUL-terminated by the driver.
            let name = unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
            // SAFETY: CUuuid is plain bytes; all-zero is a valid value.
            let mut uuid: sys::CUuuid = unsafe { std::mem::zeroed() };
            // SAFETY: uuid is a valid out pointer.
            check("cuDeviceGetUuid_v2", unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, dev) })?;
            let bytes: [u8; 16] = uuid.bytes.map(|b| b as u8);
            Ok(CudaDeviceInfo { ordinal, name, uuid: bytes })
        })
        .collect()
}
