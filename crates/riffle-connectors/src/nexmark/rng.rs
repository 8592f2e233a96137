//! A counter-based random stream per event: the same event number always draws the same
//! values, whatever generated the events before it.

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
/// Fixed seed of the riffle Nexmark generator; changing it changes every event.
const SEED: u64 = 0x5249_4646_4c45_4e58;

/// SplitMix64 over `seed ^ e`, advanced once per draw.
#[derive(Debug, Clone)]
pub struct EventRng {
    state: u64,
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl EventRng {
    /// The stream of event `event`.
    pub fn for_event(event: u64) -> Self {
        Self {
            state: mix(SEED ^ event.wrapping_mul(GOLDEN)),
        }
    }

    /// A stream for a non-event purpose (e.g. the channel table), keyed by `salt`.
    pub fn for_salt(salt: u64) -> Self {
        Self {
            state: mix(salt ^ SEED.rotate_left(17)),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `1/n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_event_same_draws() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = EventRng::for_event(42);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = EventRng::for_event(42);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(EventRng::for_event(43).next_u64(), a[0]);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut seen = [false; 5];
        for e in 0..1000 {
            let v = EventRng::for_event(e).below(5);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
