//! Unit tests of the tune module (helpers shared with its cache's tests).

use super::*;

pub(super) fn key() -> TuneKey {
    TuneKey::from_values(
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "cuda",
        "73ca0102-0304-0506-0708-090a0b0c0d77",
        "NVIDIA H200",
        "NVIDIA 580.95.05",
        "1.31.1",
        (960, 540),
    )
}

pub(super) fn entry(key: TuneKey, spin_wait: bool) -> TuneEntry {
    let fast = TunedOptions { spin_wait, ..TunedOptions::from_tuning(&Tuning::default()) };
    let nchw = TunedOptions { cuda: fast.cuda.with_prefer_nhwc(false).with_post_wait(PostWait::Host), ..fast };
    let candidates = vec![
        Candidate::measured(nchw, nchw, 5.8, 170.5),
        Candidate::measured(fast, TunedOptions { cuda: fast.cuda.with_cuda_graph(false), ..fast }, 3.36, 297.25),
        Candidate::failed(fast, None, "cuDNN refused it: \"quoted\"\nand a second line"),
    ];
    TuneEntry::from_candidates(key, candidates, 100, 10).expect("a candidate ran")
}

#[test]
fn the_rounds_stay_within_a_dozen_contexts_and_never_repeat() {
    for cuda in [true, false] {
        let first = first_round(cuda);
        for best in &first {
            let second = second_round(cuda, best);
            let all: Vec<_> = first.iter().chain(&second).collect();
            assert!(all.len() <= 12, "{} candidates", all.len());
            for (i, a) in all.iter().enumerate() {
                assert!(all[i + 1..].iter().all(|b| b != a), "{a} twice");
                // Never the fused bias without NHWC kernels: the builder refuses it.
                let (p, h) = (&a.cuda.provider, &a.cuda.handover);
                assert!(!p.fuse_conv_bias || p.prefer_nhwc, "{a}");
                // Off CUDA the CUDA options are not in effect: each candidate asks for them off.
                assert!(cuda || !(p.prefer_nhwc || p.fuse_conv_bias || p.cuda_graph || h.cuda_passes), "{a}");
            }
        }
    }
    let cuda = first_round(true);
    assert_eq!(
        cuda.iter().filter(|o| !o.cuda.handover.cuda_passes).count(),
        1,
        "one with the Vulkan passes, for the record"
    );
    assert!(cuda.iter().all(|o| o.cuda.handover.post_wait == PostWait::Gpu && !o.spin_wait));
    let second = second_round(true, &cuda[2]);
    assert!(second.iter().any(|o| o.cuda.handover.post_wait == PostWait::Host && o.spin_wait));
    assert!(
        second
            .iter()
            .all(|o| o.cuda.provider.prefer_nhwc && !o.cuda.provider.fuse_conv_bias && o.cuda.provider.cuda_graph)
    );
}

#[test]
fn the_winner_is_the_fastest_pipelined_ties_going_to_the_lower_latency() {
    let o = TunedOptions::from_tuning(&Tuning::default());
    let m = |sync: f64, fps: f64| Candidate::measured(o, o, sync, fps);
    assert_eq!(choose(&[m(3.0, 100.0), m(2.0, 200.0)]), Some(1));
    // Within 1 % of the best: tied; the lower synchronous median wins.
    assert_eq!(choose(&[m(3.0, 200.0), m(2.0, 198.5)]), Some(1));
    // Beyond it: throughput wins whatever the latency.
    assert_eq!(choose(&[m(3.0, 200.0), m(2.0, 197.0)]), Some(0));
    // Equal in both: the earlier.
    assert_eq!(choose(&[m(2.0, 200.0), m(2.0, 200.0)]), Some(0));
    // Failures and missing numbers are never chosen.
    let failed = Candidate { ok: false, ..m(1.0, 500.0) };
    assert_eq!(choose(&[failed, m(f64::NAN, 400.0), m(3.0, 100.0)]), Some(2));
    assert_eq!(choose(&[]), None);
    assert!(TuneEntry::from_candidates(key(), vec![Candidate::failed(o, None, "no")], 1, 0).is_none());
}

#[test]
fn apply_replaces_the_chosen_fields_only() {
    let cuda = CudaOptions::default().with_side_stream_wait(true);
    let mine = Tuning { gpu_timestamps: false, cuda, ..Tuning::default() };
    let chosen = CudaOptions::default()
        .with_prefer_nhwc(false)
        .with_cuda_graph(false)
        .with_cuda_passes(false)
        .with_post_wait(PostWait::Host);
    let options = TunedOptions { cuda: chosen, spin_wait: true };
    let tuned = apply(mine, &options);
    assert!(TunedOptions::from_tuning(&tuned).differences(&options).is_empty());
    assert_eq!(
        (tuned.gpu_timestamps, tuned.cuda.handover.side_stream_wait, tuned.cuda.provider.conv_search),
        (false, true, mine.cuda.provider.conv_search)
    );
}

#[test]
fn times_read_as_utc() {
    assert_eq!(utc_text(0), "1970-01-01T00:00:00Z");
    assert_eq!(utc_text(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(utc_text(1_796_306_709), "2026-12-03T14:05:09Z");
}
