//! `NativeOwner`: an owner token plus the label stored with its holds, made once per Python
//! thread or task so that each lock call passes one handle instead of two strings.

use std::sync::Arc;

use redlock_core::Owner;

use super::error::NativeError;

#[derive(uniffi::Object)]
pub struct NativeOwner {
    pub(crate) owner: Owner,
    /// The thread or task name stored with each hold (acquires run on runtime threads, whose
    /// own names would say nothing).
    pub(crate) label: String,
}

#[uniffi::export]
impl NativeOwner {
    /// Fails with `InvalidArgument` for an empty token or one over 512 bytes.
    #[uniffi::constructor]
    pub fn new(token: String, label: String) -> Result<Arc<Self>, NativeError> {
        Ok(Arc::new(NativeOwner {
            owner: Owner::from_token(token)?,
            label,
        }))
    }

    /// A fresh random owner (a UUID v4 plus this process instance's id).
    #[uniffi::constructor]
    pub fn random(label: String) -> Arc<Self> {
        Arc::new(NativeOwner {
            owner: Owner::random(),
            label,
        })
    }

    pub fn token(&self) -> String {
        self.owner.token().to_owned()
    }
}
