//! `neural-frame tune` on the CPU backend, and the tune cache through the library's API.
//!
//! On the CPU backend the CUDA options are not in effect: tune measures spin
//! waits off and on, chooses one, and writes an entry keyed by the backend
//! `cpu`, the device, its driver, ONNX Runtime, the model's SHA-256 and the size.

use std::path::{Path, PathBuf};

use common::{json, neural_frame, text};

const MODEL: &str = "models/test/tiny-x2-f32.onnx";

/// A directory under the system's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("neural-frame-tune-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }
    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn utf8(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// The cache file as JSON.
fn cache_json(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// `tune` on the CPU backend with few frames, and more arguments after.
fn tune(cache: &Path, size: &str, more: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut args = vec!["tune", "--backend", "cpu", "--model", MODEL, "--size", size, "--frames", "6", "--warmup", "1"];
    if !cache.as_os_str().is_empty() {
        args.extend(["--cache", utf8(cache)]);
    }
    args.extend(more);
    neural_frame(&args, env)
}

#[test]
fn tune_on_the_cpu_backend_measures_spin_waits_and_writes_an_entry_for_the_cpu_backend() {
    let dir = TempDir::new("cpu");
    // A directory that does not exist yet: tune creates it.
    let cache = dir.file("cache/tune.json");
    let o = tune(&cache, "32x24", &["--json"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = json(&o);
    let argv: Vec<&str> = r["argv"].as_array().expect("argv").iter().filter_map(|a| a.as_str()).collect();
    assert_eq!(argv[1..4], ["tune", "--backend", "cpu"], "{argv:?}");
    assert_eq!(r["backend"]["backend"], "cpu");
    assert_eq!(r["input_size"], serde_json::json!([32, 24]));
    assert_eq!(r["output_size"], serde_json::json!([64, 48]));
    assert!(r["note"].as_str().is_some_and(|n| n.contains("not in effect")), "{r}");

    // Two candidates: spin waits off and on, every CUDA option off; both ran.
    let candidates = r["candidates"].as_array().expect("candidates");
    assert_eq!(candidates.len(), 2, "{r}");
    for (c, spin) in candidates.iter().zip([false, true]) {
        assert_eq!(c["ok"], true, "{c}");
        assert!(c["error"].is_null(), "{c}");
        assert_eq!(c["options"]["spin_wait"], spin, "{c}");
        for option in ["prefer_nhwc", "fuse_conv_bias", "cuda_graph", "cuda_passes"] {
            assert_eq!(c["options"][option], false, "{option}: {c}");
            assert_eq!(c["in_effect"][option], false, "{option}: {c}");
        }
        assert_eq!(c["options"]["post_wait"], "gpu", "{c}");
        assert!(c["sync_median_ms"].as_f64().is_some_and(|v| v > 0.0), "{c}");
        assert!(c["pipelined_fps"].as_f64().is_some_and(|v| v > 0.0), "{c}");
    }
    let chosen = r["chosen"].as_u64().expect("a winner") as usize;
    assert!(chosen < 2);
    assert_eq!((r["written"].as_bool(), r["replaced"].as_bool()), (Some(true), Some(false)), "{r}");
    assert_eq!(r["cache"], utf8(&cache));

    // The key: the model by content, the CPU backend, the device, its driver, ONNX Runtime, the size.
    let key = &r["key"];
    let sha = neural_frame::tune::model_sha256(Path::new(MODEL)).expect("hashed");
    assert_eq!(key["model_sha256"], sha.as_str());
    assert_eq!(key["backend"], "cpu");
    assert_eq!(key["gpu_uuid"], r["backend"]["vulkan_device"]["uuid"]);
    assert_eq!(key["gpu_name"], r["backend"]["vulkan_device"]["name"]);
    assert_eq!(key["runtime_version"], r["backend"]["runtime"]["version"]);
    let driver = key["driver"].as_str().expect("driver");
    let info = r["backend"]["vulkan_device"]["driver_info"].as_str().expect("driver_info");
    assert!(driver.ends_with(info.trim()), "{driver} / {info}");
    assert_eq!((key["width"].as_u64(), key["height"].as_u64()), (Some(32), Some(24)));

    // The file holds one entry: that key, the winner's options, every candidate.
    let file = cache_json(&cache);
    assert_eq!(file["version"], 1);
    let entries = file["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 1, "{file}");
    assert_eq!(entries[0]["key"], *key);
    assert_eq!(entries[0]["chosen"], candidates[chosen]["options"]);
    assert_eq!(entries[0]["candidates"], r["candidates"]);
    assert_eq!(entries[0]["frames"], 6);
    assert!(entries[0]["tuned_at_unix_s"].as_u64().is_some_and(|t| t > 1_700_000_000), "{file}");

    // The library reads it back: what a context builder asks.
    #[cfg(feature = "tune")]
    {
        use neural_frame::tune::{TuneCache, TuneKey};
        let key: TuneKey = serde_json::from_value(key.clone()).expect("a key");
        let read = TuneCache::load(&cache).expect("the cache reads");
        let entry = read.lookup(&key).expect("the entry tune wrote");
        assert_eq!(serde_json::to_value(entry.chosen).expect("options"), candidates[chosen]["options"]);
        assert!(read.lookup(&TuneKey { width: 33, ..key.clone() }).is_none(), "another size misses");
        assert!(read.lookup(&TuneKey { backend: "cuda".into(), ..key }).is_none(), "the CUDA backend misses");
    }

    // Again at the same size: the entry is replaced; the table says so.
    let again = tune(&cache, "32x24", &[], &[]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    let table = String::from_utf8_lossy(&again.stdout);
    for part in ["sync median ms", "pipelined frames/s", "← chosen", "replaced the entry in", "CPU backend"] {
        assert!(table.contains(part), "{part}: {}", text(&again));
    }
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("neural-frame tune: [2/2]"), "progress on stderr: {}", text(&again));
    assert_eq!(cache_json(&cache)["entries"].as_array().map(Vec::len), Some(1));

    // Another size, through NEURAL_FRAME_TUNE_CACHE: a second entry beside the first.
    let other = tune(Path::new(""), "40x24", &["--json"], &[("NEURAL_FRAME_TUNE_CACHE", utf8(&cache))]);
    assert_eq!(other.status.code(), Some(0), "{}", text(&other));
    assert_eq!(json(&other)["cache"], utf8(&cache));
    let entries = cache_json(&cache)["entries"].as_array().cloned().expect("entries");
    let sizes: Vec<_> = entries.iter().map(|e| (e["key"]["width"].clone(), e["key"]["height"].clone())).collect();
    assert_eq!(sizes, [(32.into(), 24.into()), (40.into(), 24.into())]);
}

#[test]
fn tune_replaces_a_corrupt_cache_and_says_so() {
    let dir = TempDir::new("corrupt");
    std::fs::create_dir_all(&dir.0).expect("made");
    let cache = dir.file("tune.json");
    std::fs::write(&cache, "{\"version\": 1, \"entries\": [").expect("written");
    let o = tune(&cache, "32x24", &["--json"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains(utf8(&cache)) && stderr.contains("tune replaces it"), "{}", text(&o));
    assert_eq!(cache_json(&cache)["entries"].as_array().map(Vec::len), Some(1));
    // No temporary file is left beside it: the cache and its lock file only.
    let mut names: Vec<_> =
        std::fs::read_dir(&dir.0).expect("listed").filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    names.sort();
    assert_eq!(names, [".tune.json.lock", "tune.json"]);
}

#[test]
fn tune_refuses_the_options_it_chooses_and_tiles() {
    let dir = TempDir::new("refused");
    let cache = dir.file("tune.json");
    for (extra, named) in [
        (&["--cuda-graph", "false"][..], "--cuda-graph"),
        (&["--prefer-nhwc"][..], "--prefer-nhwc"),
        (&["--spin-wait"][..], "--spin-wait"),
        (&["--post-wait", "host"][..], "--post-wait"),
        (&["--passes", "vulkan"][..], "--passes"),
        (&["--tile", "16x16", "--tile-overlap", "2"][..], "--tile"),
    ] {
        let o = tune(&cache, "32x24", extra, &[]);
        assert_eq!(o.status.code(), Some(2), "{named}: {}", text(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(&format!("leave out {named}")), "{named}: {}", text(&o));
        assert!(!cache.exists(), "{named}: nothing written");
    }
    // The size is required: an entry holds for one size.
    let o = neural_frame(&["tune", "--backend", "cpu", "--model", MODEL, "--cache", utf8(&cache)], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--size"), "{}", text(&o));
}

/// The cache through the library's public API: an entry written is found by its
/// key after a save and a load, and a key that differs in the size is not.
#[cfg(feature = "tune")]
#[test]
fn the_cache_finds_an_entry_by_its_key_only() {
    use neural_frame::tune::{Candidate, TuneCache, TuneEntry, TuneKey, TunedOptions};
    use neural_frame::{PostWait, Tuning};

    let dir = TempDir::new("api");
    let path = dir.file("nested/tune.json");
    let key = TuneKey::from_values(
        neural_frame::tune::model_sha256(Path::new(MODEL)).expect("hashed"),
        "cuda",
        "73ca0102-0304-0506-0708-090a0b0c0d77",
        "NVIDIA H200",
        "NVIDIA 580.95.05",
        "1.31.1",
        (960, 540),
    );
    let defaults = TunedOptions::from_tuning(&Tuning::default());
    let host = TunedOptions { cuda: defaults.cuda.with_post_wait(PostWait::Host), spin_wait: true };
    let candidates = vec![
        Candidate::measured(defaults, defaults, 3.40, 297.0),
        Candidate::measured(host, host, 3.10, 298.0),
        Candidate::failed(TunedOptions { cuda: defaults.cuda.with_cuda_graph(false), ..defaults }, None, "refused"),
    ];
    let entry = TuneEntry::from_candidates(key.clone(), candidates, 100, 10).expect("a candidate ran");
    assert_eq!(entry.chosen, host, "tied on throughput: the lower latency");

    let mut cache = TuneCache::load(&path).expect("a missing file is an empty cache");
    assert!(cache.lookup(&key).is_none());
    assert!(cache.insert(entry.clone()).is_none());
    cache.save(&path).expect("saved");

    let read = TuneCache::load(&path).expect("read back");
    assert_eq!(read.lookup(&key), Some(&entry));
    assert_eq!(
        read.lookup(&key).map(|e| neural_frame::tune::apply(Tuning::default(), &e.chosen).cuda.handover.post_wait),
        Some(PostWait::Host)
    );
    assert!(read.lookup(&TuneKey { width: 1920, height: 1080, ..key.clone() }).is_none(), "another size misses");
    assert!(read.lookup(&TuneKey { height: 541, ..key.clone() }).is_none(), "another height misses");
    assert!(read.lookup(&TuneKey { driver: "NVIDIA 580.95.06".into(), ..key }).is_none(), "another driver misses");
}

#[test]
fn contexts_take_the_options_tune_chose_unless_the_caller_chose_some() {
    let dir = TempDir::new("contexts");
    let cache = dir.file("tune.json");
    let o = tune(&cache, "32x24", &[], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let output = dir.file("out.png");
    let env = [("NEURAL_FRAME_TUNE_CACHE", utf8(&cache))];
    let run = |size: &str, more: &[&str]| {
        let mut args = vec!["run", "-v", "--backend", "cpu", "--model", MODEL, "--size", size];
        args.extend(["--output", utf8(&output)]);
        args.extend(more);
        neural_frame(&args, &env)
    };
    // Nothing chosen on the command line: the context reads the entry tune wrote, and says so.
    let o = run("32x24", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("options from the tune cache"), "{}", text(&o));
    // An option named on the command line is the caller's choice: the cache is not read.
    let o = run("32x24", &["--spin-wait"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("options from the tune cache"), "{}", text(&o));
    // Another size has no entry.
    let o = run("16x12", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("options from the tune cache"), "{}", text(&o));
}

/// Four `tune`s of four sizes into one cache at once, for 20 rounds: every round's cache holds
/// all four entries (the cache is read, changed and written under a lock).
#[test]
fn concurrent_tunes_into_one_cache_lose_no_entry() {
    let dir = TempDir::new("concurrent");
    let sizes = ["16x16", "24x16", "32x16", "40x16"];
    for round in 0..20 {
        let cache = dir.file(&format!("round{round}/tune.json"));
        std::thread::scope(|s| {
            let runs: Vec<_> = sizes.iter().map(|size| s.spawn(|| tune(&cache, size, &["--quiet"], &[]))).collect();
            for run in runs {
                let o = run.join().expect("a tune thread");
                assert_eq!(o.status.code(), Some(0), "round {round}: {}", text(&o));
            }
        });
        let entries = cache_json(&cache)["entries"].as_array().map_or(0, Vec::len);
        assert_eq!(entries, sizes.len(), "round {round}: {} entries of {}", entries, sizes.len());
    }
}

/// A tune cache that is a FIFO, a directory, /dev/zero or a 10 GB sparse file: `run` does not
/// block or read it, warns with its path and what to do, and runs with the defaults; `tune`
/// refuses it before measuring.
#[test]
fn a_cache_that_is_not_a_regular_file_is_refused_with_its_path() {
    let dir = TempDir::new("not-regular");
    std::fs::create_dir_all(&dir.0).expect("made");
    let fifo = dir.file("fifo.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo");
    let sparse = dir.file("sparse.json");
    std::fs::File::create(&sparse).and_then(|f| f.set_len(10 << 30)).expect("a 10 GB sparse file");
    let out = dir.file("out.png");
    for cache in [fifo, dir.0.clone(), PathBuf::from("/dev/zero"), sparse] {
        let start = std::time::Instant::now();
        let args =
            ["run", "--backend", "cpu", "--model", MODEL, "--input", "models/coffee.png", "--output", utf8(&out)];
        let o = neural_frame(&args, &[("NEURAL_FRAME_TUNE_CACHE", utf8(&cache))]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(0), "{cache:?}: {t}");
        assert!(t.contains(utf8(&cache)) && t.contains("NEURAL_FRAME_TUNE_CACHE"), "{cache:?}: {t}");
        let o = tune(&cache, "16x16", &[], &[]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{cache:?}: {t}");
        assert!(t.contains(utf8(&cache)) && !t.contains("pipelined"), "refused before measuring: {t}");
        assert!(start.elapsed() < std::time::Duration::from_secs(30), "{cache:?} took {:?}", start.elapsed());
    }
}

/// A cache whose directory cannot be made is refused before measuring, naming it, with the
/// OS's reason said once.
#[test]
fn an_unwritable_cache_is_refused_before_measuring() {
    let cache = Path::new("/proc/neural-frame-nonexistent/tune.json");
    let o = tune(cache, "16x16", &[], &[]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(e.contains(utf8(cache)) && !text(&o).contains("pipelined"), "{}", text(&o));
    assert_eq!(e.matches("(os error").count(), 1, "the OS error once: {e}");
}
