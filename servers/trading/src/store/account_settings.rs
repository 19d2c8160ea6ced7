//! Tables of the account module: settings an account changed beyond its plan.

/// Tables this module keeps (run at every start; must be idempotent).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS account_settings (
    user_id INTEGER PRIMARY KEY REFERENCES users(id),
    fields TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
);
";
