//! `neural-frame stream` under a slow consumer: the reader is held back by the bounded
//! queues, so the process's memory stays flat instead of growing with the frames the
//! consumer has not read yet.

use std::io::{Read as _, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::bin;
use common::stream::{Clip, Conv};

/// VmRSS of process `pid`, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    line.trim().strip_suffix("kB")?.trim().parse().ok()
}

#[test]
fn a_slow_consumer_holds_the_reader_back() {
    // 40 frames of 480×272 (4:2:0, 196 KB) → 960×544 (783 KB a frame out, 31 MB in all).
    let (w, h, n) = (480u32, 272u32, 40usize);
    let clip = Clip::generate("420jpeg", w, h, 8, Conv::new("bt709", false), 5);
    let pieces = clip.y4m_pieces("F25:1 Ip A1:1 C420jpeg");
    let mut input = pieces[0].clone();
    for i in 0..n {
        input.extend_from_slice(&pieces[1 + i % 8]);
    }
    let mut child = Command::new(bin())
        .args(["stream", "--model", "models/test/tiny-x2-f32.onnx", "--backend", "cpu", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("neural-frame runs");
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stdout = child.stdout.take().expect("stdout");
    let frame_out = (2 * w * 2 * h * 3 / 2) as usize + 6;
    let mut buf = vec![0u8; 64 * 1024];
    let (mut read, mut samples) = (0usize, Vec::new());
    let start = Instant::now();
    loop {
        let k = stdout.read(&mut buf).expect("read the output");
        if k == 0 {
            break;
        }
        read += k;
        if let Some(r) = rss_kib(pid) {
            samples.push((read / frame_out, r));
        }
        // After 10 frames the consumer stops reading for 4 s, long enough for the stream to
        // run every other frame (about 8 frames a second here): with unbounded queues their
        // results (23 MB) would wait in memory.
        if read / frame_out == 10 && read < 10 * frame_out + k {
            for _ in 0..40 {
                std::thread::sleep(Duration::from_millis(100));
                samples.extend(rss_kib(pid).map(|r| (10, r)));
            }
        }
        assert!(start.elapsed() < Duration::from_secs(240), "the stream did not end");
    }
    feeder.join().expect("feeder");
    let out = child.wait_with_output().expect("ends");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(read > n * (frame_out - 6), "all frames came: {read} bytes");
    // Memory once the pipeline is full (after 10 frames were read) against the most it reached.
    let settled = samples.iter().find(|(f, _)| *f >= 10).map(|s| s.1).expect("samples after 10 frames");
    let peak = samples.iter().filter(|(f, _)| *f >= 10).map(|s| s.1).max().expect("a peak");
    println!(
        "RSS after 10 frames {settled} KiB, peak {peak} KiB over {} samples; {:.1} s",
        samples.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(peak < settled + 8 * 1024, "memory grew by {} KiB under a slow consumer", peak - settled);
}
