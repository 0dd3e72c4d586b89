//! Configuration errors that name the file, the line and the key.
//!
//! The locating helpers live in the leaf [`crate::toml_file`] (the rules
//! file of `authz` uses them too); this module adds the config's own cases.

pub use crate::toml_file::{key_at, line_col, FileError, Location};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {location}: {message}")]
    Invalid {
        file: PathBuf,
        location: Location,
        message: String,
    },
    #[error("{file}: the project override is a symlink; refusing it (a repository could point it anywhere). Replace it with a regular file or pass --no-project-config")]
    SymlinkedOverride { file: PathBuf },
    #[error("{flag}: {message}")]
    Flag { flag: String, message: String },
    /// A bad `[opensandbox]` section (the message names file, line and key).
    #[error(transparent)]
    OpenSandbox(#[from] crate::host::opensandbox::ConfigError),
}

/// Build an [`ConfigError::Invalid`] from a toml error.
pub fn from_toml(file: &Path, text: &str, err: &toml::de::Error) -> ConfigError {
    crate::toml_file::from_toml(file, text, err).into()
}

/// Build an [`ConfigError::Invalid`] for a semantic error at byte `offset`.
pub fn at(
    file: &Path,
    text: &str,
    offset: usize,
    key: &str,
    message: impl Into<String>,
) -> ConfigError {
    crate::toml_file::at(file, text, offset, key, message).into()
}

impl From<FileError> for ConfigError {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Read { file, source } => ConfigError::Read { file, source },
            FileError::Invalid {
                file,
                location,
                message,
            } => ConfigError::Invalid {
                file,
                location,
                message,
            },
        }
    }
}
