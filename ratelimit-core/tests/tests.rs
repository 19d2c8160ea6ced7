//! Table tests from YAML fixtures (written for this project) plus property tests.

mod algorithms;
mod fixtures;
mod fuzz_corpus;
mod key_ids;
mod limits;
mod properties;
mod quota_matching;
