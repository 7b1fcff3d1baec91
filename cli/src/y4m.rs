//! The container layer of `neural-frame stream`: YUV4MPEG2 (y4m) and raw frame streams, read
//! and written as bytes (docs/stream.md). Only `std`; the colour conversion lives elsewhere.
//!
//! Frame numbers: `frame` fields of [`StreamError`] are 0-based indices (the number of whole
//! frames before the one in error); messages count from 1 ("frame 13" is index 12).

use std::fmt;
use std::io::{self, BufRead, BufReader, BufWriter, Chain, Cursor, Read, Write};

/// The magic a y4m stream starts with, its separating space included.
const MAGIC: &[u8] = b"YUV4MPEG2 ";
/// The longest header or `FRAME` line accepted, its `\n` included.
const MAX_LINE: usize = 4096;
/// The largest `W` or `H`.
const MAX_SIDE: u32 = 16384;
/// The capacity of the reader's and writer's buffers.
const BUF_CAPACITY: usize = 256 * 1024;
/// The colour tags accepted, for messages.
const SUPPORTED: &str =
    "420jpeg, 420, 420mpeg2, 420paldv, 422, 444, 444alpha, mono, and 420pN, 422pN, 444pN, monoN with N = 9…16";

// The stream's chroma subsampling, chroma siting and range are the library's own types:
// what a header says maps onto the host stream's layout one to one.
pub use neural_frame::{ChromaSiting as Siting, Subsampling as Sub, YuvRange as Range};

/// A parsed y4m header line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Y4mHeader {
    /// `W`: the frame's width in pixels (1…16384).
    pub width: u32,
    /// `H`: the frame's height in pixels (1…16384).
    pub height: u32,
    /// The chroma subsampling (from the `C` tag).
    pub sub: Sub,
    /// Bits a sample: 8, or 9…16 for the `pN` and `monoN` tags (stored as 16-bit little-endian words).
    pub bits: u8,
    /// `444alpha`: an alpha plane follows Y, U and V.
    pub alpha: bool,
    /// Where 4:2:0 chroma sits.
    pub siting: Siting,
    /// `XCOLORRANGE`, if present and `FULL` or `LIMITED`.
    pub range: Option<Range>,
    /// An `I` tag other than `p` or `?` (`t`, `b`, `m`).
    pub interlaced: bool,
    /// `F`: the frame rate as numerator and denominator.
    pub frame_rate: Option<(u32, u32)>,
    /// Every tag other than W and H, verbatim and in order, for writing back.
    tags: Vec<String>,
}

/// Parses `n:d` into two numbers.
fn ratio(value: &str) -> Option<(u32, u32)> {
    let (n, d) = value.split_once(':')?;
    Some((n.parse().ok()?, d.parse().ok()?))
}

/// A bit depth written as digits, 9…16, without leading zeros.
fn depth(digits: &str) -> Option<u8> {
    digits.parse::<u8>().ok().filter(|n| (9..=16).contains(n) && n.to_string() == digits)
}

/// The colour tag's subsampling, depth, alpha and siting.
fn colour(tag: &str) -> Option<(Sub, u8, bool, Siting)> {
    Some(match tag {
        "420jpeg" | "420" => (Sub::S420, 8, false, Siting::Centre),
        "420mpeg2" => (Sub::S420, 8, false, Siting::Left),
        "420paldv" => (Sub::S420, 8, false, Siting::TopLeft),
        "422" => (Sub::S422, 8, false, Siting::Centre),
        "444" => (Sub::S444, 8, false, Siting::Centre),
        "444alpha" => (Sub::S444, 8, true, Siting::Centre),
        "mono" => (Sub::Mono, 8, false, Siting::Centre),
        _ => {
            let (sub, digits) = match (tag.strip_prefix("mono"), tag.split_once('p')) {
                (Some(d), _) => (Sub::Mono, d),
                (_, Some(("420", d))) => (Sub::S420, d),
                (_, Some(("422", d))) => (Sub::S422, d),
                (_, Some(("444", d))) => (Sub::S444, d),
                _ => return None,
            };
            (sub, depth(digits)?, false, Siting::Centre)
        }
    })
}

/// A side (`W` or `H`) from its value.
fn side(key: char, value: &str) -> Result<u32, String> {
    match value.parse::<u32>() {
        Ok(n) if (1..=MAX_SIDE).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{key}{value}` is not a frame {} of 1…{MAX_SIDE} pixels",
            if key == 'W' { "width" } else { "height" }
        )),
    }
}

impl Y4mHeader {
    /// Parses the header line (without the trailing '\n'), starting with "YUV4MPEG2".
    pub fn parse(line: &str) -> Result<Self, String> {
        let Some(rest) = line.strip_prefix("YUV4MPEG2 ") else {
            return Err(format!(
                "the input is not a YUV4MPEG2 stream: it starts with `{}`, not `YUV4MPEG2 `",
                escape(line.as_bytes())
            ));
        };
        let mut colour_tag = None;
        let mut header = Self {
            width: 0,
            height: 0,
            sub: Sub::S420,
            bits: 8,
            alpha: false,
            siting: Siting::Centre,
            range: None,
            interlaced: false,
            frame_rate: None,
            tags: Vec::new(),
        };
        for tag in rest.split(' ').filter(|t| !t.is_empty()) {
            let mut chars = tag.chars();
            let key = chars.next().unwrap_or(' ');
            let value = chars.as_str();
            let once = |seen: bool| if seen { Err(format!("the `{key}` tag is given twice")) } else { Ok(()) };
            match key {
                'W' => {
                    once(header.width != 0)?;
                    header.width = side('W', value)?;
                    continue;
                }
                'H' => {
                    once(header.height != 0)?;
                    header.height = side('H', value)?;
                    continue;
                }
                'F' => {
                    once(header.frame_rate.is_some())?;
                    match ratio(value) {
                        Some((n, d)) if n > 0 && d > 0 => header.frame_rate = Some((n, d)),
                        _ => return Err(format!("the frame rate `{tag}` is not F<n>:<d> with both above 0")),
                    }
                }
                'I' => match value {
                    "p" | "?" => {}
                    "t" | "b" | "m" => header.interlaced = true,
                    _ => return Err(format!("the interlacing tag `{tag}` is not one of Ip, It, Ib, Im, I?")),
                },
                'A' => match ratio(value) {
                    Some((0, 0)) => {}
                    Some((n, d)) if n > 0 && d > 0 => {}
                    _ => return Err(format!("the pixel aspect ratio `{tag}` is not A<n>:<d> (A0:0 when unknown)")),
                },
                'C' => {
                    once(colour_tag.is_some())?;
                    let Some(c) = colour(value) else {
                        return Err(format!("the colour space `C{value}` is not supported (supported: {SUPPORTED})"));
                    };
                    colour_tag = Some(c);
                }
                'X' => {
                    if let Some((k, v)) = value.split_once('=')
                        && k.eq_ignore_ascii_case("COLORRANGE")
                    {
                        if v.eq_ignore_ascii_case("FULL") {
                            header.range = Some(Range::Full);
                        } else if v.eq_ignore_ascii_case("LIMITED") {
                            header.range = Some(Range::Limited);
                        }
                    }
                }
                _ => {}
            }
            header.tags.push(tag.to_owned());
        }
        if header.width == 0 {
            return Err("it has no `W` (width) tag".to_owned());
        } else if header.height == 0 {
            return Err("it has no `H` (height) tag".to_owned());
        }
        if let Some((sub, bits, alpha, siting)) = colour_tag {
            (header.sub, header.bits, header.alpha, header.siting) = (sub, bits, alpha, siting);
        }
        Ok(header)
    }

    /// Bytes of one frame's planes (Y, U, V, A as the tag says; samples of 2 bytes when bits > 8;
    /// chroma planes ceil(w/2) x ceil(h/2) for 420, ceil(w/2) x h for 422).
    pub fn frame_len(&self) -> usize {
        let (w, h) = (self.width as usize, self.height as usize);
        let chroma = match self.sub {
            Sub::Mono => 0,
            Sub::S420 => 2 * w.div_ceil(2) * h.div_ceil(2),
            Sub::S422 => 2 * w.div_ceil(2) * h,
            Sub::S444 => 2 * w * h,
        };
        let samples = w * h * (1 + usize::from(self.alpha)) + chroma;
        samples * if self.bits > 8 { 2 } else { 1 }
    }

    /// The same header at another size (W and H replaced, every other tag kept).
    pub fn resized(&self, width: u32, height: u32) -> Self {
        debug_assert!((1..=MAX_SIDE).contains(&width) && (1..=MAX_SIDE).contains(&height));
        Self { width, height, ..self.clone() }
    }

    /// The header line, "YUV4MPEG2 W.. H.. <other tags in order>\n".
    pub fn to_line(&self) -> String {
        let mut line = format!("YUV4MPEG2 W{} H{}", self.width, self.height);
        for tag in &self.tags {
            line.push(' ');
            line.push_str(tag);
        }
        line.push('\n');
        line
    }

    /// The colour tag's text as written (e.g. "420jpeg", "444alpha", "420p10"), or "420jpeg" when absent;
    /// for messages.
    pub fn colour_name(&self) -> String {
        self.tags.iter().find_map(|t| t.strip_prefix('C')).unwrap_or("420jpeg").to_owned()
    }

    /// "W×H colour: N bytes a frame", for messages.
    fn layout(&self) -> String {
        format!("{}×{} {}: {} bytes a frame", self.width, self.height, self.colour_name(), self.frame_len())
    }
}

/// Bytes as printable ASCII (escaped), at most 40 characters, for messages.
fn escape(bytes: &[u8]) -> String {
    let mut s = bytes[..bytes.len().min(40)].escape_ascii().to_string();
    if s.len() > 40 || bytes.len() > 40 {
        s.truncate(40);
        s.push('…');
    }
    s
}

/// Whether the stream starts with `YUV4MPEG2 `. Reads up to 10 bytes (fewer only at end of stream; short
/// reads from pipes are retried) and returns them beside the answer: pass them to [`FrameReader::y4m`]
/// or [`FrameReader::raw`] as the `prefix`, which is read before the rest of the stream.
pub fn sniff<R: Read + ?Sized>(reader: &mut R) -> io::Result<(bool, Vec<u8>)> {
    let mut prefix = Vec::with_capacity(MAGIC.len());
    reader.take(MAGIC.len() as u64).read_to_end(&mut prefix)?;
    Ok((prefix == MAGIC, prefix))
}

/// Errors of a frame stream, each naming the frame and what was wrong. `frame` fields are 0-based
/// indices (also the number of whole frames before it); messages count from 1.
#[derive(Debug)]
pub enum StreamError {
    /// Reading failed: during the header (`frame` None) or a frame. The message includes the I/O
    /// error's text (it is not also given as `source()`, so it is printed once however the error is shown).
    Io { frame: Option<u64>, error: io::Error },
    /// The input does not start with `YUV4MPEG2 ` (what it starts with, escaped; empty for an empty input).
    NotY4m { found: String },
    /// The header line is wrong (the message says how).
    Header(String),
    /// The stream ended inside a frame's data, after `got` of its `want` bytes.
    Truncated { frame: u64, got: usize, want: usize },
    /// The stream ended inside a frame's `FRAME` line.
    TruncatedMarker { frame: u64 },
    /// Something other than a `FRAME` line where one was expected (`found` escaped, at most 40
    /// characters; `layout` the header's size, colour tag and frame length).
    BadMarker { frame: u64, found: String, layout: String },
    /// A second header with another frame size where a `FRAME` line was expected.
    SizeChange { frame: u64, from: (u32, u32), to: (u32, u32) },
    /// A second header of the same size with another colour tag (`from`, `to` the tags) or other tags
    /// (`from`, `to` the header lines' tags).
    FormatChange { frame: u64, from: String, to: String },
    /// A header (`frame` None) or `FRAME` line longer than 4096 bytes.
    LineTooLong { frame: Option<u64> },
}

/// "the N frames before it were written", for messages.
struct Before(u64);

impl fmt::Display for Before {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => write!(f, "no frame came before it"),
            1 => write!(f, "the frame before it was written"),
            n => write!(f, "the {n} frames before it were written"),
        }
    }
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { frame: None, error } => write!(f, "reading the YUV4MPEG2 header: {error}"),
            Self::Io { frame: Some(i), error } => write!(f, "reading frame {}: {error}", i + 1),
            Self::NotY4m { found } if found.is_empty() => {
                write!(f, "the input is empty (a YUV4MPEG2 stream was expected)")
            }
            Self::NotY4m { found } => {
                write!(f, "the input is not a YUV4MPEG2 stream: it starts with `{found}`, not `YUV4MPEG2 `")
            }
            Self::Header(msg) => write!(f, "the YUV4MPEG2 header: {msg}"),
            Self::Truncated { frame, got, want } => write!(
                f,
                "frame {} is cut short: the stream ended after {got} of its {want} bytes (a truncated input); {}",
                frame + 1,
                Before(*frame)
            ),
            Self::TruncatedMarker { frame } => write!(
                f,
                "frame {} is cut short: the stream ended inside its `FRAME` line (a truncated input); {}",
                frame + 1,
                Before(*frame)
            ),
            Self::BadMarker { frame: 0, found, layout } => write!(
                f,
                "frame 1: expected a `FRAME` line after the header, found `{found}`: the data is not a \
                 YUV4MPEG2 frame ({layout})"
            ),
            Self::BadMarker { frame, found, layout } => write!(
                f,
                "frame {}: expected a `FRAME` line, found `{found}`: the header's size or colour space does \
                 not match the data ({layout})",
                frame + 1
            ),
            Self::SizeChange { frame, from, to } => write!(
                f,
                "the stream's frame size changes at frame {} ({}×{} → {}×{}, a second YUV4MPEG2 header): \
                 neural-frame streams one size; split the input there",
                frame + 1,
                from.0,
                from.1,
                to.0,
                to.1
            ),
            Self::FormatChange { frame, from, to } => write!(
                f,
                "the stream's format changes at frame {} ({from} → {to}, a second YUV4MPEG2 header): \
                 neural-frame streams one format; split the input there",
                frame + 1
            ),
            Self::LineTooLong { frame: None } => {
                write!(f, "the YUV4MPEG2 header line is longer than {MAX_LINE} bytes")
            }
            Self::LineTooLong { frame: Some(i) } => {
                write!(f, "frame {}: its `FRAME` line is longer than {MAX_LINE} bytes", i + 1)
            }
        }
    }
}

impl std::error::Error for StreamError {}

/// Reads frames from a y4m or raw stream, through a buffer of its own.
pub struct FrameReader<R: Read> {
    /// The sniffed prefix, then the stream.
    inner: BufReader<Chain<Cursor<Vec<u8>>, R>>,
    /// Bytes of a frame's data.
    frame_len: usize,
    /// The y4m header (None: raw frames, no `FRAME` lines).
    header: Option<Y4mHeader>,
    /// The last line read (reused).
    line: Vec<u8>,
    /// Frames read so far.
    frames: u64,
}

impl<R: Read> FrameReader<R> {
    /// Reads and parses the y4m header. `prefix` (what [`sniff`] returned, or empty) is read before `reader`.
    pub fn y4m(reader: R, prefix: Vec<u8>) -> Result<(Self, Y4mHeader), StreamError> {
        let mut this = Self::raw(reader, 0, prefix);
        let n = this.read_line().map_err(|error| StreamError::Io { frame: None, error })?;
        let line = &this.line[..n];
        if !line.starts_with(MAGIC) {
            let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
            return Err(StreamError::NotY4m { found: escape(&line[..end]) });
        }
        let Some(text) = line.strip_suffix(b"\n") else {
            return Err(if n == MAX_LINE {
                StreamError::LineTooLong { frame: None }
            } else {
                StreamError::Header("the stream ended inside the header line (a truncated input)".to_owned())
            });
        };
        let text = std::str::from_utf8(text).map_err(|_| StreamError::Header("it is not UTF-8 text".to_owned()))?;
        let header = Y4mHeader::parse(text).map_err(StreamError::Header)?;
        this.frame_len = header.frame_len();
        this.header = Some(header.clone());
        Ok((this, header))
    }

    /// Raw frames of `frame_len` bytes (> 0), back to back. `prefix` (what [`sniff`] returned, or empty)
    /// is read before `reader`.
    pub fn raw(reader: R, frame_len: usize, prefix: Vec<u8>) -> Self {
        Self {
            inner: BufReader::with_capacity(BUF_CAPACITY, Cursor::new(prefix).chain(reader)),
            frame_len,
            header: None,
            line: Vec::new(),
            frames: 0,
        }
    }

    /// Reads the next frame's bytes into `buf` (resized to the frame length). Ok(false) at a clean end of
    /// stream (EOF exactly at a frame boundary, before a FRAME line). A FRAME line with parameters
    /// ("FRAME Ixyz") is accepted and its parameters ignored. A second header identical to the first
    /// (concatenated streams) is skipped; any other is an error.
    pub fn next_frame(&mut self, buf: &mut Vec<u8>) -> Result<bool, StreamError> {
        debug_assert!(self.frame_len > 0, "a frame of no bytes");
        let frame = self.frames;
        if self.header.is_some() && !self.read_marker()? {
            return Ok(false);
        }
        buf.resize(self.frame_len, 0);
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]) {
                Ok(0) if got == 0 && self.header.is_none() => return Ok(false),
                Ok(0) => return Err(StreamError::Truncated { frame, got, want: buf.len() }),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(StreamError::Io { frame: Some(frame), error }),
            }
        }
        self.frames += 1;
        Ok(true)
    }

    /// Frames read so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Reads a line of at most [`MAX_LINE`] bytes (its `\n` included, if any) into `self.line`; its length.
    fn read_line(&mut self) -> io::Result<usize> {
        self.line.clear();
        (&mut self.inner).take(MAX_LINE as u64).read_until(b'\n', &mut self.line)
    }

    /// Reads the `FRAME` line before a frame: Ok(false) at the end of the stream.
    fn read_marker(&mut self) -> Result<bool, StreamError> {
        let frame = self.frames;
        loop {
            let n = self.read_line().map_err(|error| StreamError::Io { frame: Some(frame), error })?;
            if n == 0 {
                return Ok(false);
            }
            let Some(header) = &self.header else { return Ok(true) };
            let complete = self.line.ends_with(b"\n");
            let text = if complete { &self.line[..n - 1] } else { &self.line[..] };
            if text == b"FRAME" || text.starts_with(b"FRAME ") {
                return match (complete, n == MAX_LINE) {
                    (true, _) => Ok(true),
                    (false, true) => Err(StreamError::LineTooLong { frame: Some(frame) }),
                    (false, false) => Err(StreamError::TruncatedMarker { frame }),
                };
            }
            if !complete && n < MAX_LINE && b"FRAME".starts_with(text) {
                return Err(StreamError::TruncatedMarker { frame });
            }
            if complete
                && text.starts_with(MAGIC)
                && let Ok(next) = std::str::from_utf8(text).map_err(|_| String::new()).and_then(Y4mHeader::parse)
            {
                if next == *header {
                    continue;
                }
                let (from, to) = ((header.width, header.height), (next.width, next.height));
                if from != to {
                    return Err(StreamError::SizeChange { frame, from, to });
                }
                let (from, to) = match (header.colour_name(), next.colour_name()) {
                    (a, b) if a != b => (a, b),
                    _ => (header.to_line()[10..].trim_end().to_owned(), next.to_line()[10..].trim_end().to_owned()),
                };
                return Err(StreamError::FormatChange { frame, from, to });
            }
            return Err(StreamError::BadMarker { frame, found: escape(text), layout: header.layout() });
        }
    }
}

/// Writes frames as a y4m or raw stream, through a buffer of its own; each frame is flushed through to
/// the inner writer before [`FrameWriter::write_frame`] returns.
pub struct FrameWriter<W: Write> {
    /// The stream.
    inner: BufWriter<W>,
    /// Whether each frame has a `FRAME` line.
    y4m: bool,
}

impl<W: Write> FrameWriter<W> {
    /// A y4m writer: writes `header.to_line()` at once (buffered: it reaches `writer` with the first frame,
    /// or at [`FrameWriter::finish`]), then "FRAME\n" + planes per frame.
    pub fn y4m(writer: W, header: &Y4mHeader) -> io::Result<Self> {
        let mut inner = BufWriter::with_capacity(BUF_CAPACITY, writer);
        inner.write_all(header.to_line().as_bytes())?;
        Ok(Self { inner, y4m: true })
    }

    /// A raw writer: frames back to back.
    pub fn raw(writer: W) -> Self {
        Self { inner: BufWriter::with_capacity(BUF_CAPACITY, writer), y4m: false }
    }

    /// Writes one frame (its planes/bytes) and flushes it. The caller checks the length.
    pub fn write_frame(&mut self, frame: &[u8]) -> io::Result<()> {
        if self.y4m {
            self.inner.write_all(b"FRAME\n")?;
        }
        self.inner.write_all(frame)?;
        self.inner.flush()
    }

    /// Writes what comes before a frame's bytes (its `FRAME` line, for y4m) and flushes, for
    /// a caller that writes the bytes itself (spliced into a pipe).
    pub fn write_marker(&mut self) -> io::Result<()> {
        if self.y4m {
            self.inner.write_all(b"FRAME\n")?;
        }
        self.inner.flush()
    }

    /// Flushes; returns the inner writer.
    pub fn finish(self) -> io::Result<W> {
        let mut inner = self.inner.into_inner().map_err(|e| e.into_error())?;
        inner.flush()?;
        Ok(inner)
    }
}

#[cfg(test)]
mod tests;
