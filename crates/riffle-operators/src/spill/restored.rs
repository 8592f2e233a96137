//! Groups restored straight into the spill tier, gathered until there are enough to
//! write as one sorted run (docs/engine.md, "State beyond memory").
//!
//! A restore that goes through memory interns every group, spills the coldest, and
//! rebuilds what is left, and writes each spilled group through the tier's journal and
//! memtable. Written this way instead, a restored group costs its encoding, a sort, and
//! its bytes in one table file.

/// Restored groups in the order they came: later rows of a key replace earlier ones.
#[derive(Default)]
pub(crate) struct RestoredGroups {
    /// Every key and value, back to back.
    bytes: Vec<u8>,
    /// Per group: where its key starts in `bytes`, its key's length, its value's.
    groups: Vec<(usize, u32, u32)>,
}

impl RestoredGroups {
    /// Adds a group: `key`'s bytes and its encoded state.
    pub(crate) fn push(&mut self, key: &[u8], value: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
        // Keys are at most 64 KiB (the tier's limit) and values are one group's state.
        self.groups
            .push((start, key.len() as u32, value.len() as u32));
    }

    /// Bytes of the groups held (keys, values and their index).
    pub(crate) fn held_bytes(&self) -> usize {
        self.bytes.len() + self.groups.len() * std::mem::size_of::<(usize, u32, u32)>()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Each key once, in ascending byte order, with the value it was pushed with last,
    /// until `each` fails; then empties.
    pub(crate) fn drain_sorted<E>(
        &mut self,
        mut each: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let key =
            |&(start, key_len, _): &(usize, u32, u32)| &self.bytes[start..start + key_len as usize];
        let value = |&(start, key_len, value_len): &(usize, u32, u32)| {
            let from = start + key_len as usize;
            &self.bytes[from..from + value_len as usize]
        };
        let mut order: Vec<u32> = (0..self.groups.len() as u32).collect();
        // Stable: of equal keys, the one pushed last ends its run.
        order.sort_by(|&a, &b| key(&self.groups[a as usize]).cmp(key(&self.groups[b as usize])));
        let written = order.iter().enumerate().try_for_each(|(i, &g)| {
            let group = &self.groups[g as usize];
            let last_of_key = order
                .get(i + 1)
                .is_none_or(|&next| key(&self.groups[next as usize]) != key(group));
            if last_of_key {
                each(key(group), value(group))
            } else {
                Ok(())
            }
        });
        self.bytes.clear();
        self.groups.clear();
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_out_once_in_order_with_the_value_pushed_last() {
        let mut groups = RestoredGroups::default();
        for (k, v) in [
            ("b", "1"),
            ("a", "2"),
            ("c", "3"),
            ("b", "4"),
            ("a", "5"),
            ("b", "6"),
        ] {
            groups.push(k.as_bytes(), v.as_bytes());
        }
        let mut out = Vec::new();
        groups
            .drain_sorted(|k, v| {
                out.push((k.to_vec(), v.to_vec()));
                Ok::<_, ()>(())
            })
            .unwrap();
        let expected: Vec<(Vec<u8>, Vec<u8>)> = [("a", "5"), ("b", "6"), ("c", "3")]
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(out, expected);
        assert!(groups.is_empty());
    }

    #[test]
    fn a_key_that_prefixes_another_sorts_first() {
        let mut groups = RestoredGroups::default();
        groups.push(b"ab", b"long");
        groups.push(b"a", b"short");
        let mut keys = Vec::new();
        groups
            .drain_sorted(|k, _| {
                keys.push(k.to_vec());
                Ok::<_, ()>(())
            })
            .unwrap();
        assert_eq!(keys, [b"a".to_vec(), b"ab".to_vec()]);
    }
}
