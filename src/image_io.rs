//! Reading and writing image files (PNG, JPEG) as tightly packed RGBA8: what
//! [`NeuralFrameContext::upload`](crate::NeuralFrameContext::upload) takes and
//! [`readback`](crate::NeuralFrameContext::readback) gives for `R8G8B8A8` images.
//!
//! ```
//! use neural_frame::image_io::Rgba8;
//! # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-module", std::process::id()));
//!
//! let photo = Rgba8::load(std::path::Path::new("models/coffee.png"))?;
//! assert_eq!((photo.width, photo.height), (600, 400));
//! let small = photo.resized(300, 200)?;
//! small.save_png(&dir.join("small.png"))?; // creates `dir` if needed
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), neural_frame::Error>(())
//! ```

use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The most host memory one RGBA8 picture may take: 1 GiB (16384 × 16384 pixels).
///
/// Pictures are refused above it before anything is allocated, so that a
/// header declaring 100000 × 100000 or a `--size` typo is an error, not an abort.
///
/// ```
/// use neural_frame::image_io::{MAX_PICTURE_BYTES, check_picture_size};
/// assert_eq!(MAX_PICTURE_BYTES, 16384 * 16384 * 4);
/// assert!(check_picture_size(16384, 16384).is_ok());
/// assert!(check_picture_size(16384, 16385).is_err());
/// ```
pub const MAX_PICTURE_BYTES: u64 = 1 << 30;

/// The longest side a picture may have, whatever its area: 65536 pixels.
/// It keeps `side × scale` far from `u32` overflow.
///
/// ```
/// use neural_frame::image_io::{MAX_PICTURE_SIDE, check_picture_size};
/// assert!(check_picture_size(MAX_PICTURE_SIDE, 1).is_ok()); // 256 KiB, but a long side
/// assert!(check_picture_size(MAX_PICTURE_SIDE + 1, 1).is_err());
/// ```
pub const MAX_PICTURE_SIDE: u32 = 1 << 16;

/// The most bytes of an encoded picture read from a stream ([`Rgba8::read`]): 2 GiB.
pub const MAX_ENCODED_BYTES: u64 = 2 << 30;

/// Refuses a `width × height` RGBA8 picture that would exceed
/// [`MAX_PICTURE_BYTES`] or [`MAX_PICTURE_SIDE`], naming the limit.
///
/// ```
/// use neural_frame::ErrorKind;
/// use neural_frame::image_io::check_picture_size;
///
/// check_picture_size(3840, 2160)?;
/// let e = check_picture_size(100_000, 100_000).expect_err("37 GiB");
/// assert_eq!(e.kind(), ErrorKind::InvalidArgument);
/// assert!(e.to_string().contains("too large"), "{e}");
/// # Ok::<(), neural_frame::Error>(())
/// ```
pub fn check_picture_size(width: u32, height: u32) -> Result<()> {
    let bytes = u64::from(width) * u64::from(height) * 4;
    if width > MAX_PICTURE_SIDE || height > MAX_PICTURE_SIDE || bytes > MAX_PICTURE_BYTES {
        return Err(Error::InvalidArgument(format!(
            "a {width}×{height} picture is too large: it needs {:.1} GiB of host memory as RGBA8, beyond the \
             limit of {} GiB ({}×{} pixels) and {MAX_PICTURE_SIDE} pixels a side; use a smaller size",
            bytes as f64 / f64::from(1u32 << 30),
            MAX_PICTURE_BYTES >> 30,
            1u32 << 14,
            1u32 << 14,
        )));
    }
    Ok(())
}

/// An RGBA8 picture in host memory.
///
/// ```
/// use neural_frame::image_io::Rgba8;
/// # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-rgba8", std::process::id()));
///
/// // A 64×32 gradient, written as a PNG and read back unchanged.
/// let (width, height) = (64, 32);
/// let pixels = (0..height).flat_map(|y| (0..width).flat_map(move |x| [4 * x as u8, 8 * y as u8, 128, 255])).collect();
/// let picture = Rgba8 { width, height, pixels };
/// let path = dir.join("gradient.png");
/// picture.save_png(&path)?;
/// assert_eq!(Rgba8::load(&path)?, picture);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgba8 {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width × height × 4` bytes, row-major, R G B A.
    pub pixels: Vec<u8>,
}

impl Rgba8 {
    /// Reads a PNG or JPEG file. The size its header declares is checked
    /// against [`check_picture_size`] before any pixel is decoded. Pictures
    /// without alpha get an opaque one. A FIFO (or another file that cannot
    /// seek) is read as a stream, as [`read`](Self::read) does.
    ///
    /// ```
    /// use std::path::Path;
    /// use neural_frame::ErrorKind;
    /// use neural_frame::image_io::Rgba8;
    ///
    /// let photo = Rgba8::load(Path::new("models/coffee.png"))?; // an RGB PNG
    /// assert_eq!((photo.width, photo.height), (600, 400));
    /// assert_eq!(photo.pixels.len(), 600 * 400 * 4);
    /// assert!(photo.pixels.chunks_exact(4).all(|px| px[3] == 255));
    ///
    /// let e = Rgba8::load(Path::new("models/README.md")).expect_err("not a picture");
    /// assert_eq!(e.kind(), ErrorKind::Image);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn load(path: &Path) -> Result<Self> {
        let err = |message: String| Error::ImageFile { path: path.display().to_string(), message };
        let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
        if meta.is_dir() {
            return Err(err("is a directory; give a PNG or JPEG file".into()));
        }
        if !meta.is_file() {
            // A FIFO or a device: not seekable, so read as a stream.
            let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
            return Self::read(file, &path.display().to_string());
        }
        let open = || -> Result<_> {
            let reader = image::ImageReader::open(path).map_err(|e| err(e.to_string()))?;
            reader.with_guessed_format().map_err(|e| err(e.to_string()))
        };
        Self::decode(open, &err)
    }

    /// Reads a PNG or JPEG from a stream (standard input, a pipe, a socket),
    /// which need not be seekable: the encoded file is read into memory (at
    /// most [`MAX_ENCODED_BYTES`]), then decoded as [`load`](Self::load) does.
    /// `name` names the stream in errors.
    ///
    /// ```
    /// use neural_frame::image_io::Rgba8;
    ///
    /// let bytes = std::fs::read("models/coffee.png")?;
    /// let photo = Rgba8::read(&bytes[..], "standard input")?;
    /// assert_eq!((photo.width, photo.height), (600, 400));
    /// let e = Rgba8::read(&b"not a picture"[..], "standard input").expect_err("not a picture");
    /// assert!(e.to_string().contains("standard input"), "{e}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(reader: impl std::io::Read, name: &str) -> Result<Self> {
        use std::io::Read as _;
        let err = |message: String| Error::ImageFile { path: name.to_string(), message };
        let mut reader = reader.take(MAX_ENCODED_BYTES + 1);
        // Its first bytes before the rest: a stream that is no PNG or JPEG (/dev/zero, a device,
        // random bytes) is refused at once, not read for gigabytes first.
        let mut bytes = Vec::new();
        (&mut reader).take(8).read_to_end(&mut bytes).map_err(|e| err(format!("cannot read it: {e}")))?;
        if bytes.is_empty() {
            return Err(err("is empty: no PNG or JPEG was given".into()));
        }
        let png = b"\x89PNG\r\n\x1a\n".starts_with(&bytes);
        let jpeg = [0xff, 0xd8, 0xff].starts_with(&bytes[..bytes.len().min(3)]);
        if !png && !jpeg {
            let start: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
            return Err(err(format!(
                "is not a PNG or JPEG: it starts with the bytes {}; give a PNG or JPEG",
                start.join(" ")
            )));
        }
        reader.read_to_end(&mut bytes).map_err(|e| err(format!("cannot read it: {e}")))?;
        if bytes.len() as u64 > MAX_ENCODED_BYTES {
            return Err(err(format!(
                "is longer than {} GiB, the most read from a stream; give a smaller picture",
                MAX_ENCODED_BYTES >> 30
            )));
        }
        let open = || -> Result<_> {
            image::ImageReader::new(std::io::Cursor::new(&bytes[..]))
                .with_guessed_format()
                .map_err(|e| err(e.to_string()))
        };
        Self::decode(open, &err)
    }

    /// Decodes what `open` opens (twice: the header first, checked against
    /// [`check_picture_size`], then the pixels).
    fn decode<R: std::io::BufRead + std::io::Seek>(
        open: impl Fn() -> Result<image::ImageReader<R>>,
        err: &dyn Fn(String) -> Error,
    ) -> Result<Self> {
        let mut header = open()?;
        // The header alone: the decoders' own default limits would refuse a huge declared size with
        // "Memory limit exceeded" before it can be named; the size is checked below.
        header.no_limits();
        let (width, height) = header.into_dimensions().map_err(|e| err(format!("cannot decode it: {e}")))?;
        check_picture_size(width, height).map_err(|e| err(format!("its header says {width}×{height}: {e}")))?;
        let mut reader = open()?;
        let mut limits = image::Limits::default();
        // The decoded picture plus its RGBA8 copy; the size is checked above.
        limits.max_alloc = Some(2 * MAX_PICTURE_BYTES);
        reader.limits(limits);
        let img = reader
            .decode()
            .map_err(|e| match e {
                image::ImageError::Limits(l) => err(format!(
                    "decoding it needs more memory than allowed ({l}): pictures are limited to {} GiB as RGBA8",
                    MAX_PICTURE_BYTES >> 30
                )),
                e => err(format!("cannot decode it: {e}")),
            })?
            .to_rgba8();
        Ok(Self { width: img.width(), height: img.height(), pixels: img.into_raw() })
    }

    /// Resizes to `width × height` (Catmull-Rom). The new size is checked
    /// against [`check_picture_size`] first.
    ///
    /// ```
    /// use neural_frame::image_io::Rgba8;
    ///
    /// let grey = Rgba8 { width: 4, height: 2, pixels: vec![100; 4 * 2 * 4] };
    /// let big = grey.resized(16, 8)?;
    /// assert_eq!((big.width, big.height, big.pixels.len()), (16, 8, 16 * 8 * 4));
    /// assert!(big.pixels.iter().all(|&v| v == 100)); // a flat picture stays flat
    /// assert!(grey.resized(100_000, 100_000).is_err());
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn resized(&self, width: u32, height: u32) -> Result<Self> {
        if (width, height) == (self.width, self.height) {
            return Ok(self.clone());
        }
        check_picture_size(width, height)?;
        let img = image::RgbaImage::from_raw(self.width, self.height, self.pixels.clone())
            .ok_or_else(|| Error::InvalidArgument("pixel buffer does not match its size".into()))?;
        let out = image::imageops::resize(&img, width, height, image::imageops::FilterType::CatmullRom);
        Ok(Self { width, height, pixels: out.into_raw() })
    }

    /// Writes a PNG: to a temporary file beside `path`, then renamed into place,
    /// so a failure never leaves a half-written file. See [`PngOutput`] to
    /// check the path before the picture exists.
    ///
    /// ```
    /// use neural_frame::image_io::Rgba8;
    /// # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-save", std::process::id()));
    ///
    /// let red = Rgba8 { width: 2, height: 2, pixels: [255, 0, 0, 255].repeat(4) };
    /// red.save_png(&dir.join("red.png"))?;
    /// assert_eq!(Rgba8::load(&dir.join("red.png"))?, red);
    /// assert!(red.save_png(&dir).is_err()); // a directory
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn save_png(&self, path: &Path) -> Result<()> {
        PngOutput::create(path)?.write(self)
    }
}

/// A temporary file left beside an output by a process that no longer runs,
/// found (and removed, or not) by [`PngOutput::create`].
///
/// ```
/// use neural_frame::image_io::PngOutput;
/// # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-stale-temp", std::process::id()));
/// # std::fs::create_dir_all(&dir).ok();
///
/// // What a run killed while writing `out.png` leaves behind (no process has this id).
/// std::fs::write(dir.join(".out.png.4294967295.tmp"), b"half a PNG")?;
/// let output = PngOutput::create(&dir.join("out.png"))?;
/// for stale in output.stale() {
///     match &stale.removed {
///         Ok(()) => println!("removed {} (process {})", stale.path.display(), stale.pid),
///         Err(e) => eprintln!("cannot remove {}: {e}", stale.path.display()),
///     }
/// }
/// assert_eq!(output.stale().len(), 1);
/// assert_eq!(output.stale()[0].pid, u32::MAX);
/// # drop(output);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct StaleTemp {
    /// The file.
    pub path: PathBuf,
    /// The process id in its name.
    pub pid: u32,
    /// Whether removing it worked.
    pub removed: std::io::Result<()>,
}

/// A PNG output that is checked and opened before the picture exists.
///
/// [`PngOutput::create`] creates the temporary file `.NAME.PID.tmp` beside
/// `path` at once, so that a path that cannot be written fails before any
/// work is done; [`PngOutput::write`] writes the picture into it and renames
/// it into place. Dropped without `write` (an error on the way), the
/// temporary file is removed. A process killed before either leaves the
/// temporary file behind: the next `create` for the same output removes it
/// (see [`PngOutput::stale`]).
///
/// Paths that are not regular files: a FIFO (and `/dev/null`) is a stream,
/// written directly ([`stream`](Self::stream) says so); a symlink to a regular
/// file replaces the file it points to; a directory, a path ending in `/`, a
/// device (a terminal, a copy of `/dev/full`), a socket or a dangling symlink
/// is refused by `create`, naming what it is. [`PngOutput::stdout`] writes to
/// standard output. Any error while writing (a full disk or device, a reader
/// gone) is an error of `write`.
///
/// ```
/// use neural_frame::image_io::{PngOutput, Rgba8};
/// # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-png-output", std::process::id()));
///
/// // Fail before the (long) work if the output cannot be written.
/// let output = PngOutput::create(&dir.join("result.png"))?;
/// let result = Rgba8 { width: 8, height: 8, pixels: vec![200; 8 * 8 * 4] }; // ... the work ...
/// output.write(&result)?;
/// assert_eq!(Rgba8::load(&dir.join("result.png"))?, result);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug)]
pub struct PngOutput {
    path: PathBuf,
    sink: Sink,
    stale: Vec<StaleTemp>,
}

/// Where a [`PngOutput`] writes.
#[derive(Debug)]
enum Sink {
    /// A temporary file renamed onto `target` (the path, or the file its symlink points to).
    Temp { tmp: PathBuf, target: PathBuf, file: std::fs::File },
    /// A FIFO or `/dev/null`, opened when written (a FIFO's open waits for its reader).
    Stream { what: &'static str },
    /// Standard output.
    Stdout,
    /// Written (or being dropped).
    Done,
}

impl PngOutput {
    /// Checks `path` and creates its temporary file (and any missing parent
    /// directories). Removes stale temporary files of this naming first.
    ///
    /// ```
    /// use std::path::Path;
    /// use neural_frame::ErrorKind;
    /// use neural_frame::image_io::PngOutput;
    ///
    /// let e = PngOutput::create(Path::new("models")).expect_err("a directory");
    /// assert_eq!(e.kind(), ErrorKind::Image);
    /// assert!(e.to_string().contains("is a directory"), "{e}");
    /// let e = PngOutput::create(Path::new("no/such/dir/")).expect_err("ends in a slash");
    /// assert!(e.to_string().contains("ends in `/`"), "{e}");
    /// let e = PngOutput::create(Path::new("/dev/full")).expect_err("a device");
    /// assert!(e.to_string().contains("character device"), "{e}");
    /// ```
    pub fn create(path: &Path) -> Result<Self> {
        let shown = path.display().to_string();
        let err = |message: String| Error::ImageFile { path: shown.clone(), message };
        let fix = "give a file name for the output PNG (such as DIR/out.png)";
        // `Path` drops a trailing `/` and `.` (`dir/` names `dir`): look at the text (Windows: `\` too).
        let separator = |b: &u8| *b == b'/' || (cfg!(windows) && *b == b'\\');
        let last = path.as_os_str().as_encoded_bytes().rsplit(separator).next().unwrap_or_default();
        if matches!(last, b"" | b"." | b"..") {
            let end = if last.is_empty() { "`/`" } else { "`.` or `..`" };
            return Err(err(format!("ends in {end}: that names a directory, not a file; {fix}")));
        }
        if path.is_dir() {
            return Err(err(format!("is a directory; {fix}")));
        }
        let link = std::fs::symlink_metadata(path)
            .ok()
            .filter(|m| m.file_type().is_symlink())
            .map(|_| std::fs::read_link(path).map(|t| format!("a symlink to {}, ", t.display())).unwrap_or_default());
        let mut target = path.to_path_buf();
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => {
                if link.is_some() {
                    // Replace the file the link points to, not the link.
                    target =
                        std::fs::canonicalize(path).map_err(|e| err(format!("cannot resolve the symlink: {e}")))?;
                }
            }
            Ok(m) => {
                let link = link.unwrap_or_default();
                let what = match special_file(&m) {
                    Special::Stream(what) => {
                        return Ok(Self { path: path.to_path_buf(), sink: Sink::Stream { what }, stale: vec![] });
                    }
                    Special::Not(what) => what,
                };
                return Err(err(format!(
                    "is {link}{what}, not a file: a PNG written there could not be read back; give a file path, a \
                     FIFO, or `-` for standard output"
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && link.is_some() => {
                return Err(err(format!(
                    "is {}which does not exist (a dangling symlink); remove the link or give another path",
                    link.unwrap_or_default()
                )));
            }
            Err(_) => {}
        }
        let name = target
            .file_name()
            .ok_or_else(|| err(format!("does not end in a file name; {fix}")))?
            .to_string_lossy()
            .into_owned();
        if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| err(format!("cannot create its directory {}: {e}", dir.display())))?;
        }
        let stale = remove_stale_temps(&target, &name);
        let tmp = target.with_file_name(temp_name(&name, std::process::id()));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| err(format!("cannot create the temporary file {} beside it: {e}", tmp.display())))?;
        Ok(Self { path: path.to_path_buf(), sink: Sink::Temp { tmp, target, file }, stale })
    }

    /// An output to standard output, which is refused when it is a terminal.
    /// The PNG is written as a stream when [`write`](Self::write) is called.
    ///
    /// ```no_run
    /// use neural_frame::image_io::{PngOutput, Rgba8};
    ///
    /// let output = PngOutput::stdout()?; // `program > out.png` or `program | viewer`
    /// assert_eq!(output.stream(), Some("standard output"));
    /// output.write(&Rgba8 { width: 1, height: 1, pixels: vec![0, 0, 0, 255] })?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn stdout() -> Result<Self> {
        use std::io::IsTerminal as _;
        if std::io::stdout().is_terminal() {
            return Err(Error::ImageFile {
                path: "-".into(),
                message: "standard output is a terminal: the PNG would be printed as bytes; redirect it \
                          (`> out.png`, `| viewer`) or give a file path"
                    .into(),
            });
        }
        Ok(Self { path: PathBuf::from("-"), sink: Sink::Stdout, stale: vec![] })
    }

    /// The output's path (`-` for standard output).
    ///
    /// ```
    /// use neural_frame::image_io::PngOutput;
    /// # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-path", std::process::id()));
    ///
    /// let output = PngOutput::create(&dir.join("out.png"))?;
    /// println!("writing {}", output.path().display());
    /// assert!(output.path().ends_with("out.png"));
    /// # drop(output);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the output is when it is written as a stream, directly and without
    /// a temporary file: `"a FIFO"`, `"/dev/null"` or `"standard output"`;
    /// `None` for a file (temporary file and rename).
    ///
    /// ```
    /// use std::path::Path;
    /// use neural_frame::image_io::PngOutput;
    ///
    /// assert_eq!(PngOutput::create(Path::new("/dev/null"))?.stream(), Some("/dev/null"));
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn stream(&self) -> Option<&'static str> {
        match self.sink {
            Sink::Stream { what } => Some(what),
            Sink::Stdout => Some("standard output"),
            _ => None,
        }
    }

    /// Stale temporary files `create` found beside the output: named
    /// `.NAME.PID.tmp` for this output's NAME, with a PID that is not this
    /// process and has no `/proc/PID` (the process is gone). Nothing else is
    /// touched; where `/proc` is not mounted none are looked for.
    ///
    /// ```
    /// use neural_frame::image_io::PngOutput;
    /// # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-stale", std::process::id()));
    ///
    /// let output = PngOutput::create(&dir.join("out.png"))?;
    /// for s in output.stale() {
    ///     println!("a killed run (process {}) left {}", s.pid, s.path.display());
    /// }
    /// assert!(output.stale().is_empty()); // a fresh directory
    /// # drop(output);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn stale(&self) -> &[StaleTemp] {
        &self.stale
    }

    /// Encodes `picture` into the temporary file and renames it into place
    /// (or writes it to the stream).
    ///
    /// ```
    /// use neural_frame::image_io::{PngOutput, Rgba8};
    /// # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-write", std::process::id()));
    ///
    /// let path = dir.join("out.png");
    /// let output = PngOutput::create(&path)?;
    /// assert!(!path.exists()); // only the temporary file, until written
    /// output.write(&Rgba8 { width: 1, height: 1, pixels: vec![0, 0, 0, 255] })?;
    /// assert!(path.exists());
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn write(mut self, picture: &Rgba8) -> Result<()> {
        let shown = self.path.display().to_string();
        let err = |message: String| Error::ImageFile { path: shown.clone(), message };
        let encode = |out: &mut dyn std::io::Write, what: &str| -> Result<()> {
            let mut out = BufWriter::new(out);
            let encoder = image::codecs::png::PngEncoder::new(&mut out);
            image::ImageEncoder::write_image(
                encoder,
                &picture.pixels,
                picture.width,
                picture.height,
                image::ExtendedColorType::Rgba8,
            )
            .map_err(|e| err(format!("writing {what}: {e}")))?;
            std::io::Write::flush(&mut out).map_err(|e| err(format!("writing {what}: {e}")))
        };
        match std::mem::replace(&mut self.sink, Sink::Done) {
            Sink::Temp { tmp, target, mut file } => {
                // Put back until renamed, so that a failure removes the temporary file.
                let shown_tmp = tmp.display().to_string();
                let result = encode(&mut file, &shown_tmp)
                    .and_then(|()| file.sync_all().map_err(|e| err(format!("writing {shown_tmp}: {e}"))));
                drop(file);
                let result = result.and_then(|()| {
                    std::fs::rename(&tmp, &target).map_err(|e| err(format!("renaming {shown_tmp} into place: {e}")))
                });
                if result.is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
                result
            }
            Sink::Stream { what } => {
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&self.path)
                    .map_err(|e| err(format!("cannot open {what} for writing: {e}")))?;
                encode(&mut file, what)
            }
            Sink::Stdout => encode(&mut std::io::stdout().lock(), "standard output"),
            Sink::Done => Err(err("already written".into())),
        }
    }
}

/// A path that is neither a regular file nor a directory: a stream the PNG is
/// written to as it is (its name in messages), or what it is instead.
enum Special {
    #[cfg_attr(windows, allow(dead_code))]
    Stream(&'static str),
    Not(&'static str),
}

/// What the special file `m` is: a FIFO or the null device is a stream.
#[cfg(unix)]
fn special_file(m: &std::fs::Metadata) -> Special {
    use std::os::unix::fs::FileTypeExt as _;
    let t = m.file_type();
    if t.is_fifo() {
        Special::Stream("a FIFO")
    } else if t.is_char_device() && is_dev_null(m) {
        Special::Stream("/dev/null")
    } else if t.is_char_device() {
        Special::Not("a character device (a terminal, or a device such as /dev/full)")
    } else if t.is_block_device() {
        Special::Not("a block device")
    } else if t.is_socket() {
        Special::Not("a socket")
    } else {
        Special::Not("not a regular file")
    }
}

/// What the special file `m` is (Windows: neither FIFOs nor the null device are
/// told apart here, so none is a stream).
#[cfg(windows)]
fn special_file(_m: &std::fs::Metadata) -> Special {
    Special::Not("not a regular file")
}

/// Whether `m` is the metadata of the null device (`/dev/null`, or a copy of it).
#[cfg(unix)]
fn is_dev_null(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/dev/null").is_ok_and(|null| null.rdev() == m.rdev())
}

impl Drop for PngOutput {
    fn drop(&mut self) {
        if let Sink::Temp { tmp, file, .. } = std::mem::replace(&mut self.sink, Sink::Done) {
            drop(file);
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

fn temp_name(name: &str, pid: u32) -> String {
    format!(".{name}.{pid}.tmp")
}

/// The PID in `file`, when `file` is exactly `.NAME.PID.tmp` for `name`.
fn temp_pid(file: &str, name: &str) -> Option<u32> {
    let digits = file.strip_prefix('.')?.strip_prefix(name)?.strip_prefix('.')?.strip_suffix(".tmp")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let pid: u32 = digits.parse().ok()?;
    // Written by `temp_name`: no leading zeros, never 0.
    (pid != 0 && temp_name(name, pid) == file).then_some(pid)
}

fn remove_stale_temps(path: &Path, name: &str) -> Vec<StaleTemp> {
    // Whether a PID's process is alive is read from /proc (Unix only).
    if !cfg!(unix) || !Path::new("/proc/self").exists() {
        return Vec::new();
    }
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) = file.to_str().and_then(|f| temp_pid(f, name)) else {
            continue;
        };
        let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if pid == me || !is_file || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let p = entry.path();
        let removed = std::fs::remove_file(&p);
        found.push(StaleTemp { path: p, pid, removed });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_matched_exactly() {
        assert_eq!(temp_pid(".out.png.123.tmp", "out.png"), Some(123));
        assert_eq!(temp_pid(&temp_name("a.b.png", 42), "a.b.png"), Some(42));
        for other in [
            ".out.png.tmp",
            ".out.png..tmp",
            ".out.png.12a.tmp",
            ".out.png.0123.tmp",
            ".out.png.0.tmp",
            ".out.png.+12.tmp",
            "out.png.12.tmp",
            ".other.png.12.tmp",
            ".out.png.12.tmp.bak",
            ".out.png.99999999999.tmp",
        ] {
            assert_eq!(temp_pid(other, "out.png"), None, "{other}");
        }
    }

    #[test]
    fn picture_size_limits_are_named() {
        assert!(check_picture_size(16384, 16384).is_ok());
        assert!(check_picture_size(65536, 1).is_ok());
        for (w, h) in [(100_000, 100_000), (16385, 16384), (65537, 1), (u32::MAX, u32::MAX)] {
            let e = check_picture_size(w, h).expect_err("too large").to_string();
            assert!(e.contains("too large") && e.contains("1 GiB"), "{e}");
        }
    }
}
