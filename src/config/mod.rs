//! Configuration (being built).
pub mod error;
pub use error::ConfigError;
