//! Reading a pipeline's committed checkpoints as a test checks them.

use std::path::Path;

/// One state file a retained manifest references.
pub struct ReferencedFile {
    /// The epoch whose manifest references it.
    pub epoch: u64,
    /// The operator whose state it holds.
    pub operator: String,
    /// The subtask whose state it holds.
    pub subtask: u64,
    /// Its path, relative to the pipeline's directory.
    pub path: String,
    /// Whether an earlier epoch wrote it (it lies outside the manifest's own directory).
    pub reused: bool,
}

/// Every state file the committed manifests under `pipeline` (a pipeline's state
/// directory) reference. Fails if one of them is missing: garbage collection must keep
/// every file a retained checkpoint needs, also files in deleted epochs' directories.
pub fn referenced_files(pipeline: &Path) -> Vec<ReferencedFile> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(pipeline.join("checkpoints")).unwrap() {
        let epoch_dir = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(epoch_dir.join("_manifest.json")) else {
            continue;
        };
        let own = format!(
            "checkpoints/{}/",
            epoch_dir.file_name().unwrap().to_string_lossy()
        );
        let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
        let epoch = manifest["epoch"].as_u64().unwrap();
        for op in manifest["operators"].as_array().unwrap() {
            for subtask in op["subtasks"].as_array().unwrap() {
                for file in subtask["files"].as_array().unwrap() {
                    let path = file["path"].as_str().unwrap().to_string();
                    assert!(
                        pipeline.join(&path).exists(),
                        "GC deleted {path}, which a retained manifest references"
                    );
                    files.push(ReferencedFile {
                        epoch,
                        operator: op["operator"].as_str().unwrap().to_string(),
                        subtask: subtask["subtask"].as_u64().unwrap(),
                        reused: !path.starts_with(&own),
                        path,
                    });
                }
            }
        }
    }
    files
}
