//! Answers of a lookup table kept by key for a while: Flink's `lookup.cache.max-rows`
//! (how many keys, as Flink's JDBC connector counts them) and `lookup.cache.ttl` (how
//! long an answer, empty ones included, is reused before the table is asked again).

use riffle_core::RecordBatch;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Recent answers by key (keys as [`super::KeyRows`] bytes).
#[derive(Debug)]
pub struct LookupCache {
    max_keys: usize,
    ttl: Duration,
    entries: HashMap<Box<[u8]>, (Instant, RecordBatch)>,
    /// Keys in the order they were stored; an entry stored again appears twice, and
    /// only its newest appearance (same instant as the entry) counts.
    stored: VecDeque<(Instant, Box<[u8]>)>,
}

impl LookupCache {
    /// A cache of at most `max_keys` keys, each answer reused for `ttl`.
    pub fn new(max_keys: usize, ttl: Duration) -> Self {
        Self {
            max_keys,
            ttl,
            entries: HashMap::new(),
            stored: VecDeque::new(),
        }
    }

    /// The answer stored for `key` less than the TTL before `now`.
    pub fn get(&self, key: &[u8], now: Instant) -> Option<&RecordBatch> {
        self.entries
            .get(key)
            .filter(|(at, _)| now.saturating_duration_since(*at) < self.ttl)
            .map(|(_, rows)| rows)
    }

    /// Whether it keeps any answer (a cache of no keys keeps none).
    pub fn keeps_answers(&self) -> bool {
        self.max_keys > 0
    }

    /// Keeps `rows` as the answer for `key`, dropping expired answers and, past the
    /// size, the oldest ones.
    pub fn insert(&mut self, key: Box<[u8]>, rows: RecordBatch, now: Instant) {
        if !self.keeps_answers() {
            return;
        }
        self.entries.insert(key.clone(), (now, rows));
        self.stored.push_back((now, key));
        while let Some((at, key)) = self.stored.front() {
            let expired = now.saturating_duration_since(*at) >= self.ttl;
            let current = self.entries.get(key).is_some_and(|(t, _)| t == at);
            if current && !expired && self.entries.len() <= self.max_keys {
                break;
            }
            if current {
                self.entries.remove(key);
            }
            self.stored.pop_front();
        }
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::datatypes::Schema;
    use std::sync::Arc;

    fn empty() -> RecordBatch {
        RecordBatch::new_empty(Arc::new(Schema::empty()))
    }

    fn key(k: u8) -> Box<[u8]> {
        vec![k].into_boxed_slice()
    }

    #[test]
    fn an_answer_is_reused_until_its_ttl_passes() {
        let t0 = Instant::now();
        let mut cache = LookupCache::new(10, Duration::from_secs(5));
        cache.insert(key(1), empty(), t0);
        assert!(cache.get(&key(1), t0 + Duration::from_secs(4)).is_some());
        assert!(cache.get(&key(1), t0 + Duration::from_secs(5)).is_none());
    }

    #[test]
    fn past_its_size_the_oldest_answer_goes() {
        let t0 = Instant::now();
        let mut cache = LookupCache::new(2, Duration::from_secs(60));
        cache.insert(key(1), empty(), t0);
        cache.insert(key(2), empty(), t0 + Duration::from_secs(1));
        cache.insert(key(3), empty(), t0 + Duration::from_secs(2));
        let now = t0 + Duration::from_secs(3);
        assert!(cache.get(&key(1), now).is_none());
        assert!(cache.get(&key(2), now).is_some() && cache.get(&key(3), now).is_some());
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn an_answer_stored_again_is_kept_from_its_new_time() {
        let t0 = Instant::now();
        let mut cache = LookupCache::new(2, Duration::from_secs(10));
        cache.insert(key(1), empty(), t0);
        cache.insert(key(2), empty(), t0 + Duration::from_secs(1));
        cache.insert(key(1), empty(), t0 + Duration::from_secs(2));
        cache.insert(key(3), empty(), t0 + Duration::from_secs(3));
        let now = t0 + Duration::from_secs(4);
        // Key 2 is the oldest answer now; key 1's first store no longer counts.
        assert!(cache.get(&key(2), now).is_none());
        assert!(cache.get(&key(1), now).is_some() && cache.get(&key(3), now).is_some());
        // Key 1 expires 10 s after it was stored again, not after its first store.
        assert!(cache.get(&key(1), t0 + Duration::from_secs(11)).is_some());
    }

    #[test]
    fn expired_answers_are_dropped_when_new_ones_arrive() {
        let t0 = Instant::now();
        let mut cache = LookupCache::new(100, Duration::from_secs(1));
        cache.insert(key(1), empty(), t0);
        cache.insert(key(2), empty(), t0 + Duration::from_secs(2));
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_cache_of_no_keys_keeps_nothing() {
        let mut cache = LookupCache::new(0, Duration::from_secs(1));
        cache.insert(key(1), empty(), Instant::now());
        assert!(cache.is_empty());
    }
}
