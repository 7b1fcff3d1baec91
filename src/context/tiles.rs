//! Tiling: a frame larger than the model (or than a memory budget) runs as
//! tiles of one size, each with a halo of `overlap` pixels of context, through
//! the ring like frames. The post pass blends each tile into the output over
//! the tiles before it (left and above), with weights that ramp across the
//! shared strip, so seams are smooth; with an overlap of at least the model's
//! receptive radius the tiles agree there and the result equals the untiled
//! one. Pure arithmetic, no FFI: unit-tested here.

use serde::Serialize;

use crate::error::{Error, Result};

/// How a context cuts frames into tiles ([`ContextBuilder::tiling`](crate::ContextBuilder::tiling)).
///
/// `tile` is the model's input size per tile, halo included; neighbouring
/// tiles share at least `3 × overlap` pixels: each side's outer `overlap` is
/// left to the other, and the seam is blended across the middle.
///
/// ```
/// use neural_frame::Tiling;
///
/// let t = Tiling::new(512, 512, 24)?; // 512×512 tiles, 24 pixels of context on each side
/// assert_eq!(t.step(), (440, 440)); // tiles start 440 pixels apart
/// assert!(Tiling::new(40, 40, 24).is_err()); // smaller than twice the overlap
/// assert!(Tiling::new(72, 72, 24).is_err()); // no larger than three times: no room to blend
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Tiling {
    /// The tile's width and height in input pixels, the halo included.
    pub tile: (u32, u32),
    /// Pixels of context on each side of a tile's core, shared with its neighbours.
    pub overlap: u32,
}

/// The default overlap (of `--tile` and of automatic tiling): above the
/// receptive radius of realesr-animevideov3 (18 convolutions 3×3: 18 pixels).
pub const DEFAULT_TILE_OVERLAP: u32 = 24;

impl Tiling {
    /// Tiles of `width × height` with `overlap` pixels of context, checked: each
    /// side must be larger than three times the overlap (a halo on each side,
    /// and as much again to blend across).
    pub fn new(width: u32, height: u32, overlap: u32) -> Result<Self> {
        let t = Self { tile: (width, height), overlap };
        t.check()?;
        Ok(t)
    }

    /// How far apart neighbouring tiles start: `tile − 3 × overlap` per axis.
    pub fn step(&self) -> (u32, u32) {
        (self.tile.0.saturating_sub(3 * self.overlap), self.tile.1.saturating_sub(3 * self.overlap))
    }

    /// Checks that each side is larger than three times the overlap (what [`new`](Self::new) checks).
    pub fn check(&self) -> Result<()> {
        let (w, h) = self.tile;
        if w == 0 || h == 0 {
            return Err(Error::InvalidArgument(format!("a tile of {w}×{h} pixels is empty")));
        }
        if self.overlap >= w || self.overlap >= h {
            return Err(Error::InvalidArgument(format!(
                "the tile overlap {} is not smaller than the tile {w}×{h}",
                self.overlap
            )));
        }
        if w <= 2 * self.overlap || h <= 2 * self.overlap {
            return Err(Error::InvalidArgument(format!(
                "a tile of {w}×{h} is not larger than twice the overlap ({}): its halos would cover it, and no \
                 pixel of it would be its own; use a larger tile or a smaller overlap",
                self.overlap
            )));
        }
        if w <= 3 * self.overlap || h <= 3 * self.overlap {
            return Err(Error::InvalidArgument(format!(
                "a tile of {w}×{h} is not larger than three times the overlap ({}): past a halo on each side, \
                 neighbours need as much again to blend across; use a larger tile or a smaller overlap",
                self.overlap
            )));
        }
        Ok(())
    }
}

/// One tile of a frame: where its input lies, and how far it shares the frame
/// with its neighbours on each side, in input pixels (0 at the frame's edges).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tile {
    pub(crate) x: u32,
    pub(crate) y: u32,
    pub(crate) blend_left: u32,
    pub(crate) blend_top: u32,
    pub(crate) blend_right: u32,
    pub(crate) blend_bottom: u32,
}

/// A frame's tiles, in raster order, and the size every one of them has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TileLayout {
    pub(crate) size: (u32, u32),
    pub(crate) tiles: Vec<Tile>,
}

/// Tile origins along one axis of `len` pixels, and each one's shared strips
/// with the previous and the next: (origin, before, after).
fn axis(len: u32, tile: u32, overlap: u32) -> (u32, Vec<(u32, u32, u32)>) {
    if len <= tile {
        return (len, vec![(0, 0, 0)]);
    }
    let step = tile - 3 * overlap;
    let mut out: Vec<(u32, u32, u32)> = Vec::new();
    let mut p = 0u32;
    loop {
        let pos = p.min(len - tile);
        let shared = out.last().map_or(0, |&(prev, ..)| prev + tile - pos);
        if let Some(last) = out.last_mut() {
            last.2 = shared;
        }
        out.push((pos, shared, 0));
        if pos + tile >= len {
            break;
        }
        p += step;
    }
    (tile, out)
}

/// The tiles of a `width × height` frame; one tile of the frame's size when
/// `tiling` is `None` or the frame fits in a tile.
pub(crate) fn layout(width: u32, height: u32, tiling: Option<Tiling>) -> TileLayout {
    let Some(t) = tiling else {
        let whole = Tile { x: 0, y: 0, blend_left: 0, blend_top: 0, blend_right: 0, blend_bottom: 0 };
        return TileLayout { size: (width, height), tiles: vec![whole] };
    };
    let (tw, xs) = axis(width, t.tile.0, t.overlap);
    let (th, ys) = axis(height, t.tile.1, t.overlap);
    let mut tiles = Vec::with_capacity(xs.len() * ys.len());
    for &(y, blend_top, blend_bottom) in &ys {
        for &(x, blend_left, blend_right) in &xs {
            tiles.push(Tile { x, y, blend_left, blend_top, blend_right, blend_bottom });
        }
    }
    TileLayout { size: (tw, th), tiles }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_the_frame_and_share_at_least_three_times_the_overlap() {
        for (w, h, tw, th, o) in
            [(1000, 700, 256, 200, 24), (37, 53, 16, 20, 3), (300, 300, 300, 300, 8), (97, 5, 32, 32, 4)]
        {
            let t = Tiling::new(tw, th, o).expect("valid");
            let l = layout(w, h, Some(t));
            let (sw, sh) = l.size;
            assert_eq!((sw, sh), (tw.min(w), th.min(h)));
            let mut covered = vec![false; (w * h) as usize];
            for tile in &l.tiles {
                assert!(tile.x + sw <= w && tile.y + sh <= h, "{tile:?} leaves the frame");
                for y in tile.y..tile.y + sh {
                    for x in tile.x..tile.x + sw {
                        covered[(y * w + x) as usize] = true;
                    }
                }
                if tile.x > 0 {
                    assert!(tile.blend_left >= 3 * o, "{tile:?}");
                }
                if tile.y > 0 {
                    assert!(tile.blend_top >= 3 * o, "{tile:?}");
                }
            }
            assert!(covered.iter().all(|c| *c), "{w}×{h} not covered by {t:?}");
        }
        let l = layout(1000, 700, Some(Tiling::new(256, 200, 24).expect("valid")));
        assert_eq!(l.tiles.len(), 6 * 5); // x: 0, 184, 368, 552, 736, 744; y: 0, 128, 256, 384, 500
        assert_eq!(l.tiles[1], Tile { x: 184, y: 0, blend_left: 72, blend_top: 0, blend_right: 72, blend_bottom: 72 });
        assert_eq!((l.tiles[5].blend_right, l.tiles[29].blend_bottom), (0, 0));
        assert_eq!(l.tiles[5].x, 1000 - 256);
        assert_eq!(layout(64, 48, None).tiles.len(), 1);
    }

    #[test]
    fn bad_tilings_are_refused() {
        for (w, h, o, needle) in [
            (0, 16, 0, "empty"),
            (16, 16, 16, "not smaller than the tile"),
            (32, 48, 16, "twice the overlap"),
            (33, 31, 16, "twice the overlap"),
            (48, 60, 16, "three times the overlap"),
        ] {
            let e = Tiling::new(w, h, o).expect_err("refused");
            assert!(e.to_string().contains(needle), "{e}");
        }
    }
}
