//! What the custom operators share: the provider a kernel registers for, their CPU kernels'
//! inputs and outputs in f32, errors that name the operator, and the names of dimensions that
//! shape inference cannot know.

use std::marker::PhantomData;

use ort::operator::{
    BoxedKernel, ComputeContext, Kernel, KernelContext, Operator, OperatorInput, OperatorOutput, ShapeInferenceContext,
};
use ort::value::{DynTensorValueType, Shape, SymbolicDimensions, TensorElementType, ValueType};

/// What one operator of the domain is: its name, inputs, shape inference and kernels. The
/// registration ([`Op`]) is the same for every operator.
pub(crate) trait Kind: Send + Sync + 'static {
    /// The operator's name in the domain.
    const NAME: &'static str;
    /// Its inputs, of the operator's element type: this many required, the rest of four optional.
    const REQUIRED: usize;
    /// The output's four axes from the required inputs' shapes (each a 4-D tensor: shape
    /// inference says nothing of the output otherwise) and the attributes. Its element type is
    /// the first input's: ONNX Runtime keeps one inference function for the operators of one
    /// name (the first registered), not each operator's own.
    fn output_axes<'s>(ctx: &ShapeInferenceContext, inputs: &[Dims<'s>]) -> ort::Result<[Axis<'s>; 4]>;
    /// A node's attributes, which its kernels keep.
    type Attrs: Send + 'static;
    /// The node's attributes, checked.
    fn attrs(kctx: &KernelContext<'_>) -> ort::Result<Self::Attrs>;
    /// The CUDA provider's kernel for a node, of float16 (`half`) or float32 values.
    #[cfg(feature = "cuda")]
    fn cuda_kernel<'a>(a: Self::Attrs, half: bool) -> ort::Result<BoxedKernel<'a>>;
}

/// Operator `K` registered for one provider and element type.
pub(crate) struct Op<K> {
    element: TensorElementType,
    cuda: bool,
    kind: PhantomData<fn() -> K>,
}

impl<K: Kind> Op<K> {
    /// `K` for the CUDA provider (`cuda`) or the CPU's, of `element` (float or float16).
    pub(crate) fn new(element: TensorElementType, cuda: bool) -> Self {
        Self { element, cuda, kind: PhantomData }
    }
}

impl<K: Kind> Operator for Op<K>
where
    CpuKernel<K::Attrs>: Kernel,
{
    type Kernel<'attr> = BoxedKernel<'attr>;

    fn name(&self) -> &str {
        K::NAME
    }

    fn execution_provider_type(&self) -> Option<&str> {
        self.cuda.then_some("CUDAExecutionProvider")
    }

    fn inputs(&self) -> impl IntoIterator<Item = OperatorInput> {
        let t = self.element;
        (0..4).map(move |i| if i < K::REQUIRED { OperatorInput::required(t) } else { OperatorInput::optional(t) })
    }

    fn outputs(&self) -> impl IntoIterator<Item = OperatorOutput> {
        [OperatorOutput::required(self.element)]
    }

    fn infer_shape(&self, ctx: &mut ShapeInferenceContext) -> ort::Result<()> {
        let inputs = ctx.inputs();
        let mut shapes = Vec::with_capacity(K::REQUIRED);
        for v in inputs.iter().take(K::REQUIRED) {
            match v {
                ValueType::Tensor { shape, dimension_symbols, .. } if shape.len() == 4 => {
                    shapes.push(Dims { dims: shape, names: dimension_symbols })
                }
                _ => return Ok(()),
            }
        }
        let Some(ValueType::Tensor { ty, .. }) = inputs.first().filter(|_| shapes.len() == K::REQUIRED) else {
            return Ok(());
        };
        let axes = K::output_axes(ctx, &shapes)?;
        let dims = axes.each_ref().map(|a| a.dim);
        let symbols = axes.map(|a| if a.dim >= 0 { String::new() } else { derived_symbol(a.from, &a.how) });
        let out =
            ValueType::Tensor { ty: *ty, shape: Shape::new(dims), dimension_symbols: SymbolicDimensions::new(symbols) };
        ctx.set_output(0, &out)
    }

    fn create_kernel<'attr>(&self, kctx: &KernelContext<'attr>) -> ort::Result<Self::Kernel<'attr>> {
        let a = K::attrs(kctx)?;
        let half = self.element == TensorElementType::Float16;
        if !self.cuda {
            return Ok(Box::new(CpuKernel { a, half }));
        }
        #[cfg(feature = "cuda")]
        return K::cuda_kernel(a, half);
        #[cfg(not(feature = "cuda"))]
        Err(ort::Error::new(format!("{} on CUDA: neural-frame was built without its `cuda` feature", K::NAME)))
    }
}

/// Input `i`'s dims, where it is given; `what` names the operator in an error.
pub(crate) fn input_dims(ctx: &ComputeContext, i: usize, what: &str) -> ort::Result<Option<Vec<i64>>> {
    let Some(v) = ctx.input(i)? else { return Ok(None) };
    let v = v.downcast::<DynTensorValueType>()?;
    match v.dtype() {
        ValueType::Tensor { shape, .. } => Ok(Some(shape.to_vec())),
        other => Err(ort::Error::new(format!("{what}: input {i} is {other}, not a tensor"))),
    }
}

/// The symbolic name of an output dimension that shape inference cannot know: the input's
/// symbol `from` and what the operator does to it (`how`), so that two outputs of one size
/// share a name and outputs of different sizes do not (ONNX Runtime's memory planner takes
/// dims of one name to be equal, and reuses one value's buffer for the other: a fixed name for
/// every output made two DepthToSpace stages share a buffer too small for the second); a name
/// of its own where the input's dimension has none.
fn derived_symbol(from: &str, how: &str) -> String {
    static FRESH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    if from.is_empty() {
        format!("neural_frame_unknown_{}", FRESH.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    } else {
        format!("{from}{how}")
    }
}

/// A required input's shape at shape inference: its dims (-1 where not known) and their
/// symbolic names.
pub(crate) struct Dims<'a> {
    pub(crate) dims: &'a [i64],
    names: &'a [String],
}

impl<'a> Dims<'a> {
    /// Axis `axis`'s symbolic name ("" where it has none).
    pub(crate) fn name(&self, axis: usize) -> &'a str {
        self.names.get(axis).map_or("", String::as_str)
    }
}

/// One axis of the output at shape inference: its size (-1 where not known) and, for a size
/// not known, the input's symbol it follows from and how ([`derived_symbol`]).
pub(crate) struct Axis<'a> {
    pub(crate) dim: i64,
    pub(crate) from: &'a str,
    pub(crate) how: String,
}

/// A kernel's run with every error starting with `prefix()` (the operator's name: the fused
/// model's fallback knows its own errors by it, `graph::prepare::owns_error`), and a panic
/// turned into one (ort's kernel trampoline does not catch it). The prefix is made only on an
/// error: a run that succeeds (every frame's) allocates nothing here.
pub(crate) fn guarded(prefix: impl Fn() -> String, run: impl FnOnce() -> ort::Result<()>) -> ort::Result<()> {
    let named = |m: &dyn std::fmt::Display| ort::Error::new(format!("{} {m}", prefix()));
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if e.to_string().starts_with(&prefix()) => Err(e),
        Ok(Err(e)) => Err(named(&e)),
        Err(panic) => Err(named(&panic_text(panic.as_ref()))),
    }
}

/// An operator's CPU kernel: its attributes `A`, float16 or float32 values (`half`), computed in
/// f32 (the reference the rewrites are proven against).
pub(crate) struct CpuKernel<A> {
    pub(crate) a: A,
    pub(crate) half: bool,
}

impl<A> CpuKernel<A> {
    /// Input `i` as f32, if given.
    pub(crate) fn floats(&self, ctx: &ComputeContext, i: usize) -> ort::Result<Option<Vec<f32>>> {
        input_floats(ctx, i, self.half)
    }
}

/// What a caught panic says (its message, where it has one).
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic")
}

/// A CPU kernel's input `i` as f32 (float16 when `half`, else float32), if given.
pub(crate) fn input_floats(ctx: &ComputeContext, i: usize, half: bool) -> ort::Result<Option<Vec<f32>>> {
    let Some(v) = ctx.input(i)? else { return Ok(None) };
    Ok(Some(if half {
        v.try_extract_tensor::<half::f16>()?.1.iter().map(|h| h.to_f32()).collect()
    } else {
        v.try_extract_tensor::<f32>()?.1.to_vec()
    }))
}

/// A CPU kernel's output 0 of `dims`, written from f32 values (rounded to float16 when `half`).
pub(crate) fn write_output(ctx: &ComputeContext, dims: Vec<i64>, half: bool, y: &[f32]) -> ort::Result<()> {
    let mut out = ctx.output(0, dims)?.ok_or_else(|| ort::Error::new("no output 0"))?;
    if half {
        for (d, v) in out.try_extract_tensor_mut::<half::f16>()?.1.iter_mut().zip(y) {
            *d = half::f16::from_f32(*v);
        }
    } else {
        out.try_extract_tensor_mut::<f32>()?.1.copy_from_slice(y);
    }
    Ok(())
}
