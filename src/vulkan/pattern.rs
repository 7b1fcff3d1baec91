//! The deterministic test pattern of the pre-flight checks. No unsafe.

/// RGBA8 pattern: R = x & 0xFF, G = y & 0xFF, B = (x ^ y) & 0xFF, A = 0xFF.
pub(crate) fn rgba8(width: u32, height: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(width as usize * height as usize * 4);
    for y in 0..height {
        for x in 0..width {
            out.extend_from_slice(&[(x & 0xff) as u8, (y & 0xff) as u8, ((x ^ y) & 0xff) as u8, 0xff]);
        }
    }
    out
}

/// The first differing byte of two equal-length slices, as (pixel x, pixel y, channel, expected, got).
pub(crate) fn first_difference(expected: &[u8], got: &[u8], width: u32) -> Option<(u32, u32, usize, u8, u8)> {
    if expected.len() != got.len() {
        return Some((0, 0, 0, 0, 0));
    }
    expected.iter().zip(got).position(|(a, b)| a != b).map(|i| {
        let pixel = (i / 4) as u32;
        (pixel % width, pixel / width, i % 4, expected[i], got[i])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_values() {
        let p = rgba8(300, 2);
        // pixel (257, 1): R = 257 & 255 = 1, G = 1, B = (257 ^ 1) & 255 = 0
        let i = (300 + 257) * 4;
        assert_eq!(&p[i..i + 4], &[1, 1, 0, 255]);
        assert_eq!(&p[4..8], &[1, 0, 1, 255]);
        let mut q = p.clone();
        q[i + 2] = 9;
        assert_eq!(first_difference(&p, &q, 300), Some((257, 1, 2, 0, 9)));
        assert_eq!(first_difference(&p, &p, 300), None);
    }
}
