//! Clients that misbehave on purpose against `neural-frame serve` (issue 25),
//! each while a well-behaved client is served before, during and after: a
//! hand-over that stalls, a session stuck in a driver call (the test hook
//! `NEURAL_FRAME_TEST_HOOK_STALL`), idle clients at `--max-clients`, a million
//! Submits never answered, memory files shorter than the driver maps; and
//! models the contract refuses for every frame, refused at start. The worker's
//! descriptors and threads return to where they were, its memory within 16 MiB,
//! and SIGTERM ends it with exit code 0 within its bound.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::super::foreign::renderer::Renderer;
use super::super::pipeline::{max_diff, picture};
use super::{F32, RBuffer, Raw, Side, Worker, connect, expected, hello, serial, slot, truncated_memfd};
use ash::vk;
use neural_frame_client::protocol::{ErrorCode, Message, SlotMemory};
use neural_frame_client::{Client, Options, SyncPreference};

/// The worker's memory may end up this much above where it was (allocator caches).
const RSS_TOLERANCE_KIB: u64 = 16 * 1024;

/// What the worker holds, to compare before and after.
#[derive(Debug, Clone, Copy)]
struct Held {
    fds: usize,
    threads: usize,
    rss_kib: u64,
}

fn held(w: &Worker) -> Held {
    Held { fds: w.fds(), threads: w.threads(), rss_kib: w.rss_kib() }
}

/// What the worker holds once its descriptors and threads stay put for 300 ms
/// (a session that just said goodbye is still ending its threads).
fn settled(w: &Worker) -> Held {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = held(w);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = held(w);
        if (now.fds, now.threads) == (last.fds, last.threads) || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// Waits (at most 20 s) until the worker's descriptors and threads are back to
/// `base` and its memory within the tolerance; panics with both otherwise.
fn back_to(w: &Worker, base: Held, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = held(w);
        let ok = now.fds == base.fds && now.threads == base.threads && now.rss_kib <= base.rss_kib + RSS_TOLERANCE_KIB;
        if ok {
            println!("{what}: back to {base:?} (now {now:?})");
            return;
        }
        assert!(Instant::now() < deadline, "{what}: the worker holds {now:?}, against {base:?} before:\n{}", w.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One frame of `good` checked against ONNX Runtime.
fn served(r: &Renderer, good: &mut Side, n: u64, when: &str) {
    let rgba = picture(good.w, good.h, n as u32);
    let got = good.frame(r, &rgba, n);
    let (d, ..) = max_diff(&got, &expected(F32, &rgba, good.w, good.h), 2 * good.w);
    assert!(d <= 1, "{when}: the well-behaved client's frame {n} is off by {d}");
}

/// A client of 16×8 frames, two slots, its first frame served.
fn good_client(r: &Renderer, w: &Worker) -> Side {
    let mut side = Side::new(r, connect(r, &w.socket, 16, 8, 2, SyncPreference::Auto), 16, 8);
    served(r, &mut side, 1, "a new client");
    side
}

/// A connection attempt of a well-behaved client, Busy or not.
fn try_connect(r: &Renderer, w: &Worker) -> neural_frame_client::Result<Client> {
    let mut o = Options::new(&w.socket, 16, 8, vk::Format::R8G8B8A8_UNORM);
    (o.input_slots, o.output_slots) = (2, 2);
    // SAFETY: the renderer's device has external memory fds and outlives the client.
    unsafe { Client::connect(&super::client_device(r), o) }
}

/// SIGTERM; the exit status within `bound`, and the log.
fn terminate(mut w: Worker, bound: Duration) -> (std::process::ExitStatus, Duration, String) {
    let start = Instant::now();
    w.signal(libc::SIGTERM);
    let status = w.wait(bound);
    let took = start.elapsed();
    (status, took, w.log())
}

/// A raw client up to its Welcome (16×8, one slot a side), and the memory of its slots.
struct Welcomed {
    raw: Raw,
    mems: [SlotMemory; 2],
}

fn welcomed(r: &Renderer, w: &Worker) -> Welcomed {
    let raw = Raw::new(&w.socket);
    raw.send(&hello(r, 16, 8, 1), &[]);
    let Message::Welcome { output, .. } = raw.recv() else { panic!("no Welcome") };
    Welcomed::new(raw, output)
}

impl Welcomed {
    /// The memory of a 16×8 input slot and of an output slot of `output`'s size.
    fn new(raw: Raw, output: neural_frame_client::protocol::Geometry) -> Welcomed {
        let m = |size: u64| SlotMemory {
            allocation_size: size,
            buffer_size: size,
            memory_type_index: 0,
            usage: vk::BufferUsageFlags::STORAGE_BUFFER.as_raw(),
            dedicated: true,
        };
        Welcomed { raw, mems: [m(16 * 8 * 4), m(output.bytes().expect("size"))] }
    }
}

/// [`welcomed`], once the worker has a place: the sessions that just ended free
/// theirs a moment later (their threads end after the Error or the close).
fn welcomed_when_free(hello: &Message, w: &Worker) -> Welcomed {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let raw = Raw::new(&w.socket);
        raw.send(hello, &[]);
        match neural_frame_client::wire::recv(&raw.s).map(|(m, _)| m) {
            Ok(Message::Welcome { output, .. }) => return Welcomed::new(raw, output),
            Ok(Message::Error { code: ErrorCode::Busy, .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => {
                std::thread::sleep(Duration::from_millis(200));
                let state = std::fs::read_to_string(format!("/proc/{}/stat", w.pid())).unwrap_or_default();
                panic!("{other:?} where a Welcome belongs; the worker ({state}); its log:\n{}", w.log())
            }
        }
    }
}

/// A client that sends its Hello and then nothing: the hand-over's deadline
/// (`--session-timeout 3`, before the 10 s wait for Slots) ends it with
/// `Error(Timeout)`, its place (the last one) is freed, and a new client is
/// served; a client connected before is served before, during and after, and
/// the worker holds what it held before.
pub fn a_stalled_hand_over_frees_its_place(backend: &str) {
    let _serial = serial();
    let worker = Worker::start(backend, F32, &["--max-clients", "2", "--session-timeout", "3"]);
    let r = Renderer::new(true).expect("a renderer");
    let mut good = good_client(&r, &worker);
    let base = settled(&worker);
    let start = Instant::now();
    let stalled = welcomed(&r, &worker);
    // The last place is taken.
    let busy = try_connect(&r, &worker).err().expect("Busy while the stalled client holds the place");
    assert!(busy.to_string().contains("maximum of 2 clients"), "{busy}");
    served(&r, &mut good, 2, "during the stalled hand-over");
    let answer = stalled.raw.expect_error(ErrorCode::Timeout, "--session-timeout");
    let took = start.elapsed();
    println!("the stalled client: `{answer}` after {took:?}");
    assert!(took >= Duration::from_millis(2500) && took < Duration::from_secs(9), "ended after {took:?}");
    let mut side = good_client(&r, &worker);
    served(&r, &mut side, 2, "a new client in the stalled client's place");
    side.close(&r);
    served(&r, &mut good, 3, "after the stalled hand-over");
    worker.wait_log("disconnected", 2);
    back_to(&worker, base, "after the stalled hand-over");
    good.close(&r);
    let (status, took, log) = terminate(worker, Duration::from_secs(10));
    println!("{log}");
    assert!(status.success(), "SIGTERM: {status} after {took:?}");
}

/// A session whose thread is stuck in a driver call (the test hook holds client
/// 2 for 12 s in its import): with `--session-timeout 2` the worker abandons it
/// within a few seconds, tells it `Error(Timeout)` and frees its place, which a
/// new client takes while the stuck thread still sleeps; the first client is
/// served before, during and after. Once the thread wakes it releases
/// everything: descriptors, threads and memory back to where they were.
pub fn a_session_stuck_in_a_driver_call_is_abandoned(backend: &str) {
    let _serial = serial();
    let hook = [("NEURAL_FRAME_TEST_HOOK_STALL", "importing:12:2")];
    let worker = Worker::start_with_env(backend, F32, &["--max-clients", "2", "--session-timeout", "2"], &hook);
    let r = Renderer::new(true).expect("a renderer");
    let mut good = good_client(&r, &worker);
    let base = settled(&worker);
    let stuck = welcomed(&r, &worker);
    let (b_in, m_in, fd_in) = slot(&r, stuck.mems[0].allocation_size);
    let (b_out, m_out, fd_out) = slot(&r, stuck.mems[1].allocation_size);
    let start = Instant::now();
    stuck.raw.send(
        &Message::Slots { inputs: vec![m_in], outputs: vec![m_out], timeline: false },
        &[fd_in.as_raw_fd(), fd_out.as_raw_fd()],
    );
    served(&r, &mut good, 2, "while client 2 is stuck");
    let busy = try_connect(&r, &worker).err().expect("Busy while the stuck client holds the place");
    assert!(busy.to_string().contains("maximum of 2 clients"), "{busy}");
    let answer = stuck.raw.expect_error(ErrorCode::Timeout, "gave up");
    let took = start.elapsed();
    println!("the stuck client: `{answer}` after {took:?}");
    assert!(took < Duration::from_secs(8), "abandoned only after {took:?} (the stall lasts 12 s)");
    // Its place is free while its thread still sleeps.
    let mut other = good_client(&r, &worker);
    assert!(start.elapsed() < Duration::from_secs(11), "served only after the stall ended: {:?}", start.elapsed());
    served(&r, &mut other, 2, "the new client, while client 2's thread is stuck");
    other.close(&r);
    served(&r, &mut good, 3, "after client 2 was abandoned");
    let log = worker.wait_log("its abandoned session's thread ended now", 1);
    assert!(log.contains("client 2 (pid") && log.contains("abandoned"), "{log}");
    back_to(&worker, base, "after the stuck session's thread ended");
    good.close(&r);
    r.destroy_buffer(b_in);
    r.destroy_buffer(b_out);
    assert_eq!(r.validation_errors(), 0);
    let (status, took, log) = terminate(worker, Duration::from_secs(10));
    println!("{log}");
    assert!(status.success(), "SIGTERM: {status} after {took:?}");
}

/// SIGTERM while a session is stuck in a frame's driver call (the hook holds
/// client 1's first Submit for 60 s): the worker abandons it, drains the others
/// and exits 0 within `--session-timeout` (3 s) and a few seconds, not after the stall.
pub fn sigterm_does_not_wait_for_a_stuck_session(backend: &str) {
    let _serial = serial();
    let hook = [("NEURAL_FRAME_TEST_HOOK_STALL", "frame:60:1")];
    let worker = Worker::start_with_env(backend, F32, &["--session-timeout", "3"], &hook);
    let r = Renderer::new(true).expect("a renderer");
    let stuck = welcomed(&r, &worker);
    let (b_in, m_in, fd_in) = slot(&r, stuck.mems[0].allocation_size);
    let (b_out, m_out, fd_out) = slot(&r, stuck.mems[1].allocation_size);
    stuck.raw.send(
        &Message::Slots { inputs: vec![m_in], outputs: vec![m_out], timeline: false },
        &[fd_in.as_raw_fd(), fd_out.as_raw_fd()],
    );
    assert_eq!(stuck.raw.recv(), Message::Ready { timelines: 0 });
    stuck.raw.send(&Message::Submit { frame: 1, input_slot: 0, output_slot: 0, rendered: 0, output_free: 0 }, &[]);
    let mut good = good_client(&r, &worker);
    served(&r, &mut good, 2, "while client 1 is stuck in a frame");
    // Stopped while client 1's thread is stuck (before or after its abandonment: either way).
    std::thread::sleep(Duration::from_millis(500));
    let (status, took, log) = terminate(worker, Duration::from_secs(15));
    println!("{log}");
    assert!(status.success(), "SIGTERM: {status}:\n{log}");
    assert!(took < Duration::from_secs(10), "SIGTERM took {took:?}");
    assert!(log.contains("client 1 (pid") && log.contains("abandoned"), "{log}");
    let answer = stuck.raw.expect_error(ErrorCode::Timeout, "gave up");
    println!("the stuck client: `{answer}`");
    good.destroy(&r);
    r.destroy_buffer(b_in);
    r.destroy_buffer(b_out);
}

/// `--max-clients 2` clients idle after a frame each: a third is Busy, until the
/// idle timeout (2 s) ends them with `Error(Timeout)`; then it is served. A
/// client that sends a frame every 0.5 s meanwhile is not idle, and stays.
pub fn idle_clients_are_ended_after_the_idle_timeout(backend: &str) {
    let _serial = serial();
    let worker = Worker::start(backend, F32, &["--max-clients", "3", "--idle-timeout", "2"]);
    let r = Renderer::new(true).expect("a renderer");
    let mut busy_one = good_client(&r, &worker);
    let base = settled(&worker);
    let mut idle: Vec<Side> = (0..2).map(|_| good_client(&r, &worker)).collect();
    let start = Instant::now();
    let refused = try_connect(&r, &worker).err().expect("Busy while two idle clients and a busy one hold the places");
    assert!(refused.to_string().contains("maximum of 3 clients"), "{refused}");
    // The busy client keeps sending frames past the idle timeout.
    for n in 2..=10 {
        served(&r, &mut busy_one, n, "the busy client");
        std::thread::sleep(Duration::from_millis(500));
    }
    for side in &mut idle {
        let e = side.client.poll().expect_err("an idle client is ended");
        assert!(e.to_string().contains("idle for 2 s"), "{e}");
    }
    println!("idle clients ended within {:?}", start.elapsed());
    let mut new = good_client(&r, &worker);
    served(&r, &mut new, 2, "a new client in an idle client's place");
    new.close(&r);
    for side in idle {
        side.destroy(&r);
    }
    served(&r, &mut busy_one, 11, "the busy client, after");
    worker.wait_log("disconnected", 3);
    back_to(&worker, base, "after the idle clients");
    busy_one.close(&r);
    let (status, took, log) = terminate(worker, Duration::from_secs(10));
    println!("{log}");
    assert!(status.success(), "SIGTERM: {status} after {took:?}");
}

/// A client that pipelines a million Submits and never reads an answer: the
/// worker stops reading from it once its ring and queue are full (its Submits
/// then wait in its socket), so its memory stays within 16 MiB (a million
/// Submits read ahead took 130 MiB); the session ends when its answers stay
/// unread for `--session-timeout` (4 s), and a well-behaved client is served
/// before, during and after.
pub fn a_flood_of_submits_is_bounded(backend: &str) {
    let _serial = serial();
    let worker = Worker::start(backend, F32, &["--session-timeout", "4"]);
    let r = Renderer::new(true).expect("a renderer");
    let mut good = good_client(&r, &worker);
    let base = settled(&worker);
    let flood = welcomed(&r, &worker);
    let (b_in, m_in, fd_in) = slot(&r, flood.mems[0].allocation_size);
    let (b_out, m_out, fd_out) = slot(&r, flood.mems[1].allocation_size);
    flood.raw.send(
        &Message::Slots { inputs: vec![m_in], outputs: vec![m_out], timeline: false },
        &[fd_in.as_raw_fd(), fd_out.as_raw_fd()],
    );
    assert_eq!(flood.raw.recv(), Message::Ready { timelines: 0 });
    // Its context is built: from here on its memory should not grow with its Submits.
    let before = worker.rss_kib();
    // A million Submits, a thousand to a write, until a write blocks for 3 s.
    let writer = flood.raw.s.try_clone().expect("a second handle");
    writer.set_write_timeout(Some(Duration::from_secs(3))).expect("a write timeout");
    let sent = std::thread::spawn(move || {
        let mut sent = 0u64;
        while sent < 1_000_000 {
            let chunk: Vec<u8> = (sent + 1..=sent + 1000)
                .flat_map(|frame| {
                    Message::Submit { frame, input_slot: 0, output_slot: 0, rendered: 0, output_free: 0 }.encode()
                })
                .collect();
            if neural_frame_client::wire::send_raw(&writer, &chunk, &[]).is_err() {
                break;
            }
            sent += 1000;
        }
        sent
    });
    served(&r, &mut good, 2, "during the flood");
    let sent = sent.join().expect("the writer");
    let grown = worker.rss_kib().saturating_sub(before);
    println!("the flooding client got {sent} Submits through; the worker's memory grew by {grown} KiB");
    assert!(grown < RSS_TOLERANCE_KIB, "the worker grew by {grown} KiB under {sent} unanswered Submits");
    served(&r, &mut good, 3, "after the flood");
    let log = worker.wait_log("answers unread for 4 s", 1);
    assert!(log.contains("client 2 (pid"), "{log}");
    drop(flood);
    back_to(&worker, base, "after the flood");
    let mut new = good_client(&r, &worker);
    served(&r, &mut new, 2, "a new client after the flood");
    new.close(&r);
    good.close(&r);
    r.destroy_buffer(b_in);
    r.destroy_buffer(b_out);
    let (status, took, log) = terminate(worker, Duration::from_secs(10));
    assert!(status.success(), "SIGTERM: {status} after {took:?}:\n{log}");
}

/// A slot pair of the renderer's exportable memory, sized by a Welcome: its
/// buffers, descriptions and descriptors, and the length of the input's memory
/// file (0 where the driver's memory is not a file).
struct SlotPair {
    b_in: RBuffer,
    m_in: SlotMemory,
    fd_in: std::os::fd::OwnedFd,
    b_out: RBuffer,
    m_out: SlotMemory,
    fd_out: std::os::fd::OwnedFd,
    file_len: u64,
}

impl SlotPair {
    fn new(r: &Renderer, w: &Welcomed) -> SlotPair {
        let (b_in, m_in, fd_in) = slot(r, w.mems[0].allocation_size);
        let (b_out, m_out, fd_out) = slot(r, w.mems[1].allocation_size);
        let file_len = std::fs::File::from(fd_in.try_clone().expect("dup")).metadata().map(|m| m.len()).unwrap_or(0);
        SlotPair { b_in, m_in, fd_in, b_out, m_out, fd_out, file_len }
    }
    /// The Slots message that hands them over in host mode.
    fn slots(&self) -> Message {
        Message::Slots { inputs: vec![self.m_in], outputs: vec![self.m_out], timeline: false }
    }
    fn destroy(self, r: &Renderer) {
        r.destroy_buffer(self.b_in);
        r.destroy_buffer(self.b_out);
    }
}

/// A worker, a renderer, a well-behaved client served its first frame, and what
/// the worker holds then.
fn with_a_good_client(backend: &str) -> (Worker, Renderer, Side, Held) {
    let worker = Worker::start(backend, F32, &[]);
    let r = Renderer::new(true).expect("a renderer");
    let good = good_client(&r, &worker);
    let base = settled(&worker);
    (worker, r, good, base)
}

/// Memory files that would fault when the driver maps them, each answered
/// before any driver call while a client is served before, during and after:
/// a memfd with lavapipe's header cut to exactly the allocation (its import
/// maps the header's size: SIGBUS, the worker gone), and one of full length
/// that its owner could still cut (not sealable). A sealable one is sealed by
/// the worker: accepted, and its owner can no longer shrink it. Lavapipe only
/// (its memory is a memfd); elsewhere the check has nothing to look at.
pub fn memory_files_shorter_than_the_driver_maps_are_refused(backend: &str) {
    let _serial = serial();
    let (mut worker, r, mut good, base) = with_a_good_client(backend);
    let w = welcomed(&r, &worker);
    let pair = SlotPair::new(&r, &w);
    let (m_in, fd_in, fd_out, real_len) = (pair.m_in, &pair.fd_in, &pair.fd_out, pair.file_len);
    if real_len == 0 {
        println!("the driver's memory is not a file here: nothing to check");
        return;
    }
    let slots = pair.slots();
    // 1. lavapipe's header, cut to exactly the allocation size.
    let cut = truncated_memfd(fd_in, m_in.allocation_size);
    w.raw.send(&slots, &[cut.as_raw_fd(), fd_out.as_raw_fd()]);
    match w.raw.recv() {
        Message::Error { code, message } => {
            assert_eq!(code, ErrorCode::TooSmall, "{message}");
            assert!(message.contains("input slot 0") && message.contains("header"), "{message}");
            println!("cut to the allocation: {message}");
        }
        other => {
            // The old worker took it: a Submit then faults it.
            w.raw.send(&Message::Submit { frame: 1, input_slot: 0, output_slot: 0, rendered: 0, output_free: 0 }, &[]);
            std::thread::sleep(Duration::from_secs(2));
            panic!(
                "{other:?} for memory shorter than lavapipe maps; after a Submit the worker: {:?}",
                worker.child.try_wait()
            );
        }
    }
    served(&r, &mut good, 2, "during the memory faults");
    // 2. The full length, in a memfd that cannot be sealed: its owner could cut it later.
    let w = welcomed(&r, &worker);
    let unsealable = truncated_memfd(fd_in, real_len);
    w.raw.send(&slots, &[unsealable.as_raw_fd(), fd_out.as_raw_fd()]);
    w.raw.expect_error(ErrorCode::BadHandle, "cut it while the worker maps it");
    // 3. The full length in a sealable memfd: sealed by the worker, then served.
    let w = welcomed(&r, &worker);
    let sealable = sealable_copy(fd_in, real_len);
    w.raw.send(&slots, &[sealable.as_raw_fd(), fd_out.as_raw_fd()]);
    assert_eq!(w.raw.recv(), Message::Ready { timelines: 0 });
    let file = std::fs::File::from(sealable);
    let shrink = file.set_len(m_in.allocation_size);
    assert!(shrink.is_err(), "the worker did not seal the memory against shrinking");
    w.raw.send(&Message::Submit { frame: 1, input_slot: 0, output_slot: 0, rendered: 0, output_free: 0 }, &[]);
    assert!(matches!(w.raw.recv(), Message::Enqueued { frame: 1, .. }));
    drop(w);
    assert!(worker.child.try_wait().expect("try_wait").is_none(), "the worker died:\n{}", worker.log());
    served(&r, &mut good, 3, "after the memory faults");
    let mut new = good_client(&r, &worker);
    served(&r, &mut new, 2, "a new client after the memory faults");
    new.close(&r);
    worker.wait_log("disconnected", 4);
    back_to(&worker, base, "after the memory faults");
    good.close(&r);
    pair.destroy(&r);
    assert_eq!(r.validation_errors(), 0);
    let (status, took, log) = terminate(worker, Duration::from_secs(10));
    println!("{log}");
    assert!(status.success(), "SIGTERM: {status} after {took:?}");
}

/// A client that changes its slot memory from a second thread while the worker
/// checks and imports it, and while frames run on it, for `attempts` hand-overs
/// (each builds a context in the worker: about 60 ms on lavapipe). Each attempt
/// hands over a sealable memfd holding lavapipe's export (header and all); the
/// racing thread, until the attempt ends, flips the header's mapping size and
/// data offset (and the copy of the offset before the data) between the true
/// values and lies (past the file's end, an offset beyond the mapping, a mapping
/// no process can make, data running past the mapping, a mapping too short for
/// the allocation, data inside the header), cuts the file and grows it back
/// (possible until the worker seals it), adds seals (against writing, against
/// further seals) and rewrites the data. Each attempt ends in Ready and frames,
/// or in an Error of the hand-over; never in a dead worker. Meanwhile a
/// well-behaved client is served frame after frame from a thread of its own,
/// each equal to ONNX Runtime's CPU run, and the worker's descriptors and
/// threads end where they started. Lavapipe only (its memory is a memfd);
/// elsewhere there is nothing to race.
///
/// The worker maps memory files itself and imports its own mapping as host
/// memory, so no lie reaches the driver: lavapipe's own import read the header
/// again when it freed the memory (also when it refused the import itself,
/// inside vkAllocateMemory), and a lie then could unmap any part of the worker.
pub fn a_client_racing_its_slot_memory_cannot_end_the_worker(backend: &str, attempts: u64) {
    use std::os::unix::fs::FileExt as _;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let _serial = serial();
    let (worker, r, mut good, base) = with_a_good_client(backend);
    let pair = SlotPair::new(&r, &welcomed(&r, &worker));
    let (m_in, fd_in, fd_out, real_len) = (pair.m_in, &pair.fd_in, &pair.fd_out, pair.file_len);
    if real_len == 0 {
        println!("the driver's memory is not a file here: nothing to race");
        return;
    }
    let mut head = [0u8; 16];
    std::fs::File::from(fd_in.try_clone().expect("dup")).read_exact_at(&mut head, 0).expect("lavapipe's header");
    let word = |i: usize| u64::from_ne_bytes(head[i..i + 8].try_into().expect("8 bytes"));
    let (mapped, offset) = (word(0), word(8));
    // The header's lies: (mapping size, data offset).
    let lies = [
        (mapped + (1 << 20), offset),    // a mapping past the file's end
        (mapped, mapped + (1 << 30)),    // data far beyond the mapping
        (u64::MAX - 4095, offset),       // a mapping no process can make
        (mapped, offset + (mapped / 2)), // data that runs past the mapping
        (offset + 16, offset),           // a mapping of 16 bytes of data, which lavapipe's import refuses
        (mapped, 8),                     // data inside the header
    ];
    let slots = pair.slots();
    let flips = AtomicU64::new(0);
    let started = Instant::now();
    // The racer stops when its attempt ends, a panic included (its scope joins it).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    // The race runs on a thread of its own; the well-behaved client is served frame
    // after frame on this one, each checked, until the race is over.
    let hello_msg = hello(&r, 16, 8, 1);
    let (outcomes, good_frames) = std::thread::scope(|outer| {
        let race = outer.spawn(|| {
            let mut outcomes = std::collections::BTreeMap::<String, u64>::new();
            for attempt in 0..attempts {
                let w = welcomed_when_free(&hello_msg, &worker);
                let memory = std::fs::File::from(sealable_copy(fd_in, real_len));
                let done = AtomicBool::new(false);
                let outcome = std::thread::scope(|scope| {
                    let _stop = Stop(&done);
                    let racer = scope.spawn(|| {
                        let mut k = attempt;
                        while !done.load(Ordering::Relaxed) {
                            k += 1;
                            // The header, and the copy of the data's offset just before the data
                            // (what Mesa's free reads).
                            let header = |(size, off): (u64, u64)| {
                                let mut h = [0u8; 16];
                                h[..8].copy_from_slice(&size.to_ne_bytes());
                                h[8..].copy_from_slice(&off.to_ne_bytes());
                                let _ = memory.write_all_at(&h, 0);
                                let _ = memory.write_all_at(&off.to_ne_bytes(), offset - 8);
                            };
                            match k % 8 {
                                0 | 2 | 4 => header(lies[(k / 8 % lies.len() as u64) as usize]),
                                1 | 3 | 5 => header((mapped, offset)),
                                6 => {
                                    // Cut and grown back: refused by the seal once the worker sealed it.
                                    let _ = memory.set_len(m_in.allocation_size / 2);
                                    let _ = memory.set_len(real_len);
                                }
                                _ => {
                                    let seal = if k % 16 == 7 { libc::F_SEAL_WRITE } else { libc::F_SEAL_SEAL };
                                    // SAFETY: fcntl on an open descriptor of ours.
                                    unsafe { libc::fcntl(memory.as_raw_fd(), libc::F_ADD_SEALS, seal) };
                                    let _ = memory.write_all_at(&[k as u8; 64], offset + 64 * (k % 8));
                                }
                            }
                            flips.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    w.raw.send(&slots, &[memory.as_raw_fd(), fd_out.as_raw_fd()]);
                    let recv = || {
                        neural_frame_client::wire::recv(&w.raw.s).map(|(m, _)| m).unwrap_or_else(|e| {
                            panic!("attempt {attempt}: no message from the worker ({e}); its log:\n{}", worker.log())
                        })
                    };
                    let outcome = match recv() {
                        Message::Ready { .. } => {
                            // Frames while the racer goes on: each ends in Done or an Error, never a dead worker.
                            let mut last = "Ready".to_owned();
                            for frame in 1..=2 {
                                let submit = Message::Submit {
                                    frame,
                                    input_slot: 0,
                                    output_slot: 0,
                                    rendered: 0,
                                    output_free: 0,
                                };
                                w.raw.send(&submit, &[]);
                                last = loop {
                                    match recv() {
                                        Message::Done { .. } => break "frames done".to_owned(),
                                        Message::Error { code, .. } => break format!("{code:?} in a frame"),
                                        _ => continue,
                                    }
                                };
                                if !last.starts_with("frames") {
                                    break;
                                }
                            }
                            last
                        }
                        Message::Error { code, .. } => format!("{code:?} at the hand-over"),
                        other => panic!("{other:?} where Ready or an Error belongs"),
                    };
                    done.store(true, Ordering::Relaxed);
                    racer.join().expect("the racing thread");
                    outcome
                });
                *outcomes.entry(outcome).or_default() += 1;
                drop(w);
                assert!(worker.alive(), "the worker died in attempt {attempt}:\n{}", worker.log());
            }
            outcomes
        });
        let mut n = 2;
        while !race.is_finished() {
            served(&r, &mut good, n, "during the race");
            n += 1;
        }
        (race.join().expect("the race"), n - 2)
    });
    println!(
        "{attempts} hand-overs in {:.1} s, {} changes to the memory while the worker looked: {outcomes:?}; the \
         well-behaved client got {good_frames} frames meanwhile, each equal to ONNX Runtime's",
        started.elapsed().as_secs_f64(),
        flips.load(Ordering::Relaxed)
    );
    assert!(good_frames > 0, "the well-behaved client got no frame during the race");
    assert!(outcomes.keys().any(|k| k.contains("at the hand-over")), "no lie was ever caught: {outcomes:?}");
    assert!(outcomes.contains_key("frames done"), "no attempt got through to frames: {outcomes:?}");
    let mut new = good_client(&r, &worker);
    served(&r, &mut new, 2, "a new client after the race");
    new.close(&r);
    back_to(&worker, base, "after the race");
    good.close(&r);
    pair.destroy(&r);
    assert_eq!(r.validation_errors(), 0);
    let (status, took, log) = terminate(worker, Duration::from_secs(10));
    assert!(status.success(), "SIGTERM: {status} after {took:?}:\n{log}");
}

/// Bursts of `clients` clients at once, `bursts` times: each client hands over
/// its slots (the worker builds it a context and imports them), runs one frame
/// and leaves. The worker's memory once each burst has ended stays within 1.25×
/// its memory after the first (the allocator's freed memory is handed back when
/// sessions end), and its descriptors and threads return to where they were.
pub fn worker_memory_comes_back_after_bursts(backend: &str, bursts: usize, clients: usize) {
    let _serial = serial();
    let max = clients.to_string();
    let mut worker = Worker::start(backend, F32, &["--max-clients", &max]);
    let r = Renderer::new(true).expect("a renderer");
    let base = settled(&worker);
    let pair = SlotPair::new(&r, &welcomed(&r, &worker));
    let hello = hello(&r, 16, 8, 1);
    let slots = pair.slots();
    let fds = [pair.fd_in.as_raw_fd(), pair.fd_out.as_raw_fd()];
    let mut after = Vec::new();
    for burst in 0..bursts {
        let served = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..clients {
                scope.spawn(|| {
                    let raw = Raw::new(&worker.socket);
                    raw.send(&hello, &[]);
                    let Message::Welcome { .. } = raw.recv() else { panic!("no Welcome") };
                    raw.send(&slots, &fds);
                    assert_eq!(raw.recv(), Message::Ready { timelines: 0 });
                    raw.send(
                        &Message::Submit { frame: 1, input_slot: 0, output_slot: 0, rendered: 0, output_free: 0 },
                        &[],
                    );
                    loop {
                        match raw.recv() {
                            Message::Done { .. } => break,
                            Message::Enqueued { .. } | Message::Consumed { .. } => {}
                            other => panic!("{other:?} where the frame's messages belong"),
                        }
                    }
                    served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                });
            }
        });
        assert_eq!(served.into_inner(), clients);
        assert!(worker.child.try_wait().expect("try_wait").is_none(), "the worker died:\n{}", worker.log());
        let now = settled(&worker);
        println!("burst {}: {clients} clients served; the worker holds {now:?}", burst + 1);
        assert_eq!((now.fds, now.threads), (base.fds, base.threads), "burst {}: {now:?} against {base:?}", burst + 1);
        after.push(now.rss_kib);
    }
    let (first, last) = (after[0], *after.last().unwrap_or(&0));
    println!(
        "the worker's memory: {} KiB before, {first} KiB after the first burst, {last} KiB after the last ({:.2}×)",
        base.rss_kib,
        last as f64 / first as f64
    );
    assert!(last * 4 <= first * 5, "after {bursts} bursts the worker holds {last} KiB, more than 1.25× {first} KiB");
    pair.destroy(&r);
    let (status, took, log) = terminate(worker, Duration::from_secs(10));
    assert!(status.success(), "SIGTERM: {status} after {took:?}:\n{log}");
}

/// A memfd made with `MFD_ALLOW_SEALING`, unsealed, holding `like`'s first `len` bytes.
fn sealable_copy(like: &std::os::fd::OwnedFd, len: u64) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd as _;
    use std::os::unix::fs::FileExt as _;
    // SAFETY: memfd_create with a NUL-terminated name; the descriptor is ours.
    let fd = unsafe { libc::memfd_create(c"nf-sealable".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh descriptor that nothing else owns.
    let file = std::fs::File::from(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
    let mut bytes = vec![0u8; len as usize];
    let n = std::fs::File::from(like.try_clone().expect("dup")).read_at(&mut bytes, 0).expect("read");
    file.write_all_at(&bytes[..n], 0).expect("write");
    file.set_len(len).expect("ftruncate");
    file.into()
}

/// Models the contract refuses for every frame stop `serve` at start: exit code
/// 1 before it listens, with the contract's reason.
pub fn models_refused_for_every_frame_stop_the_worker_at_start(backend: &str) {
    for (model, reason) in
        [("models/test/bad-rank5.onnx", "rank 5"), ("models/test/bad-one-channel.onnx", "no input for the frame")]
    {
        let dir = std::env::temp_dir().join(format!("nf-serve-refused-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let socket = dir.join("worker.sock");
        let mut child = std::process::Command::new(super::worker_bin())
            .args(["serve", "--backend", backend, "--model", model, "--socket"])
            .arg(&socket)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the worker starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = child.try_wait().expect("try_wait") {
                break s;
            }
            if socket.exists() || Instant::now() > deadline {
                let _ = child.kill();
                let out = child.wait_with_output().expect("output");
                panic!("{model}: the worker listens:\n{}", String::from_utf8_lossy(&out.stderr));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().expect("output");
        let err = String::from_utf8_lossy(&out.stderr);
        println!("{model}: {status}\n{err}");
        assert_eq!(status.code(), Some(1), "{model}: {err}");
        assert!(err.contains(reason) && err.contains("cannot serve any frame"), "{model}: {err}");
        assert!(!socket.exists(), "{model}: the socket was made");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
