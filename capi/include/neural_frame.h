/*
 * neural_frame.h: the C API of neural-frame (issue 24 section 1).
 * SPDX-License-Identifier: MPL-2.0
 *
 * Link libneural_frame_c.so, or libneural_frame_c.a with the system libraries that
 * `rustc --print native-static-libs` names, both built by
 * `cargo build --release -p neural-frame-c` into target/release/; or, installed with
 * capi/install.sh PREFIX, find_package(neural_frame) (target neural_frame::neural_frame)
 * or pkg-config's neural_frame. ONNX Runtime is loaded at run time: ORT_DYLIB_PATH,
 * nf_builder_set_ort_library, or .runtime/ort-* under the working directory
 * (scripts/setup.sh puts it there), ~/.local/share/neural-frame/ort-* (where
 * scripts/setup.sh links it) or pip's site-packages. The header needs no Vulkan header: Vulkan handles
 * are void * (dispatchable: VkInstance, VkPhysicalDevice, VkDevice, VkQueue) or
 * uint64_t (the others), enums int32_t, flags uint32_t.
 *
 * CONVENTIONS
 * - Status: every call returns an nf_status, NF_STATUS_OK (0) on success, except
 *   nf_version, nf_version_number, nf_last_error_message and the *_free calls; each
 *   call's comment lists the codes it returns and when ("Status:"). Any call may also
 *   return NF_STATUS_INTERNAL (a bug), and a later version may add codes: treat a code
 *   you do not know as a failure. After a failure,
 *   nf_last_error_message() gives the text (what failed, why, what to do). That string
 *   is owned by the library, is thread-local, and stays valid until the next nf_* call
 *   on the same thread other than a *_free call: copy it to keep it. A successful call
 *   resets it to ""; the *_free calls leave it as it was (free, then report). Out
 *   arguments are written on success only. Messages name the C API's functions, structs
 *   and constants (the library's Rust names are translated).
 * - Handles: nf_builder, nf_context and nf_queue_lock are opaque. nf_builder_new,
 *   nf_context_new, nf_context_new_on_device and nf_queue_lock_new give the caller a
 *   handle it owns and frees exactly once with nf_builder_free, nf_context_free or
 *   nf_queue_lock_free (NULL is accepted and ignored). A context does not keep its
 *   builder: the builder may be freed right after the context is made, or reused.
 * - Registrations (nf_input, nf_output, nf_timeline, nf_memory) are numbers a context
 *   gives out, above 0, valid on that context until unregistered (nf_memory: until
 *   nf_context_release_memory). Tickets are frame numbers (nf_ticket.value). None of
 *   them is freed; all die with the context.
 * - The caller's Vulkan objects (instance, device, queues, images, buffers, memory,
 *   semaphores) are borrowed, never destroyed: they must outlive the context and its
 *   registrations of them. Free the context first. The ticket's semaphores are the
 *   context's: never destroy them.
 * - File descriptors: a successful nf_context_import_* (nf_context_import_memory too)
 *   owns (and later closes) the
 *   descriptor it was given; a failed one leaves it open and the caller's.
 *   nf_context_export_timelines gives the caller new descriptors to close (or to
 *   import into Vulkan, which then owns them).
 * - Borrowed pointers: every pointer argument (strings, structs, arrays, pixel buffers,
 *   out pointers) is borrowed for the call only; the library copies what it keeps.
 *   Strings in are NUL-terminated (paths: bytes on Unix; names: UTF-8). A NULL where a
 *   pointer is needed gives NF_STATUS_INVALID_ARGUMENT. Pixels from nf_image_read are
 *   the caller's, freed with nf_pixels_free.
 * - Strings out (size-in/size-out): a call that returns text takes (char *buf,
 *   size_t *len). On entry *len is the capacity of buf in bytes; on return it is the
 *   size the text needs, its NUL included. With buf NULL the call only sets *len (a
 *   query) and returns NF_STATUS_OK. With a buffer too small it writes nothing and
 *   returns NF_STATUS_BUFFER_TOO_SMALL. Otherwise it writes the text and its NUL.
 *   nf_context_readback does the same for bytes.
 * - Threads: a handle may move between threads but is used by one thread at a time.
 *   Contexts are independent of each other. ONNX Runtime is loaded once per process.
 *   On a queue the caller shares with a context, the caller submits only under the
 *   context's nf_queue_lock (or, without one, never while a call on the context runs).
 * - Panics never cross the boundary: a bug inside the library returns
 *   NF_STATUS_INTERNAL with its message.
 *
 * VERSIONED STRUCTS
 * - Every struct a caller fills in or the library fills in for it (nf_frame, nf_ticket,
 *   nf_frame_stats, nf_vulkan_device, nf_caller_image, nf_caller_memory,
 *   nf_caller_buffer, nf_image_import, nf_buffer_import, nf_semaphore_import,
 *   nf_cuda_options, nf_planar_frame) starts with `uint32_t struct_size`: the caller sets it to sizeof
 *   the struct as its header has it, with the struct's init macro, which also zeroes
 *   the rest: `nf_frame f = NF_FRAME_INIT;` (or `NF_STRUCT_INIT(nf_frame)`; C++ too).
 * - Later versions add fields at the end only, each 0 when unused (so an older
 *   program's struct means "unused" for them), keeping the struct's size a multiple of
 *   8 bytes. The library reads (or writes) only the first struct_size bytes: a program
 *   built against an older header keeps working with a newer library. Against an older
 *   library, a newer program's struct is taken where every field that library does not
 *   know is 0; one that is set gives NF_STATUS_UNSUPPORTED (never ignored). Out structs
 *   (nf_ticket, nf_frame_stats) get their fields the library does not know zeroed; the
 *   library leaves struct_size as the caller set it.
 * - A struct_size smaller than the struct's first version (not set), or above 4096,
 *   gives NF_STATUS_STRUCT_SIZE, before the call does anything.
 * - Structs embedded in others (nf_pixel_layout, nf_memory_import) and array elements
 *   (nf_named_input, nf_named_output, nf_sync_point, nf_plane) are fixed: they never grow, and have no
 *   struct_size; a need for more becomes a new field of the struct around them.
 *
 * VERSION: NF_VERSION ("MAJOR.MINOR.PATCH") and NF_VERSION_MAJOR, _MINOR, _PATCH and
 * NF_VERSION_NUMBER (MAJOR * 1000000 + MINOR * 1000 + PATCH) are the header's;
 * nf_version() and nf_version_number() are the library's that runs. A program runs
 * with a library of the same major version (while it is 0: the same minor) and at
 * least its header's version.
 *
 * LOGGING: what the library announces (fallbacks, slow paths, options not in effect)
 * reaches the caller through nf_set_log_callback, and nowhere else (nothing is printed).
 *
 * SYNCHRONISATION (details at nf_frame, nf_ticket, nf_caller_image, nf_image_import):
 * a frame's waits (nf_frame.wait_timeline, .output_free_timeline, and every point of
 * its lists .waits, .output_free) are GPU waits at VK_PIPELINE_STAGE_ALL_COMMANDS_BIT
 * of the context's batches (or on its CUDA stream); "input consumed" is reached when
 * every read of the inputs is done, "output ready" when every write of the outputs is
 * complete and available, visible to the stages of the caller's wait on it; the
 * caller's timelines in nf_frame.signal_input_consumed and .signal_output_ready are
 * signalled at those points, with the same guarantees. In NF_SYNC_HOST a frame neither
 * waits nor signals (both are refused). Frames retire inside the context's calls: each
 * nf_context_submit retires the frame whose slot it reuses, so a renderer that waits on
 * the GPU only never has to call a host function to retire frames (nf_ticket says when
 * it must: before destroying what it unregistered, with NF_POST_WAIT_HOST, in
 * NF_SYNC_HOST).
 *
 * WINDOWS: nf_external_handle is an NT HANDLE (OPAQUE_WIN32) instead of a file
 * descriptor; Vulkan and CUDA never own one, so the library closes a handle it imported
 * and the caller closes what nf_context_export_timelines gave it. The Windows build is
 * type-checked in CI, not run.
 */

#ifndef NEURAL_FRAME_H
#define NEURAL_FRAME_H

/* Generated by cbindgen from capi/src/lib.rs: do not edit; see capi/cbindgen.toml. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
/* The header's version, "MAJOR.MINOR.PATCH": compare it with nf_version(). */
#define NF_VERSION "0.1.0"


// The major version of the header (`capi/Cargo.toml`'s version, checked by the tests).
#define NF_VERSION_MAJOR 0

// The minor version of the header.
#define NF_VERSION_MINOR 1

// The patch version of the header.
#define NF_VERSION_PATCH 0

// The header's version as one number, `MAJOR * 1000000 + MINOR * 1000 + PATCH`, for `#if`
// and for comparing with `nf_version_number()`.
#define NF_VERSION_NUMBER 1000

// The usage an input image needs (`VK_IMAGE_USAGE_SAMPLED_BIT`): the pre pass samples it.
#define NF_INPUT_IMAGE_USAGE 4

// The usage an output image needs (`VK_IMAGE_USAGE_STORAGE_BIT`): the post pass writes it.
#define NF_OUTPUT_IMAGE_USAGE 8

// What a call did: `NF_STATUS_OK` (0), or why it failed. The failures mirror
// `neural_frame::ErrorKind`, plus `NF_STATUS_BUFFER_TOO_SMALL` for the C side's
// caller buffers. `nf_last_error_message()` gives the text of the last failure.
typedef enum nf_status {
  // The call succeeded.
  NF_STATUS_OK = 0,
  // A size, pointer, handle, format or parameter the caller passed is not acceptable.
  NF_STATUS_INVALID_ARGUMENT = 1,
  // The device, driver or build lacks something that is needed; the message says what.
  NF_STATUS_UNSUPPORTED = 2,
  // A bounded wait ran out.
  NF_STATUS_TIMEOUT = 3,
  // The GPU was lost or a kernel faulted: free the context and build a new one.
  NF_STATUS_DEVICE_LOST = 4,
  // No Vulkan loader, driver or device matching what was asked for.
  NF_STATUS_NO_DEVICE = 5,
  // CUDA or ONNX Runtime's CUDA execution provider cannot be used here.
  NF_STATUS_PROVIDER_UNAVAILABLE = 6,
  // ONNX Runtime itself could not be found or loaded.
  NF_STATUS_RUNTIME_MISSING = 7,
  // The model does not fit what the pipeline supports (or its file cannot be read).
  NF_STATUS_MODEL_CONTRACT = 8,
  // An image file could not be read or written.
  NF_STATUS_IMAGE = 9,
  // A Vulkan call failed.
  NF_STATUS_VULKAN = 10,
  // A CUDA driver call failed.
  NF_STATUS_CUDA = 11,
  // ONNX Runtime failed.
  NF_STATUS_ONNX_RUNTIME = 12,
  // Reading or writing a file failed.
  NF_STATUS_IO = 13,
  // A bug inside neural-frame (a broken invariant or a caught panic): please report it
  // with the message.
  NF_STATUS_INTERNAL = 14,
  // A caller buffer is smaller than what the call writes; the size it needs is in the
  // size argument (strings) or the message.
  NF_STATUS_BUFFER_TOO_SMALL = 15,
  // A struct's `struct_size` (its first field) is smaller than the struct's first version,
  // or larger than 4096: it was not set. Set it to `sizeof` the struct, with the struct's
  // `NF_*_INIT` macro (see VERSIONED STRUCTS in the preamble).
  NF_STATUS_STRUCT_SIZE = 16,
} nf_status;

// The options of a context to be built (opaque). Made by `nf_builder_new`, freed by
// `nf_builder_free`.
typedef struct nf_builder nf_builder;

// A context: the model's ONNX Runtime session, its buffers and passes, on a Vulkan
// device of its own (`nf_context_new`) or the caller's (`nf_context_new_on_device`)
// (opaque). Freed by `nf_context_free`.
typedef struct nf_context nf_context;

// A lock around submissions to a queue that the caller and a context share (opaque).
// Made by `nf_queue_lock_new`, freed by `nf_queue_lock_free`; contexts built with it
// keep it alive as long as they need it.
typedef struct nf_queue_lock nf_queue_lock;

// Which backend runs the model: one of the `NF_BACKEND_*` values.
typedef uint32_t nf_backend;

// What `nf_context_submit` does when every slot of the ring is busy: one of the
// `NF_BACK_PRESSURE_*` values.
typedef uint32_t nf_back_pressure;

// A declared tensor layout: one of the `NF_LAYOUT_*` values.
typedef uint32_t nf_layout;

// A declared colour channel order: one of the `NF_COLOR_ORDER_*` values.
typedef uint32_t nf_color_order;

// A declared value range of float tensors: one of the `NF_NORMALIZATION_*` values.
typedef uint32_t nf_normalization;

// How frames are handed between the caller and the context: one of the `NF_SYNC_*` values.
typedef uint32_t nf_sync_mode;

// A function of the Vulkan API, as `vkGetInstanceProcAddr` returns it (`PFN_vkVoidFunction`).
typedef void (*nf_vk_void_function)(void);

// The loader's `vkGetInstanceProcAddr` (`PFN_vkGetInstanceProcAddr`, with `VkInstance` as
// `void *`): pass `(nf_vk_get_instance_proc_addr)vkGetInstanceProcAddr`.
typedef nf_vk_void_function (*nf_vk_get_instance_proc_addr)(void *instance, const char *name);

// The caller's Vulkan device, by its raw handles, for `nf_context_new_on_device`. Every
// handle is borrowed: the context never destroys one, and they must outlive the context.
// Dispatchable handles (`VkInstance`, `VkPhysicalDevice`, `VkDevice`, `VkQueue`) are
// passed as `void *`.
//
// The device must have been created with Vulkan 1.2's `timelineSemaphore` feature
// enabled, on a queue family with compute support. The CUDA backend also needs
// `VK_KHR_external_memory_fd` and `VK_KHR_external_semaphore_fd` enabled (listed in
// `enabled_device_extensions`); without them `NF_BACKEND_AUTO` runs the CPU backend,
// announced. The CPU backend needs neither.
//
// A versioned struct: `nf_vulkan_device d = NF_VULKAN_DEVICE_INIT;` sets `struct_size` and
// zeroes the rest.
typedef struct nf_vulkan_device {
  // `sizeof(nf_vulkan_device)` as the caller's header has it (`NF_VULKAN_DEVICE_INIT`).
  uint32_t struct_size;
  // The loader's `vkGetInstanceProcAddr`, which the instance's functions are loaded through.
  nf_vk_get_instance_proc_addr get_instance_proc_addr;
  // The caller's `VkInstance`.
  void *instance;
  // The `apiVersion` the instance was created with (`VkApplicationInfo`), 1.2 or newer
  // (`VK_API_VERSION_1_2`).
  uint32_t api_version;
  // The `VkPhysicalDevice` the device was created on.
  void *physical_device;
  // The caller's `VkDevice`.
  void *device;
  // A queue family of the device with compute support.
  uint32_t queue_family_index;
  // A `VkQueue` of that family the context submits its passes to. On a queue shared with
  // the caller a semaphore signal waits for every earlier submission there, so the values
  // a frame waits for must come from submissions made before `nf_context_submit`, or from
  // the host.
  void *queue;
  // A second `VkQueue` of the same family for the post passes, or NULL (optional: on
  // the CUDA backend a post pass then waits there for the model instead of holding back
  // the caller's later submissions to `queue`).
  void *post_queue;
  // The instance extensions the instance was created with (`count` NUL-terminated names;
  // NULL with a count of 0). Read during the call only; the library needs no instance
  // extension beyond Vulkan 1.2's core today, so none is looked for.
  const char *const *enabled_instance_extensions;
  // The number of names in `enabled_instance_extensions`.
  uint32_t enabled_instance_extension_count;
  // The device extensions the device was created with (NUL-terminated names; NULL with a
  // count of 0). Read during the call only: `VK_KHR_external_memory_fd` and
  // `VK_KHR_external_semaphore_fd` are looked for.
  const char *const *enabled_device_extensions;
  // The number of names in `enabled_device_extensions`.
  uint32_t enabled_device_extension_count;
  // The lock the caller holds (`nf_queue_lock_acquire`) whenever it submits to `queue` or
  // `post_queue` itself; the context holds it around each of its own submissions. NULL:
  // the caller never submits to these queues while a call on the context runs (a
  // single-threaded renderer). The context keeps its own reference: the handle may be
  // freed after `nf_context_new_on_device`.
  const struct nf_queue_lock *queue_lock;
} nf_vulkan_device;

// A registered input (image or buffer) of one context: a number above 0, never reused
// by that context. 0 is no input.
typedef uint64_t nf_input;

// A registered output (image or buffer) of one context: a number above 0, never reused
// by that context. 0 is no output.
typedef uint64_t nf_output;

// A registered timeline semaphore of the caller's, of one context: a number above 0,
// never reused by that context. 0 is no timeline.
typedef uint64_t nf_timeline;

// One of a model's extra inputs, by the model's name for it (`nf_frame`). An element of
// an array: fixed, it never grows (a later need is a new array field of `nf_frame`).
typedef struct nf_named_input {
  // The model's input name (NUL-terminated UTF-8; read during the call only).
  const char *name;
  // A registered input of the frame size.
  nf_input input;
} nf_named_input;

// One of a model's extra outputs to convert into a registered output (`nf_frame`). An
// element of an array: fixed, it never grows.
typedef struct nf_named_output {
  // The model's output name (NUL-terminated UTF-8; read during the call only).
  const char *name;
  // A registered output of the output size.
  nf_output output;
} nf_named_output;

// A point on one of the caller's registered timelines (`nf_frame`'s lists of waits and
// signals): `timeline` at `value`. An element of an array: fixed, it never grows.
typedef struct nf_sync_point {
  // A timeline registered on this context (`nf_context_register_timeline`,
  // `_register_exportable_timeline`, `_import_timeline`).
  nf_timeline timeline;
  // The value: waited for (the timeline reaches it) or signalled (the context sets it).
  uint64_t value;
} nf_sync_point;

// One frame to run: which registered input and output, what to wait for and what to
// signal. A versioned struct: `nf_frame f = NF_FRAME_INIT;` sets `struct_size` and zeroes
// the rest; fill in what applies. Its first version ended at `extra_output_count` (88 bytes
// on 64-bit targets); the lists of waits and signals (`waits` … `signal_output_ready_count`)
// came after, and read as empty from an older program's smaller struct.
//
// Waits: the frame waits for every point it names, the single `wait_timeline` and every
// entry of `waits` before reading its input ("the input is written": a host's frame may
// have a producer per plane), the single `output_free_timeline` and every entry of
// `output_free` before writing its output. Signals: the context signals each of the
// caller's timelines in `signal_input_consumed` to its value when the frame's "input
// consumed" is reached, and each in `signal_output_ready` when its "output ready" is
// reached, with the same guarantees as the ticket's points of those names (`nf_ticket`):
// a wait for such a value is a wait for the ticket's point. On the CPU backend they are
// signalled from the host, inside the context's calls, once the frame got there. In
// `NF_SYNC_HOST` every wait and every signal is refused (`NF_STATUS_INVALID_ARGUMENT`):
// submit once the input is written and the output free, and wait on the host.
//
// Where the context waits: for a Vulkan pass, in the `vkQueueSubmit` of the batch that
// runs it, with `pWaitDstStageMask` `VK_PIPELINE_STAGE_ALL_COMMANDS_BIT` (the semaphore wait
// makes the caller's writes before its signal available and visible to the pass; no
// barrier of the caller's is needed for memory, only for the layout and, for imported
// resources, the queue family: see `nf_caller_image`, `nf_image_import`); on the CUDA
// backend, where CUDA kernels or the model touch the memory first, on the model's CUDA
// stream before them (`nf_context_register_exportable_timeline`, or a timeline imported by
// fd), else in a Vulkan batch of the context's; on the CPU backend, on the host inside
// `nf_context_submit`, before anything is submitted (bounded by the frame timeout:
// `NF_STATUS_TIMEOUT`), except the post pass's waits for the output-free points
// (`output_free_timeline`, `output_free`), which stay GPU waits where a Vulkan post pass
// writes the output.
typedef struct nf_frame {
  // `sizeof(nf_frame)` as the caller's header has it (`NF_FRAME_INIT`).
  uint32_t struct_size;
  // The input (image or buffer).
  nf_input input;
  // The output (image or buffer).
  nf_output output;
  // "The input is written": the context waits for this timeline to reach `wait_value`
  // before its first read of the input and the extra inputs (the pre pass, or CUDA's
  // kernels or the model; see above for the stage). 0: no wait (the input is written
  // already; always so in `NF_SYNC_HOST`). On a queue the caller shares with the context
  // the value must come from a submission made before `nf_context_submit`, or the host.
  nf_timeline wait_timeline;
  // The value `wait_timeline` must reach.
  uint64_t wait_value;
  // "The output may be overwritten": the context waits for this timeline to reach
  // `output_free_value` before its first write of the output and the extra outputs (the
  // post pass, or CUDA's kernels or the model), so that the caller's reads of an earlier
  // result are done. 0: no wait. Frames before it and the model run meanwhile.
  nf_timeline output_free_timeline;
  // The value `output_free_timeline` must reach.
  uint64_t output_free_value;
  // The model's extra inputs (an albedo, normals, …), `extra_input_count` of them; NULL
  // with a count of 0 for a model of one input. Read during the call only.
  const struct nf_named_input *extra_inputs;
  // The number of `extra_inputs`.
  size_t extra_input_count;
  // The model's extra outputs to convert as well, `extra_output_count` of them (NULL
  // with 0). Read during the call only.
  const struct nf_named_output *extra_outputs;
  // The number of `extra_outputs`.
  size_t extra_output_count;
  // More "the input is written" points (added after the first version), `wait_count` of
  // them (NULL with 0): the context waits for every one, as for `wait_timeline`. Read
  // during the call only.
  const struct nf_sync_point *waits;
  // The number of `waits`.
  size_t wait_count;
  // More "the output may be overwritten" points, `output_free_count` of them (NULL with
  // 0): the context waits for every one, as for `output_free_timeline`. Read during the
  // call only.
  const struct nf_sync_point *output_free;
  // The number of `output_free`.
  size_t output_free_count;
  // The caller's timelines the context signals, each to its value, once the frame's
  // "input consumed" is reached (every read of its inputs done: the caller may write them
  // again), `signal_input_consumed_count` of them (NULL with 0). Read during the call only.
  const struct nf_sync_point *signal_input_consumed;
  // The number of `signal_input_consumed`.
  size_t signal_input_consumed_count;
  // The caller's timelines the context signals, each to its value, once the frame's
  // "output ready" is reached (every write of its outputs complete and available, as
  // `nf_ticket.output_ready_semaphore` guarantees), `signal_output_ready_count` of them
  // (NULL with 0). Read during the call only.
  const struct nf_sync_point *signal_output_ready;
  // The number of `signal_output_ready`.
  size_t signal_output_ready_count;
} nf_frame;

// A frame in flight, as `nf_context_submit` gives it: its number on the context's two
// timelines (`value`, 1, 2, 3, …; 0: the frame was dropped under `NF_BACK_PRESSURE_SKIP`),
// and the two points the caller waits for, on its own queue (a wait in its
// `vkQueueSubmit` with `VkTimelineSemaphoreSubmitInfo`) or on the host
// (`vkWaitSemaphores`). The semaphores are the context's own, on the caller's device for
// a context built on it (with import by fd the caller imports
// `nf_context_export_timelines`' descriptors once and waits on those for the same
// values); they live as long as the context: never destroy them. In `NF_SYNC_HOST` they
// are not the caller's to wait on: use `nf_context_wait` and its kin.
//
// A versioned struct the library writes: `nf_ticket t = NF_TICKET_INIT;` sets its
// `struct_size` (the library fills in the fields it covers).
//
// Retirement: a frame's slot, its times and its hold on the registrations it used are
// released when the frame retires, which happens inside the context's own calls, never on
// its own: at the latest in the `nf_context_submit` that reuses its slot (the one `slots`
// frames later, which first retires the frame in that slot, waiting on the host for it
// where it is not done under `NF_BACK_PRESSURE_BLOCK`), or in `nf_context_wait`,
// `_wait_timeout`, `_try_wait`, `_wait_all`, `nf_context_readback`, `nf_context_resize` and
// `nf_context_free`. A renderer that waits for "output ready" on its GPU only and keeps
// submitting never has to call a host function to retire frames: nothing grows (the
// library keeps the times of the last 64 frames), and the frames retire on the next
// submits. It calls one on the host only (1) for the last frames before it stops, or
// before it destroys an image, buffer or semaphore it unregistered: `nf_context_wait` of
// the last frame that used it, or `nf_context_wait_all`; (2) with `NF_POST_WAIT_HOST` (CUDA
// backend), where a post pass is handed to the GPU only by a call on the context: the last
// frame's "output ready" comes once `nf_context_try_wait` (or any wait, or the next submit)
// runs after its model finished; (3) in `NF_SYNC_HOST`, where completion comes only from
// `nf_context_wait` and its kin.
typedef struct nf_ticket {
  // `sizeof(nf_ticket)` as the caller's header has it (`NF_TICKET_INIT`); the library
  // leaves it as it is.
  uint32_t struct_size;
  // The frame's number: pass it to `nf_context_wait` and its kin.
  uint64_t value;
  // "Input consumed" (`VkSemaphore`): reaches `input_consumed_value` once every read of
  // the frame's input and extra inputs is done (the pre pass's, or CUDA's). After a wait
  // for it (on the GPU, any stage, or on the host) the caller may write the input again;
  // an input image by handle is in the layout it was registered with, an imported one was
  // released to `VK_QUEUE_FAMILY_EXTERNAL` in `GENERAL` (the caller acquires it).
  uint64_t input_consumed_semaphore;
  // The value "input consumed" reaches for this frame.
  uint64_t input_consumed_value;
  // "Output ready" (`VkSemaphore`): reaches `output_ready_value` once every write of the
  // frame's output and extra outputs is complete and made available (the post pass ends
  // with a barrier to `VK_PIPELINE_STAGE_ALL_COMMANDS_BIT`, `VK_ACCESS_MEMORY_READ_BIT |
  // WRITE_BIT`, and the batch signals after it; CUDA signals after its kernels or the
  // model). A wait for it in the caller's `vkQueueSubmit` makes those writes visible to
  // the stages of its `pWaitDstStageMask` with no barrier of the caller's for memory. A host
  // wait (`vkWaitSemaphores`, `nf_context_wait`) says the writes are done; host reads of the
  // memory need the caller's own barrier to `VK_PIPELINE_STAGE_HOST_BIT` and
  // `VK_ACCESS_HOST_READ_BIT` after that wait (the post pass makes none). An output image by
  // handle is then in the layout it was registered with (`GENERAL` on
  // CUDA's route), an imported one released to `VK_QUEUE_FAMILY_EXTERNAL` in `GENERAL`.
  uint64_t output_ready_semaphore;
  // The value "output ready" reaches for this frame.
  uint64_t output_ready_value;
} nf_ticket;

// Times of one frame, in milliseconds (NaN: not measured, or no longer kept: the times of
// the last 64 retired frames are). A versioned struct the library writes:
// `nf_frame_stats s = NF_FRAME_STATS_INIT;` sets its `struct_size`.
typedef struct nf_frame_stats {
  // `sizeof(nf_frame_stats)` as the caller's header has it (`NF_FRAME_STATS_INIT`); the
  // library leaves it as it is.
  uint32_t struct_size;
  // The frame's ticket value.
  uint64_t ticket;
  // The pre pass on the GPU.
  double pre_ms;
  // The model: CUDA event time on the CUDA backend, host time on the CPU backend.
  double infer_ms;
  // The post pass on the GPU.
  double post_ms;
  // From `nf_context_submit` to retirement, host clock.
  double latency_ms;
  // Host time inside `nf_context_submit` handing the frame to CUDA and ONNX Runtime (the
  // model's run itself on the CPU backend).
  double enqueue_ms;
  // CUDA backend: idle time of the model's stream before this frame.
  double gpu_gap_ms;
  // The ring slot the frame went through (`UINT32_MAX`: not known).
  uint32_t slot;
  // The tiles the frame ran as (1: whole); the times are summed over them.
  uint32_t tiles;
  // Whether a pre pass converted the input (false: the model read the caller's buffer).
  bool pre_pass;
  // Whether a post pass converted the output (false: the model wrote the caller's buffer).
  bool post_pass;
  // Whether the frame's passes ran as CUDA kernels (rather than Vulkan compute passes).
  bool cuda_passes;
  // Padding to the struct's end (0): later fields start at its size.
  uint8_t reserved[5];
} nf_frame_stats;

#if defined(__unix__)
// What memory and semaphores are shared by: a file descriptor on POSIX
// (`OPAQUE_FD`), an NT `HANDLE` on Windows (`OPAQUE_WIN32`).
typedef int nf_external_handle;
#endif

#if defined(_WIN32)
// What memory and semaphores are shared by: a file descriptor on POSIX
// (`OPAQUE_FD`), an NT `HANDLE` on Windows (`OPAQUE_WIN32`).
typedef void *nf_external_handle;
#endif

// Memory the caller exported with `vkGetMemoryFdKHR` (`OPAQUE_FD`), and how it was
// allocated: the importer repeats the allocation exactly. The exporter's device is named
// by its `deviceUUID` and `driverUUID` (`VkPhysicalDeviceIDProperties`); an import is
// refused unless both equal the context's (`nf_context_device_identity`). Embedded in
// `nf_image_import` and `nf_buffer_import`: fixed, it never grows (new fields go at the end
// of the struct that embeds it).
typedef struct nf_memory_import {
  // The descriptor (Windows: the NT handle): the context's once an import succeeds,
  // still the caller's after a failure.
  nf_external_handle fd;
  // `VkMemoryAllocateInfo::allocationSize`.
  uint64_t allocation_size;
  // `VkMemoryAllocateInfo::memoryTypeIndex`.
  uint32_t memory_type_index;
  // Whether it was a dedicated allocation for the image or buffer.
  bool dedicated;
  // The exporter's `deviceUUID`.
  uint8_t device_uuid[16];
  // The exporter's `driverUUID`.
  uint8_t driver_uuid[16];
} nf_memory_import;

// An image whose memory the caller exported (a context of its own on the exporter's
// physical device). A versioned struct: `nf_image_import i = NF_IMAGE_IMPORT_INIT;`.
//
// What is transferred: the descriptor (`memory.fd`) becomes the context's once the import
// succeeds (Vulkan owns it: the caller neither closes nor reuses it; on Windows the library
// closes the handle); the memory itself is shared, not moved: the caller keeps its own
// image and memory, and the context makes an image of the same description over its own
// import of the memory, released when the registration is unregistered and its frames are
// done (or the context is freed). A failed import leaves the descriptor open and the
// caller's.
//
// Layout and queue family, per frame: the image is in `VK_IMAGE_LAYOUT_GENERAL` on both
// sides, and ownership moves through `VK_QUEUE_FAMILY_EXTERNAL`. An input: after writing
// it, the caller releases it (a barrier from its queue family to `VK_QUEUE_FAMILY_EXTERNAL`,
// new layout `GENERAL`) before the frame's wait is reached; the pre pass acquires it, reads
// it, and releases it back to `VK_QUEUE_FAMILY_EXTERNAL`; after "input consumed" the caller
// acquires it (`VK_QUEUE_FAMILY_EXTERNAL` to its family, from `GENERAL`). An output: the
// caller releases it in `GENERAL` before handing it over (before the frame's
// `output_free_timeline` value, or `nf_context_submit`), the post pass acquires it, writes
// it (what it held is kept where the pass does not write) and releases it; after "output
// ready" the caller acquires it from `GENERAL`.
typedef struct nf_image_import {
  // `sizeof(nf_image_import)` as the caller's header has it (`NF_IMAGE_IMPORT_INIT`).
  uint32_t struct_size;
  // The memory.
  struct nf_memory_import memory;
  // The image's `VkFormat`.
  int32_t format;
  // Width in pixels.
  uint32_t width;
  // Height in pixels.
  uint32_t height;
  // The `VkImageUsageFlags` it was created with.
  uint32_t usage;
  // Its `VkImageTiling`.
  int32_t tiling;
  // Padding to the struct's end (0): later fields start at its size.
  uint32_t reserved;
} nf_image_import;

// How pixels lie in a linear buffer: `height` rows of `width` pixels, `row_pitch` bytes
// apart (a multiple of 4, at least width times the bytes per pixel), from offset 0.
// Formats: `R8G8B8A8_UNORM`/`_SRGB`, `B8G8R8A8_UNORM`/`_SRGB` or `R16G16B16A16_SFLOAT`
// (outputs: `R8G8B8A8_UNORM`/`_SRGB`, `B8G8R8A8_UNORM` or `R16G16B16A16_SFLOAT`). Embedded
// in `nf_caller_buffer` and `nf_buffer_import`: fixed, it never grows (new fields go at the
// end of the struct that embeds it).
typedef struct nf_pixel_layout {
  // Pixels per row.
  uint32_t width;
  // Rows.
  uint32_t height;
  // Bytes from one row to the next.
  uint64_t row_pitch;
  // The pixels' `VkFormat`.
  int32_t format;
} nf_pixel_layout;

// A linear buffer whose memory the caller exported: the descriptor and the memory as for
// `nf_image_import`, and ownership moves through `VK_QUEUE_FAMILY_EXTERNAL` the same way
// (buffer barriers, no layout). A versioned struct (`NF_BUFFER_IMPORT_INIT`).
typedef struct nf_buffer_import {
  // `sizeof(nf_buffer_import)` as the caller's header has it (`NF_BUFFER_IMPORT_INIT`).
  uint32_t struct_size;
  // The memory.
  struct nf_memory_import memory;
  // The buffer's size (`VkBufferCreateInfo::size`).
  uint64_t size;
  // The `VkBufferUsageFlags` it was created with (`STORAGE_BUFFER` for the passes).
  uint32_t usage;
  // How the pixels lie in it.
  struct nf_pixel_layout layout;
} nf_buffer_import;

// A timeline semaphore the caller exported with `vkGetSemaphoreFdKHR` (`OPAQUE_FD`). The
// descriptor becomes the context's once the import succeeds (as for `nf_image_import`); the
// semaphore is shared: the caller keeps signalling its own. A versioned struct
// (`NF_SEMAPHORE_IMPORT_INIT`).
typedef struct nf_semaphore_import {
  // `sizeof(nf_semaphore_import)` as the caller's header has it (`NF_SEMAPHORE_IMPORT_INIT`).
  uint32_t struct_size;
  // The descriptor (Windows: the NT handle): the context's once the import succeeds,
  // still the caller's after a failure.
  nf_external_handle fd;
  // The `VkSemaphoreType` it was created with: only `VK_SEMAPHORE_TYPE_TIMELINE` (1)
  // imports (Vulkan cannot tell the importer).
  int32_t semaphore_type;
  // The exporter's `deviceUUID`.
  uint8_t device_uuid[16];
  // The exporter's `driverUUID`.
  uint8_t driver_uuid[16];
  // Padding to a multiple of 8 bytes (0): later fields start at the struct's size.
  uint32_t reserved;
} nf_semaphore_import;

// A log level: one of the `NF_LOG_*` values (the order of `log::Level`).
typedef int nf_log_level;

// The caller's log callback: `user` as given to `nf_set_log_callback`, the record's level
// (`NF_LOG_ERROR` … `NF_LOG_TRACE`), and its text (NUL-terminated UTF-8, valid during the
// call only: copy it to keep it; the library's names in it are the C API's).
typedef void (*nf_log_callback)(void *user, nf_log_level level, const char *message);

// cuDNN's convolution algorithm search (CUDA backend): one of the `NF_CONV_SEARCH_*` values.
typedef uint32_t nf_conv_search;

// Where a post pass waits for the model (CUDA backend): one of the `NF_POST_WAIT_*` values.
typedef uint32_t nf_post_wait;

// The precision the model runs in on the CUDA backend: one of the `NF_PRECISION_*` values.
typedef uint32_t nf_precision;

// A setting that may be left to the library: one of the `NF_TRISTATE_*` values.
typedef uint32_t nf_tristate;

// The CUDA backend's options (none is in effect on the CPU backend). A versioned struct:
// `nf_cuda_options o = NF_CUDA_OPTIONS_INIT;` sets its `struct_size`, then
// `nf_cuda_options_default(&o)` fills in the library's defaults; change what you need and
// give it to `nf_builder_set_cuda_options`. Fields may be added at the end in later versions
// (a library reads the fields the caller's `struct_size` covers, the others at their
// defaults). Each `uint8_t` field is 0 (off) or 1 (on).
typedef struct nf_cuda_options {
  // `sizeof(nf_cuda_options)` as the caller's header has it (`NF_CUDA_OPTIONS_INIT` sets it).
  uint32_t struct_size;
  // ONNX Runtime's CUDA provider: cuDNN's convolution search (`NF_CONV_SEARCH_HEURISTIC`,
  // the default, `_EXHAUSTIVE` or `_DEFAULT`).
  nf_conv_search conv_search;
  // The provider's NHWC kernels (default 1; where cuDNN refuses them with the defaults, the
  // context runs without them, logged).
  uint8_t prefer_nhwc;
  // Each convolution's bias fused into it (default 1; needs `prefer_nhwc`, else
  // `nf_context_new` refuses it).
  uint8_t fuse_conv_bias;
  // Each slot's model run replayed as a captured CUDA graph (default 1).
  uint8_t cuda_graph;
  // The hand-over: the CUDA wait for each frame's input on a side stream (default 0).
  uint8_t side_stream_wait;
  // The hand-over: where a post pass waits for the model (`NF_POST_WAIT_GPU`, the default,
  // or `NF_POST_WAIT_HOST`).
  nf_post_wait post_wait;
  // The hand-over: the pre and post passes as CUDA kernels (default 1); 0: Vulkan passes.
  uint8_t cuda_passes;
  // The model's preparation: exact graph rewrites at load (default 1).
  uint8_t rewrite_graph;
  // The model's preparation: the first frames run before cuDNN's fused kernels are built
  // (default 1; `nf_context_wait_settled` waits for the fused session).
  uint8_t fast_start;
  // Padding (0).
  uint8_t reserved;
  // The model's preparation: the precision (`NF_PRECISION_AUTO`, the default, `_FP32` or
  // `_FP16`).
  nf_precision precision;
  // The model's preparation: each convolution with its bias and activation as one fused
  // cuDNN kernel (`NF_TRISTATE_DEFAULT`: where the model runs in fp16).
  nf_tristate fuse_conv_act;
  // Padding to a multiple of 8 bytes (0): later fields start at the struct's size.
  uint32_t reserved_end;
} nf_cuda_options;

// Memory the caller exported and the context imported once (`nf_context_import_memory`),
// for planar frames to be placed in (`nf_planar_frame`): a number above 0, never reused by
// that context. 0 is no memory. Released with `nf_context_release_memory`.
typedef uint64_t nf_memory;

// One plane of a planar frame (`nf_planar_frame`): where it lies in memory imported with
// `nf_context_import_memory`. An element of an array: fixed, it never grows.
typedef struct nf_plane {
  // The imported memory it lies in.
  nf_memory memory;
  // Where its first row starts, in bytes from the start of the allocation (a multiple of 4).
  uint64_t offset;
  // Bytes from one row to the next: a multiple of 4, at least a row's (width × 4 for
  // `VK_FORMAT_R32_SFLOAT`, width × 2 for `VK_FORMAT_R16_SFLOAT`, width for `VK_FORMAT_R8_UNORM`).
  uint64_t row_pitch;
} nf_plane;

// A planar float frame in imported memory: one plane (grey; as an output, for a
// one-channel model only) or three (R, G, B, in that order in `planes`, wherever each lies),
// every plane of `format`, `width`×`height` pixels. Each plane needs its own bytes (an
// output's planes must not overlap); the bytes between rows and around the planes are
// neither read nor written. A versioned struct: `nf_planar_frame f = NF_PLANAR_FRAME_INIT;`
// sets `struct_size` and zeroes the rest.
//
// An input's values are colour values as an image's are (the model's normalization
// applied, alpha 1); an output's are written as the model gives them, unclamped (a
// four-channel model's alpha dropped). The memory is used as `nf_buffer_import` memory is:
// it is the caller's to write before the frame's waits are reached and to read after its
// "output ready"; no layout, no queue family transfer of its own beyond the import's.
typedef struct nf_planar_frame {
  // `sizeof(nf_planar_frame)` as the caller's header has it (`NF_PLANAR_FRAME_INIT`).
  uint32_t struct_size;
  // The planes' `VkFormat`: `VK_FORMAT_R32_SFLOAT` (100), `VK_FORMAT_R16_SFLOAT` (76) or
  // `VK_FORMAT_R8_UNORM` (9).
  int32_t format;
  // Width in pixels: the context's frame size (inputs) or output size (outputs).
  uint32_t width;
  // Height in pixels.
  uint32_t height;
  // The planes, `plane_count` of them: R, G, B (or one, grey). Read during the call only.
  const struct nf_plane *planes;
  // The number of `planes`: 1 or 3.
  size_t plane_count;
} nf_planar_frame;

// One of the caller's images, by handle (a context on the caller's device). A versioned
// struct: `nf_caller_image i = NF_CALLER_IMAGE_INIT;` sets `struct_size` and zeroes the rest.
//
// Inputs: `R8G8B8A8_UNORM`/`_SRGB`, `B8G8R8A8_UNORM`/`_SRGB` or `R16G16B16A16_SFLOAT` (and,
// for a model's extra inputs, `R16_SFLOAT`, `R32_SFLOAT`, `R16G16_SFLOAT`, `R32G32_SFLOAT`,
// `R32G32B32A32_SFLOAT`), of the frame size, with `NF_INPUT_IMAGE_USAGE`. Layout: the image
// is in `layout` (`VK_IMAGE_LAYOUT_GENERAL` or `_SHADER_READ_ONLY_OPTIMAL`) when the frame's
// `wait_timeline` value is reached (the caller's submission that signals it transitions it
// there first), or at `nf_context_submit` for a frame without a wait; the pre pass samples
// it in that layout and leaves it so (after "input consumed" it is still in `layout`).
//
// Outputs: `R8G8B8A8_UNORM` or `R16G16B16A16_SFLOAT`, of the output size, with
// `NF_OUTPUT_IMAGE_USAGE`. Layout: at `nf_context_submit` (and until the frame's
// `output_free_timeline` value) the image may be in any layout: the post pass transitions
// it from `VK_IMAGE_LAYOUT_UNDEFINED` (what it held is discarded) to `GENERAL`, writes it,
// and transitions it to `layout` (any layout but `UNDEFINED` and `PREINITIALIZED`), which it
// is in once "output ready" is reached. Registered with its memory
// (`nf_context_register_output_image_with_memory`) on the CUDA backend, where CUDA writes it
// in place, `layout` must be `GENERAL` and the image stays in `GENERAL` throughout (any
// other layout makes its frames take the Vulkan passes, logged).
//
// Ownership: the image stays the caller's (never destroyed by the context); it is used on
// the context's queue family (or created with `VK_SHARING_MODE_CONCURRENT`): the context
// records no queue family transfer for it, and the caller records none either.
typedef struct nf_caller_image {
  // `sizeof(nf_caller_image)` as the caller's header has it (`NF_CALLER_IMAGE_INIT`).
  uint32_t struct_size;
  // The `VkImage`.
  uint64_t image;
  // Its `VkFormat`.
  int32_t format;
  // Width in pixels.
  uint32_t width;
  // Height in pixels.
  uint32_t height;
  // The `VkImageUsageFlags` it was created with.
  uint32_t usage;
  // Its `VkImageTiling`.
  int32_t tiling;
  // The `VkImageLayout` it is in when handed over (inputs: when the frame's wait is
  // reached) or comes back in (outputs: when "output ready" is reached).
  int32_t layout;
} nf_caller_image;

// One of the caller's linear buffers, by handle (a context on the caller's device). No
// layout; used on the context's queue family (or `VK_SHARING_MODE_CONCURRENT`), no queue
// family transfer. Stays the caller's. A versioned struct (`NF_CALLER_BUFFER_INIT`).
typedef struct nf_caller_buffer {
  // `sizeof(nf_caller_buffer)` as the caller's header has it (`NF_CALLER_BUFFER_INIT`).
  uint32_t struct_size;
  // The `VkBuffer`.
  uint64_t buffer;
  // Its size in bytes (at least `row_pitch` times `height`).
  uint64_t size;
  // The `VkBufferUsageFlags` it was created with (`STORAGE_BUFFER` is needed).
  uint32_t usage;
  // How the pixels lie in it.
  struct nf_pixel_layout layout;
} nf_caller_buffer;

// The memory one of the caller's images is bound to (at offset 0), allocated exportable
// (`VkExportMemoryAllocateInfo` with `OPAQUE_FD`, on a device with
// `VK_KHR_external_memory_fd`): with it the CUDA backend's passes reach the image. The
// memory stays the caller's. A versioned struct (`NF_CALLER_MEMORY_INIT`).
typedef struct nf_caller_memory {
  // `sizeof(nf_caller_memory)` as the caller's header has it (`NF_CALLER_MEMORY_INIT`).
  uint32_t struct_size;
  // The `VkDeviceMemory`.
  uint64_t memory;
  // `VkMemoryAllocateInfo::allocationSize`.
  uint64_t allocation_size;
  // Whether it is a dedicated allocation for the image.
  bool dedicated;
  // Padding to the struct's end (0): later fields start at its size.
  uint8_t reserved[7];
} nf_caller_memory;

// CUDA where the device has a CUDA twin and ONNX Runtime's CUDA provider registers;
// otherwise the CPU backend (see `nf_context_fallback_reason`).
#define NF_BACKEND_AUTO 0

// The CUDA backend; building the context fails where it is unavailable.
#define NF_BACKEND_CUDA 1

// The CPU backend: host-visible Vulkan buffers, ONNX Runtime's CPU provider.
#define NF_BACKEND_CPU 2

// Wait on the host for the oldest frame to finish, then reuse its slot (the default).
#define NF_BACK_PRESSURE_BLOCK 0

// Submit nothing and return at once: the frame is dropped, its ticket's value is 0.
#define NF_BACK_PRESSURE_SKIP 1

// Not declared: the model's shapes and metadata decide.
#define NF_LAYOUT_MODEL 0

// `[1, C, H, W]`.
#define NF_LAYOUT_NCHW 1

// `[1, H, W, C]`.
#define NF_LAYOUT_NHWC 2

// Not declared: the model's metadata decides (RGB without any).
#define NF_COLOR_ORDER_MODEL 0

// Channels R, G, B.
#define NF_COLOR_ORDER_RGB 1

// Channels B, G, R (an OpenCV-trained model).
#define NF_COLOR_ORDER_BGR 2

// Not declared: the model's metadata decides ([0, 1] without any).
#define NF_NORMALIZATION_MODEL 0

// [0, 1].
#define NF_NORMALIZATION_UNIT 1

// [-1, 1]: t = 2x - 1.
#define NF_NORMALIZATION_SIGNED 2

// [0, 255]: t = 255x.
#define NF_NORMALIZATION_BYTE 3

// `t = (x - mean[c]) / std[c]`, with `mean` and `std` of 3 floats each, in the tensor's
// channel order (no std of 0).
#define NF_NORMALIZATION_MEAN_STD 4

// Timeline semaphores are shared on the GPU: frames may wait for the caller's timelines
// and the caller waits on the ticket's semaphores. Always so on the caller's device.
#define NF_SYNC_GPU 0

// The driver cannot share semaphores across devices (lavapipe, import by fd): the
// caller submits once its writes are complete, frames carry no waits, and completion
// comes from `nf_context_wait` and its kin.
#define NF_SYNC_HOST 1

// No message (as `max_level`: turns the callback off).
#define NF_LOG_OFF 0

// Errors: something failed that a call's status does not report (a context freed while
// its frames never finished).
#define NF_LOG_ERROR 1

// Warnings: a fallback or an option not in effect (the CPU backend instead of CUDA, cuDNN
// refusing a kernel), said once.
#define NF_LOG_WARN 2

// What the library chose and why (a slow path taken, an option not in effect).
#define NF_LOG_INFO 3

// Steps of the set-up, with times.
#define NF_LOG_DEBUG 4

// Everything, per frame.
#define NF_LOG_TRACE 5

// fp16 where the model gains from it and a probe frame agrees with fp32; else the model's own.
#define NF_PRECISION_AUTO 0

// The model's own precision, never converted.
#define NF_PRECISION_FP32 1

// An fp32 model converted to fp16 without the check (CUDA backend).
#define NF_PRECISION_FP16 2

// cuDNN's heuristics (the default).
#define NF_CONV_SEARCH_HEURISTIC 0

// Every algorithm timed once per shape.
#define NF_CONV_SEARCH_EXHAUSTIVE 1

// cuDNN's default algorithm, no search.
#define NF_CONV_SEARCH_DEFAULT 2

// On the GPU (the default).
#define NF_POST_WAIT_GPU 0

// The post pass is submitted once the host has seen the model finish (refused on a
// caller's device with a single queue, where it would deadlock).
#define NF_POST_WAIT_HOST 1

// The library's default.
#define NF_TRISTATE_DEFAULT 0

// On.
#define NF_TRISTATE_ON 1

// Off.
#define NF_TRISTATE_OFF 2

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The version of the library that runs, e.g. "0.1.0" (compare it with the header's
// `NF_VERSION`): a static string, never to be freed. A program built against a header of
// version M.m.p runs with a library of the same M (and, while M is 0, the same m) and a
// version at least as new; `nf_version_number()` compares as a number.
//
// Status: none (it returns the text). Callable at any time; it does not touch the last
// error message.
const char *nf_version(void);

// The version of the library that runs as one number, `MAJOR * 1000000 + MINOR * 1000 +
// PATCH` (compare it with the header's `NF_VERSION_NUMBER`).
//
// Status: none (it returns the number). Callable at any time; it does not touch the last
// error message.
uint32_t nf_version_number(void);

// The message of the last call on this thread that failed, or "" when the last call
// succeeded (`*_free` calls do not count): NUL-terminated UTF-8, owned by the library,
// valid until the next `nf_*` call on this thread other than a `*_free` (copy it to keep
// it). Never NULL; it does not reset the message.
//
// Status: none (it returns the text).
const char *nf_last_error_message(void);

// Makes a builder for the ONNX model at `model_path` (NUL-terminated; copied, so the
// string may be freed on return) with the library's defaults: backend auto, 3 slots,
// precision auto, no frame size. The file is read by `nf_context_new`, not here.
// On success `*out` is a new builder the caller frees with `nf_builder_free`; on failure
// `*out` is left as it was.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `model_path` or `out` is NULL, or
// `model_path` is empty; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `model_path` is NULL or a NUL-terminated string; `out` is NULL or writable.
enum nf_status nf_builder_new(const char *model_path, struct nf_builder **out);

// Frees a builder made by `nf_builder_new`. NULL is ignored. Contexts built from it
// are unaffected.
//
// The last error message stays as it was.
//
// Status: none (it returns nothing).
//
// # Safety
// `b` is NULL or a builder of `nf_builder_new` not freed before and not in use.
void nf_builder_free(struct nf_builder *b);

// Sets the backend: `NF_BACKEND_AUTO` (the default), `NF_BACKEND_CUDA` or `NF_BACKEND_CPU`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `backend` is none of
// the `NF_BACKEND_*` values; `NF_STATUS_INTERNAL`: a bug. (So for every `nf_builder_set_*` call:
// a value it refuses is `NF_STATUS_INVALID_ARGUMENT`, with a message naming it; what the value
// means for the device is checked by `nf_context_new`.)
//
// # Safety
// `b` is NULL or a live builder, not used by another thread during the call (so for
// every `nf_builder_set_*` call).
enum nf_status nf_builder_set_backend(struct nf_builder *b, nf_backend backend);

// Sets the input frame size in pixels (both above 0). A context needs one to be built;
// `nf_context_infer_rgba8` changes it to each input's size.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or a side is 0;
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_frame_size(struct nf_builder *b, uint32_t width, uint32_t height);

// Sets the number of frames that may be in flight at once (the ring's slots, 3 by default).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `slots` is 0;
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_slots(struct nf_builder *b, uint32_t slots);

// Names the ONNX Runtime library to load (NUL-terminated; copied). Without it the
// library tries `ORT_DYLIB_PATH`, then `.runtime/ort-gpu` or `.runtime/ort-cpu` under
// the working directory or the executable's parent directories. ONNX Runtime is loaded
// once per process: the first context decides.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` or `path` is NULL or `path` is
// empty; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// As `nf_builder_set_backend`; `path` is NULL or a NUL-terminated string.
enum nf_status nf_builder_set_ort_library(struct nf_builder *b, const char *path);

// Sets the bound on every host wait for a frame, in milliseconds (default 30000, above
// 0): a wait that runs out returns `NF_STATUS_TIMEOUT` and the frame stays in flight.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `milliseconds` is 0;
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_frame_timeout_ms(struct nf_builder *b, uint64_t milliseconds);

// Sets what `nf_context_submit` does when every slot is busy: `NF_BACK_PRESSURE_BLOCK`
// (the default) or `NF_BACK_PRESSURE_SKIP`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `policy` is none of
// the `NF_BACK_PRESSURE_*` values; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_back_pressure(struct nf_builder *b, nf_back_pressure policy);

// Runs each frame as tiles of `width`x`height` input pixels with `overlap` pixels of
// context (each side larger than three times the overlap); the post pass blends the
// tiles' shared strips. With an overlap of at least the model's receptive radius the
// result equals the untiled one.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL, a side is 0 or not
// larger than three overlaps; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_tiling(struct nf_builder *b,
                                     uint32_t width,
                                     uint32_t height,
                                     uint32_t overlap);

// A memory budget in bytes for the slot buffers: a frame size whose buffers would exceed
// it runs in tiles, the largest square ones that fit.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
// bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_memory_budget(struct nf_builder *b, uint64_t bytes);

// Builds the context's own device on the physical device whose `deviceUUID` is the 16
// bytes at `uuid` (for import by file descriptor: the renderer's). `nf_context_new` only.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` or `uuid` is NULL;
// `NF_STATUS_INTERNAL`: a bug. (A UUID no device has: `NF_STATUS_NO_DEVICE` from
// `nf_context_new`.)
//
// # Safety
// As `nf_builder_set_backend`; `uuid` is NULL or points to 16 readable bytes.
enum nf_status nf_builder_set_device_uuid(struct nf_builder *b, const uint8_t *uuid);

// Builds the context's own device on the physical device at `index` in
// `vkEnumeratePhysicalDevices`' order. `nf_context_new` only.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
// bug. (An index no device has: `NF_STATUS_NO_DEVICE` from `nf_context_new`.)
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_device_index(struct nf_builder *b, uint32_t index);

// CPU threads for ONNX Runtime's CPU provider (default, or 0: ONNX Runtime's choice).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
// bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_threads(struct nf_builder *b, uint32_t threads);

// Runs the context's own Vulkan instance under the Khronos validation layer (default
// off; `nf_context_new` fails where the layer is not installed). On the caller's
// device, validation is the caller's instance's.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
// bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_validation(struct nf_builder *b, bool on);

// Times the pre and post passes with Vulkan timestamp queries (default on; off: the
// stats' `pre_ms` and `post_ms` are NaN).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
// bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_gpu_timestamps(struct nf_builder *b, bool on);

// Waits for frames by polling on the host instead of sleeping (default off).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
// bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_spin_wait(struct nf_builder *b, bool on);

// Declares the layout of every image tensor of the model (`NF_LAYOUT_NCHW` or
// `_NHWC`), where its shapes are ambiguous or its metadata says nothing.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `layout` is
// `NF_LAYOUT_MODEL` or none of the `NF_LAYOUT_*` values; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_layout(struct nf_builder *b, nf_layout layout);

// Declares the colour order of every image tensor (`NF_COLOR_ORDER_RGB` or `_BGR`).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `order` is
// `NF_COLOR_ORDER_MODEL` or none of the `NF_COLOR_ORDER_*` values; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// As `nf_builder_set_backend`.
enum nf_status nf_builder_set_color_order(struct nf_builder *b, nf_color_order order);

// Declares the value range of every float image tensor (`NF_NORMALIZATION_UNIT`,
// `_SIGNED`, `_BYTE`, or `_MEAN_STD` with `mean` and `std`, 3 floats each, read only
// then; NULL otherwise is fine).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL, `normalization` is
// `NF_NORMALIZATION_MODEL` or none of the values, or for `_MEAN_STD` `mean` or `std` is NULL or
// holds a value that is not finite or a std of 0; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// As `nf_builder_set_backend`; `mean` and `std` are NULL or point to 3 readable floats.
enum nf_status nf_builder_set_normalization(struct nf_builder *b,
                                            nf_normalization normalization,
                                            const float *mean,
                                            const float *std);

// Declares layout, colour order and range of every image tensor at once, replacing
// the three setters above; `NF_*_MODEL` leaves that one to the model.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL, a value is none of its
// constants, or `_MEAN_STD`'s `mean` or `std` is NULL or not acceptable; `NF_STATUS_INTERNAL`: a
// bug.
//
// # Safety
// As `nf_builder_set_normalization`.
enum nf_status nf_builder_declare(struct nf_builder *b,
                                  nf_layout layout,
                                  nf_color_order color,
                                  nf_normalization normalization,
                                  const float *mean,
                                  const float *std);

// Declares one tensor by name (NUL-terminated UTF-8; copied): it wins over the
// declarations for every tensor. `NF_*_MODEL` leaves that one to those and the model.
//
// Status: as `nf_builder_declare`, and `NF_STATUS_INVALID_ARGUMENT` where `name` is NULL or not
// UTF-8 (a name the model lacks: `NF_STATUS_MODEL_CONTRACT` from `nf_context_new`).
//
// # Safety
// As `nf_builder_set_normalization`; `name` is NULL or a NUL-terminated string.
enum nf_status nf_builder_declare_tensor(struct nf_builder *b,
                                         const char *name,
                                         nf_layout layout,
                                         nf_color_order color,
                                         nf_normalization normalization,
                                         const float *mean,
                                         const float *std);

// Builds a context on a Vulkan device of its own from the builder's options. The
// builder is borrowed: it is unchanged, may build more contexts, and is still the
// caller's to free. On success `*out` is a new context the caller frees with
// `nf_context_free`; on failure `*out` is left as it was and the message says why
// (for a missing model file: `NF_STATUS_MODEL_CONTRACT`, naming the file).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` or `out` is NULL, or an option
// does not fit (no frame size, tiles the model refuses); `NF_STATUS_MODEL_CONTRACT` where the
// model file is missing or unreadable, or does not fit the pipeline; `NF_STATUS_RUNTIME_MISSING`
// where ONNX Runtime cannot be loaded; `NF_STATUS_NO_DEVICE` where there is no Vulkan loader,
// driver or device matching the selector; `NF_STATUS_PROVIDER_UNAVAILABLE` for `NF_BACKEND_CUDA`
// where CUDA or its provider cannot be used (`NF_BACKEND_AUTO` runs the CPU backend instead,
// logged); `NF_STATUS_UNSUPPORTED` where the device lacks what is needed (the validation layer
// asked for and not installed); `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`, `NF_STATUS_ONNX_RUNTIME`: a
// call of theirs failed; `NF_STATUS_DEVICE_LOST`; `NF_STATUS_IO`: the tune cache or a converted
// model could not be read or written; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `b` is NULL or a live builder, not used by another thread during the call; `out` is
// NULL or writable.
enum nf_status nf_context_new(const struct nf_builder *b, struct nf_context **out);

// Frees a context, after its frames in flight finish (each wait bounded by the frame
// timeout; frames that never finish leave the context's GPU objects leaked rather than
// destroyed in use, with an error logged). NULL is ignored. The caller's own images,
// buffers, semaphores and device are never destroyed: free the context before them.
//
// The last error message stays as it was.
//
// Status: none (it returns nothing). A frame that never finishes is logged (`NF_LOG_ERROR`).
//
// # Safety
// `c` is NULL or a context of `nf_context_new`/`nf_context_new_on_device` not freed
// before and not in use.
void nf_context_free(struct nf_context *c);

// The backend that runs, "cuda" or "cpu", into `buf` by the string convention (see the
// header's preamble).
//
// Status: `NF_STATUS_OK` (also for a query, `buf` NULL); `NF_STATUS_BUFFER_TOO_SMALL` (with
// `*len` the size needed); `NF_STATUS_INVALID_ARGUMENT` where `c` or `len` is NULL;
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context; `len` is NULL or points to a `size_t`; `buf` is NULL or
// points to `*len` writable bytes.
enum nf_status nf_context_backend_name(const struct nf_context *c, char *buf, size_t *len);

// The Vulkan device's name (`deviceName`), into `buf` by the string convention.
//
// Status: as `nf_context_backend_name`.
//
// # Safety
// As `nf_context_backend_name`.
enum nf_status nf_context_device_name(const struct nf_context *c, char *buf, size_t *len);

// Why `NF_BACKEND_AUTO` fell back to the CPU backend, or "" where it did not, into
// `buf` by the string convention.
//
// Status: as `nf_context_backend_name`.
//
// # Safety
// As `nf_context_backend_name`.
enum nf_status nf_context_fallback_reason(const struct nf_context *c, char *buf, size_t *len);

// The context's whole report as text, one `key: value` line each, into `buf` by the
// string convention: the backend asked for and running (and why it fell back), the
// Vulkan device (name, type, driver, UUIDs; whether it is the caller's), the CUDA
// device, ONNX Runtime (version, library, providers), the precision, the tuning in
// effect and where it came from, the sync mode, the ring, the sizes, the model's
// tensors and the start-up times. For logs and people; its lines may change between
// versions (programs read the dedicated calls).
//
// Status: as `nf_context_backend_name`.
//
// # Safety
// As `nf_context_backend_name`.
enum nf_status nf_context_report(const struct nf_context *c, char *buf, size_t *len);

// The current input frame size in pixels.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `width` or `height` is NULL;
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context; `width` and `height` are NULL or writable.
enum nf_status nf_context_frame_size(const struct nf_context *c, uint32_t *width, uint32_t *height);

// The output size in pixels of the current frame size (the frame size times the scale).
//
// Status: as `nf_context_frame_size`.
//
// # Safety
// `c` is NULL or a live context; `width` and `height` are NULL or writable.
enum nf_status nf_context_output_size(const struct nf_context *c,
                                      uint32_t *width,
                                      uint32_t *height);

// The model's scale: output width over input width (`x`), output height over input
// height (`y`). An input of WxH gives an output of (W*x)x(H*y).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `x` or `y` is NULL;
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context; `x` and `y` are NULL or writable.
enum nf_status nf_context_scale(const struct nf_context *c, uint32_t *x, uint32_t *y);

// Changes the frame size (both above 0; the output size follows the scale). The
// context's buffers are made anew and its frames in flight are waited for first;
// registrations of the old size are refused by the frames after it: register the
// new size's images and buffers.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL, a side is 0, or the
// model or tiling does not take the size; `NF_STATUS_MODEL_CONTRACT` where the model fails at
// that size; `NF_STATUS_TIMEOUT` where a frame in flight does not finish within the frame
// timeout; `NF_STATUS_UNSUPPORTED` where the device's limits do not allow it; `NF_STATUS_VULKAN`,
// `NF_STATUS_CUDA`, `NF_STATUS_ONNX_RUNTIME`: a call of theirs failed; `NF_STATUS_DEVICE_LOST`;
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call.
enum nf_status nf_context_resize(struct nf_context *c, uint32_t width, uint32_t height);

// The context's sync mode, `NF_SYNC_GPU` or `NF_SYNC_HOST`, into `*mode`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` or `mode` is NULL;
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context; `mode` is NULL or writable.
enum nf_status nf_context_sync_mode(const struct nf_context *c, nf_sync_mode *mode);

// The ring's state: its slots (frames that may be in flight), the frames in flight now,
// and the frames dropped so far under `NF_BACK_PRESSURE_SKIP`. Any of the out pointers
// may be NULL (not written).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL; `NF_STATUS_INTERNAL`: a
// bug.
//
// # Safety
// `c` is NULL or a live context; each out pointer is NULL or writable.
enum nf_status nf_context_ring(const struct nf_context *c,
                               uint32_t *slots,
                               uint32_t *in_flight,
                               uint64_t *skipped);

// The context's device identity, which memory and semaphores imported by fd must come
// from: its `deviceUUID` and `driverUUID`, 16 bytes each, into `device_uuid` and
// `driver_uuid`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `device_uuid` or `driver_uuid`
// is NULL; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context; `device_uuid` and `driver_uuid` are NULL or point to 16
// writable bytes each.
enum nf_status nf_context_device_identity(const struct nf_context *c,
                                          uint8_t *device_uuid,
                                          uint8_t *driver_uuid);

// Waits up to `timeout_ms` for the fused session that fast start builds beside the first
// frames (CUDA backend), and says in `*settled` whether the context runs it now (true
// at once where there is none to wait for). Frames before it may differ from later
// ones in the last bit of a channel: a program that compares results byte for byte
// waits here first.
//
// Status: `NF_STATUS_OK` (settled or not: see `*settled`); `NF_STATUS_INVALID_ARGUMENT` where `c`
// or `settled` is NULL; `NF_STATUS_TIMEOUT` where frames in flight do not finish before the
// switch; `NF_STATUS_CUDA`, `NF_STATUS_ONNX_RUNTIME`: building the fused session failed;
// `NF_STATUS_DEVICE_LOST`; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call; `settled`
// is NULL or writable.
enum nf_status nf_context_wait_settled(struct nf_context *c, uint64_t timeout_ms, bool *settled);

// One frame from the host, for tools: `input` holds `width`x`height` RGBA8 texels
// (4 bytes each, rows of `width` texels without padding, top row first), and the
// output, (`width`*x)x(`height`*y) RGBA8 texels in the same layout (x, y from
// `nf_context_scale`), is written to `output`, which holds `output_len` bytes, at least
// that many (else `NF_STATUS_BUFFER_TOO_SMALL`, and nothing runs). Where the size
// differs from the context's frame size, the context is resized first (its buffers are
// made anew; the session stays). Blocks until the frame is done. Both buffers are
// borrowed for the call only.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_BUFFER_TOO_SMALL` where `output_len` is short (nothing
// runs); `NF_STATUS_INVALID_ARGUMENT` where `c`, `input` or `output` is NULL, or a side is 0 or
// the output too large; and as `nf_context_resize` (a new size) and `nf_context_submit`
// (`NF_STATUS_TIMEOUT`, `NF_STATUS_DEVICE_LOST`, `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`,
// `NF_STATUS_ONNX_RUNTIME`); `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call; `input` is
// NULL or points to `width`*`height`*4 readable bytes; `output` is NULL or points to
// `output_len` writable bytes, not overlapping `input`.
enum nf_status nf_context_infer_rgba8(struct nf_context *c,
                                      const uint8_t *input,
                                      uint32_t width,
                                      uint32_t height,
                                      uint8_t *output,
                                      size_t output_len);

// Makes a queue lock, unlocked. On success `*out` is a new lock the caller frees with
// `nf_queue_lock_free`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `out` is NULL;
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `out` is NULL or writable.
enum nf_status nf_queue_lock_new(struct nf_queue_lock **out);

// Frees the caller's reference to a queue lock (contexts keep theirs). NULL is ignored.
// Freeing does not release it: a thread that holds it releases it first.
//
// Status: none (it returns nothing). The last error message stays as it was.
//
// # Safety
// `lock` is NULL or a lock of `nf_queue_lock_new` not freed before and not in use.
void nf_queue_lock_free(struct nf_queue_lock *lock);

// Takes the lock, waiting while another thread (or a context's submission) holds it.
// Hold it only around the caller's own `vkQueueSubmit` to the shared queues, never
// across an `nf_*` call on a context that uses it (that call would wait for it forever).
// The same thread releases it. Taking it twice on one thread is refused.
//
// Status: `NF_STATUS_OK` once held; `NF_STATUS_INVALID_ARGUMENT` where `lock` is NULL or
// this thread holds it already; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `lock` is NULL or a live lock.
enum nf_status nf_queue_lock_acquire(const struct nf_queue_lock *lock);

// Releases the lock this thread took with `nf_queue_lock_acquire`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `lock` is NULL or this thread
// does not hold it; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `lock` is NULL or a live lock.
enum nf_status nf_queue_lock_release(const struct nf_queue_lock *lock);

// Builds a context on the caller's Vulkan device and queue (bring your own device), from
// the builder's options (borrowed, as by `nf_context_new`; a device selector of the
// builder does not apply). The context then takes the caller's images, buffers and
// timeline semaphores by handle (`nf_context_register_*`), records and submits its passes
// on `device->queue`, and its tickets carry its own timeline semaphores of that device,
// for the caller's `vkQueueSubmit`. On success `*out` is a new context the caller frees
// with `nf_context_free` before it destroys the device or the instance.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b`, `device`, `out` or a
// handle `device` must give is NULL, or an option does not fit the device (the frame size
// unset or too large, `NF_POST_WAIT_HOST` on a single queue); `NF_STATUS_STRUCT_SIZE` where
// `device->struct_size` is not set; `NF_STATUS_UNSUPPORTED` where the device lacks what is
// needed (Vulkan 1.2, timeline semaphores, a format or limit), or a newer header's field is
// set; `NF_STATUS_MODEL_CONTRACT` where the model file is missing, unreadable or does not
// fit the pipeline; `NF_STATUS_RUNTIME_MISSING` where ONNX Runtime cannot be loaded;
// `NF_STATUS_PROVIDER_UNAVAILABLE` for `NF_BACKEND_CUDA` where CUDA or its provider cannot
// be used (`NF_BACKEND_AUTO` then runs the CPU backend, logged); `NF_STATUS_VULKAN`,
// `NF_STATUS_CUDA`, `NF_STATUS_ONNX_RUNTIME`: a call of theirs failed;
// `NF_STATUS_DEVICE_LOST`: the device was lost; `NF_STATUS_IO`: the tune cache or a
// converted model could not be read or written; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `b` is NULL or a live builder; `device` is NULL or points to a description (of
// `device->struct_size` readable bytes) whose
// handles are valid as it says (the device created from the instance on the physical
// device with `timelineSemaphore` enabled and the extensions it lists, the queues of its
// family), and outlive the context and every registration made on it; the caller
// submits to the queues only while holding `queue_lock` (or, without one, never while a
// call on the context runs); `out` is NULL or writable.
enum nf_status nf_context_new_on_device(const struct nf_builder *b,
                                        const struct nf_vulkan_device *device,
                                        struct nf_context **out);

// Submits one frame and writes its ticket to `*ticket` (`value` 0: every slot was busy
// and the builder's policy is `NF_BACK_PRESSURE_SKIP`, so nothing was submitted). It first
// retires the frame in the slot it reuses (the one `slots` frames back; see `nf_ticket`):
// with `NF_BACK_PRESSURE_BLOCK`, where that frame is not done, it waits on the host for it
// (bounded by the frame timeout). The frame's waits (`nf_frame`: where and at which stage;
// every point of `wait_timeline`, `waits`, `output_free_timeline` and `output_free`) are GPU
// waits on the caller's registered timelines (`NF_SYNC_GPU`), and its signals
// (`signal_input_consumed`, `signal_output_ready`) set the caller's timelines when the
// ticket's points of those names are reached; on a queue shared with
// the caller their values must come from submissions made before this call, or from the
// host. On the CPU backend the model runs inside this call, after host waits for them.
// Refused, with the model's tensors listed, where the frame leaves out an extra input,
// names one the model lacks or twice, or a registration of another size.
//
// Status: `NF_STATUS_OK` (also for a dropped frame, `value` 0); `NF_STATUS_INVALID_ARGUMENT`
// where `c`, `frame` or `ticket` is NULL, a number is not a registration of that kind on
// this context (the message names the field: `nf_frame.waits[1].timeline`), a list is NULL
// with a count above 0, the frame waits or signals in `NF_SYNC_HOST` (a timeline field or a
// list set), its extra inputs or outputs do not fit
// the model, a registration is of another size, or the context cannot take frames after a
// failed one (free it); `NF_STATUS_STRUCT_SIZE` where `frame->struct_size` or
// `ticket->struct_size` is not set; `NF_STATUS_UNSUPPORTED` where a newer header's field of
// `nf_frame` is set; `NF_STATUS_TIMEOUT` where the slot's frame (`NF_BACK_PRESSURE_BLOCK`)
// or, on the CPU backend, a waited value did not come within the frame timeout (nothing was
// submitted); `NF_STATUS_DEVICE_LOST`; `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`,
// `NF_STATUS_ONNX_RUNTIME`: a call of theirs failed; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call; `frame` is
// NULL or points to `frame->struct_size` readable bytes, its arrays holding their counts of
// readable entries; `ticket` is NULL or points to `ticket->struct_size` writable bytes.
enum nf_status nf_context_submit(struct nf_context *c,
                                 const struct nf_frame *frame,
                                 struct nf_ticket *ticket);

// Waits on the host until the frame of ticket value `ticket` is done (its output
// written: "output ready" reached) and retires it, bounded by the builder's frame timeout,
// and writes its times to `*stats` (NULL: not wanted). A frame that retired already
// returns at once. Frames retire in order: the ones before it are waited for too.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL or `ticket` is not
// a ticket of this context (0, a dropped frame, is none); `NF_STATUS_STRUCT_SIZE` where
// `stats->struct_size` is not set; `NF_STATUS_TIMEOUT` where the frame is not done within
// the bound (it stays in flight: wait again later); `NF_STATUS_DEVICE_LOST`;
// `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`: a call of theirs failed; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call; `stats` is
// NULL or points to `stats->struct_size` writable bytes.
enum nf_status nf_context_wait(struct nf_context *c, uint64_t ticket, struct nf_frame_stats *stats);

// `nf_context_wait` with its own bound, in nanoseconds.
//
// Status: as `nf_context_wait` (`NF_STATUS_TIMEOUT` after `timeout_ns`).
//
// # Safety
// As `nf_context_wait`.
enum nf_status nf_context_wait_timeout(struct nf_context *c,
                                       uint64_t ticket,
                                       uint64_t timeout_ns,
                                       struct nf_frame_stats *stats);

// Whether the frame is done, without waiting: `*done` true (and its times in `*stats`,
// where not NULL) once it is, false while it is in flight. It retires the frames up to it
// that are done, and hands the GPU the post passes whose model finished
// (`NF_POST_WAIT_HOST`).
//
// Status: `NF_STATUS_OK` (done or not); `NF_STATUS_INVALID_ARGUMENT` where `c` or `done` is
// NULL or `ticket` is not a ticket of this context; `NF_STATUS_STRUCT_SIZE` where
// `stats->struct_size` is not set; `NF_STATUS_DEVICE_LOST`; `NF_STATUS_VULKAN`,
// `NF_STATUS_CUDA`: a call of theirs failed; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// As `nf_context_wait`; `done` is NULL or writable.
enum nf_status nf_context_try_wait(struct nf_context *c,
                                   uint64_t ticket,
                                   bool *done,
                                   struct nf_frame_stats *stats);

// Waits on the host, up to `timeout_ns` nanoseconds, until the frame has read its input
// ("input consumed" reached): the caller may write it again. For `NF_SYNC_HOST`, where the
// ticket's semaphores are not the caller's to wait on, and for tests. It retires nothing.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL or `ticket` is not a
// ticket of this context; `NF_STATUS_TIMEOUT` after `timeout_ns`; `NF_STATUS_DEVICE_LOST`;
// `NF_STATUS_VULKAN`: the wait failed; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call.
enum nf_status nf_context_wait_input_consumed(struct nf_context *c,
                                              uint64_t ticket,
                                              uint64_t timeout_ns);

// Whether the frame has read its input, without waiting, into `*consumed`.
//
// Status: `NF_STATUS_OK` (consumed or not); `NF_STATUS_INVALID_ARGUMENT` where `c` or
// `consumed` is NULL or `ticket` is not a ticket of this context; `NF_STATUS_DEVICE_LOST`;
// `NF_STATUS_VULKAN`: reading the semaphore failed; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call; `consumed`
// is NULL or writable.
enum nf_status nf_context_try_input_consumed(struct nf_context *c, uint64_t ticket, bool *consumed);

// Waits for every frame in flight and retires them (each bounded by the frame timeout).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL;
// `NF_STATUS_TIMEOUT` where a frame is not done within the frame timeout (it and the later
// ones stay in flight); `NF_STATUS_DEVICE_LOST`; `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`: a call
// of theirs failed; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call.
enum nf_status nf_context_wait_all(struct nf_context *c);

// Imports an image the caller exported as an input (a context of its own, on the
// exporter's physical device). The descriptor is the context's once this succeeds
// (it closes it); after a failure it is still open and the caller's.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `import` or `out` is NULL, the
// descriptor is negative (Windows: NULL), the device or driver UUID is not the context's, or the
// description does not fit the frame (format, size, usage, tiling; the message says which);
// `NF_STATUS_STRUCT_SIZE` where `import->struct_size` is not set; `NF_STATUS_UNSUPPORTED` where
// the device cannot import or use it, or a newer header's field is set; `NF_STATUS_VULKAN`: the
// import failed (a descriptor that is not exported memory); `NF_STATUS_CUDA`: CUDA could not
// import it; `NF_STATUS_INTERNAL`: a bug. On every failure the descriptor is still open and the
// caller's.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call; `import`
// is NULL or describes exported memory as it was allocated, its descriptor open and
// not used elsewhere during the call; `out` is NULL or writable.
enum nf_status nf_context_import_input_image(struct nf_context *c,
                                             const struct nf_image_import *import,
                                             nf_input *out);

// Imports an image the caller exported as an output; see `nf_context_import_input_image`.
//
// Status: as `nf_context_import_input_image`.
//
// # Safety
// As `nf_context_import_input_image`.
enum nf_status nf_context_import_output_image(struct nf_context *c,
                                              const struct nf_image_import *import,
                                              nf_output *out);

// Imports a linear buffer the caller exported as an input (where the model takes it
// as it is, the buffer itself is the model's input); see `nf_context_import_input_image`.
//
// Status: as `nf_context_import_input_image` (the buffer's size, usage and layout instead of the
// image's).
//
// # Safety
// As `nf_context_import_input_image`.
enum nf_status nf_context_import_input_buffer(struct nf_context *c,
                                              const struct nf_buffer_import *import,
                                              nf_input *out);

// Imports a linear buffer the caller exported as an output; see
// `nf_context_import_input_image`.
//
// Status: as `nf_context_import_input_buffer`.
//
// # Safety
// As `nf_context_import_input_image`.
enum nf_status nf_context_import_output_buffer(struct nf_context *c,
                                               const struct nf_buffer_import *import,
                                               nf_output *out);

// Imports a timeline semaphore the caller exported, for frames to wait on
// (`NF_SYNC_GPU` only). The descriptor is the context's once this succeeds; after a
// failure it is still open and the caller's.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `import` or `out` is NULL, the
// descriptor is negative, the semaphore is not a timeline, or its device or driver UUID is not
// the context's; `NF_STATUS_STRUCT_SIZE` where `import->struct_size` is not set;
// `NF_STATUS_UNSUPPORTED` in `NF_SYNC_HOST`, where the device cannot import semaphores, or
// where a newer header's field is set; `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`: the import
// failed; `NF_STATUS_INTERNAL`: a bug. On every failure the descriptor is still open and the
// caller's.
//
// # Safety
// As `nf_context_import_input_image`.
enum nf_status nf_context_import_timeline(struct nf_context *c,
                                          const struct nf_semaphore_import *import,
                                          nf_timeline *out);

// The context's "input consumed" and "output ready" timelines as new file descriptors
// (`OPAQUE_FD`; Windows: NT handles, `OPAQUE_WIN32`), for a caller on another device to
// import once (`vkImportSemaphoreFdKHR`, which then owns the descriptor; a Windows handle
// stays the caller's to close after `vkImportSemaphoreWin32HandleKHR`) and wait on for
// each ticket's value. Both are the caller's to close where it does not import them.
// Needs `NF_SYNC_GPU` on a context of its own.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `input_consumed` or
// `output_ready` is NULL; `NF_STATUS_UNSUPPORTED` in `NF_SYNC_HOST`, or where the timelines
// are not exportable (`VK_KHR_external_semaphore_fd` not enabled; on the caller's device the
// tickets' semaphores are the caller's already); `NF_STATUS_VULKAN`: the export failed;
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context; `input_consumed` and `output_ready` are NULL or writable.
enum nf_status nf_context_export_timelines(struct nf_context *c,
                                           nf_external_handle *input_consumed,
                                           nf_external_handle *output_ready);

// Hands what the library announces (fallbacks, slow paths, options not in effect: the
// messages the CLI prints with `-v`) to `callback`, for every record of `max_level` and more
// severe (`NF_LOG_WARN`: warnings and errors; `NF_LOG_INFO` adds what the library chose and
// why; `NF_LOG_DEBUG`, `NF_LOG_TRACE`: more). `callback` NULL, or `max_level`
// `NF_LOG_OFF`, turns it off. Until the first call nothing is logged anywhere; the last call
// wins (one callback per process). Messages name the C API's functions and constants.
//
// Threads: the callback is called on the thread that logs, which is the thread of an
// `nf_*` call or one of the library's own (fast start builds its fused session on one), and
// from several threads at once: it must be thread-safe, and `user` usable from any thread.
// A message the library logs while the callback runs on that thread (an `nf_*` call from
// inside the callback) is dropped, and `nf_set_log_callback` from inside the callback is
// refused. This call waits until calls of the old callback running on other threads have
// returned: once it returns, the old callback is never called again and its `user` may be
// freed. The callback must therefore not wait for a thread that is inside
// `nf_set_log_callback`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `max_level` is none of the
// `NF_LOG_*` values, or the call comes from inside the callback; `NF_STATUS_UNSUPPORTED`
// where another logger took the library's `log` first (only in a Rust program that links
// this crate as an rlib); `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `callback` is NULL or a function that may be called as said above, with `user`, from any
// thread, until a later call of `nf_set_log_callback` returns.
enum nf_status nf_set_log_callback(nf_log_callback callback, void *user, nf_log_level max_level);

// Fills `*options` with the library's defaults: the fields its `struct_size` covers (set it
// first: `nf_cuda_options o = NF_CUDA_OPTIONS_INIT;`), which it leaves as it was.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `options` is NULL;
// `NF_STATUS_STRUCT_SIZE` where `options->struct_size` is not set; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `options` is NULL or points to `options->struct_size` writable bytes.
enum nf_status nf_cuda_options_default(struct nf_cuda_options *options);

// Gives the builder every CUDA option at once (copied). An option of the provider or the
// hand-over left at its default lets the tune cache choose it (`neural-frame tune`).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` or `options` is NULL, or a
// field holds a value none of its constants name (the message names the field);
// `NF_STATUS_STRUCT_SIZE` where `struct_size` is not set; `NF_STATUS_UNSUPPORTED` where a
// newer header's field this library does not know is set; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `b` is NULL or a live builder, not used by another thread during the call; `options` is
// NULL or points to `options->struct_size` readable bytes.
enum nf_status nf_builder_set_cuda_options(struct nf_builder *b,
                                           const struct nf_cuda_options *options);

// Imports memory the caller exported (`vkGetMemoryFdKHR`, `OPAQUE_FD`; a context of its own
// on the exporter's physical device, or one on the caller's device), once, for planar frames
// to be placed in it at offsets (`nf_context_place_input_planes`,
// `nf_context_place_output_planes`): a frameserver's pooled block, say. The memory must not
// be a dedicated allocation (`memory->dedicated` false). On the CUDA backend it is imported
// into CUDA as well; where CUDA cannot take it, the log says why and the frames placed in it
// run through the Vulkan passes. The descriptor is the context's once this succeeds (it
// closes it); after a failure it is still open and the caller's, as for
// `nf_context_import_input_buffer`. On success `*out` is its number, released with
// `nf_context_release_memory`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `memory` or `out` is NULL,
// the descriptor is negative (Windows: NULL), the device or driver UUID is not the
// context's, or the allocation is dedicated; `NF_STATUS_UNSUPPORTED` where the device cannot
// import it; `NF_STATUS_VULKAN`: the import failed (a descriptor that is not exported
// memory); `NF_STATUS_IO`: the descriptor could not be duplicated; `NF_STATUS_INTERNAL`: a
// bug. On every failure the descriptor is still open and the caller's.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call; `memory` is
// NULL or describes exported memory as it was allocated, its descriptor open and not used
// elsewhere during the call; `out` is NULL or writable.
enum nf_status nf_context_import_memory(struct nf_context *c,
                                        const struct nf_memory_import *memory,
                                        nf_memory *out);

// Lets go of memory imported with `nf_context_import_memory`: its number is refused from
// now on, and the memory is freed once no placed plane uses it (placements keep it alive
// until they are unregistered and their frames are done, or the context is freed).
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL or `memory` is not
// imported memory of this context (0, released already, or a registration of another
// kind); `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call.
enum nf_status nf_context_release_memory(struct nf_context *c, nf_memory memory);

// Registers a planar frame in imported memory as an input of the frame size: three planes
// (R, G, B) or one (grey), read as colour values as an image's are (the model's
// normalization applied), alpha 1. A placement is cheap (a buffer per plane bound into the
// memory imported once, no copy, no import): one a frame is fine. On success `*out` is an
// input for `nf_frame.input`, unregistered with `nf_context_unregister_input`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `frame` or `out` is NULL,
// `frame->format` is not `VK_FORMAT_R32_SFLOAT`, `VK_FORMAT_R16_SFLOAT` or `VK_FORMAT_R8_UNORM`, `plane_count` is not
// 1 or 3 (or `planes` is NULL), a plane's `memory` is not imported memory of this context,
// its `offset` or `row_pitch` is not a multiple of 4, the pitch is less than a row, a plane
// does not fit its memory, or the size is not the frame size (the message names the field
// or the plane); `NF_STATUS_STRUCT_SIZE` where `frame->struct_size` is not set;
// `NF_STATUS_UNSUPPORTED` where a plane is larger than the device's `maxStorageBufferRange`,
// or a newer header's field is set; `NF_STATUS_VULKAN`: making or binding a plane's buffer
// failed; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call; `frame` is
// NULL or points to `frame->struct_size` readable bytes, its `planes` holding `plane_count`
// readable planes; `out` is NULL or writable.
enum nf_status nf_context_place_input_planes(struct nf_context *c,
                                             const struct nf_planar_frame *frame,
                                             nf_input *out);

// Registers a planar frame in imported memory as an output of the output size: three planes
// (R, G, B; a four-channel model's alpha is dropped), or one for a one-channel model, their
// bytes not overlapping. Values are written as the model gives them, unclamped; nothing
// outside the planes' rows is written. On success `*out` is an output for
// `nf_frame.output`, unregistered with `nf_context_unregister_output`.
//
// Status: as `nf_context_place_input_planes` (the output size; also
// `NF_STATUS_INVALID_ARGUMENT` where the planes overlap, or one plane is given for a model of
// more channels).
//
// # Safety
// As `nf_context_place_input_planes`.
enum nf_status nf_context_place_output_planes(struct nf_context *c,
                                              const struct nf_planar_frame *frame,
                                              nf_output *out);

// Reads a PNG or JPEG file (`path`, NUL-terminated) as RGBA8: `*width` x `*height`
// texels, 4 bytes each, rows without padding, top row first (a picture without alpha
// gets an opaque one). On success `*pixels` is a new buffer of width*height*4 bytes that
// the caller frees with `nf_pixels_free`; on failure (`NF_STATUS_IMAGE`, naming the file)
// nothing is written.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `path`, `width`, `height` or
// `pixels` is NULL or `path` is empty; `NF_STATUS_IMAGE` where the file is missing, unreadable or
// not a PNG or JPEG (the message names it); `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `path` is NULL or a NUL-terminated string; `width`, `height` and `pixels` are NULL or
// writable.
enum nf_status nf_image_read(const char *path, uint32_t *width, uint32_t *height, uint8_t **pixels);

// Frees pixels of `nf_image_read`. NULL is ignored.
//
// The last error message stays as it was.
//
// Status: none (it returns nothing).
//
// # Safety
// `pixels` is NULL or a buffer of `nf_image_read` not freed before.
void nf_pixels_free(uint8_t *pixels);

// Writes `width` x `height` RGBA8 texels (4 bytes each, rows without padding, top row
// first) as a PNG file at `path` (NUL-terminated): to a temporary file beside it, then
// renamed into place, so a failure never leaves half a file. The pixels are borrowed for
// the call. Missing directories of `path` are created first (as `mkdir -p`, and left in
// place if the write then fails); one that cannot be created (a file in the way, no
// permission) gives `NF_STATUS_IMAGE` naming it. An existing file at `path` is replaced.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `path` or `pixels` is NULL, `path`
// is empty, or a side is 0; `NF_STATUS_IMAGE` where the file cannot be written (the message
// names the path): a directory of `path` that cannot be created, a directory not writable, a
// full disk, `path` a directory; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `path` is NULL or a NUL-terminated string; `pixels` is NULL or points to
// width*height*4 readable bytes.
enum nf_status nf_png_write(const char *path,
                            const uint8_t *pixels,
                            uint32_t width,
                            uint32_t height);

// Registers one of the caller's images as an input (a context on the caller's device),
// checked once here; `*out` names it in frames until `nf_context_unregister_input`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `image` or `out` is NULL, the
// image is `VK_NULL_HANDLE`, the context is not built on the caller's device (`nf_context_new`'s:
// import by fd instead), or the format, size, usage, tiling or layout does not fit (the message
// says which); `NF_STATUS_STRUCT_SIZE` where `image->struct_size` is not set;
// `NF_STATUS_UNSUPPORTED` where the device cannot use the format that way, or a newer header's
// field is set; `NF_STATUS_VULKAN`: making its view failed; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context built by `nf_context_new_on_device`, not used by another
// thread during the call; `image` is NULL or a description of an image of that device,
// alive until it is unregistered and its frames are done (or the context is freed);
// `out` is NULL or writable.
enum nf_status nf_context_register_input_image(struct nf_context *c,
                                               const struct nf_caller_image *image,
                                               nf_input *out);

// Registers one of the caller's images as an output; see
// `nf_context_register_input_image`.
//
// Status: as `nf_context_register_input_image`.
//
// # Safety
// As `nf_context_register_input_image`.
enum nf_status nf_context_register_output_image(struct nf_context *c,
                                                const struct nf_caller_image *image,
                                                nf_output *out);

// Registers one of the caller's buffers as an input; see
// `nf_context_register_input_image`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `buffer` or `out` is NULL, the
// buffer is `VK_NULL_HANDLE`, the context is not built on the caller's device, or the layout,
// size or usage does not fit (the message says which); `NF_STATUS_STRUCT_SIZE` where
// `buffer->struct_size` is not set; `NF_STATUS_UNSUPPORTED` where the device's limits do not
// allow it, or a newer header's field is set; `NF_STATUS_VULKAN`: a call failed;
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// As `nf_context_register_input_image`, for a buffer.
enum nf_status nf_context_register_input_buffer(struct nf_context *c,
                                                const struct nf_caller_buffer *buffer,
                                                nf_input *out);

// Registers one of the caller's buffers as an output; see
// `nf_context_register_input_image`.
//
// Status: as `nf_context_register_input_buffer`.
//
// # Safety
// As `nf_context_register_input_image`, for a buffer.
enum nf_status nf_context_register_output_buffer(struct nf_context *c,
                                                 const struct nf_caller_buffer *buffer,
                                                 nf_output *out);

// Registers one of the caller's images with the exportable memory it is bound to, as an
// input: as `nf_context_register_input_image`, and on the CUDA backend the context
// exports that memory once and the frame's passes run as CUDA kernels (the image handed
// over in `GENERAL` layout, `OPTIMAL` tiling; otherwise its frames take the Vulkan passes,
// said once in the log). The memory stays the caller's.
//
// Status: as `nf_context_register_input_image` (also for `memory`: NULL, `VK_NULL_HANDLE`, its
// `struct_size`); `NF_STATUS_CUDA`: CUDA could not import the memory.
//
// # Safety
// As `nf_context_register_input_image`; and `memory` is NULL or describes the live
// allocation the image is bound to at offset 0, made with `VkExportMemoryAllocateInfo`
// for `OPAQUE_FD`, alive as long as the image.
enum nf_status nf_context_register_input_image_with_memory(struct nf_context *c,
                                                           const struct nf_caller_image *image,
                                                           const struct nf_caller_memory *memory,
                                                           nf_input *out);

// Registers one of the caller's images with the exportable memory it is bound to, as an
// output; see `nf_context_register_input_image_with_memory`. CUDA writes it in place, in
// `GENERAL` layout, which it stays in.
//
// Status: as `nf_context_register_input_image_with_memory`.
//
// # Safety
// As `nf_context_register_input_image_with_memory`.
enum nf_status nf_context_register_output_image_with_memory(struct nf_context *c,
                                                            const struct nf_caller_image *image,
                                                            const struct nf_caller_memory *memory,
                                                            nf_output *out);

// Registers one of the caller's timeline semaphores (a `VkSemaphore` of the caller's
// device, created with `VK_SEMAPHORE_TYPE_TIMELINE`), for frames to wait on
// (`nf_frame`'s `wait_timeline`, `output_free_timeline`). It stays the caller's.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` or `out` is NULL, `semaphore` is
// `VK_NULL_HANDLE`, or the context is not built on the caller's device; `NF_STATUS_INTERNAL`: a
// bug.
//
// # Safety
// `c` is NULL or a live context built by `nf_context_new_on_device`, not used by another
// thread during the call; `semaphore` is a timeline semaphore of that device, alive until
// it is unregistered and the frames that wait on it are done; `out` is NULL or writable.
enum nf_status nf_context_register_timeline(struct nf_context *c,
                                            uint64_t semaphore,
                                            nf_timeline *out);

// As `nf_context_register_timeline`, for a timeline semaphore the caller created exportable
// (`VkExportSemaphoreCreateInfo` with `VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT`, on a
// device with `VK_KHR_external_semaphore_fd`): on the CUDA backend the context exports it once
// and CUDA waits for its values itself, with no batch of the context's on the caller's queue
// to hand a frame over. On the CPU backend it is registered as `nf_context_register_timeline`
// does.
//
// Status: as `nf_context_register_timeline`; `NF_STATUS_UNSUPPORTED` where the device cannot
// export it (`VK_KHR_external_semaphore_fd` not enabled); `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`:
// exporting it or importing it into CUDA failed.
//
// # Safety
// As `nf_context_register_timeline`, and `semaphore` was created with that export info.
enum nf_status nf_context_register_exportable_timeline(struct nf_context *c,
                                                       uint64_t semaphore,
                                                       nf_timeline *out);

// Creates an image of the context's own as an input of the frame size, in `format` (a
// `VkFormat` of the input formats), for tools: fill it with `nf_context_upload`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` or `out` is NULL or `format` is
// not an input format; `NF_STATUS_UNSUPPORTED` where the device cannot sample it;
// `NF_STATUS_VULKAN`: making it failed (out of memory); `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call; `out` is
// NULL or writable.
enum nf_status nf_context_create_input_image(struct nf_context *c, int32_t format, nf_input *out);

// Creates an image of the context's own as an output of the output size, in `format`
// (`VK_FORMAT_R8G8B8A8_UNORM` or `_R16G16B16A16_SFLOAT`), for tools: read it with
// `nf_context_readback`.
//
// Status: as `nf_context_create_input_image` (an output format, storage use).
//
// # Safety
// As `nf_context_create_input_image`.
enum nf_status nf_context_create_output_image(struct nf_context *c, int32_t format, nf_output *out);

// Copies `len` bytes of texels (rows of the frame width without padding, top row first,
// in the image's format) into an input the context created, after the frames that read
// it have read it.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` or `texels` is NULL, `input` is
// not a registered input, not an image the context created, or `len` is not the image's size in
// bytes; `NF_STATUS_TIMEOUT` where a frame reading it does not finish within the frame timeout;
// `NF_STATUS_DEVICE_LOST`; `NF_STATUS_VULKAN`: the copy failed; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call; `texels` is
// NULL or points to `len` readable bytes.
enum nf_status nf_context_upload(struct nf_context *c,
                                 nf_input input,
                                 const uint8_t *texels,
                                 size_t len);

// Copies an output the context created into `buf` (rows of the output width without
// padding, top row first, in the image's format), once the frames that write it are
// done. Size-in/size-out: on entry `*len` is the capacity of `buf`; on return the size
// of the texels. With `buf` NULL the call only sets `*len` (it waits for nothing); with a
// buffer too small it writes nothing and returns `NF_STATUS_BUFFER_TOO_SMALL`.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_BUFFER_TOO_SMALL` (with `*len` the size needed);
// `NF_STATUS_INVALID_ARGUMENT` where `c` or `len` is NULL, or `output` is not a registered output
// or (for a size query) not an image the context created; `NF_STATUS_TIMEOUT` where a frame
// writing it does not finish within the frame timeout; `NF_STATUS_DEVICE_LOST`;
// `NF_STATUS_VULKAN`: the copy failed; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call; `len` is
// NULL or points to a `size_t`; `buf` is NULL or points to `*len` writable bytes.
enum nf_status nf_context_readback(struct nf_context *c,
                                   nf_output output,
                                   uint8_t *buf,
                                   size_t *len);

// Unregisters an input. Where a frame in flight uses it, the context keeps it until
// that frame is done: the caller's image or buffer must live until then (after
// `nf_context_wait` of the last frame that used it, or `nf_context_wait_all`). The
// number is not valid afterwards.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL or the number is not a
// registration of that kind on this context (0, never given, another kind, unregistered already);
// `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call.
enum nf_status nf_context_unregister_input(struct nf_context *c, nf_input input);

// Unregisters an output; see `nf_context_unregister_input`.
//
// Status: as `nf_context_unregister_input`.
//
// # Safety
// As `nf_context_unregister_input`.
enum nf_status nf_context_unregister_output(struct nf_context *c, nf_output output);

// Unregisters a timeline; see `nf_context_unregister_input`. An imported one's
// descriptor is closed by the context.
//
// Status: as `nf_context_unregister_input`.
//
// # Safety
// As `nf_context_unregister_input`.
enum nf_status nf_context_unregister_timeline(struct nf_context *c, nf_timeline timeline);

// Signals one of the registered timelines from the host up to `value` (nothing where it
// is there already), for a peer that is gone before it signalled: the frames that wait
// on it can then run and retire. What they read is whatever the memory held.
//
// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL or `timeline` is not a
// registered timeline of this context; `NF_STATUS_VULKAN`: the host signal failed (a value below
// the timeline's); `NF_STATUS_DEVICE_LOST`; `NF_STATUS_INTERNAL`: a bug.
//
// # Safety
// `c` is NULL or a live context, not used by another thread during the call.
enum nf_status nf_context_release_timeline(struct nf_context *c,
                                           nf_timeline timeline,
                                           uint64_t value);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* NEURAL_FRAME_H */

#ifndef NEURAL_FRAME_INIT_MACROS
#define NEURAL_FRAME_INIT_MACROS
/* NF_STRUCT_INIT(type): a value of a versioned struct `type` with struct_size set to
 * sizeof(type) and every other field 0 (C: a compound literal, for a declaration at
 * block scope; C++11 and later: a value-initialised copy). */
#ifdef __cplusplus
#define NF_STRUCT_INIT(type) ([]() { type nf_s_{}; nf_s_.struct_size = (uint32_t)sizeof(type); return nf_s_; }())
#else
#define NF_STRUCT_INIT(type) ((type){ .struct_size = (uint32_t)sizeof(type) })
#endif
#define NF_FRAME_INIT NF_STRUCT_INIT(nf_frame)
#define NF_TICKET_INIT NF_STRUCT_INIT(nf_ticket)
#define NF_FRAME_STATS_INIT NF_STRUCT_INIT(nf_frame_stats)
#define NF_VULKAN_DEVICE_INIT NF_STRUCT_INIT(nf_vulkan_device)
#define NF_CALLER_IMAGE_INIT NF_STRUCT_INIT(nf_caller_image)
#define NF_CALLER_MEMORY_INIT NF_STRUCT_INIT(nf_caller_memory)
#define NF_CALLER_BUFFER_INIT NF_STRUCT_INIT(nf_caller_buffer)
#define NF_IMAGE_IMPORT_INIT NF_STRUCT_INIT(nf_image_import)
#define NF_BUFFER_IMPORT_INIT NF_STRUCT_INIT(nf_buffer_import)
#define NF_SEMAPHORE_IMPORT_INIT NF_STRUCT_INIT(nf_semaphore_import)
#define NF_CUDA_OPTIONS_INIT NF_STRUCT_INIT(nf_cuda_options)
#define NF_PLANAR_FRAME_INIT NF_STRUCT_INIT(nf_planar_frame)
#endif /* NEURAL_FRAME_INIT_MACROS */
