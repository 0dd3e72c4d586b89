//! Linux-only backends and their building blocks. Compiled on Linux only
//! (`cfg` on the `mod` line in `host/mod.rs`).

pub mod landlock;
