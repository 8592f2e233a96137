//! Where a PostgreSQL CDC source stands, and the decisions made from it
//! (docs/connectors.md, "PostgreSQL CDC"). Pure logic: no connection here.
//!
//! A position is the end LSN of the last transaction whose changes were all emitted,
//! plus how many changes of the transaction after it were emitted too (a checkpoint
//! may fall inside a transaction). The replication stream sends whole transactions
//! in commit order, starting after the LSN it is given, so a restart from a position
//! sees that next transaction first and passes over the changes already emitted.
//! During the initial snapshot the position is the slot's consistent point, which
//! the stream starts from once the snapshot is read.

/// The phase a source is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading the table's rows as of the slot's creation; the stream starts after.
    Snapshot,
    /// Reading the replication stream.
    Stream,
}

/// A CDC source's position, as checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CdcPosition {
    pub phase: Phase,
    /// The end LSN of the last transaction wholly emitted (the slot's consistent point
    /// before the first one).
    pub lsn: u64,
    /// Changes of the transaction after `lsn` already emitted.
    pub skip: u64,
}

/// Why a position cannot be resumed from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// The slot confirmed changes past the position: PostgreSQL would start after them,
    /// and the changes between would be lost without a word.
    #[error(
        "the replication slot has confirmed changes up to {confirmed}, past this checkpoint's position {position}: PostgreSQL no longer has the changes between (a checkpoint older than the newest one, or another consumer of the slot?); restore from the newest checkpoint, or start afresh with a new 'slot.name'"
    )]
    SlotAhead { confirmed: String, position: String },
    /// The server's WAL ends before the position: the database was restored from a
    /// backup (or is another one), and the stream would wait for WAL to reach the
    /// position, passing over whatever is written before it.
    #[error(
        "the server's WAL ends at {server_end}, before this checkpoint's position {position}: was the database restored from a backup, or is this another server? Its changes up to {position} would be passed over; start afresh with a new 'slot.name'"
    )]
    ServerBehind {
        server_end: String,
        position: String,
    },
}

impl CdcPosition {
    /// A fresh slot's position: its snapshot to read, then the stream from `consistent`.
    pub fn fresh(consistent: u64) -> Self {
        Self {
            phase: Phase::Snapshot,
            lsn: consistent,
            skip: 0,
        }
    }

    /// Whether the stream can resume from here, given the slot's confirmed LSN: never
    /// from before it, since the server would start at the slot's LSN instead.
    pub fn check_resume(&self, confirmed: u64) -> Result<(), ResumeError> {
        if confirmed > self.lsn {
            return Err(ResumeError::SlotAhead {
                confirmed: lsn_text(confirmed),
                position: lsn_text(self.lsn),
            });
        }
        Ok(())
    }

    /// Whether the server's WAL (ending at `server_end`) reaches the position at all.
    pub fn check_server(&self, server_end: u64) -> Result<(), ResumeError> {
        if server_end < self.lsn {
            return Err(ResumeError::ServerBehind {
                server_end: lsn_text(server_end),
                position: lsn_text(self.lsn),
            });
        }
        Ok(())
    }

    /// The LSN the slot may confirm once a checkpoint holding this position commits:
    /// never past what a restart from it needs again.
    pub fn confirmable(&self) -> u64 {
        self.lsn
    }
}

/// Tracks the position while changes stream in, and says which to emit.
#[derive(Debug, Clone)]
pub struct StreamCursor {
    /// The position of what has been emitted.
    position: CdcPosition,
    /// Changes of the current transaction still to pass over (emitted before a restart).
    to_skip: u64,
    /// Whether a transaction is open (between Begin and Commit).
    in_transaction: bool,
}

impl StreamCursor {
    /// A cursor resuming from `position` (in its stream phase).
    pub fn resuming(position: CdcPosition) -> Self {
        Self {
            position: CdcPosition {
                phase: Phase::Stream,
                ..position
            },
            to_skip: position.skip,
            in_transaction: false,
        }
    }

    /// A transaction begins.
    pub fn begin(&mut self) {
        self.in_transaction = true;
    }

    /// One change of the open transaction: whether to emit it (false: it was emitted
    /// before the restart).
    pub fn change(&mut self) -> bool {
        if self.to_skip > 0 {
            self.to_skip -= 1;
            return false;
        }
        self.position.skip += 1;
        true
    }

    /// The open transaction committed, ending at `end_lsn`.
    pub fn commit(&mut self, end_lsn: u64) {
        self.in_transaction = false;
        // The transaction was shorter than what was to be passed over: the WAL is not
        // what was read before. Not expected; `skipped_past_end` reports it.
        self.position = CdcPosition {
            phase: Phase::Stream,
            lsn: end_lsn.max(self.position.lsn),
            skip: 0,
        };
    }

    /// Whether a restart passed over more changes than its first transaction had: the
    /// stream is not the one the checkpoint was taken on.
    pub fn skipped_past_end(&self) -> bool {
        !self.in_transaction && self.to_skip > 0
    }

    /// The server has sent everything up to `wal_end` (a keep-alive): with no
    /// transaction open, nothing before it remains to be read.
    pub fn idle_until(&mut self, wal_end: u64) {
        if !self.in_transaction && self.to_skip == 0 && wal_end > self.position.lsn {
            self.position.lsn = wal_end;
        }
    }

    /// What a checkpoint records now.
    pub fn position(&self) -> CdcPosition {
        self.position
    }
}

/// An LSN as PostgreSQL writes it: `16/B374D848`.
pub fn lsn_text(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

/// An LSN from PostgreSQL's text.
pub fn parse_lsn(text: &str) -> Option<u64> {
    let (high, low) = text.trim().split_once('/')?;
    let high = u64::from_str_radix(high, 16).ok()?;
    let low = u64::from_str_radix(low, 16).ok()?;
    (high <= u64::from(u32::MAX) && low <= u64::from(u32::MAX)).then_some((high << 32) | low)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(lsn: u64, skip: u64) -> CdcPosition {
        CdcPosition {
            phase: Phase::Stream,
            lsn,
            skip,
        }
    }

    #[test]
    fn a_checkpoint_inside_a_transaction_resumes_past_the_changes_it_emitted() {
        let mut cursor = StreamCursor::resuming(at(100, 0));
        cursor.begin();
        assert!(cursor.change() && cursor.change());
        let checkpointed = cursor.position();
        assert_eq!(checkpointed, at(100, 2));
        // The restart sees the same transaction from its start.
        let mut restarted = StreamCursor::resuming(checkpointed);
        restarted.begin();
        let emitted: Vec<bool> = (0..4).map(|_| restarted.change()).collect();
        assert_eq!(emitted, [false, false, true, true]);
        restarted.commit(180);
        assert_eq!(restarted.position(), at(180, 0));
        assert!(!restarted.skipped_past_end());
    }

    #[test]
    fn a_commit_moves_the_position_to_the_transactions_end() {
        let mut cursor = StreamCursor::resuming(at(100, 0));
        cursor.begin();
        cursor.change();
        cursor.commit(150);
        assert_eq!(cursor.position(), at(150, 0));
    }

    #[test]
    fn a_keep_alive_moves_an_idle_position_but_never_one_inside_a_transaction() {
        let mut cursor = StreamCursor::resuming(at(100, 0));
        cursor.idle_until(120);
        assert_eq!(cursor.position().lsn, 120);
        cursor.begin();
        cursor.change();
        cursor.idle_until(200);
        assert_eq!(cursor.position(), at(120, 1));
        // Nor while changes emitted before a restart are still to be passed over.
        let mut restarted = StreamCursor::resuming(at(120, 1));
        restarted.idle_until(300);
        assert_eq!(restarted.position(), at(120, 1));
    }

    #[test]
    fn a_transaction_shorter_than_what_was_emitted_of_it_is_noticed() {
        let mut cursor = StreamCursor::resuming(at(100, 3));
        cursor.begin();
        cursor.change();
        cursor.commit(140);
        assert!(cursor.skipped_past_end());
    }

    #[test]
    fn a_slot_that_confirmed_past_the_checkpoint_is_refused() {
        assert!(at(100, 0).check_resume(100).is_ok());
        assert!(at(100, 0).check_resume(90).is_ok());
        let refused = at(100, 2).check_resume(101).unwrap_err();
        assert!(matches!(refused, ResumeError::SlotAhead { .. }));
    }

    #[test]
    fn a_server_whose_wal_ends_before_the_position_is_refused() {
        assert!(at(100, 0).check_server(100).is_ok());
        assert!(at(100, 0).check_server(5000).is_ok());
        let refused = at(100, 0).check_server(99).unwrap_err();
        assert!(matches!(refused, ResumeError::ServerBehind { .. }));
    }

    #[test]
    fn lsns_read_and_write_as_postgresql_does() {
        assert_eq!(parse_lsn("16/B374D848"), Some(0x16_B374_D848));
        assert_eq!(lsn_text(0x16_B374_D848), "16/B374D848");
        assert_eq!(parse_lsn("0/0"), Some(0));
        assert_eq!(parse_lsn("nonsense"), None);
    }
}
