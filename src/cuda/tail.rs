//! The fused tail: the frame's post pass done by the model's last kernel.
//!
//! Where a model ends in the fused rewrite's DepthToSpace (`src/onnx/shuffle.rs`) and
//! a frame's output takes a CUDA post pass, the post kernel reads the whole output
//! tensor once more after the model wrote it (about 50 MB of fp16 for a 4K frame,
//! then 33 MB of RGBA8 written). With the fused tail the DepthToSpace kernel
//! (`nf_depth_to_space` in `src/cuda/tail.cu`) converts and stores the frame's
//! pixels itself, beside the tensor it writes as always (so that whatever reads the
//! tensor after the frame still finds it), and no post kernel runs.
//!
//! The operator cannot know which frame it runs for, and a captured CUDA graph
//! replays its launch without asking. So the hand-over goes through device memory:
//!
//! - The engine registers a slot's output tensor here ([`Registration`]): its
//!   pointer, its shape, and a descriptor in device memory (a [`TailPost`](super::params::TailPost)).
//! - The operator's CUDA kernel, when its output is a registered tensor of the
//!   registered shape, passes the descriptor to the kernel ([`claim`]), and counts
//!   the claim, which tells the engine that the run's kernel reads the descriptor.
//! - Before each run that should write the frame itself, the engine writes the
//!   descriptor (the post pass's parameters, active) on the model's stream, and
//!   clears it after the run (also when the run fails). Every other run (another
//!   frame's route, the model alone) finds it inactive and writes the tensor only.
//!
//! Off unless `NEURAL_FRAME_FUSED_TAIL=1`: correct on the H100, and its kernel (0.093 ms at
//! 540p ×4) now a little faster there than the two it replaces (0.055 + 0.048), but the ring
//! is slower with it: the post kernel ran beside the next frame's model, while the tail's
//! work is the model's own (`bench/results/2026-12-06-h100-s14`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A registered output tensor.
#[derive(Debug)]
struct Entry {
    /// Device pointer to the descriptor.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    descriptor: u64,
    /// The tensor's shape, NCHW `[1, c, h, w]`.
    dims: [i64; 4],
    /// `ELEMENT_F32` or `ELEMENT_F16`.
    element: u32,
    /// Runs of the operator that passed the descriptor to its kernel.
    claims: AtomicU64,
}

/// Registered tensors by device pointer.
static TAILS: Mutex<Option<HashMap<u64, Arc<Entry>>>> = Mutex::new(None);

/// A slot's output tensor, registered while this lives.
#[derive(Debug)]
pub(crate) struct Registration {
    key: u64,
    entry: Arc<Entry>,
}

impl Registration {
    /// Registers the tensor at `tensor` of NCHW shape `dims` and element type `element`,
    /// with the descriptor at device pointer `descriptor`, which must stay allocated
    /// while the registration lives (and while any graph captured with it may run).
    /// A registration of the same pointer made earlier is replaced.
    pub(crate) fn new(tensor: u64, dims: [i64; 4], element: u32, descriptor: u64) -> Self {
        let entry = Arc::new(Entry { descriptor, dims, element, claims: AtomicU64::new(0) });
        let mut map = TAILS.lock().unwrap_or_else(PoisonError::into_inner);
        map.get_or_insert_with(HashMap::new).insert(tensor, Arc::clone(&entry));
        Self { key: tensor, entry }
    }

    /// Whether this registers `tensor` with that shape and element type.
    pub(crate) fn is(&self, tensor: u64, dims: [i64; 4], element: u32) -> bool {
        self.key == tensor && self.entry.dims == dims && self.entry.element == element
    }

    /// How many runs have passed the descriptor to the kernel so far.
    pub(crate) fn claims(&self) -> u64 {
        self.entry.claims.load(Ordering::SeqCst)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut map = TAILS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(map) = map.as_mut()
            && map.get(&self.key).is_some_and(|e| Arc::ptr_eq(e, &self.entry))
        {
            map.remove(&self.key);
        }
    }
}

/// The descriptor for a DepthToSpace run writing `tensor` of NCHW shape `dims` and element
/// type `element`, counting the claim; 0 where that tensor is not registered with that shape.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn claim(tensor: u64, dims: &[i64], element: u32) -> u64 {
    let map = TAILS.lock().unwrap_or_else(PoisonError::into_inner);
    match map.as_ref().and_then(|m| m.get(&tensor)) {
        Some(e) if e.dims[..] == *dims && e.element == element => {
            e.claims.fetch_add(1, Ordering::SeqCst);
            e.descriptor
        }
        _ => 0,
    }
}

/// 0: as `NEURAL_FRAME_FUSED_TAIL` says; 1: off; 2: on (the GPU tests set it).
pub(crate) static FORCE: AtomicU8 = AtomicU8::new(0);

/// Whether contexts made now use the fused tail: `NEURAL_FRAME_FUSED_TAIL=1` turns it on.
pub(crate) fn enabled() -> bool {
    match FORCE.load(Ordering::SeqCst) {
        1 => false,
        2 => true,
        _ => std::env::var("NEURAL_FRAME_FUSED_TAIL").is_ok_and(|v| v == "1"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registered tensor is claimed only with its own shape and element type, each
    /// claim counted; a replaced registration's drop leaves the new one; a dropped one
    /// is claimed no more.
    #[test]
    fn claims_follow_registrations() {
        // Pointers no device allocation has here (the tests share the table).
        let (ptr, desc) = (0xdead_0000_0000u64, 0xbeef_0000_0000u64);
        let dims = [1, 3, 2160, 3840];
        let r = Registration::new(ptr, dims, 1, desc);
        assert!(r.is(ptr, dims, 1) && !r.is(ptr, dims, 0) && !r.is(ptr + 2, dims, 1));
        assert_eq!(claim(ptr, &dims, 1), desc);
        assert_eq!(claim(ptr, &[1, 3, 2160, 3841], 1), 0, "another shape");
        assert_eq!(claim(ptr, &[2, 3, 2160, 3840], 1), 0, "a batch");
        assert_eq!(claim(ptr, &dims, 0), 0, "another element type");
        assert_eq!(claim(ptr + 2, &dims, 1), 0, "another tensor");
        assert_eq!(r.claims(), 1);
        let newer = Registration::new(ptr, dims, 1, desc + 256);
        drop(r);
        assert_eq!(claim(ptr, &dims, 1), desc + 256, "the newer registration stays");
        assert_eq!(newer.claims(), 1);
        drop(newer);
        assert_eq!(claim(ptr, &dims, 1), 0);
    }
}
