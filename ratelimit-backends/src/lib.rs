//! Counter stores (work in progress).
