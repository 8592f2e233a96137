//! What a join of changelogs emits for one change of one key: the decisions, apart from
//! Arrow. A key holds each side's rows as a multiset (a row, in Arrow's row format, with
//! how many times it is held); a row added joins every row the other side holds, a row
//! withdrawn withdraws every pair it made. On an outer side a row with no partner is
//! emitted padded, and withdrawn when its key's first partner arrives — and padded
//! again when the last partner leaves (docs/engine.md, "Joins of changelogs"). Rows
//! whose key holds a NULL are held by side in a `KeyRows` of their own: never matched,
//! padded on an outer side, and a withdrawal of one must find it like any other.

use riffle_core::RowKind;
use std::collections::HashMap;
use std::sync::Arc;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// A row's bytes in Arrow's row format, shared by the state and the rows emitted.
pub(super) type RowBytes = Arc<[u8]>;

/// How often a side holds one row, and the event time it was first added at (joined
/// rows carry the later of their rows' times; a withdrawal repeats the time the row it
/// takes back was emitted with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    pub count: u64,
    pub ts: i64,
}

/// One side's rows of one key.
#[derive(Debug, Default)]
pub(super) struct SideRows {
    rows: Distinct,
    total: u64,
}

/// A side's distinct rows of one key. Most keys of a side hold one (a table's row per
/// key), kept inline; a second distinct row moves them into a map, boxed (a map with its
/// hasher's state is some 250 bytes, which every key would otherwise carry).
#[derive(Debug, Default)]
enum Distinct {
    #[default]
    None,
    One(RowBytes, Held),
    Many(Box<FastMap<RowBytes, Held>>),
}

impl SideRows {
    /// Each distinct row and how it is held.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&RowBytes, &Held)> {
        let (one, many) = match &self.rows {
            Distinct::None => (None, None),
            Distinct::One(r, h) => (Some((r, h)), None),
            Distinct::Many(m) => (None, Some(m)),
        };
        one.into_iter()
            .chain(many.into_iter().flat_map(|m| m.iter()))
    }

    /// Holds `row` `held.count` more times (a restore).
    pub(super) fn hold(&mut self, row: RowBytes, held: Held) {
        self.total += held.count;
        match &mut self.rows {
            Distinct::None => self.rows = Distinct::One(row, held),
            Distinct::One(r, h) if *r == row => h.count += held.count,
            Distinct::One(..) => {
                let Distinct::One(r, h) = std::mem::take(&mut self.rows) else {
                    unreachable!("matched One above")
                };
                let mut map = FastMap::default();
                map.insert(r, h);
                map.insert(row, held);
                self.rows = Distinct::Many(Box::new(map));
            }
            Distinct::Many(m) => {
                m.entry(row)
                    .and_modify(|h| h.count += held.count)
                    .or_insert(held);
            }
        }
    }

    /// Takes one of `row` back: the held row (shared with the state) and how it was
    /// held, or `None` when it is not held.
    fn release(&mut self, row: &[u8]) -> Option<(RowBytes, Held)> {
        let (kept, was) = match &mut self.rows {
            Distinct::None => return None,
            Distinct::One(r, h) if r.as_ref() == row => {
                let was = (r.clone(), *h);
                h.count -= 1;
                (h.count > 0, was)
            }
            Distinct::One(..) => return None,
            Distinct::Many(m) => {
                let (r, h) = m.get_key_value(row)?;
                let was = (r.clone(), *h);
                let h = m.get_mut(row)?;
                h.count -= 1;
                if h.count == 0 {
                    m.remove(row);
                }
                (true, was)
            }
        };
        if !kept {
            self.rows = Distinct::None;
        }
        self.total -= 1;
        Some(was)
    }

    fn is_empty(&self) -> bool {
        self.total == 0
    }
}

/// Both sides' rows of one key.
#[derive(Debug, Default)]
pub(super) struct KeyRows {
    pub sides: [SideRows; 2],
}

impl KeyRows {
    /// Whether neither side holds a row (a key whose rows were all withdrawn).
    pub(super) fn is_empty(&self) -> bool {
        self.sides.iter().all(SideRows::is_empty)
    }
}

/// A row to emit: its kind, the left and right rows (`None`: padded with NULLs), and its
/// event time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Emit {
    pub kind: RowKind,
    pub rows: [Option<RowBytes>; 2],
    pub ts: i64,
}

/// A withdrawal of a row the side does not hold: the input is not a changelog of the
/// rows it added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NotHeld;

/// Which sides emit their unmatched rows padded (LEFT: `[true, false]`).
pub(super) type Outer = [bool; 2];

/// The pair of `mine` (of `side`) and `theirs`, in left, right order.
fn pair(side: usize, mine: Option<RowBytes>, theirs: Option<RowBytes>) -> [Option<RowBytes>; 2] {
    if side == 0 {
        [mine, theirs]
    } else {
        [theirs, mine]
    }
}

/// Emits `count` copies of a row.
fn emit_n(out: &mut Vec<Emit>, count: u64, emit: Emit) {
    for _ in 1..count {
        out.push(emit.clone());
    }
    if count > 0 {
        out.push(emit);
    }
}

impl KeyRows {
    /// `row` (event time `ts`) added to `side` (`+I`, `+U`): it joins every row the
    /// other side holds; on an outer side with no partner it is emitted padded. The
    /// other side's padded rows are withdrawn first when it is their first partner.
    pub(super) fn add(
        &mut self,
        side: usize,
        row: RowBytes,
        ts: i64,
        outer: Outer,
        out: &mut Vec<Emit>,
    ) {
        let other = 1 - side;
        let theirs = &self.sides[other];
        if theirs.is_empty() {
            if outer[side] {
                out.push(Emit {
                    kind: RowKind::Insert,
                    rows: pair(side, Some(row.clone()), None),
                    ts,
                });
            }
        } else {
            if outer[other] && self.sides[side].is_empty() {
                for (r, h) in theirs.iter() {
                    let rows = pair(side, None, Some(r.clone()));
                    emit_n(
                        out,
                        h.count,
                        Emit {
                            kind: RowKind::Delete,
                            rows,
                            ts: h.ts,
                        },
                    );
                }
            }
            for (r, h) in theirs.iter() {
                let rows = pair(side, Some(row.clone()), Some(r.clone()));
                let ts = ts.max(h.ts);
                emit_n(
                    out,
                    h.count,
                    Emit {
                        kind: RowKind::Insert,
                        rows,
                        ts,
                    },
                );
            }
        }
        self.sides[side].hold(row, Held { count: 1, ts });
    }

    /// `row` withdrawn from `side` (`-U`, `-D`): every pair it made is withdrawn (its
    /// padded row, if it had none); when it was the other side's last partner, that
    /// side's rows come back padded (an outer side).
    ///
    /// # Errors
    /// [`NotHeld`]: the side holds no such row; nothing was emitted or changed.
    pub(super) fn withdraw(
        &mut self,
        side: usize,
        row: &[u8],
        outer: Outer,
        out: &mut Vec<Emit>,
    ) -> Result<(), NotHeld> {
        let other = 1 - side;
        let (row, held) = self.sides[side].release(row).ok_or(NotHeld)?;
        let theirs = &self.sides[other];
        if theirs.is_empty() {
            if outer[side] {
                out.push(Emit {
                    kind: RowKind::Delete,
                    rows: pair(side, Some(row), None),
                    ts: held.ts,
                });
            }
            return Ok(());
        }
        for (r, h) in theirs.iter() {
            let rows = pair(side, Some(row.clone()), Some(r.clone()));
            let ts = held.ts.max(h.ts);
            emit_n(
                out,
                h.count,
                Emit {
                    kind: RowKind::Delete,
                    rows,
                    ts,
                },
            );
        }
        if outer[other] && self.sides[side].is_empty() {
            for (r, h) in theirs.iter() {
                let rows = pair(side, None, Some(r.clone()));
                emit_n(
                    out,
                    h.count,
                    Emit {
                        kind: RowKind::Insert,
                        rows,
                        ts: h.ts,
                    },
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEFT: usize = 0;
    const RIGHT: usize = 1;
    const INNER: Outer = [false, false];
    const LEFT_OUTER: Outer = [true, false];
    const FULL: Outer = [true, true];

    fn row(text: &str) -> RowBytes {
        Arc::from(text.as_bytes())
    }

    /// Emits as (kind, left, right, ts), sorted, for comparison as a multiset.
    fn shown(out: &[Emit]) -> Vec<(&'static str, String, String, i64)> {
        let text = |r: &Option<RowBytes>| match r {
            Some(b) => String::from_utf8_lossy(b).into_owned(),
            None => "∅".to_string(),
        };
        let mut v: Vec<_> = out
            .iter()
            .map(|e| (e.kind.short(), text(&e.rows[0]), text(&e.rows[1]), e.ts))
            .collect();
        v.sort();
        v
    }

    fn e(kind: &'static str, l: &str, r: &str, ts: i64) -> (&'static str, String, String, i64) {
        (kind, l.to_string(), r.to_string(), ts)
    }

    #[test]
    fn an_added_row_joins_every_row_the_other_side_holds_at_the_later_time() {
        let mut k = KeyRows::default();
        let mut out = Vec::new();
        k.add(RIGHT, row("r1"), 5, INNER, &mut out);
        k.add(RIGHT, row("r2"), 1, INNER, &mut out);
        assert!(
            out.is_empty(),
            "an inner join emits nothing without a partner"
        );
        k.add(LEFT, row("l"), 3, INNER, &mut out);
        assert_eq!(shown(&out), [e("+I", "l", "r1", 5), e("+I", "l", "r2", 3)]);
    }

    #[test]
    fn a_withdrawn_row_withdraws_every_pair_it_made_with_the_times_they_were_emitted_at() {
        let mut k = KeyRows::default();
        let mut out = Vec::new();
        k.add(LEFT, row("l"), 3, INNER, &mut out);
        k.add(RIGHT, row("r1"), 5, INNER, &mut out);
        k.add(RIGHT, row("r2"), 1, INNER, &mut out);
        out.clear();
        k.withdraw(LEFT, &row("l"), INNER, &mut out).unwrap();
        assert_eq!(shown(&out), [e("-D", "l", "r1", 5), e("-D", "l", "r2", 3)]);
        out.clear();
        k.add(LEFT, row("l2"), 0, INNER, &mut out);
        assert_eq!(out.len(), 2, "the withdrawn row no longer joins: {out:?}");
    }

    #[test]
    fn duplicate_rows_on_both_sides_multiply() {
        let mut k = KeyRows::default();
        let mut out = Vec::new();
        k.add(LEFT, row("l"), 0, INNER, &mut out);
        k.add(LEFT, row("l"), 0, INNER, &mut out);
        k.add(RIGHT, row("r"), 0, INNER, &mut out);
        k.add(RIGHT, row("r"), 0, INNER, &mut out);
        assert_eq!(out.len(), 4, "2 × 2 pairs");
        out.clear();
        k.withdraw(RIGHT, &row("r"), INNER, &mut out).unwrap();
        assert_eq!(shown(&out), [e("-D", "l", "r", 0), e("-D", "l", "r", 0)]);
    }

    #[test]
    fn an_unmatched_outer_row_is_padded_until_its_first_partner_and_padded_again_after_its_last() {
        let mut k = KeyRows::default();
        let mut out = Vec::new();
        k.add(LEFT, row("l"), 2, LEFT_OUTER, &mut out);
        assert_eq!(shown(&out), [e("+I", "l", "∅", 2)]);
        out.clear();
        k.add(RIGHT, row("r"), 7, LEFT_OUTER, &mut out);
        assert_eq!(out[0].kind, RowKind::Delete, "the padded row leaves first");
        assert_eq!(shown(&out), [e("+I", "l", "r", 7), e("-D", "l", "∅", 2)]);
        out.clear();
        k.add(RIGHT, row("r2"), 8, LEFT_OUTER, &mut out);
        assert_eq!(
            shown(&out),
            [e("+I", "l", "r2", 8)],
            "no second padded withdrawal"
        );
        out.clear();
        k.withdraw(RIGHT, &row("r"), LEFT_OUTER, &mut out).unwrap();
        k.withdraw(RIGHT, &row("r2"), LEFT_OUTER, &mut out).unwrap();
        assert_eq!(
            shown(&out),
            [
                e("+I", "l", "∅", 2),
                e("-D", "l", "r", 7),
                e("-D", "l", "r2", 8)
            ]
        );
        assert_eq!(
            out.last().map(|e| e.kind),
            Some(RowKind::Insert),
            "padded again last"
        );
    }

    #[test]
    fn a_full_join_pads_whichever_side_is_alone() {
        let mut k = KeyRows::default();
        let mut out = Vec::new();
        k.add(RIGHT, row("r"), 1, FULL, &mut out);
        k.add(LEFT, row("l"), 2, FULL, &mut out);
        k.withdraw(RIGHT, &row("r"), FULL, &mut out).unwrap();
        assert_eq!(
            out.iter()
                .map(|e| (e.kind.short(), e.rows[0].is_some(), e.rows[1].is_some()))
                .collect::<Vec<_>>(),
            [
                ("+I", false, true),
                ("-D", false, true),
                ("+I", true, true),
                ("-D", true, true),
                ("+I", true, false),
            ]
        );
    }

    #[test]
    fn an_inner_side_that_empties_pads_nothing() {
        let mut k = KeyRows::default();
        let mut out = Vec::new();
        k.add(LEFT, row("l"), 0, LEFT_OUTER, &mut out);
        k.add(RIGHT, row("r"), 0, LEFT_OUTER, &mut out);
        out.clear();
        k.withdraw(LEFT, &row("l"), LEFT_OUTER, &mut out).unwrap();
        assert_eq!(
            shown(&out),
            [e("-D", "l", "r", 0)],
            "the right side is not outer"
        );
    }

    #[test]
    fn withdrawing_a_row_never_added_changes_nothing_and_is_refused() {
        let mut k = KeyRows::default();
        let mut out = Vec::new();
        k.add(LEFT, row("l"), 0, FULL, &mut out);
        out.clear();
        assert_eq!(
            k.withdraw(LEFT, &row("other"), FULL, &mut out),
            Err(NotHeld)
        );
        assert_eq!(k.withdraw(RIGHT, &row("l"), FULL, &mut out), Err(NotHeld));
        assert!(out.is_empty());
        k.withdraw(LEFT, &row("l"), FULL, &mut out).unwrap();
        assert_eq!(shown(&out), [e("-D", "l", "∅", 0)]);
    }

    #[test]
    fn rows_with_a_null_key_are_held_apart_and_only_ever_padded() {
        // The operator holds them in a `KeyRows` of their side alone.
        let mut nulls = KeyRows::default();
        let mut out = Vec::new();
        nulls.add(LEFT, row("l"), 4, LEFT_OUTER, &mut out);
        nulls
            .withdraw(LEFT, &row("l"), LEFT_OUTER, &mut out)
            .unwrap();
        assert_eq!(shown(&out), [e("+I", "l", "∅", 4), e("-D", "l", "∅", 4)]);
        assert_eq!(
            nulls.withdraw(LEFT, &row("l"), LEFT_OUTER, &mut out),
            Err(NotHeld)
        );
        let mut inner_side = KeyRows::default();
        inner_side.add(RIGHT, row("r"), 4, LEFT_OUTER, &mut out);
        assert_eq!(
            out.len(),
            2,
            "an inner side's row with a NULL key emits nothing"
        );
    }
}
