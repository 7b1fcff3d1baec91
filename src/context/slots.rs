//! A ring slot's own memory: the model's input and output tensors (shared with
//! the engine) and the frame's alpha, sized for one frame size, with every
//! device limit checked before anything is allocated.

use std::sync::Arc;

use ash::vk;

use crate::cuda::CudaDevice;
use crate::error::{Error, Result};
use crate::interop::SharedBuffer;
use crate::onnx::{Binding, ModelContract, Placement, TensorKind, TensorValue};
use crate::vulkan::sync::Fence;
use crate::vulkan::{Buffer, BufferMemory, Device};

/// Sizes of one frame's buffers, derived with checked arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameSize {
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) out_width: u32,
    pub(crate) out_height: u32,
    pub(crate) input_bytes: u64,
    pub(crate) output_bytes: u64,
    pub(crate) alpha_bytes: u64,
    /// The largest of the model's extra input and output tensors, and all of them together.
    pub(crate) extra_max: u64,
    pub(crate) extra_total: u64,
}

impl FrameSize {
    /// The sizes for a `width × height` input, or an error naming what overflows.
    pub(crate) fn new(contract: &ModelContract, width: u32, height: u32) -> Result<Self> {
        let s = contract.scale;
        if width == 0 || height == 0 {
            return Err(Error::InvalidArgument(format!("a frame of {width}×{height} pixels is empty")));
        }
        let (out_width, out_height) = s.apply(width, height).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a {width}×{height} frame at {s} gives an output whose size does not fit in 32 bits"
            ))
        })?;
        let extras = contract.extra_inputs.iter().map(|t| t.kind.buffer_bytes(width, height));
        let extras: Vec<u64> =
            extras.chain(contract.extra_outputs.iter().map(|t| t.kind.buffer_bytes(out_width, out_height))).collect();
        Ok(Self {
            width,
            height,
            out_width,
            out_height,
            input_bytes: contract.input.buffer_bytes(width, height),
            output_bytes: contract.output.buffer_bytes(out_width, out_height),
            alpha_bytes: 4 * width as u64 * height as u64,
            extra_max: extras.iter().copied().max().unwrap_or(0),
            extra_total: extras.iter().sum(),
        })
    }

    /// Checks the sizes against the device: image dimensions, the storage
    /// buffer range the passes address, the largest allocation, and the heap
    /// that `slots` slots draw from. The error names the limit.
    pub(crate) fn check(&self, device: &Device, slots: usize, placement: Placement) -> Result<()> {
        crate::vulkan::caps::check_image_size(device, self.width, self.height)?;
        crate::vulkan::caps::check_image_size(device, self.out_width, self.out_height).map_err(|_| {
            Error::InvalidArgument(format!(
                "a {}×{} frame gives a {}×{} output, beyond what \"{}\" allows (maxImageDimension2D = {})",
                self.width,
                self.height,
                self.out_width,
                self.out_height,
                device.info().name,
                device.limits().max_image_dimension2_d
            ))
        })?;
        let range = device.limits().max_storage_buffer_range as u64;
        let limit = |what: &str, bytes: u64, limit: u64, name: &str| -> Result<()> {
            if bytes <= limit {
                return Ok(());
            }
            Err(Error::Unsupported {
                device: device.info().name.clone(),
                what: format!(
                    "the {what} of a {}×{} frame: {bytes} bytes, over {name} = {limit} bytes",
                    self.width, self.height
                ),
                remedy: "use a smaller frame, or tiles (ContextBuilder::tiling, --tile WxH)".into(),
            })
        };
        limit("model's input tensor", self.input_bytes, range, "maxStorageBufferRange")?;
        limit("model's output tensor", self.output_bytes, range, "maxStorageBufferRange")?;
        limit("model's output tensor", self.output_bytes, device.max_allocation(), "maxMemoryAllocationSize")?;
        limit("model's largest extra tensor", self.extra_max, range, "maxStorageBufferRange")?;
        limit("model's largest extra tensor", self.extra_max, device.max_allocation(), "maxMemoryAllocationSize")?;
        let flags = match placement {
            Placement::Cuda(_) => vk::MemoryPropertyFlags::DEVICE_LOCAL,
            Placement::Host => vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        };
        if let Some(t) = device.memory_type(u32::MAX, flags) {
            let total = (self.input_bytes + self.output_bytes + self.alpha_bytes + self.extra_total)
                .saturating_mul(slots as u64);
            limit(&format!("buffers of {slots} slots"), total, device.heap_size(t), "the memory heap's size")?;
        }
        Ok(())
    }
}

/// One of a slot's tensors for the model's extra inputs and outputs. Fields in
/// teardown order: the value, then the memory it points at.
pub(crate) struct ExtraTensor {
    pub(crate) value: TensorValue,
    pub(crate) buffer: SharedBuffer,
    pub(crate) bytes: u64,
}

/// A slot's buffers for one frame size. Fields in teardown order: the tensor
/// values (the extra tensors' own first), then the memory they point at.
pub(crate) struct SlotTensors {
    pub(crate) input_value: TensorValue,
    pub(crate) output_value: TensorValue,
    pub(crate) extra_inputs: Vec<ExtraTensor>,
    pub(crate) extra_outputs: Vec<ExtraTensor>,
    pub(crate) input: SharedBuffer,
    pub(crate) output: SharedBuffer,
    pub(crate) alpha: Buffer,
    pub(crate) size: FrameSize,
}

/// One ring slot: the session's binding for it, its buffers, and the fences of
/// its frame's two batches (the first batch on queue 0, the post pass).
pub(crate) struct Slot {
    pub(crate) binding: Binding,
    pub(crate) tensors: Option<SlotTensors>,
    pub(crate) fences: [Fence; 2],
}

const USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

impl SlotTensors {
    /// Binds `input` and `output` (the slot's own, or a caller's buffer taken as it
    /// is) with the slot's extra tensors to `binding`.
    pub(crate) fn bind(&self, binding: &mut Binding, input: &TensorValue, output: &TensorValue) -> Result<()> {
        if self.extra_inputs.is_empty() && self.extra_outputs.is_empty() {
            return binding.bind(&[input], &[output]);
        }
        let inputs: Vec<&TensorValue> =
            std::iter::once(input).chain(self.extra_inputs.iter().map(|t| &t.value)).collect();
        let outputs: Vec<&TensorValue> =
            std::iter::once(output).chain(self.extra_outputs.iter().map(|t| &t.value)).collect();
        binding.bind(&inputs, &outputs)
    }

    /// Allocates a slot's buffers (checked by [`FrameSize::check`] first).
    pub(crate) fn new(
        device: &Arc<Device>,
        cuda: Option<&Arc<CudaDevice>>,
        contract: &ModelContract,
        size: FrameSize,
    ) -> Result<Self> {
        let input = SharedBuffer::new(device, cuda, size.input_bytes, USAGE)?;
        let output = SharedBuffer::new(device, cuda, size.output_bytes, USAGE)?;
        let alpha = Buffer::new(device, size.alpha_bytes, USAGE, BufferMemory::DeviceLocal)?;
        let value = |buffer: &SharedBuffer, kind: TensorKind, w: u32, h: u32, len: u64| -> Result<TensorValue> {
            let (placement, ptr) = buffer.tensor_memory()?;
            // SAFETY: ptr is the buffer's CUDA mapping or host mapping of `len` bytes, which lives
            // in this struct after the value (field order), so it outlives it.
            unsafe { TensorValue::new(placement, kind, w, h, ptr, len) }
        };
        let input_value = value(&input, contract.input, size.width, size.height, size.input_bytes)?;
        let output_value = value(&output, contract.output, size.out_width, size.out_height, size.output_bytes)?;
        let extra = |kind: TensorKind, (w, h): (u32, u32)| -> Result<ExtraTensor> {
            let bytes = kind.buffer_bytes(w, h);
            let buffer = SharedBuffer::new(device, cuda, bytes, USAGE)?;
            let value = value(&buffer, kind, w, h, bytes)?;
            Ok(ExtraTensor { value, buffer, bytes })
        };
        let (frame, out) = ((size.width, size.height), (size.out_width, size.out_height));
        let extra_inputs = contract.extra_inputs.iter().map(|t| extra(t.kind, frame)).collect::<Result<_>>()?;
        let extra_outputs = contract.extra_outputs.iter().map(|t| extra(t.kind, out)).collect::<Result<_>>()?;
        Ok(Self { input_value, output_value, extra_inputs, extra_outputs, input, output, alpha, size })
    }
}
