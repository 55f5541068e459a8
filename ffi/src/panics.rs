//! What a caught panic said, for the adapters that turn panics into errors (a panic must never
//! unwind into a foreign caller).

use std::any::Any;

pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "panic with a non-text payload"
    }
}
