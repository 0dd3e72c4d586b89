//! Authorization pipeline (being built).
pub mod floor;
pub mod posture;
pub mod readonly;
pub mod shell;
pub mod unicode;
pub mod verdict;
