//! A frame's plan: from the route each side of a frame takes, which engine
//! runs the model, where the post pass waits and what the caller's submission
//! waits for, everything else follows — which Vulkan batches exist, what each
//! waits for and signals, what the engine enqueues, and who signals "input
//! consumed" and "output ready". A pure function with no FFI, table-tested
//! without a GPU like `ring.rs`; `frame.rs` carries the plan out.
//!
//! The timelines (`backend::Timelines`): `to_model = n` says frame n's input
//! tensors are written (a Vulkan batch signals it, the engine waits for it),
//! `model_done = n` that the model is done (the engine signals it for a Vulkan
//! post pass), `input_consumed` and `output_ready` are the caller's.

use crate::context::PostWait;

/// Who signals a timeline for a frame: a Vulkan pass, or the engine (the
/// CUDA stream, or the host on the CPU backend) when the model reads or writes
/// the caller's buffer itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signaller {
    Vulkan,
    Engine,
}

/// How one side of a frame (the frame's input, with the model's extra inputs;
/// or its output, with the extra outputs) is converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Vulkan compute passes.
    Vulkan,
    /// CUDA kernels on the engine's streams (CUDA backend only).
    Cuda,
    /// Nothing: the model reads (or writes) the caller's buffer as it is. A
    /// side with extra tensors never takes it.
    Direct,
}

/// Which engine runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EngineKind {
    /// ONNX Runtime's CUDA provider on the context's stream: GPU-side hand-offs.
    Cuda,
    /// ONNX Runtime's CPU provider, run inside `submit`: host waits.
    Host,
}

/// One side of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Side {
    /// The frame's own tensor.
    pub(crate) route: Route,
    /// The side's extra tensors, where it has any: converted by passes, on the
    /// frame's route (or, where the model reads the frame's input as it is, on either).
    pub(crate) extras: Option<Route>,
}

/// What the plan is made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Situation {
    pub(crate) input: Side,
    pub(crate) output: Side,
    pub(crate) engine: EngineKind,
    pub(crate) post_wait: PostWait,
    /// The frame waits for the caller's "input written" value (`Frame::wait_for`).
    pub(crate) caller_wait: bool,
    /// The frame waits for the caller's "output free" value (`Frame::output_free_after`).
    pub(crate) output_free: bool,
    /// The caller's semaphores that the frame waits for are imported into CUDA as
    /// well (by file descriptor, on the CUDA backend): the engine can wait for them
    /// on its own streams, with no Vulkan batch between the caller and the model.
    pub(crate) cuda_waits: bool,
}

/// Which of the caller's semaphores a step waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Waits {
    pub(crate) caller: bool,
    pub(crate) output_free: bool,
}

impl Waits {
    const NONE: Waits = Waits { caller: false, output_free: false };
}

/// Passes of one side that a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Passes {
    /// The frame's own pass.
    pub(crate) frame: bool,
    /// The extra tensors' passes.
    pub(crate) extras: bool,
}

impl Passes {
    /// Whether any pass runs.
    pub(crate) fn any(self) -> bool {
        self.frame || self.extras
    }
}

/// The first Vulkan batch: the Vulkan pre passes (or none), behind the
/// caller's semaphores; it always signals `to_model = n`, with the slot's first fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FirstBatch {
    pub(crate) pre: Passes,
    /// The command that makes the device's writes to the caller's buffer visible
    /// to the host (the CPU engine reads the caller's buffer itself).
    pub(crate) host_visibility: bool,
    pub(crate) waits: Waits,
    pub(crate) signal_input_consumed: bool,
}

/// When the engine signals "input consumed".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Consumed {
    /// Its pre kernels have read the caller's input: before the model.
    BeforeModel,
    /// The model read the caller's buffer itself: after the model.
    AfterModel,
}

/// What the engine signals when the model is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    /// `model_done`, for the Vulkan post batch.
    ModelDone,
    /// `output_ready`, after the model (which wrote the caller's buffer).
    OutputReady,
    /// `output_ready`, after its post kernels, on the post stream.
    OutputReadyAfterPost,
}

/// Where the engine waits for the caller's "output free" value (CUDA engine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FreeWait {
    /// On the model's stream, before the model (which writes the caller's buffer itself).
    BeforeModel,
    /// On the post stream, before the post kernels (the model need not wait).
    BeforePost,
}

/// What the engine does for the frame, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EngineSteps {
    /// Wait for `to_model = n` (the first batch's signal): on the CUDA stream, or on the host.
    pub(crate) wait_to_model: bool,
    /// Wait on the model's stream for the caller's "input written" value itself (its
    /// semaphore imported into CUDA), before the pre kernels or the model.
    pub(crate) wait_caller: bool,
    /// Wait for the caller's "output free" value itself, where it says.
    pub(crate) wait_output_free: Option<FreeWait>,
    /// The CUDA pre kernels.
    pub(crate) pre: Passes,
    pub(crate) input_consumed: Option<Consumed>,
    /// The CUDA post kernels (on the post stream, behind the model).
    pub(crate) post: Passes,
    pub(crate) done: Finish,
}

/// The Vulkan post batch: the Vulkan post passes behind the model (and the
/// caller's "output free"), signalling `output_ready = n`, with the slot's second fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PostBatch {
    pub(crate) post: Passes,
    /// Waits on the GPU for `model_done = n` (CUDA engine).
    pub(crate) wait_model_done: bool,
    pub(crate) wait_output_free: bool,
    /// The queue it goes to: 1 (its own, where there is one) on the CUDA engine,
    /// behind the pre pass on queue 0 on the CPU engine (which orders the alpha).
    pub(crate) queue: usize,
    /// Submitted only once the host has seen the model finish (`PostWait::Host`).
    pub(crate) deferred: bool,
}

/// Everything a frame does, and who does it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// What the host waits for, bounded, before anything is submitted (the CPU
    /// engine runs the model inside `submit`).
    pub(crate) host_waits: Waits,
    pub(crate) first: Option<FirstBatch>,
    pub(crate) engine: EngineSteps,
    pub(crate) post: Option<PostBatch>,
    /// Who signals "input consumed" and "output ready" (the ring drains when they change).
    pub(crate) signallers: (Signaller, Signaller),
}

/// A situation no plan exists for: a bug of the caller of [`plan`] (the
/// routes are chosen so that it does not happen).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Impossible(pub(crate) &'static str);

/// The plan for a frame in `s`.
pub(crate) fn plan(s: Situation) -> Result<Plan, Impossible> {
    let on_cuda = s.engine == EngineKind::Cuda;
    for side in [s.input, s.output] {
        if (side.route == Route::Cuda || side.extras == Some(Route::Cuda)) && !on_cuda {
            return Err(Impossible("CUDA kernels on the CPU backend"));
        }
        if side.extras == Some(Route::Direct) {
            return Err(Impossible("extra tensors read or written as they are"));
        }
        if side.route != Route::Direct && side.extras.is_some_and(|e| e != side.route) {
            return Err(Impossible("extra tensors on another route than the frame's"));
        }
    }
    if s.output.route == Route::Direct && s.output.extras.is_some() {
        // Two agents would signal "output ready": the engine and the extras' post batch.
        return Err(Impossible("extra outputs beside an output the model writes as it is"));
    }
    let on = |side: Side, route: Route| Passes { frame: side.route == route, extras: side.extras == Some(route) };
    let (vulkan_pre, cuda_pre) = (on(s.input, Route::Vulkan), on(s.input, Route::Cuda));
    let (vulkan_post, cuda_post) = (on(s.output, Route::Vulkan), on(s.output, Route::Cuda));
    // The engine writes the caller's output memory itself (kernels or the model): it must not
    // start before the caller is done with it. A Vulkan post batch waits for that on its own.
    let engine_writes_output = s.output.route != Route::Vulkan;

    // The engine waits for the caller's semaphores itself where CUDA has them and it is the
    // first to touch the memory they guard: the caller's input (no Vulkan pre pass reads it
    // first), the caller's output (the engine writes it).
    let engine_caller = on_cuda && s.cuda_waits && s.caller_wait && !vulkan_pre.any();
    let engine_free = on_cuda && s.cuda_waits && s.output_free && engine_writes_output;
    let (host_waits, first_waits) = if on_cuda {
        (
            Waits::NONE,
            Waits {
                caller: s.caller_wait && !engine_caller,
                output_free: s.output_free && engine_writes_output && !engine_free,
            },
        )
    } else {
        // The CPU engine waits on the host, before anything is submitted, so that a value
        // that never comes leaves nothing half-submitted behind.
        (Waits { caller: s.caller_wait, output_free: s.output_free && engine_writes_output }, Waits::NONE)
    };
    let host_visibility = !on_cuda && s.input.route == Route::Direct;
    // On the CUDA engine a first batch exists only for Vulkan work or the caller's waits;
    // the CPU engine always has one (its host wait for `to_model` orders it after the GPU).
    let first_needed = !on_cuda || vulkan_pre.any() || first_waits.caller || first_waits.output_free;
    let first = first_needed.then_some(FirstBatch {
        pre: vulkan_pre,
        host_visibility,
        waits: first_waits,
        signal_input_consumed: s.input.route == Route::Vulkan,
    });

    let input_consumed = match s.input.route {
        Route::Vulkan => None,
        Route::Cuda => Some(Consumed::BeforeModel),
        Route::Direct => Some(Consumed::AfterModel),
    };
    let done = match s.output.route {
        Route::Vulkan => Finish::ModelDone,
        Route::Cuda => Finish::OutputReadyAfterPost,
        Route::Direct => Finish::OutputReady,
    };
    let wait_output_free = engine_free.then_some(match s.output.route {
        Route::Cuda => FreeWait::BeforePost,
        _ => FreeWait::BeforeModel,
    });
    let engine = EngineSteps {
        wait_to_model: first.is_some(),
        wait_caller: engine_caller,
        wait_output_free,
        pre: cuda_pre,
        input_consumed,
        post: cuda_post,
        done,
    };

    let post = vulkan_post.any().then_some(PostBatch {
        post: vulkan_post,
        wait_model_done: on_cuda,
        wait_output_free: s.output_free,
        queue: if on_cuda { 1 } else { 0 },
        deferred: on_cuda && s.post_wait == PostWait::Host,
    });
    let signaller = |route: Route| if route == Route::Vulkan { Signaller::Vulkan } else { Signaller::Engine };
    Ok(Plan { host_waits, first, engine, post, signallers: (signaller(s.input.route), signaller(s.output.route)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Route = Route::Vulkan;
    const C: Route = Route::Cuda;
    const D: Route = Route::Direct;

    /// A row of the table: the situation in short, and what the plan must say.
    struct Row {
        input: Route,
        output: Route,
        engine: EngineKind,
        post_wait: PostWait,
        /// (caller wait, output free)
        waits: (bool, bool),
        /// The caller's semaphores are imported into CUDA.
        cuda_waits: bool,
        /// What happens, in short: see `describe`.
        expect: &'static str,
    }

    /// The plan in one line: host waits, first batch, engine steps, post batch, signallers.
    /// `H[c o]`: the host waits for the caller's input (c) and output-free (o) values;
    /// `1[pre xtra vis | c o | ic]`: the first batch's Vulkan passes (frame, extras), the
    /// host-visibility command, its waits, and whether it signals input consumed;
    /// `E[w | pre | ic< / ic> | post | md/or/or+]`; `2[post | md o | q1 | defer]`; where the
    /// engine waits for the caller's semaphores itself, `W[c m/p]` (input written; output
    /// free before the model or before the post kernels); `S[vv]`.
    fn describe(p: &Plan) -> String {
        let mut s = String::new();
        let flag = |on: bool, c: &str| if on { c.to_string() } else { "-".into() };
        if p.host_waits != Waits::NONE {
            s += &format!("H[{}{}] ", flag(p.host_waits.caller, "c"), flag(p.host_waits.output_free, "o"));
        }
        if let Some(f) = p.first {
            s += &format!(
                "1[{}{}{}|{}{}|{}] ",
                flag(f.pre.frame, "p"),
                flag(f.pre.extras, "x"),
                flag(f.host_visibility, "v"),
                flag(f.waits.caller, "c"),
                flag(f.waits.output_free, "o"),
                flag(f.signal_input_consumed, "i"),
            );
        }
        let e = p.engine;
        let consumed = match e.input_consumed {
            None => "-",
            Some(Consumed::BeforeModel) => "i<",
            Some(Consumed::AfterModel) => "i>",
        };
        let done = match e.done {
            Finish::ModelDone => "md",
            Finish::OutputReady => "or",
            Finish::OutputReadyAfterPost => "or+",
        };
        s += &format!(
            "E[{}|{}{}|{consumed}|{}{}|{done}]",
            flag(e.wait_to_model, "w"),
            flag(e.pre.frame, "p"),
            flag(e.pre.extras, "x"),
            flag(e.post.frame, "p"),
            flag(e.post.extras, "x"),
        );
        if let Some(b) = p.post {
            s += &format!(
                " 2[{}{}|{}{}|q{}|{}]",
                flag(b.post.frame, "p"),
                flag(b.post.extras, "x"),
                flag(b.wait_model_done, "m"),
                flag(b.wait_output_free, "o"),
                b.queue,
                flag(b.deferred, "d"),
            );
        }
        if e.wait_caller || e.wait_output_free.is_some() {
            let free = match e.wait_output_free {
                None => "-",
                Some(FreeWait::BeforeModel) => "m",
                Some(FreeWait::BeforePost) => "p",
            };
            s += &format!(" W[{}{free}]", flag(e.wait_caller, "c"));
        }
        let sig = |x: Signaller| if x == Signaller::Vulkan { "v" } else { "e" };
        s += &format!(" S[{}{}]", sig(p.signallers.0), sig(p.signallers.1));
        s
    }

    fn row(input: Route, output: Route, engine: EngineKind, waits: (bool, bool), expect: &'static str) -> Row {
        Row { input, output, engine, post_wait: PostWait::Gpu, waits, cuda_waits: false, expect }
    }

    /// A row whose caller semaphores CUDA has too.
    fn cuda_row(input: Route, output: Route, engine: EngineKind, waits: (bool, bool), expect: &'static str) -> Row {
        Row { cuda_waits: true, ..row(input, output, engine, waits, expect) }
    }

    fn check(rows: &[Row], extras: bool) {
        let mut failures = Vec::new();
        for r in rows {
            let side = |route: Route| Side { route, extras: (extras && route != D).then_some(route) };
            let s = Situation {
                input: side(r.input),
                output: side(r.output),
                engine: r.engine,
                post_wait: r.post_wait,
                caller_wait: r.waits.0,
                output_free: r.waits.1,
                cuda_waits: r.cuda_waits,
            };
            let got = plan(s).map(|p| describe(&p)).unwrap_or_else(|e| format!("impossible: {}", e.0));
            if got != r.expect {
                failures.push(format!("{s:?}\n  want {}\n  got  {got}", r.expect));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    use EngineKind::{Cuda as CU, Host as HO};

    #[test]
    fn every_route_on_the_cuda_engine() {
        check(
            &[
                // Vulkan passes both ways: the pre batch signals input consumed and feeds the
                // model; the post batch waits for model_done on its own queue.
                row(V, V, CU, (false, false), "1[p--|--|i] E[w|--|-|--|md] 2[p-|m-|q1|-] S[vv]"),
                row(V, V, CU, (true, true), "1[p--|c-|i] E[w|--|-|--|md] 2[p-|mo|q1|-] S[vv]"),
                // CUDA kernels both ways: no Vulkan batch at all unless the caller's
                // semaphores ask for one; then the stream waits for it.
                row(C, C, CU, (false, false), "E[-|p-|i<|p-|or+] S[ee]"),
                row(C, C, CU, (true, false), "1[---|c-|-] E[w|p-|i<|p-|or+] S[ee]"),
                row(C, C, CU, (false, true), "1[---|-o|-] E[w|p-|i<|p-|or+] S[ee]"),
                row(C, C, CU, (true, true), "1[---|co|-] E[w|p-|i<|p-|or+] S[ee]"),
                // Mixed: a Vulkan pre pass feeding CUDA post kernels, and the reverse.
                row(V, C, CU, (false, true), "1[p--|-o|i] E[w|--|-|p-|or+] S[ve]"),
                row(C, V, CU, (false, true), "E[-|p-|i<|--|md] 2[p-|mo|q1|-] S[ev]"),
                row(C, V, CU, (true, true), "1[---|c-|-] E[w|p-|i<|--|md] 2[p-|mo|q1|-] S[ev]"),
                // The model reads or writes the caller's buffer itself.
                row(D, V, CU, (false, false), "E[-|--|i>|--|md] 2[p-|m-|q1|-] S[ev]"),
                row(D, V, CU, (true, false), "1[---|c-|-] E[w|--|i>|--|md] 2[p-|m-|q1|-] S[ev]"),
                row(V, D, CU, (false, true), "1[p--|-o|i] E[w|--|-|--|or] S[ve]"),
                row(D, D, CU, (true, true), "1[---|co|-] E[w|--|i>|--|or] S[ee]"),
                row(D, C, CU, (false, false), "E[-|--|i>|p-|or+] S[ee]"),
                row(C, D, CU, (false, false), "E[-|p-|i<|--|or] S[ee]"),
            ],
            false,
        );
    }

    #[test]
    fn the_engine_waits_for_the_callers_semaphores_that_cuda_has() {
        check(
            &[
                // CUDA kernels both ways: no Vulkan batch at all; the model's stream waits for
                // the input, the post stream for the output's release.
                cuda_row(C, C, CU, (true, false), "E[-|p-|i<|p-|or+] W[c-] S[ee]"),
                cuda_row(C, C, CU, (false, true), "E[-|p-|i<|p-|or+] W[-p] S[ee]"),
                cuda_row(C, C, CU, (true, true), "E[-|p-|i<|p-|or+] W[cp] S[ee]"),
                // The model reads and writes the caller's buffers: both waits before the model.
                cuda_row(D, D, CU, (true, true), "E[-|--|i>|--|or] W[cm] S[ee]"),
                cuda_row(C, D, CU, (true, true), "E[-|p-|i<|--|or] W[cm] S[ee]"),
                // A Vulkan pre pass reads the input first: it waits for it; the engine still
                // waits for the output's release itself.
                cuda_row(V, C, CU, (true, true), "1[p--|c-|i] E[w|--|-|p-|or+] W[-p] S[ve]"),
                // A Vulkan post batch waits for the output's release itself, as before.
                cuda_row(C, V, CU, (true, true), "E[-|p-|i<|--|md] 2[p-|mo|q1|-] W[c-] S[ev]"),
                cuda_row(V, V, CU, (true, true), "1[p--|c-|i] E[w|--|-|--|md] 2[p-|mo|q1|-] S[vv]"),
                // The CPU engine waits on the host whatever CUDA has.
                cuda_row(D, D, HO, (true, true), "H[co] 1[--v|--|-] E[w|--|i>|--|or] S[ee]"),
            ],
            false,
        );
    }

    #[test]
    fn every_route_on_the_cpu_engine() {
        check(
            &[
                // The host waits for the caller's values before submitting; the first batch
                // always exists (the host waits for its to_model), the post batch follows on queue 0.
                row(V, V, HO, (false, false), "1[p--|--|i] E[w|--|-|--|md] 2[p-|--|q0|-] S[vv]"),
                row(V, V, HO, (true, true), "H[c-] 1[p--|--|i] E[w|--|-|--|md] 2[p-|-o|q0|-] S[vv]"),
                row(D, V, HO, (true, false), "H[c-] 1[--v|--|-] E[w|--|i>|--|md] 2[p-|--|q0|-] S[ev]"),
                row(V, D, HO, (false, true), "H[-o] 1[p--|--|i] E[w|--|-|--|or] S[ve]"),
                row(D, D, HO, (true, true), "H[co] 1[--v|--|-] E[w|--|i>|--|or] S[ee]"),
                row(C, V, HO, (false, false), "impossible: CUDA kernels on the CPU backend"),
                row(V, C, HO, (false, false), "impossible: CUDA kernels on the CPU backend"),
            ],
            false,
        );
    }

    #[test]
    fn extra_tensors_go_the_frames_way() {
        check(
            &[
                row(V, V, CU, (false, false), "1[px-|--|i] E[w|--|-|--|md] 2[px|m-|q1|-] S[vv]"),
                row(C, C, CU, (false, false), "E[-|px|i<|px|or+] S[ee]"),
                row(C, V, CU, (true, false), "1[---|c-|-] E[w|px|i<|--|md] 2[px|m-|q1|-] S[ev]"),
                row(V, V, HO, (false, false), "1[px-|--|i] E[w|--|-|--|md] 2[px|--|q0|-] S[vv]"),
            ],
            true,
        );
    }

    #[test]
    fn extra_inputs_beside_an_input_the_model_reads_as_it_is() {
        let situation = |input: Side, output: Side, engine| Situation {
            input,
            output,
            engine,
            post_wait: PostWait::Gpu,
            caller_wait: false,
            output_free: false,
            cuda_waits: false,
        };
        let side = |route, extras| Side { route, extras };
        let describe_plan = |s| plan(s).map(|p| describe(&p)).unwrap_or_else(|e| format!("impossible: {}", e.0));
        // The extras' pre passes feed the model; the engine signals input consumed after
        // the model, which read the frame's input itself.
        let got = describe_plan(situation(side(D, Some(V)), side(V, None), CU));
        assert_eq!(got, "1[-x-|--|-] E[w|--|i>|--|md] 2[p-|m-|q1|-] S[ev]");
        let got = describe_plan(situation(side(D, Some(C)), side(C, None), CU));
        assert_eq!(got, "E[-|-x|i>|p-|or+] S[ee]");
        let got = describe_plan(situation(side(D, Some(V)), side(V, None), HO));
        assert_eq!(got, "1[-xv|--|-] E[w|--|i>|--|md] 2[p-|--|q0|-] S[ev]");
        for (input, output, engine, why) in [
            (side(D, Some(D)), side(V, None), CU, "extra tensors read or written as they are"),
            (side(V, Some(C)), side(V, None), CU, "extra tensors on another route than the frame's"),
            (side(C, None), side(C, Some(V)), CU, "extra tensors on another route than the frame's"),
            (side(V, None), side(D, Some(V)), CU, "extra outputs beside an output the model writes as it is"),
            (side(D, Some(C)), side(V, None), HO, "CUDA kernels on the CPU backend"),
        ] {
            assert_eq!(plan(situation(input, output, engine)), Err(Impossible(why)), "{input:?} {output:?}");
        }
    }

    #[test]
    fn post_waits_on_the_host_only_defer_a_vulkan_post_batch_on_cuda() {
        let host = |input, output, engine, expect| Row {
            input,
            output,
            engine,
            post_wait: PostWait::Host,
            waits: (false, false),
            cuda_waits: false,
            expect,
        };
        check(
            &[
                host(V, V, CU, "1[p--|--|i] E[w|--|-|--|md] 2[p-|m-|q1|d] S[vv]"),
                host(C, V, CU, "E[-|p-|i<|--|md] 2[p-|m-|q1|d] S[ev]"),
                host(C, C, CU, "E[-|p-|i<|p-|or+] S[ee]"),
                host(V, V, HO, "1[p--|--|i] E[w|--|-|--|md] 2[p-|--|q0|-] S[vv]"),
            ],
            false,
        );
    }
}
