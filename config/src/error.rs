//! The one error type of the crate.

use std::path::PathBuf;

/// Why a configuration could not be read, parsed, validated or saved.
///
/// Every message names what is wrong and what would be right, so that the operator can fix the
/// file (or the ACLI command) without reading the source.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Reading or writing a file failed; `path` is the file (or directory) concerned.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory that could not be read or written.
        path: PathBuf,
        /// The underlying operating-system error.
        source: std::io::Error,
    },
    /// The text is not TOML, has a value of the wrong type, or has a key that does not exist.
    #[error("invalid configuration: {message}")]
    Parse {
        /// The TOML parser's message: line and column, and for an unknown key the key and the
        /// keys that are expected there.
        message: String,
    },
    /// The file is well-formed but a value breaks a rule.
    #[error("{key} = {value}: {reason} (valid: {valid})")]
    Invalid {
        /// Full dotted path of the offending key, e.g. `sip-interface[1].port`.
        key: String,
        /// The offending value, written as in TOML (strings quoted).
        value: String,
        /// What is wrong with it.
        reason: String,
        /// What would be accepted.
        valid: String,
    },
}

impl ConfigError {
    /// Builds an [`ConfigError::Invalid`] from anything printable.
    pub(crate) fn invalid(
        key: impl Into<String>,
        value: impl Into<String>,
        reason: impl Into<String>,
        valid: impl Into<String>,
    ) -> Self {
        Self::Invalid {
            key: key.into(),
            value: value.into(),
            reason: reason.into(),
            valid: valid.into(),
        }
    }

    /// Builds an [`ConfigError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

impl From<toml::de::Error> for ConfigError {
    fn from(err: toml::de::Error) -> Self {
        Self::Parse {
            message: err.to_string().trim_end().to_owned(),
        }
    }
}

/// Writes a string the way TOML (and the error messages) show it: in double quotes, escaped.
pub(crate) fn quoted(s: &str) -> String {
    format!("{s:?}")
}

/// Writes a list of names as `"a", "b"`, or `(none)` when empty.
pub(crate) fn quoted_list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let list: Vec<String> = names.into_iter().map(quoted).collect();
    if list.is_empty() {
        "(none)".to_owned()
    } else {
        list.join(", ")
    }
}
