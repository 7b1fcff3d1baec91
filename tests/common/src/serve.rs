//! Scenarios of `neural-frame serve`, run on the CPU backend in host mode on
//! lavapipe (tests/cpu_serve.rs) and on the CUDA backend in GPU mode
//! (tests/gpu_serve.rs): a worker process, and clients that are this test
//! process (a renderer of examples/support with neural-frame-client on it) or
//! raw sockets that break the protocol on purpose.

use std::io::Read as _;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::foreign::renderer::{RBuffer, Renderer};
use super::pipeline::{expected_image, picture, reference_output};
use ash::vk;
use neural_frame::{Backend, NeuralFrameContext};
use neural_frame_client::protocol::{self, ErrorCode, Geometry, Message, SlotMemory};
use neural_frame_client::{Client, ClientDevice, FrameId, Options, SyncMode, SyncPreference, wire};

/// The scenarios of clients that misbehave on purpose (issue 25): stuck, idle,
/// flooding, faulting memory; and models refused at start.
#[path = "serve_limits.rs"]
pub mod limits;

pub const F32: &str = "models/test/tiny-x2-f32.onnx";

/// The worker binary: `NEURAL_FRAME_BIN`, else the one cargo built.
pub fn worker_bin() -> PathBuf {
    super::bin()
}

/// The client crate's `render` example: `NEURAL_FRAME_RENDER`, else next to the worker binary
/// (`cargo test --workspace` builds it; scripts/test does).
pub fn render_bin() -> PathBuf {
    let path = std::env::var_os("NEURAL_FRAME_RENDER")
        .map(PathBuf::from)
        .unwrap_or_else(|| super::bin().with_file_name("examples").join("render"));
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build --release -p neural-frame-client --example render` (or run \
         scripts/test, which tests the whole workspace)",
        path.display()
    );
    path
}

/// One test at a time: they count descriptors and memory of processes.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
static NEXT: AtomicUsize = AtomicUsize::new(0);

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A `neural-frame serve` process on a socket of its own.
pub struct Worker {
    pub child: Child,
    pub socket: PathBuf,
    dir: PathBuf,
    log: PathBuf,
}

impl Worker {
    pub fn start(backend: &str, model: &str, extra: &[&str]) -> Worker {
        Worker::start_with_env(backend, model, extra, &[])
    }

    /// A worker with variables added to its environment (the test hooks).
    pub fn start_with_env(backend: &str, model: &str, extra: &[&str], env: &[(&str, &str)]) -> Worker {
        let dir = std::env::temp_dir().join(format!(
            "nf-serve-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a directory for the socket");
        let socket = dir.join("worker.sock");
        let log = dir.join("worker.log");
        let child = Command::new(worker_bin())
            .args(["serve", "--socket"])
            .arg(&socket)
            .args(["--model", model, "--backend", backend])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("the worker's log"))
            .spawn()
            .expect("the worker starts");
        let mut w = Worker { child, socket, dir, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !w.socket.exists() {
            if let Ok(Some(status)) = w.child.try_wait() {
                panic!("the worker exited ({status}) before listening:\n{}", w.log());
            }
            assert!(Instant::now() < deadline, "the worker did not listen within 60 s:\n{}", w.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        w
    }

    /// Whether the worker's process is running (not ended, nor a zombie).
    pub fn alive(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().chars().next()))
            .is_some_and(|state| state != Some('Z') && state != Some('X'))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The worker's open descriptors.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map(|d| d.count()).unwrap_or(0)
    }

    /// The worker's threads.
    pub fn threads(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.pid())).map(|d| d.count()).unwrap_or(0)
    }

    /// The worker's resident memory, KiB.
    pub fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Waits until the log has `n` lines containing `what` (bounded).
    pub fn wait_log(&self, what: &str, n: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = self.log();
            if log.matches(what).count() >= n {
                return log;
            }
            assert!(Instant::now() < deadline, "no {n}× `{what}` in the worker's log within 30 s:\n{log}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0, "kill {signal}");
    }

    /// SIGINT, then waits (at most 60 s): the exit status and the log.
    pub fn stop(mut self) -> (ExitStatus, String) {
        self.signal(libc::SIGINT);
        let status = self.wait(Duration::from_secs(60));
        (status, self.log())
    }

    pub fn wait(&mut self, bound: Duration) -> ExitStatus {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return s;
            }
            assert!(Instant::now() < deadline, "the worker did not exit within {bound:?}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn client_device(r: &Renderer) -> ClientDevice {
    r.client_device()
}

pub fn connect(r: &Renderer, socket: &Path, w: u32, h: u32, slots: u16, sync: SyncPreference) -> Client {
    let mut o = Options::new(socket, w, h, vk::Format::R8G8B8A8_UNORM);
    (o.input_slots, o.output_slots, o.sync) = (slots, slots, sync);
    // SAFETY: the renderer's device has external memory fds (and semaphore fds where the driver
    // does), and outlives the client.
    unsafe { Client::connect(&client_device(r), o) }.unwrap_or_else(|e| panic!("connecting: {e}"))
}

/// What the worker should give for `rgba` (ONNX Runtime's CPU run, quantised as the post pass does).
pub fn expected(model: &str, rgba: &[u8], w: u32, h: u32) -> Vec<u8> {
    let ctx = NeuralFrameContext::builder(model).backend(Backend::Cpu).frame_size(8, 8).build().expect("a context");
    let contract = ctx.contract().clone();
    drop(ctx);
    let reference = reference_output(Path::new(model), &contract, rgba, w, h);
    expected_image(&contract, &reference, rgba, w, h)
}

/// The renderer's side of a connection: a staging buffer per input slot and a readback buffer, the
/// commands that move frames into and out of the slots, and a timeline of its own.
pub struct Side {
    pub client: Client,
    staging: Vec<RBuffer>,
    readback: RBuffer,
    /// GPU mode: the "rendered" value of the copy that last read each staging buffer.
    put_value: Vec<u64>,
    put: Vec<vk::CommandBuffer>,
    take: Vec<vk::CommandBuffer>,
    local: vk::Semaphore,
    tick: u64,
    /// The worker's "input consumed" value each input slot's last frame reaches (GPU mode).
    consumed: Vec<Option<neural_frame_client::WaitPoint>>,
    pub w: u32,
    pub h: u32,
}

impl Side {
    pub fn new(r: &Renderer, client: Client, w: u32, h: u32) -> Side {
        let cd = client_device(r);
        let in_bytes = w as u64 * h as u64 * 4;
        let out = client.output_geometry();
        let out_bytes = out.bytes().expect("output size");
        let usage = vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        let staging: Vec<_> =
            (0..client.input_slots()).map(|_| r.buffer(in_bytes, usage, true, false).expect("staging")).collect();
        let readback = r.buffer(out_bytes, usage, true, false).expect("readback");
        let copy = |d: &ash::Device, cmd, src, dst, size| {
            // SAFETY: cmd is recording; both buffers hold `size` bytes.
            unsafe { d.cmd_copy_buffer(cmd, src, dst, &[vk::BufferCopy { src_offset: 0, dst_offset: 0, size }]) };
        };
        // Every slot starts on the worker's side (released once), so each use is acquire → copy → release.
        let all: Vec<_> = (0..client.input_slots())
            .map(|i| client.input_slot(i))
            .chain((0..client.output_slots()).map(|j| client.output_slot(j)))
            .collect();
        let first = r
            .record(|_, cmd| {
                for s in &all {
                    // SAFETY: cmd is recording on the renderer's queue family.
                    unsafe { neural_frame_client::release_to_worker(&cd, cmd, s) };
                }
            })
            .expect("record");
        r.submit(&[first], &[], &[]).expect("submit");
        r.idle().expect("idle");
        let put = (0..client.input_slots())
            .map(|i| {
                let s = client.input_slot(i);
                r.record(|d, cmd| {
                    // SAFETY: cmd is recording on the renderer's queue family.
                    unsafe { neural_frame_client::acquire_from_worker(&cd, cmd, s) };
                    copy(d, cmd, staging[i].buffer, s.buffer(), in_bytes);
                    // SAFETY: as above.
                    unsafe { neural_frame_client::release_to_worker(&cd, cmd, s) };
                })
                .expect("record")
            })
            .collect();
        let take = (0..client.output_slots())
            .map(|j| {
                let s = client.output_slot(j);
                r.record(|d, cmd| {
                    // SAFETY: cmd is recording on the renderer's queue family.
                    unsafe { neural_frame_client::acquire_from_worker(&cd, cmd, s) };
                    copy(d, cmd, s.buffer(), readback.buffer, out_bytes);
                    // SAFETY: as above.
                    unsafe { neural_frame_client::release_to_worker(&cd, cmd, s) };
                })
                .expect("record")
            })
            .collect();
        let local = r.semaphore(true, false).expect("a timeline");
        let consumed = vec![None; client.input_slots()];
        let put_value = vec![0; client.input_slots()];
        Side { client, staging, readback, put_value, put, take, local, tick: 0, consumed, w, h }
    }

    /// Frame `n` (1, 2, …) of `rgba` through slots `n mod slots`, submitted and not waited for.
    pub fn send(&mut self, r: &Renderer, rgba: &[u8], n: u64) -> FrameId {
        let (si, so) = ((n as usize - 1) % self.put.len(), (n as usize - 1) % self.take.len());
        if let (SyncMode::Gpu, Some(rendered)) = (self.client.sync_mode(), self.client.rendered_timeline()) {
            // The staging buffer's last copy ran before it signalled "rendered".
            r.wait(rendered, self.put_value[si]).expect("the staging buffer's last copy");
            self.put_value[si] = n;
        }
        r.write(&self.staging[si], rgba);
        match self.client.sync_mode() {
            SyncMode::Host => {
                self.tick += 1;
                r.submit(&[self.put[si]], &[], &[(self.local, self.tick)]).expect("submit");
                r.wait(self.local, self.tick).expect("the copy into the slot");
                self.client.submit(si, so, 0, 0).expect("submit to the worker")
            }
            SyncMode::Gpu => {
                let rendered = self.client.rendered_timeline().expect("GPU mode has a rendered timeline");
                let waits: Vec<_> = self.consumed[si].iter().map(|p| (p.semaphore, p.value)).collect();
                r.submit(&[self.put[si]], &waits, &[(rendered, n)]).expect("submit");
                let id = self.client.submit(si, so, n, 0).expect("submit to the worker");
                let e = self.client.enqueued(id).expect("enqueued");
                self.consumed[si] = Some(e.input_consumed);
                id
            }
        }
    }

    /// Waits for frame `id` and reads its output slot back.
    pub fn receive(&mut self, r: &Renderer, id: FrameId) -> Vec<u8> {
        let so = (id.number() as usize - 1) % self.take.len();
        let waits = match self.client.sync_mode() {
            SyncMode::Host => {
                self.client.wait_done(id).expect("the worker's Done");
                vec![]
            }
            SyncMode::Gpu => {
                let e = self.client.enqueued(id).expect("enqueued");
                vec![(e.output_ready.semaphore, e.output_ready.value)]
            }
        };
        self.tick += 1;
        r.submit(&[self.take[so]], &waits, &[(self.local, self.tick)]).expect("submit");
        r.wait(self.local, self.tick).expect("the readback");
        if self.client.sync_mode() == SyncMode::Gpu {
            self.client.wait_done(id).expect("the worker's Done");
        }
        r.read(&self.readback, self.readback.size as usize)
    }

    /// One frame there and back.
    pub fn frame(&mut self, r: &Renderer, rgba: &[u8], n: u64) -> Vec<u8> {
        r.write(&self.readback, &vec![0xa5; self.readback.size as usize]); // poisoned
        let id = self.send(r, rgba, n);
        self.receive(r, id)
    }

    /// Leaves with a Bye, then destroys the renderer's objects.
    pub fn close(self, r: &Renderer) {
        let Side { client, staging, readback, local, .. } = self;
        client.close().expect("a clean close");
        r.idle().expect("idle");
        staging.into_iter().for_each(|b| r.destroy_buffer(b));
        r.destroy_buffer(readback);
        r.destroy_semaphore(local);
    }

    pub fn destroy(self, r: &Renderer) {
        r.idle().expect("idle");
        drop(self.client);
        self.staging.into_iter().for_each(|b| r.destroy_buffer(b));
        r.destroy_buffer(self.readback);
        r.destroy_semaphore(self.local);
    }
}

/// The hand-over and frames through one worker: each frame's output equals ONNX
/// Runtime's CPU run; the worker logs the connect and the disconnect, and a
/// SIGINT stops it with exit code 0.
pub fn frames_match_onnx_runtime(backend: &str, sync: SyncPreference, expect_mode: SyncMode) {
    let _serial = serial();
    let worker = Worker::start(backend, F32, &[]);
    let r = Renderer::new(true).expect("a renderer");
    let (w, h) = (40, 24);
    let client = connect(&r, &worker.socket, w, h, 3, sync);
    assert_eq!(client.sync_mode(), expect_mode);
    assert_eq!(client.output_geometry(), Geometry { width: 80, height: 48, format: 37, row_pitch: 320 });
    let mut side = Side::new(&r, client, w, h);
    for n in 1..=7u64 {
        let rgba = picture(w, h, n as u32);
        let got = side.frame(&r, &rgba, n);
        let want = expected(F32, &rgba, w, h);
        let (d, x, y, c) = super::pipeline::max_diff(&got, &want, 2 * w);
        assert!(d <= 1, "frame {n}: channel {c} at ({x},{y}) differs by {d}");
    }
    // Pipelined: three frames in flight before the first is read.
    let pics: Vec<_> = (8..=10u64).map(|n| picture(w, h, n as u32)).collect();
    let ids: Vec<_> = (8..=10u64).zip(&pics).map(|(n, p)| side.send(&r, p, n)).collect();
    let last = ids[2];
    for (id, p) in ids.into_iter().zip(&pics) {
        let got = side.receive(&r, id);
        assert!(super::pipeline::max_diff(&got, &expected(F32, p, w, h), 2 * w).0 <= 1);
    }
    // A collected frame is no longer tracked: both ways of asking say so at once (not None forever).
    let polled = side.client.try_done(last).expect_err("a collected frame");
    let waited = side.client.wait_done(last).expect_err("a collected frame");
    for e in [polled, waited] {
        assert!(matches!(&e, neural_frame_client::Error::InvalidArgument(m) if m.contains("not in flight")), "{e}");
    }
    side.close(&r);
    assert_eq!(r.validation_errors(), 0, "the renderer's validation layer");
    let log = worker.wait_log("disconnected", 1);
    assert!(log.contains("client 1 (pid") && log.contains("connected"), "{log}");
    let (status, log) = worker.stop();
    assert!(status.success(), "SIGINT: the worker exits 0 ({status}):\n{log}");
    assert!(log.contains("stopped"), "{log}");
}

/// A raw connection for the fault tests.
pub struct Raw {
    pub s: UnixStream,
}

impl Raw {
    pub fn new(socket: &Path) -> Raw {
        let s = UnixStream::connect(socket).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        Raw { s }
    }
    pub fn send(&self, m: &Message, fds: &[std::os::fd::RawFd]) {
        wire::send(&self.s, m, fds).expect("send");
    }
    pub fn recv(&self) -> Message {
        wire::recv(&self.s).map(|(m, _)| m).unwrap_or_else(|e| panic!("no message from the worker: {e}"))
    }
    /// The worker's Error, and then the connection closed.
    pub fn expect_error(&self, code: ErrorCode, words: &str) -> String {
        let m = loop {
            match self.recv() {
                Message::Error { code: c, message } => break (c, message),
                Message::Enqueued { .. } | Message::Consumed { .. } | Message::Done { .. } => continue,
                other => panic!("{other:?} where an Error {code:?} was expected"),
            }
        };
        assert_eq!(m.0, code, "{}", m.1);
        assert!(m.1.contains(words), "`{}` does not say `{words}`", m.1);
        let mut rest = Vec::new();
        let _ = (&self.s).read_to_end(&mut rest);
        assert!(rest.is_empty(), "the worker closes the connection after an Error");
        m.1
    }
}

pub fn hello(r: &Renderer, w: u32, h: u32, slots: u16) -> Message {
    Message::Hello {
        version: protocol::VERSION,
        device_uuid: r.identity.device_uuid,
        driver_uuid: r.identity.driver_uuid,
        input: Geometry {
            width: w,
            height: h,
            format: vk::Format::R8G8B8A8_UNORM.as_raw() as u32,
            row_pitch: w as u64 * 4,
        },
        input_slots: slots,
        output_slots: slots,
        sync_modes: protocol::SYNC_HOST,
        model: String::new(),
    }
}

/// A Hello's fields, to change one.
pub struct HelloFields<'a> {
    pub version: &'a mut u16,
    pub device_uuid: &'a mut [u8; 16],
    pub input: &'a mut Geometry,
    pub sync_modes: &'a mut u32,
    pub model: &'a mut String,
}

pub fn edit_hello(mut m: Message, edit: impl FnOnce(HelloFields<'_>)) -> Message {
    if let Message::Hello { version, device_uuid, input, sync_modes, model, .. } = &mut m {
        edit(HelloFields { version, device_uuid, input, sync_modes, model });
    }
    m
}

/// An exportable device buffer of the renderer's and its memory description.
pub fn slot(r: &Renderer, size: u64) -> (RBuffer, SlotMemory, OwnedFd) {
    let usage =
        vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
    let b = r.buffer(size, usage, false, true).expect("an exportable buffer");
    let m = r.export(&b.alloc).expect("export");
    let mem = SlotMemory {
        allocation_size: m.allocation_size,
        buffer_size: size,
        memory_type_index: m.memory_type_index,
        usage: usage.as_raw(),
        dedicated: m.dedicated,
    };
    (b, mem, m.fd)
}

/// Every fault of the issue, one connection each; the worker answers each with
/// an Error and closes, and a good client is served after all of them.
pub fn faults_get_an_error_and_the_worker_keeps_serving(backend: &str) {
    let _serial = serial();
    let worker = Worker::start(backend, F32, &[]);
    let r = Renderer::new(true).expect("a renderer");
    let (w, h) = (16, 8);
    // A client that is served before, during and after the faults of the others.
    let mut good = Side::new(&r, connect(&r, &worker.socket, w, h, 2, SyncPreference::Auto), w, h);
    let rgba = picture(w, h, 5);
    let want = expected(F32, &rgba, w, h);
    assert!(super::pipeline::max_diff(&good.frame(&r, &rgba, 1), &want, 2 * w).0 <= 1);
    let in_bytes = (w * h * 4) as u64;
    let out_bytes = in_bytes * 4;
    let mut keep = Vec::new();
    // Up to the Slots, for the hand-over faults: (raw connection, welcome).
    let welcomed = |hello: Message| {
        let raw = Raw::new(&worker.socket);
        raw.send(&hello, &[]);
        match raw.recv() {
            Message::Welcome { .. } => raw,
            other => panic!("{other:?} where a Welcome was expected"),
        }
    };
    let mut slots = |n: usize| {
        let mut mems = Vec::new();
        let mut fds = Vec::new();
        for i in 0..n {
            let (b, m, fd) = slot(&r, if i == 0 { in_bytes } else { out_bytes });
            keep.push(b);
            mems.push(m);
            fds.push(fd);
        }
        (mems, fds)
    };

    // Random bytes, an oversized frame, a malformed body.
    let raw = Raw::new(&worker.socket);
    wire::send_raw(&raw.s, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", &[]).expect("send");
    raw.expect_error(ErrorCode::Malformed, "bytes");
    let raw = Raw::new(&worker.socket);
    let mut big = Message::Consumed { frame: 1 }.encode();
    big[..4].copy_from_slice(&(64u32 << 20).to_le_bytes());
    wire::send_raw(&raw.s, &big, &[]).expect("send");
    raw.expect_error(ErrorCode::Malformed, "the most is");
    let raw = Raw::new(&worker.socket);
    let mut bytes = hello(&r, w, h, 1).encode();
    bytes.truncate(bytes.len() - 3);
    let len = (bytes.len() - 4) as u32;
    bytes[..4].copy_from_slice(&len.to_le_bytes());
    wire::send_raw(&raw.s, &bytes, &[]).expect("send");
    raw.expect_error(ErrorCode::Malformed, "body ends");
    // A wrong protocol version; not a hello first.
    let raw = Raw::new(&worker.socket);
    raw.send(&edit_hello(hello(&r, w, h, 1), |m| *m.version = 99), &[]);
    raw.expect_error(ErrorCode::Version, "version 99");
    let raw = Raw::new(&worker.socket);
    raw.send(&Message::Submit { frame: 1, input_slot: 0, output_slot: 0, rendered: 0, output_free: 0 }, &[]);
    raw.expect_error(ErrorCode::State, "before the Hello");
    // A worker's message from the client (a Welcome): well formed, in the wrong place.
    let raw = Raw::new(&worker.socket);
    let welcome = Message::Welcome {
        version: protocol::VERSION,
        sync_mode: protocol::SyncMode::Host,
        model: String::new(),
        output: Geometry {
            width: w,
            height: h,
            format: vk::Format::R8G8B8A8_UNORM.as_raw() as u32,
            row_pitch: 4 * w as u64,
        },
        max_in_flight: 1,
    };
    raw.send(&welcome, &[]);
    raw.expect_error(ErrorCode::State, "Welcome");
    let raw = welcomed(hello(&r, w, h, 1));
    raw.send(&welcome, &[]);
    raw.expect_error(ErrorCode::State, "a Welcome message where the Slots belong");
    // A UUID of another GPU.
    let raw = Raw::new(&worker.socket);
    raw.send(&edit_hello(hello(&r, w, h, 1), |m| m.device_uuid[0] ^= 0xff), &[]);
    raw.expect_error(ErrorCode::WrongDevice, "deviceUUID");
    // A format the model cannot take, a model the worker does not serve.
    let raw = Raw::new(&worker.socket);
    raw.send(&edit_hello(hello(&r, w, h, 1), |m| m.input.format = vk::Format::R32_SFLOAT.as_raw() as u32), &[]);
    raw.expect_error(ErrorCode::Format, "R32_SFLOAT");
    let raw = Raw::new(&worker.socket);
    raw.send(&edit_hello(hello(&r, w, h, 1), |m| *m.model = "other.onnx".into()), &[]);
    raw.expect_error(ErrorCode::Model, "other.onnx");
    // A wrong fd count: a Slots for two slots that declares and carries one descriptor.
    let raw = welcomed(hello(&r, w, h, 1));
    let (mems, fds) = slots(2);
    let mut bytes = Message::Slots { inputs: vec![mems[0]], outputs: vec![mems[1]], timeline: false }.encode();
    bytes[6..8].copy_from_slice(&1u16.to_le_bytes());
    wire::send_raw(&raw.s, &bytes, &[fds[0].as_raw_fd()]).expect("send");
    raw.expect_error(ErrorCode::FdCount, "needs 2");
    // Descriptors that are not GPU memory (pipes).
    let raw = welcomed(hello(&r, w, h, 1));
    let (mems, _fds) = slots(2);
    let (p1, _w1) = std::io::pipe().expect("pipe");
    let (p2, _w2) = std::io::pipe().expect("pipe");
    raw.send(
        &Message::Slots { inputs: vec![mems[0]], outputs: vec![mems[1]], timeline: false },
        &[p1.as_raw_fd(), p2.as_raw_fd()],
    );
    raw.expect_error(ErrorCode::BadHandle, "input slot 0");
    // Memory smaller than the declared frame.
    let raw = welcomed(hello(&r, w, h, 1));
    let (mut mems, fds) = slots(2);
    mems[0].buffer_size = in_bytes - 4;
    raw.send(
        &Message::Slots { inputs: vec![mems[0]], outputs: vec![mems[1]], timeline: false },
        &[fds[0].as_raw_fd(), fds[1].as_raw_fd()],
    );
    raw.expect_error(ErrorCode::TooSmall, "needs 512");
    // Handed over, up to the Ready, for the faults of the frames.
    let mut ready = || {
        let raw = welcomed(hello(&r, w, h, 1));
        let (mems, fds) = slots(2);
        raw.send(
            &Message::Slots { inputs: vec![mems[0]], outputs: vec![mems[1]], timeline: false },
            &[fds[0].as_raw_fd(), fds[1].as_raw_fd()],
        );
        assert_eq!(raw.recv(), Message::Ready { timelines: 0 });
        raw
    };
    // A slot index out of range, and frame numbers that go backwards.
    for (frame, input_slot, code, words) in
        [(1, 5, ErrorCode::SlotRange, "slots 5"), (3, 0, ErrorCode::Backwards, "frame 3 after frame 0")]
    {
        let raw = ready();
        raw.send(&Message::Submit { frame, input_slot, output_slot: 0, rendered: 0, output_free: 0 }, &[]);
        raw.expect_error(code, words);
    }
    // Semaphore values in host mode; a frame after a good one that repeats its number.
    let raw = ready();
    raw.send(&Message::Submit { frame: 1, input_slot: 0, output_slot: 0, rendered: 0, output_free: 0 }, &[]);
    raw.send(&Message::Submit { frame: 1, input_slot: 0, output_slot: 0, rendered: 0, output_free: 0 }, &[]);
    raw.expect_error(ErrorCode::Backwards, "frame 1 after frame 1");
    let raw = ready();
    raw.send(&Message::Submit { frame: 1, input_slot: 0, output_slot: 0, rendered: 5, output_free: 0 }, &[]);
    raw.expect_error(ErrorCode::State, "host mode");

    // GPU mode (where the driver exports semaphores): "rendered" values that go backwards. The
    // first frame waits for a value nobody signals; the worker releases it when it ends the connection.
    if r.semaphore_fd.is_some() {
        let raw = Raw::new(&worker.socket);
        raw.send(&edit_hello(hello(&r, w, h, 1), |m| *m.sync_modes = protocol::SYNC_HOST | protocol::SYNC_GPU), &[]);
        assert!(matches!(raw.recv(), Message::Welcome { sync_mode: protocol::SyncMode::Gpu, .. }));
        let (mems, fds) = slots(2);
        let timeline = r.semaphore(true, true).expect("an exportable timeline");
        let tfd = r.export_semaphore(timeline).expect("export");
        raw.send(
            &Message::Slots { inputs: vec![mems[0]], outputs: vec![mems[1]], timeline: true },
            &[fds[0].as_raw_fd(), fds[1].as_raw_fd(), tfd.as_raw_fd()],
        );
        assert_eq!(raw.recv(), Message::Ready { timelines: 2 });
        raw.send(&Message::Submit { frame: 1, input_slot: 0, output_slot: 0, rendered: 5, output_free: 0 }, &[]);
        raw.send(&Message::Submit { frame: 2, input_slot: 0, output_slot: 0, rendered: 3, output_free: 0 }, &[]);
        raw.expect_error(ErrorCode::Backwards, "rendered 3 after 5");
        r.destroy_semaphore(timeline);
    }

    // The client connected before the faults is still served, and so is a new one.
    assert!(super::pipeline::max_diff(&good.frame(&r, &rgba, 2), &want, 2 * w).0 <= 1, "the first client");
    let client = connect(&r, &worker.socket, w, h, 2, SyncPreference::Auto);
    let mut side = Side::new(&r, client, w, h);
    let got = side.frame(&r, &rgba, 1);
    assert!(super::pipeline::max_diff(&got, &want, 2 * w).0 <= 1, "a new client");
    side.destroy(&r);
    good.close(&r);
    for b in keep {
        r.destroy_buffer(b);
    }
    assert_eq!(r.validation_errors(), 0);
    let log = worker.log();
    assert!(log.contains("answered with an Error"), "{log}");
    let (status, log) = worker.stop();
    println!("the worker's log:\n{log}");
    assert!(status.success(), "{log}");
}

/// Writes an RGBA8 PNG (for the example's input).
pub fn write_png(path: &Path, rgba: &[u8], w: u32, h: u32) {
    neural_frame::image_io::Rgba8 { width: w, height: h, pixels: rgba.to_vec() }.save_png(path).expect("write the PNG");
}

/// The `render` example as a process against a worker.
pub fn render(socket: &Path, input: &Path, output: &Path, frames: u32, extra: &[&str]) -> Command {
    let mut c = Command::new(render_bin());
    c.arg("--socket").arg(socket).arg("--input").arg(input).arg("--output").arg(output);
    c.args(["--frames", &frames.to_string()]).args(extra);
    c
}

/// `serve` plus the client crate's `render` example on a picture, with the
/// bundled ×4 model: PSNR ≥ 48 dB against ONNX Runtime's CPU run.
pub fn render_example_matches_onnx_runtime(backend: &str, frames: u32) -> Vec<u8> {
    let _serial = serial();
    let model = "models/upscale.onnx";
    let worker = Worker::start(backend, model, &[]);
    let (w, h) = (48, 32);
    let rgba: Vec<u8> = picture(w, h, 9).chunks(4).flat_map(|p| [p[0], p[1], p[2], 255]).collect();
    let dir = worker.socket.parent().expect("dir").to_path_buf();
    let (input, output) = (dir.join("in.png"), dir.join("out.png"));
    write_png(&input, &rgba, w, h);
    let out = render(&worker.socket, &input, &output, frames, &[]).output().expect("the example runs");
    let text = super::text(&out);
    assert!(out.status.success(), "render: {}\nworker:\n{}", text, worker.log());
    println!("{text}");
    // Its default warm-up (--warmup-ms 1000): at least one round of twice the slots, untimed.
    let warmed = text
        .split("before them ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no warm-up count in: {text}"));
    assert!(warmed >= 6 && warmed.is_multiple_of(6) && text.contains("(--warmup-ms 1000)"), "{text}");
    let got = neural_frame::image_io::Rgba8::load(&output).expect("the example's output");
    assert_eq!((got.width, got.height), (4 * w, 4 * h));
    let want = expected(model, &rgba, w, h);
    let mse =
        got.pixels.iter().zip(&want).map(|(a, b)| (*a as f64 - *b as f64).powi(2)).sum::<f64>() / want.len() as f64;
    let psnr = if mse == 0.0 { f64::INFINITY } else { 10.0 * (255.0f64 * 255.0 / mse).log10() };
    println!("serve + render: PSNR {psnr:.2} dB against ONNX Runtime's CPU run");
    assert!(psnr >= 48.0, "PSNR {psnr:.2} dB < 48 dB");
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
    got.pixels
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

/// The socket is made with mode 0600; with the mode opened up, a peer of
/// another user is refused by its SO_PEERCRED uid, unless `--allow-uid` names it.
pub fn socket_mode_and_peer_check(backend: &str) {
    let _serial = serial();
    let worker = Worker::start(backend, F32, &[]);
    assert_eq!(mode(&worker.socket), 0o600, "the socket's mode");
    // The pictures live apart from the workers' directories, readable and writable by anyone.
    let pics = std::env::temp_dir().join(format!("nf-peer-{}", std::process::id()));
    std::fs::create_dir_all(&pics).expect("a directory");
    let (input, output) = (pics.join("in.png"), pics.join("out.png"));
    write_png(&input, &picture(16, 8, 1), 16, 8);
    let dir = worker.socket.parent().expect("dir").to_path_buf();
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        println!("not root: no other user to connect as; only the socket's mode was checked");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let open = |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    open(&dir);
    open(&pics);
    let as_nobody = |socket: &Path| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(render_bin());
        c.arg("--socket").arg(socket).arg("--input").arg(&input).arg("--output").arg(&output);
        c.output().expect("setpriv runs")
    };
    // The mode alone keeps another user out.
    let out = as_nobody(&worker.socket);
    assert!(!out.status.success() && super::text(&out).contains("ermission denied"), "{}", super::text(&out));
    // With the mode opened, the worker's peer check refuses them.
    open(&worker.socket);
    let out = as_nobody(&worker.socket);
    assert!(!out.status.success(), "{}", super::text(&out));
    assert!(super::text(&out).contains("user 65534 may not use this worker"), "{}", super::text(&out));
    assert!(worker.wait_log("refused: another user", 1).contains("--allow-uid 65534"));
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
    // --allow-uid lets them in.
    let worker = Worker::start(backend, F32, &["--allow-uid", "65534"]);
    let dir2 = worker.socket.parent().expect("dir").to_path_buf();
    open(&dir2);
    open(&worker.socket);
    let out = as_nobody(&worker.socket);
    assert!(out.status.success(), "{}\nworker:\n{}", super::text(&out), worker.log());
    worker.wait_log("uid 65534) connected", 1);
    worker.wait_log("disconnected", 1);
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
    let _ = std::fs::remove_dir_all(&pics);
}

/// A client process killed with frames in flight: the worker lets go of its
/// imports (descriptors and memory back to what they were), and keeps serving.
pub fn client_killed_mid_frame_releases_everything(backend: &str) {
    let _serial = serial();
    let worker = Worker::start(backend, F32, &[]);
    let dir = worker.socket.parent().expect("dir").to_path_buf();
    let (input, output) = (dir.join("in.png"), dir.join("out.png"));
    let (w, h) = (64, 48);
    write_png(&input, &picture(w, h, 3), w, h);
    // A first client warms the worker up (ONNX Runtime's threads, the driver's caches), with
    // frames enough for its context's fast start to end (the fused session's kernels, which cuDNN
    // keeps for the process, then exist before the GPU's free memory is read).
    let warm_up_frames = if backend == "cuda" { 3000 } else { 5 };
    for n in 1..=2 {
        let out = render(&worker.socket, &input, &output, warm_up_frames, &[]).output().expect("render");
        assert!(out.status.success(), "{}", super::text(&out));
        worker.wait_log("disconnected", n);
    }
    // The GPU's free memory, read through a CUDA context of this process (CUDA backend only).
    let probe = (backend == "cuda").then(|| {
        // Settled before the first reading: a fast start's fused session, built on a thread of the
        // probe's own, would otherwise take its memory between the two readings.
        let mut probe =
            NeuralFrameContext::builder(F32).backend(Backend::Cuda).frame_size(8, 8).build().expect("a CUDA context");
        assert!(probe.wait_settled(Duration::from_secs(120)).expect("settled"), "the probe did not settle");
        probe
    });
    let free = || probe.as_ref().map(|c| c.cuda_memory().expect("cuda memory").expect("CUDA backend").0);
    let (fds, rss, gpu_free) = (worker.fds(), worker.rss_kib(), free());
    let mut child = render(&worker.socket, &input, &output, 1_000_000, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("render");
    worker.wait_log("connected", 3);
    std::thread::sleep(Duration::from_millis(1500)); // frames in flight
    child.kill().expect("kill -9 the client");
    child.wait().expect("reap");
    let log = worker.wait_log("disconnected", 3);
    println!("{log}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while worker.fds() != fds && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(worker.fds(), fds, "the worker's descriptors after the killed client");
    let grown = worker.rss_kib().saturating_sub(rss);
    println!("worker RSS {rss} KiB before, +{grown} KiB after the killed client");
    assert!(grown < 16 * 1024, "the worker's memory grew by {grown} KiB");
    if let (Some(before), Some(after)) = (gpu_free, free()) {
        let lost = before.saturating_sub(after);
        println!("free GPU memory {before} bytes before, {after} after the killed client");
        assert!(lost < 16 << 20, "the GPU lost {lost} bytes to the killed client");
    }
    let out = render(&worker.socket, &input, &output, 3, &[]).output().expect("render");
    assert!(out.status.success(), "served after the kill: {}", super::text(&out));
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// The worker killed with frames in flight: the client's next call fails
/// within a bounded time, and the renderer's device stays usable.
pub fn worker_killed_mid_frame_leaves_the_device_usable(backend: &str) {
    let _serial = serial();
    let mut worker = Worker::start(backend, F32, &[]);
    let r = Renderer::new(true).expect("a renderer");
    let (w, h) = (40, 24);
    let mut client = connect(&r, &worker.socket, w, h, 3, SyncPreference::Auto);
    client.set_frame_timeout(Duration::from_secs(5));
    let mut side = Side::new(&r, client, w, h);
    let rgba = picture(w, h, 4);
    side.frame(&r, &rgba, 1);
    let ids: Vec<_> = (2..=4).map(|n| side.send(&r, &rgba, n)).collect();
    worker.signal(libc::SIGKILL);
    worker.wait(Duration::from_secs(10));
    let start = Instant::now();
    let mut failed = None;
    for id in ids {
        if let Err(e) = side.client.wait_done(id) {
            failed = Some(e);
            break;
        }
    }
    let e = failed.unwrap_or_else(|| side.client.submit(0, 0, 0, 0).map(|_| ()).expect_err("a dead worker"));
    let took = start.elapsed();
    println!("after kill -9 of the worker: `{e}` in {took:?}");
    assert!(matches!(e, neural_frame_client::Error::WorkerGone(_)), "{e}");
    assert!(took < Duration::from_secs(6), "the error took {took:?}");
    assert!(matches!(side.client.submit(0, 0, 5, 0), Err(neural_frame_client::Error::WorkerGone(_))));
    // The device renders on: a copy on the renderer's queue, read back.
    let usage = vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
    let (a, b) =
        (r.buffer(1024, usage, true, false).expect("buffer"), r.buffer(1024, usage, true, false).expect("buffer"));
    let bytes: Vec<u8> = (0..1024u32).map(|i| (i * 7 % 251) as u8).collect();
    r.write(&a, &bytes);
    let cmd = r
        .record(|d, cmd| {
            // SAFETY: recording; both buffers hold 1024 bytes.
            unsafe {
                d.cmd_copy_buffer(
                    cmd,
                    a.buffer,
                    b.buffer,
                    &[vk::BufferCopy { src_offset: 0, dst_offset: 0, size: 1024 }],
                )
            }
        })
        .expect("record");
    r.submit(&[cmd], &[], &[]).expect("the device still takes work");
    r.idle().expect("the device is not lost");
    assert_eq!(r.read(&b, 1024), bytes);
    side.destroy(&r);
    r.destroy_buffer(a);
    r.destroy_buffer(b);
    assert_eq!(r.validation_errors(), 0);
}

/// Two clients at once with different frame sizes, frames interleaved: both correct.
pub fn two_clients_with_different_sizes(backend: &str) {
    let _serial = serial();
    let worker = Worker::start(backend, F32, &[]);
    let r = Renderer::new(true).expect("a renderer");
    let sizes = [(40u32, 24u32), (24, 40)];
    let mut sides: Vec<_> = sizes
        .iter()
        .map(|&(w, h)| Side::new(&r, connect(&r, &worker.socket, w, h, 2, SyncPreference::Auto), w, h))
        .collect();
    for n in 1..=5u64 {
        let pics: Vec<_> = sizes.iter().map(|&(w, h)| picture(w, h, n as u32 * 10 + w)).collect();
        let ids: Vec<_> = sides.iter_mut().zip(&pics).map(|(s, p)| s.send(&r, p, n)).collect();
        for ((s, id), p) in sides.iter_mut().zip(ids).zip(&pics) {
            let got = s.receive(&r, id);
            let (d, ..) = super::pipeline::max_diff(&got, &expected(F32, p, s.w, s.h), 2 * s.w);
            assert!(d <= 1, "{}×{} frame {n}: off by {d}", s.w, s.h);
        }
    }
    for s in sides {
        s.close(&r);
    }
    assert_eq!(r.validation_errors(), 0);
    worker.wait_log("disconnected", 2);
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// 1,000 frames: descriptors and memory flat on both sides.
pub fn a_thousand_frames_stay_flat(backend: &str) {
    let _serial = serial();
    let worker = Worker::start(backend, F32, &[]);
    let r = Renderer::new(false).expect("a renderer");
    let (w, h) = (16, 8);
    let mut side = Side::new(&r, connect(&r, &worker.socket, w, h, 3, SyncPreference::Auto), w, h);
    let pics: Vec<_> = (0..4).map(|i| picture(w, h, i)).collect();
    let wants: Vec<_> = pics.iter().map(|p| expected(F32, p, w, h)).collect();
    let mut marks = Vec::new();
    for n in 1..=1000u64 {
        let i = n as usize % pics.len();
        let got = side.frame(&r, &pics[i], n);
        if n % 97 == 0 {
            assert!(super::pipeline::max_diff(&got, &wants[i], 2 * w).0 <= 1, "frame {n}");
        }
        if n == 100 || n == 1000 {
            marks.push((super::open_fds(), super::rss_kib(), worker.fds(), worker.rss_kib()));
        }
    }
    let (a, b) = (marks[0], marks[1]);
    println!(
        "at frame 100 and 1000: client fds {} → {}, RSS {} → {} KiB; worker fds {} → {}, RSS {} → {} KiB",
        a.0, b.0, a.1, b.1, a.2, b.2, a.3, b.3
    );
    assert_eq!(a.0, b.0, "the client's descriptors");
    assert_eq!(a.2, b.2, "the worker's descriptors");
    assert!(b.1 < a.1 + 8 * 1024, "the client's memory grew");
    assert!(b.3 < a.3 + 8 * 1024, "the worker's memory grew");
    side.close(&r);
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// SIGINT with frames in flight: the worker finishes them (their Done
/// arrives), says Bye, and exits 0.
pub fn sigint_drains_and_tells_the_clients(backend: &str) {
    let _serial = serial();
    let worker = Worker::start(backend, F32, &[]);
    let r = Renderer::new(true).expect("a renderer");
    let (w, h) = (40, 24);
    let mut side = Side::new(&r, connect(&r, &worker.socket, w, h, 3, SyncPreference::Auto), w, h);
    let pics: Vec<_> = (1..=3u64).map(|n| picture(w, h, 20 + n as u32)).collect();
    let ids: Vec<_> = (1..=3u64).zip(&pics).map(|(n, p)| side.send(&r, p, n)).collect();
    worker.signal(libc::SIGINT);
    for (id, p) in ids.into_iter().zip(&pics) {
        let got = side.receive(&r, id);
        assert!(super::pipeline::max_diff(&got, &expected(F32, p, w, h), 2 * w).0 <= 1, "a drained frame");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let e = loop {
        match side.client.poll() {
            Err(e) => break e,
            Ok(_) => {
                assert!(Instant::now() < deadline, "no Bye from the stopping worker");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    assert!(e.to_string().contains("the worker is stopping"), "{e}");
    side.destroy(&r);
    let mut worker = worker;
    let status = worker.wait(Duration::from_secs(30));
    assert!(status.success(), "{}", worker.log());
    assert!(!worker.socket.exists(), "the socket is removed");
}

/// `cargo tree -p neural-frame-client`: ash, libc and what ash needs to load Vulkan; no CUDA, no ONNX Runtime.
pub fn client_crate_dependency_tree() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "-p", "neural-frame-client", "-e", "normal", "--prefix", "none", "--offline"])
        .current_dir(super::root())
        .output()
        .expect("cargo tree runs");
    let tree = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", super::text(&out));
    println!("{tree}");
    let crates: std::collections::BTreeSet<_> =
        tree.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_owned).collect();
    let allowed = ["neural-frame-client", "ash", "libc", "libloading", "cfg-if", "windows-link", "windows-targets"];
    for c in &crates {
        assert!(allowed.contains(&c.as_str()), "the client crate depends on {c}:\n{tree}");
    }
    for banned in ["cudarc", "ort", "neural-frame", "image"] {
        assert!(!crates.contains(banned), "{banned} in the client's tree");
    }
}

/// The pictures through a context in this process, on the same path the worker
/// takes: the renderer's exported buffers imported by fd, a frame at a time.
pub fn in_process(r: &Renderer, backend: Backend, model: &str, pics: &[Vec<u8>], w: u32, h: u32) -> Vec<Vec<u8>> {
    // Without fast start (as the worker below): every frame on the session of the same options,
    // byte for byte.
    let mut ctx = NeuralFrameContext::builder(model)
        .backend(backend)
        .map_cuda_options(|c| c.with_fast_start(false))
        .frame_size(w, h)
        .build()
        .expect("a context");
    let (ow, oh) = ctx.output_size();
    let usage =
        vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
    let format = vk::Format::R8G8B8A8_UNORM;
    let (ib, ob) = (w as u64 * h as u64 * 4, ow as u64 * oh as u64 * 4);
    // Device-local, as the worker's slots are (the same passes run on both sides), filled and
    // read through host-visible staging buffers.
    let (input, output) =
        (r.buffer(ib, usage, false, true).expect("input"), r.buffer(ob, usage, false, true).expect("output"));
    let (put, get) = (
        r.buffer(ib, vk::BufferUsageFlags::TRANSFER_SRC, true, false).expect("staging"),
        r.buffer(ob, vk::BufferUsageFlags::TRANSFER_DST | vk::BufferUsageFlags::TRANSFER_SRC, true, false)
            .expect("readback"),
    );
    let copy = |from: vk::Buffer, to: vk::Buffer, size: u64| {
        let cmd = r
            .record(|d, cmd| {
                // SAFETY: recording; both buffers hold `size` bytes.
                unsafe { d.cmd_copy_buffer(cmd, from, to, &[vk::BufferCopy { src_offset: 0, dst_offset: 0, size }]) }
            })
            .expect("a copy");
        r.submit(&[cmd], &[], &[]).expect("the copy");
        r.idle().expect("the copy done");
    };
    let import = |b: &RBuffer, width, height| neural_frame::BufferImport {
        memory: r.export(&b.alloc).expect("export"),
        size: b.size,
        usage,
        layout: neural_frame::PixelLayout::packed(width, height, format),
    };
    let i = ctx.import_input_buffer(import(&input, w, h)).expect("import the input");
    let o = ctx.import_output_buffer(import(&output, ow, oh)).expect("import the output");
    let outs = pics
        .iter()
        .map(|p| {
            r.write(&put, p);
            copy(put.buffer, input.buffer, ib);
            r.write(&get, &vec![0xa5; ob as usize]);
            copy(get.buffer, output.buffer, ob); // poison
            let neural_frame::Submitted::Frame(t) = ctx.submit(neural_frame::Frame::new(i, o)).expect("submit") else {
                panic!("skipped")
            };
            let stats = ctx.wait(&t).expect("the in-process frame");
            assert_eq!(stats.cuda_passes, backend == Backend::Cuda, "device-local buffers by fd: {stats:?}");
            r.write(&get, &vec![0x5a; ob as usize]);
            copy(output.buffer, get.buffer, ob);
            r.read(&get, ob as usize)
        })
        .collect();
    drop(ctx);
    for b in [input, output, put, get] {
        r.destroy_buffer(b);
    }
    outs
}

/// 300 frames of the bundled ×4 model through the worker, two in flight,
/// each output equal byte for byte to the same frame run in this process with
/// [`NeuralFrameContext::infer`] on the same backend.
pub fn three_hundred_frames_equal_the_in_process_run(backend: Backend, name: &str, expect_mode: SyncMode) {
    three_hundred_frames_equal_the_in_process_run_n(backend, name, expect_mode, 300);
}

/// [`three_hundred_frames_equal_the_in_process_run`] with `frames` frames.
pub fn three_hundred_frames_equal_the_in_process_run_n(
    backend: Backend,
    name: &str,
    expect_mode: SyncMode,
    frames: u64,
) {
    let _serial = serial();
    let model = "models/upscale.onnx";
    let (w, h) = (240, 160);
    // Opaque pictures: the in-process run reads an image (alpha resampled by the sampler) and the
    // worker a buffer (alpha resampled in the shader), which may round alpha 1/255 apart; the
    // colour channels go through the same model either way.
    let pics: Vec<_> = (0..3)
        .map(|i| picture(w, h, 40 + i).chunks(4).flat_map(|p| [p[0], p[1], p[2], 255]).collect::<Vec<u8>>())
        .collect();
    let r = Renderer::new(true).expect("a renderer");
    let wants = in_process(&r, backend, model, &pics, w, h);
    let worker = Worker::start(name, model, &["--fast-start", "false"]);
    let client = connect(&r, &worker.socket, w, h, 3, SyncPreference::Auto);
    assert_eq!(client.sync_mode(), expect_mode);
    let mut side = Side::new(&r, client, w, h);
    let mut pending = std::collections::VecDeque::new();
    let start = Instant::now();
    for n in 1..=frames {
        let k = n as usize % pics.len();
        // A frame's output slot is read before a later frame may write it: one fewer in flight than slots.
        if pending.len() == 2 {
            let (id, k): (FrameId, usize) = pending.pop_front().expect("pending");
            let got = side.receive(&r, id);
            assert!(
                got == wants[k],
                "frame {}: differs from the in-process run: {:?} (x, y, channel); from ONNX Runtime's CPU run: {:?}",
                id.number(),
                super::pipeline::max_diff(&got, &wants[k], 4 * w),
                super::pipeline::max_diff(&got, &expected(model, &pics[k], w, h), 4 * w)
            );
        }
        pending.push_back((side.send(&r, &pics[k], n), k));
    }
    for (id, k) in pending {
        assert!(side.receive(&r, id) == wants[k], "frame {}: differs from the in-process run", id.number());
    }
    println!(
        "{frames} frames of {w}×{h} through the worker ({expect_mode:?} mode) in {:?}, each equal to the in-process run",
        start.elapsed()
    );
    side.close(&r);
    assert_eq!(r.validation_errors(), 0, "the client's validation layer");
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// The six codes every 8-bit channel of [`pixel_values_keep_the_contract`]'s frames takes: both
/// ends, one step in from each, and the two around the middle.
const CODES: [u8; 6] = [0, 1, 127, 128, 254, 255];
/// The values of its half-float frames: below 0, the ends, between, and above 1.
const HALVES: [f32; 6] = [-0.5, 0.0, 0.25, 0.5, 1.0, 1.5];

/// Pixel `i` of the value-contract frames: colour indices into [`CODES`]/[`HALVES`] (216 pixels
/// hold every combination of the six in R, G and B) and an alpha index that varies across rows
/// and columns, so that the resampled alpha mixes neighbours.
fn contract_pixel(i: usize) -> [usize; 4] {
    [i % 6, (i / 6) % 6, (i / 36) % 6, (i * 7 + i / 18) % 6]
}

/// A model's value mapping as docs/protocol.md ("Pixel values") states it, written out here
/// apart from the library: `t = (x − mean[c]) / std[c]` on tensor channel `c`, the colour order.
struct ValueMap {
    flags: &'static [&'static str],
    bgr: bool,
    mean: [f32; 3],
    std: [f32; 3],
}

/// The documented contract, kept by the worker: every input format it takes, through
/// `tiny-x2-f32` with its default mapping ([0, 1], RGB) and with `--color bgr --range -1,1` and
/// `--mean/--std`. Each output is compared with the one the document's formulas give
/// from ONNX Runtime's own CPU run of the model on the tensor those formulas give: 8-bit
/// codes over 255 (sRGB codes as they are), half floats as they are, the output clamped and
/// rounded (floor(0.5 + 255·x)) to 8 bits or written unclamped as half floats, the alpha
/// resampled bilinearly from the input's, the output format the input's (B8G8R8A8_SRGB: RGBA8
/// unorm), BGRA in its byte order. Within one code (8 bits) or one part in 1000 (half floats):
/// the rounding of the two runs' float arithmetic.
pub fn pixel_values_keep_the_contract(backend: &str) {
    let _serial = serial();
    let model = F32;
    let (w, h) = (18u32, 12u32);
    let plane = (w * h) as usize;
    let (ow, oh) = (2 * w, 2 * h);
    let maps = [
        ValueMap { flags: &[], bgr: false, mean: [0.0; 3], std: [1.0; 3] },
        // [−1, 1] is t = 2x − 1: mean 0.5, std 0.5.
        ValueMap { flags: &["--color", "bgr", "--range", "-1,1"], bgr: true, mean: [0.5; 3], std: [0.5; 3] },
        ValueMap {
            flags: &["--mean", "0.485,0.456,0.406", "--std", "0.229,0.224,0.225"],
            bgr: false,
            mean: [0.485, 0.456, 0.406],
            std: [0.229, 0.224, 0.225],
        },
    ];
    // (input format, the output format the worker must choose)
    let formats = [
        (vk::Format::R8G8B8A8_UNORM, vk::Format::R8G8B8A8_UNORM),
        (vk::Format::R8G8B8A8_SRGB, vk::Format::R8G8B8A8_SRGB),
        (vk::Format::B8G8R8A8_UNORM, vk::Format::B8G8R8A8_UNORM),
        (vk::Format::B8G8R8A8_SRGB, vk::Format::R8G8B8A8_UNORM),
        (vk::Format::R16G16B16A16_SFLOAT, vk::Format::R16G16B16A16_SFLOAT),
    ];
    let bgra = |f: vk::Format| matches!(f, vk::Format::B8G8R8A8_UNORM | vk::Format::B8G8R8A8_SRGB);
    let env = neural_frame::ort_environment().expect("ONNX Runtime loads");
    let mut session = ort::session::Session::builder(env)
        .expect("builder")
        .commit_from_file(model)
        .expect("the model loads on the CPU provider");
    let (input_name, output_name) = (session.inputs()[0].name().to_string(), session.outputs()[0].name().to_string());
    let r = Renderer::new(true).expect("a renderer");
    let (mut clamped, mut beyond, mut off_by_one, mut checked) = (0usize, 0usize, 0usize, 0usize);
    // Half floats: their rounding (CPU); a GPU's model, with its own arithmetic (TF32), a little more.
    let half_tolerance = if backend == "cpu" { 1e-3 } else { 4e-3 };
    for map in &maps {
        let worker = Worker::start(backend, model, map.flags);
        for &(format, out_format) in &formats {
            let half = format == vk::Format::R16G16B16A16_SFLOAT;
            // The frame's values x (RGBA) and its bytes in the slot.
            let x: Vec<[f32; 4]> = (0..plane)
                .map(|i| {
                    let k = contract_pixel(i);
                    if half {
                        [HALVES[k[0]], HALVES[k[1]], HALVES[k[2]], [0.0, 0.25, 0.5, 0.75, 1.0, 1.25][k[3]]]
                    } else {
                        k.map(|k| CODES[k] as f32 / 255.0)
                    }
                })
                .collect();
            let bytes: Vec<u8> = (0..plane)
                .flat_map(|i| {
                    let k = contract_pixel(i);
                    if half {
                        x[i].iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect::<Vec<u8>>()
                    } else if bgra(format) {
                        vec![CODES[k[2]], CODES[k[1]], CODES[k[0]], CODES[k[3]]]
                    } else {
                        vec![CODES[k[0]], CODES[k[1]], CODES[k[2]], CODES[k[3]]]
                    }
                })
                .collect();
            // The tensor: NCHW, channel c = R, G, B (BGR: B, G, R), t = (x − mean[c]) / std[c].
            let mut tensor = vec![0f32; 3 * plane];
            for (px, v) in x.iter().enumerate() {
                for c in 0..3 {
                    let k = if map.bgr { 2 - c } else { c };
                    tensor[c * plane + px] = (v[k] - map.mean[c]) / map.std[c];
                }
            }
            let t = ort::value::Tensor::from_array(([1usize, 3, h as usize, w as usize], tensor)).expect("tensor");
            let out = session.run(ort::inputs![input_name.as_str() => t]).expect("the reference run");
            let y: Vec<f32> = out[output_name.as_str()].try_extract_tensor::<f32>().expect("f32").1.to_vec();
            drop(out);
            assert_eq!(y.len(), 3 * (ow * oh) as usize);
            // Back: x = t · std[c] + mean[c] on tensor channel c, into RGB; alpha bilinear from the input's.
            let alpha = |ox: u32, oy: u32| {
                let sx = ((ox as f32 + 0.5) * w as f32 / ow as f32 - 0.5).clamp(0.0, (w - 1) as f32);
                let sy = ((oy as f32 + 0.5) * h as f32 / oh as f32 - 0.5).clamp(0.0, (h - 1) as f32);
                let (x0, y0) = (sx.floor() as u32, sy.floor() as u32);
                let (x1, y1) = ((x0 + 1).min(w - 1), (y0 + 1).min(h - 1));
                let (tx, ty) = (sx - x0 as f32, sy - y0 as f32);
                let a = |px: u32, py: u32| x[(py * w + px) as usize][3];
                let top = a(x0, y0) * (1.0 - tx) + a(x1, y0) * tx;
                let bottom = a(x0, y1) * (1.0 - tx) + a(x1, y1) * tx;
                top * (1.0 - ty) + bottom * ty
            };
            let want: Vec<[f32; 4]> = (0..oh)
                .flat_map(|oy| (0..ow).map(move |ox| (ox, oy)))
                .map(|(ox, oy)| {
                    let mut v = [0f32; 4];
                    for c in 0..3 {
                        let k = if map.bgr { 2 - c } else { c };
                        v[k] = y[c * (ow * oh) as usize + (oy * ow + ox) as usize] * map.std[c] + map.mean[c];
                    }
                    v[3] = alpha(ox, oy);
                    v
                })
                .collect();
            // The worker's answer: its Welcome, then the frame there and back.
            let mut o = Options::new(&worker.socket, w, h, format);
            (o.input_slots, o.output_slots) = (1, 1);
            // SAFETY: the renderer's device has external memory fds, and outlives the client.
            let client =
                unsafe { Client::connect(&client_device(&r), o) }.unwrap_or_else(|e| panic!("connecting: {e}"));
            let out_bpp = if half { 8 } else { 4 };
            let geometry = Geometry {
                width: ow,
                height: oh,
                format: out_format.as_raw() as u32,
                row_pitch: (ow * out_bpp) as u64,
            };
            assert_eq!(client.output_geometry(), geometry, "{format:?} in: the output's geometry");
            // Side's staging holds width × 4 bytes a row: a half-float row is twice that.
            let mut side = Side::new(&r, client, if half { 2 * w } else { w }, h);
            let got = side.frame(&r, &bytes, 1);
            side.close(&r);
            let what = |i: usize, ch: usize| {
                format!(
                    "{:?} with {format:?} → {out_format:?}: output pixel ({}, {}) channel {}",
                    map.flags,
                    i % ow as usize,
                    i / ow as usize,
                    ["R", "G", "B", "A"][ch]
                )
            };
            for (i, v) in want.iter().enumerate() {
                for (ch, &value) in v.iter().enumerate() {
                    checked += 1;
                    if half {
                        let at = 8 * i + 2 * ch;
                        let g = half::f16::from_le_bytes([got[at], got[at + 1]]).to_f32();
                        beyond += usize::from(!(0.0..=1.0).contains(&value));
                        let d = (g - value).abs();
                        assert!(
                            d <= half_tolerance * value.abs().max(1.0),
                            "{}: {g}, the contract gives {}",
                            what(i, ch),
                            value
                        );
                    } else {
                        let scaled = 255.0 * value.clamp(0.0, 1.0);
                        let code = (0.5 + scaled).floor() as i32;
                        // A value within a rounding error of a tie (x.5: the resampled alpha has them) may
                        // go either way; on a GPU the model's own arithmetic differs from ONNX Runtime's
                        // CPU run, by a code at most.
                        let tie = (scaled - scaled.floor() - 0.5).abs() < 1e-3;
                        let slack = i32::from(tie || backend != "cpu");
                        clamped += usize::from(!(0.0..=1.0).contains(&value));
                        let byte = if bgra(out_format) && ch != 3 { 2 - ch } else { ch };
                        let g = got[4 * i + byte] as i32;
                        off_by_one += usize::from(g != code);
                        assert!(
                            (g - code).abs() <= slack,
                            "{}: code {g}, the contract gives {code} ({})",
                            what(i, ch),
                            value
                        );
                    }
                }
            }
        }
        assert_eq!(r.validation_errors(), 0, "the renderer's validation layer");
        let (status, log) = worker.stop();
        assert!(status.success(), "{log}");
    }
    println!(
        "{checked} output channels as the contract gives them: {off_by_one} 8-bit ones one code apart, {clamped} \
         8-bit ones clamped, {beyond} half-float ones outside [0, 1]"
    );
    // The frames reach the clamp, and the half floats' range beyond it.
    assert!(
        clamped > 0 && beyond > 0,
        "the frames do not exercise the clamp ({clamped}) or half floats beyond it ({beyond})"
    );
}

/// The bytes of a hex dump in docs/protocol.md: the fenced block after `title`, its lines
/// `OFFSET: xx xx …`.
fn protocol_doc_hex(doc: &str, title: &str) -> Vec<u8> {
    let at = doc.find(title).unwrap_or_else(|| panic!("docs/protocol.md has no {title}"));
    let block = doc[at..].split("```").nth(1).expect("a fenced hex dump after the title");
    block
        .lines()
        .filter_map(|l| l.split_once(':'))
        .flat_map(|(_, bytes)| bytes.split_whitespace().map(|b| u8::from_str_radix(b, 16).expect("a hex byte")))
        .collect()
}

/// docs/protocol.md's examples (§11) are what the reference encoder writes, and decode back.
pub fn protocol_doc_examples_are_true() {
    let doc = std::fs::read_to_string(super::root().join("docs/protocol.md")).expect("docs/protocol.md");
    let hello = Message::Hello {
        version: 1,
        device_uuid: std::array::from_fn(|i| 0x10 + i as u8),
        driver_uuid: std::array::from_fn(|i| 0x20 + i as u8),
        input: Geometry {
            width: 1920,
            height: 1080,
            format: vk::Format::R8G8B8A8_UNORM.as_raw() as u32,
            row_pitch: 7680,
        },
        input_slots: 2,
        output_slots: 2,
        sync_modes: protocol::SYNC_HOST | protocol::SYNC_GPU,
        model: String::new(),
    };
    let submit = Message::Submit { frame: 7, input_slot: 1, output_slot: 0, rendered: 42, output_free: 40 };
    let bye = Message::Bye { reason: "done".into() };
    let line = doc.split("`Bye(\"done\")` is `").nth(1).and_then(|s| s.split('`').next()).expect("the Bye example");
    let bye_bytes: Vec<u8> = line.split_whitespace().map(|b| u8::from_str_radix(b, 16).expect("hex")).collect();
    for (m, bytes) in
        [(hello, protocol_doc_hex(&doc, "**Hello**")), (submit, protocol_doc_hex(&doc, "**Submit**")), (bye, bye_bytes)]
    {
        assert_eq!(bytes, m.encode(), "docs/protocol.md's example of {m:?}");
        let kind = u16::from_le_bytes([bytes[4], bytes[5]]);
        assert_eq!(Message::decode(kind, &bytes[protocol::HEADER..]).expect("decodes"), m);
    }
    // §4's table of kinds: each row's kind number, name and body size (strings empty, one slot a side).
    let memory = SlotMemory { allocation_size: 1, buffer_size: 1, memory_type_index: 0, usage: 0x20, dedicated: true };
    let geometry = Geometry { width: 1, height: 1, format: 37, row_pitch: 4 };
    let samples = [
        hello_sample(geometry),
        Message::Welcome {
            version: 1,
            sync_mode: protocol::SyncMode::Host,
            output: geometry,
            max_in_flight: 1,
            model: String::new(),
        },
        Message::Slots { inputs: vec![memory], outputs: vec![memory], timeline: false },
        Message::Ready { timelines: 0 },
        Message::Submit { frame: 1, input_slot: 0, output_slot: 0, rendered: 0, output_free: 0 },
        Message::Enqueued { frame: 1, input_consumed: 1, output_ready: 1 },
        Message::Consumed { frame: 1 },
        Message::Done { frame: 1, infer_ms: 1.0 },
        Message::Bye { reason: String::new() },
        Message::Error { code: ErrorCode::State, message: String::new() },
    ];
    for m in samples {
        let name = protocol::kind_name(m.kind());
        let row = doc
            .lines()
            .find(|l| l.split('|').nth(2).is_some_and(|c| c.trim() == name))
            .unwrap_or_else(|| panic!("§4's table has no row for {name}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[1], m.kind().to_string(), "{row}");
        let size = cells[5];
        let base: usize = size.split_whitespace().next().and_then(|n| n.parse().ok()).expect("a body size");
        let want = if size.contains("28 × slots") { base + 28 * 2 } else { base };
        assert_eq!(m.encode().len() - protocol::HEADER, want, "{row}");
    }
}

/// A Hello of one slot a side and an empty model name.
fn hello_sample(input: Geometry) -> Message {
    Message::Hello {
        version: 1,
        device_uuid: [0; 16],
        driver_uuid: [0; 16],
        input,
        input_slots: 1,
        output_slots: 1,
        sync_modes: protocol::SYNC_HOST,
        model: String::new(),
    }
}

/// A memfd of `len` bytes that starts with the first bytes of `like` (a driver's
/// header, where lavapipe keeps one), as a client that cut its memory short sends.
pub fn truncated_memfd(like: &OwnedFd, len: u64) -> OwnedFd {
    use std::os::fd::FromRawFd as _;
    use std::os::unix::fs::FileExt as _;
    // SAFETY: memfd_create with a NUL-terminated name; the descriptor is ours.
    let fd = unsafe { libc::memfd_create(c"nf-truncated".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh descriptor that nothing else owns.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut head = [0u8; 256];
    let n = std::fs::File::from(like.try_clone().expect("dup")).read_at(&mut head, 0).unwrap_or(0);
    file.write_all_at(&head[..n], 0).expect("the header");
    file.set_len(len).expect("ftruncate");
    file.into()
}

/// Slot descriptors that are not memory: eventfds from four clients at once
/// (lavapipe's import blocked reading them, each holding a client place), then
/// a memfd cut below its described allocation (lavapipe's import mapped past its
/// end: SIGBUS, the worker gone). Each is answered (BadHandle, TooSmall), a
/// client is served before, during and after, places are freed, and the
/// worker's descriptors return to where they were.
pub fn bad_descriptors_get_an_error_and_the_worker_keeps_serving(backend: &str) {
    let _serial = serial();
    // The good client and the four faulty ones fill the places; a new client after needs theirs freed.
    let worker = Worker::start(backend, F32, &["--max-clients", "5"]);
    let r = Renderer::new(true).expect("a renderer");
    let (w, h) = (16, 8);
    let mut good = Side::new(&r, connect(&r, &worker.socket, w, h, 2, SyncPreference::Auto), w, h);
    let rgba = picture(w, h, 5);
    let want = expected(F32, &rgba, w, h);
    assert!(super::pipeline::max_diff(&good.frame(&r, &rgba, 1), &want, 2 * w).0 <= 1, "before");
    let baseline = worker.fds();
    let in_bytes = (w * h * 4) as u64;
    let (b_in, m_in, fd_in) = slot(&r, in_bytes);
    let (b_out, m_out, fd_out) = slot(&r, in_bytes * 4);
    let welcomed = || {
        let raw = Raw::new(&worker.socket);
        raw.s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        raw.send(&hello(&r, w, h, 1), &[]);
        match raw.recv() {
            Message::Welcome { .. } => raw,
            other => panic!("{other:?} where a Welcome was expected"),
        }
    };
    let eventfd = || {
        use std::os::fd::FromRawFd as _;
        // SAFETY: eventfd returns a fresh descriptor that becomes ours.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor that nothing else owns.
        unsafe { OwnedFd::from_raw_fd(fd) }
    };

    // Four clients at once hand over eventfds as their slots' memory.
    let raws: Vec<_> = (0..4).map(|_| welcomed()).collect();
    for raw in &raws {
        let (e1, e2) = (eventfd(), eventfd());
        raw.send(
            &Message::Slots { inputs: vec![m_in], outputs: vec![m_out], timeline: false },
            &[e1.as_raw_fd(), e2.as_raw_fd()],
        );
    }
    assert!(super::pipeline::max_diff(&good.frame(&r, &rgba, 2), &want, 2 * w).0 <= 1, "during");
    // Each read is bounded (10 s): a worker whose import blocks fails the test rather than hanging it.
    let answers: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = raws.iter().map(|raw| s.spawn(|| raw.expect_error(ErrorCode::BadHandle, "eventfd"))).collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    assert!(answers.iter().all(|a| a.contains("input slot 0")), "{answers:?}");
    drop(raws);

    // A memfd with the driver's header, cut below the allocation the client describes.
    let raw = welcomed();
    let short = truncated_memfd(&fd_in, m_in.allocation_size / 2);
    raw.send(
        &Message::Slots { inputs: vec![m_in], outputs: vec![m_out], timeline: false },
        &[short.as_raw_fd(), fd_out.as_raw_fd()],
    );
    let answer = raw.expect_error(ErrorCode::TooSmall, "allocation");
    assert!(answer.contains("input slot 0"), "{answer}");
    drop(raw);

    // After: the first client, and a new one in a freed place.
    assert!(super::pipeline::max_diff(&good.frame(&r, &rgba, 3), &want, 2 * w).0 <= 1, "after");
    let mut side = Side::new(&r, connect(&r, &worker.socket, w, h, 2, SyncPreference::Auto), w, h);
    assert!(super::pipeline::max_diff(&side.frame(&r, &rgba, 1), &want, 2 * w).0 <= 1, "a new client");
    side.destroy(&r);
    let deadline = Instant::now() + Duration::from_secs(10);
    while worker.fds() != baseline && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(worker.fds(), baseline, "the worker's descriptors:\n{}", worker.log());
    good.close(&r);
    r.destroy_buffer(b_in);
    r.destroy_buffer(b_out);
    assert_eq!(r.validation_errors(), 0);
    let (status, log) = worker.stop();
    println!("the worker's log:\n{log}");
    assert!(status.success(), "{log}");
}
