//! `NativeOwner`: an owner token plus the label stored with its holds, made once per Python
//! thread or task so that each lock call passes one number instead of two strings.
//!
//! The hot calls (acquire, release) take the owner's [`NativeOwner::id`] rather than the object:
//! each object argument costs the generated Python code one more FFI call (a handle clone,
//! ~5 µs there), a number costs nothing.

use std::sync::Arc;

use redlock_core::Owner;

use super::error::NativeError;
use super::registry::Registry;

#[derive(uniffi::Object)]
pub struct NativeOwner {
    pub(crate) owner: Owner,
    /// The thread or task name stored with each hold (acquires run on runtime threads, whose
    /// own names would say nothing).
    pub(crate) label: String,
    id: u64,
}

/// Every live `NativeOwner` by id.
pub(crate) static OWNERS: Registry<NativeOwner> = Registry::new();

impl NativeOwner {
    fn register(owner: Owner, label: String) -> Arc<Self> {
        OWNERS.register(|id| NativeOwner { owner, label, id })
    }

    /// The live owner with this id.
    pub(crate) fn by_id(id: u64) -> Result<Arc<Self>, NativeError> {
        OWNERS
            .get(id)
            .ok_or_else(|| NativeError::invalid(format!("no live owner with id {id}")))
    }
}

impl Drop for NativeOwner {
    fn drop(&mut self) {
        OWNERS.forget(self.id);
    }
}

#[uniffi::export]
impl NativeOwner {
    /// Fails with `InvalidArgument` for an empty token or one over 512 bytes.
    #[uniffi::constructor]
    pub fn new(token: String, label: String) -> Result<Arc<Self>, NativeError> {
        Ok(Self::register(Owner::from_token(token)?, label))
    }

    /// A fresh random owner (a UUID v4 plus this process instance's id).
    #[uniffi::constructor]
    pub fn random(label: String) -> Arc<Self> {
        Self::register(Owner::random(), label)
    }

    pub fn token(&self) -> String {
        self.owner.token().to_owned()
    }

    /// The number that names this owner in [`super::lock::NativeLock::acquire`] and `release`.
    pub fn id(&self) -> u64 {
        self.id
    }
}
