//! Whether a job graph can start from a savepoint or checkpoint: which operators'
//! state restores (and at which parallelism), which operators are new, which state
//! would be dropped, and which state no longer fits its operator.

use crate::graph::{JobGraph, NodeKind};
use riffle_state::Manifest;
use std::fmt;

/// What happens to one operator's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateFate {
    /// Restored at the parallelism it was taken at.
    Restored,
    /// Restored at another parallelism: key groups are redistributed.
    Rescaled { from: usize, to: usize },
    /// The new plan has the operator, the state has nothing for it: it starts empty.
    New,
    /// The state has an operator the new plan lacks: its state is dropped (only with
    /// `--allow-non-restored-state`).
    Dropped,
    /// The state does not fit the new plan's operator of the same id (the reason).
    Mismatch(String),
}

impl fmt::Display for StateFate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateFate::Restored => write!(f, "restore"),
            StateFate::Rescaled { from, to } => write!(f, "restore, rescaled {from} → {to}"),
            StateFate::New => write!(f, "new (starts empty)"),
            StateFate::Dropped => write!(f, "DROP (not in the new plan)"),
            StateFate::Mismatch(why) => write!(f, "MISMATCH: {why}"),
        }
    }
}

/// One operator's line of a [`PlanCheck`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorCheck {
    /// The operator id.
    pub operator: String,
    /// What happens to its state.
    pub fate: StateFate,
    /// State rows' files in the savepoint (0 for new operators).
    pub files: usize,
}

/// The outcome of checking a plan against stored state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanCheck {
    /// One line per stateful operator of either side, in plan order, dropped last.
    pub operators: Vec<OperatorCheck>,
}

impl PlanCheck {
    /// Compares `graph` with the state `manifest` holds.
    pub fn new(manifest: &Manifest, graph: &JobGraph) -> Self {
        let mut operators = Vec::new();
        for node in graph.nodes().iter().filter(|n| n.is_stateful()) {
            let Some(entry) = manifest.operators.iter().find(|o| o.operator == node.id.0) else {
                operators.push(OperatorCheck {
                    operator: node.id.0.clone(),
                    fate: StateFate::New,
                    files: 0,
                });
                continue;
            };
            let is_source = matches!(node.kind, NodeKind::Source { .. });
            let fate = if entry.max_parallelism != graph.max_parallelism {
                StateFate::Mismatch(format!(
                    "state has {} key groups (max parallelism), the job {}; key groups cannot change — run with --max-parallelism {}",
                    entry.max_parallelism, graph.max_parallelism, entry.max_parallelism
                ))
            } else if let Some(why) = changed(entry, node, is_source) {
                StateFate::Mismatch(why)
            } else if entry.parallelism == node.parallelism {
                StateFate::Restored
            } else {
                let can_rescale = match &node.kind {
                    NodeKind::Source { factory, .. } => factory.can_rescale(),
                    _ => true,
                };
                if can_rescale {
                    StateFate::Rescaled {
                        from: entry.parallelism,
                        to: node.parallelism,
                    }
                } else {
                    StateFate::Mismatch(format!(
                        "the source was saved at parallelism {} and cannot change it",
                        entry.parallelism
                    ))
                }
            };
            operators.push(OperatorCheck {
                operator: node.id.0.clone(),
                fate,
                files: entry.subtasks.iter().map(|s| s.files.len()).sum(),
            });
        }
        for entry in &manifest.operators {
            let in_plan = graph
                .nodes()
                .iter()
                .any(|n| n.id.0 == entry.operator && n.is_stateful());
            if !in_plan {
                operators.push(OperatorCheck {
                    operator: entry.operator.clone(),
                    fate: StateFate::Dropped,
                    files: entry.subtasks.iter().map(|s| s.files.len()).sum(),
                });
            }
        }
        Self { operators }
    }

    /// Operators whose state would be dropped.
    pub fn dropped(&self) -> Vec<&str> {
        self.with(|f| matches!(f, StateFate::Dropped))
    }

    /// Operators whose state does not fit.
    pub fn mismatched(&self) -> Vec<&str> {
        self.with(|f| matches!(f, StateFate::Mismatch(_)))
    }

    fn with(&self, pick: impl Fn(&StateFate) -> bool) -> Vec<&str> {
        self.operators
            .iter()
            .filter(|o| pick(&o.fate))
            .map(|o| o.operator.as_str())
            .collect()
    }

    /// Why the job may not start from this state, if it may not: any mismatch, or
    /// dropped state without `allow_non_restored`.
    pub fn refusal(&self, allow_non_restored: bool) -> Option<String> {
        // One line per distinct reason, naming every operator it applies to.
        let mut reasons: Vec<(&str, Vec<String>)> = Vec::new();
        for o in &self.operators {
            if let StateFate::Mismatch(why) = &o.fate {
                let name = format!("`{}`", o.operator);
                match reasons.iter_mut().find(|(r, _)| r == why) {
                    Some((_, names)) => names.push(name),
                    None => reasons.push((why.as_str(), vec![name])),
                }
            }
        }
        let mut problems: Vec<String> = reasons
            .into_iter()
            .map(|(why, names)| format!("{}: {why}", names.join(", ")))
            .collect();
        let dropped = self.dropped();
        if !dropped.is_empty() && !allow_non_restored {
            problems.push(format!(
                "the state holds operator(s) the new plan does not have: {}; pass --allow-non-restored-state to drop their state",
                dropped.iter().map(|d| format!("`{d}`")).collect::<Vec<_>>().join(", ")
            ));
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }
}

/// How an operator changed since its state was taken, if it did in a way its state
/// may not fit. Sources may change their description (a generator's event count, a
/// file list); operators may not (another window size or aggregate reads other state).
fn changed(
    entry: &riffle_state::OperatorEntry,
    node: &crate::graph::Node,
    is_source: bool,
) -> Option<String> {
    if let Some(saved) = &entry.output_schema {
        let now = node.output_columns();
        if *saved != now {
            return Some(format!(
                "its output columns were ({saved}), the new plan's are ({now})"
            ));
        }
    }
    match &entry.description {
        Some(saved) if !is_source && *saved != node.describe() => Some(format!(
            "it was `{saved}`, the new plan's operator of this id is `{}`",
            node.describe()
        )),
        _ => None,
    }
}
