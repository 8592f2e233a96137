//! The watermark of a task with several inputs: the minimum over its live inputs.

use riffle_core::{EventTime, Watermark};

#[derive(Debug, Clone, Copy, PartialEq)]
enum InputState {
    Active(EventTime),
    Idle(EventTime),
    Ended,
}

/// Tracks each input's watermark and yields the combined one when it advances.
///
/// Idle inputs do not hold the minimum back; ended inputs count as `i64::MAX`. When
/// every live input is idle the combined watermark stays where it is.
#[derive(Debug)]
pub struct WatermarkTracker {
    inputs: Vec<InputState>,
    current: EventTime,
}

impl WatermarkTracker {
    /// A tracker for `inputs` channels, starting at `i64::MIN`.
    pub fn new(inputs: usize) -> Self {
        Self {
            inputs: vec![InputState::Active(EventTime::MIN); inputs],
            current: EventTime::MIN,
        }
    }

    /// Starts every input at `watermark` (a restored checkpoint's): the combined
    /// watermark never reports anything at or below it.
    pub fn start_at(&mut self, watermark: EventTime) {
        for input in &mut self.inputs {
            if let InputState::Active(t) = input {
                *t = (*t).max(watermark);
            }
        }
        self.current = self.current.max(watermark);
    }

    /// The combined watermark so far.
    pub fn current(&self) -> EventTime {
        self.current
    }

    /// Input `input` reported `watermark`; returns the new combined watermark if it
    /// advanced.
    pub fn update(&mut self, input: usize, watermark: Watermark) -> Option<EventTime> {
        let state = &mut self.inputs[input];
        *state = match (watermark, *state) {
            (_, InputState::Ended) => InputState::Ended,
            (Watermark::EventTime(t), InputState::Active(old) | InputState::Idle(old)) => {
                InputState::Active(t.max(old))
            }
            (Watermark::Idle, InputState::Active(old) | InputState::Idle(old)) => {
                InputState::Idle(old)
            }
        };
        self.recompute()
    }

    /// Input `input` ended; returns the new combined watermark if it advanced.
    pub fn end(&mut self, input: usize) -> Option<EventTime> {
        self.inputs[input] = InputState::Ended;
        self.recompute()
    }

    fn recompute(&mut self) -> Option<EventTime> {
        // Ended inputs are active at +inf; idle ones are left out. With every input idle
        // there is nothing to take the minimum over, and the watermark stays.
        let candidate = self
            .inputs
            .iter()
            .filter_map(|state| match state {
                InputState::Active(t) => Some(*t),
                InputState::Ended => Some(EventTime::MAX),
                InputState::Idle(_) => None,
            })
            .min()?;
        if candidate > self.current {
            self.current = candidate;
            Some(candidate)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_watermark_is_minimum_of_inputs() {
        let mut t = WatermarkTracker::new(2);
        assert_eq!(t.update(0, Watermark::EventTime(10)), None);
        assert_eq!(t.update(1, Watermark::EventTime(5)), Some(5));
        assert_eq!(t.update(1, Watermark::EventTime(20)), Some(10));
    }

    #[test]
    fn a_restored_watermark_is_a_floor() {
        let mut t = WatermarkTracker::new(2);
        t.start_at(100);
        assert_eq!(t.current(), 100);
        assert_eq!(t.update(0, Watermark::EventTime(50)), None);
        assert_eq!(t.update(1, Watermark::EventTime(150)), None);
        assert_eq!(t.update(0, Watermark::EventTime(120)), Some(120));
    }

    #[test]
    fn idle_input_does_not_hold_back() {
        let mut t = WatermarkTracker::new(2);
        t.update(0, Watermark::EventTime(10));
        assert_eq!(t.update(1, Watermark::Idle), Some(10));
        // The idle input speaks again with an older time: the watermark never goes back.
        assert_eq!(t.update(1, Watermark::EventTime(3)), None);
        assert_eq!(t.current(), 10);
    }

    #[test]
    fn ended_and_idle_inputs_release_the_watermark() {
        let mut t = WatermarkTracker::new(2);
        t.update(0, Watermark::EventTime(10));
        t.update(1, Watermark::EventTime(5));
        assert_eq!(t.end(0), None);
        assert_eq!(t.update(1, Watermark::Idle), Some(EventTime::MAX));
    }

    #[test]
    fn all_idle_holds_the_watermark() {
        let mut t = WatermarkTracker::new(2);
        t.update(0, Watermark::EventTime(10));
        t.update(1, Watermark::EventTime(5));
        assert_eq!(t.update(1, Watermark::Idle), Some(10));
        assert_eq!(t.update(0, Watermark::Idle), None);
        assert_eq!(t.current(), 10);
    }

    #[test]
    fn all_ended_gives_max() {
        let mut t = WatermarkTracker::new(2);
        t.update(0, Watermark::EventTime(10));
        assert_eq!(t.end(1), Some(10));
        assert_eq!(t.end(0), Some(EventTime::MAX));
    }
}
