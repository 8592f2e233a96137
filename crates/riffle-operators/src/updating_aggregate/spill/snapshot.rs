//! How snapshots write the tier's groups (docs/engine.md, "State beyond memory"): all
//! of them into a chain started afresh, streamed from a snapshot of the tier by the
//! checkpoint's writer; in pieces, in key order, while a rolling restart keeps the old
//! chain; and, into every delta, the groups that left memory changed since the last
//! snapshot.

use super::{Tier, UpdatingAggregate};
use crate::aggregate::GroupKeys;
use crate::spill::ValueCodec;
use crate::window::keyed_state_batch;
use riffle_core::arrow::datatypes::SchemaRef;
use riffle_core::{Error, RecordBatch, Result, StreamedBatches};

/// Groups spilled or read back per store pass when a snapshot lists the tier.
const CHUNK: usize = 8192;

/// The fewest spilled groups a snapshot writes while a rolling restart goes on (fewer
/// in tests, so that a few hundred groups take several snapshots).
const MIN_ROLL_GROUPS: usize = if cfg!(test) { 16 } else { 8192 };

/// Snapshots a rolling restart takes at most: the one after writes all that is left
/// (groups spilled beyond the cursor faster than it moves would hold the old chain, and
/// its files, forever).
const MAX_ROLL_SNAPSHOTS: usize = crate::delta_log::MAX_CHAIN;

/// How far a rolling restart has written the tier's groups into the new chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Rolled {
    /// None yet.
    Nothing,
    /// Every group up to this key (in key order).
    Through(Vec<u8>),
}

impl Tier {
    /// Spilled groups a snapshot writes while rolling: half the budget's worth, at
    /// least [`MIN_ROLL_GROUPS`].
    fn roll_groups(&self) -> usize {
        let per_group = self
            .spilled_bytes()
            .checked_div(self.spilled() as u64)
            .unwrap_or(1)
            .max(1);
        usize::try_from(self.memory.bytes / 2 / per_group)
            .unwrap_or(usize::MAX)
            .max(MIN_ROLL_GROUPS)
    }
}

impl UpdatingAggregate {
    /// Adds the spilled groups to a snapshot's new chain: all of them when it started
    /// afresh, as a streamed part the snapshot carries (returned), so that they are
    /// never all in memory; while the delta log rolls, the next piece, and once all
    /// are in, the old chain goes.
    pub(in crate::updating_aggregate) fn write_spilled(
        &mut self,
    ) -> Result<Option<StreamedBatches>> {
        let Some(tier) = &mut self.tier else {
            return Ok(None);
        };
        if !self.delta.rolling() {
            tier.rolled = None;
            if self.delta.restarted() {
                if let Some(streamed) = self.streamed_tier()? {
                    let groups = self.tier.as_ref().map_or(0, Tier::spilled);
                    self.delta
                        .push_streamed(streamed.placeholder().clone(), groups);
                    return Ok(Some(streamed));
                }
            }
            return Ok(None);
        }
        if self.delta.restarted() || tier.rolled.is_none() {
            tier.rolled = Some(Rolled::Nothing);
            tier.roll_snapshots = 0;
        }
        tier.roll_snapshots += 1;
        let n = if tier.roll_snapshots > MAX_ROLL_SNAPSHOTS {
            usize::MAX
        } else {
            tier.roll_groups()
        };
        let after = match &tier.rolled {
            Some(Rolled::Through(key)) => Some(key.clone()),
            _ => None,
        };
        let groups = match &tier.store {
            Some(store) => store.chunk_after(after.as_deref(), n)?,
            None => Vec::new(),
        };
        let last = groups.last().map(|(k, _)| k.clone());
        if !groups.is_empty() {
            let batch = self.spilled_batch(&groups)?;
            self.delta.push_outside(batch);
        }
        match last.filter(|_| groups.len() == n) {
            Some(key) => {
                if let Some(tier) = &mut self.tier {
                    tier.rolled = Some(Rolled::Through(key));
                }
            }
            None => {
                self.delta.rolled();
                if let Some(tier) = &mut self.tier {
                    tier.rolled = None;
                }
            }
        }
        Ok(None)
    }

    /// Adds the groups that left memory changed since the last snapshot to this
    /// snapshot, read from the tier (after [`write_spilled`](Self::write_spilled)); a
    /// snapshot that wrote the whole tier only forgets them.
    pub(in crate::updating_aggregate) fn write_left_changed(&mut self) -> Result<()> {
        let whole_tier = self.delta.restarted() && !self.delta.rolling();
        let Some(mut store) = self.tier.as_mut().and_then(|t| t.store.take()) else {
            return Ok(());
        };
        let mut batches = Vec::new();
        let drained = if whole_tier {
            store.forget_changed()
        } else {
            store.drain_changed(CHUNK, |groups| {
                batches.push(self.spilled_batch(groups)?);
                Ok(())
            })
        };
        if let Some(tier) = &mut self.tier {
            tier.store = Some(store);
        }
        drained?;
        for batch in batches {
            self.delta.push_outside(batch);
        }
        Ok(())
    }

    /// Every spilled group, as a streamed part of a snapshot that starts a new chain:
    /// read from a snapshot of the tier by the writer of the checkpoint, a chunk at a
    /// time, with key and value decoders of its own. None without a tier.
    fn streamed_tier(&self) -> Result<Option<StreamedBatches>> {
        let Some(tier) = &self.tier else {
            return Ok(None);
        };
        let Some(store) = tier.store.as_ref().filter(|s| s.len() > 0) else {
            return Ok(None); // (a count after a restore's runs is a bound: 0 is empty)
        };
        let codec = (tier.codec.as_ref()).ok_or_else(|| Error::Spill("no value codec".into()))?;
        let decode = TierDecoder {
            keys: GroupKeys::new(self.key_schema.clone())?,
            codec: ValueCodec::new(codec.fields().to_vec())?,
            key_schema: self.key_schema.clone(),
            max_parallelism: self.max_parallelism,
        };
        let schema = decode.batch(&[])?.schema();
        let chunks = store.snapshot_chunks(CHUNK);
        let source = chunks.map(move |groups| decode.batch(&groups?));
        Ok(Some(StreamedBatches::new(schema, Box::new(source))))
    }

    /// Spilled groups (key bytes, encoded state) as a state batch.
    fn spilled_batch(&self, groups: &[(Vec<u8>, Vec<u8>)]) -> Result<RecordBatch> {
        let codec = self
            .tier
            .as_ref()
            .and_then(|t| t.codec.as_ref())
            .ok_or_else(|| Error::Spill("no value codec".into()))?;
        tier_batch(
            (&self.table, codec),
            &self.key_schema,
            self.max_parallelism,
            groups,
        )
    }
}

/// What turns the tier's groups into state batches away from the operator (a streamed
/// part's source): decoders of its own, the same as the operator's.
struct TierDecoder {
    keys: GroupKeys,
    codec: ValueCodec,
    key_schema: SchemaRef,
    max_parallelism: u16,
}

impl TierDecoder {
    fn batch(&self, groups: &[(Vec<u8>, Vec<u8>)]) -> Result<RecordBatch> {
        tier_batch(
            (&self.keys, &self.codec),
            &self.key_schema,
            self.max_parallelism,
            groups,
        )
    }
}

/// Spilled groups (key bytes, encoded state) as a state batch, the keys read by `keys`
/// and the state by `codec`.
fn tier_batch(
    (keys, codec): (&GroupKeys, &ValueCodec),
    key_schema: &SchemaRef,
    max_parallelism: u16,
    groups: &[(Vec<u8>, Vec<u8>)],
) -> Result<RecordBatch> {
    let key_bytes: Vec<&[u8]> = groups.iter().map(|(k, _)| k.as_slice()).collect();
    let key_columns = keys.keys_from_bytes(&key_bytes)?;
    let state = if codec.fields().is_empty() {
        Vec::new()
    } else {
        let values: Vec<&[u8]> = groups.iter().map(|(_, v)| v.as_slice()).collect();
        codec
            .fields()
            .iter()
            .cloned()
            .zip(codec.decode(&values)?)
            .collect()
    };
    keyed_state_batch(key_columns, key_schema, max_parallelism, state)
}
