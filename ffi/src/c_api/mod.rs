//! C ABI (issue 3): being written.
