//! Independent references for `neural-frame stream` (docs/stream.md): a YUV4MPEG2
//! writer and parser, the YUV ↔ RGB conversions computed in f64 straight from the
//! document's formulas, and ONNX Runtime's CPU run of the model on every frame.
//! Nothing here comes from the CLI's code.

use std::path::PathBuf;

use half::f16;
use neural_frame::{Backend, ColorOrder, Element, ModelContract, NeuralFrameContext, Normalization};

use super::pipeline::{element_index, expected_image, picture, reference_output};

/// One frame's planes (Y, then U and V, then A), one `u16` a sample at every depth.
pub type Planes = Vec<Vec<u16>>;

/// What a y4m `C` tag means: subsampling, planes, depth and chroma siting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    /// Luma pixels a chroma sample spans horizontally (1 or 2).
    pub sub_x: u32,
    /// Luma pixels a chroma sample spans vertically (1 or 2).
    pub sub_y: u32,
    /// 1 (mono), 3 (Y, U, V) or 4 (Y, U, V, A).
    pub planes: usize,
    /// Bits a sample.
    pub depth: u32,
    /// The siting offset `o` on each axis: ½ centred, 0 co-sited.
    pub off_x: f64,
    /// The siting offset `o` vertically.
    pub off_y: f64,
}

impl Layout {
    /// The layout of a `C` tag (docs/stream.md's table).
    pub fn of(tag: &str) -> Layout {
        let c = |sub_x, sub_y, planes, depth, off_x, off_y| Layout { sub_x, sub_y, planes, depth, off_x, off_y };
        match tag {
            "420jpeg" | "420" => c(2, 2, 3, 8, 0.5, 0.5),
            "420mpeg2" => c(2, 2, 3, 8, 0.0, 0.5),
            "420paldv" => c(2, 2, 3, 8, 0.0, 0.0),
            "422" => c(2, 1, 3, 8, 0.5, 0.5),
            "444" => c(1, 1, 3, 8, 0.5, 0.5),
            "444alpha" => c(1, 1, 4, 8, 0.5, 0.5),
            "mono" => c(1, 1, 1, 8, 0.5, 0.5),
            _ => {
                if let Some(d) = tag.strip_prefix("mono") {
                    return c(1, 1, 1, d.parse().expect("mono depth"), 0.5, 0.5);
                }
                let (base, d) = tag.split_once('p').unwrap_or_else(|| panic!("unknown C tag {tag}"));
                let depth = d.parse().unwrap_or_else(|_| panic!("unknown C tag {tag}"));
                match base {
                    "420" => c(2, 2, 3, depth, 0.5, 0.5),
                    "422" => c(2, 1, 3, depth, 0.5, 0.5),
                    "444" => c(1, 1, 3, depth, 0.5, 0.5),
                    _ => panic!("unknown C tag {tag}"),
                }
            }
        }
    }

    /// Width and height of plane `p` for a `w`×`h` frame.
    pub fn plane_size(&self, w: u32, h: u32, p: usize) -> (u32, u32) {
        if p == 1 || p == 2 { (w.div_ceil(self.sub_x), h.div_ceil(self.sub_y)) } else { (w, h) }
    }

    /// Bytes a sample.
    pub fn sample_bytes(&self) -> usize {
        if self.depth > 8 { 2 } else { 1 }
    }

    /// Bytes of one frame's planes (without its `FRAME` line).
    pub fn frame_bytes(&self, w: u32, h: u32) -> usize {
        (0..self.planes).map(|p| self.plane_size(w, h, p)).map(|(a, b)| (a * b) as usize).sum::<usize>()
            * self.sample_bytes()
    }

    /// The largest sample, 2ᴺ − 1.
    pub fn max(&self) -> f64 {
        ((1u64 << self.depth) - 1) as f64
    }
}

/// A YUV matrix and range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conv {
    /// Kr.
    pub kr: f64,
    /// Kb.
    pub kb: f64,
    /// Full range (else limited).
    pub full: bool,
}

impl Conv {
    /// `matrix` is `bt601`, `bt709` or `bt2020`.
    pub fn new(matrix: &str, full: bool) -> Conv {
        let (kr, kb) = match matrix {
            "bt601" => (0.299, 0.114),
            "bt709" => (0.2126, 0.0722),
            "bt2020" => (0.2627, 0.0593),
            other => panic!("unknown matrix {other}"),
        };
        Conv { kr, kb, full }
    }
}

/// A y4m clip: its size, layout and frames.
#[derive(Debug, Clone)]
pub struct Clip {
    /// Frame width.
    pub width: u32,
    /// Frame height.
    pub height: u32,
    /// What the `C` tag says.
    pub layout: Layout,
    /// The frames' planes.
    pub frames: Vec<Planes>,
}

/// xorshift32.
fn next(state: &mut u32) -> u32 {
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    *state
}

impl Clip {
    /// `n` different frames: most are test pictures (`picture(w, h, seed + 7·i)`, alpha
    /// included) converted with `conv`; every fifth is noise over the whole sample range
    /// (out-of-range luma and out-of-gamut colours, which the conversion must clamp).
    pub fn generate(tag: &str, width: u32, height: u32, n: usize, conv: Conv, seed: u32) -> Clip {
        let layout = Layout::of(tag);
        let frames = (0..n as u32)
            .map(|i| {
                let seed = seed + 7 * i;
                if i % 5 == 4 {
                    let mut state = seed.wrapping_mul(747796405) | 1;
                    (0..layout.planes)
                        .map(|p| {
                            let (pw, ph) = layout.plane_size(width, height, p);
                            (0..pw * ph).map(|_| (next(&mut state) % (layout.max() as u32 + 1)) as u16).collect()
                        })
                        .collect()
                } else {
                    let px = from_rgba8(&picture(width, height, seed));
                    from_rgb(&px, layout, width, height, conv)
                }
            })
            .collect();
        Clip { width, height, layout, frames }
    }

    /// The y4m stream in pieces: the header line (`YUV4MPEG2 W.. H.. ` + `params`), then
    /// one piece a frame (`FRAME\n` and its planes).
    pub fn y4m_pieces(&self, params: &str) -> Vec<Vec<u8>> {
        let mut pieces = vec![format!("YUV4MPEG2 W{} H{} {params}\n", self.width, self.height).into_bytes()];
        for f in &self.frames {
            let mut b = b"FRAME\n".to_vec();
            b.extend(encode(f, self.layout));
            pieces.push(b);
        }
        pieces
    }

    /// The whole y4m stream.
    pub fn y4m(&self, params: &str) -> Vec<u8> {
        self.y4m_pieces(params).concat()
    }
}

/// A frame's planes as the stream's bytes (16-bit little-endian words above 8 bits).
pub fn encode(planes: &Planes, l: Layout) -> Vec<u8> {
    let mut out = Vec::new();
    for p in planes {
        for &v in p {
            if l.sample_bytes() == 2 {
                out.extend(v.to_le_bytes());
            } else {
                out.push(u8::try_from(v).expect("8-bit sample"));
            }
        }
    }
    out
}

/// Planes from a frame's bytes.
pub fn decode(bytes: &[u8], l: Layout, w: u32, h: u32) -> Planes {
    let mut at = 0;
    let mut planes = Vec::new();
    for p in 0..l.planes {
        let (pw, ph) = l.plane_size(w, h, p);
        let n = (pw * ph) as usize * l.sample_bytes();
        let b = &bytes[at..at + n];
        at += n;
        planes.push(if l.sample_bytes() == 2 {
            b.chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
        } else {
            b.iter().map(|v| *v as u16).collect()
        });
    }
    planes
}

/// Where a parse stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// At the end, after a whole frame.
    End,
    /// In a frame cut short: this many bytes of it were there.
    Partial(usize),
    /// At bytes that are not a `FRAME` line (what they start with).
    Bad(String),
}

/// A parsed y4m stream.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The header's parameters, `YUV4MPEG2` left out.
    pub tokens: Vec<String>,
    /// The whole frames.
    pub clip: Clip,
    /// What followed the last whole frame.
    pub stop: Stop,
}

impl Parsed {
    /// The header parameter starting with `key`, without it.
    pub fn param(&self, key: char) -> Option<&str> {
        self.tokens.iter().find_map(|t| t.strip_prefix(key))
    }
}

/// Parses a y4m stream as far as it is well formed; Err when it has no header.
pub fn parse(bytes: &[u8]) -> Result<Parsed, String> {
    let nl = bytes.iter().position(|b| *b == b'\n').ok_or("no header line")?;
    let line = std::str::from_utf8(&bytes[..nl]).map_err(|e| format!("header: {e}"))?;
    let mut words = line.split(' ');
    if words.next() != Some("YUV4MPEG2") {
        return Err(format!("not y4m: {line:?}"));
    }
    let tokens: Vec<String> = words.filter(|t| !t.is_empty()).map(str::to_string).collect();
    let num = |k: char| -> Result<u32, String> {
        let t = tokens.iter().find_map(|t| t.strip_prefix(k)).ok_or(format!("no {k} in {line:?}"))?;
        t.parse().map_err(|e| format!("{k}{t}: {e}"))
    };
    let (width, height) = (num('W')?, num('H')?);
    let tag = tokens.iter().find_map(|t| t.strip_prefix('C')).unwrap_or("420jpeg");
    let layout = Layout::of(tag);
    let size = layout.frame_bytes(width, height);
    let mut at = nl + 1;
    let mut frames = Vec::new();
    let stop = loop {
        let rest = &bytes[at..];
        if rest.is_empty() {
            break Stop::End;
        }
        if !rest.starts_with(b"FRAME") {
            if b"FRAME".starts_with(rest) {
                break Stop::Partial(rest.len());
            }
            break Stop::Bad(String::from_utf8_lossy(&rest[..rest.len().min(16)]).into_owned());
        }
        let Some(end) = rest.iter().position(|b| *b == b'\n') else { break Stop::Partial(rest.len()) };
        if rest.len() < end + 1 + size {
            break Stop::Partial(rest.len());
        }
        frames.push(decode(&rest[end + 1..end + 1 + size], layout, width, height));
        at += end + 1 + size;
    };
    Ok(Parsed { tokens, clip: Clip { width, height, layout, frames }, stop })
}

/// RGBA in [0, 1] from the frame's samples: docs/stream.md's **In** formulas
/// (bilinear chroma at (x − o)/2, clamped to the plane; R, G, B clamped to [0, 1]).
pub fn to_rgb(planes: &Planes, l: Layout, w: u32, h: u32, c: Conv) -> Vec<[f64; 4]> {
    let m = l.max();
    let s = (1u64 << l.depth) as f64 / 256.0;
    let mid = (1u64 << (l.depth - 1)) as f64;
    let luma = |v: u16| if c.full { v as f64 / m } else { (v as f64 - 16.0 * s) / (219.0 * s) };
    let chroma = |v: f64| if c.full { (v - mid) / m } else { (v - 128.0 * s) / (224.0 * s) };
    let kg = 1.0 - c.kr - c.kb;
    let mut out = Vec::with_capacity((w * h) as usize);
    for y in 0..h {
        for x in 0..w {
            let i = (y * w + x) as usize;
            let yp = luma(planes[0][i]);
            let (cb, cr) = if l.planes >= 3 {
                (chroma(upsample(&planes[1], l, w, h, x, y)), chroma(upsample(&planes[2], l, w, h, x, y)))
            } else {
                (0.0, 0.0)
            };
            let r = yp + 2.0 * (1.0 - c.kr) * cr;
            let b = yp + 2.0 * (1.0 - c.kb) * cb;
            let g = (yp - c.kr * r - c.kb * b) / kg;
            let a = if l.planes == 4 { planes[3][i] as f64 / m } else { 1.0 };
            out.push([r.clamp(0.0, 1.0), g.clamp(0.0, 1.0), b.clamp(0.0, 1.0), a]);
        }
    }
    out
}

/// The chroma plane's value at luma pixel (x, y), bilinear.
fn upsample(plane: &[u16], l: Layout, w: u32, h: u32, x: u32, y: u32) -> f64 {
    let (cw, ch) = l.plane_size(w, h, 1);
    let coord = |p: u32, sub: u32, off: f64, size: u32| {
        if sub == 1 { p as f64 } else { ((p as f64 - off) / sub as f64).clamp(0.0, (size - 1) as f64) }
    };
    let (fx, fy) = (coord(x, l.sub_x, l.off_x, cw), coord(y, l.sub_y, l.off_y, ch));
    let (x0, y0) = (fx.floor() as u32, fy.floor() as u32);
    let (x1, y1) = ((x0 + 1).min(cw - 1), (y0 + 1).min(ch - 1));
    let (tx, ty) = (fx - x0 as f64, fy - y0 as f64);
    let at = |x: u32, y: u32| plane[(y * cw + x) as usize] as f64;
    let top = at(x0, y0) * (1.0 - tx) + at(x1, y0) * tx;
    let bottom = at(x0, y1) * (1.0 - tx) + at(x1, y1) * tx;
    top * (1.0 - ty) + bottom * ty
}

/// The frame's samples from RGBA: docs/stream.md's **Out** formulas (chroma from the
/// mean of the pixels a sample covers inside the frame; rounded, clamped to [0, M]).
pub fn from_rgb(px: &[[f64; 4]], l: Layout, w: u32, h: u32, c: Conv) -> Planes {
    let m = l.max();
    let s = (1u64 << l.depth) as f64 / 256.0;
    let mid = (1u64 << (l.depth - 1)) as f64;
    let kg = 1.0 - c.kr - c.kb;
    let q = |v: f64| v.round().clamp(0.0, m) as u16;
    let luma = |yp: f64| q(if c.full { m * yp } else { 16.0 * s + 219.0 * s * yp });
    let chroma = |v: f64| q(if c.full { mid + m * v } else { 128.0 * s + 224.0 * s * v });
    let mut planes = vec![px.iter().map(|p| luma(c.kr * p[0] + kg * p[1] + c.kb * p[2])).collect::<Vec<_>>()];
    if l.planes >= 3 {
        let (cw, ch) = l.plane_size(w, h, 1);
        let (mut u, mut v) = (Vec::new(), Vec::new());
        for j in 0..ch {
            for i in 0..cw {
                let (mut sum, mut n) = ([0f64; 3], 0.0);
                for y in j * l.sub_y..((j + 1) * l.sub_y).min(h) {
                    for x in i * l.sub_x..((i + 1) * l.sub_x).min(w) {
                        let p = px[(y * w + x) as usize];
                        (0..3).for_each(|k| sum[k] += p[k]);
                        n += 1.0;
                    }
                }
                let [r, g, b] = sum.map(|v| v / n);
                let yb = c.kr * r + kg * g + c.kb * b;
                u.push(chroma((b - yb) / (2.0 * (1.0 - c.kb))));
                v.push(chroma((r - yb) / (2.0 * (1.0 - c.kr))));
            }
        }
        planes.push(u);
        planes.push(v);
    }
    if l.planes == 4 {
        planes.push(px.iter().map(|p| q(m * p[3])).collect());
    }
    planes
}

/// RGBA8 from RGBA in [0, 1]: round(255·c).
pub fn to_rgba8(px: &[[f64; 4]]) -> Vec<u8> {
    px.iter().flat_map(|p| p.map(|c| (255.0 * c).round().clamp(0.0, 255.0) as u8)).collect()
}

/// RGBA in [0, 1] from RGBA8.
pub fn from_rgba8(rgba: &[u8]) -> Vec<[f64; 4]> {
    rgba.chunks(4).map(|p| [0, 1, 2, 3].map(|k| p[k] as f64 / 255.0)).collect()
}

/// Each channel rounded to a half float (an RGBA16F texel).
pub fn to_half(px: &[[f64; 4]]) -> Vec<[f64; 4]> {
    px.iter().map(|p| p.map(|c| f16::from_f64(c).to_f64())).collect()
}

/// The model, its contract (read from a CPU context, as the CLI's) and ONNX Runtime's
/// CPU run of it on host memory.
pub struct Model {
    /// The model file.
    pub path: PathBuf,
    /// What the library read from it.
    pub contract: ModelContract,
}

impl Model {
    /// The model at `path` (relative to the repository).
    pub fn new(path: &str) -> Model {
        let ctx = NeuralFrameContext::builder(path)
            .backend(Backend::Cpu)
            .frame_size(16, 16)
            .build()
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        Model { path: PathBuf::from(path), contract: ctx.contract().clone() }
    }

    /// The output size for a `w`×`h` input.
    pub fn out_size(&self, w: u32, h: u32) -> (u32, u32) {
        (w * self.contract.scale.x, h * self.contract.scale.y)
    }

    /// RGBA8 frame in, the RGBA8 frame the post pass writes out (ORT CPU + `expected_image`).
    pub fn run8(&self, rgba: &[u8], w: u32, h: u32) -> Vec<u8> {
        let tensor = reference_output(&self.path, &self.contract, rgba, w, h);
        expected_image(&self.contract, &tensor, rgba, w, h)
    }

    /// RGBA16F frame in (texels as f64), the RGBA16F frame out: the model's values as they
    /// are (no clamp), rounded to half floats, alpha 1 (the input's alpha is 1: deep
    /// streams here carry no alpha plane).
    pub fn run16(&self, px: &[[f64; 4]], w: u32, h: u32) -> Vec<[f64; 4]> {
        let (kin, kout) = (self.contract.input, self.contract.output);
        for k in [kin, kout] {
            assert!(
                k.element == Element::F32
                    && k.normalization == Normalization::Unit
                    && k.color == ColorOrder::Rgb
                    && k.channels == 3,
                "the RGBA16F reference handles f32 RGB models in [0, 1] only: {k:?}"
            );
        }
        assert!(px.iter().all(|p| p[3] == 1.0), "the RGBA16F reference assumes alpha 1");
        let plane = (w * h) as usize;
        let mut data = vec![0f32; 3 * plane];
        for (i, p) in px.iter().enumerate() {
            for ch in 0..3 {
                data[element_index(kin, plane, i, ch)] = p[ch] as f32;
            }
        }
        let env = neural_frame::ort_environment().expect("ONNX Runtime loads");
        let mut session = ort::session::Session::builder(env)
            .expect("builder")
            .commit_from_file(&self.path)
            .expect("model loads on the CPU provider");
        let shape = kin.shape(w, h).map(|d| d as usize);
        let t = ort::value::Tensor::from_array((shape, data)).expect("tensor");
        let name = self.contract.input_name.as_str();
        let out = session.run(ort::inputs![name => t]).expect("reference run");
        let v = out[self.contract.output_name.as_str()].try_extract_tensor::<f32>().expect("f32").1.to_vec();
        let (ow, oh) = self.out_size(w, h);
        let oplane = (ow * oh) as usize;
        assert_eq!(v.len(), 3 * oplane, "output tensor size");
        (0..oplane)
            .map(|i| {
                let c = |ch| f16::from_f32(v[element_index(kout, oplane, i, ch)]).to_f64();
                [c(0), c(1), c(2), 1.0]
            })
            .collect()
    }
}

/// The output frame the CLI should write for `frame` of `clip` (docs/stream.md):
/// YUV → RGB, stored as RGBA8 (8-bit) or RGBA16F (deeper), the model on ONNX Runtime's
/// CPU provider, the post pass's frame, RGB → YUV.
pub fn expected(model: &Model, clip: &Clip, frame: usize, conv: Conv) -> Planes {
    let (w, h, l) = (clip.width, clip.height, clip.layout);
    let rgb = to_rgb(&clip.frames[frame], l, w, h, conv);
    let (ow, oh) = model.out_size(w, h);
    let out = if l.depth == 8 {
        from_rgba8(&model.run8(&to_rgba8(&rgb), w, h))
    } else {
        // The RGBA16F frame holds the model's values unclamped (the library's post pass). The
        // CLI clamps R, G, B and A to [0, 1] before RGB → YUV, as an RGBA8 frame is; the Out
        // formulas of docs/stream.md clamp only the final samples: this follows the CLI.
        model.run16(&to_half(&rgb), w, h).iter().map(|p| p.map(|c| c.clamp(0.0, 1.0))).collect()
    };
    from_rgb(&out, l, ow, oh, conv)
}

/// How a frame compares with its reference: PSNR over all its samples on the 0…M scale,
/// and the largest difference with where it is.
#[derive(Debug, Clone)]
pub struct Diff {
    /// dB, infinite when equal.
    pub psnr: f64,
    /// Largest |difference|, in samples.
    pub max: u16,
    /// Plane and sample index of it.
    pub at: (usize, usize),
}

/// Compares two frames' planes sample by sample.
pub fn compare(got: &Planes, want: &Planes, l: Layout) -> Diff {
    assert_eq!(got.len(), want.len(), "plane counts differ");
    let (mut sq, mut n, mut max, mut at) = (0f64, 0usize, 0u16, (0, 0));
    for (p, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.len(), w.len(), "plane {p} sizes differ");
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            let d = a.abs_diff(*b);
            sq += (d as f64).powi(2);
            n += 1;
            if d > max {
                (max, at) = (d, (p, i));
            }
        }
    }
    let mse = sq / n as f64;
    let psnr = if mse == 0.0 { f64::INFINITY } else { 10.0 * (l.max() * l.max() / mse).log10() };
    Diff { psnr, max, at }
}
