//! A costly function's answers for texts it has seen, while remembering them pays.
//!
//! Many text columns repeat a few values (channel URLs, user agents, log templates): a
//! regular expression over them answers the same question again and again, for a
//! hundred nanoseconds or more each time, where a hash lookup takes a tenth of that. A
//! column of unique texts would only pay for the lookups, so the memo watches its own
//! hit rate and rests (stops looking, forgets) when too few lookups hit.
//!
//! The memo is a cache: it changes how fast an answer comes, never the answer.

use std::collections::HashMap;

/// Lookups per window over which the hit rate is judged.
const WINDOW: u32 = 1 << 12;
/// A window with fewer hits than `1 / MIN_HIT_SHARE` of its lookups rests the memo.
const MIN_HIT_SHARE: u32 = 4;
/// Texts passed by without the memo once it rests, before it tries again.
const REST: u32 = 1 << 18;
/// Texts longer than this are never remembered: keeping them would cost more memory
/// than their answers save time.
const MAX_TEXT_BYTES: usize = 256;
/// Bytes of remembered texts at which the memo forgets everything and starts over.
const MAX_BYTES: usize = 4 << 20;

/// Answers of type `V` by text, with the rules above.
#[derive(Debug)]
pub struct TextMemo<V> {
    answers: HashMap<Box<str>, V, foldhash::fast::RandomState>,
    bytes: usize,
    lookups: u32,
    hits: u32,
    resting: u32,
}

impl<V> Default for TextMemo<V> {
    fn default() -> Self {
        Self {
            answers: HashMap::default(),
            bytes: 0,
            lookups: 0,
            hits: 0,
            resting: 0,
        }
    }
}

impl<V: Clone> TextMemo<V> {
    /// `compute(text)`, from the memo when `text` was seen before.
    pub fn answer(&mut self, text: &str, compute: impl FnOnce(&str) -> V) -> V {
        if self.resting > 0 {
            self.resting -= 1;
            return compute(text);
        }
        let answer = match self.answers.get(text) {
            Some(v) => {
                self.hits += 1;
                v.clone()
            }
            None => {
                let v = compute(text);
                if text.len() <= MAX_TEXT_BYTES {
                    if self.bytes + text.len() > MAX_BYTES {
                        self.forget();
                    }
                    self.bytes += text.len();
                    self.answers.insert(text.into(), v.clone());
                }
                v
            }
        };
        self.lookups += 1;
        if self.lookups == WINDOW {
            if self.hits * MIN_HIT_SHARE < WINDOW {
                self.resting = REST;
                self.forget();
            }
            self.lookups = 0;
            self.hits = 0;
        }
        answer
    }

    /// Whether the memo is resting (answering by computing only).
    #[cfg(test)]
    fn is_resting(&self) -> bool {
        self.resting > 0
    }

    fn forget(&mut self) {
        self.answers.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Answers `texts` through `memo`, counting how often the function really ran.
    fn run(memo: &mut TextMemo<usize>, texts: impl Iterator<Item = String>) -> usize {
        let calls = Cell::new(0);
        for t in texts {
            let v = memo.answer(&t, |s| {
                calls.set(calls.get() + 1);
                s.len()
            });
            assert_eq!(v, t.len(), "a remembered answer is the function's answer");
        }
        calls.get()
    }

    #[test]
    fn repeated_texts_are_computed_once() {
        let mut memo = TextMemo::default();
        let texts = (0..100_000).map(|i| format!("https://example.com/{}", i % 1000));
        assert_eq!(run(&mut memo, texts), 1000);
        assert!(!memo.is_resting());
    }

    #[test]
    fn unique_texts_rest_the_memo_after_one_window_and_it_tries_again_later() {
        let mut memo = TextMemo::default();
        let unique = (0..WINDOW).map(|i| format!("unique {i}"));
        assert_eq!(run(&mut memo, unique), WINDOW as usize);
        assert!(memo.is_resting());
        assert!(memo.answers.is_empty(), "a resting memo holds nothing");
        // While resting, even a repeated text is computed each time.
        let same = (0..REST).map(|_| "again".to_string());
        assert_eq!(run(&mut memo, same), REST as usize);
        assert!(!memo.is_resting());
        let same = (0..10).map(|_| "again".to_string());
        assert_eq!(run(&mut memo, same), 1, "awake again, it remembers");
    }

    #[test]
    fn a_window_with_a_third_of_hits_keeps_the_memo_and_one_with_a_fifth_rests_it() {
        // Unique texts with one text repeated every `every` lookups.
        let window = |every: u32| {
            (0..WINDOW).map(move |i| {
                if i % every == 0 {
                    "repeat".to_string()
                } else {
                    format!("{every}: {i}")
                }
            })
        };
        let mut memo = TextMemo::default();
        run(&mut memo, window(3));
        assert!(!memo.is_resting());
        run(&mut memo, window(5));
        assert!(memo.is_resting());
    }

    #[test]
    fn long_texts_are_answered_but_not_kept() {
        let mut memo = TextMemo::default();
        let long = "x".repeat(MAX_TEXT_BYTES + 1);
        let texts = (0..3).map(|_| long.clone());
        assert_eq!(run(&mut memo, texts), 3);
        assert_eq!(memo.bytes, 0);
    }

    #[test]
    fn the_memo_forgets_everything_when_its_texts_fill_the_byte_budget() {
        let mut memo = TextMemo::default();
        let text = |i: usize| format!("{i:0>200}");
        // Each text repeats once right away, so the hit rate stays at one half.
        let count = MAX_BYTES / 200 + 10;
        let texts = (0..count).flat_map(|i| [text(i), text(i)]);
        assert_eq!(run(&mut memo, texts), count);
        assert!(memo.bytes <= MAX_BYTES);
        assert!(memo.answers.len() < 100, "it started over once full");
    }
}
