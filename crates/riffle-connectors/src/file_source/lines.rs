//! A text file read in large blocks and handed out a batch of lines at a time, as one
//! slice of the block: no copy and no allocation per line. Where each line ends is kept,
//! so that an error can name its line.

use std::io::{ErrorKind, Read};

/// Bytes read from the file at a time (at least).
const READ_SIZE: usize = 1 << 20;

/// Lines of a file, a batch at a time.
pub(super) struct LineBlocks<R> {
    input: R,
    block: Vec<u8>,
    /// `block[start..end]` is read but not yet handed out.
    start: usize,
    end: usize,
    at_end: bool,
}

impl<R: Read> LineBlocks<R> {
    pub(super) fn new(input: R) -> Self {
        Self {
            input,
            block: vec![0; 2 * READ_SIZE],
            start: 0,
            end: 0,
            at_end: false,
        }
    }

    /// The next at most `max` lines, each with its `\n` (the last line of the file may
    /// have none), as one slice; `ends` receives where each line ends in it. Empty at
    /// the end of the file.
    pub(super) fn next_lines(
        &mut self,
        max: usize,
        ends: &mut Vec<usize>,
    ) -> std::io::Result<&[u8]> {
        ends.clear();
        // Offsets below are from `self.start`, which moves when the block is compacted.
        let mut scanned = 0;
        while ends.len() < max {
            let unread = &self.block[self.start + scanned..self.end];
            for newline in memchr::memchr_iter(b'\n', unread) {
                ends.push(scanned + newline + 1);
                if ends.len() == max {
                    break;
                }
            }
            if ends.len() == max {
                break;
            }
            scanned = self.end - self.start;
            if self.at_end {
                if ends.last().copied().unwrap_or(0) < scanned {
                    ends.push(scanned);
                }
                break;
            }
            self.read_more()?;
        }
        let taken = ends.last().copied().unwrap_or(0);
        let lines = &self.block[self.start..self.start + taken];
        self.start += taken;
        Ok(lines)
    }

    /// Skips up to `count` lines; returns how many there were.
    pub(super) fn skip_lines(&mut self, count: u64) -> std::io::Result<u64> {
        let mut ends = Vec::new();
        let mut skipped = 0;
        while skipped < count {
            let want = usize::try_from(count - skipped)
                .unwrap_or(usize::MAX)
                .min(1 << 16);
            self.next_lines(want, &mut ends)?;
            if ends.is_empty() {
                break;
            }
            skipped += ends.len() as u64;
        }
        Ok(skipped)
    }

    /// Reads at least one more byte into the block, or marks the end of the file;
    /// moves the unread bytes to the front, or grows the block, to make room.
    fn read_more(&mut self) -> std::io::Result<()> {
        if self.block.len() - self.end < READ_SIZE {
            self.block.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.block.len() - self.end < READ_SIZE {
                self.block.resize(self.end + 2 * READ_SIZE, 0);
            }
        }
        loop {
            match self.input.read(&mut self.block[self.end..]) {
                Ok(0) => {
                    self.at_end = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Whether a line holds nothing but white space (Unicode's, as `str::trim` counts it).
pub(super) fn is_blank(line: &[u8]) -> bool {
    match line.iter().find(|b| !b.is_ascii_whitespace()) {
        None => true,
        Some(b) if b.is_ascii() => false,
        Some(_) => std::str::from_utf8(line).is_ok_and(|text| text.trim().is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out its bytes a few at a time, as a pipe or a slow disk may.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(self.0.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn batches(text: &[u8], max: usize, trickle: usize) -> Vec<Vec<String>> {
        let mut lines = LineBlocks::new(Trickle(text, trickle));
        let mut ends = Vec::new();
        let mut out = Vec::new();
        loop {
            let block = lines.next_lines(max, &mut ends).unwrap().to_vec();
            if ends.is_empty() {
                assert!(block.is_empty());
                return out;
            }
            let mut start = 0;
            let mut batch = Vec::new();
            for &end in &ends {
                batch.push(String::from_utf8(block[start..end].to_vec()).unwrap());
                start = end;
            }
            assert_eq!(start, block.len());
            out.push(batch);
        }
    }

    #[test]
    fn hands_out_lines_in_batches_with_their_newlines() {
        for trickle in [1, 3, 1 << 22] {
            assert_eq!(
                batches(b"a\nbb\n\nccc\nd", 2, trickle),
                vec![vec!["a\n", "bb\n"], vec!["\n", "ccc\n"], vec!["d"]]
            );
        }
    }

    #[test]
    fn a_file_ending_in_a_newline_has_no_empty_last_line() {
        assert_eq!(batches(b"a\nb\n", 5, 1), vec![vec!["a\n", "b\n"]]);
        assert!(batches(b"", 5, 1).is_empty());
    }

    #[test]
    fn lines_longer_than_a_read_grow_the_block() {
        let long = "x".repeat(5 * READ_SIZE);
        let text = format!("{long}\nshort\n{long}");
        let got = batches(text.as_bytes(), 1, 1 << 16);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0][0], format!("{long}\n"));
        assert_eq!(got[1][0], "short\n");
        assert_eq!(got[2][0], long);
    }

    #[test]
    fn skipping_lines_resumes_at_the_next_one() {
        let text = (1..=100_000).map(|i| format!("{i}\n")).collect::<String>();
        let mut lines = LineBlocks::new(Trickle(text.as_bytes(), 777));
        assert_eq!(lines.skip_lines(70_000).unwrap(), 70_000);
        let mut ends = Vec::new();
        assert_eq!(lines.next_lines(1, &mut ends).unwrap(), b"70001\n");
        assert_eq!(lines.skip_lines(1_000_000).unwrap(), 29_999);
        assert!(lines.next_lines(1, &mut ends).unwrap().is_empty());
    }

    #[test]
    fn blank_lines_are_white_space_only() {
        assert!(is_blank(b"  \t\r\n"));
        assert!(is_blank("\u{a0} \n".as_bytes()));
        assert!(!is_blank(b"  {}\n"));
        assert!(!is_blank(b"\xff\n"));
    }
}
