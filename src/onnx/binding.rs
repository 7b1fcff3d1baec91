//! Binding memory that lives elsewhere (a mapped Vulkan buffer, an imported
//! CUDA pointer, the caller's own buffer) as a session's input and output,
//! through ONNX Runtime's C API.
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
use crate::onnx::tensor::TensorKind;

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
pub(crate) enum Placement {
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

/// An `OrtValue` over memory owned elsewhere: a `kind` tensor of one W×H image.
/// Fields in teardown order: the value, then its memory info.
pub(crate) struct TensorValue {
    raw: NonNull<OrtValue>,
    _info: MemoryInfo<'static>,
    id: u64,
}

// SAFETY: an OrtValue is a plain handle; it is only used through &self by one
// thread at a time (the context's), and ONNX Runtime allows that from any thread.
unsafe impl Send for TensorValue {}

impl TensorValue {
    /// A tensor over `len` bytes at `data` for a W×H image of `kind`.
    ///
    /// # Safety
    /// `data` must point to at least `len` bytes of memory of the given
    /// placement that stay valid (not freed or remapped) for as long as the
    /// value, or any binding it is bound to, may be used in a run.
    pub(crate) unsafe fn new(
        placement: Placement,
        kind: TensorKind,
        width: u32,
        height: u32,
        data: *mut c_void,
        len: u64,
    ) -> Result<Self> {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let info = placement.memory_info()?;
        let shape = kind.shape(width, height);
        let bytes = kind.bytes(width, height);
        if len < bytes {
            return Err(Error::internal(format!(
                "{len} bytes of memory for a {} tensor of {width}×{height} ({bytes} bytes)",
                kind.describe()
            )));
        }
        let mut out: *mut OrtValue = std::ptr::null_mut();
        // SAFETY: data covers at least the tensor's bytes for the value's lifetime (caller's
        // contract); shape and out are valid for the call.
        status("creating a tensor over external memory", unsafe {
            (ort::api().CreateTensorWithDataAsOrtValue)(
                info.ptr(),
                data,
                bytes as usize,
                shape.as_ptr(),
                shape.len(),
                kind.element_type(),
                &mut out,
            )
        })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::onnx("creating a tensor", "null value"))?;
        Ok(Self { raw, _info: info, id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed) })
    }
}

impl Drop for TensorValue {
    fn drop(&mut self) {
        // SAFETY: the value was created by CreateTensorWithDataAsOrtValue and is released once;
        // releasing it does not free the memory it points at.
        unsafe { (ort::api().ReleaseValue)(self.raw.as_ptr()) };
    }
}

/// A session's IoBinding, with the ids of the values bound to it. Outputs that
/// are not images (`device_outputs`) are bound to the session's device: ONNX
/// Runtime allocates them there, and nothing copies them to the host.
pub(crate) struct Binding {
    raw: NonNull<OrtIoBinding>,
    input_names: Vec<CString>,
    output_names: Vec<CString>,
    device_outputs: Vec<CString>,
    placement: Placement,
    bound: Vec<u64>,
}

// SAFETY: the binding is a plain handle; &mut self serialises its use, and ONNX Runtime
// allows using it from any thread as long as calls are not concurrent.
unsafe impl Send for Binding {}

impl Binding {
    /// An empty IoBinding of `session` for the named inputs and outputs (in the order
    /// [`bind`](Self::bind) takes their values), and outputs left to ONNX Runtime on
    /// `placement`'s device.
    pub(crate) fn new(
        session: &Session,
        (inputs, outputs): (&[&str], &[&str]),
        device_outputs: &[&str],
        placement: Placement,
    ) -> Result<Self> {
        let name =
            |n: &&str| CString::new(*n).map_err(|_| Error::InvalidArgument(format!("tensor name {n:?} has a NUL")));
        let input_names = inputs.iter().map(name).collect::<Result<Vec<_>>>()?;
        let output_names = outputs.iter().map(name).collect::<Result<Vec<_>>>()?;
        let device_outputs = device_outputs.iter().map(name).collect::<Result<Vec<_>>>()?;
        let mut raw: *mut OrtIoBinding = std::ptr::null_mut();
        // SAFETY: the session is live; raw is a valid out pointer.
        status("creating an IoBinding", unsafe { (ort::api().CreateIoBinding)(session.ptr().cast_mut(), &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error::onnx("creating an IoBinding", "null binding"))?;
        Ok(Self { raw, input_names, output_names, device_outputs, placement, bound: Vec::new() })
    }

    /// Binds `inputs` and `outputs`, one value per name given to [`new`](Self::new),
    /// in that order (a cheap map update in ONNX Runtime; nothing is copied: a value
    /// already on the session's device is used in place, and a pre-allocated output
    /// is written in place).
    pub(crate) fn bind(&mut self, inputs: &[&TensorValue], outputs: &[&TensorValue]) -> Result<()> {
        if inputs.len() != self.input_names.len() || outputs.len() != self.output_names.len() {
            return Err(Error::internal(format!(
                "binding {} inputs and {} outputs to a model of {} and {}",
                inputs.len(),
                outputs.len(),
                self.input_names.len(),
                self.output_names.len()
            )));
        }
        if self.bound.iter().copied().eq(inputs.iter().chain(outputs).map(|v| v.id)) {
            return Ok(());
        }
        let api = ort::api();
        self.bound.clear();
        for (name, value) in self.input_names.iter().zip(inputs) {
            // SAFETY: binding and value are live; BindInput keeps its own reference to the value.
            status("binding an input", unsafe {
                (api.BindInput)(self.raw.as_ptr(), name.as_ptr(), value.raw.as_ptr())
            })?;
        }
        for (name, value) in self.output_names.iter().zip(outputs) {
            // SAFETY: as above.
            status("binding an output", unsafe {
                (api.BindOutput)(self.raw.as_ptr(), name.as_ptr(), value.raw.as_ptr())
            })?;
        }
        if !self.device_outputs.is_empty() {
            let info = self.placement.memory_info()?;
            for name in &self.device_outputs {
                // SAFETY: binding and memory info are live; ONNX Runtime copies what it needs of the info.
                status("binding an output to the device", unsafe {
                    (api.BindOutputToDevice)(self.raw.as_ptr(), name.as_ptr(), info.ptr())
                })?;
            }
        }
        self.bound = inputs.iter().chain(outputs).map(|v| v.id).collect();
        Ok(())
    }

    /// Runs the session on the bound values. With the CUDA EP the run is
    /// enqueued on the EP's stream; unless `options` disable it, ONNX Runtime
    /// synchronises that stream before returning.
    ///
    /// # Safety
    /// The memory behind the bound values must still be valid, and no other
    /// work may write the input or touch the output while the run executes.
    pub(crate) unsafe fn run(&mut self, session: &Session, options: Option<&ort::session::RunOptions>) -> Result<()> {
        if self.bound.is_empty() {
            return Err(Error::internal("a run with nothing bound"));
        }
        let options = options.map_or(std::ptr::null(), |o| o.ptr());
        // SAFETY: session, binding and options are live; the bound memory is valid (caller's contract).
        status("running the model", unsafe {
            (ort::api().RunWithBinding)(session.ptr().cast_mut(), options, self.raw.as_ptr())
        })
        .map_err(crate::onnx::model::explain_run_error)
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        // SAFETY: released once; the values it refers to keep their own references.
        unsafe { (ort::api().ReleaseIoBinding)(self.raw.as_ptr()) };
    }
}
