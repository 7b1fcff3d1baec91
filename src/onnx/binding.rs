//! Binding memory that lives elsewhere (a mapped Vulkan buffer, an imported
//! CUDA pointer) as a session's input and output, through ONNX Runtime's C API.
//!
//! `ort`'s safe `IoBinding::bind_input` deep-copies a tensor made over borrowed
//! memory (and that copy deadlocks in rc.15), so this binds `OrtValue`s made
//! with `CreateTensorWithDataAsOrtValue` directly: ONNX Runtime reads the input
//! and writes the output in place. Tests prove that by poisoning the output
//! memory and reading it back through Vulkan.

use std::ffi::{CStr, CString, c_void};
use std::ptr::NonNull;

use ort::AsPointer;
use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::Session;
use ort::sys::{OrtIoBinding, OrtStatusPtr, OrtValue};

use crate::error::{Error, Result};
use crate::onnx::model::{ModelContract, TensorKind};

/// Turns an `OrtStatus` into `Ok` or [`Error::Onnx`], releasing it.
pub(crate) fn status(what: &str, s: OrtStatusPtr) -> Result<()> {
    if s.0.is_null() {
        return Ok(());
    }
    let api = ort::api();
    // SAFETY: s is a live status; the message is a NUL-terminated string owned by it.
    let message = unsafe { CStr::from_ptr((api.GetErrorMessage)(s.0)) }.to_string_lossy().into_owned();
    // SAFETY: released once, after the message was copied.
    unsafe { (api.ReleaseStatus)(s.0) };
    Err(Error::Onnx { what: what.to_string(), message })
}

/// Where bound memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Host memory (the host backend: mapped host-visible Vulkan buffers).
    Host,
    /// CUDA device memory on the device with this ordinal.
    Cuda(i32),
}

impl Placement {
    fn memory_info(self) -> Result<MemoryInfo<'static>> {
        let info = match self {
            Placement::Host => MemoryInfo::new(AllocationDevice::CPU, 0, AllocatorType::Device, MemoryType::Default),
            Placement::Cuda(id) => {
                MemoryInfo::new(AllocationDevice::CUDA, id, AllocatorType::Device, MemoryType::Default)
            }
        };
        info.map_err(|e| Error::onnx("creating memory info", e))
    }
}

/// An `OrtValue` over memory owned elsewhere.
struct RawValue(NonNull<OrtValue>);

impl Drop for RawValue {
    fn drop(&mut self) {
        // SAFETY: the value was created by CreateTensorWithDataAsOrtValue and is released once;
        // releasing it does not free the memory it points at.
        unsafe { (ort::api().ReleaseValue)(self.0.as_ptr()) };
    }
}

/// A session's input and output bound to external memory. Fields are in
/// teardown order: the binding, then the values, then their memory info.
pub struct BoundTensors {
    binding: NonNull<OrtIoBinding>,
    _input: RawValue,
    _output: RawValue,
    _info: MemoryInfo<'static>,
    placement: Placement,
}

// SAFETY: the binding and values are plain handles; ONNX Runtime allows using them from any thread
// as long as calls are not concurrent, which &mut self / single ownership ensures.
unsafe impl Send for BoundTensors {}

fn value(
    info: &MemoryInfo,
    kind: TensorKind,
    width: u32,
    height: u32,
    data: *mut c_void,
    len: u64,
) -> Result<RawValue> {
    let shape = kind.shape(width, height);
    if len < kind.bytes(width, height) {
        return Err(Error::InvalidArgument(format!(
            "{len} bytes of memory for a {} tensor of {width}×{height} ({} bytes)",
            kind.describe(),
            kind.bytes(width, height)
        )));
    }
    let mut out: *mut OrtValue = std::ptr::null_mut();
    // SAFETY: data covers at least the tensor's bytes for the value's lifetime (the caller's
    // contract in BoundTensors::new); shape and out are valid for the call.
    status("creating a tensor over external memory", unsafe {
        (ort::api().CreateTensorWithDataAsOrtValue)(
            info.ptr(),
            data,
            kind.bytes(width, height) as usize,
            shape.as_ptr(),
            shape.len(),
            kind.element(),
            &mut out,
        )
    })?;
    NonNull::new(out).map(RawValue).ok_or_else(|| Error::onnx("creating a tensor", "null value"))
}

impl BoundTensors {
    /// Binds `input` and `output` (device or host addresses, as `placement` says)
    /// as the session's input and output for a W×H frame.
    ///
    /// # Safety
    /// `input` must point to `input_len` bytes and `output` to `output_len`
    /// bytes of memory of the given placement, valid (and not freed or
    /// remapped) for as long as the returned value lives.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn new(
        session: &Session,
        contract: &ModelContract,
        width: u32,
        height: u32,
        placement: Placement,
        input: *mut c_void,
        input_len: u64,
        output: *mut c_void,
        output_len: u64,
    ) -> Result<Self> {
        let info = placement.memory_info()?;
        let s = contract.scale;
        let in_value = value(&info, contract.input, width, height, input, input_len)?;
        let out_value = value(&info, contract.output, width * s, height * s, output, output_len)?;
        let api = ort::api();
        let mut binding: *mut OrtIoBinding = std::ptr::null_mut();
        // SAFETY: the session is live; binding is a valid out pointer.
        status("creating an IoBinding", unsafe { (api.CreateIoBinding)(session.ptr().cast_mut(), &mut binding) })?;
        let binding = NonNull::new(binding).ok_or_else(|| Error::onnx("creating an IoBinding", "null binding"))?;
        let bound = Self { binding, _input: in_value, _output: out_value, _info: info, placement };
        let name =
            |n: &str| CString::new(n).map_err(|_| Error::InvalidArgument(format!("tensor name {n:?} has a NUL")));
        let in_name = name(&contract.input_name)?;
        let out_name = name(&contract.output_name)?;
        // SAFETY: binding and value are live; BindInput does not copy a value already on the
        // session's device (checked by the pipeline tests).
        status("binding the input", unsafe {
            (api.BindInput)(bound.binding.as_ptr(), in_name.as_ptr(), bound._input.0.as_ptr())
        })?;
        // SAFETY: as above; a pre-allocated output is written in place.
        status("binding the output", unsafe {
            (api.BindOutput)(bound.binding.as_ptr(), out_name.as_ptr(), bound._output.0.as_ptr())
        })?;
        Ok(bound)
    }

    /// Runs the session on the bound memory. With the CUDA EP the run is
    /// enqueued on the EP's stream; unless `options` disable it, ONNX Runtime
    /// synchronises that stream before returning.
    pub fn run(&mut self, session: &Session, options: Option<&ort::session::RunOptions>) -> Result<()> {
        let options = options.map_or(std::ptr::null(), |o| o.ptr());
        // SAFETY: session, binding and options are live; &mut self serialises runs of this binding.
        status("running the model", unsafe {
            (ort::api().RunWithBinding)(session.ptr().cast_mut(), options, self.binding.as_ptr())
        })
    }

    /// Where the bound memory lives.
    pub fn placement(&self) -> Placement {
        self.placement
    }
}

impl Drop for BoundTensors {
    fn drop(&mut self) {
        // SAFETY: released once; the values it refers to are released after it (field order).
        unsafe { (ort::api().ReleaseIoBinding)(self.binding.as_ptr()) };
    }
}
