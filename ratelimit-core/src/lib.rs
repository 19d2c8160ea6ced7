//! Pure rate limit decision engine (work in progress).
