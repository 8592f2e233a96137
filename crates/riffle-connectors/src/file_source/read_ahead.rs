//! Decompressing on a thread of its own, a few blocks ahead of the subtask that decodes
//! the lines. A compressed file is one split (it cannot be entered in the middle), so
//! without this one core both inflates and decodes it while the other may have nothing
//! to do; with it, the two overlap (docs/engine.md, "Reading text input").

use std::io::{self, Read};
use std::sync::mpsc::{sync_channel, Receiver};

/// Bytes the thread hands over at a time.
const BLOCK: usize = 1 << 20;
/// Blocks the thread may be ahead of the reader: what it holds in memory at most.
const BLOCKS_AHEAD: usize = 4;

/// What the thread sends.
enum Message {
    Block(Vec<u8>),
    /// The input ended; nothing follows.
    End,
    Failed(io::Error),
}

/// The bytes of an input, read by a thread of their own ahead of the reader. Dropping
/// it stops the thread at its next block.
pub(super) struct ReadAhead {
    blocks: Receiver<Message>,
    current: Vec<u8>,
    /// `current[at..]` is not handed out yet.
    at: usize,
    ended: bool,
}

impl ReadAhead {
    /// Starts reading `input` on a new thread.
    pub(super) fn spawn(mut input: Box<dyn Read + Send>) -> io::Result<Self> {
        let (sender, blocks) = sync_channel(BLOCKS_AHEAD);
        std::thread::Builder::new()
            .name("riffle-read-ahead".into())
            .spawn(move || loop {
                let message = match fill(&mut input) {
                    Ok(block) if block.is_empty() => Message::End,
                    Ok(block) => Message::Block(block),
                    Err(e) => Message::Failed(e),
                };
                let last = !matches!(message, Message::Block(_));
                // An error: the reader was dropped, nobody wants the rest.
                if sender.send(message).is_err() || last {
                    return;
                }
            })?;
        Ok(Self {
            blocks,
            current: Vec::new(),
            at: 0,
            ended: false,
        })
    }
}

/// The next block of `input`: `BLOCK` bytes, fewer only at its end, none after it.
fn fill(input: &mut dyn Read) -> io::Result<Vec<u8>> {
    let mut block = vec![0; BLOCK];
    let mut filled = 0;
    while filled < BLOCK {
        match input.read(&mut block[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    block.truncate(filled);
    Ok(block)
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.current.len() {
            if self.ended || buf.is_empty() {
                return Ok(0);
            }
            match self.blocks.recv() {
                Ok(Message::Block(block)) => {
                    self.current = block;
                    self.at = 0;
                }
                Ok(Message::End) => self.ended = true,
                Ok(Message::Failed(e)) => return Err(e),
                // The thread stopped without saying the input ended (it panicked):
                // taking that for the end would silently drop the rest of the file.
                Err(_) => {
                    return Err(io::Error::other(
                        "the thread reading ahead stopped before the end of the input",
                    ))
                }
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bytes`, then an error or a panic instead of the end.
    struct Failing {
        bytes: io::Cursor<Vec<u8>>,
        panics: bool,
    }

    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.bytes.read(buf)? {
                0 if self.panics => panic!("a decompressor's bug"),
                0 => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "corrupt deflate stream",
                )),
                n => Ok(n),
            }
        }
    }

    /// Reads `reader` a few bytes at a time, in reads of varying size.
    fn read_in_small_pieces(reader: &mut ReadAhead) -> (Vec<u8>, io::Result<()>) {
        let mut out = Vec::new();
        const LONGEST: usize = 70_001;
        let mut piece = vec![0; LONGEST];
        for size in (1..).map(|i| 1 + (i * 7_919) % LONGEST) {
            match reader.read(&mut piece[..size]) {
                Ok(0) => return (out, Ok(())),
                Ok(n) => out.extend_from_slice(&piece[..n]),
                Err(e) => return (out, Err(e)),
            }
        }
        unreachable!()
    }

    #[test]
    fn hands_out_every_byte_in_order_across_blocks() {
        let bytes: Vec<u8> = (0..BLOCK * 3 + 12_345).map(|i| (i % 251) as u8).collect();
        let mut reader = ReadAhead::spawn(Box::new(io::Cursor::new(bytes.clone()))).unwrap();
        let (out, result) = read_in_small_pieces(&mut reader);
        result.unwrap();
        assert_eq!(out.len(), bytes.len());
        assert!(out == bytes);
        // Reads past the end stay at the end.
        assert_eq!(reader.read(&mut [0; 8]).unwrap(), 0);
    }

    #[test]
    fn an_empty_input_ends_at_once() {
        let mut reader = ReadAhead::spawn(Box::new(io::empty())).unwrap();
        assert_eq!(reader.read(&mut [0; 8]).unwrap(), 0);
    }

    #[test]
    fn a_read_error_reaches_the_reader_after_the_bytes_before_it() {
        let bytes = vec![7; BLOCK + 10];
        let input = Failing {
            bytes: io::Cursor::new(bytes),
            panics: false,
        };
        let mut reader = ReadAhead::spawn(Box::new(input)).unwrap();
        let (out, result) = read_in_small_pieces(&mut reader);
        // The full block before the error arrives; the partial one is lost with it.
        assert_eq!(out.len(), BLOCK);
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn a_thread_that_dies_is_an_error_not_the_end_of_the_input() {
        let input = Failing {
            bytes: io::Cursor::new(vec![1; 100]),
            panics: true,
        };
        let mut reader = ReadAhead::spawn(Box::new(input)).unwrap();
        let (_, result) = read_in_small_pieces(&mut reader);
        assert!(result.is_err(), "a panic read as the end of the input");
    }
}
