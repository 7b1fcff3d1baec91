//! The library's messages name its Rust API (`ContextBuilder::build_on`, `Backend::Cpu`,
//! `create_input_image`, …); a C caller knows the C API's names. Every message that crosses
//! the boundary (`nf_last_error_message`, the log callback) goes through [`c_names`], which
//! replaces each Rust name of `RUST_TO_C` with its C counterpart.

/// The Rust names in the library's messages and what a C caller calls them. A key with
/// `{}` takes the text between its two parts (up to the first occurrence of the second part,
/// on the same line) into the `{}` of the C form. Keys are matched whole: not inside a longer
/// identifier (`wait_settled` is not found in `nf_context_wait_settled`), the longest first.
pub(crate) const RUST_TO_C: &[(&str, &str)] = &[
    // The builder (ContextBuilder) and the context (NeuralFrameContext).
    ("ContextBuilder::device(DeviceSelector::Uuid(..))", "nf_builder_set_device_uuid"),
    ("ContextBuilder::device", "nf_builder_set_device_uuid or nf_builder_set_device_index"),
    ("ContextBuilder::build_on", "nf_context_new_on_device"),
    ("ContextBuilder::build", "nf_context_new"),
    ("ContextBuilder::ort_library", "nf_builder_set_ort_library"),
    ("ContextBuilder::frame_size", "nf_builder_set_frame_size"),
    ("ContextBuilder::frame_timeout", "nf_builder_set_frame_timeout_ms"),
    ("ContextBuilder::tiling", "nf_builder_set_tiling"),
    ("ContextBuilder::memory_budget", "nf_builder_set_memory_budget"),
    ("ContextBuilder::slots", "nf_builder_set_slots"),
    ("ContextBuilder::backend", "nf_builder_set_backend"),
    ("ContextBuilder::back_pressure", "nf_builder_set_back_pressure"),
    ("ContextBuilder::validation", "nf_builder_set_validation"),
    ("ContextBuilder::cuda_options", "nf_builder_set_cuda_options"),
    ("ContextBuilder", "nf_builder"),
    ("NeuralFrameContext::resize", "nf_context_resize"),
    ("NeuralFrameContext::submit", "nf_context_submit"),
    ("NeuralFrameContext::wait", "nf_context_wait"),
    ("NeuralFrameContext::try_wait", "nf_context_try_wait"),
    ("NeuralFrameContext::wait_all", "nf_context_wait_all"),
    ("NeuralFrameContext::infer", "nf_context_infer_rgba8"),
    ("NeuralFrameContext::upload", "nf_context_upload"),
    ("NeuralFrameContext::readback", "nf_context_readback"),
    ("NeuralFrameContext::export_timelines", "nf_context_export_timelines"),
    ("NeuralFrameContext::sync_mode", "nf_context_sync_mode"),
    ("dropping a NeuralFrameContext", "freeing an nf_context (nf_context_free)"),
    ("NeuralFrameContext", "nf_context"),
    // Registrations, imports, waits (bare method names, as the messages give them).
    ("register_input_image_with_memory", "nf_context_register_input_image_with_memory"),
    ("register_output_image_with_memory", "nf_context_register_output_image_with_memory"),
    ("register_input_image", "nf_context_register_input_image"),
    ("register_output_image", "nf_context_register_output_image"),
    ("register_input_buffer", "nf_context_register_input_buffer"),
    ("register_output_buffer", "nf_context_register_output_buffer"),
    ("register_exportable_timeline", "nf_context_register_exportable_timeline"),
    ("register_timeline", "nf_context_register_timeline"),
    ("import_input_image", "nf_context_import_input_image"),
    ("import_output_image", "nf_context_import_output_image"),
    ("import_input_buffer", "nf_context_import_input_buffer"),
    ("import_output_buffer", "nf_context_import_output_buffer"),
    ("import_timeline", "nf_context_import_timeline"),
    ("import_memory", "nf_context_import_memory"),
    ("release_memory", "nf_context_release_memory"),
    ("place_input_planes", "nf_context_place_input_planes"),
    ("place_output_planes", "nf_context_place_output_planes"),
    ("export_timelines", "nf_context_export_timelines"),
    ("release_timeline", "nf_context_release_timeline"),
    ("unregister_input", "nf_context_unregister_input"),
    ("unregister_output", "nf_context_unregister_output"),
    ("unregister_timeline", "nf_context_unregister_timeline"),
    ("create_input_image", "nf_context_create_input_image"),
    ("create_output_image", "nf_context_create_output_image"),
    ("upload_output", "nf_context_upload (on an input; outputs are not uploaded from C)"),
    ("wait_input_consumed", "nf_context_wait_input_consumed"),
    ("try_input_consumed", "nf_context_try_input_consumed"),
    ("wait_settled", "nf_context_wait_settled"),
    ("wait, try_wait or wait_input_consumed", "nf_context_wait, nf_context_try_wait or nf_context_wait_input_consumed"),
    ("wait, wait_input_consumed", "nf_context_wait, nf_context_wait_input_consumed"),
    // Frames.
    ("Frame::new", "nf_frame's input and output"),
    ("Frame::with_input({}, ..)", "an nf_named_input named {} in nf_frame.extra_inputs"),
    ("Frame::with_output({}, ..)", "an nf_named_output named {} in nf_frame.extra_outputs"),
    ("Frame::with_input", "nf_frame.extra_inputs"),
    ("Frame::with_output", "nf_frame.extra_outputs"),
    ("Frame::wait_for", "nf_frame.wait_timeline or nf_frame.waits"),
    ("Frame::output_free_after", "nf_frame.output_free_timeline or nf_frame.output_free"),
    ("Frame::signal_input_consumed", "nf_frame.signal_input_consumed"),
    ("Frame::signal_output_ready", "nf_frame.signal_output_ready"),
    ("Frame::waits", "nf_frame.waits"),
    ("Frame::output_free", "nf_frame.output_free"),
    ("Tiling::new({})", "nf_builder_set_tiling(builder, {})"),
    // Enumerations.
    ("Backend::Auto", "NF_BACKEND_AUTO"),
    ("Backend::Cuda", "NF_BACKEND_CUDA"),
    ("Backend::Cpu", "NF_BACKEND_CPU"),
    ("BackPressure::Block", "NF_BACK_PRESSURE_BLOCK"),
    ("BackPressure::Skip", "NF_BACK_PRESSURE_SKIP"),
    ("SyncMode::Gpu", "NF_SYNC_GPU"),
    ("SyncMode::Host", "NF_SYNC_HOST"),
    ("PostWait::Gpu", "NF_POST_WAIT_GPU"),
    ("PostWait::Host", "NF_POST_WAIT_HOST"),
    ("Precision::Auto", "NF_PRECISION_AUTO"),
    ("Precision::Fp32", "NF_PRECISION_FP32"),
    ("Precision::Fp16", "NF_PRECISION_FP16"),
    // The CUDA options (CudaOptions) and the caller's device (CallerDevice).
    ("CudaOptions::with_fuse_conv_act(false)", "nf_cuda_options.fuse_conv_act = NF_TRISTATE_OFF"),
    ("CudaOptions::with_fuse_conv_bias(false)", "nf_cuda_options.fuse_conv_bias = 0"),
    ("CudaOptions::with_cuda_graph(false)", "nf_cuda_options.cuda_graph = 0"),
    ("CudaOptions::with_prefer_nhwc / fuse_conv_bias", "nf_cuda_options.prefer_nhwc / .fuse_conv_bias"),
    ("fuse_conv_act(false)", "nf_cuda_options.fuse_conv_act = NF_TRISTATE_OFF"),
    ("CudaOptions", "nf_cuda_options"),
    ("CallerDevice::post_queue", "nf_vulkan_device.post_queue"),
    ("CallerDevice", "nf_vulkan_device"),
    ("CallerImage", "nf_caller_image"),
    ("CallerBuffer", "nf_caller_buffer"),
    ("CallerMemory", "nf_caller_memory"),
    ("PixelLayout", "nf_pixel_layout"),
    ("MemoryImport", "nf_memory_import"),
    ("PlanarFrame", "nf_planar_frame"),
    ("SyncPoint", "nf_sync_point"),
    ("PLANE_FORMATS", "VK_FORMAT_R32_SFLOAT, VK_FORMAT_R16_SFLOAT or VK_FORMAT_R8_UNORM"),
];

/// `RUST_TO_C`, for the tests: (Rust name, C name).
pub fn rust_to_c_names() -> &'static [(&'static str, &'static str)] {
    RUST_TO_C
}

fn ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether a match of `key` may start after `before` and end before `after`: not inside a
/// longer identifier or path.
fn whole(key: &str, before: Option<char>, after: Option<char>) -> bool {
    let starts_ident = key.chars().next().is_some_and(ident);
    let ends_ident = key.chars().last().is_some_and(ident);
    let before_ok = !starts_ident || before.is_none_or(|c| !ident(c) && c != ':');
    let after_ok = !ends_ident || after.is_none_or(|c| !ident(c) && c != ':');
    before_ok && after_ok
}

/// The match of `key` (with or without a `{}` argument) at the start of `rest`: its length
/// and its C form.
fn match_at(key: &str, c: &str, rest: &str, before: Option<char>) -> Option<(usize, String)> {
    match key.split_once("{}") {
        None => {
            let after = rest.get(key.len()..)?.chars().next();
            (rest.starts_with(key) && whole(key, before, after)).then(|| (key.len(), c.to_string()))
        }
        Some((head, tail)) => {
            if !rest.starts_with(head) || !whole(head, before, Some(' ')) {
                return None;
            }
            let arg_and_more = &rest[head.len()..];
            let end = arg_and_more.find(tail)?;
            let arg = &arg_and_more[..end];
            if arg.is_empty() || arg.contains('\n') || arg.len() > 200 {
                return None;
            }
            Some((head.len() + end + tail.len(), c.replacen("{}", arg, 1)))
        }
    }
}

/// `message` with the Rust names of `RUST_TO_C` replaced by the C API's, in one pass (a
/// C name put in is never looked at again), the longest key first where several match.
///
/// ```
/// use neural_frame_c::c_names;
/// assert_eq!(
///     c_names("raw handles need a context built on your device (ContextBuilder::build_on)"),
///     "raw handles need a context built on your device (nf_context_new_on_device)"
/// );
/// ```
pub fn c_names(message: &str) -> String {
    let mut out = String::with_capacity(message.len() + 32);
    let mut at = 0;
    let mut before: Option<char> = None;
    while at < message.len() {
        let rest = &message[at..];
        let best = RUST_TO_C
            .iter()
            .filter_map(|(key, c)| match_at(key, c, rest, before).map(|m| (key.len(), m)))
            .max_by_key(|(key_len, _)| *key_len)
            .map(|(_, m)| m);
        match best {
            Some((len, c)) => {
                out.push_str(&c);
                before = message[..at + len].chars().next_back();
                at += len;
            }
            None => {
                let ch = rest.chars().next().unwrap_or(' ');
                out.push(ch);
                before = Some(ch);
                at += ch.len_utf8();
            }
        }
    }
    out
}
