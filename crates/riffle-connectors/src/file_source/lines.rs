//! A text file read in large blocks and handed out a batch of lines at a time, as one
//! slice of the block: no copy and no allocation per line. Where each line ends is kept,
//! so that an error can name its line. A reader may start in the middle of a file and
//! stop at a byte offset, to read one split of it (see `split.rs`).

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
    /// Offset in the file of `block[start]`: where the next line handed out begins.
    offset: u64,
    /// Lines that begin at or after this offset are not handed out.
    stop: u64,
}

impl<R: Read> LineBlocks<R> {
    pub(super) fn new(input: R) -> Self {
        Self::between(input, 0, u64::MAX)
    }

    /// Lines of `input`, whose first byte is at `offset` in the file, that begin before
    /// the offset `stop`.
    pub(super) fn between(input: R, offset: u64, stop: u64) -> Self {
        Self {
            input,
            block: vec![0; 2 * READ_SIZE],
            start: 0,
            end: 0,
            at_end: false,
            offset,
            stop,
        }
    }

    /// Where in the file the next line handed out begins.
    pub(super) fn offset(&self) -> u64 {
        self.offset
    }

    /// The next at most `max` lines, each with its `\n` (the last line of the file may
    /// have none), as one slice; `ends` receives where each line ends in it. Empty at
    /// the end of the file, or when the next line begins at or after the stop.
    pub(super) fn next_lines(
        &mut self,
        max: usize,
        ends: &mut Vec<usize>,
    ) -> std::io::Result<&[u8]> {
        ends.clear();
        if max == 0 || self.offset >= self.stop {
            return Ok(&[]);
        }
        // A line ending `room` or more bytes on begins at or after the stop.
        let room = self.stop - self.offset;
        // Offsets below are from `self.start`, which moves when the block is compacted.
        let mut scanned = 0;
        'fill: loop {
            let unread = &self.block[self.start + scanned..self.end];
            for newline in memchr::memchr_iter(b'\n', unread) {
                let end = scanned + newline + 1;
                ends.push(end);
                if ends.len() == max || end as u64 >= room {
                    break 'fill;
                }
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
        self.offset += taken as u64;
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

/// How many lines end in the first `bytes` bytes of `input`: the line number, less one,
/// of a line that begins at that offset.
pub(super) fn newlines_before(input: impl Read, bytes: u64) -> std::io::Result<u64> {
    let mut input = input.take(bytes);
    let mut buffer = vec![0; READ_SIZE];
    let mut newlines = 0;
    loop {
        match input.read(&mut buffer) {
            Ok(0) => return Ok(newlines),
            Ok(n) => newlines += memchr::memchr_iter(b'\n', &buffer[..n]).count() as u64,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
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

    /// The lines of `text` that begin in `[start, stop)`, read as the file source reads
    /// a split: from the byte before `start`, skipping to the next line start.
    fn split_lines(text: &[u8], start: usize, stop: u64) -> Vec<String> {
        let from = start.saturating_sub(1);
        let mut lines = LineBlocks::between(Trickle(&text[from..], 2), from as u64, stop);
        let mut ends = Vec::new();
        if start > 0 {
            lines.skip_lines(1).unwrap();
        }
        let mut out = Vec::new();
        loop {
            let block = lines.next_lines(2, &mut ends).unwrap().to_vec();
            if ends.is_empty() {
                return out;
            }
            let mut start = 0;
            for &end in &ends {
                out.push(String::from_utf8(block[start..end].to_vec()).unwrap());
                start = end;
            }
        }
    }

    #[test]
    fn a_split_reads_the_lines_that_begin_in_it_and_splits_meet_exactly() {
        let text = b"aa\nbbbb\nc\n\ndddddd\ne";
        // Every way to cut the text in two hands out every line once.
        for cut in 1..text.len() {
            let mut both = split_lines(text, 0, cut as u64);
            both.extend(split_lines(text, cut, u64::MAX));
            assert_eq!(
                both,
                ["aa\n", "bbbb\n", "c\n", "\n", "dddddd\n", "e"],
                "cut at {cut}"
            );
        }
        // A line beginning exactly at the stop is the next split's.
        assert_eq!(split_lines(text, 0, 3), ["aa\n"]);
        assert_eq!(split_lines(text, 3, u64::MAX)[0], "bbbb\n");
        // A split inside one long line hands out nothing.
        assert!(split_lines(text, 5, 7).is_empty());
    }

    #[test]
    fn the_newlines_before_an_offset_number_its_line() {
        let text = b"a\nbb\n\nccc\n";
        assert_eq!(newlines_before(Trickle(text, 2), 0).unwrap(), 0);
        assert_eq!(newlines_before(Trickle(text, 2), 5).unwrap(), 2);
        assert_eq!(newlines_before(Trickle(text, 2), 6).unwrap(), 3);
        assert_eq!(newlines_before(Trickle(text, 2), 100).unwrap(), 4);
    }

    #[test]
    fn blank_lines_are_white_space_only() {
        assert!(is_blank(b"  \t\r\n"));
        assert!(is_blank("\u{a0} \n".as_bytes()));
        assert!(!is_blank(b"  {}\n"));
        assert!(!is_blank(b"\xff\n"));
    }
}
