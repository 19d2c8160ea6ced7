//! The ratelimit server shell (work in progress).
