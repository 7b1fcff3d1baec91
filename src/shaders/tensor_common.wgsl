// Shared by every pass: the tensor's value mapping t = x·mul[c] + add[c] on
// tensor channel c, from the push constants (f32 bits in u32 fields) that the
// pre and post passes' Params structs both declare.

fn mul_of(ch: u32) -> f32 {
    return bitcast<f32>(select(select(select(p.mul3, p.mul2, ch == 2u), p.mul1, ch == 1u), p.mul0, ch == 0u));
}

fn add_of(ch: u32) -> f32 {
    return bitcast<f32>(select(select(select(p.add3, p.add2, ch == 2u), p.add1, ch == 1u), p.add0, ch == 0u));
}
