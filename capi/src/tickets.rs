//! The tickets of a context's last frames: C holds a ticket's value, the library's `Ticket`
//! is kept here.

use std::collections::VecDeque;

use neural_frame::Ticket;

use crate::Fail;

/// The tickets of the last frames, by value. C holds a ticket's value only; the library's
/// `Ticket` is kept here. Frames retire in order and at most a ring's worth are in
/// flight, so a value older than every ticket kept (more than `keep` frames back) is a
/// retired frame.
pub(crate) struct Tickets {
    recent: VecDeque<Ticket>,
    keep: usize,
    last: u64,
}

/// A ticket the table can find, or a frame known to have retired long ago.
pub(crate) enum Found {
    Ticket(Ticket),
    Retired,
}

impl Tickets {
    pub(crate) fn new(slots: usize) -> Self {
        // More than the ring and more than the library's 64 kept times.
        let keep = slots.saturating_mul(2).max(256);
        Self { recent: VecDeque::with_capacity(keep.min(1024)), keep, last: 0 }
    }

    pub(crate) fn add(&mut self, ticket: Ticket) {
        if self.recent.len() == self.keep {
            self.recent.pop_front();
        }
        self.last = ticket.value();
        self.recent.push_back(ticket);
    }

    pub(crate) fn find(&self, value: u64) -> Result<Found, Fail> {
        if value == 0 || value > self.last {
            return Err(Fail::invalid(format!(
                "{value} is not a ticket of this context (its last is {}; 0 is a dropped frame)",
                self.last
            )));
        }
        let at = self.recent.binary_search_by_key(&value, |t| t.value());
        match at {
            Ok(i) => Ok(Found::Ticket(self.recent[i])),
            Err(0) => Ok(Found::Retired),
            // Between two kept tickets: values that are not tickets (a tiled frame's tiles).
            Err(_) => Err(Fail::invalid(format!("{value} is not a ticket of this context"))),
        }
    }
}
