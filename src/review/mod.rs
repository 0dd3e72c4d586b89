//! `codewhale review` (docs/REVIEW.md): the pieces that are not the
//! agent run — the diff under review, the reviewer's answer and its
//! schema, the review file the two CI stages hand over, the GitHub REST
//! client, and the plan of what `--post` sends. The CLI edge
//! (`cli::review`) runs the read-only reviewer and puts them together.

pub mod answer;
pub mod diff;
pub mod file;
pub mod github;
pub mod local;
pub mod post;
pub mod prompt;
pub mod render;
