//! UniFFI exports (issue 4): being written.
