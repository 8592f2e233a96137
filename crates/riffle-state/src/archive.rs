//! Portable savepoint archives: one tar file that `riffle savepoint import` turns back
//! into a savepoint under any state root.
//!
//! ```text
//!  riffle-savepoint/_manifest.json             first: the savepoint's manifest
//!  riffle-savepoint/{operator}/{s}-{p}.parquet state files (size + CRC32C in the manifest)
//!  riffle-savepoint/_checksums.json            last: CRC32C of every member, manifest too
//! ```
//!
//! Import checks every member against the manifest as it streams in and writes the
//! manifest (the savepoint's commit point) only after the last member checked out; on
//! any error it deletes what it wrote, so a damaged archive leaves nothing behind.

use crate::error::{StateError, StateResult};
use crate::layout::{check_label, savepoint_dir_name};
use crate::manifest::Manifest;
use crate::store::CheckpointStore;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};

/// The directory every member lies in.
const ROOT: &str = "riffle-savepoint";
const MANIFEST: &str = "_manifest.json";
const CHECKSUMS: &str = "_checksums.json";
/// The most a manifest or the checksums member may hold (a manifest of many thousand
/// files is a few MiB).
const METADATA_LIMIT: u64 = 256 << 20;

/// `_checksums.json`: CRC32C of every member, by name inside [`ROOT`].
#[derive(Debug, Serialize, Deserialize)]
struct Checksums {
    format_version: u32,
    crc32c: BTreeMap<String, u32>,
}

/// What an export wrote.
#[derive(Debug, Clone, Copy)]
pub struct ExportSummary {
    /// State files in the archive.
    pub files: usize,
    /// Bytes of state (members other than manifest and checksums).
    pub bytes: u64,
}

fn append(builder: &mut tar::Builder<impl Write>, name: &str, data: &[u8]) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_cksum();
    builder.append_data(&mut header, format!("{ROOT}/{name}"), data)
}

/// Writes savepoint `label` of `store` as a tar archive to `out`.
///
/// # Errors
/// No such savepoint; a state file is missing or damaged (checked against the
/// manifest before it is archived); storage or write failures.
pub async fn export_savepoint(
    store: &CheckpointStore,
    label: &str,
    out: impl Write,
    archive: &str,
) -> StateResult<ExportSummary> {
    let manifest = store
        .read_savepoint(label)
        .await?
        .ok_or_else(|| StateError::Savepoint {
            label: label.to_string(),
            message: "no such savepoint; `riffle savepoint list` shows what exists".into(),
        })?;
    let io = |e: std::io::Error| StateError::Io {
        path: archive.to_string(),
        source: e,
    };
    let prefix = format!("{}/", savepoint_dir_name(label));
    let manifest_bytes = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
    let mut crcs = BTreeMap::from([(MANIFEST.to_string(), crc32c::crc32c(&manifest_bytes))]);
    let mut builder = tar::Builder::new(out);
    append(&mut builder, MANIFEST, &manifest_bytes).map_err(io)?;
    let mut summary = ExportSummary { files: 0, bytes: 0 };
    for entry in manifest.files() {
        let bytes = store.read_bytes(&entry.path).await?;
        crate::state_file::check_bytes(entry, &bytes)?;
        let name = entry.path.strip_prefix(&prefix).unwrap_or(&entry.path);
        append(&mut builder, name, &bytes).map_err(io)?;
        crcs.insert(name.to_string(), entry.crc32c);
        summary.files += 1;
        summary.bytes += entry.bytes;
    }
    let checksums = Checksums {
        format_version: crate::FORMAT_VERSION,
        crc32c: crcs,
    };
    let checksums = serde_json::to_vec_pretty(&checksums).unwrap_or_default();
    append(&mut builder, CHECKSUMS, &checksums).map_err(io)?;
    builder
        .into_inner()
        .and_then(|mut w| w.flush())
        .map_err(io)?;
    Ok(summary)
}

/// Builds the error of an archive that cannot be read or imported.
fn archive_error(archive: &str) -> impl Fn(String) -> StateError + '_ {
    move |reason| StateError::Archive {
        archive: archive.to_string(),
        reason,
    }
}

/// The manifest an archive starts with (to learn its pipeline and label before
/// importing it).
///
/// # Errors
/// [`StateError::Archive`] when the archive does not start with a savepoint manifest.
pub fn archive_manifest(input: impl Read, archive: &str) -> StateResult<Manifest> {
    let bad = archive_error(archive);
    let mut reader = tar::Archive::new(input);
    let mut entries = reader
        .entries()
        .map_err(|e| bad(format!("not a tar archive: {e}")))?;
    let first = entries
        .next()
        .ok_or_else(|| bad("empty archive".into()))?
        .map_err(|e| bad(format!("not a tar archive: {e}")))?;
    serde_json::from_reader(first).map_err(|e| {
        bad(format!(
            "does not start with a savepoint manifest ({MANIFEST}): {e}"
        ))
    })
}

/// Imports a savepoint archive from `input` into `store` as `label` (default: the
/// label it was exported under). `archive` names the input in errors.
///
/// # Errors
/// [`StateError::Archive`] for an archive that is truncated, altered or not a riffle
/// savepoint (nothing is kept); the label is taken; storage failures.
pub async fn import_savepoint(
    store: &CheckpointStore,
    input: impl Read,
    archive: &str,
    label: Option<&str>,
) -> StateResult<Manifest> {
    let mut written = Vec::new();
    let result = import_members(store, input, archive, label, &mut written).await;
    if result.is_err() {
        // Nothing half-imported: the manifest was not written, remove the files.
        let paths: Vec<_> = written
            .iter()
            .map(|p: &String| store.layout().absolute(p))
            .collect();
        let _ = store.delete_paths(&paths).await;
        let dir = written.first().and_then(|p| {
            p.strip_prefix("savepoints/")
                .and_then(|rest| rest.split('/').next())
        });
        if let Some(dir) = dir {
            let _ = store.remove_local_dir(&store.layout().savepoint_dir(dir));
        }
    }
    result
}

async fn import_members(
    store: &CheckpointStore,
    input: impl Read,
    archive: &str,
    label: Option<&str>,
    written: &mut Vec<String>,
) -> StateResult<Manifest> {
    let bad = archive_error(archive);
    let mut reader = tar::Archive::new(input);
    let mut entries = reader
        .entries()
        .map_err(|e| bad(format!("not a tar archive: {e}")))?;
    // A member's size comes from its tar header, which anyone can write: it is
    // checked against what the member may hold before anything is allocated.
    let mut next_member = |limit: &dyn Fn(&str) -> u64| -> StateResult<Option<(String, Vec<u8>)>> {
        let Some(entry) = entries.next() else {
            return Ok(None);
        };
        let mut entry = entry.map_err(|e| bad(format!("truncated or damaged: {e}")))?;
        let name = entry
            .path()
            .map_err(|e| bad(format!("a member has an unreadable name: {e}")))?
            .to_string_lossy()
            .into_owned();
        let name = name
            .strip_prefix(&format!("{ROOT}/"))
            .ok_or_else(|| {
                bad(format!(
                    "member `{name}` lies outside `{ROOT}/`: not a riffle savepoint archive"
                ))
            })?
            .to_string();
        let (size, most) = (entry.size(), limit(&name));
        if size > most {
            return Err(bad(format!(
                "member `{name}` claims {size} bytes, more than the {most} it may hold: damaged or not a riffle savepoint archive"
            )));
        }
        let mut data = Vec::with_capacity(size as usize);
        entry
            .read_to_end(&mut data)
            .map_err(|e| bad(format!("member `{name}` is truncated: {e}")))?;
        Ok(Some((name, data)))
    };
    let (name, manifest_bytes) =
        next_member(&|_| METADATA_LIMIT)?.ok_or_else(|| bad("empty archive".into()))?;
    if name != MANIFEST {
        return Err(bad(format!(
            "the first member is `{name}`, a riffle savepoint archive starts with `{MANIFEST}`"
        )));
    }
    let exported: Manifest = serde_json::from_slice(&manifest_bytes)
        .map_err(|e| bad(format!("{MANIFEST} is not a valid manifest: {e}")))?;
    exported
        .validate()
        .map_err(|e| bad(format!("{MANIFEST}: {e}")))?;
    let Some(old_label) = exported.savepoint.clone() else {
        return Err(bad(format!("{MANIFEST} is not a savepoint's manifest")));
    };
    let new_label = label.unwrap_or(&old_label).to_string();
    check_label(&new_label).map_err(|message| StateError::Savepoint {
        label: new_label.clone(),
        message,
    })?;
    if store.read_savepoint(&new_label).await?.is_some() {
        return Err(StateError::Savepoint {
            label: new_label,
            message: "a savepoint of this name exists; import with --label <other>".into(),
        });
    }
    let (manifest, _) = crate::savepoints::savepoint_manifest(&exported, &new_label);
    let old_prefix = format!("{}/", savepoint_dir_name(&old_label));
    let expected: BTreeMap<String, (crate::FileEntry, String)> = exported
        .files()
        .zip(manifest.files())
        .map(|(old, new)| {
            let name = old.path.strip_prefix(&old_prefix).unwrap_or(&old.path);
            (name.to_string(), (old.clone(), new.path.clone()))
        })
        .collect();
    let mut seen = BTreeMap::new();
    let mut checksums = None;
    // A state file holds what the manifest says; other names are refused below.
    let limit = |name: &str| expected.get(name).map_or(METADATA_LIMIT, |(e, _)| e.bytes);
    while let Some((name, data)) = next_member(&limit)? {
        if name == CHECKSUMS {
            checksums = Some(data);
            continue;
        }
        if checksums.is_some() {
            return Err(bad(format!(
                "member `{name}` follows {CHECKSUMS}, which comes last"
            )));
        }
        let (entry, target) = expected
            .get(&name)
            .ok_or_else(|| bad(format!("member `{name}` is not in the manifest")))?;
        crate::state_file::check_bytes(entry, &data).map_err(|e| bad(e.to_string()))?;
        store.write_relative(target, Bytes::from(data)).await?;
        written.push(target.clone());
        seen.insert(name, entry.crc32c);
    }
    let checksums = checksums
        .ok_or_else(|| bad(format!("{CHECKSUMS} is missing: the archive is truncated")))?;
    let checksums: Checksums = serde_json::from_slice(&checksums)
        .map_err(|e| bad(format!("{CHECKSUMS} is not valid: {e}")))?;
    if checksums.crc32c.get(MANIFEST) != Some(&crc32c::crc32c(&manifest_bytes)) {
        return Err(bad(format!(
            "{MANIFEST} does not match its checksum: altered"
        )));
    }
    if let Some(missing) = expected.keys().find(|name| !seen.contains_key(*name)) {
        return Err(bad(format!(
            "state file `{missing}` is in the manifest but not in the archive"
        )));
    }
    for (name, crc) in &seen {
        if checksums.crc32c.get(name) != Some(crc) {
            return Err(bad(format!("member `{name}` does not match {CHECKSUMS}")));
        }
    }
    let paths: Vec<_> = written.iter().map(|p| store.layout().absolute(p)).collect();
    store.sync(&paths).await?;
    store.write_savepoint_manifest(&manifest).await?;
    Ok(manifest)
}
