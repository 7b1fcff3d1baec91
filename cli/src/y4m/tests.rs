//! Unit tests of `y4m.rs` (run by cli/tests/y4m.rs, which includes the module: the CLI's binary has no
//! unit-test target).

use super::*;

/// A header that must parse.
fn hdr(line: &str) -> Y4mHeader {
    Y4mHeader::parse(line).unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// A y4m stream: `header` (without '\n'), then each frame's marker and data.
fn stream(header: &str, frames: &[(&str, &[u8])]) -> Vec<u8> {
    let mut s = format!("{header}\n").into_bytes();
    for (marker, data) in frames {
        s.extend([marker.as_bytes(), data].concat());
    }
    s
}

/// A reader handing out 1…7 bytes a call, and `Interrupted` now and then, like a pipe.
struct Trickle(Vec<u8>, usize, usize);

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Self(data, pos, calls) = self;
        *calls += 1;
        if calls.is_multiple_of(5) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = (*calls % 7 + 1).min(buf.len()).min(data.len() - *pos);
        buf[..n].copy_from_slice(&data[*pos..*pos + n]);
        *pos += n;
        Ok(n)
    }
}

/// Reads frames until the end or an error: the frames read and the error's message.
fn read_all<R: Read>(reader: &mut FrameReader<R>) -> (Vec<Vec<u8>>, Option<String>) {
    let (mut frames, mut buf) = (Vec::new(), Vec::new());
    loop {
        match reader.next_frame(&mut buf) {
            Ok(true) => frames.push(buf.clone()),
            Ok(false) => return (frames, None),
            Err(e) => return (frames, Some(e.to_string())),
        }
    }
}

/// The frames of `data` read as y4m through a pipe-like reader, with their error, or the header's error.
fn read_y4m(data: Vec<u8>) -> Result<(Vec<Vec<u8>>, Option<String>), String> {
    let mut pipe = Trickle(data, 0, 0);
    let (_, prefix) = sniff(&mut pipe).map_err(|e| e.to_string())?;
    let (mut reader, _) = FrameReader::y4m(pipe, prefix).map_err(|e| e.to_string())?;
    Ok(read_all(&mut reader))
}

/// The error reading `data` as y4m gives.
fn y4m_error(data: Vec<u8>) -> String {
    read_y4m(data).map_or_else(|e| e, |(_, e)| e.expect("an error"))
}

#[test]
fn colour_tags() {
    use {Siting::*, Sub::*};
    for (tag, want) in [
        ("", (S420, 8, false, Centre, "420jpeg")),
        (" C420jpeg", (S420, 8, false, Centre, "420jpeg")),
        (" C420", (S420, 8, false, Centre, "420")),
        (" C420mpeg2", (S420, 8, false, Left, "420mpeg2")),
        (" C420paldv", (S420, 8, false, TopLeft, "420paldv")),
        (" C422", (S422, 8, false, Centre, "422")),
        (" C444", (S444, 8, false, Centre, "444")),
        (" C444alpha", (S444, 8, true, Centre, "444alpha")),
        (" Cmono", (Mono, 8, false, Centre, "mono")),
        (" C420p10", (S420, 10, false, Centre, "420p10")),
        (" C420p9", (S420, 9, false, Centre, "420p9")),
        (" C422p12", (S422, 12, false, Centre, "422p12")),
        (" C444p16", (S444, 16, false, Centre, "444p16")),
        (" Cmono16", (Mono, 16, false, Centre, "mono16")),
    ] {
        let h = hdr(&format!("YUV4MPEG2 W4 H2{tag}"));
        assert_eq!((h.sub, h.bits, h.alpha, h.siting, h.colour_name().as_str()), want, "{tag}");
    }
}

#[test]
fn header_tags() {
    let h = hdr("YUV4MPEG2 W1920 H1080 F30000:1001 It A1:1 C420mpeg2 XYSCSS=420MPEG2 Zfoo XCOLORRANGE=full");
    assert_eq!((h.width, h.height, h.frame_rate, h.interlaced), (1920, 1080, Some((30000, 1001)), true));
    assert_eq!(h.range, Some(Range::Full));
    let h = hdr("YUV4MPEG2  H2 W16384 Ip A0:0 ");
    assert_eq!((h.width, h.height, h.frame_rate, h.interlaced, h.range), (16384, 2, None, false, None));
    assert_eq!(hdr("YUV4MPEG2 W4 H2 Xcolorrange=LiMiTeD").range, Some(Range::Limited));
    assert_eq!(hdr("YUV4MPEG2 W4 H2 XCOLORRANGE=weird").range, None);
    for (i, interlaced) in [("p", false), ("?", false), ("t", true), ("b", true), ("m", true)] {
        assert_eq!(hdr(&format!("YUV4MPEG2 W4 H2 I{i}")).interlaced, interlaced, "I{i}");
    }
}

#[test]
fn header_errors() {
    for (line, want) in [
        ("RIFF1234", "not a YUV4MPEG2 stream: it starts with `RIFF1234`"),
        ("YUV4MPEG2", "not a YUV4MPEG2 stream"),
        ("YUV4MPEG2 H2", "no `W`"),
        ("YUV4MPEG2 W2", "no `H`"),
        ("YUV4MPEG2 W0 H2", "`W0` is not a frame width"),
        ("YUV4MPEG2 W16385 H2", "`W16385` is not a frame width of 1…16384"),
        ("YUV4MPEG2 W2 Hx", "`Hx` is not a frame height"),
        ("YUV4MPEG2 W2 H2 W3", "`W` tag is given twice"),
        ("YUV4MPEG2 W2 H2 F0:1", "frame rate `F0:1`"),
        ("YUV4MPEG2 W2 H2 F25", "frame rate `F25`"),
        ("YUV4MPEG2 W2 H2 Ix", "interlacing tag `Ix`"),
        ("YUV4MPEG2 W2 H2 A1:0", "aspect ratio `A1:0`"),
    ] {
        let e = Y4mHeader::parse(line).expect_err(line);
        assert!(e.contains(want), "{line}: {e}");
    }
    for bad in ["411", "420p8", "420p17", "420p010", "mono8", "444alphap10", "yuv420"] {
        let e = Y4mHeader::parse(&format!("YUV4MPEG2 W4 H2 C{bad}")).expect_err(bad);
        assert!(e.contains(&format!("`C{bad}` is not supported (supported: 420jpeg, 420, 420mpeg2")), "{e}");
    }
}

#[test]
fn frame_lengths() {
    let len = |tags: &str| hdr(&format!("YUV4MPEG2 W5 H3 {tags}")).frame_len();
    let cases = [("", 15 + 2 * 3 * 2), ("C420mpeg2", 27), ("C420p10", 54), ("C422", 15 + 2 * 3 * 3), ("C422p16", 66)];
    let more = [("C444", 45), ("C444alpha", 60), ("C444p16", 90), ("Cmono", 15), ("Cmono16", 30)];
    for (tags, want) in cases.into_iter().chain(more) {
        assert_eq!(len(tags), want, "{tags}");
    }
    assert_eq!(hdr("YUV4MPEG2 W1920 H1080").frame_len(), 1920 * 1080 * 3 / 2);
    assert_eq!(hdr("YUV4MPEG2 W1 H1").frame_len(), 3);
}

#[test]
fn round_trip_and_resize() {
    let line = "YUV4MPEG2 W5 H3 F25:1 Ib A128:117 C444alpha XYSCSS=444 Qunknown XCOLORRANGE=FULL";
    let h = hdr(line);
    assert_eq!(h.to_line(), format!("{line}\n"));
    assert_eq!(hdr(h.to_line().trim_end()), h);
    assert_eq!(hdr("YUV4MPEG2 F25:1 W5 Ip H3 C422").to_line(), "YUV4MPEG2 W5 H3 F25:1 Ip C422\n");
    let big = h.resized(20, 12);
    assert_eq!(big.to_line(), line.replace("W5 H3", "W20 H12") + "\n");
    assert_eq!((big.width, big.height, big.frame_len()), (20, 12, 20 * 12 * 4));
    assert_eq!(Y4mHeader { width: 5, height: 3, ..big }, h);
}

#[test]
fn reads_frames() {
    let (a, b, c) = ([1u8; 6], [2u8; 6], [3u8; 6]);
    let data = stream("YUV4MPEG2 W2 H2 C420jpeg", &[("FRAME\n", &a), ("FRAME Ixyz XFOO=1\n", &b), ("FRAME\n", &c)]);
    let (mut r, h) = FrameReader::y4m(Cursor::new(data), Vec::new()).unwrap();
    assert_eq!((h.width, h.height, h.frame_len()), (2, 2, 6));
    let mut buf = vec![9; 100];
    assert!(r.next_frame(&mut buf).unwrap());
    assert_eq!((buf.as_slice(), r.frames()), (&a[..], 1));
    assert_eq!(read_all(&mut r), (vec![b.to_vec(), c.to_vec()], None));
    assert_eq!(r.frames(), 3);
    assert!(!r.next_frame(&mut buf).unwrap(), "stays at the end");
    // Through a pipe, 1…7 bytes a read, 16-bit samples.
    let frames: Vec<Vec<u8>> = (0..5u8).map(|i| (0..54).map(|j| i * 40 + j).collect()).collect();
    let parts: Vec<(&str, &[u8])> = frames.iter().map(|f| ("FRAME\n", f.as_slice())).collect();
    assert_eq!(read_y4m(stream("YUV4MPEG2 W5 H3 F25:1 C420p10", &parts)), Ok((frames, None)));
    assert_eq!(read_y4m(b"YUV4MPEG2 W2 H2\n".to_vec()), Ok((vec![], None)), "no frames: a clean end");
}

#[test]
fn truncated_frames() {
    let full = [7u8; 27];
    let (frames, err) =
        read_y4m(stream("YUV4MPEG2 W5 H3", &[("FRAME\n", &full), ("FRAME\n", &full), ("FRAME\n", &full[..10])]))
            .unwrap();
    assert_eq!(frames.len(), 2);
    let want = "frame 3 is cut short: the stream ended after 10 of its 27 bytes (a truncated input); the 2 frames \
                before it were written";
    assert_eq!(err.unwrap(), want);
    let e = y4m_error(stream("YUV4MPEG2 W5 H3", &[("FRAME\n", &[])]));
    assert!(e.starts_with("frame 1 is cut short: the stream ended after 0 of its 27 bytes"), "{e}");
    assert!(e.ends_with("no frame came before it"), "{e}");
    for cut in ["F", "FRAM", "FRAME", "FRAME Ixy"] {
        let e = y4m_error(stream("YUV4MPEG2 W5 H3", &[("FRAME\n", &full), (cut, &[])]));
        let want = "frame 2 is cut short: the stream ended inside its `FRAME` line (a truncated input); the frame \
                    before it was written";
        assert_eq!(e, want, "{cut}");
    }
}

#[test]
fn bad_markers() {
    let full = [7u8; 27];
    let e = y4m_error(stream("YUV4MPEG2 W5 H3", &[("FRAME\n", &full), ("FRAME\n", &full), ("\x01garbage\n", &[])]));
    let want = "frame 3: expected a `FRAME` line, found `\\x01garbage`: the header's size or colour space does not \
                match the data (5×3 420jpeg: 27 bytes a frame)";
    assert_eq!(e, want);
    let e = y4m_error(stream("YUV4MPEG2 W5 H3 C444", &[("FRAME\n", &[0; 45]), ("", &[b'x'; 5000])]));
    assert!(e.starts_with(&format!("frame 2: expected a `FRAME` line, found `{}…`", "x".repeat(40))), "{e}");
    assert!(e.ends_with("(5×3 444: 45 bytes a frame)"), "{e}");
    for marker in ["FRAMES\n", "FRAX"] {
        let e = y4m_error(stream("YUV4MPEG2 W5 H3", &[(marker, &[])]));
        let want = format!("frame 1: expected a `FRAME` line after the header, found `{}`:", marker.trim_end());
        assert!(e.starts_with(&want), "{e}");
    }
    let marker = format!("FRAME {}\n", "X".repeat(5000));
    let e = y4m_error(stream("YUV4MPEG2 W5 H3", &[(&marker, &full)]));
    assert_eq!(e, "frame 1: its `FRAME` line is longer than 4096 bytes");
}

#[test]
fn second_headers() {
    let full = [7u8; 6];
    let two = |second: &str| {
        let mut data = stream("YUV4MPEG2 W2 H2 F25:1", &[("FRAME\n", &full), ("FRAME\n", &full)]);
        data.extend(stream(second, &[("FRAME\n", &full)]));
        read_y4m(data).unwrap()
    };
    let (frames, err) = two("YUV4MPEG2 W4 H2 F25:1");
    assert_eq!(frames.len(), 2);
    let want = "the stream's frame size changes at frame 3 (2×2 → 4×2, a second YUV4MPEG2 header): neural-frame \
                streams one size; split the input there";
    assert_eq!(err.unwrap(), want);
    let err = two("YUV4MPEG2 W2 H2 F25:1 C444").1.unwrap();
    assert!(err.starts_with("the stream's format changes at frame 3 (420jpeg → 444, a second"), "{err}");
    let err = two("YUV4MPEG2 W2 H2 F30:1").1.unwrap();
    assert!(err.starts_with("the stream's format changes at frame 3 (W2 H2 F25:1 → W2 H2 F30:1, a"), "{err}");
    assert_eq!(two("YUV4MPEG2  W2 H2 F25:1"), (vec![full.to_vec(); 3], None), "the same header again");
}

#[test]
fn header_stream_errors() {
    let e = y4m_error(b"\x89PNG\r\n\x1a\n rest".to_vec());
    assert_eq!(e, "the input is not a YUV4MPEG2 stream: it starts with `\\x89PNG\\r`, not `YUV4MPEG2 `");
    assert_eq!(y4m_error(Vec::new()), "the input is empty (a YUV4MPEG2 stream was expected)");
    let e = y4m_error(b"YUV4MPEG2 W2 H".to_vec());
    assert_eq!(e, "the YUV4MPEG2 header: the stream ended inside the header line (a truncated input)");
    let e = y4m_error(format!("YUV4MPEG2 W2 H2 X{}\n", "a".repeat(5000)).into_bytes());
    assert_eq!(e, "the YUV4MPEG2 header line is longer than 4096 bytes");
    let e = y4m_error(b"YUV4MPEG2 W2 H2 C411\n".to_vec());
    assert!(e.starts_with("the YUV4MPEG2 header: the colour space `C411` is not supported"), "{e}");
    let (_, h) = FrameReader::y4m(Cursor::new(b"W3 H2\n".to_vec()), MAGIC.to_vec()).unwrap();
    assert_eq!(h.width, 3, "the prefix comes first");
}

#[test]
fn raw_frames() {
    let data: Vec<u8> = (0..24).collect();
    let mut r = FrameReader::raw(Cursor::new(data[4..].to_vec()), 8, data[..4].to_vec());
    assert_eq!(read_all(&mut r), (data.chunks(8).map(<[u8]>::to_vec).collect(), None));
    assert_eq!(r.frames(), 3);
    let (frames, err) = read_all(&mut FrameReader::raw(Trickle(data[..20].to_vec(), 0, 0), 8, Vec::new()));
    assert_eq!(frames, data[..16].chunks(8).map(<[u8]>::to_vec).collect::<Vec<_>>());
    let want = "frame 3 is cut short: the stream ended after 4 of its 8 bytes (a truncated input); the 2 frames \
                before it were written";
    assert_eq!(err.unwrap(), want);
    assert_eq!(read_all(&mut FrameReader::raw(io::empty(), 8, Vec::new())), (vec![], None));
}

#[test]
fn writes_streams() {
    let h = hdr("YUV4MPEG2 W5 H3 F25:1 A1:1 C420 XCOLORRANGE=FULL").resized(2, 1);
    let mut w = FrameWriter::y4m(Vec::new(), &h).unwrap();
    w.write_frame(&[1, 2, 3, 4]).unwrap();
    w.write_frame(&[5, 6, 7, 8]).unwrap();
    let out = w.finish().unwrap();
    let want = b"YUV4MPEG2 W2 H1 F25:1 A1:1 C420 XCOLORRANGE=FULL\nFRAME\n\x01\x02\x03\x04FRAME\n\x05\x06\x07\x08";
    assert_eq!(out, want);
    let (mut r, back) = FrameReader::y4m(Cursor::new(out), Vec::new()).unwrap();
    assert_eq!((back, read_all(&mut r).0), (h.clone(), vec![vec![1, 2, 3, 4], vec![5, 6, 7, 8]]));
    assert_eq!(FrameWriter::y4m(Vec::new(), &h).unwrap().finish().unwrap(), h.to_line().as_bytes());
    let big = vec![9u8; BUF_CAPACITY + 3];
    let mut w = FrameWriter::raw(Vec::new());
    w.write_frame(&[1, 2]).unwrap();
    w.write_frame(&big).unwrap();
    assert_eq!(w.finish().unwrap(), [&[1, 2][..], &big].concat());
}

#[test]
fn sniffs() {
    let sniffed = |data: &[u8]| sniff(&mut Trickle(data.to_vec(), 0, 0)).unwrap();
    assert_eq!(sniffed(b"YUV4MPEG2 W2 H2\n"), (true, MAGIC.to_vec()));
    assert_eq!(sniffed(b"YUV4MPEG2_W2"), (false, b"YUV4MPEG2_".to_vec()));
    assert_eq!(sniffed(&(0..12).collect::<Vec<u8>>()), (false, (0..10).collect()));
    assert_eq!(sniffed(b"YUV4MPEG2"), (false, b"YUV4MPEG2".to_vec()));
    assert_eq!(sniffed(b""), (false, vec![]));
    let mut rest = Cursor::new(b"YUV4MPEG2 W2 H2\n".to_vec());
    assert!(sniff(&mut rest).unwrap().0);
    assert_eq!(rest.position(), 10, "reads no more than 10 bytes");
}
