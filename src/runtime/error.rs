//! The runtime's one error type (its own module so that the owner lock and
//! the store, which both fail with it, do not import each other).

use super::log::LogError;
use super::pending::SettleError;
use super::projection::ProjectionError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("runtime event log: {0}")]
    Projection(#[from] ProjectionError),
    #[error("no {what} `{id}`")]
    NotFound { what: &'static str, id: String },
    #[error(transparent)]
    Settle(#[from] SettleError),
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("thread `{0}` already has a turn running")]
    Busy(String),
    #[error("runtime owner lock {path}: {source}")]
    Owner {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl RuntimeError {
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        RuntimeError::Invalid {
            field: field.to_string(),
            message: message.into(),
        }
    }
}
