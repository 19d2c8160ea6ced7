//! The strategy state machine of the spec's state table (and design notes section 4), the
//! built-in algorithms the paper worker runs, and the evaluation of a strategy's
//! conditions against a book.
//!
//! [`transition`] is the only place that decides what a strategy event does: the server
//! applies the returned [`Effect`]s (cancelling orders, deleting transactions, ...) and
//! answers a [`Refusal`] as an error record. What it deliberately does not do: no storage,
//! no clock, no order matching (see [`crate::orders`]); plan limits are checked by the
//! server before it sends [`Event::Start`].

use crate::market::{Book, Side};

/// Where a strategy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not running (never started, or stopped).
    Stopped,
    /// The worker runs it on its slice delay.
    Running,
    /// Its profile was deleted; nothing applies any more.
    Deleted,
}

impl State {
    /// `running`, `stopped` or `deleted`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Stopped => "stopped",
            State::Running => "running",
            State::Deleted => "deleted",
        }
    }

    /// The inverse of [`State::as_str`] (unknown text reads as stopped).
    pub fn parse(s: &str) -> State {
        match s {
            "running" => State::Running,
            "deleted" => State::Deleted,
            _ => State::Stopped,
        }
    }
}

/// Something that happens to one strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `strategy/start`; `keys_usable` is false when an exchange key it names is missing,
    /// disabled or on another exchange.
    Start {
        /// Whether every key the strategy uses is active.
        keys_usable: bool,
    },
    /// `strategy/stop`, with or without `force`.
    Stop {
        /// Stop at once without touching the exchange.
        force: bool,
    },
    /// `strategy/soft-stop`.
    SoftStop,
    /// `strategy/stop-all-strategies`, applied to each strategy.
    StopAll {
        /// Stop at once without touching the exchange.
        force: bool,
    },
    /// `strategy/hard-reset`.
    HardReset,
    /// `strategy/delete-profile`.
    DeleteProfile,
    /// `exchange-api-keys/test` disabled a key this strategy uses.
    KeyDisabled,
    /// The plan's maximum duration elapsed while running.
    DurationElapsed,
}

/// What the server must do after a transition, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Start on a running strategy: nothing changes; the answer says so.
    AlreadyRunning,
    /// Stop on a stopped strategy: nothing changes; the answer says so.
    AlreadyStopped,
    /// Look up orders a force stop left open and record what happened to them meanwhile.
    RecheckOrders,
    /// Schedule the worker (first slice now).
    Schedule,
    /// Cancel the strategy's open orders at the simulated exchange.
    CancelOpenOrders,
    /// Leave open orders at the exchange, flagged for a later start to re-check.
    FlagOpenOrders,
    /// Recompute the profile-level overview (soft stop).
    UpdateOverview,
    /// Delete every transaction and exchange response of the strategy.
    ClearTransactions,
    /// Reset the worker's variables (slice counter, schedule) to their defaults.
    ResetVariables,
    /// Remove the strategy for good.
    DeleteStrategy,
}

/// Why an event was refused (the state is unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Hard reset or profile deletion while running: stop it first.
    Running,
    /// Start with a key that is missing or disabled.
    KeyUnusable,
    /// The strategy's profile was deleted.
    Deleted,
}

impl Refusal {
    /// The message of the error record.
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Running => "The strategy is running; stop it first.",
            Refusal::KeyUnusable => {
                "An exchange API key of this strategy is missing, disabled or on another exchange."
            }
            Refusal::Deleted => "The strategy was deleted.",
        }
    }
}

/// The next state of a strategy in `state` after `event`, with the effects to apply.
pub fn transition(state: State, event: Event) -> Result<(State, Vec<Effect>), Refusal> {
    use Effect as E;
    use State::{Deleted, Running, Stopped};
    if state == Deleted {
        return Err(Refusal::Deleted);
    }
    Ok(match (state, event) {
        (Running, Event::Start { .. }) => (Running, vec![E::AlreadyRunning]),
        (Stopped, Event::Start { keys_usable: false }) => return Err(Refusal::KeyUnusable),
        (Stopped, Event::Start { keys_usable: true }) => {
            (Running, vec![E::RecheckOrders, E::Schedule])
        }
        (Running, Event::Stop { force: true } | Event::StopAll { force: true })
        | (Running, Event::KeyDisabled) => (Stopped, vec![E::FlagOpenOrders]),
        (Running, Event::Stop { force: false } | Event::StopAll { force: false })
        | (Running, Event::DurationElapsed) => (Stopped, vec![E::CancelOpenOrders]),
        (Running, Event::SoftStop) => (Stopped, vec![E::CancelOpenOrders, E::UpdateOverview]),
        (
            Stopped,
            Event::Stop { .. }
            | Event::StopAll { .. }
            | Event::SoftStop
            | Event::KeyDisabled
            | Event::DurationElapsed,
        ) => (Stopped, vec![E::AlreadyStopped]),
        (Running, Event::HardReset | Event::DeleteProfile) => return Err(Refusal::Running),
        (Stopped, Event::HardReset) => (Stopped, vec![E::ClearTransactions, E::ResetVariables]),
        (Stopped, Event::DeleteProfile) => (
            Deleted,
            vec![E::ClearTransactions, E::ResetVariables, E::DeleteStrategy],
        ),
        (Deleted, _) => return Err(Refusal::Deleted),
    })
}

/// A built-in algorithm (`strategy/list-algorithms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Algorithm {
    /// Id that `edit-profile`'s `algorithm_id` names.
    pub id: u32,
    /// Group shown with it.
    pub group_name: &'static str,
    /// Name.
    pub name: &'static str,
    /// What one slice does, for documentation and `list-strategy-options`.
    pub description: &'static str,
}

/// The algorithms the paper worker can run.
pub const ALGORITHMS: [Algorithm; 4] = [
    Algorithm {
        id: 1,
        group_name: "Directional",
        name: "Threshold buy",
        description: "Each slice whose conditions hold sends a market buy of each executable.",
    },
    Algorithm {
        id: 2,
        group_name: "Directional",
        name: "Threshold sell",
        description: "Each slice whose conditions hold sends a market sell of each executable.",
    },
    Algorithm {
        id: 3,
        group_name: "Market making",
        name: "Spread capture",
        description: "Each slice sends, per executable, a limit buy at the reference bid minus the offset and a limit sell at the reference ask plus the offset.",
    },
    Algorithm {
        id: 4,
        group_name: "Market making",
        name: "Grid",
        description: "Slices alternate a limit buy below and a limit sell above the mid price, the offset (percent) away.",
    },
];

/// The algorithm with this id.
pub fn algorithm(id: u32) -> Option<&'static Algorithm> {
    ALGORITHMS.iter().find(|a| a.id == id)
}

/// One order a slice asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Planned {
    /// Executable row it comes from.
    pub row: usize,
    /// Buy or sell.
    pub side: Side,
    /// Limit price; `None` for a market order.
    pub price: Option<f64>,
    /// Reference price the order was priced from (the level's price, or the mid).
    pub reference: f64,
}

/// Book level named by `ob1`..`ob5` (empty means `ob1`); `None` for anything else.
pub fn level_index(offset_type: &str) -> Option<usize> {
    match offset_type {
        "" => Some(0),
        t => {
            let n: usize = t.strip_prefix("ob")?.parse().ok()?;
            (1..=crate::market::BOOK_DEPTH).contains(&n).then(|| n - 1)
        }
    }
}

/// Orders of slice number `slice` (from 0) of `algorithm` for executable `row` on `book`.
/// `offset_pct` moves limit prices away from the reference (percent); `exact` replaces the
/// computed limit price; `level` is the book level of the reference (0 = best).
pub fn plan(
    algorithm: u32,
    slice: u64,
    row: usize,
    book: &Book,
    level: usize,
    offset_pct: f64,
    exact: Option<f64>,
) -> Vec<Planned> {
    let bid = book
        .bids
        .get(level)
        .or(book.bids.last())
        .map_or(0.0, |l| l.price);
    let ask = book
        .asks
        .get(level)
        .or(book.asks.last())
        .map_or(0.0, |l| l.price);
    let limit = |side: Side, reference: f64| {
        let signed = match side {
            Side::Buy => -offset_pct,
            Side::Sell => offset_pct,
        };
        Planned {
            row,
            side,
            price: Some(exact.unwrap_or(reference * (1.0 + signed / 100.0))),
            reference,
        }
    };
    match algorithm {
        1 => vec![Planned {
            row,
            side: Side::Buy,
            price: None,
            reference: ask,
        }],
        2 => vec![Planned {
            row,
            side: Side::Sell,
            price: None,
            reference: bid,
        }],
        3 => vec![limit(Side::Buy, bid), limit(Side::Sell, ask)],
        4 => {
            let side = if slice % 2 == 0 {
                Side::Buy
            } else {
                Side::Sell
            };
            vec![limit(side, book.mid())]
        }
        _ => Vec::new(),
    }
}

/// A condition: the price at `side1` (minus the price at `side2` when given, making it a
/// spread) compared with a number, as `condition_values` spell it: `>N`, `>=N`, `<N`,
/// `<=N`, `=N` or a bare `N` (meaning `>=N`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Condition {
    /// Comparison operator.
    pub op: Op,
    /// The number compared against.
    pub value: f64,
}

/// Comparison of a [`Condition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `=` (within a millionth of the value)
    Eq,
}

impl Condition {
    /// Parses a `condition_values` entry.
    pub fn parse(text: &str) -> Option<Condition> {
        let t = text.trim();
        let (op, rest) = if let Some(r) = t.strip_prefix(">=") {
            (Op::Ge, r)
        } else if let Some(r) = t.strip_prefix("<=") {
            (Op::Le, r)
        } else if let Some(r) = t.strip_prefix('>') {
            (Op::Gt, r)
        } else if let Some(r) = t.strip_prefix('<') {
            (Op::Lt, r)
        } else if let Some(r) = t.strip_prefix('=') {
            (Op::Eq, r)
        } else {
            (Op::Ge, t)
        };
        let value: f64 = rest.trim().parse().ok()?;
        value.is_finite().then_some(Condition { op, value })
    }

    /// Whether `x` satisfies it.
    pub fn holds(&self, x: f64) -> bool {
        match self.op {
            Op::Gt => x > self.value,
            Op::Ge => x >= self.value,
            Op::Lt => x < self.value,
            Op::Le => x <= self.value,
            Op::Eq => (x - self.value).abs() <= self.value.abs() * 1e-6,
        }
    }
}

/// The price a condition level names on `book`: `bid1`..`bid5`, `ask1`..`ask5`, or `mid`
/// (also for an empty level).
pub fn level_price(book: &Book, level: &str) -> Option<f64> {
    let l = level.trim().to_ascii_lowercase();
    if l.is_empty() || l == "mid" {
        return Some(book.mid());
    }
    let (side, n) = if let Some(n) = l.strip_prefix("bid") {
        (&book.bids, n)
    } else if let Some(n) = l.strip_prefix("ask") {
        (&book.asks, n)
    } else {
        return None;
    };
    let n: usize = n.parse().ok()?;
    side.get(n.checked_sub(1)?).map(|lv| lv.price)
}

/// Shared by the `trading_strategy` fuzz target and the test replaying its corpus: the
/// user-supplied texts of a strategy (condition values, levels, states) and order matching
/// against a book, from arbitrary bytes. Nothing may panic, and matching keeps its
/// invariants.
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    // Building a market precomputes its walks; once per process keeps the fuzzer fast.
    static BOOK: std::sync::OnceLock<Book> = std::sync::OnceLock::new();
    let book = BOOK.get_or_init(|| {
        crate::market::Market::new(1)
            .book("binance-btcusdt", 1_767_225_600_000)
            .unwrap_or_else(|| unreachable!("the sandbox lists binance-btcusdt"))
    });
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        if let Some(c) = Condition::parse(line) {
            assert!(c.value.is_finite());
            if matches!(c.op, Op::Ge | Op::Le | Op::Eq) {
                assert!(c.holds(c.value), "{line:?} does not hold for its own value");
            }
        }
        let _ = State::parse(line);
        let _ = level_index(line);
        if let Some(p) = level_price(book, line) {
            assert!(p > 0.0);
        }
    }
    // Order matching with an amount and a limit taken from the first bytes.
    let number = |at: usize| -> Option<f64> {
        let bytes: [u8; 8] = data.get(at..at + 8)?.try_into().ok()?;
        let v = f64::from_le_bytes(bytes);
        (v.is_finite() && v >= 0.0).then_some(v)
    };
    let Some(amount) = number(0) else { return };
    let limit = number(8);
    let side = if data.get(16).is_some_and(|b| b & 1 == 1) {
        Side::Sell
    } else {
        Side::Buy
    };
    let fills = crate::orders::take(book, side, amount, limit);
    let s = crate::orders::summarize(amount, &fills);
    assert!(s.filled <= amount * (1.0 + 1e-9) + crate::orders::DUST);
    assert!(s.remaining >= 0.0);
    for f in &fills {
        assert!(f.qty > 0.0);
        match (side, limit) {
            (Side::Buy, Some(l)) => assert!(f.price <= l),
            (Side::Sell, Some(l)) => assert!(f.price >= l),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn table_rows() {
        assert_eq!(
            transition(State::Running, Event::Start { keys_usable: true }),
            Ok((State::Running, vec![Effect::AlreadyRunning]))
        );
        assert_eq!(
            transition(State::Running, Event::Stop { force: true }),
            Ok((State::Stopped, vec![Effect::FlagOpenOrders]))
        );
        assert_eq!(
            transition(State::Running, Event::HardReset),
            Err(Refusal::Running)
        );
        assert_eq!(
            transition(State::Stopped, Event::Start { keys_usable: false }),
            Err(Refusal::KeyUnusable)
        );
    }

    #[test]
    fn conditions_parse() {
        let c = Condition::parse(">= 10.5").unwrap();
        assert!(c.holds(10.5) && !c.holds(10.4));
        assert!(Condition::parse("5").unwrap().holds(5.0));
        assert!(Condition::parse("<x").is_none());
        assert_eq!(level_index("ob3"), Some(2));
        assert_eq!(level_index("ob6"), None);
    }

    /// A model of the server: strategies using keys, open orders, transactions.
    #[derive(Debug, Clone)]
    struct Strat {
        state: State,
        keys: Vec<usize>,
        open: u32,
        flagged: bool,
        tx: u32,
    }

    #[derive(Debug, Clone, Copy)]
    enum Op2 {
        Start(usize),
        Stop(usize, bool),
        Soft(usize),
        StopAll(bool),
        Reset(usize),
        DeleteKey(usize),
        DisableKey(usize),
        DeleteProfile(usize),
        Work,
    }

    fn op() -> impl Strategy<Value = Op2> {
        prop_oneof![
            (0..4usize).prop_map(Op2::Start),
            (0..4usize, any::<bool>()).prop_map(|(i, f)| Op2::Stop(i, f)),
            (0..4usize).prop_map(Op2::Soft),
            any::<bool>().prop_map(Op2::StopAll),
            (0..4usize).prop_map(Op2::Reset),
            (0..3usize).prop_map(Op2::DeleteKey),
            (0..3usize).prop_map(Op2::DisableKey),
            (0..4usize).prop_map(Op2::DeleteProfile),
            Just(Op2::Work),
            Just(Op2::Work),
        ]
    }

    fn apply(s: &mut Strat, effects: &[Effect]) {
        for e in effects {
            match e {
                Effect::CancelOpenOrders => s.open = 0,
                Effect::FlagOpenOrders => s.flagged = s.open > 0,
                // The re-check records what happened meanwhile: some orders filled.
                Effect::RecheckOrders => {
                    s.flagged = false;
                    s.open /= 2;
                }
                Effect::ClearTransactions => s.tx = 0,
                _ => {}
            }
        }
    }

    proptest! {
        #[test]
        fn invariants_hold_over_random_sequences(
            uses in proptest::collection::vec(proptest::collection::vec(0..3usize, 1..3), 4),
            ops in proptest::collection::vec(op(), 1..60),
        ) {
            let mut strats: Vec<Strat> = uses.into_iter().map(|keys| Strat {
                state: State::Stopped, keys, open: 0, flagged: false, tx: 0,
            }).collect();
            // true = usable; a deleted key is gone for good, a disabled one too.
            let mut keys = [true; 3];
            for o in ops {
                let before: Vec<Strat> = strats.clone();
                match o {
                    Op2::Start(i) => {
                        let usable = strats[i].keys.iter().all(|&k| keys[k]);
                        if let Ok((st, fx)) = transition(strats[i].state, Event::Start { keys_usable: usable }) {
                            apply(&mut strats[i], &fx);
                            strats[i].state = st;
                        }
                    }
                    Op2::Stop(i, force) => {
                        let was = strats[i].state;
                        if let Ok((st, fx)) = transition(was, Event::Stop { force }) {
                            apply(&mut strats[i], &fx);
                            strats[i].state = st;
                            prop_assert_eq!(st, State::Stopped);
                            // Stopping a running strategy without force leaves no open orders.
                            if !force && was == State::Running {
                                prop_assert_eq!(strats[i].open, 0);
                            }
                        }
                    }
                    Op2::Soft(i) => {
                        if let Ok((st, fx)) = transition(strats[i].state, Event::SoftStop) {
                            apply(&mut strats[i], &fx);
                            strats[i].state = st;
                        }
                    }
                    Op2::StopAll(force) => {
                        for s in strats.iter_mut() {
                            if let Ok((st, fx)) = transition(s.state, Event::StopAll { force }) {
                                apply(s, &fx);
                                s.state = st;
                            }
                        }
                        prop_assert!(strats.iter().all(|s| s.state != State::Running));
                    }
                    Op2::Reset(i) => {
                        if let Ok((st, fx)) = transition(strats[i].state, Event::HardReset) {
                            apply(&mut strats[i], &fx);
                            strats[i].state = st;
                            prop_assert_eq!(strats[i].tx, 0);
                        } else {
                            prop_assert!(strats[i].state != State::Stopped);
                        }
                    }
                    Op2::DeleteKey(k) => {
                        // The server refuses while a running strategy uses the key.
                        let in_use = strats.iter().any(|s| s.state == State::Running && s.keys.contains(&k));
                        if !in_use { keys[k] = false; }
                    }
                    Op2::DisableKey(k) => {
                        keys[k] = false;
                        for s in strats.iter_mut().filter(|s| s.keys.contains(&k)) {
                            if let Ok((st, fx)) = transition(s.state, Event::KeyDisabled) {
                                apply(s, &fx);
                                s.state = st;
                            }
                        }
                    }
                    Op2::DeleteProfile(i) => {
                        if let Ok((st, fx)) = transition(strats[i].state, Event::DeleteProfile) {
                            apply(&mut strats[i], &fx);
                            strats[i].state = st;
                            prop_assert_eq!(st, State::Deleted);
                        }
                    }
                    Op2::Work => {
                        for s in strats.iter_mut().filter(|s| s.state == State::Running) {
                            s.tx += 1;
                            s.open += 1;
                        }
                    }
                }
                for (s, b) in strats.iter().zip(&before) {
                    // No running strategy uses a deleted or disabled key.
                    if s.state == State::Running {
                        prop_assert!(s.keys.iter().all(|&k| keys[k]));
                    }
                    // Transactions grow only while running (or vanish by reset/delete).
                    if s.tx > b.tx { prop_assert_eq!(s.state, State::Running); }
                    // Deleted is final.
                    if b.state == State::Deleted { prop_assert_eq!(s.state, State::Deleted); }
                    // Flagged orders only exist while not running.
                    if s.flagged { prop_assert!(s.state != State::Running); }
                }
            }
        }
    }

    #[test]
    fn fuzz_corpus_replays() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/corpus/trading_strategy");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            super::fuzz(&std::fs::read(entry.unwrap().path()).unwrap());
            n += 1;
        }
        assert!(n >= 5, "corpus too small: {n}");
    }
}
