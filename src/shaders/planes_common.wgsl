// The planar passes' shared part: where plane k's row y starts in its buffer, in
// 32-bit words (planes 0, 1 and 2 hold R, G and B; one plane is given three times).

fn plane_row(k: u32, y: u32) -> u32 {
    if k == 1u {
        return p.plane1 + y * p.pitch1;
    }
    if k == 2u {
        return p.plane2 + y * p.pitch2;
    }
    return p.plane0 + y * p.pitch;
}
