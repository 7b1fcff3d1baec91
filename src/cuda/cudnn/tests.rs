use super::*;

fn shape() -> ConvActShape {
    ConvActShape {
        n: 1,
        c: 64,
        h: 32,
        w: 48,
        k: 64,
        r: 3,
        s: 3,
        pads: [1, 1, 1, 1],
        strides: [1, 1],
        dilations: [1, 1],
        dtype: ConvDtype::F16,
        activation: Activation::PRelu,
        bias: true,
    }
}

#[test]
fn output_hw_follows_the_conv_formula() {
    let s = shape();
    assert_eq!(s.output_hw(), (32, 48));
    let strided = ConvActShape { strides: [2, 2], ..shape() };
    assert_eq!(strided.output_hw(), (16, 24));
    let asym = ConvActShape { pads: [0, 1, 1, 0], strides: [2, 2], ..shape() };
    // (32 + 0 + 1 - 2 - 1) / 2 + 1 = 16; (48 + 1 + 0 - 2 - 1) / 2 + 1 = 24
    assert_eq!(asym.output_hw(), (16, 24));
    let asym1 = ConvActShape { pads: [0, 0, 2, 1], ..shape() };
    assert_eq!(asym1.output_hw(), (32, 47));
    let dilated = ConvActShape { dilations: [2, 2], ..shape() };
    assert_eq!(dilated.output_hw(), (30, 46));
    let dilated_padded = ConvActShape { dilations: [2, 2], pads: [2, 2, 2, 2], ..shape() };
    assert_eq!(dilated_padded.output_hw(), (32, 48));
    let one = ConvActShape { r: 1, s: 1, pads: [0; 4], ..shape() };
    assert_eq!(one.output_hw(), (32, 48));
    assert!(ConvActShape { h: 1, pads: [0; 4], ..shape() }.validate().is_err());
}

#[test]
fn keys_differ_by_alpha_dtype_activation_and_bias() {
    let base = shape();
    let keys = [
        base.key(),
        ConvActShape { dtype: ConvDtype::F32, ..shape() }.key(),
        ConvActShape { activation: Activation::None, ..shape() }.key(),
        ConvActShape { activation: Activation::Relu, ..shape() }.key(),
        ConvActShape { activation: Activation::LeakyRelu(0.1), ..shape() }.key(),
        ConvActShape { activation: Activation::LeakyRelu(0.2), ..shape() }.key(),
        ConvActShape { pads: [1, 1, 0, 0], ..shape() }.key(),
        ConvActShape { bias: false, ..shape() }.key(),
        ConvActShape { bias: false, activation: Activation::None, ..shape() }.key(),
    ];
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            assert_ne!(a, b);
        }
    }
    assert_eq!(base.key(), shape().key());
    // With a bias the key is the one plan caches already hold.
    assert_eq!(base.key(), "n1c64h32w48-k64r3s3-p1.1.1.1-st1.1-d1.1-f16-prelu");
}

#[test]
fn plans_fails_clearly_without_libcudnn() {
    if api().is_ok() {
        return; // cuDNN 9 is installed here: nothing to check without a GPU.
    }
    // SAFETY: with cuDNN absent, plans returns before using the (null) handle.
    let err = match unsafe { plans(std::ptr::null_mut(), &shape()) } {
        Ok(_) => panic!("plans succeeded without cuDNN"),
        Err(e) => e,
    };
    assert!(err.contains(LIBRARY), "{err}");
    #[cfg(not(windows))]
    assert!(err.contains("libcudnn"), "{err}");
}

fn choice(engine: i64, knobs: &[(i32, i64)]) -> Option<PlanChoice> {
    Some(PlanChoice { engine, knobs: knobs.to_vec() })
}

#[test]
fn candidates_keep_heuristics_order_without_repeats() {
    let offered = [
        // Mode A: engines 7, 3 (twice with other knobs), an unreadable config, 7 again.
        choice(7, &[(24, 1)]),
        choice(3, &[]),
        choice(3, &[(25, 0)]),
        None,
        choice(7, &[(24, 1)]),
        // Fallback: engine 3 (listed by mode A, left out), 0 and 5, 0 again.
        choice(3, &[(25, 1)]),
        choice(0, &[]),
        choice(5, &[(2, 4)]),
        choice(0, &[]),
    ];
    assert_eq!(candidate_order(&offered, 5), [0, 1, 2, 6, 7]);
    // Everything from the fallback mode when mode A offered nothing.
    assert_eq!(candidate_order(&offered[5..], 0), [0, 1, 2]);
    assert_eq!(candidate_order(&[], 0), Vec::<usize>::new());
    // A count past the end is clamped.
    assert_eq!(candidate_order(&offered[..2], 9), [0, 1]);
}

#[test]
fn finalizing_stops_after_max_candidates() {
    let mut tried = Vec::new();
    // Every third candidate fails to finalize.
    let (done, count) = first_finalized(0..30, MAX_CANDIDATES, |i| {
        tried.push(i);
        (i % 3 != 2).then_some(i * 10)
    });
    assert_eq!(done.len(), MAX_CANDIDATES);
    assert_eq!(done, [0, 10, 30, 40, 60, 70, 90, 100]);
    assert_eq!(count, 11);
    assert_eq!(tried, (0..11).collect::<Vec<_>>());
    // Fewer candidates than the bound: all tried.
    let (done, count) = first_finalized([1, 2, 3], MAX_CANDIDATES, Some);
    assert_eq!((done, count), (vec![1, 2, 3], 3));
    // None finalizing: all tried, none kept.
    let (done, count) = first_finalized(0..20, MAX_CANDIDATES, |_| None::<u8>);
    assert_eq!((done.len(), count), (0, 20));
    assert_eq!(MAX_CANDIDATES, 8);
}
