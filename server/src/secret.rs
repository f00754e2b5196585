//! [`Secret`]: a value that is never printed. A module of its own, under every layer, so
//! that both `config` (which reads secrets) and the modules it configures (`auth`'s
//! sections) can name it.

use std::fmt;

use serde::Deserialize;

/// A value that must never be printed: `Debug` shows `"[redacted]"`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    pub fn new(v: T) -> Self {
        Secret(v)
    }
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> From<T> for Secret<T> {
    fn from(v: T) -> Self {
        Secret(v)
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"[redacted]\"")
    }
}
