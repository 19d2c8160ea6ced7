//! Tables of the signal marketplace, competitions and the other community features.

/// Tables this module keeps (run at every start; must be idempotent). Signals, their
/// iterations and subscriptions have their own tables because the marketplace reads them
/// across accounts; the per-account rest lives in the generic `records` table.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS extras_signals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL REFERENCES users(id),
    developer_key TEXT NOT NULL,
    name TEXT NOT NULL,
    code TEXT NOT NULL,
    side TEXT NOT NULL,
    description TEXT NOT NULL,
    custom TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS extras_signals_owner ON extras_signals (user_id, id);
CREATE TABLE IF NOT EXISTS extras_iterations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    signal_id INTEGER NOT NULL,
    number INTEGER NOT NULL,
    side TEXT NOT NULL,
    opened_ms INTEGER NOT NULL,
    open_price REAL NOT NULL,
    closed_ms INTEGER,
    close_price REAL
);
CREATE INDEX IF NOT EXISTS extras_iterations_signal ON extras_iterations (signal_id, id);
CREATE TABLE IF NOT EXISTS extras_subscriptions (
    user_id INTEGER NOT NULL REFERENCES users(id),
    signal_id INTEGER NOT NULL,
    since_ms INTEGER NOT NULL,
    PRIMARY KEY (user_id, signal_id)
);
-- Ids above 1000, like every other record id of the sandbox.
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'extras_signals', 1000 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'extras_signals');
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'extras_iterations', 1000 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'extras_iterations');
";
