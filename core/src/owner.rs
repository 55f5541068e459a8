//! Owner tokens: whoever presents the token is the owner.

use std::fmt;
use std::sync::{Arc, LazyLock};

use crate::error::{Error, Result};

/// Longest accepted owner token, in bytes.
pub const MAX_TOKEN_LEN: usize = 512;

/// A random id for this process instance: tokens from two processes never collide even if
/// their UUID generators were seeded alike (forked children re-seed: see [`Owner::random`]).
static PROCESS_INSTANCE: LazyLock<String> =
    LazyLock::new(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_owned());

/// Identifies one holder of a lock.
///
/// A lock taken with an owner can be released or extended by anyone presenting the same owner
/// token, in any thread, process or language (seed 000: lock and unlock may run on different
/// instances). Cloning is cheap.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    token: Arc<str>,
}

impl Owner {
    /// A fresh owner: a UUID v4 (122 random bits) followed by this process instance's id.
    pub fn random() -> Self {
        let token = format!("{}:{}", uuid::Uuid::new_v4(), *PROCESS_INSTANCE);
        Owner {
            token: token.into(),
        }
    }

    /// An owner from a token handed over by another thread, process or language.
    ///
    /// Fails with `InvalidArgument` for an empty token or one longer than [`MAX_TOKEN_LEN`] bytes.
    pub fn from_token(token: impl Into<String>) -> Result<Self> {
        let token = token.into();
        if token.is_empty() {
            return Err(Error::invalid("owner token must not be empty"));
        }
        if token.len() > MAX_TOKEN_LEN {
            return Err(Error::invalid(format!(
                "owner token is {} bytes, the limit is {MAX_TOKEN_LEN}",
                token.len()
            )));
        }
        Ok(Owner {
            token: token.into(),
        })
    }

    /// The token to hand to another holder.
    pub fn token(&self) -> &str {
        &self.token
    }

    pub(crate) fn shared_token(&self) -> Arc<str> {
        self.token.clone()
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Owner").field(&&*self.token).finish()
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_owners_differ_and_carry_a_uuid() {
        let a = Owner::random();
        let b = Owner::random();
        assert_ne!(a, b);
        let uuid_part = a.token().split(':').next().unwrap();
        assert_eq!(
            uuid::Uuid::parse_str(uuid_part).unwrap().get_version_num(),
            4
        );
    }

    #[test]
    fn from_token_checks_length() {
        assert!(matches!(
            Owner::from_token(""),
            Err(Error::InvalidArgument(_))
        ));
        assert!(Owner::from_token("x".repeat(MAX_TOKEN_LEN)).is_ok());
        assert!(matches!(
            Owner::from_token("x".repeat(MAX_TOKEN_LEN + 1)),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(Owner::from_token("tok 🔒").unwrap().token(), "tok 🔒");
    }
}
