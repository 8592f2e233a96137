//! One module per subcommand.

pub mod bench;
pub mod checkpointing;
pub mod checkpoints;
pub mod nexmark;
