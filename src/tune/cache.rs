//! The tune cache's file: entries keyed by [`TuneKey`], read by contexts and
//! written by `neural-frame tune`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{CACHE_VERSION, TuneEntry, TuneKey};
use crate::error::{Error, Result};

/// The tune cache: entries keyed by [`TuneKey`], one per key, in a JSON file.
///
/// ```
/// use neural_frame::Tuning;
/// use neural_frame::tune::{Candidate, TuneCache, TuneEntry, TuneKey, TunedOptions};
/// # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-tune-cache", std::process::id()));
///
/// let path = dir.join("tune.json");
/// let mut cache = TuneCache::load(&path)?; // no file yet: an empty cache
/// assert!(cache.entries().is_empty());
/// let key = TuneKey::from_values("ab12", "cuda", "uuid", "NVIDIA H200", "NVIDIA 580.95.05", "1.31.1", (960, 540));
/// let o = TunedOptions::from_tuning(&Tuning::default());
/// cache.insert(TuneEntry::from_candidates(key.clone(), vec![Candidate::measured(o, o, 3.3, 298.0)], 100, 10).expect("ran"));
/// cache.save(&path)?;
/// assert_eq!(TuneCache::load(&path)?.lookup(&key).map(|e| e.chosen), Some(o));
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneCache {
    version: u32,
    entries: Vec<TuneEntry>,
}

impl Default for TuneCache {
    fn default() -> Self {
        Self { version: CACHE_VERSION, entries: Vec::new() }
    }
}

impl TuneCache {
    /// Where the cache lives: `$NEURAL_FRAME_TUNE_CACHE` ([`CACHE_ENV`](super::CACHE_ENV)) if set,
    /// else `$XDG_CACHE_HOME/neural-frame/tune.json` (an absolute
    /// `XDG_CACHE_HOME`), else `$HOME/.cache/neural-frame/tune.json`; `None`
    /// where none of them is set. Empty values count as unset.
    ///
    /// ```no_run
    /// use neural_frame::tune::TuneCache;
    ///
    /// match TuneCache::default_path() {
    ///     Some(path) => println!("tune cache: {}", path.display()),
    ///     None => println!("no HOME, XDG_CACHE_HOME or NEURAL_FRAME_TUNE_CACHE: no tune cache"),
    /// }
    /// ```
    pub fn default_path() -> Option<PathBuf> {
        crate::files::tune_cache_path()
    }

    /// Reads the cache at `path`. A missing file is an empty cache; a file that
    /// is not a cache of this format is an [`ErrorKind::Io`](crate::ErrorKind::Io)
    /// error that names it and says to delete it or run `neural-frame tune` again
    /// (its source an [`std::io::ErrorKind::InvalidData`]).
    ///
    /// ```
    /// use neural_frame::ErrorKind;
    /// use neural_frame::tune::TuneCache;
    /// # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-tune-load", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    ///
    /// assert!(TuneCache::load(&dir.join("none.json"))?.entries().is_empty());
    /// std::fs::write(dir.join("broken.json"), "{\"version\": 1, \"entr")?;
    /// let e = TuneCache::load(&dir.join("broken.json")).expect_err("corrupt");
    /// assert_eq!(e.kind(), ErrorKind::Io);
    /// assert!(e.to_string().contains("broken.json"), "{e}");
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load(path: &Path) -> Result<Self> {
        let text = match crate::files::read_cache_file(path, crate::files::CACHE_LIMIT) {
            Ok(Some(text)) => text,
            Ok(None) => return Ok(Self::default()),
            Err(source) if source.kind() == std::io::ErrorKind::InvalidInput => {
                let what = format!(
                    "the tune cache {} is not read (name a regular file with NEURAL_FRAME_TUNE_CACHE, or remove \
                     what is there)",
                    path.display()
                );
                return Err(Error::Io { what, source });
            }
            Err(source) => {
                return Err(Error::Io { what: format!("reading the tune cache {}", path.display()), source });
            }
        };
        let corrupt = |why: String| Error::Io {
            what: format!(
                "the tune cache {} cannot be read (delete it, or run `neural-frame tune` again to replace it)",
                path.display()
            ),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
        };
        /// The version alone, read first: a newer format is refused as such.
        #[derive(Deserialize)]
        struct Version {
            version: u32,
        }
        let version = serde_json::from_slice::<Version>(&text).map_err(|e| corrupt(e.to_string()))?.version;
        if version != CACHE_VERSION {
            return Err(corrupt(format!(
                "it is of format version {version}; this neural-frame ({}) reads version {CACHE_VERSION}",
                env!("CARGO_PKG_VERSION")
            )));
        }
        serde_json::from_slice(&text).map_err(|e| corrupt(e.to_string()))
    }

    /// The entry for `key`, if one was tuned: every field of the key must be equal.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    /// use neural_frame::tune::{TuneCache, TuneKey};
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let key = TuneKey::for_context(&ctx, "models/upscale.onnx".as_ref())?;
    /// let cache = TuneCache::load(&TuneCache::default_path().expect("HOME is set"))?;
    /// match cache.lookup(&key) {
    ///     Some(entry) => println!("tuned: {}", entry.chosen),
    ///     None => println!("not tuned: `neural-frame tune --model models/upscale.onnx --size 960x540`"),
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn lookup(&self, key: &TuneKey) -> Option<&TuneEntry> {
        self.entries.iter().find(|e| e.key == *key)
    }

    /// Adds `entry`, replacing (and returning) the one with the same key.
    pub fn insert(&mut self, entry: TuneEntry) -> Option<TuneEntry> {
        match self.entries.iter_mut().find(|e| e.key == entry.key) {
            Some(old) => Some(std::mem::replace(old, entry)),
            None => {
                self.entries.push(entry);
                None
            }
        }
    }

    /// Every entry, in the order added.
    pub fn entries(&self) -> &[TuneEntry] {
        &self.entries
    }

    /// Reads the cache at `path`, changes it with `change` and writes it back, all under a
    /// lock that other `update`s of the same file wait for (a process that waits says so in the
    /// log): concurrent `neural-frame tune`s into one cache lose no entry. A corrupt cache is
    /// replaced (with a warning in the log); a path that is not a regular file is an error.
    /// `change`'s result is returned.
    ///
    /// ```
    /// use neural_frame::tune::TuneCache;
    /// # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-tune-update", std::process::id()));
    /// let path = dir.join("tune.json");
    /// let had = TuneCache::update(&path, |cache| cache.entries().len())?;
    /// assert_eq!(had, 0);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn update<T>(path: &Path, change: impl FnOnce(&mut TuneCache) -> T) -> Result<T> {
        crate::files::with_cache_lock(path, || {
            let mut cache = match Self::load(path) {
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::InvalidData => {
                    log::warn!(
                        "the tune cache {} cannot be read ({source}): tune replaces it with a new cache",
                        path.display()
                    );
                    Self::default()
                }
                loaded => loaded?,
            };
            let out = change(&mut cache);
            cache.save(path)?;
            Ok(out)
        })
    }

    /// Writes the cache to `path`: to a temporary file `.NAME.PID.tmp` in the same
    /// directory (created if missing), flushed to disk, then renamed over `path`,
    /// so a reader sees the old cache or the new one, never half of one.
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |what: String| move |source| Error::Io { what, source };
        let name = path
            .file_name()
            .ok_or_else(|| Error::InvalidArgument(format!("the tune cache {} names no file", path.display())))?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io(format!("creating the tune cache's directory {}", dir.display())))?;
        let text =
            serde_json::to_vec_pretty(self).map_err(|e| Error::internal(format!("the tune cache as JSON: {e}")))?;
        let tmp = dir.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
        let written = (|| {
            use std::io::Write;
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(&text)?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if let Err(source) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::Io { what: format!("writing the tune cache {}", path.display()), source });
        }
        Ok(())
    }
}

/// The entry for `key` in the cache at [`TuneCache::default_path`]: `None` when
/// there is no such path, no file, or no entry for the key. What a context
/// builder asks before it builds with the caller's options unset.
///
/// ```no_run
/// use neural_frame::NeuralFrameContext;
/// use neural_frame::tune::{self, TuneKey};
///
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// if let Some(entry) = tune::cached(&TuneKey::for_context(&ctx, "models/upscale.onnx".as_ref())?)? {
///     println!("`neural-frame tune` chose {} on {}", entry.chosen, entry.tuned_at_utc());
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
pub fn cached(key: &TuneKey) -> Result<Option<TuneEntry>> {
    let Some(path) = TuneCache::default_path() else {
        return Ok(None);
    };
    Ok(TuneCache::load(&path)?.lookup(key).cloned())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{entry, key};
    use super::*;

    /// A directory of this test's own, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("neural-frame-tune-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            Self(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Four writers updating one cache at once, 20 times each (threads: the file lock excludes
    /// every open of the lock file, in this process as in others) lose no entry.
    #[test]
    fn concurrent_updates_lose_no_entry() {
        let dir = TempDir::new("concurrent");
        let path = dir.0.join("tune.json");
        std::thread::scope(|s| {
            for writer in 0..4u32 {
                let path = &path;
                s.spawn(move || {
                    for round in 0..20u32 {
                        let k = TuneKey { width: 1000 + writer, height: 1000 + round, ..key() };
                        TuneCache::update(path, |cache| cache.insert(entry(k, false))).expect("updated");
                    }
                });
            }
        });
        let cache = TuneCache::load(&path).expect("read back");
        assert_eq!(cache.entries().len(), 80, "entries were lost");
    }

    /// A cache path that is not a regular file, or is far too large, is refused at once with
    /// the path and what it is: never opened and read (a FIFO would block, /dev/zero never end).
    #[test]
    fn a_cache_that_is_not_a_regular_file_is_refused_at_once() {
        let dir = TempDir::new("not-regular");
        std::fs::create_dir_all(&dir.0).expect("made");
        let fifo = dir.0.join("fifo.json");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("a C path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let sparse = dir.0.join("sparse.json");
        std::fs::File::create(&sparse).and_then(|f| f.set_len(10 << 30)).expect("a 10 GB sparse file");
        let cases = [
            (fifo.clone(), "a FIFO"),
            (dir.0.clone(), "a directory"),
            (PathBuf::from("/dev/zero"), "a character device"),
            (sparse, "more than a cache's"),
        ];
        for (path, says) in cases {
            let start = std::time::Instant::now();
            let e = TuneCache::load(&path).expect_err("refused");
            let text = format!("{e}: {}", std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_default());
            assert!(start.elapsed() < std::time::Duration::from_secs(1), "{path:?} took {:?}", start.elapsed());
            assert!(text.contains(&path.display().to_string()) && text.contains(says), "{path:?}: {text}");
            assert!(text.contains("NEURAL_FRAME_TUNE_CACHE"), "says what to do: {text}");
            // And an update refuses it too, without replacing it.
            assert!(TuneCache::update(&path, |_| ()).is_err(), "{path:?} updated");
        }
        assert!(std::fs::metadata(&fifo).is_ok_and(|m| !m.is_file()), "the FIFO is still there");
    }

    #[test]
    fn a_cache_reads_back_what_it_wrote() {
        let dir = TempDir::new("round-trip");
        // A directory that does not exist yet: save creates it.
        let path = dir.0.join("a").join("b").join("tune.json");
        let mut cache = TuneCache::load(&path).expect("a missing file is an empty cache");
        assert!(cache.entries().is_empty());
        assert_eq!(cache.insert(entry(key(), false)), None);
        let other = TuneKey { width: 1920, height: 1080, ..key() };
        cache.insert(entry(other.clone(), true));
        cache.save(&path).expect("saved");
        let read = TuneCache::load(&path).expect("read back");
        assert_eq!(read, cache);
        assert!(read.lookup(&other).is_some_and(|e| e.chosen.spin_wait));
        // The chosen candidate is the fastest pipelined one, its numbers and the failure kept as they were.
        let e = read.lookup(&key()).expect("tuned");
        assert_eq!(e.chosen_candidate().and_then(|c| c.pipelined_fps), Some(297.25));
        assert_eq!(e.candidates[2].error.as_deref(), Some("cuDNN refused it: \"quoted\"\nand a second line"));
        assert_eq!(e.candidates[1].in_effect.map(|o| o.cuda.provider.cuda_graph), Some(false));
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(path.parent().expect("a parent"))
            .expect("listed")
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        assert_eq!(names, ["tune.json"]);
    }

    #[test]
    fn inserting_a_key_again_replaces_its_entry() {
        let mut cache = TuneCache::default();
        cache.insert(entry(key(), false));
        let old = cache.insert(entry(key(), true)).expect("the earlier entry");
        assert!(!old.chosen.spin_wait);
        assert_eq!(cache.entries().len(), 1);
        assert!(cache.lookup(&key()).is_some_and(|e| e.chosen.spin_wait));
    }

    #[test]
    fn a_lookup_misses_when_any_field_of_the_key_differs() {
        let mut cache = TuneCache::default();
        cache.insert(entry(key(), false));
        assert!(cache.lookup(&key()).is_some());
        let k = key;
        let others = [
            ("model", TuneKey { model_sha256: "0".repeat(64), ..k() }),
            ("backend", TuneKey { backend: "cpu".into(), ..k() }),
            ("GPU", TuneKey { gpu_uuid: "73ca0102-0304-0506-0708-090a0b0c0d78".into(), ..k() }),
            ("GPU name", TuneKey { gpu_name: "NVIDIA H100".into(), ..k() }),
            ("driver", TuneKey { driver: "NVIDIA 580.95.06".into(), ..k() }),
            ("runtime", TuneKey { runtime_version: "1.32.0".into(), ..k() }),
            ("width", TuneKey { width: 961, ..k() }),
            ("height", TuneKey { height: 541, ..k() }),
        ];
        for (what, other) in others {
            assert!(cache.lookup(&other).is_none(), "another {what} found the entry");
        }
    }

    #[test]
    fn a_corrupt_cache_is_an_error_that_names_the_file_and_the_way_out() {
        let dir = TempDir::new("corrupt");
        std::fs::create_dir_all(&dir.0).expect("made");
        let cases = [
            ("truncated.json", "{\"version\": 1, \"entries\": [{\"key\""),
            ("not-json.json", "tune.json\n"),
            ("wrong-shape.json", "{\"version\": 1, \"entries\": {}}"),
            ("bad-post-wait.json", "{\"version\": 1, \"entries\": [{\"chosen\": {\"post_wait\": \"later\"}}]}"),
            ("newer.json", "{\"version\": 2, \"entries\": []}"),
        ];
        for (name, text) in cases {
            let path = dir.0.join(name);
            std::fs::write(&path, text).expect("written");
            let e = TuneCache::load(&path).expect_err(name);
            assert_eq!(e.kind(), crate::ErrorKind::Io, "{e}");
            let message = e.to_string();
            for part in [path.display().to_string().as_str(), "delete it", "neural-frame tune"] {
                assert!(message.contains(part), "{name}: {message}");
            }
            let Error::Io { source, .. } = &e else { panic!("{name}: {e:?}") };
            assert_eq!(source.kind(), std::io::ErrorKind::InvalidData, "{name}");
        }
        let newer = TuneCache::load(&dir.0.join("newer.json")).expect_err("newer");
        assert!(newer.to_string().contains("format version 2"), "{newer}");
    }

    #[test]
    fn the_default_path_follows_the_variables_in_order() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(crate::files::tune_cache_path_from(p("/x/t.json"), p("/xdg"), p("/home/u")), p("/x/t.json"));
        assert_eq!(crate::files::tune_cache_path_from(None, p("/xdg"), p("/home/u")), p("/xdg/neural-frame/tune.json"));
        assert_eq!(
            crate::files::tune_cache_path_from(None, p("relative"), p("/home/u")),
            p("/home/u/.cache/neural-frame/tune.json")
        );
        assert_eq!(
            crate::files::tune_cache_path_from(None, None, p("/home/u")),
            p("/home/u/.cache/neural-frame/tune.json")
        );
        assert_eq!(crate::files::tune_cache_path_from(None, None, None), None);
    }
}
