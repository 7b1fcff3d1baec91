//! The ring of slots as a pure state machine: which slot a frame takes, its
//! timeline value, what is in flight, back-pressure, retirement and the
//! bounded history of finished frames' times. No FFI (Vulkan handles are only
//! carried as data): unit-tested without a GPU.

use std::collections::VecDeque;
use std::time::Instant;

use ash::vk;

use crate::context::plan::{PostBatch, Route, Signaller};
use crate::context::sync::FrameStats;

/// Finished frames whose times are kept for `wait` (older ones are forgotten:
/// a render loop that never waits on the host must not grow memory).
pub(crate) const HISTORY: usize = 64;

/// A frame on its way through a slot.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    pub(crate) value: u64,
    /// When the frame's first tile was submitted (this one's, untiled).
    pub(crate) frame_submitted: Instant,
    /// The tile's index in its frame, and the frame's tiles (0, 1 untiled).
    pub(crate) tile: (usize, usize),
    /// Registry keys of the frame's input and output (kept alive while in flight).
    pub(crate) input: u32,
    pub(crate) output: u32,
    /// Registry keys of the frame's extra inputs and outputs.
    pub(crate) extras: Vec<u32>,
    pub(crate) host_infer_ms: f64,
    pub(crate) enqueue_ms: f64,
    /// The post pass is recorded but not yet submitted (post waits on the host).
    pub(crate) post_pending: bool,
    /// How the frame's input and output sides were converted.
    pub(crate) routes: (Route, Route),
    /// The Vulkan post batch the plan asked for (submitted later when post waits on the host).
    pub(crate) post_batch: Option<PostBatch>,
    /// The frame's recorded post passes (plain handles, submitted later when post waits on the host).
    pub(crate) post_cmds: Vec<vk::CommandBuffer>,
    /// What the post pass waits for besides the model (a plain handle and value).
    pub(crate) output_free: Vec<(vk::Semaphore, u64)>,
    /// The caller's timelines the post batch signals with "output ready".
    pub(crate) ready_signals: Vec<(vk::Semaphore, u64)>,
    /// Whether the post pass was submitted (with the slot's second fence).
    pub(crate) post_fenced: bool,
    /// Whether the first batch was submitted (with the slot's first fence): not
    /// on the CUDA route when the frame waits for nothing of the caller's.
    pub(crate) first_fenced: bool,
}

/// Where a ticket's frame is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Status {
    /// In flight in this slot.
    InFlight(usize),
    /// Retired; its times, when still kept.
    Retired(Option<FrameStats>),
    /// Never submitted by this ring.
    Unknown,
}

/// The ring's bookkeeping.
#[derive(Debug)]
pub(crate) struct Ring {
    slots: Vec<Option<InFlight>>,
    next_slot: usize,
    next_value: u64,
    skipped: u64,
    history: VecDeque<FrameStats>,
    /// The times of a tiled frame's tiles retired so far, summed.
    tiles_done: Option<FrameStats>,
    /// Who signalled input consumed / output ready for the last submitted frame.
    last: Option<(Signaller, Signaller)>,
}

impl Ring {
    /// A ring of `n` slots (at least one); values start at 1.
    pub(crate) fn new(n: usize) -> Self {
        Self {
            slots: vec![None; n.max(1)],
            next_slot: 0,
            next_value: 1,
            skipped: 0,
            history: VecDeque::with_capacity(HISTORY),
            tiles_done: None,
            last: None,
        }
    }

    /// Slots in the ring.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The slot the next frame goes to.
    pub(crate) fn next_slot(&self) -> usize {
        self.next_slot
    }

    /// The frame in slot `i`, if any.
    pub(crate) fn slot(&self, i: usize) -> Option<&InFlight> {
        self.slots.get(i).and_then(Option::as_ref)
    }

    /// The frame in slot `i`, writable.
    pub(crate) fn slot_mut(&mut self, i: usize) -> Option<&mut InFlight> {
        self.slots.get_mut(i).and_then(Option::as_mut)
    }

    /// Frames in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// (value, slot) of every frame in flight, oldest first.
    pub(crate) fn in_flight_ordered(&self) -> Vec<(u64, usize)> {
        let mut v: Vec<(u64, usize)> =
            self.slots.iter().enumerate().filter_map(|(i, s)| s.as_ref().map(|f| (f.value, i))).collect();
        v.sort_unstable();
        v
    }

    /// The value the next frame will get.
    pub(crate) fn next_value(&self) -> u64 {
        self.next_value
    }

    /// Takes the next timeline value. A value is used once: it is taken before
    /// anything is recorded, so that a frame failing half-way never makes a
    /// later one signal the same value again.
    pub(crate) fn take_value(&mut self) -> u64 {
        let v = self.next_value;
        self.next_value += 1;
        v
    }

    /// Puts a frame into the next slot (which must be free) and advances.
    pub(crate) fn occupy(&mut self, frame: InFlight, signallers: (Signaller, Signaller)) {
        let i = self.next_slot;
        debug_assert!(self.slots[i].is_none(), "slot {i} is busy");
        self.slots[i] = Some(frame);
        self.last = Some(signallers);
        self.next_slot = (i + 1) % self.slots.len();
    }

    /// Whether a frame signalled by `signallers` must wait for every frame in
    /// flight first: a timeline only rises, so when the agent that signals it
    /// changes (a Vulkan pass after the engine, or the reverse), the later
    /// agent may not get ahead of the earlier one.
    pub(crate) fn must_drain(&self, signallers: (Signaller, Signaller)) -> bool {
        self.in_flight() > 0 && self.last.is_some_and(|last| last != signallers)
    }

    /// Counts a frame dropped by the skip policy.
    pub(crate) fn skip(&mut self) {
        self.skipped += 1;
    }

    /// Frames dropped so far.
    pub(crate) fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Frees slot `i` and records its frame's times; a tiled frame's once its
    /// last tile retires, with the passes' and the model's times summed over its tiles.
    pub(crate) fn retire(&mut self, i: usize, stats: FrameStats) -> Option<InFlight> {
        let frame = self.slots.get_mut(i)?.take();
        let (index, tiles) = frame.as_ref().map_or((0, 1), |f| f.tile);
        let stats = if tiles > 1 {
            let sum = match self.tiles_done.take() {
                Some(s) if index > 0 => FrameStats {
                    pre_ms: s.pre_ms + stats.pre_ms,
                    infer_ms: s.infer_ms + stats.infer_ms,
                    post_ms: s.post_ms + stats.post_ms,
                    enqueue_ms: s.enqueue_ms + stats.enqueue_ms,
                    ..stats
                },
                _ => stats,
            };
            if index + 1 < tiles {
                self.tiles_done = Some(sum);
                return frame;
            }
            sum
        } else {
            stats
        };
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(stats);
        frame
    }

    /// Where the frame of timeline value `value` is.
    pub(crate) fn status(&self, value: u64) -> Status {
        if value == 0 || value >= self.next_value {
            return Status::Unknown;
        }
        if let Some(i) = self.slots.iter().position(|s| s.as_ref().is_some_and(|f| f.value == value)) {
            return Status::InFlight(i);
        }
        Status::Retired(self.history.iter().find(|s| s.ticket == value).copied())
    }

    /// The newest frame in flight that uses registry key `key`, if any.
    pub(crate) fn last_use(&self, key: u32) -> Option<u64> {
        self.slots
            .iter()
            .flatten()
            .filter(|f| f.input == key || f.output == key || f.extras.contains(&key))
            .map(|f| f.value)
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(value: u64, input: u32, output: u32) -> InFlight {
        InFlight {
            value,
            frame_submitted: Instant::now(),
            tile: (0, 1),
            input,
            output,
            extras: Vec::new(),
            host_infer_ms: f64::NAN,
            enqueue_ms: 0.0,
            post_pending: false,
            routes: (Route::Vulkan, Route::Vulkan),
            post_batch: None,
            post_cmds: Vec::new(),
            output_free: Vec::new(),
            ready_signals: Vec::new(),
            post_fenced: false,
            first_fenced: true,
        }
    }

    fn stats(ticket: u64, slot: usize) -> FrameStats {
        FrameStats { slot, infer_ms: ticket as f64, ..FrameStats::forgotten(ticket) }
    }

    const PASSES: (Signaller, Signaller) = (Signaller::Vulkan, Signaller::Vulkan);

    #[test]
    fn slots_rotate_and_values_rise() {
        let mut r = Ring::new(3);
        let mut seen = Vec::new();
        for _ in 0..7 {
            let i = r.next_slot();
            if r.slot(i).is_some() {
                let v = r.slot(i).map(|f| f.value).unwrap_or(0);
                r.retire(i, stats(v, i));
            }
            let v = r.take_value();
            r.occupy(frame(v, 1, 2), PASSES);
            seen.push((v, i));
        }
        assert_eq!(seen, [(1, 0), (2, 1), (3, 2), (4, 0), (5, 1), (6, 2), (7, 0)]);
        assert_eq!(r.in_flight(), 3);
        assert_eq!(r.in_flight_ordered(), [(5, 1), (6, 2), (7, 0)]);
    }

    #[test]
    fn a_failed_frame_never_reuses_its_value() {
        let mut r = Ring::new(2);
        let lost = r.take_value(); // recording failed: nothing occupies the slot
        let v = r.take_value();
        assert_eq!((lost, v), (1, 2));
        r.occupy(frame(v, 1, 2), PASSES);
        assert_eq!(r.status(1), Status::Retired(None), "a lost value reads as done, with no times");
        assert_eq!(r.status(2), Status::InFlight(0));
        assert_eq!(r.status(3), Status::Unknown);
        assert_eq!(r.status(0), Status::Unknown);
    }

    #[test]
    fn history_is_bounded() {
        let mut r = Ring::new(1);
        for _ in 0..(HISTORY as u64 + 10) {
            let v = r.take_value();
            r.occupy(frame(v, 1, 2), PASSES);
            r.retire(0, stats(v, 0));
        }
        let last = HISTORY as u64 + 10;
        assert!(matches!(r.status(last), Status::Retired(Some(s)) if s.ticket == last && s.infer_ms == last as f64));
        assert_eq!(r.status(5), Status::Retired(None), "old frames are forgotten, not kept forever");
        assert_eq!(r.history.len(), HISTORY);
    }

    #[test]
    fn registrations_in_use_are_known() {
        let mut r = Ring::new(3);
        for (k, (i, o)) in [(10, 20), (11, 20), (10, 21)].into_iter().enumerate() {
            let v = r.take_value();
            assert_eq!(v, k as u64 + 1);
            r.occupy(frame(v, i, o), PASSES);
        }
        assert_eq!(r.last_use(10), Some(3));
        assert_eq!(r.last_use(20), Some(2));
        assert_eq!(r.last_use(21), Some(3));
        assert_eq!(r.last_use(12), None);
        r.retire(2, stats(3, 2));
        assert_eq!(r.last_use(10), Some(1));
        assert_eq!(r.last_use(21), None);
    }

    #[test]
    fn a_change_of_signaller_drains_first() {
        let mut r = Ring::new(2);
        let direct = (Signaller::Engine, Signaller::Engine);
        assert!(!r.must_drain(direct), "nothing in flight");
        let v = r.take_value();
        r.occupy(frame(v, 1, 2), PASSES);
        assert!(!r.must_drain(PASSES));
        assert!(r.must_drain(direct));
        assert!(r.must_drain((Signaller::Vulkan, Signaller::Engine)));
        r.retire(0, stats(v, 0));
        assert!(!r.must_drain(direct), "drained");
    }

    #[test]
    fn skips_are_counted() {
        let mut r = Ring::new(1);
        r.skip();
        r.skip();
        assert_eq!(r.skipped(), 2);
        assert_eq!(r.next_value(), 1, "a skipped frame takes no value");
    }
}
